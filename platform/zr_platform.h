/*
 * zr_platform.h - the one place where operating-system calls live.
 *
 * Internal to the project: never installed, never part of a public API.
 * Every library that needs files, locks, threads or the CPU count goes
 * through these functions, so that a port to another OS (Windows, macOS)
 * replaces one implementation file (zr_platform_posix.c) and nothing else.
 *
 * Conventions: functions return 0 on success or a negative errno-style
 * value (-errno on POSIX) on failure; they never print and never abort.
 * Positional I/O functions loop over short reads/writes until the whole
 * range is transferred.
 */
#ifndef ZR_PLATFORM_H
#define ZR_PLATFORM_H

#include <stddef.h>
#include <stdint.h>

/* ---------------------------------------------------------------- files */

/* An open file. A plain descriptor on POSIX; a HANDLE elsewhere. */
typedef struct zrp_file {
    intptr_t fd;
} zrp_file;

#define ZRP_FILE_INVALID ((zrp_file){-1})

enum {
    ZRP_READ = 1u << 0,      /* open for reading */
    ZRP_WRITE = 1u << 1,     /* open for writing */
    ZRP_CREATE = 1u << 2,    /* create if missing */
    ZRP_EXCLUSIVE = 1u << 3  /* with ZRP_CREATE: fail if it exists */
};

int zrp_open(zrp_file *out, const char *path, unsigned flags);
int zrp_close(zrp_file *f);

/* Read exactly `len` bytes at `offset`. A read past end of file returns
 * -ENODATA-like failure (ZRP_ESHORT) rather than a short count. */
#define ZRP_ESHORT (-100000)
int zrp_pread_all(zrp_file f, void *buf, size_t len, uint64_t offset);
int zrp_pwrite_all(zrp_file f, const void *buf, size_t len, uint64_t offset);

int zrp_file_size(zrp_file f, uint64_t *out);
int zrp_truncate(zrp_file f, uint64_t size);
int zrp_fsync(zrp_file f);

/* Readahead hint for a byte range (no-op where unsupported). */
int zrp_advise_willneed(zrp_file f, uint64_t offset, uint64_t len);

/* Read-only shared mapping of `len` bytes of `f` from offset 0, into
 * *out. `len` is a fixed reservation and may exceed the file's size: the
 * mapping never has to move as the file grows, and bytes written with
 * zrp_pwrite_all become visible through it (a unified page cache on Linux
 * and macOS). Touching a page wholly past end of file raises SIGBUS, so
 * callers read only ranges they know the file covers. Fails (negative)
 * when the OS cannot map, or `len` does not fit the address space; the
 * caller then falls back to zrp_pread_all. A Windows port needs its own
 * rules here: a section object cannot extend past the file, so it would
 * remap as the file grows (or keep pread). */
int zrp_map_readonly(zrp_file f, uint64_t len, void **out);
/* Undo zrp_map_readonly (same `len`). NULL is a no-op. */
void zrp_unmap(void *p, uint64_t len);

/* Non-blocking whole-file locks; return -EWOULDBLOCK/-EAGAIN style
 * failure (ZRP_EBUSY) when another holder conflicts. */
#define ZRP_EBUSY (-100001)
int zrp_lock_exclusive(zrp_file f);
int zrp_lock_shared(zrp_file f);

/* ---------------------------------------------------------- directories */

/* 1 if the path exists (any type), 0 if not. */
int zrp_path_exists(const char *path);
/* 1 if the path is a directory. */
int zrp_is_dir(const char *path);
/* Create one directory level; fails if it exists. */
int zrp_mkdir(const char *path);
/* Create a directory and any missing parents (like mkdir -p).
 * Existing directories along the way are fine. */
int zrp_mkdir_parents(const char *path);
int zrp_unlink(const char *path);
/* fsync a directory so that entries created in it are durable. */
int zrp_fsync_dir(const char *path);
/* Write `len` bytes to `path` durably and atomically: a temporary file
 * beside it, fsync, rename over `path`, fsync of the directory. */
int zrp_write_file_atomic(const char *path, const void *buf, size_t len);
/* Read a whole (small) file into a malloc'd buffer; caller frees. */
int zrp_read_file(const char *path, void **out, size_t *len, size_t max_len);

/* -------------------------------------------------------------- threads */

typedef struct zrp_thread { uintptr_t handle; } zrp_thread;
typedef struct zrp_mutex { _Alignas(16) unsigned char opaque[64]; } zrp_mutex;
typedef struct zrp_cond { _Alignas(16) unsigned char opaque[64]; } zrp_cond;

int zrp_thread_start(zrp_thread *t, void (*fn)(void *), void *arg);
int zrp_thread_join(zrp_thread t);

int zrp_mutex_init(zrp_mutex *m);
void zrp_mutex_destroy(zrp_mutex *m);
void zrp_mutex_lock(zrp_mutex *m);
void zrp_mutex_unlock(zrp_mutex *m);

int zrp_cond_init(zrp_cond *c);
void zrp_cond_destroy(zrp_cond *c);
void zrp_cond_wait(zrp_cond *c, zrp_mutex *m);
void zrp_cond_signal(zrp_cond *c);
void zrp_cond_broadcast(zrp_cond *c);

/* Number of CPUs this process may run on (affinity-aware), at least 1. */
unsigned zrp_cpu_count(void);

/* Physical memory of the machine in bytes (pages x page size), or 0 when
 * the OS cannot tell. */
uint64_t zrp_physical_memory(void);

/* Monotonic clock in nanoseconds. */
uint64_t zrp_now_ns(void);

/* ------------------------------------------------------------ processes */

/* Run the program argv[0] (looked up on PATH when it names no directory)
 * with the NULL-terminated argv, inheriting stdin/stdout/stderr, and wait
 * for it. On return 0, *exit_code is its exit status and *crashed is 1 when
 * it died abnormally instead (a signal on POSIX, an unhandled exception on
 * Windows; *exit_code is then the signal number or exception code).
 * Negative when it could not be started (-ENOENT: no such program). */
int zrp_run_wait(const char *const *argv, int *exit_code, int *crashed);

/* The path of the running executable, NUL-terminated in buf[cap]. */
int zrp_self_exe(char *buf, size_t cap);

#endif /* ZR_PLATFORM_H */
