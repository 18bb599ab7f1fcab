/*
 * torture_errors.c - libzrerror, the one error module under every library:
 * the status table (names, texts), the per-thread detail and errno, the
 * context helper, the helpers of zrerror_sys.h; and the details that
 * libzsampler's and libzmrec's failures leave there.
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

#include "zmrec.h"
#include "zr_platform.h"
#include "zrerror.h"
#include "zrerror_sys.h"
#include "zsampler.h"

static void assert_contains(const char *text, const char *part)
{
    if (strstr(text, part) == NULL)
        fail_msg("\"%s\" does not contain \"%s\"", text, part);
}

/* ------------------------------------------------------------ table */

static void test_names_and_texts(void **state)
{
    (void)state;
    static const struct {
        int status;
        const char *name, *text;
    } want[] = {
        {ZR_OK, "OK", "success"},
        {ZR_EINVAL, "EINVAL", "invalid argument"},
        {ZR_ENOMEM, "ENOMEM", "out of memory"},
        {ZR_EIO, "EIO", "input/output error"},
        {ZR_EBUSY, "EBUSY", "store is busy"},
        {ZR_EEXIST, "EEXIST", "path already exists"},
        {ZR_ENOTSTORE, "ENOTSTORE", "not a store"},
        {ZR_ERANGE, "ERANGE", "index out of range"},
        {ZR_ECORRUPT, "ECORRUPT", "store is corrupt"},
        {ZR_ETOOBIG, "ETOOBIG", "record too big"},
        {ZR_EUNSUPPORTED, "EUNSUPPORTED", "unsupported operation"},
        {ZR_ECLOSED, "ECLOSED", "closed"},
        {ZR_ESTATE, "ESTATE", "earlier error in pipeline"},
        {ZR_EINTR, "EINTR", "interrupted"},
    };
    assert_int_equal(sizeof want / sizeof want[0], ZR_STATUS_COUNT);
    assert_int_equal(ZR_STATUS_LAST, -(ZR_STATUS_COUNT - 1));
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        assert_int_equal(want[i].status, -(int)i); /* every value in 0..LAST used */
        assert_string_equal(zr_status_name(want[i].status), want[i].name);
        assert_string_equal(zr_strerror(want[i].status), want[i].text);
    }
    /* outside the table */
    assert_null(zr_status_name(1));
    assert_null(zr_status_name(ZR_STATUS_LAST - 1));
    assert_null(zr_status_name(-100000));
    assert_string_equal(zr_strerror(1), "unknown error");
    assert_string_equal(zr_strerror(ZR_STATUS_LAST - 1), "unknown error");
    /* the version macros and the runtime agree */
    assert_int_equal(zrerror_version(), ZRERROR_VERSION_NUMBER);
    char v[32];
    snprintf(v, sizeof v, "%d.%d.%d", ZRERROR_VERSION_MAJOR, ZRERROR_VERSION_MINOR,
             ZRERROR_VERSION_PATCH);
    assert_string_equal(zrerror_version_string(), v);
}

/* ------------------------------------------------------------ detail */

static void test_set_error_and_errno(void **state)
{
    (void)state;
    assert_int_equal(zr_set_error(ZR_ERANGE, "gather: index %d of %d", 7, 5), ZR_ERANGE);
    assert_string_equal(zr_last_error(), "gather: index 7 of 5");
    assert_int_equal(zr_last_errno(), 0);
    /* the errno noted by zr_os_strerror goes with the next zr_set_error */
    assert_int_equal(zr_set_error(ZR_EIO, "open x: %s", zr_os_strerror(-ENOENT)), ZR_EIO);
    assert_int_equal(zr_last_errno(), ENOENT);
    assert_contains(zr_last_error(), "open x: ");
    /* ...and only with that one */
    zr_set_error(ZR_EINVAL, "bad");
    assert_int_equal(zr_last_errno(), 0);
    /* a platform status that is not an errno: a fixed text, no errno */
    zr_set_error(ZR_ECORRUPT, "read: %s", zr_os_strerror(ZRP_ESHORT));
    assert_string_equal(zr_last_error(), "read: unexpected end of file");
    assert_int_equal(zr_last_errno(), 0);
    /* the detail itself as an argument (re-raised under another status) */
    zr_set_error(ZR_EIO, "inner");
    zr_set_error(ZR_ESTATE, "outer: %s", zr_last_error());
    assert_string_equal(zr_last_error(), "outer: inner");
    /* a saved failure re-raised with its errno */
    assert_int_equal(zr_set_error_errno(ZR_EIO, ENOSPC, "write %s", "f"), ZR_EIO);
    assert_string_equal(zr_last_error(), "write f");
    assert_int_equal(zr_last_errno(), ENOSPC);
    /* a detail longer than the buffer is cut, NUL-terminated */
    char big[3 * ZR_ERROR_DETAIL_CAP];
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    zr_set_error(ZR_EINVAL, "%s", big);
    assert_int_equal(strlen(zr_last_error()), ZR_ERROR_DETAIL_CAP - 1);
}

static void test_context(void **state)
{
    (void)state;
    zr_set_error_errno(ZR_ENOTSTORE, ENOENT, "meta.zr: missing");
    zr_error_context("opening %s", "/data/a");
    assert_string_equal(zr_last_error(), "opening /data/a: meta.zr: missing");
    assert_int_equal(zr_last_errno(), ENOENT); /* kept */
    zr_error_context("shard %d", 3);
    assert_string_equal(zr_last_error(), "shard 3: opening /data/a: meta.zr: missing");
    /* a context as long as the buffer: the old detail is cut, not overrun */
    char big[2 * ZR_ERROR_DETAIL_CAP];
    memset(big, 'c', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    zr_error_context("%s", big);
    assert_int_equal(strlen(zr_last_error()), ZR_ERROR_DETAIL_CAP - 1);
    /* a context that leaves room for part of the old detail */
    zr_set_error(ZR_EIO, "%s", big);
    zr_error_context("ctx");
    assert_int_equal(strlen(zr_last_error()), ZR_ERROR_DETAIL_CAP - 1);
    assert_int_equal(strncmp(zr_last_error(), "ctx: ccc", 8), 0);
}

static void test_check_path(void **state)
{
    (void)state;
    assert_int_equal(zr_check_path("a/b", 3, "open"), ZR_OK);
    assert_int_equal(zr_check_path("", 0, "open"), ZR_EINVAL);
    assert_string_equal(zr_last_error(), "open: empty path");
    assert_int_equal(zr_check_path("a\0b", 3, NULL), ZR_EINVAL);
    assert_contains(zr_last_error(), "path: path \"a\" holds an embedded NUL byte at position 1");
}

/* ------------------------------------------------------------ threads */

struct thread_arg {
    int id;
    int ok;
};

static void thread_fails(void *p)
{
    struct thread_arg *a = p;
    char want[64];
    a->ok = 1;
    for (int round = 0; round < 2000; round++) {
        snprintf(want, sizeof want, "thread %d round %d", a->id, round);
        zr_set_error_errno(ZR_EIO, 100 + a->id, "thread %d round %d", a->id, round);
        if (strcmp(zr_last_error(), want) != 0 || zr_last_errno() != 100 + a->id)
            a->ok = 0;
    }
}

static void test_thread_local(void **state)
{
    (void)state;
    zr_set_error_errno(ZR_EINVAL, 7, "main thread's detail");
    struct thread_arg args[4];
    zrp_thread t[4];
    for (int i = 0; i < 4; i++) {
        args[i] = (struct thread_arg){.id = i, .ok = 0};
        assert_int_equal(zrp_thread_start(&t[i], thread_fails, &args[i]), 0);
    }
    for (int i = 0; i < 4; i++) {
        assert_int_equal(zrp_thread_join(t[i]), 0);
        assert_true(args[i].ok);
    }
    /* no other thread's failure reached this one */
    assert_string_equal(zr_last_error(), "main thread's detail");
    assert_int_equal(zr_last_errno(), 7);
}

static void thread_reads_fresh(void *p)
{
    struct thread_arg *a = p;
    a->ok = zr_last_error()[0] == '\0' && zr_last_errno() == 0;
}

static void test_fresh_thread_has_no_detail(void **state)
{
    (void)state;
    zr_set_error(ZR_EINVAL, "set on the main thread");
    struct thread_arg a = {0, 0};
    zrp_thread t;
    assert_int_equal(zrp_thread_start(&t, thread_reads_fresh, &a), 0);
    assert_int_equal(zrp_thread_join(t), 0);
    assert_true(a.ok);
}

/* ------------------------------------------------------------ zsampler */

static void test_zsampler_details(void **state)
{
    (void)state;
    assert_int_equal(ZSM_EINVAL, ZR_EINVAL);
    assert_int_equal(ZSM_OK, ZR_OK);
    zsm_config c = {.length = 100, .batch_size = 10, .seed = 1, .mode = ZSM_CYCLIC,
                    .rank = 0, .world_size = 2};
    assert_int_equal(zsm_validate(&c), ZSM_OK);
    c.rank = 2;
    assert_int_equal(zsm_validate(&c), ZSM_EINVAL);
    assert_string_equal(zr_last_error(), "zsm_validate: rank 2 is not below world_size 2");
    c.rank = 0;
    c.length = 15;
    assert_int_equal(zsm_validate(&c), ZSM_EINVAL);
    assert_contains(zr_last_error(), "length 15 < 20");
    c.length = 0;
    assert_int_equal(zsm_validate(&c), ZSM_EINVAL);
    assert_string_equal(zr_last_error(), "zsm_validate: length is 0 (need >= 1)");
    c.length = 100;
    c.mode = (zsm_mode)9;
    assert_int_equal(zsm_validate(&c), ZSM_EINVAL);
    assert_contains(zr_last_error(), "mode 9");
    c.mode = ZSM_IID;
    c.batch_size = UINT64_MAX;
    assert_int_equal(zsm_validate(&c), ZSM_EINVAL);
    assert_contains(zr_last_error(), "exceeds 2^64 - 1");
    assert_int_equal(zsm_validate(NULL), ZSM_EINVAL);
    assert_string_equal(zr_last_error(), "zsm_validate: config is NULL");
    zsm_mode m;
    assert_int_equal(zsm_mode_parse("random", &m), ZSM_EINVAL);
    assert_contains(zr_last_error(), "unknown mode \"random\"");

    zsm_pass p = {.length = 10, .batch_size = 0, .world_size = 1};
    assert_int_equal(zsm_pass_validate(&p), ZSM_EINVAL);
    assert_string_equal(zr_last_error(), "zsm_pass_validate: batch_size is 0 (need >= 1)");
    p.batch_size = 4;
    p.rank = 5;
    assert_int_equal(zsm_pass_validate(&p), ZSM_EINVAL);
    assert_string_equal(zr_last_error(), "zsm_pass_validate: rank 5 is not below world_size 1");
    p.rank = 0;
    uint64_t out[4], count;
    assert_int_equal(zsm_pass_indices(&p, 3, out, &count), ZSM_EINVAL);
    assert_contains(zr_last_error(), "step 3 is past the pass's end (3 steps)");

    double w[2] = {1.0, -0.5};
    uint64_t len[2] = {10, 10};
    zsm_mode modes[2] = {ZSM_IID, ZSM_IID};
    zsm_mixture mx = {.weights = w, .lengths = len, .modes = modes, .nsources = 2,
                      .seed = 1, .batch_size = 4, .rank = 0, .world_size = 1};
    assert_int_equal(zsm_mixture_validate(&mx), ZSM_EINVAL);
    assert_string_equal(zr_last_error(), "zsm_mixture_validate: weights[1] is -0.5 (need > 0 and finite)");
    w[1] = 1.0;
    len[0] = 0;
    assert_int_equal(zsm_mixture_validate(&mx), ZSM_EINVAL);
    assert_string_equal(zr_last_error(), "zsm_mixture_validate: lengths[0] is 0 (need >= 1)");
    len[0] = 2;
    modes[0] = ZSM_CYCLIC;
    assert_int_equal(zsm_mixture_validate(&mx), ZSM_EINVAL);
    assert_contains(zr_last_error(), "source 0 is cyclic with length 2");
    modes[0] = ZSM_IID;
    mx.modes = NULL;
    assert_int_equal(zsm_mixture_validate(&mx), ZSM_EINVAL);
    assert_string_equal(zr_last_error(), "zsm_mixture_validate: modes is NULL");
    mx.modes = modes;
    assert_int_equal(zsm_mixture_validate(&mx), ZSM_OK);

    uint32_t lengths[3] = {5, 6, 7};
    zsm_pack pk = {.lengths = lengths, .ndocs = 3, .row_length = 0, .window = 4,
                   .policy = ZSM_PACK_BEST_FIT, .overlong = ZSM_PACK_SPLIT};
    assert_int_equal(zsm_pack_validate(&pk), ZSM_EINVAL);
    assert_contains(zr_last_error(), "zsm_pack_validate: row_length 0 is not in 1..");
    pk.row_length = 8;
    pk.window = (uint64_t)ZSM_PACK_MAX_WINDOW + 1;
    assert_int_equal(zsm_pack_validate(&pk), ZSM_EINVAL);
    assert_contains(zr_last_error(), "window 1048577");
    pk.window = 4;
    pk.overlong = (zsm_pack_overlong)42;
    assert_int_equal(zsm_pack_validate(&pk), ZSM_EINVAL);
    assert_contains(zr_last_error(), "overlong 42");
    pk.overlong = ZSM_PACK_SPLIT;
    pk.lengths = NULL;
    assert_int_equal(zsm_pack_validate(&pk), ZSM_EINVAL);
    assert_string_equal(zr_last_error(), "zsm_pack_validate: lengths is NULL");
    pk.lengths = lengths;

    /* The planner, the bucketing, the coins and mixture positions name
     * what is wrong too. */
    zsm_pack_policy pol;
    assert_int_equal(zsm_pack_policy_parse("worst_fit", &pol), ZSM_EINVAL);
    assert_string_equal(zr_last_error(), "zsm_pack_policy_parse: unknown name \"worst_fit\" "
                                         "(first_fit, best_fit, concat)");
    zsm_pack_overlong ol;
    assert_int_equal(zsm_pack_overlong_parse(NULL, &ol), ZSM_EINVAL);
    assert_string_equal(zr_last_error(), "zsm_pack_overlong_parse: name is NULL");
    uint64_t plan[2], rows = 0;
    unsigned char small[8];
    assert_int_equal(zsm_pack_epoch(&pk, 0, plan, &rows, small, sizeof small), ZSM_EINVAL);
    assert_contains(zr_last_error(), "zsm_pack_epoch: scratch of 8 bytes, the plan needs");
    size_t need = zsm_pack_scratch_bytes(&pk);
    void *scratch = malloc(need);
    assert_int_equal(zsm_pack_epoch(&pk, 0, plan, &rows, scratch, need), ZSM_OK);
    zsm_piece pieces[16];
    uint64_t starts[8];
    assert_int_equal(zsm_pack_rows(&pk, 0, plan, rows, 1, pieces, 16, starts, scratch, need),
                     ZSM_EINVAL);
    assert_contains(zr_last_error(), "are past the epoch's");
    assert_int_equal(zsm_pack_rows(&pk, 0, plan, 0, rows, pieces, 0, starts, scratch, need),
                     ZSM_EINVAL);
    assert_contains(zr_last_error(), "pieces array holds (capacity)");
    free(scratch);

    zsm_config bc = {.length = 100, .batch_size = 10, .seed = 1, .mode = ZSM_CYCLIC,
                     .rank = 0, .world_size = 1};
    uint32_t blen[100] = {0};
    uint64_t bout[10];
    uint64_t bscratch[4];
    assert_int_equal(zsm_bucket_indices(&bc, blen, 0, 0, bout, bscratch, sizeof bscratch),
                     ZSM_EINVAL);
    assert_string_equal(zr_last_error(), "zsm_bucket_indices: window is 0 (need >= 1 batch)");
    assert_int_equal(zsm_bucket_indices(&bc, blen, 2, 0, bout, bscratch, sizeof bscratch),
                     ZSM_EINVAL);
    assert_contains(zr_last_error(), "zsm_bucket_indices: scratch of 32 bytes, the window needs");
    bc.batch_size = 200;
    assert_int_equal(zsm_bucket_indices(&bc, blen, 2, 0, bout, bscratch, sizeof bscratch),
                     ZSM_EINVAL);
    assert_contains(zr_last_error(), "cyclic");
    uint8_t coins[4];
    assert_int_equal(zsm_bernoulli(1, 0, 0, 4, 2.0, coins), ZSM_EINVAL);
    assert_string_equal(zr_last_error(), "zsm_bernoulli: p must be in [0, 1], got 2");
    uint32_t src[4];
    uint64_t idx[4];
    assert_int_equal(zsm_mixture_positions(&mx, 0, 2, 4, src, idx, NULL), ZSM_EINVAL);
    assert_string_equal(zr_last_error(), "zsm_mixture_positions: positions 2..6 are past the "
                                         "global batch of 4");
}

/* ------------------------------------------------------------ zmrec */

static void test_zmrec_shares_the_module(void **state)
{
    (void)state;
    assert_int_equal(ZMR_ENOTCOLL, ZR_ENOTSTORE);
    assert_int_equal(ZMR_ECORRUPT, ZR_ECORRUPT);
    for (int s = 0; s >= ZR_STATUS_LAST; s--)
        assert_string_equal(zmr_strerror(s), zr_strerror(s));
    zmr_dtype d;
    assert_int_equal(zmr_dtype_parse("f32", &d), ZMR_EINVAL);
    /* the detail reaches zr_last_error: one detail for every library */
    assert_contains(zr_last_error(), "dtype 'f32' is not in the column set");
    assert_ptr_equal(zmr_last_error(), zr_last_error());
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_names_and_texts),
        cmocka_unit_test(test_set_error_and_errno),
        cmocka_unit_test(test_context),
        cmocka_unit_test(test_check_path),
        cmocka_unit_test(test_thread_local),
        cmocka_unit_test(test_fresh_thread_has_no_detail),
        cmocka_unit_test(test_zsampler_details),
        cmocka_unit_test(test_zmrec_shares_the_module),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
