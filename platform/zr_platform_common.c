/*
 * zr_platform_common.c - the parts of zr_platform.h that are the same on
 * every OS: built only from the other zrp_ calls, compiled in beside
 * zr_platform_posix.c or zr_platform_win32.c.
 */
#include "zr_platform.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* The list zrp_list_dir made, on every OS. */
void zrp_free_names(char **names, size_t count)
{
    for (size_t i = 0; names && i < count; i++)
        free(names[i]);
    free(names);
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
    /* Create each prefix ending just before a separator, then the whole
     * path. A prefix that is a root (or, on Windows, a drive "C:") exists
     * already. */
    for (size_t i = 1; i <= n && rc == 0; i++) {
        if (i < n && !zrp_is_path_sep(buf[i]))
            continue;
        if (i < n && zrp_is_path_sep(buf[i - 1]))
            continue; /* repeated separators */
        char saved = buf[i];
        buf[i] = '\0';
        int mrc = zrp_mkdir(buf);
        if (mrc < 0 && !zrp_is_dir(buf))
            rc = mrc == -EEXIST ? -ENOTDIR : mrc;
        buf[i] = saved;
    }
    free(buf);
    return rc;
}

int zrp_create_fresh(zrp_file *out, const char *path)
{
    int rc = zrp_open(out, path, ZRP_WRITE | ZRP_CREATE | ZRP_EXCLUSIVE);
    if (rc == -EEXIST) {
        rc = zrp_unlink(path);
        if (rc == 0)
            rc = zrp_open(out, path, ZRP_WRITE | ZRP_CREATE | ZRP_EXCLUSIVE);
    }
    return rc;
}

int zrp_read_file(const char *path, void **out, size_t *len, size_t max_len)
{
    *out = NULL;
    *len = 0;
    zrp_file f;
    int rc = zrp_open(&f, path, ZRP_READ);
    if (rc < 0)
        return rc;
    uint64_t size = 0;
    rc = zrp_file_size(f, &size);
    if (rc == 0 && size > max_len)
        rc = -EFBIG;
    void *buf = NULL;
    if (rc == 0) {
        buf = malloc(size ? (size_t)size : 1);
        if (!buf)
            rc = -ENOMEM;
    }
    if (rc == 0)
        rc = zrp_pread_all(f, buf, (size_t)size, 0);
    zrp_close(&f);
    if (rc < 0) {
        free(buf);
        return rc;
    }
    *out = buf;
    *len = (size_t)size;
    return 0;
}

const char *zrp_fp_kind_name(zrp_fp_kind kind)
{
    static const char *const names[ZRP_FP_KINDS] = {"open", "pread", "pwrite", "fsync", "ftruncate",
                                                    "rename", "unlink", "mmap", "mkdir"};
    return (unsigned)kind < ZRP_FP_KINDS ? names[kind] : "?";
}

/* The failpoints without ZRP_FAILPOINTS: the documented no-ops
 * (zrp_fp_enabled() == 0). Only the POSIX file implements the real ones
 * (its test-only build), so the fault sweep and the power-loss simulation
 * are POSIX suites. */
#ifndef ZRP_FAILPOINTS
int zrp_fp_enabled(void) { return 0; }
void zrp_fp_arm(zrp_fp_kind kind, uint64_t nth, int err, int sticky)
{
    (void)kind, (void)nth, (void)err, (void)sticky;
}
void zrp_fp_reset(void) {}
uint64_t zrp_fp_count(zrp_fp_kind kind) { (void)kind; return 0; }
uint64_t zrp_fp_injected(void) { return 0; }
void zrp_fp_observe(void (*fn)(const zrp_fp_event *, void *), void *arg) { (void)fn, (void)arg; }
#endif
