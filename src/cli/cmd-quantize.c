/* cmd-quantize.c - `edgerun quantize`: a float ONNX model in, a standard QDQ
 * model out, with a JSON and HTML report of what it cost. The work is the
 * library's (src/quant/quantize.h); this file parses options and prints. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli-llm.h"
#include "edgerun-quant.h"

void er_cmd_quantize_help(FILE *out) {
  fprintf(out,
          "usage: edgerun quantize MODEL --calib DATA -o OUT [options]\n"
          "       edgerun quantize MODEL.gguf -o OUT.gguf --type T [--calib-text FILE] [options]\n\n"
          "A GGUF LLM is re-encoded to T: Q4_K_M (default), Q5_K_M, Q4_K_S, Q5_K_S, Q6_K,\n"
          "Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, F16, BF16 or F32, with llama.cpp's choice of\n"
          "wider types for sensitive tensors (output, attn_v, ffn_down).\n"
          "  --calib-text FILE        run the model over FILE and weigh each block's rounding\n"
          "                           error by its columns' activation energy (an importance\n"
          "                           matrix, llama.cpp's imatrix idea)\n"
          "  --calib-ctx N, --calib-chunks N   chunk length (512) and at most N chunks\n"
          "  --imatrix FILE           use this importance matrix (llama-imatrix's GGUF format)\n"
          "  --imatrix-out FILE       write the measured one (llama-quantize --imatrix reads it)\n"
          "  --keep TENSOR,...        copy these tensors as they are\n"
          "  --keep-float auto:X%%     keep the fewest tensors at --keep-type (Q8_0, or F16)\n"
          "                           so the perplexity on --eval-text rises at most X%%\n"
          "                           (embedding and output first, then by measured error)\n"
          "  --eval-text FILE         held-out text for the budget (default: the calibration\n"
          "                           text); --eval-ctx N (512) and --eval-chunks N its chunks\n"
          "  --report PREFIX          PREFIX.json and PREFIX.html: each tensor's type, bytes\n"
          "                           and error (default: OUT without .gguf, plus .report)\n"
          "  --fp16-safe              for accelerators computing in fp16: where the SwiGLU\n"
          "                           product came within 16x of fp16's range on the\n"
          "                           --calib-text, divide that layer's ffn_up and multiply\n"
          "                           its ffn_down by a power of two (same function, product\n"
          "                           in range); fails naming any other site beyond fp16\n\n"
          "Post-training static quantization to a standard ONNX QDQ model (onnxruntime\n"
          "runs it too). DATA is a folder of .npy/.pb files matched to inputs by name,\n"
          "ONNX test_data_set_N folders, one .npy/.pb file, or a folder of PNG/JPEG\n"
          "images (see --preprocess). Memory stays flat however many samples.\n\n"
          "scheme:\n"
          "  --weights int8|int4      int8 (default); int4 = block-wise int4 for MatMul and\n"
          "                           Gemm weights (DequantizeLinear block_size, opset 21)\n"
          "  --block-size N           int4 block along K: 32 (default), 64 or 128\n"
          "  --per-tensor             one weight scale per tensor (default: per channel)\n"
          "  --reduce-range           int8 weights within [-64, 64] (7 bits): on x86 CPUs\n"
          "                           without VNNI they run on exact vpmaddubsw kernels,\n"
          "                           1.2-1.4x faster per multiply-add; costs ~6 dB of\n"
          "                           weight SQNR\n"
          "  --channel-axis OP=AXIS   per-channel axis override for OP's weights\n"
          "  --activations uint8|int8|float\n"
          "                           activation type (default uint8); float = weight-only\n"
          "  --symmetric              symmetric activations (default asymmetric)\n"
          "  --method minmax|percentile|entropy|mse   range calibration (default minmax)\n"
          "  --percentile P           for --method percentile (default 99.999)\n"
          "protection:\n"
          "  --exclude-op TYPE,...    leave these op types in float\n"
          "  --exclude-node NAME,...  leave these nodes in float\n"
          "  --keep-float NAME,...    the same, by name\n"
          "  --keep-float auto:BUDGET keep the fewest, most sensitive layers in float so that\n"
          "                           the relative output error is <= BUDGET (auto:0.02 or\n"
          "                           auto:2%%), the output SQNR >= N dB (auto:30dB), or with\n"
          "                           --labels the top-1 drop is <= BUDGET points\n"
          "  --no-fold                do not fold BatchNorm / affine ops into Conv first\n"
          "  --no-bias-correction     keep biases as they are (default: subtract the mean\n"
          "                           shift that weight rounding causes, measured on the\n"
          "                           calibration data)\n"
          "  --outputs auto|quantized|float\n"
          "                           graph outputs of quantized layers: through Q/DQ where\n"
          "                           that measures closer to the float model on the\n"
          "                           evaluation samples (auto, default), always (fully\n"
          "                           quantized graphs, as onnxruntime writes them), never\n"
          "data:\n"
          "  --eval DATA              evaluation samples for the report and auto (default:\n"
          "                           held-out calibration samples with auto, else the\n"
          "                           calibration samples)\n"
          "  --labels FILE            labels (.npy or one integer per line) of the evaluation\n"
          "                           samples: report accuracy, budget in points\n"
          "  --holdout N              calibration samples held out for auto (default: a fifth,\n"
          "                           at most 32)\n"
          "  --calib-samples N        use at most N calibration samples\n"
          "  --batch N                samples per run for inputs with a free batch (default 1)\n"
          "  --preprocess SPEC        images: size=HxW,layout=nchw|nhwc,channels=rgb|bgr|gray,\n"
          "                           scale=F,mean=F[:F:F],std=F[:F:F] (default scale=1/255)\n"
          "output:\n"
          "  --report PREFIX          write PREFIX.json and PREFIX.html (default: OUT without\n"
          "                           .onnx, plus .report)\n"
          "  --threads N, --quiet\n");
}

static bool parse_i64(const char *s, int64_t *out) {
  char *end;
  errno = 0;
  long long v = strtoll(s, &end, 10);
  if (errno || end == s || *end || v < 0) return false;
  *out = v;
  return true;
}

/* quantize MODEL.gguf -o OUT.gguf --type T: the LLM path. */
static int quantize_gguf(int argc, char **argv) {
  const char *cmd = "quantize", *model = NULL, *out = NULL, *report = NULL;
  er_llm_quantize_options o;
  er_llm_quantize_options_init(&o);
  o.progress = true;
  char keep_buf[4096];
  const char *keep[64];
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    const char *v = i + 1 < argc ? argv[i + 1] : NULL;
    bool takes = strcmp(a, "-o") == 0 || strcmp(a, "--output") == 0 || strcmp(a, "--type") == 0 ||
                 strcmp(a, "--threads") == 0 || strcmp(a, "--keep") == 0 || strcmp(a, "--calib-text") == 0 ||
                 strcmp(a, "--calib-ctx") == 0 || strcmp(a, "--calib-chunks") == 0 || strcmp(a, "--imatrix") == 0 ||
                 strcmp(a, "--imatrix-out") == 0 || strcmp(a, "--keep-float") == 0 || strcmp(a, "--eval-text") == 0 ||
                 strcmp(a, "--eval-chunks") == 0 || strcmp(a, "--eval-ctx") == 0 || strcmp(a, "--keep-type") == 0 || strcmp(a, "--report") == 0;
    if (takes && !v) return er_cli_fail(cmd, "%s needs a value", a);
    if (takes) i++;
    int64_t n;
    if (strcmp(a, "-o") == 0 || strcmp(a, "--output") == 0) {
      out = v;
    } else if (strcmp(a, "--type") == 0) {
      o.type = v;
    } else if (strcmp(a, "--threads") == 0) {
      if (!er_cli_parse_int(v, &o.threads) || o.threads < 1) return er_cli_fail(cmd, "--threads needs a count");
    } else if (strcmp(a, "--keep") == 0) {
      snprintf(keep_buf, sizeof keep_buf, "%s", v);
      for (char *tok = strtok(keep_buf, ","); tok && o.n_keep < 64; tok = strtok(NULL, ",")) keep[o.n_keep++] = tok;
      o.keep = keep;
    } else if (strcmp(a, "--calib-text") == 0) {
      o.calib_text = v;
    } else if (strcmp(a, "--imatrix") == 0) {
      o.imatrix = v;
    } else if (strcmp(a, "--imatrix-out") == 0) {
      o.imatrix_out = v;
    } else if (strcmp(a, "--eval-text") == 0) {
      o.eval_text = v;
    } else if (strcmp(a, "--keep-type") == 0) {
      o.keep_type = v;
    } else if (strcmp(a, "--report") == 0) {
      report = v;
    } else if (strcmp(a, "--calib-ctx") == 0 || strcmp(a, "--calib-chunks") == 0 || strcmp(a, "--eval-chunks") == 0 ||
               strcmp(a, "--eval-ctx") == 0) {
      if (!parse_i64(v, &n) || n < 1) return er_cli_fail(cmd, "%s '%s' is not a positive count", a, v);
      if (strcmp(a, "--calib-ctx") == 0) o.calib_ctx = n;
      else if (strcmp(a, "--calib-chunks") == 0) o.calib_chunks = n;
      else if (strcmp(a, "--eval-ctx") == 0) o.eval_ctx = n;
      else o.eval_chunks = n;
    } else if (strcmp(a, "--keep-float") == 0) {
      /* auto:2% or auto:0.02: the perplexity budget. */
      char *end;
      if (strncmp(v, "auto:", 5) != 0)
        return er_cli_fail(cmd, "--keep-float '%s' for a GGUF model must be auto:X%% (use --keep for names)", v);
      double x = strtod(v + 5, &end);
      if (end == v + 5 || x <= 0) return er_cli_fail(cmd, "--keep-float '%s': the budget must be a number > 0", v);
      if (*end == '%') {
        x /= 100;
        end++;
      }
      if (*end) return er_cli_fail(cmd, "--keep-float '%s': write the budget as auto:2%% or auto:0.02", v);
      o.max_ppl_rise = x;
    } else if (strcmp(a, "--quiet") == 0) {
      o.progress = false;
    } else if (strcmp(a, "--fp16-safe") == 0) {
      o.fp16_safe = true;
    } else if (a[0] == '-') {
      return er_cli_fail(cmd, "unknown option '%s' for a GGUF model (see --help)", a);
    } else if (!model) {
      model = a;
    } else {
      return er_cli_fail(cmd, "unexpected argument '%s'", a);
    }
  }
  if (!model || !out) return er_cli_fail(cmd, "give MODEL.gguf and -o OUT.gguf");
  if (!er_cli_is_gguf(model))
    return er_cli_fail(cmd, "'%s' is an ONNX decoder; quantize re-encodes GGUF files only (ONNX decoders run as they "
                       "are, their MatMulNBits weights converted at load)", model);
  if (o.fp16_safe && !o.calib_text)
    return er_cli_fail(cmd, "--fp16-safe needs --calib-text FILE: the scales come from the activations measured on it");
  if (o.max_ppl_rise > 0 && !o.calib_text && !o.eval_text)
    return er_cli_fail(cmd, "--keep-float auto: needs --eval-text FILE (or --calib-text) to measure perplexity on");
  char report_buf[4096];
  if (!report) {
    size_t n = strlen(out);
    if (n > 5 && strcmp(out + n - 5, ".gguf") == 0) n -= 5;
    snprintf(report_buf, sizeof report_buf, "%.*s.report", (int)n, out);
    report = report_buf;
  }
  o.report = report;
  er_llm_quantize_result r;
  er_status st = er_llm_quantize(model, out, &o, &r);
  if (st != ER_STATUS_OK) return er_cli_fail_status(cmd, st, "quantizing");
  fprintf(stderr, "%s: %zu tensors quantized to %s, %zu copied; %.2f MB -> %.2f MB\n", out, r.tensors_quantized,
          o.type, r.tensors_copied, (double)r.bytes_in / 1e6, (double)r.bytes_out / 1e6);
  if (r.calib_chunks)
    fprintf(stderr, "importance matrix: %lld chunks, %lld tokens\n", (long long)r.calib_chunks,
            (long long)r.calib_tokens);
  if (o.fp16_safe)
    fprintf(stderr, "fp16-safe: %d layers' SwiGLU product scaled into fp16's range\n", r.fp16_scaled_layers);
  if (o.max_ppl_rise > 0)
    fprintf(stderr, "perplexity %.4f -> %.4f (%+.2f%%, budget %.2f%%): %zu tensors kept at %s\n", r.ppl_in, r.ppl_out,
            100 * (r.ppl_out / r.ppl_in - 1), 100 * o.max_ppl_rise, r.tensors_kept_wide, o.keep_type);
  fprintf(stderr, "report: %s.json, %s.html\n", report, report);
  return 0;
}

/* The report's file prefix: --report's, else the output's name without
 * .onnx, plus ".report". */
static void report_prefix(const char *out, const char *report, char *prefix, size_t size) {
  if (report) {
    snprintf(prefix, size, "%s", report);
    return;
  }
  snprintf(prefix, size, "%s", out);
  size_t n = strlen(prefix);
  if (n > 5 && strcmp(prefix + n - 5, ".onnx") == 0) prefix[n - 5] = '\0';
  strncat(prefix, ".report", size - strlen(prefix) - 1);
}

/* What the quantizer did and measured, as a few lines on stdout. */
static void print_summary(const er_qreport *r, const char *out, const char *jpath, const char *hpath) {
  size_t nq = 0;
  for (size_t i = 0; i < r->n_layers; i++) nq += r->layers[i].quantized;
  printf("quantized %zu of %zu layers (%s weights, %s activations, %s calibration on %lld samples)\n", nq,
         r->n_layers, r->weights, r->activations, r->method, (long long)r->calib_samples);
  printf("model file: %llu -> %llu bytes (%.1f%%)\n", (unsigned long long)r->float_file_bytes,
         (unsigned long long)r->quant_file_bytes,
         r->float_file_bytes ? 100.0 * (double)r->quant_file_bytes / (double)r->float_file_bytes : 0.0);
  const er_qcompare *c = r->cmp;
  if (c) {
    for (size_t i = 0; i < c->n_tensors; i++) {
      if (!c->tensors[i].is_output) continue;
      double db = er_qmetric_sqnr(&c->tensors[i].m);
      printf("output %s: SQNR %s%.2f dB, cosine %.6f (%lld %s samples)\n", c->tensors[i].name,
             isinf(db) ? "inf " : "", isinf(db) ? 0.0 : db, er_qmetric_cosine(&c->tensors[i].m),
             (long long)c->samples, r->eval_path ? "evaluation" : r->eval_on_calib ? "calibration" : "held-out");
    }
    if (c->rows) printf("top-1 agreement with the float model: %.2f%%\n", 100.0 * c->agree / c->rows);
    if (c->labelled)
      printf("top-1 accuracy: float %.2f%%, quantized %.2f%%\n", 100.0 * c->f_top1 / c->labelled,
             100.0 * c->q_top1 / c->labelled);
  }
  if (r->auto_keep) {
    printf("keep-float auto: %s (%.4g -> %.4g), kept float:", r->budget_met ? "budget met" : "BUDGET NOT MET",
           r->auto_metric_before, r->auto_metric_after);
    if (!r->n_kept) printf(" none");
    for (size_t i = 0; i < r->n_kept; i++) printf(" %s", r->kept[i]);
    printf("\n");
  }
  printf("wrote %s, %s, %s\n", out, jpath, hpath);
}

int er_cmd_quantize(int argc, char **argv) {
  for (int i = 1; i < argc; i++)
    if (argv[i][0] != '-' && er_cli_is_llm(argv[i])) return quantize_gguf(argc, argv);
  const char *model = NULL, *calib = NULL, *out = NULL, *report = NULL, *prep = NULL;
  bool quiet = false;
  er_quant_options o;
  er_quant_options_init(&o);
  o.progress = true;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    const char *v = i + 1 < argc ? argv[i + 1] : NULL;
#define NEED(what)                                                            \
  do {                                                                        \
    if (!v) return er_cli_fail("quantize", "%s needs %s", a, what);          \
    i++;                                                                      \
  } while (0)
    if (strcmp(a, "--calib") == 0) {
      NEED("a data path");
      calib = v;
    } else if (strcmp(a, "-o") == 0 || strcmp(a, "--out") == 0) {
      NEED("an output path");
      out = v;
    } else if (strcmp(a, "--weights") == 0) {
      NEED("int8 or int4");
      if (strcmp(v, "int8") == 0) o.weights = ER_QW_INT8;
      else if (strcmp(v, "int4") == 0) o.weights = ER_QW_INT4;
      else return er_cli_fail("quantize", "--weights '%s' is not int8 or int4", v);
    } else if (strcmp(a, "--block-size") == 0) {
      NEED("32, 64 or 128");
      if (!er_cli_parse_int(v, &o.block_size)) return er_cli_fail("quantize", "--block-size '%s' is not a number", v);
    } else if (strcmp(a, "--per-tensor") == 0) {
      o.per_channel = false;
    } else if (strcmp(a, "--per-channel") == 0) {
      o.per_channel = true;
    } else if (strcmp(a, "--reduce-range") == 0) {
      o.reduce_range = true;
    } else if (strcmp(a, "--channel-axis") == 0) {
      NEED("OP=AXIS");
      o.channel_axis = v;
    } else if (strcmp(a, "--activations") == 0) {
      NEED("uint8, int8 or float");
      if (strcmp(v, "uint8") == 0) o.activations = ER_QA_UINT8;
      else if (strcmp(v, "int8") == 0) o.activations = ER_QA_INT8;
      else if (strcmp(v, "float") == 0) o.activations = ER_QA_FLOAT;
      else return er_cli_fail("quantize", "--activations '%s' is not uint8, int8 or float", v);
    } else if (strcmp(a, "--symmetric") == 0) {
      o.symmetric = true;
    } else if (strcmp(a, "--method") == 0) {
      NEED("minmax, percentile, entropy or mse");
      if (strcmp(v, "minmax") == 0) o.method = ER_CALIB_MINMAX;
      else if (strcmp(v, "percentile") == 0) o.method = ER_CALIB_PERCENTILE;
      else if (strcmp(v, "entropy") == 0) o.method = ER_CALIB_ENTROPY;
      else if (strcmp(v, "mse") == 0) o.method = ER_CALIB_MSE;
      else return er_cli_fail("quantize", "--method '%s' is not minmax, percentile, entropy or mse", v);
    } else if (strcmp(a, "--percentile") == 0) {
      NEED("a percentage");
      if (!er_cli_parse_double(v, &o.percentile) || o.percentile <= 50 || o.percentile > 100)
        return er_cli_fail("quantize", "--percentile '%s' must be in (50, 100]", v);
    } else if (strcmp(a, "--exclude-op") == 0) {
      NEED("op types");
      o.exclude_ops = v;
    } else if (strcmp(a, "--exclude-node") == 0) {
      NEED("node names");
      o.exclude_nodes = v;
    } else if (strcmp(a, "--keep-float") == 0) {
      NEED("node names or auto:BUDGET");
      o.keep_float = v;
    } else if (strcmp(a, "--no-fold") == 0) {
      o.fold = false;
    } else if (strcmp(a, "--no-bias-correction") == 0) {
      o.bias_correction = false;
    } else if (strcmp(a, "--outputs") == 0) {
      NEED("auto, quantized or float");
      if (strcmp(v, "auto") == 0) o.outputs = ER_QOUT_AUTO;
      else if (strcmp(v, "quantized") == 0) o.outputs = ER_QOUT_QUANTIZED;
      else if (strcmp(v, "float") == 0) o.outputs = ER_QOUT_FLOAT;
      else return er_cli_fail("quantize", "--outputs '%s' is not auto, quantized or float", v);
    } else if (strcmp(a, "--eval") == 0) {
      NEED("a data path");
      o.eval_path = v;
    } else if (strcmp(a, "--labels") == 0) {
      NEED("a labels file");
      o.labels_path = v;
    } else if (strcmp(a, "--holdout") == 0) {
      NEED("a sample count");
      if (!parse_i64(v, &o.holdout) || o.holdout < 1) return er_cli_fail("quantize", "--holdout '%s' is not a positive count", v);
    } else if (strcmp(a, "--calib-samples") == 0) {
      NEED("a sample count");
      if (!parse_i64(v, &o.data.limit) || o.data.limit < 1)
        return er_cli_fail("quantize", "--calib-samples '%s' is not a positive count", v);
    } else if (strcmp(a, "--batch") == 0) {
      NEED("a batch size");
      if (!er_cli_parse_int(v, &o.data.batch) || o.data.batch < 1) return er_cli_fail("quantize", "--batch '%s' is not a positive number", v);
    } else if (strcmp(a, "--preprocess") == 0) {
      NEED("a preprocessing spec");
      prep = v;
    } else if (strcmp(a, "--report") == 0) {
      NEED("a file prefix");
      report = v;
    } else if (strcmp(a, "--threads") == 0) {
      NEED("a thread count");
      if (!er_cli_parse_int(v, &o.threads) || o.threads < 1) return er_cli_fail("quantize", "--threads needs a positive integer");
    } else if (strcmp(a, "--quiet") == 0 || strcmp(a, "-q") == 0) {
      quiet = true;
    } else if (a[0] == '-') {
      return er_cli_fail("quantize", "unknown option '%s' (see edgerun quantize --help)", a);
    } else if (!model) {
      model = a;
    } else {
      return er_cli_fail("quantize", "unexpected argument '%s'", a);
    }
#undef NEED
  }
  if (!model) return er_cli_fail("quantize", "no MODEL given (see edgerun quantize --help)");
  if (!calib) return er_cli_fail("quantize", "--calib DATA is required");
  if (!out) return er_cli_fail("quantize", "-o OUT is required");
  if (prep) {
    er_status st = er_image_prep_parse(&o.data.image, prep);
    if (st != ER_STATUS_OK) return er_cli_fail_status("quantize", st, "--preprocess");
  }
  if (quiet) o.progress = false;

  char prefix[4096];
  report_prefix(out, report, prefix, sizeof prefix);
  er_qreport *r = NULL;
  er_status st = er_quantize(model, calib, out, &o, &r);
  if (st != ER_STATUS_OK) {
    int rc = er_cli_fail_status("quantize", st, model);
    er_qreport_free(r);
    return rc;
  }
  char jpath[4200], hpath[4200];
  snprintf(jpath, sizeof jpath, "%s.json", prefix);
  snprintf(hpath, sizeof hpath, "%s.html", prefix);
  st = er_qreport_write_json(r, jpath);
  if (st == ER_STATUS_OK) st = er_qreport_write_html(r, hpath);
  if (st != ER_STATUS_OK) {
    int rc = er_cli_fail_status("quantize", st, "writing the report");
    er_qreport_free(r);
    return rc;
  }
  if (!quiet) print_summary(r, out, jpath, hpath);
  int rc = r->auto_keep && !r->budget_met ? 3 : 0;
  if (rc) fprintf(stderr, "edgerun quantize: the keep-float budget was not met even with every layer float\n");
  er_qreport_free(r);
  return rc;
}
