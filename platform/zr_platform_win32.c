/*
 * zr_platform_win32.c - Windows implementation of zr_platform.h (x64 and
 * arm64, Windows 10 or newer; UCRT).
 *
 * Every function returns 0 or a negative errno-style value (the CRT's
 * <errno.h> numbers, mapped from GetLastError) or one of the ZRP_E* codes;
 * nothing here prints or aborts. Paths are UTF-8 and may use '/' or '\'.
 *
 * Where Windows differs from POSIX, and the rule chosen here:
 *   - Files are opened with FILE_SHARE_READ | WRITE | DELETE, so that other
 *     handles may read, write, rename over and delete them while they are
 *     open, as on POSIX.
 *   - Reads: a file mapping (section) cannot extend past the end of the
 *     file, and the engine's mapping is a fixed reservation larger than the
 *     file that must see appends without moving. zrp_map_readonly therefore
 *     declines (-ENOTSUP) and the engine reads every file with positional
 *     reads (ReadFile at an offset), its documented fallback.
 *   - Locks: byte-range locks on Windows are mandatory (a locked range
 *     cannot be read or written through other handles), so the lock covers
 *     one byte far past any data (offset 2^63 - 1), never the file's bytes.
 *     Shared and exclusive there behave as flock's LOCK_SH and LOCK_EX, and
 *     closing the handle releases it.
 *   - Durability: FlushFileBuffers; directory entries need no flush of
 *     their own (NTFS journals them, and renames use MOVEFILE_WRITE_THROUGH).
 */
/* rand_s (zrp_random_bytes) is declared only with this, before stdlib.h. */
#define _CRT_RAND_S
#include "zr_platform.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define WIN32_LEAN_AND_MEAN
#include <windows.h>
#include <fcntl.h>
#include <io.h>

/* The opaque storage in the header must hold the native types. */
_Static_assert(sizeof(SRWLOCK) <= sizeof(((zrp_mutex *)0)->opaque), "zrp_mutex storage too small");
_Static_assert(sizeof(CONDITION_VARIABLE) <= sizeof(((zrp_cond *)0)->opaque), "zrp_cond storage too small");
_Static_assert(sizeof(HANDLE) <= sizeof(intptr_t), "HANDLE must fit zrp_file.fd");

/* One ReadFile/WriteFile moves at most a DWORD; stay well below it. */
#define ZRP_IO_MAX ((DWORD)1 << 30)
/* The byte every lock covers: past any file this project writes. */
#define ZRP_LOCK_OFFSET_HIGH 0x7fffffffu
#define ZRP_LOCK_OFFSET_LOW 0xffffffffu

/* GetLastError() as a negative errno. */
static int neg_win_error(DWORD err)
{
    switch (err) {
    case ERROR_FILE_NOT_FOUND:
    case ERROR_PATH_NOT_FOUND:
    case ERROR_INVALID_DRIVE:
    case ERROR_BAD_NETPATH:
    case ERROR_BAD_PATHNAME:
        return -ENOENT;
    case ERROR_ACCESS_DENIED:
    case ERROR_SHARING_VIOLATION:
    case ERROR_WRITE_PROTECT:
        return -EACCES;
    case ERROR_FILE_EXISTS:
    case ERROR_ALREADY_EXISTS:
        return -EEXIST;
    case ERROR_DIRECTORY:
        return -ENOTDIR;
    case ERROR_DIR_NOT_EMPTY:
        return -ENOTEMPTY;
    case ERROR_DISK_FULL:
    case ERROR_HANDLE_DISK_FULL:
        return -ENOSPC;
    case ERROR_NOT_ENOUGH_MEMORY:
    case ERROR_OUTOFMEMORY:
        return -ENOMEM;
    case ERROR_INVALID_PARAMETER:
    case ERROR_INVALID_NAME:
    case ERROR_NEGATIVE_SEEK:
        return -EINVAL;
    case ERROR_FILENAME_EXCED_RANGE:
        return -ENAMETOOLONG;
    case ERROR_TOO_MANY_OPEN_FILES:
        return -EMFILE;
    case ERROR_LOCK_VIOLATION:
        return -EBUSY;
    case ERROR_NOT_SUPPORTED:
    case ERROR_CALL_NOT_IMPLEMENTED:
        return -ENOTSUP;
    default:
        return -EIO;
    }
}

static int last_error(void) { return neg_win_error(GetLastError()); }

/* `path` (UTF-8) as a malloc'd UTF-16 string, or NULL (errno-style code
 * in *rc). */
static wchar_t *widen(const char *path, int *rc)
{
    int n = MultiByteToWideChar(CP_UTF8, MB_ERR_INVALID_CHARS, path, -1, NULL, 0);
    if (n <= 0) {
        *rc = -EINVAL;
        return NULL;
    }
    wchar_t *w = malloc((size_t)n * sizeof *w);
    if (!w) {
        *rc = -ENOMEM;
        return NULL;
    }
    MultiByteToWideChar(CP_UTF8, MB_ERR_INVALID_CHARS, path, -1, w, n);
    *rc = 0;
    return w;
}

static HANDLE handle_of(zrp_file f) { return (HANDLE)f.fd; }

/* ---------------------------------------------------------------- files */

int zrp_open(zrp_file *out, const char *path, unsigned flags)
{
    *out = ZRP_FILE_INVALID;
    DWORD access = 0;
    if (flags & ZRP_READ)
        access |= GENERIC_READ;
    if (flags & ZRP_WRITE)
        access |= GENERIC_WRITE;
    if (access == 0)
        access = GENERIC_READ;
    DWORD disposition = OPEN_EXISTING;
    if (flags & ZRP_CREATE)
        disposition = (flags & ZRP_EXCLUSIVE) ? CREATE_NEW : OPEN_ALWAYS;
    int rc;
    wchar_t *w = widen(path, &rc);
    if (!w)
        return rc;
    /* FILE_FLAG_OPEN_REPARSE_POINT opens a symbolic link (or junction)
     * itself instead of its target: it is then refused below, as O_NOFOLLOW
     * does on POSIX. */
    HANDLE h = CreateFileW(w, access, FILE_SHARE_READ | FILE_SHARE_WRITE | FILE_SHARE_DELETE,
                           NULL, disposition, FILE_ATTRIBUTE_NORMAL | FILE_FLAG_OPEN_REPARSE_POINT,
                           NULL);
    DWORD err = GetLastError();
    free(w);
    if (h == INVALID_HANDLE_VALUE)
        return neg_win_error(err);
    BY_HANDLE_FILE_INFORMATION info;
    if (!GetFileInformationByHandle(h, &info)) {
        rc = last_error();
        CloseHandle(h);
        return rc;
    }
    if (info.dwFileAttributes & FILE_ATTRIBUTE_REPARSE_POINT) {
        CloseHandle(h);
        return -ELOOP;
    }
    if (GetFileType(h) != FILE_TYPE_DISK || (info.dwFileAttributes & FILE_ATTRIBUTE_DIRECTORY)) {
        CloseHandle(h);
        return ZRP_ENOTREG;
    }
    out->fd = (intptr_t)h;
    return 0;
}

int zrp_close(zrp_file *f)
{
    if (f->fd == -1)
        return 0;
    BOOL ok = CloseHandle(handle_of(*f));
    f->fd = -1;
    return ok ? 0 : last_error();
}

static OVERLAPPED at_offset(uint64_t offset)
{
    OVERLAPPED ov;
    memset(&ov, 0, sizeof ov);
    ov.Offset = (DWORD)(offset & 0xffffffffu);
    ov.OffsetHigh = (DWORD)(offset >> 32);
    return ov;
}

int zrp_pread_all(zrp_file f, void *buf, size_t len, uint64_t offset)
{
    unsigned char *p = buf;
    while (len > 0) {
        DWORD want = len < ZRP_IO_MAX ? (DWORD)len : ZRP_IO_MAX;
        DWORD got = 0;
        OVERLAPPED ov = at_offset(offset);
        if (!ReadFile(handle_of(f), p, want, &got, &ov)) {
            DWORD err = GetLastError();
            return err == ERROR_HANDLE_EOF ? ZRP_ESHORT : neg_win_error(err);
        }
        if (got == 0)
            return ZRP_ESHORT;
        p += got;
        len -= got;
        offset += got;
    }
    return 0;
}

int zrp_pwrite_all(zrp_file f, const void *buf, size_t len, uint64_t offset)
{
    const unsigned char *p = buf;
    while (len > 0) {
        DWORD want = len < ZRP_IO_MAX ? (DWORD)len : ZRP_IO_MAX;
        DWORD put = 0;
        OVERLAPPED ov = at_offset(offset);
        if (!WriteFile(handle_of(f), p, want, &put, &ov))
            return last_error();
        if (put == 0)
            return -EIO;
        p += put;
        len -= put;
        offset += put;
    }
    return 0;
}

int zrp_file_size(zrp_file f, uint64_t *out)
{
    LARGE_INTEGER size;
    if (!GetFileSizeEx(handle_of(f), &size))
        return last_error();
    *out = (uint64_t)size.QuadPart;
    return 0;
}

int zrp_truncate(zrp_file f, uint64_t size)
{
    if (size > (uint64_t)INT64_MAX)
        return -EFBIG;
    FILE_END_OF_FILE_INFO eof;
    eof.EndOfFile.QuadPart = (LONGLONG)size;
    if (!SetFileInformationByHandle(handle_of(f), FileEndOfFileInfo, &eof, sizeof eof))
        return last_error();
    return 0;
}

int zrp_fsync(zrp_file f)
{
    return FlushFileBuffers(handle_of(f)) ? 0 : last_error();
}

int zrp_advise_hugepages(void *p, size_t len)
{
    /* Large pages on Windows need SeLockMemoryPrivilege and VirtualAlloc
     * with MEM_LARGE_PAGES up front: there is no hint for heap memory. */
    (void)p, (void)len;
    return -ENOTSUP;
}

int zrp_start_writeback(zrp_file f, uint64_t offset, uint64_t len)
{
    /* No range write-out without waiting for it here (FlushFileBuffers
     * waits for the whole file); the cache manager's lazy writer starts
     * write-out by itself. */
    (void)f, (void)offset, (void)len;
    return 0;
}

int zrp_advise_willneed(zrp_file f, uint64_t offset, uint64_t len)
{
    /* No readahead hint for unmapped files on Windows; the cache manager
     * reads ahead on sequential access by itself. */
    (void)f, (void)offset, (void)len;
    return 0;
}

int zrp_resident_mapped(const void *addr, uint64_t len, uint64_t *resident, uint64_t *pages)
{
    /* As zrp_resident: not visible here. */
    (void)addr, (void)len;
    *resident = *pages = 0;
    return -ENOTSUP;
}

int zrp_resident(zrp_file f, uint64_t offset, uint64_t len, uint64_t *resident, uint64_t *pages)
{
    /* The file cache's residency is not visible to a process here (the
     * working-set queries see only this process's own mappings). */
    (void)f, (void)offset, (void)len;
    *resident = *pages = 0;
    return -ENOTSUP;
}

int zrp_map_readonly(zrp_file f, uint64_t len, void **out)
{
    /* See the top of this file: a section cannot reserve past the end of
     * the file, so the caller reads with zrp_pread_all instead. */
    (void)f, (void)len;
    *out = NULL;
    return -ENOTSUP;
}

void zrp_unmap(void *p, uint64_t len)
{
    (void)len;
    if (p)
        (void)UnmapViewOfFile(p);
}

static int lock_range(zrp_file f, DWORD mode)
{
    OVERLAPPED ov;
    memset(&ov, 0, sizeof ov);
    ov.Offset = ZRP_LOCK_OFFSET_LOW;
    ov.OffsetHigh = ZRP_LOCK_OFFSET_HIGH;
    if (LockFileEx(handle_of(f), mode | LOCKFILE_FAIL_IMMEDIATELY, 0, 1, 0, &ov))
        return 0;
    DWORD err = GetLastError();
    return err == ERROR_LOCK_VIOLATION || err == ERROR_IO_PENDING ? ZRP_EBUSY : neg_win_error(err);
}

int zrp_lock_exclusive(zrp_file f) { return lock_range(f, LOCKFILE_EXCLUSIVE_LOCK); }
int zrp_lock_shared(zrp_file f) { return lock_range(f, 0); }

int zrp_unlock(zrp_file f)
{
    OVERLAPPED ov;
    memset(&ov, 0, sizeof ov);
    ov.Offset = ZRP_LOCK_OFFSET_LOW;
    ov.OffsetHigh = ZRP_LOCK_OFFSET_HIGH;
    return UnlockFileEx(handle_of(f), 0, 1, 0, &ov) ? 0 : last_error();
}

void zrp_yield(void) { (void)SwitchToThread(); }

void zrp_stdio_binary(void)
{
    (void)_setmode(_fileno(stdin), _O_BINARY);
    (void)_setmode(_fileno(stdout), _O_BINARY);
}

/* ---------------------------------------------------------- directories */

static DWORD attributes_of(const char *path)
{
    int rc;
    wchar_t *w = widen(path, &rc);
    if (!w)
        return INVALID_FILE_ATTRIBUTES;
    DWORD a = GetFileAttributesW(w);
    free(w);
    return a;
}

int zrp_path_exists(const char *path)
{
    return attributes_of(path) != INVALID_FILE_ATTRIBUTES;
}

int zrp_is_dir(const char *path)
{
    DWORD a = attributes_of(path);
    return a != INVALID_FILE_ATTRIBUTES && (a & FILE_ATTRIBUTE_DIRECTORY) != 0;
}

int zrp_mkdir(const char *path)
{
    int rc;
    wchar_t *w = widen(path, &rc);
    if (!w)
        return rc;
    BOOL ok = CreateDirectoryW(w, NULL);
    DWORD err = GetLastError();
    free(w);
    return ok ? 0 : neg_win_error(err);
}

int zrp_rmdir(const char *path)
{
    int rc;
    wchar_t *w = widen(path, &rc);
    if (!w)
        return rc;
    BOOL ok = RemoveDirectoryW(w);
    DWORD err = GetLastError();
    free(w);
    return ok ? 0 : neg_win_error(err);
}

int zrp_is_regular_file(const char *path)
{
    DWORD a = attributes_of(path);
    return a != INVALID_FILE_ATTRIBUTES &&
           (a & (FILE_ATTRIBUTE_DIRECTORY | FILE_ATTRIBUTE_DEVICE)) == 0;
}

int zrp_list_dir(const char *path, char ***names, size_t *count)
{
    *names = NULL;
    *count = 0;
    size_t n = strlen(path);
    char *pattern = malloc(n + 3);
    if (!pattern)
        return -ENOMEM;
    memcpy(pattern, path, n);
    memcpy(pattern + n, "\\*", 3);
    int rc;
    wchar_t *w = widen(pattern, &rc);
    free(pattern);
    if (!w)
        return rc;
    WIN32_FIND_DATAW fd;
    HANDLE h = FindFirstFileW(w, &fd);
    DWORD err = GetLastError();
    free(w);
    if (h == INVALID_HANDLE_VALUE)
        return err == ERROR_FILE_NOT_FOUND ? 0 : neg_win_error(err);
    char **list = NULL;
    size_t used = 0, cap = 0;
    rc = 0;
    do {
        if (!wcscmp(fd.cFileName, L".") || !wcscmp(fd.cFileName, L".."))
            continue;
        int len = WideCharToMultiByte(CP_UTF8, 0, fd.cFileName, -1, NULL, 0, NULL, NULL);
        char *name = len > 0 ? malloc((size_t)len) : NULL;
        if (!name || WideCharToMultiByte(CP_UTF8, 0, fd.cFileName, -1, name, len, NULL, NULL) <= 0) {
            free(name);
            rc = -ENOMEM;
            break;
        }
        if (used == cap) {
            size_t ncap = cap ? 2 * cap : 16;
            char **grown = realloc(list, ncap * sizeof *grown);
            if (!grown) {
                free(name);
                rc = -ENOMEM;
                break;
            }
            list = grown;
            cap = ncap;
        }
        list[used++] = name;
    } while (FindNextFileW(h, &fd));
    FindClose(h);
    if (rc < 0) {
        zrp_free_names(list, used);
        return rc;
    }
    *names = list;
    *count = used;
    return 0;
}

int zrp_is_path_sep(char c) { return c == '/' || c == '\\'; }

int zrp_unlink(const char *path)
{
    int rc;
    wchar_t *w = widen(path, &rc);
    if (!w)
        return rc;
    BOOL ok = DeleteFileW(w);
    DWORD err = GetLastError();
    free(w);
    return ok ? 0 : neg_win_error(err);
}

int zrp_fsync_dir(const char *path)
{
    /* Nothing to flush (see the top of this file); the directory must
     * still exist, as for the POSIX call. */
    return zrp_is_dir(path) ? 0 : (zrp_path_exists(path) ? -ENOTDIR : -ENOENT);
}

int zrp_write_file_atomic(const char *path, const void *buf, size_t len)
{
    size_t n = strlen(path);
    char *tmp = malloc(n + 32);
    if (!tmp)
        return -ENOMEM;
    snprintf(tmp, n + 32, "%s.tmp.%lu", path, (unsigned long)GetCurrentProcessId());
    zrp_file f;
    int rc = zrp_create_fresh(&f, tmp); /* never written through a stale file or link */
    if (rc < 0)
        goto out;
    rc = zrp_pwrite_all(f, buf, len, 0);
    if (rc == 0)
        rc = zrp_fsync(f);
    int crc = zrp_close(&f);
    if (rc == 0)
        rc = crc;
    if (rc == 0) {
        wchar_t *wtmp = widen(tmp, &rc);
        wchar_t *wpath = wtmp ? widen(path, &rc) : NULL;
        if (wtmp && wpath &&
            !MoveFileExW(wtmp, wpath, MOVEFILE_REPLACE_EXISTING | MOVEFILE_WRITE_THROUGH))
            rc = last_error();
        free(wtmp);
        free(wpath);
    }
    if (rc < 0)
        (void)zrp_unlink(tmp);
out:
    free(tmp);
    return rc;
}

int zrp_rename(const char *from, const char *to)
{
    int rc = 0;
    wchar_t *wfrom = widen(from, &rc);
    wchar_t *wto = wfrom ? widen(to, &rc) : NULL;
    if (wfrom && wto && !MoveFileExW(wfrom, wto, MOVEFILE_REPLACE_EXISTING))
        rc = last_error();
    free(wfrom);
    free(wto);
    return rc;
}

int zrp_touch(const char *path)
{
    int rc = 0;
    wchar_t *w = widen(path, &rc);
    if (!w)
        return rc;
    HANDLE h = CreateFileW(w, FILE_WRITE_ATTRIBUTES, FILE_SHARE_READ | FILE_SHARE_WRITE |
                           FILE_SHARE_DELETE, NULL, OPEN_EXISTING, FILE_ATTRIBUTE_NORMAL, NULL);
    free(w);
    if (h == INVALID_HANDLE_VALUE)
        return last_error();
    FILETIME now;
    GetSystemTimeAsFileTime(&now);
    if (!SetFileTime(h, NULL, NULL, &now))
        rc = last_error();
    CloseHandle(h);
    return rc;
}

int zrp_stat(const char *path, uint64_t *size, uint64_t *mtime_ns)
{
    int rc = 0;
    wchar_t *w = widen(path, &rc);
    if (!w)
        return rc;
    WIN32_FILE_ATTRIBUTE_DATA a;
    BOOL ok = GetFileAttributesExW(w, GetFileExInfoStandard, &a);
    free(w);
    if (!ok)
        return last_error();
    if (a.dwFileAttributes & (FILE_ATTRIBUTE_DIRECTORY | FILE_ATTRIBUTE_DEVICE))
        return ZRP_ENOTREG;
    if (size)
        *size = (uint64_t)a.nFileSizeHigh << 32 | a.nFileSizeLow;
    /* FILETIME: 100 ns ticks since 1601; the Unix epoch is 11644473600 s later. */
    uint64_t t = (uint64_t)a.ftLastWriteTime.dwHighDateTime << 32 | a.ftLastWriteTime.dwLowDateTime;
    if (mtime_ns)
        *mtime_ns = t >= UINT64_C(116444736000000000)
                        ? (t - UINT64_C(116444736000000000)) * 100u : 0;
    return 0;
}

long zrp_pid(void) { return (long)GetCurrentProcessId(); }

int zrp_pid_alive(long pid)
{
    if (pid <= 0)
        return -1;
    HANDLE h = OpenProcess(PROCESS_QUERY_LIMITED_INFORMATION, FALSE, (DWORD)pid);
    if (!h)
        return GetLastError() == ERROR_INVALID_PARAMETER ? 0 : -1;
    DWORD code = 0;
    int alive = GetExitCodeProcess(h, &code) ? code == STILL_ACTIVE : -1;
    CloseHandle(h);
    return alive;
}

/* -------------------------------------------------------------- threads */

typedef struct thread_start {
    void (*fn)(void *);
    void *arg;
} thread_start;

static DWORD WINAPI thread_trampoline(LPVOID p)
{
    thread_start s = *(thread_start *)p;
    free(p);
    s.fn(s.arg);
    return 0;
}

int zrp_thread_start(zrp_thread *t, void (*fn)(void *), void *arg)
{
    thread_start *s = malloc(sizeof *s);
    if (!s)
        return -ENOMEM;
    s->fn = fn;
    s->arg = arg;
    HANDLE h = CreateThread(NULL, 0, thread_trampoline, s, 0, NULL);
    if (!h) {
        int rc = last_error();
        free(s);
        return rc == -EIO ? -EAGAIN : rc;
    }
    t->handle = (uintptr_t)h;
    return 0;
}

int zrp_thread_join(zrp_thread t)
{
    HANDLE h = (HANDLE)t.handle;
    DWORD w = WaitForSingleObject(h, INFINITE);
    int rc = w == WAIT_OBJECT_0 ? 0 : last_error();
    CloseHandle(h);
    return rc;
}

static SRWLOCK *srw(zrp_mutex *m) { return (SRWLOCK *)(void *)m->opaque; }
static CONDITION_VARIABLE *cv(zrp_cond *c) { return (CONDITION_VARIABLE *)(void *)c->opaque; }

int zrp_mutex_init(zrp_mutex *m)
{
    InitializeSRWLock(srw(m));
    return 0;
}
void zrp_mutex_destroy(zrp_mutex *m) { (void)m; /* an SRW lock holds no resources */ }
void zrp_mutex_lock(zrp_mutex *m) { AcquireSRWLockExclusive(srw(m)); }
void zrp_mutex_unlock(zrp_mutex *m) { ReleaseSRWLockExclusive(srw(m)); }

int zrp_cond_init(zrp_cond *c)
{
    InitializeConditionVariable(cv(c));
    return 0;
}
void zrp_cond_destroy(zrp_cond *c) { (void)c; }
void zrp_cond_wait(zrp_cond *c, zrp_mutex *m)
{
    (void)SleepConditionVariableSRW(cv(c), srw(m), INFINITE, 0);
}
int zrp_cond_timedwait(zrp_cond *c, zrp_mutex *m, uint64_t timeout_ns)
{
    uint64_t ms = (timeout_ns + 999999u) / 1000000u;
    DWORD wait = ms >= INFINITE ? INFINITE - 1 : (DWORD)ms;
    if (SleepConditionVariableSRW(cv(c), srw(m), wait, 0))
        return 0;
    return GetLastError() == ERROR_TIMEOUT ? 1 : 0;
}

void zrp_cond_signal(zrp_cond *c) { WakeConditionVariable(cv(c)); }
void zrp_cond_broadcast(zrp_cond *c) { WakeAllConditionVariable(cv(c)); }

unsigned zrp_cpu_count(void)
{
    /* The process affinity mask covers one processor group (64 CPUs); on a
     * machine with more groups, count every active processor instead. */
    DWORD_PTR proc = 0, sys = 0;
    if (GetActiveProcessorGroupCount() <= 1 && GetProcessAffinityMask(GetCurrentProcess(), &proc, &sys)) {
        unsigned n = 0;
        for (; proc; proc &= proc - 1)
            n++;
        if (n > 0)
            return n;
    }
    DWORD all = GetActiveProcessorCount(ALL_PROCESSOR_GROUPS);
    return all > 0 ? (unsigned)all : 1u;
}

uint64_t zrp_physical_memory(void)
{
    MEMORYSTATUSEX ms;
    ms.dwLength = sizeof ms;
    return GlobalMemoryStatusEx(&ms) ? (uint64_t)ms.ullTotalPhys : 0;
}

uint64_t zrp_now_ns(void)
{
    static LARGE_INTEGER freq; /* constant after boot; racing writers store the same value */
    if (freq.QuadPart == 0)
        QueryPerformanceFrequency(&freq);
    LARGE_INTEGER now;
    QueryPerformanceCounter(&now);
    uint64_t ticks = (uint64_t)now.QuadPart, hz = (uint64_t)freq.QuadPart;
    return ticks / hz * UINT64_C(1000000000) + ticks % hz * UINT64_C(1000000000) / hz;
}

/* ------------------------------------------------------------ processes */

/* Append `arg` to the command line at *cmd (length *len, capacity *cap),
 * quoted so that the CRT's argv parser gives `arg` back: inside quotes,
 * backslashes before a '"' (or the closing quote) are doubled and '"' is
 * escaped. */
static int append_arg(wchar_t **cmd, size_t *len, size_t *cap, const char *arg)
{
    int rc;
    wchar_t *w = widen(arg, &rc);
    if (!w)
        return rc;
    size_t n = wcslen(w);
    size_t need = *len + 2 * n + 4;
    if (need > *cap) {
        size_t ncap = need * 2;
        wchar_t *grown = realloc(*cmd, ncap * sizeof **cmd);
        if (!grown) {
            free(w);
            return -ENOMEM;
        }
        *cmd = grown;
        *cap = ncap;
    }
    wchar_t *out = *cmd + *len;
    if (*len > 0)
        *out++ = L' ';
    *out++ = L'"';
    size_t slashes = 0;
    for (size_t i = 0; i < n; i++) {
        if (w[i] == L'\\') {
            slashes++;
        } else {
            if (w[i] == L'"')
                for (size_t k = 0; k <= slashes; k++)
                    *out++ = L'\\';
            slashes = 0;
        }
        *out++ = w[i];
    }
    for (size_t k = 0; k < slashes; k++)
        *out++ = L'\\';
    *out++ = L'"';
    *out = L'\0';
    *len = (size_t)(out - *cmd);
    free(w);
    return 0;
}

int zrp_run_wait(const char *const *argv, unsigned timeout_s, int *exit_code, int *crashed)
{
    *exit_code = 0;
    *crashed = 0;
    wchar_t *cmd = NULL;
    size_t len = 0, cap = 0;
    int rc = 0;
    for (size_t i = 0; argv[i] && rc == 0; i++)
        rc = append_arg(&cmd, &len, &cap, argv[i]);
    if (rc < 0 || !cmd) {
        free(cmd);
        return rc < 0 ? rc : -EINVAL;
    }
    STARTUPINFOW si;
    memset(&si, 0, sizeof si);
    si.cb = sizeof si;
    PROCESS_INFORMATION pi;
    /* No application name: CreateProcess then searches PATH for argv[0]
     * (adding ".exe"), as execvp does. */
    if (!CreateProcessW(NULL, cmd, NULL, NULL, TRUE, 0, NULL, NULL, &si, &pi)) {
        rc = last_error();
        free(cmd);
        return rc;
    }
    free(cmd);
    CloseHandle(pi.hThread);
    DWORD code = 1;
    DWORD w = WaitForSingleObject(pi.hProcess, timeout_s ? (DWORD)timeout_s * 1000u : INFINITE);
    if (w == WAIT_TIMEOUT) {
        TerminateProcess(pi.hProcess, 1);
        WaitForSingleObject(pi.hProcess, INFINITE);
        CloseHandle(pi.hProcess);
        *crashed = 2;
        *exit_code = 1;
        return 0;
    }
    if (w != WAIT_OBJECT_0 || !GetExitCodeProcess(pi.hProcess, &code))
        rc = last_error();
    CloseHandle(pi.hProcess);
    if (rc < 0)
        return rc;
    /* An unhandled exception ends a process with its NTSTATUS code
     * (0xC0000005 access violation, 0xC0000409 abort/fast-fail, ...). */
    *crashed = (code & 0xF0000000u) == 0xC0000000u;
    *exit_code = (int)code;
    return 0;
}

int zrp_exec(const char *const *argv, int *exit_code)
{
    /* No exec on Windows: run it, and let the caller exit with its status
     * (an unhandled exception's NTSTATUS code included). */
    int crashed = 0;
    return zrp_run_wait(argv, 0, exit_code, &crashed);
}

int zrp_self_exe(char *buf, size_t cap)
{
    wchar_t w[32768];
    DWORD n = GetModuleFileNameW(NULL, w, (DWORD)(sizeof w / sizeof w[0]));
    if (n == 0 || n >= sizeof w / sizeof w[0])
        return -ERANGE;
    if (cap > (size_t)INT32_MAX)
        cap = INT32_MAX;
    int got = WideCharToMultiByte(CP_UTF8, 0, w, (int)n + 1, buf, (int)cap, NULL, NULL);
    return got > 0 ? 0 : -ERANGE;
}

/* ------------------------------------------------------------ terminals */

int zrp_is_terminal(int fd)
{
    DWORD which = fd == 0 ? STD_INPUT_HANDLE : fd == 1 ? STD_OUTPUT_HANDLE : STD_ERROR_HANDLE;
    HANDLE h = GetStdHandle(which);
    DWORD mode;
    return h != NULL && h != INVALID_HANDLE_VALUE && GetFileType(h) == FILE_TYPE_CHAR &&
           GetConsoleMode(h, &mode);
}

void zrp_sleep_ms(unsigned ms) { Sleep(ms); }

/* ---------------------------------------------------------- randomness */

int zrp_random_bytes(void *buf, size_t len)
{
    unsigned char *p = buf;
    while (len > 0) {
        unsigned int v;
        if (rand_s(&v) != 0)
            return -EIO;
        size_t n = len < sizeof v ? len : sizeof v;
        memcpy(p, &v, n);
        p += n;
        len -= n;
    }
    return 0;
}
