/*
 * zr_platform_posix.c - POSIX implementation of zr_platform.h, for Linux
 * (glibc and musl) and macOS.
 *
 * Every function returns 0 or a negative errno (or one of the ZRP_E*
 * codes); nothing here prints or aborts. The few calls that differ between
 * Linux and macOS (readahead hint, durable flush, CPU affinity) are chosen
 * here by __APPLE__ / __linux__.
 */
#if defined(__linux__) && !defined(_GNU_SOURCE)
#define _GNU_SOURCE /* sync_file_range */
#endif
#include "zr_platform.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <dirent.h>
#include <sys/wait.h>
#include <spawn.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>
#if defined(__APPLE__)
#include <mach-o/dyld.h>
#endif

extern char **environ;

/* The opaque storage in the header must hold the native types. */
_Static_assert(sizeof(pthread_mutex_t) <= sizeof(((zrp_mutex *)0)->opaque),
               "zrp_mutex storage too small for pthread_mutex_t");
_Static_assert(sizeof(pthread_cond_t) <= sizeof(((zrp_cond *)0)->opaque),
               "zrp_cond storage too small for pthread_cond_t");
_Static_assert(_Alignof(pthread_mutex_t) <= 16, "pthread_mutex_t alignment");
_Static_assert(_Alignof(pthread_cond_t) <= 16, "pthread_cond_t alignment");
_Static_assert(sizeof(pthread_t) <= sizeof(uintptr_t), "pthread_t must fit uintptr_t");

/* Linux caps one read/write at 0x7ffff000 bytes; stay below it. */
#define ZRP_IO_MAX ((size_t)1 << 30)

static int neg_errno(void) { return errno ? -errno : -EIO; }

/* ---------------------------------------------------------------- files */

/* ------------------------------------------------- failpoints (tests) */

#ifdef ZRP_FAILPOINTS
#include <stdatomic.h>

typedef struct fp_slot {
    _Atomic uint64_t count;
    uint64_t nth;
    int err;
    int sticky;
} fp_slot;

static fp_slot fp_slots[ZRP_FP_KINDS];
static _Atomic uint64_t fp_injected;
static void (*fp_observer)(const zrp_fp_event *, void *);
static void *fp_observer_arg;
static pthread_mutex_t fp_lock = PTHREAD_MUTEX_INITIALIZER;
#define FP_MAX_FD 4096
static char *fp_paths[FP_MAX_FD];

int zrp_fp_enabled(void) { return 1; }

void zrp_fp_arm(zrp_fp_kind kind, uint64_t nth, int err, int sticky)
{
    if ((unsigned)kind >= ZRP_FP_KINDS)
        return;
    fp_slots[kind].nth = nth ? atomic_load(&fp_slots[kind].count) + nth : 0;
    fp_slots[kind].err = err;
    fp_slots[kind].sticky = sticky;
}

void zrp_fp_reset(void)
{
    for (int k = 0; k < ZRP_FP_KINDS; k++) {
        fp_slots[k].nth = 0;
        atomic_store(&fp_slots[k].count, 0);
    }
    atomic_store(&fp_injected, 0);
}

uint64_t zrp_fp_count(zrp_fp_kind kind)
{
    return (unsigned)kind < ZRP_FP_KINDS ? atomic_load(&fp_slots[kind].count) : 0;
}

uint64_t zrp_fp_injected(void) { return atomic_load(&fp_injected); }

void zrp_fp_observe(void (*fn)(const zrp_fp_event *, void *), void *arg)
{
    pthread_mutex_lock(&fp_lock);
    fp_observer = fn;
    fp_observer_arg = arg;
    pthread_mutex_unlock(&fp_lock);
}

/* 0, or the error to inject into this call of `kind`. A sticky short
 * write tears one write: every later one fails whole with ENOSPC (the
 * device stays full), so a write that was to undo the torn one (a header
 * put back) cannot hide it. */
static int fp_hit(zrp_fp_kind kind)
{
    uint64_t n = atomic_fetch_add(&fp_slots[kind].count, 1) + 1;
    uint64_t nth = fp_slots[kind].nth;
    if (nth == 0 || n < nth || (n > nth && !fp_slots[kind].sticky))
        return 0;
    atomic_fetch_add(&fp_injected, 1);
    int err = fp_slots[kind].err;
    return err == ZRP_FP_SHORT && n > nth && kind == ZRP_FP_PWRITE ? -ENOSPC : err;
}

static void fp_event(zrp_fp_event_kind kind, const char *path, const char *path2, uint64_t off,
                     const void *data, size_t len)
{
    pthread_mutex_lock(&fp_lock);
    if (fp_observer) {
        zrp_fp_event ev = {kind, path, path2, off, data, len};
        fp_observer(&ev, fp_observer_arg);
    }
    pthread_mutex_unlock(&fp_lock);
}

static void fp_fd_path(int fd, const char *path)
{
    if (fd < 0 || fd >= FP_MAX_FD)
        return;
    pthread_mutex_lock(&fp_lock);
    free(fp_paths[fd]);
    fp_paths[fd] = path ? strdup(path) : NULL;
    pthread_mutex_unlock(&fp_lock);
}

static void fp_fd_event(zrp_fp_event_kind kind, int fd, uint64_t off, const void *data, size_t len)
{
    if (!fp_observer || fd < 0 || fd >= FP_MAX_FD)
        return;
    pthread_mutex_lock(&fp_lock);
    if (fp_observer && fp_paths[fd]) {
        zrp_fp_event ev = {kind, fp_paths[fd], NULL, off, data, len};
        fp_observer(&ev, fp_observer_arg);
    }
    pthread_mutex_unlock(&fp_lock);
}
#define FP_HIT(kind) fp_hit(kind)
#define FP_EVENT(...) fp_event(__VA_ARGS__)
#define FP_FD_EVENT(...) fp_fd_event(__VA_ARGS__)
#define FP_FD_PATH(fd, path) fp_fd_path(fd, path)
#else
#define FP_HIT(kind) 0
#define FP_EVENT(...) ((void)0)
#define FP_FD_EVENT(...) ((void)0)
#define FP_FD_PATH(fd, path) ((void)0)
#endif

/* ---------------------------------------------------------------- files */

int zrp_open(zrp_file *out, const char *path, unsigned flags)
{
    *out = ZRP_FILE_INVALID;
    /* Never through a symbolic link, and never blocking in open() itself
     * (a FIFO would wait for a writer forever); the type is checked below. */
    int oflags = O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY;
    if ((flags & ZRP_READ) && (flags & ZRP_WRITE))
        oflags |= O_RDWR;
    else if (flags & ZRP_WRITE)
        oflags |= O_WRONLY;
    else
        oflags |= O_RDONLY;
    if (flags & ZRP_CREATE) {
        oflags |= O_CREAT;
        if (flags & ZRP_EXCLUSIVE)
            oflags |= O_EXCL;
    }
    int inj = FP_HIT(ZRP_FP_OPEN);
    if (inj)
        return inj == ZRP_FP_SHORT ? -EIO : inj;
#ifdef ZRP_FAILPOINTS
    struct stat pre;
    int existed = (flags & ZRP_CREATE) ? lstat(path, &pre) == 0 : 1;
#endif
    int fd;
    do {
        fd = open(path, oflags, 0666);
    } while (fd < 0 && errno == EINTR);
    if (fd < 0)
        return neg_errno();
    struct stat st;
    if (fstat(fd, &st) < 0) {
        int err = neg_errno();
        close(fd);
        return err;
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return ZRP_ENOTREG;
    }
    /* Regular files ignore O_NONBLOCK, but clear it so nothing depends on it. */
    int fl = fcntl(fd, F_GETFL);
    if (fl >= 0)
        (void)fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
    out->fd = fd;
    FP_FD_PATH(fd, path);
#ifdef ZRP_FAILPOINTS
    if (!existed)
        FP_EVENT(ZRP_EV_CREATE, path, NULL, 0, NULL, 0);
#endif
    return 0;
}

int zrp_close(zrp_file *f)
{
    if (f->fd < 0)
        return 0;
    /* Never retry close on EINTR: the descriptor is already released. */
    FP_FD_PATH((int)f->fd, NULL);
    int rc = close((int)f->fd);
    f->fd = -1;
    return rc < 0 && errno != EINTR ? neg_errno() : 0;
}

int zrp_pread_all(zrp_file f, void *buf, size_t len, uint64_t offset)
{
    unsigned char *p = buf;
    while (len > 0) {
        size_t want = len < ZRP_IO_MAX ? len : ZRP_IO_MAX;
        int inj = FP_HIT(ZRP_FP_PREAD);
        if (inj)
            return inj == ZRP_FP_SHORT ? ZRP_ESHORT : inj;
        ssize_t n = pread((int)f.fd, p, want, (off_t)offset);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return neg_errno();
        }
        if (n == 0)
            return ZRP_ESHORT;
        p += n;
        len -= (size_t)n;
        offset += (uint64_t)n;
    }
    return 0;
}

int zrp_pwrite_all(zrp_file f, const void *buf, size_t len, uint64_t offset)
{
    const unsigned char *p = buf;
    while (len > 0) {
        size_t want = len < ZRP_IO_MAX ? len : ZRP_IO_MAX;
        int inj = FP_HIT(ZRP_FP_PWRITE);
        if (inj == ZRP_FP_SHORT) {
            /* A short write, then the device is full. */
            if (want > 1) {
                ssize_t h = pwrite((int)f.fd, p, want / 2, (off_t)offset);
                if (h > 0)
                    FP_FD_EVENT(ZRP_EV_WRITE, (int)f.fd, offset, p, (size_t)h);
            }
            return -ENOSPC;
        }
        if (inj)
            return inj;
        ssize_t n = pwrite((int)f.fd, p, want, (off_t)offset);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return neg_errno();
        }
        if (n == 0)
            return -EIO;
        FP_FD_EVENT(ZRP_EV_WRITE, (int)f.fd, offset, p, (size_t)n);
        p += n;
        len -= (size_t)n;
        offset += (uint64_t)n;
    }
    return 0;
}

int zrp_file_size(zrp_file f, uint64_t *out)
{
    struct stat st;
    if (fstat((int)f.fd, &st) < 0)
        return neg_errno();
    *out = (uint64_t)st.st_size;
    return 0;
}

int zrp_truncate(zrp_file f, uint64_t size)
{
    int inj = FP_HIT(ZRP_FP_FTRUNCATE);
    if (inj)
        return inj == ZRP_FP_SHORT ? -EIO : inj;
    int rc;
    do {
        rc = ftruncate((int)f.fd, (off_t)size);
    } while (rc < 0 && errno == EINTR);
    if (rc < 0)
        return neg_errno();
    FP_FD_EVENT(ZRP_EV_TRUNCATE, (int)f.fd, size, NULL, 0);
    return 0;
}

/* Flush a descriptor's data and metadata to stable storage. On macOS,
 * fsync only hands the data to the drive, which may keep it in its cache;
 * F_FULLFSYNC asks the drive to flush too. Some file systems (network,
 * FAT) refuse F_FULLFSYNC; fsync is then the best there is. */
static int durable_flush(int fd)
{
    int inj = FP_HIT(ZRP_FP_FSYNC);
    if (inj)
        return inj == ZRP_FP_SHORT ? -EIO : inj;
    int rc;
#if defined(__APPLE__)
    do {
        rc = fcntl(fd, F_FULLFSYNC);
    } while (rc < 0 && errno == EINTR);
    if (rc == 0)
        return 0;
#endif
    do {
        rc = fsync(fd);
    } while (rc < 0 && errno == EINTR);
    if (rc < 0)
        return neg_errno();
    return 0;
}

int zrp_fsync(zrp_file f)
{
    int rc = durable_flush((int)f.fd);
    if (rc == 0)
        FP_FD_EVENT(ZRP_EV_FSYNC, (int)f.fd, 0, NULL, 0);
    return rc;
}

int zrp_start_writeback(zrp_file f, uint64_t offset, uint64_t len)
{
#if defined(__linux__)
    /* Starts write-out of the range's dirty pages and returns; waits only
     * when the device's queue is full. No durability is implied: only a
     * later fsync vouches for the data. */
    int rc;
    do {
        rc = sync_file_range((int)f.fd, (off_t)offset, (off_t)len, SYNC_FILE_RANGE_WRITE);
    } while (rc < 0 && errno == EINTR);
    return rc < 0 ? neg_errno() : 0;
#else
    (void)f, (void)offset, (void)len;
    return 0;
#endif
}

int zrp_map_readonly(zrp_file f, uint64_t len, void **out)
{
    *out = NULL;
    if (len == 0 || len > (uint64_t)SIZE_MAX)
        return -EOVERFLOW;
    int inj = FP_HIT(ZRP_FP_MMAP);
    if (inj)
        return inj == ZRP_FP_SHORT ? -ENOMEM : inj;
    void *p = mmap(NULL, (size_t)len, PROT_READ, MAP_SHARED, (int)f.fd, 0);
    if (p == MAP_FAILED)
        return -errno;
    *out = p;
    return 0;
}

void zrp_unmap(void *p, uint64_t len)
{
    if (p && len > 0 && len <= (uint64_t)SIZE_MAX)
        (void)munmap(p, (size_t)len);
}

int zrp_advise_hugepages(void *p, size_t len)
{
#if defined(MADV_HUGEPAGE)
    long ps = sysconf(_SC_PAGESIZE);
    if (ps <= 0) return -ENOTSUP;
    uintptr_t lo = ((uintptr_t)p + (uintptr_t)ps - 1) & ~((uintptr_t)ps - 1);
    uintptr_t hi = ((uintptr_t)p + len) & ~((uintptr_t)ps - 1);
    if (len == 0 || (uintptr_t)p + len < (uintptr_t)p || hi <= lo) return 0;
    return madvise((void *)lo, (size_t)(hi - lo), MADV_HUGEPAGE) < 0 ? neg_errno() : 0;
#else
    (void)p, (void)len;
    return -ENOTSUP;
#endif
}

int zrp_advise_willneed(zrp_file f, uint64_t offset, uint64_t len)
{
#if defined(__APPLE__)
    /* macOS has no posix_fadvise; F_RDADVISE starts reading one range
     * (its count is an int, so a longer range is hinted in part). */
    struct radvisory ra;
    ra.ra_offset = (off_t)offset;
    ra.ra_count = len > (uint64_t)INT_MAX ? INT_MAX : (int)len;
    return fcntl((int)f.fd, F_RDADVISE, &ra) < 0 ? neg_errno() : 0;
#else
    int rc = posix_fadvise((int)f.fd, (off_t)offset, (off_t)len, POSIX_FADV_WILLNEED);
    return rc ? -rc : 0;
#endif
}

/* Pages in memory of [p, p + span) (page-aligned p): mincore's vector,
 * counted. */
static int count_resident(void *p, uint64_t span, uint64_t n, uint64_t *resident, uint64_t *pages)
{
    unsigned char small[256];
    unsigned char *vec = n <= sizeof small ? small : malloc((size_t)n);
    int rc = 0;
    if (vec == NULL) {
        rc = -ENOMEM;
    } else if (mincore(p, (size_t)span, (void *)vec) < 0) {
        rc = neg_errno();
    } else {
        uint64_t in = 0;
        for (uint64_t i = 0; i < n; i++)
            in += vec[i] & 1u;
        *resident = in;
        *pages = n;
    }
    if (vec != small)
        free(vec);
    return rc;
}

int zrp_resident_mapped(const void *addr, uint64_t len, uint64_t *resident, uint64_t *pages)
{
    *resident = *pages = 0;
    long ps = sysconf(_SC_PAGESIZE);
    if (ps <= 0)
        return -ENOTSUP;
    if (len == 0)
        return 0;
    uintptr_t a = (uintptr_t)addr, lo = a / (uintptr_t)ps * (uintptr_t)ps;
    uint64_t span = (uint64_t)(a - lo) + len;
    uint64_t n = (span + (uint64_t)ps - 1) / (uint64_t)ps;
    if (span > (uint64_t)SIZE_MAX)
        return -EOVERFLOW;
    return count_resident((void *)lo, span, n, resident, pages);
}

int zrp_resident(zrp_file f, uint64_t offset, uint64_t len, uint64_t *resident, uint64_t *pages)
{
    *resident = *pages = 0;
    long ps = sysconf(_SC_PAGESIZE);
    if (ps <= 0)
        return -ENOTSUP;
    uint64_t page = (uint64_t)ps;
    uint64_t lo = offset / page * page;
    if (len == 0)
        return 0;
    if (offset > UINT64_MAX - len)
        return -EOVERFLOW;
    uint64_t span = offset + len - lo;
    uint64_t n = (span + page - 1) / page;
    if (span > (uint64_t)SIZE_MAX || n > (uint64_t)SIZE_MAX || lo > (uint64_t)INT64_MAX)
        return -EOVERFLOW;
    void *p = mmap(NULL, (size_t)span, PROT_READ, MAP_SHARED, (int)f.fd, (off_t)lo);
    if (p == MAP_FAILED)
        return neg_errno();
    int rc = count_resident(p, span, n, resident, pages);
    (void)munmap(p, (size_t)span);
    return rc;
}

static int do_flock(zrp_file f, int op)
{
    int rc;
    do {
        rc = flock((int)f.fd, op | LOCK_NB);
    } while (rc < 0 && errno == EINTR);
    if (rc < 0)
        return errno == EWOULDBLOCK ? ZRP_EBUSY : neg_errno();
    return 0;
}

int zrp_lock_exclusive(zrp_file f) { return do_flock(f, LOCK_EX); }
int zrp_lock_shared(zrp_file f) { return do_flock(f, LOCK_SH); }
int zrp_unlock(zrp_file f) { return do_flock(f, LOCK_UN); }

void zrp_yield(void) { (void)sched_yield(); }

void zrp_stdio_binary(void) {}

/* ---------------------------------------------------------- directories */

int zrp_path_exists(const char *path)
{
    struct stat st;
    return lstat(path, &st) == 0;
}

int zrp_is_dir(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

int zrp_mkdir(const char *path)
{
    int inj = FP_HIT(ZRP_FP_MKDIR);
    if (inj)
        return inj == ZRP_FP_SHORT ? -ENOSPC : inj;
    if (mkdir(path, 0777) < 0)
        return neg_errno();
    FP_EVENT(ZRP_EV_MKDIR, path, NULL, 0, NULL, 0);
    return 0;
}

int zrp_rmdir(const char *path)
{
    if (rmdir(path) < 0)
        return neg_errno();
    FP_EVENT(ZRP_EV_RMDIR, path, NULL, 0, NULL, 0);
    return 0;
}

int zrp_is_path_sep(char c) { return c == '/'; }

int zrp_unlink(const char *path)
{
    int inj = FP_HIT(ZRP_FP_UNLINK);
    if (inj)
        return inj == ZRP_FP_SHORT ? -EIO : inj;
    if (unlink(path) < 0)
        return neg_errno();
    FP_EVENT(ZRP_EV_UNLINK, path, NULL, 0, NULL, 0);
    return 0;
}

int zrp_fsync_dir(const char *path)
{
    int fd;
    do {
        fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NONBLOCK);
    } while (fd < 0 && errno == EINTR);
    if (fd < 0)
        return neg_errno();
    int err = durable_flush(fd);
    close(fd);
    if (err == 0)
        FP_EVENT(ZRP_EV_FSYNC_DIR, path, NULL, 0, NULL, 0);
    return err;
}

/* The directory part of `path` in a malloc'd string ("." if none). */
static char *dir_of(const char *path)
{
    const char *slash = strrchr(path, '/');
    if (!slash)
        return strdup(".");
    if (slash == path)
        return strdup("/");
    size_t n = (size_t)(slash - path);
    char *d = malloc(n + 1);
    if (d) {
        memcpy(d, path, n);
        d[n] = '\0';
    }
    return d;
}

int zrp_write_file_atomic(const char *path, const void *buf, size_t len)
{
    size_t n = strlen(path);
    char *tmp = malloc(n + 32);
    char *dir = dir_of(path);
    int rc = 0;
    if (!tmp || !dir) {
        rc = -ENOMEM;
        goto out;
    }
    snprintf(tmp, n + 32, "%s.tmp.%ld", path, (long)getpid());
    zrp_file f;
    rc = zrp_create_fresh(&f, tmp); /* never written through a stale file or link */
    if (rc < 0)
        goto out;
    rc = zrp_pwrite_all(f, buf, len, 0);
    if (rc == 0)
        rc = zrp_fsync(f);
    int crc = zrp_close(&f);
    if (rc == 0)
        rc = crc;
    if (rc == 0 && (rc = FP_HIT(ZRP_FP_RENAME)) != 0)
        rc = rc == ZRP_FP_SHORT ? -EIO : rc;
    if (rc == 0) {
        if (rename(tmp, path) < 0)
            rc = neg_errno();
        else
            FP_EVENT(ZRP_EV_RENAME, tmp, path, 0, NULL, 0);
    }
    if (rc < 0) {
        unlink(tmp);
        goto out;
    }
    rc = zrp_fsync_dir(dir);
out:
    free(tmp);
    free(dir);
    return rc;
}

int zrp_rename(const char *from, const char *to)
{
    int inj = FP_HIT(ZRP_FP_RENAME);
    if (inj)
        return inj == ZRP_FP_SHORT ? -EIO : inj;
    if (rename(from, to) < 0)
        return neg_errno();
    FP_EVENT(ZRP_EV_RENAME, from, to, 0, NULL, 0);
    return 0;
}

int zrp_touch(const char *path)
{
    return utimensat(AT_FDCWD, path, NULL, 0) < 0 ? neg_errno() : 0;
}

int zrp_stat(const char *path, uint64_t *size, uint64_t *mtime_ns)
{
    struct stat st;
    if (stat(path, &st) < 0)
        return neg_errno();
    if (!S_ISREG(st.st_mode))
        return ZRP_ENOTREG;
    if (size)
        *size = (uint64_t)st.st_size;
#if defined(__APPLE__)
    const struct timespec mt = st.st_mtimespec;
#else
    const struct timespec mt = st.st_mtim;
#endif
    if (mtime_ns)
        *mtime_ns = (uint64_t)mt.tv_sec * 1000000000u + (uint64_t)mt.tv_nsec;
    return 0;
}

long zrp_pid(void) { return (long)getpid(); }

int zrp_pid_alive(long pid)
{
    if (pid <= 0)
        return -1;
    if (kill((pid_t)pid, 0) == 0)
        return 1;
    return errno == ESRCH ? 0 : errno == EPERM ? 1 : -1;
}

/* -------------------------------------------------------------- threads */

typedef struct thread_start {
    void (*fn)(void *);
    void *arg;
} thread_start;

static void *thread_trampoline(void *p)
{
    thread_start s = *(thread_start *)p;
    free(p);
    s.fn(s.arg);
    return NULL;
}

int zrp_thread_start(zrp_thread *t, void (*fn)(void *), void *arg)
{
    thread_start *s = malloc(sizeof *s);
    if (!s)
        return -ENOMEM;
    s->fn = fn;
    s->arg = arg;
    pthread_t th;
    int rc = pthread_create(&th, NULL, thread_trampoline, s);
    if (rc) {
        free(s);
        return -rc;
    }
    t->handle = (uintptr_t)th;
    return 0;
}

int zrp_thread_join(zrp_thread t)
{
    int rc = pthread_join((pthread_t)t.handle, NULL);
    return rc ? -rc : 0;
}

int zrp_mutex_init(zrp_mutex *m)
{
    int rc = pthread_mutex_init((pthread_mutex_t *)(void *)m->opaque, NULL);
    return rc ? -rc : 0;
}
void zrp_mutex_destroy(zrp_mutex *m) { pthread_mutex_destroy((pthread_mutex_t *)(void *)m->opaque); }
void zrp_mutex_lock(zrp_mutex *m) { pthread_mutex_lock((pthread_mutex_t *)(void *)m->opaque); }
void zrp_mutex_unlock(zrp_mutex *m) { pthread_mutex_unlock((pthread_mutex_t *)(void *)m->opaque); }

int zrp_cond_init(zrp_cond *c)
{
    int rc = pthread_cond_init((pthread_cond_t *)(void *)c->opaque, NULL);
    return rc ? -rc : 0;
}
void zrp_cond_destroy(zrp_cond *c) { pthread_cond_destroy((pthread_cond_t *)(void *)c->opaque); }
void zrp_cond_wait(zrp_cond *c, zrp_mutex *m)
{
    pthread_cond_wait((pthread_cond_t *)(void *)c->opaque, (pthread_mutex_t *)(void *)m->opaque);
}
int zrp_cond_timedwait(zrp_cond *c, zrp_mutex *m, uint64_t timeout_ns)
{
    /* The condition uses the default (realtime) clock; the waits here are
     * short slices, so a clock step only lengthens or shortens one. */
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t ns = (uint64_t)ts.tv_nsec + timeout_ns % 1000000000u;
    ts.tv_sec += (time_t)(timeout_ns / 1000000000u + ns / 1000000000u);
    ts.tv_nsec = (long)(ns % 1000000000u);
    int rc = pthread_cond_timedwait((pthread_cond_t *)(void *)c->opaque,
                                    (pthread_mutex_t *)(void *)m->opaque, &ts);
    return rc == ETIMEDOUT ? 1 : 0;
}
void zrp_cond_signal(zrp_cond *c) { pthread_cond_signal((pthread_cond_t *)(void *)c->opaque); }
void zrp_cond_broadcast(zrp_cond *c) { pthread_cond_broadcast((pthread_cond_t *)(void *)c->opaque); }

unsigned zrp_cpu_count(void)
{
#if defined(__linux__)
    /* The CPUs this process may run on (taskset, cgroup cpusets). macOS
     * has no affinity masks: every online CPU counts. */
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof set, &set) == 0) {
        int cpus = CPU_COUNT(&set);
        if (cpus > 0)
            return (unsigned)cpus;
    }
#endif
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (unsigned)n : 1u;
}

uint64_t zrp_physical_memory(void)
{
    long pages = sysconf(_SC_PHYS_PAGES);
    long page = sysconf(_SC_PAGESIZE);
    if (pages <= 0 || page <= 0)
        return 0;
    if ((uint64_t)pages > UINT64_MAX / (uint64_t)page)
        return UINT64_MAX;
    return (uint64_t)pages * (uint64_t)page;
}

uint64_t zrp_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * UINT64_C(1000000000) + (uint64_t)ts.tv_nsec;
}

/* ------------------------------------------------------------ terminals */

int zrp_is_terminal(int fd) { return isatty(fd) == 1; }

void zrp_sleep_ms(unsigned ms)
{
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

/* ------------------------------------------------------- directory lists */

int zrp_list_dir(const char *path, char ***names, size_t *count)
{
    *names = NULL;
    *count = 0;
    DIR *d = opendir(path);
    if (!d)
        return neg_errno();
    char **v = NULL;
    size_t n = 0, cap = 0;
    int rc = 0;
    for (;;) {
        errno = 0;
        struct dirent *de = readdir(d);
        if (!de) {
            if (errno)
                rc = neg_errno();
            break;
        }
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
            continue;
        if (n == cap) {
            size_t nc = cap ? cap * 2 : 64;
            char **nv = realloc(v, nc * sizeof *nv);
            if (!nv) {
                rc = -ENOMEM;
                break;
            }
            v = nv;
            cap = nc;
        }
        if (!(v[n] = strdup(de->d_name))) {
            rc = -ENOMEM;
            break;
        }
        n++;
    }
    closedir(d);
    if (rc < 0) {
        zrp_free_names(v, n);
        return rc;
    }
    *names = v;
    *count = n;
    return 0;
}

int zrp_is_regular_file(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* ------------------------------------------------------------ processes */

int zrp_run_wait(const char *const *argv, unsigned timeout_s, int *exit_code, int *crashed)
{
    *exit_code = 0;
    *crashed = 0;
    pid_t pid;
    int rc = posix_spawnp(&pid, argv[0], NULL, NULL, (char *const *)argv, environ);
    if (rc != 0)
        return -rc;
    int status = 0;
    uint64_t deadline = timeout_s ? zrp_now_ns() + (uint64_t)timeout_s * UINT64_C(1000000000) : 0;
    for (;;) {
        pid_t w = waitpid(pid, &status, timeout_s ? WNOHANG : 0);
        if (w == pid)
            break;
        if (w < 0 && errno != EINTR)
            return neg_errno();
        if (w == 0 && zrp_now_ns() >= deadline) {
            kill(pid, SIGKILL);
            while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
                ;
            *crashed = 2;
            *exit_code = SIGKILL;
            return 0;
        }
        if (w == 0)
            zrp_sleep_ms(10);
    }
    if (WIFSIGNALED(status)) {
        *crashed = 1;
        *exit_code = WTERMSIG(status);
    } else {
        *exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 1;
    }
    return 0;
}

int zrp_exec(const char *const *argv, int *exit_code)
{
    *exit_code = 0;
    execvp(argv[0], (char *const *)argv);
    return neg_errno();
}

int zrp_self_exe(char *buf, size_t cap)
{
    if (cap == 0)
        return -ERANGE;
#if defined(__APPLE__)
    uint32_t size = cap > UINT32_MAX ? UINT32_MAX : (uint32_t)cap;
    return _NSGetExecutablePath(buf, &size) == 0 ? 0 : -ERANGE;
#else
    ssize_t n = readlink("/proc/self/exe", buf, cap);
    if (n < 0)
        return neg_errno();
    if ((size_t)n >= cap)
        return -ERANGE;
    buf[n] = '\0';
    return 0;
#endif
}

/* ---------------------------------------------------------- randomness */

int zrp_random_bytes(void *buf, size_t len)
{
#if defined(__APPLE__)
    arc4random_buf(buf, len);
    return 0;
#else
    int fd;
    do
        fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    while (fd < 0 && errno == EINTR);
    if (fd < 0)
        return neg_errno();
    unsigned char *p = buf;
    while (len > 0) {
        ssize_t n = read(fd, p, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            int rc = n < 0 ? neg_errno() : -EIO;
            close(fd);
            return rc;
        }
        p += n;
        len -= (size_t)n;
    }
    close(fd);
    return 0;
#endif
}
