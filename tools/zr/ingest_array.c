/*
 * ingest_array.c - zr ingest of n-d arrays: a .npy file, an IDX file
 * (gzipped or not) or each array of a .npz, records along axis 0, in
 * committed slices (a dense store, or a ragged one with --ragged).
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "ingest.h"

/* Records first..first+k of a Fortran-order array F, in C order. */
static void fortran_records(const unsigned char *F, const zr_array *a, uint64_t first, uint64_t k,
                            unsigned char *out)
{
    const size_t isz = zrs_dtype_itemsize(a->dtype), d = a->ndim;
    uint64_t st[ZRS_MAX_NDIM + 1], idx[ZRS_MAX_NDIM + 1];
    st[0] = 1;
    for (size_t j = 1; j < d; j++)
        st[j] = st[j - 1] * a->shape[j - 1];
    const uint64_t per = zr_array_count(a, 1);
    for (uint64_t r = 0; r < k; r++) {
        uint64_t off = first + r;
        memset(idx, 0, sizeof idx);
        for (uint64_t e = 0; e < per; e++) {
            memcpy(out, F + off * isz, isz);
            out += isz;
            for (size_t j = d - 1; j >= 1; j--) {
                off += st[j];
                if (++idx[j] < a->shape[j])
                    break;
                off -= st[j] * a->shape[j];
                idx[j] = 0;
            }
        }
    }
}

/* Pack k records of rec bytes (shape item[0..nd)) as ragged records. */
static void pack_rows(const unsigned char *rows, uint64_t k, uint64_t rec, const uint64_t *item,
                      size_t nd, unsigned char *packed, uint64_t *bounds)
{
    const uint64_t pre = ZRS_RAGGED_PREFIX_SIZE(nd);
    bounds[0] = 0;
    for (uint64_t i = 0; i < k; i++) {
        unsigned char *p = packed + bounds[i];
        uint64_t v = nd;
        memcpy(p, &v, 8); /* little-endian host (the store format's order) */
        for (size_t j = 0; j < nd; j++)
            memcpy(p + 8 + 8 * j, &item[j], 8);
        memcpy(p + pre, rows + i * rec, rec);
        bounds[i + 1] = bounds[i] + pre + rec;
    }
}

/* The buffers of one array's ingest. */
typedef struct array_job {
    const zr_array *a;
    uint64_t n, rec;          /* records, bytes a record */
    uint64_t per, first_per;  /* records a slice, and in the first slice */
    unsigned char *full;      /* a Fortran-order array, loaded whole */
    unsigned char *buf;       /* one slice of records, C order */
    unsigned char *packed;    /* --ragged: the slice with shape prefixes */
    uint64_t *bounds;         /* --ragged: record bounds in packed */
} array_job;

static void job_free(array_job *j)
{
    free(j->full);
    free(j->buf);
    free(j->packed);
    free(j->bounds);
}

/* Check the array holds records, size the slices and allocate them (and
 * load a Fortran-order array whole). 0 or an exit status, printed. */
static int job_init(array_job *j, zr_src *src, const zr_array *a, const ingest_opts *o)
{
    char err[ZR_IO_ERR];
    const char *name = zr_src_name(src);
    memset(j, 0, sizeof *j);
    j->a = a;
    if (a->ndim == 0) {
        zr_error(INGEST_CMD, name, "a 0-d array (shape ()) holds no records");
        return ZR_EXIT_FAILED;
    }
    const size_t isz = zrs_dtype_itemsize(a->dtype), nd = a->ndim - 1;
    j->n = a->shape[0];
    j->rec = isz * zr_array_count(a, 1);
    if (j->rec == 0 && j->n > 0) {
        zr_error(INGEST_CMD, name, "records of shape with a zero dimension hold no bytes");
        return ZR_EXIT_FAILED;
    }
    uint64_t slice, first_slice;
    slice_sizes(o, &slice, &first_slice);
    j->per = j->rec ? slice / j->rec : 1;
    j->first_per = j->rec ? first_slice / j->rec : 1;
    if (j->per == 0)
        j->per = 1;
    if (j->first_per < j->per)
        j->first_per = j->per;
    if (j->first_per > j->n)
        j->first_per = j->n ? j->n : 1;
    if (j->per > j->n)
        j->per = j->n ? j->n : 1;
    if (a->fortran && nd > 0 && j->n > 1) {
        j->full = malloc(j->n * j->rec);
        if (!j->full) {
            zr_error(INGEST_CMD, name, "out of memory: a Fortran-order array is loaded whole (%"
                     PRIu64 " bytes)", j->n * j->rec);
            return ZR_EXIT_FAILED;
        }
        if (zr_src_read_exact(src, j->full, j->n * j->rec, "the array data", err) < 0) {
            fprintf(stderr, "zr %s: %s\n", INGEST_CMD, err);
            return ZR_EXIT_FAILED;
        }
    }
    const uint64_t pre = ZRS_RAGGED_PREFIX_SIZE(nd);
    j->buf = malloc(j->first_per * j->rec + 1);
    j->packed = o->ragged ? malloc(j->first_per * (j->rec + pre) + 1) : NULL;
    j->bounds = o->ragged ? malloc((j->first_per + 1) * sizeof *j->bounds) : NULL;
    if (!j->buf || (o->ragged && (!j->packed || !j->bounds))) {
        zr_error(INGEST_CMD, name, "out of memory for a slice of %" PRIu64 " records", j->first_per);
        return ZR_EXIT_FAILED;
    }
    return 0;
}

/* Records done..done+c into j->buf (and j->packed): 0, or
 * ZR_EXIT_FAILED after naming the short input. */
static int job_read(array_job *j, zr_src *src, const ingest_opts *o, uint64_t done, uint64_t c,
                    zr_progress *pr)
{
    char err[ZR_IO_ERR];
    const zr_array *a = j->a;
    if (j->full) {
        fortran_records(j->full, a, done, c, j->buf);
    } else if (zr_src_read_exact(src, j->buf, c * j->rec, "the array data", err) < 0) {
        zr_progress_end(pr);
        zr_error(INGEST_CMD, zr_src_name(src), "%s (the header promises %" PRIu64 " records; %"
                 PRIu64 " were committed)", strchr(err, ':') ? strchr(err, ':') + 2 : err, j->n,
                 done);
        return ZR_EXIT_FAILED;
    }
    if (a->swap)
        zr_byteswap(j->buf, c * j->rec / zrs_dtype_itemsize(a->dtype), a->dtype);
    if (o->ragged)
        pack_rows(j->buf, c, j->rec, a->shape + 1, a->ndim - 1, j->packed, j->bounds);
    return 0;
}

/* Create (or open to append) the store with the first slice of c records
 * as the dictionary's training samples. */
static int job_open(array_job *j, zr_sink *k, const ingest_opts *o, uint64_t c)
{
    const zr_array *a = j->a;
    const void *data = o->ragged ? (const void *)j->packed : j->buf;
    uint64_t *sb = j->bounds, none[2] = {0, 0}, *db = NULL;
    if (!o->ragged) {
        /* Dense training samples: one per record. */
        db = malloc((c + 1) * sizeof *db);
        if (!db) {
            zr_error(INGEST_CMD, k->path, "out of memory for %" PRIu64 " sample bounds", c);
            return ZR_EXIT_FAILED;
        }
        for (uint64_t i = 0; i <= c; i++)
            db[i] = i * j->rec;
        sb = db;
    }
    int status = zr_sink_open(k, o->ragged ? ZRS_RAGGED : ZRS_DENSE, a->dtype, a->shape + 1,
                              a->ndim - 1, data, c ? sb : none, c);
    free(db);
    return status;
}

static int ingest_array(zr_src *src, const zr_array *a, const char *store, const ingest_opts *o)
{
    array_job j;
    int status = job_init(&j, src, a, o);
    if (status) {
        job_free(&j);
        return status;
    }
    zr_sink k = {.cmd = INGEST_CMD, .path = store, .o = &o->sink};
    zr_progress pr;
    zr_progress_start(&pr, store, j.n, "records", o->quiet);
    int opened = 0;
    for (uint64_t done = 0; status == 0 && (done < j.n || !opened);) {
        uint64_t want = opened ? j.per : j.first_per;
        uint64_t c = j.n - done < want ? j.n - done : want;
        if ((status = job_read(&j, src, o, done, c, &pr)) != 0)
            break;
        if (!opened) {
            status = job_open(&j, &k, o, c);
            opened = 1;
            if (status)
                break;
            zr_interrupt_install();
        }
        if (c > 0)
            status = zr_sink_append(&k, o->ragged ? (const void *)j.packed : j.buf,
                                    o->ragged ? j.bounds : NULL, c, c * j.rec);
        done += c;
        zr_progress_update(&pr, done, done * j.rec);
        if (zr_interrupted())
            break;
    }
    zr_progress_end(&pr);
    job_free(&j);
    return ingest_finish(o, &k, status, zr_src_name(src), "");
}

/* A .npy (idx 0) or IDX (idx 1) file. */
static int ingest_array_file(const char *path, const char *store, const ingest_opts *o, int idx)
{
    char err[ZR_IO_ERR];
    zr_src *src;
    if (zr_src_open_file(&src, path, err) < 0) {
        fprintf(stderr, "zr %s: %s\n", INGEST_CMD, err);
        return ZR_EXIT_OPEN;
    }
    zr_array a;
    int rc = idx ? zr_idx_read_header(src, &a, err) : zr_npy_read_header(src, &a, err);
    if (rc < 0) {
        zr_src_close(src);
        fprintf(stderr, "zr %s: %s\n", INGEST_CMD, err);
        return ZR_EXIT_FAILED;
    }
    rc = ingest_array(src, &a, store, o);
    zr_src_close(src);
    return rc;
}

int ingest_npy(const char *src, const char *store, const ingest_opts *o)
{
    return ingest_array_file(src, store, o, 0);
}

int ingest_idx(const char *src, const char *store, const ingest_opts *o)
{
    return ingest_array_file(src, store, o, 1);
}

/* --------------------------------------------------------------- .npz */

int ingest_npz(const char *path, const char *store, const ingest_opts *o)
{
    char err[ZR_IO_ERR];
    zr_zip_entry *ents;
    size_t n;
    if (zr_zip_list(path, &ents, &n, err) < 0) {
        fprintf(stderr, "zr %s: %s\n", INGEST_CMD, err);
        return ZR_EXIT_FAILED;
    }
    int status = 0, found = 0;
    if (!o->array && !o->ragged) {
        int have = 0;
        for (size_t i = 0; i < n; i++)
            have |= (!strcmp(ents[i].name, "data.npy")) << 0 |
                    (!strcmp(ents[i].name, "offsets.npy")) << 1 |
                    (!strcmp(ents[i].name, "shapes.npy")) << 2;
        if (have == 7 && n == 3) {
            free(ents);
            return ingest_ragged_npz(path, store, o);
        }
    }
    for (size_t i = 0; i < n && status == 0 && !zr_interrupted(); i++) {
        char name[256];
        snprintf(name, sizeof name, "%s", ents[i].name);
        size_t len = strlen(name);
        if (len < 5 || strcmp(name + len - 4, ".npy"))
            continue;
        name[len - 4] = '\0';
        if (o->array && strcmp(o->array, name))
            continue;
        found++;
        if (!o->array && (strchr(name, '/') || !strcmp(name, "..") || !strcmp(name, "."))) {
            zr_error(INGEST_CMD, path, "array name '%s' is not a plain file name; pick it with --array",
                     name);
            status = ZR_EXIT_FAILED;
            break;
        }
        char *dst = malloc(strlen(store) + len + 2);
        zr_src *src = NULL;
        if (!dst) {
            status = ZR_EXIT_FAILED;
            break;
        }
        if (o->array)
            strcpy(dst, store);
        else
            sprintf(dst, "%s/%s", store, name);
        if (zr_src_open_zip_member(&src, path, ents[i].name, err) < 0) {
            fprintf(stderr, "zr %s: %s\n", INGEST_CMD, err);
            status = ZR_EXIT_FAILED;
        } else {
            zr_array a;
            if (zr_npy_read_header(src, &a, err) < 0) {
                fprintf(stderr, "zr %s: %s\n", INGEST_CMD, err);
                status = ZR_EXIT_FAILED;
            } else {
                status = ingest_array(src, &a, dst, o);
            }
            zr_src_close(src);
        }
        free(dst);
    }
    free(ents);
    if (status == 0 && !found) {
        if (o->array)
            zr_error(INGEST_CMD, path, "no array named '%s'", o->array);
        else
            zr_error(INGEST_CMD, path, "holds no .npy arrays");
        status = ZR_EXIT_FAILED;
    }
    return status;
}

