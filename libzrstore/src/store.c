/*
 * store.c - dense and ragged typed stores over one zrengine handle.
 *
 * The store adds type identity (store.zr) and record geometry; all bytes
 * go straight to and from the engine without extra copies. A handle is
 * immutable after create/open, so concurrent gathers and appends on it
 * are as safe as the engine's.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "zr_platform.h"
#include "zrs_internal.h"

struct zrs_store {
    zre_engine *engine;
    zrs_identity id;
    /* store.zr may be rewritten (a new uuid): meta.zr's identity tag is
     * the one a rewrite keeps (always, except for a store.zr written by
     * hand in a non-canonical form, whose tag covers its own bytes). */
    int rewritable;
    /* Lifetime (see zrs_borrow): refs counts the owner (until zrs_close)
     * and every borrower; the last reference frees the handle. `closed`
     * is set by zrs_close, which then waits until `active` (engine calls
     * in flight, see enter/leave) is 0 and closes the engine; later calls
     * through a borrower find `closed` and fail with ZR_ECLOSED. */
    _Atomic long refs;
    _Atomic int closed;
    _Atomic long active;
    char *path; /* the directory, kept after the engine is closed */
};

/* store.zr is tiny; anything bigger is not ours. */
#define STORE_ZR_MAX_BYTES (64u * 1024u)
/* Index counts up to this resolve into a stack buffer (no malloc). */
#define SMALL_INDEX_COUNT 64

/* ------------------------------------------------------------- helpers */

static uint64_t load_le64(const unsigned char *p)
{
    return (uint64_t)p[0] | (uint64_t)p[1] << 8 | (uint64_t)p[2] << 16 |
           (uint64_t)p[3] << 24 | (uint64_t)p[4] << 32 | (uint64_t)p[5] << 40 |
           (uint64_t)p[6] << 48 | (uint64_t)p[7] << 56;
}

static const char *kind_name(zrs_kind k)
{
    return k == ZRS_DENSE ? "dense" : "ragged";
}

/* "<dir>/store.zr", malloc'd; NULL when out of memory. */
static char *store_zr_path(const char *dir)
{
    size_t n = strlen(dir);
    char *p = malloc(n + sizeof("/store.zr"));
    if (p == NULL)
        return NULL;
    memcpy(p, dir, n);
    memcpy(p + n, "/store.zr", sizeof("/store.zr"));
    return p;
}

/* Close an engine after a failure without losing the failure's detail
 * (a failing close would otherwise overwrite it). Returns rc. */
/* Close the engine (or, with `discard`, a fresh one whose create step
 * failed: remove what it made, so a retry does not meet "already
 * exists"), keeping the calling thread's error and its errno. */
static int end_engine_keep_error(zre_engine *e, int rc, int discard)
{
    char msg[512];
    snprintf(msg, sizeof msg, "%s", zr_last_error());
    int os_errno = zr_last_errno();
    if (discard)
        zre_discard(e);
    else
        zre_close(e);
    if (os_errno)
        (void)zr_os_strerror(-os_errno); /* keep the errno with the message */
    return zr_set_error(rc, "%s", msg);
}

static int close_engine_keep_error(zre_engine *e, int rc) { return end_engine_keep_error(e, rc, 0); }
static int discard_engine_keep_error(zre_engine *e, int rc) { return end_engine_keep_error(e, rc, 1); }

/* Null handle and kind checks shared by every typed call. */
static int check_handle(const zrs_store *s, const char *what, int want_kind)
{
    if (s == NULL)
        return zr_set_error(ZR_EINVAL, "%s: NULL store handle", what);
    if (want_kind >= 0 && (int)s->id.kind != want_kind)
        return zr_set_error(ZR_EINVAL,
                            "%s: store %s is %s, this call is for %s stores",
                            what, s->path, kind_name(s->id.kind),
                            kind_name((zrs_kind)want_kind));
    return ZR_OK;
}

/* Bracket every engine call a borrower may make (gathers, sizes, hints,
 * sizing): enter fails with ZR_ECLOSED once zrs_close began, and
 * zrs_close waits for the calls that entered before it to leave, so the
 * engine is never freed under a running call. enter and zrs_close each
 * write their flag before reading the other's (sequentially consistent
 * atomics), so one of them always sees the other. */
static int enter(const zrs_store *cs, const char *what)
{
    zrs_store *s = (zrs_store *)cs; /* the counters are not part of the value */
    atomic_fetch_add(&s->active, 1);
    if (!atomic_load(&s->closed))
        return ZR_OK;
    atomic_fetch_sub(&s->active, 1);
    return zr_set_error(ZR_ECLOSED, "%s: store '%s' was closed while a loader or "
                        "concatenation read it", what, s->path);
}

static void leave(const zrs_store *cs)
{
    atomic_fetch_sub(&((zrs_store *)cs)->active, 1);
}

int zrs__enter(const zrs_store *s, const char *what) { return enter(s, what); }
void zrs__leave(const zrs_store *s) { leave(s); }

static void store_free(zrs_store *s)
{
    free(s->path);
    free(s);
}

/* Give a fresh handle its lifetime fields: one reference, the owner's. */
static int store_init(zrs_store *s, const char *what)
{
    const char *p = zre_path(s->engine);
    size_t n = strlen(p) + 1;
    s->path = malloc(n);
    if (s->path == NULL)
        return zr_set_error(ZR_ENOMEM, "%s: out of memory for %s", what, p);
    memcpy(s->path, p, n);
    atomic_init(&s->refs, 1);
    atomic_init(&s->closed, 0);
    atomic_init(&s->active, 0);
    return ZR_OK;
}

/* Exclusive operations (delete, compact) refuse a borrowed handle. */
static int check_exclusive(const zrs_store *s, const char *what)
{
    int n = zrs_borrowers(s);
    if (n <= 0)
        return ZR_OK;
    return zr_set_error(ZR_EBUSY, "%s: store '%s' is read by %d borrower%s (a loader or "
                        "concatenation); %s needs exclusive use, close %s first", what,
                        s->path, n, n == 1 ? "" : "s", what, n == 1 ? "it" : "them");
}

static int resolve_in(uint64_t length, const int64_t *index, uint64_t count, uint64_t *out);

/* Resolve indices into a caller-provided stack buffer when small, else
 * into a malloc'd one (*heap receives it; free it after use). */
static int resolve_tmp(const zrs_store *s, const char *what, const int64_t *index,
                       uint64_t count, uint64_t *small, uint64_t **out,
                       uint64_t **heap)
{
    *heap = NULL;
    uint64_t *buf = small;
    if (count > SMALL_INDEX_COUNT) {
        if (count > SIZE_MAX / sizeof(uint64_t))
            return zr_set_error(ZR_ENOMEM, "%s: %" PRIu64 " indices do not fit in memory",
                                what, count);
        buf = malloc((size_t)count * sizeof(uint64_t));
        if (buf == NULL)
            return zr_set_error(ZR_ENOMEM, "%s: cannot allocate %" PRIu64
                                " resolved indices", what, count);
        *heap = buf;
    }
    /* Every caller entered the store (enter), so the engine is live. */
    int rc = resolve_in(zre_length(s->engine), index, count, buf);
    if (rc != ZR_OK) {
        free(*heap);
        *heap = NULL;
        return rc;
    }
    *out = buf;
    return ZR_OK;
}

/* ------------------------------------------------------ ragged records */

int zrs__ragged_check(const unsigned char *rec, uint64_t size,
                      zrs_dtype dtype, size_t *ndim_out, uint64_t *dims_out,
                      uint64_t *payload_offset, char *why)
{
    size_t itemsize = zrs_dtype_itemsize(dtype);
    if (itemsize == 0) {
        snprintf(why, ZRS_WHY_MAX, "cannot be checked: unknown dtype value %d",
                 (int)dtype);
        return -1;
    }
    if (size < 8) {
        snprintf(why, ZRS_WHY_MAX,
                 "is %" PRIu64 " bytes, shorter than the 8-byte ndim prefix", size);
        return -1;
    }
    uint64_t ndim = load_le64(rec);
    if (ndim > ZRS_MAX_NDIM) {
        snprintf(why, ZRS_WHY_MAX, "has ndim %" PRIu64 ", at most %d allowed",
                 ndim, ZRS_MAX_NDIM);
        return -1;
    }
    uint64_t prefix = ZRS_RAGGED_PREFIX_SIZE(ndim);
    if (size < prefix) {
        snprintf(why, ZRS_WHY_MAX,
                 "is %" PRIu64 " bytes, shorter than its %" PRIu64
                 "-byte shape prefix (ndim %" PRIu64 ")", size, prefix, ndim);
        return -1;
    }
    uint64_t expect = itemsize;
    int overflow = 0;
    for (uint64_t j = 0; j < ndim; j++) {
        uint64_t d = load_le64(rec + 8 + 8 * j);
        /* A zero dimension is a record with no elements (an empty token
         * list, no boxes: shape (0, 4)); its prefix still holds its shape. */
        if (expect != 0 && d > UINT64_MAX / expect)
            overflow = 1;
        else
            expect *= d;
        if (dims_out != NULL)
            dims_out[j] = d;
    }
    uint64_t payload = size - prefix;
    if (overflow) {
        snprintf(why, ZRS_WHY_MAX,
                 "has dims whose element count overflows 64 bits "
                 "(payload is %" PRIu64 " bytes)", payload);
        return -1;
    }
    if (payload != expect) {
        snprintf(why, ZRS_WHY_MAX,
                 "has a %" PRIu64 "-byte payload, expected itemsize x prod(dims) = %"
                 PRIu64 " bytes", payload, expect);
        return -1;
    }
    if (ndim_out != NULL)
        *ndim_out = (size_t)ndim;
    if (payload_offset != NULL)
        *payload_offset = prefix;
    return 0;
}

int zrs_ragged_decode(const void *record, uint64_t size, zrs_dtype dtype,
                      size_t *ndim, uint64_t *dims, uint64_t *payload_offset)
{
    if (record == NULL && size != 0)
        return zr_set_error(ZR_EINVAL, "ragged_decode: NULL record");
    if (zrs_dtype_itemsize(dtype) == 0)
        return zr_set_error(ZR_EINVAL, "ragged_decode: unknown dtype value %d",
                            (int)dtype);
    char why[ZRS_WHY_MAX];
    if (zrs__ragged_check(record, size, dtype, ndim, dims, payload_offset, why) != 0)
        return zr_set_error(ZR_EINVAL, "ragged_decode: record %s", why);
    return ZR_OK;
}

int zrs_ragged_encoded_size(zrs_dtype dtype, size_t ndim, const uint64_t *dims, uint64_t *size)
{
    if (size == NULL || (dims == NULL && ndim > 0))
        return zr_set_error(ZR_EINVAL, "ragged_encode: NULL %s", size == NULL ? "size" : "dims");
    uint64_t expect = zrs_dtype_itemsize(dtype);
    if (expect == 0)
        return zr_set_error(ZR_EINVAL, "ragged_encode: unknown dtype value %d", (int)dtype);
    if (ndim > ZRS_MAX_NDIM)
        return zr_set_error(ZR_EINVAL, "ragged_encode: %zu dims, at most %d", ndim, ZRS_MAX_NDIM);
    int overflow = 0;
    for (size_t j = 0; j < ndim; j++) {
        if (expect != 0 && dims[j] > UINT64_MAX / expect)
            overflow = 1;
        else
            expect *= dims[j];
    }
    uint64_t prefix = ZRS_RAGGED_PREFIX_SIZE(ndim);
    if (overflow || expect > UINT64_MAX - prefix)
        return zr_set_error(ZR_EINVAL, "ragged_encode: a record of %zu dims whose size "
                            "overflows 64 bits", ndim);
    *size = prefix + expect;
    return ZR_OK;
}

int zrs_ragged_encode(zrs_dtype dtype, size_t ndim, const uint64_t *dims, const void *payload,
                      uint64_t payload_size, void *dst, uint64_t dst_capacity, uint64_t *written)
{
    uint64_t need = 0;
    int rc = zrs_ragged_encoded_size(dtype, ndim, dims, &need);
    if (rc != ZR_OK)
        return rc;
    uint64_t prefix = ZRS_RAGGED_PREFIX_SIZE(ndim);
    if (payload_size != need - prefix)
        return zr_set_error(ZR_EINVAL, "ragged_encode: record of shape with %" PRIu64
                            " elements needs %" PRIu64 " bytes of data, got %" PRIu64,
                            (need - prefix) / zrs_dtype_itemsize(dtype), need - prefix,
                            payload_size);
    if (dst == NULL || (payload == NULL && need > prefix))
        return zr_set_error(ZR_EINVAL, "ragged_encode: NULL %s", dst == NULL ? "dst" : "payload");
    if (dst_capacity < need)
        return zr_set_error(ZR_EINVAL, "ragged_encode: the record needs %" PRIu64
                            " bytes, dst holds %" PRIu64, need, dst_capacity);
    unsigned char *p = dst;
    for (size_t j = 0; j <= ndim; j++) {
        uint64_t v = j == 0 ? (uint64_t)ndim : dims[j - 1];
        for (int b = 0; b < 8; b++) p[8 * j + (size_t)b] = (unsigned char)(v >> (8 * b));
    }
    if (need > prefix)
        memcpy(p + prefix, payload, (size_t)(need - prefix));
    if (written != NULL)
        *written = need;
    return ZR_OK;
}

/* ------------------------------------------------------ create / open */

static int create_store(zrs_store **out, const char *path, zrs_identity *id,
                        zre_codec codec, const void *dict, uint64_t dict_size)
{
    char why[ZRS_WHY_MAX];
    if (zrs__identity_check(id, why) != 0)
        return zr_set_error(ZR_EINVAL, "create: %s", why);
    if (zre_codec_name(codec) == NULL)
        return zr_set_error(ZR_EINVAL,
                            "create: unknown codec value %d (raw, zstd or zstd_dict)",
                            (int)codec);
    if (codec == ZRE_CODEC_ZSTD_DICT && (dict == NULL || dict_size == 0))
        return zr_set_error(ZR_EINVAL,
                            "create: codec zstd_dict needs dictionary bytes "
                            "(train them first, e.g. zrs_train_dict); %s not created",
                            path);

    /* Everything that can fail without touching the disk goes first. */
    zrs_store *s = calloc(1, sizeof *s);
    char *zr_path = store_zr_path(path);
    void *buf = NULL;
    size_t len = 0;
    int rc = ZR_OK;
    if (s == NULL || zr_path == NULL) {
        rc = zr_set_error(ZR_ENOMEM, "create: out of memory for %s", path);
        goto fail;
    }
    rc = zrs__uuid_new(id->uuid);
    if (rc != ZR_OK)
        goto fail;
    id->has_uuid = 1;
    rc = zrs__identity_encode(id, 1, &buf, &len);
    if (rc != ZR_OK)
        goto fail;

    zre_create_options opt;
    memset(&opt, 0, sizeof opt);
    opt.codec = codec;
    opt.dict = dict;
    opt.dict_size = dict_size;
    opt.identity_tag = zrs__identity_tag(id, buf, len);
    if (opt.identity_tag == 0) {
        rc = zr_set_error(ZR_ENOMEM, "create: out of memory for %s", path);
        goto fail;
    }
    rc = zre_create_ex(&s->engine, path, &opt);
    if (rc != ZR_OK)
        goto fail;
    rc = store_init(s, "create");
    if (rc != ZR_OK) {
        rc = discard_engine_keep_error(s->engine, rc);
        goto fail;
    }
    /* store.zr marks the directory as a store, so the engine's files must
     * be durable before it appears. */
    rc = zre_sync(s->engine);
    if (rc != ZR_OK) {
        char msg[512];
        snprintf(msg, sizeof msg, "%s", zr_last_error());
        int os_errno = zr_last_errno();
        if (os_errno)
            (void)zr_os_strerror(-os_errno);
        zr_set_error(rc, "create: making the new store %s durable failed (%s); nothing was kept",
                     path, msg);
        rc = discard_engine_keep_error(s->engine, rc);
        goto fail;
    }
    int prc = zrp_write_file_atomic(zr_path, buf, len);
    if (prc != 0) {
        zr_set_error(ZR_EIO, "create: cannot write %s: %s; "
                     "the directory is not a store", zr_path, zr_os_strerror(prc));
        (void)zrp_unlink(zr_path); /* in case the rename landed */
        rc = discard_engine_keep_error(s->engine, ZR_EIO);
        goto fail;
    }
    s->id = *id;
    s->rewritable = 1;
    free(buf);
    free(zr_path);
    *out = s;
    return ZR_OK;

fail:
    free(buf);
    free(zr_path);
    if (s != NULL)
        free(s->path);
    free(s);
    return rc;
}

int zrs_create_dense(zrs_store **out, const char *path, zrs_dtype dtype,
                     const uint64_t *item_shape, size_t ndim, zre_codec codec)
{
    return zrs_create_dense_dict(out, path, dtype, item_shape, ndim, codec, NULL, 0);
}

int zrs_create_ragged(zrs_store **out, const char *path, zrs_dtype dtype,
                      zre_codec codec)
{
    return zrs_create_ragged_dict(out, path, dtype, codec, NULL, 0);
}

int zrs_create_dense_dict(zrs_store **out, const char *path, zrs_dtype dtype,
                          const uint64_t *item_shape, size_t ndim, zre_codec codec,
                          const void *dict, uint64_t dict_size)
{
    if (out == NULL)
        return zr_set_error(ZR_EINVAL, "create_dense: NULL output handle");
    *out = NULL;
    if (path == NULL)
        return zr_set_error(ZR_EINVAL, "create_dense: NULL path");
    if (ndim > ZRS_MAX_NDIM)
        return zr_set_error(ZR_EINVAL,
                            "create: item_shape has %zu dims, at most %d allowed",
                            ndim, ZRS_MAX_NDIM);
    if (ndim > 0 && item_shape == NULL)
        return zr_set_error(ZR_EINVAL, "create: NULL item_shape with ndim %zu", ndim);
    zrs_identity id;
    memset(&id, 0, sizeof id);
    id.kind = ZRS_DENSE;
    id.dtype = dtype;
    id.ndim = ndim;
    for (size_t i = 0; i < ndim; i++)
        id.shape[i] = item_shape[i];
    return create_store(out, path, &id, codec, dict, dict_size);
}

int zrs_create_ragged_dict(zrs_store **out, const char *path, zrs_dtype dtype,
                           zre_codec codec, const void *dict, uint64_t dict_size)
{
    if (out == NULL)
        return zr_set_error(ZR_EINVAL, "create_ragged: NULL output handle");
    *out = NULL;
    if (path == NULL)
        return zr_set_error(ZR_EINVAL, "create_ragged: NULL path");
    zrs_identity id;
    memset(&id, 0, sizeof id);
    id.kind = ZRS_RAGGED;
    id.dtype = dtype;
    return create_store(out, path, &id, codec, dict, dict_size);
}

int zrs_open(zrs_store **out, const char *path) { return zrs_open_ex(out, path, 0); }

int zrs_open_ex(zrs_store **out, const char *path, unsigned flags)
{
    if (out == NULL)
        return zr_set_error(ZR_EINVAL, "open: NULL output handle");
    *out = NULL;
    if (path == NULL)
        return zr_set_error(ZR_EINVAL, "open: NULL path");

    zre_engine *e = NULL;
    int rc = zre_open_ex(&e, path, flags);
    if (rc != ZR_OK) {
        if ((rc == ZR_ENOTSTORE || rc == ZR_EIO) && !zre_is_remote(path) && !zrp_path_exists(path))
            return zr_set_error(ZR_ENOTSTORE, "open: not a store: %s does not exist (%s)",
                                path, zr_os_strerror(-ENOENT)); /* errno ENOENT */
        return rc;
    }

    zrs_store *s = calloc(1, sizeof *s);
    char *zr_path = store_zr_path(path);
    void *buf = NULL;
    size_t len = 0;
    if (s == NULL || zr_path == NULL) {
        zr_set_error(ZR_ENOMEM, "open: out of memory for %s", path);
        rc = close_engine_keep_error(e, ZR_ENOMEM);
        goto done;
    }
    /* Through the engine: a store at a URL reads its store.zr there. */
    int prc = zre_read_side_file(e, "store.zr", &buf, &len, STORE_ZR_MAX_BYTES);
    if (prc != 0) {
        if (prc == ZR_ENOTSTORE)
            zr_set_error(ZR_ENOTSTORE, "not a store: %s missing", zr_path);
        else if (prc == ZR_ETOOBIG)
            zr_set_error(ZR_ENOTSTORE, "open: %s is not a store: its store.zr is larger than "
                         "%u bytes", zr_path, STORE_ZR_MAX_BYTES);
        rc = close_engine_keep_error(e, prc == ZR_ETOOBIG ? ZR_ENOTSTORE : prc);
        buf = NULL;
        goto done;
    }
    rc = zrs__identity_decode(buf, len, zr_path, &s->id);
    if (rc != ZR_OK) {
        rc = close_engine_keep_error(e, rc);
        goto done;
    }
    uint32_t tag = zrs__identity_tag(&s->id, buf, len);
    if (tag == 0) {
        zr_set_error(ZR_ENOMEM, "open: out of memory for %s", path);
        rc = close_engine_keep_error(e, ZR_ENOMEM);
        goto done;
    }
    if (zre_identity_tag(e) != tag) {
        zr_set_error(ZR_ENOTSTORE, "open: %s is damaged: its bytes do not match the identity "
                     "hash in meta.zr (0x%08x, got 0x%08x)", zr_path, zre_identity_tag(e), tag);
        rc = close_engine_keep_error(e, ZR_ENOTSTORE);
        goto done;
    }
    if (s->id.has_uuid) {
        s->rewritable = 1;
    } else {
        zrs_identity typed = s->id;
        typed.has_uuid = 1; /* the tag a rewrite with a uuid would need */
        s->rewritable = zrs__identity_tag(&typed, buf, len) == tag;
    }
    s->engine = e;
    rc = store_init(s, "open");
    if (rc != ZR_OK) {
        rc = close_engine_keep_error(e, rc);
        goto done;
    }
    *out = s;
    s = NULL;

done:
    zre_free(buf);
    free(zr_path);
    free(s);
    return rc;
}

int zrs_push(const char *path, const char *url,
             void (*progress)(uint64_t done, uint64_t total, void *arg), void *arg)
{
    zrs_store *s = NULL;
    int rc = zrs_open_ex(&s, path, ZRE_OPEN_READONLY);
    if (rc < 0)
        return rc;
    rc = zrs_push_store(s, url, progress, arg);
    if (rc == 0)
        return zrs_close(s);
    zre_engine *e = s->engine;
    store_free(s);
    return close_engine_keep_error(e, rc);
}

int zrs_push_store(zrs_store *s, const char *url,
                   void (*progress)(uint64_t done, uint64_t total, void *arg), void *arg)
{
    if (s == NULL)
        return zr_set_error(ZR_EINVAL, "push: NULL store handle");
    static const char *const extra[] = {"store.zr"};
    return zre_push(s->engine, url, extra, 1, progress, arg);
}

int zrs_close(zrs_store *s)
{
    if (s == NULL)
        return ZR_OK;
    if (atomic_exchange(&s->closed, 1))
        return ZR_OK; /* closed already (the owner's handle is gone by contract) */
    /* Borrowers' calls that entered before `closed` was set finish first
     * (a gather: microseconds to milliseconds; a download from a URL may
     * take longer, so the wait backs off from yielding to sleeping). */
    for (unsigned spins = 0; atomic_load(&s->active) > 0; spins++) {
        if (spins < 1000)
            zrp_yield();
        else
            zrp_sleep_ms(1);
    }
    int rc = zre_close(s->engine);
    s->engine = NULL;
    zrs_unborrow(s); /* the owner's reference */
    return rc;
}

int zrs_borrow(zrs_store *s)
{
    if (s == NULL)
        return zr_set_error(ZR_EINVAL, "borrow: NULL store handle");
    if (atomic_load(&s->closed))
        return zr_set_error(ZR_ECLOSED, "borrow: store '%s' is closed", s->path);
    atomic_fetch_add(&s->refs, 1);
    return ZR_OK;
}

void zrs_unborrow(zrs_store *s)
{
    if (s != NULL && atomic_fetch_sub(&s->refs, 1) == 1)
        store_free(s);
}

int zrs_borrowers(const zrs_store *cs)
{
    if (cs == NULL)
        return 0;
    zrs_store *s = (zrs_store *)cs;
    int closed = atomic_load(&s->closed);
    return zrs__borrowers(atomic_load(&s->refs), closed);
}

int zrs_is_closed(const zrs_store *s)
{
    return s != NULL && atomic_load(&((zrs_store *)s)->closed);
}

/* ---------------------------------------------------------- accessors */

zrs_kind zrs_get_kind(const zrs_store *s) { return s ? s->id.kind : ZRS_DENSE; }

zrs_dtype zrs_get_dtype(const zrs_store *s)
{
    return s ? s->id.dtype : ZRS_DTYPE_COUNT;
}

zre_codec zrs_get_codec(const zrs_store *s)
{
    if (s == NULL || enter(s, "codec") != ZR_OK)
        return ZRE_CODEC_RAW;
    zre_codec c = zre_get_codec(s->engine);
    leave(s);
    return c;
}

uint64_t zrs_length(const zrs_store *s)
{
    if (s == NULL || enter(s, "length") != ZR_OK)
        return 0;
    uint64_t n = zre_length(s->engine);
    leave(s);
    return n;
}

int zrs_refresh(zrs_store *s)
{
    if (!s)
        return zr_set_error(ZR_EINVAL, "refresh: NULL store");
    return zre_refresh(s->engine);
}

size_t zrs_item_ndim(const zrs_store *s)
{
    return (s && s->id.kind == ZRS_DENSE) ? s->id.ndim : 0;
}

const uint64_t *zrs_item_shape(const zrs_store *s)
{
    return (s && s->id.kind == ZRS_DENSE) ? s->id.shape : NULL;
}

uint64_t zrs_record_size(const zrs_store *s)
{
    return (s && s->id.kind == ZRS_DENSE) ? s->id.record_size : 0;
}

const char *zrs_path(const zrs_store *s) { return s ? s->path : NULL; }

zre_engine *zrs_engine(zrs_store *s) { return s ? s->engine : NULL; }

/* ------------------------------------------------------------ indices */

/* zrs_resolve_index against `length` (the caller entered the store). */
static int resolve_in(uint64_t length, const int64_t *index, uint64_t count, uint64_t *out)
{
    for (uint64_t i = 0; i < count; i++) {
        int64_t v = index[i];
        int ok;
        uint64_t r = 0;
        if (v >= 0) {
            ok = (uint64_t)v < length;
            r = (uint64_t)v;
        } else {
            /* |v| without overflowing on INT64_MIN. */
            uint64_t mag = (uint64_t)(-(v + 1)) + 1;
            ok = mag <= length;
            r = length - mag;
        }
        if (!ok)
            return zr_set_error(ZR_ERANGE,
                                "index %" PRId64 " is out of range for a store of %"
                                PRIu64 " records", v, length);
        out[i] = r;
    }
    return ZR_OK;
}

int zrs_resolve_index(const zrs_store *s, const int64_t *index, uint64_t count,
                      uint64_t *out)
{
    if (s == NULL)
        return zr_set_error(ZR_EINVAL, "resolve_index: NULL store handle");
    if (count == 0)
        return ZR_OK;
    if (index == NULL || out == NULL)
        return zr_set_error(ZR_EINVAL, "resolve_index: NULL %s with count %" PRIu64,
                            index == NULL ? "index" : "output", count);
    int rc = enter(s, "resolve_index");
    if (rc != ZR_OK)
        return rc;
    rc = resolve_in(zre_length(s->engine), index, count, out);
    leave(s);
    return rc;
}

/* -------------------------------------------------------------- dense */

int zrs_append_dense(zrs_store *s, const void *data, uint64_t nbytes,
                     uint64_t count, uint64_t *first_index)
{
    int rc = check_handle(s, "append", ZRS_DENSE);
    if (rc != ZR_OK)
        return rc;
    uint64_t rs = s->id.record_size;
    if (count > UINT64_MAX / rs)
        return zr_set_error(ZR_EINVAL,
                            "append: count %" PRIu64 " x record_size %" PRIu64
                            " overflows; got %" PRIu64 " bytes", count, rs, nbytes);
    uint64_t expect = count * rs;
    if (nbytes != expect)
        return zr_set_error(ZR_EINVAL,
                            "append: expected %" PRIu64 " bytes (count x record_size"
                            " = %" PRIu64 " x %" PRIu64 ") got %" PRIu64,
                            expect, count, rs, nbytes);
    if (count == 0) {
        if (first_index != NULL)
            *first_index = zre_length(s->engine);
        return ZR_OK;
    }
    if (data == NULL)
        return zr_set_error(ZR_EINVAL, "append: NULL data with count %" PRIu64, count);
    return zre_append(s->engine, data, rs, NULL, count, first_index);
}

int zrs_gather_dense(zrs_store *s, const int64_t *index, uint64_t count,
                     void *dst, uint64_t dst_capacity)
{
    int rc = check_handle(s, "gather", ZRS_DENSE);
    if (rc != ZR_OK)
        return rc;
    if (count == 0)
        return ZR_OK;
    uint64_t rs = s->id.record_size;
    if (index == NULL || dst == NULL)
        return zr_set_error(ZR_EINVAL, "gather: NULL %s with count %" PRIu64,
                            index == NULL ? "index" : "dst", count);
    if (count > UINT64_MAX / rs || dst_capacity < count * rs)
        return zr_set_error(ZR_EINVAL,
                            "gather: dst holds %" PRIu64 " bytes, need count x "
                            "record_size = %" PRIu64 " x %" PRIu64,
                            dst_capacity, count, rs);
    uint64_t small[SMALL_INDEX_COUNT];
    uint64_t *idx = NULL, *heap = NULL;
    rc = enter(s, "gather");
    if (rc != ZR_OK)
        return rc;
    rc = resolve_tmp(s, "gather", index, count, small, &idx, &heap);
    if (rc == ZR_OK)
        rc = zre_gather(s->engine, idx, count, dst, dst_capacity, rs, NULL);
    leave(s);
    free(heap);
    return rc;
}

/* ------------------------------------------------------------- ragged */

int zrs_append_ragged(zrs_store *s, const void *packed, const uint64_t *bounds,
                      uint64_t count, uint64_t *first_index)
{
    int rc = check_handle(s, "append_ragged", ZRS_RAGGED);
    if (rc != ZR_OK)
        return rc;
    if (count == 0) {
        if (first_index != NULL)
            *first_index = zre_length(s->engine);
        return ZR_OK;
    }
    if (packed == NULL || bounds == NULL)
        return zr_set_error(ZR_EINVAL, "append_ragged: NULL %s with count %" PRIu64,
                            packed == NULL ? "packed" : "bounds", count);
    /* Validate every record before the engine writes anything, so one bad
     * record leaves the store untouched. */
    const unsigned char *base = packed;
    char why[ZRS_WHY_MAX];
    for (uint64_t i = 0; i < count; i++) {
        uint64_t lo = bounds[i], hi = bounds[i + 1];
        if (hi < lo)
            return zr_set_error(ZR_EINVAL,
                                "append_ragged: bounds decrease at record %" PRIu64
                                " (bounds[%" PRIu64 "] = %" PRIu64 ", bounds[%" PRIu64
                                "] = %" PRIu64 ")", i, i, lo, i + 1, hi);
        if (hi > SIZE_MAX)
            return zr_set_error(ZR_EINVAL,
                                "append_ragged: record %" PRIu64 " ends at byte %"
                                PRIu64 ", beyond this platform's address space", i, hi);
        uint64_t size = hi - lo;
        if (zrs__ragged_check(base + lo, size, s->id.dtype, NULL, NULL, NULL, why) != 0)
            return zr_set_error(ZR_EINVAL, "append_ragged: record %" PRIu64 " %s",
                                i, why);
        if (size > ZRE_RECORD_MAX)
            return zr_set_error(ZR_ETOOBIG,
                                "append_ragged: record %" PRIu64 " is %" PRIu64
                                " bytes, over the record limit of %" PRIu64 " bytes",
                                i, size, (uint64_t)ZRE_RECORD_MAX);
    }
    return zre_append(s->engine, packed, 0, bounds, count, first_index);
}

int zrs_ragged_sizes(zrs_store *s, const int64_t *index, uint64_t count,
                     uint64_t *sizes)
{
    int rc = check_handle(s, "ragged_sizes", ZRS_RAGGED);
    if (rc != ZR_OK)
        return rc;
    if (count == 0)
        return ZR_OK;
    if (index == NULL || sizes == NULL)
        return zr_set_error(ZR_EINVAL, "ragged_sizes: NULL %s with count %" PRIu64,
                            index == NULL ? "index" : "sizes", count);
    uint64_t small[SMALL_INDEX_COUNT];
    uint64_t *idx = NULL, *heap = NULL;
    rc = enter(s, "ragged_sizes");
    if (rc != ZR_OK)
        return rc;
    rc = resolve_tmp(s, "ragged_sizes", index, count, small, &idx, &heap);
    if (rc == ZR_OK)
        rc = zre_record_sizes(s->engine, idx, count, sizes);
    leave(s);
    free(heap);
    return rc;
}

/* The shape of zrs_advise and zrs_delete: check the handle (any kind),
 * resolve `index` (negative counts from the end) and hand it to `op`
 * with `arg`. `what` names the call in error details. */
static int index_call(zrs_store *s, const char *what, const int64_t *index, uint64_t count,
                      int (*op)(zre_engine *, const uint64_t *, uint64_t, void *), void *arg)
{
    int rc = check_handle(s, what, -1);
    if (rc != ZR_OK || count == 0)
        return rc;
    if (index == NULL)
        return zr_set_error(ZR_EINVAL, "%s: NULL index with count %" PRIu64, what, count);
    uint64_t small[SMALL_INDEX_COUNT];
    uint64_t *idx = NULL, *heap = NULL;
    rc = enter(s, what);
    if (rc != ZR_OK)
        return rc;
    rc = resolve_tmp(s, what, index, count, small, &idx, &heap);
    if (rc == ZR_OK)
        rc = op(s->engine, idx, count, arg);
    leave(s);
    free(heap);
    return rc;
}

static int advise_op(zre_engine *e, const uint64_t *idx, uint64_t count, void *arg)
{
    (void)arg;
    return zre_advise(e, idx, count);
}

int zrs_advise(zrs_store *s, const int64_t *index, uint64_t count)
{
    return index_call(s, "advise", index, count, advise_op, NULL);
}

int zrs_gather_ragged(zrs_store *s, const int64_t *index, uint64_t count,
                      void *dst, uint64_t dst_capacity, const uint64_t *bounds)
{
    int rc = check_handle(s, "gather_ragged", ZRS_RAGGED);
    if (rc != ZR_OK)
        return rc;
    if (count == 0)
        return ZR_OK;
    if (index == NULL || dst == NULL || bounds == NULL)
        return zr_set_error(ZR_EINVAL, "gather_ragged: NULL %s with count %" PRIu64,
                            index == NULL ? "index" : dst == NULL ? "dst" : "bounds",
                            count);
    uint64_t small[SMALL_INDEX_COUNT];
    uint64_t *idx = NULL, *heap = NULL;
    rc = enter(s, "gather_ragged");
    if (rc != ZR_OK)
        return rc;
    rc = resolve_tmp(s, "gather_ragged", index, count, small, &idx, &heap);
    if (rc == ZR_OK)
        rc = zre_gather(s->engine, idx, count, dst, dst_capacity, 0, bounds);
    leave(s);
    if (rc == ZR_OK) {
        /* The engine checked sizes and frames; the shape prefix is ours. */
        const unsigned char *base = dst;
        char why[ZRS_WHY_MAX];
        for (uint64_t i = 0; i < count; i++) {
            if (zrs__ragged_check(base + bounds[i], bounds[i + 1] - bounds[i],
                                  s->id.dtype, NULL, NULL, NULL, why) != 0) {
                rc = zr_set_error(ZR_ECORRUPT,
                                  "gather_ragged: store %s: record at index %" PRId64
                                  " (store index %" PRIu64 ") %s",
                                  s->path, index[i], idx[i], why);
                break;
            }
        }
    }
    free(heap);
    return rc;
}

/* ------------------------------------------------------- maintenance */

int zrs_is_readonly(const zrs_store *s)
{
    if (s == NULL || enter(s, "is_readonly") != ZR_OK)
        return 0;
    int ro = zre_is_readonly(s->engine);
    leave(s);
    return ro;
}

uint64_t zrs_data_bytes(zrs_store *s)
{
    if (s == NULL || enter(s, "data_bytes") != ZR_OK)
        return 0;
    uint64_t n = zre_chunk_bytes(s->engine);
    leave(s);
    return n;
}

int zrs_resident_fraction(zrs_store *s, double *fraction)
{
    int rc = check_handle(s, "resident_fraction", -1);
    if (rc == ZR_OK)
        rc = enter(s, "resident_fraction");
    if (rc != ZR_OK)
        return rc;
    rc = zre_resident_fraction(s->engine, fraction);
    leave(s);
    return rc;
}

void zrs_forget_after_fork(zrs_store *s)
{
    if (s != NULL)
        zre_forget_after_fork(s->engine);
}

int zrs_sync(zrs_store *s)
{
    int rc = check_handle(s, "sync", -1);
    return rc != ZR_OK ? rc : zre_sync(s->engine);
}

int zrs_compact(zrs_store *s)
{
    int rc = check_handle(s, "compact", -1);
    if (rc == ZR_OK)
        rc = check_exclusive(s, "compact");
    return rc != ZR_OK ? rc : zre_compact(s->engine);
}

/* ------------------------------------------------------------ identity */

int zrs_get_uuid(const zrs_store *s, uint8_t out[ZRS_UUID_BYTES])
{
    int rc = check_handle(s, "get_uuid", -1);
    if (rc != ZR_OK)
        return rc;
    if (out == NULL)
        return zr_set_error(ZR_EINVAL, "get_uuid: NULL out");
    if (!s->id.has_uuid)
        return 0;
    memcpy(out, s->id.uuid, ZRS_UUID_BYTES);
    return 1;
}

/* Write store.zr for `id` (atomically, durably) and make it the handle's.
 * On failure the handle keeps its identity; the file holds the old one
 * or, when only the final directory sync failed, the new one. */
static int write_identity(zrs_store *s, const zrs_identity *id, const char *what)
{
    void *buf = NULL;
    size_t len = 0;
    char *zr_path = store_zr_path(s->path);
    if (zr_path == NULL)
        return zr_set_error(ZR_ENOMEM, "%s: out of memory", what);
    int rc = zrs__identity_encode(id, 1, &buf, &len);
    if (rc == ZR_OK) {
        int prc = zrp_write_file_atomic(zr_path, buf, len);
        if (prc != 0)
            rc = zr_set_error(ZR_EIO, "%s: cannot write %s: %s", what, zr_path,
                              zr_os_strerror(prc));
        else
            s->id = *id;
    }
    free(buf);
    free(zr_path);
    return rc;
}

/* The checks zrs_set_uuid and delete's new uuid share. */
static int check_rewritable(const zrs_store *s, const char *what)
{
    if (zre_is_readonly(s->engine))
        return zr_set_error(ZR_EUNSUPPORTED, "%s: store %s is open read-only; its identity "
                            "changes only through a writable handle", what, s->path);
    if (!s->rewritable)
        return zr_set_error(ZR_EUNSUPPORTED, "%s: store %s has a store.zr in a non-canonical "
                            "form (written by another tool), which cannot be rewritten", what,
                            s->path);
    return ZR_OK;
}

int zrs_set_uuid(zrs_store *s, const uint8_t uuid[ZRS_UUID_BYTES])
{
    int rc = check_handle(s, "set_uuid", -1);
    if (rc != ZR_OK)
        return rc;
    if (uuid == NULL)
        return zr_set_error(ZR_EINVAL, "set_uuid: NULL uuid");
    rc = check_rewritable(s, "set_uuid");
    if (rc != ZR_OK)
        return rc;
    zrs_identity id = s->id;
    id.has_uuid = 1;
    memcpy(id.uuid, uuid, ZRS_UUID_BYTES);
    return write_identity(s, &id, "set_uuid");
}

/* Delete through the engine, with a new uuid written first: a state
 * saved against the old records must never match the store after a
 * delete, and writing the uuid before the records move is the order a
 * crash cannot turn into a silent match (at worst a new uuid over
 * unchanged records: a resume refused for nothing). A delete the engine
 * refuses before touching anything (ZR_EBUSY) gets the old uuid back. */
static int delete_with_new_uuid(zre_engine *e, const uint64_t *idx, uint64_t count, void *arg)
{
    zrs_store *s = arg;
    if (check_rewritable(s, "delete") != ZR_OK) /* read-only: the engine says so */
        return zre_delete(e, idx, count);
    const zrs_identity old = s->id;
    zrs_identity id = s->id;
    int rc = zrs__uuid_new(id.uuid);
    if (rc != ZR_OK)
        return rc;
    id.has_uuid = 1;
    rc = write_identity(s, &id, "delete (new store uuid)");
    if (rc != ZR_OK)
        return rc; /* nothing deleted */
    rc = zre_delete(e, idx, count);
    if (rc == ZR_EBUSY) {
        char msg[512];
        snprintf(msg, sizeof msg, "%s", zr_last_error());
        /* The old file may only go back if it had a uuid, or was the
         * canonical type map, which an encoding without uuid rewrites. */
        (void)write_identity(s, &old, "delete");
        zr_set_error(ZR_EBUSY, "%s", msg);
    }
    return rc;
}

int zrs_delete(zrs_store *s, const int64_t *index, uint64_t count)
{
    int rc = check_handle(s, "delete", -1);
    if (rc == ZR_OK)
        rc = check_exclusive(s, "delete");
    if (rc != ZR_OK)
        return rc;
    return index_call(s, "delete", index, count, delete_with_new_uuid, s);
}

/* -------------------------------------------------------------- slices */

uint64_t zrs_slice_bytes(uint64_t last_bytes, uint64_t last_ns, uint64_t max_bytes)
{
    uint64_t next = ZRS_SLICE_FIRST_BYTES;
    if (last_ns > 0 && last_bytes > 0) {
        double want = (double)last_bytes * ((double)ZRS_SLICE_TARGET_NS / (double)last_ns);
        /* At most 4 times the last slice: one fast slice (the CPU briefly
         * to itself, data that compresses fast) must not size a slow one. */
        double cap = 4.0 * (double)last_bytes;
        want = want < cap ? want : cap;
        next = want >= (double)UINT64_MAX ? UINT64_MAX : (uint64_t)want;
        if (next < ZRS_SLICE_MIN_BYTES)
            next = ZRS_SLICE_MIN_BYTES;
    }
    return next < max_bytes ? next : max_bytes;
}
