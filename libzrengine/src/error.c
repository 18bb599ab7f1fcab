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
/* The OS errno of the last failure, and the one noted by zr_os_strerror
 * for the zr_set_error call being formed. */
static _Thread_local int zr_error_errno;
static _Thread_local int zr_error_pending_errno;

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
    case ZR_EINTR: return "interrupted";
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
    zr_error_errno = zr_error_pending_errno;
    zr_error_pending_errno = 0;
    return status;
}

ZRE_API int zr_last_errno(void) { return zr_error_errno; }

ZRE_API const char *zr_os_strerror(int neg_errno)
{
    if (neg_errno == ZRP_ESHORT)
        return "unexpected end of file";
    if (neg_errno == ZRP_ENOTREG)
        return "not a regular file (a FIFO, device, directory or socket)";
    if (neg_errno == ZRP_EBUSY)
        return "locked by another handle";
    if (neg_errno == ZRE_EREMOTE)
        return zr_last_error(); /* the remote module's own message */
    if (neg_errno >= 0 || neg_errno < -4095)
        return "unknown error";
    zr_error_pending_errno = -neg_errno;
    return strerror(-neg_errno);
}

ZRE_API int zr_check_path(const char *path, size_t len, const char *what)
{
    what = what ? what : "path";
    if (!path || len == 0)
        return zr_set_error(ZR_EINVAL, "%s: empty path", what);
    const char *nul = memchr(path, '\0', len);
    if (nul)
        return zr_set_error(ZR_EINVAL, "%s: path \"%s\" holds an embedded NUL byte at position %zu "
                            "(of %zu); refused rather than cut short", what, path,
                            (size_t)(nul - path), len);
    return ZR_OK;
}

void zre_err_capture(zre_err *err, int status)
{
    err->status = status;
    err->os_errno = zr_error_errno;
    snprintf(err->msg, sizeof err->msg, "%s", zr_error_detail);
}

int zre_err_raise_with(const zre_err *err, const char *fmt, ...)
{
    char suffix[ZRE_ERRMSG_CAP];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(suffix, sizeof suffix, fmt, ap);
    va_end(ap);
    zr_error_pending_errno = err->os_errno;
    return zr_set_error(err->status, "%s%s", err->msg, suffix);
}

int zre_err_raise(const zre_err *err)
{
    zr_error_pending_errno = err->os_errno;
    return zr_set_error(err->status, "%s", err->msg);
}
