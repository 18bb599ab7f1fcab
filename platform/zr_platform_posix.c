/*
 * zr_platform_posix.c - POSIX implementation of zr_platform.h, for Linux
 * (glibc and musl) and macOS.
 *
 * Every function returns 0 or a negative errno (or one of the ZRP_E*
 * codes); nothing here prints or aborts. The few calls that differ between
 * Linux and macOS (readahead hint, durable flush, CPU affinity) are chosen
 * here by __APPLE__ / __linux__.
 */
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
#include <sys/wait.h>
#include <spawn.h>
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

int zrp_open(zrp_file *out, const char *path, unsigned flags)
{
    int oflags = O_CLOEXEC;
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
    int fd;
    do {
        fd = open(path, oflags, 0666);
    } while (fd < 0 && errno == EINTR);
    if (fd < 0) {
        *out = ZRP_FILE_INVALID;
        return neg_errno();
    }
    out->fd = fd;
    return 0;
}

int zrp_close(zrp_file *f)
{
    if (f->fd < 0)
        return 0;
    /* Never retry close on EINTR: the descriptor is already released. */
    int rc = close((int)f->fd);
    f->fd = -1;
    return rc < 0 && errno != EINTR ? neg_errno() : 0;
}

int zrp_pread_all(zrp_file f, void *buf, size_t len, uint64_t offset)
{
    unsigned char *p = buf;
    while (len > 0) {
        size_t want = len < ZRP_IO_MAX ? len : ZRP_IO_MAX;
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
        ssize_t n = pwrite((int)f.fd, p, want, (off_t)offset);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return neg_errno();
        }
        if (n == 0)
            return -EIO;
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
    int rc;
    do {
        rc = ftruncate((int)f.fd, (off_t)size);
    } while (rc < 0 && errno == EINTR);
    return rc < 0 ? neg_errno() : 0;
}

/* Flush a descriptor's data and metadata to stable storage. On macOS,
 * fsync only hands the data to the drive, which may keep it in its cache;
 * F_FULLFSYNC asks the drive to flush too. Some file systems (network,
 * FAT) refuse F_FULLFSYNC; fsync is then the best there is. */
static int durable_flush(int fd)
{
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
    return rc < 0 ? neg_errno() : 0;
}

int zrp_fsync(zrp_file f)
{
    return durable_flush((int)f.fd);
}

int zrp_map_readonly(zrp_file f, uint64_t len, void **out)
{
    *out = NULL;
    if (len == 0 || len > (uint64_t)SIZE_MAX)
        return -EOVERFLOW;
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
    return mkdir(path, 0777) < 0 ? neg_errno() : 0;
}

int zrp_mkdir_parents(const char *path)
{
    size_t n = strlen(path);
    if (n == 0)
        return -EINVAL;
    char *buf = malloc(n + 1);
    if (!buf)
        return -ENOMEM;
    memcpy(buf, path, n + 1);
    int rc = 0;
    /* Create each prefix ending just before a '/', then the whole path. */
    for (size_t i = 1; i <= n && rc == 0; i++) {
        if (i < n && buf[i] != '/')
            continue;
        if (i < n && buf[i - 1] == '/')
            continue; /* repeated slashes */
        char saved = buf[i];
        buf[i] = '\0';
        if (mkdir(buf, 0777) < 0) {
            int err = errno;
            if (err != EEXIST)
                rc = -err;
            else if (!zrp_is_dir(buf))
                rc = -ENOTDIR;
        }
        buf[i] = saved;
    }
    free(buf);
    return rc;
}

int zrp_unlink(const char *path)
{
    return unlink(path) < 0 ? neg_errno() : 0;
}

int zrp_fsync_dir(const char *path)
{
    int fd;
    do {
        fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    } while (fd < 0 && errno == EINTR);
    if (fd < 0)
        return neg_errno();
    int err = durable_flush(fd);
    close(fd);
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
    rc = zrp_open(&f, tmp, ZRP_WRITE | ZRP_CREATE);
    if (rc < 0)
        goto out;
    rc = zrp_truncate(f, 0);
    if (rc == 0)
        rc = zrp_pwrite_all(f, buf, len, 0);
    if (rc == 0)
        rc = zrp_fsync(f);
    int crc = zrp_close(&f);
    if (rc == 0)
        rc = crc;
    if (rc == 0 && rename(tmp, path) < 0)
        rc = neg_errno();
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

/* ------------------------------------------------------------ processes */

int zrp_run_wait(const char *const *argv, int *exit_code, int *crashed)
{
    *exit_code = 0;
    *crashed = 0;
    pid_t pid;
    int rc = posix_spawnp(&pid, argv[0], NULL, NULL, (char *const *)argv, environ);
    if (rc != 0)
        return -rc;
    int status = 0;
    while (waitpid(pid, &status, 0) < 0) {
        if (errno != EINTR)
            return neg_errno();
    }
    if (WIFSIGNALED(status)) {
        *crashed = 1;
        *exit_code = WTERMSIG(status);
    } else {
        *exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 1;
    }
    return 0;
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
