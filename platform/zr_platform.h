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

/* Open a store file. The last path component is never followed if it is
 * a symbolic link (fails with -ELOOP), and only a regular file is accepted
 * (anything else, a FIFO, device or directory, fails with ZRP_ENOTREG):
 * the open itself never blocks (O_NONBLOCK, then checked with fstat), so
 * a FIFO planted in a store cannot hang it. A Windows port opens with
 * FILE_FLAG_OPEN_REPARSE_POINT and checks GetFileType == FILE_TYPE_DISK. */
#define ZRP_ENOTREG (-100002)
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
/* Start writing a byte range's dirty pages to the device without waiting
 * for it (Linux; a no-op elsewhere). A hint that lets a later zrp_fsync
 * find less to write; it makes nothing durable. 0 or a negative errno. */
int zrp_start_writeback(zrp_file f, uint64_t offset, uint64_t len);

/* Readahead hint for a byte range (no-op where unsupported). */
int zrp_advise_willneed(zrp_file f, uint64_t offset, uint64_t len);

/* Page-cache residency of bytes [offset, offset + len) of `f`: how many of
 * the pages that range touches are in memory now (*resident) out of how
 * many (*pages). Reads nothing and never faults a page in (mincore over a
 * temporary mapping of the range). -ENOTSUP where the OS cannot tell
 * (Windows); other negative values when the range cannot be mapped. */
int zrp_resident(zrp_file f, uint64_t offset, uint64_t len, uint64_t *resident, uint64_t *pages);
/* The same count over `len` bytes at `addr` of a file mapping the caller
 * already holds (zrp_map_readonly): no mapping is made or removed, so no
 * other thread of the process pays a TLB flush. -ENOTSUP where the OS
 * cannot tell (Windows). */
int zrp_resident_mapped(const void *addr, uint64_t len, uint64_t *resident, uint64_t *pages);

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

/* Ask for transparent huge pages behind the whole pages inside heap
 * memory [p, p + len) that has not been touched yet: fewer TLB misses for
 * whoever later reads it in a large or strided pattern (numpy does the same
 * for arrays from 4 MiB). A hint only: 0 when given, -ENOTSUP where the OS
 * has no such hint (macOS, Windows, a kernel without THP), else a negative
 * errno; the memory is usable whatever it returns. */
int zrp_advise_hugepages(void *p, size_t len);

/* Non-blocking, advisory whole-file locks; ZRP_EBUSY when another holder
 * conflicts. Nothing ever waits for a lock.
 *
 * A lock belongs to the open file handle (the open file description on
 * POSIX, the HANDLE on Windows), never to the process: two handles of one
 * process on the same file conflict exactly like two processes, and
 * closing some other descriptor of the file never drops it (no fcntl
 * process-association trap). It is released by zrp_unlock or by closing
 * the handle. A handle holds at most one lock: to change its mode, unlock
 * first (the change is not atomic; a caller that loses the race re-takes
 * what it had). Advisory: a lock never restricts reading or writing the
 * file's bytes.
 * POSIX: flock(LOCK_NB). Windows: LockFileEx(LOCKFILE_FAIL_IMMEDIATELY)
 * of one fixed byte range far beyond any data (e.g. offset 2^62, length
 * 1), so the mandatory Windows range lock never overlaps bytes that are
 * read or written. */
#define ZRP_EBUSY (-100001)
int zrp_lock_exclusive(zrp_file f);
int zrp_lock_shared(zrp_file f);
/* Release this handle's lock (a no-op when it holds none). */
int zrp_unlock(zrp_file f);

/* Let other threads run (sched_yield; SwitchToThread on Windows). Used to
 * retry a read that met another process's write in progress. */
void zrp_yield(void);

/* Put stdin and stdout in binary mode: bytes pass unchanged (Windows' C
 * runtime otherwise turns LF into CRLF on output, so `zr cat --raw` would
 * corrupt every record holding a 0x0A byte). A no-op on POSIX. */
void zrp_stdio_binary(void);

/* ---------------------------------------------------------- directories */

/* 1 if the path exists (any type), 0 if not. */
int zrp_path_exists(const char *path);
/* 1 if the path is a directory. */
int zrp_is_dir(const char *path);
/* Create one directory level; fails if it exists. */
int zrp_mkdir(const char *path);
/* Remove an empty directory (the undo of zrp_mkdir). */
int zrp_rmdir(const char *path);
/* Create a directory and any missing parents (like mkdir -p), one
 * zrp_mkdir a missing level. Existing directories along the way are fine;
 * a component that exists but is not a directory gives -ENOTDIR. */
int zrp_mkdir_parents(const char *path);
/* 1 if c separates the components of a path: '/', and on Windows '\' too. */
int zrp_is_path_sep(char c);
int zrp_unlink(const char *path);
/* fsync a directory so that entries created in it are durable. */
int zrp_fsync_dir(const char *path);
/* Write `len` bytes to `path` durably and atomically: a temporary file
 * beside it ("<path>.tmp.<pid>", created exclusively and never through a
 * symbolic link: a stale one is unlinked first), fsync, rename over
 * `path`, fsync of the directory. */
int zrp_write_file_atomic(const char *path, const void *buf, size_t len);
/* Create `path` for writing exclusively (never through a symbolic link);
 * whatever already stands there (a temporary file left by a crash, or a
 * planted link) is unlinked first and the creation tried once more.
 * zrp_write_file_atomic's temporary file on every OS. */
int zrp_create_fresh(zrp_file *out, const char *path);
/* Read a whole (small) file into a malloc'd buffer; caller frees. Opens
 * as zrp_open does (no-follow, regular files only). */
int zrp_read_file(const char *path, void **out, size_t *len, size_t max_len);

/* Rename `from` over `to` (atomic replacement within one file system; no
 * fsync: a caller that needs durability checks what it reads back). */
int zrp_rename(const char *from, const char *to);
/* Set the modification time of `path` to now (-ENOENT when it is gone).
 * The remote cache's least-recent-use clock. */
int zrp_touch(const char *path);
/* Size in bytes and modification time (ns since the epoch) of the regular
 * file `path`, following links; ZRP_ENOTREG for anything but a regular
 * file, -ENOENT when missing. Either output may be NULL. */
int zrp_stat(const char *path, uint64_t *size, uint64_t *mtime_ns);

/* The calling process's id, and whether process `pid` still runs (1), is
 * gone (0), or the OS cannot tell (-1): the remote cache removes the
 * temporary files of processes that died mid-download. */
long zrp_pid(void);
int zrp_pid_alive(long pid);

/* ----------------------------------------------- test-only failpoints */

/* Compiled in only when the platform layer is built with ZRP_FAILPOINTS
 * (the test-only variants of the libraries; never in an installed build).
 * Each kind of call is counted; zrp_fp_arm makes call number `nth` (1 =
 * the next one) of `kind` fail with `err` (a negative errno, or
 * ZRP_FP_SHORT: a write transfers half its bytes and then fails with
 * -ENOSPC, a read stops short), once or, with `sticky`, for every call
 * from then on. A sticky ZRP_FP_SHORT write tears only that one write:
 * every later write fails with -ENOSPC without writing a byte (a full
 * device), so it models a single torn write that nothing can put back.
 * An observer, when set, is told of every call that changes
 * files (after it succeeded), so a test can record a workload's writes and
 * barriers and build the states a power loss could leave. Without
 * ZRP_FAILPOINTS these functions exist and do nothing (zrp_fp_enabled()
 * returns 0). Not thread-safe against concurrent arming; the counters are
 * atomic. A Windows port implements the same hooks around its calls. */
typedef enum zrp_fp_kind {
    ZRP_FP_OPEN, ZRP_FP_PREAD, ZRP_FP_PWRITE, ZRP_FP_FSYNC, ZRP_FP_FTRUNCATE,
    ZRP_FP_RENAME, ZRP_FP_UNLINK, ZRP_FP_MMAP, ZRP_FP_MKDIR, ZRP_FP_KINDS
} zrp_fp_kind;
#define ZRP_FP_SHORT (-100003)

typedef enum zrp_fp_event_kind {
    ZRP_EV_CREATE,   /* path: a new empty file */
    ZRP_EV_WRITE,    /* path, offset, data, len */
    ZRP_EV_TRUNCATE, /* path, offset = new size */
    ZRP_EV_FSYNC,    /* path: its data and size are durable */
    ZRP_EV_FSYNC_DIR,/* path (a directory): its entries are durable */
    ZRP_EV_RENAME,   /* path -> path2 */
    ZRP_EV_UNLINK,   /* path */
    ZRP_EV_MKDIR,    /* path */
    ZRP_EV_RMDIR     /* path */
} zrp_fp_event_kind;

typedef struct zrp_fp_event {
    zrp_fp_event_kind kind;
    const char *path;
    const char *path2;
    uint64_t offset;
    const void *data;
    size_t len;
} zrp_fp_event;

int zrp_fp_enabled(void);
void zrp_fp_arm(zrp_fp_kind kind, uint64_t nth, int err, int sticky);
/* Disarm every failpoint and zero the counters. */
void zrp_fp_reset(void);
/* Calls of `kind` since the last reset. */
uint64_t zrp_fp_count(zrp_fp_kind kind);
/* Calls that failed by injection since the last reset. */
uint64_t zrp_fp_injected(void);
void zrp_fp_observe(void (*fn)(const zrp_fp_event *ev, void *arg), void *arg);
const char *zrp_fp_kind_name(zrp_fp_kind kind);

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
/* Wait at most timeout_ns (may wake early, as any condition wait):
 * 0 when woken, 1 when the time ran out. */
int zrp_cond_timedwait(zrp_cond *c, zrp_mutex *m, uint64_t timeout_ns);
void zrp_cond_signal(zrp_cond *c);
void zrp_cond_broadcast(zrp_cond *c);

/* Number of CPUs this process may run on (affinity-aware), at least 1. */
unsigned zrp_cpu_count(void);

/* Physical memory of the machine in bytes (pages x page size), or 0 when
 * the OS cannot tell. */
uint64_t zrp_physical_memory(void);

/* Monotonic clock in nanoseconds. */
uint64_t zrp_now_ns(void);

/* ------------------------------------------------------------ terminals */

/* 1 if standard stream fd (0 stdin, 1 stdout, 2 stderr) is a terminal. */
int zrp_is_terminal(int fd);
/* Sleep the calling thread for about ms milliseconds. */
void zrp_sleep_ms(unsigned ms);

/* ------------------------------------------------------- directory lists */

/* The names of the entries of directory `path` (without "." and ".."),
 * unsorted, as a malloc'd array of malloc'd strings in *names, their
 * number in *count. Free with zrp_free_names. */
int zrp_list_dir(const char *path, char ***names, size_t *count);
void zrp_free_names(char **names, size_t count);
/* 1 if path is a regular file (following symbolic links), else 0. */
int zrp_is_regular_file(const char *path);

/* ------------------------------------------------------------ processes */

/* Run the program argv[0] (looked up on PATH when it names no directory)
 * with the NULL-terminated argv, inheriting stdin/stdout/stderr, and wait
 * for it, at most timeout_s seconds (0: no limit). On return 0, *exit_code
 * is its exit status and *crashed is 0; 1 when it died abnormally instead
 * (a signal on POSIX, an unhandled exception on Windows; *exit_code is then
 * the signal number or exception code); 2 when it was still running after
 * timeout_s and was killed. Negative when it could not be started
 * (-ENOENT: no such program). */
int zrp_run_wait(const char *const *argv, unsigned timeout_s, int *exit_code, int *crashed);

/* Run the program argv[0] (looked up on PATH when it names no directory)
 * in place of this process: on POSIX the process image is replaced (same
 * pid; signals and the standard streams reach the new program) and the
 * call returns only when that failed, with a negative errno (-ENOENT: no
 * such program). Where a process cannot be replaced (Windows) argv runs as
 * a child, waited for, and the call returns 0 with its exit status in
 * *exit_code, for the caller to exit with. Flush stdio first. */
int zrp_exec(const char *const *argv, int *exit_code);

/* The path of the running executable, NUL-terminated in buf[cap]. */
int zrp_self_exe(char *buf, size_t cap);

/* ---------------------------------------------------------- randomness */

/* Fill buf[0..len) with bytes from the OS's cryptographic random source
 * (arc4random_buf on macOS, /dev/urandom elsewhere on POSIX, rand_s (the
 * CRT's RtlGenRandom) on Windows). 0, or a negative errno when the source
 * cannot be read. For identities (a store's UUID), never for keys. */
int zrp_random_bytes(void *buf, size_t len);

#endif /* ZR_PLATFORM_H */
