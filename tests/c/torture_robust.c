/*
 * torture_robust.c - regressions from the break-34 round:
 *   - zrs_forget_after_fork: a forked child that abandons its inherited
 *     handle no longer pins the parent's store lock (and one that does not
 *     abandon it does, which is what the call is for);
 *   - gather errors caused by a damaged record-table entry name the store
 *     directory, the .loc segment file and the entry; a bad ragged prefix
 *     names the store;
 *   - store.zr bytes quoted in an open error are escaped (\xNN);
 *   - zre_chunk_bytes / zrs_data_bytes and zrp_physical_memory;
 *   - the loader's adaptive readahead default (off for data that fits in
 *     memory, on for explicit distances and for foreign advise callbacks).
 */
#include <inttypes.h>
#include <setjmp.h>
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
#include "zr_test_util.h"

static int setup(void **state)
{
    (void)state;
    return zt_root_setup("robust");
}

static int teardown(void **state)
{
    (void)state;
    return zt_root_teardown();
}

#define assert_error_mentions(needle) zt_assert_mentions(zr_last_error(), (needle))

/* Overwrite `len` bytes at `off` of file `name` inside store `dir`. */
static void patch_file(const char *dir, const char *name, long off, const void *bytes, size_t len)
{
    char p[800];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    zt_patch_file(p, off, bytes, len);
}

/* A dense uint8 store of `n` records of 16 bytes (record i filled with i). */
static void make_dense(const char *path, uint64_t n, zre_codec codec)
{
    zrs_store *s = NULL;
    uint64_t shape[1] = {16};
    assert_int_equal(zrs_create_dense(&s, path, ZRS_UINT8, shape, 1, codec), ZR_OK);
    unsigned char *buf = malloc((size_t)n * 16);
    assert_non_null(buf);
    for (uint64_t i = 0; i < n; i++)
        memset(buf + i * 16, (int)i, 16);
    assert_int_equal(zrs_append_dense(s, buf, n * 16, n, NULL), ZR_OK);
    free(buf);
    assert_int_equal(zrs_close(s), ZR_OK);
}

/* ---------------------------------------------------------------- fork */

/* Fork a child that optionally abandons `s`, reports it is ready, then
 * waits until the parent writes to (or closes) its pipe. */
static pid_t fork_idle_child(zrs_store *s, int forget, int *to_child)
{
    int ready[2], hold[2];
    assert_int_equal(pipe(ready), 0);
    assert_int_equal(pipe(hold), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(ready[0]);
        close(hold[1]);
        if (forget)
            zrs_forget_after_fork(s);
        char c = 'r';
        if (write(ready[1], &c, 1) != 1)
            _exit(3);
        (void)read(hold[0], &c, 1);
        _exit(0);
    }
    close(ready[1]);
    close(hold[0]);
    char c;
    assert_int_equal(read(ready[0], &c, 1), 1);
    close(ready[0]);
    *to_child = hold[1];
    return pid;
}

static void reap(pid_t pid, int to_child)
{
    close(to_child);
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
}

static void test_forget_after_fork_releases_lock(void **state)
{
    (void)state;
    const char *path = zt_root_at("fork");
    make_dense(path, 4, ZRE_CODEC_RAW);

    /* Without the call the child's inherited descriptor pins the lock:
     * this is the bug the call exists for. */
    zrs_store *s = NULL;
    assert_int_equal(zrs_open(&s, path), ZR_OK);
    int to_child;
    pid_t pid = fork_idle_child(s, 0, &to_child);
    assert_int_equal(zrs_close(s), ZR_OK);
    zrs_store *again = NULL;
    assert_int_equal(zrs_open(&again, path), ZR_EBUSY);
    reap(pid, to_child);

    /* With it, the parent reopens writable while the child still lives. */
    assert_int_equal(zrs_open(&s, path), ZR_OK);
    pid = fork_idle_child(s, 1, &to_child);
    assert_int_equal(zrs_close(s), ZR_OK);
    assert_int_equal(zrs_open(&again, path), ZR_OK);
    unsigned char rec[16];
    int64_t idx = 3;
    assert_int_equal(zrs_gather_dense(again, &idx, 1, rec, sizeof rec), ZR_OK);
    assert_int_equal(rec[0], 3);
    assert_int_equal(zrs_close(again), ZR_OK);
    reap(pid, to_child);

    /* The parent's own handle is untouched by a child's forget. */
    assert_int_equal(zrs_open_ex(&s, path, ZRE_OPEN_READONLY), ZR_OK);
    pid = fork_idle_child(s, 1, &to_child);
    assert_int_equal(zrs_gather_dense(s, &idx, 1, rec, sizeof rec), ZR_OK);
    assert_int_equal(rec[15], 3);
    reap(pid, to_child);
    assert_int_equal(zrs_close(s), ZR_OK);

    zrs_forget_after_fork(NULL); /* no-op */
}

/* ------------------------------------------------------ error messages */

static void expect_gather_error(const char *path, int64_t index, const char *what)
{
    zrs_store *s = NULL;
    assert_int_equal(zrs_open_ex(&s, path, ZRE_OPEN_READONLY), ZR_OK);
    unsigned char rec[16];
    assert_int_equal(zrs_gather_dense(s, &index, 1, rec, sizeof rec), ZR_ECORRUPT);
    char loc[800];
    snprintf(loc, sizeof loc, "%s/0.loc entry %" PRId64, path, index);
    assert_error_mentions(loc);
    assert_error_mentions(what);
    assert_int_equal(zrs_close(s), ZR_OK);
}

static void test_gather_errors_name_loc_entry(void **state)
{
    (void)state;
    const char *raw = zt_root_at("loc_raw");
    make_dense(raw, 8, ZRE_CODEC_RAW);
    unsigned char v[4];
    /* entry {u32 offset, u32 phys_length, u32 logic_length, u32 chunk_id} */
    zt_put_le32(v, 17);
    patch_file(raw, "0.loc", 5 * 16 + 4, v, 4); /* stored size */
    expect_gather_error(raw, 5, "stored size 17 != logical size 16");
    zt_put_le32(v, 15);
    patch_file(raw, "0.loc", 6 * 16 + 8, v, 4); /* logical size */
    expect_gather_error(raw, 6, "destination slot is 16 bytes");
    zt_put_le32(v, 2097152);
    patch_file(raw, "0.loc", 7 * 16 + 12, v, 4); /* chunk id */
    expect_gather_error(raw, 7, "points at chunk 2097152");
    zt_put_le32(v, 0);
    patch_file(raw, "0.loc", 4 * 16 + 4, v, 4); /* 0 stored bytes */
    patch_file(raw, "0.loc", 4 * 16 + 8, (unsigned char[]){16, 0, 0, 0}, 4);
    expect_gather_error(raw, 4, "bad location");

    const char *z = zt_root_at("loc_zstd");
    make_dense(z, 8, ZRE_CODEC_ZSTD);
    zt_put_le32(v, 0);
    patch_file(z, "0.loc", 2 * 16 + 4, v, 4);
    expect_gather_error(z, 2, "bad location (offset");
    zt_put_le32(v, 1);
    patch_file(z, "0.loc", 3 * 16 + 4, v, 4); /* frame cut to 1 byte */
    expect_gather_error(z, 3, "does not decode");
    /* Records whose entries are intact still read. */
    zrs_store *s = NULL;
    assert_int_equal(zrs_open_ex(&s, z, ZRE_OPEN_READONLY), ZR_OK);
    unsigned char rec[16];
    int64_t idx = 1;
    assert_int_equal(zrs_gather_dense(s, &idx, 1, rec, sizeof rec), ZR_OK);
    assert_int_equal(rec[7], 1);
    assert_int_equal(zrs_close(s), ZR_OK);
}

static void test_ragged_prefix_error_names_store(void **state)
{
    (void)state;
    const char *path = zt_root_at("rag");
    zrs_store *s = NULL;
    assert_int_equal(zrs_create_ragged(&s, path, ZRS_INT32, ZRE_CODEC_RAW), ZR_OK);
    /* three records of shape (2,): [ndim=1][dim=2][8 payload bytes] */
    unsigned char packed[3 * 24];
    memset(packed, 0, sizeof packed);
    uint64_t bounds[4] = {0, 24, 48, 72};
    for (int r = 0; r < 3; r++) {
        packed[r * 24] = 1;
        packed[r * 24 + 8] = 2;
    }
    assert_int_equal(zrs_append_ragged(s, packed, bounds, 3, NULL), ZR_OK);
    assert_int_equal(zrs_close(s), ZR_OK);
    patch_file(path, "0.chunk", 24, (unsigned char[]){48}, 1); /* record 1: ndim 48 */

    assert_int_equal(zrs_open_ex(&s, path, ZRE_OPEN_READONLY), ZR_OK);
    int64_t idx = 1;
    uint64_t b[2] = {0, 24};
    unsigned char out[24];
    assert_int_equal(zrs_gather_ragged(s, &idx, 1, out, sizeof out, b), ZR_ECORRUPT);
    char want[800];
    snprintf(want, sizeof want, "store %s:", path);
    assert_error_mentions(want);
    assert_error_mentions("ndim 48");
    assert_int_equal(zrs_close(s), ZR_OK);
}

static void test_identity_bytes_escaped(void **state)
{
    (void)state;
    const char *path = zt_root_at("ident");
    make_dense(path, 1, ZRE_CODEC_RAW);
    /* {"\xff\x01k\\": 1} - an unexpected key with non-printable bytes */
    const unsigned char map[] = {0x81, 0xa4, 0xff, 0x01, 'k', '\\', 0x01};
    char p[800];
    snprintf(p, sizeof p, "%s/store.zr", path);
    FILE *f = fopen(p, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(map, 1, sizeof map, f), sizeof map);
    assert_int_equal(fclose(f), 0);
    zrs_store *s = NULL;
    assert_int_equal(zrs_open(&s, path), ZR_ENOTSTORE);
    assert_error_mentions("unexpected key '\\xff\\x01k\\\\'");
    for (const unsigned char *c = (const unsigned char *)zr_last_error(); *c; c++)
        assert_true(*c >= 0x20 && *c < 0x7f);

    /* An unsupported dtype string, longer than the quoted limit. */
    unsigned char m2[64] = {0x81, 0xa5, 'd', 't', 'y', 'p', 'e', 0xd9, 30};
    for (int i = 0; i < 30; i++)
        m2[9 + i] = (unsigned char)(0x80 + i);
    f = fopen(p, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(m2, 1, 39, f), 39);
    assert_int_equal(fclose(f), 0);
    assert_int_equal(zrs_open(&s, path), ZR_ENOTSTORE);
    assert_error_mentions("unsupported dtype '\\x80\\x81");
    assert_error_mentions("...'");
    for (const unsigned char *c = (const unsigned char *)zr_last_error(); *c; c++)
        assert_true(*c >= 0x20 && *c < 0x7f);
}

/* ------------------------------------------------------------ readahead */

static void test_chunk_bytes(void **state)
{
    (void)state;
    const char *path = zt_root_at("bytes");
    make_dense(path, 100, ZRE_CODEC_ZSTD);
    zrs_store *s = NULL;
    assert_int_equal(zrs_open_ex(&s, path, ZRE_OPEN_READONLY), ZR_OK);
    zre_stats st;
    assert_int_equal(zre_get_stats(zrs_engine(s), &st), ZR_OK);
    assert_true(st.chunk_bytes > 0);
    assert_int_equal(zre_chunk_bytes(zrs_engine(s)), st.chunk_bytes);
    assert_int_equal(zrs_data_bytes(s), st.chunk_bytes);
    assert_int_equal(zrs_close(s), ZR_OK);
    assert_int_equal(zrs_data_bytes(NULL), 0);
    assert_int_equal(zre_chunk_bytes(NULL), 0);
    /* sysconf knows the machine on every POSIX system this runs on */
    assert_true(zrp_physical_memory() >= (uint64_t)1 << 20);
}

static int foreign_advise(void *user, const uint64_t *index, uint64_t count)
{
    return zrs_advise(user, (const int64_t *)index, count);
}

static unsigned resolved_readahead(zrs_store *s, unsigned readahead, int foreign)
{
    zld_options o = ZLD_OPTIONS_INIT;
    o.batch_size = 4;
    o.num_workers = 1;
    o.prefetch = 3;
    o.readahead = readahead;
    zld_loader *l = NULL;
    if (foreign) {
        zld_stream st;
        assert_int_equal(zld_stream_from_store(&st, s), ZR_OK);
        st.advise = foreign_advise;
        assert_int_equal(zld_create_streams(&l, &st, 1, &o), ZR_OK);
    } else {
        assert_int_equal(zld_create(&l, &s, 1, &o), ZR_OK);
    }
    zld_batch *b = NULL;
    assert_int_equal(zld_next(l, &b), ZR_OK);
    zld_batch_free(b);
    zld_options got;
    assert_int_equal(zld_get_state(l, &got), ZR_OK);
    assert_int_equal(got.readahead, readahead); /* as asked: AUTO stays AUTO */
    unsigned ra = zld_readahead(l);
    zld_close(l);
    return ra;
}

static void test_readahead_default_is_adaptive(void **state)
{
    (void)state;
    const char *path = zt_root_at("ra");
    make_dense(path, 64, ZRE_CODEC_ZSTD);
    zrs_store *s = NULL;
    assert_int_equal(zrs_open_ex(&s, path, ZRE_OPEN_READONLY), ZR_OK);
    /* A few KiB: far below half of any machine's memory, so no hints. */
    assert_int_equal(resolved_readahead(s, ZLD_READAHEAD_AUTO, 0), 0);
    /* Explicit distances are obeyed; 0 stays off. */
    assert_int_equal(resolved_readahead(s, 5, 0), 5);
    assert_int_equal(resolved_readahead(s, 0, 0), 0);
    /* A stream with its own advise callback cannot be sized: it keeps
     * its hints (prefetch steps ahead). */
    assert_int_equal(resolved_readahead(s, ZLD_READAHEAD_AUTO, 1), 3);
    assert_int_equal(zrs_close(s), ZR_OK);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_forget_after_fork_releases_lock, setup, teardown),
        cmocka_unit_test_setup_teardown(test_gather_errors_name_loc_entry, setup, teardown),
        cmocka_unit_test_setup_teardown(test_ragged_prefix_error_names_store, setup, teardown),
        cmocka_unit_test_setup_teardown(test_identity_bytes_escaped, setup, teardown),
        cmocka_unit_test_setup_teardown(test_chunk_bytes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_readahead_default_is_adaptive, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
