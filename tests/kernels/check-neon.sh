#!/bin/sh
# check-neon.sh - type-checks the kernel files as AArch64 code with clang
# (-fsyntax-only, the project's warning flags), so NEON paths that cannot
# run on an x86 machine still compile cleanly. Needs clang; x86 glibc
# headers stand in for AArch64 ones (gnu/stubs-32.h is missing, and an
# empty stand-in is made for it; bits/wordsize.h is replaced so the word
# size is 64 bits, as on AArch64).
set -eu
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
STUBS=$(mktemp -d)
trap 'rm -rf "$STUBS"' EXIT
mkdir -p "$STUBS/gnu" "$STUBS/bits"
: > "$STUBS/gnu/stubs-32.h"
# The x86 headers decide the word size from __x86_64__; AArch64 is LP64 too.
cat > "$STUBS/bits/wordsize.h" <<'EOS'
#define __WORDSIZE 64
#define __WORDSIZE_TIME64_COMPAT32 1
#define __SYSCALL_WORDSIZE 64
EOS
status=0
for f in "$ROOT"/src/kernels/*.c; do
  case "$f" in *-avx2.c|*-avx512.c|*-avx512vbmi.c) continue ;; esac
  # The kernel table has no ISA code, and its pthread.h cannot be read as
  # AArch64 through the x86 headers (regparm attributes).
  case "$f" in */kernel-table.c) continue ;; esac
  if ! clang --target=aarch64-linux-gnu -march=armv8.2-a -fsyntax-only -std=c11 -D_POSIX_C_SOURCE=200809L \
      -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wmissing-prototypes -Wformat=2 -Wundef -Wvla \
      -Wpointer-arith -I"$ROOT/src" -I"$ROOT/include" -isystem "$STUBS" -isystem /usr/include \
      -isystem /usr/include/x86_64-linux-gnu "$f"; then
    echo "FAIL $f"
    status=1
  fi
done
[ $status -eq 0 ] && echo "aarch64 type-check: ok"
exit $status
