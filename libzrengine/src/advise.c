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
 *
 * zre_resident_fraction tells whether hints are worth their cost: hints on
 * pages already in the page cache only cost system calls (a loader over a
 * warm store ran at 0.64x with them), while a cold store read without them
 * stalls on every miss (2.9x slower on a throttled device).
 */
#include <errno.h>
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
    for (uint64_t b = 0; b < count; b += ZRE_LOCS_AT_MAX) {
        zre_loc l[ZRE_LOCS_AT_MAX];
        uint64_t n = count - b < ZRE_LOCS_AT_MAX ? count - b : ZRE_LOCS_AT_MAX;
        int rc = zre_read_locs_at(e, index + b, n, l);
        if (rc < 0) {
            free(r);
            return rc;
        }
        for (uint64_t i = 0; i < n; i++) {
            r[b + i].chunk = l[i].chunk_id;
            r[b + i].lo = l[i].offset;
            r[b + i].hi = (uint64_t)l[i].offset + l[i].phys_length;
        }
    }
    /* Sorted by (chunk, offset), overlapping or touching ranges merge, so a
     * batch of neighbours costs one call, and the kernel sees ascending
     * offsets. */
    qsort(r, (size_t)count, sizeof *r, range_cmp);
    uint64_t i = 0, merged = 0;
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
        r[merged++] = cur;
    }
    /* A store at a URL: the hint is a background download into the
     * node's cache. */
    if (e->remote && merged > 0) {
        uint32_t *ch = malloc((size_t)merged * (sizeof *ch + 2 * sizeof(uint64_t)));
        if (ch) {
            uint64_t *lo = (uint64_t *)(void *)(ch + merged), *hi = lo + merged;
            for (uint64_t k = 0; k < merged; k++) {
                ch[k] = r[k].chunk;
                lo[k] = r[k].lo;
                hi[k] = r[k].hi;
            }
            zre_remote_prefetch(e, ch, lo, hi, (size_t)merged);
            free(ch);
        }
    }
    free(r);
    return ZR_OK;
}

/* Windows sampled, and bytes each: 64 x 64 KiB reads nothing and costs
 * about 200 system calls, well under a millisecond. */
#define RESIDENT_WINDOWS 64u
#define RESIDENT_WINDOW_BYTES (UINT64_C(64) << 10)

ZRE_API int zre_resident_fraction(zre_engine *e, double *fraction)
{
    if (e == NULL || fraction == NULL)
        return zr_set_error(ZR_EINVAL, "resident_fraction: %s is NULL",
                            e == NULL ? "engine" : "fraction");
    *fraction = 1.0;
    int rc = zre_enter_read(e, "resident_fraction");
    if (rc < 0)
        return rc;
    if (e->remote) {
        rc = zre_remote_cached_fraction(e, fraction);
        zre_leave_read(e);
        return rc;
    }
    /* The stored bytes (the write frontier) space the windows out. */
    const uint64_t total = zre_chunk_bytes(e);
    const uint64_t nchunks = total > 0 ? total / ZRE_CHUNK_USABLE + 1 : 0;
    uint64_t in = 0, all = 0;
    const uint64_t step = total / RESIDENT_WINDOWS > RESIDENT_WINDOW_BYTES
                              ? total / RESIDENT_WINDOWS : RESIDENT_WINDOW_BYTES;
    uint64_t base = 0; /* global offset of chunk c's first byte */
    for (uint64_t c = 0; c < nchunks && rc == ZR_OK; c++) {
        const zre_fent *ent = zre_fdtab_ent(&e->chunks, c);
        if (!ent || ent->f.fd < 0)
            continue;
        const uint64_t size = atomic_load_explicit(&ent->size, memory_order_acquire);
        /* Windows start at multiples of `step` of the global offset. */
        uint64_t at = base % step ? base + (step - base % step) : base;
        for (; at < base + size; at += step) {
            uint64_t lo = at - base;
            uint64_t len = size - lo < RESIDENT_WINDOW_BYTES ? size - lo : RESIDENT_WINDOW_BYTES;
            uint64_t r = 0, p = 0;
            /* Through the handle's own mapping where it has one: mincore
             * alone, where a temporary mapping costs an mmap and a munmap
             * whose TLB flush reaches every thread of the process (the
             * loader re-decides its readahead this way while its workers
             * gather). */
            int prc = ent->map ? zrp_resident_mapped(ent->map + lo, len, &r, &p) : -ENOTSUP;
            if (prc == -ENOTSUP)
                prc = zrp_resident(ent->f, lo, len, &r, &p);
            if (prc < 0) {
                rc = zr_set_error(prc == -ENOTSUP ? ZR_EUNSUPPORTED : ZR_EIO,
                                  "resident_fraction: %s chunk %" PRIu64 ": %s", e->path, c,
                                  prc == -ENOTSUP ? "the OS does not report page-cache residency"
                                                  : zr_os_strerror(prc));
                break;
            }
            in += r;
            all += p;
        }
        base += size;
    }
    zre_leave_read(e);
    if (rc == ZR_OK && all > 0)
        *fraction = (double)in / (double)all;
    return rc;
}
