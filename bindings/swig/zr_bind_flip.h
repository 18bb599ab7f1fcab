/*
 * zr_bind_flip.h - the bindings' shared rule for a store's flip (zld_flip),
 * and the loader options every binding fills with room for its flips.
 *
 * A flip reverses a dense store's records along their last axis: the row
 * width is the last dimension of item_shape and the element size is the
 * dtype's itemsize. The Lua and Go bindings resolve their users' flip
 * options through zr_bind_flip (the Python binding has the same rules in
 * loaderx/dataloader.py), so every language refuses the same streams with
 * the same words. Header-only glue, included by the bindings' SWIG C code.
 */
#ifndef ZR_BIND_FLIP_H
#define ZR_BIND_FLIP_H

#include <zloader.h>
#include <zrerror_sys.h>

/* Loader options with room for their flips and stream labels: what a
 * binding builds from its language's options before zld_create, which
 * copies them. */
#define ZR_BIND_MAX_FLIPS 64
#define ZR_BIND_MAX_NAMES 1024
typedef struct zr_bind_options {
    zld_options o;
    zld_flip flips[ZR_BIND_MAX_FLIPS];
    const char *names[ZR_BIND_MAX_NAMES]; /* o.names: the streams' labels in the state */
} zr_bind_options;

/* Fill *out for a flip of probability p on store s, which is stream
 * `stream` of the loader (`label` names it in errors, e.g. "stream 0" or
 * "stream 'image'"). ZR_EINVAL (detail naming the stream and the rule) for
 * a ragged store, scalar records, an itemsize other than 1, 2, 4 or 8, or
 * p outside [0, 1] (NaN included). */
static inline int zr_bind_flip(zrs_store *s, const char *label, size_t stream, double p,
                               zld_flip *out)
{
    if (s == NULL || out == NULL)
        return zr_set_error(ZR_EINVAL, "flip: %s is not an open store", label);
    if (zrs_get_kind(s) != ZRS_DENSE)
        return zr_set_error(ZR_EINVAL, "flip: %s is ragged; only dense records can be flipped",
                            label);
    size_t nd = zrs_item_ndim(s);
    const uint64_t *shape = zrs_item_shape(s);
    if (nd == 0 || shape == NULL)
        return zr_set_error(ZR_EINVAL, "flip: %s holds scalar records (no axis to flip)", label);
    zrs_dtype dt = zrs_get_dtype(s);
    size_t item = zrs_dtype_itemsize(dt);
    if (item != 1 && item != 2 && item != 4 && item != 8)
        return zr_set_error(ZR_EINVAL, "flip: %s has dtype %s (itemsize %zu); flips need an "
                            "itemsize of 1, 2, 4 or 8", label, zrs_dtype_str(dt), item);
    if (!(p >= 0.0 && p <= 1.0))
        return zr_set_error(ZR_EINVAL, "flip: the probability of %s must be in [0, 1], got %g",
                            label, p);
    out->stream = stream;
    out->width = shape[nd - 1];
    out->elem_size = (uint32_t)item;
    out->p = p;
    return ZR_OK;
}

#endif
