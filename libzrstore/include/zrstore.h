/*
 * zrstore.h - libzrstore, typed record stores over libzrengine.
 *
 * Two contracts over one engine:
 *   dense   every record is one array of the store's fixed item_shape and
 *           dtype: exactly itemsize * prod(item_shape) bytes.
 *   ragged  every record keeps its own shape; the physical record is
 *           [u64le ndim][u64le dims[ndim]][payload], one codec frame.
 *           A scalar record has ndim 0. A dimension may be 0 (a record
 *           with no elements, e.g. shape (0, 4)): its payload is empty,
 *           its prefix still holds the shape.
 *
 * The identity lives in store.zr as one msgpack map, exactly:
 *   dense  {"dtype": "<f4", "item_shape": [28, 28], "uuid": "..."}
 *   ragged {"dtype": "<i4", "uuid": "..."}
 * with dtype in numpy's string form and the store's uuid (see
 * zrs_get_uuid; absent in stores made before it existed); any other key,
 * type or dtype is refused on open (ZR_ENOTSTORE). store.zr is written
 * only after the engine's files are durable, so a directory without it is
 * not a store.
 *
 * Errors and threads: as in zrengine.h (0 or a negative zr_status, detail
 * in zr_last_error()). Gather and append may run concurrently on one
 * handle from many threads.
 */
#ifndef ZRSTORE_H
#define ZRSTORE_H

#include <zrengine.h>

#ifdef __cplusplus
extern "C" {
#endif

#define ZRSTORE_VERSION_MAJOR 0
#define ZRSTORE_VERSION_MINOR 1
#define ZRSTORE_VERSION_PATCH 0
#define ZRSTORE_VERSION_NUMBER \
    (ZRSTORE_VERSION_MAJOR * 10000 + ZRSTORE_VERSION_MINOR * 100 + ZRSTORE_VERSION_PATCH)

#if defined(_WIN32) && defined(ZRSTORE_BUILDING)
#define ZRS_API __declspec(dllexport)
#elif defined(_WIN32) && !defined(ZR_STATIC)
#define ZRS_API __declspec(dllimport)
#elif defined(__GNUC__)
#define ZRS_API __attribute__((visibility("default")))
#else
#define ZRS_API
#endif

ZRS_API unsigned zrstore_version(void);
ZRS_API const char *zrstore_version_string(void);

/* ================================================================ dtypes */

/* The closed dtype set. Strings are numpy's dtype.str for a little-endian
 * host: one-byte types use '|', the rest '<'. */
typedef enum zrs_dtype {
    ZRS_BOOL = 0,     /* "|b1" */
    ZRS_INT8,         /* "|i1" */
    ZRS_INT16,        /* "<i2" */
    ZRS_INT32,        /* "<i4" */
    ZRS_INT64,        /* "<i8" */
    ZRS_UINT8,        /* "|u1" */
    ZRS_UINT16,       /* "<u2" */
    ZRS_UINT32,       /* "<u4" */
    ZRS_UINT64,       /* "<u8" */
    ZRS_FLOAT16,      /* "<f2" */
    ZRS_FLOAT32,      /* "<f4" */
    ZRS_FLOAT64,      /* "<f8" */
    ZRS_COMPLEX64,    /* "<c8" */
    ZRS_COMPLEX128,   /* "<c16" */
    ZRS_DTYPE_COUNT
} zrs_dtype;

/* Parse numpy's dtype string; ZR_EINVAL naming the string otherwise. */
ZRS_API int zrs_dtype_parse(const char *str, zrs_dtype *out);
/* A dtype by any of its numpy-style names, the one parser every binding
 * uses: numpy's dtype string ("<f4", "|u1"), the type's name ("float32",
 * "uint8", "bool", "complex128"), its code without a byte order ("f4",
 * "u1", "b1", "c16") or with one ('<' little-endian, '|' not applicable
 * (one-byte types), '=' this machine's order, '>' big-endian). Records are
 * stored little-endian: a big-endian name (or '=' on a big-endian
 * machine) is accepted only when big_endian is not NULL, which then says
 * 1 (the caller converts its data) or 0; with big_endian NULL it is
 * ZR_EINVAL. ZR_EINVAL naming the string and listing the accepted names
 * for anything else. */
ZRS_API int zrs_dtype_from_name(const char *name, zrs_dtype *out, int *big_endian);
/* numpy's dtype string; NULL for an invalid value. Static storage. */
ZRS_API const char *zrs_dtype_str(zrs_dtype dtype);
/* Bytes per element; 0 for an invalid value. */
ZRS_API size_t zrs_dtype_itemsize(zrs_dtype dtype);

/* Most dimensions a dense item_shape or a ragged record may have. */
#define ZRS_MAX_NDIM 32

/* ================================================================ stores */

typedef enum zrs_kind { ZRS_DENSE = 0, ZRS_RAGGED = 1 } zrs_kind;

typedef struct zrs_store zrs_store;

/* Create a dense store: records of `dtype` with shape item_shape[0..ndim)
 * (ndim 0 is a store of scalars). Every dim must be >= 1. The path must
 * not exist (ZR_EEXIST). The handle is writable and owns the lock;
 * release with zrs_close. */
ZRS_API int zrs_create_dense(zrs_store **out, const char *path,
                             zrs_dtype dtype, const uint64_t *item_shape,
                             size_t ndim, zre_codec codec);

/* Create a ragged store of `dtype`. */
ZRS_API int zrs_create_ragged(zrs_store **out, const char *path,
                              zrs_dtype dtype, zre_codec codec);

/* Open an existing store (dense or ragged, as store.zr says), writable.
 * ZR_ENOTSTORE: missing or invalid store.zr or engine files.
 * ZR_EBUSY: another writable handle has the store open, or a delete or
 * compact runs on it. Read-only handles may be open beside it. */
ZRS_API int zrs_open(zrs_store **out, const char *path);

/* zrs_create_dense / zrs_create_ragged with a dictionary: for codec
 * ZRE_CODEC_ZSTD_DICT, dict[0..dict_size) is the zstd dictionary (from
 * zrs_train_dict), written to dict.zr before anything else; for any other
 * codec dict must be NULL with dict_size 0. ZR_EINVAL for zstd_dict
 * without a dictionary or with bytes that are not a zstd dictionary. The
 * plain create functions are these with no dictionary. */
ZRS_API int zrs_create_dense_dict(zrs_store **out, const char *path,
                                  zrs_dtype dtype, const uint64_t *item_shape,
                                  size_t ndim, zre_codec codec,
                                  const void *dict, uint64_t dict_size);
ZRS_API int zrs_create_ragged_dict(zrs_store **out, const char *path,
                                   zrs_dtype dtype, zre_codec codec,
                                   const void *dict, uint64_t dict_size);

/* zrs_open with flags: ZRE_OPEN_READONLY opens a reader (any number of
 * read-only handles beside one writable handle, in any processes; ZR_EBUSY
 * only while a delete or compact runs). The reader sees the records
 * committed when it opened; zrs_refresh moves it to the latest commit.
 * store.zr must match the identity hash kept in meta.zr (ZR_ENOTSTORE
 * "store.zr ... does not match" otherwise). */
ZRS_API int zrs_open_ex(zrs_store **out, const char *path, unsigned flags);

/* ------------------------------------------------------------ identity
 *
 * A store's uuid names its records: a random (RFC 4122 version 4) 128-bit
 * value written into store.zr at create. Appends, compact and a recode
 * that copies it (zrs_set_uuid) keep it; delete replaces it. So two
 * handles with one uuid hold the same records up to the shorter length,
 * and a loader state saved against a store tells whether it still reads
 * the same data (zloader.h). Text form: 36 lowercase characters,
 * 8-4-4-4-12 hex digits (RFC 4122). */
#define ZRS_UUID_BYTES 16
#define ZRS_UUID_STR_LEN 36

/* 1 with the store's uuid in out[0..16); 0 (out untouched) for a store
 * created before uuids existed, which has none until its first delete or
 * zrs_set_uuid; ZR_EINVAL for NULL arguments. Not concurrently with a
 * zrs_delete or zrs_set_uuid on the same handle. */
ZRS_API int zrs_get_uuid(const zrs_store *s, uint8_t out[ZRS_UUID_BYTES]);

/* Give the store this uuid (writable handles only): for a copy that holds
 * the same records in the same order (a recode to another codec), so a
 * loader state carries over to it. store.zr is rewritten atomically and
 * durably; meta.zr is not touched. ZR_EUNSUPPORTED on a read-only handle
 * or for a store.zr that another tool wrote in a non-canonical form;
 * ZR_EIO when the file cannot be written (store.zr then holds the old
 * uuid, or the new one when only the directory sync failed). */
ZRS_API int zrs_set_uuid(zrs_store *s, const uint8_t uuid[ZRS_UUID_BYTES]);

/* The text form of a uuid into out[0..37) (NUL-terminated). ZR_EINVAL for
 * NULL arguments. */
ZRS_API int zrs_uuid_str(const uint8_t uuid[ZRS_UUID_BYTES], char out[ZRS_UUID_STR_LEN + 1]);
/* Parse the text form (exactly 36 characters, lowercase); ZR_EINVAL
 * naming the first bad character otherwise. */
ZRS_API int zrs_uuid_parse(const char *str, size_t len, uint8_t out[ZRS_UUID_BYTES]);

/* Sync and close. NULL: no-op. Everything is made durable and the
 * writer's lock released now, as always; the handle is the owner's no
 * more, whatever the result: the owner must not use it again. Its memory
 * goes with the last reference: at once when nobody borrows it (see
 * zrs_borrow), else at the last zrs_unborrow. Calls a borrower makes on
 * it from now on (gathers, sizes, hints, zrs_length) fail with
 * ZR_ECLOSED, detail "store '<path>' was closed while a loader or
 * concatenation read it" (accessors return 0 / NULL-like defaults);
 * calls already running when zrs_close starts finish first (zrs_close
 * waits for them), so none reads a freed engine. */
ZRS_API int zrs_close(zrs_store *s);

/* ------------------------------------------------------------- borrows
 *
 * An object that reads a store for longer than one call (a loader, a
 * concatenation) borrows it: zrs_borrow takes a reference that keeps the
 * handle's memory valid until the matching zrs_unborrow, even across the
 * owner's zrs_close (which then turns the borrower's reads into
 * ZR_ECLOSED instead of reads of freed memory). While a handle is
 * borrowed, the operations that need exclusive use, zrs_delete and
 * zrs_compact, fail with ZR_EBUSY naming the store and the number of
 * borrowers, and change nothing. Thread-safe (atomic counts), except that
 * zrs_borrow must not race with the owner's zrs_close of the same handle:
 * the caller borrows from a handle its owner keeps open for the call.
 *
 * zrs_borrow: ZR_OK, or ZR_EINVAL for NULL, or ZR_ECLOSED (detail
 * "store '<path>' is closed") after zrs_close. Each ZR_OK needs exactly
 * one zrs_unborrow; the last reference (borrow or owner) frees the
 * handle. zrs_borrowers: the borrows in force now (0 for NULL).
 * zrs_is_closed: 1 once zrs_close was called on the handle (for its
 * borrowers; NULL: 0). */
ZRS_API int zrs_borrow(zrs_store *s);
ZRS_API void zrs_unborrow(zrs_store *s);
ZRS_API int zrs_borrowers(const zrs_store *s);
ZRS_API int zrs_is_closed(const zrs_store *s);

ZRS_API zrs_kind zrs_get_kind(const zrs_store *s);
ZRS_API zrs_dtype zrs_get_dtype(const zrs_store *s);
ZRS_API zre_codec zrs_get_codec(const zrs_store *s);
ZRS_API uint64_t zrs_length(const zrs_store *s);
/* Dense: dimensions of item_shape (0 for scalars). Ragged: 0. */
ZRS_API size_t zrs_item_ndim(const zrs_store *s);
/* Dense: item_shape[0..ndim), owned by the handle. Ragged: NULL. */
ZRS_API const uint64_t *zrs_item_shape(const zrs_store *s);
/* Dense: bytes per record (itemsize * prod(item_shape)). Ragged: 0. */
ZRS_API uint64_t zrs_record_size(const zrs_store *s);
/* The store directory; owned by the handle. */
ZRS_API const char *zrs_path(const zrs_store *s);
/* The engine underneath, borrowed (do not close). */
ZRS_API zre_engine *zrs_engine(zrs_store *s);

/* 1 for a handle opened with ZRE_OPEN_READONLY. */
ZRS_API int zrs_is_readonly(const zrs_store *s);

/* Bytes of stored (encoded) record data, from the engine's write frontier
 * in O(1); see zre_chunk_bytes. 0 for NULL. */
ZRS_API uint64_t zrs_data_bytes(zrs_store *s);

/* For the child of fork() only: abandon a store handle inherited from the
 * parent, closing its file descriptors so the child no longer holds the
 * parent's store lock (see zre_forget_after_fork). Touches no thread,
 * mutex or allocator state. The handle is unusable afterwards except for
 * the accessors that read its fields (zrs_path, zrs_get_kind,
 * zrs_get_dtype, zrs_get_codec, zrs_is_readonly, zrs_length); its memory
 * is leaked in the child by design: never zrs_close it there. NULL is a
 * no-op. */
ZRS_API void zrs_forget_after_fork(zrs_store *s);

/* Read-only handle: see the records committed since it opened or last
 * refreshed (zre_refresh): zrs_length grows to the writer's committed
 * length, never past it, and never without this call. Writable handle:
 * a no-op (it sees its own appends at once). Errors as zre_refresh; the
 * view is unchanged on error. */
ZRS_API int zrs_refresh(zrs_store *s);

/* Make every committed record durable (zre_sync). */
ZRS_API int zrs_sync(zrs_store *s);

/* Delete the records at index[0..count) (negatives wrap; duplicates count
 * once) by swap-last, atomically; see zre_delete. ZR_ERANGE (nothing
 * deleted) for an index outside [-length, length); ZR_EBUSY (nothing
 * deleted), naming the store and the number of borrowers, while the handle
 * is borrowed (a loader or concatenation reads it). The store gets a new
 * uuid (zrs_get_uuid), written to store.zr before any record moves. */
ZRS_API int zrs_delete(zrs_store *s, const int64_t *index, uint64_t count);

/* Reclaim deleted bytes in place; see zre_compact. ZR_EBUSY (nothing
 * changed) while the handle is borrowed (zrs_borrow), as for zrs_delete. */
ZRS_API int zrs_compact(zrs_store *s);

/* Resolve `count` indices in place semantics: negative i means
 * length + i. Writes the absolute indices to out[0..count).
 * ZR_ERANGE names the first index outside [-length, length). */
ZRS_API int zrs_resolve_index(const zrs_store *s, const int64_t *index,
                              uint64_t count, uint64_t *out);

/* ----------------------------------------------------------------- dense */

/* Append `count` records from `data` (`nbytes` must equal
 * count * zrs_record_size, ZR_EINVAL naming expected and got otherwise).
 * *first_index receives the first new index. Nothing is committed on
 * failure. Dense stores only. */
ZRS_API int zrs_append_dense(zrs_store *s, const void *data, uint64_t nbytes,
                             uint64_t count, uint64_t *first_index);

/* Gather records at `index` (negatives wrap) into dst, record i at
 * dst + i * record_size. dst_capacity must be >= count * record_size. */
ZRS_API int zrs_gather_dense(zrs_store *s, const int64_t *index,
                             uint64_t count, void *dst, uint64_t dst_capacity);

/* ---------------------------------------------------------------- ragged */

/* Append `count` packed ragged records from one buffer: record i is
 * packed[bounds[i], bounds[i+1]) and holds [u64le ndim][u64le dims]
 * [payload]. Each record is validated before anything is written:
 * ndim <= ZRS_MAX_NDIM, payload length exactly
 * itemsize * prod(dims). ZR_EINVAL names the record otherwise. */
ZRS_API int zrs_append_ragged(zrs_store *s, const void *packed,
                              const uint64_t *bounds, uint64_t count,
                              uint64_t *first_index);

/* Readahead: hint the OS that the records at index[0..count) (negatives
 * wrap) will be gathered soon; see zre_advise. Any kind of store. Purely
 * advisory. Errors: ZR_EINVAL, ZR_ERANGE (naming the index), ZR_ENOMEM. */
ZRS_API int zrs_advise(zrs_store *s, const int64_t *index, uint64_t count);

/* Share (0..1) of the store's stored bytes in the OS page cache now; see
 * zre_resident_fraction (ZR_EUNSUPPORTED where the OS cannot tell). */
ZRS_API int zrs_resident_fraction(zrs_store *s, double *fraction);

/* Physical size in bytes (prefix + payload) of each record at index. */
ZRS_API int zrs_ragged_sizes(zrs_store *s, const int64_t *index,
                             uint64_t count, uint64_t *sizes);

/* Gather packed ragged records: record i lands at dst + bounds[i] and must
 * be exactly bounds[i+1] - bounds[i] bytes (take them from
 * zrs_ragged_sizes). Each record's prefix is validated after the read
 * (ZR_ECORRUPT naming the index otherwise). */
ZRS_API int zrs_gather_ragged(zrs_store *s, const int64_t *index,
                              uint64_t count, void *dst, uint64_t dst_capacity,
                              const uint64_t *bounds);

/* Decode one packed ragged record of `size` bytes: *ndim, dims[0..ndim)
 * (dims must hold ZRS_MAX_NDIM values) and *payload_offset, the byte
 * offset of the payload within the record. Validates against dtype. */
ZRS_API int zrs_ragged_decode(const void *record, uint64_t size,
                              zrs_dtype dtype, size_t *ndim, uint64_t *dims,
                              uint64_t *payload_offset);

/* Encode: the inverse of zrs_ragged_decode. One record of `dtype` with
 * shape dims[0..ndim) (ndim <= ZRS_MAX_NDIM; 0 for a scalar record, a dim
 * may be 0) packs as [u64le ndim][u64le dims][payload] in
 * ZRS_RAGGED_PREFIX_SIZE(ndim) + itemsize * prod(dims) bytes.
 * zrs_ragged_encoded_size gives that size in *size. zrs_ragged_encode
 * writes the record into dst (dst_capacity bytes, caller-owned; at least
 * the encoded size), the payload copied from `payload` (payload_size
 * bytes, which must be itemsize * prod(dims): the elements in C order,
 * little-endian; may be NULL when 0), and the size in *written (may be
 * NULL). Bindings pack records for zrs_append_ragged through these two.
 * ZR_EINVAL for an unknown dtype, ndim > ZRS_MAX_NDIM, NULL arguments, a
 * size that overflows 64 bits, a payload_size that does not match the
 * shape, or a dst too small (each naming the sizes). */
ZRS_API int zrs_ragged_encoded_size(zrs_dtype dtype, size_t ndim, const uint64_t *dims,
                                    uint64_t *size);
ZRS_API int zrs_ragged_encode(zrs_dtype dtype, size_t ndim, const uint64_t *dims,
                              const void *payload, uint64_t payload_size, void *dst,
                              uint64_t dst_capacity, uint64_t *written);

/* Bytes of the [ndim][dims] prefix for a record of `ndim` dims. */
#define ZRS_RAGGED_PREFIX_SIZE(ndim) (8u * (1u + (uint64_t)(ndim)))

/* --------------------------------------------------------------- slices
 *
 * A long append (or copy) that its caller cuts into committed slices, so
 * that Ctrl-C is seen between two of them: how big the next slice may be
 * to take about ZRS_SLICE_TARGET_NS, whatever the codec costs (raw moves
 * GB/s, zstd_dict's level 19 a few MB/s). The first slice
 * (last_ns == 0) is ZRS_SLICE_FIRST_BYTES; each next one moves, at the
 * speed the last one had (last_bytes in last_ns), what fits in the target,
 * at most 4 times the last one, within [ZRS_SLICE_MIN_BYTES, max_bytes]
 * (max_bytes bounds the memory a slice needs). Slices of a fixed 32 MiB took seconds under zstd_dict;
 * the Python binding and zr both use this rule. */
#define ZRS_SLICE_TARGET_NS 50000000ull
#define ZRS_SLICE_FIRST_BYTES ((uint64_t)256 << 10)
#define ZRS_SLICE_MIN_BYTES ((uint64_t)64 << 10)
ZRS_API uint64_t zrs_slice_bytes(uint64_t last_bytes, uint64_t last_ns, uint64_t max_bytes);

/* ----------------------------------------------------------- codec auto
 *
 * The rule behind codec "auto" (the bindings' create option): look at the
 * first records a store gets and pick raw unless zstd (level 3, as the
 * store would write them, frame overhead included) shrinks a sample of
 * them to at most 100 - ZRS_AUTO_MIN_SAVING_PCT percent of their size.
 * Small records that zstd cannot shrink (an int64 label: a 21-byte zstd
 * frame, 37 bytes stored with its table entry, against 24 raw) cost space
 * and time to decode for nothing. The
 * sample: up to ZRS_AUTO_SAMPLE_RECORDS records spread evenly over the
 * `count` given, stopping past ZRS_AUTO_SAMPLE_BYTES. Records as for
 * append: dense (bounds NULL) count * record_size bytes, or ragged packed
 * records with bounds[0..count]. *out gets ZRE_CODEC_RAW or
 * ZRE_CODEC_ZSTD (raw for count 0); raw_bytes and zstd_bytes (may be
 * NULL) the sample's sizes. ZR_EINVAL for NULL arguments, ZR_ENOMEM. */
#define ZRS_AUTO_MIN_SAVING_PCT 10
#define ZRS_AUTO_SAMPLE_RECORDS 256
#define ZRS_AUTO_SAMPLE_BYTES ((uint64_t)4 << 20)
ZRS_API int zrs_codec_auto(const void *data, const uint64_t *bounds, uint64_t record_size,
                           uint64_t count, zre_codec *out, uint64_t *raw_bytes,
                           uint64_t *zstd_bytes);

/* ========================================================= dictionaries */

/* Dictionary tiers: (dictionary bytes, training sample bytes). A caller
 * picks a tier, never a number. */
typedef enum zrs_dict_tier {
    ZRS_DICT_FAST = 0,     /* 32 KiB dictionary, 4 MiB sample */
    ZRS_DICT_BALANCED = 1, /* 128 KiB dictionary, 16 MiB sample (default) */
    ZRS_DICT_MAX = 2       /* 1 MiB dictionary, 64 MiB sample */
} zrs_dict_tier;

#define ZRS_DICT_FAST_DICT_BYTES 32768
#define ZRS_DICT_FAST_SAMPLE_BYTES 4194304
#define ZRS_DICT_BALANCED_DICT_BYTES 131072
#define ZRS_DICT_BALANCED_SAMPLE_BYTES 16777216
#define ZRS_DICT_MAX_DICT_BYTES 1048576
#define ZRS_DICT_MAX_SAMPLE_BYTES 67108864

/* The tier's dictionary and sample sizes in bytes; ZR_EINVAL otherwise. */
ZRS_API int zrs_dict_tier_sizes(zrs_dict_tier tier, uint64_t *dict_bytes,
                                uint64_t *sample_bytes);

/* Train a zstd dictionary with zstd's own builder (ZDICT_trainFromBuffer)
 * on `nsamples` samples stored back to back in samples[0..sum(sizes)),
 * sample i being sizes[i] bytes. Records larger than 128 KiB are split
 * into 128 KiB pieces for training. Writes at most `dict_capacity` bytes
 * to dict and their count to *dict_size. ZR_EINVAL when zstd cannot train
 * (too few or too uniform samples; the detail says why). */
ZRS_API int zrs_train_dict(const void *samples, const uint64_t *sizes,
                           uint64_t nsamples, void *dict,
                           uint64_t dict_capacity, uint64_t *dict_size);

/* The training sample: one rule for every caller (each binding and `zr`).
 *
 * Records are offered in index order (0, 1, 2, ...; gaps are allowed and
 * count as records not kept). The sample keeps the records whose index is
 * a multiple of a stride; the stride starts at 1 and doubles, dropping
 * every other kept record, whenever the kept bytes pass the tier's sample
 * bytes (zrs_dict_tier_sizes). So the sample spans the whole source
 * evenly whatever its length, holds at most the sample bytes plus one
 * record, and depends only on the records' sizes and order: a stream of
 * unknown length and a random-access source that offers only the indices
 * zrs_dict_sample_next names end with the same sample. A lone record
 * larger than the sample bytes is cut to them at training. Empty records
 * are never kept.
 *
 * Ownership: the sample copies what it keeps; the caller's buffers are
 * only read during zrs_dict_sample_offer. Not thread-safe: one thread
 * offers at a time. Free with zrs_dict_sample_free. */
typedef struct zrs_dict_sample zrs_dict_sample;

/* A new, empty sample for `tier` into *out. ZR_EINVAL for an unknown tier
 * or NULL out, ZR_ENOMEM. */
ZRS_API int zrs_dict_sample_create(zrs_dict_sample **out, zrs_dict_tier tier);

/* Offer record `index` (data[0..size)). Returns 1 if kept, 0 if not (its
 * index is not a multiple of the stride now, or it is empty), ZR_EINVAL
 * for an index not above the last one offered or NULL data with size > 0,
 * ZR_ENOMEM. */
ZRS_API int zrs_dict_sample_offer(zrs_dict_sample *s, uint64_t index,
                                  const void *data, uint64_t size);

/* The next index the sample would keep: the first multiple of the stride
 * after the last index offered (0 before any). A random-access source
 * reads only these records. UINT64_MAX for NULL. */
ZRS_API uint64_t zrs_dict_sample_next(const zrs_dict_sample *s);

/* Records and bytes kept now (NULL: 0). */
ZRS_API uint64_t zrs_dict_sample_count(const zrs_dict_sample *s);
ZRS_API uint64_t zrs_dict_sample_bytes(const zrs_dict_sample *s);

/* Offer the store's records in index order, reading only those
 * zrs_dict_sample_next names. The bytes offered are the engine's records,
 * the bytes the codec compresses: a dense record's items, a ragged
 * record's `[u64 ndim][dims][payload]` encoding. Errors of the reads
 * (ZR_EIO, ZR_ECORRUPT naming the index, ...), ZR_EINVAL, ZR_ENOMEM. */
ZRS_API int zrs_dict_sample_store(zrs_dict_sample *s, zrs_store *store);

/* Train on the sample with zrs_train_dict: writes at most
 * min(dict_capacity, the tier's dictionary bytes) to dict and the count to
 * *dict_size. Errors as zrs_train_dict (ZR_EINVAL: too little or too
 * uniform data, at least 8 records and 8 KiB). The sample stays usable. */
ZRS_API int zrs_dict_sample_train(const zrs_dict_sample *s, void *dict,
                                  uint64_t dict_capacity, uint64_t *dict_size);

/* Free a sample (NULL is fine). */
ZRS_API void zrs_dict_sample_free(zrs_dict_sample *s);

/* The sample rule applied to records given back to back (record i is
 * sizes[i] bytes of samples, in index order), then zrs_dict_sample_train:
 * what the Lua and Go bindings and `zr ingest` call. Errors as
 * zrs_dict_sample_create / _offer / _train. */
ZRS_API int zrs_train_dict_tier(const void *samples, const uint64_t *sizes,
                                uint64_t nsamples, zrs_dict_tier tier,
                                void *dict, uint64_t dict_capacity,
                                uint64_t *dict_size);


/* ============================================ concatenations (many shards)
 *
 * A dataset too big for one writer is written as many stores ("shards"),
 * often in parallel by many processes. A concatenation reads shards of one
 * identity (the same kind and dtype, and for dense stores the same
 * item_shape; codecs may differ) as one index space: shard k holds the
 * global indices [offset(k), offset(k + 1)), the prefix sums of the shard
 * lengths taken when the concatenation is made (records appended to a
 * shard later are not seen). Index i is located by a binary search over
 * those sums. Gathers place every record straight into its final position
 * in dst, sharded over the CPUs as one store's gather is (zre_gather_multi),
 * whatever the number of shards. Negative indices wrap against the total
 * length. Concurrent gathers on one handle are safe, as on a store.
 * Errors: ZR_EINVAL naming both shards and what differs for an identity
 * mismatch; ZR_ERANGE for an index outside [-length, length); otherwise as
 * the store calls. */

typedef struct zrs_concat zrs_concat;

/* Concatenate open stores[0..nstores) in order (1 <= nstores <= 2^32 - 1).
 * Each store is borrowed (zrs_borrow) until the concatenation's memory
 * goes, and zrs_concat_close does not close them; a store closed by its
 * owner before then makes the concatenation's reads of it ZR_ECLOSED
 * (naming the store). ZR_ECLOSED at create for a closed store. */
ZRS_API int zrs_concat_create(zrs_concat **out, zrs_store *const *stores, size_t nstores);

/* Upload the local store at `path` to `url` (http(s):// PUT or
 * s3://bucket/prefix), so that zrs_open_ex(url, ZRE_OPEN_READONLY) opens
 * it: the store is opened read-only (beside a live writer: the committed
 * state when opened), its engine files, store.zr, and meta.zr last are
 * sent (zre_push). `progress` as zre_push. Errors as zrs_open_ex for the
 * source, then zre_push's (ZR_EEXIST: the URL already holds a store). */
ZRS_API int zrs_push(const char *path, const char *url,
                     void (*progress)(uint64_t done, uint64_t total, void *arg), void *arg);
/* zrs_push of a store already open (read-only or writable; borrowed):
 * zre_interrupt on its engine stops the upload between files (ZR_EINTR;
 * meta.zr is then not sent, so the URL holds no readable store). */
ZRS_API int zrs_push_store(zrs_store *s, const char *url,
                           void (*progress)(uint64_t done, uint64_t total, void *arg), void *arg);

/* Open the store directories paths[0..npaths) (zrs_open_ex with `flags`,
 * e.g. ZRE_OPEN_READONLY) and concatenate them. A path may be a URL
 * (read-only); one URL holding a shard set's manifest (url/shards.zr, see
 * zrs_push_shards) opens every shard it lists. The handle owns the stores
 * and zrs_concat_close closes them. Nothing stays open on failure; the detail
 * names the failing path. */
ZRS_API int zrs_concat_open(zrs_concat **out, const char *const *paths, size_t npaths,
                            unsigned flags);

/* Upload the local shards paths[0..npaths) to `url` as a shard set: shard
 * k to url/<its folder name> (zrs_push, meta.zr last), then the manifest
 * url/shards.zr last of all, so zrs_concat_open(&c, &url, 1,
 * ZRE_OPEN_READONLY) opens the whole set only once it is complete.
 * Errors as zrs_push, naming the shard. */
ZRS_API int zrs_push_shards(const char *const *paths, size_t npaths, const char *url,
                            void (*progress)(uint64_t done, uint64_t total, void *arg), void *arg);

/* The shard URLs a shard set at `url` lists in its manifest (url/shards.zr):
 * *urls (count strings; free with zrs_free_list). ZR_OK with *count = 0
 * when there is none (404: a single store, or nothing); ZR_ENOTSTORE when
 * it is malformed; network errors as zre_url_get. */
ZRS_API int zrs_shard_urls(const char *url, char ***urls, size_t *count);
ZRS_API void zrs_free_list(char **list, size_t count);

/* Close the handle (closing its stores if zrs_concat_open opened them:
 * durable and unlocked at once); returns the first close error. NULL:
 * no-op. Like a store, a concatenation can be borrowed (a loader reading
 * it does): its memory and its own borrows of the stores go with the last
 * zrs_concat_unborrow, and until then a borrower's reads fail with
 * ZR_ECLOSED ("the concatenation of '<first shard>' ... was closed while a
 * loader read it"). The owner must not use the handle after this call. */
ZRS_API int zrs_concat_close(zrs_concat *c);

/* Borrows of a concatenation, as zrs_borrow / zrs_unborrow /
 * zrs_borrowers for a store (ZR_ECLOSED from zrs_concat_borrow after
 * zrs_concat_close). zrs_concat_is_closed: 1 once the concatenation or
 * any of its stores was closed. */
ZRS_API int zrs_concat_borrow(zrs_concat *c);
ZRS_API void zrs_concat_unborrow(zrs_concat *c);
ZRS_API int zrs_concat_borrowers(const zrs_concat *c);
ZRS_API int zrs_concat_is_closed(const zrs_concat *c);

/* Total records (the sum of the shard lengths). */
ZRS_API uint64_t zrs_concat_length(const zrs_concat *c);
/* Number of shards. */
ZRS_API size_t zrs_concat_count(const zrs_concat *c);
/* Shard k (borrowed), NULL for k >= count. */
ZRS_API zrs_store *zrs_concat_shard(zrs_concat *c, size_t k);
/* First global index of shard k (k == count gives the length). */
ZRS_API uint64_t zrs_concat_offset(const zrs_concat *c, size_t k);
/* The shared identity, as the zrs_ accessors of a store. */
ZRS_API zrs_kind zrs_concat_kind(const zrs_concat *c);
ZRS_API zrs_dtype zrs_concat_dtype(const zrs_concat *c);
ZRS_API size_t zrs_concat_item_ndim(const zrs_concat *c);
ZRS_API const uint64_t *zrs_concat_item_shape(const zrs_concat *c);
ZRS_API uint64_t zrs_concat_record_size(const zrs_concat *c);
/* Stored bytes of all shards (zrs_data_bytes summed). */
ZRS_API uint64_t zrs_concat_data_bytes(zrs_concat *c);
/* zrs_resident_fraction over all shards, weighted by their stored bytes. */
ZRS_API int zrs_concat_resident_fraction(zrs_concat *c, double *fraction);

/* Map global indices to (shard[i], local[i]) (negatives wrap). */
ZRS_API int zrs_concat_locate(const zrs_concat *c, const int64_t *index, uint64_t count,
                              uint32_t *shard, uint64_t *local);

/* ZR_OK if a and b are sharded alike (the same number of shards, shard k
 * of equal length in both), which keeps concatenated streams read side by
 * side index-aligned; ZR_EINVAL naming the first shard that differs. */
ZRS_API int zrs_concat_check_aligned(const zrs_concat *a, const zrs_concat *b);

/* zrs_gather_dense / zrs_ragged_sizes / zrs_gather_ragged / zrs_advise
 * over the concatenation, with the same placement, checks and errors. */
ZRS_API int zrs_concat_gather_dense(zrs_concat *c, const int64_t *index, uint64_t count,
                                    void *dst, uint64_t dst_capacity);
ZRS_API int zrs_concat_ragged_sizes(zrs_concat *c, const int64_t *index, uint64_t count,
                                    uint64_t *sizes);
ZRS_API int zrs_concat_gather_ragged(zrs_concat *c, const int64_t *index, uint64_t count,
                                     void *dst, uint64_t dst_capacity, const uint64_t *bounds);
ZRS_API int zrs_concat_advise(zrs_concat *c, const int64_t *index, uint64_t count);

#ifdef __cplusplus
}
#endif
#endif /* ZRSTORE_H */
