/*
 * torture_maint.c - delete, compact, read-only opens, exclusive use,
 * zstd_dict and zre_check_record, against the shrunk-geometry engine
 * (64 KiB chunks, 64-entry table segments) so that every operation crosses
 * chunk and segment boundaries.
 */
#include <inttypes.h>
#include <stdatomic.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


#include <cmocka.h>

#include "zr_platform.h"
#include "zr_test_model.h"
#include "zr_test_util.h"
#include "zrengine.h"

#define SEG 64u
#define CHUNK 65536u

static int setup(void **state)
{
    (void)state;
    return zt_root_setup("maint");
}

static int teardown(void **state)
{
    (void)state;
    return zt_root_teardown();
}

/* "<store>/<name>" (valid until the next call). */
static const char *in_store(const char *store, const char *name)
{
    static char p[800];
    snprintf(p, sizeof p, "%s/%s", store, name);
    return p;
}

static int file_exists(const char *store, const char *name) { return zt_exists(in_store(store, name)); }

static long file_size(const char *store, const char *name) { return zt_file_size(in_store(store, name)); }

#define assert_error_mentions(needle) zt_assert_mentions(zr_last_error(), (needle))

/* ------------------------------------------------------ records, model */

/* Records of 100..1999 bytes: 64 KiB chunks hold about 60 of them. */
static const zt_recipe recipe = {100, 1999};

static zt_model *new_model(void)
{
    zt_model *m = calloc(1, sizeof *m);
    assert_non_null(m);
    zt_model_init(m, &recipe, 0);
    return m;
}

static void free_model(zt_model *m)
{
    zt_model_free(m);
    free(m);
}

static void append_n(zre_engine *e, zt_model *m, uint64_t n)
{
    if (zt_model_append(e, m, n) != 0)
        fail_msg("append of %" PRIu64 " records: %s", n, zr_last_error());
}

/* Every record equals the model and passes zre_check_record. */
static void check_model(zre_engine *e, const zt_model *m) { zt_model_check(e, m, 1, "maint"); }

static void del(zre_engine *e, zt_model *m, const uint64_t *idx, uint64_t n)
{
    if (zre_delete(e, idx, n) != 0)
        fail_msg("delete of %" PRIu64 " indices: %s", n, zr_last_error());
    zt_model_delete(m, idx, n);
}

static zre_engine *make(const char *name, zre_codec codec)
{
    return zt_create_store(zt_root_at(name), codec, &recipe);
}

/* ---------------------------------------------------------------- tests */

static void delete_compact(zre_codec codec, const char *name)
{
    zt_model *m = new_model();
    zre_engine *e = make(name, codec);
    const char *p = zt_root_at(name);
    char path[700];
    snprintf(path, sizeof path, "%s", p);
    append_n(e, m, 300); /* 5 segments; several chunks (raw) */
    check_model(e, m);

    /* Index forms at the engine level: a single index, the last record,
     * duplicates, a set spanning segments; out of range deletes nothing. */
    uint64_t one = 5, bad[2] = {3, 300};
    del(e, m, &one, 1);
    uint64_t last = m->len - 1;
    del(e, m, &last, 1);
    assert_int_equal(zre_delete(e, bad, 2), ZR_ERANGE);
    assert_error_mentions("300");
    assert_int_equal(zre_length(e), 298);
    uint64_t set[40];
    for (int i = 0; i < 40; i++)
        set[i] = (uint64_t)(i * 37) % m->len;
    set[39] = set[0]; /* duplicate */
    del(e, m, set, 40);
    check_model(e, m);

    zre_stats s0;
    assert_int_equal(zre_get_stats(e, &s0), 0);
    assert_int_equal(s0.records, m->len);
    assert_true(s0.reclaimable > 0);

    /* Delete everything in the last segments so compact drops them. */
    uint64_t tail[300];
    uint64_t ntail = m->len - 100;
    for (uint64_t i = 0; i < ntail; i++)
        tail[i] = 100 + i;
    del(e, m, tail, ntail);
    assert_int_equal(m->len, 100);
    assert_int_equal(zre_compact(e), 0);
    check_model(e, m);
    zre_stats s1;
    assert_int_equal(zre_get_stats(e, &s1), 0);
    assert_int_equal(s1.records, 100);
    /* What is left is at most one record's slack per chunk. */
    assert_true(s1.reclaimable < 2100u * 8);
    assert_true(s1.chunk_bytes < s0.chunk_bytes);
    assert_true(file_exists(p, "1.loc"));
    assert_false(file_exists(p, "2.loc"));
    assert_int_equal(file_size(p, "1.loc"), (100 - SEG) * 16);
    assert_false(file_exists(p, "journal.zr"));
    /* Compact is idempotent. */
    assert_int_equal(zre_compact(e), 0);
    check_model(e, m);

    /* Appends after a compact, reopen, then delete all and compact. */
    append_n(e, m, 150);
    check_model(e, m);
    assert_int_equal(zre_close(e), 0);
    assert_int_equal(zre_open(&e, path), 0);
    check_model(e, m);
    uint64_t all[300];
    uint64_t n = m->len;
    for (uint64_t i = 0; i < n; i++)
        all[i] = i;
    del(e, m, all, n);
    assert_int_equal(zre_length(e), 0);
    assert_int_equal(zre_compact(e), 0);
    assert_false(file_exists(p, "0.loc"));
    assert_false(file_exists(p, "1.chunk"));
    assert_true(file_size(p, "0.chunk") <= 0);
    append_n(e, m, 10);
    check_model(e, m);
    assert_int_equal(zre_close(e), 0);
    free_model(m);
}

static void test_delete_compact_raw(void **s) { (void)s; delete_compact(ZRE_CODEC_RAW, "raw"); }
static void test_delete_compact_zstd(void **s) { (void)s; delete_compact(ZRE_CODEC_ZSTD, "zstd"); }
static void test_delete_compact_dict(void **s)
{
    (void)s;
    delete_compact(ZRE_CODEC_ZSTD_DICT, "dict");
}

/* A compact where every record slides over its own old bytes (the
 * journaled path): delete the first record of a long raw store. */
static void test_compact_overlapping(void **s)
{
    (void)s;
    zt_model *m = new_model();
    zre_engine *e = make("ov", ZRE_CODEC_RAW);
    append_n(e, m, 200);
    uint64_t first = 0;
    /* Move the last record to slot 0, then delete it too: the bytes of the
     * old record 0 and of the last are now garbage at both ends. */
    del(e, m, &first, 1);
    uint64_t z = 0;
    del(e, m, &z, 1);
    assert_int_equal(zre_compact(e), 0);
    check_model(e, m);
    assert_false(file_exists(zt_root_at("ov"), "journal.zr"));
    assert_int_equal(zre_close(e), 0);
    free_model(m);
}

typedef struct intr_arg {
    zre_engine *e;
    unsigned delay_ms;
} intr_arg;

static void interrupt_later(void *arg)
{
    intr_arg *a = arg;
    zrp_sleep_ms(a->delay_ms);
    zre_interrupt(a->e, 1);
}

/* zre_interrupt stops a compact at a batch boundary with ZR_EINTR: every
 * record reads as before (it may have moved), the space is not reclaimed
 * yet, later appends work, and a compact run again finishes. Requested
 * before the call, it stops at once and moves nothing. */
static void test_compact_interrupt(void **s)
{
    (void)s;
    zt_model *m = new_model();
    zre_engine *e = make("intr", ZRE_CODEC_RAW);
    for (int k = 0; k < 12; k++)
        append_n(e, m, 1000); /* ~12 MiB; the compact below moves ~3 batches */
    uint64_t first = 0;
    del(e, m, &first, 1);
    zre_stats st0, st;
    assert_int_equal(zre_get_stats(e, &st0), 0);
    assert_true(st0.reclaimable > 0);

    zre_interrupt(e, 1);
    assert_int_equal(zre_compact(e), ZR_EINTR);
    assert_error_mentions("interrupted after 0 of");
    assert_error_mentions("run compact again");
    assert_int_equal(zre_get_stats(e, &st), 0);
    assert_int_equal(st.reclaimable, st0.reclaimable);
    assert_int_equal(zre_compact(e), ZR_EINTR); /* the request stays until withdrawn */
    zre_interrupt(e, 0);
    check_model(e, m);

    /* From another thread, at several points of the run: either it ends
     * first (OK) or it stops at a batch boundary; the records are intact
     * either way. */
    int stopped = 0;
    static const unsigned delays[] = {0, 1, 2, 4, 8};
    for (unsigned k = 0; k < 5; k++) {
        unsigned delay = delays[k];
        del(e, m, &first, 1);
        intr_arg a = {e, delay};
        zrp_thread th;
        assert_int_equal(zrp_thread_start(&th, interrupt_later, &a), 0);
        int rc = zre_compact(e);
        zrp_thread_join(th);
        zre_interrupt(e, 0);
        if (rc != ZR_OK && rc != ZR_EINTR)
            fail_msg("compact: %d %s", rc, zr_last_error());
        stopped += rc == ZR_EINTR;
        check_model(e, m);
        append_n(e, m, 3);
        check_model(e, m);
        assert_false(file_exists(zt_root_at("intr"), "journal.zr"));
    }
    print_message("compact interrupted from a thread in %d of 5 runs\n", stopped);
    assert_int_equal(zre_compact(e), 0);
    assert_int_equal(zre_get_stats(e, &st), 0);
    assert_true(st.reclaimable < 2100u * 8); /* what is left: the ends of full chunks */
    assert_int_equal(zre_close(e), 0);
    e = NULL;
    assert_int_equal(zre_open(&e, zt_root_at("intr")), 0);
    check_model(e, m);
    assert_int_equal(zre_close(e), 0);
    free_model(m);
}

static void test_readonly_locks(void **s)
{
    (void)s;
    zt_model *m = new_model();
    zre_engine *w = make("ro", ZRE_CODEC_ZSTD), *r1 = NULL, *r2 = NULL, *x = NULL;
    append_n(w, m, 20);
    char path[700];
    snprintf(path, sizeof path, "%s", zt_root_at("ro"));
    /* Readers beside the writer (one writer, many readers, as LMDB). */
    assert_int_equal(zre_open_ex(&r1, path, ZRE_OPEN_READONLY), 0);
    assert_int_equal(zre_open_ex(&r2, path, ZRE_OPEN_READONLY), 0);
    assert_int_equal(zre_is_readonly(r1), 1);
    assert_int_equal(zre_open(&x, path), ZR_EBUSY); /* still one writer */
    assert_error_mentions("another writable handle");
    check_model(r1, m);
    check_model(r2, m);
    /* delete and compact need the store to themselves: refused at once,
     * nothing changed. */
    uint64_t i0 = 0;
    assert_int_equal(zre_delete(w, &i0, 1), ZR_EBUSY);
    assert_error_mentions("read-only handles");
    assert_int_equal(zre_compact(w), ZR_EBUSY);
    assert_error_mentions("nothing was changed");
    check_model(w, m);
    check_model(r1, m);
    unsigned char b[4] = {1, 2, 3, 4};
    assert_int_equal(zre_append(r1, b, 4, NULL, 1, NULL), ZR_EUNSUPPORTED);
    assert_error_mentions("read-only");
    assert_int_equal(zre_delete(r1, &i0, 1), ZR_EUNSUPPORTED);
    assert_int_equal(zre_compact(r1), ZR_EUNSUPPORTED);
    assert_int_equal(zre_sync(r1), 0);
    assert_int_equal(zre_open_ex(&x, path, 7), ZR_EINVAL);
    assert_int_equal(zre_close(r1), 0);
    assert_int_equal(zre_compact(w), ZR_EBUSY); /* r2 still reads */
    assert_int_equal(zre_close(r2), 0);
    /* Alone again: maintenance runs, and readers may open afterwards. */
    del(w, m, &i0, 1);
    assert_int_equal(zre_compact(w), 0);
    assert_int_equal(zre_open_ex(&r1, path, ZRE_OPEN_READONLY), 0);
    check_model(r1, m);
    assert_int_equal(zre_close(r1), 0);
    assert_int_equal(zre_close(w), 0);
    assert_int_equal(zre_open(&x, path), 0);
    assert_int_equal(zre_is_readonly(x), 0);
    assert_int_equal(zre_close(x), 0);
    free_model(m);
}

/* A reader sees the prefix committed at its open; refresh() shows later
 * commits, across chunk rollovers and new record-table segments (shrunk
 * geometry: 64 KiB chunks, 64-entry segments). */
static void test_refresh(void **s)
{
    (void)s;
    zt_model *m = new_model();
    zre_engine *w = make("rf", ZRE_CODEC_ZSTD), *r = NULL;
    append_n(w, m, 5);
    char path[700];
    snprintf(path, sizeof path, "%s", zt_root_at("rf"));
    assert_int_equal(zre_open_ex(&r, path, ZRE_OPEN_READONLY), 0);
    for (int round = 0; round < 6; round++) {
        uint64_t seen = zre_length(r);
        assert_int_equal(seen, m->len);
        append_n(w, m, 40 + (uint64_t)round * 30);
        assert_int_equal(zre_length(r), seen); /* fixed until refresh */
        unsigned char got[2100];
        assert_int_equal(zre_gather(r, &seen, 1, got, sizeof got, 0, NULL), ZR_ERANGE);
        assert_int_equal(zre_refresh(w), 0); /* the writer: a no-op */
        assert_int_equal(zre_refresh(r), 0);
        check_model(r, m);
    }
    zre_stats st;
    assert_int_equal(zre_get_stats(r, &st), 0);
    assert_int_equal(st.records, m->len);
    assert_true(file_exists(path, "3.chunk") && file_exists(path, "4.loc"));
    /* A header copy that fails its checksum (damaged, or a write in
     * progress) is skipped: the other copy holds the commit before. With
     * both damaged the refresh fails (at once: the bytes do not change
     * between reads) and the view stays. */
    uint64_t before = zre_length(r);
    append_n(w, m, 3);
    unsigned char hdr[ZRE_META_SIZE];
    assert_int_equal(zt_read_file(in_store(path, "meta.zr"), hdr, sizeof hdr), sizeof hdr);
    /* The copy with the higher sequence holds the last commit. */
    long newest = zt_get_le32(hdr + 32) > zt_get_le32(hdr + 64 + 32) ? 0 : 64;
    unsigned char bad = hdr[newest] ^ 0x40;
    zt_patch_file(in_store(path, "meta.zr"), newest, &bad, 1);
    assert_int_equal(zre_refresh(r), 0);
    assert_int_equal(zre_length(r), before);
    bad = hdr[64 - newest] ^ 0x40;
    zt_patch_file(in_store(path, "meta.zr"), 64 - newest, &bad, 1);
    assert_int_equal(zre_refresh(r), ZR_ENOTSTORE);
    assert_error_mentions("checksum");
    assert_int_equal(zre_length(r), before);
    zt_write_file(in_store(path, "meta.zr"), hdr, sizeof hdr);
    assert_int_equal(zre_refresh(r), 0);
    check_model(r, m);
    assert_int_equal(zre_close(r), 0);
    assert_int_equal(zre_close(w), 0);
    free_model(m);
}

/* Create store `name` with `codec`, append n records (recorded in m),
 * close it; its path goes to path[700]. */
static void make_closed(const char *name, zre_codec codec, zt_model *m, uint64_t n, char *path)
{
    snprintf(path, 700, "%s", zt_root_at(name));
    zre_engine *w = make(name, codec);
    append_n(w, m, n);
    assert_int_equal(zre_close(w), 0);
}

/* While a delete or compact runs (it holds meta.zr exclusively, as this
 * test does by hand), readers and writers are refused at once. */
static void test_busy_during_maint(void **s)
{
    (void)s;
    char path[700];
    zt_model *m = new_model();
    zre_engine *x = NULL;
    make_closed("bm", ZRE_CODEC_RAW, m, 10, path);
    zrp_file f;
    assert_int_equal(zrp_open(&f, in_store(path, "meta.zr"), ZRP_READ), 0);
    assert_int_equal(zrp_lock_exclusive(f), 0);
    assert_int_equal(zre_open_ex(&x, path, ZRE_OPEN_READONLY), ZR_EBUSY);
    assert_error_mentions("delete or compact");
    assert_int_equal(zre_open(&x, path), ZR_EBUSY);
    assert_int_equal(zrp_unlock(f), 0);
    assert_int_equal(zre_open_ex(&x, path, ZRE_OPEN_READONLY), 0);
    check_model(x, m);
    assert_int_equal(zre_close(x), 0);
    zrp_close(&f);
    free_model(m);
}

/* meta.zr as an older version wrote it, one 32-byte header, for the
 * closed store at `path`: with its checksum, or (bytes 24..31 zero) from
 * before headers carried one. */
static void write_old_header(const char *path, int with_checksum)
{
    unsigned char now[ZRE_META_SIZE];
    assert_int_equal(zt_read_file(in_store(path, "meta.zr"), now, sizeof now), sizeof now);
    const unsigned char *c = zt_get_le32(now + 32) > zt_get_le32(now + 64 + 32) ? now : now + 64;
    zt_meta f = {.length = (uint64_t)zt_get_le32(c) | (uint64_t)zt_get_le32(c + 4) << 32,
                 .tail_chunk = zt_get_le32(c + 8), .tail_offset = zt_get_le32(c + 12),
                 .codec = c[16], .identity_tag = zt_get_le32(c + 24)};
    unsigned char old[32];
    zt_meta_legacy(old, &f);
    if (!with_checksum)
        memset(old + 24, 0, 8);
    zt_write_file(in_store(path, "meta.zr"), old, sizeof old);
}

/* Stores written by older versions (a 32-byte meta.zr, with a checksum or
 * from before headers carried one) still open; a read-only open leaves
 * the header as it is, a writable open turns it into the two copies. */
static void test_legacy_header(void **s)
{
    (void)s;
    for (int with_checksum = 0; with_checksum <= 1; with_checksum++) {
        char path[700];
        zt_model *m = new_model();
        zre_engine *w = NULL, *x = NULL;
        make_closed(with_checksum ? "lg1" : "lg0", ZRE_CODEC_ZSTD, m, 12, path);
        write_old_header(path, with_checksum);
        assert_int_equal(zre_open_ex(&x, path, ZRE_OPEN_READONLY), 0);
        check_model(x, m);
        assert_int_equal(zre_close(x), 0);
        assert_int_equal(file_size(path, "meta.zr"), 32);
        assert_int_equal(zre_open(&w, path), 0);
        assert_int_equal(file_size(path, "meta.zr"), ZRE_META_SIZE);
        append_n(w, m, 2);
        assert_int_equal(zre_close(w), 0);
        unsigned char hdr[ZRE_META_SIZE];
        assert_int_equal(zt_read_file(in_store(path, "meta.zr"), hdr, sizeof hdr), sizeof hdr);
        assert_memory_equal(hdr + 28, "ZRM2", 4);
        assert_int_equal(zt_get_le32(hdr + 60), zt_fnv1a32(hdr, 60));
        assert_int_equal(zre_open_ex(&x, path, ZRE_OPEN_READONLY), 0);
        check_model(x, m);
        assert_int_equal(zre_close(x), 0);
        free_model(m);
    }
}

/* Threads: one writer appending while reader handles (one per thread, as
 * separate processes would have) refresh and verify every record they
 * see, and one thread gathers on the writer's own handle. Run under TSan
 * too. Record i is record id i: no deletes here. */
enum { TW_RECORDS = 3000, TW_READERS = 3 };
typedef struct tw_state {
    zre_engine *w;
    zre_engine *shared; /* one read-only handle: refreshed by one thread, read by another */
    const char *path;
    _Atomic int done;
    _Atomic uint64_t verified;
    char err[256];
    _Atomic int failed;
} tw_state;

static void tw_fail(tw_state *t, const char *what, uint64_t i)
{
    if (atomic_exchange(&t->failed, 1) == 0)
        snprintf(t->err, sizeof t->err, "%s at record %" PRIu64 ": %s", what, i, zr_last_error());
}

static void tw_verify(tw_state *t, zre_engine *e, uint64_t from, uint64_t to)
{
    unsigned char got[2100], want[2100];
    for (uint64_t i = from; i < to && !atomic_load(&t->failed); i++) {
        uint32_t n = zt_rec_size(&recipe, i);
        if (zre_gather(e, &i, 1, got, sizeof got, n, NULL) != 0)
            return tw_fail(t, "gather", i);
        zt_rec_fill(&recipe, i, want);
        if (memcmp(got, want, n) != 0)
            return tw_fail(t, "wrong bytes", i);
        atomic_fetch_add(&t->verified, 1);
    }
}

static void tw_reader(void *arg)
{
    tw_state *t = arg;
    zre_engine *r = NULL;
    if (zre_open_ex(&r, t->path, ZRE_OPEN_READONLY) != 0)
        return tw_fail(t, "open", 0);
    uint64_t seen = 0;
    for (;;) {
        int last = atomic_load(&t->done);
        if (zre_refresh(r) != 0) {
            tw_fail(t, "refresh", seen);
            break;
        }
        uint64_t n = zre_length(r);
        if (n < seen)
            tw_fail(t, "length went back", n);
        tw_verify(t, r, seen, n);
        seen = n;
        if (last || atomic_load(&t->failed))
            break;
    }
    if (!atomic_load(&t->failed) && seen != TW_RECORDS)
        tw_fail(t, "final length", seen);
    zre_close(r);
}

static void tw_same_handle(void *arg)
{
    tw_state *t = arg;
    uint64_t seen = 0;
    while (!atomic_load(&t->done) && !atomic_load(&t->failed)) {
        uint64_t n = zre_length(t->w);
        tw_verify(t, t->w, seen, n);
        seen = n;
    }
}

static void tw_shared_refresher(void *arg)
{
    tw_state *t = arg;
    while (!atomic_load(&t->done) && !atomic_load(&t->failed))
        if (zre_refresh(t->shared) != 0)
            tw_fail(t, "shared refresh", zre_length(t->shared));
}

static void tw_shared_reader(void *arg)
{
    tw_state *t = arg;
    uint64_t seen = 0;
    while (!atomic_load(&t->done) && !atomic_load(&t->failed)) {
        uint64_t n = zre_length(t->shared);
        tw_verify(t, t->shared, seen, n);
        seen = n;
    }
}

static void test_threads_writer_readers(void **s)
{
    (void)s;
    zt_model *m = new_model();
    char path[700];
    snprintf(path, sizeof path, "%s", zt_root_at("tw"));
    tw_state t = {.w = make("tw", ZRE_CODEC_ZSTD), .path = path};
    assert_int_equal(zre_open_ex(&t.shared, path, ZRE_OPEN_READONLY), 0);
    zrp_thread th[TW_READERS + 3];
    for (int i = 0; i < TW_READERS; i++)
        assert_int_equal(zrp_thread_start(&th[i], tw_reader, &t), 0);
    assert_int_equal(zrp_thread_start(&th[TW_READERS], tw_same_handle, &t), 0);
    assert_int_equal(zrp_thread_start(&th[TW_READERS + 1], tw_shared_refresher, &t), 0);
    assert_int_equal(zrp_thread_start(&th[TW_READERS + 2], tw_shared_reader, &t), 0);
    while (m->len < TW_RECORDS)
        append_n(t.w, m, m->len + 37 <= TW_RECORDS ? 37 : TW_RECORDS - m->len);
    atomic_store(&t.done, 1);
    for (int i = 0; i < TW_READERS + 3; i++)
        assert_int_equal(zrp_thread_join(th[i]), 0);
    if (atomic_load(&t.failed))
        fail_msg("%s", t.err);
    assert_int_equal(zre_refresh(t.shared), 0);
    assert_int_equal(zre_length(t.shared), TW_RECORDS);
    assert_int_equal(zre_close(t.shared), 0);
    assert_true(atomic_load(&t.verified) >= (uint64_t)TW_READERS * TW_RECORDS);
    assert_int_equal(zre_close(t.w), 0);
    free_model(m);
}

static void test_dict_errors(void **s)
{
    (void)s;
    zre_engine *e = NULL;
    zre_create_options o = {0};
    o.codec = ZRE_CODEC_ZSTD_DICT;
    assert_int_equal(zre_create_ex(&e, zt_root_at("d1"), &o), ZR_EINVAL);
    assert_error_mentions("dictionary");
    assert_int_equal(zre_create(&e, zt_root_at("d1"), ZRE_CODEC_ZSTD_DICT), ZR_EINVAL);
    o.dict = "not a dictionary at all";
    o.dict_size = 23;
    assert_int_equal(zre_create_ex(&e, zt_root_at("d1"), &o), ZR_EINVAL);
    assert_error_mentions("magic");
    o.codec = ZRE_CODEC_ZSTD;
    assert_int_equal(zre_create_ex(&e, zt_root_at("d1"), &o), ZR_EINVAL);
    assert_error_mentions("only meaningful");
    assert_false(file_exists(zt_root_at("d1"), "meta.zr"));

    zt_model *m = new_model();
    e = make("d2", ZRE_CODEC_ZSTD_DICT);
    assert_true(file_exists(zt_root_at("d2"), "dict.zr"));
    append_n(e, m, 50);
    assert_int_equal(zre_close(e), 0);
    char path[700], dp[800], saved[800];
    snprintf(path, sizeof path, "%s", zt_root_at("d2"));
    snprintf(dp, sizeof dp, "%s/dict.zr", path);
    snprintf(saved, sizeof saved, "%s/dict.saved", path);
    assert_int_equal(rename(dp, saved), 0);
    assert_int_equal(zre_open(&e, path), ZR_ENOTSTORE);
    assert_error_mentions("dict.zr");
    assert_error_mentions("missing");
    assert_int_equal(rename(saved, dp), 0);
    assert_int_equal(zre_open(&e, path), 0);
    check_model(e, m);
    assert_int_equal(zre_close(e), 0);
    free_model(m);
}

static void test_check_record(void **s)
{
    (void)s;
    zt_model *m = new_model();
    zre_engine *e = make("ck", ZRE_CODEC_ZSTD);
    append_n(e, m, 10);
    assert_int_equal(zre_close(e), 0);
    char path[700], cp[800];
    snprintf(path, sizeof path, "%s", zt_root_at("ck"));
    snprintf(cp, sizeof cp, "%s/0.chunk", path);
    /* Record 0's frame, found through the table (appends place records in
     * index order, but the table is the authority). */
    char lp[800];
    snprintf(lp, sizeof lp, "%s/0.loc", path);
    FILE *lf = fopen(lp, "rb");
    assert_non_null(lf);
    unsigned char e0[16];
    assert_int_equal(fread(e0, 1, sizeof e0, lf), sizeof e0);
    fclose(lf);
    long at = (long)((uint32_t)e0[0] | (uint32_t)e0[1] << 8 | (uint32_t)e0[2] << 16 |
                     (uint32_t)e0[3] << 24);
    at += (long)(((uint32_t)e0[4] | (uint32_t)e0[5] << 8 | (uint32_t)e0[6] << 16 |
                  (uint32_t)e0[7] << 24) / 2); /* mid-frame */
    FILE *f = fopen(cp, "r+b");
    assert_non_null(f);
    fseek(f, at, SEEK_SET);
    int c = fgetc(f);
    fseek(f, at, SEEK_SET);
    fputc(c ^ 0x5a, f);
    fclose(f);
    assert_int_equal(zre_open_ex(&e, path, ZRE_OPEN_READONLY), 0);
    assert_int_equal(zre_check_record(e, 0), ZR_ECORRUPT);
    assert_error_mentions("record 0");
    for (uint64_t i = 1; i < 10; i++)
        assert_int_equal(zre_check_record(e, i), 0);
    assert_int_equal(zre_check_record(e, 10), ZR_ERANGE);
    assert_int_equal(zre_close(e), 0);
    free_model(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_delete_compact_raw),
        cmocka_unit_test(test_delete_compact_zstd),
        cmocka_unit_test(test_delete_compact_dict),
        cmocka_unit_test(test_compact_overlapping),
        cmocka_unit_test(test_compact_interrupt),
        cmocka_unit_test(test_readonly_locks),
        cmocka_unit_test(test_refresh),
        cmocka_unit_test(test_busy_during_maint),
        cmocka_unit_test(test_legacy_header),
        cmocka_unit_test(test_threads_writer_readers),
        cmocka_unit_test(test_dict_errors),
        cmocka_unit_test(test_check_record),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
