/*
 * maint.c - delete (swap-last), compact (in-place repacking in physical
 * order), the journal that makes both crash-safe, and zre_check_record.
 *
 * journal.zr (see docs/FORMAT.md) is a redo log: the record-table entries
 * (and, for compact, the record bytes) a call is about to write, plus the
 * header it will end with. It is written whole and renamed into place
 * before the first in-place write, so after a crash the next writable open
 * replays it and the store is exactly as if the call had completed. Calls
 * whose writes cannot damage committed state (a delete of only the last
 * records, compact moves into free space) skip it.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "engine_internal.h"

#define JOURNAL_MAGIC "ZRJ2"
#define JOURNAL_MAGIC_V1 "ZRJ1"
#define JOURNAL_HEAD 56u
#define JOURNAL_ENTRY 24u
#define JOURNAL_PAYLOADS 1u
#define JOURNAL_OP_DELETE 1u
#define JOURNAL_OP_COMPACT 2u
/* Compact moves per batch (and journal), bounding memory. */
#define COMPACT_BATCH_RECORDS 4096u
#define COMPACT_BATCH_BYTES ((uint64_t)64 << 20)

typedef struct jentry {
    uint64_t index;
    zre_loc loc;
} jentry;

/* ------------------------------------------------------------- journal */

static int journal_remove(zre_engine *e);

/* Write journal.zr durably: the target state (`length`, tail), the base
 * state it applies to (the committed header now: e->length and the
 * frontier), the entries and payloads. On failure nothing may be left
 * that a later open would replay (the call reports failure): a journal
 * that may have landed is removed, and if even that fails the handle is
 * poisoned. */
static int journal_write(zre_engine *e, uint32_t flags, uint64_t length, uint32_t tail_chunk,
                         uint32_t tail_offset, const jentry *ent, uint64_t n,
                         const unsigned char *payload, uint64_t payload_bytes)
{
    uint64_t total = JOURNAL_HEAD + n * JOURNAL_ENTRY + payload_bytes + 8;
    unsigned char *buf = malloc((size_t)total);
    char *jp = zre_join(e, "journal.zr");
    if (!buf || !jp) {
        free(buf);
        free(jp);
        return zr_set_error(ZR_ENOMEM, "journal: out of memory for %" PRIu64 " bytes", total);
    }
    memcpy(buf, JOURNAL_MAGIC, 4);
    zre_put_u32(buf + 4, flags);
    zre_put_u64(buf + 8, length);
    zre_put_u32(buf + 16, tail_chunk);
    zre_put_u32(buf + 20, tail_offset);
    zre_put_u64(buf + 24, n);
    zre_put_u64(buf + 32, atomic_load(&e->length));
    zre_put_u32(buf + 40, e->tail_chunk);
    zre_put_u32(buf + 44, e->tail_offset);
    zre_put_u32(buf + 48, strcmp(zre_op(e), "compact") == 0 ? JOURNAL_OP_COMPACT : JOURNAL_OP_DELETE);
    zre_put_u32(buf + 52, 0);
    unsigned char *p = buf + JOURNAL_HEAD;
    for (uint64_t i = 0; i < n; i++, p += JOURNAL_ENTRY) {
        zre_put_u64(p, ent[i].index);
        zre_loc_encode(p + 8, &ent[i].loc);
    }
    if (payload_bytes)
        memcpy(p, payload, (size_t)payload_bytes);
    p += payload_bytes;
    zre_put_u64(p, zre_fnv1a64(ZRE_FNV64_INIT, buf, (size_t)(total - 8)));
    int prc = zrp_write_file_atomic(jp, buf, (size_t)total);
    int rc = ZR_OK;
    if (prc < 0) {
        rc = zr_set_error(ZR_EIO, "%s: cannot write journal %s: %s; nothing changed", zre_op(e), jp,
                          zr_os_strerror(prc));
        /* The rename may have landed before the directory fsync failed. */
        zre_err err;
        zre_err_capture(&err, rc);
        int jrc = journal_remove(e);
        zre_err_raise_with(&err, "%s", jrc < 0 ? " (and removing it failed)" : "");
        if (jrc < 0)
            rc = zre_poison(e, rc);
    }
    free(buf);
    free(jp);
    return rc;
}

static int journal_remove(zre_engine *e)
{
    char *jp = zre_join(e, "journal.zr");
    if (!jp)
        return zr_set_error(ZR_ENOMEM, "journal: out of memory for a path");
    int prc = zrp_unlink(jp);
    int rc = ZR_OK;
    if (prc < 0 && prc != -ENOENT)
        rc = zr_set_error(ZR_EIO, "%s: cannot remove journal %s: %s", zre_op(e), jp,
                          zr_os_strerror(prc));
    else if ((prc = zrp_fsync_dir(e->path)) < 0)
        rc = zr_set_error(ZR_EIO, "%s: fsync of directory %s (removing its journal) failed: %s",
                          zre_op(e), e->path, zr_os_strerror(prc));
    free(jp);
    return rc;
}

/* Check one table entry's own fields (not the files). */
const char *zre_loc_problem(const zre_loc *l, zre_codec codec)
{
    if (l->logic_length == 0 || l->logic_length > ZRE_RECORD_MAX)
        return "logical length outside 1..2^31";
    if (l->phys_length == 0)
        return "stored length 0";
    if ((uint64_t)l->offset + l->phys_length > ZRE_CHUNK_USABLE)
        return "extends past the chunk capacity";
    if (codec == ZRE_CODEC_RAW && l->phys_length != l->logic_length)
        return "raw record with stored length != logical length";
    return NULL;
}

int zre_journal_recover(zre_engine *e, uint64_t *length)
{
    char *jp = zre_join(e, "journal.zr");
    if (!jp)
        return zr_set_error(ZR_ENOMEM, "%s: out of memory for a path", zre_op(e));
    if (!zrp_path_exists(jp)) {
        free(jp);
        return ZR_OK;
    }
    const char *op = zre_op(e);
    void *raw = NULL;
    size_t len = 0;
    int rc = ZR_OK;
    /* Bounded: a journal never holds more entries than the store has
     * records (delete: swaps into indices below the new length; compact:
     * one per moved record), plus one compact batch's bytes. */
    uint64_t cap = JOURNAL_HEAD + 8 + *length * JOURNAL_ENTRY + COMPACT_BATCH_BYTES + ZRE_RECORD_MAX;
    int prc = zrp_read_file(jp, &raw, &len, cap < SIZE_MAX ? (size_t)cap : SIZE_MAX);
    if (prc == -ELOOP || prc == ZRP_ENOTREG || prc == -EFBIG) {
        rc = zr_set_error(ZR_ENOTSTORE, "%s: %s is malformed: %s is %s", op, e->path, jp,
                          prc == -EFBIG ? "larger than any journal of this store"
                          : prc == -ELOOP ? "a symbolic link" : "not a regular file");
        goto out;
    }
    if (prc < 0) {
        rc = zr_set_error(ZR_EIO, "%s: cannot read %s: %s", op, jp, zr_os_strerror(prc));
        goto out;
    }
    const unsigned char *b = raw;
    /* The journal was renamed into place whole, so any damage is real
     * corruption: refuse rather than guess. */
    if (len >= 4 && memcmp(b, JOURNAL_MAGIC_V1, 4) == 0) {
        rc = zr_set_error(ZR_ENOTSTORE, "%s: %s is an old-format journal (ZRJ1) that does not say "
                          "which commit it applies to; it cannot be replayed safely", op, jp);
        goto out;
    }
    if (len < JOURNAL_HEAD + 8 || memcmp(b, JOURNAL_MAGIC, 4) != 0) {
        rc = zr_set_error(ZR_ENOTSTORE, "%s: %s is damaged: %zu bytes without a valid header",
                          op, jp, len);
        goto out;
    }
    if (zre_get_u64(b + len - 8) != zre_fnv1a64(ZRE_FNV64_INIT, b, len - 8)) {
        rc = zr_set_error(ZR_ENOTSTORE, "%s: %s is damaged: checksum mismatch", op, jp);
        goto out;
    }
    uint32_t flags = zre_get_u32(b + 4);
    uint64_t new_len = zre_get_u64(b + 8);
    uint32_t tchunk = zre_get_u32(b + 16), toff = zre_get_u32(b + 20);
    uint64_t n = zre_get_u64(b + 24);
    uint64_t base_len = zre_get_u64(b + 32);
    uint32_t base_chunk = zre_get_u32(b + 40), base_off = zre_get_u32(b + 44);
    uint32_t jop = zre_get_u32(b + 48);
    const char *jname = jop == JOURNAL_OP_COMPACT ? "compact" : "delete";
    if ((flags & ~JOURNAL_PAYLOADS) || n > (len - JOURNAL_HEAD - 8) / JOURNAL_ENTRY ||
        toff > ZRE_CHUNK_USABLE || (jop != JOURNAL_OP_DELETE && jop != JOURNAL_OP_COMPACT) ||
        zre_get_u32(b + 52) != 0) {
        rc = zr_set_error(ZR_ENOTSTORE, "%s: %s is damaged: bad flags, entry count, operation or "
                          "tail", op, jp);
        goto out;
    }
    /* Which commit is it for? Only the header it was written against (the
     * call never reached meta.zr) or the one it ends with (it did, but the
     * journal was not yet removed) may be redone; any other header means
     * later commits happened after the call completed, and replaying the
     * journal's header would drop them. */
    bool at_base = *length == base_len && e->tail_chunk == base_chunk && e->tail_offset == base_off;
    bool at_target = *length == new_len && e->tail_chunk == tchunk && e->tail_offset == toff;
    if (!at_base && !at_target) {
        if (!e->readonly)
            rc = journal_remove(e);
        goto out;
    }
    if (e->readonly) {
        rc = zr_set_error(ZR_ESTATE, "%s: store %s has an unfinished %s recorded in %s (a writer "
                          "stopped before completing it); a read-only open never writes, so open "
                          "the store writable once to recover it", op, e->path, jname, jp);
        goto out;
    }
    const unsigned char *ents = b + JOURNAL_HEAD;
    const unsigned char *pay = ents + n * JOURNAL_ENTRY;
    uint64_t pay_avail = (uint64_t)(b + len - 8 - pay), pay_used = 0;
    for (uint64_t i = 0; i < n; i++) {
        zre_loc l;
        zre_loc_decode(&l, ents + i * JOURNAL_ENTRY + 8);
        uint64_t idx = zre_get_u64(ents + i * JOURNAL_ENTRY);
        const char *why = zre_loc_problem(&l, e->codec);
        if (!why && idx >= new_len)
            why = "index beyond the journal's length";
        if (!why && l.chunk_id > tchunk)
            why = "chunk beyond the journal's tail";
        if (!why && (flags & JOURNAL_PAYLOADS)) {
            if (l.phys_length > pay_avail - pay_used)
                why = "payload missing";
            pay_used += l.phys_length;
        }
        if (why) {
            rc = zr_set_error(ZR_ENOTSTORE, "%s: %s is damaged: entry %" PRIu64 " (index %" PRIu64
                              "): %s", op, jp, i, idx, why);
            goto out;
        }
    }
    if (pay_used != pay_avail) {
        rc = zr_set_error(ZR_ENOTSTORE, "%s: %s is damaged: %" PRIu64 " stray payload bytes", op, jp,
                          pay_avail - pay_used);
        goto out;
    }
    /* Redo: bytes, then table entries, then the header, then durable. */
    pay_used = 0;
    for (uint64_t i = 0; i < n && rc == 0; i++) {
        zre_loc l;
        zre_loc_decode(&l, ents + i * JOURNAL_ENTRY + 8);
        if (flags & JOURNAL_PAYLOADS) {
            rc = zre_ensure_chunk(e, l.chunk_id);
            if (rc < 0)
                break;
            prc = zrp_pwrite_all(zre_fdtab_get(&e->chunks, l.chunk_id), pay + pay_used,
                                 l.phys_length, l.offset);
            if (prc < 0)
                rc = zr_set_error(ZR_EIO, "%s: replaying %s into %s/%u.chunk failed: %s", op, jp,
                                  e->path, l.chunk_id, zr_os_strerror(prc));
            else
                zre_fdtab_grow(&e->chunks, l.chunk_id, (uint64_t)l.offset + l.phys_length);
            pay_used += l.phys_length;
        }
        if (rc == 0)
            rc = zre_write_locs(e, zre_get_u64(ents + i * JOURNAL_ENTRY),
                                ents + i * JOURNAL_ENTRY + 8, 1);
    }
    if (rc == 0)
        rc = zre_write_meta(e, new_len, tchunk, toff);
    if (rc == 0) {
        e->tail_chunk = tchunk;
        e->tail_offset = toff;
        atomic_store(&e->length, new_len);
        *length = new_len;
        rc = zre_sync_all(e);
    }
    if (rc == 0)
        rc = journal_remove(e);
out:
    free(raw);
    free(jp);
    return rc;
}

/* A maintenance call failed (status `rc`, detail set) after its journal
 * became durable, so the table or bytes may be half-updated. Finish it
 * in-process through the same replay a crash recovery uses; if that is
 * impossible (an fsync already failed: the kernel may have dropped dirty
 * pages, so nothing it reports now can be trusted) or fails too, poison
 * the handle. Returns ZR_OK when the redo completed the call, else the
 * (poisoning) error. */
static int redo_or_poison(zre_engine *e, int rc)
{
    if (e->fsync_failed)
        return zre_poison(e, rc);
    zre_err err;
    zre_err_capture(&err, rc);
    uint64_t len = atomic_load(&e->length);
    int rrc = zre_journal_recover(e, &len);
    if (rrc == 0 && !e->fsync_failed)
        return ZR_OK;
    zre_err redo;
    zre_err_capture(&redo, rrc);
    zre_err_raise_with(&err, "; redoing it from its journal failed too: %s", redo.msg);
    return zre_poison(e, rc);
}

/* -------------------------------------------------------------- delete */

static int cmp_desc(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? 1 : x > y ? -1 : 0;
}

static int delete_locked(zre_engine *e, const uint64_t *index, uint64_t count)
{
    uint64_t len = atomic_load(&e->length);
    for (uint64_t i = 0; i < count; i++)
        if (index[i] >= len)
            return zr_set_error(ZR_ERANGE, "delete: index %" PRIu64 " out of range for store of %"
                                PRIu64 " records (position %" PRIu64 "); nothing deleted",
                                index[i], len, i);
    uint64_t *t = malloc((size_t)count * sizeof *t);
    if (!t)
        return zr_set_error(ZR_ENOMEM, "delete: out of memory for %" PRIu64 " indices", count);
    memcpy(t, index, (size_t)count * sizeof *t);
    qsort(t, (size_t)count, sizeof *t, cmp_desc);
    uint64_t k = 0;
    for (uint64_t i = 0; i < count; i++)
        if (k == 0 || t[k - 1] != t[i])
            t[k++] = t[i];
    uint64_t new_len = len - k;
    /* The last k entries, the only sources of swaps. Entries below new_len
     * are only ever written, never read, so they need no copy. */
    unsigned char *tail = malloc((size_t)k * ZRE_LOC_ENTRY_SIZE);
    jentry *out = malloc((size_t)k * sizeof *out);
    int rc = ZR_OK;
    if (!tail || !out)
        rc = zr_set_error(ZR_ENOMEM, "delete: out of memory for %" PRIu64 " entries", k);
    if (rc == 0)
        rc = zre_read_locs(e, new_len, tail, k);
    uint64_t nout = 0;
    if (rc == 0) {
        uint64_t cur = len;
        for (uint64_t i = 0; i < k; i++, cur--) {
            uint64_t last = cur - 1;
            if (t[i] == last)
                continue;
            const unsigned char *src = tail + (last - new_len) * ZRE_LOC_ENTRY_SIZE;
            if (t[i] >= new_len) {
                memcpy(tail + (t[i] - new_len) * ZRE_LOC_ENTRY_SIZE, src, ZRE_LOC_ENTRY_SIZE);
            } else {
                out[nout].index = t[i];
                zre_loc_decode(&out[nout].loc, src);
                nout++;
            }
        }
    }
    if (rc == 0 && nout == 0) {
        /* Only the last records go: a header write, nothing to journal. */
        rc = zre_commit_meta(e, new_len, e->tail_chunk, e->tail_offset);
        if (rc == 0)
            atomic_store(&e->length, new_len);
    } else if (rc == 0) {
        rc = journal_write(e, 0, new_len, e->tail_chunk, e->tail_offset, out, nout, NULL, 0);
        if (rc == 0) {
            /* From here on the journal is durable: whatever fails, the
             * call is finished from it (or the handle refuses). */
            for (uint64_t i = 0; rc == 0 && i < nout; i++) {
                unsigned char enc[ZRE_LOC_ENTRY_SIZE];
                zre_loc_encode(enc, &out[i].loc);
                rc = zre_write_locs(e, out[i].index, enc, 1);
            }
            if (rc == 0)
                rc = zre_write_meta(e, new_len, e->tail_chunk, e->tail_offset);
            if (rc == 0)
                atomic_store(&e->length, new_len);
            /* The applied state must be durable before the journal goes, or
             * a power loss could replay it over later appends. */
            if (rc == 0)
                rc = zre_sync_all(e);
            if (rc == 0)
                rc = journal_remove(e);
            if (rc < 0)
                rc = redo_or_poison(e, rc);
        }
    }
    free(t);
    free(tail);
    free(out);
    return rc;
}

ZRE_API int zre_delete(zre_engine *e, const uint64_t *index, uint64_t count)
{
    if (!e || (count > 0 && !index))
        return zr_set_error(ZR_EINVAL, "delete: NULL argument");
    if (e->readonly)
        return zr_set_error(ZR_EUNSUPPORTED, "delete: store %s is open read-only", e->path);
    if (count == 0)
        return ZR_OK;
    zrp_mutex_lock(&e->writer);
    int rc = zre_enter_maint(e, "delete");
    if (rc == 0) {
        e->op = "delete";
        e->fsync_failed = false;
        rc = delete_locked(e, index, count);
        e->fsync_failed = false;
        e->op = NULL;
        zre_leave_maint(e);
    }
    zrp_mutex_unlock(&e->writer);
    return rc;
}

/* ------------------------------------------------------------- compact */

typedef struct prec {
    uint64_t index;
    zre_loc loc;
} prec;

static int cmp_phys(const void *a, const void *b)
{
    const zre_loc *x = &((const prec *)a)->loc, *y = &((const prec *)b)->loc;
    if (x->chunk_id != y->chunk_id)
        return x->chunk_id < y->chunk_id ? -1 : 1;
    return x->offset < y->offset ? -1 : x->offset > y->offset ? 1 : 0;
}

typedef struct cbatch {
    jentry *ent;           /* new locations */
    uint64_t n;
    unsigned char *payload;
    uint64_t bytes;
    uint32_t chunk;        /* every move of a batch lands in this chunk */
    uint64_t min_old;      /* lowest old offset in `chunk` among the moves */
    bool conflict;         /* a move overwrites bytes a pending entry uses */
    bool journaled;        /* some batch of this compact wrote journal.zr */
} cbatch;

static int fsync_open(zre_engine *e, zre_fdtab *t, uint64_t id, const char *ext)
{
    zrp_file f = zre_fdtab_get(t, id);
    if (f.fd < 0)
        return ZR_OK;
    int prc = zrp_fsync(f);
    if (prc < 0) {
        e->fsync_failed = true;
        return zr_set_error(ZR_EIO, "compact: fsync of %s/%" PRIu64 ".%s failed: %s", e->path, id,
                            ext, zr_os_strerror(prc));
    }
    return ZR_OK;
}

static int flush_batch(zre_engine *e, cbatch *b)
{
    if (b->n == 0)
        return ZR_OK;
    int rc = ZR_OK;
    uint64_t len = atomic_load(&e->length);
    if (b->conflict) {
        /* Some move overwrites bytes that a not-yet-updated entry still
         * points at (its own old bytes included): log the bytes first. */
        rc = journal_write(e, JOURNAL_PAYLOADS, len, e->tail_chunk, e->tail_offset, b->ent, b->n,
                           b->payload, b->bytes);
        b->journaled = true;
    }
    zrp_file f = zre_fdtab_get(&e->chunks, b->chunk);
    uint64_t at = 0;
    for (uint64_t i = 0; rc == 0 && i < b->n; i++) {
        int prc = zrp_pwrite_all(f, b->payload + at, b->ent[i].loc.phys_length, b->ent[i].loc.offset);
        if (prc < 0)
            rc = zr_set_error(ZR_EIO, "compact: writing record %" PRIu64 " to %s/%u.chunk at offset "
                              "%u failed: %s", b->ent[i].index, e->path, b->chunk,
                              b->ent[i].loc.offset, zr_os_strerror(prc));
        else
            zre_fdtab_grow(&e->chunks, b->chunk,
                           (uint64_t)b->ent[i].loc.offset + b->ent[i].loc.phys_length);
        at += b->ent[i].loc.phys_length;
    }
    /* Bytes durable before the entries that point at them; entries durable
     * before a later batch may overwrite the old bytes. */
    if (rc == 0)
        rc = fsync_open(e, &e->chunks, b->chunk, "chunk");
    for (uint64_t i = 0; rc == 0 && i < b->n; i++) {
        unsigned char enc[ZRE_LOC_ENTRY_SIZE];
        zre_loc_encode(enc, &b->ent[i].loc);
        rc = zre_write_locs(e, b->ent[i].index, enc, 1);
    }
    uint64_t nseg = (len + ZRE_INT_SEG_ENTRIES - 1) / ZRE_INT_SEG_ENTRIES;
    for (uint64_t s = 0; rc == 0 && s < nseg; s++)
        rc = fsync_open(e, &e->locs, s, "loc");
    b->n = 0;
    b->bytes = 0;
    b->min_old = UINT64_MAX;
    b->conflict = false;
    return rc;
}

/* Delete numbered files from `first` up while they exist (or are open). */
static int remove_from(zre_engine *e, zre_fdtab *t, uint64_t first, uint64_t at_least_to,
                       const char *ext)
{
    char *p = malloc(strlen(e->path) + 40);
    if (!p)
        return zr_set_error(ZR_ENOMEM, "compact: out of memory for a path");
    int rc = ZR_OK;
    for (uint64_t id = first;; id++) {
        zre_file_path(e, p, strlen(e->path) + 40, id, ext);
        bool open = zre_fdtab_get(t, id).fd >= 0;
        if (!open && id > at_least_to && !zrp_path_exists(p))
            break;
        zre_fdtab_drop(t, id);
        int prc = zrp_unlink(p);
        if (prc < 0 && prc != -ENOENT) {
            rc = zr_set_error(ZR_EIO, "compact: cannot delete %s: %s", p, zr_os_strerror(prc));
            break;
        }
    }
    free(p);
    return rc;
}

static int truncate_file(zre_engine *e, zre_fdtab *t, uint64_t id, const char *ext, uint64_t size)
{
    int rc = zre_open_numbered(e, t, id, ext, false);
    if (rc <= 0)
        return rc; /* missing is fine: nothing to release */
    zrp_file f = zre_fdtab_get(t, id);
    int prc = zrp_truncate(f, size);
    /* Exclusive use: no gather reads the mapping while it shrinks; the
     * known size follows the file at once, so no later read passes it. */
    if (prc == 0)
        zre_fdtab_set_size(t, id, size);
    if (prc == 0 && (prc = zrp_fsync(f)) < 0)
        e->fsync_failed = true;
    if (prc < 0)
        return zr_set_error(ZR_EIO, "compact: cannot truncate %s/%" PRIu64 ".%s to %" PRIu64
                            " bytes: %s", e->path, id, ext, size, zr_os_strerror(prc));
    return ZR_OK;
}

static int compact_locked(zre_engine *e)
{
    uint64_t len = atomic_load(&e->length);
    if (len > SIZE_MAX / sizeof(prec))
        return zr_set_error(ZR_ENOMEM, "compact: %" PRIu64 " records do not fit in memory", len);
    prec *r = malloc((size_t)(len ? len : 1) * sizeof *r);
    unsigned char *buf = malloc(4096u * ZRE_LOC_ENTRY_SIZE);
    cbatch b = {0};
    b.ent = malloc(COMPACT_BATCH_RECORDS * sizeof *b.ent);
    b.min_old = UINT64_MAX;
    int rc = ZR_OK;
    if (!r || !buf || !b.ent)
        rc = zr_set_error(ZR_ENOMEM, "compact: out of memory for %" PRIu64 " table entries", len);
    for (uint64_t i = 0; rc == 0 && i < len; i += 4096) {
        uint64_t n = len - i < 4096 ? len - i : 4096;
        rc = zre_read_locs(e, i, buf, n);
        for (uint64_t j = 0; rc == 0 && j < n; j++) {
            r[i + j].index = i + j;
            zre_loc_decode(&r[i + j].loc, buf + j * ZRE_LOC_ENTRY_SIZE);
            const zre_loc *l = &r[i + j].loc;
            const char *why = zre_loc_problem(l, e->codec);
            if (!why && (l->chunk_id > e->tail_chunk ||
                         zre_fdtab_get(&e->chunks, l->chunk_id).fd < 0))
                why = "points at a chunk the store does not hold";
            if (!why && l->chunk_id == e->tail_chunk &&
                (uint64_t)l->offset + l->phys_length > e->tail_offset)
                why = "extends past the write frontier";
            if (why)
                rc = zr_set_error(ZR_ECORRUPT, "compact: record %" PRIu64 " of %s has a bad table "
                                  "entry (chunk %u, offset %u, %u bytes): %s; nothing moved",
                                  i + j, e->path, l->chunk_id, l->offset, l->phys_length, why);
        }
    }
    if (rc == 0)
        qsort(r, (size_t)len, sizeof *r, cmp_phys);
    for (uint64_t i = 1; rc == 0 && i < len; i++) {
        const zre_loc *p = &r[i - 1].loc, *q = &r[i].loc;
        if (p->chunk_id == q->chunk_id && (uint64_t)p->offset + p->phys_length > q->offset)
            rc = zr_set_error(ZR_ECORRUPT, "compact: records %" PRIu64 " and %" PRIu64 " of %s "
                              "overlap in %u.chunk; nothing moved", r[i - 1].index, r[i].index,
                              e->path, q->chunk_id);
    }

    uint32_t fc = 0, fo = 0;
    size_t pay_cap = 0;
    uint64_t interrupted = UINT64_MAX; /* records visited when zre_interrupt stopped it */
    if (rc == 0 && atomic_load_explicit(&e->interrupt, memory_order_relaxed))
        interrupted = 0;
    for (uint64_t i = 0; rc == 0 && interrupted == UINT64_MAX && i < len; i++) {
        const zre_loc *old = &r[i].loc;
        uint32_t size = old->phys_length;
        /* Physical order guarantees the new place is never above the old:
         * a record that does not fit the rest of chunk fc lives in a
         * later chunk. */
        if ((uint64_t)fo + size > ZRE_CHUNK_USABLE) {
            fc++;
            fo = 0;
        }
        if (b.n > 0 && fc != b.chunk)
            rc = flush_batch(e, &b);
        if (rc < 0)
            break;
        b.chunk = fc;
        uint32_t at = fo;
        fo += size;
        if (old->chunk_id == fc && old->offset == at)
            continue; /* already in place */
        if (b.n > 0 && (b.n == COMPACT_BATCH_RECORDS || b.bytes + size > COMPACT_BATCH_BYTES)) {
            rc = flush_batch(e, &b);
            if (rc < 0)
                break;
            /* Between batches every entry points at its record's bytes:
             * a safe point to stop (the frontier is not moved). */
            if (atomic_load_explicit(&e->interrupt, memory_order_relaxed)) {
                interrupted = i;
                break;
            }
        }
        if (b.bytes + size > pay_cap) {
            size_t ncap = (size_t)(b.bytes + size);
            if (ncap < (size_t)COMPACT_BATCH_BYTES)
                ncap = (size_t)COMPACT_BATCH_BYTES;
            unsigned char *np = realloc(b.payload, ncap);
            if (!np) {
                rc = zr_set_error(ZR_ENOMEM, "compact: out of memory for %zu bytes of records", ncap);
                break;
            }
            b.payload = np;
            pay_cap = ncap;
        }
        int prc = zrp_pread_all(zre_fdtab_get(&e->chunks, old->chunk_id), b.payload + b.bytes, size,
                                old->offset);
        if (prc < 0) {
            rc = zr_set_error(zre_io_status(prc, ZR_ECORRUPT), "compact: reading record %" PRIu64
                              " (%u bytes at %s/%u.chunk offset %u) failed: %s", r[i].index, size,
                              e->path, old->chunk_id, old->offset,
                              prc == ZRP_ESHORT ? "chunk file too short" : zr_os_strerror(prc));
            break;
        }
        if (old->chunk_id == fc) {
            if ((uint64_t)at + size > old->offset)
                b.conflict = true; /* overlaps its own old bytes */
            if (b.min_old == UINT64_MAX)
                b.min_old = old->offset;
        }
        if (b.min_old != UINT64_MAX && (uint64_t)at + size > b.min_old)
            b.conflict = true;
        b.ent[b.n].index = r[i].index;
        b.ent[b.n].loc = *old;
        b.ent[b.n].loc.chunk_id = fc;
        b.ent[b.n].loc.offset = at;
        b.n++;
        b.bytes += size;
    }
    if (rc == 0)
        rc = flush_batch(e, &b);
    /* The journal must be gone before the header shrinks the frontier: a
     * replay would restore the old frontier over truncated chunks. */
    if (rc == 0 && b.journaled)
        rc = journal_remove(e);
    if (rc < 0 && b.journaled) {
        zre_err err;
        zre_err_capture(&err, rc);
        /* A batch may be half-applied: finish it from its journal (the same
         * replay a crash recovery runs), which also removes the journal;
         * the store is then intact at its last commit. */
        int rrc = redo_or_poison(e, rc);
        if (rrc == 0) {
            zre_err_raise_with(&err, "; the interrupted batch was completed from its journal and "
                               "every record is intact: run compact again to finish");
        } else {
            rc = rrc;
        }
    }
    if (rc == 0 && interrupted != UINT64_MAX)
        rc = zr_set_error(ZR_EINTR, "compact: interrupted after %" PRIu64 " of %" PRIu64 " records of %s; "
                          "every record is intact, no space is reclaimed yet: run compact again to "
                          "finish", interrupted, len, e->path);
    uint32_t old_tail = e->tail_chunk;
    if (rc == 0) {
        rc = zre_commit_meta(e, len, fc, fo);
        int prc = rc == 0 ? zrp_fsync(e->meta) : 0;
        if (prc < 0) {
            e->fsync_failed = true;
            rc = zr_set_error(ZR_EIO, "compact: fsync of %s/meta.zr failed: %s", e->path,
                              zr_os_strerror(prc));
        }
    }
    if (rc == 0) {
        e->tail_chunk = fc;
        e->tail_offset = fo;
        rc = remove_from(e, &e->chunks, (uint64_t)fc + 1, old_tail, "chunk");
    }
    if (rc == 0)
        rc = truncate_file(e, &e->chunks, fc, "chunk", fo);
    uint64_t nseg = (len + ZRE_INT_SEG_ENTRIES - 1) / ZRE_INT_SEG_ENTRIES;
    if (rc == 0)
        rc = remove_from(e, &e->locs, nseg, nseg, "loc");
    if (rc == 0 && nseg > 0)
        rc = truncate_file(e, &e->locs, nseg - 1, "loc",
                           (len - (nseg - 1) * ZRE_INT_SEG_ENTRIES) * ZRE_LOC_ENTRY_SIZE);
    if (rc == 0) {
        int prc = zrp_fsync_dir(e->path);
        if (prc < 0) {
            e->fsync_failed = true;
            rc = zr_set_error(ZR_EIO, "compact: fsync of directory %s failed: %s", e->path,
                              zr_os_strerror(prc));
        }
    }
    /* A failed fsync is never retried (its dirty pages may be gone). */
    if (rc < 0 && e->fsync_failed && !atomic_load(&e->poisoned))
        rc = zre_poison(e, rc);
    free(r);
    free(buf);
    free(b.ent);
    free(b.payload);
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
    if (e->readonly)
        return zr_set_error(ZR_EUNSUPPORTED, "compact: store %s is open read-only", e->path);
    zrp_mutex_lock(&e->writer);
    int rc = zre_enter_maint(e, "compact");
    if (rc == 0) {
        e->op = "compact";
        e->fsync_failed = false;
        rc = compact_locked(e);
        e->fsync_failed = false;
        e->op = NULL;
        zre_leave_maint(e);
    }
    zrp_mutex_unlock(&e->writer);
    return rc;
}

/* --------------------------------------------------------------- check */

static int check_locked(zre_engine *e, uint64_t index)
{
    uint64_t len = zre_length(e);
    if (index >= len)
        return zr_set_error(ZR_ERANGE, "check: index %" PRIu64 " out of range for store of %" PRIu64
                            " records", index, len);
    unsigned char enc[ZRE_LOC_ENTRY_SIZE];
    int rc = zre_read_locs(e, index, enc, 1);
    if (rc < 0)
        return rc;
    zre_loc l;
    zre_loc_decode(&l, enc);
    /* The frontier is writer state; take the lock for a consistent copy. */
    zrp_mutex_lock(&e->writer);
    uint32_t tc = e->tail_chunk, to = e->tail_offset;
    zrp_mutex_unlock(&e->writer);
    const char *why = zre_loc_problem(&l, e->codec);
    if (!why && (l.chunk_id > tc || !zre_fent_open(zre_fdtab_ent(&e->chunks, l.chunk_id))))
        why = "points at a chunk the store does not hold";
    uint64_t end = (uint64_t)l.offset + l.phys_length;
    if (!why && l.chunk_id == tc && end > to)
        why = "extends past the write frontier";
    uint64_t size = 0;
    if (!why && zre_fent_size(&e->chunks, l.chunk_id, &size) == 0 && end > size)
        why = "extends past the end of its chunk file";
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
