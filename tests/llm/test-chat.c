/* test-chat.c - the chat-template interpreter (src/llm/chat*.c): each
 * construct against the text jinja2 renders for it (as transformers
 * configures jinja2), the built-in formats, and TESTING.md case 16c: unknown
 * syntax, unbounded loops, recursion and output past a cap must end with a
 * clear error in bounded time and memory, never a crash.
 *
 * The expected texts were produced with the oracle of chat_check.py; that
 * script compares the same constructs (and real templates) with jinja2
 * directly. */
#include <stdlib.h>
#include <time.h>

#include "harness.h"
#include "llm/chat-impl.h"

static const er_chat_message conv[] = {
    {"system", "You are terse."},
    {"user", "Hi"},
    {"assistant", "Hello!"},
    {"user", "Bye"},
};

/* Renders src over conv (agp on, bos "<s>", eos "</s>"); *out is malloc'd. */
static er_status render_n(const char *src, size_t len, const er_chat_message *m, size_t n, bool agp, char **out) {
  er_chat_template *t = NULL;
  *out = NULL;
  er_status st = er__chat_parse(src, len, ER_CHAT_JINJA, &t);
  if (st) return st;
  er__chat_set_now(t, 1721990096); /* 2024-07-26 10:34:56 UTC */
  size_t out_len = 0;
  st = er__chat_render(t, m, n, agp, "<s>", "</s>", out, &out_len);
  if (st == ER_STATUS_OK && strlen(*out) != out_len) st = ER_STATUS_INTERNAL;
  er__chat_free(t);
  return st;
}

static er_status render(const char *src, char **out) {
  return render_n(src, strlen(src), conv, ER_ARRAY_LEN(conv), true, out);
}

#define EXPECT(src, want)                                                                          \
  do {                                                                                             \
    char *txt_ = NULL;                                                                             \
    er_status st_ = render((src), &txt_);                                                          \
    CHECK_STATUS(st_, ER_STATUS_OK);                                                               \
    bool same_ = txt_ && strcmp(txt_, (want)) == 0;                                                \
    CHECK(same_);                                                                                  \
    if (!same_) fprintf(stderr, "  template: %s\n  got:  [%s]\n  want: [%s]\n", (src), txt_ ? txt_ : "(none)", (want)); \
    free(txt_);                                                                                    \
  } while (0)

#define EXPECT_FAIL(src, status, needle)                                                           \
  do {                                                                                             \
    char *txt_ = NULL;                                                                             \
    CHECK_STATUS(render((src), &txt_), (status));                                                  \
    CHECK(txt_ == NULL);                                                                           \
    CHECK_MSG(needle);                                                                             \
    free(txt_);                                                                                    \
  } while (0)

/* ---- lexer: delimiters and whitespace ----------------------------------- */

static void test_whitespace(void) {
  /* trim_blocks drops the newline after a block tag, lstrip_blocks the
   * indentation before it; variables are left alone. */
  EXPECT("a\n{% if true %}\nb\n{% endif %}\nc", "a\nb\nc");
  EXPECT("  {% if true %}x{% endif %}  \n  y", "x  \n  y");
  EXPECT("a  {%- if true -%}  b  {%- endif -%}  c", "abc");
  EXPECT("{# comment #}\nx\n  {# indented #}\ny", "x\ny");
  EXPECT("{{ 'a' }}\n{{ 'b' }}\n", "a\nb");
  EXPECT("a {%+ if true %}b{% endif +%}\nc", "a b\nc");
  EXPECT("{% raw %}{{ not parsed }}{% endraw %}", "{{ not parsed }}");
  EXPECT("line1\r\nline2\r{{ 'x' }}\r\n", "line1\nline2\nx");
  EXPECT("{{- '  a  ' -}}   {{ 'b' }}", "  a  b");
  EXPECT("{{ {'a': {'b': 1}} }}", "{'a': {'b': 1}}");
  EXPECT("x {{ '}}' }} y", "x }} y");
  EXPECT("", "");
  EXPECT("plain text", "plain text");
}

/* ---- expressions --------------------------------------------------------- */

static void test_literals_and_operators(void) {
  EXPECT("{{ 1 + 2 * 3 }} {{ (1 + 2) * 3 }} {{ 7 // 2 }} {{ -7 // 2 }} {{ -7 % 3 }} {{ 2 ** 10 }}",
         "7 9 3 -4 2 1024");
  EXPECT("{{ 2 ** 3 ** 2 }} {{ - 2 ** 2 }} {{ 1 / 4 }} {{ 10 / 2 }}", "64 4 0.25 5.0");
  EXPECT("{{ 0.1 + 0.2 }} {{ 1e20 }} {{ 1e16 }} {{ 1e15 }} {{ 0.00001 }} {{ 1_000 }} {{ 0x1F }}",
         "0.30000000000000004 1e+20 1e+16 1000000000000000.0 1e-05 1000 31");
  EXPECT("{{ 'a' ~ 1 ~ none ~ true ~ [1, 'x'] ~ {'k': 'v'} ~ (1,) }}", "a1NoneTrue[1, 'x']{'k': 'v'}(1,)");
  EXPECT("{{ 'a' + 'b' }} {{ [1] + [2] }} {{ 'ab' * 2 }}", "ab [1, 2] abab");
  EXPECT("{{ \"q\\\"\\n\\t\\\\\\x41\\u00e9\\101\" }}", "q\"\n\t\\A\xc3\xa9" "A");
  EXPECT("{{ 'adj' 'acent' }}", "adjacent");
  EXPECT("{{ 1 < 2 < 3 }} {{ 1 < 3 < 2 }} {{ 1 == 1.0 }} {{ (1, 2) == [1, 2] }}", "True False True False");
  EXPECT("{{ 'b' in 'abc' }} {{ 2 in [1, 2] }} {{ 'k' in {'k': 1} }} {{ 'z' not in 'abc' }}", "True True True True");
  EXPECT("{{ 0 or 'x' }} {{ 1 and 'y' }} {{ not none }}", "x y True");
  EXPECT("{{ 'y' if true else 'n' }} [{{ 'y' if false }}] {{ 1 if 0 else 2 if 0 else 3 }}", "y [] 3");
  EXPECT("{{ [1, 2,] }} {{ 'x', 1 }}", "[1, 2] ('x', 1)");
}

static void test_variables_and_scopes(void) {
  /* A set inside a loop lasts one iteration; namespaces carry state out. */
  EXPECT("{% set x = 1 %}{% for i in range(3) %}{{ x }}{% set x = x + i %}{{ x }},{% endfor %}{{ x }}",
         "11,12,13,1");
  EXPECT("{% set ns = namespace(n=0) %}{% for i in range(4) %}{% set ns.n = ns.n + i %}{% endfor %}{{ ns.n }}", "6");
  EXPECT("{% set a, b = 1, 2 %}{{ a }}{{ b }}", "12");
  EXPECT("{% set t %}in {{ 1 + 1 }}{% endset %}[{{ t }}]{% set u | upper %}x{% endset %}{{ u }}", "[in 2]X");
  EXPECT("[{{ nope }}][{{ nope is defined }}][{{ nope | default('d') }}][{{ '' | default('e', true) }}]",
         "[][False][d][e]");
  EXPECT("{{ messages[0]['role'] }} {{ messages[-1].content }} {{ messages | length }} {{ messages[1:] | length }}",
         "system Bye 4 3");
  EXPECT("{{ add_generation_prompt }} {{ bos_token }}{{ eos_token }} {{ tools }} {{ documents is none }}",
         "True <s></s> None True");
  EXPECT("{{ none.x }}|{{ messages[0].nope }}|{{ messages[9] is defined }}", "||False");
}

static void test_loops(void) {
  EXPECT("{% for m in messages %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}{{ loop.first }}"
         "{{ loop.last }}{{ loop.length }};{% endfor %}",
         "104TrueFalse4;213FalseFalse4;322FalseFalse4;431FalseTrue4;");
  EXPECT("{% for m in messages if m.role == 'user' %}{{ loop.index }}/{{ loop.length }}{{ m.content }} {% endfor %}",
         "1/2Hi 2/2Bye ");
  EXPECT("{% for x in [] %}x{% else %}empty{% endfor %}", "empty");
  EXPECT("{% for k, v in {'a': 1, 'b': 2}.items() %}{{ k }}={{ v }};{% endfor %}", "a=1;b=2;");
  EXPECT("{% for c in 'h\xc3\xa9' %}[{{ c }}]{% endfor %}", "[h][\xc3\xa9]");
  EXPECT("{% for i in range(10) %}{% if i == 2 %}{% continue %}{% endif %}{% if i == 5 %}{% break %}{% endif %}"
         "{{ i }}{% endfor %}",
         "0134");
  EXPECT("{% for i in range(3) %}{{ loop.previtem }}-{{ loop.nextitem }}|{% endfor %}", "-1|0-2|1-|");
  EXPECT("{% for x in 'abc' %}{{ loop.cycle('o', 'e') }}{% endfor %}", "oeo");
}

static void test_macros(void) {
  EXPECT("{% macro g(name, greeting='Hello') %}{{ greeting }}, {{ name }}!{% endmacro %}{{ g('A') }} "
         "{{ g('B', greeting='Hi') }} {{ g() }}",
         "Hello, A! Hi, B! Hello, !");
  EXPECT("{% set g = 'top' %}{% macro m() %}{{ g }}{% set g = 'in' %}{{ g }}{% endmacro %}{{ m() }}{{ g }}",
         "topintop");
  EXPECT("{% macro f(n) %}{% if n <= 1 %}1{% else %}{{ n * (f(n - 1) | int) }}{% endif %}{% endmacro %}{{ f(5) }}",
         "120");
}

static void test_filters(void) {
  EXPECT("{{ '  x  ' | trim }}|{{ 'Hi' | upper }}|{{ 'Hi' | lower }}|{{ 'hI yo' | capitalize }}|{{ \"it's a-b\" | title }}",
         "x|HI|hi|Hi yo|It's A-B");
  EXPECT("{{ [1, 2] | join(', ') }}|{{ messages | map(attribute='role') | join(',') }}|{{ 'h\xc3\xa9' | length }}",
         "1, 2|system,user,assistant,user|2");
  EXPECT("{{ [3, 1, 2] | sort }}|{{ ['b', 'A', 'c'] | sort }}|{{ [1, 2, 2] | unique | list }}|{{ [3, 1] | min }}",
         "[1, 2, 3]|['A', 'b', 'c']|[1, 2]|1");
  EXPECT("{{ [1, 2] | first }}|{{ [1, 2] | last }}|{{ 'ab' | list }}|{{ 'ab' | reverse }}|{{ {'b': 1, 'a': 2} | dictsort }}",
         "1|2|['a', 'b']|ba|[('a', 2), ('b', 1)]");
  EXPECT("{{ 'a-b' | replace('-', '+') }}|{{ '42' | int + 1 }}|{{ 'x' | int }}|{{ '2.5' | float }}|{{ 2.5 | round }}",
         "a+b|43|0|2.5|2.0");
  EXPECT("{{ messages | selectattr('role', 'equalto', 'user') | list | length }}|"
         "{{ [0, 1, ''] | select | list }}|{{ ['a'] | map('upper') | list }}",
         "2|[1]|['A']");
  EXPECT("{{ {'a': [1, 2.5, true, none, 'x\"\\n\xc3\xbc']} | tojson }}", "{\"a\": [1, 2.5, true, null, \"x\\\"\\n\xc3\xbc\"]}");
  EXPECT("{{ {'b': [1]} | tojson(indent=2) }}", "{\n  \"b\": [\n    1\n  ]\n}");
  EXPECT("{{ 'a\\nb' | indent(2) }}|{{ 'a\\nb' | indent(2, true) }}", "a\n  b|  a\n  b");
  EXPECT("{{ '<p>' | safe + '<q>' }}|{{ '<b>' | e }}", "<p>&lt;q&gt;|&lt;b&gt;");
  EXPECT("{% filter upper %}up {{ 'x' }}{% endfilter %}", "UP X");
}

static void test_tests(void) {
  EXPECT("{{ none is none }}{{ 1 is number }}{{ 'a' is string }}{{ {} is mapping }}{{ 'a' is iterable }}"
         "{{ 1 is iterable }}{{ nope is undefined }}{{ 3 is odd }}{{ 9 is divisibleby 3 }}{{ 1 is not string }}",
         "TrueTrueTrueTrueTrueFalseTrueTrueTrueTrue");
  EXPECT("{{ 'a' is in 'abc' }}{{ 2 is gt 1 }}{{ 'abc' is lower }}{{ range is callable }}{{ true is boolean }}",
         "TrueTrueTrueTrueTrue");
}

static void test_methods(void) {
  EXPECT("{{ ' a '.strip() }}|{{ 'xax'.lstrip('x') }}|{{ 'a,b'.split(',') }}|{{ ' a  b '.split() }}|"
         "{{ 'abc'.startswith('ab') }}|{{ 'abc'.endswith(('x', 'c')) }}|{{ 'aXa'.replace('a', 'b') }}",
         "a|ax|['a', 'b']|['a', 'b']|True|True|bXb");
  EXPECT("{{ '{} {}'.format('a', 1) }}|{{ '-'.join(['a', 'b']) }}|{{ 'hi there'.title() }}|{{ 'x'.find('y') }}",
         "a 1|a-b|Hi There|-1");
  EXPECT("{{ {'a': 1}.get('a') }}|{{ {'a': 1}.get('b') }}|{{ {'a': 1}.get('b', 2) }}|{{ messages[0].get('role') }}",
         "1|None|2|system");
  EXPECT("{{ 'h\xc3\xa9llo'[1] }}{{ 'h\xc3\xa9llo'[1:3] }}{{ 'h\xc3\xa9llo'[::-1] }}{{ [1, 2, 3][-2:] }}",
         "\xc3\xa9\xc3\xa9l" "oll\xc3\xa9h[2, 3]");
  EXPECT("{{ 'stra\xc3\x9f" "e'.upper() }}|{{ '\xce\xa3\xce\x91\xce\xa3'.lower() }}", "STRASSE|\xcf\x83\xce\xb1\xcf\x82");
  /* strftime_now sees the clock er__chat_set_now fixed. */
  EXPECT("{{ strftime_now('%d %b %Y') }}", "26 Jul 2024");
}

/* ---- real templates, quickly (chat_check.py compares all of them) -------- */

static void test_smollm2_template(void) {
  static const char src[] =
      "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ '<|im_start|>system\\n"
      "You are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\\n' }}{% endif %}"
      "{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}"
      "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";
  const er_chat_message m[] = {{"user", "What is 2+2?"}};
  char *out = NULL;
  CHECK_STATUS(render_n(src, strlen(src), m, 1, true, &out), ER_STATUS_OK);
  CHECK(out && !strcmp(out, "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging "
                            "Face<|im_end|>\n<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n"));
  free(out);
}

/* ---- built-in formats and the fallback ---------------------------------- */

static void builtin(er_chat_format f, bool agp, const char *want) {
  er_chat_template *t = NULL;
  CHECK_STATUS(er__chat_parse(NULL, 0, f, &t), ER_STATUS_OK);
  CHECK(er__chat_format(t) == f);
  char *out = NULL;
  size_t len = 0;
  CHECK_STATUS(er__chat_render(t, conv, ER_ARRAY_LEN(conv), agp, "<s>", "</s>", &out, &len), ER_STATUS_OK);
  bool same = out && !strcmp(out, want) && len == strlen(want);
  CHECK(same);
  if (!same) fprintf(stderr, "  got:  [%s]\n  want: [%s]\n", out ? out : "(none)", want);
  free(out);
  er__chat_free(t);
}

static void test_builtin_formats(void) {
  builtin(ER_CHAT_CHATML, true,
          "<|im_start|>system\nYou are terse.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
          "Hello!<|im_end|>\n<|im_start|>user\nBye<|im_end|>\n<|im_start|>assistant\n");
  builtin(ER_CHAT_LLAMA3, false,
          "<s><|start_header_id|>system<|end_header_id|>\n\nYou are terse.<|eot_id|><|start_header_id|>user"
          "<|end_header_id|>\n\nHi<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\nHello!<|eot_id|>"
          "<|start_header_id|>user<|end_header_id|>\n\nBye<|eot_id|>");
  builtin(ER_CHAT_GEMMA, true,
          "<s><start_of_turn>user\nYou are terse.\n\nHi<end_of_turn>\n<start_of_turn>model\nHello!<end_of_turn>\n"
          "<start_of_turn>user\nBye<end_of_turn>\n<start_of_turn>model\n");
}

static void test_fallback_by_markers(void) {
  /* Unsupported syntax, but the ChatML markers name the format. */
  static const char src[] = "{% include 'x' %}{{ '<|im_start|>' + m }}";
  er_chat_template *t = NULL;
  CHECK_STATUS(er__chat_parse(src, strlen(src), ER_CHAT_JINJA, &t), ER_STATUS_OK);
  CHECK(er__chat_format(t) == ER_CHAT_CHATML);
  char *out = NULL;
  size_t len;
  const er_chat_message m[] = {{"user", "x"}};
  CHECK_STATUS(er__chat_render(t, m, 1, false, NULL, NULL, &out, &len), ER_STATUS_OK);
  CHECK(out && !strcmp(out, "<|im_start|>user\nx<|im_end|>\n"));
  free(out);
  er__chat_free(t);
  /* Without markers the parse error stands. */
  t = NULL;
  CHECK_STATUS(er__chat_parse("{% include 'x' %}", 17, ER_CHAT_CHATML, &t), ER_STATUS_INVALID_ARGUMENT);
  CHECK(t == NULL);
  CHECK_MSG("line 1 column 4");
  CHECK_MSG("include");
  er__chat_free(NULL);
}

/* ---- bad input (TESTING.md 16c) ------------------------------------------ */

static void test_syntax_errors(void) {
  EXPECT_FAIL("{{ 'a' ", ER_STATUS_INVALID_ARGUMENT, "unterminated '{{' tag");
  EXPECT_FAIL("ok\n{% if true %}", ER_STATUS_INVALID_ARGUMENT, "line 2 column 4: 'if' block is never closed");
  EXPECT_FAIL("{# x", ER_STATUS_INVALID_ARGUMENT, "unterminated comment");
  EXPECT_FAIL("{{ 'a }}", ER_STATUS_INVALID_ARGUMENT, "unterminated string");
  EXPECT_FAIL("{% endif %}", ER_STATUS_INVALID_ARGUMENT, "unknown tag 'endif'");
  EXPECT_FAIL("{% frobnicate %}", ER_STATUS_INVALID_ARGUMENT, "unknown tag 'frobnicate'");
  EXPECT_FAIL("a\n  {{ x | no_such_filter }}", ER_STATUS_INVALID_ARGUMENT, "line 2 column 10: unknown filter 'no_such_filter'");
  EXPECT_FAIL("{{ x is no_such_test }}", ER_STATUS_INVALID_ARGUMENT, "unknown test 'no_such_test'");
  EXPECT_FAIL("{{ 1 + }}", ER_STATUS_INVALID_ARGUMENT, "unexpected '}}'");
  EXPECT_FAIL("{{ foo( }}", ER_STATUS_INVALID_ARGUMENT, "expected ')'");
  EXPECT_FAIL("{{ @ }}", ER_STATUS_INVALID_ARGUMENT, "unexpected character '@'");
  EXPECT_FAIL("{% break %}", ER_STATUS_INVALID_ARGUMENT, "'break' outside a for loop");
  EXPECT_FAIL("{% for x in y recursive %}{% endfor %}", ER_STATUS_INVALID_ARGUMENT, "recursive for loops");
  EXPECT_FAIL("{{ 99999999999999999999 }}", ER_STATUS_INVALID_ARGUMENT, "larger than 64 bits");
  /* jinja2 only fails on an unknown filter inside an if when it runs. */
  EXPECT("{% if false %}{{ x | no_such_filter }}{% endif %}ok", "ok");
  EXPECT_FAIL("{% if true %}{{ x | no_such_filter }}{% endif %}", ER_STATUS_INVALID_ARGUMENT, "unknown filter");
}

static void test_runtime_errors(void) {
  EXPECT_FAIL("{{ raise_exception('Conversation roles must alternate user/assistant') }}", ER_STATUS_INVALID_ARGUMENT,
              "raise_exception: Conversation roles must alternate user/assistant");
  EXPECT_FAIL("{{ nope.attr }}", ER_STATUS_INVALID_ARGUMENT, "'nope' is undefined");
  EXPECT_FAIL("{{ 1 + 'a' }}", ER_STATUS_INVALID_ARGUMENT, "unsupported operand type(s) for +: 'int' and 'str'");
  EXPECT_FAIL("{{ 1 / 0 }}", ER_STATUS_INVALID_ARGUMENT, "division by zero");
  EXPECT_FAIL("{{ [1].append(2) }}", ER_STATUS_INVALID_ARGUMENT, "unsafe");
  EXPECT_FAIL("{% set ns = namespace() %}{% set ns._x = 1 %}", ER_STATUS_INVALID_ARGUMENT, "underscore");
  EXPECT_FAIL("{% set s = 1 %}{% set s.a = 1 %}", ER_STATUS_INVALID_ARGUMENT, "not a namespace");
  EXPECT_FAIL("{% for x in none %}{% endfor %}", ER_STATUS_INVALID_ARGUMENT, "'NoneType' object is not iterable");
  EXPECT_FAIL("{{ 9223372036854775807 + 1 }}", ER_STATUS_INVALID_ARGUMENT, "integer overflow");
  EXPECT_FAIL("{{ nope | tojson }}", ER_STATUS_INVALID_ARGUMENT, "not JSON serializable");
  EXPECT_FAIL("{% macro m() %}{% endmacro %}{{ m(1) }}", ER_STATUS_INVALID_ARGUMENT, "takes not more than 0");
  /* An invalid UTF-8 template or message is rejected up front. */
  char *out = NULL;
  CHECK_STATUS(render_n("ab\xff", 3, conv, 1, false, &out), ER_STATUS_INVALID_ARGUMENT);
  CHECK_MSG("invalid UTF-8");
  const er_chat_message bad[] = {{"user", "caf\xc3"}};
  CHECK_STATUS(render_n("x", 1, bad, 1, false, &out), ER_STATUS_INVALID_ARGUMENT);
  CHECK_MSG("chat message 0");
  const er_chat_message norole[] = {{NULL, "x"}};
  CHECK_STATUS(render_n("x", 1, norole, 1, false, &out), ER_STATUS_INVALID_ARGUMENT);
  CHECK(out == NULL);
}

/* Each of these must stop with LIMIT naming its cap, quickly. */
static void expect_limit(const char *src, size_t len, const char *cap) {
  clock_t t0 = clock();
  char *out = NULL;
  CHECK_STATUS(render_n(src, len, conv, ER_ARRAY_LEN(conv), true, &out), ER_STATUS_LIMIT);
  CHECK(out == NULL);
  CHECK_MSG(cap);
  double secs = (double)(clock() - t0) / CLOCKS_PER_SEC;
  /* Bounded time: the step cap is about a second of work; allow for slow
   * sanitizer builds. */
  CHECK(secs < 60);
  if (secs >= 60) fprintf(stderr, "  %s took %.1f s\n", cap, secs);
  free(out);
}

static void test_caps(void) {
  /* Loops: nested huge ranges, one range past the sandbox's cap. */
  static const char nested[] = "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}";
  expect_limit(nested, strlen(nested), "ER_CHAT_MAX_STEPS");
  static const char huge[] = "{% for i in range(1000000000) %}x{% endfor %}";
  expect_limit(huge, strlen(huge), "ER_CHAT_MAX_RANGE");
  /* Exponential output, and output past the cap. */
  static const char doubling[] =
      "{% set ns = namespace(s='x') %}{% for i in range(64) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}{{ ns.s }}";
  expect_limit(doubling, strlen(doubling), "ER_CHAT_MAX_LIVE_BYTES");
  static const char big_out[] = "{% for i in range(100000) %}{{ 'x' * 1000 }}{% endfor %}";
  expect_limit(big_out, strlen(big_out), "ER_CHAT_MAX_OUTPUT_BYTES");
  /* Quadratic copying is bounded by the steps it is charged. */
  static const char quad[] =
      "{% set ns = namespace(s='') %}{% for i in range(100000) %}{% set ns.s = ns.s ~ 'abcdefghij' %}{% endfor %}";
  expect_limit(quad, strlen(quad), "ER_CHAT_MAX_STEPS");
  /* Recursion. */
  static const char rec[] = "{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}";
  expect_limit(rec, strlen(rec), "ER_CHAT_MAX_DEPTH");

  /* Deep nesting in the source: parentheses, blocks, unary operators. */
  char *src = malloc(1 << 21);
  size_t n = 0;
  n += (size_t)sprintf(src + n, "{{ ");
  for (int i = 0; i < 200; i++) src[n++] = '(';
  src[n++] = '1';
  for (int i = 0; i < 200; i++) src[n++] = ')';
  n += (size_t)sprintf(src + n, " }}");
  expect_limit(src, n, "ER_CHAT_MAX_DEPTH");
  n = 0;
  for (int i = 0; i < 200; i++) n += (size_t)sprintf(src + n, "{%% if true %%}");
  for (int i = 0; i < 200; i++) n += (size_t)sprintf(src + n, "{%% endif %%}");
  expect_limit(src, n, "ER_CHAT_MAX_DEPTH");
  n = (size_t)sprintf(src, "{{ ");
  for (int i = 0; i < 1000; i++) n += (size_t)sprintf(src + n, "not ");
  n += (size_t)sprintf(src + n, "1 }}");
  expect_limit(src, n, "ER_CHAT_MAX_DEPTH");
  /* A long flat operator chain parses, but evaluating it recurses. */
  n = (size_t)sprintf(src, "{{ 1");
  for (int i = 0; i < 5000; i++) n += (size_t)sprintf(src + n, " + 1");
  n += (size_t)sprintf(src + n, " }}");
  expect_limit(src, n, "ER_CHAT_MAX_FRAMES");
  /* More syntax nodes than the cap. */
  n = (size_t)sprintf(src, "{{ [");
  while (n < 900000) n += (size_t)sprintf(src + n, "1,");
  n += (size_t)sprintf(src + n, "] }}");
  expect_limit(src, n, "ER_CHAT_MAX_NODES");
  /* A template past the size cap. */
  memset(src, 'x', (1 << 20) + 1);
  expect_limit(src, (1 << 20) + 1, "ER_CHAT_MAX_TEMPLATE_BYTES");
  free(src);

  /* Too many messages. */
  size_t many = ER_CHAT_MAX_MESSAGES + 1;
  er_chat_message *m = calloc(many, sizeof *m);
  for (size_t i = 0; i < many; i++) m[i] = (er_chat_message){"user", "x"};
  char *out = NULL;
  CHECK_STATUS(render_n("x", 1, m, many, false, &out), ER_STATUS_LIMIT);
  CHECK_MSG("ER_CHAT_MAX_MESSAGES");
  free(m);
}

static void test_deep_values(void) {
  /* Values nested a hundred thousand deep: printing stops at the depth
   * cap, and freeing them takes no stack. */
  static const char deep[] =
      "{% set ns = namespace(x=[]) %}{% for i in range(100000) %}{% set ns.x = [ns.x] %}{% endfor %}{{ ns.x }}";
  expect_limit(deep, strlen(deep), "ER_CHAT_MAX_DEPTH");
  EXPECT("{% set ns = namespace(x=[]) %}{% for i in range(100000) %}{% set ns.x = [ns.x] %}{% endfor %}"
         "{{ ns.x | length }}",
         "1");
  /* A namespace holding itself is freed with the render. */
  EXPECT("{% set ns = namespace() %}{% set ns.me = ns %}{% set ns.list = [ns, ns] %}ok", "ok");
}

static void test_empty_and_null(void) {
  er_chat_template *t = NULL;
  CHECK_STATUS(er__chat_parse(NULL, 0, ER_CHAT_JINJA, &t), ER_STATUS_OK);
  CHECK(er__chat_format(t) == ER_CHAT_JINJA);
  char *out = NULL;
  size_t len = 9;
  CHECK_STATUS(er__chat_render(t, NULL, 0, true, NULL, NULL, &out, &len), ER_STATUS_OK);
  CHECK(out && out[0] == '\0' && len == 0);
  free(out);
  CHECK_STATUS(er__chat_render(t, NULL, 2, true, NULL, NULL, &out, &len), ER_STATUS_INVALID_ARGUMENT);
  er__chat_free(t);
  /* Templates over an empty conversation fail as jinja2 fails on them. */
  out = NULL;
  CHECK_STATUS(render_n("{{ messages[0]['role'] }}", 25, conv, 0, true, &out), ER_STATUS_INVALID_ARGUMENT);
  CHECK_MSG("undefined");
  CHECK_STATUS(render_n("[{{ bos_token }}]", 17, conv, 0, true, &out), ER_STATUS_OK);
  CHECK(out && !strcmp(out, "[<s>]"));
  free(out);
}

int main(int argc, char **argv) {
  static const er_test_case cases[] = {
      {"whitespace", test_whitespace},
      {"literals_and_operators", test_literals_and_operators},
      {"variables_and_scopes", test_variables_and_scopes},
      {"loops", test_loops},
      {"macros", test_macros},
      {"filters", test_filters},
      {"tests", test_tests},
      {"methods", test_methods},
      {"smollm2_template", test_smollm2_template},
      {"builtin_formats", test_builtin_formats},
      {"fallback_by_markers", test_fallback_by_markers},
      {"syntax_errors", test_syntax_errors},
      {"runtime_errors", test_runtime_errors},
      {"caps", test_caps},
      {"deep_values", test_deep_values},
      {"empty_and_null", test_empty_and_null},
  };
  return er_test_run(cases, ER_ARRAY_LEN(cases), argc, argv);
}
