/*
 * zsampler.h - libzsampler, index generation for an endless, step-based
 * training loop. Depends on libzrerror only (its error detail).
 *
 * Every mode is a pure function of (seed, step): zsm_indices(cfg, step)
 * needs none of the steps before it, so resuming a run is a seek.
 *
 *   ZSM_SEQUENTIAL  the window [step*G, step*G + G) modulo length: the index
 *                   space as a circular queue (G = batch_size * world_size).
 *   ZSM_IID         uniform with replacement, unbiased: Lemire's
 *                   multiply-with-rejection over a counter-based generator
 *                   keyed by (seed, step, position).
 *   ZSM_CYCLIC      without replacement: cycle c is a fresh keyed Feistel
 *                   permutation of 0..length (over the next power of two,
 *                   cycle-walking back into range); every batch has exactly
 *                   G indices; each cycle's remainder length mod G is dropped
 *                   (a different remainder each cycle). Needs length >= G.
 *
 * Rank sharding: with world_size ranks, rank r takes the slice
 * [r*batch_size, (r+1)*batch_size) of the global batch of G indices for the
 * step, so the ranks together behave as one sampler of batch G.
 *
 * Errors: functions return 0 or ZSM_EINVAL (an alias of ZR_EINVAL in
 * zrerror.h). A failure sets the thread's detail, zr_last_error(), naming
 * the function, the bad parameter and its value ("zsm_validate: rank 4 is
 * not below world_size 4"). Nothing prints or allocates; the detail is
 * the only state.
 */
#ifndef ZSAMPLER_H
#define ZSAMPLER_H

#include <stddef.h>
#include <stdint.h>

#include "zrerror.h"

#ifdef __cplusplus
extern "C" {
#endif

#define ZSAMPLER_VERSION_MAJOR 0
#define ZSAMPLER_VERSION_MINOR 1
#define ZSAMPLER_VERSION_PATCH 0
#define ZSAMPLER_VERSION_NUMBER \
    (ZSAMPLER_VERSION_MAJOR * 10000 + ZSAMPLER_VERSION_MINOR * 100 + ZSAMPLER_VERSION_PATCH)

#if defined(_WIN32) && defined(ZSAMPLER_BUILDING)
#define ZSM_API __declspec(dllexport)
#elif defined(_WIN32) && !defined(ZR_STATIC)
#define ZSM_API __declspec(dllimport)
#elif defined(__GNUC__)
#define ZSM_API __attribute__((visibility("default")))
#else
#define ZSM_API
#endif

ZSM_API unsigned zsampler_version(void);
ZSM_API const char *zsampler_version_string(void);

/* The kernel the iid mode draws with on this CPU: "avx512" (x86-64 with
 * AVX-512F + DQ that the OS has enabled, 8 indices at a time, for index
 * spaces below 2^32; batches under 8 and the last batch_size % 8 indices
 * use the scalar loop) or "scalar" (other CPUs and architectures; also
 * used for larger index spaces). Both give the same indices; only the
 * speed differs. The environment variable ZSAMPLER_SIMD=scalar (exactly;
 * other values are ignored) forces the scalar loop. Decided once per
 * process, at the first call of this or of an iid draw that could use the
 * kernel. Static string, never NULL. */
ZSM_API const char *zsm_simd(void);

/* The statuses this library returns: aliases of zrerror.h's. */
#define ZSM_OK ZR_OK
#define ZSM_EINVAL ZR_EINVAL

typedef enum zsm_mode {
    ZSM_SEQUENTIAL = 0,
    ZSM_IID = 1,
    ZSM_CYCLIC = 2
} zsm_mode;

/* "sequential", "iid", "cyclic"; NULL for an unknown value. */
ZSM_API const char *zsm_mode_name(zsm_mode mode);
/* Parse a mode name (case-insensitive); ZSM_EINVAL otherwise. */
ZSM_API int zsm_mode_parse(const char *name, zsm_mode *out);

/* A sampler is only its configuration: plain data, copy freely. */
typedef struct zsm_config {
    uint64_t length;      /* size of the index space, >= 1 */
    uint64_t batch_size;  /* indices per rank per step, >= 1 */
    uint64_t seed;
    zsm_mode mode;
    uint32_t rank;        /* 0 <= rank < world_size */
    uint32_t world_size;  /* >= 1 */
} zsm_config;

/* Check a configuration: ZSM_EINVAL for length 0, batch_size 0,
 * world_size 0, rank >= world_size, an unknown mode,
 * batch_size * world_size beyond 2^64 - 1, or (cyclic)
 * batch_size * world_size > length. */
ZSM_API int zsm_validate(const zsm_config *cfg);

/* Write this rank's batch_size indices for `step` to out[0..batch_size),
 * each in [0, length). O(batch_size) time, independent of step. */
ZSM_API int zsm_indices(const zsm_config *cfg, uint64_t step, uint64_t *out);

/* --------------------------------------------------- length bucketing
 *
 * Batches of records of similar length (padded token batches waste
 * little), still a pure function of (seed, step): the cyclic mode's order
 * (same permutation per cycle, same validation: G <= length) is cut into
 * windows of `window` global batches; each window's window * G records
 * are sorted by (length, index) and cut into batches of G, and the
 * window's steps take those batches in an order keyed by (seed, cycle,
 * window). So every cycle still draws each record at most once, and a
 * step costs O(window * G log(window * G)). Rank r takes its slice of the
 * global batch as usual. lengths[i] is record i's length (any unit).
 * scratch: zsm_bucket_scratch_bytes(cfg, window) bytes, caller-owned. */
ZSM_API size_t zsm_bucket_scratch_bytes(const zsm_config *cfg, uint64_t window);
ZSM_API int zsm_bucket_indices(const zsm_config *cfg, const uint32_t *lengths,
                               uint64_t window, uint64_t step, uint64_t *out,
                               void *scratch, size_t scratch_bytes);

/* ------------------------------------------------------ finite passes
 *
 * One pass (an epoch, as for evaluation) over the index space: every index
 * exactly once, then the pass is over. Positions 0..length of the pass map
 * to indices in index order, or (shuffle) through a keyed permutation of
 * (seed, epoch). Step s covers the global batch of positions
 * [s*G, s*G + G), G = batch_size * world_size, and rank r takes its slice
 * [s*G + r*B, s*G + r*B + B) of it, as in the endless modes. The last
 * global batch holds R = length mod G positions (when R > 0): it is split
 * as evenly as possible, rank r taking floor((r+1)R/W) - floor(rR/W) of
 * them in rank order, so batch sizes there differ by at most one and a
 * rank whose share is 0 has one step fewer. With drop_last that last
 * global batch is dropped instead: every rank has length / G full steps.
 * No index is ever repeated to even the ranks out: each index lands on
 * exactly one rank (or nowhere, with drop_last). */
typedef struct zsm_pass {
    uint64_t length;      /* size of the index space, >= 1 */
    uint64_t batch_size;  /* indices per rank per step, >= 1 */
    uint64_t seed;
    uint64_t epoch;       /* with seed, keys the shuffle */
    uint32_t rank;        /* 0 <= rank < world_size */
    uint32_t world_size;  /* >= 1 */
    int shuffle;          /* 0: index order; 1: permutation of (seed, epoch) */
    int drop_last;        /* 1: drop the incomplete last global batch */
} zsm_pass;

/* ZSM_EINVAL for length 0, batch_size 0, world_size 0, rank >= world_size
 * or batch_size * world_size beyond 2^64 - 1. */
ZSM_API int zsm_pass_validate(const zsm_pass *p);

/* This rank's number of steps in the pass (0 for an invalid pass). */
ZSM_API uint64_t zsm_pass_steps(const zsm_pass *p);

/* This rank's indices for `step` (< zsm_pass_steps) into
 * out[0..batch_size), their number (1..batch_size) in *count.
 * ZSM_EINVAL for an invalid pass or a step past the end. */
ZSM_API int zsm_pass_indices(const zsm_pass *p, uint64_t step, uint64_t *out,
                             uint64_t *count);

/* ====================================================== weighted mixtures
 *
 * Several index spaces ("sources", e.g. datasets of different lengths)
 * sampled by weight. Position p of the global batch of a step (p < G =
 * batch_size * world_size) draws its source k with probability
 * weights[k] / sum(weights), from a counter keyed by (seed, step, p), and
 * its index inside source k from the source's own sampler at the same step
 * and position: zsm_indices over {lengths[k], batch 1, a seed derived from
 * seed and k, modes[k], rank p, world G}. Pure functions of (seed, step,
 * position) like every mode: resume is a seek, and rank r's batch is
 * positions [r * batch_size, (r + 1) * batch_size) of the global batch.
 * Inside a mixture a cyclic source never repeats a record within one step
 * and every record is equally likely; its permutation is thinned by the
 * draws (over one of its cycles a source of weight share w contributes
 * about w of that cycle's records). */

#define ZSM_MIXTURE_MAX_SOURCES 65536u

/* Plain data; the arrays are borrowed for each call. */
typedef struct zsm_mixture {
    const double *weights;   /* [nsources], each > 0 and finite (relative) */
    const uint64_t *lengths; /* [nsources], each >= 1 */
    const zsm_mode *modes;   /* [nsources] */
    uint32_t nsources;       /* 1..ZSM_MIXTURE_MAX_SOURCES */
    uint64_t seed;
    uint64_t batch_size;     /* positions per rank per step, >= 1 */
    uint32_t rank;           /* < world_size */
    uint32_t world_size;     /* >= 1 */
} zsm_mixture;

/* ZSM_EINVAL for no sources, a NULL array, a weight that is not > 0 and
 * finite, a source of length 0 or unknown mode, a cyclic source shorter
 * than G, rank >= world_size, or G = batch_size * world_size above
 * 2^32 - 1. */
ZSM_API int zsm_mixture_validate(const zsm_mixture *m);

/* This rank's batch for `step`: source[j] and index[j] (index[j] <
 * lengths[source[j]]) for j < batch_size. `scratch`: batch_size uint64
 * values of working memory, or NULL (the same result, computed position
 * by position: slower). */
ZSM_API int zsm_mixture_indices(const zsm_mixture *m, uint64_t step, uint32_t *source,
                                uint64_t *index, uint64_t *scratch);

/* Positions [first, first + count) of the global batch of `step` (any
 * rank's; first + count <= G), into source[0..count) and index[0..count).
 * m->rank is ignored. `scratch` as above (count values); it speeds up
 * whole windows (count dividing G, first a multiple of count) of mixtures
 * of up to 16 sources. */
ZSM_API int zsm_mixture_positions(const zsm_mixture *m, uint64_t step, uint64_t first,
                                  uint64_t count, uint32_t *source, uint64_t *index,
                                  uint64_t *scratch);

/* ========================================================= augmentation
 *
 * Per-position coin flips, for random augmentations (a horizontal flip
 * with probability p, say) that must be as reproducible as the indices:
 * out[i] = 1 with probability p, else 0, for global batch positions
 * first + i of `step` (rank r's batch is positions [r * batch_size,
 * (r + 1) * batch_size)). A pure function of (seed, step, position): the
 * same whatever the worker count, resumable, and independent of the
 * records drawn, so index-aligned streams (an image and its mask) that
 * use the same p get the same decisions. The draw is a 53-bit uniform u
 * from a counter keyed by (seed, step, position); out[i] = u < p * 2^53,
 * so p = 0 never and p = 1 always flips. ZSM_EINVAL for a NULL out with
 * count > 0 or p outside [0, 1] (NaN included). */
ZSM_API int zsm_bernoulli(uint64_t seed, uint64_t step, uint64_t first, uint64_t count, double p,
                          uint8_t *out);

/* ====================================================== sequence packing
 *
 * Documents of varying length (token records) placed into rows of exactly
 * row_length = L elements, for language-model training: several documents
 * share a row, each stays a segment of its own, and what is left of a row
 * is padding. The plan says, for each row, which pieces of which documents
 * it holds; a loader copies those elements (zloader.h, pack options).
 *
 * Epochs. Epoch e lays out every document once. Its order is zsm_pass's
 * over the documents: index order, or (shuffle) the permutation keyed by
 * (seed, e). That order is cut into windows of `window` documents; each
 * window is packed on its own, so a row never mixes two windows and a row
 * is computed from its window alone, O(window log window), whatever the
 * epoch or the rows before it.
 *
 * Overlong documents (more than L elements), by `overlong`:
 *   ZSM_PACK_SPLIT     pieces of L elements from its start, each a row of its
 *                      own, and the rest (fewer than L) packed like any
 *                      other document: every element is placed, in order.
 *   ZSM_PACK_TRUNCATE  its first L elements only, as one full row.
 *   ZSM_PACK_DROP      left out.
 * A document of 0 elements places nothing.
 *
 * Policies: how a window's documents (what fits in less than a row: a
 * document, or the rest of a split one) fill rows:
 *   ZSM_PACK_FIRST_FIT  in the window's order, each into the first row
 *                       (oldest first) with room, else a new row (the
 *                       online first-fit of Grain's FirstFitPackIterDataset).
 *   ZSM_PACK_BEST_FIT   best-fit decreasing: the window's documents sorted
 *                       by length (longest first; ties in window order),
 *                       each into the row it leaves least room in, else a new
 *                       row (as NeMo's and TRL's packers sort first).
 *   ZSM_PACK_CONCAT     no fitting: the epoch's documents concatenated in
 *                       order and cut every L elements, so a document is
 *                       split at row ends (as LitData's TokensLoader and
 *                       Megatron do). Only the epoch's last row has padding.
 *                       With SPLIT a long document simply runs on across rows.
 * A window's rows are its fitted rows in the order they were opened, then
 * the full rows of its split or truncated documents in document order;
 * with shuffle they are taken in an order keyed by (seed, epoch, window)
 * instead (the fitted rows of a decreasing fit start with the longest
 * documents). Concat rows are never reordered.
 *
 * Within a row, pieces keep the order in which they were placed. A piece
 * is (doc, offset, length): elements [offset, offset + length) of document
 * `doc`. Each is one segment of its row: a document appears in a row at
 * most once, and a row never holds two pieces that continue each other.
 *
 * Rows of an epoch: first_fit and best_fit, plan[nwindows] (it depends on
 * the order, so on the epoch); concat, ceil(T / L) for every epoch, T the
 * elements placed (every document's length, by the overlong rule).
 *
 * Everything is a pure function of (the lengths, the options, epoch, row):
 * nothing allocates or keeps state; the caller passes scratch memory. */

typedef enum zsm_pack_policy {
    ZSM_PACK_FIRST_FIT = 0,
    ZSM_PACK_BEST_FIT = 1,
    ZSM_PACK_CONCAT = 2
} zsm_pack_policy;

typedef enum zsm_pack_overlong {
    ZSM_PACK_SPLIT = 0,
    ZSM_PACK_TRUNCATE = 1,
    ZSM_PACK_DROP = 2
} zsm_pack_overlong;

/* "first_fit", "best_fit", "concat"; NULL for an unknown value. */
ZSM_API const char *zsm_pack_policy_name(zsm_pack_policy policy);
/* Parse a policy name (case-insensitive); ZSM_EINVAL otherwise. */
ZSM_API int zsm_pack_policy_parse(const char *name, zsm_pack_policy *out);
/* "split", "truncate", "drop"; NULL for an unknown value. */
ZSM_API const char *zsm_pack_overlong_name(zsm_pack_overlong overlong);
/* Parse an overlong rule (case-insensitive); ZSM_EINVAL otherwise. */
ZSM_API int zsm_pack_overlong_parse(const char *name, zsm_pack_overlong *out);

/* Largest row_length and window (the scratch grows with both). */
#define ZSM_PACK_MAX_LENGTH (1u << 22)
#define ZSM_PACK_MAX_WINDOW (1u << 20)
/* The window a loader uses when none is given: 1024 documents (on the
 * benchmarks' corpus of paragraphs at L = 1024, best_fit pads 12% of the
 * rows with a window of 64 documents and 0.8% with 1024; a window's cost
 * grows as window log window). */
#define ZSM_PACK_WINDOW_DEFAULT 1024u

/* Plain data; `lengths` is borrowed for each call. */
typedef struct zsm_pack {
    const uint32_t *lengths;   /* [ndocs]: elements (tokens) of each document */
    uint64_t ndocs;            /* >= 1, < 2^63 */
    uint64_t row_length;       /* L: elements per row, 1..ZSM_PACK_MAX_LENGTH */
    uint64_t window;           /* documents per window, 1..ZSM_PACK_MAX_WINDOW */
    zsm_pack_policy policy;
    zsm_pack_overlong overlong;
    uint64_t seed;
    int shuffle;               /* 0: index order; 1: keyed by (seed, epoch) */
} zsm_pack;

/* Elements [offset, offset + length) of document `doc`, one segment. */
typedef struct zsm_piece {
    uint64_t doc;
    uint64_t offset;
    uint64_t length;
} zsm_piece;

/* ZSM_EINVAL for a NULL pack or lengths, ndocs 0 or >= 2^63, row_length or
 * window out of range, or an unknown policy or overlong rule. */
ZSM_API int zsm_pack_validate(const zsm_pack *p);

/* Windows per epoch: ceil(ndocs / window) (0 for an invalid pack). An
 * epoch plan holds this many + 1 values. */
ZSM_API uint64_t zsm_pack_windows(const zsm_pack *p);

/* Scratch bytes that zsm_pack_epoch and zsm_pack_rows need (0 for an
 * invalid pack): about 50 bytes per window document plus 4 bytes per row
 * element. Caller-owned; its content between calls does not matter. */
ZSM_API size_t zsm_pack_scratch_bytes(const zsm_pack *p);

/* Most pieces a row can hold: min(L, window) for first_fit and best_fit,
 * min(L, ndocs) for concat (0 for an invalid pack). */
ZSM_API uint64_t zsm_pack_max_pieces(const zsm_pack *p);

/* The plan of `epoch`: plan[k] (k <= zsm_pack_windows) is the epoch's first
 * row of window k (first_fit, best_fit) or its first element (concat), so
 * plan[nwindows] is the epoch's rows or its elements T; *rows = the
 * epoch's rows (may be 0: nothing to place). O(ndocs log window) time. */
ZSM_API int zsm_pack_epoch(const zsm_pack *p, uint64_t epoch, uint64_t *plan, uint64_t *rows,
                           void *scratch, size_t scratch_bytes);

/* The pieces of rows [first, first + count) of `epoch`, given its plan:
 * row i's pieces are pieces[row_start[i] .. row_start[i + 1]) (row_start
 * holds count + 1 values, row_start[0] = 0). `capacity` pieces of room;
 * count * zsm_pack_max_pieces is always enough. ZSM_EINVAL for an invalid
 * pack, NULL arrays, rows past the epoch's end, too little capacity or
 * scratch. Cost: one window packing per window the rows touch. */
ZSM_API int zsm_pack_rows(const zsm_pack *p, uint64_t epoch, const uint64_t *plan,
                          uint64_t first, uint64_t count, zsm_piece *pieces, uint64_t capacity,
                          uint64_t *row_start, void *scratch, size_t scratch_bytes);

#ifdef __cplusplus
}
#endif
#endif /* ZSAMPLER_H */
