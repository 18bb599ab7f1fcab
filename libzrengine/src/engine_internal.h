/*
 * engine_internal.h - libzrengine internals shared by its source files.
 * Never installed.
 *
 * The source files by role (docs/ARCHITECTURE.md, Source map), each
 * calling only those listed before it:
 *
 *   common.c   codecs, checksums, the handle's accessors, call name and
 *              poisoning, exclusive-use counters, zstd context pools
 *   files.c    the fd tables, numbered files (N.chunk, N.loc), the record
 *              table's I/O and the one table-entry check
 *   meta.c     meta.zr: its two header copies, encode/decode, read,
 *              commit, and the durability steps (sync)
 *   journal.c  journal.zr: header struct, encode/decode, write, load, remove
 *   recover.c  the two recovery paths (journal replay, durable prefix) and
 *              their shared commit step; the check of unsynced entries
 *   gather.c   reads: gather, record sizes, one-record reads
 *   append.c   appends
 *   advise.c   readahead hints and page-cache residency
 *   maint.c    delete, compact, check, stats
 *   open.c     create, open, refresh, sync, close: the handle's lifecycle
 * (error.c and pool.c, the error detail and the thread pool, call nothing.)
 */
#ifndef ZRENGINE_INTERNAL_H
#define ZRENGINE_INTERNAL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "zr_platform.h"
#include "zrengine.h"
#include "zrerror_sys.h"
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

/* Number of record-table segments that `length` entries occupy. */
static inline uint64_t zre_seg_count(uint64_t length)
{
    return (length + ZRE_INT_SEG_ENTRIES - 1) / ZRE_INT_SEG_ENTRIES;
}

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

/* ------------------------------------------------------- store states */

/* A place in the chunk files: byte `offset` of `chunk`. */
typedef struct zre_pos {
    uint32_t chunk;
    uint32_t offset;
} zre_pos;

/* A committed state: `length` records, the write frontier at `tail`. */
typedef struct zre_state {
    uint64_t length;
    zre_pos tail;
} zre_state;

static inline bool zre_pos_less(zre_pos a, zre_pos b)
{
    return a.chunk < b.chunk || (a.chunk == b.chunk && a.offset < b.offset);
}
static inline bool zre_state_eq(const zre_state *a, const zre_state *b)
{
    return a->length == b->length && a->tail.chunk == b->tail.chunk &&
           a->tail.offset == b->tail.offset;
}

/* Where an append puts a record of `size` stored bytes when the frontier
 * is at `at`: there, or at offset 0 of the next chunk when it would not
 * fit (a record never straddles chunks). The one placement rule: append
 * follows it, and the check of unsynced entries expects it. *full is set
 * when it would need a chunk past the last id (the store is full). */
static inline zre_pos zre_place(zre_pos at, uint64_t size, bool *full)
{
    *full = false;
    if ((uint64_t)at.offset + size <= ZRE_CHUNK_USABLE)
        return at;
    if (at.chunk == UINT32_MAX) {
        *full = true;
        return at;
    }
    return (zre_pos){at.chunk + 1, 0};
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
/* Where a record's stored bytes end. */
static inline zre_pos zre_loc_end(const zre_loc *l)
{
    return (zre_pos){l->chunk_id, l->offset + l->phys_length};
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
    const char *ext; /* "chunk" or "loc": the kind of numbered file */
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

/* -------------------------------------------------- remote stores
 *
 * A store opened by URL (remote_io.c, over the remote/ module) has no
 * descriptors and no mappings: each fent carries its remote object, read
 * through the node's cache, and the rest of the engine runs unchanged on
 * the no-map (pread) path. These helpers are the only places where a read
 * tells the two apart. */

/* A remote read failed; its status is zre_remote_status() and its message
 * the thread's current error (zr_os_strerror returns it). */
#define ZRE_EREMOTE ZR_OS_EDETAIL
int zre_remote_status(void);
int zre_remote_pread(struct zrr_obj *o, void *buf, size_t len, uint64_t off);
/* Where bytes [off, off + len) of the object sit in the node's cache, when
 * they lie inside one cached block; else NULL (read them with
 * zre_remote_pread). Only for a caller that holds the block (a gather,
 * after zre_remote_prepare): the address stays valid until the hold is
 * released. */
const unsigned char *zre_remote_span(struct zrr_obj *o, uint64_t off, size_t len);

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

/* remote_io.c. 1 when `path` is an http://, https:// or s3:// URL. */
int zre_is_url(const char *path);
/* Open side: connect e (e->path is the URL) to its remote folder. */
int zre_remote_attach(zre_engine *e);
void zre_remote_detach(zre_engine *e);
/* The calling thread's stop flag (zre_thread_interrupt), or NULL. */
const volatile int *zre_remote_thread_stop(void);
/* Object `name` of a remote store (a HEAD): 1 with *obj and its *size,
 * 0 when the server has none (404), or a status with the error set. */
int zre_remote_obj_open(zre_engine *e, const char *name, struct zrr_obj **obj, uint64_t *size);
/* Object `name` whole into a malloc'd buffer: 0, -ENOENT when missing,
 * -EFBIG over max_len, or ZRE_EREMOTE. */
int zre_remote_get_small(const zre_engine *e, const char *name, void **buf, size_t *len,
                         size_t max_len);
/* meta.zr of a remote store: its size in *size and its first min(size,
 * cap) bytes in m. 0, or a status with the error set (`what` names the
 * call). */
int zre_remote_meta(zre_engine *e, const char *what, unsigned char *m, size_t cap, uint64_t *size);

/* files.c. A small file beside the store's (meta.zr, dict.zr, store.zr),
 * local or remote, into a malloc'd buffer: 0, -ENOENT when missing, -EFBIG
 * over max_len, another negative platform code, or ZRE_EREMOTE. */
int zre_read_aux(const zre_engine *e, const char *name, void **buf, size_t *len, size_t max_len);
/* The size of open file `id` of table `t`: fstat, or the remote size. */
int zre_fent_size(const zre_fdtab *t, uint64_t id, uint64_t *size);

/* remote_fetch.c. Before a gather: download, in parallel, what the batch
 * needs of every remote engine among `engines` (record-table blocks, then
 * record bytes), and hold it in memory until zre_remote_release(*hold)
 * (always called, whatever prepare returned; NULL is a no-op). */
typedef struct zre_rhold zre_rhold;
int zre_remote_prepare(zre_engine *const *engines, const uint32_t *which, const uint64_t *index,
                       uint64_t count, int locs_only, zre_rhold **hold);
void zre_remote_release(zre_rhold *hold);
/* zre_advise's merged ranges of chunk files, for a remote store: a
 * background download. */
void zre_remote_prefetch(zre_engine *e, const uint32_t *chunk, const uint64_t *lo,
                         const uint64_t *hi, size_t n);
int zre_remote_cached_fraction(zre_engine *e, double *fraction);

/* -------------------------------------------------------------- engine */

/* Size of an error detail message (zr_last_error). */
#define ZRE_ERRMSG_CAP 512

struct zre_engine {
    char *path;
    struct zrr_ctx *remote;  /* a store opened by URL (read-only), else NULL */
    zre_codec codec;
    bool readonly;           /* shared lock; files opened read-only */
    uint32_t identity_tag;   /* kept in meta.zr for the layer above */
    zrp_file meta;           /* open, shared-locked for the lifetime */
    zrp_file wlock;          /* lock.zr, exclusive-locked: writers only */
    _Atomic uint64_t length; /* committed records; release-stored on commit */

    /* Writer state, only touched with `writer` held: the committed
     * frontier, what the last sync made durable (the header's synced
     * fields: every record below synced.length is on disk, and records
     * appended since lie from synced.tail on, in index order), and which
     * header copy holds the last commit (meta.c). */
    zre_pos tail;
    zre_state synced;
    /* Where payload written since the last write-out hint begins (append.c):
     * a hint only, never a statement about durability. */
    zre_pos writeback_from;
    uint64_t meta_seq;
    bool meta_legacy;  /* meta.zr is a 32-byte header of an older version */
    zrp_mutex writer;  /* single writer: append, sync, stats snapshot */

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
     * durable and could not be redone, a failed fsync). Every later call
     * then refuses with ZR_ESTATE and `poison_msg` (the original failure)
     * until the store is reopened. */
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

    /* Compressed append's two windows (writer lock), kept between calls. */
    struct zre_zwin *zwin;
};

/* The committed state (writer lock held). */
static inline zre_state zre_now(const zre_engine *e)
{
    return (zre_state){atomic_load_explicit(&((zre_engine *)e)->length, memory_order_acquire),
                       e->tail};
}

/* ========================================================== common.c */

/* FNV-1a (32 and 64 bit), the checksums of meta.zr and journal.zr. */
uint32_t zre_fnv1a32(const void *buf, size_t len);
uint64_t zre_fnv1a64(uint64_t h, const void *buf, size_t len);
#define ZRE_FNV64_INIT UINT64_C(0xcbf29ce484222325)

/* The current writer call's name for messages ("engine" outside one). */
const char *zre_op(const zre_engine *e);
/* Mark the handle unusable (see `poisoned`), keeping the calling thread's
 * current error (status `status`, which is returned) and adding that the
 * handle now refuses every call until the store is reopened. */
int zre_poison(zre_engine *e, int status);
/* ZR_ESTATE with the poison message if the handle is poisoned, else OK. */
int zre_check_usable(zre_engine *e, const char *what);

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

/* zstd context free lists. NULL on allocation failure. */
void *zre_dctx_get(zre_engine *e);
void zre_dctx_put(zre_engine *e, void *dctx);
void *zre_cctx_get(zre_engine *e);
void zre_cctx_put(zre_engine *e, void *cctx);
/* Free every pooled context (close). */
void zre_ctx_free_all(zre_engine *e);
/* Free compressed append's windows (append.c). */
void zre_append_free(zre_engine *e);

/* Map a platform error to a status: ZRP_ESHORT -> `short_status`, a
 * remote failure -> its own status, anything else -> ZR_EIO. */
static inline int zre_io_status(int prc, int short_status)
{
    return prc == ZRP_ESHORT ? short_status : prc == ZRE_EREMOTE ? zre_remote_status() : ZR_EIO;
}

/* Copy of a thread's error detail, to carry it from a worker thread back to
 * the calling thread (error.c). */
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

/* =========================================================== files.c */

/* Malloc'd "<dir>/<name>"; NULL when out of memory. */
char *zre_join(const zre_engine *e, const char *name);
/* Path of "<dir>/<id>.<ext>" in `buf`. */
void zre_file_path(const zre_engine *e, char *buf, size_t cap, uint64_t id, const char *ext);
/* The status and message for a failed zrp_open of store file `p`. */
int zre_open_error(const zre_engine *e, const char *p, int prc);

/* Open (creating when `create`) numbered file `id` of table `t`.
 * Returns 1 when opened (or already open), 0 when missing and !create,
 * or a negative status. */
int zre_open_numbered(zre_engine *e, zre_fdtab *t, uint64_t id, bool create);
/* Make sure chunk `id` (resp. loc segment `id`) is open, creating the file
 * when missing. Writer only. */
int zre_ensure_chunk(zre_engine *e, uint32_t id);
int zre_ensure_seg(zre_engine *e, uint64_t id);
/* Unmap, close and forget file `id` (maintenance only). */
void zre_fdtab_drop(zre_fdtab *t, uint64_t id);
/* Set the known size of file `id` (maintenance, after a truncate). */
void zre_fdtab_set_size(zre_fdtab *t, uint64_t id, uint64_t size);
/* Close every descriptor of `t`; with `release`, also unmap the files and
 * free the blocks, leaving it empty. */
void zre_fdtab_close(zre_fdtab *t, bool release);
/* fsync file `id` of `t` if it is open; a failure sets fsync_failed and
 * names the call and the file. */
int zre_fsync_numbered(zre_engine *e, zre_fdtab *t, uint64_t id);
/* fsync the store directory (entries of created, renamed, removed files). */
int zre_fsync_dir(zre_engine *e);
/* Delete files `first`.. of `t` while they exist (at least up to
 * `at_least_to`, and any open one), forgetting them. */
int zre_remove_numbered_from(zre_engine *e, zre_fdtab *t, uint64_t first, uint64_t at_least_to);
/* Truncate file `id` of `t` (if present) to `size` bytes and fsync it. */
int zre_truncate_numbered(zre_engine *e, zre_fdtab *t, uint64_t id, uint64_t size);

/* Write encoded loc entries [first, first+n) (16*n bytes in `buf`) to the
 * segments, splitting at segment boundaries. Writer only. */
int zre_write_locs(zre_engine *e, uint64_t first, const unsigned char *buf, uint64_t n);
/* Write one entry. */
int zre_write_loc(zre_engine *e, uint64_t index, const zre_loc *l);
/* Overwrite entries [first, first+n) with zeros where the segments hold
 * them, and fsync those segments: a failed append leaves none of its
 * entries behind (a zero entry is never valid). */
int zre_clear_locs(zre_engine *e, uint64_t first, uint64_t n);
/* Read loc entries [first, first+n) into `buf` (16*n bytes). */
int zre_read_locs(zre_engine *e, uint64_t first, unsigned char *buf, uint64_t n);
/* Read and decode one entry. */
int zre_read_loc(zre_engine *e, uint64_t index, zre_loc *out);
/* Decode the entries of records index[0..n) (random, each < length; n <=
 * ZRE_LOCS_AT_MAX) into out[0..n): the mapped entries are prefetched
 * first, so their cache misses overlap instead of coming one at a time. */
#define ZRE_LOCS_AT_MAX 32u
int zre_read_locs_at(zre_engine *e, const uint64_t *index, uint64_t n, zre_loc *out);

/* What is wrong with one table entry's own fields, or NULL. */
const char *zre_loc_problem(const zre_loc *l, zre_codec codec);
/* The one table-entry check: its fields, then its place against the
 * frontier `tail` (the chunk exists and is open, the record ends at or
 * before the frontier), and with `file_size` also against the chunk
 * file's size as the handle knows it. What is wrong, or NULL. */
const char *zre_loc_check(zre_engine *e, const zre_loc *l, zre_pos tail, bool file_size);

/* ============================================================ meta.c */

/* The fields of a meta.zr header, decoded. A header read from a 32-byte
 * file of an older version (`legacy`) has no copy sequence and no synced
 * state: its synced state is reported equal to `now`. */
typedef struct zre_header {
    zre_state now;
    zre_state synced;
    zre_codec codec;
    uint32_t identity_tag;
    uint64_t seq;
    bool legacy;
} zre_header;

/* Write meta.zr of a new, empty store (create; e->meta open). */
int zre_meta_create(zre_engine *e);
/* Read and check meta.zr into *out. A read-only handle rereads while the
 * bytes change (a writer in another process may be writing a copy), for
 * a bounded time; a writable handle holds the writer lock, so its first
 * read is final. `what` names the call in messages. */
int zre_meta_read(zre_engine *e, const char *what, zre_header *out);
/* The 128 bytes of a meta.zr whose one valid copy (sequence 0) commits
 * `st` as both the committed and the synced state (create, push). */
void zre_meta_image(const zre_engine *e, const zre_state *st, unsigned char out[ZRE_META_SIZE]);
/* Write the header copy after the last commit's: state `now`, synced
 * state `synced`. On success the handle's header sequence advances and
 * e->synced = *synced; the caller publishes `now`. On failure nothing
 * changes in memory, and the copy holding the last commit was not
 * touched: the store is at its last commit whatever reached the disk.
 * Writer only. */
int zre_commit_meta(zre_engine *e, const zre_state *now, const zre_state *synced);
/* fsync every open chunk and table file, then the directory. */
int zre_sync_files(zre_engine *e);
/* fsync meta.zr. */
int zre_sync_meta(zre_engine *e);
/* Make the committed state durable: the files, then a header recording it
 * as synced (when the last one did not), then meta.zr. Writer only;
 * read-only handles return OK. */
int zre_sync_all(zre_engine *e);
/* The commit step that makes `target` durable at once: files, then the
 * header (target, synced = target), then publish it in memory, then
 * meta.zr. Recovery (both paths), delete and compact end with it. */
int zre_commit_durable(zre_engine *e, const zre_state *target);

/* ========================================================= journal.c */

/* Compact moves per batch (and journal), bounding memory; one record
 * larger than the byte bound makes a batch of its own. */
#define ZRE_COMPACT_BATCH_RECORDS 4096u
#define ZRE_COMPACT_BATCH_BYTES ((uint64_t)64 << 20)

/* What a journal records. */
typedef enum zre_jop { ZRE_JOP_DELETE = 1, ZRE_JOP_COMPACT = 2 } zre_jop;
const char *zre_jop_name(zre_jop op);

/* The journal's header: the call, the state it was written against
 * (`base`) and the state it ends with (`target`). */
typedef struct zre_jhead {
    zre_jop op;
    bool payloads;  /* record bytes follow the entries */
    zre_state target;
    zre_state base;
    uint64_t n;     /* entries */
} zre_jhead;

/* One journal entry: a table entry to write at `index`. */
typedef struct zre_jentry {
    uint64_t index;
    zre_loc loc;
} zre_jentry;

/* A journal read from disk and checked: its header, entries (n of them,
 * decoded) and payload bytes (within `raw`). */
typedef struct zre_journal {
    zre_jhead head;
    zre_jentry *ent;
    const unsigned char *payload;
    void *raw;
} zre_journal;

/* Write journal.zr durably (temporary file, fsync, rename, directory
 * fsync): `n` entries, and with `payload` their records' stored bytes in
 * entry order. On failure nothing may be left that a later open would
 * replay: a journal that may have landed is removed, and if even that
 * fails the handle is poisoned. */
int zre_journal_write(zre_engine *e, const zre_jhead *h, const zre_jentry *ent,
                      const unsigned char *payload, uint64_t payload_bytes);
/* Load and check journal.zr: 1 when one was loaded into *j (free with
 * zre_journal_free), 0 when there is none, or a negative status naming
 * what is wrong (a damaged journal is ZR_ENOTSTORE). `max_entries`
 * bounds its size. */
int zre_journal_load(zre_engine *e, uint64_t max_entries, zre_journal *j);
void zre_journal_free(zre_journal *j);
/* Remove journal.zr and fsync the directory (a missing one is fine). */
int zre_journal_remove(zre_engine *e);

/* ========================================================= recover.c */

/* Deal with journal.zr if present, the one recovery mechanism for delete
 * and compact, used both by open (after a crash) and in-process (a
 * maintenance call that failed after its journal became durable). The
 * handle's committed state (e->length, e->tail) is what meta.zr holds. A
 * journal whose base state and target state both differ from it is
 * stale: a writable handle removes it, a read-only one ignores it.
 * Otherwise a writable handle replays it (bytes, table entries, then the
 * shared commit step) and removes it; a read-only handle writes nothing
 * and refuses with ZR_ESTATE, saying a writable open must recover it. */
int zre_journal_recover(zre_engine *e);
/* A maintenance call failed (status `rc`, detail set) after its journal
 * became durable: finish it through the journal replay, or, when that is
 * impossible (an fsync failed) or fails too, poison the handle. ZR_OK when
 * the redo completed the call. */
int zre_redo_or_poison(zre_engine *e, int rc);
/* The check of records appended since the last sync, [from, h->now.length):
 * each table entry must be valid, lie exactly where an append puts it
 * (the chain from the synced frontier, or from the end of entry from-1),
 * and inside its chunk file; they end at or before the frontier. ZR_OK,
 * or ZR_ENOTSTORE (files_short set) naming the first that is not. */
int zre_check_unsynced(zre_engine *e, const zre_header *h, uint64_t from);
/* ZRE_OPEN_RECOVER: keep the longest prefix of records that reached the
 * disk (synced ones checked in place, unsynced ones along the append
 * chain), and commit it durably through the shared step. */
int zre_recover_durable_prefix(zre_engine *e, const zre_header *h);

/* ========================================================== gather.c */

/* Read and decode one record (exactly l->logic_length bytes) into out. */
int zre_read_one(zre_engine *e, uint64_t idx, const zre_loc *l, unsigned char *out);

#endif
