/* repo.c - the model repository: REPO/<model>/config.json and
 * REPO/<model>/<version>/model.onnx.
 *
 * Only the loader thread scans and loads, so loads never race each other.
 * A version is swapped in only after it loaded, got its session and passed
 * its warm-up run (and its signature check with --require-signed); a version
 * that fails any of these is remembered with the reason and the file stamp
 * it failed with, is never retried until its files change, and never
 * replaces the version being served. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "serve.h"

#define MODEL_FILE "model.onnx"
#define LLM_FILE "model.gguf"
#define GENAI_FILE "genai_config.json" /* an ONNX decoder folder (onnxruntime-genai's builder) */
#define CONFIG_FILE "config.json"
#define MAX_VERSION_NUMBER 999999999LL
#define MAX_WARMUP_RUNS 1000
#define MAX_THREADS 256
#define MAX_TIMEOUT_MS 3600000LL
#define MAX_BATCH_DELAY_US 10000000LL
/* Test hook: milliseconds each version load waits before it starts, so a
 * test can observe a model that is loading (TESTING.md service case 23). */
#define ENV_TEST_LOAD_DELAY "EDGERUN_SERVE_TEST_LOAD_DELAY_MS"

/* ========================================================================
 * config.json
 * ======================================================================== */

void er__config_defaults(er__model_config *cfg) {
  memset(cfg, 0, sizeof *cfg);
  snprintf(cfg->backends[0], sizeof cfg->backends[0], "cpu");
  cfg->n_backends = 1;
  cfg->threads = 1;
  cfg->allow_fallback = true;
  cfg->instances = 2;
  cfg->max_batch = 1;
  cfg->batch_delay_us = 0;
  cfg->timeout_ms = 10000;
  cfg->queue_size = 64;
  cfg->policy = ER__POLICY_LATEST;
  cfg->latest_n = 1;
  cfg->warmup_runs = 1;
  cfg->pre_scale = 1.0f;
  cfg->pre_axis = 1;
  cfg->llm.slots = 4;
  cfg->llm.kv_type = ER_LLM_KV_F16;
  cfg->llm.n_batch = 512;
  cfg->llm.max_tokens = 0;
  cfg->llm.prefix_cache = true;
  er_llm_sampler_options_init(&cfg->llm.sampling);
}

static bool get_int(json_t *v, const char *key, int64_t lo, int64_t hi, int64_t *out, char *err,
                    size_t errsz) {
  if (!json_is_integer(v) || json_integer_value(v) < lo || json_integer_value(v) > hi) {
    snprintf(err, errsz, "config.json: \"%s\" must be an integer in %lld..%lld", key,
             (long long)lo, (long long)hi);
    return false;
  }
  *out = json_integer_value(v);
  return true;
}

static bool parse_policy(json_t *v, er__model_config *cfg, char *err, size_t errsz) {
  json_t *x;
  int64_t n;
  if (!json_is_object(v) || json_object_size(v) != 1) {
    snprintf(err, errsz, "config.json: \"version_policy\" must be one of {\"latest\": N}, "
                         "{\"all\": {}} or {\"specific\": [versions]}");
    return false;
  }
  if ((x = json_object_get(v, "latest"))) {
    if (!get_int(x, "version_policy.latest", 1, ER_SERVE_MAX_VERSIONS, &n, err, errsz))
      return false;
    cfg->policy = ER__POLICY_LATEST;
    cfg->latest_n = (int)n;
  } else if (json_object_get(v, "all")) {
    cfg->policy = ER__POLICY_ALL;
  } else if ((x = json_object_get(v, "specific"))) {
    if (!json_is_array(x) || json_array_size(x) == 0 ||
        json_array_size(x) > ER_SERVE_MAX_VERSIONS) {
      snprintf(err, errsz, "config.json: \"version_policy.specific\" must list 1..%d versions",
               ER_SERVE_MAX_VERSIONS);
      return false;
    }
    cfg->policy = ER__POLICY_SPECIFIC;
    cfg->n_specific = 0;
    for (size_t i = 0; i < json_array_size(x); i++) {
      if (!get_int(json_array_get(x, i), "version_policy.specific[]", 1, MAX_VERSION_NUMBER, &n,
                   err, errsz))
        return false;
      cfg->specific[cfg->n_specific++] = n;
    }
  } else {
    snprintf(err, errsz, "config.json: unknown \"version_policy\" kind; use latest, all or "
                         "specific");
    return false;
  }
  return true;
}

static bool parse_floats(json_t *v, const char *key, float *out, int *n_out, char *err,
                         size_t errsz) {
  if (!json_is_array(v) || json_array_size(v) == 0 ||
      json_array_size(v) > ER_SERVE_MAX_CHANNELS) {
    snprintf(err, errsz, "config.json: \"preprocess.%s\" must list 1..%d numbers", key,
             ER_SERVE_MAX_CHANNELS);
    return false;
  }
  for (size_t i = 0; i < json_array_size(v); i++) {
    json_t *e = json_array_get(v, i);
    if (!json_is_number(e)) {
      snprintf(err, errsz, "config.json: \"preprocess.%s[%zu]\" is not a number", key, i);
      return false;
    }
    out[i] = (float)json_number_value(e);
  }
  *n_out = (int)json_array_size(v);
  return true;
}

static bool parse_pre(json_t *v, er__model_config *cfg, char *err, size_t errsz) {
  const char *key;
  json_t *x;
  int n_mean = 0, n_std = 0;
  int64_t n;
  if (!json_is_object(v)) {
    snprintf(err, errsz, "config.json: \"preprocess\" must be an object");
    return false;
  }
  for (int c = 0; c < ER_SERVE_MAX_CHANNELS; c++) cfg->pre_std[c] = 1.0f;
  json_object_foreach(v, key, x) {
    if (strcmp(key, "input") == 0) {
      if (!json_is_string(x) || json_string_length(x) > ER_SERVE_MAX_NAME) {
        snprintf(err, errsz, "config.json: \"preprocess.input\" must be an input name");
        return false;
      }
      snprintf(cfg->pre_input, sizeof cfg->pre_input, "%s", json_string_value(x));
    } else if (strcmp(key, "scale") == 0) {
      if (!json_is_number(x)) {
        snprintf(err, errsz, "config.json: \"preprocess.scale\" must be a number");
        return false;
      }
      cfg->pre_scale = (float)json_number_value(x);
    } else if (strcmp(key, "mean") == 0) {
      if (!parse_floats(x, "mean", cfg->pre_mean, &n_mean, err, errsz)) return false;
    } else if (strcmp(key, "std") == 0) {
      if (!parse_floats(x, "std", cfg->pre_std, &n_std, err, errsz)) return false;
    } else if (strcmp(key, "channel_axis") == 0) {
      if (!get_int(x, "preprocess.channel_axis", 0, ER_MAX_RANK - 1, &n, err, errsz)) return false;
      cfg->pre_axis = (int)n;
    } else {
      snprintf(err, errsz, "config.json: unknown key \"preprocess.%s\"", key);
      return false;
    }
  }
  if (!cfg->pre_input[0]) {
    snprintf(err, errsz, "config.json: \"preprocess.input\" names no input");
    return false;
  }
  if (n_mean && n_std && n_mean != n_std) {
    snprintf(err, errsz, "config.json: preprocess mean has %d entries but std has %d", n_mean,
             n_std);
    return false;
  }
  for (int c = 0; c < n_std; c++)
    if (!(cfg->pre_std[c] != 0.0f)) {
      snprintf(err, errsz, "config.json: \"preprocess.std[%d]\" is 0", c);
      return false;
    }
  cfg->pre_channels = n_mean > n_std ? n_mean : n_std;
  cfg->pre = true;
  return true;
}

/* "sampling": {"temperature": 0.7, "top_p": 0.9, ...}: the defaults of
 * requests that leave a field out. */
static bool parse_sampling(json_t *v, er_llm_sampler_options *so, char *err, size_t errsz) {
  if (!json_is_object(v)) {
    snprintf(err, errsz, "config.json: \"sampling\" must be an object");
    return false;
  }
  const char *key;
  json_t *x;
  json_object_foreach(v, key, x) {
    double d = json_number_value(x);
    bool num = json_is_number(x);
    bool ok = num;
    if (strcmp(key, "temperature") == 0) ok = ok && d >= 0 && d <= 100, so->temperature = (float)d;
    else if (strcmp(key, "top_p") == 0) ok = ok && d > 0 && d <= 1, so->top_p = (float)d;
    else if (strcmp(key, "min_p") == 0) ok = ok && d >= 0 && d <= 1, so->min_p = (float)d;
    else if (strcmp(key, "top_k") == 0) ok = json_is_integer(x) && d >= 0 && d <= 1e6, so->top_k = (int)d;
    else if (strcmp(key, "repeat_penalty") == 0) ok = ok && d > 0 && d <= 100, so->repeat_penalty = (float)d;
    else if (strcmp(key, "presence_penalty") == 0) ok = ok && d >= -2 && d <= 2, so->presence_penalty = (float)d;
    else if (strcmp(key, "frequency_penalty") == 0) ok = ok && d >= -2 && d <= 2, so->frequency_penalty = (float)d;
    else {
      snprintf(err, errsz, "config.json: unknown sampling key \"%s\" (known: temperature, top_p, min_p, top_k, "
                           "repeat_penalty, presence_penalty, frequency_penalty)", key);
      return false;
    }
    if (!ok) {
      snprintf(err, errsz, "config.json: sampling \"%s\" is out of its range (temperature 0..100, top_p (0,1], "
                           "min_p 0..1, top_k a count, repeat_penalty > 0, penalties -2..2)", key);
      return false;
    }
  }
  return true;
}

bool er__config_parse(const char *text, size_t len, er__model_config *cfg, char *err,
                      size_t errsz) {
  json_error_t je;
  er__config_defaults(cfg);
  json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
  if (!root) {
    snprintf(err, errsz, "config.json line %d: %s", je.line, je.text);
    return false;
  }
  bool ok = json_is_object(root);
  if (!ok) snprintf(err, errsz, "config.json must hold a JSON object");
  const char *key;
  json_t *v;
  int64_t n = 0;
  json_object_foreach(root, key, v) {
    if (!ok) break;
    if (strcmp(key, "backends") == 0) {
      ok = json_is_array(v) && json_array_size(v) >= 1 && json_array_size(v) <= 4;
      for (size_t i = 0; ok && i < json_array_size(v); i++) {
        json_t *b = json_array_get(v, i);
        ok = json_is_string(b) && json_string_length(b) < sizeof cfg->backends[0];
        if (ok) snprintf(cfg->backends[i], sizeof cfg->backends[i], "%s", json_string_value(b));
      }
      if (!ok) snprintf(err, errsz, "config.json: \"backends\" must list 1..4 backend names");
      else cfg->n_backends = (int)json_array_size(v);
    } else if (strcmp(key, "allow_fallback") == 0) {
      ok = json_is_boolean(v);
      if (!ok) snprintf(err, errsz, "config.json: \"allow_fallback\" must be true or false");
      cfg->allow_fallback = json_is_true(v);
    } else if (strcmp(key, "threads") == 0) {
      ok = get_int(v, key, 1, MAX_THREADS, &n, err, errsz);
      cfg->threads = (int)n;
      cfg->threads_given = true;
    } else if (strcmp(key, "instances") == 0) {
      ok = get_int(v, key, 1, ER_SERVE_MAX_INSTANCES, &n, err, errsz);
      cfg->instances = (int)n;
    } else if (strcmp(key, "max_batch") == 0) {
      ok = get_int(v, key, 1, ER_SERVE_MAX_BATCH, &n, err, errsz);
      cfg->max_batch = (int)n;
    } else if (strcmp(key, "batch_delay_us") == 0) {
      ok = get_int(v, key, 0, MAX_BATCH_DELAY_US, &n, err, errsz);
      cfg->batch_delay_us = n;
    } else if (strcmp(key, "timeout_ms") == 0) {
      ok = get_int(v, key, 1, MAX_TIMEOUT_MS, &n, err, errsz);
      cfg->timeout_ms = n;
      cfg->timeout_given = true;
    } else if (strcmp(key, "queue_size") == 0) {
      ok = get_int(v, key, 1, ER_SERVE_MAX_QUEUE, &n, err, errsz);
      cfg->queue_size = (int)n;
    } else if (strcmp(key, "warmup_runs") == 0) {
      ok = get_int(v, key, 0, MAX_WARMUP_RUNS, &n, err, errsz);
      cfg->warmup_runs = (int)n;
    } else if (strcmp(key, "version_policy") == 0) {
      ok = parse_policy(v, cfg, err, errsz);
    } else if (strcmp(key, "preprocess") == 0) {
      ok = parse_pre(v, cfg, err, errsz);
    } else if (strcmp(key, "ctx") == 0) {
      ok = get_int(v, key, 16, 1 << 20, &n, err, errsz);
      cfg->llm.ctx = n;
    } else if (strcmp(key, "slots") == 0) {
      ok = get_int(v, key, 1, ER_SERVE_MAX_SLOTS, &n, err, errsz);
      cfg->llm.slots = (int)n;
    } else if (strcmp(key, "n_batch") == 0) {
      ok = get_int(v, key, 1, 8192, &n, err, errsz);
      cfg->llm.n_batch = (int)n;
    } else if (strcmp(key, "max_prompt_tokens") == 0) {
      ok = get_int(v, key, 1, 1 << 20, &n, err, errsz);
      cfg->llm.max_prompt_tokens = n;
    } else if (strcmp(key, "max_tokens") == 0) {
      ok = get_int(v, key, 1, 1 << 20, &n, err, errsz);
      cfg->llm.max_tokens = n;
    } else if (strcmp(key, "kv_cache_type") == 0) {
      const char *t = json_string_value(v);
      ok = t && (strcmp(t, "f16") == 0 || strcmp(t, "q8_0") == 0);
      if (!ok) snprintf(err, errsz, "config.json: \"kv_cache_type\" must be \"f16\" or \"q8_0\"");
      else cfg->llm.kv_type = strcmp(t, "f16") == 0 ? ER_LLM_KV_F16 : ER_LLM_KV_Q8;
    } else if (strcmp(key, "prefix_cache") == 0 || strcmp(key, "log_prompts") == 0) {
      ok = json_is_boolean(v);
      if (!ok) snprintf(err, errsz, "config.json: \"%s\" must be true or false", key);
      if (key[0] == 'p') cfg->llm.prefix_cache = json_is_true(v);
      else cfg->llm.log_prompts = json_is_true(v);
    } else if (strcmp(key, "sampling") == 0) {
      ok = parse_sampling(v, &cfg->llm.sampling, err, errsz);
    } else {
      snprintf(err, errsz, "config.json: unknown key \"%s\" (known: backends, allow_fallback, threads, "
                           "instances, max_batch, batch_delay_us, timeout_ms, queue_size, "
                           "warmup_runs, version_policy, preprocess; for LLMs ctx, slots, n_batch, kv_cache_type, "
                           "max_prompt_tokens, max_tokens, prefix_cache, log_prompts, sampling)", key);
      ok = false;
    }
  }
  json_decref(root);
  return ok;
}

/* A fingerprint of a file's identity and content age, to tell "the same
 * files that failed before" (unsigned arithmetic: it may wrap). */
static int64_t file_stamp(const struct stat *sb) {
  uint64_t h = (uint64_t)sb->st_mtim.tv_sec * 1000000000u + (uint64_t)sb->st_mtim.tv_nsec;
  h = h * 31u + (uint64_t)sb->st_size;
  h = h * 131u + (uint64_t)sb->st_ino;
  return (int64_t)(h >> 1);
}

bool er__config_read(const char *repo, const char *model, er__model_config *cfg, int64_t *stamp,
                     char *err, size_t errsz) {
  char path[4200];
  struct stat sb;
  snprintf(path, sizeof path, "%s/%s/%s", repo, model, CONFIG_FILE);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) {   /* config.json is optional: defaults apply */
      er__config_defaults(cfg);
      *stamp = 0;
      return true;
    }
    snprintf(err, errsz, "cannot open %s/config.json: %s", model, strerror(errno));
    return false;
  }
  if (fstat(fd, &sb) != 0 || sb.st_size > ER_SERVE_MAX_CONFIG_BYTES) {
    snprintf(err, errsz, "%s/config.json is larger than %u bytes", model,
             ER_SERVE_MAX_CONFIG_BYTES);
    close(fd);
    return false;
  }
  char *text = malloc((size_t)sb.st_size + 1);
  ssize_t got = text ? read(fd, text, (size_t)sb.st_size) : -1;
  close(fd);
  if (got != sb.st_size) {
    snprintf(err, errsz, "cannot read %s/config.json", model);
    free(text);
    return false;
  }
  bool ok = er__config_parse(text, (size_t)got, cfg, err, errsz);
  free(text);
  *stamp = file_stamp(&sb);
  return ok;
}

/* ========================================================================
 * Versions: listing, loading, reference counting
 * ======================================================================== */

static bool parse_version(const char *s, int64_t *out) {
  int64_t v = 0;
  if (!*s || (s[0] == '0')) return false;
  for (const char *p = s; *p; p++) {
    if (*p < '0' || *p > '9' || p - s >= 9) return false;
    v = v * 10 + (*p - '0');
  }
  *out = v;
  return true;
}

static int cmp_desc(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return x < y ? 1 : x > y ? -1 : 0;
}

int er__repo_versions(const char *repo, const char *model, int64_t *out, int max) {
  char path[4200];
  snprintf(path, sizeof path, "%s/%s", repo, model);
  DIR *d = opendir(path);
  if (!d) return 0;
  int n = 0;
  for (struct dirent *e; (e = readdir(d)) && n < max;) {
    int64_t v;
    struct stat sb;
    if (!parse_version(e->d_name, &v)) continue;
    snprintf(path, sizeof path, "%s/%s/%s/%s", repo, model, e->d_name, MODEL_FILE);
    if (stat(path, &sb) != 0 || !S_ISREG(sb.st_mode)) {
      snprintf(path, sizeof path, "%s/%s/%s/%s", repo, model, e->d_name, LLM_FILE);
      if (stat(path, &sb) != 0 || !S_ISREG(sb.st_mode)) continue;
    }
    out[n++] = v;
  }
  closedir(d);
  qsort(out, (size_t)n, sizeof *out, cmp_desc);
  return n;
}

/* The model file of a version folder: genai_config.json (an ONNX decoder:
 * model.onnx beside it), else model.onnx, else model.gguf. */
static const char *version_file(const char *repo, const char *model, int64_t number) {
  char path[4200];
  struct stat sb;
  snprintf(path, sizeof path, "%s/%s/%lld/%s", repo, model, (long long)number, GENAI_FILE);
  if (stat(path, &sb) == 0 && S_ISREG(sb.st_mode)) return GENAI_FILE;
  snprintf(path, sizeof path, "%s/%s/%lld/%s", repo, model, (long long)number, MODEL_FILE);
  if (stat(path, &sb) == 0) return MODEL_FILE;
  snprintf(path, sizeof path, "%s/%s/%lld/%s", repo, model, (long long)number, LLM_FILE);
  return stat(path, &sb) == 0 ? LLM_FILE : MODEL_FILE;
}

static int64_t version_stamp(const char *repo, const char *model, int64_t number) {
  char path[4200];
  struct stat sb;
  int64_t stamp = 0;
  const char *file = version_file(repo, model, number);
  snprintf(path, sizeof path, "%s/%s/%lld/%s", repo, model, (long long)number, file);
  if (stat(path, &sb) == 0) stamp = file_stamp(&sb);
  snprintf(path, sizeof path, "%s/%s/%lld/%s%s", repo, model, (long long)number, file,
           ER_SIGN_SUFFIX);
  if (stat(path, &sb) == 0) stamp ^= (int64_t)(((uint64_t)file_stamp(&sb) * 7u) >> 1);
  return stamp;
}

/* Reads a whole file with one descriptor, so the bytes verified are the
 * bytes loaded. */
static void *read_all(const char *path, size_t *size_out, char *err, size_t errsz) {
  er_load_options lo;
  er_load_options_init(&lo);
  struct stat sb;
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0 || fstat(fd, &sb) != 0) {
    snprintf(err, errsz, "cannot open %s: %s", path, strerror(errno));
    if (fd >= 0) close(fd);
    return NULL;
  }
  if ((uint64_t)sb.st_size > lo.max_file_bytes) {
    snprintf(err, errsz, "%s is %lld bytes, over the model file cap of %llu", path,
             (long long)sb.st_size, (unsigned long long)lo.max_file_bytes);
    close(fd);
    return NULL;
  }
  unsigned char *buf = malloc((size_t)sb.st_size ? (size_t)sb.st_size : 1);
  size_t have = 0;
  while (buf && have < (size_t)sb.st_size) {
    ssize_t got = read(fd, buf + have, (size_t)sb.st_size - have);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) break;
    have += (size_t)got;
  }
  close(fd);
  if (!buf || have != (size_t)sb.st_size) {
    snprintf(err, errsz, "cannot read %s", path);
    free(buf);
    return NULL;
  }
  *size_out = have;
  return buf;
}

/* With --require-signed every other regular file in the version folder
 * (external data) must carry a valid signature too. */
static bool verify_others(const char *dir, const er__serve_options *opt, char *err,
                          size_t errsz) {
  DIR *d = opendir(dir);
  if (!d) {
    snprintf(err, errsz, "cannot list %s", dir);
    return false;
  }
  bool ok = true;
  for (struct dirent *e; ok && (e = readdir(d));) {
    char path[4200];
    struct stat sb;
    size_t n = strlen(e->d_name), sl = strlen(ER_SIGN_SUFFIX);
    if (e->d_name[0] == '.' || strcmp(e->d_name, MODEL_FILE) == 0 || strcmp(e->d_name, LLM_FILE) == 0)
      continue;
    if (n > sl && strcmp(e->d_name + n - sl, ER_SIGN_SUFFIX) == 0) continue;
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    if (lstat(path, &sb) != 0 || !S_ISREG(sb.st_mode)) continue;
    ok = er__sign_verify_file((const unsigned char(*)[32])opt->keys, opt->n_keys, path, err,
                              errsz);
  }
  closedir(d);
  return ok;
}

static bool warm_up(er__version *v, int runs, int max_batch, char *err, size_t errsz) {
  er_tensor *in[ER_SERVE_MAX_IO] = {0};
  er_named_tensor named[ER_SERVE_MAX_IO];
  er_tensor *out[ER_SERVE_MAX_IO] = {0};
  bool ok = true;
  for (size_t i = 0; ok && i < v->n_in; i++) {
    const er_value_info *info = &v->in[i];
    int64_t dims[ER_MAX_RANK];
    if (info->rank < 0) {
      snprintf(err, errsz, "warm-up: input '%s' declares no shape; give it one with "
                           "`edgerun fix-shapes` or export it with a shape", info->name);
      ok = false;
      break;
    }
    /* Dynamic dims run with 1: the smallest request the model will see. */
    for (int d = 0; d < info->rank; d++) dims[d] = info->dims[d] < 0 ? 1 : info->dims[d];
    er_status st = er_tensor_create(info->dtype, info->rank, dims, &in[i]);
    if (st != ER_STATUS_OK) {
      snprintf(err, errsz, "warm-up: input '%s': %s", info->name, er_last_error());
      ok = false;
      break;
    }
    named[i].name = info->name;
    named[i].tensor = in[i];
  }
  /* With batching, the last warm-up run is a full batch along a dynamic
   * first dim, so the session's memory plan is sized for the largest
   * request before the version serves (memory stays flat afterwards). */
  bool batched = false;
  for (size_t i = 0; ok && max_batch > 1 && i < v->n_in; i++)
    if (v->in[i].rank > 0 && v->in[i].dims[0] < 0) batched = true;
  for (int r = 0; ok && r < runs + (batched ? 1 : 0); r++) {
    if (batched && r == runs) {
      for (size_t i = 0; ok && i < v->n_in; i++) {
        const er_value_info *info = &v->in[i];
        int64_t dims[ER_MAX_RANK];
        for (int d = 0; d < info->rank; d++) dims[d] = info->dims[d] < 0 ? (d == 0 ? max_batch : 1) : info->dims[d];
        er_tensor_free(in[i]);
        in[i] = NULL;
        if (er_tensor_create(info->dtype, info->rank, dims, &in[i]) != ER_STATUS_OK) {
          snprintf(err, errsz, "warm-up: input '%s': %s", info->name, er_last_error());
          ok = false;
          break;
        }
        named[i].tensor = in[i];
      }
      if (!ok) break;
    }
    er_status st = er_session_run(v->session, named, v->n_in, NULL, v->n_out, out);
    if (st != ER_STATUS_OK) {
      snprintf(err, errsz, "warm-up run failed: %s (%s)", er_last_error(), er_status_name(st));
      ok = false;
    }
    for (size_t o = 0; o < v->n_out; o++) {
      er_tensor_free(out[o]);
      out[o] = NULL;
    }
  }
  for (size_t i = 0; i < v->n_in; i++) er_tensor_free(in[i]);
  return ok;
}

static void version_destroy(er__version *v) {
  if (!v) return;
  er__llm_engine_free(v->engine);
  er_llm_free(v->llm);
  er_session_free(v->session);
  er_model_free(v->model);
  free(v);
}

er__version *er__version_load(const char *repo, const char *model, int64_t number,
                              const er__model_config *cfg, const er__serve_options *opt,
                              er__model *owner, er__server *srv, char *err, size_t errsz) {
  char dir[4200], path[4300], sig[4400];
  int64_t t0 = er__now_us();
  er_status st;
  snprintf(dir, sizeof dir, "%s/%s/%lld", repo, model, (long long)number);
  const char *file = version_file(repo, model, number);
  snprintf(path, sizeof path, "%s/%s", dir, file);
  er__version *v = calloc(1, sizeof *v);
  if (!v) {
    snprintf(err, errsz, "out of memory");
    return NULL;
  }
  atomic_init(&v->refs, 1);
  v->number = number;
  if (strcmp(file, LLM_FILE) == 0) {
    /* A GGUF file is memory-mapped, not read whole: its signature is
     * checked by streaming it, then the same path is mapped. */
    if (opt && opt->require_signed &&
        (!er__sign_verify_file((const unsigned char(*)[32])opt->keys, opt->n_keys, path, err, errsz) ||
         !verify_others(dir, opt, err, errsz)))
      goto fail;
    if (!er__llm_version_load(v, path, cfg, owner, srv, err, errsz)) goto fail;
    v->load_seconds = (double)(er__now_us() - t0) * 1e-6;
    return v;
  }
  if (strcmp(file, GENAI_FILE) == 0) {
    /* An ONNX decoder: the folder is the model. Signed, model.onnx and
     * every other file in it (config, weights, tokenizer) carry a valid
     * signature. */
    snprintf(path, sizeof path, "%s/%s", dir, MODEL_FILE);
    if (opt && opt->require_signed &&
        (!er__sign_verify_file((const unsigned char(*)[32])opt->keys, opt->n_keys, path, err, errsz) ||
         !verify_others(dir, opt, err, errsz)))
      goto fail;
    if (!er__llm_version_load(v, dir, cfg, owner, srv, err, errsz)) goto fail;
    v->load_seconds = (double)(er__now_us() - t0) * 1e-6;
    return v;
  }
  if (opt && opt->require_signed) {
    size_t size = 0;
    void *bytes = read_all(path, &size, err, errsz);
    if (!bytes) goto fail;
    snprintf(sig, sizeof sig, "%s%s", path, ER_SIGN_SUFFIX);
    if (!er__sign_verify_bytes((const unsigned char(*)[32])opt->keys, opt->n_keys, bytes, size,
                               sig, err, errsz) ||
        !verify_others(dir, opt, err, errsz)) {
      free(bytes);
      goto fail;
    }
    st = er_model_load_buffer(bytes, size, dir, NULL, &v->model);
    free(bytes);
  } else {
    st = er_model_load_file(path, NULL, &v->model);
  }
  if (st != ER_STATUS_OK) {
    snprintf(err, errsz, "load failed: %s (%s)", er_last_error(), er_status_name(st));
    goto fail;
  }
  er_session_options so;
  er_session_options_init(&so);
  const char *backends[4];
  for (int b = 0; b < cfg->n_backends; b++) backends[b] = cfg->backends[b];
  so.threads = cfg->threads;
  so.allow_fallback = cfg->allow_fallback;
  so.backends = backends;
  so.backend_count = (size_t)cfg->n_backends;
  st = er_session_create(v->model, &so, &v->session);
  if (st != ER_STATUS_OK) {
    snprintf(err, errsz, "session failed: %s (%s)", er_last_error(), er_status_name(st));
    goto fail;
  }
  v->n_in = er_model_input_count(v->model);
  v->n_out = er_model_output_count(v->model);
  if (v->n_in > ER_SERVE_MAX_IO || v->n_out > ER_SERVE_MAX_IO || v->n_out == 0) {
    snprintf(err, errsz, "model has %zu inputs and %zu outputs; the service takes 0..%d inputs "
                         "and 1..%d outputs (ER_SERVE_MAX_IO)",
             v->n_in, v->n_out, ER_SERVE_MAX_IO, ER_SERVE_MAX_IO);
    goto fail;
  }
  v->batchable = true;
  for (size_t i = 0; i < v->n_in; i++) {
    er_model_input_info(v->model, i, &v->in[i]);
    if (v->in[i].rank < 1 || v->in[i].dims[0] >= 0) v->batchable = false;
    if (!er__kserve_dtype(v->in[i].dtype)) {
      snprintf(err, errsz, "input '%s' has type %s, which KServe v2 cannot carry", v->in[i].name,
               er_dtype_name(v->in[i].dtype));
      goto fail;
    }
  }
  for (size_t i = 0; i < v->n_out; i++) {
    er_model_output_info(v->model, i, &v->out[i]);
    if (v->out[i].rank >= 0 && (v->out[i].rank < 1 || v->out[i].dims[0] >= 0))
      v->batchable = false;
  }
  if (v->n_in == 0) v->batchable = false;
  if (cfg->pre) {
    size_t k = 0;
    while (k < v->n_in && strcmp(v->in[k].name, cfg->pre_input) != 0) k++;
    if (k == v->n_in || v->in[k].dtype != ER_DTYPE_FLOAT) {
      snprintf(err, errsz, "config.json: preprocess.input '%s' is not a float32 input of the "
                           "model", cfg->pre_input);
      goto fail;
    }
  }
  if (!warm_up(v, cfg->warmup_runs, cfg->max_batch, err, errsz)) goto fail;
  v->load_seconds = (double)(er__now_us() - t0) * 1e-6;
  return v;
fail:
  version_destroy(v);
  return NULL;
}

void er__version_ref(er__version *v) { atomic_fetch_add(&v->refs, 1); }

void er__version_unref(er__version *v) {
  if (v && atomic_fetch_sub(&v->refs, 1) == 1) {
    if (v->owner)   /* only versions that were served are worth a log line */
      er__serve_log(ER__LOG_INFO, "version_retired",
              json_pack("{s:s,s:I}", "model", v->owner->name, "version", (json_int_t)v->number),
              "version %lld of '%s' retired", (long long)v->number, v->owner->name);
    version_destroy(v);
  }
}

/* ========================================================================
 * Models of the server
 * ======================================================================== */

er__model *er__server_find(er__server *srv, const char *name) {
  int n = atomic_load(&srv->n_models);
  for (int i = 0; i < n; i++)
    if (strcmp(srv->models[i]->name, name) == 0) return srv->models[i];
  return NULL;
}

static er__model *model_add(er__server *srv, const char *name) {
  er__model *m = calloc(1, sizeof *m);
  if (!m) return NULL;
  snprintf(m->name, sizeof m->name, "%s", name);
  m->srv = srv;
  pthread_mutex_init(&m->lock, NULL);
  /* Batch waits use absolute monotonic deadlines (wall-clock jumps must
   * not stretch or cut them). */
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&m->q_cond, &ca);
  pthread_cond_init(&m->fill_cond, &ca);
  pthread_condattr_destroy(&ca);
  er__config_defaults(&m->cfg);
  pthread_mutex_lock(&srv->lock);
  int n = atomic_load(&srv->n_models);
  srv->models[n] = m;
  atomic_store(&srv->n_models, n + 1);   /* publish after the slot is set */
  pthread_mutex_unlock(&srv->lock);
  return m;
}

er__version *er__model_acquire(er__model *m, int64_t version, er__model_config *cfg_out,
                               int *status, char *err, size_t errsz) {
  er__version *v = NULL;
  pthread_mutex_lock(&m->lock);
  if (m->n_live == 0) {
    if (m->loading) {
      *status = 503;
      snprintf(err, errsz, "model '%s' is loading; retry shortly", m->name);
    } else if (m->admin_unloaded) {
      *status = 400;
      snprintf(err, errsz, "model '%s' is unloaded; load it through "
                           "/v2/repository/models/%s/load", m->name, m->name);
    } else {
      *status = 400;
      snprintf(err, errsz, "model '%s' has no ready version", m->name);
    }
  } else if (version == 0) {
    v = m->live[0];
  } else {
    for (int i = 0; i < m->n_live; i++)
      if (m->live[i]->number == version) v = m->live[i];
    if (!v) {
      *status = 404;
      snprintf(err, errsz, "model '%s' has no ready version %lld", m->name, (long long)version);
    }
  }
  if (v) er__version_ref(v);
  if (v && cfg_out) *cfg_out = m->cfg;
  pthread_mutex_unlock(&m->lock);
  return v;
}

static er__seen_version *seen_get(er__model *m, int64_t number) {
  for (int i = 0; i < m->n_seen; i++)
    if (m->seen[i].number == number) return &m->seen[i];
  if (m->n_seen == ER_SERVE_MAX_VERSIONS) return NULL;
  er__seen_version *s = &m->seen[m->n_seen++];
  memset(s, 0, sizeof *s);
  s->number = number;
  s->state = ER__VS_UNAVAILABLE;
  snprintf(s->reason, sizeof s->reason, "not selected by the version policy");
  return s;
}

static bool is_live(er__model *m, int64_t number) {
  for (int i = 0; i < m->n_live; i++)
    if (m->live[i]->number == number) return true;
  return false;
}

static void test_load_delay(void) {
  const char *s = getenv(ENV_TEST_LOAD_DELAY);
  long ms = s ? strtol(s, NULL, 10) : 0;
  if (ms > 0 && ms <= 60000) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000};
    nanosleep(&ts, NULL);
  }
}

/* Brings one model's live versions in line with its policy. Loads happen
 * without the model's lock held, so requests keep being served by the old
 * versions meanwhile. */
/* The chosen set becomes live. Every chosen[] entry holds one
 * reference, which passes to the live table; the old table's references
 * are dropped, so a version leaving it is freed once its queued and
 * running requests are done. */
static void swap_live(er__model *m, er__version **chosen, int n_chosen, int n_avail) {
  er__version *old[2 * ER_SERVE_MAX_VERSIONS];
  int n_old = 0;
  pthread_mutex_lock(&m->lock);
  m->loading = false;
  if (m->admin_unloaded) {   /* unloaded while we were loading: keep it so */
    for (int i = 0; i < n_chosen; i++) old[n_old++] = chosen[i];
    n_chosen = 0;
  }
  if (n_chosen > 0 || n_avail == 0 || m->admin_unloaded) {
    for (int i = 0; i < m->n_live; i++) old[n_old++] = m->live[i];
    /* Highest version first, as er__model_acquire expects. */
    for (int a = 0; a < n_chosen; a++)
      for (int b = a + 1; b < n_chosen; b++)
        if (chosen[b]->number > chosen[a]->number) {
          er__version *t = chosen[a];
          chosen[a] = chosen[b];
          chosen[b] = t;
        }
    for (int i = 0; i < n_chosen; i++) m->live[i] = chosen[i];
    m->n_live = n_chosen;
  } else {
    /* Nothing loadable: keep serving what we had (a corrupt new version
     * never takes the old one down). */
    for (int i = 0; i < n_chosen; i++) old[n_old++] = chosen[i];
  }
  for (int i = 0; i < m->n_seen; i++) {
    er__seen_version *s = &m->seen[i];
    if (is_live(m, s->number)) {
      s->state = ER__VS_READY;
      s->reason[0] = '\0';
    } else if (s->state == ER__VS_READY) {
      s->state = ER__VS_UNAVAILABLE;
      snprintf(s->reason, sizeof s->reason, "unloaded");
    }
  }
  pthread_mutex_unlock(&m->lock);
  for (int i = 0; i < n_old; i++) er__version_unref(old[i]);
}

static void sync_model(er__server *srv, er__model *m) {
  const er__serve_options *opt = &srv->opt;
  er__model_config cfg;
  char err[ER_SERVE_ERR];
  int64_t stamp = 0, avail[ER_SERVE_MAX_VERSIONS], want[ER_SERVE_MAX_VERSIONS];
  int n_want = 0;

  if (!er__config_read(opt->repo, m->name, &cfg, &stamp, err, sizeof err)) {
    pthread_mutex_lock(&m->lock);
    bool fresh = strcmp(m->cfg_error, err) != 0;
    snprintf(m->cfg_error, sizeof m->cfg_error, "%s", err);
    pthread_mutex_unlock(&m->lock);
    if (fresh)
      er__serve_log(ER__LOG_ERROR, "config_invalid", json_pack("{s:s}", "model", m->name),
              "model '%s': %s; keeping what it serves", m->name, err);
    return;
  }
  pthread_mutex_lock(&m->lock);
  m->cfg_error[0] = '\0';
  if (m->n_workers && cfg.instances != m->n_workers)
    er__serve_log(ER__LOG_WARN, "config_restart_needed", json_pack("{s:s}", "model", m->name),
            "model '%s': instances changed to %d; it takes effect at the next restart", m->name,
            cfg.instances);
  m->cfg = cfg;
  m->cfg_stamp = stamp;
  bool admin_unloaded = m->admin_unloaded;
  int64_t pinned = m->pinned;
  pthread_mutex_unlock(&m->lock);
  if (m->n_workers == 0 && !er__sched_start(m, cfg.instances)) {
    er__serve_log(ER__LOG_ERROR, "workers_failed", json_pack("{s:s}", "model", m->name),
            "model '%s': cannot start its worker threads", m->name);
    return;
  }
  if (admin_unloaded) return;

  int n_avail = er__repo_versions(opt->repo, m->name, avail, ER_SERVE_MAX_VERSIONS);
  if (pinned) {
    want[n_want++] = pinned;
  } else if (cfg.policy == ER__POLICY_SPECIFIC) {
    for (int i = 0; i < n_avail; i++)
      for (int k = 0; k < cfg.n_specific; k++)
        if (avail[i] == cfg.specific[k]) want[n_want++] = avail[i];
  } else {
    for (int i = 0; i < n_avail; i++) want[n_want++] = avail[i];
  }
  int need = (!pinned && cfg.policy == ER__POLICY_LATEST) ? cfg.latest_n : n_want;
  /* Versions whose folders are gone leave the index. */
  pthread_mutex_lock(&m->lock);
  for (int i = 0; i < m->n_seen;) {
    bool present = false;
    for (int k = 0; k < n_avail; k++) present |= avail[k] == m->seen[i].number;
    if (present || is_live(m, m->seen[i].number)) i++;
    else m->seen[i] = m->seen[--m->n_seen];
  }
  pthread_mutex_unlock(&m->lock);

  er__version *chosen[ER_SERVE_MAX_VERSIONS];
  int n_chosen = 0;
  for (int i = 0; i < n_want && n_chosen < need; i++) {
    int64_t num = want[i];
    pthread_mutex_lock(&m->lock);
    er__version *have = NULL;
    for (int k = 0; k < m->n_live; k++)
      if (m->live[k]->number == num) have = m->live[k];
    if (have) {
      er__version_ref(have);
      chosen[n_chosen++] = have;
      pthread_mutex_unlock(&m->lock);
      continue;
    }
    int64_t vstamp = version_stamp(opt->repo, m->name, num);
    er__seen_version *s = seen_get(m, num);
    if (s && s->stamp == vstamp && s->stamp != 0) {  /* failed before with these very files */
      pthread_mutex_unlock(&m->lock);
      continue;
    }
    if (s) {
      s->state = ER__VS_LOADING;
      snprintf(s->reason, sizeof s->reason, "loading");
    }
    m->loading = true;
    pthread_mutex_unlock(&m->lock);

    er__serve_log(ER__LOG_INFO, "version_loading", json_pack("{s:s,s:I}", "model", m->name, "version",
                                                       (json_int_t)num),
            "loading version %lld of '%s'", (long long)num, m->name);
    test_load_delay();
    er__version *v = er__version_load(opt->repo, m->name, num, &cfg, opt, m, srv, err, sizeof err);
    char clean[ER_SERVE_ERR];
    if (!v) er__sanitize(err, clean, sizeof clean);

    pthread_mutex_lock(&m->lock);
    s = seen_get(m, num);
    if (v) {
      v->owner = m;
      chosen[n_chosen++] = v;
      if (s) {
        s->state = ER__VS_READY;
        s->reason[0] = '\0';
        s->stamp = 0;
      }
    } else if (s) {
      s->state = ER__VS_UNAVAILABLE;
      snprintf(s->reason, sizeof s->reason, "%s", clean);
      s->stamp = vstamp ? vstamp : 1;
    }
    pthread_mutex_unlock(&m->lock);
    if (v)
      er__serve_log(ER__LOG_INFO, "version_ready",
              json_pack("{s:s,s:I,s:f,s:b}", "model", m->name, "version", (json_int_t)num,
                        "load_seconds", v->load_seconds, "batchable", v->batchable),
              "version %lld of '%s' is ready (load, session and warm-up in %.3f s)",
              (long long)num, m->name, v->load_seconds);
    else
      er__serve_log(ER__LOG_ERROR, "version_failed",
              json_pack("{s:s,s:I,s:s}", "model", m->name, "version", (json_int_t)num, "reason",
                        err),
              "version %lld of '%s' failed and does not replace the serving one: %s",
              (long long)num, m->name, err);
  }

  swap_live(m, chosen, n_chosen, n_avail);
}

void er__repo_scan(er__server *srv) {
  DIR *d = opendir(srv->opt.repo);
  if (!d) {
    er__serve_log(ER__LOG_ERROR, "repo_unreadable", NULL, "cannot list the model repository: %s",
            strerror(errno));
    return;
  }
  char names[ER_SERVE_MAX_MODELS][ER_SERVE_MAX_NAME + 1];
  int n = 0;
  for (struct dirent *e; (e = readdir(d));) {
    char path[4200];
    struct stat sb;
    if (!er__valid_name(e->d_name)) continue;
    snprintf(path, sizeof path, "%s/%s", srv->opt.repo, e->d_name);
    if (stat(path, &sb) != 0 || !S_ISDIR(sb.st_mode)) continue;
    if (n == ER_SERVE_MAX_MODELS) {
      er__serve_log(ER__LOG_WARN, "repo_too_many", NULL,
              "the repository holds more than %d models (ER_SERVE_MAX_MODELS); the rest are "
              "ignored", ER_SERVE_MAX_MODELS);
      break;
    }
    snprintf(names[n++], sizeof names[0], "%s", e->d_name);
  }
  closedir(d);
  for (int i = 0; i < n; i++) {
    er__model *m = er__server_find(srv, names[i]);
    if (!m && atomic_load(&srv->n_models) < ER_SERVE_MAX_MODELS) m = model_add(srv, names[i]);
    if (!m) continue;
    pthread_mutex_lock(&m->lock);
    m->gone = false;
    pthread_mutex_unlock(&m->lock);
    sync_model(srv, m);
  }
  /* Models whose folder left the repository stop serving. */
  int total = atomic_load(&srv->n_models);
  for (int i = 0; i < total; i++) {
    er__model *m = srv->models[i];
    bool present = false;
    for (int k = 0; k < n; k++)
      if (strcmp(names[k], m->name) == 0) present = true;
    if (present) continue;
    pthread_mutex_lock(&m->lock);
    bool was = !m->gone;
    m->gone = true;
    pthread_mutex_unlock(&m->lock);
    if (was) {
      er__serve_log(ER__LOG_WARN, "model_removed", json_pack("{s:s}", "model", m->name),
              "model '%s' left the repository; unloading it", m->name);
      sync_model(srv, m);
    }
  }
}

int er__repo_load(er__server *srv, er__model *m, int64_t version, char *err, size_t errsz) {
  pthread_mutex_lock(&m->lock);
  m->admin_unloaded = false;
  m->pinned = version;
  if (version) {   /* a failed pinned version is tried again on request */
    for (int i = 0; i < m->n_seen; i++)
      if (m->seen[i].number == version) m->seen[i].stamp = 0;
  }
  pthread_mutex_unlock(&m->lock);
  sync_model(srv, m);
  int status = 200;
  pthread_mutex_lock(&m->lock);
  if (version ? !is_live(m, version) : m->n_live == 0) {
    const char *why = "no version folder with a model.onnx or model.gguf";
    for (int i = 0; i < m->n_seen; i++)
      if ((version == 0 || m->seen[i].number == version) && m->seen[i].reason[0])
        why = m->seen[i].reason;
    if (m->cfg_error[0]) why = m->cfg_error;
    snprintf(err, errsz, "failed to load '%s'%s: %s", m->name, version ? " at that version" : "",
             why);
    status = 400;
    if (version) m->pinned = 0;  /* a pin that failed does not stick */
  }
  pthread_mutex_unlock(&m->lock);
  return status;
}

void er__repo_unload(er__server *srv, er__model *m) {
  er__version *old[ER_SERVE_MAX_VERSIONS];
  int n_old;
  (void)srv;
  pthread_mutex_lock(&m->lock);
  m->admin_unloaded = true;
  m->pinned = 0;
  n_old = m->n_live;
  for (int i = 0; i < n_old; i++) old[i] = m->live[i];
  m->n_live = 0;
  for (int i = 0; i < m->n_seen; i++)
    if (m->seen[i].state == ER__VS_READY) {
      m->seen[i].state = ER__VS_UNAVAILABLE;
      snprintf(m->seen[i].reason, sizeof m->seen[i].reason, "unloaded");
    }
  pthread_mutex_unlock(&m->lock);
  for (int i = 0; i < n_old; i++) er__version_unref(old[i]);
  er__serve_log(ER__LOG_INFO, "model_unloaded", json_pack("{s:s}", "model", m->name),
          "model '%s' unloaded through the repository API", m->name);
}
