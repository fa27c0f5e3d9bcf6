/* log.c - delivery of the core's log lines (see log.h). */
#include "core/log.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The longest line delivered; longer ones are cut. */
#define ER_LOG_LINE_BYTES 1024

static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static er_log_fn log_fn;
static void *log_user;
static int log_min = -1;  /* -1: not set yet, read EDGERUN_LOG */

static int env_level(void) {
  const char *e = getenv("EDGERUN_LOG");
  if (!e) return ER_LOG_WARNING;
  if (strcmp(e, "debug") == 0) return ER_LOG_DEBUG;
  if (strcmp(e, "info") == 0) return ER_LOG_INFO;
  if (strcmp(e, "error") == 0) return ER_LOG_ERROR;
  return ER_LOG_WARNING;
}

void er_log_set_callback(er_log_fn fn, void *user, er_log_level min_level) {
  pthread_mutex_lock(&log_lock);
  log_fn = fn;
  log_user = user;
  log_min = (int)min_level;
  pthread_mutex_unlock(&log_lock);
}

bool er__log_enabled(er_log_level level) {
  pthread_mutex_lock(&log_lock);
  if (log_min < 0) log_min = env_level();
  bool on = (int)level >= log_min;
  pthread_mutex_unlock(&log_lock);
  return on;
}

void er__log(er_log_level level, const char *fmt, ...) {
  static const char *const names[] = {"debug", "info", "warning", "error"};
  char line[ER_LOG_LINE_BYTES];
  if (!er__log_enabled(level)) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  /* The lock also keeps lines from different threads whole. */
  pthread_mutex_lock(&log_lock);
  if (log_fn) log_fn(log_user, level, line);
  else fprintf(stderr, "edgerun: %s: %s\n", names[(unsigned)level < 4 ? level : 3], line);
  pthread_mutex_unlock(&log_lock);
}
