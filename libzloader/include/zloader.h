/*
 * zloader.h - libzloader, the endless prefetching loader of loaderx-in-C.
 *
 * A loader reads N index-aligned streams (typed stores of equal length, or
 * any zld_stream that can gather by index)
 * step after step without end. For step k it draws the indices from the
 * sampler (libzsampler: a pure function of seed and step), gathers every
 * stream at those same indices, and hands out batch k. Worker threads
 * prepare up to `prefetch` batches ahead; batches come out strictly in step
 * order, and batch k is the same whatever the number of workers.
 *
 * Per stream, a batch holds:
 *   dense   one buffer of batch_size * record_size bytes, record i at
 *           i * record_size: a (batch_size, *item_shape) array.
 *   ragged  one buffer of packed ragged records (see zrstore.h) plus
 *           batch_size + 1 byte bounds.
 *
 * Ownership: zld_next hands the caller a zld_batch; the caller owns it and
 * frees it with zld_batch_free. A stream's buffer may be detached from the
 * batch (zld_batch_detach) so that, for example, a numpy array can own it
 * without a copy; detached buffers are released with zld_free.
 *
 * Buffer recycling: stream buffers come from a pool owned jointly by the
 * loader and by every outstanding buffer. zld_free (and zld_batch_free)
 * returns a buffer to that pool, which keeps up to prefetch + 2 free
 * buffers per stream for later batches and frees the rest, so steady-state
 * batches reuse memory instead of paying a fresh allocation and its page
 * faults. A recycled buffer's previous content is overwritten; never touch
 * a buffer after freeing it. Buffers are 64-byte aligned. A batch or a
 * detached buffer stays valid after zld_close, for as long as the caller
 * holds it; the pool is freed when the loader is closed and the last
 * buffer has been returned. zld_free accepts only buffers from
 * zld_batch_detach (or NULL), never memory from malloc.
 *
 * Errors: 0 or a negative zr_status (zrerror.h) with zr_last_error().
 * An error in a worker (a failed gather) is returned by the consumer's next
 * zld_next as ZR_ESTATE, with a detail naming the step and the cause; the
 * loader then stops.
 *
 * Lifetime: a loader borrows every store, concatenation and mixture its
 * streams read (zrs_borrow, zrs_concat_borrow; streams from
 * zld_stream_from_store, zld_stream_from_concat, zld_mixture_stream and
 * zld_create) from create to zld_close. Closing one of them under a live
 * loader is safe: it stays valid in memory until zld_close, the workers'
 * reads of it fail, and zld_next returns ZR_ECLOSED with the detail
 * "stream <k>: store '<path>' was closed while this loader read it" (no
 * batch prepared before is handed out); zld_is_closed reports it. While
 * a loader reads a store, zrs_delete and zrs_compact on it are ZR_EBUSY.
 * Any other zld_stream's `user` is the caller's: it must outlive the
 * loader, unless the stream has lifetime hooks (see zld_stream).
 *
 * Fork: worker threads do not survive fork(). Never use (or close) a
 * parent's loader in a child; create one there from zld_get_state.
 */
#ifndef ZLOADER_H
#define ZLOADER_H

#include <zrstore.h>
#include <zsampler.h>

#ifdef __cplusplus
extern "C" {
#endif

#define ZLOADER_VERSION_MAJOR 0
#define ZLOADER_VERSION_MINOR 2
#define ZLOADER_VERSION_PATCH 0
#define ZLOADER_VERSION_NUMBER \
    (ZLOADER_VERSION_MAJOR * 10000 + ZLOADER_VERSION_MINOR * 100 + ZLOADER_VERSION_PATCH)

#if defined(_WIN32) && defined(ZLOADER_BUILDING)
#define ZLD_API __declspec(dllexport)
#elif defined(_WIN32) && !defined(ZR_STATIC)
#define ZLD_API __declspec(dllimport)
#elif defined(__GNUC__)
#define ZLD_API __attribute__((visibility("default")))
#else
#define ZLD_API
#endif

ZLD_API unsigned zloader_version(void);
ZLD_API const char *zloader_version_string(void);

/* A random flip of a dense stream's records along their last axis (a
 * horizontal flip of (C, H, W) or (H, W) images; a reversal of a token
 * block), as torchvision's RandomHorizontalFlip(p) does per sample, done
 * natively in the loader's workers, without the GIL and without a copy.
 * A record is rows of `width` elements of `elem_size` bytes (the dtype's
 * itemsize): record_size must be a multiple of width * elem_size, and each
 * row's elements are reversed in place. Record i of a batch is flipped
 * when zsm_bernoulli(seed, step, rank * batch_size + i, p) says 1, so the
 * decisions are a pure function of (seed, step, position) (the same for any
 * worker count, on resume, and for every stream given the same p: an image
 * and its segmentation mask flip together). zld_flip_mask returns them.
 * ZR_EINVAL at create for a ragged or unknown stream, a stream named
 * twice, width 0, elem_size not 1, 2, 4 or 8, a record_size that is not
 * whole rows, or p outside [0, 1]. */
typedef struct zld_flip {
    size_t stream;      /* index into the loader's streams */
    uint64_t width;     /* elements along the last axis, >= 1 */
    uint32_t elem_size; /* bytes per element: 1, 2, 4 or 8 */
    double p;           /* probability a record is flipped, 0..1 */
} zld_flip;

/* What a stream's records are, as a flip needs to know: the kind, the
 * dtype and (dense) the item shape, ndim values of shape (ndim <=
 * ZRS_MAX_NDIM). zld_items_from_store fills one from an open store,
 * zld_items_from_concat from a concatenation; a binding whose stream is
 * something else fills the fields itself. */
typedef struct zld_items {
    zrs_kind kind;
    zrs_dtype dtype;
    size_t ndim;
    uint64_t shape[ZRS_MAX_NDIM];
} zld_items;

/* ZR_EINVAL for NULL arguments. */
ZLD_API int zld_items_from_store(zrs_store *store, zld_items *out);
ZLD_API int zld_items_from_concat(const zrs_concat *concat, zld_items *out);

/* The flip of probability p on stream `stream` of a loader, whose records
 * `items` describes, into *out: width = the item shape's last dimension,
 * elem_size = the dtype's itemsize. `label` names the stream in errors
 * (e.g. "stream 'image'"); NULL names it by position ("stream 2").
 * ZR_EINVAL (detail "flip: <label> ..." naming the rule) for a ragged
 * stream, scalar records (no axis to flip), an itemsize other than 1, 2,
 * 4 or 8, or p outside [0, 1] (NaN included). */
ZLD_API int zld_flip_resolve(const zld_items *items, size_t stream, const char *label, double p,
                             zld_flip *out);

/* Flip resolution by stream name: the stream called `name` among
 * names[0..nstreams) (items[s] describes stream s), resolved as
 * zld_flip_resolve does with the label "stream '<name>'". ZR_EINVAL for
 * an unknown name (the detail lists the streams' names) or the reasons
 * above. Every binding resolves its users' {name: p} flips here. */
ZLD_API int zld_flip_by_name(const char *const *names, const zld_items *items, size_t nstreams,
                             const char *name, double p, zld_flip *out);

/* Loader options. Start from ZLD_OPTIONS_INIT and change what you need.
 * A caller of an older version is still accepted: its struct ends where
 * that version's fields end, and every later field takes its default
 * (version 1: default readahead; versions 1 and 2: endless steps; before
 * 6: no resume, streams labelled by their names). */
typedef struct zld_options {
    int version;          /* ZLD_OPTIONS_VERSION */
    uint64_t batch_size;  /* records per batch (per rank), >= 1 */
    zsm_mode mode;        /* sampler mode */
    uint64_t seed;        /* sampler seed */
    uint64_t start_step;  /* first step handed out */
    uint32_t rank;        /* this process's rank, < world_size */
    uint32_t world_size;  /* ranks sharing each global batch, >= 1 */
    unsigned num_workers; /* gather threads; 0 = CPU count; ZLD_WORKERS_NONE = none:
                           * zld_next gathers each batch on the calling thread
                           * (torch's num_workers=0), prefetch unused */
    unsigned prefetch;    /* batches prepared ahead; 0 = 2 * num_workers */
    /* (version 2) Readahead distance in steps: when a worker claims step
     * s it hints the OS about the records of step s + readahead (streams
     * with an `advise` callback only), so they are in the page cache when
     * their step is gathered; the first claims also hint every step from
     * start_step up to there, each step once. 0 = no hints; N = always
     * hint N steps ahead.
     * ZLD_READAHEAD_AUTO (the default) is adaptive, decided at create and
     * again every 64 steps: `prefetch` steps when less than 95% of the
     * hinted streams' stored bytes are in the OS page cache
     * (zrs_resident_fraction, sampled), else 0, since hints on page-cached
     * data only cost time; so a store that training reads into the cache
     * stops being hinted, and one that memory pressure evicts is hinted
     * again. Where the OS cannot report residency (Windows), hints go on
     * when those bytes exceed half of the machine's physical memory. A
     * stream with its own advise callback cannot be sized: hinted.
     * zld_readahead gives the value in force; zld_get_state keeps
     * ZLD_READAHEAD_AUTO, so a resumed loader adapts too.
     * Hints never change what a batch holds. */
    unsigned readahead;
    /* (version 3) One finite pass instead of endless steps: with `pass`
     * set, `mode` is ignored and the steps are those of zsm_pass (see
     * zsampler.h): every record exactly once, in index order or shuffled
     * by (seed, epoch), the last batch partial unless drop_last. After the
     * last step zld_next returns ZLD_END. start_step may be any step up to
     * the pass's number of steps (resuming a pass). */
    int pass;
    int shuffle;
    int drop_last;
    uint64_t epoch;
    /* (version 4) Length-bucketed batches (zsm_bucket_indices): with
     * bucket_lengths set (one length per record, bucket_count entries,
     * which must equal the streams' length; copied, so the caller's array
     * may go at once), `mode` must be ZSM_CYCLIC and each step's batch
     * holds records of similar length, windows of bucket_window global
     * batches sorted by length (0 = 64). Endless only (not with `pass`).
     * zld_get_state reports the loader's own copy (valid until zld_close). */
    const uint32_t *bucket_lengths;
    uint64_t bucket_count;
    uint64_t bucket_window;
    /* (version 5) Random flips, applied by the worker threads right after
     * a dense stream's gather (see zld_flip; nflips entries, copied at
     * create, so the caller's array may go at once). NULL / 0: none.
     * zld_get_state reports the loader's own copy (valid until zld_close). */
    const zld_flip *flips;
    size_t nflips;
    /* (version 6) The loader state (zld_state_json): `names` labels the
     * streams in it (nstreams strings, copied at create; NULL = each
     * stream's name, a store's path). With `resume` (a state text,
     * borrowed for the call) the loader continues that state: start_step
     * becomes the state's step (a start_step other than 0 must equal
     * it), and everything the state records must match this loader's
     * options and streams, or create fails with ZR_EINVAL naming every
     * difference (see zld_state_json). resume_flags: ZLD_RESUME_*. */
    const char *const *names;
    const char *resume;
    unsigned resume_flags;
    /* (version 6) A finite pass (`pass`) with the same number of steps,
     * and full batches, on every rank, so that a collective per batch
     * (an all-reduce of a metric) cannot wait forever on a rank that ran
     * out: each rank gets ceil(length / G) steps (length / G with
     * drop_last), every batch batch_size rows; the rows past a rank's own
     * records repeat the batch's first record (or, in a step the rank has
     * none of, the pass's first record), and zld_batch_valid says how many
     * leading rows are real. As accelerate's even_batches, but masked
     * instead of counted twice. */
    int even_batches;
    /* (version 7) Pack mode, for language-model training: with `pack` set,
     * every stream is a ragged stream of documents (token records, and any
     * streams aligned with them element by element, such as loss masks),
     * and each step's batch is batch_size rows of exactly pack_length
     * elements: documents packed into rows by zsm_pack (zsampler.h) with
     * pack_policy, pack_window documents per window (0 =
     * ZSM_PACK_WINDOW_DEFAULT) and pack_overlong for documents longer than
     * a row. Each batch carries the packed streams, segment ids, positions,
     * segment lengths and cu_seqlens (see "pack mode" below). Endless
     * steps need mode ZSM_CYCLIC (each epoch's documents in a fresh order
     * keyed by (seed, epoch)); a finite pass (`pass`) packs one epoch, in
     * index order or shuffled. Not with bucketing, flips or even_batches. */
    int pack;
    zsm_pack_policy pack_policy;
    uint64_t pack_length;
    uint64_t pack_window;
    zsm_pack_overlong pack_overlong;
} zld_options;

/* Continue a state on streams that grew since it was saved (same store
 * uuids, more records): the cycle in flight finishes on the old length,
 * then the sampler draws from the new one (see zld_state_json). Without
 * it a grown stream is a difference like any other. */
#define ZLD_RESUME_ALLOW_GROWN 1u

/* num_workers: no worker threads, the consumer builds each batch. */
#define ZLD_WORKERS_NONE (~0u)

/* The largest values zld_create accepts (ZR_EINVAL naming the option and
 * its limit beyond them): num_workers up to ZLD_MAX_WORKERS threads (or
 * ZLD_WORKERS_NONE), prefetch up to ZLD_MAX_PREFETCH batches, readahead
 * up to ZLD_MAX_READAHEAD steps (or ZLD_READAHEAD_AUTO). */
#define ZLD_MAX_WORKERS 4096u
#define ZLD_MAX_PREFETCH 65536u
#define ZLD_MAX_READAHEAD 65536u

#define ZLD_OPTIONS_VERSION 7
#define ZLD_READAHEAD_AUTO (~0u)
#define ZLD_BUCKET_WINDOW_DEFAULT 64u
#define ZLD_OPTIONS_INIT \
    { ZLD_OPTIONS_VERSION, 256, ZSM_CYCLIC, 0, 0, 0, 1, 0, 0, ZLD_READAHEAD_AUTO, 0, 0, 0, 0, NULL, 0, 0, \
      NULL, 0, NULL, NULL, 0, 0, 0, ZSM_PACK_BEST_FIT, 0, 0, ZSM_PACK_SPLIT }

/* Fill *opts with the defaults of options `version` (what ZLD_OPTIONS_INIT
 * gives, for a binding or a caller that cannot use a positional
 * initializer): version set, every field of that version at its default,
 * nothing past that version's fields written (so a caller compiled against
 * an older header, whose struct ends there, passes its own version).
 * ZR_EINVAL for a NULL opts or a version outside 1..ZLD_OPTIONS_VERSION. */
ZLD_API int zld_options_init(zld_options *opts, int version);

/* ------------------------------------------------------------- streams */

/* What a stream's records look like in a batch (see the file comment). */
typedef enum zld_stream_kind { ZLD_STREAM_DENSE = 0, ZLD_STREAM_RAGGED = 1 } zld_stream_kind;

/* A stream the loader can read: anything that can gather records by
 * index. Plain data with callbacks; the loader copies the struct at
 * create, and `user` is borrowed (it must outlive the loader). Callbacks
 * run on the loader's worker threads, concurrently, without any loader
 * lock held; they return 0 or a negative zr_status and should set the
 * detail with zr_set_error (the loader adds the step and stream name).
 * Indices handed to them are always < length. */
typedef struct zld_stream {
    void *user;               /* passed back to every callback */
    const char *name;         /* for error messages (copied); NULL = "" */
    uint64_t length;          /* records, >= 1; equal across streams */
    zld_stream_kind kind;
    uint64_t record_size;     /* dense: bytes per record (>= 1); ragged: 0 */
    /* Write records index[0..count) into dst (dst_capacity bytes).
     * Dense (bounds NULL): record i at dst + i * record_size.
     * Ragged: record i at dst + bounds[i], exactly bounds[i+1] - bounds[i]
     * bytes, with bounds (count + 1 offsets) built from `sizes`. */
    int (*gather)(void *user, const uint64_t *index, uint64_t count,
                  void *dst, uint64_t dst_capacity, const uint64_t *bounds);
    /* Ragged only (NULL for dense): sizes[i] = bytes of record index[i]. */
    int (*sizes)(void *user, const uint64_t *index, uint64_t count, uint64_t *sizes);
    /* Optional (NULL = none): a hint that these records will be read soon;
     * its result is ignored. */
    int (*advise)(void *user, const uint64_t *index, uint64_t count);
    /* Optional lifetime hooks (NULL = none: `user` is the caller's, and
     * must outlive the loader). zld_create_streams calls hold(user) once
     * before anything is read: 0, or a negative zr_status with its detail
     * (ZR_ECLOSED for a source already closed), which fails the create
     * naming the stream. release(user) is called once for every hold that
     * succeeded: at zld_close, after the workers stopped, or when the
     * create fails later. closed(user, msg, cap): 1, with what was closed
     * written to msg (cap bytes, NUL-terminated), once the owner closed
     * what `user` reads, else 0; thread-safe, called by zld_next and
     * zld_is_closed, which then stop with ZR_ECLOSED naming the stream.
     * The streams of zld_stream_from_store, zld_stream_from_concat and
     * zld_mixture_stream set all three (the loader borrows them). Added to
     * the struct in libzloader 0.2: fill a stream with a designated or
     * zero initializer, never positionally. */
    int (*hold)(void *user);
    void (*release)(void *user);
    int (*closed)(void *user, char *msg, size_t cap);
} zld_stream;

/* Describe an open store as a stream (gather, sizes and advise through
 * libzrstore/libzrengine; name = the store's path). A loader created over
 * the stream borrows the store (see the file comment); the struct itself
 * holds no reference. ZR_EINVAL for NULL arguments. */
ZLD_API int zld_stream_from_store(zld_stream *out, zrs_store *store);

/* One store zld_write_stores makes from a stream: its final path (must not
 * exist), dtype and, for a dense stream, item shape (ndim 0: a store of
 * scalars; record_size must be itemsize * prod(item_shape)). */
typedef struct zld_store_spec {
    const char *path;
    zrs_dtype dtype;
    size_t ndim;
    const uint64_t *item_shape;
} zld_store_spec;

/* zld_write_stores' codec that picks raw or zstd per store from its first
 * slice of records (zrs_codec_auto). */
#define ZLD_CODEC_AUTO (-1)

/* Write every record of streams[0..n) (equal lengths, 0 allowed) into a
 * new store each, specs[k] describing store k: dense or ragged as the
 * stream is, codec ZRE_CODEC_RAW, ZRE_CODEC_ZSTD or ZLD_CODEC_AUTO. The
 * records are gathered in slices (at most 1024 records or about 64 MiB)
 * through the streams' callbacks on the calling thread and appended as
 * they come, so memory stays bounded. Every store is filled at
 * "<path>.partial" (a leftover of an earlier crashed run there is removed
 * first; missing parent directories are created), synced and closed, and
 * only when all of them are complete is each renamed to its path. So a
 * failure or a crash never leaves a store at a final path that lacks
 * records: on failure every .partial is removed (a crash may leave them,
 * never a final path); only when publishing itself fails (a rename, or
 * the directory's sync after one) can the stores renamed before it stay,
 * each complete. ZR_EINVAL for no streams, a NULL
 * or repeated path, unequal lengths, a record size the dtype and shape do
 * not give, an unknown codec; ZR_EEXIST naming a path that exists; a
 * stream's own error with "write stores: PATH (stream NAME)" in front;
 * the stores' errors; ZR_EIO naming the directory or rename the OS
 * refused. */
ZLD_API int zld_write_stores(const zld_stream *streams, const zld_store_spec *specs, size_t n,
                             int codec);

typedef struct zld_loader zld_loader;
typedef struct zld_batch zld_batch;

/* Start a loader over the stores streams[0..nstreams) (borrowed until
 * zld_close, see the file comment). ZR_EINVAL: no streams, unequal lengths
 * (naming both), an empty store, or options the sampler refuses;
 * ZR_ECLOSED naming the stream for a closed store. Workers start at once. */
ZLD_API int zld_create(zld_loader **out, zrs_store *const *streams,
                       size_t nstreams, const zld_options *options);

/* The same over generic streams (see zld_stream; the array is copied,
 * each `user` is borrowed). ZR_EINVAL also for a stream without a gather
 * callback, a ragged stream without sizes, or a dense record_size of 0. */
ZLD_API int zld_create_streams(zld_loader **out, const zld_stream *streams,
                               size_t nstreams, const zld_options *options);

/* Block until the next step's batch is ready and hand it to the caller
 * (*out owned by the caller; free with zld_batch_free). ZR_ESTATE if a
 * worker failed (detail names the step); ZR_ECLOSED after zld_stop, or
 * once a store, concatenation or mixture it reads was closed (detail
 * "zld_next: stream <k>: store '<path>' was closed while this loader read
 * it"; every later call too).
 * A finite pass (options.pass) past its last step: ZLD_END (a positive
 * value), *out NULL. */
#define ZLD_END 2
ZLD_API int zld_next(zld_loader *l, zld_batch **out);

/* zld_next waiting at most timeout_ns: ZLD_TIMEOUT (a positive value,
 * *out NULL, nothing taken: the same step comes with the next call) when
 * the batch is not ready in time. Lets a caller wait in slices and attend
 * to other things (e.g. Ctrl-C) between them. Other results as zld_next. */
#define ZLD_TIMEOUT 1
ZLD_API int zld_next_wait(zld_loader *l, zld_batch **out, uint64_t timeout_ns);

/* The step the next zld_next call will return. */
ZLD_API uint64_t zld_next_step(const zld_loader *l);

/* The readahead in force now (steps hinted ahead; 0 = none): the fixed
 * value asked for, or with ZLD_READAHEAD_AUTO the latest decision. 0 for
 * a NULL loader. Thread-safe. */
ZLD_API unsigned zld_readahead(zld_loader *l);

/* Which records of `step`'s batch the flip of probability p flips on
 * this loader (its seed, rank and batch_size): mask[i] for i < count,
 * count <= batch_size. For callers that must flip what goes with an image
 * (boxes, keypoints). ZR_EINVAL for NULL arguments, count > batch_size or
 * p outside [0, 1]. */
ZLD_API int zld_flip_mask(const zld_loader *l, uint64_t step, double p, uint8_t *mask,
                          uint64_t count);

/* A finite pass's number of steps (UINT64_MAX for an endless loader). */
ZLD_API uint64_t zld_steps(const zld_loader *l);

/* The options that resume this loader exactly: a loader created from
 * *out over the same streams hands out, as its first batch, the batch this
 * loader's next zld_next would return (start_step = zld_next_step; the
 * other fields as resolved at create, readahead included: ZLD_READAHEAD_AUTO
 * comes back as the distance it chose). It checks nothing about the data:
 * zld_state_json does. ZR_EINVAL for NULL arguments. */
ZLD_API int zld_get_state(zld_loader *l, zld_options *out);

/* The loader state: what decides its batches, as one JSON object (UTF-8
 * text, *out malloc'd by the library: free it with zld_state_free). Keys:
 *   step, seed, mode ("sequential", "iid", "cyclic" or "bucket"),
 *   batch_size, rank, world_size; window (mode "bucket"); flip (an
 *   object: stream label -> p); fingerprint: {version (2), streams: [
 *   {name (the label), length, and the records' identity: "uuid" of a
 *   store (null for one from before uuids; zrs_get_uuid), or "shards" and
 *   "shards_id" of a concatenation, or "mixture": {seed, sources: [
 *   {weight, mode, length, uuid or shards}]}}], pass: {shuffle,
 *   drop_last, epoch} (a finite pass), bucket: {count, lengths (a digest
 *   of the lengths)}, schedule (after a resume on grown data)}.
 * step is the step the next zld_next returns. Give the text as
 * options.resume (with the same options and streams) to continue exactly
 * there; a state whose streams, sizes, identities or options differ is
 * refused, naming what changed. The rule on grown data
 * (ZLD_RESUME_ALLOW_GROWN): steps continue from the state's step; cyclic
 * and bucket modes finish the cycle in flight over the old length, then
 * start a fresh cycle (the next cycle number) over the new length; iid
 * draws from the new length at once; sequential finishes its pass over the
 * old records, then starts again at record 0 over all of them; a finite
 * pass keeps its old length. A mixture does not continue on grown sources.
 * Thread-safe. ZR_EINVAL for NULL arguments, ZR_ENOMEM. */
ZLD_API int zld_state_json(zld_loader *l, char **out);
ZLD_API void zld_state_free(char *text);

/* What a resume did not check, or did besides (e.g. "the state has no
 * fingerprint (saved by an older version) ..."): "" when nothing; owned by
 * the loader, valid until zld_close. A binding shows it as a warning. */
ZLD_API const char *zld_resume_note(const zld_loader *l);

/* 1 if a worker failed (a gather, sizes or transform error), with the
 * failing step in *step (may be NULL); 0 otherwise. The consumer gets
 * ZR_ESTATE from zld_next once it reaches that step. */
ZLD_API int zld_failed(zld_loader *l, uint64_t *step);

/* 1 once the loader cannot hand out another batch because it was stopped
 * (zld_stop) or because a store, concatenation or mixture it reads was
 * closed (zld_next then says which); 0 otherwise (1 for NULL).
 * Thread-safe. */
ZLD_API int zld_is_closed(zld_loader *l);

/* Stop the workers and wake every thread blocked in zld_next (they return
 * ZR_ECLOSED), without freeing the loader: later zld_next calls return
 * ZR_ECLOSED. Idempotent; never blocks on a full queue. Must not be called
 * from a stream callback. */
ZLD_API void zld_stop(zld_loader *l);

/* Stop the workers, free the loader and any undelivered batches. Never
 * blocks on a full queue. NULL is a no-op. */
ZLD_API void zld_close(zld_loader *l);

/* -------------------------------------------------------------- batches */

ZLD_API uint64_t zld_batch_step(const zld_batch *b);
/* Records in the batch: batch_size (a finite pass's last batch may hold
 * fewer). */
ZLD_API uint64_t zld_batch_count(const zld_batch *b);
/* Leading rows of the batch that are real records: zld_batch_count,
 * except in an even_batches pass (see zld_options), whose padding rows
 * follow them. */
ZLD_API uint64_t zld_batch_valid(const zld_batch *b);
/* The indices gathered, zld_batch_count values owned by the batch. */
ZLD_API const uint64_t *zld_batch_indices(const zld_batch *b);
/* Stream s's bytes (NULL once detached) and their size in *nbytes. */
ZLD_API void *zld_batch_data(zld_batch *b, size_t stream, uint64_t *nbytes);
/* Ragged stream s: count + 1 byte offsets into its data, owned by
 * the batch. Dense stream: NULL. */
ZLD_API const uint64_t *zld_batch_bounds(const zld_batch *b, size_t stream);
/* Take ownership of stream s's buffer: returns it (free with zld_free,
 * also after zld_close) and leaves the batch without it. NULL if already
 * detached. */
ZLD_API void *zld_batch_detach(zld_batch *b, size_t stream, uint64_t *nbytes);
/* Free a batch (NULL: no-op); its remaining buffers return to the pool. */
ZLD_API void zld_batch_free(zld_batch *b);
/* Release a detached buffer (NULL: no-op): kept by the loader's pool for
 * reuse while the loader is open and the pool has room, freed otherwise. */
ZLD_API void zld_free(void *buffer);

/* ------------------------------------------------------------ pack mode
 *
 * A batch of a loader in pack mode (zld_options.pack) holds `rows` =
 * zld_batch_count rows (batch_size; fewer in a finite pass's last step)
 * of L = pack_length elements, in nstreams + ZLD_PACK_PARTS parts:
 *   part s < nstreams  stream s packed: rows x L items back to back, an
 *                      item being what a record holds per element of its
 *                      first axis (zld_pack_item_shape; one token for a
 *                      1-d token record), so [rows, L, *item] of the
 *                      stream's dtype; padding is zero bytes.
 *   nstreams + ZLD_PACK_SEGMENT_IDS  int32 [rows, L]: 1, 2, ... for the
 *                      segments of a row in order, 0 for padding.
 *   nstreams + ZLD_PACK_POSITIONS    int32 [rows, L]: each element's
 *                      position in its segment, from 0; 0 for padding.
 *   nstreams + ZLD_PACK_SEQ_LENS     int32 [rows, S]: the lengths of a
 *                      row's segments, then 0s; S = info.max_segments.
 *   nstreams + ZLD_PACK_CU_SEQLENS   int32 [segments + 1]: 0, then the
 *                      running sum of every segment's length, row after
 *                      row: the cu_seqlens that flash-attention's varlen
 *                      functions and PyTorch's varlen attention take, for
 *                      the batch's non-padding elements in row-major order
 *                      (tokens[segment_ids > 0]), with max_seqlen =
 *                      info.max_seqlen.
 * A segment is one document, or one piece of a split document; segments
 * never cross rows, and attention restricted to equal segment ids never
 * crosses documents. zld_batch_indices gives info.segments values: each
 * segment's document (record index), row by row. zld_batch_bounds is NULL
 * for every part; parts are read (zld_batch_data), detached and freed like
 * stream buffers. Every value is a pure function of (the streams, the
 * options, step): the same for any number of workers and on resume. */
#define ZLD_PACK_SEGMENT_IDS 0
#define ZLD_PACK_POSITIONS 1
#define ZLD_PACK_SEQ_LENS 2
#define ZLD_PACK_CU_SEQLENS 3
#define ZLD_PACK_PARTS 4

typedef struct zld_pack_info {
    uint64_t rows;          /* rows of this batch */
    uint64_t length;        /* L: elements per row */
    uint64_t segments;      /* segments in all rows */
    uint64_t max_segments;  /* S: the most segments in one row (>= 1) */
    uint64_t max_seqlen;    /* the longest segment */
    uint64_t tokens;        /* elements that are not padding (sum of seq_lens) */
} zld_pack_info;

/* The layout of a pack-mode batch. ZR_EINVAL for NULL arguments or a
 * batch of a loader not in pack mode. */
ZLD_API int zld_batch_pack_info(const zld_batch *b, zld_pack_info *out);

/* Stream s's item shape in pack mode: its records' dims after the first,
 * *ndim of them (0 for 1-d token records) into dims (ZRS_MAX_NDIM
 * values). ZR_EINVAL for NULL arguments, a stream out of range or a
 * loader not in pack mode. */
ZLD_API int zld_pack_item_shape(const zld_loader *l, size_t stream, uint64_t *dims, size_t *ndim);

/* ------------------------------------------------------ ragged helpers */

/* Pad (or cut) `count` ragged rows into one dense (count, length) block of
 * elements of `elem_size` bytes (an element is everything after a record's
 * first axis, e.g. one token, or one (3,) coordinate row). Row i has
 * lengths[i] elements at rows[i] (borrowed, need not be aligned); dst
 * (count * length * elem_size bytes, caller-owned) gets its first
 * min(lengths[i], length) elements, then copies of the elem_size bytes at
 * pad_value up to `length`. ZR_EINVAL for NULL arguments (rows may be
 * NULL only when count is 0), elem_size 0, or a size beyond SIZE_MAX. */
ZLD_API int zld_pad(const void *const *rows, const uint64_t *lengths, uint64_t count,
                    size_t elem_size, uint64_t length, const void *pad_value, void *dst);

/* ============================================ many stores: shards, mixtures
 *
 * Concatenations (zrs_concat, zrstore.h) and weighted mixtures of several
 * datasets, as loader streams. */

/* Describe a concatenation of shards as a stream (gather, sizes, advise
 * through zrs_concat; name = shard 0's path). The concatenation is
 * borrowed. Several concatenated streams in one loader stay index-aligned
 * only if they are sharded alike: check with zrs_concat_check_aligned.
 * Readahead sizing (ZLD_READAHEAD_AUTO) counts the bytes of every shard. */
ZLD_API int zld_stream_from_concat(zld_stream *out, zrs_concat *concat);

/* A weighted mixture of `nsources` datasets, each with the same
 * `nstreams` named streams (same kinds and identities across sources):
 * concats[k * nstreams + s] is stream s of source k (borrowed; a single
 * store is a concatenation of one). Within a source the streams must be
 * sharded alike (zrs_concat_check_aligned). Each batch position draws its
 * source by weights[k] (relative, > 0) and its index inside the source by
 * modes[k], as zsm_mixture (zsampler.h) says, keyed by `seed`.
 *
 * zld_mixture_stream(m, s, &st) gives stream s as a zld_stream over a
 * virtual index space of zld_mixture_length(m) records. Run a loader over
 * the nstreams mixture streams with mode ZSM_SEQUENTIAL and the same
 * batch_size and world_size as given here (any rank, start_step, workers);
 * its batch for (step, rank) is then the mixture's, a pure function of
 * (seed, step, rank) (it repeats after zld_mixture_length / (batch_size *
 * world_size) >= 2^31 steps). The batch's indices (zld_batch_indices) are
 * virtual: zld_mixture_locate turns them into (source, index inside the
 * source). Records are gathered straight into the batch buffers.
 *
 * Errors: ZR_EINVAL naming the source or stream for unaligned streams, an
 * identity that differs between sources, an empty source, a weight that is
 * not finite and > 0, an unknown mode, a cyclic source shorter than
 * batch_size * world_size, or batch_size * world_size above 2^32 - 1.
 * The mixture borrows its source concatenations (zrs_concat_borrow) and is
 * borrowed by every loader reading its streams: zld_mixture_free (NULL:
 * no-op; the owner must not use the handle after it) frees it once no
 * loader reads it, else the last zld_close does; a loader over a freed
 * mixture, or over a mixture whose source was closed, gets ZR_ECLOSED. */
typedef struct zld_mixture zld_mixture;
ZLD_API int zld_mixture_create(zld_mixture **out, zrs_concat *const *concats, size_t nsources,
                               size_t nstreams, const double *weights, const zsm_mode *modes,
                               uint64_t seed, uint64_t batch_size, uint32_t world_size);
ZLD_API int zld_mixture_stream(zld_mixture *m, size_t stream, zld_stream *out);
ZLD_API uint64_t zld_mixture_length(const zld_mixture *m);
/* source[i], index[i] of virtual index virt[i] (ZR_ERANGE past the length). */
ZLD_API int zld_mixture_locate(const zld_mixture *m, const uint64_t *virt, uint64_t count,
                               uint32_t *source, uint64_t *index);
ZLD_API void zld_mixture_free(zld_mixture *m);

#ifdef __cplusplus
}
#endif
#endif /* ZLOADER_H */
