/* cmd-tokenize.c - edgerun tokenize: the token ids (and pieces) of a text,
 * as llama.cpp's llama-tokenize prints them. */
#include <stdlib.h>
#include <string.h>

#include "cli/cli-llm.h"

void er_cmd_tokenize_help(FILE *out) {
  fprintf(out,
          "usage: edgerun tokenize MODEL.gguf (TEXT | --file F) [--json] [--ids] [--no-special] [--parse-special]\n"
          "\n"
          "Prints each token as 'id -> 'piece'' (or a JSON object with ids and pieces).\n"
          "  --file F         tokenize the text of file F\n"
          "  --ids            print only the ids, as a list\n"
          "  --no-special     do not add BOS/EOS\n"
          "  --parse-special  special-token texts (<|im_start|>) become their tokens\n"
          "  --json           {\"ids\": [...], \"pieces\": [...]}\n");
}

int er_cmd_tokenize(int argc, char **argv) {
  const char *cmd = "tokenize", *model = NULL, *text_arg = NULL, *file = NULL;
  bool json = false, ids_only = false, add_special = true, parse_special = false;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (strcmp(a, "--file") == 0 || strcmp(a, "-f") == 0) {
      if (++i >= argc) return er_cli_fail(cmd, "--file needs a path");
      file = argv[i];
    } else if (strcmp(a, "--json") == 0) {
      json = true;
    } else if (strcmp(a, "--ids") == 0) {
      ids_only = true;
    } else if (strcmp(a, "--no-special") == 0) {
      add_special = false;
    } else if (strcmp(a, "--parse-special") == 0) {
      parse_special = true;
    } else if (a[0] == '-' && a[1]) {
      return er_cli_fail(cmd, "unknown option '%s' (see --help)", a);
    } else if (!model) {
      model = a;
    } else if (!text_arg) {
      text_arg = a;
    } else {
      return er_cli_fail(cmd, "unexpected argument '%s'", a);
    }
  }
  if (!model) return er_cli_fail(cmd, "no model given (see --help)");
  if (!text_arg == !file) return er_cli_fail(cmd, "give a TEXT or --file F");
  er_cli_llm lo;
  er_cli_llm_init(&lo);
  er_llm *llm = NULL;
  int rc = er_cli_llm_open(cmd, model, &lo, &llm, NULL);
  if (rc) return rc;
  char *text = NULL;
  size_t len = 0;
  if (file && (rc = er_cli_read_text(cmd, file, &text, &len))) goto done;
  int32_t *ids = NULL;
  size_t n = 0;
  if ((rc = er_cli_tokenize(cmd, llm, text ? text : text_arg, text ? len : strlen(text_arg), add_special,
                            parse_special, &ids, &n)))
    goto done;
  char piece[4096];
  if (json) printf("{\"ids\": [");
  else if (ids_only) printf("[");
  for (size_t i = 0; i < n; i++) {
    if (json || ids_only) {
      printf("%s%d", i ? ", " : "", ids[i]);
      continue;
    }
    size_t pl = 0;
    if (er_llm_token_piece(llm, ids[i], true, piece, sizeof piece - 1, &pl) != ER_STATUS_OK) pl = 0;
    piece[pl] = 0;
    printf("%6d -> '%s'\n", ids[i], piece);
  }
  if (json) {
    printf("], \"pieces\": [");
    for (size_t i = 0; i < n; i++) {
      size_t pl = 0;
      if (er_llm_token_piece(llm, ids[i], true, piece, sizeof piece - 1, &pl) != ER_STATUS_OK) pl = 0;
      piece[pl] = 0;
      if (i) printf(", ");
      er_cli_json_string(stdout, piece);
    }
    printf("], \"count\": %zu}\n", n);
  } else if (ids_only) {
    printf("]\n");
  }
  free(ids);
done:
  free(text);
  er_llm_free(llm);
  return rc;
}
