/*
 * torture_crash.c - crash consistency: a writer child process is killed
 * with SIGKILL at random moments while it appends, deletes, compacts and
 * syncs; the parent then reopens the store (which replays any journal) and
 * checks that it opens, that every record committed by the last completed
 * call is there bit-exact, and that nothing half-written is visible: the
 * store must equal the model after the last completed call, or after the
 * call in flight (which may have committed just before the kill).
 *
 * Built against the shrunk-geometry engine (64 KiB chunks, 64-entry table
 * segments), so kills land around chunk rollover and segment boundaries.
 *
 * Knobs (environment): ZR_CRASH_KILLS (default 200) kill points,
 * ZR_CRASH_SEED (default 1). The run is reproducible for a seed except for
 * where exactly each kill lands, which depends on timing; every outcome
 * is checked the same way.
 */
#include <errno.h>
#include <inttypes.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <fcntl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "zr_test_model.h"
#include "zr_test_util.h"
#include "zrengine.h"

/* ------------------------------------------------------------- records */

/* Records of 40..2639 bytes (the shared model, zr_test_model.h). */
static const zt_recipe recipe = {40, 2639};

static uint64_t mix(uint64_t x) { return zt_splitmix64(&x); }

/* ------------------------------------------------------------------ ops */

enum { OP_APPEND, OP_DELETE, OP_COMPACT, OP_SYNC };

typedef struct op {
    int kind;
    uint64_t n;       /* append: records; delete: indices */
    uint64_t *ids;    /* append: new record ids */
    uint64_t *index;  /* delete: indices */
} op;

#define MAX_OPS 12

typedef struct plan {
    op ops[MAX_OPS];
    int nops;
    zt_model states[MAX_OPS + 1]; /* states[k]: after k completed calls */
} plan;

static uint64_t rng_next(uint64_t *s)
{
    *s += UINT64_C(0x9e3779b97f4a7c15);
    return mix(*s);
}

static void plan_make(plan *p, const zt_model *base, uint64_t *next_id, uint64_t *rng)
{
    p->nops = 4 + (int)(rng_next(rng) % (MAX_OPS - 3));
    zt_model_copy(&p->states[0], base);
    for (int k = 0; k < p->nops; k++) {
        op *o = &p->ops[k];
        memset(o, 0, sizeof *o);
        zt_model *cur = &p->states[k];
        zt_model_copy(&p->states[k + 1], cur);
        zt_model *nxt = &p->states[k + 1];
        uint64_t r = rng_next(rng) % 100;
        if (cur->len > 0 && (r < 30 || cur->len > 500)) {
            o->kind = OP_DELETE;
            o->n = 1 + rng_next(rng) % (cur->len > 500 ? 60 : 10);
            o->index = malloc(o->n * sizeof *o->index);
            assert_non_null(o->index);
            for (uint64_t i = 0; i < o->n; i++) /* duplicates allowed */
                o->index[i] = rng_next(rng) % cur->len;
            zt_model_delete(nxt, o->index, o->n);
        } else if (r < 45) {
            o->kind = OP_COMPACT;
        } else if (r < 55) {
            o->kind = OP_SYNC;
        } else {
            o->kind = OP_APPEND;
            o->n = 1 + rng_next(rng) % 40;
            o->ids = malloc(o->n * sizeof *o->ids);
            assert_non_null(o->ids);
            for (uint64_t i = 0; i < o->n; i++) {
                o->ids[i] = (*next_id)++;
                zt_model_push(nxt, o->ids[i]);
            }
        }
    }
}

static void plan_free(plan *p)
{
    for (int k = 0; k < p->nops; k++) {
        free(p->ops[k].ids);
        free(p->ops[k].index);
    }
}

/* -------------------------------------------------------------- the child */

static int run_op(zre_engine *e, const op *o)
{
    switch (o->kind) {
    case OP_APPEND: return zt_append_ids(e, &recipe, o->ids, o->n);
    case OP_DELETE: return zre_delete(e, o->index, o->n);
    case OP_COMPACT: return zre_compact(e);
    default: return zre_sync(e);
    }
}

/* Runs the plan, reporting each completed call with one byte on `fd`.
 * Never returns. */
static void child_main(const char *path, const plan *p, int fd)
{
    zre_engine *e = NULL;
    if (zre_open(&e, path) != 0) {
        fprintf(stderr, "crash child: open failed: %s\n", zr_last_error());
        _exit(3);
    }
    for (int k = 0; k < p->nops; k++) {
        if (run_op(e, &p->ops[k]) != 0) {
            fprintf(stderr, "crash child: op %d failed: %s\n", k, zr_last_error());
            _exit(4);
        }
        char c = 1;
        if (write(fd, &c, 1) != 1)
            _exit(5);
    }
    if (zre_close(e) != 0)
        _exit(6);
    _exit(0);
}

/* ------------------------------------------------------------ checking */

/* ------------------------------------------------------------------ test */

typedef struct cstore {
    char path[600];
    zre_codec codec;
    zt_model m;
    uint64_t next_id;
} cstore;

static void test_crash_consistency(void **state)
{
    (void)state;
    uint64_t kills_wanted = zt_env_u64("ZR_CRASH_KILLS", 200);
    uint64_t seed = zt_env_u64("ZR_CRASH_SEED", 1);
    char root[512];
    assert_int_equal(zt_mkdtemp(root, sizeof root, "crash"), 0);

    cstore st[3];
    zre_codec codecs[3] = {ZRE_CODEC_RAW, ZRE_CODEC_ZSTD, ZRE_CODEC_ZSTD_DICT};
    for (int s = 0; s < 3; s++) {
        memset(&st[s], 0, sizeof st[s]);
        zt_model_init(&st[s].m, &recipe, 0);
        snprintf(st[s].path, sizeof st[s].path, "%s/%s", root, zre_codec_name(codecs[s]));
        st[s].codec = codecs[s];
        assert_int_equal(zre_close(zt_create_store(st[s].path, codecs[s], &recipe)), 0);
    }

    uint64_t killed_in[4] = {0};
    uint64_t rng = seed, kills = 0, completed_runs = 0, in_flight_committed = 0;
    uint64_t window_us = 20000; /* adapted to how long a whole plan takes */
    plan p;
    memset(&p, 0, sizeof p);
    for (uint64_t it = 0; kills < kills_wanted; it++) {
        if (it > kills_wanted * 20)
            fail_msg("only %" PRIu64 " kills landed in %" PRIu64 " runs", kills, it);
        cstore *cs = &st[it % 3];
        plan_make(&p, &cs->m, &cs->next_id, &rng);
        int fds[2];
        assert_int_equal(pipe(fds), 0);
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
            close(fds[0]);
            child_main(cs->path, &p, fds[1]);
        }
        close(fds[1]);
        uint64_t delay = rng_next(&rng) % (window_us + 1);
        struct timespec ts = {(time_t)(delay / 1000000), (long)(delay % 1000000) * 1000};
        nanosleep(&ts, NULL);
        kill(pid, SIGKILL);
        int status = 0;
        assert_int_equal(waitpid(pid, &status, 0), pid);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        int done = 0;
        char b[64];
        ssize_t r;
        while ((r = read(fds[0], b, sizeof b)) > 0)
            done += (int)r;
        close(fds[0]);
        if (WIFEXITED(status)) {
            if (WEXITSTATUS(status) != 0)
                fail_msg("run %" PRIu64 ": writer child failed (exit %d)", it, WEXITSTATUS(status));
            assert_int_equal(done, p.nops);
            completed_runs++;
            /* Not killed: widen the window towards a whole plan. */
            /* Signed arithmetic: tv_nsec may be smaller in t1 than in t0,
             * and a negative difference cast to unsigned once turned the
             * window into years of sleep (a hung suite). */
            int64_t took_ns = (int64_t)(t1.tv_sec - t0.tv_sec) * 1000000000 +
                              (int64_t)(t1.tv_nsec - t0.tv_nsec);
            uint64_t took = took_ns > 0 ? (uint64_t)took_ns / 1000 : 0;
            window_us = (window_us + took) / 2 + 100;
        } else {
            assert_true(WIFSIGNALED(status));
            kills++;
            if (done < p.nops)
                killed_in[p.ops[done].kind]++;
        }

        /* Reopen (replays a journal if the kill left one) and compare;
         * every other run as a reader, which must never see a half-applied
         * delete or compact either: a reader writes nothing, so it refuses
         * (ZR_ESTATE) while a journal is pending, and reads the store once
         * a writable open has recovered it. */
        zre_engine *e = NULL;
        int orc = zre_open_ex(&e, cs->path, it % 2 ? ZRE_OPEN_READONLY : 0);
        if (orc == ZR_ESTATE && it % 2) {
            zre_engine *w = NULL;
            if (zre_open(&w, cs->path) != 0 || zre_close(w) != 0)
                fail_msg("run %" PRIu64 ": recovering open failed: %s", it, zr_last_error());
            orc = zre_open_ex(&e, cs->path, ZRE_OPEN_READONLY);
        }
        if (orc != 0)
            fail_msg("run %" PRIu64 " (%s, %d of %d calls done): reopen failed: %s", it,
                     zre_codec_name(cs->codec), done, p.nops, zr_last_error());
        char why1[256] = "", why2[256] = "";
        const zt_model *hit = NULL;
        if (zt_model_matches(e, &p.states[done], 1, why1, sizeof why1)) {
            hit = &p.states[done];
        } else if (done < p.nops && zt_model_matches(e, &p.states[done + 1], 1, why2, sizeof why2)) {
            hit = &p.states[done + 1];
            in_flight_committed++;
        }
        if (!hit)
            fail_msg("run %" PRIu64 " (%s): after %d of %d calls (call %d was %s) the store matches "
                     "neither state: [%s] / [%s]", it, zre_codec_name(cs->codec), done, p.nops, done,
                     done < p.nops ? (const char *[]){"append", "delete", "compact",
                                                       "sync"}[p.ops[done].kind] : "-",
                     why1, why2);
        zre_stats sst;
        assert_int_equal(zre_get_stats(e, &sst), 0);
        assert_true(sst.chunk_bytes >= sst.live_bytes);
        assert_int_equal(zre_close(e), 0);
        zt_model_copy(&cs->m, hit);
        plan_free(&p);
    }
    print_message("crash: %" PRIu64 " kills, %" PRIu64 " uninterrupted runs, %" PRIu64
                  " in-flight calls found committed; killed during append %" PRIu64 ", delete %"
                  PRIu64 ", compact %" PRIu64 ", sync %" PRIu64 "\n", kills, completed_runs,
                  in_flight_committed, killed_in[0], killed_in[1], killed_in[2], killed_in[3]);
    for (int s = 0; s < 3; s++)
        zt_model_free(&st[s].m);
    for (int k = 0; k <= MAX_OPS; k++)
        zt_model_free(&p.states[k]);
    zt_rmtree(root);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_crash_consistency),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
