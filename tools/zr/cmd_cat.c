/*
 * zr cat STORE INDEX... (also "zr dump") - print records as numpy prints
 * them: a "record I: shape S, dtype D" line, then the values in nested
 * brackets, columns aligned, and - past 1000 elements - only the first
 * and last 3 along each axis with "..." between (numpy's threshold and
 * edgeitems). --raw writes the payload bytes instead (no shape prefix),
 * --json one object per record with the full values.
 * INDEX is an integer (negative counts from the end) or START:STOP
 * (python slice, either end may be left out).
 */
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "zr_cli.h"
#include "zr_io.h"

#define THRESHOLD 1000
#define EDGE 3
#define LINE_WIDTH 75

#define STR_(x) #x
#define STR(x) STR_(x)

static const zr_command CAT = {
    .name = "cat",
    .synopsis = "zr cat [OPTIONS] STORE INDEX...\n"
                "zr dump [OPTIONS] STORE INDEX...",
    .args = "STORE INDEX...",
    .about = "Print records as numpy prints arrays (shape, dtype, values; past " STR(THRESHOLD)
             " elements\nonly the first and last " STR(EDGE) " along each axis). INDEX is an "
             "integer (negative\ncounts from the end) or START:STOP; an INDEX past the end "
             "exits 4.",
    .example = "zr cat train-y 0:10\n"
               "zr cat train-x -1\n"
               "zr cat --raw docs 3 > third-file",
    .flags = ZR_ARGS_NUMBERS,
};

static const char *numpy_name(zrs_dtype dt)
{
    static const char *const names[] = {"bool",   "int8",    "int16",     "int32",     "int64",
                                        "uint8",  "uint16",  "uint32",    "uint64",    "float16",
                                        "float32", "float64", "complex64", "complex128"};
    return (unsigned)dt < sizeof names / sizeof names[0] ? names[dt] : "?";
}

static void fmt_float(double v, int digits, char *buf, size_t cap)
{
    if (isnan(v)) {
        snprintf(buf, cap, "nan");
        return;
    }
    if (isinf(v)) {
        snprintf(buf, cap, v < 0 ? "-inf" : "inf");
        return;
    }
    snprintf(buf, cap, "%.*g", digits, v);
    if (!strpbrk(buf, ".e"))
        strncat(buf, ".", cap - strlen(buf) - 1);
}

/* numpy's text for element i. */
static void fmt_elem(const unsigned char *p, zrs_dtype dt, uint64_t i, char *buf, size_t cap)
{
    const size_t isz = zrs_dtype_itemsize(dt);
    if (dt == ZRS_INT64 || dt == ZRS_UINT64) {
        int64_t v;
        memcpy(&v, p + i * isz, 8);
        if (dt == ZRS_INT64)
            snprintf(buf, cap, "%" PRId64, v);
        else
            snprintf(buf, cap, "%" PRIu64, (uint64_t)v);
        return;
    }
    double im, re = zr_elem_double(p, dt, i, &im);
    int digits = dt == ZRS_FLOAT16 ? 4 : 8;
    switch (dt) {
    case ZRS_BOOL: snprintf(buf, cap, re != 0 ? "True" : "False"); break;
    case ZRS_FLOAT16: case ZRS_FLOAT32: case ZRS_FLOAT64: fmt_float(re, digits, buf, cap); break;
    case ZRS_COMPLEX64: case ZRS_COMPLEX128: {
        char a[64], b[64];
        fmt_float(re, 8, a, sizeof a);
        fmt_float(fabs(im), 8, b, sizeof b);
        snprintf(buf, cap, "%s%s%sj", a, signbit(im) ? "-" : "+", b);
        break;
    }
    default: snprintf(buf, cap, "%.0f", re);
    }
}

typedef struct printer {
    const unsigned char *p;
    zrs_dtype dt;
    size_t ndim;
    const uint64_t *dims;
    uint64_t strides[ZRS_MAX_NDIM]; /* in elements */
    int trunc, width, col;
} printer;

/* Along an axis of length n: is position k shown; the positions are
 * 0..EDGE-1 and n-EDGE..n-1 when truncating. */
static uint64_t shown_count(const printer *pr, uint64_t n)
{
    return pr->trunc && n > 2 * EDGE ? 2 * EDGE : n;
}
static uint64_t shown_pos(const printer *pr, uint64_t n, uint64_t k)
{
    return pr->trunc && n > 2 * EDGE && k >= EDGE ? n - 2 * EDGE + k : k;
}

static void width_pass(printer *pr, size_t axis, uint64_t base)
{
    uint64_t n = pr->dims[axis], c = shown_count(pr, n);
    for (uint64_t k = 0; k < c; k++) {
        uint64_t at = base + shown_pos(pr, n, k) * pr->strides[axis];
        if (axis + 1 < pr->ndim) {
            width_pass(pr, axis + 1, at);
        } else {
            char b[160];
            fmt_elem(pr->p, pr->dt, at, b, sizeof b);
            int w = (int)strlen(b);
            if (w > pr->width)
                pr->width = w;
        }
    }
}

static void emit(printer *pr, const char *s)
{
    fputs(s, stdout);
    pr->col += (int)strlen(s);
}

static void print_axis(printer *pr, size_t axis, uint64_t base)
{
    uint64_t n = pr->dims[axis], c = shown_count(pr, n);
    emit(pr, "[");
    for (uint64_t k = 0; k < c; k++) {
        uint64_t at = base + shown_pos(pr, n, k) * pr->strides[axis];
        int gap = pr->trunc && n > 2 * EDGE && k == EDGE;
        if (axis + 1 == pr->ndim) {
            char b[160], cell[200];
            if (gap) {
                if (pr->col + 4 > LINE_WIDTH) {
                    printf("\n%*s", (int)axis + 1, "");
                    pr->col = (int)axis + 1;
                }
                emit(pr, " ...");
            }
            fmt_elem(pr->p, pr->dt, at, b, sizeof b);
            snprintf(cell, sizeof cell, "%s%*s", k ? " " : "", pr->width, b);
            if (k && pr->col + (int)strlen(cell) + 1 > LINE_WIDTH) {
                printf("\n%*s", (int)axis + 1, "");
                pr->col = (int)axis + 1;
                snprintf(cell, sizeof cell, "%*s", pr->width, b);
            }
            emit(pr, cell);
        } else {
            if (k) {
                size_t blank = pr->ndim - axis - 2;
                printf("\n");
                for (size_t b = 0; b < blank; b++)
                    printf("\n");
                printf("%*s", (int)axis + 1, "");
                pr->col = (int)axis + 1;
            }
            if (gap) {
                printf("...\n%*s", (int)axis + 1, "");
                for (size_t b = 0; b + 2 < pr->ndim - axis; b++)
                    printf("\n%*s", (int)axis + 1, "");
                pr->col = (int)axis + 1;
            }
            print_axis(pr, axis + 1, at);
        }
    }
    emit(pr, "]");
}

static void print_values(const unsigned char *p, zrs_dtype dt, const uint64_t *dims, size_t ndim)
{
    if (ndim == 0) {
        char b[160];
        fmt_elem(p, dt, 0, b, sizeof b);
        printf("%s\n", b);
        return;
    }
    printer pr = {.p = p, .dt = dt, .ndim = ndim, .dims = dims};
    uint64_t total = 1;
    for (size_t j = ndim; j-- > 0;) {
        pr.strides[j] = total;
        total *= dims[j];
    }
    pr.trunc = total > THRESHOLD;
    width_pass(&pr, 0, 0);
    print_axis(&pr, 0, 0);
    printf("\n");
}

static json_object *json_values(const unsigned char *p, zrs_dtype dt, const uint64_t *dims,
                                size_t ndim, uint64_t base, const uint64_t *strides)
{
    if (ndim == 0) {
        if (dt == ZRS_INT64 || dt == ZRS_UINT64) {
            int64_t v;
            memcpy(&v, p + base * 8, 8);
            return dt == ZRS_INT64 ? json_object_new_int64(v) : json_object_new_uint64((uint64_t)v);
        }
        double im, re = zr_elem_double(p, dt, base, &im);
        if (dt == ZRS_BOOL)
            return json_object_new_boolean(re != 0);
        if (dt == ZRS_COMPLEX64 || dt == ZRS_COMPLEX128) {
            json_object *a = json_object_new_array();
            json_object_array_add(a, isfinite(re) ? json_object_new_double(re) : NULL);
            json_object_array_add(a, isfinite(im) ? json_object_new_double(im) : NULL);
            return a;
        }
        if (dt == ZRS_FLOAT16 || dt == ZRS_FLOAT32 || dt == ZRS_FLOAT64)
            return isfinite(re) ? json_object_new_double(re) : NULL;
        return json_object_new_int64((int64_t)re);
    }
    json_object *a = json_object_new_array();
    for (uint64_t k = 0; k < dims[0]; k++)
        json_object_array_add(a, json_values(p, dt, dims + 1, ndim - 1, base + k * strides[0],
                                             strides + 1));
    return a;
}

static int cat_one(const zr_command *cmd, zrs_store *s, uint64_t i, int raw, int json)
{
    const int dense = zrs_get_kind(s) == ZRS_DENSE;
    const zrs_dtype dt = zrs_get_dtype(s);
    int64_t idx = (int64_t)i;
    uint64_t size = dense ? zrs_record_size(s) : 0;
    int rc = dense ? 0 : zrs_ragged_sizes(s, &idx, 1, &size);
    unsigned char *buf = rc == 0 ? malloc(size ? size : 1) : NULL;
    if (rc == 0 && !buf) {
        zr_error(cmd->name, zrs_path(s), "out of memory for record %" PRIu64, i);
        return ZR_EXIT_FAILED;
    }
    uint64_t bounds[2] = {0, size};
    if (rc == 0)
        rc = dense ? zrs_gather_dense(s, &idx, 1, buf, size)
                   : zrs_gather_ragged(s, &idx, 1, buf, size, bounds);
    uint64_t dims[ZRS_MAX_NDIM], off = 0;
    size_t nd = dense ? zrs_item_ndim(s) : 0;
    if (dense)
        memcpy(dims, zrs_item_shape(s), nd * sizeof *dims);
    else if (rc == 0)
        rc = zrs_ragged_decode(buf, size, dt, &nd, dims, &off);
    if (rc < 0) {
        free(buf);
        char what[48];
        snprintf(what, sizeof what, "record %" PRIu64, i);
        zr_fail(cmd->name, zrs_path(s), what, rc);
        return ZR_EXIT_FAILED;
    }
    const unsigned char *p = buf + off;
    char shape[512];
    zr_format_shape(dims, nd, shape, sizeof shape);
    if (raw) {
        fwrite(p, 1, (size_t)(size - off), stdout);
    } else if (json) {
        json_object *j = json_object_new_object();
        zr_json_u64(j, "index", i);
        json_object *sh = json_object_new_array();
        uint64_t strides[ZRS_MAX_NDIM], t = 1;
        for (size_t k = nd; k-- > 0;) {
            strides[k] = t;
            t *= dims[k];
        }
        for (size_t k = 0; k < nd; k++)
            json_object_array_add(sh, json_object_new_uint64(dims[k]));
        json_object_object_add(j, "shape", sh);
        zr_json_str(j, "dtype", numpy_name(dt));
        json_object_object_add(j, "values", json_values(p, dt, dims, nd, 0, strides));
        zr_json_print(j);
    } else {
        printf("record %" PRIu64 ": shape %s, dtype %s\n", i, shape, numpy_name(dt));
        print_values(p, dt, dims, nd);
    }
    free(buf);
    return 0;
}

int zr_cmd_cat(int argc, char **argv)
{
    zr_command cmd = CAT;
    cmd.name = argv[0]; /* "cat" or "dump", as invoked */
    int raw = 0, json = 0;
    const zr_option options[] = {
        ZR_OPT_FLAG(NULL, "--raw", &raw, "write the records' payload bytes to stdout, back to back"),
        ZR_OPT_FLAG(NULL, "--json", &json, "one JSON object per record: index, shape, dtype, values"),
        ZR_OPT_END,
    };
    zr_args args;
    int status = zr_parse_args(&cmd, options, argc, argv, &args);
    if (status != ZR_ARGS_GO)
        return status;
    if (raw && json)
        return zr_usage(&cmd, "give --raw or --json, not both");
    status = 0;
    const char *store = args.v[0];
    zrs_store *s;
    int rc = zrs_open_ex(&s, store, ZRE_OPEN_READONLY);
    if (rc < 0)
        return zr_fail_open(cmd.name, store, rc);
    const uint64_t n = zrs_length(s);
    zr_interrupt_install();
    for (int k = 1; k < args.n && status == 0; k++) {
        uint64_t lo = 0, hi = 0;
        status = zr_parse_range(&cmd, store, args.v[k], n, &lo, &hi);
        for (uint64_t r = lo; status == 0 && r < hi && !zr_interrupted(); r++)
            status = cat_one(&cmd, s, r, raw, json);
    }
    zrs_close(s);
    fflush(stdout);
    if (status == 0 && zr_interrupted())
        return zr_interrupt_exit(cmd.name, store, "output stopped");
    return status;
}
