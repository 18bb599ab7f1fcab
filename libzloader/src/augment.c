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
