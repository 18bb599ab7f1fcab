/*
 * zsampler.h - libzsampler, index generation for an endless, step-based
 * training loop. Depends on nothing.
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
 * Errors: functions return 0 or ZSM_EINVAL (-1, the same value as
 * ZR_EINVAL in zrengine.h). Nothing prints, allocates or keeps state.
 */
#ifndef ZSAMPLER_H
#define ZSAMPLER_H

#include <stddef.h>
#include <stdint.h>

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

#define ZSM_OK 0
#define ZSM_EINVAL (-1)

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

#ifdef __cplusplus
}
#endif
#endif /* ZSAMPLER_H */
