/*
 * meta.c - meta.zr, the store's header and commit point: its two copies,
 * their encoding, reading them (with a bounded retry for readers that meet
 * a write in progress), the commit of a new state, and the durability
 * steps that sync() and the maintenance calls end with.
 *
 * meta.zr (docs/FORMAT.md) is 128 bytes: two 64-byte copies of the header,
 * each with a sequence number and a checksum. A commit writes the copy
 * that does not hold the last commit, so a torn write (a crash, a full
 * disk, a network file system) damages at most the copy being written and
 * the other still holds the last commit; a reader takes the valid copy
 * with the higher sequence. A 32-byte meta.zr is the single header of an
 * older version: it is read as it was, and a writable open turns it into
 * the two copies (open.c).
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "engine_internal.h"

#define COPY 64u        /* bytes per header copy */
#define LEGACY 32u      /* the whole meta.zr of an older version */
static const unsigned char MAGIC[4] = {'Z', 'R', 'M', '2'};

/* A reader meeting bytes that may be a write in progress rereads until two
 * reads in a row agree, at most this long (a writer finishes a 64-byte
 * write in well under a microsecond once it runs; only a damaged file
 * keeps failing, and it keeps failing the same way). */
#define META_RETRY_NS (UINT64_C(500) * 1000 * 1000)

/* ----------------------------------------------------------- encoding */

static void copy_encode(unsigned char out[COPY], const zre_header *h)
{
    memset(out, 0, COPY);
    zre_put_u64(out, h->now.length);
    zre_put_u32(out + 8, h->now.tail.chunk);
    zre_put_u32(out + 12, h->now.tail.offset);
    out[16] = (unsigned char)h->codec;
    zre_put_u32(out + 24, h->identity_tag);
    memcpy(out + 28, MAGIC, 4);
    zre_put_u64(out + 32, h->seq);
    zre_put_u64(out + 40, h->synced.length);
    zre_put_u32(out + 48, h->synced.tail.chunk);
    zre_put_u32(out + 52, h->synced.tail.offset);
    zre_put_u32(out + 60, zre_fnv1a32(out, 60));
}

void zre_meta_image(const zre_engine *e, const zre_state *st, unsigned char out[ZRE_META_SIZE])
{
    /* Copy 0 holds `st` with sequence 0; copy 1 is empty, and the next
     * commit (sequence 1) goes there. */
    zre_header h = {*st, *st, e->codec, e->identity_tag, 0, false};
    memset(out, 0, ZRE_META_SIZE);
    copy_encode(out, &h);
}

int zre_meta_create(zre_engine *e)
{
    const zre_state empty = {0, {0, 0}};
    unsigned char buf[ZRE_META_SIZE];
    zre_meta_image(e, &empty, buf);
    int rc = zrp_pwrite_all(e->meta, buf, sizeof buf, 0);
    if (rc < 0)
        return zr_set_error(ZR_EIO, "%s: writing %s/meta.zr failed: %s", zre_op(e), e->path,
                            zr_os_strerror(rc));
    e->meta_seq = 0;
    e->meta_legacy = false;
    e->synced = empty;
    return ZR_OK;
}

/* The fields every header form shares (bytes 0..27). */
static void common_decode(const unsigned char *m, zre_header *h)
{
    h->now.length = zre_get_u64(m);
    h->now.tail.chunk = zre_get_u32(m + 8);
    h->now.tail.offset = zre_get_u32(m + 12);
    h->codec = (zre_codec)m[16];
    h->identity_tag = zre_get_u32(m + 24);
}

/* Copy `which` of a two-copy file: 1 when it is whole (magic, checksum,
 * and its sequence's parity matches its place), else 0. */
static int copy_decode(const unsigned char *m, unsigned which, zre_header *h)
{
    if (memcmp(m + 28, MAGIC, 4) != 0 || zre_get_u32(m + 60) != zre_fnv1a32(m, 60))
        return 0;
    uint64_t seq = zre_get_u64(m + 32);
    if ((seq & 1) != which)
        return 0;
    common_decode(m, h);
    h->seq = seq;
    h->legacy = false;
    h->synced.length = zre_get_u64(m + 40);
    h->synced.tail.chunk = zre_get_u32(m + 48);
    h->synced.tail.offset = zre_get_u32(m + 52);
    return 1;
}

static bool all_zero(const unsigned char *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (p[i])
            return false;
    return true;
}

/* How one read of meta.zr decoded. */
enum { META_OK, META_UNSURE, META_BAD };

/* The single header of an older version at m[0..32): with its checksum,
 * or (bytes 24..31 zero) from before headers carried one, in which case
 * only a second identical read (or the writer's own read) confirms it. */
static int legacy_decode(const unsigned char *m, zre_header *h)
{
    common_decode(m, h);
    h->seq = 0;
    h->legacy = true;
    h->synced = h->now;
    if (all_zero(m + 24, 8))
        return META_UNSURE;
    return zre_get_u32(m + 28) == zre_fnv1a32(m, 28) ? META_OK : META_BAD;
}

/* Decode the `size` bytes of meta.zr (at most ZRE_META_SIZE of them in m).
 * META_BAD and META_UNSURE leave the reason in *why. */
static int meta_decode(const unsigned char *m, uint64_t size, zre_header *h, char *why, size_t cap)
{
    h->legacy = false;
    snprintf(why, cap, "meta.zr checksum is 0x%08x, expected 0x%08x (the header is damaged)",
             zre_get_u32(m + 28), zre_fnv1a32(m, 28));
    if (size == LEGACY) {
        int rc = legacy_decode(m, h);
        if (rc == META_UNSURE)
            snprintf(why, cap, "meta.zr (a header without checksum) kept changing");
        return rc;
    }
    /* A writable open turns a 32-byte header into two copies by writing
     * copy 1 at offset 64 first: a file of 65..127 bytes, or one whose
     * copies are both invalid while its first 32 bytes still hold the old
     * header followed by zeros, is that step interrupted. */
    if (size > COPY && size <= ZRE_META_SIZE) {
        zre_header c[2];
        int ok0 = size == ZRE_META_SIZE && copy_decode(m, 0, &c[0]);
        int ok1 = size == ZRE_META_SIZE && copy_decode(m + COPY, 1, &c[1]);
        if (ok0 || ok1) {
            *h = ok0 && (!ok1 || c[0].seq > c[1].seq) ? c[0] : c[1];
            return META_OK;
        }
        if (all_zero(m + LEGACY, COPY - LEGACY) && !all_zero(m, LEGACY))
            return legacy_decode(m, h) == META_BAD ? META_BAD : META_OK;
        snprintf(why, cap, "neither copy of the header in meta.zr is whole (checksums 0x%08x and "
                 "0x%08x, expected 0x%08x and 0x%08x): the header is damaged",
                 zre_get_u32(m + 60), zre_get_u32(m + COPY + 60), zre_fnv1a32(m, 60),
                 zre_fnv1a32(m + COPY, 60));
        return META_UNSURE;
    }
    snprintf(why, cap, "meta.zr is %" PRIu64 " bytes, expected %u (or %u, the header of an older "
             "version)", size, ZRE_META_SIZE, LEGACY);
    return META_BAD;
}

/* The field checks of a decoded header. */
static int meta_check(const zre_engine *e, const char *what, const zre_header *h, unsigned char m17)
{
    if ((unsigned)h->codec > ZRE_CODEC_ZSTD_DICT)
        return zr_set_error(ZR_ENOTSTORE, "%s: %s is malformed: meta.zr codec byte is %u, "
                            "expected 0 (raw), 1 (zstd) or 2 (zstd_dict)", what, e->path,
                            (unsigned)h->codec);
    if (m17)
        return zr_set_error(ZR_ENOTSTORE, "%s: %s is malformed: meta.zr reserved bytes 17..23 are "
                            "not zero", what, e->path);
    if (h->now.tail.offset > ZRE_CHUNK_USABLE || h->synced.tail.offset > ZRE_CHUNK_USABLE)
        return zr_set_error(ZR_ENOTSTORE, "%s: %s is malformed: meta.zr tail_offset %u beyond "
                            "chunk capacity", what, e->path, h->now.tail.offset);
    if (h->synced.length > h->now.length || zre_pos_less(h->now.tail, h->synced.tail))
        return zr_set_error(ZR_ENOTSTORE, "%s: %s is malformed: meta.zr's synced state (length %"
                            PRIu64 ", frontier %u:%u) is ahead of its committed state (length %"
                            PRIu64 ", frontier %u:%u)", what, e->path, h->synced.length,
                            h->synced.tail.chunk, h->synced.tail.offset, h->now.length,
                            h->now.tail.chunk, h->now.tail.offset);
    return ZR_OK;
}

/* -------------------------------------------------------------- reading */

int zre_meta_read(zre_engine *e, const char *what, zre_header *out)
{
    unsigned char m[ZRE_META_SIZE], prev[ZRE_META_SIZE];
    uint64_t size = 0, prev_size = 0;
    bool have_prev = false;
    const uint64_t t0 = zrp_now_ns();
    char why[256];
    int how;
    for (;;) {
        memset(m, 0, sizeof m);
        int rc;
        if (e->remote) {
            /* A store at a URL: an uploaded, finished file, read once
             * (one GET); it never meets a write in progress. */
            if ((rc = zre_remote_meta(e, what, m, sizeof m, &size)) < 0)
                return rc;
        } else if ((rc = zrp_file_size(e->meta, &size)) < 0) {
            return zr_set_error(ZR_EIO, "%s: cannot stat %s/meta.zr: %s", what, e->path,
                                zr_os_strerror(rc));
        } else {
            size_t n = size < sizeof m ? (size_t)size : sizeof m;
            rc = zrp_pread_all(e->meta, m, n, 0);
        }
        /* Shorter than at the stat: only a writer of an older version
         * could do that; a reader tries again. */
        if (rc == ZRP_ESHORT && e->readonly && zrp_now_ns() - t0 <= META_RETRY_NS)
            continue;
        if (rc < 0)
            return zr_set_error(ZR_EIO, "%s: cannot read %s/meta.zr: %s", what, e->path,
                                zr_os_strerror(rc));
        how = meta_decode(m, size, out, why, sizeof why);
        if (how != META_UNSURE)
            break;
        /* Possibly a write in progress. The writer itself never meets
         * one; a reader rereads while the bytes change. */
        bool same = have_prev && size == prev_size && memcmp(m, prev, sizeof m) == 0;
        if (!e->readonly || e->remote || same || zrp_now_ns() - t0 > META_RETRY_NS) {
            /* Settled: an unchecked old header is what it says; anything
             * else stays damaged. */
            if (out->legacy && (same || !e->readonly || e->remote))
                how = META_OK;
            else
                how = META_BAD;
            break;
        }
        memcpy(prev, m, sizeof m);
        prev_size = size;
        have_prev = true;
        zrp_yield();
    }
    if (how == META_BAD)
        return zr_set_error(ZR_ENOTSTORE, "%s: %s is malformed: %s", what, e->path, why);
    unsigned char reserved = 0;
    const unsigned char *copy = out->legacy ? m : out->seq & 1 ? m + COPY : m;
    for (unsigned i = 17; i < 24; i++)
        reserved |= copy[i];
    if (!out->legacy)
        for (unsigned i = 56; i < 60; i++)
            reserved |= copy[i];
    return meta_check(e, what, out, reserved);
}

/* -------------------------------------------------------------- commits */

int zre_commit_meta(zre_engine *e, const zre_state *now, const zre_state *synced)
{
    zre_header h = {*now, *synced, e->codec, e->identity_tag, e->meta_seq + 1, false};
    unsigned char buf[COPY];
    copy_encode(buf, &h);
    /* One 64-byte positional write into the copy that does not hold the
     * last commit: within one sector, and the lock lives on this file, so
     * no rename. */
    int rc = zrp_pwrite_all(e->meta, buf, sizeof buf, (h.seq & 1) * COPY);
    if (rc < 0)
        return zr_set_error(ZR_EIO, "%s: writing %s/meta.zr failed: %s; nothing was committed "
                            "(the header's other copy still holds the last commit)", zre_op(e),
                            e->path, zr_os_strerror(rc));
    e->meta_seq = h.seq;
    e->meta_legacy = false;
    e->synced = *synced;
    return ZR_OK;
}

/* ----------------------------------------------------------- durability */

int zre_sync_files(zre_engine *e)
{
    for (uint64_t c = 0; c < e->chunks.count; c++) {
        int rc = zre_fsync_numbered(e, &e->chunks, c);
        if (rc < 0)
            return rc;
    }
    for (uint64_t s = 0; s < e->locs.count; s++) {
        int rc = zre_fsync_numbered(e, &e->locs, s);
        if (rc < 0)
            return rc;
    }
    /* New chunk/loc files must have durable directory entries before the
     * header that refers to them. */
    return zre_fsync_dir(e);
}

int zre_sync_meta(zre_engine *e)
{
    int rc = zrp_fsync(e->meta);
    if (rc < 0) {
        e->fsync_failed = true;
        return zr_set_error(ZR_EIO, "%s: fsync of %s/meta.zr failed: %s", zre_op(e), e->path,
                            zr_os_strerror(rc));
    }
    return ZR_OK;
}

int zre_sync_all(zre_engine *e)
{
    if (e->readonly)
        return ZR_OK;
    zre_state now = zre_now(e);
    int rc = zre_sync_files(e);
    /* The header now records everything as synced: only after the files
     * are durable, so a durable synced state is always true. */
    if (rc == 0 && (e->meta_legacy || !zre_state_eq(&e->synced, &now)))
        rc = zre_commit_meta(e, &now, &now);
    if (rc == 0)
        rc = zre_sync_meta(e);
    return rc;
}

int zre_commit_durable(zre_engine *e, const zre_state *target)
{
    int rc = zre_sync_files(e);
    if (rc == 0)
        rc = zre_commit_meta(e, target, target);
    if (rc < 0)
        return rc;
    e->tail = target->tail;
    atomic_store_explicit(&e->length, target->length, memory_order_release);
    return zre_sync_meta(e);
}
