/*
 * slices.c - read a store in bounded slices through the public gather
 * contract (zrs_gather_dense, zrs_ragged_sizes + zrs_gather_ragged), for
 * the commands that stream a whole store: export, recode, train-dict,
 * stats.
 */
#include <inttypes.h>
#include <stdlib.h>

#include "zr_cli.h"
#include "zr_io.h"

#define SIZE_WINDOW 4096 /* ragged sizes asked per call */

int zr_read_slices(const char *cmd, zrs_store *s, uint64_t begin, uint64_t end,
                   uint64_t slice_bytes, int (*fn)(void *ctx, const zr_slice *sl), void *ctx)
{
    const int dense = zrs_get_kind(s) == ZRS_DENSE;
    const uint64_t rec = zrs_record_size(s);
    uint64_t cap_idx = dense ? (slice_bytes / rec ? slice_bytes / rec : 1) : SIZE_WINDOW;
    if (cap_idx > end - begin)
        cap_idx = end - begin ? end - begin : 1;
    int64_t *idx = malloc(cap_idx * sizeof *idx);
    uint64_t *sizes = dense ? NULL : malloc(cap_idx * sizeof *sizes);
    uint64_t *bounds = dense ? NULL : malloc((cap_idx + 1) * sizeof *bounds);
    unsigned char *buf = NULL;
    uint64_t buf_cap = 0;
    int status = 0;
    if (!idx || (!dense && (!sizes || !bounds))) {
        zr_error(cmd, zrs_path(s), "out of memory");
        status = ZR_EXIT_FAILED;
    }
    for (uint64_t at = begin; status == 0 && at < end && !zr_interrupted();) {
        uint64_t k = end - at < cap_idx ? end - at : cap_idx, nbytes;
        for (uint64_t i = 0; i < k; i++)
            idx[i] = (int64_t)(at + i);
        int rc;
        if (dense) {
            nbytes = k * rec;
        } else {
            rc = zrs_ragged_sizes(s, idx, k, sizes);
            if (rc < 0) {
                status = zr_fail(cmd, zrs_path(s), "cannot read record sizes", rc);
                status = status > ZR_EXIT_FAILED ? status : ZR_EXIT_FAILED;
                break;
            }
            /* As many as fit the slice, at least one. */
            uint64_t take = 0;
            bounds[0] = 0;
            while (take < k && (take == 0 || bounds[take] + sizes[take] <= slice_bytes)) {
                bounds[take + 1] = bounds[take] + sizes[take];
                take++;
            }
            k = take;
            nbytes = bounds[k];
        }
        if (nbytes > buf_cap) {
            unsigned char *nb = realloc(buf, nbytes);
            if (!nb) {
                zr_error(cmd, zrs_path(s), "out of memory for a slice of %" PRIu64 " bytes", nbytes);
                status = ZR_EXIT_FAILED;
                break;
            }
            buf = nb;
            buf_cap = nbytes;
        }
        rc = dense ? zrs_gather_dense(s, idx, k, buf, nbytes)
                   : zrs_gather_ragged(s, idx, k, buf, nbytes, bounds);
        if (rc < 0) {
            char what[96];
            snprintf(what, sizeof what, "cannot read records %" PRIu64 "..%" PRIu64, at, at + k - 1);
            zr_fail(cmd, zrs_path(s), what, rc);
            status = ZR_EXIT_FAILED;
            break;
        }
        zr_slice sl = {buf, bounds, at, k, nbytes};
        status = fn(ctx, &sl);
        at += k;
    }
    free(idx);
    free(sizes);
    free(bounds);
    free(buf);
    return status;
}

