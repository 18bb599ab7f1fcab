/*
 * zmrec_python.i - the Python surface of libzmrec inside loaderx._zr,
 * used by loaderx/mrec.py (the public API). Conventions as in zr_python.i:
 * a negative zmr_status raises the class loaderx.errors.from_status gives
 * (the numeric codes are zr_status's) with zmr_last_error() as message;
 * buffers come in through the buffer protocol and go out as bytes copies;
 * handles are plain pointers closed explicitly by the Python layer.
 */

/* Status-returning functions of zmrec.h exposed as they are. */
%typemap(out) zmr_status {
    if ($1 < 0) { zmr_py_raise($1); SWIG_fail; }
    $result = Py_None; Py_INCREF(Py_None);
}

%thread zmr_validate;
%thread zmr_writer_commit;
%typemap(out) int zmr_molrec_version { $result = PyLong_FromLong((long)$1); }

%{
#include <zmrec.h>
static void zmr_py_raise(int status)
{
    const char *detail = zmr_last_error();
    if (detail == NULL || detail[0] == '\0')
        detail = zmr_strerror(status);
    PyObject *msg = PyUnicode_DecodeUTF8(detail, (Py_ssize_t)strlen(detail), "replace");
    PyObject *mod = msg ? PyImport_ImportModule("loaderx.errors") : NULL;
    PyObject *exc = mod ? PyObject_CallMethod(mod, "from_status", "iO", status, msg) : NULL;
    Py_XDECREF(mod);
    Py_XDECREF(msg);
    if (exc == NULL)
        return;
    PyErr_SetObject((PyObject *)Py_TYPE(exc), exc);
    Py_DECREF(exc);
}

#define ZMR_PY_CHECK(expr) do { int rc_ = (expr); if (rc_ < 0) { zmr_py_raise(rc_); return NULL; } } while (0)

static int zmr_py_shape(PyObject *seq_in, uint64_t *shape, size_t *ndim)
{
    PyObject *seq = PySequence_Fast(seq_in, "shape must be a sequence of ints");
    if (seq == NULL)
        return -1;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    if (n < 1 || n > ZMR_MAX_NDIM) {
        Py_DECREF(seq);
        PyErr_Format(PyExc_ValueError, "shape must have 1..%d dims, got %zd", ZMR_MAX_NDIM, n);
        return -1;
    }
    for (Py_ssize_t k = 0; k < n; k++) {
        unsigned long long u = PyLong_AsUnsignedLongLong(PySequence_Fast_GET_ITEM(seq, k));
        if (u == (unsigned long long)-1 && PyErr_Occurred()) {
            Py_DECREF(seq);
            return -1;
        }
        shape[k] = u;
    }
    Py_DECREF(seq);
    *ndim = (size_t)n;
    return 0;
}

static PyObject *zmr_py_frame_obj(zmr_frame *f)
{
    if (f == NULL)
        Py_RETURN_NONE;
    return SWIG_NewPointerObj(SWIG_as_voidptr(f), SWIGTYPE_p_zmr_frame, 0);
}
%}

%include "zmrec.i"

%inline %{
PyObject *zmr_py_frame_new(int kind)
{
    zmr_frame *f;
    ZMR_PY_CHECK(zmr_frame_create(&f, (zmr_frame_kind)kind));
    return zmr_py_frame_obj(f);
}

/* data: any C-contiguous buffer of the column's bytes; validity: None or a
 * buffer of shape[0] bytes. */
PyObject *zmr_py_add_column(zmr_frame *f, const char *block, const char *column, const char *dtype,
                            PyObject *shape_seq, PyObject *data, PyObject *validity, double precision)
{
    uint64_t shape[ZMR_MAX_NDIM];
    size_t ndim;
    zmr_dtype dt;
    Py_buffer vd = {0}, vv = {0};
    ZMR_PY_CHECK(zmr_dtype_parse(dtype, &dt));
    if (zmr_py_shape(shape_seq, shape, &ndim) < 0)
        return NULL;
    if (PyObject_GetBuffer(data, &vd, PyBUF_C_CONTIGUOUS) < 0)
        return NULL;
    if (validity != Py_None) {
        if (PyObject_GetBuffer(validity, &vv, PyBUF_C_CONTIGUOUS) < 0) {
            PyBuffer_Release(&vd);
            return NULL;
        }
        if ((uint64_t)vv.len != shape[0]) {
            PyBuffer_Release(&vd);
            PyBuffer_Release(&vv);
            PyErr_Format(PyExc_ValueError, "%s/%s: validity has %zd bytes, shape[0] is %llu", block, column,
                         vv.len, (unsigned long long)shape[0]);
            return NULL;
        }
    }
    int rc = zmr_frame_add_column(f, block, column, dt, shape, ndim, vd.buf, (uint64_t)vd.len,
                                  validity != Py_None ? vv.buf : NULL, precision);
    PyBuffer_Release(&vd);
    if (validity != Py_None)
        PyBuffer_Release(&vv);
    ZMR_PY_CHECK(rc);
    Py_RETURN_NONE;
}

PyObject *zmr_py_add_string_column(zmr_frame *f, const char *block, const char *column, PyObject *shape_seq,
                                   const char *values_json, PyObject *validity)
{
    uint64_t shape[ZMR_MAX_NDIM];
    size_t ndim;
    Py_buffer vv = {0};
    if (zmr_py_shape(shape_seq, shape, &ndim) < 0)
        return NULL;
    if (validity != Py_None) {
        if (PyObject_GetBuffer(validity, &vv, PyBUF_C_CONTIGUOUS) < 0)
            return NULL;
        if ((uint64_t)vv.len != shape[0]) {
            PyBuffer_Release(&vv);
            PyErr_Format(PyExc_ValueError, "%s/%s: validity has %zd bytes, shape[0] is %llu", block, column,
                         vv.len, (unsigned long long)shape[0]);
            return NULL;
        }
    }
    int rc = zmr_frame_add_string_column(f, block, column, shape, ndim, values_json,
                                         validity != Py_None ? vv.buf : NULL);
    if (validity != Py_None)
        PyBuffer_Release(&vv);
    ZMR_PY_CHECK(rc);
    Py_RETURN_NONE;
}

PyObject *zmr_py_set_meta(zmr_frame *f, const char *key, const char *tag, const char *typed_json)
{
    zmr_tag t;
    ZMR_PY_CHECK(zmr_tag_parse(tag, &t));
    ZMR_PY_CHECK(zmr_frame_set_meta(f, key, t, typed_json));
    Py_RETURN_NONE;
}

/* vectors: 9 floats, origin: 3 floats, boundary: 3 bools. */
PyObject *zmr_py_set_box(zmr_frame *f, PyObject *vectors, PyObject *origin, PyObject *boundary, int cell_defined)
{
    zmr_box b;
    memset(&b, 0, sizeof b);
    PyObject *vs[3] = {vectors, origin, boundary};
    Py_ssize_t want[3] = {9, 3, 3};
    for (int s = 0; s < 3; s++) {
        PyObject *seq = PySequence_Fast(vs[s], "box fields must be sequences");
        if (seq == NULL)
            return NULL;
        if (PySequence_Fast_GET_SIZE(seq) != want[s]) {
            Py_DECREF(seq);
            PyErr_Format(PyExc_ValueError, "box: expected %zd values", want[s]);
            return NULL;
        }
        for (Py_ssize_t k = 0; k < want[s]; k++) {
            PyObject *it = PySequence_Fast_GET_ITEM(seq, k);
            if (s == 2) {
                int t = PyObject_IsTrue(it);
                if (t < 0) { Py_DECREF(seq); return NULL; }
                b.boundary[k] = t;
            } else {
                double d = PyFloat_AsDouble(it);
                if (d == -1.0 && PyErr_Occurred()) { Py_DECREF(seq); return NULL; }
                if (s == 0) b.vectors[k] = d; else b.origin[k] = d;
            }
        }
        Py_DECREF(seq);
    }
    b.cell_defined = cell_defined != 0;
    ZMR_PY_CHECK(zmr_frame_set_box(f, &b));
    Py_RETURN_NONE;
}

PyObject *zmr_py_frame_header(zmr_frame *f)
{
    const char *h = zmr_frame_header_json(f);
    if (h == NULL) {
        zmr_py_raise(ZMR_ENOMEM);
        return NULL;
    }
    return PyUnicode_FromString(h);
}

/* (data bytes or None for strings, validity bytes or None). */
PyObject *zmr_py_frame_column(zmr_frame *f, const char *block, const char *column)
{
    zmr_column c;
    ZMR_PY_CHECK(zmr_frame_find_column(f, block, column, &c));
    PyObject *d = c.data ? PyBytes_FromStringAndSize(c.data, (Py_ssize_t)c.nbytes) : (Py_INCREF(Py_None), Py_None);
    PyObject *v = c.validity ? PyBytes_FromStringAndSize((const char *)c.validity, (Py_ssize_t)c.shape[0])
                             : (Py_INCREF(Py_None), Py_None);
    return Py_BuildValue("(NN)", d, v);
}

PyObject *zmr_py_frame_encode(zmr_frame *f)
{
    void *v;
    size_t n;
    ZMR_PY_CHECK(zmr_frame_encode(f, &v, &n));
    PyObject *b = PyBytes_FromStringAndSize(v, (Py_ssize_t)n);
    zmr_free(v);
    return b;
}

PyObject *zmr_py_frame_decode(PyObject *value, int kind, const char *what)
{
    Py_buffer vb;
    zmr_frame *f;
    if (PyObject_GetBuffer(value, &vb, PyBUF_C_CONTIGUOUS) < 0)
        return NULL;
    int rc = zmr_frame_decode(&f, vb.buf, (size_t)vb.len, (zmr_frame_kind)kind, what);
    PyBuffer_Release(&vb);
    ZMR_PY_CHECK(rc);
    return zmr_py_frame_obj(f);
}

PyObject *zmr_py_writer_create(const char *path, const char *collection_json, const char *schema_json)
{
    zmr_writer *w;
    ZMR_PY_CHECK(zmr_writer_create(&w, path, collection_json, schema_json));
    return SWIG_NewPointerObj(SWIG_as_voidptr(w), SWIGTYPE_p_zmr_writer, 0);
}

/* system: a frame handle or None. Returns the record index. */
PyObject *zmr_py_begin_record(zmr_writer *w, const char *meta_json, PyObject *system)
{
    void *p = NULL;
    if (system != Py_None && !SWIG_IsOK(SWIG_ConvertPtr(system, &p, SWIGTYPE_p_zmr_frame, 0))) {
        PyErr_SetString(PyExc_TypeError, "system must be a frame handle or None");
        return NULL;
    }
    uint64_t idx;
    ZMR_PY_CHECK(zmr_writer_begin_record(w, meta_json, (zmr_frame *)p, &idx));
    return PyLong_FromUnsignedLongLong(idx);
}

PyObject *zmr_py_open(const char *path, unsigned flags)
{
    zmr_reader *r;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = zmr_open(&r, path, flags);
    Py_END_ALLOW_THREADS
    ZMR_PY_CHECK(rc);
    return SWIG_NewPointerObj(SWIG_as_voidptr(r), SWIGTYPE_p_zmr_reader, 0);
}

/* (first_frame, n_frames, n_atoms, has_trajectory). */
PyObject *zmr_py_record_info(zmr_reader *r, uint64_t rec)
{
    uint64_t a, b, c;
    bool h;
    ZMR_PY_CHECK(zmr_record_info(r, rec, &a, &b, &c, &h));
    return Py_BuildValue("(KKKO)", (unsigned long long)a, (unsigned long long)b, (unsigned long long)c,
                         h ? Py_True : Py_False);
}

PyObject *zmr_py_read_record_meta(zmr_reader *r, uint64_t rec)
{
    char *j;
    ZMR_PY_CHECK(zmr_read_record_meta(r, rec, &j));
    PyObject *s = PyUnicode_FromString(j);
    zmr_free(j);
    return s;
}

/* which: 0 system, 1 stored update k, 2 resolved frame k, 3 ff, 4 index. */
PyObject *zmr_py_read(zmr_reader *r, int which, uint64_t rec, uint64_t k)
{
    zmr_frame *f = NULL;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = which == 0 ? zmr_read_system(r, rec, &f)
       : which == 1 ? zmr_read_update(r, rec, k, &f)
       : which == 2 ? zmr_read_frame(r, rec, k, &f)
       : which == 3 ? zmr_read_ff(r, &f)
       : zmr_read_index(r, &f);
    Py_END_ALLOW_THREADS
    ZMR_PY_CHECK(rc);
    return zmr_py_frame_obj(f);
}

/* (has_step, step, has_time, time, box or None) with box (vectors9, origin3, boundary3, cell_defined). */
PyObject *zmr_py_frame_scalars(zmr_frame *f)
{
    int64_t step = 0;
    double t = 0;
    zmr_box b;
    bool hs = zmr_frame_get_step(f, &step), ht = zmr_frame_get_time(f, &t);
    PyObject *box;
    if (zmr_frame_get_box(f, &b)) {
        box = Py_BuildValue("((ddddddddd)(ddd)(OOO)O)", b.vectors[0], b.vectors[1], b.vectors[2], b.vectors[3],
                            b.vectors[4], b.vectors[5], b.vectors[6], b.vectors[7], b.vectors[8], b.origin[0],
                            b.origin[1], b.origin[2], b.boundary[0] ? Py_True : Py_False,
                            b.boundary[1] ? Py_True : Py_False, b.boundary[2] ? Py_True : Py_False,
                            b.cell_defined ? Py_True : Py_False);
    } else {
        Py_INCREF(Py_None);
        box = Py_None;
    }
    return Py_BuildValue("(OLOdN)", hs ? Py_True : Py_False, (long long)step, ht ? Py_True : Py_False, t, box);
}
%}

/* ===================================================== LMDB loader streams
 *
 * A collection read straight from LMDB as loader streams (zld_stream,
 * libzloader's generic interface), for loaderx.mrec.lmdb_streams: one item
 * per trajectory frame (and, when asked, per system-only record holding
 * the column), in collection order, exactly the items to_zrecord converts:
 *   stream 0  ragged f64: the frame's resolved <block>/<column> (the last
 *             update of the record that holds the block), or several 1-d
 *             f64 columns ("x,y,z") side by side as one (n, k) array, in
 *             RaggedStore's packed form [u64 ndim][u64 dims][payload];
 *   stream 1  dense u64: the item's record;
 *   stream 2+ dense: per scalar, "step" as i64 (-1 when absent), any other
 *             as f64 (NaN when absent): step / time of the update, else
 *             its meta key; for a system item the system's meta key.
 * The callbacks run on the loader's worker threads; a zmr_reader is safe
 * to share (every call runs its own read transaction). The source opens
 * its own reader, so it can be rebuilt in a forked child. */

%{
typedef struct zmr_py_src zmr_py_src;

typedef struct zmr_py_sstream {
    zmr_py_src *src;
    size_t which;
} zmr_py_sstream;

#define ZMR_PY_MAXCOLS 8

/* An item's value: one column as stored, or several 1-d f64 columns
 * (x, y, z) side by side as one (n, k) array. */
typedef struct zmr_py_val {
    zmr_frame *owner;
    size_t k;
    zmr_column c[ZMR_PY_MAXCOLS];
    uint64_t ndim, shape[ZMR_MAX_NDIM], nbytes;
} zmr_py_val;

struct zmr_py_src {
    zmr_reader *r;
    char *block, *column; /* column: one name or "x,y,z" */
    size_t ncols;
    char *cols[ZMR_PY_MAXCOLS];
    uint64_t n, cap;
    uint64_t *rec;
    int64_t *frame; /* -1: the record's system */
    size_t nscalars;
    char **scalars;
    zmr_py_sstream *streams; /* 2 + nscalars */
};

static void zmr_py_src_free(zmr_py_src *s)
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
    free(s->streams);
    free(s);
}

/* Forward a libzmrec failure to the loader's error channel (one numeric
 * convention: zmr_status == zr_status). */
static int zmr_py_src_fail(int st, uint64_t rec, int64_t frame)
{
    if (frame < 0)
        return zr_set_error(st, "mrec record %llu (system): %s", (unsigned long long)rec, zmr_last_error());
    return zr_set_error(st, "mrec record %llu frame %lld: %s", (unsigned long long)rec, (long long)frame,
                        zmr_last_error());
}

static int zmr_py_src_push(zmr_py_src *s, uint64_t rec, int64_t frame)
{
    if (s->n == s->cap) {
        uint64_t cap = s->cap ? 2 * s->cap : 64;
        uint64_t *r = realloc(s->rec, cap * sizeof *r);
        if (r == NULL)
            return -1;
        s->rec = r;
        int64_t *f = realloc(s->frame, cap * sizeof *f);
        if (f == NULL)
            return -1;
        s->frame = f;
        s->cap = cap;
    }
    s->rec[s->n] = rec;
    s->frame[s->n] = frame;
    s->n++;
    return 0;
}

/* Item i's resolved value: v->owner (free it) holds its columns. */
static int zmr_py_src_column(zmr_py_src *s, uint64_t i, zmr_py_val *v)
{
    uint64_t rec = s->rec[i];
    int64_t k = s->frame[i];
    zmr_frame *f = NULL;
    size_t b;
    int st;
    v->owner = NULL;
    if (k < 0) {
        if ((st = zmr_read_system(s->r, rec, &f)) < 0)
            return zmr_py_src_fail(st, rec, k);
        if (f == NULL || zmr_frame_find_block(f, s->block, &b) < 0) {
            zmr_frame_free(f);
            return zr_set_error(ZR_ECORRUPT, "mrec record %llu: the system has no block '%s'",
                                (unsigned long long)rec, s->block);
        }
    } else {
        /* carry-forward: the last update at or before k holding the block */
        for (int64_t j = k;; j--) {
            if (j < 0)
                return zr_set_error(ZR_ECORRUPT, "mrec record %llu frame %lld: no update sets block '%s'",
                                    (unsigned long long)rec, (long long)k, s->block);
            if ((st = zmr_read_update(s->r, rec, (uint64_t)j, &f)) < 0)
                return zmr_py_src_fail(st, rec, j);
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
            return zr_set_error(ZR_ECORRUPT, "mrec record %llu frame %lld: %s/%s %s", (unsigned long long)rec,
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
    return 0;
}

static uint64_t zmr_py_packed_size(const zmr_py_val *v) { return 8 + 8 * v->ndim + v->nbytes; }

/* v's values row-major at dst (v->nbytes bytes) */
static void zmr_py_val_copy(const zmr_py_val *v, unsigned char *dst)
{
    if (v->k == 1) {
        if (v->nbytes)
            memcpy(dst, v->c[0].data, v->nbytes);
        return;
    }
    double *o = (double *)(void *)dst;
    for (uint64_t r = 0; r < v->shape[0]; r++)
        for (size_t c = 0; c < v->k; c++)
            memcpy(&o[r * v->k + c], (const double *)v->c[c].data + r, 8);
}

static int zmr_py_src_sizes(void *user, const uint64_t *index, uint64_t count, uint64_t *sizes)
{
    zmr_py_src *s = ((zmr_py_sstream *)user)->src;
    for (uint64_t i = 0; i < count; i++) {
        zmr_py_val v;
        int st = zmr_py_src_column(s, index[i], &v);
        if (st < 0)
            return st;
        sizes[i] = zmr_py_packed_size(&v);
        zmr_frame_free(v.owner);
    }
    return 0;
}

/* Scalar `name` of item i as a double (*present 0 when absent). */
static int zmr_py_src_scalar(zmr_py_src *s, uint64_t i, const char *name, double *out, int64_t *iout,
                             int *present)
{
    uint64_t rec = s->rec[i];
    int64_t k = s->frame[i];
    zmr_frame *f = NULL;
    int st = k < 0 ? zmr_read_system(s->r, rec, &f) : zmr_read_update(s->r, rec, (uint64_t)k, &f);
    if (st < 0)
        return zmr_py_src_fail(st, rec, k);
    *present = 0;
    if (f == NULL)
        return 0;
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
                return zr_set_error(ZR_ECORRUPT, "mrec record %llu frame %lld: meta '%s' is a %s, not a number",
                                    (unsigned long long)rec, (long long)k, name, zmr_tag_name(v.tag));
            }
        }
    }
    zmr_frame_free(f);
    return 0;
}

static int zmr_py_src_gather(void *user, const uint64_t *index, uint64_t count, void *dst, uint64_t cap,
                             const uint64_t *bounds)
{
    zmr_py_sstream *ss = user;
    zmr_py_src *s = ss->src;
    unsigned char *out = dst;
    for (uint64_t i = 0; i < count; i++) {
        uint64_t it = index[i];
        if (ss->which == 0) {
            zmr_py_val val;
            int st = zmr_py_src_column(s, it, &val);
            if (st < 0)
                return st;
            uint64_t need = zmr_py_packed_size(&val);
            if (bounds[i + 1] - bounds[i] != need || bounds[i + 1] > cap) {
                zmr_frame_free(val.owner);
                return zr_set_error(ZR_ECORRUPT, "mrec item %llu: %llu bytes now, %llu when sized",
                                    (unsigned long long)it, (unsigned long long)need,
                                    (unsigned long long)(bounds[i + 1] - bounds[i]));
            }
            unsigned char *p = out + bounds[i];
            uint64_t nd = val.ndim;
            memcpy(p, &nd, 8);
            memcpy(p + 8, val.shape, 8 * nd);
            zmr_py_val_copy(&val, p + 8 + 8 * nd);
            zmr_frame_free(val.owner);
        } else if (ss->which == 1) {
            if ((i + 1) * 8 > cap)
                return zr_set_error(ZR_EINVAL, "mrec record stream: destination too small");
            memcpy(out + 8 * i, &s->rec[it], 8);
        } else {
            const char *name = s->scalars[ss->which - 2];
            double d = NAN;
            int64_t v = -1;
            int present;
            int st = zmr_py_src_scalar(s, it, name, &d, &v, &present);
            if (st < 0)
                return st;
            if ((i + 1) * 8 > cap)
                return zr_set_error(ZR_EINVAL, "mrec scalar stream: destination too small");
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
    return 0;
}

/* What a freed source's capsule points at. */
static char zmr_py_src_freed;

static char *zmr_py_strdup(const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d)
        memcpy(d, s, n);
    return d;
}
%}

%inline %{
/* Open `path` and list its items (see above). scalars: a sequence of str.
 * Returns an opaque source handle; free with zmr_py_source_free. */
PyObject *zmr_py_source_open(const char *path, unsigned flags, const char *block, const char *column,
                             PyObject *scalars, int include_systems)
{
    PyObject *seq = PySequence_Fast(scalars, "scalars must be a sequence of str");
    if (seq == NULL)
        return NULL;
    Py_ssize_t ns = PySequence_Fast_GET_SIZE(seq);
    zmr_py_src *s = calloc(1, sizeof *s);
    if (s == NULL) {
        Py_DECREF(seq);
        return PyErr_NoMemory();
    }
    s->block = zmr_py_strdup(block);
    s->column = zmr_py_strdup(column);
    for (const char *p = column; s->column && *p;) {
        size_t n = strcspn(p, ",");
        if (n == 0 || s->ncols == ZMR_PY_MAXCOLS) {
            Py_DECREF(seq);
            zmr_py_src_free(s);
            PyErr_Format(PyExc_ValueError, "columns %s: 1..%d names separated by commas", column, ZMR_PY_MAXCOLS);
            return NULL;
        }
        if ((s->cols[s->ncols] = malloc(n + 1)) == NULL) {
            free(s->column);
            s->column = NULL;
            break;
        }
        memcpy(s->cols[s->ncols], p, n);
        s->cols[s->ncols++][n] = '\0';
        p += n + (p[n] == ',');
    }
    s->scalars = calloc((size_t)ns + 1, sizeof *s->scalars);
    s->streams = calloc((size_t)ns + 2, sizeof *s->streams);
    if (!s->block || !s->column || !s->scalars || !s->streams) {
        Py_DECREF(seq);
        zmr_py_src_free(s);
        return PyErr_NoMemory();
    }
    for (Py_ssize_t k = 0; k < ns; k++) {
        const char *name = PyUnicode_AsUTF8(PySequence_Fast_GET_ITEM(seq, k));
        if (name == NULL || (s->scalars[k] = zmr_py_strdup(name)) == NULL) {
            Py_DECREF(seq);
            zmr_py_src_free(s);
            return name ? PyErr_NoMemory() : NULL;
        }
        s->nscalars++;
    }
    Py_DECREF(seq);
    for (size_t k = 0; k < s->nscalars + 2; k++) {
        s->streams[k].src = s;
        s->streams[k].which = k;
    }
    int st, nomem = 0;
    Py_BEGIN_ALLOW_THREADS
    st = zmr_open(&s->r, path, flags);
    for (uint64_t rec = 0; st == ZMR_OK && rec < zmr_n_records(s->r); rec++) {
        uint64_t nf = 0;
        zmr_record_info(s->r, rec, NULL, &nf, NULL, NULL);
        if (nf) {
            for (uint64_t k = 0; st == ZMR_OK && k < nf; k++)
                if (zmr_py_src_push(s, rec, (int64_t)k) < 0)
                    st = ZMR_ENOMEM, nomem = 1;
        } else if (include_systems) {
            zmr_frame *f = NULL;
            zmr_column c;
            if ((st = zmr_read_system(s->r, rec, &f)) == ZMR_OK && f && s->ncols &&
                zmr_frame_find_column(f, block, s->cols[0], &c) == ZMR_OK && zmr_py_src_push(s, rec, -1) < 0)
                st = ZMR_ENOMEM, nomem = 1;
            zmr_frame_free(f);
        }
    }
    Py_END_ALLOW_THREADS
    if (st < 0) {
        zmr_py_src_free(s);
        if (nomem)
            return PyErr_NoMemory();
        zmr_py_raise(st);
        return NULL;
    }
    return PyCapsule_New(s, "loaderx.mrec.source", NULL);
}

PyObject *zmr_py_source_length(PyObject *cap)
{
    zmr_py_src *s = PyCapsule_GetPointer(cap, "loaderx.mrec.source");
    if (s == NULL)
        return NULL;
    if ((void *)s == (void *)&zmr_py_src_freed) {
        PyErr_SetString(PyExc_ValueError, "mrec streams are closed");
        return NULL;
    }
    return PyLong_FromUnsignedLongLong(s->n);
}

PyObject *zmr_py_source_free(PyObject *cap)
{
    zmr_py_src *s = PyCapsule_GetPointer(cap, "loaderx.mrec.source");
    if (s == NULL)
        return NULL;
    if ((void *)s == (void *)&zmr_py_src_freed)
        Py_RETURN_NONE;
    zmr_py_src_free(s);
    if (PyCapsule_SetPointer(cap, &zmr_py_src_freed) < 0) /* never freed or used twice */
        return NULL;
    Py_RETURN_NONE;
}

/* A loader over a mix of streams: each entry is a store handle or a tuple
 * (source capsule, stream number). options as for zld_create. */
PyObject *zmr_py_loader_create(PyObject *entries, PyObject *options)
{
    zr_bind_options opts;
    if (zr_py_loader_options(options, &opts) < 0)
        return NULL;
    const zld_options *o = &opts.o;
    PyObject *seq = PySequence_Fast(entries, "streams must be a sequence");
    if (seq == NULL)
        return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    zld_stream *st = calloc((size_t)(n > 0 ? n : 1), sizeof *st);
    if (st == NULL) {
        Py_DECREF(seq);
        return PyErr_NoMemory();
    }
    for (Py_ssize_t k = 0; k < n; k++) {
        PyObject *it = PySequence_Fast_GET_ITEM(seq, k);
        void *p = NULL;
        if (PyTuple_Check(it) && PyTuple_GET_SIZE(it) == 2) {
            zmr_py_src *s = PyCapsule_GetPointer(PyTuple_GET_ITEM(it, 0), "loaderx.mrec.source");
            size_t which = PyLong_AsSize_t(PyTuple_GET_ITEM(it, 1));
            if (s == NULL || PyErr_Occurred() || (void *)s == (void *)&zmr_py_src_freed ||
                which >= s->nscalars + 2) {
                PyErr_Clear();
                PyErr_Format(PyExc_TypeError, "streams[%zd] is not an open mrec stream", k);
                goto fail;
            }
            st[k].user = &s->streams[which];
            st[k].name = which == 0 ? s->column : which == 1 ? "record" : s->scalars[which - 2];
            st[k].length = s->n;
            st[k].kind = which == 0 ? ZLD_STREAM_RAGGED : ZLD_STREAM_DENSE;
            st[k].record_size = which == 0 ? 0 : 8;
            st[k].gather = zmr_py_src_gather;
            st[k].sizes = which == 0 ? zmr_py_src_sizes : NULL;
        } else if (SWIG_IsOK(SWIG_ConvertPtr(it, &p, SWIGTYPE_p_zrs_store, 0)) && p != NULL) {
            int rc = zld_stream_from_store(&st[k], (zrs_store *)p);
            if (rc < 0) {
                zr_py_raise(rc);
                goto fail;
            }
        } else {
            PyErr_Format(PyExc_TypeError, "streams[%zd] is neither a store handle nor an mrec stream", k);
            goto fail;
        }
    }
    {
        zld_loader *l = NULL;
        int rc;
        Py_BEGIN_ALLOW_THREADS
        rc = zld_create_streams(&l, st, (size_t)n, o);
        Py_END_ALLOW_THREADS
        free(st);
        Py_DECREF(seq);
        if (rc < 0) {
            zr_py_raise(rc);
            return NULL;
        }
        return SWIG_NewPointerObj(SWIG_as_voidptr(l), SWIGTYPE_p_zld_loader, 0);
    }
fail:
    free(st);
    Py_DECREF(seq);
    return NULL;
}
%}
