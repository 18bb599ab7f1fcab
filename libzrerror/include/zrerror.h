/*
 * zrerror.h - libzrerror: the one status table and error detail shared by
 * every loaderx-in-C library (libzsampler, libzrengine, libzrstore,
 * libzloader, libzmrec) and every binding.
 *
 * Errors: a function of any of these libraries returns 0 (ZR_OK) or a
 * negative zr_status. The failing call leaves a detail message for its
 * thread, zr_last_error(), saying what was wrong and where (the parameter
 * and its value, the file, the index), and zr_last_errno() the OS error
 * number behind it (0 if none). The detail is kept per thread: a failure
 * on one thread never changes what another thread reads. It stays until
 * the same thread's next failure.
 *
 * Nothing here allocates, prints or aborts. Strings returned are static
 * or thread-local storage: never free them.
 */
#ifndef ZRERROR_H
#define ZRERROR_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define ZRERROR_VERSION_MAJOR 0
#define ZRERROR_VERSION_MINOR 1
#define ZRERROR_VERSION_PATCH 0
#define ZRERROR_VERSION_NUMBER \
    (ZRERROR_VERSION_MAJOR * 10000 + ZRERROR_VERSION_MINOR * 100 + ZRERROR_VERSION_PATCH)

#if defined(_WIN32) && defined(ZRERROR_BUILDING)
#define ZRERR_API __declspec(dllexport)
#elif defined(_WIN32) && !defined(ZR_STATIC)
#define ZRERR_API __declspec(dllimport)
#elif defined(__GNUC__)
#define ZRERR_API __attribute__((visibility("default")))
#else
#define ZRERR_API
#endif

/* The runtime library's ZRERROR_VERSION_NUMBER, and "MAJOR.MINOR.PATCH"
 * (static storage). */
ZRERR_API unsigned zrerror_version(void);
ZRERR_API const char *zrerror_version_string(void);

/* The one status enum shared by every loaderx-in-C library. The values are
 * part of the ABI: they never change, new ones are added below ZR_EINTR. */
typedef enum zr_status {
    ZR_OK = 0,
    ZR_EINVAL = -1,       /* a bad argument: wrong size, dtype, shape, NULL */
    ZR_ENOMEM = -2,       /* an allocation failed */
    ZR_EIO = -3,          /* the operating system refused a file operation */
    ZR_EBUSY = -4,        /* the store is locked by another handle/process */
    ZR_EEXIST = -5,       /* create: the path already exists */
    ZR_ENOTSTORE = -6,    /* open: the path is not a store, or is malformed */
    ZR_ERANGE = -7,       /* an index is out of range */
    ZR_ECORRUPT = -8,     /* stored bytes are inconsistent or fail to decode */
    ZR_ETOOBIG = -9,      /* a record over the size limit */
    ZR_EUNSUPPORTED = -10,/* an operation this handle or build cannot do */
    ZR_ECLOSED = -11,     /* the object was closed or shut down */
    ZR_ESTATE = -12,      /* an error earlier in a pipeline (see detail) */
    ZR_EINTR = -13        /* stopped early on request; the store is intact */
} zr_status;

/* The number of statuses: ZR_OK down to ZR_STATUS_LAST, every value in
 * between used. Bindings walk 0, -1, ..., ZR_STATUS_LAST to build their
 * tables. */
#define ZR_STATUS_LAST (-13) /* ZR_EINTR */
#define ZR_STATUS_COUNT 14

/* Short fixed text for a status ("store is busy", ...); "unknown error"
 * for a value outside the table. Static storage. */
ZRERR_API const char *zr_strerror(int status);

/* The status's name without the ZR_ prefix: zr_status_name(ZR_EINVAL) is
 * "EINVAL", zr_status_name(ZR_OK) "OK". NULL for a value outside the
 * table. Static storage. */
ZRERR_API const char *zr_status_name(int status);

/* The calling thread's detail message for its most recent failure, e.g.
 * "gather: index 70000 out of range for store of 60000 records".
 * Valid until the same thread's next failing call; never free. Returns ""
 * when nothing failed yet on this thread. */
ZRERR_API const char *zr_last_error(void);

/* The operating-system error number (errno: ENOSPC, EACCES, ENOENT...)
 * behind the calling thread's most recent failure, or 0 when that failure
 * did not come from the OS (a bad argument, a damaged file). Bindings use
 * it to raise their language's OS error kinds. */
ZRERR_API int zr_last_errno(void);

/* Add context to the calling thread's detail: the printf-style text and
 * ": " go in front of it ("opening /data/a: meta.zr: not a store"); with
 * no detail yet the text alone becomes the detail. zr_last_errno() is
 * kept. For a caller that got a failure from a loaderx-in-C call and
 * passes it on. A detail longer than the buffer (1023 bytes) is cut at
 * its end. */
ZRERR_API void zr_error_context(const char *fmt, ...)
#if defined(__MINGW_PRINTF_FORMAT)
    __attribute__((format(__MINGW_PRINTF_FORMAT, 1, 2)))
#elif defined(__GNUC__)
    __attribute__((format(printf, 1, 2)))
#endif
    ;

#ifdef __cplusplus
}
#endif

#endif /* ZRERROR_H */
