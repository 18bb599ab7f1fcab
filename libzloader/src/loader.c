/*
 * loader.c - libzloader: the endless prefetching loader.
 *
 * Scheduling: a ring of `prefetch` slots. A worker claims the next step to
 * prepare (a shared counter) only while fewer than `prefetch` steps are
 * claimed but not yet handed out, builds that step's batch without the
 * lock (sampler + one gather per stream), and parks it in slot
 * step % prefetch. Because at most `prefetch` steps are in flight, the
 * slots of in-flight steps never collide. The consumer waits for the slot
 * of its next step, so batches leave in step order and a batch depends
 * only on (seed, step), never on which worker built it or when.
 *
 * Errors: the first failing step (smallest step number, so the outcome
 * does not depend on timing) is recorded with its cause; workers stop
 * claiming; batches of earlier steps, already claimed, still finish and are
 * delivered; the consumer then gets ZR_ESTATE at the failing step.
 */
#include "zloader.h"

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "zr_platform.h"
#include "zld_shards.h"
#include "zld_augment.h"
#include "zld_state.h"
#include "zld_pack.h"

#ifndef ZLOADER_VERSION_STRING
#error "ZLOADER_VERSION_STRING must be defined by the build"
#endif

unsigned zloader_version(void) { return ZLOADER_VERSION_NUMBER; }
const char *zloader_version_string(void) { return ZLOADER_VERSION_STRING; }

/* ---------------------------------------------------------------- types */

typedef struct zld_part {
    void *data;       /* a pool buffer (release with zld_free), NULL once detached */
    uint64_t nbytes;
    uint64_t *bounds; /* ragged: count + 1 offsets; dense: NULL */
} zld_part;

struct zld_batch {
    uint64_t step;
    uint64_t count;
    uint64_t valid;   /* leading real rows (even_batches pads the rest) */
    uint64_t *indices;
    int packed;        /* pack mode: `pack` holds the layout */
    zld_pack_info pack;
    size_t nstreams;  /* parts: the streams' (+ ZLD_PACK_PARTS in pack mode) */
    zld_part parts[]; /* nstreams entries */
};

#define ZLD_ERRMSG_MAX 1024

/* ------------------------------------------------------- buffer pool
 *
 * Batch buffers are recycled: a fresh multi-MiB malloc is served by a new
 * mmap each time (above glibc's mmap threshold), so every batch would pay
 * page faults and kernel zeroing before the gather writes it. Each buffer
 * carries a header just before its (64-byte aligned) payload naming its
 * pool and class (the stream index); zld_free pushes it back on the class
 * free list (bounded), or frees it when the list is full, the size is
 * wrong or the loader is closed. The pool is referenced by the loader and
 * by every live pool buffer, so a detached buffer stays valid after
 * zld_close and can still be zld_free'd; the last reference frees the pool.
 */

#define ZLD_BUF_ALIGN 64
/* Buffers from this size get the huge-page hint: numpy's threshold. */
#define ZLD_HUGEPAGE_MIN ((size_t)4 << 20)

typedef struct zld_pool zld_pool;

typedef struct zld_bufhdr {
    void *raw;               /* what malloc returned */
    zld_pool *pool;
    size_t capacity;         /* usable payload bytes */
    size_t cls;              /* stream index */
    struct zld_bufhdr *next; /* free-list link */
} zld_bufhdr;

typedef struct zld_pool_class {
    zld_bufhdr *head;
    unsigned count;
    int ragged;   /* any capacity fits; dense: exactly `size` */
    size_t size;  /* dense: batch_size * record_size */
} zld_pool_class;

struct zld_pool {
    zrp_mutex mu;        /* guards closed and the free lists */
    atomic_size_t refs;  /* 1 for the open loader + 1 per allocated buffer */
    int closed;
    unsigned keep;       /* free buffers kept per class */
    size_t nclasses;
    zld_pool_class cls[];
};

static void *buf_payload(zld_bufhdr *h)
{
    return (unsigned char *)h + sizeof *h;
}

static zld_bufhdr *buf_header(void *payload)
{
    return (zld_bufhdr *)((unsigned char *)payload - sizeof(zld_bufhdr));
}

static void pool_unref(zld_pool *p)
{
    if (atomic_fetch_sub_explicit(&p->refs, 1, memory_order_acq_rel) == 1) {
        zrp_mutex_destroy(&p->mu);
        free(p);
    }
}

/* Release a buffer's memory and its reference on the pool. */
static void buf_release(zld_bufhdr *h)
{
    zld_pool *p = h->pool;
    free(h->raw);
    pool_unref(p);
}

/* nparts >= nstreams classes: one per stream, and (pack mode) one per
 * further part; `flexible` makes every class take any size (pack mode's
 * sizes vary with the batch). */
static zld_pool *pool_new(const zld_stream *streams, size_t nstreams, size_t nparts,
                          int flexible, uint64_t batch_size, unsigned keep)
{
    zld_pool *p = calloc(1, sizeof *p + nparts * sizeof(zld_pool_class));
    if (p == NULL) return NULL;
    if (zrp_mutex_init(&p->mu) != 0) {
        free(p);
        return NULL;
    }
    atomic_init(&p->refs, 1);
    p->keep = keep;
    p->nclasses = nparts;
    for (size_t s = 0; s < nparts; s++) {
        p->cls[s].ragged = flexible || s >= nstreams || streams[s].kind != ZLD_STREAM_DENSE;
        if (!p->cls[s].ragged) /* overflow checked at create */
            p->cls[s].size = (size_t)(batch_size * streams[s].record_size);
    }
    return p;
}

/* The loader lets go: no more buffers are kept, the kept ones are freed,
 * and the pool lives on until the last outstanding buffer returns. */
static void pool_close(zld_pool *p)
{
    if (p == NULL) return;
    zld_bufhdr *drop = NULL;
    zrp_mutex_lock(&p->mu);
    p->closed = 1;
    for (size_t c = 0; c < p->nclasses; c++) {
        while (p->cls[c].head != NULL) {
            zld_bufhdr *h = p->cls[c].head;
            p->cls[c].head = h->next;
            h->next = drop;
            drop = h;
        }
        p->cls[c].count = 0;
    }
    zrp_mutex_unlock(&p->mu);
    while (drop != NULL) {
        zld_bufhdr *h = drop;
        drop = h->next;
        buf_release(h);
    }
    pool_unref(p);
}

/* A buffer of at least `need` bytes for stream `cls`: a kept one (the
 * smallest that fits) or a new one. NULL when out of memory. */
static void *pool_get(zld_pool *p, size_t cls, size_t need)
{
    if (need == 0) need = 1;
    zld_bufhdr *found = NULL, *drop = NULL;
    zld_pool_class *c = &p->cls[cls];
    zrp_mutex_lock(&p->mu);
    zld_bufhdr **best = NULL, **smallest = NULL;
    for (zld_bufhdr **pp = &c->head; *pp != NULL; pp = &(*pp)->next) {
        size_t cap = (*pp)->capacity;
        if (cap >= need && (best == NULL || cap < (*best)->capacity)) best = pp;
        if (smallest == NULL || cap < (*smallest)->capacity) smallest = pp;
    }
    if (best != NULL) {
        found = *best;
        *best = found->next;
        c->count--;
    } else if (smallest != NULL) {
        /* Nothing fits (ragged batches grew): retire the smallest so the
         * kept buffers follow the sizes actually needed. */
        drop = *smallest;
        *smallest = drop->next;
        c->count--;
    }
    zrp_mutex_unlock(&p->mu);
    if (drop != NULL) buf_release(drop);
    if (found != NULL) return buf_payload(found);

    size_t cap = need;
    /* Ragged sizes vary from batch to batch: leave headroom so a kept
     * buffer fits the next, slightly larger, batch. */
    if (c->ragged && cap <= SIZE_MAX - cap / 8) cap += cap / 8;
    if (cap > SIZE_MAX - sizeof(zld_bufhdr) - ZLD_BUF_ALIGN) return NULL;
    size_t total = sizeof(zld_bufhdr) + ZLD_BUF_ALIGN - 1 + cap;
    void *raw = malloc(total);
    if (raw == NULL) return NULL;
    /* Before the first touch, so the faults map huge pages: a batch is
     * read whole, often in strided passes (a flip, a crop), and with 4 KiB
     * pages those passes miss the TLB (probe: a numpy flip of a 37 MiB
     * batch took 24 ms on 4 KiB pages, 21.6 on numpy's own huge-page
     * arrays). A refused hint changes nothing. */
    if (cap >= ZLD_HUGEPAGE_MIN) (void)zrp_advise_hugepages(raw, total);
    uintptr_t at = (uintptr_t)raw + sizeof(zld_bufhdr);
    at = (at + ZLD_BUF_ALIGN - 1) & ~(uintptr_t)(ZLD_BUF_ALIGN - 1);
    zld_bufhdr *h = (zld_bufhdr *)(at - sizeof(zld_bufhdr));
    h->raw = raw;
    h->pool = p;
    h->capacity = cap;
    h->cls = cls;
    h->next = NULL;
    atomic_fetch_add_explicit(&p->refs, 1, memory_order_relaxed);
    return buf_payload(h);
}

struct zld_loader {
    zld_stream *streams; /* copies; names point into `names` */
    char *names;
    zld_plan plan;       /* what create decided; its arrays are the copies below */
    uint32_t *bucket_lengths; /* length-bucketed steps (a copy), or NULL */
    size_t bucket_scratch;    /* zsm_bucket_scratch_bytes */
    zld_flip *flips;          /* random flips (a copy), or NULL */
    zld_packer *packer;       /* pack mode, or NULL */
    char *labels;             /* the state's stream labels (copies), or NULL */
    const char **label_ptrs;  /* nstreams pointers into labels */

    zrp_thread *threads;
    unsigned nthreads;

    int sync_ready;    /* mu and the conditions were initialised (loader_destroy) */
    zrp_mutex mu;
    zrp_cond space;    /* workers: a slot came free, or stop/failure */
    zrp_cond ready;    /* consumers: a batch or an error arrived, or stop */
    zrp_cond idle;     /* close: the last consumer left zld_next */

    zld_pool *pool;    /* batch buffers, shared with outstanding buffers */
    zld_batch **slots; /* prefetch entries */
    unsigned prefetch;
    unsigned readahead; /* steps ahead to hint now; 0 = none */
    int readahead_auto;  /* ZLD_READAHEAD_AUTO: readahead is re-decided */
    int any_advise;     /* some stream has an advise callback */
    uint64_t next_claim; /* next step a worker will build */
    uint64_t next_hint;  /* first step not hinted yet (readahead) */
    uint64_t next_take;  /* next step the consumer gets */
    unsigned consumers;  /* threads inside zld_next */
    int building;        /* no workers: a consumer is building next_take */
    int stop;
    /* Set while stopping: the workers' waits on stores at URLs end at once
     * (ZR_EINTR), this loader's only (zre_thread_interrupt). */
    _Atomic int net_stop;

    int failed;
    uint64_t fail_step;
    int fail_status;
    char fail_msg[ZLD_ERRMSG_MAX];

    int held; /* the streams' stores, concatenations, mixtures are borrowed */
};

/* -------------------------------------------------------------- batches */

static void batch_destroy(zld_batch *b)
{
    if (b == NULL) return;
    for (size_t s = 0; s < b->nstreams; s++) {
        zld_free(b->parts[s].data);
        free(b->parts[s].bounds);
    }
    free(b->indices);
    free(b);
}

uint64_t zld_batch_step(const zld_batch *b) { return b ? b->step : 0; }
uint64_t zld_batch_count(const zld_batch *b) { return b ? b->count : 0; }
uint64_t zld_batch_valid(const zld_batch *b) { return b ? b->valid : 0; }

int zld_batch_pack_info(const zld_batch *b, zld_pack_info *out)
{
    if (b == NULL || out == NULL)
        return zr_set_error(ZR_EINVAL, "zld_batch_pack_info: %s is NULL", b ? "out" : "batch");
    if (!b->packed)
        return zr_set_error(ZR_EINVAL, "zld_batch_pack_info: the batch is not of a loader in "
                            "pack mode");
    *out = b->pack;
    return ZR_OK;
}
const uint64_t *zld_batch_indices(const zld_batch *b)
{
    return b ? b->indices : NULL;
}

void *zld_batch_data(zld_batch *b, size_t stream, uint64_t *nbytes)
{
    if (b == NULL || stream >= b->nstreams || b->parts[stream].data == NULL) {
        if (nbytes) *nbytes = 0;
        return NULL;
    }
    if (nbytes) *nbytes = b->parts[stream].nbytes;
    return b->parts[stream].data;
}

const uint64_t *zld_batch_bounds(const zld_batch *b, size_t stream)
{
    if (b == NULL || stream >= b->nstreams) return NULL;
    return b->parts[stream].bounds;
}

void *zld_batch_detach(zld_batch *b, size_t stream, uint64_t *nbytes)
{
    void *data = zld_batch_data(b, stream, nbytes);
    if (data != NULL) b->parts[stream].data = NULL;
    return data;
}

void zld_batch_free(zld_batch *b) { batch_destroy(b); }
void zld_free(void *buffer)
{
    if (buffer == NULL) return;
    zld_bufhdr *h = buf_header(buffer);
    zld_pool *p = h->pool;
    zrp_mutex_lock(&p->mu);
    zld_pool_class *c = h->cls < p->nclasses ? &p->cls[h->cls] : NULL;
    if (!p->closed && c != NULL && c->count < p->keep &&
        (c->ragged || h->capacity == c->size)) {
        h->next = c->head;
        c->head = h;
        c->count++;
        zrp_mutex_unlock(&p->mu);
        return;
    }
    zrp_mutex_unlock(&p->mu);
    buf_release(h);
}

/* A finite pass's step: its records, padded to batch_size rows when
 * even (see zld_options.even_batches); *valid real ones. */
static int pass_indices(const zld_plan *p, uint64_t step, uint64_t *out, uint64_t *count,
                        uint64_t *valid)
{
    uint64_t n = 0;
    int rc = step < p->own_steps ? zsm_pass_indices(&p->pass, step, out, &n) : ZSM_OK;
    *valid = *count = n;
    if (rc == ZSM_OK && p->even) {
        for (uint64_t i = n; i < p->cfg.batch_size; i++)
            out[i] = n > 0 ? out[0] : p->pad_index;
        *count = p->cfg.batch_size;
    }
    return rc;
}

/* The indices of `step` into out[0..batch_size), their number, and how
 * many lead as real records: the pass's, or the sampler's over the
 * segment that holds the step. */
static int step_indices(const zld_loader *l, uint64_t step, uint64_t *out, uint64_t *count,
                        uint64_t *valid)
{
    if (l->plan.finite) return pass_indices(&l->plan, step, out, count, valid);
    *valid = l->plan.cfg.batch_size;
    const zld_segment *g = zld__segment(&l->plan, step);
    zsm_config cfg = l->plan.cfg;
    cfg.length = g->length;
    const uint64_t local = step - g->from + g->base;
    *count = cfg.batch_size;
    if (l->bucket_lengths) {
        void *scratch = malloc(l->bucket_scratch ? l->bucket_scratch : 1);
        if (scratch == NULL) return ZSM_EINVAL;
        int rc = zsm_bucket_indices(&cfg, l->bucket_lengths, l->plan.window, local, out, scratch,
                                    l->bucket_scratch);
        free(scratch);
        return rc;
    }
    return zsm_indices(&cfg, local, out);
}

/* Stream s's flips (if any) on its freshly gathered batch of `step`. */
static int apply_flips(const zld_loader *l, size_t s, uint64_t step, unsigned char *data,
                       uint64_t count, uint64_t record_size)
{
    for (size_t k = 0; k < l->plan.opt.nflips; k++) {
        const zld_flip *f = &l->flips[k];
        if (f->stream != s || f->p <= 0.0) continue;
        uint8_t small[256];
        uint8_t *mask = count <= sizeof small ? small : malloc((size_t)count);
        if (mask == NULL)
            return zr_set_error(ZR_ENOMEM, "loader: out of memory for a flip mask of %llu records",
                                (unsigned long long)count);
        int rc = zld_flip_mask(l, step, f->p, mask, count); /* p checked at create */
        if (rc == ZR_OK)
            zld_flip_records(f, mask, data, count, record_size);
        if (mask != small) free(mask);
        if (rc != ZR_OK) return rc;
    }
    return ZR_OK;
}

static void *pack_alloc(void *ctx, size_t part, size_t bytes)
{
    const zld_loader *l = ctx;
    return pool_get(l->pool, part, bytes);
}

/* Pack mode's batch of `step`: the packer fills the parts from the pool. */
static int build_pack_batch(const zld_loader *l, uint64_t step, zld_batch **out)
{
    const size_t n = l->plan.nstreams + ZLD_PACK_PARTS;
    zld_batch *b = calloc(1, sizeof *b + n * sizeof(zld_part));
    void **parts = malloc(n * sizeof *parts);
    uint64_t *bytes = malloc(n * sizeof *bytes);
    if (b == NULL || parts == NULL || bytes == NULL) {
        free(b);
        free(parts);
        free(bytes);
        return zr_set_error(ZR_ENOMEM, "loader: out of memory for a batch");
    }
    b->step = step;
    b->nstreams = n;
    b->packed = 1;
    zld_pack_batch pb;
    int rc = zld__pack_step(l->packer, l->streams, step, pack_alloc, (void *)l, parts, bytes, &pb);
    for (size_t k = 0; k < n; k++) {
        b->parts[k].data = parts[k];
        b->parts[k].nbytes = bytes[k];
    }
    free(parts);
    free(bytes);
    if (rc != ZR_OK) {
        batch_destroy(b);
        return rc;
    }
    b->count = b->valid = pb.rows;
    b->indices = pb.docs;
    b->pack.rows = pb.rows;
    b->pack.length = l->plan.packset.length;
    b->pack.segments = pb.segments;
    b->pack.max_segments = pb.max_segments;
    b->pack.max_seqlen = pb.max_seqlen;
    b->pack.tokens = pb.tokens;
    *out = b;
    return ZR_OK;
}

/* Build the batch of `step` (no lock held). On failure the calling
 * thread's zr_last_error() says why. */
static int build_batch(const zld_loader *l, uint64_t step, zld_batch **out)
{
    if (l->packer != NULL) return build_pack_batch(l, step, out);
    uint64_t count = l->plan.cfg.batch_size;
    zld_batch *b = calloc(1, sizeof *b + l->plan.nstreams * sizeof(zld_part));
    if (b == NULL)
        return zr_set_error(ZR_ENOMEM, "loader: out of memory for a batch");
    b->step = step;
    b->nstreams = l->plan.nstreams;
    b->indices = malloc(count * sizeof *b->indices);
    if (b->indices == NULL) {
        batch_destroy(b);
        return zr_set_error(ZR_ENOMEM, "loader: out of memory for %llu indices",
                            (unsigned long long)count);
    }
    if (step_indices(l, step, b->indices, &count, &b->valid) != ZSM_OK) {
        batch_destroy(b); /* validated at create: only a bucket scratch allocation can fail */
        return zr_set_error(l->bucket_lengths ? ZR_ENOMEM : ZR_EINVAL,
                            "loader: the sampler refused step %llu%s", (unsigned long long)step,
                            l->bucket_lengths ? " (out of memory for the bucketing scratch)" : "");
    }
    b->count = count;
    for (size_t s = 0; s < l->plan.nstreams; s++) {
        const zld_stream *st = &l->streams[s];
        zld_part *p = &b->parts[s];
        int rc;
        if (st->kind == ZLD_STREAM_DENSE) {
            p->nbytes = count * st->record_size; /* overflow checked */
            p->data = pool_get(l->pool, s, (size_t)p->nbytes);
            if (p->data == NULL) {
                rc = zr_set_error(ZR_ENOMEM,
                                  "loader: out of memory for %llu bytes of stream %zu",
                                  (unsigned long long)p->nbytes, s);
            } else {
                rc = st->gather(st->user, b->indices, count, p->data, p->nbytes, NULL);
                if (rc == ZR_OK)
                    rc = apply_flips(l, s, step, p->data, count, st->record_size);
            }
        } else {
            p->bounds = malloc((count + 1) * sizeof *p->bounds);
            if (p->bounds == NULL) {
                rc = zr_set_error(ZR_ENOMEM,
                                  "loader: out of memory for bounds of stream %zu", s);
            } else {
                rc = st->sizes(st->user, b->indices, count, p->bounds + 1);
            }
            if (rc == ZR_OK) {
                uint64_t total = 0;
                p->bounds[0] = 0;
                for (uint64_t i = 1; i <= count; i++) {
                    if (p->bounds[i] > UINT64_MAX - total) {
                        rc = zr_set_error(ZR_ETOOBIG,
                                          "loader: stream %zu batch exceeds 2^64 bytes", s);
                        break;
                    }
                    total += p->bounds[i];
                    p->bounds[i] = total;
                }
                if (rc == ZR_OK) {
                    p->nbytes = total;
                    p->data = (total <= SIZE_MAX) ? pool_get(l->pool, s, (size_t)total)
                                                   : NULL;
                    if (p->data == NULL)
                        rc = zr_set_error(ZR_ENOMEM,
                                          "loader: out of memory for %llu bytes of stream %zu",
                                          (unsigned long long)total, s);
                    else
                        rc = st->gather(st->user, b->indices, count, p->data, total,
                                        p->bounds);
                }
            }
        }
        if (rc >= 0 && rc != ZR_OK) /* a callback must return 0 or < 0 */
            rc = zr_set_error(ZR_EINVAL, "callback returned %d, expected 0 or < 0", rc);
        if (rc != ZR_OK) {
            /* keep the stream's detail, adding which stream failed */
            char cause[ZLD_ERRMSG_MAX - 64];
            snprintf(cause, sizeof cause, "%s", zr_last_error());
            zr_set_error(rc, "stream %zu (%s): %s", s, st->name, cause);
            batch_destroy(b);
            return rc;
        }
    }
    *out = b;
    return ZR_OK;
}

/* --------------------------------------------------------------- workers */

/* Hint every stream that can take hints about the records of `step`. Only
 * ever a hint: failures (even out of memory) are ignored. */
static void advise_step(const zld_loader *l, uint64_t step)
{
    if (l->packer != NULL) { /* the documents of the step's rows */
        uint64_t *docs = NULL, n = 0;
        if (step < l->plan.steps && zld__pack_step_docs(l->packer, step, &docs, &n) == ZR_OK) {
            for (size_t s = 0; s < l->plan.nstreams; s++)
                if (l->streams[s].advise != NULL)
                    (void)l->streams[s].advise(l->streams[s].user, docs, n);
        }
        free(docs);
        return;
    }
    uint64_t *idx = malloc(l->plan.cfg.batch_size * sizeof *idx);
    if (idx == NULL) return;
    uint64_t count = 0, valid = 0;
    if (step < l->plan.steps && step_indices(l, step, idx, &count, &valid) == ZSM_OK) {
        for (size_t s = 0; s < l->plan.nstreams; s++) {
            if (l->streams[s].advise != NULL)
                (void)l->streams[s].advise(l->streams[s].user, idx, count);
        }
    }
    free(idx);
}

/* ZLD_READAHEAD_AUTO (see auto_wants_hints) is decided at create and again
 * every this many steps, as training reads a store into the page cache
 * (after a first epoch the hints would only cost time) or memory pressure
 * evicts it. A decision samples 64 windows of 64 KiB per store with
 * mincore (tens of microseconds), on a worker. */
#define ZLD_AUTO_RECHECK_STEPS 64u

static int auto_wants_hints(const zld_stream *streams, size_t nstreams);

/* A claimed step's work besides the gather: the steps it must hint and
 * whether it re-decides the adaptive readahead. */
typedef struct zld_claim {
    uint64_t step;
    uint64_t hint_lo, hint_hi; /* steps [hint_lo, hint_hi) to hint */
    int recheck;
} zld_claim;

/* Claim step l->next_claim (lock held). Steps are claimed one at a time,
 * in order: one worker (or the inline consumer) each. */
static zld_claim claim_step(zld_loader *l)
{
    zld_claim c = {l->next_claim++, 0, 0, 0};
    const uint64_t since = c.step - l->plan.opt.start_step;
    c.recheck = l->readahead_auto && since > 0 && since % ZLD_AUTO_RECHECK_STEPS == 0;
    /* Steps [hint_lo, hint_hi) are this claim's to hint: up to step +
     * readahead, from the first one nobody hinted yet. In the steady
     * state that is step + readahead alone; the first claims also cover
     * the steps from the start up to there (the ramp), which would
     * otherwise be read a page fault at a time. */
    if (l->readahead > 0 && l->any_advise) {
        uint64_t hi = c.step >= UINT64_MAX - l->readahead ? UINT64_MAX
                                                          : c.step + l->readahead + 1;
        if (hi > l->plan.steps) hi = l->plan.steps;
        uint64_t lo = l->next_hint > c.step ? l->next_hint : c.step;
        if (lo < hi) {
            c.hint_lo = lo;
            c.hint_hi = hi;
            l->next_hint = hi;
        }
    }
    return c;
}

/* Do a claim's hints and build its batch (no lock held); on failure msg
 * says which step and why. */
static int run_claim(zld_loader *l, const zld_claim *c, zld_batch **b, char *msg, size_t cap)
{
    if (c->recheck) { /* outside the lock: it reads every store's residency */
        unsigned ra = auto_wants_hints(l->streams, l->plan.nstreams) ? l->prefetch : 0;
        zrp_mutex_lock(&l->mu);
        l->readahead = ra; /* from the next claim on */
        zrp_mutex_unlock(&l->mu);
    }
    for (uint64_t h = c->hint_lo; h < c->hint_hi; h++)
        advise_step(l, h);
    int rc = build_batch(l, c->step, b);
    if (rc != ZR_OK)
        snprintf(msg, cap, "step %llu: %s", (unsigned long long)c->step, zr_last_error());
    return rc;
}

/* Record the first failing step (lock held); wakes everyone. */
static void record_failure(zld_loader *l, uint64_t step, int rc, const char *msg)
{
    if (!l->failed || step < l->fail_step) {
        l->failed = 1;
        l->fail_step = step;
        l->fail_status = rc;
        snprintf(l->fail_msg, sizeof l->fail_msg, "%s", msg);
        zrp_cond_broadcast(&l->space); /* idle workers exit */
    }
    zrp_cond_broadcast(&l->ready);
}

static void worker_main(void *arg)
{
    zld_loader *l = arg;
    zre_thread_interrupt((const volatile int *)&l->net_stop);
    zrp_mutex_lock(&l->mu);
    for (;;) {
        while (!l->stop && !l->failed && l->next_claim < l->plan.steps &&
               l->next_claim - l->next_take >= l->prefetch)
            zrp_cond_wait(&l->space, &l->mu);
        if (l->stop || l->failed || l->next_claim >= l->plan.steps) break;
        zld_claim c = claim_step(l);
        zrp_mutex_unlock(&l->mu);

        zld_batch *b = NULL;
        char msg[ZLD_ERRMSG_MAX];
        int rc = run_claim(l, &c, &b, msg, sizeof msg);

        zrp_mutex_lock(&l->mu);
        if (rc == ZR_OK) {
            l->slots[c.step % l->prefetch] = b;
            zrp_cond_broadcast(&l->ready);
        } else {
            record_failure(l, c.step, rc, msg);
        }
    }
    zrp_mutex_unlock(&l->mu);
}

/* Without workers (ZLD_WORKERS_NONE): the consumer builds its step's
 * batch itself, one call at a time (lock held on entry and return;
 * released while building). */
static int take_inline(zld_loader *l, zld_batch **out)
{
    l->building = 1;
    l->next_claim = l->next_take;
    zld_claim c = claim_step(l);
    zrp_mutex_unlock(&l->mu);
    zld_batch *b = NULL;
    char msg[ZLD_ERRMSG_MAX];
    int rc = run_claim(l, &c, &b, msg, sizeof msg);
    zrp_mutex_lock(&l->mu);
    l->building = 0;
    zrp_cond_broadcast(&l->ready);
    if (rc != ZR_OK) {
        record_failure(l, c.step, rc, msg);
        return zr_set_error(ZR_ESTATE, "%s", l->fail_msg);
    }
    if (l->stop) {
        batch_destroy(b);
        return zr_set_error(ZR_ECLOSED, "zld_next: the loader is closed");
    }
    *out = b;
    l->next_take++;
    return ZR_OK;
}

/* ---------------------------------------------------------------- create */

static int check_sampler(const zsm_config *c)
{
    if (zsm_validate(c) == ZSM_OK) return ZR_OK;
    if (c->batch_size == 0)
        return zr_set_error(ZR_EINVAL, "zld_create: batch_size must be >= 1, got 0");
    if (c->world_size == 0)
        return zr_set_error(ZR_EINVAL, "zld_create: world_size must be >= 1, got 0");
    if (c->rank >= c->world_size)
        return zr_set_error(ZR_EINVAL, "zld_create: rank %u must be < world_size %u",
                            (unsigned)c->rank, (unsigned)c->world_size);
    if (zsm_mode_name(c->mode) == NULL)
        return zr_set_error(ZR_EINVAL, "zld_create: unknown sampler mode %d",
                            (int)c->mode);
    if (c->batch_size > UINT64_MAX / c->world_size)
        return zr_set_error(ZR_EINVAL,
                            "zld_create: batch_size %llu * world_size %u overflows",
                            (unsigned long long)c->batch_size, (unsigned)c->world_size);
    if (c->mode == ZSM_CYCLIC)
        return zr_set_error(ZR_EINVAL,
                            "zld_create: cyclic mode needs batch_size * world_size "
                            "(%llu * %u) <= length %llu",
                            (unsigned long long)c->batch_size, (unsigned)c->world_size,
                            (unsigned long long)c->length);
    return zr_set_error(ZR_EINVAL, "zld_create: the sampler refused the options");
}

/* Free a loader whose workers are stopped (or never started), also one
 * that create left half-built: every field is NULL or whole, and
 * sync_ready counts the lock and conditions that were initialised. */
static void loader_destroy(zld_loader *l)
{
    if (l->slots) {
        for (unsigned i = 0; i < l->prefetch; i++) batch_destroy(l->slots[i]);
    }
    pool_close(l->pool); /* after the slots: their buffers were kept */
    free(l->slots);
    free(l->threads);
    free(l->streams);
    free(l->names);
    free(l->bucket_lengths);
    free(l->flips);
    zld__packer_free(l->packer);
    free(l->labels);
    free(l->label_ptrs);
    if (l->sync_ready >= 4) zrp_cond_destroy(&l->idle);
    if (l->sync_ready >= 3) zrp_cond_destroy(&l->ready);
    if (l->sync_ready >= 2) zrp_cond_destroy(&l->space);
    if (l->sync_ready >= 1) zrp_mutex_destroy(&l->mu);
    free(l);
}

/* Stop and join every started worker. */
static void stop_workers(zld_loader *l)
{
    zrp_mutex_lock(&l->mu);
    l->stop = 1;
    zrp_cond_broadcast(&l->space);
    zrp_cond_broadcast(&l->ready);
    /* A consumer blocked in zld_next leaves with ZR_ECLOSED; wait for it
     * before anything is freed. */
    while (l->consumers > 0) zrp_cond_wait(&l->idle, &l->mu);
    /* Take the thread list under the lock so a second stop joins nothing. */
    unsigned n = l->nthreads;
    l->nthreads = 0;
    zrp_mutex_unlock(&l->mu);
    /* Stores at URLs: a worker waiting on a download stops at once
     * (ZR_EINTR) instead of after its retries, so closing never waits for
     * the network; other loaders of the same stores go on. */
    atomic_store(&l->net_stop, 1);
    for (unsigned i = 0; i < n; i++) zrp_thread_join(l->threads[i]);
    atomic_store(&l->net_stop, 0);
}

/* Store adapters: the loader's indices are < length <= INT64_MAX (checked
 * at create), and signed and unsigned variants of one type may alias. */
static int store_gather(void *user, const uint64_t *index, uint64_t count, void *dst,
                        uint64_t dst_capacity, const uint64_t *bounds)
{
    zrs_store *st = user;
    if (bounds == NULL)
        return zrs_gather_dense(st, (const int64_t *)index, count, dst, dst_capacity);
    return zrs_gather_ragged(st, (const int64_t *)index, count, dst, dst_capacity, bounds);
}

static int store_sizes(void *user, const uint64_t *index, uint64_t count, uint64_t *sizes)
{
    return zrs_ragged_sizes(user, (const int64_t *)index, count, sizes);
}

static int store_advise(void *user, const uint64_t *index, uint64_t count)
{
    return zrs_advise(user, (const int64_t *)index, count);
}

zrs_store *zld__stream_store(const zld_stream *st)
{
    return st->advise == store_advise ? st->user : NULL;
}

/* Lifetime: a loader holds what every stream reads, through the
 * stream's hooks (zld_stream: a store's, concatenation's and mixture's are
 * borrows), from create to close, so closing one of them under it frees
 * nothing the workers use: their reads fail with ZR_ECLOSED, and so does
 * zld_next (no batch prepared before is handed out). */
static void release_streams(const zld_stream *streams, size_t n)
{
    for (size_t s = 0; s < n; s++)
        if (streams[s].hold != NULL && streams[s].release != NULL)
            streams[s].release(streams[s].user);
}

static int hold_streams(const zld_stream *streams, size_t nstreams)
{
    for (size_t s = 0; s < nstreams; s++) {
        int rc = streams[s].hold != NULL ? streams[s].hold(streams[s].user) : ZR_OK;
        if (rc < 0) {
            char msg[ZLD_ERRMSG_MAX - 64];
            snprintf(msg, sizeof msg, "%s", zr_last_error());
            release_streams(streams, s);
            return zr_set_error(rc, "zld_create: stream %zu: %s", s, msg);
        }
    }
    return ZR_OK;
}

/* 1 with the detail set (ZR_ECLOSED naming the stream and what was
 * closed) once something a stream reads was closed, else 0. */
static int streams_closed(const zld_loader *l, const char *what)
{
    char msg[ZLD_ERRMSG_MAX - 64];
    for (size_t s = 0; s < l->plan.nstreams; s++) {
        const zld_stream *st = &l->streams[s];
        msg[0] = '\0';
        if (st->closed == NULL || !st->closed(st->user, msg, sizeof msg))
            continue;
        zr_set_error(ZR_ECLOSED, "%s: stream %zu: %s", what, s, msg);
        return 1;
    }
    return 0;
}

/* A store stream's hooks (zld_stream_from_store). */
static int store_hold(void *user) { return zrs_borrow(user); }
static void store_release(void *user) { zrs_unborrow(user); }
static int store_closed(void *user, char *msg, size_t cap)
{
    if (!zrs_is_closed(user))
        return 0;
    snprintf(msg, cap, "store '%s' was closed while this loader read it", zrs_path(user));
    return 1;
}

/* ZLD_READAHEAD_AUTO: hint unless the hinted streams' bytes are already in
 * the page cache. Where the OS reports residency, hints go on when less
 * than ZLD_AUTO_CACHED of the stored bytes are cached (a store read cold
 * stalls on every miss: 2.9x slower on a throttled device, while hints on
 * cached pages cost a warm loader about a third of its speed); elsewhere
 * by size, when the bytes exceed half of physical memory (they cannot all
 * stay cached). A stream with its own advise callback cannot be sized:
 * hinted. */
#define ZLD_AUTO_CACHED 0.95

static int auto_wants_hints(const zld_stream *streams, size_t nstreams)
{
    uint64_t total = 0;
    double cached = 0;
    int known = 1;
    for (size_t s = 0; s < nstreams; s++) {
        if (streams[s].advise == NULL)
            continue;
        uint64_t b = 0;
        double f = 0;
        int rc;
        if (streams[s].advise == store_advise) {
            b = zrs_data_bytes(streams[s].user);
            rc = zrs_resident_fraction(streams[s].user, &f);
        } else if (!zld__stream_bytes(&streams[s], &b, &f, &rc)) { /* shards.c */
            return 1;
        }
        known &= rc == ZR_OK;
        cached += f * (double)b;
        total = total > UINT64_MAX - b ? UINT64_MAX : total + b;
    }
    if (total == 0)
        return 0;
    if (known)
        return cached < ZLD_AUTO_CACHED * (double)total;
    uint64_t ram = zrp_physical_memory();
    if (ram == 0) /* unknown: hints are harmless, stalls are not */
        return 1;
    return total > ram / 2;
}

int zld_stream_from_store(zld_stream *out, zrs_store *store)
{
    if (out == NULL || store == NULL)
        return zr_set_error(ZR_EINVAL, "zld_stream_from_store: %s is NULL",
                            out == NULL ? "out" : "store");
    memset(out, 0, sizeof *out);
    out->user = store;
    out->name = zrs_path(store);
    out->length = zrs_length(store);
    if (zrs_get_kind(store) == ZRS_DENSE) {
        out->kind = ZLD_STREAM_DENSE;
        out->record_size = zrs_record_size(store);
    } else {
        out->kind = ZLD_STREAM_RAGGED;
        out->sizes = store_sizes;
    }
    out->gather = store_gather;
    out->advise = store_advise;
    out->hold = store_hold;
    out->release = store_release;
    out->closed = store_closed;
    return ZR_OK;
}

int zld_create(zld_loader **out, zrs_store *const *streams, size_t nstreams,
               const zld_options *options)
{
    if (out == NULL)
        return zr_set_error(ZR_EINVAL, "zld_create: out is NULL");
    *out = NULL;
    if (streams == NULL || nstreams == 0)
        return zr_set_error(ZR_EINVAL, "zld_create: no streams, expected at least 1");
    if (nstreams > SIZE_MAX / sizeof(zld_stream))
        return zr_set_error(ZR_EINVAL, "zld_create: %zu streams are too many", nstreams);
    zld_stream *desc = malloc(nstreams * sizeof *desc);
    if (desc == NULL)
        return zr_set_error(ZR_ENOMEM, "zld_create: out of memory");
    for (size_t s = 0; s < nstreams; s++) {
        if (streams[s] == NULL) {
            free(desc);
            return zr_set_error(ZR_EINVAL, "zld_create: stream %zu is NULL", s);
        }
        (void)zld_stream_from_store(&desc[s], streams[s]);
    }
    int rc = zld_create_streams(out, desc, nstreams, options);
    free(desc);
    return rc;
}

/* zld_create_streams runs in four phases, each of which either succeeds
 * or leaves nothing behind: check the streams, normalise the options into
 * a plan (every options->version check, every limit, the resume check),
 * allocate the loader (any failure frees it through loader_destroy), and
 * start the workers. A new option goes into copy_options (its version)
 * and a plan_* step; nothing after normalise_options reads `options`. */

/* Phase 1: the streams are usable and index-aligned. */
static int check_streams(const zld_stream *streams, size_t nstreams, zld_plan *p)
{
    if (streams == NULL || nstreams == 0)
        return zr_set_error(ZR_EINVAL, "zld_create: no streams, expected at least 1");
    if (nstreams > SIZE_MAX / sizeof(zld_stream) / 2)
        return zr_set_error(ZR_EINVAL, "zld_create: %zu streams are too many", nstreams);
    size_t names_len = 0;
    for (size_t s = 0; s < nstreams; s++) {
        const zld_stream *st = &streams[s];
        const char *nm = st->name ? st->name : "";
        if (st->gather == NULL)
            return zr_set_error(ZR_EINVAL, "zld_create: stream %zu (%s) has no gather callback",
                                s, nm);
        if (st->kind == ZLD_STREAM_DENSE && st->record_size == 0)
            return zr_set_error(ZR_EINVAL, "zld_create: dense stream %zu (%s) has record_size 0",
                                s, nm);
        if (st->kind == ZLD_STREAM_RAGGED && st->sizes == NULL)
            return zr_set_error(ZR_EINVAL, "zld_create: ragged stream %zu (%s) has no sizes "
                                "callback", s, nm);
        if (st->kind != ZLD_STREAM_DENSE && st->kind != ZLD_STREAM_RAGGED)
            return zr_set_error(ZR_EINVAL, "zld_create: stream %zu (%s) has unknown kind %d",
                                s, nm, (int)st->kind);
        if (st->length != streams[0].length)
            return zr_set_error(ZR_EINVAL,
                                "zld_create: streams must be index-aligned, but stream 0 "
                                "(%s) has %llu records and stream %zu (%s) has %llu",
                                streams[0].name ? streams[0].name : "",
                                (unsigned long long)streams[0].length, s, nm,
                                (unsigned long long)st->length);
        names_len += strlen(nm) + 1;
    }
    if (streams[0].length == 0)
        return zr_set_error(ZR_EINVAL, "zld_create: stream 0 (%s) is empty",
                            streams[0].name ? streams[0].name : "");
    if (streams[0].length > (uint64_t)INT64_MAX)
        return zr_set_error(ZR_EINVAL, "zld_create: %llu records exceed INT64_MAX",
                            (unsigned long long)streams[0].length);
    p->nstreams = nstreams;
    p->length = streams[0].length;
    p->names_len = names_len;
    return ZR_OK;
}

int zld_options_init(zld_options *opts, int version)
{
    if (opts == NULL)
        return zr_set_error(ZR_EINVAL, "zld_options_init: opts is NULL");
    /* Where each version's fields end. */
    _Static_assert(ZLD_OPTIONS_VERSION == 7, "a new options version: add where its fields end");
    static const size_t ends[ZLD_OPTIONS_VERSION + 1] = {
        0,
        offsetof(zld_options, readahead),      /* 1 */
        offsetof(zld_options, pass),           /* 2 */
        offsetof(zld_options, bucket_lengths), /* 3 */
        offsetof(zld_options, flips),          /* 4 */
        offsetof(zld_options, names),          /* 5 */
        offsetof(zld_options, pack),           /* 6 */
        sizeof(zld_options),                   /* 7 */
    };
    if (version < 1 || version > ZLD_OPTIONS_VERSION)
        return zr_set_error(ZR_EINVAL, "zld_options_init: options version %d, expected 1 to %d",
                            version, ZLD_OPTIONS_VERSION);
    const zld_options init = ZLD_OPTIONS_INIT;
    memcpy(opts, &init, ends[version]);
    opts->version = version;
    return ZR_OK;
}

/* Phase 2a: a caller's options, field by field up to its version (an
 * older caller's struct ends before the later fields), every later field
 * at its ZLD_OPTIONS_INIT default. The only place that reads
 * options->version. */
static int copy_options(const zld_options *in, zld_options *o)
{
    if (in->version < 1 || in->version > ZLD_OPTIONS_VERSION)
        return zr_set_error(ZR_EINVAL,
                            "zld_create: options version %d, expected %d "
                            "(start from ZLD_OPTIONS_INIT)",
                            in->version, ZLD_OPTIONS_VERSION);
    const zld_options init = ZLD_OPTIONS_INIT;
    *o = init;
    o->batch_size = in->batch_size;
    o->mode = in->mode;
    o->seed = in->seed;
    o->start_step = in->start_step;
    o->rank = in->rank;
    o->world_size = in->world_size;
    o->num_workers = in->num_workers;
    o->prefetch = in->prefetch;
    if (in->version >= 2)
        o->readahead = in->readahead;
    if (in->version >= 3) {
        o->pass = in->pass != 0;
        o->shuffle = o->pass && in->shuffle != 0;
        o->drop_last = o->pass && in->drop_last != 0;
        o->epoch = o->pass ? in->epoch : 0;
    }
    if (in->version >= 4 && in->bucket_lengths != NULL) {
        o->bucket_lengths = in->bucket_lengths;
        o->bucket_count = in->bucket_count;
        o->bucket_window = in->bucket_window ? in->bucket_window : ZLD_BUCKET_WINDOW_DEFAULT;
    }
    if (in->version >= 5 && in->nflips > 0) {
        o->flips = in->flips;
        o->nflips = in->nflips;
    }
    if (in->version >= 6) {
        o->names = in->names;
        o->resume = in->resume;
        o->resume_flags = in->resume_flags;
        o->even_batches = o->pass && in->even_batches != 0;
    }
    if (in->version >= 7 && in->pack) {
        o->pack = 1;
        o->pack_policy = in->pack_policy;
        o->pack_length = in->pack_length;
        o->pack_window = in->pack_window ? in->pack_window : ZSM_PACK_WINDOW_DEFAULT;
        o->pack_overlong = in->pack_overlong;
    }
    return ZR_OK;
}

/* Phase 2b: the sampler, or the finite pass. */
static int plan_sampler(zld_plan *p)
{
    const zld_options *o = &p->opt;
    zsm_config *cfg = &p->cfg;
    cfg->length = p->length;
    cfg->batch_size = o->batch_size;
    cfg->seed = o->seed;
    /* A pass, or pack mode (whose batches are rows, not records): the
     * shared checks only. */
    cfg->mode = o->pass || o->pack ? ZSM_SEQUENTIAL : o->mode;
    cfg->rank = o->rank;
    cfg->world_size = o->world_size;
    int rc = check_sampler(cfg);
    if (rc != ZR_OK) return rc;
    p->finite = o->pass;
    p->steps = UINT64_MAX;
    if (p->finite) {
        zsm_pass *ps = &p->pass;
        ps->length = p->seg[p->nseg - 1].length;
        ps->batch_size = o->batch_size;
        ps->seed = o->seed;
        ps->epoch = o->epoch;
        ps->rank = o->rank;
        ps->world_size = o->world_size;
        ps->shuffle = o->shuffle;
        ps->drop_last = o->drop_last;
        p->steps = p->own_steps = zsm_pass_steps(ps);
        p->even = o->even_batches;
        if (p->even) { /* every rank as many steps as rank 0, which has the most */
            const uint64_t g = ps->batch_size * ps->world_size;
            p->steps = ps->length / g + (ps->length % g != 0 && !ps->drop_last);
            zsm_pass first = *ps;
            uint64_t n = 0;
            first.rank = 0;
            first.world_size = 1;
            first.batch_size = 1;
            if (zsm_pass_indices(&first, 0, &p->pad_index, &n) != ZSM_OK)
                return zr_set_error(ZR_EINVAL, "zld_create: the sampler refused the pass");
        }
    }
    if (o->start_step > p->steps && p->finite && !o->pack) /* pack: checked at alloc */
        return zr_set_error(ZR_EINVAL, "zld_create: start_step %llu is past the pass's %llu steps",
                            (unsigned long long)o->start_step, (unsigned long long)p->steps);
    return ZR_OK;
}

/* Phase 2c: length bucketing. */
static int plan_bucket(zld_plan *p)
{
    const zld_options *o = &p->opt;
    p->bucket = o->bucket_lengths != NULL;
    p->window = o->bucket_window;
    if (!p->bucket) return ZR_OK;
    if (p->finite)
        return zr_set_error(ZR_EINVAL, "zld_create: length bucketing is for endless steps, not a "
                            "finite pass");
    if (p->cfg.mode != ZSM_CYCLIC)
        return zr_set_error(ZR_EINVAL, "zld_create: length bucketing builds on the cyclic mode, "
                            "got mode %s", zsm_mode_name(p->cfg.mode));
    if (o->bucket_count != p->length)
        return zr_set_error(ZR_EINVAL, "zld_create: bucket_lengths holds %llu lengths for %llu "
                            "records (one per record)", (unsigned long long)o->bucket_count,
                            (unsigned long long)p->length);
    if (p->length > SIZE_MAX / sizeof(uint32_t) ||
        p->window > UINT64_MAX / p->cfg.batch_size / p->cfg.world_size)
        return zr_set_error(ZR_EINVAL, "zld_create: bucket window %llu is too large",
                            (unsigned long long)p->window);
    return ZR_OK;
}

/* Phase 2c': pack mode, the checks that need no data (the documents'
 * lengths are read at alloc). */
static int plan_pack(zld_plan *p, const zld_stream *streams)
{
    const zld_options *o = &p->opt;
    p->pack = o->pack;
    if (!p->pack) return ZR_OK;
    if (p->bucket)
        return zr_set_error(ZR_EINVAL, "zld_create: pack mode and length bucketing exclude each "
                            "other");
    if (o->nflips > 0)
        return zr_set_error(ZR_EINVAL, "zld_create: flips apply to dense streams; pack mode has "
                            "none");
    if (o->even_batches)
        return zr_set_error(ZR_EINVAL, "zld_create: even_batches does not apply to pack mode "
                            "(every rank's pass has the rows it has)");
    if (!p->finite && o->mode != ZSM_CYCLIC)
        return zr_set_error(ZR_EINVAL, "zld_create: pack mode draws each epoch's documents in an "
                            "order keyed by (seed, epoch): mode must be cyclic, got %s (a finite "
                            "pass packs in index order without shuffle)",
                            zsm_mode_name(o->mode) ? zsm_mode_name(o->mode) : "unknown");
    if (zsm_pack_policy_name(o->pack_policy) == NULL)
        return zr_set_error(ZR_EINVAL, "zld_create: unknown pack_policy %d; expected first_fit, "
                            "best_fit or concat", (int)o->pack_policy);
    if (zsm_pack_overlong_name(o->pack_overlong) == NULL)
        return zr_set_error(ZR_EINVAL, "zld_create: unknown pack_overlong %d; expected split, "
                            "truncate or drop", (int)o->pack_overlong);
    if (o->pack_length == 0 || o->pack_length > ZSM_PACK_MAX_LENGTH)
        return zr_set_error(ZR_EINVAL, "zld_create: pack_length must be 1..%u, got %llu",
                            ZSM_PACK_MAX_LENGTH, (unsigned long long)o->pack_length);
    if (o->pack_window > ZSM_PACK_MAX_WINDOW)
        return zr_set_error(ZR_EINVAL, "zld_create: pack_window must be 1..%u, got %llu",
                            ZSM_PACK_MAX_WINDOW, (unsigned long long)o->pack_window);
    if (o->batch_size > (uint64_t)INT32_MAX / o->pack_length)
        return zr_set_error(ZR_EINVAL, "zld_create: batch_size %llu * pack_length %llu must stay "
                            "below 2^31 (positions and cu_seqlens are int32)",
                            (unsigned long long)o->batch_size, (unsigned long long)o->pack_length);
    for (size_t s = 0; s < p->nstreams; s++)
        if (streams[s].kind != ZLD_STREAM_RAGGED)
            return zr_set_error(ZR_EINVAL, "zld_create: stream %zu (%s) is dense; pack mode packs "
                                "ragged streams (token records and any aligned ones)", s,
                                streams[s].name ? streams[s].name : "");
    zld_pack_setup *ps = &p->packset;
    ps->policy = o->pack_policy;
    ps->overlong = o->pack_overlong;
    ps->length = o->pack_length;
    ps->window = o->pack_window;
    ps->seed = o->seed;
    ps->shuffle = p->finite ? o->shuffle : 1;
    ps->batch_size = o->batch_size;
    ps->rank = o->rank;
    ps->world_size = o->world_size;
    ps->finite = p->finite;
    ps->epoch = o->epoch;
    ps->drop_last = o->drop_last;
    return ZR_OK;
}

/* Phase 2d: what the buffers, flips, labels and flags must fit. */
static int plan_limits(zld_plan *p, const zld_stream *streams)
{
    const zld_options *o = &p->opt;
    const uint64_t b = p->cfg.batch_size;
    if (b > UINT64_MAX / sizeof(uint64_t) - 1)
        return zr_set_error(ZR_EINVAL, "zld_create: batch_size %llu is too large",
                            (unsigned long long)b);
    for (size_t s = 0; s < p->nstreams; s++) {
        uint64_t rs = streams[s].record_size;
        if (streams[s].kind == ZLD_STREAM_DENSE && b > (uint64_t)SIZE_MAX / rs)
            return zr_set_error(ZR_EINVAL,
                                "zld_create: stream %zu (%s): batch_size %llu * record "
                                "size %llu bytes exceeds the address space",
                                s, streams[s].name ? streams[s].name : "",
                                (unsigned long long)b, (unsigned long long)rs);
    }
    if (o->nflips > 0) {
        int rc = zld_flips_check(o->flips, o->nflips, streams, p->nstreams);
        if (rc != ZR_OK) return rc;
    }
    if (o->num_workers > ZLD_MAX_WORKERS && o->num_workers != ZLD_WORKERS_NONE)
        return zr_set_error(ZR_EINVAL, "zld_create: num_workers must be <= %u (or "
                            "ZLD_WORKERS_NONE), got %u", ZLD_MAX_WORKERS, o->num_workers);
    if (o->prefetch > ZLD_MAX_PREFETCH)
        return zr_set_error(ZR_EINVAL, "zld_create: prefetch must be <= %u batches, got %u",
                            ZLD_MAX_PREFETCH, o->prefetch);
    if (o->readahead > ZLD_MAX_READAHEAD && o->readahead != ZLD_READAHEAD_AUTO)
        return zr_set_error(ZR_EINVAL, "zld_create: readahead must be <= %u steps (or "
                            "ZLD_READAHEAD_AUTO), got %u", ZLD_MAX_READAHEAD, o->readahead);
    if (o->resume_flags & ~ZLD_RESUME_ALLOW_GROWN)
        return zr_set_error(ZR_EINVAL, "zld_create: unknown resume_flags 0x%x",
                            o->resume_flags & ~ZLD_RESUME_ALLOW_GROWN);
    p->labels_len = 0;
    for (size_t s = 0; o->names != NULL && s < p->nstreams; s++)
        p->labels_len += strlen(zld__label(p, streams, s)) + 1;
    return ZR_OK;
}

/* Phase 2e: workers, ring and readahead. */
static void plan_threads(zld_plan *p, const zld_stream *streams)
{
    zld_options *o = &p->opt;
    if (o->num_workers == ZLD_WORKERS_NONE) { /* the consumer builds its batches */
        o->prefetch = 1;
        p->readahead_auto = o->readahead == ZLD_READAHEAD_AUTO;
        p->readahead = !p->readahead_auto ? o->readahead
                       : auto_wants_hints(streams, p->nstreams) ? 1 : 0;
        p->nthreads = 0;
        return;
    }
    if (o->num_workers == 0) o->num_workers = zrp_cpu_count();
    if (o->num_workers == 0) o->num_workers = 1;
    if (o->prefetch == 0)
        o->prefetch = o->num_workers > UINT32_MAX / 2 ? UINT32_MAX : 2 * o->num_workers;
    if (o->prefetch == 0) o->prefetch = 1;
    p->readahead_auto = o->readahead == ZLD_READAHEAD_AUTO;
    p->readahead = !p->readahead_auto ? o->readahead
                   : auto_wants_hints(streams, p->nstreams) ? o->prefetch : 0;
    /* More workers than slots could never all be busy. */
    p->nthreads = o->num_workers < o->prefetch ? o->num_workers : o->prefetch;
}

/* Phase 2: the options, normalised into *p. */
static int normalise_options(const zld_options *options, const zld_stream *streams, zld_plan *p)
{
    if (options == NULL)
        return zr_set_error(ZR_EINVAL, "zld_create: options is NULL");
    int rc = copy_options(options, &p->opt);
    p->seg[0] = (zld_segment){0, p->length, 0};
    p->nseg = 1;
    if (rc == ZR_OK) rc = plan_sampler(p);
    if (rc == ZR_OK) rc = plan_bucket(p);
    if (rc == ZR_OK) rc = plan_pack(p, streams);
    if (rc == ZR_OK) rc = plan_limits(p, streams);
    if (rc == ZR_OK && p->opt.resume != NULL) {
        /* The state sets start_step and the segments; the pass (if any)
         * keeps the length it was saved with. */
        rc = zld__state_resume(p, streams);
        if (rc == ZR_OK) rc = plan_sampler(p);
        for (size_t k = 0; rc == ZR_OK && k < p->nseg; k++) {
            zsm_config c = p->cfg;
            c.length = p->seg[k].length;
            rc = check_sampler(&c);
        }
    }
    if (rc != ZR_OK) return rc;
    plan_threads(p, streams);
    return ZR_OK;
}

/* Phase 3: the loader and its copies of the streams and option arrays.
 * On failure everything goes through loader_destroy. */
static int loader_alloc(zld_loader **out, const zld_plan *p, const zld_stream *streams)
{
    zld_loader *l = calloc(1, sizeof *l);
    if (l == NULL) return zr_set_error(ZR_ENOMEM, "zld_create: out of memory");
    l->plan = *p;
    l->plan.opt.resume = NULL; /* borrowed for the call only */
    l->plan.opt.resume_flags = 0;
    if (zrp_mutex_init(&l->mu) == 0 && ++l->sync_ready && zrp_cond_init(&l->space) == 0 &&
        ++l->sync_ready && zrp_cond_init(&l->ready) == 0 && ++l->sync_ready &&
        zrp_cond_init(&l->idle) == 0)
        ++l->sync_ready;
    const size_t n = p->nstreams, nflips = p->opt.nflips;
    l->prefetch = p->opt.prefetch;
    l->streams = malloc(n * sizeof *l->streams);
    l->names = malloc(p->names_len);
    l->slots = calloc(p->opt.prefetch, sizeof *l->slots);
    l->threads = calloc(p->nthreads ? p->nthreads : 1, sizeof *l->threads);
    /* Keep enough free buffers per stream for the ring plus the caller's
     * batch in use and one in flight back; beyond that they are freed. */
    unsigned keep = p->opt.prefetch > UINT32_MAX - 2 ? UINT32_MAX : p->opt.prefetch + 2;
    l->pool = pool_new(streams, n, n + (p->pack ? ZLD_PACK_PARTS : 0), p->pack, p->cfg.batch_size,
                       keep);
    if (p->bucket) l->bucket_lengths = malloc((size_t)p->length * sizeof(uint32_t));
    if (nflips > 0) l->flips = malloc(nflips * sizeof *l->flips);
    if (p->labels_len > 0) {
        l->labels = malloc(p->labels_len);
        l->label_ptrs = malloc(n * sizeof *l->label_ptrs);
    }
    if (l->sync_ready < 4 || !l->streams || !l->names || !l->slots || !l->threads || !l->pool ||
        (p->bucket && !l->bucket_lengths) || (nflips > 0 && !l->flips) ||
        (p->labels_len > 0 && (!l->labels || !l->label_ptrs))) {
        loader_destroy(l);
        return zr_set_error(ZR_ENOMEM, "zld_create: out of memory%s",
                            l->sync_ready < 4 ? " (a lock or condition)" : "");
    }
    memcpy(l->streams, streams, n * sizeof *l->streams);
    char *np = l->names, *lp = l->labels;
    for (size_t s = 0; s < n; s++) {
        if (lp != NULL) { /* the labels first: they may point at the stream names */
            const char *lab = zld__label(p, streams, s);
            size_t k = strlen(lab) + 1;
            memcpy(lp, lab, k);
            l->label_ptrs[s] = lp;
            lp += k;
        }
        const char *nm = streams[s].name ? streams[s].name : "";
        size_t k = strlen(nm) + 1;
        memcpy(np, nm, k);
        l->streams[s].name = np;
        np += k;
        if (streams[s].advise != NULL) l->any_advise = 1;
    }
    l->plan.opt.names = l->label_ptrs;
    if (p->bucket) {
        memcpy(l->bucket_lengths, p->opt.bucket_lengths, (size_t)p->length * sizeof(uint32_t));
        l->plan.opt.bucket_lengths = l->bucket_lengths;
        l->bucket_scratch = zsm_bucket_scratch_bytes(&p->cfg, p->window);
    }
    if (nflips > 0) {
        memcpy(l->flips, p->opt.flips, nflips * sizeof *l->flips);
        l->plan.opt.flips = l->flips;
    }
    l->readahead = p->readahead;
    l->readahead_auto = p->readahead_auto;
    l->next_claim = l->next_hint = l->next_take = p->opt.start_step;
    if (p->pack) { /* the documents' lengths (every record's size), the pass's rows */
        int rc = zld__packer_new(&l->packer, &p->packset, streams, n);
        if (rc == ZR_OK && p->finite) {
            l->plan.steps = zld__packer_steps(l->packer);
            if (p->opt.start_step > l->plan.steps)
                rc = zr_set_error(ZR_EINVAL, "zld_create: start_step %llu is past the pass's %llu "
                                  "steps", (unsigned long long)p->opt.start_step,
                                  (unsigned long long)l->plan.steps);
        }
        if (rc != ZR_OK) {
            loader_destroy(l);
            return rc;
        }
    }
    *out = l;
    return ZR_OK;
}

/* Phase 4: the workers. On failure the started ones are stopped and the
 * loader freed. */
static int start_workers(zld_loader *l)
{
    for (unsigned i = 0; i < l->plan.nthreads; i++) {
        int trc = zrp_thread_start(&l->threads[i], worker_main, l);
        if (trc != 0) {
            stop_workers(l);
            loader_destroy(l);
            return zr_set_error(ZR_ENOMEM,
                                "zld_create: cannot start worker thread %u of %u (error %d)",
                                i, l->plan.nthreads, trc);
        }
        l->nthreads = i + 1;
    }
    return ZR_OK;
}

int zld_create_streams(zld_loader **out, const zld_stream *streams, size_t nstreams,
                       const zld_options *options)
{
    if (out == NULL)
        return zr_set_error(ZR_EINVAL, "zld_create: out is NULL");
    *out = NULL;
    zld_plan plan;
    memset(&plan, 0, sizeof plan);
    zld_loader *l = NULL;
    if (options == NULL)
        return zr_set_error(ZR_EINVAL, "zld_create: options is NULL");
    int held = 0;
    if (streams != NULL && nstreams > 0 && nstreams <= SIZE_MAX / sizeof(zld_stream) / 2) {
        int hrc = hold_streams(streams, nstreams); /* ZR_ECLOSED for a closed store */
        if (hrc != ZR_OK)
            return hrc;
        held = 1;
    }
    int rc = check_streams(streams, nstreams, &plan);
    if (rc == ZR_OK) rc = normalise_options(options, streams, &plan);
    if (rc == ZR_OK) rc = loader_alloc(&l, &plan, streams);
    if (rc == ZR_OK) rc = start_workers(l);
    if (rc != ZR_OK) {
        if (held)
            release_streams(streams, nstreams);
        return rc;
    }
    l->held = 1;
    *out = l;
    return rc;
}

int zld_pack_item_shape(const zld_loader *l, size_t stream, uint64_t *dims, size_t *ndim)
{
    if (l == NULL || dims == NULL || ndim == NULL)
        return zr_set_error(ZR_EINVAL, "zld_pack_item_shape: NULL argument");
    if (l->packer == NULL)
        return zr_set_error(ZR_EINVAL, "zld_pack_item_shape: the loader is not in pack mode");
    if (zld__packer_item_shape(l->packer, stream, dims, ndim) != ZR_OK)
        return zr_set_error(ZR_EINVAL, "zld_pack_item_shape: stream %zu of %zu", stream,
                            l->plan.nstreams);
    return ZR_OK;
}

/* ------------------------------------------------------------ the state */

int zld_state_json(zld_loader *l, char **out)
{
    if (out != NULL) *out = NULL;
    if (l == NULL || out == NULL)
        return zr_set_error(ZR_EINVAL, "zld_state_json: %s is NULL", l == NULL ? "loader" : "out");
    uint64_t step = zld_next_step(l);
    return zld__state_text(&l->plan, l->streams, step, out);
}

void zld_state_free(char *text) { free(text); }

const char *zld_resume_note(const zld_loader *l) { return l ? l->plan.note : ""; }

/* ------------------------------------------------------------ consuming */

/* zld_next (timed 0: no limit) and zld_next_wait (at most timeout_ns). */
static int next_batch(zld_loader *l, zld_batch **out, uint64_t timeout_ns, int timed)
{
    if (out == NULL) return zr_set_error(ZR_EINVAL, "zld_next: out is NULL");
    *out = NULL;
    if (l == NULL) return zr_set_error(ZR_EINVAL, "zld_next: loader is NULL");

    int rc = ZR_OK;
    uint64_t start = timed ? zrp_now_ns() : 0;
    zrp_mutex_lock(&l->mu);
    l->consumers++;
    for (;;) {
        if (l->stop) {
            rc = zr_set_error(ZR_ECLOSED, "zld_next: the loader is closed");
            break;
        }
        if (streams_closed(l, "zld_next")) {
            rc = ZR_ECLOSED;
            break;
        }
        if (l->plan.nthreads == 0 && !l->building && !l->failed && l->next_take < l->plan.steps) {
            rc = take_inline(l, out);
            break;
        }
        zld_batch **slot = &l->slots[l->next_take % l->prefetch];
        if (*slot != NULL && (*slot)->step == l->next_take) {
            *out = *slot;
            *slot = NULL;
            l->next_take++;
            zrp_cond_signal(&l->space);
            break;
        }
        if (l->failed && l->fail_step == l->next_take) {
            rc = zr_set_error(ZR_ESTATE, "%s", l->fail_msg);
            break;
        }
        if (l->next_take >= l->plan.steps) {
            rc = ZLD_END;
            break;
        }
        if (!timed) {
            zrp_cond_wait(&l->ready, &l->mu);
            continue;
        }
        uint64_t spent = zrp_now_ns() - start;
        if (spent >= timeout_ns) {
            rc = ZLD_TIMEOUT;
            break;
        }
        (void)zrp_cond_timedwait(&l->ready, &l->mu, timeout_ns - spent);
    }
    l->consumers--;
    if (l->stop && l->consumers == 0) zrp_cond_broadcast(&l->idle);
    zrp_mutex_unlock(&l->mu);
    return rc;
}

int zld_next(zld_loader *l, zld_batch **out)
{
    return next_batch(l, out, 0, 0);
}

int zld_next_wait(zld_loader *l, zld_batch **out, uint64_t timeout_ns)
{
    return next_batch(l, out, timeout_ns, 1);
}

uint64_t zld_steps(const zld_loader *l)
{
    return l == NULL ? 0 : l->plan.steps;
}

uint64_t zld_next_step(const zld_loader *l)
{
    if (l == NULL) return 0;
    zld_loader *m = (zld_loader *)l; /* the lock is not part of the value */
    zrp_mutex_lock(&m->mu);
    uint64_t step = m->next_take;
    zrp_mutex_unlock(&m->mu);
    return step;
}

int zld_get_state(zld_loader *l, zld_options *out)
{
    if (l == NULL || out == NULL)
        return zr_set_error(ZR_EINVAL, "zld_get_state: %s is NULL",
                            l == NULL ? "loader" : "out");
    zrp_mutex_lock(&l->mu);
    *out = l->plan.opt;
    out->start_step = l->next_take;
    zrp_mutex_unlock(&l->mu);
    return ZR_OK;
}

unsigned zld_readahead(zld_loader *l)
{
    if (l == NULL) return 0;
    zrp_mutex_lock(&l->mu);
    unsigned ra = l->readahead;
    zrp_mutex_unlock(&l->mu);
    return ra;
}

int zld_flip_mask(const zld_loader *l, uint64_t step, double p, uint8_t *mask, uint64_t count)
{
    if (l == NULL || mask == NULL)
        return zr_set_error(ZR_EINVAL, "zld_flip_mask: %s is NULL", l == NULL ? "loader" : "mask");
    if (count > l->plan.cfg.batch_size)
        return zr_set_error(ZR_EINVAL, "zld_flip_mask: count %llu exceeds batch_size %llu",
                            (unsigned long long)count, (unsigned long long)l->plan.cfg.batch_size);
    if (zsm_bernoulli(l->plan.opt.seed, step, l->plan.cfg.batch_size * (uint64_t)l->plan.opt.rank, count, p,
                      mask) != ZSM_OK)
        return zr_set_error(ZR_EINVAL, "zld_flip_mask: p %g is outside [0, 1]", p);
    return ZR_OK;
}

int zld_failed(zld_loader *l, uint64_t *step)
{
    if (l == NULL) return 0;
    zrp_mutex_lock(&l->mu);
    int failed = l->failed;
    if (failed && step != NULL) *step = l->fail_step;
    zrp_mutex_unlock(&l->mu);
    return failed;
}

void zld_stop(zld_loader *l)
{
    if (l == NULL) return;
    stop_workers(l);
}

int zld_is_closed(zld_loader *l)
{
    if (l == NULL) return 1;
    zrp_mutex_lock(&l->mu);
    int stopped = l->stop;
    zrp_mutex_unlock(&l->mu);
    return stopped || streams_closed(l, "zld_is_closed");
}

void zld_close(zld_loader *l)
{
    if (l == NULL) return;
    stop_workers(l);
    if (l->held) /* the workers are joined: nothing reads the streams now */
        release_streams(l->streams, l->plan.nstreams);
    loader_destroy(l);
}

/* --------------------------------------------------------- ragged helpers */

int zld_pad(const void *const *rows, const uint64_t *lengths, uint64_t count,
            size_t elem_size, uint64_t length, const void *pad_value, void *dst)
{
    if (count == 0) return ZR_OK;
    if (rows == NULL || lengths == NULL || pad_value == NULL || dst == NULL || elem_size == 0)
        return zr_set_error(ZR_EINVAL, "zld_pad: NULL argument or elem_size 0");
    if (length > SIZE_MAX / elem_size || count > SIZE_MAX / (length * elem_size + 1))
        return zr_set_error(ZR_EINVAL, "zld_pad: %llu rows of %llu elements of %zu bytes "
                            "exceed the address space", (unsigned long long)count,
                            (unsigned long long)length, elem_size);
    const size_t row_bytes = (size_t)length * elem_size;
    unsigned char *out = dst;
    /* One padded row template: the pad element repeated, copied per row. */
    unsigned char *fill = NULL;
    int uniform = 1;
    const unsigned char *pv = pad_value;
    for (size_t k = 1; k < elem_size; k++)
        if (pv[k] != pv[0]) uniform = 0;
    for (uint64_t i = 0; i < count; i++, out += row_bytes) {
        uint64_t n = lengths[i] < length ? lengths[i] : length;
        size_t have = (size_t)n * elem_size;
        if (have) memcpy(out, rows[i], have);
        if (have == row_bytes) continue;
        if (uniform) {
            memset(out + have, pv[0], row_bytes - have);
            continue;
        }
        if (fill == NULL) {
            fill = malloc(row_bytes);
            if (fill == NULL) return zr_set_error(ZR_ENOMEM, "zld_pad: out of memory");
            for (size_t k = 0; k < row_bytes; k += elem_size) memcpy(fill + k, pv, elem_size);
        }
        memcpy(out + have, fill + have, row_bytes - have);
    }
    free(fill);
    return ZR_OK;
}
