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
#include <zdict.h>

#include "zr_test_util.h"
#include "zrengine.h"

/* ------------------------------------------------------------- records */

static uint64_t mix(uint64_t x)
{
    x ^= x >> 33;
    x *= UINT64_C(0xff51afd7ed558ccd);
    x ^= x >> 33;
    x *= UINT64_C(0xc4ceb9fe1a85ec53);
    x ^= x >> 33;
    return x;
}

/* Record `id`: its size and bytes are a pure function of the id. */
static uint32_t rec_size(uint64_t id) { return 40 + (uint32_t)(mix(id) % 2600); }

static void rec_fill(uint64_t id, unsigned char *p)
{
    uint32_t n = rec_size(id);
    uint64_t h = mix(id ^ 0x9e3779b97f4a7c15u);
    for (uint32_t j = 0; j < n; j++)
        p[j] = (unsigned char)((j % 7 == 0) ? (h >> (8 * (j / 7 % 8))) : (j * 13 + (id & 0xff)));
}

/* ---------------------------------------------------------------- model */

typedef struct model {
    uint64_t *id;
    uint64_t len, cap;
} model;

static void model_copy(model *dst, const model *src)
{
    if (dst->cap < src->len + 1) {
        dst->cap = src->len + 64;
        dst->id = realloc(dst->id, dst->cap * sizeof *dst->id);
        assert_non_null(dst->id);
    }
    if (src->len) /* an empty model may have no buffer: memcpy(x, NULL, 0) is undefined */
        memcpy(dst->id, src->id, src->len * sizeof *src->id);
    dst->len = src->len;
}

static void model_push(model *m, uint64_t id)
{
    if (m->len == m->cap) {
        m->cap = m->cap ? m->cap * 2 : 256;
        m->id = realloc(m->id, m->cap * sizeof *m->id);
        assert_non_null(m->id);
    }
    m->id[m->len++] = id;
}

static int cmp_desc(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? 1 : x > y ? -1 : 0;
}

/* Swap-last deletion, the specification's way: distinct indices in
 * descending order, each hole takes the current last record. */
static void model_delete(model *m, const uint64_t *idx, uint64_t n)
{
    uint64_t *t = malloc((n ? n : 1) * sizeof *t);
    assert_non_null(t);
    memcpy(t, idx, n * sizeof *t);
    qsort(t, n, sizeof *t, cmp_desc);
    for (uint64_t i = 0; i < n; i++) {
        if (i > 0 && t[i] == t[i - 1])
            continue;
        m->id[t[i]] = m->id[m->len - 1];
        m->len--;
    }
    free(t);
}

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
    model states[MAX_OPS + 1]; /* states[k]: after k completed calls */
} plan;

static uint64_t rng_next(uint64_t *s)
{
    *s += UINT64_C(0x9e3779b97f4a7c15);
    return mix(*s);
}

static void plan_make(plan *p, const model *base, uint64_t *next_id, uint64_t *rng)
{
    p->nops = 4 + (int)(rng_next(rng) % (MAX_OPS - 3));
    model_copy(&p->states[0], base);
    for (int k = 0; k < p->nops; k++) {
        op *o = &p->ops[k];
        memset(o, 0, sizeof *o);
        model *cur = &p->states[k];
        model_copy(&p->states[k + 1], cur);
        model *nxt = &p->states[k + 1];
        uint64_t r = rng_next(rng) % 100;
        if (cur->len > 0 && (r < 30 || cur->len > 500)) {
            o->kind = OP_DELETE;
            o->n = 1 + rng_next(rng) % (cur->len > 500 ? 60 : 10);
            o->index = malloc(o->n * sizeof *o->index);
            assert_non_null(o->index);
            for (uint64_t i = 0; i < o->n; i++) /* duplicates allowed */
                o->index[i] = rng_next(rng) % cur->len;
            model_delete(nxt, o->index, o->n);
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
                model_push(nxt, o->ids[i]);
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
    case OP_APPEND: {
        uint64_t *bounds = malloc((o->n + 1) * sizeof *bounds);
        bounds[0] = 0;
        for (uint64_t i = 0; i < o->n; i++)
            bounds[i + 1] = bounds[i] + rec_size(o->ids[i]);
        unsigned char *buf = malloc(bounds[o->n]);
        for (uint64_t i = 0; i < o->n; i++)
            rec_fill(o->ids[i], buf + bounds[i]);
        int rc = zre_append(e, buf, 0, bounds, o->n, NULL);
        free(buf);
        free(bounds);
        return rc;
    }
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

/* 1 if the store holds exactly model `m`. */
static int store_equals(zre_engine *e, const model *m, char *why, size_t cap)
{
    if (zre_length(e) != m->len) {
        snprintf(why, cap, "length %" PRIu64 " != %" PRIu64, zre_length(e), m->len);
        return 0;
    }
    unsigned char *got = malloc(4096), *want = malloc(4096);
    int ok = 1;
    for (uint64_t i = 0; i < m->len && ok; i++) {
        uint32_t n = rec_size(m->id[i]);
        rec_fill(m->id[i], want);
        int rc = zre_gather(e, &i, 1, got, 4096, n, NULL);
        if (rc != 0) {
            snprintf(why, cap, "record %" PRIu64 ": gather failed: %s", i, zr_last_error());
            ok = 0;
        } else if (memcmp(got, want, n) != 0) {
            snprintf(why, cap, "record %" PRIu64 " differs from record id %" PRIu64, i, m->id[i]);
            ok = 0;
        }
    }
    free(got);
    free(want);
    return ok;
}

/* ------------------------------------------------------------------ test */

typedef struct cstore {
    char path[600];
    zre_codec codec;
    model m;
    uint64_t next_id;
} cstore;

static void train_dictionary(unsigned char *dict, size_t cap, size_t *size)
{
    enum { N = 400 };
    size_t sizes[N], total = 0;
    for (int i = 0; i < N; i++)
        total += sizes[i] = rec_size(100000 + (uint64_t)i);
    unsigned char *buf = malloc(total), *p = buf;
    for (int i = 0; i < N; i++) {
        rec_fill(100000 + (uint64_t)i, p);
        p += sizes[i];
    }
    size_t got = ZDICT_trainFromBuffer(dict, cap, buf, sizes, N);
    free(buf);
    assert_false(ZDICT_isError(got));
    *size = got;
}

static void test_crash_consistency(void **state)
{
    (void)state;
    uint64_t kills_wanted = zt_env_u64("ZR_CRASH_KILLS", 200);
    uint64_t seed = zt_env_u64("ZR_CRASH_SEED", 1);
    char root[512];
    assert_int_equal(zt_mkdtemp(root, sizeof root, "crash"), 0);

    cstore st[3];
    zre_codec codecs[3] = {ZRE_CODEC_RAW, ZRE_CODEC_ZSTD, ZRE_CODEC_ZSTD_DICT};
    unsigned char dict[16384];
    size_t dict_size = 0;
    train_dictionary(dict, sizeof dict, &dict_size);
    for (int s = 0; s < 3; s++) {
        memset(&st[s], 0, sizeof st[s]);
        snprintf(st[s].path, sizeof st[s].path, "%s/%s", root, zre_codec_name(codecs[s]));
        st[s].codec = codecs[s];
        zre_create_options o = {0};
        o.codec = codecs[s];
        if (codecs[s] == ZRE_CODEC_ZSTD_DICT) {
            o.dict = dict;
            o.dict_size = dict_size;
        }
        zre_engine *e;
        assert_int_equal(zre_create_ex(&e, st[s].path, &o), 0);
        assert_int_equal(zre_close(e), 0);
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
        const model *hit = NULL;
        if (store_equals(e, &p.states[done], why1, sizeof why1)) {
            hit = &p.states[done];
        } else if (done < p.nops && store_equals(e, &p.states[done + 1], why2, sizeof why2)) {
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
        model_copy(&cs->m, hit);
        plan_free(&p);
    }
    print_message("crash: %" PRIu64 " kills, %" PRIu64 " uninterrupted runs, %" PRIu64
                  " in-flight calls found committed; killed during append %" PRIu64 ", delete %"
                  PRIu64 ", compact %" PRIu64 ", sync %" PRIu64 "\n", kills, completed_runs,
                  in_flight_committed, killed_in[0], killed_in[1], killed_in[2], killed_in[3]);
    for (int s = 0; s < 3; s++)
        free(st[s].m.id);
    for (int k = 0; k <= MAX_OPS; k++)
        free(p.states[k].id);
    zt_rmtree(root);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_crash_consistency),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
