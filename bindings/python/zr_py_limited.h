/*
 * zr_py_limited.h - the extension module on CPython's stable ABI.
 *
 * loaderx._zr is compiled with Py_LIMITED_API = 0x030B0000 (CPython 3.11,
 * the first with the buffer protocol in the limited API), so one build runs
 * on every later CPython (wheel tag cp311-abi3). The limited API leaves out
 * the unchecked access macros of lists, tuples and bytes and the type
 * object's fields; this header maps the macros the interface files use to
 * the checked functions of the limited API (same meaning: borrowed
 * references stay borrowed, *SetItem steals as *SET_ITEM does), so the .i
 * files read the same with or without it. Where SWIG's own runtime already
 * defines one, its definition stays.
 *
 * Also: ZR_PY_APPEND_OUTPUT, the one spelling of SWIG's output appender
 * (its signature gained an is_void argument in SWIG 4.3).
 */
#ifndef ZR_PY_LIMITED_H
#define ZR_PY_LIMITED_H

#include <Python.h>

#ifdef Py_LIMITED_API
#ifndef PyTuple_GET_SIZE
#define PyTuple_GET_SIZE(o) PyTuple_Size(o)
#endif
#ifndef PyTuple_GET_ITEM
#define PyTuple_GET_ITEM(o, i) PyTuple_GetItem((o), (i))
#endif
#ifndef PyTuple_SET_ITEM
#define PyTuple_SET_ITEM(o, i, v) ((void)PyTuple_SetItem((o), (i), (v)))
#endif
#ifndef PyList_GET_SIZE
#define PyList_GET_SIZE(o) PyList_Size(o)
#endif
#ifndef PyList_GET_ITEM
#define PyList_GET_ITEM(o, i) PyList_GetItem((o), (i))
#endif
#ifndef PyList_SET_ITEM
#define PyList_SET_ITEM(o, i, v) ((void)PyList_SetItem((o), (i), (v)))
#endif
/* PySequence_Fast returns a list or a tuple. */
#ifndef PySequence_Fast_GET_SIZE
#define PySequence_Fast_GET_SIZE(o) PySequence_Size(o)
#endif
#ifndef PySequence_Fast_GET_ITEM
#define PySequence_Fast_GET_ITEM(o, i) (PyList_Check(o) ? PyList_GetItem((o), (i)) : PyTuple_GetItem((o), (i)))
#endif
#ifndef PyBytes_AS_STRING
#define PyBytes_AS_STRING(o) PyBytes_AsString(o)
#endif
#ifndef PyBytes_GET_SIZE
#define PyBytes_GET_SIZE(o) PyBytes_Size(o)
#endif
#ifndef PyUnicode_AsUTF8
#define PyUnicode_AsUTF8(o) PyUnicode_AsUTF8AndSize((o), NULL)
#endif
/* The raw allocator is not in the limited API; the callers allocate and
 * free with the GIL held, so the object allocator serves. */
#ifndef PyMem_RawMalloc
#define PyMem_RawMalloc(n) PyMem_Malloc(n)
#define PyMem_RawFree(p) PyMem_Free(p)
#endif
#endif /* Py_LIMITED_API */

/* The name of obj's type for a message ("int", "NoneType"): a new str, or
 * NULL if even that failed (PyErr_Format's %S then prints "<NULL>"). Call
 * it with no exception pending. The type's tp_name is not in the limited
 * API. */
static PyObject *zr_py_type_name(PyObject *obj)
{
    PyObject *name = PyObject_GetAttrString((PyObject *)Py_TYPE(obj), "__name__");
    if (name == NULL)
        PyErr_Clear();
    return name;
}

/* SWIG 4.3 added the is_void argument: 1 keeps the rule these typemaps rely
 * on, that the first output replaces the None of a status-only return. */
#if defined(SWIG_VERSION) && SWIG_VERSION >= 0x040300
#define ZR_PY_APPEND_OUTPUT(result, obj) SWIG_Python_AppendOutput((result), (obj), 1)
#else
#define ZR_PY_APPEND_OUTPUT(result, obj) SWIG_Python_AppendOutput((result), (obj))
#endif

#endif /* ZR_PY_LIMITED_H */
