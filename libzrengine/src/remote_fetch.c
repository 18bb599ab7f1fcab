/*
 * remote_fetch.c - the batch downloads of stores opened by URL: before a
 * gather (or record_sizes), zre_remote_prepare hands the whole batch to
 * the remote/ module: the table entries' blocks, then the records'
 * blocks, are downloaded in parallel range requests (coalesced per
 * object), for every remote engine of the batch at once, and held in
 * memory until the gather has read them. zre_advise's hints become
 * background downloads into the node's cache.
 */
#include <stdlib.h>
#include <string.h>

#include "engine_internal.h"

#ifdef ZRE_HAVE_REMOTE
#include "zr_remote.h"

/* The distinct remote engines of a batch, each with its ranges. */
typedef struct rbatch {
    zre_engine *e;
    zrr_range *r;
    size_t n, cap;
} rbatch;

/* The requests whose blocks a gather holds until it has read them. */
struct zre_rhold {
    size_t n, cap;
    struct {
        zrr_ctx *c;
        zrr_ticket *t;
    } *v;
};

void zre_remote_release(zre_rhold *h)
{
    if (!h)
        return;
    for (size_t i = 0; i < h->n; i++)
        zrr_fetch_release(h->v[i].c, h->v[i].t);
    free(h->v);
    free(h);
}

static int add_range(rbatch *b, struct zrr_obj *o, uint64_t lo, uint64_t hi)
{
    if (b->n == b->cap) {
        size_t cap = b->cap ? 2 * b->cap : 64;
        zrr_range *p = realloc(b->r, cap * sizeof *p);
        if (!p)
            return zr_set_error(ZR_ENOMEM, "gather: out of memory planning downloads");
        b->r = p;
        b->cap = cap;
    }
    b->r[b->n].obj = o;
    b->r[b->n].lo = lo;
    b->r[b->n].hi = hi;
    b->n++;
    return ZR_OK;
}

/* Start every engine's downloads, then wait for all: the engines' worker
 * threads run side by side. The requests join `h`. */
static int run_all(rbatch *bs, size_t nb, zre_rhold *h)
{
    int rc = ZR_OK;
    size_t first = h->n;
    if (h->cap - h->n < nb) {
        size_t cap = h->n + nb + 4;
        void *p = realloc(h->v, cap * sizeof *h->v);
        if (!p)
            return zr_set_error(ZR_ENOMEM, "gather: out of memory planning downloads");
        h->v = p;
        h->cap = cap;
    }
    for (size_t k = 0; k < nb && rc == 0; k++) {
        zrr_ticket *t = NULL;
        rc = zrr_fetch_start(bs[k].e->remote, bs[k].r, bs[k].n, zre_remote_thread_stop(), &t);
        if (t) {
            h->v[h->n].c = bs[k].e->remote;
            h->v[h->n++].t = t;
        }
    }
    for (size_t i = first; i < h->n; i++) {
        int w = zrr_fetch_wait(h->v[i].c, h->v[i].t);
        if (rc == 0)
            rc = w;
    }
    for (size_t k = 0; k < nb; k++)
        bs[k].n = 0;
    return rc;
}

int zre_remote_prepare(zre_engine *const *engines, const uint32_t *which, const uint64_t *index,
                       uint64_t count, int locs_only, zre_rhold **hold)
{
    *hold = calloc(1, sizeof **hold);
    if (!*hold)
        return zr_set_error(ZR_ENOMEM, "gather: out of memory planning downloads");
    /* The remote engines among the batch's (a concatenation names each
     * shard's engine; a plain gather has one). */
    size_t ne = 0;
    rbatch small[8], *bs = small;
    uint64_t span = 1;
    if (which)
        for (uint64_t i = 0; i < count; i++)
            if ((uint64_t)which[i] + 1 > span)
                span = (uint64_t)which[i] + 1;
    size_t *slot = NULL;
    if (span > 1) {
        slot = malloc(span * sizeof *slot);
        bs = calloc(span, sizeof *bs);
        if (!slot || !bs) {
            free(slot);
            free(bs);
            return zr_set_error(ZR_ENOMEM, "gather: out of memory planning downloads");
        }
        for (uint64_t k = 0; k < span; k++)
            slot[k] = SIZE_MAX;
    } else {
        memset(small, 0, sizeof small);
    }
    int rc = ZR_OK;
    /* 1. The table entries: the 16-byte entry of each index. */
    for (uint64_t i = 0; i < count && rc == 0; i++) {
        uint32_t w = which ? which[i] : 0;
        zre_engine *e = engines[w];
        if (!e->remote)
            continue;
        size_t k;
        if (span > 1) {
            if (slot[w] == SIZE_MAX) {
                slot[w] = ne;
                bs[ne++].e = e;
            }
            k = slot[w];
        } else {
            if (ne == 0)
                bs[ne++].e = e;
            k = 0;
        }
        uint64_t seg = index[i] / ZRE_INT_SEG_ENTRIES;
        const zre_fent *ent = zre_fdtab_ent(&e->locs, seg);
        if (!ent || !ent->obj)
            continue; /* the read reports it */
        uint64_t at = (index[i] % ZRE_INT_SEG_ENTRIES) * ZRE_LOC_ENTRY_SIZE;
        rc = add_range(&bs[k], ent->obj, at, at + ZRE_LOC_ENTRY_SIZE);
    }
    if (rc == 0)
        rc = run_all(bs, ne, *hold);
    /* 2. The records' bytes, from the entries now held in memory. */
    if (rc == 0 && !locs_only) {
        for (uint64_t i = 0; i < count && rc == 0; i++) {
            uint32_t w = which ? which[i] : 0;
            zre_engine *e = engines[w];
            if (!e->remote)
                continue;
            size_t k = span > 1 ? slot[w] : 0;
            zre_loc l;
            if (zre_read_loc(e, index[i], &l) < 0)
                continue; /* the gather reports it with its usual message */
            const zre_fent *ent = zre_fdtab_ent(&e->chunks, l.chunk_id);
            if (!ent || !ent->obj || l.phys_length == 0)
                continue;
            rc = add_range(&bs[k], ent->obj, l.offset, (uint64_t)l.offset + l.phys_length);
        }
        if (rc == 0)
            rc = run_all(bs, ne, *hold);
    }
    for (size_t k = 0; k < ne; k++)
        free(bs[k].r);
    if (bs != small)
        free(bs);
    free(slot);
    return rc;
}

void zre_remote_prefetch(zre_engine *e, const uint32_t *chunk, const uint64_t *lo,
                         const uint64_t *hi, size_t n)
{
    zrr_range *r = malloc((n ? n : 1) * sizeof *r);
    if (!r)
        return; /* a hint */
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        const zre_fent *ent = zre_fdtab_ent(&e->chunks, chunk[i]);
        if (!ent || !ent->obj)
            continue;
        r[m].obj = ent->obj;
        r[m].lo = lo[i];
        r[m].hi = hi[i];
        m++;
    }
    zrr_prefetch(e->remote, r, m);
    free(r);
}

int zre_remote_cached_fraction(zre_engine *e, double *fraction)
{
    double in = 0, all = 0;
    for (uint64_t c = 0; c <= e->tail.chunk; c++) {
        const zre_fent *ent = zre_fdtab_ent(&e->chunks, c);
        if (!ent || !ent->obj)
            continue;
        double size = (double)zrr_obj_size(ent->obj);
        in += size * zrr_cached_fraction(ent->obj, 64);
        all += size;
    }
    *fraction = all > 0 ? in / all : 1.0;
    return ZR_OK;
}

#else /* built without libcurl: no engine is remote, nothing to fetch */

int zre_remote_prepare(zre_engine *const *engines, const uint32_t *which, const uint64_t *index,
                       uint64_t count, int locs_only, zre_rhold **hold)
{
    (void)engines;
    (void)which;
    (void)index;
    (void)count;
    (void)locs_only;
    *hold = NULL;
    return ZR_OK;
}

void zre_remote_release(zre_rhold *hold) { (void)hold; }

void zre_remote_prefetch(zre_engine *e, const uint32_t *chunk, const uint64_t *lo,
                         const uint64_t *hi, size_t n)
{
    (void)e;
    (void)chunk;
    (void)lo;
    (void)hi;
    (void)n;
}

int zre_remote_cached_fraction(zre_engine *e, double *fraction)
{
    (void)e;
    *fraction = 1.0;
    return ZR_OK;
}

#endif
