/*
 * engine.c - store lifecycle (create/open/close/sync), meta.zr, the
 * record table files, fd tables, stats and shared helpers.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zstd.h>

#include "engine_internal.h"

#ifndef ZRENGINE_VERSION_STRING
#define ZRENGINE_VERSION_STRING "0.0.0"
#endif

ZRE_API unsigned zrengine_version(void) { return ZRENGINE_VERSION_NUMBER; }
ZRE_API const char *zrengine_version_string(void) { return ZRENGINE_VERSION_STRING; }

/* ---------------------------------------------------------------- codecs */

ZRE_API const char *zre_codec_name(zre_codec codec)
{
    switch (codec) {
    case ZRE_CODEC_RAW: return "raw";
    case ZRE_CODEC_ZSTD: return "zstd";
    case ZRE_CODEC_ZSTD_DICT: return "zstd_dict";
    default: return NULL;
    }
}

ZRE_API int zre_codec_parse(const char *name, zre_codec *out)
{
    if (!name || !out)
        return zr_set_error(ZR_EINVAL, "codec_parse: NULL argument");
    for (int c = ZRE_CODEC_RAW; c <= ZRE_CODEC_ZSTD_DICT; c++) {
        if (strcmp(name, zre_codec_name((zre_codec)c)) == 0) {
            *out = (zre_codec)c;
            return ZR_OK;
        }
    }
    return zr_set_error(ZR_EINVAL, "codec_parse: unknown codec '%s', expected raw, zstd or zstd_dict",
                        name);
}

/* ------------------------------------------------------------ checksums */

uint32_t zre_fnv1a32(const void *buf, size_t len)
{
    const unsigned char *p = buf;
    uint32_t h = 0x811c9dc5u;
    for (size_t i = 0; i < len; i++) {
        h ^= p[i];
        h *= 0x01000193u;
    }
    return h;
}

uint64_t zre_fnv1a64(uint64_t h, const void *buf, size_t len)
{
    const unsigned char *p = buf;
    for (size_t i = 0; i < len; i++) {
        h ^= p[i];
        h *= UINT64_C(0x100000001b3);
    }
    return h;
}

/* ---------------------------------------------------------------- paths */

char *zre_join(const zre_engine *e, const char *name)
{
    size_t n = strlen(e->path) + strlen(name) + 2;
    char *p = malloc(n);
    if (p)
        snprintf(p, n, "%s/%s", e->path, name);
    return p;
}

void zre_file_path(const zre_engine *e, char *buf, size_t cap, uint64_t id, const char *ext)
{
    snprintf(buf, cap, "%s/%" PRIu64 ".%s", e->path, id, ext);
}

/* Enough for "<path>/<20 digits>.chunk" and "<path>/meta.zr". */
static size_t path_cap(const zre_engine *e) { return strlen(e->path) + 40; }

/* ------------------------------------------------------------ fd tables */

int zre_fdtab_set(zre_fdtab *t, uint64_t id, zrp_file f, uint64_t size, const unsigned char *map,
                  uint64_t map_len)
{
    if (id >= (uint64_t)ZRE_FDTAB_TOP * ZRE_FDTAB_BLOCK)
        return ZR_EUNSUPPORTED;
    size_t b = (size_t)(id / ZRE_FDTAB_BLOCK);
    zre_fent *blk = atomic_load_explicit(&t->top[b], memory_order_relaxed);
    if (!blk) {
        blk = malloc(ZRE_FDTAB_BLOCK * sizeof *blk);
        if (!blk)
            return ZR_ENOMEM;
        for (unsigned i = 0; i < ZRE_FDTAB_BLOCK; i++) {
            blk[i].f = ZRP_FILE_INVALID;
            blk[i].obj = NULL;
            blk[i].map = NULL;
            blk[i].map_len = 0;
            atomic_init(&blk[i].size, 0);
        }
        atomic_store_explicit(&t->top[b], blk, memory_order_release);
    }
    zre_fent *ent = &blk[id % ZRE_FDTAB_BLOCK];
    ent->f = f;
    ent->map = map;
    ent->map_len = map_len;
    atomic_store_explicit(&ent->size, size, memory_order_release);
    if (id + 1 > t->count)
        t->count = id + 1;
    return ZR_OK;
}

static void fent_unmap(zre_fent *ent)
{
    zrp_unmap((void *)ent->map, ent->map_len);
    ent->map = NULL;
    ent->map_len = 0;
    atomic_store_explicit(&ent->size, 0, memory_order_relaxed);
}

void zre_fdtab_drop(zre_fdtab *t, uint64_t id)
{
    zre_fent *ent = zre_fdtab_ent(t, id);
    if (!ent)
        return;
    fent_unmap(ent);
    zrp_close(&ent->f);
}

/* Close every descriptor of `t`; with `release`, also unmap the files and
 * free the blocks, leaving it empty (zre_forget_after_fork is the case
 * without: the child leaks its inherited mappings by design). */
static void fdtab_close_fds(zre_fdtab *t, bool release)
{
    /* Only ids below `count` were ever set: the rest of a block holds
     * never-opened entries, and most of the top level no block at all. */
    const size_t nblocks = (size_t)((t->count + ZRE_FDTAB_BLOCK - 1) / ZRE_FDTAB_BLOCK);
    for (size_t b = 0; b < nblocks; b++) {
        zre_fent *blk = atomic_load_explicit(&t->top[b], memory_order_relaxed);
        if (!blk)
            continue;
        const uint64_t first = (uint64_t)b * ZRE_FDTAB_BLOCK;
        const unsigned used = t->count - first < ZRE_FDTAB_BLOCK ? (unsigned)(t->count - first)
                                                                 : ZRE_FDTAB_BLOCK;
        for (unsigned i = 0; i < used; i++) {
            if (release)
                fent_unmap(&blk[i]);
            zrp_close(&blk[i].f);
        }
        if (release) {
            free(blk);
            t->top[b] = NULL;
        }
    }
    if (release)
        t->count = 0;
}

/* Whether the mapped read path is used at all: only where a file's whole
 * format capacity (4 GiB) fits the address space many times over. A
 * test-only build (ZRE_TEST_NO_MAP) keeps the pread path covered. */
#if UINTPTR_MAX > UINT32_MAX && !defined(ZRE_TEST_NO_MAP)
#define ZRE_USE_MAP 1
#else
#define ZRE_USE_MAP 0
#endif

/* The status and message for a failed zrp_open of store file `p`: a
 * symbolic link or a non-regular file is a malformed store, not an I/O
 * error. */
static int zre_open_error(const zre_engine *e, const char *p, int prc)
{
    if (prc == -ELOOP || prc == ZRP_ENOTREG)
        return zr_set_error(ZR_ENOTSTORE, "%s: %s is malformed: %s is %s; store files must be "
                            "regular files (never followed through a link)", zre_op(e), e->path, p,
                            prc == -ELOOP ? "a symbolic link" : "not a regular file");
    return zr_set_error(ZR_EIO, "%s: cannot open %s: %s", zre_op(e), p, zr_os_strerror(prc));
}

/* Open (creating when `create`) file `id` of kind `ext` into table `t`.
 * Returns 1 when opened, 0 when missing and !create, or a negative status. */
int zre_open_numbered(zre_engine *e, zre_fdtab *t, uint64_t id, const char *ext, bool create)
{
    if (e->remote)
        return zre_remote_open_numbered(e, t, id, ext);
    if (zre_fdtab_get(t, id).fd >= 0)
        return 1;
    size_t cap = path_cap(e);
    char *p = malloc(cap);
    if (!p)
        return zr_set_error(ZR_ENOMEM, "engine: out of memory for a path");
    zre_file_path(e, p, cap, id, ext);
    zrp_file f;
    unsigned mode = e->readonly ? ZRP_READ : ZRP_READ | ZRP_WRITE | (create ? ZRP_CREATE : 0u);
    int rc = zrp_open(&f, p, mode);
    if (rc == -ENOENT && !create) {
        free(p);
        return 0;
    }
    if (rc < 0) {
        rc = zre_open_error(e, p, rc);
        free(p);
        return rc;
    }
    uint64_t size = 0;
    rc = zrp_file_size(f, &size);
    if (rc < 0) {
        zrp_close(&f);
        rc = zr_set_error(ZR_EIO, "%s: cannot stat %s: %s", zre_op(e), p, zr_os_strerror(rc));
        free(p);
        return rc;
    }
    /* A fixed reservation of the format capacity: the mapping never moves
     * or grows while gathers read through it. A refusal is not an error:
     * this file is then read with pread. */
    void *map = NULL;
    uint64_t map_len = t == &e->chunks ? ZRE_INT_CHUNK_CAPACITY
                                       : ZRE_INT_SEG_ENTRIES * ZRE_LOC_ENTRY_SIZE;
    if (!ZRE_USE_MAP || zrp_map_readonly(f, map_len, &map) < 0)
        map = NULL;
    rc = zre_fdtab_set(t, id, f, size, map, map ? map_len : 0);
    if (rc < 0) {
        zrp_unmap(map, map_len);
        zrp_close(&f);
        rc = zr_set_error(rc, "engine: cannot track %s (id %" PRIu64 ")", p, id);
        free(p);
        return rc;
    }
    free(p);
    return 1;
}

int zre_ensure_chunk(zre_engine *e, uint32_t id)
{
    int rc = zre_open_numbered(e, &e->chunks, id, "chunk", true);
    return rc < 0 ? rc : ZR_OK;
}

int zre_ensure_seg(zre_engine *e, uint64_t id)
{
    int rc = zre_open_numbered(e, &e->locs, id, "loc", true);
    return rc < 0 ? rc : ZR_OK;
}

/* ------------------------------------------------------------ loc files */

int zre_write_locs(zre_engine *e, uint64_t first, const unsigned char *buf, uint64_t n)
{
    while (n > 0) {
        uint64_t seg = first / ZRE_INT_SEG_ENTRIES;
        uint64_t in_seg = first % ZRE_INT_SEG_ENTRIES;
        uint64_t take = ZRE_INT_SEG_ENTRIES - in_seg;
        if (take > n)
            take = n;
        int rc = zre_ensure_seg(e, seg);
        if (rc < 0)
            return rc;
        rc = zrp_pwrite_all(zre_fdtab_get(&e->locs, seg), buf, (size_t)(take * ZRE_LOC_ENTRY_SIZE),
                            in_seg * ZRE_LOC_ENTRY_SIZE);
        if (rc < 0)
            return zr_set_error(ZR_EIO, "%s: writing %" PRIu64 " entries to %s/%" PRIu64
                                ".loc at entry %" PRIu64 " failed: %s", zre_op(e),
                                take, e->path, seg, in_seg, zr_os_strerror(rc));
        zre_fdtab_grow(&e->locs, seg, (in_seg + take) * ZRE_LOC_ENTRY_SIZE);
        buf += take * ZRE_LOC_ENTRY_SIZE;
        first += take;
        n -= take;
    }
    return ZR_OK;
}

int zre_read_locs(zre_engine *e, uint64_t first, unsigned char *buf, uint64_t n)
{
    while (n > 0) {
        uint64_t seg = first / ZRE_INT_SEG_ENTRIES;
        uint64_t in_seg = first % ZRE_INT_SEG_ENTRIES;
        uint64_t take = ZRE_INT_SEG_ENTRIES - in_seg;
        if (take > n)
            take = n;
        const zre_fent *ent = zre_fdtab_ent(&e->locs, seg);
        if (!zre_fent_open(ent))
            return zr_set_error(ZR_ECORRUPT, "record table: segment %s/%" PRIu64
                                ".loc is not open for index %" PRIu64, e->path, seg, first);
        uint64_t lo = in_seg * ZRE_LOC_ENTRY_SIZE, bytes = take * ZRE_LOC_ENTRY_SIZE;
        int rc;
        if (ent->map) {
            /* Bounds first: a page past end of file would raise SIGBUS. */
            if (lo + bytes > atomic_load_explicit(&ent->size, memory_order_acquire)) {
                rc = ZRP_ESHORT;
            } else {
                memcpy(buf, ent->map + lo, (size_t)bytes);
                rc = 0;
            }
        } else {
            rc = zre_fent_pread(ent, buf, (size_t)bytes, lo);
        }
        if (rc < 0)
            return zr_set_error(zre_io_status(rc, ZR_ECORRUPT),
                                "record table: reading entries %" PRIu64 "..%" PRIu64 " of %s/%" PRIu64
                                ".loc failed: %s", in_seg, in_seg + take, e->path, seg,
                                rc == ZRP_ESHORT ? "file too short" : zr_os_strerror(rc));
        buf += take * ZRE_LOC_ENTRY_SIZE;
        first += take;
        n -= take;
    }
    return ZR_OK;
}

int zre_read_locs_at(zre_engine *e, const uint64_t *index, uint64_t n, zre_loc *out)
{
    for (uint64_t i = 0; i < n; i++) {
        const zre_fent *ent = zre_fdtab_ent(&e->locs, index[i] / ZRE_INT_SEG_ENTRIES);
        if (ent && ent->map)
            ZRE_PREFETCH(ent->map + (index[i] % ZRE_INT_SEG_ENTRIES) * ZRE_LOC_ENTRY_SIZE);
    }
    for (uint64_t i = 0; i < n; i++) {
        unsigned char buf[ZRE_LOC_ENTRY_SIZE];
        int rc = zre_read_locs(e, index[i], buf, 1);
        if (rc < 0)
            return rc;
        zre_loc_decode(&out[i], buf);
    }
    return ZR_OK;
}

/* ---------------------------------------------------------------- meta */

void zre_meta_encode(unsigned char out[ZRE_META_SIZE], uint64_t length, uint32_t tail_chunk,
                     uint32_t tail_offset, zre_codec codec, uint32_t identity_tag)
{
    memset(out, 0, ZRE_META_SIZE);
    zre_put_u64(out, length);
    zre_put_u32(out + 8, tail_chunk);
    zre_put_u32(out + 12, tail_offset);
    out[16] = (unsigned char)codec;
    zre_put_u32(out + 24, identity_tag);
    zre_put_u32(out + 28, zre_fnv1a32(out, 28));
}

int zre_write_meta(zre_engine *e, uint64_t length, uint32_t tail_chunk, uint32_t tail_offset)
{
    unsigned char buf[ZRE_META_SIZE];
    zre_meta_encode(buf, length, tail_chunk, tail_offset, e->codec, e->identity_tag);
    /* One 32-byte write at offset 0 of the locked file: it stays within a
     * single sector, and the lock lives on this file, so no rename. */
    int rc = zrp_pwrite_all(e->meta, buf, sizeof buf, 0);
    if (rc < 0)
        return zr_set_error(ZR_EIO, "%s: writing %s/meta.zr failed: %s", zre_op(e), e->path,
                            zr_os_strerror(rc));
    return ZR_OK;
}

int zre_commit_meta(zre_engine *e, uint64_t length, uint32_t tail_chunk, uint32_t tail_offset)
{
    int rc = zre_write_meta(e, length, tail_chunk, tail_offset);
    if (rc == ZR_OK)
        return ZR_OK;
    /* The write may have landed in part: put the committed image back so
     * the header on disk is the one this handle still believes in. */
    unsigned char buf[ZRE_META_SIZE];
    zre_meta_encode(buf, atomic_load(&e->length), e->tail_chunk, e->tail_offset, e->codec,
                    e->identity_tag);
    zre_err err;
    zre_err_capture(&err, rc);
    int prc = zrp_pwrite_all(e->meta, buf, sizeof buf, 0);
    if (prc == 0)
        return zre_err_raise_with(&err, "; the previous header was written back, nothing committed");
    zre_err_raise_with(&err, "; writing the previous header back failed too");
    return zre_poison(e, rc);
}

const char *zre_op(const zre_engine *e) { return e->op ? e->op : "engine"; }

int zre_poison(zre_engine *e, int status)
{
    zre_err err;
    zre_err_capture(&err, status);
    if (!atomic_load(&e->poisoned)) {
        snprintf(e->poison_msg, sizeof e->poison_msg, "%s", err.msg);
        atomic_store(&e->poisoned, 1);
    }
    return zre_err_raise_with(&err, "; this handle of %s now refuses every call until it is "
                              "closed and the store reopened (a writable open recovers it)", e->path);
}

int zre_check_usable(zre_engine *e, const char *what)
{
    if (!atomic_load(&e->poisoned))
        return ZR_OK;
    return zr_set_error(ZR_ESTATE, "%s: this handle of %s refuses every call since an earlier "
                        "failure (%s); close it and reopen the store (a writable open recovers it)",
                        what, e->path, e->poison_msg);
}

/* ------------------------------------------------------- zstd contexts */

static void *ctx_pop(zre_engine *e, void ***list, size_t *count)
{
    void *c = NULL;
    zrp_mutex_lock(&e->ctx_lock);
    if (*count > 0)
        c = (*list)[--*count];
    zrp_mutex_unlock(&e->ctx_lock);
    return c;
}

/* Returns false when the context could not be kept (caller frees it). */
static bool ctx_push(zre_engine *e, void ***list, size_t *count, size_t *cap, void *c)
{
    bool kept = false;
    zrp_mutex_lock(&e->ctx_lock);
    if (*count == *cap) {
        size_t ncap = *cap ? *cap * 2 : 8;
        void **nl = realloc(*list, ncap * sizeof *nl);
        if (nl) {
            *list = nl;
            *cap = ncap;
        }
    }
    if (*count < *cap) {
        (*list)[(*count)++] = c;
        kept = true;
    }
    zrp_mutex_unlock(&e->ctx_lock);
    return kept;
}

void *zre_dctx_get(zre_engine *e)
{
    void *c = ctx_pop(e, &e->dctx_free, &e->dctx_count);
    return c ? c : ZSTD_createDCtx();
}

void zre_dctx_put(zre_engine *e, void *dctx)
{
    if (dctx && !ctx_push(e, &e->dctx_free, &e->dctx_count, &e->dctx_cap, dctx))
        ZSTD_freeDCtx(dctx);
}

void *zre_cctx_get(zre_engine *e)
{
    void *c = ctx_pop(e, &e->cctx_free, &e->cctx_count);
    if (c)
        return c;
    ZSTD_CCtx *cc = ZSTD_createCCtx();
    if (!cc)
        return NULL;
    /* Parameters are sticky across ZSTD_compress2 calls: set them once. A
     * referenced CDict (zstd_dict) brings its level 19 parameters; the frame
     * flags (checksum, content size, dictionary id) stay the context's. */
    if (ZSTD_isError(ZSTD_CCtx_setParameter(cc, ZSTD_c_compressionLevel, ZRE_ZSTD_LEVEL)) ||
        ZSTD_isError(ZSTD_CCtx_setParameter(cc, ZSTD_c_checksumFlag, 1)) ||
        ZSTD_isError(ZSTD_CCtx_setParameter(cc, ZSTD_c_contentSizeFlag, 1)) ||
        (e->cdict && ZSTD_isError(ZSTD_CCtx_refCDict(cc, (const ZSTD_CDict *)e->cdict)))) {
        ZSTD_freeCCtx(cc);
        return NULL;
    }
    return cc;
}

void zre_cctx_put(zre_engine *e, void *cctx)
{
    if (cctx && !ctx_push(e, &e->cctx_free, &e->cctx_count, &e->cctx_cap, cctx))
        ZSTD_freeCCtx(cctx);
}

/* ------------------------------------------------------------ lifecycle */

/* Close the chunk and table files (freeing their tables with `release`),
 * then meta.zr: closing it releases the store lock, so it goes last. */
static void engine_close_files(zre_engine *e, bool release)
{
    fdtab_close_fds(&e->chunks, release);
    fdtab_close_fds(&e->locs, release);
    zrp_close(&e->meta);
    zrp_close(&e->wlock);
}

static void engine_free(zre_engine *e)
{
    if (!e)
        return;
    zre_pool_destroy(&e->pool);
    engine_close_files(e, true);
    zre_remote_detach(e);
    for (size_t i = 0; i < e->dctx_count; i++)
        ZSTD_freeDCtx(e->dctx_free[i]);
    for (size_t i = 0; i < e->cctx_count; i++)
        ZSTD_freeCCtx(e->cctx_free[i]);
    free(e->dctx_free);
    free(e->cctx_free);
    ZSTD_freeDDict(e->ddict);
    ZSTD_freeCDict(e->cdict);
    free(e->dict);
    zrp_mutex_destroy(&e->ctx_lock);
    zrp_mutex_destroy(&e->writer);
    free(e->path);
    free(e);
}

static int engine_alloc(zre_engine **out, const char *path, zre_codec codec)
{
    zre_engine *e = calloc(1, sizeof *e);
    if (!e)
        return zr_set_error(ZR_ENOMEM, "engine: out of memory for handle of %s", path);
    e->meta = ZRP_FILE_INVALID;
    e->wlock = ZRP_FILE_INVALID;
    e->codec = codec;
    atomic_init(&e->length, 0);
    e->path = malloc(strlen(path) + 1);
    if (!e->path) {
        free(e);
        return zr_set_error(ZR_ENOMEM, "engine: out of memory for handle of %s", path);
    }
    strcpy(e->path, path);
    e->ncpu = zrp_cpu_count();
    int ok = zrp_mutex_init(&e->writer) == 0;
    if (ok && zrp_mutex_init(&e->ctx_lock) != 0) {
        zrp_mutex_destroy(&e->writer);
        ok = 0;
    }
    if (ok && zre_pool_init(&e->pool, e->ncpu > 1 ? e->ncpu - 1 : 0) != 0) {
        zrp_mutex_destroy(&e->ctx_lock);
        zrp_mutex_destroy(&e->writer);
        ok = 0;
    }
    if (!ok) {
        free(e->path);
        free(e);
        return zr_set_error(ZR_ENOMEM, "engine: cannot initialise locks for %s", path);
    }
    *out = e;
    return ZR_OK;
}

/* The store's locks (docs/FORMAT.md, Locks). Every handle holds a shared
 * lock on meta.zr for its lifetime: it marks "someone reads this store".
 * A writable handle also holds the exclusive lock on lock.zr, which only
 * writers touch, so writers exclude each other while readers come and go.
 * delete and compact turn the writer's shared meta.zr lock exclusive for
 * their duration (zre_enter_maint), which fails at once while any other
 * handle is open, and keeps new ones out until they finish. Handles of
 * older versions (exclusive meta.zr lock for writers, shared for readers)
 * are excluded or counted by the same meta.zr lock. */
static int open_locks(zre_engine *e, bool create)
{
    size_t cap = path_cap(e);
    char *p = malloc(cap);
    if (!p)
        return zr_set_error(ZR_ENOMEM, "engine: out of memory for a path");
    int rc = ZR_OK;
    if (!e->readonly) {
        snprintf(p, cap, "%s/lock.zr", e->path);
        rc = zrp_open(&e->wlock, p, ZRP_READ | ZRP_WRITE | ZRP_CREATE);
        if (rc < 0)
            rc = zre_open_error(e, p, rc);
        else if ((rc = zrp_lock_exclusive(e->wlock)) < 0)
            rc = rc == ZRP_EBUSY
                     ? zr_set_error(ZR_EBUSY, "store %s is busy: another writable handle (in this "
                                    "or another process) has it open; open it read-only to read "
                                    "beside that writer", e->path)
                     : zr_set_error(ZR_EIO, "%s: cannot lock %s: %s", zre_op(e), p,
                                    zr_os_strerror(rc));
        if (rc < 0) {
            free(p);
            return rc;
        }
    }
    snprintf(p, cap, "%s/meta.zr", e->path);
    unsigned mode = e->readonly ? ZRP_READ
                                : ZRP_READ | ZRP_WRITE | (create ? ZRP_CREATE | ZRP_EXCLUSIVE : 0u);
    rc = zrp_open(&e->meta, p, mode);
    if (rc < 0) {
        if (!create && rc == -ENOENT)
            rc = zr_set_error(ZR_ENOTSTORE, "open: %s is not a store: meta.zr is missing", e->path);
        else
            rc = zre_open_error(e, p, rc);
        free(p);
        return rc;
    }
    rc = zrp_lock_shared(e->meta);
    if (rc < 0) {
        if (rc == ZRP_EBUSY)
            rc = zr_set_error(ZR_EBUSY, "store %s is busy: a delete or compact is running on it "
                              "(they need the store to themselves; retry when it ends), or a "
                              "writable handle of an older version holds it", e->path);
        else
            rc = zr_set_error(ZR_EIO, "%s: cannot lock %s: %s", zre_op(e), p, zr_os_strerror(rc));
        free(p);
        return rc;
    }
    free(p);
    return ZR_OK;
}

/* The parent directory of `path` (malloc'd), or NULL when it has none. */
static char *parent_of(const char *path)
{
    size_t n = strlen(path);
    while (n > 1 && path[n - 1] == '/')
        n--; /* ignore trailing slashes */
    while (n > 0 && path[n - 1] != '/')
        n--;
    while (n > 1 && path[n - 1] == '/')
        n--;
    if (n == 0)
        return NULL;
    char *d = malloc(n + 1);
    if (d) {
        memcpy(d, path, n);
        d[n] = '\0';
    }
    return d;
}

/* Check dictionary bytes and build the decoder dictionary (and keep a
 * copy for the encoder, built on first append). `what` names the source
 * in messages ("create: dict_bytes" or "<path>/dict.zr"). */
static int load_dict(zre_engine *e, const void *dict, uint64_t size, int bad_status, const char *what)
{
    if (size < 8 || size > ZRE_DICT_MAX)
        return zr_set_error(bad_status, "%s: a zstd dictionary of %" PRIu64 " bytes, expected 8..%"
                            PRIu64, what, size, (uint64_t)ZRE_DICT_MAX);
    const unsigned char *d = dict;
    /* Only zstd's own dictionary format (ZDICT output): its id is then
     * stamped in every frame, so a frame and a different dictionary never
     * meet silently. */
    if (zre_get_u32(d) != 0xEC30A437u)
        return zr_set_error(bad_status, "%s: not a zstd dictionary: magic is 0x%08x, expected "
                            "0xec30a437", what, zre_get_u32(d));
    if (ZSTD_getDictID_fromDict(dict, (size_t)size) == 0)
        return zr_set_error(bad_status, "%s: zstd dictionary has id 0", what);
    e->dict = malloc((size_t)size);
    if (!e->dict)
        return zr_set_error(ZR_ENOMEM, "%s: out of memory for a %" PRIu64 "-byte dictionary", what,
                            size);
    memcpy(e->dict, dict, (size_t)size);
    e->dict_size = (size_t)size;
    e->ddict = ZSTD_createDDict(e->dict, e->dict_size);
    if (!e->ddict)
        return zr_set_error(bad_status, "%s: the zstd dictionary does not load (damaged entropy "
                            "tables)", what);
    return ZR_OK;
}

/* Close `e`, a handle whose directory this process just made, and remove
 * the directory with the files create writes in it; keeps the calling
 * thread's error detail (for status `rc` < 0). */
static void remove_created(zre_engine *e, int rc)
{
    zre_err err;
    zre_err_capture(&err, rc);
    char *path = strdup(e->path);
    engine_free(e);
    if (!path)
        return;
    static const char *const names[] = {"meta.zr", "dict.zr", "0.chunk", "0.loc", "lock.zr"};
    size_t cap = strlen(path) + 64;
    char *p = malloc(cap);
    for (size_t i = 0; p && i < sizeof names / sizeof names[0]; i++) {
        snprintf(p, cap, "%s/%s", path, names[i]);
        (void)zrp_unlink(p);
    }
    if (p) {
        /* A temporary left by a failed atomic write of dict.zr. */
        snprintf(p, cap, "%s/dict.zr.tmp.%ld", path, (long)getpid());
        (void)zrp_unlink(p);
    }
    free(p);
    (void)zrp_rmdir(path);
    free(path);
    if (rc < 0)
        zre_err_raise(&err);
}

ZRE_API int zre_create_ex(zre_engine **out, const char *path, const zre_create_options *opt)
{
    if (!out || !path || !*path || !opt)
        return zr_set_error(ZR_EINVAL, "create: NULL or empty argument");
    *out = NULL;
    zre_codec codec = opt->codec;
    if (!zre_codec_name(codec))
        return zr_set_error(ZR_EINVAL, "create: unknown codec %d for %s, expected 0 (raw), 1 (zstd) "
                            "or 2 (zstd_dict)", (int)codec, path);
    if (codec == ZRE_CODEC_ZSTD_DICT && (!opt->dict || opt->dict_size == 0))
        return zr_set_error(ZR_EINVAL, "create: codec zstd_dict needs dictionary bytes (train one "
                            "first); %s not created", path);
    if (codec != ZRE_CODEC_ZSTD_DICT && (opt->dict || opt->dict_size))
        return zr_set_error(ZR_EINVAL, "create: a dictionary is only meaningful with codec "
                            "zstd_dict, not %s (%s)", zre_codec_name(codec), path);
    if (zrp_path_exists(path))
        return zr_set_error(ZR_EEXIST, "create: %s already exists", path);

    zre_engine *e;
    int rc = engine_alloc(&e, path, codec);
    if (rc < 0)
        return rc;
    e->identity_tag = opt->identity_tag;
    if (codec == ZRE_CODEC_ZSTD_DICT) {
        rc = load_dict(e, opt->dict, opt->dict_size, ZR_EINVAL, "create: dictionary bytes");
        if (rc < 0) {
            engine_free(e);
            return rc;
        }
    }

    char *parent = parent_of(path);
    if (parent) {
        rc = zrp_mkdir_parents(parent);
        if (rc < 0) {
            rc = zr_set_error(ZR_EIO, "create: cannot create parent directory %s: %s", parent,
                              zr_os_strerror(rc));
            free(parent);
            engine_free(e);
            return rc;
        }
    }
    e->op = "create";
    rc = zrp_mkdir(path);
    if (rc < 0) {
        free(parent);
        engine_free(e);
        if (rc == -EEXIST)
            return zr_set_error(ZR_EEXIST, "create: %s already exists", path);
        return zr_set_error(ZR_EIO, "create: cannot create directory %s: %s", path, zr_os_strerror(rc));
    }

    /* dict.zr is durable before meta.zr exists: no zstd_dict store is ever
     * seen without its dictionary. */
    if (codec == ZRE_CODEC_ZSTD_DICT) {
        char *dp = zre_join(e, "dict.zr");
        if (!dp) {
            rc = zr_set_error(ZR_ENOMEM, "create: out of memory for a path");
        } else {
            int prc = zrp_write_file_atomic(dp, e->dict, e->dict_size);
            if (prc < 0)
                rc = zr_set_error(ZR_EIO, "create: cannot write %s: %s", dp, zr_os_strerror(prc));
            free(dp);
        }
    }
    if (rc == 0)
        rc = open_locks(e, true);
    if (rc == 0)
        rc = zre_write_meta(e, 0, 0, 0);
    if (rc == 0 && (rc = zrp_fsync(e->meta)) < 0)
        rc = zr_set_error(ZR_EIO, "create: fsync of %s/meta.zr failed: %s", path, zr_os_strerror(rc));
    if (rc == 0 && (rc = zrp_fsync_dir(path)) < 0)
        rc = zr_set_error(ZR_EIO, "create: fsync of directory %s failed: %s", path, zr_os_strerror(rc));
    if (rc == 0 && parent && (rc = zrp_fsync_dir(parent)) < 0)
        rc = zr_set_error(ZR_EIO, "create: fsync of directory %s (the parent of %s) failed: %s",
                          parent, path, zr_os_strerror(rc));
    free(parent);
    if (rc < 0) {
        /* Remove what this call made, so that a retry (once there is space
         * again) does not meet "already exists". */
        remove_created(e, rc);
        return rc;
    }
    e->op = NULL;
    *out = e;
    return ZR_OK;
}

ZRE_API int zre_discard(zre_engine *e)
{
    if (!e)
        return ZR_OK;
    if (e->readonly || atomic_load(&e->length) != 0) {
        int rc = zr_set_error(ZR_EINVAL, "discard: %s is not a fresh empty store; closed, not "
                              "removed", e->path);
        engine_free(e);
        return rc;
    }
    remove_created(e, ZR_OK);
    return ZR_OK;
}

ZRE_API int zre_create(zre_engine **out, const char *path, zre_codec codec)
{
    zre_create_options o;
    memset(&o, 0, sizeof o);
    o.codec = codec;
    return zre_create_ex(out, path, &o);
}

/* Validate the record table and chunk files against a header (length,
 * tail_chunk, tail_offset) and raise the known sizes of the files that may
 * have grown since they were opened: every segment, and chunks from
 * `from_chunk` up (open: the tail chunk; refresh: the view's old tail
 * chunk, which may have grown before a rollover). Opens files not yet
 * open. */
static int open_validate_files(zre_engine *e, uint64_t length, uint32_t tail_chunk,
                               uint32_t tail_offset, uint32_t from_chunk)
{
    uint64_t nseg = (length + ZRE_INT_SEG_ENTRIES - 1) / ZRE_INT_SEG_ENTRIES;
    for (uint64_t s = 0; s < nseg; s++) {
        int rc = zre_open_numbered(e, &e->locs, s, "loc", false);
        if (rc < 0)
            return rc;
        if (rc == 0) {
            e->files_short = true;
            return zr_set_error(ZR_ENOTSTORE, "open: %s is malformed: record table segment %" PRIu64
                                ".loc is missing for length %" PRIu64, e->path, s, length);
        }
        uint64_t need = length - s * ZRE_INT_SEG_ENTRIES;
        if (need > ZRE_INT_SEG_ENTRIES)
            need = ZRE_INT_SEG_ENTRIES;
        uint64_t size;
        rc = zre_fent_size(&e->locs, s, &size);
        if (rc < 0)
            return zr_set_error(ZR_EIO, "open: cannot stat %s/%" PRIu64 ".loc: %s", e->path, s,
                                zr_os_strerror(rc));
        if (size < need * ZRE_LOC_ENTRY_SIZE)
            return e->files_short = true,
                   zr_set_error(ZR_ENOTSTORE, "open: %s is malformed: %" PRIu64 ".loc holds %" PRIu64
                                " bytes, expected at least %" PRIu64 " for length %" PRIu64,
                                e->path, s, size, need * ZRE_LOC_ENTRY_SIZE, length);
        zre_fdtab_grow(&e->locs, s, size);
    }
    for (uint64_t c = 0; c <= tail_chunk; c++) {
        bool is_tail = c == tail_chunk;
        bool required = !is_tail || length > 0 || tail_offset > 0;
        int rc = zre_open_numbered(e, &e->chunks, c, "chunk", false);
        if (rc < 0)
            return rc;
        if (rc == 0) {
            if (required)
                return e->files_short = true,
                       zr_set_error(ZR_ENOTSTORE, "open: %s is malformed: chunk %" PRIu64
                                    ".chunk is missing (tail chunk %u, length %" PRIu64 ")",
                                    e->path, c, tail_chunk, length);
            continue;
        }
        if (c >= from_chunk) {
            uint64_t size;
            rc = zre_fent_size(&e->chunks, c, &size);
            if (rc < 0)
                return zr_set_error(ZR_EIO, "open: cannot stat %s/%" PRIu64 ".chunk: %s", e->path, c,
                                    zr_os_strerror(rc));
            if (is_tail && size < tail_offset)
                return e->files_short = true,
                       zr_set_error(ZR_ENOTSTORE, "open: %s is malformed: tail chunk %" PRIu64
                                    ".chunk holds %" PRIu64 " bytes, expected at least tail_offset %u",
                                    e->path, c, size, tail_offset);
            zre_fdtab_grow(&e->chunks, c, size);
        }
    }
    return ZR_OK;
}

/* ZRE_OPEN_RECOVER: meta.zr claims more than the files hold (appends that
 * never reached the disk). Keep the longest prefix of records whose table
 * entries are valid and whose bytes lie within the chunk files, set the
 * frontier past the last of them, and make that header durable. Synced
 * records are all durable, so they are all in the prefix. */
static int recover_durable_prefix(zre_engine *e, uint64_t *length)
{
    uint64_t keep = 0;
    uint32_t tc = 0, to = 0;
    int rc = ZR_OK;
    for (uint64_t i = 0; i < *length; i++) {
        uint64_t s = i / ZRE_INT_SEG_ENTRIES;
        int orc = zre_open_numbered(e, &e->locs, s, "loc", false);
        if (orc < 0)
            return orc;
        if (orc == 0)
            break;
        unsigned char buf[ZRE_LOC_ENTRY_SIZE];
        int prc = zrp_pread_all(zre_fdtab_get(&e->locs, s), buf, sizeof buf,
                                (i % ZRE_INT_SEG_ENTRIES) * ZRE_LOC_ENTRY_SIZE);
        if (prc == ZRP_ESHORT)
            break;
        if (prc < 0)
            return zr_set_error(ZR_EIO, "open: recovery cannot read %s/%" PRIu64 ".loc: %s", e->path,
                                s, zr_os_strerror(prc));
        zre_loc l;
        zre_loc_decode(&l, buf);
        if (zre_loc_problem(&l, e->codec))
            break;
        orc = zre_open_numbered(e, &e->chunks, l.chunk_id, "chunk", false);
        if (orc < 0)
            return orc;
        uint64_t size = 0;
        if (orc == 0 || zrp_file_size(zre_fdtab_get(&e->chunks, l.chunk_id), &size) < 0 ||
            (uint64_t)l.offset + l.phys_length > size)
            break;
        keep = i + 1;
        uint32_t end = l.offset + l.phys_length;
        if (l.chunk_id > tc || (l.chunk_id == tc && end > to)) {
            tc = l.chunk_id;
            to = end;
        }
    }
    /* Chunks up to the new tail must all exist (earlier ones may hold no
     * live record after a compact): create any missing, empty. */
    for (uint32_t c = 0; c <= tc && rc == 0; c++)
        rc = zre_ensure_chunk(e, c);
    if (rc == 0)
        rc = zre_write_meta(e, keep, tc, to);
    if (rc == 0) {
        e->tail_chunk = tc;
        e->tail_offset = to;
        atomic_store(&e->length, keep);
        rc = zre_sync_all(e);
    }
    if (rc == 0)
        *length = keep;
    return rc;
}

/* Load dict.zr of a zstd_dict store, or refuse a stray one elsewhere. */
static int open_dict(zre_engine *e)
{
    char *dp = zre_join(e, "dict.zr");
    if (!dp)
        return zr_set_error(ZR_ENOMEM, "open: out of memory for a path");
    int rc = ZR_OK;
    if (e->codec != ZRE_CODEC_ZSTD_DICT) {
        /* A remote store is what was pushed: only engine files, no dict.zr. */
        if (!e->remote && zrp_path_exists(dp))
            rc = zr_set_error(ZR_ENOTSTORE, "open: %s is malformed: codec %s store has a dict.zr "
                              "(%s)", e->path, zre_codec_name(e->codec), dp);
        free(dp);
        return rc;
    }
    void *buf = NULL;
    size_t len = 0;
    int prc = zre_read_aux(e, "dict.zr", &buf, &len, (size_t)ZRE_DICT_MAX);
    if (prc == -ENOENT)
        rc = zr_set_error(ZR_ENOTSTORE, "open: %s is malformed: codec zstd_dict but %s is missing",
                          e->path, dp);
    else if (prc == -EFBIG)
        rc = zr_set_error(ZR_ENOTSTORE, "open: %s is larger than %" PRIu64 " bytes", dp,
                          (uint64_t)ZRE_DICT_MAX);
    else if (prc < 0)
        rc = zr_set_error(zre_io_status(prc, ZR_EIO), "open: cannot read %s: %s", dp,
                          zr_os_strerror(prc));
    else
        rc = load_dict(e, buf, len, ZR_ENOTSTORE, dp);
    free(buf);
    free(dp);
    return rc;
}

/* How many times a read of meta.zr that met a write in progress (a bad
 * checksum, or an unchecked header that changed between two reads) is
 * retried before the header counts as damaged. A 32-byte write is over in
 * well under a microsecond; the budget, with a yield between tries, covers
 * a writer descheduled mid-copy. */
#define ZRE_META_RETRIES 2000

/* Read and check meta.zr: size, field checks, checksum. A header whose
 * bytes 24..31 are all zero was written before headers carried a checksum
 * (and an identity tag): it is accepted once two reads in a row agree. A
 * mismatch is retried (another process may be rewriting the header right
 * now), so a reader never fails on, nor trusts, a torn header. */
static int meta_read(zre_engine *e, const char *what, zre_meta_state *out)
{
    unsigned char m[ZRE_META_SIZE], prev[ZRE_META_SIZE];
    bool have_prev = false;
    /* A remote meta.zr is an uploaded, finished file: read once. */
    const unsigned retries = e->remote ? 0 : ZRE_META_RETRIES;
    for (unsigned attempt = 0;; attempt++) {
        uint64_t size;
        int rc;
        if (e->remote) {
            if ((rc = zre_remote_meta(e, what, m, &size)) < 0)
                return rc;
        } else if ((rc = zrp_file_size(e->meta, &size)) < 0) {
            return zr_set_error(ZR_EIO, "%s: cannot stat %s/meta.zr: %s", what, e->path,
                                zr_os_strerror(rc));
        }
        if (size != ZRE_META_SIZE)
            return zr_set_error(ZR_ENOTSTORE, "%s: %s is malformed: meta.zr is %" PRIu64
                                " bytes, expected %u", what, e->path, size, ZRE_META_SIZE);
        rc = e->remote ? 0 : zrp_pread_all(e->meta, m, sizeof m, 0);
        if (rc < 0)
            return zr_set_error(ZR_EIO, "%s: cannot read %s/meta.zr: %s", what, e->path, zr_os_strerror(rc));
        bool legacy = zre_get_u64(m + 24) == 0;
        bool ok = legacy ? have_prev && memcmp(m, prev, sizeof m) == 0
                         : zre_get_u32(m + 28) == zre_fnv1a32(m, 28);
        if (ok)
            break;
        if (attempt >= retries) {
            if (legacy)
                return zr_set_error(ZR_ENOTSTORE, "%s: %s: meta.zr (a header without checksum) "
                                    "kept changing over %u reads", what, e->path, attempt + 1);
            return zr_set_error(ZR_ENOTSTORE, "%s: %s is malformed: meta.zr checksum is 0x%08x, "
                                "expected 0x%08x (the header is damaged)", what, e->path,
                                zre_get_u32(m + 28), zre_fnv1a32(m, 28));
        }
        memcpy(prev, m, sizeof m);
        have_prev = true;
        if (!legacy || attempt > 0)
            zrp_yield();
    }
    unsigned codec = m[16];
    if (codec > ZRE_CODEC_ZSTD_DICT)
        return zr_set_error(ZR_ENOTSTORE, "%s: %s is malformed: meta.zr codec byte is %u, "
                            "expected 0 (raw), 1 (zstd) or 2 (zstd_dict)", what, e->path, codec);
    for (unsigned i = 17; i < 24; i++)
        if (m[i] != 0)
            return zr_set_error(ZR_ENOTSTORE, "%s: %s is malformed: meta.zr reserved byte %u is "
                                "0x%02x, expected 0", what, e->path, i, m[i]);
    out->length = zre_get_u64(m);
    out->tail_chunk = zre_get_u32(m + 8);
    out->tail_offset = zre_get_u32(m + 12);
    out->codec = (zre_codec)codec;
    out->identity_tag = zre_get_u32(m + 24);
    if (out->tail_offset > ZRE_CHUNK_USABLE)
        return zr_set_error(ZR_ENOTSTORE, "%s: %s is malformed: meta.zr tail_offset %u beyond "
                            "chunk capacity", what, e->path, out->tail_offset);
    return ZR_OK;
}

ZRE_API int zre_open_ex(zre_engine **out, const char *path, unsigned flags)
{
    if (!out || !path || !*path)
        return zr_set_error(ZR_EINVAL, "open: NULL or empty argument");
    *out = NULL;
    if (flags & ~(ZRE_OPEN_READONLY | ZRE_OPEN_RECOVER))
        return zr_set_error(ZR_EINVAL, "open: unknown flags 0x%x for %s", flags, path);
    if ((flags & ZRE_OPEN_READONLY) && (flags & ZRE_OPEN_RECOVER))
        return zr_set_error(ZR_EINVAL, "open: recovery writes, so it needs a writable open, not "
                            "a read-only one (%s)", path);
    const bool url = zre_is_url(path);
    if (url && !(flags & ZRE_OPEN_READONLY))
        return zr_set_error(ZR_EUNSUPPORTED, "open: %s is a URL: stores at a URL open read-only "
                            "(upload a local store with push)", path);
    if (!url && !zrp_is_dir(path))
        return zr_set_error(ZR_ENOTSTORE, "open: %s is not a store: not a directory", path);
    bool readonly = (flags & ZRE_OPEN_READONLY) != 0;
    zre_engine *e;
    int rc = engine_alloc(&e, path, ZRE_CODEC_RAW);
    if (rc < 0)
        return rc;
    e->readonly = readonly;
    e->op = "open";
    rc = url ? zre_remote_attach(e) : open_locks(e, false);
    if (rc < 0)
        goto fail;

    zre_meta_state ms;
    rc = meta_read(e, "open", &ms);
    if (rc < 0)
        goto fail;
    uint64_t length = ms.length;
    e->tail_chunk = ms.tail_chunk;
    e->tail_offset = ms.tail_offset;
    e->identity_tag = ms.identity_tag;
    e->codec = ms.codec;
    rc = open_dict(e);
    if (rc < 0)
        goto fail;
    /* A journal left by an interrupted delete/compact: a writable open
     * replays it (or removes it when stale); a read-only open writes
     * nothing and refuses while one is pending. No delete or compact can
     * be running while this handle holds its shared meta.zr lock, so a
     * journal seen here was left by a crash. */
    rc = e->remote ? ZR_OK : zre_journal_recover(e, &length);
    if (rc < 0)
        goto fail;
    rc = open_validate_files(e, length, e->tail_chunk, e->tail_offset, e->tail_chunk);
    if (rc == ZR_ENOTSTORE && e->files_short) {
        if (flags & ZRE_OPEN_RECOVER) {
            rc = recover_durable_prefix(e, &length);
            if (rc == 0)
                rc = open_validate_files(e, length, e->tail_chunk, e->tail_offset, e->tail_chunk);
        } else {
            zre_err err;
            zre_err_capture(&err, rc);
            zre_err_raise_with(&err, "; if the store crashed or lost power after appends that were "
                               "never synced, a writable open with recovery (ZRE_OPEN_RECOVER) "
                               "keeps every record that reached the disk");
        }
    }
    if (rc < 0)
        goto fail;
    atomic_store_explicit(&e->length, length, memory_order_release);
    e->op = NULL;
    *out = e;
    return ZR_OK;
fail:
    engine_free(e);
    return rc;
}

ZRE_API int zre_open(zre_engine **out, const char *path) { return zre_open_ex(out, path, 0); }

ZRE_API int zre_refresh(zre_engine *e)
{
    if (!e)
        return zr_set_error(ZR_EINVAL, "refresh: NULL handle");
    if (!e->readonly || e->remote)
        return ZR_OK; /* the one writer: its view is always the newest; a URL: a fixed upload */
    zrp_mutex_lock(&e->writer);
    zre_meta_state ms;
    int rc = meta_read(e, "refresh", &ms);
    uint64_t old = atomic_load_explicit(&e->length, memory_order_relaxed);
    if (rc == 0 && (ms.length < old || ms.codec != e->codec ||
                    ms.identity_tag != e->identity_tag || ms.tail_chunk < e->tail_chunk ||
                    (ms.tail_chunk == e->tail_chunk && ms.tail_offset < e->tail_offset)))
        rc = zr_set_error(ZR_ECORRUPT, "refresh: store %s went back under a read-only handle "
                          "(length %" PRIu64 " -> %" PRIu64 ", frontier %u:%u -> %u:%u): it was "
                          "changed by something that ignores the store's locks; reopen it",
                          e->path, old, ms.length, e->tail_chunk, e->tail_offset, ms.tail_chunk,
                          ms.tail_offset);
    /* Known file sizes are measured after the header was read, so they
     * cover everything it commits (the writer writes payloads and table
     * entries before the header). */
    if (rc == 0)
        rc = open_validate_files(e, ms.length, ms.tail_chunk, ms.tail_offset, e->tail_chunk);
    if (rc == 0) {
        e->tail_chunk = ms.tail_chunk;
        e->tail_offset = ms.tail_offset;
        atomic_store_explicit(&e->length, ms.length, memory_order_release);
    }
    zrp_mutex_unlock(&e->writer);
    return rc;
}

ZRE_API int zre_is_readonly(const zre_engine *e) { return e && e->readonly ? 1 : 0; }
ZRE_API uint32_t zre_identity_tag(const zre_engine *e) { return e ? e->identity_tag : 0; }

int zre_enter_read(zre_engine *e, const char *what)
{
    int prc = zre_check_usable(e, what);
    if (prc < 0)
        return prc;
    atomic_fetch_add(&e->readers, 1);
    if (atomic_load(&e->maint)) {
        atomic_fetch_sub(&e->readers, 1);
        return zr_set_error(ZR_EBUSY, "%s: store %s is being changed by a delete or compact on this "
                            "handle, which needs exclusive use", what, e->path);
    }
    return ZR_OK;
}

int zre_enter_maint(zre_engine *e, const char *what)
{
    if (e->readonly)
        return zr_set_error(ZR_EUNSUPPORTED, "%s: store %s is open read-only", what, e->path);
    int prc = zre_check_usable(e, what);
    if (prc < 0)
        return prc;
    atomic_store(&e->maint, 1);
    unsigned r = atomic_load(&e->readers);
    if (r != 0) {
        atomic_store(&e->maint, 0);
        return zr_set_error(ZR_EBUSY, "%s: needs exclusive use of store %s, but %u gather(s) are "
                            "running on this handle", what, e->path, r);
    }
    /* Other handles: turn this handle's shared meta.zr lock exclusive. It
     * fails at once while any other handle holds its shared lock, and
     * keeps new read-only opens out until zre_leave_maint. */
    prc = zrp_unlock(e->meta);
    if (prc == 0)
        prc = zrp_lock_exclusive(e->meta);
    if (prc < 0) {
        /* Take back the shared lock (nobody else can hold it exclusive:
         * that needs lock.zr, which this handle holds). */
        (void)zrp_lock_shared(e->meta);
        atomic_store(&e->maint, 0);
        if (prc == ZRP_EBUSY)
            return zr_set_error(ZR_EBUSY, "%s: needs store %s to itself, but read-only handles "
                                "(in this or another process) have it open; nothing was changed, "
                                "close them and retry", what, e->path);
        return zr_set_error(ZR_EIO, "%s: cannot lock %s/meta.zr: %s", what, e->path,
                            strerror(-prc));
    }
    return ZR_OK;
}

void zre_leave_maint(zre_engine *e)
{
    /* Back to shared: readers may open again. Only a writer of an older
     * version could take the lock in between; lock.zr still keeps every
     * writer of this version out. */
    (void)zrp_unlock(e->meta);
    (void)zrp_lock_shared(e->meta);
    atomic_store(&e->maint, 0);
}

int zre_sync_all(zre_engine *e)
{
    if (e->readonly)
        return ZR_OK;
    uint64_t length = atomic_load_explicit(&e->length, memory_order_acquire);
    for (uint64_t c = 0; c <= e->tail_chunk; c++) {
        zrp_file f = zre_fdtab_get(&e->chunks, c);
        if (f.fd < 0)
            continue;
        int rc = zrp_fsync(f);
        if (rc < 0) {
            e->fsync_failed = true;
            return zr_set_error(ZR_EIO, "%s: fsync of %s/%" PRIu64 ".chunk failed: %s", zre_op(e),
                                e->path, c, zr_os_strerror(rc));
        }
    }
    uint64_t nseg = (length + ZRE_INT_SEG_ENTRIES - 1) / ZRE_INT_SEG_ENTRIES;
    for (uint64_t s = 0; s < nseg; s++) {
        zrp_file f = zre_fdtab_get(&e->locs, s);
        if (f.fd < 0)
            continue;
        int rc = zrp_fsync(f);
        if (rc < 0) {
            e->fsync_failed = true;
            return zr_set_error(ZR_EIO, "%s: fsync of %s/%" PRIu64 ".loc failed: %s", zre_op(e),
                                e->path, s, zr_os_strerror(rc));
        }
    }
    /* New chunk/loc files must have durable directory entries before the
     * header that refers to them. */
    int rc = zrp_fsync_dir(e->path);
    if (rc < 0) {
        e->fsync_failed = true;
        return zr_set_error(ZR_EIO, "%s: fsync of directory %s failed: %s", zre_op(e), e->path,
                            zr_os_strerror(rc));
    }
    rc = zrp_fsync(e->meta);
    if (rc < 0) {
        e->fsync_failed = true;
        return zr_set_error(ZR_EIO, "%s: fsync of %s/meta.zr failed: %s", zre_op(e), e->path,
                            zr_os_strerror(rc));
    }
    return ZR_OK;
}

ZRE_API int zre_sync(zre_engine *e)
{
    if (!e)
        return zr_set_error(ZR_EINVAL, "sync: NULL handle");
    zrp_mutex_lock(&e->writer);
    int rc = zre_check_usable(e, "sync");
    if (rc == 0) {
        e->op = "sync";
        rc = zre_sync_all(e);
        /* A failed fsync is never retried: the kernel may have dropped the
         * dirty pages and would report the next fsync clean. */
        if (rc < 0 && e->fsync_failed)
            rc = zre_poison(e, rc);
        e->fsync_failed = false;
        e->op = NULL;
    }
    zrp_mutex_unlock(&e->writer);
    return rc;
}

ZRE_API int zre_close(zre_engine *e)
{
    if (!e)
        return ZR_OK;
    /* A poisoned handle writes nothing more: the next writable open
     * recovers the store from what is durable (and its journal). */
    int rc = e->readonly || atomic_load(&e->poisoned) ? ZR_OK : zre_sync(e);
    engine_free(e);
    return rc;
}

/* The child of a fork() shares the parent's open file descriptions, so its
 * inherited descriptors keep the parent's flock lock alive after the
 * parent closes. Only the descriptors are closed here: the pool threads do
 * not exist in the child, the mutexes may have been held by parent threads
 * at the fork, and freeing would run allocator code on state the parent's
 * threads were using, so all of that is left alone (leaked by design). */
ZRE_API void zre_forget_after_fork(zre_engine *e)
{
    if (!e)
        return;
    engine_close_files(e, false);
}

ZRE_API uint64_t zre_chunk_bytes(zre_engine *e)
{
    if (!e)
        return 0;
    /* The frontier is the writer's; a read-only handle never moves it. */
    zrp_mutex_lock(&e->writer);
    uint64_t n = (uint64_t)e->tail_chunk * ZRE_CHUNK_USABLE + e->tail_offset;
    zrp_mutex_unlock(&e->writer);
    return n;
}

ZRE_API uint64_t zre_length(const zre_engine *e)
{
    return e ? atomic_load_explicit(&((zre_engine *)e)->length, memory_order_acquire) : 0;
}

ZRE_API zre_codec zre_get_codec(const zre_engine *e) { return e ? e->codec : ZRE_CODEC_RAW; }

ZRE_API const char *zre_path(const zre_engine *e) { return e ? e->path : NULL; }

/* ---------------------------------------------------------------- reads */

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

ZRE_API int zre_get_stats(zre_engine *e, zre_stats *out)
{
    if (!e || !out)
        return zr_set_error(ZR_EINVAL, "stats: NULL argument");
    enum { BATCH = 4096 };
    unsigned char *buf = malloc((size_t)BATCH * ZRE_LOC_ENTRY_SIZE);
    if (!buf)
        return zr_set_error(ZR_ENOMEM, "stats: out of memory");
    zre_stats s = {0};
    int rc = zre_check_usable(e, "stats");
    if (rc < 0) {
        free(buf);
        return rc;
    }
    /* Hold the writer lock for a snapshot consistent with the frontier. */
    zrp_mutex_lock(&e->writer);
    s.records = atomic_load_explicit(&e->length, memory_order_acquire);
    for (uint64_t i = 0; i < s.records && rc == 0; i += BATCH) {
        uint64_t n = s.records - i < BATCH ? s.records - i : BATCH;
        rc = zre_read_locs(e, i, buf, n);
        for (uint64_t k = 0; rc == 0 && k < n; k++) {
            zre_loc l;
            zre_loc_decode(&l, buf + k * ZRE_LOC_ENTRY_SIZE);
            s.logical_bytes += l.logic_length;
            s.live_bytes += l.phys_length;
        }
    }
    /* Earlier chunks count up to their file size (what rollover left);
     * the tail chunk counts up to the committed frontier. */
    for (uint64_t c = 0; rc == 0 && c < e->tail_chunk; c++) {
        uint64_t size = 0;
        if (zre_fent_open(zre_fdtab_ent(&e->chunks, c)) && zre_fent_size(&e->chunks, c, &size) < 0)
            rc = zr_set_error(ZR_EIO, "stats: cannot stat %s/%" PRIu64 ".chunk", e->path, c);
        s.chunk_bytes += size < ZRE_CHUNK_USABLE ? size : ZRE_CHUNK_USABLE;
    }
    s.chunk_bytes += e->tail_offset;
    zrp_mutex_unlock(&e->writer);
    free(buf);
    if (rc < 0)
        return rc;
    s.reclaimable = s.chunk_bytes > s.live_bytes ? s.chunk_bytes - s.live_bytes : 0;
    *out = s;
    return ZR_OK;
}
