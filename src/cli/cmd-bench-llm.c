/* cmd-bench-llm.c - edgerun bench MODEL.gguf --llm: the figures
 * llama-bench prints (prompt processing and token generation tokens/s),
 * plus time to first token, peak RSS, KV-cache bytes, and the machine's
 * streaming-read bandwidth measured in the same run with the decode bound
 * it implies (decode reads every weight once per token, so bandwidth /
 * weight bytes is the most tokens/s any engine can decode).
 *
 * As llama-bench: prompt processing feeds -p tokens (BOS, then random
 * ids) to an empty cache in one batch; generation starts from an empty
 * cache with BOS and feeds -n single tokens (random ids), one decode each.
 * Random ids come from a fixed seed, so runs compare. */
#define _GNU_SOURCE
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "cli/cli-llm.h"

void er_cmd_bench_llm_help(FILE *out) {
  fprintf(out,
          "usage: edgerun bench MODEL.gguf --llm [-p 128] [-n 64] [-r 3] [--json] [options]\n"
          "\n"
          "Prompt processing (pp) and token generation (tg) speed as llama-bench measures them,\n"
          "time to first token, peak RSS, KV-cache bytes, and the measured memory bandwidth\n"
          "with the decode bound it gives.\n"
          "  -p N             prompt tokens (default 128; 0 = skip)\n"
          "  -n N             generated tokens (default 64; 0 = skip)\n"
          "  -r N             repetitions (default 3; the mean and spread are reported)\n"
          "  --no-bandwidth   skip the bandwidth measurement\n"
          "  --json           one JSON object\n"
          "%s",
          er_cli_llm_help);
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* ---- memory bandwidth ------------------------------------------------------- */

/* A buffer well past any last-level cache, read by `threads` threads at
 * once, each its own contiguous part, several times; the best pass
 * counts. Reads only: decode streams weights and writes little. */
#define BW_BYTES ((size_t)1 << 30)

typedef struct bw_arg {
  const uint64_t *p;
  size_t n;
  uint64_t sum;
  pthread_barrier_t *start;
} bw_arg;

static void *bw_read(void *v) {
  bw_arg *a = v;
  pthread_barrier_wait(a->start);
  /* Four independent chains so the loads, not the adds, set the pace; the
   * compiler vectorizes this loop. */
  uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  for (size_t i = 0; i + 4 <= a->n; i += 4) {
    s0 += a->p[i];
    s1 += a->p[i + 1];
    s2 += a->p[i + 2];
    s3 += a->p[i + 3];
  }
  a->sum = s0 + s1 + s2 + s3;
  return NULL;
}

/* Bytes per second reading with `threads` threads; 0 when it could not run. */
static double bandwidth(const uint64_t *buf, size_t n, int threads) {
  double best = 0;
  for (int pass = 0; pass < 4; pass++) {
    pthread_t tid[64];
    bw_arg args[64];
    pthread_barrier_t start;
    pthread_barrier_init(&start, NULL, (unsigned)threads + 1);
    for (int t = 0; t < threads; t++) {
      args[t] = (bw_arg){buf + n * (size_t)t / (size_t)threads, n / (size_t)threads, 0, &start};
      if (pthread_create(&tid[t], NULL, bw_read, &args[t]) != 0) return 0;
    }
    double t0 = now_s();
    pthread_barrier_wait(&start);
    uint64_t sink = 0;
    for (int t = 0; t < threads; t++) {
      pthread_join(tid[t], NULL);
      sink += args[t].sum;
    }
    double dt = now_s() - t0;
    pthread_barrier_destroy(&start);
    if (sink == 42) fputs("", stderr); /* keeps the sums live */
    double bps = (double)(n / (size_t)threads * (size_t)threads) * 8.0 / dt;
    if (bps > best) best = bps;
  }
  return best;
}

/* ---- the runs ------------------------------------------------------------------ */

typedef struct stat_acc {
  double v[64];
  int n;
} stat_acc;

static void acc(stat_acc *s, double v) {
  if (s->n < 64) s->v[s->n++] = v;
}
static double mean_of(const stat_acc *s) {
  double m = 0;
  for (int i = 0; i < s->n; i++) m += s->v[i];
  return s->n ? m / s->n : 0;
}
static double sd_of(const stat_acc *s) {
  if (s->n < 2) return 0;
  double m = mean_of(s), v = 0;
  for (int i = 0; i < s->n; i++) v += (s->v[i] - m) * (s->v[i] - m);
  return sqrt(v / (s->n - 1));
}

static uint64_t rng_next(uint64_t *s) {
  *s = *s * 6364136223846793005ULL + 1442695040888963407ULL;
  return *s >> 33;
}

/* Bytes read per decoded token: every weight once (the output matrix in
 * full; the embedding table only a row, which is negligible unless it is
 * also the tied output). */
static double bytes_per_token(er_llm *llm, const er_llm_info *info) {
  double per_token = (double)info->weight_bytes;
  const char *tname;
  uint64_t tbytes;
  for (size_t i = 0; i < er_llm_tensor_count(llm); i++) {
    const char *name;
    er_llm_tensor_info(llm, i, &name, &tname, NULL, &tbytes);
    if (strcmp(name, "token_embd.weight") == 0) {
      bool tied = true;
      for (size_t j = 0; j < er_llm_tensor_count(llm); j++) {
        const char *n2;
        er_llm_tensor_info(llm, j, &n2, NULL, NULL, NULL);
        if (strcmp(n2, "output.weight") == 0) tied = false;
      }
      if (!tied) per_token -= (double)tbytes;
    }
  }
  return per_token;
}

int er_cmd_bench_llm(int argc, char **argv) {
  const char *cmd = "bench", *model = NULL;
  int n_prompt = 128, n_gen = 64, reps = 3;
  bool json = false, do_bw = true;
  er_cli_llm lo;
  er_cli_llm_init(&lo);
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    int r = er_cli_llm_arg(cmd, &lo, argc, argv, &i);
    if (r < 0) return -r;
    if (r > 0) continue;
    if (strcmp(a, "--llm") == 0) {
      continue;
    } else if (strcmp(a, "-p") == 0) {
      if (++i >= argc || !er_cli_parse_int(argv[i], &n_prompt)) return er_cli_fail(cmd, "-p needs a token count");
    } else if (strcmp(a, "-n") == 0) {
      if (++i >= argc || !er_cli_parse_int(argv[i], &n_gen)) return er_cli_fail(cmd, "-n needs a token count");
    } else if (strcmp(a, "-r") == 0 || strcmp(a, "--repetitions") == 0) {
      if (++i >= argc || !er_cli_parse_int(argv[i], &reps) || reps < 1 || reps > 64)
        return er_cli_fail(cmd, "-r needs 1 to 64");
    } else if (strcmp(a, "--json") == 0) {
      json = true;
    } else if (strcmp(a, "--no-bandwidth") == 0) {
      do_bw = false;
    } else if (a[0] == '-') {
      return er_cli_fail(cmd, "unknown option '%s' for --llm (see bench --llm --help)", a);
    } else if (!model) {
      model = a;
    } else {
      return er_cli_fail(cmd, "unexpected argument '%s'", a);
    }
  }
  if (!model) return er_cli_fail(cmd, "no model given");
  if (lo.ctx.n_ctx == 0) lo.ctx.n_ctx = n_prompt + n_gen + 8;
  if (lo.ctx.n_batch == 0) lo.ctx.n_batch = n_prompt > 0 && n_prompt < 512 ? n_prompt : 512;
  double t_load = now_s();
  er_llm *llm = NULL;
  er_llm_context *ctx = NULL;
  int rc = er_cli_llm_open(cmd, model, &lo, &llm, &ctx);
  if (rc) return rc;
  t_load = now_s() - t_load;
  er_llm_info info;
  er_llm_info_get(llm, &info);
  er_llm_context_stats cs;
  er_llm_context_stats_get(ctx, &cs);
  int32_t *toks = malloc(((size_t)(n_prompt > n_gen ? n_prompt : n_gen) + 2) * sizeof *toks);
  int32_t *seqs = calloc((size_t)n_prompt + 2, sizeof *seqs);
  if (!toks || !seqs) {
    rc = er_cli_fail(cmd, "out of memory");
    goto done;
  }
  uint64_t rng = 1234;
  stat_acc pp = {0}, tg = {0}, ttft = {0};
  /* One untimed warm-up of each, as llama-bench does. */
  for (int rep = -1; rep < reps && !rc; rep++) {
    if (n_prompt > 0) {
      er_llm_seq_truncate(ctx, 0, 0);
      toks[0] = info.bos >= 0 ? info.bos : 0;
      for (int i = 1; i < n_prompt; i++) toks[i] = (int32_t)(rng_next(&rng) % (uint64_t)info.n_vocab);
      er_llm_batch b = {(size_t)n_prompt, toks, seqs, NULL};
      double t0 = now_s();
      er_status st = er_llm_decode(ctx, &b);
      double dt = now_s() - t0;
      if (st != ER_STATUS_OK) {
        rc = er_cli_fail_status(cmd, st, "prompt processing");
        break;
      }
      /* Time to first token: the prompt's pass and picking the token. */
      const float *lg = er_llm_logits(ctx, 0);
      int64_t best = 0;
      for (int64_t v = 1; v < info.n_vocab; v++)
        if (lg[v] > lg[best]) best = v;
      double ttf = now_s() - t0;
      if (rep >= 0) {
        acc(&pp, (double)n_prompt / dt);
        acc(&ttft, ttf * 1e3);
      }
    }
    if (n_gen > 0) {
      er_llm_seq_truncate(ctx, 0, 0);
      int32_t tok = info.bos >= 0 ? info.bos : 0, seq0 = 0;
      double t0 = now_s();
      for (int i = 0; i < n_gen; i++) {
        er_llm_batch b = {1, &tok, &seq0, NULL};
        er_status st = er_llm_decode(ctx, &b);
        if (st != ER_STATUS_OK) {
          rc = er_cli_fail_status(cmd, st, "token generation");
          break;
        }
        tok = (int32_t)(rng_next(&rng) % (uint64_t)info.n_vocab);
      }
      double dt = now_s() - t0;
      if (rep >= 0 && !rc) acc(&tg, (double)n_gen / dt);
    }
  }
  if (rc) goto done;
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  double rss_mb = (double)ru.ru_maxrss / 1024.0;
  /* Bandwidth after the runs (its buffer does not count in the RSS). */
  double bw1 = 0, bwt = 0;
  if (do_bw) {
    uint64_t *buf = malloc(BW_BYTES);
    if (buf) {
      memset(buf, 1, BW_BYTES);
      bw1 = bandwidth(buf, BW_BYTES / 8, 1);
      bwt = cs.threads > 1 ? bandwidth(buf, BW_BYTES / 8, cs.threads) : bw1;
      free(buf);
    }
  }
  double per_token = bytes_per_token(llm, &info);
  double bound = bwt > 0 ? bwt / per_token : 0;
  if (json) {
    printf("{\"model\": ");
    er_cli_json_string(stdout, model);
    printf(", \"architecture\": \"%s\", \"params\": %llu, \"weight_bytes\": %llu, \"bytes_per_token\": %.0f,\n"
           " \"threads\": %d, \"n_prompt\": %d, \"n_gen\": %d, \"repetitions\": %d, \"load_s\": %.3f,\n"
           " \"pp_tps\": %.2f, \"pp_tps_sd\": %.2f, \"tg_tps\": %.2f, \"tg_tps_sd\": %.2f, \"ttft_ms\": %.2f,\n"
           " \"peak_rss_mb\": %.1f, \"kv_bytes\": %llu, \"bandwidth_1t_gbs\": %.2f, \"bandwidth_gbs\": %.2f,\n"
           " \"decode_bound_tps\": %.1f, \"kernels\": ",
           info.architecture, (unsigned long long)info.n_params, (unsigned long long)info.weight_bytes, per_token,
           cs.threads, n_prompt, n_gen, reps, t_load, mean_of(&pp), sd_of(&pp), mean_of(&tg), sd_of(&tg),
           mean_of(&ttft), rss_mb, (unsigned long long)cs.kv_bytes, bw1 / 1e9, bwt / 1e9, bound);
    er_cli_json_string(stdout, cs.kernels);
    printf("}\n");
  } else {
    printf("model         %s (%s, %.1f M params, %.1f MB of weights)\n", model, info.architecture,
           (double)info.n_params / 1e6, (double)info.weight_bytes / 1e6);
    printf("threads       %d      kernels: %s\n", cs.threads, cs.kernels);
    printf("load          %.3f s\n", t_load);
    if (n_prompt) printf("pp%-4d        %8.2f +/- %.2f tokens/s\n", n_prompt, mean_of(&pp), sd_of(&pp));
    if (n_gen) printf("tg%-4d        %8.2f +/- %.2f tokens/s\n", n_gen, mean_of(&tg), sd_of(&tg));
    if (n_prompt) printf("TTFT          %8.2f ms (pp%d + first token)\n", mean_of(&ttft), n_prompt);
    printf("peak RSS      %8.1f MB     KV cache %.1f MB (%lld positions)\n", rss_mb, (double)cs.kv_bytes / 1e6,
           (long long)cs.n_ctx);
    if (do_bw)
      printf("bandwidth     %.2f GB/s (1 thread), %.2f GB/s (%d threads): decode bound %.1f tokens/s "
             "(%.1f MB read per token); tg at %.0f%% of it\n",
             bw1 / 1e9, bwt / 1e9, cs.threads, bound, per_token / 1e6,
             bound > 0 ? 100.0 * mean_of(&tg) / bound : 0.0);
  }
done:
  free(toks);
  free(seqs);
  er_llm_context_free(ctx);
  er_llm_free(llm);
  return rc;
}
