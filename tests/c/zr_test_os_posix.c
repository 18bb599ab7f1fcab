/*
 * zr_test_os_posix.c - the POSIX half of the test helpers' OS calls (see
 * zr_test_util.h): mkdir, mkdtemp, and nftw to remove a tree.
 */
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "zr_test_util.h"

int zt_os_mkdir(const char *path) { return mkdir(path, 0777); }

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
