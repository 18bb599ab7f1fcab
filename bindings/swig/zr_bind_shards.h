/*
 * zr_bind_shards.h - many stores as one dataset, for the bindings:
 * concatenated shards (zrs_concat), weighted mixtures (zld_mixture),
 * loaders over them, and uploads to URLs (zrs_push).
 *
 * The C calls take arrays (of paths, of handles, of weights); a binding
 * fills a zr_bind_set one item at a time instead, so one piece of C serves
 * every language with plain scalar arguments and no array typemap of its
 * own (zr_bind_shards.i wraps these functions for Lua and Go; the Python
 * module calls zr_bind_loader_create from its own glue). Every check lives
 * in the C libraries; this file only collects the arguments. Header-only.
 */
#ifndef ZR_BIND_SHARDS_H
#define ZR_BIND_SHARDS_H

#include <zloader.h>
#include <zrerror_sys.h>
#include <stdlib.h>
#include <string.h>

/* One item of a set: a path or name (copied), a store, a concatenation, a
 * mixture's stream, a mixture source's weight and mode, or a generic
 * loader stream (a copy of its zld_stream, e.g. an mrec source's). */
typedef enum zr_bind_item_kind {
    ZR_BIND_PATH, ZR_BIND_STORE, ZR_BIND_CONCAT, ZR_BIND_MIXTURE, ZR_BIND_WEIGHT, ZR_BIND_STREAM
} zr_bind_item_kind;

typedef struct zr_bind_item {
    zr_bind_item_kind kind;
    void *p;       /* the handle, or the copied path */
    size_t stream; /* ZR_BIND_MIXTURE: which of the mixture's streams */
    double weight; /* ZR_BIND_WEIGHT */
    zsm_mode mode; /* ZR_BIND_WEIGHT */
} zr_bind_item;

struct zr_bind_set {
    size_t n, cap;
    zr_bind_item *items;
};

static inline int zr_bind_set_push(struct zr_bind_set *set, zr_bind_item it)
{
    if (set == NULL)
        return zr_set_error(ZR_EINVAL, "shards: the list is NULL");
    if (set->n == set->cap) {
        size_t cap = set->cap ? 2 * set->cap : 8;
        zr_bind_item *a = (zr_bind_item *)realloc(set->items, cap * sizeof *a);
        if (a == NULL)
            return zr_set_error(ZR_ENOMEM, "shards: out of memory for %zu items", cap);
        set->items = a;
        set->cap = cap;
    }
    set->items[set->n++] = it;
    return ZR_OK;
}

/* The items of `set`, all of kind `kind`, into *out: a malloc'd array of
 * their pointers. ZR_EINVAL (`what` naming the list) when one is of
 * another kind. */
static inline int zr_bind_set_pointers(const struct zr_bind_set *set, zr_bind_item_kind kind,
                                const char *what, void ***out)
{
    if (set == NULL)
        return zr_set_error(ZR_EINVAL, "%s: the list is NULL", what);
    void **a = (void **)malloc((set->n ? set->n : 1) * sizeof *a);
    if (a == NULL)
        return zr_set_error(ZR_ENOMEM, "%s: out of memory for %zu items", what, set->n);
    for (size_t k = 0; k < set->n; k++) {
        if (set->items[k].kind != kind) {
            free(a);
            return zr_set_error(ZR_EINVAL, "%s: item %zu is not a %s", what, k,
                                kind == ZR_BIND_PATH ? "path" : kind == ZR_BIND_STORE ? "store"
                                : "concatenation");
        }
        a[k] = set->items[k].p;
    }
    *out = a;
    return ZR_OK;
}

/* An ordered list of paths, handles or weights, the argument of the calls
 * below; free it with zr_bind_set_free (NULL: no-op). */
typedef struct zr_bind_set zr_bind_set;

static inline zr_bind_set *zr_bind_set_new(void)
{
    return (zr_bind_set *)calloc(1, sizeof(zr_bind_set));
}

static inline void zr_bind_set_free(zr_bind_set *set)
{
    if (set == NULL)
        return;
    for (size_t k = 0; k < set->n; k++)
        if (set->items[k].kind == ZR_BIND_PATH || set->items[k].kind == ZR_BIND_STREAM)
            free(set->items[k].p);
    free(set->items);
    free(set);
}

/* Append a store path or URL (copied). */
static inline int zr_bind_set_add_path(zr_bind_set *set, const char *path)
{
    if (path == NULL)
        return zr_set_error(ZR_EINVAL, "shards: a path is NULL");
    size_t n = strlen(path) + 1;
    char *copy = (char *)malloc(n);
    if (copy == NULL)
        return zr_set_error(ZR_ENOMEM, "shards: out of memory for a path");
    memcpy(copy, path, n);
    zr_bind_item it = { ZR_BIND_PATH, copy, 0, 0.0, ZSM_CYCLIC };
    int rc = zr_bind_set_push(set, it);
    if (rc < 0)
        free(copy);
    return rc;
}

/* Append an open store, a concatenation, stream `stream` of a mixture
 * (borrowed: they must outlive whatever is made from the set). */
static inline int zr_bind_set_add_store(zr_bind_set *set, zrs_store *s)
{
    zr_bind_item it = { ZR_BIND_STORE, s, 0, 0.0, ZSM_CYCLIC };
    return s ? zr_bind_set_push(set, it) : zr_set_error(ZR_EINVAL, "shards: a store is not open");
}

/* Append a generic loader stream: *st is copied, st->user borrowed (it
 * must outlive whatever is made from the set). */
static inline int zr_bind_set_add_stream(zr_bind_set *set, const zld_stream *st)
{
    if (st == NULL)
        return zr_set_error(ZR_EINVAL, "shards: a stream is NULL");
    zld_stream *copy = (zld_stream *)malloc(sizeof *copy);
    if (copy == NULL)
        return zr_set_error(ZR_ENOMEM, "shards: out of memory for a stream");
    *copy = *st;
    zr_bind_item it = { ZR_BIND_STREAM, copy, 0, 0.0, ZSM_CYCLIC };
    int rc = zr_bind_set_push(set, it);
    if (rc < 0)
        free(copy);
    return rc;
}

static inline int zr_bind_set_add_concat(zr_bind_set *set, zrs_concat *c)
{
    zr_bind_item it = { ZR_BIND_CONCAT, c, 0, 0.0, ZSM_CYCLIC };
    return c ? zr_bind_set_push(set, it)
             : zr_set_error(ZR_EINVAL, "shards: a concatenation is not open");
}

static inline int zr_bind_set_add_mixture(zr_bind_set *set, zld_mixture *m, size_t stream)
{
    zr_bind_item it = { ZR_BIND_MIXTURE, m, stream, 0.0, ZSM_CYCLIC };
    return m ? zr_bind_set_push(set, it) : zr_set_error(ZR_EINVAL, "shards: a mixture is not open");
}

/* Append a mixture source's weight and mode (by name: "cyclic", "iid",
 * "sequential"; zsm_mode_parse's error for another). */
static inline int zr_bind_set_add_weight(zr_bind_set *set, double weight, const char *mode)
{
    zsm_mode m = ZSM_CYCLIC;
    if (zsm_mode_parse(mode ? mode : "cyclic", &m) < 0)
        return zr_set_error(ZR_EINVAL, "mixture: unknown sampler mode '%s' (expected "
                            "'sequential', 'iid' or 'cyclic')", mode);
    zr_bind_item it = { ZR_BIND_WEIGHT, NULL, 0, weight, m };
    return zr_bind_set_push(set, it);
}

static inline size_t zr_bind_set_count(const zr_bind_set *set)
{
    return set ? set->n : 0;
}

/* zrs_concat_open over the set's paths (flags as zrs_open_ex: a URL needs
 * ZRE_OPEN_READONLY). */
static inline int zr_bind_concat_open(zrs_concat **out, const zr_bind_set *paths, unsigned flags)
{
    void **a = NULL;
    int rc0 = zr_bind_set_pointers(paths, ZR_BIND_PATH, "concat", &a);
    if (rc0 < 0)
        return rc0;
    int rc = zrs_concat_open(out, (const char *const *)a, paths->n, flags);
    free(a);
    return rc;
}

/* zrs_concat_create over the set's open stores (borrowed). */
static inline int zr_bind_concat_create(zrs_concat **out, const zr_bind_set *stores)
{
    void **a = NULL;
    int rc0 = zr_bind_set_pointers(stores, ZR_BIND_STORE, "concat", &a);
    if (rc0 < 0)
        return rc0;
    int rc = zrs_concat_create(out, (zrs_store *const *)a, stores->n);
    free(a);
    return rc;
}

/* Dimension k of a dense concatenation's item shape (0 past its ndim). */
static inline uint64_t zr_bind_concat_dim(const zrs_concat *c, size_t k)
{
    const uint64_t *shape = zrs_concat_item_shape(c);
    return (shape != NULL && k < zrs_concat_item_ndim(c)) ? shape[k] : 0;
}

/* Upload the local store `path` to `url` (zrs_push, no progress). */
static inline int zr_bind_push(const char *path, const char *url)
{
    return zrs_push(path, url, NULL, NULL);
}

/* Upload the set's local shard paths to `url` as a shard set
 * (zrs_push_shards: the manifest last). */
static inline int zr_bind_push_shards(const zr_bind_set *paths, const char *url)
{
    void **a = NULL;
    int rc0 = zr_bind_set_pointers(paths, ZR_BIND_PATH, "push", &a);
    if (rc0 < 0)
        return rc0;
    int rc = zrs_push_shards((const char *const *)a, paths->n, url, NULL, NULL);
    free(a);
    return rc;
}

/* zld_mixture_create: `concats` holds nsources * nstreams concatenations,
 * source-major (stream s of source k at k * nstreams + s); `weights` one
 * weight item per source. */
static inline int zr_bind_mixture_create(zld_mixture **out, const zr_bind_set *concats,
                           const zr_bind_set *weights, size_t nstreams, uint64_t seed,
                           uint64_t batch_size, uint32_t world_size)
{
    if (weights == NULL || nstreams == 0 || concats == NULL ||
        concats->n != weights->n * nstreams)
        return zr_set_error(ZR_EINVAL, "mixture: expected %zu x %zu stream handles, got %zu",
                            weights ? weights->n : 0, nstreams, concats ? concats->n : 0);
    void **a = NULL;
    int rc0 = zr_bind_set_pointers(concats, ZR_BIND_CONCAT, "mixture", &a);
    if (rc0 < 0)
        return rc0;
    size_t ns = weights->n;
    double *w = (double *)malloc((ns ? ns : 1) * sizeof *w);
    zsm_mode *md = (zsm_mode *)malloc((ns ? ns : 1) * sizeof *md);
    int rc = (w && md) ? ZR_OK : zr_set_error(ZR_ENOMEM, "mixture: out of memory");
    for (size_t k = 0; rc == ZR_OK && k < ns; k++) {
        if (weights->items[k].kind != ZR_BIND_WEIGHT)
            rc = zr_set_error(ZR_EINVAL, "mixture: weight %zu is not a weight", k);
        w[k] = weights->items[k].weight;
        md[k] = weights->items[k].mode;
    }
    if (rc == ZR_OK)
        rc = zld_mixture_create(out, (zrs_concat *const *)a, ns, nstreams, w, md, seed,
                                batch_size, world_size);
    free(a);
    free(w);
    free(md);
    return rc;
}

/* Where virtual index `virt` of a mixture loader's batch comes from
 * (zld_mixture_locate): *mix_source, and *mix_index inside that source. */
static inline int zr_bind_mixture_locate(const zld_mixture *m, uint64_t virt, uint64_t *mix_source,
                           uint64_t *mix_index)
{
    uint32_t src = 0;
    int rc = zld_mixture_locate(m, &virt, 1, &src, mix_index);
    *mix_source = src;
    return rc;
}

/* A loader over the set's streams: stores, concatenations, mixture
 * streams and generic streams, in order. Concatenations read side by side must be sharded
 * alike (zrs_concat_check_aligned against the first one). */
static inline int zr_bind_loader_create(zld_loader **out, const zr_bind_set *streams,
                          const zld_options *options)
{
    if (streams == NULL)
        return zr_set_error(ZR_EINVAL, "loader: the stream list is NULL");
    zld_stream *st = (zld_stream *)calloc(streams->n ? streams->n : 1, sizeof *st);
    if (st == NULL)
        return zr_set_error(ZR_ENOMEM, "loader: out of memory for %zu streams", streams->n);
    zrs_concat *first = NULL;
    int rc = ZR_OK;
    for (size_t k = 0; k < streams->n && rc == ZR_OK; k++) {
        const zr_bind_item *it = &streams->items[k];
        switch (it->kind) {
        case ZR_BIND_STORE:
            rc = zld_stream_from_store(&st[k], (zrs_store *)it->p);
            break;
        case ZR_BIND_CONCAT:
            if (first != NULL)
                rc = zrs_concat_check_aligned(first, (zrs_concat *)it->p);
            else
                first = (zrs_concat *)it->p;
            if (rc == ZR_OK)
                rc = zld_stream_from_concat(&st[k], (zrs_concat *)it->p);
            break;
        case ZR_BIND_MIXTURE:
            rc = zld_mixture_stream((zld_mixture *)it->p, it->stream, &st[k]);
            break;
        case ZR_BIND_STREAM:
            st[k] = *(const zld_stream *)it->p;
            break;
        default:
            rc = zr_set_error(ZR_EINVAL, "loader: stream %zu is not a store, a concatenation "
                              "or a mixture stream", k);
        }
    }
    if (rc == ZR_OK)
        rc = zld_create_streams(out, st, streams->n, options);
    free(st);
    return rc;
}

#endif
