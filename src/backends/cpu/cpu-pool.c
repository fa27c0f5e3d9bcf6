/* cpu-pool.c - a persistent thread pool with static partitioning.
 *
 * Workers spin (with a pause instruction) for a while before sleeping on a
 * condition variable, so back-to-back parallel loops (one per node) do not
 * pay a futex wake-up each. A job is split into at most `threads` contiguous chunks; chunk c
 * always goes to the same thread (the caller takes chunk 0), and the split
 * depends only on n, grain and the thread count, so a run's results do not
 * depend on timing. One job at a time: a second concurrent caller (another
 * session run) finds the pool busy and runs its chunks itself, in order. */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>

#include "backends/cpu/cpu-kernels.h"

/* How long a worker spins for the next job before it sleeps, and how long
 * the caller spins for the workers to finish before it sleeps: longer than
 * the serial gaps between the parallel kernels of consecutive nodes, so a
 * run's workers stay awake through it instead of paying a futex wake-up per
 * node (onnxruntime's pool spins similarly). Nanoseconds. */
#define ER_POOL_SPIN_NS 200000

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define cpu_relax() _mm_pause()
#elif defined(__aarch64__)
#define cpu_relax() __asm__ volatile("yield")
#else
#define cpu_relax() ((void)0)
#endif

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Spins (politely) while *word equals `value`, for at most the spin
 * budget; true when it changed. */
static bool spin_while_u64(atomic_uint_fast64_t *word, uint64_t value, atomic_bool *stop) {
  uint64_t t0 = 0;
  for (unsigned i = 0;; i++) {
    if (atomic_load_explicit(word, memory_order_acquire) != value || atomic_load(stop)) return true;
    cpu_relax();
    if ((i & 63) == 63) {
      uint64_t t = now_ns();
      if (!t0) t0 = t;
      else if (t - t0 > ER_POOL_SPIN_NS) return false;
    }
  }
}

static bool spin_while_positive(atomic_int *word) {
  uint64_t t0 = 0;
  for (unsigned i = 0;; i++) {
    if (atomic_load_explicit(word, memory_order_acquire) <= 0) return true;
    cpu_relax();
    if ((i & 63) == 63) {
      uint64_t t = now_ns();
      if (!t0) t0 = t;
      else if (t - t0 > ER_POOL_SPIN_NS) return false;
    }
  }
}

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
  atomic_int remaining;             /* workers not checked in */
  atomic_bool stop;
  /* Who sleeps: the lock and condition variables are touched only when
   * someone does, so dispatching to spinning workers costs two atomics. */
  atomic_int sleepers;              /* workers waiting on `wake` */
  atomic_bool caller_sleeps;        /* the caller waits on `done_cv` */
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
    if (!spin_while_u64(&pool->generation, seen, &pool->stop)) {
      pthread_mutex_lock(&pool->lock);
      /* sleepers before the generation check (both sequentially
       * consistent): the dispatcher either sees us and wakes us, or we see
       * its new generation. */
      atomic_fetch_add(&pool->sleepers, 1);
      while (atomic_load(&pool->generation) == seen && !atomic_load(&pool->stop))
        pthread_cond_wait(&pool->wake, &pool->lock);
      atomic_fetch_sub(&pool->sleepers, 1);
      pthread_mutex_unlock(&pool->lock);
    }
    gen = atomic_load_explicit(&pool->generation, memory_order_acquire);
    if (atomic_load(&pool->stop)) return NULL;
    seen = gen;
    /* Every worker checks in for every job, chunk or not: otherwise a
     * worker without a chunk that is slow to read pool->job could read the
     * next job's fields, run its chunk there, and then run it again when it
     * sees that job's generation. */
    if (index < pool->job.chunks) run_chunk(&pool->job, index);
    if (atomic_fetch_sub(&pool->remaining, 1) == 1 && atomic_load(&pool->caller_sleeps)) {
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
  atomic_init(&pool->sleepers, 0);
  atomic_init(&pool->caller_sleeps, false);
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
  atomic_store(&pool->remaining, threads - 1);
  atomic_fetch_add(&pool->generation, 1);
  if (atomic_load(&pool->sleepers) > 0) {
    pthread_mutex_lock(&pool->lock);
    pthread_cond_broadcast(&pool->wake);
    pthread_mutex_unlock(&pool->lock);
  }
  run_chunk(&job, 0);
  /* Wait for every worker to check in: spin first (chunks are usually
   * balanced). */
  if (!spin_while_positive(&pool->remaining)) {
    pthread_mutex_lock(&pool->lock);
    atomic_store(&pool->caller_sleeps, true);
    while (atomic_load(&pool->remaining) > 0) pthread_cond_wait(&pool->done_cv, &pool->lock);
    atomic_store(&pool->caller_sleeps, false);
    pthread_mutex_unlock(&pool->lock);
  }
  pthread_mutex_unlock(&pool->busy);
}
