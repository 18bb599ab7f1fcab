/*
 * torture_mmap.c - the engine's mapped read path (shrunk geometry: 64 KiB
 * chunks, 64-entry record-table segments).
 *
 * Gathers read records straight from read-only mappings of the chunk and
 * table files; a range past the end of a file must be refused from the
 * sizes the engine knows (ZR_ECORRUPT naming the file), never touched
 * (which would raise SIGBUS). Also: bytes appended on the same handle are
 * visible through the mappings at once, across chunk and segment
 * boundaries, and after a compact that truncates and deletes files.
 */
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "zr_test_engine.h"
#include "zr_test_util.h"
#include "zrengine.h"

#define REC 3000u /* 21 records per 64 KiB chunk; records straddle pages */

static int setup(void **state)
{
    (void)state;
    return zt_root_setup("mmap");
}

static int teardown(void **state)
{
    (void)state;
    zt_root_teardown();
    return 0;
}

/* Record i: bytes derived from i, so any misplaced read shows. */
static void fill(unsigned char *p, uint64_t i, uint64_t n)
{
    uint64_t s = i * 2654435761u + 1;
    for (uint64_t k = 0; k < n; k++)
        p[k] = (unsigned char)(zt_splitmix64(&s) % 7 + i);
}

static void truncate_file(const char *path, size_t size)
{
    unsigned char *b = NULL;
    size_t n = zt_slurp(path, &b);
    assert_non_null(b);
    assert_true(size <= n);
    zt_write_file(path, b, size);
    free(b);
}

/* The table entry of record i (shrunk geometry: 64 entries a segment). */
#define SEG_ENTRIES 64u
typedef struct entry {
    uint32_t offset, phys_length, chunk_id;
} entry;

static entry read_entry(const char *store, uint64_t i)
{
    char loc[800];
    snprintf(loc, sizeof loc, "%s/%" PRIu64 ".loc", store, i / SEG_ENTRIES);
    unsigned char *b = NULL;
    size_t n = zt_slurp(loc, &b);
    size_t at = (size_t)(i % SEG_ENTRIES) * 16;
    assert_non_null(b);
    assert_true(at + 16 <= n);
    entry en = {zt_get_le32(b + at), zt_get_le32(b + at + 4), zt_get_le32(b + at + 12)};
    free(b);
    return en;
}

/* A non-tail chunk cut short (open checks only the tail chunk): records
 * past its end, in the page holding the end and in pages wholly beyond
 * it, are refused with the file named; records wholly below the cut and
 * records of later chunks still read. Which records those are comes from
 * the table: zstd appends compress in parallel and place frames in
 * completion order, so record 0 need not be first in its chunk. */
#define CUT 5000u
static void run_short_chunk(zre_codec codec)
{
    char path[700], chunk[800];
    snprintf(path, sizeof path, "%s/short-%s", zt_root, zre_codec_name(codec));
    enum { N = 100 };
    zt_make_fixed(path, codec, N, REC, fill);
    snprintf(chunk, sizeof chunk, "%s/0.chunk", path);
    long full = zt_file_size(chunk);
    assert_true(full > 9000);
    entry en[N];
    for (uint64_t i = 0; i < N; i++)
        en[i] = read_entry(path, i);
    truncate_file(chunk, CUT);

    zre_engine *e = NULL;
    assert_int_equal(zre_open_ex(&e, path, ZRE_OPEN_READONLY), ZR_OK);
    unsigned char out[REC], want[REC];
    int intact = 0, bad = 0, later = 0;
    for (uint64_t idx = 0; idx < N; idx++) {
        int rc = zre_gather(e, &idx, 1, out, sizeof out, REC, NULL);
        if (en[idx].chunk_id != 0 || (uint64_t)en[idx].offset + en[idx].phys_length <= CUT) {
            assert_int_equal(rc, ZR_OK);
            fill(want, idx, REC);
            assert_memory_equal(out, want, REC);
            en[idx].chunk_id != 0 ? later++ : intact++;
            continue;
        }
        assert_int_equal(rc, ZR_ECORRUPT);
        zt_assert_mentions(zr_last_error(), "0.chunk");
        zt_assert_mentions(zr_last_error(), "too short");
        assert_int_equal(zre_check_record(e, idx), ZR_ECORRUPT);
        bad++;
    }
    assert_true(intact > 0);
    assert_true(bad > 0);
    /* A whole batch across the damage fails cleanly, sharded or not. */
    uint64_t many[400];
    for (int k = 0; k < 400; k++)
        many[k] = (uint64_t)(k * 37 % N);
    unsigned char *dst = malloc(400 * REC);
    assert_non_null(dst);
    assert_int_equal(zre_gather(e, many, 400, dst, 400 * REC, REC, NULL), ZR_ECORRUPT);
    free(dst);
    if (codec == ZRE_CODEC_RAW)
        assert_true(later > 0); /* 100 raw records fill several chunks */
    assert_int_equal(zre_close(e), ZR_OK);
}

static void test_short_chunk_raw(void **state)
{
    (void)state;
    run_short_chunk(ZRE_CODEC_RAW);
}

static void test_short_chunk_zstd(void **state)
{
    (void)state;
    run_short_chunk(ZRE_CODEC_ZSTD);
}

/* A table entry pointing past the end of its (intact) chunk file, but
 * inside the chunk capacity: refused, naming the entry. */
static void test_entry_past_eof(void **state)
{
    (void)state;
    char path[700], loc[800];
    snprintf(path, sizeof path, "%s/entry", zt_root);
    zt_make_fixed(path, ZRE_CODEC_RAW, 5, REC, fill);
    snprintf(loc, sizeof loc, "%s/0.loc", path);
    unsigned char off[4];
    zt_put_le32(off, 40000); /* chunk 0 holds 15000 bytes */
    zt_patch_file(loc, 16 * 3, off, 4);
    zre_engine *e = NULL;
    assert_int_equal(zre_open(&e, path), ZR_OK);
    unsigned char out[REC];
    uint64_t idx = 3;
    assert_int_equal(zre_gather(e, &idx, 1, out, sizeof out, REC, NULL), ZR_ECORRUPT);
    zt_assert_mentions(zr_last_error(), "0.loc entry 3");
    zt_assert_mentions(zr_last_error(), "too short");
    uint64_t size = 0;
    assert_int_equal(zre_record_sizes(e, &idx, 1, &size), ZR_OK);
    assert_int_equal(size, REC);
    assert_int_equal(zre_check_record(e, idx), ZR_ECORRUPT);
    assert_int_equal(zre_advise(e, &idx, 1), ZR_OK); /* advisory: no error */
    assert_int_equal(zre_close(e), ZR_OK);
}

/* Appends on an open handle, read back at once each time, across chunk
 * rollovers and table segment boundaries; then a delete and a compact
 * (which truncates the tail chunk and deletes emptied files) and more
 * appends into the shrunk files. */
static void run_grow(zre_codec codec)
{
    char path[700];
    snprintf(path, sizeof path, "%s/grow-%s", zt_root, zre_codec_name(codec));
    zre_engine *e = NULL;
    assert_int_equal(zre_create(&e, path, codec), ZR_OK);
    enum { N = 300 };
    unsigned char *want = malloc((size_t)N * REC), *got = malloc((size_t)N * REC);
    uint64_t *idx = malloc(N * sizeof *idx);
    assert_true(want && got && idx);
    for (uint64_t i = 0; i < N; i++)
        fill(want + i * REC, i, REC);
    uint64_t len = 0;
    while (len < N) {
        uint64_t k = 1 + len % 7;
        if (k > N - len)
            k = N - len;
        assert_int_equal(zre_append(e, want + len * REC, REC, NULL, k, NULL), ZR_OK);
        len += k;
        for (uint64_t i = 0; i < len; i++)
            idx[i] = len - 1 - i;
        assert_int_equal(zre_gather(e, idx, len, got, (uint64_t)N * REC, REC, NULL), ZR_OK);
        for (uint64_t i = 0; i < len; i++)
            assert_memory_equal(got + i * REC, want + idx[i] * REC, REC);
    }
    /* Delete the upper half, compact (files shrink or go), read all. */
    uint64_t del[N / 2];
    for (uint64_t i = 0; i < N / 2; i++)
        del[i] = N / 2 + i;
    assert_int_equal(zre_delete(e, del, N / 2), ZR_OK);
    assert_int_equal(zre_compact(e), ZR_OK);
    len = N / 2;
    for (uint64_t i = 0; i < len; i++)
        idx[i] = i;
    assert_int_equal(zre_gather(e, idx, len, got, (uint64_t)N * REC, REC, NULL), ZR_OK);
    assert_memory_equal(got, want, (size_t)len * REC);
    /* Past the new end of the table: a range error, not a stale read. */
    idx[0] = len;
    assert_int_equal(zre_gather(e, idx, 1, got, REC, REC, NULL), ZR_ERANGE);
    /* Grow again into the truncated and re-created files. */
    assert_int_equal(zre_append(e, want + len * REC, REC, NULL, N - len, NULL), ZR_OK);
    for (uint64_t i = 0; i < N; i++)
        idx[i] = (i * 7919) % N;
    assert_int_equal(zre_gather(e, idx, N, got, (uint64_t)N * REC, REC, NULL), ZR_OK);
    for (uint64_t i = 0; i < N; i++)
        assert_memory_equal(got + i * REC, want + idx[i] * REC, REC);
    assert_int_equal(zre_close(e), ZR_OK);
    /* And the same through a fresh read-only handle. */
    assert_int_equal(zre_open_ex(&e, path, ZRE_OPEN_READONLY), ZR_OK);
    assert_int_equal(zre_gather(e, idx, N, got, (uint64_t)N * REC, REC, NULL), ZR_OK);
    for (uint64_t i = 0; i < N; i++)
        assert_memory_equal(got + i * REC, want + idx[i] * REC, REC);
    assert_int_equal(zre_close(e), ZR_OK);
    free(want);
    free(got);
    free(idx);
}

static void test_grow_raw(void **state)
{
    (void)state;
    run_grow(ZRE_CODEC_RAW);
}

static void test_grow_zstd(void **state)
{
    (void)state;
    run_grow(ZRE_CODEC_ZSTD);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_short_chunk_raw, setup, teardown),
        cmocka_unit_test_setup_teardown(test_short_chunk_zstd, setup, teardown),
        cmocka_unit_test_setup_teardown(test_entry_past_eof, setup, teardown),
        cmocka_unit_test_setup_teardown(test_grow_raw, setup, teardown),
        cmocka_unit_test_setup_teardown(test_grow_zstd, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
