/* chat.c - chat templates: the entry points of chat.h, the choice between
 * the model's own Jinja template and a built-in format, and the built-in
 * formats themselves (ChatML, Llama 3, Gemma).
 *
 * The interpreter lives in chat-parse.c (source to AST), chat-eval.c (AST
 * to prompt) and chat-value.c (the values it computes with). */
#include <stdlib.h>

#include "core/log.h"
#include "llm/chat-impl.h"

static const char *format_name(er_chat_format f) {
  switch (f) {
  case ER_CHAT_JINJA: return "jinja";
  case ER_CHAT_CHATML: return "ChatML";
  case ER_CHAT_LLAMA3: return "Llama 3";
  case ER_CHAT_GEMMA: return "Gemma";
  default: return "unknown";
  }
}

/* The built-in format whose markers the source carries, or ER_CHAT_JINJA. */
static er_chat_format sniff(const char *src, size_t len) {
  static const struct {
    const char *marker;
    er_chat_format format;
  } markers[] = {
      {"<|im_start|>", ER_CHAT_CHATML},
      {"<|start_header_id|>", ER_CHAT_LLAMA3},
      {"<start_of_turn>", ER_CHAT_GEMMA},
  };
  for (size_t k = 0; k < ER_ARRAY_LEN(markers); k++) {
    size_t m = strlen(markers[k].marker);
    for (size_t i = 0; i + m <= len; i++)
      if (src[i] == '<' && memcmp(src + i, markers[k].marker, m) == 0) return markers[k].format;
  }
  return ER_CHAT_JINJA;
}

er_status er__chat_parse(const char *src, size_t len, er_chat_format fallback, er_chat_template **out) {
  *out = NULL;
  if ((unsigned)fallback > ER_CHAT_GEMMA)
    return er__error(ER_STATUS_INVALID_ARGUMENT, "chat template: unknown built-in format %d", (int)fallback);
  if (!src) len = 0;
  if (len > ER_CHAT_MAX_TEMPLATE_BYTES)
    return er__error(ER_STATUS_LIMIT, "chat template of %zu bytes exceeds ER_CHAT_MAX_TEMPLATE_BYTES (%u)", len,
                     (unsigned)ER_CHAT_MAX_TEMPLATE_BYTES);
  er_chat_template *t = calloc(1, sizeof *t);
  if (!t) return er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory for a chat template");
  er__arena_init(&t->arena);
  if (len == 0 && fallback != ER_CHAT_JINJA) {
    t->format = fallback;
    *out = t;
    return ER_STATUS_OK;
  }
  t->format = ER_CHAT_JINJA;
  er_status st = er__chat_parse_jinja(t, src ? src : "", len);
  if (st == ER_STATUS_OK) {
    *out = t;
    return ER_STATUS_OK;
  }
  /* A template the interpreter cannot read still renders if its markers
   * name a format we know, which is what the model was trained on; the
   * parse error is logged so the fallback is never silent. */
  er_chat_format guess = st == ER_STATUS_OUT_OF_MEMORY ? ER_CHAT_JINJA : sniff(src, len);
  if (guess != ER_CHAT_JINJA) {
    er__log(ER_LOG_WARNING, "chat template not usable (%s); using the built-in %s format its markers name",
            er_last_error(), format_name(guess));
    er__arena_free(&t->arena);
    er__arena_init(&t->arena);
    t->format = guess;
    t->body = NULL;
    t->n_body = 0;
    *out = t;
    return ER_STATUS_OK;
  }
  er__chat_free(t);
  return st;
}

void er__chat_free(er_chat_template *t) {
  if (!t) return;
  er__arena_free(&t->arena);
  free(t);
}

er_chat_format er__chat_format(const er_chat_template *t) { return t ? t->format : ER_CHAT_JINJA; }

/* ======================================================================== */
/* Built-in formats                                                          */
/* ======================================================================== */

typedef struct sbuf {
  char *p;
  size_t len, cap;
  er_status st;
} sbuf;

static void put(sbuf *b, const char *s, size_t n) {
  if (b->st) return;
  if (n > ER_CHAT_MAX_OUTPUT_BYTES || b->len > ER_CHAT_MAX_OUTPUT_BYTES - n) {
    b->st = er__error(ER_STATUS_LIMIT, "chat: output exceeds ER_CHAT_MAX_OUTPUT_BYTES (%u bytes)",
                      (unsigned)ER_CHAT_MAX_OUTPUT_BYTES);
    return;
  }
  if (b->len + n + 1 > b->cap) {
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + n + 1) cap *= 2;
    char *p = realloc(b->p, cap);
    if (!p) {
      b->st = er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory for a %zu-byte prompt", cap);
      return;
    }
    b->p = p;
    b->cap = cap;
  }
  memcpy(b->p + b->len, s, n);
  b->len += n;
  b->p[b->len] = '\0';
}

static void puts_(sbuf *b, const char *s) { put(b, s, strlen(s)); }

/* Python's str.strip(), which the Llama 3 and Gemma templates apply to
 * contents (`| trim`): Unicode whitespace at both ends. */
static void put_trimmed(sbuf *b, const char *s) {
  size_t n = strlen(s), i = 0;
  while (i < n) {
    size_t k = i;
    if (!er__uni_space(er__utf8_next(s, n, &k))) break;
    i = k;
  }
  while (n > i) {
    size_t lead = n - 1;
    while (lead > i && ((unsigned char)s[lead] & 0xc0) == 0x80) lead--;
    size_t k = lead;
    if (!er__uni_space(er__utf8_next(s, n, &k))) break;
    n = lead;
  }
  put(b, s + i, n - i);
}

static void render_builtin(const er_chat_template *t, const er_chat_message *msgs, size_t n, bool agp,
                           const char *bos, sbuf *b) {
  switch (t->format) {
  case ER_CHAT_CHATML:
    for (size_t i = 0; i < n; i++) {
      puts_(b, "<|im_start|>");
      puts_(b, msgs[i].role);
      puts_(b, "\n");
      puts_(b, msgs[i].content ? msgs[i].content : "");
      puts_(b, "<|im_end|>\n");
    }
    if (agp) puts_(b, "<|im_start|>assistant\n");
    break;
  case ER_CHAT_LLAMA3:
    /* As Meta's Llama 3.x templates write it, less the tool and date
     * preamble: bos, then each turn with its content trimmed. */
    puts_(b, bos);
    for (size_t i = 0; i < n; i++) {
      puts_(b, "<|start_header_id|>");
      puts_(b, msgs[i].role);
      puts_(b, "<|end_header_id|>\n\n");
      put_trimmed(b, msgs[i].content ? msgs[i].content : "");
      puts_(b, "<|eot_id|>");
    }
    if (agp) puts_(b, "<|start_header_id|>assistant<|end_header_id|>\n\n");
    break;
  default: { /* ER_CHAT_GEMMA */
    /* Gemma has no system role: as Gemma 3's template does, a leading
     * system message is put in front of the first user turn. */
    puts_(b, bos);
    size_t i = 0;
    const char *system = NULL;
    if (n && !strcmp(msgs[0].role, "system")) {
      system = msgs[0].content ? msgs[0].content : "";
      i = 1;
    }
    for (; i < n; i++) {
      const char *role = !strcmp(msgs[i].role, "assistant") ? "model" : msgs[i].role;
      puts_(b, "<start_of_turn>");
      puts_(b, role);
      puts_(b, "\n");
      if (system) {
        put_trimmed(b, system);
        puts_(b, "\n\n");
        system = NULL;
      }
      put_trimmed(b, msgs[i].content ? msgs[i].content : "");
      puts_(b, "<end_of_turn>\n");
    }
    if (agp) puts_(b, "<start_of_turn>model\n");
    break;
  }
  }
}

er_status er__chat_render(const er_chat_template *t, const er_chat_message *msgs, size_t n_msgs,
                          bool add_generation_prompt, const char *bos, const char *eos, char **out_text,
                          size_t *out_len) {
  *out_text = NULL;
  *out_len = 0;
  if (!t) return er__error(ER_STATUS_INVALID_ARGUMENT, "chat: no template");
  if (n_msgs && !msgs) return er__error(ER_STATUS_INVALID_ARGUMENT, "chat: %zu messages but no array", n_msgs);
  if (t->format == ER_CHAT_JINJA)
    return er__chat_eval(t, msgs, n_msgs, add_generation_prompt, bos, eos, out_text, out_len);
  if (n_msgs > ER_CHAT_MAX_MESSAGES)
    return er__error(ER_STATUS_LIMIT, "chat: %zu messages exceed ER_CHAT_MAX_MESSAGES (%d)", n_msgs,
                     ER_CHAT_MAX_MESSAGES);
  for (size_t i = 0; i < n_msgs; i++)
    if (!msgs[i].role) return er__error(ER_STATUS_INVALID_ARGUMENT, "chat message %zu has no role", i);
  sbuf b = {0};
  render_builtin(t, msgs, n_msgs, add_generation_prompt, bos ? bos : "", &b);
  if (!b.st && !b.p) {
    b.p = malloc(1);
    if (!b.p) b.st = er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory for the rendered prompt");
    else b.p[0] = '\0';
  }
  if (b.st) {
    free(b.p);
    return b.st;
  }
  *out_text = b.p;
  *out_len = b.len;
  return ER_STATUS_OK;
}
