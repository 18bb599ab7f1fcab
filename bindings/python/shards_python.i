/*
 * shards_python.i - Python glue for many stores as one dataset:
 * concatenations (zrs_concat) and weighted mixtures (zld_mixture), used by
 * loaderx/shards.py. Included by zr_python.i after zr_core.i, so the
 * typemaps of that file (index buffers, destinations, status codes) apply.
 * Every check lives in C; this file only converts types.
 */

%thread zsh_py_concat_gather_dense;
%thread zsh_py_push;
%thread zsh_py_concat_ragged_sizes;
%thread zsh_py_concat_gather_ragged;

%{
#include "zr_bind_shards.h" /* zr_bind_loader_create */

/* A sequence of SWIG pointers of `type` into a PyMem array; NULL with an
 * exception set on failure. */
static void **zsh_py_pointers(PyObject *seq_in, swig_type_info *type, const char *what,
                              Py_ssize_t *n_out)
{
    PyObject *seq = PySequence_Fast(seq_in, "expected a sequence of handles");
    if (seq == NULL)
        return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    void **arr = PyMem_Malloc((size_t)(n > 0 ? n : 1) * sizeof *arr);
    if (arr == NULL) {
        Py_DECREF(seq);
        PyErr_NoMemory();
        return NULL;
    }
    for (Py_ssize_t k = 0; k < n; k++) {
        void *p = NULL;
        if (!SWIG_IsOK(SWIG_ConvertPtr(PySequence_Fast_GET_ITEM(seq, k), &p, type, 0)) || p == NULL) {
            PyErr_Format(PyExc_TypeError, "%s[%zd] is not an open handle", what, k);
            PyMem_Free(arr);
            Py_DECREF(seq);
            return NULL;
        }
        arr[k] = p;
    }
    Py_DECREF(seq);
    *n_out = n;
    return arr;
}
%}

%inline %{
/* Stores at URLs: zrs_push (one store) and zrs_push_shards (a shard set,
 * manifest last); zrs_shard_urls (a shard set's manifest, None without
 * one). */
int zsh_py_push(const char *path, const char *url)
{
    return zrs_push(path, url, NULL, NULL);
}

PyObject *zsh_py_push_shards(PyObject *paths, const char *url)
{
    PyObject *seq = PySequence_Fast(paths, "expected a sequence of paths");
    if (seq == NULL)
        return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    const char **arr = PyMem_Malloc((size_t)(n > 0 ? n : 1) * sizeof *arr);
    if (arr == NULL) {
        Py_DECREF(seq);
        return PyErr_NoMemory();
    }
    for (Py_ssize_t k = 0; k < n; k++) {
        arr[k] = PyUnicode_AsUTF8(PySequence_Fast_GET_ITEM(seq, k));
        if (arr[k] == NULL) {
            PyMem_Free(arr);
            Py_DECREF(seq);
            return NULL;
        }
    }
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = zrs_push_shards(arr, (size_t)n, url, NULL, NULL);
    Py_END_ALLOW_THREADS
    PyMem_Free(arr);
    Py_DECREF(seq);
    if (rc < 0) {
        zr_py_raise(rc);
        return NULL;
    }
    Py_RETURN_NONE;
}

PyObject *zsh_py_shard_urls(const char *url)
{
    char **list = NULL;
    size_t n = 0;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = zrs_shard_urls(url, &list, &n);
    Py_END_ALLOW_THREADS
    if (rc == 0 && n == 0)
        Py_RETURN_NONE;
    if (rc < 0) {
        zr_py_raise(rc);
        return NULL;
    }
    PyObject *out = PyList_New((Py_ssize_t)n);
    for (size_t k = 0; out != NULL && k < n; k++)
        PyList_SET_ITEM(out, (Py_ssize_t)k, PyUnicode_FromString(list[k]));
    zrs_free_list(list, n);
    return out;
}
%}

%inline %{
/* zrs_concat_create over open store handles (borrowed: the Python layer
 * keeps the stores open for the concatenation's lifetime). */
PyObject *zsh_py_concat_create(PyObject *stores)
{
    Py_ssize_t n = 0;
    zrs_store **arr = (zrs_store **)zsh_py_pointers(stores, SWIGTYPE_p_zrs_store, "shards", &n);
    if (arr == NULL)
        return NULL;
    zrs_concat *c = NULL;
    int rc = zrs_concat_create(&c, arr, (size_t)n);
    PyMem_Free(arr);
    if (rc < 0) {
        zr_py_raise(rc);
        return NULL;
    }
    return SWIG_NewPointerObj(SWIG_as_voidptr(c), SWIGTYPE_p_zrs_concat, 0);
}

PyObject *zsh_py_concat_item_shape(zrs_concat *c)
{
    const uint64_t *shape = zrs_concat_item_shape(c);
    if (shape == NULL)
        Py_RETURN_NONE;
    size_t nd = zrs_concat_item_ndim(c);
    PyObject *t = PyTuple_New((Py_ssize_t)nd);
    for (size_t k = 0; t != NULL && k < nd; k++)
        PyTuple_SET_ITEM(t, (Py_ssize_t)k, PyLong_FromUnsignedLongLong(shape[k]));
    return t;
}

int zsh_py_concat_gather_dense(zrs_concat *c, const int64_t *index, uint64_t count,
                               void *dst, uint64_t dst_capacity)
{
    return zrs_concat_gather_dense(c, index, count, dst, dst_capacity);
}

int zsh_py_concat_ragged_sizes(zrs_concat *c, const int64_t *index, uint64_t count,
                               uint64_t *sizes)
{
    return zrs_concat_ragged_sizes(c, index, count, sizes);
}

int zsh_py_concat_gather_ragged(zrs_concat *c, const int64_t *index, uint64_t count,
                                void *dst, uint64_t dst_capacity,
                                const uint64_t *bounds, uint64_t nbounds)
{
    if (nbounds != count + 1)
        return zr_set_error(ZR_EINVAL, "concat gather_ragged: bounds needs %llu entries (count + 1), "
                            "got %llu", (unsigned long long)(count + 1), (unsigned long long)nbounds);
    return zrs_concat_gather_ragged(c, index, count, dst, dst_capacity, bounds);
}

/* (shard uint32 ndarray, local uint64 ndarray) of global indices. */
PyObject *zsh_py_concat_locate(zrs_concat *c, const int64_t *index, uint64_t count)
{
    npy_intp n = (npy_intp)count;
    PyObject *sh = PyArray_SimpleNew(1, &n, NPY_UINT32);
    PyObject *lo = PyArray_SimpleNew(1, &n, NPY_UINT64);
    if (sh == NULL || lo == NULL) {
        Py_XDECREF(sh);
        Py_XDECREF(lo);
        return NULL;
    }
    int rc = zrs_concat_locate(c, index, count, (uint32_t *)PyArray_DATA((PyArrayObject *)sh),
                               (uint64_t *)PyArray_DATA((PyArrayObject *)lo));
    if (rc < 0) {
        Py_DECREF(sh);
        Py_DECREF(lo);
        zr_py_raise(rc);
        return NULL;
    }
    return Py_BuildValue("(NN)", sh, lo);
}

/* zld_mixture_create: `concats` source-major (nsources * nstreams
 * handles), weights a sequence of floats, modes a sequence of ints. */
PyObject *zsh_py_mixture_create(PyObject *concats, size_t nsources, size_t nstreams,
                                PyObject *weights, PyObject *modes, uint64_t seed,
                                uint64_t batch_size, uint32_t world_size)
{
    Py_ssize_t n = 0;
    zrs_concat **arr = (zrs_concat **)zsh_py_pointers(concats, SWIGTYPE_p_zrs_concat, "sources", &n);
    if (arr == NULL)
        return NULL;
    double *w = PyMem_Malloc((nsources ? nsources : 1) * sizeof *w);
    zsm_mode *md = PyMem_Malloc((nsources ? nsources : 1) * sizeof *md);
    PyObject *res = NULL;
    if (w == NULL || md == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    if ((size_t)n != nsources * nstreams || PySequence_Size(weights) != (Py_ssize_t)nsources ||
        PySequence_Size(modes) != (Py_ssize_t)nsources) {
        PyErr_Format(PyExc_ValueError, "mixture: expected %zu x %zu stream handles and %zu weights "
                     "and modes", nsources, nstreams, nsources);
        goto done;
    }
    for (size_t k = 0; k < nsources; k++) {
        PyObject *wk = PySequence_GetItem(weights, (Py_ssize_t)k);
        PyObject *mk = PySequence_GetItem(modes, (Py_ssize_t)k);
        w[k] = wk ? PyFloat_AsDouble(wk) : -1.0;
        long m = mk ? PyLong_AsLong(mk) : -1;
        Py_XDECREF(wk);
        Py_XDECREF(mk);
        if (PyErr_Occurred())
            goto done;
        md[k] = (zsm_mode)m;
    }
    {
        zld_mixture *mix = NULL;
        int rc = zld_mixture_create(&mix, arr, nsources, nstreams, w, md, seed, batch_size,
                                    world_size);
        if (rc < 0) {
            zr_py_raise(rc);
            goto done;
        }
        res = SWIG_NewPointerObj(SWIG_as_voidptr(mix), SWIGTYPE_p_zld_mixture, 0);
    }
done:
    PyMem_Free(arr);
    PyMem_Free(w);
    PyMem_Free(md);
    return res;
}

/* (source uint32 ndarray, index uint64 ndarray) of a mixture loader's
 * virtual batch indices. */
PyObject *zsh_py_mixture_locate(zld_mixture *m, const int64_t *index, uint64_t count)
{
    npy_intp n = (npy_intp)count;
    PyObject *src = PyArray_SimpleNew(1, &n, NPY_UINT32);
    PyObject *loc = PyArray_SimpleNew(1, &n, NPY_UINT64);
    if (src == NULL || loc == NULL) {
        Py_XDECREF(src);
        Py_XDECREF(loc);
        return NULL;
    }
    int rc = zld_mixture_locate(m, (const uint64_t *)index, count,
                                (uint32_t *)PyArray_DATA((PyArrayObject *)src),
                                (uint64_t *)PyArray_DATA((PyArrayObject *)loc));
    if (rc < 0) {
        Py_DECREF(src);
        Py_DECREF(loc);
        zr_py_raise(rc);
        return NULL;
    }
    return Py_BuildValue("(NN)", src, loc);
}

/* A loader over a mix of store handles, concatenation handles and
 * (mixture handle, stream) pairs: the shared zr_bind_loader_create (which
 * checks that concatenations read side by side are sharded alike). */
PyObject *zsh_py_loader_create(PyObject *entries, PyObject *options)
{
    zr_bind_options opts;
    if (zr_py_loader_options(options, &opts) < 0)
        return NULL;
    PyObject *seq = PySequence_Fast(entries, "streams must be a sequence");
    if (seq == NULL)
        return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    zr_bind_set *set = zr_bind_set_new();
    PyObject *res = NULL;
    int rc = set ? 0 : zr_set_error(ZR_ENOMEM, "loader: out of memory for the stream list");
    for (Py_ssize_t k = 0; k < n && rc == 0; k++) {
        PyObject *it = PySequence_Fast_GET_ITEM(seq, k);
        void *p = NULL;
        if (PyTuple_Check(it) && PyTuple_GET_SIZE(it) == 2 &&
            SWIG_IsOK(SWIG_ConvertPtr(PyTuple_GET_ITEM(it, 0), &p, SWIGTYPE_p_zld_mixture, 0)) &&
            p != NULL) {
            size_t which = PyLong_AsSize_t(PyTuple_GET_ITEM(it, 1));
            if (PyErr_Occurred())
                goto done;
            rc = zr_bind_set_add_mixture(set, (zld_mixture *)p, which);
        } else if (SWIG_IsOK(SWIG_ConvertPtr(it, &p, SWIGTYPE_p_zrs_concat, 0)) && p != NULL) {
            rc = zr_bind_set_add_concat(set, (zrs_concat *)p);
        } else if (SWIG_IsOK(SWIG_ConvertPtr(it, &p, SWIGTYPE_p_zrs_store, 0)) && p != NULL) {
            rc = zr_bind_set_add_store(set, (zrs_store *)p);
        } else {
            PyErr_Format(PyExc_TypeError, "streams[%zd] is not a store, a concatenation or a "
                         "mixture stream", k);
            goto done;
        }
    }
    if (rc == 0) {
        zld_loader *l = NULL;
        Py_BEGIN_ALLOW_THREADS
        rc = zr_bind_loader_create(&l, set, &opts.o);
        Py_END_ALLOW_THREADS
        if (rc == 0)
            res = SWIG_NewPointerObj(SWIG_as_voidptr(l), SWIGTYPE_p_zld_loader, 0);
    }
    if (rc < 0)
        zr_py_raise(rc);
done:
    zr_bind_set_free(set);
    Py_DECREF(seq);
    return res;
}
%}
