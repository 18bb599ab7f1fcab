/*
 * torture_loader.c - libzloader over real stores: aligned streams, indices
 * from the sampler, identical batches for any worker count, start_step,
 * validation, worker errors surfacing at the consumer, close on a full
 * queue; generic zld_stream callbacks, resume from zld_get_state, errors
 * naming their step, the prefetch bound, readahead hints, zld_stop.
 */
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <zloader.h>

#include "zr_platform.h"
#include "zr_test_util.h"
#include "zrerror_sys.h"

#define N 1000u       /* records per stream */
#define NSTREAMS 3

typedef struct fixture {
    char root[512];
    char paths[NSTREAMS + 2][600];
    zrs_store *s[NSTREAMS]; /* dense u32[2] raw, dense f64 scalar zstd, ragged i32 zstd */
} fixture;

/* ------------------------------------------------------------- helpers */

static uint64_t ragged_len(uint64_t i) { return i % 5 + 1; }

/* Build the three aligned streams of n records: record i of each encodes i. */
static void build_streams(fixture *f, uint64_t n, zrs_store **out)
{
    uint64_t shape[1] = {2};
    snprintf(f->paths[0], sizeof f->paths[0], "%s/dense_u32", f->root);
    snprintf(f->paths[1], sizeof f->paths[1], "%s/dense_f64", f->root);
    snprintf(f->paths[2], sizeof f->paths[2], "%s/ragged_i32", f->root);
    assert_int_equal(zrs_create_dense(&out[0], f->paths[0], ZRS_UINT32, shape, 1,
                                      ZRE_CODEC_RAW), ZR_OK);
    assert_int_equal(zrs_create_dense(&out[1], f->paths[1], ZRS_FLOAT64, NULL, 0,
                                      ZRE_CODEC_ZSTD), ZR_OK);
    assert_int_equal(zrs_create_ragged(&out[2], f->paths[2], ZRS_INT32,
                                       ZRE_CODEC_ZSTD), ZR_OK);

    uint32_t *a = malloc(n * 2 * sizeof *a);
    double *b = malloc(n * sizeof *b);
    uint64_t *bounds = malloc((n + 1) * sizeof *bounds);
    unsigned char *packed = malloc(n * (16 + 5 * 4));
    assert_non_null(a);
    assert_non_null(b);
    assert_non_null(bounds);
    assert_non_null(packed);
    uint64_t pos = 0;
    for (uint64_t i = 0; i < n; i++) {
        a[2 * i] = (uint32_t)i;
        a[2 * i + 1] = (uint32_t)(i * 7 + 1);
        b[i] = (double)i * 0.5;
        uint64_t ndim = 1, dim = ragged_len(i);
        bounds[i] = pos;
        memcpy(packed + pos, &ndim, 8);
        memcpy(packed + pos + 8, &dim, 8);
        pos += 16;
        for (uint64_t k = 0; k < dim; k++) {
            int32_t v = (int32_t)(i * 100 + k);
            memcpy(packed + pos, &v, 4);
            pos += 4;
        }
    }
    bounds[n] = pos;
    uint64_t first = 99;
    assert_int_equal(zrs_append_dense(out[0], a, n * 8, n, &first), ZR_OK);
    assert_int_equal(first, 0);
    assert_int_equal(zrs_append_dense(out[1], b, n * 8, n, &first), ZR_OK);
    assert_int_equal(zrs_append_ragged(out[2], packed, bounds, n, &first), ZR_OK);
    free(a);
    free(b);
    free(bounds);
    free(packed);
}

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    if (f == NULL) return -1;
    assert_int_equal(zt_mkdtemp(f->root, sizeof f->root, "loader"), 0);
    build_streams(f, N, f->s);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    for (int i = 0; i < NSTREAMS; i++) zrs_close(f->s[i]);
    zt_rmtree(f->root);
    free(f);
    return 0;
}

static zld_options opts(uint64_t batch, zsm_mode mode, uint64_t seed,
                        unsigned workers, unsigned prefetch)
{
    zld_options o = ZLD_OPTIONS_INIT;
    o.batch_size = batch;
    o.mode = mode;
    o.seed = seed;
    o.num_workers = workers;
    o.prefetch = prefetch;
    return o;
}

/* Check that every row of every stream holds the record of its index. */
static void check_batch_content(zld_batch *b, uint64_t batch)
{
    const uint64_t *idx = zld_batch_indices(b);
    uint64_t nb = 0;
    assert_int_equal(zld_batch_count(b), batch);

    const uint32_t *a = zld_batch_data(b, 0, &nb);
    assert_non_null(a);
    assert_int_equal(nb, batch * 8);
    assert_null(zld_batch_bounds(b, 0));
    const double *d = zld_batch_data(b, 1, &nb);
    assert_non_null(d);
    assert_int_equal(nb, batch * 8);
    const unsigned char *r = zld_batch_data(b, 2, &nb);
    const uint64_t *rb = zld_batch_bounds(b, 2);
    assert_non_null(r);
    assert_non_null(rb);
    assert_int_equal(rb[0], 0);
    assert_int_equal(rb[batch], nb);

    for (uint64_t i = 0; i < batch; i++) {
        uint64_t k = idx[i];
        assert_true(k < N);
        assert_int_equal(a[2 * i], k);
        assert_int_equal(a[2 * i + 1], k * 7 + 1);
        assert_true(d[i] == (double)k * 0.5);
        size_t ndim = 0;
        uint64_t dims[ZRS_MAX_NDIM], off = 0;
        assert_int_equal(zrs_ragged_decode(r + rb[i], rb[i + 1] - rb[i], ZRS_INT32,
                                           &ndim, dims, &off), ZR_OK);
        assert_int_equal(ndim, 1);
        assert_int_equal(dims[0], ragged_len(k));
        for (uint64_t e = 0; e < dims[0]; e++) {
            int32_t v;
            memcpy(&v, r + rb[i] + off + 4 * e, 4);
            assert_int_equal(v, (int32_t)(k * 100 + e));
        }
    }
}

/* --------------------------------------------------------------- tests */

static void test_version(void **state)
{
    (void)state;
    assert_int_equal(zloader_version(), ZLOADER_VERSION_NUMBER);
    assert_string_equal(zloader_version_string(), "0.2.0");
}

static void test_aligned_and_sampler_indices(void **state)
{
    fixture *f = *state;
    const zsm_mode modes[] = {ZSM_SEQUENTIAL, ZSM_IID, ZSM_CYCLIC};
    for (size_t m = 0; m < 3; m++) {
        zld_options o = opts(64, modes[m], 17, 2, 3);
        zld_loader *l = NULL;
        assert_int_equal(zld_create(&l, f->s, NSTREAMS, &o), ZR_OK);
        zsm_config c = {N, 64, 17, modes[m], 0, 1};
        uint64_t expect[64];
        for (uint64_t step = 0; step < 40; step++) {
            zld_batch *b = NULL;
            assert_int_equal(zld_next_step(l), step);
            assert_int_equal(zld_next(l, &b), ZR_OK);
            assert_int_equal(zld_batch_step(b), step);
            assert_int_equal(zsm_indices(&c, step, expect), ZSM_OK);
            assert_memory_equal(zld_batch_indices(b), expect, sizeof expect);
            check_batch_content(b, 64);
            zld_batch_free(b);
        }
        zld_close(l);
    }
}

/* All of one loader's batches for steps [0, steps), concatenated. */
typedef struct run {
    unsigned char *bytes;
    size_t len;
} run;

static void append_bytes(run *r, const void *p, size_t n)
{
    r->bytes = realloc(r->bytes, r->len + n);
    assert_non_null(r->bytes);
    memcpy(r->bytes + r->len, p, n);
    r->len += n;
}

static run collect(fixture *f, zld_options o, uint64_t steps)
{
    run r = {NULL, 0};
    zld_loader *l = NULL;
    assert_int_equal(zld_create(&l, f->s, NSTREAMS, &o), ZR_OK);
    for (uint64_t k = 0; k < steps; k++) {
        zld_batch *b = NULL;
        assert_int_equal(zld_next(l, &b), ZR_OK);
        assert_int_equal(zld_batch_step(b), o.start_step + k);
        uint64_t step = zld_batch_step(b);
        append_bytes(&r, &step, sizeof step);
        append_bytes(&r, zld_batch_indices(b), zld_batch_count(b) * 8);
        for (size_t s = 0; s < NSTREAMS; s++) {
            uint64_t nb = 0;
            void *data = zld_batch_data(b, s, &nb);
            append_bytes(&r, &nb, sizeof nb);
            append_bytes(&r, data, nb);
            const uint64_t *bounds = zld_batch_bounds(b, s);
            if (bounds) append_bytes(&r, bounds, (zld_batch_count(b) + 1) * 8);
        }
        zld_batch_free(b);
    }
    zld_close(l);
    return r;
}

static void test_same_for_any_workers(void **state)
{
    fixture *f = *state;
    const zsm_mode modes[] = {ZSM_IID, ZSM_CYCLIC};
    for (size_t m = 0; m < 2; m++) {
        run one = collect(f, opts(48, modes[m], 5, 1, 1), 50);
        run many = collect(f, opts(48, modes[m], 5, 4, 8), 50);
        run dflt = collect(f, opts(48, modes[m], 5, 0, 0), 50);
        assert_int_equal(one.len, many.len);
        assert_memory_equal(one.bytes, many.bytes, one.len);
        assert_int_equal(one.len, dflt.len);
        assert_memory_equal(one.bytes, dflt.bytes, one.len);
        /* and another seed is another stream of batches */
        run other = collect(f, opts(48, modes[m], 6, 3, 2), 50);
        assert_int_equal(one.len == other.len &&
                         memcmp(one.bytes, other.bytes, one.len) == 0, 0);
        free(one.bytes);
        free(many.bytes);
        free(dflt.bytes);
        free(other.bytes);
    }
}

static void test_start_step(void **state)
{
    fixture *f = *state;
    zld_options o = opts(100, ZSM_CYCLIC, 9, 2, 4);
    run from0 = collect(f, o, 30);
    o.start_step = 20;
    o.num_workers = 3;
    run from20 = collect(f, o, 10);
    /* steps 20..29 of the first run are the whole second run */
    size_t per = from0.len / 30;
    assert_int_equal(from20.len, per * 10);
    assert_memory_equal(from0.bytes + per * 20, from20.bytes, from20.len);
    free(from0.bytes);
    free(from20.bytes);

    /* a far step is a seek, not a replay */
    zld_loader *l = NULL;
    o.start_step = UINT64_C(1) << 40;
    assert_int_equal(zld_create(&l, f->s, NSTREAMS, &o), ZR_OK);
    assert_int_equal(zld_next_step(l), o.start_step);
    zld_batch *b = NULL;
    assert_int_equal(zld_next(l, &b), ZR_OK);
    assert_int_equal(zld_batch_step(b), o.start_step);
    assert_int_equal(zld_next_step(l), o.start_step + 1);
    check_batch_content(b, 100);
    zld_batch_free(b);
    zld_close(l);
}

static void test_ranks(void **state)
{
    fixture *f = *state;
    /* two ranks together see the one-rank batch of twice the size */
    zld_options whole = opts(80, ZSM_CYCLIC, 3, 2, 2);
    zld_options r0 = opts(40, ZSM_CYCLIC, 3, 1, 2), r1 = r0;
    r0.world_size = r1.world_size = 2;
    r1.rank = 1;
    zld_loader *lw, *l0, *l1;
    assert_int_equal(zld_create(&lw, f->s, NSTREAMS, &whole), ZR_OK);
    assert_int_equal(zld_create(&l0, f->s, NSTREAMS, &r0), ZR_OK);
    assert_int_equal(zld_create(&l1, f->s, NSTREAMS, &r1), ZR_OK);
    for (int k = 0; k < 15; k++) {
        zld_batch *bw, *b0, *b1;
        assert_int_equal(zld_next(lw, &bw), ZR_OK);
        assert_int_equal(zld_next(l0, &b0), ZR_OK);
        assert_int_equal(zld_next(l1, &b1), ZR_OK);
        assert_memory_equal(zld_batch_indices(bw), zld_batch_indices(b0), 40 * 8);
        assert_memory_equal(zld_batch_indices(bw) + 40, zld_batch_indices(b1), 40 * 8);
        uint64_t n0, nw;
        unsigned char *dw = zld_batch_data(bw, 0, &nw);
        unsigned char *d0 = zld_batch_data(b0, 0, &n0);
        assert_int_equal(nw, 2 * n0);
        assert_memory_equal(dw, d0, n0);
        check_batch_content(b1, 40);
        zld_batch_free(bw);
        zld_batch_free(b0);
        zld_batch_free(b1);
    }
    zld_close(lw);
    zld_close(l0);
    zld_close(l1);
}

static void test_detach(void **state)
{
    fixture *f = *state;
    zld_options o = opts(16, ZSM_IID, 1, 1, 1);
    zld_loader *l = NULL;
    assert_int_equal(zld_create(&l, f->s, NSTREAMS, &o), ZR_OK);
    zld_batch *b = NULL;
    assert_int_equal(zld_next(l, &b), ZR_OK);
    uint64_t nb = 0, nb2 = 7;
    void *before = zld_batch_data(b, 2, NULL);
    void *buf = zld_batch_detach(b, 2, &nb);
    assert_ptr_equal(buf, before);
    assert_true(nb > 16 * 16);
    assert_null(zld_batch_data(b, 2, &nb2));
    assert_int_equal(nb2, 0);
    assert_null(zld_batch_detach(b, 2, &nb2));
    assert_non_null(zld_batch_bounds(b, 2)); /* bounds stay with the batch */
    assert_null(zld_batch_data(b, NSTREAMS, &nb2));
    assert_null(zld_batch_bounds(b, NSTREAMS));
    zld_batch_free(b); /* the detached buffer survives the batch */
    memset(buf, 0, nb);
    zld_free(buf);
    zld_free(NULL);
    zld_batch_free(NULL);
    zld_close(l);
    zld_close(NULL);
}

/* Batch buffers are recycled: a buffer returned with zld_batch_free or
 * zld_free comes back in a later batch, with that batch's content. (Under
 * ASan freed memory is quarantined, so only the pool can hand the same
 * address out again.) */
static void test_buffers_reused(void **state)
{
    fixture *f = *state;
    zld_options o = opts(16, ZSM_IID, 3, 1, 1);
    zld_loader *l = NULL;
    assert_int_equal(zld_create(&l, f->s, NSTREAMS, &o), ZR_OK);
    zld_batch *b0, *b1, *b2;
    assert_int_equal(zld_next(l, &b0), ZR_OK);
    void *a0 = zld_batch_data(b0, 0, NULL);
    void *a1 = zld_batch_data(b0, 1, NULL);
    assert_int_equal((uintptr_t)a0 % 64, 0);
    assert_int_equal((uintptr_t)a1 % 64, 0);
    check_batch_content(b0, 16);
    zld_batch_free(b0);
    /* Step 1 may have been built before b0 came back; step 2 is claimed
     * only once b1 is taken, so one of them holds b0's buffers. */
    assert_int_equal(zld_next(l, &b1), ZR_OK);
    assert_int_equal(zld_next(l, &b2), ZR_OK);
    check_batch_content(b1, 16);
    check_batch_content(b2, 16);
    assert_true(zld_batch_data(b1, 0, NULL) == a0 || zld_batch_data(b2, 0, NULL) == a0);
    assert_true(zld_batch_data(b1, 1, NULL) == a1 || zld_batch_data(b2, 1, NULL) == a1);
    zld_batch_free(b1);
    zld_batch_free(b2);

    /* Hold many detached buffers, then return them all: more than the pool
     * keeps (prefetch + 2), so some are really freed (ASan checks leaks). */
    enum { HELD = 10 };
    void *held[HELD];
    for (int k = 0; k < HELD; k++) {
        zld_batch *b;
        assert_int_equal(zld_next(l, &b), ZR_OK);
        check_batch_content(b, 16);
        held[k] = zld_batch_detach(b, 0, NULL);
        assert_non_null(held[k]);
        zld_batch_free(b);
    }
    for (int k = 0; k < HELD; k++) zld_free(held[k]);
    /* The batch claimed after the next take is built from a kept buffer. */
    assert_int_equal(zld_next(l, &b1), ZR_OK);
    assert_int_equal(zld_next(l, &b2), ZR_OK);
    check_batch_content(b1, 16);
    check_batch_content(b2, 16);
    void *got = zld_batch_data(b2, 0, NULL);
    int found = 0;
    for (int k = 0; k < HELD; k++) found |= held[k] == got;
    assert_true(found);
    zld_batch_free(b1);
    zld_batch_free(b2);
    for (int k = 0; k < 20; k++) { /* recycled buffers keep correct content */
        zld_batch *b;
        assert_int_equal(zld_next(l, &b), ZR_OK);
        check_batch_content(b, 16);
        zld_batch_free(b);
    }
    zld_close(l);
}

/* Detached buffers and undelivered-to-free batches outlive zld_close: they
 * stay readable and writable and are released afterwards. */
static void test_buffers_outlive_close(void **state)
{
    fixture *f = *state;
    zld_options o = opts(24, ZSM_CYCLIC, 5, 2, 2);
    zld_loader *l = NULL;
    assert_int_equal(zld_create(&l, f->s, NSTREAMS, &o), ZR_OK);
    enum { K = 3 };
    void *buf[K][NSTREAMS];
    unsigned char *copy[K][NSTREAMS];
    uint64_t nb[K][NSTREAMS];
    for (int k = 0; k < K; k++) {
        zld_batch *b;
        assert_int_equal(zld_next(l, &b), ZR_OK);
        check_batch_content(b, 24);
        for (size_t s = 0; s < NSTREAMS; s++) {
            buf[k][s] = zld_batch_detach(b, s, &nb[k][s]);
            assert_non_null(buf[k][s]);
            copy[k][s] = malloc(nb[k][s]);
            assert_non_null(copy[k][s]);
            memcpy(copy[k][s], buf[k][s], nb[k][s]);
        }
        zld_batch_free(b);
    }
    zld_batch *kept = NULL;
    assert_int_equal(zld_next(l, &kept), ZR_OK);
    zld_close(l); /* with batches still prefetched and buffers out */

    check_batch_content(kept, 24);
    zld_batch_free(kept);
    for (int k = 0; k < K; k++) {
        for (size_t s = 0; s < NSTREAMS; s++) {
            assert_memory_equal(buf[k][s], copy[k][s], nb[k][s]);
            memset(buf[k][s], 0xab, nb[k][s]);
            free(copy[k][s]);
        }
    }
    /* Release in an order unrelated to allocation; the last one frees the
     * pool. */
    for (size_t s = 0; s < NSTREAMS; s++)
        for (int k = K - 1; k >= 0; k--) zld_free(buf[k][s]);
}

static void test_create_errors(void **state)
{
    fixture *f = *state;
    zld_loader *l = (zld_loader *)&l; /* must be reset to NULL */
    zld_options o = opts(10, ZSM_CYCLIC, 0, 1, 1);

    assert_int_equal(zld_create(&l, f->s, 0, &o), ZR_EINVAL);
    assert_null(l);
    assert_int_equal(zld_create(&l, NULL, 1, &o), ZR_EINVAL);
    assert_int_equal(zld_create(&l, f->s, NSTREAMS, NULL), ZR_EINVAL);
    assert_int_equal(zld_create(NULL, f->s, NSTREAMS, &o), ZR_EINVAL);
    zld_options bad = o;
    bad.version = 99;
    assert_int_equal(zld_create(&l, f->s, NSTREAMS, &bad), ZR_EINVAL);
    zt_assert_mentions(zr_last_error(), "version");
    bad = o;
    bad.batch_size = 0;
    assert_int_equal(zld_create(&l, f->s, NSTREAMS, &bad), ZR_EINVAL);
    zt_assert_mentions(zr_last_error(), "batch_size");
    bad = o;
    bad.batch_size = N + 1; /* cyclic needs batch <= length */
    assert_int_equal(zld_create(&l, f->s, NSTREAMS, &bad), ZR_EINVAL);
    zt_assert_mentions(zr_last_error(), "1000");
    bad = o;
    bad.rank = 2;
    bad.world_size = 2;
    assert_int_equal(zld_create(&l, f->s, NSTREAMS, &bad), ZR_EINVAL);
    zt_assert_mentions(zr_last_error(), "rank");
    bad = o;
    bad.mode = (zsm_mode)9;
    assert_int_equal(zld_create(&l, f->s, NSTREAMS, &bad), ZR_EINVAL);
    assert_null(l);

    /* a stream one record shorter than the others */
    zrs_store *shortst = NULL;
    snprintf(f->paths[3], sizeof f->paths[3], "%s/short", f->root);
    assert_int_equal(zrs_create_dense(&shortst, f->paths[3], ZRS_UINT8, NULL, 0,
                                      ZRE_CODEC_RAW), ZR_OK);
    unsigned char *bytes = calloc(N - 1, 1);
    assert_non_null(bytes);
    assert_int_equal(zrs_append_dense(shortst, bytes, N - 1, N - 1, NULL), ZR_OK);
    free(bytes);
    zrs_store *mixed[3] = {f->s[0], f->s[2], shortst};
    assert_int_equal(zld_create(&l, mixed, 3, &o), ZR_EINVAL);
    assert_null(l);
    const char *msg = zr_last_error();
    zt_assert_mentions(msg, "stream 0");
    zt_assert_mentions(msg, "stream 2");
    zt_assert_mentions(msg, "1000");
    zt_assert_mentions(msg, "999");

    /* an empty store */
    zrs_store *empty = NULL;
    snprintf(f->paths[4], sizeof f->paths[4], "%s/empty", f->root);
    assert_int_equal(zrs_create_dense(&empty, f->paths[4], ZRS_UINT8, NULL, 0,
                                      ZRE_CODEC_RAW), ZR_OK);
    o.mode = ZSM_IID;
    assert_int_equal(zld_create(&l, &empty, 1, &o), ZR_EINVAL);
    zt_assert_mentions(zr_last_error(), "empty");
    zrs_close(empty);
    zrs_close(shortst);

    /* next with bad arguments */
    zld_batch *b = NULL;
    assert_int_equal(zld_next(NULL, &b), ZR_EINVAL);
}

/* Overwrite the stored bytes of records first.. of a one-chunk zstd store
 * with garbage, so decoding them fails. Compressed appends place records in
 * completion order, so each record's position comes from the record table
 * (docs/FORMAT.md: 16-byte little-endian entries {offset, phys_length,
 * logic_length, chunk_id}). */
static void corrupt_from(const char *store_dir, uint64_t first)
{
    char p[700];
    snprintf(p, sizeof p, "%s/0.loc", store_dir);
    zrp_file loc, chunk;
    assert_int_equal(zrp_open(&loc, p, ZRP_READ), 0);
    snprintf(p, sizeof p, "%s/0.chunk", store_dir);
    assert_int_equal(zrp_open(&chunk, p, ZRP_READ | ZRP_WRITE), 0);
    uint64_t loc_size = 0;
    assert_int_equal(zrp_file_size(loc, &loc_size), 0);
    static unsigned char junk[1 << 16];
    memset(junk, 0xA5, sizeof junk);
    for (uint64_t i = first; i < loc_size / 16; i++) {
        unsigned char e[16];
        assert_int_equal(zrp_pread_all(loc, e, sizeof e, i * 16), 0);
        uint32_t off = (uint32_t)e[0] | (uint32_t)e[1] << 8 | (uint32_t)e[2] << 16 | (uint32_t)e[3] << 24;
        uint32_t len = (uint32_t)e[4] | (uint32_t)e[5] << 8 | (uint32_t)e[6] << 16 | (uint32_t)e[7] << 24;
        assert_true(len <= sizeof junk);
        assert_int_equal(zrp_pwrite_all(chunk, junk, len, off), 0);
    }
    assert_int_equal(zrp_close(&loc), 0);
    assert_int_equal(zrp_close(&chunk), 0);
}

static void test_worker_error_surfaces(void **state)
{
    fixture *f = *state;
    /* Its own zstd store of 200 records, records 100.. corrupted;
     * sequential batches of 10 walk into the damage at step 10. */
    zrs_store *bad = NULL;
    snprintf(f->paths[3], sizeof f->paths[3], "%s/corrupt", f->root);
    /* records of 32 equal u64 compress well, so every one is a zstd frame */
    const uint64_t shape[1] = {32};
    assert_int_equal(zrs_create_dense(&bad, f->paths[3], ZRS_UINT64, shape, 1,
                                      ZRE_CODEC_ZSTD), ZR_OK);
    static uint64_t vals[200 * 32];
    for (uint64_t i = 0; i < 200 * 32; i++) vals[i] = (i / 32) * 0x0101010101010101ull;
    assert_int_equal(zrs_append_dense(bad, vals, sizeof vals, 200, NULL), ZR_OK);
    assert_int_equal(zrs_close(bad), ZR_OK);
    corrupt_from(f->paths[3], 100);
    assert_int_equal(zrs_open(&bad, f->paths[3]), ZR_OK);

    const unsigned configs[][2] = {{1, 1}, {4, 8}, {2, 3}};
    uint64_t first_failure = UINT64_MAX;
    for (size_t c = 0; c < 3; c++) {
        zld_options o = opts(10, ZSM_SEQUENTIAL, 0, configs[c][0], configs[c][1]);
        zld_loader *l = NULL;
        assert_int_equal(zld_create(&l, &bad, 1, &o), ZR_OK);
        uint64_t delivered = 0;
        int rc;
        for (;;) {
            zld_batch *b = NULL;
            rc = zld_next(l, &b);
            if (rc != ZR_OK) {
                assert_null(b);
                break;
            }
            /* the good prefix arrives intact and in order */
            assert_int_equal(zld_batch_step(b), delivered);
            const uint64_t *v = zld_batch_data(b, 0, NULL);
            for (uint64_t i = 0; i < 10 * 32; i++)
                assert_int_equal(v[i], (delivered * 10 + i / 32) * 0x0101010101010101ull);
            zld_batch_free(b);
            delivered++;
            assert_true(delivered <= 20);
        }
        assert_int_equal(rc, ZR_ESTATE);
        assert_int_equal(delivered, 10); /* records 0..99 intact, 100.. not */
        char expect[64];
        snprintf(expect, sizeof expect, "step %llu: ", (unsigned long long)delivered);
        assert_true(strncmp(zr_last_error(), expect, strlen(expect)) == 0);
        assert_true(strlen(zr_last_error()) > strlen(expect)); /* with a cause */
        if (c == 0) print_message("worker error detail: %s\n", zr_last_error());
        /* the same failure for any worker count */
        if (first_failure == UINT64_MAX) first_failure = delivered;
        assert_int_equal(delivered, first_failure);
        /* the loader stays failed */
        zld_batch *b = NULL;
        assert_int_equal(zld_next(l, &b), ZR_ESTATE);
        assert_null(b);
        assert_int_equal(zld_next_step(l), delivered);
        zld_close(l);
    }
    zrs_close(bad);
}

/* Spin for about `ms` milliseconds (a delay, never an assertion). */
static void pause_ms(uint64_t ms)
{
    uint64_t end = zrp_now_ns() + ms * 1000000u;
    while (zrp_now_ns() < end) {
    }
}

static void test_close_on_full_queue(void **state)
{
    fixture *f = *state;
    /* never consumed: workers fill the ring and block on it */
    for (int round = 0; round < 3; round++) {
        zld_options o = opts(32, ZSM_IID, (uint64_t)round, 4, 2);
        zld_loader *l = NULL;
        assert_int_equal(zld_create(&l, f->s, NSTREAMS, &o), ZR_OK);
        if (round == 1) {
            zld_batch *b = NULL;
            assert_int_equal(zld_next(l, &b), ZR_OK);
            zld_batch_free(b);
        }
        if (round > 0) pause_ms(50);
        zld_close(l); /* returns: that is the test */
    }
    /* a prefetch of 1 with many workers */
    zld_options o = opts(8, ZSM_CYCLIC, 1, 8, 1);
    zld_loader *l = NULL;
    assert_int_equal(zld_create(&l, f->s, NSTREAMS, &o), ZR_OK);
    for (int k = 0; k < 5; k++) {
        zld_batch *b = NULL;
        assert_int_equal(zld_next(l, &b), ZR_OK);
        assert_int_equal(zld_batch_step(b), (uint64_t)k);
        zld_batch_free(b);
    }
    pause_ms(20);
    zld_close(l);
}


/* ------------------------------------------------- generic streams (no store) */

/* A synthetic stream: dense record i is the u64 3*i; ragged record i is
 * i % 4 + 1 bytes of value (i & 0xff). Counts gather calls and records the
 * first index of every advised batch; fails any gather containing
 * `fail_index`. */
typedef struct synth {
    uint64_t length;
    uint64_t fail_index; /* UINT64_MAX: never fail */
    _Atomic uint64_t gathers;
    _Atomic uint64_t advises;
    _Atomic uint64_t advised_first[4096]; /* by advise call number */
} synth;

static int synth_fail(synth *sy, const uint64_t *index, uint64_t count)
{
    for (uint64_t i = 0; i < count; i++) {
        if (index[i] == sy->fail_index)
            return zr_set_error(ZR_EIO, "synthetic failure at index %llu",
                                (unsigned long long)index[i]);
    }
    return ZR_OK;
}

static int synth_gather(void *user, const uint64_t *index, uint64_t count, void *dst,
                        uint64_t cap, const uint64_t *bounds)
{
    synth *sy = user;
    atomic_fetch_add(&sy->gathers, 1);
    int rc = synth_fail(sy, index, count);
    if (rc < 0) return rc;
    if (bounds == NULL) {
        if (cap < count * 8) return zr_set_error(ZR_EINVAL, "synthetic: dst too small");
        uint64_t *d = dst;
        for (uint64_t i = 0; i < count; i++) d[i] = 3 * index[i];
    } else {
        unsigned char *d = dst;
        for (uint64_t i = 0; i < count; i++) {
            if (bounds[i + 1] - bounds[i] != index[i] % 4 + 1 || bounds[i + 1] > cap)
                return zr_set_error(ZR_EINVAL, "synthetic: wrong bounds");
            memset(d + bounds[i], (int)(index[i] & 0xff), (size_t)(index[i] % 4 + 1));
        }
    }
    return ZR_OK;
}

static int synth_sizes(void *user, const uint64_t *index, uint64_t count, uint64_t *sizes)
{
    (void)user;
    for (uint64_t i = 0; i < count; i++) sizes[i] = index[i] % 4 + 1;
    return ZR_OK;
}

static int synth_advise(void *user, const uint64_t *index, uint64_t count)
{
    synth *sy = user;
    (void)count;
    uint64_t k = atomic_fetch_add(&sy->advises, 1);
    if (k < 4096) atomic_store(&sy->advised_first[k], index[0]);
    return ZR_OK;
}

static synth *synth_new(uint64_t length)
{
    synth *sy = calloc(1, sizeof *sy);
    assert_non_null(sy);
    sy->length = length;
    sy->fail_index = UINT64_MAX;
    return sy;
}

static void synth_streams(synth *sy, zld_stream out[2])
{
    memset(out, 0, 2 * sizeof *out);
    out[0].user = sy;
    out[0].name = "synthetic-dense";
    out[0].length = sy->length;
    out[0].kind = ZLD_STREAM_DENSE;
    out[0].record_size = 8;
    out[0].gather = synth_gather;
    out[0].advise = synth_advise;
    out[1] = out[0];
    out[1].name = "synthetic-ragged";
    out[1].kind = ZLD_STREAM_RAGGED;
    out[1].record_size = 0;
    out[1].sizes = synth_sizes;
    out[1].advise = NULL;
}

static void check_synth_batch(zld_batch *b, uint64_t count)
{
    const uint64_t *idx = zld_batch_indices(b);
    const uint64_t *d = zld_batch_data(b, 0, NULL);
    const unsigned char *r = zld_batch_data(b, 1, NULL);
    const uint64_t *bd = zld_batch_bounds(b, 1);
    assert_null(zld_batch_bounds(b, 0));
    assert_non_null(bd);
    for (uint64_t i = 0; i < count; i++) {
        assert_int_equal(d[i], 3 * idx[i]);
        assert_int_equal(bd[i + 1] - bd[i], idx[i] % 4 + 1);
        for (uint64_t k = bd[i]; k < bd[i + 1]; k++) assert_int_equal(r[k], idx[i] & 0xff);
    }
}

static void test_generic_streams(void **state)
{
    (void)state;
    synth *sy = synth_new(777);
    zld_stream st[2];
    synth_streams(sy, st);
    zld_options o = opts(50, ZSM_CYCLIC, 9, 3, 4);
    zld_loader *l = NULL;
    assert_int_equal(zld_create_streams(&l, st, 2, &o), ZR_OK);
    for (uint64_t k = 0; k < 40; k++) {
        zld_batch *b = NULL;
        assert_int_equal(zld_next(l, &b), ZR_OK);
        assert_int_equal(zld_batch_step(b), k);
        zsm_config c = {777, 50, 9, ZSM_CYCLIC, 0, 1};
        uint64_t want[50];
        assert_int_equal(zsm_indices(&c, k, want), ZSM_OK);
        assert_memory_equal(zld_batch_indices(b), want, sizeof want);
        check_synth_batch(b, 50);
        zld_batch_free(b);
    }
    zld_close(l);

    /* refused descriptions */
    zld_stream bad[2];
    memcpy(bad, st, sizeof bad);
    bad[0].gather = NULL;
    assert_int_equal(zld_create_streams(&l, bad, 2, &o), ZR_EINVAL);
    zt_assert_mentions(zr_last_error(), "synthetic-dense");
    memcpy(bad, st, sizeof bad);
    bad[1].sizes = NULL;
    assert_int_equal(zld_create_streams(&l, bad, 2, &o), ZR_EINVAL);
    memcpy(bad, st, sizeof bad);
    bad[0].record_size = 0;
    assert_int_equal(zld_create_streams(&l, bad, 2, &o), ZR_EINVAL);
    memcpy(bad, st, sizeof bad);
    bad[1].length = 776;
    assert_int_equal(zld_create_streams(&l, bad, 2, &o), ZR_EINVAL);
    zt_assert_mentions(zr_last_error(), "776");
    assert_null(l);
    free(sy);
}

static void test_state_resumes_exactly(void **state)
{
    (void)state;
    synth *sy = synth_new(500);
    zld_stream st[2];
    synth_streams(sy, st);
    const zsm_mode modes[] = {ZSM_SEQUENTIAL, ZSM_IID, ZSM_CYCLIC};
    for (size_t m = 0; m < 3; m++) {
        zld_options o = opts(16, modes[m], 42, 2, 3);
        o.rank = 1;
        o.world_size = 3;
        zld_loader *l = NULL;
        assert_int_equal(zld_create_streams(&l, st, 2, &o), ZR_OK);
        for (int k = 0; k < 37; k++) {
            zld_batch *b = NULL;
            assert_int_equal(zld_next(l, &b), ZR_OK);
            zld_batch_free(b);
        }
        zld_options saved;
        assert_int_equal(zld_get_state(l, &saved), ZR_OK);
        assert_int_equal(saved.start_step, 37);
        assert_int_equal(saved.seed, 42);
        assert_int_equal(saved.rank, 1);
        assert_int_equal(saved.world_size, 3);
        assert_int_equal(saved.mode, modes[m]);
        /* a different worker count must not matter */
        saved.num_workers = 1;
        saved.prefetch = 1;
        zld_loader *r = NULL;
        assert_int_equal(zld_create_streams(&r, st, 2, &saved), ZR_OK);
        for (int k = 0; k < 5; k++) {
            zld_batch *a = NULL, *b = NULL;
            assert_int_equal(zld_next(l, &a), ZR_OK);
            assert_int_equal(zld_next(r, &b), ZR_OK);
            assert_int_equal(zld_batch_step(a), zld_batch_step(b));
            assert_memory_equal(zld_batch_indices(a), zld_batch_indices(b), 16 * 8);
            uint64_t na = 0, nb = 0;
            void *da = zld_batch_data(a, 0, &na), *db = zld_batch_data(b, 0, &nb);
            assert_int_equal(na, nb);
            assert_memory_equal(da, db, (size_t)na);
            zld_batch_free(a);
            zld_batch_free(b);
        }
        zld_close(r);
        zld_close(l);
    }
    /* a version 1 options struct is still accepted */
    zld_options o = opts(16, ZSM_CYCLIC, 1, 1, 1);
    o.version = 1;
    zld_loader *l = NULL;
    assert_int_equal(zld_create_streams(&l, st, 2, &o), ZR_OK);
    zld_close(l);
    free(sy);
}

static void test_callback_error_names_step(void **state)
{
    (void)state;
    const unsigned configs[][2] = {{1, 1}, {3, 6}, {2, 2}};
    for (size_t c = 0; c < 3; c++) {
        synth *sy = synth_new(300);
        sy->fail_index = 123; /* sequential batches of 10: step 12 */
        zld_stream st[2];
        synth_streams(sy, st);
        zld_options o = opts(10, ZSM_SEQUENTIAL, 0, configs[c][0], configs[c][1]);
        zld_loader *l = NULL;
        assert_int_equal(zld_create_streams(&l, st, 2, &o), ZR_OK);
        uint64_t k = 0;
        int rc;
        for (;;) {
            zld_batch *b = NULL;
            rc = zld_next(l, &b);
            if (rc != ZR_OK) break;
            assert_int_equal(zld_batch_step(b), k);
            check_synth_batch(b, 10);
            zld_batch_free(b);
            k++;
        }
        assert_int_equal(rc, ZR_ESTATE);
        assert_int_equal(k, 12);
        zt_assert_mentions(zr_last_error(), "step 12");
        zt_assert_mentions(zr_last_error(), "synthetic failure at index 123");
        zt_assert_mentions(zr_last_error(), "synthetic-dense");
        uint64_t fs = 0;
        assert_int_equal(zld_failed(l, &fs), 1);
        assert_int_equal(fs, 12);
        zld_close(l);
        free(sy);
    }
    synth *sy = synth_new(300);
    zld_stream st[2];
    synth_streams(sy, st);
    zld_options o = opts(10, ZSM_SEQUENTIAL, 0, 2, 2);
    zld_loader *l = NULL;
    assert_int_equal(zld_create_streams(&l, st, 2, &o), ZR_OK);
    assert_int_equal(zld_failed(l, NULL), 0);
    zld_close(l);
    free(sy);
}

static void test_prefetch_bounds_undelivered(void **state)
{
    (void)state;
    const unsigned prefetch[] = {1, 2, 5};
    for (size_t p = 0; p < 3; p++) {
        synth *sy = synth_new(1000);
        zld_stream st[2];
        synth_streams(sy, st);
        zld_options o = opts(8, ZSM_IID, 3, 4, prefetch[p]);
        zld_loader *l = NULL;
        assert_int_equal(zld_create_streams(&l, st, 1, &o), ZR_OK);
        for (uint64_t taken = 0; taken < 6; taken++) {
            pause_ms(20); /* give the workers time to run ahead, if they would */
            /* one gather call per step on the one stream: at most
             * `prefetch` steps beyond what the consumer took */
            assert_true(atomic_load(&sy->gathers) <= taken + prefetch[p]);
            zld_batch *b = NULL;
            assert_int_equal(zld_next(l, &b), ZR_OK);
            zld_batch_free(b);
        }
        zld_close(l);
        free(sy);
    }
}

static void test_readahead_hints_future_steps(void **state)
{
    (void)state;
    /* sequential, batch 10: a batch's first index names its step */
    const unsigned ra[] = {0, 3, ZLD_READAHEAD_AUTO};
    for (size_t r = 0; r < 3; r++) {
        synth *sy = synth_new(100000);
        zld_stream st[2];
        synth_streams(sy, st);
        zld_options o = opts(10, ZSM_SEQUENTIAL, 0, 2, 4);
        o.readahead = ra[r];
        o.start_step = 5;
        zld_loader *l = NULL;
        assert_int_equal(zld_create_streams(&l, st, 2, &o), ZR_OK);
        for (int k = 0; k < 20; k++) {
            zld_batch *b = NULL;
            assert_int_equal(zld_next(l, &b), ZR_OK);
            check_synth_batch(b, 10);
            zld_batch_free(b);
        }
        zld_close(l);
        uint64_t n = atomic_load(&sy->advises);
        if (ra[r] == 0) {
            assert_int_equal(n, 0);
        } else {
            uint64_t dist = ra[r] == ZLD_READAHEAD_AUTO ? 4 : ra[r];
            /* every claimed step s hinted step s + dist, once, and the
             * first claims also the steps from the start up to there (no
             * step before the start) */
            assert_true(n >= 20 + dist);
            unsigned char seen[200] = {0};
            for (uint64_t k = 0; k < n && k < 4096; k++) {
                uint64_t step = atomic_load(&sy->advised_first[k]) / 10;
                assert_true(step >= 5 && step < 200);
                assert_int_equal(seen[step], 0);
                seen[step] = 1;
            }
            for (uint64_t s = 5; s < 5 + 20 + dist; s++) assert_int_equal(seen[s], 1);
        }
        free(sy);
    }
}

static void test_store_advise(void **state)
{
    fixture *f = *state;
    zre_engine *e = zrs_engine(f->s[1]);
    uint64_t idx[5] = {0, 999, 3, 4, 5};
    assert_int_equal(zre_advise(e, idx, 5), ZR_OK);
    assert_int_equal(zre_advise(e, idx, 0), ZR_OK);
    idx[2] = N;
    assert_int_equal(zre_advise(e, idx, 5), ZR_ERANGE);
    zt_assert_mentions(zr_last_error(), "1000");
    assert_int_equal(zre_advise(NULL, idx, 5), ZR_EINVAL);
    /* a store loader with readahead returns the same batches as without */
    zld_options o = opts(20, ZSM_IID, 5, 2, 2);
    o.readahead = 0;
    zld_loader *a = NULL, *b = NULL;
    assert_int_equal(zld_create(&a, f->s, NSTREAMS, &o), ZR_OK);
    o.readahead = 7;
    assert_int_equal(zld_create(&b, f->s, NSTREAMS, &o), ZR_OK);
    for (int k = 0; k < 10; k++) {
        zld_batch *x = NULL, *y = NULL;
        assert_int_equal(zld_next(a, &x), ZR_OK);
        assert_int_equal(zld_next(b, &y), ZR_OK);
        for (size_t s = 0; s < NSTREAMS; s++) {
            uint64_t nx = 0, ny = 0;
            void *dx = zld_batch_data(x, s, &nx), *dy = zld_batch_data(y, s, &ny);
            assert_int_equal(nx, ny);
            assert_memory_equal(dx, dy, (size_t)nx);
        }
        zld_batch_free(x);
        zld_batch_free(y);
    }
    zld_close(a);
    zld_close(b);
}

/* ZLD_READAHEAD_AUTO follows the page cache: no hints on stores just
 * written (cached), hints (prefetch steps) once their files are evicted.
 * The cold half is skipped where eviction does not take (tmpfs) and the
 * whole test where the OS cannot report residency. */
static void test_readahead_auto_follows_the_page_cache(void **state)
{
    fixture *f = *state;
    double fr = 0;
    int rc = zrs_resident_fraction(f->s[0], &fr);
    if (rc == ZR_EUNSUPPORTED)
        skip();
    assert_int_equal(rc, ZR_OK);
    assert_true(fr >= 0.95 && fr <= 1.0);
    zld_options o = opts(20, ZSM_IID, 5, 2, 3);
    zld_options got;
    zld_loader *l = NULL;
    assert_int_equal(zld_create(&l, f->s, NSTREAMS, &o), ZR_OK);
    assert_int_equal(zld_readahead(l), 0);
    assert_int_equal(zld_get_state(l, &got), ZR_OK);
    assert_int_equal(got.readahead, ZLD_READAHEAD_AUTO); /* a resumed loader adapts too */
    zld_close(l);
    /* Pages mapped by a process stay cached: close the stores (their
     * chunk mappings) before the eviction, and reopen them after it. */
    for (size_t k = 0; k < NSTREAMS; k++) {
        char chunk[700];
        snprintf(chunk, sizeof chunk, "%s/0.chunk", f->paths[k]);
        assert_true(zt_exists(chunk));
        assert_int_equal(zrs_close(f->s[k]), ZR_OK);
        f->s[k] = NULL;
        (void)zt_os_evict(chunk);
        assert_int_equal(zrs_open(&f->s[k], f->paths[k]), ZR_OK);
    }
    double cold[NSTREAMS];
    for (size_t k = 0; k < NSTREAMS; k++) {
        assert_int_equal(zrs_resident_fraction(f->s[k], &cold[k]), ZR_OK);
        assert_true(cold[k] >= 0.0 && cold[k] <= 1.0);
    }
    if (cold[0] >= 0.95 && cold[1] >= 0.95 && cold[2] >= 0.95)
        skip(); /* the pages stayed (tmpfs, or no eviction call) */
    assert_int_equal(zld_create(&l, f->s, NSTREAMS, &o), ZR_OK);
    assert_int_equal(zld_readahead(l), 3); /* prefetch */
    for (int k = 0; k < 5; k++) { /* and the batches are as ever */
        zld_batch *b = NULL;
        assert_int_equal(zld_next(l, &b), ZR_OK);
        check_batch_content(b, 20);
        zld_batch_free(b);
    }
    /* Decided again every 64 steps: by step 64 the gathers (and hints)
     * have read these small stores into the cache, so the hints stop. The
     * worker that builds step 64 decides before building it. */
    for (int k = 5; k <= 64; k++) {
        zld_batch *b = NULL;
        assert_int_equal(zld_next(l, &b), ZR_OK);
        check_batch_content(b, 20);
        zld_batch_free(b);
    }
    for (size_t k = 0; k < NSTREAMS; k++) {
        assert_int_equal(zrs_resident_fraction(f->s[k], &cold[k]), ZR_OK);
        assert_true(cold[k] >= 0.95);
    }
    assert_int_equal(zld_readahead(l), 0);
    zld_close(l);
    assert_int_equal(zld_readahead(NULL), 0);
}

static void test_stop(void **state)
{
    (void)state;
    synth *sy = synth_new(100);
    zld_stream st[2];
    synth_streams(sy, st);
    zld_options o = opts(10, ZSM_CYCLIC, 0, 2, 2);
    zld_loader *l = NULL;
    assert_int_equal(zld_create_streams(&l, st, 2, &o), ZR_OK);
    zld_batch *b = NULL;
    assert_int_equal(zld_next(l, &b), ZR_OK);
    zld_batch_free(b);
    zld_stop(l); /* with the ring full */
    zld_stop(l);
    assert_int_equal(zld_next(l, &b), ZR_ECLOSED);
    assert_null(b);
    zld_close(l);
    zld_stop(NULL);
    free(sy);
}

/* A finite pass: every record once (index order), the last batch
 * partial with correct contents, ZLD_END after it (also again), resume
 * mid-pass, start_step past the end refused. */
static void test_pass(void **state)
{
    fixture *f = *state;
    const uint64_t bs = 64; /* N = 1000: 15 full batches and one of 40 */
    for (unsigned workers = 1; workers <= 3; workers += 2) {
        zld_options o = opts(bs, ZSM_CYCLIC, 0, workers, 3);
        o.pass = 1;
        zld_loader *l = NULL;
        assert_int_equal(zld_create(&l, f->s, NSTREAMS, &o), ZR_OK);
        assert_int_equal(zld_steps(l), 16);
        uint64_t expect = 0;
        for (uint64_t s = 0; s < 16; s++) {
            zld_batch *b = NULL;
            assert_int_equal(zld_next(l, &b), ZR_OK);
            uint64_t cnt = zld_batch_count(b);
            assert_int_equal(cnt, s < 15 ? bs : 40);
            check_batch_content(b, cnt);
            for (uint64_t j = 0; j < cnt; j++) assert_int_equal(zld_batch_indices(b)[j], expect++);
            zld_batch_free(b);
        }
        zld_batch *b = (zld_batch *)1;
        assert_int_equal(zld_next(l, &b), ZLD_END);
        assert_null(b);
        assert_int_equal(zld_next_wait(l, &b, 1000000), ZLD_END);
        zld_close(l);
    }
    zld_options o = opts(bs, ZSM_CYCLIC, 0, 2, 2);
    o.pass = 1;
    o.shuffle = 1;
    o.drop_last = 1;
    o.start_step = 14;
    zld_loader *l = NULL;
    assert_int_equal(zld_create(&l, f->s, NSTREAMS, &o), ZR_OK);
    assert_int_equal(zld_steps(l), 15);
    zld_batch *b = NULL;
    assert_int_equal(zld_next(l, &b), ZR_OK);
    assert_int_equal(zld_batch_step(b), 14);
    check_batch_content(b, bs);
    zld_batch_free(b);
    assert_int_equal(zld_next(l, &b), ZLD_END);
    zld_options st;
    assert_int_equal(zld_get_state(l, &st), ZR_OK);
    assert_true(st.pass == 1 && st.shuffle == 1 && st.drop_last == 1 && st.start_step == 15);
    zld_close(l);
    o.start_step = 16;
    assert_int_equal(zld_create(&l, f->s, NSTREAMS, &o), ZR_EINVAL);
    assert_non_null(strstr(zr_last_error(), "past the pass"));
}

/* ZLD_WORKERS_NONE: no worker threads; the consumer builds each batch,
 * the same batches as with workers, the end of a pass and a failing
 * stream reported as usual. */
static void test_inline_workers(void **state)
{
    fixture *f = *state;
    zld_options o = opts(37, ZSM_CYCLIC, 5, 3, 4), io = o;
    io.num_workers = ZLD_WORKERS_NONE;
    zld_loader *l = NULL, *r = NULL;
    assert_int_equal(zld_create(&l, f->s, NSTREAMS, &o), ZR_OK);
    assert_int_equal(zld_create(&r, f->s, NSTREAMS, &io), ZR_OK);
    for (int k = 0; k < 30; k++) {
        zld_batch *a = NULL, *b = NULL;
        assert_int_equal(zld_next(l, &a), ZR_OK);
        assert_int_equal(zld_next(r, &b), ZR_OK);
        assert_int_equal(zld_batch_step(b), k);
        assert_memory_equal(zld_batch_indices(a), zld_batch_indices(b), 37 * 8);
        check_batch_content(b, 37);
        zld_batch_free(a);
        zld_batch_free(b);
    }
    zld_close(r);
    zld_close(l);
    io.pass = 1;
    assert_int_equal(zld_create(&r, f->s, NSTREAMS, &io), ZR_OK);
    assert_int_equal(zld_steps(r), 28);
    for (int k = 0; k < 28; k++) {
        zld_batch *b = NULL;
        assert_int_equal(zld_next(r, &b), ZR_OK);
        assert_int_equal(zld_batch_valid(b), zld_batch_count(b));
        zld_batch_free(b);
    }
    zld_batch *b = NULL;
    assert_int_equal(zld_next(r, &b), ZLD_END);
    zld_close(r);
}

/* even_batches: every rank the same steps of full batches; the valid
 * rows of all ranks hold every record once. 10 records, batch 2, world
 * 4: ranks 0 and 2 own one step, 1 and 3 two (one record in the second). */
static void test_even_batches(void **state)
{
    (void)state;
    char root[512], path[600];
    assert_int_equal(zt_mkdtemp(root, sizeof root, "even"), 0);
    snprintf(path, sizeof path, "%s/s", root);
    zrs_store *s = NULL;
    assert_int_equal(zrs_create_dense(&s, path, ZRS_UINT64, NULL, 0, ZRE_CODEC_RAW), ZR_OK);
    uint64_t v[10];
    for (uint64_t i = 0; i < 10; i++) v[i] = i;
    assert_int_equal(zrs_append_dense(s, v, sizeof v, 10, NULL), ZR_OK);
    unsigned seen[10] = {0};
    const uint64_t want_valid[4][2] = {{2, 0}, {2, 1}, {2, 0}, {2, 1}};
    for (uint32_t r = 0; r < 4; r++) {
        zld_options o = opts(2, ZSM_SEQUENTIAL, 0, r % 2 ? ZLD_WORKERS_NONE : 2, 2);
        o.pass = 1;
        o.shuffle = 1;
        o.even_batches = 1;
        o.rank = r;
        o.world_size = 4;
        zld_loader *l = NULL;
        assert_int_equal(zld_create(&l, &s, 1, &o), ZR_OK);
        assert_int_equal(zld_steps(l), 2);
        for (uint64_t k = 0; k < 2; k++) {
            zld_batch *b = NULL;
            assert_int_equal(zld_next(l, &b), ZR_OK);
            assert_int_equal(zld_batch_count(b), 2);
            assert_int_equal(zld_batch_valid(b), want_valid[r][k]);
            uint64_t nb = 0;
            const uint64_t *d = zld_batch_data(b, 0, &nb);
            assert_int_equal(nb, 16);
            for (uint64_t i = 0; i < zld_batch_valid(b); i++)
                seen[d[i]]++;
            for (uint64_t i = 0; i < 2; i++)
                assert_int_equal(d[i], zld_batch_indices(b)[i]);
            zld_batch_free(b);
        }
        zld_batch *b = NULL;
        assert_int_equal(zld_next(l, &b), ZLD_END);
        char *t = NULL;
        assert_int_equal(zld_state_json(l, &t), ZR_OK);
        zt_assert_mentions(t, "\"even_batches\":true");
        zld_state_free(t);
        zld_close(l);
    }
    for (int i = 0; i < 10; i++)
        assert_int_equal(seen[i], 1);
    zrs_close(s);
    zt_rmtree(root);
}

/* Length-bucketed steps: the loader's batches are zsm_bucket_indices'
 * (any worker count), hold the records of those indices, and the options
 * are checked (one length per record, cyclic only, endless only). */
static void test_bucket(void **state)
{
    fixture *f = *state;
    uint32_t *len = malloc(N * sizeof *len);
    for (uint64_t i = 0; i < N; i++) len[i] = (uint32_t)ragged_len(i);
    const uint64_t bs = 20, window = 5;
    zsm_config cfg = {0};
    cfg.length = N;
    cfg.batch_size = bs;
    cfg.seed = 9;
    cfg.mode = ZSM_CYCLIC;
    cfg.world_size = 1;
    size_t sb = zsm_bucket_scratch_bytes(&cfg, window);
    void *scratch = malloc(sb);
    uint64_t want[20];
    for (unsigned workers = 1; workers <= 3; workers += 2) {
        zld_options o = opts(bs, ZSM_CYCLIC, 9, workers, 4);
        o.bucket_lengths = len;
        o.bucket_count = N;
        o.bucket_window = window;
        zld_loader *l = NULL;
        assert_int_equal(zld_create(&l, f->s, NSTREAMS, &o), ZR_OK);
        for (uint64_t s = 0; s < 120; s++) { /* two cycles and more */
            zld_batch *b = NULL;
            assert_int_equal(zld_next(l, &b), ZR_OK);
            assert_int_equal(zsm_bucket_indices(&cfg, len, window, s, want, scratch, sb), ZSM_OK);
            assert_memory_equal(zld_batch_indices(b), want, sizeof want);
            check_batch_content(b, bs);
            zld_batch_free(b);
        }
        zld_options st;
        assert_int_equal(zld_get_state(l, &st), ZR_OK);
        assert_true(st.bucket_lengths != NULL && st.bucket_count == N && st.bucket_window == window);
        zld_close(l);
    }
    zld_options o = opts(bs, ZSM_CYCLIC, 9, 1, 1);
    o.bucket_lengths = len;
    o.bucket_count = N - 1;
    zld_loader *l = NULL;
    assert_int_equal(zld_create(&l, f->s, NSTREAMS, &o), ZR_EINVAL);
    assert_non_null(strstr(zr_last_error(), "one per record"));
    o.bucket_count = N;
    o.mode = ZSM_IID;
    assert_int_equal(zld_create(&l, f->s, NSTREAMS, &o), ZR_EINVAL);
    assert_non_null(strstr(zr_last_error(), "cyclic"));
    o.mode = ZSM_CYCLIC;
    o.pass = 1;
    assert_int_equal(zld_create(&l, f->s, NSTREAMS, &o), ZR_EINVAL);
    assert_non_null(strstr(zr_last_error(), "finite pass"));
    free(scratch);
    free(len);
}

/* zld_next_wait times out without taking anything: the step comes next. */
static void test_next_wait_times_out(void **state)
{
    fixture *f = *state;
    zld_options o = opts(8, ZSM_SEQUENTIAL, 0, 1, 1);
    zld_loader *l = NULL;
    assert_int_equal(zld_create(&l, f->s, NSTREAMS, &o), ZR_OK);
    zld_batch *b = NULL;
    assert_int_equal(zld_next(l, &b), ZR_OK); /* step 0 */
    zld_batch_free(b);
    int rc;
    do { /* either step 1 is ready, or we time out and get it later */
        rc = zld_next_wait(l, &b, 1);
        assert_true(rc == ZR_OK || rc == ZLD_TIMEOUT);
        if (rc == ZLD_TIMEOUT) assert_null(b);
    } while (rc == ZLD_TIMEOUT);
    assert_int_equal(zld_batch_step(b), 1);
    zld_batch_free(b);
    zld_stop(l);
    assert_int_equal(zld_next_wait(l, &b, 1000000), ZR_ECLOSED);
    zld_close(l);
}

/* --------------------------------------------------------------- flips */

/* A dense stream whose record i, byte k is (i * 31 + k) & 0xff. */
static int bytes_gather(void *user, const uint64_t *index, uint64_t count, void *dst,
                        uint64_t cap, const uint64_t *bounds)
{
    const uint64_t rs = *(const uint64_t *)user;
    (void)bounds;
    if (cap < count * rs) return zr_set_error(ZR_EINVAL, "bytes: dst too small");
    unsigned char *d = dst;
    for (uint64_t i = 0; i < count; i++)
        for (uint64_t k = 0; k < rs; k++) d[i * rs + k] = (unsigned char)((index[i] * 31 + k) & 0xff);
    return ZR_OK;
}

/* Batches of 4 MiB and more come from buffers that asked for huge pages
 * before their first touch: the hint is taken where the OS offers it (Linux
 * with transparent huge pages not "never"), refused as -ENOTSUP elsewhere,
 * a no-op on empty or sub-page ranges, and the buffers hold the right
 * bytes, recycled and flipped, with 1 and 2 workers. */
static void test_large_batches_hugepage_hint(void **state)
{
    (void)state;
    int thp = zt_os_thp_madvise();
    char one[100];
    int empty = zrp_advise_hugepages(one, 0);
    int small = zrp_advise_hugepages(one + 1, sizeof one - 1);
    assert_true(empty == 0 || empty == -ENOTSUP);
    assert_true(small == 0 || small == -ENOTSUP);
    if (thp == 1) { /* nothing to advise: taken as done */
        assert_int_equal(empty, 0);
        assert_int_equal(small, 0);
    }
    size_t big = (size_t)8 << 20;
    unsigned char *raw = malloc(big);
    assert_non_null(raw);
    int rc = zrp_advise_hugepages(raw + 1, big - 1);
    if (thp == 1)
        assert_int_equal(rc, 0);
    else
        assert_true(rc == 0 || rc == -ENOTSUP);
    memset(raw, 0x5a, big); /* usable whatever the hint did */
    assert_int_equal(raw[big - 1], 0x5a);
    free(raw);

    uint64_t rs = 3 * 4096; /* 3 rows of 4096 one-byte elements */
    const uint64_t bs = 512, n = 2000; /* 6 MiB a batch */
    zld_stream st;
    memset(&st, 0, sizeof st);
    st.user = &rs;
    st.name = "pixels";
    st.length = n;
    st.kind = ZLD_STREAM_DENSE;
    st.record_size = rs;
    st.gather = bytes_gather;
    zld_flip fl = {0, 4096, 1, 0.5};
    unsigned char *want = malloc(rs);
    assert_non_null(want);
    for (unsigned workers = 1; workers <= 2; workers++) {
        zld_options o = opts(bs, ZSM_IID, 9, workers, 2);
        o.flips = &fl;
        o.nflips = 1;
        zld_loader *l = NULL;
        assert_int_equal(zld_create_streams(&l, &st, 1, &o), ZR_OK);
        for (uint64_t step = 0; step < 5; step++) { /* past the ring: recycled buffers */
            zld_batch *b = NULL;
            assert_int_equal(zld_next(l, &b), ZR_OK);
            const uint64_t *idx = zld_batch_indices(b);
            uint64_t size = 0;
            const unsigned char *d = zld_batch_data(b, 0, &size);
            assert_int_equal(size, bs * rs);
            uint8_t mask[512];
            assert_int_equal(zld_flip_mask(l, step, 0.5, mask, bs), ZR_OK);
            for (uint64_t i = 0; i < bs; i += 37) {
                for (uint64_t k = 0; k < rs; k++) {
                    uint64_t row = k / 4096, e = k % 4096;
                    uint64_t src = row * 4096 + (mask[i] ? 4095 - e : e);
                    want[k] = (unsigned char)((idx[i] * 31 + src) & 0xff);
                }
                assert_memory_equal(d + i * rs, want, rs);
            }
            zld_batch_free(b);
        }
        zld_close(l);
    }
    free(want);
}

/* Random flips of every element size and of odd, short and long rows:
 * record i of a batch is the source record, its rows reversed element by
 * element exactly when the mask (zld_flip_mask, zsm_bernoulli) says so;
 * the same for any worker count; p = 0 never and p = 1 always flips;
 * index-aligned streams with the same p flip together. */
static void test_flips(void **state)
{
    (void)state;
    static const struct { uint32_t elem; uint64_t width; } cases[] = {
        {1, 37}, {1, 7}, {1, 16}, {1, 224}, {2, 9}, {4, 5}, {8, 3}, {1, 1}};
    const uint64_t bs = 40, n = 500;
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        uint64_t rs = cases[c].elem * cases[c].width * 3; /* 3 rows a record */
        zld_stream st[2];
        memset(st, 0, sizeof st);
        st[0].user = &rs;
        st[0].name = "bytes";
        st[0].length = n;
        st[0].kind = ZLD_STREAM_DENSE;
        st[0].record_size = rs;
        st[0].gather = bytes_gather;
        st[1] = st[0];
        st[1].name = "bytes-again";
        zld_flip fl[2] = {{0, cases[c].width, cases[c].elem, 0.5},
                          {1, cases[c].width, cases[c].elem, 0.5}};
        unsigned char *want = malloc(rs);
        unsigned char *first = malloc(bs * rs * 6);
        assert_non_null(want);
        assert_non_null(first);
        uint64_t flipped = 0;
        for (unsigned workers = 1; workers <= 3; workers += 2) {
            zld_options o = opts(bs, ZSM_IID, 5, workers, 4);
            o.flips = fl;
            o.nflips = 2;
            zld_loader *l = NULL;
            assert_int_equal(zld_create_streams(&l, st, 2, &o), ZR_OK);
            for (uint64_t step = 0; step < 6; step++) {
                zld_batch *b = NULL;
                assert_int_equal(zld_next(l, &b), ZR_OK);
                const uint64_t *idx = zld_batch_indices(b);
                const unsigned char *d0 = zld_batch_data(b, 0, NULL);
                const unsigned char *d1 = zld_batch_data(b, 1, NULL);
                uint8_t mask[40], coin[40];
                assert_int_equal(zld_flip_mask(l, step, 0.5, mask, bs), ZR_OK);
                assert_int_equal(zsm_bernoulli(5, step, 0, bs, 0.5, coin), ZSM_OK);
                assert_memory_equal(mask, coin, bs);
                for (uint64_t i = 0; i < bs; i++) {
                    for (uint64_t row = 0; row < 3; row++)
                        for (uint64_t e = 0; e < cases[c].width; e++) {
                            uint64_t src = mask[i] ? cases[c].width - 1 - e : e;
                            for (uint32_t byte = 0; byte < cases[c].elem; byte++) {
                                uint64_t k = (row * cases[c].width + src) * cases[c].elem + byte;
                                want[(row * cases[c].width + e) * cases[c].elem + byte] =
                                    (unsigned char)((idx[i] * 31 + k) & 0xff);
                            }
                        }
                    assert_memory_equal(d0 + i * rs, want, rs);
                    assert_memory_equal(d1 + i * rs, want, rs); /* flipped together */
                    if (workers == 1) flipped += mask[i];
                }
                if (workers == 1)
                    memcpy(first + step * bs * rs, d0, bs * rs);
                else /* any worker count: the same batches */
                    assert_memory_equal(first + step * bs * rs, d0, bs * rs);
                zld_batch_free(b);
            }
            zld_options got;
            assert_int_equal(zld_get_state(l, &got), ZR_OK);
            assert_int_equal(got.nflips, 2);
            assert_true(got.flips != NULL && got.flips != fl && got.flips[1].stream == 1);
            zld_close(l);
        }
        /* 240 coins of p = 0.5: far from none or all. */
        assert_true(flipped > 60 && flipped < 180);
        free(want);
        free(first);
    }
    uint8_t m[64];
    assert_int_equal(zsm_bernoulli(1, 2, 3, 64, 0.0, m), ZSM_OK);
    for (int i = 0; i < 64; i++) assert_int_equal(m[i], 0);
    assert_int_equal(zsm_bernoulli(1, 2, 3, 64, 1.0, m), ZSM_OK);
    for (int i = 0; i < 64; i++) assert_int_equal(m[i], 1);
    assert_int_equal(zsm_bernoulli(1, 2, 3, 64, 1.5, m), ZSM_EINVAL);
    assert_int_equal(zsm_bernoulli(1, 2, 3, 64, NAN, m), ZSM_EINVAL);
}

/* Flips the loader refuses, each with a message naming the problem. */
static void test_flip_errors(void **state)
{
    fixture *f = *state; /* dense u32[2] raw, dense f64 scalar, ragged i32 */
    static const struct { zld_flip fl; const char *msg; } bad[] = {
        {{2, 1, 4, 0.5}, "ragged"},
        {{5, 1, 4, 0.5}, "names stream 5"},
        {{0, 2, 3, 0.5}, "elem_size 3"},
        {{0, 3, 4, 0.5}, "not whole rows"},
        {{0, 0, 4, 0.5}, "not whole rows"},
        {{0, 2, 4, 1.01}, "outside [0, 1]"},
        {{0, 2, 4, -0.1}, "outside [0, 1]"},
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        zld_options o = opts(8, ZSM_CYCLIC, 0, 1, 1);
        o.flips = &bad[k].fl;
        o.nflips = 1;
        zld_loader *l = NULL;
        assert_int_equal(zld_create(&l, f->s, NSTREAMS, &o), ZR_EINVAL);
        assert_null(l);
        if (strstr(zr_last_error(), bad[k].msg) == NULL) fail_msg("%zu: %s", k, zr_last_error());
    }
    zld_flip two[2] = {{0, 2, 4, 0.5}, {0, 1, 8, 0.5}};
    zld_options o = opts(8, ZSM_CYCLIC, 0, 1, 1);
    o.flips = two;
    o.nflips = 2;
    zld_loader *l = NULL;
    assert_int_equal(zld_create(&l, f->s, NSTREAMS, &o), ZR_EINVAL);
    assert_non_null(strstr(zr_last_error(), "two flips"));
    /* A flip of the u32[2] stream swaps each record's two values. */
    zld_flip ok = {0, 2, 4, 1.0};
    o.flips = &ok;
    o.nflips = 1;
    assert_int_equal(zld_create(&l, f->s, NSTREAMS, &o), ZR_OK);
    zld_batch *b = NULL;
    assert_int_equal(zld_next(l, &b), ZR_OK);
    const uint32_t *d = zld_batch_data(b, 0, NULL);
    const uint64_t *idx = zld_batch_indices(b);
    for (uint64_t i = 0; i < 8; i++) {
        assert_int_equal(d[2 * i], idx[i] * 7 + 1);
        assert_int_equal(d[2 * i + 1], idx[i]);
    }
    zld_batch_free(b);
    uint8_t mask[9];
    assert_int_equal(zld_flip_mask(l, 0, 0.5, mask, 9), ZR_EINVAL);
    zld_close(l);
}

/* zld_options_init gives ZLD_OPTIONS_INIT for the current version, and
 * for an older version writes nothing past that version's fields. */
static void test_options_init(void **state)
{
    fixture *f = *state;
    const zld_options want = ZLD_OPTIONS_INIT;
    zld_options o;
    memset(&o, 0xA5, sizeof o);
    assert_int_equal(zld_options_init(&o, ZLD_OPTIONS_VERSION), ZR_OK);
    assert_int_equal(o.version, ZLD_OPTIONS_VERSION);
    assert_int_equal(o.batch_size, 256);
    assert_int_equal(o.mode, ZSM_CYCLIC);
    assert_int_equal(o.world_size, 1);
    assert_int_equal(o.readahead, ZLD_READAHEAD_AUTO);
    assert_null(o.flips);
    assert_null(o.names);
    assert_int_equal(o.pack_policy, ZSM_PACK_BEST_FIT);
    assert_int_equal(o.pack_overlong, ZSM_PACK_SPLIT);
    assert_true(o.seed == want.seed && o.start_step == want.start_step && o.rank == want.rank &&
                o.num_workers == want.num_workers && o.prefetch == want.prefetch &&
                o.pass == want.pass && o.bucket_lengths == want.bucket_lengths &&
                o.nflips == want.nflips && o.resume == want.resume && o.pack == want.pack &&
                o.pack_length == want.pack_length && o.even_batches == want.even_batches);
    /* Version 1: its struct ends before readahead. */
    unsigned char raw[sizeof(zld_options)];
    memset(raw, 0xA5, sizeof raw);
    assert_int_equal(zld_options_init((zld_options *)raw, 1), ZR_OK);
    assert_int_equal(((zld_options *)raw)->version, 1);
    assert_int_equal(((zld_options *)raw)->batch_size, 256);
    for (size_t k = offsetof(zld_options, readahead); k < sizeof raw; k++)
        assert_int_equal(raw[k], 0xA5);
    /* Options from it start a loader. */
    zld_options v1 = *(zld_options *)raw;
    v1.batch_size = 8;
    v1.num_workers = 1;
    zld_loader *l = NULL;
    assert_int_equal(zld_create(&l, f->s, NSTREAMS, &v1), ZR_OK);
    zld_close(l);
    assert_int_equal(zld_options_init(&o, 0), ZR_EINVAL);
    zt_assert_mentions(zr_last_error(), "options version 0, expected 1 to 7");
    assert_int_equal(zld_options_init(&o, ZLD_OPTIONS_VERSION + 1), ZR_EINVAL);
    assert_int_equal(zld_options_init(NULL, 1), ZR_EINVAL);
}

/* Every loader limit is zld_create's: beyond ZLD_MAX_WORKERS,
 * ZLD_MAX_PREFETCH or ZLD_MAX_READAHEAD the detail names the option and
 * its limit; at the limits (and ZLD_WORKERS_NONE, ZLD_READAHEAD_AUTO) a
 * loader starts. */
static void test_limits(void **state)
{
    fixture *f = *state;
    static const struct { unsigned workers, prefetch, readahead; const char *msg; } bad[] = {
        {ZLD_MAX_WORKERS + 1, 1, 0, "num_workers must be <= 4096"},
        {1, ZLD_MAX_PREFETCH + 1, 0, "prefetch must be <= 65536"},
        {1, 1, ZLD_MAX_READAHEAD + 1, "readahead must be <= 65536"},
        {ZLD_WORKERS_NONE - 1, 1, 0, "num_workers"},
        {1, ZLD_WORKERS_NONE, 0, "prefetch"},
        {1, 1, ZLD_READAHEAD_AUTO - 1, "readahead"},
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        zld_options o = opts(8, ZSM_CYCLIC, 0, bad[k].workers, bad[k].prefetch);
        o.readahead = bad[k].readahead;
        zld_loader *l = (zld_loader *)&l;
        assert_int_equal(zld_create(&l, f->s, NSTREAMS, &o), ZR_EINVAL);
        assert_null(l);
        if (strstr(zr_last_error(), bad[k].msg) == NULL) fail_msg("%zu: %s", k, zr_last_error());
    }
    static const struct { unsigned workers, prefetch, readahead; } good[] = {
        {2, ZLD_MAX_PREFETCH, ZLD_MAX_READAHEAD},
        {ZLD_WORKERS_NONE, 0, ZLD_READAHEAD_AUTO},
        {1, 1, ZLD_READAHEAD_AUTO},
    };
    for (size_t k = 0; k < sizeof good / sizeof good[0]; k++) {
        zld_options o = opts(8, ZSM_CYCLIC, 0, good[k].workers, good[k].prefetch);
        o.readahead = good[k].readahead;
        zld_loader *l = NULL;
        assert_int_equal(zld_create(&l, f->s, NSTREAMS, &o), ZR_OK);
        zld_batch *b = NULL;
        assert_int_equal(zld_next(l, &b), ZR_OK);
        check_batch_content(b, 8);
        zld_batch_free(b);
        zld_close(l);
    }
}

/* Flip resolution by stream name (what every binding calls): the stream
 * found by its name, width and elem_size from its item shape and dtype;
 * ZR_EINVAL naming the stream and the rule otherwise. */
static void test_flip_by_name(void **state)
{
    fixture *f = *state; /* dense u32[2], dense f64 scalar, ragged i32 */
    zld_items items[NSTREAMS];
    for (int s = 0; s < NSTREAMS; s++) assert_int_equal(zld_items_from_store(f->s[s], &items[s]), ZR_OK);
    assert_int_equal(items[0].kind, ZRS_DENSE);
    assert_int_equal(items[0].ndim, 1);
    assert_int_equal(items[2].kind, ZRS_RAGGED);
    const char *names[NSTREAMS] = {"pairs", "scalar", "tokens"};
    zld_flip fl = {99, 0, 0, 0.0};
    assert_int_equal(zld_flip_by_name(names, items, NSTREAMS, "pairs", 0.25, &fl), ZR_OK);
    assert_int_equal(fl.stream, 0);
    assert_int_equal(fl.width, 2);
    assert_int_equal(fl.elem_size, 4);
    assert_true(fl.p == 0.25);
    static const struct { const char *name; double p; const char *msg; } bad[] = {
        {"image", 0.5, "loader: flip: unknown stream 'image' (streams: 'pairs', 'scalar', 'tokens')"},
        {"tokens", 0.5, "flip: stream 'tokens' is ragged; only dense records can be flipped"},
        {"scalar", 0.5, "flip: stream 'scalar' holds scalar records (no axis to flip)"},
        {"pairs", 1.5, "flip: the probability of stream 'pairs' must be in [0, 1], got 1.5"},
        {"pairs", -0.5, "must be in [0, 1]"},
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        assert_int_equal(zld_flip_by_name(names, items, NSTREAMS, bad[k].name, bad[k].p, &fl),
                         ZR_EINVAL);
        if (strstr(zr_last_error(), bad[k].msg) == NULL) fail_msg("%zu: %s", k, zr_last_error());
    }
    assert_int_equal(zld_flip_by_name(names, items, NSTREAMS, "pairs", NAN, &fl), ZR_EINVAL);
    assert_int_equal(zld_flip_by_name(NULL, items, NSTREAMS, "pairs", 0.5, &fl), ZR_EINVAL);
    assert_int_equal(zld_items_from_store(NULL, &items[0]), ZR_EINVAL);
    /* By position: the label says "stream N"; an itemsize flips cannot handle. */
    zld_items c16 = {ZRS_DENSE, ZRS_COMPLEX128, 2, {3, 5}};
    assert_int_equal(zld_flip_resolve(&c16, 4, NULL, 0.5, &fl), ZR_EINVAL);
    zt_assert_mentions(zr_last_error(), "stream 4 has dtype <c16 (itemsize 16)");
    zld_items f2 = {ZRS_DENSE, ZRS_FLOAT16, 2, {3, 5}};
    assert_int_equal(zld_flip_resolve(&f2, 4, "stream 'img'", 1.0, &fl), ZR_OK);
    assert_int_equal(fl.stream, 4);
    assert_int_equal(fl.width, 5);
    assert_int_equal(fl.elem_size, 2);
    /* What it resolves, zld_create accepts: the u32[2] pairs swap. */
    assert_int_equal(zld_flip_by_name(names, items, NSTREAMS, "pairs", 1.0, &fl), ZR_OK);
    zld_options o = opts(8, ZSM_CYCLIC, 0, 1, 1);
    o.flips = &fl;
    o.nflips = 1;
    zld_loader *l = NULL;
    assert_int_equal(zld_create(&l, f->s, NSTREAMS, &o), ZR_OK);
    zld_batch *b = NULL;
    assert_int_equal(zld_next(l, &b), ZR_OK);
    const uint32_t *d = zld_batch_data(b, 0, NULL);
    const uint64_t *idx = zld_batch_indices(b);
    for (uint64_t i = 0; i < 8; i++) assert_int_equal(d[2 * i], idx[i] * 7 + 1);
    zld_batch_free(b);
    zld_close(l);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_version),
        cmocka_unit_test_setup_teardown(test_aligned_and_sampler_indices, setup, teardown),
        cmocka_unit_test_setup_teardown(test_same_for_any_workers, setup, teardown),
        cmocka_unit_test_setup_teardown(test_start_step, setup, teardown),
        cmocka_unit_test_setup_teardown(test_ranks, setup, teardown),
        cmocka_unit_test_setup_teardown(test_detach, setup, teardown),
        cmocka_unit_test_setup_teardown(test_buffers_reused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_buffers_outlive_close, setup, teardown),
        cmocka_unit_test_setup_teardown(test_create_errors, setup, teardown),
        cmocka_unit_test_setup_teardown(test_limits, setup, teardown),
        cmocka_unit_test_setup_teardown(test_options_init, setup, teardown),
        cmocka_unit_test_setup_teardown(test_flip_by_name, setup, teardown),
        cmocka_unit_test_setup_teardown(test_worker_error_surfaces, setup, teardown),
        cmocka_unit_test_setup_teardown(test_close_on_full_queue, setup, teardown),
        cmocka_unit_test(test_generic_streams),
        cmocka_unit_test(test_state_resumes_exactly),
        cmocka_unit_test(test_callback_error_names_step),
        cmocka_unit_test(test_prefetch_bounds_undelivered),
        cmocka_unit_test(test_readahead_hints_future_steps),
        cmocka_unit_test_setup_teardown(test_readahead_auto_follows_the_page_cache, setup, teardown),
        cmocka_unit_test_setup_teardown(test_store_advise, setup, teardown),
        cmocka_unit_test(test_stop),
        cmocka_unit_test_setup_teardown(test_pass, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bucket, setup, teardown),
        cmocka_unit_test_setup_teardown(test_next_wait_times_out, setup, teardown),
        cmocka_unit_test(test_flips),
        cmocka_unit_test(test_large_batches_hugepage_hint),
        cmocka_unit_test_setup_teardown(test_flip_errors, setup, teardown),
        cmocka_unit_test_setup_teardown(test_inline_workers, setup, teardown),
        cmocka_unit_test(test_even_batches),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
