/*
 * remote_io.c - the engine's side of stores opened by URL: the hooks that
 * engine.c, gather.c and advise.c call, over the remote/ module.
 *
 * A remote store has no descriptors, locks or mappings. Each chunk and
 * record-table file is a remote object (HEAD at open gives its size and
 * ETag); reads go through the node's block cache (zrr_pread), so the
 * engine's no-map read path serves them unchanged. A gather first hands
 * the whole batch to zre_remote_prepare: the table entries' blocks, then
 * the records' blocks, are downloaded in parallel range requests
 * (coalesced per object), for every remote engine of the batch at once.
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

/* zre_read_aux of a local store: "<dir>/<name>" read whole. */
static int read_local_aux(const zre_engine *e, const char *name, void **buf, size_t *len,
                          size_t max_len)
{
    char *p = zre_join(e, name);
    if (!p)
        return -ENOMEM;
    int rc = zrp_read_file(p, buf, len, max_len);
    free(p);
    return rc;
}

int zre_fent_size(const zre_fdtab *t, uint64_t id, uint64_t *size)
{
    const zre_fent *ent = zre_fdtab_ent(t, id);
    if (ent && ent->obj) {
        *size = atomic_load_explicit(&((zre_fent *)ent)->size, memory_order_acquire);
        return 0;
    }
    return zrp_file_size(zre_fdtab_get(t, id), size);
}


ZRE_API int zre_is_remote(const char *path) { return zre_is_url(path); }

ZRE_API void zre_free(void *p) { free(p); }

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

/* The open files [0, n) of table t: how many, and their bytes. */
static int sum_sizes(zre_engine *e, const zre_fdtab *t, uint64_t n, const char *ext,
                     uint64_t *files, uint64_t *bytes)
{
    *files = 0;
    for (uint64_t id = 0; id < n; id++) {
        uint64_t size = 0;
        if (!zre_fent_open(zre_fdtab_ent(t, id)))
            continue;
        int rc = zre_fent_size(t, id, &size);
        if (rc < 0)
            return zr_set_error(ZR_EIO, "file_sizes: cannot stat %s/%" PRIu64 ".%s: %s", e->path,
                                id, ext, zr_os_strerror(rc));
        ++*files;
        *bytes += size;
    }
    return ZR_OK;
}

ZRE_API int zre_get_file_sizes(zre_engine *e, zre_file_sizes *out)
{
    if (!e || !out)
        return zr_set_error(ZR_EINVAL, "file_sizes: NULL argument");
    memset(out, 0, sizeof *out);
    zrp_mutex_lock(&e->writer);
    const uint32_t tc = e->tail_chunk;
    const uint64_t nseg = e->locs.count;
    zrp_mutex_unlock(&e->writer);
    uint64_t files = 0;
    int rc = sum_sizes(e, &e->chunks, (uint64_t)tc + 1, "chunk", &files, &out->chunk_bytes);
    out->chunk_files = files;
    if (rc == 0)
        rc = sum_sizes(e, &e->locs, nseg, "loc", &files, &out->table_bytes);
    out->dict_bytes = e->dict_size;
    return rc;
}

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

int zre_remote_pread(struct zrr_obj *o, void *buf, size_t len, uint64_t off)
{
    int rc = zrr_pread(o, buf, len, off, thread_stop);
    return rc == 0 ? 0 : rc == ZRP_ESHORT ? ZRP_ESHORT : ZRE_EREMOTE;
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

int zre_remote_open_numbered(zre_engine *e, zre_fdtab *t, uint64_t id, const char *ext)
{
    const zre_fent *ent = zre_fdtab_ent(t, id);
    if (ent && ent->obj)
        return 1;
    char name[64];
    snprintf(name, sizeof name, "%" PRIu64 ".%s", id, ext);
    struct zrr_obj *o = NULL;
    int rc = zrr_obj_open(e->remote, name, &o);
    if (rc <= 0)
        return rc;
    rc = zre_fdtab_set(t, id, ZRP_FILE_INVALID, zrr_obj_size(o), NULL, 0);
    if (rc < 0)
        return zr_set_error(rc, "engine: cannot track %s/%s", e->path, name);
    zre_fdtab_ent(t, id)->obj = o;
    return 1;
}

int zre_read_aux(const zre_engine *e, const char *name, void **buf, size_t *len, size_t max_len)
{
    if (!e->remote)
        return read_local_aux(e, name, buf, len, max_len);
    int rc = zrr_get_small(e->remote, name, buf, len, max_len);
    if (rc == 1)
        return 0;
    if (rc == 0)
        return -ENOENT;
    return rc == ZR_ETOOBIG ? -EFBIG : ZRE_EREMOTE;
}

int zre_remote_meta(zre_engine *e, const char *what, unsigned char m[32], uint64_t *size)
{
    void *buf = NULL;
    size_t len = 0;
    int rc = zre_read_aux(e, "meta.zr", &buf, &len, 4096);
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
    if (len == 32)
        memcpy(m, buf, 32);
    free(buf);
    return 0;
}

/* The distinct remote engines of a batch, each with its ranges. */
typedef struct rbatch {
    zre_engine *e;
    zrr_range *r;
    size_t n, cap;
} rbatch;

/* The requests whose blocks a gather holds until it has read them. */
struct zre_rhold {
    size_t n, cap;
    struct {
        zrr_ctx *c;
        zrr_ticket *t;
    } *v;
};

void zre_remote_release(zre_rhold *h)
{
    if (!h)
        return;
    for (size_t i = 0; i < h->n; i++)
        zrr_fetch_release(h->v[i].c, h->v[i].t);
    free(h->v);
    free(h);
}

static int add_range(rbatch *b, struct zrr_obj *o, uint64_t lo, uint64_t hi)
{
    if (b->n == b->cap) {
        size_t cap = b->cap ? 2 * b->cap : 64;
        zrr_range *p = realloc(b->r, cap * sizeof *p);
        if (!p)
            return zr_set_error(ZR_ENOMEM, "gather: out of memory planning downloads");
        b->r = p;
        b->cap = cap;
    }
    b->r[b->n].obj = o;
    b->r[b->n].lo = lo;
    b->r[b->n].hi = hi;
    b->n++;
    return ZR_OK;
}

/* Start every engine's downloads, then wait for all: the engines' worker
 * threads run side by side. The requests join `h`. */
static int run_all(rbatch *bs, size_t nb, zre_rhold *h)
{
    int rc = ZR_OK;
    size_t first = h->n;
    if (h->cap - h->n < nb) {
        size_t cap = h->n + nb + 4;
        void *p = realloc(h->v, cap * sizeof *h->v);
        if (!p)
            return zr_set_error(ZR_ENOMEM, "gather: out of memory planning downloads");
        h->v = p;
        h->cap = cap;
    }
    for (size_t k = 0; k < nb && rc == 0; k++) {
        zrr_ticket *t = NULL;
        rc = zrr_fetch_start(bs[k].e->remote, bs[k].r, bs[k].n, thread_stop, &t);
        if (t) {
            h->v[h->n].c = bs[k].e->remote;
            h->v[h->n++].t = t;
        }
    }
    for (size_t i = first; i < h->n; i++) {
        int w = zrr_fetch_wait(h->v[i].c, h->v[i].t);
        if (rc == 0)
            rc = w;
    }
    for (size_t k = 0; k < nb; k++)
        bs[k].n = 0;
    return rc;
}

int zre_remote_prepare(zre_engine *const *engines, const uint32_t *which, const uint64_t *index,
                       uint64_t count, int locs_only, zre_rhold **hold)
{
    *hold = calloc(1, sizeof **hold);
    if (!*hold)
        return zr_set_error(ZR_ENOMEM, "gather: out of memory planning downloads");
    /* The remote engines among the batch's (a concatenation names each
     * shard's engine; a plain gather has one). */
    size_t ne = 0;
    rbatch small[8], *bs = small;
    uint64_t span = 1;
    if (which)
        for (uint64_t i = 0; i < count; i++)
            if ((uint64_t)which[i] + 1 > span)
                span = (uint64_t)which[i] + 1;
    size_t *slot = NULL;
    if (span > 1) {
        slot = malloc(span * sizeof *slot);
        bs = calloc(span, sizeof *bs);
        if (!slot || !bs) {
            free(slot);
            free(bs);
            return zr_set_error(ZR_ENOMEM, "gather: out of memory planning downloads");
        }
        for (uint64_t k = 0; k < span; k++)
            slot[k] = SIZE_MAX;
    } else {
        memset(small, 0, sizeof small);
    }
    int rc = ZR_OK;
    /* 1. The table entries: the 16-byte entry of each index. */
    for (uint64_t i = 0; i < count && rc == 0; i++) {
        uint32_t w = which ? which[i] : 0;
        zre_engine *e = engines[w];
        if (!e->remote)
            continue;
        size_t k;
        if (span > 1) {
            if (slot[w] == SIZE_MAX) {
                slot[w] = ne;
                bs[ne++].e = e;
            }
            k = slot[w];
        } else {
            if (ne == 0)
                bs[ne++].e = e;
            k = 0;
        }
        uint64_t seg = index[i] / ZRE_INT_SEG_ENTRIES;
        const zre_fent *ent = zre_fdtab_ent(&e->locs, seg);
        if (!ent || !ent->obj)
            continue; /* the read reports it */
        uint64_t at = (index[i] % ZRE_INT_SEG_ENTRIES) * ZRE_LOC_ENTRY_SIZE;
        rc = add_range(&bs[k], ent->obj, at, at + ZRE_LOC_ENTRY_SIZE);
    }
    if (rc == 0)
        rc = run_all(bs, ne, *hold);
    /* 2. The records' bytes, from the entries now held in memory. */
    if (rc == 0 && !locs_only) {
        for (uint64_t i = 0; i < count && rc == 0; i++) {
            uint32_t w = which ? which[i] : 0;
            zre_engine *e = engines[w];
            if (!e->remote)
                continue;
            size_t k = span > 1 ? slot[w] : 0;
            unsigned char buf[ZRE_LOC_ENTRY_SIZE];
            if (zre_read_locs(e, index[i], buf, 1) < 0)
                continue; /* the gather reports it with its usual message */
            zre_loc l;
            zre_loc_decode(&l, buf);
            const zre_fent *ent = zre_fdtab_ent(&e->chunks, l.chunk_id);
            if (!ent || !ent->obj || l.phys_length == 0)
                continue;
            rc = add_range(&bs[k], ent->obj, l.offset, (uint64_t)l.offset + l.phys_length);
        }
        if (rc == 0)
            rc = run_all(bs, ne, *hold);
    }
    for (size_t k = 0; k < ne; k++)
        free(bs[k].r);
    if (bs != small)
        free(bs);
    free(slot);
    return rc;
}

void zre_remote_prefetch(zre_engine *e, const uint32_t *chunk, const uint64_t *lo,
                         const uint64_t *hi, size_t n)
{
    zrr_range *r = malloc((n ? n : 1) * sizeof *r);
    if (!r)
        return; /* a hint */
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        const zre_fent *ent = zre_fdtab_ent(&e->chunks, chunk[i]);
        if (!ent || !ent->obj)
            continue;
        r[m].obj = ent->obj;
        r[m].lo = lo[i];
        r[m].hi = hi[i];
        m++;
    }
    zrr_prefetch(e->remote, r, m);
    free(r);
}

int zre_remote_cached_fraction(zre_engine *e, double *fraction)
{
    double in = 0, all = 0;
    for (uint64_t c = 0; c <= e->tail_chunk; c++) {
        const zre_fent *ent = zre_fdtab_ent(&e->chunks, c);
        if (!ent || !ent->obj)
            continue;
        double size = (double)zrr_obj_size(ent->obj);
        in += size * zrr_cached_fraction(ent->obj, 64);
        all += size;
    }
    *fraction = all > 0 ? in / all : 1.0;
    return ZR_OK;
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

/* ------------------------------------------------------------- push */

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
    const uint32_t tc = e->tail_chunk, to = e->tail_offset;
    zrp_mutex_unlock(&e->writer);
    unsigned char meta[ZRE_META_SIZE];
    zre_meta_encode(meta, length, tc, to, e->codec, e->identity_tag);

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

ZRE_API int zre_remote_supported(void) { return 0; }

ZRE_API int zre_url_get(const char *url, const char *name, void **out, size_t *len,
                        size_t max_len)
{
    (void)name;
    (void)out;
    (void)len;
    (void)max_len;
    return zr_set_error(ZR_EUNSUPPORTED, "%s: this build of loaderx-in-C has no remote store "
                        "support (it was built without libcurl)", url ? url : "(null)");
}

ZRE_API int zre_url_put(const char *url, const char *name, const void *buf, size_t len)
{
    (void)buf;
    (void)len;
    return zre_url_get(url, name, NULL, NULL, 0);
}

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

int zre_remote_status(void) { return ZR_EUNSUPPORTED; }
int zre_remote_pread(struct zrr_obj *o, void *buf, size_t len, uint64_t off)
{
    (void)o;
    (void)buf;
    (void)len;
    (void)off;
    return ZRE_EREMOTE;
}
int zre_remote_attach(zre_engine *e)
{
    return zr_set_error(ZR_EUNSUPPORTED, "open: %s: this build of loaderx-in-C has no remote "
                        "store support (it was built without libcurl)", e->path);
}
void zre_remote_detach(zre_engine *e) { (void)e; }
int zre_remote_open_numbered(zre_engine *e, zre_fdtab *t, uint64_t id, const char *ext)
{
    (void)t;
    (void)id;
    (void)ext;
    return zre_remote_attach(e);
}
int zre_read_aux(const zre_engine *e, const char *name, void **buf, size_t *len, size_t max_len)
{
    return read_local_aux(e, name, buf, len, max_len);
}
int zre_remote_meta(zre_engine *e, const char *what, unsigned char m[32], uint64_t *size)
{
    (void)what;
    (void)m;
    (void)size;
    return zre_remote_attach(e);
}
int zre_remote_prepare(zre_engine *const *engines, const uint32_t *which, const uint64_t *index,
                       uint64_t count, int locs_only, zre_rhold **hold)
{
    (void)engines;
    (void)which;
    (void)index;
    (void)count;
    (void)locs_only;
    *hold = NULL;
    return ZR_OK;
}
void zre_remote_release(zre_rhold *hold) { (void)hold; }
ZRE_API void zre_thread_interrupt(const volatile int *flag) { (void)flag; }
void zre_remote_prefetch(zre_engine *e, const uint32_t *chunk, const uint64_t *lo,
                         const uint64_t *hi, size_t n)
{
    (void)e;
    (void)chunk;
    (void)lo;
    (void)hi;
    (void)n;
}
int zre_remote_cached_fraction(zre_engine *e, double *fraction)
{
    (void)e;
    *fraction = 1.0;
    return ZR_OK;
}
#endif
