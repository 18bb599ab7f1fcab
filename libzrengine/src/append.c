/*
 * append.c - zre_append: raw (positional writes straight from the caller's
 * buffer) and zstd (parallel per-record frames).
 *
 * Commit protocol: payloads, then record-table entries, then meta.zr, then
 * the in-memory length (release store). The frontier lives in locals until
 * meta.zr is rewritten, so any failure before that leaves the handle and
 * the committed store exactly as they were.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#include "engine_internal.h"

/* Loc entries written per raw window (16 bytes each: 1 MiB of buffer). */
#define RAW_WINDOW_RECORDS 65536u
/* Compressed windows bound working memory (frame slots + loc entries). */
#define ZSTD_WINDOW_RECORDS 4096u
#define ZSTD_WINDOW_BYTES ((uint64_t)64 << 20)

typedef struct append_src {
    const unsigned char *base;
    uint64_t record_size;
    const uint64_t *bounds;
} append_src;

static inline uint64_t rec_start(const append_src *s, uint64_t i)
{
    return s->bounds ? s->bounds[i] : i * s->record_size;
}
static inline uint64_t rec_size(const append_src *s, uint64_t i)
{
    return s->bounds ? s->bounds[i + 1] - s->bounds[i] : s->record_size;
}

/* Advance the frontier (*chunk, *off) for a record of `size` stored bytes,
 * rolling to a fresh chunk when it would not fit; *at receives its offset. */
static int place(zre_engine *e, uint32_t *chunk, uint32_t *off, uint64_t size, uint64_t index,
                 uint32_t *at)
{
    if (size > ZRE_CHUNK_USABLE)
        return zr_set_error(ZR_ETOOBIG, "append: record %" PRIu64 " needs %" PRIu64
                            " stored bytes, more than a chunk holds (%" PRIu64 ")",
                            index, size, (uint64_t)ZRE_CHUNK_USABLE);
    if ((uint64_t)*off + size > ZRE_CHUNK_USABLE) {
        if (*chunk == UINT32_MAX)
            return zr_set_error(ZR_ETOOBIG, "append: store %s is full (chunk ids exhausted)", e->path);
        (*chunk)++;
        *off = 0;
    }
    int rc = zre_ensure_chunk(e, *chunk);
    if (rc < 0)
        return rc;
    *at = *off;
    *off = (uint32_t)(*off + size);
    return ZR_OK;
}

/* ------------------------------------------------------------------ raw */

static int append_raw(zre_engine *e, const append_src *s, uint64_t count, uint64_t first,
                      uint32_t *chunk, uint32_t *off)
{
    uint64_t wn = count < RAW_WINDOW_RECORDS ? count : RAW_WINDOW_RECORDS;
    unsigned char *locs = malloc((size_t)wn * ZRE_LOC_ENTRY_SIZE);
    if (!locs)
        return zr_set_error(ZR_ENOMEM, "append: out of memory for %" PRIu64 " table entries", wn);
    int rc = ZR_OK;
    for (uint64_t a = 0; a < count && rc == 0; a += wn) {
        uint64_t b = count - a < wn ? count : a + wn;
        /* A run is a maximal span of records landing contiguously in one
         * chunk: one positional write straight from the caller's buffer. */
        uint64_t run_first = a;
        uint32_t run_chunk = 0, run_off = 0;
        for (uint64_t i = a; i <= b && rc == 0; i++) {
            uint32_t at = 0;
            bool flush = i == b;
            if (i < b) {
                uint32_t before = *chunk;
                rc = place(e, chunk, off, rec_size(s, i), first + i, &at);
                if (rc < 0)
                    break;
                if (i == run_first) {
                    run_chunk = *chunk;
                    run_off = at;
                } else if (*chunk != before) {
                    flush = true;
                }
                zre_loc l = {at, (uint32_t)rec_size(s, i), (uint32_t)rec_size(s, i), *chunk};
                zre_loc_encode(locs + (i - a) * ZRE_LOC_ENTRY_SIZE, &l);
            }
            if (flush && i > run_first) {
                uint64_t from = rec_start(s, run_first), to = rec_start(s, i - 1) + rec_size(s, i - 1);
                int prc = zrp_pwrite_all(zre_fdtab_get(&e->chunks, run_chunk), s->base + from,
                                         (size_t)(to - from), run_off);
                if (prc < 0) {
                    rc = zr_set_error(ZR_EIO, "append: writing %" PRIu64 " bytes to %s/%u.chunk at "
                                      "offset %u failed: %s", to - from, e->path, run_chunk, run_off,
                                      zr_os_strerror(prc));
                    break;
                }
                /* The mapped read path checks records against this size. */
                zre_fdtab_grow(&e->chunks, run_chunk, (uint64_t)run_off + (to - from));
                run_first = i;
                run_chunk = *chunk;
                run_off = at;
            }
        }
        if (rc == 0)
            rc = zre_write_locs(e, first + a, locs, b - a);
    }
    free(locs);
    return rc;
}

/* ----------------------------------------------------------------- zstd */

typedef struct zjob {
    zre_engine *e;
    const append_src *s;
    uint64_t first;        /* store index of record 0 of the call */
    uint64_t a, n;         /* window: call records [a, a+n) */
    unsigned char *arena;  /* frame slots */
    size_t *slot;          /* n+1 offsets into arena */
    unsigned char *locs;   /* n encoded entries */
    _Atomic uint64_t next; /* next window record to claim */
    _Atomic int failed;
    zrp_mutex front;       /* guards chunk/off/err and chunk-file opening */
    uint32_t chunk, off;
    zre_err err;
} zjob;

static void zjob_worker(void *arg, unsigned shard)
{
    (void)shard;
    zjob *j = arg;
    zre_engine *e = j->e;
    ZSTD_CCtx *cctx = zre_cctx_get(e);
    int rc = ZR_OK;
    if (!cctx)
        rc = zr_set_error(ZR_ENOMEM, "append: cannot create a zstd compression context");
    while (rc == 0 && !atomic_load_explicit(&j->failed, memory_order_relaxed)) {
        uint64_t k = atomic_fetch_add(&j->next, 1);
        if (k >= j->n)
            break;
        uint64_t i = j->a + k;
        uint64_t sz = rec_size(j->s, i);
        unsigned char *out = j->arena + j->slot[k];
        size_t cap = j->slot[k + 1] - j->slot[k];
        size_t csz = ZSTD_compress2(cctx, out, cap, j->s->base + rec_start(j->s, i), (size_t)sz);
        if (ZSTD_isError(csz)) {
            rc = zr_set_error(ZR_EIO, "append: zstd compression of record %" PRIu64 " failed: %s",
                              j->first + i, ZSTD_getErrorName(csz));
            break;
        }
        /* Reserve the physical slot in completion order. */
        uint32_t at = 0, chunk;
        zrp_mutex_lock(&j->front);
        rc = place(e, &j->chunk, &j->off, csz, j->first + i, &at);
        chunk = j->chunk;
        zrp_mutex_unlock(&j->front);
        if (rc < 0)
            break;
        int prc = zrp_pwrite_all(zre_fdtab_get(&e->chunks, chunk), out, csz, at);
        if (prc < 0) {
            rc = zr_set_error(ZR_EIO, "append: writing record %" PRIu64 " (%zu bytes) to %s/%u.chunk "
                              "at offset %u failed: %s", j->first + i, csz, e->path, chunk, at,
                              zr_os_strerror(prc));
            break;
        }
        zre_fdtab_grow(&e->chunks, chunk, (uint64_t)at + csz);
        zre_loc l = {at, (uint32_t)csz, (uint32_t)sz, chunk};
        zre_loc_encode(j->locs + k * ZRE_LOC_ENTRY_SIZE, &l);
    }
    if (rc < 0) {
        zrp_mutex_lock(&j->front);
        if (!atomic_load(&j->failed)) {
            zre_err_capture(&j->err, rc);
            atomic_store(&j->failed, 1);
        }
        zrp_mutex_unlock(&j->front);
    }
    zre_cctx_put(e, cctx);
}

static int append_zstd(zre_engine *e, const append_src *s, uint64_t count, uint64_t first,
                       uint32_t *chunk, uint32_t *off)
{
    zjob j;
    memset(&j, 0, sizeof j);
    if (zrp_mutex_init(&j.front) != 0)
        return zr_set_error(ZR_ENOMEM, "append: cannot initialise a mutex");
    j.e = e;
    j.s = s;
    j.first = first;
    j.chunk = *chunk;
    j.off = *off;
    size_t arena_cap = 0;
    int rc = ZR_OK;
    j.slot = malloc((ZSTD_WINDOW_RECORDS + 1) * sizeof *j.slot);
    j.locs = malloc((size_t)ZSTD_WINDOW_RECORDS * ZRE_LOC_ENTRY_SIZE);
    if (!j.slot || !j.locs)
        rc = zr_set_error(ZR_ENOMEM, "append: out of memory for a compression window");
    for (uint64_t a = 0; a < count && rc == 0;) {
        /* Window: at least one record, then up to the record/byte bounds. */
        uint64_t n = 0, in_bytes = 0;
        size_t need = 0;
        while (a + n < count && n < ZSTD_WINDOW_RECORDS) {
            uint64_t sz = rec_size(s, a + n);
            if (n > 0 && in_bytes + sz > ZSTD_WINDOW_BYTES)
                break;
            j.slot[n] = need;
            need += ZSTD_compressBound((size_t)sz);
            in_bytes += sz;
            n++;
        }
        j.slot[n] = need;
        if (need > arena_cap) {
            free(j.arena);
            j.arena = malloc(need);
            arena_cap = j.arena ? need : 0;
            if (!j.arena) {
                rc = zr_set_error(ZR_ENOMEM, "append: out of memory for %zu bytes of frames", need);
                break;
            }
        }
        j.a = a;
        j.n = n;
        atomic_store(&j.next, 0);
        atomic_store(&j.failed, 0);
        unsigned shards = n < e->ncpu ? (unsigned)n : e->ncpu;
        zre_pool_run(&e->pool, shards, zjob_worker, &j);
        if (atomic_load(&j.failed)) {
            rc = zre_err_raise(&j.err);
            break;
        }
        rc = zre_write_locs(e, first + a, j.locs, n);
        a += n;
    }
    if (rc == 0) {
        *chunk = j.chunk;
        *off = j.off;
    }
    free(j.arena);
    free(j.slot);
    free(j.locs);
    zrp_mutex_destroy(&j.front);
    return rc;
}

/* --------------------------------------------------------------- entry */

static int validate(const append_src *s, uint64_t count, uint64_t length)
{
    if (!s->bounds) {
        if (s->record_size == 0)
            return zr_set_error(ZR_EINVAL, "append: record_size is 0; records must be 1..%" PRIu64
                                " bytes", ZRE_RECORD_MAX);
        if (s->record_size > ZRE_RECORD_MAX)
            return zr_set_error(ZR_ETOOBIG, "append: record_size %" PRIu64 " exceeds the %" PRIu64
                                "-byte record limit", s->record_size, ZRE_RECORD_MAX);
        if (count > UINT64_MAX / s->record_size)
            return zr_set_error(ZR_EINVAL, "append: %" PRIu64 " records of %" PRIu64
                                " bytes overflow", count, s->record_size);
        return ZR_OK;
    }
    for (uint64_t i = 0; i < count; i++) {
        if (s->bounds[i + 1] <= s->bounds[i])
            return zr_set_error(ZR_EINVAL, "append: record %" PRIu64 " (batch position %" PRIu64
                                ") has bounds [%" PRIu64 ", %" PRIu64 "): records must be non-empty "
                                "and bounds increasing", length + i, i, s->bounds[i], s->bounds[i + 1]);
        if (s->bounds[i + 1] - s->bounds[i] > ZRE_RECORD_MAX)
            return zr_set_error(ZR_ETOOBIG, "append: record %" PRIu64 " (batch position %" PRIu64
                                ") is %" PRIu64 " bytes, over the %" PRIu64 "-byte limit",
                                length + i, i, s->bounds[i + 1] - s->bounds[i], ZRE_RECORD_MAX);
    }
    return ZR_OK;
}

ZRE_API int zre_append(zre_engine *e, const void *src, uint64_t record_size, const uint64_t *bounds,
                       uint64_t count, uint64_t *first_index)
{
    if (!e)
        return zr_set_error(ZR_EINVAL, "append: NULL handle");
    if (count > 0 && !src)
        return zr_set_error(ZR_EINVAL, "append: NULL source for %" PRIu64 " records", count);
    append_src s = {src, record_size, bounds};

    if (e->readonly)
        return zr_set_error(ZR_EUNSUPPORTED, "append: store %s is open read-only", e->path);
    zrp_mutex_lock(&e->writer);
    uint64_t length = atomic_load_explicit(&e->length, memory_order_relaxed);
    int rc = zre_check_usable(e, "append");
    e->op = "append";
    if (rc == 0)
        rc = validate(&s, count, length);
    if (rc == 0 && count > 0 && e->codec == ZRE_CODEC_ZSTD_DICT && !e->cdict) {
        /* Built once, here under the writer lock, before any worker needs
         * it; immutable afterwards, so compressing threads share it. */
        e->cdict = ZSTD_createCDict(e->dict, e->dict_size, ZRE_ZSTD_DICT_LEVEL);
        if (!e->cdict)
            rc = zr_set_error(ZR_ENOMEM, "append: cannot build the level-%d compression dictionary "
                              "of %s", ZRE_ZSTD_DICT_LEVEL, e->path);
    }
    if (rc == 0 && count > UINT64_MAX - length)
        rc = zr_set_error(ZR_ETOOBIG, "append: %" PRIu64 " more records overflow the length of %s",
                          count, e->path);
    if (rc == 0 && count > 0) {
        uint32_t chunk = e->tail_chunk, off = e->tail_offset;
        if (e->codec == ZRE_CODEC_RAW)
            rc = append_raw(e, &s, count, length, &chunk, &off);
        else
            rc = append_zstd(e, &s, count, length, &chunk, &off);
        if (rc == 0)
            rc = zre_commit_meta(e, length + count, chunk, off);
        if (rc == 0) {
            /* Committed: publish. */
            e->tail_chunk = chunk;
            e->tail_offset = off;
            atomic_store_explicit(&e->length, length + count, memory_order_release);
        }
    }
    e->op = NULL;
    zrp_mutex_unlock(&e->writer);
    if (rc == 0 && first_index)
        *first_index = length;
    return rc;
}
