/*
 * zrengine.h - libzrengine, the physical record engine of loaderx-in-C.
 *
 * A store directory holds records: opaque, non-empty byte strings addressed
 * by a dense index 0..length-1. The engine knows bytes only (no dtype, no
 * shape); typed stores live one layer up in libzrstore.
 *
 * On-disk layout (every integer little-endian; docs/FORMAT.md is byte-exact):
 *
 *   meta.zr   the header, twice: two 64-byte copies, each u64 length,
 *             u32 tail_chunk, u32 tail_offset, u8 codec, u32 identity_tag,
 *             the u64 sequence of its commit, the synced length and
 *             frontier, and a checksum; a commit writes the copy that does
 *             not hold the last one (older versions: one 32-byte header).
 *   N.loc     record table segment N: up to 2^28 entries of 16 bytes
 *             {u32 offset, u32 phys_length, u32 logic_length, u32 chunk_id}.
 *   N.chunk   record payloads; logical capacity 4 GiB; a record never
 *             straddles two chunks.
 *   dict.zr   the zstd dictionary of a zstd_dict store (only there).
 *   journal.zr  present only while a delete or compact is being applied;
 *             replayed by the next writable open.
 *   lock.zr   empty; the writer's lock (writable opens create it).
 *   store.zr  the typed identity, written by libzrstore, not by the engine.
 *
 * Commit protocol: payload bytes, then record-table entries, then a header
 * copy in meta.zr. A reader trusts only what meta.zr says is committed.
 * sync, close, delete and compact return with every record durable.
 *
 * Errors: functions return 0 (ZR_OK) or a negative zr_status (zrerror.h,
 * the error module every library shares). The calling
 * thread's detail message, zr_last_error(), then says what and where, and
 * zr_last_errno() the OS error number behind it (0 if none). Nothing here
 * prints or aborts.
 *
 * Failures: a call that fails leaves the store at its last commit. The
 * handle then either still works, or, when it can no longer vouch for its
 * state (a delete or compact that failed after its journal became durable
 * and could not be finished in-process, a failed fsync), refuses every
 * later call with ZR_ESTATE naming the original failure until the store is
 * closed and reopened; the next writable open finishes or undoes what was
 * interrupted. A read-only open never writes. Store
 * files are opened without following symbolic links and only as regular
 * files.
 *
 * Threads: zre_append and zre_gather may be called concurrently from many
 * threads on one handle. zre_delete and zre_compact need exclusive use of
 * the handle: they fail with ZR_EBUSY (saying so) while a gather or
 * record_sizes runs on it, and a gather started during them fails with
 * ZR_EBUSY too. zre_close must not race with any other call.
 *
 * Processes (as LMDB): at most one writable handle and any number of
 * read-only handles, in any processes, at once. Appends never disturb a
 * reader; a reader sees the commits made up to its open and, after
 * zre_refresh, up to that call. delete and compact need the store to
 * themselves: ZR_EBUSY at once while any read-only handle is open, and
 * read-only opens fail with ZR_EBUSY while they run. Nothing waits.
 * Locks belong to handles, not processes (see zre_forget_after_fork).
 */
#ifndef ZRENGINE_H
#define ZRENGINE_H

#include <stddef.h>
#include <stdint.h>

#include "zrerror.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ===================================================== version and export */

#define ZRENGINE_VERSION_MAJOR 0
#define ZRENGINE_VERSION_MINOR 1
#define ZRENGINE_VERSION_PATCH 0
#define ZRENGINE_VERSION_NUMBER \
    (ZRENGINE_VERSION_MAJOR * 10000 + ZRENGINE_VERSION_MINOR * 100 + ZRENGINE_VERSION_PATCH)

#if defined(_WIN32) && defined(ZRENGINE_BUILDING)
#define ZRE_API __declspec(dllexport)
#elif defined(_WIN32) && !defined(ZR_STATIC)
#define ZRE_API __declspec(dllimport)
#elif defined(__GNUC__)
#define ZRE_API __attribute__((visibility("default")))
#else
#define ZRE_API
#endif

/* The runtime library's ZRENGINE_VERSION_NUMBER (may differ from the
 * header a program was compiled with). */
ZRE_API unsigned zrengine_version(void);
/* "MAJOR.MINOR.PATCH"; static storage, never free. */
ZRE_API const char *zrengine_version_string(void);

/* ================================================================ errors */

/* The status enum (zr_status), zr_strerror, zr_status_name, zr_last_error,
 * zr_last_errno and zr_error_context come from zrerror.h, the error module
 * every loaderx-in-C library shares. */

/* ================================================================ codecs */

typedef enum zre_codec {
    ZRE_CODEC_RAW = 0,       /* bytes stored as given */
    ZRE_CODEC_ZSTD = 1,      /* one zstd frame per record, level 3 */
    ZRE_CODEC_ZSTD_DICT = 2  /* zstd level 19 against the store's dict.zr */
} zre_codec;

/* "raw", "zstd", "zstd_dict"; NULL for an unknown value. Static storage. */
ZRE_API const char *zre_codec_name(zre_codec codec);
/* Parse a codec name; ZR_EINVAL (with detail) for anything else. */
ZRE_API int zre_codec_parse(const char *name, zre_codec *out);

/* Format limits (from the specification). */
#define ZRE_META_SIZE 128u /* two 64-byte header copies (older versions: 32 bytes) */
#define ZRE_LOC_ENTRY_SIZE 16u
#define ZRE_LOC_SEGMENT_ENTRIES (UINT64_C(1) << 28)  /* entries per N.loc */
#define ZRE_CHUNK_CAPACITY (UINT64_C(1) << 32)       /* bytes per N.chunk */
#define ZRE_RECORD_MAX (UINT64_C(1) << 31)           /* bytes per record */
#define ZRE_ZSTD_LEVEL 3
#define ZRE_ZSTD_DICT_LEVEL 19
/* Largest dict.zr accepted (the "max" tier trains 1 MiB). */
#define ZRE_DICT_MAX (UINT64_C(64) << 20)

/* =============================================================== engine */

typedef struct zre_engine zre_engine;

/* Create a new, empty store directory at `path` with `codec`.
 * The path must not exist (ZR_EEXIST otherwise); parent directories are
 * created as needed. Writes meta.zr and makes it durable. The handle is
 * writable and holds the store's writer lock (lock.zr).
 * On success *out owns the handle: release it with zre_close. */
ZRE_API int zre_create(zre_engine **out, const char *path, zre_codec codec);

/* Open an existing store directory for reading and appending, taking its
 * writer lock without waiting: ZR_EBUSY if another writable handle (in
 * this or any process) has it open, or a delete/compact is running.
 * Read-only handles may be open beside it, and may open later (at most
 * one writer plus any number of readers, as LMDB). Creates lock.zr in a
 * store that has none. ZR_ENOTSTORE if meta.zr is missing or malformed
 * (wrong size, unknown codec, non-zero reserved bytes, tail beyond the
 * chunk files, table shorter than length). */
ZRE_API int zre_open(zre_engine **out, const char *path);

/* Make the committed state durable (see zre_sync), release the lock and
 * free the handle. Returns the sync status; the handle is freed either
 * way. NULL is a no-op. */
ZRE_API int zre_close(zre_engine *e);

/* For the child of fork() only: abandon a handle inherited from the
 * parent. Closes the handle's file descriptors (meta.zr and lock.zr with
 * their locks, the chunk and record-table files) so the child no longer pins the parent's
 * store lock, and does nothing else: no sync, no thread, mutex or memory
 * is touched (the parent's threads may have held them at the fork). The
 * handle is unusable afterwards: only accessors that read its fields
 * (zre_path, zre_get_codec, zre_is_readonly, zre_length) still answer, and
 * its memory is leaked in the child by design; never zre_close it there.
 * It only closes descriptors, so it is safe right after fork() of a
 * multi-threaded parent. NULL is a no-op. */
ZRE_API void zre_forget_after_fork(zre_engine *e);

/* Make every committed record durable: fsync the chunk files and the
 * record-table segments, then the directory, then write a header copy
 * recording the state as synced (when records were committed since the
 * last sync), then fsync meta.zr. A failed fsync is returned as ZR_EIO,
 * never ignored, and the handle refuses every later call (the kernel may
 * have dropped the dirty pages). */
ZRE_API int zre_sync(zre_engine *e);

/* Options of zre_create_ex. Zero-initialise, then set what you need. */
typedef struct zre_create_options {
    zre_codec codec;
    /* zstd_dict only (and then required): the dictionary bytes, a zstd
     * dictionary as ZDICT_trainFromBuffer makes it (magic 0xEC30A437),
     * 8..ZRE_DICT_MAX bytes. Copied; written to dict.zr before meta.zr. */
    const void *dict;
    uint64_t dict_size;
    /* Stored in meta.zr for the layer above (libzrstore keeps a hash of
     * store.zr there, to detect a damaged identity). 0: none. */
    uint32_t identity_tag;
} zre_create_options;

/* zre_create with options: codec, dictionary (ZR_EINVAL for zstd_dict
 * without one, or with a dictionary for another codec), identity tag. */
ZRE_API int zre_create_ex(zre_engine **out, const char *path,
                          const zre_create_options *options);

/* Close a handle fresh from zre_create / zre_create_ex (no record
 * appended) and remove what create made: meta.zr, dict.zr and the
 * directory itself. For the layer above when its own create step fails,
 * so a retry does not meet ZR_EEXIST. ZR_EINVAL (the handle is closed,
 * nothing removed) for a read-only or non-empty handle. NULL is a no-op. */
ZRE_API int zre_discard(zre_engine *e);

/* Open flags. */
#define ZRE_OPEN_READONLY 1u /* a reader: beside other readers and one writer */
/* Recovery after a crash or power loss that lost appends never synced:
 * when meta.zr claims records whose table entries or bytes did not reach
 * the disk (a plain open then refuses with ZR_ENOTSTORE, naming this
 * flag), keep every synced record and, after them, the records appended
 * since that lie where their append put them with their bytes inside the
 * chunk files, up to the first that does not, and make that state durable.
 * Every record whose zre_sync (or delete, compact) returned is kept; a
 * table entry left behind by a delete is never taken for an appended
 * record. Writable opens only (ZR_EINVAL with ZRE_OPEN_READONLY). */
#define ZRE_OPEN_RECOVER 2u

/* zre_open with flags. ZRE_OPEN_READONLY opens a reader without waiting:
 * any number of read-only handles (in any processes) coexist with each
 * other and with one writable handle; ZR_EBUSY only while a delete or
 * compact runs (they need the store to themselves). The reader sees the
 * records committed when it opened, and later ones after zre_refresh.
 * A read-only handle refuses append/delete/compact (ZR_EUNSUPPORTED);
 * sync and close do nothing on disk: a read-only open never writes. If a
 * crashed writer left a journal.zr that still applies, a read-only open
 * refuses with ZR_ESTATE, saying that a writable open must recover the
 * store first (a writable open replays it). Errors as zre_open, plus
 * ZR_ENOTSTORE for a missing or damaged dict.zr of a zstd_dict store, and
 * for a store file that is a symbolic link or not a regular file. */
ZRE_API int zre_open_ex(zre_engine **out, const char *path, unsigned flags);

/* Move a read-only handle's view to the store's latest commit.
 *
 * A read-only handle sees the committed prefix of the moment it opened
 * (zre_length stays fixed) until it calls zre_refresh, which reads meta.zr
 * again (a header copy the writer is rewriting fails its checksum and the
 * other copy is read, so a torn header is never trusted), opens the chunk
 * and table files the writer added and learns their new sizes, checks the
 * records appended since the last sync, then publishes the new length. Records below
 * the old length never change while the handle is open (delete and
 * compact cannot run beside it), so gathers running on other threads
 * during a refresh are unaffected. Never waits for the writer.
 * A writable handle always sees its own commits: a no-op returning ZR_OK.
 * Errors: ZR_EINVAL (NULL), ZR_EIO, ZR_ENOTSTORE (damaged header or
 * files), ZR_ECORRUPT (the store went back, i.e. was changed behind the
 * locks). On error the view stays as it was. */
ZRE_API int zre_refresh(zre_engine *e);

/* 1 for a read-only handle, else 0. */
ZRE_API int zre_is_readonly(const zre_engine *e);
/* The identity tag given at create (0 if none). */
ZRE_API uint32_t zre_identity_tag(const zre_engine *e);

/* Number of committed records. */
ZRE_API uint64_t zre_length(const zre_engine *e);
ZRE_API zre_codec zre_get_codec(const zre_engine *e);
/* The directory path as given at create/open; owned by the handle. */
ZRE_API const char *zre_path(const zre_engine *e);

/* Append `count` records in one call from one contiguous buffer `src`.
 * Record boundaries are either fixed (`bounds == NULL`: record i is
 * src[i*record_size, (i+1)*record_size)) or explicit (`bounds` holds
 * count+1 increasing byte offsets into src; record i is
 * src[bounds[i], bounds[i+1]) and record_size is ignored).
 * Every record must be 1..ZRE_RECORD_MAX bytes (ZR_EINVAL / ZR_ETOOBIG).
 * Compressed stores compress records in parallel on all CPUs, writing
 * each 8 MiB window while the next is compressed; the handle keeps those
 * two windows' buffers (about 16 MiB) for its next append, until close.
 * On success *first_index (if not NULL) receives the index of the first
 * new record; on failure nothing is committed (length is unchanged).
 * The engine does not keep any pointer into src after return. */
ZRE_API int zre_append(zre_engine *e, const void *src, uint64_t record_size,
                       const uint64_t *bounds, uint64_t count,
                       uint64_t *first_index);

/* Logical (uncompressed) byte size of each record: sizes[i] for index[i].
 * ZR_ERANGE if any index >= length. */
ZRE_API int zre_record_sizes(zre_engine *e, const uint64_t *index,
                             uint64_t count, uint64_t *sizes);

/* Gather records index[0..count) into `dst` (capacity `dst_capacity`
 * bytes), decompressing straight into place; work is sharded over all
 * CPUs in contiguous blocks. Placement is fixed (`dst_bounds == NULL`:
 * record i lands at dst + i*record_size and must be exactly record_size
 * bytes) or explicit (record i lands at dst + dst_bounds[i] and must be
 * exactly dst_bounds[i+1] - dst_bounds[i] bytes). Indices may repeat and
 * come in any order. Errors: ZR_ERANGE (index >= length), ZR_EINVAL (dst
 * too small), ZR_ECORRUPT (size mismatch or undecodable frame, naming the
 * index), ZR_EIO. On failure the contents of dst are unspecified. */
ZRE_API int zre_gather(zre_engine *e, const uint64_t *index, uint64_t count,
                       void *dst, uint64_t dst_capacity, uint64_t record_size,
                       const uint64_t *dst_bounds);

/* Hint the operating system that records index[0..count) will be read
 * soon (posix_fadvise WILLNEED on their byte ranges in the chunk files,
 * neighbouring ranges merged), so a later zre_gather finds them in the page
 * cache. Purely advisory: it reads only the record table, never changes
 * what a gather returns, and an OS that ignores the hint is not an error.
 * Errors: ZR_EINVAL (NULL engine, or NULL index with count > 0),
 * ZR_ERANGE (an index >= length, named), ZR_ENOMEM, or a record-table
 * read failure. The index array is only read during the call. */
ZRE_API int zre_advise(zre_engine *e, const uint64_t *index, uint64_t count);

/* Estimated share (0..1) of the store's chunk bytes that sit in the OS page
 * cache now, into *fraction: 64 windows of 64 KiB spread evenly over the
 * chunk files (every byte of a store under 4 MiB), asked of the OS without
 * reading them (mincore). 1.0 for an empty store. A loader uses it to hint
 * only stores that are not already cached (see zld_options.readahead).
 * Errors: ZR_EINVAL (NULL argument), ZR_EUNSUPPORTED where the OS does not
 * report residency (Windows), ZR_EIO naming the chunk when a file cannot
 * be examined, ZR_ECLOSED / ZR_ESTATE as for a gather. */
ZRE_API int zre_resident_fraction(zre_engine *e, double *fraction);

/* Space accounting. */
typedef struct zre_stats {
    uint64_t records;        /* committed records */
    uint64_t logical_bytes;  /* sum of uncompressed record sizes */
    uint64_t live_bytes;     /* sum of stored (physical) record sizes */
    uint64_t chunk_bytes;    /* bytes in chunk files up to the frontier */
    uint64_t reclaimable;    /* chunk_bytes - live_bytes */
} zre_stats;

/* Fill *out by scanning the record table (O(length)). */
ZRE_API int zre_get_stats(zre_engine *e, zre_stats *out);

/* Bytes the chunk files hold up to the write frontier, in O(1) from the
 * frontier (tail_chunk full chunks + tail_offset): exact for one chunk,
 * an upper bound (by what chunk rollover left unused) beyond. For sizing
 * decisions such as the loader's adaptive readahead. 0 for NULL. */
ZRE_API uint64_t zre_chunk_bytes(zre_engine *e);

/* The store directory's regular files by role, with the sizes the file
 * system reports for them: what `du --apparent-size` adds up, so a tool
 * can show what a store costs on disk without knowing its file names.
 * Chunk files count whole (live records, reclaimable bytes and any tail
 * past the frontier), unlike zre_stats.chunk_bytes. */
typedef struct zre_disk_usage {
    uint64_t chunk_files; /* N.chunk files */
    uint64_t chunk_bytes; /* their sizes */
    uint64_t table_bytes; /* N.loc: the record table, 16 bytes a record slot */
    uint64_t dict_bytes;  /* dict.zr (zstd_dict stores) */
    uint64_t meta_bytes;  /* meta.zr, store.zr, lock.zr */
    uint64_t other_bytes; /* journal.zr and any other file in the directory */
    int journal_pending;  /* journal.zr is present (a delete or compact left it) */
} zre_disk_usage;

/* Fill *out from a listing of the store's directory (O(files); each file
 * examined without following a symbolic link, and anything but a regular
 * file left out). A store at a URL has no listing: its chunk and table
 * objects count at the sizes seen at open, meta_bytes is meta.zr and
 * store.zr (one GET of store.zr), other_bytes 0. Errors: ZR_EINVAL (NULL argument), ZR_EIO naming the
 * directory or the file that cannot be examined, ZR_ECLOSED / ZR_ESTATE
 * as for a gather. */
ZRE_API int zre_get_disk_usage(zre_engine *e, zre_disk_usage *out);

/* ============================================================ maintenance */

/* Delete the records at index[0..count) (any order; duplicates count
 * once) by swap-last: applied in descending index order, each deleted slot
 * receives the current last record, so the live records stay exactly
 * 0..length-1 (survivors past the new length are renumbered). Atomic: a
 * crash leaves the store before or after the whole call (journal.zr).
 * Durable when it returns, like zre_sync (it syncs earlier appends first).
 * The bytes of deleted records stay in the chunks until zre_compact.
 * ZR_ERANGE (nothing deleted) if any index >= length; ZR_EUNSUPPORTED on
 * a read-only handle; ZR_EBUSY (nothing deleted) while a gather runs on
 * this handle or any read-only handle (any process) has the store open. */
ZRE_API int zre_delete(zre_engine *e, const uint64_t *index, uint64_t count);

/* Reclaim the bytes of deleted records, in place: earlier appends are
 * made durable first, then records are visited in physical (chunk,
 * offset) order and repacked densely from the start of chunk 0, so none
 * moves to a higher address; records already in place are skipped. Then
 * record-table segments past `length` are deleted and the last truncated
 * to its share of length * 16 bytes, the new frontier is committed, chunk
 * files past it are deleted and the tail chunk truncated to it, and
 * everything is made durable. Safe to interrupt: each batch of
 * moves is committed on its own (through journal.zr when a move would
 * overwrite bytes still referenced), and running compact again finishes
 * the job. Indices and contents are unchanged. Needs O(length) memory.
 * Errors as zre_delete (ZR_EUNSUPPORTED read-only, ZR_EBUSY), ZR_EIO;
 * ZR_EINTR when zre_interrupt asked it to stop: it stops after the batch
 * in flight (at most 4,096 records or 64 MiB), every record reads as
 * before, no space is reclaimed yet, and running it again finishes. */
ZRE_API int zre_compact(zre_engine *e);

/* Ask a long call on `e` (zre_compact) running on another thread to stop
 * at its next safe point with ZR_EINTR (on = 1), or withdraw the request
 * (on = 0). The request stays until withdrawn: a compact started while it
 * is set stops at its first batch. Async-signal-safe (one atomic store),
 * so a signal handler may call it. */
ZRE_API void zre_interrupt(zre_engine *e, int on);

/* Check record `index` fully: its table entry against the chunk files and
 * the write frontier, then read it and decode it (frame checksum).
 * ZR_ECORRUPT with a detail naming the index and the problem. */
ZRE_API int zre_check_record(zre_engine *e, uint64_t index);


/* ====================================================== many stores at once
 * (concatenated datasets; see zrstore.h zrs_concat) */

/* zre_gather over several engines in one call: record i is
 * engines[which[i]]'s record index[i], placed exactly as zre_gather places
 * it (fixed record_size, or explicit dst_bounds), so a batch whose records
 * come from many stores lands in its final positions with no extra copy.
 * The work is sharded over the CPUs in contiguous blocks of the batch, as
 * one zre_gather, whatever the number of engines (engines[0]'s thread pool
 * runs it). The engines are borrowed for the call; the same engine may
 * appear more than once. Errors as zre_gather (ZR_ERANGE names the store),
 * plus ZR_EINVAL for no engines, a NULL engine or which[i] >= nengines,
 * and ZR_EBUSY while a delete or compact runs on any of them. */
ZRE_API int zre_gather_multi(zre_engine *const *engines, size_t nengines, const uint32_t *which,
                             const uint64_t *index, uint64_t count, void *dst,
                             uint64_t dst_capacity, uint64_t record_size,
                             const uint64_t *dst_bounds);

/* ======================================================== stores at a URL
 *
 * zre_open_ex takes an http://, https:// or s3://bucket/prefix URL in place
 * of a directory, with ZRE_OPEN_READONLY (a writable open of a URL is
 * ZR_EUNSUPPORTED). The store's files are objects under the URL
 * (URL/meta.zr, URL/0.chunk, ...); they are read through a byte-capped
 * block cache in a folder shared by the processes of the node, so every
 * call works as on a local store. A gather downloads the blocks its batch
 * needs in parallel range requests first; zre_advise downloads in the
 * background. Settings come from the environment (ZR_CACHE_DIR,
 * ZR_CACHE_BYTES, ZR_CACHE_BLOCK, ZR_REMOTE_*; S3: the standard AWS
 * variables and profile files); docs/REMOTE.md lists them. A store at a
 * URL is a fixed upload: zre_refresh keeps its view, and an object that
 * changes on the server after the open is ZR_ECORRUPT naming it.
 * Network failures are ZR_EIO naming the object and the cause (HTTP
 * status, timeout, short body) after the retries; a build without libcurl
 * refuses URLs with ZR_EUNSUPPORTED. */

/* Interrupting one caller's network waits (stores at a URL). After
 * zre_thread_interrupt(flag), the gathers and reads that the calling thread
 * makes fail with ZR_EINTR within about 50 ms once *flag is non-zero, and
 * the downloads only they were waiting for are aborted; other threads'
 * reads of the same stores go on (zre_interrupt, by contrast, stops every
 * call on its store). `flag` is the caller's (a loader's stop flag), must
 * stay valid while set, and is read without a lock: write it with an
 * atomic store. NULL clears it. Without remote support it does nothing. */
ZRE_API void zre_thread_interrupt(const volatile int *flag);

/* 1 when this build opens stores at URLs (it was built with libcurl). */
ZRE_API int zre_remote_supported(void);

/* 1 when `path` is an http://, https:// or s3:// URL, else 0. */
ZRE_API int zre_is_remote(const char *path);

/* Read the small file `name` of the store's folder (the typed layer's
 * store.zr), local or at the URL, into a buffer allocated by the library:
 * *out (free it with zre_free) and *len. ZR_ENOTSTORE when it is missing,
 * ZR_ETOOBIG over max_len bytes, ZR_EIO (or the remote status) when it
 * cannot be read; the detail names the file. */
ZRE_API int zre_read_side_file(zre_engine *e, const char *name, void **out, size_t *len,
                               size_t max_len);
/* Free memory the library returned (zre_read_side_file). NULL is a no-op. */
ZRE_API void zre_free(void *p);

/* GET the small object `name` under the folder URL `url` (a shard set's
 * manifest) into a buffer of the library (*out, free with zre_free), at
 * most max_len bytes: ZR_OK, ZR_ENOTSTORE when the server says 404,
 * ZR_ETOOBIG, or a network error (ZR_EIO naming the object). */
ZRE_API int zre_url_get(const char *url, const char *name, void **out, size_t *len,
                        size_t max_len);
/* PUT `len` bytes as object `name` under the folder URL `url`. */
ZRE_API int zre_url_put(const char *url, const char *name, const void *buf, size_t len);

/* Upload the committed state of `e` (a local store, open read-only or
 * writable) to `url` (http(s):// with PUT, or s3://): every chunk up to
 * the write frontier, every record-table segment up to the committed
 * length, dict.zr, then the files named in extra[0..nextra) of the store's
 * folder (store.zr), and meta.zr last, so a reader never opens a partly
 * uploaded store. `progress`, when not NULL, is called after each file
 * with the bytes sent so far and the total. ZR_EEXIST when the URL
 * already holds a meta.zr (nothing is sent); ZR_EINVAL for a URL store
 * or more than 64 extra files (nothing is sent);
 * ZR_EIO naming the object on a failed upload (after retries). */
ZRE_API int zre_push(zre_engine *e, const char *url, const char *const *extra, size_t nextra,
                     void (*progress)(uint64_t done, uint64_t total, void *arg), void *arg);

#ifdef __cplusplus
}
#endif
#endif /* ZRENGINE_H */
