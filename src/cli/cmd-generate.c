/* cmd-generate.c - edgerun generate: text from a GGUF model, streamed to
 * stdout as it is made, with prompt and decode tokens/s on stderr. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli-llm.h"

void er_cmd_generate_help(FILE *out) {
  fprintf(out,
          "usage: edgerun generate MODEL.gguf (--prompt TEXT | --file F | --chat) [options]\n"
          "\n"
          "Generates text and streams it to stdout; prompt and decode speed go to stderr.\n"
          "  --prompt TEXT    complete this text (the model's BOS token is added)\n"
          "  --file F         complete the text of file F\n"
          "  --chat           a conversation in the model's chat template: one turn with\n"
          "                   --prompt, else turns read from stdin, one line each (EOF ends)\n"
          "  --system TEXT    the system message of --chat\n"
          "  -n N             new tokens at most (default 256)\n"
          "  --temp T         temperature (default 0.8; 0 = greedy)\n"
          "  --top-k K        (default 40; 0 = off)   --top-p P (default 0.95)\n"
          "  --min-p P        (default 0.05)           --repeat-penalty R (default 1.0 = off)\n"
          "  --seed S         random seed (default 0: the same text each run)\n"
          "  --stop TEXT      stop before this text (repeatable)\n"
          "  --ignore-eos     keep generating past end-of-text tokens\n"
          "%s",
          er_cli_llm_help);
}

/* Streams pieces to stdout and (keep) collects them: a chat reply becomes
 * the assistant's message of the next turn. */
typedef struct stream {
  FILE *out;
  bool keep;
  char *text;
  size_t len, cap;
} stream;

static bool on_token(void *user, int32_t token, const char *piece, size_t len) {
  (void)token;
  stream *s = user;
  fwrite(piece, 1, len, s->out);
  fflush(s->out);
  if (s->keep) {
    if (s->len + len + 1 > s->cap) {
      size_t cap = (s->len + len + 1) * 2;
      char *t = realloc(s->text, cap);
      if (!t) return false;
      s->text = t;
      s->cap = cap;
    }
    memcpy(s->text + s->len, piece, len);
    s->len += len;
    s->text[s->len] = 0;
  }
  return true;
}

static void report(const er_llm_generate_result *r) {
  double pps = r->prompt_ms > 0 ? (double)r->prompt_tokens / (r->prompt_ms / 1e3) : 0;
  double dps = r->decode_ms > 0 ? (double)r->completion_tokens / (r->decode_ms / 1e3) : 0;
  fprintf(stderr, "\nprompt: %lld tokens in %.1f ms (%.1f tokens/s); decode: %lld tokens in %.1f ms (%.1f tokens/s)\n",
          (long long)r->prompt_tokens, r->prompt_ms, pps, (long long)r->completion_tokens, r->decode_ms, dps);
}

/* One chat turn: the whole conversation rendered again and tokenized; the
 * part the sequence already holds (the common token prefix) is kept in the
 * cache and only the rest is fed. */
static int chat_turn(const char *cmd, const er_llm *llm, er_llm_context *ctx, er_llm_message *msgs, size_t n_msgs,
                     int32_t **held, size_t *n_held, const er_llm_generate_options *go, char **reply_out) {
  char *prompt = NULL;
  er_status st = er_llm_chat_prompt(llm, msgs, n_msgs, true, &prompt);
  if (st != ER_STATUS_OK) return er_cli_fail_status(cmd, st, "rendering the chat template");
  int32_t *ids;
  size_t n;
  int rc = er_cli_tokenize(cmd, llm, prompt, strlen(prompt), true, true, &ids, &n);
  free(prompt);
  if (rc) return rc;
  size_t common = 0;
  while (common < n && common < *n_held && ids[common] == (*held)[common]) common++;
  if (common == n && n > 0) common--; /* at least one token to feed */
  er_llm_seq_truncate(ctx, 0, (int64_t)common);
  stream s = {stdout, true, NULL, 0, 0};
  er_llm_generate_result r;
  st = er_llm_generate(ctx, 0, ids + common, n - common, go, on_token, &s, &r);
  /* The sequence holds the prompt and then the reply; the prompt's ids
   * are kept for the next turn's prefix match (the reply, rendered by the
   * template, may tokenize differently and is fed again if so). */
  free(*held);
  *held = ids;
  *n_held = n;
  *reply_out = s.text ? s.text : strdup("");
  if (st != ER_STATUS_OK) return er_cli_fail_status(cmd, st, "generating");
  report(&r);
  return 0;
}

int er_cmd_generate(int argc, char **argv) {
  const char *cmd = "generate", *model = NULL, *prompt = NULL, *file = NULL, *system = NULL;
  bool chat = false;
  er_cli_llm lo;
  er_cli_llm_init(&lo);
  er_llm_generate_options go;
  er_llm_generate_options_init(&go);
  const char *stops[16];
  size_t n_stops = 0;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    int r = er_cli_llm_arg(cmd, &lo, argc, argv, &i);
    if (r < 0) return -r;
    if (r > 0) continue;
    double d;
    int v;
    if (strcmp(a, "--prompt") == 0 || strcmp(a, "-p") == 0) {
      if (++i >= argc) return er_cli_fail(cmd, "--prompt needs a text");
      prompt = argv[i];
    } else if (strcmp(a, "--file") == 0 || strcmp(a, "-f") == 0) {
      if (++i >= argc) return er_cli_fail(cmd, "--file needs a path");
      file = argv[i];
    } else if (strcmp(a, "--chat") == 0) {
      chat = true;
    } else if (strcmp(a, "--system") == 0) {
      if (++i >= argc) return er_cli_fail(cmd, "--system needs a text");
      system = argv[i];
    } else if (strcmp(a, "-n") == 0 || strcmp(a, "--n-predict") == 0) {
      if (++i >= argc || !er_cli_parse_int(argv[i], &v)) return er_cli_fail(cmd, "-n needs a token count");
      go.max_tokens = v;
    } else if (strcmp(a, "--temp") == 0) {
      if (++i >= argc || !er_cli_parse_double(argv[i], &d) || d > 100) return er_cli_fail(cmd, "--temp needs 0 to 100");
      go.sampling.temperature = (float)d;
    } else if (strcmp(a, "--top-k") == 0) {
      if (++i >= argc || !er_cli_parse_int(argv[i], &v)) return er_cli_fail(cmd, "--top-k needs a count");
      go.sampling.top_k = v;
    } else if (strcmp(a, "--top-p") == 0) {
      if (++i >= argc || !er_cli_parse_double(argv[i], &d) || d <= 0 || d > 1)
        return er_cli_fail(cmd, "--top-p needs a value in (0, 1]");
      go.sampling.top_p = (float)d;
    } else if (strcmp(a, "--min-p") == 0) {
      if (++i >= argc || !er_cli_parse_double(argv[i], &d) || d > 1) return er_cli_fail(cmd, "--min-p needs 0 to 1");
      go.sampling.min_p = (float)d;
    } else if (strcmp(a, "--repeat-penalty") == 0) {
      if (++i >= argc || !er_cli_parse_double(argv[i], &d) || d <= 0)
        return er_cli_fail(cmd, "--repeat-penalty needs a positive value");
      go.sampling.repeat_penalty = (float)d;
    } else if (strcmp(a, "--seed") == 0) {
      char *end;
      errno = 0;
      if (++i >= argc) return er_cli_fail(cmd, "--seed needs a number");
      unsigned long long s = strtoull(argv[i], &end, 10);
      if (errno || *end || end == argv[i]) return er_cli_fail(cmd, "--seed is '%s', not a number", argv[i]);
      go.sampling.seed = s;
    } else if (strcmp(a, "--stop") == 0) {
      if (++i >= argc || !argv[i][0]) return er_cli_fail(cmd, "--stop needs a text");
      if (n_stops == 16) return er_cli_fail(cmd, "at most 16 --stop strings");
      stops[n_stops++] = argv[i];
    } else if (strcmp(a, "--ignore-eos") == 0) {
      go.ignore_eos = true;
    } else if (a[0] == '-') {
      return er_cli_fail(cmd, "unknown option '%s' (see --help)", a);
    } else if (!model) {
      model = a;
    } else {
      return er_cli_fail(cmd, "unexpected argument '%s'", a);
    }
  }
  go.stop = stops;
  go.n_stop = n_stops;
  if (!model) return er_cli_fail(cmd, "no model given (see --help)");
  if (!chat && !prompt && !file) return er_cli_fail(cmd, "give --prompt TEXT, --file F or --chat");
  if (prompt && file) return er_cli_fail(cmd, "give --prompt or --file, not both");
  er_llm *llm = NULL;
  er_llm_context *ctx = NULL;
  int rc = er_cli_llm_open(cmd, model, &lo, &llm, &ctx);
  if (rc) return rc;
  char *text = NULL;
  size_t len = 0;
  if (file && (rc = er_cli_read_text(cmd, file, &text, &len)) != 0) goto done;
  if (!chat) {
    int32_t *ids;
    size_t n;
    if ((rc = er_cli_tokenize(cmd, llm, text ? text : prompt, text ? len : strlen(prompt), true, false, &ids, &n)))
      goto done;
    /* The prompt itself is echoed, as llama.cpp's tools do. */
    fwrite(text ? text : prompt, 1, text ? len : strlen(prompt), stdout);
    stream s = {stdout, false, NULL, 0, 0};
    er_llm_generate_result r;
    er_status st = er_llm_generate(ctx, 0, ids, n, &go, on_token, &s, &r);
    free(ids);
    if (st != ER_STATUS_OK) {
      rc = er_cli_fail_status(cmd, st, "generating");
      goto done;
    }
    report(&r);
    goto done;
  }
  /* Chat. The conversation grows by a user line and the reply, which the
   * callback collects. */
  {
    er_llm_message msgs[256];
    char *owned[256];
    size_t n_msgs = 0, n_owned = 0;
    int32_t *held = NULL;
    size_t n_held = 0;
    if (system) msgs[n_msgs++] = (er_llm_message){"system", system};
    char line[8192];
    for (;;) {
      const char *user = NULL;
      if (prompt || text) {
        user = prompt ? prompt : text;
      } else {
        fprintf(stderr, "> ");
        fflush(stderr);
        if (!fgets(line, sizeof line, stdin)) break;
        line[strcspn(line, "\n")] = 0;
        if (!line[0]) continue;
        user = owned[n_owned++] = strdup(line);
      }
      if (n_msgs + 2 > 256 || n_owned + 2 > 256) {
        rc = er_cli_fail(cmd, "the conversation is longer than 128 turns");
        break;
      }
      msgs[n_msgs++] = (er_llm_message){"user", user};
      char *reply = NULL;
      rc = chat_turn(cmd, llm, ctx, msgs, n_msgs, &held, &n_held, &go, &reply);
      if (reply) owned[n_owned++] = reply;
      if (rc) break;
      fputc('\n', stdout);
      if (prompt || text) break;
      msgs[n_msgs++] = (er_llm_message){"assistant", reply};
    }
    free(held);
    for (size_t i = 0; i < n_owned; i++) free(owned[i]);
  }
done:
  free(text);
  er_llm_context_free(ctx);
  er_llm_free(llm);
  return rc;
}
