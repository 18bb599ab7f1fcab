/*
 * torture_powerloss.c - simulated power loss. SIGKILL keeps the page
 * cache, so it never tests fsync ordering; this does.
 *
 * The failpoint platform's observer records every call that changes a
 * file (create, write, truncate, rename, unlink) and every barrier (fsync
 * of a file, fsync of the directory) while a workload runs on a store. A
 * crash state at point p of that log is then built in the manner of ALICE
 * and CrashMonkey, assuming no more than POSIX promises: a file's bytes
 * and size are durable only up to its last fsync before p, directory
 * entries only up to the directory's last fsync; every change after that
 * may or may not have reached the disk, in any combination. For each p the
 * simulation takes the state with none of the pending changes and the one
 * with all of them (the prefix as the process saw it); at each barrier and
 * at the end also each pending change alone left out and each alone kept.
 * Each distinct state is written to a fresh directory and opened:
 *   - it opens, or is refused with a clear error that names recovery, and
 *     then recovers;
 *   - opened, it holds every record whose durability call had returned
 *     before p (sync, close, delete, compact), byte-exact: the store is the
 *     model after some call between the last such call and the call in
 *     flight, or, when only appends followed, that model followed by
 *     records those appends wrote, each either exact or unreadable (a zstd
 *     frame that did not land) or all zero (raw bytes that did not land);
 *     never a record of anything else (a copy of a moved record, a
 *     deleted one);
 *   - it then takes an append and reopens read-only.
 *
 * Workloads: random interleavings of append, sync, delete (of the last
 * records and of records in the middle), compact, reopen, reopen with
 * recovery and power loss (the workload goes on from a crash state that
 * needs recovery: its header kept, its unsynced table entries and bytes
 * lost), on raw, zstd and zstd_dict stores, drawn from a seed; plus one
 * named workload per defect found before (the regression tests).
 *
 * Knobs: ZR_POWERLOSS_WORKLOADS (default 24) random workloads from seed
 * ZR_POWERLOSS_SEED (default 1) on; ZR_POWERLOSS_DEBUG=1 prints the calls
 * and records of a failing state; ZR_POWERLOSS_COUNT=1 goes on past a
 * failing state, counting the violations (a workload whose power loss
 * recovered to no acceptable state is abandoned there), so a run against
 * an engine with a defect says how many states it breaks, and still
 * fails at the end. Prints the counts at the end.
 */
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "zr_platform.h"
#include "zr_test_model.h"
#include "zr_test_util.h"
#include "zrengine.h"

/* 64 KiB chunks and 64-entry segments in this build: a few hundred
 * records cross both. */
static const zt_recipe recipe = {16, 1516};

/* ----------------------------------------------------------- event log */

typedef struct ev {
    zrp_fp_event_kind kind;
    char name[64];  /* file name inside the store directory */
    char name2[64]; /* rename target */
    uint64_t offset;
    unsigned char *data;
    size_t len;
} ev;

typedef struct evlog {
    ev *e;
    size_t n, cap;
    const char *dir;
} evlog;

static const char *base_name(const char *dir, const char *path)
{
    size_t d = strlen(dir);
    if (strncmp(path, dir, d) != 0)
        return NULL;
    if (path[d] == '\0')
        return ""; /* the directory itself */
    if (path[d] != '/')
        return NULL;
    return path + d + 1;
}

static void on_event(const zrp_fp_event *x, void *arg)
{
    evlog *L = arg;
    const char *nm = base_name(L->dir, x->path);
    if (!nm)
        return; /* outside the store (the parent's fsync) */
    if (L->n == L->cap) {
        L->cap = L->cap ? L->cap * 2 : 1024;
        L->e = realloc(L->e, L->cap * sizeof *L->e);
    }
    ev *e = &L->e[L->n++];
    memset(e, 0, sizeof *e);
    e->kind = x->kind;
    snprintf(e->name, sizeof e->name, "%s", nm);
    if (x->path2) {
        const char *n2 = base_name(L->dir, x->path2);
        snprintf(e->name2, sizeof e->name2, "%s", n2 ? n2 : "");
    }
    e->offset = x->offset;
    if (x->kind == ZRP_EV_WRITE) {
        e->data = malloc(x->len);
        memcpy(e->data, x->data, x->len);
        e->len = x->len;
    }
}

static void evlog_free(evlog *L)
{
    for (size_t k = 0; k < L->n; k++)
        free(L->e[k].data);
    free(L->e);
    memset(L, 0, sizeof *L);
}

/* ------------------------------------------------ simulated file system */

#define MAXFILES 64
#define MAXINODES 512

typedef struct inode {
    unsigned char *b;
    size_t len, cap;
} inode;

typedef struct fsys {
    inode ino[MAXINODES];
    int nino;
    char names[MAXFILES][64];
    int name_ino[MAXFILES];
    int nnames;
} fsys;

static void ino_write(inode *f, uint64_t off, const unsigned char *d, size_t n)
{
    size_t end = (size_t)off + n;
    if (end > f->cap) {
        f->cap = end * 2 + 64;
        f->b = realloc(f->b, f->cap);
    }
    if (off > f->len)
        memset(f->b + f->len, 0, (size_t)off - f->len);
    memcpy(f->b + off, d, n);
    if (end > f->len)
        f->len = end;
}

static void ino_truncate(inode *f, uint64_t size)
{
    if (size > f->cap) {
        f->cap = (size_t)size + 64;
        f->b = realloc(f->b, f->cap);
    }
    if (size > f->len)
        memset(f->b + f->len, 0, (size_t)size - f->len);
    f->len = (size_t)size;
}

static int fs_lookup(const fsys *fs, const char *name)
{
    for (int i = 0; i < fs->nnames; i++)
        if (strcmp(fs->names[i], name) == 0)
            return i;
    return -1;
}

static void fs_bind(fsys *fs, const char *name, int ino)
{
    int i = fs_lookup(fs, name);
    if (i < 0) {
        assert_true(fs->nnames < MAXFILES);
        i = fs->nnames++;
        size_t n = strlen(name);
        assert_true(n < sizeof fs->names[i]);
        memcpy(fs->names[i], name, n + 1);
    }
    fs->name_ino[i] = ino;
}

static void fs_unbind(fsys *fs, const char *name)
{
    int i = fs_lookup(fs, name);
    if (i < 0)
        return;
    fs->nnames--;
    if (i != fs->nnames) {
        memcpy(fs->names[i], fs->names[fs->nnames], sizeof fs->names[i]);
        fs->name_ino[i] = fs->name_ino[fs->nnames];
    }
}

static void fs_free(fsys *fs)
{
    for (int i = 0; i < fs->nino; i++)
        free(fs->ino[i].b);
    memset(fs, 0, sizeof *fs);
}

static void fs_copy(fsys *dst, const fsys *src)
{
    memcpy(dst, src, sizeof *dst);
    for (int i = 0; i < src->nino; i++) {
        dst->ino[i].b = malloc(src->ino[i].cap ? src->ino[i].cap : 1);
        if (src->ino[i].len)
            memcpy(dst->ino[i].b, src->ino[i].b, src->ino[i].len);
    }
}

/* Load the directory's files as the durable base state. */
static void fs_load(fsys *fs, const char *dir)
{
    memset(fs, 0, sizeof *fs);
    DIR *d = opendir(dir);
    assert_non_null(d);
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (de->d_name[0] == '.')
            continue;
        char p[1200];
        if (strlen(de->d_name) >= 64 || strlen(dir) > 900)
            fail_msg("unexpected file %s in %s", de->d_name, dir);
        snprintf(p, sizeof p, "%s/%s", dir, de->d_name);
        unsigned char *buf = NULL;
        size_t n = zt_slurp(p, &buf);
        int ino = fs->nino++;
        fs->ino[ino].b = buf;
        fs->ino[ino].len = n;
        fs->ino[ino].cap = n;
        fs_bind(fs, de->d_name, ino);
    }
    closedir(d);
}

static void fs_grow_inodes(fsys *fs, int ino)
{
    assert_true(ino < MAXINODES);
    while (fs->nino <= ino) {
        memset(&fs->ino[fs->nino], 0, sizeof fs->ino[0]);
        fs->nino++;
    }
}

/* Apply event `e` to `fs` (a view). Inode numbers are shared between the
 * views: a CREATE allocates the same number in both, in log order. */
static void fs_apply(fsys *fs, const ev *e, int ino)
{
    int i;
    switch (e->kind) {
    case ZRP_EV_CREATE:
        fs_grow_inodes(fs, ino);
        fs_bind(fs, e->name, ino);
        break;
    case ZRP_EV_WRITE:
    case ZRP_EV_TRUNCATE:
        /* By inode: the file may have been renamed or unlinked since. */
        fs_grow_inodes(fs, ino);
        if (e->kind == ZRP_EV_WRITE)
            ino_write(&fs->ino[ino], e->offset, e->data, e->len);
        else
            ino_truncate(&fs->ino[ino], e->offset);
        break;
    case ZRP_EV_RENAME:
        if ((i = fs_lookup(fs, e->name)) >= 0) {
            int moved = fs->name_ino[i];
            fs_unbind(fs, e->name);
            fs_bind(fs, e->name2, moved);
        }
        break;
    case ZRP_EV_UNLINK:
        fs_unbind(fs, e->name);
        break;
    default:
        break;
    }
}

/* Write `fs` to directory `dir` (fresh). */
static void fs_write_out(const fsys *fs, const char *dir)
{
    zt_rmtree(dir);
    assert_int_equal(mkdir(dir, 0777), 0);
    for (int i = 0; i < fs->nnames; i++) {
        char p[900];
        snprintf(p, sizeof p, "%s/%s", dir, fs->names[i]);
        const inode *f = &fs->ino[fs->name_ino[i]];
        zt_write_file(p, f->b, f->len);
    }
}

/* A pure hash of x (one splitmix64 step from state x). */
static uint64_t mix(uint64_t x) { return zt_splitmix64(&x); }

static uint64_t fs_hash(const fsys *fs)
{
    /* Order-independent over names; content hashed per name. */
    uint64_t h = 0;
    for (int i = 0; i < fs->nnames; i++) {
        uint64_t x = 1469598103934665603u;
        for (const char *c = fs->names[i]; *c; c++)
            x = (x ^ (unsigned char)*c) * 1099511628211u;
        const inode *f = &fs->ino[fs->name_ino[i]];
        for (size_t j = 0; j < f->len; j++)
            x = (x ^ f->b[j]) * 1099511628211u;
        x = (x ^ f->len) * 1099511628211u;
        h += mix(x);
    }
    return h;
}

/* ------------------------------------------------------------ workloads */

typedef enum wop {
    W_APPEND, W_SYNC, W_DEL_TAIL, W_DEL_MID, W_COMPACT, W_REOPEN, W_RECOVER, W_POWERLOSS, W_END
} wop;
static const char *const wop_names[] = {"append", "sync", "delete-tail", "delete", "compact",
                                         "reopen", "recover", "power-loss", "end"};

/* One step of a workload. For appends `n` records; for deletes `n`
 * indices in idx (explicit), or with n == 0 drawn when the step runs. */
typedef struct step {
    wop op;
    uint64_t n;
    uint64_t idx[8];
} step;

#define MAXSTEPS 40

typedef struct plan {
    const char *name; /* a named regression, or NULL for a random one */
    uint64_t seed;
    zre_codec codec;
    uint64_t base_records;
    step steps[MAXSTEPS];
    int nsteps;
} plan;

/* A call of the workload and the model after it. */
typedef struct call {
    size_t ev_start, ev_end; /* events [start, end) belong to this call */
    wop op;
    int durable; /* every record is durable when it returns */
    zt_model after;
} call;

/* One stretch of a workload between power losses: the store's files at
 * its start (all durable), the model then, its calls and their events. */
typedef struct segment {
    fsys base_fs;
    zt_model base;
    call calls[MAXSTEPS + 2];
    size_t ncalls;
    evlog log;
} segment;

static uint64_t g_states, g_opened, g_refused, g_torn, g_workloads, g_segments;
static uint64_t g_violations, g_abandoned;
static int g_count_only; /* ZR_POWERLOSS_COUNT: count violations, do not stop at the first */
static char g_root[512];

/* A crash state breaks a promise: fail the test, or, counting, say so
 * once per state and go on. */
static void violation(const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (!g_count_only)
        fail_msg("%s", msg);
    g_violations++;
    fprintf(stderr, "violation: %s\n", msg);
}

/* ------------------------------------------------------------- checking */

static void debug_dump(zre_engine *e, const segment *s)
{
    if (!getenv("ZR_POWERLOSS_DEBUG"))
        return;
    for (size_t c = 0; c < s->ncalls; c++)
        fprintf(stderr, "call %zu: %s, events [%zu, %zu), durable %d, length %" PRIu64 "\n", c,
                wop_names[s->calls[c].op], s->calls[c].ev_start, s->calls[c].ev_end,
                s->calls[c].durable, s->calls[c].after.len);
    for (uint64_t i = 0; i < zre_length(e) && i < 300; i++) {
        uint64_t sz = 0;
        zre_record_sizes(e, &i, 1, &sz);
        fprintf(stderr, "  record %" PRIu64 ": %" PRIu64 " bytes, check %d\n", i, sz,
                zre_check_record(e, i));
    }
}

/* Records [from, length) of `e` are what the appends after the matched
 * call wrote there (the ids of `full`): exact, unreadable, or all zero. */
static int tail_ok(zre_engine *e, const zt_model *full, uint64_t from, uint64_t *torn)
{
    uint64_t n = zre_length(e);
    if (n > full->len)
        return 0;
    unsigned char got[2048], want[2048];
    for (uint64_t k = from; k < n; k++) {
        uint32_t sz = zt_rec_size(&recipe, full->id[k]);
        uint64_t have = 0;
        if (zre_record_sizes(e, &k, 1, &have) != 0 || have != sz)
            return 0;
        zt_rec_fill(&recipe, full->id[k], want);
        if (zre_gather(e, &k, 1, got, sizeof got, sz, NULL) != 0) {
            (*torn)++;
            continue;
        }
        if (memcmp(got, want, sz) == 0)
            continue;
        for (uint32_t j = 0; j < sz; j++)
            if (got[j])
                return 0;
        (*torn)++;
    }
    return 1;
}

/* Which model the store matches: the index j (0 = the segment's base,
 * c + 1 = after call c) of the latest model it equals exactly, or, when
 * only appends (and syncs, reopens) followed model j, the one it continues
 * with their records
 * (*torn counts the records that did not fully land); -1 for none. */
static long match_state(zre_engine *e, const segment *s, size_t p, uint64_t *torn)
{
    size_t first = 0, inflight = 0;
    for (size_t c = 0; c < s->ncalls; c++) {
        if (s->calls[c].ev_end <= p && s->calls[c].durable)
            first = c + 1;
        /* A call is in flight once one of its events is in the state (or
         * done, for a call that wrote nothing). */
        if (s->calls[c].ev_start < p || s->calls[c].ev_end <= p)
            inflight = c + 1;
    }
    char why[600];
    for (size_t j = inflight + 1; j-- > first;) {
        const zt_model *mj = j == 0 ? &s->base : &s->calls[j - 1].after;
        if (zt_model_matches(e, mj, 1, why, sizeof why))
            return (long)j;
    }
    for (size_t j = inflight + 1; j-- > first;) {
        /* The appends (and syncs, reopens) right after model j, up to the
         * call in flight: their records may follow it, torn. */
        size_t k = j;
        while (k < inflight && s->calls[k].op != W_DEL_TAIL && s->calls[k].op != W_DEL_MID &&
               s->calls[k].op != W_COMPACT)
            k++;
        const zt_model *mj = j == 0 ? &s->base : &s->calls[j - 1].after;
        uint64_t t = 0;
        if (k > j && zt_model_matches(e, mj, 0, why, sizeof why) &&
            tail_ok(e, &s->calls[k - 1].after, mj->len, &t)) {
            *torn += t;
            return (long)j;
        }
    }
    return -1;
}

/* Open the crash state in `dir` (recovering when refused naming it),
 * check it, append, reopen. Returns the model index it matched exactly,
 * or -1 when it matched with torn unsynced records. */
static long check_state(const fsys *fs, const char *dir, const segment *s, size_t p,
                        const char *how)
{
    fs_write_out(fs, dir);
    g_states++;
    zre_engine *e = NULL;
    int rc = zre_open_ex(&e, dir, 0);
    if (rc != 0) {
        const char *d = zr_last_error();
        if (!strstr(d, "recover")) {
            violation("crash state at event %zu (%s): open refused without naming recovery: %s",
                      p, how, d);
            return -1;
        }
        g_refused++;
        rc = zre_open_ex(&e, dir, ZRE_OPEN_RECOVER);
        if (rc != 0) {
            violation("crash state at event %zu (%s): the recovery open failed: %s", p, how,
                      zr_last_error());
            return -1;
        }
    } else {
        g_opened++;
    }
    uint64_t torn = 0;
    long j = match_state(e, s, p, &torn);
    if (j < 0) {
        debug_dump(e, s);
        violation("crash state at event %zu (%s): the store (%" PRIu64 " records) lost or "
                  "damaged records whose durability call had returned, or holds a record no "
                  "call wrote there", p, how, zre_length(e));
        zre_close(e);
        return -1;
    }
    g_torn += torn;
    /* A recovered store takes a new append and reopens. */
    unsigned char rec[16] = {1, 2, 3};
    assert_int_equal(zre_append(e, rec, 16, NULL, 1, NULL), 0);
    assert_int_equal(zre_close(e), 0);
    assert_int_equal(zre_open_ex(&e, dir, ZRE_OPEN_READONLY), 0);
    zre_close(e);
    return torn ? -1 : j;
}

/* -------------------------------------------------------- crash states */

/* The replay of a segment's log: `cur` the process's view, `dur` the
 * durable one, `pend` the events since their last barrier with the inode
 * each touched (numbering shared between the views). */
typedef struct replay {
    fsys cur, dur;
    size_t *pend;
    int *pino;
    size_t np;
} replay;

/* A replay at the start of segment `s`. */
static void replay_init(replay *r, const segment *s)
{
    memset(r, 0, sizeof *r);
    fs_copy(&r->cur, &s->base_fs);
    fs_copy(&r->dur, &s->base_fs);
    r->pend = malloc((s->log.n + 1) * sizeof *r->pend);
    r->pino = malloc((s->log.n + 1) * sizeof *r->pino);
}

static void replay_free(replay *r)
{
    free(r->pend);
    free(r->pino);
    fs_free(&r->cur);
    fs_free(&r->dur);
}

/* The state `dur` plus the pending events `keep` selects. */
static void build_state(const replay *r, const evlog *L, const unsigned char *keep, fsys *out)
{
    fs_copy(out, &r->dur);
    for (size_t k = 0; k < r->np; k++)
        if (keep[k])
            fs_apply(out, &L->e[r->pend[k]], r->pino[k]);
}

/* Advance the replay by event p. */
static void replay_step(replay *r, const evlog *L, size_t p)
{
    const ev *x = &L->e[p];
    int ino = -1;
    if (x->kind == ZRP_EV_CREATE) {
        ino = r->cur.nino;
        fs_apply(&r->cur, x, ino);
    } else if (x->kind == ZRP_EV_WRITE || x->kind == ZRP_EV_TRUNCATE) {
        int i = fs_lookup(&r->cur, x->name);
        assert_true(i >= 0);
        ino = r->cur.name_ino[i];
        fs_apply(&r->cur, x, ino);
    } else if (x->kind == ZRP_EV_RENAME || x->kind == ZRP_EV_UNLINK) {
        fs_apply(&r->cur, x, -1);
    }
    size_t w = 0;
    if (x->kind == ZRP_EV_FSYNC || x->kind == ZRP_EV_FSYNC_DIR) {
        /* fsync of a file: its data and size are durable; of the
         * directory: its creates, renames and unlinks, in order. */
        int i = fs_lookup(&r->cur, x->name);
        int fino = x->kind == ZRP_EV_FSYNC && i >= 0 ? r->cur.name_ino[i] : -2;
        for (size_t k = 0; k < r->np; k++) {
            const ev *y = &L->e[r->pend[k]];
            int data = y->kind == ZRP_EV_WRITE || y->kind == ZRP_EV_TRUNCATE;
            int covered = x->kind == ZRP_EV_FSYNC ? data && r->pino[k] == fino : !data;
            if (covered) {
                fs_apply(&r->dur, y, r->pino[k]);
            } else {
                r->pend[w] = r->pend[k];
                r->pino[w] = r->pino[k];
                w++;
            }
        }
        r->np = w;
    } else if (x->kind != ZRP_EV_MKDIR && x->kind != ZRP_EV_RMDIR) {
        r->pend[r->np] = p;
        r->pino[r->np] = ino;
        r->np++;
    }
}

/* Check every distinct crash state of segment `s` (see the file comment). */
static void check_segment(const segment *s, const char *out, const char *label)
{
    const evlog *L = &s->log;
    replay r;
    replay_init(&r, s);
    enum { SEEN = 1 << 17 };
    uint64_t *seen = calloc(SEEN, sizeof *seen);
    size_t nseen = 0;
    unsigned char *keep = malloc(L->n + 1);
    for (size_t p = 0; p <= L->n; p++) {
        int barrier = p == L->n || L->e[p].kind == ZRP_EV_FSYNC ||
                      L->e[p].kind == ZRP_EV_FSYNC_DIR;
        size_t variants = 2 + (barrier ? 2 * r.np : 0);
        for (size_t v = 0; v < variants; v++) {
            for (size_t k = 0; k < r.np; k++)
                keep[k] = v == 0 ? 0 : v == 1 ? 1 : v < 2 + r.np ? k != v - 2 : k == v - 2 - r.np;
            fsys tmp;
            build_state(&r, L, keep, &tmp);
            uint64_t h = fs_hash(&tmp) | 1;
            size_t slot = (size_t)(h & (SEEN - 1));
            while (seen[slot] && seen[slot] != h)
                slot = (slot + 1) & (SEEN - 1);
            if (!seen[slot]) {
                assert_true(++nseen < SEEN / 2);
                seen[slot] = h;
                char how[160];
                snprintf(how, sizeof how, "%s, %s", v == 0 ? "none pending" : v == 1 ? "all pending"
                         : v < 2 + r.np ? "one pending lost" : "one pending kept", label);
                check_state(&tmp, out, s, p, how);
            }
            fs_free(&tmp);
        }
        if (p < L->n)
            replay_step(&r, L, p);
    }
    free(keep);
    free(seen);
    replay_free(&r);
}

/* The state a power loss at the end of segment `s` leaves when meta.zr's
 * pending writes reached the disk and nothing else pending did: a header
 * ahead of the table and chunk files. */
static void power_loss_state(const segment *s, fsys *out)
{
    const evlog *L = &s->log;
    replay r;
    replay_init(&r, s);
    for (size_t p = 0; p < L->n; p++)
        replay_step(&r, L, p);
    unsigned char *keep = malloc(r.np + 1);
    for (size_t k = 0; k < r.np; k++)
        keep[k] = strcmp(L->e[r.pend[k]].name, "meta.zr") == 0;
    build_state(&r, L, keep, out);
    free(keep);
    replay_free(&r);
}

/* -------------------------------------------------------------- running */

typedef struct runner {
    const plan *pl;
    uint64_t rng;
    char dir[2][700]; /* the store, alternating at each power loss */
    int which;
    zre_engine *e;
    zt_model m;
    segment seg;
} runner;

static uint64_t draw(runner *r, uint64_t n) { return n ? zt_splitmix64(&r->rng) % n : 0; }

static void open_store(runner *r, unsigned flags)
{
    int rc = zre_open_ex(&r->e, r->dir[r->which], flags);
    if (rc != 0)
        fail_msg("%s: open: %s", r->dir[r->which], zr_last_error());
}

/* Run one step on the open store, updating the model. */
static void run_step(runner *r, const step *st, call *c)
{
    uint64_t idx[8], n = st->n;
    switch (st->op) {
    case W_APPEND:
        assert_int_equal(zt_model_append(r->e, &r->m, n), 0);
        break;
    case W_SYNC:
        assert_int_equal(zre_sync(r->e), 0);
        break;
    case W_DEL_TAIL:
    case W_DEL_MID:
        if (r->m.len == 0)
            break;
        if (n) {
            memcpy(idx, st->idx, n * sizeof *idx);
        } else if (st->op == W_DEL_TAIL) {
            n = 1 + draw(r, r->m.len < 3 ? r->m.len : 3);
            for (uint64_t k = 0; k < n; k++)
                idx[k] = r->m.len - 1 - k;
        } else {
            n = 1 + draw(r, 6);
            for (uint64_t k = 0; k < n; k++)
                idx[k] = draw(r, r->m.len);
        }
        if (zre_delete(r->e, idx, n) != 0)
            fail_msg("delete: %s", zr_last_error());
        zt_model_delete(&r->m, idx, n);
        break;
    case W_COMPACT:
        assert_int_equal(zre_compact(r->e), 0);
        break;
    case W_REOPEN:
    case W_RECOVER:
        assert_int_equal(zre_close(r->e), 0);
        open_store(r, st->op == W_RECOVER ? ZRE_OPEN_RECOVER : 0);
        break;
    case W_END:
        assert_int_equal(zre_close(r->e), 0);
        r->e = NULL;
        break;
    default:
        break;
    }
    c->op = st->op;
    c->durable = st->op != W_APPEND;
}

/* Start a segment on the (closed, durable) store in the current dir. */
static void segment_start(runner *r)
{
    segment *s = &r->seg;
    fs_load(&s->base_fs, r->dir[r->which]);
    zt_model_copy(&s->base, &r->m);
    s->ncalls = 0;
    memset(&s->log, 0, sizeof s->log);
    s->log.dir = r->dir[r->which];
    zrp_fp_observe(on_event, &s->log);
}

static void segment_end(runner *r)
{
    segment *s = &r->seg;
    zrp_fp_observe(NULL, NULL);
    char out[800], label[200];
    snprintf(out, sizeof out, "%s/crash", g_root);
    if (r->pl->name)
        snprintf(label, sizeof label, "%s, codec %s", r->pl->name, zre_codec_name(r->pl->codec));
    else
        snprintf(label, sizeof label, "seed %" PRIu64 ", codec %s", r->pl->seed,
                 zre_codec_name(r->pl->codec));
    check_segment(s, out, label);
    g_segments++;
}

static void segment_free(segment *s)
{
    fs_free(&s->base_fs);
    zt_model_free(&s->base);
    for (size_t c = 0; c < s->ncalls; c++)
        zt_model_free(&s->calls[c].after);
    evlog_free(&s->log);
    s->ncalls = 0;
}

/* A power loss: the workload goes on in the other directory from the
 * crash state with meta.zr ahead of the rest, through a recovery open.
 * The recovered store must be exactly one of the acceptable models.
 * Returns 1 when, counting violations, it was not and the workload ends
 * here (the segment is freed and the store closed). */
static int power_loss(runner *r)
{
    segment *s = &r->seg;
    fsys crash;
    power_loss_state(s, &crash);
    segment_end(r);
    zre_engine *old = r->e; /* its closing writes go to the old dir, unobserved */
    r->e = NULL;
    r->which ^= 1;
    fs_write_out(&crash, r->dir[r->which]);
    fs_free(&crash);
    open_store(r, ZRE_OPEN_RECOVER);
    uint64_t torn = 0;
    long j = match_state(r->e, s, s->log.n, &torn);
    if (j < 0 || torn) {
        violation("power loss (%s): the recovered store matches no state",
                  r->pl->name ? r->pl->name : "random");
        g_abandoned++;
        assert_int_equal(zre_close(r->e), 0);
        r->e = NULL;
        zre_close(old);
        segment_free(s);
        return 1;
    }
    zt_model_copy(&r->m, j == 0 ? &s->base : &s->calls[j - 1].after);
    assert_int_equal(zre_close(r->e), 0);
    assert_int_equal(zre_close(old), 0);
    segment_free(s);
    segment_start(r);
    open_store(r, 0);
    return 0;
}

static void run_plan(const plan *pl)
{
    runner *r = calloc(1, sizeof *r);
    assert_non_null(r);
    uint64_t v0 = g_violations, s0 = g_states;
    r->pl = pl;
    r->rng = pl->seed * 0x9e3779b97f4a7c15u + 17;
    snprintf(r->dir[0], sizeof r->dir[0], "%s/store-a", g_root);
    snprintf(r->dir[1], sizeof r->dir[1], "%s/store-b", g_root);
    zt_rmtree(r->dir[0]);
    zt_rmtree(r->dir[1]);
    zt_model_init(&r->m, &recipe, 1 + pl->seed * 100000);
    r->e = zt_create_store(r->dir[0], pl->codec, &recipe);
    assert_int_equal(zt_model_append(r->e, &r->m, pl->base_records), 0);
    assert_int_equal(zre_close(r->e), 0);
    segment_start(r);
    open_store(r, 0);
    for (int k = 0; k <= pl->nsteps; k++) {
        static const step end = {W_END, 0, {0}};
        const step *st = k < pl->nsteps ? &pl->steps[k] : &end;
        if (st->op == W_POWERLOSS) {
            if (power_loss(r))
                goto abandoned;
            continue;
        }
        segment *s = &r->seg;
        call *c = &s->calls[s->ncalls++];
        memset(c, 0, sizeof *c);
        c->ev_start = s->log.n;
        run_step(r, st, c);
        c->ev_end = s->log.n;
        zt_model_copy(&c->after, &r->m);
    }
    segment_end(r);
    segment_free(&r->seg);
abandoned:
    zt_model_free(&r->m);
    free(r);
    g_workloads++;
    if (g_violations > v0)
        printf("workload %s%s%" PRIu64 ", codec %s: %" PRIu64 " of %" PRIu64 " crash states "
               "violate\n", pl->name ? pl->name : "", pl->name ? ", plan " : "seed ", pl->seed,
               zre_codec_name(pl->codec), g_violations - v0, g_states - s0);
}

/* A random plan from `seed`. */
static void plan_random(plan *pl, uint64_t seed)
{
    static const zre_codec codecs[3] = {ZRE_CODEC_RAW, ZRE_CODEC_ZSTD, ZRE_CODEC_ZSTD_DICT};
    /* Weights in percent: append, sync, delete-tail, delete, compact,
     * reopen, recover, power loss. */
    static const unsigned weight[8] = {34, 12, 9, 14, 8, 8, 6, 9};
    memset(pl, 0, sizeof *pl);
    uint64_t rng = seed * 0xd1b54a32d192ed03u + 5;
    pl->seed = seed;
    pl->codec = codecs[zt_splitmix64(&rng) % 3];
    pl->base_records = 10 + zt_splitmix64(&rng) % 60;
    pl->nsteps = 6 + (int)(zt_splitmix64(&rng) % 10);
    for (int k = 0; k < pl->nsteps; k++) {
        unsigned w = (unsigned)(zt_splitmix64(&rng) % 100), op = 0;
        while (w >= weight[op]) {
            w -= weight[op];
            op++;
        }
        pl->steps[k].op = (wop)op;
        if (op == W_APPEND)
            pl->steps[k].n = 1 + zt_splitmix64(&rng) % 40;
    }
}

/* ------------------------------------------------------------------ tests */

static int setup_root(void **state)
{
    (void)state;
    g_count_only = getenv("ZR_POWERLOSS_COUNT") != NULL;
    /* Thousands of small stores, each fsynced many times: on tmpfs (when
     * there is one) fsync costs nothing; the semantics checked are the
     * same. */
    struct stat st;
    if (!getenv("ZR_POWERLOSS_ON_DISK") && stat("/dev/shm", &st) == 0 && S_ISDIR(st.st_mode)) {
        snprintf(g_root, sizeof g_root, "/dev/shm/zr-powerloss-XXXXXX");
        if (!mkdtemp(g_root))
            zt_mkdtemp(g_root, sizeof g_root, "powerloss");
    } else {
        zt_mkdtemp(g_root, sizeof g_root, "powerloss");
    }
    return 0;
}

static int teardown_root(void **state)
{
    (void)state;
    zrp_fp_observe(NULL, NULL);
    zt_rmtree(g_root);
    return 0;
}

/* A step without indices, and a delete of explicit indices. */
#define OP(o, k) {o, k, {0}}
#define DEL(o, k, ...) {o, k, {__VA_ARGS__}}

/* A delete after appends never synced wrote its journal before those
 * appends were durable: swap-last moved unsynced records into low indices,
 * and a crash at the delete's fsync of 0.chunk left recovery to cut the
 * table at the first missing record, dropping the synced ones behind it
 * (194 of 310 states lost up to 11 synced records). */
static void test_delete_after_unsynced_appends(void **state)
{
    (void)state;
    for (int c = 0; c < 2; c++) {
        plan pl = {"delete after unsynced appends", 1, c ? ZRE_CODEC_ZSTD : ZRE_CODEC_RAW, 10,
                   {OP(W_APPEND, 5), DEL(W_DEL_MID, 2, 3, 1)}, 2};
        run_plan(&pl);
    }
}

/* A compact after unsynced appends: its journal named a header that was
 * not on disk, so the next open called the journal stale and removed it,
 * while the in-place moves had already overwritten chunk bytes the
 * durable table pointed at: other records' bytes, served with no error
 * (515 of 515 states). */
static void test_compact_after_unsynced_appends(void **state)
{
    (void)state;
    for (int c = 0; c < 2; c++) {
        plan pl = {"compact after unsynced appends", 2, c ? ZRE_CODEC_ZSTD : ZRE_CODEC_RAW, 12,
                   {DEL(W_DEL_MID, 2, 0, 4), OP(W_APPEND, 7), OP(W_COMPACT, 0)}, 3};
        run_plan(&pl);
    }
}

/* After a delete the table keeps old entries past the new length; an
 * unsynced append, then a power loss keeping meta.zr but not the new
 * entries, and recovery accepted the stale entries: the store ended with
 * copies of moved records, even in zstd (56 of 56 states). */
static void test_recover_keeps_no_stale_entries(void **state)
{
    (void)state;
    for (int c = 0; c < 3; c++) {
        static const zre_codec codecs[3] = {ZRE_CODEC_RAW, ZRE_CODEC_ZSTD, ZRE_CODEC_ZSTD_DICT};
        plan pl = {"recover after delete, unsynced append", 3, codecs[c], 12,
                   {DEL(W_DEL_MID, 3, 2, 5, 7), OP(W_APPEND, 3), OP(W_POWERLOSS, 0),
                    OP(W_APPEND, 4), OP(W_POWERLOSS, 0), OP(W_APPEND, 2)}, 6};
        run_plan(&pl);
    }
}

/* A delete of only the last records was not durable when it returned,
 * unlike every other delete and compact: now it is (a state after it
 * returned must hold it). */
static void test_tail_delete_is_durable(void **state)
{
    (void)state;
    plan pl = {"delete of the last records", 4, ZRE_CODEC_RAW, 20,
               {OP(W_APPEND, 3), DEL(W_DEL_TAIL, 2, 22, 21), OP(W_APPEND, 2),
                DEL(W_DEL_TAIL, 1, 22)}, 4};
    run_plan(&pl);
}

/* A compact after deletes and a power loss: the table's entries past the
 * length must go before a later append can meet them. */
static void test_compact_then_power_loss(void **state)
{
    (void)state;
    plan pl = {"compact, append, power loss", 5, ZRE_CODEC_ZSTD, 40,
               {DEL(W_DEL_MID, 4, 1, 9, 17, 30), OP(W_COMPACT, 0), OP(W_APPEND, 6),
                OP(W_POWERLOSS, 0), OP(W_APPEND, 5), OP(W_SYNC, 0)}, 6};
    run_plan(&pl);
}

static void test_random_workloads(void **state)
{
    (void)state;
    uint64_t n = zt_env_u64("ZR_POWERLOSS_WORKLOADS", 24);
    uint64_t seed0 = zt_env_u64("ZR_POWERLOSS_SEED", 1);
    for (uint64_t k = 0; k < n; k++) {
        plan pl;
        plan_random(&pl, seed0 + k);
        run_plan(&pl);
    }
}

static void test_report(void **state)
{
    (void)state;
    printf("power loss: %" PRIu64 " workloads (%" PRIu64 " stretches between power losses), %" PRIu64
           " distinct crash states: %" PRIu64 " opened, %" PRIu64 " refused naming recovery and "
           "then recovered; %" PRIu64 " unsynced records torn; %" PRIu64 " violations (%" PRIu64
           " workloads abandoned)\n", g_workloads, g_segments, g_states, g_opened, g_refused,
           g_torn, g_violations, g_abandoned);
    assert_true(g_states > 0);
    assert_int_equal(g_violations, 0);
}

int main(void)
{
    if (!zrp_fp_enabled()) {
        fprintf(stderr, "torture_powerloss: built without ZRP_FAILPOINTS\n");
        return 1;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_delete_after_unsynced_appends),
        cmocka_unit_test(test_compact_after_unsynced_appends),
        cmocka_unit_test(test_recover_keeps_no_stale_entries),
        cmocka_unit_test(test_tail_delete_is_durable),
        cmocka_unit_test(test_compact_then_power_loss),
        cmocka_unit_test(test_random_workloads),
        cmocka_unit_test(test_report),
    };
    return cmocka_run_group_tests(tests, setup_root, teardown_root);
}
