/*
 * shards.c - loader streams over many stores: concatenations (zrs_concat)
 * and weighted mixtures of several datasets (zld_mixture).
 *
 * A mixture is presented to the loader as ordinary streams, one per name,
 * so the loader itself needs nothing new: the loader runs in sequential
 * mode over a virtual index space of length L (a multiple of the global
 * batch G), whose window for step s and rank r is the virtual indices
 * s * G + r * B + j (mod L). Each mixture stream decodes a virtual index v
 * back into (step v / G, position v % G), asks the sampler's mixture
 * (zsm_mixture_positions) for the (source, index) there, and gathers from
 * one concatenation of every source's shards of that name, at the source's
 * base offset plus its index. The batch is therefore a pure function of
 * (seed, step, rank) like any loader batch, and records land straight in
 * the batch buffer (zrs_concat -> zre_gather_multi), never copied twice.
 */
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "zloader.h"
#include "zld_shards.h"

/* Index counts up to this decode into stack scratch (no malloc). */
#define SMALL 64

/* ------------------------------------------------------- concat streams */

static int concat_gather(void *user, const uint64_t *index, uint64_t count, void *dst,
                         uint64_t dst_capacity, const uint64_t *bounds)
{
    /* Loader indices are < length <= INT64_MAX. */
    if (bounds == NULL)
        return zrs_concat_gather_dense(user, (const int64_t *)index, count, dst, dst_capacity);
    return zrs_concat_gather_ragged(user, (const int64_t *)index, count, dst, dst_capacity,
                                    bounds);
}

static int concat_sizes(void *user, const uint64_t *index, uint64_t count, uint64_t *sizes)
{
    return zrs_concat_ragged_sizes(user, (const int64_t *)index, count, sizes);
}

static int concat_advise(void *user, const uint64_t *index, uint64_t count)
{
    return zrs_concat_advise(user, (const int64_t *)index, count);
}

/* A concatenation stream's lifetime hooks (zld_stream): a borrow. */
static int concat_hold(void *user) { return zrs_concat_borrow(user); }
static void concat_release(void *user) { zrs_concat_unborrow(user); }
static int concat_closed(void *user, char *msg, size_t cap)
{
    if (!zrs_concat_is_closed(user))
        return 0;
    snprintf(msg, cap, "the concatenation of '%s' (or one of its stores) was closed while "
             "a loader read it", zrs_path(zrs_concat_shard(user, 0)));
    return 1;
}

/* Fill *out for a concatenation (borrowed); the name is shard 0's path. */
static void concat_stream(zld_stream *out, zrs_concat *c)
{
    memset(out, 0, sizeof *out);
    out->user = c;
    out->name = zrs_path(zrs_concat_shard(c, 0));
    out->length = zrs_concat_length(c);
    if (zrs_concat_kind(c) == ZRS_DENSE) {
        out->kind = ZLD_STREAM_DENSE;
        out->record_size = zrs_concat_record_size(c);
    } else {
        out->kind = ZLD_STREAM_RAGGED;
        out->sizes = concat_sizes;
    }
    out->gather = concat_gather;
    out->advise = concat_advise;
    out->hold = concat_hold;
    out->release = concat_release;
    out->closed = concat_closed;
}

int zld_stream_from_concat(zld_stream *out, zrs_concat *concat)
{
    if (out == NULL || concat == NULL)
        return zr_set_error(ZR_EINVAL, "zld_stream_from_concat: %s is NULL",
                            out == NULL ? "out" : "concat");
    concat_stream(out, concat);
    return ZR_OK;
}

/* -------------------------------------------------------------- mixture */

typedef struct mix_stream {
    struct zld_mixture *m;
    zrs_concat *all; /* every source's shards of this name, source order */
    char *name;
} mix_stream;

struct zld_mixture {
    size_t nsources, nstreams;
    double *weights;
    uint64_t *lengths;
    zsm_mode *modes;
    uint64_t *base;  /* [nsources] first index of source k in each `all` */
    size_t *shard_first; /* [nsources + 1] first shard of source k in each `all` */
    zsm_mixture cfg; /* points into the arrays above */
    uint64_t g;      /* global batch */
    uint64_t length; /* virtual length, a multiple of g */
    mix_stream *streams;
    zrs_concat **sources; /* [nsources * nstreams] borrowed (zrs_concat_borrow) */
    size_t nborrowed;     /* sources[0..nborrowed) are borrowed */
    _Atomic long refs;    /* the owner (until zld_mixture_free) + loaders */
    _Atomic int closed;   /* zld_mixture_free was called */
};

static void mixture_destroy(zld_mixture *m)
{
    for (size_t k = 0; k < m->nborrowed; k++)
        zrs_concat_unborrow(m->sources[k]);
    free(m->sources);
    for (size_t s = 0; m->streams && s < m->nstreams; s++) {
        zrs_concat_close(m->streams[s].all); /* borrowed stores: not closed */
        free(m->streams[s].name);
    }
    free(m->streams);
    free(m->weights);
    free(m->lengths);
    free(m->modes);
    free(m->base);
    free(m->shard_first);
    free(m);
}

static void mixture_release(zld_mixture *m)
{
    if (atomic_fetch_sub(&m->refs, 1) == 1)
        mixture_destroy(m);
}

void zld_mixture_free(zld_mixture *m)
{
    if (m == NULL || atomic_exchange(&m->closed, 1))
        return;
    mixture_release(m); /* the owner's reference; a loader may hold more */
}

/* Decode virtual indices into global indices of the `all` concatenations
 * (the same for every stream: sources keep one base per source), and
 * optionally the (source, index) pairs. */
static int mix_decode(const zld_mixture *m, const uint64_t *virt, uint64_t count,
                      uint32_t *source, uint64_t *local, int64_t *global, uint64_t *scratch)
{
    for (uint64_t i = 0; i < count;) {
        if (virt[i] >= m->length)
            return zr_set_error(ZR_ERANGE, "mixture: virtual index %" PRIu64 " out of range "
                                "(length %" PRIu64 ")", virt[i], m->length);
        const uint64_t step = virt[i] / m->g, p = virt[i] % m->g;
        uint64_t run = 1; /* consecutive positions of one step */
        while (i + run < count && virt[i + run] == virt[i] + run && p + run < m->g)
            run++;
        if (zsm_mixture_positions(&m->cfg, step, p, run, source + i, local + i,
                                  scratch ? scratch + i : NULL) != ZSM_OK)
            return zr_set_error(ZR_EINVAL, "mixture: the sampler refused step %" PRIu64, step);
        if (global)
            for (uint64_t j = i; j < i + run; j++)
                global[j] = (int64_t)(m->base[source[j]] + local[j]);
        i += run;
    }
    return ZR_OK;
}

/* Scratch for decoded indices: stack when small, else heap. */
typedef struct decoded {
    uint32_t small_src[SMALL];
    uint64_t small_loc[SMALL];
    int64_t small_glob[SMALL];
    uint64_t small_scr[SMALL];
    uint32_t *src;
    uint64_t *loc;
    int64_t *glob;
    uint64_t *scr;
    void *heap;
} decoded;

static int decode_tmp(const mix_stream *ms, const uint64_t *virt, uint64_t count, decoded *d)
{
    d->heap = NULL;
    d->src = d->small_src;
    d->loc = d->small_loc;
    d->glob = d->small_glob;
    d->scr = d->small_scr;
    if (count > SMALL) {
        if (count > SIZE_MAX / 28)
            return zr_set_error(ZR_ENOMEM, "mixture: %" PRIu64 " indices do not fit in memory",
                                count);
        d->heap = malloc((size_t)count * 28);
        if (d->heap == NULL)
            return zr_set_error(ZR_ENOMEM, "mixture: out of memory for %" PRIu64 " indices",
                                count);
        d->loc = d->heap;
        d->glob = (int64_t *)(d->loc + count);
        d->scr = (uint64_t *)(d->glob + count);
        d->src = (uint32_t *)(d->scr + count);
    }
    int rc = mix_decode(ms->m, virt, count, d->src, d->loc, d->glob, d->scr);
    if (rc != ZR_OK) {
        free(d->heap);
        d->heap = NULL;
    }
    return rc;
}

static int mix_gather(void *user, const uint64_t *index, uint64_t count, void *dst,
                      uint64_t dst_capacity, const uint64_t *bounds)
{
    const mix_stream *ms = user;
    decoded d;
    int rc = decode_tmp(ms, index, count, &d);
    if (rc != ZR_OK)
        return rc;
    rc = bounds == NULL
             ? zrs_concat_gather_dense(ms->all, d.glob, count, dst, dst_capacity)
             : zrs_concat_gather_ragged(ms->all, d.glob, count, dst, dst_capacity, bounds);
    free(d.heap);
    return rc;
}

static int mix_sizes(void *user, const uint64_t *index, uint64_t count, uint64_t *sizes)
{
    const mix_stream *ms = user;
    decoded d;
    int rc = decode_tmp(ms, index, count, &d);
    if (rc != ZR_OK)
        return rc;
    rc = zrs_concat_ragged_sizes(ms->all, d.glob, count, sizes);
    free(d.heap);
    return rc;
}

static int mix_advise(void *user, const uint64_t *index, uint64_t count)
{
    const mix_stream *ms = user;
    decoded d;
    int rc = decode_tmp(ms, index, count, &d);
    if (rc != ZR_OK)
        return rc;
    rc = zrs_concat_advise(ms->all, d.glob, count);
    free(d.heap);
    return rc;
}

/* zld_mixture_create in phases: the arguments, the sources (weights,
 * modes, alignment, offsets), the sampler over the virtual index space,
 * and one concatenation per stream name. Each phase sets the error
 * detail; the caller frees the half-built mixture. */

static int mixture_args(zrs_concat *const *concats, size_t nsources, size_t nstreams,
                        const double *weights, const zsm_mode *modes)
{
    if (concats == NULL || weights == NULL || modes == NULL)
        return zr_set_error(ZR_EINVAL, "mixture: NULL %s", concats == NULL ? "concats"
                            : weights == NULL ? "weights" : "modes");
    if (nsources == 0 || nsources > ZSM_MIXTURE_MAX_SOURCES || nstreams == 0 ||
        nstreams > SIZE_MAX / sizeof(mix_stream) / nsources)
        return zr_set_error(ZR_EINVAL, "mixture: %zu sources x %zu streams; need 1..%u sources "
                            "and at least 1 stream", nsources, nstreams,
                            ZSM_MIXTURE_MAX_SOURCES);
    for (size_t i = 0; i < nsources * nstreams; i++)
        if (concats[i] == NULL)
            return zr_set_error(ZR_EINVAL, "mixture: source %zu stream %zu is NULL",
                                i / nstreams, i % nstreams);
    return ZR_OK;
}

static zld_mixture *mixture_alloc(size_t nsources, size_t nstreams)
{
    zld_mixture *m = calloc(1, sizeof *m);
    if (m == NULL)
        return NULL;
    m->nsources = nsources;
    m->nstreams = nstreams;
    m->weights = malloc(nsources * sizeof *m->weights);
    m->lengths = malloc(nsources * sizeof *m->lengths);
    m->modes = malloc(nsources * sizeof *m->modes);
    m->base = malloc(nsources * sizeof *m->base);
    m->shard_first = malloc((nsources + 1) * sizeof *m->shard_first);
    m->streams = calloc(nstreams, sizeof *m->streams);
    m->sources = calloc(nsources * nstreams, sizeof *m->sources);
    atomic_init(&m->refs, 1);
    atomic_init(&m->closed, 0);
    if (!m->weights || !m->lengths || !m->modes || !m->base || !m->shard_first || !m->streams ||
        !m->sources) {
        zld_mixture_free(m);
        return NULL;
    }
    return m;
}

/* Each source's streams aligned, non-empty, a valid weight and mode; its
 * offset (records and shards) in the per-stream concatenations. */
static int mixture_sources(zld_mixture *m, zrs_concat *const *concats, const double *weights,
                           const zsm_mode *modes)
{
    const size_t nstreams = m->nstreams;
    uint64_t base = 0;
    size_t shards = 0;
    for (size_t k = 0; k < m->nsources; k++) {
        zrs_concat *const *src = concats + k * nstreams;
        for (size_t s = 1; s < nstreams; s++) {
            int rc = zrs_concat_check_aligned(src[0], src[s]);
            if (rc != ZR_OK) {
                char msg[900];
                snprintf(msg, sizeof msg, "%s", zr_last_error());
                return zr_set_error(rc, "mixture: source %zu, streams 0 and %zu: %s", k, s, msg);
            }
        }
        uint64_t len = zrs_concat_length(src[0]);
        if (len == 0)
            return zr_set_error(ZR_EINVAL, "mixture: source %zu (%s) is empty", k,
                                zrs_path(zrs_concat_shard(src[0], 0)));
        if (!(weights[k] > 0.0) || weights[k] != weights[k] || weights[k] > 1e300)
            return zr_set_error(ZR_EINVAL, "mixture: weight %zu is %g, expected a finite number "
                                "> 0", k, weights[k]);
        if (zsm_mode_name(modes[k]) == NULL)
            return zr_set_error(ZR_EINVAL, "mixture: source %zu has unknown mode %d", k,
                                (int)modes[k]);
        m->weights[k] = weights[k];
        m->lengths[k] = len;
        m->modes[k] = modes[k];
        m->base[k] = base;
        m->shard_first[k] = shards;
        base += len; /* fits: zrs_concat_create in mixture_streams checks INT64_MAX */
        shards += zrs_concat_count(src[0]); /* aligned: the same in every stream */
    }
    m->shard_first[m->nsources] = shards;
    return ZR_OK;
}

/* The sampler: a virtual index space of a multiple of the global batch. */
static int mixture_sampler(zld_mixture *m, zrs_concat *const *concats, uint64_t seed,
                           uint64_t batch_size, uint32_t world_size)
{
    if (batch_size == 0 || world_size == 0 || batch_size > (uint64_t)UINT32_MAX / world_size)
        return zr_set_error(ZR_EINVAL, "mixture: batch_size %" PRIu64 " x world_size %u must be "
                            "1..2^32-1", batch_size, world_size);
    m->g = batch_size * world_size;
    m->length = ((uint64_t)INT64_MAX / m->g) * m->g;
    m->cfg.weights = m->weights;
    m->cfg.lengths = m->lengths;
    m->cfg.modes = m->modes;
    m->cfg.nsources = (uint32_t)m->nsources;
    m->cfg.seed = seed;
    m->cfg.batch_size = batch_size;
    m->cfg.rank = 0;
    m->cfg.world_size = world_size;
    for (size_t k = 0; k < m->nsources; k++) {
        if (m->modes[k] == ZSM_CYCLIC && m->lengths[k] < m->g)
            return zr_set_error(ZR_EINVAL, "mixture: source %zu (%s) has %" PRIu64 " records, "
                                "fewer than the global batch of %" PRIu64 " its cyclic mode "
                                "needs (give it mode iid)", k,
                                zrs_path(zrs_concat_shard(concats[k * m->nstreams], 0)),
                                m->lengths[k], m->g);
    }
    if (zsm_mixture_validate(&m->cfg) != ZSM_OK)
        return zr_set_error(ZR_EINVAL, "mixture: the sampler refused the configuration");
    return ZR_OK;
}

/* One concatenation per stream name over every source's shards. */
static int mixture_streams(zld_mixture *m, zrs_concat *const *concats)
{
    const size_t nstreams = m->nstreams;
    for (size_t s = 0; s < nstreams; s++) {
        size_t nshards = 0;
        for (size_t k = 0; k < m->nsources; k++)
            nshards += zrs_concat_count(concats[k * nstreams + s]);
        zrs_store **all = malloc(nshards * sizeof *all);
        if (all == NULL)
            return zr_set_error(ZR_ENOMEM, "mixture: out of memory");
        size_t at = 0;
        for (size_t k = 0; k < m->nsources; k++) {
            zrs_concat *c = concats[k * nstreams + s];
            for (size_t j = 0; j < zrs_concat_count(c); j++)
                all[at++] = zrs_concat_shard(c, j);
        }
        m->streams[s].m = m;
        int rc = zrs_concat_create(&m->streams[s].all, all, nshards);
        free(all);
        if (rc != ZR_OK) {
            char msg[900];
            snprintf(msg, sizeof msg, "%s", zr_last_error());
            return zr_set_error(rc, "mixture: stream %zu must have one identity in every "
                                "source: %s", s, msg);
        }
        const char *nm = zrs_path(zrs_concat_shard(concats[s], 0));
        m->streams[s].name = malloc(strlen(nm) + sizeof " (mixture)");
        if (m->streams[s].name == NULL)
            return zr_set_error(ZR_ENOMEM, "mixture: out of memory");
        sprintf(m->streams[s].name, "%s (mixture)", nm);
    }
    return ZR_OK;
}

int zld_mixture_create(zld_mixture **out, zrs_concat *const *concats, size_t nsources,
                       size_t nstreams, const double *weights, const zsm_mode *modes,
                       uint64_t seed, uint64_t batch_size, uint32_t world_size)
{
    if (out == NULL)
        return zr_set_error(ZR_EINVAL, "mixture: out is NULL");
    *out = NULL;
    int rc = mixture_args(concats, nsources, nstreams, weights, modes);
    if (rc != ZR_OK)
        return rc;
    zld_mixture *m = mixture_alloc(nsources, nstreams);
    if (m == NULL)
        return zr_set_error(ZR_ENOMEM, "mixture: out of memory for %zu sources", nsources);
    for (size_t k = 0; k < nsources * nstreams && rc == ZR_OK; k++) {
        rc = zrs_concat_borrow(concats[k]); /* closing a source stops the mixture's reads */
        if (rc == ZR_OK)
            m->sources[m->nborrowed++] = concats[k];
    }
    if (rc == ZR_OK) rc = mixture_sources(m, concats, weights, modes);
    if (rc == ZR_OK) rc = mixture_sampler(m, concats, seed, batch_size, world_size);
    if (rc == ZR_OK) rc = mixture_streams(m, concats);
    if (rc != ZR_OK) {
        zld_mixture_free(m);
        return rc;
    }
    *out = m;
    return ZR_OK;
}

uint64_t zld_mixture_length(const zld_mixture *m) { return m ? m->length : 0; }

/* A mixture stream's lifetime hooks (zld_stream): a reference on the
 * mixture, which borrows its sources. */
static int mix_hold(void *user)
{
    const mix_stream *ms = user;
    if (atomic_load(&ms->m->closed))
        return zr_set_error(ZR_ECLOSED, "mixture stream '%s': the mixture is closed", ms->name);
    atomic_fetch_add(&ms->m->refs, 1);
    return ZR_OK;
}

static void mix_release(void *user) { mixture_release(((const mix_stream *)user)->m); }

static int mix_closed(void *user, char *msg, size_t cap)
{
    const mix_stream *ms = user;
    zld_mixture *m = ms->m;
    int closed = atomic_load(&m->closed) || zrs_concat_is_closed(ms->all);
    for (size_t k = 0; !closed && k < m->nborrowed; k++)
        closed = zrs_concat_is_closed(m->sources[k]);
    if (!closed)
        return 0;
    snprintf(msg, cap, "mixture stream '%s': the mixture or one of its sources was closed "
             "while a loader read it", ms->name);
    return 1;
}

int zld_mixture_stream(zld_mixture *m, size_t stream, zld_stream *out)
{
    if (m == NULL || out == NULL)
        return zr_set_error(ZR_EINVAL, "zld_mixture_stream: %s is NULL", m ? "out" : "mixture");
    if (stream >= m->nstreams)
        return zr_set_error(ZR_EINVAL, "zld_mixture_stream: stream %zu, the mixture has %zu",
                            stream, m->nstreams);
    mix_stream *ms = &m->streams[stream];
    concat_stream(out, ms->all);
    out->user = ms;
    out->name = ms->name;
    out->length = m->length;
    out->gather = mix_gather;
    out->advise = mix_advise;
    out->hold = mix_hold;
    out->release = mix_release;
    out->closed = mix_closed;
    if (out->kind == ZLD_STREAM_RAGGED)
        out->sizes = mix_sizes;
    return ZR_OK;
}

int zld_mixture_locate(const zld_mixture *m, const uint64_t *virt, uint64_t count,
                       uint32_t *source, uint64_t *index)
{
    if (m == NULL)
        return zr_set_error(ZR_EINVAL, "zld_mixture_locate: NULL mixture");
    if (count > 0 && (virt == NULL || source == NULL || index == NULL))
        return zr_set_error(ZR_EINVAL, "zld_mixture_locate: NULL array with count %" PRIu64,
                            count);
    return mix_decode(m, virt, count, source, index, NULL, NULL);
}

/* ------------------------------------------------- hooks for loader.c */

zrs_concat *zld__stream_concat(const zld_stream *st)
{
    return st->advise == concat_advise ? st->user : NULL;
}

int zld__stream_mixture(const zld_stream *st, zld__mix_view *out)
{
    if (st->advise != mix_advise)
        return 0;
    const mix_stream *ms = st->user;
    const zld_mixture *m = ms->m;
    out->nsources = m->nsources;
    out->weights = m->weights;
    out->modes = m->modes;
    out->lengths = m->lengths;
    out->seed = m->cfg.seed;
    out->all = ms->all;
    out->shard_first = m->shard_first;
    return 1;
}

/* For the adaptive readahead. */

int zld__stream_bytes(const zld_stream *st, uint64_t *bytes, double *resident, int *resident_rc)
{
    zrs_concat *c;
    if (st->advise == concat_advise)
        c = st->user;
    else if (st->advise == mix_advise)
        c = ((const mix_stream *)st->user)->all;
    else
        return 0;
    *bytes = zrs_concat_data_bytes(c);
    *resident_rc = zrs_concat_resident_fraction(c, resident);
    return 1;
}

