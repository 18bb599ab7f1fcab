/*
 * zr_platform_common.c - the parts of zr_platform.h that are the same on
 * every OS: built only from the other zrp_ calls, compiled in beside
 * zr_platform_posix.c or zr_platform_win32.c.
 */
#include "zr_platform.h"

#include <errno.h>
#include <stdlib.h>

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
