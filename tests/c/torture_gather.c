/*
 * torture_gather.c - the gather read path on raw stores: the block fast
 * path (table entries located, prefetched, decoded and checked a block at
 * a time) and its fallback to the per-record path (shrunk geometry: 64 KiB
 * chunks, 64-entry record-table segments, so small batches cross many
 * segment and chunk boundaries).
 *
 * Every batch shape is checked byte for byte: random with repeats, runs of
 * consecutive indices, reversed, one index repeated, batch sizes around the
 * block size, batches large enough to be shared over the pool by record
 * count, explicit placement with record sizes on every copy branch, many
 * stores at once (all raw, and raw beside zstd). A damaged table entry on
 * the fast path must give ZR_ECORRUPT with the message the per-record path
 * gives (the same text whether the entry is gathered alone, in a block, or
 * in a sharded batch), never a fault.
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

#define SEG_ENTRIES 64u /* shrunk geometry */
#define REC 40u         /* 1638 records per 64 KiB chunk */

static int setup(void **state)
{
    (void)state;
    return zt_root_setup("gather");
}

static int teardown(void **state)
{
    (void)state;
    zt_root_teardown();
    return 0;
}

/* Record i of n bytes: derived from i, so any misplaced read shows. */
static void fill(unsigned char *p, uint64_t i, uint64_t n)
{
    uint64_t s = i * 2654435761u + 7;
    for (uint64_t k = 0; k < n; k++)
        p[k] = (unsigned char)(zt_splitmix64(&s) >> 13);
}

/* Ragged sizes 1..100 bytes: every branch of the small-record copy. */
static uint64_t rag_size(uint64_t i) { return 1 + (i * 2654435761u) % 100; }

static void make_ragged(const char *path, uint64_t n)
{
    zre_engine *e = NULL;
    assert_int_equal(zre_create(&e, path, ZRE_CODEC_RAW), ZR_OK);
    uint64_t *b = malloc((n + 1) * sizeof *b);
    assert_non_null(b);
    b[0] = 0;
    for (uint64_t i = 0; i < n; i++)
        b[i + 1] = b[i] + rag_size(i);
    unsigned char *buf = malloc(b[n]);
    assert_non_null(buf);
    for (uint64_t i = 0; i < n; i++)
        fill(buf + b[i], i, rag_size(i));
    assert_int_equal(zre_append(e, buf, 0, b, n, NULL), ZR_OK);
    assert_int_equal(zre_close(e), ZR_OK);
    free(buf);
    free(b);
}

/* Gather idx[0..n) with fixed placement and check every byte. */
static void check_fixed(zre_engine *e, const uint64_t *idx, uint64_t n)
{
    unsigned char *dst = malloc(n * REC), want[REC];
    assert_non_null(dst);
    int rc = zre_gather(e, idx, n, dst, n * REC, REC, NULL);
    if (rc != ZR_OK)
        fail_msg("gather of %" PRIu64 " failed: %s", n, zr_last_error());
    for (uint64_t k = 0; k < n; k++) {
        fill(want, idx[k], REC);
        if (memcmp(dst + k * REC, want, REC) != 0)
            fail_msg("record %" PRIu64 " at position %" PRIu64 " of %" PRIu64 " differs", idx[k], k,
                     n);
    }
    free(dst);
}

/* The index shapes every test walks: n positions over `len` records. */
enum { SHAPE_RANDOM, SHAPE_RUNS, SHAPE_REVERSED, SHAPE_SAME, SHAPE_MIXED, SHAPES };
static void make_index(uint64_t *idx, uint64_t n, uint64_t len, int shape, uint64_t seed)
{
    uint64_t s = seed;
    for (uint64_t k = 0; k < n; k++) {
        switch (shape) {
        case SHAPE_RANDOM: idx[k] = zt_splitmix64(&s) % len; break;
        case SHAPE_RUNS: idx[k] = (k + 17) % len; break; /* one run, wrapping */
        case SHAPE_REVERSED: idx[k] = len - 1 - k % len; break;
        case SHAPE_SAME: idx[k] = len / 2; break;
        default:
            /* runs of 1..80 consecutive indices from random starts */
            if (k == 0 || zt_splitmix64(&s) % 40 == 0)
                idx[k] = zt_splitmix64(&s) % len;
            else
                idx[k] = (idx[k - 1] + 1) % len;
        }
    }
}

#define N_FIXED 3500u /* 3 chunks, 55 table segments */

static void test_fixed_shapes(void **state)
{
    (void)state;
    char path[700];
    snprintf(path, sizeof path, "%s/fixed", zt_root);
    zt_make_fixed(path, ZRE_CODEC_RAW, N_FIXED, REC, fill);
    zre_engine *e = NULL;
    assert_int_equal(zre_open_ex(&e, path, ZRE_OPEN_READONLY), ZR_OK);
    static const uint64_t sizes[] = {1, 2, 31, 32, 33, 63, 64, 65, 1000, 4095, 4096, 20000, 70000};
    uint64_t *idx = malloc(70000 * sizeof *idx);
    assert_non_null(idx);
    for (int shape = 0; shape < SHAPES; shape++)
        for (size_t z = 0; z < sizeof sizes / sizeof sizes[0]; z++) {
            make_index(idx, sizes[z], N_FIXED, shape, sizes[z] * 31 + (uint64_t)shape);
            check_fixed(e, idx, sizes[z]);
        }
    free(idx);
    assert_int_equal(zre_close(e), ZR_OK);
}

/* Explicit placement (dst_bounds) with gaps between slots left untouched. */
static void test_ragged_shapes(void **state)
{
    (void)state;
    char path[700];
    snprintf(path, sizeof path, "%s/ragged", zt_root);
    enum { N = 3000 };
    make_ragged(path, N);
    zre_engine *e = NULL;
    assert_int_equal(zre_open(&e, path), ZR_OK);
    static const uint64_t sizes[] = {1, 33, 100, 5000, 40000};
    uint64_t *idx = malloc(40000 * sizeof *idx), *b = malloc(40001 * sizeof *b);
    unsigned char *dst = malloc(40000 * 104), want[100];
    assert_non_null(idx);
    assert_non_null(b);
    assert_non_null(dst);
    for (int shape = 0; shape < SHAPES; shape++)
        for (size_t z = 0; z < sizeof sizes / sizeof sizes[0]; z++) {
            uint64_t n = sizes[z];
            make_index(idx, n, N, shape, n + 5 * (uint64_t)shape);
            b[0] = 3;
            for (uint64_t k = 0; k < n; k++)
                b[k + 1] = b[k] + rag_size(idx[k]);
            memset(dst, 0xEE, b[n] + 1);
            int rc = zre_gather(e, idx, n, dst, b[n] + 1, 0, b);
            if (rc != ZR_OK)
                fail_msg("ragged gather of %" PRIu64 " failed: %s", n, zr_last_error());
            for (uint64_t k = 0; k < n; k++) {
                fill(want, idx[k], rag_size(idx[k]));
                if (memcmp(dst + b[k], want, rag_size(idx[k])) != 0)
                    fail_msg("ragged record %" PRIu64 " at position %" PRIu64 " differs", idx[k], k);
            }
            for (uint64_t k = 0; k < 3; k++)
                assert_int_equal(dst[k], 0xEE);
            assert_int_equal(dst[b[n]], 0xEE);
            /* A slot one byte short of its record: refused, naming it. */
            if (n >= 2) {
                b[1]--;
                assert_int_equal(zre_gather(e, idx, 1, dst, b[n] + 1, 0, b), ZR_ECORRUPT);
                zt_assert_mentions(zr_last_error(), "destination slot");
                b[1]++;
            }
        }
    free(idx);
    free(b);
    free(dst);
    assert_int_equal(zre_close(e), ZR_OK);
}

/* Many stores in one call: all raw (the fast path walks them grouped by
 * store), then raw beside zstd (the per-record path). */
static void test_multi(void **state)
{
    (void)state;
    char a[700], z[700];
    snprintf(a, sizeof a, "%s/multi-a", zt_root);
    snprintf(z, sizeof z, "%s/multi-z", zt_root);
    zt_make_fixed(a, ZRE_CODEC_RAW, 700, REC, fill);
    zt_make_fixed(z, ZRE_CODEC_ZSTD, 300, REC, fill);
    zre_engine *ea = NULL, *ea2 = NULL, *ez = NULL;
    assert_int_equal(zre_open_ex(&ea, a, ZRE_OPEN_READONLY), ZR_OK);
    assert_int_equal(zre_open_ex(&ea2, a, ZRE_OPEN_READONLY), ZR_OK);
    assert_int_equal(zre_open_ex(&ez, z, ZRE_OPEN_READONLY), ZR_OK);
    enum { N = 9000 };
    uint64_t *idx = malloc(N * sizeof *idx);
    uint32_t *which = malloc(N * sizeof *which);
    unsigned char *dst = malloc((size_t)N * REC), want[REC];
    assert_non_null(idx);
    assert_non_null(which);
    assert_non_null(dst);
    for (int round = 0; round < 2; round++) {
        zre_engine *engines[2] = {ea, round == 0 ? ea2 : ez};
        uint64_t len1 = round == 0 ? 700 : 300, s = 99 + (uint64_t)round;
        for (uint64_t n = 1; n <= N; n = n * 7 + 3) {
            for (uint64_t k = 0; k < n; k++) {
                which[k] = (uint32_t)(zt_splitmix64(&s) % 2);
                idx[k] = zt_splitmix64(&s) % (which[k] ? len1 : 700);
            }
            int rc = zre_gather_multi(engines, 2, which, idx, n, dst, n * REC, REC, NULL);
            if (rc != ZR_OK)
                fail_msg("gather_multi of %" PRIu64 " failed: %s", n, zr_last_error());
            for (uint64_t k = 0; k < n; k++) {
                fill(want, idx[k], REC);
                if (memcmp(dst + k * REC, want, REC) != 0)
                    fail_msg("round %d: record %" PRIu64 " of store %u at position %" PRIu64
                             " differs", round, idx[k], which[k], k);
            }
        }
    }
    free(idx);
    free(which);
    free(dst);
    assert_int_equal(zre_close(ea), ZR_OK);
    assert_int_equal(zre_close(ea2), ZR_OK);
    assert_int_equal(zre_close(ez), ZR_OK);
}

/* ------------------------------------------------------ damaged tables */

#define N_DMG 4000u /* 3 chunks; 63 segments */
#define VICTIM 2000u /* 31.loc entry 16, in chunk 1 */

typedef struct damage {
    const char *what;
    long field;     /* byte offset in the entry: 0 offset, 4 phys, 8 logic, 12 chunk */
    uint32_t value; /* UINT32_MAX - 1: the size of 2.chunk (the tail) minus 8 */
    long field2;    /* a second field to set (-1: none) */
    uint32_t value2;
    const char *mentions;
} damage;

static const damage damages[] = {
    {"logical size", 8, REC + 1, -1, 0, "is 41 bytes"},
    {"stored size", 4, REC - 1, -1, 0, "stored size 39 != logical size 40"},
    {"zero stored size", 4, 0, -1, 0, "bad location"},
    {"chunk id", 12, 7, -1, 0, "points at chunk 7"},
    {"huge chunk id", 12, 0xFFFFFFFFu, -1, 0, "points at chunk 4294967295"},
    {"offset past capacity", 0, 0xFFFFFFF0u, -1, 0, "bad location"},
    {"offset past end of file", 0, UINT32_MAX - 1, 12, 2, "too short"},
};

/* Gather with the victim at `pos` of n positions (the rest random) and
 * return the error text (static buffer). */
static const char *gather_fail(zre_engine *e, uint64_t n, uint64_t pos, unsigned char *dst)
{
    static char msg[1024];
    uint64_t *idx = malloc(n * sizeof *idx);
    assert_non_null(idx);
    uint64_t s = n;
    for (uint64_t k = 0; k < n; k++) {
        idx[k] = zt_splitmix64(&s) % N_DMG;
        if (idx[k] == VICTIM)
            idx[k]++;
    }
    idx[pos] = VICTIM;
    assert_int_equal(zre_gather(e, idx, n, dst, n * REC, REC, NULL), ZR_ECORRUPT);
    snprintf(msg, sizeof msg, "%s", zr_last_error());
    free(idx);
    return msg;
}

static void test_damaged_entries(void **state)
{
    (void)state;
    char path[700], loc[800], chunk2[800];
    snprintf(path, sizeof path, "%s/damaged", zt_root);
    zt_make_fixed(path, ZRE_CODEC_RAW, N_DMG, REC, fill);
    snprintf(loc, sizeof loc, "%s/%u.loc", path, VICTIM / SEG_ENTRIES);
    snprintf(chunk2, sizeof chunk2, "%s/2.chunk", path);
    const long at = (long)(VICTIM % SEG_ENTRIES) * 16;
    unsigned char orig[16];
    {
        unsigned char *b = NULL;
        size_t len = zt_slurp(loc, &b);
        assert_non_null(b);
        assert_true((size_t)at + 16 <= len);
        memcpy(orig, b + at, 16);
        free(b);
        assert_int_equal(zt_get_le32(orig + 12), 1); /* the victim is in chunk 1 */
    }
    unsigned char *dst = malloc(20000 * REC);
    assert_non_null(dst);
    for (size_t d = 0; d < sizeof damages / sizeof damages[0]; d++) {
        const damage *dm = &damages[d];
        unsigned char v[4];
        uint32_t value = dm->value;
        if (value == UINT32_MAX - 1)
            value = (uint32_t)zt_file_size(chunk2) - 8;
        zt_put_le32(v, value);
        zt_patch_file(loc, at + dm->field, v, 4);
        if (dm->field2 >= 0) {
            zt_put_le32(v, dm->value2);
            zt_patch_file(loc, at + dm->field2, v, 4);
        }
        zre_engine *e = NULL;
        assert_int_equal(zre_open_ex(&e, path, ZRE_OPEN_READONLY), ZR_OK);
        /* Alone, as the first position of a block, in the middle of a
         * later block, and in a batch large enough to be sharded. */
        char alone[1024];
        snprintf(alone, sizeof alone, "%s", gather_fail(e, 1, 0, dst));
        zt_assert_mentions(alone, dm->mentions);
        zt_assert_mentions(alone, "record 2000");
        zt_assert_mentions(alone, "31.loc entry 16");
        static const uint64_t shapes[][2] = {{64, 32}, {100, 70}, {100, 99}, {20000, 15000},
                                             {20000, 3}};
        for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++) {
            const char *m = gather_fail(e, shapes[k][0], shapes[k][1], dst);
            if (strcmp(m, alone) != 0)
                fail_msg("%s: batch %" PRIu64 " (victim at %" PRIu64 ") says \"%s\", alone \"%s\"",
                         dm->what, shapes[k][0], shapes[k][1], m, alone);
        }
        /* Every other record still reads, fast, across the damage. */
        uint64_t idx[200];
        for (uint64_t k = 0; k < 200; k++)
            idx[k] = VICTIM - 100 + k + (k >= 100);
        check_fixed(e, idx, 200);
        assert_int_equal(zre_close(e), ZR_OK);
        zt_patch_file(loc, at, orig, 16);
    }

    /* Restored: the whole store reads again. */
    zre_engine *e = NULL;
    assert_int_equal(zre_open_ex(&e, path, ZRE_OPEN_READONLY), ZR_OK);
    uint64_t *all = malloc(N_DMG * sizeof *all);
    assert_non_null(all);
    for (uint64_t k = 0; k < N_DMG; k++)
        all[k] = k;
    check_fixed(e, all, N_DMG);
    free(all);
    assert_int_equal(zre_close(e), ZR_OK);
    free(dst);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_fixed_shapes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_ragged_shapes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_multi, setup, teardown),
        cmocka_unit_test_setup_teardown(test_damaged_entries, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
