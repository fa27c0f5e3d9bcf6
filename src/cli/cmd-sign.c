/* cmd-sign.c - `edgerun keygen`, `edgerun sign`, `edgerun verify`: Ed25519
 * signatures over model files, checked by `edgerun serve --require-signed`. */
#include <string.h>

#include "cli/cli.h"
#include "serve/serve.h"

void er_cmd_keygen_help(FILE *out) {
  fprintf(out,
          "usage: edgerun keygen [--out PREFIX]\n\n"
          "Creates an Ed25519 key pair: PREFIX.key (secret, mode 0600) and PREFIX.pub\n"
          "(public, for `edgerun serve --trusted-key`). PREFIX defaults to 'edgerun'.\n"
          "Existing files are never overwritten.\n");
}

void er_cmd_sign_help(FILE *out) {
  fprintf(out,
          "usage: edgerun sign --key SECRET.key FILE...\n\n"
          "Signs each FILE (a model.onnx, or an external-data file next to it) and\n"
          "writes FILE.sig beside it.\n");
}

void er_cmd_verify_help(FILE *out) {
  fprintf(out,
          "usage: edgerun verify --key PUBLIC.pub [--key ...] FILE...\n\n"
          "Checks FILE.sig for each FILE against the public keys; exits non-zero if any\n"
          "file is unsigned, altered, or signed by another key.\n");
}

int er_cmd_keygen(int argc, char **argv) {
  const char *prefix = "edgerun";
  char err[ER_SERVE_ERR], sk[4096], pk[4096];
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--out") == 0 && i + 1 < argc) prefix = argv[++i];
    else return er_cli_fail("keygen", "unknown option '%s'", argv[i]);
  }
  snprintf(sk, sizeof sk, "%s.key", prefix);
  snprintf(pk, sizeof pk, "%s.pub", prefix);
  if (!er__sign_keygen(sk, pk, err, sizeof err)) return er_cli_fail("keygen", "%s", err);
  printf("secret key: %s (keep it off the device)\npublic key: %s\n", sk, pk);
  return 0;
}

int er_cmd_sign(int argc, char **argv) {
  const char *key = NULL;
  char err[ER_SERVE_ERR];
  int files = 0;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--key") == 0) {
      if (++i >= argc) return er_cli_fail("sign", "--key needs a file");
      key = argv[i];
    }
  }
  if (!key) return er_cli_fail("sign", "--key SECRET.key is required");
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--key") == 0) {
      i++;
      continue;
    }
    if (!er__sign_file(key, argv[i], err, sizeof err)) return er_cli_fail("sign", "%s", err);
    printf("signed %s -> %s%s\n", argv[i], argv[i], ER_SIGN_SUFFIX);
    files++;
  }
  if (!files) return er_cli_fail("sign", "no FILE to sign");
  return 0;
}

int er_cmd_verify(int argc, char **argv) {
  unsigned char keys[ER_SERVE_MAX_KEYS][32];
  int n_keys = 0, files = 0, bad = 0;
  char err[ER_SERVE_ERR];
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--key") == 0) {
      if (++i >= argc) return er_cli_fail("verify", "--key needs a file");
      if (n_keys == ER_SERVE_MAX_KEYS) return er_cli_fail("verify", "more than %d keys",
                                                          ER_SERVE_MAX_KEYS);
      if (!er__sign_load_public(argv[i], keys[n_keys], err, sizeof err))
        return er_cli_fail("verify", "%s", err);
      n_keys++;
    }
  }
  if (!n_keys) return er_cli_fail("verify", "--key PUBLIC.pub is required");
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--key") == 0) {
      i++;
      continue;
    }
    files++;
    if (er__sign_verify_file((const unsigned char(*)[32])keys, n_keys, argv[i], err, sizeof err)) {
      printf("%s: OK\n", argv[i]);
    } else {
      printf("%s: FAILED: %s\n", argv[i], err);
      bad++;
    }
  }
  if (!files) return er_cli_fail("verify", "no FILE to verify");
  return bad ? 1 : 0;
}
