/* replay.c - runs a libFuzzer target's LLVMFuzzerTestOneInput over files
 * and folders of inputs without libFuzzer: the corpus replay that ctest
 * runs in every build (tests/CMakeLists.txt). A crash or sanitizer report
 * fails the test; an input the target rejects is fine. */
#define _DEFAULT_SOURCE /* DT_DIR */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Inputs above this are not corpus files (libFuzzer runs use -max_len=65536). */
#define REPLAY_MAX_BYTES (64u << 20)

static int run_file(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    fprintf(stderr, "replay: cannot open %s\n", path);
    return -1;
  }
  struct stat st;
  if (fstat(fileno(f), &st) != 0 || st.st_size < 0 || (uint64_t)st.st_size > REPLAY_MAX_BYTES) {
    fprintf(stderr, "replay: %s is not a corpus file (over %u bytes or unreadable)\n", path, REPLAY_MAX_BYTES);
    fclose(f);
    return -1;
  }
  size_t n = (size_t)st.st_size;
  /* An exact-size copy, so a read past the input is a sanitizer report. */
  uint8_t *buf = malloc(n ? n : 1);
  if (!buf || fread(buf, 1, n, f) != n) {
    fprintf(stderr, "replay: cannot read %s\n", path);
    free(buf);
    fclose(f);
    return -1;
  }
  fclose(f);
  LLVMFuzzerTestOneInput(buf, n);
  free(buf);
  return 0;
}

int main(int argc, char **argv) {
  int files = 0, bad = 0;
  for (int i = 1; i < argc; i++) {
    struct stat st;
    if (stat(argv[i], &st) != 0) {
      fprintf(stderr, "replay: %s does not exist\n", argv[i]);
      bad++;
      continue;
    }
    if (!S_ISDIR(st.st_mode)) {
      bad += run_file(argv[i]) != 0;
      files++;
      continue;
    }
    struct dirent **names = NULL;
    int n = scandir(argv[i], &names, NULL, alphasort);
    for (int k = 0; k < n; k++) {
      if (names[k]->d_name[0] != '.') {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", argv[i], names[k]->d_name);
        printf("replay: %s\n", names[k]->d_name);
        fflush(stdout);
        bad += run_file(path) != 0;
        files++;
      }
      free(names[k]);
    }
    free(names);
  }
  printf("replay: %d inputs, %d unreadable\n", files, bad);
  return bad || files == 0 ? 1 : 0;
}
