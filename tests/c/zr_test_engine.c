/*
 * zr_test_engine.c - see zr_test_engine.h.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "zr_test_engine.h"

void zt_make_fixed(const char *path, zre_codec codec, uint64_t n, uint64_t rec, zt_fill_fn fill)
{
    zre_engine *e = NULL;
    assert_int_equal(zre_create(&e, path, codec), ZR_OK);
    unsigned char *buf = malloc(n * rec);
    assert_non_null(buf);
    for (uint64_t i = 0; i < n; i++)
        fill(buf + i * rec, i, rec);
    assert_int_equal(zre_append(e, buf, rec, NULL, n, NULL), ZR_OK);
    assert_int_equal(zre_close(e), ZR_OK);
    free(buf);
}
