/*
 * engine_internal.h - libzrengine internals shared by its source files.
 * Never installed.
 */
#ifndef ZRENGINE_INTERNAL_H
#define ZRENGINE_INTERNAL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "zr_platform.h"
#include "zrengine.h"
#include "pool.h"

/* Format geometry. The public limits are the format; these internal copies
 * exist so that a test-only build can shrink them (to exercise chunk
 * rollover and segment boundaries without writing gigabytes). A store
 * written with shrunk geometry is not a valid store for a normal build. */
#ifndef ZRE_TEST_CHUNK_CAPACITY
#define ZRE_INT_CHUNK_CAPACITY ZRE_CHUNK_CAPACITY
#else
#define ZRE_INT_CHUNK_CAPACITY ((uint64_t)(ZRE_TEST_CHUNK_CAPACITY))
#endif
#ifndef ZRE_TEST_LOC_SEGMENT_ENTRIES
#define ZRE_INT_SEG_ENTRIES ZRE_LOC_SEGMENT_ENTRIES
#else
#define ZRE_INT_SEG_ENTRIES ((uint64_t)(ZRE_TEST_LOC_SEGMENT_ENTRIES))
#endif

/* The highest end offset a record may reach inside a chunk: tail_offset is
 * a u32, so a chunk holds at most 2^32 - 1 bytes even though its logical
 * capacity is 4 GiB. */
static inline uint64_t zre_chunk_usable(void)
{
    return ZRE_INT_CHUNK_CAPACITY < UINT32_MAX ? ZRE_INT_CHUNK_CAPACITY : (uint64_t)UINT32_MAX;
}
#define ZRE_CHUNK_USABLE zre_chunk_usable()

/* ------------------------------------------------------- little endian */

static inline void zre_put_u32(unsigned char *p, uint32_t v)
{
    p[0] = (unsigned char)v;
    p[1] = (unsigned char)(v >> 8);
    p[2] = (unsigned char)(v >> 16);
    p[3] = (unsigned char)(v >> 24);
}
static inline void zre_put_u64(unsigned char *p, uint64_t v)
{
    zre_put_u32(p, (uint32_t)v);
    zre_put_u32(p + 4, (uint32_t)(v >> 32));
}
static inline uint32_t zre_get_u32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static inline uint64_t zre_get_u64(const unsigned char *p)
{
    return (uint64_t)zre_get_u32(p) | (uint64_t)zre_get_u32(p + 4) << 32;
}

/* One record-table entry, decoded. */
typedef struct zre_loc {
    uint32_t offset;
    uint32_t phys_length;
    uint32_t logic_length;
    uint32_t chunk_id;
} zre_loc;

static inline void zre_loc_encode(unsigned char out[16], const zre_loc *l)
{
    zre_put_u32(out, l->offset);
    zre_put_u32(out + 4, l->phys_length);
    zre_put_u32(out + 8, l->logic_length);
    zre_put_u32(out + 12, l->chunk_id);
}
static inline void zre_loc_decode(zre_loc *l, const unsigned char in[16])
{
    l->offset = zre_get_u32(in);
    l->phys_length = zre_get_u32(in + 4);
    l->logic_length = zre_get_u32(in + 8);
    l->chunk_id = zre_get_u32(in + 12);
}

/* ------------------------------------------------------------ fd tables */

/* A two-level table of open files, indexed by chunk id or segment id.
 * Blocks are fixed-size and never move once published, so readers look
 * entries up without a lock: a writer fills an entry before the records
 * that refer to it are committed (the release store of `length`), and a
 * reader only asks for ids named by committed entries. */
#define ZRE_FDTAB_BLOCK 4096u
#define ZRE_FDTAB_TOP 4096u

typedef struct zre_fdtab {
    _Atomic(zrp_file *) top[ZRE_FDTAB_TOP];
    uint64_t count; /* ids [0, count) have been opened (writer-owned) */
} zre_fdtab;

/* The file for `id`, or ZRP_FILE_INVALID when it was never opened. */
static inline zrp_file zre_fdtab_get(const zre_fdtab *t, uint64_t id)
{
    if (id >= (uint64_t)ZRE_FDTAB_TOP * ZRE_FDTAB_BLOCK)
        return ZRP_FILE_INVALID;
    zrp_file *blk = atomic_load_explicit(&((zre_fdtab *)t)->top[id / ZRE_FDTAB_BLOCK],
                                         memory_order_acquire);
    if (!blk)
        return ZRP_FILE_INVALID;
    return blk[id % ZRE_FDTAB_BLOCK];
}

/* -------------------------------------------------------------- engine */

struct zre_engine {
    char *path;
    zre_codec codec;
    zrp_file meta;           /* open and exclusively locked for the lifetime */
    _Atomic uint64_t length; /* committed records; release-stored on commit */

    /* The committed frontier: only touched with `writer` held. */
    uint32_t tail_chunk;
    uint32_t tail_offset;
    zrp_mutex writer; /* single writer: append, sync, stats snapshot */

    zre_fdtab chunks;
    zre_fdtab locs;

    unsigned ncpu;
    zre_pool pool;

    /* Reusable zstd contexts (free lists), so per-call setup is paid once. */
    zrp_mutex ctx_lock;
    void **dctx_free;
    size_t dctx_count, dctx_cap;
    void **cctx_free;
    size_t cctx_count, cctx_cap;
};

/* Path of "<dir>/<id>.<ext>" in `buf`. */
void zre_file_path(const zre_engine *e, char *buf, size_t cap, uint64_t id, const char *ext);

/* Make sure chunk `id` (resp. loc segment `id`) is open, creating the file
 * when missing. Writer only. */
int zre_ensure_chunk(zre_engine *e, uint32_t id);
int zre_ensure_seg(zre_engine *e, uint64_t id);

/* Write encoded loc entries [first, first+n) (16*n bytes in `buf`) to the
 * segments, splitting at segment boundaries. Writer only. */
int zre_write_locs(zre_engine *e, uint64_t first, const unsigned char *buf, uint64_t n);
/* Read loc entries [first, first+n) into `buf` (16*n bytes). */
int zre_read_locs(zre_engine *e, uint64_t first, unsigned char *buf, uint64_t n);

/* Rewrite meta.zr with the given state (writer only). */
int zre_write_meta(zre_engine *e, uint64_t length, uint32_t tail_chunk, uint32_t tail_offset);

/* zstd context free lists. NULL on allocation failure. */
void *zre_dctx_get(zre_engine *e);
void zre_dctx_put(zre_engine *e, void *dctx);
void *zre_cctx_get(zre_engine *e);
void zre_cctx_put(zre_engine *e, void *cctx);

/* Map a platform error to a status: ZRP_ESHORT -> `short_status`,
 * anything else -> ZR_EIO. */
static inline int zre_io_status(int prc, int short_status)
{
    return prc == ZRP_ESHORT ? short_status : ZR_EIO;
}

/* Copy of a thread's error detail, to carry it from a worker thread back to
 * the calling thread. */
#define ZRE_ERRMSG_CAP 512
typedef struct zre_err {
    int status;
    char msg[ZRE_ERRMSG_CAP];
} zre_err;

/* Record the calling thread's current detail into `err` (status < 0). */
void zre_err_capture(zre_err *err, int status);
/* Re-raise a captured error on the calling thread; returns its status. */
int zre_err_raise(const zre_err *err);

#endif
