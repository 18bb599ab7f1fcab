/*
 * error.c - status texts and the per-thread error detail.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "engine_internal.h"

/* The only mutable state of the library outside handles: one detail
 * buffer per thread. */
static _Thread_local char zr_error_detail[ZRE_ERRMSG_CAP];

ZRE_API const char *zr_strerror(int status)
{
    switch (status) {
    case ZR_OK: return "success";
    case ZR_EINVAL: return "invalid argument";
    case ZR_ENOMEM: return "out of memory";
    case ZR_EIO: return "input/output error";
    case ZR_EBUSY: return "store is busy";
    case ZR_EEXIST: return "path already exists";
    case ZR_ENOTSTORE: return "not a store";
    case ZR_ERANGE: return "index out of range";
    case ZR_ECORRUPT: return "store is corrupt";
    case ZR_ETOOBIG: return "record too big";
    case ZR_EUNSUPPORTED: return "unsupported operation";
    case ZR_ECLOSED: return "closed";
    case ZR_ESTATE: return "earlier error in pipeline";
    default: return "unknown error";
    }
}

ZRE_API const char *zr_last_error(void)
{
    return zr_error_detail;
}

ZRE_API int zr_set_error(int status, const char *fmt, ...)
{
    char tmp[ZRE_ERRMSG_CAP];
    va_list ap;
    va_start(ap, fmt);
    /* Format into a temporary first: callers may pass zr_last_error() as
     * an argument. */
    vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    memcpy(zr_error_detail, tmp, sizeof tmp);
    return status;
}

void zre_err_capture(zre_err *err, int status)
{
    err->status = status;
    snprintf(err->msg, sizeof err->msg, "%s", zr_error_detail);
}

int zre_err_raise(const zre_err *err)
{
    return zr_set_error(err->status, "%s", err->msg);
}
