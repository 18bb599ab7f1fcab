/*
 * open.c - a handle's life: create, open (with recovery), refresh, sync,
 * close, and the accessors of an open handle.
 *
 * An open reads meta.zr, loads the dictionary, deals with a journal left
 * by an interrupted delete or compact, then checks the files against the
 * header: every table segment and chunk it needs, and every record
 * appended since the last sync along the append chain (recover.c). When
 * the files hold less than the header claims (a power loss lost unsynced
 * appends), a plain open refuses naming recovery, and ZRE_OPEN_RECOVER
 * keeps the durable prefix.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zstd.h>

#include "engine_internal.h"

/* ------------------------------------------------------------- handles */

/* Close the chunk and table files (freeing their tables with `release`),
 * then meta.zr: closing it releases the store lock, so it goes last. */
static void engine_close_files(zre_engine *e, bool release)
{
    zre_fdtab_close(&e->chunks, release);
    zre_fdtab_close(&e->locs, release);
    zrp_close(&e->meta);
    zrp_close(&e->wlock);
}

static void engine_free(zre_engine *e)
{
    if (!e)
        return;
    zre_pool_destroy(&e->pool);
    engine_close_files(e, true);
    zre_remote_detach(e);
    zre_ctx_free_all(e);
    zre_append_free(e);
    ZSTD_freeDDict(e->ddict);
    ZSTD_freeCDict(e->cdict);
    free(e->dict);
    zrp_mutex_destroy(&e->ctx_lock);
    zrp_mutex_destroy(&e->writer);
    free(e->path);
    free(e);
}

static int engine_alloc(zre_engine **out, const char *path, zre_codec codec)
{
    zre_engine *e = calloc(1, sizeof *e);
    if (!e)
        return zr_set_error(ZR_ENOMEM, "engine: out of memory for handle of %s", path);
    e->meta = ZRP_FILE_INVALID;
    e->wlock = ZRP_FILE_INVALID;
    e->codec = codec;
    e->chunks.ext = "chunk";
    e->locs.ext = "loc";
    atomic_init(&e->length, 0);
    e->path = malloc(strlen(path) + 1);
    if (!e->path) {
        free(e);
        return zr_set_error(ZR_ENOMEM, "engine: out of memory for handle of %s", path);
    }
    strcpy(e->path, path);
    e->ncpu = zrp_cpu_count();
    int ok = zrp_mutex_init(&e->writer) == 0;
    if (ok && zrp_mutex_init(&e->ctx_lock) != 0) {
        zrp_mutex_destroy(&e->writer);
        ok = 0;
    }
    if (ok && zre_pool_init(&e->pool, e->ncpu > 1 ? e->ncpu - 1 : 0) != 0) {
        zrp_mutex_destroy(&e->ctx_lock);
        zrp_mutex_destroy(&e->writer);
        ok = 0;
    }
    if (!ok) {
        free(e->path);
        free(e);
        return zr_set_error(ZR_ENOMEM, "engine: cannot initialise locks for %s", path);
    }
    *out = e;
    return ZR_OK;
}

/* The state of a header, adopted by the handle as committed. */
static void adopt_header(zre_engine *e, const zre_header *h)
{
    e->codec = h->codec;
    e->identity_tag = h->identity_tag;
    e->tail = h->now.tail;
    e->synced = h->synced;
    e->meta_seq = h->seq;
    e->meta_legacy = h->legacy;
    atomic_store_explicit(&e->length, h->now.length, memory_order_release);
}

/* The handle's committed state as a header (after a replay moved it). */
static zre_header current_header(const zre_engine *e)
{
    zre_header h = {zre_now(e), e->synced, e->codec, e->identity_tag, e->meta_seq, e->meta_legacy};
    return h;
}

/* --------------------------------------------------------------- locks */

/* The store's locks (docs/FORMAT.md, Locks). Every handle holds a shared
 * lock on meta.zr for its lifetime: it marks "someone reads this store".
 * A writable handle also holds the exclusive lock on lock.zr, which only
 * writers touch, so writers exclude each other while readers come and go.
 * delete and compact turn the writer's shared meta.zr lock exclusive for
 * their duration (zre_enter_maint), which fails at once while any other
 * handle is open, and keeps new ones out until they finish. Handles of
 * older versions (exclusive meta.zr lock for writers, shared for readers)
 * are excluded or counted by the same meta.zr lock. */
static int open_locked(zre_engine *e, zrp_file *f, const char *p, unsigned mode, bool exclusive,
                       const char *busy)
{
    int rc = zrp_open(f, p, mode);
    if (rc == -ENOENT && !(mode & ZRP_CREATE))
        return zr_set_error(ZR_ENOTSTORE, "open: %s is not a store: meta.zr is missing", e->path);
    if (rc < 0)
        return zre_open_error(e, p, rc);
    rc = exclusive ? zrp_lock_exclusive(*f) : zrp_lock_shared(*f);
    if (rc == ZRP_EBUSY)
        return zr_set_error(ZR_EBUSY, "store %s is busy: %s", e->path, busy);
    if (rc < 0)
        return zr_set_error(ZR_EIO, "%s: cannot lock %s: %s", zre_op(e), p, zr_os_strerror(rc));
    return ZR_OK;
}

static int open_locks(zre_engine *e, bool create)
{
    char *p = zre_join(e, "lock.zr");
    char *m = zre_join(e, "meta.zr");
    int rc = !p || !m ? zr_set_error(ZR_ENOMEM, "%s: out of memory for a path", zre_op(e)) : ZR_OK;
    if (rc == 0 && !e->readonly)
        rc = open_locked(e, &e->wlock, p, ZRP_READ | ZRP_WRITE | ZRP_CREATE, true,
                         "another writable handle (in this or another process) has it open; "
                         "open it read-only to read beside that writer");
    unsigned mode = e->readonly ? ZRP_READ
                                : ZRP_READ | ZRP_WRITE | (create ? ZRP_CREATE | ZRP_EXCLUSIVE : 0u);
    if (rc == 0)
        rc = open_locked(e, &e->meta, m, mode, false,
                         "a delete or compact is running on it (they need the store to "
                         "themselves; retry when it ends), or a writable handle of an older "
                         "version holds it");
    free(p);
    free(m);
    return rc;
}

/* ------------------------------------------------------------ dictionary */

/* Check dictionary bytes and build the decoder dictionary (and keep a
 * copy for the encoder, built on first append). `what` names the source
 * in messages ("create: dict_bytes" or "<path>/dict.zr"). */
static int load_dict(zre_engine *e, const void *dict, uint64_t size, int bad_status, const char *what)
{
    if (size < 8 || size > ZRE_DICT_MAX)
        return zr_set_error(bad_status, "%s: a zstd dictionary of %" PRIu64 " bytes, expected 8..%"
                            PRIu64, what, size, (uint64_t)ZRE_DICT_MAX);
    const unsigned char *d = dict;
    /* Only zstd's own dictionary format (ZDICT output): its id is then
     * stamped in every frame, so a frame and a different dictionary never
     * meet silently. */
    if (zre_get_u32(d) != 0xEC30A437u)
        return zr_set_error(bad_status, "%s: not a zstd dictionary: magic is 0x%08x, expected "
                            "0xec30a437", what, zre_get_u32(d));
    if (ZSTD_getDictID_fromDict(dict, (size_t)size) == 0)
        return zr_set_error(bad_status, "%s: zstd dictionary has id 0", what);
    e->dict = malloc((size_t)size);
    if (!e->dict)
        return zr_set_error(ZR_ENOMEM, "%s: out of memory for a %" PRIu64 "-byte dictionary", what,
                            size);
    memcpy(e->dict, dict, (size_t)size);
    e->dict_size = (size_t)size;
    e->ddict = ZSTD_createDDict(e->dict, e->dict_size);
    if (!e->ddict)
        return zr_set_error(bad_status, "%s: the zstd dictionary does not load (damaged entropy "
                            "tables)", what);
    return ZR_OK;
}

/* Load dict.zr of a zstd_dict store, or refuse a stray one elsewhere. */
static int open_dict(zre_engine *e)
{
    char *dp = zre_join(e, "dict.zr");
    if (!dp)
        return zr_set_error(ZR_ENOMEM, "open: out of memory for a path");
    int rc = ZR_OK;
    if (e->codec != ZRE_CODEC_ZSTD_DICT) {
        /* A remote store is what was pushed: only engine files, no dict.zr. */
        if (!e->remote && zrp_path_exists(dp))
            rc = zr_set_error(ZR_ENOTSTORE, "open: %s is malformed: codec %s store has a dict.zr "
                              "(%s)", e->path, zre_codec_name(e->codec), dp);
        free(dp);
        return rc;
    }
    void *buf = NULL;
    size_t len = 0;
    int prc = zre_read_aux(e, "dict.zr", &buf, &len, (size_t)ZRE_DICT_MAX);
    if (prc == -ENOENT)
        rc = zr_set_error(ZR_ENOTSTORE, "open: %s is malformed: codec zstd_dict but %s is missing",
                          e->path, dp);
    else if (prc == -EFBIG)
        rc = zr_set_error(ZR_ENOTSTORE, "open: %s is larger than %" PRIu64 " bytes", dp,
                          (uint64_t)ZRE_DICT_MAX);
    else if (prc < 0)
        rc = zr_set_error(zre_io_status(prc, ZR_EIO), "open: cannot read %s: %s", dp,
                          zr_os_strerror(prc));
    else
        rc = load_dict(e, buf, len, ZR_ENOTSTORE, dp);
    free(buf);
    free(dp);
    return rc;
}

/* ---------------------------------------------------------------- create */

/* The parent directory of `path` (malloc'd), or NULL when it has none. */
static char *parent_of(const char *path)
{
    size_t n = strlen(path);
    while (n > 1 && path[n - 1] == '/')
        n--; /* ignore trailing slashes */
    while (n > 0 && path[n - 1] != '/')
        n--;
    while (n > 1 && path[n - 1] == '/')
        n--;
    if (n == 0)
        return NULL;
    char *d = malloc(n + 1);
    if (d) {
        memcpy(d, path, n);
        d[n] = '\0';
    }
    return d;
}

/* Close `e`, a handle whose directory this process just made, and remove
 * the directory with the files create writes in it; keeps the calling
 * thread's error detail (for status `rc` < 0). */
static void remove_created(zre_engine *e, int rc)
{
    zre_err err;
    zre_err_capture(&err, rc);
    char *path = strdup(e->path);
    engine_free(e);
    if (!path)
        return;
    static const char *const names[] = {"meta.zr", "dict.zr", "0.chunk", "0.loc", "lock.zr"};
    size_t cap = strlen(path) + 64;
    char *p = malloc(cap);
    for (size_t i = 0; p && i < sizeof names / sizeof names[0]; i++) {
        snprintf(p, cap, "%s/%s", path, names[i]);
        (void)zrp_unlink(p);
    }
    if (p) {
        /* A temporary left by a failed atomic write of dict.zr. */
        snprintf(p, cap, "%s/dict.zr.tmp.%ld", path, (long)getpid());
        (void)zrp_unlink(p);
    }
    free(p);
    (void)zrp_rmdir(path);
    free(path);
    if (rc < 0)
        zre_err_raise(&err);
}

static int create_check(const char *path, const zre_create_options *opt)
{
    zre_codec codec = opt->codec;
    if (!zre_codec_name(codec))
        return zr_set_error(ZR_EINVAL, "create: unknown codec %d for %s, expected 0 (raw), 1 (zstd) "
                            "or 2 (zstd_dict)", (int)codec, path);
    if (codec == ZRE_CODEC_ZSTD_DICT && (!opt->dict || opt->dict_size == 0))
        return zr_set_error(ZR_EINVAL, "create: codec zstd_dict needs dictionary bytes (train one "
                            "first); %s not created", path);
    if (codec != ZRE_CODEC_ZSTD_DICT && (opt->dict || opt->dict_size))
        return zr_set_error(ZR_EINVAL, "create: a dictionary is only meaningful with codec "
                            "zstd_dict, not %s (%s)", zre_codec_name(codec), path);
    if (zrp_path_exists(path))
        return zr_set_error(ZR_EEXIST, "create: %s already exists", path);
    return ZR_OK;
}

/* Make the store's directory (and its missing parents). */
static int create_dir(zre_engine *e, const char *parent)
{
    int rc = parent ? zrp_mkdir_parents(parent) : 0;
    if (rc < 0)
        return zr_set_error(ZR_EIO, "create: cannot create parent directory %s: %s", parent,
                            zr_os_strerror(rc));
    rc = zrp_mkdir(e->path);
    if (rc == -EEXIST)
        return zr_set_error(ZR_EEXIST, "create: %s already exists", e->path);
    if (rc < 0)
        return zr_set_error(ZR_EIO, "create: cannot create directory %s: %s", e->path,
                            zr_os_strerror(rc));
    return ZR_OK;
}

/* The files of a new store, durable: dict.zr before meta.zr exists (no
 * zstd_dict store is ever seen without its dictionary), then meta.zr,
 * then the directory entries (and the store's in its parent). */
static int create_files(zre_engine *e, const char *parent)
{
    int rc = ZR_OK;
    if (e->codec == ZRE_CODEC_ZSTD_DICT) {
        char *dp = zre_join(e, "dict.zr");
        int prc = dp ? zrp_write_file_atomic(dp, e->dict, e->dict_size) : 0;
        if (!dp)
            rc = zr_set_error(ZR_ENOMEM, "create: out of memory for a path");
        else if (prc < 0)
            rc = zr_set_error(ZR_EIO, "create: cannot write %s: %s", dp, zr_os_strerror(prc));
        free(dp);
    }
    if (rc == 0)
        rc = open_locks(e, true);
    if (rc == 0)
        rc = zre_meta_create(e);
    if (rc == 0)
        rc = zre_sync_meta(e);
    if (rc == 0)
        rc = zre_fsync_dir(e);
    int prc = rc == 0 && parent ? zrp_fsync_dir(parent) : 0;
    if (prc < 0)
        rc = zr_set_error(ZR_EIO, "create: fsync of directory %s (the parent of %s) failed: %s",
                          parent, e->path, zr_os_strerror(prc));
    return rc;
}

ZRE_API int zre_create_ex(zre_engine **out, const char *path, const zre_create_options *opt)
{
    if (!out || !path || !*path || !opt)
        return zr_set_error(ZR_EINVAL, "create: NULL or empty argument");
    *out = NULL;
    int rc = create_check(path, opt);
    zre_engine *e = NULL;
    if (rc == 0)
        rc = engine_alloc(&e, path, opt->codec);
    if (rc < 0)
        return rc;
    e->identity_tag = opt->identity_tag;
    e->op = "create";
    if (opt->codec == ZRE_CODEC_ZSTD_DICT)
        rc = load_dict(e, opt->dict, opt->dict_size, ZR_EINVAL, "create: dictionary bytes");
    char *parent = rc == 0 ? parent_of(path) : NULL;
    if (rc == 0)
        rc = create_dir(e, parent);
    if (rc < 0) {
        free(parent);
        engine_free(e);
        return rc;
    }
    rc = create_files(e, parent);
    free(parent);
    if (rc < 0) {
        /* Remove what this call made, so that a retry (once there is space
         * again) does not meet "already exists". */
        remove_created(e, rc);
        return rc;
    }
    e->op = NULL;
    *out = e;
    return ZR_OK;
}

ZRE_API int zre_create(zre_engine **out, const char *path, zre_codec codec)
{
    zre_create_options o;
    memset(&o, 0, sizeof o);
    o.codec = codec;
    return zre_create_ex(out, path, &o);
}

ZRE_API int zre_discard(zre_engine *e)
{
    if (!e)
        return ZR_OK;
    if (e->readonly || atomic_load(&e->length) != 0) {
        int rc = zr_set_error(ZR_EINVAL, "discard: %s is not a fresh empty store; closed, not "
                              "removed", e->path);
        engine_free(e);
        return rc;
    }
    remove_created(e, ZR_OK);
    return ZR_OK;
}

/* ------------------------------------------------------------------ open */

static int files_short(zre_engine *e, int rc)
{
    e->files_short = true;
    return rc;
}

/* The record table against a header: segments 0..ceil(length / 2^28)
 * exist and hold their share of entries. Raises the known sizes. */
static int check_segments(zre_engine *e, uint64_t length)
{
    const char *op = zre_op(e);
    for (uint64_t s = 0; s < zre_seg_count(length); s++) {
        int rc = zre_open_numbered(e, &e->locs, s, false);
        if (rc < 0)
            return rc;
        if (rc == 0)
            return files_short(e, zr_set_error(ZR_ENOTSTORE, "%s: %s is malformed: record table "
                                               "segment %" PRIu64 ".loc is missing for length %"
                                               PRIu64, op, e->path, s, length));
        uint64_t need = length - s * ZRE_INT_SEG_ENTRIES, size;
        if (need > ZRE_INT_SEG_ENTRIES)
            need = ZRE_INT_SEG_ENTRIES;
        rc = zre_fent_size(&e->locs, s, &size);
        if (rc < 0)
            return zr_set_error(ZR_EIO, "%s: cannot stat %s/%" PRIu64 ".loc: %s", op, e->path, s,
                                zr_os_strerror(rc));
        if (size < need * ZRE_LOC_ENTRY_SIZE)
            return files_short(e, zr_set_error(ZR_ENOTSTORE, "%s: %s is malformed: %" PRIu64
                                               ".loc holds %" PRIu64 " bytes, expected at least %"
                                               PRIu64 " for length %" PRIu64, op, e->path, s,
                                               size, need * ZRE_LOC_ENTRY_SIZE, length));
        zre_fdtab_grow(&e->locs, s, size);
    }
    return ZR_OK;
}

/* The chunk files against a header: chunks 0..tail exist (the tail one
 * may be missing while nothing was written to it) and the tail one
 * reaches the frontier. Raises the known sizes of chunks from
 * `from_chunk` up (open: the tail chunk; refresh: the view's old tail
 * chunk, which may have grown before a rollover). */
static int check_chunks(zre_engine *e, const zre_state *s, uint32_t from_chunk)
{
    const char *op = zre_op(e);
    for (uint64_t c = 0; c <= s->tail.chunk; c++) {
        bool is_tail = c == s->tail.chunk;
        int rc = zre_open_numbered(e, &e->chunks, c, false);
        if (rc < 0)
            return rc;
        if (rc == 0 && (!is_tail || s->length > 0 || s->tail.offset > 0))
            return files_short(e, zr_set_error(ZR_ENOTSTORE, "%s: %s is malformed: chunk %" PRIu64
                                               ".chunk is missing (tail chunk %u, length %" PRIu64
                                               ")", op, e->path, c, s->tail.chunk, s->length));
        if (rc == 0 || c < from_chunk)
            continue;
        uint64_t size;
        rc = zre_fent_size(&e->chunks, c, &size);
        if (rc < 0)
            return zr_set_error(ZR_EIO, "%s: cannot stat %s/%" PRIu64 ".chunk: %s", op, e->path, c,
                                zr_os_strerror(rc));
        if (is_tail && size < s->tail.offset)
            return files_short(e, zr_set_error(ZR_ENOTSTORE, "%s: %s is malformed: tail chunk %"
                                               PRIu64 ".chunk holds %" PRIu64 " bytes, expected "
                                               "at least tail_offset %u", op, e->path, c, size,
                                               s->tail.offset));
        zre_fdtab_grow(&e->chunks, c, size);
    }
    return ZR_OK;
}

/* Every file check of a header (see the file comment); `from_length`:
 * records below it were checked before (refresh). */
static int check_files(zre_engine *e, const zre_header *h, uint32_t from_chunk,
                       uint64_t from_length)
{
    int rc = check_segments(e, h->now.length);
    if (rc == 0)
        rc = check_chunks(e, &h->now, from_chunk);
    if (rc == 0)
        rc = zre_check_unsynced(e, h, from_length);
    return rc;
}

/* Check the files, and when they hold less than the header claims either
 * keep the durable prefix (recover) or say how to. */
static int open_check_or_recover(zre_engine *e, bool recover)
{
    zre_header h = current_header(e);
    int rc = check_files(e, &h, h.now.tail.chunk, 0);
    if (rc != ZR_ENOTSTORE || !e->files_short)
        return rc;
    if (!recover) {
        zre_err err;
        zre_err_capture(&err, rc);
        return zre_err_raise_with(&err, "; if the store crashed or lost power after appends that "
                                  "were never synced, a writable open with recovery "
                                  "(ZRE_OPEN_RECOVER) keeps every record that reached the disk");
    }
    e->files_short = false;
    rc = zre_recover_durable_prefix(e, &h);
    if (rc < 0)
        return rc;
    h = current_header(e);
    return check_files(e, &h, h.now.tail.chunk, 0);
}

ZRE_API int zre_open_ex(zre_engine **out, const char *path, unsigned flags)
{
    if (!out || !path || !*path)
        return zr_set_error(ZR_EINVAL, "open: NULL or empty argument");
    *out = NULL;
    if (flags & ~(ZRE_OPEN_READONLY | ZRE_OPEN_RECOVER))
        return zr_set_error(ZR_EINVAL, "open: unknown flags 0x%x for %s", flags, path);
    if ((flags & ZRE_OPEN_READONLY) && (flags & ZRE_OPEN_RECOVER))
        return zr_set_error(ZR_EINVAL, "open: recovery writes, so it needs a writable open, not "
                            "a read-only one (%s)", path);
    const bool url = zre_is_url(path);
    if (url && !(flags & ZRE_OPEN_READONLY))
        return zr_set_error(ZR_EUNSUPPORTED, "open: %s is a URL: stores at a URL open read-only "
                            "(upload a local store with push)", path);
    if (!url && !zrp_is_dir(path))
        return zr_set_error(ZR_ENOTSTORE, "open: %s is not a store: not a directory", path);
    zre_engine *e;
    int rc = engine_alloc(&e, path, ZRE_CODEC_RAW);
    if (rc < 0)
        return rc;
    e->readonly = (flags & ZRE_OPEN_READONLY) != 0;
    e->op = "open";
    zre_header h;
    rc = url ? zre_remote_attach(e) : open_locks(e, false);
    if (rc == 0)
        rc = zre_meta_read(e, "open", &h);
    if (rc == 0) {
        adopt_header(e, &h);
        rc = open_dict(e);
    }
    /* A journal left by an interrupted delete/compact: a writable open
     * replays it (or removes it when stale); a read-only open writes
     * nothing and refuses while one is pending. No delete or compact can
     * be running while this handle holds its shared meta.zr lock, so a
     * journal seen here was left by a crash. A store at a URL is a
     * finished upload: push sends no journal. */
    if (rc == 0 && !url)
        rc = zre_journal_recover(e);
    if (rc == 0)
        rc = open_check_or_recover(e, (flags & ZRE_OPEN_RECOVER) != 0);
    /* A writable open turns an older version's 32-byte header into the
     * two copies, durably (see meta.c). */
    if (rc == 0 && e->meta_legacy && !e->readonly)
        rc = zre_sync_all(e);
    if (rc < 0) {
        engine_free(e);
        return rc;
    }
    e->op = NULL;
    *out = e;
    return ZR_OK;
}

ZRE_API int zre_open(zre_engine **out, const char *path) { return zre_open_ex(out, path, 0); }

/* A header that went back under a read-only handle: something changed the
 * store behind the locks. */
static int refresh_went_back(zre_engine *e, const zre_header *h)
{
    uint64_t old = atomic_load_explicit(&e->length, memory_order_relaxed);
    if (h->now.length >= old && h->codec == e->codec && h->identity_tag == e->identity_tag &&
        !zre_pos_less(h->now.tail, e->tail))
        return ZR_OK;
    return zr_set_error(ZR_ECORRUPT, "refresh: store %s went back under a read-only handle "
                        "(length %" PRIu64 " -> %" PRIu64 ", frontier %u:%u -> %u:%u): it was "
                        "changed by something that ignores the store's locks; reopen it",
                        e->path, old, h->now.length, e->tail.chunk, e->tail.offset,
                        h->now.tail.chunk, h->now.tail.offset);
}

ZRE_API int zre_refresh(zre_engine *e)
{
    if (!e)
        return zr_set_error(ZR_EINVAL, "refresh: NULL handle");
    if (!e->readonly || e->remote)
        return ZR_OK; /* the one writer: its view is always the newest; a URL: a fixed upload */
    zrp_mutex_lock(&e->writer);
    e->op = "refresh";
    zre_header h;
    int rc = zre_meta_read(e, "refresh", &h);
    if (rc == 0)
        rc = refresh_went_back(e, &h);
    /* Known file sizes are measured after the header was read, so they
     * cover everything it commits (the writer writes payloads and table
     * entries before the header). */
    if (rc == 0)
        rc = check_files(e, &h, e->tail.chunk, atomic_load(&e->length));
    if (rc == 0)
        adopt_header(e, &h);
    e->op = NULL;
    zrp_mutex_unlock(&e->writer);
    return rc;
}

/* ---------------------------------------------------------- sync, close */

ZRE_API int zre_sync(zre_engine *e)
{
    if (!e)
        return zr_set_error(ZR_EINVAL, "sync: NULL handle");
    zrp_mutex_lock(&e->writer);
    int rc = zre_check_usable(e, "sync");
    if (rc == 0) {
        e->op = "sync";
        rc = zre_sync_all(e);
        /* A failed fsync is never retried: the kernel may have dropped the
         * dirty pages and would report the next fsync clean. */
        if (rc < 0 && e->fsync_failed)
            rc = zre_poison(e, rc);
        e->fsync_failed = false;
        e->op = NULL;
    }
    zrp_mutex_unlock(&e->writer);
    return rc;
}

ZRE_API int zre_close(zre_engine *e)
{
    if (!e)
        return ZR_OK;
    /* A poisoned handle writes nothing more: the next writable open
     * recovers the store from what is durable (and its journal). */
    int rc = e->readonly || atomic_load(&e->poisoned) ? ZR_OK : zre_sync(e);
    engine_free(e);
    return rc;
}

/* The child of a fork() shares the parent's open file descriptions, so its
 * inherited descriptors keep the parent's flock lock alive after the
 * parent closes. Only the descriptors are closed here: the pool threads do
 * not exist in the child, the mutexes may have been held by parent threads
 * at the fork, and freeing would run allocator code on state the parent's
 * threads were using, so all of that is left alone (leaked by design). */
ZRE_API void zre_forget_after_fork(zre_engine *e)
{
    if (!e)
        return;
    engine_close_files(e, false);
}
