/*
 * pack.c - libzloader: pack mode. A step's rows come from libzsampler's
 * packing plan (zsm_pack_*); this file maps steps to rows, keeps the
 * epochs' plans, and copies the documents' elements into the rows.
 *
 * Steps to rows. A finite pass is one epoch: zsm_pass over its R rows
 * gives each rank's rows of a step (contiguous). Endless steps read the
 * epochs' rows back to back: step s, rank r take global rows
 * [s*G + r*B, s*G + r*B + B) (G = B * world_size), which may run from
 * one epoch into the next. Concat places the same elements every epoch,
 * so its epochs all have ceil(T / L) rows; first_fit and best_fit rows
 * depend on the order, so the first row of epoch e is known only once the
 * epochs before it are planned: the packer plans them in turn, once, and
 * keeps each epoch's first row (a seek to step s plans the epochs up to
 * s's; each plan costs O(documents log window)).
 *
 * Plans. An epoch's plan is zsm_pack_windows + 1 values; the packer keeps
 * the last few in a small cache, each pinned while a worker reads it.
 *
 * Lengths. A record of a ragged stream is [u64 ndim][u64 dims][payload]
 * (FORMAT.md); a document's length is its first dimension. The sizes of
 * every record give the lengths without reading them, once the item shape
 * (the dims after the first) and element size are known: those come from
 * the longest record, and every record read later is checked against them.
 */
#include "zld_pack.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "zr_platform.h"

#define PLAN_CACHE 4
#define SIZES_CHUNK 65536u
#define MAX_ITEM_DIMS ZRS_MAX_NDIM /* dims after the first: fewer than this */

typedef struct plan_slot {
    uint64_t epoch;
    uint64_t *plan; /* nwin + 1 values, or NULL */
    unsigned pins;
    uint64_t used;  /* for eviction: larger = more recent */
} plan_slot;

struct zld_packer {
    zld_pack_setup set;
    zsm_pack sp;            /* sp.lengths = lengths */
    uint32_t *lengths;      /* [ndocs] */
    size_t nstreams;
    uint64_t *elem_bytes;   /* [nstreams] bytes per element */
    uint64_t *item_ndim;    /* [nstreams] dims after the first */
    uint64_t *item_dims;    /* [nstreams * MAX_ITEM_DIMS] */
    uint64_t nwin;
    size_t scratch_bytes;
    uint64_t max_pieces;    /* per row */
    uint64_t tokens;        /* elements one epoch places */
    uint64_t g;             /* rows per global step */
    /* a finite pass */
    zsm_pass pass;          /* over the epoch's rows */
    uint64_t steps;
    /* endless: first global row of each planned epoch */
    zrp_mutex mu;
    int mu_ready;
    uint64_t *epoch_first;  /* [nfirst]: epoch_first[e], e < nfirst; grows */
    uint64_t nfirst, cap_first;
    uint64_t concat_rows;   /* concat: rows of every epoch */
    plan_slot slots[PLAN_CACHE];
    uint64_t clock;
};

/* ------------------------------------------------------------- helpers */

static uint64_t rd64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}

static const char *sname(const zld_stream *st)
{
    return st->name ? st->name : "";
}

/* The shape prefix of one record of `size` bytes: ndim >= 1, dims. */
static int decode_prefix(const unsigned char *rec, uint64_t size, const zld_stream *st,
                         size_t s, uint64_t doc, uint64_t *ndim, uint64_t *dims,
                         uint64_t *payload_at)
{
    if (size < 8 || (*ndim = rd64(rec)) == 0 || *ndim > MAX_ITEM_DIMS ||
        size < 8 * (1 + *ndim))
        return zr_set_error(ZR_EINVAL,
                            "pack: stream %zu (%s): record %llu (%llu bytes) is not a record of "
                            "one or more dimensions (pack mode packs along the first axis)",
                            s, sname(st), (unsigned long long)doc, (unsigned long long)size);
    for (uint64_t k = 0; k < *ndim; k++) dims[k] = rd64(rec + 8 * (1 + k));
    *payload_at = 8 * (1 + *ndim);
    return ZR_OK;
}

/* ----------------------------------------------------- lengths at create */

/* Stream s's element shape from its longest record (read once). */
static int learn_item(zld_packer *p, const zld_stream *st, size_t s, const uint64_t *sizes_all)
{
    uint64_t best = 0;
    for (uint64_t i = 1; i < st->length; i++)
        if (sizes_all[i] > sizes_all[best]) best = i;
    uint64_t size = sizes_all[best], bounds[2] = {0, size};
    unsigned char *rec = malloc(size ? (size_t)size : 1);
    if (rec == NULL)
        return zr_set_error(ZR_ENOMEM, "pack: out of memory for a record of %llu bytes",
                            (unsigned long long)size);
    int rc = st->gather(st->user, &best, 1, rec, size, bounds);
    if (rc != ZR_OK) {
        char cause[512];
        snprintf(cause, sizeof cause, "%s", zr_last_error());
        free(rec);
        return zr_set_error(rc < 0 ? rc : ZR_EINVAL, "pack: stream %zu (%s): reading record %llu "
                            "for its shape: %s", s, sname(st), (unsigned long long)best, cause);
    }
    uint64_t ndim = 0, dims[MAX_ITEM_DIMS + 1], at = 0;
    rc = decode_prefix(rec, size, st, s, best, &ndim, dims, &at);
    free(rec);
    if (rc != ZR_OK) return rc;
    if (dims[0] == 0 || size == at || (size - at) % dims[0] != 0)
        return zr_set_error(ZR_EINVAL, "pack: stream %zu (%s): its longest record (%llu) has no "
                            "elements to pack (shape prefix and %llu payload bytes)",
                            s, sname(st), (unsigned long long)best,
                            (unsigned long long)(size - at));
    p->elem_bytes[s] = (size - at) / dims[0];
    p->item_ndim[s] = ndim - 1;
    memcpy(p->item_dims + s * MAX_ITEM_DIMS, dims + 1, (ndim - 1) * sizeof(uint64_t));
    return ZR_OK;
}

/* Every record's size, in chunks (the index arrays of a large corpus
 * would otherwise double its working memory). */
static int all_sizes(const zld_stream *st, size_t s, uint64_t *sizes)
{
    uint64_t idx[1024];
    for (uint64_t at = 0; at < st->length;) {
        uint64_t n = st->length - at < 1024 ? st->length - at : 1024;
        for (uint64_t k = 0; k < n; k++) idx[k] = at + k;
        int rc = st->sizes(st->user, idx, n, sizes + at);
        if (rc != ZR_OK) {
            char cause[512];
            snprintf(cause, sizeof cause, "%s", zr_last_error());
            return zr_set_error(rc < 0 ? rc : ZR_EINVAL, "pack: stream %zu (%s): sizes: %s", s,
                                sname(st), cause);
        }
        at += n;
    }
    return ZR_OK;
}

static int read_lengths(zld_packer *p, const zld_stream *streams, size_t nstreams)
{
    const uint64_t n = streams[0].length;
    uint64_t *sizes = malloc((size_t)n * sizeof *sizes);
    if (sizes == NULL)
        return zr_set_error(ZR_ENOMEM, "pack: out of memory for %llu record sizes",
                            (unsigned long long)n);
    int rc = ZR_OK;
    for (size_t s = 0; s < nstreams && rc == ZR_OK; s++) {
        const zld_stream *st = &streams[s];
        if (st->kind != ZLD_STREAM_RAGGED) {
            rc = zr_set_error(ZR_EINVAL, "pack: stream %zu (%s) is dense; pack mode packs ragged "
                              "streams (token records and any aligned ones)", s, sname(st));
            break;
        }
        rc = all_sizes(st, s, sizes);
        if (rc == ZR_OK) rc = learn_item(p, st, s, sizes);
        if (rc != ZR_OK) break;
        const uint64_t at = 8 * (2 + p->item_ndim[s]), eb = p->elem_bytes[s];
        for (uint64_t i = 0; i < n; i++) {
            uint64_t len = sizes[i] >= at ? (sizes[i] - at) / eb : 0;
            if (sizes[i] < at || (sizes[i] - at) % eb != 0 || len > UINT32_MAX) {
                rc = zr_set_error(ZR_EINVAL, "pack: stream %zu (%s): record %llu (%llu bytes) "
                                  "is not a record of %llu dimensions with elements of %llu bytes "
                                  "like its others", s, sname(st), (unsigned long long)i,
                                  (unsigned long long)sizes[i],
                                  (unsigned long long)(p->item_ndim[s] + 1),
                                  (unsigned long long)eb);
                break;
            }
            if (s == 0) {
                p->lengths[i] = (uint32_t)len;
            } else if (p->lengths[i] != len) {
                rc = zr_set_error(ZR_EINVAL, "pack: stream %zu (%s) is not aligned with stream 0 "
                                  "(%s): record %llu has %llu elements there and %u here", s,
                                  sname(st), sname(&streams[0]), (unsigned long long)i,
                                  (unsigned long long)len, p->lengths[i]);
                break;
            }
        }
    }
    free(sizes);
    return rc;
}

/* -------------------------------------------------------------- create */

void zld__packer_free(zld_packer *p)
{
    if (p == NULL) return;
    for (int i = 0; i < PLAN_CACHE; i++) free(p->slots[i].plan);
    free(p->lengths);
    free(p->elem_bytes);
    free(p->item_ndim);
    free(p->item_dims);
    free(p->epoch_first);
    if (p->mu_ready) zrp_mutex_destroy(&p->mu);
    free(p);
}

/* Plan `epoch` into plan[]; its rows in *rows. */
static int plan_epoch(const zld_packer *p, uint64_t epoch, uint64_t *plan, uint64_t *rows)
{
    void *scratch = malloc(p->scratch_bytes);
    if (scratch == NULL)
        return zr_set_error(ZR_ENOMEM, "pack: out of memory for %zu bytes of planning scratch",
                            p->scratch_bytes);
    int rc = zsm_pack_epoch(&p->sp, epoch, plan, rows, scratch, p->scratch_bytes);
    free(scratch);
    if (rc != ZSM_OK) return zr_set_error(ZR_EINVAL, "pack: the packing plan refused epoch %llu",
                                          (unsigned long long)epoch);
    return ZR_OK;
}

int zld__packer_new(zld_packer **out, const zld_pack_setup *set, const zld_stream *streams,
                    size_t nstreams)
{
    *out = NULL;
    zld_packer *p = calloc(1, sizeof *p);
    if (p == NULL) return zr_set_error(ZR_ENOMEM, "pack: out of memory");
    p->set = *set;
    p->nstreams = nstreams;
    const uint64_t n = streams[0].length;
    p->lengths = malloc((size_t)n * sizeof *p->lengths);
    p->elem_bytes = calloc(nstreams, sizeof *p->elem_bytes);
    p->item_ndim = calloc(nstreams, sizeof *p->item_ndim);
    p->item_dims = calloc(nstreams * MAX_ITEM_DIMS, sizeof *p->item_dims);
    if (zrp_mutex_init(&p->mu) == 0) p->mu_ready = 1;
    if (!p->lengths || !p->elem_bytes || !p->item_ndim || !p->item_dims || !p->mu_ready) {
        zld__packer_free(p);
        return zr_set_error(ZR_ENOMEM, "pack: out of memory for %llu document lengths",
                            (unsigned long long)n);
    }
    int rc = read_lengths(p, streams, nstreams);
    if (rc != ZR_OK) {
        zld__packer_free(p);
        return rc;
    }
    zsm_pack *sp = &p->sp;
    sp->lengths = p->lengths;
    sp->ndocs = n;
    sp->row_length = set->length;
    sp->window = set->window;
    sp->policy = set->policy;
    sp->overlong = set->overlong;
    sp->seed = set->seed;
    sp->shuffle = set->shuffle;
    if (zsm_pack_validate(sp) != ZSM_OK) {
        zld__packer_free(p);
        return zr_set_error(ZR_EINVAL, "pack: pack_length %llu must be 1..%u and pack_window "
                            "%llu 1..%u", (unsigned long long)set->length, ZSM_PACK_MAX_LENGTH,
                            (unsigned long long)set->window, ZSM_PACK_MAX_WINDOW);
    }
    p->nwin = zsm_pack_windows(sp);
    p->scratch_bytes = zsm_pack_scratch_bytes(sp);
    p->max_pieces = zsm_pack_max_pieces(sp);
    p->g = set->batch_size * set->world_size; /* checked by the sampler's rules */
    for (uint64_t i = 0; i < n; i++) {
        uint64_t len = p->lengths[i];
        p->tokens += len <= set->length ? len
                     : set->overlong == ZSM_PACK_SPLIT ? len
                     : set->overlong == ZSM_PACK_TRUNCATE ? set->length : 0;
    }
    if (p->tokens == 0) {
        zld__packer_free(p);
        return zr_set_error(ZR_EINVAL, "pack: nothing to pack: every one of the %llu documents "
                            "is empty%s", (unsigned long long)n,
                            set->overlong == ZSM_PACK_DROP ? " or longer than pack_length (dropped)"
                                                           : "");
    }
    p->concat_rows = p->tokens / set->length + (p->tokens % set->length != 0);
    p->steps = UINT64_MAX;
    if (set->finite) {
        uint64_t rows = 0;
        p->slots[0].plan = malloc((size_t)(p->nwin + 1) * sizeof(uint64_t));
        if (p->slots[0].plan == NULL) {
            zld__packer_free(p);
            return zr_set_error(ZR_ENOMEM, "pack: out of memory for the pass's plan");
        }
        rc = plan_epoch(p, set->epoch, p->slots[0].plan, &rows);
        if (rc != ZR_OK) {
            zld__packer_free(p);
            return rc;
        }
        p->slots[0].epoch = set->epoch;
        p->pass.length = rows;
        p->pass.batch_size = set->batch_size;
        p->pass.rank = set->rank;
        p->pass.world_size = set->world_size;
        p->pass.drop_last = set->drop_last;
        p->steps = zsm_pass_steps(&p->pass);
    } else {
        p->cap_first = 16;
        p->epoch_first = malloc(p->cap_first * sizeof *p->epoch_first);
        if (p->epoch_first == NULL) {
            zld__packer_free(p);
            return zr_set_error(ZR_ENOMEM, "pack: out of memory");
        }
        p->epoch_first[0] = 0;
        p->nfirst = 1;
    }
    *out = p;
    return ZR_OK;
}

uint64_t zld__packer_steps(const zld_packer *p)
{
    return p->steps;
}

uint64_t zld__packer_docs(const zld_packer *p)
{
    return p->sp.ndocs;
}

const uint32_t *zld__packer_lengths(const zld_packer *p)
{
    return p->lengths;
}

int zld__packer_item_shape(const zld_packer *p, size_t stream, uint64_t *dims, size_t *ndim)
{
    if (stream >= p->nstreams) return ZR_EINVAL;
    *ndim = (size_t)p->item_ndim[stream];
    memcpy(dims, p->item_dims + stream * MAX_ITEM_DIMS, *ndim * sizeof *dims);
    return ZR_OK;
}

/* ------------------------------------------------------- epochs and plans */

/* The plan of `epoch`, pinned (release with unpin_plan). Lock held. */
static int pin_plan(zld_packer *p, uint64_t epoch, plan_slot **out)
{
    plan_slot *free_slot = NULL;
    for (int i = 0; i < PLAN_CACHE; i++) {
        plan_slot *sl = &p->slots[i];
        if (sl->plan != NULL && sl->epoch == epoch) {
            sl->pins++;
            sl->used = ++p->clock;
            *out = sl;
            return ZR_OK;
        }
        if (sl->pins == 0 && (free_slot == NULL || sl->used < free_slot->used)) free_slot = sl;
    }
    if (free_slot == NULL) { /* every slot in use by other workers: rare, and fine */
        *out = NULL;
        return ZR_OK;
    }
    uint64_t rows = 0;
    if (free_slot->plan == NULL) {
        free_slot->plan = malloc((size_t)(p->nwin + 1) * sizeof(uint64_t));
        if (free_slot->plan == NULL)
            return zr_set_error(ZR_ENOMEM, "pack: out of memory for an epoch's plan");
    }
    free_slot->epoch = UINT64_MAX; /* not valid until planned */
    int rc = plan_epoch(p, epoch, free_slot->plan, &rows);
    if (rc != ZR_OK) return rc;
    free_slot->epoch = epoch;
    free_slot->pins = 1;
    free_slot->used = ++p->clock;
    *out = free_slot;
    return ZR_OK;
}

static void unpin_plan(zld_packer *p, plan_slot *sl)
{
    if (sl == NULL) return;
    zrp_mutex_lock(&p->mu);
    sl->pins--;
    zrp_mutex_unlock(&p->mu);
}

/* Endless first_fit / best_fit: plan epochs until the one holding global
 * row `row` is known; its number in *epoch and first row in *first. Lock
 * held. */
static int locate_epoch(zld_packer *p, uint64_t row, uint64_t *epoch, uint64_t *first)
{
    if (p->set.policy == ZSM_PACK_CONCAT) {
        *epoch = row / p->concat_rows;
        *first = *epoch * p->concat_rows;
        return ZR_OK;
    }
    while (p->epoch_first[p->nfirst - 1] <= row) {
        const uint64_t e = p->nfirst - 1;
        plan_slot *sl = NULL;
        int rc = pin_plan(p, e, &sl);
        if (rc != ZR_OK) return rc;
        uint64_t rows = 0;
        if (sl != NULL) {
            rows = sl->plan[p->nwin];
            sl->pins--;
        } else {
            uint64_t *tmp = malloc((size_t)(p->nwin + 1) * sizeof *tmp);
            if (tmp == NULL) return zr_set_error(ZR_ENOMEM, "pack: out of memory for a plan");
            rc = plan_epoch(p, e, tmp, &rows);
            free(tmp);
            if (rc != ZR_OK) return rc;
        }
        if (p->nfirst == p->cap_first) {
            uint64_t *grown = realloc(p->epoch_first, 2 * p->cap_first * sizeof *grown);
            if (grown == NULL) return zr_set_error(ZR_ENOMEM, "pack: out of memory");
            p->epoch_first = grown;
            p->cap_first *= 2;
        }
        p->epoch_first[p->nfirst++] = p->epoch_first[e] + rows; /* rows >= 1: tokens > 0 */
    }
    /* the last epoch whose first row is <= row */
    uint64_t lo = 0, hi = p->nfirst - 1;
    while (hi - lo > 1) {
        uint64_t mid = lo + (hi - lo) / 2;
        if (p->epoch_first[mid] <= row) lo = mid;
        else hi = mid;
    }
    *epoch = lo;
    *first = p->epoch_first[lo];
    return ZR_OK;
}

/* ----------------------------------------------------------- step rows */

/* The rows of `step` for this rank: pieces[row_start[i] .. row_start[i+1])
 * for i < *rows (both malloc'd by this call). */
static int step_rows(zld_packer *p, uint64_t step, zsm_piece **pieces_out, uint64_t **starts_out,
                     uint64_t *rows_out)
{
    uint64_t first, count;
    *pieces_out = NULL;
    *starts_out = NULL;
    if (p->set.finite) {
        uint64_t *idx = malloc((size_t)p->set.batch_size * sizeof *idx);
        if (idx == NULL) return zr_set_error(ZR_ENOMEM, "pack: out of memory");
        int rc = zsm_pass_indices(&p->pass, step, idx, &count);
        first = rc == ZSM_OK ? idx[0] : 0;
        free(idx);
        if (rc != ZSM_OK)
            return zr_set_error(ZR_EINVAL, "pack: step %llu is past the pass's %llu steps",
                                (unsigned long long)step, (unsigned long long)p->steps);
    } else {
        first = step * p->g + (uint64_t)p->set.rank * p->set.batch_size;
        count = p->set.batch_size;
    }
    zsm_piece *pieces = malloc((size_t)(count * p->max_pieces) * sizeof *pieces);
    uint64_t *starts = malloc((size_t)(count + 1) * sizeof *starts);
    uint64_t *rs = malloc((size_t)(count + 1) * sizeof *rs);
    void *scratch = malloc(p->scratch_bytes);
    int rc = ZR_OK;
    if (!pieces || !starts || !rs || !scratch)
        rc = zr_set_error(ZR_ENOMEM, "pack: out of memory for %llu rows' pieces",
                          (unsigned long long)count);
    uint64_t done = 0, np = 0;
    starts[0] = 0;
    while (rc == ZR_OK && done < count) {
        uint64_t epoch = 0, efirst = 0, erows = 0;
        plan_slot *sl = NULL;
        const uint64_t row = first + done;
        zrp_mutex_lock(&p->mu);
        if (p->set.finite) {
            epoch = p->set.epoch;
            efirst = 0;
        } else {
            rc = locate_epoch(p, row, &epoch, &efirst);
        }
        if (rc == ZR_OK) rc = pin_plan(p, epoch, &sl);
        zrp_mutex_unlock(&p->mu);
        uint64_t *plan = sl ? sl->plan : NULL, *own = NULL;
        if (rc == ZR_OK && plan == NULL) { /* no free cache slot: a plan of its own */
            own = malloc((size_t)(p->nwin + 1) * sizeof *own);
            rc = own ? plan_epoch(p, epoch, own, &erows)
                     : zr_set_error(ZR_ENOMEM, "pack: out of memory for a plan");
            plan = own;
        }
        if (rc == ZR_OK) {
            erows = p->set.policy == ZSM_PACK_CONCAT ? p->concat_rows : plan[p->nwin];
            uint64_t in_epoch = row - efirst;
            uint64_t take = erows - in_epoch < count - done ? erows - in_epoch : count - done;
            if (zsm_pack_rows(&p->sp, epoch, plan, in_epoch, take, pieces + np,
                              (count - done) * p->max_pieces, rs, scratch,
                              p->scratch_bytes) != ZSM_OK)
                rc = zr_set_error(ZR_EINVAL, "pack: the packing plan refused rows %llu..%llu of "
                                  "epoch %llu", (unsigned long long)in_epoch,
                                  (unsigned long long)(in_epoch + take),
                                  (unsigned long long)epoch);
            for (uint64_t i = 0; rc == ZR_OK && i < take; i++) starts[done + i + 1] = np + rs[i + 1];
            if (rc == ZR_OK) {
                np += rs[take];
                done += take;
            }
        }
        free(own);
        unpin_plan(p, sl);
    }
    free(rs);
    free(scratch);
    if (rc != ZR_OK) {
        free(pieces);
        free(starts);
        return rc;
    }
    *pieces_out = pieces;
    *starts_out = starts;
    *rows_out = count;
    return ZR_OK;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* The distinct documents of pieces[0..np), sorted. */
static uint64_t *unique_docs(const zsm_piece *pieces, uint64_t np, uint64_t *nu)
{
    uint64_t *d = malloc((size_t)(np ? np : 1) * sizeof *d);
    if (d == NULL) return NULL;
    for (uint64_t q = 0; q < np; q++) d[q] = pieces[q].doc;
    qsort(d, (size_t)np, sizeof *d, cmp_u64);
    uint64_t k = 0;
    for (uint64_t q = 0; q < np; q++)
        if (k == 0 || d[k - 1] != d[q]) d[k++] = d[q];
    *nu = k;
    return d;
}

static uint64_t find_doc(const uint64_t *d, uint64_t n, uint64_t doc)
{
    uint64_t lo = 0, hi = n;
    while (lo < hi) {
        uint64_t mid = lo + (hi - lo) / 2;
        if (d[mid] < doc) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

int zld__pack_step_docs(zld_packer *p, uint64_t step, uint64_t **docs, uint64_t *n)
{
    zsm_piece *pieces;
    uint64_t *starts, rows;
    *docs = NULL;
    int rc = step_rows(p, step, &pieces, &starts, &rows);
    if (rc != ZR_OK) return rc;
    *docs = unique_docs(pieces, starts[rows], n);
    free(pieces);
    free(starts);
    return *docs ? ZR_OK : zr_set_error(ZR_ENOMEM, "pack: out of memory");
}

/* ------------------------------------------------------------- a batch */

/* Gather stream s's records of docs[0..nu) and check each against the
 * plan: *buf (malloc'd) and each record's payload offset in at[]. */
static int gather_docs(const zld_packer *p, const zld_stream *st, size_t s, const uint64_t *docs,
                       uint64_t nu, unsigned char **buf, uint64_t *at)
{
    uint64_t *bounds = malloc((size_t)(nu + 1) * sizeof *bounds);
    *buf = NULL;
    if (bounds == NULL) return zr_set_error(ZR_ENOMEM, "pack: out of memory");
    int rc = st->sizes(st->user, docs, nu, bounds + 1);
    uint64_t total = 0;
    bounds[0] = 0;
    for (uint64_t u = 1; rc == ZR_OK && u <= nu; u++) {
        total += bounds[u];
        bounds[u] = total;
    }
    if (rc == ZR_OK) {
        *buf = malloc(total ? (size_t)total : 1);
        rc = *buf ? st->gather(st->user, docs, nu, *buf, total, bounds)
                  : zr_set_error(ZR_ENOMEM, "pack: out of memory for %llu bytes of records",
                                 (unsigned long long)total);
    }
    if (rc != ZR_OK && rc != ZR_ENOMEM) { /* a callback's error: say which stream */
        char cause[512];
        snprintf(cause, sizeof cause, "%s", zr_last_error());
        rc = zr_set_error(rc < 0 ? rc : ZR_EINVAL, "stream %zu (%s): %s", s, sname(st), cause);
    }
    for (uint64_t u = 0; rc == ZR_OK && u < nu; u++) {
        uint64_t ndim, dims[MAX_ITEM_DIMS + 1], off;
        const unsigned char *rec = *buf + bounds[u];
        const uint64_t size = bounds[u + 1] - bounds[u], want = p->lengths[docs[u]];
        rc = decode_prefix(rec, size, st, s, docs[u], &ndim, dims, &off);
        if (rc != ZR_OK) break;
        int same = ndim == p->item_ndim[s] + 1 && dims[0] == want &&
                   memcmp(dims + 1, p->item_dims + s * MAX_ITEM_DIMS,
                          (ndim - 1) * sizeof(uint64_t)) == 0 &&
                   size - off == want * p->elem_bytes[s];
        if (!same)
            rc = zr_set_error(ZR_EINVAL, "pack: stream %zu (%s): record %llu changed: %llu "
                              "elements in %llu bytes, planned %llu of %llu bytes each", s,
                              sname(st), (unsigned long long)docs[u], (unsigned long long)dims[0],
                              (unsigned long long)size, (unsigned long long)want,
                              (unsigned long long)p->elem_bytes[s]);
        at[u] = bounds[u] + off;
    }
    free(bounds);
    if (rc != ZR_OK) {
        free(*buf);
        *buf = NULL;
    }
    return rc;
}

/* Copy the pieces of every row of stream s into dst (rows x L elements,
 * padding zeroed). */
static void fill_stream(const zld_packer *p, size_t s, const zsm_piece *pieces,
                        const uint64_t *starts, uint64_t rows, const uint64_t *docs, uint64_t nu,
                        const unsigned char *buf, const uint64_t *at, unsigned char *dst)
{
    const uint64_t eb = p->elem_bytes[s], row_bytes = p->set.length * eb;
    for (uint64_t r = 0; r < rows; r++) {
        unsigned char *out = dst + r * row_bytes;
        uint64_t used = 0;
        for (uint64_t q = starts[r]; q < starts[r + 1]; q++) {
            const zsm_piece *pc = &pieces[q];
            uint64_t u = find_doc(docs, nu, pc->doc);
            memcpy(out + used, buf + at[u] + pc->offset * eb, (size_t)(pc->length * eb));
            used += pc->length * eb;
        }
        if (used < row_bytes) memset(out + used, 0, (size_t)(row_bytes - used));
    }
}

/* segment_ids, positions, seq_lens and cu_seqlens of the rows. */
static int fill_layout(const zld_packer *p, const zsm_piece *pieces, const uint64_t *starts,
                       uint64_t rows, zld_pack_alloc alloc, void *ctx, void **parts,
                       uint64_t *part_bytes, zld_pack_batch *out)
{
    const size_t base = p->nstreams;
    const uint64_t L = p->set.length, np = starts[rows];
    uint64_t smax = 0, lmax = 0, tokens = 0;
    for (uint64_t r = 0; r < rows; r++)
        if (starts[r + 1] - starts[r] > smax) smax = starts[r + 1] - starts[r];
    const uint64_t bytes[ZLD_PACK_PARTS] = {rows * L * 4, rows * L * 4, rows * smax * 4,
                                            (np + 1) * 4};
    for (size_t k = 0; k < ZLD_PACK_PARTS; k++) {
        parts[base + k] = alloc(ctx, base + k, (size_t)bytes[k]);
        part_bytes[base + k] = bytes[k];
        if (parts[base + k] == NULL)
            return zr_set_error(ZR_ENOMEM, "pack: out of memory for a batch of %llu rows",
                                (unsigned long long)rows);
    }
    int32_t *seg = parts[base + ZLD_PACK_SEGMENT_IDS], *pos = parts[base + ZLD_PACK_POSITIONS];
    int32_t *lens = parts[base + ZLD_PACK_SEQ_LENS], *cu = parts[base + ZLD_PACK_CU_SEQLENS];
    cu[0] = 0;
    for (uint64_t r = 0; r < rows; r++) {
        uint64_t used = 0, k = 0;
        for (uint64_t q = starts[r]; q < starts[r + 1]; q++, k++) {
            const uint64_t n = pieces[q].length;
            for (uint64_t j = 0; j < n; j++) {
                seg[r * L + used + j] = (int32_t)(k + 1);
                pos[r * L + used + j] = (int32_t)j;
            }
            lens[r * smax + k] = (int32_t)n;
            tokens += n;
            cu[q + 1] = (int32_t)tokens;
            if (n > lmax) lmax = n;
            used += n;
        }
        for (; k < smax; k++) lens[r * smax + k] = 0;
        for (uint64_t j = used; j < L; j++) seg[r * L + j] = pos[r * L + j] = 0;
    }
    out->rows = rows;
    out->segments = np;
    out->max_segments = smax;
    out->max_seqlen = lmax;
    out->tokens = tokens;
    out->docs = malloc((size_t)(np ? np : 1) * sizeof *out->docs);
    if (out->docs == NULL) return zr_set_error(ZR_ENOMEM, "pack: out of memory");
    for (uint64_t q = 0; q < np; q++) out->docs[q] = pieces[q].doc;
    return ZR_OK;
}

int zld__pack_step(zld_packer *p, const zld_stream *streams, uint64_t step, zld_pack_alloc alloc,
                   void *ctx, void **parts, uint64_t *part_bytes, zld_pack_batch *out)
{
    zsm_piece *pieces = NULL;
    uint64_t *starts = NULL, rows = 0, nu = 0;
    memset(out, 0, sizeof *out);
    for (size_t k = 0; k < p->nstreams + ZLD_PACK_PARTS; k++) {
        parts[k] = NULL;
        part_bytes[k] = 0;
    }
    int rc = step_rows(p, step, &pieces, &starts, &rows);
    if (rc != ZR_OK) return rc;
    uint64_t *docs = unique_docs(pieces, starts[rows], &nu);
    uint64_t *at = malloc((size_t)(nu ? nu : 1) * sizeof *at);
    if (docs == NULL || at == NULL) rc = zr_set_error(ZR_ENOMEM, "pack: out of memory");
    for (size_t s = 0; rc == ZR_OK && s < p->nstreams; s++) {
        unsigned char *buf = NULL;
        rc = gather_docs(p, &streams[s], s, docs, nu, &buf, at);
        if (rc != ZR_OK) break;
        const uint64_t bytes = rows * p->set.length * p->elem_bytes[s];
        parts[s] = alloc(ctx, s, (size_t)bytes);
        part_bytes[s] = bytes;
        if (parts[s] == NULL)
            rc = zr_set_error(ZR_ENOMEM, "pack: out of memory for %llu bytes of stream %zu",
                              (unsigned long long)bytes, s);
        else
            fill_stream(p, s, pieces, starts, rows, docs, nu, buf, at, parts[s]);
        free(buf);
    }
    if (rc == ZR_OK) rc = fill_layout(p, pieces, starts, rows, alloc, ctx, parts, part_bytes, out);
    if (rc != ZR_OK) {
        free(out->docs);
        out->docs = NULL;
    }
    free(at);
    free(docs);
    free(pieces);
    free(starts);
    return rc;
}
