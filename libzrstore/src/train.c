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

/* ------------------------------------------------ the training sample */

struct zrs_dict_sample {
    zrs_dict_tier tier;
    uint64_t budget;     /* the tier's sample bytes */
    uint64_t stride;     /* kept indices are multiples of it */
    uint64_t next;       /* the first index an offer may name */
    uint64_t count;      /* records kept */
    uint64_t cap;        /* room in index/offset/size */
    uint64_t *index;     /* kept records' indices, ascending */
    uint64_t *size;      /* their sizes */
    unsigned char *data; /* their bytes, back to back */
    uint64_t bytes;      /* sum of size[] */
    uint64_t data_cap;
};

int zrs_dict_sample_create(zrs_dict_sample **out, zrs_dict_tier tier)
{
    if (out == NULL)
        return zr_set_error(ZR_EINVAL, "dict sample: NULL out");
    *out = NULL;
    uint64_t budget;
    int rc = zrs_dict_tier_sizes(tier, NULL, &budget);
    if (rc < 0)
        return rc;
    zrs_dict_sample *s = calloc(1, sizeof *s);
    if (s == NULL)
        return zr_set_error(ZR_ENOMEM, "dict sample: out of memory");
    s->tier = tier;
    s->budget = budget;
    s->stride = 1;
    *out = s;
    return ZR_OK;
}

void zrs_dict_sample_free(zrs_dict_sample *s)
{
    if (s == NULL)
        return;
    free(s->index);
    free(s->size);
    free(s->data);
    free(s);
}

uint64_t zrs_dict_sample_next(const zrs_dict_sample *s)
{
    if (s == NULL)
        return UINT64_MAX;
    uint64_t r = s->next % s->stride;
    return r ? s->next + (s->stride - r) : s->next;
}

uint64_t zrs_dict_sample_count(const zrs_dict_sample *s) { return s ? s->count : 0; }
uint64_t zrs_dict_sample_bytes(const zrs_dict_sample *s) { return s ? s->bytes : 0; }

/* Double the stride, keeping the records whose index is a multiple of it,
 * until the kept bytes fit the budget or one record is left. */
static void thin(zrs_dict_sample *s)
{
    while (s->bytes > s->budget && s->count > 1) {
        s->stride *= 2;
        uint64_t k = 0, off = 0, from = 0;
        for (uint64_t i = 0; i < s->count; i++) {
            uint64_t sz = s->size[i];
            if (s->index[i] % s->stride == 0) {
                if (off != from)
                    memmove(s->data + off, s->data + from, (size_t)sz);
                s->index[k] = s->index[i];
                s->size[k] = sz;
                off += sz;
                k++;
            }
            from += sz;
        }
        s->count = k;
        s->bytes = off;
    }
}

static int reserve(zrs_dict_sample *s, uint64_t size)
{
    if (s->count == s->cap) {
        uint64_t n = s->cap ? s->cap * 2 : 256;
        uint64_t *ix = realloc(s->index, (size_t)n * sizeof *ix);
        if (ix == NULL)
            return zr_set_error(ZR_ENOMEM, "dict sample: out of memory for %" PRIu64 " records", n);
        s->index = ix;
        uint64_t *sz = realloc(s->size, (size_t)n * sizeof *sz);
        if (sz == NULL)
            return zr_set_error(ZR_ENOMEM, "dict sample: out of memory for %" PRIu64 " records", n);
        s->size = sz;
        s->cap = n;
    }
    if (s->bytes + size > s->data_cap) {
        uint64_t n = s->data_cap ? s->data_cap : 65536;
        while (n < s->bytes + size)
            n *= 2;
        if (n > (uint64_t)SIZE_MAX)
            return zr_set_error(ZR_ENOMEM, "dict sample: %" PRIu64 " bytes exceed the address "
                                "space", n);
        unsigned char *d = realloc(s->data, (size_t)n);
        if (d == NULL)
            return zr_set_error(ZR_ENOMEM, "dict sample: out of memory for %" PRIu64 " bytes", n);
        s->data = d;
        s->data_cap = n;
    }
    return ZR_OK;
}

int zrs_dict_sample_offer(zrs_dict_sample *s, uint64_t index, const void *data, uint64_t size)
{
    if (s == NULL || (data == NULL && size > 0))
        return zr_set_error(ZR_EINVAL, "dict sample: NULL argument");
    if (index < s->next)
        return zr_set_error(ZR_EINVAL, "dict sample: record %" PRIu64 " offered after record "
                            "%" PRIu64 "; records come in index order", index, s->next - 1);
    s->next = index + 1;
    if (size == 0 || index % s->stride != 0)
        return 0;
    int rc = reserve(s, size);
    if (rc < 0)
        return rc;
    memcpy(s->data + s->bytes, data, (size_t)size);
    s->index[s->count] = index;
    s->size[s->count] = size;
    s->count++;
    s->bytes += size;
    thin(s);
    return index % s->stride == 0 ? 1 : 0;
}

int zrs_dict_sample_train(const zrs_dict_sample *s, void *dict, uint64_t dict_capacity,
                          uint64_t *dict_size)
{
    if (s == NULL)
        return zr_set_error(ZR_EINVAL, "train_dict: NULL sample");
    uint64_t tier_dict;
    zrs_dict_tier_sizes(s->tier, &tier_dict, NULL);
    if (dict_capacity > tier_dict)
        dict_capacity = tier_dict;
    /* Only a lone record can pass the budget (thin keeps one): cut it. */
    uint64_t first = s->count && s->size[0] > s->budget ? s->budget : 0;
    if (first)
        return zrs_train_dict(s->data, &first, 1, dict, dict_capacity, dict_size);
    return zrs_train_dict(s->data, s->size, s->count, dict, dict_capacity, dict_size);
}

/* Records per read while sampling a store. */
#define SAMPLE_BATCH 64

int zrs_dict_sample_store(zrs_dict_sample *s, zrs_store *store)
{
    if (s == NULL || store == NULL)
        return zr_set_error(ZR_EINVAL, "dict sample: NULL argument");
    zre_engine *e = zrs_engine(store);
    const uint64_t len = zrs_length(store);
    uint64_t index[SAMPLE_BATCH], sizes[SAMPLE_BATCH], bounds[SAMPLE_BATCH + 1];
    unsigned char *buf = NULL;
    uint64_t buf_cap = 0;
    int rc = ZR_OK;
    for (uint64_t i = zrs_dict_sample_next(s); rc >= 0 && i < len; i = zrs_dict_sample_next(s)) {
        /* The next records at the present stride; an offer that doubles
         * it turns the rest of the batch down, which costs a read only. */
        uint64_t n = 0;
        for (uint64_t j = i; n < SAMPLE_BATCH && j < len; j += s->stride)
            index[n++] = j;
        rc = zre_record_sizes(e, index, n, sizes);
        if (rc < 0)
            break;
        bounds[0] = 0;
        for (uint64_t k = 0; k < n; k++)
            bounds[k + 1] = bounds[k] + sizes[k];
        if (bounds[n] > buf_cap) {
            unsigned char *b = realloc(buf, (size_t)bounds[n] ? (size_t)bounds[n] : 1);
            if (b == NULL) {
                rc = zr_set_error(ZR_ENOMEM, "dict sample: out of memory for %" PRIu64 " bytes",
                                  bounds[n]);
                break;
            }
            buf = b;
            buf_cap = bounds[n];
        }
        rc = zre_gather(e, index, n, buf, buf_cap ? buf_cap : 1, 0, bounds);
        for (uint64_t k = 0; rc >= 0 && k < n; k++)
            if (index[k] >= s->next)
                rc = zrs_dict_sample_offer(s, index[k], buf + bounds[k], sizes[k]);
    }
    free(buf);
    return rc < 0 ? rc : ZR_OK;
}

int zrs_train_dict_tier(const void *samples, const uint64_t *sizes, uint64_t nsamples,
                        zrs_dict_tier tier, void *dict, uint64_t dict_capacity,
                        uint64_t *dict_size)
{
    if (nsamples > 0 && (samples == NULL || sizes == NULL))
        return zr_set_error(ZR_EINVAL, "train_dict: NULL argument");
    zrs_dict_sample *s;
    int rc = zrs_dict_sample_create(&s, tier);
    if (rc < 0)
        return rc;
    const unsigned char *p = samples;
    for (uint64_t i = 0; rc >= 0 && i < nsamples; p += sizes[i], i++)
        rc = zrs_dict_sample_offer(s, i, p, sizes[i]);
    if (rc >= 0)
        rc = zrs_dict_sample_train(s, dict, dict_capacity, dict_size);
    zrs_dict_sample_free(s);
    return rc;
}
