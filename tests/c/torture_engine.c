/*
 * torture_engine.c - cmocka suite for libzrengine (and the platform layer
 * it stands on).
 */
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#ifndef _WIN32
#include <unistd.h> /* symlink */
#endif

#include "zr_platform.h"
#include "zr_test_util.h"
#include "zrengine.h"

/* ------------------------------------------------------------- fixture */

typedef zt_dir fixture;

static int setup(void **state)
{
    assert_int_equal(zt_dir_setup(state, "engine"), 0);
    return 0;
}

static const char *spath(void **state, const char *name)
{
    static _Thread_local char p[600];
    fixture *f = *state;
    snprintf(p, sizeof p, "%s/%s", f->dir, name);
    return p;
}

/* ----------------------------------------------------------- test data */

/* Deterministic content: record i of `size` bytes. Mixed enough that zstd
 * frames are non-trivial, repetitive enough that they compress. */
static void fill_record(unsigned char *p, uint64_t i, uint64_t size)
{
    uint64_t x = i * UINT64_C(0x9E3779B97F4A7C15) + 1;
    for (uint64_t j = 0; j < size; j++) {
        if (j % 16 == 0)
            zt_xorshift64(&x);
        p[j] = (unsigned char)((x >> ((j % 8) * 8)) & 0x3f) + (unsigned char)(j / 64);
    }
}

static uint64_t var_size(uint64_t i) { return 1024 + (i * 2654435761u) % 3073; }

/* Append records [first, first+n) with sizes size_of(i) using explicit
 * bounds. */
static void append_var(zre_engine *e, uint64_t first, uint64_t n, uint64_t (*size_of)(uint64_t))
{
    uint64_t *bounds = malloc((n + 1) * sizeof *bounds);
    assert_non_null(bounds);
    bounds[0] = 0;
    for (uint64_t k = 0; k < n; k++)
        bounds[k + 1] = bounds[k] + size_of(first + k);
    unsigned char *buf = malloc(bounds[n]);
    assert_non_null(buf);
    for (uint64_t k = 0; k < n; k++)
        fill_record(buf + bounds[k], first + k, size_of(first + k));
    uint64_t fi = UINT64_MAX;
    int rc = zre_append(e, buf, 0, bounds, n, &fi);
    if (rc != 0)
        fail_msg("append failed: %s", zr_last_error());
    assert_int_equal(fi, first);
    free(buf);
    free(bounds);
}

static void append_fixed(zre_engine *e, uint64_t first, uint64_t n, uint64_t size)
{
    unsigned char *buf = malloc(n * size);
    assert_non_null(buf);
    for (uint64_t k = 0; k < n; k++)
        fill_record(buf + k * size, first + k, size);
    uint64_t fi = UINT64_MAX;
    int rc = zre_append(e, buf, size, NULL, n, &fi);
    if (rc != 0)
        fail_msg("append failed: %s", zr_last_error());
    assert_int_equal(fi, first);
    free(buf);
}

/* Gather `idx` with explicit placement and check every byte. */
static void check_gather(zre_engine *e, const uint64_t *idx, uint64_t n, uint64_t (*size_of)(uint64_t))
{
    uint64_t *b = malloc((n + 1) * sizeof *b);
    assert_non_null(b);
    b[0] = 0;
    for (uint64_t k = 0; k < n; k++)
        b[k + 1] = b[k] + size_of(idx[k]);
    unsigned char *dst = malloc(b[n] + 1);
    unsigned char *want = malloc(4 * 4096 + 1);
    assert_non_null(dst);
    assert_non_null(want);
    int rc = zre_gather(e, idx, n, dst, b[n], 0, b);
    if (rc != 0)
        fail_msg("gather failed: %s", zr_last_error());
    for (uint64_t k = 0; k < n; k++) {
        uint64_t sz = size_of(idx[k]);
        unsigned char *w = sz <= 4 * 4096 ? want : malloc(sz);
        fill_record(w, idx[k], sz);
        if (memcmp(dst + b[k], w, sz) != 0)
            fail_msg("record %" PRIu64 " (position %" PRIu64 ") differs", idx[k], k);
        if (w != want)
            free(w);
    }
    free(want);
    free(dst);
    free(b);
}

/* The 32-byte meta.zr of older versions: its checksum is FNV-1a 32 of
 * bytes 0..27, stored little-endian at 28..31. Tests that tamper with a
 * field re-seal it so the open gets as far as the check they aim at. */
static void meta_seal(unsigned char *m)
{
    zt_put_le32(m + 28, zt_fnv1a32(m, 28));
}

/* The same for a 64-byte header copy (checksum of bytes 0..59 at 60). */
static void copy_seal(unsigned char *m)
{
    zt_put_le32(m + 60, zt_fnv1a32(m, 60));
}

#define assert_error_mentions(needle) zt_assert_mentions(zr_last_error(), (needle))

/* --------------------------------------------------------------- tests */

static void test_version_and_codecs(void **state)
{
    (void)state;
    assert_int_equal(zrengine_version(), ZRENGINE_VERSION_NUMBER);
    assert_string_equal(zre_codec_name(ZRE_CODEC_ZSTD), "zstd");
    assert_null(zre_codec_name((zre_codec)9));
    zre_codec c;
    assert_int_equal(zre_codec_parse("raw", &c), 0);
    assert_int_equal(c, ZRE_CODEC_RAW);
    assert_int_equal(zre_codec_parse("zstd_dict", &c), 0);
    assert_int_equal(c, ZRE_CODEC_ZSTD_DICT);
    assert_int_equal(zre_codec_parse("lz4", &c), ZR_EINVAL);
    assert_error_mentions("lz4");
    assert_string_equal(zr_strerror(ZR_EBUSY), "store is busy");
}

static void roundtrip_empty(void **state, zre_codec codec)
{
    const char *p = spath(state, "nested/a/b");
    zre_engine *e = NULL;
    assert_int_equal(zre_create(&e, p, codec), 0);
    assert_non_null(e);
    assert_int_equal(zre_length(e), 0);
    assert_int_equal(zre_get_codec(e), codec);
    assert_string_equal(zre_path(e), p);
    assert_int_equal(zre_close(e), 0);

    /* A new store's meta.zr: copy 0 holds the empty store (sequence 0),
     * copy 1 is empty (the first commit goes there). */
    unsigned char m[256];
    char mp[700];
    snprintf(mp, sizeof mp, "%s/meta.zr", p);
    assert_int_equal(zt_read_file(mp, m, sizeof m), ZRE_META_SIZE);
    unsigned char want[ZRE_META_SIZE] = {0};
    zt_meta empty = {.codec = (unsigned char)codec};
    zt_meta_copy(want, &empty);
    assert_memory_equal(m, want, ZRE_META_SIZE);

    assert_int_equal(zre_open(&e, p), 0);
    assert_int_equal(zre_length(e), 0);
    assert_int_equal(zre_get_codec(e), codec);
    uint64_t idx = 0;
    unsigned char d;
    assert_int_equal(zre_gather(e, &idx, 1, &d, 1, 1, NULL), ZR_ERANGE);
    assert_int_equal(zre_close(e), 0);
    assert_int_equal(zre_close(NULL), 0);
}

/* zre_push checks its arguments before it sends anything: more than 64
 * side files is refused by name (no server is reached: the URL's port is
 * closed), as is a URL that is not one. Builds without libcurl refuse
 * every push as unsupported. */
static void test_push_refuses_bad_arguments(void **state)
{
    const char *p = spath(state, "s");
    zre_engine *e;
    assert_int_equal(zre_create(&e, p, ZRE_CODEC_RAW), 0);
    const char *extra[65];
    for (size_t i = 0; i < 65; i++)
        extra[i] = "store.zr";
    int rc = zre_push(e, "http://127.0.0.1:9/x", extra, 65, NULL, NULL);
    if (zre_remote_supported()) {
        assert_int_equal(rc, ZR_EINVAL);
        assert_non_null(strstr(zr_last_error(), "65 side files; at most 64"));
        assert_int_equal(zre_push(e, "/not/a/url", NULL, 0, NULL, NULL), ZR_EINVAL);
        assert_non_null(strstr(zr_last_error(), "is not an http://"));
    } else {
        assert_int_equal(rc, ZR_EUNSUPPORTED);
    }
    assert_int_equal(zre_close(e), 0);
}

static void test_roundtrip_raw(void **state) { roundtrip_empty(state, ZRE_CODEC_RAW); }
static void test_roundtrip_zstd(void **state) { roundtrip_empty(state, ZRE_CODEC_ZSTD); }

static void batches(void **state, zre_codec codec)
{
    const char *p = spath(state, "s");
    zre_engine *e;
    assert_int_equal(zre_create(&e, p, codec), 0);
    /* Fixed-size records whose size is var_size(0) so one size function
     * describes the whole store. */
    uint64_t n0 = 40, n1 = 300, n2 = 17;
    append_fixed(e, 0, n0, var_size(0));
    {
        uint64_t idx[] = {39, 0, 5, 5, 17, 0};
        uint64_t sz = var_size(0);
        unsigned char *dst = malloc(6 * sz), *w = malloc(sz);
        assert_int_equal(zre_gather(e, idx, 6, dst, 6 * sz, sz, NULL), 0);
        for (int k = 0; k < 6; k++) {
            fill_record(w, idx[k], sz);
            assert_memory_equal(dst + k * sz, w, sz);
        }
        free(dst);
        free(w);
    }
    append_var(e, n0, n1, var_size);
    append_var(e, n0 + n1, n2, var_size);
    uint64_t len = n0 + n1 + n2;
    assert_int_equal(zre_length(e), len);

    /* Random, repeated, out-of-order indices from the variable part. */
    uint64_t idx[500], s = 12345;
    for (int k = 0; k < 500; k++)
        idx[k] = n0 + zt_xorshift64(&s) % (n1 + n2);
    idx[1] = idx[0];
    idx[2] = idx[0];
    check_gather(e, idx, 500, var_size);
    uint64_t sizes[3], q[3] = {0, n0, len - 1};
    assert_int_equal(zre_record_sizes(e, q, 3, sizes), 0);
    assert_int_equal(sizes[0], var_size(0));
    assert_int_equal(sizes[1], var_size(n0));
    assert_int_equal(sizes[2], var_size(len - 1));
    assert_int_equal(zre_close(e), 0);

    assert_int_equal(zre_open(&e, p), 0);
    assert_int_equal(zre_length(e), len);
    assert_int_equal(zre_get_codec(e), codec);
    check_gather(e, idx, 500, var_size);
    /* Appending after reopen continues the frontier. */
    append_var(e, len, 50, var_size);
    uint64_t tail[60];
    for (int k = 0; k < 60; k++)
        tail[k] = len + 49 - (uint64_t)k % 50;
    check_gather(e, tail, 60, var_size);
    assert_int_equal(zre_close(e), 0);
}

static void test_batches_raw(void **state) { batches(state, ZRE_CODEC_RAW); }
static void test_batches_zstd(void **state) { batches(state, ZRE_CODEC_ZSTD); }

static void many(void **state, zre_codec codec)
{
    const char *p = spath(state, "s");
    zre_engine *e;
    assert_int_equal(zre_create(&e, p, codec), 0);
    uint64_t n = 5000;
    append_var(e, 0, n, var_size);
    /* Every record once, shuffled: large enough to use every shard. */
    uint64_t *idx = malloc(n * sizeof *idx), s = 99;
    assert_non_null(idx);
    for (uint64_t k = 0; k < n; k++)
        idx[k] = k;
    for (uint64_t k = n - 1; k > 0; k--) {
        uint64_t r = zt_xorshift64(&s) % (k + 1), t = idx[k];
        idx[k] = idx[r];
        idx[r] = t;
    }
    check_gather(e, idx, n, var_size);
    /* Sequential (consecutive-run table reads). */
    for (uint64_t k = 0; k < n; k++)
        idx[k] = k;
    check_gather(e, idx, n, var_size);
    /* Small, inline. */
    uint64_t small[3] = {4999, 0, 2500};
    check_gather(e, small, 3, var_size);
    assert_int_equal(zre_close(e), 0);
    assert_int_equal(zre_open(&e, p), 0);
    check_gather(e, idx + 1000, 3000, var_size);
    assert_int_equal(zre_close(e), 0);
    free(idx);
}

static void test_many_raw(void **state) { many(state, ZRE_CODEC_RAW); }
static void test_many_zstd(void **state) { many(state, ZRE_CODEC_ZSTD); }

static void test_errors_range_and_args(void **state)
{
    const char *p = spath(state, "s");
    zre_engine *e;
    assert_int_equal(zre_create(&e, p, ZRE_CODEC_RAW), 0);
    append_fixed(e, 0, 10, 8);
    unsigned char dst[80];
    uint64_t idx[3] = {1, 10, 2};
    memset(dst, 0xAA, sizeof dst);
    assert_int_equal(zre_gather(e, idx, 3, dst, sizeof dst, 8, NULL), ZR_ERANGE);
    assert_error_mentions("index 10");
    assert_error_mentions("10 records");
    /* Range checked before dst is touched. */
    for (size_t k = 0; k < sizeof dst; k++)
        assert_int_equal(dst[k], 0xAA);
    uint64_t sz;
    assert_int_equal(zre_record_sizes(e, &idx[1], 1, &sz), ZR_ERANGE);
    assert_error_mentions("index 10");

    /* Destination too small. */
    uint64_t ok[3] = {1, 2, 3};
    assert_int_equal(zre_gather(e, ok, 3, dst, 23, 8, NULL), ZR_EINVAL);
    /* Slot size differs from the record. */
    assert_int_equal(zre_gather(e, ok, 3, dst, sizeof dst, 7, NULL), ZR_ECORRUPT);
    assert_error_mentions("record 1");

    /* Zero-size records are refused; nothing changes. */
    unsigned char src[16] = {1};
    uint64_t bounds[4] = {0, 4, 4, 8};
    assert_int_equal(zre_append(e, src, 0, bounds, 3, NULL), ZR_EINVAL);
    assert_error_mentions("record 11");
    assert_int_equal(zre_append(e, src, 0, NULL, 2, NULL), ZR_EINVAL);
    assert_int_equal(zre_append(e, src, ZRE_RECORD_MAX + 1, NULL, 1, NULL), ZR_ETOOBIG);
    assert_int_equal(zre_length(e), 10);
    uint64_t fi = 0;
    assert_int_equal(zre_append(e, src, 8, NULL, 0, &fi), 0);
    assert_int_equal(fi, 10);
    assert_int_equal(zre_close(e), 0);
    assert_int_equal(zre_open(&e, p), 0);
    assert_int_equal(zre_length(e), 10);
    zre_stats st;
    assert_int_equal(zre_get_stats(e, &st), 0);
    assert_int_equal(st.chunk_bytes, 80);
    assert_int_equal(zre_close(e), 0);
}

static void test_create_existing(void **state)
{
    const char *p = spath(state, "s");
    zre_engine *e = (zre_engine *)1;
    assert_int_equal(zrp_mkdir(p), 0);
    assert_int_equal(zre_create(&e, p, ZRE_CODEC_RAW), ZR_EEXIST);
    assert_null(e);
    assert_error_mentions(p);
    assert_int_equal(zre_create(&e, spath(state, "s2"), ZRE_CODEC_RAW), 0);
    assert_int_equal(zre_close(e), 0);
    assert_int_equal(zre_create(&e, spath(state, "s2"), ZRE_CODEC_ZSTD), ZR_EEXIST);
    assert_int_equal(zre_create(&e, spath(state, "plain"), (zre_codec)7), ZR_EINVAL);
}

static void test_open_not_store(void **state)
{
    zre_engine *e = (zre_engine *)1;
    const char *p = spath(state, "plain");
    assert_int_equal(zre_open(&e, p), ZR_ENOTSTORE); /* missing */
    assert_null(e);
    assert_int_equal(zrp_mkdir(p), 0);
    assert_int_equal(zre_open(&e, p), ZR_ENOTSTORE); /* no meta.zr */
    assert_error_mentions("meta.zr");
    char junk[700];
    snprintf(junk, sizeof junk, "%s/junk", p);
    zt_write_file(junk, "x", 1);
    assert_int_equal(zre_open(&e, junk), ZR_ENOTSTORE); /* a file */
}

/* Create a raw store with 3 records, close it, overwrite meta.zr. */
static void expect_bad_meta(void **state, const unsigned char *meta, size_t len, const char *mention)
{
    const char *p = spath(state, "s");
    char mp[700];
    snprintf(mp, sizeof mp, "%s/meta.zr", p);
    zt_write_file(mp, meta, len);
    zre_engine *e = (zre_engine *)1;
    assert_int_equal(zre_open(&e, p), ZR_ENOTSTORE);
    assert_null(e);
    assert_error_mentions(mention);
}

static void test_malformed_meta(void **state)
{
    const char *p = spath(state, "s");
    zre_engine *e;
    assert_int_equal(zre_create(&e, p, ZRE_CODEC_RAW), 0);
    append_fixed(e, 0, 3, 4);
    assert_int_equal(zre_close(e), 0);
    char mp[700];
    snprintf(mp, sizeof mp, "%s/meta.zr", p);
    /* The store's header as an older version wrote it (32 bytes): each
     * field is checked the same way in both forms. */
    zt_meta fields = {.length = 3, .tail_offset = 12};
    unsigned char good[32];
    zt_meta_legacy(good, &fields);
    unsigned char m[33];

    memcpy(m, good, 32);
    m[32] = 0;
    expect_bad_meta(state, m, 33, "33 bytes");
    expect_bad_meta(state, m, 31, "31 bytes");
    memcpy(m, good, 32);
    m[16] = 7;
    meta_seal(m);
    expect_bad_meta(state, m, 32, "codec");
    memcpy(m, good, 32);
    m[20] = 1;
    meta_seal(m);
    expect_bad_meta(state, m, 32, "reserved");
    memcpy(m, good, 32);
    m[0] = 4; /* any damage without re-sealing: the checksum catches it */
    expect_bad_meta(state, m, 32, "checksum");
    memcpy(m, good, 32);
    m[31] ^= 0x40;
    expect_bad_meta(state, m, 32, "checksum");
    memcpy(m, good, 32);
    m[0] = 4; /* length 4 > table of 3 */
    meta_seal(m);
    expect_bad_meta(state, m, 32, "0.loc");
    memcpy(m, good, 32);
    m[12] = 13; /* tail_offset beyond the 12-byte chunk */
    meta_seal(m);
    expect_bad_meta(state, m, 32, "tail");
    memcpy(m, good, 32);
    m[8] = 1; /* tail chunk 1 missing */
    meta_seal(m);
    expect_bad_meta(state, m, 32, "1.chunk");

    /* zstd_dict without its dict.zr. */
    memcpy(m, good, 32);
    m[16] = 2;
    meta_seal(m);
    expect_bad_meta(state, m, 32, "dict.zr");

    /* The two-copy header: a damaged copy is skipped (the other holds a
     * commit), both damaged is refused, and the fields are checked. */
    unsigned char two[ZRE_META_SIZE], c[ZRE_META_SIZE];
    zt_meta synced = fields;
    synced.seq = 2;
    synced.synced_length = 3;
    synced.synced_offset = 12;
    zt_meta older = {.seq = 1}; /* the empty store */
    zt_meta_copy(two, &synced);
    zt_meta_copy(two + 64, &older);
    memcpy(c, two, sizeof c);
    c[0] ^= 0x40; /* copy 0 damaged: copy 1, the older commit, is read */
    zt_write_file(mp, c, sizeof c);
    assert_int_equal(zre_open_ex(&e, p, ZRE_OPEN_READONLY), 0);
    assert_int_equal(zre_length(e), 0);
    assert_int_equal(zre_close(e), 0);
    c[64] ^= 0x40;
    expect_bad_meta(state, c, sizeof c, "neither copy");
    memcpy(c, two, sizeof c);
    c[56] = 1; /* reserved */
    copy_seal(c);
    expect_bad_meta(state, c, sizeof c, "reserved");
    memcpy(c, two, sizeof c);
    c[40] = 4; /* synced length 4 > length 3 */
    copy_seal(c);
    expect_bad_meta(state, c, sizeof c, "synced");
    memcpy(c, two, sizeof c);
    c[32] = 3; /* sequence 3 belongs in copy 1: this copy is not trusted */
    copy_seal(c);
    zt_write_file(mp, c, sizeof c);
    assert_int_equal(zre_open_ex(&e, p, ZRE_OPEN_READONLY), 0);
    assert_int_equal(zre_length(e), 0);
    assert_int_equal(zre_close(e), 0);
    expect_bad_meta(state, c, 64, "64 bytes");
    /* A conversion from the 32-byte header interrupted before copy 1 was
     * whole reads the old header, which must then be whole itself. */
    memset(c, 0, sizeof c);
    memcpy(c, good, 32);
    zt_write_file(mp, c, 96);
    assert_int_equal(zre_open_ex(&e, p, ZRE_OPEN_READONLY), 0);
    assert_int_equal(zre_length(e), 3);
    assert_int_equal(zre_close(e), 0);
    c[0] ^= 1;
    expect_bad_meta(state, c, sizeof c, "checksum");

    /* Restored to the older version's header, the store opens again: a
     * writable open turns it into the two copies. */
    zt_write_file(mp, good, 32);
    assert_int_equal(zre_open(&e, p), 0);
    assert_int_equal(zre_length(e), 3);
    assert_int_equal(zre_close(e), 0);
    assert_int_equal(zt_file_size(mp), ZRE_META_SIZE);
    assert_int_equal(zre_open_ex(&e, p, ZRE_OPEN_READONLY), 0);
    assert_int_equal(zre_length(e), 3);
    assert_int_equal(zre_close(e), 0);
}

static void test_busy(void **state)
{
    const char *p = spath(state, "s");
    zre_engine *e, *e2 = (zre_engine *)1;
    assert_int_equal(zre_create(&e, p, ZRE_CODEC_ZSTD), 0);
    /* flock is per open file description: a second open in this very
     * process conflicts too. */
    assert_int_equal(zre_open(&e2, p), ZR_EBUSY);
    assert_null(e2);
    assert_error_mentions(p);
    assert_error_mentions("busy");
    assert_int_equal(zre_close(e), 0);
    assert_int_equal(zre_open(&e2, p), 0);
    assert_int_equal(zre_open(&e, p), ZR_EBUSY);
    assert_int_equal(zre_close(e2), 0);
    assert_int_equal(zre_open(&e, p), 0);
    assert_int_equal(zre_close(e), 0);
}

static void test_stray_dict(void **state)
{
    zre_codec codecs[2] = {ZRE_CODEC_RAW, ZRE_CODEC_ZSTD};
    const char *names[2] = {"s", "s2"};
    for (int c = 0; c < 2; c++) {
        const char *p = spath(state, names[c]);
        zre_engine *e;
        assert_int_equal(zre_create(&e, p, codecs[c]), 0);
        assert_int_equal(zre_close(e), 0);
        char dp[700];
        snprintf(dp, sizeof dp, "%s/dict.zr", p);
        zt_write_file(dp, "dict", 4);
        assert_int_equal(zre_open(&e, p), ZR_ENOTSTORE);
        assert_error_mentions("dict.zr");
    }
}

static uint64_t text_size(uint64_t i) { return 200 + i * 10; }

static void test_corrupt_frame(void **state)
{
    const char *p = spath(state, "s");
    zre_engine *e;
    assert_int_equal(zre_create(&e, p, ZRE_CODEC_ZSTD), 0);
    append_var(e, 0, 3, text_size);
    assert_int_equal(zre_close(e), 0);

    /* Find record 1's frame through the table, flip a byte in its middle. */
    char lp[700], cp[700];
    snprintf(lp, sizeof lp, "%s/0.loc", p);
    snprintf(cp, sizeof cp, "%s/0.chunk", p);
    unsigned char loc[48];
    assert_int_equal(zt_read_file(lp, loc, sizeof loc), 48);
    uint32_t off = (uint32_t)loc[16] | (uint32_t)loc[17] << 8 | (uint32_t)loc[18] << 16 |
                   (uint32_t)loc[19] << 24;
    uint32_t phys = (uint32_t)loc[20] | (uint32_t)loc[21] << 8 | (uint32_t)loc[22] << 16 |
                    (uint32_t)loc[23] << 24;
    unsigned char chunk[8192];
    size_t n = zt_read_file(cp, chunk, sizeof chunk);
    assert_true(off + phys <= n);
    chunk[off + phys / 2] ^= 0x5A;
    zt_write_file(cp, chunk, n);

    assert_int_equal(zre_open(&e, p), 0);
    uint64_t good[2] = {0, 2};
    check_gather(e, good, 2, text_size);
    uint64_t bad[3] = {0, 2, 1};
    uint64_t b[4] = {0, text_size(0), text_size(0) + text_size(2),
                     text_size(0) + text_size(2) + text_size(1)};
    unsigned char dst[1024];
    assert_int_equal(zre_gather(e, bad, 3, dst, sizeof dst, 0, b), ZR_ECORRUPT);
    assert_error_mentions("record 1");
    assert_int_equal(zre_close(e), 0);
}

static uint64_t const_size(uint64_t i) { (void)i; return 1000; }

static void test_stats(void **state)
{
    zre_engine *e;
    zre_stats st;
    assert_int_equal(zre_create(&e, spath(state, "s"), ZRE_CODEC_RAW), 0);
    assert_int_equal(zre_get_stats(e, &st), 0);
    assert_int_equal(st.records, 0);
    assert_int_equal(st.chunk_bytes, 0);
    append_var(e, 0, 20, text_size);
    append_fixed(e, 20, 5, 33);
    assert_int_equal(zre_get_stats(e, &st), 0);
    uint64_t sum = 5 * 33;
    for (uint64_t i = 0; i < 20; i++)
        sum += text_size(i);
    assert_int_equal(st.records, 25);
    assert_int_equal(st.logical_bytes, sum);
    assert_int_equal(st.live_bytes, sum);
    assert_int_equal(st.chunk_bytes, sum);
    assert_int_equal(st.reclaimable, 0);
    assert_int_equal(zre_close(e), 0);

    /* zstd: highly compressible records store far fewer bytes. */
    assert_int_equal(zre_create(&e, spath(state, "s2"), ZRE_CODEC_ZSTD), 0);
    unsigned char *buf = calloc(100, 1000);
    assert_non_null(buf);
    assert_int_equal(zre_append(e, buf, 1000, NULL, 100, NULL), 0);
    assert_int_equal(zre_get_stats(e, &st), 0);
    assert_int_equal(st.records, 100);
    assert_int_equal(st.logical_bytes, 100000);
    assert_true(st.live_bytes > 0 && st.live_bytes < 100000 / 4);
    assert_int_equal(st.chunk_bytes, st.live_bytes);
    assert_int_equal(st.reclaimable, 0);
    uint64_t idx[2] = {99, 0};
    unsigned char dst[2000];
    memset(dst, 1, sizeof dst);
    assert_int_equal(zre_gather(e, idx, 2, dst, sizeof dst, 1000, NULL), 0);
    assert_memory_equal(dst, buf, 2000);
    free(buf);
    assert_int_equal(zre_close(e), 0);
    (void)const_size;
}

/* The test vector of docs/FORMAT.md, "A tiny raw store". */
static void test_format_vector(void **state)
{
    const char *p = spath(state, "s");
    zre_engine *e;
    assert_int_equal(zre_create(&e, p, ZRE_CODEC_RAW), 0);
    const char src[] = "abchelloZ";
    uint64_t bounds[4] = {0, 3, 8, 9};
    assert_int_equal(zre_append(e, src, 0, bounds, 3, NULL), 0);
    assert_int_equal(zre_close(e), 0);

    /* Copy 0: the close's sync (sequence 2: length 3, frontier 0:9, all
     * synced); copy 1: the append (sequence 1, synced state still 0). */
    static const unsigned char meta[ZRE_META_SIZE] = {
        0x03, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x09, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x5a, 0x52, 0x4d, 0x32,
        0x02, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x03, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x09, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x9c, 0xe3, 0x8f, 0xe9,
        0x03, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x09, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x5a, 0x52, 0x4d, 0x32,
        0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x95, 0x90, 0x27, 0x31,
    };
    static const unsigned char loc[48] = {
        0x00, 0x00, 0x00, 0x00, 0x03, 0x00, 0x00, 0x00, 0x03, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x03, 0x00, 0x00, 0x00, 0x05, 0x00, 0x00, 0x00, 0x05, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x08, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    };
    static const unsigned char chunk[9] = {0x61, 0x62, 0x63, 0x68, 0x65, 0x6c, 0x6c, 0x6f, 0x5a};

    unsigned char got[256];
    char fp[700];
    snprintf(fp, sizeof fp, "%s/meta.zr", p);
    assert_int_equal(zt_read_file(fp, got, sizeof got), sizeof meta);
    assert_memory_equal(got, meta, sizeof meta);
    snprintf(fp, sizeof fp, "%s/0.loc", p);
    assert_int_equal(zt_read_file(fp, got, sizeof got), sizeof loc);
    assert_memory_equal(got, loc, sizeof loc);
    snprintf(fp, sizeof fp, "%s/0.chunk", p);
    assert_int_equal(zt_read_file(fp, got, sizeof got), sizeof chunk);
    assert_memory_equal(got, chunk, sizeof chunk);
}

/* ---------------------------------------------------- concurrency test */

typedef struct conc {
    zre_engine *e;
    _Atomic int done;
    _Atomic int failures;
    _Atomic uint64_t gathers;
    int append_rc;
    char msg[512];
    uint64_t seed;
} conc;

static uint64_t conc_size(uint64_t i) { return 64 + (i * 7919) % 900; }

static void conc_appender(void *arg)
{
    conc *c = arg;
    uint64_t first = 0;
    unsigned char buf[64 * 1000];
    uint64_t bounds[65];
    for (int batch = 0; batch < 60 && c->append_rc == 0; batch++) {
        uint64_t n = 1 + (uint64_t)batch % 64;
        bounds[0] = 0;
        for (uint64_t k = 0; k < n; k++) {
            bounds[k + 1] = bounds[k] + conc_size(first + k);
            fill_record(buf + bounds[k], first + k, conc_size(first + k));
        }
        c->append_rc = zre_append(c->e, buf, 0, bounds, n, NULL);
        first += n;
    }
    atomic_store(&c->done, 1);
}

typedef struct reader {
    conc *c;
    uint64_t seed;
} reader;

static void conc_reader(void *arg)
{
    reader *r = arg;
    conc *c = r->c;
    uint64_t idx[300], b[301];
    unsigned char *dst = malloc(300 * 1000), *w = malloc(1000);
    if (!dst || !w) {
        atomic_fetch_add(&c->failures, 1);
        free(dst);
        free(w);
        return;
    }
    /* Keep reading until the appender finished, and at least 20 times. */
    for (int it = 0; !atomic_load(&c->done) || it < 20;) {
        /* Read `done` before the length: once done is seen, the length
         * read after it is final. */
        int was_done = atomic_load(&c->done);
        uint64_t len = zre_length(c->e);
        if (len == 0) {
            if (was_done)
                break; /* the appender failed before its first commit */
            continue;
        }
        it++;
        uint64_t n = 1 + zt_xorshift64(&r->seed) % 300;
        b[0] = 0;
        for (uint64_t k = 0; k < n; k++) {
            idx[k] = zt_xorshift64(&r->seed) % len;
            b[k + 1] = b[k] + conc_size(idx[k]);
        }
        if (zre_gather(c->e, idx, n, dst, b[n], 0, b) != 0) {
            atomic_fetch_add(&c->failures, 1);
            continue;
        }
        for (uint64_t k = 0; k < n; k++) {
            fill_record(w, idx[k], conc_size(idx[k]));
            if (memcmp(dst + b[k], w, conc_size(idx[k])) != 0)
                atomic_fetch_add(&c->failures, 1);
        }
        atomic_fetch_add(&c->gathers, 1);
    }
    free(dst);
    free(w);
}

static void concurrent(void **state, zre_codec codec)
{
    conc c;
    memset(&c, 0, sizeof c);
    assert_int_equal(zre_create(&c.e, spath(state, "s"), codec), 0);
    reader rs[4];
    zrp_thread th[5];
    for (int t = 0; t < 4; t++) {
        rs[t].c = &c;
        rs[t].seed = 1000 + (uint64_t)t;
        assert_int_equal(zrp_thread_start(&th[t], conc_reader, &rs[t]), 0);
    }
    assert_int_equal(zrp_thread_start(&th[4], conc_appender, &c), 0);
    for (int t = 0; t < 5; t++)
        assert_int_equal(zrp_thread_join(th[t]), 0);
    assert_int_equal(c.append_rc, 0);
    assert_int_equal(atomic_load(&c.failures), 0);
    assert_true(atomic_load(&c.gathers) >= 80);
    uint64_t total = 0;
    for (int batch = 0; batch < 60; batch++)
        total += 1 + (uint64_t)batch % 64;
    assert_int_equal(zre_length(c.e), total);
    assert_int_equal(zre_close(c.e), 0);
}

static void test_concurrent_raw(void **state) { concurrent(state, ZRE_CODEC_RAW); }
static void test_concurrent_zstd(void **state) { concurrent(state, ZRE_CODEC_ZSTD); }


#ifdef ZRE_TEST_SMALL_GEOMETRY
/* ------------------------------------------ shrunk geometry (test build) */

/* Must match the -D values of zrengine_smallgeom in libzrengine/meson.build. */
#define SG_CHUNK 65536u
#define SG_SEG 64u

static uint64_t sz5000(uint64_t i) { return i < 40 ? 5000 : var_size(i); }

static uint64_t file_size_of(const char *dir, const char *name)
{
    char fp[700];
    snprintf(fp, sizeof fp, "%s/%s", dir, name);
    zrp_file f;
    if (zrp_open(&f, fp, ZRP_READ) != 0)
        fail_msg("cannot open %s", fp);
    uint64_t n = 0;
    assert_int_equal(zrp_file_size(f, &n), 0);
    zrp_close(&f);
    return n;
}

static void smallgeom_rollover(void **state, zre_codec codec)
{
    const char *p = spath(state, "s");
    zre_engine *e;
    assert_int_equal(zre_create(&e, p, codec), 0);
    append_fixed(e, 0, 40, 5000);
    append_var(e, 40, 100, var_size); /* crosses loc segments at 64 and 128 */
    assert_int_equal(zre_length(e), 140);
    assert_int_equal(zre_close(e), 0);

    /* Three segments: 64 + 64 + 12 entries. */
    assert_int_equal(file_size_of(p, "0.loc"), 64 * 16);
    assert_int_equal(file_size_of(p, "1.loc"), 64 * 16);
    assert_int_equal(file_size_of(p, "2.loc"), 12 * 16);
    /* No record straddles a chunk; raw record 13 opens chunk 1. */
    unsigned char loc[64 * 16];
    uint32_t max_chunk = 0;
    for (int seg = 0; seg < 3; seg++) {
        char name[32];
        snprintf(name, sizeof name, "%d.loc", seg);
        char fp[700];
        snprintf(fp, sizeof fp, "%s/%s", p, name);
        size_t n = zt_read_file(fp, loc, sizeof loc) / 16;
        for (size_t k = 0; k < n; k++) {
            uint64_t end = (uint64_t)zt_get_le32(loc + k * 16) + zt_get_le32(loc + k * 16 + 4);
            assert_true(end <= SG_CHUNK);
            if (zt_get_le32(loc + k * 16 + 12) > max_chunk)
                max_chunk = zt_get_le32(loc + k * 16 + 12);
        }
        if (seg == 0 && codec == ZRE_CODEC_RAW) {
            assert_int_equal(zt_get_le32(loc + 13 * 16), 0);
            assert_int_equal(zt_get_le32(loc + 13 * 16 + 12), 1);
            assert_int_equal(zt_get_le32(loc + 12 * 16), 12 * 5000);
            assert_int_equal(zt_get_le32(loc + 12 * 16 + 12), 0);
        }
    }
    if (codec == ZRE_CODEC_RAW) {
        assert_int_equal(file_size_of(p, "0.chunk"), 13 * 5000);
        assert_true(max_chunk >= 3);
    }

    assert_int_equal(zre_open(&e, p), 0);
    uint64_t idx[140], s = 7;
    for (uint64_t k = 0; k < 140; k++)
        idx[k] = (k * 37 + zt_xorshift64(&s) % 3) % 140;
    check_gather(e, idx, 140, sz5000);
    zre_stats st;
    assert_int_equal(zre_get_stats(e, &st), 0);
    assert_int_equal(st.records, 140);
    assert_true(st.chunk_bytes >= st.live_bytes);
    assert_int_equal(st.reclaimable, st.chunk_bytes - st.live_bytes);
    if (codec == ZRE_CODEC_RAW)
        assert_int_equal(st.live_bytes, st.logical_bytes);
    assert_int_equal(zre_close(e), 0);
}

static void test_smallgeom_rollover_raw(void **state) { smallgeom_rollover(state, ZRE_CODEC_RAW); }
static void test_smallgeom_rollover_zstd(void **state) { smallgeom_rollover(state, ZRE_CODEC_ZSTD); }

static void fill_noise(unsigned char *p, size_t n, uint64_t seed)
{
    for (size_t j = 0; j < n; j++)
        p[j] = (unsigned char)(zt_xorshift64(&seed) >> 24);
}

static void test_smallgeom_too_big(void **state)
{
    const char *p = spath(state, "s");
    zre_engine *e;
    unsigned char *big = malloc(70000);
    assert_non_null(big);
    fill_noise(big, 70000, 5);

    assert_int_equal(zre_create(&e, p, ZRE_CODEC_RAW), 0);
    assert_int_equal(zre_append(e, big, SG_CHUNK + 1, NULL, 1, NULL), ZR_ETOOBIG);
    assert_int_equal(zre_length(e), 0);
    assert_int_equal(zre_close(e), 0);

    /* zstd: a batch whose 30th frame cannot fit any chunk fails as a whole,
     * after other frames were written; nothing is committed. */
    assert_int_equal(zre_create(&e, spath(state, "s2"), ZRE_CODEC_ZSTD), 0);
    append_var(e, 0, 10, var_size);
    uint64_t bounds[41];
    unsigned char *src = malloc(40 * 4096 + 70000);
    assert_non_null(src);
    bounds[0] = 0;
    for (uint64_t k = 0; k < 40; k++) {
        uint64_t sz = k == 29 ? 70000 : var_size(10 + k);
        if (k == 29)
            memcpy(src + bounds[k], big, sz);
        else
            fill_record(src + bounds[k], 10 + k, sz);
        bounds[k + 1] = bounds[k] + sz;
    }
    assert_int_equal(zre_append(e, src, 0, bounds, 40, NULL), ZR_ETOOBIG);
    assert_error_mentions("record 39");
    assert_int_equal(zre_length(e), 10);
    /* The handle keeps working from the old frontier. */
    append_var(e, 10, 40, var_size);
    uint64_t idx[50];
    for (uint64_t k = 0; k < 50; k++)
        idx[k] = 49 - k;
    check_gather(e, idx, 50, var_size);
    assert_int_equal(zre_close(e), 0);
    assert_int_equal(zre_open(&e, spath(state, "s2")), 0);
    assert_int_equal(zre_length(e), 50);
    check_gather(e, idx, 50, var_size);
    assert_int_equal(zre_close(e), 0);
    free(src);
    free(big);
}
#endif

/* -------------------------------------------------------- platform bits */

static void test_platform(void **state)
{
    assert_true(zrp_cpu_count() >= 1);
    uint64_t t0 = zrp_now_ns(), t1 = zrp_now_ns();
    assert_true(t1 >= t0);
    char p[700];
    snprintf(p, sizeof p, "%s/junk", spath(state, "plain"));
    assert_int_equal(zrp_mkdir_parents(spath(state, "plain")), 0);
    assert_int_equal(zrp_mkdir_parents(spath(state, "plain")), 0); /* idempotent */
    /* A temporary file left by a crash at the name the atomic write uses,
     * longer than the new contents: removed, never written into. */
    char stale[760];
    snprintf(stale, sizeof stale, "%s.tmp.%ld", p, zt_os_pid());
    zrp_file t;
    assert_int_equal(zrp_open(&t, stale, ZRP_WRITE | ZRP_CREATE), 0);
    assert_int_equal(zrp_pwrite_all(t, "stale bytes of a crash", 22, 0), 0);
    assert_int_equal(zrp_close(&t), 0);
    assert_int_equal(zrp_write_file_atomic(p, "hello", 5), 0);
    void *buf;
    size_t len;
    assert_int_equal(zrp_read_file(p, &buf, &len, 100), 0);
    assert_int_equal(len, 5);
    assert_memory_equal(buf, "hello", 5);
    free(buf);
    assert_true(zrp_open(&t, stale, ZRP_READ) < 0); /* renamed away */
    assert_true(zrp_read_file(p, &buf, &len, 4) < 0);
    zrp_file a, b;
    assert_int_equal(zrp_open(&a, p, ZRP_READ), 0);
    assert_int_equal(zrp_open(&b, p, ZRP_READ), 0);
    assert_int_equal(zrp_lock_shared(a), 0);
    assert_int_equal(zrp_lock_shared(b), 0);
    assert_int_equal(zrp_close(&b), 0);
    assert_int_equal(zrp_open(&b, p, ZRP_READ), 0);
    assert_int_equal(zrp_lock_exclusive(b), ZRP_EBUSY);
    unsigned char x[8];
    assert_int_equal(zrp_pread_all(a, x, 8, 0), ZRP_ESHORT);
    assert_int_equal(zrp_close(&a), 0);
    assert_int_equal(zrp_lock_exclusive(b), 0);
    assert_int_equal(zrp_close(&b), 0);
}

/* zre_get_disk_usage: every file of the store by role, each as large as
 * the file system says; a stray file is "other", a journal.zr is pending,
 * and a directory or a symbolic link is no file of the store. */
static void test_disk_usage(void **state)
{
    const char *p = spath(state, "s");
    zre_engine *e;
    zre_disk_usage u;
    assert_int_equal(zre_get_disk_usage(NULL, &u), ZR_EINVAL);
    assert_int_equal(zre_create(&e, p, ZRE_CODEC_RAW), 0);
    assert_int_equal(zre_get_disk_usage(e, NULL), ZR_EINVAL);
    append_fixed(e, 0, 40, 5000); /* several chunks in the small geometry */
    assert_int_equal(zre_get_disk_usage(e, &u), 0);
    uint64_t chunks = 0, chunk_bytes = 0, table = 0;
    char name[40], fp[700];
    for (;; chunks++) {
        snprintf(name, sizeof name, "%" PRIu64 ".chunk", chunks);
        snprintf(fp, sizeof fp, "%s/%s", p, name);
        if (!zt_exists(fp))
            break;
        chunk_bytes += (uint64_t)zt_file_size(fp);
    }
    for (uint64_t seg = 0;; seg++) {
        snprintf(name, sizeof name, "%" PRIu64 ".loc", seg);
        snprintf(fp, sizeof fp, "%s/%s", p, name);
        if (!zt_exists(fp))
            break;
        table += (uint64_t)zt_file_size(fp);
    }
    assert_true(chunks >= 1);
    assert_int_equal(u.chunk_files, chunks);
    assert_int_equal(u.chunk_bytes, chunk_bytes);
    assert_int_equal(u.chunk_bytes, 40 * 5000);
    assert_int_equal(u.table_bytes, table);
    assert_int_equal(u.table_bytes, 40 * 16);
    char meta[700], lock[700];
    snprintf(meta, sizeof meta, "%s/meta.zr", p);
    snprintf(lock, sizeof lock, "%s/lock.zr", p);
    assert_int_equal(u.meta_bytes, (uint64_t)(zt_file_size(meta) + zt_file_size(lock)));
    assert_int_equal(u.dict_bytes, 0);
    assert_int_equal(u.other_bytes, 0);
    assert_int_equal(u.journal_pending, 0);

    snprintf(fp, sizeof fp, "%s/notes.txt", p);
    zt_write_file(fp, "hello", 5);
    snprintf(fp, sizeof fp, "%s/journal.zr", p);
    zt_write_file(fp, "ZRJ", 3);
    snprintf(fp, sizeof fp, "%s/9.chunk", p);
    assert_int_equal(zt_os_mkdir(fp), 0);
#ifndef _WIN32
    char link[700], target[700];
    snprintf(link, sizeof link, "%s/8.chunk", p);
    snprintf(target, sizeof target, "%s/0.chunk", p);
    assert_int_equal(symlink(target, link), 0);
#endif
    zre_disk_usage v;
    assert_int_equal(zre_get_disk_usage(e, &v), 0);
    assert_int_equal(v.chunk_files, u.chunk_files);
    assert_int_equal(v.chunk_bytes, u.chunk_bytes);
    assert_int_equal(v.other_bytes, 5 + 3);
    assert_int_equal(v.journal_pending, 1);
    snprintf(fp, sizeof fp, "%s/journal.zr", p);
    assert_int_equal(zrp_unlink(fp), 0);
    assert_int_equal(zre_close(e), 0);

    /* A read-only handle reports the same files. */
    assert_int_equal(zre_open_ex(&e, p, ZRE_OPEN_READONLY), 0);
    assert_int_equal(zre_get_disk_usage(e, &v), 0);
    assert_int_equal(v.chunk_bytes, u.chunk_bytes);
    assert_int_equal(v.table_bytes, u.table_bytes);
    assert_int_equal(v.journal_pending, 0);
    assert_int_equal(zre_close(e), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_version_and_codecs),
        cmocka_unit_test_setup_teardown(test_platform, setup, zt_dir_teardown),
        cmocka_unit_test_setup_teardown(test_roundtrip_raw, setup, zt_dir_teardown),
        cmocka_unit_test_setup_teardown(test_push_refuses_bad_arguments, setup, zt_dir_teardown),
        cmocka_unit_test_setup_teardown(test_roundtrip_zstd, setup, zt_dir_teardown),
        cmocka_unit_test_setup_teardown(test_batches_raw, setup, zt_dir_teardown),
        cmocka_unit_test_setup_teardown(test_batches_zstd, setup, zt_dir_teardown),
        cmocka_unit_test_setup_teardown(test_many_raw, setup, zt_dir_teardown),
        cmocka_unit_test_setup_teardown(test_many_zstd, setup, zt_dir_teardown),
        cmocka_unit_test_setup_teardown(test_errors_range_and_args, setup, zt_dir_teardown),
        cmocka_unit_test_setup_teardown(test_create_existing, setup, zt_dir_teardown),
        cmocka_unit_test_setup_teardown(test_open_not_store, setup, zt_dir_teardown),
        cmocka_unit_test_setup_teardown(test_malformed_meta, setup, zt_dir_teardown),
        cmocka_unit_test_setup_teardown(test_busy, setup, zt_dir_teardown),
        cmocka_unit_test_setup_teardown(test_stray_dict, setup, zt_dir_teardown),
        cmocka_unit_test_setup_teardown(test_corrupt_frame, setup, zt_dir_teardown),
        cmocka_unit_test_setup_teardown(test_stats, setup, zt_dir_teardown),
        cmocka_unit_test_setup_teardown(test_format_vector, setup, zt_dir_teardown),
        cmocka_unit_test_setup_teardown(test_concurrent_raw, setup, zt_dir_teardown),
        cmocka_unit_test_setup_teardown(test_concurrent_zstd, setup, zt_dir_teardown),
        cmocka_unit_test_setup_teardown(test_disk_usage, setup, zt_dir_teardown),
#ifdef ZRE_TEST_SMALL_GEOMETRY
        cmocka_unit_test_setup_teardown(test_smallgeom_rollover_raw, setup, zt_dir_teardown),
        cmocka_unit_test_setup_teardown(test_smallgeom_rollover_zstd, setup, zt_dir_teardown),
        cmocka_unit_test_setup_teardown(test_smallgeom_too_big, setup, zt_dir_teardown),
#endif
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
