/* chat-render.c - renders a chat template over conversations, for
 * tests/llm/chat_check.py to compare with the jinja2 oracle.
 *
 *   chat-render TEMPLATE CONVERSATIONS.json [--bos S] [--eos S] [--now UNIX]
 *                                           [--fallback chatml|llama3|gemma]
 *                                           [--text NAME 0|1]
 *
 * CONVERSATIONS.json is {"conversations": [{"name": ..., "messages":
 * [{"role": ..., "content": ...}, ...]}, ...]} (tests/llm/data/). Each
 * conversation is rendered without and with add_generation_prompt; the
 * result goes to stdout as JSON:
 *   {"parse": {"status", "error", "format"},
 *    "renders": [{"name", "add_generation_prompt", "status", "error", "text"}]}
 * With --text, only that render's prompt is written, raw. --now fixes what
 * strftime_now() sees (seconds since the epoch, UTC). */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>

#include "llm/chat-impl.h"

static char *read_file(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  size_t cap = 4096, n = 0;
  char *buf = malloc(cap);
  while (buf) {
    if (n == cap) {
      char *p = realloc(buf, cap * 2);
      if (!p) {
        free(buf);
        buf = NULL;
        break;
      }
      buf = p;
      cap *= 2;
    }
    size_t got = fread(buf + n, 1, cap - n, f);
    n += got;
    if (got == 0) break;
  }
  fclose(f);
  *len = n;
  return buf;
}

static const char *format_name(er_chat_format f) {
  switch (f) {
  case ER_CHAT_CHATML: return "chatml";
  case ER_CHAT_LLAMA3: return "llama3";
  case ER_CHAT_GEMMA: return "gemma";
  default: return "jinja";
  }
}

static int usage(void) {
  fprintf(stderr, "usage: chat-render TEMPLATE CONVERSATIONS.json [--bos S] [--eos S] [--now UNIX] "
                  "[--fallback chatml|llama3|gemma] [--text NAME 0|1]\n");
  return 2;
}

int main(int argc, char **argv) {
  if (argc < 3) return usage();
  const char *bos = "<s>", *eos = "</s>", *text_name = NULL;
  int text_agp = 0;
  long long now = -1;
  er_chat_format fallback = ER_CHAT_JINJA;
  for (int i = 3; i < argc; i++) {
    if (!strcmp(argv[i], "--bos") && i + 1 < argc) bos = argv[++i];
    else if (!strcmp(argv[i], "--eos") && i + 1 < argc) eos = argv[++i];
    else if (!strcmp(argv[i], "--now") && i + 1 < argc) now = strtoll(argv[++i], NULL, 10);
    else if (!strcmp(argv[i], "--fallback") && i + 1 < argc) {
      const char *f = argv[++i];
      fallback = !strcmp(f, "chatml") ? ER_CHAT_CHATML : !strcmp(f, "llama3") ? ER_CHAT_LLAMA3
                 : !strcmp(f, "gemma") ? ER_CHAT_GEMMA : ER_CHAT_JINJA;
    } else if (!strcmp(argv[i], "--text") && i + 2 < argc) {
      text_name = argv[++i];
      text_agp = atoi(argv[++i]);
    } else {
      return usage();
    }
  }
  size_t src_len = 0;
  char *src = read_file(argv[1], &src_len);
  if (!src) {
    fprintf(stderr, "chat-render: cannot read %s: %s\n", argv[1], strerror(errno));
    return 1;
  }
  json_error_t jerr;
  json_t *doc = json_load_file(argv[2], 0, &jerr);
  if (!doc) {
    fprintf(stderr, "chat-render: %s:%d: %s\n", argv[2], jerr.line, jerr.text);
    free(src);
    return 1;
  }
  json_t *convs = json_object_get(doc, "conversations");
  if (!json_is_array(convs)) {
    fprintf(stderr, "chat-render: %s has no \"conversations\" array\n", argv[2]);
    json_decref(doc);
    free(src);
    return 1;
  }

  er_chat_template *t = NULL;
  er_status st = er__chat_parse(src, src_len, fallback, &t);
  json_t *out = json_object();
  json_object_set_new(out, "parse",
                      json_pack("{s:s, s:s, s:s}", "status", er_status_name(st), "error",
                                st ? er_last_error() : "", "format", t ? format_name(er__chat_format(t)) : ""));
  json_t *renders = json_array();
  int rc = 0;
  if (t && now >= 0) er__chat_set_now(t, now);
  for (size_t c = 0; t && c < json_array_size(convs); c++) {
    json_t *conv = json_array_get(convs, c);
    const char *name = json_string_value(json_object_get(conv, "name"));
    json_t *msgs = json_object_get(conv, "messages");
    size_t n = json_array_size(msgs);
    er_chat_message *m = calloc(n ? n : 1, sizeof *m);
    if (!m) return 1;
    for (size_t i = 0; i < n; i++) {
      json_t *msg = json_array_get(msgs, i);
      m[i].role = json_string_value(json_object_get(msg, "role"));
      m[i].content = json_string_value(json_object_get(msg, "content"));
    }
    for (int agp = 0; agp <= 1; agp++) {
      char *text = NULL;
      size_t len = 0;
      er_status rs = er__chat_render(t, m, n, agp, bos, eos, &text, &len);
      if (text_name) {
        if (name && !strcmp(name, text_name) && agp == text_agp) {
          if (rs) {
            fprintf(stderr, "chat-render: %s: %s\n", er_status_name(rs), er_last_error());
            rc = 1;
          } else {
            fwrite(text, 1, len, stdout);
          }
        }
      } else {
        json_array_append_new(renders, json_pack("{s:s, s:b, s:s, s:s, s:s%}", "name", name ? name : "",
                                                 "add_generation_prompt", agp, "status", er_status_name(rs),
                                                 "error", rs ? er_last_error() : "", "text", rs ? "" : text,
                                                 (size_t)(rs ? 0 : len)));
      }
      free(text);
    }
    free(m);
  }
  if (!text_name) {
    json_object_set_new(out, "renders", renders);
    char *s = json_dumps(out, JSON_INDENT(1));
    if (s) {
      fputs(s, stdout);
      fputc('\n', stdout);
      free(s);
    }
  } else {
    json_decref(renders);
  }
  json_decref(out);
  er__chat_free(t);
  json_decref(doc);
  free(src);
  return rc;
}
