/*
 * files.c - the store's numbered files: the fd tables that hold the open
 * chunk (N.chunk) and record-table (N.loc) files with their read-only
 * mappings, opening, fsyncing, truncating and removing them, the record
 * table's reads and writes, and the one check of a table entry. A store
 * at a URL has remote objects in its tables instead of descriptors
 * (remote_io.c); small side files come whole from either.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine_internal.h"

/* ---------------------------------------------------------------- paths */

char *zre_join(const zre_engine *e, const char *name)
{
    size_t n = strlen(e->path) + strlen(name) + 2;
    char *p = malloc(n);
    if (p)
        snprintf(p, n, "%s/%s", e->path, name);
    return p;
}

int zre_read_aux(const zre_engine *e, const char *name, void **buf, size_t *len, size_t max_len)
{
    if (e->remote)
        return zre_remote_get_small(e, name, buf, len, max_len);
    char *p = zre_join(e, name);
    if (!p)
        return -ENOMEM;
    int rc = zrp_read_file(p, buf, len, max_len);
    free(p);
    return rc;
}

void zre_file_path(const zre_engine *e, char *buf, size_t cap, uint64_t id, const char *ext)
{
    snprintf(buf, cap, "%s/%" PRIu64 ".%s", e->path, id, ext);
}

/* Enough for "<path>/<20 digits>.chunk". */
static size_t path_cap(const zre_engine *e) { return strlen(e->path) + 40; }

int zre_open_error(const zre_engine *e, const char *p, int prc)
{
    /* A symbolic link or a non-regular file is a malformed store, not an
     * I/O error. */
    if (prc == -ELOOP || prc == ZRP_ENOTREG)
        return zr_set_error(ZR_ENOTSTORE, "%s: %s is malformed: %s is %s; store files must be "
                            "regular files (never followed through a link)", zre_op(e), e->path, p,
                            prc == -ELOOP ? "a symbolic link" : "not a regular file");
    return zr_set_error(ZR_EIO, "%s: cannot open %s: %s", zre_op(e), p, zr_os_strerror(prc));
}

/* ------------------------------------------------------------ fd tables */

static int fdtab_set(zre_fdtab *t, uint64_t id, zrp_file f, uint64_t size, const unsigned char *map,
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

int zre_fent_size(const zre_fdtab *t, uint64_t id, uint64_t *size)
{
    const zre_fent *ent = zre_fdtab_ent(t, id);
    if (ent && ent->obj) {
        *size = atomic_load_explicit(&((zre_fent *)ent)->size, memory_order_acquire);
        return 0;
    }
    return zrp_file_size(zre_fdtab_get(t, id), size);
}

void zre_fdtab_set_size(zre_fdtab *t, uint64_t id, uint64_t size)
{
    zre_fent *ent = zre_fdtab_ent(t, id);
    if (ent)
        atomic_store_explicit(&ent->size, size, memory_order_release);
}

void zre_fdtab_close(zre_fdtab *t, bool release)
{
    /* Only ids below `count` were ever set: the rest of a block holds
     * never-opened entries, and most of the top level no block at all.
     * Without `release` (zre_forget_after_fork) the child leaks its
     * inherited mappings by design. */
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

/* ------------------------------------------------------- numbered files */

/* Whether the mapped read path is used at all: only where a file's whole
 * format capacity (4 GiB) fits the address space many times over. A
 * test-only build (ZRE_TEST_NO_MAP) keeps the pread path covered. */
#if UINTPTR_MAX > UINT32_MAX && !defined(ZRE_TEST_NO_MAP)
#define ZRE_USE_MAP 1
#else
#define ZRE_USE_MAP 0
#endif

/* zre_open_numbered of a store at a URL: the remote object (a HEAD),
 * no descriptor. */
static int open_remote_numbered(zre_engine *e, zre_fdtab *t, uint64_t id)
{
    const zre_fent *ent = zre_fdtab_ent(t, id);
    if (ent && ent->obj)
        return 1;
    char name[64];
    snprintf(name, sizeof name, "%" PRIu64 ".%s", id, t->ext);
    struct zrr_obj *o = NULL;
    uint64_t size = 0;
    int rc = zre_remote_obj_open(e, name, &o, &size);
    if (rc <= 0)
        return rc;
    rc = fdtab_set(t, id, ZRP_FILE_INVALID, size, NULL, 0);
    if (rc < 0)
        return zr_set_error(rc, "%s: cannot track %s/%s", zre_op(e), e->path, name);
    zre_fdtab_ent(t, id)->obj = o;
    return 1;
}

int zre_open_numbered(zre_engine *e, zre_fdtab *t, uint64_t id, bool create)
{
    if (e->remote)
        return open_remote_numbered(e, t, id);
    if (zre_fdtab_get(t, id).fd >= 0)
        return 1;
    size_t cap = path_cap(e);
    char *p = malloc(cap);
    if (!p)
        return zr_set_error(ZR_ENOMEM, "%s: out of memory for a path", zre_op(e));
    zre_file_path(e, p, cap, id, t->ext);
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
    rc = fdtab_set(t, id, f, size, map, map ? map_len : 0);
    if (rc < 0) {
        zrp_unmap(map, map_len);
        zrp_close(&f);
        rc = zr_set_error(rc, "%s: cannot track %s (id %" PRIu64 ")", zre_op(e), p, id);
        free(p);
        return rc;
    }
    free(p);
    return 1;
}

int zre_ensure_chunk(zre_engine *e, uint32_t id)
{
    int rc = zre_open_numbered(e, &e->chunks, id, true);
    return rc < 0 ? rc : ZR_OK;
}

int zre_ensure_seg(zre_engine *e, uint64_t id)
{
    int rc = zre_open_numbered(e, &e->locs, id, true);
    return rc < 0 ? rc : ZR_OK;
}

int zre_fsync_numbered(zre_engine *e, zre_fdtab *t, uint64_t id)
{
    zrp_file f = zre_fdtab_get(t, id);
    if (f.fd < 0)
        return ZR_OK;
    int prc = zrp_fsync(f);
    if (prc < 0) {
        e->fsync_failed = true;
        return zr_set_error(ZR_EIO, "%s: fsync of %s/%" PRIu64 ".%s failed: %s", zre_op(e), e->path,
                            id, t->ext, zr_os_strerror(prc));
    }
    return ZR_OK;
}

int zre_fsync_dir(zre_engine *e)
{
    int prc = zrp_fsync_dir(e->path);
    if (prc < 0) {
        e->fsync_failed = true;
        return zr_set_error(ZR_EIO, "%s: fsync of directory %s failed: %s", zre_op(e), e->path,
                            zr_os_strerror(prc));
    }
    return ZR_OK;
}

int zre_remove_numbered_from(zre_engine *e, zre_fdtab *t, uint64_t first, uint64_t at_least_to)
{
    size_t cap = path_cap(e);
    char *p = malloc(cap);
    if (!p)
        return zr_set_error(ZR_ENOMEM, "%s: out of memory for a path", zre_op(e));
    int rc = ZR_OK;
    for (uint64_t id = first;; id++) {
        zre_file_path(e, p, cap, id, t->ext);
        bool open = zre_fdtab_get(t, id).fd >= 0;
        if (!open && id > at_least_to && !zrp_path_exists(p))
            break;
        zre_fdtab_drop(t, id);
        int prc = zrp_unlink(p);
        if (prc < 0 && prc != -ENOENT) {
            rc = zr_set_error(ZR_EIO, "%s: cannot delete %s: %s", zre_op(e), p, zr_os_strerror(prc));
            break;
        }
    }
    free(p);
    return rc;
}

int zre_truncate_numbered(zre_engine *e, zre_fdtab *t, uint64_t id, uint64_t size)
{
    int rc = zre_open_numbered(e, t, id, false);
    if (rc <= 0)
        return rc; /* missing is fine: nothing to release */
    int prc = zrp_truncate(zre_fdtab_get(t, id), size);
    if (prc < 0)
        return zr_set_error(ZR_EIO, "%s: cannot truncate %s/%" PRIu64 ".%s to %" PRIu64 " bytes: %s",
                            zre_op(e), e->path, id, t->ext, size, zr_os_strerror(prc));
    /* Exclusive use: no gather reads the mapping while it shrinks; the
     * known size follows the file at once, so no later read passes it. */
    zre_fdtab_set_size(t, id, size);
    return zre_fsync_numbered(e, t, id);
}

/* ---------------------------------------------------------- record table */

/* The part of entries [first, first+n) that lies in first's segment: the
 * segment, the entry's place in it, and how many entries (returned). */
static uint64_t seg_span(uint64_t first, uint64_t n, uint64_t *seg, uint64_t *in_seg)
{
    *seg = first / ZRE_INT_SEG_ENTRIES;
    *in_seg = first % ZRE_INT_SEG_ENTRIES;
    uint64_t take = ZRE_INT_SEG_ENTRIES - *in_seg;
    return take < n ? take : n;
}

int zre_write_locs(zre_engine *e, uint64_t first, const unsigned char *buf, uint64_t n)
{
    while (n > 0) {
        uint64_t seg, in_seg, take = seg_span(first, n, &seg, &in_seg);
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

int zre_write_loc(zre_engine *e, uint64_t index, const zre_loc *l)
{
    unsigned char enc[ZRE_LOC_ENTRY_SIZE];
    zre_loc_encode(enc, l);
    return zre_write_locs(e, index, enc, 1);
}

int zre_clear_locs(zre_engine *e, uint64_t first, uint64_t n)
{
    static const unsigned char zeros[4096];
    while (n > 0) {
        uint64_t seg, in_seg, take = seg_span(first, n, &seg, &in_seg);
        const zre_fent *ent = zre_fdtab_ent(&e->locs, seg);
        uint64_t size = ent && ent->f.fd >= 0 ? atomic_load(&ent->size) : 0;
        /* A write that failed part way (a full disk) may have landed
         * entries past the size the handle tracks: go by the file's. */
        uint64_t on_disk = 0;
        if (ent && ent->f.fd >= 0 && zrp_file_size(ent->f, &on_disk) == 0 && on_disk > size)
            size = on_disk;
        /* Only what the file holds: entries past its end were never written. */
        uint64_t lo = in_seg * ZRE_LOC_ENTRY_SIZE, hi = (in_seg + take) * ZRE_LOC_ENTRY_SIZE;
        hi = hi < size ? hi : size;
        for (uint64_t at = lo; at < hi; at += sizeof zeros) {
            size_t len = hi - at < sizeof zeros ? (size_t)(hi - at) : sizeof zeros;
            int prc = zrp_pwrite_all(ent->f, zeros, len, at);
            if (prc < 0)
                return zr_set_error(ZR_EIO, "%s: clearing entries of %s/%" PRIu64 ".loc failed: %s",
                                    zre_op(e), e->path, seg, zr_os_strerror(prc));
        }
        int rc = lo < hi ? zre_fsync_numbered(e, &e->locs, seg) : ZR_OK;
        if (rc < 0)
            return rc;
        first += take;
        n -= take;
    }
    return ZR_OK;
}

int zre_read_locs(zre_engine *e, uint64_t first, unsigned char *buf, uint64_t n)
{
    while (n > 0) {
        uint64_t seg, in_seg, take = seg_span(first, n, &seg, &in_seg);
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

int zre_read_loc(zre_engine *e, uint64_t index, zre_loc *out)
{
    unsigned char buf[ZRE_LOC_ENTRY_SIZE];
    int rc = zre_read_locs(e, index, buf, 1);
    if (rc == 0)
        zre_loc_decode(out, buf);
    return rc;
}

int zre_read_locs_at(zre_engine *e, const uint64_t *index, uint64_t n, zre_loc *out)
{
    for (uint64_t i = 0; i < n; i++) {
        const zre_fent *ent = zre_fdtab_ent(&e->locs, index[i] / ZRE_INT_SEG_ENTRIES);
        if (ent && ent->map)
            ZRE_PREFETCH(ent->map + (index[i] % ZRE_INT_SEG_ENTRIES) * ZRE_LOC_ENTRY_SIZE);
    }
    for (uint64_t i = 0; i < n; i++) {
        int rc = zre_read_loc(e, index[i], &out[i]);
        if (rc < 0)
            return rc;
    }
    return ZR_OK;
}

/* ------------------------------------------------------- the entry check */

const char *zre_loc_problem(const zre_loc *l, zre_codec codec)
{
    if (l->logic_length == 0 || l->logic_length > ZRE_RECORD_MAX)
        return "logical length outside 1..2^31";
    if (l->phys_length == 0)
        return "stored length 0";
    if ((uint64_t)l->offset + l->phys_length > ZRE_CHUNK_USABLE)
        return "extends past the chunk capacity";
    if (codec == ZRE_CODEC_RAW && l->phys_length != l->logic_length)
        return "raw record with stored length != logical length";
    return NULL;
}

const char *zre_loc_check(zre_engine *e, const zre_loc *l, zre_pos tail, bool file_size)
{
    const char *why = zre_loc_problem(l, e->codec);
    if (why)
        return why;
    const zre_fent *ent = zre_fdtab_ent(&e->chunks, l->chunk_id);
    if (l->chunk_id > tail.chunk || !zre_fent_open(ent))
        return "points at a chunk the store does not hold";
    if (zre_pos_less(tail, zre_loc_end(l)))
        return "extends past the write frontier";
    /* The size the handle knows: measured when the file was opened (and at
     * each refresh), raised by every write, set by every truncate. */
    if (file_size && (uint64_t)l->offset + l->phys_length >
                         atomic_load_explicit(&ent->size, memory_order_acquire))
        return "extends past the end of its chunk file";
    return NULL;
}
