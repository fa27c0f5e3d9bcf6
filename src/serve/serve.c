/* serve.c - the service's life: bind, drop privileges, load, serve, drain.
 *
 * Start order: the listening socket is bound first (so a privileged port
 * works), privileges are dropped, then the loader thread scans the
 * repository (load -> session -> warm-up -> ready per version) while the
 * HTTP front already answers liveness and reports "not ready"; inference on
 * a model is accepted once one of its versions is ready.
 *
 * Signals are blocked in every thread and taken by the main thread with
 * sigtimedwait, so handlers never run inside library code: SIGHUP rescans
 * the repository, SIGTERM and SIGINT drain (readiness false at once,
 * in-flight requests finish, exit 0). */
/* initgroups() is a BSD/glibc extension, not POSIX. */
#define _DEFAULT_SOURCE 1
#include <arpa/inet.h>
#include <errno.h>
#include <grp.h>
#include <netdb.h>
#include <netinet/in.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "serve.h"

#define LISTEN_BACKLOG 128
#define DRAIN_POLL_MS 20

/* ========================================================================
 * The loader thread
 * ======================================================================== */

void er__loader_post(er__server *srv, er__load_task *task) {
  pthread_mutex_lock(&srv->load_lock);
  task->next = NULL;
  er__load_task **tail = &srv->tasks;
  while (*tail) tail = &(*tail)->next;
  *tail = task;
  pthread_cond_signal(&srv->load_cond);
  pthread_mutex_unlock(&srv->load_lock);
}

void er__loader_rescan(er__server *srv) {
  pthread_mutex_lock(&srv->load_lock);
  srv->rescan_wanted = true;
  pthread_cond_signal(&srv->load_cond);
  pthread_mutex_unlock(&srv->load_lock);
}

static void *loader_main(void *p) {
  er__server *srv = p;
  pthread_mutex_lock(&srv->load_lock);
  for (;;) {
    while (!srv->loader_stop && !srv->rescan_wanted && !srv->tasks)
      pthread_cond_wait(&srv->load_cond, &srv->load_lock);
    er__load_task *tasks = srv->tasks;
    srv->tasks = NULL;
    bool scan = srv->rescan_wanted;
    srv->rescan_wanted = false;
    bool stop = srv->loader_stop;
    pthread_mutex_unlock(&srv->load_lock);
    while (tasks) {
      er__load_task *t = tasks;
      tasks = t->next;
      if (stop) {
        t->status = 503;
        snprintf(t->err, sizeof t->err, "the server is shutting down");
      } else {
        t->status = er__repo_load(srv, t->model, t->version, t->err, sizeof t->err);
      }
      t->done(t, t->arg);
    }
    if (stop) break;
    if (scan) {
      er__repo_scan(srv);
      if (!atomic_load(&srv->scanned)) {
        atomic_store(&srv->scanned, true);
        char why[ER_SERVE_ERR];
        bool ready = er__server_ready(srv, why, sizeof why);
        er__serve_log(ready ? ER__LOG_INFO : ER__LOG_WARN, ready ? "ready" : "not_ready", NULL,
                ready ? "first repository scan done: ready" : "first repository scan done: %s",
                why);
      }
    }
    pthread_mutex_lock(&srv->load_lock);
  }
  return NULL;
}

bool er__loader_start(er__server *srv) {
  srv->rescan_wanted = true;   /* the first scan starts at once */
  return pthread_create(&srv->loader, NULL, loader_main, srv) == 0;
}

void er__loader_stop(er__server *srv) {
  pthread_mutex_lock(&srv->load_lock);
  srv->loader_stop = true;
  pthread_cond_signal(&srv->load_cond);
  pthread_mutex_unlock(&srv->load_lock);
  pthread_join(srv->loader, NULL);
}

/* ========================================================================
 * The monitor thread: once a second, sample and check the temperature
 * ======================================================================== */

static void *monitor_main(void *p) {
  er__server *srv = p;
  int64_t next = er__now_us();
  while (!atomic_load(&srv->stopping)) {
    next += 1000000;
    while (!atomic_load(&srv->stopping) && er__now_us() < next) {
      struct timespec ts = {0, 50 * 1000000L};
      nanosleep(&ts, NULL);
    }
    if (!atomic_load(&srv->stopping)) er__monitor_sample(srv);
  }
  return NULL;
}

/* ========================================================================
 * Socket and privileges
 * ======================================================================== */

static bool sockaddr_loopback(const struct sockaddr *sa) {
  if (sa->sa_family == AF_INET)
    return (ntohl(((const struct sockaddr_in *)sa)->sin_addr.s_addr) >> 24) == 127;
  if (sa->sa_family == AF_INET6)
    return IN6_IS_ADDR_LOOPBACK(&((const struct sockaddr_in6 *)sa)->sin6_addr);
  return false;
}

static int open_listener(er__serve_options *opt, char *err, size_t errsz) {
  struct addrinfo hints = {0}, *res = NULL;
  char port[16];
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  snprintf(port, sizeof port, "%d", opt->port);
  int rc = getaddrinfo(opt->host, port, &hints, &res);
  if (rc != 0) {
    snprintf(err, errsz, "cannot resolve listen address '%s': %s", opt->host, gai_strerror(rc));
    return -1;
  }
  int fd = -1;
  for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
    fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
    if (fd < 0) continue;
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 && listen(fd, LISTEN_BACKLOG) == 0) {
      opt->loopback = sockaddr_loopback(ai->ai_addr);
      break;
    }
    snprintf(err, errsz, "cannot listen on %s:%d: %s", opt->host, opt->port, strerror(errno));
    close(fd);
    fd = -1;
  }
  freeaddrinfo(res);
  if (fd >= 0 && !opt->loopback && opt->n_allow == 0) {
    snprintf(err, errsz, "%s is not a loopback address: name the clients with --allow CIDR "
                         "(and set --api-key)", opt->host);
    close(fd);
    return -1;
  }
  if (fd < 0 && !err[0]) snprintf(err, errsz, "cannot listen on %s:%d", opt->host, opt->port);
  return fd;
}

static bool drop_privileges(const char *user, char *err, size_t errsz) {
  struct passwd *pw = getpwnam(user);
  if (!pw) {
    snprintf(err, errsz, "--user %s: no such user", user);
    return false;
  }
  if (initgroups(pw->pw_name, pw->pw_gid) != 0 || setgid(pw->pw_gid) != 0 ||
      setuid(pw->pw_uid) != 0) {
    snprintf(err, errsz, "--user %s: cannot switch to uid %u: %s", user, (unsigned)pw->pw_uid,
             strerror(errno));
    return false;
  }
  /* Dropping must be permanent: getting root back must fail. */
  if (pw->pw_uid != 0 && setuid(0) == 0) {
    snprintf(err, errsz, "--user %s: privileges could be regained; refusing to run", user);
    return false;
  }
  return true;
}

/* ========================================================================
 * Main
 * ======================================================================== */

static void server_free(er__server *srv) {
  int n = atomic_load(&srv->n_models);
  for (int i = 0; i < n; i++) {
    er__model *m = srv->models[i];
    for (int v = 0; v < m->n_live; v++) er__version_unref(m->live[v]);
    pthread_mutex_destroy(&m->lock);
    pthread_cond_destroy(&m->q_cond);
    pthread_cond_destroy(&m->fill_cond);
    free(m);
  }
  pthread_mutex_destroy(&srv->lock);
  pthread_mutex_destroy(&srv->load_lock);
  pthread_cond_destroy(&srv->load_cond);
  pthread_mutex_destroy(&srv->lat_lock);
  pthread_mutex_destroy(&srv->conn_lock);
  free(srv);
}

int er__serve_main(er__serve_options *opt) {
  char err[ER_SERVE_ERR * 2] = "";
  int exit_code = 1;
  sigset_t sigs;
  sigemptyset(&sigs);
  sigaddset(&sigs, SIGTERM);
  sigaddset(&sigs, SIGINT);
  sigaddset(&sigs, SIGHUP);
  /* Blocked before any thread exists, so every thread inherits the mask. */
  pthread_sigmask(SIG_BLOCK, &sigs, NULL);
  signal(SIGPIPE, SIG_IGN);

  if (!er__log_open(opt->log_dir, opt->log_max_bytes, opt->log_keep, opt->log_level, err,
                    sizeof err)) {
    fprintf(stderr, "edgerun serve: %s\n", err);
    return 1;
  }
  struct stat sb;
  if (stat(opt->repo, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
    fprintf(stderr, "edgerun serve: --repo %s is not a readable folder\n", opt->repo);
    er__log_close();
    return 1;
  }
  er__server *srv = calloc(1, sizeof *srv);
  if (!srv) return 1;
  srv->opt = *opt;
  srv->start_wall = er__wall_s();
  pthread_mutex_init(&srv->lock, NULL);
  pthread_mutex_init(&srv->load_lock, NULL);
  pthread_cond_init(&srv->load_cond, NULL);
  pthread_mutex_init(&srv->lat_lock, NULL);
  pthread_mutex_init(&srv->conn_lock, NULL);
  srv->listen_fd = open_listener(&srv->opt, err, sizeof err);
  if (srv->listen_fd < 0) {
    fprintf(stderr, "edgerun serve: %s\n", err);
    er__serve_log(ER__LOG_ERROR, "listen_failed", NULL, "%s", err);
    goto out;
  }
  if (opt->user && !drop_privileges(opt->user, err, sizeof err)) {
    fprintf(stderr, "edgerun serve: %s\n", err);
    er__serve_log(ER__LOG_ERROR, "privilege_drop_failed", NULL, "%s", err);
    goto out;
  }
  if (!srv->opt.loopback && !srv->opt.api_key)
    er__serve_log(ER__LOG_WARN, "no_api_key", NULL,
            "listening beyond loopback without --api-key: any allowed client may run models");
  bool started_loader = false, started_monitor = false, started_http = false;
  if (!er__loader_start(srv)) {
    fprintf(stderr, "edgerun serve: cannot start the loader thread\n");
    goto stop;
  }
  started_loader = true;
  if (pthread_create(&srv->monitor, NULL, monitor_main, srv) != 0) {
    fprintf(stderr, "edgerun serve: cannot start the monitor thread\n");
    goto stop;
  }
  started_monitor = true;
  if (!er__http_start(srv, err, sizeof err)) {
    fprintf(stderr, "edgerun serve: %s\n", err);
    goto stop;
  }
  started_http = true;
  er__serve_log(ER__LOG_INFO, "listening",
          json_pack("{s:s,s:i,s:b,s:b,s:i}", "host", srv->opt.host, "port", srv->opt.port,
                    "loopback", srv->opt.loopback, "api_key", srv->opt.api_key != NULL, "pid",
                    (int)getpid()),
          "edgerun %s serving on %s:%d", er_version(), srv->opt.host, srv->opt.port);

  int64_t next_poll = er__now_us() + (int64_t)opt->poll_s * 1000000;
  for (;;) {
    struct timespec tick = {0, 200 * 1000000L};
    int sig = sigtimedwait(&sigs, NULL, &tick);
    if (sig == SIGHUP) {
      er__serve_log(ER__LOG_INFO, "rescan", NULL, "SIGHUP: rescanning the repository");
      er__loader_rescan(srv);
    } else if (sig == SIGTERM || sig == SIGINT) {
      break;
    }
    if (opt->poll_s > 0 && er__now_us() >= next_poll) {
      er__loader_rescan(srv);
      next_poll = er__now_us() + (int64_t)opt->poll_s * 1000000;
    }
  }

  /* Drain: readiness turns false now; requests already accepted finish. */
  atomic_store(&srv->drain_start_us, er__now_us());
  atomic_store(&srv->draining, true);
  er__sched_kick(srv);   /* batch waits end early: nobody else is coming */
  er__serve_log(ER__LOG_INFO, "draining", json_pack("{s:i}", "inflight", atomic_load(&srv->inflight)),
          "SIGTERM: not ready; draining %d in-flight requests", atomic_load(&srv->inflight));
  /* Until every accepted request is answered and its response completely
   * sent: stopping the HTTP daemon earlier cuts the responses still being
   * written (a 16 MB binary response to a slow reader takes a while). */
  int64_t deadline = er__now_us() + (int64_t)opt->drain_timeout_s * 1000000;
  while ((atomic_load(&srv->inflight) > 0 || atomic_load(&srv->answering) > 0) && er__now_us() < deadline) {
    struct timespec ts = {0, DRAIN_POLL_MS * 1000000L};
    nanosleep(&ts, NULL);
  }
  int left = atomic_load(&srv->answering);
  if (left > 0)
    er__serve_log(ER__LOG_WARN, "drain_timeout", json_pack("{s:i}", "inflight", left),
            "drain timeout of %d s passed with %d requests still running", opt->drain_timeout_s,
            left);
  exit_code = left > 0 ? 1 : 0;

stop:
  if (started_loader) er__loader_stop(srv);
  for (int i = 0; i < atomic_load(&srv->n_models); i++) er__sched_stop(srv->models[i]);
  if (started_http) {
    /* Responses of jobs answered by sched_stop go out before the daemon
     * stops: wait for those requests to be answered (bounded). */
    int64_t until = er__now_us() + 2000000;
    while ((atomic_load(&srv->inflight) > 0 || atomic_load(&srv->answering) > 0) && er__now_us() < until) {
      struct timespec ts = {0, DRAIN_POLL_MS * 1000000L};
      nanosleep(&ts, NULL);
    }
    er__http_stop(srv);
    srv->listen_fd = -1;   /* libmicrohttpd closed it */
  }
  atomic_store(&srv->stopping, true);
  if (started_monitor) pthread_join(srv->monitor, NULL);
  er__serve_log(ER__LOG_INFO, "stopped", NULL, "edgerun serve stopped");
out:
  if (srv->listen_fd >= 0) close(srv->listen_fd);
  server_free(srv);
  er__log_close();
  return exit_code;
}
