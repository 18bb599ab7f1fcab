/*
 * sampler.c - libzsampler: sequential, iid and cyclic index generation as
 * pure functions of (seed, step). No allocation, no state, no I/O.
 *
 * Randomness comes from a counter-based generator: a 64-bit finalizer
 * (xor-shift-multiply, SplitMix64 constants) applied to a keyed counter.
 * Everything a call needs (keys, thresholds, the cycle number) is derived
 * once per call, so the per-index loops are a few multiplies and no
 * divisions.
 */
#include "zsampler.h"
#include "zsm_internal.h"

#include <inttypes.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#ifndef ZSAMPLER_VERSION_STRING
#error "ZSAMPLER_VERSION_STRING must be defined by the build"
#endif

unsigned zsampler_version(void) { return ZSAMPLER_VERSION_NUMBER; }
const char *zsampler_version_string(void) { return ZSAMPLER_VERSION_STRING; }

const char *zsm_simd(void)
{
    return zsm_avx512() ? "avx512" : "scalar";
}

/* ------------------------------------------------------------ mode names */

const char *zsm_mode_name(zsm_mode mode)
{
    switch (mode) {
    case ZSM_SEQUENTIAL: return "sequential";
    case ZSM_IID: return "iid";
    case ZSM_CYCLIC: return "cyclic";
    }
    return NULL;
}

int zsm__name_eq(const char *a, const char *b)
{
    for (;; a++, b++) {
        unsigned char ca = (unsigned char)*a, cb = (unsigned char)*b;
        if (ca >= 'A' && ca <= 'Z') ca = (unsigned char)(ca - 'A' + 'a');
        if (cb >= 'A' && cb <= 'Z') cb = (unsigned char)(cb - 'A' + 'a');
        if (ca != cb) return 0;
        if (ca == 0) return 1;
    }
}

int zsm_mode_parse(const char *name, zsm_mode *out)
{
    static const zsm_mode modes[] = {ZSM_SEQUENTIAL, ZSM_IID, ZSM_CYCLIC};
    if (name == NULL || out == NULL)
        return zr_set_error(ZSM_EINVAL, "zsm_mode_parse: %s is NULL", name == NULL ? "name" : "out");
    for (size_t i = 0; i < sizeof modes / sizeof modes[0]; i++) {
        if (zsm__name_eq(name, zsm_mode_name(modes[i]))) {
            *out = modes[i];
            return ZSM_OK;
        }
    }
    return zr_set_error(ZSM_EINVAL, "zsm_mode_parse: unknown mode \"%.64s\" (sequential, iid, cyclic)",
                        name);
}

/* ------------------------------------------------------------ arithmetic */

/* 64-bit finalizer: a bijection on 64 bits with full avalanche. */
static inline uint64_t mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * MIX_M1;
    z = (z ^ (z >> 27)) * MIX_M2;
    return z ^ (z >> 31);
}

#if defined(__SIZEOF_INT128__) && !defined(ZSM_PORTABLE_MUL)
/* __extension__ keeps -pedantic builds quiet about the GNU type. */
__extension__ typedef unsigned __int128 zsm_u128;
#endif

/* 64x64 -> 128 multiply: returns the low half, *hi gets the high half. */
static inline uint64_t mul128(uint64_t a, uint64_t b, uint64_t *hi)
{
#if defined(__SIZEOF_INT128__) && !defined(ZSM_PORTABLE_MUL)
    zsm_u128 m = (zsm_u128)a * b;
    *hi = (uint64_t)(m >> 64);
    return (uint64_t)m;
#else
    /* Schoolbook over 32-bit halves; every partial product fits 64 bits. */
    uint64_t al = a & 0xFFFFFFFFu, ah = a >> 32;
    uint64_t bl = b & 0xFFFFFFFFu, bh = b >> 32;
    uint64_t ll = al * bl, lh = al * bh, hl = ah * bl, hh = ah * bh;
    uint64_t mid = (ll >> 32) + (lh & 0xFFFFFFFFu) + (hl & 0xFFFFFFFFu);
    *hi = hh + (lh >> 32) + (hl >> 32) + (mid >> 32);
    return (mid << 32) | (ll & 0xFFFFFFFFu);
#endif
}

/* (a * b) mod m without overflow, m >= 1. Called once per call. */
static uint64_t mulmod(uint64_t a, uint64_t b, uint64_t m)
{
#if defined(__SIZEOF_INT128__) && !defined(ZSM_PORTABLE_MUL)
    return (uint64_t)(((zsm_u128)a * b) % m);
#else
    /* Double-and-add; each partial stays < m, sums done without overflow. */
    uint64_t r = 0;
    a %= m;
    b %= m;
    while (b) {
        if (b & 1) r = (r >= m - a) ? r - (m - a) : r + a;
        a = (a >= m - a) ? a - (m - a) : a + a;
        b >>= 1;
    }
    return r;
#endif
}

/* -------------------------------------------------------------- validate */

static int global_batch(const zsm_config *cfg, uint64_t *g)
{
    uint64_t hi;
    uint64_t lo = mul128(cfg->batch_size, (uint64_t)cfg->world_size, &hi);
    if (hi != 0) return ZSM_EINVAL;
    *g = lo;
    return ZSM_OK;
}

/* The rules an endless sampler and a pass share: length, batch_size and
 * world_size >= 1, rank < world_size, and G = batch_size * world_size
 * within 64 bits (*g). The detail names `fn`, the parameter and its value. */
static int check_geometry(const char *fn, uint64_t length, uint64_t batch_size, uint32_t rank,
                          uint32_t world_size, uint64_t *g)
{
    uint64_t hi;
    if (length == 0) return zr_set_error(ZSM_EINVAL, "%s: length is 0 (need >= 1)", fn);
    if (batch_size == 0) return zr_set_error(ZSM_EINVAL, "%s: batch_size is 0 (need >= 1)", fn);
    if (world_size == 0) return zr_set_error(ZSM_EINVAL, "%s: world_size is 0 (need >= 1)", fn);
    if (rank >= world_size)
        return zr_set_error(ZSM_EINVAL, "%s: rank %" PRIu32 " is not below world_size %" PRIu32, fn,
                            rank, world_size);
    *g = mul128(batch_size, (uint64_t)world_size, &hi);
    if (hi != 0)
        return zr_set_error(ZSM_EINVAL, "%s: batch_size %" PRIu64 " * world_size %" PRIu32
                            " exceeds 2^64 - 1", fn, batch_size, world_size);
    return ZSM_OK;
}

int zsm_validate(const zsm_config *cfg)
{
    uint64_t g = 0;
    if (cfg == NULL) return zr_set_error(ZSM_EINVAL, "zsm_validate: config is NULL");
    if (zsm_mode_name(cfg->mode) == NULL)
        return zr_set_error(ZSM_EINVAL, "zsm_validate: mode %d is not a sampling mode "
                            "(sequential, iid, cyclic)", (int)cfg->mode);
    if (check_geometry("zsm_validate", cfg->length, cfg->batch_size, cfg->rank, cfg->world_size,
                       &g) != ZSM_OK)
        return ZSM_EINVAL;
    if (cfg->mode == ZSM_CYCLIC && g > cfg->length)
        return zr_set_error(ZSM_EINVAL, "zsm_validate: cyclic mode needs length >= batch_size * "
                            "world_size, got length %" PRIu64 " < %" PRIu64, cfg->length, g);
    return ZSM_OK;
}

/* ------------------------------------------------------------ sequential */

static void run_sequential(const zsm_config *cfg, uint64_t g, uint64_t step,
                           uint64_t *out)
{
    const uint64_t n = cfg->length;
    /* Window start step*G mod n, then this rank's offset, all mod n. */
    uint64_t idx = mulmod(step, g, n);
    uint64_t off = mulmod(cfg->batch_size, cfg->rank, n);
    idx = (idx >= n - off) ? idx - (n - off) : idx + off;
    for (uint64_t j = 0; j < cfg->batch_size; j++) {
        out[j] = idx;
        if (++idx == n) idx = 0;
    }
}

/* ------------------------------------------------------------------- iid */

/* Keys for the iid stream and for its rejection retries. */
#define IID_DOMAIN UINT64_C(0x6A09E667F3BCC908)
#define RETRY_DOMAIN UINT64_C(0xBB67AE8584CAA73B)

static void run_iid(const zsm_config *cfg, uint64_t g, uint64_t step,
                    uint64_t *out)
{
    const uint64_t n = cfg->length;
    const uint64_t key = mix64(cfg->seed ^ IID_DOMAIN);
    /* Global draw number of this rank's first index (mod 2^64): the iid
     * stream of a seed is one long counter sequence, so steps and ranks
     * never share a counter value until 2^64 draws. */
    const uint64_t first = step * g + cfg->batch_size * (uint64_t)cfg->rank;
    /* Lemire: reject low products below 2^64 mod n, computed once. */
    const uint64_t threshold = (0 - n) % n;
    uint64_t ctr = key + first * GOLDEN;
    uint64_t j = 0;
    /* The vector kernel takes whole lanes of n < 2^32 (every dataset
     * index space in practice); a rejection anywhere in it, about one
     * draw in 2^32 or rarer, sends the whole batch back to this loop. */
    const uint64_t whole = cfg->batch_size - cfg->batch_size % 8;
    if (n <= UINT32_MAX && whole > 0 && zsm_avx512()) {
        if (!zsm_iid_avx512(ctr, n, threshold, whole, out)) {
            j = whole;
            ctr += whole * GOLDEN;
        }
    }
    for (; j < cfg->batch_size; j++, ctr += GOLDEN) {
        uint64_t r = mix64(ctr), hi;
        uint64_t lo = mul128(r, n, &hi);
        if (lo < threshold) {
            /* Rare: retry on a second counter dimension (draw number,
             * attempt), so the result stays a function of the position. */
            uint64_t base = mix64(ctr ^ RETRY_DOMAIN);
            for (uint64_t attempt = 1; lo < threshold; attempt++) {
                r = mix64(base + attempt * GOLDEN);
                lo = mul128(r, n, &hi);
            }
        }
        out[j] = hi;
    }
}

/* ---------------------------------------------------------------- cyclic */

#define FEISTEL_ROUNDS 6
#define CYCLE_DOMAIN UINT64_C(0x3C6EF372FE94F82B)

/* A keyed permutation of [0, 2^bits): an alternating (unbalanced when bits
 * is odd) Feistel network. Each round xors one half with a keyed hash of
 * the other, which is invertible whatever the half widths, so the whole
 * network is a bijection. */
typedef struct feistel {
    uint64_t key[FEISTEL_ROUNDS];
    unsigned lbits, rbits;
    uint64_t lmask, rmask;
} feistel;

static inline uint64_t round_fn(uint64_t x, uint64_t k)
{
    uint64_t z = (x ^ k) * UINT64_C(0xBF58476D1CE4E5B9);
    z ^= z >> 29;
    z *= UINT64_C(0x94D049BB133111EB);
    return z ^ (z >> 32);
}

static void feistel_init(feistel *f, uint64_t domain, uint64_t seed, uint64_t cycle,
                         uint64_t length)
{
    unsigned bits = 0;
    while (bits < 64 && (UINT64_C(1) << bits) < length) bits++;
    f->rbits = bits / 2 + (bits & 1u);
    f->lbits = bits - f->rbits;
    /* Both halves are at most 32 bits wide, so the shifts are defined. */
    f->rmask = (UINT64_C(1) << f->rbits) - 1;
    f->lmask = (UINT64_C(1) << f->lbits) - 1;
    uint64_t base = mix64(mix64(seed ^ domain) + cycle * GOLDEN);
    for (unsigned i = 0; i < FEISTEL_ROUNDS; i++)
        f->key[i] = mix64(base + (uint64_t)(i + 1) * GOLDEN);
}

static inline uint64_t feistel_apply(const feistel *f, uint64_t x)
{
    uint64_t r = x & f->rmask;
    uint64_t l = x >> f->rbits;
    for (unsigned i = 0; i < FEISTEL_ROUNDS; i += 2) {
        l ^= round_fn(r, f->key[i]) & f->lmask;
        r ^= round_fn(l, f->key[i + 1]) & f->rmask;
    }
    return (l << f->rbits) | r;
}

/* Lanes evaluated side by side: the rounds of one index are a serial
 * dependency chain, so interleaving independent indices keeps the
 * multipliers busy (about 3x faster than one at a time). */
#define CYCLIC_LANES 8

static void run_cyclic(const zsm_config *cfg, uint64_t g, uint64_t step,
                       uint64_t *out)
{
    const uint64_t n = cfg->length;
    const uint64_t per_cycle = n / g; /* >= 1, validated */
    const uint64_t cycle = step / per_cycle;
    const uint64_t p0 = (step % per_cycle) * g +
                        cfg->batch_size * (uint64_t)cfg->rank;
    const uint64_t count = cfg->batch_size;
    feistel f;
    feistel_init(&f, CYCLE_DOMAIN, cfg->seed, cycle, n);

    uint64_t j = 0;
    for (; j + CYCLIC_LANES <= count; j += CYCLIC_LANES) {
        uint64_t l[CYCLIC_LANES], r[CYCLIC_LANES];
        for (unsigned k = 0; k < CYCLIC_LANES; k++) {
            r[k] = (p0 + j + k) & f.rmask;
            l[k] = (p0 + j + k) >> f.rbits;
        }
        for (unsigned i = 0; i < FEISTEL_ROUNDS; i += 2) {
            for (unsigned k = 0; k < CYCLIC_LANES; k++)
                l[k] ^= round_fn(r[k], f.key[i]) & f.lmask;
            for (unsigned k = 0; k < CYCLIC_LANES; k++)
                r[k] ^= round_fn(l[k], f.key[i + 1]) & f.rmask;
        }
        for (unsigned k = 0; k < CYCLIC_LANES; k++) {
            uint64_t v = (l[k] << f.rbits) | r[k];
            while (v >= n) v = feistel_apply(&f, v);
            out[j + k] = v;
        }
    }
    for (; j < count; j++) {
        /* Cycle-walk: the permutation restricted to [0, n) by re-applying
         * it until the value falls in range. The domain is < 2n, so the
         * expected number of applications is below 2. */
        uint64_t v = feistel_apply(&f, p0 + j);
        while (v >= n) v = feistel_apply(&f, v);
        out[j] = v;
    }
}

/* --------------------------------------------------------------- indices */

int zsm_indices(const zsm_config *cfg, uint64_t step, uint64_t *out)
{
    uint64_t g = 0;
    if (out == NULL) return zr_set_error(ZSM_EINVAL, "zsm_indices: out is NULL");
    if (zsm_validate(cfg) != ZSM_OK) return ZSM_EINVAL;
    (void)global_batch(cfg, &g); /* cannot fail once validated */
    switch (cfg->mode) {
    case ZSM_SEQUENTIAL: run_sequential(cfg, g, step, out); break;
    case ZSM_IID: run_iid(cfg, g, step, out); break;
    case ZSM_CYCLIC: run_cyclic(cfg, g, step, out); break;
    }
    return ZSM_OK;
}

/* ----------------------------------------------------------------- passes */

#define PASS_DOMAIN UINT64_C(0xA54FF53A5F1D36F1)

int zsm_pass_validate(const zsm_pass *p)
{
    uint64_t g = 0;
    if (p == NULL) return zr_set_error(ZSM_EINVAL, "zsm_pass_validate: pass is NULL");
    return check_geometry("zsm_pass_validate", p->length, p->batch_size, p->rank, p->world_size, &g);
}

/* floor(r_total * k / w) exactly, for k <= w < 2^32: the remainder part
 * (r_total mod w) * k stays below w * w < 2^64. */
static uint64_t share_floor(uint64_t r_total, uint64_t k, uint64_t w)
{
    return (r_total / w) * k + ((r_total % w) * k) / w;
}

/* Rank r's share of the r_total positions of the last global batch, and
 * where it starts within that batch. */
static void tail_share(const zsm_pass *p, uint64_t r_total, uint64_t *first,
                       uint64_t *count)
{
    const uint64_t w = p->world_size;
    uint64_t a = share_floor(r_total, p->rank, w);
    uint64_t b = share_floor(r_total, (uint64_t)p->rank + 1, w);
    *first = a;
    *count = b - a;
}

uint64_t zsm_pass_steps(const zsm_pass *p)
{
    if (zsm_pass_validate(p) != ZSM_OK) return 0;
    const uint64_t g = p->batch_size * (uint64_t)p->world_size;
    uint64_t full = p->length / g, rem = p->length % g;
    if (p->drop_last || rem == 0) return full;
    uint64_t first, count;
    tail_share(p, rem, &first, &count);
    return full + (count > 0);
}

int zsm_pass_indices(const zsm_pass *p, uint64_t step, uint64_t *out, uint64_t *count)
{
    if (out == NULL || count == NULL)
        return zr_set_error(ZSM_EINVAL, "zsm_pass_indices: %s is NULL", out == NULL ? "out" : "count");
    if (zsm_pass_validate(p) != ZSM_OK) return ZSM_EINVAL;
    if (step >= zsm_pass_steps(p))
        return zr_set_error(ZSM_EINVAL, "zsm_pass_indices: step %" PRIu64 " is past the pass's end "
                            "(%" PRIu64 " steps)", step, zsm_pass_steps(p));
    const uint64_t g = p->batch_size * (uint64_t)p->world_size;
    uint64_t pos, n;
    if (step < p->length / g) {
        pos = step * g + p->batch_size * (uint64_t)p->rank;
        n = p->batch_size;
    } else {
        uint64_t first;
        tail_share(p, p->length % g, &first, &n);
        pos = step * g + first;
    }
    if (!p->shuffle) {
        for (uint64_t j = 0; j < n; j++) out[j] = pos + j;
    } else {
        feistel f;
        feistel_init(&f, PASS_DOMAIN, p->seed, p->epoch, p->length);
        for (uint64_t j = 0; j < n; j++) {
            uint64_t v = feistel_apply(&f, pos + j);
            while (v >= p->length) v = feistel_apply(&f, v);
            out[j] = v;
        }
    }
    *count = n;
    return ZSM_OK;
}

/* ------------------------------------------------------------- bucketing */

#define BUCKET_DOMAIN UINT64_C(0x510E527FADE682D1)

typedef struct bucket_item {
    uint64_t len;
    uint64_t idx;
} bucket_item;

static int bucket_cmp(const void *a, const void *b)
{
    const bucket_item *x = a, *y = b;
    if (x->len != y->len) return x->len < y->len ? -1 : 1;
    return x->idx < y->idx ? -1 : x->idx > y->idx;
}

size_t zsm_bucket_scratch_bytes(const zsm_config *cfg, uint64_t window)
{
    uint64_t g = 0, hi;
    if (cfg == NULL || window == 0 || global_batch(cfg, &g) != ZSM_OK) return 0;
    uint64_t items = mul128(g, window, &hi);
    if (hi != 0 || items > SIZE_MAX / sizeof(bucket_item)) return 0;
    return (size_t)items * sizeof(bucket_item);
}

int zsm_bucket_indices(const zsm_config *cfg, const uint32_t *lengths, uint64_t window,
                       uint64_t step, uint64_t *out, void *scratch, size_t scratch_bytes)
{
    zsm_config c;
    uint64_t g = 0;
    if (cfg == NULL || lengths == NULL || out == NULL || scratch == NULL)
        return zr_set_error(ZSM_EINVAL, "zsm_bucket_indices: %s is NULL",
                            cfg == NULL ? "cfg" : lengths == NULL ? "lengths"
                                                : out == NULL ? "out" : "scratch");
    if (window == 0)
        return zr_set_error(ZSM_EINVAL, "zsm_bucket_indices: window is 0 (need >= 1 batch)");
    c = *cfg;
    c.mode = ZSM_CYCLIC;
    if (zsm_validate(&c) != ZSM_OK) return ZSM_EINVAL; /* detail set */
    size_t need = zsm_bucket_scratch_bytes(&c, window);
    if (need == 0)
        return zr_set_error(ZSM_EINVAL, "zsm_bucket_indices: window %" PRIu64 " of %" PRIu64
                            "-record global batches is too large to sort in memory", window,
                            c.batch_size * (uint64_t)c.world_size);
    if (scratch_bytes < need)
        return zr_set_error(ZSM_EINVAL, "zsm_bucket_indices: scratch of %zu bytes, the window "
                            "needs %zu (zsm_bucket_scratch_bytes)", scratch_bytes, need);
    (void)global_batch(&c, &g);
    const uint64_t n = c.length, per_cycle = n / g;
    const uint64_t cycle = step / per_cycle, j = step % per_cycle;
    const uint64_t fb = (j / window) * window;
    const uint64_t nb = per_cycle - fb < window ? per_cycle - fb : window;
    bucket_item *it = scratch;
    feistel f;
    feistel_init(&f, CYCLE_DOMAIN, c.seed, cycle, n);
    for (uint64_t p = 0; p < nb * g; p++) {
        uint64_t v = feistel_apply(&f, fb * g + p);
        while (v >= n) v = feistel_apply(&f, v);
        it[p].idx = v;
        it[p].len = lengths[v];
    }
    qsort(it, (size_t)(nb * g), sizeof *it, bucket_cmp);
    /* The window's t-th step takes the sorted chunk whose key ranks t. */
    const uint64_t t = j - fb;
    const uint64_t base = mix64(mix64(c.seed ^ BUCKET_DOMAIN) + cycle * GOLDEN) ^ mix64(fb + 1);
    uint64_t chunk = 0;
    for (uint64_t b = 0; b < nb; b++) {
        uint64_t kb = mix64(base + b * GOLDEN), rank = 0;
        for (uint64_t o = 0; o < nb; o++) {
            uint64_t ko = mix64(base + o * GOLDEN);
            if (ko < kb || (ko == kb && o < b)) rank++;
        }
        if (rank == t) {
            chunk = b;
            break;
        }
    }
    const bucket_item *src = it + chunk * g + c.batch_size * (uint64_t)c.rank;
    for (uint64_t i = 0; i < c.batch_size; i++) out[i] = src[i].idx;
    return ZSM_OK;
}

/* ---------------------------------------------------------- augmentation */

#define COIN_DOMAIN UINT64_C(0x9B05688C2B3E6C1F)

int zsm_bernoulli(uint64_t seed, uint64_t step, uint64_t first, uint64_t count, double p,
                  uint8_t *out)
{
    if (out == NULL && count > 0) return zr_set_error(ZSM_EINVAL, "zsm_bernoulli: out is NULL");
    if (!(p >= 0.0 && p <= 1.0))
        return zr_set_error(ZSM_EINVAL, "zsm_bernoulli: p must be in [0, 1], got %g", p);
    /* p * 2^53 is exact in a double; u takes the top 53 bits of a draw. */
    const uint64_t limit = (uint64_t)(p * 9007199254740992.0);
    const uint64_t key = mix64(mix64(seed ^ COIN_DOMAIN) + step * GOLDEN);
    for (uint64_t i = 0; i < count; i++)
        out[i] = (mix64(key ^ mix64(first + i + 1)) >> 11) < limit;
    return ZSM_OK;
}
