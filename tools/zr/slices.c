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

int zr_sample_records(const char *cmd, zrs_store *s, uint64_t bytes, unsigned char **data,
                      uint64_t **bounds, uint64_t *n)
{
    *data = NULL;
    *bounds = NULL;
    *n = 0;
    const uint64_t len = zrs_length(s);
    if (len == 0) {
        zr_error(cmd, zrs_path(s), "the store holds no records to sample");
        return ZR_EXIT_FAILED;
    }
    zre_stats st;
    int rc = zre_get_stats(zrs_engine(s), &st);
    if (rc < 0) {
        zr_fail(cmd, zrs_path(s), "cannot read the record table", rc);
        return ZR_EXIT_FAILED;
    }
    /* Every step-th record, so that the sample spans the whole store. */
    uint64_t step = st.logical_bytes > bytes ? (st.logical_bytes + bytes - 1) / bytes : 1;
    uint64_t want = (len + step - 1) / step;
    int64_t *idx = malloc(want * sizeof *idx);
    uint64_t *b = malloc((want + 1) * sizeof *b), *sizes = malloc(want * sizeof *sizes);
    if (!idx || !b || !sizes) {
        free(idx);
        free(b);
        free(sizes);
        zr_error(cmd, zrs_path(s), "out of memory for a sample of %" PRIu64 " records", want);
        return ZR_EXIT_FAILED;
    }
    for (uint64_t i = 0; i < want; i++)
        idx[i] = (int64_t)(i * step);
    const int dense = zrs_get_kind(s) == ZRS_DENSE;
    rc = 0;
    if (dense)
        for (uint64_t i = 0; i < want; i++)
            sizes[i] = zrs_record_size(s);
    else
        rc = zrs_ragged_sizes(s, idx, want, sizes);
    uint64_t k = 0;
    b[0] = 0;
    while (rc == 0 && k < want && (k == 0 || b[k] + sizes[k] <= bytes)) {
        b[k + 1] = b[k] + sizes[k];
        k++;
    }
    unsigned char *d = rc == 0 ? malloc(b[k] ? b[k] : 1) : NULL;
    if (rc == 0 && !d) {
        zr_error(cmd, zrs_path(s), "out of memory for a %" PRIu64 "-byte sample", b[k]);
        free(idx);
        free(sizes);
        free(b);
        return ZR_EXIT_FAILED;
    }
    if (rc == 0)
        rc = dense ? zrs_gather_dense(s, idx, k, d, b[k]) : zrs_gather_ragged(s, idx, k, d, b[k], b);
    free(idx);
    free(sizes);
    if (rc < 0) {
        free(d);
        free(b);
        zr_fail(cmd, zrs_path(s), "cannot read the sample", rc);
        return ZR_EXIT_FAILED;
    }
    *data = d;
    *bounds = b;
    *n = k;
    return 0;
}
