/*
 * concat.c - many stores of one identity read as one stream (zrs_concat).
 *
 * A dataset written by many writers in parallel is many stores ("shards").
 * A concatenation reads them in order as one index space: shard k holds the
 * global indices [offset[k], offset[k+1]), offset being the prefix sums of
 * the shard lengths taken when the concatenation is made. Index i goes to
 * (shard, local) by a binary search over those prefix sums (with a fast
 * path for runs of indices in one shard).
 *
 * Gathers never copy a record twice: the batch's (shard, local) pairs go to
 * zre_gather_multi, which reads every record straight into its final
 * position in the caller's buffer, sharded over the CPUs exactly like one
 * store's gather. Record sizes and readahead hints are per-shard calls on
 * the indices grouped by shard (small index arrays only, never record
 * bytes).
 */
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "zr_platform.h"
#include "zrs_internal.h"

struct zrs_concat {
    size_t n;            /* shards, >= 1 */
    zrs_store **stores;  /* [n] */
    zre_engine **engines;/* [n], borrowed from the stores */
    uint64_t *offset;    /* [n + 1] prefix sums of the shard lengths */
    int owns;            /* 1: opened here, closed by zrs_concat_close */
    zrs_kind kind;
    zrs_dtype dtype;
    size_t ndim;
    uint64_t shape[ZRS_MAX_NDIM];
    uint64_t record_size;
    double per_record;   /* n / length: the proportional guess of a shard */
    size_t nborrowed;    /* stores[0..nborrowed) are borrowed (zrs_borrow) */
    _Atomic long refs;   /* the owner (until zrs_concat_close) + borrowers */
    _Atomic int closed;  /* zrs_concat_close was called */
};

/* Index counts up to this use stack scratch (no malloc). */
#define SMALL 64

/* --------------------------------------------------------------- helpers */

/* "dense <f4 (28, 28)" / "ragged <i4" into buf. */
static void describe(char *buf, size_t cap, zrs_kind kind, zrs_dtype dtype, size_t ndim,
                     const uint64_t *shape)
{
    int w = snprintf(buf, cap, "%s %s", kind == ZRS_DENSE ? "dense" : "ragged",
                     zrs_dtype_str(dtype) ? zrs_dtype_str(dtype) : "?");
    if (kind != ZRS_DENSE || w < 0 || (size_t)w >= cap)
        return;
    size_t at = (size_t)w;
    at += (size_t)snprintf(buf + at, cap - at, " (");
    for (size_t d = 0; d < ndim && at < cap; d++)
        at += (size_t)snprintf(buf + at, cap - at, "%s%" PRIu64, d ? ", " : "", shape[d]);
    if (at < cap)
        snprintf(buf + at, cap - at, ndim == 1 ? ",)" : ")");
}

/* Check shard k against shard 0's identity (already in c). */
static int check_identity(const zrs_concat *c, size_t k, zrs_store *s)
{
    zrs_kind kind = zrs_get_kind(s);
    zrs_dtype dtype = zrs_get_dtype(s);
    size_t ndim = zrs_item_ndim(s);
    const uint64_t *shape = zrs_item_shape(s);
    const char *what = NULL;
    if (kind != c->kind)
        what = "kind";
    else if (dtype != c->dtype)
        what = "dtype";
    else if (kind == ZRS_DENSE &&
             (ndim != c->ndim || (ndim > 0 && memcmp(shape, c->shape, ndim * sizeof *shape) != 0)))
        what = "item_shape";
    if (what == NULL)
        return ZR_OK;
    char a[256], b[256];
    describe(a, sizeof a, c->kind, c->dtype, c->ndim, c->shape);
    describe(b, sizeof b, kind, dtype, ndim, shape);
    return zr_set_error(ZR_EINVAL, "concat: shards differ in %s: shard 0 (%s) is %s, shard %zu (%s) "
                        "is %s", what, zrs_path(c->stores[0]), a, k, zrs_path(s), b);
}

static void concat_free(zrs_concat *c)
{
    if (c == NULL)
        return;
    for (size_t k = 0; k < c->nborrowed; k++)
        zrs_unborrow(c->stores[k]); /* frees a shard its owner closed already */
    free(c->stores);
    free(c->engines);
    free(c->offset);
    free(c);
}

/* Build the concatenation over stores[0..n) (checked, not yet owned). */
static int build(zrs_concat **out, zrs_store *const *stores, size_t n, int owns)
{
    zrs_concat *c = calloc(1, sizeof *c);
    if (c == NULL)
        return zr_set_error(ZR_ENOMEM, "concat: out of memory");
    c->n = n;
    c->owns = owns;
    c->stores = malloc(n * sizeof *c->stores);
    c->engines = malloc(n * sizeof *c->engines);
    c->offset = malloc((n + 1) * sizeof *c->offset);
    if (c->stores == NULL || c->engines == NULL || c->offset == NULL) {
        concat_free(c);
        return zr_set_error(ZR_ENOMEM, "concat: out of memory for %zu shards", n);
    }
    c->kind = zrs_get_kind(stores[0]);
    c->dtype = zrs_get_dtype(stores[0]);
    c->ndim = zrs_item_ndim(stores[0]);
    if (c->ndim > 0)
        memcpy(c->shape, zrs_item_shape(stores[0]), c->ndim * sizeof *c->shape);
    c->record_size = zrs_record_size(stores[0]);
    c->offset[0] = 0;
    atomic_init(&c->refs, 1);
    atomic_init(&c->closed, 0);
    for (size_t k = 0; k < n; k++) {
        c->stores[k] = stores[k];
        int rc = zrs_borrow(stores[k]);
        if (rc != ZR_OK) {
            char msg[600];
            snprintf(msg, sizeof msg, "%s", zr_last_error());
            concat_free(c);
            return zr_set_error(rc, "concat: shard %zu: %s", k, msg);
        }
        c->nborrowed = k + 1;
        c->engines[k] = zrs_engine(stores[k]);
        rc = check_identity(c, k, stores[k]);
        if (rc != ZR_OK) {
            concat_free(c);
            return rc;
        }
        uint64_t len = zrs_length(stores[k]);
        if (len > (uint64_t)INT64_MAX - c->offset[k]) {
            concat_free(c);
            return zr_set_error(ZR_EINVAL, "concat: %zu shards hold more than INT64_MAX records "
                                "(at shard %zu, %s)", n, k, zrs_path(stores[k]));
        }
        c->offset[k + 1] = c->offset[k] + len;
    }
    c->per_record = c->offset[n] ? (double)n / (double)c->offset[n] : 0.0;
    *out = c;
    return ZR_OK;
}

/* ---------------------------------------------------------------- create */

int zrs_concat_create(zrs_concat **out, zrs_store *const *stores, size_t nstores)
{
    if (out == NULL)
        return zr_set_error(ZR_EINVAL, "concat: NULL output handle");
    *out = NULL;
    if (stores == NULL || nstores == 0)
        return zr_set_error(ZR_EINVAL, "concat: no shards, expected at least 1 store");
    if (nstores > UINT32_MAX || nstores > SIZE_MAX / sizeof(uint64_t) - 1)
        return zr_set_error(ZR_EINVAL, "concat: %zu shards are too many (at most %u)", nstores,
                            UINT32_MAX);
    for (size_t k = 0; k < nstores; k++)
        if (stores[k] == NULL)
            return zr_set_error(ZR_EINVAL, "concat: shard %zu is NULL", k);
    return build(out, stores, nstores, 0);
}

/* A shard set at a URL: its manifest, "shards.zr", lists the shards (one
 * name a line, relative to the set's URL, after the line "loaderx-shards
 * 1"); zrs_push_shards writes it after every shard is complete. */
#define SHARDS_MANIFEST "shards.zr"
#define SHARDS_MAGIC "loaderx-shards 1\n"
#define SHARDS_MANIFEST_MAX (16u << 20)

int zrs_shard_urls(const char *url, char ***urls, size_t *count)
{
    if (url == NULL || urls == NULL || count == NULL)
        return zr_set_error(ZR_EINVAL, "shard_urls: NULL argument");
    *urls = NULL;
    *count = 0;
    void *buf = NULL;
    size_t len = 0;
    int rc = zre_url_get(url, SHARDS_MANIFEST, &buf, &len, SHARDS_MANIFEST_MAX);
    if (rc == ZR_ENOTSTORE)
        return ZR_OK; /* 404: not a shard set */
    if (rc < 0)
        return rc;
    const size_t ml = strlen(SHARDS_MAGIC);
    char *text = malloc(len + 1);
    if (text == NULL) {
        zre_free(buf);
        return zr_set_error(ZR_ENOMEM, "concat: out of memory reading %s/" SHARDS_MANIFEST, url);
    }
    memcpy(text, buf, len);
    text[len] = '\0';
    zre_free(buf);
    if (len < ml || memcmp(text, SHARDS_MAGIC, ml) != 0 || strlen(text) != len) {
        free(text);
        return zr_set_error(ZR_ENOTSTORE, "concat: %s/" SHARDS_MANIFEST " is not a shard list "
                            "(expected a first line \"loaderx-shards 1\")", url);
    }
    size_t n = 0;
    for (char *p = text + ml; *p; p++)
        n += *p == '\n';
    char **paths = calloc(n ? n : 1, sizeof *paths);
    size_t k = 0;
    rc = paths ? ZR_OK : zr_set_error(ZR_ENOMEM, "concat: out of memory");
    for (char *line = text + ml; rc == ZR_OK && *line;) {
        char *nl = strchr(line, '\n');
        if (nl == NULL)
            nl = line + strlen(line);
        size_t l = (size_t)(nl - line);
        if (l == 0 || memchr(line, '/', l) != NULL || (l <= 2 && line[0] == '.')) {
            rc = zr_set_error(ZR_ENOTSTORE, "concat: %s/" SHARDS_MANIFEST " line %zu is not a "
                              "shard name", url, k + 2);
            break;
        }
        size_t cap = strlen(url) + l + 2;
        paths[k] = malloc(cap);
        if (paths[k] == NULL) {
            rc = zr_set_error(ZR_ENOMEM, "concat: out of memory");
            break;
        }
        snprintf(paths[k], cap, "%s/%.*s", url, (int)l, line);
        k++;
        line = *nl ? nl + 1 : nl;
    }
    if (rc == ZR_OK && k == 0)
        rc = zr_set_error(ZR_ENOTSTORE, "concat: %s/" SHARDS_MANIFEST " lists no shards", url);
    free(text);
    if (rc < 0) {
        zrs_free_list(paths, k);
        return rc;
    }
    *urls = paths;
    *count = k;
    return ZR_OK;
}

void zrs_free_list(char **list, size_t count)
{
    for (size_t j = 0; list && j < count; j++)
        free(list[j]);
    free(list);
}

static int open_manifest(zrs_concat **out, const char *url, unsigned flags, int *found)
{
    *found = 0;
    char **paths = NULL;
    size_t k = 0;
    int rc = zrs_shard_urls(url, &paths, &k);
    if (rc < 0 || k == 0)
        return rc; /* no manifest: one store */
    *found = 1;
    rc = zrs_concat_open(out, (const char *const *)paths, k, flags);
    zrs_free_list(paths, k);
    return rc;
}

int zrs_push_shards(const char *const *paths, size_t npaths, const char *url,
                    void (*progress)(uint64_t done, uint64_t total, void *arg), void *arg)
{
    if (paths == NULL || npaths == 0 || url == NULL)
        return zr_set_error(ZR_EINVAL, "push: no shards or no URL");
    size_t cap = strlen(SHARDS_MAGIC) + 1;
    for (size_t k = 0; k < npaths; k++)
        cap += (paths[k] ? strlen(paths[k]) : 0) + 1;
    char *man = malloc(cap);
    if (man == NULL)
        return zr_set_error(ZR_ENOMEM, "push: out of memory");
    strcpy(man, SHARDS_MAGIC);
    size_t used = strlen(man);
    int rc = ZR_OK;
    for (size_t k = 0; k < npaths && rc == ZR_OK; k++) {
        if (paths[k] == NULL) {
            rc = zr_set_error(ZR_EINVAL, "push: shard %zu is NULL", k);
            break;
        }
        /* The shard's folder name, without trailing separators. */
        size_t end = strlen(paths[k]);
        while (end > 1 && zrp_is_path_sep(paths[k][end - 1]))
            end--;
        size_t start = end;
        while (start > 0 && !zrp_is_path_sep(paths[k][start - 1]))
            start--;
        size_t l = end - start;
        if (l == 0 || (l <= 2 && paths[k][start] == '.')) {
            rc = zr_set_error(ZR_EINVAL, "push: shard path %s has no folder name", paths[k]);
            break;
        }
        char *dst = malloc(strlen(url) + l + 2);
        if (dst == NULL) {
            rc = zr_set_error(ZR_ENOMEM, "push: out of memory");
            break;
        }
        sprintf(dst, "%s/%.*s", url, (int)l, paths[k] + start);
        memcpy(man + used, paths[k] + start, l);
        used += l;
        man[used++] = '\n';
        man[used] = '\0';
        rc = zrs_push(paths[k], dst, progress, arg);
        free(dst);
    }
    /* The manifest last: the set is readable only once every shard is. */
    if (rc == ZR_OK)
        rc = zre_url_put(url, SHARDS_MANIFEST, man, used);
    free(man);
    return rc;
}

int zrs_concat_open(zrs_concat **out, const char *const *paths, size_t npaths, unsigned flags)
{
    if (out == NULL)
        return zr_set_error(ZR_EINVAL, "concat: NULL output handle");
    *out = NULL;
    if (paths == NULL || npaths == 0)
        return zr_set_error(ZR_EINVAL, "concat: no shards, expected at least 1 path");
    if (npaths == 1 && paths[0] != NULL && zre_is_remote(paths[0])) {
        int found = 0;
        int rc = open_manifest(out, paths[0], flags, &found);
        if (rc < 0 || found)
            return rc;
    }
    if (npaths > UINT32_MAX || npaths > SIZE_MAX / sizeof(uint64_t) - 1)
        return zr_set_error(ZR_EINVAL, "concat: %zu shards are too many (at most %u)", npaths,
                            UINT32_MAX);
    zrs_store **st = calloc(npaths, sizeof *st);
    if (st == NULL)
        return zr_set_error(ZR_ENOMEM, "concat: out of memory for %zu shards", npaths);
    int rc = ZR_OK;
    size_t k = 0;
    for (; k < npaths && rc == ZR_OK; k++) {
        if (paths[k] == NULL)
            rc = zr_set_error(ZR_EINVAL, "concat: path %zu is NULL", k);
        else
            rc = zrs_open_ex(&st[k], paths[k], flags);
    }
    if (rc == ZR_OK)
        rc = build(out, st, npaths, 1);
    if (rc != ZR_OK) {
        char msg[1024];
        snprintf(msg, sizeof msg, "%s", zr_last_error());
        for (size_t j = 0; j < npaths; j++)
            zrs_close(st[j]);
        zr_set_error(rc, "%s", msg);
    }
    free(st);
    return rc;
}

int zrs_concat_close(zrs_concat *c)
{
    if (c == NULL)
        return ZR_OK;
    if (atomic_exchange(&c->closed, 1))
        return ZR_OK;
    int rc = ZR_OK;
    if (c->owns) { /* durable and unlocked now; freed with our borrows */
        for (size_t k = 0; k < c->n; k++) {
            int r = zrs_close(c->stores[k]);
            if (rc == ZR_OK)
                rc = r;
        }
    }
    zrs_concat_unborrow(c); /* the owner's reference */
    return rc;
}

int zrs_concat_borrow(zrs_concat *c)
{
    if (c == NULL)
        return zr_set_error(ZR_EINVAL, "concat borrow: NULL concat handle");
    if (atomic_load(&c->closed))
        return zr_set_error(ZR_ECLOSED, "concat borrow: the concatenation of '%s' is closed",
                            zrs_path(c->stores[0]));
    atomic_fetch_add(&c->refs, 1);
    return ZR_OK;
}

void zrs_concat_unborrow(zrs_concat *c)
{
    if (c != NULL && atomic_fetch_sub(&c->refs, 1) == 1)
        concat_free(c);
}

int zrs_concat_borrowers(const zrs_concat *cc)
{
    if (cc == NULL)
        return 0;
    zrs_concat *c = (zrs_concat *)cc;
    int closed = atomic_load(&c->closed);
    return zrs__borrowers(atomic_load(&c->refs), closed);
}

int zrs_concat_is_closed(const zrs_concat *c)
{
    if (c == NULL)
        return 0;
    if (atomic_load(&((zrs_concat *)c)->closed))
        return 1;
    for (size_t k = 0; k < c->n; k++)
        if (zrs_is_closed(c->stores[k]))
            return 1;
    return 0;
}

/* ZR_ECLOSED once the owner closed the concatenation (its memory lives on
 * while borrowed). */
static int check_open(const zrs_concat *c, const char *what)
{
    if (!atomic_load(&((zrs_concat *)c)->closed))
        return ZR_OK;
    return zr_set_error(ZR_ECLOSED, "%s: the concatenation of '%s' (%zu shards) was closed "
                        "while a loader read it", what, zrs_path(c->stores[0]), c->n);
}

/* The shards a direct engine gather touches stay open until it returns
 * (zrs__enter): every shard when there are no more shards than records,
 * else the shard of each record (entered once per record). */
static void leave_shards(const zrs_concat *c, const uint32_t *shard, uint64_t count, uint64_t upto)
{
    for (uint64_t i = 0; i < upto; i++)
        zrs__leave(c->stores[c->n <= count ? i : shard[i]]);
}

static int enter_shards(const zrs_concat *c, const char *what, const uint32_t *shard,
                        uint64_t count)
{
    int rc = check_open(c, what);
    if (rc != ZR_OK)
        return rc;
    uint64_t m = c->n <= count ? c->n : count;
    for (uint64_t i = 0; i < m; i++) {
        rc = zrs__enter(c->stores[c->n <= count ? i : shard[i]], what);
        if (rc != ZR_OK) {
            leave_shards(c, shard, count, i);
            return rc;
        }
    }
    return ZR_OK;
}

static void leave_all(const zrs_concat *c, const uint32_t *shard, uint64_t count)
{
    leave_shards(c, shard, count, c->n <= count ? c->n : count);
}

/* ------------------------------------------------------------- accessors */

uint64_t zrs_concat_length(const zrs_concat *c) { return c ? c->offset[c->n] : 0; }
size_t zrs_concat_count(const zrs_concat *c) { return c ? c->n : 0; }
zrs_store *zrs_concat_shard(zrs_concat *c, size_t k)
{
    return (c && k < c->n) ? c->stores[k] : NULL;
}
uint64_t zrs_concat_offset(const zrs_concat *c, size_t k)
{
    return (c && k <= c->n) ? c->offset[k] : 0;
}
zrs_kind zrs_concat_kind(const zrs_concat *c) { return c ? c->kind : ZRS_DENSE; }
zrs_dtype zrs_concat_dtype(const zrs_concat *c) { return c ? c->dtype : ZRS_DTYPE_COUNT; }
size_t zrs_concat_item_ndim(const zrs_concat *c)
{
    return (c && c->kind == ZRS_DENSE) ? c->ndim : 0;
}
const uint64_t *zrs_concat_item_shape(const zrs_concat *c)
{
    return (c && c->kind == ZRS_DENSE) ? c->shape : NULL;
}
uint64_t zrs_concat_record_size(const zrs_concat *c) { return c ? c->record_size : 0; }

uint64_t zrs_concat_data_bytes(zrs_concat *c)
{
    uint64_t total = 0;
    for (size_t k = 0; c && k < c->n; k++) {
        uint64_t b = zrs_data_bytes(c->stores[k]);
        total = total > UINT64_MAX - b ? UINT64_MAX : total + b;
    }
    return total;
}

int zrs_concat_resident_fraction(zrs_concat *c, double *fraction)
{
    if (c == NULL || fraction == NULL)
        return zr_set_error(ZR_EINVAL, "concat resident_fraction: %s is NULL",
                            c == NULL ? "concatenation" : "fraction");
    double cached = 0, total = 0;
    for (size_t k = 0; k < c->n; k++) {
        double f;
        int rc = zrs_resident_fraction(c->stores[k], &f);
        if (rc != ZR_OK)
            return rc;
        double b = (double)zrs_data_bytes(c->stores[k]);
        cached += f * b;
        total += b;
    }
    *fraction = total > 0 ? cached / total : 1.0;
    return ZR_OK;
}

int zrs_concat_check_aligned(const zrs_concat *a, const zrs_concat *b)
{
    if (a == NULL || b == NULL)
        return zr_set_error(ZR_EINVAL, "concat: NULL handle");
    if (a->n != b->n)
        return zr_set_error(ZR_EINVAL, "concat: streams must be sharded alike to stay "
                            "index-aligned, but one has %zu shards (first %s) and the other %zu "
                            "(first %s)", a->n, zrs_path(a->stores[0]), b->n,
                            zrs_path(b->stores[0]));
    for (size_t k = 0; k < a->n; k++) {
        uint64_t la = a->offset[k + 1] - a->offset[k], lb = b->offset[k + 1] - b->offset[k];
        if (la != lb)
            return zr_set_error(ZR_EINVAL, "concat: shard %zu differs in length between aligned "
                                "streams: %s has %" PRIu64 " records, %s has %" PRIu64, k,
                                zrs_path(a->stores[k]), la, zrs_path(b->stores[k]), lb);
    }
    return ZR_OK;
}

/* --------------------------------------------------------------- indices */

/* The shard holding global index i (< length): the last k with
 * offset[k] <= i (empty shards are skipped because their offset equals
 * the next one's). */
static uint32_t shard_of(const zrs_concat *c, uint64_t i)
{
    const uint64_t *off = c->offset;
    /* Shards are usually of similar lengths: guess by proportion and check
     * the guess and its neighbours first. */
    size_t k = (size_t)((double)i * c->per_record);
    if (k >= c->n)
        k = c->n - 1;
    for (int tries = 0; tries < 2; tries++) {
        if (i < off[k])
            k--;
        else if (i >= off[k + 1])
            k++;
        else
            return (uint32_t)k;
    }
    /* Branch-free halving (a conditional move per step). */
    size_t lo = 0, len = c->n; /* offset[lo] <= i < offset[lo + len] */
    while (len > 1) {
        size_t half = len / 2;
        lo = off[lo + half] <= i ? lo + half : lo;
        len -= half;
    }
    return (uint32_t)lo;
}

int zrs_concat_locate(const zrs_concat *c, const int64_t *index, uint64_t count,
                      uint32_t *shard, uint64_t *local)
{
    if (c == NULL)
        return zr_set_error(ZR_EINVAL, "concat: NULL handle");
    if (count == 0)
        return ZR_OK;
    if (index == NULL || shard == NULL || local == NULL)
        return zr_set_error(ZR_EINVAL, "concat: NULL %s with count %" PRIu64,
                            index == NULL ? "index" : shard == NULL ? "shard" : "local", count);
    const uint64_t length = c->offset[c->n];
    uint32_t k = 0;
    for (uint64_t i = 0; i < count; i++) {
        int64_t v = index[i];
        uint64_t g;
        if (v >= 0) {
            g = (uint64_t)v;
            if (g >= length)
                goto range;
        } else {
            uint64_t mag = (uint64_t)(-(v + 1)) + 1;
            if (mag > length)
                goto range;
            g = length - mag;
        }
        /* Runs of nearby indices usually stay in the previous shard. */
        if (g < c->offset[k] || g >= c->offset[k + 1])
            k = shard_of(c, g);
        shard[i] = k;
        local[i] = g - c->offset[k];
        continue;
    range:
        return zr_set_error(ZR_ERANGE, "index %" PRId64 " is out of range for %zu concatenated "
                            "shards of %" PRIu64 " records", v, c->n, length);
    }
    return ZR_OK;
}

/* Scratch for located indices: stack when small, else heap. */
typedef struct located {
    uint32_t small_shard[SMALL];
    uint64_t small_local[SMALL];
    uint32_t *shard;
    uint64_t *local;
    void *heap;
} located;

static int locate_tmp(const zrs_concat *c, const char *what, const int64_t *index, uint64_t count,
                      located *t)
{
    t->heap = NULL;
    t->shard = t->small_shard;
    t->local = t->small_local;
    if (count > SMALL) {
        if (count > SIZE_MAX / 12)
            return zr_set_error(ZR_ENOMEM, "%s: %" PRIu64 " indices do not fit in memory", what,
                                count);
        t->heap = malloc((size_t)count * (sizeof(uint64_t) + sizeof(uint32_t)));
        if (t->heap == NULL)
            return zr_set_error(ZR_ENOMEM, "%s: out of memory for %" PRIu64 " indices", what, count);
        t->local = t->heap;
        t->shard = (uint32_t *)(t->local + count);
    }
    int rc = zrs_concat_locate(c, index, count, t->shard, t->local);
    if (rc != ZR_OK) {
        free(t->heap);
        t->heap = NULL;
    }
    return rc;
}

/* Run op(store, local indices of shard k, count_k, out_k) for every shard
 * holding some of the located indices, with its results scattered back to
 * out[i] (out may be NULL). Grouping is a counting sort by shard. */
static int per_shard(zrs_concat *c, const char *what, const located *t, uint64_t count,
                     uint64_t *out, int (*op)(zrs_store *, const int64_t *, uint64_t, uint64_t *))
{
    uint64_t *start = calloc(c->n + 1, sizeof *start);
    uint64_t *order = malloc((size_t)count * sizeof *order);
    int64_t *idx = malloc((size_t)count * sizeof *idx);
    uint64_t *res = out ? malloc((size_t)count * sizeof *res) : NULL;
    int rc = ZR_OK;
    if (start == NULL || order == NULL || idx == NULL || (out && res == NULL)) {
        rc = zr_set_error(ZR_ENOMEM, "%s: out of memory grouping %" PRIu64 " indices by shard",
                          what, count);
        goto done;
    }
    for (uint64_t i = 0; i < count; i++)
        start[t->shard[i] + 1]++;
    for (size_t k = 0; k < c->n; k++)
        start[k + 1] += start[k];
    {
        uint64_t *fill = calloc(c->n, sizeof *fill);
        if (fill == NULL) {
            rc = zr_set_error(ZR_ENOMEM, "%s: out of memory", what);
            goto done;
        }
        for (uint64_t i = 0; i < count; i++) {
            uint32_t k = t->shard[i];
            uint64_t at = start[k] + fill[k]++;
            order[at] = i;
            idx[at] = (int64_t)t->local[i];
        }
        free(fill);
    }
    for (size_t k = 0; k < c->n && rc == ZR_OK; k++) {
        uint64_t lo = start[k], n = start[k + 1] - lo;
        if (n > 0)
            rc = op(c->stores[k], idx + lo, n, res ? res + lo : NULL);
    }
    if (rc == ZR_OK && out)
        for (uint64_t at = 0; at < count; at++)
            out[order[at]] = res[at];
done:
    free(start);
    free(order);
    free(idx);
    free(res);
    return rc;
}

static int check_kind(const zrs_concat *c, const char *what, zrs_kind want)
{
    if (c == NULL)
        return zr_set_error(ZR_EINVAL, "%s: NULL concat handle", what);
    if (c->kind != want)
        return zr_set_error(ZR_EINVAL, "%s: the shards (first %s) are %s, this call is for %s "
                            "stores", what, zrs_path(c->stores[0]),
                            c->kind == ZRS_DENSE ? "dense" : "ragged",
                            want == ZRS_DENSE ? "dense" : "ragged");
    return ZR_OK;
}

/* ---------------------------------------------------------------- gather */

int zrs_concat_gather_dense(zrs_concat *c, const int64_t *index, uint64_t count, void *dst,
                            uint64_t dst_capacity)
{
    int rc = check_kind(c, "concat gather", ZRS_DENSE);
    if (rc != ZR_OK || count == 0)
        return rc;
    if (index == NULL || dst == NULL)
        return zr_set_error(ZR_EINVAL, "concat gather: NULL %s with count %" PRIu64,
                            index == NULL ? "index" : "dst", count);
    uint64_t rs = c->record_size;
    if (count > UINT64_MAX / rs || dst_capacity < count * rs)
        return zr_set_error(ZR_EINVAL, "concat gather: dst holds %" PRIu64 " bytes, need count x "
                            "record_size = %" PRIu64 " x %" PRIu64, dst_capacity, count, rs);
    located t;
    rc = locate_tmp(c, "concat gather", index, count, &t);
    if (rc != ZR_OK)
        return rc;
    rc = enter_shards(c, "concat gather", t.shard, count);
    if (rc == ZR_OK) {
        rc = zre_gather_multi(c->engines, c->n, t.shard, t.local, count, dst, dst_capacity, rs,
                              NULL);
        leave_all(c, t.shard, count);
    }
    free(t.heap);
    return rc;
}

static int sizes_op(zrs_store *s, const int64_t *idx, uint64_t n, uint64_t *out)
{
    return zrs_ragged_sizes(s, idx, n, out);
}

static int advise_op(zrs_store *s, const int64_t *idx, uint64_t n, uint64_t *out)
{
    (void)out;
    return zrs_advise(s, idx, n);
}

int zrs_concat_ragged_sizes(zrs_concat *c, const int64_t *index, uint64_t count, uint64_t *sizes)
{
    int rc = check_kind(c, "concat ragged_sizes", ZRS_RAGGED);
    if (rc != ZR_OK || count == 0)
        return rc;
    if (index == NULL || sizes == NULL)
        return zr_set_error(ZR_EINVAL, "concat ragged_sizes: NULL %s with count %" PRIu64,
                            index == NULL ? "index" : "sizes", count);
    rc = check_open(c, "concat ragged_sizes");
    if (rc != ZR_OK)
        return rc;
    located t;
    rc = locate_tmp(c, "concat ragged_sizes", index, count, &t);
    if (rc != ZR_OK)
        return rc;
    if (c->n == 1) {
        rc = zrs_ragged_sizes(c->stores[0], (const int64_t *)t.local, count, sizes);
    } else {
        rc = per_shard(c, "concat ragged_sizes", &t, count, sizes, sizes_op);
    }
    free(t.heap);
    return rc;
}

int zrs_concat_gather_ragged(zrs_concat *c, const int64_t *index, uint64_t count, void *dst,
                             uint64_t dst_capacity, const uint64_t *bounds)
{
    int rc = check_kind(c, "concat gather_ragged", ZRS_RAGGED);
    if (rc != ZR_OK || count == 0)
        return rc;
    if (index == NULL || dst == NULL || bounds == NULL)
        return zr_set_error(ZR_EINVAL, "concat gather_ragged: NULL %s with count %" PRIu64,
                            index == NULL ? "index" : dst == NULL ? "dst" : "bounds", count);
    located t;
    rc = locate_tmp(c, "concat gather_ragged", index, count, &t);
    if (rc != ZR_OK)
        return rc;
    rc = enter_shards(c, "concat gather_ragged", t.shard, count);
    if (rc == ZR_OK) {
        rc = zre_gather_multi(c->engines, c->n, t.shard, t.local, count, dst, dst_capacity, 0,
                              bounds);
        leave_all(c, t.shard, count);
    }
    if (rc == ZR_OK) {
        /* The engine checked sizes and frames; the shape prefix is ours. */
        const unsigned char *base = dst;
        char why[ZRS_WHY_MAX];
        for (uint64_t i = 0; i < count; i++) {
            if (zrs__ragged_check(base + bounds[i], bounds[i + 1] - bounds[i], c->dtype, NULL,
                                  NULL, NULL, why) != 0) {
                rc = zr_set_error(ZR_ECORRUPT, "concat gather_ragged: shard %u (%s): record at "
                                  "index %" PRId64 " (shard index %" PRIu64 ") %s", t.shard[i],
                                  zrs_path(c->stores[t.shard[i]]), index[i], t.local[i], why);
                break;
            }
        }
    }
    free(t.heap);
    return rc;
}

int zrs_concat_advise(zrs_concat *c, const int64_t *index, uint64_t count)
{
    if (c == NULL)
        return zr_set_error(ZR_EINVAL, "concat advise: NULL concat handle");
    if (count == 0)
        return ZR_OK;
    if (index == NULL)
        return zr_set_error(ZR_EINVAL, "concat advise: NULL index with count %" PRIu64, count);
    int rc = check_open(c, "concat advise");
    if (rc != ZR_OK)
        return rc;
    located t;
    rc = locate_tmp(c, "concat advise", index, count, &t);
    if (rc != ZR_OK)
        return rc;
    if (c->n == 1)
        rc = zrs_advise(c->stores[0], (const int64_t *)t.local, count);
    else
        rc = per_shard(c, "concat advise", &t, count, NULL, advise_op);
    free(t.heap);
    return rc;
}
