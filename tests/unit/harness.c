/* harness.c - runs test cases and prints the summary line. */
#include "harness.h"

int er_test_passed, er_test_failed;
const char *er_test_current = "";

int er_test_run(const er_test_case *cases, size_t n, int argc, char **argv) {
  for (size_t i = 0; i < n; i++) {
    if (argc > 1 && !strstr(cases[i].name, argv[1])) continue;
    er_test_current = cases[i].name;
    int before = er_test_failed;
    cases[i].fn();
    printf("%s %s\n", er_test_failed == before ? "ok  " : "FAIL", cases[i].name);
  }
  printf("%d passed, %d failed\n", er_test_passed, er_test_failed);
  return er_test_failed ? 1 : 0;
}
