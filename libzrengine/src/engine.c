/*
 * engine.c - store lifecycle (create/open/close/sync), meta.zr, the
 * record table files, fd tables, stats and shared helpers.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

/* ---------------------------------------------------------------- paths */

void zre_file_path(const zre_engine *e, char *buf, size_t cap, uint64_t id, const char *ext)
{
    snprintf(buf, cap, "%s/%" PRIu64 ".%s", e->path, id, ext);
}

/* Enough for "<path>/<20 digits>.chunk" and "<path>/meta.zr". */
static size_t path_cap(const zre_engine *e) { return strlen(e->path) + 40; }

/* ------------------------------------------------------------ fd tables */

static int fdtab_set(zre_fdtab *t, uint64_t id, zrp_file f)
{
    if (id >= (uint64_t)ZRE_FDTAB_TOP * ZRE_FDTAB_BLOCK)
        return ZR_EUNSUPPORTED;
    size_t b = (size_t)(id / ZRE_FDTAB_BLOCK);
    zrp_file *blk = atomic_load_explicit(&t->top[b], memory_order_relaxed);
    if (!blk) {
        blk = malloc(ZRE_FDTAB_BLOCK * sizeof *blk);
        if (!blk)
            return ZR_ENOMEM;
        for (unsigned i = 0; i < ZRE_FDTAB_BLOCK; i++)
            blk[i] = ZRP_FILE_INVALID;
        atomic_store_explicit(&t->top[b], blk, memory_order_release);
    }
    blk[id % ZRE_FDTAB_BLOCK] = f;
    if (id + 1 > t->count)
        t->count = id + 1;
    return ZR_OK;
}

static void fdtab_close_all(zre_fdtab *t)
{
    for (size_t b = 0; b < ZRE_FDTAB_TOP; b++) {
        zrp_file *blk = atomic_load_explicit(&t->top[b], memory_order_relaxed);
        if (!blk)
            continue;
        for (unsigned i = 0; i < ZRE_FDTAB_BLOCK; i++)
            zrp_close(&blk[i]);
        free(blk);
        t->top[b] = NULL;
    }
    t->count = 0;
}

/* Open (creating when `create`) file `id` of kind `ext` into table `t`.
 * Returns 1 when opened, 0 when missing and !create, or a negative status. */
static int open_numbered(zre_engine *e, zre_fdtab *t, uint64_t id, const char *ext, bool create)
{
    if (zre_fdtab_get(t, id).fd >= 0)
        return 1;
    size_t cap = path_cap(e);
    char *p = malloc(cap);
    if (!p)
        return zr_set_error(ZR_ENOMEM, "engine: out of memory for a path");
    zre_file_path(e, p, cap, id, ext);
    zrp_file f;
    int rc = zrp_open(&f, p, ZRP_READ | ZRP_WRITE | (create ? ZRP_CREATE : 0u));
    if (rc == -ENOENT && !create) {
        free(p);
        return 0;
    }
    if (rc < 0) {
        rc = zr_set_error(ZR_EIO, "engine: cannot open %s: %s", p, strerror(-rc));
        free(p);
        return rc;
    }
    rc = fdtab_set(t, id, f);
    if (rc < 0) {
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
    int rc = open_numbered(e, &e->chunks, id, "chunk", true);
    return rc < 0 ? rc : ZR_OK;
}

int zre_ensure_seg(zre_engine *e, uint64_t id)
{
    int rc = open_numbered(e, &e->locs, id, "loc", true);
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
            return zr_set_error(ZR_EIO, "append: writing %" PRIu64 " entries to %s/%" PRIu64
                                ".loc at entry %" PRIu64 " failed: %s",
                                take, e->path, seg, in_seg, strerror(-rc));
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
        zrp_file f = zre_fdtab_get(&e->locs, seg);
        if (f.fd < 0)
            return zr_set_error(ZR_ECORRUPT, "record table: segment %s/%" PRIu64
                                ".loc is not open for index %" PRIu64, e->path, seg, first);
        int rc = zrp_pread_all(f, buf, (size_t)(take * ZRE_LOC_ENTRY_SIZE), in_seg * ZRE_LOC_ENTRY_SIZE);
        if (rc < 0)
            return zr_set_error(zre_io_status(rc, ZR_ECORRUPT),
                                "record table: reading entries %" PRIu64 "..%" PRIu64 " of %s/%" PRIu64
                                ".loc failed: %s", in_seg, in_seg + take, e->path, seg,
                                rc == ZRP_ESHORT ? "file too short" : strerror(-rc));
        buf += take * ZRE_LOC_ENTRY_SIZE;
        first += take;
        n -= take;
    }
    return ZR_OK;
}

/* ---------------------------------------------------------------- meta */

static void meta_encode(unsigned char out[ZRE_META_SIZE], uint64_t length, uint32_t tail_chunk,
                        uint32_t tail_offset, zre_codec codec)
{
    memset(out, 0, ZRE_META_SIZE);
    zre_put_u64(out, length);
    zre_put_u32(out + 8, tail_chunk);
    zre_put_u32(out + 12, tail_offset);
    out[16] = (unsigned char)codec;
}

int zre_write_meta(zre_engine *e, uint64_t length, uint32_t tail_chunk, uint32_t tail_offset)
{
    unsigned char buf[ZRE_META_SIZE];
    meta_encode(buf, length, tail_chunk, tail_offset, e->codec);
    /* One 32-byte write at offset 0 of the locked file: it stays within a
     * single sector, and the lock lives on this file, so no rename. */
    int rc = zrp_pwrite_all(e->meta, buf, sizeof buf, 0);
    if (rc < 0)
        return zr_set_error(ZR_EIO, "engine: writing %s/meta.zr failed: %s", e->path, strerror(-rc));
    return ZR_OK;
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
    /* Parameters are sticky across ZSTD_compress2 calls: set them once. */
    if (ZSTD_isError(ZSTD_CCtx_setParameter(cc, ZSTD_c_compressionLevel, ZRE_ZSTD_LEVEL)) ||
        ZSTD_isError(ZSTD_CCtx_setParameter(cc, ZSTD_c_checksumFlag, 1)) ||
        ZSTD_isError(ZSTD_CCtx_setParameter(cc, ZSTD_c_contentSizeFlag, 1))) {
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

static void engine_free(zre_engine *e)
{
    if (!e)
        return;
    zre_pool_destroy(&e->pool);
    fdtab_close_all(&e->chunks);
    fdtab_close_all(&e->locs);
    /* Closing meta.zr releases the store lock: do it last. */
    zrp_close(&e->meta);
    for (size_t i = 0; i < e->dctx_count; i++)
        ZSTD_freeDCtx(e->dctx_free[i]);
    for (size_t i = 0; i < e->cctx_count; i++)
        ZSTD_freeCCtx(e->cctx_free[i]);
    free(e->dctx_free);
    free(e->cctx_free);
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

/* Open `<path>/meta.zr` (optionally creating it) and lock it. */
static int open_meta(zre_engine *e, bool create)
{
    size_t cap = path_cap(e);
    char *p = malloc(cap);
    if (!p)
        return zr_set_error(ZR_ENOMEM, "engine: out of memory for a path");
    snprintf(p, cap, "%s/meta.zr", e->path);
    int rc = zrp_open(&e->meta, p, ZRP_READ | ZRP_WRITE | (create ? ZRP_CREATE | ZRP_EXCLUSIVE : 0u));
    if (rc < 0) {
        if (!create && rc == -ENOENT)
            rc = zr_set_error(ZR_ENOTSTORE, "open: %s is not a store: meta.zr is missing", e->path);
        else
            rc = zr_set_error(ZR_EIO, "engine: cannot open %s: %s", p, strerror(-rc));
        free(p);
        return rc;
    }
    rc = zrp_lock_exclusive(e->meta);
    if (rc < 0) {
        if (rc == ZRP_EBUSY)
            rc = zr_set_error(ZR_EBUSY, "store %s is busy: another handle (in this or another "
                              "process) holds its lock", e->path);
        else
            rc = zr_set_error(ZR_EIO, "engine: cannot lock %s: %s", p, strerror(-rc));
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

ZRE_API int zre_create(zre_engine **out, const char *path, zre_codec codec)
{
    if (!out || !path || !*path)
        return zr_set_error(ZR_EINVAL, "create: NULL or empty argument");
    *out = NULL;
    if (!zre_codec_name(codec))
        return zr_set_error(ZR_EINVAL, "create: unknown codec %d for %s, expected 0 (raw), 1 (zstd) "
                            "or 2 (zstd_dict)", (int)codec, path);
    if (codec == ZRE_CODEC_ZSTD_DICT)
        return zr_set_error(ZR_EUNSUPPORTED, "create: codec zstd_dict is not supported yet (%s)", path);
    if (zrp_path_exists(path))
        return zr_set_error(ZR_EEXIST, "create: %s already exists", path);

    char *parent = parent_of(path);
    if (parent) {
        int rc = zrp_mkdir_parents(parent);
        if (rc < 0) {
            rc = zr_set_error(ZR_EIO, "create: cannot create parent directory %s: %s", parent,
                              strerror(-rc));
            free(parent);
            return rc;
        }
    }
    int rc = zrp_mkdir(path);
    if (rc < 0) {
        free(parent);
        if (rc == -EEXIST)
            return zr_set_error(ZR_EEXIST, "create: %s already exists", path);
        return zr_set_error(ZR_EIO, "create: cannot create directory %s: %s", path, strerror(-rc));
    }

    zre_engine *e;
    rc = engine_alloc(&e, path, codec);
    if (rc < 0) {
        free(parent);
        return rc;
    }
    rc = open_meta(e, true);
    if (rc == 0)
        rc = zre_write_meta(e, 0, 0, 0);
    if (rc == 0 && (rc = zrp_fsync(e->meta)) < 0)
        rc = zr_set_error(ZR_EIO, "create: fsync of %s/meta.zr failed: %s", path, strerror(-rc));
    if (rc == 0 && (rc = zrp_fsync_dir(path)) < 0)
        rc = zr_set_error(ZR_EIO, "create: fsync of directory %s failed: %s", path, strerror(-rc));
    if (rc == 0 && parent && (rc = zrp_fsync_dir(parent)) < 0)
        rc = zr_set_error(ZR_EIO, "create: fsync of directory %s failed: %s", parent, strerror(-rc));
    free(parent);
    if (rc < 0) {
        engine_free(e);
        return rc;
    }
    *out = e;
    return ZR_OK;
}

/* Validate the record table and chunk files against the header. */
static int open_validate_files(zre_engine *e, uint64_t length)
{
    uint64_t nseg = (length + ZRE_INT_SEG_ENTRIES - 1) / ZRE_INT_SEG_ENTRIES;
    for (uint64_t s = 0; s < nseg; s++) {
        int rc = open_numbered(e, &e->locs, s, "loc", false);
        if (rc < 0)
            return rc;
        if (rc == 0)
            return zr_set_error(ZR_ENOTSTORE, "open: %s is malformed: record table segment %" PRIu64
                                ".loc is missing for length %" PRIu64, e->path, s, length);
        uint64_t need = length - s * ZRE_INT_SEG_ENTRIES;
        if (need > ZRE_INT_SEG_ENTRIES)
            need = ZRE_INT_SEG_ENTRIES;
        uint64_t size;
        rc = zrp_file_size(zre_fdtab_get(&e->locs, s), &size);
        if (rc < 0)
            return zr_set_error(ZR_EIO, "open: cannot stat %s/%" PRIu64 ".loc: %s", e->path, s,
                                strerror(-rc));
        if (size < need * ZRE_LOC_ENTRY_SIZE)
            return zr_set_error(ZR_ENOTSTORE, "open: %s is malformed: %" PRIu64 ".loc holds %" PRIu64
                                " bytes, expected at least %" PRIu64 " for length %" PRIu64,
                                e->path, s, size, need * ZRE_LOC_ENTRY_SIZE, length);
    }
    for (uint64_t c = 0; c <= e->tail_chunk; c++) {
        bool is_tail = c == e->tail_chunk;
        bool required = !is_tail || length > 0 || e->tail_offset > 0;
        int rc = open_numbered(e, &e->chunks, c, "chunk", false);
        if (rc < 0)
            return rc;
        if (rc == 0) {
            if (required)
                return zr_set_error(ZR_ENOTSTORE, "open: %s is malformed: chunk %" PRIu64
                                    ".chunk is missing (tail chunk %u, length %" PRIu64 ")",
                                    e->path, c, e->tail_chunk, length);
            continue;
        }
        if (is_tail) {
            uint64_t size;
            rc = zrp_file_size(zre_fdtab_get(&e->chunks, c), &size);
            if (rc < 0)
                return zr_set_error(ZR_EIO, "open: cannot stat %s/%" PRIu64 ".chunk: %s", e->path, c,
                                    strerror(-rc));
            if (size < e->tail_offset)
                return zr_set_error(ZR_ENOTSTORE, "open: %s is malformed: tail chunk %" PRIu64
                                    ".chunk holds %" PRIu64 " bytes, expected at least tail_offset %u",
                                    e->path, c, size, e->tail_offset);
        }
    }
    return ZR_OK;
}

ZRE_API int zre_open(zre_engine **out, const char *path)
{
    if (!out || !path || !*path)
        return zr_set_error(ZR_EINVAL, "open: NULL or empty argument");
    *out = NULL;
    if (!zrp_is_dir(path))
        return zr_set_error(ZR_ENOTSTORE, "open: %s is not a store: not a directory", path);
    zre_engine *e;
    int rc = engine_alloc(&e, path, ZRE_CODEC_RAW);
    if (rc < 0)
        return rc;
    rc = open_meta(e, false);
    if (rc < 0)
        goto fail;

    uint64_t size;
    rc = zrp_file_size(e->meta, &size);
    if (rc < 0) {
        rc = zr_set_error(ZR_EIO, "open: cannot stat %s/meta.zr: %s", path, strerror(-rc));
        goto fail;
    }
    if (size != ZRE_META_SIZE) {
        rc = zr_set_error(ZR_ENOTSTORE, "open: %s is malformed: meta.zr is %" PRIu64
                          " bytes, expected %u", path, size, ZRE_META_SIZE);
        goto fail;
    }
    unsigned char m[ZRE_META_SIZE];
    rc = zrp_pread_all(e->meta, m, sizeof m, 0);
    if (rc < 0) {
        rc = zr_set_error(ZR_EIO, "open: cannot read %s/meta.zr: %s", path, strerror(-rc));
        goto fail;
    }
    uint64_t length = zre_get_u64(m);
    e->tail_chunk = zre_get_u32(m + 8);
    e->tail_offset = zre_get_u32(m + 12);
    unsigned codec = m[16];
    if (codec > ZRE_CODEC_ZSTD_DICT) {
        rc = zr_set_error(ZR_ENOTSTORE, "open: %s is malformed: meta.zr codec byte is %u, "
                          "expected 0 (raw), 1 (zstd) or 2 (zstd_dict)", path, codec);
        goto fail;
    }
    for (unsigned i = 17; i < ZRE_META_SIZE; i++) {
        if (m[i] != 0) {
            rc = zr_set_error(ZR_ENOTSTORE, "open: %s is malformed: meta.zr reserved byte %u is "
                              "0x%02x, expected 0", path, i, m[i]);
            goto fail;
        }
    }
    e->codec = (zre_codec)codec;
    if (e->codec == ZRE_CODEC_ZSTD_DICT) {
        rc = zr_set_error(ZR_EUNSUPPORTED, "open: %s uses codec zstd_dict, not supported yet", path);
        goto fail;
    }
    {
        size_t cap = path_cap(e);
        char *p = malloc(cap);
        if (!p) {
            rc = zr_set_error(ZR_ENOMEM, "open: out of memory for a path");
            goto fail;
        }
        snprintf(p, cap, "%s/dict.zr", path);
        int has_dict = zrp_path_exists(p);
        free(p);
        if (has_dict) {
            rc = zr_set_error(ZR_ENOTSTORE, "open: %s is malformed: codec %s store has a dict.zr",
                              path, zre_codec_name(e->codec));
            goto fail;
        }
    }
    if (e->tail_offset > ZRE_CHUNK_USABLE) {
        rc = zr_set_error(ZR_ENOTSTORE, "open: %s is malformed: tail_offset %u beyond chunk capacity",
                          path, e->tail_offset);
        goto fail;
    }
    rc = open_validate_files(e, length);
    if (rc < 0)
        goto fail;
    atomic_store_explicit(&e->length, length, memory_order_release);
    *out = e;
    return ZR_OK;
fail:
    engine_free(e);
    return rc;
}

static int sync_locked(zre_engine *e)
{
    uint64_t length = atomic_load_explicit(&e->length, memory_order_acquire);
    for (uint64_t c = 0; c <= e->tail_chunk; c++) {
        zrp_file f = zre_fdtab_get(&e->chunks, c);
        if (f.fd < 0)
            continue;
        int rc = zrp_fsync(f);
        if (rc < 0)
            return zr_set_error(ZR_EIO, "sync: fsync of %s/%" PRIu64 ".chunk failed: %s", e->path, c,
                                strerror(-rc));
    }
    uint64_t nseg = (length + ZRE_INT_SEG_ENTRIES - 1) / ZRE_INT_SEG_ENTRIES;
    for (uint64_t s = 0; s < nseg; s++) {
        zrp_file f = zre_fdtab_get(&e->locs, s);
        if (f.fd < 0)
            continue;
        int rc = zrp_fsync(f);
        if (rc < 0)
            return zr_set_error(ZR_EIO, "sync: fsync of %s/%" PRIu64 ".loc failed: %s", e->path, s,
                                strerror(-rc));
    }
    /* New chunk/loc files must have durable directory entries before the
     * header that refers to them. */
    int rc = zrp_fsync_dir(e->path);
    if (rc < 0)
        return zr_set_error(ZR_EIO, "sync: fsync of directory %s failed: %s", e->path, strerror(-rc));
    rc = zrp_fsync(e->meta);
    if (rc < 0)
        return zr_set_error(ZR_EIO, "sync: fsync of %s/meta.zr failed: %s", e->path, strerror(-rc));
    return ZR_OK;
}

ZRE_API int zre_sync(zre_engine *e)
{
    if (!e)
        return zr_set_error(ZR_EINVAL, "sync: NULL handle");
    zrp_mutex_lock(&e->writer);
    int rc = sync_locked(e);
    zrp_mutex_unlock(&e->writer);
    return rc;
}

ZRE_API int zre_close(zre_engine *e)
{
    if (!e)
        return ZR_OK;
    int rc = zre_sync(e);
    engine_free(e);
    return rc;
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
    uint64_t length = zre_length(e);
    for (uint64_t i = 0; i < count; i++)
        if (index[i] >= length)
            return zr_set_error(ZR_ERANGE, "record_sizes: index %" PRIu64 " out of range for store "
                                "of %" PRIu64 " records (position %" PRIu64 ")", index[i], length, i);
    for (uint64_t i = 0; i < count; i++) {
        unsigned char buf[ZRE_LOC_ENTRY_SIZE];
        int rc = zre_read_locs(e, index[i], buf, 1);
        if (rc < 0)
            return rc;
        zre_loc l;
        zre_loc_decode(&l, buf);
        sizes[i] = l.logic_length;
    }
    return ZR_OK;
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
    int rc = ZR_OK;
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
        zrp_file f = zre_fdtab_get(&e->chunks, c);
        uint64_t size = 0;
        if (f.fd >= 0 && zrp_file_size(f, &size) < 0)
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
