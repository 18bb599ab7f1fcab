/*
 * torture_concat.c - many stores as one dataset: concatenations
 * (zrs_concat, zre_gather_multi), their loader streams, and weighted
 * mixtures (zsm_mixture in libzsampler, zld_mixture in libzloader).
 *
 * Records encode (shard tag, local index), so every gathered byte can be
 * checked against where it must have come from.
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

#include <zloader.h>

#include "zr_test_util.h"

#define MAXSHARDS 16

typedef zt_dir fixture;

static int setup(void **state) { return zt_dir_setup(state, "concat"); }

/* Dense record words: word j of record i of the shard tagged `tag`. */
static uint32_t word(uint32_t tag, uint64_t i, uint64_t j)
{
    return tag * 1000003u + (uint32_t)i * 31u + (uint32_t)j;
}

/* A dense u32[words] store of n records at <root>/<name>. */
static zrs_store *make_dense(const fixture *f, const char *name, uint32_t tag, uint64_t n,
                             uint64_t words, zre_codec codec, char *path_out)
{
    char path[700];
    snprintf(path, sizeof path, "%s/%s", f->dir, name);
    if (path_out)
        strcpy(path_out, path);
    zrs_store *s = NULL;
    uint64_t shape[1] = {words};
    assert_int_equal(zrs_create_dense(&s, path, ZRS_UINT32, shape, 1, codec), ZR_OK);
    if (n > 0) {
        uint32_t *buf = malloc(n * words * 4);
        assert_non_null(buf);
        for (uint64_t i = 0; i < n; i++)
            for (uint64_t j = 0; j < words; j++)
                buf[i * words + j] = word(tag, i, j);
        assert_int_equal(zrs_append_dense(s, buf, n * words * 4, n, NULL), ZR_OK);
        free(buf);
    }
    return s;
}

/* Ragged i32 record i of shard `tag`: 1-D of i % 4 + 1 values. */
static uint64_t rlen(uint64_t i) { return i % 4 + 1; }
static int32_t rval(uint32_t tag, uint64_t i, uint64_t k)
{
    return (int32_t)(tag * 100000u + (uint32_t)i * 10u + (uint32_t)k);
}

static zrs_store *make_ragged(const fixture *f, const char *name, uint32_t tag, uint64_t n,
                              zre_codec codec)
{
    char path[700];
    snprintf(path, sizeof path, "%s/%s", f->dir, name);
    zrs_store *s = NULL;
    assert_int_equal(zrs_create_ragged(&s, path, ZRS_INT32, codec), ZR_OK);
    unsigned char *packed = malloc(n * (16 + 16));
    uint64_t *bounds = malloc((n + 1) * sizeof *bounds);
    assert_non_null(packed);
    assert_non_null(bounds);
    uint64_t pos = 0;
    for (uint64_t i = 0; i < n; i++) {
        uint64_t ndim = 1, d = rlen(i);
        bounds[i] = pos;
        memcpy(packed + pos, &ndim, 8);
        memcpy(packed + pos + 8, &d, 8);
        pos += 16;
        for (uint64_t k = 0; k < d; k++) {
            int32_t v = rval(tag, i, k);
            memcpy(packed + pos, &v, 4);
            pos += 4;
        }
    }
    bounds[n] = pos;
    assert_int_equal(zrs_append_ragged(s, packed, bounds, n, NULL), ZR_OK);
    free(packed);
    free(bounds);
    return s;
}

/* Sixteen dense shards of varied lengths (one empty), alternating raw and
 * zstd; lens[k] records in shard k, tag k + 1. */
static const uint64_t lens16[MAXSHARDS] = {100, 1, 0, 257, 64, 3, 500, 77,
                                           128, 9, 300, 2, 45, 211, 16, 90};

static void make16(const fixture *f, zrs_store **st, uint64_t words)
{
    for (int k = 0; k < MAXSHARDS; k++) {
        char name[32];
        snprintf(name, sizeof name, "d%02d", k);
        st[k] = make_dense(f, name, (uint32_t)k + 1, lens16[k], words,
                           k % 2 ? ZRE_CODEC_ZSTD : ZRE_CODEC_RAW, NULL);
    }
}

/* Where global index g lives in lens16. */
static void where16(uint64_t g, uint32_t *shard, uint64_t *local)
{
    uint32_t k = 0;
    while (g >= lens16[k]) {
        g -= lens16[k];
        k++;
    }
    *shard = k;
    *local = g;
}

/* ------------------------------------------------------------- concat */

static void check_dense_gather(zrs_concat *c, uint64_t words, uint64_t count, uint64_t seed)
{
    uint64_t total = zrs_concat_length(c);
    int64_t *idx = malloc(count * sizeof *idx);
    uint32_t *dst = malloc(count * words * 4);
    assert_non_null(idx);
    assert_non_null(dst);
    uint64_t s = seed;
    for (uint64_t i = 0; i < count; i++) {
        uint64_t g = zt_xorshift64(&s) % total;
        /* some negatives, some runs of neighbours */
        if (i % 7 == 3)
            idx[i] = (int64_t)g - (int64_t)total;
        else if (i > 0 && i % 5 == 1 && idx[i - 1] >= 0 && (uint64_t)idx[i - 1] + 1 < total)
            idx[i] = idx[i - 1] + 1;
        else
            idx[i] = (int64_t)g;
    }
    assert_int_equal(zrs_concat_gather_dense(c, idx, count, dst, count * words * 4), ZR_OK);
    for (uint64_t i = 0; i < count; i++) {
        uint64_t g = idx[i] < 0 ? (uint64_t)(idx[i] + (int64_t)total) : (uint64_t)idx[i];
        uint32_t k;
        uint64_t local;
        where16(g, &k, &local);
        for (uint64_t j = 0; j < words; j++)
            if (dst[i * words + j] != word(k + 1, local, j))
                fail_msg("position %llu (index %lld -> shard %u local %llu) word %llu: got %u",
                         (unsigned long long)i, (long long)idx[i], k, (unsigned long long)local,
                         (unsigned long long)j, dst[i * words + j]);
    }
    free(idx);
    free(dst);
}

static void test_concat_dense(void **state)
{
    fixture *f = *state;
    zrs_store *st[MAXSHARDS];
    make16(f, st, 64); /* 256-byte records */
    zrs_concat *c = NULL;
    assert_int_equal(zrs_concat_create(&c, st, MAXSHARDS), ZR_OK);
    uint64_t total = 0;
    for (int k = 0; k < MAXSHARDS; k++)
        total += lens16[k];
    assert_int_equal(zrs_concat_length(c), total);
    assert_int_equal(zrs_concat_count(c), MAXSHARDS);
    assert_int_equal(zrs_concat_record_size(c), 256);
    /* A concatenation described for flips as its shards are. */
    zld_items ci, si;
    zld_flip fl;
    assert_int_equal(zld_items_from_concat(c, &ci), ZR_OK);
    assert_int_equal(zld_items_from_store(st[0], &si), ZR_OK);
    assert_memory_equal(&ci, &si, sizeof ci);
    assert_int_equal(ci.kind, ZRS_DENSE);
    assert_int_equal(zld_flip_resolve(&ci, 0, NULL, 0.5, &fl), ZR_OK);
    assert_int_equal(fl.width * fl.elem_size * (256 / (fl.width * fl.elem_size)), 256);
    assert_int_equal(zld_items_from_concat(NULL, &ci), ZR_EINVAL);
    assert_int_equal(zrs_concat_offset(c, 3), 101);
    assert_int_equal(zrs_concat_offset(c, MAXSHARDS), total);
    assert_int_equal(zrs_concat_kind(c), ZRS_DENSE);
    assert_int_equal(zrs_concat_item_shape(c)[0], 64);

    /* locate: every index, against a plain walk */
    for (uint64_t g = 0; g < total; g++) {
        int64_t v = (int64_t)g;
        uint32_t k;
        uint64_t local, wk_local;
        uint32_t wk;
        assert_int_equal(zrs_concat_locate(c, &v, 1, &k, &local), ZR_OK);
        where16(g, &wk, &wk_local);
        assert_int_equal(k, wk);
        assert_int_equal(local, wk_local);
    }
    /* inline (small) and pool-sharded (>= 1 MiB raw) gathers */
    check_dense_gather(c, 64, 5, 1);
    check_dense_gather(c, 64, 200, 2);
    check_dense_gather(c, 64, 6000, 3);

    int64_t bad = (int64_t)total;
    uint32_t out[64];
    assert_int_equal(zrs_concat_gather_dense(c, &bad, 1, out, sizeof out), ZR_ERANGE);
    zt_assert_mentions(zr_last_error(), "out of range");
    bad = -(int64_t)total - 1;
    assert_int_equal(zrs_concat_gather_dense(c, &bad, 1, out, sizeof out), ZR_ERANGE);
    int64_t ok = 0;
    assert_int_equal(zrs_concat_gather_dense(c, &ok, 1, out, 10), ZR_EINVAL);
    uint64_t sz;
    assert_int_equal(zrs_concat_ragged_sizes(c, &ok, 1, &sz), ZR_EINVAL);
    zt_assert_mentions(zr_last_error(), "dense");
    assert_int_equal(zrs_concat_advise(c, &ok, 1), ZR_OK);

    zrs_concat_close(c);
    /* the stores were borrowed: still open and usable */
    assert_int_equal(zrs_gather_dense(st[0], &ok, 1, out, sizeof out), ZR_OK);
    assert_int_equal(out[0], word(1, 0, 0));
    for (int k = 0; k < MAXSHARDS; k++)
        zrs_close(st[k]);
}

static void test_concat_ragged(void **state)
{
    fixture *f = *state;
    zrs_store *st[3] = {make_ragged(f, "r0", 1, 50, ZRE_CODEC_RAW),
                        make_ragged(f, "r1", 2, 7, ZRE_CODEC_ZSTD),
                        make_ragged(f, "r2", 3, 120, ZRE_CODEC_ZSTD)};
    zrs_concat *c = NULL;
    assert_int_equal(zrs_concat_create(&c, st, 3), ZR_OK);
    assert_int_equal(zrs_concat_length(c), 177);
    const uint64_t n = 400;
    int64_t idx[400];
    uint64_t sizes[400], bounds[401];
    uint64_t s = 9;
    for (uint64_t i = 0; i < n; i++)
        idx[i] = (int64_t)(zt_xorshift64(&s) % 177);
    assert_int_equal(zrs_concat_ragged_sizes(c, idx, n, sizes), ZR_OK);
    bounds[0] = 0;
    for (uint64_t i = 0; i < n; i++)
        bounds[i + 1] = bounds[i] + sizes[i];
    unsigned char *dst = malloc(bounds[n]);
    assert_non_null(dst);
    assert_int_equal(zrs_concat_gather_ragged(c, idx, n, dst, bounds[n], bounds), ZR_OK);
    for (uint64_t i = 0; i < n; i++) {
        uint64_t g = (uint64_t)idx[i];
        uint32_t tag = g < 50 ? 1 : g < 57 ? 2 : 3;
        uint64_t local = g < 50 ? g : g < 57 ? g - 50 : g - 57;
        assert_int_equal(sizes[i], 16 + 4 * rlen(local));
        size_t nd;
        uint64_t dims[ZRS_MAX_NDIM], off;
        assert_int_equal(zrs_ragged_decode(dst + bounds[i], sizes[i], ZRS_INT32, &nd, dims, &off),
                         ZR_OK);
        assert_int_equal(dims[0], rlen(local));
        for (uint64_t k = 0; k < dims[0]; k++) {
            int32_t v;
            memcpy(&v, dst + bounds[i] + off + 4 * k, 4);
            assert_int_equal(v, rval(tag, local, k));
        }
    }
    free(dst);
    zrs_concat_close(c);
    for (int k = 0; k < 3; k++)
        zrs_close(st[k]);
}

static void test_concat_identity_mismatch(void **state)
{
    fixture *f = *state;
    char pa[700], pb[700];
    zrs_store *a = make_dense(f, "a", 1, 3, 4, ZRE_CODEC_RAW, pa);
    zrs_store *b = make_dense(f, "b", 2, 3, 5, ZRE_CODEC_RAW, pb);
    zrs_store *r = make_ragged(f, "r", 3, 3, ZRE_CODEC_RAW);
    zrs_store *d = NULL;
    char pd[700];
    snprintf(pd, sizeof pd, "%s/d", f->dir);
    uint64_t shape[1] = {4};
    assert_int_equal(zrs_create_dense(&d, pd, ZRS_FLOAT32, shape, 1, ZRE_CODEC_RAW), ZR_OK);

    zrs_concat *c = NULL;
    zrs_store *ab[2] = {a, b};
    assert_int_equal(zrs_concat_create(&c, ab, 2), ZR_EINVAL);
    assert_null(c);
    zt_assert_mentions(zr_last_error(), "item_shape");
    zt_assert_mentions(zr_last_error(), pa);
    zt_assert_mentions(zr_last_error(), pb);
    zt_assert_mentions(zr_last_error(), "(4,)");
    zt_assert_mentions(zr_last_error(), "(5,)");
    zrs_store *ad[2] = {a, d};
    assert_int_equal(zrs_concat_create(&c, ad, 2), ZR_EINVAL);
    zt_assert_mentions(zr_last_error(), "dtype");
    zt_assert_mentions(zr_last_error(), "<f4");
    zrs_store *ar[2] = {a, r};
    assert_int_equal(zrs_concat_create(&c, ar, 2), ZR_EINVAL);
    zt_assert_mentions(zr_last_error(), "kind");
    zrs_store *an[2] = {a, NULL};
    assert_int_equal(zrs_concat_create(&c, an, 2), ZR_EINVAL);
    assert_int_equal(zrs_concat_create(&c, ab, 0), ZR_EINVAL);
    zrs_close(a);
    zrs_close(b);
    zrs_close(r);
    zrs_close(d);

    /* open by paths: a failure closes everything it opened */
    char missing[720];
    snprintf(missing, sizeof missing, "%s/nope", f->dir);
    const char *paths[3] = {pa, missing, pb};
    assert_int_equal(zrs_concat_open(&c, paths, 3, ZRE_OPEN_READONLY), ZR_ENOTSTORE);
    zt_assert_mentions(zr_last_error(), missing);
    zrs_store *w = NULL;
    assert_int_equal(zrs_open(&w, pa), ZR_OK); /* no read lock was left behind */
    zrs_close(w);
    const char *paths2[2] = {pa, pb};
    assert_int_equal(zrs_concat_open(&c, paths2, 2, ZRE_OPEN_READONLY), ZR_EINVAL);
    zt_assert_mentions(zr_last_error(), "item_shape");
    assert_int_equal(zrs_open(&w, pb), ZR_OK);
    zrs_close(w);
}

static void test_concat_open_owns(void **state)
{
    fixture *f = *state;
    char p[3][700];
    for (int k = 0; k < 3; k++) {
        char name[8];
        snprintf(name, sizeof name, "o%d", k);
        zrs_close(make_dense(f, name, (uint32_t)k + 1, 10 + (uint64_t)k, 2, ZRE_CODEC_ZSTD, p[k]));
    }
    const char *paths[3] = {p[0], p[1], p[2]};
    zrs_concat *c = NULL, *c2 = NULL;
    assert_int_equal(zrs_concat_open(&c, paths, 3, ZRE_OPEN_READONLY), ZR_OK);
    /* read-only: a second reader shares, and one writer may open beside
     * them (appends never disturb readers), but a delete is refused */
    assert_int_equal(zrs_concat_open(&c2, paths, 3, ZRE_OPEN_READONLY), ZR_OK);
    zrs_store *w = NULL;
    assert_int_equal(zrs_open(&w, p[1]), ZR_OK);
    int64_t del = 0;
    assert_int_equal(zrs_delete(w, &del, 1), ZR_EBUSY);
    assert_int_equal(zrs_close(w), ZR_OK);
    assert_int_equal(zrs_concat_length(c), 33);
    int64_t idx[2] = {10, -1};
    uint32_t out[4];
    assert_int_equal(zrs_concat_gather_dense(c, idx, 2, out, sizeof out), ZR_OK);
    assert_int_equal(out[0], word(2, 0, 0));
    assert_int_equal(out[2], word(3, 11, 0));
    assert_int_equal(zrs_concat_close(c), ZR_OK);
    assert_int_equal(zrs_concat_close(c2), ZR_OK);
    assert_int_equal(zrs_open(&w, p[1]), ZR_OK); /* the shards were closed */
    zrs_close(w);
}

static void test_concat_aligned(void **state)
{
    fixture *f = *state;
    zrs_store *x[2] = {make_dense(f, "x0", 1, 10, 1, ZRE_CODEC_RAW, NULL),
                       make_dense(f, "x1", 2, 20, 1, ZRE_CODEC_RAW, NULL)};
    zrs_store *y[2] = {make_ragged(f, "y0", 1, 10, ZRE_CODEC_RAW),
                       make_ragged(f, "y1", 2, 20, ZRE_CODEC_RAW)};
    zrs_store *z[2] = {make_dense(f, "z0", 1, 20, 1, ZRE_CODEC_RAW, NULL),
                       make_dense(f, "z1", 2, 10, 1, ZRE_CODEC_RAW, NULL)};
    zrs_concat *cx, *cy, *cz, *c1;
    assert_int_equal(zrs_concat_create(&cx, x, 2), ZR_OK);
    assert_int_equal(zrs_concat_create(&cy, y, 2), ZR_OK);
    assert_int_equal(zrs_concat_create(&cz, z, 2), ZR_OK);
    assert_int_equal(zrs_concat_create(&c1, x, 1), ZR_OK);
    assert_int_equal(zrs_concat_check_aligned(cx, cy), ZR_OK);
    /* same total (30), shards paired wrongly */
    assert_int_equal(zrs_concat_check_aligned(cx, cz), ZR_EINVAL);
    zt_assert_mentions(zr_last_error(), "shard 0");
    zt_assert_mentions(zr_last_error(), "z0");
    assert_int_equal(zrs_concat_check_aligned(cx, c1), ZR_EINVAL);
    zt_assert_mentions(zr_last_error(), "2 shards");

    /* a loader over two aligned concatenations: records stay paired */
    zld_stream sx, sy;
    assert_int_equal(zld_stream_from_concat(&sx, cx), ZR_OK);
    assert_int_equal(zld_stream_from_concat(&sy, cy), ZR_OK);
    zld_stream both[2] = {sx, sy};
    zld_options o = ZLD_OPTIONS_INIT;
    o.batch_size = 8;
    o.num_workers = 2;
    zld_loader *l = NULL;
    assert_int_equal(zld_create_streams(&l, both, 2, &o), ZR_OK);
    for (int step = 0; step < 10; step++) {
        zld_batch *b = NULL;
        assert_int_equal(zld_next(l, &b), ZR_OK);
        const uint64_t *ix = zld_batch_indices(b);
        uint64_t nb;
        const uint32_t *dx = zld_batch_data(b, 0, &nb);
        const unsigned char *dy = zld_batch_data(b, 1, &nb);
        const uint64_t *by = zld_batch_bounds(b, 1);
        for (int i = 0; i < 8; i++) {
            uint32_t tag = ix[i] < 10 ? 1 : 2;
            uint64_t local = ix[i] < 10 ? ix[i] : ix[i] - 10;
            assert_int_equal(dx[i], word(tag, local, 0));
            int32_t v;
            memcpy(&v, dy + by[i] + 16, 4);
            assert_int_equal(v, rval(tag, local, 0));
        }
        zld_batch_free(b);
    }
    zld_close(l);
    zrs_concat_close(cx);
    zrs_concat_close(cy);
    zrs_concat_close(cz);
    zrs_concat_close(c1);
    for (int k = 0; k < 2; k++) {
        zrs_close(x[k]);
        zrs_close(y[k]);
        zrs_close(z[k]);
    }
}

/* The loader over 16 concatenated shards hands out exactly the records
 * the single store of the same records would, for any worker count. */
static void test_concat_loader_matches_one_store(void **state)
{
    fixture *f = *state;
    zrs_store *st[MAXSHARDS];
    make16(f, st, 8);
    uint64_t total = 0;
    for (int k = 0; k < MAXSHARDS; k++)
        total += lens16[k];
    zrs_concat *c = NULL;
    assert_int_equal(zrs_concat_create(&c, st, MAXSHARDS), ZR_OK);
    zld_stream sc;
    assert_int_equal(zld_stream_from_concat(&sc, c), ZR_OK);
    assert_int_equal(sc.length, total);
    uint32_t *first = NULL;
    for (unsigned workers = 1; workers <= 3; workers += 2) {
        zld_options o = ZLD_OPTIONS_INIT;
        o.batch_size = 64;
        o.seed = 5;
        o.num_workers = workers;
        o.readahead = 2;
        zld_loader *l = NULL;
        assert_int_equal(zld_create_streams(&l, &sc, 1, &o), ZR_OK);
        uint32_t *all = malloc(40 * 64 * 32);
        assert_non_null(all);
        for (int step = 0; step < 40; step++) {
            zld_batch *b = NULL;
            assert_int_equal(zld_next(l, &b), ZR_OK);
            uint64_t nb;
            const uint32_t *d = zld_batch_data(b, 0, &nb);
            const uint64_t *ix = zld_batch_indices(b);
            assert_int_equal(nb, 64 * 32);
            for (int i = 0; i < 64; i++) {
                uint32_t k;
                uint64_t local;
                where16(ix[i], &k, &local);
                assert_int_equal(d[i * 8 + 7], word(k + 1, local, 7));
            }
            memcpy(all + step * 64 * 8, d, nb);
            zld_batch_free(b);
        }
        zld_close(l);
        if (first == NULL) {
            first = all;
        } else {
            assert_memory_equal(first, all, 40 * 64 * 32);
            free(all);
        }
    }
    free(first);
    zrs_concat_close(c);
    for (int k = 0; k < MAXSHARDS; k++)
        zrs_close(st[k]);
}

static void test_gather_multi_args(void **state)
{
    fixture *f = *state;
    zrs_store *a = make_dense(f, "ma", 1, 4, 2, ZRE_CODEC_RAW, NULL);
    zrs_store *b = make_dense(f, "mb", 2, 4, 2, ZRE_CODEC_ZSTD, NULL);
    zre_engine *e[2] = {zrs_engine(a), zrs_engine(b)};
    uint64_t idx[3] = {3, 0, 2};
    uint32_t which[3] = {1, 0, 1};
    uint32_t out[6];
    assert_int_equal(zre_gather_multi(e, 2, which, idx, 3, out, sizeof out, 8, NULL), ZR_OK);
    assert_int_equal(out[0], word(2, 3, 0));
    assert_int_equal(out[2], word(1, 0, 0));
    assert_int_equal(out[5], word(2, 2, 1));
    which[1] = 2;
    assert_int_equal(zre_gather_multi(e, 2, which, idx, 3, out, sizeof out, 8, NULL), ZR_EINVAL);
    zt_assert_mentions(zr_last_error(), "which[1]");
    which[1] = 0;
    idx[1] = 4;
    assert_int_equal(zre_gather_multi(e, 2, which, idx, 3, out, sizeof out, 8, NULL), ZR_ERANGE);
    zt_assert_mentions(zr_last_error(), zrs_path(a));
    assert_int_equal(zre_gather_multi(NULL, 2, which, idx, 3, out, sizeof out, 8, NULL), ZR_EINVAL);
    assert_int_equal(zre_gather_multi(e, 0, which, idx, 3, out, sizeof out, 8, NULL), ZR_EINVAL);
    zrs_close(a);
    zrs_close(b);
}

/* ------------------------------------------------------------ mixture */

static void test_mixture_sampler(void **state)
{
    (void)state;
    const double w[3] = {5.0, 3.0, 2.0};
    const uint64_t len[3] = {1000, 70, 5000};
    const zsm_mode modes[3] = {ZSM_CYCLIC, ZSM_IID, ZSM_SEQUENTIAL};
    zsm_mixture m = {w, len, modes, 3, 42, 16, 0, 4};
    assert_int_equal(zsm_mixture_validate(&m), ZSM_OK);
    uint64_t count[3] = {0, 0, 0};
    const uint64_t steps = 2000;
    uint32_t src[64];
    uint64_t idx[64];
    for (uint64_t step = 0; step < steps; step++) {
        /* the global batch, then every rank's slice of it */
        assert_int_equal(zsm_mixture_positions(&m, step, 0, 64, src, idx, NULL), ZSM_OK);
        /* whole windows with scratch: the same values */
        {
            uint32_t s3[64];
            uint64_t i3[64], scr[64];
            assert_int_equal(zsm_mixture_positions(&m, step, 0, 64, s3, i3, scr), ZSM_OK);
            assert_memory_equal(s3, src, sizeof s3);
            assert_memory_equal(i3, idx, sizeof i3);
            assert_int_equal(zsm_mixture_positions(&m, step, 32, 32, s3, i3, scr), ZSM_OK);
            assert_memory_equal(s3, src + 32, 32 * sizeof *s3);
            assert_memory_equal(i3, idx + 32, 32 * sizeof *i3);
            assert_int_equal(zsm_mixture_positions(&m, step, 5, 20, s3, i3, scr), ZSM_OK);
            assert_memory_equal(i3, idx + 5, 20 * sizeof *i3);
        }
        for (uint32_t r = 0; r < 4; r++) {
            zsm_mixture mr = m;
            mr.rank = r;
            uint32_t s2[16];
            uint64_t i2[16];
            uint64_t scr2[16];
            assert_int_equal(zsm_mixture_indices(&mr, step, s2, i2, r % 2 ? scr2 : NULL), ZSM_OK);
            assert_memory_equal(s2, src + 16 * r, sizeof s2);
            assert_memory_equal(i2, idx + 16 * r, sizeof i2);
        }
        for (int j = 0; j < 64; j++) {
            assert_true(src[j] < 3);
            assert_true(idx[j] < len[src[j]]);
            count[src[j]]++;
            /* a cyclic source never repeats within a step */
            for (int i = 0; i < j; i++)
                if (src[i] == 0 && src[j] == 0)
                    assert_int_not_equal(idx[i], idx[j]);
        }
    }
    /* Pearson's chi-square with 2 degrees of freedom over 128000 draws:
     * P(X > 18.4) = 1e-4 for a correct sampler; fixed seed, so the
     * outcome never changes from run to run. */
    double n = (double)(steps * 64), chi = 0.0;
    for (int k = 0; k < 3; k++) {
        double e = n * w[k] / 10.0;
        chi += ((double)count[k] - e) * ((double)count[k] - e) / e;
    }
    if (chi > 18.4)
        fail_msg("source shares %llu %llu %llu of %.0f, chi-square %.2f",
                 (unsigned long long)count[0], (unsigned long long)count[1],
                 (unsigned long long)count[2], n, chi);
    /* and a strong bias is caught: 50/30/20 is not 40/40/20 */
    double chi_wrong = 0.0;
    const double wrong[3] = {4.0, 4.0, 2.0};
    for (int k = 0; k < 3; k++) {
        double e = n * wrong[k] / 10.0;
        chi_wrong += ((double)count[k] - e) * ((double)count[k] - e) / e;
    }
    assert_true(chi_wrong > 18.4);

    /* pure function: the same step twice, another step differs */
    uint32_t sa[64], sb[64];
    uint64_t ia[64], ib[64];
    assert_int_equal(zsm_mixture_positions(&m, 123456789, 0, 64, sa, ia, NULL), ZSM_OK);
    assert_int_equal(zsm_mixture_positions(&m, 123456789, 0, 64, sb, ib, NULL), ZSM_OK);
    assert_memory_equal(sa, sb, sizeof sa);
    assert_memory_equal(ia, ib, sizeof ia);
    assert_int_equal(zsm_mixture_positions(&m, 123456790, 0, 64, sb, ib, NULL), ZSM_OK);
    assert_true(memcmp(ia, ib, sizeof ia) != 0);

    /* validation */
    zsm_mixture bad = m;
    const double w0[3] = {1.0, 0.0, 1.0};
    bad.weights = w0;
    assert_int_equal(zsm_mixture_validate(&bad), ZSM_EINVAL);
    const double wn[3] = {1.0, NAN, 1.0};
    bad.weights = wn;
    assert_int_equal(zsm_mixture_validate(&bad), ZSM_EINVAL);
    bad = m;
    bad.batch_size = 300; /* G = 1200 > cyclic source 0 of 1000 */
    assert_int_equal(zsm_mixture_validate(&bad), ZSM_EINVAL);
    bad = m;
    bad.rank = 4;
    assert_int_equal(zsm_mixture_validate(&bad), ZSM_EINVAL);
    bad = m;
    bad.nsources = 0;
    assert_int_equal(zsm_mixture_validate(&bad), ZSM_EINVAL);
    assert_int_equal(zsm_mixture_positions(&m, 0, 60, 5, src, idx, NULL), ZSM_EINVAL);
}

/* A loader over a two-source mixture: every record is the one
 * zld_mixture_locate names, for any worker count and any start step. */
static void test_mixture_loader(void **state)
{
    fixture *f = *state;
    /* source A: two shards (dense + ragged, sharded alike); source B: one */
    zrs_store *ax[2] = {make_dense(f, "ax0", 1, 40, 4, ZRE_CODEC_RAW, NULL),
                        make_dense(f, "ax1", 2, 30, 4, ZRE_CODEC_ZSTD, NULL)};
    zrs_store *ay[2] = {make_ragged(f, "ay0", 1, 40, ZRE_CODEC_RAW),
                        make_ragged(f, "ay1", 2, 30, ZRE_CODEC_ZSTD)};
    zrs_store *bx = make_dense(f, "bx", 7, 500, 4, ZRE_CODEC_ZSTD, NULL);
    zrs_store *by = make_ragged(f, "by", 7, 500, ZRE_CODEC_RAW);
    zrs_concat *cax, *cay, *cbx, *cby;
    assert_int_equal(zrs_concat_create(&cax, ax, 2), ZR_OK);
    assert_int_equal(zrs_concat_create(&cay, ay, 2), ZR_OK);
    assert_int_equal(zrs_concat_create(&cbx, &bx, 1), ZR_OK);
    assert_int_equal(zrs_concat_create(&cby, &by, 1), ZR_OK);
    zrs_concat *cs[4] = {cax, cay, cbx, cby};
    const double w[2] = {1.0, 3.0};
    const zsm_mode modes[2] = {ZSM_CYCLIC, ZSM_IID};
    zld_mixture *m = NULL;
    assert_int_equal(zld_mixture_create(&m, cs, 2, 2, w, modes, 7, 16, 1), ZR_OK);
    zld_stream st[2];
    assert_int_equal(zld_mixture_stream(m, 0, &st[0]), ZR_OK);
    assert_int_equal(zld_mixture_stream(m, 1, &st[1]), ZR_OK);
    assert_int_equal(st[0].length, zld_mixture_length(m));
    assert_int_equal(st[0].length % 16, 0);

    uint64_t seen[2] = {0, 0};
    uint32_t *firstrun = malloc(30 * 16 * 16);
    assert_non_null(firstrun);
    for (unsigned workers = 1; workers <= 2; workers++) {
        zld_options o = ZLD_OPTIONS_INIT;
        o.batch_size = 16;
        o.mode = ZSM_SEQUENTIAL;
        o.num_workers = workers;
        o.start_step = workers == 1 ? 0 : 10; /* resume mid-run */
        zld_loader *l = NULL;
        assert_int_equal(zld_create_streams(&l, st, 2, &o), ZR_OK);
        for (uint64_t step = o.start_step; step < 30; step++) {
            zld_batch *b = NULL;
            assert_int_equal(zld_next(l, &b), ZR_OK);
            const uint64_t *ix = zld_batch_indices(b);
            uint32_t src[16];
            uint64_t loc[16];
            assert_int_equal(zld_mixture_locate(m, ix, 16, src, loc), ZR_OK);
            /* the same as the sampler's mixture for this step */
            const uint64_t lens[2] = {70, 500};
            zsm_mixture zm = {w, lens, modes, 2, 7, 16, 0, 1};
            uint32_t s2[16];
            uint64_t l2[16];
            assert_int_equal(zsm_mixture_indices(&zm, step, s2, l2, NULL), ZSM_OK);
            assert_memory_equal(src, s2, sizeof src);
            assert_memory_equal(loc, l2, sizeof loc);
            uint64_t nb;
            const uint32_t *dx = zld_batch_data(b, 0, &nb);
            const unsigned char *dy = zld_batch_data(b, 1, &nb);
            const uint64_t *bd = zld_batch_bounds(b, 1);
            for (int i = 0; i < 16; i++) {
                uint32_t tag = src[i] == 1 ? 7 : loc[i] < 40 ? 1 : 2;
                uint64_t local = src[i] == 1 ? loc[i] : loc[i] < 40 ? loc[i] : loc[i] - 40;
                assert_int_equal(dx[i * 4 + 3], word(tag, local, 3));
                assert_int_equal(bd[i + 1] - bd[i], 16 + 4 * rlen(local));
                int32_t v;
                memcpy(&v, dy + bd[i] + 16, 4);
                assert_int_equal(v, rval(tag, local, 0));
                if (workers == 1)
                    seen[src[i]]++;
            }
            if (workers == 1)
                memcpy(firstrun + step * 64, dx, 16 * 16);
            else
                assert_memory_equal(firstrun + step * 64, dx, 16 * 16);
            zld_batch_free(b);
        }
        zld_close(l);
    }
    free(firstrun);
    assert_true(seen[0] > 0 && seen[1] > seen[0]);

    /* errors: an identity that differs between sources, a short cyclic source */
    zrs_concat *bad[4] = {cax, cay, cby, cbx};
    zld_mixture *m2 = NULL;
    assert_int_equal(zld_mixture_create(&m2, bad, 2, 2, w, modes, 7, 16, 1), ZR_EINVAL);
    zt_assert_mentions(zr_last_error(), "stream 0");
    zt_assert_mentions(zr_last_error(), "kind");
    const zsm_mode cyc[2] = {ZSM_CYCLIC, ZSM_CYCLIC};
    assert_int_equal(zld_mixture_create(&m2, cs, 2, 2, w, cyc, 7, 100, 1), ZR_EINVAL);
    zt_assert_mentions(zr_last_error(), "source 0");
    zt_assert_mentions(zr_last_error(), "iid");
    const double wz[2] = {1.0, -1.0};
    assert_int_equal(zld_mixture_create(&m2, cs, 2, 2, wz, modes, 7, 16, 1), ZR_EINVAL);
    zt_assert_mentions(zr_last_error(), "weight 1");
    zrs_concat *unaligned[4] = {cax, cby, cbx, cby};
    assert_int_equal(zld_mixture_create(&m2, unaligned, 2, 2, w, modes, 7, 16, 1), ZR_EINVAL);
    zt_assert_mentions(zr_last_error(), "source 0");

    zld_mixture_free(m);
    zrs_concat_close(cax);
    zrs_concat_close(cay);
    zrs_concat_close(cbx);
    zrs_concat_close(cby);
    for (int k = 0; k < 2; k++) {
        zrs_close(ax[k]);
        zrs_close(ay[k]);
    }
    zrs_close(bx);
    zrs_close(by);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_concat_dense, setup, zt_dir_teardown),
        cmocka_unit_test_setup_teardown(test_concat_ragged, setup, zt_dir_teardown),
        cmocka_unit_test_setup_teardown(test_concat_identity_mismatch, setup, zt_dir_teardown),
        cmocka_unit_test_setup_teardown(test_concat_open_owns, setup, zt_dir_teardown),
        cmocka_unit_test_setup_teardown(test_concat_aligned, setup, zt_dir_teardown),
        cmocka_unit_test_setup_teardown(test_concat_loader_matches_one_store, setup, zt_dir_teardown),
        cmocka_unit_test_setup_teardown(test_gather_multi_args, setup, zt_dir_teardown),
        cmocka_unit_test(test_mixture_sampler),
        cmocka_unit_test_setup_teardown(test_mixture_loader, setup, zt_dir_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
