/* sign.c - Ed25519 signatures over model files (libsodium).
 *
 * Files are signed with Ed25519ph (the pre-hashed variant, SHA-512 of the
 * whole file) so a multi-gigabyte model is hashed in a stream rather than
 * held in memory twice. A signature lives next to its file as FILE.sig. The
 * key and signature files are one line of text each, with a tag that says
 * what they are, so a public key can never be mistaken for a secret one. */
#include <errno.h>
#include <fcntl.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "serve.h"

#define TAG_PUBLIC "edgerun-ed25519-public"
#define TAG_SECRET "edgerun-ed25519-secret"
#define TAG_SIG "edgerun-ed25519ph-signature"
#define KEYFILE_MAX 512              /* bytes of a key or signature file */
#define SIGN_CHUNK (1u << 20)        /* bytes hashed per read */

static bool sodium_ready(char *err, size_t errsz) {
  if (sodium_init() < 0) {
    snprintf(err, errsz, "libsodium failed to initialise");
    return false;
  }
  return true;
}

/* Writes "TAG base64\n" to path with the given mode, through a temporary
 * file and rename so a reader never sees half a key. */
static bool write_tagged(const char *path, const char *tag, const unsigned char *bin, size_t n,
                         mode_t mode, bool exclusive, char *err, size_t errsz) {
  char b64[KEYFILE_MAX], tmp[4200];
  sodium_bin2base64(b64, sizeof b64, bin, n, sodium_base64_VARIANT_ORIGINAL);
  if (exclusive && access(path, F_OK) == 0) {
    snprintf(err, errsz, "%s already exists; refusing to overwrite a key", path);
    return false;
  }
  snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
  int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
  if (fd < 0) {
    snprintf(err, errsz, "cannot create %s: %s", tmp, strerror(errno));
    return false;
  }
  char line[KEYFILE_MAX + 64];
  int len = snprintf(line, sizeof line, "%s %s\n", tag, b64);
  bool ok = write(fd, line, (size_t)len) == len && fsync(fd) == 0;
  ok = close(fd) == 0 && ok;
  if (!ok || rename(tmp, path) != 0) {
    snprintf(err, errsz, "cannot write %s: %s", path, strerror(errno));
    unlink(tmp);
    return false;
  }
  return true;
}

static bool read_tagged(const char *path, const char *tag, unsigned char *bin, size_t n,
                        char *err, size_t errsz) {
  char buf[KEYFILE_MAX + 64];
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    snprintf(err, errsz, "cannot open %s: %s", path, strerror(errno));
    return false;
  }
  ssize_t got = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (got <= 0) {
    snprintf(err, errsz, "%s is empty or unreadable", path);
    return false;
  }
  buf[got] = '\0';
  size_t tl = strlen(tag);
  if (strncmp(buf, tag, tl) != 0 || buf[tl] != ' ') {
    snprintf(err, errsz, "%s does not start with '%s'", path, tag);
    return false;
  }
  char *b64 = buf + tl + 1;
  b64[strcspn(b64, "\r\n")] = '\0';
  size_t out_len = 0;
  if (sodium_base642bin(bin, n, b64, strlen(b64), NULL, &out_len, NULL,
                        sodium_base64_VARIANT_ORIGINAL) != 0 || out_len != n) {
    snprintf(err, errsz, "%s: the key or signature is not %zu bytes of base64", path, n);
    return false;
  }
  return true;
}

bool er__sign_keygen(const char *secret_path, const char *public_path, char *err, size_t errsz) {
  unsigned char pk[crypto_sign_PUBLICKEYBYTES], sk[crypto_sign_SECRETKEYBYTES];
  if (!sodium_ready(err, errsz)) return false;
  crypto_sign_keypair(pk, sk);
  bool ok = write_tagged(secret_path, TAG_SECRET, sk, sizeof sk, 0600, true, err, errsz) &&
            write_tagged(public_path, TAG_PUBLIC, pk, sizeof pk, 0644, true, err, errsz);
  sodium_memzero(sk, sizeof sk);
  return ok;
}

bool er__sign_load_public(const char *path, unsigned char key_out[32], char *err, size_t errsz) {
  return sodium_ready(err, errsz) && read_tagged(path, TAG_PUBLIC, key_out, 32, err, errsz);
}

/* Hashes the whole file into the signature state. */
static bool hash_file(crypto_sign_state *st, const char *file, char *err, size_t errsz) {
  int fd = open(file, O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    snprintf(err, errsz, "cannot open %s: %s", file, strerror(errno));
    return false;
  }
  unsigned char *buf = malloc(SIGN_CHUNK);
  bool ok = buf != NULL;
  for (ssize_t got; ok && (got = read(fd, buf, SIGN_CHUNK)) != 0;) {
    if (got < 0) {
      if (errno == EINTR) continue;
      snprintf(err, errsz, "cannot read %s: %s", file, strerror(errno));
      ok = false;
      break;
    }
    crypto_sign_update(st, buf, (unsigned long long)got);
  }
  if (!buf) snprintf(err, errsz, "out of memory hashing %s", file);
  free(buf);
  close(fd);
  return ok;
}

bool er__sign_file(const char *secret_key_path, const char *file, char *err, size_t errsz) {
  unsigned char sk[crypto_sign_SECRETKEYBYTES], sig[crypto_sign_BYTES];
  char sig_path[4200];
  if (!sodium_ready(err, errsz) ||
      !read_tagged(secret_key_path, TAG_SECRET, sk, sizeof sk, err, errsz))
    return false;
  crypto_sign_state st;
  crypto_sign_init(&st);
  bool ok = hash_file(&st, file, err, errsz);
  if (ok) {
    crypto_sign_final_create(&st, sig, NULL, sk);
    snprintf(sig_path, sizeof sig_path, "%s%s", file, ER_SIGN_SUFFIX);
    ok = write_tagged(sig_path, TAG_SIG, sig, sizeof sig, 0644, false, err, errsz);
  }
  sodium_memzero(sk, sizeof sk);
  return ok;
}

bool er__sign_verify_bytes(const unsigned char (*keys)[32], int n_keys, const void *data,
                           size_t size, const char *sig_path, char *err, size_t errsz) {
  unsigned char sig[crypto_sign_BYTES];
  if (!sodium_ready(err, errsz)) return false;
  if (n_keys <= 0) {
    snprintf(err, errsz, "no trusted public key to verify %s with", sig_path);
    return false;
  }
  if (access(sig_path, F_OK) != 0) {
    snprintf(err, errsz, "no signature: %s is missing and --require-signed is on", sig_path);
    return false;
  }
  if (!read_tagged(sig_path, TAG_SIG, sig, sizeof sig, err, errsz)) return false;
  for (int k = 0; k < n_keys; k++) {
    crypto_sign_state st;
    crypto_sign_init(&st);
    crypto_sign_update(&st, data, size);
    if (crypto_sign_final_verify(&st, sig, keys[k]) == 0) return true;
  }
  snprintf(err, errsz, "signature %s does not match the file under any trusted key", sig_path);
  return false;
}

bool er__sign_verify_file(const unsigned char (*keys)[32], int n_keys, const char *file,
                          char *err, size_t errsz) {
  unsigned char sig[crypto_sign_BYTES];
  char sig_path[4200];
  if (!sodium_ready(err, errsz)) return false;
  snprintf(sig_path, sizeof sig_path, "%s%s", file, ER_SIGN_SUFFIX);
  if (!read_tagged(sig_path, TAG_SIG, sig, sizeof sig, err, errsz)) return false;
  for (int k = 0; k < n_keys; k++) {
    crypto_sign_state st;
    crypto_sign_init(&st);
    if (!hash_file(&st, file, err, errsz)) return false;
    if (crypto_sign_final_verify(&st, sig, keys[k]) == 0) return true;
  }
  snprintf(err, errsz, "signature %s does not match the file under any trusted key", sig_path);
  return false;
}
