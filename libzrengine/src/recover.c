/*
 * recover.c - putting a store back to a committed state, in one place:
 *
 *   - journal replay: a delete or compact interrupted after its journal
 *     became durable is finished from journal.zr, by the next writable
 *     open after a crash or in-process after a failure (SQLite's one
 *     recovery mechanism for both);
 *   - the durable prefix (ZRE_OPEN_RECOVER): after a power loss that kept
 *     a header newer than the table entries or bytes it commits, keep the
 *     longest prefix of records that reached the disk.
 *
 * Both end with the same commit step (zre_commit_durable: files, header,
 * meta.zr fsync). The check of the records appended since the last sync,
 * which tells a plain open that the durable prefix is needed, lives here
 * too, beside the recovery that uses the same rule.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "engine_internal.h"

/* ------------------------------------------------------- journal replay */

/* Redo a loaded journal: bytes, then table entries, then the commit. */
static int journal_replay(zre_engine *e, const zre_journal *j)
{
    const unsigned char *pay = j->payload;
    int rc = ZR_OK;
    for (uint64_t i = 0; i < j->head.n && rc == 0; i++) {
        const zre_loc *l = &j->ent[i].loc;
        if (j->head.payloads) {
            rc = zre_ensure_chunk(e, l->chunk_id);
            int prc = rc < 0 ? 0 : zrp_pwrite_all(zre_fdtab_get(&e->chunks, l->chunk_id), pay,
                                                   l->phys_length, l->offset);
            if (prc < 0)
                rc = zr_set_error(ZR_EIO, "%s: replaying journal.zr into %s/%u.chunk failed: %s",
                                  zre_op(e), e->path, l->chunk_id, zr_os_strerror(prc));
            if (rc == 0)
                zre_fdtab_grow(&e->chunks, l->chunk_id, (uint64_t)l->offset + l->phys_length);
            pay += l->phys_length;
        }
        if (rc == 0)
            rc = zre_write_loc(e, j->ent[i].index, l);
    }
    if (rc == 0)
        rc = zre_commit_durable(e, &j->head.target);
    return rc;
}

int zre_journal_recover(zre_engine *e)
{
    zre_state now = zre_now(e);
    zre_journal j;
    int rc = zre_journal_load(e, now.length, &j);
    if (rc <= 0)
        return rc;
    /* Which commit is it for? Only the header it was written against (the
     * call never reached meta.zr) or the one it ends with (it did, but the
     * journal was not yet removed) may be redone; any other header means
     * later commits happened after the call completed, and replaying the
     * journal's header would drop them. */
    bool at_base = zre_state_eq(&now, &j.head.base);
    bool at_target = zre_state_eq(&now, &j.head.target);
    if (!at_base && !at_target) {
        rc = e->readonly ? ZR_OK : zre_journal_remove(e);
    } else if (e->readonly) {
        rc = zr_set_error(ZR_ESTATE, "%s: store %s has an unfinished %s recorded in %s/journal.zr "
                          "(a writer stopped before completing it); a read-only open never "
                          "writes, so open the store writable once to recover it", zre_op(e),
                          e->path, zre_jop_name(j.head.op), e->path);
    } else {
        rc = journal_replay(e, &j);
        if (rc == 0)
            rc = zre_journal_remove(e);
    }
    zre_journal_free(&j);
    return rc;
}

int zre_redo_or_poison(zre_engine *e, int rc)
{
    /* After a failed fsync the kernel may have dropped dirty pages, so
     * nothing it reports from now on can be trusted. */
    if (e->fsync_failed)
        return zre_poison(e, rc);
    zre_err err;
    zre_err_capture(&err, rc);
    int rrc = zre_journal_recover(e);
    if (rrc == 0 && !e->fsync_failed)
        return ZR_OK;
    zre_err redo;
    zre_err_capture(&redo, rrc);
    zre_err_raise_with(&err, "; redoing it from its journal failed too: %s", redo.msg);
    return zre_poison(e, rc);
}

/* ------------------------------------------------- records since a sync */

/* Where an append after `at` would have put a record with entry `l`, and
 * whether `l` is there: the one rule that tells an entry an append wrote
 * from one left over from before (a delete leaves entries past the new
 * length, pointing below the frontier) or one that never reached the
 * disk. Advances *at past it. NULL, or what is wrong. */
static const char *chain_problem(zre_engine *e, const zre_loc *l, zre_pos *at, zre_pos tail)
{
    const char *why = zre_loc_check(e, l, tail, true);
    if (why)
        return why;
    bool full;
    zre_pos want = zre_place(*at, l->phys_length, &full);
    if (full || l->chunk_id != want.chunk || l->offset != want.offset)
        return "not where an append after the last sync puts it";
    *at = zre_loc_end(l);
    return NULL;
}

int zre_check_unsynced(zre_engine *e, const zre_header *h, uint64_t from)
{
    const uint64_t length = h->now.length;
    if (h->legacy)
        return ZR_OK; /* an older version's header says nothing of syncs */
    zre_pos at = h->synced.tail;
    if (from <= h->synced.length) {
        from = h->synced.length;
    } else {
        /* Entries below `from` passed this check under an earlier header:
         * the chain goes on from the end of the one before. */
        zre_loc prev;
        int rc = zre_read_loc(e, from - 1, &prev);
        if (rc < 0)
            return rc;
        at = zre_loc_end(&prev);
    }
    for (uint64_t i = from; i < length; i++) {
        zre_loc l;
        int rc = zre_read_loc(e, i, &l);
        const char *why = rc == ZR_ECORRUPT ? "the table entry is missing" : NULL;
        if (rc < 0 && !why)
            return rc;
        if (!why)
            why = chain_problem(e, &l, &at, h->now.tail);
        if (why) {
            e->files_short = true;
            return zr_set_error(ZR_ENOTSTORE, "%s: %s is malformed: record %" PRIu64 ", appended "
                                "after the last sync (of %" PRIu64 " records), did not fully reach "
                                "the disk: %s (%s/%" PRIu64 ".loc entry %" PRIu64 ")", zre_op(e),
                                e->path, i, h->synced.length, why, e->path,
                                i / ZRE_INT_SEG_ENTRIES, i % ZRE_INT_SEG_ENTRIES);
        }
    }
    return ZR_OK;
}

/* ------------------------------------------------------- durable prefix */

/* Entry i as found on disk: 1 read, 0 missing (its segment is missing or
 * too short), or a negative status. */
static int read_on_disk(zre_engine *e, uint64_t i, zre_loc *l)
{
    int orc = zre_open_numbered(e, &e->locs, i / ZRE_INT_SEG_ENTRIES, false);
    if (orc <= 0)
        return orc;
    int rc = zre_read_loc(e, i, l);
    return rc == ZR_ECORRUPT ? 0 : rc < 0 ? rc : 1;
}

/* Records [0, upto) whose sync returned: kept while each entry is valid
 * and its bytes lie inside an existing chunk file. *keep, and *end past
 * the furthest of them. */
static int keep_synced(zre_engine *e, uint64_t upto, uint64_t *keep, zre_pos *end)
{
    static const zre_pos nowhere = {UINT32_MAX, UINT32_MAX};
    for (uint64_t i = 0; i < upto; i++) {
        zre_loc l;
        int rc = read_on_disk(e, i, &l);
        if (rc <= 0)
            return rc;
        if (!zre_loc_problem(&l, e->codec)) {
            rc = zre_open_numbered(e, &e->chunks, l.chunk_id, false);
            if (rc < 0)
                return rc;
        }
        if (zre_loc_check(e, &l, nowhere, true))
            return ZR_OK;
        *keep = i + 1;
        if (zre_pos_less(*end, zre_loc_end(&l)))
            *end = zre_loc_end(&l);
    }
    return ZR_OK;
}

/* Records [from, upto) appended after the last sync: kept while each lies
 * along the append chain from *at (which ends past the last kept). */
static int keep_unsynced(zre_engine *e, uint64_t from, uint64_t upto, zre_pos tail, uint64_t *keep,
                         zre_pos *at)
{
    for (uint64_t i = from; i < upto; i++) {
        zre_loc l;
        int rc = read_on_disk(e, i, &l);
        if (rc <= 0)
            return rc;
        if (!zre_loc_problem(&l, e->codec) && l.chunk_id <= tail.chunk) {
            rc = zre_open_numbered(e, &e->chunks, l.chunk_id, false);
            if (rc < 0)
                return rc;
        }
        if (chain_problem(e, &l, at, tail))
            return ZR_OK;
        *keep = i + 1;
    }
    return ZR_OK;
}

/* 1 when chunk `at.chunk` holds at least `at.offset` bytes (or nothing is
 * needed of it), 0 when it does not, or a negative status. */
static int chunk_reaches(zre_engine *e, zre_pos at)
{
    if (at.offset == 0)
        return 1;
    int rc = zre_open_numbered(e, &e->chunks, at.chunk, false);
    if (rc <= 0)
        return rc;
    return atomic_load(&zre_fdtab_ent(&e->chunks, at.chunk)->size) >= at.offset;
}

int zre_recover_durable_prefix(zre_engine *e, const zre_header *h)
{
    const uint64_t synced = h->legacy ? h->now.length : h->synced.length;
    uint64_t keep = 0;
    zre_pos end = {0, 0};
    int rc = keep_synced(e, synced, &keep, &end);
    /* Every synced record is there: the unsynced ones follow from the
     * synced frontier, when its chunk still reaches it. */
    if (rc == 0 && keep == synced && !h->legacy && (rc = chunk_reaches(e, h->synced.tail)) > 0) {
        zre_pos at = h->synced.tail;
        rc = keep_unsynced(e, synced, h->now.length, h->now.tail, &keep, &at);
        if (zre_pos_less(end, at))
            end = at;
    }
    /* Chunks up to the new tail must all exist (earlier ones may hold no
     * live record after a compact): create any missing, empty. */
    for (uint32_t c = 0; c <= end.chunk && rc >= 0; c++)
        rc = zre_ensure_chunk(e, c);
    if (rc < 0)
        return rc;
    zre_state target = {keep, end};
    return zre_commit_durable(e, &target);
}
