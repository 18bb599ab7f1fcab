/*
 * common.c - what every other engine file uses: the version, codec names,
 * the checksums, the handle's accessors, call name and poisoning, the
 * exclusive-use counters of delete and compact, and the zstd context
 * pools. Calls no other engine file but error.c.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#include "engine_internal.h"

#ifndef ZRENGINE_VERSION_STRING
#define ZRENGINE_VERSION_STRING "0.0.0"
#endif

ZRE_API unsigned zrengine_version(void) { return ZRENGINE_VERSION_NUMBER; }
ZRE_API const char *zrengine_version_string(void) { return ZRENGINE_VERSION_STRING; }

/* ---------------------------------------------------------------- codecs */

ZRE_API const char *zre_codec_name(zre_codec codec)
{
    switch (codec) {
    case ZRE_CODEC_RAW: return "raw";
    case ZRE_CODEC_ZSTD: return "zstd";
    case ZRE_CODEC_ZSTD_DICT: return "zstd_dict";
    default: return NULL;
    }
}

ZRE_API int zre_codec_parse(const char *name, zre_codec *out)
{
    if (!name || !out)
        return zr_set_error(ZR_EINVAL, "codec_parse: NULL argument");
    for (int c = ZRE_CODEC_RAW; c <= ZRE_CODEC_ZSTD_DICT; c++) {
        if (strcmp(name, zre_codec_name((zre_codec)c)) == 0) {
            *out = (zre_codec)c;
            return ZR_OK;
        }
    }
    return zr_set_error(ZR_EINVAL, "codec_parse: unknown codec '%s', expected raw, zstd or zstd_dict",
                        name);
}

/* ------------------------------------------------------------ checksums */

uint32_t zre_fnv1a32(const void *buf, size_t len)
{
    const unsigned char *p = buf;
    uint32_t h = 0x811c9dc5u;
    for (size_t i = 0; i < len; i++) {
        h ^= p[i];
        h *= 0x01000193u;
    }
    return h;
}

uint64_t zre_fnv1a64(uint64_t h, const void *buf, size_t len)
{
    const unsigned char *p = buf;
    for (size_t i = 0; i < len; i++) {
        h ^= p[i];
        h *= UINT64_C(0x100000001b3);
    }
    return h;
}

/* ------------------------------------------------- call name, poisoning */

const char *zre_op(const zre_engine *e) { return e->op ? e->op : "engine"; }

int zre_poison(zre_engine *e, int status)
{
    zre_err err;
    zre_err_capture(&err, status);
    if (!atomic_load(&e->poisoned)) {
        snprintf(e->poison_msg, sizeof e->poison_msg, "%s", err.msg);
        atomic_store(&e->poisoned, 1);
    }
    return zre_err_raise_with(&err, "; this handle of %s now refuses every call until it is "
                              "closed and the store reopened (a writable open finishes or undoes "
                              "what was interrupted)", e->path);
}

int zre_check_usable(zre_engine *e, const char *what)
{
    if (!atomic_load(&e->poisoned))
        return ZR_OK;
    return zr_set_error(ZR_ESTATE, "%s: this handle of %s refuses every call since an earlier "
                        "failure (%s); close it and reopen the store (a writable open finishes "
                        "or undoes what was interrupted)", what, e->path, e->poison_msg);
}

/* ------------------------------------------------------------- accessors */

ZRE_API int zre_is_readonly(const zre_engine *e) { return e && e->readonly ? 1 : 0; }
ZRE_API uint32_t zre_identity_tag(const zre_engine *e) { return e ? e->identity_tag : 0; }

ZRE_API uint64_t zre_length(const zre_engine *e)
{
    return e ? atomic_load_explicit(&((zre_engine *)e)->length, memory_order_acquire) : 0;
}

ZRE_API zre_codec zre_get_codec(const zre_engine *e) { return e ? e->codec : ZRE_CODEC_RAW; }

ZRE_API const char *zre_path(const zre_engine *e) { return e ? e->path : NULL; }

ZRE_API uint64_t zre_chunk_bytes(zre_engine *e)
{
    if (!e)
        return 0;
    /* The frontier is the writer's; a read-only handle never moves it. */
    zrp_mutex_lock(&e->writer);
    uint64_t n = (uint64_t)e->tail.chunk * ZRE_CHUNK_USABLE + e->tail.offset;
    zrp_mutex_unlock(&e->writer);
    return n;
}

/* --------------------------------------------------------- exclusive use */

int zre_enter_read(zre_engine *e, const char *what)
{
    int prc = zre_check_usable(e, what);
    if (prc < 0)
        return prc;
    atomic_fetch_add(&e->readers, 1);
    if (atomic_load(&e->maint)) {
        atomic_fetch_sub(&e->readers, 1);
        return zr_set_error(ZR_EBUSY, "%s: store %s is being changed by a delete or compact on this "
                            "handle, which needs exclusive use", what, e->path);
    }
    return ZR_OK;
}

int zre_enter_maint(zre_engine *e, const char *what)
{
    if (e->readonly)
        return zr_set_error(ZR_EUNSUPPORTED, "%s: store %s is open read-only", what, e->path);
    int prc = zre_check_usable(e, what);
    if (prc < 0)
        return prc;
    atomic_store(&e->maint, 1);
    unsigned r = atomic_load(&e->readers);
    if (r != 0) {
        atomic_store(&e->maint, 0);
        return zr_set_error(ZR_EBUSY, "%s: needs exclusive use of store %s, but %u gather(s) are "
                            "running on this handle", what, e->path, r);
    }
    /* Other handles: turn this handle's shared meta.zr lock exclusive. It
     * fails at once while any other handle holds its shared lock, and
     * keeps new read-only opens out until zre_leave_maint. */
    prc = zrp_unlock(e->meta);
    if (prc == 0)
        prc = zrp_lock_exclusive(e->meta);
    if (prc < 0) {
        /* Take back the shared lock (nobody else can hold it exclusive:
         * that needs lock.zr, which this handle holds). */
        (void)zrp_lock_shared(e->meta);
        atomic_store(&e->maint, 0);
        if (prc == ZRP_EBUSY)
            return zr_set_error(ZR_EBUSY, "%s: needs store %s to itself, but read-only handles "
                                "(in this or another process) have it open; nothing was changed, "
                                "close them and retry", what, e->path);
        return zr_set_error(ZR_EIO, "%s: cannot lock %s/meta.zr: %s", what, e->path,
                            zr_os_strerror(prc));
    }
    return ZR_OK;
}

void zre_leave_maint(zre_engine *e)
{
    /* Back to shared: readers may open again. Only a writer of an older
     * version could take the lock in between; lock.zr still keeps every
     * writer of this version out. */
    (void)zrp_unlock(e->meta);
    (void)zrp_lock_shared(e->meta);
    atomic_store(&e->maint, 0);
}

/* ------------------------------------------------------- zstd contexts */

static void *ctx_pop(zre_engine *e, void ***list, size_t *count)
{
    void *c = NULL;
    zrp_mutex_lock(&e->ctx_lock);
    if (*count > 0)
        c = (*list)[--*count];
    zrp_mutex_unlock(&e->ctx_lock);
    return c;
}

/* Returns false when the context could not be kept (caller frees it). */
static bool ctx_push(zre_engine *e, void ***list, size_t *count, size_t *cap, void *c)
{
    bool kept = false;
    zrp_mutex_lock(&e->ctx_lock);
    if (*count == *cap) {
        size_t ncap = *cap ? *cap * 2 : 8;
        void **nl = realloc(*list, ncap * sizeof *nl);
        if (nl) {
            *list = nl;
            *cap = ncap;
        }
    }
    if (*count < *cap) {
        (*list)[(*count)++] = c;
        kept = true;
    }
    zrp_mutex_unlock(&e->ctx_lock);
    return kept;
}

void *zre_dctx_get(zre_engine *e)
{
    void *c = ctx_pop(e, &e->dctx_free, &e->dctx_count);
    return c ? c : ZSTD_createDCtx();
}

void zre_dctx_put(zre_engine *e, void *dctx)
{
    if (dctx && !ctx_push(e, &e->dctx_free, &e->dctx_count, &e->dctx_cap, dctx))
        ZSTD_freeDCtx(dctx);
}

void *zre_cctx_get(zre_engine *e)
{
    void *c = ctx_pop(e, &e->cctx_free, &e->cctx_count);
    if (c)
        return c;
    ZSTD_CCtx *cc = ZSTD_createCCtx();
    if (!cc)
        return NULL;
    /* Parameters are sticky across ZSTD_compress2 calls: set them once. A
     * referenced CDict (zstd_dict) brings its level 19 parameters; the frame
     * flags (checksum, content size, dictionary id) stay the context's. */
    if (ZSTD_isError(ZSTD_CCtx_setParameter(cc, ZSTD_c_compressionLevel, ZRE_ZSTD_LEVEL)) ||
        ZSTD_isError(ZSTD_CCtx_setParameter(cc, ZSTD_c_checksumFlag, 1)) ||
        ZSTD_isError(ZSTD_CCtx_setParameter(cc, ZSTD_c_contentSizeFlag, 1)) ||
        (e->cdict && ZSTD_isError(ZSTD_CCtx_refCDict(cc, (const ZSTD_CDict *)e->cdict)))) {
        ZSTD_freeCCtx(cc);
        return NULL;
    }
    return cc;
}

void zre_cctx_put(zre_engine *e, void *cctx)
{
    if (cctx && !ctx_push(e, &e->cctx_free, &e->cctx_count, &e->cctx_cap, cctx))
        ZSTD_freeCCtx(cctx);
}

void zre_ctx_free_all(zre_engine *e)
{
    for (size_t i = 0; i < e->dctx_count; i++)
        ZSTD_freeDCtx(e->dctx_free[i]);
    for (size_t i = 0; i < e->cctx_count; i++)
        ZSTD_freeCCtx(e->cctx_free[i]);
    free(e->dctx_free);
    free(e->cctx_free);
    e->dctx_free = e->cctx_free = NULL;
    e->dctx_count = e->cctx_count = e->dctx_cap = e->cctx_cap = 0;
}
