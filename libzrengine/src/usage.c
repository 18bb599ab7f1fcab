/*
 * usage.c - zre_get_disk_usage: the store directory's files by role and
 * size, for tools that show what a store costs on disk (zr info) without
 * knowing the engine's file names. A store at a URL has no listing: its
 * open objects are counted instead.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "engine_internal.h"

/* 1 if name is "<digits>.<ext>", the engine's numbered files. */
static int numbered(const char *name, const char *ext)
{
    size_t d = strspn(name, "0123456789");
    return d > 0 && name[d] == '.' && !strcmp(name + d + 1, ext);
}

/* Add one file of `size` bytes called `name` to its role in *u. */
static void count_file(zre_disk_usage *u, const char *name, uint64_t size)
{
    if (numbered(name, "chunk")) {
        u->chunk_files++;
        u->chunk_bytes += size;
    } else if (numbered(name, "loc")) {
        u->table_bytes += size;
    } else if (!strcmp(name, "dict.zr")) {
        u->dict_bytes += size;
    } else if (!strcmp(name, "meta.zr") || !strcmp(name, "store.zr") ||
               !strcmp(name, "lock.zr")) {
        u->meta_bytes += size;
    } else {
        u->journal_pending |= !strcmp(name, "journal.zr");
        u->other_bytes += size;
    }
}

/* The open files [0, n) of table t, as the engine saw them: how many, and
 * their bytes. */
static int sum_open(zre_engine *e, const zre_fdtab *t, uint64_t n, uint64_t *files,
                    uint64_t *bytes)
{
    for (uint64_t id = 0; id < n; id++) {
        uint64_t size = 0;
        if (!zre_fent_open(zre_fdtab_ent(t, id)))
            continue;
        int rc = zre_fent_size(t, id, &size);
        if (rc < 0)
            return zr_set_error(ZR_EIO, "disk usage: cannot stat %s/%" PRIu64 ".%s: %s", e->path,
                                id, t->ext, zr_os_strerror(rc));
        ++*files;
        *bytes += size;
    }
    return ZR_OK;
}

/* A store at a URL: its chunk and table objects at the sizes seen at open
 * (HEAD), meta.zr, and store.zr when there is one. */
static int remote_usage(zre_engine *e, zre_disk_usage *out)
{
    zrp_mutex_lock(&e->writer);
    const uint64_t nchunks = (uint64_t)e->tail.chunk + 1, nseg = e->locs.count;
    zrp_mutex_unlock(&e->writer);
    uint64_t segs = 0;
    int rc = sum_open(e, &e->chunks, nchunks, &out->chunk_files, &out->chunk_bytes);
    if (rc == 0)
        rc = sum_open(e, &e->locs, nseg, &segs, &out->table_bytes);
    out->dict_bytes = e->dict_size;
    out->meta_bytes = e->meta_legacy ? 32 : ZRE_META_SIZE;
    void *buf = NULL;
    size_t len = 0;
    int prc = rc == 0 ? zre_read_aux(e, "store.zr", &buf, &len, (size_t)1 << 20) : 0;
    free(buf);
    if (prc == 0)
        out->meta_bytes += len;
    else if (prc != -ENOENT)
        rc = zr_set_error(zre_io_status(prc, ZR_EIO), "disk usage: cannot read %s/store.zr: %s",
                          e->path, zr_os_strerror(prc));
    return rc;
}

ZRE_API int zre_get_disk_usage(zre_engine *e, zre_disk_usage *out)
{
    if (!e || !out)
        return zr_set_error(ZR_EINVAL, "disk usage: NULL argument");
    memset(out, 0, sizeof *out);
    int rc = zre_check_usable(e, "disk usage");
    if (rc < 0)
        return rc;
    if (e->remote)
        return remote_usage(e, out);
    char **names;
    size_t n;
    int prc = zrp_list_dir(e->path, &names, &n);
    if (prc < 0)
        return zr_set_error(ZR_EIO, "disk usage: cannot list %s: %s", e->path,
                            zr_os_strerror(prc));
    for (size_t i = 0; i < n && rc == 0; i++) {
        char *p = zre_join(e, names[i]);
        if (!p) {
            rc = zr_set_error(ZR_ENOMEM, "disk usage: out of memory for a path");
            break;
        }
        zrp_file f;
        uint64_t size = 0;
        /* Directories are skipped before the open: Windows refuses to open
         * one as a file (access denied), POSIX with ZRP_ENOTREG. */
        prc = zrp_is_regular_file(p) ? zrp_open(&f, p, ZRP_READ) : ZRP_ENOTREG;
        if (prc == 0) {
            prc = zrp_file_size(f, &size);
            zrp_close(&f);
            if (prc == 0)
                count_file(out, names[i], size);
        }
        /* Gone since the listing, a link, a directory, a FIFO: not a file
         * of the store's. */
        if (prc < 0 && prc != -ENOENT && prc != -ELOOP && prc != ZRP_ENOTREG)
            rc = zr_set_error(ZR_EIO, "disk usage: cannot examine %s: %s", p, zr_os_strerror(prc));
        free(p);
    }
    zrp_free_names(names, n);
    return rc;
}
