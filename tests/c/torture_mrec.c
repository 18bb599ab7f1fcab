/*
 * torture_mrec.c - libzmrec: typed JSON, precision, a byte-exact frame,
 * writer/reader round trips with carry-forward, every refusal of the
 * reader on crafted values and files, and random corruptions that must
 * never crash.
 *
 * Every test runs in its own temporary directory (under ZR_TEST_TMPDIR
 * when set), removed afterwards. Bad files are crafted by rewriting keys
 * of a valid collection with LMDB directly.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


#include <cmocka.h>
#include <lmdb.h>

#include <zmrec.h>

#include "zr_test_util.h"

/* fx->path is the collection every test writes: "<dir>/c.mrec.lmdb". */
typedef zt_dir fixture;

static int setup(void **state)
{
    if (zt_dir_setup(state, "zmr") != 0)
        return -1;
    zt_dir_at(*state, "c.mrec.lmdb");
    return 0;
}

#define OK(x) assert_int_equal((x), ZMR_OK)
#define HAS(s) zt_assert_mentions(zmr_last_error(), (s))

/* ------------------------------------------------------------ raw LMDB */

static void raw_put(const char *path, const void *key, size_t klen, const void *val, size_t vlen)
{
    MDB_env *env;
    MDB_txn *txn;
    MDB_dbi dbi;
    assert_int_equal(mdb_env_create(&env), 0);
    assert_int_equal(mdb_env_set_mapsize(env, (size_t)1 << 28), 0);
    assert_int_equal(mdb_env_open(env, path, MDB_NOSUBDIR, 0644), 0);
    assert_int_equal(mdb_txn_begin(env, NULL, 0, &txn), 0);
    assert_int_equal(mdb_dbi_open(txn, NULL, 0, &dbi), 0);
    MDB_val k = {klen, (void *)key}, v = {vlen, (void *)val};
    if (val == NULL)
        mdb_del(txn, dbi, &k, NULL);
    else
        assert_int_equal(mdb_put(txn, dbi, &k, &v, 0), 0);
    assert_int_equal(mdb_txn_commit(txn), 0);
    mdb_env_close(env);
}

/* Copy of key's value (malloc), *len. NULL when absent. */
static void *raw_get(const char *path, const void *key, size_t klen, size_t *len)
{
    MDB_env *env;
    MDB_txn *txn;
    MDB_dbi dbi;
    void *out = NULL;
    assert_int_equal(mdb_env_create(&env), 0);
    assert_int_equal(mdb_env_open(env, path, MDB_NOSUBDIR | MDB_RDONLY, 0644), 0);
    assert_int_equal(mdb_txn_begin(env, NULL, MDB_RDONLY, &txn), 0);
    assert_int_equal(mdb_dbi_open(txn, NULL, 0, &dbi), 0);
    MDB_val k = {klen, (void *)key}, v;
    if (mdb_get(txn, dbi, &k, &v) == 0) {
        out = malloc(v.mv_size);
        memcpy(out, v.mv_data, v.mv_size);
        *len = v.mv_size;
    }
    mdb_txn_abort(txn);
    mdb_env_close(env);
    return out;
}

/* The "meta" value at path as a NUL-terminated string (malloc). */
static char *raw_meta(const char *path)
{
    size_t n;
    char *meta = raw_get(path, "meta", 4, &n);
    assert_non_null(meta);
    meta = realloc(meta, n + 1);
    meta[n] = '\0';
    return meta;
}

/* Remove the collection file at path and its LMDB lock file. */
static void remove_collection(const char *path)
{
    char lock[700];
    snprintf(lock, sizeof lock, "%s-lock", path);
    remove(path);
    remove(lock);
}

static void fkey(unsigned char *k, char p, uint64_t n)
{
    k[0] = (unsigned char)p;
    for (int i = 0; i < 8; i++)
        k[1 + i] = (unsigned char)(n >> (56 - 8 * i));
}

/* ------------------------------------------------------------ readers */

/* Validate the collection at path and open it: it must hold n_records
 * records and n_frames frames, molrec_version 2. */
static zmr_reader *open_valid(const char *path, uint64_t n_records, uint64_t n_frames)
{
    OK(zmr_validate(path, 0));
    zmr_reader *r;
    OK(zmr_open(&r, path, 0));
    assert_int_equal(zmr_n_records(r), n_records);
    assert_int_equal(zmr_n_frames(r), n_frames);
    assert_int_equal(zmr_molrec_version(r), 2);
    return r;
}

/* Record rec of r: its first frame, frame and atom counts, trajectory flag. */
static void expect_record(zmr_reader *r, uint64_t rec, uint64_t first, uint64_t n_frames, uint64_t n_atoms,
                          bool has_trajectory)
{
    uint64_t ff, nf, na;
    bool ht;
    OK(zmr_record_info(r, rec, &ff, &nf, &na, &ht));
    if (ff != first || nf != n_frames || na != n_atoms || ht != has_trajectory)
        fail_msg("record %llu: first frame %llu, %llu frames, %llu atoms, trajectory %d; expected %llu, %llu, %llu, %d",
                 (unsigned long long)rec, (unsigned long long)ff, (unsigned long long)nf, (unsigned long long)na,
                 (int)ht, (unsigned long long)first, (unsigned long long)n_frames, (unsigned long long)n_atoms,
                 (int)has_trajectory);
}

/* ------------------------------------------------------------ builders */

static zmr_frame *atoms_frame(zmr_frame_kind kind, uint64_t n, double shift)
{
    zmr_frame *f;
    OK(zmr_frame_create(&f, kind));
    OK(zmr_frame_add_block(f, "atoms", n));
    double *x = calloc(n * 3 + 1, sizeof *x);
    for (uint64_t k = 0; k < n * 3; k++)
        x[k] = (double)k * 0.5 + shift;
    uint64_t shape[2] = {n, 3};
    OK(zmr_frame_add_column(f, "atoms", "position", ZMR_F64, shape, 2, x, n * 24, NULL, 0));
    free(x);
    return f;
}

/* A collection: record 0 (system + 3 frames), record 1 (system only),
 * record 2 (2 frames, no system). */
static void write_collection(const char *path)
{
    zmr_writer *w;
    OK(zmr_writer_create(&w, path, "{\"units\":{\"length\":\"angstrom\",\"energy\":\"eV\"}}",
                         "{\"blocks\":{\"atoms\":{\"columns\":{\"position\":{\"dtype\":\"f64\","
                         "\"precision\":0.001}}}},\"meta\":{\"energy\":{\"type\":\"f64\",\"fill\":\"NaN\"},"
                         "\"n\":\"u64\"}}"));
    zmr_frame *sys;
    OK(zmr_frame_create(&sys, ZMR_FRAME_SYSTEM));
    OK(zmr_frame_add_block(sys, "atoms", 3));
    uint64_t s3[1] = {3}, s2[1] = {2};
    OK(zmr_frame_add_string_column(sys, "atoms", "element", s3, 1, "[\"O\",\"H\",\"H\"]", NULL));
    OK(zmr_frame_add_block(sys, "bonds", 2));
    uint64_t ai[2] = {0, 0}, aj[2] = {1, 2};
    OK(zmr_frame_add_column(sys, "bonds", "atomi", ZMR_U64, s2, 1, ai, 16, NULL, 0));
    OK(zmr_frame_add_column(sys, "bonds", "atomj", ZMR_U64, s2, 1, aj, 16, NULL, 0));
    OK(zmr_frame_set_block_json(sys, "bonds", "targets", "{\"atomi\":\"atoms\",\"atomj\":\"/system/atoms\"}"));
    OK(zmr_frame_set_meta(sys, "charge", ZMR_TAG_I32, "0"));
    uint64_t idx;
    OK(zmr_writer_begin_record(w, "{\"name\":\"water\"}", sys, &idx));
    assert_int_equal(idx, 0);
    for (int k = 0; k < 3; k++) {
        zmr_frame *u = atoms_frame(ZMR_FRAME_UPDATE, 3, k == 2 ? 1.0 : 0.0);
        OK(zmr_frame_add_block(u, "extra", k == 2 ? 0 : 1));
        if (k < 2) {
            int32_t e = k;
            uint64_t one[1] = {1};
            OK(zmr_frame_add_column(u, "extra", "v", ZMR_I32, one, 1, &e, 4, NULL, 0));
        }
        if (k == 0)
            OK(zmr_frame_set_meta(u, "energy", ZMR_TAG_F64, "-1.5"));
        OK(zmr_frame_set_meta(u, "n", ZMR_TAG_U64, "18446744073709551615"));
        OK(zmr_writer_add_frame(w, u));
        zmr_frame_free(u);
    }
    OK(zmr_writer_begin_record(w, NULL, sys, &idx));
    zmr_frame_free(sys);
    OK(zmr_writer_begin_record(w, "{}", NULL, &idx));
    for (int k = 0; k < 2; k++) {
        zmr_frame *u = atoms_frame(ZMR_FRAME_UPDATE, 2, 0.25);
        OK(zmr_frame_set_meta(u, "n", ZMR_TAG_U64, "1"));
        OK(zmr_frame_set_step(u, 100 + k));
        OK(zmr_writer_add_frame(w, u));
        zmr_frame_free(u);
    }
    OK(zmr_writer_commit(w));
}

/* ------------------------------------------------------------ tests */

static void test_names(void **state)
{
    (void)state;
    zmr_dtype d;
    assert_int_equal(zmr_dtype_parse("f32", &d), ZMR_EINVAL);
    HAS("f64 only");
    assert_int_equal(zmr_dtype_parse("f16", &d), ZMR_EINVAL);
    for (int k = 0; k < ZMR_NDTYPES; k++) {
        OK(zmr_dtype_parse(zmr_dtype_name(k), &d));
        assert_int_equal(d, k);
    }
    zmr_tag t;
    for (int k = 0; k < ZMR_NTAGS; k++) {
        OK(zmr_tag_parse(zmr_tag_name(k), &t));
        assert_int_equal(t, k);
    }
    assert_string_equal(zmrec_version(), "0.1.0");
    assert_int_equal(ZMR_ECORRUPT, -8);
}

static void test_typed_json(void **state)
{
    (void)state;
    OK(zmr_typed_json_check(ZMR_TAG_F64, "\"NaN\""));
    OK(zmr_typed_json_check(ZMR_TAG_F64, "\"-Infinity\""));
    OK(zmr_typed_json_check(ZMR_TAG_F64, "3"));
    assert_int_equal(zmr_typed_json_check(ZMR_TAG_F64, "NaN"), ZMR_EINVAL);
    assert_int_equal(zmr_typed_json_check(ZMR_TAG_F64, "null"), ZMR_EINVAL);
    HAS("null");
    assert_int_equal(zmr_typed_json_check(ZMR_TAG_F64, "1e400"), ZMR_EINVAL);
    assert_int_equal(zmr_typed_json_check(ZMR_TAG_I64, "1.0"), ZMR_EINVAL);
    HAS("refused, not rounded");
    OK(zmr_typed_json_check(ZMR_TAG_I64, "9007199254740993"));
    OK(zmr_typed_json_check(ZMR_TAG_I64, "\"-9223372036854775808\""));
    assert_int_equal(zmr_typed_json_check(ZMR_TAG_I64, "9223372036854775808"), ZMR_EINVAL);
    OK(zmr_typed_json_check(ZMR_TAG_U64, "18446744073709551615"));
    assert_int_equal(zmr_typed_json_check(ZMR_TAG_U64, "18446744073709551616"), ZMR_EINVAL);
    assert_int_equal(zmr_typed_json_check(ZMR_TAG_U64, "-1"), ZMR_EINVAL);
    assert_int_equal(zmr_typed_json_check(ZMR_TAG_I32, "2147483648"), ZMR_EINVAL);
    OK(zmr_typed_json_check(ZMR_TAG_U32, "4294967295"));
    OK(zmr_typed_json_check(ZMR_TAG_BOOL3, "[true,false,true]"));
    assert_int_equal(zmr_typed_json_check(ZMR_TAG_BOOL3, "[true,false]"), ZMR_EINVAL);
    OK(zmr_typed_json_check(ZMR_TAG_F64X9, "[1,2,3,4,5,6,7,8,\"NaN\"]"));
    assert_int_equal(zmr_typed_json_check(ZMR_TAG_F64X6, "[1,2,3,4,5,null]"), ZMR_EINVAL);
    assert_int_equal(zmr_typed_json_check(ZMR_TAG_STRING, "1"), ZMR_EINVAL);
    OK(zmr_typed_json_check(ZMR_TAG_JSON, "{\"a\":[1,null]}"));
    /* decimal strings: JSON's integer grammar only (docs/MREC.md) */
    OK(zmr_typed_json_check(ZMR_TAG_U64, "\"5\""));
    OK(zmr_typed_json_check(ZMR_TAG_U64, "\"0\""));
    OK(zmr_typed_json_check(ZMR_TAG_U64, "\"18446744073709551615\""));
    OK(zmr_typed_json_check(ZMR_TAG_I64X3, "[\"-9223372036854775808\",\"0\",\"-5\"]"));
    static const char *const noncanon[] = {"\"0005\"", "\"00\"", "\"-007\"", "\"+5\"", "\" 5\"", "\"5 \"",
                                           "\"\"", "\"-\"", "\"5.0\"", "\"5e3\"", "\"0x10\""};
    for (size_t k = 0; k < sizeof noncanon / sizeof *noncanon; k++) {
        assert_int_equal(zmr_typed_json_check(ZMR_TAG_I64, noncanon[k]), ZMR_EINVAL);
        HAS("canonical decimal string");
    }

    /* C values round trip through a frame, every tag */
    zmr_frame *f;
    OK(zmr_frame_create(&f, ZMR_FRAME_SYSTEM));
    for (int t = 0; t < ZMR_NTAGS; t++) {
        zmr_value v = {.tag = (zmr_tag)t};
        for (int k = 0; k < 9; k++) {
            v.b[k] = k & 1;
            v.i[k] = k % 2 ? -(int64_t)k * 1000000007LL : INT64_MIN + k;
            v.u[k] = UINT64_MAX - (uint64_t)k;
            v.f[k] = k == 4 ? NAN : (k == 5 ? -INFINITY : 0.1 * k);
        }
        if (t == ZMR_TAG_I32 || t == ZMR_TAG_I32X3)
            for (int k = 0; k < 9; k++)
                v.i[k] = INT32_MIN + k;
        if (t == ZMR_TAG_U32 || t == ZMR_TAG_U32X3)
            for (int k = 0; k < 9; k++)
                v.u[k] = UINT32_MAX - (uint64_t)k;
        v.text = t == ZMR_TAG_JSON ? "{\"k\":[1,2]}" : "héllo";
        char key[16];
        snprintf(key, sizeof key, "k%d", t);
        OK(zmr_frame_set_meta_value(f, key, &v));
    }
    void *bytes;
    size_t n;
    OK(zmr_frame_encode(f, &bytes, &n));
    zmr_frame *g;
    OK(zmr_frame_decode(&g, bytes, n, ZMR_FRAME_SYSTEM, "s/0"));
    for (int t = 0; t < ZMR_NTAGS; t++) {
        char key[16];
        snprintf(key, sizeof key, "k%d", t);
        zmr_value a, b;
        OK(zmr_frame_get_meta(f, key, &a));
        OK(zmr_frame_get_meta(g, key, &b));
        assert_int_equal(a.tag, t);
        assert_int_equal(b.tag, t);
        assert_int_equal(a.n, b.n);
        assert_memory_equal(a.b, b.b, sizeof a.b);
        assert_memory_equal(a.i, b.i, sizeof a.i);
        assert_memory_equal(a.u, b.u, sizeof a.u);
        for (int k = 0; k < 9; k++)
            assert_true(a.f[k] == b.f[k] || (isnan(a.f[k]) && isnan(b.f[k])));
        if (a.text)
            assert_string_equal(a.text, b.text);
    }
    zmr_value v;
    OK(zmr_frame_get_meta(g, "k4", &v)); /* u64 */
    assert_int_equal(v.u[0], UINT64_MAX);
    assert_non_null(strstr(zmr_frame_header_json(g), "\"k4\":\"18446744073709551615\""));
    assert_non_null(strstr(zmr_frame_header_json(g), "\"k5\":0.0"));
    free(bytes);
    zmr_frame_free(f);
    zmr_frame_free(g);
}

static void test_precision(void **state)
{
    (void)state;
    /* p = 0.5 = 0.5 * 2^0 -> q = 2^-1: ties go to even multiples */
    assert_true(zmr_round_precision(0.25, 0.5) == 0.0);  /* round() would give 0.5 */
    assert_true(zmr_round_precision(0.75, 0.5) == 1.0);
    assert_true(zmr_round_precision(-0.25, 0.5) == 0.0);
    assert_true(zmr_round_precision(1.25, 0.5) == 1.0);
    assert_true(zmr_round_precision(0.3, 0.5) == 0.5);
    /* p = 0.001: q = 2^-10 */
    assert_true(zmr_round_precision(1.0 + 0x1p-11, 0.001) == 1.0);
    assert_true(zmr_round_precision(1.0 + 3 * 0x1p-11, 0.001) == 1.0 + 0x1p-9);
    assert_true(isnan(zmr_round_precision(NAN, 0.5)));
    assert_true(isinf(zmr_round_precision(INFINITY, 0.5)));
    double big = 0x1p52 * 0.5 + 0.25; /* |x| >= 2^52 q: unchanged */
    assert_true(zmr_round_precision(big, 0.5) == big);

    zmr_frame *f;
    OK(zmr_frame_create(&f, ZMR_FRAME_SYSTEM));
    OK(zmr_frame_add_block(f, "a", 2));
    double x[2] = {0.25, 0.75};
    uint64_t s[1] = {2};
    assert_int_equal(zmr_frame_add_column(f, "a", "x", ZMR_F64, s, 1, x, 16, NULL, 0x1p-1001), ZMR_EINVAL);
    assert_int_equal(zmr_frame_add_column(f, "a", "x", ZMR_F64, s, 1, x, 16, NULL, 0x1p1001), ZMR_EINVAL);
    OK(zmr_frame_add_column(f, "a", "x", ZMR_F64, s, 1, x, 16, NULL, 0.5));
    zmr_column c;
    OK(zmr_frame_find_column(f, "a", "x", &c));
    assert_true(((const double *)c.data)[0] == 0.0 && ((const double *)c.data)[1] == 1.0);
    assert_non_null(strstr(zmr_frame_header_json(f), "\"precision\":0.5"));
    zmr_frame_free(f);
    OK(zmr_frame_create(&f, ZMR_FRAME_UPDATE));
    OK(zmr_frame_add_block(f, "a", 2));
    assert_int_equal(zmr_frame_add_column(f, "a", "x", ZMR_F64, s, 1, x, 16, NULL, 0.5), ZMR_EINVAL);
    HAS("sequence_schema");
    zmr_frame_free(f);
}

static const char EXACT_HDR[] =
    "{\"blocks\":{\"atoms\":{\"count\":2,\"structural_shape\":null,\"columns\":{"
    "\"x\":{\"dtype\":\"f64\",\"shape\":[2],\"offset\":0},"
    "\"element\":{\"dtype\":\"string\",\"shape\":[2],\"values\":[\"C\",\"H\"]},"
    "\"q\":{\"dtype\":\"i32\",\"shape\":[2],\"offset\":16,\"validity\":24}}}},"
    "\"meta\":{\"pe\":-1.25},\"meta_types\":{\"pe\":\"f64\"}}";

/* An MRF1 frame in buf: magic, header length, `hdr`, then `payload` zero
 * bytes from the next 8-byte boundary. Returns the frame's size. */
static size_t with_header(unsigned char *buf, const char *hdr, size_t payload)
{
    size_t h = strlen(hdr), start = (8 + h + 7) / 8 * 8;
    memset(buf, 0, start + payload);
    memcpy(buf, "MRF1", 4);
    buf[4] = (unsigned char)h;
    buf[5] = (unsigned char)(h >> 8);
    memcpy(buf + 8, hdr, h);
    return start + payload;
}

static size_t exact_frame(unsigned char *buf)
{
    size_t start = with_header(buf, EXACT_HDR, 32) - 32;
    double x[2] = {1.5, -2.0};
    int32_t q[2] = {7, -1};
    memcpy(buf + start, x, 16);
    memcpy(buf + start + 16, q, 8);
    buf[start + 24] = 1; /* validity: row 0 valid, row 1 null */
    return start + 32;
}

static void test_byte_exact(void **state)
{
    (void)state;
    unsigned char want[1024];
    size_t wn = exact_frame(want);
    zmr_frame *f;
    OK(zmr_frame_create(&f, ZMR_FRAME_SYSTEM));
    OK(zmr_frame_add_block(f, "atoms", 2));
    double x[2] = {1.5, -2.0};
    int32_t q[2] = {7, -1};
    uint8_t valid[2] = {1, 0};
    uint64_t s[1] = {2};
    OK(zmr_frame_add_column(f, "atoms", "x", ZMR_F64, s, 1, x, 16, NULL, 0));
    OK(zmr_frame_add_string_column(f, "atoms", "element", s, 1, "[\"C\",\"H\"]", NULL));
    OK(zmr_frame_add_column(f, "atoms", "q", ZMR_I32, s, 1, q, 8, valid, 0));
    OK(zmr_frame_set_meta(f, "pe", ZMR_TAG_F64, "-1.25"));
    void *got;
    size_t gn;
    OK(zmr_frame_encode(f, &got, &gn));
    assert_int_equal(gn, wn);
    assert_memory_equal(got, want, wn);
    zmr_free(got);
    zmr_frame_free(f);
    /* and it decodes from an odd address (LMDB values are not aligned) */
    unsigned char *odd = malloc(wn + 1);
    memcpy(odd + 1, want, wn);
    OK(zmr_frame_decode(&f, odd + 1, wn, ZMR_FRAME_SYSTEM, "s/0"));
    zmr_column c;
    OK(zmr_frame_find_column(f, "atoms", "q", &c));
    assert_int_equal(((const int32_t *)c.data)[0], 7);
    assert_int_equal(c.validity[1], 0);
    OK(zmr_frame_find_column(f, "atoms", "element", &c));
    assert_string_equal(c.strings[1], "H");
    zmr_frame_free(f);
    free(odd);
}

/* Decode `v` after `edit` and expect ECORRUPT with `msg` in the detail. */
static void expect_bad(const unsigned char *v, size_t n, const char *msg)
{
    zmr_frame *f = NULL;
    int st = zmr_frame_decode(&f, v, n, ZMR_FRAME_SYSTEM, "s/9");
    if (st != ZMR_ECORRUPT) {
        zmr_frame_free(f);
        fail_msg("expected a refusal with '%s', got status %d", msg, st);
    }
    assert_null(f);
    HAS(msg);
    HAS("s/9");
}

/* A frame of header `hdr` and `payload` zero bytes (see with_header) must
 * be refused with `msg`. */
static void bad_header(const char *hdr, size_t payload, const char *msg)
{
    unsigned char v[2048];
    expect_bad(v, with_header(v, hdr, payload), msg);
}

static void test_frame_refusals(void **state)
{
    (void)state;
    unsigned char v[2048];
    size_t n = exact_frame(v);
    v[0] = 'X';
    expect_bad(v, n, "magic");
    n = exact_frame(v);
    expect_bad(v, 5, "magic");
    v[5] = 0x40; /* header length past the value */
    expect_bad(v, n, "header length");
    n = exact_frame(v);
    expect_bad(v, n - 8, "runs past"); /* validity buffer cut */
    expect_bad(v, n - 16, "runs past"); /* q buffer cut */
#define HDR(cols) "{\"blocks\":{\"a\":{\"count\":1,\"columns\":{" cols "}}},\"meta\":{},\"meta_types\":{}}"
    bad_header(HDR("\"x\":{\"dtype\":\"f32\",\"shape\":[1],\"offset\":0}"), 8, "outside the closed set");
    bad_header(HDR("\"x\":{\"dtype\":\"f16\",\"shape\":[1],\"offset\":0}"), 8, "outside the closed set");
    bad_header(HDR("\"x\":{\"dtype\":\"f64\",\"shape\":[1],\"offset\":4}"), 16, "not a multiple of 8");
    bad_header(HDR("\"x\":{\"dtype\":\"f64\",\"shape\":[1],\"offset\":8}"), 8, "runs past");
    bad_header(HDR("\"x\":{\"dtype\":\"f64\",\"shape\":[2],\"offset\":0}"), 16, "block count");
    n = with_header(v, HDR("\"x\":{\"dtype\":\"bool\",\"shape\":[1],\"offset\":0}"), 8);
    v[n - 8] = 2;
    expect_bad(v, n, "not 0/1");
    bad_header(HDR("\"x\":{\"dtype\":\"f64\",\"shape\":[1],\"offset\":0,\"validity\":12}"), 24, "not a multiple of 8");
    bad_header(HDR("\"x\":{\"dtype\":\"f64\",\"shape\":[1],\"offset\":0,\"validity\":8}"), 8, "runs past");
    n = with_header(v, HDR("\"x\":{\"dtype\":\"f64\",\"shape\":[1],\"offset\":0,\"precision\":0.5}"), 8);
    memcpy(v + n - 8, &(double){0.3}, 8);
    {
        /* off its precision grid: read as stored (readers neither re-round
         * nor refuse; zmr_validate reports it, test_validate_rules) */
        zmr_frame *off = NULL;
        zmr_column c;
        OK(zmr_frame_decode(&off, v, n, ZMR_FRAME_SYSTEM, "s/9"));
        OK(zmr_frame_find_column(off, "a", "x", &c));
        assert_true(((const double *)c.data)[0] == 0.3 && c.precision == 0.5);
        zmr_frame_free(off);
    }
    bad_header(HDR("\"x\":{\"dtype\":\"string\",\"shape\":[1],\"values\":[null]}"), 0, "no validity");
    n = with_header(v, HDR("\"x\":{\"dtype\":\"i64\",\"shape\":[1],\"offset\":0}"), 8);
    {
        zmr_frame *okf = NULL;
        int st = zmr_frame_decode(&okf, v, n, ZMR_FRAME_SYSTEM, "ok");
        if (st != ZMR_OK)
            fail_msg("%s", zmr_last_error());
        zmr_frame_free(okf);
    }
    bad_header("{\"blocks\":{},\"meta\":{\"e\":NaN},\"meta_types\":{}}", 0, "NaN");
    bad_header("{\"blocks\":{},\"meta\":{\"e\":1.5},\"meta_types\":{\"e\":\"i64\"}}", 0, "not rounded");
    bad_header("{\"blocks\":{},\"meta\":{\"e\":null},\"meta_types\":{\"e\":\"f64\"}}", 0, "null");
    bad_header("{\"blocks\":{},\"meta\":{}}", 0, "meta_types");
    bad_header("{\"blocks\":{},\"meta\":{},\"meta_types\":{},\"step\":3}", 0, "trajectory updates");
    bad_header("{\"blocks\":{},\"meta\":{},\"meta_types\":{}}{}", 0, "not strict");
    n = with_header(v, "{\"blocks\":{\"a\":{\"count\":1,\"columns\":{\"i\":{\"dtype\":\"u64\",\"shape\":[1],"
                       "\"offset\":0}},\"targets\":{\"i\":\"b\"}},\"b\":{\"count\":2,\"columns\":{}}},"
                       "\"meta\":{},\"meta_types\":{}}", 8);
    v[n - 8] = 2; /* reference 2 into a block of 2 rows */
    expect_bad(v, n, "row reference");
    bad_header("{\"blocks\":{\"a\":{\"count\":1,\"columns\":{\"i\":{\"dtype\":\"i64\",\"shape\":[1],"
               "\"offset\":0}},\"targets\":{\"i\":\"a\"}}},\"meta\":{},\"meta_types\":{}}", 8, "u64");
}

static void test_roundtrip(void **state)
{
    fixture *fx = *state;
    write_collection(fx->path);
    zmr_reader *r = open_valid(fx->path, 3, 5);
    expect_record(r, 0, 0, 3, 3, true);
    expect_record(r, 1, 3, 0, 3, false);
    expect_record(r, 2, 3, 2, 2, true);
    uint64_t ff, nf, na;
    bool ht;
    assert_int_equal(zmr_record_info(r, 3, &ff, &nf, &na, &ht), ZMR_ERANGE);
    char *meta;
    OK(zmr_read_record_meta(r, 0, &meta));
    assert_string_equal(meta, "{\"name\":\"water\"}");
    zmr_free(meta);

    /* stored updates: frame 1 restates nothing but extra; frame 2 empties extra */
    zmr_frame *u;
    OK(zmr_read_update(r, 0, 1, &u));
    assert_int_equal(zmr_frame_nblocks(u), 1);
    assert_string_equal(zmr_frame_block_name(u, 0), "extra");
    zmr_value v;
    OK(zmr_frame_get_meta(u, "energy", &v)); /* fill materialized */
    assert_true(v.tag == ZMR_TAG_F64 && isnan(v.f[0]));
    OK(zmr_frame_get_meta(u, "n", &v));
    assert_true(v.tag == ZMR_TAG_U64 && v.u[0] == UINT64_MAX);
    int64_t step;
    assert_true(zmr_frame_get_step(u, &step) && step == 1);
    zmr_frame_free(u);
    OK(zmr_read_update(r, 0, 2, &u));
    assert_int_equal(zmr_frame_nblocks(u), 2);
    zmr_frame_free(u);

    zmr_frame *f;
    OK(zmr_read_frame(r, 0, 1, &f));
    zmr_column c;
    OK(zmr_frame_find_column(f, "atoms", "position", &c));
    assert_true(((const double *)c.data)[1] == 0.5); /* carried from frame 0 */
    OK(zmr_frame_find_column(f, "extra", "v", &c));
    assert_int_equal(((const int32_t *)c.data)[0], 1);
    zmr_frame_free(f);
    OK(zmr_read_frame(r, 0, 2, &f));
    size_t b;
    OK(zmr_frame_find_block(f, "extra", &b));
    assert_int_equal(zmr_frame_block_count(f, b), 0);
    /* the emptying update carries the declared columns with zero rows */
    assert_int_equal(zmr_frame_ncolumns(f, b), 1);
    OK(zmr_frame_find_column(f, "extra", "v", &c));
    assert_true(c.dtype == ZMR_I32 && c.shape[0] == 0 && c.nbytes == 0);
    OK(zmr_frame_find_column(f, "atoms", "position", &c));
    assert_true(((const double *)c.data)[0] == 1.0);
    zmr_frame_free(f);
    /* record 2 never sees record 0's extra block */
    OK(zmr_read_frame(r, 2, 1, &f));
    assert_int_equal(zmr_frame_find_block(f, "extra", &b), ZMR_ERANGE);
    OK(zmr_frame_find_column(f, "atoms", "position", &c));
    assert_true(fabs(((const double *)c.data)[0] - 0.25) < 1e-3); /* rounded to 2^-10 */
    assert_true(((const double *)c.data)[0] == 0.25);
    assert_true(zmr_frame_get_step(f, &step) && step == 101);
    zmr_frame_free(f);
    assert_int_equal(zmr_read_frame(r, 1, 0, &f), ZMR_ERANGE);
    OK(zmr_read_system(r, 2, &f));
    assert_null(f);
    OK(zmr_read_system(r, 0, &f));
    OK(zmr_frame_get_meta(f, "charge", &v));
    assert_true(v.tag == ZMR_TAG_I32 && v.i[0] == 0);
    zmr_frame_free(f);
    zmr_close(r);
    /* NOLOCK opens too */
    OK(zmr_open(&r, fx->path, ZMR_OPEN_NOLOCK));
    zmr_close(r);
    /* create refuses an existing path */
    zmr_writer *w;
    assert_int_equal(zmr_writer_create(&w, fx->path, NULL, NULL), ZMR_EEXIST);
}

static void test_writer_refusals(void **state)
{
    fixture *fx = *state;
    zmr_writer *w;
    assert_int_equal(zmr_writer_create(&w, fx->path, NULL, "{\"meta\":{\"e\":\"f32\"}}"), ZMR_EINVAL);
    OK(zmr_writer_create(&w, fx->path, NULL, "{\"meta\":{\"e\":\"f64\"}}"));
    zmr_frame *u = atoms_frame(ZMR_FRAME_UPDATE, 1, 0);
    assert_int_equal(zmr_writer_add_frame(w, u), ZMR_ESTATE); /* no record */
    OK(zmr_writer_begin_record(w, NULL, NULL, NULL));
    assert_int_equal(zmr_writer_add_frame(w, u), ZMR_EINVAL); /* e declared, no fill */
    HAS("no fill");
    OK(zmr_frame_set_meta(u, "x", ZMR_TAG_F64, "1"));
    assert_int_equal(zmr_writer_add_frame(w, u), ZMR_EINVAL);
    HAS("not declared");
    assert_int_equal(zmr_writer_begin_record(w, "[1]", NULL, NULL), ZMR_EINVAL);
    zmr_frame_free(u);
    zmr_writer_abort(w);
    /* an aborted file is not a collection */
    zmr_reader *r;
    assert_int_equal(zmr_open(&r, fx->path, 0), ZMR_ENOTCOLL);
    HAS("\"meta\" is missing");
}

static void test_map_growth(void **state)
{
    fixture *fx = *state;
    zmr_writer *w;
    OK(zmr_writer_create(&w, fx->path, NULL, NULL));
    OK(zmr_writer_begin_record(w, NULL, NULL, NULL));
    for (int k = 0; k < 12; k++) { /* 12 x 8 MiB > the initial 64 MiB map */
        zmr_frame *u = atoms_frame(ZMR_FRAME_UPDATE, 350000, k);
        OK(zmr_writer_add_frame(w, u));
        zmr_frame_free(u);
    }
    OK(zmr_writer_commit(w));
    zmr_reader *r;
    OK(zmr_open(&r, fx->path, 0));
    assert_int_equal(zmr_n_frames(r), 12);
    zmr_frame *f;
    OK(zmr_read_frame(r, 0, 11, &f));
    zmr_column c;
    OK(zmr_frame_find_column(f, "atoms", "position", &c));
    assert_true(((const double *)c.data)[0] == 11.0);
    zmr_frame_free(f);
    zmr_close(r);
}

/* Rewrite "meta" with `text` and expect open to fail with st / msg. */
static void meta_case(const char *path, const char *text, int st, const char *msg)
{
    raw_put(path, "meta", 4, text, strlen(text));
    zmr_reader *r = NULL;
    assert_int_equal(zmr_open(&r, path, 0), st);
    HAS(msg);
    zmr_close(r);
}

static void test_file_refusals(void **state)
{
    fixture *fx = *state;
    write_collection(fx->path);
    size_t mlen, ilen;
    char *meta = raw_get(fx->path, "meta", 4, &mlen);
    unsigned char *index = raw_get(fx->path, "index", 5, &ilen);
    char good[4096];
    memcpy(good, meta, mlen);
    good[mlen] = '\0';
    /* "meta" with `from` replaced by `to`: open gives st with msg */
    static const struct {
        const char *from, *to;
        int st;
        const char *msg;
    } subs[] = {
        {"\"layout_version\":1", "\"layout_version\":2", ZMR_EUNSUPPORTED, "layout_version"},
        {"\"layout_version\":1", "\"layout_version\":1.0", ZMR_ECORRUPT, "layout_version"},
        {"\"layout_version\":1,", "", ZMR_ECORRUPT, "layout_version is required"},
        {"\"molrec_version\":2", "\"molrec_version\":3", ZMR_EUNSUPPORTED, "molrec_version 3"},
        {"\"molrec_version\":2", "\"molrec_version\":null", ZMR_ECORRUPT, "never null"},
        {"\"molrec_version\":2", "\"molrec_version\":1", ZMR_OK, ""},
        {"\"layout\":\"mrec-lmdb\"", "\"layout\":\"zarr\"", ZMR_ENOTCOLL, "layout"},
        {"\"n_frames\":5", "\"n_frames\":6", ZMR_ECORRUPT, "n_frames 6"},
        {"\"n_records\":3", "\"n_records\":2", ZMR_ECORRUPT, "count 3 != n_records 2"},
    };
    char buf[4096];
    for (size_t k = 0; k < sizeof subs / sizeof *subs; k++) {
        char *p = strstr(good, subs[k].from);
        assert_non_null(p);
        snprintf(buf, sizeof buf, "%.*s%s%s", (int)(p - good), good, subs[k].to, p + strlen(subs[k].from));
        meta_case(fx->path, buf, subs[k].st, subs[k].msg);
    }
    meta_case(fx->path, "{\"layout\":\"mrec-lmdb\",", ZMR_ECORRUPT, "not strict");
    raw_put(fx->path, "meta", 4, meta, mlen);

    /* index: break the prefix sum (first_frame[1] lives at payload + 8) */
    zmr_frame *idx;
    OK(zmr_frame_decode(&idx, index, ilen, ZMR_FRAME_INDEX, "index"));
    zmr_frame_free(idx);
    size_t payload = ilen - 3 * 24 - 8; /* 3 u64 columns of 3 + bool column padded */
    unsigned char *bad = malloc(ilen);
    memcpy(bad, index, ilen);
    bad[payload + 8] ^= 1;
    raw_put(fx->path, "index", 5, bad, ilen);
    zmr_reader *r;
    assert_int_equal(zmr_open(&r, fx->path, 0), ZMR_ECORRUPT);
    HAS("prefix sum");
    HAS("index");
    memcpy(bad, index, ilen);
    bad[ilen - 8 + 1] = 1; /* has_trajectory[1] = 1 is fine; n_atoms off by one is not */
    bad[payload + 48] ^= 1;
    raw_put(fx->path, "index", 5, bad, ilen);
    assert_int_equal(zmr_validate(fx->path, 0), ZMR_ECORRUPT);
    HAS("n_atoms");
    raw_put(fx->path, "index", 5, index, ilen);
    OK(zmr_validate(fx->path, 0));

    /* a missing f key in range, a stray key, an undecodable frame */
    unsigned char k[9];
    size_t flen;
    fkey(k, 'f', 4);
    void *f4 = raw_get(fx->path, k, 9, &flen);
    raw_put(fx->path, k, 9, NULL, 0);
    assert_int_equal(zmr_validate(fx->path, 0), ZMR_ECORRUPT);
    OK(zmr_open(&r, fx->path, 0));
    zmr_frame *f;
    assert_int_equal(zmr_read_frame(r, 2, 1, &f), ZMR_ECORRUPT);
    HAS("f/4: key missing");
    zmr_close(r);
    raw_put(fx->path, k, 9, f4, flen);
    fkey(k, 'f', 5);
    raw_put(fx->path, k, 9, f4, flen);
    assert_int_equal(zmr_validate(fx->path, 0), ZMR_ECORRUPT);
    HAS("beyond");
    raw_put(fx->path, k, 9, NULL, 0);
    raw_put(fx->path, "zzz", 3, "x", 1);
    assert_int_equal(zmr_validate(fx->path, 0), ZMR_ECORRUPT);
    HAS("not part of the mrec-lmdb layout");
    raw_put(fx->path, "zzz", 3, NULL, 0);
    fkey(k, 'r', 1);
    raw_put(fx->path, k, 9, "[]", 2);
    assert_int_equal(zmr_validate(fx->path, 0), ZMR_ECORRUPT);
    HAS("r/1");
    raw_put(fx->path, k, 9, "{}", 2);
    fkey(k, 'f', 0);
    raw_put(fx->path, k, 9, "MRF1", 4);
    assert_int_equal(zmr_validate(fx->path, 0), ZMR_ECORRUPT);
    HAS("f/0");
    free(f4);
    free(bad);
    free(meta);
    free(index);
}

/* Knuth's MMIX LCG step: advances *s and returns it (the fuzz schedule). */
static uint64_t lcg_next(uint64_t *s)
{
    return *s = *s * 6364136223846793005ull + 1442695040888963407ull;
}

static void test_fuzz(void **state)
{
    fixture *fx = *state;
    unsigned char v[1024], w[1024];
    size_t n = exact_frame(v);
    uint64_t seed = 0x9E3779B97F4A7C15ull;
    int ok = 0;
    for (int it = 0; it < 20000; it++) {
        memcpy(w, v, n);
        lcg_next(&seed);
        int flips = 1 + (int)((seed >> 33) % 4);
        for (int k = 0; k < flips; k++) {
            lcg_next(&seed);
            w[(seed >> 33) % n] = (unsigned char)(seed >> 20);
        }
        size_t len = (seed >> 40) % 8 == 0 ? (size_t)((seed >> 12) % (n + 1)) : n;
        zmr_frame *f = NULL;
        int st = zmr_frame_decode(&f, w, len, (zmr_frame_kind)(it % 4), "fuzz");
        assert_true(st == ZMR_OK || st == ZMR_ECORRUPT || st == ZMR_ENOMEM);
        if (st == ZMR_OK) {
            ok++;
            (void)zmr_frame_header_json(f);
        }
        zmr_frame_free(f);
    }
    assert_true(ok > 0); /* some flips land in payload bytes */
    /* whole-file corruptions: random bytes in stored values */
    write_collection(fx->path);
    const char *keys[] = {"meta", "index"};
    for (int it = 0; it < 150; it++) {
        unsigned char kb[9];
        const void *key;
        size_t klen;
        if (it % 3 == 2) {
            fkey(kb, 'f', (uint64_t)(it % 5));
            key = kb, klen = 9;
        } else {
            key = keys[it % 2], klen = strlen(keys[it % 2]);
        }
        size_t vlen;
        unsigned char *orig = raw_get(fx->path, key, klen, &vlen);
        unsigned char *bad = malloc(vlen);
        memcpy(bad, orig, vlen);
        lcg_next(&seed);
        bad[(seed >> 33) % vlen] ^= (unsigned char)(1u << ((seed >> 20) % 8));
        raw_put(fx->path, key, klen, bad, vlen);
        int st = zmr_validate(fx->path, 0);
        assert_true(st == ZMR_OK || st == ZMR_ECORRUPT || st == ZMR_ENOTCOLL || st == ZMR_EUNSUPPORTED);
        raw_put(fx->path, key, klen, orig, vlen);
        free(orig);
        free(bad);
    }
    OK(zmr_validate(fx->path, 0));
}


/* ------------------------------------------------ LMDB file-level checks */

/* Copy the first n bytes of src to dst (a fresh file). */
static void copy_prefix(const char *src, const char *dst, long n)
{
    FILE *in = fopen(src, "rb"), *out = fopen(dst, "wb");
    assert_non_null(in);
    assert_non_null(out);
    char buf[4096];
    long left = n;
    while (left > 0) {
        size_t want = left < (long)sizeof buf ? (size_t)left : sizeof buf;
        size_t got = fread(buf, 1, want, in);
        assert_int_equal(got, want);
        assert_int_equal(fwrite(buf, 1, got, out), got);
        left -= (long)got;
    }
    fclose(in);
    assert_int_equal(fclose(out), 0);
}

/* A truncated file is refused before LMDB maps it (a read of a page past
 * the end would be SIGBUS), at every size. */
static void test_truncated(void **state)
{
    fixture *fx = *state;
    /* several records of 4000 atoms: overflow pages well past page 2 */
    zmr_writer *w;
    OK(zmr_writer_create(&w, fx->path, NULL, NULL));
    for (int k = 0; k < 4; k++) {
        zmr_frame *sys = atoms_frame(ZMR_FRAME_SYSTEM, 4000, k);
        uint64_t idx;
        OK(zmr_writer_begin_record(w, NULL, sys, &idx));
        zmr_frame_free(sys);
    }
    OK(zmr_writer_commit(w));
    /* The bytes LMDB's pages need: the file itself on POSIX; on Windows
     * LMDB grows the file to the whole map size, so ask LMDB. */
    MDB_env *env;
    MDB_envinfo info;
    MDB_stat st_env;
    assert_int_equal(mdb_env_create(&env), 0);
    assert_int_equal(mdb_env_open(env, fx->path, MDB_NOSUBDIR | MDB_RDONLY | MDB_NOLOCK, 0644), 0);
    assert_int_equal(mdb_env_info(env, &info), 0);
    assert_int_equal(mdb_env_stat(env, &st_env), 0);
    mdb_env_close(env);
    long full = (long)((info.me_last_pgno + 1) * st_env.ms_psize);
    assert_true(full <= zt_file_size(fx->path));
    assert_true(full >= 16 * 4096);
    char cut[700];
    snprintf(cut, sizeof cut, "%s/cut.mrec.lmdb", fx->dir);
    long sizes[] = {0, 1, 100, 4095, 4096, 4096 + 100, 8192, 8192 + 1, full / 2, full - 4096, full - 1};
    for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++) {
        remove(cut);
        copy_prefix(fx->path, cut, sizes[k]);
        zmr_reader *r = (zmr_reader *)1;
        int st = zmr_open(&r, cut, 0);
        assert_null(r);
        if (sizes[k] == 0) {
            assert_int_equal(st, ZMR_ENOTCOLL);
            HAS("is empty");
        } else if (sizes[k] < 152) { /* not even LMDB's first meta page */
            assert_int_equal(st, ZMR_ENOTCOLL);
            HAS("too short for an LMDB file");
        } else {
            assert_int_equal(st, ZMR_ECORRUPT);
            HAS("file truncated");
            if (sizes[k] >= 8192) {
                char want[128];
                snprintf(want, sizeof want, "file truncated: %ld bytes, LMDB pages need %ld", sizes[k], full);
                HAS(want);
            }
        }
        assert_int_equal(zmr_validate(cut, 0), st);
        assert_int_equal(zmr_validate(cut, ZMR_OPEN_NOLOCK), st);
    }
    remove(cut);
    copy_prefix(fx->path, cut, full); /* the whole file is fine */
    OK(zmr_validate(cut, 0));
    /* not a collection file at all: a directory (a device such as
     * /dev/null is refused as well; the Python suite checks that on POSIX) */
    assert_int_equal(zmr_validate(fx->dir, ZMR_OPEN_NOLOCK), ZMR_ENOTCOLL);
    HAS("is a directory");
    char missing[700];
    snprintf(missing, sizeof missing, "%s/none.mrec.lmdb", fx->dir);
    assert_int_equal(zmr_validate(missing, 0), ZMR_EIO);
    HAS("no such file");
}

/* LMDB's two meta pages are checked with plain reads before LMDB trusts
 * them (64-bit layout: page header 16 bytes, then MDB_meta). */
static void test_lmdb_meta_pages(void **state)
{
    fixture *fx = *state;
    write_collection(fx->path);
    long full = zt_file_size(fx->path);
    assert_true(full >= 0);
    char bad[700];
    snprintf(bad, sizeof bad, "%s/bad.mrec.lmdb", fx->dir);
    const long ps = 4096; /* the page size LMDB chose on this host */
    struct {
        long off[2];     /* patched in meta 0 and (when >= 0) meta 1 */
        unsigned char bytes[8];
        size_t n;
        int st;
        const char *msg;
    } cases[] = {
        {{16, -1}, {0xDE, 0xC0, 0xEF, 0xBF}, 4, ZMR_ENOTCOLL, "not an LMDB file"},
        {{ps + 16, -1}, {0, 0, 0, 0}, 4, ZMR_ECORRUPT, "meta page 1 is damaged: magic"},
        {{20, -1}, {2, 0, 0, 0}, 4, ZMR_EUNSUPPORTED, "data version 2"},
        {{ps + 20, -1}, {7, 0, 0, 0}, 4, ZMR_ECORRUPT, "meta page 1: data version 7"},
        {{40, ps + 40}, {0x00, 0x30, 0, 0}, 4, ZMR_ECORRUPT, "page size 12288"},
        {{40, ps + 40}, {0, 0, 0, 0}, 4, ZMR_ECORRUPT, "page size 0"},
        {{136, ps + 136}, {0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0, 0}, 8, ZMR_ECORRUPT, "file truncated"},
        {{136, ps + 136}, {0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF}, 8, ZMR_ECORRUPT, "last page"},
        {{128, ps + 128}, {0x00, 0x00, 0x10, 0, 0, 0, 0, 0}, 8, ZMR_ECORRUPT, "main root page 1048576"},
        {{80, ps + 80}, {1, 0, 0, 0, 0, 0, 0, 0}, 8, ZMR_ECORRUPT, "free-list root page 1"},
        {{0, -1}, {5, 0, 0, 0, 0, 0, 0, 0}, 8, ZMR_ECORRUPT, "page number 5"},
        {{ps + 10, -1}, {0, 0}, 2, ZMR_ECORRUPT, "meta page 1 is damaged: page number 1, flags 0x0"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        remove(bad);
        copy_prefix(fx->path, bad, full);
        for (int m = 0; m < 2; m++)
            if (cases[k].off[m] >= 0)
                zt_patch_file(bad, cases[k].off[m], cases[k].bytes, cases[k].n);
        zmr_reader *r = NULL;
        assert_int_equal(zmr_open(&r, bad, ZMR_OPEN_NOLOCK), cases[k].st);
        assert_null(r);
        if (strstr(zmr_last_error(), cases[k].msg) == NULL)
            fail_msg("case %zu: expected '%s' in '%s'", k, cases[k].msg, zmr_last_error());
    }
    remove(bad);
    copy_prefix(fx->path, bad, full);
    OK(zmr_validate(bad, ZMR_OPEN_NOLOCK));
}

/* A leaf node whose stated value size runs past the end of the file (its
 * overflow page is real, its length damaged): liblmdb returns a pointer
 * and a size without checking them, and copying it would fault. The
 * reader refuses it as damage instead. */
static void test_value_past_file(void **state)
{
    fixture *fx = *state;
    write_collection(fx->path);
    size_t mlen = 0;
    char *meta = raw_get(fx->path, "meta", 4, &mlen);
    assert_non_null(meta);
    size_t big = mlen + 9000; /* several pages: stored on overflow pages */
    char *padded = malloc(big);
    assert_non_null(padded);
    memcpy(padded, meta, mlen);
    memset(padded + mlen, ' ', big - mlen);
    raw_put(fx->path, "meta", 4, padded, big);
    free(meta);
    free(padded);
    zmr_reader *r = NULL;
    OK(zmr_open(&r, fx->path, ZMR_OPEN_NOLOCK));
    zmr_close(r);
    /* the node: data size (u16 low, u16 high), flags F_BIGDATA, key size 4, "meta" */
    unsigned char *file = NULL;
    size_t n = zt_slurp(fx->path, &file);
    int patched = 0;
    for (size_t off = 4; off + 8 <= n; off++) {
        if (memcmp(file + off, "\x01\x00\x04\x00meta", 8) || zt_get_le32(file + off - 4) != big)
            continue;
        unsigned char huge[4];
        zt_put_le32(huge, 0x7FFFFFF0u);
        zt_patch_file(fx->path, (long)off - 4, huge, 4);
        patched++;
    }
    free(file);
    assert_true(patched > 0);
    r = NULL;
    assert_int_equal(zmr_open(&r, fx->path, ZMR_OPEN_NOLOCK), ZMR_ECORRUPT);
    assert_null(r);
    HAS("lies outside the file");
    assert_int_equal(zmr_validate(fx->path, ZMR_OPEN_NOLOCK), ZMR_ECORRUPT);
}

/* An undeclared meta key in an update: the message names the key (it is
 * formatted before the decoded frame that owns the key is freed). */
static void test_undeclared_update_meta(void **state)
{
    fixture *fx = *state;
    write_collection(fx->path);
    static const char key[] = "undeclared_key_with_a_long_name_to_outlive_small_allocations_0123456789";
    zmr_frame *u = atoms_frame(ZMR_FRAME_UPDATE, 2, 0.25);
    OK(zmr_frame_set_meta(u, "n", ZMR_TAG_U64, "1"));
    OK(zmr_frame_set_meta(u, key, ZMR_TAG_STRING, "\"value\""));
    OK(zmr_frame_set_step(u, 100));
    void *bytes;
    size_t n;
    OK(zmr_frame_encode(u, &bytes, &n));
    zmr_frame_free(u);
    unsigned char k[9];
    fkey(k, 'f', 3); /* record 2, frame 0 */
    raw_put(fx->path, k, 9, bytes, n);
    zmr_free(bytes);
    zmr_reader *r;
    OK(zmr_open(&r, fx->path, 0));
    zmr_frame *f = NULL;
    char want[200];
    snprintf(want, sizeof want, "f/3: meta key '%s' is not declared in sequence_schema.meta", key);
    assert_int_equal(zmr_read_update(r, 2, 0, &f), ZMR_ECORRUPT);
    assert_null(f);
    HAS(want);
    assert_int_equal(zmr_read_frame(r, 2, 1, &f), ZMR_ECORRUPT);
    HAS(key);
    zmr_close(r);
    assert_int_equal(zmr_validate(fx->path, 0), ZMR_ECORRUPT);
    HAS(want);
}

/* Replace key k (prefix p, number n) with the encoding of frame f. */
static void put_frame(const char *path, char p, uint64_t n, zmr_frame *f)
{
    unsigned char k[9];
    void *bytes;
    size_t len;
    OK(zmr_frame_encode(f, &bytes, &len));
    fkey(k, p, n);
    raw_put(path, k, 9, bytes, len);
    zmr_free(bytes);
}

/* Expect zmr_validate to refuse with every one of the given fragments. */
static void expect_invalid(const char *path, const char *a, const char *b, const char *c)
{
    assert_int_equal(zmr_validate(path, 0), ZMR_ECORRUPT);
    HAS(a);
    HAS(b);
    HAS(c);
}

/* The system of record 0 with bonds referencing `target` by column "ref". */
static zmr_frame *sys_with_ref(const char *target, uint64_t v0, uint64_t v1, uint64_t natoms)
{
    zmr_frame *sys;
    OK(zmr_frame_create(&sys, ZMR_FRAME_SYSTEM));
    OK(zmr_frame_add_block(sys, "atoms", natoms));
    uint64_t sa[1] = {natoms}, s2[1] = {2};
    double q[4] = {0, 0, 0, 0};
    OK(zmr_frame_add_column(sys, "atoms", "charge", ZMR_F64, sa, 1, q, natoms * 8, NULL, 0));
    OK(zmr_frame_add_block(sys, "bonds", 2));
    uint64_t ref[2] = {v0, v1};
    OK(zmr_frame_add_column(sys, "bonds", "ref", ZMR_U64, s2, 1, ref, 16, NULL, 0));
    char t[128];
    snprintf(t, sizeof t, "{\"ref\":\"%s\"}", target);
    OK(zmr_frame_set_block_json(sys, "bonds", "targets", t));
    return sys;
}

/* Aligned blocks: a trajectory block named like a system block holds that
 * block's row count at every resolved ordinal. */
static void test_aligned_blocks(void **state)
{
    fixture *fx = *state;
    write_collection(fx->path);
    OK(zmr_validate(fx->path, 0));
    /* record 0 (system atoms: 3 rows), frame 1 (f/1) restates atoms with 2 rows */
    zmr_frame *u = atoms_frame(ZMR_FRAME_UPDATE, 2, 0.0);
    OK(zmr_frame_set_meta(u, "energy", ZMR_TAG_F64, "\"NaN\""));
    OK(zmr_frame_set_meta(u, "n", ZMR_TAG_U64, "18446744073709551615"));
    OK(zmr_frame_set_step(u, 1));
    unsigned char k[9];
    size_t len1;
    fkey(k, 'f', 1);
    void *f1 = raw_get(fx->path, k, 9, &len1);
    put_frame(fx->path, 'f', 1, u);
    zmr_frame_free(u);
    expect_invalid(fx->path, "record 0 frame 1 (resolved at f/1) against s/0", "block atoms has 2 rows",
                   "aligned to /system/atoms with 3 rows");
    HAS("aligned block is held to its target's row count");
    /* a zero-row update of an aligned block breaks it as well */
    u = atoms_frame(ZMR_FRAME_UPDATE, 0, 0.0);
    OK(zmr_frame_set_meta(u, "energy", ZMR_TAG_F64, "\"NaN\""));
    OK(zmr_frame_set_meta(u, "n", ZMR_TAG_U64, "18446744073709551615"));
    OK(zmr_frame_set_step(u, 1));
    put_frame(fx->path, 'f', 1, u);
    zmr_frame_free(u);
    expect_invalid(fx->path, "f/1", "block atoms has 0 rows", "/system/atoms with 3 rows");
    raw_put(fx->path, k, 9, f1, len1);
    OK(zmr_validate(fx->path, 0));
    /* the system side: a system atoms block of 4 rows breaks the carried
     * 3-row atoms at the first ordinal */
    zmr_frame *sys = sys_with_ref("atoms", 0, 1, 4);
    put_frame(fx->path, 's', 0, sys);
    zmr_frame_free(sys);
    fkey(k, 'f', 0);
    expect_invalid(fx->path, "record 0 frame 0 (resolved at f/0) against s/0", "block atoms has 3 rows",
                   "/system/atoms with 4 rows");
    /* the same-named block with the same count is fine; blocks the system
     * does not hold (extra) are not aligned, and record 2 has no system */
    sys = sys_with_ref("atoms", 0, 2, 3);
    put_frame(fx->path, 's', 0, sys);
    zmr_frame_free(sys);
    OK(zmr_validate(fx->path, 0));
    free(f1);
}

/* "/trajectory/<block>" references from a system frame hold at every
 * resolved ordinal of the record. Record 0: atoms 3 rows at every
 * ordinal, extra 1 row at ordinals 0-1 and 0 rows at ordinal 2. */
static void test_trajectory_references(void **state)
{
    fixture *fx = *state;
    write_collection(fx->path);
    /* valid: below 3 at every ordinal; read back and validated */
    zmr_frame *sys = sys_with_ref("/trajectory/atoms", 2, 0, 3);
    put_frame(fx->path, 's', 0, sys);
    zmr_frame_free(sys);
    OK(zmr_validate(fx->path, 0));
    zmr_reader *r;
    OK(zmr_open(&r, fx->path, 0));
    zmr_frame *f;
    OK(zmr_read_system(r, 0, &f));
    zmr_column c;
    OK(zmr_frame_find_column(f, "bonds", "ref", &c));
    assert_int_equal(((const uint64_t *)c.data)[0], 2);
    zmr_frame_free(f);
    zmr_close(r);
    /* a value at the trajectory block's row count */
    sys = sys_with_ref("/trajectory/atoms", 0, 3, 3);
    put_frame(fx->path, 's', 0, sys);
    zmr_frame_free(sys);
    expect_invalid(fx->path, "s/0: row reference into record 0 frame 0 (resolved at f/0)",
                   "column bonds/ref: row reference 3 at element 1", "not below /trajectory/atoms's 3 rows");
    /* valid while extra has its row (ordinals 0, 1), refused once a later
     * update empties it (ordinal 2, f/2) */
    sys = sys_with_ref("/trajectory/extra", 0, 0, 3);
    put_frame(fx->path, 's', 0, sys);
    zmr_frame_free(sys);
    expect_invalid(fx->path, "record 0 frame 2 (resolved at f/2)", "row reference 0 at element 0",
                   "/trajectory/extra's 0 rows");
    /* a block the trajectory never holds */
    sys = sys_with_ref("/trajectory/nothing", 0, 0, 3);
    put_frame(fx->path, 's', 0, sys);
    zmr_frame_free(sys);
    expect_invalid(fx->path, "s/0", "target '/trajectory/nothing' names no block of the resolved trajectory frame",
                   "bonds has 2 rows referencing it");
    /* a null row references nothing */
    OK(zmr_frame_create(&sys, ZMR_FRAME_SYSTEM));
    uint64_t s3[1] = {3}, s2[1] = {2};
    double q[3] = {0, 0, 0};
    OK(zmr_frame_add_block(sys, "atoms", 3));
    OK(zmr_frame_add_column(sys, "atoms", "charge", ZMR_F64, s3, 1, q, 24, NULL, 0));
    OK(zmr_frame_add_block(sys, "bonds", 2));
    uint64_t ref[2] = {0, 99};
    uint8_t valid[2] = {1, 0};
    OK(zmr_frame_add_column(sys, "bonds", "ref", ZMR_U64, s2, 1, ref, 16, valid, 0));
    OK(zmr_frame_set_block_json(sys, "bonds", "targets", "{\"ref\":\"/trajectory/atoms\"}"));
    put_frame(fx->path, 's', 0, sys);
    OK(zmr_validate(fx->path, 0));
    /* record 1 has no trajectory: the section is absent, nothing to check */
    put_frame(fx->path, 's', 1, sys);
    zmr_frame_free(sys);
    sys = sys_with_ref("/trajectory/atoms", 7, 7, 3);
    put_frame(fx->path, 's', 1, sys);
    zmr_frame_free(sys);
    OK(zmr_validate(fx->path, 0));
    /* "/system/<block>" from a trajectory update, resolved against s/0 */
    zmr_frame *u = atoms_frame(ZMR_FRAME_UPDATE, 3, 0.0);
    OK(zmr_frame_set_meta(u, "energy", ZMR_TAG_F64, "-1.5"));
    OK(zmr_frame_set_meta(u, "n", ZMR_TAG_U64, "18446744073709551615"));
    OK(zmr_frame_set_step(u, 0));
    OK(zmr_frame_add_block(u, "extra", 1));
    uint64_t one[1] = {1}, bad[1] = {3};
    OK(zmr_frame_add_column(u, "extra", "v", ZMR_U64, one, 1, bad, 8, NULL, 0));
    OK(zmr_frame_set_block_json(u, "extra", "targets", "{\"v\":\"/system/atoms\"}"));
    put_frame(fx->path, 'f', 0, u);
    zmr_frame_free(u);
    expect_invalid(fx->path, "record 0 frame 0 (resolved at f/0)", "column extra/v: row reference 3",
                   "not below /system/atoms's 3 rows");
}

/* ------------------------------------------------------------ the public
 * reference layout's byte-level example: the two-record H2O2 conformer
 * collection, rebuilt by hand (header texts, lengths and payloads as the
 * example states them), read, then written by this library and compared
 * value for value. */

static const double CONF_X[4] = {0.8212890625, -0.0517578125, -0.0078125, -0.8369140625};
static const double CONF_Y[4] = {0.900390625, 0.751953125, -0.751953125, -0.876953125};
static const double CONF_Z[4] = {0.4345703125, -0.017578125, -0.0126953125, 0.375};

/* "MRF1" | u32le len | header | zero pad to 8 | payload */
static unsigned char *mrf1(const char *hdr, const void *payload, size_t plen, size_t *len)
{
    size_t h = strlen(hdr), head = (8 + h + 7) / 8 * 8;
    unsigned char *v = calloc(1, head + plen + 1);
    memcpy(v, "MRF1", 4);
    v[4] = (unsigned char)h;
    v[5] = (unsigned char)(h >> 8);
    memcpy(v + 8, hdr, h);
    if (plen)
        memcpy(v + head, payload, plen);
    *len = head + plen;
    return v;
}

/* f value: atoms x/y/z (x[0] replaced by x0) at step, pe; blocks == 0: none */
static unsigned char *conf_update(int blocks, double x0, int step, const char *pe, size_t *len)
{
    char hdr[512];
    double pay[12];
    if (!blocks) {
        snprintf(hdr, sizeof hdr, "{\"blocks\":{},\"meta\":{\"pe\":%s},\"step\":%d}", pe, step);
        return mrf1(hdr, NULL, 0, len);
    }
    snprintf(hdr, sizeof hdr,
             "{\"blocks\":{\"atoms\":{\"count\":4,\"structural_shape\":null,\"columns\":{"
             "\"x\":{\"dtype\":\"f64\",\"shape\":[4],\"offset\":0},"
             "\"y\":{\"dtype\":\"f64\",\"shape\":[4],\"offset\":32},"
             "\"z\":{\"dtype\":\"f64\",\"shape\":[4],\"offset\":64}}}},"
             "\"meta\":{\"pe\":%s},\"step\":%d}", pe, step);
    memcpy(pay, CONF_X, 32);
    memcpy(pay + 4, CONF_Y, 32);
    memcpy(pay + 8, CONF_Z, 32);
    pay[0] = x0;
    return mrf1(hdr, pay, sizeof pay, len);
}

static const char CONF_SYSTEM_HDR[] =
    "{\"blocks\":{\"atoms\":{\"count\":4,\"structural_shape\":null,\"columns\":{"
    "\"element\":{\"dtype\":\"string\",\"shape\":[4],\"values\":[\"H\",\"O\",\"O\",\"H\"]},"
    "\"type\":{\"dtype\":\"string\",\"shape\":[4],\"values\":[\"H1\",\"O1\",\"O1\",\"H1\"]}}},"
    "\"bonds\":{\"count\":3,\"structural_shape\":null,\"columns\":{"
    "\"type\":{\"dtype\":\"string\",\"shape\":[3],\"values\":[\"O1-H1\",\"O1-O1\",\"O1-H1\"]},"
    "\"atomi\":{\"dtype\":\"u64\",\"shape\":[3],\"offset\":0},"
    "\"atomj\":{\"dtype\":\"u64\",\"shape\":[3],\"offset\":24}}}},"
    "\"meta\":{\"smiles\":\"OO\",\"total_charge\":0},\"meta_types\":{\"smiles\":\"string\",\"total_charge\":\"i64\"}}";

static const char CONF_INDEX_HDR[] =
    "{\"blocks\":{\"records\":{\"count\":2,\"structural_shape\":null,\"columns\":{"
    "\"smiles\":{\"dtype\":\"string\",\"shape\":[2],\"values\":[\"OO\",\"OO\"]},"
    "\"first_frame\":{\"dtype\":\"u64\",\"shape\":[2],\"offset\":0},"
    "\"n_frames\":{\"dtype\":\"u64\",\"shape\":[2],\"offset\":16},"
    "\"n_atoms\":{\"dtype\":\"u64\",\"shape\":[2],\"offset\":32},"
    "\"has_trajectory\":{\"dtype\":\"bool\",\"shape\":[2],\"offset\":48}}}},\"meta\":{}}";

static const char CONF_META[] =
    "{\"layout\":\"mrec-lmdb\",\"layout_version\":1,\"collection\":{\"units\":{\"length\":\"angstrom\","
    "\"energy\":\"kcal/mol\"},\"molrec_version\":2},\"sequence_schema\":{\"blocks\":{\"atoms\":{\"columns\":{"
    "\"x\":{\"dtype\":\"f64\",\"trailing\":[],\"precision\":0.001},"
    "\"y\":{\"dtype\":\"f64\",\"trailing\":[],\"precision\":0.001},"
    "\"z\":{\"dtype\":\"f64\",\"trailing\":[],\"precision\":0.001}}}},"
    "\"meta\":{\"pe\":{\"dtype\":\"f64\"}}},\"n_records\":2,\"n_frames\":5}";

#define CONF_X0 0.8203125 /* frame 0's x[0] (on the 2^-10 grid) */

static unsigned char *conf_value(int which, size_t *len)
{
    /* which: 0..4 f/j, 5 s/r, 6 index */
    static const int blocks[5] = {1, 1, 0, 1, 1}, step[5] = {0, 1, 2, 0, 1};
    static const char *const pe[5] = {"-12.4", "-12.3", "-12.2", "-12.4", "-12.3"};
    if (which < 5)
        return conf_update(blocks[which], step[which] == 0 ? CONF_X0 : CONF_X[0], step[which], pe[which], len);
    if (which == 5) {
        uint64_t pay[6] = {0, 1, 2, 1, 2, 3};
        return mrf1(CONF_SYSTEM_HDR, pay, sizeof pay, len);
    }
    uint64_t pay[7] = {0, 3, 3, 2, 4, 4, 0};
    unsigned char *p = (unsigned char *)&pay[6];
    p[0] = p[1] = 1;
    return mrf1(CONF_INDEX_HDR, pay, sizeof pay, len);
}

static void put_conformers(const char *path)
{
    unsigned char k[9];
    size_t n;
    raw_put(path, "meta", 4, CONF_META, strlen(CONF_META));
    unsigned char *v = conf_value(6, &n);
    assert_int_equal(n, 8 + 353 + 7 + 56); /* header 353 B, pad 7 B, payload 56 B */
    raw_put(path, "index", 5, v, n);
    free(v);
    for (uint64_t r = 0; r < 2; r++) {
        char m[40];
        snprintf(m, sizeof m, "{\"record_id\":\"h2o2-%d\"}", (int)r);
        fkey(k, 'r', r);
        raw_put(path, k, 9, m, strlen(m));
        v = conf_value(5, &n);
        assert_int_equal(n, 8 + 523 + 5 + 48);
        fkey(k, 's', r);
        raw_put(path, k, 9, v, n);
        free(v);
    }
    for (uint64_t j = 0; j < 5; j++) {
        v = conf_value((int)j, &n);
        assert_int_equal(n, j == 2 ? 8 + 42 + 6 : 8 + 228 + 4 + 96);
        fkey(k, 'f', j);
        raw_put(path, k, 9, v, n);
        free(v);
    }
}

static void test_layout_example_read(void **state)
{
    fixture *fx = *state;
    put_conformers(fx->path);
    zmr_reader *r = open_valid(fx->path, 2, 5);
    expect_record(r, 1, 3, 2, 4, true);
    /* frame 2 holds no blocks: atoms carry forward from frame 1 */
    zmr_frame *f;
    OK(zmr_read_update(r, 0, 2, &f));
    assert_int_equal(zmr_frame_nblocks(f), 0);
    zmr_frame_free(f);
    OK(zmr_read_frame(r, 0, 2, &f));
    zmr_column c;
    OK(zmr_frame_find_column(f, "atoms", "y", &c));
    assert_memory_equal(c.data, CONF_Y, 32);
    zmr_value v;
    OK(zmr_frame_get_meta(f, "pe", &v));
    assert_true(v.tag == ZMR_TAG_F64 && v.f[0] == -12.2);
    int64_t step;
    assert_true(zmr_frame_get_step(f, &step) && step == 2);
    zmr_frame_free(f);
    OK(zmr_read_frame(r, 1, 0, &f));
    OK(zmr_frame_find_column(f, "atoms", "x", &c));
    assert_true(((const double *)c.data)[0] == CONF_X0);
    zmr_frame_free(f);
    OK(zmr_read_system(r, 0, &f));
    OK(zmr_frame_get_meta(f, "total_charge", &v));
    assert_true(v.tag == ZMR_TAG_I64 && v.i[0] == 0);
    OK(zmr_frame_find_column(f, "bonds", "atomj", &c));
    assert_int_equal(((const uint64_t *)c.data)[2], 3);
    zmr_frame_free(f);
    char *meta;
    OK(zmr_read_record_meta(r, 1, &meta));
    assert_string_equal(meta, "{\"record_id\":\"h2o2-1\"}");
    zmr_free(meta);
    zmr_close(r);
}

/* The conformer collection through this library's writer. */
static void write_conformers(const char *path)
{
    zmr_writer *w;
    OK(zmr_writer_create(&w, path, "{\"units\":{\"length\":\"angstrom\",\"energy\":\"kcal/mol\"},\"molrec_version\":2}",
                         "{\"blocks\":{\"atoms\":{\"columns\":{"
                         "\"x\":{\"dtype\":\"f64\",\"trailing\":[],\"precision\":0.001},"
                         "\"y\":{\"dtype\":\"f64\",\"precision\":0.001},"
                         "\"z\":{\"dtype\":\"f64\",\"trailing\":[],\"precision\":0.001}}}},"
                         "\"meta\":{\"pe\":{\"dtype\":\"f64\"}}}"));
    for (int r = 0; r < 2; r++) {
        zmr_frame *s;
        OK(zmr_frame_create(&s, ZMR_FRAME_SYSTEM));
        uint64_t s4[1] = {4}, s3[1] = {3}, ai[3] = {0, 1, 2}, aj[3] = {1, 2, 3};
        OK(zmr_frame_add_block(s, "atoms", 4));
        OK(zmr_frame_add_string_column(s, "atoms", "element", s4, 1, "[\"H\",\"O\",\"O\",\"H\"]", NULL));
        OK(zmr_frame_add_string_column(s, "atoms", "type", s4, 1, "[\"H1\",\"O1\",\"O1\",\"H1\"]", NULL));
        OK(zmr_frame_add_block(s, "bonds", 3));
        OK(zmr_frame_add_string_column(s, "bonds", "type", s3, 1, "[\"O1-H1\",\"O1-O1\",\"O1-H1\"]", NULL));
        OK(zmr_frame_add_column(s, "bonds", "atomi", ZMR_U64, s3, 1, ai, 24, NULL, 0));
        OK(zmr_frame_add_column(s, "bonds", "atomj", ZMR_U64, s3, 1, aj, 24, NULL, 0));
        OK(zmr_frame_set_meta(s, "smiles", ZMR_TAG_STRING, "\"OO\""));
        OK(zmr_frame_set_meta(s, "total_charge", ZMR_TAG_I64, "0"));
        char m[40];
        snprintf(m, sizeof m, "{\"record_id\":\"h2o2-%d\"}", r);
        OK(zmr_writer_begin_record(w, m, s, NULL));
        zmr_frame_free(s);
        for (int k = 0; k < (r ? 2 : 3); k++) {
            zmr_frame *u;
            OK(zmr_frame_create(&u, ZMR_FRAME_UPDATE));
            OK(zmr_frame_add_block(u, "atoms", 4));
            double x[4];
            memcpy(x, CONF_X, sizeof x);
            x[0] = k == 0 ? CONF_X0 : CONF_X[0];
            OK(zmr_frame_add_column(u, "atoms", "x", ZMR_F64, s4, 1, x, 32, NULL, 0));
            OK(zmr_frame_add_column(u, "atoms", "y", ZMR_F64, s4, 1, CONF_Y, 32, NULL, 0));
            OK(zmr_frame_add_column(u, "atoms", "z", ZMR_F64, s4, 1, CONF_Z, 32, NULL, 0));
            OK(zmr_frame_set_meta(u, "pe", ZMR_TAG_F64, k == 0 ? "-12.4" : k == 1 ? "-12.3" : "-12.2"));
            OK(zmr_writer_add_frame(w, u));
            zmr_frame_free(u);
        }
    }
    zmr_frame *idx;
    OK(zmr_frame_create(&idx, ZMR_FRAME_INDEX));
    OK(zmr_frame_add_block(idx, "records", 2));
    uint64_t s2[1] = {2};
    OK(zmr_frame_add_string_column(idx, "records", "n_atoms", s2, 1, "[\"OO\",\"OO\"]", NULL));
    assert_int_equal(zmr_writer_set_index(w, idx), ZMR_EINVAL);
    HAS("index column 'n_atoms' is the binding's own");
    zmr_frame_free(idx);
    OK(zmr_frame_create(&idx, ZMR_FRAME_INDEX));
    OK(zmr_frame_add_block(idx, "records", 2));
    OK(zmr_frame_add_string_column(idx, "records", "smiles", s2, 1, "[\"OO\",\"OO\"]", NULL));
    OK(zmr_writer_set_index(w, idx));
    zmr_frame_free(idx);
    OK(zmr_writer_commit(w));
}

static void test_layout_example_write(void **state)
{
    fixture *fx = *state;
    write_conformers(fx->path);
    OK(zmr_validate(fx->path, 0));
    unsigned char k[9];
    size_t n, m;
    for (uint64_t j = 0; j < 5; j++) {
        fkey(k, 'f', j);
        unsigned char *got = raw_get(fx->path, k, 9, &n), *want = conf_value((int)j, &m);
        assert_int_equal(n, m);
        assert_memory_equal(got, want, n); /* byte for byte as the example */
        free(got);
        free(want);
    }
    /* the index: own column smiles first, then the binding's four */
    unsigned char *got = raw_get(fx->path, "index", 5, &n), *want = conf_value(6, &m);
    assert_int_equal(n, m);
    assert_memory_equal(got, want, n);
    free(got);
    free(want);
    zmr_reader *r;
    OK(zmr_open(&r, fx->path, 0));
    zmr_frame *idx;
    OK(zmr_read_index(r, &idx));
    zmr_column c;
    OK(zmr_frame_find_column(idx, "records", "smiles", &c));
    assert_string_equal(c.strings[1], "OO");
    zmr_frame_free(idx);
    zmr_close(r);
    fkey(k, 's', 1);
    got = raw_get(fx->path, k, 9, &n);
    want = conf_value(5, &m);
    assert_int_equal(n, m);
    assert_memory_equal(got, want, n);
    free(got);
    free(want);
    char *meta = raw_meta(fx->path);
    /* the declaration in the layout's form, trailing shapes stated */
    assert_non_null(strstr(meta, "\"meta\":{\"pe\":{\"dtype\":\"f64\"}}"));
    assert_non_null(strstr(meta, "\"y\":{\"dtype\":\"f64\",\"trailing\":[],\"precision\":0.001}"));
    assert_non_null(strstr(meta, "\"sequence_schema\":{\"blocks\":{\"atoms\":{\"columns\":{\"x\":{\"dtype\":\"f64\","
                                 "\"trailing\":[],\"precision\":0.001}"));
    free(meta);
}

/* Declarations: the layout's {"dtype"} form written; the earlier {"type"}
 * form and bare tags still read; trailing shapes derived and held. */
/* The sequence_schema of test_schema_declarations: atoms columns `cols`
 * (DECL_V, DECL_VW, ...) and the same three meta declarations. */
#define DECL_SCHEMA(cols)                                                                         \
    "{\"blocks\":{\"atoms\":{\"columns\":{" cols "}}},"                                              \
    "\"meta\":{\"old\":{\"type\":\"u64\",\"fill\":\"18446744073709551615\"},\"bare\":\"i32\","       \
    "\"doc\":{\"dtype\":\"json\",\"fill\":null}}}"
#define DECL_V "\"v\":{\"dtype\":\"f64\",\"trailing\":[3]}"
#define DECL_VW DECL_V ",\"w\":{\"dtype\":\"i32\"}"

/* An update frame for DECL_VW: 2 atoms (v f64[2][3] zeros, w i32[2] = {1, 2}
 * with validity w_valid, NULL for none) or, with_rows false, an atoms
 * block of 0 rows and no columns; meta bare = 7 either way. */
static zmr_frame *vw_update(bool with_rows, const uint8_t *w_valid)
{
    static const uint64_t s23[2] = {2, 3}, s2[1] = {2};
    static const double d[6] = {0};
    static const int32_t iw[2] = {1, 2};
    zmr_frame *u;
    OK(zmr_frame_create(&u, ZMR_FRAME_UPDATE));
    OK(zmr_frame_add_block(u, "atoms", with_rows ? 2 : 0));
    if (with_rows) {
        OK(zmr_frame_add_column(u, "atoms", "v", ZMR_F64, s23, 2, d, 48, NULL, 0));
        OK(zmr_frame_add_column(u, "atoms", "w", ZMR_I32, s2, 1, iw, 8, w_valid, 0));
    }
    OK(zmr_frame_set_meta(u, "bare", ZMR_TAG_I32, "7"));
    return u;
}

static void test_schema_declarations(void **state)
{
    fixture *fx = *state;
    zmr_writer *w;
    assert_int_equal(zmr_writer_create(&w, fx->path, NULL, "{\"meta\":{\"e\":{\"dtype\":\"f64\",\"fill\":null}}}"),
                     ZMR_EINVAL);
    HAS("fill null is a fill for a json key only");
    assert_int_equal(zmr_writer_create(&w, fx->path, NULL, "{\"meta\":{\"e\":{\"fill\":1}}}"), ZMR_EINVAL);
    HAS("needs \"dtype\"");
    assert_int_equal(zmr_writer_create(&w, fx->path, NULL, "{\"blocks\":{\"box\":{}}}"), ZMR_EINVAL);
    HAS("reserved");
    assert_int_equal(zmr_writer_create(&w, fx->path, NULL, "{\"blocks\":{\"a\":{\"columns\":{\"v\":{}}}}}"),
                     ZMR_EINVAL);
    HAS("column a/v needs \"dtype\"");
    assert_int_equal(
        zmr_writer_create(&w, fx->path, NULL, "{\"blocks\":{\"a\":{\"columns\":{\"v\":{\"dtype\":\"f64\",\"trailing\":[-1]}}}}}"),
        ZMR_EINVAL);
    HAS("trailing must be an array");
    OK(zmr_writer_create(&w, fx->path, NULL, DECL_SCHEMA(DECL_V)));
    OK(zmr_writer_begin_record(w, NULL, NULL, NULL));
    uint64_t s23[2] = {2, 3}, s2[1] = {2};
    double d[6] = {0};
    zmr_frame *u;
    OK(zmr_frame_create(&u, ZMR_FRAME_UPDATE));
    OK(zmr_frame_add_block(u, "atoms", 2));
    OK(zmr_frame_add_column(u, "atoms", "v", ZMR_F64, s23, 2, d, 48, NULL, 0));
    OK(zmr_frame_add_block(u, "grid", 2));
    uint8_t valid[2] = {1, 0};
    OK(zmr_frame_add_column(u, "grid", "g", ZMR_F64, s23, 2, d, 48, valid, 0));
    OK(zmr_frame_set_meta(u, "bare", ZMR_TAG_I32, "-3"));
    OK(zmr_writer_add_frame(w, u));
    zmr_frame_free(u);
    /* a later frame must match the declaration the first one fixed */
    OK(zmr_frame_create(&u, ZMR_FRAME_UPDATE));
    OK(zmr_frame_add_block(u, "grid", 2));
    OK(zmr_frame_add_column(u, "grid", "g", ZMR_F64, s2, 1, d, 16, NULL, 0));
    OK(zmr_frame_set_meta(u, "bare", ZMR_TAG_I32, "1"));
    assert_int_equal(zmr_writer_add_frame(w, u), ZMR_EINVAL);
    HAS("column grid/g is declared f64[N][3] in sequence_schema, given f64[N]");
    zmr_frame_free(u);
    zmr_writer_abort(w);
    remove_collection(fx->path);

    OK(zmr_writer_create(&w, fx->path, NULL, DECL_SCHEMA(DECL_VW)));
    OK(zmr_writer_begin_record(w, NULL, NULL, NULL));
    for (int k = 0; k < 3; k++) {
        u = vw_update(k < 2, k ? valid : NULL);
        OK(zmr_frame_set_step(u, 10 * k));
        OK(zmr_writer_add_frame(w, u));
        zmr_frame_free(u);
    }
    OK(zmr_frame_create(&u, ZMR_FRAME_UPDATE));
    OK(zmr_frame_set_meta(u, "bare", ZMR_TAG_I32, "7"));
    OK(zmr_frame_set_step(u, 20));
    assert_int_equal(zmr_writer_add_frame(w, u), ZMR_EINVAL);
    HAS("step 20 after step 20: steps increase strictly");
    zmr_frame_free(u);
    zmr_writer_abort(w);
    remove_collection(fx->path);

    /* the same, committed: then read back */
    OK(zmr_writer_create(&w, fx->path, NULL, DECL_SCHEMA(DECL_VW ",\"never\":{\"dtype\":\"string\"}")));
    OK(zmr_writer_begin_record(w, NULL, NULL, NULL));
    u = vw_update(true, valid);
    assert_int_equal(zmr_writer_add_frame(w, u), ZMR_EINVAL);
    HAS("block 'atoms' lacks column 'never' that sequence_schema declares");
    zmr_frame_free(u);
    zmr_writer_abort(w);
    remove_collection(fx->path);

    OK(zmr_writer_create(&w, fx->path, NULL, DECL_SCHEMA(DECL_VW)));
    OK(zmr_writer_begin_record(w, NULL, NULL, NULL));
    for (int k = 0; k < 2; k++) {
        u = vw_update(!k, valid);
        OK(zmr_writer_add_frame(w, u));
        zmr_frame_free(u);
    }
    OK(zmr_writer_commit(w));
    OK(zmr_validate(fx->path, 0));
    char *meta = raw_meta(fx->path);
    assert_non_null(strstr(meta, "\"v\":{\"dtype\":\"f64\",\"trailing\":[3]}"));
    assert_non_null(strstr(meta, "\"w\":{\"dtype\":\"i32\",\"trailing\":[],\"nullable\":true}"));
    assert_non_null(strstr(meta, "\"old\":{\"dtype\":\"u64\",\"fill\":\"18446744073709551615\"}"));
    assert_non_null(strstr(meta, "\"bare\":{\"dtype\":\"i32\"}"));
    assert_non_null(strstr(meta, "\"doc\":{\"dtype\":\"json\",\"fill\":null}"));
    free(meta);
    zmr_reader *r;
    OK(zmr_open(&r, fx->path, 0));
    zmr_frame *f;
    OK(zmr_read_update(r, 0, 1, &f));
    zmr_value v;
    OK(zmr_frame_get_meta(f, "old", &v)); /* fill materialized, typed by the schema */
    assert_true(v.tag == ZMR_TAG_U64 && v.u[0] == UINT64_MAX);
    OK(zmr_frame_get_meta(f, "doc", &v));
    assert_true(v.tag == ZMR_TAG_JSON && !strcmp(v.text, "null"));
    zmr_column c;
    OK(zmr_frame_find_column(f, "atoms", "v", &c)); /* emptied with its declared columns */
    assert_true(c.ndim == 2 && c.shape[0] == 0 && c.shape[1] == 3);
    int64_t step;
    assert_true(zmr_frame_get_step(f, &step) && step == 1);
    zmr_frame_free(f);
    zmr_close(r);

    /* a file written by the earlier writer ({"type": tag}) still reads */
    meta = raw_meta(fx->path);
    char *p = strstr(meta, "\"old\":{\"dtype\"");
    memcpy(p + 7, "\"type\"", 6); /* "dtype" (7 bytes) -> "type" (6) */
    memmove(p + 13, p + 14, strlen(p + 14) + 1);
    assert_non_null(strstr(meta, "\"old\":{\"type\":\"u64\""));
    raw_put(fx->path, "meta", 4, meta, strlen(meta));
    free(meta);
    OK(zmr_validate(fx->path, 0));
    OK(zmr_open(&r, fx->path, 0));
    OK(zmr_read_update(r, 0, 0, &f));
    OK(zmr_frame_get_meta(f, "old", &v));
    assert_true(v.tag == ZMR_TAG_U64 && v.u[0] == UINT64_MAX);
    zmr_frame_free(f);
    zmr_close(r);
}

/* Canonical column keys at their one dtype and shape, wherever they appear;
 * canonical per-step keys f64. */
static void test_canonical_keys(void **state)
{
    fixture *fx = *state;
    zmr_frame *f;
    OK(zmr_frame_create(&f, ZMR_FRAME_SYSTEM));
    OK(zmr_frame_add_block(f, "atoms", 2));
    uint64_t s2[1] = {2}, s23[2] = {2, 3};
    uint8_t z8[2] = {1, 8};
    int64_t t64[2] = {1, 2};
    double d6[6] = {0};
    assert_int_equal(zmr_frame_add_column(f, "atoms", "atomic_number", ZMR_U8, s2, 1, z8, 2, NULL, 0), ZMR_EINVAL);
    HAS("column atoms/atomic_number: 'atomic_number' is a canonical column key: it must be u64[N] (one value per "
        "row) wherever it appears, given u8[N]");
    assert_int_equal(zmr_frame_add_column(f, "atoms", "type", ZMR_I64, s2, 1, t64, 16, NULL, 0), ZMR_EINVAL);
    HAS("'type' is a canonical column key: it must be string[N]");
    assert_int_equal(zmr_frame_add_column(f, "atoms", "x", ZMR_F64, s23, 2, d6, 48, NULL, 0), ZMR_EINVAL);
    HAS("it must be f64[N] (one value per row) wherever it appears, given f64[N][3]");
    assert_int_equal(zmr_frame_add_string_column(f, "atoms", "mass", s2, 1, "[\"a\",\"b\"]", NULL), ZMR_EINVAL);
    HAS("'mass' is a canonical column key: it must be f64[N]");
    OK(zmr_frame_add_column(f, "atoms", "position", ZMR_F64, s23, 2, d6, 48, NULL, 0)); /* not canonical */
    OK(zmr_frame_add_string_column(f, "atoms", "type", s2, 1, "[\"a\",\"b\"]", NULL));
    uint64_t u[2] = {1, 8};
    OK(zmr_frame_add_column(f, "atoms", "type_id", ZMR_U64, s2, 1, u, 16, NULL, 0));
    zmr_frame_free(f);
    OK(zmr_frame_create(&f, ZMR_FRAME_INDEX)); /* every frame kind */
    OK(zmr_frame_add_block(f, "records", 2));
    assert_int_equal(zmr_frame_add_column(f, "records", "id", ZMR_I64, s2, 1, t64, 16, NULL, 0), ZMR_EINVAL);
    HAS("it must be u64[N]");
    zmr_frame_free(f);
    zmr_writer *w;
    assert_int_equal(zmr_writer_create(&w, fx->path, NULL, "{\"meta\":{\"temp\":{\"dtype\":\"i32\"}}}"),
                     ZMR_EINVAL);
    HAS("sequence_schema.meta.temp: 'temp' is a canonical per-step key: it must be f64, given i32");
}

/* A trajectory of zero frames: has_trajectory true, n_frames 0; a record
 * with neither a system nor a trajectory is refused. */
static void test_zero_frame_trajectory(void **state)
{
    fixture *fx = *state;
    zmr_writer *w;
    OK(zmr_writer_create(&w, fx->path, NULL, NULL));
    assert_int_equal(zmr_writer_begin_trajectory(w), ZMR_ESTATE);
    OK(zmr_writer_begin_record(w, "{\"k\":0}", NULL, NULL));
    OK(zmr_writer_begin_trajectory(w));
    OK(zmr_writer_begin_record(w, "{\"k\":1}", NULL, NULL));
    zmr_frame *u = atoms_frame(ZMR_FRAME_UPDATE, 2, 0);
    OK(zmr_writer_add_frame(w, u));
    zmr_frame_free(u);
    OK(zmr_writer_begin_record(w, "{\"k\":2}", NULL, NULL));
    assert_int_equal(zmr_writer_commit(w), ZMR_EINVAL);
    HAS("record 2 has neither a system nor a trajectory");
    zmr_reader *r;
    assert_int_equal(zmr_open(&r, fx->path, 0), ZMR_ENOTCOLL); /* nothing committed */
    remove_collection(fx->path);

    OK(zmr_writer_create(&w, fx->path, NULL, NULL));
    OK(zmr_writer_begin_record(w, NULL, NULL, NULL));
    OK(zmr_writer_begin_trajectory(w));
    OK(zmr_writer_begin_record(w, NULL, NULL, NULL));
    u = atoms_frame(ZMR_FRAME_UPDATE, 2, 0);
    OK(zmr_writer_add_frame(w, u));
    zmr_frame_free(u);
    OK(zmr_writer_commit(w));
    OK(zmr_validate(fx->path, 0));
    OK(zmr_open(&r, fx->path, 0));
    expect_record(r, 0, 0, 0, 0, true);
    expect_record(r, 1, 0, 1, 2, true);
    zmr_frame *f;
    assert_int_equal(zmr_read_frame(r, 0, 0, &f), ZMR_ERANGE);
    zmr_close(r);
}

/* A directory is named as one; validate's key-level details name the file. */
static void test_open_messages(void **state)
{
    fixture *fx = *state;
    zmr_reader *r;
    assert_int_equal(zmr_open(&r, fx->dir, 0), ZMR_ENOTCOLL);
    HAS("is a directory (a collection is one file");
    assert_int_equal(zmr_validate(fx->dir, 0), ZMR_ENOTCOLL);
    write_collection(fx->path);
    unsigned char k[9];
    fkey(k, 'f', 1);
    raw_put(fx->path, k, 9, "MRF2\0\0\0\0", 8);
    assert_int_equal(zmr_validate(fx->path, 0), ZMR_ECORRUPT);
    assert_true(strncmp(zmr_last_error(), fx->path, strlen(fx->path)) == 0);
    HAS("f/1");
}

/* An undefined cell is periodic on no axis; a grid block's shape is pinned. */
static void test_cell_and_grid_rules(void **state)
{
    fixture *fx = *state;
    zmr_frame *f;
    OK(zmr_frame_create(&f, ZMR_FRAME_SYSTEM));
    zmr_box b = {.vectors = {1, 0, 0, 0, 1, 0, 0, 0, 1}, .boundary = {true, false, false}, .cell_defined = false};
    assert_int_equal(zmr_frame_set_box(f, &b), ZMR_EINVAL);
    HAS("an undefined cell (cell_defined false) is periodic on no axis, but boundary says [true, false, false]");
    b.boundary[0] = false;
    OK(zmr_frame_set_box(f, &b));
    zmr_frame_free(f);
    zmr_writer *w;
    OK(zmr_writer_create(&w, fx->path, NULL, NULL));
    OK(zmr_writer_begin_record(w, NULL, NULL, NULL));
    double d[8] = {0};
    uint64_t s8[1] = {8};
    for (int k = 0; k < 2; k++) {
        zmr_frame *u;
        OK(zmr_frame_create(&u, ZMR_FRAME_UPDATE));
        OK(zmr_frame_add_block(u, "rho", 8));
        OK(zmr_frame_set_block_json(u, "rho", "structural_shape", k ? "[4,2,1]" : "[2,2,2]"));
        OK(zmr_frame_add_column(u, "rho", "v", ZMR_F64, s8, 1, d, 64, NULL, 0));
        assert_int_equal(zmr_writer_add_frame(w, u), k ? ZMR_EINVAL : ZMR_OK);
        zmr_frame_free(u);
    }
    HAS("block rho has structural shape [4,2,1], sequence_schema declares [2,2,2]");
    zmr_writer_abort(w);
}

/* validate holds updates to a declaration in the layout's form; a file
 * whose declaration states no trailing shapes (written earlier) is read as
 * it is. */
static void test_validate_declarations(void **state)
{
    fixture *fx = *state;
    write_conformers(fx->path);
    char *meta = raw_meta(fx->path);
    char *y = strstr(meta, "\"y\":{\"dtype\":\"f64\",\"trailing\":[]");
    assert_non_null(y);
    memcpy(y + 13, "\"i64\"", 5); /* "y" declared i64 */
    raw_put(fx->path, "meta", 4, meta, strlen(meta));
    assert_int_equal(zmr_validate(fx->path, 0), ZMR_ECORRUPT);
    HAS("f/0: column atoms/y is not the dtype and trailing shape sequence_schema declares");
    memcpy(y + 13, "\"f64\"", 5);
    char *z = strstr(meta, "\"z\":{");
    memcpy(z, "\"w\"", 3); /* z undeclared, w declared instead */
    raw_put(fx->path, "meta", 4, meta, strlen(meta));
    assert_int_equal(zmr_validate(fx->path, 0), ZMR_ECORRUPT);
    HAS("f/0: column atoms/z is not declared in sequence_schema.blocks.atoms");
    memcpy(z, "\"z\"", 3);
    /* the earlier form: no trailing shapes stated -> not held */
    char *t;
    while ((t = strstr(meta, ",\"trailing\":[]")) != NULL)
        memmove(t, t + 14, strlen(t + 14) + 1);
    memcpy(strstr(meta, "\"y\":{\"dtype\":\"f64\"") + 13, "\"i64\"", 5);
    raw_put(fx->path, "meta", 4, meta, strlen(meta));
    OK(zmr_validate(fx->path, 0));
    free(meta);
}


/* ------------------------------------------------------------ rules written once
 * Each rule the writer holds a record to (ZMR_EINVAL) is the one
 * zmr_validate holds a stored file to (ZMR_ECORRUPT): the same detail. */

/* Overwrite the stored "meta" text at `at` bytes past the first `find`
 * with `with` (same length: the JSON stays the same size). */
static void edit_meta(const char *path, const char *find, size_t at, const char *with)
{
    char *meta = raw_meta(path);
    char *p = strstr(meta, find);
    assert_non_null(p);
    memcpy(p + at, with, strlen(with));
    raw_put(path, "meta", 4, meta, strlen(meta));
    free(meta);
}

/* Replace f/j of the collection at path with the raw header `hdr` (no
 * payload). */
static void put_header(const char *path, uint64_t j, const char *hdr)
{
    size_t len;
    unsigned char k[9], *v = mrf1(hdr, NULL, 0, &len);
    fkey(k, 'f', j);
    raw_put(path, k, 9, v, len);
    free(v);
}

/* Record 2 of write_collection (f/3, f/4: atoms 2 rows, steps 100, 101):
 * f/4 replaced by `u` must make validate refuse with `msg`; restored after. */
static void expect_f4_invalid(const char *path, zmr_frame *u, const char *msg)
{
    unsigned char k[9];
    size_t n;
    fkey(k, 'f', 4);
    void *keep = raw_get(path, k, 9, &n);
    put_frame(path, 'f', 4, u);
    assert_int_equal(zmr_validate(path, 0), ZMR_ECORRUPT);
    HAS("record 2 frame 1 (at f/4)");
    HAS(msg);
    raw_put(path, k, 9, keep, n);
    free(keep);
    OK(zmr_validate(path, 0));
}

/* An update of record 2: atoms 2 rows, meta n and energy, step. */
static zmr_frame *rec2_update(int64_t step)
{
    zmr_frame *u = atoms_frame(ZMR_FRAME_UPDATE, 2, 0.25);
    OK(zmr_frame_set_meta(u, "n", ZMR_TAG_U64, "1"));
    OK(zmr_frame_set_meta(u, "energy", ZMR_TAG_F64, "\"NaN\""));
    OK(zmr_frame_set_step(u, step));
    return u;
}

static void test_validate_rules(void **state)
{
    fixture *fx = *state;
    write_collection(fx->path);
    OK(zmr_validate(fx->path, 0));
    /* steps increase strictly: stored, and given to the writer */
    zmr_frame *u = rec2_update(100);
    expect_f4_invalid(fx->path, u, "step 100 after step 100: steps increase strictly within a record");
    zmr_writer *w;
    char other[600];
    snprintf(other, sizeof other, "%s/w.mrec.lmdb", fx->dir);
    OK(zmr_writer_create(&w, other, NULL, "{\"meta\":{\"n\":{\"dtype\":\"u64\"},\"energy\":{\"dtype\":\"f64\"}}}"));
    OK(zmr_writer_begin_record(w, NULL, NULL, NULL));
    zmr_frame *first = rec2_update(100);
    OK(zmr_writer_add_frame(w, first));
    assert_int_equal(zmr_writer_add_frame(w, u), ZMR_EINVAL);
    HAS("step 100 after step 100: steps increase strictly within a record");
    zmr_frame_free(u);
    /* a time on some frames only */
    u = rec2_update(101);
    OK(zmr_frame_set_time(u, 2.5));
    expect_f4_invalid(fx->path, u, "frame 1 has a time but the record's first frame has none (time is all or "
                                   "nothing within a record)");
    assert_int_equal(zmr_writer_add_frame(w, u), ZMR_EINVAL);
    HAS("frame 1 has a time but the record's first frame has none");
    zmr_frame_free(u);
    /* one cell_defined for the record's cells */
    zmr_box defined = {.vectors = {5, 0, 0, 0, 5, 0, 0, 0, 5}, .boundary = {true, true, true}, .cell_defined = true};
    zmr_box undefined = {.cell_defined = false};
    OK(zmr_frame_set_box(first, &defined));
    OK(zmr_frame_set_step(first, 100));
    put_frame(fx->path, 'f', 3, first);
    u = rec2_update(101);
    OK(zmr_frame_set_box(u, &undefined));
    expect_f4_invalid(fx->path, u, "the cell's cell_defined is false, an earlier cell of the record says true");
    zmr_writer_abort(w);
    remove_collection(other);
    OK(zmr_writer_create(&w, other, NULL, "{\"meta\":{\"n\":{\"dtype\":\"u64\"},\"energy\":{\"dtype\":\"f64\"}}}"));
    OK(zmr_writer_begin_record(w, NULL, NULL, NULL));
    OK(zmr_writer_add_frame(w, first));
    assert_int_equal(zmr_writer_add_frame(w, u), ZMR_EINVAL);
    HAS("the cell's cell_defined is false, an earlier cell of the record says true");
    zmr_writer_abort(w);
    zmr_frame_free(u);
    zmr_frame_free(first);
    /* an undefined cell that is periodic (set_box refuses to build one) */
    put_header(fx->path, 4, "{\"blocks\":{},\"meta\":{\"n\":1,\"energy\":\"NaN\"},\"step\":101,\"box\":{\"vectors\":[[1.0,0.0,0.0],"
                            "[0.0,1.0,0.0],[0.0,0.0,1.0]],\"origin\":[0.0,0.0,0.0],\"boundary\":[true,false,false],"
                            "\"cell_defined\":false}}");
    assert_int_equal(zmr_validate(fx->path, 0), ZMR_ECORRUPT);
    HAS("f/4: an undefined cell (cell_defined false) is periodic on no axis, but boundary says [true, false, "
        "false]");
    /* a structural shape whose product is not the row count */
    put_header(fx->path, 4, "{\"blocks\":{\"rho\":{\"count\":0,\"structural_shape\":[2,0,3],\"columns\":{}},"
                            "\"g\":{\"count\":8,\"structural_shape\":[2,2,3],\"columns\":{}}},\"meta\":{\"n\":1,\"energy\":\"NaN\"},"
                            "\"step\":101}");
    assert_int_equal(zmr_validate(fx->path, 0), ZMR_ECORRUPT);
    HAS("block g: structural_shape [2,2,3] has product 12 but the block has 8 rows");
    remove_collection(other);
    /* a file declaring no blocks at all (sequence_schema without "blocks")
     * is held to the rules that need no declaration */
    remove_collection(fx->path);
    write_collection(fx->path);
    edit_meta(fx->path, "\"sequence_schema\":{\"blocks\"", 20, "blockz");
    OK(zmr_validate(fx->path, 0));
    u = rec2_update(100);
    expect_f4_invalid(fx->path, u, "steps increase strictly");
    zmr_frame_free(u);
}

/* A grid block's shape, declared with its first presentation, is the same
 * in every update; a declared aligned_with holds at every resolved frame. */
static void test_validate_grid_and_alignment(void **state)
{
    fixture *fx = *state;
    zmr_writer *w;
    OK(zmr_writer_create(&w, fx->path, NULL,
                         "{\"blocks\":{\"atoms\":{\"columns\":{\"position\":{\"dtype\":\"f64\",\"trailing\":[3]}}},"
                         "\"tags\":{\"aligned_with\":\"atoms\",\"columns\":{\"tag\":{\"dtype\":\"i32\"}}}}}"));
    OK(zmr_writer_begin_record(w, NULL, NULL, NULL));
    double d[8] = {0};
    int32_t tg[3] = {1, 2, 3};
    uint64_t s8[1] = {8}, s2[1] = {2}, s3[1] = {3};
    for (int k = 0; k < 3; k++) {
        zmr_frame *u = atoms_frame(ZMR_FRAME_UPDATE, 2, k);
        OK(zmr_frame_add_block(u, "rho", 8));
        OK(zmr_frame_set_block_json(u, "rho", "structural_shape", "[2,2,2]"));
        OK(zmr_frame_add_column(u, "rho", "v", ZMR_F64, s8, 1, d, 64, NULL, 0));
        if (k == 0) {
            OK(zmr_frame_add_block(u, "tags", 2));
            OK(zmr_frame_add_column(u, "tags", "tag", ZMR_I32, s2, 1, tg, 8, NULL, 0));
        }
        OK(zmr_writer_add_frame(w, u));
        zmr_frame_free(u);
    }
    /* the writer refuses a frame that breaks the alignment */
    zmr_frame *u = atoms_frame(ZMR_FRAME_UPDATE, 3, 9);
    assert_int_equal(zmr_writer_add_frame(w, u), ZMR_EINVAL);
    HAS("block tags is aligned with atoms but holds 2 rows to its 3");
    zmr_frame_free(u);
    zmr_writer_abort(w);
    remove_collection(fx->path);
    /* the same collection written whole, then damaged */
    OK(zmr_writer_create(&w, fx->path, NULL,
                         "{\"blocks\":{\"atoms\":{\"columns\":{\"position\":{\"dtype\":\"f64\",\"trailing\":[3]}}},"
                         "\"tags\":{\"aligned_with\":\"atoms\",\"columns\":{\"tag\":{\"dtype\":\"i32\"}}}}}"));
    OK(zmr_writer_begin_record(w, NULL, NULL, NULL));
    for (int k = 0; k < 2; k++) {
        u = atoms_frame(ZMR_FRAME_UPDATE, 2, k);
        OK(zmr_frame_add_block(u, "rho", 8));
        OK(zmr_frame_set_block_json(u, "rho", "structural_shape", "[2,2,2]"));
        OK(zmr_frame_add_column(u, "rho", "v", ZMR_F64, s8, 1, d, 64, NULL, 0));
        OK(zmr_frame_add_block(u, "tags", 2));
        OK(zmr_frame_add_column(u, "tags", "tag", ZMR_I32, s2, 1, tg, 8, NULL, 0));
        OK(zmr_writer_add_frame(w, u));
        zmr_frame_free(u);
    }
    OK(zmr_writer_commit(w));
    OK(zmr_validate(fx->path, 0));
    /* f/1: atoms grows to 3 rows, the aligned tags stay at 2 */
    u = atoms_frame(ZMR_FRAME_UPDATE, 3, 5);
    OK(zmr_frame_set_step(u, 1));
    put_frame(fx->path, 'f', 1, u);
    zmr_frame_free(u);
    assert_int_equal(zmr_validate(fx->path, 0), ZMR_ECORRUPT);
    HAS("record 0 frame 1 (resolved at f/1)");
    HAS("block tags is aligned with atoms but holds 2 rows to its 3");
    /* f/1: the grid's shape changes (same row count) */
    u = atoms_frame(ZMR_FRAME_UPDATE, 2, 5);
    OK(zmr_frame_set_step(u, 1));
    OK(zmr_frame_add_block(u, "rho", 8));
    OK(zmr_frame_set_block_json(u, "rho", "structural_shape", "[4,2,1]"));
    OK(zmr_frame_add_column(u, "rho", "v", ZMR_F64, s8, 1, d, 64, NULL, 0));
    put_frame(fx->path, 'f', 1, u);
    zmr_frame_free(u);
    assert_int_equal(zmr_validate(fx->path, 0), ZMR_ECORRUPT);
    HAS("record 0 frame 1 (at f/1)");
    HAS("block rho has structural shape [4,2,1], sequence_schema declares [2,2,2]");
    /* a declaration whose aligned_with names no other block */
    edit_meta(fx->path, "\"aligned_with\":\"atoms\"", 16, "tags\" ");
    assert_int_equal(zmr_validate(fx->path, 0), ZMR_ECORRUPT);
    HAS("sequence_schema.blocks.tags: aligned_with \"tags\" is no other declared block");
    /* and the writer refuses that declaration */
    remove_collection(fx->path);
    assert_int_equal(zmr_writer_create(&w, fx->path, NULL, "{\"blocks\":{\"tags\":{\"aligned_with\":\"atoms\"}}}"),
                     ZMR_EINVAL);
    HAS("sequence_schema.blocks.tags: aligned_with \"atoms\" is no other declared block");
    (void)s3;
}

/* Values off their precision grid: read as stored by every reader,
 * reported by validate (system, index and update columns). */
static void test_off_grid(void **state)
{
    fixture *fx = *state;
    write_collection(fx->path); /* atoms/position declared with precision 0.001 */
    zmr_frame *u = rec2_update(101);
    zmr_column c;
    OK(zmr_frame_find_column(u, "atoms", "position", &c));
    ((double *)c.data)[1] = 0.1; /* 0.1 is no multiple of 2^-10 */
    put_frame(fx->path, 'f', 4, u);
    zmr_frame_free(u);
    zmr_reader *r;
    zmr_frame *f;
    OK(zmr_open(&r, fx->path, 0));
    OK(zmr_read_frame(r, 2, 1, &f));
    OK(zmr_frame_find_column(f, "atoms", "position", &c));
    assert_true(((const double *)c.data)[1] == 0.1);
    zmr_frame_free(f);
    zmr_close(r);
    assert_int_equal(zmr_validate(fx->path, 0), ZMR_ECORRUPT);
    HAS("f/4: column atoms/position: element 1 (0.10000000000000001) is off the grid of its declared precision "
        "0.001");
    /* a system column with its own precision */
    remove_collection(fx->path);
    write_collection(fx->path);
    zmr_frame *sys;
    OK(zmr_frame_create(&sys, ZMR_FRAME_SYSTEM));
    OK(zmr_frame_add_block(sys, "atoms", 3));
    double q[3] = {0.5, 0.25, 0.125};
    uint64_t s3[1] = {3};
    OK(zmr_frame_add_column(sys, "atoms", "charge", ZMR_F64, s3, 1, q, 24, NULL, 0.5));
    void *bytes;
    size_t len;
    OK(zmr_frame_encode(sys, &bytes, &len));
    zmr_frame_free(sys);
    unsigned char k[9];
    fkey(k, 's', 1);
    /* precision 0.5 is the grid of q = 0.25: the encoder rounded 0.125 to
     * 0.0; the stored value is put back off the grid */
    double eighth = 0.125;
    memcpy((unsigned char *)bytes + len - 8, &eighth, 8);
    raw_put(fx->path, k, 9, bytes, len);
    zmr_free(bytes);
    OK(zmr_open(&r, fx->path, 0));
    OK(zmr_read_system(r, 1, &f));
    OK(zmr_frame_find_column(f, "atoms", "charge", &c));
    assert_true(((const double *)c.data)[2] == 0.125);
    zmr_frame_free(f);
    zmr_close(r);
    assert_int_equal(zmr_validate(fx->path, 0), ZMR_ECORRUPT);
    HAS("s/1: column atoms/charge: element 2 (0.125) is off the grid of its declared precision 0.5");
}

/* What the writer normalizes: an undefined cell's vectors are the identity
 * (written so, read so whatever is stored), fills in their typed JSON form,
 * units only strings. */
static void test_writer_normalizes(void **state)
{
    fixture *fx = *state;
    zmr_frame *f;
    OK(zmr_frame_create(&f, ZMR_FRAME_SYSTEM));
    zmr_box b = {.vectors = {0}, .origin = {1, 2, 3}, .cell_defined = false}, got;
    OK(zmr_frame_set_box(f, &b));
    assert_true(zmr_frame_get_box(f, &got));
    for (int k = 0; k < 9; k++)
        assert_true(got.vectors[k] == (k % 4 == 0 ? 1.0 : 0.0));
    assert_true(got.origin[2] == 3.0);
    assert_non_null(strstr(zmr_frame_header_json(f), "\"vectors\":[[1.0,0.0,0.0],[0.0,1.0,0.0],[0.0,0.0,1.0]]"));
    zmr_frame_free(f);
    /* stored zeros read back as the identity */
    size_t len;
    unsigned char *v = mrf1("{\"blocks\":{},\"meta\":{},\"meta_types\":{},\"box\":{\"vectors\":[[0.0,0.0,0.0],"
                            "[0.0,0.0,0.0],[0.0,0.0,0.0]],\"origin\":[0.0,0.0,0.0],\"boundary\":[false,false,false],"
                            "\"cell_defined\":false}}", NULL, 0, &len);
    OK(zmr_frame_decode(&f, v, len, ZMR_FRAME_SYSTEM, "s/0"));
    assert_true(zmr_frame_get_box(f, &got) && got.vectors[0] == 1.0 && got.vectors[8] == 1.0 && got.vectors[1] == 0);
    zmr_frame_free(f);
    free(v);
    zmr_writer *w;
    assert_int_equal(zmr_writer_create(&w, fx->path, "{\"units\":{\"length\":1}}", NULL), ZMR_EINVAL);
    HAS("collection.units.length must be a unit name (a string), got 1");
    OK(zmr_writer_create(&w, fx->path, "{\"units\":{\"length\":\"angstrom\"}}",
                         "{\"meta\":{\"n\":{\"dtype\":\"u64\",\"fill\":18446744073709551615},"
                         "\"k\":{\"dtype\":\"i64\",\"fill\":-9007199254740993},\"s\":{\"dtype\":\"u64\",\"fill\":7}}}"));
    OK(zmr_writer_begin_record(w, NULL, NULL, NULL));
    zmr_frame *u = atoms_frame(ZMR_FRAME_UPDATE, 1, 0);
    OK(zmr_writer_add_frame(w, u));
    zmr_frame_free(u);
    OK(zmr_writer_commit(w));
    char *meta = raw_meta(fx->path);
    assert_non_null(strstr(meta, "\"n\":{\"dtype\":\"u64\",\"fill\":\"18446744073709551615\"}"));
    assert_non_null(strstr(meta, "\"k\":{\"dtype\":\"i64\",\"fill\":\"-9007199254740993\"}"));
    assert_non_null(strstr(meta, "\"s\":{\"dtype\":\"u64\",\"fill\":7}"));
    free(meta);
    OK(zmr_validate(fx->path, 0));
}

/* Read-only opens map the file's pages, not its recorded map size: a file
 * whose meta pages record 1 TiB (as the reference writer's do) opens
 * 1000 times in one process; a damaged map size is named. */
static void test_reference_map_size(void **state)
{
    fixture *fx = *state;
    write_collection(fx->path);
    const long ps = 4096;
    unsigned char tib[8] = {0, 0, 0, 0, 0, 1, 0, 0}; /* 2^40, little-endian */
    zt_patch_file(fx->path, 32, tib, 8);
    zt_patch_file(fx->path, ps + 32, tib, 8);
    enum { N = 1000 };
    zmr_reader **rs = calloc(N, sizeof *rs);
    for (int k = 0; k < N; k++) {
        int st = zmr_open(&rs[k], fx->path, 0);
        if (st != ZMR_OK)
            fail_msg("reader %d of a 1 TiB-map file: %s", k, zmr_last_error());
    }
    zmr_frame *f;
    OK(zmr_read_frame(rs[N - 1], 0, 2, &f));
    zmr_frame_free(f);
    for (int k = 0; k < N; k++)
        zmr_close(rs[k]);
    free(rs);
    OK(zmr_validate(fx->path, 0));
    unsigned char huge[8] = {0, 0, 0, 0, 0, 0, 0, 0x40}; /* 2^62 */
    zt_patch_file(fx->path, 32, huge, 8);
    zmr_reader *r;
    assert_int_equal(zmr_open(&r, fx->path, 0), ZMR_ECORRUPT);
    HAS("LMDB meta page 0 is damaged: map size (mm_mapsize) 4611686018427387904 is beyond any address space");
    unsigned char small[8] = {0, 16, 0, 0, 0, 0, 0, 0}; /* 4096: below the pages used */
    zt_patch_file(fx->path, 32, small, 8);
    assert_int_equal(zmr_validate(fx->path, 0), ZMR_ECORRUPT);
    HAS("map size (mm_mapsize) 4096 is below the bytes its pages use");
}

/* A collection as an item source: items, streams, values, errors. */
static void test_source(void **state)
{
    zt_dir *d = *state;
    const char *path = zt_dir_at(d, "src.mrec.lmdb");
    write_collection(path);
    const char *scalars[] = {"step", "energy", "n", "charge"};
    zmr_source *s;
    OK(zmr_source_open(&s, path, 0, "atoms", "position", scalars, 4, true));
    /* record 0's three frames, record 2's two (record 1's system has no
     * atoms/position, so it is no item) */
    assert_int_equal(zmr_source_length(s), 5);
    assert_int_equal(zmr_source_nstreams(s), 6);
    assert_string_equal(zmr_source_stream_name(s, 0), "position");
    assert_string_equal(zmr_source_stream_name(s, 1), "record");
    assert_string_equal(zmr_source_stream_name(s, 5), "charge");
    assert_null(zmr_source_stream_name(s, 6));
    assert_int_equal(zmr_source_stream_dtype(s, 1), ZMR_U64);
    assert_int_equal(zmr_source_stream_dtype(s, 2), ZMR_I64);
    assert_int_equal(zmr_source_stream_dtype(s, 3), ZMR_F64);
    uint64_t items[5] = {0, 1, 2, 3, 4}, sizes[5], bounds[6] = {0};
    OK(zmr_source_sizes(s, items, 5, sizes));
    for (int i = 0; i < 5; i++) {
        assert_int_equal(sizes[i], 8 + 16 + 8 * 3 * (i < 3 ? 3 : 2));
        bounds[i + 1] = bounds[i] + sizes[i];
    }
    unsigned char buf[512];
    OK(zmr_source_gather(s, 0, items, 5, buf, sizeof buf, bounds));
    uint64_t nd, dims[2];
    double v;
    memcpy(&nd, buf + bounds[2], 8);
    memcpy(dims, buf + bounds[2] + 8, 16);
    memcpy(&v, buf + bounds[2] + 24 + 8, 8);
    assert_int_equal(nd, 2);
    assert_true(dims[0] == 3 && dims[1] == 3);
    assert_true(v == 1.5); /* frame 2: x[1] = 0.5 + its shift 1.0 */
    uint64_t rec[5];
    OK(zmr_source_gather(s, 1, items, 5, rec, sizeof rec, NULL));
    assert_true(rec[0] == 0 && rec[2] == 0 && rec[3] == 2 && rec[4] == 2);
    int64_t step[5];
    OK(zmr_source_gather(s, 2, items, 5, step, sizeof step, NULL));
    assert_true(step[0] == 0 && step[2] == 2 && step[3] == 100 && step[4] == 101);
    double e[5], n[5], charge[5];
    OK(zmr_source_gather(s, 3, items, 5, e, sizeof e, NULL));
    assert_true(e[0] == -1.5 && isnan(e[1]) && isnan(e[4])); /* the declared fill, NaN */
    OK(zmr_source_gather(s, 4, items, 5, n, sizeof n, NULL));
    assert_true(n[0] == 18446744073709551615.0 && n[3] == 1.0);
    OK(zmr_source_gather(s, 5, items, 5, charge, sizeof charge, NULL));
    assert_true(isnan(charge[0])); /* a frame item reads its update's meta, not the system's */
    /* errors name what is wrong */
    uint64_t past = 5;
    assert_int_equal(zmr_source_gather(s, 1, &past, 1, rec, sizeof rec, NULL), ZMR_ERANGE);
    assert_int_equal(zmr_source_gather(s, 6, items, 1, rec, sizeof rec, NULL), ZMR_EINVAL);
    assert_int_equal(zmr_source_gather(s, 1, items, 5, rec, 16, NULL), ZMR_EINVAL);
    bounds[1] -= 8;
    assert_int_equal(zmr_source_gather(s, 0, items, 1, buf, sizeof buf, bounds), ZMR_EINVAL);
    zmr_source_free(s);
    OK(zmr_source_open(&s, path, 0, "atoms", "nope", NULL, 0, false));
    assert_int_equal(zmr_source_sizes(s, items, 1, sizes), ZMR_ECORRUPT);
    if (!strstr(zmr_last_error(), "mrec record 0 frame 0: atoms/nope is missing"))
        fail_msg("%s", zmr_last_error());
    zmr_source_free(s);
    /* several columns must each be 1-d f64 of one length */
    OK(zmr_source_open(&s, path, 0, "atoms", "position,position", NULL, 0, false));
    assert_int_equal(zmr_source_sizes(s, items, 1, sizes), ZMR_ECORRUPT);
    assert_non_null(strstr(zmr_last_error(), "atoms/position is not a 1-d column"));
    zmr_source_free(s);
    assert_int_equal(zmr_source_open(&s, path, 0, "atoms", "a,,b", NULL, 0, true), ZMR_EINVAL);
    assert_null(s);
    assert_int_equal(zmr_source_open(&s, zt_dir_at(d, "none"), 0, "atoms", "x", NULL, 0, true), ZMR_EIO);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_names),
        cmocka_unit_test(test_typed_json),
        cmocka_unit_test(test_precision),
        cmocka_unit_test(test_byte_exact),
        cmocka_unit_test(test_frame_refusals),
        cmocka_unit_test_setup_teardown(test_roundtrip, setup, zt_dir_teardown),
        cmocka_unit_test_setup_teardown(test_writer_refusals, setup, zt_dir_teardown),
        cmocka_unit_test_setup_teardown(test_map_growth, setup, zt_dir_teardown),
        cmocka_unit_test_setup_teardown(test_file_refusals, setup, zt_dir_teardown),
        cmocka_unit_test_setup_teardown(test_fuzz, setup, zt_dir_teardown),
        cmocka_unit_test_setup_teardown(test_truncated, setup, zt_dir_teardown),
        cmocka_unit_test_setup_teardown(test_lmdb_meta_pages, setup, zt_dir_teardown),
        cmocka_unit_test_setup_teardown(test_value_past_file, setup, zt_dir_teardown),
        cmocka_unit_test_setup_teardown(test_undeclared_update_meta, setup, zt_dir_teardown),
        cmocka_unit_test_setup_teardown(test_aligned_blocks, setup, zt_dir_teardown),
        cmocka_unit_test_setup_teardown(test_trajectory_references, setup, zt_dir_teardown),
        cmocka_unit_test_setup_teardown(test_layout_example_read, setup, zt_dir_teardown),
        cmocka_unit_test_setup_teardown(test_layout_example_write, setup, zt_dir_teardown),
        cmocka_unit_test_setup_teardown(test_schema_declarations, setup, zt_dir_teardown),
        cmocka_unit_test_setup_teardown(test_canonical_keys, setup, zt_dir_teardown),
        cmocka_unit_test_setup_teardown(test_zero_frame_trajectory, setup, zt_dir_teardown),
        cmocka_unit_test_setup_teardown(test_open_messages, setup, zt_dir_teardown),
        cmocka_unit_test_setup_teardown(test_cell_and_grid_rules, setup, zt_dir_teardown),
        cmocka_unit_test_setup_teardown(test_validate_declarations, setup, zt_dir_teardown),
        cmocka_unit_test_setup_teardown(test_validate_rules, setup, zt_dir_teardown),
        cmocka_unit_test_setup_teardown(test_validate_grid_and_alignment, setup, zt_dir_teardown),
        cmocka_unit_test_setup_teardown(test_off_grid, setup, zt_dir_teardown),
        cmocka_unit_test_setup_teardown(test_writer_normalizes, setup, zt_dir_teardown),
        cmocka_unit_test_setup_teardown(test_reference_map_size, setup, zt_dir_teardown),
        cmocka_unit_test_setup_teardown(test_source, setup, zt_dir_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
