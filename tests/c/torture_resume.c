/*
 * torture_resume.c - the loader state (zld_state_json) and resume
 * (zld_options.resume): an exact resume, every difference named, a state
 * from an older version, continuing on grown data by the stated rule
 * (the cycle in flight finishes on the old length), shards and mixtures.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <zloader.h>

#include "zr_test_util.h"

typedef zt_dir fixture;

static int setup(void **state) { return zt_dir_setup(state, "resume"); }

#define assert_msg(needle) zt_assert_mentions(zr_last_error(), (needle))

/* A raw store of n u32 records at path/name, record i = i + base; open,
 * writable. */
static zrs_store *make_store(const char *path, uint32_t n, uint32_t base)
{
    zrs_store *s = NULL;
    assert_int_equal(zrs_create_dense(&s, path, ZRS_UINT32, NULL, 0, ZRE_CODEC_RAW), ZR_OK);
    uint32_t *v = malloc((size_t)n * 4 + 4);
    assert_non_null(v);
    for (uint32_t i = 0; i < n; i++)
        v[i] = i + base;
    assert_int_equal(zrs_append_dense(s, v, (uint64_t)n * 4, n, NULL), ZR_OK);
    free(v);
    return s;
}

static void append(zrs_store *s, uint32_t n, uint32_t base)
{
    uint32_t *v = malloc((size_t)n * 4 + 4);
    assert_non_null(v);
    for (uint32_t i = 0; i < n; i++)
        v[i] = i + base;
    assert_int_equal(zrs_append_dense(s, v, (uint64_t)n * 4, n, NULL), ZR_OK);
    free(v);
}

static zld_options opts(uint64_t batch, zsm_mode mode, uint64_t seed)
{
    zld_options o = ZLD_OPTIONS_INIT;
    o.batch_size = batch;
    o.mode = mode;
    o.seed = seed;
    o.num_workers = 2;
    o.prefetch = 3;
    return o;
}

/* Take `steps` batches; their indices into out[steps * batch] (may be NULL). */
static void take(zld_loader *l, uint64_t steps, uint64_t batch, uint64_t *out)
{
    for (uint64_t k = 0; k < steps; k++) {
        zld_batch *b = NULL;
        assert_int_equal(zld_next(l, &b), ZR_OK);
        assert_int_equal(zld_batch_count(b), batch);
        if (out)
            memcpy(out + k * batch, zld_batch_indices(b), batch * sizeof *out);
        zld_batch_free(b);
    }
}

/* got[k * batch_size ...] holds the sampler's steps from..from+steps-1 of c. */
static void expect_steps(const zsm_config *c, uint64_t from, uint64_t steps, const uint64_t *got)
{
    uint64_t want[64];
    assert_true(c->batch_size <= 64);
    for (uint64_t k = 0; k < steps; k++) {
        assert_int_equal(zsm_indices(c, from + k, want), ZSM_OK);
        assert_memory_equal(got + k * c->batch_size, want, c->batch_size * sizeof *want);
    }
}

static char *state_of(zld_loader *l)
{
    char *t = NULL;
    assert_int_equal(zld_state_json(l, &t), ZR_OK);
    assert_non_null(t);
    return t;
}

/* The state of a loader over stores s[0..n) with options o after `steps`
 * batches (their indices into `taken`, may be NULL); the loader closed. */
static char *state_after(zrs_store *const *s, size_t n, zld_options o, uint64_t steps,
                         uint64_t *taken)
{
    zld_loader *l = NULL;
    assert_int_equal(zld_create(&l, s, n, &o), ZR_OK);
    take(l, steps, o.batch_size, taken);
    char *t = state_of(l);
    zld_close(l);
    return t;
}

/* A loader over stores resuming `text` with options o: the status. */
static int resume(zld_loader **l, zrs_store *const *s, size_t n, zld_options o, const char *text)
{
    o.resume = text;
    *l = NULL;
    return zld_create(l, s, n, &o);
}

/* ---------------------------------------------------------------- exact */

static void test_exact_resume(void **state)
{
    fixture *fx = *state;
    char pa[700], pb[700];
    snprintf(pa, sizeof pa, "%s", zt_dir_at(fx, "a"));
    snprintf(pb, sizeof pb, "%s", zt_dir_at(fx, "b"));
    zrs_store *s[2] = {make_store(pa, 500, 0), make_store(pb, 500, 1000)};
    const char *names[2] = {"image", "label"};
    const zsm_mode modes[] = {ZSM_SEQUENTIAL, ZSM_IID, ZSM_CYCLIC};
    for (size_t m = 0; m < 3; m++) {
        zld_options o = opts(16, modes[m], 7);
        o.names = names;
        o.rank = 1;
        o.world_size = 2;
        zld_loader *l = NULL, *r = NULL;
        assert_int_equal(zld_create(&l, s, 2, &o), ZR_OK);
        take(l, 23, 16, NULL);
        char *t = state_of(l);
        zt_assert_mentions(t, "\"step\":23");
        zt_assert_mentions(t, "\"name\":\"image\"");
        zt_assert_mentions(t, "\"uuid\":\"");
        zt_assert_mentions(t, "\"length\":500");
        /* The text is the same after a round trip through a resume. */
        o.num_workers = 1;
        assert_int_equal(resume(&r, s, 2, o, t), ZR_OK);
        assert_string_equal(zld_resume_note(r), "");
        assert_int_equal(zld_next_step(r), 23);
        char *t2 = state_of(r);
        assert_string_equal(t, t2);
        uint64_t a[5 * 16], b[5 * 16];
        take(l, 5, 16, a);
        take(r, 5, 16, b);
        assert_memory_equal(a, b, sizeof a);
        zld_state_free(t);
        zld_state_free(t2);
        zld_close(r);
        zld_close(l);
    }
    zrs_close(s[0]);
    zrs_close(s[1]);
}

/* ------------------------------------------------------------ mismatch */

static void test_differences_are_named(void **state)
{
    fixture *fx = *state;
    char pa[700], pb[700], pc[700];
    snprintf(pa, sizeof pa, "%s", zt_dir_at(fx, "a"));
    snprintf(pb, sizeof pb, "%s", zt_dir_at(fx, "b"));
    snprintf(pc, sizeof pc, "%s", zt_dir_at(fx, "c"));
    zrs_store *s[2] = {make_store(pa, 300, 0), make_store(pb, 300, 0)};
    const char *names[2] = {"x", "y"};
    zld_options o = opts(10, ZSM_CYCLIC, 3);
    o.names = names;
    zld_loader *r = NULL;
    char *t = state_after(s, 2, o, 4, NULL);

    /* Other options: each named, with both values. */
    zld_options o2 = o;
    o2.seed = 4;
    o2.batch_size = 12;
    assert_int_equal(resume(&r, s, 2, o2, t), ZR_EINVAL);
    assert_msg("seed: 3 in the state, 4 now");
    assert_msg("batch_size: 10 in the state, 12 now");
    o2 = o;
    o2.mode = ZSM_IID;
    assert_int_equal(resume(&r, s, 2, o2, t), ZR_EINVAL);
    assert_msg("mode: 'cyclic' in the state, 'iid' now");
    /* A flip the state does not have. */
    o2 = o;
    zld_flip f = {1, 1, 4, 0.5};
    o2.flips = &f;
    o2.nflips = 1;
    assert_int_equal(resume(&r, s, 2, o2, t), ZR_EINVAL);
    assert_msg("flip: stream 'y'");
    /* Streams renamed, swapped, or one fewer. */
    const char *other[2] = {"x", "z"};
    o2 = o;
    o2.names = other;
    assert_int_equal(resume(&r, s, 2, o2, t), ZR_EINVAL);
    assert_msg("stream 1 is named 'y' in the state, 'z' now");
    zrs_store *swapped[2] = {s[1], s[0]};
    assert_int_equal(resume(&r, swapped, 2, o, t), ZR_EINVAL);
    assert_msg("uuid");
    assert_int_equal(resume(&r, s, 1, o, t), ZR_EINVAL);
    assert_msg("2 streams in the state, 1 now");
    /* start_step other than the state's step. */
    o2 = o;
    o2.start_step = 9;
    assert_int_equal(resume(&r, s, 2, o2, t), ZR_EINVAL);
    assert_msg("start_step 9 and the state's step 4 disagree");

    /* Another store of the same length and type: its uuid differs. */
    zrs_store *c = make_store(pc, 300, 0);
    zrs_store *other_s[2] = {s[0], c};
    assert_int_equal(resume(&r, other_s, 2, o, t), ZR_EINVAL);
    assert_msg("stream 1 ('y'): uuid");
    assert_msg("another store");
    /* The data grew: refused unless asked for, naming both lengths. */
    append(s[0], 30, 300);
    append(s[1], 30, 300);
    assert_int_equal(resume(&r, s, 2, o, t), ZR_EINVAL);
    assert_msg("330 records now, 300 in the state");
    assert_msg("allow_grown");
    /* Records deleted: a new uuid and a shorter store. */
    int64_t del[1] = {5};
    assert_int_equal(zrs_delete(s[1], del, 1), ZR_OK);
    assert_int_equal(zrs_delete(s[0], del, 1), ZR_OK);
    o2 = o;
    o2.resume_flags = ZLD_RESUME_ALLOW_GROWN;
    assert_int_equal(resume(&r, s, 2, o2, t), ZR_EINVAL);
    assert_msg("records were deleted since");
    assert_null(r);

    /* Not a state at all. */
    assert_int_equal(resume(&r, s, 2, o, "{\"step\": 1, \"seed\": \"x\"}"), ZR_EINVAL);
    assert_msg("not a loader state");
    assert_msg("'seed'");
    assert_int_equal(resume(&r, s, 2, o, "[1, 2]"), ZR_EINVAL);
    assert_msg("not a loader state");
    assert_int_equal(resume(&r, s, 2, o, "{\"step\": 1, \"speed\": 3}"), ZR_EINVAL);
    assert_msg("unknown key 'speed'");
    assert_int_equal(resume(&r, s, 2, o, "{\"step\": 1, \"fingerprint\": {\"version\": 9}}"),
                     ZR_EINVAL);
    assert_msg("version 9");
    o2 = o;
    o2.resume_flags = 8;
    assert_int_equal(resume(&r, s, 2, o2, t), ZR_EINVAL);
    assert_msg("resume_flags");
    zld_state_free(t);
    zrs_close(c);
    zrs_close(s[0]);
    zrs_close(s[1]);
}

/* A state saved by an older version (no fingerprint) loads, and says
 * what it could not check; its options are still compared. */
static void test_old_state_loads_with_a_note(void **state)
{
    fixture *fx = *state;
    zrs_store *s[1] = {make_store(zt_dir_at(fx, "a"), 200, 0)};
    zld_options o = opts(8, ZSM_CYCLIC, 5);
    zld_loader *l = NULL, *r = NULL;
    assert_int_equal(zld_create(&l, s, 1, &o), ZR_OK);
    take(l, 6, 8, NULL);
    const char *old = "{\"seed\": 5, \"step\": 6, \"mode\": \"cyclic\", \"batch_size\": 8, "
                      "\"rank\": 0, \"world_size\": 1}";
    assert_int_equal(resume(&r, s, 1, o, old), ZR_OK);
    zt_assert_mentions(zld_resume_note(r), "no fingerprint");
    zt_assert_mentions(zld_resume_note(r), "older version");
    uint64_t a[3 * 8], b[3 * 8];
    take(l, 3, 8, a);
    take(r, 3, 8, b);
    assert_memory_equal(a, b, sizeof a);
    zld_close(r);
    o.seed = 6;
    assert_int_equal(resume(&r, s, 1, o, old), ZR_EINVAL);
    assert_msg("seed: 5 in the state, 6 now");
    zld_close(l);
    zrs_close(s[0]);
}

/* ---------------------------------------------------------------- grown */

/* Cyclic, batch 10 over 100 records: 10 steps a cycle. Saved at step 3,
 * resumed on 125 records: steps 3..9 are cycle 0 on the old 100 (so cycle
 * 0 still holds each old record exactly once), then cycle 1 on 125 (12
 * steps, each record at most once, 120 distinct). A state saved after the
 * resume resumes the same way again. */
static void test_grown_cyclic_finishes_the_cycle(void **state)
{
    fixture *fx = *state;
    zrs_store *s[1] = {make_store(zt_dir_at(fx, "a"), 100, 0)};
    zld_options o = opts(10, ZSM_CYCLIC, 11);
    zld_loader *r = NULL;
    uint64_t first[3 * 10];
    char *t = state_after(s, 1, o, 3, first);
    append(s[0], 25, 100);

    o.resume_flags = ZLD_RESUME_ALLOW_GROWN;
    assert_int_equal(resume(&r, s, 1, o, t), ZR_OK);
    zt_assert_mentions(zld_resume_note(r), "grown data");
    char *mid = state_of(r); /* at step 3, before the switch */
    zt_assert_mentions(mid, "\"schedule\":[{\"from\":0,\"length\":100,\"base\":0},"
                            "{\"from\":10,\"length\":125,\"base\":12}]");
    uint64_t rest[7 * 10], next[12 * 10];
    take(r, 7, 10, rest);
    unsigned char seen[125] = {0};
    for (size_t i = 0; i < 30; i++)
        seen[first[i]]++;
    for (size_t i = 0; i < 70; i++) {
        assert_true(rest[i] < 100);
        seen[rest[i]]++;
    }
    for (size_t i = 0; i < 100; i++)
        assert_int_equal(seen[i], 1);
    /* The same steps as a loader that never saw the growth. */
    zsm_config c = {100, 10, 11, ZSM_CYCLIC, 0, 1};
    expect_steps(&c, 3, 7, rest);
    /* Cycle 1 over 125 records: the sampler's cycle 1 of that length. */
    char *t2 = state_of(r);
    zt_assert_mentions(t2, "\"schedule\"");
    take(r, 12, 10, next);
    memset(seen, 0, sizeof seen);
    zsm_config c2 = {125, 10, 11, ZSM_CYCLIC, 0, 1};
    expect_steps(&c2, 12, 12, next);
    for (size_t i = 0; i < 12 * 10; i++)
        assert_int_equal(seen[next[i]]++, 0);
    /* Saved before the switch, or after it, and resumed on the same data:
     * the same steps again. */
    zld_loader *r2 = NULL;
    o.resume_flags = 0;
    assert_int_equal(resume(&r2, s, 1, o, mid), ZR_OK);
    uint64_t again[19 * 10];
    take(r2, 19, 10, again);
    assert_memory_equal(again, rest, sizeof rest);
    assert_memory_equal(again + 70, next, sizeof next);
    zld_close(r2);
    assert_int_equal(resume(&r2, s, 1, o, t2), ZR_OK);
    take(r2, 12, 10, again);
    assert_memory_equal(again, next, sizeof next);
    zld_close(r2);
    zld_state_free(mid);
    zld_close(r);
    zld_state_free(t);
    zld_state_free(t2);
    zrs_close(s[0]);
}

/* iid draws from the new length from the resumed step on; sequential
 * finishes its pass over the old records, then starts again at 0. */
static void test_grown_iid_and_sequential(void **state)
{
    fixture *fx = *state;
    zrs_store *s[1] = {make_store(zt_dir_at(fx, "a"), 95, 0)};
    zld_options o = opts(10, ZSM_IID, 2);
    zld_loader *r = NULL;
    char *ti = state_after(s, 1, o, 4, NULL);
    o.mode = ZSM_SEQUENTIAL;
    char *ts = state_after(s, 1, o, 4, NULL);
    append(s[0], 50, 95);

    o.mode = ZSM_IID;
    o.resume_flags = ZLD_RESUME_ALLOW_GROWN;
    assert_int_equal(resume(&r, s, 1, o, ti), ZR_OK);
    uint64_t got[3 * 10];
    take(r, 3, 10, got);
    zsm_config c = {145, 10, 2, ZSM_IID, 0, 1};
    expect_steps(&c, 4, 3, got);
    zld_close(r);

    /* Sequential at step 4 over 95: window 40..49; the pass over 95 ends
     * with the window 90..99 (mod 95) at step 9; step 10 starts at 0 of
     * 145. */
    o.mode = ZSM_SEQUENTIAL;
    assert_int_equal(resume(&r, s, 1, o, ts), ZR_OK);
    uint64_t seq[8 * 10];
    take(r, 8, 10, seq);
    for (uint64_t k = 0; k < 6; k++)
        for (uint64_t i = 0; i < 10; i++)
            assert_int_equal(seq[k * 10 + i], ((4 + k) * 10 + i) % 95);
    for (uint64_t k = 6; k < 8; k++)
        for (uint64_t i = 0; i < 10; i++)
            assert_int_equal(seq[k * 10 + i], (k - 6) * 10 + i);
    zld_close(r);
    zld_state_free(ti);
    zld_state_free(ts);
    zrs_close(s[0]);
}

/* A finite pass keeps the length it was saved with. */
static void test_grown_pass_keeps_its_length(void **state)
{
    fixture *fx = *state;
    zrs_store *s[1] = {make_store(zt_dir_at(fx, "a"), 50, 0)};
    zld_options o = opts(8, ZSM_SEQUENTIAL, 0);
    o.pass = 1;
    zld_loader *r = NULL;
    char *t = state_after(s, 1, o, 2, NULL);
    zt_assert_mentions(t, "\"pass\":{");
    append(s[0], 30, 50);
    o.resume_flags = ZLD_RESUME_ALLOW_GROWN;
    assert_int_equal(resume(&r, s, 1, o, t), ZR_OK);
    assert_int_equal(zld_steps(r), 7); /* ceil(50 / 8) */
    char *t2 = state_of(r);
    zld_loader *r2 = NULL;
    o.resume_flags = 0;
    assert_int_equal(resume(&r2, s, 1, o, t2), ZR_OK);
    assert_int_equal(zld_steps(r2), 7);
    zld_close(r2);
    zld_close(r);
    /* Other pass options are named. */
    o.shuffle = 1;
    assert_int_equal(resume(&r, s, 1, o, t), ZR_EINVAL);
    assert_msg("pass shuffle: false in the state, true now");
    zld_state_free(t);
    zld_state_free(t2);
    zrs_close(s[0]);
}

/* ---------------------------------------------------- shards, mixtures */

static void test_shards_and_mixtures(void **state)
{
    fixture *fx = *state;
    char p[4][700];
    for (int k = 0; k < 4; k++) {
        char nm[8];
        snprintf(nm, sizeof nm, "s%d", k);
        snprintf(p[k], sizeof p[k], "%s", zt_dir_at(fx, nm));
    }
    zrs_store *sh[4] = {make_store(p[0], 40, 0), make_store(p[1], 60, 40),
                        make_store(p[2], 70, 100), make_store(p[3], 80, 200)};
    /* A concatenation of two shards; then a third shard appears. */
    zrs_concat *c2 = NULL, *c3 = NULL;
    assert_int_equal(zrs_concat_create(&c2, sh, 2), ZR_OK);
    assert_int_equal(zrs_concat_create(&c3, sh, 3), ZR_OK);
    zld_stream st;
    assert_int_equal(zld_stream_from_concat(&st, c2), ZR_OK);
    zld_options o = opts(10, ZSM_CYCLIC, 1);
    zld_loader *l = NULL, *r = NULL;
    assert_int_equal(zld_create_streams(&l, &st, 1, &o), ZR_OK);
    take(l, 3, 10, NULL);
    char *t = state_of(l);
    zt_assert_mentions(t, "\"shards\":2");
    zld_close(l);
    o.resume = t;
    zld_stream st3;
    assert_int_equal(zld_stream_from_concat(&st3, c3), ZR_OK);
    assert_int_equal(zld_create_streams(&r, &st3, 1, &o), ZR_EINVAL);
    assert_msg("170 records now, 100 in the state");
    o.resume_flags = ZLD_RESUME_ALLOW_GROWN;
    assert_int_equal(zld_create_streams(&r, &st3, 1, &o), ZR_OK);
    zld_close(r);
    /* Shards in another order are not the same data. */
    zrs_concat *rev = NULL;
    zrs_store *back[2] = {sh[1], sh[0]};
    assert_int_equal(zrs_concat_create(&rev, back, 2), ZR_OK);
    assert_int_equal(zld_stream_from_concat(&st3, rev), ZR_OK);
    assert_int_equal(zld_create_streams(&r, &st3, 1, &o), ZR_EINVAL);
    assert_msg("shards are not those of the state");
    zld_state_free(t);

    /* A mixture: its sources, weights and modes are in the state. */
    zrs_concat *a = NULL, *b = NULL;
    assert_int_equal(zrs_concat_create(&a, &sh[2], 1), ZR_OK);
    assert_int_equal(zrs_concat_create(&b, &sh[3], 1), ZR_OK);
    zrs_concat *srcs[2] = {a, b}, *swapped[2] = {b, a};
    double w[2] = {0.25, 0.75}, w2[2] = {0.5, 0.5};
    zsm_mode md[2] = {ZSM_IID, ZSM_CYCLIC};
    zld_mixture *m = NULL, *m2 = NULL;
    assert_int_equal(zld_mixture_create(&m, srcs, 2, 1, w, md, 9, 8, 1), ZR_OK);
    zld_stream ms;
    assert_int_equal(zld_mixture_stream(m, 0, &ms), ZR_OK);
    zld_options mo = opts(8, ZSM_SEQUENTIAL, 0);
    assert_int_equal(zld_create_streams(&l, &ms, 1, &mo), ZR_OK);
    take(l, 2, 8, NULL);
    t = state_of(l);
    zt_assert_mentions(t, "\"mixture\":{\"seed\":9");
    zt_assert_mentions(t, "\"weight\":0.25");
    zld_close(l);
    mo.resume = t;
    assert_int_equal(zld_create_streams(&r, &ms, 1, &mo), ZR_OK);
    zld_close(r);
    assert_int_equal(zld_mixture_create(&m2, swapped, 2, 1, w, md, 9, 8, 1), ZR_OK);
    assert_int_equal(zld_mixture_stream(m2, 0, &ms), ZR_OK);
    assert_int_equal(zld_create_streams(&r, &ms, 1, &mo), ZR_EINVAL);
    assert_msg("sources are listed in another order");
    zld_mixture_free(m2);
    assert_int_equal(zld_mixture_create(&m2, srcs, 2, 1, w2, md, 9, 8, 1), ZR_OK);
    assert_int_equal(zld_mixture_stream(m2, 0, &ms), ZR_OK);
    assert_int_equal(zld_create_streams(&r, &ms, 1, &mo), ZR_EINVAL);
    assert_msg("mixture source 0: weight 0.25");
    assert_msg("mixture source 1: weight 0.75");
    zld_mixture_free(m2);
    zld_state_free(t);
    zld_mixture_free(m);
    zrs_concat_close(a);
    zrs_concat_close(b);
    zrs_concat_close(rev);
    zrs_concat_close(c2);
    zrs_concat_close(c3);
    for (int k = 0; k < 4; k++)
        zrs_close(sh[k]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_exact_resume, setup, zt_dir_teardown),
        cmocka_unit_test_setup_teardown(test_differences_are_named, setup, zt_dir_teardown),
        cmocka_unit_test_setup_teardown(test_old_state_loads_with_a_note, setup, zt_dir_teardown),
        cmocka_unit_test_setup_teardown(test_grown_cyclic_finishes_the_cycle, setup,
                                        zt_dir_teardown),
        cmocka_unit_test_setup_teardown(test_grown_iid_and_sequential, setup, zt_dir_teardown),
        cmocka_unit_test_setup_teardown(test_grown_pass_keeps_its_length, setup, zt_dir_teardown),
        cmocka_unit_test_setup_teardown(test_shards_and_mixtures, setup, zt_dir_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
