/*
 * push.c - a side file beside the engine's (store.zr, shards.zr) read
 * whole from a local folder or a URL, and the upload of a finished local
 * store to a URL.
 *
 * A push sends the committed bytes of every chunk and record-table file,
 * then dict.zr and the caller's side files, and meta.zr last: a reader
 * never opens a half-uploaded store (no meta.zr, no store).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine_internal.h"

ZRE_API int zre_read_side_file(zre_engine *e, const char *name, void **out, size_t *len,
                               size_t max_len)
{
    if (!e || !name || !out || !len)
        return zr_set_error(ZR_EINVAL, "read_side_file: NULL argument");
    *out = NULL;
    *len = 0;
    int rc = zre_read_aux(e, name, out, len, max_len);
    if (rc == 0)
        return ZR_OK;
    if (rc == -ENOENT)
        return zr_set_error(ZR_ENOTSTORE, "not a store: %s/%s is missing", e->path, name);
    if (rc == -EFBIG)
        return zr_set_error(ZR_ETOOBIG, "%s/%s is larger than %zu bytes", e->path, name, max_len);
    return zr_set_error(zre_io_status(rc, ZR_EIO), "cannot read %s/%s: %s", e->path, name,
                        zr_os_strerror(rc));
}

#ifdef ZRE_HAVE_REMOTE
#include "zr_remote.h"

typedef struct push_file {
    char name[64];
    uint64_t len;
} push_file;

/* The side files a push sends whole, after the payload: dict.zr (a
 * zstd_dict store) and the caller's. */
#define PUSH_MAX_EXTRA 64

/* Phase 1: the payload files of the committed state `st` (each chunk's
 * committed bytes, each record-table segment's entries), into *out (n
 * entries, `*total` bytes with meta.zr). Caller frees *out. */
static int push_plan(zre_engine *e, const zre_state *st, push_file **out, size_t *n,
                     uint64_t *total)
{
    const uint32_t tc = st->tail.chunk, to = st->tail.offset;
    const uint64_t length = st->length;
    const uint64_t nseg = (length + ZRE_INT_SEG_ENTRIES - 1) / ZRE_INT_SEG_ENTRIES;
    push_file *files = calloc((size_t)nseg + tc + 1, sizeof *files);
    if (!files)
        return zr_set_error(ZR_ENOMEM, "push: out of memory");
    size_t k = 0;
    uint64_t sum = ZRE_META_SIZE;
    for (uint32_t c = 0; c <= tc; c++) {
        uint64_t size = 0;
        const zre_fent *ent = zre_fdtab_ent(&e->chunks, c);
        int rc = ZR_OK;
        if (zre_fent_open(ent))
            rc = zre_fent_size(&e->chunks, c, &size);
        else if (c < tc || to > 0)
            rc = zr_set_error(ZR_ECORRUPT, "push: %s/%u.chunk is not open", e->path, c);
        if (rc < 0) {
            free(files);
            return rc;
        }
        if (c == tc)
            size = to; /* only the committed bytes of the tail */
        if (size == 0 && c == tc && !zre_fent_open(ent))
            continue;
        snprintf(files[k].name, sizeof files[k].name, "%u.chunk", c);
        files[k++].len = size;
        sum += size;
    }
    for (uint64_t sg = 0; sg < nseg; sg++) {
        uint64_t entries = length - sg * ZRE_INT_SEG_ENTRIES;
        if (entries > ZRE_INT_SEG_ENTRIES)
            entries = ZRE_INT_SEG_ENTRIES;
        snprintf(files[k].name, sizeof files[k].name, "%" PRIu64 ".loc", sg);
        files[k++].len = entries * ZRE_LOC_ENTRY_SIZE;
        sum += entries * ZRE_LOC_ENTRY_SIZE;
    }
    *out = files;
    *n = k;
    *total = sum;
    return ZR_OK;
}

/* Phase 2: the payload files, in order, each up to its planned length;
 * Ctrl-C (the engine's interrupt) stops between files. */
static int push_payload(zre_engine *e, zrr_ctx *c, const char *url, const push_file *files,
                        size_t n, uint64_t *done, uint64_t total,
                        void (*progress)(uint64_t done, uint64_t total, void *arg), void *arg)
{
    const size_t cap = strlen(e->path) + 80;
    char *path = malloc(cap);
    if (!path)
        return zr_set_error(ZR_ENOMEM, "push: out of memory");
    int rc = ZR_OK;
    for (size_t i = 0; i < n && rc == 0; i++) {
        if (atomic_load_explicit(&e->interrupt, memory_order_relaxed)) {
            rc = zr_set_error(ZR_EINTR, "push: interrupted after %zu of %zu files; meta.zr was not "
                              "sent, so %s holds no readable store", i, n, url);
            break;
        }
        snprintf(path, cap, "%s/%s", e->path, files[i].name);
        rc = zrr_put_file(c, files[i].name, path, files[i].len);
        *done += files[i].len;
        if (rc == 0 && progress)
            progress(*done, total, arg);
    }
    free(path);
    return rc;
}

/* Phase 3: dict.zr and the caller's side files, each read whole. */
static int push_side_files(zre_engine *e, zrr_ctx *c, const char *const *extra, size_t nextra,
                           uint64_t *done, uint64_t *total,
                           void (*progress)(uint64_t done, uint64_t total, void *arg), void *arg)
{
    const char *names[1 + PUSH_MAX_EXTRA];
    size_t nn = 0;
    if (e->codec == ZRE_CODEC_ZSTD_DICT)
        names[nn++] = "dict.zr";
    for (size_t i = 0; i < nextra; i++)
        names[nn++] = extra[i];
    int rc = ZR_OK;
    for (size_t i = 0; i < nn && rc == 0; i++) {
        void *buf = NULL;
        size_t len = 0;
        int prc = zre_read_aux(e, names[i], &buf, &len, (size_t)1 << 30);
        if (prc < 0)
            rc = zr_set_error(ZR_EIO, "push: cannot read %s/%s: %s", e->path, names[i],
                              zr_os_strerror(prc));
        else
            rc = zrr_put_bytes(c, names[i], buf, len);
        free(buf);
        *done += len;
        *total += len;
        if (rc == 0 && progress)
            progress(*done, *total, arg);
    }
    return rc;
}

ZRE_API int zre_push(zre_engine *e, const char *url, const char *const *extra, size_t nextra,
                     void (*progress)(uint64_t done, uint64_t total, void *arg), void *arg)
{
    if (!e || !url || (nextra && !extra))
        return zr_set_error(ZR_EINVAL, "push: NULL argument");
    if (e->remote)
        return zr_set_error(ZR_EINVAL, "push: %s is itself a URL; push a local store", e->path);
    if (!zre_is_url(url))
        return zr_set_error(ZR_EINVAL, "push: %s is not an http://, https:// or s3:// URL", url);
    if (nextra > PUSH_MAX_EXTRA)
        return zr_set_error(ZR_EINVAL, "push: %zu side files; at most %d", nextra, PUSH_MAX_EXTRA);
    /* The committed state, taken once under the writer lock: what meta.zr
     * will say, and how much of each file it covers. */
    zrp_mutex_lock(&e->writer);
    const zre_state st = {atomic_load_explicit(&e->length, memory_order_acquire), e->tail};
    zrp_mutex_unlock(&e->writer);
    /* A finished upload: the header's synced state is its committed one. */
    unsigned char meta[ZRE_META_SIZE];
    zre_meta_image(e, &st, meta);

    push_file *files = NULL;
    size_t n = 0;
    uint64_t total = 0, done = 0;
    int rc = push_plan(e, &st, &files, &n, &total);
    if (rc < 0)
        return rc;
    zrr_ctx *c = NULL;
    rc = zrr_open(&c, url, &e->interrupt);
    if (rc == 0) {
        zrr_obj *o = NULL;
        int h = zrr_obj_open(c, "meta.zr", &o);
        if (h == 1)
            rc = zr_set_error(ZR_EEXIST, "push: %s already holds a store (its meta.zr exists); "
                              "nothing was sent", url);
        else if (h < 0)
            rc = h;
    }
    if (rc == 0)
        rc = push_payload(e, c, url, files, n, &done, total, progress, arg);
    if (rc == 0)
        rc = push_side_files(e, c, extra, nextra, &done, &total, progress, arg);
    if (rc == 0) /* last: until it is there, the URL holds no store */
        rc = zrr_put_bytes(c, "meta.zr", meta, sizeof meta);
    if (rc == 0 && progress)
        progress(total, total, arg);
    zrr_close(c);
    free(files);
    return rc;
}

#else /* built without libcurl */

ZRE_API int zre_push(zre_engine *e, const char *url, const char *const *extra, size_t nextra,
                     void (*progress)(uint64_t done, uint64_t total, void *arg), void *arg)
{
    (void)e;
    (void)extra;
    (void)nextra;
    (void)progress;
    (void)arg;
    return zr_set_error(ZR_EUNSUPPORTED, "push: %s: this build of loaderx-in-C has no remote "
                        "store support (it was built without libcurl)", url ? url : "(null)");
}

#endif
