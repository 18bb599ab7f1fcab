/*
 * train.c - zstd dictionary training for zstd_dict stores, with zstd's own
 * builder (ZDICT_trainFromBuffer), and the named size tiers.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <zdict.h>

#include "zrs_internal.h"

/* Records above this are cut into pieces for training: the builder looks
 * for content shared between samples, and it wants several samples. */
#define TRAIN_PIECE ((uint64_t)128 << 10)

int zrs_dict_tier_sizes(zrs_dict_tier tier, uint64_t *dict_bytes, uint64_t *sample_bytes)
{
    uint64_t d, smp;
    switch (tier) {
    case ZRS_DICT_FAST: d = ZRS_DICT_FAST_DICT_BYTES; smp = ZRS_DICT_FAST_SAMPLE_BYTES; break;
    case ZRS_DICT_BALANCED:
        d = ZRS_DICT_BALANCED_DICT_BYTES;
        smp = ZRS_DICT_BALANCED_SAMPLE_BYTES;
        break;
    case ZRS_DICT_MAX: d = ZRS_DICT_MAX_DICT_BYTES; smp = ZRS_DICT_MAX_SAMPLE_BYTES; break;
    default:
        return zr_set_error(ZR_EINVAL, "dict tier: unknown tier %d, expected 0 (fast), 1 (balanced) "
                            "or 2 (max)", (int)tier);
    }
    if (dict_bytes)
        *dict_bytes = d;
    if (sample_bytes)
        *sample_bytes = smp;
    return ZR_OK;
}

int zrs_train_dict(const void *samples, const uint64_t *sizes, uint64_t nsamples, void *dict,
                   uint64_t dict_capacity, uint64_t *dict_size)
{
    if ((nsamples > 0 && (samples == NULL || sizes == NULL)) || dict == NULL || dict_size == NULL)
        return zr_set_error(ZR_EINVAL, "train_dict: NULL argument");
    if (dict_capacity < 256)
        return zr_set_error(ZR_EINVAL, "train_dict: dictionary capacity %" PRIu64 " bytes is too "
                            "small (at least 256)", dict_capacity);
    uint64_t total = 0, pieces = 0;
    for (uint64_t i = 0; i < nsamples; i++) {
        total += sizes[i];
        pieces += (sizes[i] + TRAIN_PIECE - 1) / TRAIN_PIECE;
    }
    if (pieces > UINT32_MAX || total > (uint64_t)SIZE_MAX)
        return zr_set_error(ZR_EINVAL, "train_dict: %" PRIu64 " samples (%" PRIu64 " bytes) are "
                            "too many; pass a sample", nsamples, total);
    if (pieces < 8 || total < 8 * 1024)
        return zr_set_error(ZR_EINVAL, "train_dict: not enough data to train a dictionary: %" PRIu64
                            " samples, %" PRIu64 " bytes (need at least 8 samples and 8 KiB)",
                            nsamples, total);
    size_t *psz = malloc((size_t)pieces * sizeof *psz);
    if (psz == NULL)
        return zr_set_error(ZR_ENOMEM, "train_dict: out of memory for %" PRIu64 " sample sizes",
                            pieces);
    uint64_t k = 0;
    for (uint64_t i = 0; i < nsamples; i++)
        for (uint64_t left = sizes[i]; left > 0;) {
            uint64_t take = left < TRAIN_PIECE ? left : TRAIN_PIECE;
            psz[k++] = (size_t)take;
            left -= take;
        }
    size_t got = ZDICT_trainFromBuffer(dict, (size_t)dict_capacity, samples, psz, (unsigned)k);
    free(psz);
    if (ZDICT_isError(got))
        return zr_set_error(ZR_EINVAL, "train_dict: zstd could not train a %" PRIu64 "-byte "
                            "dictionary on %" PRIu64 " samples (%" PRIu64 " bytes): %s; use more "
                            "or more varied samples, or a smaller tier", dict_capacity, nsamples,
                            total, ZDICT_getErrorName(got));
    *dict_size = got;
    return ZR_OK;
}
