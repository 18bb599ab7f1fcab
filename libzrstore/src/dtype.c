/*
 * dtype.c - the closed dtype set (numpy's dtype.str forms) and versions.
 */
#include <string.h>

#include "zrs_internal.h"

#ifndef ZRSTORE_VERSION_STRING
#error "ZRSTORE_VERSION_STRING must be passed by the build"
#endif

typedef struct dtype_info {
    const char *str;
    size_t itemsize;
} dtype_info;

/* Indexed by zrs_dtype; order must follow the enum. */
static const dtype_info DTYPES[ZRS_DTYPE_COUNT] = {
    [ZRS_BOOL] = {"|b1", 1},       [ZRS_INT8] = {"|i1", 1},
    [ZRS_INT16] = {"<i2", 2},      [ZRS_INT32] = {"<i4", 4},
    [ZRS_INT64] = {"<i8", 8},      [ZRS_UINT8] = {"|u1", 1},
    [ZRS_UINT16] = {"<u2", 2},     [ZRS_UINT32] = {"<u4", 4},
    [ZRS_UINT64] = {"<u8", 8},     [ZRS_FLOAT16] = {"<f2", 2},
    [ZRS_FLOAT32] = {"<f4", 4},    [ZRS_FLOAT64] = {"<f8", 8},
    [ZRS_COMPLEX64] = {"<c8", 8},  [ZRS_COMPLEX128] = {"<c16", 16},
};

/* Every accepted string, for error messages. */
#define ZRS_DTYPES_ACCEPTED \
    "|b1 |i1 <i2 <i4 <i8 |u1 <u2 <u4 <u8 <f2 <f4 <f8 <c8 <c16"

unsigned zrstore_version(void) { return ZRSTORE_VERSION_NUMBER; }

const char *zrstore_version_string(void) { return ZRSTORE_VERSION_STRING; }

int zrs_dtype_parse(const char *str, zrs_dtype *out)
{
    if (str == NULL || out == NULL)
        return zr_set_error(ZR_EINVAL, "dtype: NULL %s",
                            str == NULL ? "string" : "output");
    for (int i = 0; i < ZRS_DTYPE_COUNT; i++) {
        if (strcmp(str, DTYPES[i].str) == 0) {
            *out = (zrs_dtype)i;
            return ZR_OK;
        }
    }
    /* Bound the echo so a huge or binary string cannot flood the message. */
    return zr_set_error(ZR_EINVAL,
                        "dtype: unsupported dtype '%.40s'; accepted: "
                        ZRS_DTYPES_ACCEPTED, str);
}

const char *zrs_dtype_str(zrs_dtype dtype)
{
    if ((int)dtype < 0 || (int)dtype >= ZRS_DTYPE_COUNT)
        return NULL;
    return DTYPES[dtype].str;
}

size_t zrs_dtype_itemsize(zrs_dtype dtype)
{
    if ((int)dtype < 0 || (int)dtype >= ZRS_DTYPE_COUNT)
        return 0;
    return DTYPES[dtype].itemsize;
}
