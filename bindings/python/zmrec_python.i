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
 * A collection read straight from LMDB as loader streams, for
 * loaderx.mrec.lmdb_streams and to_zrecord: libzmrec's item source
 * (zmr_source, zmrec.h) through the shared glue of zr_bind_mrec.h (its
 * loader streams and its conversion into stores). Here only the capsule
 * that holds a zr_bind_mrec_source and the mapping of Python values. */

%{
#include "zr_bind_mrec.h"

/* What a freed source's capsule points at. */
static char zmr_py_src_freed;

static zr_bind_mrec_source *zmr_py_src(PyObject *cap)
{
    zr_bind_mrec_source *s = PyCapsule_GetPointer(cap, "loaderx.mrec.source");
    if (s != NULL && (void *)s == (void *)&zmr_py_src_freed) {
        PyErr_SetString(PyExc_ValueError, "mrec streams are closed");
        return NULL;
    }
    return s;
}
%}

%inline %{
/* Open `path` as an item source (zr_bind_mrec_source_open_v). scalars: a
 * sequence of str. Returns a capsule; free with zmr_py_source_free. */
PyObject *zmr_py_source_open(const char *path, unsigned flags, const char *block, const char *column,
                             PyObject *scalars, int include_systems)
{
    PyObject *seq = PySequence_Fast(scalars, "scalars must be a sequence of str");
    if (seq == NULL)
        return NULL;
    Py_ssize_t ns = PySequence_Fast_GET_SIZE(seq);
    const char **names = calloc((size_t)ns + 1, sizeof *names);
    if (names == NULL) {
        Py_DECREF(seq);
        return PyErr_NoMemory();
    }
    for (Py_ssize_t k = 0; k < ns; k++)
        if ((names[k] = PyUnicode_AsUTF8(PySequence_Fast_GET_ITEM(seq, k))) == NULL) {
            free(names);
            Py_DECREF(seq);
            return NULL;
        }
    zr_bind_mrec_source *s = NULL;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = zr_bind_mrec_source_open_v(&s, path, flags, block, column, names, (size_t)ns, include_systems);
    Py_END_ALLOW_THREADS
    free(names);
    Py_DECREF(seq);
    ZMR_PY_CHECK(rc);
    return PyCapsule_New(s, "loaderx.mrec.source", NULL);
}

PyObject *zmr_py_source_length(PyObject *cap)
{
    zr_bind_mrec_source *s = zmr_py_src(cap);
    return s ? PyLong_FromUnsignedLongLong(zr_bind_mrec_source_length(s)) : NULL;
}

PyObject *zmr_py_source_free(PyObject *cap)
{
    zr_bind_mrec_source *s = PyCapsule_GetPointer(cap, "loaderx.mrec.source");
    if (s == NULL)
        return NULL;
    if ((void *)s == (void *)&zmr_py_src_freed)
        Py_RETURN_NONE;
    zr_bind_mrec_source_free(s);
    if (PyCapsule_SetPointer(cap, &zmr_py_src_freed) < 0) /* never freed or used twice */
        return NULL;
    Py_RETURN_NONE;
}

/* The source converted into stores under out_dir (zr_bind_mrec_to_stores). */
PyObject *zmr_py_source_to_stores(PyObject *cap, const char *out_dir, const char *codec)
{
    zr_bind_mrec_source *s = zmr_py_src(cap);
    if (s == NULL)
        return NULL;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = zr_bind_mrec_to_stores(s, out_dir, codec);
    Py_END_ALLOW_THREADS
    ZMR_PY_CHECK(rc);
    Py_RETURN_NONE;
}

/* A loader over a mix of streams: each entry is a store handle or a tuple
 * (source capsule, stream number). options as for zld_create. */
PyObject *zmr_py_loader_create(PyObject *entries, PyObject *options)
{
    zr_bind_options opts;
    if (zr_py_loader_options(options, &opts) < 0)
        return NULL;
    PyObject *seq = PySequence_Fast(entries, "streams must be a sequence");
    zr_bind_set *set = seq ? zr_bind_set_new() : NULL;
    if (seq == NULL || set == NULL) {
        Py_XDECREF(seq);
        return seq ? PyErr_NoMemory() : NULL;
    }
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    int rc = ZR_OK;
    for (Py_ssize_t k = 0; k < n && rc == ZR_OK; k++) {
        PyObject *it = PySequence_Fast_GET_ITEM(seq, k);
        void *p = NULL;
        if (PyTuple_Check(it) && PyTuple_GET_SIZE(it) == 2) {
            zr_bind_mrec_source *s = PyCapsule_GetPointer(PyTuple_GET_ITEM(it, 0), "loaderx.mrec.source");
            size_t which = PyLong_AsSize_t(PyTuple_GET_ITEM(it, 1));
            if (s == NULL || PyErr_Occurred() || (void *)s == (void *)&zmr_py_src_freed ||
                which >= zr_bind_mrec_source_nstreams(s)) {
                PyErr_Clear();
                PyErr_Format(PyExc_TypeError, "streams[%zd] is not an open mrec stream", k);
                goto fail;
            }
            rc = zr_bind_set_add_mrec(set, s, which);
        } else if (SWIG_IsOK(SWIG_ConvertPtr(it, &p, SWIGTYPE_p_zrs_store, 0)) && p != NULL) {
            rc = zr_bind_set_add_store(set, (zrs_store *)p);
        } else {
            PyErr_Format(PyExc_TypeError, "streams[%zd] is neither a store handle nor an mrec stream", k);
            goto fail;
        }
    }
    zld_loader *l = NULL;
    if (rc == ZR_OK) {
        Py_BEGIN_ALLOW_THREADS
        rc = zr_bind_loader_create(&l, set, &opts.o);
        Py_END_ALLOW_THREADS
    }
    zr_bind_set_free(set);
    Py_DECREF(seq);
    if (rc < 0) {
        zr_py_raise(rc);
        return NULL;
    }
    return SWIG_NewPointerObj(SWIG_as_voidptr(l), SWIGTYPE_p_zld_loader, 0);
fail:
    zr_bind_set_free(set);
    Py_DECREF(seq);
    return NULL;
}
%}
