/* cmd-repo.c - `edgerun repo`: version operations on a model repository.
 *
 * `rollback` pins a model to the version before the one being served by
 * writing "version_policy": {"specific": [N]} into its config.json (through
 * a temporary file and rename, other keys kept). The service picks it up at
 * its next poll or on SIGHUP; a version that fails to load is never served,
 * so rollback checks the target loads before pinning it. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "serve/serve.h"

void er_cmd_repo_help(FILE *out) {
  fprintf(out,
          "usage: edgerun repo rollback REPO MODEL [--to VERSION]\n"
          "       edgerun repo pin REPO MODEL VERSION\n"
          "       edgerun repo unpin REPO MODEL\n"
          "       edgerun repo list REPO MODEL\n\n"
          "rollback  pins MODEL to the newest version below the one served now (the\n"
          "          newest that loads, or the current pin), or to --to VERSION\n"
          "pin       pins MODEL to VERSION; unpin returns it to the latest version\n"
          "list      shows each version and whether it loads, with the reason if not\n\n"
          "A running `edgerun serve` applies the change at its next poll or on SIGHUP\n"
          "(systemctl reload edgerun). Versions are checked by loading them, with the\n"
          "model's config.json settings; add --trusted-key FILE to also check signatures.\n");
}

static bool loads(const char *repo, const char *model, int64_t v, const er__model_config *cfg,
                  const er__serve_options *opt, char *err, size_t errsz) {
  er__version *ver = er__version_load(repo, model, v, cfg, opt, NULL, NULL, err, errsz);
  if (!ver) return false;
  er__version_unref(ver);
  return true;
}

/* Rewrites config.json with a new version_policy, keeping its other keys. */
static int write_policy(const char *repo, const char *model, json_t *policy) {
  char path[4200], tmp[4300];
  json_error_t je;
  snprintf(path, sizeof path, "%s/%s/config.json", repo, model);
  json_t *root = json_load_file(path, JSON_REJECT_DUPLICATES, &je);
  if (!root && access(path, F_OK) == 0) {
    json_decref(policy);
    return er_cli_fail("repo", "%s: %s", path, je.text);
  }
  if (!root) root = json_object();
  json_object_set_new(root, "version_policy", policy);
  snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
  int rc = json_dump_file(root, tmp, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
  json_decref(root);
  if (rc != 0 || rename(tmp, path) != 0) {
    unlink(tmp);
    return er_cli_fail("repo", "cannot write %s: %s", path, strerror(errno));
  }
  return 0;
}

int er_cmd_repo(int argc, char **argv) {
  static er__serve_options opt;
  const char *pos[4];
  int n_pos = 0;
  int64_t to = 0;
  char err[ER_SERVE_ERR];
  memset(&opt, 0, sizeof opt);
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--to") == 0 && i + 1 < argc) {
      to = strtoll(argv[++i], NULL, 10);
      if (to <= 0) return er_cli_fail("repo", "--to needs a positive version number");
    } else if (strcmp(argv[i], "--trusted-key") == 0 && i + 1 < argc) {
      if (opt.n_keys == ER_SERVE_MAX_KEYS) return er_cli_fail("repo", "too many keys");
      if (!er__sign_load_public(argv[++i], opt.keys[opt.n_keys], err, sizeof err))
        return er_cli_fail("repo", "%s", err);
      opt.n_keys++;
      opt.require_signed = true;
    } else if (argv[i][0] == '-') {
      return er_cli_fail("repo", "unknown option '%s'", argv[i]);
    } else if (n_pos < 4) {
      pos[n_pos++] = argv[i];
    } else {
      return er_cli_fail("repo", "too many arguments");
    }
  }
  if (n_pos < 3) return er_cli_fail("repo", "usage: edgerun repo rollback|pin|unpin|list REPO MODEL");
  const char *verb = pos[0], *repo = pos[1], *model = pos[2];
  if (!er__valid_name(model)) return er_cli_fail("repo", "'%s' is not a valid model name", model);
  er__model_config cfg;
  int64_t stamp, versions[ER_SERVE_MAX_VERSIONS];
  if (!er__config_read(repo, model, &cfg, &stamp, err, sizeof err))
    return er_cli_fail("repo", "%s", err);
  int n = er__repo_versions(repo, model, versions, ER_SERVE_MAX_VERSIONS);
  if (n == 0) return er_cli_fail("repo", "%s/%s has no version folder with a model.onnx or model.gguf", repo, model);

  if (strcmp(verb, "list") == 0) {
    for (int i = 0; i < n; i++) {
      bool ok = loads(repo, model, versions[i], &cfg, &opt, err, sizeof err);
      bool pinned = cfg.policy == ER__POLICY_SPECIFIC && cfg.n_specific == 1 &&
                    cfg.specific[0] == versions[i];
      printf("%s version %lld: %s%s%s\n", model, (long long)versions[i], ok ? "loads" : "FAILS: ",
             ok ? "" : err, pinned ? " (pinned)" : "");
    }
    return 0;
  }
  if (strcmp(verb, "unpin") == 0) {
    int rc = write_policy(repo, model, json_pack("{s:i}", "latest", 1));
    if (!rc) printf("%s: back to the latest version that loads\n", model);
    return rc;
  }
  if (strcmp(verb, "pin") == 0) {
    if (n_pos != 4) return er_cli_fail("repo", "pin needs a VERSION");
    to = strtoll(pos[3], NULL, 10);
    if (to <= 0) return er_cli_fail("repo", "VERSION must be a positive integer");
  } else if (strcmp(verb, "rollback") != 0) {
    return er_cli_fail("repo", "unknown action '%s' (rollback, pin, unpin, list)", verb);
  }
  if (!to) {
    /* What is served now: the pinned version, else the newest that loads. */
    int64_t current = 0;
    if (cfg.policy == ER__POLICY_SPECIFIC && cfg.n_specific == 1) current = cfg.specific[0];
    for (int i = 0; !current && i < n; i++)
      if (loads(repo, model, versions[i], &cfg, &opt, err, sizeof err)) current = versions[i];
    if (!current) return er_cli_fail("repo", "no version of %s loads; nothing to roll back from",
                                     model);
    for (int i = 0; !to && i < n; i++)
      if (versions[i] < current && loads(repo, model, versions[i], &cfg, &opt, err, sizeof err))
        to = versions[i];
    if (!to) return er_cli_fail("repo", "no version of %s below %lld loads", model,
                                (long long)current);
    printf("%s: serving %lld now; rolling back to %lld\n", model, (long long)current,
           (long long)to);
  }
  bool present = false;
  for (int i = 0; i < n; i++) present |= versions[i] == to;
  if (!present) return er_cli_fail("repo", "%s has no version %lld", model, (long long)to);
  if (!loads(repo, model, to, &cfg, &opt, err, sizeof err))
    return er_cli_fail("repo", "version %lld does not load: %s", (long long)to, err);
  int rc = write_policy(repo, model, json_pack("{s:[I]}", "specific", (json_int_t)to));
  if (!rc)
    printf("%s: pinned to version %lld in config.json; a running service applies it at its "
           "next poll or on SIGHUP\n", model, (long long)to);
  return rc;
}
