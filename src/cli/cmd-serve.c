/* cmd-serve.c - `edgerun serve`: options in, the service (src/serve) runs. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "cli/cli.h"
#include "serve/serve.h"

#define DEFAULT_PORT 8080
#define MAX_KEY_BYTES 512

void er_cmd_serve_help(FILE *out) {
  fprintf(out,
          "usage: edgerun serve --repo DIR [options]\n\n"
          "Serves the models of a repository over HTTP/1.1: ONNX models with the KServe v2\n"
          "protocol, GGUF language models with OpenAI-compatible /v1/chat/completions,\n"
          "/v1/completions (streamed or not), /v1/models, /tokenize and /detokenize:\n"
          "  DIR/<model>/config.json         optional settings (see docs/operations.md)\n"
          "  DIR/<model>/<version>/model.onnx or model.gguf\n\n"
          "network and security:\n"
          "  --listen HOST:PORT        address to bind (default 127.0.0.1:%d; [::1]:PORT for IPv6)\n"
          "  --allow CIDR              clients allowed besides loopback (repeatable); required\n"
          "                            for a non-loopback --listen\n"
          "  --api-key KEY             require 'Authorization: Bearer KEY' (all but liveness)\n"
          "  --api-key-file FILE       the same, key read from FILE (keeps it out of ps)\n"
          "  --user NAME               drop to this user after binding\n"
          "  --require-signed          load only model files with a valid FILE.sig\n"
          "  --trusted-key FILE        public key from `edgerun keygen` (repeatable)\n"
          "limits:\n"
          "  --max-body-bytes N        request body cap (default 67108864)\n"
          "  --max-json-bytes N        JSON part cap (default 4194304)\n"
          "  --header-timeout-ms N     connection start to complete headers (default 10000)\n"
          "  --body-timeout-ms N       headers to complete body (default 30000)\n"
          "  --max-connections N       open connections (default 256)\n"
          "  --http-threads N          HTTP threads (default 2)\n"
          "lifecycle and logs:\n"
          "  --poll-seconds N          rescan the repository every N s (default 10; 0 = SIGHUP only)\n"
          "  --drain-timeout-seconds N longest wait for in-flight requests at SIGTERM (default 30)\n"
          "  --log-dir DIR             JSON logs in DIR/edgerun.log (default: stderr)\n"
          "  --log-max-bytes N         rotate at N bytes (default 10485760)\n"
          "  --log-keep N              rotated files kept (default 5)\n"
          "  --log-level L             debug, info, warn or error (default info)\n"
          "  --access-log              log every request\n"
          "device care:\n"
          "  --thermal-dir DIR         thermal zones folder (default /sys/class/thermal)\n"
          "  --thermal-limit C         above C degrees halve concurrency and batch (default 85)\n"
          "  --thermal-resume C        restore below C degrees (default limit - 5)\n",
          DEFAULT_PORT);
}

static bool parse_u64(const char *s, uint64_t lo, uint64_t hi, uint64_t *out) {
  char *end;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 10);
  if (errno || end == s || *end || s[0] == '-' || v < lo || v > hi) return false;
  *out = v;
  return true;
}

static bool parse_cidr(const char *s, er__cidr *c) {
  char buf[80];
  snprintf(buf, sizeof buf, "%s", s);
  char *slash = strchr(buf, '/');
  int max_bits;
  if (slash) *slash = '\0';
  memset(c, 0, sizeof *c);
  if (inet_pton(AF_INET, buf, c->addr) == 1) {
    c->family = AF_INET;
    max_bits = 32;
  } else if (inet_pton(AF_INET6, buf, c->addr) == 1) {
    c->family = AF_INET6;
    max_bits = 128;
  } else {
    return false;
  }
  c->bits = max_bits;
  if (slash) {
    int bits;
    if (!er_cli_parse_int(slash + 1, &bits) || bits > max_bits) return false;
    c->bits = bits;
  }
  return true;
}

static bool parse_listen(const char *s, er__serve_options *o) {
  const char *colon;
  size_t hl;
  if (s[0] == '[') {
    const char *end = strchr(s, ']');
    if (!end || end[1] != ':') return false;
    hl = (size_t)(end - s - 1);
    if (hl >= sizeof o->host) return false;
    memcpy(o->host, s + 1, hl);
    o->host[hl] = '\0';
    colon = end + 1;
  } else {
    colon = strrchr(s, ':');
    if (!colon) return false;
    hl = (size_t)(colon - s);
    if (hl == 0 || hl >= sizeof o->host) return false;
    memcpy(o->host, s, hl);
    o->host[hl] = '\0';
  }
  int port;
  if (!er_cli_parse_int(colon + 1, &port) || port > 65535) return false;
  o->port = port;
  return true;
}

static char *read_key_file(const char *path) {
  char buf[MAX_KEY_BYTES + 2];
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return NULL;
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0 || n > MAX_KEY_BYTES) return NULL;
  buf[n] = '\0';
  buf[strcspn(buf, "\r\n")] = '\0';
  return buf[0] ? strdup(buf) : NULL;
}

/* The service's defaults, before the command line. */
static void default_options(er__serve_options *o) {
  memset(o, 0, sizeof *o);
  snprintf(o->host, sizeof o->host, "127.0.0.1");
  o->port = DEFAULT_PORT;
  o->max_body_bytes = 64u << 20;
  o->max_json_bytes = 4u << 20;
  o->header_timeout_ms = 10000;
  o->body_timeout_ms = 30000;
  o->max_connections = 256;
  o->http_threads = 2;
  o->poll_s = 10;
  o->drain_timeout_s = 30;
  o->log_max_bytes = 10u << 20;
  o->log_keep = 5;
  o->log_level = ER__LOG_INFO;
  o->thermal_dir = "/sys/class/thermal";
  o->thermal_limit_c = 85;
  o->thermal_resume_c = -1;
}

int er_cmd_serve(int argc, char **argv) {
#ifdef __GLIBC__
  /* glibc gives each new thread that allocates its own malloc arena; with a
   * thread per connection that makes RSS climb with every new peak of
   * concurrency. A few shared arenas keep a long-running service's memory
   * flat and predictable at a negligible cost in contention. */
  mallopt(M_ARENA_MAX, 4);
#endif
  static er__serve_options o;
  default_options(&o);
  uint64_t v;
  double d;
  int rc = 1;

#define NEED_ARG()                                                  \
  do {                                                              \
    if (++i >= argc) {                                              \
      er_cli_fail("serve", "%s needs a value", a);                  \
      goto out;                                                     \
    }                                                               \
  } while (0)
#define BAD(what)                                                   \
  do {                                                              \
    er_cli_fail("serve", "%s %s: %s", a, argv[i], what);            \
    goto out;                                                       \
  } while (0)

  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (strcmp(a, "--repo") == 0) {
      NEED_ARG();
      o.repo = argv[i];
    } else if (strcmp(a, "--listen") == 0) {
      NEED_ARG();
      if (!parse_listen(argv[i], &o)) BAD("expected HOST:PORT or [IPV6]:PORT");
    } else if (strcmp(a, "--allow") == 0) {
      NEED_ARG();
      if (o.n_allow == ER_SERVE_MAX_ALLOW) BAD("too many --allow entries (ER_SERVE_MAX_ALLOW)");
      if (!parse_cidr(argv[i], &o.allow[o.n_allow++])) BAD("expected ADDRESS[/BITS]");
    } else if (strcmp(a, "--api-key") == 0) {
      NEED_ARG();
      if (!argv[i][0] || strlen(argv[i]) > MAX_KEY_BYTES) BAD("key must be 1-512 bytes");
      free(o.api_key);
      o.api_key = strdup(argv[i]);
    } else if (strcmp(a, "--api-key-file") == 0) {
      NEED_ARG();
      free(o.api_key);
      o.api_key = read_key_file(argv[i]);
      if (!o.api_key) BAD("cannot read a 1-512 byte key from the file");
    } else if (strcmp(a, "--user") == 0) {
      NEED_ARG();
      o.user = argv[i];
    } else if (strcmp(a, "--require-signed") == 0) {
      o.require_signed = true;
    } else if (strcmp(a, "--trusted-key") == 0) {
      char err[ER_SERVE_ERR];
      NEED_ARG();
      if (o.n_keys == ER_SERVE_MAX_KEYS) BAD("too many keys (ER_SERVE_MAX_KEYS)");
      if (!er__sign_load_public(argv[i], o.keys[o.n_keys], err, sizeof err)) BAD(err);
      o.n_keys++;
    } else if (strcmp(a, "--max-body-bytes") == 0) {
      NEED_ARG();
      if (!parse_u64(argv[i], 1024, 1ull << 32, &o.max_body_bytes)) BAD("expected 1024..4 GiB");
    } else if (strcmp(a, "--max-json-bytes") == 0) {
      NEED_ARG();
      if (!parse_u64(argv[i], 1024, 1ull << 30, &o.max_json_bytes)) BAD("expected 1024..1 GiB");
    } else if (strcmp(a, "--header-timeout-ms") == 0 || strcmp(a, "--body-timeout-ms") == 0) {
      NEED_ARG();
      if (!parse_u64(argv[i], 100, 3600000, &v)) BAD("expected 100..3600000");
      if (a[2] == 'h') o.header_timeout_ms = (int)v;
      else o.body_timeout_ms = (int)v;
    } else if (strcmp(a, "--max-connections") == 0) {
      NEED_ARG();
      if (!parse_u64(argv[i], 1, 100000, &v)) BAD("expected 1..100000");
      o.max_connections = (int)v;
    } else if (strcmp(a, "--http-threads") == 0) {
      NEED_ARG();
      if (!parse_u64(argv[i], 1, 64, &v)) BAD("expected 1..64");
      o.http_threads = (int)v;
    } else if (strcmp(a, "--poll-seconds") == 0) {
      NEED_ARG();
      if (!parse_u64(argv[i], 0, 86400, &v)) BAD("expected 0..86400");
      o.poll_s = (int)v;
    } else if (strcmp(a, "--drain-timeout-seconds") == 0) {
      NEED_ARG();
      if (!parse_u64(argv[i], 0, 3600, &v)) BAD("expected 0..3600");
      o.drain_timeout_s = (int)v;
    } else if (strcmp(a, "--log-dir") == 0) {
      NEED_ARG();
      o.log_dir = argv[i];
    } else if (strcmp(a, "--log-max-bytes") == 0) {
      NEED_ARG();
      if (!parse_u64(argv[i], 4096, 1ull << 40, &o.log_max_bytes)) BAD("expected at least 4096");
    } else if (strcmp(a, "--log-keep") == 0) {
      NEED_ARG();
      if (!parse_u64(argv[i], 0, 100, &v)) BAD("expected 0..100");
      o.log_keep = (int)v;
    } else if (strcmp(a, "--log-level") == 0) {
      NEED_ARG();
      static const char *lv[] = {"debug", "info", "warn", "error"};
      int k = 0;
      while (k < 4 && strcmp(argv[i], lv[k]) != 0) k++;
      if (k == 4) BAD("expected debug, info, warn or error");
      o.log_level = k;
    } else if (strcmp(a, "--access-log") == 0) {
      o.access_log = true;
    } else if (strcmp(a, "--thermal-dir") == 0) {
      NEED_ARG();
      o.thermal_dir = argv[i];
    } else if (strcmp(a, "--thermal-limit") == 0 || strcmp(a, "--thermal-resume") == 0) {
      NEED_ARG();
      if (!er_cli_parse_double(argv[i], &d) || d > 200) BAD("expected degrees C in 0..200");
      if (strcmp(a, "--thermal-limit") == 0) o.thermal_limit_c = d;
      else o.thermal_resume_c = d;
    } else {
      er_cli_fail("serve", "unknown option '%s' (see edgerun serve --help)", a);
      goto out;
    }
  }
  if (!o.repo) {
    er_cli_fail("serve", "--repo DIR is required (see edgerun serve --help)");
    goto out;
  }
  if (o.require_signed && o.n_keys == 0) {
    er_cli_fail("serve", "--require-signed needs at least one --trusted-key FILE");
    goto out;
  }
  if (o.thermal_resume_c < 0) o.thermal_resume_c = o.thermal_limit_c - 5;
  if (o.thermal_resume_c > o.thermal_limit_c) {
    er_cli_fail("serve", "--thermal-resume %.1f is above --thermal-limit %.1f",
                o.thermal_resume_c, o.thermal_limit_c);
    goto out;
  }
  rc = er__serve_main(&o);
out:
  if (o.api_key) {
    memset(o.api_key, 0, strlen(o.api_key));
    free(o.api_key);
  }
  return rc;
#undef NEED_ARG
#undef BAD
}
