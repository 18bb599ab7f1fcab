/*
 * gather.c - the read path: zre_gather (sharded reads and zstd decodes
 * straight into the caller's destination), zre_gather_multi, record sizes,
 * and the one-record read zre_check_record uses.
 *
 * Read path: every chunk and record-table file is mapped read-only when it
 * is opened (files.c), so a record costs no system call: its entry is
 * decoded from the mapped N.loc, then its bytes are copied (raw) or
 * decoded (zstd) straight from the mapped N.chunk. Each range is checked
 * against the file size the engine knows before the mapping is touched.
 * A file that could not be mapped is read with pread instead (same checks,
 * same messages). A store at a URL has no mapped files, but a gather holds
 * every cache block its batch reads (zre_remote_prepare), so a record or
 * table entry inside one block is read in place from the block's mapping
 * (zre_remote_span), like a mapped file's; one that straddles two blocks
 * is read with pread. Record locations are not cached in memory: the table can
 * be far larger than RAM would like (16 bytes per record, 2^32+ records),
 * the page cache already keeps hot segments in memory, and reading the
 * file keeps one source of truth that an appending thread updates before
 * it publishes `length`.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#include "engine_internal.h"

/* Below these a gather runs on the calling thread: handing work to the
 * pool costs more than it saves. Raw records are a memcpy from the mapping
 * (no system call); from 256 KiB the copy is long enough that a second
 * core pays for waking it: 256 random 2 KiB records (512 KiB) of a 400 MiB
 * store took 59-65 us through the pool against 87-93 us inline, on an
 * idle 2-core host (bench/NOTES.md). zstd decoding costs ~10x more per
 * byte, so it is shared out from the same size. Overridable with -D for
 * tuning runs. */
#ifndef INLINE_MAX_BYTES_RAW
#define INLINE_MAX_BYTES_RAW ((uint64_t)256 << 10)
#endif
#ifndef INLINE_MAX_BYTES_ZSTD
#define INLINE_MAX_BYTES_ZSTD ((uint64_t)256 << 10)
#endif
#ifndef INLINE_MAX_RECORDS
#define INLINE_MAX_RECORDS 8u
#endif
/* A raw batch of at least this many records is shared out whatever its
 * bytes: small records cost a table miss and a record miss each, so 20,000
 * 32-byte rows (640 KiB) take ~0.5 ms on one core, far more than waking
 * the pool (bench/NOTES.md, "Native gather (second round)": the crossover
 * on 2 cores is 4,096-8,192 records). */
#ifndef POOL_MIN_RECORDS_RAW
#define POOL_MIN_RECORDS_RAW 8192u
#endif
/* Multi-engine gathers order up to this many records on the stack. */
#define ORDER_SMALL 64u
/* Longest run of consecutive indices whose entries are read at once. */
#define LOC_RUN 256u

typedef struct gjob {
    zre_engine *const *engines; /* record i is read from engines[which[i]] */
    const uint32_t *which;      /* NULL: every record from engines[0] */
    const uint64_t *index;
    uint64_t count;
    unsigned char *dst;
    uint64_t record_size;
    const uint64_t *dst_bounds;
    /* Multi-engine only (else NULL): the batch positions in the order they
     * are read, grouped by engine, so each worker walks one store's
     * mappings at a time (page-table locality: measured 15-20% on random
     * 2 KiB records over 16 stores). Placement stays by position. */
    const uint64_t *order;
    unsigned nshards;
    bool all_raw;       /* every engine read is raw: fast_shard may serve */
    _Atomic int failed; /* lets other shards stop early */
    zre_err *errs;      /* one per shard */
} gjob;

typedef struct gshard {
    bool held; /* a gather: every remote block it reads is held (zre_remote_prepare) */
    ZSTD_DCtx *dctx;
    unsigned char *stage;
    size_t stage_cap;
} gshard;

int zre_read_one(zre_engine *e, uint64_t idx, const zre_loc *l, unsigned char *out);

/* Messages about a record name its table entry, "<dir>/<seg>.loc entry
 * <n>": a damaged entry is the usual cause of a bad size or location.
 * These expand only inside error returns, so the per-record path is
 * unchanged. */
#define LOC_FMT "%s/%" PRIu64 ".loc entry %" PRIu64
#define LOC_ARGS(e, idx) (e)->path, (idx) / ZRE_INT_SEG_ENTRIES, (idx) % ZRE_INT_SEG_ENTRIES

/* Error for a record whose bytes cannot be read: a short chunk file
 * (pread past its end, or a mapped range beyond its known size) or I/O. */
static int read_failed(zre_engine *e, uint64_t idx, const zre_loc *l, int prc)
{
    return zr_set_error(zre_io_status(prc, ZR_ECORRUPT), "gather: reading record %" PRIu64
                        " (%u bytes at %s/%u.chunk offset %u, per " LOC_FMT ") failed: %s",
                        idx, l->phys_length, e->path, l->chunk_id, l->offset, LOC_ARGS(e, idx),
                        prc == ZRP_ESHORT ? "chunk file too short" : zr_os_strerror(prc));
}

static int read_record(zre_engine *e, gshard *sh, uint64_t idx, const zre_loc *l, unsigned char *out,
                       uint64_t slot)
{
    if (l->logic_length != slot)
        return zr_set_error(ZR_ECORRUPT, "gather: record %" PRIu64 " is %u bytes (" LOC_FMT ") but "
                            "its destination slot is %" PRIu64 " bytes", idx, l->logic_length,
                            LOC_ARGS(e, idx), slot);
    const zre_fent *ent = zre_fdtab_ent(&e->chunks, l->chunk_id);
    if (!zre_fent_open(ent))
        return zr_set_error(ZR_ECORRUPT, "gather: record %" PRIu64 " (" LOC_FMT ") points at chunk "
                            "%u, which %s/ does not hold", idx, LOC_ARGS(e, idx), l->chunk_id,
                            e->path);
    uint64_t end = (uint64_t)l->offset + l->phys_length;
    if (end > ZRE_CHUNK_USABLE || l->phys_length == 0)
        return zr_set_error(ZR_ECORRUPT, "gather: record %" PRIu64 " (" LOC_FMT ") has a bad "
                            "location (offset %u, %u bytes) in %s/%u.chunk", idx, LOC_ARGS(e, idx),
                            l->offset, l->phys_length, e->path, l->chunk_id);
    if (e->codec == ZRE_CODEC_RAW && l->phys_length != l->logic_length)
        return zr_set_error(ZR_ECORRUPT, "gather: raw record %" PRIu64 " (" LOC_FMT ") has "
                            "stored size %u != logical size %u", idx, LOC_ARGS(e, idx),
                            l->phys_length, l->logic_length);
    /* Mapped: the bytes are read in place (no system call); the range is
     * checked against the known file size before the mapping is touched,
     * so a damaged entry cannot fault past end of file. */
    const unsigned char *src = NULL;
    if (ent->map) {
        if (end > atomic_load_explicit(&ent->size, memory_order_acquire))
            return read_failed(e, idx, l, ZRP_ESHORT);
        src = ent->map + l->offset;
    } else if (ent->obj && sh->held) {
        /* A store at a URL, inside a gather: the record's block is held in
         * the node's cache, so its bytes are read in place like a mapped
         * file's (the same checks and decode follow). NULL when the record
         * straddles two blocks: then it is read with pread below. */
        src = zre_remote_span(ent->obj, l->offset, l->phys_length);
    }
    if (e->codec == ZRE_CODEC_RAW) {
        if (src) {
            memcpy(out, src, l->phys_length);
            return ZR_OK;
        }
        int rc = zre_fent_pread(ent, out, l->phys_length, l->offset);
        return rc < 0 ? read_failed(e, idx, l, rc) : ZR_OK;
    }
    if (!sh->dctx) {
        sh->dctx = zre_dctx_get(e);
        if (!sh->dctx)
            return zr_set_error(ZR_ENOMEM, "gather: cannot create a zstd decompression context");
    }
    if (!src) {
        if (sh->stage_cap < l->phys_length) {
            size_t cap = l->phys_length;
            unsigned char *p = realloc(sh->stage, cap);
            if (!p)
                return zr_set_error(ZR_ENOMEM, "gather: out of memory staging %zu bytes of record %"
                                    PRIu64, cap, idx);
            sh->stage = p;
            sh->stage_cap = cap;
        }
        int rc = zre_fent_pread(ent, sh->stage, l->phys_length, l->offset);
        if (rc < 0)
            return read_failed(e, idx, l, rc);
        src = sh->stage;
    }
    /* The DDict is immutable: every shard shares it without a lock. */
    size_t got = e->ddict ? ZSTD_decompress_usingDDict(sh->dctx, out, (size_t)slot, src,
                                                       l->phys_length, (const ZSTD_DDict *)e->ddict)
                          : ZSTD_decompressDCtx(sh->dctx, out, (size_t)slot, src, l->phys_length);
    if (ZSTD_isError(got))
        return zr_set_error(ZR_ECORRUPT, "gather: record %" PRIu64 " does not decode (%u bytes at "
                            "%s/%u.chunk offset %u, per " LOC_FMT "): %s", idx, l->phys_length,
                            e->path, l->chunk_id, l->offset, LOC_ARGS(e, idx),
                            ZSTD_getErrorName(got));
    if (got != l->logic_length)
        return zr_set_error(ZR_ECORRUPT, "gather: record %" PRIu64 " decoded to %zu bytes, expected "
                            "%u (%s/%u.chunk offset %u, per " LOC_FMT ")", idx, got, l->logic_length,
                            e->path, l->chunk_id, l->offset, LOC_ARGS(e, idx));
    return ZR_OK;
}

static int run_shard(gjob *j, uint64_t lo, uint64_t hi)
{
    gshard sh = {.held = true};
    zre_engine *dctx_owner = NULL; /* the engine sh.dctx goes back to */
    unsigned char locs[LOC_RUN * ZRE_LOC_ENTRY_SIZE];
    int rc = ZR_OK;
    for (uint64_t k = lo; k < hi && rc == 0;) {
        if (atomic_load_explicit(&j->failed, memory_order_relaxed))
            break;
        const uint64_t i0 = j->order ? j->order[k] : k;
        const uint32_t w = j->which ? j->which[i0] : 0;
        zre_engine *e = j->engines[w];
        /* A zstd context decodes any engine's frames (the dictionary is
         * passed per call), but returns to the free list it came from. */
        if (sh.dctx && dctx_owner != e && e->codec != ZRE_CODEC_RAW) {
            zre_dctx_put(dctx_owner, sh.dctx);
            sh.dctx = NULL;
            dctx_owner = NULL;
        }
        /* Read the entries of a run of consecutive indices (of one engine)
         * at once. */
        uint64_t run = 1;
        while (k + run < hi && run < LOC_RUN) {
            const uint64_t in = j->order ? j->order[k + run] : k + run;
            if (j->index[in] != j->index[i0] + run || (j->which && j->which[in] != w))
                break;
            run++;
        }
        rc = zre_read_locs(e, j->index[i0], locs, run);
        for (uint64_t r = 0; r < run && rc == 0; r++) {
            uint64_t i = j->order ? j->order[k + r] : k + r;
            zre_loc l;
            zre_loc_decode(&l, locs + r * ZRE_LOC_ENTRY_SIZE);
            uint64_t at, slot;
            if (j->dst_bounds) {
                at = j->dst_bounds[i];
                slot = j->dst_bounds[i + 1] - j->dst_bounds[i];
            } else {
                at = i * j->record_size;
                slot = j->record_size;
            }
            rc = read_record(e, &sh, j->index[i], &l, j->dst + at, slot);
        }
        if (sh.dctx && !dctx_owner)
            dctx_owner = e; /* read_record took it from e */
        k += run;
    }
    if (sh.dctx)
        zre_dctx_put(dctx_owner, sh.dctx);
    free(sh.stage);
    return rc;
}

/* ------------------------------------------------- raw fast path
 *
 * Records of raw stores whose table segments and chunks are all mapped
 * (or, for a store at a URL, held in the node's cache) are copied in blocks of FAST_BLOCK positions, in three passes: (1) each
 * position's table entry is located in its mapped N.loc (the segment is
 * looked up once per run of positions in one segment, its bounds checked)
 * and prefetched; (2) every entry is decoded in place and checked, exactly
 * as read_record checks it (size against the slot, chunk known and mapped,
 * location inside the chunk and inside the file), and the record's first
 * and last bytes are prefetched; (3) the records are copied. Keeping many
 * independent cache misses in flight, rather than one table read, then
 * one record read, per record, is what lets small random records approach
 * a plain memcpy of the same rows (bench/NOTES.md).
 *
 * The fast path never reports an error itself: at the first entry or file
 * it cannot vouch for (a damaged entry, an unmapped or short file, a
 * segment that is not open) it gives up, and the shard is run again from
 * its start by run_shard, whose per-record checks produce the error with
 * the usual message. Copying a record twice is harmless (same bytes, same
 * place). */
#define FAST_BLOCK 32u

/* memcpy, with records of 8..64 bytes copied by two fixed-size moves
 * that overlap (inlined: no call per record). */
static inline void copy_record(unsigned char *d, const unsigned char *s, size_t n)
{
    if (n >= 32 && n <= 64) {
        memcpy(d, s, 32);
        memcpy(d + n - 32, s + n - 32, 32);
    } else if (n >= 16 && n < 32) {
        memcpy(d, s, 16);
        memcpy(d + n - 16, s + n - 16, 16);
    } else if (n >= 8 && n < 16) {
        memcpy(d, s, 8);
        memcpy(d + n - 8, s + n - 8, 8);
    } else {
        memcpy(d, s, n);
    }
}

/* The segment and chunk a fast shard looked up last. Their known sizes are
 * read once: every record of this call was committed before the call read
 * `length`, and the writer raises a file's size before it publishes
 * `length`, so the size seen here already covers them. */
typedef struct fast_cache {
    const zre_engine *seg_e, *chk_e;
    uint64_t seg_id, seg_size, chk_size;
    uint32_t chk_id;
    const unsigned char *seg_map, *chk_map;
} fast_cache;

/* The mapping of file `id` (a segment or a chunk) and its known size;
 * false when it is not open or not mapped. */
static bool fast_file(const zre_fdtab *t, uint64_t id, const unsigned char **map, uint64_t *size)
{
    zre_fent *f = zre_fdtab_ent(t, id);
    if (!f || f->f.fd < 0 || !f->map)
        return false;
    *map = f->map;
    *size = atomic_load_explicit(&f->size, memory_order_acquire);
    return true;
}

/* Pass 1 for positions [k, k+n): the address of each table entry, which
 * is prefetched. False when an entry cannot be vouched for. */
static bool fast_locate(const gjob *j, fast_cache *c, uint64_t k, unsigned n,
                        const unsigned char **ent)
{
    for (unsigned r = 0; r < n; r++) {
        const uint64_t i = j->order ? j->order[k + r] : k + r;
        const zre_engine *e = j->engines[j->which ? j->which[i] : 0];
        const uint64_t idx = j->index[i];
        const uint64_t seg = idx / ZRE_INT_SEG_ENTRIES;
        const uint64_t at = (idx % ZRE_INT_SEG_ENTRIES) * ZRE_LOC_ENTRY_SIZE;
        if (e->remote) {
            /* A store at a URL: the entry's block is held in the node's
             * cache (zre_remote_prepare), read in place. */
            const zre_fent *f = zre_fdtab_ent(&e->locs, seg);
            if (!f || !f->obj || !(ent[r] = zre_remote_span(f->obj, at, ZRE_LOC_ENTRY_SIZE)))
                return false;
            ZRE_PREFETCH(ent[r]);
            continue;
        }
        if (e != c->seg_e || seg != c->seg_id || !c->seg_map) {
            if (!fast_file(&e->locs, seg, &c->seg_map, &c->seg_size))
                return false;
            c->seg_e = e;
            c->seg_id = seg;
        }
        if (at + ZRE_LOC_ENTRY_SIZE > c->seg_size)
            return false;
        ent[r] = c->seg_map + at;
        ZRE_PREFETCH(ent[r]);
    }
    return true;
}

/* Pass 2: decode and check each entry as read_record does, note where its
 * bytes go, prefetch them. False when an entry cannot be vouched for. A
 * record of a store at a URL that straddles two cached blocks has no
 * single address: src[r] is NULL and far[r] its chunk, read with pread at
 * at[r]. */
static bool fast_resolve(const gjob *j, fast_cache *c, uint64_t k, unsigned n,
                         const unsigned char *const *ent, const unsigned char **src,
                         unsigned char **out, uint32_t *len, const zre_fent **far, uint32_t *at_off)
{
    const uint64_t usable = ZRE_CHUNK_USABLE;
    for (unsigned r = 0; r < n; r++) {
        const uint64_t i = j->order ? j->order[k + r] : k + r;
        const zre_engine *e = j->engines[j->which ? j->which[i] : 0];
        uint64_t at, slot;
        if (j->dst_bounds) {
            at = j->dst_bounds[i];
            slot = j->dst_bounds[i + 1] - at;
        } else {
            at = i * j->record_size;
            slot = j->record_size;
        }
        const unsigned char *p = ent[r];
        const uint32_t offset = zre_get_u32(p), phys = zre_get_u32(p + 4),
                       logic = zre_get_u32(p + 8), chunk = zre_get_u32(p + 12);
        if (logic != slot || phys != logic || phys == 0)
            return false;
        if (e->remote) {
            const zre_fent *f = zre_fdtab_ent(&e->chunks, chunk);
            if (!f || !f->obj || (uint64_t)offset + phys > usable ||
                (uint64_t)offset + phys > atomic_load_explicit(&f->size, memory_order_acquire))
                return false;
            src[r] = zre_remote_span(f->obj, offset, phys);
            far[r] = f;
            at_off[r] = offset;
            out[r] = j->dst + at;
            len[r] = phys;
            if (src[r]) {
                ZRE_PREFETCH(src[r]);
                ZRE_PREFETCH(src[r] + phys - 1);
            }
            continue;
        }
        if (e != c->chk_e || chunk != c->chk_id || !c->chk_map) {
            if (!fast_file(&e->chunks, chunk, &c->chk_map, &c->chk_size))
                return false;
            c->chk_e = e;
            c->chk_id = chunk;
        }
        const uint64_t end = (uint64_t)offset + phys;
        if (end > usable || end > c->chk_size)
            return false;
        src[r] = c->chk_map + offset;
        far[r] = NULL;
        out[r] = j->dst + at;
        len[r] = phys;
        ZRE_PREFETCH(src[r]);
        ZRE_PREFETCH(src[r] + phys - 1);
    }
    return true;
}

/* The passes are pipelined: the next block's entries are located (and
 * their cache misses started) before the current block is copied. */
static bool fast_shard(const gjob *j, uint64_t lo, uint64_t hi)
{
    const unsigned char *ents[2][FAST_BLOCK];
    const unsigned char *src[FAST_BLOCK];
    unsigned char *out[FAST_BLOCK];
    uint32_t len[FAST_BLOCK], at_off[FAST_BLOCK];
    const zre_fent *far[FAST_BLOCK];
    fast_cache c = {0};
    unsigned cur = 0;
    uint64_t k = lo;
    unsigned n = hi - k < FAST_BLOCK ? (unsigned)(hi - k) : FAST_BLOCK;
    if (!fast_locate(j, &c, k, n, ents[cur]))
        return false;
    while (n > 0) {
        if (atomic_load_explicit(&((gjob *)j)->failed, memory_order_relaxed))
            return true; /* another shard failed: its error is reported */
        if (!fast_resolve(j, &c, k, n, ents[cur], src, out, len, far, at_off))
            return false;
        const uint64_t next = k + n;
        const unsigned nn = hi - next < FAST_BLOCK ? (unsigned)(hi - next) : FAST_BLOCK;
        if (nn > 0 && !fast_locate(j, &c, next, nn, ents[cur ^ 1]))
            return false;
        for (unsigned r = 0; r < n; r++) {
            if (src[r])
                copy_record(out[r], src[r], len[r]);
            else if (zre_fent_pread(far[r], out[r], len[r], at_off[r]) < 0)
                return false; /* run_shard reads it again and reports the error */
        }
        k = next;
        n = nn;
        cur ^= 1;
    }
    return true;
}

static void gather_shard(void *arg, unsigned s)
{
    gjob *j = arg;
    uint64_t lo = j->count * s / j->nshards, hi = j->count * (s + 1) / j->nshards;
    if (j->all_raw && fast_shard(j, lo, hi))
        return;
    int rc = run_shard(j, lo, hi);
    if (rc < 0) {
        zre_err_capture(&j->errs[s], rc);
        atomic_store(&j->failed, 1);
    }
}

static int gather_checked(zre_engine *const *engines, const uint32_t *which, const uint64_t *order,
                          const uint64_t *index, uint64_t count, void *dst, uint64_t dst_capacity,
                          uint64_t record_size, const uint64_t *dst_bounds);

ZRE_API int zre_gather(zre_engine *e, const uint64_t *index, uint64_t count, void *dst,
                       uint64_t dst_capacity, uint64_t record_size, const uint64_t *dst_bounds)
{
    if (!e)
        return zr_set_error(ZR_EINVAL, "gather: NULL handle");
    if (count == 0)
        return ZR_OK;
    if (!index || !dst)
        return zr_set_error(ZR_EINVAL, "gather: NULL index or destination for %" PRIu64 " records",
                            count);
    int rc = zre_enter_read(e, "gather");
    if (rc < 0)
        return rc;
    rc = gather_checked(&e, NULL, NULL, index, count, dst, dst_capacity, record_size, dst_bounds);
    zre_leave_read(e);
    return rc;
}

ZRE_API int zre_gather_multi(zre_engine *const *engines, size_t nengines, const uint32_t *which,
                             const uint64_t *index, uint64_t count, void *dst,
                             uint64_t dst_capacity, uint64_t record_size,
                             const uint64_t *dst_bounds)
{
    if (!engines || nengines == 0)
        return zr_set_error(ZR_EINVAL, "gather_multi: no engines");
    for (size_t k = 0; k < nengines; k++)
        if (!engines[k])
            return zr_set_error(ZR_EINVAL, "gather_multi: engine %zu is NULL", k);
    if (count == 0)
        return ZR_OK;
    if (!index || !dst || !which)
        return zr_set_error(ZR_EINVAL, "gather_multi: NULL %s for %" PRIu64 " records",
                            !index ? "index" : !dst ? "destination" : "which", count);
    for (uint64_t i = 0; i < count; i++)
        if (which[i] >= nengines)
            return zr_set_error(ZR_EINVAL, "gather_multi: which[%" PRIu64 "] = %u, but there are %zu "
                                "engines", i, which[i], nengines);
    /* The reading order, grouped by engine (a stable counting sort). */
    uint64_t small_order[ORDER_SMALL], small_start[ORDER_SMALL + 1];
    uint64_t *order = NULL, *start = small_start, *heap = NULL;
    if (nengines > 1) {
        order = small_order;
        if (count > ORDER_SMALL || nengines > ORDER_SMALL) {
            if (count > SIZE_MAX / sizeof(uint64_t) - nengines - 1)
                return zr_set_error(ZR_ENOMEM, "gather_multi: %" PRIu64 " records are too many",
                                    count);
            heap = malloc(((size_t)count + nengines + 1) * sizeof *heap);
            if (!heap)
                return zr_set_error(ZR_ENOMEM, "gather_multi: out of memory ordering %" PRIu64
                                    " records", count);
            order = heap;
            start = heap + count;
        }
        memset(start, 0, (nengines + 1) * sizeof *start);
        for (uint64_t i = 0; i < count; i++)
            start[which[i] + 1]++;
        for (size_t k = 0; k < nengines; k++)
            start[k + 1] += start[k];
        for (uint64_t i = 0; i < count; i++)
            order[start[which[i]]++] = i;
    }
    /* Register as a reader of every engine (delete/compact exclusion). */
    size_t entered = 0;
    int rc = ZR_OK;
    for (; entered < nengines; entered++) {
        rc = zre_enter_read(engines[entered], "gather");
        if (rc < 0)
            break;
    }
    if (rc == ZR_OK)
        rc = gather_checked(engines, which, order, index, count, dst, dst_capacity, record_size,
                            dst_bounds);
    while (entered > 0)
        zre_leave_read(engines[--entered]);
    free(heap);
    return rc;
}

static int gather_checked(zre_engine *const *engines, const uint32_t *which, const uint64_t *order,
                          const uint64_t *index, uint64_t count, void *dst, uint64_t dst_capacity,
                          uint64_t record_size, const uint64_t *dst_bounds)
{
    zre_engine *e = engines[0]; /* its pool and CPU count serve the whole call */
    bool all_raw = true;
    /* Each engine's length is read once per run of positions in it: it
     * only grows while this call is registered as a reader. */
    zre_engine *len_e = NULL;
    uint64_t length = 0;
    bool any_remote = false;
    for (uint64_t i = 0; i < count; i++) {
        zre_engine *ei = which ? engines[which[i]] : e;
        if (ei != len_e) {
            len_e = ei;
            length = zre_length(ei);
            all_raw &= ei->codec == ZRE_CODEC_RAW;
            any_remote |= ei->remote != NULL;
        }
        if (index[i] >= length)
            return which ? zr_set_error(ZR_ERANGE, "gather: index %" PRIu64 " out of range for store %s "
                                        "of %" PRIu64 " records (position %" PRIu64 ")", index[i],
                                        ei->path, length, i)
                         : zr_set_error(ZR_ERANGE, "gather: index %" PRIu64 " out of range for store "
                                        "of %" PRIu64 " records (position %" PRIu64 ")", index[i],
                                        length, i);
    }
    uint64_t total;
    if (dst_bounds) {
        for (uint64_t i = 0; i < count; i++)
            if (dst_bounds[i + 1] < dst_bounds[i])
                return zr_set_error(ZR_EINVAL, "gather: dst_bounds decrease at position %" PRIu64
                                    " (%" PRIu64 " then %" PRIu64 ")", i, dst_bounds[i],
                                    dst_bounds[i + 1]);
        if (dst_bounds[count] > dst_capacity)
            return zr_set_error(ZR_EINVAL, "gather: destination needs %" PRIu64 " bytes, capacity is %"
                                PRIu64, dst_bounds[count], dst_capacity);
        total = dst_bounds[count] - dst_bounds[0];
    } else {
        if (record_size == 0)
            return zr_set_error(ZR_EINVAL, "gather: record_size is 0 with fixed placement");
        if (count > dst_capacity / record_size)
            return zr_set_error(ZR_EINVAL, "gather: %" PRIu64 " records of %" PRIu64 " bytes do not "
                                "fit a destination of %" PRIu64 " bytes", count, record_size,
                                dst_capacity);
        total = count * record_size;
    }

    /* A store at a URL: the batch's table entries and record bytes are
     * downloaded first, in parallel range requests; the reads below then
     * come from the node's cache. */
    zre_rhold *held = NULL;
    if (any_remote) {
        int prc = zre_remote_prepare(engines, which, index, count, 0, &held);
        if (prc < 0) {
            zre_remote_release(held);
            return prc;
        }
    }
    gjob j = {engines, which, index, count, dst, record_size, dst_bounds, order, 1, all_raw, 0, NULL};
    zre_err one = {0};
    uint64_t inline_max = e->codec == ZRE_CODEC_RAW ? INLINE_MAX_BYTES_RAW : INLINE_MAX_BYTES_ZSTD;
    bool small = total < inline_max && !(all_raw && count >= POOL_MIN_RECORDS_RAW);
    if (small || count < INLINE_MAX_RECORDS || e->ncpu < 2) {
        j.errs = &one;
        gather_shard(&j, 0);
    } else {
        j.nshards = count < e->ncpu ? (unsigned)count : e->ncpu;
        j.errs = calloc(j.nshards, sizeof *j.errs);
        if (!j.errs) {
            j.nshards = 1;
            j.errs = &one;
            gather_shard(&j, 0);
        } else {
            zre_pool_run(&e->pool, j.nshards, gather_shard, &j);
        }
    }
    int rc = ZR_OK;
    if (atomic_load(&j.failed)) {
        /* Report the failure of the lowest shard that failed. */
        for (unsigned s = 0; s < j.nshards; s++) {
            if (j.errs[s].status < 0) {
                rc = zre_err_raise(&j.errs[s]);
                break;
            }
        }
    }
    if (j.errs != &one)
        free(j.errs);
    zre_remote_release(held);
    return rc;
}

/* One record into `out` (exactly l->logic_length bytes), with a private
 * decoding context: for zre_check_record. */
int zre_read_one(zre_engine *e, uint64_t idx, const zre_loc *l, unsigned char *out)
{
    gshard sh = {0};
    int rc = read_record(e, &sh, idx, l, out, l->logic_length);
    zre_dctx_put(e, sh.dctx);
    free(sh.stage);
    return rc;
}

ZRE_API int zre_record_sizes(zre_engine *e, const uint64_t *index, uint64_t count, uint64_t *sizes)
{
    if (!e || (count > 0 && (!index || !sizes)))
        return zr_set_error(ZR_EINVAL, "record_sizes: NULL argument");
    int rc = zre_enter_read(e, "record_sizes");
    if (rc < 0)
        return rc;
    uint64_t length = zre_length(e);
    for (uint64_t i = 0; i < count && rc == 0; i++)
        if (index[i] >= length)
            rc = zr_set_error(ZR_ERANGE, "record_sizes: index %" PRIu64 " out of range for store "
                              "of %" PRIu64 " records (position %" PRIu64 ")", index[i], length, i);
    zre_rhold *held = NULL;
    if (rc == 0 && e->remote)
        rc = zre_remote_prepare(&e, NULL, index, count, 1, &held);
    for (uint64_t b = 0; b < count && rc == 0; b += ZRE_LOCS_AT_MAX) {
        zre_loc l[ZRE_LOCS_AT_MAX];
        uint64_t n = count - b < ZRE_LOCS_AT_MAX ? count - b : ZRE_LOCS_AT_MAX;
        rc = zre_read_locs_at(e, index + b, n, l);
        for (uint64_t i = 0; rc == 0 && i < n; i++)
            sizes[b + i] = l[i].logic_length;
    }
    zre_remote_release(held);
    zre_leave_read(e);
    return rc;
}
