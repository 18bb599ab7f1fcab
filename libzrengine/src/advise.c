/*
 * advise.c - zre_advise: tell the OS which records will be read soon.
 *
 * A loader knows its future indices; hinting their byte ranges lets the
 * kernel start reading them (posix_fadvise WILLNEED, through the platform
 * layer) while the current batch is still being consumed, so a store
 * larger than RAM streams instead of stalling on one page fault at a time.
 *
 * The hint is advisory: it never changes what a gather returns, so an OS
 * that cannot advise (or refuses) is not an error.
 */
#include <inttypes.h>
#include <stdlib.h>

#include "engine_internal.h"

/* Contiguous byte range of one chunk, to merge neighbouring records into
 * one system call. */
typedef struct adv_range {
    uint32_t chunk;
    uint64_t lo, hi;
} adv_range;

static int range_cmp(const void *a, const void *b)
{
    const adv_range *x = a, *y = b;
    if (x->chunk != y->chunk)
        return x->chunk < y->chunk ? -1 : 1;
    if (x->lo != y->lo)
        return x->lo < y->lo ? -1 : 1;
    return 0;
}

ZRE_API int zre_advise(zre_engine *e, const uint64_t *index, uint64_t count)
{
    if (e == NULL)
        return zr_set_error(ZR_EINVAL, "advise: engine is NULL");
    if (count == 0)
        return ZR_OK;
    if (index == NULL)
        return zr_set_error(ZR_EINVAL, "advise: index is NULL with count %" PRIu64, count);
    const uint64_t length = atomic_load_explicit(&e->length, memory_order_acquire);
    for (uint64_t i = 0; i < count; i++) {
        if (index[i] >= length)
            return zr_set_error(ZR_ERANGE, "advise: index %" PRIu64 " out of range for store "
                                "%s of %" PRIu64 " records", index[i], e->path, length);
    }
    if (count > SIZE_MAX / sizeof(adv_range))
        return zr_set_error(ZR_ENOMEM, "advise: %" PRIu64 " indices are too many", count);
    adv_range *r = malloc((size_t)count * sizeof *r);
    if (r == NULL)
        return zr_set_error(ZR_ENOMEM, "advise: out of memory for %" PRIu64 " ranges", count);
    for (uint64_t i = 0; i < count; i++) {
        unsigned char buf[ZRE_LOC_ENTRY_SIZE];
        int rc = zre_read_locs(e, index[i], buf, 1);
        if (rc < 0) {
            free(r);
            return rc;
        }
        zre_loc l;
        zre_loc_decode(&l, buf);
        r[i].chunk = l.chunk_id;
        r[i].lo = l.offset;
        r[i].hi = (uint64_t)l.offset + l.phys_length;
    }
    /* Sorted by (chunk, offset), overlapping or touching ranges merge, so a
     * batch of neighbours costs one call, and the kernel sees ascending
     * offsets. */
    qsort(r, (size_t)count, sizeof *r, range_cmp);
    uint64_t i = 0;
    while (i < count) {
        adv_range cur = r[i++];
        while (i < count && r[i].chunk == cur.chunk && r[i].lo <= cur.hi) {
            if (r[i].hi > cur.hi)
                cur.hi = r[i].hi;
            i++;
        }
        zrp_file f = zre_fdtab_get(&e->chunks, cur.chunk);
        if (f.fd >= 0 && cur.hi > cur.lo)
            (void)zrp_advise_willneed(f, cur.lo, cur.hi - cur.lo); /* advisory only */
    }
    free(r);
    return ZR_OK;
}
