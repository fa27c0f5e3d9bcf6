/* tok-regex.c - the pre-tokenizer patterns, matched by hand.
 *
 * Hugging Face `tokenizers` splits text with Oniguruma regexes. Rather than
 * link a regex library, edgerun compiles the subset those patterns use to
 * a small program for a backtracking machine (Russ Cox's "backtrack" VM):
 * backtracking, not a DFA, because Oniguruma is a backtracking engine and
 * its answers (leftmost match, first alternative that matches, greedy
 * quantifiers, lookahead) are what the vocabularies were trained on.
 *
 * Sections: the named pre-tokenizers; the parser (pattern -> syntax tree);
 * the compiler (tree -> program); the machine. */
#include <stdlib.h>

#include "llm/unicode.h"

/* ======================================================================== */
/* Named pre-tokenizers                                                      */
/* ======================================================================== */

/* The patterns are the tokenizer.json originals (llama.cpp rewrites some
 * for std::regex; the matcher here runs them as written). */
const char er__tok_pattern_gpt2[] =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";
const char er__tok_pattern_punct[] = "[\\p{P}\\$\\+<=>\\^~\\|`]+";
#define PAT_LLAMA3                                                                                  \
  "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*" \
  "|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define PAT_QWEN2                                                                                 \
  "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*" \
  "|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define PAT_QWEN35                                                                                        \
  "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}| ?[^\\s\\p{L}\\p{M}\\p{N}]+[\\r\\n]*" \
  "|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define PAT_GPT4O                                                                                   \
  "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?" \
  "|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?" \
  "|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define PAT_TEKKEN                                                                                 \
  "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+"               \
  "|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*"              \
  "|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
/* CJK ideographs, U+0800..U+4E00 and Hangul, as DeepSeek's tokenizer.json
 * spells them (the escapes keep the exact code points: an editor that
 * normalizes text would turn some of them into others). */
#define PAT_DEEPSEEK_CJK "[\u4E00-\u9FA5\u0800-\u4E00\uAC00-\uD7FF]+"
/* DeepSeek's letter class: Latin, Greek, Cyrillic, Armenian, Georgian,
 * Cherokee, ... spelled out as ranges in its tokenizer.json. */
#define PAT_DEEPSEEK_LLM_LETTERS \
  "\\s?[A-Za-z\u00B5\u00C0-\u00D6\u00D8-\u00F6\u00F8-\u01BA\u01BC-\u01BF\u01C4-\u0293\u0295-\u02AF" \
  "\u0370-\u0373\u0376\u0377\u037B-\u037D\u037F\u0386\u0388-\u038A\u038C\u038E-\u03A1\u03A3-\u03F5" \
  "\u03F7-\u0481\u048A-\u052F\u0531-\u0556\u10A0-\u10C5\u13A0-\u13F5\u13F8-\u13FD\u1C90-\u1CBA" \
  "\u1CBD-\u1CBF\u1D00-\u1D2B\u1D6B-\u1D77\u1D79-\u1D9A\u1E00-\u1F15\u1F18-\u1F1D\u1F20-\u1F45" \
  "\u1F48-\u1F4D\u1F50-\u1F57\u1F59\u1F5B\u1F5D\u1F5F-\u1F7D\u1F80-\u1FB4\u1FB6-\u1FBC\u1FBE\u1FC2-" \
  "\u1FC4\u1FC6-\u1FCC\u1FD0-\u1FD3\u1FD6-\u1FDB\u1FE0-\u1FEC\u1FF2-\u1FF4\u1FF6-\u1FFC\u2102\u2107" \
  "\u210A-\u2113\u2115\u2119-\u211D\u2124\u2126\u2128\u212A-\u212D\u212F-\u2134\u2139\u213C-\u213F" \
  "\u2145-\u2149\u214E\u2183\u2184\u2C00-\u2C7B\u2C7E-\u2CE4\u2CEB-\u2CEE\u2CF2\u2CF3\uA640-\uA66D" \
  "\uA680-\uA69B\uA722-\uA76F\uA771-\uA787\uA78B-\uA78E\uAB70-\uABBF\uFB00-\uFB06\uFB13-\uFB17" \
  "\uFF21-\uFF3A\uFF41-\uFF5A\U00010400-\U0001044F\U000104B0-\U000104D3\U000104D8-\U000104FB" \
  "\U00010C80-\U00010CB2\U00010CC0-\U00010CF2\U000118A0-\U000118DF\U0001E900-\U0001E943]+"

static const er_tok_pre_def pre_defs[] = {
    /* GPT-2's ByteLevel regex. llama.cpp's "default" is a four-pattern
     * chain of its own; edgerun's "default" is GPT-2's, as tokenizer.h
     * says, because that is what a BPE tokenizer.json without a Split
     * does. */
    {"default", "gpt2|gpt-2|phi-2|jina-es|jina-de|gigachat|jina-v2-es|jina-v2-de|a.x-4.0|mellum|modern-bert|mpt|olmo|"
     "jais|trillion|granite-docling|roberta-bpe",
     1, {er__tok_pattern_gpt2}, false, 0},
    /* Llama 3's tokenizer.json sets ignore_merges: a piece that is a whole
     * token is not merged up from bytes. */
    {"llama3", "llama-v3|llama-bpe|falcon3|falcon-h1|pixtral|midm-2.0|lfm2|jina-v5-nano", 1, {PAT_LLAMA3}, true, 0},
    {"dbrx", "smaug-bpe|chatglm-bpe", 1, {PAT_LLAMA3}, false, 0},
    {"qwen2", "deepseek-r1-qwen|kormo|f2llmv2|megrez|stablelm2|hunyuan|solar-open", 1, {PAT_QWEN2}, false, 0},
    {"qwen35", "", 1, {PAT_QWEN35}, false, 0},
    /* Digits(individual_digits) then ByteLevel: every digit alone. */
    {"smollm", "starcoder|refact|command-r|codeshell|exaone|minerva|mellum2", 2, {"\\p{N}", er__tok_pattern_gpt2}, false, 0},
    {"deepseek-llm", "",
     6,
     {"[\\r\\n]", PAT_DEEPSEEK_LLM_LETTERS, "\\s?[!-/:-~\uFF01-\uFF0F\uFF1A-\uFF5E\u2018-\u201F\u3000-\u3002]+",
      "\\s+$", PAT_DEEPSEEK_CJK, "\\p{N}+"},
     false, 0},
    {"deepseek-coder", "", 5, {"[\\r\\n]", "\\s?\\p{L}+", "\\s?\\p{P}+", PAT_DEEPSEEK_CJK, "\\p{N}"}, false, 0},
    /* Falcon's tokenizer.json: Punctuation (runs of Unicode P and the
     * ASCII symbols), ByteLevel, Digits, then runs of three digits. */
    {"falcon", "", 4, {er__tok_pattern_punct, er__tok_pattern_gpt2, "\\p{N}+", "[0-9][0-9][0-9]"}, false, 2},
    /* Patterns only: no vocabulary of these families is at hand to check
     * them against, but they use nothing the matcher lacks. */
    {"gpt-4o", "llama4|kanana2|minimax-m2", 1, {PAT_GPT4O}, false, 0},
    {"tekken", "", 1, {PAT_TEKKEN}, false, 0},
};

static bool name_in_list(const char *list, const char *name) {
  size_t n = strlen(name);
  const char *p = list;
  while (*p) {
    const char *bar = strchr(p, '|');
    size_t len = bar ? (size_t)(bar - p) : strlen(p);
    if (len == n && memcmp(p, name, n) == 0) return true;
    if (!bar) break;
    p = bar + 1;
  }
  return false;
}

const er_tok_pre_def *er__tok_pre_find(const char *name) {
  if (!name) name = "default";
  for (size_t i = 0; i < ER_ARRAY_LEN(pre_defs); i++)
    if (strcmp(pre_defs[i].name, name) == 0 || name_in_list(pre_defs[i].aliases, name)) return &pre_defs[i];
  return NULL;
}

/* Whether two pattern sources say the same thing, where the only freedom
 * real files take is writing CR, LF and TAB as themselves or escaped
 * (DeepSeek's tokenizer.json has "[\r\n]" as the two raw characters). */
/* The next unit of a pattern source: an escape pair, or one byte; \r \n
 * \t read as the raw characters they stand for. */
static const char *pattern_unit(const char *p, char unit[2]) {
  if (p[0] == '\\' && p[1]) {
    char c = p[1];
    if (c == 'r' || c == 'n' || c == 't') {
      unit[0] = c == 'r' ? '\r' : c == 'n' ? '\n' : '\t';
      unit[1] = 0;
    } else {
      unit[0] = '\\';
      unit[1] = c;
    }
    return p + 2;
  }
  unit[0] = p[0];
  unit[1] = 0;
  return p[0] ? p + 1 : p;
}

/* Whether two pattern sources say the same thing, where the only freedom
 * real files take is writing CR, LF and TAB as themselves or escaped
 * (DeepSeek's tokenizer.json has "[\r\n]" as the two raw characters). */
static bool same_pattern(const char *a, const char *b) {
  for (;;) {
    char ua[2], ub[2];
    bool end = !*a && !*b;
    a = pattern_unit(a, ua);
    b = pattern_unit(b, ub);
    if (ua[0] != ub[0] || ua[1] != ub[1]) return false;
    if (end) return true;
  }
}

const char *er__tok_pre_name_for(const char *const *patterns, size_t n, size_t mapped_stages, bool ignore_merges) {
  for (size_t i = 0; i < ER_ARRAY_LEN(pre_defs); i++) {
    const er_tok_pre_def *d = &pre_defs[i];
    if (d->n_patterns != n || d->ignore_merges != ignore_merges || d->mapped_stages != mapped_stages) continue;
    bool same = true;
    for (size_t k = 0; k < n && same; k++) same = same_pattern(d->patterns[k], patterns[k]);
    if (same) return d->name;
  }
  return NULL;
}

/* ======================================================================== */
/* Parser: pattern -> syntax tree                                            */
/* ======================================================================== */

typedef enum node_type {
  N_EMPTY,
  N_CHAR,   /* c, icase */
  N_ANY,    /* any code point but \n */
  N_CLASS,  /* cls */
  N_CAT,    /* a then b */
  N_ALT,    /* a or b */
  N_REP,    /* a, {min, max}, greedy */
  N_LOOK,   /* lookahead a, neg */
  N_BOL,
  N_EOL,
  N_BOS,
  N_EOS,
  N_EOS_NL, /* \Z: end, or before a final \n */
} node_type;

#define REP_INF UINT32_MAX

typedef struct node {
  node_type type;
  uint32_t a, b;         /* children (node indices) */
  uint32_t c;            /* N_CHAR: the code point; N_CLASS: the class index */
  uint32_t min, max;     /* N_REP */
  bool greedy, neg, icase;
} node;

/* One class item: a code point range, or a category set (optionally
 * negated, as \P{L} or \S inside brackets). */
typedef struct class_range {
  uint32_t lo, hi;
} class_range;

typedef struct class_set {
  uint32_t cat_mask;     /* ER_UCD_BIT()s */
  bool space;            /* \s */
  bool neg;
} class_set;

typedef struct er_class {
  class_range *ranges;   /* sorted, merged */
  size_t n_ranges;
  class_set *sets;
  size_t n_sets;
  bool negate, icase;
} er_class;

typedef enum op {
  OP_CHAR,   /* arg: code point */
  OP_CHARI,  /* arg: folded code point */
  OP_ANY,
  OP_CLASS,  /* arg: class index */
  OP_SPLIT,  /* try x, then y */
  OP_JMP,    /* x */
  OP_LOOK,   /* sub-program at pc+1 up to its MATCH; arg: negated; continue at y */
  OP_BOL,
  OP_EOL,
  OP_BOS,
  OP_EOS,
  OP_EOS_NL,
  OP_MATCH,
} op;

typedef struct inst {
  uint8_t op;
  uint32_t arg;
  uint32_t x, y;
} inst;

struct er_regex {
  inst *prog;
  size_t n_prog;
  er_class *classes;
  size_t n_classes;
};

typedef struct parser {
  const uint32_t *p;     /* the pattern's code points */
  size_t n, i;
  node *nodes;
  size_t n_nodes, cap_nodes;
  er_class *classes;
  size_t n_classes, cap_classes;
  unsigned depth;
  const char *src;       /* for messages */
} parser;

#define MAX_PARSE_DEPTH 64

static er_status perr(parser *ps, const char *what) {
  return er__error(ER_STATUS_UNSUPPORTED, "pre-tokenizer pattern '%s': %s at code point %zu", ps->src, what,
                   ps->i);
}

static er_status new_node(parser *ps, node_type t, uint32_t *out) {
  if (ps->n_nodes == ps->cap_nodes) {
    size_t cap = ps->cap_nodes ? ps->cap_nodes * 2 : 64;
    node *nn = realloc(ps->nodes, cap * sizeof *nn);
    if (!nn) return er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory parsing a pre-tokenizer pattern");
    ps->nodes = nn;
    ps->cap_nodes = cap;
  }
  node *nd = &ps->nodes[ps->n_nodes];
  memset(nd, 0, sizeof *nd);
  nd->type = t;
  *out = (uint32_t)ps->n_nodes++;
  return ER_STATUS_OK;
}

static er_status new_class(parser *ps, uint32_t *out) {
  if (ps->n_classes == ps->cap_classes) {
    size_t cap = ps->cap_classes ? ps->cap_classes * 2 : 8;
    er_class *nc = realloc(ps->classes, cap * sizeof *nc);
    if (!nc) return er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory parsing a pre-tokenizer pattern");
    ps->classes = nc;
    ps->cap_classes = cap;
  }
  memset(&ps->classes[ps->n_classes], 0, sizeof ps->classes[0]);
  *out = (uint32_t)ps->n_classes++;
  return ER_STATUS_OK;
}

static er_status class_add_range(parser *ps, er_class *cl, uint32_t lo, uint32_t hi) {
  class_range *r = realloc(cl->ranges, (cl->n_ranges + 1) * sizeof *r);
  if (!r) return er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory parsing a pre-tokenizer pattern");
  (void)ps;
  cl->ranges = r;
  r[cl->n_ranges].lo = lo;
  r[cl->n_ranges].hi = hi;
  cl->n_ranges++;
  return ER_STATUS_OK;
}

static er_status class_add_set(parser *ps, er_class *cl, class_set s) {
  class_set *v = realloc(cl->sets, (cl->n_sets + 1) * sizeof *v);
  if (!v) return er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory parsing a pre-tokenizer pattern");
  (void)ps;
  cl->sets = v;
  v[cl->n_sets++] = s;
  return ER_STATUS_OK;
}

static int cmp_range(const void *a, const void *b) {
  const class_range *x = a, *y = b;
  return x->lo < y->lo ? -1 : x->lo > y->lo;
}

static void class_normalize(er_class *cl) {
  if (cl->n_ranges < 2) return;
  qsort(cl->ranges, cl->n_ranges, sizeof cl->ranges[0], cmp_range);
  size_t w = 0;
  for (size_t r = 1; r < cl->n_ranges; r++) {
    if (cl->ranges[r].lo <= cl->ranges[w].hi + 1) {
      if (cl->ranges[r].hi > cl->ranges[w].hi) cl->ranges[w].hi = cl->ranges[r].hi;
    } else {
      cl->ranges[++w] = cl->ranges[r];
    }
  }
  cl->n_ranges = w + 1;
}

/* \p{..} names: the general categories, short and long. */
static bool category_mask(const uint32_t *name, size_t len, uint32_t *mask) {
  char buf[32];
  if (len == 0 || len >= sizeof buf) return false;
  for (size_t i = 0; i < len; i++) {
    if (name[i] > 127) return false;
    buf[i] = (char)name[i];
  }
  buf[len] = 0;
  static const struct {
    const char *name;
    uint32_t mask;
  } tab[] = {
      {"L", ER_UCD_MASK_L},
      {"Letter", ER_UCD_MASK_L},
      {"Lu", ER_UCD_BIT(ER_UCD_LU)},
      {"Ll", ER_UCD_BIT(ER_UCD_LL)},
      {"Lt", ER_UCD_BIT(ER_UCD_LT)},
      {"Lm", ER_UCD_BIT(ER_UCD_LM)},
      {"Lo", ER_UCD_BIT(ER_UCD_LO)},
      {"LC", ER_UCD_BIT(ER_UCD_LU) | ER_UCD_BIT(ER_UCD_LL) | ER_UCD_BIT(ER_UCD_LT)},
      {"L&", ER_UCD_BIT(ER_UCD_LU) | ER_UCD_BIT(ER_UCD_LL) | ER_UCD_BIT(ER_UCD_LT)},
      {"M", ER_UCD_MASK_M},
      {"Mark", ER_UCD_MASK_M},
      {"Mn", ER_UCD_BIT(ER_UCD_MN)},
      {"Mc", ER_UCD_BIT(ER_UCD_MC)},
      {"Me", ER_UCD_BIT(ER_UCD_ME)},
      {"N", ER_UCD_MASK_N},
      {"Number", ER_UCD_MASK_N},
      {"Nd", ER_UCD_BIT(ER_UCD_ND)},
      {"Nl", ER_UCD_BIT(ER_UCD_NL)},
      {"No", ER_UCD_BIT(ER_UCD_NO)},
      {"P", ER_UCD_MASK_P},
      {"Punctuation", ER_UCD_MASK_P},
      {"Pc", ER_UCD_BIT(ER_UCD_PC)},
      {"Pd", ER_UCD_BIT(ER_UCD_PD)},
      {"Ps", ER_UCD_BIT(ER_UCD_PS)},
      {"Pe", ER_UCD_BIT(ER_UCD_PE)},
      {"Pi", ER_UCD_BIT(ER_UCD_PI)},
      {"Pf", ER_UCD_BIT(ER_UCD_PF)},
      {"Po", ER_UCD_BIT(ER_UCD_PO)},
      {"S", ER_UCD_MASK_S},
      {"Symbol", ER_UCD_MASK_S},
      {"Sm", ER_UCD_BIT(ER_UCD_SM)},
      {"Sc", ER_UCD_BIT(ER_UCD_SC)},
      {"Sk", ER_UCD_BIT(ER_UCD_SK)},
      {"So", ER_UCD_BIT(ER_UCD_SO)},
      {"Z", ER_UCD_MASK_Z},
      {"Separator", ER_UCD_MASK_Z},
      {"Zs", ER_UCD_BIT(ER_UCD_ZS)},
      {"Zl", ER_UCD_BIT(ER_UCD_ZL)},
      {"Zp", ER_UCD_BIT(ER_UCD_ZP)},
      {"C", ER_UCD_MASK_C},
      {"Other", ER_UCD_MASK_C},
      {"Cc", ER_UCD_BIT(ER_UCD_CC)},
      {"Cf", ER_UCD_BIT(ER_UCD_CF)},
      {"Cs", ER_UCD_BIT(ER_UCD_CS)},
      {"Co", ER_UCD_BIT(ER_UCD_CO)},
      {"Cn", ER_UCD_BIT(ER_UCD_CN)},
  };
  for (size_t i = 0; i < ER_ARRAY_LEN(tab); i++) {
    if (strcmp(tab[i].name, buf) == 0) {
      *mask = tab[i].mask;
      return true;
    }
  }
  return false;
}

static bool is_hex(uint32_t c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }
static uint32_t hex_val(uint32_t c) { return c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10; }

/* What one escape stands for: a code point, or a set. */
typedef struct esc {
  bool is_set;
  uint32_t cp;
  class_set set;
} esc;

/* Parses the escape after a backslash (ps->i is past it). */
static er_status parse_escape(parser *ps, esc *e) {
  if (ps->i >= ps->n) return perr(ps, "a trailing backslash");
  uint32_t c = ps->p[ps->i++];
  memset(e, 0, sizeof *e);
  switch (c) {
    case 'n': e->cp = '\n'; return ER_STATUS_OK;
    case 'r': e->cp = '\r'; return ER_STATUS_OK;
    case 't': e->cp = '\t'; return ER_STATUS_OK;
    case 'f': e->cp = '\f'; return ER_STATUS_OK;
    case 'v': e->cp = '\v'; return ER_STATUS_OK;
    case 'a': e->cp = 7; return ER_STATUS_OK;
    case 'e': e->cp = 27; return ER_STATUS_OK;
    case '0': e->cp = 0; return ER_STATUS_OK;
    case 's': case 'S':
      e->is_set = true, e->set.space = true, e->set.neg = c == 'S';
      return ER_STATUS_OK;
    case 'd': case 'D':
      e->is_set = true, e->set.cat_mask = ER_UCD_BIT(ER_UCD_ND), e->set.neg = c == 'D';
      return ER_STATUS_OK;
    case 'w': case 'W':
      /* Oniguruma's Unicode \w: letters, marks, decimal digits, connectors. */
      e->is_set = true, e->set.cat_mask = ER_UCD_MASK_L | ER_UCD_MASK_M | ER_UCD_BIT(ER_UCD_ND) | ER_UCD_BIT(ER_UCD_PC);
      e->set.neg = c == 'W';
      return ER_STATUS_OK;
    case 'p': case 'P': {
      if (ps->i >= ps->n || ps->p[ps->i] != '{') return perr(ps, "\\p without {name}");
      size_t start = ++ps->i;
      while (ps->i < ps->n && ps->p[ps->i] != '}') ps->i++;
      if (ps->i >= ps->n) return perr(ps, "an unterminated \\p{");
      size_t end = ps->i++;
      bool neg = c == 'P';
      if (end > start && ps->p[start] == '^') neg = !neg, start++;
      e->is_set = true;
      e->set.neg = neg;
      if (!category_mask(ps->p + start, end - start, &e->set.cat_mask))
        return perr(ps, "a \\p{} property other than a general category");
      return ER_STATUS_OK;
    }
    case 'x': case 'u': {
      uint32_t v = 0;
      if (ps->i < ps->n && ps->p[ps->i] == '{') {
        ps->i++;
        size_t digits = 0;
        while (ps->i < ps->n && is_hex(ps->p[ps->i]) && digits < 8) v = v * 16 + hex_val(ps->p[ps->i++]), digits++;
        if (ps->i >= ps->n || ps->p[ps->i] != '}' || digits == 0) return perr(ps, "a malformed \\x{...}");
        ps->i++;
      } else {
        size_t want = c == 'x' ? 2 : 4;
        for (size_t k = 0; k < want; k++) {
          if (ps->i >= ps->n || !is_hex(ps->p[ps->i])) return perr(ps, "a malformed hex escape");
          v = v * 16 + hex_val(ps->p[ps->i++]);
        }
      }
      if (v > 0x10FFFF) return perr(ps, "a code point past U+10FFFF");
      e->cp = v;
      return ER_STATUS_OK;
    }
    default:
      /* Escaped punctuation (and anything else outside ASCII letters and
       * digits) stands for itself. */
      if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '1' && c <= '9'))
        return perr(ps, "an escape edgerun's matcher does not implement");
      e->cp = c;
      return ER_STATUS_OK;
  }
}

static er_status parse_class(parser *ps, bool icase, uint32_t *out) {
  /* ps->i is past '['. */
  uint32_t ci = 0;
  ER_CHECK(new_class(ps, &ci));
  er_class *cl = &ps->classes[ci];
  cl->icase = icase;
  if (ps->i < ps->n && ps->p[ps->i] == '^') cl->negate = true, ps->i++;
  bool first = true;
  for (;;) {
    if (ps->i >= ps->n) return perr(ps, "an unterminated [class]");
    uint32_t c = ps->p[ps->i];
    if (c == ']' && !first) {
      ps->i++;
      break;
    }
    first = false;
    if (c == '[') return perr(ps, "a nested [class]");
    if (c == '&' && ps->i + 1 < ps->n && ps->p[ps->i + 1] == '&') return perr(ps, "a class intersection (&&)");
    uint32_t lo;
    ps->i++;
    if (c == '\\') {
      esc e;
      ER_CHECK(parse_escape(ps, &e));
      cl = &ps->classes[ci];
      if (e.is_set) {
        ER_CHECK(class_add_set(ps, cl, e.set));
        continue;
      }
      lo = e.cp;
    } else {
      lo = c;
    }
    uint32_t hi = lo;
    if (ps->i + 1 < ps->n && ps->p[ps->i] == '-' && ps->p[ps->i + 1] != ']') {
      ps->i++;
      uint32_t c2 = ps->p[ps->i++];
      if (c2 == '\\') {
        esc e;
        ER_CHECK(parse_escape(ps, &e));
        if (e.is_set) return perr(ps, "a range ending in a set");
        c2 = e.cp;
      } else if (c2 == '[') {
        return perr(ps, "a nested [class]");
      }
      hi = c2;
      if (hi < lo) return perr(ps, "a range whose end is below its start");
    }
    ER_CHECK(class_add_range(ps, cl, lo, hi));
  }
  class_normalize(&ps->classes[ci]);
  *out = ci;
  return ER_STATUS_OK;
}

static er_status parse_alt(parser *ps, bool icase, uint32_t *out);

static er_status parse_atom(parser *ps, bool icase, uint32_t *out, bool *have) {
  *have = true;
  uint32_t c = ps->p[ps->i];
  uint32_t nd = 0;
  switch (c) {
    case '(': {
      ps->i++;
      bool look = false, neg = false, sub_icase = icase;
      if (ps->i < ps->n && ps->p[ps->i] == '?') {
        ps->i++;
        if (ps->i >= ps->n) return perr(ps, "an unterminated group");
        uint32_t k = ps->p[ps->i];
        if (k == ':') {
          ps->i++;
        } else if (k == '=' || k == '!') {
          look = true, neg = k == '!';
          ps->i++;
        } else if (k == 'i' || k == '-') {
          /* (?i:...) and (?-i:...); a bare (?i) switch is not used by
           * tokenizers and is not implemented. */
          bool on = true;
          if (k == '-') on = false, ps->i++;
          if (ps->i >= ps->n || ps->p[ps->i] != 'i') return perr(ps, "a group option other than i");
          ps->i++;
          if (ps->i >= ps->n || ps->p[ps->i] != ':') return perr(ps, "an inline option switch without ':'");
          ps->i++;
          sub_icase = on;
        } else {
          return perr(ps, "a group kind edgerun's matcher does not implement (lookbehind, named, atomic)");
        }
      }
      if (++ps->depth > MAX_PARSE_DEPTH) return perr(ps, "groups nested too deep");
      uint32_t inner = 0;
      ER_CHECK(parse_alt(ps, sub_icase, &inner));
      ps->depth--;
      if (ps->i >= ps->n || ps->p[ps->i] != ')') return perr(ps, "an unbalanced '('");
      ps->i++;
      if (look) {
        ER_CHECK(new_node(ps, N_LOOK, &nd));
        ps->nodes[nd].a = inner;
        ps->nodes[nd].neg = neg;
        *out = nd;
      } else {
        *out = inner;
      }
      return ER_STATUS_OK;
    }
    case '[': {
      ps->i++;
      uint32_t ci = 0;
      ER_CHECK(parse_class(ps, icase, &ci));
      ER_CHECK(new_node(ps, N_CLASS, &nd));
      ps->nodes[nd].c = ci;
      *out = nd;
      return ER_STATUS_OK;
    }
    case '.': ps->i++; ER_CHECK(new_node(ps, N_ANY, out)); return ER_STATUS_OK;
    case '^': ps->i++; ER_CHECK(new_node(ps, N_BOL, out)); return ER_STATUS_OK;
    case '$': ps->i++; ER_CHECK(new_node(ps, N_EOL, out)); return ER_STATUS_OK;
    case '*': case '+': case '?': case '{':
      if (c == '{' && !(ps->i + 1 < ps->n && ps->p[ps->i + 1] >= '0' && ps->p[ps->i + 1] <= '9')) break;
      return perr(ps, "a quantifier with nothing to repeat");
    case '\\': {
      ps->i++;
      if (ps->i < ps->n && (ps->p[ps->i] == 'A' || ps->p[ps->i] == 'z' || ps->p[ps->i] == 'Z')) {
        uint32_t k = ps->p[ps->i++];
        ER_CHECK(new_node(ps, k == 'A' ? N_BOS : k == 'z' ? N_EOS : N_EOS_NL, out));
        return ER_STATUS_OK;
      }
      esc e;
      ER_CHECK(parse_escape(ps, &e));
      if (e.is_set) {
        uint32_t ci = 0;
        ER_CHECK(new_class(ps, &ci));
        ER_CHECK(class_add_set(ps, &ps->classes[ci], e.set));
        ER_CHECK(new_node(ps, N_CLASS, &nd));
        ps->nodes[nd].c = ci;
      } else {
        ER_CHECK(new_node(ps, N_CHAR, &nd));
        ps->nodes[nd].c = e.cp;
        ps->nodes[nd].icase = icase;
      }
      *out = nd;
      return ER_STATUS_OK;
    }
    default: break;
  }
  ps->i++;
  ER_CHECK(new_node(ps, N_CHAR, &nd));
  ps->nodes[nd].c = c;
  ps->nodes[nd].icase = icase;
  *out = nd;
  return ER_STATUS_OK;
}

static bool parse_uint(parser *ps, uint32_t *v) {
  size_t start = ps->i;
  uint64_t x = 0;
  while (ps->i < ps->n && ps->p[ps->i] >= '0' && ps->p[ps->i] <= '9') {
    x = x * 10 + (ps->p[ps->i++] - '0');
    if (x > 100000) return false;
  }
  *v = (uint32_t)x;
  return ps->i > start;
}

static er_status parse_repeat(parser *ps, bool icase, uint32_t *out, bool *have) {
  uint32_t atom = 0;
  ER_CHECK(parse_atom(ps, icase, &atom, have));
  for (;;) {
    if (ps->i >= ps->n) break;
    uint32_t c = ps->p[ps->i];
    uint32_t min, max;
    if (c == '*') {
      min = 0, max = REP_INF, ps->i++;
    } else if (c == '+') {
      min = 1, max = REP_INF, ps->i++;
    } else if (c == '?') {
      min = 0, max = 1, ps->i++;
    } else if (c == '{' && ps->i + 1 < ps->n && ps->p[ps->i + 1] >= '0' && ps->p[ps->i + 1] <= '9') {
      ps->i++;
      if (!parse_uint(ps, &min)) return perr(ps, "a repeat count past 100000");
      max = min;
      if (ps->i < ps->n && ps->p[ps->i] == ',') {
        ps->i++;
        if (ps->i < ps->n && ps->p[ps->i] == '}')
          max = REP_INF;
        else if (!parse_uint(ps, &max))
          return perr(ps, "a malformed {n,m}");
      }
      if (ps->i >= ps->n || ps->p[ps->i] != '}') return perr(ps, "a malformed {n,m}");
      ps->i++;
      if (max < min) return perr(ps, "a {n,m} with m < n");
    } else {
      break;
    }
    bool greedy = true;
    if (ps->i < ps->n && ps->p[ps->i] == '?') {
      greedy = false;
      ps->i++;
    } else if (ps->i < ps->n && ps->p[ps->i] == '+') {
      return perr(ps, "a possessive quantifier");
    }
    uint32_t nd = 0;
    ER_CHECK(new_node(ps, N_REP, &nd));
    ps->nodes[nd].a = atom;
    ps->nodes[nd].min = min;
    ps->nodes[nd].max = max;
    ps->nodes[nd].greedy = greedy;
    atom = nd;
  }
  *out = atom;
  return ER_STATUS_OK;
}

static er_status parse_concat(parser *ps, bool icase, uint32_t *out) {
  uint32_t acc = 0;
  ER_CHECK(new_node(ps, N_EMPTY, &acc));
  bool first = true;
  while (ps->i < ps->n && ps->p[ps->i] != '|' && ps->p[ps->i] != ')') {
    uint32_t r = 0;
    bool have;
    ER_CHECK(parse_repeat(ps, icase, &r, &have));
    if (first) {
      acc = r;
      first = false;
    } else {
      uint32_t nd = 0;
      ER_CHECK(new_node(ps, N_CAT, &nd));
      ps->nodes[nd].a = acc;
      ps->nodes[nd].b = r;
      acc = nd;
    }
  }
  *out = acc;
  return ER_STATUS_OK;
}

static er_status parse_alt(parser *ps, bool icase, uint32_t *out) {
  uint32_t left = 0;
  ER_CHECK(parse_concat(ps, icase, &left));
  while (ps->i < ps->n && ps->p[ps->i] == '|') {
    ps->i++;
    uint32_t right = 0, nd = 0;
    ER_CHECK(parse_concat(ps, icase, &right));
    ER_CHECK(new_node(ps, N_ALT, &nd));
    ps->nodes[nd].a = left;
    ps->nodes[nd].b = right;
    left = nd;
  }
  *out = left;
  return ER_STATUS_OK;
}

/* ======================================================================== */
/* Compiler: syntax tree -> program                                          */
/* ======================================================================== */

typedef struct compiler {
  parser *ps;
  inst *prog;
  size_t n, cap;
  unsigned look_depth;
} compiler;

static bool nullable(const parser *ps, uint32_t i) {
  const node *nd = &ps->nodes[i];
  switch (nd->type) {
    case N_CHAR: case N_ANY: case N_CLASS: return false;
    case N_CAT: return nullable(ps, nd->a) && nullable(ps, nd->b);
    case N_ALT: return nullable(ps, nd->a) || nullable(ps, nd->b);
    case N_REP: return nd->min == 0 || nullable(ps, nd->a);
    default: return true;
  }
}

/* Case folding for (?i:...): the simple folds that reach ASCII letters
 * (Oniguruma folds U+017F LONG S to s and U+212A KELVIN SIGN to k), ASCII
 * and Latin-1 letters; the contractions tokenizers match are ASCII. */
static uint32_t fold(uint32_t c) {
  if (c >= 'A' && c <= 'Z') return c + 32;
  if (c == 0x17F) return 's';
  if (c == 0x212A) return 'k';
  if (c == 0x212B) return 0xE5;
  if (c >= 0xC0 && c <= 0xDE && c != 0xD7) return c + 32;
  return c;
}

static er_status emit(compiler *cp, op o, uint32_t arg, uint32_t x, uint32_t y, size_t *at) {
  if (cp->n >= ER_REGEX_MAX_PROGRAM)
    return er__error(ER_STATUS_LIMIT, "pre-tokenizer pattern '%s' compiles to more than %d instructions "
                     "(ER_REGEX_MAX_PROGRAM)", cp->ps->src, ER_REGEX_MAX_PROGRAM);
  if (cp->n == cp->cap) {
    size_t cap = cp->cap ? cp->cap * 2 : 64;
    inst *np = realloc(cp->prog, cap * sizeof *np);
    if (!np) return er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory compiling a pre-tokenizer pattern");
    cp->prog = np;
    cp->cap = cap;
  }
  inst *in = &cp->prog[cp->n];
  in->op = (uint8_t)o;
  in->arg = arg;
  in->x = x;
  in->y = y;
  if (at) *at = cp->n;
  cp->n++;
  return ER_STATUS_OK;
}

static er_status gen(compiler *cp, uint32_t ni) {
  const node nd = cp->ps->nodes[ni];
  size_t a, b;
  switch (nd.type) {
    case N_EMPTY: return ER_STATUS_OK;
    case N_CHAR:
      return nd.icase && fold(nd.c) != nd.c ? emit(cp, OP_CHARI, fold(nd.c), 0, 0, NULL)
             : nd.icase && (nd.c >= 'a' && nd.c <= 'z') ? emit(cp, OP_CHARI, nd.c, 0, 0, NULL)
                                                       : emit(cp, OP_CHAR, nd.c, 0, 0, NULL);
    case N_ANY: return emit(cp, OP_ANY, 0, 0, 0, NULL);
    case N_CLASS: return emit(cp, OP_CLASS, nd.c, 0, 0, NULL);
    case N_BOL: return emit(cp, OP_BOL, 0, 0, 0, NULL);
    case N_EOL: return emit(cp, OP_EOL, 0, 0, 0, NULL);
    case N_BOS: return emit(cp, OP_BOS, 0, 0, 0, NULL);
    case N_EOS: return emit(cp, OP_EOS, 0, 0, 0, NULL);
    case N_EOS_NL: return emit(cp, OP_EOS_NL, 0, 0, 0, NULL);
    case N_CAT:
      ER_CHECK(gen(cp, nd.a));
      return gen(cp, nd.b);
    case N_ALT:
      ER_CHECK(emit(cp, OP_SPLIT, 0, 0, 0, &a));
      cp->prog[a].x = (uint32_t)cp->n;
      ER_CHECK(gen(cp, nd.a));
      ER_CHECK(emit(cp, OP_JMP, 0, 0, 0, &b));
      cp->prog[a].y = (uint32_t)cp->n;
      ER_CHECK(gen(cp, nd.b));
      cp->prog[b].x = (uint32_t)cp->n;
      return ER_STATUS_OK;
    case N_LOOK:
      if (++cp->look_depth > ER_REGEX_MAX_LOOKAROUND_DEPTH)
        return er__error(ER_STATUS_LIMIT, "pre-tokenizer pattern '%s' nests lookaheads deeper than %d "
                         "(ER_REGEX_MAX_LOOKAROUND_DEPTH)", cp->ps->src, ER_REGEX_MAX_LOOKAROUND_DEPTH);
      ER_CHECK(emit(cp, OP_LOOK, nd.neg, 0, 0, &a));
      ER_CHECK(gen(cp, nd.a));
      ER_CHECK(emit(cp, OP_MATCH, 0, 0, 0, NULL));
      cp->prog[a].y = (uint32_t)cp->n;
      cp->look_depth--;
      return ER_STATUS_OK;
    case N_REP: {
      if (nd.max == REP_INF && nullable(cp->ps, nd.a))
        return er__error(ER_STATUS_UNSUPPORTED, "pre-tokenizer pattern '%s' repeats a part that can match "
                         "nothing (unbounded empty loops are not implemented)", cp->ps->src);
      for (uint32_t k = 0; k < nd.min; k++) ER_CHECK(gen(cp, nd.a));
      if (nd.max == REP_INF) {
        /* L: SPLIT body, out; body; JMP L */
        size_t l;
        ER_CHECK(emit(cp, OP_SPLIT, 0, 0, 0, &l));
        size_t body = cp->n;
        ER_CHECK(gen(cp, nd.a));
        ER_CHECK(emit(cp, OP_JMP, 0, (uint32_t)l, 0, NULL));
        cp->prog[l].x = nd.greedy ? (uint32_t)body : (uint32_t)cp->n;
        cp->prog[l].y = nd.greedy ? (uint32_t)cp->n : (uint32_t)body;
        return ER_STATUS_OK;
      }
      /* {min,max}: max-min optional copies, each SPLIT jumping to the end
       * when not taken; the ends are patched once known. */
      size_t n_opt = nd.max - nd.min;
      size_t first_split = cp->n;
      for (size_t k = 0; k < n_opt; k++) {
        size_t s;
        ER_CHECK(emit(cp, OP_SPLIT, 0, 0, 0, &s));
        cp->prog[s].x = (uint32_t)cp->n;  /* provisional: body; flipped below if lazy */
        ER_CHECK(gen(cp, nd.a));
      }
      size_t end = cp->n;
      for (size_t pc = first_split; pc < end;) {
        /* Walk the chain: each optional copy starts with its SPLIT whose x
         * is the next instruction. */
        if (cp->prog[pc].op == OP_SPLIT && cp->prog[pc].x == pc + 1 && cp->prog[pc].y == 0) {
          uint32_t body = cp->prog[pc].x;
          cp->prog[pc].x = nd.greedy ? body : (uint32_t)end;
          cp->prog[pc].y = nd.greedy ? (uint32_t)end : body;
        }
        pc++;
      }
      return ER_STATUS_OK;
    }
  }
  return ER_STATUS_OK;
}

static void free_classes(er_class *cls, size_t n) {
  for (size_t i = 0; i < n; i++) {
    free(cls[i].ranges);
    free(cls[i].sets);
  }
  free(cls);
}

er_status er__regex_compile(const char *pattern, size_t len, er_regex **out) {
  *out = NULL;
  if (len > ER_REGEX_MAX_PATTERN_BYTES)
    return er__error(ER_STATUS_LIMIT, "pre-tokenizer pattern of %zu bytes is over %d (ER_REGEX_MAX_PATTERN_BYTES)",
                     len, ER_REGEX_MAX_PATTERN_BYTES);
  size_t bad = er__utf8_check(pattern, len);
  if (bad != len)
    return er__error(ER_STATUS_INVALID_ARGUMENT, "pre-tokenizer pattern has invalid UTF-8 at byte %zu", bad);
  er_status st = ER_STATUS_OK;
  parser ps = {0};
  compiler cp = {0};
  er_regex *re = NULL;
  /* The pattern as messages quote it: at most 120 bytes, cut at a
   * character boundary so the message stays valid UTF-8. */
  char srcbuf[128];
  size_t sl = len < 120 ? len : 120;
  while (sl < len && sl > 0 && ((uint8_t)pattern[sl] & 0xC0) == 0x80) sl--;
  memcpy(srcbuf, pattern, sl);
  srcbuf[sl] = 0;
  ps.src = srcbuf;
  uint32_t *cps = malloc((len + 1) * sizeof *cps);
  if (!cps) return er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory compiling a pre-tokenizer pattern");
  size_t n = 0;
  for (size_t i = 0; i < len;) {
    size_t l = er__utf8_decode((const uint8_t *)pattern + i, len - i, &cps[n]);
    i += l;
    n++;
  }
  ps.p = cps;
  ps.n = n;
  uint32_t root = 0;
  st = parse_alt(&ps, false, &root);
  if (st != ER_STATUS_OK) goto fail;
  if (ps.i != ps.n) {
    st = perr(&ps, "an unbalanced ')'");
    goto fail;
  }
  cp.ps = &ps;
  st = gen(&cp, root);
  if (st != ER_STATUS_OK) goto fail;
  st = emit(&cp, OP_MATCH, 0, 0, 0, NULL);
  if (st != ER_STATUS_OK) goto fail;
  re = calloc(1, sizeof *re);
  if (!re) {
    st = er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory compiling a pre-tokenizer pattern");
    goto fail;
  }
  re->prog = cp.prog;
  re->n_prog = cp.n;
  re->classes = ps.classes;
  re->n_classes = ps.n_classes;
  free(ps.nodes);
  free(cps);
  *out = re;
  return ER_STATUS_OK;
fail:
  free(cp.prog);
  free_classes(ps.classes, ps.n_classes);
  free(ps.nodes);
  free(cps);
  return st;
}

void er__regex_free(er_regex *re) {
  if (!re) return;
  free(re->prog);
  free_classes(re->classes, re->n_classes);
  free(re);
}

void er__regex_scratch_free(er_regex_scratch *s) {
  if (!s) return;
  free(s->stack);
  s->stack = NULL;
  s->cap = 0;
}

/* ======================================================================== */
/* The machine                                                               */
/* ======================================================================== */

static bool ranges_have(const class_range *r, size_t n, uint32_t c) {
  size_t lo = 0, hi = n;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (c < r[mid].lo)
      hi = mid;
    else if (c > r[mid].hi)
      lo = mid + 1;
    else
      return true;
  }
  return false;
}

static bool class_has_raw(const er_class *cl, uint32_t c, er_ucd_cat cat) {
  if (ranges_have(cl->ranges, cl->n_ranges, c)) return true;
  for (size_t i = 0; i < cl->n_sets; i++) {
    const class_set *s = &cl->sets[i];
    bool in = (s->cat_mask & ER_UCD_BIT(cat)) != 0 || (s->space && er__ucd_is_space(c, cat));
    if (in != s->neg) return true;
  }
  return false;
}

static bool class_has(const er_class *cl, uint32_t c, er_ucd_cat cat) {
  bool in = class_has_raw(cl, c, cat);
  if (!in && cl->icase) {
    uint32_t f = fold(c);
    if (f != c) in = class_has_raw(cl, f, er__ucd_category(f));
    if (!in && f >= 'a' && f <= 'z') in = class_has_raw(cl, f - 32, ER_UCD_LU);
  }
  return in != cl->negate;
}

typedef struct machine {
  const er_regex *re;
  const uint32_t *cps;
  const uint8_t *cats;
  size_t n;
  er_regex_scratch *scratch;
  size_t top;           /* entries in use, two words each */
  uint64_t steps, budget;
} machine;

static er_status push(machine *m, size_t pc, size_t sp) {
  er_regex_scratch *s = m->scratch;
  if (m->top * 2 + 2 > s->cap) {
    size_t cap = s->cap ? s->cap * 2 : 256;
    size_t *ns = realloc(s->stack, cap * sizeof *ns);
    if (!ns) return er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory matching a pre-tokenizer pattern");
    s->stack = ns;
    s->cap = cap;
  }
  s->stack[m->top * 2] = pc;
  s->stack[m->top * 2 + 1] = sp;
  m->top++;
  return ER_STATUS_OK;
}

/* Runs the program from pc at sp; *matched and *end_out say whether and
 * where the first (highest-priority) path reached MATCH. */
static er_status run(machine *m, size_t pc, size_t sp, unsigned depth, bool *matched, size_t *end_out) {
  const inst *prog = m->re->prog;
  const size_t base = m->top;
  for (;;) {
    if (++m->steps > m->budget)
      return er__error(ER_STATUS_LIMIT, "pre-tokenizer pattern needs more than %llu backtracking steps for a "
                       "%zu-character piece (ER_REGEX_STEPS_PER_CHAR %d)", (unsigned long long)m->budget, m->n,
                       ER_REGEX_STEPS_PER_CHAR);
    const inst *in = &prog[pc];
    bool ok;
    switch ((op)in->op) {
      case OP_CHAR:
        ok = sp < m->n && m->cps[sp] == in->arg;
        if (ok) pc++, sp++;
        break;
      case OP_CHARI:
        ok = sp < m->n && fold(m->cps[sp]) == in->arg;
        if (ok) pc++, sp++;
        break;
      case OP_ANY:
        ok = sp < m->n && m->cps[sp] != '\n';
        if (ok) pc++, sp++;
        break;
      case OP_CLASS:
        ok = sp < m->n && class_has(&m->re->classes[in->arg], m->cps[sp], (er_ucd_cat)m->cats[sp]);
        if (ok) pc++, sp++;
        break;
      case OP_SPLIT:
        ER_CHECK(push(m, in->y, sp));
        pc = in->x;
        ok = true;
        break;
      case OP_JMP:
        pc = in->x;
        ok = true;
        break;
      case OP_BOL:
        ok = sp == 0 || m->cps[sp - 1] == '\n';
        pc++;
        break;
      case OP_EOL:
        ok = sp == m->n || m->cps[sp] == '\n';
        pc++;
        break;
      case OP_BOS:
        ok = sp == 0;
        pc++;
        break;
      case OP_EOS:
        ok = sp == m->n;
        pc++;
        break;
      case OP_EOS_NL:
        ok = sp == m->n || (sp + 1 == m->n && m->cps[sp] == '\n');
        pc++;
        break;
      case OP_LOOK: {
        bool sub;
        size_t ignored;
        ER_CHECK(run(m, pc + 1, sp, depth + 1, &sub, &ignored));
        ok = sub != (in->arg != 0);
        pc = in->y;
        break;
      }
      case OP_MATCH:
        m->top = base;
        *matched = true;
        *end_out = sp;
        return ER_STATUS_OK;
      default:
        ER_ASSERT(!"bad regex instruction");
        ok = false;
    }
    if (ok) continue;
    if (m->top == base) {
      *matched = false;
      return ER_STATUS_OK;
    }
    m->top--;
    pc = m->scratch->stack[m->top * 2];
    sp = m->scratch->stack[m->top * 2 + 1];
  }
}

er_status er__regex_search(const er_regex *re, const uint32_t *cps, const uint8_t *cats, size_t n, size_t from,
                           er_regex_scratch *scratch, bool *found, size_t *start_out, size_t *end_out) {
  machine m = {re, cps, cats, n, scratch, 0, 0, 0};
  m.budget = (uint64_t)ER_REGEX_STEPS_PER_CHAR * ((uint64_t)(n - from) + 16);
  *found = false;
  for (size_t start = from; start <= n; start++) {
    bool matched;
    size_t end;
    ER_CHECK(run(&m, 0, start, 0, &matched, &end));
    if (matched) {
      *found = true;
      *start_out = start;
      *end_out = end;
      return ER_STATUS_OK;
    }
  }
  return ER_STATUS_OK;
}
