/*
 * zr_test_engine.h - helpers shared by the cmocka suites that link
 * libzrengine (test only: compiled into each such suite, never installed).
 * Include it after <cmocka.h>; helpers fail through cmocka, so they may
 * only be called from inside a running test.
 */
#ifndef ZR_TEST_ENGINE_H
#define ZR_TEST_ENGINE_H

#include <stdint.h>

#include "zrengine.h"

/* Writes the n bytes of record i at p (a suite's own record pattern). */
typedef void (*zt_fill_fn)(unsigned char *p, uint64_t i, uint64_t n);

/* Create the engine store `path` (codec `codec`) holding n records of
 * rec bytes each, record i filled by fill(p, i, rec), in one append, and
 * close it. Fails the test on any error. */
void zt_make_fixed(const char *path, zre_codec codec, uint64_t n, uint64_t rec, zt_fill_fn fill);

#endif /* ZR_TEST_ENGINE_H */
