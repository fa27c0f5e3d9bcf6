/* harness.h - a minimal test harness: CHECK macros that count and report,
 * and a summary whose last line is "N passed, N failed". */
#ifndef ER_TEST_HARNESS_H
#define ER_TEST_HARNESS_H

#include <stdio.h>
#include <string.h>

#include "edgerun.h"

extern int er_test_passed, er_test_failed;
extern const char *er_test_current;

#define CHECK(cond)                                                                  \
  do {                                                                               \
    if (cond) {                                                                      \
      er_test_passed++;                                                              \
    } else {                                                                         \
      er_test_failed++;                                                              \
      fprintf(stderr, "FAIL %s (%s:%d): %s\n", er_test_current, __FILE__, __LINE__, #cond); \
    }                                                                                \
  } while (0)

/* Checks that expr returns the expected status; prints the message. */
#define CHECK_STATUS(expr, want)                                                     \
  do {                                                                               \
    er_status got_ = (expr);                                                         \
    if (got_ == (want)) {                                                            \
      er_test_passed++;                                                              \
    } else {                                                                         \
      er_test_failed++;                                                              \
      fprintf(stderr, "FAIL %s (%s:%d): %s gave %s, expected %s: %s\n", er_test_current, \
              __FILE__, __LINE__, #expr, er_status_name(got_), er_status_name(want), \
              er_last_error());                                                      \
    }                                                                                \
  } while (0)

/* Checks that the last error message contains `needle`. */
#define CHECK_MSG(needle)                                                            \
  do {                                                                               \
    if (strstr(er_last_error(), (needle))) {                                         \
      er_test_passed++;                                                              \
    } else {                                                                         \
      er_test_failed++;                                                              \
      fprintf(stderr, "FAIL %s (%s:%d): message '%s' lacks '%s'\n", er_test_current,  \
              __FILE__, __LINE__, er_last_error(), (needle));                        \
    }                                                                                \
  } while (0)

typedef struct er_test_case {
  const char *name;
  void (*fn)(void);
} er_test_case;

/* Runs the cases (optionally only those whose name contains argv[1]) and
 * returns the process exit code. */
int er_test_run(const er_test_case *cases, size_t n, int argc, char **argv);

#endif
