/*
 * zr_test_os_win32.c - the Windows half of the test helpers' OS calls (see
 * zr_test_util.h): CreateDirectory, a mkdtemp of our own, and a recursive
 * FindFirstFile walk to remove a tree.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define WIN32_LEAN_AND_MEAN
#include <windows.h>

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "zr_test_util.h"

int zt_os_mkdir(const char *path)
{
    if (CreateDirectoryA(path, NULL))
        return 0;
    DWORD a = GetFileAttributesA(path);
    DWORD err = GetLastError();
    errno = (err == ERROR_ALREADY_EXISTS ||
             (a != INVALID_FILE_ATTRIBUTES && (a & FILE_ATTRIBUTE_DIRECTORY))) ? EEXIST : EIO;
    return -1;
}

int zt_os_evict(const char *path)
{
    (void)path; /* no call drops another file's cached pages here */
    return -1;
}

int zt_os_thp_madvise(void) { return 0; /* no huge-page hint for heap memory */ }

long zt_os_pid(void) { return (long)GetCurrentProcessId(); }

int zt_os_mkdtemp(char *templ)
{
    size_t n = strlen(templ);
    if (n < 6 || strcmp(templ + n - 6, "XXXXXX") != 0)
        return -1;
    static const char digits[] = "abcdefghijklmnopqrstuvwxyz0123456789";
    uint64_t s = ((uint64_t)GetCurrentProcessId() << 32) ^ (uint64_t)GetTickCount64();
    for (int attempt = 0; attempt < 100; attempt++) {
        for (int i = 0; i < 6; i++)
            templ[n - 6 + i] = digits[zt_splitmix64(&s) % 36];
        if (CreateDirectoryA(templ, NULL))
            return 0;
        if (GetLastError() != ERROR_ALREADY_EXISTS)
            return -1;
    }
    return -1;
}

int zt_rmtree(const char *dir)
{
    size_t n = strlen(dir);
    char *pat = malloc(n + 3);
    if (!pat)
        return -1;
    snprintf(pat, n + 3, "%s/*", dir);
    WIN32_FIND_DATAA fd;
    HANDLE h = FindFirstFileA(pat, &fd);
    free(pat);
    int rc = 0;
    if (h != INVALID_HANDLE_VALUE) {
        do {
            if (strcmp(fd.cFileName, ".") == 0 || strcmp(fd.cFileName, "..") == 0)
                continue;
            size_t m = n + strlen(fd.cFileName) + 2;
            char *p = malloc(m);
            if (!p) {
                rc = -1;
                break;
            }
            snprintf(p, m, "%s/%s", dir, fd.cFileName);
            /* A directory symlink or junction is removed, not followed. */
            if ((fd.dwFileAttributes & FILE_ATTRIBUTE_DIRECTORY) &&
                !(fd.dwFileAttributes & FILE_ATTRIBUTE_REPARSE_POINT))
                rc |= zt_rmtree(p);
            else if (fd.dwFileAttributes & FILE_ATTRIBUTE_DIRECTORY)
                rc |= RemoveDirectoryA(p) ? 0 : -1;
            else
                rc |= DeleteFileA(p) ? 0 : -1;
            free(p);
        } while (FindNextFileA(h, &fd));
        FindClose(h);
    }
    return RemoveDirectoryA(dir) ? rc : -1;
}
