/*
 * journal.c - journal.zr, the redo log of delete and compact: its header
 * as a struct with an encoder and a decoder, writing it durably, loading
 * and checking it (the one check of a journal entry), and removing it.
 * Replaying it is recovery's job (recover.c).
 *
 * journal.zr (docs/FORMAT.md) holds the record-table entries (and, for
 * compact, the record bytes) a call is about to write, plus the header it
 * will end with and the one it was written against. It is written whole
 * and renamed into place before the first in-place write, so after a crash
 * the next writable open replays it and the store is exactly as if the
 * call had completed.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "engine_internal.h"

#define MAGIC "ZRJ2"
#define MAGIC_V1 "ZRJ1"
#define HEAD 56u
#define ENTRY 24u
#define FLAG_PAYLOADS 1u

const char *zre_jop_name(zre_jop op) { return op == ZRE_JOP_COMPACT ? "compact" : "delete"; }

/* ---------------------------------------------------------------- header */

static void head_encode(unsigned char out[HEAD], const zre_jhead *h)
{
    memset(out, 0, HEAD);
    memcpy(out, MAGIC, 4);
    zre_put_u32(out + 4, h->payloads ? FLAG_PAYLOADS : 0u);
    zre_put_u64(out + 8, h->target.length);
    zre_put_u32(out + 16, h->target.tail.chunk);
    zre_put_u32(out + 20, h->target.tail.offset);
    zre_put_u64(out + 24, h->n);
    zre_put_u64(out + 32, h->base.length);
    zre_put_u32(out + 40, h->base.tail.chunk);
    zre_put_u32(out + 44, h->base.tail.offset);
    zre_put_u32(out + 48, (uint32_t)h->op);
}

/* Decode a header (magic already checked); NULL, or what is wrong. */
static const char *head_decode(zre_jhead *h, const unsigned char in[HEAD])
{
    uint32_t flags = zre_get_u32(in + 4), op = zre_get_u32(in + 48);
    h->payloads = (flags & FLAG_PAYLOADS) != 0;
    h->target = (zre_state){zre_get_u64(in + 8), {zre_get_u32(in + 16), zre_get_u32(in + 20)}};
    h->n = zre_get_u64(in + 24);
    h->base = (zre_state){zre_get_u64(in + 32), {zre_get_u32(in + 40), zre_get_u32(in + 44)}};
    h->op = (zre_jop)op;
    if (flags & ~FLAG_PAYLOADS)
        return "unknown flags";
    if (op != ZRE_JOP_DELETE && op != ZRE_JOP_COMPACT)
        return "unknown operation";
    if (zre_get_u32(in + 52) != 0)
        return "reserved field not zero";
    if (h->target.tail.offset > ZRE_CHUNK_USABLE)
        return "tail beyond the chunk capacity";
    return NULL;
}

static void entry_encode(unsigned char out[ENTRY], const zre_jentry *j)
{
    zre_put_u64(out, j->index);
    zre_loc_encode(out + 8, &j->loc);
}

/* --------------------------------------------------------------- writing */

int zre_journal_write(zre_engine *e, const zre_jhead *h, const zre_jentry *ent,
                      const unsigned char *payload, uint64_t payload_bytes)
{
    uint64_t total = HEAD + h->n * ENTRY + payload_bytes + 8;
    unsigned char *buf = total <= SIZE_MAX ? malloc((size_t)total) : NULL;
    char *jp = zre_join(e, "journal.zr");
    if (!buf || !jp) {
        free(buf);
        free(jp);
        return zr_set_error(ZR_ENOMEM, "%s: out of memory for a %" PRIu64 "-byte journal",
                            zre_op(e), total);
    }
    head_encode(buf, h);
    unsigned char *p = buf + HEAD;
    for (uint64_t i = 0; i < h->n; i++, p += ENTRY)
        entry_encode(p, &ent[i]);
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
        int jrc = zre_journal_remove(e);
        zre_err_raise_with(&err, "%s", jrc < 0 ? " (and removing it failed)" : "");
        if (jrc < 0)
            rc = zre_poison(e, rc);
    }
    free(buf);
    free(jp);
    return rc;
}

int zre_journal_remove(zre_engine *e)
{
    char *jp = zre_join(e, "journal.zr");
    if (!jp)
        return zr_set_error(ZR_ENOMEM, "%s: out of memory for a path", zre_op(e));
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

/* --------------------------------------------------------------- loading */

/* The one check of a journal entry: its table entry's own fields, its
 * index and chunk against the journal's target, its payload within the
 * bytes left. NULL, or what is wrong. */
static const char *entry_problem(const zre_engine *e, const zre_jhead *h, const zre_jentry *j,
                                 uint64_t pay_left)
{
    const char *why = zre_loc_problem(&j->loc, e->codec);
    if (!why && j->index >= h->target.length)
        why = "index beyond the journal's length";
    if (!why && j->loc.chunk_id > h->target.tail.chunk)
        why = "chunk beyond the journal's tail";
    if (!why && h->payloads && j->loc.phys_length > pay_left)
        why = "payload missing";
    return why;
}

/* Check the loaded bytes and decode them into *j (j->raw holds them). */
static int journal_parse(zre_engine *e, const char *jp, size_t len, zre_journal *j)
{
    const char *op = zre_op(e);
    const unsigned char *b = j->raw;
    /* The journal was renamed into place whole, so any damage is real
     * corruption: refuse rather than guess. */
    if (len >= 4 && memcmp(b, MAGIC_V1, 4) == 0)
        return zr_set_error(ZR_ENOTSTORE, "%s: %s is an old-format journal (ZRJ1) that does not "
                            "say which commit it applies to; it cannot be replayed safely", op, jp);
    if (len < HEAD + 8 || memcmp(b, MAGIC, 4) != 0)
        return zr_set_error(ZR_ENOTSTORE, "%s: %s is damaged: %zu bytes without a valid header",
                            op, jp, len);
    if (zre_get_u64(b + len - 8) != zre_fnv1a64(ZRE_FNV64_INIT, b, len - 8))
        return zr_set_error(ZR_ENOTSTORE, "%s: %s is damaged: checksum mismatch", op, jp);
    const char *why = head_decode(&j->head, b);
    if (!why && j->head.n > (len - HEAD - 8) / ENTRY)
        why = "more entries than bytes";
    if (why)
        return zr_set_error(ZR_ENOTSTORE, "%s: %s is damaged: %s", op, jp, why);
    const uint64_t n = j->head.n;
    j->ent = malloc((size_t)(n ? n : 1) * sizeof *j->ent);
    if (!j->ent)
        return zr_set_error(ZR_ENOMEM, "%s: out of memory for %" PRIu64 " journal entries", op, n);
    j->payload = b + HEAD + n * ENTRY;
    uint64_t pay_left = (uint64_t)(b + len - 8 - j->payload);
    for (uint64_t i = 0; i < n; i++) {
        const unsigned char *p = b + HEAD + i * ENTRY;
        j->ent[i].index = zre_get_u64(p);
        zre_loc_decode(&j->ent[i].loc, p + 8);
        why = entry_problem(e, &j->head, &j->ent[i], pay_left);
        if (why)
            return zr_set_error(ZR_ENOTSTORE, "%s: %s is damaged: entry %" PRIu64 " (index %"
                                PRIu64 "): %s", op, jp, i, j->ent[i].index, why);
        if (j->head.payloads)
            pay_left -= j->ent[i].loc.phys_length;
    }
    if (pay_left != 0)
        return zr_set_error(ZR_ENOTSTORE, "%s: %s is damaged: %" PRIu64 " stray payload bytes", op,
                            jp, pay_left);
    return ZR_OK;
}

int zre_journal_load(zre_engine *e, uint64_t max_entries, zre_journal *j)
{
    memset(j, 0, sizeof *j);
    char *jp = zre_join(e, "journal.zr");
    if (!jp)
        return zr_set_error(ZR_ENOMEM, "%s: out of memory for a path", zre_op(e));
    if (!zrp_path_exists(jp)) {
        free(jp);
        return 0;
    }
    /* Bounded: a journal never holds more entries than the store has
     * records (delete: swaps into indices below the new length; compact:
     * one per moved record), plus one compact batch's bytes. */
    uint64_t cap = HEAD + 8 + max_entries * ENTRY + ZRE_COMPACT_BATCH_BYTES + ZRE_RECORD_MAX;
    size_t len = 0;
    int prc = zrp_read_file(jp, &j->raw, &len, cap < SIZE_MAX ? (size_t)cap : SIZE_MAX);
    int rc;
    if (prc == -ELOOP || prc == ZRP_ENOTREG || prc == -EFBIG)
        rc = zr_set_error(ZR_ENOTSTORE, "%s: %s is malformed: %s is %s", zre_op(e), e->path, jp,
                          prc == -EFBIG ? "larger than any journal of this store"
                          : prc == -ELOOP ? "a symbolic link" : "not a regular file");
    else if (prc < 0)
        rc = zr_set_error(ZR_EIO, "%s: cannot read %s: %s", zre_op(e), jp, zr_os_strerror(prc));
    else
        rc = journal_parse(e, jp, len, j);
    free(jp);
    if (rc < 0) {
        zre_journal_free(j);
        return rc;
    }
    return 1;
}

void zre_journal_free(zre_journal *j)
{
    free(j->ent);
    free(j->raw);
    memset(j, 0, sizeof *j);
}
