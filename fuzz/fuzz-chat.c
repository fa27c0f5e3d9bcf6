/* fuzz-chat.c - libFuzzer target for the chat-template interpreter
 * (src/llm/chat*.c): the bytes are a template, parsed and rendered over a
 * fixed conversation with and without the generation prompt. Any crash,
 * sanitizer report, leak or hang (the caps bound every render) is a bug;
 * errors are expected. */
#include <stdlib.h>

#include "llm/chat-impl.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static const er_chat_message conv[] = {
      {"system", "You are a helpful assistant."},
      {"user", "Hello! \"quoted\" {{ braces }} \xc3\xa9\xe2\x80\x94"},
      {"assistant", "<think>\nhmm\n</think>\n\nHi."},
      {"tool", "{\"temperature\": 21}"},
      {"user", ""},
  };
  er_chat_template *t = NULL;
  if (er__chat_parse((const char *)data, size, ER_CHAT_JINJA, &t) != ER_STATUS_OK) return 0;
  er__chat_set_now(t, 1721990096);
  for (int agp = 0; agp <= 1; agp++) {
    char *out = NULL;
    size_t len = 0;
    if (er__chat_render(t, conv, sizeof conv / sizeof conv[0], agp, "<s>", "</s>", &out, &len) == ER_STATUS_OK &&
        strlen(out) > len)
      abort(); /* the length must cover the text */
    free(out);
  }
  er__chat_free(t);
  return 0;
}
