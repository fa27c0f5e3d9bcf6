/* serve.h - internals of `edgerun serve`, the local inference service.
 *
 * The service is built on the library's public API (edgerun.h) only. It is
 * split by concern:
 *   serve.c    start-up, signals, privilege drop, drain, the main loop
 *   http.c     libmicrohttpd handlers: routing, security, limits, watchdog
 *   kserve.c   KServe v2 tensors: JSON and binary-data decode and encode
 *   repo.c     the model repository: config.json, versions, load, swap
 *   sched.c    per-model queues, worker threads and dynamic batching
 *   llm.c      LLM versions: the decode loop with continuous batching
 *   openai.c   the OpenAI-compatible endpoints (/v1/...) on llm.c
 *   metrics.c  counters, histograms, Prometheus text, status series, thermal
 *   log.c      JSON-lines logs with size-based rotation
 *   sign.c     Ed25519 signatures of model files (libsodium)
 *   util.c     string builder, clocks, error-text sanitizing
 *
 * Lifetimes, in one place: the server owns every er__model for its whole run
 * (models are never freed before shutdown, so a pointer to one stays valid
 * in any thread). An er__version is reference counted: the model's live table
 * holds one reference and every queued or running job holds one; the last
 * release frees its session and model.
 */
#ifndef ER_SERVE_H
#define ER_SERVE_H

#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "edgerun.h"

/* ---- limits (each appears in the error message that enforces it) ------- */
#define ER_SERVE_MAX_NAME 64          /* bytes in a model name */
#define ER_SERVE_MAX_IO 64            /* inputs or outputs of a served model */
#define ER_SERVE_MAX_VERSIONS 32      /* version folders considered per model */
#define ER_SERVE_MAX_MODELS 64        /* models in one repository */
#define ER_SERVE_MAX_INSTANCES 16     /* concurrent runs per model */
#define ER_SERVE_MAX_BATCH 1024       /* rows in one merged run */
#define ER_SERVE_MAX_QUEUE 65536      /* queued requests per model */
#define ER_SERVE_MAX_ALLOW 32         /* --allow CIDR entries */
#define ER_SERVE_MAX_KEYS 8           /* --trusted-key files */
#define ER_SERVE_MAX_CHANNELS 16      /* preprocessing mean/std entries */
#define ER_SERVE_MAX_ZONES 16         /* thermal zones read */
#define ER_SERVE_MAX_CONFIG_BYTES (1u << 20) /* config.json size */
#define ER_SERVE_ERR 256              /* bytes of an error message */

/* ---- small utilities (util.c) ------------------------------------------ */

/* A growable string; on allocation failure `oom` is set and appends stop. */
typedef struct er__sb {
  char *p;
  size_t len, cap;
  bool oom;
} er__sb;

void er__sb_put(er__sb *sb, const void *data, size_t n);
void er__sb_puts(er__sb *sb, const char *s);
void er__sb_printf(er__sb *sb, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Appends s as a JSON string literal, quotes included. */
void er__sb_json_str(er__sb *sb, const char *s);
void er__sb_free(er__sb *sb);

int64_t er__now_us(void);            /* CLOCK_MONOTONIC, microseconds */
double er__wall_s(void);             /* CLOCK_REALTIME, seconds */
/* Copies text into out with every absolute path cut to its last component,
 * so an error body never shows the layout of the device's file system. */
void er__sanitize(const char *text, char *out, size_t size);
/* True for [A-Za-z0-9_.-]{1,ER_SERVE_MAX_NAME} not starting with '.'. */
bool er__valid_name(const char *s);

/* ---- logs (log.c) ------------------------------------------------------ */

enum { ER__LOG_DEBUG, ER__LOG_INFO, ER__LOG_WARN, ER__LOG_ERROR };

/* Logs go to DIR/edgerun.log (rotated at max_bytes to .1 ... .keep) or to
 * stderr when dir is NULL. Returns false with a message in err. */
bool er__log_open(const char *dir, uint64_t max_bytes, int keep, int min_level, char *err,
                  size_t errsz);
void er__log_close(void);
/* One JSON line: ts, level, event, msg, then the members of `fields` (owned
 * by the call: it is decref'd; may be NULL). Thread-safe. */
void er__serve_log(int level, const char *event, json_t *fields, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* ---- signatures (sign.c) ----------------------------------------------- */

#define ER_SIGN_SUFFIX ".sig"
/* Key files are one line of text: "edgerun-ed25519-public <base64>" or
 * "edgerun-ed25519-secret <base64>". */
bool er__sign_keygen(const char *secret_path, const char *public_path, char *err, size_t errsz);
bool er__sign_file(const char *secret_key_path, const char *file, char *err, size_t errsz);
/* Verifies `data` (the bytes of `name`, which is used in messages only)
 * against the signature text `sig` with any of the public keys. */
bool er__sign_verify_bytes(const unsigned char (*keys)[32], int n_keys, const void *data,
                           size_t size, const char *sig_path, char *err, size_t errsz);
/* Streams `file` and checks FILE.sig with any of the keys. */
bool er__sign_verify_file(const unsigned char (*keys)[32], int n_keys, const char *file,
                          char *err, size_t errsz);
bool er__sign_load_public(const char *path, unsigned char key_out[32], char *err, size_t errsz);

/* ---- options and configuration ----------------------------------------- */

typedef struct er__cidr {
  int family;                /* AF_INET or AF_INET6 */
  unsigned char addr[16];
  int bits;
} er__cidr;

typedef struct er__serve_options {
  const char *repo;          /* borrowed from argv */
  char host[64];             /* numeric address to bind */
  int port;
  bool loopback;             /* the bound address is a loopback address */
  er__cidr allow[ER_SERVE_MAX_ALLOW];
  int n_allow;
  char *api_key;             /* owned; NULL = no key */
  const char *user;          /* drop to this user after binding */
  bool require_signed;
  unsigned char keys[ER_SERVE_MAX_KEYS][32];
  int n_keys;
  uint64_t max_body_bytes;   /* whole request body */
  uint64_t max_json_bytes;   /* the JSON part of a request */
  int header_timeout_ms;     /* connection start (or last response) to full headers */
  int body_timeout_ms;       /* headers to full body */
  int max_connections;
  int http_threads;
  int poll_s;                /* repository poll interval; 0 = SIGHUP only */
  int drain_timeout_s;
  const char *log_dir;
  uint64_t log_max_bytes;
  int log_keep;
  int log_level;
  bool access_log;
  const char *thermal_dir;   /* default /sys/class/thermal */
  double thermal_limit_c;    /* throttle above this */
  double thermal_resume_c;   /* restore below this */
  bool thermal_configured;
} er__serve_options;

enum { ER__POLICY_LATEST, ER__POLICY_ALL, ER__POLICY_SPECIFIC };

#define ER_SERVE_MAX_SLOTS 64         /* parallel sequences of one LLM */
#define ER_SERVE_MAX_STOP 16          /* stop strings of one request */
#define ER_SERVE_MAX_MESSAGES 256     /* messages of one chat request */

/* The LLM part of config.json (used when the version is a model.gguf). */
typedef struct er__llm_config {
  int64_t ctx;               /* positions per sequence; 0 = min(training context, 4096) */
  int slots;                 /* sequences decoded together (continuous batching) */
  int kv_type;               /* er_llm_kv_type */
  int n_batch;               /* tokens per forward pass at most */
  int64_t max_prompt_tokens; /* 0 = the context less one */
  int64_t max_tokens;        /* new tokens per request at most (and the default); 0 = to the context's end */
  bool prefix_cache;         /* reuse a slot's cached prompt prefix */
  bool log_prompts;          /* request logs carry the prompt text */
  er_llm_sampler_options sampling; /* defaults for fields a request leaves out */
} er__llm_config;

/* REPO/<model>/config.json, with defaults for what it leaves out. */
typedef struct er__model_config {
  char backends[4][16];      /* preferred backends, in order */
  int n_backends;
  int threads;               /* threads per run */
  bool allow_fallback;       /* nodes an accelerator cannot run go to the CPU */
  int instances;             /* runs at once */
  int max_batch;             /* rows per merged run; 1 = no batching */
  int64_t batch_delay_us;    /* longest wait for a batch to fill */
  int64_t timeout_ms;        /* request deadline, queue + run */
  int queue_size;            /* queued requests before 429 */
  int policy;
  int latest_n;
  int64_t specific[ER_SERVE_MAX_VERSIONS];
  int n_specific;
  int warmup_runs;
  /* Optional preprocessing of one float input: y = (x * scale - mean[c]) / std[c]
   * along channel_axis. It also lets clients send UINT8 pixels. */
  bool pre;
  char pre_input[ER_SERVE_MAX_NAME + 1];
  float pre_scale;
  float pre_mean[ER_SERVE_MAX_CHANNELS], pre_std[ER_SERVE_MAX_CHANNELS];
  int pre_channels;
  int pre_axis;
  bool threads_given, timeout_given; /* for the LLM defaults (all cores, 5 minutes) */
  er__llm_config llm;
} er__model_config;

void er__config_defaults(er__model_config *cfg);
/* Parses config.json text; false with a message naming the field. */
bool er__config_parse(const char *text, size_t len, er__model_config *cfg, char *err,
                      size_t errsz);

/* ---- metrics (metrics.c) ----------------------------------------------- */

#define ER__LAT_BUCKETS 14
#define ER__BATCH_BUCKETS 11
#define ER__CODES 12         /* 200 400 401 403 404 405 413 415 429 500 503 other */

typedef struct er__model_metrics {
  atomic_ullong requests[ER__CODES];
  atomic_ullong lat_bucket[ER__LAT_BUCKETS + 1]; /* last = +Inf */
  atomic_ullong lat_sum_us, lat_count;
  atomic_ullong batch_bucket[ER__BATCH_BUCKETS + 1];
  atomic_ullong batch_sum, batch_count;
  atomic_int inflight;       /* accepted, not yet answered */
  /* LLMs (llm.c); time buckets in seconds as lat_le */
  atomic_ullong prompt_tokens, gen_tokens, reused_tokens;
  atomic_ullong ttft_bucket[ER__LAT_BUCKETS + 1], ttft_sum_us, ttft_count;
  atomic_ullong tpot_bucket[ER__LAT_BUCKETS + 1], tpot_sum_us, tpot_count;
  atomic_ullong finish[4];   /* stop, length, cancelled, error */
  atomic_int active, queued; /* sequences decoding now, requests waiting for a slot */
  atomic_llong kv_used, kv_total; /* positions held / positions of the cache */
  atomic_ullong kv_bytes;
  atomic_ullong gen_this_second; /* for the status series */
} er__model_metrics;

int er__code_index(int http_status);
void er__metrics_request(er__model_metrics *m, int http_status, int64_t latency_us);
void er__metrics_batch(er__model_metrics *m, int rows);
/* Adds one observation (microseconds) to a histogram with lat_le's buckets. */
void er__metrics_time(atomic_ullong *bucket, atomic_ullong *sum_us, atomic_ullong *count, int64_t us);

/* ---- the repository, versions and jobs (repo.c, sched.c) --------------- */

typedef struct er__server er__server;
typedef struct er__model er__model;

typedef struct er__llm_engine er__llm_engine;

typedef struct er__version {
  atomic_int refs;
  er__model *owner;
  int64_t number;
  er_model *model;
  er_session *session;
  er_llm *llm;               /* a model.gguf version: the LLM and its engine */
  er__llm_engine *engine;
  size_t n_in, n_out;
  er_value_info in[ER_SERVE_MAX_IO], out[ER_SERVE_MAX_IO]; /* owned by model */
  bool batchable;            /* every input and output has a dynamic dim 0 */
  double load_seconds;
} er__version;

void er__version_ref(er__version *v);
void er__version_unref(er__version *v);

enum { ER__VS_LOADING, ER__VS_READY, ER__VS_UNAVAILABLE };

typedef struct er__seen_version {
  int64_t number;
  int state;
  char reason[ER_SERVE_ERR];
  int64_t stamp;             /* mtime ns ^ size of model.onnx at the failed try */
} er__seen_version;

typedef struct er__job {
  struct er__job *next;
  er__version *ver;          /* one reference held */
  er_tensor *in[ER_SERVE_MAX_IO]; /* ver->in order; owned */
  int64_t rows;              /* dim 0 of every input (batchable models) */
  size_t n_out;
  int out_idx[ER_SERVE_MAX_IO]; /* requested outputs, indices into ver->out */
  er_tensor *out[ER_SERVE_MAX_IO]; /* results, owned */
  int64_t t_enqueue, deadline; /* microseconds, monotonic */
  int status;                /* HTTP status of the result */
  char err[ER_SERVE_ERR];
  int batch_rows;            /* rows of the run this job was part of */
  void (*done)(struct er__job *job, void *arg); /* called once, any thread */
  void *arg;
} er__job;

void er__job_free(er__job *job);

struct er__model {
  char name[ER_SERVE_MAX_NAME + 1];
  er__server *srv;
  pthread_mutex_t lock;      /* guards everything below but the metrics */
  er__model_config cfg;
  char cfg_error[ER_SERVE_ERR];
  int64_t cfg_stamp;
  er__version *live[ER_SERVE_MAX_VERSIONS]; /* ready versions, highest first */
  int n_live;
  er__seen_version seen[ER_SERVE_MAX_VERSIONS];
  int n_seen;
  bool loading;              /* a load of this model is running */
  bool admin_unloaded;       /* unloaded through the API; polls leave it so */
  int64_t pinned;            /* version chosen through the load API; 0 = policy */
  bool gone;                 /* its folder left the repository */
  /* scheduler (sched.c) */
  pthread_cond_t q_cond;
  er__job *q_head, *q_tail;
  int q_len;
  int64_t q_rows;            /* rows of the queued jobs (a rowless job counts 1) */
  int busy;                  /* jobs being run */
  double job_us;             /* moving average of run time per job */
  pthread_t workers[ER_SERVE_MAX_INSTANCES];
  int n_workers;
  atomic_int arriving;       /* infer requests past their headers, not yet queued */
  int idle;                  /* workers waiting on q_cond */
  int wakes;                 /* q_cond signals sent and not yet taken up */
  /* At most one worker at a time gathers a batch (waits for it to fill);
   * it sleeps on fill_cond and is woken only when the queue holds enough
   * rows to fill it (q_rows >= fill_rows) or at its deadline, so a request
   * joining a batch costs no thread wake-up. */
  bool collecting;
  pthread_cond_t fill_cond;
  int64_t fill_rows;         /* q_rows that fill the gatherer's batch */
  bool stop;
  er__model_metrics m;
};

/* A load request from the API, answered by the loader thread. */
typedef struct er__load_task {
  struct er__load_task *next;
  er__model *model;
  int64_t version;           /* 0 = by policy */
  int status;                /* HTTP status, set when done */
  char err[ER_SERVE_ERR];
  void (*done)(struct er__load_task *task, void *arg);
  void *arg;
} er__load_task;

/* Queues a task for the loader thread; wakes it. */
void er__loader_post(er__server *srv, er__load_task *task);
/* Asks the loader thread for a rescan (SIGHUP, poll). */
void er__loader_rescan(er__server *srv);
bool er__loader_start(er__server *srv);
void er__loader_stop(er__server *srv);

/* Scans the repository: finds models, reads configs, loads and swaps
 * versions. Runs on the loader thread only. */
void er__repo_scan(er__server *srv);
/* The load/unload API. `version` 0 = by policy. Returns an HTTP status and
 * an error message for non-200. Load runs on the loader thread. */
int er__repo_load(er__server *srv, er__model *m, int64_t version, char *err, size_t errsz);
void er__repo_unload(er__server *srv, er__model *m);
/* Lists version folder numbers of REPO/<model> with a model.onnx or a
 * model.gguf, highest
 * first; used by the service and `edgerun repo`. */
int er__repo_versions(const char *repo, const char *model, int64_t *out, int max);
/* Loads one version completely (verify, load, session, warm-up); used by
 * the service and `edgerun repo rollback` to tell a good version. */
er__version *er__version_load(const char *repo, const char *model, int64_t number,
                              const er__model_config *cfg, const er__serve_options *opt,
                              er__model *owner, er__server *srv, char *err, size_t errsz);
bool er__config_read(const char *repo, const char *model, er__model_config *cfg, int64_t *stamp,
                     char *err, size_t errsz);

er__model *er__server_find(er__server *srv, const char *name);
/* Takes a reference to the version a request names (0 = highest live) and,
 * when cfg_out is not NULL, copies the model's config under the same lock
 * (one lock per request instead of two). On failure returns NULL with an
 * HTTP status and message. */
er__version *er__model_acquire(er__model *m, int64_t version, er__model_config *cfg_out,
                               int *status, char *err, size_t errsz);

/* Starts a model's workers; stops and joins them (answering queued jobs). */
bool er__sched_start(er__model *m, int instances);
void er__sched_stop(er__model *m);
/* Queues a job or refuses it at once: returns 0 when queued (on_accept ran
 * first, under the queue's lock, and done() will be called), else the HTTP
 * status (429/503) with a message; the job is then untouched. */
int er__sched_submit(er__model *m, er__job *job, void (*on_accept)(void *arg), void *arg,
                     char *err, size_t errsz);
/* Wakes every model's workers (after a throttle change or at drain). */
void er__sched_kick(er__server *srv);

/* ---- the server --------------------------------------------------------- */

typedef struct er__thermal {
  int n;
  char name[ER_SERVE_MAX_ZONES][32];
  double celsius[ER_SERVE_MAX_ZONES];
  double max_c;
} er__thermal;

#define ER__SERIES 300        /* seconds of history on the status page */

typedef struct er__sample {
  double t;                  /* wall clock seconds */
  double rps, p50_ms, p95_ms, p99_ms;
  double tok_s, ttft_ms;     /* LLMs: tokens generated in the second, mean TTFT of the second */
  int queue;
  double rss_mb, temp_c;
} er__sample;

struct er__server {
  er__serve_options opt;
  struct MHD_Daemon *daemon;
  int listen_fd;
  double start_wall;
  pthread_mutex_t lock;      /* guards models[] append and the series */
  er__model *models[ER_SERVE_MAX_MODELS];
  atomic_int n_models;
  atomic_bool scanned;       /* the first repository scan has finished */
  atomic_bool draining;
  atomic_int inflight;       /* requests accepted and not yet answered */
  atomic_int answering;      /* inference requests accepted whose response is not yet
                                completely sent (or abandoned by the client) */
  atomic_bool throttled;     /* device too hot: fewer runs, smaller batches */
  atomic_ullong http_codes[ER__CODES];
  /* loader thread: runs scans and the load API's requests one at a time */
  pthread_t loader;
  struct er__load_task *tasks;
  pthread_mutex_t load_lock;
  pthread_cond_t load_cond;
  bool rescan_wanted, loader_stop;
  /* monitor thread: thermal, process samples, status series */
  pthread_t monitor;
  er__thermal thermal;
  er__sample series[ER__SERIES];
  int series_len, series_pos;
  double cpu_seconds;
  uint64_t rss_bytes;
  atomic_llong drain_start_us; /* when the drain began (0 = not draining) */
  /* latency samples of the current second (all models), for percentiles */
  pthread_mutex_t lat_lock;
  uint32_t lat_us[4096];
  int lat_n;
  unsigned long long lat_seen;
  unsigned long long done_this_second;
  /* connection watchdog (http.c) */
  pthread_t watchdog;
  void *conns;               /* http.c's list of tracked connections */
  pthread_mutex_t conn_lock;
  atomic_bool stopping;
};

void er__server_note_latency(er__server *srv, int64_t latency_us);
void er__metrics_write(er__server *srv, er__sb *out);
void er__status_json(er__server *srv, er__sb *out);
void er__monitor_sample(er__server *srv);  /* once a second */
void er__thermal_read(const char *dir, er__thermal *t);

/* http.c */
/* True when the server should take traffic; else `why` says what is missing. */
bool er__server_ready(er__server *srv, char *why, size_t n);
unsigned long long er__http_conn_timeouts(void);
bool er__http_start(er__server *srv, char *err, size_t errsz);
void er__http_stop(er__server *srv);

/* kserve.c: request decoding and response encoding. */
typedef struct er__infer_req {
  char id[128];
  bool binary_all;           /* parameters.binary_data_output */
  bool out_binary[ER_SERVE_MAX_IO];
} er__infer_req;

/* Decodes an infer request body into job->in and job->out_idx. `hdr_len` is
 * the Inference-Header-Content-Length value or -1. Returns 0, or an HTTP
 * status (400, 413) with a message. */
int er__kserve_decode(const er__version *ver, const er__model_config *cfg, const char *body,
                       size_t len, int64_t hdr_len, uint64_t max_json, er__job *job,
                       er__infer_req *req, char *err, size_t errsz);
/* Encodes the response; *json_len_out is the JSON part's length when any
 * output is binary (else -1). */
bool er__kserve_encode(const er__version *ver, const er__job *job, const er__infer_req *req,
                       er__sb *out, int64_t *json_len_out);
const char *er__kserve_dtype(er_dtype t);   /* "FP32", ...; NULL if none */
void er__kserve_model_meta(const er__model *m, const er__version *v, er__sb *out);

/* The status page (generated from status.html at build time). */
extern const unsigned char er__status_html[];
extern const size_t er__status_html_len;

/* ---- LLMs (llm.c) ------------------------------------------------------- */

enum { ER__FIN_STOP, ER__FIN_LENGTH, ER__FIN_CANCELLED, ER__FIN_ERROR };

/* One generation request, shared by its HTTP connection and the engine
 * (reference counted: each side drops its reference when done with it). */
typedef struct er__llm_req {
  atomic_int refs;
  struct er__llm_req *next;  /* engine queue link */
  /* Set before submit, read-only afterwards. */
  int32_t *prompt;           /* owned */
  size_t n_prompt;
  int64_t max_tokens;
  er_llm_sampler_options sampling;
  char *stop[ER_SERVE_MAX_STOP]; /* owned */
  size_t n_stop;
  bool stream;
  int64_t t_submit, deadline; /* microseconds, monotonic */
  /* Filled by the engine, under `lock`. */
  pthread_mutex_t lock;
  er__sb text;               /* generated text the connection has not taken yet */
  bool started, done;
  int finish;                /* ER__FIN_* once done */
  int status;                /* HTTP status of an error (finish ER__FIN_ERROR) */
  char err[ER_SERVE_ERR];
  int64_t completion_tokens, reused_tokens;
  int64_t t_first, t_done;
  bool waiting;              /* the connection is suspended until there is more */
  bool gone;                 /* the connection ended; nobody reads any more */
  bool peer_closed;          /* the client hung up while waiting (the watchdog saw it): the
                                engine ends the request and still wakes the connection */
  void (*wake)(void *arg);   /* resumes the connection; called under `lock` */
  void *wake_arg;
} er__llm_req;

er__llm_req *er__llm_req_new(void);
void er__llm_req_unref(er__llm_req *r);

/* Loads REPO/<model>/<n>/model.gguf into v (v->llm, v->engine): the KV
 * cache of every slot is allocated here, and one token is decoded to warm
 * up. False with a message. */
bool er__llm_version_load(er__version *v, const char *path, const er__model_config *cfg,
                          er__model *owner, er__server *srv, char *err, size_t errsz);
/* Stops the engine (every request still held is answered) and frees it. */
void er__llm_engine_free(er__llm_engine *e);
/* Ends every sequence now (finish "length") and fails queued requests:
 * the drain's end and shutdown. */
void er__llm_engine_end_all(er__llm_engine *e);
/* Queues a request (one reference passes to the engine) or refuses it:
 * returns 0 when queued (on_accept ran first under the queue lock), else
 * the HTTP status (429, 503) with a message. */
int er__llm_submit(er__llm_engine *e, er__llm_req *r, void (*on_accept)(void *arg), void *arg,
                   char *err, size_t errsz);
/* What a version's engine runs with. */
void er__llm_engine_info(const er__llm_engine *e, int64_t *n_ctx, int *slots, uint64_t *kv_bytes);
/* The version's default limits and sampling. */
const er__llm_config *er__llm_engine_config(const er__llm_engine *e);
/* Prometheus lines for LLM models. */
void er__llm_metrics_write(er__server *srv, er__sb *o);

/* ---- the OpenAI-compatible API (openai.c) -------------------------------- */

enum { ER__OAI_CHAT, ER__OAI_COMPLETION };
typedef struct er__oai er__oai;

/* Parses and checks a /v1/chat/completions or /v1/completions body,
 * resolves its model, renders and tokenizes the prompt. Returns 0 with
 * *out, else an HTTP status with an OpenAI error body in err_body. */
int er__oai_prepare(er__server *srv, int kind, const char *body, size_t len, er__oai **out,
                    er__sb *err_body);
er__model *er__oai_model(const er__oai *o);
bool er__oai_streams(const er__oai *o);
er__llm_req *er__oai_req(const er__oai *o);
/* Submits the request to the engine; same contract as er__llm_submit.
 * wake/suspend act on the connection (suspend is called from
 * er__oai_stream_read only). */
int er__oai_submit(er__oai *o, void (*on_accept)(void *arg), void *accept_arg,
                   void (*wake)(void *arg), void (*suspend)(void *arg), void *conn_arg,
                   er__sb *err_body);
/* A finished non-streamed request: its HTTP status and body. */
int er__oai_response(er__oai *o, er__sb *out);
/* The next bytes of a stream: > 0 bytes written, 0 = nothing yet (the
 * connection was suspended), -1 = the stream is complete. */
long er__oai_stream_read(er__oai *o, char *buf, size_t max);
/* The connection is done with the request (answered or gone). */
void er__oai_free(er__oai *o);
/* GET /v1/models (id NULL) or /v1/models/<id>: false when id is not a
 * ready language model. */
bool er__oai_models(er__server *srv, const char *id, er__sb *out);
/* /tokenize (detok false) and /detokenize: status and body. */
int er__oai_tokenize(er__server *srv, bool detok, const char *body, size_t len, er__sb *out);

/* serve.c: the entry point for `edgerun serve`. */
int er__serve_main(er__serve_options *opt);

#endif /* ER_SERVE_H */
