/*
 * ingest_tokens.c - zr ingest of ragged records cut from one flat 1-d
 * array: token sequences (a .npy with --lengths or --offsets), and the
 * .npz of data, offsets and shapes that `zr export` writes for a ragged
 * store.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "ingest.h"
#include "zr_platform.h"


/* Ragged records from a flat 1-d array: record i is elements
 * off[i]..off[i+1] with shape shapes[i*d..] (dims until the first -1) or,
 * without shapes, 1-d. */
static int ingest_flat(zr_src *src, const zr_array *a, const uint64_t *off, uint64_t n,
                       const int64_t *shapes, uint64_t d, const char *store, const ingest_opts *o)
{
    char err[ZR_IO_ERR];
    const char *path = zr_src_name(src);
    const size_t isz = zrs_dtype_itemsize(a->dtype);
    uint64_t slice, first_slice;
    slice_sizes(o, &slice, &first_slice);
    /* Each record's ndim. */
    uint8_t *nds = malloc(n ? n : 1);
    uint64_t *bounds = malloc((n + 1) * sizeof *bounds);
    if (!nds || !bounds) {
        free(nds);
        free(bounds);
        zr_error(INGEST_CMD, path, "out of memory for %" PRIu64 " records", n);
        return ZR_EXIT_FAILED;
    }
    for (uint64_t i = 0; i < n; i++) {
        uint64_t nd = 1;
        if (shapes)
            for (nd = 0; nd < d && shapes[i * d + nd] >= 0; nd++)
                ;
        nds[i] = (uint8_t)nd;
    }
    zr_sink k = {.cmd = INGEST_CMD, .path = store, .o = &o->sink};
    zr_progress pr;
    zr_progress_start(&pr, store, n, "records", o->quiet);
    unsigned char *packed = NULL;
    int status = 0, opened = 0;
    for (uint64_t i = 0; status == 0 && (i < n || !opened) && !zr_interrupted();) {
        uint64_t lim = opened ? slice : first_slice, sum = 0, j = i;
        while (j < n && (j == i || sum + (off[j + 1] - off[j]) * isz +
                                           ZRS_RAGGED_PREFIX_SIZE(nds[j]) <= lim)) {
            sum += (off[j + 1] - off[j]) * isz + ZRS_RAGGED_PREFIX_SIZE(nds[j]);
            j++;
        }
        if ((status = grow_slice(&packed, sum, path)) != 0)
            break;
        bounds[0] = 0;
        for (uint64_t r = i; r < j && status == 0; r++) {
            unsigned char *p = packed + bounds[r - i];
            uint64_t nd = nds[r], len = off[r + 1] - off[r];
            memcpy(p, &nd, 8);
            for (uint64_t q = 0; q < nd; q++) {
                uint64_t dim = shapes ? (uint64_t)shapes[r * d + q] : len;
                memcpy(p + 8 + 8 * q, &dim, 8);
            }
            unsigned char *payload = p + ZRS_RAGGED_PREFIX_SIZE(nd);
            if (zr_src_read_exact(src, payload, len * isz, "the flat data", err) < 0) {
                fprintf(stderr, "zr %s: %s\n", INGEST_CMD, err);
                status = ZR_EXIT_FAILED;
            } else if (a->swap) {
                zr_byteswap(payload, len, a->dtype);
            }
            bounds[r - i + 1] = bounds[r - i] + ZRS_RAGGED_PREFIX_SIZE(nd) + len * isz;
        }
        if (status)
            break;
        if (!opened) {
            status = zr_sink_open(&k, ZRS_RAGGED, a->dtype, NULL, 0, packed, bounds, j - i);
            opened = 1;
            if (status)
                break;
        }
        if (j > i)
            status = zr_sink_append(&k, packed, bounds, j - i, sum);
        i = j;
        zr_progress_update(&pr, i, off[i] * isz);
    }
    zr_progress_end(&pr);
    free(packed);
    free(bounds);
    free(nds);
    return ingest_finish(o, &k, status, path, "");
}

/* off[0..n] from lengths (n values) or offsets (n + 1 values, from 0),
 * checked against the flat length; NULL after printing the problem. */
static uint64_t *record_offsets(const int64_t *v, uint64_t nv, int lengths, uint64_t flat,
                                const char *vpath, const char *flat_path, uint64_t *n)
{
    *n = lengths ? nv : (nv ? nv - 1 : 0);
    if (!lengths && (nv < 1 || v[0] != 0)) {
        zr_error(INGEST_CMD, vpath, "offsets must start at 0 (got %" PRIu64 " values%s)", nv,
                 nv ? ", the first not 0" : "");
        return NULL;
    }
    uint64_t *off = malloc((*n + 1) * sizeof *off);
    if (!off) {
        zr_error(INGEST_CMD, vpath, "out of memory");
        return NULL;
    }
    off[0] = 0;
    for (uint64_t i = 0; i < *n; i++) {
        int64_t len = lengths ? v[i] : v[i + 1] - v[i];
        if (len <= 0) {
            zr_error(INGEST_CMD, vpath, "record %" PRIu64 " would hold %" PRId64 " elements (a record "
                     "holds at least one)", i, len);
            free(off);
            return NULL;
        }
        off[i + 1] = off[i] + (uint64_t)len;
    }
    if (off[*n] != flat) {
        zr_error(INGEST_CMD, vpath, "%s cover %" PRIu64 " elements, but %s holds %" PRIu64,
                 lengths ? "lengths" : "offsets", off[*n], flat_path, flat);
        free(off);
        return NULL;
    }
    return off;
}

/* Open a flat 1-d array source and read its header. */
static int open_flat(zr_src *src, zr_array *a)
{
    char err[ZR_IO_ERR];
    if (zr_npy_read_header(src, a, err) < 0) {
        fprintf(stderr, "zr %s: %s\n", INGEST_CMD, err);
        return ZR_EXIT_FAILED;
    }
    if (a->ndim != 1) {
        zr_error(INGEST_CMD, zr_src_name(src), "the flat data must be a 1-d array, got %zu dimensions",
                 a->ndim);
        return ZR_EXIT_FAILED;
    }
    return 0;
}

int ingest_tokens(const char *path, const char *store, const ingest_opts *o)
{
    char err[ZR_IO_ERR];
    const char *lpath = o->lengths ? o->lengths : o->offsets;
    int64_t *v;
    uint64_t nv, n;
    if (zr_npy_load_i64(lpath, &v, &nv, err) < 0) {
        fprintf(stderr, "zr %s: %s\n", INGEST_CMD, err);
        return zrp_path_exists(lpath) ? ZR_EXIT_FAILED : ZR_EXIT_OPEN;
    }
    zr_src *src;
    if (zr_src_open_file(&src, path, err) < 0) {
        free(v);
        fprintf(stderr, "zr %s: %s\n", INGEST_CMD, err);
        return ZR_EXIT_OPEN;
    }
    zr_array a;
    int status = open_flat(src, &a);
    uint64_t *off = status ? NULL
                           : record_offsets(v, nv, o->lengths != NULL, a.shape[0], lpath, path, &n);
    free(v);
    if (!status && !off)
        status = ZR_EXIT_FAILED;
    if (!status)
        status = ingest_flat(src, &a, off, n, NULL, 0, store, o);
    free(off);
    zr_src_close(src);
    return status;
}

/* The .npz that zr export writes for a ragged store: data, offsets and
 * shapes, back into a ragged store. */
int ingest_ragged_npz(const char *path, const char *store, const ingest_opts *o)
{
    char err[ZR_IO_ERR];
    zr_src *s = NULL;
    int64_t *offs = NULL, *shapes = NULL;
    uint64_t no = 0, one, ns = 0, d = 0, n = 0;
    int status = 0;
    if (zr_src_open_zip_member(&s, path, "offsets.npy", err) < 0 ||
        zr_load_i64(s, 1, &offs, &no, &one, err) < 0)
        status = ZR_EXIT_FAILED;
    zr_src_close(s);
    s = NULL;
    if (!status && (zr_src_open_zip_member(&s, path, "shapes.npy", err) < 0 ||
                    zr_load_i64(s, 2, &shapes, &ns, &d, err) < 0))
        status = ZR_EXIT_FAILED;
    zr_src_close(s);
    s = NULL;
    if (status)
        fprintf(stderr, "zr %s: %s\n", INGEST_CMD, err);
    zr_array a;
    if (!status && zr_src_open_zip_member(&s, path, "data.npy", err) < 0) {
        fprintf(stderr, "zr %s: %s\n", INGEST_CMD, err);
        status = ZR_EXIT_FAILED;
    }
    if (!status)
        status = open_flat(s, &a);
    uint64_t *off = NULL;
    if (!status) {
        char what[1024];
        snprintf(what, sizeof what, "%s[offsets.npy]", path);
        off = record_offsets(offs, no, 0, a.shape[0], what, zr_src_name(s), &n);
        if (!off)
            status = ZR_EXIT_FAILED;
    }
    if (!status && (ns != n || d > ZRS_MAX_NDIM)) {
        zr_error(INGEST_CMD, path, "shapes.npy holds %" PRIu64 " rows of %" PRIu64 " dims for %" PRIu64
                 " records (at most %d dims)", ns, d, n, ZRS_MAX_NDIM);
        status = ZR_EXIT_FAILED;
    }
    /* Each record's dims (until the first -1) must multiply to its length. */
    for (uint64_t i = 0; !status && i < n; i++) {
        uint64_t prod = 1, q = 0;
        for (; q < d && shapes[i * d + q] >= 0; q++)
            prod *= (uint64_t)shapes[i * d + q];
        int bad = prod != off[i + 1] - off[i];
        for (; q < d; q++)
            bad |= shapes[i * d + q] != -1;
        if (bad) {
            zr_error(INGEST_CMD, path, "record %" PRIu64 ": shapes row does not match its %" PRIu64
                     " elements", i, off[i + 1] - off[i]);
            status = ZR_EXIT_FAILED;
        }
    }
    if (!status)
        status = ingest_flat(s, &a, off, n, shapes, d, store, o);
    zr_src_close(s);
    free(off);
    free(offs);
    free(shapes);
    return status;
}

