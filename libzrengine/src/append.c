/*
 * append.c - zre_append: raw (positional writes straight from the caller's
 * buffer) and zstd (per-record frames compressed in parallel).
 *
 * Commit protocol: payloads, then record-table entries, then meta.zr, then
 * the in-memory length (release store). The frontier lives in locals until
 * meta.zr is rewritten, so any failure before that leaves the handle and
 * the committed store exactly as they were.
 *
 * Placement: records land in index order, each at the frontier or, when it
 * would not fit, at offset 0 of the next chunk (zre_place). Recovery relies
 * on it: a record appended since the last sync must lie exactly there
 * (recover.c), which tells it apart from a table entry left over from
 * before.
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

/* Advance the frontier *at for a record of `size` stored bytes (rolling to
 * a fresh chunk when it would not fit, and opening that chunk); *where
 * receives the record's place. */
static int place(zre_engine *e, zre_pos *at, uint64_t size, uint64_t index, zre_pos *where)
{
    if (size > ZRE_CHUNK_USABLE)
        return zr_set_error(ZR_ETOOBIG, "append: record %" PRIu64 " needs %" PRIu64
                            " stored bytes, more than a chunk holds (%" PRIu64 ")",
                            index, size, (uint64_t)ZRE_CHUNK_USABLE);
    bool full;
    *where = zre_place(*at, size, &full);
    if (full)
        return zr_set_error(ZR_ETOOBIG, "append: store %s is full (chunk ids exhausted)", e->path);
    int rc = zre_ensure_chunk(e, where->chunk);
    if (rc < 0)
        return rc;
    at->chunk = where->chunk;
    at->offset = (uint32_t)(where->offset + size);
    return ZR_OK;
}

/* Write-out of appended payload starts every this many bytes of a chunk. */
#define WRITEBACK_BYTES ((uint64_t)8 << 20)

/* Start the device writing payload behind the appends, so that the sync
 * which makes them durable (sync(), close) finds most of it written
 * already and the disk works while the caller produces the next records.
 * Only a hint: it makes nothing durable and its failure is ignored (a
 * write-out error reaches the next fsync of the file all the same). */
static void start_writeback(zre_engine *e, zre_pos where, uint64_t n)
{
    zre_pos *from = &e->writeback_from;
    if (from->chunk != where.chunk || from->offset > where.offset) {
        /* A new chunk: the rest of the previous one (0: to its end). */
        if (from->chunk < where.chunk)
            (void)zrp_start_writeback(zre_fdtab_get(&e->chunks, from->chunk), from->offset, 0);
        *from = where;
    }
    uint64_t end = (uint64_t)where.offset + n;
    if (end - from->offset >= WRITEBACK_BYTES) {
        (void)zrp_start_writeback(zre_fdtab_get(&e->chunks, where.chunk), from->offset,
                                  end - from->offset);
        from->offset = (uint32_t)end;
    }
}

/* Write `n` bytes that start at `where` in its chunk. */
static int write_run(zre_engine *e, zre_pos where, const unsigned char *p, uint64_t n)
{
    int prc = zrp_pwrite_all(zre_fdtab_get(&e->chunks, where.chunk), p, (size_t)n, where.offset);
    if (prc < 0)
        return zr_set_error(ZR_EIO, "append: writing %" PRIu64 " bytes to %s/%u.chunk at offset %u "
                            "failed: %s", n, e->path, where.chunk, where.offset, zr_os_strerror(prc));
    /* The mapped read path checks records against this size. */
    zre_fdtab_grow(&e->chunks, where.chunk, (uint64_t)where.offset + n);
    start_writeback(e, where, n);
    return ZR_OK;
}

/* ------------------------------------------------------------------ raw */

static int append_raw(zre_engine *e, const append_src *s, uint64_t count, uint64_t first,
                      zre_pos *at, uint64_t *entries)
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
        zre_pos run_at = {0, 0};
        for (uint64_t i = a; i <= b && rc == 0; i++) {
            zre_pos where = {0, 0};
            bool flush = i == b;
            if (i < b) {
                uint32_t before = at->chunk;
                rc = place(e, at, rec_size(s, i), first + i, &where);
                if (rc < 0)
                    break;
                if (i == run_first)
                    run_at = where;
                else if (where.chunk != before)
                    flush = true;
                zre_loc l = {where.offset, (uint32_t)rec_size(s, i), (uint32_t)rec_size(s, i),
                             where.chunk};
                zre_loc_encode(locs + (i - a) * ZRE_LOC_ENTRY_SIZE, &l);
            }
            if (flush && i > run_first) {
                uint64_t from = rec_start(s, run_first), to = rec_start(s, i - 1) + rec_size(s, i - 1);
                rc = write_run(e, run_at, s->base + from, to - from);
                run_first = i;
                run_at = where;
            }
        }
        if (rc == 0) {
            *entries = b;
            rc = zre_write_locs(e, first + a, locs, b - a);
        }
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
    size_t *csz;           /* n frame sizes */
    _Atomic uint64_t next; /* next window record to claim */
    _Atomic int failed;
    zrp_mutex lock;        /* guards err */
    zre_err err;
} zjob;

/* Compress window records into their slots, claiming them one at a time. */
static void zjob_worker(void *arg, unsigned shard)
{
    (void)shard;
    zjob *j = arg;
    ZSTD_CCtx *cctx = zre_cctx_get(j->e);
    int rc = ZR_OK;
    if (!cctx)
        rc = zr_set_error(ZR_ENOMEM, "append: cannot create a zstd compression context");
    while (rc == 0 && !atomic_load_explicit(&j->failed, memory_order_relaxed)) {
        uint64_t k = atomic_fetch_add(&j->next, 1);
        if (k >= j->n)
            break;
        uint64_t i = j->a + k;
        size_t csz = ZSTD_compress2(cctx, j->arena + j->slot[k], j->slot[k + 1] - j->slot[k],
                                    j->s->base + rec_start(j->s, i), (size_t)rec_size(j->s, i));
        if (ZSTD_isError(csz))
            rc = zr_set_error(ZR_EIO, "append: zstd compression of record %" PRIu64 " failed: %s",
                              j->first + i, ZSTD_getErrorName(csz));
        j->csz[k] = csz;
    }
    if (rc < 0) {
        zrp_mutex_lock(&j->lock);
        if (!atomic_load(&j->failed)) {
            zre_err_capture(&j->err, rc);
            atomic_store(&j->failed, 1);
        }
        zrp_mutex_unlock(&j->lock);
    }
    zre_cctx_put(j->e, cctx);
}

/* Place the window's frames in index order from *at, pack each run that
 * lands in one chunk into one stretch of the arena (a frame only moves
 * down: its packed place never passes its slot, and its end never reaches
 * the next slot), write each run with one call, and encode the entries
 * into `locs`. */
static int zwindow_write(zre_engine *e, const zjob *j, zre_pos *at, unsigned char *locs)
{
    size_t packed = 0, run_start = 0;
    zre_pos run_at = {0, 0};
    int rc = ZR_OK;
    for (uint64_t k = 0; k < j->n && rc == 0; k++) {
        zre_pos where;
        rc = place(e, at, j->csz[k], j->first + j->a + k, &where);
        if (rc == 0 && k > 0 && where.chunk != run_at.chunk) {
            rc = write_run(e, run_at, j->arena + run_start, packed - run_start);
            run_start = packed;
        }
        if (rc < 0)
            break;
        if (packed == run_start)
            run_at = where;
        memmove(j->arena + packed, j->arena + j->slot[k], j->csz[k]);
        packed += j->csz[k];
        zre_loc l = {where.offset, (uint32_t)j->csz[k], (uint32_t)rec_size(j->s, j->a + k),
                     where.chunk};
        zre_loc_encode(locs + k * ZRE_LOC_ENTRY_SIZE, &l);
    }
    if (rc == 0 && packed > run_start)
        rc = write_run(e, run_at, j->arena + run_start, packed - run_start);
    return rc;
}

/* The next window from call record `a`: at least one record, then up to
 * the record and byte bounds; sets j->a, j->n and the slots, and returns
 * the arena bytes it needs. */
static size_t zwindow_plan(zjob *j, uint64_t a, uint64_t count)
{
    uint64_t n = 0, in_bytes = 0;
    size_t need = 0;
    while (a + n < count && n < ZSTD_WINDOW_RECORDS) {
        uint64_t sz = rec_size(j->s, a + n);
        if (n > 0 && in_bytes + sz > ZSTD_WINDOW_BYTES)
            break;
        j->slot[n] = need;
        need += ZSTD_compressBound((size_t)sz);
        in_bytes += sz;
        n++;
    }
    j->slot[n] = need;
    j->a = a;
    j->n = n;
    return need;
}

static int append_zstd(zre_engine *e, const append_src *s, uint64_t count, uint64_t first,
                       zre_pos *at, uint64_t *entries)
{
    zjob j;
    memset(&j, 0, sizeof j);
    if (zrp_mutex_init(&j.lock) != 0)
        return zr_set_error(ZR_ENOMEM, "append: cannot initialise a mutex");
    j.e = e;
    j.s = s;
    j.first = first;
    size_t arena_cap = 0;
    int rc = ZR_OK;
    j.slot = malloc((ZSTD_WINDOW_RECORDS + 1) * sizeof *j.slot);
    j.csz = malloc(ZSTD_WINDOW_RECORDS * sizeof *j.csz);
    unsigned char *locs = malloc((size_t)ZSTD_WINDOW_RECORDS * ZRE_LOC_ENTRY_SIZE);
    if (!j.slot || !j.csz || !locs)
        rc = zr_set_error(ZR_ENOMEM, "append: out of memory for a compression window");
    for (uint64_t a = 0; a < count && rc == 0; a += j.n) {
        size_t need = zwindow_plan(&j, a, count);
        if (need > arena_cap) {
            free(j.arena);
            j.arena = malloc(need);
            arena_cap = j.arena ? need : 0;
            if (!j.arena) {
                rc = zr_set_error(ZR_ENOMEM, "append: out of memory for %zu bytes of frames", need);
                break;
            }
        }
        atomic_store(&j.next, 0);
        atomic_store(&j.failed, 0);
        unsigned shards = j.n < e->ncpu ? (unsigned)j.n : e->ncpu;
        zre_pool_run(&e->pool, shards, zjob_worker, &j);
        if (atomic_load(&j.failed)) {
            rc = zre_err_raise(&j.err);
            break;
        }
        rc = zwindow_write(e, &j, at, locs);
        if (rc == 0) {
            *entries = a + j.n;
            rc = zre_write_locs(e, first + a, locs, j.n);
        }
    }
    free(j.arena);
    free(j.slot);
    free(j.csz);
    free(locs);
    zrp_mutex_destroy(&j.lock);
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

/* Place, write and commit `count` records after the `length` committed
 * ones, then publish them. A failure commits nothing, and the table
 * entries the call may have written past the length are cleared durably
 * before it returns: after a sync made them durable, a later append whose
 * own entries a power loss kept from the disk could otherwise meet them
 * where its records go and read this call's records, never committed. If
 * even that fails, the handle refuses every call until reopened. */
static int append_commit(zre_engine *e, const append_src *s, uint64_t count, uint64_t length)
{
    zre_pos at = e->tail;
    uint64_t entries = 0; /* table entries this call wrote (or began to) */
    int rc = e->codec == ZRE_CODEC_RAW ? append_raw(e, s, count, length, &at, &entries)
                                       : append_zstd(e, s, count, length, &at, &entries);
    zre_state now = {length + count, at};
    if (rc == 0)
        rc = zre_commit_meta(e, &now, &e->synced);
    if (rc == 0) {
        /* Committed: publish. */
        e->tail = at;
        atomic_store_explicit(&e->length, length + count, memory_order_release);
        return ZR_OK;
    }
    if (entries == 0)
        return rc;
    zre_err err;
    zre_err_capture(&err, rc);
    e->fsync_failed = false;
    int crc = zre_clear_locs(e, length, entries);
    if (crc == 0)
        return zre_err_raise(&err);
    zre_err clear;
    zre_err_capture(&clear, crc);
    zre_err_raise_with(&err, "; clearing its table entries failed too: %s", clear.msg);
    return zre_poison(e, rc);
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
    if (rc == 0 && count > 0)
        rc = append_commit(e, &s, count, length);
    e->op = NULL;
    zrp_mutex_unlock(&e->writer);
    if (rc == 0 && first_index)
        *first_index = length;
    return rc;
}
