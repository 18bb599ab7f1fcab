/*
 * torture_packload.c - the loader's pack mode over stores of known
 * documents: every document's tokens in order within their segments, no
 * segment across a row, positions restarting per segment, seq_lens and
 * cu_seqlens adding up to the non-padding count, aligned streams packed
 * alike; for every policy: each document exactly once per pass, the same
 * batches for any worker count, an exact resume from the state (and a
 * resume with other packing options refused), rank sharding of the global
 * batch, endless steps as a pure function of the step; the refusals.
 */
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
#include "zrerror_sys.h"

typedef zt_dir fixture;

static int setup(void **state) { return zt_dir_setup(state, "packload"); }

#define assert_msg(needle) zt_assert_mentions(zr_last_error(), (needle))

static const zsm_pack_policy POLICIES[] = {ZSM_PACK_FIRST_FIT, ZSM_PACK_BEST_FIT, ZSM_PACK_CONCAT};
static const zsm_pack_overlong OVERLONG[] = {ZSM_PACK_SPLIT, ZSM_PACK_TRUNCATE, ZSM_PACK_DROP};

/* Token j of document d: both are recoverable from any token. */
#define TOKEN(d, j) ((int32_t)((d) * 4096 + (j)))
#define MASK(d, j) ((uint8_t)(((d) * 7 + (j)) & 0xff))

/* The corpus: n documents of known lengths (some longer than 48, some
 * empty: doc 5), as three aligned ragged stores: int32 tokens [len], a
 * uint8 mask [len] and a float32 pair per token [len, 2]. */
#define NDOCS 120
#define L 48

static uint32_t doc_len(uint32_t d)
{
    if (d == 5) return 0;
    uint64_t s = d * 0x9E3779B97F4A7C15ull + 7;
    uint64_t r = zt_splitmix64(&s);
    return (uint32_t)(r % 10 == 0 ? 40 + r % 100 : 1 + r % 30);
}

static void append_one(zrs_store *s, const void *payload, uint64_t ndim, const uint64_t *dims,
                       uint64_t payload_bytes)
{
    uint64_t size = 8 * (1 + ndim) + payload_bytes;
    unsigned char *rec = malloc(size);
    assert_non_null(rec);
    zt_put_le64(rec, ndim);
    for (uint64_t k = 0; k < ndim; k++) zt_put_le64(rec + 8 * (1 + k), dims[k]);
    memcpy(rec + 8 * (1 + ndim), payload, payload_bytes);
    uint64_t bounds[2] = {0, size};
    assert_int_equal(zrs_append_ragged(s, rec, bounds, 1, NULL), ZR_OK);
    free(rec);
}

/* The three stores under the fixture's directory (empty documents are
 * left out of stores that refuse them: doc 5 then has one token). */
static void make_corpus(fixture *fx, zrs_store **out, uint32_t *lens)
{
    assert_int_equal(zrs_create_ragged(&out[0], zt_dir_at(fx, "tokens"), ZRS_INT32, ZRE_CODEC_RAW),
                     ZR_OK);
    assert_int_equal(zrs_create_ragged(&out[1], zt_dir_at(fx, "mask"), ZRS_UINT8, ZRE_CODEC_ZSTD),
                     ZR_OK);
    assert_int_equal(zrs_create_ragged(&out[2], zt_dir_at(fx, "pair"), ZRS_FLOAT32, ZRE_CODEC_RAW),
                     ZR_OK);
    for (uint32_t d = 0; d < NDOCS; d++) {
        uint32_t n = doc_len(d);
        int32_t tok[200];
        uint8_t mask[200];
        float pair[400];
        for (uint32_t j = 0; j < n; j++) {
            tok[j] = TOKEN(d, j);
            mask[j] = MASK(d, j);
            pair[2 * j] = (float)d;
            pair[2 * j + 1] = (float)j;
        }
        uint64_t dims[2] = {n, 2};
        append_one(out[0], tok, 1, dims, n * 4u);
        append_one(out[1], mask, 1, dims, n);
        append_one(out[2], pair, 2, dims, n * 8u);
        lens[d] = n;
    }
}

static void close_corpus(zrs_store **s)
{
    for (int i = 0; i < 3; i++) assert_int_equal(zrs_close(s[i]), ZR_OK);
}

static zld_options pack_opts(zsm_pack_policy pol, zsm_pack_overlong ov, uint64_t batch,
                             uint64_t seed)
{
    zld_options o = ZLD_OPTIONS_INIT;
    o.batch_size = batch;
    o.mode = ZSM_CYCLIC;
    o.seed = seed;
    o.num_workers = 2;
    o.prefetch = 3;
    o.pack = 1;
    o.pack_policy = pol;
    o.pack_length = L;
    o.pack_window = 16;
    o.pack_overlong = ov;
    return o;
}

static uint64_t placed(zsm_pack_overlong ov, uint64_t n)
{
    if (n <= L || ov == ZSM_PACK_SPLIT) return n;
    return ov == ZSM_PACK_TRUNCATE ? L : 0;
}

/* One batch, checked against the documents' known contents; the
 * elements each document got are added to covered[] (and must continue
 * it, for concat, or be its full pieces then its rest). Returns the
 * rows. */
static uint64_t check_batch(zld_batch *b, size_t nstreams, zsm_pack_policy pol,
                            zsm_pack_overlong ov, const uint32_t *lens, uint64_t *covered)
{
    zld_pack_info in;
    assert_int_equal(zld_batch_pack_info(b, &in), ZR_OK);
    assert_int_equal(in.rows, zld_batch_count(b));
    assert_int_equal(in.length, L);
    uint64_t nb[3 + ZLD_PACK_PARTS];
    const size_t P = nstreams;
    const int32_t *tok = zld_batch_data(b, 0, &nb[0]);
    const uint8_t *mask = nstreams > 1 ? zld_batch_data(b, 1, &nb[1]) : NULL;
    const float *pair = nstreams > 2 ? zld_batch_data(b, 2, &nb[2]) : NULL;
    const int32_t *seg = zld_batch_data(b, P + ZLD_PACK_SEGMENT_IDS, &nb[P]);
    const int32_t *pos = zld_batch_data(b, P + ZLD_PACK_POSITIONS, &nb[P + 1]);
    const int32_t *sl = zld_batch_data(b, P + ZLD_PACK_SEQ_LENS, &nb[P + 2]);
    const int32_t *cu = zld_batch_data(b, P + ZLD_PACK_CU_SEQLENS, &nb[P + 3]);
    const uint64_t *docs = zld_batch_indices(b);
    const uint64_t rows = in.rows, S = in.max_segments;
    assert_int_equal(nb[0], rows * L * 4);
    if (mask) assert_int_equal(nb[1], rows * L);
    if (pair) assert_int_equal(nb[2], rows * L * 8);
    assert_int_equal(nb[P], rows * L * 4);
    assert_int_equal(nb[P + 1], rows * L * 4);
    assert_int_equal(nb[P + 2], rows * S * 4);
    assert_int_equal(nb[P + 3], (in.segments + 1) * 4);
    assert_null(zld_batch_bounds(b, 0));
    assert_int_equal(cu[0], 0);
    uint64_t q = 0, tokens = 0, longest = 0, most = 0;
    for (uint64_t r = 0; r < rows; r++) {
        uint64_t k = 0, used = 0, sum = 0;
        while (used < L && seg[r * L + used] != 0) {
            /* segment k + 1 of row r: one document's consecutive tokens */
            assert_int_equal(seg[r * L + used], (int32_t)(k + 1));
            assert_true(q < in.segments);
            const uint64_t d = docs[q], off = (uint64_t)(tok[r * L + used] % 4096);
            assert_int_equal(tok[r * L + used] / 4096, (int32_t)d);
            uint64_t n = 0;
            while (used + n < L && seg[r * L + used + n] == (int32_t)(k + 1)) {
                const uint64_t at = r * L + used + n;
                assert_int_equal(tok[at], TOKEN(d, off + n)); /* in order */
                assert_int_equal(pos[at], (int32_t)n);         /* restarts per segment */
                if (mask) assert_int_equal(mask[at], MASK(d, off + n));
                if (pair) {
                    assert_true(pair[2 * at] == (float)d);
                    assert_true(pair[2 * at + 1] == (float)(off + n));
                }
                n++;
            }
            assert_true(off + n <= placed(ov, lens[d]));
            if (pol == ZSM_PACK_CONCAT) {
                assert_int_equal(off, covered[d]); /* continues where it stopped */
            } else if (n == L) {
                assert_int_equal(off % L, 0);
            } else {
                assert_int_equal(off, placed(ov, lens[d]) / L * L); /* the rest, last */
            }
            covered[d] += n;
            assert_int_equal(sl[r * S + k], (int32_t)n);
            sum += n;
            tokens += n;
            assert_int_equal(cu[q + 1], (int32_t)tokens);
            if (n > longest) longest = n;
            used += n;
            k++;
            q++;
        }
        for (uint64_t j = used; j < L; j++) { /* padding: zero everywhere */
            assert_int_equal(seg[r * L + j], 0);
            assert_int_equal(pos[r * L + j], 0);
            assert_int_equal(tok[r * L + j], 0);
            if (mask) assert_int_equal(mask[r * L + j], 0);
        }
        for (uint64_t j = k; j < S; j++) assert_int_equal(sl[r * S + j], 0);
        assert_int_equal(sum, used); /* seq_lens sum to the row's non-padding count */
        if (k > most) most = k;
    }
    assert_int_equal(q, in.segments);
    assert_int_equal(tokens, in.tokens);
    assert_int_equal(longest, in.max_seqlen);
    assert_int_equal(most, S);
    return rows;
}

/* ------------------------------------------------- the known corpus */

static void test_known_corpus_every_policy(void **state)
{
    fixture *fx = *state;
    zrs_store *s[3];
    uint32_t lens[NDOCS];
    make_corpus(fx, s, lens);
    for (size_t a = 0; a < 3; a++)
        for (size_t c = 0; c < 3; c++)
            for (int shuffle = 0; shuffle <= 1; shuffle++) {
                zld_options o = pack_opts(POLICIES[a], OVERLONG[c], 4, 11);
                o.pass = 1;
                o.shuffle = shuffle;
                o.epoch = 2;
                zld_loader *l = NULL;
                assert_int_equal(zld_create(&l, s, 3, &o), ZR_OK);
                uint64_t covered[NDOCS] = {0}, rows = 0, steps = 0;
                zld_batch *b = NULL;
                int rc;
                while ((rc = zld_next(l, &b)) == ZR_OK) {
                    rows += check_batch(b, 3, POLICIES[a], OVERLONG[c], lens, covered);
                    steps++;
                    zld_batch_free(b);
                }
                assert_int_equal(rc, ZLD_END);
                assert_int_equal(steps, zld_steps(l));
                uint64_t want = 0;
                for (uint32_t d = 0; d < NDOCS; d++) {
                    assert_int_equal(covered[d], placed(OVERLONG[c], lens[d])); /* once each */
                    want += covered[d];
                }
                if (POLICIES[a] == ZSM_PACK_CONCAT) assert_int_equal(rows, (want + L - 1) / L);
                uint64_t dims[ZRS_MAX_NDIM];
                size_t nd = 9;
                assert_int_equal(zld_pack_item_shape(l, 0, dims, &nd), ZR_OK);
                assert_int_equal(nd, 0);
                assert_int_equal(zld_pack_item_shape(l, 2, dims, &nd), ZR_OK);
                assert_int_equal(nd, 1);
                assert_int_equal(dims[0], 2);
                assert_int_equal(zld_pack_item_shape(l, 3, dims, &nd), ZR_EINVAL);
                zld_close(l);
            }
    close_corpus(s);
}

/* A finite pass's rows spread over ranks: each document once in all.
 * Step by step, rank by rank is the pass's row order (concat's pieces
 * then continue each other). */
static void test_pass_over_ranks(void **state)
{
    fixture *fx = *state;
    zrs_store *s[3];
    uint32_t lens[NDOCS];
    make_corpus(fx, s, lens);
    for (size_t a = 0; a < 3; a++) {
        uint64_t covered[NDOCS] = {0};
        zld_loader *l[3];
        for (uint32_t r = 0; r < 3; r++) {
            zld_options o = pack_opts(POLICIES[a], ZSM_PACK_SPLIT, 5, 3);
            o.pass = 1;
            o.shuffle = 1;
            o.rank = r;
            o.world_size = 3;
            assert_int_equal(zld_create(&l[r], s, 1, &o), ZR_OK);
        }
        for (int more = 1; more;) {
            more = 0;
            for (uint32_t r = 0; r < 3; r++) {
                zld_batch *b = NULL;
                int rc = zld_next(l[r], &b);
                if (rc == ZLD_END) continue;
                assert_int_equal(rc, ZR_OK);
                check_batch(b, 1, POLICIES[a], ZSM_PACK_SPLIT, lens, covered);
                zld_batch_free(b);
                more = 1;
            }
        }
        for (uint32_t r = 0; r < 3; r++) zld_close(l[r]);
        for (uint32_t d = 0; d < NDOCS; d++) assert_int_equal(covered[d], lens[d]);
    }
    close_corpus(s);
}

/* ------------------------------------------ endless: pure in the step */

/* The bytes of every part of a batch, back to back, for comparing. */
typedef struct snap {
    unsigned char *bytes;
    size_t n;
} snap;

static snap snapshot(zld_batch *b, size_t nstreams)
{
    snap sn = {NULL, 0};
    for (size_t k = 0; k < nstreams + ZLD_PACK_PARTS; k++) {
        uint64_t nb = 0;
        const void *d = zld_batch_data(b, k, &nb);
        sn.bytes = realloc(sn.bytes, sn.n + (size_t)nb + 1);
        assert_non_null(sn.bytes);
        memcpy(sn.bytes + sn.n, d, (size_t)nb);
        sn.n += (size_t)nb;
    }
    zld_pack_info in;
    assert_int_equal(zld_batch_pack_info(b, &in), ZR_OK);
    sn.bytes = realloc(sn.bytes, sn.n + in.segments * 8 + 1);
    memcpy(sn.bytes + sn.n, zld_batch_indices(b), in.segments * 8);
    sn.n += in.segments * 8;
    return sn;
}

static void take_snaps(zld_loader *l, size_t nstreams, uint64_t steps, snap *out)
{
    for (uint64_t k = 0; k < steps; k++) {
        zld_batch *b = NULL;
        assert_int_equal(zld_next(l, &b), ZR_OK);
        out[k] = snapshot(b, nstreams);
        zld_batch_free(b);
    }
}

static void assert_same(const snap *a, const snap *b, uint64_t n)
{
    for (uint64_t k = 0; k < n; k++) {
        assert_int_equal(a[k].n, b[k].n);
        assert_memory_equal(a[k].bytes, b[k].bytes, a[k].n);
    }
}

static void free_snaps(snap *s, uint64_t n)
{
    for (uint64_t k = 0; k < n; k++) free(s[k].bytes);
}

#define STEPS 40 /* several epochs: about 60 rows an epoch, 8 a step */

static void test_workers_seek_and_resume(void **state)
{
    fixture *fx = *state;
    zrs_store *s[3];
    uint32_t lens[NDOCS];
    make_corpus(fx, s, lens);
    for (size_t a = 0; a < 3; a++) {
        zld_options o = pack_opts(POLICIES[a], ZSM_PACK_SPLIT, 8, 21);
        snap ref[STEPS], other[STEPS];
        zld_loader *l = NULL;
        o.num_workers = 1;
        o.prefetch = 1;
        assert_int_equal(zld_create(&l, s, 2, &o), ZR_OK);
        take_snaps(l, 2, STEPS, ref);
        zld_close(l);
        o.num_workers = 4;
        o.prefetch = 7;
        assert_int_equal(zld_create(&l, s, 2, &o), ZR_OK);
        take_snaps(l, 2, STEPS, other);
        assert_same(ref, other, STEPS);
        free_snaps(other, STEPS);
        zld_close(l);
        o.num_workers = ZLD_WORKERS_NONE;
        assert_int_equal(zld_create(&l, s, 2, &o), ZR_OK);
        take_snaps(l, 2, STEPS, other);
        assert_same(ref, other, STEPS);
        free_snaps(other, STEPS);
        zld_close(l);
        /* a seek: start at step 23 (in a later epoch) */
        o.num_workers = 3;
        o.start_step = 23;
        assert_int_equal(zld_create(&l, s, 2, &o), ZR_OK);
        take_snaps(l, 2, 5, other);
        assert_same(ref + 23, other, 5);
        free_snaps(other, 5);
        /* the state after those 5 steps resumes exactly, at step 28 */
        char *text = NULL;
        assert_int_equal(zld_state_json(l, &text), ZR_OK);
        zt_assert_mentions(text, "\"mode\":\"pack\"");
        zt_assert_mentions(text, "\"pack_policy\":\"");
        zt_assert_mentions(text, "\"pack_length\":48");
        zld_close(l);
        zld_options r = pack_opts(POLICIES[a], ZSM_PACK_SPLIT, 8, 21);
        r.resume = text;
        assert_int_equal(zld_create(&l, s, 2, &r), ZR_OK);
        assert_int_equal(zld_next_step(l), 28);
        take_snaps(l, 2, STEPS - 28, other);
        assert_same(ref + 28, other, STEPS - 28);
        free_snaps(other, STEPS - 28);
        zld_close(l);
        /* other packing options: refused, naming them */
        r.pack_length = L + 1;
        assert_int_equal(zld_create(&l, s, 2, &r), ZR_EINVAL);
        assert_msg("pack_length: 48 in the state, 49 now");
        r = pack_opts(POLICIES[(a + 1) % 3], ZSM_PACK_DROP, 8, 21);
        r.pack_window = 17;
        r.resume = text;
        assert_int_equal(zld_create(&l, s, 2, &r), ZR_EINVAL);
        assert_msg("pack_policy");
        assert_msg("pack_overlong: 'split' in the state, 'drop' now");
        assert_msg("pack_window: 16 in the state, 17 now");
        r = pack_opts(POLICIES[a], ZSM_PACK_SPLIT, 8, 21);
        r.pack = 0;
        r.resume = text;
        assert_int_equal(zld_create(&l, s, 2, &r), ZR_EINVAL);
        assert_msg("mode: 'pack' in the state, 'cyclic' now");
        zld_state_free(text);
        free_snaps(ref, STEPS);
    }
    close_corpus(s);
}

/* Endless epochs: in each epoch every document's elements once. Rows of
 * a step may run from one epoch into the next; the rows' global order is
 * the epochs' back to back, so counting whole epochs of rows works. */
static void test_endless_epochs_place_each_document_once(void **state)
{
    fixture *fx = *state;
    zrs_store *s[3];
    uint32_t lens[NDOCS];
    make_corpus(fx, s, lens);
    for (size_t a = 0; a < 3; a++) {
        /* batch_size 1: a row per step, so epochs can be cut exactly */
        zld_options o = pack_opts(POLICIES[a], ZSM_PACK_SPLIT, 1, 5);
        zld_loader *l = NULL;
        assert_int_equal(zld_create(&l, s, 1, &o), ZR_OK);
        uint64_t total = 0;
        for (uint32_t d = 0; d < NDOCS; d++) total += lens[d];
        for (int epoch = 0; epoch < 3; epoch++) {
            uint64_t covered[NDOCS] = {0}, got = 0;
            while (got < total) {
                zld_batch *b = NULL;
                assert_int_equal(zld_next(l, &b), ZR_OK);
                zld_pack_info in;
                assert_int_equal(zld_batch_pack_info(b, &in), ZR_OK);
                check_batch(b, 1, POLICIES[a], ZSM_PACK_SPLIT, lens, covered);
                got += in.tokens;
                zld_batch_free(b);
            }
            assert_int_equal(got, total);
            for (uint32_t d = 0; d < NDOCS; d++) assert_int_equal(covered[d], lens[d]);
        }
        zld_close(l);
    }
    close_corpus(s);
}

/* Rank r's batch is rows [r*B, (r+1)*B) of the global batch: the ranks'
 * batches side by side are a world-1 loader's of batch B * world. */
static void test_ranks_split_the_global_batch(void **state)
{
    fixture *fx = *state;
    zrs_store *s[3];
    uint32_t lens[NDOCS];
    make_corpus(fx, s, lens);
    for (size_t a = 0; a < 3; a++) {
        const uint64_t B = 3, W = 4, steps = 12;
        zld_options g = pack_opts(POLICIES[a], ZSM_PACK_SPLIT, B * W, 8);
        zld_loader *gl = NULL;
        assert_int_equal(zld_create(&gl, s, 2, &g), ZR_OK);
        zld_loader *rl[4];
        for (uint32_t r = 0; r < W; r++) {
            zld_options o = pack_opts(POLICIES[a], ZSM_PACK_SPLIT, B, 8);
            o.rank = r;
            o.world_size = (uint32_t)W;
            assert_int_equal(zld_create(&rl[r], s, 2, &o), ZR_OK);
        }
        for (uint64_t k = 0; k < steps; k++) {
            zld_batch *gb = NULL;
            assert_int_equal(zld_next(gl, &gb), ZR_OK);
            const int32_t *gt = zld_batch_data(gb, 0, NULL);
            const uint8_t *gm = zld_batch_data(gb, 1, NULL);
            const int32_t *gs = zld_batch_data(gb, 2 + ZLD_PACK_SEGMENT_IDS, NULL);
            for (uint32_t r = 0; r < W; r++) {
                zld_batch *b = NULL;
                assert_int_equal(zld_next(rl[r], &b), ZR_OK);
                assert_int_equal(zld_batch_count(b), B);
                assert_memory_equal(zld_batch_data(b, 0, NULL), gt + r * B * L, B * L * 4);
                assert_memory_equal(zld_batch_data(b, 1, NULL), gm + r * B * L, B * L);
                assert_memory_equal(zld_batch_data(b, 2 + ZLD_PACK_SEGMENT_IDS, NULL),
                                    gs + r * B * L, B * L * 4);
                zld_batch_free(b);
            }
            zld_batch_free(gb);
        }
        zld_close(gl);
        for (uint32_t r = 0; r < W; r++) zld_close(rl[r]);
    }
    close_corpus(s);
}

/* Detached parts outlive the batch and the loader. */
static void test_detach(void **state)
{
    fixture *fx = *state;
    zrs_store *s[3];
    uint32_t lens[NDOCS];
    make_corpus(fx, s, lens);
    zld_options o = pack_opts(ZSM_PACK_BEST_FIT, ZSM_PACK_SPLIT, 4, 1);
    zld_loader *l = NULL;
    assert_int_equal(zld_create(&l, s, 1, &o), ZR_OK);
    zld_batch *b = NULL;
    assert_int_equal(zld_next(l, &b), ZR_OK);
    uint64_t n0 = 0, n1 = 0;
    int32_t *seg = zld_batch_detach(b, 1 + ZLD_PACK_SEGMENT_IDS, &n0);
    int32_t *cu = zld_batch_detach(b, 1 + ZLD_PACK_CU_SEQLENS, &n1);
    assert_non_null(seg);
    assert_non_null(cu);
    assert_null(zld_batch_data(b, 1 + ZLD_PACK_SEGMENT_IDS, NULL));
    zld_batch_free(b);
    zld_close(l);
    assert_int_equal(seg[0], 1);
    assert_int_equal(cu[0], 0);
    zld_free(seg);
    zld_free(cu);
    close_corpus(s);
}

/* ------------------------------------------------- failing streams */

/* A generic ragged stream of n documents (doc d: d % 13 + 1 int32 tokens)
 * that can fail its gather at one record, or lie about a record's shape
 * after the loader planned it. */
typedef struct fake {
    uint64_t n;
    uint64_t fail_at;  /* gather of this record fails (UINT64_MAX: never) */
    uint64_t lie_at;   /* this record's prefix says one token more */
} fake;

static uint64_t fake_len(uint64_t d) { return d % 13 + 1; }

static int fake_sizes(void *user, const uint64_t *index, uint64_t count, uint64_t *sizes)
{
    (void)user;
    for (uint64_t i = 0; i < count; i++) sizes[i] = 16 + 4 * fake_len(index[i]);
    return ZR_OK;
}

static int fake_gather(void *user, const uint64_t *index, uint64_t count, void *dst,
                       uint64_t cap, const uint64_t *bounds)
{
    const fake *f = user;
    (void)cap;
    for (uint64_t i = 0; i < count; i++) {
        if (index[i] == f->fail_at)
            return zr_set_error(ZR_EIO, "fake: record %llu cannot be read",
                                (unsigned long long)index[i]);
        unsigned char *rec = (unsigned char *)dst + bounds[i];
        uint64_t n = fake_len(index[i]);
        zt_put_le64(rec, 1);
        zt_put_le64(rec + 8, n + (index[i] == f->lie_at));
        for (uint64_t j = 0; j < n; j++) zt_put_le32(rec + 16 + 4 * j, (uint32_t)TOKEN(index[i], j));
    }
    return ZR_OK;
}

static zld_stream fake_stream(fake *f)
{
    zld_stream st;
    memset(&st, 0, sizeof st);
    st.user = f;
    st.name = "fake";
    st.length = f->n;
    st.kind = ZLD_STREAM_RAGGED;
    st.gather = fake_gather;
    st.sizes = fake_sizes;
    return st;
}

/* A failing gather, or a record that no longer matches the plan, stops the
 * loader at the step that needs it: earlier steps are delivered, then
 * ZR_ESTATE naming the step and the cause. */
static void test_failures_surface_at_their_step(void **state)
{
    (void)state;
    for (int lie = 0; lie <= 1; lie++) {
        fake f = {200, UINT64_MAX, UINT64_MAX};
        zld_stream st = fake_stream(&f);
        zld_options o = pack_opts(ZSM_PACK_BEST_FIT, ZSM_PACK_SPLIT, 2, 0);
        o.pass = 1; /* index order: the failing record's step is known */
        zld_loader *l = NULL;
        assert_int_equal(zld_create_streams(&l, &st, 1, &o), ZR_OK);
        /* find the first step holding record 150 */
        uint64_t step = UINT64_MAX;
        for (uint64_t k = 0; k < zld_steps(l) && step == UINT64_MAX; k++) {
            zld_batch *b = NULL;
            assert_int_equal(zld_next(l, &b), ZR_OK);
            zld_pack_info in;
            assert_int_equal(zld_batch_pack_info(b, &in), ZR_OK);
            for (uint64_t q = 0; q < in.segments; q++)
                if (zld_batch_indices(b)[q] == 150) step = k;
            zld_batch_free(b);
        }
        zld_close(l);
        assert_true(step != UINT64_MAX);
        if (lie) f.lie_at = 150;
        else f.fail_at = 150;
        assert_int_equal(zld_create_streams(&l, &st, 1, &o), ZR_OK);
        for (uint64_t k = 0; k < step; k++) {
            zld_batch *b = NULL;
            assert_int_equal(zld_next(l, &b), ZR_OK);
            zld_batch_free(b);
        }
        zld_batch *b = NULL;
        assert_int_equal(zld_next(l, &b), ZR_ESTATE);
        assert_null(b);
        char want[64];
        snprintf(want, sizeof want, "step %llu", (unsigned long long)step);
        assert_msg(want);
        assert_msg(lie ? "record 150 changed" : "record 150 cannot be read");
        uint64_t at = 0;
        assert_int_equal(zld_failed(l, &at), 1);
        assert_int_equal(at, step);
        zld_close(l);
    }
    /* a gather that fails at create: the loader is not made */
    fake f = {50, 3, UINT64_MAX};
    zld_stream st = fake_stream(&f);
    zld_options o = pack_opts(ZSM_PACK_FIRST_FIT, ZSM_PACK_SPLIT, 2, 0);
    zld_loader *l = NULL;
    /* the longest record (13 tokens: doc 12) is read at create; make it fail */
    f.fail_at = 12;
    assert_int_equal(zld_create_streams(&l, &st, 1, &o), ZR_EIO);
    assert_null(l);
    assert_msg("stream 0 (fake): reading record 12 for its shape");
    assert_msg("record 12 cannot be read");
}

/* ---------------------------------------------------------- refusals */

static void test_refusals(void **state)
{
    fixture *fx = *state;
    zrs_store *s[4];
    uint32_t lens[NDOCS];
    make_corpus(fx, s, lens);
    zld_loader *l = NULL;
    zld_options o = pack_opts(ZSM_PACK_FIRST_FIT, ZSM_PACK_SPLIT, 4, 0);
    o.mode = ZSM_IID;
    assert_int_equal(zld_create(&l, s, 1, &o), ZR_EINVAL);
    assert_msg("mode must be cyclic");
    o = pack_opts(ZSM_PACK_FIRST_FIT, ZSM_PACK_SPLIT, 4, 0);
    o.pack_length = 0;
    assert_int_equal(zld_create(&l, s, 1, &o), ZR_EINVAL);
    assert_msg("pack_length must be");
    o.pack_length = L;
    o.pack_policy = (zsm_pack_policy)7;
    assert_int_equal(zld_create(&l, s, 1, &o), ZR_EINVAL);
    assert_msg("unknown pack_policy 7");
    o = pack_opts(ZSM_PACK_FIRST_FIT, ZSM_PACK_SPLIT, 1u << 30, 0);
    assert_int_equal(zld_create(&l, s, 1, &o), ZR_EINVAL);
    assert_msg("below 2^31");
    /* bucketing */
    o = pack_opts(ZSM_PACK_FIRST_FIT, ZSM_PACK_SPLIT, 4, 0);
    o.bucket_lengths = lens;
    o.bucket_count = NDOCS;
    assert_int_equal(zld_create(&l, s, 1, &o), ZR_EINVAL);
    assert_msg("bucketing");
    /* a dense stream */
    assert_int_equal(zrs_create_dense(&s[3], zt_dir_at(fx, "label"), ZRS_UINT32, NULL, 0,
                                      ZRE_CODEC_RAW), ZR_OK);
    uint32_t labels[NDOCS] = {0};
    assert_int_equal(zrs_append_dense(s[3], labels, sizeof labels, NDOCS, NULL), ZR_OK);
    zrs_store *mixed[2] = {s[0], s[3]};
    o = pack_opts(ZSM_PACK_FIRST_FIT, ZSM_PACK_SPLIT, 4, 0);
    assert_int_equal(zld_create(&l, mixed, 2, &o), ZR_EINVAL);
    assert_msg("is dense; pack mode packs ragged streams");
    assert_int_equal(zrs_close(s[3]), ZR_OK);
    /* a stream not aligned element by element: doc 9 has one more */
    zrs_store *odd = NULL;
    assert_int_equal(zrs_create_ragged(&odd, zt_dir_at(fx, "odd"), ZRS_UINT8, ZRE_CODEC_RAW), ZR_OK);
    for (uint32_t d = 0; d < NDOCS; d++) {
        uint8_t v[200] = {0};
        uint64_t dims[1] = {lens[d] + (d == 9)};
        append_one(odd, v, 1, dims, dims[0]);
    }
    zrs_store *two[2] = {s[0], odd};
    assert_int_equal(zld_create(&l, two, 2, &o), ZR_EINVAL);
    assert_msg("is not aligned with stream 0");
    assert_msg("record 9");
    assert_int_equal(zrs_close(odd), ZR_OK);
    /* nothing to pack: every document dropped */
    zrs_store *longs = NULL;
    assert_int_equal(zrs_create_ragged(&longs, zt_dir_at(fx, "long"), ZRS_INT32, ZRE_CODEC_RAW),
                     ZR_OK);
    int32_t big[100] = {0};
    uint64_t dims[1] = {100};
    append_one(longs, big, 1, dims, sizeof big);
    append_one(longs, big, 1, dims, sizeof big);
    o = pack_opts(ZSM_PACK_BEST_FIT, ZSM_PACK_DROP, 4, 0);
    assert_int_equal(zld_create(&l, &longs, 1, &o), ZR_EINVAL);
    assert_msg("nothing to pack");
    /* a finite pass: start_step past its steps */
    o = pack_opts(ZSM_PACK_CONCAT, ZSM_PACK_SPLIT, 1, 0);
    o.pass = 1;
    o.start_step = 6; /* 200 tokens: 5 rows of 48 */
    assert_int_equal(zld_create(&l, &longs, 1, &o), ZR_EINVAL);
    assert_msg("past the pass's 5 steps");
    o.start_step = 5;
    assert_int_equal(zld_create(&l, &longs, 1, &o), ZR_OK);
    zld_batch *b = NULL;
    assert_int_equal(zld_next(l, &b), ZLD_END);
    zld_close(l);
    assert_int_equal(zrs_close(longs), ZR_OK);
    /* a plain batch has no pack layout */
    zld_options plain = ZLD_OPTIONS_INIT;
    plain.batch_size = 2;
    assert_int_equal(zld_create(&l, s, 1, &plain), ZR_OK);
    assert_int_equal(zld_next(l, &b), ZR_OK);
    zld_pack_info in;
    assert_int_equal(zld_batch_pack_info(b, &in), ZR_EINVAL);
    uint64_t d2[ZRS_MAX_NDIM];
    size_t nd;
    assert_int_equal(zld_pack_item_shape(l, 0, d2, &nd), ZR_EINVAL);
    zld_batch_free(b);
    zld_close(l);
    close_corpus(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_known_corpus_every_policy, setup, zt_dir_teardown),
        cmocka_unit_test_setup_teardown(test_pass_over_ranks, setup, zt_dir_teardown),
        cmocka_unit_test_setup_teardown(test_workers_seek_and_resume, setup, zt_dir_teardown),
        cmocka_unit_test_setup_teardown(test_endless_epochs_place_each_document_once, setup,
                                        zt_dir_teardown),
        cmocka_unit_test_setup_teardown(test_ranks_split_the_global_batch, setup, zt_dir_teardown),
        cmocka_unit_test_setup_teardown(test_detach, setup, zt_dir_teardown),
        cmocka_unit_test(test_failures_surface_at_their_step),
        cmocka_unit_test_setup_teardown(test_refusals, setup, zt_dir_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
