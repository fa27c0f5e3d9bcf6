/* http.c - the HTTP/1.1 front of the service on libmicrohttpd.
 *
 * libmicrohttpd parses HTTP; this file decides what each request may do.
 * Every request passes, in order: the accept policy (loopback or an --allow
 * CIDR), the Host check (loopback servers answer only loopback names, so a
 * DNS-rebinding page cannot reach them), the API key (all but liveness),
 * the encoding and size checks, then routing. Inference requests suspend
 * their connection while a model worker runs them, so a small pool of HTTP
 * threads serves any number of waiting clients.
 *
 * Slow clients: libmicrohttpd only knows an idle timeout, which a client
 * sending one byte a second never hits. A watchdog thread therefore tracks
 * every connection's phase (waiting for headers, receiving the body) and
 * shuts down a socket that overstays its phase's deadline. */
#include <arpa/inet.h>
#include <ctype.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <sodium.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "serve.h"

#define MAX_SEGMENTS 8
#define RETRY_AFTER_BUSY "1"        /* seconds; overload clears fast */
#define RETRY_AFTER_LOADING "2"     /* seconds; a load takes a moment */
#define WATCHDOG_PERIOD_MS 100
#define CONN_MEMORY_LIMIT (64u << 10) /* bytes per connection for headers */
#define FLOOD_FACTOR 8                /* body bytes read past the cap, as a multiple of it */
#define DRAIN_US (30 * 1000000LL)     /* at most this long reading a body past its cap */

/* ========================================================================
 * Connection tracking and the deadline watchdog
 * ======================================================================== */

enum { PH_HEADERS, PH_BODY, PH_WORK };

typedef struct conn_track {
  struct conn_track *prev, *next;
  int fd;
  atomic_int phase;
  atomic_llong since;        /* microseconds, monotonic: start of the phase */
  bool killed;
  er__llm_req *llm;          /* a non-streamed generation waiting suspended (one
                                reference; under conn_lock): the watchdog tells the
                                engine when its client hangs up */
} conn_track;

static atomic_ullong conn_timeouts;

static void track_phase(struct MHD_Connection *c, int phase) {
  const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
  conn_track *t = ci ? ci->socket_context : NULL;
  if (!t) return;
  atomic_store(&t->since, er__now_us());
  atomic_store(&t->phase, phase);
}

static void notify_connection(void *cls, struct MHD_Connection *c, void **socket_context,
                              enum MHD_ConnectionNotificationCode toe) {
  er__server *srv = cls;
  if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
    conn_track *t = calloc(1, sizeof *t);
    if (!t) return;
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    t->fd = ci ? ci->connect_fd : -1;
    atomic_init(&t->phase, PH_HEADERS);
    atomic_init(&t->since, er__now_us());
    pthread_mutex_lock(&srv->conn_lock);
    t->next = srv->conns;
    if (t->next) ((conn_track *)t->next)->prev = t;
    srv->conns = t;
    pthread_mutex_unlock(&srv->conn_lock);
    *socket_context = t;
  } else if (toe == MHD_CONNECTION_NOTIFY_CLOSED) {
    conn_track *t = *socket_context;
    if (!t) return;
    /* Unlinked under the lock before libmicrohttpd closes the descriptor,
     * so the watchdog never shuts down a reused descriptor number. */
    pthread_mutex_lock(&srv->conn_lock);
    if (t->prev) t->prev->next = t->next;
    else srv->conns = t->next;
    if (t->next) t->next->prev = t->prev;
    er__llm_req *r = t->llm;
    pthread_mutex_unlock(&srv->conn_lock);
    er__llm_req_unref(r);
    free(t);
    *socket_context = NULL;
  }
}

static void *watchdog_main(void *p) {
  er__server *srv = p;
  int64_t hdr_us = (int64_t)srv->opt.header_timeout_ms * 1000;
  int64_t body_us = (int64_t)srv->opt.body_timeout_ms * 1000;
  while (!atomic_load(&srv->stopping)) {
    struct timespec ts = {0, WATCHDOG_PERIOD_MS * 1000000L};
    nanosleep(&ts, NULL);
    int64_t now = er__now_us();
    pthread_mutex_lock(&srv->conn_lock);
    for (conn_track *t = srv->conns; t; t = t->next) {
      int ph = atomic_load(&t->phase);
      int64_t age = now - atomic_load(&t->since);
      bool late = (ph == PH_HEADERS && age > hdr_us) || (ph == PH_BODY && age > body_us);
      if (late && !t->killed && t->fd >= 0) {
        /* shutdown(), not close(): libmicrohttpd owns the descriptor and
         * closes it when it sees the end of the stream. */
        shutdown(t->fd, SHUT_RDWR);
        t->killed = true;
        atomic_fetch_add(&conn_timeouts, 1);
      }
      char c;
      if (t->llm && t->fd >= 0 && recv(t->fd, &c, 1, MSG_PEEK | MSG_DONTWAIT) == 0) {
        /* End of stream while the reply is being generated: the client left. */
        pthread_mutex_lock(&t->llm->lock);
        t->llm->peer_closed = true;
        pthread_mutex_unlock(&t->llm->lock);
        er__llm_req_unref(t->llm);
        t->llm = NULL;
      }
    }
    pthread_mutex_unlock(&srv->conn_lock);
  }
  return NULL;
}

unsigned long long er__http_conn_timeouts(void) { return atomic_load(&conn_timeouts); }

/* Sets (r) or clears (NULL) the generation a connection waits for. */
static void track_llm(er__server *srv, struct MHD_Connection *c, er__llm_req *r) {
  const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
  conn_track *t = ci ? ci->socket_context : NULL;
  if (!t) return;
  if (r) atomic_fetch_add(&r->refs, 1);
  pthread_mutex_lock(&srv->conn_lock);
  er__llm_req *old = t->llm;
  t->llm = r;
  pthread_mutex_unlock(&srv->conn_lock);
  er__llm_req_unref(old);
}

/* ========================================================================
 * Requests
 * ======================================================================== */

enum {
  R_NONE, R_PAGE, R_METRICS, R_STATUS, R_SERVER_META, R_LIVE, R_READY, R_MODEL_META,
  R_MODEL_READY, R_MODEL_CONFIG, R_INFER, R_REPO_INDEX, R_REPO_LOAD, R_REPO_UNLOAD,
  R_OAI_CHAT, R_OAI_COMPLETION, R_OAI_MODELS, R_TOKENIZE, R_DETOKENIZE
};

enum { S_NEW, S_WAITING, S_DONE };

typedef struct req_ctx {
  er__server *srv;
  struct MHD_Connection *conn;
  int route;
  bool is_post;
  er__model *model;
  int64_t version;
  char *body;
  size_t body_len, body_cap;
  uint64_t body_seen;        /* bytes received, kept or not */
  bool too_big;
  int64_t drain_start;       /* when the body went past its cap (0: it has not) */
  int64_t t_start;           /* headers complete, microseconds */
  atomic_int state;
  er__job *job;
  er__oai *oai;              /* an OpenAI-style generation request */
  bool oai_errors;           /* an OpenAI path: errors in OpenAI's shape */
  char model_id[ER_SERVE_MAX_NAME + 1]; /* GET /v1/models/<id> */
  er__infer_req ireq;
  er__load_task task;
  bool inflight;
  bool answering;       /* counted in srv->answering until request_completed */
  bool arriving;             /* counted in model->arriving */
  int status;                /* for the completion log */
} req_ctx;

static void count_code(er__server *srv, int status) {
  atomic_fetch_add(&srv->http_codes[er__code_index(status)], 1);
}

static enum MHD_Result send_buf(req_ctx *rc, int status, const char *ctype, char *buf, size_t len,
                                const char *retry_after, int64_t infer_hdr_len) {
  /* buf is malloc'd (or NULL for an empty body) and passes to the response. */
  if (!buf) len = 0;
  struct MHD_Response *r =
      MHD_create_response_from_buffer(len, buf ? buf : (char *)"", buf ? MHD_RESPMEM_MUST_FREE
                                                                       : MHD_RESPMEM_PERSISTENT);
  if (!r) {
    free(buf);
    return MHD_NO;
  }
  if (ctype) MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, ctype);
  if (retry_after) MHD_add_response_header(r, MHD_HTTP_HEADER_RETRY_AFTER, retry_after);
  if (status == 401) MHD_add_response_header(r, MHD_HTTP_HEADER_WWW_AUTHENTICATE, "Bearer");
  if (status == 405)
    MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, rc->is_post ? "GET, HEAD" : "POST");
  if (infer_hdr_len >= 0) {
    char n[32];
    snprintf(n, sizeof n, "%lld", (long long)infer_hdr_len);
    MHD_add_response_header(r, "Inference-Header-Content-Length", n);
  }
  MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
  MHD_add_response_header(r, "Cache-Control", "no-store");
  /* While draining, tell clients not to reuse the connection. */
  if (atomic_load(&rc->srv->draining)) MHD_add_response_header(r, MHD_HTTP_HEADER_CONNECTION, "close");
  enum MHD_Result ret = MHD_queue_response(rc->conn, (unsigned)status, r);
  MHD_destroy_response(r);
  count_code(rc->srv, status);
  rc->status = status;
  return ret;
}

static enum MHD_Result send_sb(req_ctx *rc, int status, const char *ctype, er__sb *sb) {
  if (sb->oom) {
    er__sb_free(sb);
    return MHD_NO;
  }
  size_t len = sb->len;
  char *p = sb->p;
  sb->p = NULL;
  return send_buf(rc, status, ctype, p, len, NULL, -1);
}

static enum MHD_Result send_error(req_ctx *rc, int status, const char *msg) {
  char clean[ER_SERVE_ERR * 2];
  er__sb sb = {0};
  er__sanitize(msg, clean, sizeof clean);
  if (rc->oai_errors) {   /* {"error": {"message", "type", "param", "code"}} */
    er__sb_puts(&sb, "{\"error\":{\"message\":");
    er__sb_json_str(&sb, clean);
    er__sb_printf(&sb, ",\"type\":\"%s\",\"param\":null,\"code\":null}}",
                  status == 401   ? "authentication_error"
                  : status == 403 ? "permission_error"
                  : status == 404 ? "not_found_error"
                  : status == 429 ? "rate_limit_error"
                  : status >= 500 ? "server_error"
                                  : "invalid_request_error");
  } else {
    er__sb_puts(&sb, "{\"error\":");
    er__sb_json_str(&sb, clean);
    er__sb_puts(&sb, "}");
  }
  const char *retry = NULL;
  if (status == 429) retry = RETRY_AFTER_BUSY;
  if (status == 503) retry = RETRY_AFTER_LOADING;
  if (sb.oom) {
    er__sb_free(&sb);
    return MHD_NO;
  }
  char *p = sb.p;
  return send_buf(rc, status, "application/json", p, sb.len, retry, -1);
}

/* ---- security checks ---------------------------------------------------- */

static bool loopback_name(const char *host, size_t n) {
  char h[64];
  if (n == 0 || n >= sizeof h) return false;
  for (size_t i = 0; i < n; i++) h[i] = (char)tolower((unsigned char)host[i]);
  h[n] = '\0';
  if (strcmp(h, "localhost") == 0 || strcmp(h, "::1") == 0) return true;
  struct in_addr a4;
  return inet_pton(AF_INET, h, &a4) == 1 && (ntohl(a4.s_addr) >> 24) == 127;
}

/* A loopback server answers only Host names that mean this machine. */
static bool host_ok(er__server *srv, struct MHD_Connection *c) {
  if (!srv->opt.loopback) return true;
  const char *host = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_HOST);
  if (!host) return true;   /* HTTP/1.0 without Host: not a browser */
  const char *end;
  if (host[0] == '[') {
    end = strchr(host, ']');
    if (!end) return false;
    if (end[1] && end[1] != ':') return false;
    return loopback_name(host + 1, (size_t)(end - host - 1));
  }
  end = strchr(host, ':');
  size_t n = end ? (size_t)(end - host) : strlen(host);
  if (end) {
    for (const char *p = end + 1; *p; p++)
      if (!isdigit((unsigned char)*p)) return false;
  }
  return loopback_name(host, n);
}

static bool key_ok(er__server *srv, struct MHD_Connection *c) {
  if (!srv->opt.api_key) return true;
  const char *auth = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
  if (!auth || strncasecmp(auth, "Bearer ", 7) != 0) return false;
  const char *given = auth + 7;
  /* Compare digests in constant time: neither the key's length nor its
   * prefix leaks through timing. */
  unsigned char a[32], b[32];
  crypto_generichash(a, sizeof a, (const unsigned char *)given, strlen(given), NULL, 0);
  crypto_generichash(b, sizeof b, (const unsigned char *)srv->opt.api_key,
                     strlen(srv->opt.api_key), NULL, 0);
  return sodium_memcmp(a, b, sizeof a) == 0;
}

static bool cidr_match(const er__cidr *c, const struct sockaddr *sa) {
  const unsigned char *addr;
  unsigned char mapped[16];
  int len;
  if (sa->sa_family == AF_INET) {
    addr = (const unsigned char *)&((const struct sockaddr_in *)sa)->sin_addr;
    len = 4;
  } else if (sa->sa_family == AF_INET6) {
    addr = (const unsigned char *)&((const struct sockaddr_in6 *)sa)->sin6_addr;
    len = 16;
    /* An IPv4 client on a dual-stack socket arrives as ::ffff:a.b.c.d. */
    static const unsigned char v4map[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    if (c->family == AF_INET && memcmp(addr, v4map, 12) == 0) {
      memcpy(mapped, addr + 12, 4);
      addr = mapped;
      len = 4;
    }
  } else {
    return false;
  }
  if ((c->family == AF_INET) != (len == 4)) return false;
  int bits = c->bits;
  for (int i = 0; bits > 0; i++, bits -= 8) {
    unsigned char mask = bits >= 8 ? 0xff : (unsigned char)(0xff << (8 - bits));
    if ((addr[i] & mask) != (c->addr[i] & mask)) return false;
  }
  return true;
}

static bool is_loopback_addr(const struct sockaddr *sa) {
  if (sa->sa_family == AF_INET)
    return (ntohl(((const struct sockaddr_in *)sa)->sin_addr.s_addr) >> 24) == 127;
  if (sa->sa_family == AF_INET6) {
    const struct in6_addr *a = &((const struct sockaddr_in6 *)sa)->sin6_addr;
    if (IN6_IS_ADDR_LOOPBACK(a)) return true;
    if (IN6_IS_ADDR_V4MAPPED(a)) return a->s6_addr[12] == 127;
  }
  return false;
}

static enum MHD_Result accept_policy(void *cls, const struct sockaddr *addr, socklen_t len) {
  er__server *srv = cls;
  (void)len;
  if (is_loopback_addr(addr)) return MHD_YES;
  for (int i = 0; i < srv->opt.n_allow; i++)
    if (cidr_match(&srv->opt.allow[i], addr)) return MHD_YES;
  atomic_fetch_add(&srv->http_codes[er__code_index(403)], 1);
  return MHD_NO;
}

/* ---- readiness ------------------------------------------------------------ */

bool er__server_ready(er__server *srv, char *why, size_t n) {
  if (atomic_load(&srv->draining)) {
    snprintf(why, n, "the server is draining for shutdown");
    return false;
  }
  if (!atomic_load(&srv->scanned)) {
    snprintf(why, n, "the repository is still loading");
    return false;
  }
  int nm = atomic_load(&srv->n_models);
  for (int i = 0; i < nm; i++) {
    er__model *m = srv->models[i];
    pthread_mutex_lock(&m->lock);
    bool bad = !m->admin_unloaded && !m->gone && m->n_live == 0;
    pthread_mutex_unlock(&m->lock);
    if (bad) {
      snprintf(why, n, "model '%s' has no ready version", m->name);
      return false;
    }
  }
  return true;
}

/* ---- routing ---------------------------------------------------------------- */

static bool parse_version_seg(const char *s, int64_t *out) {
  int64_t v = 0;
  if (!*s || strlen(s) > 9) return false;
  for (const char *p = s; *p; p++) {
    if (*p < '0' || *p > '9') return false;
    v = v * 10 + (*p - '0');
  }
  if (v <= 0) return false;
  *out = v;
  return true;
}

/* Splits url into segments in buf; returns the count or -1 if too many. */
static int split(const char *url, char *buf, size_t bufsz, char **seg) {
  size_t n = strlen(url);
  if (n >= bufsz) return -1;
  memcpy(buf, url, n + 1);
  int k = 0;
  for (char *p = buf; *p;) {
    while (*p == '/') p++;
    if (!*p) break;
    if (k == MAX_SEGMENTS) return -1;
    seg[k++] = p;
    while (*p && *p != '/') p++;
    if (*p) *p++ = '\0';
  }
  return k;
}

/* Resolves the route; on failure returns an HTTP status and message. */
static int route(req_ctx *rc, const char *url, char *err, size_t errsz) {
  char buf[512], *seg[MAX_SEGMENTS];
  int n = split(url, buf, sizeof buf, seg);
  bool post = rc->is_post;
  int want_post = -1;   /* 1: POST only, 0: GET only */
  if (n < 0) {
    snprintf(err, errsz, "path is too long or has too many segments");
    return 404;
  }
  if (n == 0) rc->route = R_PAGE, want_post = 0;
  else if (n == 2 && strcmp(seg[0], "v1") == 0 && strcmp(seg[1], "models") == 0)
    rc->route = R_OAI_MODELS, want_post = 0;
  else if (n == 3 && strcmp(seg[0], "v1") == 0 && strcmp(seg[1], "models") == 0) {
    rc->route = R_OAI_MODELS, want_post = 0;
    if (!er__valid_name(seg[2])) {
      snprintf(err, errsz, "The model '%.64s' does not exist in the repository", seg[2]);
      return 404;
    }
    snprintf(rc->model_id, sizeof rc->model_id, "%s", seg[2]);
  } else if (n == 3 && strcmp(seg[0], "v1") == 0 && strcmp(seg[1], "chat") == 0 && strcmp(seg[2], "completions") == 0)
    rc->route = R_OAI_CHAT, want_post = 1;
  else if (n == 2 && strcmp(seg[0], "v1") == 0 && strcmp(seg[1], "completions") == 0)
    rc->route = R_OAI_COMPLETION, want_post = 1;
  else if (n == 1 && strcmp(seg[0], "tokenize") == 0) rc->route = R_TOKENIZE, want_post = 1;
  else if (n == 1 && strcmp(seg[0], "detokenize") == 0) rc->route = R_DETOKENIZE, want_post = 1;
  else if (n == 1 && strcmp(seg[0], "metrics") == 0) rc->route = R_METRICS, want_post = 0;
  else if (n == 2 && strcmp(seg[0], "api") == 0 && strcmp(seg[1], "status") == 0)
    rc->route = R_STATUS, want_post = 0;
  else if (n >= 1 && strcmp(seg[0], "v2") == 0) {
    if (n == 1) rc->route = R_SERVER_META, want_post = 0;
    else if (n == 3 && strcmp(seg[1], "health") == 0 && strcmp(seg[2], "live") == 0)
      rc->route = R_LIVE, want_post = 0;
    else if (n == 3 && strcmp(seg[1], "health") == 0 && strcmp(seg[2], "ready") == 0)
      rc->route = R_READY, want_post = 0;
    else if (n == 3 && strcmp(seg[1], "repository") == 0 && strcmp(seg[2], "index") == 0)
      rc->route = R_REPO_INDEX, want_post = 1;
    else if (n == 5 && strcmp(seg[1], "repository") == 0 && strcmp(seg[2], "models") == 0 &&
             (strcmp(seg[4], "load") == 0 || strcmp(seg[4], "unload") == 0)) {
      rc->route = strcmp(seg[4], "load") == 0 ? R_REPO_LOAD : R_REPO_UNLOAD;
      want_post = 1;
      if (!er__valid_name(seg[3])) {
        snprintf(err, errsz, "model name is not valid: use 1-%d of [A-Za-z0-9_.-], not "
                             "starting with '.'", ER_SERVE_MAX_NAME);
        return 400;
      }
      rc->model = er__server_find(rc->srv, seg[3]);
      if (!rc->model) {
        snprintf(err, errsz, "no model named '%s' in the repository", seg[3]);
        return 404;
      }
    } else if (n >= 3 && strcmp(seg[1], "models") == 0) {
      int at = 3;
      if (!er__valid_name(seg[2])) {
        snprintf(err, errsz, "model name is not valid: use 1-%d of [A-Za-z0-9_.-], not "
                             "starting with '.'", ER_SERVE_MAX_NAME);
        return 400;
      }
      if (n >= 5 && strcmp(seg[3], "versions") == 0) {
        if (!parse_version_seg(seg[4], &rc->version)) {
          snprintf(err, errsz, "version must be a positive integer of at most 9 digits");
          return 400;
        }
        at = 5;
      }
      if (n == at) rc->route = R_MODEL_META, want_post = 0;
      else if (n == at + 1 && strcmp(seg[at], "ready") == 0) rc->route = R_MODEL_READY, want_post = 0;
      else if (n == at + 1 && strcmp(seg[at], "config") == 0)
        rc->route = R_MODEL_CONFIG, want_post = 0;
      else if (n == at + 1 && strcmp(seg[at], "infer") == 0) rc->route = R_INFER, want_post = 1;
      else {
        snprintf(err, errsz, "no such endpoint");
        return 404;
      }
      rc->model = er__server_find(rc->srv, seg[2]);
      if (!rc->model) {
        snprintf(err, errsz, "no model named '%s' in the repository", seg[2]);
        return 404;
      }
    }
  }
  if (rc->route == R_NONE) {
    snprintf(err, errsz, "no such endpoint");
    return 404;
  }
  if (want_post != (int)post) {
    snprintf(err, errsz, "method not allowed here");
    return 405;
  }
  return 0;
}

/* ---- responses for GET endpoints ------------------------------------------ */

static void cfg_json(const er__model_config *c, const char *name, er__sb *o) {
  er__sb_puts(o, "{\"name\":");
  er__sb_json_str(o, name);
  er__sb_puts(o, ",\"backends\":[");
  for (int i = 0; i < c->n_backends; i++) {
    if (i) er__sb_puts(o, ",");
    er__sb_json_str(o, c->backends[i]);
  }
  er__sb_printf(o, "],\"threads\":%d,\"instances\":%d,\"max_batch\":%d,\"batch_delay_us\":%lld,"
                   "\"timeout_ms\":%lld,\"queue_size\":%d,\"warmup_runs\":%d,\"version_policy\":",
                c->threads, c->instances, c->max_batch, (long long)c->batch_delay_us,
                (long long)c->timeout_ms, c->queue_size, c->warmup_runs);
  if (c->policy == ER__POLICY_LATEST) er__sb_printf(o, "{\"latest\":%d}", c->latest_n);
  else if (c->policy == ER__POLICY_ALL) er__sb_puts(o, "{\"all\":{}}");
  else {
    er__sb_puts(o, "{\"specific\":[");
    for (int i = 0; i < c->n_specific; i++)
      er__sb_printf(o, "%s%lld", i ? "," : "", (long long)c->specific[i]);
    er__sb_puts(o, "]}");
  }
  er__sb_puts(o, "}");
}

static enum MHD_Result answer_get(req_ctx *rc) {
  er__server *srv = rc->srv;
  er__sb sb = {0};
  char why[ER_SERVE_ERR];
  int status;
  switch (rc->route) {
    case R_PAGE: {
      char *p = malloc(er__status_html_len);
      if (!p) return MHD_NO;
      memcpy(p, er__status_html, er__status_html_len);
      return send_buf(rc, 200, "text/html; charset=utf-8", p, er__status_html_len, NULL, -1);
    }
    case R_METRICS:
      er__metrics_write(srv, &sb);
      er__sb_printf(&sb, "# HELP edgerun_connections_timed_out_total Connections closed for "
                         "missing their header or body deadline.\n"
                         "# TYPE edgerun_connections_timed_out_total counter\n"
                         "edgerun_connections_timed_out_total %llu\n",
                    er__http_conn_timeouts());
      return send_sb(rc, 200, "text/plain; version=0.0.4; charset=utf-8", &sb);
    case R_STATUS:
      er__status_json(srv, &sb);
      return send_sb(rc, 200, "application/json", &sb);
    case R_SERVER_META:
      er__sb_printf(&sb, "{\"name\":\"edgerun\",\"version\":\"%s\",\"extensions\":"
                         "[\"binary_tensor_data\",\"model_repository\"]}", er_version());
      return send_sb(rc, 200, "application/json", &sb);
    case R_LIVE:
      return send_buf(rc, 200, NULL, NULL, 0, NULL, -1);
    case R_OAI_MODELS:
      if (!er__oai_models(srv, rc->model_id[0] ? rc->model_id : NULL, &sb)) {
        er__sb_free(&sb);
        snprintf(why, sizeof why, "The model '%s' does not exist or has no ready version", rc->model_id);
        return send_error(rc, 404, why);
      }
      return send_sb(rc, 200, "application/json", &sb);
    case R_READY:
      if (er__server_ready(srv, why, sizeof why)) return send_buf(rc, 200, NULL, NULL, 0, NULL, -1);
      return send_error(rc, 503, why);
    case R_MODEL_META:
    case R_MODEL_READY:
    case R_MODEL_CONFIG: {
      if (rc->route == R_MODEL_CONFIG) {
        pthread_mutex_lock(&rc->model->lock);
        cfg_json(&rc->model->cfg, rc->model->name, &sb);
        pthread_mutex_unlock(&rc->model->lock);
        return send_sb(rc, 200, "application/json", &sb);
      }
      er__version *v = er__model_acquire(rc->model, rc->version, NULL, &status, why, sizeof why);
      if (!v) {
        if (rc->route == R_MODEL_READY && status == 400) status = 503;
        return send_error(rc, status, why);
      }
      if (rc->route == R_MODEL_READY) {
        er__version_unref(v);
        return send_buf(rc, 200, NULL, NULL, 0, NULL, -1);
      }
      pthread_mutex_lock(&rc->model->lock);
      er__kserve_model_meta(rc->model, v, &sb);
      pthread_mutex_unlock(&rc->model->lock);
      er__version_unref(v);
      return send_sb(rc, 200, "application/json", &sb);
    }
    default:
      return send_error(rc, 500, "unrouted request");
  }
}

static enum MHD_Result answer_index(req_ctx *rc) {
  er__server *srv = rc->srv;
  er__sb sb = {0};
  int nm = atomic_load(&srv->n_models);
  bool first = true;
  er__sb_puts(&sb, "[");
  for (int i = 0; i < nm; i++) {
    er__model *m = srv->models[i];
    pthread_mutex_lock(&m->lock);
    if (m->n_seen == 0) {
      er__sb_printf(&sb, "%s{\"name\":", first ? "" : ",");
      er__sb_json_str(&sb, m->name);
      er__sb_printf(&sb, ",\"state\":\"%s\",\"reason\":", m->loading ? "LOADING" : "UNAVAILABLE");
      er__sb_json_str(&sb, m->cfg_error[0] ? m->cfg_error : "no version loaded");
      er__sb_puts(&sb, "}");
      first = false;
    }
    for (int s = 0; s < m->n_seen; s++) {
      const er__seen_version *v = &m->seen[s];
      static const char *names[] = {"LOADING", "READY", "UNAVAILABLE"};
      char clean[ER_SERVE_ERR];
      er__sanitize(v->reason, clean, sizeof clean);
      er__sb_printf(&sb, "%s{\"name\":", first ? "" : ",");
      er__sb_json_str(&sb, m->name);
      er__sb_printf(&sb, ",\"version\":\"%lld\",\"state\":\"%s\",\"reason\":", (long long)v->number,
                    names[v->state]);
      er__sb_json_str(&sb, clean);
      er__sb_puts(&sb, "}");
      first = false;
    }
    pthread_mutex_unlock(&m->lock);
  }
  er__sb_puts(&sb, "]");
  return send_sb(rc, 200, "application/json", &sb);
}

/* ---- asynchronous completions ------------------------------------------- */

static void job_done(er__job *job, void *arg) {
  req_ctx *rc = arg;
  (void)job;
  atomic_store(&rc->state, S_DONE);
  MHD_resume_connection(rc->conn);
}

static void task_done(er__load_task *task, void *arg) {
  req_ctx *rc = arg;
  (void)task;
  atomic_store(&rc->state, S_DONE);
  MHD_resume_connection(rc->conn);
}

static void end_arriving(req_ctx *rc) {
  if (!rc->arriving) return;
  rc->arriving = false;
  atomic_fetch_sub(&rc->model->arriving, 1);
}

static void end_inflight(req_ctx *rc) {
  if (!rc->inflight) return;
  rc->inflight = false;
  atomic_fetch_sub(&rc->model->m.inflight, 1);
  atomic_fetch_sub(&rc->srv->inflight, 1);
}

static enum MHD_Result infer_error(req_ctx *rc, int status, const char *msg) {
  end_arriving(rc);
  er__metrics_request(&rc->model->m, status, er__now_us() - rc->t_start);
  end_inflight(rc);
  return send_error(rc, status, msg);
}

/* Runs under the model queue's lock when the job is accepted. */
static void suspend_for_job(void *arg) {
  req_ctx *rc = arg;
  rc->inflight = true;
  atomic_fetch_add(&rc->model->m.inflight, 1);
  atomic_fetch_add(&rc->srv->inflight, 1);
  rc->answering = true;
  atomic_fetch_add(&rc->srv->answering, 1);
  atomic_store(&rc->state, S_WAITING);
  MHD_suspend_connection(rc->conn);
}

static enum MHD_Result infer_start(req_ctx *rc) {
  er__server *srv = rc->srv;
  char err[ER_SERVE_ERR];
  int status = 0;
  if (atomic_load(&srv->draining))
    return infer_error(rc, 503, "the server is shutting down; send the request elsewhere");
  er__model_config cfg;
  er__version *v = er__model_acquire(rc->model, rc->version, &cfg, &status, err, sizeof err);
  if (!v) return infer_error(rc, status, err);
  if (v->engine) {
    er__version_unref(v);
    snprintf(err, sizeof err, "model '%s' is a language model: use /v1/chat/completions or /v1/completions",
             rc->model->name);
    return infer_error(rc, 400, err);
  }
  er__job *job = calloc(1, sizeof *job);
  if (!job) {
    er__version_unref(v);
    return infer_error(rc, 503, "out of memory");
  }
  job->ver = v;   /* the acquired reference passes to the job */
  job->done = job_done;
  job->arg = rc;
  int64_t hdr_len = -1;
  const char *h = MHD_lookup_connection_value(rc->conn, MHD_HEADER_KIND,
                                              "Inference-Header-Content-Length");
  if (h) {
    char *end;
    long long x = strtoll(h, &end, 10);
    if (end == h || *end || x < 0) {
      er__job_free(job);
      return infer_error(rc, 400, "Inference-Header-Content-Length must be a non-negative "
                                  "integer");
    }
    hdr_len = x;
  }
  status = er__kserve_decode(v, &cfg, rc->body ? rc->body : "", rc->body_len, hdr_len,
                             srv->opt.max_json_bytes, job, &rc->ireq, err, sizeof err);
  free(rc->body);   /* the tensors hold copies; the body is not needed again */
  rc->body = NULL;
  rc->body_len = rc->body_cap = 0;
  if (status) {
    er__job_free(job);
    return infer_error(rc, status, err);
  }
  rc->job = job;
  /* No longer "on its way" once queued: a batching worker must not wait
   * for this request after it has taken it. */
  end_arriving(rc);
  status = er__sched_submit(rc->model, job, suspend_for_job, rc, err, sizeof err);
  if (status) {
    rc->job = NULL;
    er__job_free(job);
    return infer_error(rc, status, err);
  }
  return MHD_YES;
}

static enum MHD_Result infer_finish(req_ctx *rc) {
  er__job *job = rc->job;
  if (!job) return infer_error(rc, 503, "out of memory");
  if (job->status != 200) return infer_error(rc, job->status, job->err);
  er__sb sb = {0};
  int64_t json_len = -1;
  if (!er__kserve_encode(job->ver, job, &rc->ireq, &sb, &json_len)) {
    er__sb_free(&sb);
    return infer_error(rc, 503, "out of memory encoding the response");
  }
  int64_t lat = er__now_us() - rc->t_start;
  er__metrics_request(&rc->model->m, 200, lat);
  er__server_note_latency(rc->srv, lat);
  end_inflight(rc);
  char *p = sb.p;
  return send_buf(rc, 200, json_len >= 0 ? "application/octet-stream" : "application/json", p,
                  sb.len, NULL, json_len);
}

/* ---- OpenAI-style generation (openai.c) ------------------------------------ */

/* An error body already in OpenAI's shape. */
static enum MHD_Result send_oai(req_ctx *rc, int status, er__sb *sb) {
  if (sb->oom) {
    er__sb_free(sb);
    return MHD_NO;
  }
  char *p = sb->p;
  sb->p = NULL;
  return send_buf(rc, status, "application/json", p, sb->len,
                  status == 429 ? RETRY_AFTER_BUSY : status == 503 ? RETRY_AFTER_LOADING : NULL, -1);
}

static void oai_wake(void *arg) {
  req_ctx *rc = arg;
  atomic_store(&rc->state, S_DONE);   /* a stream's handler is not called again: only its reader */
  MHD_resume_connection(rc->conn);
}

static void oai_suspend(void *arg) {
  req_ctx *rc = arg;
  MHD_suspend_connection(rc->conn);
}

/* Runs under the engine's queue lock when the request is accepted: a
 * non-streamed request waits suspended until the engine is done with it. */
static void oai_accept(void *arg) {
  req_ctx *rc = arg;
  rc->inflight = true;
  atomic_fetch_add(&rc->model->m.inflight, 1);
  atomic_fetch_add(&rc->srv->inflight, 1);
  rc->answering = true;
  atomic_fetch_add(&rc->srv->answering, 1);
  if (!er__oai_streams(rc->oai)) {
    atomic_store(&rc->state, S_WAITING);
    MHD_suspend_connection(rc->conn);
  }
}

static ssize_t oai_reader(void *cls, uint64_t pos, char *buf, size_t max) {
  req_ctx *rc = cls;
  (void)pos;
  long n = er__oai_stream_read(rc->oai, buf, max);
  if (n < 0) return MHD_CONTENT_READER_END_OF_STREAM;
  return (ssize_t)n;
}

static enum MHD_Result oai_start(req_ctx *rc, int kind) {
  er__server *srv = rc->srv;
  er__sb err = {0};
  if (atomic_load(&srv->draining)) {
    er__sb_puts(&err, "{\"error\":{\"message\":\"the server is shutting down; send the request elsewhere\","
                      "\"type\":\"server_error\",\"param\":null,\"code\":null}}");
    return send_oai(rc, 503, &err);
  }
  int st = er__oai_prepare(srv, kind, rc->body, rc->body_len, &rc->oai, &err);
  free(rc->body);
  rc->body = NULL;
  rc->body_len = rc->body_cap = 0;
  if (st) return send_oai(rc, st, &err);
  rc->model = er__oai_model(rc->oai);
  st = er__oai_submit(rc->oai, oai_accept, rc, oai_wake, oai_suspend, rc, &err);
  if (st) return send_oai(rc, st, &err);
  er__sb_free(&err);
  if (!er__oai_streams(rc->oai)) {   /* suspended until done; the watchdog sees a hang-up */
    track_llm(srv, rc->conn, er__oai_req(rc->oai));
    return MHD_YES;
  }
  struct MHD_Response *r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16384, oai_reader, rc, NULL);
  if (!r) return MHD_NO;
  MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "text/event-stream");
  MHD_add_response_header(r, "Cache-Control", "no-cache");
  MHD_add_response_header(r, "X-Accel-Buffering", "no");
  MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
  enum MHD_Result ret = MHD_queue_response(rc->conn, 200, r);
  MHD_destroy_response(r);
  count_code(srv, 200);
  rc->status = 200;
  return ret;
}

static enum MHD_Result oai_finish(req_ctx *rc) {
  er__sb sb = {0};
  track_llm(rc->srv, rc->conn, NULL);
  int st = er__oai_response(rc->oai, &sb);
  end_inflight(rc);
  if (st == 499) {   /* the client hung up: close without an answer */
    er__sb_free(&sb);
    return MHD_NO;
  }
  if (st != 200) return send_oai(rc, st, &sb);
  return send_sb(rc, 200, "application/json", &sb);
}

static enum MHD_Result answer_tokenize(req_ctx *rc, bool detok) {
  er__sb sb = {0};
  int st = er__oai_tokenize(rc->srv, detok, rc->body, rc->body_len, &sb);
  if (st != 200) return send_oai(rc, st, &sb);
  return send_sb(rc, 200, "application/json", &sb);
}

/* ---- the access handler ------------------------------------------------- */

/* The first call for a request: its context, the checks that need only
 * the headers (Host, API key, method, route, encoding, size) and the
 * body buffer. */
static enum MHD_Result first_call(er__server *srv, struct MHD_Connection *conn, const char *url, const char *method,
                                  void **con_cls) {
  char err[ER_SERVE_ERR];
  req_ctx *rc;
  rc = calloc(1, sizeof *rc);
  if (!rc) return MHD_NO;
  rc->srv = srv;
  rc->conn = conn;
  rc->t_start = er__now_us();
  atomic_init(&rc->state, S_NEW);
  *con_cls = rc;
  track_phase(conn, PH_BODY);
  rc->is_post = strcmp(method, MHD_HTTP_METHOD_POST) == 0;
  rc->oai_errors = strncmp(url, "/v1/", 4) == 0 || strcmp(url, "/tokenize") == 0 ||
                   strcmp(url, "/detokenize") == 0;
  bool known = rc->is_post || strcmp(method, MHD_HTTP_METHOD_GET) == 0 ||
               strcmp(method, MHD_HTTP_METHOD_HEAD) == 0;
  if (!host_ok(srv, conn))
    return send_error(rc, 403, "Host header names another site; a loopback server answers "
                               "only localhost, 127.0.0.0/8 and [::1]");
  int st = route(rc, url, err, sizeof err);
  if (rc->route != R_LIVE && !key_ok(srv, conn))
    return send_error(rc, 401, "missing or wrong API key; send 'Authorization: Bearer <key>'");
  if (!known) return send_error(rc, 405, "method not allowed");
  if (st) return send_error(rc, st, err);
  if (rc->route == R_INFER) {   /* tells batching workers a request is coming */
    rc->arriving = true;
    atomic_fetch_add(&rc->model->arriving, 1);
  }
  const char *enc = MHD_lookup_connection_value(conn, MHD_HEADER_KIND,
                                                MHD_HTTP_HEADER_CONTENT_ENCODING);
  if (enc && strcasecmp(enc, "identity") != 0)
    return send_error(rc, 415, "Content-Encoding is not accepted: send the body uncompressed");
  const char *cl = MHD_lookup_connection_value(conn, MHD_HEADER_KIND,
                                               MHD_HTTP_HEADER_CONTENT_LENGTH);
  if (cl) {
    unsigned long long declared = strtoull(cl, NULL, 10);
    /* Over the cap. A client that waits for 100 Continue, or whose body
     * is past what is worth reading, gets its 413 now and the connection
     * closes unread. Any other client writes its whole body before it
     * reads (urllib, requests, tritonclient): answered now, it would see
     * a reset and no status, so the body is read and dropped (within
     * FLOOD_FACTOR x the cap and DRAIN_US) and the 413 follows it. */
    const char *expect = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_EXPECT);
    bool waits = expect && strcasecmp(expect, "100-continue") == 0;
    if (declared > srv->opt.max_body_bytes &&
        (waits || declared > FLOOD_FACTOR * (unsigned long long)srv->opt.max_body_bytes)) {
      snprintf(err, sizeof err, "request body of %llu bytes is over the cap of %llu bytes "
                                "(--max-body-bytes)", declared,
               (unsigned long long)srv->opt.max_body_bytes);
      return send_error(rc, 413, err);
    }
    if (declared > srv->opt.max_body_bytes) {
      rc->too_big = true;
      rc->drain_start = er__now_us();
      return MHD_YES;
    }
    if (declared && rc->route == R_INFER) {
      rc->body = malloc((size_t)declared);
      if (!rc->body) return send_error(rc, 503, "out of memory for the request body");
      rc->body_cap = (size_t)declared;
    }
  }
  /* Answer in a later call: libmicrohttpd 0.9.75 closes the connection
   * after any response queued in this first call (it cannot tell whether
   * a body follows), which would end keep-alive for every GET. The early
   * rejections above close on purpose: their bodies are never read. */
  return MHD_YES;
}

/* A piece of the body: kept while it fits its cap (the whole body for
 * infer, the JSON cap for the small repository bodies), counted always. */
static enum MHD_Result receive_body(req_ctx *rc, const char *upload, size_t *upload_size) {
  er__server *srv = rc->srv;
  size_t n = *upload_size;
  uint64_t cap = rc->route == R_INFER ? srv->opt.max_body_bytes : srv->opt.max_json_bytes;
  *upload_size = 0;
  rc->body_seen += n;
  /* Past the cap the body is read and dropped so the client still gets
   * its 413 (libmicrohttpd cannot answer before the body ends); a flood
   * past FLOOD_FACTOR times the cap is not worth reading: hang up. */
  if (rc->body_seen > FLOOD_FACTOR * cap) return MHD_NO;
  if (rc->too_big) return rc->drain_start && er__now_us() - rc->drain_start > DRAIN_US ? MHD_NO : MHD_YES;
  if (rc->body_len + n > cap) {
    rc->too_big = true;
    rc->drain_start = er__now_us();
    free(rc->body);
    rc->body = NULL;
    rc->body_len = rc->body_cap = 0;
    return MHD_YES;
  }
  if (rc->body_len + n > rc->body_cap) {
    size_t want = rc->body_cap ? rc->body_cap * 2 : 4096;
    while (want < rc->body_len + n) want *= 2;
    if (want > cap) want = (size_t)cap;
    char *p = realloc(rc->body, want);
    if (!p) return MHD_NO;
    rc->body = p;
    rc->body_cap = want;
  }
  memcpy(rc->body + rc->body_len, upload, n);
  rc->body_len += n;
  return MHD_YES;
}

/* POST .../load: the body's parameters may pin a version, as Triton's
 * API allows parameters; {"parameters": {"version": "2"}}. */
static enum MHD_Result answer_load(req_ctx *rc) {
  er__server *srv = rc->srv;
  struct MHD_Connection *conn = rc->conn;
  int64_t pin = 0;
  if (rc->body_seen) {
    json_error_t je;
    json_t *root = rc->body ? json_loadb(rc->body, rc->body_len, 0, &je) : NULL;
    json_t *p = root ? json_object_get(root, "parameters") : NULL;
    json_t *v = p ? json_object_get(p, "version") : NULL;
    bool ok = root && json_is_object(root);
    if (v && json_is_string(v)) ok = ok && parse_version_seg(json_string_value(v), &pin);
    else if (v && json_is_integer(v)) ok = ok && (pin = json_integer_value(v)) > 0 &&
                                      pin <= 999999999;
    else if (v) ok = false;
    json_decref(root);
    if (!ok)
      return send_error(rc, 400, "load body must be {} or {\"parameters\": {\"version\": "
                                 "\"N\"}}");
  }
  if (atomic_load(&srv->draining)) return send_error(rc, 503, "the server is shutting down");
  rc->task.model = rc->model;
  rc->task.version = pin;
  rc->task.done = task_done;
  rc->task.arg = rc;
  atomic_store(&rc->state, S_WAITING);
  MHD_suspend_connection(conn);
  er__loader_post(srv, &rc->task);
  return MHD_YES;
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *conn, const char *url,
                              const char *method, const char *version, const char *upload,
                              size_t *upload_size, void **con_cls) {
  er__server *srv = cls;
  req_ctx *rc = *con_cls;
  char err[ER_SERVE_ERR];
  (void)version;
  if (!rc) return first_call(srv, conn, url, method, con_cls);

  if (*upload_size) return receive_body(rc, upload, upload_size);

  int state = atomic_load(&rc->state);
  if (state == S_WAITING) return MHD_YES;   /* spurious call while suspended */
  if (state == S_DONE) {
    if (rc->oai) return oai_finish(rc);
    if (rc->route == R_INFER) return infer_finish(rc);
    int st = rc->task.status;
    if (st == 200) return send_buf(rc, 200, "application/json", strdup("{}"), 2, NULL, -1);
    return send_error(rc, st, rc->task.err);
  }

  /* The whole body is here. */
  track_phase(conn, PH_WORK);
  if (!rc->is_post) return answer_get(rc);
  if (rc->too_big) {
    snprintf(err, sizeof err, "request body is over the cap of %llu bytes (%s)",
             (unsigned long long)(rc->route == R_INFER ? srv->opt.max_body_bytes
                                                       : srv->opt.max_json_bytes),
             rc->route == R_INFER ? "--max-body-bytes" : "--max-json-bytes");
    if (rc->route == R_INFER) return infer_error(rc, 413, err);
    return send_error(rc, 413, err);
  }
  switch (rc->route) {
    case R_INFER:
      return infer_start(rc);
    case R_OAI_CHAT:
      return oai_start(rc, ER__OAI_CHAT);
    case R_OAI_COMPLETION:
      return oai_start(rc, ER__OAI_COMPLETION);
    case R_TOKENIZE:
    case R_DETOKENIZE:
      return answer_tokenize(rc, rc->route == R_DETOKENIZE);
    case R_REPO_INDEX:
      return answer_index(rc);
    case R_REPO_UNLOAD:
      er__repo_unload(srv, rc->model);
      return send_buf(rc, 200, "application/json", strdup("{}"), 2, NULL, -1);
    case R_REPO_LOAD:
      return answer_load(rc);
    default:
      return send_error(rc, 404, "no such endpoint");
  }
}

static void request_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                              enum MHD_RequestTerminationCode toe) {
  er__server *srv = cls;
  req_ctx *rc = *con_cls;
  (void)toe;
  if (rc) {
    if (srv->opt.access_log) {
      const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_HTTP_STATUS);
      er__serve_log(ER__LOG_INFO, "request",
              json_pack("{s:i,s:s,s:f}", "status", ci ? (int)ci->http_status : rc->status, "model",
                        rc->model ? rc->model->name : "", "ms",
                        (double)(er__now_us() - rc->t_start) / 1000.0),
              "request answered");
    }
    if (rc->route == R_INFER) end_arriving(rc);
    if (rc->route == R_INFER || rc->oai) end_inflight(rc);
    if (rc->oai) track_llm(srv, conn, NULL);
    er__oai_free(rc->oai);
    /* The response is out (or the client is gone): a drain may end. */
    if (rc->answering) {
      rc->answering = false;
      atomic_fetch_sub(&srv->answering, 1);
    }
    er__job_free(rc->job);
    free(rc->body);
    free(rc);
    *con_cls = NULL;
  }
  track_phase(conn, PH_HEADERS);   /* a kept-alive connection waits for its next request */
}

__attribute__((format(printf, 2, 0))) static void mhd_log(void *cls, const char *fmt, va_list ap) {
  char msg[512];
  (void)cls;
  vsnprintf(msg, sizeof msg, fmt, ap);
  msg[strcspn(msg, "\n")] = '\0';
  er__serve_log(ER__LOG_DEBUG, "http", NULL, "%s", msg);
}

bool er__http_start(er__server *srv, char *err, size_t errsz) {
  const er__serve_options *o = &srv->opt;
  unsigned int flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME |
                       MHD_USE_ERROR_LOG;
  /* The idle timeout backs up the watchdog (seconds, rounded up). */
  unsigned int idle = (unsigned)((o->header_timeout_ms > o->body_timeout_ms ? o->header_timeout_ms
                                                                             : o->body_timeout_ms) /
                                     1000 + 2);
  srv->daemon = MHD_start_daemon(
      flags, 0, accept_policy, srv, handle, srv, MHD_OPTION_LISTEN_SOCKET, srv->listen_fd,
      MHD_OPTION_THREAD_POOL_SIZE, (unsigned)o->http_threads, MHD_OPTION_CONNECTION_LIMIT,
      (unsigned)o->max_connections, MHD_OPTION_CONNECTION_TIMEOUT, idle,
      MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)CONN_MEMORY_LIMIT, MHD_OPTION_NOTIFY_COMPLETED,
      request_completed, srv, MHD_OPTION_NOTIFY_CONNECTION, notify_connection, srv,
      MHD_OPTION_EXTERNAL_LOGGER, mhd_log, srv, MHD_OPTION_END);
  if (!srv->daemon) {
    snprintf(err, errsz, "libmicrohttpd failed to start on the listening socket");
    return false;
  }
  if (pthread_create(&srv->watchdog, NULL, watchdog_main, srv) != 0) {
    MHD_stop_daemon(srv->daemon);
    srv->daemon = NULL;
    snprintf(err, errsz, "cannot start the connection watchdog thread");
    return false;
  }
  return true;
}

void er__http_stop(er__server *srv) {
  if (!srv->daemon) return;
  atomic_store(&srv->stopping, true);
  pthread_join(srv->watchdog, NULL);
  MHD_stop_daemon(srv->daemon);
  srv->daemon = NULL;
}
