/*
 * remote.c - the remote module's API (zr_remote.h): a store folder at a
 * URL, its objects, reads through the cache and batched downloads.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>

#include "remote_internal.h"

static _Thread_local int last_status;

int zrr_last_status(void) { return last_status; }

static int fail(int status) { return last_status = status; }

int zrr_open(zrr_ctx **out, const char *url, const _Atomic int *interrupt)
{
    *out = NULL;
    if (!zrr_is_url(url))
        return zr_set_error(ZR_EINVAL, "remote: %s is not an http://, https:// or s3:// URL", url);
    zrr_ctx *c = calloc(1, sizeof *c);
    if (!c)
        return zr_set_error(ZR_ENOMEM, "remote: out of memory");
    int rc = zrr_config_load(&c->cfg, url);
    if (rc < 0) {
        free(c);
        return rc;
    }
    c->url = strdup(url);
    c->interrupt = interrupt;
    if (!c->url || zrp_mutex_init(&c->lock) != 0) {
        zrr_config_free(&c->cfg);
        free(c->url);
        free(c);
        return zr_set_error(ZR_ENOMEM, "remote: out of memory");
    }
    if (zrp_cond_init(&c->cond) != 0) {
        zrp_mutex_destroy(&c->lock);
        zrr_config_free(&c->cfg);
        free(c->url);
        free(c);
        return zr_set_error(ZR_ENOMEM, "remote: out of memory");
    }
    char dir[4200];
    int prc = zrp_mkdir_parents(c->cfg.cache_root);
    snprintf(dir, sizeof dir, "%s/b", c->cfg.cache_root);
    if (prc == 0 && (prc = zrp_mkdir(dir)) == -EEXIST)
        prc = 0;
    snprintf(dir, sizeof dir, "%s/tmp", c->cfg.cache_root);
    if (prc == 0 && (prc = zrp_mkdir(dir)) == -EEXIST)
        prc = 0;
    if (prc < 0) {
        rc = zr_set_error(ZR_EIO, "remote: cannot create the cache folder %s: %s (set ZR_CACHE_DIR "
                          "to a writable folder)", c->cfg.cache_root, zr_os_strerror(prc));
        zrr_close(c);
        return rc;
    }
    curl_global_init(CURL_GLOBAL_DEFAULT);
    c->curl_inited = true;
    *out = c;
    return ZR_OK;
}

void zrr_close(zrr_ctx *c)
{
    if (!c)
        return;
    bool curl_inited = c->curl_inited;
    zrr_worker_stop(c);
    while (c->objs) {
        zrr_obj *o = c->objs;
        c->objs = o->next;
        zrr_cache_release(o);
        free(o->blk);
        free(o->name);
        free(o->url);
        free(o->etag);
        free(o);
    }
    zrp_cond_destroy(&c->cond);
    zrp_mutex_destroy(&c->lock);
    zrr_config_free(&c->cfg);
    free(c->url);
    free(c);
    if (curl_inited)
        curl_global_cleanup();
}

const char *zrr_url(const zrr_ctx *c) { return c->url; }
uint64_t zrr_obj_size(const zrr_obj *o) { return o->size; }
const char *zrr_obj_url(const zrr_obj *o) { return o->url; }

static char *object_url(zrr_ctx *c, const char *name)
{
    char *e = zrr_url_path_escape(name);
    if (!e)
        return NULL;
    size_t n = strlen(c->cfg.base) + strlen(e) + 2;
    char *u = malloc(n);
    if (u)
        snprintf(u, n, "%s/%s", c->cfg.base, e);
    free(e);
    return u;
}

static uint64_t fnv64(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) {
        h ^= b[i];
        h *= UINT64_C(0x100000001b3);
    }
    return h;
}

int zrr_obj_open(zrr_ctx *c, const char *name, zrr_obj **out)
{
    *out = NULL;
    zrp_mutex_lock(&c->lock);
    for (zrr_obj *o = c->objs; o; o = o->next)
        if (strcmp(o->name, name) == 0) {
            *out = o;
            zrp_mutex_unlock(&c->lock);
            return 1;
        }
    zrp_mutex_unlock(&c->lock);
    char *url = object_url(c, name);
    if (!url)
        return zr_set_error(ZR_ENOMEM, "remote: out of memory");
    zrr_resp r;
    memset(&r, 0, sizeof r);
    int rc = zrr_http_head(c, url, &r);
    if (rc <= 0) {
        free(url);
        return rc;
    }
    uint64_t nblocks = (r.total + ((uint64_t)1 << c->cfg.block_shift) - 1) >> c->cfg.block_shift;
    if (nblocks > UINT32_MAX) {
        rc = zr_set_error(ZR_ETOOBIG, "remote: %s is %" PRIu64 " bytes, too large", url, r.total);
        free(url);
        return rc;
    }
    zrr_obj *o = calloc(1, sizeof *o);
    if (o) {
        o->ctx = c;
        o->name = strdup(name);
        o->url = url;
        o->etag = strdup(r.etag);
        o->size = r.total;
        o->nblocks = (uint32_t)nblocks;
        o->blk = calloc(nblocks ? nblocks : 1, sizeof *o->blk);
        o->strong_etag = r.etag[0] == '"';
    }
    if (!o || !o->name || !o->etag || !o->blk) {
        if (o) {
            free(o->name);
            free(o->etag);
            free(o->blk);
            free(o);
        }
        free(url);
        return zr_set_error(ZR_ENOMEM, "remote: out of memory");
    }
    uint64_t h = fnv64(UINT64_C(0xcbf29ce484222325), url, strlen(url) + 1);
    h = fnv64(h, r.etag, strlen(r.etag) + 1);
    unsigned char sz[8];
    for (int i = 0; i < 8; i++)
        sz[i] = (unsigned char)(r.total >> (8 * i));
    o->key = fnv64(h, sz, 8);
    zrp_mutex_lock(&c->lock);
    o->next = c->objs;
    c->objs = o;
    zrp_mutex_unlock(&c->lock);
    *out = o;
    return 1;
}

int zrr_get_small(zrr_ctx *c, const char *name, void **buf, size_t *len, size_t max_len)
{
    char *url = object_url(c, name);
    if (!url)
        return zr_set_error(ZR_ENOMEM, "remote: out of memory");
    int rc = zrr_http_get_all(c, url, buf, len, max_len);
    free(url);
    return rc < 0 ? fail(rc) : rc;
}

/* ------------------------------------------------------- references */

/* A reader's pin: only on a mapped block that is not being unmapped. */
static bool pin(zrr_blk *k)
{
    uint64_t s = atomic_load_explicit(&k->st, memory_order_acquire);
    for (;;) {
        if ((s & (ZRR_MAPPED | ZRR_DYING)) != ZRR_MAPPED)
            return false;
        if (atomic_compare_exchange_weak_explicit(&k->st, &s, s + 1, memory_order_acquire,
                                                  memory_order_acquire))
            return true;
    }
}

void zrr_blk_ref(zrr_blk *k) { atomic_fetch_add_explicit(&k->st, 1, memory_order_acquire); }

void zrr_blk_unref(zrr_blk *k)
{
    uint64_t s = atomic_fetch_sub_explicit(&k->st, 1, memory_order_acq_rel) - 1;
    if ((s & ZRR_REFS) == 0 && (s & ZRR_HEAP))
        (void)zrr_blk_unmap(k); /* a copy kept only for its holders */
}

uint64_t zrr_cache_failures(zrr_ctx *c, char *msg, size_t cap)
{
    zrp_mutex_lock(&c->lock);
    uint64_t n = c->cache_failures;
    if (msg && cap)
        snprintf(msg, cap, "%s", c->cache_failure);
    zrp_mutex_unlock(&c->lock);
    return n;
}

/* ------------------------------------------------------ downloads */

static int held_add(zrr_held **v, size_t *n, size_t *cap, zrr_obj *o, uint32_t b)
{
    if (*n == *cap) {
        size_t nc = *cap ? 2 * *cap : 16;
        void *p = realloc(*v, nc * sizeof **v);
        if (!p)
            return -1;
        *v = p;
        *cap = nc;
    }
    (*v)[*n].obj = o;
    (*v)[*n].b = b;
    ++*n;
    return 0;
}

static int held_cmp(const void *a, const void *b)
{
    const zrr_held *x = a, *y = b;
    if (x->obj != y->obj)
        return (uintptr_t)x->obj < (uintptr_t)y->obj ? -1 : 1;
    return x->b < y->b ? -1 : x->b > y->b ? 1 : 0;
}

void zrr_ticket_free(zrr_ticket *t)
{
    free(t->held);
    free(t->miss);
    free(t);
}

/* Longest request, in bytes: big enough to run at link speed, small
 * enough that the parallel connections share a batch. */
#define MAX_REQUEST ((uint64_t)8 << 20)

/* Queue downloads of the blocks t->miss[0, n) (sorted) that are neither
 * mapped nor already being downloaded, as runs of adjacent blocks (lock
 * held). A run is at most MAX_REQUEST bytes, and short enough that the
 * batch's blocks fill every connection (n blocks over `connections`
 * requests) rather than a few long requests. With t == NULL (a prefetch)
 * the jobs carry no ticket. */
static int queue_missing(zrr_ctx *c, zrr_ticket *t, const zrr_held *miss, size_t n, bool *queued)
{
    const unsigned shift = c->cfg.block_shift;
    uint32_t run_max = (uint32_t)(MAX_REQUEST >> shift) ? (uint32_t)(MAX_REQUEST >> shift) : 1;
    const size_t share = (n + c->cfg.connections - 1) / c->cfg.connections;
    if (share < run_max)
        run_max = share ? (uint32_t)share : 1;
    zrr_obj *run_obj = NULL;
    uint32_t run_b0 = 0, run_n = 0;
    int rc = ZR_OK;
    if (!c->worker_started)
        rc = zrr_worker_start(c); /* the download thread starts with the first download */
    for (size_t i = 0; i < n && rc == 0; i++) {
        zrr_obj *o = miss[i].obj;
        uint32_t b = miss[i].b;
        zrr_blk *k = &o->blk[b];
        if (atomic_load(&k->st) & (ZRR_MAPPED | ZRR_FETCHING))
            continue; /* there, or another request brings it (its ticket's waits see it) */
        atomic_fetch_or(&k->st, ZRR_FETCHING);
        if (run_obj == o && b == run_b0 + run_n && run_n < run_max) {
            run_n++;
            continue;
        }
        if (run_obj)
            rc = zrr_job_queue(c, run_obj, run_b0, run_n, t);
        run_obj = o;
        run_b0 = b;
        run_n = 1;
    }
    if (run_obj && rc == 0)
        rc = zrr_job_queue(c, run_obj, run_b0, run_n, t);
    if (run_obj)
        *queued = true;
    return rc;
}

/* queue_missing under the lock, then wake the download thread when
 * something was queued. */
static int queue_and_wake(zrr_ctx *c, zrr_ticket *t, const zrr_held *miss, size_t n)
{
    bool queued = false;
    zrp_mutex_lock(&c->lock);
    int rc = queue_missing(c, t, miss, n, &queued);
    zrp_mutex_unlock(&c->lock);
    if (queued)
        zrr_worker_wake(c);
    return rc;
}

/* Hold (with a ticket) every block of the ranges, map those another
 * process has cached, and queue downloads of the rest. */
static int fetch_start(zrr_ctx *c, const zrr_range *r, size_t n, const volatile int *interrupt,
                       zrr_ticket **ticket)
{
    *ticket = NULL;
    zrr_ticket *t = calloc(1, sizeof *t);
    if (!t)
        return zr_set_error(ZR_ENOMEM, "remote: out of memory");
    t->interrupt = interrupt;
    const unsigned shift = c->cfg.block_shift;
    const uint64_t now = zrp_now_ns();
    /* The same block is held once per ticket: ranges of one batch fall in
     * few blocks, often not in order (a table entry per index). */
    struct { zrr_obj *obj; uint32_t b; } seen[256];
    memset(seen, 0, sizeof seen);
    uint64_t bytes = 0;
    int rc = ZR_OK;
    for (size_t i = 0; i < n && rc == 0; i++) {
        zrr_obj *o = r[i].obj;
        uint64_t hi = r[i].hi < o->size ? r[i].hi : o->size;
        if (r[i].lo >= hi)
            continue;
        for (uint64_t b = r[i].lo >> shift; b <= (hi - 1) >> shift; b++) {
            unsigned h = (unsigned)((((uintptr_t)o >> 4) * 31u + b) & 255u);
            if (seen[h].obj == o && seen[h].b == b)
                continue;
            seen[h].obj = o;
            seen[h].b = (uint32_t)b;
            zrr_blk *k = &o->blk[b];
            if (held_add(&t->held, &t->nheld, &t->held_cap, o, (uint32_t)b) < 0) {
                rc = zr_set_error(ZR_ENOMEM, "remote: out of memory");
                break;
            }
            zrr_blk_ref(k);
            bytes += zrr_block_len(o, (uint32_t)b);
            if (atomic_load_explicit(&k->used_ns, memory_order_relaxed) != now)
                atomic_store_explicit(&k->used_ns, now, memory_order_relaxed);
            uint64_t s = atomic_load(&k->st);
            if ((s & ZRR_MAPPED) || (!(s & ZRR_FETCHING) && zrr_cache_map(o, (uint32_t)b)))
                continue;
            if (held_add(&t->miss, &t->nmiss, &t->miss_cap, o, (uint32_t)b) < 0)
                rc = zr_set_error(ZR_ENOMEM, "remote: out of memory");
        }
    }
    /* More than the cap for one request: its blocks stream through memory
     * (held until released) instead of evicting each other. */
    t->nocache = bytes > c->cfg.cache_bytes;
    if (rc == 0 && t->nmiss > 0) {
        qsort(t->miss, t->nmiss, sizeof *t->miss, held_cmp);
        rc = queue_and_wake(c, t, t->miss, t->nmiss);
    }
    *ticket = t; /* released by the caller, whatever happened */
    return rc;
}

int zrr_fetch_start(zrr_ctx *c, const zrr_range *r, size_t n, const volatile int *interrupt,
                    zrr_ticket **ticket)
{
    int rc = fetch_start(c, r, n, interrupt, ticket);
    return rc < 0 ? fail(rc) : rc;
}

void zrr_fetch_release(zrr_ctx *c, zrr_ticket *t)
{
    if (!t)
        return;
    for (size_t i = 0; i < t->nheld; i++)
        zrr_blk_unref(&t->held[i].obj->blk[t->held[i].b]);
    free(t->held);
    free(t->miss);
    t->held = t->miss = NULL;
    t->nheld = t->nmiss = 0;
    zrp_mutex_lock(&c->lock);
    bool free_now = t->pending == 0;
    if (!free_now) {
        /* Its jobs are still queued or running: the last one frees it, and
         * the worker aborts those nobody else waits for. */
        t->abandoned = true;
        atomic_store(&t->gone, true);
    }
    zrp_mutex_unlock(&c->lock);
    if (free_now)
        zrr_ticket_free(t); /* nothing queued for it: the worker has nothing to do */
    else
        zrr_worker_wake(c); /* to abort the jobs nobody else waits for */
}

void zrr_prefetch(zrr_ctx *c, const zrr_range *r, size_t n)
{
    /* No holds: a hint. Blocks already there or on the way are skipped;
     * more than the cap at once would only evict itself, so it is not
     * prefetched at all. */
    const unsigned shift = c->cfg.block_shift;
    zrr_held *miss = NULL;
    size_t nmiss = 0, cap = 0;
    uint64_t bytes = 0;
    for (size_t i = 0; i < n; i++) {
        zrr_obj *o = r[i].obj;
        uint64_t hi = r[i].hi < o->size ? r[i].hi : o->size;
        if (r[i].lo >= hi)
            continue;
        for (uint64_t b = r[i].lo >> shift; b <= (hi - 1) >> shift; b++) {
            uint64_t s = atomic_load(&o->blk[b].st);
            if ((s & (ZRR_MAPPED | ZRR_FETCHING)) || zrr_cache_map(o, (uint32_t)b))
                continue;
            bytes += zrr_block_len(o, (uint32_t)b);
            if (held_add(&miss, &nmiss, &cap, o, (uint32_t)b) < 0)
                goto out;
        }
    }
    if (nmiss > 0 && bytes <= c->cfg.cache_bytes / 2) {
        qsort(miss, nmiss, sizeof *miss, held_cmp);
        (void)queue_and_wake(c, NULL, miss, nmiss);
    }
out:
    free(miss);
}

static bool stopped(zrr_ctx *c, const zrr_ticket *t)
{
    return atomic_load(&c->stop) || (c->interrupt && atomic_load(c->interrupt)) ||
           (t->interrupt && *t->interrupt);
}

/* Wait until the ticket's jobs are over and none of its missing blocks is
 * being downloaded, writing downloaded blocks meanwhile (lock held). */
static int wait_jobs(zrr_ctx *c, zrr_ticket *t)
{
    for (;;) {
        if (stopped(c, t))
            return atomic_load(&c->stop) ? ZR_ECLOSED : ZR_EINTR;
        if (zrr_job_store_one(c))
            continue;
        bool busy = t->pending > 0;
        for (size_t i = 0; !busy && i < t->nmiss; i++)
            busy = (atomic_load(&t->miss[i].obj->blk[t->miss[i].b].st) & ZRR_FETCHING) != 0;
        if (!busy)
            return ZR_OK;
        c->idle_waiters++;
        (void)zrp_cond_timedwait(&c->cond, &c->lock, 50000000u);
        c->idle_waiters--;
    }
}

int zrr_fetch_wait(zrr_ctx *c, zrr_ticket *t)
{
    if (!t || t->nmiss == 0)
        return ZR_OK;
    for (;;) {
        zrp_mutex_lock(&c->lock);
        int rc = wait_jobs(c, t);
        zrr_err_buf err = t->err;
        zrp_mutex_unlock(&c->lock);
        if (rc < 0)
            return fail(zr_set_error(rc, "remote: %s %s", zrr_url(c),
                                     rc == ZR_ECLOSED ? "is being closed" : "interrupted"));
        if (err.status < 0)
            return fail(zr_set_error(err.status, "%s", err.msg));
        /* Blocks another request was downloading: if that one failed (or
         * could not keep them), download them for this one. */
        size_t left = 0;
        for (size_t i = 0; i < t->nmiss; i++) {
            zrr_obj *o = t->miss[i].obj;
            uint32_t b = t->miss[i].b;
            if (!(atomic_load(&o->blk[b].st) & ZRR_MAPPED) && !zrr_cache_map(o, b))
                t->miss[left++] = t->miss[i];
        }
        t->nmiss = left;
        if (left == 0)
            return ZR_OK;
        if (++t->rounds > 3)
            return fail(zr_set_error(ZR_EIO, "remote: block %u of %s: other requests' downloads "
                                     "of it ended %u times without it (the last by one that failed "
                                     "or was interrupted); giving up", t->miss[0].b,
                                     t->miss[0].obj->url, t->rounds - 1));
        rc = queue_and_wake(c, t, t->miss, t->nmiss);
        if (rc < 0)
            return fail(rc);
    }
}

int zrr_pread(zrr_obj *o, void *buf, size_t len, uint64_t off, const volatile int *interrupt)
{
    if (off > o->size || len > o->size - off)
        return fail(ZRP_ESHORT);
    const unsigned shift = o->ctx->cfg.block_shift;
    unsigned char *dst = buf;
    while (len > 0) {
        uint32_t b = (uint32_t)(off >> shift);
        uint64_t in = off - ((uint64_t)b << shift);
        uint64_t take = ((uint64_t)1 << shift) - in;
        if (take > len)
            take = len;
        zrr_blk *k = &o->blk[b];
        if (pin(k)) {
            memcpy(dst, k->map + in, (size_t)take);
            zrr_blk_unref(k);
        } else {
            /* Not here: a request of its own holds it until copied. */
            zrr_range r = {o, (uint64_t)b << shift, ((uint64_t)b << shift) + zrr_block_len(o, b)};
            zrr_ticket *t = NULL;
            int rc = fetch_start(o->ctx, &r, 1, interrupt, &t);
            if (rc == 0)
                rc = zrr_fetch_wait(o->ctx, t);
            if (rc == 0)
                memcpy(dst, k->map + in, (size_t)take); /* held and mapped */
            zrr_fetch_release(o->ctx, t);
            if (rc < 0)
                return fail(rc);
        }
        dst += take;
        off += take;
        len -= (size_t)take;
    }
    return ZR_OK;
}

const unsigned char *zrr_held_span(zrr_obj *o, uint64_t off, size_t len)
{
    if (len == 0 || off > o->size || len > o->size - off)
        return NULL;
    const unsigned shift = o->ctx->cfg.block_shift;
    uint32_t b = (uint32_t)(off >> shift);
    if ((off + len - 1) >> shift != b)
        return NULL; /* spans two blocks: the caller copies it with zrr_pread */
    const zrr_blk *k = &o->blk[b];
    uint64_t s = atomic_load_explicit(&k->st, memory_order_acquire);
    if ((s & (ZRR_MAPPED | ZRR_DYING)) != ZRR_MAPPED || (s & ZRR_REFS) == 0)
        return NULL; /* not in memory, or not held */
    return k->map + (off - ((uint64_t)b << shift));
}

double zrr_cached_fraction(zrr_obj *o, unsigned samples)
{
    if (o->nblocks == 0)
        return 1.0;
    if (samples > o->nblocks)
        samples = o->nblocks;
    unsigned in = 0;
    for (unsigned i = 0; i < samples; i++) {
        uint32_t b = (uint32_t)((uint64_t)i * o->nblocks / samples);
        if ((atomic_load(&o->blk[b].st) & ZRR_MAPPED) || zrr_cache_map(o, b))
            in++;
    }
    return samples ? (double)in / samples : 1.0;
}
