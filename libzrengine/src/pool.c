/*
 * pool.c - persistent worker pool on the zrp_thread/mutex/cond primitives.
 */
#include "pool.h"

#include <stdlib.h>

typedef struct zre_group {
    zre_task_fn fn;
    void *arg;
    unsigned remaining; /* tasks queued or running; guarded by pool lock */
} zre_group;

typedef struct zre_task {
    zre_group *group;
    unsigned shard;
    struct zre_task *next;
} zre_task;

int zre_pool_init(zre_pool *p, unsigned max_threads)
{
    p->threads = NULL;
    p->nthreads = 0;
    p->max_threads = max_threads;
    p->started = false;
    p->stop = false;
    p->head = p->tail = NULL;
    int rc = zrp_mutex_init(&p->lock);
    if (rc < 0)
        return rc;
    rc = zrp_cond_init(&p->work);
    if (rc < 0) {
        zrp_mutex_destroy(&p->lock);
        return rc;
    }
    rc = zrp_cond_init(&p->done);
    if (rc < 0) {
        zrp_cond_destroy(&p->work);
        zrp_mutex_destroy(&p->lock);
        return rc;
    }
    return 0;
}

/* Unlink and return the first queued task (of `group`, or of any group when
 * NULL). Pool lock held. */
static zre_task *take_task(zre_pool *p, const zre_group *group)
{
    zre_task *prev = NULL;
    for (zre_task *t = p->head; t; prev = t, t = t->next) {
        if (group && t->group != group)
            continue;
        if (prev)
            prev->next = t->next;
        else
            p->head = t->next;
        if (p->tail == t)
            p->tail = prev;
        t->next = NULL;
        return t;
    }
    return NULL;
}

/* Run one task outside the lock, then account for it. Pool lock held on
 * entry and exit. */
static void run_task(zre_pool *p, zre_task *t)
{
    zre_group *g = t->group;
    zrp_mutex_unlock(&p->lock);
    g->fn(g->arg, t->shard);
    zrp_mutex_lock(&p->lock);
    g->remaining--;
    zrp_cond_broadcast(&p->done);
}

static void worker_main(void *arg)
{
    zre_pool *p = arg;
    zrp_mutex_lock(&p->lock);
    for (;;) {
        zre_task *t = take_task(p, NULL);
        if (t) {
            run_task(p, t);
            continue;
        }
        if (p->stop)
            break;
        zrp_cond_wait(&p->work, &p->lock);
    }
    zrp_mutex_unlock(&p->lock);
}

/* Start the workers on first use. Pool lock held. A thread that fails to
 * start only means fewer helpers: callers finish their own shards. */
static void start_workers(zre_pool *p)
{
    p->started = true;
    if (p->max_threads == 0)
        return;
    p->threads = calloc(p->max_threads, sizeof *p->threads);
    if (!p->threads)
        return;
    for (unsigned i = 0; i < p->max_threads; i++) {
        if (zrp_thread_start(&p->threads[i], worker_main, p) < 0)
            break;
        p->nthreads++;
    }
}

void zre_pool_run(zre_pool *p, unsigned nshards, zre_task_fn fn, void *arg)
{
    if (nshards == 0)
        return;
    zre_task *tasks = NULL;
    if (nshards > 1 && p->max_threads > 0)
        tasks = calloc(nshards - 1, sizeof *tasks);
    if (!tasks) {
        /* Serial fallback: still correct, only slower. */
        for (unsigned s = 0; s < nshards; s++)
            fn(arg, s);
        return;
    }
    zre_group g = {fn, arg, nshards - 1};
    zrp_mutex_lock(&p->lock);
    if (!p->started)
        start_workers(p);
    for (unsigned s = 1; s < nshards; s++) {
        zre_task *t = &tasks[s - 1];
        t->group = &g;
        t->shard = s;
        t->next = NULL;
        if (p->tail)
            p->tail->next = t;
        else
            p->head = t;
        p->tail = t;
    }
    zrp_cond_broadcast(&p->work);
    zrp_mutex_unlock(&p->lock);

    fn(arg, 0);

    zrp_mutex_lock(&p->lock);
    while (g.remaining > 0) {
        zre_task *t = take_task(p, &g);
        if (t)
            run_task(p, t);
        else
            zrp_cond_wait(&p->done, &p->lock);
    }
    zrp_mutex_unlock(&p->lock);
    free(tasks);
}

void zre_pool_destroy(zre_pool *p)
{
    zrp_mutex_lock(&p->lock);
    p->stop = true;
    zrp_cond_broadcast(&p->work);
    zrp_mutex_unlock(&p->lock);
    for (unsigned i = 0; i < p->nthreads; i++)
        zrp_thread_join(p->threads[i]);
    free(p->threads);
    p->threads = NULL;
    p->nthreads = 0;
    zrp_cond_destroy(&p->done);
    zrp_cond_destroy(&p->work);
    zrp_mutex_destroy(&p->lock);
}
