/*
 * zr stats STORE... - statistics of a store's contents: record sizes
 * (logical bytes, from the record table), for ragged stores the shapes
 * (ndim, smallest and largest dims, elements per record), and the values:
 * count, min, max, mean and standard deviation over every element (NaNs
 * counted apart; complex numbers by their real parts), zeros. The value
 * pass reads every record (progress, Ctrl-C); --sizes skips it.
 */
#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "zr_cli.h"
#include "zr_io.h"

#define CMD "stats"
#define SLICE_BYTES ((uint64_t)16 << 20)
#define SIZE_WINDOW 65536

static int sizes_only;

static const zr_command STATS = {
    .name = CMD,
    .synopsis = "zr stats [OPTIONS] [--] STORE...",
    .args = "STORE...",
    .about = "Statistics of each store: record sizes; for ragged stores ndim, dims and\n"
             "elements per record; over all values count, min, max, mean, std, zeros and\n"
             "NaNs (complex numbers by their real part). Reading every value shows progress\n"
             "on a terminal and stops on Ctrl-C.",
    .example = "zr stats train-x\n"
               "zr stats --json --sizes docs",
    .notes = "With several stores the status is the highest that applies.",
};

typedef struct acc {
    zrs_store *s;
    zr_progress *pr;
    uint64_t count, nan, zeros, bytes;
    double min, max, mean, m2; /* Welford */
    uint64_t nd_min, nd_max, el_min, el_max, dim_min[ZRS_MAX_NDIM], dim_max[ZRS_MAX_NDIM];
    uint64_t records;
} acc;

static void add_values(acc *a, const unsigned char *p, uint64_t n)
{
    const zrs_dtype dt = zrs_get_dtype(a->s);
    for (uint64_t i = 0; i < n; i++) {
        double im, v = zr_elem_double(p, dt, i, &im);
        if (isnan(v)) {
            a->nan++;
            continue;
        }
        if (v == 0)
            a->zeros++;
        if (a->count == 0 || v < a->min)
            a->min = v;
        if (a->count == 0 || v > a->max)
            a->max = v;
        a->count++;
        double d = v - a->mean;
        a->mean += d / (double)a->count;
        a->m2 += d * (v - a->mean);
    }
}

static int slice_fn(void *vctx, const zr_slice *sl)
{
    acc *a = vctx;
    const zrs_dtype dt = zrs_get_dtype(a->s);
    const size_t isz = zrs_dtype_itemsize(dt);
    if (!sl->bounds) {
        add_values(a, sl->data, sl->nbytes / isz);
    } else {
        for (uint64_t i = 0; i < sl->count; i++) {
            uint64_t dims[ZRS_MAX_NDIM], off, size = sl->bounds[i + 1] - sl->bounds[i];
            size_t nd;
            int rc = zrs_ragged_decode(sl->data + sl->bounds[i], size, dt, &nd, dims, &off);
            if (rc < 0) {
                char what[48];
                snprintf(what, sizeof what, "record %" PRIu64, sl->first + i);
                zr_fail(CMD, zrs_path(a->s), what, rc);
                return ZR_EXIT_FAILED;
            }
            uint64_t el = (size - off) / isz;
            if (a->records == 0 || nd < a->nd_min)
                a->nd_min = nd;
            if (a->records == 0 || nd > a->nd_max)
                a->nd_max = nd;
            if (a->records == 0 || el < a->el_min)
                a->el_min = el;
            if (a->records == 0 || el > a->el_max)
                a->el_max = el;
            for (size_t j = 0; j < nd; j++) {
                if (a->dim_min[j] == 0 || dims[j] < a->dim_min[j])
                    a->dim_min[j] = dims[j];
                if (dims[j] > a->dim_max[j])
                    a->dim_max[j] = dims[j];
            }
            a->records++;
            add_values(a, sl->data + sl->bounds[i] + off, el);
        }
    }
    a->bytes += sl->nbytes;
    zr_progress_update(a->pr, sl->first + sl->count, a->bytes);
    return 0;
}

/* Record sizes from the table, in windows: min, max and sum into sz[3]. */
static int table_sizes(zrs_store *s, const char *path, uint64_t n, uint64_t out[3])
{
    zre_engine *e = zrs_engine(s);
    uint64_t *idx = malloc(SIZE_WINDOW * sizeof *idx), *sz = malloc(SIZE_WINDOW * sizeof *sz);
    int status = idx && sz ? 0 : ZR_EXIT_FAILED;
    if (status)
        zr_error(CMD, path, "out of memory");
    out[0] = out[1] = out[2] = 0;
    for (uint64_t at = 0; status == 0 && at < n; at += SIZE_WINDOW) {
        uint64_t k = n - at < SIZE_WINDOW ? n - at : SIZE_WINDOW;
        for (uint64_t i = 0; i < k; i++)
            idx[i] = at + i;
        int rc = zre_record_sizes(e, idx, k, sz);
        if (rc < 0) {
            zr_fail(CMD, path, "cannot read the record table", rc);
            status = ZR_EXIT_FAILED;
            break;
        }
        for (uint64_t i = 0; i < k; i++) {
            if (at + i == 0 || sz[i] < out[0])
                out[0] = sz[i];
            if (sz[i] > out[1])
                out[1] = sz[i];
            out[2] += sz[i];
        }
    }
    free(idx);
    free(sz);
    return status;
}

static json_object *json_finite(double v, int have)
{
    return have && isfinite(v) ? json_object_new_double(v) : NULL;
}

static void stats_json(const char *path, int dense, const char *dtype, uint64_t n,
                       const uint64_t sz[3], const acc *a, double std)
{
    json_object *j = json_object_new_object();
    zr_json_str(j, "store", path);
    zr_json_str(j, "kind", dense ? "dense" : "ragged");
    zr_json_str(j, "dtype", dtype);
    zr_json_u64(j, "records", n);
    json_object *rs = json_object_new_object();
    zr_json_u64(rs, "min", sz[0]);
    zr_json_u64(rs, "max", sz[1]);
    json_object_object_add(rs, "mean", json_object_new_double(n ? (double)sz[2] / (double)n : 0));
    zr_json_u64(rs, "total", sz[2]);
    json_object_object_add(j, "record_bytes", rs);
    if (!sizes_only) {
        json_object *v = json_object_new_object();
        zr_json_u64(v, "count", a->count);
        zr_json_u64(v, "nan", a->nan);
        zr_json_u64(v, "zeros", a->zeros);
        json_object_object_add(v, "min", json_finite(a->min, a->count > 0));
        json_object_object_add(v, "max", json_finite(a->max, a->count > 0));
        json_object_object_add(v, "mean", json_finite(a->mean, a->count > 0));
        json_object_object_add(v, "std", json_finite(std, a->count > 0));
        json_object_object_add(j, "values", v);
    }
    if (!sizes_only && !dense) {
        json_object *r = json_object_new_object();
        zr_json_u64(r, "ndim_min", a->nd_min);
        zr_json_u64(r, "ndim_max", a->nd_max);
        zr_json_u64(r, "elements_min", a->el_min);
        zr_json_u64(r, "elements_max", a->el_max);
        json_object *dmin = json_object_new_array(), *dmax = json_object_new_array();
        for (size_t k = 0; k < a->nd_max; k++) {
            json_object_array_add(dmin, json_object_new_uint64(a->dim_min[k]));
            json_object_array_add(dmax, json_object_new_uint64(a->dim_max[k]));
        }
        json_object_object_add(r, "dims_min", dmin);
        json_object_object_add(r, "dims_max", dmax);
        json_object_object_add(j, "shapes", r);
    }
    zr_json_print(j);
}

static void stats_text(const char *path, int dense, const char *dtype, uint64_t n,
                       const uint64_t sz[3], const acc *a, double std)
{
    printf("store:        %s (%s %s)\n", path, dense ? "dense" : "ragged", dtype);
    printf("records:      %" PRIu64 "\n", n);
    printf("record bytes: min %" PRIu64 ", mean %.1f, max %" PRIu64 " (logical%s)\n", sz[0],
           n ? (double)sz[2] / (double)n : 0.0, sz[1], dense ? "" : ", shape prefix included");
    if (sizes_only)
        return;
    if (!dense && a->records) {
        printf("ndim:         %" PRIu64 "..%" PRIu64 "\n", a->nd_min, a->nd_max);
        printf("elements:     %" PRIu64 "..%" PRIu64 " per record\n", a->el_min, a->el_max);
        for (size_t k = 0; k < a->nd_max; k++)
            printf("dim %zu:        %" PRIu64 "..%" PRIu64 "\n", k, a->dim_min[k], a->dim_max[k]);
    }
    printf("values:       %" PRIu64 " (%" PRIu64 " zero, %" PRIu64 " NaN)\n", a->count, a->zeros,
           a->nan);
    if (a->count)
        printf("min/max:      %.9g / %.9g\nmean/std:     %.9g / %.9g\n", a->min, a->max, a->mean,
               std);
}

static int stats_one(const char *path, const zr_opts *o)
{
    zrs_store *s;
    int rc = zrs_open_ex(&s, path, ZRE_OPEN_READONLY);
    if (rc < 0)
        return zr_fail_open(CMD, path, rc);
    const uint64_t n = zrs_length(s);
    uint64_t sz[3];
    int status = table_sizes(s, path, n, sz);
    zr_progress pr;
    acc a;
    memset(&a, 0, sizeof a);
    a.s = s;
    a.pr = &pr;
    if (status == 0 && !sizes_only) {
        zr_progress_start(&pr, path, n, "records", o->quiet);
        zr_interrupt_install();
        status = zr_read_slices(CMD, s, 0, n, SLICE_BYTES, slice_fn, &a);
        zr_progress_end(&pr);
    }
    const int dense = zrs_get_kind(s) == ZRS_DENSE;
    const char *dtype = zrs_dtype_str(zrs_get_dtype(s));
    zrs_close(s);
    if (status)
        return status;
    if (zr_interrupted())
        return zr_interrupt_exit(CMD, path, "statistics not complete");
    const double std = a.count > 1 ? sqrt(a.m2 / (double)a.count) : 0.0;
    if (o->json)
        stats_json(path, dense, dtype, n, sz, &a, std);
    else
        stats_text(path, dense, dtype, n, sz, &a, std);
    return 0;
}

int zr_cmd_stats(int argc, char **argv)
{
    static const zr_option extra[] = {
        ZR_OPT_FLAG(NULL, "--sizes", &sizes_only,
                    "record sizes only (from the record table; no value pass)"),
        ZR_OPT_END,
    };
    static const zr_store_loop loop = {
        .cmd = &STATS,
        .json_help = "one JSON object per store, one per line",
        .blank_between = 1,
        .progress = 1,
        .extra = extra,
        .one = stats_one,
    };
    return zr_run_per_store(&loop, argc, argv);
}
