/*
 * pool.h - the engine's small persistent worker pool (internal).
 *
 * One pool per engine handle, started lazily on first parallel use and
 * joined at close. Gather and compressed append both fan work out through
 * it. A caller always runs shard 0 itself and takes back any of its shards
 * that no worker has started yet, so a busy (or thread-less) pool never
 * deadlocks and never leaves work unfinished.
 */
#ifndef ZRENGINE_POOL_H
#define ZRENGINE_POOL_H

#include <stdbool.h>

#include "zr_platform.h"

typedef void (*zre_task_fn)(void *arg, unsigned shard);

struct zre_task;

typedef struct zre_pool {
    zrp_mutex lock;
    zrp_cond work;  /* signalled when tasks are queued or on stop */
    zrp_cond done;  /* broadcast when any task finishes */
    zrp_thread *threads;
    unsigned nthreads;   /* threads running */
    unsigned max_threads;
    bool started;
    bool stop;
    struct zre_task *head, *tail; /* FIFO of queued tasks */
} zre_pool;

/* Prepare a pool of up to `max_threads` workers (none started yet).
 * Returns 0 or a negative platform error. */
int zre_pool_init(zre_pool *p, unsigned max_threads);
/* Stop and join the workers; the pool must be idle. */
void zre_pool_destroy(zre_pool *p);
/* Run fn(arg, s) for every s in [0, nshards) and return when all finished.
 * Safe to call from many threads at once. */
void zre_pool_run(zre_pool *p, unsigned nshards, zre_task_fn fn, void *arg);

#endif
