/* cpu-pool.c - a persistent thread pool with static partitioning.
 *
 * Workers sleep on a condition variable and spin briefly before sleeping,
 * so back-to-back parallel loops (one per node) do not pay a futex wake-up
 * each. A job is split into at most `threads` contiguous chunks; chunk c
 * always goes to the same thread (the caller takes chunk 0), and the split
 * depends only on n, grain and the thread count, so a run's results do not
 * depend on timing. One job at a time: a second concurrent caller (another
 * session run) finds the pool busy and runs its chunks itself, in order. */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "backends/cpu/cpu-kernels.h"

/* Spin iterations before a worker sleeps: about tens of microseconds, the
 * gap between consecutive nodes of a small model. */
#define ER_POOL_SPIN 20000

typedef struct pool_job {
  er_range_fn fn;
  void *arg;
  int64_t n;
  int chunks;
} pool_job;

struct er_thread_pool {
  int threads;
  pthread_t *workers;           /* [threads - 1] */
  pthread_mutex_t busy;         /* held by the dispatching caller */
  pthread_mutex_t lock;         /* guards sleeping / waking */
  pthread_cond_t wake, done_cv;
  pool_job job;
  atomic_uint_fast64_t generation;  /* bumped per job */
  atomic_int remaining;             /* chunks not finished */
  atomic_bool stop;
};

typedef struct worker_arg {
  er_thread_pool *pool;
  int index;                    /* 1..threads-1 */
} worker_arg;

static void run_chunk(const pool_job *job, int c) {
  int64_t begin = job->n * c / job->chunks, end = job->n * (c + 1) / job->chunks;
  if (begin < end) job->fn(job->arg, begin, end);
}

static void *worker_main(void *p) {
  worker_arg *wa = p;
  er_thread_pool *pool = wa->pool;
  int index = wa->index;
  free(wa);
  uint64_t seen = 0;
  for (;;) {
    uint64_t gen;
    int spins = 0;
    while ((gen = atomic_load_explicit(&pool->generation, memory_order_acquire)) == seen &&
           !atomic_load(&pool->stop)) {
      if (++spins < ER_POOL_SPIN) continue;
      pthread_mutex_lock(&pool->lock);
      while (atomic_load(&pool->generation) == seen && !atomic_load(&pool->stop))
        pthread_cond_wait(&pool->wake, &pool->lock);
      pthread_mutex_unlock(&pool->lock);
    }
    if (atomic_load(&pool->stop)) return NULL;
    seen = gen;
    /* Every worker checks in for every job, chunk or not: otherwise a
     * worker without a chunk that is slow to read pool->job could read the
     * next job's fields, run its chunk there, and then run it again when it
     * sees that job's generation. */
    if (index < pool->job.chunks) run_chunk(&pool->job, index);
    if (atomic_fetch_sub_explicit(&pool->remaining, 1, memory_order_acq_rel) == 1) {
      pthread_mutex_lock(&pool->lock);
      pthread_cond_signal(&pool->done_cv);
      pthread_mutex_unlock(&pool->lock);
    }
  }
}

er_status er__pool_create(int threads, er_thread_pool **pool_out) {
  if (threads < 1) threads = 1;
  if (threads > 256) return er__error(ER_STATUS_LIMIT, "%d threads requested; at most 256", threads);
  er_thread_pool *pool = calloc(1, sizeof *pool);
  if (!pool) return er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory creating a thread pool");
  pool->threads = threads;
  pthread_mutex_init(&pool->busy, NULL);
  pthread_mutex_init(&pool->lock, NULL);
  pthread_cond_init(&pool->wake, NULL);
  pthread_cond_init(&pool->done_cv, NULL);
  atomic_init(&pool->generation, 0);
  atomic_init(&pool->remaining, 0);
  atomic_init(&pool->stop, false);
  if (threads > 1) {
    pool->workers = calloc((size_t)threads - 1, sizeof *pool->workers);
    if (!pool->workers) {
      free(pool);
      return er__error(ER_STATUS_OUT_OF_MEMORY, "out of memory creating a thread pool");
    }
    for (int i = 1; i < threads; i++) {
      worker_arg *wa = malloc(sizeof *wa);
      if (!wa || pthread_create(&pool->workers[i - 1], NULL, worker_main, (wa->pool = pool, wa->index = i, wa)) != 0) {
        free(wa);
        pool->threads = i;  /* free joins the ones that started */
        er__pool_free(pool);
        return er__error(ER_STATUS_INTERNAL, "could not start worker thread %d", i);
      }
    }
  }
  *pool_out = pool;
  return ER_STATUS_OK;
}

void er__pool_free(er_thread_pool *pool) {
  if (!pool) return;
  pthread_mutex_lock(&pool->lock);
  atomic_store(&pool->stop, true);
  pthread_cond_broadcast(&pool->wake);
  pthread_mutex_unlock(&pool->lock);
  for (int i = 1; i < pool->threads; i++) pthread_join(pool->workers[i - 1], NULL);
  free(pool->workers);
  pthread_mutex_destroy(&pool->busy);
  pthread_mutex_destroy(&pool->lock);
  pthread_cond_destroy(&pool->wake);
  pthread_cond_destroy(&pool->done_cv);
  free(pool);
}

int er__pool_threads(const er_thread_pool *pool) { return pool ? pool->threads : 1; }

void er__parallel_for(er_thread_pool *pool, int64_t n, int64_t grain, er_range_fn fn, void *arg) {
  if (n <= 0) return;
  int threads = er__pool_threads(pool);
  if (grain < 1) grain = 1;
  int64_t max_chunks = (n + grain - 1) / grain;
  int chunks = (int)(max_chunks < threads ? max_chunks : threads);
  pool_job job = {fn, arg, n, chunks};
  if (chunks <= 1) {
    fn(arg, 0, n);
    return;
  }
  if (pthread_mutex_trylock(&pool->busy) != 0) {
    /* Another run holds the pool: same chunks, run here in order. */
    for (int c = 0; c < chunks; c++) run_chunk(&job, c);
    return;
  }
  pool->job = job;
  atomic_store_explicit(&pool->remaining, threads - 1, memory_order_relaxed);
  pthread_mutex_lock(&pool->lock);
  atomic_fetch_add_explicit(&pool->generation, 1, memory_order_release);
  pthread_cond_broadcast(&pool->wake);
  pthread_mutex_unlock(&pool->lock);
  run_chunk(&job, 0);
  /* Wait for every worker to check in: spin first (chunks are usually
   * balanced). */
  int spins = 0;
  while (atomic_load_explicit(&pool->remaining, memory_order_acquire) > 0) {
    if (++spins < ER_POOL_SPIN) continue;
    pthread_mutex_lock(&pool->lock);
    while (atomic_load(&pool->remaining) > 0) pthread_cond_wait(&pool->done_cv, &pool->lock);
    pthread_mutex_unlock(&pool->lock);
  }
  pthread_mutex_unlock(&pool->busy);
}
