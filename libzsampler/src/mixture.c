/*
 * mixture.c - weighted mixtures of several index spaces ("sources").
 *
 * Position p of the global batch of step s (p < G = batch_size *
 * world_size) takes its source from a uniform 64-bit draw keyed by
 * (seed, s, p), compared with the cumulative normalised weights; then its
 * index inside that source from the source's own sampler, at the same step
 * and position: zsm_indices over {length_k, batch 1, seed_k, mode_k,
 * rank p, world G}. Both are the sampler's own counter-based functions
 * (the draw is its iid mode over [0, 2^64 - 1)), so a mixture is as pure a
 * function of (seed, step, rank) as one sampler, and rank r's slice of a
 * step is positions [r * batch_size, (r + 1) * batch_size) of the same
 * global batch.
 *
 * What a source's mode means inside a mixture: iid stays iid; a cyclic
 * source never repeats a record within a step, and every record is equally
 * likely, but its permutation is thinned by the draws (a source of weight
 * w uses about w of the positions of each of its own batches); sequential
 * positions advance as the source's window does, with the same thinning.
 */
#include <inttypes.h>
#include <math.h>
#include <stddef.h>

#include "zsampler.h"
#include "zrerror_sys.h"

/* Per-source seeds are the mixture seed plus (k + 1) times this odd
 * constant (the golden ratio), the source draws use the seed itself; the
 * sampler hashes every seed before use. */
#define SOURCE_SEED_STEP UINT64_C(0x9E3779B97F4A7C15)

/* Mixtures of up to this many sources compute whole windows per source. */
#define WINDOW_MAX_SOURCES 16u

int zsm_mixture_validate(const zsm_mixture *m)
{
#define MIX_FAIL(...) zr_set_error(ZSM_EINVAL, "zsm_mixture_validate: " __VA_ARGS__)
    if (m == NULL) return MIX_FAIL("mixture is NULL");
    if (m->nsources == 0 || m->nsources > ZSM_MIXTURE_MAX_SOURCES)
        return MIX_FAIL("nsources %" PRIu32 " is not in 1..%u", m->nsources, ZSM_MIXTURE_MAX_SOURCES);
    if (m->weights == NULL || m->lengths == NULL || m->modes == NULL)
        return MIX_FAIL("%s is NULL", m->weights == NULL ? "weights"
                                      : m->lengths == NULL ? "lengths" : "modes");
    if (m->batch_size == 0) return MIX_FAIL("batch_size is 0 (need >= 1)");
    if (m->world_size == 0) return MIX_FAIL("world_size is 0 (need >= 1)");
    if (m->rank >= m->world_size)
        return MIX_FAIL("rank %" PRIu32 " is not below world_size %" PRIu32, m->rank, m->world_size);
    if (m->batch_size > (uint64_t)UINT32_MAX / m->world_size) /* G must fit 32 bits */
        return MIX_FAIL("batch_size %" PRIu64 " * world_size %" PRIu32 " exceeds 2^32 - 1",
                        m->batch_size, m->world_size);
    const uint64_t g = m->batch_size * m->world_size;
    double total = 0.0;
    for (uint32_t k = 0; k < m->nsources; k++) {
        double w = m->weights[k];
        if (!(w > 0.0) || !isfinite(w))
            return MIX_FAIL("weights[%" PRIu32 "] is %g (need > 0 and finite)", k, w);
        total += w;
        if (m->lengths[k] == 0)
            return MIX_FAIL("lengths[%" PRIu32 "] is 0 (need >= 1)", k);
        if (zsm_mode_name(m->modes[k]) == NULL)
            return MIX_FAIL("modes[%" PRIu32 "] is %d, not a sampling mode", k, (int)m->modes[k]);
        if (m->modes[k] == ZSM_CYCLIC && m->lengths[k] < g)
            return MIX_FAIL("source %" PRIu32 " is cyclic with length %" PRIu64
                            " < batch_size * world_size %" PRIu64, k, m->lengths[k], g);
    }
    if (!isfinite(total)) return MIX_FAIL("the sum of the weights is not finite");
    return ZSM_OK;
#undef MIX_FAIL
}

/* The source whose cumulative weight interval holds the draw u. The sums
 * run in the same order on every call, so the result is reproducible. */
static uint32_t pick(const zsm_mixture *m, double total, uint64_t u)
{
    /* 53 bits of the draw as a double in [0, 1), scaled to the total. */
    double x = (double)(u >> 11) * (1.0 / 9007199254740992.0) * total;
    double cum = 0.0;
    for (uint32_t k = 0; k + 1 < m->nsources; k++) {
        cum += m->weights[k];
        if (x < cum)
            return k;
    }
    return m->nsources - 1;
}

int zsm_mixture_positions(const zsm_mixture *m, uint64_t step, uint64_t first, uint64_t count,
                          uint32_t *source, uint64_t *index, uint64_t *scratch)
{
    if (zsm_mixture_validate(m) != ZSM_OK)
        return ZSM_EINVAL;
    const uint64_t g = m->batch_size * m->world_size;
    if (first > g || count > g - first)
        return zr_set_error(ZSM_EINVAL, "zsm_mixture_positions: positions %" PRIu64 "..%" PRIu64
                            " are past the global batch of %" PRIu64, first, first + count, g);
    if (count > 0 && (source == NULL || index == NULL))
        return zr_set_error(ZSM_EINVAL, "zsm_mixture_positions: %s is NULL",
                            source == NULL ? "source" : "index");
    if (count == 0)
        return ZSM_OK;
    double total = 0.0;
    for (uint32_t k = 0; k < m->nsources; k++)
        total += m->weights[k];
    if (scratch != NULL && g % count == 0 && first % count == 0 &&
        m->nsources <= WINDOW_MAX_SOURCES) {
        /* Whole windows: positions [first, first + count) are "rank"
         * first / count of a sampler whose world is g / count, so each
         * source's indices for the window come from one zsm_indices call
         * (the same values as position by position, far cheaper). */
        const uint32_t r = (uint32_t)(first / count), w = (uint32_t)(g / count);
        zsm_config draw = {UINT64_MAX, count, m->seed, ZSM_IID, r, w};
        (void)zsm_indices(&draw, step, index); /* the draws, for now */
        uint64_t seen = 0; /* bit k: source k appears */
        for (uint64_t j = 0; j < count; j++) {
            source[j] = pick(m, total, index[j]);
            seen |= UINT64_C(1) << source[j];
        }
        for (uint32_t k = 0; k < m->nsources; k++) {
            if (!(seen >> k & 1))
                continue;
            zsm_config own = {m->lengths[k], count, m->seed + (uint64_t)(k + 1) * SOURCE_SEED_STEP,
                              m->modes[k], r, w};
            (void)zsm_indices(&own, step, scratch);
            for (uint64_t j = 0; j < count; j++)
                if (source[j] == k)
                    index[j] = scratch[j];
        }
        return ZSM_OK;
    }
    zsm_config draw = {UINT64_MAX, 1, m->seed, ZSM_IID, 0, (uint32_t)g};
    zsm_config own = {0, 1, 0, ZSM_IID, 0, (uint32_t)g};
    for (uint64_t j = 0; j < count; j++) {
        const uint32_t p = (uint32_t)(first + j);
        uint64_t u = 0;
        draw.rank = p;
        (void)zsm_indices(&draw, step, &u); /* valid: checked above */
        const uint32_t k = pick(m, total, u);
        own.length = m->lengths[k];
        own.seed = m->seed + (uint64_t)(k + 1) * SOURCE_SEED_STEP;
        own.mode = m->modes[k];
        own.rank = p;
        (void)zsm_indices(&own, step, &index[j]);
        source[j] = k;
    }
    return ZSM_OK;
}

int zsm_mixture_indices(const zsm_mixture *m, uint64_t step, uint32_t *source, uint64_t *index,
                        uint64_t *scratch)
{
    if (zsm_mixture_validate(m) != ZSM_OK)
        return ZSM_EINVAL;
    return zsm_mixture_positions(m, step, m->batch_size * m->rank, m->batch_size, source, index,
                                 scratch);
}
