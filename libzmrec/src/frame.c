/*
 * frame.c - frames in memory, their header JSON, and the frame bytes
 * encoding: "MRF1" | u32le header_length | header | zero pad to 8 | payload.
 */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "zmr_internal.h"

/* Column buffers must be 8-byte aligned (float64/int64 views). malloc
 * already guarantees alignment for every fundamental type, and unlike
 * aligned_alloc it exists on every C library (the Windows CRT has none). */
_Static_assert(_Alignof(max_align_t) >= 8, "malloc must return 8-byte aligned memory");

static const char *const kind_names[] = {"system", "update", "index", "ff"};

/* ------------------------------------------------------------ lifetime */

zmr_status zmr_frame_create(zmr_frame **out, zmr_frame_kind kind)
{
    if (out == NULL)
        return zmr_err(ZMR_EINVAL, "frame_create: out is NULL");
    *out = NULL;
    if ((int)kind < 0 || kind > ZMR_FRAME_FF)
        return zmr_err(ZMR_EINVAL, "frame_create: kind %d is not a frame kind", (int)kind);
    zmr_frame *f = calloc(1, sizeof *f);
    if (f == NULL)
        return zmr_err(ZMR_ENOMEM, "frame_create: no memory");
    f->kind = kind;
    f->meta = json_object_new_object();
    if (kind == ZMR_FRAME_SYSTEM)
        f->meta_types = json_object_new_object();
    *out = f;
    return ZMR_OK;
}

static void col_clear(struct zmr_col *c)
{
    free(c->name);
    free(c->data);
    free(c->validity);
    if (c->strings) {
        for (uint64_t k = 0; k < c->nelem; k++)
            free(c->strings[k]);
        free(c->strings);
    }
    memset(c, 0, sizeof *c);
}

void zmr_block_clear(struct zmr_block *b)
{
    free(b->name);
    json_object_put(b->structural_shape);
    json_object_put(b->targets);
    json_object_put(b->attributes);
    for (size_t k = 0; k < b->ncols; k++)
        col_clear(&b->cols[k]);
    free(b->cols);
    memset(b, 0, sizeof *b);
}

static void invalidate(zmr_frame *f)
{
    free(f->header_cache);
    f->header_cache = NULL;
}

void zmr_frame_free(zmr_frame *f)
{
    if (f == NULL)
        return;
    for (size_t k = 0; k < f->nblocks; k++)
        zmr_block_clear(&f->blocks[k]);
    free(f->blocks);
    json_object_put(f->meta);
    json_object_put(f->meta_types);
    json_object_put(f->schema_meta);
    free(f->header_cache);
    free(f);
}

zmr_frame_kind zmr_frame_get_kind(const zmr_frame *f) { return f->kind; }

/* ------------------------------------------------------------ blocks */

static struct zmr_block *find_block(const zmr_frame *f, const char *name)
{
    for (size_t k = 0; k < f->nblocks; k++)
        if (!strcmp(f->blocks[k].name, name))
            return &f->blocks[k];
    return NULL;
}

static struct zmr_col *find_col(const struct zmr_block *b, const char *name)
{
    for (size_t k = 0; k < b->ncols; k++)
        if (!strcmp(b->cols[k].name, name))
            return &b->cols[k];
    return NULL;
}

static zmr_status new_block(zmr_frame *f, const char *name, uint64_t count, struct zmr_block **out)
{
    if (f->nblocks == f->capblocks) {
        size_t cap = f->capblocks ? 2 * f->capblocks : 4;
        struct zmr_block *nb = realloc(f->blocks, cap * sizeof *nb);
        if (nb == NULL)
            return zmr_err(ZMR_ENOMEM, "no memory for block '%s'", name);
        f->blocks = nb;
        f->capblocks = cap;
    }
    struct zmr_block *b = &f->blocks[f->nblocks];
    memset(b, 0, sizeof *b);
    b->name = strdup(name);
    if (b->name == NULL)
        return zmr_err(ZMR_ENOMEM, "no memory for block '%s'", name);
    b->count = count;
    f->nblocks++;
    invalidate(f);
    *out = b;
    return ZMR_OK;
}

zmr_status zmr_frame_add_block(zmr_frame *f, const char *name, uint64_t count)
{
    if (f == NULL || name == NULL || name[0] == '\0')
        return zmr_err(ZMR_EINVAL, "add_block: NULL frame or empty block name");
    if (find_block(f, name))
        return zmr_err(ZMR_EEXIST, "add_block: block '%s' already in the frame", name);
    struct zmr_block *b;
    return new_block(f, name, count, &b);
}

void zmr_frame_remove_block(zmr_frame *f, size_t i)
{
    zmr_block_clear(&f->blocks[i]);
    memmove(&f->blocks[i], &f->blocks[i + 1], (f->nblocks - i - 1) * sizeof f->blocks[0]);
    f->nblocks--;
    invalidate(f);
}

static zmr_status check_target_syntax(const char *t, const char *what)
{
    if (t[0] == '/') {
        const char *s = strchr(t + 1, '/');
        if (s == NULL || s == t + 1 || s[1] == '\0' || strchr(s + 1, '/') != NULL)
            return zmr_err(ZMR_EINVAL, "%s: target '%.80s' must be '<block>' or '/<section>/<block>'",
                           what, t);
        size_t n = (size_t)(s - t - 1);
        if (!((n == 6 && !memcmp(t + 1, "system", 6)) || (n == 10 && !memcmp(t + 1, "trajectory", 10))))
            return zmr_err(ZMR_EINVAL, "%s: target '%.80s' names section '%.*s', expected system "
                                       "or trajectory", what, t, (int)n, t + 1);
    } else if (t[0] == '\0' || strchr(t, '/') != NULL) {
        return zmr_err(ZMR_EINVAL, "%s: target '%.80s' must be '<block>' or '/<section>/<block>'", what, t);
    }
    return ZMR_OK;
}

static zmr_status check_targets_obj(json_object *o, const char *what)
{
    if (!json_object_is_type(o, json_type_object))
        return zmr_err(ZMR_EINVAL, "%s: targets must be an object {column: target}", what);
    json_object_object_foreach(o, col, tv) {
        if (!json_object_is_type(tv, json_type_string))
            return zmr_err(ZMR_EINVAL, "%s: target of column '%s' must be a string", what, col);
        zmr_status st = check_target_syntax(json_object_get_string(tv), what);
        if (st < 0)
            return st;
    }
    return ZMR_OK;
}

zmr_status zmr_frame_set_block_json(zmr_frame *f, const char *block, const char *field, const char *json)
{
    if (f == NULL || block == NULL || field == NULL || json == NULL)
        return zmr_err(ZMR_EINVAL, "set_block_json: NULL argument");
    struct zmr_block *b = find_block(f, block);
    if (b == NULL)
        return zmr_err(ZMR_ERANGE, "set_block_json: no block '%s'", block);
    json_object *o;
    zmr_status st = zmr_json_parse(json, strlen(json), field, ZMR_EINVAL, &o);
    if (st < 0)
        return st;
    json_object **slot;
    if (!strcmp(field, "structural_shape")) {
        if ((st = zmr_rule_structural_shape(block, b->count, o, ZMR_EINVAL)) < 0) {
            json_object_put(o);
            return st;
        }
        slot = &b->structural_shape;
    } else if (!strcmp(field, "targets")) {
        if ((st = check_targets_obj(o, block)) < 0) {
            json_object_put(o);
            return st;
        }
        slot = &b->targets;
    } else if (!strcmp(field, "attributes")) {
        if (f->kind != ZMR_FRAME_SYSTEM || !json_object_is_type(o, json_type_object)) {
            json_object_put(o);
            return zmr_err(ZMR_EINVAL, "block %s: attributes must be an object, on a system frame only",
                           block);
        }
        slot = &b->attributes;
    } else {
        json_object_put(o);
        return zmr_err(ZMR_EINVAL, "set_block_json: field '%s' is not structural_shape, targets or "
                                   "attributes", field);
    }
    json_object_put(*slot);
    *slot = o;
    invalidate(f);
    return ZMR_OK;
}

static zmr_status new_col(struct zmr_block *b, const char *name, struct zmr_col **out)
{
    if (b->ncols == b->capcols) {
        size_t cap = b->capcols ? 2 * b->capcols : 4;
        struct zmr_col *nc = realloc(b->cols, cap * sizeof *nc);
        if (nc == NULL)
            return zmr_err(ZMR_ENOMEM, "no memory for column '%s'", name);
        b->cols = nc;
        b->capcols = cap;
    }
    struct zmr_col *c = &b->cols[b->ncols];
    memset(c, 0, sizeof *c);
    c->name = strdup(name);
    if (c->name == NULL)
        return zmr_err(ZMR_ENOMEM, "no memory for column '%s'", name);
    b->ncols++;
    *out = c;
    return ZMR_OK;
}

static bool precision_ok(double p)
{
    return isfinite(p) && p >= ldexp(1.0, -1000) && p <= ldexp(1.0, 1000);
}

/* shape checks shared by both column kinds; nelem out. */
static zmr_status check_shape(const struct zmr_block *b, const char *col, const uint64_t *shape,
                              size_t ndim, uint64_t *nelem)
{
    if (ndim < 1 || ndim > ZMR_MAX_NDIM || shape == NULL)
        return zmr_err(ZMR_EINVAL, "column %s/%s: ndim %zu must be 1..%d", b->name, col, ndim,
                       ZMR_MAX_NDIM);
    if (shape[0] != b->count)
        return zmr_err(ZMR_EINVAL, "column %s/%s: shape[0] %llu must equal the block count %llu",
                       b->name, col, (unsigned long long)shape[0], (unsigned long long)b->count);
    uint64_t n = 1;
    for (size_t k = 0; k < ndim; k++) {
        if (shape[k] != 0 && n > UINT64_MAX / 16 / shape[k])
            return zmr_err(ZMR_EINVAL, "column %s/%s: shape overflows", b->name, col);
        n *= shape[k];
    }
    *nelem = n;
    return ZMR_OK;
}

static zmr_status begin_col(zmr_frame *f, const char *block, const char *column, struct zmr_block **bo)
{
    if (f == NULL || block == NULL || column == NULL || column[0] == '\0')
        return zmr_err(ZMR_EINVAL, "add_column: NULL frame, block or column name");
    struct zmr_block *b = find_block(f, block);
    if (b == NULL)
        return zmr_err(ZMR_ERANGE, "add_column: no block '%s' (add_block first)", block);
    if (find_col(b, column))
        return zmr_err(ZMR_EEXIST, "add_column: column %s/%s already there", block, column);
    *bo = b;
    return ZMR_OK;
}

static zmr_status copy_validity(struct zmr_col *c, const uint8_t *validity, uint64_t rows, const char *blk)
{
    if (validity == NULL)
        return ZMR_OK;
    for (uint64_t k = 0; k < rows; k++)
        if (validity[k] > 1)
            return zmr_err(ZMR_EINVAL, "column %s/%s: validity byte %llu is %u, not 0/1", blk, c->name,
                           (unsigned long long)k, validity[k]);
    c->validity = malloc(rows ? rows : 1);
    if (c->validity == NULL)
        return zmr_err(ZMR_ENOMEM, "column %s/%s: no memory for validity", blk, c->name);
    if (rows)
        memcpy(c->validity, validity, rows);
    return ZMR_OK;
}

/* The layout's canonical column keys: one dtype and one value per row
 * wherever they appear (any block, any frame kind). */
static const struct {
    const char *name;
    zmr_dtype dtype;
} canonical[] = {
    {"x", ZMR_F64}, {"y", ZMR_F64}, {"z", ZMR_F64}, {"vx", ZMR_F64}, {"vy", ZMR_F64}, {"vz", ZMR_F64},
    {"fx", ZMR_F64}, {"fy", ZMR_F64}, {"fz", ZMR_F64}, {"charge", ZMR_F64}, {"mass", ZMR_F64},
    {"quatw", ZMR_F64}, {"quati", ZMR_F64}, {"quatj", ZMR_F64}, {"quatk", ZMR_F64}, {"mux", ZMR_F64},
    {"muy", ZMR_F64}, {"muz", ZMR_F64}, {"axis_x", ZMR_F64}, {"axis_y", ZMR_F64}, {"axis_z", ZMR_F64},
    {"occupancy", ZMR_F64}, {"b_factor", ZMR_F64},
    {"id", ZMR_U64}, {"atomic_number", ZMR_U64}, {"type_id", ZMR_U64}, {"mol_id", ZMR_U64}, {"res_id", ZMR_U64},
    {"atomi", ZMR_U64}, {"atomj", ZMR_U64}, {"atomk", ZMR_U64}, {"atoml", ZMR_U64}, {"atomm", ZMR_U64},
    {"ibead", ZMR_U64}, {"bond_type", ZMR_U64}, {"bond_number", ZMR_U64}, {"atom_map", ZMR_U64},
    {"formal_charge", ZMR_I64}, {"ix", ZMR_I32}, {"iy", ZMR_I32}, {"iz", ZMR_I32},
    {"free", ZMR_BOOL}, {"is_14", ZMR_BOOL}, {"exclude_14", ZMR_BOOL},
    {"element", ZMR_STRING}, {"type", ZMR_STRING}, {"name", ZMR_STRING}, {"res_name", ZMR_STRING},
    {"bead_type", ZMR_STRING}, {"chain", ZMR_STRING}, {"icode", ZMR_STRING}, {"altloc", ZMR_STRING},
    {"style", ZMR_STRING},
};

/* A canonical key at another dtype or with trailing axes: ZMR_EINVAL
 * naming the key, what it must be and what was given. */
static zmr_status check_canonical(const char *block, const char *column, zmr_dtype dtype,
                                  const uint64_t *shape, size_t ndim)
{
    for (size_t k = 0; k < sizeof canonical / sizeof *canonical; k++) {
        if (strcmp(canonical[k].name, column))
            continue;
        if (canonical[k].dtype == dtype && ndim == 1)
            return ZMR_OK;
        char given[160];
        size_t used = (size_t)snprintf(given, sizeof given, "%s[N]", zmr_dtype_name(dtype));
        for (size_t d = 1; d < ndim && used < sizeof given; d++)
            used += (size_t)snprintf(given + used, sizeof given - used, "[%llu]", (unsigned long long)shape[d]);
        return zmr_err(ZMR_EINVAL, "column %s/%s: '%s' is a canonical column key: it must be %s[N] (one value per "
                                   "row) wherever it appears, given %s", block, column, column,
                       zmr_dtype_name(canonical[k].dtype), given);
    }
    return ZMR_OK;
}

zmr_status zmr_frame_add_column(zmr_frame *f, const char *block, const char *column, zmr_dtype dtype,
                                const uint64_t *shape, size_t ndim, const void *data, uint64_t nbytes,
                                const uint8_t *validity, double precision)
{
    struct zmr_block *b;
    zmr_status st = begin_col(f, block, column, &b);
    if (st < 0)
        return st;
    if ((int)dtype < 0 || (int)dtype >= ZMR_NDTYPES || dtype == ZMR_STRING)
        return zmr_err(ZMR_EINVAL, "column %s/%s: dtype %d is not a numeric dtype of the set "
                                   "(string columns: add_string_column)", block, column, (int)dtype);
    uint64_t nelem;
    if ((st = check_shape(b, column, shape, ndim, &nelem)) < 0 ||
        (st = check_canonical(block, column, dtype, shape, ndim)) < 0)
        return st;
    size_t isz = zmr_dtype_itemsize(dtype);
    if (nbytes != nelem * isz || (nbytes && data == NULL))
        return zmr_err(ZMR_EINVAL, "column %s/%s: %llu bytes given, shape and %s need %llu", block, column,
                       (unsigned long long)nbytes, zmr_dtype_name(dtype),
                       (unsigned long long)(nelem * isz));
    if (precision != 0.0) {
        if (dtype != ZMR_F64)
            return zmr_err(ZMR_EINVAL, "column %s/%s: precision applies to f64 only, not %s", block, column,
                           zmr_dtype_name(dtype));
        if (!precision_ok(precision))
            return zmr_err(ZMR_EINVAL, "column %s/%s: precision %g outside [2^-1000, 2^1000]", block,
                           column, precision);
        if (f->kind == ZMR_FRAME_UPDATE || f->kind == ZMR_FRAME_FF)
            return zmr_err(ZMR_EINVAL, "column %s/%s: a %s frame carries no precision (the "
                                       "sequence_schema declares it)", block, column, kind_names[f->kind]);
    }
    if (dtype == ZMR_BOOL)
        for (uint64_t k = 0; k < nelem; k++)
            if (((const uint8_t *)data)[k] > 1)
                return zmr_err(ZMR_EINVAL, "column %s/%s: bool byte %llu is %u, not 0/1", block, column,
                               (unsigned long long)k, ((const uint8_t *)data)[k]);
    struct zmr_col *c;
    if ((st = new_col(b, column, &c)) < 0)
        return st;
    c->dtype = dtype;
    c->ndim = ndim;
    memcpy(c->shape, shape, ndim * sizeof *shape);
    c->nelem = nelem;
    c->nbytes = nbytes;
    c->precision = precision;
    c->data = malloc(nbytes ? (nbytes + 7) / 8 * 8 : 8);
    if (c->data == NULL) {
        col_clear(c);
        b->ncols--;
        return zmr_err(ZMR_ENOMEM, "column %s/%s: no memory for %llu bytes", block, column,
                       (unsigned long long)nbytes);
    }
    if (nbytes)
        memcpy(c->data, data, nbytes);
    if (precision != 0.0) {
        double *d = c->data;
        for (uint64_t k = 0; k < nelem; k++)
            d[k] = zmr_round_precision(d[k], precision);
    }
    if ((st = copy_validity(c, validity, shape[0], block)) < 0) {
        col_clear(c);
        b->ncols--;
        return st;
    }
    invalidate(f);
    return ZMR_OK;
}

/* Fill c->strings from a JSON array of nelem strings / nulls. */
static zmr_status strings_from_json(struct zmr_col *c, json_object *arr, const char *blk, zmr_status bad)
{
    if (!json_object_is_type(arr, json_type_array) || json_object_array_length(arr) != c->nelem)
        return zmr_err(bad, "column %s/%s: values must be an array of %llu strings", blk, c->name,
                       (unsigned long long)c->nelem);
    c->strings = calloc(c->nelem ? c->nelem : 1, sizeof *c->strings);
    if (c->strings == NULL)
        return zmr_err(ZMR_ENOMEM, "column %s/%s: no memory", blk, c->name);
    for (uint64_t k = 0; k < c->nelem; k++) {
        json_object *e = json_object_array_get_idx(arr, k);
        if (e == NULL)
            continue;
        if (!json_object_is_type(e, json_type_string))
            return zmr_err(bad, "column %s/%s: values[%llu] is not a string or null", blk, c->name,
                           (unsigned long long)k);
        c->strings[k] = strdup(json_object_get_string(e));
        if (c->strings[k] == NULL)
            return zmr_err(ZMR_ENOMEM, "column %s/%s: no memory", blk, c->name);
    }
    return ZMR_OK;
}

zmr_status zmr_frame_add_string_column(zmr_frame *f, const char *block, const char *column,
                                       const uint64_t *shape, size_t ndim, const char *values_json,
                                       const uint8_t *validity)
{
    struct zmr_block *b;
    zmr_status st = begin_col(f, block, column, &b);
    if (st < 0)
        return st;
    uint64_t nelem;
    if ((st = check_shape(b, column, shape, ndim, &nelem)) < 0 ||
        (st = check_canonical(block, column, ZMR_STRING, shape, ndim)) < 0)
        return st;
    if (values_json == NULL)
        return zmr_err(ZMR_EINVAL, "column %s/%s: values_json is NULL", block, column);
    json_object *arr;
    if ((st = zmr_json_parse(values_json, strlen(values_json), column, ZMR_EINVAL, &arr)) < 0)
        return st;
    struct zmr_col *c;
    if ((st = new_col(b, column, &c)) < 0) {
        json_object_put(arr);
        return st;
    }
    c->dtype = ZMR_STRING;
    c->ndim = ndim;
    memcpy(c->shape, shape, ndim * sizeof *shape);
    c->nelem = nelem;
    st = strings_from_json(c, arr, block, ZMR_EINVAL);
    json_object_put(arr);
    if (st >= 0)
        st = copy_validity(c, validity, shape[0], block);
    if (st < 0) {
        col_clear(c);
        b->ncols--;
        return st;
    }
    invalidate(f);
    return ZMR_OK;
}

/* ------------------------------------------------------------ meta */

zmr_status zmr_frame_set_meta(zmr_frame *f, const char *key, zmr_tag tag, const char *typed_json)
{
    if (f == NULL || key == NULL || typed_json == NULL)
        return zmr_err(ZMR_EINVAL, "set_meta: NULL argument");
    if (f->kind == ZMR_FRAME_INDEX || f->kind == ZMR_FRAME_FF)
        return zmr_err(ZMR_EINVAL, "set_meta: a %s frame takes no typed meta", kind_names[f->kind]);
    if ((int)tag < 0 || (int)tag >= ZMR_NTAGS)
        return zmr_err(ZMR_EINVAL, "set_meta %s: tag %d is not one of the 16", key, (int)tag);
    json_object *o;
    zmr_status st = zmr_json_parse(typed_json, strlen(typed_json), key, ZMR_EINVAL, &o);
    if (st < 0)
        return st;
    if ((st = zmr_typed_check(tag, o, ZMR_EINVAL)) < 0) {
        json_object_put(o);
        char pre[160];
        snprintf(pre, sizeof pre, "meta %.120s", key);
        return zmr_err_prefix(st, pre);
    }
    json_object_object_add(f->meta, key, o);
    if (f->meta_types)
        json_object_object_add(f->meta_types, key, json_object_new_string(zmr_tag_name(tag)));
    invalidate(f);
    return ZMR_OK;
}

zmr_status zmr_frame_set_meta_value(zmr_frame *f, const char *key, const zmr_value *v)
{
    if (f == NULL || key == NULL || v == NULL)
        return zmr_err(ZMR_EINVAL, "set_meta_value: NULL argument");
    if ((int)v->tag < 0 || (int)v->tag >= ZMR_NTAGS)
        return zmr_err(ZMR_EINVAL, "set_meta_value %s: tag %d is not one of the 16", key, (int)v->tag);
    json_object *o = NULL;
    if (v->tag == ZMR_TAG_JSON) {
        zmr_status st = zmr_json_parse(v->text ? v->text : "null", v->text ? strlen(v->text) : 4, key,
                                       ZMR_EINVAL, &o);
        if (st < 0)
            return st;
    } else {
        o = zmr_typed_from_value(v);
    }
    const char *txt = zmr_json_text(o);
    char *copy = strdup(txt);
    json_object_put(o);
    if (copy == NULL)
        return zmr_err(ZMR_ENOMEM, "set_meta_value: no memory");
    zmr_status st = zmr_frame_set_meta(f, key, v->tag, copy);
    free(copy);
    return st;
}

zmr_status zmr_frame_set_meta_document(zmr_frame *f, const char *json)
{
    if (f == NULL || json == NULL)
        return zmr_err(ZMR_EINVAL, "set_meta_document: NULL argument");
    if (f->kind != ZMR_FRAME_FF)
        return zmr_err(ZMR_EINVAL, "set_meta_document: only the ff frame carries an untyped document");
    json_object *o;
    zmr_status st = zmr_json_parse(json, strlen(json), "ff meta", ZMR_EINVAL, &o);
    if (st < 0)
        return st;
    if (!json_object_is_type(o, json_type_object)) {
        json_object_put(o);
        return zmr_err(ZMR_EINVAL, "ff meta: the force-field document must be a JSON object");
    }
    json_object_put(f->meta);
    f->meta = o;
    invalidate(f);
    return ZMR_OK;
}

zmr_status zmr_frame_get_meta(const zmr_frame *f, const char *key, zmr_value *out)
{
    json_object *o, *t = NULL;
    if (f == NULL || key == NULL || out == NULL)
        return zmr_err(ZMR_EINVAL, "get_meta: NULL argument");
    if (!json_object_object_get_ex(f->meta, key, &o))
        return zmr_err(ZMR_ERANGE, "get_meta: no meta key '%s'", key);
    zmr_tag tag = zmr_infer_tag(o);
    if (f->meta_types && json_object_object_get_ex(f->meta_types, key, &t)) {
        if (zmr_tag_parse(json_object_get_string(t), &tag) < 0)
            return zmr_err(ZMR_ECORRUPT, "meta_types.%s: unknown tag", key);
    } else if (f->schema_meta && json_object_object_get_ex(f->schema_meta, key, &t)) {
        json_object *fill;
        zmr_status st = zmr_schema_meta_decl(t, key, &tag, &fill, NULL);
        if (st < 0)
            return st;
    }
    zmr_status st = zmr_typed_to_value(tag, o, out);
    if (st < 0) {
        char pre[160];
        snprintf(pre, sizeof pre, "meta %.120s", key);
        return zmr_err_prefix(st, pre);
    }
    return ZMR_OK;
}

/* ------------------------------------------------------------ step, time, box */

zmr_status zmr_frame_set_step(zmr_frame *f, int64_t step)
{
    if (f == NULL || f->kind != ZMR_FRAME_UPDATE)
        return zmr_err(ZMR_EINVAL, "set_step: only trajectory updates carry a step");
    f->has_step = true;
    f->step = step;
    invalidate(f);
    return ZMR_OK;
}

zmr_status zmr_frame_set_time(zmr_frame *f, double time)
{
    if (f == NULL || f->kind != ZMR_FRAME_UPDATE)
        return zmr_err(ZMR_EINVAL, "set_time: only trajectory updates carry a time");
    f->has_time = true;
    f->time = time;
    invalidate(f);
    return ZMR_OK;
}

bool zmr_frame_get_step(const zmr_frame *f, int64_t *step)
{
    if (f->has_step && step)
        *step = f->step;
    return f->has_step;
}

bool zmr_frame_get_time(const zmr_frame *f, double *time)
{
    if (f->has_time && time)
        *time = f->time;
    return f->has_time;
}

zmr_status zmr_frame_set_box(zmr_frame *f, const zmr_box *box)
{
    if (f == NULL || box == NULL || (f->kind != ZMR_FRAME_UPDATE && f->kind != ZMR_FRAME_SYSTEM))
        return zmr_err(ZMR_EINVAL, "set_box: only system frames and trajectory updates carry a box");
    zmr_box b = *box;
    zmr_status st = zmr_rule_box(&b, ZMR_EINVAL);
    if (st < 0)
        return zmr_err_prefix(st, "set_box");
    f->box = b;
    f->has_box = true;
    invalidate(f);
    return ZMR_OK;
}

bool zmr_frame_get_box(const zmr_frame *f, zmr_box *box)
{
    if (f->has_box && box)
        *box = f->box;
    return f->has_box;
}

/* ------------------------------------------------------------ accessors */

size_t zmr_frame_nblocks(const zmr_frame *f) { return f ? f->nblocks : 0; }

const char *zmr_frame_block_name(const zmr_frame *f, size_t b)
{
    return f && b < f->nblocks ? f->blocks[b].name : NULL;
}

uint64_t zmr_frame_block_count(const zmr_frame *f, size_t b)
{
    return f && b < f->nblocks ? f->blocks[b].count : 0;
}

size_t zmr_frame_ncolumns(const zmr_frame *f, size_t b)
{
    return f && b < f->nblocks ? f->blocks[b].ncols : 0;
}

zmr_status zmr_frame_find_block(const zmr_frame *f, const char *name, size_t *b)
{
    if (f && name)
        for (size_t k = 0; k < f->nblocks; k++)
            if (!strcmp(f->blocks[k].name, name)) {
                *b = k;
                return ZMR_OK;
            }
    return zmr_err(ZMR_ERANGE, "no block '%s' in the frame", name ? name : "(null)");
}

static void fill_column(const struct zmr_col *c, zmr_column *out)
{
    out->name = c->name;
    out->dtype = c->dtype;
    out->ndim = c->ndim;
    out->shape = c->shape;
    out->nelem = c->nelem;
    out->data = c->dtype == ZMR_STRING ? NULL : c->data;
    out->nbytes = c->nbytes;
    out->validity = c->validity;
    out->strings = (const char *const *)c->strings;
    out->precision = c->precision;
}

zmr_status zmr_frame_column(const zmr_frame *f, size_t b, size_t c, zmr_column *out)
{
    if (f == NULL || out == NULL || b >= f->nblocks || c >= f->blocks[b].ncols)
        return zmr_err(ZMR_ERANGE, "column (%zu, %zu) is not in the frame", b, c);
    fill_column(&f->blocks[b].cols[c], out);
    return ZMR_OK;
}

zmr_status zmr_frame_find_column(const zmr_frame *f, const char *block, const char *column, zmr_column *out)
{
    size_t b;
    zmr_status st = zmr_frame_find_block(f, block, &b);
    if (st < 0)
        return st;
    const struct zmr_col *c = column ? find_col(&f->blocks[b], column) : NULL;
    if (c == NULL)
        return zmr_err(ZMR_ERANGE, "no column %s/%s in the frame", block, column ? column : "(null)");
    fill_column(c, out);
    return ZMR_OK;
}

/* ------------------------------------------------------------ copy, compare */

static json_object *jcopy(json_object *o)
{
    json_object *d = NULL;
    if (o != NULL && json_object_deep_copy(o, &d, NULL) != 0)
        return NULL;
    return d;
}

zmr_status zmr_frame_put_block_copy(zmr_frame *f, const struct zmr_block *src)
{
    struct zmr_block *b = find_block(f, src->name);
    if (b != NULL)
        zmr_frame_remove_block(f, (size_t)(b - f->blocks));
    zmr_status st = new_block(f, src->name, src->count, &b);
    if (st < 0)
        return st;
    b->structural_shape = jcopy(src->structural_shape);
    b->targets = jcopy(src->targets);
    b->attributes = jcopy(src->attributes);
    for (size_t k = 0; k < src->ncols; k++) {
        const struct zmr_col *s = &src->cols[k];
        struct zmr_col *c;
        if ((st = new_col(b, s->name, &c)) < 0)
            return st;
        char *name = c->name;
        *c = *s;
        c->name = name;
        c->data = NULL;
        c->validity = NULL;
        c->strings = NULL;
        if (s->data) {
            c->data = malloc(s->nbytes ? (s->nbytes + 7) / 8 * 8 : 8);
            if (c->data == NULL)
                return zmr_err(ZMR_ENOMEM, "no memory copying %s/%s", src->name, s->name);
            if (s->nbytes)
                memcpy(c->data, s->data, s->nbytes);
        }
        if (s->validity) {
            c->validity = malloc(s->shape[0] ? s->shape[0] : 1);
            if (c->validity == NULL)
                return zmr_err(ZMR_ENOMEM, "no memory copying %s/%s", src->name, s->name);
            if (s->shape[0])
                memcpy(c->validity, s->validity, s->shape[0]);
        }
        if (s->strings) {
            c->strings = calloc(s->nelem ? s->nelem : 1, sizeof *c->strings);
            if (c->strings == NULL)
                return zmr_err(ZMR_ENOMEM, "no memory copying %s/%s", src->name, s->name);
            for (uint64_t e = 0; e < s->nelem; e++)
                if (s->strings[e] && (c->strings[e] = strdup(s->strings[e])) == NULL)
                    return zmr_err(ZMR_ENOMEM, "no memory copying %s/%s", src->name, s->name);
        }
    }
    return ZMR_OK;
}

static bool json_same(json_object *a, json_object *b)
{
    if (a == NULL || b == NULL)
        return a == b;
    return !strcmp(zmr_json_text(a), zmr_json_text(b));
}

bool zmr_block_equal(const struct zmr_block *a, const struct zmr_block *b)
{
    if (a->count != b->count || a->ncols != b->ncols || !json_same(a->structural_shape, b->structural_shape) ||
        !json_same(a->targets, b->targets) || !json_same(a->attributes, b->attributes))
        return false;
    for (size_t k = 0; k < a->ncols; k++) {
        const struct zmr_col *x = &a->cols[k], *y = &b->cols[k];
        if (strcmp(x->name, y->name) || x->dtype != y->dtype || x->ndim != y->ndim ||
            memcmp(x->shape, y->shape, x->ndim * sizeof x->shape[0]) || x->nbytes != y->nbytes ||
            (x->validity == NULL) != (y->validity == NULL) || x->precision != y->precision)
            return false;
        if (x->nbytes && memcmp(x->data, y->data, x->nbytes))
            return false;
        if (x->validity && x->shape[0] && memcmp(x->validity, y->validity, x->shape[0]))
            return false;
        if (x->strings)
            for (uint64_t e = 0; e < x->nelem; e++) {
                const char *p = x->strings[e], *q = y->strings[e];
                if ((p == NULL) != (q == NULL) || (p && strcmp(p, q)))
                    return false;
            }
    }
    return true;
}

/* ------------------------------------------------------------ targets */

static const struct zmr_block *resolve_target(const char *t, const zmr_frame *f, const zmr_frame *system,
                                              const zmr_frame *traj, bool *unknown_frame)
{
    *unknown_frame = false;
    if (t[0] != '/')
        return find_block(f, t);
    const char *s = strchr(t + 1, '/');
    const zmr_frame *sec = !strncmp(t + 1, "system/", 7) ? system : traj;
    if (sec == NULL) {
        *unknown_frame = true;
        return NULL;
    }
    return find_block(sec, s + 1);
}

/* only_traj: check just the "/trajectory/<block>" targets of f (a system
 * frame, against one resolved ordinal `traj`); such a target must exist
 * wherever the referencing block has rows. */
static zmr_status check_targets(const zmr_frame *f, const zmr_frame *system, const zmr_frame *traj,
                                bool only_traj)
{
    static const char *const atomcols[] = {"atomi", "atomj", "atomk", "atoml"};
    for (size_t bi = 0; bi < f->nblocks; bi++) {
        const struct zmr_block *b = &f->blocks[bi];
        for (size_t ci = 0; ci < b->ncols; ci++) {
            const struct zmr_col *c = &b->cols[ci];
            const char *target = NULL;
            json_object *tv;
            bool implicit = false;
            if (b->targets && json_object_object_get_ex(b->targets, c->name, &tv))
                target = json_object_get_string(tv);
            for (int k = 0; target == NULL && k < 4; k++)
                if (!strcmp(c->name, atomcols[k]))
                    target = "atoms", implicit = true;
            if (target == NULL)
                continue;
            if (only_traj && (implicit || strncmp(target, "/trajectory/", 12) != 0))
                continue;
            if (only_traj && b->count == 0)
                continue; /* no rows reference anything */
            if (c->dtype != ZMR_U64) {
                if (implicit)
                    continue; /* only u64 columns are row references */
                return zmr_err(ZMR_ECORRUPT, "column %s/%s: a row reference must be u64, not %s", b->name,
                               c->name, zmr_dtype_name(c->dtype));
            }
            bool unknown;
            const struct zmr_block *tb = resolve_target(target, f, system, traj, &unknown);
            if (tb == NULL && implicit && system)
                tb = find_block(system, "atoms");
            if (tb == NULL && only_traj)
                return zmr_err(ZMR_ECORRUPT, "column %s/%s: target '%s' names no block of the resolved "
                                             "trajectory frame, but %s has %llu rows referencing it",
                               b->name, c->name, target, b->name, (unsigned long long)b->count);
            if (tb == NULL) {
                if (unknown || implicit || (f->kind == ZMR_FRAME_UPDATE && traj == NULL))
                    continue; /* checked once the other section / resolution is known */
                return zmr_err(ZMR_ECORRUPT, "column %s/%s: target '%s' is not a block", b->name, c->name,
                               target);
            }
            const unsigned char *p = c->data;
            for (uint64_t e = 0; e < c->nelem; e++) {
                uint64_t row = c->ndim ? e / (c->nelem / (c->shape[0] ? c->shape[0] : 1)) : 0;
                if (c->validity && !c->validity[row])
                    continue;
                uint64_t v = zmr_load_u64le(p + 8 * e);
                if (v >= tb->count)
                    return zmr_err(ZMR_ECORRUPT, "column %s/%s: row reference %llu at element %llu is not "
                                                 "below %s's %llu rows", b->name, c->name,
                                   (unsigned long long)v, (unsigned long long)e, target,
                                   (unsigned long long)tb->count);
            }
        }
    }
    return ZMR_OK;
}

zmr_status zmr_frame_check_targets(const zmr_frame *f, const zmr_frame *system, const zmr_frame *traj)
{
    return check_targets(f, system, traj, false);
}

zmr_status zmr_frame_check_traj_targets(const zmr_frame *system, const zmr_frame *traj)
{
    return check_targets(system, system, traj, true);
}

/* ------------------------------------------------------------ header, encode */

static json_object *f64j(double d)
{
    zmr_value v = {.tag = ZMR_TAG_F64, .n = 1};
    v.f[0] = d;
    return zmr_typed_from_value(&v);
}

static json_object *box_json(const zmr_box *bx)
{
    json_object *o = json_object_new_object(), *vec = json_object_new_array(), *org = json_object_new_array(),
                *bnd = json_object_new_array();
    for (int r = 0; r < 3; r++) {
        json_object *row = json_object_new_array();
        for (int c = 0; c < 3; c++)
            json_object_array_add(row, f64j(bx->vectors[3 * r + c]));
        json_object_array_add(vec, row);
        json_object_array_add(org, f64j(bx->origin[r]));
        json_object_array_add(bnd, json_object_new_boolean(bx->boundary[r]));
    }
    json_object_object_add(o, "vectors", vec);
    json_object_object_add(o, "origin", org);
    json_object_object_add(o, "boundary", bnd);
    json_object_object_add(o, "cell_defined", json_object_new_boolean(bx->cell_defined));
    return o;
}

static uint64_t pad8(uint64_t n) { return (n + 7) & ~(uint64_t)7; }

/* Header tree with offsets; *payload_len out. */
static json_object *build_header(const zmr_frame *f, uint64_t *payload_len)
{
    json_object *h = json_object_new_object(), *blocks = json_object_new_object();
    uint64_t off = 0;
    for (size_t bi = 0; bi < f->nblocks; bi++) {
        const struct zmr_block *b = &f->blocks[bi];
        json_object *be = json_object_new_object(), *cols = json_object_new_object();
        json_object_object_add(be, "count", json_object_new_uint64(b->count));
        json_object_object_add(be, "structural_shape", jcopy(b->structural_shape));
        for (size_t ci = 0; ci < b->ncols; ci++) {
            const struct zmr_col *c = &b->cols[ci];
            json_object *ce = json_object_new_object(), *shape = json_object_new_array();
            json_object_object_add(ce, "dtype", json_object_new_string(zmr_dtype_name(c->dtype)));
            for (size_t k = 0; k < c->ndim; k++)
                json_object_array_add(shape, json_object_new_uint64(c->shape[k]));
            json_object_object_add(ce, "shape", shape);
            if (c->dtype == ZMR_STRING) {
                json_object *vals = json_object_new_array_ext((int)c->nelem);
                for (uint64_t e = 0; e < c->nelem; e++)
                    json_object_array_add(vals, c->strings[e] ? json_object_new_string(c->strings[e]) : NULL);
                json_object_object_add(ce, "values", vals);
            } else {
                json_object_object_add(ce, "offset", json_object_new_uint64(off));
                off += pad8(c->nbytes);
            }
            if (c->validity) {
                json_object_object_add(ce, "validity", json_object_new_uint64(off));
                off += pad8(c->shape[0]);
            }
            if (c->precision != 0.0 && f->kind != ZMR_FRAME_UPDATE)
                json_object_object_add(ce, "precision", zmr_json_double(c->precision));
            json_object_object_add(cols, c->name, ce);
        }
        json_object_object_add(be, "columns", cols);
        if (b->targets)
            json_object_object_add(be, "targets", jcopy(b->targets));
        if (b->attributes && f->kind == ZMR_FRAME_SYSTEM)
            json_object_object_add(be, "attributes", jcopy(b->attributes));
        json_object_object_add(blocks, b->name, be);
    }
    json_object_object_add(h, "blocks", blocks);
    json_object_object_add(h, "meta", jcopy(f->meta));
    if (f->kind == ZMR_FRAME_SYSTEM)
        json_object_object_add(h, "meta_types", jcopy(f->meta_types));
    if (f->kind == ZMR_FRAME_UPDATE && f->has_step) {
        zmr_value v = {.tag = ZMR_TAG_I64, .n = 1};
        v.i[0] = f->step;
        json_object_object_add(h, "step", zmr_typed_from_value(&v));
    }
    if (f->kind == ZMR_FRAME_UPDATE && f->has_time)
        json_object_object_add(h, "time", f64j(f->time));
    if (f->has_box)
        json_object_object_add(h, "box", box_json(&f->box));
    *payload_len = off;
    return h;
}

const char *zmr_frame_header_json(zmr_frame *f)
{
    if (f == NULL) {
        zmr_err(ZMR_EINVAL, "header_json: NULL frame");
        return NULL;
    }
    if (f->header_cache)
        return f->header_cache;
    uint64_t plen;
    json_object *h = build_header(f, &plen);
    f->header_cache = strdup(zmr_json_text(h));
    json_object_put(h);
    if (f->header_cache == NULL)
        zmr_err(ZMR_ENOMEM, "header_json: no memory");
    return f->header_cache;
}

zmr_status zmr_frame_encode(zmr_frame *f, void **out, size_t *len)
{
    if (f == NULL || out == NULL || len == NULL)
        return zmr_err(ZMR_EINVAL, "frame_encode: NULL argument");
    *out = NULL;
    *len = 0;
    zmr_status st = zmr_frame_check_targets(f, f->kind == ZMR_FRAME_SYSTEM ? f : NULL, NULL);
    if (st < 0)
        return zmr_err_prefix(ZMR_EINVAL, "frame_encode");
    uint64_t plen;
    json_object *h = build_header(f, &plen);
    const char *txt = zmr_json_text(h);
    size_t hlen = strlen(txt);
    if (hlen > UINT32_MAX) {
        json_object_put(h);
        return zmr_err(ZMR_EINVAL, "frame_encode: header of %zu bytes exceeds 4 GiB", hlen);
    }
    uint64_t start = pad8(8 + hlen), total = start + plen;
    unsigned char *v = calloc(1, total);
    if (v == NULL) {
        json_object_put(h);
        return zmr_err(ZMR_ENOMEM, "frame_encode: no memory for %llu bytes", (unsigned long long)total);
    }
    memcpy(v, "MRF1", 4);
    for (int k = 0; k < 4; k++)
        v[4 + k] = (unsigned char)(hlen >> (8 * k));
    memcpy(v + 8, txt, hlen);
    json_object_put(h);
    uint64_t off = start;
    for (size_t bi = 0; bi < f->nblocks; bi++)
        for (size_t ci = 0; ci < f->blocks[bi].ncols; ci++) {
            const struct zmr_col *c = &f->blocks[bi].cols[ci];
            if (c->dtype != ZMR_STRING) {
                if (c->nbytes)
                    memcpy(v + off, c->data, c->nbytes);
                off += pad8(c->nbytes);
            }
            if (c->validity) {
                if (c->shape[0])
                    memcpy(v + off, c->validity, c->shape[0]);
                off += pad8(c->shape[0]);
            }
        }
    *out = v;
    *len = (size_t)total;
    return ZMR_OK;
}

/* ------------------------------------------------------------ decode */

#define BAD(...) zmr_err(ZMR_ECORRUPT, __VA_ARGS__)

static zmr_status get_u64_field(json_object *o, const char *key, uint64_t *out, const char *what,
                                const char *ctx)
{
    json_object *v;
    if (!json_object_object_get_ex(o, key, &v))
        return BAD("%s: %s: \"%s\" is missing", what, ctx, key);
    if (zmr_json_u64(v, out) < 0)
        return BAD("%s: %s: \"%s\" must be a non-negative integer, got %.40s", what, ctx, key, zmr_json_text(v));
    return ZMR_OK;
}

static zmr_status decode_box(json_object *o, zmr_box *bx, const char *what)
{
    json_object *vec, *org, *bnd, *cd;
    memset(bx, 0, sizeof *bx);
    if (!json_object_is_type(o, json_type_object) || !json_object_object_get_ex(o, "vectors", &vec) ||
        !json_object_object_get_ex(o, "origin", &org) || !json_object_object_get_ex(o, "boundary", &bnd) ||
        !json_object_object_get_ex(o, "cell_defined", &cd))
        return BAD("%s: box must be {vectors, origin, boundary, cell_defined}", what);
    if (!json_object_is_type(vec, json_type_array) || json_object_array_length(vec) != 3)
        return BAD("%s: box.vectors must be 3x3", what);
    for (int r = 0; r < 3; r++) {
        json_object *row = json_object_array_get_idx(vec, (size_t)r);
        if (!json_object_is_type(row, json_type_array) || json_object_array_length(row) != 3)
            return BAD("%s: box.vectors must be 3x3", what);
        for (int c = 0; c < 3; c++)
            if (zmr_json_f64(json_object_array_get_idx(row, (size_t)c), &bx->vectors[3 * r + c]) < 0)
                return BAD("%s: box.vectors[%d][%d] is not an f64 value", what, r, c);
    }
    if (!json_object_is_type(org, json_type_array) || json_object_array_length(org) != 3 ||
        !json_object_is_type(bnd, json_type_array) || json_object_array_length(bnd) != 3 ||
        !json_object_is_type(cd, json_type_boolean))
        return BAD("%s: box.origin / boundary must have 3 entries, cell_defined a bool", what);
    for (int k = 0; k < 3; k++) {
        json_object *b = json_object_array_get_idx(bnd, (size_t)k);
        if (zmr_json_f64(json_object_array_get_idx(org, (size_t)k), &bx->origin[k]) < 0 ||
            !json_object_is_type(b, json_type_boolean))
            return BAD("%s: box.origin[%d] must be f64, boundary[%d] a bool", what, k, k);
        bx->boundary[k] = json_object_get_boolean(b);
    }
    bx->cell_defined = json_object_get_boolean(cd);
    return zmr_rule_box(bx, ZMR_ECORRUPT) < 0 ? zmr_err_prefix(ZMR_ECORRUPT, what) : ZMR_OK;
}

static zmr_status decode_column(zmr_frame *f, struct zmr_block *b, const char *cname, json_object *ce,
                                const unsigned char *payload, uint64_t plen, const char *what)
{
    json_object *dt, *shape, *v;
    if (!json_object_is_type(ce, json_type_object))
        return BAD("%s: column %s/%s: entry must be an object", what, b->name, cname);
    if (!json_object_object_get_ex(ce, "dtype", &dt) || !json_object_is_type(dt, json_type_string))
        return BAD("%s: column %s/%s: dtype missing", what, b->name, cname);
    zmr_dtype dtype;
    if (zmr_dtype_parse(json_object_get_string(dt), &dtype) < 0)
        return BAD("%s: column %s/%s: dtype '%.32s' is outside the closed set", what, b->name, cname,
                   json_object_get_string(dt));
    if (!json_object_object_get_ex(ce, "shape", &shape) || !json_object_is_type(shape, json_type_array))
        return BAD("%s: column %s/%s: shape must be an array", what, b->name, cname);
    size_t ndim = json_object_array_length(shape);
    uint64_t sh[ZMR_MAX_NDIM];
    if (ndim < 1 || ndim > ZMR_MAX_NDIM)
        return BAD("%s: column %s/%s: shape has %zu dims, expected 1..%d", what, b->name, cname, ndim,
                   ZMR_MAX_NDIM);
    for (size_t k = 0; k < ndim; k++)
        if (zmr_json_u64(json_object_array_get_idx(shape, k), &sh[k]) < 0)
            return BAD("%s: column %s/%s: shape[%zu] is not a non-negative integer", what, b->name, cname, k);
    uint64_t nelem;
    if (check_shape(b, cname, sh, ndim, &nelem) < 0)
        return zmr_err_prefix(ZMR_ECORRUPT, what);
    double precision = 0.0;
    if (json_object_object_get_ex(ce, "precision", &v)) {
        if (f->kind == ZMR_FRAME_UPDATE || f->kind == ZMR_FRAME_FF)
            return BAD("%s: column %s/%s: a %s frame carries no precision", what, b->name, cname,
                       kind_names[f->kind]);
        if (dtype != ZMR_F64 || zmr_json_f64(v, &precision) < 0 || !precision_ok(precision))
            return BAD("%s: column %s/%s: precision must be an f64 column's number in [2^-1000, 2^1000]",
                       what, b->name, cname);
    }
    struct zmr_col *c;
    zmr_status st = new_col(b, cname, &c);
    if (st < 0)
        return st;
    c->dtype = dtype;
    c->ndim = ndim;
    memcpy(c->shape, sh, sizeof sh[0] * ndim);
    c->nelem = nelem;
    c->precision = precision;
    if (dtype == ZMR_STRING) {
        if (!json_object_object_get_ex(ce, "values", &v))
            return BAD("%s: column %s/%s: a string column needs values", what, b->name, cname);
        if ((st = strings_from_json(c, v, b->name, ZMR_ECORRUPT)) < 0)
            return zmr_err_prefix(st, what);
    } else {
        uint64_t off;
        if ((st = get_u64_field(ce, "offset", &off, what, cname)) < 0)
            return st;
        if (off % 8)
            return BAD("%s: column %s/%s: offset %llu is not a multiple of 8", what, b->name, cname,
                       (unsigned long long)off);
        c->nbytes = nelem * zmr_dtype_itemsize(dtype);
        if (off > plen || c->nbytes > plen - off)
            return BAD("%s: column %s/%s: buffer [%llu, +%llu) runs past the value's %llu payload bytes", what,
                       b->name, cname, (unsigned long long)off, (unsigned long long)c->nbytes,
                       (unsigned long long)plen);
        c->data = malloc(c->nbytes ? pad8(c->nbytes) : 8);
        if (c->data == NULL)
            return zmr_err(ZMR_ENOMEM, "%s: no memory for column %s/%s", what, b->name, cname);
        if (c->nbytes)
            memcpy(c->data, payload + off, c->nbytes);
        if (dtype == ZMR_BOOL)
            for (uint64_t k = 0; k < nelem; k++)
                if (((uint8_t *)c->data)[k] > 1)
                    return BAD("%s: column %s/%s: bool element %llu is %u, not 0/1", what, b->name, cname,
                               (unsigned long long)k, ((uint8_t *)c->data)[k]);
    }
    if (json_object_object_get_ex(ce, "validity", &v)) {
        uint64_t off;
        if (zmr_json_u64(v, &off) < 0)
            return BAD("%s: column %s/%s: validity must be an offset", what, b->name, cname);
        if (off % 8)
            return BAD("%s: column %s/%s: validity offset %llu is not a multiple of 8", what, b->name, cname,
                       (unsigned long long)off);
        if (off > plen || sh[0] > plen - off)
            return BAD("%s: column %s/%s: validity [%llu, +%llu) runs past the value's %llu payload bytes",
                       what, b->name, cname, (unsigned long long)off, (unsigned long long)sh[0],
                       (unsigned long long)plen);
        if ((st = copy_validity(c, payload + off, sh[0], b->name)) < 0)
            return zmr_err(ZMR_ECORRUPT, "%s: %s", what, zmr_last_error());
    }
    if (c->strings && c->validity == NULL)
        for (uint64_t k = 0; k < nelem; k++)
            if (c->strings[k] == NULL)
                return BAD("%s: column %s/%s: values[%llu] is null but the column has no validity mask", what,
                           b->name, cname, (unsigned long long)k);
    return ZMR_OK;
}

/* One block entry of a header: count, structural_shape, targets,
 * attributes, then its columns; a target column must be one of them, u64. */
static zmr_status decode_block(zmr_frame *f, const char *bname, json_object *be, const unsigned char *payload,
                               uint64_t plen, const char *what)
{
    json_object *v, *cols;
    zmr_status st;
    uint64_t count;
    struct zmr_block *b;
    if (!json_object_is_type(be, json_type_object))
        return BAD("%s: block %s must be an object", what, bname);
    if ((st = get_u64_field(be, "count", &count, what, bname)) < 0)
        return st;
    if (bname[0] == '\0')
        return BAD("%s: a block has an empty name", what);
    if ((st = new_block(f, bname, count, &b)) < 0)
        return st;
    if (json_object_object_get_ex(be, "structural_shape", &v)) {
        if (zmr_rule_structural_shape(bname, count, v, ZMR_ECORRUPT) < 0)
            return zmr_err_prefix(ZMR_ECORRUPT, what);
        b->structural_shape = jcopy(v);
    }
    if (json_object_object_get_ex(be, "targets", &v)) {
        if (check_targets_obj(v, bname) < 0)
            return zmr_err(ZMR_ECORRUPT, "%s: %s", what, zmr_last_error());
        b->targets = jcopy(v);
    }
    if (json_object_object_get_ex(be, "attributes", &v)) {
        if (f->kind != ZMR_FRAME_SYSTEM || !json_object_is_type(v, json_type_object))
            return BAD("%s: block %s: attributes ride on system frames only, as an object", what, bname);
        b->attributes = jcopy(v);
    }
    if (!json_object_object_get_ex(be, "columns", &cols) || !json_object_is_type(cols, json_type_object))
        return BAD("%s: block %s: columns must be an object", what, bname);
    json_object_object_foreach(cols, cname, ce) {
        if (cname[0] == '\0')
            return BAD("%s: block %s: a column has an empty name", what, bname);
        if ((st = decode_column(f, b, cname, ce, payload, plen, what)) < 0)
            return st;
    }
    if (b->targets) {
        json_object_object_foreach(b->targets, tc, tv) {
            (void)tv;
            struct zmr_col *c = find_col(b, tc);
            if (c == NULL || c->dtype != ZMR_U64)
                return BAD("%s: block %s: target column '%s' must be a u64 column of the block", what, bname, tc);
        }
    }
    return ZMR_OK;
}

/* meta, and on a system frame meta_types: every tag one of the 16, every
 * typed key present, every value of its tag (untagged ones inferred). */
static zmr_status decode_meta(zmr_frame *f, json_object *h, const char *what)
{
    json_object *v, *mt;
    if (!json_object_object_get_ex(h, "meta", &v) || !json_object_is_type(v, json_type_object))
        return BAD("%s: header needs a \"meta\" object", what);
    json_object_put(f->meta);
    f->meta = jcopy(v);
    if (f->kind != ZMR_FRAME_SYSTEM) {
        if (json_object_object_get_ex(h, "meta_types", &v))
            return BAD("%s: a %s frame carries no meta_types", what, kind_names[f->kind]);
        if (f->kind == ZMR_FRAME_INDEX && json_object_object_length(f->meta) != 0)
            return BAD("%s: the index carries \"meta\": {}", what);
        return ZMR_OK;
    }
    if (!json_object_object_get_ex(h, "meta_types", &mt) || !json_object_is_type(mt, json_type_object))
        return BAD("%s: a system frame always carries a \"meta_types\" object", what);
    json_object_object_foreach(mt, key, tv) {
        zmr_tag tag;
        json_object *val;
        if (!json_object_is_type(tv, json_type_string) || zmr_tag_parse(json_object_get_string(tv), &tag) < 0)
            return BAD("%s: meta_types.%s is not one of the 16 tags", what, key);
        if (!json_object_object_get_ex(f->meta, key, &val))
            return BAD("%s: meta_types.%s types a key absent from meta", what, key);
    }
    json_object_put(f->meta_types);
    f->meta_types = jcopy(mt);
    json_object_object_foreach(f->meta, mkey, mval) {
        zmr_tag tag = zmr_infer_tag(mval);
        json_object *tv;
        if (json_object_object_get_ex(f->meta_types, mkey, &tv))
            zmr_tag_parse(json_object_get_string(tv), &tag);
        if (zmr_typed_check(tag, mval, ZMR_ECORRUPT) < 0) {
            char pre[200];
            snprintf(pre, sizeof pre, "%s: meta.%.100s", what, mkey);
            return zmr_err_prefix(ZMR_ECORRUPT, pre);
        }
    }
    return ZMR_OK;
}

/* step (i64) and time (f64) on updates only; box on updates and systems. */
static zmr_status decode_step_time_box(zmr_frame *f, json_object *h, const char *what)
{
    json_object *v;
    zmr_status st;
    if (json_object_object_get_ex(h, "step", &v)) {
        zmr_value val;
        if (f->kind != ZMR_FRAME_UPDATE)
            return BAD("%s: step appears only on trajectory updates", what);
        if (zmr_typed_to_value(ZMR_TAG_I64, v, &val) < 0)
            return zmr_err_prefix(ZMR_ECORRUPT, what);
        f->has_step = true;
        f->step = val.i[0];
    }
    if (json_object_object_get_ex(h, "time", &v)) {
        if (f->kind != ZMR_FRAME_UPDATE)
            return BAD("%s: time appears only on trajectory updates", what);
        if (zmr_json_f64(v, &f->time) < 0)
            return BAD("%s: time must be an f64 typed value", what);
        f->has_time = true;
    }
    if (json_object_object_get_ex(h, "box", &v)) {
        if (f->kind != ZMR_FRAME_UPDATE && f->kind != ZMR_FRAME_SYSTEM)
            return BAD("%s: a %s frame carries no box", what, kind_names[f->kind]);
        if ((st = decode_box(v, &f->box, what)) < 0)
            return st;
        f->has_box = true;
    }
    return ZMR_OK;
}

/* The header in phases: blocks, meta, step / time / box, and (system
 * frames, which hold every block their references may name) the row
 * references. */
static zmr_status decode_header(zmr_frame *f, json_object *h, const unsigned char *payload, uint64_t plen,
                                const char *what)
{
    json_object *blocks;
    zmr_status st;
    if (!json_object_is_type(h, json_type_object))
        return BAD("%s: header must be a JSON object", what);
    if (!json_object_object_get_ex(h, "blocks", &blocks) || !json_object_is_type(blocks, json_type_object))
        return BAD("%s: header needs a \"blocks\" object", what);
    json_object_object_foreach(blocks, bname, be) {
        if ((st = decode_block(f, bname, be, payload, plen, what)) < 0)
            return st;
    }
    if ((st = decode_meta(f, h, what)) < 0 || (st = decode_step_time_box(f, h, what)) < 0)
        return st;
    if (f->kind == ZMR_FRAME_SYSTEM)
        return zmr_frame_check_targets(f, f, NULL) < 0 ? zmr_err_prefix(ZMR_ECORRUPT, what) : ZMR_OK;
    return ZMR_OK;
}

zmr_status zmr_frame_decode(zmr_frame **out, const void *value, size_t len, zmr_frame_kind kind,
                            const char *what)
{
    if (out == NULL)
        return zmr_err(ZMR_EINVAL, "frame_decode: out is NULL");
    *out = NULL;
    if (what == NULL)
        what = "frame";
    if (value == NULL && len)
        return zmr_err(ZMR_EINVAL, "%s: NULL value", what);
    const unsigned char *v = value;
    if (len < 8 || memcmp(v, "MRF1", 4))
        return BAD("%s: magic is not \"MRF1\" (value of %zu bytes)", what, len);
    uint64_t hlen = (uint64_t)v[4] | (uint64_t)v[5] << 8 | (uint64_t)v[6] << 16 | (uint64_t)v[7] << 24;
    if (hlen > len - 8)
        return BAD("%s: header length %llu runs past the value (%zu bytes after the prefix)", what,
                   (unsigned long long)hlen, len - 8);
    uint64_t start = pad8(8 + hlen);
    if (start > len)
        return BAD("%s: padding after the header runs past the value (%llu > %zu)", what,
                   (unsigned long long)start, len);
    json_object *h;
    zmr_status st = zmr_json_parse((const char *)v + 8, (size_t)hlen, what, ZMR_ECORRUPT, &h);
    if (st < 0)
        return st;
    zmr_frame *f;
    if ((st = zmr_frame_create(&f, kind)) < 0) {
        json_object_put(h);
        return st;
    }
    st = decode_header(f, h, v + start, len - start, what);
    json_object_put(h);
    if (st < 0) {
        zmr_frame_free(f);
        return st;
    }
    *out = f;
    return ZMR_OK;
}
