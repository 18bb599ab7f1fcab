/*
 * torture_borrow.c - store lifetime under borrowers: a loader (or a
 * concatenation, or a mixture) borrows what it reads, so closing a store
 * under a live loader frees nothing its workers use: their reads and the
 * consumer's next step fail with ZR_ECLOSED naming the store, never a
 * crash; delete and compact on a borrowed store are ZR_EBUSY and change
 * nothing; the last unborrow frees the handle (run under ASan by
 * scripts/sanitize.sh to see the frees and the absence of use after free).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <zloader.h>

#include "zr_platform.h"
#include "zr_test_util.h"
#include "zrerror_sys.h"

#define N 512u /* records per store */

static int setup(void **state) { return zt_dir_setup(state, "borrow"); }

/* A dense u32[4] store of N records at <dir>/<name>, record i all i. */
static zrs_store *make_store(zt_dir *d, const char *name)
{
    uint64_t shape[1] = {4};
    zrs_store *s = NULL;
    assert_int_equal(zrs_create_dense(&s, zt_dir_at(d, name), ZRS_UINT32, shape, 1,
                                      ZRE_CODEC_ZSTD), ZR_OK);
    uint32_t *rec = malloc(N * 4 * sizeof *rec);
    assert_non_null(rec);
    for (uint32_t i = 0; i < N; i++)
        for (int j = 0; j < 4; j++) rec[i * 4 + (uint32_t)j] = i;
    assert_int_equal(zrs_append_dense(s, rec, N * 16, N, NULL), ZR_OK);
    free(rec);
    return s;
}

static zld_options opts(unsigned workers)
{
    zld_options o = ZLD_OPTIONS_INIT;
    o.batch_size = 16;
    o.num_workers = workers;
    o.prefetch = 4;
    o.readahead = 0;
    return o;
}

/* Step until ZR_ECLOSED (a few batches built before the close may still
 * be handed out only if they were taken before it): here the close comes
 * before the next call, so the very next call must fail. */
static void expect_closed_next(zld_loader *l, const char *path)
{
    for (int k = 0; k < 3; k++) { /* every later call too */
        zld_batch *b = NULL;
        assert_int_equal(zld_next(l, &b), ZR_ECLOSED);
        assert_null(b);
        zt_assert_mentions(zr_last_error(), path);
        zt_assert_mentions(zr_last_error(), "was closed while");
    }
    assert_int_equal(zld_is_closed(l), 1);
}

/* Close the store while the loader's workers run: no crash, no batch
 * after the close, ZR_ECLOSED naming the store, the handle alive until
 * zld_close. */
static void test_close_under_live_loader(void **state)
{
    zt_dir *d = *state;
    unsigned workers[] = {2, ZLD_WORKERS_NONE};
    for (size_t w = 0; w < 2; w++) {
        char name[32];
        snprintf(name, sizeof name, "s%zu", w);
        zrs_store *s = make_store(d, name);
        char path[600];
        snprintf(path, sizeof path, "%s", zrs_path(s));
        zld_options o = opts(workers[w]);
        zld_loader *l = NULL;
        assert_int_equal(zld_create(&l, &s, 1, &o), ZR_OK);
        assert_int_equal(zrs_borrowers(s), 1);
        assert_int_equal(zld_is_closed(l), 0);
        zld_batch *b = NULL;
        assert_int_equal(zld_next(l, &b), ZR_OK);
        zld_batch_free(b);
        zrp_sleep_ms(20); /* the workers fill the queue */
        assert_int_equal(zrs_close(s), ZR_OK);
        expect_closed_next(l, path);
        zld_close(l); /* the last borrow: frees the store (ASan sees it) */
        /* The lock is gone with the close: the store opens again, whole. */
        assert_int_equal(zrs_open(&s, path), ZR_OK);
        assert_int_equal(zrs_length(s), N);
        assert_int_equal(zrs_close(s), ZR_OK);
    }
}

/* A closed store: a new loader over it is refused. */
static void test_create_over_closed_store(void **state)
{
    zt_dir *d = *state;
    zrs_store *s = make_store(d, "c");
    zld_options o = opts(1);
    zld_loader *l = NULL;
    assert_int_equal(zld_create(&l, &s, 1, &o), ZR_OK);
    assert_int_equal(zrs_close(s), ZR_OK);
    /* the loader keeps the handle's memory: borrowing it again is refused */
    assert_int_equal(zrs_borrow(s), ZR_ECLOSED);
    zt_assert_mentions(zr_last_error(), "is closed");
    assert_int_equal(zrs_borrowers(s), 1);
    zld_loader *l2 = NULL;
    assert_int_equal(zld_create(&l2, &s, 1, &o), ZR_ECLOSED);
    assert_null(l2);
    zt_assert_mentions(zr_last_error(), "stream 0");
    zld_close(l);
}

/* delete and compact on a borrowed store: ZR_EBUSY naming the store and
 * the borrowers, nothing deleted; allowed again after the loader closes. */
static void test_exclusive_ops_busy(void **state)
{
    zt_dir *d = *state;
    zrs_store *s = make_store(d, "x");
    zld_options o = opts(1);
    zld_loader *l1 = NULL, *l2 = NULL;
    assert_int_equal(zld_create(&l1, &s, 1, &o), ZR_OK);
    assert_int_equal(zld_create(&l2, &s, 1, &o), ZR_OK);
    assert_int_equal(zrs_borrowers(s), 2);
    int64_t idx = 0;
    assert_int_equal(zrs_delete(s, &idx, 1), ZR_EBUSY);
    zt_assert_mentions(zr_last_error(), zrs_path(s));
    zt_assert_mentions(zr_last_error(), "2 borrowers");
    zt_assert_mentions(zr_last_error(), "exclusive");
    assert_int_equal(zrs_compact(s), ZR_EBUSY);
    zt_assert_mentions(zr_last_error(), "compact");
    assert_int_equal(zrs_length(s), N);
    zld_batch *b = NULL;
    assert_int_equal(zld_next(l1, &b), ZR_OK); /* reads go on */
    zld_batch_free(b);
    zld_close(l1);
    zld_close(l2);
    assert_int_equal(zrs_borrowers(s), 0);
    assert_int_equal(zrs_delete(s, &idx, 1), ZR_OK);
    assert_int_equal(zrs_length(s), N - 1);
    assert_int_equal(zrs_compact(s), ZR_OK);
    uint32_t rec[4];
    int64_t last = -1;
    assert_int_equal(zrs_gather_dense(s, &last, 1, rec, sizeof rec), ZR_OK);
    assert_int_equal(rec[0], N - 2); /* swap-last moved record N-1 to 0 */
    assert_int_equal(zrs_close(s), ZR_OK);
}

/* Raw borrows: the last unborrow frees the handle after the close, and
 * borrowers' reads say ZR_ECLOSED. */
static void test_last_unborrow_frees(void **state)
{
    zt_dir *d = *state;
    zrs_store *s = make_store(d, "u");
    assert_int_equal(zrs_borrow(s), ZR_OK);
    assert_int_equal(zrs_borrow(s), ZR_OK);
    assert_int_equal(zrs_borrowers(s), 2);
    assert_int_equal(zrs_is_closed(s), 0);
    assert_int_equal(zrs_close(s), ZR_OK);
    assert_int_equal(zrs_is_closed(s), 1);
    assert_int_equal(zrs_borrowers(s), 2);
    uint32_t rec[4];
    int64_t i = 3;
    assert_int_equal(zrs_gather_dense(s, &i, 1, rec, sizeof rec), ZR_ECLOSED);
    zt_assert_mentions(zr_last_error(), "store '");
    zt_assert_mentions(zr_last_error(), "was closed while");
    assert_int_equal(zrs_length(s), 0);
    zrs_unborrow(s);
    assert_int_equal(zrs_borrowers(s), 1);
    zrs_unborrow(s); /* frees: ASan reports a leak otherwise */
}

/* A concatenation borrows its stores and is itself borrowed by a loader:
 * closing a shard, or the concatenation, under the loader is ZR_ECLOSED. */
static void test_concat_borrows(void **state)
{
    zt_dir *d = *state;
    zrs_store *st[2] = {make_store(d, "a"), make_store(d, "b")};
    zrs_concat *c = NULL;
    assert_int_equal(zrs_concat_create(&c, st, 2), ZR_OK);
    assert_int_equal(zrs_borrowers(st[0]), 1);
    int64_t idx = 0;
    assert_int_equal(zrs_delete(st[1], &idx, 1), ZR_EBUSY);
    zld_stream sd;
    assert_int_equal(zld_stream_from_concat(&sd, c), ZR_OK);
    zld_options o = opts(2);
    zld_loader *l = NULL;
    assert_int_equal(zld_create_streams(&l, &sd, 1, &o), ZR_OK);
    assert_int_equal(zrs_concat_borrowers(c), 1);
    zld_batch *b = NULL;
    assert_int_equal(zld_next(l, &b), ZR_OK);
    zld_batch_free(b);
    char path[600];
    snprintf(path, sizeof path, "%s", zrs_path(st[1]));
    assert_int_equal(zrs_close(st[1]), ZR_OK); /* a shard goes */
    assert_int_equal(zld_next(l, &b), ZR_ECLOSED);
    zt_assert_mentions(zr_last_error(), "closed while");
    assert_int_equal(zld_is_closed(l), 1);
    /* the concatenation's own reads of the closed shard */
    uint32_t rec[4];
    int64_t far = N + 1;
    assert_int_equal(zrs_concat_gather_dense(c, &far, 1, rec, sizeof rec), ZR_ECLOSED);
    zt_assert_mentions(zr_last_error(), path);
    assert_int_equal(zrs_concat_close(c), ZR_OK); /* deferred: the loader borrows it */
    zld_close(l); /* frees the concatenation, which frees st[1] */
    assert_int_equal(zrs_borrowers(st[0]), 0);
    assert_int_equal(zrs_close(st[0]), ZR_OK);
}

/* A mixture freed by its owner while a loader reads it. */
static void test_mixture_borrowed(void **state)
{
    zt_dir *d = *state;
    zrs_store *st[2] = {make_store(d, "m0"), make_store(d, "m1")};
    zrs_concat *c[2] = {NULL, NULL};
    assert_int_equal(zrs_concat_create(&c[0], &st[0], 1), ZR_OK);
    assert_int_equal(zrs_concat_create(&c[1], &st[1], 1), ZR_OK);
    double w[2] = {1, 1};
    zsm_mode modes[2] = {ZSM_CYCLIC, ZSM_CYCLIC};
    zld_mixture *m = NULL;
    assert_int_equal(zld_mixture_create(&m, c, 2, 1, w, modes, 7, 16, 1), ZR_OK);
    zld_stream sd;
    assert_int_equal(zld_mixture_stream(m, 0, &sd), ZR_OK);
    zld_options o = opts(2);
    o.mode = ZSM_SEQUENTIAL;
    zld_loader *l = NULL;
    assert_int_equal(zld_create_streams(&l, &sd, 1, &o), ZR_OK);
    zld_batch *b = NULL;
    assert_int_equal(zld_next(l, &b), ZR_OK);
    zld_batch_free(b);
    zld_mixture_free(m); /* deferred */
    assert_int_equal(zld_next(l, &b), ZR_ECLOSED);
    zt_assert_mentions(zr_last_error(), "mixture");
    zld_close(l);
    for (int k = 0; k < 2; k++) {
        assert_int_equal(zrs_concat_close(c[k]), ZR_OK);
        assert_int_equal(zrs_borrowers(st[k]), 0);
        assert_int_equal(zrs_close(st[k]), ZR_OK);
    }
}

/* The crash angle: two threads gather from one borrowed store (through a
 * concatenation too) while its owner closes it, many times over. Every
 * gather either succeeds with the right bytes or fails with ZR_ECLOSED;
 * nothing reads freed memory (ASan). */
typedef struct gatherer {
    zrs_store *s;
    zrs_concat *c;
    _Atomic int *go;
    int bad;
    unsigned long ok, closed;
} gatherer;

static void gather_loop(void *arg)
{
    gatherer *g = arg;
    uint32_t rec[8 * 4];
    int64_t idx[8];
    while (!atomic_load(g->go)) zrp_yield();
    for (unsigned it = 0;; it++) {
        for (int k = 0; k < 8; k++) idx[k] = (int64_t)((it * 37u + (unsigned)k * 11u) % N);
        int rc = g->c ? zrs_concat_gather_dense(g->c, idx, 8, rec, sizeof rec)
                      : zrs_gather_dense(g->s, idx, 8, rec, sizeof rec);
        if (rc == ZR_ECLOSED) {
            g->closed++;
            return;
        }
        if (rc != ZR_OK) {
            fprintf(stderr, "gather: %d %s\n", rc, zr_last_error());
            g->bad = 1;
            return;
        }
        for (int k = 0; k < 8; k++)
            if (rec[k * 4] != (uint32_t)idx[k]) {
                fprintf(stderr, "record %lld reads %u\n", (long long)idx[k], rec[k * 4]);
                g->bad = 1;
            }
        g->ok++;
    }
}

/* A store of N records at <dir>/<name>, closed, its path in path[600];
 * the rounds to run (ZR_BORROW_ROUNDS, default 200). */
static unsigned closed_store(zt_dir *d, const char *name, char *path)
{
    zrs_store *s = make_store(d, name);
    snprintf(path, 600, "%s", zrs_path(s));
    assert_int_equal(zrs_close(s), ZR_OK);
    return (unsigned)zt_env_u64("ZR_BORROW_ROUNDS", 200);
}

static void test_close_during_gathers(void **state)
{
    char path[600];
    unsigned rounds = closed_store(*state, "g", path);
    zrs_store *s = NULL;
    unsigned long closed = 0;
    for (unsigned r = 0; r < rounds; r++) {
        assert_int_equal(zrs_open_ex(&s, path, ZRE_OPEN_READONLY), ZR_OK);
        zrs_concat *c = NULL;
        assert_int_equal(zrs_concat_create(&c, &s, 1), ZR_OK);
        _Atomic int go = 0;
        gatherer g[2] = {{s, NULL, &go, 0, 0, 0}, {s, c, &go, 0, 0, 0}};
        zrp_thread t[2];
        for (int k = 0; k < 2; k++) {
            assert_int_equal(zrs_borrow(s), ZR_OK); /* as a loader would */
            assert_int_equal(zrp_thread_start(&t[k], gather_loop, &g[k]), 0);
        }
        atomic_store(&go, 1);
        if (r % 4) zrp_sleep_ms(r % 3); /* close at varying points */
        assert_int_equal(zrs_close(s), ZR_OK);
        for (int k = 0; k < 2; k++) {
            zrp_thread_join(t[k]);
            assert_int_equal(g[k].bad, 0);
            assert_int_equal(g[k].closed, 1);
            closed += g[k].closed;
            zrs_unborrow(s);
        }
        assert_int_equal(zrs_concat_close(c), ZR_OK); /* the last reference */
    }
    assert_int_equal(closed, 2ul * rounds);
}

/* A loader with two workers over a store closed at a varying moment. */
static void test_close_under_loader_repeated(void **state)
{
    char path[600];
    unsigned rounds = closed_store(*state, "r", path);
    zrs_store *s = NULL;
    for (unsigned r = 0; r < rounds; r++) {
        assert_int_equal(zrs_open_ex(&s, path, ZRE_OPEN_READONLY), ZR_OK);
        zld_options o = opts(2);
        zld_loader *l = NULL;
        assert_int_equal(zld_create(&l, &s, 1, &o), ZR_OK);
        if (r % 2) {
            zld_batch *b = NULL;
            assert_int_equal(zld_next(l, &b), ZR_OK);
            zld_batch_free(b);
        }
        assert_int_equal(zrs_close(s), ZR_OK);
        zld_batch *b = NULL;
        assert_int_equal(zld_next(l, &b), ZR_ECLOSED);
        zt_assert_mentions(zr_last_error(), path);
        zld_close(l);
    }
}

/* A stream of the caller's own with lifetime hooks: held once at create,
 * released once at close (and on a create that fails after the hold), its
 * `closed` answer stops the loader with ZR_ECLOSED naming the stream. */
typedef struct hooked {
    atomic_int holds, releases, closed, refuse;
} hooked;

static int hooked_gather(void *user, const uint64_t *index, uint64_t count, void *dst, uint64_t cap,
                         const uint64_t *bounds)
{
    (void)user;
    (void)bounds;
    if (count * 8 > cap)
        return zr_set_error(ZR_EINVAL, "hooked: no room");
    memcpy(dst, index, count * 8);
    return 0;
}

static int hooked_hold(void *user)
{
    hooked *h = user;
    if (atomic_load(&h->refuse))
        return zr_set_error(ZR_ECLOSED, "hooked source is closed");
    atomic_fetch_add(&h->holds, 1);
    return 0;
}

static void hooked_release(void *user) { atomic_fetch_add(&((hooked *)user)->releases, 1); }

static int hooked_closed(void *user, char *msg, size_t cap)
{
    if (!atomic_load(&((hooked *)user)->closed))
        return 0;
    snprintf(msg, cap, "the hooked source was closed");
    return 1;
}

static void test_stream_hooks(void **state)
{
    (void)state;
    hooked a, b;
    memset(&a, 0, sizeof a);
    memset(&b, 0, sizeof b);
    zld_stream st[2];
    for (int k = 0; k < 2; k++)
        st[k] = (zld_stream){.user = k ? (void *)&b : (void *)&a, .name = k ? "b" : "a", .length = 100,
                             .kind = ZLD_STREAM_DENSE, .record_size = 8, .gather = hooked_gather,
                             .hold = hooked_hold, .release = hooked_release, .closed = hooked_closed};
    zld_options o = ZLD_OPTIONS_INIT;
    o.batch_size = 4;
    o.num_workers = 2;
    zld_loader *l = NULL;
    /* the second hold fails: the create fails naming it, the first is released */
    atomic_store(&b.refuse, 1);
    assert_int_equal(zld_create_streams(&l, st, 2, &o), ZR_ECLOSED);
    assert_null(l);
    assert_non_null(strstr(zr_last_error(), "stream 1"));
    assert_int_equal(atomic_load(&a.holds), 1);
    assert_int_equal(atomic_load(&a.releases), 1);
    assert_int_equal(atomic_load(&b.holds), 0);
    assert_int_equal(atomic_load(&b.releases), 0);
    atomic_store(&b.refuse, 0);
    assert_int_equal(zld_create_streams(&l, st, 2, &o), ZR_OK);
    assert_int_equal(atomic_load(&a.holds), 2);
    assert_int_equal(atomic_load(&b.holds), 1);
    zld_batch *bt = NULL;
    assert_int_equal(zld_next(l, &bt), ZR_OK);
    zld_batch_free(bt);
    assert_int_equal(zld_is_closed(l), 0);
    atomic_store(&b.closed, 1);
    for (int k = 0; k < 3; k++) {
        bt = NULL;
        assert_int_equal(zld_next(l, &bt), ZR_ECLOSED);
        assert_null(bt);
        assert_non_null(strstr(zr_last_error(), "stream 1: the hooked source was closed"));
    }
    assert_int_equal(zld_is_closed(l), 1);
    assert_int_equal(atomic_load(&b.releases), 0); /* released at close, not before */
    zld_close(l);
    assert_int_equal(atomic_load(&a.releases), 2);
    assert_int_equal(atomic_load(&b.releases), 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_close_under_live_loader, setup, zt_dir_teardown),
        cmocka_unit_test_setup_teardown(test_create_over_closed_store, setup, zt_dir_teardown),
        cmocka_unit_test_setup_teardown(test_exclusive_ops_busy, setup, zt_dir_teardown),
        cmocka_unit_test_setup_teardown(test_last_unborrow_frees, setup, zt_dir_teardown),
        cmocka_unit_test_setup_teardown(test_concat_borrows, setup, zt_dir_teardown),
        cmocka_unit_test_setup_teardown(test_mixture_borrowed, setup, zt_dir_teardown),
        cmocka_unit_test_setup_teardown(test_close_during_gathers, setup, zt_dir_teardown),
        cmocka_unit_test_setup_teardown(test_close_under_loader_repeated, setup, zt_dir_teardown),
        cmocka_unit_test(test_stream_hooks),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
