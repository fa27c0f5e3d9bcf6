#!/usr/bin/env bash
# Checks deploy/edgerun.service: `systemd-analyze verify` must pass with no
# warning (an unknown or misspelled key is only a warning there, so any
# output fails), and the hardening the service relies on must be present.
# Usage: check_unit.sh EDGERUN_BINARY
set -euo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
unit=$here/deploy/edgerun.service
bin=$(realpath "$1")
if ! command -v systemd-analyze >/dev/null; then
  echo "systemd-analyze is missing (scripts/setup.sh installs the systemd package)"
  exit 1
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# verify insists the ExecStart binary exists: point it at the build's.
sed "s|/usr/local/bin/edgerun|$bin|" "$unit" > "$work/edgerun.service"
out=$(systemd-analyze verify "$work/edgerun.service" 2>&1) || { echo "$out"; exit 1; }
if [ -n "$out" ]; then
  echo "systemd-analyze verify warned:"; echo "$out"; exit 1
fi
for key in "NoNewPrivileges=yes" "ProtectSystem=strict" "ReadOnlyPaths=/srv/edgerun/models" \
           "StateDirectory=edgerun" "LogsDirectory=edgerun" "DynamicUser=yes" \
           "ExecReload=/bin/kill -HUP \$MAINPID" "KillSignal=SIGTERM"; do
  grep -qxF "$key" "$unit" || { echo "edgerun.service lacks '$key'"; exit 1; }
done
echo "edgerun.service: systemd-analyze verify clean; hardening present"
