/*
 * remote_io.c - the engine's access to stores opened by URL, over the
 * remote/ module: attaching a handle to its remote folder, opening and
 * reading its objects through the node's block cache, small whole files
 * (meta.zr, dict.zr, store.zr), and single GETs and PUTs by URL.
 *
 * A remote store has no descriptors, locks or mappings. Each chunk and
 * record-table file is a remote object (HEAD at open gives its size and
 * ETag); reads go through the node's block cache (zrr_pread), so the
 * engine's no-map read path serves them unchanged; a gather, which holds
 * its batch's blocks, reads them in place (zre_remote_span). This file calls no
 * other engine file but error.c: files.c, meta.c and open.c build on it;
 * the batch downloads of a gather are remote_fetch.c, uploads push.c.
 *
 * Built without libcurl (meson -Dremote=disabled, or libcurl not found),
 * every URL open fails with ZR_EUNSUPPORTED saying so.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine_internal.h"

int zre_is_url(const char *path)
{
    return path && (strncmp(path, "http://", 7) == 0 || strncmp(path, "https://", 8) == 0 ||
                    strncmp(path, "s3://", 5) == 0);
}

ZRE_API int zre_is_remote(const char *path) { return zre_is_url(path); }

ZRE_API void zre_free(void *p) { free(p); }

#ifdef ZRE_HAVE_REMOTE
#include "zr_remote.h"

ZRE_API int zre_remote_supported(void) { return 1; }

int zre_remote_status(void)
{
    int s = zrr_last_status();
    return s < 0 && s > -100 ? s : ZR_EIO;
}

/* The calling thread's own stop flag (zre_thread_interrupt). */
static _Thread_local const volatile int *thread_stop;

ZRE_API void zre_thread_interrupt(const volatile int *flag) { thread_stop = flag; }

const volatile int *zre_remote_thread_stop(void) { return thread_stop; }

int zre_remote_pread(struct zrr_obj *o, void *buf, size_t len, uint64_t off)
{
    int rc = zrr_pread(o, buf, len, off, thread_stop);
    return rc == 0 ? 0 : rc == ZRP_ESHORT ? ZRP_ESHORT : ZRE_EREMOTE;
}

const unsigned char *zre_remote_span(struct zrr_obj *o, uint64_t off, size_t len)
{
    return zrr_held_span(o, off, len);
}

int zre_remote_attach(zre_engine *e)
{
    return zrr_open(&e->remote, e->path, &e->interrupt);
}

void zre_remote_detach(zre_engine *e)
{
    zrr_close(e->remote);
    e->remote = NULL;
}

int zre_remote_obj_open(zre_engine *e, const char *name, struct zrr_obj **obj, uint64_t *size)
{
    *obj = NULL;
    int rc = zrr_obj_open(e->remote, name, obj);
    if (rc == 1)
        *size = zrr_obj_size(*obj);
    return rc;
}

int zre_remote_get_small(const zre_engine *e, const char *name, void **buf, size_t *len,
                         size_t max_len)
{
    int rc = zrr_get_small(e->remote, name, buf, len, max_len);
    if (rc == 1)
        return 0;
    if (rc == 0)
        return -ENOENT;
    return rc == ZR_ETOOBIG ? -EFBIG : ZRE_EREMOTE;
}

int zre_remote_meta(zre_engine *e, const char *what, unsigned char *m, size_t cap, uint64_t *size)
{
    void *buf = NULL;
    size_t len = 0;
    int rc = zre_remote_get_small(e, "meta.zr", &buf, &len, 4096);
    if (rc == -ENOENT)
        return zr_set_error(ZR_ENOTSTORE, "%s: %s is not a store: %s/meta.zr is missing on the "
                            "server (404)", what, e->path, e->path);
    if (rc == -EFBIG)
        return zr_set_error(ZR_ENOTSTORE, "%s: %s is malformed: meta.zr is larger than 4096 bytes",
                            what, e->path);
    if (rc < 0)
        return zr_set_error(zre_io_status(rc, ZR_EIO), "%s: cannot read %s/meta.zr: %s", what,
                            e->path, zr_os_strerror(rc));
    *size = len;
    memcpy(m, buf, len < cap ? len : cap);
    free(buf);
    return 0;
}

ZRE_API int zre_url_get(const char *url, const char *name, void **out, size_t *len,
                        size_t max_len)
{
    if (!url || !name || !out || !len)
        return zr_set_error(ZR_EINVAL, "url_get: NULL argument");
    *out = NULL;
    *len = 0;
    zrr_ctx *c = NULL;
    int rc = zrr_open(&c, url, NULL);
    if (rc < 0)
        return rc;
    rc = zrr_get_small(c, name, out, len, max_len);
    if (rc == 0)
        rc = zr_set_error(ZR_ENOTSTORE, "%s/%s: not found on the server (404)", url, name);
    else if (rc == 1)
        rc = ZR_OK;
    zrr_close(c);
    return rc;
}

ZRE_API int zre_url_put(const char *url, const char *name, const void *buf, size_t len)
{
    if (!url || !name || (len && !buf))
        return zr_set_error(ZR_EINVAL, "url_put: NULL argument");
    zrr_ctx *c = NULL;
    int rc = zrr_open(&c, url, NULL);
    if (rc < 0)
        return rc;
    rc = zrr_put_bytes(c, name, buf, len);
    zrr_close(c);
    return rc;
}

#else /* built without libcurl */

static int no_remote(const char *what, const char *url)
{
    return zr_set_error(ZR_EUNSUPPORTED, "%s: %s: this build of loaderx-in-C has no remote store "
                        "support (it was built without libcurl)", what, url ? url : "(null)");
}

ZRE_API int zre_remote_supported(void) { return 0; }

int zre_remote_status(void) { return ZR_EUNSUPPORTED; }

ZRE_API void zre_thread_interrupt(const volatile int *flag) { (void)flag; }

const volatile int *zre_remote_thread_stop(void) { return NULL; }

int zre_remote_pread(struct zrr_obj *o, void *buf, size_t len, uint64_t off)
{
    (void)o;
    (void)buf;
    (void)len;
    (void)off;
    return ZRE_EREMOTE;
}

const unsigned char *zre_remote_span(struct zrr_obj *o, uint64_t off, size_t len)
{
    (void)o;
    (void)off;
    (void)len;
    return NULL;
}

int zre_remote_attach(zre_engine *e) { return no_remote("open", e->path); }

void zre_remote_detach(zre_engine *e) { (void)e; }

int zre_remote_obj_open(zre_engine *e, const char *name, struct zrr_obj **obj, uint64_t *size)
{
    (void)name;
    (void)size;
    *obj = NULL;
    return no_remote("open", e->path);
}

int zre_remote_get_small(const zre_engine *e, const char *name, void **buf, size_t *len,
                         size_t max_len)
{
    (void)name;
    (void)buf;
    (void)len;
    (void)max_len;
    (void)no_remote("open", e->path);
    return ZRE_EREMOTE;
}

int zre_remote_meta(zre_engine *e, const char *what, unsigned char *m, size_t cap, uint64_t *size)
{
    (void)m;
    (void)cap;
    (void)size;
    return no_remote(what, e->path);
}

ZRE_API int zre_url_get(const char *url, const char *name, void **out, size_t *len,
                        size_t max_len)
{
    (void)name;
    (void)out;
    (void)len;
    (void)max_len;
    return no_remote("url_get", url);
}

ZRE_API int zre_url_put(const char *url, const char *name, const void *buf, size_t len)
{
    (void)name;
    (void)buf;
    (void)len;
    return no_remote("url_put", url);
}

#endif
