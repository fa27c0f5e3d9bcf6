/* kserve.c - KServe v2 (Open Inference Protocol) tensors: the JSON form and
 * the binary-data extension, decoded into edgerun tensors and encoded back.
 *
 * Every count, dim and length from a request is checked before memory is
 * allocated for it: a tensor's bytes must fit in the body the client sent
 * (binary data) or match the number of JSON values it sent, so a request can
 * never make the service allocate more than its body-size caps allow. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "serve.h"

/* JSON arrays nest one level per tensor dim at most. */
#define MAX_DATA_DEPTH (ER_MAX_RANK + 1)

static const struct {
  er_dtype dtype;
  const char *name;
} dtype_names[] = {
    {ER_DTYPE_BOOL, "BOOL"},     {ER_DTYPE_UINT8, "UINT8"},   {ER_DTYPE_UINT16, "UINT16"},
    {ER_DTYPE_UINT32, "UINT32"}, {ER_DTYPE_UINT64, "UINT64"}, {ER_DTYPE_INT8, "INT8"},
    {ER_DTYPE_INT16, "INT16"},   {ER_DTYPE_INT32, "INT32"},   {ER_DTYPE_INT64, "INT64"},
    {ER_DTYPE_FLOAT16, "FP16"},  {ER_DTYPE_FLOAT, "FP32"},    {ER_DTYPE_DOUBLE, "FP64"},
    {ER_DTYPE_BFLOAT16, "BF16"},
};

const char *er__kserve_dtype(er_dtype t) {
  for (size_t i = 0; i < sizeof dtype_names / sizeof dtype_names[0]; i++)
    if (dtype_names[i].dtype == t) return dtype_names[i].name;
  return NULL;
}

static er_dtype dtype_from(const char *s) {
  for (size_t i = 0; i < sizeof dtype_names / sizeof dtype_names[0]; i++)
    if (strcmp(dtype_names[i].name, s) == 0) return dtype_names[i].dtype;
  return ER_DTYPE_UNDEFINED;
}

/* ========================================================================
 * Half-precision conversions (round to nearest even, as ONNX casts do)
 * ======================================================================== */

static uint16_t f32_to_f16(float f) {
  uint32_t x;
  memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000, exp = (x >> 23) & 0xff, man = x & 0x7fffff;
  if (exp == 0xff) return (uint16_t)(sign | 0x7c00 | (man ? 0x200 : 0));
  int e = (int)exp - 127 + 15;
  if (e >= 0x1f) return (uint16_t)(sign | 0x7c00);
  if (e <= 0) {
    if (e < -10) return (uint16_t)sign;
    man |= 0x800000;
    int shift = 14 - e;
    uint32_t half = man >> shift, rem = man & ((1u << shift) - 1), mid = 1u << (shift - 1);
    if (rem > mid || (rem == mid && (half & 1))) half++;
    return (uint16_t)(sign | half);
  }
  uint32_t half = ((uint32_t)e << 10) | (man >> 13), rem = man & 0x1fff;
  if (rem > 0x1000 || (rem == 0x1000 && (half & 1))) half++;
  return (uint16_t)(sign | half);
}

static float f16_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ff, x;
  if (exp == 0) {
    float f = ldexpf((float)man, -24);
    return sign ? -f : f;
  }
  if (exp == 0x1f) x = sign | 0x7f800000 | (man << 13);
  else x = sign | ((exp + 112) << 23) | (man << 13);
  float f;
  memcpy(&f, &x, 4);
  return f;
}

static uint16_t f32_to_bf16(float f) {
  uint32_t x;
  memcpy(&x, &f, 4);
  if ((x & 0x7fffffff) > 0x7f800000) return (uint16_t)((x >> 16) | 0x40);
  x += 0x7fff + ((x >> 16) & 1);
  return (uint16_t)(x >> 16);
}

static float bf16_to_f32(uint16_t h) {
  uint32_t x = (uint32_t)h << 16;
  float f;
  memcpy(&f, &x, 4);
  return f;
}

/* ========================================================================
 * Decoding
 * ======================================================================== */

/* Counts the leaves of a (possibly nested) JSON array, bounded in depth. */
static bool count_leaves(json_t *a, int depth, int64_t *n) {
  if (depth > MAX_DATA_DEPTH) return false;
  size_t i;
  json_t *e;
  json_array_foreach(a, i, e) {
    if (json_is_array(e)) {
      if (!count_leaves(e, depth + 1, n)) return false;
    } else {
      (*n)++;
    }
  }
  return true;
}

typedef struct fill_ctx {
  er_dtype dtype;
  unsigned char *dst;
  int64_t at;
  const char *name;
  char *err;
  size_t errsz;
} fill_ctx;

static bool put_value(fill_ctx *c, json_t *e) {
  int64_t k = c->at++;
  switch (c->dtype) {
    case ER_DTYPE_BOOL:
      if (!json_is_boolean(e)) goto type_error;
      c->dst[k] = json_is_true(e) ? 1 : 0;
      return true;
    case ER_DTYPE_FLOAT:
    case ER_DTYPE_DOUBLE:
    case ER_DTYPE_FLOAT16:
    case ER_DTYPE_BFLOAT16: {
      if (!json_is_number(e)) goto type_error;
      double d = json_number_value(e);
      if (c->dtype == ER_DTYPE_FLOAT) ((float *)c->dst)[k] = (float)d;
      else if (c->dtype == ER_DTYPE_DOUBLE) ((double *)c->dst)[k] = d;
      else if (c->dtype == ER_DTYPE_FLOAT16) ((uint16_t *)c->dst)[k] = f32_to_f16((float)d);
      else ((uint16_t *)c->dst)[k] = f32_to_bf16((float)d);
      return true;
    }
    default: {
      if (!json_is_integer(e)) goto type_error;
      json_int_t v = json_integer_value(e);
      int64_t lo, hi;
      switch (c->dtype) {
        case ER_DTYPE_INT8: lo = INT8_MIN, hi = INT8_MAX; break;
        case ER_DTYPE_INT16: lo = INT16_MIN, hi = INT16_MAX; break;
        case ER_DTYPE_INT32: lo = INT32_MIN, hi = INT32_MAX; break;
        case ER_DTYPE_UINT8: lo = 0, hi = UINT8_MAX; break;
        case ER_DTYPE_UINT16: lo = 0, hi = UINT16_MAX; break;
        case ER_DTYPE_UINT32: lo = 0, hi = UINT32_MAX; break;
        case ER_DTYPE_UINT64: lo = 0, hi = INT64_MAX; break;
        default: lo = INT64_MIN, hi = INT64_MAX; break;
      }
      if (v < lo || v > hi) {
        snprintf(c->err, c->errsz, "input '%s': value %lld at index %lld is out of range for %s",
                 c->name, (long long)v, (long long)k, er__kserve_dtype(c->dtype));
        return false;
      }
      switch (c->dtype) {
        case ER_DTYPE_INT8: ((int8_t *)c->dst)[k] = (int8_t)v; break;
        case ER_DTYPE_INT16: ((int16_t *)c->dst)[k] = (int16_t)v; break;
        case ER_DTYPE_INT32: ((int32_t *)c->dst)[k] = (int32_t)v; break;
        case ER_DTYPE_UINT8: c->dst[k] = (uint8_t)v; break;
        case ER_DTYPE_UINT16: ((uint16_t *)c->dst)[k] = (uint16_t)v; break;
        case ER_DTYPE_UINT32: ((uint32_t *)c->dst)[k] = (uint32_t)v; break;
        case ER_DTYPE_UINT64: ((uint64_t *)c->dst)[k] = (uint64_t)v; break;
        default: ((int64_t *)c->dst)[k] = (int64_t)v; break;
      }
      return true;
    }
  }
type_error:
  snprintf(c->err, c->errsz, "input '%s': value at index %lld is not a %s", c->name,
           (long long)k, er__kserve_dtype(c->dtype));
  return false;
}

static bool fill(fill_ctx *c, json_t *a) {
  size_t i;
  json_t *e;
  json_array_foreach(a, i, e) {
    if (json_is_array(e) ? !fill(c, e) : !put_value(c, e)) return false;
  }
  return true;
}

/* y = (x * scale - mean[c]) / std[c] along the configured channel axis. */
static void preprocess(const er__model_config *cfg, er_tensor *t) {
  float *x = er_tensor_data(t);
  int64_t n = er_tensor_count(t);
  const int64_t *dims = er_tensor_dims(t);
  int rank = er_tensor_rank(t);
  int64_t inner = 1, channels = 1;
  if (cfg->pre_channels > 0 && cfg->pre_axis < rank) {
    channels = dims[cfg->pre_axis];
    for (int d = cfg->pre_axis + 1; d < rank; d++) inner *= dims[d];
  }
  for (int64_t i = 0; i < n; i++) {
    int c = cfg->pre_channels > 1 ? (int)((i / inner) % channels) : 0;
    float mean = cfg->pre_channels ? cfg->pre_mean[c] : 0.0f;
    float sd = cfg->pre_channels ? cfg->pre_std[c] : 1.0f;
    x[i] = (x[i] * cfg->pre_scale - mean) / sd;
  }
}

/* The configured preprocessing of an input, pixels given as bytes
 * widened to float first (*t replaced). False when out of memory. */
static bool preprocess_input(const er__model_config *cfg, er_dtype got, int rank, const int64_t *dims, int64_t count,
                             er_tensor **t) {
  if (got == ER_DTYPE_UINT8) {
    er_tensor *f;
    if (er_tensor_create(ER_DTYPE_FLOAT, rank, dims, &f) != ER_STATUS_OK) return false;
    const uint8_t *src = er_tensor_cdata(*t);
    float *dst = er_tensor_data(f);
    for (int64_t e = 0; e < count; e++) dst[e] = (float)src[e];
    er_tensor_free(*t);
    *t = f;
  }
  preprocess(cfg, *t);
  return true;
}

#define FAIL(...)                              \
  do {                                         \
    snprintf(err, errsz, __VA_ARGS__);         \
    goto fail;                                 \
  } while (0)

/* The outputs the request asks for ("outputs", else all), each with
 * whether it goes back as binary data. 0, or 400 with the message in err. */
static int decode_outputs(const er__version *ver, json_t *root, er__job *job, er__infer_req *req, char *err,
                          size_t errsz) {
  size_t i;
  json_t *outputs = json_object_get(root, "outputs");
  job->n_out = 0;
  if (outputs) {
    if (!json_is_array(outputs) || json_array_size(outputs) > ver->n_out)
      FAIL("\"outputs\" must be an array of at most %zu entries", ver->n_out);
    json_t *o;
    json_array_foreach(outputs, i, o) {
      json_t *on = json_is_object(o) ? json_object_get(o, "name") : NULL;
      if (!json_is_string(on)) FAIL("outputs[%zu] needs a \"name\"", i);
      size_t k = 0;
      while (k < ver->n_out && strcmp(ver->out[k].name, json_string_value(on)) != 0) k++;
      if (k == ver->n_out) {
        char shown[64];
        er__sanitize(json_string_value(on), shown, sizeof shown);
        FAIL("model '%s' has no output named '%s'", ver->owner->name, shown);
      }
      for (size_t q = 0; q < job->n_out; q++)
        if (job->out_idx[q] == (int)k) FAIL("output '%s' is requested twice",
                                            json_string_value(on));
      json_t *op = json_object_get(o, "parameters");
      json_t *bd = op && json_is_object(op) ? json_object_get(op, "binary_data") : NULL;
      req->out_binary[job->n_out] = bd ? json_is_true(bd) : req->binary_all;
      job->out_idx[job->n_out++] = (int)k;
    }
  } else {
    for (size_t k = 0; k < ver->n_out; k++) {
      req->out_binary[k] = req->binary_all;
      job->out_idx[job->n_out++] = (int)k;
    }
  }
  return 0;
fail:
  return 400;
}

int er__kserve_decode(const er__version *ver, const er__model_config *cfg, const char *body,
                      size_t len, int64_t hdr_len, uint64_t max_json, er__job *job,
                      er__infer_req *req, char *err, size_t errsz) {
  json_t *root = NULL;
  json_error_t je;
  int status = 400;
  size_t json_len = len, bin_at = 0;
  er_tensor *scratch = NULL;
  memset(req, 0, sizeof *req);
  if (hdr_len >= 0) {
    if ((uint64_t)hdr_len > len)
      FAIL("Inference-Header-Content-Length %lld is past the end of the %zu-byte body",
           (long long)hdr_len, len);
    json_len = (size_t)hdr_len;
    bin_at = json_len;
  }
  if (json_len > max_json) {
    status = 413;
    FAIL("the JSON part of the request is %zu bytes, over the cap of %llu (--max-json-bytes); "
         "send large tensors with the binary-data extension", json_len,
         (unsigned long long)max_json);
  }
  root = json_loadb(body, json_len, JSON_REJECT_DUPLICATES, &je);
  if (!root) FAIL("request JSON is invalid at byte %d: %s", je.position, je.text);
  if (!json_is_object(root)) FAIL("request JSON must be an object");
  json_t *id = json_object_get(root, "id");
  if (id) {
    if (!json_is_string(id) || json_string_length(id) >= sizeof req->id)
      FAIL("\"id\" must be a string under %zu bytes", sizeof req->id);
    snprintf(req->id, sizeof req->id, "%s", json_string_value(id));
  }
  json_t *params = json_object_get(root, "parameters");
  if (params) {
    if (!json_is_object(params)) FAIL("\"parameters\" must be an object");
    json_t *b = json_object_get(params, "binary_data_output");
    if (b && !json_is_boolean(b)) FAIL("\"parameters.binary_data_output\" must be a boolean");
    req->binary_all = b && json_is_true(b);
  }
  json_t *inputs = json_object_get(root, "inputs");
  if (!json_is_array(inputs)) FAIL("request needs an \"inputs\" array");
  if (json_array_size(inputs) != ver->n_in)
    FAIL("model '%s' takes %zu inputs; the request has %zu", ver->owner->name, ver->n_in,
         json_array_size(inputs));
  size_t i;
  json_t *in;
  json_array_foreach(inputs, i, in) {
    if (!json_is_object(in)) FAIL("inputs[%zu] must be an object", i);
    json_t *jn = json_object_get(in, "name"), *jt = json_object_get(in, "datatype"),
           *js = json_object_get(in, "shape");
    if (!json_is_string(jn) || !json_is_string(jt) || !json_is_array(js))
      FAIL("inputs[%zu] needs \"name\", \"datatype\" and \"shape\"", i);
    const char *name = json_string_value(jn);
    size_t k = 0;
    while (k < ver->n_in && strcmp(ver->in[k].name, name) != 0) k++;
    if (k == ver->n_in) {
      char shown[64];
      er__sanitize(name, shown, sizeof shown);
      FAIL("model '%s' has no input named '%s'", ver->owner->name, shown);
    }
    if (job->in[k]) FAIL("input '%s' appears twice", name);
    const er_value_info *info = &ver->in[k];
    er_dtype want = info->dtype, got = dtype_from(json_string_value(jt));
    bool pre = cfg->pre && strcmp(cfg->pre_input, name) == 0;
    if (got == ER_DTYPE_UNDEFINED)
      FAIL("input '%s': datatype \"%.16s\" is not one edgerun serves", name,
           json_string_value(jt));
    if (got != want && !(pre && got == ER_DTYPE_UINT8))
      FAIL("input '%s': datatype %s does not match the model's %s", name,
           er__kserve_dtype(got), er__kserve_dtype(want));
    int rank = (int)json_array_size(js);
    int64_t dims[ER_MAX_RANK];
    if (rank > ER_MAX_RANK) FAIL("input '%s': rank %d exceeds ER_MAX_RANK %d", name, rank,
                                 ER_MAX_RANK);
    if (info->rank >= 0 && rank != info->rank)
      FAIL("input '%s': shape has rank %d but the model takes rank %d", name, rank, info->rank);
    int64_t count = 1;
    for (int d = 0; d < rank; d++) {
      json_t *e = json_array_get(js, (size_t)d);
      if (!json_is_integer(e) || json_integer_value(e) < 0)
        FAIL("input '%s': shape[%d] must be a non-negative integer", name, d);
      dims[d] = json_integer_value(e);
      if (info->rank >= 0 && info->dims[d] >= 0 && info->dims[d] != dims[d])
        FAIL("input '%s': shape[%d] is %lld but the model fixes it at %lld", name, d,
             (long long)dims[d], (long long)info->dims[d]);
      /* The product is bounded by the body: every element takes at least
       * one byte of it (a JSON digit or a binary byte), so no request makes
       * the service allocate more than 8 bytes per body byte. */
      if (dims[d] > 0 && count > (int64_t)(len + 1) / dims[d])
        FAIL("input '%s': shape describes more elements than the request could carry", name);
      count *= dims[d];
    }
    json_t *ip = json_object_get(in, "parameters");
    json_t *bsz = ip && json_is_object(ip) ? json_object_get(ip, "binary_data_size") : NULL;
    json_t *data = json_object_get(in, "data");
    if (er_tensor_create(got, rank, dims, &scratch) != ER_STATUS_OK)
      FAIL("input '%s': %s", name, er_last_error());
    if (bsz) {
      if (data) FAIL("input '%s' has both \"data\" and binary_data_size", name);
      if (!json_is_integer(bsz) || json_integer_value(bsz) < 0)
        FAIL("input '%s': binary_data_size must be a non-negative integer", name);
      uint64_t nb = (uint64_t)json_integer_value(bsz);
      if (hdr_len < 0)
        FAIL("input '%s' uses binary data but Inference-Header-Content-Length is missing", name);
      if (nb > len - bin_at)
        FAIL("input '%s': binary_data_size %llu is past the end of the body (%zu bytes left)",
             name, (unsigned long long)nb, len - bin_at);
      if (nb != er_tensor_nbytes(scratch))
        FAIL("input '%s': binary_data_size %llu does not match shape x datatype = %zu bytes",
             name, (unsigned long long)nb, er_tensor_nbytes(scratch));
      memcpy(er_tensor_data(scratch), body + bin_at, nb);
      bin_at += nb;
    } else {
      if (!json_is_array(data)) FAIL("input '%s' needs a \"data\" array or binary data", name);
      int64_t leaves = 0;
      if (!count_leaves(data, 1, &leaves))
        FAIL("input '%s': data nests deeper than %d arrays", name, MAX_DATA_DEPTH);
      if (leaves != count)
        FAIL("input '%s': shape holds %lld elements but data has %lld", name, (long long)count,
             (long long)leaves);
      fill_ctx c = {got, er_tensor_data(scratch), 0, name, err, errsz};
      if (!fill(&c, data)) goto fail;
    }
    if (pre && !preprocess_input(cfg, got, rank, dims, count, &scratch))
      FAIL("input '%s': %s", name, er_last_error());
    job->in[k] = scratch;
    scratch = NULL;
  }
  if (hdr_len >= 0 && bin_at != len)
    FAIL("%zu bytes of binary data after the header are not claimed by any input",
         len - bin_at);
  /* Batchable models: every input must share dim 0, the rows a request adds. */
  job->rows = -1;
  if (ver->batchable) {
    job->rows = er_tensor_dims(job->in[0])[0];
    for (size_t k = 1; k < ver->n_in; k++)
      if (er_tensor_dims(job->in[k])[0] != job->rows) job->rows = -1;
    if (job->rows <= 0) job->rows = -1;
  }
  if (decode_outputs(ver, root, job, req, err, errsz)) goto fail;
  json_decref(root);
  return 0;
fail:
  er_tensor_free(scratch);
  json_decref(root);
  return status;
}

/* ========================================================================
 * Encoding
 * ======================================================================== */

static void put_number(er__sb *sb, double d, bool dbl) {
  if (!isfinite(d)) {   /* JSON has no NaN or Inf */
    er__sb_puts(sb, "null");
    return;
  }
  er__sb_printf(sb, dbl ? "%.17g" : "%.9g", d);
}

static void put_data(er__sb *sb, const er_tensor *t) {
  int64_t n = er_tensor_count(t);
  const void *p = er_tensor_cdata(t);
  er__sb_puts(sb, "[");
  for (int64_t i = 0; i < n && !sb->oom; i++) {
    if (i) er__sb_puts(sb, ",");
    switch (er_tensor_dtype(t)) {
      case ER_DTYPE_BOOL: er__sb_puts(sb, ((const uint8_t *)p)[i] ? "true" : "false"); break;
      case ER_DTYPE_FLOAT: put_number(sb, ((const float *)p)[i], false); break;
      case ER_DTYPE_DOUBLE: put_number(sb, ((const double *)p)[i], true); break;
      case ER_DTYPE_FLOAT16: put_number(sb, f16_to_f32(((const uint16_t *)p)[i]), false); break;
      case ER_DTYPE_BFLOAT16: put_number(sb, bf16_to_f32(((const uint16_t *)p)[i]), false); break;
      case ER_DTYPE_INT8: er__sb_printf(sb, "%d", ((const int8_t *)p)[i]); break;
      case ER_DTYPE_INT16: er__sb_printf(sb, "%d", ((const int16_t *)p)[i]); break;
      case ER_DTYPE_INT32: er__sb_printf(sb, "%d", ((const int32_t *)p)[i]); break;
      case ER_DTYPE_INT64: er__sb_printf(sb, "%lld", (long long)((const int64_t *)p)[i]); break;
      case ER_DTYPE_UINT8: er__sb_printf(sb, "%u", ((const uint8_t *)p)[i]); break;
      case ER_DTYPE_UINT16: er__sb_printf(sb, "%u", ((const uint16_t *)p)[i]); break;
      case ER_DTYPE_UINT32: er__sb_printf(sb, "%u", ((const uint32_t *)p)[i]); break;
      case ER_DTYPE_UINT64:
        er__sb_printf(sb, "%llu", (unsigned long long)((const uint64_t *)p)[i]);
        break;
      default: er__sb_puts(sb, "null"); break;
    }
  }
  er__sb_puts(sb, "]");
}

bool er__kserve_encode(const er__version *ver, const er__job *job, const er__infer_req *req,
                       er__sb *out, int64_t *json_len_out) {
  bool any_binary = false;
  er__sb_puts(out, "{\"model_name\":");
  er__sb_json_str(out, ver->owner->name);
  er__sb_printf(out, ",\"model_version\":\"%lld\"", (long long)ver->number);
  if (req->id[0]) {
    er__sb_puts(out, ",\"id\":");
    er__sb_json_str(out, req->id);
  }
  er__sb_puts(out, ",\"outputs\":[");
  for (size_t k = 0; k < job->n_out; k++) {
    const er_tensor *t = job->out[k];
    const char *dt = er__kserve_dtype(er_tensor_dtype(t));
    if (k) er__sb_puts(out, ",");
    er__sb_puts(out, "{\"name\":");
    er__sb_json_str(out, ver->out[job->out_idx[k]].name);
    er__sb_printf(out, ",\"datatype\":\"%s\",\"shape\":[", dt ? dt : "BYTES");
    for (int d = 0; d < er_tensor_rank(t); d++)
      er__sb_printf(out, "%s%lld", d ? "," : "", (long long)er_tensor_dims(t)[d]);
    er__sb_puts(out, "]");
    if (req->out_binary[k] && dt) {
      er__sb_printf(out, ",\"parameters\":{\"binary_data_size\":%zu}}", er_tensor_nbytes(t));
      any_binary = true;
    } else {
      er__sb_puts(out, ",\"data\":");
      put_data(out, t);
      er__sb_puts(out, "}");
    }
  }
  er__sb_puts(out, "]}");
  *json_len_out = -1;
  if (any_binary) {
    *json_len_out = (int64_t)out->len;
    for (size_t k = 0; k < job->n_out; k++)
      if (req->out_binary[k] && er__kserve_dtype(er_tensor_dtype(job->out[k])))
        er__sb_put(out, er_tensor_cdata(job->out[k]), er_tensor_nbytes(job->out[k]));
  }
  return !out->oom;
}

static void put_io(er__sb *sb, const er_value_info *info) {
  const char *dt = er__kserve_dtype(info->dtype);
  er__sb_puts(sb, "{\"name\":");
  er__sb_json_str(sb, info->name);
  er__sb_printf(sb, ",\"datatype\":\"%s\",\"shape\":[", dt ? dt : "BYTES");
  for (int d = 0; d < info->rank; d++)
    er__sb_printf(sb, "%s%lld", d ? "," : "", (long long)info->dims[d]);
  er__sb_puts(sb, "]}");
}

void er__kserve_model_meta(const er__model *m, const er__version *v, er__sb *out) {
  er__sb_puts(out, "{\"name\":");
  er__sb_json_str(out, m->name);
  er__sb_puts(out, ",\"versions\":[");
  for (int i = 0; i < m->n_live; i++)
    er__sb_printf(out, "%s\"%lld\"", i ? "," : "", (long long)m->live[i]->number);
  er__sb_printf(out, "],\"platform\":\"%s\",\"inputs\":[", v->engine ? "edgerun_gguf" : "edgerun_onnx");
  for (size_t i = 0; i < v->n_in; i++) {
    if (i) er__sb_puts(out, ",");
    put_io(out, &v->in[i]);
  }
  er__sb_puts(out, "],\"outputs\":[");
  for (size_t i = 0; i < v->n_out; i++) {
    if (i) er__sb_puts(out, ",");
    put_io(out, &v->out[i]);
  }
  er__sb_puts(out, "]}");
}
