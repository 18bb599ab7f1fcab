/*
 * zr export STORE -o FILE - write a store's records to a numpy file:
 *   dense   one .npy of shape (records, *item_shape) in the store's dtype;
 *   ragged  one .npz (stored, zip64) with data.npy (every payload back to
 *           back, 1-d, the store's dtype), offsets.npy (records + 1 int64:
 *           record i is data[offsets[i]:offsets[i+1]]) and shapes.npy
 *           (records x D int64, D the largest ndim; dims past a record's
 *           own ndim are -1). np.load reads both; zr ingest takes the .npz
 *           back as a ragged store.
 * Reads in slices through the public gather contract (bounded memory,
 * ragged offsets and shapes excepted: 9 bytes per record plus 8 per dim). FILE
 * must not exist (--force replaces it); a failed or interrupted export
 * removes the partial file.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "zr_cli.h"
#include "zr_io.h"
#include "zr_platform.h"

#define CMD "export"
#define SLICE_BYTES ((uint64_t)16 << 20)

static const zr_command EXPORT = {
    .name = CMD,
    .synopsis = "zr export [OPTIONS] STORE -o FILE",
    .args = "STORE",
    .about = "Write every record of STORE to FILE:\n"
             "  a dense store   FILE.npy of shape (records, *item_shape)\n"
             "  a ragged store  FILE.npz holding data (all payloads back to back, 1-d),\n"
             "                  offsets (records+1 int64: record i is data[offsets[i]:\n"
             "                  offsets[i+1]]) and shapes (records x max-ndim int64, -1 past\n"
             "                  a record's own ndim)\n"
             "A failed or interrupted export removes the partial file.",
    .example = "zr export train-x -o train-x.npy && python3 -c \"import numpy; "
               "print(numpy.load('train-x.npy').shape)\"",
};

typedef struct export_ctx {
    zrs_store *s;
    zrp_file f;                /* dense: the .npy being written ... */
    uint64_t pos;              /* ... and its length so far */
    zr_zip_writer *z;          /* ragged */
    uint64_t *offsets;         /* ragged: records + 1, in elements */
    uint8_t *ndims;            /* ragged: each record's ndim */
    uint64_t *dims, ndims_total, dims_cap; /* ragged: every record's dims, back to back */
    size_t max_ndim;
    uint64_t bytes;
    const char *out;
    int created;               /* out was created (removed again on failure) */
    zr_progress *pr;
} export_ctx;

static int dense_slice(void *vctx, const zr_slice *sl)
{
    export_ctx *c = vctx;
    int rc = zrp_pwrite_all(c->f, sl->data, (size_t)sl->nbytes, c->pos);
    if (rc < 0) {
        zr_error(CMD, c->out, "write failed: %s", strerror(-rc));
        return ZR_EXIT_FAILED;
    }
    c->pos += sl->nbytes;
    c->bytes += sl->nbytes;
    zr_progress_update(c->pr, sl->first + sl->count, c->bytes);
    return 0;
}

static int ragged_slice(void *vctx, const zr_slice *sl)
{
    export_ctx *c = vctx;
    char err[ZR_IO_ERR];
    const zrs_dtype dt = zrs_get_dtype(c->s);
    const size_t isz = zrs_dtype_itemsize(dt);
    for (uint64_t i = 0; i < sl->count; i++) {
        const unsigned char *r = sl->data + sl->bounds[i];
        uint64_t size = sl->bounds[i + 1] - sl->bounds[i], dims[ZRS_MAX_NDIM], off;
        size_t nd;
        int rc = zrs_ragged_decode(r, size, dt, &nd, dims, &off);
        if (rc < 0) {
            char what[64];
            snprintf(what, sizeof what, "record %" PRIu64, sl->first + i);
            zr_fail(CMD, zrs_path(c->s), what, rc);
            return ZR_EXIT_FAILED;
        }
        uint64_t rec = sl->first + i;
        c->offsets[rec + 1] = c->offsets[rec] + (size - off) / isz;
        c->ndims[rec] = (uint8_t)nd;
        if (c->ndims_total + nd > c->dims_cap) {
            uint64_t nc = (c->dims_cap + nd) * 2 + 64;
            uint64_t *nv = realloc(c->dims, nc * sizeof *nv);
            if (!nv) {
                zr_error(CMD, zrs_path(c->s), "out of memory for the shapes");
                return ZR_EXIT_FAILED;
            }
            c->dims = nv;
            c->dims_cap = nc;
        }
        memcpy(c->dims + c->ndims_total, dims, nd * sizeof *dims);
        c->ndims_total += nd;
        if (nd > c->max_ndim)
            c->max_ndim = nd;
        if (zr_zip_write(c->z, r + off, (size_t)(size - off), err) < 0) {
            fprintf(stderr, "zr %s: %s\n", CMD, err);
            return ZR_EXIT_FAILED;
        }
        c->bytes += size - off;
    }
    zr_progress_update(c->pr, sl->first + sl->count, c->bytes);
    return 0;
}

/* A small whole member: header + data. */
static int small_member(zr_zip_writer *z, const char *name, const char *descr,
                        const uint64_t *shape, size_t ndim, const void *data, size_t n, char *err)
{
    char h[4096];
    size_t hl = zr_npy_header(h, sizeof h, descr, shape, ndim);
    if (zr_zip_begin(z, name, err) < 0 || zr_zip_write(z, h, hl, err) < 0 ||
        zr_zip_write(z, data, n, err) < 0 || zr_zip_end(z, err) < 0)
        return -1;
    return 0;
}

static int export_ragged(export_ctx *c, uint64_t n, char *err)
{
    const char *descr = zrs_dtype_str(zrs_get_dtype(c->s));
    c->offsets = calloc(n + 1, sizeof *c->offsets);
    c->ndims = malloc(n ? n : 1);
    if (!c->offsets || !c->ndims) {
        zr_error(CMD, zrs_path(c->s), "out of memory for the offsets and shapes of %" PRIu64
                 " records", n);
        return ZR_EXIT_FAILED;
    }
    size_t hl = zr_npy_header_max(1);
    if (zr_zip_begin_reserved(c->z, "data.npy", hl, err) < 0) {
        fprintf(stderr, "zr %s: %s\n", CMD, err);
        return ZR_EXIT_FAILED;
    }
    int status = zr_read_slices(CMD, c->s, 0, n, SLICE_BYTES, ragged_slice, c);
    if (status || zr_interrupted())
        return status;
    char h[512];
    uint64_t total = c->offsets[n];
    zr_npy_header_padded(h, hl, descr, &total, 1);
    if (zr_zip_set_head(c->z, h, err) < 0 || zr_zip_end(c->z, err) < 0) {
        fprintf(stderr, "zr %s: %s\n", CMD, err);
        return ZR_EXIT_FAILED;
    }
    uint64_t oshape = n + 1;
    if (small_member(c->z, "offsets.npy", "<i8", &oshape, 1, c->offsets,
                     (size_t)(n + 1) * sizeof *c->offsets, err) < 0) {
        fprintf(stderr, "zr %s: %s\n", CMD, err);
        return ZR_EXIT_FAILED;
    }
    /* shapes.npy: D = max ndim columns, -1 past each record's own ndim,
     * written in blocks of rows. */
    const size_t d = c->max_ndim;
    uint64_t sshape[2] = {n, d};
    hl = zr_npy_header(h, sizeof h, "<i8", sshape, 2);
    if (zr_zip_begin(c->z, "shapes.npy", err) < 0 || zr_zip_write(c->z, h, hl, err) < 0) {
        fprintf(stderr, "zr %s: %s\n", CMD, err);
        return ZR_EXIT_FAILED;
    }
    enum { ROWS = 4096 };
    int64_t *blk = malloc(ROWS * (d ? d : 1) * sizeof *blk);
    if (!blk) {
        zr_error(CMD, c->out, "out of memory");
        return ZR_EXIT_FAILED;
    }
    uint64_t at = 0;
    for (uint64_t i = 0; i < n; i += ROWS) {
        uint64_t k = n - i < ROWS ? n - i : ROWS;
        for (uint64_t r = 0; r < k; r++) {
            size_t nd = c->ndims[i + r];
            for (size_t q = 0; q < d; q++)
                blk[r * d + q] = q < nd ? (int64_t)c->dims[at + q] : -1;
            at += nd;
        }
        if (zr_zip_write(c->z, blk, (size_t)(k * d * sizeof *blk), err) < 0) {
            free(blk);
            fprintf(stderr, "zr %s: %s\n", CMD, err);
            return ZR_EXIT_FAILED;
        }
    }
    free(blk);
    if (zr_zip_end(c->z, err) < 0) {
        fprintf(stderr, "zr %s: %s\n", CMD, err);
        return ZR_EXIT_FAILED;
    }
    return 0;
}

/* A dense store into a new .npy at c->out: ZR_EXIT_OPEN when it cannot
 * be created, else the status of the writing. */
static int export_dense(export_ctx *c, uint64_t n)
{
    zrs_store *s = c->s;
    int rc = zrp_open(&c->f, c->out, ZRP_WRITE | ZRP_CREATE | ZRP_EXCLUSIVE);
    if (rc < 0) {
        zr_error(CMD, c->out, "cannot create: %s", strerror(-rc));
        return ZR_EXIT_OPEN;
    }
    c->created = 1;
    uint64_t shape[ZRS_MAX_NDIM + 1];
    shape[0] = n;
    memcpy(shape + 1, zrs_item_shape(s), zrs_item_ndim(s) * sizeof *shape);
    char h[4096];
    size_t hl = zr_npy_header(h, sizeof h, zrs_dtype_str(zrs_get_dtype(s)), shape,
                              zrs_item_ndim(s) + 1);
    int status = 0;
    rc = zrp_pwrite_all(c->f, h, hl, 0);
    c->pos = hl;
    if (rc < 0) {
        zr_error(CMD, c->out, "write failed: %s", strerror(-rc));
        status = ZR_EXIT_FAILED;
    }
    if (status == 0)
        status = zr_read_slices(CMD, s, 0, n, SLICE_BYTES, dense_slice, c);
    if (status == 0 && !zr_interrupted() && (rc = zrp_fsync(c->f)) < 0) {
        zr_error(CMD, c->out, "fsync failed: %s", strerror(-rc));
        status = ZR_EXIT_FAILED;
    }
    zrp_close(&c->f);
    return status;
}

/* A ragged store into a new .npz at c->out (see export_ragged). */
static int export_npz(export_ctx *c, uint64_t n)
{
    char err[ZR_IO_ERR];
    if (zr_zip_create(&c->z, c->out, err) < 0) {
        fprintf(stderr, "zr %s: %s\n", CMD, err);
        return ZR_EXIT_OPEN;
    }
    c->created = 1;
    int status = export_ragged(c, n, err);
    if (status == 0 && !zr_interrupted() && zr_zip_finish(c->z, err) < 0) {
        fprintf(stderr, "zr %s: %s\n", CMD, err);
        status = ZR_EXIT_FAILED;
    } else if (status || zr_interrupted()) {
        zr_zip_abandon(c->z);
    }
    c->z = NULL;
    return status;
}

static void report(const char *store, const char *out, int json, int dense, uint64_t n,
                   uint64_t data_bytes)
{
    if (json) {
        json_object *j = json_object_new_object();
        zr_json_str(j, "store", store);
        zr_json_str(j, "output", out);
        zr_json_str(j, "format", dense ? "npy" : "npz");
        zr_json_u64(j, "records", n);
        zr_json_u64(j, "data_bytes", data_bytes);
        zr_json_print(j);
    } else {
        printf("%s: %" PRIu64 " records from %s (%s)\n", out, n, store,
               dense ? ".npy" : ".npz: data, offsets, shapes");
    }
}

int zr_cmd_export(int argc, char **argv)
{
    const char *out = NULL;
    int force = 0, json = 0, quiet = 0;
    const zr_option options[] = {
        ZR_OPT_VALUE("-o", "--output", "FILE", &out, "the file to write (must not exist)"),
        ZR_OPT_FLAG(NULL, "--force", &force, "replace FILE if it exists"),
        ZR_OPT_FLAG(NULL, "--json", &json, "a JSON summary on stdout"),
        ZR_OPT_QUIET(&quiet),
        ZR_OPT_END,
    };
    zr_args args;
    int status = zr_parse_args(&EXPORT, options, argc, argv, &args);
    if (status != ZR_ARGS_GO)
        return status;
    if (!out)
        return zr_usage(&EXPORT, "missing -o FILE");
    const char *store = args.v[0];
    zrs_store *s;
    int rc = zrs_open_ex(&s, store, ZRE_OPEN_READONLY);
    if (rc < 0)
        return zr_fail_open(CMD, store, rc);
    if (zrp_path_exists(out)) {
        if (!force || zrp_is_dir(out)) {
            zrs_close(s);
            zr_error(CMD, out, zrp_is_dir(out) ? "is a directory" : "already exists (--force "
                                                                      "replaces it)");
            return ZR_EXIT_OPEN;
        }
        zrp_unlink(out);
    }
    const int dense = zrs_get_kind(s) == ZRS_DENSE;
    const uint64_t n = zrs_length(s);
    zr_progress pr;
    export_ctx c = {.s = s, .out = out, .pr = &pr};
    zr_interrupt_install();
    zr_progress_start(&pr, out, n, "records", quiet);
    status = dense ? export_dense(&c, n) : export_npz(&c, n);
    zr_progress_end(&pr);
    free(c.offsets);
    free(c.ndims);
    free(c.dims);
    const uint64_t data_bytes = dense ? n * zrs_record_size(s) : c.bytes;
    zrs_close(s);
    if (status && !c.created)
        return status;
    if (status || zr_interrupted()) {
        zrp_unlink(out); /* never leave a partial file that looks whole */
        if (status == 0)
            return zr_interrupt_exit(CMD, store, "the partial output was removed");
        return status;
    }
    report(store, out, json, dense, n, data_bytes);
    return 0;
}
