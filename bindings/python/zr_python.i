/*
 * zr_python.i - the Python flavour of the loaderx-in-C interface.
 *
 * Builds the C extension `loaderx._zr` (swig -python -noproxy: one C module,
 * no generated .py). It is private: the public API is the pure-Python
 * package `loaderx` (zrecord, zsampler, dataloader) built on top of it.
 *
 * Conventions of this module:
 *   - every C function returning an int zr_status returns None on success
 *     (or its out-parameters: one value, or a list of values) and raises on a
 *     negative status; the exception class comes from loaderx.errors
 *     (one place: from_status) and the message from zr_last_error();
 *   - byte sources/destinations are any object exporting the buffer
 *     protocol (numpy arrays, bytes, bytearray, memoryview);
 *   - index arrays are C-contiguous buffers of 8-byte integers;
 *   - handles (zrs_store *, zld_loader *, ...) are plain pointers that the
 *     Python layer closes explicitly; nothing here frees them implicitly;
 *   - the GIL is held everywhere except around the long native calls
 *     (create/open/close/sync, append, gather, zld_create/next/close).
 */
%module(package="loaderx", threads="1") _zr

%begin %{
#define PY_SSIZE_T_CLEAN
%}

%{
#include "zr_py_limited.h" /* the stable ABI: Py_LIMITED_API, see there */
#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#include <numpy/arrayobject.h>
#include <string.h>
#include <zloader.h>
#include "zr_bind_options.h" /* zr_bind_options */

/* Raise the Python exception for a negative zr_status. The status -> class
 * mapping lives in one place, loaderx/errors.py (from_status); the message
 * is the calling thread's zr_last_error() detail. */
static void zr_py_raise(int status)
{
    const char *detail = zr_last_error();
    if (detail == NULL || detail[0] == '\0')
        detail = zr_strerror(status);
    if (detail == NULL)
        detail = "unknown error";
    PyObject *msg = PyUnicode_DecodeUTF8(detail, (Py_ssize_t)strlen(detail), "replace");
    if (msg == NULL)
        return;
    PyObject *mod = PyImport_ImportModule("loaderx.errors");
    if (mod == NULL) {
        Py_DECREF(msg);
        return;
    }
    PyObject *exc = PyObject_CallMethod(mod, "from_status", "iOi", status, msg, zr_last_errno());
    Py_DECREF(mod);
    Py_DECREF(msg);
    if (exc == NULL)
        return;
    PyErr_SetObject((PyObject *)Py_TYPE(exc), exc);
    Py_DECREF(exc);
}

/* Get a C-contiguous buffer view of `obj` for parameter `param` of
 * `func`. `want_int8` (1) additionally requires 8-byte integer items.
 * TypeError if obj does not export a buffer at all, ValueError if it does
 * but is not suitable (read-only for a destination, not contiguous, wrong
 * item size). On success the caller must PyBuffer_Release(view). */
static int zr_py_get_buffer(PyObject *obj, Py_buffer *view, int writable,
                            int want_int8, const char *func, const char *param)
{
    if (!PyObject_CheckBuffer(obj)) {
        PyObject *tn = zr_py_type_name(obj);
        PyErr_Format(PyExc_TypeError,
                     "%s: parameter '%s' must support the buffer protocol, got %S",
                     func, param, tn);
        Py_XDECREF(tn);
        return -1;
    }
    int flags = PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | (writable ? PyBUF_WRITABLE : 0);
    if (PyObject_GetBuffer(obj, view, flags) < 0) {
        PyErr_Clear();
        view->obj = NULL;
        PyObject *tn = zr_py_type_name(obj);
        PyErr_Format(PyExc_ValueError,
                     "%s: parameter '%s' must be a %sC-contiguous buffer, got %S",
                     func, param, writable ? "writable " : "", tn);
        Py_XDECREF(tn);
        return -1;
    }
    if (want_int8) {
        const char *f = view->format ? view->format : "B";
        if (*f == '<' || *f == '=' || *f == '@')
            f++;
        if (view->itemsize != 8 || strchr("qQlLnN", *f) == NULL || f[0] == '\0' || f[1] != '\0') {
            PyErr_Format(PyExc_ValueError,
                         "%s: parameter '%s' must hold 8-byte integers (int64/uint64), "
                         "got format '%s' with itemsize %zd",
                         func, param, view->format ? view->format : "B", view->itemsize);
            PyBuffer_Release(view);
            view->obj = NULL;
            return -1;
        }
    }
    return 0;
}

static int zr_py_u64_item(PyObject *map, const char *key, uint64_t dflt,
                          int required, uint64_t *out)
{
    PyObject *v = PyMapping_GetItemString(map, key);
    if (v == NULL) {
        if (!required && PyErr_ExceptionMatches(PyExc_KeyError)) {
            PyErr_Clear();
            *out = dflt;
            return 0;
        }
        return -1;
    }
    PyObject *idx = PyNumber_Index(v);
    Py_DECREF(v);
    if (idx == NULL)
        return -1;
    unsigned long long u = PyLong_AsUnsignedLongLong(idx);
    Py_DECREF(idx);
    if (u == (unsigned long long)-1 && PyErr_Occurred()) {
        PyErr_Clear();
        PyErr_Format(PyExc_ValueError, "'%s' must be an integer in [0, 2**64)", key);
        return -1;
    }
    *out = (uint64_t)u;
    return 0;
}

static int zr_py_mode_item(PyObject *map, zsm_mode dflt, zsm_mode *out)
{
    uint64_t v = 0;
    if (zr_py_u64_item(map, "mode", (uint64_t)dflt, 0, &v) < 0)
        return -1;
    if (v > (uint64_t)ZSM_CYCLIC) {
        PyErr_Format(PyExc_ValueError, "'mode' must be 0 (sequential), 1 (iid) or 2 (cyclic), got %llu",
                     (unsigned long long)v);
        return -1;
    }
    *out = (zsm_mode)v;
    return 0;
}

static int zr_py_u32(uint64_t v, const char *key, uint32_t *out)
{
    if (v > UINT32_MAX) {
        PyErr_Format(PyExc_ValueError, "'%s' must fit in 32 bits, got %llu", key,
                     (unsigned long long)v);
        return -1;
    }
    *out = (uint32_t)v;
    return 0;
}

/* A mapping {length, batch_size, seed, mode, rank, world_size} -> config. */
static int zr_py_sampler_config(PyObject *map, zsm_config *cfg)
{
    uint64_t rank = 0, world = 1;
    if (!PyMapping_Check(map)) {
        PyErr_SetString(PyExc_TypeError, "sampler config must be a mapping");
        return -1;
    }
    memset(cfg, 0, sizeof *cfg);
    if (zr_py_u64_item(map, "length", 0, 1, &cfg->length) < 0 ||
        zr_py_u64_item(map, "batch_size", 0, 1, &cfg->batch_size) < 0 ||
        zr_py_u64_item(map, "seed", 0, 0, &cfg->seed) < 0 ||
        zr_py_mode_item(map, ZSM_CYCLIC, &cfg->mode) < 0 ||
        zr_py_u64_item(map, "rank", 0, 0, &rank) < 0 ||
        zr_py_u64_item(map, "world_size", 1, 0, &world) < 0 ||
        zr_py_u32(rank, "rank", &cfg->rank) < 0 ||
        zr_py_u32(world, "world_size", &cfg->world_size) < 0)
        return -1;
    return 0;
}

/* "flips": a sequence of (stream, width, elem_size, p) tuples. */
static int zr_py_flips_item(PyObject *map, zr_bind_options *h)
{
    PyObject *fl = PyMapping_HasKeyString(map, "flips") ? PyMapping_GetItemString(map, "flips") : NULL;
    if (fl == NULL || fl == Py_None) {
        Py_XDECREF(fl);
        return 0;
    }
    PyObject *seq = PySequence_Fast(fl, "flips must be a sequence of (stream, width, elem_size, p)");
    Py_DECREF(fl);
    if (seq == NULL) return -1;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    if (n > ZR_BIND_MAX_FLIPS) {
        Py_DECREF(seq);
        PyErr_Format(PyExc_ValueError, "at most %d flipped streams per loader, got %zd",
                     ZR_BIND_MAX_FLIPS, n);
        return -1;
    }
    for (Py_ssize_t k = 0; k < n; k++) {
        unsigned long long stream, width;
        unsigned int elem;
        double p;
        if (!PyArg_ParseTuple(PySequence_Fast_GET_ITEM(seq, k), "KKId;flips entries are "
                              "(stream, width, elem_size, p)", &stream, &width, &elem, &p)) {
            Py_DECREF(seq);
            return -1;
        }
        h->flips[k].stream = (size_t)stream;
        h->flips[k].width = width;
        h->flips[k].elem_size = elem;
        h->flips[k].p = p;
    }
    Py_DECREF(seq);
    h->o.flips = n > 0 ? h->flips : NULL;
    h->o.nflips = (size_t)n;
    return 0;
}

/* "names" (a sequence of str: the stream labels of the state), "resume"
 * (a state's JSON text) and "resume_flags"; the strings stay alive in the
 * mapping for the call (zld_create copies the names). */
static int zr_py_resume_items(PyObject *map, zr_bind_options *h)
{
    uint64_t flags = 0;
    if (zr_py_u64_item(map, "resume_flags", 0, 0, &flags) < 0)
        return -1;
    h->o.resume_flags = (unsigned)flags;
    PyObject *rs = PyMapping_HasKeyString(map, "resume") ? PyMapping_GetItemString(map, "resume") : NULL;
    if (rs != NULL && rs != Py_None) {
        h->o.resume = PyUnicode_Check(rs) ? PyUnicode_AsUTF8(rs) : NULL;
        if (h->o.resume == NULL) {
            Py_DECREF(rs);
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_TypeError, "resume must be a str (a loader state's JSON text)");
            return -1;
        }
    }
    Py_XDECREF(rs); /* the mapping keeps it alive */
    PyObject *nm = PyMapping_HasKeyString(map, "names") ? PyMapping_GetItemString(map, "names") : NULL;
    if (nm == NULL || nm == Py_None) {
        Py_XDECREF(nm);
        return 0;
    }
    PyObject *seq = PySequence_Fast(nm, "names must be a sequence of str");
    Py_DECREF(nm);
    if (seq == NULL)
        return -1;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    if (n > ZR_BIND_MAX_NAMES) {
        Py_DECREF(seq);
        PyErr_Format(PyExc_ValueError, "at most %d named streams per loader, got %zd",
                     ZR_BIND_MAX_NAMES, n);
        return -1;
    }
    for (Py_ssize_t k = 0; k < n; k++) {
        PyObject *it = PySequence_Fast_GET_ITEM(seq, k);
        h->names[k] = PyUnicode_Check(it) ? PyUnicode_AsUTF8(it) : NULL;
        if (h->names[k] == NULL) {
            Py_DECREF(seq);
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_TypeError, "names must be a sequence of str");
            return -1;
        }
    }
    Py_DECREF(seq); /* the mapping keeps the list, the list its items */
    h->o.names = n > 0 ? h->names : NULL;
    return 0;
}

/* Pack mode: "pack" (0/1), "pack_length", "pack_window" (0: the
 * default), and the names "pack_policy" and "pack_overlong" (parsed by
 * libzsampler; missing or None: the defaults). */
static int zr_py_pack_items(PyObject *map, zld_options *o)
{
    uint64_t pack = 0;
    if (zr_py_u64_item(map, "pack", 0, 0, &pack) < 0 ||
        zr_py_u64_item(map, "pack_length", 0, 0, &o->pack_length) < 0 ||
        zr_py_u64_item(map, "pack_window", 0, 0, &o->pack_window) < 0)
        return -1;
    o->pack = pack != 0;
    static const char *const keys[] = {"pack_policy", "pack_overlong"};
    for (int k = 0; k < 2; k++) {
        PyObject *v = PyMapping_HasKeyString(map, keys[k]) ? PyMapping_GetItemString(map, keys[k])
                                                           : NULL;
        if (v == NULL || v == Py_None) {
            Py_XDECREF(v);
            continue;
        }
        const char *name = PyUnicode_Check(v) ? PyUnicode_AsUTF8(v) : NULL;
        int rc = name == NULL ? ZSM_EINVAL
                 : k == 0     ? zsm_pack_policy_parse(name, &o->pack_policy)
                              : zsm_pack_overlong_parse(name, &o->pack_overlong);
        if (rc != ZSM_OK) {
            if (!PyErr_Occurred())
                PyErr_Format(PyExc_ValueError, "unknown %s %R; expected %s", keys[k], v,
                             k == 0 ? "'first_fit', 'best_fit' or 'concat'"
                                    : "'split', 'truncate' or 'drop'");
            Py_DECREF(v);
            return -1;
        }
        Py_DECREF(v);
    }
    return 0;
}

/* A mapping of zld_options fields -> h->o (missing keys: defaults). */
static int zr_py_loader_options(PyObject *map, zr_bind_options *h)
{
    zld_options *o = &h->o;
    zld_options init;
    uint64_t rank = 0, world = 1, workers = 0, prefetch = 0, readahead = ZLD_READAHEAD_AUTO;
    uint64_t pass = 0, shuffle = 0, drop_last = 0, even = 0;
    if (!PyMapping_Check(map)) {
        PyErr_SetString(PyExc_TypeError, "loader options must be a mapping");
        return -1;
    }
    zld_options_init(&init, ZLD_OPTIONS_VERSION);
    *o = init;
    if (zr_py_u64_item(map, "batch_size", init.batch_size, 0, &o->batch_size) < 0 ||
        zr_py_mode_item(map, init.mode, &o->mode) < 0 ||
        zr_py_u64_item(map, "seed", init.seed, 0, &o->seed) < 0 ||
        zr_py_u64_item(map, "start_step", init.start_step, 0, &o->start_step) < 0 ||
        zr_py_u64_item(map, "rank", 0, 0, &rank) < 0 ||
        zr_py_u64_item(map, "world_size", 1, 0, &world) < 0 ||
        zr_py_u64_item(map, "num_workers", 0, 0, &workers) < 0 ||
        zr_py_u64_item(map, "prefetch", 0, 0, &prefetch) < 0 ||
        zr_py_u64_item(map, "readahead", ZLD_READAHEAD_AUTO, 0, &readahead) < 0 ||
        zr_py_u64_item(map, "pass", 0, 0, &pass) < 0 ||
        zr_py_u64_item(map, "shuffle", 0, 0, &shuffle) < 0 ||
        zr_py_u64_item(map, "drop_last", 0, 0, &drop_last) < 0 ||
        zr_py_u64_item(map, "epoch", 0, 0, &o->epoch) < 0 ||
        zr_py_u64_item(map, "even_batches", 0, 0, &even) < 0 ||
        zr_py_u32(rank, "rank", &o->rank) < 0 ||
        zr_py_u32(world, "world_size", &o->world_size) < 0 ||
        zr_py_u32(workers, "num_workers", &o->num_workers) < 0 ||
        zr_py_u32(prefetch, "prefetch", &o->prefetch) < 0)
        return -1; /* their limits: zld_create (ZLD_MAX_WORKERS, ZLD_MAX_PREFETCH) */
    o->pass = pass != 0;
    o->shuffle = shuffle != 0;
    o->drop_last = drop_last != 0;
    o->even_batches = even != 0;
    /* readahead: steps ahead to hint; ZLD_READAHEAD_AUTO (the default) or
     * anything >= 2**32 - 1 means "as far as prefetch". */
    o->readahead = readahead >= ZLD_READAHEAD_AUTO ? ZLD_READAHEAD_AUTO : (unsigned)readahead;
    /* bucket_lengths: bytes of little-endian uint32, one per record; they
     * stay alive in the mapping for the call (zld_create copies them). */
    PyObject *bl = PyMapping_Check(map) && PyMapping_HasKeyString(map, "bucket_lengths")
                       ? PyMapping_GetItemString(map, "bucket_lengths")
                       : NULL;
    if (bl != NULL && bl != Py_None) {
        if (!PyBytes_Check(bl) || PyBytes_GET_SIZE(bl) % 4 != 0) {
            Py_DECREF(bl);
            PyErr_SetString(PyExc_TypeError, "bucket_lengths must be bytes of uint32 values");
            return -1;
        }
        o->bucket_lengths = (const uint32_t *)PyBytes_AS_STRING(bl);
        o->bucket_count = (uint64_t)PyBytes_GET_SIZE(bl) / 4;
    }
    Py_XDECREF(bl); /* the mapping keeps the bytes alive */
    if (zr_py_u64_item(map, "bucket_window", 0, 0, &o->bucket_window) < 0)
        return -1;
    if (zr_py_pack_items(map, o) < 0 || zr_py_resume_items(map, h) < 0)
        return -1;
    return zr_py_flips_item(map, h);
}

/* ---- zero-copy batch buffers: a numpy uint8 array owning a zld buffer */

#define ZR_PY_CAPSULE_NAME "loaderx._zr.batch_buffer"

static void zr_py_capsule_free(PyObject *capsule)
{
    void *p = PyCapsule_GetPointer(capsule, ZR_PY_CAPSULE_NAME);
    if (p != NULL)
        zld_free(p);
    else
        PyErr_Clear();
}

/* Wrap `buf` (nbytes, from zld_batch_detach) as a 1-D uint8 ndarray that
 * owns it: the array's base is a capsule whose destructor calls zld_free.
 * On failure buf is freed and NULL returned with an exception set. */
static PyObject *zr_py_owning_array(void *buf, uint64_t nbytes)
{
    npy_intp dims[1];
    if (nbytes > (uint64_t)NPY_MAX_INTP) {
        zld_free(buf);
        PyErr_SetString(PyExc_OverflowError, "batch buffer larger than the address space");
        return NULL;
    }
    dims[0] = (npy_intp)nbytes;
    PyObject *arr = PyArray_SimpleNewFromData(1, dims, NPY_UINT8, buf);
    if (arr == NULL) {
        zld_free(buf);
        return NULL;
    }
    PyObject *cap = PyCapsule_New(buf, ZR_PY_CAPSULE_NAME, zr_py_capsule_free);
    if (cap == NULL) {
        Py_DECREF(arr);
        zld_free(buf);
        return NULL;
    }
    /* Steals cap even on failure; the capsule then frees buf. */
    if (PyArray_SetBaseObject((PyArrayObject *)arr, cap) < 0) {
        Py_DECREF(arr);
        return NULL;
    }
    return arr;
}

static PyObject *zr_py_u64_array_copy(const uint64_t *src, uint64_t n)
{
    npy_intp dims[1] = { (npy_intp)n };
    PyObject *arr = PyArray_SimpleNew(1, dims, NPY_UINT64);
    if (arr != NULL && n > 0)
        memcpy(PyArray_DATA((PyArrayObject *)arr), src, (size_t)n * sizeof(uint64_t));
    return arr;
}
%}

%init %{
/* numpy's C API. SWIG >= 4.4 runs this in the module's exec slot, which
 * returns an int; import_array() would return NULL (0, "success") there and
 * leave its ImportError unreported. */
#if SWIG_VERSION >= 0x040400
    import_array1(-1);
#else
    import_array();
#endif
%}

/* Nothing releases the GIL unless listed below. */
%nothread;

/* ============================================================ status codes */

/* Every int in these headers is a zr_status: None on success, else raise. */
%typemap(out) int {
    if ($1 < 0) {
        zr_py_raise($1);
        SWIG_fail;
    }
    $result = SWIG_Py_Void();
}

/* Predicates return a plain truth value, not a status. */
%typemap(out) int zrs_is_readonly, int zre_is_readonly, int zld_is_closed, int zrs_is_closed,
    int zrs_concat_is_closed { $result = PyBool_FromLong($1); }
/* Counts. */
%typemap(out) int zrs_borrowers, int zrs_concat_borrowers { $result = PyLong_FromLong($1); }

/* ============================================================ out handles */

%define ZR_OUT_HANDLE(TYPE)
%typemap(in, numinputs=0) TYPE **out (TYPE *tmp = NULL) { $1 = &tmp; }
%typemap(argout) TYPE **out {
    $result = ZR_PY_APPEND_OUTPUT($result, SWIG_NewPointerObj(SWIG_as_voidptr(tmp$argnum), $descriptor(TYPE *), 0));
}
%enddef
ZR_OUT_HANDLE(zre_engine)
ZR_OUT_HANDLE(zrs_store)
ZR_OUT_HANDLE(zld_loader)
ZR_OUT_HANDLE(zld_batch)

%define ZR_OUT_ENUM(TYPE)
%typemap(in, numinputs=0) TYPE *out (TYPE tmp = (TYPE)0) { $1 = &tmp; }
%typemap(argout) TYPE *out {
    $result = ZR_PY_APPEND_OUTPUT($result, PyLong_FromLong((long)tmp$argnum));
}
%enddef
ZR_OUT_ENUM(zre_codec)
ZR_OUT_ENUM(zrs_dtype)
ZR_OUT_ENUM(zsm_mode)

%typemap(in, numinputs=0) uint64_t *first_index (uint64_t tmp = 0) { $1 = &tmp; }
%typemap(argout) uint64_t *first_index {
    $result = ZR_PY_APPEND_OUTPUT($result, PyLong_FromUnsignedLongLong(tmp$argnum));
}

/* zre_get_stats: the struct comes back as a dict. */
%typemap(in, numinputs=0) zre_stats *out (zre_stats tmp) { memset(&tmp, 0, sizeof tmp); $1 = &tmp; }
%typemap(argout) zre_stats *out {
    PyObject *d = Py_BuildValue("{s:K,s:K,s:K,s:K,s:K}",
        "records", (unsigned long long)tmp$argnum.records,
        "logical_bytes", (unsigned long long)tmp$argnum.logical_bytes,
        "live_bytes", (unsigned long long)tmp$argnum.live_bytes,
        "chunk_bytes", (unsigned long long)tmp$argnum.chunk_bytes,
        "reclaimable", (unsigned long long)tmp$argnum.reclaimable);
    if (d == NULL) SWIG_fail;
    $result = ZR_PY_APPEND_OUTPUT($result, d);
}

/* zrs_ragged_decode: ((dims...), payload_offset). */
%typemap(in, numinputs=0) (size_t *ndim, uint64_t *dims, uint64_t *payload_offset)
    (size_t nd = 0, uint64_t dv[ZRS_MAX_NDIM], uint64_t off = 0) {
    $1 = &nd; $2 = dv; $3 = &off;
}
%typemap(argout) (size_t *ndim, uint64_t *dims, uint64_t *payload_offset) {
    PyObject *shape = PyTuple_New((Py_ssize_t)nd$argnum);
    if (shape == NULL) SWIG_fail;
    for (size_t k = 0; k < nd$argnum; k++)
        PyTuple_SET_ITEM(shape, (Py_ssize_t)k, PyLong_FromUnsignedLongLong(dv$argnum[k]));
    PyObject *pair = Py_BuildValue("(NK)", shape, (unsigned long long)off$argnum);
    if (pair == NULL) SWIG_fail;
    $result = ZR_PY_APPEND_OUTPUT($result, pair);
}

/* ================================================================ buffers */

/* Read-only byte sources: (pointer, byte length) from one buffer object. */
%define ZR_SRC_BUFFER(PTR, LEN)
%typemap(in) (const void *PTR, uint64_t LEN) (Py_buffer view = {0}) {
    if (zr_py_get_buffer($input, &view, 0, 0, "$symname", "$1_name") < 0) SWIG_fail;
    $1 = view.buf;
    $2 = (uint64_t)view.len;
}
%typemap(freearg) (const void *PTR, uint64_t LEN) { if (view$argnum.obj) PyBuffer_Release(&view$argnum); }
%enddef
ZR_SRC_BUFFER(data, nbytes)
ZR_SRC_BUFFER(record, size)
ZR_SRC_BUFFER(dict, dict_size)

/* Writable C-contiguous destinations. */
%typemap(in) (void *dst, uint64_t dst_capacity) (Py_buffer view = {0}) {
    if (zr_py_get_buffer($input, &view, 1, 0, "$symname", "$1_name") < 0) SWIG_fail;
    $1 = view.buf;
    $2 = (uint64_t)view.len;
}
%typemap(freearg) (void *dst, uint64_t dst_capacity) { if (view$argnum.obj) PyBuffer_Release(&view$argnum); }

/* Index arrays: 8-byte integers, count = number of items. */
%typemap(in) (const int64_t *index, uint64_t count) (Py_buffer view = {0}) {
    if (zr_py_get_buffer($input, &view, 0, 1, "$symname", "$1_name") < 0) SWIG_fail;
    $1 = (int64_t *)view.buf;
    $2 = (uint64_t)(view.len / 8);
}
%typemap(freearg) (const int64_t *index, uint64_t count) { if (view$argnum.obj) PyBuffer_Release(&view$argnum); }

/* Byte-offset arrays with their item count. */
%typemap(in) (const uint64_t *bounds, uint64_t nbounds) (Py_buffer view = {0}) {
    if (zr_py_get_buffer($input, &view, 0, 1, "$symname", "$1_name") < 0) SWIG_fail;
    $1 = (uint64_t *)view.buf;
    $2 = (uint64_t)(view.len / 8);
}
%typemap(freearg) (const uint64_t *bounds, uint64_t nbounds) { if (view$argnum.obj) PyBuffer_Release(&view$argnum); }

/* Index in, a fresh uint64 ndarray of `count` results out. */
%define ZR_INDEX_TO_U64(OUTNAME)
%typemap(in) (const int64_t *index, uint64_t count, uint64_t *OUTNAME)
    (Py_buffer view = {0}, PyObject *res = NULL) {
    if (zr_py_get_buffer($input, &view, 0, 1, "$symname", "$1_name") < 0) SWIG_fail;
    npy_intp n = (npy_intp)(view.len / 8);
    res = PyArray_SimpleNew(1, &n, NPY_UINT64);
    if (res == NULL) SWIG_fail;
    $1 = (int64_t *)view.buf;
    $2 = (uint64_t)n;
    $3 = (uint64_t *)PyArray_DATA((PyArrayObject *)res);
}
%typemap(argout) (const int64_t *index, uint64_t count, uint64_t *OUTNAME) {
    $result = ZR_PY_APPEND_OUTPUT($result, res$argnum);
    res$argnum = NULL;
}
%typemap(freearg) (const int64_t *index, uint64_t count, uint64_t *OUTNAME) {
    if (view$argnum.obj) PyBuffer_Release(&view$argnum);
    Py_XDECREF(res$argnum);
}
%enddef
ZR_INDEX_TO_U64(out)
ZR_INDEX_TO_U64(sizes)

/* Dense item shapes: any sequence of ints. */
%typemap(in) (const uint64_t *item_shape, size_t ndim) (uint64_t shape[ZRS_MAX_NDIM]) {
    PyObject *seq = PySequence_Fast($input, "$symname: item_shape must be a sequence of ints");
    if (seq == NULL) SWIG_fail;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    if (n > ZRS_MAX_NDIM) {
        Py_DECREF(seq);
        PyErr_Format(PyExc_ValueError, "$symname: item_shape has %zd dims, at most %d allowed",
                     n, ZRS_MAX_NDIM);
        SWIG_fail;
    }
    for (Py_ssize_t k = 0; k < n; k++) {
        PyObject *idx = PyNumber_Index(PySequence_Fast_GET_ITEM(seq, k));
        unsigned long long u = idx ? PyLong_AsUnsignedLongLong(idx) : (unsigned long long)-1;
        Py_XDECREF(idx);
        if (u == (unsigned long long)-1 && PyErr_Occurred()) {
            Py_DECREF(seq);
            PyErr_Clear();
            PyErr_Format(PyExc_ValueError, "$symname: item_shape[%zd] must be a non-negative int", k);
            SWIG_fail;
        }
        shape[k] = (uint64_t)u;
    }
    Py_DECREF(seq);
    $1 = shape;
    $2 = (size_t)n;
}

/* Loader streams: a sequence of store handles. */
%typemap(in) (zrs_store *const *streams, size_t nstreams) (zrs_store **arr = NULL) {
    PyObject *seq = PySequence_Fast($input, "$symname: streams must be a sequence of store handles");
    if (seq == NULL) SWIG_fail;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    arr = (zrs_store **)PyMem_Malloc((size_t)(n > 0 ? n : 1) * sizeof *arr);
    if (arr == NULL) { Py_DECREF(seq); PyErr_NoMemory(); SWIG_fail; }
    for (Py_ssize_t k = 0; k < n; k++) {
        void *p = NULL;
        if (!SWIG_IsOK(SWIG_ConvertPtr(PySequence_Fast_GET_ITEM(seq, k), &p, $descriptor(zrs_store *), 0)) || p == NULL) {
            Py_DECREF(seq);
            PyErr_Format(PyExc_TypeError, "$symname: streams[%zd] is not an open store handle", k);
            SWIG_fail;
        }
        arr[k] = (zrs_store *)p;
    }
    Py_DECREF(seq);
    $1 = arr;
    $2 = (size_t)n;
}
%typemap(freearg) (zrs_store *const *streams, size_t nstreams) { PyMem_Free(arr$argnum); }

/* Plain-data configurations come in as mappings. */
%typemap(in) const zsm_config *cfg (zsm_config tmp) {
    if (zr_py_sampler_config($input, &tmp) < 0) SWIG_fail;
    $1 = &tmp;
}
%typemap(in) const zld_options *options (zr_bind_options tmp) {
    if (zr_py_loader_options($input, &tmp) < 0) SWIG_fail;
    $1 = &tmp.o;
}

/* ================================================= Python-specific surface */

/* Structs that Python passes as mappings / gets back as dicts. */
%ignore zsm_config;
%ignore zld_options;
%ignore zre_stats;

/* Raw pointers without a length: replaced below by checked variants, or
 * reached through the store layer (the engine's byte I/O). */
%ignore zre_append;
%ignore zre_gather;
%ignore zre_record_sizes;
%ignore zrs_item_shape;
%ignore zrs_append_ragged;
%ignore zrs_gather_ragged;
%ignore zsm_indices;
%ignore zld_batch_data;
%ignore zld_batch_indices;
%ignore zld_batch_bounds;
%ignore zld_batch_detach;
%ignore zld_free;
%ignore zld_get_state;
%ignore zld_state_json; /* zr_py_state_json */
%ignore zld_state_free;
%ignore zrs_get_uuid; /* zr_py_store_uuid */
%ignore zrs_codec_auto; /* zr_py_codec_auto */
%ignore zrs_set_uuid;
%ignore zrs_uuid_str;
%ignore zrs_uuid_parse;
%ignore zld_failed;
%ignore zre_advise;

/* The long native calls run without the GIL. */
%thread zre_create;
%thread zre_open;
%thread zre_close;
%thread zre_sync;
%thread zre_get_stats;
%thread zrs_create_dense;
%thread zrs_create_ragged;
%thread zrs_open;
%thread zrs_close;
%thread zrs_append_dense;
%thread zrs_gather_dense;
%thread zrs_ragged_sizes;
%thread zr_py_append_ragged;
%thread zr_py_gather_ragged;
%thread zrs_create_dense_dict;
%thread zrs_create_ragged_dict;
%thread zrs_open_ex;
%thread zrs_sync;
%thread zrs_refresh;
%thread zrs_delete;
%thread zrs_compact;
%thread zre_check_record;
%thread zld_create;
%thread zld_next;
%thread zld_close;
%thread zld_stop;

/* Every path argument: a str (encoded as os.fsencode does, so a
 * non-UTF-8 name read back from os.listdir as a surrogate-escaped str is
 * the same file again), bytes, or an os.PathLike of either. The bytes may
 * hold a NUL that C would cut at ("a\0/x" would open "a"); the one C check
 * (zr_check_path) refuses it. */
%typemap(in) const char *path (PyObject *fs = NULL) {
    PyObject *p = PyOS_FSPath($input);
    char *bytes = NULL;
    Py_ssize_t size = 0;
    if (p == NULL)  /* TypeError: expected str, bytes or os.PathLike object, not ... */
        SWIG_fail;
    if (PyUnicode_Check(p)) {
        fs = PyUnicode_EncodeFSDefault(p);
        Py_DECREF(p);
    } else {
        fs = p;
    }
    if (fs == NULL || PyBytes_AsStringAndSize(fs, &bytes, &size) < 0)
        SWIG_fail;
    if (zr_check_path(bytes, (size_t)size, "$symname") < 0) {
        zr_py_raise(ZR_EINVAL);
        SWIG_fail;
    }
    $1 = bytes;
}
%typemap(freearg) const char *path {
    Py_XDECREF(fs$argnum);
}

/* Packing's name parsers and item shape: the Python module has its own
 * glue (zr_py_pack_items, zr_py_pack_item_shape below). */
%ignore zsm_pack_policy_parse;
%ignore zsm_pack_overlong_parse;
%ignore zld_pack_item_shape;

%include "zr_core.i"
%include "zmrec_python.i"  /* libzmrec: mrec-lmdb collections (loaderx.mrec) */
%include "shards_python.i" /* concatenated shards and mixtures (loaderx.shards) */

%rename(zrs_item_shape) zr_py_item_shape;
%rename(zld_pack_item_shape) zr_py_pack_item_shape;
%rename(zrs_append_ragged) zr_py_append_ragged;
%rename(zrs_gather_ragged) zr_py_gather_ragged;
%rename(zsm_indices) zr_py_zsm_indices;
%rename(zld_batch_indices) zr_py_batch_indices;
%rename(zld_batch_bounds) zr_py_batch_bounds;
%rename(zld_batch_detach) zr_py_batch_detach;
%rename(zld_next_arrays) zr_py_loader_next;
%rename(zrs_train_dict) zr_py_train_dict;
%rename(zrs_dict_sample_create) zr_py_dict_sample_create;
%rename(zrs_dict_sample_offer) zr_py_dict_sample_offer;
%rename(zrs_dict_sample_store) zr_py_dict_sample_store;
%rename(zrs_dict_sample_train) zr_py_dict_sample_train;
%rename(zld_failed_step) zr_py_failed_step;
%rename(zld_close_slot) zr_py_loader_close_slot;
%rename(zld_state_json) zr_py_state_json;
%rename(zrs_get_uuid) zr_py_store_uuid;
%rename(zrs_codec_auto) zr_py_codec_auto;
%rename(zld_pad) zr_py_pad;
%rename(zsm_bucket_indices) zr_py_zsm_bucket_indices;
%rename(zrs_ragged_arrays) zr_py_ragged_arrays;
%rename(zrs_ragged_pack) zr_py_ragged_pack;
%rename(zrs_ragged_encode) zr_py_ragged_encode;
%rename(zrs_ragged_encode_rows) zr_py_ragged_encode_rows;
%rename(zsm_bernoulli) zr_py_zsm_bernoulli;
%rename(zld_flip_by_name) zr_py_flip_by_name;
%rename(zrs_dtype_from_name) zr_py_dtype_from_name;
%rename(zrs_ragged_gather_once) zr_py_ragged_gather_once;

%inline %{
/* zsm_bernoulli as bytes of count 0/1 values (a uint8 mask). */
PyObject *zr_py_zsm_bernoulli(uint64_t seed, uint64_t step, uint64_t first, uint64_t count,
                              double p)
{
    if (count > (uint64_t)PY_SSIZE_T_MAX) {
        PyErr_SetString(PyExc_OverflowError, "bernoulli: count larger than the address space");
        return NULL;
    }
    PyObject *out = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)count);
    if (out == NULL) return NULL;
    int rc = zsm_bernoulli(seed, step, first, count, p, (uint8_t *)PyBytes_AS_STRING(out));
    if (rc != ZSM_OK) {
        Py_DECREF(out);
        zr_py_raise(rc);
        return NULL;
    }
    return out;
}

/* zrs_dtype_from_name with the byte order: (dtype id, big_endian). */
PyObject *zr_py_dtype_from_name(const char *name)
{
    zrs_dtype dt;
    int big = 0;
    int rc = zrs_dtype_from_name(name, &dt, &big);
    if (rc < 0) {
        zr_py_raise(rc);
        return NULL;
    }
    return Py_BuildValue("(ii)", (int)dt, big);
}

/* zld_flip_by_name: names (a sequence of str, the loader's streams) and
 * items (per stream None for a ragged stream, or (dtype str, item_shape
 * tuple)); returns (stream, width, elem_size) of the flip of probability p
 * on the stream called name. */
PyObject *zr_py_flip_by_name(PyObject *names, PyObject *items, const char *name, double p)
{
    PyObject *ns = PySequence_Fast(names, "flip: names must be a sequence of str");
    if (ns == NULL) return NULL;
    PyObject *is = PySequence_Fast(items, "flip: items must be a sequence");
    if (is == NULL) {
        Py_DECREF(ns);
        return NULL;
    }
    Py_ssize_t n = PySequence_Fast_GET_SIZE(ns);
    PyObject *res = NULL;
    const char **cn = (const char **)PyMem_Calloc((size_t)(n > 0 ? n : 1), sizeof *cn);
    zld_items *ci = (zld_items *)PyMem_Calloc((size_t)(n > 0 ? n : 1), sizeof *ci);
    if (cn == NULL || ci == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    if (PySequence_Fast_GET_SIZE(is) != n) {
        PyErr_SetString(PyExc_ValueError, "flip: one item description per stream name");
        goto done;
    }
    for (Py_ssize_t k = 0; k < n; k++) {
        cn[k] = PyUnicode_AsUTF8(PySequence_Fast_GET_ITEM(ns, k));
        if (cn[k] == NULL) goto done;
        PyObject *it = PySequence_Fast_GET_ITEM(is, k);
        if (it == Py_None) {
            ci[k].kind = ZRS_RAGGED;
            continue;
        }
        const char *dt = NULL;
        PyObject *shape = NULL;
        if (!PyArg_ParseTuple(it, "sO;flip items are None or (dtype, item_shape)", &dt, &shape))
            goto done;
        PyObject *sh = PySequence_Fast(shape, "flip: item_shape must be a sequence of ints");
        if (sh == NULL) goto done;
        Py_ssize_t nd = PySequence_Fast_GET_SIZE(sh);
        int bad = nd > ZRS_MAX_NDIM;
        for (Py_ssize_t d = 0; !bad && d < nd; d++) {
            ci[k].shape[d] = PyLong_AsUnsignedLongLong(PySequence_Fast_GET_ITEM(sh, d));
            bad = PyErr_Occurred() != NULL;
        }
        Py_DECREF(sh);
        if (bad) {
            if (!PyErr_Occurred())
                PyErr_Format(PyExc_ValueError, "flip: more than %d dims", ZRS_MAX_NDIM);
            goto done;
        }
        ci[k].kind = ZRS_DENSE;
        ci[k].ndim = (size_t)nd;
        int rc = zrs_dtype_parse(dt, &ci[k].dtype);
        if (rc < 0) {
            zr_py_raise(rc);
            goto done;
        }
    }
    zld_flip f;
    int rc = zld_flip_by_name(cn, ci, (size_t)n, name, p, &f);
    if (rc < 0)
        zr_py_raise(rc);
    else
        res = Py_BuildValue("(nKI)", (Py_ssize_t)f.stream, (unsigned long long)f.width,
                            (unsigned int)f.elem_size);
done:
    PyMem_Free(cn);
    PyMem_Free(ci);
    Py_DECREF(ns);
    Py_DECREF(is);
    return res;
}

/* Dense item_shape as a tuple of ints (() for scalar records), or None
 * for a ragged store. */
PyObject *zr_py_item_shape(zrs_store *s)
{
    const uint64_t *shape = zrs_item_shape(s);
    size_t nd = zrs_item_ndim(s);
    if (shape == NULL && zrs_get_kind(s) != ZRS_DENSE)
        Py_RETURN_NONE;
    PyObject *t = PyTuple_New((Py_ssize_t)nd);
    if (t == NULL)
        return NULL;
    for (size_t k = 0; k < nd; k++)
        PyTuple_SET_ITEM(t, (Py_ssize_t)k, PyLong_FromUnsignedLongLong(shape[k]));
    return t;
}

/* zrs_append_ragged with the packed buffer's length known, so bounds can
 * be checked against it: bounds has count + 1 non-decreasing entries
 * ending inside data. Returns the first new index. */
int zr_py_append_ragged(zrs_store *s, const void *data, uint64_t nbytes,
                        const uint64_t *bounds, uint64_t nbounds,
                        uint64_t *first_index)
{
    if (nbounds < 2)
        return zr_set_error(ZR_EINVAL, "append_ragged: bounds needs count + 1 >= 2 entries, got %llu",
                            (unsigned long long)nbounds);
    for (uint64_t k = 1; k < nbounds; k++)
        if (bounds[k] < bounds[k - 1])
            return zr_set_error(ZR_EINVAL, "append_ragged: bounds decrease at %llu (%llu < %llu)",
                                (unsigned long long)k, (unsigned long long)bounds[k],
                                (unsigned long long)bounds[k - 1]);
    if (bounds[nbounds - 1] > nbytes)
        return zr_set_error(ZR_EINVAL, "append_ragged: bounds end at byte %llu but data holds %llu bytes",
                            (unsigned long long)bounds[nbounds - 1], (unsigned long long)nbytes);
    return zrs_append_ragged(s, data, bounds, nbounds - 1, first_index);
}

/* zrs_gather_ragged with len(bounds) checked: it must be len(index) + 1. */
int zr_py_gather_ragged(zrs_store *s, const int64_t *index, uint64_t count,
                        void *dst, uint64_t dst_capacity,
                        const uint64_t *bounds, uint64_t nbounds)
{
    if (nbounds != count + 1)
        return zr_set_error(ZR_EINVAL, "gather_ragged: bounds needs %llu entries (count + 1), got %llu",
                            (unsigned long long)(count + 1), (unsigned long long)nbounds);
    return zrs_gather_ragged(s, index, count, dst, dst_capacity, bounds);
}

/* zsm_indices into a writable buffer of at least batch_size * 8 bytes. */
int zr_py_zsm_indices(const zsm_config *cfg, uint64_t step, void *dst, uint64_t dst_capacity)
{
    if (cfg->batch_size > dst_capacity / 8)
        return zr_set_error(ZR_EINVAL, "zsm_indices: dst holds %llu bytes, batch_size %llu needs %llu",
                            (unsigned long long)dst_capacity, (unsigned long long)cfg->batch_size,
                            (unsigned long long)cfg->batch_size * 8ull);
    /* libzsampler's detail names the bad parameter and its value */
    return zsm_indices(cfg, step, (uint64_t *)dst) < 0 ? ZR_EINVAL : 0;
}

/* zrs_codec_auto over `count` records in the buffer `data`: dense
 * (bounds None, record_size bytes each) or ragged (bounds: a uint64
 * buffer of count + 1 byte offsets). Returns (codec, raw bytes, zstd
 * bytes) of the sample. */
PyObject *zr_py_codec_auto(PyObject *data, PyObject *bounds, uint64_t record_size,
                           uint64_t count)
{
    Py_buffer dv = {0}, bv = {0};
    if (zr_py_get_buffer(data, &dv, 0, 0, "zrs_codec_auto", "data") < 0)
        return NULL;
    if (bounds != Py_None && zr_py_get_buffer(bounds, &bv, 0, 1, "zrs_codec_auto", "bounds") < 0) {
        PyBuffer_Release(&dv);
        return NULL;
    }
    uint64_t need = bounds != Py_None ? (count + 1) * 8 : 0;
    zre_codec codec = ZRE_CODEC_RAW;
    uint64_t raw = 0, zst = 0;
    int rc;
    if (bounds != Py_None && (uint64_t)bv.len < need)
        rc = zr_set_error(ZR_EINVAL, "codec_auto: bounds holds %zd bytes, %llu needed", bv.len,
                          (unsigned long long)need);
    else if (bounds == Py_None && (uint64_t)dv.len < count * record_size)
        rc = zr_set_error(ZR_EINVAL, "codec_auto: data holds %zd bytes, %llu records of %llu "
                          "need more", dv.len, (unsigned long long)count,
                          (unsigned long long)record_size);
    else {
        Py_BEGIN_ALLOW_THREADS
        rc = zrs_codec_auto(dv.buf, bounds != Py_None ? (const uint64_t *)bv.buf : NULL,
                            record_size, count, &codec, &raw, &zst);
        Py_END_ALLOW_THREADS
    }
    PyBuffer_Release(&dv);
    if (bounds != Py_None)
        PyBuffer_Release(&bv);
    if (rc < 0) {
        zr_py_raise(rc);
        return NULL;
    }
    return Py_BuildValue("(iKK)", (int)codec, (unsigned long long)raw, (unsigned long long)zst);
}

/* The store's uuid in text form, or None for a store from before uuids. */
PyObject *zr_py_store_uuid(zrs_store *s)
{
    uint8_t u[ZRS_UUID_BYTES];
    char text[ZRS_UUID_STR_LEN + 1];
    int rc = zrs_get_uuid(s, u);
    if (rc < 0) {
        zr_py_raise(rc);
        return NULL;
    }
    if (rc == 0)
        Py_RETURN_NONE;
    (void)zrs_uuid_str(u, text);
    return PyUnicode_FromString(text);
}

/* The loader state's JSON text (zld_state_json) as a str. */
PyObject *zr_py_state_json(zld_loader *l)
{
    char *text = NULL;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = zld_state_json(l, &text);
    Py_END_ALLOW_THREADS
    if (rc < 0) {
        zr_py_raise(rc);
        return NULL;
    }
    PyObject *out = PyUnicode_FromString(text);
    zld_state_free(text);
    return out;
}

/* Close the loader in slot[0] (a list holding the handle) and set slot[0]
 * to None, in one call: a KeyboardInterrupt can only come before or after
 * it, so a retried close never frees twice. No-op once slot[0] is None. */
PyObject *zr_py_loader_close_slot(PyObject *slot)
{
    if (!PyList_Check(slot) || PyList_GET_SIZE(slot) < 1) {
        PyErr_SetString(PyExc_TypeError, "zld_close_slot: slot must be a non-empty list");
        return NULL;
    }
    PyObject *obj = PyList_GET_ITEM(slot, 0);
    if (obj == Py_None)
        Py_RETURN_NONE;
    void *p = NULL;
    if (SWIG_ConvertPtr(obj, &p, SWIGTYPE_p_zld_loader, 0) < 0 || p == NULL) {
        PyErr_SetString(PyExc_TypeError, "zld_close_slot: slot[0] is not a loader handle");
        return NULL;
    }
    Py_INCREF(Py_None);
    if (PyList_SetItem(slot, 0, Py_None) < 0)
        return NULL;
    Py_BEGIN_ALLOW_THREADS
    zld_close((zld_loader *)p);
    Py_END_ALLOW_THREADS
    Py_RETURN_NONE;
}

/* Pad the sequence `records` (ndarrays / buffers, each C-contiguous,
 * shape (n_i, *inner), the type of `proto`, an array of shape (0, *inner))
 * into a new array (count, length, *inner); length < 0 means the longest
 * n_i. pad is a bytes of one element. Returns (array, lengths int64). */
PyObject *zr_py_pad(PyObject *records, PyObject *proto, long long length, PyObject *pad)
{
    if (!PyArray_Check(proto) || PyArray_NDIM((PyArrayObject *)proto) < 1) {
        PyErr_SetString(PyExc_TypeError, "zld_pad: proto must be an ndarray of shape (0, *inner)");
        return NULL;
    }
    PyArrayObject *pa = (PyArrayObject *)proto;
    int nd = PyArray_NDIM(pa);
    npy_intp *inner = PyArray_DIMS(pa) + 1;
    size_t elem = (size_t)PyArray_ITEMSIZE(pa);
    for (int k = 0; k < nd - 1; k++) elem *= (size_t)inner[k];
    char *padp = NULL;
    Py_ssize_t padn = 0;
    if (PyBytes_AsStringAndSize(pad, &padp, &padn) < 0) return NULL;
    if ((size_t)padn != elem) {
        PyErr_Format(PyExc_ValueError, "zld_pad: pad value has %zd bytes, an element %zu", padn, elem);
        return NULL;
    }
    PyObject *seq = PySequence_Fast(records, "pad: records must be a sequence of arrays");
    if (seq == NULL) return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    Py_buffer *views = PyMem_Calloc((size_t)(n > 0 ? n : 1), sizeof *views);
    const void **rows = PyMem_Calloc((size_t)(n > 0 ? n : 1), sizeof *rows);
    PyObject *lens = NULL, *out = NULL;
    npy_intp ln = n;
    lens = PyArray_SimpleNew(1, &ln, NPY_INT64);
    Py_ssize_t got = 0;
    if (views == NULL || rows == NULL || lens == NULL) { PyErr_NoMemory(); goto done; }
    int64_t *lp = (int64_t *)PyArray_DATA((PyArrayObject *)lens);
    int64_t longest = 0;
    for (; got < n; got++) {
        PyObject *r = PySequence_Fast_GET_ITEM(seq, got);
        if (PyObject_GetBuffer(r, &views[got], PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | PyBUF_ND) < 0) {
            PyErr_Clear();
            PyObject *tn = zr_py_type_name(r);
            PyErr_Format(PyExc_TypeError, "pad: record %zd is not a C-contiguous array (%S)",
                         got, tn);
            Py_XDECREF(tn);
            goto done;
        }
        Py_buffer *v = &views[got];
        int ok = v->ndim == nd && v->itemsize == PyArray_ITEMSIZE(pa);
        for (int k = 1; ok && k < nd; k++) ok = v->shape[k] == inner[k - 1];
        if (ok && PyArray_DESCR(pa)->kind != 'V') {
            /* same type: compare with numpy's view of the buffer's format */
            PyArray_Descr *d = NULL;
            PyObject *f = PyUnicode_FromString(v->format ? v->format : "B");
            if (f != NULL && PyArray_DescrConverter(f, &d) == NPY_SUCCEED) {
                ok = PyArray_EquivTypes(d, PyArray_DESCR(pa));
                Py_DECREF(d);
            } else {
                PyErr_Clear();
                ok = 0;
            }
            Py_XDECREF(f);
        }
        if (!ok) {
            got++;
            PyErr_Format(PyExc_ValueError, "pad: record %zd has a different dtype or trailing "
                         "shape than record 0 (all records need shape (n, *inner) and one dtype)",
                         got - 1);
            goto done;
        }
        lp[got] = (int64_t)v->shape[0];
        rows[got] = v->buf;
        if (lp[got] > longest) longest = lp[got];
    }
    {
        int64_t L = length < 0 ? longest : (int64_t)length;
        npy_intp dims[NPY_MAXDIMS];
        dims[0] = n;
        dims[1] = (npy_intp)L;
        for (int k = 0; k < nd - 1; k++) dims[2 + k] = inner[k];
        Py_INCREF((PyObject *)PyArray_DESCR(pa));
        out = PyArray_NewFromDescr(&PyArray_Type, PyArray_DESCR(pa), nd + 1, dims, NULL, NULL, 0, NULL);
        if (out == NULL) goto done;
        int rc;
        Py_BEGIN_ALLOW_THREADS
        rc = zld_pad(rows, (const uint64_t *)lp, (uint64_t)n, elem, (uint64_t)L, padp,
                     PyArray_DATA((PyArrayObject *)out));
        Py_END_ALLOW_THREADS
        if (rc < 0) { zr_py_raise(rc); Py_CLEAR(out); }
    }
done:
    for (Py_ssize_t k = 0; k < got; k++)
        if (views[k].obj != NULL) PyBuffer_Release(&views[k]);
    PyMem_Free(views);
    PyMem_Free(rows);
    Py_DECREF(seq);
    if (out == NULL) { Py_XDECREF(lens); return NULL; }
    return Py_BuildValue("(NN)", out, lens);
}

/* zsm_bucket_indices for Python: lengths a uint32 buffer of cfg length
 * entries, dst a writable buffer of batch_size int64. */
int zr_py_zsm_bucket_indices(const zsm_config *cfg, const void *data, uint64_t nbytes,
                             uint64_t window, uint64_t step, void *dst, uint64_t dst_capacity)
{
    if (nbytes / 4 != cfg->length)
        return zr_set_error(ZR_EINVAL, "bucket: %llu lengths for %llu records",
                            (unsigned long long)(nbytes / 4), (unsigned long long)cfg->length);
    if (cfg->batch_size > dst_capacity / 8)
        return zr_set_error(ZR_EINVAL, "bucket: dst too small");
    /* An invalid window or configuration needs no scratch: the call
     * names what is wrong. */
    size_t need = zsm_bucket_scratch_bytes(cfg, window);
    void *scratch = malloc(need ? need : 1);
    if (scratch == NULL)
        return zr_set_error(ZR_ENOMEM, "bucket: out of memory for %zu bytes of scratch", need);
    int rc = zsm_bucket_indices(cfg, (const uint32_t *)data, window, step, (uint64_t *)dst,
                                scratch, need);
    free(scratch);
    return rc;
}

/* The step at which the loader's workers failed, or None. */
PyObject *zr_py_failed_step(zld_loader *l)
{
    uint64_t step = 0;
    if (!zld_failed(l, &step))
        Py_RETURN_NONE;
    return PyLong_FromUnsignedLongLong(step);
}

/* A copy of the batch's indices as a uint64 ndarray. */
PyObject *zr_py_batch_indices(const zld_batch *b)
{
    /* pack mode: the document of each segment */
    zld_pack_info in;
    uint64_t n = zld_batch_pack_info(b, &in) == ZR_OK ? in.segments : zld_batch_count(b);
    return zr_py_u64_array_copy(zld_batch_indices(b), n);
}

/* Pack mode: stream s's item shape (a tuple of ints, () for token
 * records). */
PyObject *zr_py_pack_item_shape(const zld_loader *l, size_t stream)
{
    uint64_t dims[ZRS_MAX_NDIM];
    size_t nd = 0;
    int rc = zld_pack_item_shape(l, stream, dims, &nd);
    if (rc < 0) {
        zr_py_raise(rc);
        return NULL;
    }
    PyObject *t = PyTuple_New((Py_ssize_t)nd);
    for (size_t k = 0; t != NULL && k < nd; k++)
        PyTuple_SET_ITEM(t, (Py_ssize_t)k, PyLong_FromUnsignedLongLong(dims[k]));
    return t;
}

/* A copy of ragged stream `stream`'s bounds (count + 1 values), or None
 * for a dense stream. */
PyObject *zr_py_batch_bounds(const zld_batch *b, size_t stream)
{
    const uint64_t *bd = zld_batch_bounds(b, stream);
    if (bd == NULL)
        Py_RETURN_NONE;
    return zr_py_u64_array_copy(bd, zld_batch_count(b) + 1);
}

/* Detach stream `stream`'s buffer as a uint8 ndarray that owns it (freed
 * with zld_free when the array and every view of it are gone). None if it
 * was already detached. */
PyObject *zr_py_batch_detach(zld_batch *b, size_t stream)
{
    uint64_t nbytes = 0;
    void *buf = zld_batch_detach(b, stream, &nbytes);
    if (buf == NULL)
        Py_RETURN_NONE;
    return zr_py_owning_array(buf, nbytes);
}

/* How long the Python consumer waits natively before it looks at pending
 * signals (Ctrl-C) and waits again: the bound on its reaction time. */
#define ZR_PY_NEXT_SLICE_NS 50000000ull

/* One step of the loader for Python, in one call: waits for the next
 * batch without the GIL (in slices, running the signal handlers between
 * them, so Ctrl-C interrupts a wait within one slice and takes nothing),
 * then builds (step, indices, streams) where indices is a uint64 ndarray
 * copy and streams a list with, per stream, (data, bounds): data a uint8
 * ndarray owning the stream's buffer (no copy), bounds a uint64 ndarray
 * (ragged) or None (dense). The batch itself is freed here. `nstreams`
 * must be the count given to zld_create.
 *
 * `slot` None: returns the tuple. `slot` a list: stores the tuple in
 * slot[0] before returning True, so the batch is never lost to an
 * exception raised between this call's return and the caller's next
 * statement (a KeyboardInterrupt is delivered exactly there). At the end
 * of a finite pass: False (slot untouched). */
PyObject *zr_py_loader_next(zld_loader *l, size_t nstreams, PyObject *slot)
{
    zld_batch *b = NULL;
    int rc;
    if (slot != Py_None && (!PyList_Check(slot) || PyList_GET_SIZE(slot) < 1)) {
        PyErr_SetString(PyExc_TypeError, "zld_next_arrays: slot must be None or a non-empty list");
        return NULL;
    }
    for (;;) {
        Py_BEGIN_ALLOW_THREADS
        rc = zld_next_wait(l, &b, ZR_PY_NEXT_SLICE_NS);
        Py_END_ALLOW_THREADS
        if (rc != ZLD_TIMEOUT)
            break;
        if (PyErr_CheckSignals() < 0)
            return NULL;
    }
    if (rc < 0) {
        zr_py_raise(rc);
        return NULL;
    }
    if (rc == ZLD_END)
        Py_RETURN_FALSE;
    PyObject *streams = PyList_New((Py_ssize_t)nstreams);
    PyObject *indices = streams ? zr_py_batch_indices(b) : NULL;
    if (indices == NULL)
        goto fail;
    for (size_t k = 0; k < nstreams; k++) {
        PyObject *bounds = zr_py_batch_bounds(b, k);
        if (bounds == NULL)
            goto fail;
        PyObject *data = zr_py_batch_detach(b, k);
        if (data == NULL) {
            Py_DECREF(bounds);
            goto fail;
        }
        PyObject *pair = PyTuple_Pack(2, data, bounds);
        Py_DECREF(data);
        Py_DECREF(bounds);
        if (pair == NULL)
            goto fail;
        PyList_SET_ITEM(streams, (Py_ssize_t)k, pair);
    }
    {
        PyObject *res = Py_BuildValue("(KNNK)", (unsigned long long)zld_batch_step(b), indices,
                                      streams, (unsigned long long)zld_batch_valid(b));
        zld_batch_free(b);
        if (res == NULL || slot == Py_None)
            return res;
        if (PyList_SetItem(slot, 0, res) < 0) /* steals res */
            return NULL;
        Py_RETURN_TRUE;
    }
fail:
    Py_XDECREF(indices);
    Py_XDECREF(streams);
    zld_batch_free(b);
    return NULL;
}
%}

%inline %{
/* zrs_train_dict for Python: samples back to back in `data`, their sizes
 * in `bounds` (one uint64 per sample, summing to len(data)); returns the
 * dictionary as bytes (at most dict_capacity). Trains without the GIL. */
PyObject *zr_py_train_dict(const void *data, uint64_t nbytes, const uint64_t *bounds,
                           uint64_t nbounds, uint64_t dict_capacity)
{
    uint64_t sum = 0;
    for (uint64_t k = 0; k < nbounds; k++)
        sum += bounds[k];
    if (sum != nbytes) {
        zr_py_raise(zr_set_error(ZR_EINVAL, "train_dict: sample sizes sum to %llu bytes, data holds %llu",
                                 (unsigned long long)sum, (unsigned long long)nbytes));
        return NULL;
    }
    if (dict_capacity == 0 || dict_capacity > ZRE_DICT_MAX) {
        zr_py_raise(zr_set_error(ZR_EINVAL, "train_dict: dictionary capacity %llu outside 1..%llu",
                                 (unsigned long long)dict_capacity, (unsigned long long)ZRE_DICT_MAX));
        return NULL;
    }
    void *dict = PyMem_RawMalloc((size_t)dict_capacity);
    if (dict == NULL)
        return PyErr_NoMemory();
    uint64_t got = 0;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = zrs_train_dict(data, bounds, nbounds, dict, dict_capacity, &got);
    Py_END_ALLOW_THREADS
    if (rc < 0) {
        PyMem_RawFree(dict);
        zr_py_raise(rc);
        return NULL;
    }
    PyObject *res = PyBytes_FromStringAndSize((const char *)dict, (Py_ssize_t)got);
    PyMem_RawFree(dict);
    return res;
}
%}

%inline %{
/* The dictionary-training sample (zrs_dict_sample: the one rule every
 * binding and zr use) for Python: a handle to free with
 * zrs_dict_sample_free; records offered as buffers in index order. */
zrs_dict_sample *zr_py_dict_sample_create(int tier)
{
    zrs_dict_sample *s = NULL;
    int rc = zrs_dict_sample_create(&s, (zrs_dict_tier)tier);
    if (rc < 0) {
        zr_py_raise(rc);
        return NULL;
    }
    return s;
}

/* 1 when record `index` is kept, else 0; raises on an error. */
PyObject *zr_py_dict_sample_offer(zrs_dict_sample *s, uint64_t index, const void *record,
                                  uint64_t size)
{
    int rc = zrs_dict_sample_offer(s, index, record, size);
    if (rc < 0) {
        zr_py_raise(rc);
        return NULL;
    }
    return PyLong_FromLong(rc);
}

/* Offer a store's records (zrs_dict_sample_store), without the GIL. */
PyObject *zr_py_dict_sample_store(zrs_dict_sample *s, zrs_store *store)
{
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = zrs_dict_sample_store(s, store);
    Py_END_ALLOW_THREADS
    if (rc < 0) {
        zr_py_raise(rc);
        return NULL;
    }
    Py_RETURN_NONE;
}

/* Train on the sample (zrs_dict_sample_train) without the GIL; the
 * dictionary as bytes, at most the tier's dictionary size. */
PyObject *zr_py_dict_sample_train(zrs_dict_sample *s)
{
    void *dict = PyMem_RawMalloc((size_t)ZRE_DICT_MAX);
    if (dict == NULL)
        return PyErr_NoMemory();
    uint64_t got = 0;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = zrs_dict_sample_train(s, dict, ZRE_DICT_MAX, &got);
    Py_END_ALLOW_THREADS
    if (rc < 0) {
        PyMem_RawFree(dict);
        zr_py_raise(rc);
        return NULL;
    }
    PyObject *res = PyBytes_FromStringAndSize((const char *)dict, (Py_ssize_t)got);
    PyMem_RawFree(dict);
    return res;
}
%}

%{
#if NPY_ABI_VERSION < 0x02000000 /* numpy < 2 headers */
#define PyDataType_ELSIZE(d) ((d)->elsize)
#endif

/* The batch buffer and bounds of zr_py_ragged_arrays/zr_py_ragged_pack:
 * buf a C-contiguous 1-D uint8 ndarray (writable for ragged_pack), bounds a C-contiguous
 * uint64 ndarray of count + 1 non-decreasing byte offsets ending inside
 * buf. Sets *count. */
static int zr_py_ragged_batch_args(PyObject *buf, PyObject *bounds, const char *func,
                                   int writable, npy_intp *count)
{
    if (!PyArray_Check(buf) || PyArray_NDIM((PyArrayObject *)buf) != 1 ||
        PyArray_TYPE((PyArrayObject *)buf) != NPY_UINT8 ||
        !PyArray_IS_C_CONTIGUOUS((PyArrayObject *)buf) ||
        (writable && !PyArray_ISWRITEABLE((PyArrayObject *)buf))) {
        PyErr_Format(PyExc_TypeError, "%s: buf must be a %sC-contiguous 1-D uint8 ndarray", func,
                     writable ? "writable " : "");
        return -1;
    }
    if (!PyArray_Check(bounds) || PyArray_NDIM((PyArrayObject *)bounds) != 1 ||
        PyArray_TYPE((PyArrayObject *)bounds) != NPY_UINT64 ||
        !PyArray_IS_C_CONTIGUOUS((PyArrayObject *)bounds) ||
        PyArray_DIM((PyArrayObject *)bounds, 0) < 1) {
        PyErr_Format(PyExc_TypeError, "%s: bounds must be a C-contiguous 1-D uint64 ndarray "
                     "of count + 1 byte offsets", func);
        return -1;
    }
    const uint64_t *b = (const uint64_t *)PyArray_DATA((PyArrayObject *)bounds);
    npy_intp n = PyArray_DIM((PyArrayObject *)bounds, 0) - 1;
    uint64_t len = (uint64_t)PyArray_DIM((PyArrayObject *)buf, 0);
    for (npy_intp j = 0; j < n; j++)
        if (b[j + 1] < b[j]) {
            PyErr_Format(PyExc_ValueError, "%s: bounds decrease at %zd", func, (Py_ssize_t)j + 1);
            return -1;
        }
    if (b[n] > len) {
        PyErr_Format(PyExc_ValueError, "%s: bounds end at byte %llu but buf holds %llu bytes",
                     func, (unsigned long long)b[n], (unsigned long long)len);
        return -1;
    }
    *count = n;
    return 0;
}

/* Decode record j of a gathered ragged batch; on failure raise
 * CorruptStoreError naming the batch position. */
static int zr_py_ragged_decode_at(const char *data, const uint64_t *b, npy_intp j, zrs_dtype dt,
                                  size_t *nd, uint64_t *dims, uint64_t *off)
{
    int rc = zrs_ragged_decode(data + b[j], b[j + 1] - b[j], dt, nd, dims, off);
    if (rc < 0) {
        char why[256];
        snprintf(why, sizeof why, "%s", zr_last_error());
        zr_py_raise(zr_set_error(ZR_ECORRUPT, "ragged record %zd of the batch: %s",
                                 (Py_ssize_t)j, why));
        return -1;
    }
    return 0;
}
%}

%{
/* Raise status rc with "append: record j: " before the detail. */
static void zr_py_raise_record(int rc, Py_ssize_t j)
{
    char why[512];
    snprintf(why, sizeof why, "%s", zr_last_error());
    zr_set_error(rc, "append: record %zd: %s", j, why);
    zr_py_raise(rc);
}

static PyObject *zr_py_encode_out(uint64_t total, npy_intp n, PyObject **packed, uint64_t **b)
{
    npy_intp nb = n + 1, np_ = (npy_intp)total;
    if (total > (uint64_t)NPY_MAX_INTP) {
        PyErr_SetString(PyExc_OverflowError, "ragged_encode: records larger than the address space");
        return NULL;
    }
    PyObject *bounds = PyArray_SimpleNew(1, &nb, NPY_UINT64);
    *packed = bounds ? PyArray_SimpleNew(1, &np_, NPY_UINT8) : NULL;
    if (*packed == NULL) {
        Py_XDECREF(bounds);
        return NULL;
    }
    *b = (uint64_t *)PyArray_DATA((PyArrayObject *)bounds);
    return bounds;
}

%}

%inline %{
/* The records of a gathered ragged batch as a list of ndarrays, made in
 * one call: record j is buf[bounds[j]:bounds[j+1]] ([u64le ndim][u64le
 * dims][payload], validated against `dtype_id`, CorruptStoreError naming
 * the batch position otherwise) and becomes a writable view of its
 * payload in buf with dtype `dtype` and its own shape (writable when buf
 * is); every view keeps buf alive (its base). */
PyObject *zr_py_ragged_arrays(PyObject *buf, PyObject *bounds, int dtype_id, PyObject *dtype)
{
    npy_intp n = 0;
    PyArray_Descr *descr = NULL;
    if (zr_py_ragged_batch_args(buf, bounds, "ragged_arrays", 0, &n) < 0)
        return NULL;
    if (PyArray_DescrConverter(dtype, &descr) != NPY_SUCCEED)
        return NULL;
    if ((size_t)PyDataType_ELSIZE(descr) != zrs_dtype_itemsize((zrs_dtype)dtype_id)) {
        Py_DECREF(descr);
        PyErr_SetString(PyExc_ValueError, "ragged_arrays: dtype and dtype_id disagree on the itemsize");
        return NULL;
    }
    const uint64_t *b = (const uint64_t *)PyArray_DATA((PyArrayObject *)bounds);
    char *data = (char *)PyArray_DATA((PyArrayObject *)buf);
    int flags = PyArray_ISWRITEABLE((PyArrayObject *)buf) ? NPY_ARRAY_CARRAY : NPY_ARRAY_CARRAY_RO;
    PyObject *out = PyList_New(n);
    if (out == NULL) {
        Py_DECREF(descr);
        return NULL;
    }
    for (npy_intp j = 0; j < n; j++) {
        size_t nd = 0;
        uint64_t dims[ZRS_MAX_NDIM], off = 0;
        npy_intp shape[ZRS_MAX_NDIM > 0 ? ZRS_MAX_NDIM : 1];
        if (zr_py_ragged_decode_at(data, b, j, (zrs_dtype)dtype_id, &nd, dims, &off) < 0)
            goto fail;
        for (size_t k = 0; k < nd; k++)
            shape[k] = (npy_intp)dims[k];
        Py_INCREF((PyObject *)descr); /* stolen by NewFromDescr */
        PyObject *a = PyArray_NewFromDescr(&PyArray_Type, descr, (int)nd, shape, NULL,
                                           data + b[j] + off, flags, NULL);
        if (a == NULL)
            goto fail;
        Py_INCREF(buf);
        if (PyArray_SetBaseObject((PyArrayObject *)a, buf) < 0) { /* steals buf */
            Py_DECREF(a);
            goto fail;
        }
        PyList_SET_ITEM(out, j, a);
    }
    Py_DECREF(descr);
    return out;
fail:
    Py_DECREF(descr);
    Py_DECREF(out);
    return NULL;
}

/* A ragged batch gathered in one call, for batches that need no slicing:
 * the records' sizes, their byte bounds (count + 1 offsets, uint64), a
 * fresh uint8 buffer and the gather, the native parts without the GIL.
 * `index` is a C-contiguous 1-D int64 ndarray (negative counts from the
 * end, as zrs_gather_ragged takes). Returns (buf, bounds), or None when
 * the batch holds more than max_bytes (the caller then gathers it in
 * slices into a pooled buffer, Ctrl-C checked between them). Store errors
 * raise as every call does (IndexError for an index out of range). */
PyObject *zr_py_ragged_gather_once(zrs_store *s, PyObject *index, uint64_t max_bytes)
{
    if (!PyArray_Check(index) || PyArray_NDIM((PyArrayObject *)index) != 1 ||
        PyArray_TYPE((PyArrayObject *)index) != NPY_INT64 ||
        !PyArray_IS_C_CONTIGUOUS((PyArrayObject *)index)) {
        PyErr_SetString(PyExc_TypeError, "ragged_gather_once: index must be a C-contiguous 1-D "
                        "int64 ndarray");
        return NULL;
    }
    const int64_t *idx = (const int64_t *)PyArray_DATA((PyArrayObject *)index);
    npy_intp n = PyArray_DIM((PyArrayObject *)index, 0);
    npy_intp nb = n + 1;
    PyObject *bounds = PyArray_SimpleNew(1, &nb, NPY_UINT64);
    if (bounds == NULL) return NULL;
    uint64_t *b = (uint64_t *)PyArray_DATA((PyArrayObject *)bounds);
    int rc;
    b[0] = 0;
    Py_BEGIN_ALLOW_THREADS
    rc = n > 0 ? zrs_ragged_sizes(s, idx, (uint64_t)n, b + 1) : ZR_OK;
    Py_END_ALLOW_THREADS
    if (rc < 0) {
        Py_DECREF(bounds);
        zr_py_raise(rc);
        return NULL;
    }
    uint64_t total = 0;
    for (npy_intp j = 1; j <= n; j++) {
        if (b[j] > max_bytes - total || total > max_bytes) {
            Py_DECREF(bounds);
            Py_RETURN_NONE;
        }
        total += b[j];
        b[j] = total;
    }
    npy_intp len = (npy_intp)total;
    PyObject *buf = PyArray_SimpleNew(1, &len, NPY_UINT8);
    if (buf == NULL) {
        Py_DECREF(bounds);
        return NULL;
    }
    void *dst = PyArray_DATA((PyArrayObject *)buf);
    Py_BEGIN_ALLOW_THREADS
    rc = n > 0 ? zrs_gather_ragged(s, idx, (uint64_t)n, dst, total, b) : ZR_OK;
    Py_END_ALLOW_THREADS
    if (rc < 0) {
        Py_DECREF(bounds);
        Py_DECREF(buf);
        zr_py_raise(rc);
        return NULL;
    }
    return Py_BuildValue("(NN)", buf, bounds);
}

/* Ragged records for zrs_append_ragged, each through zrs_ragged_encode:
 * (packed, bounds), a uint8 ndarray holding record j at
 * packed[bounds[j]:bounds[j+1]] and a uint64 ndarray of count + 1 bounds.
 * zr_py_ragged_encode takes a sequence of C-contiguous arrays of `dtype`
 * (numpy's dtype string), each one record of its own shape;
 * zr_py_ragged_encode_rows takes `rows` records with `nd` dims each: the
 * elements `values` (a C-contiguous buffer of dtype), dims (rows * nd
 * uint64 values) and eoff (rows + 1 uint64 element offsets: record j's
 * elements are values[eoff[j]:eoff[j+1]]). */
PyObject *zr_py_ragged_encode(PyObject *records, const char *dtype)
{
    zrs_dtype dt;
    int rc = zrs_dtype_parse(dtype, &dt);
    if (rc < 0) {
        zr_py_raise(rc);
        return NULL;
    }
    PyObject *seq = PySequence_Fast(records, "ragged_encode: records must be a sequence");
    if (seq == NULL) return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    Py_buffer *views = (Py_buffer *)PyMem_Calloc((size_t)(n > 0 ? n : 1), sizeof *views);
    uint64_t *sizes = (uint64_t *)PyMem_Calloc((size_t)(n > 0 ? n : 1), sizeof *sizes);
    PyObject *packed = NULL, *bounds = NULL, *res = NULL;
    Py_ssize_t got = 0;
    uint64_t total = 0, *b = NULL;
    if (views == NULL || sizes == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (; got < n; got++) {
        if (PyObject_GetBuffer(PySequence_Fast_GET_ITEM(seq, got), &views[got],
                               PyBUF_C_CONTIGUOUS | PyBUF_ND) < 0)
            goto done;
    }
    for (Py_ssize_t j = 0; j < n; j++) {
        uint64_t dims[ZRS_MAX_NDIM];
        size_t nd = (size_t)views[j].ndim;
        for (size_t d = 0; d < nd && d < ZRS_MAX_NDIM; d++) dims[d] = (uint64_t)views[j].shape[d];
        rc = zrs_ragged_encoded_size(dt, nd, dims, &sizes[j]);
        if (rc == 0 && sizes[j] > UINT64_MAX - total)
            rc = zr_set_error(ZR_EINVAL, "ragged_encode: the records' size overflows 64 bits");
        if (rc < 0) {
            zr_py_raise_record(rc, j);
            goto done;
        }
        total += sizes[j];
    }
    bounds = zr_py_encode_out(total, (npy_intp)n, &packed, &b);
    if (bounds == NULL) goto done;
    unsigned char *out = (unsigned char *)PyArray_DATA((PyArrayObject *)packed);
    b[0] = 0;
    for (Py_ssize_t j = 0; j < n; j++) {
        uint64_t dims[ZRS_MAX_NDIM];
        size_t nd = (size_t)views[j].ndim;
        for (size_t d = 0; d < nd; d++) dims[d] = (uint64_t)views[j].shape[d];
        rc = zrs_ragged_encode(dt, nd, dims, views[j].buf, (uint64_t)views[j].len, out + b[j],
                               sizes[j], NULL);
        if (rc < 0) {
            zr_py_raise_record(rc, j);
            goto done;
        }
        b[j + 1] = b[j] + sizes[j];
    }
    res = Py_BuildValue("(OO)", packed, bounds);
done:
    for (Py_ssize_t j = 0; j < got; j++) PyBuffer_Release(&views[j]);
    PyMem_Free(views);
    PyMem_Free(sizes);
    Py_XDECREF(packed);
    Py_XDECREF(bounds);
    Py_DECREF(seq);
    return res;
}

PyObject *zr_py_ragged_encode_rows(PyObject *values, PyObject *dims, PyObject *eoff, size_t nd,
                                   const char *dtype)
{
    zrs_dtype dt;
    int rc = zrs_dtype_parse(dtype, &dt);
    if (rc < 0) {
        zr_py_raise(rc);
        return NULL;
    }
    Py_buffer v, d, e;
    if (PyObject_GetBuffer(values, &v, PyBUF_C_CONTIGUOUS) < 0) return NULL;
    if (PyObject_GetBuffer(dims, &d, PyBUF_C_CONTIGUOUS) < 0) {
        PyBuffer_Release(&v);
        return NULL;
    }
    if (PyObject_GetBuffer(eoff, &e, PyBUF_C_CONTIGUOUS) < 0) {
        PyBuffer_Release(&v);
        PyBuffer_Release(&d);
        return NULL;
    }
    PyObject *packed = NULL, *bounds = NULL, *res = NULL;
    uint64_t total = 0, *b = NULL;
    size_t isz = zrs_dtype_itemsize(dt);
    npy_intp rows = (npy_intp)(e.len / 8) - 1;
    const uint64_t *dd = (const uint64_t *)d.buf, *ee = (const uint64_t *)e.buf;
    if (rows < 0 || nd > ZRS_MAX_NDIM || (uint64_t)d.len != (uint64_t)rows * nd * 8 ||
        ee[rows] > (uint64_t)v.len / isz) {
        PyErr_SetString(PyExc_ValueError, "ragged_encode_rows: dims, eoff and values disagree");
        goto done;
    }
    for (npy_intp j = 0; j < rows; j++) {
        uint64_t size = 0;
        rc = zrs_ragged_encoded_size(dt, nd, dd + (size_t)j * nd, &size);
        if (rc == 0 && size > UINT64_MAX - total)
            rc = zr_set_error(ZR_EINVAL, "ragged_encode: the records' size overflows 64 bits");
        if (rc < 0) {
            zr_py_raise(rc);
            goto done;
        }
        total += size;
    }
    bounds = zr_py_encode_out(total, rows, &packed, &b);
    if (bounds == NULL) goto done;
    unsigned char *out = (unsigned char *)PyArray_DATA((PyArrayObject *)packed);
    b[0] = 0;
    for (npy_intp j = 0; j < rows; j++) {
        uint64_t w = 0;
        if (ee[j + 1] < ee[j]) {
            PyErr_SetString(PyExc_ValueError, "ragged_encode_rows: eoff must not decrease");
            goto done;
        }
        rc = zrs_ragged_encode(dt, nd, dd + (size_t)j * nd, (const char *)v.buf + ee[j] * isz,
                               (ee[j + 1] - ee[j]) * isz, out + b[j], total - b[j], &w);
        if (rc < 0) {
            zr_py_raise(rc);
            goto done;
        }
        b[j + 1] = b[j] + w;
    }
    res = Py_BuildValue("(OO)", packed, bounds);
done:
    PyBuffer_Release(&v);
    PyBuffer_Release(&d);
    PyBuffer_Release(&e);
    Py_XDECREF(packed);
    Py_XDECREF(bounds);
    return res;
}

/* Pack a gathered ragged batch in place: every record's payload moves
 * down over the prefixes so that the payloads lie back to back from
 * buf[0], in batch order. Returns (elements, offsets, shapes): the total
 * element count, an int64 ndarray of count + 1 element offsets (record j
 * is elements [offsets[j], offsets[j+1]) of the packed payload) and a
 * list of shape tuples. Records are validated as in ragged_arrays. */
PyObject *zr_py_ragged_pack(PyObject *buf, PyObject *bounds, int dtype_id)
{
    npy_intp n = 0;
    if (zr_py_ragged_batch_args(buf, bounds, "ragged_pack", 1, &n) < 0)
        return NULL;
    size_t itemsize = zrs_dtype_itemsize((zrs_dtype)dtype_id);
    if (itemsize == 0) {
        PyErr_Format(PyExc_ValueError, "ragged_pack: unknown dtype id %d", dtype_id);
        return NULL;
    }
    const uint64_t *b = (const uint64_t *)PyArray_DATA((PyArrayObject *)bounds);
    char *data = (char *)PyArray_DATA((PyArrayObject *)buf);
    npy_intp n1 = n + 1;
    PyObject *offsets = PyArray_SimpleNew(1, &n1, NPY_INT64);
    PyObject *shapes = PyList_New(n);
    if (offsets == NULL || shapes == NULL)
        goto fail;
    int64_t *o = (int64_t *)PyArray_DATA((PyArrayObject *)offsets);
    uint64_t w = 0;
    o[0] = 0;
    for (npy_intp j = 0; j < n; j++) {
        size_t nd = 0;
        uint64_t dims[ZRS_MAX_NDIM], off = 0;
        if (zr_py_ragged_decode_at(data, b, j, (zrs_dtype)dtype_id, &nd, dims, &off) < 0)
            goto fail;
        PyObject *t = PyTuple_New((Py_ssize_t)nd);
        if (t == NULL)
            goto fail;
        for (size_t k = 0; k < nd; k++) {
            PyObject *d = PyLong_FromUnsignedLongLong(dims[k]);
            if (d == NULL) {
                Py_DECREF(t);
                goto fail;
            }
            PyTuple_SET_ITEM(t, (Py_ssize_t)k, d);
        }
        PyList_SET_ITEM(shapes, j, t);
        uint64_t len = b[j + 1] - b[j] - off;
        /* w <= b[j] + off always (only prefixes are dropped): moving down is safe. */
        if (len)
            memmove(data + w, data + b[j] + off, (size_t)len);
        w += len;
        o[j + 1] = (int64_t)(w / itemsize);
    }
    return Py_BuildValue("(KNN)", (unsigned long long)(w / itemsize), offsets, shapes);
fail:
    Py_XDECREF(offsets);
    Py_XDECREF(shapes);
    return NULL;
}
%}
