/*
 * error.c - the status table, the per-thread error detail and errno.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "zr_platform.h"
#include "zrerror_sys.h"

#define ZRERR_STR2(x) #x
#define ZRERR_STR(x) ZRERR_STR2(x)

/* The only mutable state of the library: one detail buffer per thread. */
static _Thread_local char zr_error_detail[ZR_ERROR_DETAIL_CAP];
/* The OS errno of the last failure, and the one noted by zr_os_strerror
 * for the zr_set_error call being formed. */
static _Thread_local int zr_error_errno;
static _Thread_local int zr_error_pending_errno;

/* Indexed by -status. */
static const struct {
    const char *name, *text;
} status_table[ZR_STATUS_COUNT] = {
    {"OK", "success"},
    {"EINVAL", "invalid argument"},
    {"ENOMEM", "out of memory"},
    {"EIO", "input/output error"},
    {"EBUSY", "store is busy"},
    {"EEXIST", "path already exists"},
    {"ENOTSTORE", "not a store"},
    {"ERANGE", "index out of range"},
    {"ECORRUPT", "store is corrupt"},
    {"ETOOBIG", "record too big"},
    {"EUNSUPPORTED", "unsupported operation"},
    {"ECLOSED", "closed"},
    {"ESTATE", "earlier error in pipeline"},
    {"EINTR", "interrupted"},
};

ZRERR_API unsigned zrerror_version(void) { return ZRERROR_VERSION_NUMBER; }

ZRERR_API const char *zrerror_version_string(void)
{
    return ZRERR_STR(ZRERROR_VERSION_MAJOR) "." ZRERR_STR(ZRERROR_VERSION_MINOR) "." ZRERR_STR(
        ZRERROR_VERSION_PATCH);
}

ZRERR_API const char *zr_strerror(int status)
{
    if (status > 0 || status < ZR_STATUS_LAST)
        return "unknown error";
    return status_table[-status].text;
}

ZRERR_API const char *zr_status_name(int status)
{
    if (status > 0 || status < ZR_STATUS_LAST)
        return NULL;
    return status_table[-status].name;
}

ZRERR_API const char *zr_last_error(void) { return zr_error_detail; }

ZRERR_API int zr_last_errno(void) { return zr_error_errno; }

ZRERR_API int zr_set_errorv(int status, const char *fmt, va_list ap)
{
    /* Format into a temporary first: callers may pass zr_last_error() as
     * an argument. */
    char tmp[ZR_ERROR_DETAIL_CAP];
    vsnprintf(tmp, sizeof tmp, fmt, ap);
    memcpy(zr_error_detail, tmp, sizeof tmp);
    zr_error_errno = zr_error_pending_errno;
    zr_error_pending_errno = 0;
    return status;
}

ZRERR_API int zr_set_error(int status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    zr_set_errorv(status, fmt, ap);
    va_end(ap);
    return status;
}

ZRERR_API int zr_set_error_errno(int status, int os_errno, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    zr_error_pending_errno = os_errno;
    zr_set_errorv(status, fmt, ap);
    va_end(ap);
    return status;
}

ZRERR_API void zr_error_context(const char *fmt, ...)
{
    char tmp[ZR_ERROR_DETAIL_CAP];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    size_t len = strlen(tmp);
    if (zr_error_detail[0] != '\0' && len + 2 < sizeof tmp) {
        /* the old detail after "context: ", cut at the buffer's end */
        size_t old = strlen(zr_error_detail), room = sizeof tmp - len - 3;
        memcpy(tmp + len, ": ", 2);
        memcpy(tmp + len + 2, zr_error_detail, old < room ? old : room);
        tmp[len + 2 + (old < room ? old : room)] = '\0';
    }
    memcpy(zr_error_detail, tmp, sizeof tmp);
}

ZRERR_API const char *zr_os_strerror(int neg_errno)
{
    if (neg_errno == ZRP_ESHORT)
        return "unexpected end of file";
    if (neg_errno == ZRP_ENOTREG)
        return "not a regular file (a FIFO, device, directory or socket)";
    if (neg_errno == ZRP_EBUSY)
        return "locked by another handle";
    if (neg_errno == ZR_OS_EDETAIL)
        return zr_last_error(); /* the remote module's own message */
    if (neg_errno >= 0 || neg_errno < -4095)
        return "unknown error";
    zr_error_pending_errno = -neg_errno;
    return strerror(-neg_errno);
}

ZRERR_API int zr_check_path(const char *path, size_t len, const char *what)
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
