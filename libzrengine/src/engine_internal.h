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
 * reader only asks for ids named by committed entries.
 *
 * Read path: each file is also mapped read-only at a fixed reservation
 * (its format capacity) when it is opened, so the mapping never moves
 * while gathers run; `map` stays NULL when mapping is unavailable (32-bit
 * host, mmap refused) and that file is then read with pread. `size` is
 * the file size the engine knows (fstat at open, raised by the writer
 * after each write and before `length` is published); a mapped read is
 * checked against it first, so a damaged entry pointing past the end of
 * a short file is an error, not a SIGBUS. */
#define ZRE_FDTAB_BLOCK 4096u
#define ZRE_FDTAB_TOP 4096u

struct zrr_obj;
struct zrr_ctx;

typedef struct zre_fent {
    zrp_file f;
    struct zrr_obj *obj;      /* a store opened by URL: the remote object (f unused) */
    const unsigned char *map; /* NULL: not mapped, use pread */
    uint64_t map_len;         /* reservation passed to zrp_map_readonly */
    _Atomic uint64_t size;    /* known file size in bytes */
} zre_fent;

typedef struct zre_fdtab {
    _Atomic(zre_fent *) top[ZRE_FDTAB_TOP];
    uint64_t count; /* ids [0, count) have been opened (writer-owned) */
} zre_fdtab;

/* A read prefetch hint (a no-op where the compiler has none): the gather
 * and record-size paths issue many before touching any, so that the cache
 * misses of random table entries and records overlap. */
#if defined(__GNUC__)
#define ZRE_PREFETCH(p) __builtin_prefetch((p), 0, 3)
#else
#define ZRE_PREFETCH(p) ((void)(p))
#endif

/* The entry for `id`, or NULL when its block was never allocated (an
 * entry whose file was never opened has f.fd < 0). */
static inline zre_fent *zre_fdtab_ent(const zre_fdtab *t, uint64_t id)
{
    if (id >= (uint64_t)ZRE_FDTAB_TOP * ZRE_FDTAB_BLOCK)
        return NULL;
    zre_fent *blk = atomic_load_explicit(&((zre_fdtab *)t)->top[id / ZRE_FDTAB_BLOCK],
                                         memory_order_acquire);
    return blk ? &blk[id % ZRE_FDTAB_BLOCK] : NULL;
}

/* The file for `id`, or ZRP_FILE_INVALID when it was never opened. */
static inline zrp_file zre_fdtab_get(const zre_fdtab *t, uint64_t id)
{
    const zre_fent *ent = zre_fdtab_ent(t, id);
    return ent ? ent->f : ZRP_FILE_INVALID;
}

/* Raise the known size of file `id` to at least `end` (writer side, after
 * the bytes are written; several appending workers may race, hence the
 * maximum). */
static inline void zre_fdtab_grow(zre_fdtab *t, uint64_t id, uint64_t end)
{
    zre_fent *ent = zre_fdtab_ent(t, id);
    if (!ent)
        return;
    uint64_t cur = atomic_load_explicit(&ent->size, memory_order_relaxed);
    while (cur < end && !atomic_compare_exchange_weak_explicit(&ent->size, &cur, end,
                                                               memory_order_release,
                                                               memory_order_relaxed))
        ;
}

/* Set the known size of file `id` (maintenance, after a truncate). */
static inline void zre_fdtab_set_size(zre_fdtab *t, uint64_t id, uint64_t size)
{
    zre_fent *ent = zre_fdtab_ent(t, id);
    if (ent)
        atomic_store_explicit(&ent->size, size, memory_order_release);
}

/* -------------------------------------------------- remote stores
 *
 * A store opened by URL (remote_io.c, over the remote/ module) has no
 * descriptors and no mappings: each fent carries its remote object, read
 * through the node's cache, and the rest of the engine runs unchanged on
 * the no-map (pread) path. These helpers are the only places where a read
 * tells the two apart. */

/* A remote read failed; its status is zre_remote_status() and its message
 * the thread's current error (zr_os_strerror returns it). */
#define ZRE_EREMOTE (-100100)
int zre_remote_status(void);
int zre_remote_pread(struct zrr_obj *o, void *buf, size_t len, uint64_t off);

/* 1 when the entry names an open file (local or remote). */
static inline int zre_fent_open(const zre_fent *ent)
{
    return ent && (ent->f.fd >= 0 || ent->obj);
}

/* Read exactly `len` bytes at `off`: 0, ZRP_ESHORT past the end, another
 * negative platform code, or ZRE_EREMOTE. */
static inline int zre_fent_pread(const zre_fent *ent, void *buf, size_t len, uint64_t off)
{
    return ent->obj ? zre_remote_pread(ent->obj, buf, len, off)
                    : zrp_pread_all(ent->f, buf, len, off);
}

/* 1 when `path` is an http://, https:// or s3:// URL. */
int zre_is_url(const char *path);
/* Open side: connect e (e->path is the URL) to its remote folder. */
int zre_remote_attach(zre_engine *e);
void zre_remote_detach(zre_engine *e);
/* zre_open_numbered for a remote store. */
int zre_remote_open_numbered(zre_engine *e, zre_fdtab *t, uint64_t id, const char *ext);
/* A small file beside the store's (meta.zr, dict.zr, store.zr), local or
 * remote, into a malloc'd buffer: 0, -ENOENT when missing, -EFBIG over
 * max_len, another negative platform code, or ZRE_EREMOTE. */
int zre_read_aux(const zre_engine *e, const char *name, void **buf, size_t *len, size_t max_len);
/* Before a gather: download, in parallel, what the batch needs of every
 * remote engine among `engines` (record-table blocks, then record bytes),
 * and hold it in memory until zre_remote_release(*hold) (always called,
 * whatever prepare returned; NULL is a no-op). */
typedef struct zre_rhold zre_rhold;
int zre_remote_prepare(zre_engine *const *engines, const uint32_t *which, const uint64_t *index,
                       uint64_t count, int locs_only, zre_rhold **hold);
void zre_remote_release(zre_rhold *hold);
/* zre_advise's merged ranges of chunk files, for a remote store: a
 * background download. */
void zre_remote_prefetch(zre_engine *e, const uint32_t *chunk, const uint64_t *lo,
                         const uint64_t *hi, size_t n);
int zre_remote_cached_fraction(zre_engine *e, double *fraction);
/* meta.zr of a remote store: its size in *size and, when 32 bytes, its
 * bytes in m. 0, or a status with the error set (`what` names the call). */
int zre_remote_meta(zre_engine *e, const char *what, unsigned char m[32], uint64_t *size);
/* fdtab_set of engine.c. */
int zre_fdtab_set(zre_fdtab *t, uint64_t id, zrp_file f, uint64_t size, const unsigned char *map,
                  uint64_t map_len);
/* The size of open file `id` of table `t`: fstat, or the remote size. */
int zre_fent_size(const zre_fdtab *t, uint64_t id, uint64_t *size);

/* -------------------------------------------------------------- engine */

/* Size of an error detail message (zr_last_error). */
#define ZRE_ERRMSG_CAP 512

struct zre_engine {
    char *path;
    struct zrr_ctx *remote;  /* a store opened by URL (read-only), else NULL */
    zre_codec codec;
    bool readonly;           /* shared lock; files opened read-only */
    uint32_t identity_tag;   /* meta.zr bytes 24..27, for the layer above */
    zrp_file meta;           /* open, shared-locked for the lifetime */
    zrp_file wlock;          /* lock.zr, exclusive-locked: writers only */
    _Atomic uint64_t length; /* committed records; release-stored on commit */

    /* The committed frontier: only touched with `writer` held. */
    uint32_t tail_chunk;
    uint32_t tail_offset;
    zrp_mutex writer; /* single writer: append, sync, stats snapshot */

    zre_fdtab chunks;
    zre_fdtab locs;

    unsigned ncpu;
    zre_pool pool;

    /* zstd_dict: the dictionary, loaded once. The DDict is immutable and
     * shared by every gather thread without a lock; the CDict is built on
     * the first append (writer lock held) and is then immutable too. */
    void *dict;
    size_t dict_size;
    void *ddict; /* ZSTD_DDict */
    void *cdict; /* ZSTD_CDict */

    /* Exclusive use for delete/compact: gathers count themselves in
     * `readers`; maintenance raises `maint` and backs off if any reader is
     * in. Both sides use sequentially consistent atomics, so at least one
     * of two racing sides sees the other and fails with ZR_EBUSY. */
    _Atomic unsigned readers;
    _Atomic int maint;

    /* The writer call in progress ("append", "delete", "compact", "sync",
     * "open"), so shared helpers name the real call in their messages.
     * Only read and written with `writer` held (or during open). */
    const char *op;
    /* Set when a failure left the handle unable to vouch for its in-memory
     * state (a maintenance call that failed after its journal became
     * durable and could not be redone, a failed fsync, a meta.zr write
     * that could not be rolled back). Every later call then refuses with
     * ZR_ESTATE and `poison_msg` (the original failure) until the store
     * is reopened; a writable open recovers it through the journal. */
    _Atomic int poisoned;
    _Atomic int interrupt; /* zre_interrupt: long calls stop at a safe point */
    char poison_msg[ZRE_ERRMSG_CAP];
    bool fsync_failed; /* an fsync failed during the current writer call */
    bool files_short;  /* open: the files hold less than meta.zr claims */

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
/* Decode the entries of records index[0..n) (random, each < length; n <=
 * ZRE_LOCS_AT_MAX) into out[0..n): the mapped entries are prefetched
 * first, so their cache misses overlap instead of coming one at a time. */
#define ZRE_LOCS_AT_MAX 32u
int zre_read_locs_at(zre_engine *e, const uint64_t *index, uint64_t n, zre_loc *out);

/* FNV-1a (32 and 64 bit), the checksums of meta.zr and journal.zr. */
uint32_t zre_fnv1a32(const void *buf, size_t len);
uint64_t zre_fnv1a64(uint64_t h, const void *buf, size_t len);
#define ZRE_FNV64_INIT UINT64_C(0xcbf29ce484222325)

/* The fields of a meta.zr header, decoded. */
typedef struct zre_meta_state {
    uint64_t length;
    uint32_t tail_chunk;
    uint32_t tail_offset;
    zre_codec codec;
    uint32_t identity_tag;
} zre_meta_state;

/* Encode a meta.zr image (checksum included). */
void zre_meta_encode(unsigned char out[ZRE_META_SIZE], uint64_t length, uint32_t tail_chunk,
                     uint32_t tail_offset, zre_codec codec, uint32_t identity_tag);

/* fsync every open chunk and loc file, the directory, then meta.zr. */
int zre_sync_all(zre_engine *e);

/* Reader registration for exclusive maintenance (see struct zre_engine). */
int zre_enter_read(zre_engine *e, const char *what);
static inline void zre_leave_read(zre_engine *e)
{
    atomic_fetch_sub(&e->readers, 1);
}
/* Writer lock held. ZR_EBUSY if a gather runs on this handle or any
 * other handle (read-only, any process) has the store open; else maint is
 * raised and meta.zr is locked exclusively until zre_leave_maint. */
int zre_enter_maint(zre_engine *e, const char *what);
void zre_leave_maint(zre_engine *e);

/* Deal with journal.zr if present, the one recovery mechanism, used both
 * by open (after a crash) and in-process (a maintenance call that failed
 * after its journal became durable). `*length` with e->tail_chunk and
 * e->tail_offset is the state meta.zr holds. A journal whose base state
 * (the commit it was written against) and target state both differ from
 * it is stale: a writable handle removes it, a read-only one ignores it.
 * Otherwise a writable handle replays it (bytes, table entries, header,
 * fsync, unlink) and updates *length and the frontier; a read-only handle
 * writes nothing and refuses with ZR_ESTATE, saying a writable open must
 * recover the store. */
int zre_journal_recover(zre_engine *e, uint64_t *length);

/* What is wrong with one table entry's own fields, or NULL. */
const char *zre_loc_problem(const zre_loc *l, zre_codec codec);

/* Mark the handle unusable (see `poisoned`), keeping the calling thread's
 * current error (status `status`, which is returned) and adding that the
 * handle now refuses every call until reopened. */
int zre_poison(zre_engine *e, int status);
/* The current writer call's name for messages ("engine" outside one). */
const char *zre_op(const zre_engine *e);
/* ZR_ESTATE with the poison message if the handle is poisoned, else OK. */
int zre_check_usable(zre_engine *e, const char *what);
/* Write meta.zr for a commit; on failure try to put the previous image
 * back, and poison the handle when even that fails (the header on disk is
 * then unknown). Writer only. */
int zre_commit_meta(zre_engine *e, uint64_t length, uint32_t tail_chunk, uint32_t tail_offset);
/* Unmap, close and forget chunk/segment `id` (maintenance only). */
void zre_fdtab_drop(zre_fdtab *t, uint64_t id);
/* Open numbered file, see engine.c: 1 opened, 0 missing (!create), <0. */
int zre_open_numbered(zre_engine *e, zre_fdtab *t, uint64_t id, const char *ext, bool create);
/* Malloc'd "<dir>/<name>"; NULL when out of memory. */
char *zre_join(const zre_engine *e, const char *name);

/* Read and decode one record (exactly l->logic_length bytes) into out. */
int zre_read_one(zre_engine *e, uint64_t idx, const zre_loc *l, unsigned char *out);

/* Rewrite meta.zr with the given state (writer only). */
int zre_write_meta(zre_engine *e, uint64_t length, uint32_t tail_chunk, uint32_t tail_offset);

/* zstd context free lists. NULL on allocation failure. */
void *zre_dctx_get(zre_engine *e);
void zre_dctx_put(zre_engine *e, void *dctx);
void *zre_cctx_get(zre_engine *e);
void zre_cctx_put(zre_engine *e, void *cctx);

/* Map a platform error to a status: ZRP_ESHORT -> `short_status`, a
 * remote failure -> its own status, anything else -> ZR_EIO. */
static inline int zre_io_status(int prc, int short_status)
{
    return prc == ZRP_ESHORT ? short_status : prc == ZRE_EREMOTE ? zre_remote_status() : ZR_EIO;
}

/* Copy of a thread's error detail, to carry it from a worker thread back to
 * the calling thread. */
typedef struct zre_err {
    int status;
    int os_errno;
    char msg[ZRE_ERRMSG_CAP];
} zre_err;

/* Record the calling thread's current detail into `err` (status < 0). */
void zre_err_capture(zre_err *err, int status);
/* Re-raise a captured error on the calling thread; returns its status. */
int zre_err_raise(const zre_err *err);
/* Re-raise it with a printf-style suffix appended to the message. */
int zre_err_raise_with(const zre_err *err, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

#endif
