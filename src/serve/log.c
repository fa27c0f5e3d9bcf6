/* log.c - structured logs: one JSON object per line, rotated by size.
 *
 * A device nobody watches must not fill its disk with logs, so the file is
 * rotated when it would pass max_bytes (edgerun.log -> edgerun.log.1 -> ...)
 * and only `keep` old files are kept. Lines are written with one write() so
 * concurrent writers never interleave within a line. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "serve.h"

#define LOG_NAME "edgerun.log"
#define LOG_MAX_KEEP 100

static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static int log_fd = 2;
static char log_dir[1024];
static uint64_t log_max = 10u << 20;
static uint64_t log_size;
static int log_keep = 5;
static int log_min = ER__LOG_INFO;

static const char *level_name[] = {"debug", "info", "warn", "error"};

static int open_log(void) {
  char path[1200];
  snprintf(path, sizeof path, "%s/%s", log_dir, LOG_NAME);
  int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0640);
  if (fd >= 0) {
    struct stat sb;
    log_size = fstat(fd, &sb) == 0 ? (uint64_t)sb.st_size : 0;
  }
  return fd;
}

/* Shifts edgerun.log.(k) to .(k+1), dropping the oldest; called with the
 * lock held. A failed rename leaves logging on the current file. */
static void rotate(void) {
  char from[1200], to[1200];
  snprintf(to, sizeof to, "%s/%s.%d", log_dir, LOG_NAME, log_keep);
  unlink(to);
  for (int k = log_keep - 1; k >= 0; k--) {
    if (k == 0) snprintf(from, sizeof from, "%s/%s", log_dir, LOG_NAME);
    else snprintf(from, sizeof from, "%s/%s.%d", log_dir, LOG_NAME, k);
    snprintf(to, sizeof to, "%s/%s.%d", log_dir, LOG_NAME, k + 1);
    if (rename(from, to) != 0 && errno != ENOENT) return;
  }
  if (log_keep == 0) {
    snprintf(from, sizeof from, "%s/%s", log_dir, LOG_NAME);
    unlink(from);
  }
  int fd = open_log();
  if (fd >= 0) {
    close(log_fd);
    log_fd = fd;
  }
}

bool er__log_open(const char *dir, uint64_t max_bytes, int keep, int min_level, char *err,
                  size_t errsz) {
  log_min = min_level;
  if (!dir) return true;
  if (keep < 0 || keep > LOG_MAX_KEEP) {
    snprintf(err, errsz, "--log-keep %d is outside 0..%d", keep, LOG_MAX_KEEP);
    return false;
  }
  if (max_bytes < 4096) {
    snprintf(err, errsz, "--log-max-bytes %llu is below the minimum of 4096",
             (unsigned long long)max_bytes);
    return false;
  }
  snprintf(log_dir, sizeof log_dir, "%s", dir);
  log_max = max_bytes;
  log_keep = keep;
  int fd = open_log();
  if (fd < 0) {
    snprintf(err, errsz, "cannot open %s/%s for appending: %s", dir, LOG_NAME, strerror(errno));
    return false;
  }
  log_fd = fd;
  return true;
}

void er__log_close(void) {
  pthread_mutex_lock(&log_lock);
  if (log_fd > 2) close(log_fd);
  log_fd = 2;
  log_dir[0] = '\0';
  pthread_mutex_unlock(&log_lock);
}

void er__serve_log(int level, const char *event, json_t *fields, const char *fmt, ...) {
  if (level < log_min) {
    json_decref(fields);
    return;
  }
  char msg[1024], ts[64];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  struct timespec now;
  struct tm tm;
  clock_gettime(CLOCK_REALTIME, &now);
  gmtime_r(&now.tv_sec, &tm);
  size_t n = strftime(ts, sizeof ts, "%Y-%m-%dT%H:%M:%S", &tm);
  snprintf(ts + n, sizeof ts - n, ".%03ldZ", now.tv_nsec / 1000000);

  er__sb line = {0};
  er__sb_puts(&line, "{\"ts\":\"");
  er__sb_puts(&line, ts);
  er__sb_printf(&line, "\",\"level\":\"%s\",\"event\":", level_name[level & 3]);
  er__sb_json_str(&line, event);
  er__sb_puts(&line, ",\"msg\":");
  er__sb_json_str(&line, msg);
  if (fields && json_is_object(fields)) {
    char *extra = json_dumps(fields, JSON_COMPACT | JSON_REAL_PRECISION(6));
    /* Splice the fields object's members in after msg. */
    if (extra && strlen(extra) > 2) {
      er__sb_puts(&line, ",");
      er__sb_put(&line, extra + 1, strlen(extra) - 2);
    }
    free(extra);
  }
  er__sb_puts(&line, "}\n");
  json_decref(fields);
  if (line.oom) {
    er__sb_free(&line);
    return;
  }
  pthread_mutex_lock(&log_lock);
  if (log_fd > 2 && log_size + line.len > log_max) rotate();
  ssize_t w = write(log_fd, line.p, line.len);
  if (w > 0) log_size += (uint64_t)w;
  pthread_mutex_unlock(&log_lock);
  er__sb_free(&line);
}
