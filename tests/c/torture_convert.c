/*
 * torture_convert.c - generic streams written into new stores
 * (zld_write_stores) under failures and a crash: whatever call of each
 * kind fails (writes, syncs, renames, directories, opens), the outcome is
 * either every store complete at its path, or an error with no store at
 * its path that lacks records and no .partial left; a writer killed
 * mid-way leaves only .partial names, which the next run replaces.
 *
 * convert.c is compiled into this suite against the failpoint platform
 * and the failpoint store library (it needs nothing else of libzloader).
 * Records are pure functions of their index, so every byte is checked.
 */
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include <zloader.h>

#include "zr_platform.h"
#include "zrerror_sys.h"
#include "zr_test_util.h"

#define N 2600 /* three slices of 1024 */

typedef struct src {
    int ragged;
    uint64_t fail_at;  /* gather of this index fails (0: never) */
    uint64_t crash_at; /* gather of this index kills the process (0: never) */
} src;

static uint64_t dense_value(uint64_t i) { return i * 3 + 1; }
static uint64_t ragged_len(uint64_t i) { return i % 5; }
static double ragged_value(uint64_t i, uint64_t k) { return (double)i + (double)k / 8; }
static uint64_t ragged_size(uint64_t i) { return 16 + 8 * ragged_len(i); }

static int sizes_cb(void *user, const uint64_t *index, uint64_t count, uint64_t *sizes)
{
    (void)user;
    for (uint64_t i = 0; i < count; i++)
        sizes[i] = ragged_size(index[i]);
    return 0;
}

static int gather_cb(void *user, const uint64_t *index, uint64_t count, void *dst, uint64_t cap,
                     const uint64_t *bounds)
{
    const src *s = user;
    unsigned char *out = dst;
    for (uint64_t i = 0; i < count; i++) {
        uint64_t it = index[i];
        if (s->crash_at && it == s->crash_at)
            raise(SIGKILL);
        if (s->fail_at && it == s->fail_at)
            return zr_set_error(ZR_ECORRUPT, "item %llu is damaged", (unsigned long long)it);
        if (!s->ragged) {
            assert_true((i + 1) * 8 <= cap);
            uint64_t v = dense_value(it);
            memcpy(out + 8 * i, &v, 8);
        } else {
            assert_int_equal(bounds[i + 1] - bounds[i], ragged_size(it));
            unsigned char *p = out + bounds[i];
            uint64_t nd = 1, n = ragged_len(it);
            memcpy(p, &nd, 8);
            memcpy(p + 8, &n, 8);
            for (uint64_t k = 0; k < n; k++) {
                double d = ragged_value(it, k);
                memcpy(p + 16 + 8 * k, &d, 8);
            }
        }
    }
    return 0;
}

static src dense_src, ragged_src;
static char paths[2][1000];

static void streams(zld_stream st[2], zld_store_spec sp[2], const char *dir)
{
    memset(st, 0, 2 * sizeof *st);
    memset(sp, 0, 2 * sizeof *sp);
    snprintf(paths[0], sizeof paths[0], "%s/out/record", dir);
    snprintf(paths[1], sizeof paths[1], "%s/out/positions", dir);
    st[0] = (zld_stream){.user = &dense_src, .name = "record", .length = N, .kind = ZLD_STREAM_DENSE,
                         .record_size = 8, .gather = gather_cb};
    st[1] = (zld_stream){.user = &ragged_src, .name = "positions", .length = N,
                         .kind = ZLD_STREAM_RAGGED, .gather = gather_cb, .sizes = sizes_cb};
    sp[0] = (zld_store_spec){paths[0], ZRS_UINT64, 0, NULL};
    sp[1] = (zld_store_spec){paths[1], ZRS_FLOAT64, 0, NULL};
    ragged_src.ragged = 1;
}

/* The store at path holds every record of its stream, byte for byte. */
static void check_store(const char *path, int ragged)
{
    zrs_store *s = NULL;
    assert_int_equal(zrs_open_ex(&s, path, ZRE_OPEN_READONLY), ZR_OK);
    assert_int_equal(zrs_length(s), N);
    int64_t *idx = malloc(N * sizeof *idx);
    uint64_t *sizes = malloc(N * sizeof *sizes), *bounds = malloc((N + 1) * sizeof *bounds);
    assert_non_null(idx);
    for (uint64_t i = 0; i < N; i++)
        idx[i] = (int64_t)i;
    if (!ragged) {
        uint64_t *v = malloc(N * 8);
        assert_int_equal(zrs_gather_dense(s, idx, N, v, N * 8), ZR_OK);
        for (uint64_t i = 0; i < N; i++)
            assert_int_equal(v[i], dense_value(i));
        free(v);
    } else {
        assert_int_equal(zrs_ragged_sizes(s, idx, N, sizes), ZR_OK);
        bounds[0] = 0;
        for (uint64_t i = 0; i < N; i++) {
            assert_int_equal(sizes[i], ragged_size(i));
            bounds[i + 1] = bounds[i] + sizes[i];
        }
        unsigned char *buf = malloc(bounds[N]);
        assert_int_equal(zrs_gather_ragged(s, idx, N, buf, bounds[N], bounds), ZR_OK);
        for (uint64_t i = 0; i < N; i++) {
            uint64_t n;
            memcpy(&n, buf + bounds[i] + 8, 8);
            assert_int_equal(n, ragged_len(i));
            for (uint64_t k = 0; k < n; k++) {
                double d;
                memcpy(&d, buf + bounds[i] + 16 + 8 * k, 8);
                assert_true(d == ragged_value(i, k));
            }
        }
        free(buf);
    }
    free(idx);
    free(sizes);
    free(bounds);
    assert_int_equal(zrs_close(s), ZR_OK);
}

static int partial_exists(int k)
{
    char p[2100];
    snprintf(p, sizeof p, "%s.partial", paths[k]);
    return zt_exists(p);
}

static int setup(void **state) { return zt_dir_setup(state, "convert"); }

static void test_writes_every_record(void **state)
{
    zt_dir *d = *state;
    zld_stream st[2];
    zld_store_spec sp[2];
    streams(st, sp, d->dir);
    for (int codec = ZLD_CODEC_AUTO; codec <= ZRE_CODEC_ZSTD; codec++) {
        char sub[900];
        snprintf(sub, sizeof sub, "%s/c%d", d->dir, codec + 1);
        streams(st, sp, sub);
        assert_int_equal(zld_write_stores(st, sp, 2, codec), ZR_OK);
        check_store(paths[0], 0);
        check_store(paths[1], 1);
        assert_false(partial_exists(0) || partial_exists(1));
        /* a second run refuses the existing stores and leaves them whole */
        assert_int_equal(zld_write_stores(st, sp, 2, codec), ZR_EEXIST);
        assert_non_null(strstr(zr_last_error(), "record exists"));
        check_store(paths[0], 0);
    }
    assert_int_equal(zld_write_stores(st, sp, 2, ZRE_CODEC_ZSTD_DICT), ZR_EINVAL);
}

/* A stream failing in its third slice: its error with the store named,
 * nothing at a final path, no .partial left. */
static void test_stream_error_leaves_nothing(void **state)
{
    zt_dir *d = *state;
    zld_stream st[2];
    zld_store_spec sp[2];
    streams(st, sp, d->dir);
    ragged_src.fail_at = 2500;
    int rc = zld_write_stores(st, sp, 2, ZRE_CODEC_ZSTD);
    ragged_src.fail_at = 0;
    assert_int_equal(rc, ZR_ECORRUPT);
    assert_non_null(strstr(zr_last_error(), "positions (stream positions): item 2500 is damaged"));
    for (int k = 0; k < 2; k++)
        assert_false(zt_exists(paths[k]) || partial_exists(k));
}

/* Every call of each kind failed in turn. */
static void test_fault_sweep(void **state)
{
    zt_dir *d = *state;
    static const zrp_fp_kind kinds[] = {ZRP_FP_OPEN, ZRP_FP_PWRITE, ZRP_FP_FSYNC, ZRP_FP_RENAME,
                                        ZRP_FP_MKDIR, ZRP_FP_FTRUNCATE};
    zld_stream st[2];
    zld_store_spec sp[2];
    assert_true(zrp_fp_enabled());
    for (size_t kk = 0; kk < sizeof kinds / sizeof kinds[0]; kk++) {
        char sub[900];
        snprintf(sub, sizeof sub, "%s/clean%zu", d->dir, kk);
        streams(st, sp, sub);
        zrp_fp_reset();
        assert_int_equal(zld_write_stores(st, sp, 2, ZRE_CODEC_RAW), ZR_OK);
        uint64_t calls = zrp_fp_count(kinds[kk]);
        uint64_t failed = 0;
        for (uint64_t k = 1; k <= calls; k++) {
            snprintf(sub, sizeof sub, "%s/k%zu-%llu", d->dir, kk, (unsigned long long)k);
            streams(st, sp, sub);
            zrp_fp_reset();
            zrp_fp_arm(kinds[kk], k, -EIO, 0);
            int rc = zld_write_stores(st, sp, 2, ZRE_CODEC_RAW);
            zrp_fp_reset();
            for (int j = 0; j < 2; j++) {
                /* a store at its path is complete; nothing half written stays */
                if (zt_exists(paths[j]))
                    check_store(paths[j], j);
                assert_false(partial_exists(j));
            }
            if (rc == ZR_OK) {
                assert_true(zt_exists(paths[0]) && zt_exists(paths[1]));
            } else {
                failed++;
                assert_true(strlen(zr_last_error()) > 0);
                /* only a failure while publishing (a rename, the directory's
                 * sync after one) may leave the stores published before it */
                if (!strstr(zr_last_error(), "cannot rename") &&
                    !strstr(zr_last_error(), "cannot sync directory")) {
                    if (zt_exists(paths[0]) || zt_exists(paths[1]))
                        fail_msg("%s call %llu: %s", zrp_fp_kind_name(kinds[kk]), (unsigned long long)k,
                                 zr_last_error());
                }
            }
        }
        assert_true(calls == 0 || failed > 0);
    }
}

/* A writer killed mid-way: no store at its path, its .partial left; the
 * next run replaces it and completes. */
static void test_crash_then_rerun(void **state)
{
    zt_dir *d = *state;
    zld_stream st[2];
    zld_store_spec sp[2];
    streams(st, sp, d->dir);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        ragged_src.crash_at = 2100;
        zld_write_stores(st, sp, 2, ZRE_CODEC_ZSTD);
        _exit(3);
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
    assert_false(zt_exists(paths[0]) || zt_exists(paths[1]));
    assert_true(partial_exists(0) && partial_exists(1));
    assert_int_equal(zld_write_stores(st, sp, 2, ZRE_CODEC_ZSTD), ZR_OK);
    check_store(paths[0], 0);
    check_store(paths[1], 1);
    assert_false(partial_exists(0) || partial_exists(1));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_writes_every_record, setup, zt_dir_teardown),
        cmocka_unit_test_setup_teardown(test_stream_error_leaves_nothing, setup, zt_dir_teardown),
        cmocka_unit_test_setup_teardown(test_fault_sweep, setup, zt_dir_teardown),
        cmocka_unit_test_setup_teardown(test_crash_then_rerun, setup, zt_dir_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
