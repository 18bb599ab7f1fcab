/*
 * convert.c - generic streams written into new stores (zld_write_stores):
 * every store is filled under "<path>.partial" and renamed to its path
 * only once all of them are complete and synced.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "zloader.h"
#include "zr_platform.h"
#include "zrerror_sys.h"

/* Records copied per slice, and the bytes a ragged slice aims at. */
#define WS_SLICE_RECORDS 1024u
#define WS_SLICE_BYTES ((uint64_t)64 << 20)

static char *ws_partial(const char *path)
{
    size_t n = strlen(path);
    char *p = malloc(n + sizeof ".partial");
    if (p) {
        memcpy(p, path, n);
        memcpy(p + n, ".partial", sizeof ".partial");
    }
    return p;
}

/* Remove a store directory (its files, one level, then itself); ENOENT is
 * fine. Best effort: the first failure is returned, the rest goes on. */
static int ws_remove_dir(const char *dir)
{
    char **names = NULL;
    size_t count = 0;
    int rc = zrp_list_dir(dir, &names, &count);
    if (rc < 0)
        return rc == -ENOENT ? 0 : rc;
    int first = 0;
    size_t dn = strlen(dir);
    for (size_t k = 0; k < count; k++) {
        size_t nn = strlen(names[k]);
        char *p = malloc(dn + nn + 2);
        if (p == NULL) {
            first = first ? first : -ENOMEM;
            continue;
        }
        memcpy(p, dir, dn);
        p[dn] = '/';
        memcpy(p + dn + 1, names[k], nn + 1);
        int r = zrp_unlink(p);
        if (r < 0 && r != -ENOENT && !first)
            first = r;
        free(p);
    }
    zrp_free_names(names, count);
    rc = zrp_rmdir(dir);
    return first ? first : rc;
}

/* The parent directory of path (malloc'd; "." for a bare name). */
static char *ws_parent(const char *path)
{
    size_t n = strlen(path);
    while (n > 1 && zrp_is_path_sep(path[n - 1]))
        n--;
    while (n > 0 && !zrp_is_path_sep(path[n - 1]))
        n--;
    while (n > 1 && zrp_is_path_sep(path[n - 1]))
        n--;
    char *p = malloc(n ? n + 1 : 2);
    if (p == NULL)
        return NULL;
    if (n == 0)
        memcpy(p, ".", 2);
    else {
        memcpy(p, path, n);
        p[n] = '\0';
    }
    return p;
}

/* Copy every record of st into a new store at tmp (*made), slice by
 * slice; the store is created at the first slice (codec "auto" chooses
 * from it). A stream of 0 records makes no store here. */
static int ws_copy(const zld_stream *st, int codec_auto, const zld_store_spec *spec, const char *tmp,
                   zre_codec codec, zrs_store **made)
{
    zrs_store *s = NULL;
    uint64_t *idx = malloc(WS_SLICE_RECORDS * sizeof *idx);
    uint64_t *sizes = malloc(WS_SLICE_RECORDS * sizeof *sizes);
    uint64_t *bounds = malloc((WS_SLICE_RECORDS + 1) * sizeof *bounds);
    void *buf = NULL;
    uint64_t bufcap = 0;
    int rc = (idx && sizes && bounds) ? ZR_OK : zr_set_error(ZR_ENOMEM, "out of memory");
    for (uint64_t at = 0; rc == ZR_OK && at < st->length;) {
        uint64_t n = st->length - at < WS_SLICE_RECORDS ? st->length - at : WS_SLICE_RECORDS;
        for (uint64_t i = 0; i < n; i++)
            idx[i] = at + i;
        uint64_t need;
        if (st->kind == ZLD_STREAM_RAGGED) {
            if ((rc = st->sizes(st->user, idx, n, sizes)) < 0)
                break;
            bounds[0] = 0;
            uint64_t keep = n;
            for (uint64_t i = 0; i < n; i++) {
                bounds[i + 1] = bounds[i] + sizes[i];
                if (i > 0 && bounds[i + 1] > WS_SLICE_BYTES) {
                    keep = i;
                    break;
                }
            }
            n = keep;
            need = bounds[n];
        } else {
            need = n * st->record_size;
        }
        if (need > bufcap) {
            void *b = realloc(buf, need ? need : 1);
            if (b == NULL) {
                rc = zr_set_error(ZR_ENOMEM, "out of memory for %llu bytes", (unsigned long long)need);
                break;
            }
            buf = b;
            bufcap = need;
        }
        const uint64_t *bd = st->kind == ZLD_STREAM_RAGGED ? bounds : NULL;
        if ((rc = st->gather(st->user, idx, n, buf, bufcap, bd)) < 0)
            break;
        if (s == NULL) {
            /* codec "auto": chosen on the first slice, as a binding's store does */
            zre_codec c = codec;
            if (codec_auto && (rc = zrs_codec_auto(buf, bd, bd ? 0 : st->record_size, n, &c, NULL, NULL)) < 0)
                break;
            rc = st->kind == ZLD_STREAM_RAGGED
                     ? zrs_create_ragged(made, tmp, spec->dtype, c)
                     : zrs_create_dense(made, tmp, spec->dtype, spec->item_shape, spec->ndim, c);
            if (rc < 0)
                break;
            s = *made;
        }
        rc = st->kind == ZLD_STREAM_RAGGED ? zrs_append_ragged(s, buf, bounds, n, NULL)
                                           : zrs_append_dense(s, buf, need, n, NULL);
        at += n;
    }
    free(idx);
    free(sizes);
    free(bounds);
    free(buf);
    return rc;
}

int zld_write_stores(const zld_stream *streams, const zld_store_spec *specs, size_t n, int codec)
{
    if (streams == NULL || specs == NULL || n == 0)
        return zr_set_error(ZR_EINVAL, "write stores: no streams");
    if (codec != ZLD_CODEC_AUTO && codec != ZRE_CODEC_RAW && codec != ZRE_CODEC_ZSTD)
        return zr_set_error(ZR_EINVAL, "write stores: codec %d is not raw, zstd or auto", codec);
    for (size_t k = 0; k < n; k++) {
        const zld_stream *st = &streams[k];
        const char *path = specs[k].path;
        if (path == NULL || *path == '\0' || st->gather == NULL ||
            (st->kind == ZLD_STREAM_RAGGED && st->sizes == NULL))
            return zr_set_error(ZR_EINVAL, "write stores: stream %zu has no path or no gather", k);
        if (st->length != streams[0].length)
            return zr_set_error(ZR_EINVAL, "write stores: stream %zu has %llu records, stream 0 %llu", k,
                                (unsigned long long)st->length, (unsigned long long)streams[0].length);
        size_t item = zrs_dtype_itemsize(specs[k].dtype);
        uint64_t rs = item;
        for (size_t d = 0; d < specs[k].ndim; d++)
            rs *= specs[k].item_shape[d];
        if (item == 0 || (st->kind == ZLD_STREAM_DENSE && rs != st->record_size))
            return zr_set_error(ZR_EINVAL, "write stores: %s: records of %llu bytes, the dtype and shape "
                                "give %llu", path, (unsigned long long)st->record_size,
                                (unsigned long long)rs);
        for (size_t j = 0; j < k; j++)
            if (strcmp(specs[j].path, path) == 0)
                return zr_set_error(ZR_EINVAL, "write stores: %s is named twice", path);
        if (zrp_path_exists(path))
            return zr_set_error(ZR_EEXIST, "write stores: %s exists", path);
    }
    char **tmp = calloc(n, sizeof *tmp);
    zrs_store **made = calloc(n, sizeof *made);
    int rc = (tmp && made) ? ZR_OK : zr_set_error(ZR_ENOMEM, "write stores: out of memory");
    for (size_t k = 0; rc == ZR_OK && k < n; k++) {
        char *parent = ws_parent(specs[k].path);
        int r;
        if ((tmp[k] = ws_partial(specs[k].path)) == NULL || parent == NULL)
            rc = zr_set_error(ZR_ENOMEM, "write stores: out of memory");
        else if ((r = zrp_mkdir_parents(parent)) < 0)
            rc = zr_set_error(ZR_EIO, "write stores: cannot make directory %s: %s", parent, zr_os_strerror(r));
        else if ((r = ws_remove_dir(tmp[k])) < 0) /* a crashed run's leftover */
            rc = zr_set_error(ZR_EIO, "write stores: cannot remove the leftover %s: %s", tmp[k],
                              zr_os_strerror(r));
        free(parent);
    }
    for (size_t k = 0; rc == ZR_OK && k < n; k++) {
        rc = ws_copy(&streams[k], codec == ZLD_CODEC_AUTO, &specs[k], tmp[k],
                     codec == ZLD_CODEC_AUTO ? ZRE_CODEC_RAW : (zre_codec)codec, &made[k]);
        if (rc == ZR_OK && made[k] == NULL) /* a stream of 0 records */
            rc = streams[k].kind == ZLD_STREAM_RAGGED
                     ? zrs_create_ragged(&made[k], tmp[k], specs[k].dtype,
                                         codec == ZLD_CODEC_AUTO ? ZRE_CODEC_RAW : (zre_codec)codec)
                     : zrs_create_dense(&made[k], tmp[k], specs[k].dtype, specs[k].item_shape,
                                        specs[k].ndim, codec == ZLD_CODEC_AUTO ? ZRE_CODEC_RAW : (zre_codec)codec);
        if (rc == ZR_OK)
            rc = zrs_sync(made[k]);
        if (rc < 0)
            zr_error_context("write stores: %s (stream %s)", specs[k].path,
                             streams[k].name ? streams[k].name : "");
    }
    for (size_t k = 0; made && k < n; k++) {
        if (made[k] != NULL) {
            int r = zrs_close(made[k]);
            if (rc == ZR_OK && r < 0) {
                rc = r;
                zr_error_context("write stores: %s", specs[k].path);
            }
        }
    }
    /* complete and synced: publish, each by one rename */
    for (size_t k = 0; rc == ZR_OK && k < n; k++) {
        int r = zrp_rename(tmp[k], specs[k].path);
        if (r < 0)
            rc = zr_set_error(ZR_EIO, "write stores: cannot rename %s to %s: %s", tmp[k], specs[k].path,
                              zr_os_strerror(r));
        char *parent = ws_parent(specs[k].path);
        if (rc == ZR_OK && parent && (r = zrp_fsync_dir(parent)) < 0)
            rc = zr_set_error(ZR_EIO, "write stores: cannot sync directory %s: %s", parent, zr_os_strerror(r));
        free(parent);
    }
    if (rc < 0) /* nothing half written stays behind under a .partial name */
        for (size_t k = 0; tmp && k < n; k++)
            if (tmp[k] != NULL)
                (void)ws_remove_dir(tmp[k]);
    for (size_t k = 0; tmp && k < n; k++)
        free(tmp[k]);
    free(tmp);
    free(made);
    return rc;
}
