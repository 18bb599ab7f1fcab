/*
 * source.c - a collection as an item source for a training loader: one
 * item per trajectory frame (and, when asked, per system-only record
 * holding the column), resolved with carry-forward on every read, handed
 * out as numbered streams (zmrec.h, "item sources").
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "zmr_internal.h"

/* An item's value: one column as stored, or several 1-d f64 columns
 * (x, y, z) side by side as one (n, k) array; owner holds the columns. */
typedef struct src_val {
    zmr_frame *owner;
    size_t k;
    zmr_column c[ZMR_SOURCE_MAX_COLUMNS];
    uint64_t ndim, shape[ZMR_MAX_NDIM], nbytes;
} src_val;

struct zmr_source {
    zmr_reader *r;
    char *block, *column; /* column: one name or "x,y,z" */
    size_t ncols;
    char *cols[ZMR_SOURCE_MAX_COLUMNS];
    uint64_t n, cap;
    uint64_t *rec;
    int64_t *frame; /* -1: the record's system */
    size_t nscalars;
    char **scalars;
};

static char *src_strdup(const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d)
        memcpy(d, s, n);
    return d;
}

void zmr_source_free(zmr_source *s)
{
    if (s == NULL)
        return;
    zmr_close(s->r);
    free(s->block);
    free(s->column);
    for (size_t k = 0; k < s->ncols; k++)
        free(s->cols[k]);
    free(s->rec);
    free(s->frame);
    for (size_t k = 0; k < s->nscalars; k++)
        free(s->scalars[k]);
    free(s->scalars);
    free(s);
}

/* A read failure of item (rec, frame), its detail kept behind the item. */
static int src_fail(int st, uint64_t rec, int64_t frame)
{
    if (frame < 0)
        return zmr_err(st, "mrec record %llu (system): %s", (unsigned long long)rec, zmr_last_error());
    return zmr_err(st, "mrec record %llu frame %lld: %s", (unsigned long long)rec, (long long)frame,
                   zmr_last_error());
}

static int src_push(zmr_source *s, uint64_t rec, int64_t frame)
{
    if (s->n == s->cap) {
        uint64_t cap = s->cap ? 2 * s->cap : 64;
        uint64_t *r = realloc(s->rec, cap * sizeof *r);
        if (r == NULL)
            return zmr_err(ZMR_ENOMEM, "mrec source: out of memory for %llu items", (unsigned long long)cap);
        s->rec = r;
        int64_t *f = realloc(s->frame, cap * sizeof *f);
        if (f == NULL)
            return zmr_err(ZMR_ENOMEM, "mrec source: out of memory for %llu items", (unsigned long long)cap);
        s->frame = f;
        s->cap = cap;
    }
    s->rec[s->n] = rec;
    s->frame[s->n] = frame;
    s->n++;
    return ZMR_OK;
}

/* Item i's resolved value; v->owner (free it) holds its columns. */
static int src_column(const zmr_source *s, uint64_t i, src_val *v)
{
    uint64_t rec = s->rec[i];
    int64_t k = s->frame[i];
    zmr_frame *f = NULL;
    size_t b;
    int st;
    v->owner = NULL;
    if (k < 0) {
        if ((st = zmr_read_system(s->r, rec, &f)) < 0)
            return src_fail(st, rec, k);
        if (f == NULL || zmr_frame_find_block(f, s->block, &b) < 0) {
            zmr_frame_free(f);
            return zmr_err(ZMR_ECORRUPT, "mrec record %llu: the system has no block '%s'",
                           (unsigned long long)rec, s->block);
        }
    } else {
        /* carry-forward: the last update at or before k holding the block */
        for (int64_t j = k;; j--) {
            if (j < 0)
                return zmr_err(ZMR_ECORRUPT, "mrec record %llu frame %lld: no update sets block '%s'",
                               (unsigned long long)rec, (long long)k, s->block);
            if ((st = zmr_read_update(s->r, rec, (uint64_t)j, &f)) < 0)
                return src_fail(st, rec, j);
            if (zmr_frame_find_block(f, s->block, &b) == ZMR_OK)
                break;
            zmr_frame_free(f);
            f = NULL;
        }
    }
    v->k = s->ncols;
    for (size_t c = 0; c < s->ncols; c++) {
        zmr_column *col = &v->c[c];
        int missing = zmr_frame_find_column(f, s->block, s->cols[c], col) < 0;
        const char *why = missing ? "is missing"
                          : col->dtype != ZMR_F64 ? "is not an f64 column"
                          : s->ncols > 1 && (col->ndim != 1 || col->shape[0] != v->c[0].shape[0])
                              ? "is not a 1-d column of the first one's length" : NULL;
        if (why) {
            zmr_frame_free(f);
            return zmr_err(ZMR_ECORRUPT, "mrec record %llu frame %lld: %s/%s %s", (unsigned long long)rec,
                           (long long)k, s->block, s->cols[c], why);
        }
    }
    if (s->ncols == 1) {
        v->ndim = v->c[0].ndim;
        memcpy(v->shape, v->c[0].shape, 8 * v->ndim);
        v->nbytes = v->c[0].nbytes;
    } else {
        v->ndim = 2;
        v->shape[0] = v->c[0].shape[0];
        v->shape[1] = s->ncols;
        v->nbytes = v->shape[0] * s->ncols * 8;
    }
    v->owner = f;
    return ZMR_OK;
}

static uint64_t src_packed_size(const src_val *v) { return 8 + 8 * v->ndim + v->nbytes; }

/* v as one packed record [u64 ndim][u64 dims][values row-major] at dst */
static void src_val_pack(const src_val *v, unsigned char *dst)
{
    uint64_t nd = v->ndim;
    memcpy(dst, &nd, 8);
    memcpy(dst + 8, v->shape, 8 * nd);
    dst += 8 + 8 * nd;
    if (v->k == 1) {
        if (v->nbytes)
            memcpy(dst, v->c[0].data, v->nbytes);
        return;
    }
    for (uint64_t r = 0; r < v->shape[0]; r++)
        for (size_t c = 0; c < v->k; c++)
            memcpy(dst + 8 * (r * v->k + c), (const double *)v->c[c].data + r, 8);
}

/* Scalar `name` of item i: *out as f64, *iout as i64, *present 0 when the
 * item has none. */
static int src_scalar(const zmr_source *s, uint64_t i, const char *name, double *out, int64_t *iout,
                      int *present)
{
    uint64_t rec = s->rec[i];
    int64_t k = s->frame[i];
    zmr_frame *f = NULL;
    int st = k < 0 ? zmr_read_system(s->r, rec, &f) : zmr_read_update(s->r, rec, (uint64_t)k, &f);
    if (st < 0)
        return src_fail(st, rec, k);
    *present = 0;
    if (f == NULL)
        return ZMR_OK;
    if (k >= 0 && !strcmp(name, "step") && zmr_frame_get_step(f, iout)) {
        *out = (double)*iout;
        *present = 1;
    } else if (k >= 0 && !strcmp(name, "time") && zmr_frame_get_time(f, out)) {
        *iout = (int64_t)*out;
        *present = 1;
    } else {
        zmr_value v;
        if (zmr_frame_get_meta(f, name, &v) == ZMR_OK) {
            *present = 1;
            switch (v.tag) {
            case ZMR_TAG_BOOL: *iout = v.b[0]; *out = v.b[0]; break;
            case ZMR_TAG_I32: case ZMR_TAG_I64: *iout = v.i[0]; *out = (double)v.i[0]; break;
            case ZMR_TAG_U32: case ZMR_TAG_U64: *iout = (int64_t)v.u[0]; *out = (double)v.u[0]; break;
            case ZMR_TAG_F64: *out = v.f[0]; *iout = isfinite(v.f[0]) ? (int64_t)v.f[0] : -1; break;
            default:
                zmr_frame_free(f);
                return zmr_err(ZMR_ECORRUPT, "mrec record %llu frame %lld: meta '%s' is a %s, not a number",
                               (unsigned long long)rec, (long long)k, name, zmr_tag_name(v.tag));
            }
        }
    }
    zmr_frame_free(f);
    return ZMR_OK;
}

/* Split "x,y,z" into s->cols. */
static int src_columns(zmr_source *s, const char *column)
{
    for (const char *p = column; *p;) {
        size_t n = strcspn(p, ",");
        if (n == 0 || s->ncols == ZMR_SOURCE_MAX_COLUMNS)
            return zmr_err(ZMR_EINVAL, "mrec source: columns '%s': 1..%d names separated by commas", column,
                           ZMR_SOURCE_MAX_COLUMNS);
        if ((s->cols[s->ncols] = malloc(n + 1)) == NULL)
            return zmr_err(ZMR_ENOMEM, "mrec source: out of memory");
        memcpy(s->cols[s->ncols], p, n);
        s->cols[s->ncols++][n] = '\0';
        p += n + (p[n] == ',');
    }
    if (s->ncols == 0)
        return zmr_err(ZMR_EINVAL, "mrec source: no column named (columns is empty)");
    if (column[strlen(column) - 1] == ',')
        return zmr_err(ZMR_EINVAL, "mrec source: columns '%s': 1..%d names separated by commas", column,
                       ZMR_SOURCE_MAX_COLUMNS);
    return ZMR_OK;
}

zmr_status zmr_source_open(zmr_source **out, const char *path, unsigned flags, const char *block,
                           const char *columns, const char *const *scalars, size_t nscalars,
                           bool include_systems)
{
    if (out == NULL)
        return zmr_err(ZMR_EINVAL, "mrec source: out is NULL");
    *out = NULL;
    if (path == NULL || block == NULL || columns == NULL || (scalars == NULL && nscalars > 0))
        return zmr_err(ZMR_EINVAL, "mrec source: NULL path, block, columns or scalars");
    for (size_t k = 0; k < nscalars; k++)
        if (scalars[k] == NULL)
            return zmr_err(ZMR_EINVAL, "mrec source: scalar %zu is NULL", k);
    zmr_source *s = calloc(1, sizeof *s);
    if (s == NULL)
        return zmr_err(ZMR_ENOMEM, "mrec source: out of memory");
    int st = ZMR_OK;
    s->block = src_strdup(block);
    s->column = src_strdup(columns);
    s->scalars = calloc(nscalars + 1, sizeof *s->scalars);
    if (!s->block || !s->column || !s->scalars)
        st = zmr_err(ZMR_ENOMEM, "mrec source: out of memory");
    if (st == ZMR_OK)
        st = src_columns(s, columns);
    for (size_t k = 0; st == ZMR_OK && k < nscalars; k++) {
        if ((s->scalars[k] = src_strdup(scalars[k])) == NULL)
            st = zmr_err(ZMR_ENOMEM, "mrec source: out of memory");
        else
            s->nscalars++;
    }
    if (st == ZMR_OK)
        st = zmr_open(&s->r, path, flags);
    for (uint64_t rec = 0; st == ZMR_OK && rec < zmr_n_records(s->r); rec++) {
        uint64_t nf = 0;
        if ((st = zmr_record_info(s->r, rec, NULL, &nf, NULL, NULL)) < 0)
            break;
        if (nf) {
            for (uint64_t k = 0; st == ZMR_OK && k < nf; k++)
                st = src_push(s, rec, (int64_t)k);
        } else if (include_systems) {
            zmr_frame *f = NULL;
            zmr_column c;
            if ((st = zmr_read_system(s->r, rec, &f)) == ZMR_OK && f &&
                zmr_frame_find_column(f, block, s->cols[0], &c) == ZMR_OK)
                st = src_push(s, rec, -1);
            zmr_frame_free(f);
        }
    }
    if (st < 0) {
        zmr_source_free(s);
        return st;
    }
    *out = s;
    return ZMR_OK;
}

uint64_t zmr_source_length(const zmr_source *s) { return s ? s->n : 0; }

size_t zmr_source_nstreams(const zmr_source *s) { return s ? 2 + s->nscalars : 0; }

const char *zmr_source_stream_name(const zmr_source *s, size_t stream)
{
    if (s == NULL || stream >= 2 + s->nscalars)
        return NULL;
    return stream == 0 ? s->column : stream == 1 ? "record" : s->scalars[stream - 2];
}

zmr_dtype zmr_source_stream_dtype(const zmr_source *s, size_t stream)
{
    if (s != NULL && stream == 1)
        return ZMR_U64;
    if (s != NULL && stream >= 2 && stream < 2 + s->nscalars && !strcmp(s->scalars[stream - 2], "step"))
        return ZMR_I64;
    return ZMR_F64;
}

static int src_check(const zmr_source *s, size_t stream, const uint64_t *items, uint64_t count,
                     const void *dst)
{
    if (s == NULL || (count > 0 && (items == NULL || dst == NULL)))
        return zmr_err(ZMR_EINVAL, "mrec source: NULL source, items or destination");
    if (stream >= 2 + s->nscalars)
        return zmr_err(ZMR_EINVAL, "mrec source: stream %zu past the %zu streams", stream, 2 + s->nscalars);
    for (uint64_t i = 0; i < count; i++)
        if (items[i] >= s->n)
            return zmr_err(ZMR_ERANGE, "mrec source: item %llu past the %llu items",
                           (unsigned long long)items[i], (unsigned long long)s->n);
    return ZMR_OK;
}

zmr_status zmr_source_sizes(const zmr_source *s, const uint64_t *items, uint64_t count, uint64_t *sizes)
{
    int st = src_check(s, 0, items, count, sizes);
    for (uint64_t i = 0; st == ZMR_OK && i < count; i++) {
        src_val v;
        if ((st = src_column(s, items[i], &v)) < 0)
            break;
        sizes[i] = src_packed_size(&v);
        zmr_frame_free(v.owner);
    }
    return st;
}

zmr_status zmr_source_gather(const zmr_source *s, size_t stream, const uint64_t *items, uint64_t count,
                             void *dst, uint64_t dst_capacity, const uint64_t *bounds)
{
    int st = src_check(s, stream, items, count, dst);
    if (st < 0)
        return st;
    unsigned char *out = dst;
    if (stream == 0 && count > 0 && bounds == NULL)
        return zmr_err(ZMR_EINVAL, "mrec source: the ragged stream needs bounds");
    if (stream > 0 && count > dst_capacity / 8)
        return zmr_err(ZMR_EINVAL, "mrec source: %llu values need %llu bytes, the destination holds %llu",
                       (unsigned long long)count, (unsigned long long)count * 8,
                       (unsigned long long)dst_capacity);
    for (uint64_t i = 0; i < count; i++) {
        uint64_t it = items[i];
        if (stream == 0) {
            src_val val;
            if ((st = src_column(s, it, &val)) < 0)
                return st;
            uint64_t need = src_packed_size(&val);
            if (bounds[i + 1] < bounds[i] || bounds[i + 1] - bounds[i] != need || bounds[i + 1] > dst_capacity) {
                zmr_frame_free(val.owner);
                return zmr_err(ZMR_EINVAL, "mrec item %llu: %llu bytes, bounds give %llu (destination %llu)",
                               (unsigned long long)it, (unsigned long long)need,
                               (unsigned long long)(bounds[i + 1] - bounds[i]),
                               (unsigned long long)dst_capacity);
            }
            src_val_pack(&val, out + bounds[i]);
            zmr_frame_free(val.owner);
        } else if (stream == 1) {
            memcpy(out + 8 * i, &s->rec[it], 8);
        } else {
            const char *name = s->scalars[stream - 2];
            double d = NAN;
            int64_t v = -1;
            int present;
            if ((st = src_scalar(s, it, name, &d, &v, &present)) < 0)
                return st;
            if (!strcmp(name, "step")) {
                if (!present)
                    v = -1;
                memcpy(out + 8 * i, &v, 8);
            } else {
                if (!present)
                    d = NAN;
                memcpy(out + 8 * i, &d, 8);
            }
        }
    }
    return ZMR_OK;
}
