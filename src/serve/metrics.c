/* metrics.c - what the service counts and how it shows it: Prometheus text
 * at /metrics, the status page's JSON series, process and thermal readings.
 *
 * Counters are atomics updated on the request path without locks; the
 * exposition reads them without stopping anyone, so a scrape can never stall
 * inference. Histograms keep per-bucket counts and are made cumulative when
 * written. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "serve.h"

static const int codes[ER__CODES] = {200, 400, 401, 403, 404, 405, 413, 415, 429, 500, 503, 0};
/* Seconds; spans a small CNN's sub-millisecond runs to a stuck request. */
static const double lat_le[ER__LAT_BUCKETS] = {0.0001, 0.00025, 0.0005, 0.001, 0.0025,
                                               0.005,  0.01,    0.025,  0.05,  0.1,
                                               0.25,   0.5,     1.0,    2.5};
static const int batch_le[ER__BATCH_BUCKETS] = {1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024};

int er__code_index(int http_status) {
  for (int i = 0; i < ER__CODES - 1; i++)
    if (codes[i] == http_status) return i;
  return ER__CODES - 1;
}

void er__metrics_request(er__model_metrics *m, int http_status, int64_t latency_us) {
  atomic_fetch_add(&m->requests[er__code_index(http_status)], 1);
  if (http_status != 200) return;
  double s = (double)latency_us * 1e-6;
  int b = 0;
  while (b < ER__LAT_BUCKETS && s > lat_le[b]) b++;
  atomic_fetch_add(&m->lat_bucket[b], 1);
  atomic_fetch_add(&m->lat_sum_us, (unsigned long long)(latency_us > 0 ? latency_us : 0));
  atomic_fetch_add(&m->lat_count, 1);
}

void er__metrics_time(atomic_ullong *bucket, atomic_ullong *sum_us, atomic_ullong *count, int64_t us) {
  double s = (double)us * 1e-6;
  int b = 0;
  while (b < ER__LAT_BUCKETS && s > lat_le[b]) b++;
  atomic_fetch_add(&bucket[b], 1);
  atomic_fetch_add(sum_us, (unsigned long long)(us > 0 ? us : 0));
  atomic_fetch_add(count, 1);
}

void er__metrics_batch(er__model_metrics *m, int rows) {
  int b = 0;
  while (b < ER__BATCH_BUCKETS && rows > batch_le[b]) b++;
  atomic_fetch_add(&m->batch_bucket[b], 1);
  atomic_fetch_add(&m->batch_sum, (unsigned long long)rows);
  atomic_fetch_add(&m->batch_count, 1);
}

void er__server_note_latency(er__server *srv, int64_t latency_us) {
  static _Thread_local uint32_t rng = 2463534242u;
  pthread_mutex_lock(&srv->lat_lock);
  srv->done_this_second++;
  srv->lat_seen++;
  int cap = (int)(sizeof srv->lat_us / sizeof srv->lat_us[0]);
  uint32_t v = latency_us > 0xffffffffLL ? 0xffffffffu : (uint32_t)latency_us;
  if (srv->lat_n < cap) {
    srv->lat_us[srv->lat_n++] = v;
  } else {
    /* Reservoir sampling keeps the percentiles fair under any rate. */
    rng ^= rng << 13;
    rng ^= rng >> 17;
    rng ^= rng << 5;
    unsigned long long k = rng % srv->lat_seen;
    if (k < (unsigned long long)cap) srv->lat_us[k] = v;
  }
  pthread_mutex_unlock(&srv->lat_lock);
}

/* ========================================================================
 * Process and device readings
 * ======================================================================== */

static uint64_t read_rss(void) {
  FILE *f = fopen("/proc/self/statm", "r");
  unsigned long long size = 0, rss = 0;
  if (!f) return 0;
  if (fscanf(f, "%llu %llu", &size, &rss) != 2) rss = 0;
  fclose(f);
  return (uint64_t)rss * (uint64_t)sysconf(_SC_PAGESIZE);
}

static double read_cpu(void) {
  struct rusage ru;
  if (getrusage(RUSAGE_SELF, &ru) != 0) return 0;
  return (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec * 1e-6 + (double)ru.ru_stime.tv_sec +
         ru.ru_stime.tv_usec * 1e-6;
}

static int cmp_zone(const void *a, const void *b) {
  return strcmp(*(const char *const *)a, *(const char *const *)b);
}

void er__thermal_read(const char *dir, er__thermal *t) {
  t->n = 0;
  t->max_c = -273.15;
  DIR *d = opendir(dir);
  if (!d) return;
  char *names[ER_SERVE_MAX_ZONES * 4];
  int n = 0;
  for (struct dirent *e; (e = readdir(d)) && n < ER_SERVE_MAX_ZONES * 4;)
    if (strncmp(e->d_name, "thermal_zone", 12) == 0) names[n++] = strdup(e->d_name);
  closedir(d);
  qsort(names, (size_t)n, sizeof names[0], cmp_zone);
  for (int i = 0; i < n; i++) {
    char path[1200], type[32] = "", buf[64];
    long milli;
    FILE *f;
    if (names[i] && t->n < ER_SERVE_MAX_ZONES) {
      snprintf(path, sizeof path, "%s/%s/temp", dir, names[i]);
      if ((f = fopen(path, "r"))) {
        bool ok = fgets(buf, sizeof buf, f) != NULL && sscanf(buf, "%ld", &milli) == 1;
        fclose(f);
        snprintf(path, sizeof path, "%s/%s/type", dir, names[i]);
        if ((f = fopen(path, "r"))) {
          if (fgets(type, sizeof type, f)) type[strcspn(type, "\r\n")] = '\0';
          fclose(f);
        }
        if (ok) {
          /* Zone types go into label values; keep them to a safe set. */
          for (char *p = type; *p; p++)
            if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
                  (*p >= '0' && *p <= '9') || *p == '_' || *p == '-'))
              *p = '_';
          snprintf(t->name[t->n], sizeof t->name[0], "%s%s%s", names[i] + 12,
                   type[0] ? ":" : "", type);
          t->celsius[t->n] = (double)milli / 1000.0;
          if (t->celsius[t->n] > t->max_c) t->max_c = t->celsius[t->n];
          t->n++;
        }
      }
    }
    free(names[i]);
  }
}

static int cmp_u32(const void *a, const void *b) {
  uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
  return x < y ? -1 : x > y;
}

void er__monitor_sample(er__server *srv) {
  static uint32_t sorted[4096];   /* only the monitor thread calls this */
  er__sample s = {0};
  s.t = er__wall_s();
  pthread_mutex_lock(&srv->lat_lock);
  int n = srv->lat_n;
  memcpy(sorted, srv->lat_us, sizeof(uint32_t) * (size_t)n);
  s.rps = (double)srv->done_this_second;
  srv->lat_n = 0;
  srv->lat_seen = 0;
  srv->done_this_second = 0;
  pthread_mutex_unlock(&srv->lat_lock);
  if (n > 0) {
    qsort(sorted, (size_t)n, sizeof sorted[0], cmp_u32);
    s.p50_ms = sorted[(n - 1) * 50 / 100] / 1000.0;
    s.p95_ms = sorted[(n - 1) * 95 / 100] / 1000.0;
    s.p99_ms = sorted[(n - 1) * 99 / 100] / 1000.0;
  }
  int nm = atomic_load(&srv->n_models);
  static unsigned long long ttft_sum_prev, ttft_n_prev;   /* monitor thread only */
  unsigned long long ttft_sum = 0, ttft_n = 0;
  for (int i = 0; i < nm; i++) {
    er__model *m = srv->models[i];
    pthread_mutex_lock(&m->lock);
    s.queue += m->q_len;
    pthread_mutex_unlock(&m->lock);
    s.queue += atomic_load(&m->m.queued);
    s.tok_s += (double)atomic_exchange(&m->m.gen_this_second, 0);
    ttft_sum += atomic_load(&m->m.ttft_sum_us);
    ttft_n += atomic_load(&m->m.ttft_count);
  }
  if (ttft_n > ttft_n_prev) s.ttft_ms = (double)(ttft_sum - ttft_sum_prev) / (double)(ttft_n - ttft_n_prev) / 1000.0;
  ttft_sum_prev = ttft_sum;
  ttft_n_prev = ttft_n;
  uint64_t rss = read_rss();
  double cpu = read_cpu();
  er__thermal th;
  er__thermal_read(srv->opt.thermal_dir, &th);
  s.rss_mb = (double)rss / (1024.0 * 1024.0);
  s.temp_c = th.n ? th.max_c : 0;

  pthread_mutex_lock(&srv->lock);
  srv->rss_bytes = rss;
  srv->cpu_seconds = cpu;
  srv->thermal = th;
  srv->series[srv->series_pos] = s;
  srv->series_pos = (srv->series_pos + 1) % ER__SERIES;
  if (srv->series_len < ER__SERIES) srv->series_len++;
  pthread_mutex_unlock(&srv->lock);

  /* Thermal care: halve concurrency and batch above the limit; restore
   * below the resume point (the gap stops flapping at the threshold). */
  if (th.n && srv->opt.thermal_limit_c > 0) {
    bool hot = atomic_load(&srv->throttled);
    if (!hot && th.max_c >= srv->opt.thermal_limit_c) {
      atomic_store(&srv->throttled, true);
      er__serve_log(ER__LOG_WARN, "thermal_throttle",
              json_pack("{s:f,s:f}", "temp_c", th.max_c, "limit_c", srv->opt.thermal_limit_c),
              "device at %.1f C, above the %.1f C limit: halving concurrency and batch size",
              th.max_c, srv->opt.thermal_limit_c);
      er__sched_kick(srv);
    } else if (hot && th.max_c <= srv->opt.thermal_resume_c) {
      atomic_store(&srv->throttled, false);
      er__serve_log(ER__LOG_INFO, "thermal_restore",
              json_pack("{s:f,s:f}", "temp_c", th.max_c, "resume_c", srv->opt.thermal_resume_c),
              "device cooled to %.1f C (resume point %.1f C): full concurrency and batch size",
              th.max_c, srv->opt.thermal_resume_c);
      er__sched_kick(srv);
    }
  }
}

/* ========================================================================
 * Prometheus text exposition (format 0.0.4)
 * ======================================================================== */

static void head(er__sb *o, const char *name, const char *type, const char *help) {
  er__sb_printf(o, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void code_label(er__sb *o, int i) {
  if (codes[i]) er__sb_printf(o, "%d", codes[i]);
  else er__sb_puts(o, "other");
}

void er__metrics_write(er__server *srv, er__sb *o) {
  int nm = atomic_load(&srv->n_models);
  head(o, "edgerun_requests_total", "counter", "Inference requests answered, by model and HTTP status.");
  for (int i = 0; i < nm; i++)
    for (int c = 0; c < ER__CODES; c++) {
      unsigned long long v = atomic_load(&srv->models[i]->m.requests[c]);
      if (!v && c != 0) continue;
      er__sb_printf(o, "edgerun_requests_total{model=\"%s\",code=\"", srv->models[i]->name);
      code_label(o, c);
      er__sb_printf(o, "\"} %llu\n", v);
    }
  head(o, "edgerun_request_failures_total", "counter",
       "Inference requests answered with an error status, by model and HTTP status.");
  for (int i = 0; i < nm; i++)
    for (int c = 1; c < ER__CODES; c++) {
      unsigned long long v = atomic_load(&srv->models[i]->m.requests[c]);
      if (!v) continue;
      er__sb_printf(o, "edgerun_request_failures_total{model=\"%s\",code=\"",
                    srv->models[i]->name);
      code_label(o, c);
      er__sb_printf(o, "\"} %llu\n", v);
    }
  head(o, "edgerun_http_responses_total", "counter", "Every HTTP response, by status.");
  for (int c = 0; c < ER__CODES; c++) {
    unsigned long long v = atomic_load(&srv->http_codes[c]);
    if (!v) continue;
    er__sb_puts(o, "edgerun_http_responses_total{code=\"");
    code_label(o, c);
    er__sb_printf(o, "\"} %llu\n", v);
  }
  head(o, "edgerun_queue_depth", "gauge", "Requests waiting in a model's queue.");
  for (int i = 0; i < nm; i++) {
    er__model *m = srv->models[i];
    pthread_mutex_lock(&m->lock);
    int q = m->q_len;
    pthread_mutex_unlock(&m->lock);
    er__sb_printf(o, "edgerun_queue_depth{model=\"%s\"} %d\n", m->name, q);
  }
  head(o, "edgerun_inflight_requests", "gauge", "Inference requests accepted and not yet answered.");
  for (int i = 0; i < nm; i++)
    er__sb_printf(o, "edgerun_inflight_requests{model=\"%s\"} %d\n", srv->models[i]->name,
                  atomic_load(&srv->models[i]->m.inflight));
  head(o, "edgerun_request_duration_seconds", "histogram",
       "Time from a full request to its response, successful inference requests.");
  for (int i = 0; i < nm; i++) {
    er__model_metrics *m = &srv->models[i]->m;
    unsigned long long cum = 0;
    for (int b = 0; b <= ER__LAT_BUCKETS; b++) {
      cum += atomic_load(&m->lat_bucket[b]);
      er__sb_printf(o, "edgerun_request_duration_seconds_bucket{model=\"%s\",le=\"",
                    srv->models[i]->name);
      if (b < ER__LAT_BUCKETS) er__sb_printf(o, "%g", lat_le[b]);
      else er__sb_puts(o, "+Inf");
      er__sb_printf(o, "\"} %llu\n", cum);
    }
    er__sb_printf(o, "edgerun_request_duration_seconds_sum{model=\"%s\"} %.6f\n",
                  srv->models[i]->name, (double)atomic_load(&m->lat_sum_us) * 1e-6);
    er__sb_printf(o, "edgerun_request_duration_seconds_count{model=\"%s\"} %llu\n",
                  srv->models[i]->name, (unsigned long long)atomic_load(&m->lat_count));
  }
  head(o, "edgerun_batch_size", "histogram", "Rows per model run (merged requests count once).");
  for (int i = 0; i < nm; i++) {
    er__model_metrics *m = &srv->models[i]->m;
    unsigned long long cum = 0;
    for (int b = 0; b <= ER__BATCH_BUCKETS; b++) {
      cum += atomic_load(&m->batch_bucket[b]);
      er__sb_printf(o, "edgerun_batch_size_bucket{model=\"%s\",le=\"", srv->models[i]->name);
      if (b < ER__BATCH_BUCKETS) er__sb_printf(o, "%d", batch_le[b]);
      else er__sb_puts(o, "+Inf");
      er__sb_printf(o, "\"} %llu\n", cum);
    }
    er__sb_printf(o, "edgerun_batch_size_sum{model=\"%s\"} %llu\n", srv->models[i]->name,
                  (unsigned long long)atomic_load(&m->batch_sum));
    er__sb_printf(o, "edgerun_batch_size_count{model=\"%s\"} %llu\n", srv->models[i]->name,
                  (unsigned long long)atomic_load(&m->batch_count));
  }
  head(o, "edgerun_model_ready", "gauge", "1 for each model version being served.");
  for (int i = 0; i < nm; i++) {
    er__model *m = srv->models[i];
    pthread_mutex_lock(&m->lock);
    for (int v = 0; v < m->n_live; v++)
      er__sb_printf(o, "edgerun_model_ready{model=\"%s\",version=\"%lld\"} 1\n", m->name,
                    (long long)m->live[v]->number);
    pthread_mutex_unlock(&m->lock);
  }
  head(o, "edgerun_model_load_seconds", "gauge",
       "Load, session creation and warm-up time of each served version.");
  for (int i = 0; i < nm; i++) {
    er__model *m = srv->models[i];
    pthread_mutex_lock(&m->lock);
    for (int v = 0; v < m->n_live; v++)
      er__sb_printf(o, "edgerun_model_load_seconds{model=\"%s\",version=\"%lld\"} %.6f\n",
                    m->name, (long long)m->live[v]->number, m->live[v]->load_seconds);
    pthread_mutex_unlock(&m->lock);
  }
  head(o, "edgerun_model_load_failures", "gauge",
       "Version folders that failed to load, verify or warm up (not retried until they change).");
  for (int i = 0; i < nm; i++) {
    er__model *m = srv->models[i];
    int failed = 0;
    pthread_mutex_lock(&m->lock);
    for (int v = 0; v < m->n_seen; v++)
      if (m->seen[v].state == ER__VS_UNAVAILABLE && m->seen[v].stamp) failed++;
    pthread_mutex_unlock(&m->lock);
    er__sb_printf(o, "edgerun_model_load_failures{model=\"%s\"} %d\n", m->name, failed);
  }
  pthread_mutex_lock(&srv->lock);
  uint64_t rss = srv->rss_bytes ? srv->rss_bytes : read_rss();
  double cpu = read_cpu();
  er__thermal th = srv->thermal;
  pthread_mutex_unlock(&srv->lock);
  head(o, "edgerun_process_resident_memory_bytes", "gauge", "Resident set size of the service.");
  er__sb_printf(o, "edgerun_process_resident_memory_bytes %llu\n", (unsigned long long)rss);
  head(o, "edgerun_process_cpu_seconds_total", "counter", "User and system CPU time of the service.");
  er__sb_printf(o, "edgerun_process_cpu_seconds_total %.3f\n", cpu);
  head(o, "edgerun_device_temperature_celsius", "gauge", "Thermal zone temperatures.");
  for (int z = 0; z < th.n; z++)
    er__sb_printf(o, "edgerun_device_temperature_celsius{zone=\"%s\"} %.1f\n", th.name[z],
                  th.celsius[z]);
  head(o, "edgerun_thermal_throttled", "gauge",
       "1 while the device is above the thermal limit and the service runs reduced.");
  er__sb_printf(o, "edgerun_thermal_throttled %d\n", atomic_load(&srv->throttled) ? 1 : 0);
  head(o, "edgerun_effective_concurrency", "gauge", "Runs a model may have at once now.");
  for (int i = 0; i < nm; i++) {
    er__model *m = srv->models[i];
    int n = m->n_workers;
    if (atomic_load(&srv->throttled)) n = n > 1 ? n / 2 : 1;
    er__sb_printf(o, "edgerun_effective_concurrency{model=\"%s\"} %d\n", m->name, n);
  }
  head(o, "edgerun_effective_max_batch", "gauge", "Rows a merged run may have now.");
  for (int i = 0; i < nm; i++) {
    er__model *m = srv->models[i];
    int b = m->cfg.max_batch;
    if (atomic_load(&srv->throttled)) b = b > 1 ? b / 2 : 1;
    er__sb_printf(o, "edgerun_effective_max_batch{model=\"%s\"} %d\n", m->name, b);
  }
  head(o, "edgerun_ready", "gauge", "1 while the server reports ready.");
  char why[ER_SERVE_ERR];
  er__sb_printf(o, "edgerun_ready %d\n", er__server_ready(srv, why, sizeof why) ? 1 : 0);
  head(o, "edgerun_uptime_seconds", "gauge", "Seconds since the service started.");
  er__sb_printf(o, "edgerun_uptime_seconds %.1f\n", er__wall_s() - srv->start_wall);
  er__llm_metrics_write(srv, o);
}

/* ========================================================================
 * Status page data
 * ======================================================================== */

void er__status_json(er__server *srv, er__sb *o) {
  int nm = atomic_load(&srv->n_models);
  er__sb_printf(o, "{\"version\":\"%s\",\"uptime_s\":%.1f,\"draining\":%s,\"throttled\":%s,",
                er_version(), er__wall_s() - srv->start_wall,
                atomic_load(&srv->draining) ? "true" : "false",
                atomic_load(&srv->throttled) ? "true" : "false");
  er__sb_puts(o, "\"models\":[");
  for (int i = 0; i < nm; i++) {
    er__model *m = srv->models[i];
    pthread_mutex_lock(&m->lock);
    er__sb_printf(o, "%s{\"name\":", i ? "," : "");
    er__sb_json_str(o, m->name);
    er__sb_printf(o, ",\"state\":\"%s\",\"versions\":[",
                  m->n_live ? "READY" : m->loading ? "LOADING" : "UNAVAILABLE");
    for (int v = 0; v < m->n_live; v++)
      er__sb_printf(o, "%s%lld", v ? "," : "", (long long)m->live[v]->number);
    er__sb_printf(o, "],\"queue\":%d,\"inflight\":%d,\"max_batch\":%d,\"instances\":%d",
                  m->q_len, atomic_load(&m->m.inflight), m->cfg.max_batch, m->n_workers);
    if (atomic_load(&m->m.kv_total) > 0)
      er__sb_printf(o, ",\"llm\":{\"active\":%d,\"queued\":%d,\"kv_used\":%lld,\"kv_total\":%lld,"
                       "\"generated_tokens\":%llu}",
                    atomic_load(&m->m.active), atomic_load(&m->m.queued), (long long)atomic_load(&m->m.kv_used),
                    (long long)atomic_load(&m->m.kv_total), atomic_load(&m->m.gen_tokens));
    er__sb_puts(o, "}");
    pthread_mutex_unlock(&m->lock);
  }
  er__sb_puts(o, "],\"series\":[");
  pthread_mutex_lock(&srv->lock);
  int start = (srv->series_pos - srv->series_len + ER__SERIES) % ER__SERIES;
  for (int k = 0; k < srv->series_len; k++) {
    const er__sample *s = &srv->series[(start + k) % ER__SERIES];
    er__sb_printf(o,
                  "%s{\"t\":%.3f,\"rps\":%.1f,\"p50_ms\":%.3f,\"p95_ms\":%.3f,\"p99_ms\":%.3f,"
                  "\"queue\":%d,\"rss_mb\":%.2f,\"temp_c\":%.1f,\"tok_s\":%.1f,\"ttft_ms\":%.2f}",
                  k ? "," : "", s->t, s->rps, s->p50_ms, s->p95_ms, s->p99_ms, s->queue,
                  s->rss_mb, s->temp_c, s->tok_s, s->ttft_ms);
  }
  pthread_mutex_unlock(&srv->lock);
  er__sb_puts(o, "]}");
}
