/* pool.h - the thread pool every compute path shares: the interpreter and
 * the CPU kernels, accelerator backends' host work, the LLM engine and the
 * quantizer. Persistent workers, deterministic splits. */
#ifndef ER_POOL_H
#define ER_POOL_H

#include "core/core.h"

typedef struct er_thread_pool er_thread_pool;

/* A pool of `threads` - 1 persistent workers (the caller is the last one).
 * threads <= 1 creates a pool that runs everything on the caller. */
er_status er__pool_create(int threads, er_thread_pool **pool_out);
void er__pool_free(er_thread_pool *pool);
int er__pool_threads(const er_thread_pool *pool);

/* Work in [begin, end) of a range. */
typedef void (*er_range_fn)(void *arg, int64_t begin, int64_t end);

/* Splits [0, n) into er__pool_threads() contiguous chunks (the split
 * depends only on n and the thread count, so results are deterministic)
 * and runs them, the caller taking part. `grain` is the smallest chunk
 * worth a thread (fewer chunks when n is small). When another run is
 * using the pool at the moment, the caller runs every chunk itself, in the
 * same split: same results, no waiting. pool may be NULL (one thread). */
void er__parallel_for(er_thread_pool *pool, int64_t n, int64_t grain, er_range_fn fn, void *arg);

/* Like er__parallel_for, but [0, n) is split into up to 65535 items of
 * near-equal size (one index each when n is smaller), handed to whichever
 * thread is free: a worker slowed by another process on its core takes
 * fewer items instead of holding everyone back. fn must compute the same
 * result for an item whoever runs it. */
void er__parallel_for_items(er_thread_pool *pool, int64_t n, er_range_fn fn, void *arg);

/* The calling thread's slot: 0 on the thread that called
 * er__parallel_for (and on any thread that is not a pool worker), i on
 * worker i (1 .. threads - 1). A chunk function indexes per-thread
 * scratch with it, so a loop may have more chunks than scratch slots. */
int er__pool_slot(void);

#endif /* ER_POOL_H */
