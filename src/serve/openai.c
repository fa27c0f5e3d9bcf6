/* openai.c - the OpenAI-compatible endpoints on the LLM engine (llm.c).
 *
 *   POST /v1/chat/completions   messages in the model's own chat template
 *   POST /v1/completions        a prompt as text or token ids
 *   GET  /v1/models             the LLMs that have a ready version
 *   POST /tokenize, /detokenize llama-server's shapes
 *
 * A request is parsed and checked completely before it is queued: every
 * field edgerun does not implement is a 400 naming it, never ignored.
 * Streams are server-sent events: one chunk per piece of text the engine
 * hands over, a last chunk with finish_reason, the usage chunk when asked
 * for (stream_options.include_usage), then "data: [DONE]". Errors have
 * OpenAI's shape {"error": {"message", "type", "param", "code"}}. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "serve.h"

#define MAX_PROMPT_BYTES (4u << 20)
#define MAX_STOP_BYTES 1024

enum { PH_ROLE, PH_BODY, PH_USAGE, PH_DONE, PH_END };

struct er__oai {
  int kind;
  er__server *srv;
  er__model *model;
  er__version *ver;          /* one reference */
  er__llm_req *req;          /* one reference */
  char id[48];
  long long created;
  bool stream, include_usage;
  int64_t n_prompt;
  char *prompt_text;         /* for the log with log_prompts */
  bool log_prompts;
  int phase;
  er__sb out;                /* SSE bytes not yet handed to libmicrohttpd */
  size_t out_pos;
  void (*suspend)(void *arg);
  void *conn_arg;
  bool recorded;
};

/* ---- JSON helpers ------------------------------------------------------- */

/* Appends bytes as a JSON string; bytes that are not valid UTF-8 become
 * U+FFFD, so a client's JSON parser never sees a broken sequence. */
static void json_text(er__sb *sb, const char *s, size_t n) {
  const unsigned char *p = (const unsigned char *)s;
  er__sb_put(sb, "\"", 1);
  for (size_t i = 0; i < n;) {
    unsigned char c = p[i];
    if (c < 0x80) {
      switch (c) {
        case '"': er__sb_put(sb, "\\\"", 2); break;
        case '\\': er__sb_put(sb, "\\\\", 2); break;
        case '\n': er__sb_put(sb, "\\n", 2); break;
        case '\r': er__sb_put(sb, "\\r", 2); break;
        case '\t': er__sb_put(sb, "\\t", 2); break;
        default:
          if (c < 0x20 || c == 0x7f) er__sb_printf(sb, "\\u%04x", c);
          else er__sb_put(sb, &c, 1);
      }
      i++;
      continue;
    }
    size_t len = c >= 0xF0 && c <= 0xF4 ? 4 : c >= 0xE0 ? 3 : c >= 0xC2 && c < 0xE0 ? 2 : 0;
    bool ok = len > 0 && i + len <= n;
    for (size_t k = 1; ok && k < len; k++) ok = (p[i + k] & 0xC0) == 0x80;
    if (ok && len == 3) {
      unsigned cp = ((c & 0x0Fu) << 12) | ((p[i + 1] & 0x3Fu) << 6);
      ok = cp >= 0x800 && (cp < 0xD800 || cp > 0xDFFF);
    }
    if (ok && len == 4) {
      unsigned cp = ((c & 0x07u) << 18) | ((p[i + 1] & 0x3Fu) << 12);
      ok = cp >= 0x10000 && cp <= 0x10FFFF;
    }
    if (ok) {
      er__sb_put(sb, p + i, len);
      i += len;
    } else {
      er__sb_puts(sb, "\\ufffd");
      i++;
    }
  }
  er__sb_put(sb, "\"", 1);
}

static int oai_error(er__sb *o, int status, const char *param, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
static int oai_error(er__sb *o, int status, const char *param, const char *code, const char *fmt, ...) {
  char msg[ER_SERVE_ERR * 2], clean[ER_SERVE_ERR * 2];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  er__sanitize(msg, clean, sizeof clean);
  const char *type = status == 401 ? "authentication_error"
                     : status == 404 ? "not_found_error"
                     : status == 429 ? "rate_limit_error"
                     : status >= 500 ? "server_error"
                                     : "invalid_request_error";
  o->len = 0;
  er__sb_puts(o, "{\"error\":{\"message\":");
  er__sb_json_str(o, clean);
  er__sb_printf(o, ",\"type\":\"%s\",\"param\":", type);
  if (param) er__sb_json_str(o, param);
  else er__sb_puts(o, "null");
  er__sb_puts(o, ",\"code\":");
  if (code) er__sb_json_str(o, code);
  else er__sb_puts(o, "null");
  er__sb_puts(o, "}}");
  return status;
}

static const char *finish_name(int f) { return f == ER__FIN_LENGTH ? "length" : "stop"; }
static void record(er__oai *o, int status, int finish, bool gone);

/* ---- model resolution ---------------------------------------------------- */

/* The LLM model a request names (NULL name: the only LLM there is). */
static int resolve(er__server *srv, const char *name, er__model **m_out, er__version **v_out, er__sb *err) {
  er__model *m = NULL;
  if (name) {
    m = er__valid_name(name) ? er__server_find(srv, name) : NULL;
    if (!m) return oai_error(err, 404, "model", "model_not_found", "The model '%s' does not exist in the repository", name);
  } else {
    int nm = atomic_load(&srv->n_models), found = 0;
    for (int i = 0; i < nm; i++) {
      er__model *x = srv->models[i];
      pthread_mutex_lock(&x->lock);
      bool llm = x->n_live && x->live[0]->engine;
      pthread_mutex_unlock(&x->lock);
      if (llm) m = x, found++;
    }
    if (found != 1)
      return oai_error(err, 400, "model", NULL, "give \"model\": the repository serves %d language models", found);
  }
  int status = 0;
  char why[ER_SERVE_ERR];
  er__version *v = er__model_acquire(m, 0, NULL, &status, why, sizeof why);
  if (!v) return oai_error(err, status == 400 ? 503 : status, "model", NULL, "%s", why);
  if (!v->engine) {
    er__version_unref(v);
    return oai_error(err, 400, "model", NULL, "model '%s' is not a language model: it serves /v2/models/%s/infer",
                     m->name, m->name);
  }
  *m_out = m;
  *v_out = v;
  return 0;
}

/* ---- request parsing ------------------------------------------------------ */

static bool num_in(json_t *v, double lo, double hi, bool lo_open, double *out) {
  if (!json_is_number(v)) return false;
  double d = json_number_value(v);
  if (d < lo || d > hi || (lo_open && d == lo)) return false;
  *out = d;
  return true;
}

/* "content" of a message: a string, null, or text parts. Appends to *text. */
static bool message_content(json_t *c, er__sb *text) {
  if (json_is_null(c)) return true;
  if (json_is_string(c)) {
    er__sb_put(text, json_string_value(c), json_string_length(c));
    return true;
  }
  if (!json_is_array(c)) return false;
  size_t i;
  json_t *part;
  json_array_foreach(c, i, part) {
    json_t *type = json_object_get(part, "type"), *t = json_object_get(part, "text");
    if (!json_is_string(type) || strcmp(json_string_value(type), "text") != 0 || !json_is_string(t)) return false;
    er__sb_put(text, json_string_value(t), json_string_length(t));
  }
  return true;
}

static int chat_prompt(er__oai *o, json_t *msgs, char **text_out, er__sb *err) {
  size_t n = json_array_size(msgs);
  if (!json_is_array(msgs) || n == 0 || n > ER_SERVE_MAX_MESSAGES)
    return oai_error(err, 400, "messages", NULL, "\"messages\" must be an array of 1 to %d messages", ER_SERVE_MAX_MESSAGES);
  er_llm_message m[ER_SERVE_MAX_MESSAGES];
  er__sb texts[ER_SERVE_MAX_MESSAGES];
  memset(texts, 0, sizeof(er__sb) * n);
  int status = 0;
  for (size_t i = 0; i < n && !status; i++) {
    json_t *msg = json_array_get(msgs, i);
    const char *key;
    json_t *val;
    if (!json_is_object(msg)) {
      status = oai_error(err, 400, "messages", NULL, "messages[%zu] must be an object", i);
      break;
    }
    json_object_foreach(msg, key, val) {
      if (strcmp(key, "role") && strcmp(key, "content") && strcmp(key, "name")) {
        status = oai_error(err, 400, "messages", "unsupported_parameter",
                           "messages[%zu].%s is not supported by edgerun (tools and function calls are not)", i, key);
        break;
      }
    }
    if (status) break;
    const char *role = json_string_value(json_object_get(msg, "role"));
    if (!role || (strcmp(role, "system") && strcmp(role, "user") && strcmp(role, "assistant") && strcmp(role, "developer"))) {
      status = oai_error(err, 400, "messages", NULL, "messages[%zu].role must be system, developer, user or assistant", i);
      break;
    }
    if (!message_content(json_object_get(msg, "content"), &texts[i])) {
      status = oai_error(err, 400, "messages", NULL,
                         "messages[%zu].content must be a string or an array of {\"type\": \"text\", \"text\": ...} parts", i);
      break;
    }
    er__sb_put(&texts[i], "", 1);   /* NUL */
    if (texts[i].oom) status = oai_error(err, 503, NULL, NULL, "out of memory");
    m[i].role = strcmp(role, "developer") == 0 ? "system" : role;
    m[i].content = texts[i].p;
  }
  if (!status) {
    er_status st = er_llm_chat_prompt(o->ver->llm, m, n, true, text_out);
    if (st != ER_STATUS_OK)
      status = oai_error(err, 400, "messages", NULL, "the chat template cannot render these messages: %s", er_last_error());
  }
  for (size_t i = 0; i < n; i++) er__sb_free(&texts[i]);
  return status;
}

static int tokenize(er__oai *o, const char *text, size_t len, bool parse_special, er__sb *err) {
  size_t n = 0;
  er_status st = er_llm_tokenize(o->ver->llm, text, len, true, parse_special, NULL, 0, &n);
  if (st != ER_STATUS_OK && st != ER_STATUS_LIMIT)
    return oai_error(err, 400, "prompt", NULL, "cannot tokenize the prompt: %s", er_last_error());
  o->req->prompt = malloc((n ? n : 1) * sizeof(int32_t));
  if (!o->req->prompt) return oai_error(err, 503, NULL, NULL, "out of memory for %zu prompt tokens", n);
  st = er_llm_tokenize(o->ver->llm, text, len, true, parse_special, o->req->prompt, n, &n);
  if (st != ER_STATUS_OK) return oai_error(err, 400, "prompt", NULL, "cannot tokenize the prompt: %s", er_last_error());
  o->req->n_prompt = n;
  return 0;
}

static int completion_prompt(er__oai *o, json_t *p, er__sb *err) {
  if (json_is_array(p) && json_array_size(p) == 1 && json_is_string(json_array_get(p, 0))) p = json_array_get(p, 0);
  if (json_is_string(p)) {
    if (json_string_length(p) > MAX_PROMPT_BYTES)
      return oai_error(err, 400, "prompt", NULL, "the prompt is over %u bytes", MAX_PROMPT_BYTES);
    o->prompt_text = strdup(json_string_value(p));
    return tokenize(o, json_string_value(p), json_string_length(p), false, err);
  }
  er_llm_info info;
  er_llm_info_get(o->ver->llm, &info);
  size_t n = json_array_size(p);
  if (!json_is_array(p) || n == 0 || n > (1u << 20))
    return oai_error(err, 400, "prompt", NULL, "\"prompt\" must be a string, one string in an array, or an array of token ids");
  o->req->prompt = malloc(n * sizeof(int32_t));
  if (!o->req->prompt) return oai_error(err, 503, NULL, NULL, "out of memory");
  for (size_t i = 0; i < n; i++) {
    json_t *t = json_array_get(p, i);
    if (!json_is_integer(t) || json_integer_value(t) < 0 || json_integer_value(t) >= info.n_vocab)
      return oai_error(err, 400, "prompt", NULL, "prompt[%zu] must be a token id in 0..%lld", i, (long long)info.n_vocab - 1);
    o->req->prompt[i] = (int32_t)json_integer_value(t);
  }
  o->req->n_prompt = n;
  return 0;
}

static int parse_stop(er__oai *o, json_t *v, er__sb *err) {
  if (json_is_null(v)) return 0;
  json_t *one[1] = {v};
  size_t n = json_is_string(v) ? 1 : json_array_size(v);
  if (!json_is_string(v) && (!json_is_array(v) || n > ER_SERVE_MAX_STOP))
    return oai_error(err, 400, "stop", NULL, "\"stop\" must be a string or an array of at most %d strings", ER_SERVE_MAX_STOP);
  for (size_t i = 0; i < n; i++) {
    json_t *s = json_is_string(v) ? one[0] : json_array_get(v, i);
    if (!json_is_string(s) || json_string_length(s) == 0 || json_string_length(s) > MAX_STOP_BYTES)
      return oai_error(err, 400, "stop", NULL, "stop strings must be 1 to %d bytes of text", MAX_STOP_BYTES);
    o->req->stop[o->req->n_stop] = strdup(json_string_value(s));
    if (!o->req->stop[o->req->n_stop]) return oai_error(err, 503, NULL, NULL, "out of memory");
    o->req->n_stop++;
  }
  return 0;
}

/* Fields accepted only with their default (no-op) value. */
static bool inert(const char *key, json_t *v) {
  if (json_is_null(v)) return true;
  if (!strcmp(key, "logprobs") || !strcmp(key, "echo") || !strcmp(key, "parallel_tool_calls")) return json_is_false(v);
  if (!strcmp(key, "best_of")) return json_is_integer(v) && json_integer_value(v) == 1;
  if (!strcmp(key, "logit_bias")) return json_is_object(v) && json_object_size(v) == 0;
  if (!strcmp(key, "tools")) return json_is_array(v) && json_array_size(v) == 0;
  if (!strcmp(key, "response_format")) {
    const char *t = json_string_value(json_object_get(v, "type"));
    return t && !strcmp(t, "text");
  }
  return false;
}

static int parse_fields(er__oai *o, json_t *root, er__sb *err) {
  const char *key;
  json_t *v;
  const er__llm_config *lc = er__llm_engine_config(o->ver->engine);
  er__llm_req *r = o->req;
  r->sampling = lc->sampling;
  int64_t max_tokens = 0;
  bool seeded = false;
  json_object_foreach(root, key, v) {
    double d;
    bool null = json_is_null(v);
    if (!strcmp(key, "model") || !strcmp(key, "user") || !strcmp(key, "messages") || !strcmp(key, "prompt")) {
      continue;   /* handled by the caller; user is an opaque tag */
    } else if (!strcmp(key, "max_tokens") || !strcmp(key, "max_completion_tokens")) {
      if (null) continue;
      if (!json_is_integer(v) || json_integer_value(v) < 1 || json_integer_value(v) > (1 << 20))
        return oai_error(err, 400, key, NULL, "\"%s\" must be an integer of at least 1", key);
      max_tokens = json_integer_value(v);
    } else if (!strcmp(key, "temperature")) {
      if (null) continue;
      if (!num_in(v, 0, 2, false, &d)) return oai_error(err, 400, key, NULL, "\"temperature\" must be a number in 0..2");
      r->sampling.temperature = (float)d;
    } else if (!strcmp(key, "top_p")) {
      if (null) continue;
      if (!num_in(v, 0, 1, true, &d)) return oai_error(err, 400, key, NULL, "\"top_p\" must be a number in (0, 1]");
      r->sampling.top_p = (float)d;
    } else if (!strcmp(key, "min_p")) {
      if (null) continue;
      if (!num_in(v, 0, 1, false, &d)) return oai_error(err, 400, key, NULL, "\"min_p\" must be a number in 0..1");
      r->sampling.min_p = (float)d;
    } else if (!strcmp(key, "top_k")) {
      if (null) continue;
      if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > 1000000)
        return oai_error(err, 400, key, NULL, "\"top_k\" must be a non-negative integer (0 = off)");
      r->sampling.top_k = (int)json_integer_value(v);
    } else if (!strcmp(key, "presence_penalty") || !strcmp(key, "frequency_penalty")) {
      if (null) continue;
      if (!num_in(v, -2, 2, false, &d)) return oai_error(err, 400, key, NULL, "\"%s\" must be a number in -2..2", key);
      if (key[0] == 'p') r->sampling.presence_penalty = (float)d;
      else r->sampling.frequency_penalty = (float)d;
    } else if (!strcmp(key, "repeat_penalty")) {
      if (null) continue;
      if (!num_in(v, 0, 100, true, &d)) return oai_error(err, 400, key, NULL, "\"repeat_penalty\" must be a number in (0, 100]");
      r->sampling.repeat_penalty = (float)d;
    } else if (!strcmp(key, "seed")) {
      if (null) continue;
      if (!json_is_integer(v)) return oai_error(err, 400, key, NULL, "\"seed\" must be an integer");
      r->sampling.seed = (uint64_t)json_integer_value(v);
      seeded = true;
    } else if (!strcmp(key, "stop")) {
      int st = parse_stop(o, v, err);
      if (st) return st;
    } else if (!strcmp(key, "n")) {
      if (null) continue;
      if (!json_is_integer(v) || json_integer_value(v) != 1)
        return oai_error(err, 400, key, "unsupported_value", "\"n\" must be 1: edgerun returns one choice per request");
    } else if (!strcmp(key, "stream")) {
      if (null) continue;
      if (!json_is_boolean(v)) return oai_error(err, 400, key, NULL, "\"stream\" must be true or false");
      o->stream = json_is_true(v);
    } else if (!strcmp(key, "stream_options")) {
      if (null) continue;
      json_t *u = json_object_get(v, "include_usage");
      if (!json_is_object(v) || json_object_size(v) != (u ? 1u : 0u) || (u && !json_is_boolean(u)))
        return oai_error(err, 400, key, NULL, "\"stream_options\" takes {\"include_usage\": true|false} only");
      o->include_usage = json_is_true(u);
    } else if (inert(key, v)) {
      continue;
    } else {
      return oai_error(err, 400, key, "unsupported_parameter", "\"%s\" is not supported by edgerun%s", key,
                       !strcmp(key, "logprobs") || !strcmp(key, "top_logprobs") ? " (no log-probabilities yet)"
                       : !strcmp(key, "tools") || !strcmp(key, "tool_choice") || !strcmp(key, "functions")
                           ? " (no tool calls)" : "");
    }
  }
  if (o->include_usage && !o->stream)
    return oai_error(err, 400, "stream_options", NULL, "\"stream_options\" is only allowed with \"stream\": true");
  if (!seeded) {   /* OpenAI's rule: no seed, a different draw each time */
    static atomic_ullong counter;
    r->sampling.seed = (uint64_t)er__now_us() ^ (atomic_fetch_add(&counter, 1) * 0x9E3779B97F4A7C15ull);
  }
  if (lc->max_tokens > 0 && max_tokens > lc->max_tokens)
    return oai_error(err, 400, "max_tokens", NULL, "max_tokens %lld is over this model's cap of %lld (config.json max_tokens)",
                     (long long)max_tokens, (long long)lc->max_tokens);
  r->max_tokens = max_tokens ? max_tokens : lc->max_tokens;
  return 0;
}

int er__oai_prepare(er__server *srv, int kind, const char *body, size_t len, er__oai **out, er__sb *err) {
  json_error_t je;
  json_t *root = json_loadb(body ? body : "", len, JSON_REJECT_DUPLICATES, &je);
  if (!root) return oai_error(err, 400, NULL, NULL, "the body is not valid JSON: line %d: %s", je.line, je.text);
  int status = 0;
  er__oai *o = NULL;
  const char *need = kind == ER__OAI_CHAT ? "messages" : "prompt";
  json_t *name = json_object_get(root, "model");
  if (!json_is_object(root)) status = oai_error(err, 400, NULL, NULL, "the body must be a JSON object");
  else if (!json_is_string(name)) status = oai_error(err, 400, "model", NULL, "\"model\" must name a model of the repository");
  else if (!json_object_get(root, need)) status = oai_error(err, 400, need, NULL, "\"%s\" is required", need);
  else if ((kind == ER__OAI_CHAT && json_object_get(root, "prompt")) ||
           (kind == ER__OAI_COMPLETION && json_object_get(root, "messages")))
    status = oai_error(err, 400, kind == ER__OAI_CHAT ? "prompt" : "messages", "unsupported_parameter",
                       kind == ER__OAI_CHAT ? "\"prompt\" belongs to /v1/completions" : "\"messages\" belongs to /v1/chat/completions");
  if (!status && !(o = calloc(1, sizeof *o))) status = oai_error(err, 503, NULL, NULL, "out of memory");
  if (!status) {
    o->kind = kind;
    o->srv = srv;
    status = resolve(srv, json_string_value(name), &o->model, &o->ver, err);
  }
  if (!status && !(o->req = er__llm_req_new())) status = oai_error(err, 503, NULL, NULL, "out of memory");
  if (!status) status = parse_fields(o, root, err);
  if (!status) {
    if (kind == ER__OAI_CHAT) {
      char *text = NULL;
      status = chat_prompt(o, json_object_get(root, "messages"), &text, err);
      if (!status) status = tokenize(o, text, strlen(text), true, err);
      o->prompt_text = text;
    } else {
      status = completion_prompt(o, json_object_get(root, "prompt"), err);
    }
  }
  if (!status) {
    const er__llm_config *lc = er__llm_engine_config(o->ver->engine);
    o->n_prompt = (int64_t)o->req->n_prompt;
    if (o->n_prompt == 0)
      status = oai_error(err, 400, need, NULL, "the prompt is empty: it needs one token at least");
    else if (o->n_prompt > lc->max_prompt_tokens)
      status = oai_error(err, 400, need, "context_length_exceeded",
                         "the prompt has %lld tokens; this model takes at most %lld (config.json max_prompt_tokens and ctx)",
                         (long long)o->n_prompt, (long long)lc->max_prompt_tokens);
    o->log_prompts = lc->log_prompts;
    o->req->stream = o->stream;
    o->created = (long long)time(NULL);
    static atomic_ullong serial;
    snprintf(o->id, sizeof o->id, "%s-%llx%04llx", kind == ER__OAI_CHAT ? "chatcmpl" : "cmpl",
             (unsigned long long)er__now_us(), atomic_fetch_add(&serial, 1) & 0xffff);
  }
  json_decref(root);
  if (status) {
    er__oai_free(o);
    return status;
  }
  *out = o;
  return 0;
}

er__model *er__oai_model(const er__oai *o) { return o->model; }
bool er__oai_streams(const er__oai *o) { return o->stream; }
er__llm_req *er__oai_req(const er__oai *o) { return o->req; }

int er__oai_submit(er__oai *o, void (*on_accept)(void *arg), void *accept_arg, void (*wake)(void *arg),
                   void (*suspend)(void *arg), void *conn_arg, er__sb *err) {
  char msg[ER_SERVE_ERR];
  o->req->wake = wake;
  o->req->wake_arg = conn_arg;
  o->suspend = suspend;
  o->conn_arg = conn_arg;
  o->req->t_submit = er__now_us();
  atomic_fetch_add(&o->req->refs, 1);   /* the engine's */
  int status = er__llm_submit(o->ver->engine, o->req, on_accept, accept_arg, msg, sizeof msg);
  if (status) {
    atomic_fetch_sub(&o->req->refs, 1);
    record(o, status, ER__FIN_ERROR, false);
    o->req->wake = NULL;
    return oai_error(err, status, NULL, status == 429 ? "rate_limit_exceeded" : NULL, "%s", msg);
  }
  return 0;
}

/* ---- responses ------------------------------------------------------------ */

static void usage_json(er__oai *o, er__sb *out) {
  er__llm_req *r = o->req;
  er__sb_printf(out, "{\"prompt_tokens\":%lld,\"completion_tokens\":%lld,\"total_tokens\":%lld,"
                     "\"prompt_tokens_details\":{\"cached_tokens\":%lld}}",
                (long long)o->n_prompt, (long long)r->completion_tokens,
                (long long)(o->n_prompt + r->completion_tokens), (long long)r->reused_tokens);
}

static void head_json(er__oai *o, er__sb *out, const char *object) {
  er__sb_printf(out, "{\"id\":\"%s\",\"object\":\"%s\",\"created\":%lld,\"model\":", o->id, object, o->created);
  er__sb_json_str(out, o->model->name);
  er__sb_printf(out, ",\"system_fingerprint\":\"edgerun-%s\",", er_version());
}

/* One log line and the request metrics, once per request. Under no lock. */
static void record(er__oai *o, int status, int finish, bool gone) {
  if (o->recorded || !o->req) return;
  o->recorded = true;
  er__llm_req *r = o->req;
  int64_t now = er__now_us();
  er__metrics_request(&o->model->m, status, now - r->t_submit);
  if (status == 200) er__server_note_latency(o->srv, now - r->t_submit);
  pthread_mutex_lock(&r->lock);
  double ttft = r->t_first ? (double)(r->t_first - r->t_submit) / 1000.0 : -1;
  long long gen = r->completion_tokens, reused = r->reused_tokens;
  pthread_mutex_unlock(&r->lock);
  json_t *f = json_pack("{s:s,s:s,s:i,s:b,s:I,s:I,s:I,s:f,s:f,s:s}", "model", o->model->name, "id", o->id,
                        "status", status, "stream", o->stream, "prompt_tokens", (json_int_t)o->n_prompt,
                        "cached_tokens", (json_int_t)reused, "completion_tokens", (json_int_t)gen, "ttft_ms", ttft,
                        "ms", (double)(now - r->t_submit) / 1000.0, "finish",
                        gone ? "client_gone" : status != 200 ? "error" : finish_name(finish));
  if (f && o->log_prompts && o->prompt_text) json_object_set_new(f, "prompt", json_string(o->prompt_text));
  er__serve_log(ER__LOG_INFO, "llm_request", f, "%s: %lld prompt + %lld generated tokens", o->id,
                (long long)o->n_prompt, gen);
}

int er__oai_response(er__oai *o, er__sb *out) {
  er__llm_req *r = o->req;
  pthread_mutex_lock(&r->lock);
  int finish = r->finish, status = r->status;
  char errmsg[ER_SERVE_ERR];
  snprintf(errmsg, sizeof errmsg, "%s", r->err);
  pthread_mutex_unlock(&r->lock);
  if (finish == ER__FIN_CANCELLED) {   /* the client hung up: nobody reads this */
    record(o, 499, finish, true);
    return oai_error(out, 499, NULL, NULL, "the client closed the connection");
  }
  if (finish == ER__FIN_ERROR) {
    record(o, status, finish, false);
    return oai_error(out, status, NULL, NULL, "%s", errmsg);
  }
  bool chat = o->kind == ER__OAI_CHAT;
  head_json(o, out, chat ? "chat.completion" : "text_completion");
  er__sb_puts(out, "\"choices\":[{\"index\":0,");
  if (chat) er__sb_puts(out, "\"message\":{\"role\":\"assistant\",\"content\":");
  else er__sb_puts(out, "\"text\":");
  json_text(out, r->text.p ? r->text.p : "", r->text.len);
  er__sb_printf(out, "%s,\"logprobs\":null,\"finish_reason\":\"%s\"}],\"usage\":", chat ? "}" : "", finish_name(finish));
  usage_json(o, out);
  er__sb_puts(out, "}");
  record(o, 200, finish, false);
  return 200;
}

/* One SSE event with a chunk: text (n bytes) or, with finish >= 0, the
 * last chunk. */
static void chunk(er__oai *o, const char *text, size_t n, int finish, bool role) {
  er__sb *out = &o->out;
  bool chat = o->kind == ER__OAI_CHAT;
  er__sb_puts(out, "data: ");
  head_json(o, out, chat ? "chat.completion.chunk" : "text_completion");
  er__sb_puts(out, "\"choices\":[{\"index\":0,");
  if (chat) {
    er__sb_puts(out, "\"delta\":{");
    if (role) er__sb_puts(out, "\"role\":\"assistant\",\"content\":\"\"");
    else if (finish < 0) er__sb_puts(out, "\"content\":"), json_text(out, text, n);
    er__sb_puts(out, "}");
  } else {
    er__sb_puts(out, "\"text\":");
    json_text(out, text, n);
  }
  er__sb_puts(out, ",\"logprobs\":null,\"finish_reason\":");
  if (finish >= 0) er__sb_printf(out, "\"%s\"", finish_name(finish));
  else er__sb_puts(out, "null");
  er__sb_puts(out, "}]");
  if (o->include_usage) er__sb_puts(out, ",\"usage\":null");
  er__sb_puts(out, "}\n\n");
}

long er__oai_stream_read(er__oai *o, char *buf, size_t max) {
  /* Each pass produces the next event (a phase may produce none). */
  while (o->out_pos >= o->out.len) {
    o->out.len = o->out_pos = 0;
    if (o->phase == PH_END) return -1;
    er__llm_req *r = o->req;
    if (o->phase == PH_ROLE) {
      if (o->kind == ER__OAI_CHAT) chunk(o, NULL, 0, -1, true);
      o->phase = PH_BODY;
    } else {
      pthread_mutex_lock(&r->lock);
      if (o->phase == PH_BODY && r->text.len) {
        chunk(o, r->text.p, r->text.len, -1, false);
        r->text.len = 0;
      } else if (o->phase == PH_BODY && r->done) {
        if (r->finish == ER__FIN_ERROR) {
          er__sb e = {0};
          oai_error(&e, r->status, NULL, NULL, "%s", r->err);
          er__sb_puts(&o->out, "data: ");
          er__sb_put(&o->out, e.p, e.len);
          er__sb_puts(&o->out, "\n\n");
          er__sb_free(&e);
        } else {
          chunk(o, "", 0, r->finish, false);
        }
        o->phase = o->include_usage && r->finish != ER__FIN_ERROR ? PH_USAGE : PH_DONE;
      } else if (o->phase == PH_USAGE) {
        er__sb_puts(&o->out, "data: ");
        head_json(o, &o->out, o->kind == ER__OAI_CHAT ? "chat.completion.chunk" : "text_completion");
        er__sb_puts(&o->out, "\"choices\":[],\"usage\":");
        usage_json(o, &o->out);
        er__sb_puts(&o->out, "}\n\n");
        o->phase = PH_DONE;
      } else if (o->phase == PH_DONE) {
        er__sb_puts(&o->out, "data: [DONE]\n\n");
        o->phase = PH_END;
      } else {
        r->waiting = true;
        if (o->suspend) o->suspend(o->conn_arg);
        pthread_mutex_unlock(&r->lock);
        return 0;
      }
      int fin = r->finish, st = r->status;
      bool done = o->phase == PH_END;
      pthread_mutex_unlock(&r->lock);
      if (done) record(o, fin == ER__FIN_ERROR ? st : 200, fin, false);
    }
    if (o->out.oom) return -1;
  }
  size_t n = o->out.len - o->out_pos;
  if (n > max) n = max;
  memcpy(buf, o->out.p + o->out_pos, n);
  o->out_pos += n;
  return (long)n;
}

void er__oai_free(er__oai *o) {
  if (!o) return;
  if (o->req) {
    pthread_mutex_lock(&o->req->lock);
    bool done = o->req->done, submitted = o->req->wake != NULL;
    o->req->gone = true;
    pthread_mutex_unlock(&o->req->lock);
    if (submitted && !o->recorded) record(o, done ? 200 : 499, ER__FIN_CANCELLED, !done);
    er__llm_req_unref(o->req);
  }
  if (o->ver) er__version_unref(o->ver);
  er__sb_free(&o->out);
  free(o->prompt_text);
  free(o);
}

/* ---- /v1/models, /tokenize, /detokenize ------------------------------------ */

bool er__oai_models(er__server *srv, const char *id, er__sb *out) {
  int nm = atomic_load(&srv->n_models);
  bool first = true;
  if (!id) er__sb_puts(out, "{\"object\":\"list\",\"data\":[");
  for (int i = 0; i < nm; i++) {
    er__model *m = srv->models[i];
    er__version *v = NULL;
    if (id && strcmp(id, m->name) != 0) continue;
    pthread_mutex_lock(&m->lock);
    if (m->n_live && m->live[0]->engine) er__version_ref(v = m->live[0]);
    pthread_mutex_unlock(&m->lock);
    if (!v) continue;
    int64_t n_ctx;
    int slots;
    uint64_t kv;
    er__llm_engine_info(v->engine, &n_ctx, &slots, &kv);
    er__sb_printf(out, "%s{\"id\":", first ? "" : ",");
    er__sb_json_str(out, m->name);
    er__sb_printf(out, ",\"object\":\"model\",\"created\":%lld,\"owned_by\":\"edgerun\",\"version\":\"%lld\","
                       "\"context_length\":%lld,\"slots\":%d,\"kv_cache_bytes\":%llu}",
                  (long long)srv->start_wall, (long long)v->number, (long long)n_ctx, slots, (unsigned long long)kv);
    first = false;
    er__version_unref(v);
  }
  if (!id) er__sb_puts(out, "]}");
  return !id || !first;
}

int er__oai_tokenize(er__server *srv, bool detok, const char *body, size_t len, er__sb *out) {
  json_error_t je;
  json_t *root = json_loadb(body ? body : "", len, JSON_REJECT_DUPLICATES, &je);
  if (!root || !json_is_object(root)) {
    json_decref(root);
    return oai_error(out, 400, NULL, NULL, "the body must be a JSON object");
  }
  json_t *name = json_object_get(root, "model");
  er__model *m = NULL;
  er__version *v = NULL;
  int status = 0;
  if (name && !json_is_string(name)) status = oai_error(out, 400, "model", NULL, "\"model\" must be a string");
  if (!status) status = resolve(srv, json_string_value(name), &m, &v, out);
  const char *key;
  json_t *val;
  json_object_foreach(root, key, val) {
    if (status) break;
    bool known = !strcmp(key, "model") || (detok ? !strcmp(key, "tokens")
                                                 : !strcmp(key, "content") || !strcmp(key, "add_special") ||
                                                       !strcmp(key, "parse_special") || !strcmp(key, "with_pieces"));
    if (!known) status = oai_error(out, 400, key, "unsupported_parameter", "\"%s\" is not a field of this endpoint", key);
  }
  if (!status && !detok) {
    json_t *c = json_object_get(root, "content");
    json_t *as = json_object_get(root, "add_special"), *ps = json_object_get(root, "parse_special"),
           *wp = json_object_get(root, "with_pieces");
    if (!json_is_string(c) || json_string_length(c) > MAX_PROMPT_BYTES)
      status = oai_error(out, 400, "content", NULL, "\"content\" must be a text of at most %u bytes", MAX_PROMPT_BYTES);
    else if ((as && !json_is_boolean(as)) || (ps && !json_is_boolean(ps)) || (wp && !json_is_boolean(wp)))
      status = oai_error(out, 400, NULL, NULL, "add_special, parse_special and with_pieces must be true or false");
    size_t n = 0;
    int32_t *ids = NULL;
    if (!status) {
      er_llm_tokenize(v->llm, json_string_value(c), json_string_length(c), json_is_true(as), json_is_true(ps), NULL, 0, &n);
      ids = malloc((n ? n : 1) * sizeof *ids);
      if (!ids || er_llm_tokenize(v->llm, json_string_value(c), json_string_length(c), json_is_true(as),
                                  json_is_true(ps), ids, n, &n) != ER_STATUS_OK)
        status = oai_error(out, 400, "content", NULL, "cannot tokenize: %s", ids ? er_last_error() : "out of memory");
    }
    if (!status) {
      out->len = 0;
      er__sb_puts(out, "{\"tokens\":[");
      for (size_t i = 0; i < n; i++) {
        if (!json_is_true(wp)) {
          er__sb_printf(out, "%s%d", i ? "," : "", ids[i]);
          continue;
        }
        char piece[512];
        size_t pl = 0;
        er_llm_token_piece(v->llm, ids[i], true, piece, sizeof piece, &pl);
        er__sb_printf(out, "%s{\"id\":%d,\"piece\":", i ? "," : "", ids[i]);
        json_text(out, piece, pl);
        er__sb_puts(out, "}");
      }
      er__sb_puts(out, "]}");
      status = 200;
    }
    free(ids);
  } else if (!status) {
    json_t *t = json_object_get(root, "tokens");
    size_t n = json_array_size(t);
    er_llm_info info;
    er_llm_info_get(v->llm, &info);
    int32_t *ids = malloc((n ? n : 1) * sizeof *ids);
    if (!json_is_array(t) || n > (1u << 20)) status = oai_error(out, 400, "tokens", NULL, "\"tokens\" must be an array of token ids");
    else if (!ids) status = oai_error(out, 503, NULL, NULL, "out of memory");
    for (size_t i = 0; !status && i < n; i++) {
      json_t *x = json_array_get(t, i);
      if (!json_is_integer(x) || json_integer_value(x) < 0 || json_integer_value(x) >= info.n_vocab)
        status = oai_error(out, 400, "tokens", NULL, "tokens[%zu] must be a token id in 0..%lld", i, (long long)info.n_vocab - 1);
      else ids[i] = (int32_t)json_integer_value(x);
    }
    size_t bytes = 0;
    char *text = NULL;
    if (!status) {
      er_llm_detokenize(v->llm, ids, n, false, NULL, 0, &bytes);
      text = malloc(bytes + 1);
      if (!text || er_llm_detokenize(v->llm, ids, n, false, text, bytes + 1, &bytes) != ER_STATUS_OK)
        status = oai_error(out, 400, "tokens", NULL, "cannot detokenize: %s", text ? er_last_error() : "out of memory");
    }
    if (!status) {
      out->len = 0;
      er__sb_puts(out, "{\"content\":");
      json_text(out, text, bytes);
      er__sb_puts(out, "}");
      status = 200;
    }
    free(text);
    free(ids);
  }
  if (v) er__version_unref(v);
  json_decref(root);
  return status;
}
