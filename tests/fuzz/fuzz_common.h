/*
 * fuzz_common.h - shared by the libFuzzer harnesses: a private scratch
 * directory per process (on tmpfs when there is one).
 */
#ifndef ZR_FUZZ_COMMON_H
#define ZR_FUZZ_COMMON_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static inline const char *fuzz_scratch(void)
{
    static char dir[256];
    if (!dir[0]) {
        struct stat st;
        const char *base = stat("/dev/shm", &st) == 0 && S_ISDIR(st.st_mode) ? "/dev/shm" : "/tmp";
        snprintf(dir, sizeof dir, "%s/zr-fuzz-%ld", base, (long)getpid());
        mkdir(dir, 0700);
    }
    return dir;
}

static inline void fuzz_write(const char *path, const void *buf, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        abort();
    if (n && fwrite(buf, 1, n, f) != n)
        abort();
    fclose(f);
}

#endif
