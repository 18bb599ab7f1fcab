/*
 * zr_test_os_posix.c - the POSIX half of the test helpers' OS calls (see
 * zr_test_util.h): mkdir, mkdtemp, nftw to remove a tree, and a page-cache
 * eviction.
 */
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "zr_test_util.h"

int zt_os_mkdir(const char *path) { return mkdir(path, 0777); }

int zt_os_evict(const char *path)
{
#if defined(POSIX_FADV_DONTNEED)
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return -1;
    int rc = fsync(fd) == 0 && posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED) == 0 ? 0 : -1;
    close(fd);
    return rc;
#else
    (void)path;
    return -1;
#endif
}

int zt_os_thp_madvise(void)
{
#if defined(__linux__)
    char mode[128] = {0};
    FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
    if (f == NULL) return 0; /* a kernel built without THP */
    size_t got = fread(mode, 1, sizeof mode - 1, f);
    fclose(f);
    if (got == 0) return -1;
    return strstr(mode, "[never]") ? 0 : 1;
#else
    return 0;
#endif
}

long zt_os_pid(void) { return (long)getpid(); }

int zt_os_mkdtemp(char *templ) { return mkdtemp(templ) ? 0 : -1; }

static int rm_entry(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb, (void)flag, (void)ftw;
    return remove(p);
}

int zt_rmtree(const char *dir)
{
    return nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}
