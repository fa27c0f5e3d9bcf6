/* cmd-bench.c - `edgerun bench`: load time, first-run time, latency
 * percentiles, throughput, peak RSS, the memory plan, and per-op times with
 * an optional Chrome trace. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "cli/cli-llm.h"
#include "edgerun-backend.h"

void er_cmd_bench_help(FILE *out) {
  fprintf(out,
          "usage: edgerun bench MODEL [--threads T] [--warmup N] [--iterations N] [--json]\n"
          "                     [--profile trace.json] [--dim NAME=V ...] [--input NAME=FILE ...]\n"
          "                     [--reference] [--seed S] [--compare BACKEND] [backend options]\n\n"
          "       edgerun bench MODEL.gguf --llm [-p 128] [-n 64] (see bench --llm --help)\n\n"
          "Measures MODEL on this machine: load time (file to ready session), the first run,\n"
          "then N timed runs after the warm-up: p50/p95/p99/mean latency, throughput, peak\n"
          "RSS and the memory plan's arena bytes. Inputs are seeded random values of the\n"
          "declared shapes (uniform in [-1, 1] for floats, 0 for integers and bools) unless\n"
          "given with --input; a symbolic dim takes its --dim value, else 1. --profile\n"
          "writes a Chrome trace (chrome://tracing, Perfetto) of the last run and prints\n"
          "per-op totals. --reference uses the reference kernels only.\n"
          "--json prints one object with load_ms, first_run_ms, p50_ms, p95_ms, p99_ms,\n"
          "mean_ms, min_ms, throughput_ips, peak_rss_kb, arena_bytes and more.\n"
          "--compare BACKEND (e.g. cpu) also measures the model on BACKEND in the same\n"
          "process and prints the p50 ratio and the largest difference between the two\n"
          "backends' outputs; the placement summary (fallback share) is reported.\n\n%s\n",
          er_cli_backend_help);
  er_cmd_bench_llm_help(out);
}

#define MAX_DIMS 32
#define MAX_INPUTS 256

/* Appends name to the list in buf ("a, b"), once; a list too long for
 * buf ends in "...". */
static void note_default(char *buf, size_t size, const char *name) {
  size_t len = strlen(buf), n = strlen(name);
  for (const char *p = buf; (p = strstr(p, name)) != NULL; p += n)
    if ((p == buf || p[-1] == ' ') && (p[n] == ',' || p[n] == '\0')) return;
  if (len + n + 6 >= size) {
    if (len + 4 < size && (len < 3 || strcmp(buf + len - 3, "...") != 0)) strcat(buf, "...");
    return;
  }
  if (len) strcat(buf, ", ");
  strcat(buf, name);
}

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* This process's own high-water mark: VmHWM of /proc/self/status.
 * getrusage's ru_maxrss is not reset by execve on Linux, so a benchmark
 * started by a large parent (a Python driver) would report the parent's
 * size; it is the fallback where /proc is missing. */
static long peak_rss_kb(void) {
  FILE *f = fopen("/proc/self/status", "r");
  if (f) {
    char line[256];
    long kb = -1;
    while (fgets(line, sizeof line, f))
      if (strncmp(line, "VmHWM:", 6) == 0) kb = strtol(line + 6, NULL, 10);
    fclose(f);
    if (kb >= 0) return kb;
  }
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_maxrss; /* kilobytes on Linux */
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static double percentile(const double *sorted, int n, double p) {
  if (n == 0) return 0;
  double pos = p / 100.0 * (n - 1);
  int lo = (int)pos;
  int hi = lo + 1 < n ? lo + 1 : lo;
  return sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - lo);
}

/* xorshift64*: a small seeded generator for reproducible inputs. */
static uint64_t rng_next(uint64_t *s) {
  *s ^= *s >> 12;
  *s ^= *s << 25;
  *s ^= *s >> 27;
  return *s * UINT64_C(2685821657736338717);
}

typedef struct op_total {
  const char *op;
  double us;
  int nodes;
} op_total;

static int cmp_total(const void *a, const void *b) {
  const op_total *x = a, *y = b;
  return x->us < y->us ? 1 : x->us > y->us ? -1 : 0;
}

static int write_trace(const char *path, const er_node_timing *t, size_t n) {
  FILE *f = fopen(path, "w");
  if (!f) return 1;
  fprintf(f, "{\"traceEvents\": [\n");
  bool first = true;
  for (size_t i = 0; i < n; i++) {
    if (!t[i].count) continue;
    fprintf(f, "%s  {\"ph\": \"X\", \"pid\": 1, \"tid\": 1, \"ts\": %.3f, \"dur\": %.3f, \"name\": ",
            first ? "" : ",\n", t[i].start_us, t[i].dur_us);
    er_cli_json_string(f, t[i].name[0] ? t[i].name : t[i].op_type);
    fprintf(f, ", \"cat\": ");
    er_cli_json_string(f, t[i].op_type);
    fprintf(f, ", \"args\": {\"op\": ");
    er_cli_json_string(f, t[i].op_type);
    fprintf(f, ", \"kernel\": ");
    er_cli_json_string(f, t[i].kernel);
    fprintf(f, "}}");
    first = false;
  }
  fprintf(f, "\n], \"displayTimeUnit\": \"ms\"}\n");
  return fclose(f) != 0;
}

/* The command line of edgerun bench. */
typedef struct bench_args {
  const char *path, *trace, *compare;
  int threads, warmup, iterations;
  bool json, reference;
  uint64_t seed;
  const char *dim_names[MAX_DIMS];
  int64_t dim_values[MAX_DIMS];
  int n_dims;
  const char *in_names[MAX_INPUTS], *in_files[MAX_INPUTS];
  int n_files;
  er_cli_backend be;
} bench_args;

/* 0 when the arguments are good, else the exit status (the message is
 * printed). */
static int parse_args(int argc, char **argv, bench_args *b) {
  memset(b, 0, sizeof *b);
  b->threads = 1;
  b->warmup = 5;
  b->iterations = 50;
  b->seed = 42;
  er_cli_backend_init(&b->be);
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    int used = er_cli_backend_arg("bench", &b->be, argc, argv, &i);
    if (used < 0) return 1;
    if (used) continue;
    if (strcmp(a, "--compare") == 0) {
      if (++i >= argc) return er_cli_fail("bench", "--compare needs a backend name");
      b->compare = argv[i];
    } else if (strcmp(a, "--threads") == 0) {
      if (++i >= argc || !er_cli_parse_int(argv[i], &b->threads) || b->threads < 1)
        return er_cli_fail("bench", "--threads needs a positive integer");
    } else if (strcmp(a, "--warmup") == 0) {
      if (++i >= argc || !er_cli_parse_int(argv[i], &b->warmup)) return er_cli_fail("bench", "--warmup needs an integer");
    } else if (strcmp(a, "--iterations") == 0) {
      if (++i >= argc || !er_cli_parse_int(argv[i], &b->iterations) || b->iterations < 1)
        return er_cli_fail("bench", "--iterations needs a positive integer");
    } else if (strcmp(a, "--json") == 0) {
      b->json = true;
    } else if (strcmp(a, "--reference") == 0) {
      b->reference = true;
    } else if (strcmp(a, "--profile") == 0) {
      if (++i >= argc) return er_cli_fail("bench", "--profile needs a file name");
      b->trace = argv[i];
    } else if (strcmp(a, "--seed") == 0) {
      int sv;
      if (++i >= argc || !er_cli_parse_int(argv[i], &sv)) return er_cli_fail("bench", "--seed needs an integer");
      b->seed = (uint64_t)sv + 1;
    } else if (strcmp(a, "--dim") == 0) {
      char *eq;
      int v;
      if (++i >= argc || !(eq = strchr(argv[i], '=')) || !er_cli_parse_int(eq + 1, &v))
        return er_cli_fail("bench", "--dim needs NAME=VALUE");
      if (b->n_dims >= MAX_DIMS) return er_cli_fail("bench", "more than %d --dim options", MAX_DIMS);
      *eq = '\0';
      b->dim_names[b->n_dims] = argv[i];
      b->dim_values[b->n_dims++] = v;
    } else if (strcmp(a, "--input") == 0) {
      char *eq;
      if (++i >= argc || !(eq = strchr(argv[i], '='))) return er_cli_fail("bench", "--input needs NAME=FILE");
      if (b->n_files >= MAX_INPUTS) return er_cli_fail("bench", "more than %d inputs", MAX_INPUTS);
      *eq = '\0';
      b->in_names[b->n_files] = argv[i];
      b->in_files[b->n_files++] = eq + 1;
    } else if (a[0] == '-') {
      return er_cli_fail("bench", "unknown option '%s' (see edgerun bench --help)", a);
    } else if (!b->path) {
      b->path = a;
    } else {
      return er_cli_fail("bench", "unexpected argument '%s'", a);
    }
  }
  if (!b->path) return er_cli_fail("bench", "no MODEL given (see edgerun bench --help)");
  return 0;
}

/* Input i: the file --input names, else random values of its declared
 * shape (symbolic dims from --dim, else 1, noted in `defaulted`). 0 or
 * the exit status. */
static int make_input(const bench_args *b, const er_value_info *info, uint64_t *seed, char *defaulted,
                      size_t defaulted_size, er_tensor **out) {
  for (int f = 0; f < b->n_files; f++)
    if (strcmp(b->in_names[f], info->name) == 0) {
      er_status st = er_tensor_read_file(b->in_files[f], out, NULL);
      if (st != ER_STATUS_OK) return er_cli_fail_status("bench", st, b->in_files[f]);
    }
  if (*out) return 0;
  int64_t dims[ER_MAX_RANK];
  int rank = info->rank < 0 ? 1 : info->rank;
  for (int d = 0; d < rank; d++) {
    dims[d] = info->rank < 0 ? 1 : info->dims[d];
    if (dims[d] < 0) {
      bool given = false;
      dims[d] = 1;
      for (int k = 0; k < b->n_dims; k++)
        if (info->dim_params[d] && strcmp(info->dim_params[d], b->dim_names[k]) == 0) {
          dims[d] = b->dim_values[k];
          given = true;
        }
      if (!given) note_default(defaulted, defaulted_size, info->dim_params[d] ? info->dim_params[d] : "?");
    }
  }
  er_status st = er_tensor_create(info->dtype, rank, dims, out);
  if (st != ER_STATUS_OK) return er_cli_fail_status("bench", st, info->name);
  int64_t n = er_tensor_count(*out);
  if (info->dtype == ER_DTYPE_FLOAT) {
    float *v = er_tensor_data(*out);
    for (int64_t k = 0; k < n; k++) v[k] = (float)((rng_next(seed) >> 40) / 8388608.0 - 1.0);
  } else if (info->dtype == ER_DTYPE_DOUBLE) {
    double *v = er_tensor_data(*out);
    for (int64_t k = 0; k < n; k++) v[k] = (rng_next(seed) >> 11) / 4503599627370496.0 - 1.0;
  }
  return 0;
}

/* --compare: the same model and inputs on a second backend, measured the
 * same way in this process; its p50 and the largest difference from
 * `outputs` (float outputs of equal size). */
static er_status run_compare(const bench_args *b, er_model *model, const er_session_options *opts,
                             const er_named_tensor *named, size_t n_in, er_tensor **outputs, size_t n_out,
                             double *p50c, double *max_diff) {
  er_session_options co = *opts;
  const char *names[1] = {b->compare};
  co.backends = names;
  co.backend_count = 1;
  co.allow_fallback = true;
  co.profile = false;
  er_session *cs = NULL;
  er_tensor **couts = calloc(n_out + 1, sizeof *couts);
  double *clat = calloc((size_t)b->iterations, sizeof *clat);
  er_status st = couts && clat ? er_session_create(model, &co, &cs) : ER_STATUS_OUT_OF_MEMORY;
  for (int it = 0; st == ER_STATUS_OK && it < b->warmup + b->iterations + 1; it++) {
    for (size_t k = 0; k < n_out; k++) {
      er_tensor_free(couts[k]);
      couts[k] = NULL;
    }
    double t0 = now_ms();
    st = er_session_run(cs, named, n_in, NULL, n_out, couts);
    if (it > b->warmup) clat[it - b->warmup - 1] = now_ms() - t0;
  }
  if (st == ER_STATUS_OK) {
    qsort(clat, (size_t)b->iterations, sizeof *clat, cmp_double);
    *p50c = percentile(clat, b->iterations, 50);
    for (size_t k = 0; k < n_out; k++) {
      if (er_tensor_dtype(couts[k]) != ER_DTYPE_FLOAT || er_tensor_dtype(outputs[k]) != ER_DTYPE_FLOAT ||
          er_tensor_count(couts[k]) != er_tensor_count(outputs[k]))
        continue;
      const float *x = er_tensor_cdata(outputs[k]), *y = er_tensor_cdata(couts[k]);
      for (int64_t e = 0; e < er_tensor_count(couts[k]); e++)
        if (fabs((double)x[e] - y[e]) > *max_diff) *max_diff = fabs((double)x[e] - y[e]);
    }
  }
  for (size_t k = 0; couts && k < n_out; k++) er_tensor_free(couts[k]);
  free(couts);
  free(clat);
  er_session_free(cs);
  return st;
}

/* --profile: per-node timings into *timings (the caller frees), the
 * per-op totals into *totals (sorted, slowest first), and the trace file.
 * 0 or the exit status. */
static int profile_ops(const bench_args *b, er_session *session, er_node_timing **timings,
                       op_total **totals_out, int *n_totals_out) {
  size_t n_nodes = 0;
  er_session_profile(session, NULL, 0, &n_nodes);
  *timings = calloc(n_nodes + 1, sizeof **timings);
  op_total *totals = calloc(n_nodes + 1, sizeof *totals);
  if (!*timings || !totals) {
    free(totals);
    return er_cli_fail("bench", "out of memory");
  }
  er_session_profile(session, *timings, n_nodes, &n_nodes);
  int n_totals = 0;
  for (size_t i = 0; i < n_nodes; i++) {
    const er_node_timing *t = &(*timings)[i];
    int k = 0;
    while (k < n_totals && strcmp(totals[k].op, t->op_type) != 0) k++;
    if (k == n_totals) totals[n_totals++] = (op_total){t->op_type, 0, 0};
    totals[k].us += t->count ? t->total_us / (double)t->count : 0;
    totals[k].nodes++;
  }
  qsort(totals, (size_t)n_totals, sizeof *totals, cmp_total);
  if (write_trace(b->trace, *timings, n_nodes)) {
    free(totals);
    return er_cli_fail("bench", "cannot write trace '%s'", b->trace);
  }
  *totals_out = totals;
  *n_totals_out = n_totals;
  return 0;
}

/* What one bench measured. */
typedef struct bench_result {
  double load_ms, first_ms, p50, p95, p99, mean, min, p50c, max_diff;
  long rss;
  er_session_stats stats;
  er_partition_summary part;
  const op_total *totals;
  int n_totals;
} bench_result;

static void print_result(const bench_args *b, const bench_result *r) {
  if (b->json) {
    printf("{\"model\": ");
    er_cli_json_string(stdout, b->path);
    printf(", \"threads\": %d, \"iterations\": %d, \"load_ms\": %.3f, \"first_run_ms\": %.3f, "
           "\"p50_ms\": %.4f, \"p95_ms\": %.4f, \"p99_ms\": %.4f, \"mean_ms\": %.4f, \"min_ms\": %.4f, "
           "\"throughput_ips\": %.2f, \"peak_rss_kb\": %ld, \"arena_bytes\": %llu, \"nodes\": %zu, "
           "\"optimized_nodes\": %zu",
           r->stats.threads, b->iterations, r->load_ms, r->first_ms, r->p50, r->p95, r->p99, r->mean, r->min,
           1000.0 / r->mean, r->rss, (unsigned long long)r->stats.arena_bytes, r->stats.node_count,
           r->stats.optimized_nodes);
    printf(", \"backend\": ");
    er_cli_json_string(stdout, r->part.preferred ? r->part.preferred : "cpu");
    printf(", \"fallback_share\": %.4f", r->part.fallback_share);
    if (b->compare) {
      printf(", \"compare\": ");
      er_cli_json_string(stdout, b->compare);
      printf(", \"compare_p50_ms\": %.4f, \"ratio\": %.4f, \"max_abs_diff\": %.3g", r->p50c, r->p50 / r->p50c,
             r->max_diff);
    }
    if (b->trace) {
      printf(", \"ops\": {");
      for (int k = 0; k < r->n_totals; k++) {
        printf("%s", k ? ", " : "");
        er_cli_json_string(stdout, r->totals[k].op);
        printf(": %.2f", r->totals[k].us / 1000.0);
      }
      printf("}");
    }
    printf("}\n");
    return;
  }
  printf("model:          %s\n", b->path);
  printf("threads:        %d\n", r->stats.threads);
  printf("nodes:          %zu (%zu on optimized kernels)\n", r->stats.node_count, r->stats.optimized_nodes);
  printf("load:           %.2f ms (file to ready session)\n", r->load_ms);
  printf("first run:      %.3f ms\n", r->first_ms);
  printf("latency:        p50 %.3f ms, p95 %.3f ms, p99 %.3f ms, mean %.3f ms, min %.3f ms (%d runs)\n", r->p50,
         r->p95, r->p99, r->mean, r->min, b->iterations);
  printf("throughput:     %.1f inferences/s\n", 1000.0 / r->mean);
  printf("peak RSS:       %ld KiB\n", r->rss);
  printf("arena:          %llu bytes\n", (unsigned long long)r->stats.arena_bytes);
  if (r->part.fallback_nodes)
    printf("placement:      %zu of %zu nodes on the CPU instead of %s (%.1f%% of the MACs)\n", r->part.fallback_nodes,
           r->part.node_count, r->part.preferred, 100.0 * r->part.fallback_share);
  if (b->compare)
    printf("compare:        %s p50 %.3f ms; ratio %.3f (this / %s); max abs output difference %.3g\n", b->compare,
           r->p50c, r->p50 / r->p50c, b->compare, r->max_diff);
  if (b->trace) {
    printf("per op (mean ms per run):\n");
    for (int k = 0; k < r->n_totals; k++)
      printf("  %-24s %8.3f  (%d nodes)\n", r->totals[k].op, r->totals[k].us / 1000.0, r->totals[k].nodes);
    printf("trace:          %s\n", b->trace);
  }
}

int er_cmd_bench(int argc, char **argv) {
  /* LLMs have their own figures (tokens/s, not latency percentiles). */
  for (int i = 1; i < argc; i++)
    if (strcmp(argv[i], "--llm") == 0 || (argv[i][0] != '-' && er_cli_is_llm(argv[i]))) return er_cmd_bench_llm(argc, argv);
  bench_args b;
  int rc = parse_args(argc, argv, &b);
  if (rc) return rc;
  if (er_cli_backend_load("bench", &b.be)) return 1;
  rc = 1;
  er_model *model = NULL;
  er_session *session = NULL;
  er_tensor **inputs = NULL, **outputs = NULL;
  er_named_tensor *named = NULL;
  double *lat = NULL;
  er_node_timing *timings = NULL;
  op_total *totals = NULL;
  size_t n_in = 0, n_out = 0;
  bench_result r;
  memset(&r, 0, sizeof r);

  double t0 = now_ms();
  er_status st = er_model_load_file(b.path, NULL, &model);
  if (st != ER_STATUS_OK) return er_cli_fail_status("bench", st, b.path);
  er_session_options opts;
  er_session_options_init(&opts);
  opts.threads = b.threads;
  opts.force_reference = b.reference;
  opts.profile = b.trace != NULL;
  er_cli_backend_apply(&b.be, &opts);
  st = er_session_create(model, &opts, &session);
  if (st != ER_STATUS_OK) {
    rc = er_cli_fail_status("bench", st, "creating a session");
    goto done;
  }
  r.load_ms = now_ms() - t0;

  n_in = er_model_input_count(model);
  n_out = er_model_output_count(model);
  inputs = calloc(n_in + 1, sizeof *inputs);
  named = calloc(n_in + 1, sizeof *named);
  outputs = calloc(n_out + 1, sizeof *outputs);
  lat = calloc((size_t)b.iterations, sizeof *lat);
  if (!inputs || !named || !outputs || !lat) {
    rc = er_cli_fail("bench", "out of memory");
    goto done;
  }
  char defaulted[256] = ""; /* symbolic dims no --dim gave, "a, b" */
  for (size_t i = 0; i < n_in; i++) {
    er_value_info info;
    er_model_input_info(model, i, &info);
    named[i].name = info.name;
    if ((rc = make_input(&b, &info, &b.seed, defaulted, sizeof defaulted, &inputs[i])) != 0) goto done;
    rc = 1;
    named[i].tensor = inputs[i];
  }

  t0 = now_ms();
  st = er_session_run(session, named, n_in, NULL, n_out, outputs);
  r.first_ms = now_ms() - t0;
  if (st != ER_STATUS_OK) {
    rc = er_cli_fail_status("bench", st, "running the model");
    /* A detector's image size left at 1 fails deep inside the graph. */
    if (defaulted[0])
      fprintf(stderr, "edgerun bench: the inputs' symbolic dims %s were set to 1; give their sizes with "
                      "--dim NAME=V or real inputs with --input NAME=FILE\n", defaulted);
    goto done;
  }
  for (size_t k = 0; k < n_out; k++) {
    er_tensor_free(outputs[k]);
    outputs[k] = NULL;
  }
  for (int it = 0; it < b.warmup + b.iterations; it++) {
    t0 = now_ms();
    st = er_session_run(session, named, n_in, NULL, n_out, outputs);
    double ms = now_ms() - t0;
    if (st != ER_STATUS_OK) {
      rc = er_cli_fail_status("bench", st, "running the model");
      goto done;
    }
    /* The last run's outputs are kept for --compare. */
    if (it + 1 < b.warmup + b.iterations)
      for (size_t k = 0; k < n_out; k++) {
        er_tensor_free(outputs[k]);
        outputs[k] = NULL;
      }
    if (it >= b.warmup) lat[it - b.warmup] = ms;
  }
  for (int i = 0; i < b.iterations; i++) r.mean += lat[i];
  r.mean /= b.iterations;
  qsort(lat, (size_t)b.iterations, sizeof *lat, cmp_double);
  r.p50 = percentile(lat, b.iterations, 50);
  r.p95 = percentile(lat, b.iterations, 95);
  r.p99 = percentile(lat, b.iterations, 99);
  r.min = lat[0];
  er_session_stats_get(session, &r.stats);
  er_session_partition(session, &r.part);
  r.rss = peak_rss_kb();
  if (b.compare) {
    st = run_compare(&b, model, &opts, named, n_in, outputs, n_out, &r.p50c, &r.max_diff);
    if (st != ER_STATUS_OK) {
      rc = er_cli_fail_status("bench", st, b.compare);
      goto done;
    }
  }
  if (b.trace && (rc = profile_ops(&b, session, &timings, &totals, &r.n_totals)) != 0) goto done;
  r.totals = totals;
  print_result(&b, &r);
  rc = 0;
done:
  free(totals);
  for (size_t i = 0; inputs && i < n_in; i++) er_tensor_free(inputs[i]);
  for (size_t i = 0; outputs && i < n_out; i++) er_tensor_free(outputs[i]);
  free(inputs);
  free(outputs);
  free(named);
  free(lat);
  free(timings);
  er_session_free(session);
  er_model_free(model);
  return rc;
}
