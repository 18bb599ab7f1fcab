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

/* ------------------------------------------------------------ pins */

static bool pin(zrr_blk *k)
{
    uint32_t s = atomic_load_explicit(&k->st, memory_order_acquire);
    for (;;) {
        if ((s & (ZRR_MAPPED | ZRR_DYING)) != ZRR_MAPPED || (s & ZRR_REFS) == ZRR_REFS)
            return false;
        if (atomic_compare_exchange_weak_explicit(&k->st, &s, s + 1, memory_order_acquire,
                                                  memory_order_acquire))
            return true;
    }
}

static void unpin(zrr_blk *k) { atomic_fetch_sub_explicit(&k->st, 1, memory_order_release); }

/* ------------------------------------------------------ downloads */

static int range_cmp(const void *a, const void *b)
{
    const zrr_range *x = a, *y = b;
    if (x->obj != y->obj)
        return (uintptr_t)x->obj < (uintptr_t)y->obj ? -1 : 1;
    return x->lo < y->lo ? -1 : x->lo > y->lo ? 1 : 0;
}

static int ticket_wait_add(zrr_ticket *t, zrr_obj *o, uint32_t b)
{
    if (t->nwait == t->wait_cap) {
        size_t cap = t->wait_cap ? 2 * t->wait_cap : 16;
        void *p = realloc(t->wait, cap * sizeof *t->wait);
        if (!p)
            return -1;
        t->wait = p;
        t->wait_cap = cap;
    }
    t->wait[t->nwait].obj = o;
    t->wait[t->nwait].b = b;
    t->nwait++;
    return 0;
}

/* Longest request, in bytes: big enough to run at link speed, small
 * enough that the parallel connections share a batch. */
#define MAX_REQUEST ((uint64_t)8 << 20)

static int fetch_start(zrr_ctx *c, const zrr_range *in, size_t n, zrr_ticket **ticket, bool wait)
{
    if (ticket)
        *ticket = NULL;
    if (n == 0)
        return ZR_OK;
    zrr_range *r = malloc(n * sizeof *r);
    if (!r)
        return zr_set_error(ZR_ENOMEM, "remote: out of memory for %zu ranges", n);
    memcpy(r, in, n * sizeof *r);
    qsort(r, n, sizeof *r, range_cmp);
    const unsigned shift = c->cfg.block_shift;
    const uint64_t now = zrp_now_ns();
    /* Blocks on disk but not mapped here are mapped first (no lock). */
    for (size_t i = 0; i < n; i++) {
        zrr_obj *o = r[i].obj;
        uint64_t hi = r[i].hi < o->size ? r[i].hi : o->size;
        if (r[i].lo >= hi)
            continue;
        for (uint64_t b = r[i].lo >> shift; b <= (hi - 1) >> shift; b++) {
            zrr_blk *k = &o->blk[b];
            atomic_store_explicit(&k->used_ns, now, memory_order_relaxed);
            uint32_t s = atomic_load(&k->st);
            if (!(s & (ZRR_MAPPED | ZRR_FETCHING)))
                (void)zrr_cache_map(o, (uint32_t)b);
        }
    }
    zrr_ticket *t = calloc(1, sizeof *t);
    if (!t) {
        free(r);
        return zr_set_error(ZR_ENOMEM, "remote: out of memory");
    }
    int rc = ZR_OK;
    zrp_mutex_lock(&c->lock);
    /* The download thread starts with the first download. */
    if (!c->worker_started)
        rc = zrr_worker_start(c);
    zrr_obj *run_obj = NULL;
    uint32_t run_b0 = 0, run_n = 0;
    const uint32_t run_max = (uint32_t)(MAX_REQUEST >> shift) ? (uint32_t)(MAX_REQUEST >> shift) : 1;
    for (size_t i = 0; i < n && rc == 0; i++) {
        zrr_obj *o = r[i].obj;
        uint64_t hi = r[i].hi < o->size ? r[i].hi : o->size;
        if (r[i].lo >= hi)
            continue;
        for (uint64_t b = r[i].lo >> shift; b <= (hi - 1) >> shift && rc == 0; b++) {
            zrr_blk *k = &o->blk[b];
            uint32_t s = atomic_load(&k->st);
            if (s & ZRR_MAPPED)
                continue;
            if (s & ZRR_FETCHING) {
                bool mine = run_obj == o && b >= run_b0 && b < (uint64_t)run_b0 + run_n;
                if (!mine && wait && ticket_wait_add(t, o, (uint32_t)b) < 0)
                    rc = zr_set_error(ZR_ENOMEM, "remote: out of memory");
                continue;
            }
            atomic_fetch_or(&k->st, ZRR_FETCHING);
            if (run_obj == o && b == (uint64_t)run_b0 + run_n && run_n < run_max) {
                run_n++;
                continue;
            }
            if (run_obj)
                rc = zrr_job_queue(c, run_obj, run_b0, run_n, wait ? t : NULL);
            run_obj = o;
            run_b0 = (uint32_t)b;
            run_n = 1;
        }
    }
    if (run_obj && rc == 0)
        rc = zrr_job_queue(c, run_obj, run_b0, run_n, wait ? t : NULL);
    zrp_mutex_unlock(&c->lock);
    zrr_worker_wake(c);
    free(r);
    if (!wait || (t->pending == 0 && t->nwait == 0 && rc == 0)) {
        /* Nothing to wait for (jobs of a prefetch carry no ticket). */
        zrp_mutex_lock(&c->lock);
        bool idle = t->pending == 0;
        zrp_mutex_unlock(&c->lock);
        if (idle) {
            free(t->wait);
            free(t);
            t = NULL;
        }
    }
    if (ticket)
        *ticket = t;
    else if (t) {
        /* cannot happen: without a ticket pointer jobs carry no ticket */
        free(t->wait);
        free(t);
    }
    return rc;
}

int zrr_fetch_start(zrr_ctx *c, const zrr_range *r, size_t n, zrr_ticket **ticket)
{
    int rc = fetch_start(c, r, n, ticket, true);
    return rc < 0 ? fail(rc) : rc;
}

void zrr_prefetch(zrr_ctx *c, const zrr_range *r, size_t n)
{
    (void)fetch_start(c, r, n, NULL, false);
}

static int wait_ticket(zrr_ctx *c, zrr_ticket *t, int depth)
{
    zrp_mutex_lock(&c->lock);
    for (;;) {
        bool busy = t->pending > 0;
        for (size_t i = 0; !busy && i < t->nwait; i++)
            busy = (atomic_load(&t->wait[i].obj->blk[t->wait[i].b].st) & ZRR_FETCHING) != 0;
        if (!busy)
            break;
        (void)zrp_cond_timedwait(&c->cond, &c->lock, 100000000u);
    }
    zrp_mutex_unlock(&c->lock);
    int rc = ZR_OK;
    if (t->err.status < 0)
        rc = zr_set_error(t->err.status, "%s", t->err.msg);
    /* Blocks another request was downloading: if that one failed (or they
     * were evicted since), download them for this caller. */
    zrr_range *again = NULL;
    size_t nagain = 0;
    for (size_t i = 0; rc == 0 && i < t->nwait; i++) {
        zrr_obj *o = t->wait[i].obj;
        uint32_t b = t->wait[i].b;
        if ((atomic_load(&o->blk[b].st) & ZRR_MAPPED) || zrr_cache_map(o, b))
            continue;
        if (!again && !(again = malloc(t->nwait * sizeof *again))) {
            rc = zr_set_error(ZR_ENOMEM, "remote: out of memory");
            break;
        }
        again[nagain].obj = o;
        again[nagain].lo = (uint64_t)b << c->cfg.block_shift;
        again[nagain].hi = again[nagain].lo + zrr_block_len(o, b);
        nagain++;
    }
    free(t->wait);
    free(t);
    if (rc == 0 && nagain > 0) {
        if (depth >= 3) {
            rc = zr_set_error(ZR_EIO, "remote: %zu block(s) of %s could not be kept in the cache "
                              "(downloaded, then evicted, %d times): is ZR_CACHE_BYTES too small "
                              "for one batch?", nagain, again[0].obj->url, depth);
        } else {
            zrr_ticket *t2 = NULL;
            rc = fetch_start(c, again, nagain, &t2, true);
            if (rc == 0 && t2)
                rc = wait_ticket(c, t2, depth + 1);
        }
    }
    free(again);
    return rc;
}

int zrr_fetch_wait(zrr_ctx *c, zrr_ticket *t)
{
    if (!t)
        return ZR_OK;
    int rc = wait_ticket(c, t, 0);
    return rc < 0 ? fail(rc) : rc;
}

/* Make block b readable (mapped) in this process. */
static int ensure(zrr_obj *o, uint32_t b)
{
    if (zrr_cache_map(o, b))
        return ZR_OK;
    zrr_range r = {o, (uint64_t)b << o->ctx->cfg.block_shift, 0};
    r.hi = r.lo + zrr_block_len(o, b);
    zrr_ticket *t = NULL;
    int rc = fetch_start(o->ctx, &r, 1, &t, true);
    if (rc == 0 && t)
        rc = wait_ticket(o->ctx, t, 0);
    return rc;
}

int zrr_pread(zrr_obj *o, void *buf, size_t len, uint64_t off)
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
        for (int tries = 0; !pin(k); tries++) {
            if (tries >= 4)
                return fail(zr_set_error(ZR_EIO, "remote: block %u of %s was evicted %d times "
                                         "before it could be read: is ZR_CACHE_BYTES too small?",
                                         b, o->url, tries));
            int rc = ensure(o, b);
            if (rc < 0)
                return fail(rc);
        }
        memcpy(dst, k->map + in, (size_t)take);
        unpin(k);
        dst += take;
        off += take;
        len -= (size_t)take;
    }
    return ZR_OK;
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
