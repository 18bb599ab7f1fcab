/*
 * torture_remote_cache.c - the node-local block cache of stores at a URL
 * (remote/cache.c), at the C level and without a server: blocks are handed
 * to the cache as a download would hand them, then read back by this
 * "process" (its ctx) and by another one (a second ctx over the same
 * folder, or a forked child).
 *
 * What must hold: a block is served only whole and checked (a torn,
 * truncated or damaged file is refused and deleted, never mapped); a cache
 * write that fails (ENOSPC, EIO, a short write, a failed rename or map)
 * leaves nothing behind, loses nothing, and the bytes are served from
 * memory to whoever holds the block; a process killed at any point of a
 * write leaves either no block or a whole one; eviction deletes least
 * recently used blocks down to 7/8 of the cap and nothing that is not the
 * cache's own (foreign files, look-alike names, links, folders), and a
 * block a reader holds stays readable after its file is evicted.
 *
 * Built over the failpoint platform (ZRP_FAILPOINTS), POSIX only (fork).
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "remote_internal.h"
#include "zr_test_util.h"

#define SHIFT 12u /* 4 KiB blocks, the smallest ZR_CACHE_BLOCK */
#define BLK (1u << SHIFT)

/* ----------------------------------------------------------- fixture */

/* A ctx over zt_root's cache, as zrr_open makes it (no request is made),
 * with an object of `size` bytes added as a HEAD would add it. */
static zrr_ctx *open_ctx(const char *cap)
{
    setenv("ZR_CACHE_DIR", zt_root_at("cache"), 1);
    setenv("ZR_CACHE_BLOCK", "4K", 1);
    setenv("ZR_CACHE_BYTES", cap, 1);
    zrr_ctx *c = NULL;
    assert_int_equal(zrr_open(&c, "http://127.0.0.1:9/store", NULL), 0);
    assert_int_equal(c->cfg.block_shift, SHIFT);
    return c;
}

static zrr_obj *add_obj(zrr_ctx *c, const char *name, uint64_t size, uint64_t key)
{
    zrr_obj *o = calloc(1, sizeof *o);
    assert_non_null(o);
    o->ctx = c;
    o->name = strdup(name);
    o->url = strdup(name);
    o->etag = strdup("\"t\"");
    o->size = size;
    o->key = key;
    o->nblocks = (uint32_t)((size + BLK - 1) / BLK);
    o->blk = calloc(o->nblocks, sizeof *o->blk);
    assert_non_null(o->blk);
    o->next = c->objs;
    c->objs = o;
    return o;
}

/* The bytes of block b of a test object: a function of (key, b, i). */
static void fill(unsigned char *p, uint32_t len, uint64_t key, uint32_t b)
{
    uint64_t x = key * 0x9E3779B97F4A7C15ull + b;
    for (uint32_t i = 0; i < len; i++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        p[i] = (unsigned char)(x >> 56);
    }
}

/* Hand block b to the cache as a download does; `hold` as a gather's
 * ticket would (dropped by the caller). */
static int store(zrr_obj *o, uint32_t b, bool hold, bool nocache)
{
    uint32_t len = zrr_block_len(o, b);
    unsigned char *d = malloc(len);
    assert_non_null(d);
    fill(d, len, o->key, b);
    if (hold)
        zrr_blk_ref(&o->blk[b]);
    int rc = zrr_cache_store(o, b, d, len, nocache);
    free(d);
    return rc;
}

/* Block b is mapped here and holds exactly its bytes. */
static void assert_block(zrr_obj *o, uint32_t b)
{
    zrr_blk *k = &o->blk[b];
    assert_true(atomic_load(&k->st) & ZRR_MAPPED);
    uint32_t len = zrr_block_len(o, b);
    unsigned char *want = malloc(len);
    assert_non_null(want);
    fill(want, len, o->key, b);
    assert_memory_equal(k->map, want, len);
    free(want);
}

static const char *block_file(zrr_obj *o, uint32_t b)
{
    static char p[1024];
    snprintf(p, sizeof p, "%s/b/%016" PRIx64 "-%u-%u", o->ctx->cfg.cache_root, o->key, SHIFT, b);
    return p;
}

static size_t count_dir(const char *cache_root, const char *sub)
{
    char d[1024];
    snprintf(d, sizeof d, "%s/%s", cache_root, sub);
    char **names = NULL;
    size_t n = 0;
    if (zrp_list_dir(d, &names, &n) < 0)
        return 0;
    zrp_free_names(names, n);
    return n;
}

static int setup(void **state)
{
    (void)state;
    zrp_fp_reset();
    return zt_root_setup("remote-cache");
}

static int teardown(void **state)
{
    (void)state;
    zrp_fp_reset();
    zt_root_teardown();
    return 0;
}

/* ------------------------------------------------------------ tests */

/* A stored block is a whole file with its trailer, mapped here at once;
 * another process (ctx) maps it from disk after checking every byte. */
static void test_store_and_share(void **state)
{
    (void)state;
    zrr_ctx *a = open_ctx("1M");
    zrr_obj *oa = add_obj(a, "0.chunk", 3 * BLK + 100, 0x1234);
    for (uint32_t b = 0; b < oa->nblocks; b++) {
        assert_int_equal(store(oa, b, false, false), 0);
        assert_block(oa, b);
        uint64_t size = 0;
        assert_int_equal(zrp_stat(block_file(oa, b), &size, NULL), 0);
        assert_int_equal(size, zrr_block_len(oa, b) + 32u);
    }
    assert_int_equal(count_dir(a->cfg.cache_root, "tmp"), 0);
    zrr_ctx *b = open_ctx("1M");
    zrr_obj *ob = add_obj(b, "0.chunk", 3 * BLK + 100, 0x1234);
    for (uint32_t k = 0; k < ob->nblocks; k++) {
        assert_int_equal(zrr_cache_map(ob, k), 1);
        assert_block(ob, k);
    }
    /* Another object (another ETag: another key) never meets them. */
    zrr_obj *other = add_obj(b, "0.chunk", 3 * BLK + 100, 0x1235);
    assert_int_equal(zrr_cache_map(other, 0), 0);
    assert_int_equal(zrr_cache_failures(a, NULL, 0), 0);
    zrr_close(a);
    zrr_close(b);
}

/* Every way a block file can be wrong (a power loss after the rename but
 * before the bytes, a torn tail, a flipped bit, another block's file under
 * its name): never mapped, and deleted so it is downloaded again. */
static void test_damaged_files_are_refused(void **state)
{
    (void)state;
    enum { TRUNC_HALF, TRUNC_TRAILER, ZERO_DATA, FLIP_DATA, FLIP_TRAILER, ZERO_ALL, GROWN,
           OTHER_BLOCK, EMPTY, NCASES };
    for (int how = 0; how < NCASES; how++) {
        zrr_ctx *a = open_ctx("1M");
        zrr_obj *oa = add_obj(a, "0.loc", 2 * BLK, 0x77 + (uint64_t)how);
        assert_int_equal(store(oa, 0, false, false), 0);
        assert_int_equal(store(oa, 1, false, false), 0);
        char p[1024];
        snprintf(p, sizeof p, "%s", block_file(oa, 0));
        void *buf = NULL;
        size_t len = 0;
        assert_int_equal(zrp_read_file(p, &buf, &len, 1 << 20), 0);
        unsigned char *d = buf;
        switch (how) {
        case TRUNC_HALF: len /= 2; break;
        case TRUNC_TRAILER: len -= 5; break;
        case ZERO_DATA: memset(d, 0, BLK); break;
        case FLIP_DATA: d[BLK / 3] ^= 0x10; break;
        case FLIP_TRAILER: d[BLK + 9] ^= 0x01; break;
        case ZERO_ALL: memset(d, 0, len); break;
        case GROWN: {
            void *g = realloc(buf, len + 7);
            assert_non_null(g);
            buf = d = g;
            memset(d + len, 0xAB, 7);
            len += 7;
            break;
        }
        case OTHER_BLOCK: {
            free(buf);
            assert_int_equal(zrp_read_file(block_file(oa, 1), &buf, &len, 1 << 20), 0);
            break;
        }
        case EMPTY: len = 0; break;
        }
        assert_int_equal(zrp_write_file_atomic(p, buf, len), 0);
        free(buf);
        zrr_ctx *b = open_ctx("1M");
        zrr_obj *ob = add_obj(b, "0.loc", 2 * BLK, 0x77 + (uint64_t)how);
        if (zrr_cache_map(ob, 0) != 0)
            fail_msg("damage %d was mapped", how);
        assert_false(atomic_load(&ob->blk[0].st) & ZRR_MAPPED);
        assert_int_equal(zrp_stat(p, NULL, NULL), -ENOENT);
        assert_int_equal(zrr_cache_map(ob, 1), 1); /* the sound block is kept */
        assert_block(ob, 1);
        zrr_close(b);
        zrr_close(a);
    }
}

/* A cache write that fails at any of its steps leaves no file in b/ or
 * tmp/; the bytes are served from memory to the ticket that holds the
 * block (freed when it lets go), dropped when nobody holds it; the failure
 * is counted with a message naming the block. */
static void test_failed_writes_serve_from_memory(void **state)
{
    (void)state;
    static const struct {
        zrp_fp_kind kind;
        int err;
        const char *words;
    } cases[] = {
        {ZRP_FP_OPEN, -EACCES, "denied"},
        {ZRP_FP_PWRITE, -ENOSPC, "space"},
        {ZRP_FP_PWRITE, ZRP_FP_SHORT, "space"},
        {ZRP_FP_PWRITE, -EIO, "Input/output"},
        {ZRP_FP_MMAP, -ENOMEM, "memory"},
        {ZRP_FP_RENAME, -EIO, "Input/output"},
        {ZRP_FP_RENAME, -ENOSPC, "space"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        for (int second = 0; second < 2; second++) {
            zrr_ctx *c = open_ctx("1M");
            zrr_obj *o = add_obj(c, "3.chunk", 2 * BLK, 0x990 + 2 * i + (uint64_t)second);
            zrp_fp_reset();
            /* The failure hits the first or the second call of its kind
             * (the trailer's write comes second). */
            zrp_fp_arm(cases[i].kind, second ? 2 : 1, cases[i].err, 0);
            int rc = store(o, 0, true, false);
            bool injected = zrp_fp_injected() > 0;
            zrp_fp_reset();
            if (!injected) { /* that kind has no second call in a write */
                zrr_blk_unref(&o->blk[0]);
                zrr_close(c);
                continue;
            }
            assert_int_equal(rc, 1);
            assert_block(o, 0);
            assert_true(atomic_load(&o->blk[0].st) & ZRR_HEAP);
            if (zrp_stat(block_file(o, 0), NULL, NULL) != -ENOENT)
                fail_msg("case %zu (second %d): a block file was left", i, second);
            assert_int_equal(count_dir(c->cfg.cache_root, "tmp"), 0);
            char msg[512];
            assert_int_equal(zrr_cache_failures(c, msg, sizeof msg), 1);
            assert_non_null(strstr(msg, "block 0 of 3.chunk"));
            assert_non_null(strstr(msg, cases[i].words));
            /* The holder lets go: the copy is freed. */
            zrr_blk_unref(&o->blk[0]);
            assert_false(atomic_load(&o->blk[0].st) & (ZRR_MAPPED | ZRR_HEAP));
            /* Nobody holds block 1: a failed write keeps nothing. */
            zrp_fp_arm(cases[i].kind, second ? 2 : 1, cases[i].err, 0);
            assert_int_equal(store(o, 1, false, false), 1);
            zrp_fp_reset();
            assert_false(atomic_load(&o->blk[1].st) & ZRR_MAPPED);
            /* The next write goes through again. */
            assert_int_equal(store(o, 1, false, false), 0);
            assert_block(o, 1);
            zrr_close(c);
        }
    }
}

/* A request bigger than the cap streams through: held blocks are kept in
 * memory only, nothing is written. */
static void test_nocache_streams_through(void **state)
{
    (void)state;
    zrr_ctx *c = open_ctx("4K");
    zrr_obj *o = add_obj(c, "0.chunk", 4 * BLK, 0x5);
    for (uint32_t b = 0; b < 4; b++) {
        assert_int_equal(store(o, b, true, true), 1);
        assert_block(o, b);
    }
    assert_int_equal(count_dir(c->cfg.cache_root, "b"), 0);
    assert_int_equal(zrr_cache_failures(c, NULL, 0), 0);
    for (uint32_t b = 0; b < 4; b++) {
        zrr_blk_unref(&o->blk[b]);
        assert_false(atomic_load(&o->blk[b].st) & ZRR_MAPPED);
    }
    zrr_close(c);
}

static void set_mtime(const char *path, time_t t)
{
    struct timeval tv[2] = {{t, 0}, {t, 0}};
    assert_int_equal(utimes(path, tv), 0);
}

static void write_text(const char *path, const char *text)
{
    assert_int_equal(zrp_write_file_atomic(path, text, strlen(text)), 0);
}

/* Eviction: least recently used first, down to 7/8 of the cap; only the
 * cache's own names; a held block stays readable after its file goes. */
static void test_evict_lru_spares_foreign_and_held(void **state)
{
    (void)state;
    zrr_ctx *c = open_ctx("40K"); /* 10 blocks of 4 KiB (+ trailers) */
    zrr_obj *o = add_obj(c, "0.chunk", 20 * BLK, 0xE0);
    const char *root = c->cfg.cache_root;
    char p[1024], victim[1024];
    /* Foreign files: in the folder, in b/ (look-alikes too), in tmp/, a
     * link named like a block to a file outside, a folder named like one. */
    char outside[1024];
    snprintf(outside, sizeof outside, "%s", zt_root_at("user-data.txt"));
    write_text(outside, "the user's");
    set_mtime(outside, 500); /* older than every block: its link goes first */
    static const char *foreign[] = {"notes.txt", "b/notes.txt", "b/00000000000000e0-12-1.txt",
                                    "b/00000000000000E0-12-1", "b/00000000000000e0-12-",
                                    "tmp/notes.txt", "tmp/00000000000000e0-12-1.x.1"};
    for (size_t i = 0; i < sizeof foreign / sizeof foreign[0]; i++) {
        snprintf(p, sizeof p, "%s/%s", root, foreign[i]);
        write_text(p, "not the cache's");
    }
    snprintf(p, sizeof p, "%s/b/00000000000000ff-12-0", root);
    assert_int_equal(symlink(outside, p), 0);
    snprintf(p, sizeof p, "%s/b/00000000000000ff-12-1", root);
    assert_int_equal(mkdir(p, 0755), 0);
    /* 20 blocks, used in order: block b last used at time 1000 + b. */
    for (uint32_t b = 0; b < 20; b++) {
        assert_int_equal(store(o, b, b == 2, false), 0);
        set_mtime(block_file(o, b), 1000 + b);
    }
    snprintf(victim, sizeof victim, "%s", block_file(o, 2));
    zrr_cache_upkeep(c, true);
    uint64_t total = 0;
    for (uint32_t b = 0; b < 20; b++) {
        uint64_t size = 0;
        bool there = zrp_stat(block_file(o, b), &size, NULL) == 0;
        total += there ? size : 0;
        /* Least recently used first: what is left is the newest. */
        if (b < 12)
            assert_false(there);
    }
    assert_true(total <= 40 * 1024 / 8 * 7);
    assert_true(total >= 40 * 1024 / 8 * 7 - (BLK + 32));
    for (size_t i = 0; i < sizeof foreign / sizeof foreign[0]; i++) {
        snprintf(p, sizeof p, "%s/%s", root, foreign[i]);
        void *buf = NULL;
        size_t len = 0;
        assert_int_equal(zrp_read_file(p, &buf, &len, 100), 0);
        assert_memory_equal(buf, "not the cache's", len);
        free(buf);
    }
    void *buf = NULL;
    size_t len = 0;
    assert_int_equal(zrp_read_file(outside, &buf, &len, 100), 0);
    assert_memory_equal(buf, "the user's", len);
    free(buf);
    /* Evicted blocks nobody holds are unmapped here; the held one is still
     * mapped and readable, its file gone. */
    assert_false(atomic_load(&o->blk[0].st) & ZRR_MAPPED);
    assert_int_equal(zrp_stat(victim, NULL, NULL), -ENOENT);
    assert_block(o, 2);
    /* Let go: the next upkeep sees the file gone and unmaps it. */
    zrr_blk_unref(&o->blk[2]);
    o->blk[2].checked_ns = 0;
    zrr_cache_upkeep(c, false);
    assert_false(atomic_load(&o->blk[2].st) & ZRR_MAPPED);
    zrr_close(c);
}

/* A failed unlink during eviction stops nothing: the others go, the
 * failed one stays a valid block. */
static void test_evict_survives_failed_unlinks(void **state)
{
    (void)state;
    zrr_ctx *c = open_ctx("16K");
    zrr_obj *o = add_obj(c, "1.chunk", 12 * BLK, 0xE1);
    for (uint32_t b = 0; b < 12; b++) {
        assert_int_equal(store(o, b, false, false), 0);
        set_mtime(block_file(o, b), 2000 + b);
    }
    zrp_fp_reset();
    zrp_fp_arm(ZRP_FP_UNLINK, 1, -EIO, 0);
    zrr_cache_upkeep(c, true);
    assert_int_equal(zrp_fp_injected(), 1);
    zrp_fp_reset();
    assert_int_equal(zrp_stat(block_file(o, 0), NULL, NULL), 0); /* its unlink failed */
    assert_block(o, 0);
    for (uint32_t b = 1; b < 8; b++)
        assert_int_equal(zrp_stat(block_file(o, b), NULL, NULL), -ENOENT);
    zrr_close(c);
}

/* Temporary files of dead processes are swept; a live process's are not. */
static void test_tmp_of_dead_processes_swept(void **state)
{
    (void)state;
    zrr_ctx *c = open_ctx("1M");
    pid_t kid = fork();
    if (kid == 0)
        _exit(0);
    assert_true(kid > 0);
    int st = 0;
    assert_int_equal(waitpid(kid, &st, 0), kid); /* its pid is now free (and dead) */
    char dead[1024], live[1024];
    snprintf(dead, sizeof dead, "%s/tmp/00000000000000aa-12-0.%ld.1", c->cfg.cache_root, (long)kid);
    snprintf(live, sizeof live, "%s/tmp/00000000000000aa-12-1.%ld.1", c->cfg.cache_root,
             (long)getppid());
    write_text(dead, "partial");
    write_text(live, "partial");
    zrr_cache_upkeep(c, true);
    assert_int_equal(zrp_stat(dead, NULL, NULL), -ENOENT);
    assert_int_equal(zrp_stat(live, NULL, NULL), 0);
    zrr_close(c);
}

/* ------------------------------------------------- killed mid-write */

static uint64_t kill_at;
static uint64_t events;

static void kill_observer(const zrp_fp_event *ev, void *arg)
{
    (void)ev;
    (void)arg;
    if (++events == kill_at)
        raise(SIGKILL);
}

/* A child writing blocks is killed right after its k-th file change
 * (creation, each write, the rename), for every k: the cache then holds
 * whole blocks and nothing else that is ever served; its temporary file
 * is swept once it is dead. Then at random moments, with real SIGKILLs
 * from the parent. */
static void test_killed_writer_leaves_no_torn_block(void **state)
{
    (void)state;
    const uint32_t nb = 6;
    for (uint64_t k = 1; k <= nb * 4 + 1; k++) {
        zrr_ctx *probe = open_ctx("1M");
        pid_t kid = fork();
        assert_true(kid >= 0);
        if (kid == 0) {
            zrr_ctx *c = open_ctx("1M");
            zrr_obj *o = add_obj(c, "0.chunk", nb * BLK - 10, 0xC0 + k);
            kill_at = k;
            events = 0;
            zrp_fp_observe(kill_observer, NULL);
            for (uint32_t b = 0; b < nb; b++)
                (void)store(o, b, false, false);
            _exit(0);
        }
        int st = 0;
        assert_int_equal(waitpid(kid, &st, 0), kid);
        zrr_obj *o = add_obj(probe, "0.chunk", nb * BLK - 10, 0xC0 + k);
        uint32_t whole = 0;
        for (uint32_t b = 0; b < nb; b++) {
            if (zrr_cache_map(o, b)) {
                assert_block(o, b);
                whole++;
            } else {
                assert_int_equal(zrp_stat(block_file(o, b), NULL, NULL), -ENOENT);
            }
        }
        zrr_cache_upkeep(probe, true);
        assert_int_equal(count_dir(probe->cfg.cache_root, "tmp"), 0);
        zrr_close(probe);
    }
    /* Real kills at random times. */
    uint64_t seed = 0x5EED;
    for (int round = 0; round < 20; round++) {
        zrr_ctx *probe = open_ctx("1M");
        pid_t kid = fork();
        assert_true(kid >= 0);
        if (kid == 0) {
            zrr_ctx *c = open_ctx("1M");
            zrr_obj *o = add_obj(c, "1.chunk", 256 * BLK, 0xD00 + (uint64_t)round);
            for (uint32_t b = 0; b < 256; b++)
                (void)store(o, b, false, false);
            _exit(0);
        }
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        usleep((useconds_t)((seed >> 33) % 20000));
        kill(kid, SIGKILL);
        int st = 0;
        assert_int_equal(waitpid(kid, &st, 0), kid);
        zrr_obj *o = add_obj(probe, "1.chunk", 256 * BLK, 0xD00 + (uint64_t)round);
        for (uint32_t b = 0; b < 256; b++)
            if (zrr_cache_map(o, b))
                assert_block(o, b);
        zrr_cache_upkeep(probe, true);
        assert_int_equal(count_dir(probe->cfg.cache_root, "tmp"), 0);
        zrr_close(probe);
    }
}

int main(void)
{
    if (!zrp_fp_enabled()) {
        fprintf(stderr, "torture_remote_cache needs the failpoint platform\n");
        return 1;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_store_and_share, setup, teardown),
        cmocka_unit_test_setup_teardown(test_damaged_files_are_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_failed_writes_serve_from_memory, setup, teardown),
        cmocka_unit_test_setup_teardown(test_nocache_streams_through, setup, teardown),
        cmocka_unit_test_setup_teardown(test_evict_lru_spares_foreign_and_held, setup, teardown),
        cmocka_unit_test_setup_teardown(test_evict_survives_failed_unlinks, setup, teardown),
        cmocka_unit_test_setup_teardown(test_tmp_of_dead_processes_swept, setup, teardown),
        cmocka_unit_test_setup_teardown(test_killed_writer_leaves_no_torn_block, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
