/*
 * append.c - zre_append: raw (positional writes straight from the caller's
 * buffer) and zstd (per-record frames compressed in parallel, one window
 * written while the next compresses).
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
/* Compressed windows bound working memory (frame slots + loc entries) and
 * set the grain of the pipeline (one window written while the next is
 * compressed). */
#define ZSTD_WINDOW_RECORDS 4096u
#define ZSTD_WINDOW_BYTES ((uint64_t)8 << 20)

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

/* One compression window: call records [a, a+n), their frame slots in
 * `arena`, the compressed sizes and the encoded table entries. */
struct zre_zwin {
    uint64_t a, n;
    unsigned char *arena;  /* frame slots */
    size_t cap;            /* arena bytes allocated */
    size_t slot[ZSTD_WINDOW_RECORDS + 1]; /* n+1 offsets into arena */
    size_t csz[ZSTD_WINDOW_RECORDS];      /* n frame sizes */
    unsigned char locs[ZSTD_WINDOW_RECORDS * ZRE_LOC_ENTRY_SIZE];
};

/* A window pair's arenas stay with the handle between calls up to this
 * size each (a window's frames take about ZSTD_WINDOW_BYTES), so repeated
 * appends reuse warm memory instead of faulting in fresh pages. */
#define ZSTD_ARENA_KEEP ((size_t)16 << 20)

typedef struct zjob {
    zre_engine *e;
    const append_src *s;
    uint64_t first;        /* store index of record 0 of the call */
    struct zre_zwin *cur;  /* window being compressed */
    struct zre_zwin *prev; /* compressed window shard 0 writes first, or NULL */
    zre_pos *at;           /* frontier */
    uint64_t *entries;     /* table entries the call wrote (or began to) */
    int write_rc;          /* shard 0's result of writing `prev` */
    _Atomic uint64_t next; /* next window record to claim */
    _Atomic int failed;
    zrp_mutex lock;        /* guards err */
    zre_err err;
} zjob;

static int zwindow_write(zre_engine *e, const zjob *j, struct zre_zwin *w);

/* Compress window records into their slots, claiming them one at a time.
 * Shard 0 runs on the calling thread: it first writes and records the
 * previous window, so that the serial part of one window overlaps the
 * compression of the next. A failed write stops the compression and is
 * reported by the caller (its error is the calling thread's). */
static void zjob_worker(void *arg, unsigned shard)
{
    zjob *j = arg;
    if (shard == 0 && j->prev) {
        j->write_rc = zwindow_write(j->e, j, j->prev);
        if (j->write_rc < 0) {
            atomic_store(&j->failed, 1);
            return;
        }
    }
    const struct zre_zwin *w = j->cur;
    ZSTD_CCtx *cctx = zre_cctx_get(j->e);
    int rc = ZR_OK;
    if (!cctx)
        rc = zr_set_error(ZR_ENOMEM, "append: cannot create a zstd compression context");
    while (rc == 0 && !atomic_load_explicit(&j->failed, memory_order_relaxed)) {
        uint64_t k = atomic_fetch_add(&j->next, 1);
        if (k >= w->n)
            break;
        uint64_t i = w->a + k;
        size_t csz = ZSTD_compress2(cctx, w->arena + w->slot[k], w->slot[k + 1] - w->slot[k],
                                    j->s->base + rec_start(j->s, i), (size_t)rec_size(j->s, i));
        if (ZSTD_isError(csz))
            rc = zr_set_error(ZR_EIO, "append: zstd compression of record %" PRIu64 " failed: %s",
                              j->first + i, ZSTD_getErrorName(csz));
        j->cur->csz[k] = csz;
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

/* Place the window's frames in index order from the frontier, pack each
 * run that lands in one chunk into one stretch of the arena (a frame only
 * moves down: its packed place never passes its slot, and its end never
 * reaches the next slot), write each run with one call, then the window's
 * table entries. */
static int zwindow_write(zre_engine *e, const zjob *j, struct zre_zwin *w)
{
    size_t packed = 0, run_start = 0;
    zre_pos run_at = {0, 0};
    int rc = ZR_OK;
    for (uint64_t k = 0; k < w->n && rc == 0; k++) {
        zre_pos where;
        rc = place(e, j->at, w->csz[k], j->first + w->a + k, &where);
        if (rc == 0 && k > 0 && where.chunk != run_at.chunk) {
            rc = write_run(e, run_at, w->arena + run_start, packed - run_start);
            run_start = packed;
        }
        if (rc < 0)
            break;
        if (packed == run_start)
            run_at = where;
        memmove(w->arena + packed, w->arena + w->slot[k], w->csz[k]);
        packed += w->csz[k];
        zre_loc l = {where.offset, (uint32_t)w->csz[k], (uint32_t)rec_size(j->s, w->a + k),
                     where.chunk};
        zre_loc_encode(w->locs + k * ZRE_LOC_ENTRY_SIZE, &l);
    }
    if (rc == 0 && packed > run_start)
        rc = write_run(e, run_at, w->arena + run_start, packed - run_start);
    if (rc == 0) {
        *j->entries = w->a + w->n;
        rc = zre_write_locs(e, j->first + w->a, w->locs, w->n);
    }
    return rc;
}

/* Plan window `w` from call record `a`: at least one record, then up to
 * the record and byte bounds; sets its slots and makes its arena large
 * enough. */
static int zwindow_plan(const append_src *s, struct zre_zwin *w, uint64_t a, uint64_t count)
{
    uint64_t n = 0, in_bytes = 0;
    size_t need = 0;
    while (a + n < count && n < ZSTD_WINDOW_RECORDS) {
        uint64_t sz = rec_size(s, a + n);
        if (n > 0 && in_bytes + sz > ZSTD_WINDOW_BYTES)
            break;
        w->slot[n] = need;
        need += ZSTD_compressBound((size_t)sz);
        in_bytes += sz;
        n++;
    }
    w->slot[n] = need;
    w->a = a;
    w->n = n;
    if (need > w->cap) {
        free(w->arena);
        w->arena = malloc(need);
        w->cap = w->arena ? need : 0;
        if (!w->arena)
            return zr_set_error(ZR_ENOMEM, "append: out of memory for %zu bytes of frames", need);
    }
    return ZR_OK;
}

void zre_append_free(zre_engine *e)
{
    if (!e->zwin)
        return;
    free(e->zwin[0].arena);
    free(e->zwin[1].arena);
    free(e->zwin);
    e->zwin = NULL;
}

/* Windows are pipelined: while the pool compresses window k+1, the calling
 * thread places, packs and writes window k and its table entries, then
 * joins the compression. Writes still happen in index order on the calling
 * thread, payload before the entries that point at it, and nothing is
 * committed before meta.zr is written after the last window. */
static int append_zstd(zre_engine *e, const append_src *s, uint64_t count, uint64_t first,
                       zre_pos *at, uint64_t *entries)
{
    if (!e->zwin) {
        e->zwin = calloc(2, sizeof *e->zwin);
        if (!e->zwin)
            return zr_set_error(ZR_ENOMEM, "append: out of memory for two compression windows");
    }
    zjob j;
    memset(&j, 0, sizeof j);
    if (zrp_mutex_init(&j.lock) != 0)
        return zr_set_error(ZR_ENOMEM, "append: cannot initialise a mutex");
    j.e = e;
    j.s = s;
    j.first = first;
    j.at = at;
    j.entries = entries;
    int rc = ZR_OK;
    struct zre_zwin *prev = NULL;
    unsigned side = 0;
    for (uint64_t a = 0; rc == 0 && (a < count || prev); side ^= 1) {
        struct zre_zwin *cur = NULL;
        if (a < count) {
            cur = &e->zwin[side];
            rc = zwindow_plan(s, cur, a, count);
            if (rc < 0)
                break;
        } else {
            /* The last window: nothing left to overlap its write with. */
            rc = zwindow_write(e, &j, prev);
            break;
        }
        j.cur = cur;
        j.prev = prev;
        j.write_rc = 0;
        atomic_store(&j.next, 0);
        atomic_store(&j.failed, 0);
        unsigned shards = cur->n < e->ncpu ? (unsigned)cur->n : e->ncpu;
        zre_pool_run(&e->pool, shards, zjob_worker, &j);
        if (j.write_rc < 0)
            rc = j.write_rc;
        else if (atomic_load(&j.failed))
            rc = zre_err_raise(&j.err);
        prev = cur;
        a += cur->n;
    }
    for (int i = 0; i < 2; i++)
        if (e->zwin[i].cap > ZSTD_ARENA_KEEP) {
            free(e->zwin[i].arena);
            e->zwin[i].arena = NULL;
            e->zwin[i].cap = 0;
        }
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
