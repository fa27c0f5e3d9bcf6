/* chat.h - chat templates: a conversation (role, content pairs) rendered to
 * the prompt text a model was trained on.
 *
 * Models ship their template as a Jinja2 program (tokenizer.chat_template in
 * GGUF, chat_template in tokenizer_config.json). edgerun renders it with a
 * bounded interpreter of the Jinja subset real templates use (statements
 * for/if/elif/else/set/macro/filter, expressions with filters, tests,
 * string methods, loop variables, namespace()), with caps on output bytes,
 * steps and nesting so a hostile template ends with an error, never a hang
 * or unbounded memory. Templates it cannot parse fall back to a built-in
 * format recognised by its markers (ChatML "<|im_start|>", Llama 3
 * "<|start_header_id|>", Gemma "<start_of_turn>"), and say so. */
#ifndef ER_LLM_CHAT_H
#define ER_LLM_CHAT_H

#include "core/core.h"

#define ER_CHAT_MAX_TEMPLATE_BYTES (1u << 20) /* one template's source */
#define ER_CHAT_MAX_OUTPUT_BYTES (16u << 20)  /* one rendered prompt */
#define ER_CHAT_MAX_STEPS 10000000            /* interpreter steps per render */
#define ER_CHAT_MAX_DEPTH 64                  /* nesting of blocks and expressions */
#define ER_CHAT_MAX_MESSAGES 4096
#define ER_CHAT_MAX_NODES (1u << 18)          /* AST nodes of one template */
#define ER_CHAT_MAX_FRAMES 1024               /* evaluator recursion: expressions, blocks, macro calls */
#define ER_CHAT_MAX_RANGE 100000              /* items of one range(), as jinja2's sandbox caps it */
#define ER_CHAT_MAX_LIVE_BYTES (64u << 20)    /* values and buffers alive at once in one render */

typedef struct er_chat_message {
  const char *role;           /* "system", "user", "assistant", "tool" */
  const char *content;        /* UTF-8, NUL-terminated */
} er_chat_message;

/* The built-in formats, for models without a usable template. */
typedef enum er_chat_format {
  ER_CHAT_JINJA = 0,          /* the model's own template, interpreted */
  ER_CHAT_CHATML,             /* <|im_start|>role\ncontent<|im_end|>\n */
  ER_CHAT_LLAMA3,             /* <|start_header_id|>role<|end_header_id|>\n\ncontent<|eot_id|> */
  ER_CHAT_GEMMA,              /* <start_of_turn>role\ncontent<end_of_turn>\n (assistant as "model") */
} er_chat_format;

typedef struct er_chat_template er_chat_template;

/* Parses `len` bytes of template source (borrowed; copied). An empty or
 * NULL source with fallback != ER_CHAT_JINJA gives that built-in format. A
 * source the interpreter cannot parse is INVALID_ARGUMENT naming the line,
 * column and construct, unless its markers identify a built-in format,
 * which is then used (er__chat_format tells which). Owned by the caller. */
er_status er__chat_parse(const char *src, size_t len, er_chat_format fallback, er_chat_template **out);
void er__chat_free(er_chat_template *t);
/* Which renderer the template uses. */
er_chat_format er__chat_format(const er_chat_template *t);

/* Renders the conversation. bos/eos (may be NULL = "") are the model's
 * bos_token and eos_token texts, which templates reference;
 * add_generation_prompt opens the assistant's turn. *out_text (malloc'd,
 * NUL-terminated, owned by the caller) and *out_len receive the prompt.
 * Errors: a template raising an exception (raise_exception('...')) gives
 * INVALID_ARGUMENT with its message; a render past ER_CHAT_MAX_OUTPUT_BYTES
 * or ER_CHAT_MAX_STEPS is LIMIT naming the cap. */
er_status er__chat_render(const er_chat_template *t, const er_chat_message *msgs, size_t n_msgs,
                          bool add_generation_prompt, const char *bos, const char *eos, char **out_text,
                          size_t *out_len);

#endif /* ER_LLM_CHAT_H */
