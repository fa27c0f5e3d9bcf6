/* sched.c - per-model request queues, worker threads and dynamic batching.
 *
 * Each model has a bounded FIFO queue and `instances` worker threads that
 * share the model's session (sessions are safe to run from many threads).
 * A worker takes the oldest job; when the model's inputs and outputs all
 * have a dynamic first dimension and max_batch > 1, it also takes later jobs
 * whose other dims match, waiting at most batch_delay_us after the first
 * job arrived, concatenates their inputs along dim 0, runs once and splits
 * every output back by rows. Thread wake-ups are kept to what is needed: a
 * request wakes a worker only when none is already on its way, one worker
 * at a time gathers a batch and is woken only when it can be filled. Admission is decided at once, in the HTTP
 * thread: a full queue or an estimated wait past the deadline is refused
 * with 429 instead of growing the queue (so overload costs microseconds). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "serve.h"

typedef struct worker_arg {
  er__model *m;
  int index;
} worker_arg;

void er__job_free(er__job *job) {
  if (!job) return;
  for (int i = 0; i < ER_SERVE_MAX_IO; i++) {
    er_tensor_free(job->in[i]);
    er_tensor_free(job->out[i]);
  }
  if (job->ver) er__version_unref(job->ver);
  free(job);
}

static int active_workers(const er__model *m) {
  int n = m->n_workers;
  if (atomic_load(&m->srv->throttled)) n = n > 1 ? n / 2 : 1;
  return n;
}

static int effective_batch(const er__model *m) {
  int b = m->cfg.max_batch;
  if (atomic_load(&m->srv->throttled)) b = b > 1 ? b / 2 : 1;
  return b;
}

static bool same_tail(const er__job *a, const er__job *b) {
  if (a->ver != b->ver) return false;
  for (size_t i = 0; i < a->ver->n_in; i++) {
    int r = er_tensor_rank(a->in[i]);
    if (r != er_tensor_rank(b->in[i])) return false;
    const int64_t *da = er_tensor_dims(a->in[i]), *db = er_tensor_dims(b->in[i]);
    for (int d = 1; d < r; d++)
      if (da[d] != db[d]) return false;
  }
  return true;
}

static int status_for(er_status st) {
  switch (st) {
    case ER_STATUS_INVALID_ARGUMENT:
    case ER_STATUS_INVALID_SHAPE:
    case ER_STATUS_INVALID_TENSOR:
    case ER_STATUS_TYPE_MISMATCH:
    case ER_STATUS_OUT_OF_RANGE:
    case ER_STATUS_NOT_FOUND:
    case ER_STATUS_LIMIT:
      return 400;
    default:
      return 500;
  }
}

static void fail_job(er__job *job, int status, const char *msg) {
  job->status = status;
  er__sanitize(msg, job->err, sizeof job->err);
}

/* Runs one job by itself. */
static void run_one(er__job *job) {
  er__version *v = job->ver;
  er_named_tensor named[ER_SERVE_MAX_IO];
  er_tensor *outs[ER_SERVE_MAX_IO] = {0};
  for (size_t i = 0; i < v->n_in; i++) {
    named[i].name = v->in[i].name;
    named[i].tensor = job->in[i];
  }
  er_status st = er_session_run(v->session, named, v->n_in, NULL, v->n_out, outs);
  if (st != ER_STATUS_OK) {
    char msg[ER_SERVE_ERR];
    snprintf(msg, sizeof msg, "inference failed: %s (%s)", er_last_error(), er_status_name(st));
    fail_job(job, status_for(st), msg);
    return;
  }
  for (size_t k = 0; k < job->n_out; k++) {
    job->out[k] = outs[job->out_idx[k]];
    outs[job->out_idx[k]] = NULL;
  }
  for (size_t o = 0; o < v->n_out; o++) er_tensor_free(outs[o]);
  job->status = 200;
  job->batch_rows = (int)(job->rows > 0 ? job->rows : 1);
}

/* Runs jobs[0..n) as one merged batch; false when the outputs cannot be
 * split by rows (or the merged run failed), so the caller runs them one by
 * one and only a bad request fails. */
static bool run_merged(er__job **jobs, int n, int64_t rows) {
  er__version *v = jobs[0]->ver;
  er_tensor *merged[ER_SERVE_MAX_IO] = {0};
  er_named_tensor named[ER_SERVE_MAX_IO];
  er_tensor *outs[ER_SERVE_MAX_IO] = {0};
  bool ok = rows > 0;
  for (size_t i = 0; ok && i < v->n_in; i++) {
    const er_tensor *t0 = jobs[0]->in[i];
    int64_t dims[ER_MAX_RANK];
    int r = er_tensor_rank(t0);
    memcpy(dims, er_tensor_dims(t0), sizeof(int64_t) * (size_t)r);
    dims[0] = rows;
    if (er_tensor_create(er_tensor_dtype(t0), r, dims, &merged[i]) != ER_STATUS_OK) {
      ok = false;
      break;
    }
    unsigned char *dst = er_tensor_data(merged[i]);
    for (int j = 0; j < n; j++) {
      size_t nb = er_tensor_nbytes(jobs[j]->in[i]);
      memcpy(dst, er_tensor_cdata(jobs[j]->in[i]), nb);
      dst += nb;
    }
    named[i].name = v->in[i].name;
    named[i].tensor = merged[i];
  }
  if (ok) ok = er_session_run(v->session, named, v->n_in, NULL, v->n_out, outs) == ER_STATUS_OK;
  for (size_t o = 0; ok && o < v->n_out; o++)
    ok = er_tensor_rank(outs[o]) >= 1 && er_tensor_dims(outs[o])[0] == rows;
  for (int j = 0; ok && j < n; j++) {
    er__job *job = jobs[j];
    for (size_t k = 0; ok && k < job->n_out; k++) {
      const er_tensor *src = outs[job->out_idx[k]];
      int r = er_tensor_rank(src);
      int64_t dims[ER_MAX_RANK];
      memcpy(dims, er_tensor_dims(src), sizeof(int64_t) * (size_t)r);
      dims[0] = job->rows;
      ok = er_tensor_create(er_tensor_dtype(src), r, dims, &job->out[k]) == ER_STATUS_OK;
    }
  }
  if (ok) {
    /* Copy each job's rows out of every output it asked for. */
    int64_t row0 = 0;
    for (int j = 0; j < n; j++) {
      er__job *job = jobs[j];
      for (size_t k = 0; k < job->n_out; k++) {
        const er_tensor *src = outs[job->out_idx[k]];
        size_t row_bytes = er_tensor_nbytes(src) / (size_t)rows;
        memcpy(er_tensor_data(job->out[k]),
               (const unsigned char *)er_tensor_cdata(src) + (size_t)row0 * row_bytes,
               (size_t)job->rows * row_bytes);
      }
      row0 += job->rows;
      job->status = 200;
      job->batch_rows = (int)rows;
    }
  } else {
    for (int j = 0; j < n; j++)
      for (size_t k = 0; k < jobs[j]->n_out; k++) {
        er_tensor_free(jobs[j]->out[k]);
        jobs[j]->out[k] = NULL;
      }
  }
  for (size_t i = 0; i < v->n_in; i++) er_tensor_free(merged[i]);
  for (size_t o = 0; o < v->n_out; o++) er_tensor_free(outs[o]);
  return ok;
}

static void abs_deadline(struct timespec *ts, int64_t mono_us) {
  ts->tv_sec = (time_t)(mono_us / 1000000);
  ts->tv_nsec = (long)(mono_us % 1000000) * 1000;
}

static int64_t job_rows(const er__job *job) { return job->rows > 0 ? job->rows : 1; }

/* Wakes one waiting worker unless a wake is already on its way to one: a
 * request that finds a worker already woken (or every worker busy, to come
 * back to the queue by itself) costs no futex call and no context switch. */
static void wake_worker(er__model *m) {
  if (m->idle <= m->wakes) return;
  m->wakes++;
  /* Throttled, some waiters may not take jobs: wake them all so that an
   * active one is among them. */
  if (active_workers(m) < m->n_workers) pthread_cond_broadcast(&m->q_cond);
  else pthread_cond_signal(&m->q_cond);
}

static void *worker_main(void *p) {
  worker_arg *wa = p;
  er__model *m = wa->m;
  int index = wa->index;
  free(wa);
  er__job *batch[ER_SERVE_MAX_BATCH];
  pthread_mutex_lock(&m->lock);
  for (;;) {
    /* While another worker gathers a batch, the queue is its to take. */
    while (!m->stop && (m->q_len == 0 || m->collecting || index >= active_workers(m))) {
      m->idle++;
      pthread_cond_wait(&m->q_cond, &m->lock);
      m->idle--;
      if (m->wakes > 0) m->wakes--;
    }
    if (m->stop) break;
    er__job *job = m->q_head;
    m->q_head = job->next;
    if (!m->q_head) m->q_tail = NULL;
    m->q_len--;
    m->q_rows -= job_rows(job);
    job->next = NULL;
    int64_t now = er__now_us();
    if (now > job->deadline) {
      pthread_mutex_unlock(&m->lock);
      char msg[ER_SERVE_ERR];
      snprintf(msg, sizeof msg, "request spent its whole timeout of %lld ms in the queue of "
                                "model '%s'", (long long)m->cfg.timeout_ms, m->name);
      fail_job(job, 503, msg);
      job->done(job, job->arg);
      pthread_mutex_lock(&m->lock);
      continue;
    }
    int n = 1;
    int64_t rows = job->rows;
    batch[0] = job;
    int max_rows = effective_batch(m);
    if (job->ver->batchable && max_rows > 1 && rows < max_rows) {
      int64_t until = job->t_enqueue + m->cfg.batch_delay_us;
      for (;;) {
        /* Take every compatible queued job that still fits. */
        er__job **link = &m->q_head, *prev = NULL;
        while (*link && rows < max_rows && n < ER_SERVE_MAX_BATCH) {
          er__job *c = *link;
          if (same_tail(job, c) && rows + c->rows <= max_rows) {
            *link = c->next;
            if (m->q_tail == c) m->q_tail = prev;
            m->q_len--;
            m->q_rows -= job_rows(c);
            c->next = NULL;
            batch[n++] = c;
            rows += c->rows;
          } else {
            prev = c;
            link = &c->next;
          }
        }
        /* Wait for more until the batch is full or the configured delay
         * has passed since the first request arrived (Triton's
         * max_queue_delay): batch_delay_us is the latency the operator
         * chose to trade for larger batches; 0 means never wait. A full
         * batch runs at once. */
        if (rows >= max_rows || n == ER_SERVE_MAX_BATCH || m->stop ||
            atomic_load(&m->srv->draining) || er__now_us() >= until)
          break;
        /* Sleep until the queue can fill the batch (queued jobs that did
         * not fit count too, so they do not wake this worker again) or
         * the delay ends; submit wakes this worker only then. */
        m->collecting = true;
        m->fill_rows = m->q_rows + (max_rows - rows);
        struct timespec ts;
        abs_deadline(&ts, until);
        pthread_cond_timedwait(&m->fill_cond, &m->lock, &ts);
      }
      m->collecting = false;
    }
    /* Jobs left behind (more than one batch holds, another shape, or
     * queued while this worker gathered) go to another worker now. */
    if (m->q_len > 0) wake_worker(m);
    m->busy += n;
    pthread_mutex_unlock(&m->lock);

    int64_t t0 = er__now_us();
    if (n == 1 || !run_merged(batch, n, rows)) {
      for (int j = 0; j < n; j++) {
        run_one(batch[j]);
        er__metrics_batch(&m->m, (int)(batch[j]->rows > 0 ? batch[j]->rows : 1));
      }
    } else {
      er__metrics_batch(&m->m, (int)rows);
    }
    double per_job = (double)(er__now_us() - t0) / n;
    /* Answer first: every waiting connection resumes before this worker
     * touches the queue's lock again. */
    for (int j = 0; j < n; j++) batch[j]->done(batch[j], batch[j]->arg);

    pthread_mutex_lock(&m->lock);
    m->busy -= n;
    /* A slow-moving average: the admission estimate should follow load
     * changes within a second or so, not jump with one slow run. */
    m->job_us = m->job_us > 0 ? 0.9 * m->job_us + 0.1 * per_job : per_job;
  }
  pthread_mutex_unlock(&m->lock);
  return NULL;
}

bool er__sched_start(er__model *m, int instances) {
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  /* Workers need the interpreter's stack, not more; 8 MiB defaults add up
   * on a small device. */
  pthread_attr_setstacksize(&attr, 2u << 20);
  pthread_mutex_lock(&m->lock);
  for (int i = m->n_workers; i < instances; i++) {
    worker_arg *wa = malloc(sizeof *wa);
    if (!wa) break;
    wa->m = m;
    wa->index = i;
    if (pthread_create(&m->workers[i], &attr, worker_main, wa) != 0) {
      free(wa);
      break;
    }
    m->n_workers = i + 1;
  }
  bool ok = m->n_workers == instances;
  pthread_mutex_unlock(&m->lock);
  pthread_attr_destroy(&attr);
  return ok;
}

void er__sched_stop(er__model *m) {
  /* LLM versions end their sequences and answer their queues first. */
  er__version *llm[ER_SERVE_MAX_VERSIONS];
  int n_llm = 0;
  pthread_mutex_lock(&m->lock);
  for (int i = 0; i < m->n_live; i++)
    if (m->live[i]->engine) {
      er__version_ref(m->live[i]);
      llm[n_llm++] = m->live[i];
    }
  pthread_mutex_unlock(&m->lock);
  for (int i = 0; i < n_llm; i++) {
    er__llm_engine_end_all(llm[i]->engine);
    er__version_unref(llm[i]);
  }
  pthread_mutex_lock(&m->lock);
  m->stop = true;
  pthread_cond_broadcast(&m->q_cond);
  pthread_cond_broadcast(&m->fill_cond);
  int n = m->n_workers;
  pthread_mutex_unlock(&m->lock);
  for (int i = 0; i < n; i++) pthread_join(m->workers[i], NULL);
  pthread_mutex_lock(&m->lock);
  m->n_workers = 0;
  er__job *q = m->q_head;
  m->q_head = m->q_tail = NULL;
  m->q_len = 0;
  m->q_rows = 0;
  pthread_mutex_unlock(&m->lock);
  while (q) {
    er__job *next = q->next;
    fail_job(q, 503, "the server is shutting down");
    q->done(q, q->arg);
    q = next;
  }
}

int er__sched_submit(er__model *m, er__job *job, void (*on_accept)(void *arg), void *arg,
                     char *err, size_t errsz) {
  int64_t now = er__now_us();
  pthread_mutex_lock(&m->lock);
  int status = 0;
  int active = active_workers(m);
  double est_us = active > 0 ? (double)(m->q_len + m->busy) * m->job_us / active : 0;
  if (m->stop || m->n_workers == 0) {
    status = 503;
    snprintf(err, errsz, "model '%s' is not accepting requests", m->name);
  } else if (m->q_len >= m->cfg.queue_size) {
    status = 429;
    snprintf(err, errsz, "model '%s' is overloaded: its queue is full (queue_size %d)", m->name,
             m->cfg.queue_size);
  } else if (est_us > (double)m->cfg.timeout_ms * 1000.0) {
    status = 429;
    snprintf(err, errsz, "model '%s' is overloaded: the estimated wait of %.0f ms exceeds its "
                         "timeout of %lld ms", m->name, est_us / 1000.0,
             (long long)m->cfg.timeout_ms);
  } else {
    /* Called under the lock: no worker can take (and finish) the job before
     * the caller has suspended its connection. */
    if (on_accept) on_accept(arg);
    job->t_enqueue = now;
    job->deadline = now + m->cfg.timeout_ms * 1000;
    job->next = NULL;
    if (m->q_tail) m->q_tail->next = job;
    else m->q_head = job;
    m->q_tail = job;
    m->q_len++;
    m->q_rows += job_rows(job);
    if (m->collecting) {
      /* The gathering worker takes this job; wake it only when its batch
       * can be filled (once: it sets the mark again if it sleeps on). */
      if (m->q_rows >= m->fill_rows) {
        m->fill_rows = INT64_MAX;
        pthread_cond_signal(&m->fill_cond);
      }
    } else {
      wake_worker(m);
    }
  }
  pthread_mutex_unlock(&m->lock);
  return status;
}

void er__sched_kick(er__server *srv) {
  int n = atomic_load(&srv->n_models);
  for (int i = 0; i < n; i++) {
    er__model *m = srv->models[i];
    pthread_mutex_lock(&m->lock);
    pthread_cond_broadcast(&m->q_cond);
    pthread_cond_broadcast(&m->fill_cond);
    pthread_mutex_unlock(&m->lock);
  }
}
