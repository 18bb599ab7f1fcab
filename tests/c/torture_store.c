/*
 * torture_store.c - libzrstore: dtypes, the store.zr identity, dense and
 * ragged round trips across reopen, validation and error paths.
 *
 * Every test runs in its own temporary directory (under ZR_TEST_TMPDIR
 * when set), removed afterwards.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


#include <cmocka.h>
#include <msgpack.h>

#include <zrstore.h>

#include "zr_test_util.h"

/* ------------------------------------------------------------ fixture */

typedef zt_dir fixture;

static int setup(void **state) { return zt_dir_setup(state, "zrs"); }

#define assert_msg_contains(needle) zt_assert_mentions(zr_last_error(), (needle))

/* Deterministic bytes (xorshift), so failures reproduce. */
static void fill(unsigned char *p, size_t n, uint64_t seed)
{
    uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
    for (size_t i = 0; i < n; i++)
        p[i] = (unsigned char)(zt_xorshift64(&x) >> 24);
}

/* Write store.zr AND the matching identity tag into meta.zr (resealing its
 * checksum): a deliberate identity change, as opposed to damage. */
static void write_identity(const char *store, const void *buf, size_t n)
{
    char p[800];
    snprintf(p, sizeof p, "%s/store.zr", store);
    zt_write_file(p, buf, n);
    uint32_t tag = zt_fnv1a32(buf, n);
    zt_meta_set_tag(store, tag ? tag : 1);
}

/* Append one ragged record [ndim][dims][payload] at buf + *len. */
static void put_ragged(unsigned char *buf, uint64_t *len, size_t ndim,
                       const uint64_t *dims, size_t itemsize, uint64_t seed)
{
    unsigned char *p = buf + *len;
    zt_put_le64(p, ndim);
    uint64_t n = itemsize;
    for (size_t j = 0; j < ndim; j++) {
        zt_put_le64(p + 8 + 8 * j, dims[j]);
        n *= dims[j];
    }
    fill(p + 8 * (1 + ndim), (size_t)n, seed);
    *len += 8 * (1 + ndim) + n;
}

static const zre_codec CODECS[] = {ZRE_CODEC_RAW, ZRE_CODEC_ZSTD};

/* --------------------------------------------------------------- dtypes */

static void test_dtype_parse(void **state)
{
    (void)state;
    static const struct { const char *s; size_t size; } want[ZRS_DTYPE_COUNT] = {
        {"|b1", 1}, {"|i1", 1}, {"<i2", 2}, {"<i4", 4}, {"<i8", 8},
        {"|u1", 1}, {"<u2", 2}, {"<u4", 4}, {"<u8", 8}, {"<f2", 2},
        {"<f4", 4}, {"<f8", 8}, {"<c8", 8}, {"<c16", 16}};
    for (int i = 0; i < ZRS_DTYPE_COUNT; i++) {
        zrs_dtype d = ZRS_DTYPE_COUNT;
        assert_int_equal(zrs_dtype_parse(want[i].s, &d), ZR_OK);
        assert_int_equal(d, i);
        assert_string_equal(zrs_dtype_str((zrs_dtype)i), want[i].s);
        assert_int_equal(zrs_dtype_itemsize((zrs_dtype)i), want[i].size);
    }
    static const char *bad[] = {">f4", "=f4", "f4", "float32", "<b1", "|f4",
                                "<i1", "|i2", "<U4", "|O", "|S3", "<M8[ns]",
                                "<c32", "<f4 ", "", "<f16"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        zrs_dtype d = ZRS_FLOAT32;
        assert_int_equal(zrs_dtype_parse(bad[i], &d), ZR_EINVAL);
        char quoted[32];
        snprintf(quoted, sizeof quoted, "'%s'", bad[i]);
        assert_msg_contains(quoted);
        assert_msg_contains("|b1 |i1 <i2 <i4 <i8 |u1 <u2 <u4 <u8 <f2 <f4 <f8 <c8 <c16");
    }
    zrs_dtype d;
    assert_int_equal(zrs_dtype_parse(NULL, &d), ZR_EINVAL);
    assert_int_equal(zrs_dtype_parse("<f4", NULL), ZR_EINVAL);
    assert_null(zrs_dtype_str(ZRS_DTYPE_COUNT));
    assert_null(zrs_dtype_str((zrs_dtype)-1));
    assert_int_equal(zrs_dtype_itemsize(ZRS_DTYPE_COUNT), 0);
}

/* Every numpy-style name of a dtype, the one parser of the bindings; a
 * big-endian name only for a caller that converts its data. */
static void test_dtype_from_name(void **state)
{
    (void)state;
    static const struct { const char *name; zrs_dtype want; int big; } ok[] = {
        {"float32", ZRS_FLOAT32, 0}, {"f4", ZRS_FLOAT32, 0},     {"<f4", ZRS_FLOAT32, 0},
        {">f4", ZRS_FLOAT32, 1},     {"int64", ZRS_INT64, 0},    {"<i8", ZRS_INT64, 0},
        {"i8", ZRS_INT64, 0},        {"uint8", ZRS_UINT8, 0},    {"u1", ZRS_UINT8, 0},
        {"|u1", ZRS_UINT8, 0},       {">u1", ZRS_UINT8, 0},      {"bool", ZRS_BOOL, 0},
        {"b1", ZRS_BOOL, 0},         {"|b1", ZRS_BOOL, 0},       {"complex128", ZRS_COMPLEX128, 0},
        {"c16", ZRS_COMPLEX128, 0},  {">c8", ZRS_COMPLEX64, 1},  {"float16", ZRS_FLOAT16, 0},
        {"uint64", ZRS_UINT64, 0},   {"int8", ZRS_INT8, 0},      {"|i1", ZRS_INT8, 0},
    };
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        zrs_dtype d = ZRS_DTYPE_COUNT;
        int big = -1;
        if (zrs_dtype_from_name(ok[i].name, &d, &big) != ZR_OK)
            fail_msg("%s: %s", ok[i].name, zr_last_error());
        assert_int_equal(d, ok[i].want);
        assert_int_equal(big, ok[i].big);
        if (!ok[i].big) {
            d = ZRS_DTYPE_COUNT;
            assert_int_equal(zrs_dtype_from_name(ok[i].name, &d, NULL), ZR_OK);
            assert_int_equal(d, ok[i].want);
        }
    }
    for (int i = 0; i < ZRS_DTYPE_COUNT; i++) { /* every canonical string */
        zrs_dtype d = ZRS_DTYPE_COUNT;
        assert_int_equal(zrs_dtype_from_name(zrs_dtype_str((zrs_dtype)i), &d, NULL), ZR_OK);
        assert_int_equal(d, i);
    }
    zrs_dtype d = ZRS_FLOAT32;
    assert_int_equal(zrs_dtype_from_name(">f8", &d, NULL), ZR_EINVAL);
    assert_msg_contains("'>f8' is big-endian; records are stored little-endian (<f8)");
    assert_int_equal(d, ZRS_FLOAT32);
    static const char *bad[] = {"|f4", "float", "f", "<U4", "|O", "<M8[ns]", "<c32", "",
                                "f4 ", "Float32", "<f16", "int", "|V8"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int big = 0;
        assert_int_equal(zrs_dtype_from_name(bad[i], &d, &big), ZR_EINVAL);
        char quoted[32];
        snprintf(quoted, sizeof quoted, "'%s'", bad[i]);
        assert_msg_contains(quoted);
        assert_msg_contains("float32");
    }
    assert_int_equal(zrs_dtype_from_name(NULL, &d, NULL), ZR_EINVAL);
    assert_int_equal(zrs_dtype_from_name("f4", NULL, NULL), ZR_EINVAL);
}

static void test_version(void **state)
{
    (void)state;
    assert_int_equal(zrstore_version(), ZRSTORE_VERSION_NUMBER);
    char want[32];
    snprintf(want, sizeof want, "%d.%d.%d", ZRSTORE_VERSION_MAJOR,
             ZRSTORE_VERSION_MINOR, ZRSTORE_VERSION_PATCH);
    assert_string_equal(zrstore_version_string(), want);
}

/* -------------------------------------------------------- round trips */

static void check_dense(zrs_store *s, const unsigned char *want, uint64_t n,
                        uint64_t rs)
{
    assert_int_equal(zrs_length(s), n);
    /* Reverse order through negative indices, then a forward pass. */
    int64_t *idx = malloc(n * sizeof *idx);
    unsigned char *got = malloc(n * rs);
    assert_non_null(idx);
    assert_non_null(got);
    for (uint64_t i = 0; i < n; i++)
        idx[i] = -(int64_t)i - 1;
    assert_int_equal(zrs_gather_dense(s, idx, n, got, n * rs), ZR_OK);
    for (uint64_t i = 0; i < n; i++)
        assert_memory_equal(got + i * rs, want + (n - 1 - i) * rs, rs);
    for (uint64_t i = 0; i < n; i++)
        idx[i] = (int64_t)i;
    memset(got, 0xAB, n * rs);
    assert_int_equal(zrs_gather_dense(s, idx, n, got, n * rs), ZR_OK);
    assert_memory_equal(got, want, n * rs);
    free(idx);
    free(got);
}

static void test_dense_roundtrip_all_dtypes(void **state)
{
    fixture *fx = *state;
    const uint64_t shape[2] = {3, 5};
    for (size_t c = 0; c < 2; c++) {
        for (int d = 0; d < ZRS_DTYPE_COUNT; d++) {
            char name[64];
            snprintf(name, sizeof name, "dense-%s-%d", zre_codec_name(CODECS[c]), d);
            char path[700];
            snprintf(path, sizeof path, "%s", zt_dir_at(fx, name));
            zrs_store *s = NULL;
            assert_int_equal(zrs_create_dense(&s, path, (zrs_dtype)d, shape, 2,
                                              CODECS[c]), ZR_OK);
            uint64_t rs = zrs_dtype_itemsize((zrs_dtype)d) * 15;
            assert_int_equal(zrs_record_size(s), rs);
            const uint64_t n = 20;
            unsigned char *data = malloc(n * rs);
            assert_non_null(data);
            fill(data, n * rs, (uint64_t)d * 7 + c);
            /* Some compressible records too. */
            memset(data + 2 * rs, 0, 3 * rs);
            uint64_t first = 99;
            assert_int_equal(zrs_append_dense(s, data, 7 * rs, 7, &first), ZR_OK);
            assert_int_equal(first, 0);
            assert_int_equal(zrs_append_dense(s, data + 7 * rs, 13 * rs, 13, &first),
                             ZR_OK);
            assert_int_equal(first, 7);
            check_dense(s, data, n, rs);
            assert_int_equal(zrs_close(s), ZR_OK);

            assert_int_equal(zrs_open(&s, path), ZR_OK);
            assert_int_equal(zrs_get_kind(s), ZRS_DENSE);
            assert_int_equal(zrs_get_dtype(s), d);
            assert_int_equal(zrs_get_codec(s), CODECS[c]);
            assert_int_equal(zrs_item_ndim(s), 2);
            assert_memory_equal(zrs_item_shape(s), shape, sizeof shape);
            assert_int_equal(zrs_record_size(s), rs);
            assert_string_equal(zrs_path(s), path);
            assert_non_null(zrs_engine(s));
            check_dense(s, data, n, rs);
            assert_int_equal(zrs_close(s), ZR_OK);
            free(data);
        }
    }
}

/* Build a batch of ragged records of mixed ndim (0..3) for dtype d. */
static uint64_t build_ragged(unsigned char *buf, uint64_t *bounds, size_t itemsize,
                             uint64_t seed)
{
    static const uint64_t dims[][3] = {
        {0, 0, 0}, {5, 0, 0}, {2, 3, 0}, {1, 1, 1}, {4, 1, 2}, {17, 0, 0}, {0, 0, 0}};
    static const size_t nd[] = {0, 1, 2, 3, 3, 1, 0};
    uint64_t len = 0;
    for (size_t i = 0; i < 7; i++) {
        bounds[i] = len;
        put_ragged(buf, &len, nd[i], dims[i], itemsize, seed + i);
    }
    bounds[7] = len;
    return 7;
}

static void check_ragged(zrs_store *s, zrs_dtype dt, const unsigned char *want,
                         const uint64_t *wb, uint64_t n)
{
    assert_int_equal(zrs_length(s), n);
    int64_t idx[16];
    uint64_t sizes[16], bounds[17];
    for (uint64_t i = 0; i < n; i++)
        idx[i] = (i % 2) ? (int64_t)i - (int64_t)n : (int64_t)i; /* mix signs */
    assert_int_equal(zrs_ragged_sizes(s, idx, n, sizes), ZR_OK);
    bounds[0] = 0;
    for (uint64_t i = 0; i < n; i++) {
        assert_int_equal(sizes[i], wb[i + 1] - wb[i]);
        bounds[i + 1] = bounds[i] + sizes[i];
    }
    unsigned char *got = malloc(bounds[n]);
    assert_non_null(got);
    assert_int_equal(zrs_gather_ragged(s, idx, n, got, bounds[n], bounds), ZR_OK);
    assert_memory_equal(got, want, bounds[n]);
    for (uint64_t i = 0; i < n; i++) {
        size_t ndim = 99;
        uint64_t dims[ZRS_MAX_NDIM], off = 0;
        assert_int_equal(zrs_ragged_decode(got + bounds[i], sizes[i], dt, &ndim,
                                           dims, &off), ZR_OK);
        assert_int_equal(off, 8 * (1 + ndim));
    }
    free(got);
}

static void test_ragged_roundtrip_all_dtypes(void **state)
{
    fixture *fx = *state;
    for (size_t c = 0; c < 2; c++) {
        for (int d = 0; d < ZRS_DTYPE_COUNT; d++) {
            char name[64], path[700];
            snprintf(name, sizeof name, "ragged-%s-%d", zre_codec_name(CODECS[c]), d);
            snprintf(path, sizeof path, "%s", zt_dir_at(fx, name));
            zrs_store *s = NULL;
            assert_int_equal(zrs_create_ragged(&s, path, (zrs_dtype)d, CODECS[c]),
                             ZR_OK);
            assert_int_equal(zrs_get_kind(s), ZRS_RAGGED);
            assert_int_equal(zrs_item_ndim(s), 0);
            assert_null(zrs_item_shape(s));
            assert_int_equal(zrs_record_size(s), 0);
            size_t isz = zrs_dtype_itemsize((zrs_dtype)d);
            unsigned char buf[4096];
            uint64_t bounds[8];
            uint64_t n = build_ragged(buf, bounds, isz, (uint64_t)d * 31 + c);
            uint64_t first = 99;
            assert_int_equal(zrs_append_ragged(s, buf, bounds, n, &first), ZR_OK);
            assert_int_equal(first, 0);
            check_ragged(s, (zrs_dtype)d, buf, bounds, n);
            assert_int_equal(zrs_close(s), ZR_OK);

            assert_int_equal(zrs_open(&s, path), ZR_OK);
            assert_int_equal(zrs_get_kind(s), ZRS_RAGGED);
            assert_int_equal(zrs_get_dtype(s), d);
            assert_int_equal(zrs_get_codec(s), CODECS[c]);
            check_ragged(s, (zrs_dtype)d, buf, bounds, n);
            assert_int_equal(zrs_close(s), ZR_OK);
        }
    }
}

/* A ragged append whose bounds do not start at 0 (records mid-buffer). */
static void test_ragged_offset_bounds(void **state)
{
    fixture *fx = *state;
    zrs_store *s = NULL;
    assert_int_equal(zrs_create_ragged(&s, zt_dir_at(fx, "r"), ZRS_UINT16, ZRE_CODEC_ZSTD),
                     ZR_OK);
    unsigned char buf[256];
    memset(buf, 0xEE, sizeof buf);
    uint64_t len = 13, bounds[3];
    const uint64_t d1[1] = {3}, d2[2] = {2, 2};
    bounds[0] = len;
    put_ragged(buf, &len, 1, d1, 2, 1);
    bounds[1] = len;
    put_ragged(buf, &len, 2, d2, 2, 2);
    bounds[2] = len;
    uint64_t first;
    assert_int_equal(zrs_append_ragged(s, buf, bounds, 2, &first), ZR_OK);
    assert_int_equal(first, 0);
    int64_t idx[2] = {1, 0};
    uint64_t sizes[2];
    assert_int_equal(zrs_ragged_sizes(s, idx, 2, sizes), ZR_OK);
    assert_int_equal(sizes[0], bounds[2] - bounds[1]);
    assert_int_equal(sizes[1], bounds[1] - bounds[0]);
    unsigned char got[256];
    uint64_t gb[3] = {0, sizes[0], sizes[0] + sizes[1]};
    assert_int_equal(zrs_gather_ragged(s, idx, 2, got, sizeof got, gb), ZR_OK);
    assert_memory_equal(got, buf + bounds[1], sizes[0]);
    assert_memory_equal(got + sizes[0], buf + bounds[0], sizes[1]);
    assert_int_equal(zrs_close(s), ZR_OK);
}

static void expect_store_zr(fixture *fx, const char *name, const unsigned char *want,
                            size_t n);

static void test_dense_scalar(void **state)
{
    fixture *fx = *state;
    char path[700];
    snprintf(path, sizeof path, "%s", zt_dir_at(fx, "scalars"));
    zrs_store *s = NULL;
    assert_int_equal(zrs_create_dense(&s, path, ZRS_FLOAT64, NULL, 0, ZRE_CODEC_ZSTD),
                     ZR_OK);
    assert_int_equal(zrs_item_ndim(s), 0);
    assert_int_equal(zrs_record_size(s), 8);
    unsigned char data[8 * 100];
    fill(data, sizeof data, 5);
    assert_int_equal(zrs_append_dense(s, data, sizeof data, 100, NULL), ZR_OK);
    check_dense(s, data, 100, 8);
    assert_int_equal(zrs_close(s), ZR_OK);

    /* {"dtype": "<f8", "item_shape": [], "uuid": ...} */
    static const unsigned char want[] = {
        0x82, 0xa5, 'd', 't', 'y', 'p', 'e', 0xa3, '<', 'f', '8',
        0xaa, 'i', 't', 'e', 'm', '_', 's', 'h', 'a', 'p', 'e', 0x90};
    expect_store_zr(fx, "scalars", want, sizeof want);

    assert_int_equal(zrs_open(&s, path), ZR_OK);
    assert_int_equal(zrs_get_kind(s), ZRS_DENSE);
    assert_int_equal(zrs_item_ndim(s), 0);
    assert_int_equal(zrs_record_size(s), 8);
    check_dense(s, data, 100, 8);
    assert_int_equal(zrs_close(s), ZR_OK);
}

/* ------------------------------------------------------ identity bytes */

/* store.zr of store `name` is the type map `want` (n bytes, as it was
 * before stores had a uuid) with one more entry: "uuid": the store's uuid
 * in text form (str8, 36 bytes). */
static void expect_store_zr(fixture *fx, const char *name, const unsigned char *want,
                            size_t n)
{
    char zr[800];
    snprintf(zr, sizeof zr, "%s/%s/store.zr", fx->dir, name);
    unsigned char got[512];
    size_t len = zt_read_file(zr, got, sizeof got);
    assert_int_equal(len, n + 5 + 2 + ZRS_UUID_STR_LEN);
    assert_int_equal(got[0], want[0] + 1); /* one more map entry */
    assert_memory_equal(got + 1, want + 1, n - 1);
    zrs_store *s = NULL;
    assert_int_equal(zrs_open_ex(&s, zt_dir_at(fx, name), ZRE_OPEN_READONLY), ZR_OK);
    uint8_t uuid[ZRS_UUID_BYTES];
    char text[ZRS_UUID_STR_LEN + 1];
    assert_int_equal(zrs_get_uuid(s, uuid), 1);
    assert_int_equal(zrs_uuid_str(uuid, text), ZR_OK);
    assert_int_equal(zrs_close(s), ZR_OK);
    static const unsigned char key[] = {0xa4, 'u', 'u', 'i', 'd', 0xd9, ZRS_UUID_STR_LEN};
    assert_memory_equal(got + n, key, sizeof key);
    assert_memory_equal(got + n + sizeof key, text, ZRS_UUID_STR_LEN);
}

static void test_store_zr_bytes(void **state)
{
    fixture *fx = *state;
    zrs_store *s = NULL;

    /* msgpack.packb({"dtype": "<f4", "item_shape": [28, 28], "uuid": ...}) */
    const uint64_t mnist[2] = {28, 28};
    assert_int_equal(zrs_create_dense(&s, zt_dir_at(fx, "a"), ZRS_FLOAT32, mnist, 2,
                                      ZRE_CODEC_RAW), ZR_OK);
    assert_int_equal(zrs_close(s), ZR_OK);
    static const unsigned char a[] = {
        0x82, 0xa5, 'd', 't', 'y', 'p', 'e', 0xa3, '<', 'f', '4',
        0xaa, 'i', 't', 'e', 'm', '_', 's', 'h', 'a', 'p', 'e',
        0x92, 0x1c, 0x1c};
    expect_store_zr(fx, "a", a, sizeof a);

    /* Wider ints take uint8 / uint16 / uint32 encodings, as Python's
     * packer does: packb({"dtype": "|u1", "item_shape": [1]}),
     * packb({"dtype": "|u1", "item_shape": [127, 128, 300]}),
     * packb({"dtype": "<c16", "item_shape": [70000, 2]}). */
    const uint64_t w1[1] = {1};
    assert_int_equal(zrs_create_dense(&s, zt_dir_at(fx, "b"), ZRS_UINT8, w1, 1,
                                      ZRE_CODEC_RAW), ZR_OK);
    assert_int_equal(zrs_close(s), ZR_OK);
    const uint64_t w2[3] = {127, 128, 300};
    assert_int_equal(zrs_create_dense(&s, zt_dir_at(fx, "c"), ZRS_UINT8, w2, 3,
                                      ZRE_CODEC_RAW), ZR_OK);
    assert_int_equal(zrs_close(s), ZR_OK);
    const uint64_t w3[2] = {70000, 2};
    assert_int_equal(zrs_create_dense(&s, zt_dir_at(fx, "d"), ZRS_COMPLEX128, w3, 2,
                                      ZRE_CODEC_ZSTD), ZR_OK);
    assert_int_equal(zrs_close(s), ZR_OK);
    static const unsigned char b[] = {
        0x82, 0xa5, 'd', 't', 'y', 'p', 'e', 0xa3, '|', 'u', '1',
        0xaa, 'i', 't', 'e', 'm', '_', 's', 'h', 'a', 'p', 'e', 0x91, 0x01};
    expect_store_zr(fx, "b", b, sizeof b);
    static const unsigned char c[] = {
        0x82, 0xa5, 'd', 't', 'y', 'p', 'e', 0xa3, '|', 'u', '1',
        0xaa, 'i', 't', 'e', 'm', '_', 's', 'h', 'a', 'p', 'e',
        0x93, 0x7f, 0xcc, 0x80, 0xcd, 0x01, 0x2c};
    expect_store_zr(fx, "c", c, sizeof c);
    static const unsigned char dd[] = {
        0x82, 0xa5, 'd', 't', 'y', 'p', 'e', 0xa4, '<', 'c', '1', '6',
        0xaa, 'i', 't', 'e', 'm', '_', 's', 'h', 'a', 'p', 'e',
        0x92, 0xce, 0x00, 0x01, 0x11, 0x70, 0x02};
    expect_store_zr(fx, "d", dd, sizeof dd);

    /* msgpack.packb({"dtype": "<i4"}) */
    assert_int_equal(zrs_create_ragged(&s, zt_dir_at(fx, "e"), ZRS_INT32, ZRE_CODEC_RAW),
                     ZR_OK);
    assert_int_equal(zrs_close(s), ZR_OK);
    static const unsigned char e[] = {
        0x81, 0xa5, 'd', 't', 'y', 'p', 'e', 0xa3, '<', 'i', '4'};
    expect_store_zr(fx, "e", e, sizeof e);

    /* Reopen each: the bytes above decode back to the same identity. */
    assert_int_equal(zrs_open(&s, zt_dir_at(fx, "c")), ZR_OK);
    assert_int_equal(zrs_item_ndim(s), 3);
    assert_memory_equal(zrs_item_shape(s), w2, sizeof w2);
    assert_int_equal(zrs_record_size(s), 127 * 128 * 300);
    assert_int_equal(zrs_close(s), ZR_OK);
    assert_int_equal(zrs_open(&s, zt_dir_at(fx, "d")), ZR_OK);
    assert_int_equal(zrs_get_dtype(s), ZRS_COMPLEX128);
    assert_memory_equal(zrs_item_shape(s), w3, sizeof w3);
    assert_int_equal(zrs_close(s), ZR_OK);
}

/* ----------------------------------------------------------- uuid */

static size_t read_store_zr(const char *store, unsigned char *buf, size_t cap)
{
    char zr[800];
    snprintf(zr, sizeof zr, "%s/store.zr", store);
    return zt_read_file(zr, buf, cap);
}

static uint32_t meta_tag(const char *store)
{
    char mp[800];
    unsigned char m[32];
    snprintf(mp, sizeof mp, "%s/meta.zr", store);
    assert_int_equal(zt_read_file(mp, m, 32), 32);
    return (uint32_t)m[24] | (uint32_t)m[25] << 8 | (uint32_t)m[26] << 16 | (uint32_t)m[27] << 24;
}

/* The test vector of docs/FORMAT.md (store.zr): the 28x28 float32 store
 * with the uuid 0f1e2d3c-4b5a-4978-8695-a4b3c2d1e0f0, and its identity
 * tag, which covers the type map only. */
static void test_store_zr_uuid_vector(void **state)
{
    fixture *fx = *state;
    const char *path = zt_dir_at(fx, "v");
    const uint64_t mnist[2] = {28, 28};
    zrs_store *s = NULL;
    assert_int_equal(zrs_create_dense(&s, path, ZRS_FLOAT32, mnist, 2, ZRE_CODEC_RAW), ZR_OK);
    static const uint8_t fixed[16] = {0x0f, 0x1e, 0x2d, 0x3c, 0x4b, 0x5a, 0x49, 0x78,
                                      0x86, 0x95, 0xa4, 0xb3, 0xc2, 0xd1, 0xe0, 0xf0};
    assert_int_equal(zrs_set_uuid(s, fixed), ZR_OK);
    assert_int_equal(zrs_close(s), ZR_OK);
    static const unsigned char want[] = {
        0x83, 0xa5, 0x64, 0x74, 0x79, 0x70, 0x65, 0xa3, 0x3c, 0x66, 0x34, 0xaa, 0x69, 0x74, 0x65,
        0x6d, 0x5f, 0x73, 0x68, 0x61, 0x70, 0x65, 0x92, 0x1c, 0x1c, 0xa4, 0x75, 0x75, 0x69, 0x64,
        0xd9, 0x24, '0', 'f', '1', 'e', '2', 'd', '3', 'c', '-', '4', 'b', '5', 'a', '-', '4',
        '9', '7', '8', '-', '8', '6', '9', '5', '-', 'a', '4', 'b', '3', 'c', '2', 'd', '1', 'e',
        '0', 'f', '0'};
    unsigned char got[256];
    assert_int_equal(read_store_zr(path, got, sizeof got), sizeof want);
    assert_memory_equal(got, want, sizeof want);
    assert_int_equal(meta_tag(path), 0x48f6e5c6u);

    uint8_t back[16];
    char text[ZRS_UUID_STR_LEN + 1];
    assert_int_equal(zrs_open_ex(&s, path, ZRE_OPEN_READONLY), ZR_OK);
    assert_int_equal(zrs_get_uuid(s, back), 1);
    assert_memory_equal(back, fixed, 16);
    assert_int_equal(zrs_uuid_str(back, text), ZR_OK);
    assert_string_equal(text, "0f1e2d3c-4b5a-4978-8695-a4b3c2d1e0f0");
    assert_int_equal(zrs_uuid_parse(text, strlen(text), back), ZR_OK);
    assert_memory_equal(back, fixed, 16);
    assert_int_equal(zrs_close(s), ZR_OK);
}

static void append_floats(zrs_store *s, int n, float base)
{
    float v[64];
    for (int i = 0; i < n; i++)
        v[i] = base + (float)i;
    assert_int_equal(zrs_append_dense(s, v, (uint64_t)n * sizeof(float), (uint64_t)n, NULL), ZR_OK);
}

/* A uuid is made at create (random, version 4), kept by appends, compact,
 * reopen and zrs_set_uuid's copy, replaced by delete; read-only handles
 * cannot change it; a store from before uuids opens without one and gets
 * one at its first delete. */
static void test_store_uuid_lifecycle(void **state)
{
    fixture *fx = *state;
    const uint64_t one[1] = {1};
    char a[700], b[700];
    snprintf(a, sizeof a, "%s", zt_dir_at(fx, "a"));
    snprintf(b, sizeof b, "%s", zt_dir_at(fx, "b"));
    zrs_store *s = NULL, *t = NULL, *r = NULL;
    uint8_t u0[16], u1[16], u2[16];
    assert_int_equal(zrs_create_dense(&s, a, ZRS_FLOAT32, one, 1, ZRE_CODEC_ZSTD), ZR_OK);
    assert_int_equal(zrs_create_dense(&t, b, ZRS_FLOAT32, one, 1, ZRE_CODEC_RAW), ZR_OK);
    assert_int_equal(zrs_get_uuid(s, u0), 1);
    assert_int_equal(zrs_get_uuid(t, u1), 1);
    assert_memory_not_equal(u0, u1, 16);
    assert_int_equal(u0[6] >> 4, 4);      /* version 4 */
    assert_int_equal(u0[8] & 0xc0, 0x80); /* RFC 4122 variant */

    append_floats(s, 20, 0);
    assert_int_equal(zrs_get_uuid(s, u2), 1);
    assert_memory_equal(u2, u0, 16);
    /* A copy (a recode) takes the source's uuid; the tag stays. */
    uint32_t tag_b = meta_tag(b);
    assert_int_equal(zrs_set_uuid(t, u0), ZR_OK);
    assert_int_equal(meta_tag(b), tag_b);
    assert_int_equal(zrs_close(t), ZR_OK);
    assert_int_equal(zrs_open(&t, b), ZR_OK);
    assert_int_equal(zrs_get_uuid(t, u2), 1);
    assert_memory_equal(u2, u0, 16);
    assert_int_equal(zrs_close(t), ZR_OK);

    /* Delete: a new uuid, on the handle and on disk; the records are the
     * swap-last result. */
    int64_t del[2] = {3, 7};
    assert_int_equal(zrs_delete(s, del, 2), ZR_OK);
    assert_int_equal(zrs_get_uuid(s, u1), 1);
    assert_memory_not_equal(u1, u0, 16);
    float got[2];
    int64_t at[2] = {3, 7};
    assert_int_equal(zrs_gather_dense(s, at, 2, got, sizeof got), ZR_OK);
    assert_true(got[0] == 18.0f && got[1] == 19.0f); /* descending: 7 takes 19, then 3 takes 18 */
    /* Compact keeps it. */
    assert_int_equal(zrs_compact(s), ZR_OK);
    assert_int_equal(zrs_get_uuid(s, u2), 1);
    assert_memory_equal(u2, u1, 16);
    assert_int_equal(zrs_close(s), ZR_OK);

    /* A reader: same uuid; it cannot set one. */
    assert_int_equal(zrs_open_ex(&r, a, ZRE_OPEN_READONLY), ZR_OK);
    assert_int_equal(zrs_get_uuid(r, u2), 1);
    assert_memory_equal(u2, u1, 16);
    assert_int_equal(zrs_set_uuid(r, u0), ZR_EUNSUPPORTED);
    assert_msg_contains("read-only");
    /* A delete refused while the reader is open (ZR_EBUSY) changes
     * nothing, the uuid included. */
    assert_int_equal(zrs_open(&s, a), ZR_OK);
    assert_int_equal(zrs_delete(s, del, 1), ZR_EBUSY);
    assert_int_equal(zrs_get_uuid(s, u2), 1);
    assert_memory_equal(u2, u1, 16);
    assert_int_equal(zrs_length(s), 18);
    assert_int_equal(zrs_close(r), ZR_OK);
    assert_int_equal(zrs_close(s), ZR_OK);
    assert_int_equal(zrs_open_ex(&r, a, ZRE_OPEN_READONLY), ZR_OK);
    assert_int_equal(zrs_get_uuid(r, u2), 1);
    assert_memory_equal(u2, u1, 16);
    assert_int_equal(zrs_close(r), ZR_OK);

    /* A store from before uuids: store.zr is the type map alone (the same
     * bytes the identity tag covers, so meta.zr needs no change). */
    static const unsigned char old[] = {0x82, 0xa5, 'd', 't', 'y', 'p', 'e', 0xa3, '<', 'f', '4',
                                        0xaa, 'i', 't', 'e', 'm', '_', 's', 'h', 'a', 'p', 'e', 0x91, 0x01};
    char zr[800];
    snprintf(zr, sizeof zr, "%s/store.zr", a);
    zt_write_file(zr, old, sizeof old);
    assert_int_equal(zrs_open(&s, a), ZR_OK);
    assert_int_equal(zrs_get_uuid(s, u2), 0);
    assert_int_equal(zrs_length(s), 18);
    assert_int_equal(zrs_delete(s, del, 1), ZR_OK);
    assert_int_equal(zrs_get_uuid(s, u2), 1);
    assert_int_equal(zrs_close(s), ZR_OK);
    assert_int_equal(zrs_open(&s, a), ZR_OK);
    uint8_t u3[16];
    assert_int_equal(zrs_get_uuid(s, u3), 1);
    assert_memory_equal(u3, u2, 16);
    assert_int_equal(zrs_length(s), 17);
    assert_int_equal(zrs_close(s), ZR_OK);

    /* Bad uuid texts are refused by name. */
    assert_int_equal(zrs_uuid_parse("0F1E2D3C-4B5A-4978-8695-A4B3C2D1E0F0", 36, u3), ZR_EINVAL);
    assert_msg_contains("lowercase hex");
    assert_int_equal(zrs_uuid_parse("0f1e2d3c4b5a-4978-8695-a4b3c2d1e0f0", 35, u3), ZR_EINVAL);
    assert_int_equal(zrs_uuid_parse("0f1e2d3c+4b5a-4978-8695-a4b3c2d1e0f0", 36, u3), ZR_EINVAL);
    assert_msg_contains("'-'");
}

/* The codec "auto" rule: int64 labels and random bytes stay raw (zstd
 * cannot shrink them by the margin), repetitive records go zstd; dense
 * and ragged forms; the sample is bounded. */
static void test_codec_auto(void **state)
{
    (void)state;
    enum { N = 1000 };
    int64_t labels[N];
    for (int i = 0; i < N; i++)
        labels[i] = i % 10;
    zre_codec c = ZRE_CODEC_ZSTD_DICT;
    uint64_t raw = 0, z = 0;
    assert_int_equal(zrs_codec_auto(labels, NULL, 8, N, &c, &raw, &z), ZR_OK);
    assert_int_equal(c, ZRE_CODEC_RAW);
    /* 250 records sampled (every 4th); each 8-byte record a frame of 21
     * bytes with zstd 1.5 (header, raw block, checksum). */
    assert_int_equal(raw, 250 * 8);
    assert_true(z > 2 * raw && z <= 25 * 250);
    unsigned char *text = malloc(N * 512);
    for (size_t i = 0; i < (size_t)N * 512; i++)
        text[i] = (unsigned char)"the quick brown fox "[i % 20];
    assert_int_equal(zrs_codec_auto(text, NULL, 512, N, &c, &raw, &z), ZR_OK);
    assert_int_equal(c, ZRE_CODEC_ZSTD);
    assert_true(z * 10 <= raw * 9);
    fill(text, (size_t)N * 512, 9);
    uint64_t bounds[N + 1];
    for (int i = 0; i <= N; i++)
        bounds[i] = (uint64_t)i * 512;
    assert_int_equal(zrs_codec_auto(text, bounds, 0, N, &c, &raw, &z), ZR_OK);
    assert_int_equal(c, ZRE_CODEC_RAW);
    assert_int_equal(zrs_codec_auto(text, NULL, 512, 0, &c, &raw, &z), ZR_OK);
    assert_int_equal(c, ZRE_CODEC_RAW);
    assert_int_equal(raw, 0);
    assert_int_equal(zrs_codec_auto(NULL, NULL, 512, 3, &c, NULL, NULL), ZR_EINVAL);
    free(text);
}

/* ------------------------------------------------------ bad store.zr */

typedef struct bad_zr {
    const char *what;
    const unsigned char *bytes;
    size_t len;
    const char *msg; /* expected in the detail */
} bad_zr;

#define BYTES(...) (const unsigned char[]){__VA_ARGS__}, sizeof((const unsigned char[]){__VA_ARGS__})
#define K_DTYPE 0xa5, 'd', 't', 'y', 'p', 'e'
#define K_SHAPE 0xaa, 'i', 't', 'e', 'm', '_', 's', 'h', 'a', 'p', 'e'
#define V_F4 0xa3, '<', 'f', '4'
#define K_UUID 0xa4, 'u', 'u', 'i', 'd'

static void test_store_zr_invalid(void **state)
{
    fixture *fx = *state;
    char path[700], zr[800];
    snprintf(path, sizeof path, "%s", zt_dir_at(fx, "s"));
    snprintf(zr, sizeof zr, "%s/store.zr", path);
    const uint64_t shape[1] = {2};
    zrs_store *s = NULL;
    assert_int_equal(zrs_create_dense(&s, path, ZRS_FLOAT32, shape, 1, ZRE_CODEC_RAW),
                     ZR_OK);
    float vals[4] = {1, 2, 3, 4};
    assert_int_equal(zrs_append_dense(s, vals, sizeof vals, 2, NULL), ZR_OK);
    assert_int_equal(zrs_close(s), ZR_OK);
    unsigned char good[256];
    size_t good_len = zt_read_file(zr, good, sizeof good);

    const bad_zr cases[] = {
        {"extra key", BYTES(0x83, K_DTYPE, V_F4, K_SHAPE, 0x91, 0x02, 0xa1, 'x', 0x01),
         "unexpected key 'x'"},
        {"extra key only", BYTES(0x82, K_DTYPE, V_F4, 0xa4, 'n', 'a', 'm', 'e', 0xa1, 'a'),
         "unexpected key 'name'"},
        {"shape is str", BYTES(0x82, K_DTYPE, V_F4, K_SHAPE, 0xa2, '2', '8'),
         "'item_shape' is a str, expected array"},
        {"dtype is int", BYTES(0x81, K_DTYPE, 0x05), "'dtype' is a int, expected str"},
        {"dtype is bin", BYTES(0x81, K_DTYPE, 0xc4, 0x03, '<', 'f', '4'),
         "'dtype' is a bin"},
        {"negative dim", BYTES(0x82, K_DTYPE, V_F4, K_SHAPE, 0x91, 0xff),
         "item_shape[0] is a negative int"},
        {"float dim", BYTES(0x82, K_DTYPE, V_F4, K_SHAPE, 0x92, 0x01,
                            0xcb, 0x3f, 0xf8, 0, 0, 0, 0, 0, 0),
         "item_shape[1] is a float"},
        {"zero dim", BYTES(0x82, K_DTYPE, V_F4, K_SHAPE, 0x92, 0x02, 0x00),
         "item_shape[1] is 0"},
        {"big-endian dtype", BYTES(0x82, K_DTYPE, 0xa3, '>', 'f', '4', K_SHAPE, 0x91, 0x02),
         "unsupported dtype '>f4'"},
        {"unicode dtype", BYTES(0x81, K_DTYPE, 0xa3, '<', 'U', '4'),
         "unsupported dtype '<U4'"},
        {"trailing garbage", BYTES(0x82, K_DTYPE, V_F4, K_SHAPE, 0x91, 0x02, 0x00),
         "1 trailing bytes"},
        {"two maps", BYTES(0x81, K_DTYPE, V_F4, 0x81, K_DTYPE, V_F4),
         "trailing bytes"},
        {"empty", (const unsigned char *)"", 0, "is empty"},
        {"truncated", BYTES(0x82, K_DTYPE, V_F4, K_SHAPE, 0x92, 0x02), "truncated"},
        {"invalid msgpack", BYTES(0xc1), "not valid msgpack"},
        {"array", BYTES(0x92, 0x01, 0x02), "expected a msgpack map, got array"},
        {"no dtype", BYTES(0x81, K_SHAPE, 0x91, 0x02), "no 'dtype' key"},
        {"duplicate dtype", BYTES(0x82, K_DTYPE, V_F4, K_DTYPE, V_F4),
         "duplicate key 'dtype'"},
        {"int key", BYTES(0x81, 0x01, V_F4), "map key 0 is a int"},
        {"too big", BYTES(0x82, K_DTYPE, V_F4, K_SHAPE, 0x91, 0xce, 0x20, 0, 0, 0x01),
         "exceeds the record limit"},
        {"uuid is bin", BYTES(0x82, K_DTYPE, V_F4, K_UUID, 0xc4, 0x01, 0x00), "'uuid' is a bin"},
        {"uuid too short", BYTES(0x82, K_DTYPE, V_F4, K_UUID, 0xa3, 'a', 'b', 'c'),
         "'uuid' is 'abc'"},
        {"duplicate uuid", BYTES(0x83, K_DTYPE, V_F4, K_UUID, 0xa1, 'a', K_UUID, 0xa1, 'a'),
         "'uuid' is 'a'"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        zt_write_file(zr, cases[i].bytes, cases[i].len);
        int rc = zrs_open(&s, path);
        if (rc != ZR_ENOTSTORE)
            fail_msg("case '%s': open returned %d, expected ZR_ENOTSTORE", cases[i].what,
                     rc);
        assert_null(s);
        assert_msg_contains(cases[i].msg);
        assert_msg_contains("store.zr");
    }

    /* ndim 33 via the packer. */
    msgpack_sbuffer sb;
    msgpack_packer pk;
    msgpack_sbuffer_init(&sb);
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    msgpack_pack_map(&pk, 2);
    msgpack_pack_str_with_body(&pk, "dtype", 5);
    msgpack_pack_str_with_body(&pk, "|u1", 3);
    msgpack_pack_str_with_body(&pk, "item_shape", 10);
    msgpack_pack_array(&pk, ZRS_MAX_NDIM + 1);
    for (int j = 0; j < ZRS_MAX_NDIM + 1; j++)
        msgpack_pack_uint64(&pk, 1);
    zt_write_file(zr, sb.data, sb.size);
    msgpack_sbuffer_destroy(&sb);
    assert_int_equal(zrs_open(&s, path), ZR_ENOTSTORE);
    assert_msg_contains("33 dims");

    /* A valid map whose ints use wider encodings than needed is still a
     * valid identity, but not the bytes meta.zr's identity hash was made
     * of: refused as damaged. Re-tagged deliberately, it reads (a reader
     * accepts any msgpack encoding of the same value). */
    static const unsigned char wide[] = {0x82, K_DTYPE, V_F4, K_SHAPE, 0x91, 0xcf, 0, 0, 0, 0, 0, 0,
                                         0, 2};
    zt_write_file(zr, wide, sizeof wide);
    assert_int_equal(zrs_open(&s, path), ZR_ENOTSTORE);
    assert_msg_contains("do not match");
    unsigned char meta_before[ZRE_META_SIZE];
    char mp[800];
    snprintf(mp, sizeof mp, "%s/meta.zr", path);
    assert_int_equal(zt_read_file(mp, meta_before, sizeof meta_before), sizeof meta_before);
    write_identity(path, wide, sizeof wide);
    assert_int_equal(zrs_open(&s, path), ZR_OK);
    assert_int_equal(zrs_record_size(s), 8);
    assert_int_equal(zrs_close(s), ZR_OK);
    zt_write_file(mp, meta_before, sizeof meta_before);

    /* Missing store.zr. */
    assert_int_equal(remove(zr), 0);
    assert_int_equal(zrs_open(&s, path), ZR_ENOTSTORE);
    assert_msg_contains("not a store: ");
    assert_msg_contains("store.zr missing");

    /* Every failed open released the lock: the good identity opens, and
     * the data is intact. */
    zt_write_file(zr, good, good_len);
    assert_int_equal(zrs_open(&s, path), ZR_OK);
    float got[4];
    int64_t idx[2] = {0, 1};
    assert_int_equal(zrs_gather_dense(s, idx, 2, got, sizeof got), ZR_OK);
    assert_memory_equal(got, vals, sizeof vals);
    assert_int_equal(zrs_close(s), ZR_OK);
}

/* ------------------------------------------------------ append checks */

static void test_dense_append_wrong_nbytes(void **state)
{
    fixture *fx = *state;
    char path[700];
    snprintf(path, sizeof path, "%s", zt_dir_at(fx, "d"));
    const uint64_t shape[2] = {2, 5};
    zrs_store *s = NULL;
    assert_int_equal(zrs_create_dense(&s, path, ZRS_INT32, shape, 2, ZRE_CODEC_ZSTD),
                     ZR_OK);
    unsigned char data[40 * 4];
    fill(data, sizeof data, 11);
    uint64_t first = 0;
    assert_int_equal(zrs_append_dense(s, data, 120, 3, &first), ZR_OK);
    assert_int_equal(zrs_length(s), 3);

    assert_int_equal(zrs_append_dense(s, data + 120, 119, 3, &first), ZR_EINVAL);
    assert_msg_contains("expected 120 bytes");
    assert_msg_contains("got 119");
    assert_int_equal(zrs_append_dense(s, data, 160, 3, &first), ZR_EINVAL);
    assert_msg_contains("got 160");
    assert_int_equal(zrs_append_dense(s, data, 40, 0, &first), ZR_EINVAL);
    assert_msg_contains("expected 0 bytes");
    assert_int_equal(zrs_append_dense(s, data, 0, UINT64_MAX / 4, &first), ZR_EINVAL);
    assert_int_equal(zrs_append_dense(s, NULL, 40, 1, &first), ZR_EINVAL);
    assert_int_equal(zrs_length(s), 3);

    /* count 0 is a no-op reporting the current length. */
    first = 0;
    assert_int_equal(zrs_append_dense(s, NULL, 0, 0, &first), ZR_OK);
    assert_int_equal(first, 3);
    assert_int_equal(zrs_append_dense(s, data, 0, 0, NULL), ZR_OK);
    assert_int_equal(zrs_length(s), 3);
    assert_int_equal(zrs_close(s), ZR_OK);

    assert_int_equal(zrs_open(&s, path), ZR_OK);
    check_dense(s, data, 3, 40);
    /* Appends continue after reopen. */
    assert_int_equal(zrs_append_dense(s, data + 120, 40, 1, &first), ZR_OK);
    assert_int_equal(first, 3);
    check_dense(s, data, 4, 40);
    assert_int_equal(zrs_close(s), ZR_OK);
}

static void test_ragged_append_bad_record(void **state)
{
    fixture *fx = *state;
    char path[700];
    snprintf(path, sizeof path, "%s", zt_dir_at(fx, "r"));
    zrs_store *s = NULL;
    assert_int_equal(zrs_create_ragged(&s, path, ZRS_INT32, ZRE_CODEC_RAW), ZR_OK);

    const uint64_t d3[1] = {3}, d22[2] = {2, 2}, d0[1] = {0}, d30[2] = {3, 0};
    unsigned char buf[2048];
    uint64_t bounds[8], len;

    /* Record 3 has a payload one element short. */
    len = 0;
    for (int i = 0; i < 5; i++) {
        bounds[i] = len;
        put_ragged(buf, &len, 1, d3, 4, (uint64_t)i);
    }
    bounds[5] = len;
    bounds[4] -= 4; /* record 3 loses 4 bytes, record 4 gains them at its start */
    uint64_t first = 77;
    assert_int_equal(zrs_append_ragged(s, buf, bounds, 5, &first), ZR_EINVAL);
    assert_msg_contains("record 3 ");
    assert_msg_contains("8-byte payload, expected itemsize x prod(dims) = 12");
    assert_int_equal(zrs_length(s), 0);

    /* Zero-size dimensions, 1-D and 2-D: records with no elements are
     * stored (their prefix keeps the shape) and read back; a payload byte
     * too many is still refused. */
    len = 0;
    bounds[0] = 0;
    put_ragged(buf, &len, 2, d22, 4, 1);
    bounds[1] = len;
    put_ragged(buf, &len, 1, d0, 4, 2);
    bounds[2] = len;
    put_ragged(buf, &len, 2, d30, 4, 2);
    bounds[3] = len;
    assert_int_equal(zrs_append_ragged(s, buf, bounds, 3, NULL), ZR_OK);
    assert_int_equal(zrs_length(s), 3);
    {
        int64_t at[2] = {1, 2};
        uint64_t sz[2], gb[3] = {0};
        unsigned char got[64];
        assert_int_equal(zrs_ragged_sizes(s, at, 2, sz), ZR_OK);
        assert_int_equal(sz[0], 16);
        assert_int_equal(sz[1], 24);
        gb[1] = sz[0];
        gb[2] = sz[0] + sz[1];
        assert_int_equal(zrs_gather_ragged(s, at, 2, got, sizeof got, gb), ZR_OK);
        assert_memory_equal(got, buf + bounds[1], 40);
        size_t nd = 9;
        uint64_t dims[ZRS_MAX_NDIM], po = 0;
        assert_int_equal(zrs_ragged_decode(got + 16, 24, ZRS_INT32, &nd, dims, &po), ZR_OK);
        assert_true(nd == 2 && dims[0] == 3 && dims[1] == 0 && po == 24);
    }
    int64_t all[3] = {0, 1, 2};
    assert_int_equal(zrs_delete(s, all, 3), ZR_OK);
    len = 0;
    put_ragged(buf, &len, 1, d0, 4, 2);
    buf[len++] = 7;
    bounds[0] = 0;
    bounds[1] = len;
    assert_int_equal(zrs_append_ragged(s, buf, bounds, 1, NULL), ZR_EINVAL);
    assert_msg_contains("record 0 has a 1-byte payload, expected itemsize x prod(dims) = 0");
    assert_int_equal(zrs_length(s), 0);

    /* Empty record, short prefix, ndim too large, prefix longer than the
     * record, decreasing bounds. */
    len = 0;
    put_ragged(buf, &len, 1, d3, 4, 3);
    uint64_t b2[3] = {0, len, len};
    assert_int_equal(zrs_append_ragged(s, buf, b2, 2, NULL), ZR_EINVAL);
    assert_msg_contains("record 1 is 0 bytes, shorter than the 8-byte ndim prefix");
    uint64_t b3[2] = {0, 5};
    assert_int_equal(zrs_append_ragged(s, buf, b3, 1, NULL), ZR_EINVAL);
    assert_msg_contains("record 0 is 5 bytes");
    zt_put_le64(buf + 100, 33);
    uint64_t b4[2] = {100, 100 + 8 + 33 * 8 + 4};
    assert_int_equal(zrs_append_ragged(s, buf, b4, 1, NULL), ZR_EINVAL);
    assert_msg_contains("record 0 has ndim 33, at most 32 allowed");
    zt_put_le64(buf + 100, 4);
    uint64_t b5[2] = {100, 124};
    assert_int_equal(zrs_append_ragged(s, buf, b5, 1, NULL), ZR_EINVAL);
    assert_msg_contains("shorter than its 40-byte shape prefix");
    uint64_t b6[3] = {0, len, 3};
    assert_int_equal(zrs_append_ragged(s, buf, b6, 2, NULL), ZR_EINVAL);
    assert_msg_contains("bounds decrease at record 1");
    /* Overflowing element count. */
    zt_put_le64(buf + 200, 2);
    zt_put_le64(buf + 208, UINT64_C(1) << 40);
    zt_put_le64(buf + 216, UINT64_C(1) << 40);
    uint64_t b7[2] = {200, 228};
    assert_int_equal(zrs_append_ragged(s, buf, b7, 1, NULL), ZR_EINVAL);
    assert_msg_contains("overflows");
    assert_int_equal(zrs_length(s), 0);
    assert_int_equal(zrs_append_ragged(s, NULL, b7, 1, NULL), ZR_EINVAL);
    assert_int_equal(zrs_append_ragged(s, buf, NULL, 1, NULL), ZR_EINVAL);

    /* count 0: no-op. */
    assert_int_equal(zrs_append_ragged(s, NULL, NULL, 0, &first), ZR_OK);
    assert_int_equal(first, 0);

    /* The store is untouched and still takes good records. */
    len = 0;
    bounds[0] = 0;
    put_ragged(buf, &len, 1, d3, 4, 9);
    bounds[1] = len;
    assert_int_equal(zrs_append_ragged(s, buf, bounds, 1, &first), ZR_OK);
    assert_int_equal(first, 0);
    assert_int_equal(zrs_close(s), ZR_OK);
    assert_int_equal(zrs_open(&s, path), ZR_OK);
    check_ragged(s, ZRS_INT32, buf, bounds, 1);
    assert_int_equal(zrs_close(s), ZR_OK);
}

static void test_ragged_decode(void **state)
{
    (void)state;
    unsigned char rec[256];
    uint64_t len = 0;
    const uint64_t dims[3] = {2, 1, 3};
    put_ragged(rec, &len, 3, dims, 2, 4);
    assert_int_equal(len, 32 + 12);
    size_t ndim = 0;
    uint64_t got[ZRS_MAX_NDIM], off = 0;
    assert_int_equal(zrs_ragged_decode(rec, len, ZRS_FLOAT16, &ndim, got, &off), ZR_OK);
    assert_int_equal(ndim, 3);
    assert_memory_equal(got, dims, sizeof dims);
    assert_int_equal(off, 32);
    /* Dims are little-endian regardless of host order. */
    assert_int_equal(rec[8], 2);
    assert_int_equal(rec[15], 0);
    /* Same bytes, wrong dtype. */
    assert_int_equal(zrs_ragged_decode(rec, len, ZRS_FLOAT32, &ndim, got, &off),
                     ZR_EINVAL);
    assert_msg_contains("expected itemsize x prod(dims) = 24");
    /* Scalar record. */
    len = 0;
    put_ragged(rec, &len, 0, NULL, 16, 1);
    assert_int_equal(len, 24);
    assert_int_equal(zrs_ragged_decode(rec, len, ZRS_COMPLEX128, &ndim, got, &off),
                     ZR_OK);
    assert_int_equal(ndim, 0);
    assert_int_equal(off, 8);
    assert_int_equal(zrs_ragged_decode(rec, len, ZRS_DTYPE_COUNT, &ndim, got, &off),
                     ZR_EINVAL);
    assert_int_equal(zrs_ragged_decode(NULL, 8, ZRS_INT8, &ndim, got, &off), ZR_EINVAL);
    assert_int_equal(zrs_ragged_decode(rec, 7, ZRS_INT8, NULL, NULL, NULL), ZR_EINVAL);
}

/* The encoder is the decoder's inverse: the same bytes as the format's
 * layout (built by hand here), a round trip through zrs_ragged_decode and
 * zrs_append_ragged, and a refusal naming the sizes for a payload that
 * does not match the shape, a short dst, too many dims or an overflow. */
static void test_ragged_encode(void **state)
{
    fixture *fx = *state;
    unsigned char want[256], got[256];
    uint64_t len = 0, size = 0, written = 0;
    const uint64_t dims[3] = {2, 1, 3};
    put_ragged(want, &len, 3, dims, 2, 4);
    assert_int_equal(zrs_ragged_encoded_size(ZRS_FLOAT16, 3, dims, &size), ZR_OK);
    assert_int_equal(size, len);
    memset(got, 0xAB, sizeof got);
    assert_int_equal(zrs_ragged_encode(ZRS_FLOAT16, 3, dims, want + 32, 12, got, sizeof got,
                                       &written), ZR_OK);
    assert_int_equal(written, len);
    assert_memory_equal(got, want, len);
    assert_int_equal(got[len], 0xAB); /* nothing past the record */
    size_t ndim = 0;
    uint64_t back[ZRS_MAX_NDIM], off = 0;
    assert_int_equal(zrs_ragged_decode(got, written, ZRS_FLOAT16, &ndim, back, &off), ZR_OK);
    assert_int_equal(ndim, 3);
    assert_memory_equal(back, dims, sizeof dims);
    /* A scalar record and an empty one (a zero dim keeps its shape). */
    assert_int_equal(zrs_ragged_encode(ZRS_INT64, 0, NULL, "\1\2\3\4\5\6\7\10", 8, got,
                                       sizeof got, &written), ZR_OK);
    assert_int_equal(written, 16);
    assert_int_equal(got[0], 0);
    assert_int_equal(got[8], 1);
    const uint64_t empty[2] = {0, 4};
    assert_int_equal(zrs_ragged_encode(ZRS_FLOAT32, 2, empty, NULL, 0, got, sizeof got,
                                       &written), ZR_OK);
    assert_int_equal(written, 24);
    assert_int_equal(zrs_ragged_decode(got, written, ZRS_FLOAT32, &ndim, back, &off), ZR_OK);
    assert_int_equal(back[1], 4);
    /* Refusals. */
    assert_int_equal(zrs_ragged_encode(ZRS_FLOAT16, 3, dims, want + 32, 10, got, sizeof got,
                                       NULL), ZR_EINVAL);
    assert_msg_contains("record of shape with 6 elements needs 12 bytes of data, got 10");
    assert_int_equal(zrs_ragged_encode(ZRS_FLOAT16, 3, dims, want + 32, 12, got, len - 1,
                                       NULL), ZR_EINVAL);
    assert_msg_contains("needs 44 bytes, dst holds 43");
    uint64_t many[ZRS_MAX_NDIM + 1] = {0};
    assert_int_equal(zrs_ragged_encoded_size(ZRS_UINT8, ZRS_MAX_NDIM + 1, many, &size), ZR_EINVAL);
    assert_msg_contains("33 dims, at most 32");
    const uint64_t huge[2] = {UINT64_MAX / 2, 4};
    assert_int_equal(zrs_ragged_encoded_size(ZRS_UINT8, 2, huge, &size), ZR_EINVAL);
    assert_msg_contains("overflows 64 bits");
    assert_int_equal(zrs_ragged_encoded_size(ZRS_DTYPE_COUNT, 1, dims, &size), ZR_EINVAL);
    assert_int_equal(zrs_ragged_encoded_size(ZRS_UINT8, 1, NULL, &size), ZR_EINVAL);
    assert_int_equal(zrs_ragged_encode(ZRS_FLOAT16, 3, dims, NULL, 12, got, sizeof got, NULL),
                     ZR_EINVAL);
    /* What it encodes, a store appends and gives back byte for byte. */
    char path[700];
    snprintf(path, sizeof path, "%s", zt_dir_at(fx, "enc"));
    zrs_store *s = NULL;
    assert_int_equal(zrs_create_ragged(&s, path, ZRS_FLOAT16, ZRE_CODEC_RAW), ZR_OK);
    uint64_t bounds[3] = {0, 0, 0}, first = 0;
    assert_int_equal(zrs_ragged_encode(ZRS_FLOAT16, 3, dims, want + 32, 12, got, sizeof got,
                                       &bounds[1]), ZR_OK);
    assert_int_equal(zrs_ragged_encode(ZRS_FLOAT16, 2, empty, NULL, 0, got + bounds[1],
                                       sizeof got - bounds[1], &written), ZR_OK);
    bounds[2] = bounds[1] + written;
    assert_int_equal(zrs_append_ragged(s, got, bounds, 2, &first), ZR_OK);
    check_ragged(s, ZRS_FLOAT16, got, bounds, 2);
    assert_int_equal(zrs_close(s), ZR_OK);
}

/* -------------------------------------------------------- indices */

static void test_indices(void **state)
{
    fixture *fx = *state;
    zrs_store *s = NULL;
    assert_int_equal(zrs_create_dense(&s, zt_dir_at(fx, "labels"), ZRS_UINT8, NULL, 0,
                                      ZRE_CODEC_RAW), ZR_OK);
    enum { N = 60000 };
    unsigned char *data = malloc(N);
    assert_non_null(data);
    for (int i = 0; i < N; i++)
        data[i] = (unsigned char)(i * 7 + i / 256);
    assert_int_equal(zrs_append_dense(s, data, N, N, NULL), ZR_OK);

    int64_t idx[5] = {-1, -N, 0, 59999, -2};
    uint64_t res[5];
    assert_int_equal(zrs_resolve_index(s, idx, 5, res), ZR_OK);
    assert_int_equal(res[0], N - 1);
    assert_int_equal(res[1], 0);
    assert_int_equal(res[2], 0);
    assert_int_equal(res[3], N - 1);
    assert_int_equal(res[4], N - 2);
    unsigned char got[5];
    assert_int_equal(zrs_gather_dense(s, idx, 5, got, 5), ZR_OK);
    for (int i = 0; i < 5; i++)
        assert_int_equal(got[i], data[res[i]]);

    int64_t bad[2] = {3, 70000};
    assert_int_equal(zrs_resolve_index(s, bad, 2, res), ZR_ERANGE);
    assert_string_equal(zr_last_error(),
                        "index 70000 is out of range for a store of 60000 records");
    assert_int_equal(zrs_gather_dense(s, bad, 2, got, 5), ZR_ERANGE);
    assert_msg_contains("index 70000 is out of range for a store of 60000 records");
    int64_t neg = -60001;
    assert_int_equal(zrs_resolve_index(s, &neg, 1, res), ZR_ERANGE);
    assert_msg_contains("index -60001 is out of range");
    int64_t edge[2] = {N, INT64_MIN};
    assert_int_equal(zrs_resolve_index(s, edge, 1, res), ZR_ERANGE);
    assert_int_equal(zrs_resolve_index(s, edge + 1, 1, res), ZR_ERANGE);
    assert_int_equal(zrs_resolve_index(s, edge, 0, res), ZR_OK);
    assert_int_equal(zrs_resolve_index(s, NULL, 1, res), ZR_EINVAL);

    /* A large gather (heap-resolved indices) in shuffled order. */
    enum { M = 5000 };
    int64_t *many = malloc(M * sizeof *many);
    unsigned char *out = malloc(M);
    assert_non_null(many);
    assert_non_null(out);
    for (int i = 0; i < M; i++)
        many[i] = (int64_t)((uint64_t)i * 7919u % N) - (i % 3 == 0 ? N : 0);
    assert_int_equal(zrs_gather_dense(s, many, M, out, M), ZR_OK);
    for (int i = 0; i < M; i++)
        assert_int_equal(out[i], data[(uint64_t)i * 7919u % N]);
    /* dst too small. */
    assert_int_equal(zrs_gather_dense(s, many, M, out, M - 1), ZR_EINVAL);
    assert_msg_contains("need count x record_size");
    /* count 0 needs nothing. */
    assert_int_equal(zrs_gather_dense(s, NULL, 0, NULL, 0), ZR_OK);
    free(many);
    free(out);
    free(data);
    assert_int_equal(zrs_close(s), ZR_OK);
}

/* ------------------------------------------------- create / open errors */

static void test_create_existing(void **state)
{
    fixture *fx = *state;
    char path[700];
    snprintf(path, sizeof path, "%s", zt_dir_at(fx, "x"));
    zrs_store *s = NULL;
    assert_int_equal(zrs_create_ragged(&s, path, ZRS_UINT8, ZRE_CODEC_RAW), ZR_OK);
    unsigned char rec[9] = {0};
    uint64_t b[2] = {0, 9};
    assert_int_equal(zrs_append_ragged(s, rec, b, 1, NULL), ZR_OK);
    assert_int_equal(zrs_close(s), ZR_OK);

    zrs_store *t = (zrs_store *)&t; /* must be reset to NULL */
    assert_int_equal(zrs_create_ragged(&t, path, ZRS_UINT8, ZRE_CODEC_RAW), ZR_EEXIST);
    assert_null(t);
    const uint64_t sh[1] = {4};
    assert_int_equal(zrs_create_dense(&t, path, ZRS_FLOAT32, sh, 1, ZRE_CODEC_RAW),
                     ZR_EEXIST);
    /* A plain directory is an existing path too. */
    assert_int_equal(zrs_create_dense(&t, fx->dir, ZRS_FLOAT32, sh, 1, ZRE_CODEC_RAW),
                     ZR_EEXIST);
    /* The original store is untouched. */
    assert_int_equal(zrs_open(&s, path), ZR_OK);
    assert_int_equal(zrs_get_kind(s), ZRS_RAGGED);
    assert_int_equal(zrs_length(s), 1);
    assert_int_equal(zrs_close(s), ZR_OK);
}

static void test_create_invalid(void **state)
{
    fixture *fx = *state;
    zrs_store *s = NULL;
    const uint64_t zero[2] = {3, 0};
    const uint64_t huge[2] = {UINT64_C(1) << 20, UINT64_C(1) << 20};
    const uint64_t ok[1] = {4};
    uint64_t many[ZRS_MAX_NDIM + 1];
    for (int i = 0; i <= ZRS_MAX_NDIM; i++)
        many[i] = 1;

    assert_int_equal(zrs_create_dense(&s, zt_dir_at(fx, "a"), ZRS_FLOAT32, zero, 2,
                                      ZRE_CODEC_RAW), ZR_EINVAL);
    assert_msg_contains("item_shape[1] is 0");
    assert_false(zt_exists(zt_dir_at(fx, "a")));
    assert_int_equal(zrs_create_dense(&s, zt_dir_at(fx, "a"), ZRS_FLOAT32, huge, 2,
                                      ZRE_CODEC_RAW), ZR_EINVAL);
    assert_msg_contains("record limit");
    assert_int_equal(zrs_create_dense(&s, zt_dir_at(fx, "a"), ZRS_FLOAT32, many,
                                      ZRS_MAX_NDIM + 1, ZRE_CODEC_RAW), ZR_EINVAL);
    assert_msg_contains("33 dims");
    assert_int_equal(zrs_create_dense(&s, zt_dir_at(fx, "a"), ZRS_FLOAT32, NULL, 1,
                                      ZRE_CODEC_RAW), ZR_EINVAL);
    assert_int_equal(zrs_create_dense(&s, zt_dir_at(fx, "a"), ZRS_DTYPE_COUNT, ok, 1,
                                      ZRE_CODEC_RAW), ZR_EINVAL);
    assert_msg_contains("unknown dtype");
    assert_int_equal(zrs_create_ragged(&s, zt_dir_at(fx, "a"), (zrs_dtype)-3, ZRE_CODEC_RAW),
                     ZR_EINVAL);
    assert_int_equal(zrs_create_dense(&s, zt_dir_at(fx, "a"), ZRS_FLOAT32, ok, 1,
                                      (zre_codec)9), ZR_EINVAL);
    assert_msg_contains("codec");
    assert_int_equal(zrs_create_ragged(&s, zt_dir_at(fx, "a"), ZRS_INT8, ZRE_CODEC_ZSTD_DICT),
                     ZR_EINVAL);
    assert_msg_contains("dictionary");
    assert_int_equal(zrs_create_ragged(&s, NULL, ZRS_INT8, ZRE_CODEC_RAW), ZR_EINVAL);
    assert_int_equal(zrs_create_ragged(NULL, zt_dir_at(fx, "a"), ZRS_INT8, ZRE_CODEC_RAW),
                     ZR_EINVAL);
    assert_false(zt_exists(zt_dir_at(fx, "a")));
    assert_null(s);
    /* A 32-dim shape is fine. */
    assert_int_equal(zrs_create_dense(&s, zt_dir_at(fx, "a"), ZRS_FLOAT32, many,
                                      ZRS_MAX_NDIM, ZRE_CODEC_RAW), ZR_OK);
    assert_int_equal(zrs_item_ndim(s), ZRS_MAX_NDIM);
    assert_int_equal(zrs_close(s), ZR_OK);
    assert_int_equal(zrs_open(&s, zt_dir_at(fx, "a")), ZR_OK);
    assert_int_equal(zrs_item_ndim(s), ZRS_MAX_NDIM);
    assert_int_equal(zrs_record_size(s), 4);
    assert_int_equal(zrs_close(s), ZR_OK);
}

static void test_open_not_store(void **state)
{
    fixture *fx = *state;
    zrs_store *s = (zrs_store *)&s;
    /* A plain directory. */
    assert_int_equal(zrs_open(&s, fx->dir), ZR_ENOTSTORE);
    assert_null(s);
    assert_true(strlen(zr_last_error()) > 0);
    /* A missing path. */
    assert_int_equal(zrs_open(&s, zt_dir_at(fx, "nope")), ZR_ENOTSTORE);
    assert_msg_contains("nope");
    /* An engine directory without store.zr (a crash before the identity
     * was written) is not a store. */
    zre_engine *e = NULL;
    assert_int_equal(zre_create(&e, zt_dir_at(fx, "bare"), ZRE_CODEC_RAW), ZR_OK);
    assert_int_equal(zre_close(e), ZR_OK);
    assert_int_equal(zrs_open(&s, zt_dir_at(fx, "bare")), ZR_ENOTSTORE);
    assert_msg_contains("store.zr missing");
    assert_int_equal(zrs_open(&s, NULL), ZR_EINVAL);
    assert_int_equal(zrs_open(NULL, fx->dir), ZR_EINVAL);
}

static void test_open_busy(void **state)
{
    fixture *fx = *state;
    char path[700];
    snprintf(path, sizeof path, "%s", zt_dir_at(fx, "b"));
    zrs_store *s = NULL, *t = NULL;
    assert_int_equal(zrs_create_ragged(&s, path, ZRS_UINT8, ZRE_CODEC_ZSTD), ZR_OK);
    assert_int_equal(zrs_open(&t, path), ZR_EBUSY);
    assert_null(t);
    assert_int_equal(zrs_close(s), ZR_OK);
    assert_int_equal(zrs_open(&s, path), ZR_OK);
    assert_int_equal(zrs_open(&t, path), ZR_EBUSY);
    assert_int_equal(zrs_close(s), ZR_OK);
    assert_int_equal(zrs_open(&t, path), ZR_OK);
    assert_int_equal(zrs_close(t), ZR_OK);
}

/* ----------------------------------------------- kind mismatch, NULLs */

static void test_kind_mismatch(void **state)
{
    fixture *fx = *state;
    zrs_store *d = NULL, *r = NULL;
    const uint64_t sh[1] = {2};
    assert_int_equal(zrs_create_dense(&d, zt_dir_at(fx, "d"), ZRS_INT16, sh, 1, ZRE_CODEC_RAW),
                     ZR_OK);
    assert_int_equal(zrs_create_ragged(&r, zt_dir_at(fx, "r"), ZRS_INT16, ZRE_CODEC_RAW), ZR_OK);
    unsigned char buf[64] = {0};
    uint64_t b[2] = {0, 10};
    int64_t idx[1] = {0};
    uint64_t sizes[1];
    zt_put_le64(buf, 0);

    assert_int_equal(zrs_append_ragged(d, buf, b, 1, NULL), ZR_EINVAL);
    assert_msg_contains("is dense");
    assert_int_equal(zrs_gather_ragged(d, idx, 1, buf, sizeof buf, b), ZR_EINVAL);
    assert_int_equal(zrs_ragged_sizes(d, idx, 1, sizes), ZR_EINVAL);
    assert_int_equal(zrs_append_dense(r, buf, 4, 1, NULL), ZR_EINVAL);
    assert_msg_contains("is ragged");
    assert_int_equal(zrs_gather_dense(r, idx, 1, buf, sizeof buf), ZR_EINVAL);
    assert_int_equal(zrs_length(d), 0);
    assert_int_equal(zrs_length(r), 0);
    /* Reading past the end of an empty store. */
    assert_int_equal(zrs_gather_dense(d, idx, 1, buf, sizeof buf), ZR_ERANGE);
    assert_int_equal(zrs_ragged_sizes(r, idx, 1, sizes), ZR_ERANGE);
    assert_int_equal(zrs_close(d), ZR_OK);
    assert_int_equal(zrs_close(r), ZR_OK);

    /* NULL handles: errors, never crashes. */
    assert_int_equal(zrs_append_dense(NULL, buf, 4, 1, NULL), ZR_EINVAL);
    assert_msg_contains("NULL store");
    assert_int_equal(zrs_append_ragged(NULL, buf, b, 1, NULL), ZR_EINVAL);
    assert_int_equal(zrs_gather_dense(NULL, idx, 1, buf, sizeof buf), ZR_EINVAL);
    assert_int_equal(zrs_gather_ragged(NULL, idx, 1, buf, sizeof buf, b), ZR_EINVAL);
    assert_int_equal(zrs_ragged_sizes(NULL, idx, 1, sizes), ZR_EINVAL);
    assert_int_equal(zrs_resolve_index(NULL, idx, 1, sizes), ZR_EINVAL);
    assert_int_equal(zrs_close(NULL), ZR_OK);
    assert_int_equal(zrs_length(NULL), 0);
    assert_int_equal(zrs_record_size(NULL), 0);
    assert_int_equal(zrs_item_ndim(NULL), 0);
    assert_null(zrs_item_shape(NULL));
    assert_null(zrs_path(NULL));
    assert_null(zrs_engine(NULL));
}

/* A ragged store whose identity changed under it: gathered prefixes no
 * longer match the dtype, which gather reports as corruption. */
static void test_gather_ragged_corrupt(void **state)
{
    fixture *fx = *state;
    char path[700], zr[800];
    snprintf(path, sizeof path, "%s", zt_dir_at(fx, "c"));
    snprintf(zr, sizeof zr, "%s/store.zr", path);
    zrs_store *s = NULL;
    assert_int_equal(zrs_create_ragged(&s, path, ZRS_INT32, ZRE_CODEC_ZSTD), ZR_OK);
    unsigned char buf[256];
    uint64_t len = 0, b[3];
    const uint64_t d1[1] = {4}, d2[1] = {3};
    b[0] = 0;
    put_ragged(buf, &len, 1, d1, 4, 1); /* 16-byte payload */
    b[1] = len;
    put_ragged(buf, &len, 1, d2, 4, 2); /* 12-byte payload */
    b[2] = len;
    assert_int_equal(zrs_append_ragged(s, buf, b, 2, NULL), ZR_OK);
    assert_int_equal(zrs_close(s), ZR_OK);

    static const unsigned char i8[] = {0x81, K_DTYPE, 0xa3, '<', 'i', '8'};
    zt_write_file(zr, i8, sizeof i8);
    assert_int_equal(zrs_open(&s, path), ZR_ENOTSTORE); /* damage is caught on open */
    assert_msg_contains("store.zr");
    write_identity(path, i8, sizeof i8); /* a deliberate change gets as far as gather */
    assert_int_equal(zrs_open(&s, path), ZR_OK);
    int64_t idx[2] = {0, -1};
    uint64_t sizes[2];
    assert_int_equal(zrs_ragged_sizes(s, idx, 2, sizes), ZR_OK);
    uint64_t gb[3] = {0, sizes[0], sizes[0] + sizes[1]};
    unsigned char got[256];
    /* As <i8, dims [4] needs a 32-byte payload; record 0 fails first. */
    assert_int_equal(zrs_gather_ragged(s, idx, 2, got, sizeof got, gb), ZR_ECORRUPT);
    assert_msg_contains("index 0");
    int64_t last[1] = {-1};
    uint64_t gb1[2] = {0, sizes[1]};
    assert_int_equal(zrs_gather_ragged(s, last, 1, got, sizeof got, gb1), ZR_ECORRUPT);
    assert_msg_contains("index -1 (store index 1)");
    assert_int_equal(zrs_close(s), ZR_OK);
}

/* ------------------------------------------------ the training sample */

/* Text-like bytes (words of a small vocabulary), which zstd can train on. */
static void fill_words(unsigned char *p, size_t n, uint64_t seed)
{
    static const char *words[] = {"record", "store", "gather", "codec", "shard", "rank",
                                  "epoch", "step", "batch", "prefetch", " ", "\n"};
    uint64_t x = seed * 0x9E3779B97F4A7C15ull + 7;
    size_t i = 0;
    while (i < n) {
        const char *w = words[zt_xorshift64(&x) % 12];
        for (size_t k = 0; w[k] && i < n; k++)
            p[i++] = (unsigned char)w[k];
    }
}

static void test_dict_sample_rule(void **state)
{
    (void)state;
    enum { N = 1000, SZ = 100 << 10 };
    unsigned char *rec = malloc(SZ);
    assert_non_null(rec);
    fill_words(rec, SZ, 1);
    zrs_dict_sample *a, *b;
    assert_int_equal(zrs_dict_sample_create(&a, ZRS_DICT_FAST), ZR_OK);
    assert_int_equal(zrs_dict_sample_create(&b, ZRS_DICT_FAST), ZR_OK);
    /* a: every record streamed; b: only the indices the sample names. */
    for (uint64_t i = 0; i < N; i++) {
        rec[0] = (unsigned char)i;
        assert_true(zrs_dict_sample_offer(a, i, rec, SZ) >= 0);
    }
    for (uint64_t i = zrs_dict_sample_next(b); i < N; i = zrs_dict_sample_next(b)) {
        rec[0] = (unsigned char)i;
        assert_true(zrs_dict_sample_offer(b, i, rec, SZ) >= 0);
    }
    /* 4 MiB of sample bytes hold 40 records of 100 KiB: the stride
     * doubles to 32 (32 records: 0, 32, ..., 992), as 16 would keep 63. */
    assert_int_equal(zrs_dict_sample_count(a), 32);
    assert_int_equal(zrs_dict_sample_bytes(a), 32ull * SZ);
    assert_int_equal(zrs_dict_sample_next(a), 1024);
    assert_int_equal(zrs_dict_sample_count(b), 32);
    assert_int_equal(zrs_dict_sample_bytes(b), 32ull * SZ);
    unsigned char *da = malloc(ZRS_DICT_FAST_DICT_BYTES), *db = malloc(ZRS_DICT_FAST_DICT_BYTES);
    uint64_t na = 0, nb = 0;
    assert_int_equal(zrs_dict_sample_train(a, da, 1 << 20, &na), ZR_OK);
    assert_int_equal(zrs_dict_sample_train(b, db, 1 << 20, &nb), ZR_OK);
    assert_true(na > 0 && na <= ZRS_DICT_FAST_DICT_BYTES);
    assert_int_equal(na, nb);
    assert_memory_equal(da, db, na);
    /* Out of order is refused, by name. */
    assert_int_equal(zrs_dict_sample_offer(a, 5, rec, SZ), ZR_EINVAL);
    assert_msg_contains("record 5 offered after record 999");
    zrs_dict_sample_free(b);
    assert_int_equal(zrs_dict_sample_create(&b, (zrs_dict_tier)7), ZR_EINVAL);
    assert_null(b);
    zrs_dict_sample_free(a);
    /* Too little to train on is the builder's named error. */
    assert_int_equal(zrs_dict_sample_create(&a, ZRS_DICT_FAST), ZR_OK);
    assert_int_equal(zrs_dict_sample_offer(a, 0, rec, 100), 1);
    assert_int_equal(zrs_dict_sample_offer(a, 3, rec, 0), 0); /* empty: never kept */
    assert_int_equal(zrs_dict_sample_count(a), 1);
    assert_int_equal(zrs_dict_sample_train(a, da, ZRS_DICT_FAST_DICT_BYTES, &na), ZR_EINVAL);
    assert_msg_contains("not enough data");
    zrs_dict_sample_free(a);
    zrs_dict_sample_free(NULL);
    free(da);
    free(db);
    free(rec);
}

/* A store sampled in C gives the dictionary its records give when offered
 * from memory, and zrs_train_dict_tier (the rule over given records) the
 * same again. */
static void test_dict_sample_store(void **state)
{
    fixture *fx = *state;
    enum { N = 2000, SZ = 4096 };
    unsigned char *all = malloc((size_t)N * SZ);
    assert_non_null(all);
    for (uint64_t i = 0; i < N; i++)
        fill_words(all + i * SZ, SZ, i + 11);
    zrs_store *s;
    uint64_t shape[1] = {SZ}, first;
    assert_int_equal(zrs_create_dense(&s, zt_dir_at(fx, "d"), ZRS_UINT8, shape, 1,
                                      ZRE_CODEC_ZSTD), ZR_OK);
    assert_int_equal(zrs_append_dense(s, all, (uint64_t)N * SZ, N, &first), ZR_OK);
    zrs_dict_sample *a;
    assert_int_equal(zrs_dict_sample_create(&a, ZRS_DICT_FAST), ZR_OK);
    assert_int_equal(zrs_dict_sample_store(a, s), ZR_OK);
    /* 8,192,000 bytes against 4 MiB: every other record, 1,000 of them. */
    assert_int_equal(zrs_dict_sample_count(a), 1000);
    unsigned char *d1 = malloc(ZRS_DICT_FAST_DICT_BYTES), *d2 = malloc(ZRS_DICT_FAST_DICT_BYTES);
    uint64_t n1 = 0, n2 = 0;
    assert_int_equal(zrs_dict_sample_train(a, d1, ZRS_DICT_FAST_DICT_BYTES, &n1), ZR_OK);
    uint64_t *sizes = malloc(N * sizeof *sizes);
    for (uint64_t i = 0; i < N; i++)
        sizes[i] = SZ;
    assert_int_equal(zrs_train_dict_tier(all, sizes, N, ZRS_DICT_FAST, d2,
                                         ZRS_DICT_FAST_DICT_BYTES, &n2), ZR_OK);
    assert_int_equal(n1, n2);
    assert_memory_equal(d1, d2, n1);
    zrs_dict_sample_free(a);
    assert_int_equal(zrs_close(s), ZR_OK);
    free(sizes);
    free(d1);
    free(d2);
    free(all);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dtype_parse),
        cmocka_unit_test(test_dtype_from_name),
        cmocka_unit_test(test_version),
        cmocka_unit_test(test_dict_sample_rule),
        cmocka_unit_test_setup_teardown(test_dict_sample_store, setup, zt_dir_teardown),
        cmocka_unit_test_setup_teardown(test_dense_roundtrip_all_dtypes, setup, zt_dir_teardown),
        cmocka_unit_test_setup_teardown(test_ragged_roundtrip_all_dtypes, setup, zt_dir_teardown),
        cmocka_unit_test_setup_teardown(test_ragged_offset_bounds, setup, zt_dir_teardown),
        cmocka_unit_test_setup_teardown(test_ragged_encode, setup, zt_dir_teardown),
        cmocka_unit_test_setup_teardown(test_dense_scalar, setup, zt_dir_teardown),
        cmocka_unit_test_setup_teardown(test_store_zr_bytes, setup, zt_dir_teardown),
        cmocka_unit_test_setup_teardown(test_store_zr_invalid, setup, zt_dir_teardown),
        cmocka_unit_test_setup_teardown(test_store_zr_uuid_vector, setup, zt_dir_teardown),
        cmocka_unit_test_setup_teardown(test_store_uuid_lifecycle, setup, zt_dir_teardown),
        cmocka_unit_test(test_codec_auto),
        cmocka_unit_test_setup_teardown(test_dense_append_wrong_nbytes, setup, zt_dir_teardown),
        cmocka_unit_test_setup_teardown(test_ragged_append_bad_record, setup, zt_dir_teardown),
        cmocka_unit_test(test_ragged_decode),
        cmocka_unit_test_setup_teardown(test_indices, setup, zt_dir_teardown),
        cmocka_unit_test_setup_teardown(test_create_existing, setup, zt_dir_teardown),
        cmocka_unit_test_setup_teardown(test_create_invalid, setup, zt_dir_teardown),
        cmocka_unit_test_setup_teardown(test_open_not_store, setup, zt_dir_teardown),
        cmocka_unit_test_setup_teardown(test_open_busy, setup, zt_dir_teardown),
        cmocka_unit_test_setup_teardown(test_kind_mismatch, setup, zt_dir_teardown),
        cmocka_unit_test_setup_teardown(test_gather_ragged_corrupt, setup, zt_dir_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
