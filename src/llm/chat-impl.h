/* chat-impl.h - the chat-template interpreter's internals, shared by
 * chat-parse.c (lexer and parser: source to AST), chat-value.c (the value
 * model: refcounted strings, lists and dicts, Python's str/repr/==/<, JSON),
 * chat-eval.c (the evaluator: statements, expressions, filters, tests,
 * methods) and chat.c (the public entry points and the built-in formats).
 *
 * The reference is what Hugging Face transformers renders: jinja2's
 * ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True) with
 * the loopcontrols extension, transformers' tojson, raise_exception,
 * strftime_now and namespace. Every divergence is a bug unless the comment
 * at the construct says otherwise. */
#ifndef ER_LLM_CHAT_IMPL_H
#define ER_LLM_CHAT_IMPL_H

#include "llm/chat.h"

/* ======================================================================== */
/* Values                                                                    */
/* ======================================================================== */

typedef enum er_cv_type {
  ER_CV_UNDEFINED = 0,  /* Jinja's Undefined: falsy, prints "", fails on use */
  ER_CV_NONE,
  ER_CV_BOOL,
  ER_CV_INT,            /* int64; Python's big integers are out of scope */
  ER_CV_FLOAT,
  ER_CV_STR,            /* UTF-8 */
  ER_CV_LIST,           /* also tuples (er_cv_list.tuple) */
  ER_CV_DICT,           /* insertion-ordered, immutable once built */
  ER_CV_NAMESPACE,      /* namespace(): a dict whose attributes `set` may change */
  ER_CV_LOOP,           /* the `loop` variable of a for loop */
  ER_CV_METHOD,         /* a bound method read but not yet called (x.items) */
  ER_CV_MACRO,          /* a {% macro %}, pointing into the AST */
  ER_CV_BUILTIN,        /* a global function: range, namespace, ... */
} er_cv_type;

typedef struct er_cv_obj er_cv_obj;
typedef struct er_chat_node er_chat_node;

typedef struct er_cv {
  uint8_t type;         /* er_cv_type */
  union {
    bool b;
    int64_t i;
    double f;
    er_cv_obj *o;                /* STR, LIST, DICT, NAMESPACE, LOOP, METHOD */
    const er_chat_node *macro;   /* MACRO */
    int builtin;                 /* BUILTIN: er_chat_builtin */
    const char *undef_name;      /* UNDEFINED: what was missing, for messages (may be NULL) */
  };
} er_cv;

/* Every heap value starts with this header. Objects made while parsing
 * (string constants) are immortal: refs == ER_CV_IMMORTAL, never on a
 * render's list, freed with the template's arena. */
#define ER_CV_IMMORTAL UINT32_MAX
struct er_cv_obj {
  er_cv_obj *prev, *next;  /* the render's list of live objects */
  size_t bytes;            /* charged to the render's live-byte budget */
  uint32_t refs;
  uint8_t type;            /* er_cv_type */
};

typedef struct er_cv_str {
  er_cv_obj h;
  size_t len;              /* bytes, without the NUL */
  size_t nchars;           /* code points; == len for ASCII */
  bool markup;             /* made by |safe: `+` HTML-escapes the other operand */
  char data[];             /* NUL-terminated */
} er_cv_str;

typedef struct er_cv_list {
  er_cv_obj h;
  size_t n, cap;
  bool tuple;              /* prints as (a, b) */
  /* The result of a filter jinja2 computes lazily (map, select, items,
   * unique, reverse, ...): always truthy, no len(), not subscriptable,
   * empty after its first iteration. A `failed` one holds the error its
   * computation met (items[0], the message), raised when it is iterated. */
  bool generator, consumed, failed;
  /* range(): iterates and indexes as this list, prints as range(a, b[, s]),
   * and is not a list for ==, + and tojson. */
  bool range;
  int64_t range_start, range_stop, range_step;
  er_cv *items;            /* [n], owned references */
} er_cv_list;

typedef struct er_cv_dict {
  er_cv_obj h;
  size_t n, cap;
  er_cv *keys, *vals;      /* [n], owned references */
} er_cv_dict;

typedef struct er_cv_loop {
  er_cv_obj h;
  int64_t index0, length;
  er_cv items;             /* the list iterated, for previtem/nextitem */
} er_cv_loop;

typedef struct er_cv_method {
  er_cv_obj h;
  er_cv self;
  const char *name;        /* points into the AST */
} er_cv_method;

static inline er_cv er__cv_undef(const char *name) {
  er_cv v = {.type = ER_CV_UNDEFINED};
  v.undef_name = name;
  return v;
}
static inline er_cv er__cv_none(void) { return (er_cv){.type = ER_CV_NONE}; }
static inline er_cv er__cv_bool(bool b) {
  er_cv v = {.type = ER_CV_BOOL};
  v.b = b;
  return v;
}
static inline er_cv er__cv_int(int64_t i) {
  er_cv v = {.type = ER_CV_INT};
  v.i = i;
  return v;
}
static inline er_cv er__cv_float(double f) {
  er_cv v = {.type = ER_CV_FLOAT};
  v.f = f;
  return v;
}
static inline bool er__cv_is_obj(er_cv v) {
  return v.type == ER_CV_STR || v.type == ER_CV_LIST || v.type == ER_CV_DICT ||
         v.type == ER_CV_NAMESPACE || v.type == ER_CV_LOOP || v.type == ER_CV_METHOD;
}
#define ER_CV_STR_OF(v) ((er_cv_str *)(v).o)
#define ER_CV_LIST_OF(v) ((er_cv_list *)(v).o)
#define ER_CV_DICT_OF(v) ((er_cv_dict *)(v).o)

/* ======================================================================== */
/* The AST                                                                   */
/* ======================================================================== */

typedef enum er_chat_nkind {
  /* statements */
  ER_CN_DATA = 1,      /* text (points into the normalized source), len */
  ER_CN_PRINT,         /* {{ a }} */
  ER_CN_IF,            /* a: test, kids: body, kids2: else (an elif is a nested IF) */
  ER_CN_FOR,           /* b: target (NAME or TUPLE of NAMEs), a: iterable,
                          c: filter test or NULL, kids: body, kids2: else */
  ER_CN_SET,           /* b: target (NAME, ATTR of NAME, TUPLE of NAMEs), a: value */
  ER_CN_SET_BLOCK,     /* b: target, kids: body, kids2: FILTER nodes applied in order */
  ER_CN_MACRO,         /* name, kw[n_kw]: parameters, kids2[n2 == n_kw]: defaults or NULL,
                          kids: body */
  ER_CN_FILTER_BLOCK,  /* kids: body, kids2: FILTER nodes (a == NULL) */
  ER_CN_BREAK,
  ER_CN_CONTINUE,
  /* expressions */
  ER_CN_CONST,         /* cval */
  ER_CN_NAME,          /* name */
  ER_CN_ATTR,          /* a.name */
  ER_CN_ITEM,          /* a[b] */
  ER_CN_SLICE,         /* a[kids[0]:kids[1]:kids[2]], each may be NULL */
  ER_CN_CALL,          /* a(kids...), the last n_kw kids named kw[] */
  ER_CN_FILTER,        /* a | name(kids...), same argument layout */
  ER_CN_TEST,          /* a is [not] name(kids...); op != 0: negated */
  ER_CN_NOT,           /* not a */
  ER_CN_NEG,           /* -a */
  ER_CN_POS,           /* +a */
  ER_CN_BINOP,         /* a op b, op an er_chat_op */
  ER_CN_AND,
  ER_CN_OR,
  ER_CN_CONCAT,        /* kids[0] ~ kids[1] ~ ... */
  ER_CN_COMPARE,       /* a op b; c: the next comparison of a chain (its a is NULL
                          and means this b), a < b < c as Python chains it */
  ER_CN_COND,          /* a if b else c (c may be NULL: undefined) */
  ER_CN_LIST,          /* [kids...] */
  ER_CN_TUPLE,         /* (kids...) */
  ER_CN_DICT,          /* {kids[i]: kids2[i]} */
} er_chat_nkind;

typedef enum er_chat_op {
  ER_OP_NONE = 0,
  ER_OP_ADD, ER_OP_SUB, ER_OP_MUL, ER_OP_DIV, ER_OP_FLOORDIV, ER_OP_MOD, ER_OP_POW,
  ER_OP_EQ, ER_OP_NE, ER_OP_LT, ER_OP_LTEQ, ER_OP_GT, ER_OP_GTEQ, ER_OP_IN, ER_OP_NOTIN,
} er_chat_op;

struct er_chat_node {
  uint8_t kind;            /* er_chat_nkind */
  uint8_t op;              /* er_chat_op, or the negation flag of a TEST */
  uint16_t n_kw;
  uint32_t line, col;      /* 1-based, in the source as written */
  uint32_t n, n2;          /* entries in kids, kids2 */
  er_chat_node **kids, **kids2;
  er_chat_node *a, *b, *c;
  const char *name;        /* NUL-terminated, in the template's arena */
  const char **kw;         /* [n_kw] */
  union {
    er_cv cval;            /* CONST */
    size_t len;            /* DATA: bytes of name */
  };
};

struct er_chat_template {
  er_arena arena;          /* the AST, its names and constants, the source */
  er_chat_format format;
  er_chat_node **body;     /* [n_body] top-level statements */
  uint32_t n_body;
  bool has_now;            /* strftime_now uses `now` instead of the clock */
  int64_t now;             /* seconds since the epoch, rendered in UTC */
};

/* Parses Jinja source (as written; line endings are normalized here) into
 * t's arena and t->body.
 * INVALID_ARGUMENT names the line, column and construct; LIMIT names the
 * cap (nesting, nodes). */
er_status er__chat_parse_jinja(er_chat_template *t, const char *src, size_t len);

/* Renders t->body (format ER_CHAT_JINJA). Same contract as er__chat_render. */
/* The filter and test names the evaluator implements; the parser rejects
 * others, as jinja2 does when it compiles a template. */
bool er__chat_known_filter(const char *name);
bool er__chat_known_test(const char *name);

er_status er__chat_eval(const er_chat_template *t, const er_chat_message *msgs, size_t n_msgs,
                        bool add_generation_prompt, const char *bos, const char *eos, char **out_text,
                        size_t *out_len);

/* Makes strftime_now() render `unix_seconds` (in UTC) instead of the current
 * local time, so renders are reproducible (tests, the oracle comparison). */
void er__chat_set_now(er_chat_template *t, int64_t unix_seconds);

/* ======================================================================== */
/* The render state and the value helpers (chat-value.c)                     */
/* ======================================================================== */

/* A growable byte buffer whose capacity is charged to the render. */
typedef struct er_cv_buf {
  char *p;
  size_t len, cap;         /* bytes */
} er_cv_buf;

typedef struct er_chat_scope er_chat_scope;

typedef struct er_chat_rt {
  const er_chat_template *t;
  er_cv_obj live;          /* sentinel of the list of live heap objects */
  size_t live_bytes;       /* bytes of live objects and buffers */
  uint64_t steps;
  uint32_t frames;         /* evaluator recursion now */
  uint32_t macro_depth;    /* macro calls nested now */
  uint32_t loop_depth;     /* for loops nested now */
  int loop_ctl;            /* 1: break pending, 2: continue pending */
  er_cv_buf *out;          /* where output goes now (the prompt, or a capture) */
  er_chat_scope *scope;    /* innermost frame of variables */
  er_chat_scope *root;     /* the template's top-level frame */
  er_chat_scope *globals;  /* messages, add_generation_prompt, bos_token, ... (root's parent) */
  er_cv block_input;       /* the text a {% filter %} or {% set %} block's filters start from */
  uint32_t line;           /* of the node being evaluated, for messages */
} er_chat_rt;

/* Steps charged per byte copied: bulk string work counts against
 * ER_CHAT_MAX_STEPS too, so a loop copying a big string is bounded in time,
 * not only in iterations. */
#define ER_CHAT_STEP_BYTES 64

er_status er__cv_step(er_chat_rt *r, uint64_t units);
er_status er__cv_charge(er_chat_rt *r, size_t bytes);
void er__cv_uncharge(er_chat_rt *r, size_t bytes);

/* A new heap object of `bytes` (header included), zeroed, with one reference. */
er_status er__cv_obj_new(er_chat_rt *r, uint8_t type, size_t bytes, void **out);
void er__cv_ref(er_cv v);
void er__cv_unref(er_chat_rt *r, er_cv v);
/* Frees every object still live (cycles through namespaces). */
void er__cv_free_all(er_chat_rt *r);

er_status er__cv_buf_put(er_chat_rt *r, er_cv_buf *b, const char *s, size_t n);
er_status er__cv_buf_putc(er_chat_rt *r, er_cv_buf *b, char c);
void er__cv_buf_free(er_chat_rt *r, er_cv_buf *b);

er_status er__cv_str_new(er_chat_rt *r, const char *s, size_t n, er_cv *out);
/* Takes the buffer's bytes as a new string (the buffer is emptied). */
er_status er__cv_str_from_buf(er_chat_rt *r, er_cv_buf *b, er_cv *out);
/* An immortal string in the template's arena (constants). */
er_status er__cv_str_const(er_arena *a, const char *s, size_t n, er_cv *out);
er_status er__cv_list_new(er_chat_rt *r, size_t cap, er_cv *out);
/* Appends v, taking its reference (v is released on failure). */
er_status er__cv_list_push(er_chat_rt *r, er_cv list, er_cv v);
er_status er__cv_dict_new(er_chat_rt *r, uint8_t type, er_cv *out);
/* Sets key to val, taking both references (released on failure). */
er_status er__cv_dict_set(er_chat_rt *r, er_cv dict, er_cv key, er_cv val);
/* Borrowed value of key, or NULL. */
er_cv *er__cv_dict_get(er_chat_rt *r, er_cv dict, er_cv key);
er_cv *er__cv_dict_get_str(er_chat_rt *r, er_cv dict, const char *key);

bool er__cv_truthy(er_cv v);
/* Python ==, with Jinja's Undefined equal only to Undefined. */
er_status er__cv_equal(er_chat_rt *r, er_cv a, er_cv b, bool *out);
/* Python <: sets *out to -1/0/1; TypeError-like failures are INVALID_ARGUMENT. */
er_status er__cv_compare(er_chat_rt *r, er_cv a, er_cv b, int *out);
/* Appends str(v) or repr(v), as Python writes them. */
er_status er__cv_to_str(er_chat_rt *r, er_cv v, er_cv_buf *b);
er_status er__cv_repr(er_chat_rt *r, er_cv v, er_cv_buf *b);
/* Appends json.dumps(v, ensure_ascii=False, indent=..., separators=..., sort_keys=...). */
typedef struct er_cv_json_opts {
  const char *indent;      /* NULL: no newlines */
  size_t indent_len;
  const char *item_sep, *key_sep;
  size_t item_sep_len, key_sep_len;
  bool sort_keys;
  bool ensure_ascii;
} er_cv_json_opts;
er_status er__cv_json(er_chat_rt *r, er_cv v, const er_cv_json_opts *o, er_cv_buf *b);
const char *er__cv_type_name(er_cv v);
/* Python's float repr (shortest round-trip) into buf[32]. */
void er__cv_fmt_float(double f, char *buf);

/* ---- UTF-8 and the Unicode subset the interpreter knows ----------------- */

/* Decodes one code point at s[*i] (advancing *i); invalid bytes decode as
 * themselves so callers never loop forever. */
uint32_t er__utf8_next(const char *s, size_t n, size_t *i);
size_t er__utf8_put(uint32_t cp, char *out);  /* out[4]; returns bytes */
/* Byte offset of the `index`-th code point of s (clamped to n). */
size_t er__utf8_offset(const char *s, size_t n, size_t nchars, size_t index);
size_t er__utf8_count(const char *s, size_t n);
bool er__utf8_valid(const char *s, size_t n, size_t *bad_at);
/* Python's str.isspace() for one code point. */
bool er__uni_space(uint32_t cp);
/* Simple case mappings for Latin, Greek, Cyrillic, Armenian and fullwidth
 * Latin; other scripts are caseless here. The multi-character mappings
 * Python applies (German sharp s upper-cases to "SS", ...) are handled by
 * the string functions that call these. */
uint32_t er__uni_upper(uint32_t cp);
uint32_t er__uni_lower(uint32_t cp);
bool er__uni_cased(uint32_t cp);

#endif /* ER_LLM_CHAT_IMPL_H */
