/*
 * error.c - carrying a thread's error detail to another thread (the status
 * table and the detail itself are libzrerror's).
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "engine_internal.h"

void zre_err_capture(zre_err *err, int status)
{
    err->status = status;
    err->os_errno = zr_last_errno();
    snprintf(err->msg, sizeof err->msg, "%s", zr_last_error());
}

int zre_err_raise_with(const zre_err *err, const char *fmt, ...)
{
    char suffix[ZRE_ERRMSG_CAP];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(suffix, sizeof suffix, fmt, ap);
    va_end(ap);
    return zr_set_error_errno(err->status, err->os_errno, "%s%s", err->msg, suffix);
}

int zre_err_raise(const zre_err *err)
{
    return zr_set_error_errno(err->status, err->os_errno, "%s", err->msg);
}
