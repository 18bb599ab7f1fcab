/*
 * ingest_folder.c - zr ingest of a folder: a ragged uint8 store, one
 * record per non-empty regular file in sorted (byte) order, and the file
 * names one a line in STORE.names (line i names record i).
 *
 * STORE.names is written like every other file of the project: never
 * through a symbolic link and never over a file that is there. A new
 * store's list is created exclusively before the store itself (so a list
 * that is in the way stops the ingest before anything is written); an
 * --append goes on with the existing list only when it names exactly the
 * store's records. Each slice's names are written after its records are
 * committed, so after a crash the list is never ahead of the store, and a
 * later --append refuses a list that fell behind instead of shifting every
 * later name by one.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "ingest.h"
#include "zr_platform.h"

/* ----------------------------------------------------------- the files */

/* The folder's non-empty regular files, sorted. */
typedef struct folder {
    const char *dir;
    char **names;
    uint64_t *sizes;
    size_t keep, skipped;
    char *full; /* a path buffer of `cap` bytes */
    size_t cap;
} folder;

static void folder_free(folder *f)
{
    free(f->full);
    free(f->sizes);
    zrp_free_names(f->names, f->keep);
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* List dir into *f, keeping the regular, non-empty files that fit a
 * record (the store refuses empty records). 0 or an exit status. */
static int folder_list(folder *f, const char *dir)
{
    size_t n;
    memset(f, 0, sizeof *f);
    f->dir = dir;
    int rc = zrp_list_dir(dir, &f->names, &n);
    if (rc < 0) {
        zr_error(INGEST_CMD, dir, "cannot list: %s", strerror(-rc));
        return ZR_EXIT_OPEN;
    }
    qsort(f->names, n, sizeof *f->names, cmp_str);
    f->cap = strlen(dir) + 1024;
    f->full = malloc(f->cap);
    f->sizes = malloc((n + 1) * sizeof *f->sizes);
    if (!f->full || !f->sizes) {
        f->keep = n; /* all of them still to free */
        zr_error(INGEST_CMD, dir, "out of memory");
        return ZR_EXIT_FAILED;
    }
    for (size_t i = 0; i < n; i++) {
        snprintf(f->full, f->cap, "%s/%s", dir, f->names[i]);
        zrp_file h;
        uint64_t size = 0;
        int ok = zrp_is_regular_file(f->full) && !strchr(f->names[i], '\n') &&
                 zrp_open(&h, f->full, ZRP_READ) == 0;
        if (ok) {
            zrp_file_size(h, &size);
            zrp_close(&h);
        }
        if (ok && size + 16 > ZRE_RECORD_MAX)
            zr_error(INGEST_CMD, f->full, "skipped: %" PRIu64 " bytes is over the record limit",
                     size);
        if (!ok || size == 0 || size + 16 > ZRE_RECORD_MAX) {
            free(f->names[i]);
            f->skipped++;
            continue;
        }
        f->names[f->keep] = f->names[i];
        f->sizes[f->keep++] = size;
    }
    if (f->keep == 0) {
        zr_error(INGEST_CMD, dir, "holds no non-empty regular files");
        return ZR_EXIT_FAILED;
    }
    return 0;
}

/* Files i..j-1 as ragged records ([1][size][bytes]) into packed at
 * bounds[0..j-i]. 0, or ZR_EXIT_FAILED naming a file that cannot be read
 * or changed size since it was listed. */
static int folder_read(folder *f, size_t i, size_t j, unsigned char *packed, uint64_t *bounds,
                       zr_progress *pr)
{
    const uint64_t pre = ZRS_RAGGED_PREFIX_SIZE(1);
    bounds[0] = 0;
    for (size_t r = i; r < j; r++) {
        unsigned char *p = packed + bounds[r - i];
        uint64_t one = 1;
        memcpy(p, &one, 8);
        memcpy(p + 8, &f->sizes[r], 8);
        snprintf(f->full, f->cap, "%s/%s", f->dir, f->names[r]);
        zrp_file h;
        uint64_t now = 0;
        int rc = zrp_open(&h, f->full, ZRP_READ);
        if (rc == 0)
            rc = zrp_file_size(h, &now);
        if (rc == 0 && now != f->sizes[r])
            rc = -EAGAIN;
        if (rc == 0)
            rc = zrp_pread_all(h, p + pre, (size_t)f->sizes[r], 0);
        zrp_close(&h);
        if (rc < 0) {
            zr_progress_end(pr);
            zr_error(INGEST_CMD, f->full, "cannot read: %s",
                     rc == -EAGAIN ? "it changed size while being ingested" : strerror(-rc));
            return ZR_EXIT_FAILED;
        }
        bounds[r - i + 1] = bounds[r - i] + pre + f->sizes[r];
    }
    return 0;
}

/* ------------------------------------------------------- the names list */

typedef struct names_list {
    char *path;   /* STORE.names */
    zrp_file f;
    uint64_t end; /* its length: where the next names go */
    int open, created;
} names_list;

/* STORE.names (trailing separators of STORE dropped). */
static int names_init(names_list *nl, const char *store)
{
    memset(nl, 0, sizeof *nl);
    nl->f = ZRP_FILE_INVALID;
    size_t sl = strlen(store);
    while (sl > 1 && zrp_is_path_sep(store[sl - 1]))
        sl--;
    nl->path = malloc(sl + 8);
    if (!nl->path) {
        zr_error(INGEST_CMD, store, "out of memory");
        return ZR_EXIT_FAILED;
    }
    snprintf(nl->path, sl + 8, "%.*s.names", (int)sl, store);
    return 0;
}

/* Why a names list cannot be opened, in words. */
static const char *names_problem(int rc)
{
    return rc == -EEXIST   ? "already exists (a folder ingest writes a new names list; move it "
                             "away or pick another STORE)"
           : rc == -ELOOP  ? "is a symbolic link (the names list is never written through one)"
           : rc == ZRP_ENOTREG ? "is not a regular file"
           : rc == -ENOENT ? "is missing (--append goes on with the list of the ingest that "
                             "made STORE)"
                           : strerror(-rc);
}

/* A new store's list: created exclusively (refusing a file or a link in
 * its place). 0 or ZR_EXIT_OPEN. */
static int names_create(names_list *nl)
{
    int rc = zrp_open(&nl->f, nl->path, ZRP_WRITE | ZRP_CREATE | ZRP_EXCLUSIVE);
    if (rc == -EEXIST) {
        /* Say what is in the way: a link (even a dangling one), a
         * directory, or a file. */
        zrp_file t;
        int what = zrp_open(&t, nl->path, ZRP_READ);
        if (what == 0)
            zrp_close(&t);
        else if (what == -ELOOP || what == ZRP_ENOTREG)
            rc = what;
    }
    if (rc < 0) {
        zr_error(INGEST_CMD, nl->path, "cannot create the names list: it %s", names_problem(rc));
        return ZR_EXIT_OPEN;
    }
    nl->open = nl->created = 1;
    return 0;
}

/* An appended store's list: opened without following a link, and it must
 * name exactly the store's `records` records (whole lines). */
static int names_open_append(names_list *nl, uint64_t records)
{
    int rc = zrp_open(&nl->f, nl->path, ZRP_READ | ZRP_WRITE);
    if (rc < 0) {
        zr_error(INGEST_CMD, nl->path, "cannot open the names list: it %s", names_problem(rc));
        return ZR_EXIT_OPEN;
    }
    nl->open = 1;
    unsigned char buf[65536];
    uint64_t lines = 0, size = 0;
    int last = '\n';
    rc = zrp_file_size(nl->f, &size);
    for (uint64_t at = 0; rc == 0 && at < size; at += sizeof buf) {
        size_t k = size - at < sizeof buf ? (size_t)(size - at) : sizeof buf;
        rc = zrp_pread_all(nl->f, buf, k, at);
        for (size_t i = 0; rc == 0 && i < k; i++)
            lines += buf[i] == '\n';
        if (rc == 0)
            last = buf[k - 1];
    }
    if (rc < 0) {
        zr_error(INGEST_CMD, nl->path, "cannot read the names list: %s", strerror(-rc));
        return ZR_EXIT_FAILED;
    }
    if (lines != records || last != '\n') {
        zr_error(INGEST_CMD, nl->path, "names %" PRIu64 " file%s%s, but the store holds %" PRIu64
                 " records: it is not this store's list (nothing was appended)", lines,
                 lines == 1 ? "" : "s", last != '\n' ? " and a cut line" : "", records);
        return ZR_EXIT_FAILED;
    }
    nl->end = size;
    return 0;
}

/* Names i..j-1, one a line, at the end of the list. */
static int names_write(names_list *nl, char **names, size_t i, size_t j)
{
    size_t len = 0;
    for (size_t r = i; r < j; r++)
        len += strlen(names[r]) + 1;
    char *buf = malloc(len ? len : 1), *p = buf;
    if (!buf) {
        zr_error(INGEST_CMD, nl->path, "out of memory for %zu names", j - i);
        return ZR_EXIT_FAILED;
    }
    for (size_t r = i; r < j; r++) {
        size_t n = strlen(names[r]);
        memcpy(p, names[r], n);
        p[n] = '\n';
        p += n + 1;
    }
    int rc = zrp_pwrite_all(nl->f, buf, len, nl->end);
    free(buf);
    if (rc < 0) {
        zr_error(INGEST_CMD, nl->path, "write failed: %s", strerror(-rc));
        return ZR_EXIT_FAILED;
    }
    nl->end += len;
    return 0;
}

/* Sync and close the list; a list this ingest created for a store it
 * never made is removed again. Returns status, or the failure to sync. */
static int names_close(names_list *nl, int status, const zr_sink *k)
{
    if (nl->open) {
        int rc = zrp_fsync(nl->f);
        zrp_close(&nl->f);
        if (rc < 0 && status == 0) {
            zr_error(INGEST_CMD, nl->path, "fsync failed: %s", strerror(-rc));
            status = ZR_EXIT_FAILED;
        }
    }
    if (nl->created && !k->created && k->added == 0)
        zrp_unlink(nl->path);
    free(nl->path);
    return status;
}

/* -------------------------------------------------------------- ingest */

/* Files i..j-1 as one committed slice, then their names. The first slice
 * also opens the store (its records train a dictionary) and, appending,
 * checks the names list against it. */
static int folder_slice(folder *f, zr_sink *k, names_list *nl, size_t i, size_t j,
                        unsigned char *packed, uint64_t *bounds, uint64_t sum, zr_progress *pr)
{
    int status = folder_read(f, i, j, packed, bounds, pr);
    if (status == 0 && !k->s) {
        status = zr_sink_open(k, ZRS_RAGGED, ZRS_UINT8, NULL, 0, packed, bounds, j - i);
        if (status == 0 && !nl->open)
            status = names_open_append(nl, k->before);
        else if (status == 0 && !k->created) {
            /* Made by someone else since this ingest created the list. */
            zr_error(INGEST_CMD, k->path, "was made by another process as this ingest began; nothing was "
                     "appended");
            status = ZR_EXIT_OPEN;
        }
        if (status == 0)
            zr_interrupt_install();
    }
    const uint64_t had = k->added;
    if (status == 0)
        status = zr_sink_append(k, packed, bounds, j - i, sum);
    /* The names of what was committed: all of the slice, or (should an
     * append commit part of it) that part, so the list never falls out
     * of step with the store while zr runs. */
    if (k->added > had) {
        int ns = names_write(nl, f->names, i, i + (size_t)(k->added - had));
        status = status ? status : ns;
    }
    return status;
}

static int folder_slices(folder *f, zr_sink *k, names_list *nl, const ingest_opts *o)
{
    uint64_t slice, first_slice, bytes_done = 0;
    slice_sizes(o, &slice, &first_slice);
    const uint64_t pre = ZRS_RAGGED_PREFIX_SIZE(1);
    zr_progress pr;
    zr_progress_start(&pr, k->path, f->keep, "files", o->quiet);
    unsigned char *packed = NULL;
    uint64_t *bounds = malloc((f->keep + 1) * sizeof *bounds);
    int status = bounds ? 0 : ZR_EXIT_FAILED;
    for (size_t i = 0; status == 0 && i < f->keep && !zr_interrupted();) {
        /* One slice: files i..j, at least one. */
        uint64_t lim = k->s ? slice : first_slice, sum = 0;
        size_t j = i;
        while (j < f->keep && (j == i || sum + f->sizes[j] + pre <= lim))
            sum += f->sizes[j++] + pre;
        if ((status = grow_slice(&packed, sum, f->dir)) != 0)
            break;
        status = folder_slice(f, k, nl, i, j, packed, bounds, sum, &pr);
        for (size_t r = i; r < j; r++)
            bytes_done += f->sizes[r];
        i = j;
        zr_progress_update(&pr, i, bytes_done);
    }
    zr_progress_end(&pr);
    free(packed);
    free(bounds);
    return status;
}

int ingest_folder(const char *dir, const char *store, const ingest_opts *o)
{
    folder f;
    names_list nl;
    int status = folder_list(&f, dir);
    if (status == 0)
        status = names_init(&nl, store);
    if (status) {
        folder_free(&f);
        return status;
    }
    zr_sink k = {.cmd = INGEST_CMD, .path = store, .o = &o->sink};
    /* A new store: its list first, so a list in the way stops the ingest
     * before the store is made. */
    if (!zrp_path_exists(store))
        status = names_create(&nl);
    if (status == 0)
        status = folder_slices(&f, &k, &nl, o);
    char what[512];
    snprintf(what, sizeof what, "%s; names in %s",
             f.skipped ? " (non-regular or empty entries skipped)" : "", nl.path);
    status = names_close(&nl, status, &k);
    if (f.skipped && status == 0)
        zr_error(INGEST_CMD, dir, "skipped %zu entr%s that are not non-empty regular files",
                 f.skipped, f.skipped == 1 ? "y" : "ies");
    status = ingest_finish(o, &k, status, dir, what);
    folder_free(&f);
    return status;
}
