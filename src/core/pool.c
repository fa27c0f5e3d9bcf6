/* pool.c - a persistent thread pool with static partitioning.
 *
 * Workers spin (with a pause instruction) for a while before sleeping on a
 * condition variable, so back-to-back parallel loops (one per node) do not
 * pay a futex wake-up each. A job is split into at most `threads`
 * contiguous chunks; the split depends only on n, grain and the thread
 * count, so a run's results do not depend on timing. The caller and the
 * workers claim chunks from a shared ticket, so a worker that is late (its
 * core taken by another process: MobileNetV2 at 2 threads ran at the speed
 * of 1 thread for minutes at a time on a shared VM while every chunk waited
 * for its fixed thread) costs at most the parallelism, never more. One job
 * at a time: a second concurrent caller (another session run) finds the
 * pool busy and runs its chunks itself, in order. */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>

#include "core/pool.h"

/* How long a worker spins for the next job before it sleeps, and how long
 * the caller spins for the workers to finish before it sleeps: longer than
 * the serial gaps between the parallel kernels of consecutive nodes, so a
 * run's workers stay awake through it instead of paying a futex wake-up per
 * node (onnxruntime's pool spins similarly). Nanoseconds. */
#define ER_POOL_SPIN_NS 200000

/* After this long, a spinning thread yields its core at each check (every
 * 64 pauses): alone on its core it goes straight back to spinning, but
 * when another process competes for the cores the yield hands the core to
 * whoever is runnable, often the very worker it waits for. */
#define ER_POOL_YIELD_AFTER_NS 20000

/* The ticket's chunk fields are 16 bits wide (see TICKET). */
#define ER_POOL_MAX_CHUNKS 65535

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
      else if (t - t0 > ER_POOL_YIELD_AFTER_NS) sched_yield();
    }
  }
}

/* Spins while *word < target; true when it got there. */
static bool spin_while_below(atomic_int *word, int target) {
  uint64_t t0 = 0;
  for (unsigned i = 0;; i++) {
    if (atomic_load_explicit(word, memory_order_acquire) >= target) return true;
    cpu_relax();
    if ((i & 63) == 63) {
      uint64_t t = now_ns();
      if (!t0) t0 = t;
      else if (t - t0 > ER_POOL_SPIN_NS) return false;
      else if (t - t0 > ER_POOL_YIELD_AFTER_NS) sched_yield();
    }
  }
}

/* The job being run. Its fields are atomics only so that a worker that
 * read them late (see claim) races with nothing; the ticket orders them. */
typedef struct pool_job {
  _Atomic(er_range_fn) fn;
  _Atomic(void *) arg;
  atomic_int_fast64_t n;
  /* The caller's floating-point mode (er__fp_mode_get): workers take it
   * on, so a chunk computes the same whoever runs it (a session run that
   * flushes subnormals flushes them on every worker). */
  atomic_uint_fast64_t fp_mode;
} pool_job;

struct er_thread_pool {
  int threads;
  pthread_t *workers;           /* [threads - 1] */
  pthread_mutex_t busy;         /* held by the dispatching caller */
  pthread_mutex_t lock;         /* guards sleeping / waking */
  pthread_cond_t wake, done_cv;
  pool_job job;
  atomic_uint_fast64_t generation;  /* bumped per job; workers wait on it */
  /* Claims (see claim): the job's generation, chunk count and next chunk.
   * A chunk is run by whoever claims it, caller or worker. */
  atomic_uint_fast64_t ticket;
  atomic_int done;                  /* chunks of this job finished */
  atomic_bool stop;
  /* Who sleeps: the lock and condition variables are touched only when
   * someone does, so dispatching to spinning workers costs two atomics. */
  atomic_int sleepers;              /* workers waiting on `wake` */
  atomic_bool caller_sleeps;        /* the caller waits on `done_cv` */
};

/* See er__pool_slot. */
static _Thread_local int tls_slot;
/* A worker's floating-point mode, as last set. */
static _Thread_local uint64_t tls_fp_mode;

typedef struct worker_arg {
  er_thread_pool *pool;
  int index;                    /* 1..threads-1 */
} worker_arg;

static void run_range(er_range_fn fn, void *arg, int64_t n, int chunks, int c) {
  int64_t begin = n * c / chunks, end = n * (c + 1) / chunks;
  if (begin < end) fn(arg, begin, end);
}

/* Claims and runs chunks of job `gen` until none is left. The ticket
 * holds the job's generation (bits 32-63), its chunk count (16-31) and
 * the next chunk (0-15), so whether a chunk is left is read from the same
 * word the claim swaps. The job's fields are read only after a claim
 * succeeds: the job is then unfinished (that chunk is not done), and the
 * caller rewrites them only for the next job, after every chunk is done. */
#define TICKET(gen, chunks, next) (((uint64_t)(gen) & 0xffffffffu) << 32 | (uint64_t)(chunks) << 16 | (uint64_t)(next))

static void claim(er_thread_pool *pool, uint64_t gen) {
  uint64_t t = atomic_load_explicit(&pool->ticket, memory_order_acquire);
  for (;;) {
    int chunks = (int)(t >> 16 & 0xffffu), k = (int)(t & 0xffffu);
    if (t >> 32 != (gen & 0xffffffffu) || k >= chunks) return;
    if (!atomic_compare_exchange_weak_explicit(&pool->ticket, &t, t + 1, memory_order_acq_rel,
                                               memory_order_acquire))
      continue;
    er_range_fn fn = atomic_load_explicit(&pool->job.fn, memory_order_relaxed);
    void *arg = atomic_load_explicit(&pool->job.arg, memory_order_relaxed);
    int64_t n = atomic_load_explicit(&pool->job.n, memory_order_relaxed);
    uint64_t mode = atomic_load_explicit(&pool->job.fp_mode, memory_order_relaxed);
    if (tls_slot != 0 && mode != tls_fp_mode) {
      er__fp_mode_set(mode);
      tls_fp_mode = mode;
    }
    run_range(fn, arg, n, chunks, k);
    if (atomic_fetch_add(&pool->done, 1) + 1 == chunks && atomic_load(&pool->caller_sleeps)) {
      pthread_mutex_lock(&pool->lock);
      pthread_cond_signal(&pool->done_cv);
      pthread_mutex_unlock(&pool->lock);
    }
    t = atomic_load_explicit(&pool->ticket, memory_order_acquire);
  }
}


int er__pool_slot(void) { return tls_slot; }

static void *worker_main(void *p) {
  worker_arg *wa = p;
  er_thread_pool *pool = wa->pool;
  tls_slot = wa->index;
  tls_fp_mode = er__fp_mode_get();
  free(wa);
  uint64_t seen = 0;
  for (;;) {
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
    if (atomic_load(&pool->stop)) return NULL;
    seen = atomic_load_explicit(&pool->generation, memory_order_acquire);
    claim(pool, seen);
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
  atomic_init(&pool->ticket, 0);
  atomic_init(&pool->done, 0);
  atomic_init(&pool->job.fn, NULL);
  atomic_init(&pool->job.arg, NULL);
  atomic_init(&pool->job.n, 0);
  atomic_init(&pool->job.fp_mode, 0);
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

static void dispatch(er_thread_pool *pool, int64_t n, int chunks, er_range_fn fn, void *arg);

void er__parallel_for(er_thread_pool *pool, int64_t n, int64_t grain, er_range_fn fn, void *arg) {
  if (n <= 0) return;
  int threads = er__pool_threads(pool);
  if (grain < 1) grain = 1;
  int64_t max_chunks = (n + grain - 1) / grain;
  dispatch(pool, n, (int)(max_chunks < threads ? max_chunks : threads), fn, arg);
}

void er__parallel_for_items(er_thread_pool *pool, int64_t n, er_range_fn fn, void *arg) {
  if (n <= 0) return;
  int chunks = er__pool_threads(pool) <= 1 ? 1 : (int)(n < ER_POOL_MAX_CHUNKS ? n : ER_POOL_MAX_CHUNKS);
  dispatch(pool, n, chunks, fn, arg);
}

static void dispatch(er_thread_pool *pool, int64_t n, int chunks, er_range_fn fn, void *arg) {
  if (chunks <= 1) {
    fn(arg, 0, n);
    return;
  }
  if (pthread_mutex_trylock(&pool->busy) != 0) {
    /* Another run holds the pool: same chunks, run here in order. */
    for (int c = 0; c < chunks; c++) run_range(fn, arg, n, chunks, c);
    return;
  }
  uint64_t gen = atomic_load(&pool->generation) + 1;
  atomic_store_explicit(&pool->job.fn, fn, memory_order_relaxed);
  atomic_store_explicit(&pool->job.arg, arg, memory_order_relaxed);
  atomic_store_explicit(&pool->job.n, n, memory_order_relaxed);
  atomic_store_explicit(&pool->job.fp_mode, er__fp_mode_get(), memory_order_relaxed);
  atomic_store(&pool->done, 0);
  atomic_store_explicit(&pool->ticket, TICKET(gen, chunks, 0), memory_order_release);
  atomic_store(&pool->generation, gen);
  if (atomic_load(&pool->sleepers) > 0) {
    pthread_mutex_lock(&pool->lock);
    pthread_cond_broadcast(&pool->wake);
    pthread_mutex_unlock(&pool->lock);
  }
  /* The caller claims chunks too: when a worker is late (descheduled, or
   * its core busy with something else) the caller runs its chunk as well,
   * so a run is never slower than on one thread. Chunk boundaries depend
   * only on n, grain and the thread count, and each chunk computes the
   * same outputs whoever runs it, so results do not depend on timing. */
  claim(pool, gen);
  /* Wait for chunks claimed by workers: spin first (they are usually
   * about as long as ours). */
  if (!spin_while_below(&pool->done, chunks)) {
    pthread_mutex_lock(&pool->lock);
    atomic_store(&pool->caller_sleeps, true);
    while (atomic_load(&pool->done) < chunks) pthread_cond_wait(&pool->done_cv, &pool->lock);
    atomic_store(&pool->caller_sleeps, false);
    pthread_mutex_unlock(&pool->lock);
  }
  pthread_mutex_unlock(&pool->busy);
}
