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
    const char *name; /* numpy's name of the type */
} dtype_info;

/* Indexed by zrs_dtype; order must follow the enum. */
static const dtype_info DTYPES[ZRS_DTYPE_COUNT] = {
    [ZRS_BOOL] = {"|b1", 1, "bool"},          [ZRS_INT8] = {"|i1", 1, "int8"},
    [ZRS_INT16] = {"<i2", 2, "int16"},        [ZRS_INT32] = {"<i4", 4, "int32"},
    [ZRS_INT64] = {"<i8", 8, "int64"},        [ZRS_UINT8] = {"|u1", 1, "uint8"},
    [ZRS_UINT16] = {"<u2", 2, "uint16"},      [ZRS_UINT32] = {"<u4", 4, "uint32"},
    [ZRS_UINT64] = {"<u8", 8, "uint64"},      [ZRS_FLOAT16] = {"<f2", 2, "float16"},
    [ZRS_FLOAT32] = {"<f4", 4, "float32"},    [ZRS_FLOAT64] = {"<f8", 8, "float64"},
    [ZRS_COMPLEX64] = {"<c8", 8, "complex64"}, [ZRS_COMPLEX128] = {"<c16", 16, "complex128"},
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

int zrs_dtype_from_name(const char *name, zrs_dtype *out, int *big_endian)
{
    if (name == NULL || out == NULL)
        return zr_set_error(ZR_EINVAL, "dtype: NULL %s", name == NULL ? "name" : "output");
    const uint16_t probe = 1;
    const int host_big = *(const unsigned char *)&probe == 0;
    int big = 0;
    const char *code = name;
    for (int i = 0; i < ZRS_DTYPE_COUNT; i++) {
        if (strcmp(name, DTYPES[i].name) == 0) {
            *out = (zrs_dtype)i;
            if (big_endian != NULL) *big_endian = 0;
            return ZR_OK;
        }
    }
    char order = name[0] == '<' || name[0] == '>' || name[0] == '=' || name[0] == '|' ? name[0] : 0;
    if (order != 0) code++;
    big = order == '>' || (order == '=' && host_big);
    for (int i = 0; i < ZRS_DTYPE_COUNT; i++) {
        const char *c = DTYPES[i].str + 1; /* "f4", "u1", ... */
        if (strcmp(code, c) != 0) continue;
        if (DTYPES[i].itemsize == 1) {
            big = 0; /* one byte: every order names the same type */
        } else if (order == '|') {
            break; /* '|' only for one-byte types */
        }
        if (big && big_endian == NULL)
            return zr_set_error(ZR_EINVAL, "dtype: '%.40s' is big-endian; records are stored "
                                "little-endian (%s)", name, DTYPES[i].str);
        *out = (zrs_dtype)i;
        if (big_endian != NULL) *big_endian = big;
        return ZR_OK;
    }
    return zr_set_error(ZR_EINVAL,
                        "dtype: unsupported dtype '%.40s'; accepted: " ZRS_DTYPES_ACCEPTED
                        " or a name (bool, int8, ..., uint64, float16, float32, float64, "
                        "complex64, complex128), or a code without the byte order (f4)",
                        name);
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
