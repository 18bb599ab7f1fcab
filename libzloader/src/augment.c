/*
 * augment.c - the loader's native random flips (zld_flip, zloader.h).
 *
 * A flip reverses the elements of every row of a record in place: rows of
 * `width` elements of 1, 2, 4 or 8 bytes. Byte rows (uint8 images, the
 * common case) are reversed eight bytes at a time from both ends with a
 * byte swap; wider elements are swapped whole. Which records flip is the
 * caller's mask (zsm_bernoulli, computed by the loader per batch).
 */
#include "zld_augment.h"

#include <stdio.h>
#include <string.h>

#if defined(__GNUC__) || defined(__clang__)
#define BSWAP64(x) __builtin_bswap64(x)
#else
static uint64_t BSWAP64(uint64_t x)
{
    x = ((x & UINT64_C(0x00FF00FF00FF00FF)) << 8) | ((x >> 8) & UINT64_C(0x00FF00FF00FF00FF));
    x = ((x & UINT64_C(0x0000FFFF0000FFFF)) << 16) | ((x >> 16) & UINT64_C(0x0000FFFF0000FFFF));
    return (x << 32) | (x >> 32);
}
#endif

int zld_flips_check(const zld_flip *flips, size_t nflips, const zld_stream *streams,
                    size_t nstreams)
{
    if (nflips > 0 && flips == NULL)
        return zr_set_error(ZR_EINVAL, "zld_create: flips is NULL with nflips %zu", nflips);
    for (size_t k = 0; k < nflips; k++) {
        const zld_flip *f = &flips[k];
        if (f->stream >= nstreams)
            return zr_set_error(ZR_EINVAL, "zld_create: flip %zu names stream %zu of %zu", k,
                                f->stream, nstreams);
        const zld_stream *st = &streams[f->stream];
        const char *nm = st->name ? st->name : "";
        for (size_t j = 0; j < k; j++)
            if (flips[j].stream == f->stream)
                return zr_set_error(ZR_EINVAL, "zld_create: stream %zu (%s) has two flips "
                                    "(%zu and %zu)", f->stream, nm, j, k);
        if (st->kind != ZLD_STREAM_DENSE)
            return zr_set_error(ZR_EINVAL, "zld_create: flip %zu: stream %zu (%s) is ragged; "
                                "only dense records can be flipped", k, f->stream, nm);
        if (f->elem_size != 1 && f->elem_size != 2 && f->elem_size != 4 && f->elem_size != 8)
            return zr_set_error(ZR_EINVAL, "zld_create: flip %zu: elem_size %u, expected 1, 2, "
                                "4 or 8 (the dtype's itemsize)", k, f->elem_size);
        if (f->width == 0 || f->width > st->record_size / f->elem_size ||
            st->record_size % (f->width * f->elem_size) != 0)
            return zr_set_error(ZR_EINVAL, "zld_create: flip %zu: stream %zu (%s) records of "
                                "%llu bytes are not whole rows of %llu elements of %u bytes", k,
                                f->stream, nm, (unsigned long long)st->record_size,
                                (unsigned long long)f->width, f->elem_size);
        if (!(f->p >= 0.0 && f->p <= 1.0))
            return zr_set_error(ZR_EINVAL, "zld_create: flip %zu: p %g is outside [0, 1]", k, f->p);
    }
    return ZR_OK;
}

static void reverse_bytes(unsigned char *r, uint64_t w)
{
    uint64_t i = 0, j = w;
    while (j - i >= 16) {
        uint64_t a, b;
        memcpy(&a, r + i, 8);
        memcpy(&b, r + j - 8, 8);
        a = BSWAP64(a);
        b = BSWAP64(b);
        memcpy(r + i, &b, 8);
        memcpy(r + j - 8, &a, 8);
        i += 8;
        j -= 8;
    }
    while (j - i >= 2) {
        unsigned char t = r[i];
        r[i++] = r[--j];
        r[j] = t;
    }
}

/* Element swaps of a fixed size, so the copies compile to moves. */
#define REVERSE_WIDE(NAME, SIZE)                               \
    static void NAME(unsigned char *r, uint64_t w)             \
    {                                                          \
        unsigned char t[SIZE];                                 \
        for (uint64_t i = 0, j = w - 1; i < j; i++, j--) {     \
            memcpy(t, r + i * SIZE, SIZE);                     \
            memcpy(r + i * SIZE, r + j * SIZE, SIZE);          \
            memcpy(r + j * SIZE, t, SIZE);                     \
        }                                                      \
    }
REVERSE_WIDE(reverse_2, 2)
REVERSE_WIDE(reverse_4, 4)
REVERSE_WIDE(reverse_8, 8)

void zld_flip_records(const zld_flip *f, const uint8_t *mask, unsigned char *data,
                      uint64_t count, uint64_t record_size)
{
    void (*rev)(unsigned char *, uint64_t) = f->elem_size == 1   ? reverse_bytes
                                             : f->elem_size == 2 ? reverse_2
                                             : f->elem_size == 4 ? reverse_4
                                                                 : reverse_8;
    const uint64_t row = f->width * f->elem_size;
    for (uint64_t i = 0; i < count; i++) {
        if (!mask[i]) continue;
        unsigned char *rec = data + i * record_size;
        for (uint64_t off = 0; off < record_size; off += row)
            rev(rec + off, f->width);
    }
}

/* ------------------------------------------- flips resolved for a binding */

static int fill_items(zrs_kind kind, zrs_dtype dtype, const uint64_t *shape, size_t nd,
                      zld_items *out)
{
    memset(out, 0, sizeof *out);
    out->kind = kind;
    out->dtype = dtype;
    if (kind != ZRS_DENSE || shape == NULL) nd = 0;
    out->ndim = nd > ZRS_MAX_NDIM ? ZRS_MAX_NDIM : nd;
    if (out->ndim > 0) memcpy(out->shape, shape, out->ndim * sizeof *shape);
    return ZR_OK;
}

int zld_items_from_store(zrs_store *store, zld_items *out)
{
    if (store == NULL || out == NULL)
        return zr_set_error(ZR_EINVAL, "zld_items_from_store: %s is NULL",
                            store == NULL ? "store" : "out");
    return fill_items(zrs_get_kind(store), zrs_get_dtype(store), zrs_item_shape(store),
                      zrs_item_ndim(store), out);
}

int zld_items_from_concat(const zrs_concat *concat, zld_items *out)
{
    if (concat == NULL || out == NULL)
        return zr_set_error(ZR_EINVAL, "zld_items_from_concat: %s is NULL",
                            concat == NULL ? "concat" : "out");
    return fill_items(zrs_concat_kind(concat), zrs_concat_dtype(concat),
                      zrs_concat_item_shape(concat), zrs_concat_item_ndim(concat), out);
}

int zld_flip_resolve(const zld_items *items, size_t stream, const char *label, double p,
                     zld_flip *out)
{
    char pos[40];
    if (label == NULL) {
        snprintf(pos, sizeof pos, "stream %zu", stream);
        label = pos;
    }
    if (items == NULL || out == NULL)
        return zr_set_error(ZR_EINVAL, "flip: %s: %s is NULL", label,
                            items == NULL ? "items" : "out");
    if (items->kind != ZRS_DENSE)
        return zr_set_error(ZR_EINVAL, "flip: %s is ragged; only dense records can be flipped",
                            label);
    if (items->ndim == 0 || items->ndim > ZRS_MAX_NDIM)
        return zr_set_error(ZR_EINVAL, "flip: %s holds scalar records (no axis to flip)", label);
    size_t item = zrs_dtype_itemsize(items->dtype);
    if (item != 1 && item != 2 && item != 4 && item != 8) {
        const char *dt = zrs_dtype_str(items->dtype);
        return zr_set_error(ZR_EINVAL, "flip: %s has dtype %s (itemsize %zu); flips need an "
                            "itemsize of 1, 2, 4 or 8", label, dt ? dt : "(unknown)", item);
    }
    if (!(p >= 0.0 && p <= 1.0))
        return zr_set_error(ZR_EINVAL, "flip: the probability of %s must be in [0, 1], got %g",
                            label, p);
    out->stream = stream;
    out->width = items->shape[items->ndim - 1];
    out->elem_size = (uint32_t)item;
    out->p = p;
    return ZR_OK;
}

int zld_flip_by_name(const char *const *names, const zld_items *items, size_t nstreams,
                     const char *name, double p, zld_flip *out)
{
    if (names == NULL || items == NULL || name == NULL || out == NULL)
        return zr_set_error(ZR_EINVAL, "zld_flip_by_name: %s is NULL",
                            names == NULL ? "names" : items == NULL ? "items"
                                                    : name == NULL  ? "name" : "out");
    for (size_t s = 0; s < nstreams; s++) {
        if (names[s] != NULL && strcmp(names[s], name) == 0) {
            char label[96];
            snprintf(label, sizeof label, "stream '%.80s'", name);
            return zld_flip_resolve(&items[s], s, label, p, out);
        }
    }
    /* "loader: flip: unknown stream 'y' (streams: 'x', 'b')", the list
     * bounded so that many streams cannot flood the detail. */
    char list[512];
    size_t len = 0;
    list[0] = '\0';
    for (size_t s = 0; s < nstreams && len < sizeof list - 1; s++) {
        int n = snprintf(list + len, sizeof list - len, "%s'%.80s'", s ? ", " : "",
                         names[s] ? names[s] : "");
        if (n < 0) break;
        len += (size_t)n;
    }
    if (len >= sizeof list - 1) memcpy(list + sizeof list - 5, "...", 4);
    return zr_set_error(ZR_EINVAL, "loader: flip: unknown stream '%.80s' (streams: %s)", name,
                        list);
}
