/*
 * torture_powerloss.c - simulated power loss. SIGKILL keeps the page
 * cache, so it never tests fsync ordering; this does.
 *
 * The failpoint platform's observer records every call that changes a
 * file (create, write, truncate, rename, unlink) and every barrier (fsync
 * of a file, fsync of the directory) while a workload of append, delete,
 * compact and sync runs on a store. A crash state at point p of that log
 * is then built in the manner of ALICE and CrashMonkey, assuming no more
 * than POSIX promises: a file's bytes and size are durable only up to its
 * last fsync before p, directory entries only up to the directory's last
 * fsync; every change after that may or may not have reached the disk, in
 * any combination. For each p the simulation takes the state with none of
 * the pending changes, with all of them (the prefix as the process saw
 * it), with each one alone left out, and with each one alone kept. Each
 * distinct state is written to a fresh directory and opened:
 *   - it opens, or is refused with a clear error that names recovery;
 *   - opened, it holds every record whose sync() had returned before p,
 *     byte-exact: the store equals the model after some call between the
 *     last completed sync and the call in flight, or (appends not yet
 *     synced) the synced records are all intact and only unsynced records
 *     after them are missing or unreadable.
 *
 * Knobs: ZR_POWERLOSS_ROUNDS (default 2) workloads with different seeds.
 * Prints the number of distinct crash states checked.
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
#include "zr_test_util.h"
#include "zrengine.h"

/* ------------------------------------------------------------- records */

/* A pure hash of x (one splitmix64 step from state x). */
static uint64_t mix(uint64_t x) { return zt_splitmix64(&x); }

static uint32_t rsize(uint64_t id) { return 16 + (uint32_t)(mix(id) % 1500); }

static void rfill(uint64_t id, unsigned char *p)
{
    uint32_t n = rsize(id);
    uint64_t h = mix(id * 3 + 1);
    for (uint32_t j = 0; j < n; j++)
        p[j] = (unsigned char)(j % 3 == 0 ? (h >> (8 * (j % 8))) : (j * 11 + id));
}

#define MAXREC 512

typedef struct model {
    uint64_t id[MAXREC];
    uint64_t len;
} model;

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

/* ------------------------------------------------ simulated file system */

#define MAXFILES 64
#define MAXINODES 256

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

/* The process's view and the durable view, advanced event by event. Each
 * event after the last barrier that covers it is "pending". */
typedef struct sim {
    fsys dur;      /* durable directory entries and contents */
    fsys cur;      /* what the process sees */
    int *inode_of; /* per event: inode it touches in `cur` (-1 for dir ops) */
} sim;

/* Apply event `e` to `fs` (a view). Inode numbers are shared between the
 * views: a CREATE allocates the same number in both, in log order. */
static void fs_apply(fsys *fs, const ev *e, int ino_for_create)
{
    int i;
    switch (e->kind) {
    case ZRP_EV_CREATE:
        while (fs->nino <= ino_for_create) {
            memset(&fs->ino[fs->nino], 0, sizeof fs->ino[0]);
            fs->nino++;
        }
        fs_bind(fs, e->name, ino_for_create);
        break;
    case ZRP_EV_WRITE:
        if ((i = fs_lookup(fs, e->name)) >= 0)
            ino_write(&fs->ino[fs->name_ino[i]], e->offset, e->data, e->len);
        break;
    case ZRP_EV_TRUNCATE:
        if ((i = fs_lookup(fs, e->name)) >= 0)
            ino_truncate(&fs->ino[fs->name_ino[i]], e->offset);
        break;
    case ZRP_EV_RENAME:
        if ((i = fs_lookup(fs, e->name)) >= 0) {
            int ino = fs->name_ino[i];
            fs_unbind(fs, e->name);
            fs_bind(fs, e->name2, ino);
        }
        break;
    case ZRP_EV_UNLINK:
        fs_unbind(fs, e->name);
        break;
    default:
        break;
    }
}

/* ------------------------------------------------------------ checking */

static uint64_t g_states, g_opened, g_refused, g_torn_unsynced;

typedef struct call {
    size_t ev_start, ev_end; /* events [start, end) belong to this call */
    int is_sync;             /* a sync (or close): durable at its end */
    int is_append;
    model after;
} call;

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

/* The first m->len records of the open store equal `m` (the rest, if
 * any, unchecked); with `exact`, the store also holds nothing more. */
static int matches_model(zre_engine *e, const model *m, int exact)
{
    if (zre_length(e) < m->len || (exact && zre_length(e) != m->len))
        return 0;
    unsigned char got[2048], want[2048];
    for (uint64_t i = 0; i < m->len; i++) {
        uint32_t n = rsize(m->id[i]);
        if (zre_gather(e, &i, 1, got, n, n, NULL) != 0)
            return 0;
        rfill(m->id[i], want);
        if (memcmp(got, want, n) != 0)
            return 0;
    }
    return 1;
}

static void check_state(const fsys *fs, const char *dir, const call *calls, size_t ncalls,
                        const model *base, size_t p, const char *how)
{
    fs_write_out(fs, dir);
    g_states++;
    /* The last completed sync before p, and the call in flight at p. */
    const model *synced = base;
    size_t first = 0; /* models acceptable: calls [first, inflight] (0 = base) */
    size_t inflight = 0;
    for (size_t c = 0; c < ncalls; c++) {
        if (calls[c].ev_end <= p && calls[c].is_sync) {
            synced = &calls[c].after;
            first = c + 1;
        }
        if (calls[c].ev_start <= p)
            inflight = c + 1;
    }
    zre_engine *e = NULL;
    int rc = zre_open_ex(&e, dir, 0);
    if (rc != 0) {
        const char *d = zr_last_error();
        if (!strstr(d, "recover"))
            fail_msg("crash state at event %zu (%s): open refused without naming recovery: %s", p,
                     how, d);
        g_refused++;
        /* The recovery it names must then keep every synced record. */
        rc = zre_open_ex(&e, dir, ZRE_OPEN_RECOVER);
        if (rc != 0)
            fail_msg("crash state at event %zu (%s): the recovery open failed: %s", p, how,
                     zr_last_error());
    } else {
        g_opened++;
    }
    int ok = first == 0 && matches_model(e, base, 1);
    (void)synced;
    for (size_t c = first ? first : 1; !ok && c <= inflight; c++)
        ok = matches_model(e, &calls[c - 1].after, 1);
    /* Unsynced appends may be torn, synced records never: the store holds
     * the state after some call j (from the last sync on), followed by
     * records of appends after j that reached the disk in part. */
    for (size_t j = inflight; !ok && j + 1 > first; j--) {
        const model *mj = j == 0 ? base : &calls[j - 1].after;
        int only_appends = 1;
        for (size_t c = j; c < inflight; c++)
            only_appends &= calls[c].is_append || calls[c].is_sync;
        if (only_appends && matches_model(e, mj, 0)) {
            g_torn_unsynced++;
            ok = 1;
        }
        if (j == 0)
            break;
    }
    if (!ok && getenv("ZR_POWERLOSS_DEBUG")) {
        for (size_t c = 0; c < ncalls; c++)
            fprintf(stderr, "call %zu: events [%zu, %zu) sync %d append %d len %" PRIu64 "\n", c,
                    calls[c].ev_start, calls[c].ev_end, calls[c].is_sync, calls[c].is_append,
                    calls[c].after.len);
        for (uint64_t i = 0; i < zre_length(e) && i < 200; i++) {
            unsigned char got[2048];
            uint64_t sz = 0;
            zre_record_sizes(e, &i, 1, &sz);
            int grc = sz <= sizeof got ? zre_gather(e, &i, 1, got, sz, sz, NULL) : -99;
            fprintf(stderr, "  rec %" PRIu64 ": size %" PRIu64 " gather %d\n", i, sz, grc);
        }
    }
    if (!ok)
        fail_msg("crash state at event %zu (%s): the store (%" PRIu64 " records) lost or damaged "
                 "records whose sync() returned (synced length %" PRIu64 ")", p, how,
                 zre_length(e), synced->len);
    /* A recovered store takes a new append and reopens. */
    unsigned char rec[16] = {1, 2, 3};
    assert_int_equal(zre_append(e, rec, 16, NULL, 1, NULL), 0);
    assert_int_equal(zre_close(e), 0);
    assert_int_equal(zre_open_ex(&e, dir, ZRE_OPEN_READONLY), 0);
    zre_close(e);
}

/* ------------------------------------------------------------ workload */

static int do_append(zre_engine *e, model *m, uint64_t *next, uint64_t n)
{
    uint64_t bounds[129];
    bounds[0] = 0;
    for (uint64_t i = 0; i < n; i++)
        bounds[i + 1] = bounds[i] + rsize(*next + i);
    unsigned char *buf = malloc(bounds[n]);
    for (uint64_t i = 0; i < n; i++)
        rfill(*next + i, buf + bounds[i]);
    int rc = zre_append(e, buf, 0, bounds, n, NULL);
    free(buf);
    assert_int_equal(rc, 0);
    for (uint64_t i = 0; i < n; i++)
        m->id[m->len++] = *next + i;
    *next += n;
    return rc;
}

static int cmp_desc(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? 1 : x > y ? -1 : 0;
}

static void run_round(zre_codec codec, uint64_t seed, const char *root)
{
    char dir[700], out[700];
    snprintf(dir, sizeof dir, "%s/store", root);
    snprintf(out, sizeof out, "%s/crash", root);
    zt_rmtree(dir);
    model m = {{0}, 0};
    uint64_t next = 1 + seed * 100000;
    zre_engine *e = NULL;
    assert_int_equal(zre_create(&e, dir, codec), 0);
    do_append(e, &m, &next, 50);
    assert_int_equal(zre_close(e), 0);
    model base = m;

    fsys base_fs;
    fs_load(&base_fs, dir); /* everything durable: the store was closed */

    evlog L = {NULL, 0, 0, dir};
    call calls[32];
    size_t nc = 0;
    uint64_t rng = seed * 2654435761u + 7;
    assert_int_equal(zre_open(&e, dir), 0);
    zrp_fp_observe(on_event, &L);
    /* Every kind of call, synced and not: append, append, sync, delete,
     * sync, compact, append, sync, delete (unsynced), append, close. */
    static const char plan[] = "aasDsCasDac";
    for (const char *op = plan; *op; op++) {
        call *c = &calls[nc++];
        memset(c, 0, sizeof *c);
        c->ev_start = L.n;
        switch (*op) {
        case 'a':
            do_append(e, &m, &next, 20 + zt_xorshift64(&rng) % 40);
            c->is_append = 1;
            break;
        case 's':
            assert_int_equal(zre_sync(e), 0);
            c->is_sync = 1;
            break;
        case 'D': {
            uint64_t idx[8];
            for (int k = 0; k < 8; k++)
                idx[k] = zt_xorshift64(&rng) % m.len;
            qsort(idx, 8, sizeof idx[0], cmp_desc);
            uint64_t u[8], nu = 0;
            for (int k = 0; k < 8; k++)
                if (nu == 0 || u[nu - 1] != idx[k])
                    u[nu++] = idx[k];
            assert_int_equal(zre_delete(e, u, nu), 0);
            for (uint64_t k = 0; k < nu; k++) {
                m.id[u[k]] = m.id[m.len - 1];
                m.len--;
            }
            break;
        }
        case 'C':
            /* compact makes every step durable before it returns */
            assert_int_equal(zre_compact(e), 0);
            c->is_sync = 1;
            break;
        case 'c':
            assert_int_equal(zre_close(e), 0);
            e = NULL;
            c->is_sync = 1;
            break;
        }
        c->ev_end = L.n;
        c->after = m;
    }
    zrp_fp_observe(NULL, NULL);

    /* Replay the log: `cur` is the process's view, `dur` the durable one;
     * `pend` the events since their last barrier, with the inode each one
     * touched (shared numbering between the views). */
    fsys cur, dur, tmp;
    fs_copy(&cur, &base_fs);
    fs_copy(&dur, &base_fs);
    size_t *pend = malloc((L.n + 1) * sizeof *pend);
    int *pino = malloc((L.n + 1) * sizeof *pino);
    size_t np = 0;
    uint64_t *seen = calloc(1u << 16, sizeof *seen);
    unsigned char *mask = malloc(L.n + 1);
    for (size_t p = 0; p <= L.n; p++) {
        int barrier = p < L.n && (L.e[p].kind == ZRP_EV_FSYNC || L.e[p].kind == ZRP_EV_FSYNC_DIR);
        /* Which subsets of the pending events to try at this point. */
        size_t variants = 2 + (barrier || p == L.n ? 2 * np : 0);
        for (size_t v = 0; v < variants; v++) {
            for (size_t k = 0; k < np; k++) {
                if (v == 0)
                    mask[k] = 0;                 /* nothing pending reached the disk */
                else if (v == 1)
                    mask[k] = 1;                 /* everything the process wrote */
                else if (v < 2 + np)
                    mask[k] = k != v - 2;        /* all but one */
                else
                    mask[k] = k == v - 2 - np;   /* only one */
            }
            fs_copy(&tmp, &dur);
            for (size_t k = 0; k < np; k++) {
                if (!mask[k])
                    continue;
                const ev *x = &L.e[pend[k]];
                if (x->kind == ZRP_EV_WRITE || x->kind == ZRP_EV_TRUNCATE) {
                    while (tmp.nino <= pino[k]) {
                        memset(&tmp.ino[tmp.nino], 0, sizeof tmp.ino[0]);
                        tmp.nino++;
                    }
                    if (x->kind == ZRP_EV_WRITE)
                        ino_write(&tmp.ino[pino[k]], x->offset, x->data, x->len);
                    else
                        ino_truncate(&tmp.ino[pino[k]], x->offset);
                } else {
                    fs_apply(&tmp, x, pino[k]);
                }
            }
            uint64_t h = fs_hash(&tmp) | 1;
            size_t slot = (size_t)(h & 0xffff);
            int dup = 0;
            while (seen[slot]) {
                if (seen[slot] == h) {
                    dup = 1;
                    break;
                }
                slot = (slot + 1) & 0xffff;
            }
            if (!dup) {
                seen[slot] = h;
                char how[96];
                snprintf(how, sizeof how, "%s, codec %s, seed %" PRIu64,
                         v == 0 ? "none pending" : v == 1 ? "all pending"
                         : v < 2 + np ? "one pending lost" : "one pending kept",
                         zre_codec_name(codec), seed);
                check_state(&tmp, out, calls, nc, &base, p, how);
            }
            fs_free(&tmp);
        }
        if (p == L.n)
            break;
        /* Advance by event p. */
        const ev *x = &L.e[p];
        int ino = -1;
        if (x->kind == ZRP_EV_CREATE) {
            ino = cur.nino;
            fs_apply(&cur, x, ino);
        } else if (x->kind == ZRP_EV_WRITE || x->kind == ZRP_EV_TRUNCATE) {
            int i = fs_lookup(&cur, x->name);
            assert_true(i >= 0);
            ino = cur.name_ino[i];
            fs_apply(&cur, x, -1);
        } else if (x->kind == ZRP_EV_RENAME || x->kind == ZRP_EV_UNLINK) {
            fs_apply(&cur, x, -1);
        }
        if (x->kind == ZRP_EV_FSYNC) {
            /* This file's data and size are durable: its pending writes. */
            int i = fs_lookup(&cur, x->name);
            int fino = i >= 0 ? cur.name_ino[i] : -2;
            size_t w = 0;
            for (size_t k = 0; k < np; k++) {
                const ev *y = &L.e[pend[k]];
                if ((y->kind == ZRP_EV_WRITE || y->kind == ZRP_EV_TRUNCATE) && pino[k] == fino) {
                    while (dur.nino <= fino) {
                        memset(&dur.ino[dur.nino], 0, sizeof dur.ino[0]);
                        dur.nino++;
                    }
                    if (y->kind == ZRP_EV_WRITE)
                        ino_write(&dur.ino[fino], y->offset, y->data, y->len);
                    else
                        ino_truncate(&dur.ino[fino], y->offset);
                } else {
                    pend[w] = pend[k];
                    pino[w] = pino[k];
                    w++;
                }
            }
            np = w;
        } else if (x->kind == ZRP_EV_FSYNC_DIR) {
            /* Directory entries are durable: pending creates, renames and
             * unlinks, in order. */
            size_t w = 0;
            for (size_t k = 0; k < np; k++) {
                const ev *y = &L.e[pend[k]];
                if (y->kind == ZRP_EV_CREATE || y->kind == ZRP_EV_RENAME || y->kind == ZRP_EV_UNLINK) {
                    fs_apply(&dur, y, pino[k]);
                } else {
                    pend[w] = pend[k];
                    pino[w] = pino[k];
                    w++;
                }
            }
            np = w;
        } else if (x->kind != ZRP_EV_MKDIR && x->kind != ZRP_EV_RMDIR) {
            pend[np] = p;
            pino[np] = ino;
            np++;
        }
    }
    free(mask);
    free(seen);
    free(pend);
    free(pino);
    fs_free(&cur);
    fs_free(&dur);
    fs_free(&base_fs);
    for (size_t k = 0; k < L.n; k++)
        free(L.e[k].data);
    free(L.e);
}

static char g_root[512];

static void test_powerloss(void **s)
{
    (void)s;
    struct stat st;
    if (!getenv("ZR_POWERLOSS_ON_DISK") && stat("/dev/shm", &st) == 0 && S_ISDIR(st.st_mode)) {
        snprintf(g_root, sizeof g_root, "/dev/shm/zr-powerloss-XXXXXX");
        if (!mkdtemp(g_root))
            zt_mkdtemp(g_root, sizeof g_root, "powerloss");
    } else {
        zt_mkdtemp(g_root, sizeof g_root, "powerloss");
    }
    uint64_t rounds = zt_env_u64("ZR_POWERLOSS_ROUNDS", 2);
    static const zre_codec codecs[2] = {ZRE_CODEC_RAW, ZRE_CODEC_ZSTD};
    for (uint64_t r = 0; r < rounds; r++)
        for (int c = 0; c < 2; c++)
            run_round(codecs[c], r + 1, g_root);
    printf("power loss: %" PRIu64 " distinct crash states (%" PRIu64 " opened, %" PRIu64
           " refused naming recovery and then recovered; %" PRIu64 " with unsynced appends torn), "
           "0 synced records "
           "lost\n", g_states, g_opened, g_refused, g_torn_unsynced);
    zt_rmtree(g_root);
}

int main(void)
{
    if (!zrp_fp_enabled()) {
        fprintf(stderr, "torture_powerloss: built without ZRP_FAILPOINTS\n");
        return 1;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_powerloss),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
