/*
 * zr_bind_loader.h - the bindings' shared glue for the loader's finite
 * passes, length bucketing, sequence packing and padding.
 *
 * The Lua and Go bindings turn their users' options into zld_options
 * through these helpers, so both languages accept the same names and
 * refuse bad input with the same words (the Python binding has the same
 * rules in its own glue). Header-only, included by the bindings' SWIG C
 * code; every function returns 0 or a negative zr_status with the detail
 * set (zr_set_error), never aborts and never prints.
 */
#ifndef ZR_BIND_LOADER_H
#define ZR_BIND_LOADER_H

#include <stdlib.h>
#include <string.h>
#include <zloader.h>
#include <zrerror_sys.h>

/* The keys a pack-mode batch adds after its streams, in the order of the
 * batch's parts (nstreams + ZLD_PACK_SEGMENT_IDS, ...). Each is int32. */
static const char *const zr_bind_pack_keys[ZLD_PACK_PARTS] = {
    "segment_ids", "positions", "seq_lens", "cu_seqlens",
};

/* 1 if `name` is one of the keys a pack-mode batch adds. */
static inline int zr_bind_is_pack_key(const char *name)
{
    for (int k = 0; k < ZLD_PACK_PARTS; k++)
        if (name != NULL && strcmp(name, zr_bind_pack_keys[k]) == 0)
            return 1;
    return 0;
}

/* Pack mode on o: pack = 1, the row length, the window (0: the default)
 * and the names of the policy ("first_fit", "best_fit", "concat") and of
 * the overlong rule ("split", "truncate", "drop"); a NULL or empty name
 * keeps the default (best_fit, split). ZR_EINVAL naming the option for an
 * unknown name; the numbers are checked by zld_create. */
static inline int zr_bind_pack_options(zld_options *o, uint64_t length, uint64_t window,
                                       const char *policy, const char *overlong)
{
    if (o == NULL)
        return zr_set_error(ZR_EINVAL, "pack: no options");
    if (policy != NULL && *policy != '\0' && zsm_pack_policy_parse(policy, &o->pack_policy) != ZSM_OK)
        return zr_set_error(ZR_EINVAL, "unknown pack_policy '%s'; expected 'first_fit', "
                            "'best_fit' or 'concat'", policy);
    if (overlong != NULL && *overlong != '\0' && zsm_pack_overlong_parse(overlong, &o->pack_overlong) != ZSM_OK)
        return zr_set_error(ZR_EINVAL, "unknown pack_overlong '%s'; expected 'split', "
                            "'truncate' or 'drop'", overlong);
    o->pack = 1;
    o->pack_length = length;
    o->pack_window = window;
    return ZR_OK;
}

/* Bucketing on o: a malloc'd copy of lengths[0..count) (one length per
 * record) as o->bucket_lengths, and the window (0: the default). Free it
 * with zr_bind_options_release once zld_create has copied it. ZR_EINVAL
 * for no lengths, ZR_ENOMEM. */
static inline int zr_bind_bucket_options(zld_options *o, const uint32_t *lengths, uint64_t count,
                                         uint64_t window)
{
    if (o == NULL || (lengths == NULL && count > 0))
        return zr_set_error(ZR_EINVAL, "bucket: no options or no lengths");
    if (count == 0)
        return zr_set_error(ZR_EINVAL, "bucket: lengths is empty (one length per record)");
    if (count > SIZE_MAX / sizeof *lengths)
        return zr_set_error(ZR_EINVAL, "bucket: %llu lengths overflow memory",
                            (unsigned long long)count);
    uint32_t *copy = (uint32_t *)malloc((size_t)count * sizeof *copy);
    if (copy == NULL)
        return zr_set_error(ZR_ENOMEM, "bucket: out of memory for %llu lengths",
                            (unsigned long long)count);
    memcpy(copy, lengths, (size_t)count * sizeof *copy);
    free((void *)o->bucket_lengths);
    o->bucket_lengths = copy;
    o->bucket_count = count;
    o->bucket_window = window;
    return ZR_OK;
}

/* Free what zr_bind_bucket_options gave o (NULL: no-op). */
static inline void zr_bind_options_release(zld_options *o)
{
    if (o == NULL)
        return;
    free((void *)o->bucket_lengths);
    o->bucket_lengths = NULL;
    o->bucket_count = 0;
}

/* The number of values zld_batch_indices gives: each segment's document
 * in pack mode (zld_pack_info.segments), else zld_batch_count. */
static inline uint64_t zr_bind_batch_nindices(const zld_batch *b)
{
    zld_pack_info pi;
    return zld_batch_pack_info(b, &pi) == ZR_OK ? pi.segments : zld_batch_count(b);
}

/* Pad (or cut) `count` rows held back to back in data: row i is bytes
 * [bounds[i], bounds[i + 1]) of data (count + 1 offsets), a whole number
 * of elements of elem_size bytes. dst (count * length * elem_size bytes)
 * gets each row's first min(n_i, length) elements, then copies of the
 * elem_size bytes at pad_value; lengths_out[i] (may be NULL) gets n_i,
 * before any cut. ZR_EINVAL for NULL arguments, elem_size 0, decreasing
 * bounds or a row that is not whole elements (naming the row), a dst too
 * small; ZR_ENOMEM. */
static inline int zr_bind_pad(const void *data, const uint64_t *bounds, uint64_t count,
                              size_t elem_size, uint64_t length, const void *pad_value,
                              void *dst, uint64_t dst_capacity, uint64_t *lengths_out)
{
    if (bounds == NULL || pad_value == NULL || elem_size == 0 || (dst == NULL && count > 0))
        return zr_set_error(ZR_EINVAL, "pad: NULL bounds, pad value or destination, or an "
                            "element of 0 bytes");
    if (count > 0 && length > 0 &&
        (length > UINT64_MAX / elem_size || length * elem_size > UINT64_MAX / count))
        return zr_set_error(ZR_EINVAL, "pad: %llu rows of %llu elements overflow memory",
                            (unsigned long long)count, (unsigned long long)length);
    if (count * length * elem_size > dst_capacity)
        return zr_set_error(ZR_EINVAL, "pad: %llu rows of %llu elements of %zu bytes need %llu "
                            "bytes, the destination holds %llu", (unsigned long long)count,
                            (unsigned long long)length, elem_size,
                            (unsigned long long)(count * length * elem_size),
                            (unsigned long long)dst_capacity);
    if (count == 0)
        return ZR_OK;
    if (data == NULL || count > SIZE_MAX / (sizeof(void *) + sizeof(uint64_t)))
        return zr_set_error(ZR_EINVAL, "pad: no row data");
    const void **rows = (const void **)malloc((size_t)count * sizeof *rows);
    uint64_t *lens = (uint64_t *)malloc((size_t)count * sizeof *lens);
    if (rows == NULL || lens == NULL) {
        free((void *)rows);
        free(lens);
        return zr_set_error(ZR_ENOMEM, "pad: out of memory for %llu rows",
                            (unsigned long long)count);
    }
    for (uint64_t i = 0; i < count; i++) {
        uint64_t nb = bounds[i + 1] - bounds[i];
        if (bounds[i + 1] < bounds[i] || nb % elem_size != 0) {
            free((void *)rows);
            free(lens);
            return zr_set_error(ZR_EINVAL, "pad: record %llu holds %llu bytes, not a whole number "
                                "of %zu-byte elements", (unsigned long long)i,
                                (unsigned long long)(bounds[i + 1] - bounds[i]), elem_size);
        }
        rows[i] = (const unsigned char *)data + bounds[i];
        lens[i] = nb / elem_size;
        if (lengths_out != NULL)
            lengths_out[i] = lens[i];
    }
    int rc = zld_pad(rows, lens, count, elem_size, length, pad_value, dst);
    free((void *)rows);
    free(lens);
    return rc;
}

#endif
