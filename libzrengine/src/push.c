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

ZRE_API int zre_push(zre_engine *e, const char *url, const char *const *extra, size_t nextra,
                     void (*progress)(uint64_t done, uint64_t total, void *arg), void *arg)
{
    if (!e || !url || (nextra && !extra))
        return zr_set_error(ZR_EINVAL, "push: NULL argument");
    if (e->remote)
        return zr_set_error(ZR_EINVAL, "push: %s is itself a URL; push a local store", e->path);
    if (!zre_is_url(url))
        return zr_set_error(ZR_EINVAL, "push: %s is not an http://, https:// or s3:// URL", url);
    /* The committed state, taken once under the writer lock: what meta.zr
     * will say, and how much of each file it covers. */
    zrp_mutex_lock(&e->writer);
    const uint64_t length = atomic_load_explicit(&e->length, memory_order_acquire);
    const zre_state st = {length, e->tail};
    zrp_mutex_unlock(&e->writer);
    const uint32_t tc = st.tail.chunk, to = st.tail.offset;
    /* A finished upload: the header's synced state is its committed one. */
    unsigned char meta[ZRE_META_SIZE];
    zre_meta_image(e, &st, meta);

    const uint64_t nseg = (length + ZRE_INT_SEG_ENTRIES - 1) / ZRE_INT_SEG_ENTRIES;
    size_t nfiles = (size_t)nseg + tc + 1 + 1 + nextra;
    push_file *files = calloc(nfiles, sizeof *files);
    if (!files)
        return zr_set_error(ZR_ENOMEM, "push: out of memory");
    size_t n = 0;
    uint64_t total = ZRE_META_SIZE;
    int rc = ZR_OK;
    for (uint32_t c = 0; c <= tc && rc == 0; c++) {
        uint64_t size = 0;
        const zre_fent *ent = zre_fdtab_ent(&e->chunks, c);
        if (zre_fent_open(ent))
            rc = zre_fent_size(&e->chunks, c, &size);
        else if (c < tc || to > 0)
            rc = zr_set_error(ZR_ECORRUPT, "push: %s/%u.chunk is not open", e->path, c);
        if (rc < 0)
            break;
        if (c == tc)
            size = to; /* only the committed bytes of the tail */
        if (size == 0 && c == tc && !zre_fent_open(ent))
            continue;
        snprintf(files[n].name, sizeof files[n].name, "%u.chunk", c);
        files[n++].len = size;
        total += size;
    }
    for (uint64_t sg = 0; sg < nseg && rc == 0; sg++) {
        uint64_t entries = length - sg * ZRE_INT_SEG_ENTRIES;
        if (entries > ZRE_INT_SEG_ENTRIES)
            entries = ZRE_INT_SEG_ENTRIES;
        snprintf(files[n].name, sizeof files[n].name, "%" PRIu64 ".loc", sg);
        files[n++].len = entries * ZRE_LOC_ENTRY_SIZE;
        total += entries * ZRE_LOC_ENTRY_SIZE;
    }
    zrr_ctx *c = NULL;
    if (rc == 0)
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
    uint64_t done = 0;
    char *path = malloc(strlen(e->path) + 80);
    if (!path && rc == 0)
        rc = zr_set_error(ZR_ENOMEM, "push: out of memory");
    for (size_t i = 0; i < n && rc == 0; i++) {
        if (atomic_load_explicit(&e->interrupt, memory_order_relaxed)) {
            rc = zr_set_error(ZR_EINTR, "push: interrupted after %zu of %zu files; meta.zr was not "
                              "sent, so %s holds no readable store", i, n, url);
            break;
        }
        snprintf(path, strlen(e->path) + 80, "%s/%s", e->path, files[i].name);
        rc = zrr_put_file(c, files[i].name, path, files[i].len);
        done += files[i].len;
        if (rc == 0 && progress)
            progress(done, total, arg);
    }
    /* dict.zr and the extra files, whole, then meta.zr. */
    const char *names[1 + 64];
    size_t nn = 0;
    if (e->codec == ZRE_CODEC_ZSTD_DICT)
        names[nn++] = "dict.zr";
    for (size_t i = 0; i < nextra && nn < sizeof names / sizeof names[0]; i++)
        names[nn++] = extra[i];
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
        done += len;
        total += len;
        if (rc == 0 && progress)
            progress(done, total, arg);
    }
    if (rc == 0)
        rc = zrr_put_bytes(c, "meta.zr", meta, sizeof meta);
    if (rc == 0 && progress)
        progress(total, total, arg);
    free(path);
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
