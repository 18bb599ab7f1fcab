/*
 * pack.c - libzsampler: the sequence-packing plan (see zsampler.h,
 * "sequence packing"). Pure functions; the caller's scratch holds every
 * working array, laid out by scratch_layout.
 *
 * A window is packed in three steps: its documents come from zsm_pass (the
 * epoch's order, a window per pass step); each document's placed length m
 * (by the overlong rule) gives m / L full rows and an item of m % L
 * elements to fit; the items are fitted into rows (first fit: a max
 * segment tree over the open rows finds the oldest row with room; best
 * fit: the rows' free room indexes a hierarchical bitmap with a stack of
 * rows per value, so the tightest row is a find-next-set-bit away).
 */
#include <inttypes.h>

#include "zsampler.h"
#include "zrerror_sys.h"
#include "zsm_internal.h"

#include <stdlib.h>
#include <string.h>

/* Keys the order of a window's rows (with shuffle). */
#define ROWS_DOMAIN UINT64_C(0x1F83D9ABFB41BD6B)
#define ROWS_STRIDE UINT64_C(0x9E3779B97F4A7C15)
#define NONE UINT32_MAX
#define HB_LEVELS 5 /* 64^5 bits: enough for row_length up to 2^30 */

/* ------------------------------------------------------------- names */

const char *zsm_pack_policy_name(zsm_pack_policy policy)
{
    switch (policy) {
    case ZSM_PACK_FIRST_FIT: return "first_fit";
    case ZSM_PACK_BEST_FIT: return "best_fit";
    case ZSM_PACK_CONCAT: return "concat";
    }
    return NULL;
}

const char *zsm_pack_overlong_name(zsm_pack_overlong overlong)
{
    switch (overlong) {
    case ZSM_PACK_SPLIT: return "split";
    case ZSM_PACK_TRUNCATE: return "truncate";
    case ZSM_PACK_DROP: return "drop";
    }
    return NULL;
}

/* The value among values[0..n) whose name (namer) is `name`, ignoring case. */
static int parse_name(const char *fn, const char *name, const char *(*namer)(int),
                      const int *values, size_t n, int *out)
{
    if (name == NULL || out == NULL)
        return zr_set_error(ZSM_EINVAL, "%s: %s is NULL", fn, name == NULL ? "name" : "out");
    for (size_t i = 0; i < n; i++)
        if (zsm__name_eq(name, namer(values[i]))) {
            *out = values[i];
            return ZSM_OK;
        }
    return zr_set_error(ZSM_EINVAL, "%s: unknown name \"%.64s\" (%s, %s, %s)", fn, name,
                        namer(values[0]), namer(values[1]), namer(values[2]));
}

static const char *policy_namer(int v) { return zsm_pack_policy_name((zsm_pack_policy)v); }
static const char *overlong_namer(int v) { return zsm_pack_overlong_name((zsm_pack_overlong)v); }

int zsm_pack_policy_parse(const char *name, zsm_pack_policy *out)
{
    static const int all[] = {ZSM_PACK_FIRST_FIT, ZSM_PACK_BEST_FIT, ZSM_PACK_CONCAT};
    int v = 0, rc = parse_name("zsm_pack_policy_parse", name, policy_namer, all, 3, out ? &v : NULL);
    if (rc == ZSM_OK) *out = (zsm_pack_policy)v;
    return rc;
}

int zsm_pack_overlong_parse(const char *name, zsm_pack_overlong *out)
{
    static const int all[] = {ZSM_PACK_SPLIT, ZSM_PACK_TRUNCATE, ZSM_PACK_DROP};
    int v = 0, rc = parse_name("zsm_pack_overlong_parse", name, overlong_namer, all, 3, out ? &v : NULL);
    if (rc == ZSM_OK) *out = (zsm_pack_overlong)v;
    return rc;
}

/* ----------------------------------------------------------- validate */

int zsm_pack_validate(const zsm_pack *p)
{
    if (p == NULL) return zr_set_error(ZSM_EINVAL, "zsm_pack_validate: pack is NULL");
    if (p->lengths == NULL) return zr_set_error(ZSM_EINVAL, "zsm_pack_validate: lengths is NULL");
    if (p->ndocs == 0 || p->ndocs >= (UINT64_C(1) << 63))
        return zr_set_error(ZSM_EINVAL, "zsm_pack_validate: ndocs %" PRIu64 " is not in 1..2^63 - 1",
                            p->ndocs);
    if (p->row_length == 0 || p->row_length > ZSM_PACK_MAX_LENGTH)
        return zr_set_error(ZSM_EINVAL, "zsm_pack_validate: row_length %" PRIu64 " is not in 1..%u",
                            p->row_length, ZSM_PACK_MAX_LENGTH);
    if (p->window == 0 || p->window > ZSM_PACK_MAX_WINDOW)
        return zr_set_error(ZSM_EINVAL, "zsm_pack_validate: window %" PRIu64 " is not in 1..%u",
                            p->window, ZSM_PACK_MAX_WINDOW);
    if (zsm_pack_policy_name(p->policy) == NULL)
        return zr_set_error(ZSM_EINVAL, "zsm_pack_validate: policy %d is not a packing policy",
                            (int)p->policy);
    if (zsm_pack_overlong_name(p->overlong) == NULL)
        return zr_set_error(ZSM_EINVAL, "zsm_pack_validate: overlong %d is not an overlong rule "
                            "(split, truncate, drop)", (int)p->overlong);
    return ZSM_OK;
}

uint64_t zsm_pack_windows(const zsm_pack *p)
{
    if (zsm_pack_validate(p) != ZSM_OK) return 0;
    return p->ndocs / p->window + (p->ndocs % p->window != 0);
}

uint64_t zsm_pack_max_pieces(const zsm_pack *p)
{
    if (zsm_pack_validate(p) != ZSM_OK) return 0;
    uint64_t bound = p->policy == ZSM_PACK_CONCAT ? p->ndocs : p->window;
    return bound < p->row_length ? bound : p->row_length;
}

/* Elements of a document of n elements that the epoch places. */
static inline uint64_t placed(const zsm_pack *p, uint64_t n)
{
    if (n <= p->row_length) return n;
    switch (p->overlong) {
    case ZSM_PACK_SPLIT: return n;
    case ZSM_PACK_TRUNCATE: return p->row_length;
    case ZSM_PACK_DROP: break;
    }
    return 0;
}

/* ------------------------------------------------------------- scratch */

/* The working arrays, all carved from the caller's scratch. W is the
 * window (at most ndocs), L the row length. */
typedef struct work {
    uint64_t *docs;     /* [W] the window's documents */
    uint32_t *len;      /* [W] placed elements of each */
    uint64_t *keys;     /* [W] best fit: sort keys (length desc, position) */
    uint32_t *row_of;   /* [W] the row each item went to (NONE: no item) */
    uint32_t *room;     /* [W] free elements of each fitted row */
    uint32_t *next;     /* [W] best fit: stack links of rows of equal room */
    uint32_t *tree;     /* [2 * pow2(W)] first fit: max room over rows */
    uint32_t *head;     /* [L] best fit: top of the stack of rows with room v */
    uint64_t *bits[HB_LEVELS]; /* best fit: which room values have rows */
    uint64_t words[HB_LEVELS];
    unsigned levels;
    uint32_t *row_first; /* [W + 1] items per fitted row (counting sort) */
    uint32_t *row_items; /* [W] */
    uint64_t w;          /* window capacity (documents) */
    uint64_t tree_leaves;
} work;

static uint64_t window_cap(const zsm_pack *p)
{
    return p->window < p->ndocs ? p->window : p->ndocs;
}

static uint64_t pow2_at_least(uint64_t n)
{
    uint64_t v = 1;
    while (v < n) v <<= 1;
    return v;
}

/* Lay the arrays out from `base` (NULL: just count); returns the bytes. */
static size_t scratch_layout(const zsm_pack *p, void *base, work *wk)
{
    const uint64_t w = window_cap(p), L = p->row_length;
    const uint64_t leaves = pow2_at_least(w);
    size_t off = 0;
    work tmp;
    if (wk == NULL) wk = &tmp;
    memset(wk, 0, sizeof *wk);
    unsigned char *b = base;
#define CARVE(field, count, type)                                             \
    do {                                                                      \
        off = (off + 7u) & ~(size_t)7u;                                       \
        wk->field = b ? (type *)(void *)(b + off) : NULL;                     \
        off += (size_t)(count) * sizeof(type);                                \
    } while (0)
    CARVE(docs, w, uint64_t);
    CARVE(keys, w, uint64_t);
    CARVE(len, w, uint32_t);
    CARVE(row_of, w, uint32_t);
    CARVE(room, w, uint32_t);
    CARVE(next, w, uint32_t);
    CARVE(row_first, w + 1, uint32_t);
    CARVE(row_items, w, uint32_t);
    CARVE(tree, 2 * leaves, uint32_t);
    CARVE(head, L, uint32_t);
    uint64_t n = L;
    unsigned lv = 0;
    do {
        n = (n + 63) / 64;
        wk->words[lv] = n;
        CARVE(bits[lv], n, uint64_t);
        lv++;
    } while (n > 1 && lv < HB_LEVELS);
#undef CARVE
    wk->levels = lv;
    wk->w = w;
    wk->tree_leaves = leaves;
    return off;
}

size_t zsm_pack_scratch_bytes(const zsm_pack *p)
{
    if (zsm_pack_validate(p) != ZSM_OK) return 0;
    return scratch_layout(p, NULL, NULL);
}

static int carve(const char *fn, const zsm_pack *p, void *scratch, size_t scratch_bytes,
                 work *wk)
{
    if (scratch == NULL) return zr_set_error(ZSM_EINVAL, "%s: scratch is NULL", fn);
    size_t need = scratch_layout(p, NULL, NULL);
    if (need > scratch_bytes)
        return zr_set_error(ZSM_EINVAL, "%s: scratch of %zu bytes, the plan needs %zu "
                            "(zsm_pack_scratch_bytes)", fn, scratch_bytes, need);
    (void)scratch_layout(p, scratch, wk);
    return ZSM_OK;
}

/* ------------------------------------------------- hierarchical bitmap */

static inline unsigned ctz64(uint64_t x)
{
#if defined(__GNUC__) || defined(__clang__)
    return (unsigned)__builtin_ctzll(x);
#else
    unsigned n = 0;
    while (!(x & 1u)) {
        x >>= 1;
        n++;
    }
    return n;
#endif
}

static void hb_set(work *wk, uint64_t v)
{
    for (unsigned l = 0; l < wk->levels; l++) {
        uint64_t i = v >> 6, had = wk->bits[l][i];
        wk->bits[l][i] = had | (UINT64_C(1) << (v & 63));
        if (had) return; /* the levels above already say so */
        v = i;
    }
}

static void hb_clear(work *wk, uint64_t v)
{
    for (unsigned l = 0; l < wk->levels; l++) {
        uint64_t i = v >> 6;
        wk->bits[l][i] &= ~(UINT64_C(1) << (v & 63));
        if (wk->bits[l][i]) return;
        v = i;
    }
}

/* The smallest set value >= v, or UINT64_MAX. */
static uint64_t hb_next(const work *wk, uint64_t v)
{
    unsigned l = 0;
    for (;;) {
        uint64_t i = v >> 6;
        if (i >= wk->words[l]) return UINT64_MAX;
        uint64_t m = wk->bits[l][i] & (~UINT64_C(0) << (v & 63));
        if (m) {
            v = (i << 6) | ctz64(m);
            break;
        }
        if (++l == wk->levels) return UINT64_MAX;
        v = i + 1; /* the next word of level l - 1, as a bit of level l */
    }
    while (l-- > 0) /* down: the lowest set bit of each word below */
        v = (v << 6) | ctz64(wk->bits[l][v]);
    return v;
}

/* ------------------------------------------------------------- fitting */

static int key_cmp(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* First fit of the items (len[i] % L > 0) of positions [0, n) in order;
 * row_of[i] and room[] filled. Returns the rows opened. */
static uint64_t fit_first(const zsm_pack *p, work *wk, uint64_t n)
{
    const uint32_t L = (uint32_t)p->row_length;
    const uint64_t leaves = pow2_at_least(n ? n : 1);
    uint32_t *t = wk->tree;
    memset(t, 0, 2 * leaves * sizeof *t);
    uint64_t rows = 0;
    for (uint64_t i = 0; i < n; i++) {
        uint32_t x = wk->len[i] % L;
        wk->row_of[i] = NONE;
        if (x == 0) continue;
        uint64_t r;
        if (t[1] >= x) {
            uint64_t k = 1;
            while (k < leaves) k = t[2 * k] >= x ? 2 * k : 2 * k + 1;
            r = k - leaves;
            wk->room[r] -= x;
        } else {
            r = rows++;
            wk->room[r] = L - x;
        }
        wk->row_of[i] = (uint32_t)r;
        uint64_t k = leaves + r;
        t[k] = wk->room[r];
        for (k >>= 1; k >= 1; k >>= 1) {
            uint32_t m = t[2 * k] > t[2 * k + 1] ? t[2 * k] : t[2 * k + 1];
            if (t[k] == m) break;
            t[k] = m;
        }
    }
    return rows;
}

/* Best fit decreasing of the same items. keys[] is left holding the
 * placement order (position in the low 32 bits). */
static uint64_t fit_best(const zsm_pack *p, work *wk, uint64_t n, uint64_t *nitems)
{
    const uint32_t L = (uint32_t)p->row_length;
    uint64_t m = 0;
    for (uint64_t i = 0; i < n; i++) {
        uint32_t x = wk->len[i] % L;
        wk->row_of[i] = NONE;
        if (x > 0) wk->keys[m++] = ((uint64_t)(L - x) << 32) | i;
    }
    qsort(wk->keys, (size_t)m, sizeof *wk->keys, key_cmp);
    uint64_t rows = 0;
    for (uint64_t j = 0; j < m; j++) {
        uint32_t i = (uint32_t)wk->keys[j];
        uint32_t x = wk->len[i] % L;
        uint64_t v = hb_next(wk, x);
        uint32_t r;
        if (v != UINT64_MAX) {
            r = wk->head[v];
            wk->head[v] = wk->next[r];
            if (wk->head[v] == NONE) hb_clear(wk, v);
            wk->room[r] = (uint32_t)(v - x);
        } else {
            r = (uint32_t)rows++;
            wk->room[r] = L - x;
        }
        wk->row_of[i] = r;
        uint32_t left = wk->room[r];
        if (left > 0) {
            int had = (wk->bits[0][left >> 6] >> (left & 63)) & 1u;
            wk->next[r] = had ? wk->head[left] : NONE;
            wk->head[left] = r;
            if (!had) hb_set(wk, left);
        }
    }
    /* Leave the bitmap empty for the next window. */
    for (uint64_t r = 0; r < rows; r++)
        if (wk->room[r] > 0) hb_clear(wk, wk->room[r]);
    *nitems = m;
    return rows;
}

/* ------------------------------------------------------------- windows */

/* Window k of `epoch`: its documents and their placed lengths; returns
 * the number of documents (0 past the end). */
static uint64_t load_window(const zsm_pack *p, uint64_t epoch, uint64_t k, work *wk)
{
    zsm_pass ps;
    memset(&ps, 0, sizeof ps);
    ps.length = p->ndocs;
    ps.batch_size = p->window;
    ps.seed = p->seed;
    ps.epoch = epoch;
    ps.world_size = 1;
    ps.shuffle = p->shuffle != 0;
    uint64_t n = 0;
    if (zsm_pass_indices(&ps, k, wk->docs, &n) != ZSM_OK) return 0;
    for (uint64_t i = 0; i < n; i++)
        wk->len[i] = (uint32_t)placed(p, p->lengths[wk->docs[i]]);
    return n;
}

/* A packed window: rows [0, fitted) are fitted rows (their items in
 * row_first/row_items, in placement order), rows [fitted, fitted + full)
 * the full rows in document order. */
typedef struct packed {
    uint64_t ndocs;
    uint64_t fitted;
    uint64_t full;
} packed;

static void pack_window(const zsm_pack *p, uint64_t epoch, uint64_t k, work *wk, packed *out,
                        int want_rows)
{
    const uint64_t L = p->row_length;
    uint64_t n = load_window(p, epoch, k, wk), full = 0, items = 0;
    for (uint64_t i = 0; i < n; i++) full += wk->len[i] / L;
    uint64_t fitted;
    if (p->policy == ZSM_PACK_BEST_FIT) {
        fitted = fit_best(p, wk, n, &items);
    } else {
        fitted = fit_first(p, wk, n);
        for (uint64_t i = 0; i < n; i++) /* placement order = window order */
            if (wk->row_of[i] != NONE) wk->keys[items++] = i;
    }
    out->ndocs = n;
    out->fitted = fitted;
    out->full = full;
    if (!want_rows) return;
    /* Items per row, each row's in placement order. */
    memset(wk->row_first, 0, (fitted + 1) * sizeof *wk->row_first);
    for (uint64_t j = 0; j < items; j++) wk->row_first[wk->row_of[(uint32_t)wk->keys[j]] + 1]++;
    for (uint64_t r = 0; r < fitted; r++) wk->row_first[r + 1] += wk->row_first[r];
    for (uint64_t r = 0; r < fitted; r++) wk->next[r] = wk->row_first[r];
    for (uint64_t j = 0; j < items; j++) {
        uint32_t i = (uint32_t)wk->keys[j];
        wk->row_items[wk->next[wk->row_of[i]]++] = i;
    }
}

/* The row of window k that position j (< rows) of its order shows. */
static uint64_t window_row(const zsm_pack *p, uint64_t epoch, uint64_t k, uint64_t rows,
                           uint64_t j)
{
    if (!p->shuffle || rows < 2) return j;
    zsm_pass ps;
    memset(&ps, 0, sizeof ps);
    ps.length = rows;
    ps.batch_size = 1;
    ps.seed = (p->seed ^ ROWS_DOMAIN) + (k + 1) * ROWS_STRIDE;
    ps.epoch = epoch;
    ps.world_size = 1;
    ps.shuffle = 1;
    uint64_t r = j, count = 0;
    (void)zsm_pass_indices(&ps, j, &r, &count); /* valid: j < rows */
    return r;
}

/* The rows' pieces do not fit the caller's array. */
static int no_room(uint64_t capacity)
{
    return zr_set_error(ZSM_EINVAL, "zsm_pack_rows: the rows have more pieces than the "
                        "%" PRIu64 " the pieces array holds (capacity)", capacity);
}

/* A plan from other lengths or options than the pack's. */
static int stale_plan(void)
{
    return zr_set_error(ZSM_EINVAL, "zsm_pack_rows: the plan does not match the pack's lengths "
                        "and options (make it with zsm_pack_epoch on this pack and epoch)");
}

/* Append row `r` of a packed window to pieces[*np..]. */
static int emit_row(const zsm_pack *p, const work *wk, const packed *pw, uint64_t r,
                    zsm_piece *pieces, uint64_t capacity, uint64_t *np)
{
    const uint64_t L = p->row_length;
    if (r < pw->fitted) {
        for (uint32_t a = wk->row_first[r]; a < wk->row_first[r + 1]; a++) {
            uint32_t i = wk->row_items[a];
            if (*np >= capacity) return no_room(capacity);
            pieces[*np].doc = wk->docs[i];
            pieces[*np].offset = (wk->len[i] / L) * L;
            pieces[*np].length = wk->len[i] % L;
            ++*np;
        }
        return ZSM_OK;
    }
    uint64_t f = r - pw->fitted; /* the f-th full row, in document order */
    for (uint64_t i = 0; i < pw->ndocs; i++) {
        uint64_t c = wk->len[i] / L;
        if (f < c) {
            if (*np >= capacity) return no_room(capacity);
            pieces[*np].doc = wk->docs[i];
            pieces[*np].offset = f * L;
            pieces[*np].length = L;
            ++*np;
            return ZSM_OK;
        }
        f -= c;
    }
    return stale_plan(); /* a plan that does not match the lengths */
}

/* ---------------------------------------------------------------- epoch */

int zsm_pack_epoch(const zsm_pack *p, uint64_t epoch, uint64_t *plan, uint64_t *rows,
                   void *scratch, size_t scratch_bytes)
{
    work wk;
    if (plan == NULL || rows == NULL)
        return zr_set_error(ZSM_EINVAL, "zsm_pack_epoch: %s is NULL", plan == NULL ? "plan" : "rows");
    if (zsm_pack_validate(p) != ZSM_OK) return ZSM_EINVAL; /* detail set */
    if (carve("zsm_pack_epoch", p, scratch, scratch_bytes, &wk) != ZSM_OK) return ZSM_EINVAL;
    const uint64_t nwin = zsm_pack_windows(p);
    /* The bitmap starts empty (best fit leaves it empty after each window). */
    for (unsigned l = 0; l < wk.levels; l++) memset(wk.bits[l], 0, wk.words[l] * sizeof(uint64_t));
    uint64_t at = 0;
    for (uint64_t k = 0; k < nwin; k++) {
        plan[k] = at;
        if (p->policy == ZSM_PACK_CONCAT) {
            uint64_t n = load_window(p, epoch, k, &wk);
            for (uint64_t i = 0; i < n; i++) at += wk.len[i];
        } else {
            packed pw;
            pack_window(p, epoch, k, &wk, &pw, 0);
            at += pw.fitted + pw.full;
        }
    }
    plan[nwin] = at;
    if (p->policy == ZSM_PACK_CONCAT)
        *rows = at / p->row_length + (at % p->row_length != 0);
    else
        *rows = at;
    return ZSM_OK;
}

/* ----------------------------------------------------------------- rows */

/* The last window k with plan[k] <= v (plan is non-decreasing, plan[0] = 0). */
static uint64_t find_window(const uint64_t *plan, uint64_t nwin, uint64_t v)
{
    uint64_t lo = 0, hi = nwin; /* plan[lo] <= v < plan[hi] */
    while (hi - lo > 1) {
        uint64_t mid = lo + (hi - lo) / 2;
        if (plan[mid] <= v) lo = mid;
        else hi = mid;
    }
    return lo;
}

static int rows_fitted(const zsm_pack *p, uint64_t epoch, const uint64_t *plan, uint64_t nwin,
                       uint64_t first, uint64_t count, zsm_piece *pieces, uint64_t capacity,
                       uint64_t *row_start, work *wk)
{
    uint64_t np = 0, k = UINT64_MAX;
    packed pw;
    memset(&pw, 0, sizeof pw);
    row_start[0] = 0;
    for (uint64_t i = 0; i < count; i++) {
        const uint64_t row = first + i;
        if (k == UINT64_MAX || row >= plan[k + 1]) {
            k = find_window(plan, nwin, row);
            pack_window(p, epoch, k, wk, &pw, 1);
            if (plan[k + 1] - plan[k] != pw.fitted + pw.full) return stale_plan();
        }
        const uint64_t nrows = plan[k + 1] - plan[k];
        uint64_t r = window_row(p, epoch, k, nrows, row - plan[k]);
        int rc = emit_row(p, wk, &pw, r, pieces, capacity, &np);
        if (rc != ZSM_OK) return rc;
        row_start[i + 1] = np;
    }
    return ZSM_OK;
}

static int rows_concat(const zsm_pack *p, uint64_t epoch, const uint64_t *plan, uint64_t nwin,
                       uint64_t first, uint64_t count, zsm_piece *pieces, uint64_t capacity,
                       uint64_t *row_start, work *wk)
{
    const uint64_t L = p->row_length, total = plan[nwin];
    uint64_t np = 0;
    row_start[0] = 0;
    if (count == 0) return ZSM_OK;
    /* Walk the epoch's elements from the first row's start. */
    uint64_t pos = first * L;
    uint64_t k = find_window(plan, nwin, pos);
    uint64_t n = load_window(p, epoch, k, wk), i = 0, at = plan[k];
    while (i < n && at + wk->len[i] <= pos) at += wk->len[i++];
    for (uint64_t row = 0; row < count; row++) {
        uint64_t end = (first + row + 1) * L;
        if (end > total) end = total;
        while (pos < end) {
            while (i == n) { /* on to the next window */
                if (++k >= nwin) return stale_plan();
                n = load_window(p, epoch, k, wk);
                i = 0;
            }
            uint64_t dl = wk->len[i];
            if (at + dl <= pos) { /* an empty document, or one already done */
                at += dl;
                i++;
                continue;
            }
            uint64_t take = (at + dl < end ? at + dl : end) - pos;
            if (np >= capacity) return no_room(capacity);
            pieces[np].doc = wk->docs[i];
            pieces[np].offset = pos - at;
            pieces[np].length = take;
            np++;
            pos += take;
        }
        row_start[row + 1] = np;
    }
    return ZSM_OK;
}

int zsm_pack_rows(const zsm_pack *p, uint64_t epoch, const uint64_t *plan, uint64_t first,
                  uint64_t count, zsm_piece *pieces, uint64_t capacity, uint64_t *row_start,
                  void *scratch, size_t scratch_bytes)
{
    work wk;
    if (plan == NULL || row_start == NULL || (pieces == NULL && capacity > 0))
        return zr_set_error(ZSM_EINVAL, "zsm_pack_rows: %s is NULL",
                            plan == NULL ? "plan" : row_start == NULL ? "row_start" : "pieces");
    if (zsm_pack_validate(p) != ZSM_OK) return ZSM_EINVAL; /* detail set */
    if (carve("zsm_pack_rows", p, scratch, scratch_bytes, &wk) != ZSM_OK) return ZSM_EINVAL;
    const uint64_t nwin = zsm_pack_windows(p), L = p->row_length;
    const uint64_t rows = p->policy == ZSM_PACK_CONCAT
                              ? plan[nwin] / L + (plan[nwin] % L != 0)
                              : plan[nwin];
    if (first > rows || count > rows - first)
        return zr_set_error(ZSM_EINVAL, "zsm_pack_rows: rows %" PRIu64 "..%" PRIu64 " are past "
                            "the epoch's %" PRIu64 " rows", first, first + count, rows);
    if (p->policy == ZSM_PACK_CONCAT)
        return rows_concat(p, epoch, plan, nwin, first, count, pieces, capacity, row_start, &wk);
    for (unsigned l = 0; l < wk.levels; l++) memset(wk.bits[l], 0, wk.words[l] * sizeof(uint64_t));
    return rows_fitted(p, epoch, plan, nwin, first, count, pieces, capacity, row_start, &wk);
}
