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

int er_cmd_bench(int argc, char **argv) {
  /* LLMs have their own figures (tokens/s, not latency percentiles). */
  for (int i = 1; i < argc; i++)
    if (strcmp(argv[i], "--llm") == 0 || (argv[i][0] != '-' && er_cli_is_llm(argv[i]))) return er_cmd_bench_llm(argc, argv);
  const char *path = NULL, *trace = NULL;
  int threads = 1, warmup = 5, iterations = 50, rc = 1;
  bool json = false, reference = false;
  uint64_t seed = 42;
  const char *dim_names[MAX_DIMS];
  int64_t dim_values[MAX_DIMS];
  int n_dims = 0;
  const char *in_names[MAX_INPUTS], *in_files[MAX_INPUTS];
  int n_files = 0;

  er_cli_backend be;
  er_cli_backend_init(&be);
  const char *compare = NULL;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    int used = er_cli_backend_arg("bench", &be, argc, argv, &i);
    if (used < 0) return 1;
    if (used) continue;
    if (strcmp(a, "--compare") == 0) {
      if (++i >= argc) return er_cli_fail("bench", "--compare needs a backend name");
      compare = argv[i];
    } else if (strcmp(a, "--threads") == 0) {
      if (++i >= argc || !er_cli_parse_int(argv[i], &threads) || threads < 1)
        return er_cli_fail("bench", "--threads needs a positive integer");
    } else if (strcmp(a, "--warmup") == 0) {
      if (++i >= argc || !er_cli_parse_int(argv[i], &warmup)) return er_cli_fail("bench", "--warmup needs an integer");
    } else if (strcmp(a, "--iterations") == 0) {
      if (++i >= argc || !er_cli_parse_int(argv[i], &iterations) || iterations < 1)
        return er_cli_fail("bench", "--iterations needs a positive integer");
    } else if (strcmp(a, "--json") == 0) {
      json = true;
    } else if (strcmp(a, "--reference") == 0) {
      reference = true;
    } else if (strcmp(a, "--profile") == 0) {
      if (++i >= argc) return er_cli_fail("bench", "--profile needs a file name");
      trace = argv[i];
    } else if (strcmp(a, "--seed") == 0) {
      int sv;
      if (++i >= argc || !er_cli_parse_int(argv[i], &sv)) return er_cli_fail("bench", "--seed needs an integer");
      seed = (uint64_t)sv + 1;
    } else if (strcmp(a, "--dim") == 0) {
      char *eq;
      int v;
      if (++i >= argc || !(eq = strchr(argv[i], '=')) || !er_cli_parse_int(eq + 1, &v))
        return er_cli_fail("bench", "--dim needs NAME=VALUE");
      if (n_dims >= MAX_DIMS) return er_cli_fail("bench", "more than %d --dim options", MAX_DIMS);
      *eq = '\0';
      dim_names[n_dims] = argv[i];
      dim_values[n_dims++] = v;
    } else if (strcmp(a, "--input") == 0) {
      char *eq;
      if (++i >= argc || !(eq = strchr(argv[i], '='))) return er_cli_fail("bench", "--input needs NAME=FILE");
      if (n_files >= MAX_INPUTS) return er_cli_fail("bench", "more than %d inputs", MAX_INPUTS);
      *eq = '\0';
      in_names[n_files] = argv[i];
      in_files[n_files++] = eq + 1;
    } else if (a[0] == '-') {
      return er_cli_fail("bench", "unknown option '%s' (see edgerun bench --help)", a);
    } else if (!path) {
      path = a;
    } else {
      return er_cli_fail("bench", "unexpected argument '%s'", a);
    }
  }
  if (!path) return er_cli_fail("bench", "no MODEL given (see edgerun bench --help)");
  if (er_cli_backend_load("bench", &be)) return 1;

  er_model *model = NULL;
  er_session *session = NULL;
  er_tensor **inputs = NULL, **outputs = NULL;
  er_named_tensor *named = NULL;
  double *lat = NULL;
  er_node_timing *timings = NULL;
  size_t n_in = 0, n_out = 0;

  double t0 = now_ms();
  er_status st = er_model_load_file(path, NULL, &model);
  if (st != ER_STATUS_OK) return er_cli_fail_status("bench", st, path);
  er_session_options opts;
  er_session_options_init(&opts);
  opts.threads = threads;
  opts.force_reference = reference;
  opts.profile = trace != NULL;
  er_cli_backend_apply(&be, &opts);
  st = er_session_create(model, &opts, &session);
  if (st != ER_STATUS_OK) {
    rc = er_cli_fail_status("bench", st, "creating a session");
    goto done;
  }
  double load_ms = now_ms() - t0;

  n_in = er_model_input_count(model);
  n_out = er_model_output_count(model);
  inputs = calloc(n_in + 1, sizeof *inputs);
  named = calloc(n_in + 1, sizeof *named);
  outputs = calloc(n_out + 1, sizeof *outputs);
  lat = calloc((size_t)iterations, sizeof *lat);
  if (!inputs || !named || !outputs || !lat) {
    rc = er_cli_fail("bench", "out of memory");
    goto done;
  }
  char defaulted[256] = ""; /* symbolic dims no --dim gave, "a, b" */
  for (size_t i = 0; i < n_in; i++) {
    er_value_info info;
    er_model_input_info(model, i, &info);
    named[i].name = info.name;
    for (int f = 0; f < n_files; f++)
      if (strcmp(in_names[f], info.name) == 0) {
        st = er_tensor_read_file(in_files[f], &inputs[i], NULL);
        if (st != ER_STATUS_OK) {
          rc = er_cli_fail_status("bench", st, in_files[f]);
          goto done;
        }
      }
    if (!inputs[i]) {
      int64_t dims[ER_MAX_RANK];
      int rank = info.rank < 0 ? 1 : info.rank;
      for (int d = 0; d < rank; d++) {
        dims[d] = info.rank < 0 ? 1 : info.dims[d];
        if (dims[d] < 0) {
          bool given = false;
          dims[d] = 1;
          for (int k = 0; k < n_dims; k++)
            if (info.dim_params[d] && strcmp(info.dim_params[d], dim_names[k]) == 0) {
              dims[d] = dim_values[k];
              given = true;
            }
          if (!given) note_default(defaulted, sizeof defaulted, info.dim_params[d] ? info.dim_params[d] : "?");
        }
      }
      st = er_tensor_create(info.dtype, rank, dims, &inputs[i]);
      if (st != ER_STATUS_OK) {
        rc = er_cli_fail_status("bench", st, info.name);
        goto done;
      }
      int64_t n = er_tensor_count(inputs[i]);
      if (info.dtype == ER_DTYPE_FLOAT) {
        float *v = er_tensor_data(inputs[i]);
        for (int64_t k = 0; k < n; k++) v[k] = (float)((rng_next(&seed) >> 40) / 8388608.0 - 1.0);
      } else if (info.dtype == ER_DTYPE_DOUBLE) {
        double *v = er_tensor_data(inputs[i]);
        for (int64_t k = 0; k < n; k++) v[k] = (rng_next(&seed) >> 11) / 4503599627370496.0 - 1.0;
      }
    }
    named[i].tensor = inputs[i];
  }

  t0 = now_ms();
  st = er_session_run(session, named, n_in, NULL, n_out, outputs);
  double first_ms = now_ms() - t0;
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
  for (int it = 0; it < warmup + iterations; it++) {
    t0 = now_ms();
    st = er_session_run(session, named, n_in, NULL, n_out, outputs);
    double ms = now_ms() - t0;
    if (st != ER_STATUS_OK) {
      rc = er_cli_fail_status("bench", st, "running the model");
      goto done;
    }
    /* The last run's outputs are kept for --compare. */
    if (it + 1 < warmup + iterations)
      for (size_t k = 0; k < n_out; k++) {
        er_tensor_free(outputs[k]);
        outputs[k] = NULL;
      }
    if (it >= warmup) lat[it - warmup] = ms;
  }
  double mean = 0;
  for (int i = 0; i < iterations; i++) mean += lat[i];
  mean /= iterations;
  qsort(lat, (size_t)iterations, sizeof *lat, cmp_double);
  double p50 = percentile(lat, iterations, 50), p95 = percentile(lat, iterations, 95),
         p99 = percentile(lat, iterations, 99);
  er_session_stats stats;
  er_session_stats_get(session, &stats);
  er_partition_summary part;
  er_session_partition(session, &part);
  long rss = peak_rss_kb();

  /* --compare: the same model and inputs on a second backend, measured the
   * same way in this process. */
  double p50c = 0, max_diff = 0;
  if (compare) {
    er_session_options co = opts;
    const char *names[1] = {compare};
    co.backends = names;
    co.backend_count = 1;
    co.allow_fallback = true;
    co.profile = false;
    er_session *cs = NULL;
    er_tensor **couts = calloc(n_out + 1, sizeof *couts);
    double *clat = calloc((size_t)iterations, sizeof *clat);
    st = couts && clat ? er_session_create(model, &co, &cs) : ER_STATUS_OUT_OF_MEMORY;
    for (int it = 0; st == ER_STATUS_OK && it < warmup + iterations + 1; it++) {
      for (size_t k = 0; k < n_out; k++) {
        er_tensor_free(couts[k]);
        couts[k] = NULL;
      }
      t0 = now_ms();
      st = er_session_run(cs, named, n_in, NULL, n_out, couts);
      if (it > warmup) clat[it - warmup - 1] = now_ms() - t0;
    }
    if (st == ER_STATUS_OK) {
      qsort(clat, (size_t)iterations, sizeof *clat, cmp_double);
      p50c = percentile(clat, iterations, 50);
      for (size_t k = 0; k < n_out; k++) {
        if (er_tensor_dtype(couts[k]) != ER_DTYPE_FLOAT || er_tensor_dtype(outputs[k]) != ER_DTYPE_FLOAT ||
            er_tensor_count(couts[k]) != er_tensor_count(outputs[k]))
          continue;
        const float *a = er_tensor_cdata(outputs[k]), *b = er_tensor_cdata(couts[k]);
        for (int64_t e = 0; e < er_tensor_count(couts[k]); e++)
          if (fabs((double)a[e] - b[e]) > max_diff) max_diff = fabs((double)a[e] - b[e]);
      }
    }
    for (size_t k = 0; couts && k < n_out; k++) er_tensor_free(couts[k]);
    free(couts);
    free(clat);
    er_session_free(cs);
    if (st != ER_STATUS_OK) {
      rc = er_cli_fail_status("bench", st, compare);
      goto done;
    }
  }

  size_t n_nodes = 0;
  op_total *totals = NULL;
  int n_totals = 0;
  if (trace) {
    er_session_profile(session, NULL, 0, &n_nodes);
    timings = calloc(n_nodes + 1, sizeof *timings);
    totals = calloc(n_nodes + 1, sizeof *totals);
    if (!timings || !totals) {
      free(totals);
      rc = er_cli_fail("bench", "out of memory");
      goto done;
    }
    er_session_profile(session, timings, n_nodes, &n_nodes);
    for (size_t i = 0; i < n_nodes; i++) {
      int k = 0;
      while (k < n_totals && strcmp(totals[k].op, timings[i].op_type) != 0) k++;
      if (k == n_totals) totals[n_totals++] = (op_total){timings[i].op_type, 0, 0};
      totals[k].us += timings[i].count ? timings[i].total_us / (double)timings[i].count : 0;
      totals[k].nodes++;
    }
    qsort(totals, (size_t)n_totals, sizeof *totals, cmp_total);
    if (write_trace(trace, timings, n_nodes)) {
      free(totals);
      rc = er_cli_fail("bench", "cannot write trace '%s'", trace);
      goto done;
    }
  }

  if (json) {
    printf("{\"model\": ");
    er_cli_json_string(stdout, path);
    printf(", \"threads\": %d, \"iterations\": %d, \"load_ms\": %.3f, \"first_run_ms\": %.3f, "
           "\"p50_ms\": %.4f, \"p95_ms\": %.4f, \"p99_ms\": %.4f, \"mean_ms\": %.4f, \"min_ms\": %.4f, "
           "\"throughput_ips\": %.2f, \"peak_rss_kb\": %ld, \"arena_bytes\": %llu, \"nodes\": %zu, "
           "\"optimized_nodes\": %zu",
           stats.threads, iterations, load_ms, first_ms, p50, p95, p99, mean, lat[0], 1000.0 / mean, rss,
           (unsigned long long)stats.arena_bytes, stats.node_count, stats.optimized_nodes);
    printf(", \"backend\": ");
    er_cli_json_string(stdout, part.preferred ? part.preferred : "cpu");
    printf(", \"fallback_share\": %.4f", part.fallback_share);
    if (compare) {
      printf(", \"compare\": ");
      er_cli_json_string(stdout, compare);
      printf(", \"compare_p50_ms\": %.4f, \"ratio\": %.4f, \"max_abs_diff\": %.3g", p50c, p50 / p50c, max_diff);
    }
    if (trace) {
      printf(", \"ops\": {");
      for (int k = 0; k < n_totals; k++) {
        printf("%s", k ? ", " : "");
        er_cli_json_string(stdout, totals[k].op);
        printf(": %.2f", totals[k].us / 1000.0);
      }
      printf("}");
    }
    printf("}\n");
  } else {
    printf("model:          %s\n", path);
    printf("threads:        %d\n", stats.threads);
    printf("nodes:          %zu (%zu on optimized kernels)\n", stats.node_count, stats.optimized_nodes);
    printf("load:           %.2f ms (file to ready session)\n", load_ms);
    printf("first run:      %.3f ms\n", first_ms);
    printf("latency:        p50 %.3f ms, p95 %.3f ms, p99 %.3f ms, mean %.3f ms, min %.3f ms (%d runs)\n", p50,
           p95, p99, mean, lat[0], iterations);
    printf("throughput:     %.1f inferences/s\n", 1000.0 / mean);
    printf("peak RSS:       %ld KiB\n", rss);
    printf("arena:          %llu bytes\n", (unsigned long long)stats.arena_bytes);
    if (part.fallback_nodes)
      printf("placement:      %zu of %zu nodes on the CPU instead of %s (%.1f%% of the MACs)\n", part.fallback_nodes,
             part.node_count, part.preferred, 100.0 * part.fallback_share);
    if (compare)
      printf("compare:        %s p50 %.3f ms; ratio %.3f (this / %s); max abs output difference %.3g\n", compare,
             p50c, p50 / p50c, compare, max_diff);
    if (trace) {
      printf("per op (mean ms per run):\n");
      for (int k = 0; k < n_totals; k++)
        printf("  %-24s %8.3f  (%d nodes)\n", totals[k].op, totals[k].us / 1000.0, totals[k].nodes);
      printf("trace:          %s\n", trace);
    }
  }
  free(totals);
  rc = 0;
done:
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
