/* serve_client.c - a lean C client for bench/serve_bench.py, so the numbers
 * measure the service and not a Python client.
 *
 *   serve_client inproc MODEL.onnx INPUT.npy N
 *       p50 of er_session_run on INPUT, in this process (microseconds)
 *   serve_client latency PORT MODEL INPUT.npy N
 *       p50 round trip of one binary-data infer request on a kept-alive
 *       loopback connection (microseconds)
 *   serve_client load PORT MODEL INPUT.npy CONCURRENCY SECONDS
 *       requests per second with CONCURRENCY kept-alive connections
 *
 * Each prints one line: "<metric> <value>". */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "edgerun.h"

static double now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static int cmp_d(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp_d);
  return v[n / 2];
}

static er_tensor *read_input(const char *path) {
  er_tensor *t = NULL;
  if (er_tensor_read_file(path, &t, NULL) != ER_STATUS_OK) {
    fprintf(stderr, "%s: %s\n", path, er_last_error());
    exit(1);
  }
  return t;
}

/* ---- HTTP ------------------------------------------------------------- */

typedef struct request {
  char *bytes;
  size_t len;
} request;

static request build(const char *model, const er_tensor *x) {
  char hdr[1024], shape[256] = "";
  size_t k = 0;
  for (int d = 0; d < er_tensor_rank(x); d++)
    k += (size_t)snprintf(shape + k, sizeof shape - k, "%s%lld", d ? "," : "",
                          (long long)er_tensor_dims(x)[d]);
  int hl = snprintf(hdr, sizeof hdr,
                    "{\"inputs\":[{\"name\":\"input\",\"datatype\":\"FP32\",\"shape\":[%s],"
                    "\"parameters\":{\"binary_data_size\":%zu}}],"
                    "\"parameters\":{\"binary_data_output\":true}}",
                    shape, er_tensor_nbytes(x));
  request r;
  size_t body = (size_t)hl + er_tensor_nbytes(x);
  r.bytes = malloc(body + 512);
  int n = snprintf(r.bytes, 512,
                   "POST /v2/models/%s/infer HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                   "Inference-Header-Content-Length: %d\r\nContent-Length: %zu\r\n\r\n",
                   model, hl, body);
  memcpy(r.bytes + n, hdr, (size_t)hl);
  memcpy(r.bytes + n + hl, er_tensor_cdata(x), er_tensor_nbytes(x));
  r.len = (size_t)n + body;
  return r;
}

static int connect_to(int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0), one = 1;
  struct sockaddr_in a = {0};
  a.sin_family = AF_INET;
  a.sin_port = htons((uint16_t)port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
    perror("connect");
    exit(1);
  }
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return fd;
}

/* Sends the request and reads one response; returns its status, 0 on a
 * closed connection. */
static int roundtrip(int fd, const request *r) {
  static _Thread_local char buf[1 << 16];
  size_t off = 0;
  while (off < r->len) {
    ssize_t w = write(fd, r->bytes + off, r->len - off);
    if (w <= 0) return 0;
    off += (size_t)w;
  }
  size_t have = 0;
  char *end = NULL;
  while (!end) {
    ssize_t n = read(fd, buf + have, sizeof buf - 1 - have);
    if (n <= 0) return 0;
    have += (size_t)n;
    buf[have] = '\0';
    end = strstr(buf, "\r\n\r\n");
  }
  int status = atoi(buf + 9);
  char *cl = strcasestr(buf, "Content-Length:");
  size_t body = cl ? (size_t)strtoull(cl + 15, NULL, 10) : 0;
  size_t got = have - (size_t)(end + 4 - buf);
  while (got < body) {
    ssize_t n = read(fd, buf, sizeof buf);
    if (n <= 0) return 0;
    got += (size_t)n;
  }
  return status;
}

typedef struct load_arg {
  int port;
  const request *req;
  double until;
  long done, failed;
} load_arg;

static void *load_main(void *p) {
  load_arg *a = p;
  int fd = connect_to(a->port);
  while (now_us() < a->until) {
    int st = roundtrip(fd, a->req);
    if (st == 200) a->done++;
    else a->failed++;
    if (st == 0) {
      close(fd);
      fd = connect_to(a->port);
    }
  }
  close(fd);
  return NULL;
}

int main(int argc, char **argv) {
  if (argc >= 5 && strcmp(argv[1], "inproc") == 0) {
    er_model *m;
    er_session *s;
    er_tensor *x = read_input(argv[3]), *y;
    int n = atoi(argv[4]);
    if (er_model_load_file(argv[2], NULL, &m) != ER_STATUS_OK ||
        er_session_create(m, NULL, &s) != ER_STATUS_OK) {
      fprintf(stderr, "%s\n", er_last_error());
      return 1;
    }
    er_value_info in;
    er_model_input_info(m, 0, &in);
    er_named_tensor nt = {in.name, x};
    double *t = malloc(sizeof(double) * (size_t)n);
    for (int i = 0; i < n + 100; i++) {
      double t0 = now_us();
      if (er_session_run(s, &nt, 1, NULL, 1, &y) != ER_STATUS_OK) return 1;
      er_tensor_free(y);
      if (i >= 100) t[i - 100] = now_us() - t0;   /* after warm-up */
    }
    printf("inproc_p50_us %.1f\n", median(t, n));
    return 0;
  }
  if (argc >= 6 && strcmp(argv[1], "latency") == 0) {
    er_tensor *x = read_input(argv[4]);
    request r = build(argv[3], x);
    int n = atoi(argv[5]), fd = connect_to(atoi(argv[2]));
    double *t = malloc(sizeof(double) * (size_t)n);
    for (int i = 0; i < n + 100; i++) {
      double t0 = now_us();
      if (roundtrip(fd, &r) != 200) {
        fprintf(stderr, "request failed\n");
        return 1;
      }
      if (i >= 100) t[i - 100] = now_us() - t0;
    }
    printf("http_p50_us %.1f\n", median(t, n));
    return 0;
  }
  if (argc >= 7 && strcmp(argv[1], "load") == 0) {
    er_tensor *x = read_input(argv[4]);
    request r = build(argv[3], x);
    int c = atoi(argv[5]);
    double secs = atof(argv[6]);
    load_arg *a = calloc((size_t)c, sizeof *a);
    pthread_t *th = calloc((size_t)c, sizeof *th);
    double t0 = now_us();
    for (int i = 0; i < c; i++) {
      a[i].port = atoi(argv[2]);
      a[i].req = &r;
      a[i].until = t0 + secs * 1e6;
      pthread_create(&th[i], NULL, load_main, &a[i]);
    }
    long done = 0, failed = 0;
    for (int i = 0; i < c; i++) {
      pthread_join(th[i], NULL);
      done += a[i].done;
      failed += a[i].failed;
    }
    printf("rps %.1f failed %ld\n", done / ((now_us() - t0) / 1e6), failed);
    return 0;
  }
  fprintf(stderr, "usage: see the comment at the top of bench/serve_client.c\n");
  return 2;
}
