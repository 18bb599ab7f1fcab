/*
 * zrerror_sys.h - for the libraries and bindings of this project only.
 *
 * Setting the error detail is how a loaderx-in-C library reports a
 * failure; a program using the libraries reads the detail (zrerror.h) and
 * never sets it. These calls are exported because every library and
 * binding of the project calls them, but they are not part of the API a
 * user programs against, and may change with any release. (The same idea
 * as libgit2's sys/ headers and zstd's ZSTD_STATIC_LINKING_ONLY.)
 */
#ifndef ZRERROR_SYS_H
#define ZRERROR_SYS_H

#include <stdarg.h>
#include <stddef.h>

#include "zrerror.h"

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__MINGW_PRINTF_FORMAT) /* mingw: the checks of the CRT printf in use */
#define ZR_PRINTF_LIKE(f, a) __attribute__((format(__MINGW_PRINTF_FORMAT, f, a)))
#elif defined(__GNUC__)
#define ZR_PRINTF_LIKE(f, a) __attribute__((format(printf, f, a)))
#else
#define ZR_PRINTF_LIKE(f, a)
#endif

/* The capacity of the detail buffer, terminating NUL included. */
#define ZR_ERROR_DETAIL_CAP 1024

/* A platform status whose message is already the thread's detail (the
 * remote module sets it itself): zr_os_strerror returns the detail. */
#define ZR_OS_EDETAIL (-100100)

/* Set the calling thread's detail message (printf-style) and return
 * `status`. The OS errno of the failure (zr_last_errno) is the one last
 * passed to zr_os_strerror on this thread since the previous
 * zr_set_error, else 0. An argument may be zr_last_error() itself. */
ZRERR_API int zr_set_error(int status, const char *fmt, ...) ZR_PRINTF_LIKE(2, 3);
ZRERR_API int zr_set_errorv(int status, const char *fmt, va_list ap) ZR_PRINTF_LIKE(2, 0);

/* zr_set_error with the OS errno given: re-raises a failure saved
 * earlier (its status, errno and text) under the same errno. */
ZRERR_API int zr_set_error_errno(int status, int os_errno, const char *fmt, ...)
    ZR_PRINTF_LIKE(3, 4);

/* strerror(-neg_errno) for a message argument, remembering the errno for
 * the zr_set_error call it is an argument of. `neg_errno` is a platform
 * status (-errno); a non-OS status gives a fixed text and no errno. */
ZRERR_API const char *zr_os_strerror(int neg_errno);

/* Check a path handed in by a language binding: `len` is the length the
 * language knows (its string may hold bytes past a NUL that C would cut
 * at). ZR_EINVAL, naming `what`, for an embedded NUL or an empty path;
 * ZR_OK otherwise. Every binding calls it for every path argument. */
ZRERR_API int zr_check_path(const char *path, size_t len, const char *what);

#ifdef __cplusplus
}
#endif

#endif /* ZRERROR_SYS_H */
