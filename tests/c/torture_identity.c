/*
 * torture_identity.c - the store's uuid under failures: a delete writes a
 * new uuid to store.zr (temporary file, fsync, rename, directory fsync)
 * before the engine moves any record. Every call of each kind those steps
 * and the delete make is failed in turn (the failpoint platform); after
 * each, the store reopens, holds either the records before or after the
 * delete, and never the old uuid over changed records.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <zrstore.h>

#include "zr_platform.h"
#include "zr_test_util.h"

#define N 50

typedef zt_dir fixture;

static int setup(void **state) { return zt_dir_setup(state, "identity"); }

static void make(const char *path)
{
    zrs_store *s = NULL;
    assert_int_equal(zrs_create_dense(&s, path, ZRS_UINT32, NULL, 0, ZRE_CODEC_RAW), ZR_OK);
    uint32_t v[N];
    for (uint32_t i = 0; i < N; i++)
        v[i] = i;
    assert_int_equal(zrs_append_dense(s, v, sizeof v, N, NULL), ZR_OK);
    assert_int_equal(zrs_close(s), ZR_OK);
}

/* The records after deleting {3, 10} by swap-last: 10 takes 49, 3 takes 48. */
static uint32_t after_delete(uint32_t i)
{
    return i == 10 ? 49 : i == 3 ? 48 : i;
}

/* Reopen (writable: it recovers a pending journal), read every record and
 * the uuid; 0 if the store holds the records before the delete, 1 after. */
static int state_of(const char *path, uint8_t uuid[ZRS_UUID_BYTES], int *has)
{
    zrs_store *s = NULL;
    int rc = zrs_open(&s, path);
    if (rc != ZR_OK)
        fail_msg("reopen failed: %s", zr_last_error());
    uint64_t n = zrs_length(s);
    assert_true(n == N || n == N - 2);
    uint32_t got[N];
    int64_t idx[N];
    for (uint64_t i = 0; i < n; i++)
        idx[i] = (int64_t)i;
    assert_int_equal(zrs_gather_dense(s, idx, n, got, sizeof got), ZR_OK);
    for (uint32_t i = 0; i < n; i++)
        assert_int_equal(got[i], n == N ? i : after_delete(i));
    *has = zrs_get_uuid(s, uuid);
    assert_int_equal(zrs_close(s), ZR_OK);
    return n == N ? 0 : 1;
}

static void test_delete_uuid_under_faults(void **state)
{
    fixture *fx = *state;
    if (!zrp_fp_enabled())
        skip();
    const zrp_fp_kind kinds[] = {ZRP_FP_OPEN, ZRP_FP_PWRITE, ZRP_FP_FSYNC, ZRP_FP_RENAME,
                                 ZRP_FP_UNLINK};
    int runs = 0, changed_runs = 0;
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
        for (uint64_t nth = 1;; nth++) {
            char path[700];
            snprintf(path, sizeof path, "%s/s-%zu-%llu", fx->dir, k, (unsigned long long)nth);
            make(path);
            uint8_t before[ZRS_UUID_BYTES], after[ZRS_UUID_BYTES];
            int has = 0;
            assert_int_equal(state_of(path, before, &has), 0);
            assert_int_equal(has, 1);
            zrs_store *s = NULL;
            assert_int_equal(zrs_open(&s, path), ZR_OK);
            zrp_fp_reset();
            zrp_fp_arm(kinds[k], nth, -EIO, 0);
            int64_t del[2] = {3, 10};
            int rc = zrs_delete(s, del, 2);
            uint64_t injected = zrp_fp_injected();
            zrp_fp_reset();
            (void)zrs_close(s);
            int changed = state_of(path, after, &has);
            assert_int_equal(has, 1);
            if (changed) /* the rule: changed records never keep the old uuid */
                assert_memory_not_equal(before, after, ZRS_UUID_BYTES);
            if (rc == ZR_OK)
                assert_int_equal(changed, 1);
            runs++;
            changed_runs += changed;
            if (injected == 0) { /* past the last call of this kind: done */
                assert_int_equal(rc, ZR_OK);
                break;
            }
            zt_rmtree(path);
        }
    }
    assert_true(runs > 5 && changed_runs > 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_delete_uuid_under_faults, setup, zt_dir_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
