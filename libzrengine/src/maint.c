/*
 * maint.c - the calls that change records in place: delete (swap-last)
 * and compact (in-place repacking in physical order), made crash-safe by
 * journal.zr (journal.c; replayed by recover.c); and the calls that look
 * at the whole table: zre_check_record and the space accounting.
 *
 * Both delete and compact first make every earlier append durable, so the
 * header a journal names as its base is the one on disk and the records a
 * delete moves into lower indices are on disk too; both end durable
 * (zre_commit_durable), like sync.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "engine_internal.h"

/* Run a maintenance call `fn` with the writer lock and exclusive use held;
 * a failed fsync is never retried (its dirty pages may be gone), so it
 * leaves the handle refusing every call. */
static int run_maint(zre_engine *e, const char *what, int (*fn)(zre_engine *, void *), void *arg)
{
    if (e->readonly)
        return zr_set_error(ZR_EUNSUPPORTED, "%s: store %s is open read-only", what, e->path);
    zrp_mutex_lock(&e->writer);
    int rc = zre_enter_maint(e, what);
    if (rc == 0) {
        e->op = what;
        e->fsync_failed = false;
        rc = fn(e, arg);
        if (rc < 0 && e->fsync_failed && !atomic_load(&e->poisoned))
            rc = zre_poison(e, rc);
        e->fsync_failed = false;
        e->op = NULL;
        zre_leave_maint(e);
    }
    zrp_mutex_unlock(&e->writer);
    return rc;
}

/* -------------------------------------------------------------- delete */

static int cmp_desc(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? 1 : x > y ? -1 : 0;
}

typedef struct del_args {
    const uint64_t *index;
    uint64_t count;
} del_args;

/* The final table in memory: the k distinct indices, visited in descending
 * order, each take the entry of the current last record. Only entries
 * below the new length are written (their sources all lie in the last k),
 * into out[0..*nout). */
static int delete_plan(zre_engine *e, const del_args *a, uint64_t *new_len, zre_jentry **out,
                       uint64_t *nout)
{
    uint64_t len = atomic_load(&e->length);
    for (uint64_t i = 0; i < a->count; i++)
        if (a->index[i] >= len)
            return zr_set_error(ZR_ERANGE, "delete: index %" PRIu64 " out of range for store of %"
                                PRIu64 " records (position %" PRIu64 "); nothing deleted",
                                a->index[i], len, i);
    uint64_t *t = malloc((size_t)a->count * sizeof *t);
    if (!t)
        return zr_set_error(ZR_ENOMEM, "delete: out of memory for %" PRIu64 " indices", a->count);
    memcpy(t, a->index, (size_t)a->count * sizeof *t);
    qsort(t, (size_t)a->count, sizeof *t, cmp_desc);
    uint64_t k = 0;
    for (uint64_t i = 0; i < a->count; i++)
        if (k == 0 || t[k - 1] != t[i])
            t[k++] = t[i];
    *new_len = len - k;
    unsigned char *tail = malloc((size_t)k * ZRE_LOC_ENTRY_SIZE);
    *out = malloc((size_t)k * sizeof **out);
    int rc = !tail || !*out ? zr_set_error(ZR_ENOMEM, "delete: out of memory for %" PRIu64
                                           " entries", k) : ZR_OK;
    if (rc == 0)
        rc = zre_read_locs(e, *new_len, tail, k);
    *nout = 0;
    for (uint64_t i = 0, cur = len; rc == 0 && i < k; i++, cur--) {
        uint64_t last = cur - 1;
        const unsigned char *src = tail + (last - *new_len) * ZRE_LOC_ENTRY_SIZE;
        if (t[i] == last)
            continue;
        if (t[i] >= *new_len) {
            memcpy(tail + (t[i] - *new_len) * ZRE_LOC_ENTRY_SIZE, src, ZRE_LOC_ENTRY_SIZE);
        } else {
            (*out)[*nout].index = t[i];
            zre_loc_decode(&(*out)[*nout].loc, src);
            (*nout)++;
        }
    }
    free(t);
    free(tail);
    return rc;
}

/* Apply a planned delete that moves entries: journal, entries, then the
 * commit; a failure after the journal is durable is finished from it. */
static int delete_journaled(zre_engine *e, const zre_state *target, const zre_jentry *out,
                            uint64_t nout)
{
    zre_jhead h = {ZRE_JOP_DELETE, false, *target, zre_now(e), nout};
    int rc = zre_journal_write(e, &h, out, NULL, 0);
    if (rc < 0)
        return rc;
    for (uint64_t i = 0; rc == 0 && i < nout; i++)
        rc = zre_write_loc(e, out[i].index, &out[i].loc);
    /* The applied state must be durable before the journal goes, or a
     * power loss could replay it over later appends. */
    if (rc == 0)
        rc = zre_commit_durable(e, target);
    if (rc == 0)
        rc = zre_journal_remove(e);
    return rc < 0 ? zre_redo_or_poison(e, rc) : rc;
}

static int delete_locked(zre_engine *e, void *arg)
{
    uint64_t new_len = 0, nout = 0;
    zre_jentry *out = NULL;
    int rc = delete_plan(e, arg, &new_len, &out, &nout);
    zre_state target = {new_len, e->tail};
    if (rc == 0 && nout == 0) {
        /* Only the last records go: nothing moves, so a durable header
         * write is the whole call (its fsyncs also make the earlier
         * appends durable first). */
        rc = zre_commit_durable(e, &target);
    } else if (rc == 0) {
        /* Earlier appends durable first: the journal's base is then the
         * header on disk, and the records it moves are on disk. */
        rc = zre_sync_all(e);
        if (rc == 0)
            rc = delete_journaled(e, &target, out, nout);
    }
    free(out);
    return rc;
}

ZRE_API int zre_delete(zre_engine *e, const uint64_t *index, uint64_t count)
{
    if (!e || (count > 0 && !index))
        return zr_set_error(ZR_EINVAL, "delete: NULL argument");
    if (count == 0 && !e->readonly)
        return ZR_OK;
    del_args a = {index, count};
    return run_maint(e, "delete", delete_locked, &a);
}

/* ------------------------------------------------------------- compact */

/* A record of the table: its index, where it is, where compact puts it. */
typedef struct prec {
    uint64_t index;
    zre_loc loc;
    zre_pos to;
} prec;

static int cmp_phys(const void *a, const void *b)
{
    const zre_loc *x = &((const prec *)a)->loc, *y = &((const prec *)b)->loc;
    if (x->chunk_id != y->chunk_id)
        return x->chunk_id < y->chunk_id ? -1 : 1;
    return x->offset < y->offset ? -1 : x->offset > y->offset ? 1 : 0;
}

/* Phase 1, load the table: every entry, checked, in physical order, and
 * no two records overlapping. */
static int compact_load(zre_engine *e, uint64_t len, prec **out)
{
    if (len > SIZE_MAX / sizeof(prec))
        return zr_set_error(ZR_ENOMEM, "compact: %" PRIu64 " records do not fit in memory", len);
    enum { BATCH = 4096 };
    prec *r = *out = malloc((size_t)(len ? len : 1) * sizeof *r);
    unsigned char *buf = malloc(BATCH * ZRE_LOC_ENTRY_SIZE);
    int rc = !r || !buf ? zr_set_error(ZR_ENOMEM, "compact: out of memory for %" PRIu64
                                       " table entries", len) : ZR_OK;
    for (uint64_t i = 0; rc == 0 && i < len; i += BATCH) {
        uint64_t n = len - i < BATCH ? len - i : BATCH;
        rc = zre_read_locs(e, i, buf, n);
        for (uint64_t j = 0; rc == 0 && j < n; j++) {
            prec *p = &r[i + j];
            p->index = i + j;
            zre_loc_decode(&p->loc, buf + j * ZRE_LOC_ENTRY_SIZE);
            const char *why = zre_loc_check(e, &p->loc, e->tail, false);
            if (why)
                rc = zr_set_error(ZR_ECORRUPT, "compact: record %" PRIu64 " of %s has a bad table "
                                  "entry (chunk %u, offset %u, %u bytes): %s; nothing moved",
                                  p->index, e->path, p->loc.chunk_id, p->loc.offset,
                                  p->loc.phys_length, why);
        }
    }
    free(buf);
    if (rc == 0)
        qsort(r, (size_t)len, sizeof *r, cmp_phys);
    for (uint64_t i = 1; rc == 0 && i < len; i++) {
        const zre_loc *p = &r[i - 1].loc, *q = &r[i].loc;
        if (p->chunk_id == q->chunk_id && (uint64_t)p->offset + p->phys_length > q->offset)
            rc = zr_set_error(ZR_ECORRUPT, "compact: records %" PRIu64 " and %" PRIu64 " of %s "
                              "overlap in %u.chunk; nothing moved", r[i - 1].index, r[i].index,
                              e->path, q->chunk_id);
    }
    return rc;
}

/* Phase 2, plan the moves: records packed densely from chunk 0, offset 0,
 * in physical order, rolling over as appends do. Physical order makes a
 * new place never lie above the old one. Returns the new frontier. */
static zre_pos compact_plan(prec *r, uint64_t len)
{
    zre_pos at = {0, 0};
    for (uint64_t i = 0; i < len; i++) {
        bool full;
        r[i].to = zre_place(at, r[i].loc.phys_length, &full);
        at = (zre_pos){r[i].to.chunk, r[i].to.offset + r[i].loc.phys_length};
    }
    return at;
}

/* One batch of moves into one chunk. */
typedef struct cbatch {
    zre_jentry *ent;     /* new locations */
    uint64_t n;
    unsigned char *payload;
    uint64_t bytes;
    size_t cap;
    uint32_t chunk;      /* every move of a batch lands in this chunk */
    uint64_t min_old;    /* lowest old offset in `chunk` among the moves */
    bool conflict;       /* a move overwrites bytes a pending entry uses */
    bool journaled;      /* some batch of this compact wrote journal.zr */
} cbatch;

/* Add record `p`'s move to the batch: read its bytes, note whether the
 * move overwrites bytes that an entry not yet updated still points at. */
static int batch_add(zre_engine *e, cbatch *b, const prec *p)
{
    const zre_loc *old = &p->loc;
    uint32_t size = old->phys_length, at = p->to.offset;
    if (b->bytes + size > b->cap) {
        size_t ncap = (size_t)(b->bytes + size);
        if (ncap < (size_t)ZRE_COMPACT_BATCH_BYTES)
            ncap = (size_t)ZRE_COMPACT_BATCH_BYTES;
        unsigned char *np = realloc(b->payload, ncap);
        if (!np)
            return zr_set_error(ZR_ENOMEM, "compact: out of memory for %zu bytes of records", ncap);
        b->payload = np;
        b->cap = ncap;
    }
    int prc = zrp_pread_all(zre_fdtab_get(&e->chunks, old->chunk_id), b->payload + b->bytes, size,
                            old->offset);
    if (prc < 0)
        return zr_set_error(zre_io_status(prc, ZR_ECORRUPT), "compact: reading record %" PRIu64
                            " (%u bytes at %s/%u.chunk offset %u) failed: %s", p->index, size,
                            e->path, old->chunk_id, old->offset,
                            prc == ZRP_ESHORT ? "chunk file too short" : zr_os_strerror(prc));
    b->chunk = p->to.chunk;
    if (old->chunk_id == b->chunk) {
        if ((uint64_t)at + size > old->offset)
            b->conflict = true; /* overlaps its own old bytes */
        if (b->min_old == UINT64_MAX)
            b->min_old = old->offset;
    }
    if (b->min_old != UINT64_MAX && (uint64_t)at + size > b->min_old)
        b->conflict = true;
    b->ent[b->n].index = p->index;
    b->ent[b->n].loc = *old;
    b->ent[b->n].loc.chunk_id = p->to.chunk;
    b->ent[b->n].loc.offset = at;
    b->n++;
    b->bytes += size;
    return ZR_OK;
}

/* Apply a batch: its journal when a move overwrites bytes still in use,
 * the bytes at their new places (durable), then the entries (durable),
 * before a later batch may overwrite the old bytes. */
static int batch_flush(zre_engine *e, cbatch *b)
{
    if (b->n == 0)
        return ZR_OK;
    int rc = ZR_OK;
    if (b->conflict) {
        zre_state now = zre_now(e);
        zre_jhead h = {ZRE_JOP_COMPACT, true, now, now, b->n};
        rc = zre_journal_write(e, &h, b->ent, b->payload, b->bytes);
        b->journaled = true;
    }
    zrp_file f = zre_fdtab_get(&e->chunks, b->chunk);
    uint64_t at = 0;
    for (uint64_t i = 0; rc == 0 && i < b->n; i++) {
        const zre_loc *l = &b->ent[i].loc;
        int prc = zrp_pwrite_all(f, b->payload + at, l->phys_length, l->offset);
        if (prc < 0)
            rc = zr_set_error(ZR_EIO, "compact: writing record %" PRIu64 " to %s/%u.chunk at offset "
                              "%u failed: %s", b->ent[i].index, e->path, b->chunk, l->offset,
                              zr_os_strerror(prc));
        else
            zre_fdtab_grow(&e->chunks, b->chunk, (uint64_t)l->offset + l->phys_length);
        at += l->phys_length;
    }
    if (rc == 0)
        rc = zre_fsync_numbered(e, &e->chunks, b->chunk);
    for (uint64_t i = 0; rc == 0 && i < b->n; i++)
        rc = zre_write_loc(e, b->ent[i].index, &b->ent[i].loc);
    for (uint64_t s = 0; rc == 0 && s < zre_seg_count(atomic_load(&e->length)); s++)
        rc = zre_fsync_numbered(e, &e->locs, s);
    b->n = 0;
    b->bytes = 0;
    b->min_old = UINT64_MAX;
    b->conflict = false;
    return rc;
}

static bool interrupted(const zre_engine *e)
{
    return atomic_load_explicit(&((zre_engine *)e)->interrupt, memory_order_relaxed) != 0;
}

/* Phase 3, move in batches (one destination chunk, bounded records and
 * bytes each). Between batches every entry points at its record's bytes:
 * a safe point to stop at zre_interrupt, noting in *stopped how many
 * records were visited. A batch left half-applied by a failure is
 * finished from its journal. */
static int compact_move(zre_engine *e, const prec *r, uint64_t len, uint64_t *stopped)
{
    cbatch b = {0};
    b.min_old = UINT64_MAX;
    b.ent = malloc(ZRE_COMPACT_BATCH_RECORDS * sizeof *b.ent);
    int rc = b.ent ? ZR_OK : zr_set_error(ZR_ENOMEM, "compact: out of memory for a batch");
    if (rc == 0 && interrupted(e))
        *stopped = 0;
    for (uint64_t i = 0; rc == 0 && *stopped == UINT64_MAX && i < len; i++) {
        const prec *p = &r[i];
        if (p->loc.chunk_id == p->to.chunk && p->loc.offset == p->to.offset)
            continue; /* already in place */
        if (b.n > 0 && (p->to.chunk != b.chunk || b.n == ZRE_COMPACT_BATCH_RECORDS ||
                        b.bytes + p->loc.phys_length > ZRE_COMPACT_BATCH_BYTES)) {
            rc = batch_flush(e, &b);
            if (rc == 0 && interrupted(e))
                *stopped = i;
        }
        if (rc == 0 && *stopped == UINT64_MAX)
            rc = batch_add(e, &b, p);
    }
    if (rc == 0)
        rc = batch_flush(e, &b);
    /* The journal must be gone before the header shrinks the frontier: a
     * replay would restore the old frontier over truncated chunks. */
    if (rc == 0 && b.journaled)
        rc = zre_journal_remove(e);
    if (rc < 0 && b.journaled) {
        zre_err err;
        zre_err_capture(&err, rc);
        /* The store is intact at its last commit once the batch in flight
         * is finished from its journal (the replay a crash recovery runs,
         * which also removes the journal). */
        int rrc = zre_redo_or_poison(e, rc);
        if (rrc == 0)
            zre_err_raise_with(&err, "; the interrupted batch was completed from its journal and "
                               "every record is intact: run compact again to finish");
        else
            rc = rrc;
    }
    free(b.ent);
    free(b.payload);
    return rc;
}

/* Phase 4, shrink the files. The table first: the length does not change,
 * so under the old header as under the new one entries past it are
 * garbage, and removing them (durably) leaves none for a later append's
 * chain check to meet. Then the header with the new frontier, durable,
 * and only then the chunk bytes past it go (the old header's frontier
 * needs them until the new one is on disk). */
static int compact_shrink(zre_engine *e, uint64_t len, zre_pos end)
{
    uint64_t nseg = zre_seg_count(len);
    int rc = zre_remove_numbered_from(e, &e->locs, nseg, nseg);
    if (rc == 0 && nseg > 0)
        rc = zre_truncate_numbered(e, &e->locs, nseg - 1,
                                   (len - (nseg - 1) * ZRE_INT_SEG_ENTRIES) * ZRE_LOC_ENTRY_SIZE);
    if (rc == 0)
        rc = zre_fsync_dir(e);
    const uint32_t old_tail = e->tail.chunk;
    zre_state target = {len, end};
    if (rc == 0)
        rc = zre_commit_durable(e, &target);
    if (rc == 0)
        rc = zre_remove_numbered_from(e, &e->chunks, (uint64_t)end.chunk + 1, old_tail);
    if (rc == 0)
        rc = zre_truncate_numbered(e, &e->chunks, end.chunk, end.offset);
    if (rc == 0)
        rc = zre_fsync_dir(e);
    return rc;
}

static int compact_locked(zre_engine *e, void *arg)
{
    (void)arg;
    const uint64_t len = atomic_load(&e->length);
    prec *r = NULL;
    uint64_t stopped = UINT64_MAX; /* records visited when zre_interrupt stopped it */
    zre_pos end = {0, 0};
    /* Earlier appends durable first: a journal's base is the header on disk. */
    int rc = zre_sync_all(e);
    if (rc == 0)
        rc = compact_load(e, len, &r);
    if (rc == 0)
        end = compact_plan(r, len);
    if (rc == 0)
        rc = compact_move(e, r, len, &stopped);
    if (rc == 0 && stopped != UINT64_MAX)
        rc = zr_set_error(ZR_EINTR, "compact: interrupted after %" PRIu64 " of %" PRIu64 " records "
                          "of %s; every record is intact, no space is reclaimed yet: run compact "
                          "again to finish", stopped, len, e->path);
    if (rc == 0)
        rc = compact_shrink(e, len, end);
    free(r);
    return rc;
}

ZRE_API void zre_interrupt(zre_engine *e, int on)
{
    if (e)
        atomic_store_explicit(&e->interrupt, on != 0, memory_order_relaxed);
}

ZRE_API int zre_compact(zre_engine *e)
{
    if (!e)
        return zr_set_error(ZR_EINVAL, "compact: NULL handle");
    return run_maint(e, "compact", compact_locked, NULL);
}

/* --------------------------------------------------------------- check */

static int check_locked(zre_engine *e, uint64_t index)
{
    uint64_t len = zre_length(e);
    if (index >= len)
        return zr_set_error(ZR_ERANGE, "check: index %" PRIu64 " out of range for store of %" PRIu64
                            " records", index, len);
    zre_loc l;
    int rc = zre_read_loc(e, index, &l);
    if (rc < 0)
        return rc;
    /* The frontier is writer state; take the lock for a consistent copy. */
    zrp_mutex_lock(&e->writer);
    zre_pos tail = e->tail;
    zrp_mutex_unlock(&e->writer);
    const char *why = zre_loc_check(e, &l, tail, true);
    if (why)
        return zr_set_error(ZR_ECORRUPT, "check: record %" PRIu64 " has a bad table entry, %s/%"
                            PRIu64 ".loc entry %" PRIu64 " (%s/%u.chunk, offset %u, %u stored "
                            "bytes, %u logical): %s", index, e->path, index / ZRE_INT_SEG_ENTRIES,
                            index % ZRE_INT_SEG_ENTRIES, e->path, l.chunk_id, l.offset,
                            l.phys_length, l.logic_length, why);
    unsigned char *out = malloc(l.logic_length);
    if (!out)
        return zr_set_error(ZR_ENOMEM, "check: out of memory for record %" PRIu64 " (%u bytes)",
                            index, l.logic_length);
    rc = zre_read_one(e, index, &l, out);
    free(out);
    return rc;
}

ZRE_API int zre_check_record(zre_engine *e, uint64_t index)
{
    if (!e)
        return zr_set_error(ZR_EINVAL, "check: NULL handle");
    int rc = zre_enter_read(e, "check");
    if (rc < 0)
        return rc;
    rc = check_locked(e, index);
    zre_leave_read(e);
    return rc;
}

/* ---------------------------------------------------------------- stats */

ZRE_API int zre_get_stats(zre_engine *e, zre_stats *out)
{
    if (!e || !out)
        return zr_set_error(ZR_EINVAL, "stats: NULL argument");
    enum { BATCH = 4096 };
    unsigned char *buf = malloc((size_t)BATCH * ZRE_LOC_ENTRY_SIZE);
    if (!buf)
        return zr_set_error(ZR_ENOMEM, "stats: out of memory");
    zre_stats s = {0};
    int rc = zre_check_usable(e, "stats");
    if (rc < 0) {
        free(buf);
        return rc;
    }
    /* Hold the writer lock for a snapshot consistent with the frontier. */
    zrp_mutex_lock(&e->writer);
    s.records = atomic_load_explicit(&e->length, memory_order_acquire);
    for (uint64_t i = 0; i < s.records && rc == 0; i += BATCH) {
        uint64_t n = s.records - i < BATCH ? s.records - i : BATCH;
        rc = zre_read_locs(e, i, buf, n);
        for (uint64_t k = 0; rc == 0 && k < n; k++) {
            zre_loc l;
            zre_loc_decode(&l, buf + k * ZRE_LOC_ENTRY_SIZE);
            s.logical_bytes += l.logic_length;
            s.live_bytes += l.phys_length;
        }
    }
    /* Earlier chunks count up to their file size (what rollover left);
     * the tail chunk counts up to the committed frontier. */
    for (uint64_t c = 0; rc == 0 && c < e->tail.chunk; c++) {
        uint64_t size = 0;
        if (zre_fent_open(zre_fdtab_ent(&e->chunks, c)) && zre_fent_size(&e->chunks, c, &size) < 0)
            rc = zr_set_error(ZR_EIO, "stats: cannot stat %s/%" PRIu64 ".chunk", e->path, c);
        s.chunk_bytes += size < ZRE_CHUNK_USABLE ? size : ZRE_CHUNK_USABLE;
    }
    s.chunk_bytes += e->tail.offset;
    zrp_mutex_unlock(&e->writer);
    free(buf);
    if (rc < 0)
        return rc;
    s.reclaimable = s.chunk_bytes > s.live_bytes ? s.chunk_bytes - s.live_bytes : 0;
    *out = s;
    return ZR_OK;
}
