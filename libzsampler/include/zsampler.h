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

#ifdef __cplusplus
}
#endif
#endif /* ZSAMPLER_H */
