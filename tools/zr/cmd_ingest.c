/*
 * zr ingest SRC STORE - make (or, with --append, extend) a store from:
 *   .npy            any store dtype, either byte order, C or Fortran order;
 *                   records along axis 0 (dense, or --ragged);
 *   .npz            one store per array under STORE/NAME, or --array NAME;
 *   IDX             the MNIST family (Fashion-MNIST's own files), gzipped
 *                   or not;
 *   a folder        a ragged uint8 store, one record per regular file in
 *                   sorted (byte) order, names written to STORE.names;
 *   tokens          a flat 1-d .npy plus --lengths or --offsets (.npy):
 *                   a ragged store, one 1-d record per sequence;
 *   Parquet, Arrow  one store per column (STORE/NAME), or --column NAME:
 *                   read by pyarrow through loaderx (ingest_arrow.c).
 * The source kind is read from the file's first bytes, not its name.
 * Records are appended in slices (each one committed), so memory stays
 * bounded (Fortran-order arrays excepted: they are loaded whole) and
 * Ctrl-C stops after the slice in flight with everything before intact.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "ingest_arrow.h"
#include "zr_cli.h"
#include "zr_io.h"
#include "zr_platform.h"

#define CMD "ingest"
#define SLICE_BYTES ((uint64_t)16 << 20)
#define SLICE_BYTES_DICT ((uint64_t)2 << 20) /* level 19: keep Ctrl-C prompt */

typedef struct ingest_opts {
    zr_sink_opts sink;
    const char *array, *lengths, *offsets, *column, *tier_name;
    int ragged, quiet, json;
} ingest_opts;

static void ingest_usage(FILE *out)
{
    fprintf(out,
            "usage: zr ingest [OPTIONS] SRC STORE\n"
            "Make a store from SRC, or add to one with --append. SRC is one of:\n"
            "  a .npy file         any store dtype, either byte order, C or Fortran order;\n"
            "                      records along axis 0 (a dense store, or --ragged)\n"
            "  a .npz file         one store per array as STORE/NAME, or --array NAME\n"
            "  an IDX file         MNIST-style, gzipped or not (e.g. Fashion-MNIST's own)\n"
            "  a folder            a ragged uint8 store, one record per regular file in\n"
            "                      sorted order; the names go to STORE.names, one a line\n"
            "                      (empty files are skipped: a record is never empty)\n"
            "  a flat 1-d .npy     with --lengths or --offsets: ragged token sequences\n"
            "  a Parquet, Arrow IPC or Feather file\n"
            "                      one store per column as STORE/NAME, or --column NAME;\n"
            "                      numbers and fixed-size lists dense, variable lists,\n"
            "                      binary and strings ragged (needs python3 with loaderx\n"
            "                      and pyarrow, or $ZR_PYTHON)\n"
            "\n"
            "Options:\n"
            "  --codec raw|zstd|zstd_dict  record codec (default zstd)\n"
            "  --tier fast|balanced|max    zstd_dict: train a dictionary of this tier on the\n"
            "                              first records (default balanced)\n"
            "  --dict FILE                 zstd_dict: use this dictionary (zr train-dict)\n"
            "                              (--tier or --dict alone imply --codec zstd_dict)\n"
            "  --append                    add to STORE if it exists with the same identity\n"
            "  --array NAME                .npz: ingest only this array, into STORE\n"
            "  --column NAME               Parquet/Arrow: ingest only this column, into STORE\n"
            "  --ragged                    .npy/IDX/.npz/Arrow: a ragged store, one record per row\n"
            "  --lengths FILE.npy          tokens: record i holds lengths[i] elements\n"
            "  --offsets FILE.npy          tokens: record i is SRC[offsets[i]:offsets[i+1]]\n"
            "  --json                      one JSON object per store written\n"
            "  -q, --quiet                 no progress line (shown only on a terminal)\n"
            "  -h, --help                  this text\n"
            "\n"
            "Example:\n"
            "  zr ingest /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz train-x\n"
            "  zr ingest --codec zstd_dict --tier fast /usr/share/doc docs   # a folder\n"
            "  zr ingest tokens.npy --lengths lengths.npy corpus\n"
            "  zr ingest --column image train.parquet train-x\n"
            "\n%s",
            zr_exit_table);
}

/* Grow the slice buffer *packed to hold `sum` bytes (kept when it cannot
 * grow): 0, or ZR_EXIT_FAILED after naming `what` (the input). */
static int grow_slice(unsigned char **packed, uint64_t sum, const char *what)
{
    unsigned char *np = realloc(*packed, sum ? sum : 1);
    if (!np) {
        zr_error(CMD, what, "out of memory for a slice of %" PRIu64 " bytes", sum);
        return ZR_EXIT_FAILED;
    }
    *packed = np;
    return 0;
}

/* Bytes per committed slice, and of the first slice, which also feeds
 * dictionary training (the tier's sample size) when one is trained. */
static void slice_sizes(const ingest_opts *o, uint64_t *slice, uint64_t *first)
{
    *slice = o->sink.codec == ZRE_CODEC_ZSTD_DICT ? SLICE_BYTES_DICT : SLICE_BYTES;
    *first = *slice;
    if (o->sink.codec == ZRE_CODEC_ZSTD_DICT && !o->sink.dict_path) {
        uint64_t dcap, scap;
        zrs_dict_tier_sizes(o->sink.tier, &dcap, &scap);
        if (scap > *first)
            *first = scap;
    }
}

/* ---------------------------------------------------------- reporting */

static void report(const ingest_opts *o, const zr_sink *k, const char *src, const char *what)
{
    zrs_store *s = k->s;
    uint64_t total = k->before + k->added;
    if (o->json) {
        json_object *j = json_object_new_object();
        zr_json_str(j, "store", k->path);
        zr_json_str(j, "source", src);
        zr_json_str(j, "kind", zrs_get_kind(s) == ZRS_DENSE ? "dense" : "ragged");
        zr_json_str(j, "dtype", zrs_dtype_str(zrs_get_dtype(s)));
        zr_json_str(j, "codec", zre_codec_name(zrs_get_codec(s)));
        zr_json_u64(j, "records_added", k->added);
        zr_json_u64(j, "records", total);
        json_object_object_add(j, "appended", json_object_new_boolean(!k->created));
        zr_json_print(j);
    } else {
        printf("%s: %s %" PRIu64 " %s record%s of %s (%s) from %s%s\n", k->path,
               k->created ? "wrote" : "appended", k->added,
               zrs_get_kind(s) == ZRS_DENSE ? "dense" : "ragged", k->added == 1 ? "" : "s",
               zrs_dtype_str(zrs_get_dtype(s)), zre_codec_name(zrs_get_codec(s)), src, what);
        if (!k->created)
            printf("%s: now %" PRIu64 " records\n", k->path, total);
    }
}

/* Close the sink; on interrupt say what was committed. */
static int finish(const ingest_opts *o, zr_sink *k, int status, const char *src, const char *what)
{
    if (status == 0 && zr_interrupted()) {
        char msg[160];
        snprintf(msg, sizeof msg, "%" PRIu64 " records committed to %s before the stop", k->added,
                 k->path);
        zr_sink_close(k);
        return zr_interrupt_exit(CMD, src, msg);
    }
    if (status == 0 && k->s)
        report(o, k, src, what);
    int rc = zr_sink_close(k);
    return status ? status : rc;
}

/* ---------------------------------------------------------- n-d arrays */

/* Records first..first+k of a Fortran-order array F, in C order. */
static void fortran_records(const unsigned char *F, const zr_array *a, uint64_t first, uint64_t k,
                            unsigned char *out)
{
    const size_t isz = zrs_dtype_itemsize(a->dtype), d = a->ndim;
    uint64_t st[ZRS_MAX_NDIM + 1], idx[ZRS_MAX_NDIM + 1];
    st[0] = 1;
    for (size_t j = 1; j < d; j++)
        st[j] = st[j - 1] * a->shape[j - 1];
    const uint64_t per = zr_array_count(a, 1);
    for (uint64_t r = 0; r < k; r++) {
        uint64_t off = first + r;
        memset(idx, 0, sizeof idx);
        for (uint64_t e = 0; e < per; e++) {
            memcpy(out, F + off * isz, isz);
            out += isz;
            for (size_t j = d - 1; j >= 1; j--) {
                off += st[j];
                if (++idx[j] < a->shape[j])
                    break;
                off -= st[j] * a->shape[j];
                idx[j] = 0;
            }
        }
    }
}

/* Pack k records of rec bytes (shape item[0..nd)) as ragged records. */
static void pack_rows(const unsigned char *rows, uint64_t k, uint64_t rec, const uint64_t *item,
                      size_t nd, unsigned char *packed, uint64_t *bounds)
{
    const uint64_t pre = ZRS_RAGGED_PREFIX_SIZE(nd);
    bounds[0] = 0;
    for (uint64_t i = 0; i < k; i++) {
        unsigned char *p = packed + bounds[i];
        uint64_t v = nd;
        memcpy(p, &v, 8); /* little-endian host (the store format's order) */
        for (size_t j = 0; j < nd; j++)
            memcpy(p + 8 + 8 * j, &item[j], 8);
        memcpy(p + pre, rows + i * rec, rec);
        bounds[i + 1] = bounds[i] + pre + rec;
    }
}

static int ingest_array(zr_src *src, const zr_array *a, const char *store, const ingest_opts *o)
{
    char err[ZR_IO_ERR];
    const char *name = zr_src_name(src);
    if (a->ndim == 0) {
        zr_error(CMD, name, "a 0-d array (shape ()) holds no records");
        return ZR_EXIT_FAILED;
    }
    const size_t isz = zrs_dtype_itemsize(a->dtype);
    const uint64_t n = a->shape[0], rec = isz * zr_array_count(a, 1);
    const uint64_t *item = a->shape + 1;
    const size_t nd = a->ndim - 1;
    if (rec == 0 && n > 0) {
        zr_error(CMD, name, "records of shape with a zero dimension hold no bytes");
        return ZR_EXIT_FAILED;
    }
    uint64_t slice, first_slice;
    slice_sizes(o, &slice, &first_slice);
    uint64_t per = rec ? slice / rec : 1, first_per = rec ? first_slice / rec : 1;
    if (per == 0)
        per = 1;
    if (first_per < per)
        first_per = per;
    if (first_per > n)
        first_per = n ? n : 1;
    if (per > n)
        per = n ? n : 1;
    unsigned char *full = NULL;
    if (a->fortran && nd > 0 && n > 1) {
        full = malloc(n * rec);
        if (!full) {
            zr_error(CMD, name, "out of memory: a Fortran-order array is loaded whole (%" PRIu64
                     " bytes)", n * rec);
            return ZR_EXIT_FAILED;
        }
        if (zr_src_read_exact(src, full, n * rec, "the array data", err) < 0) {
            free(full);
            fprintf(stderr, "zr %s: %s\n", CMD, err);
            return ZR_EXIT_FAILED;
        }
    }
    const uint64_t pre = ZRS_RAGGED_PREFIX_SIZE(nd);
    unsigned char *buf = malloc(first_per * rec + 1);
    unsigned char *packed = o->ragged ? malloc(first_per * (rec + pre) + 1) : NULL;
    uint64_t *bounds = o->ragged ? malloc((first_per + 1) * sizeof *bounds) : NULL;
    if (!buf || (o->ragged && (!packed || !bounds))) {
        free(full);
        free(buf);
        free(packed);
        free(bounds);
        zr_error(CMD, name, "out of memory for a slice of %" PRIu64 " records", first_per);
        return ZR_EXIT_FAILED;
    }
    zr_sink k = {.cmd = CMD, .path = store, .o = &o->sink};
    zr_progress pr;
    zr_progress_start(&pr, store, n, "records", o->quiet);
    int status = 0, opened = 0;
    for (uint64_t done = 0; status == 0 && (done < n || !opened);) {
        uint64_t want = opened ? per : first_per;
        uint64_t c = n - done < want ? n - done : want;
        if (full) {
            fortran_records(full, a, done, c, buf);
        } else if (zr_src_read_exact(src, buf, c * rec, "the array data", err) < 0) {
            zr_progress_end(&pr);
            zr_error(CMD, name, "%s (the header promises %" PRIu64 " records; %" PRIu64
                     " were committed)", strchr(err, ':') ? strchr(err, ':') + 2 : err, n, done);
            status = ZR_EXIT_FAILED;
            break;
        }
        if (a->swap)
            zr_byteswap(buf, c * rec / isz, a->dtype);
        const void *data = buf;
        if (o->ragged) {
            pack_rows(buf, c, rec, item, nd, packed, bounds);
            data = packed;
        }
        if (!opened) {
            uint64_t *sb = bounds, dense_bounds[2] = {0, 0}, *db = NULL;
            if (!o->ragged) {
                /* Dense training samples: one per record. */
                db = malloc((c + 1) * sizeof *db);
                if (!db) {
                    status = ZR_EXIT_FAILED;
                    break;
                }
                for (uint64_t i = 0; i <= c; i++)
                    db[i] = i * rec;
                sb = db;
            }
            status = zr_sink_open(&k, o->ragged ? ZRS_RAGGED : ZRS_DENSE, a->dtype, item, nd, data,
                                  c ? sb : dense_bounds, c);
            free(db);
            opened = 1;
            if (status)
                break;
            zr_interrupt_install();
        }
        if (c > 0)
            status = zr_sink_append(&k, data, o->ragged ? bounds : NULL, c, c * rec);
        done += c;
        zr_progress_update(&pr, done, done * rec);
        if (zr_interrupted())
            break;
    }
    zr_progress_end(&pr);
    free(full);
    free(buf);
    free(packed);
    free(bounds);
    return finish(o, &k, status, name, "");
}

static int ingest_array_file(const char *path, const char *store, const ingest_opts *o, int idx)
{
    char err[ZR_IO_ERR];
    zr_src *src;
    if (zr_src_open_file(&src, path, err) < 0) {
        fprintf(stderr, "zr %s: %s\n", CMD, err);
        return ZR_EXIT_OPEN;
    }
    zr_array a;
    int rc = idx ? zr_idx_read_header(src, &a, err) : zr_npy_read_header(src, &a, err);
    if (rc < 0) {
        zr_src_close(src);
        fprintf(stderr, "zr %s: %s\n", CMD, err);
        return ZR_EXIT_FAILED;
    }
    rc = ingest_array(src, &a, store, o);
    zr_src_close(src);
    return rc;
}

/* --------------------------------------------------------------- .npz */

static int ingest_ragged_npz(const char *path, const char *store, const ingest_opts *o);

static int ingest_npz(const char *path, const char *store, const ingest_opts *o)
{
    char err[ZR_IO_ERR];
    zr_zip_entry *ents;
    size_t n;
    if (zr_zip_list(path, &ents, &n, err) < 0) {
        fprintf(stderr, "zr %s: %s\n", CMD, err);
        return ZR_EXIT_FAILED;
    }
    int status = 0, found = 0;
    if (!o->array && !o->ragged) {
        int have = 0;
        for (size_t i = 0; i < n; i++)
            have |= (!strcmp(ents[i].name, "data.npy")) << 0 |
                    (!strcmp(ents[i].name, "offsets.npy")) << 1 |
                    (!strcmp(ents[i].name, "shapes.npy")) << 2;
        if (have == 7 && n == 3) {
            free(ents);
            return ingest_ragged_npz(path, store, o);
        }
    }
    for (size_t i = 0; i < n && status == 0 && !zr_interrupted(); i++) {
        char name[256];
        snprintf(name, sizeof name, "%s", ents[i].name);
        size_t len = strlen(name);
        if (len < 5 || strcmp(name + len - 4, ".npy"))
            continue;
        name[len - 4] = '\0';
        if (o->array && strcmp(o->array, name))
            continue;
        found++;
        if (!o->array && (strchr(name, '/') || !strcmp(name, "..") || !strcmp(name, "."))) {
            zr_error(CMD, path, "array name '%s' is not a plain file name; pick it with --array",
                     name);
            status = ZR_EXIT_FAILED;
            break;
        }
        char *dst = malloc(strlen(store) + len + 2);
        zr_src *src = NULL;
        if (!dst) {
            status = ZR_EXIT_FAILED;
            break;
        }
        if (o->array)
            strcpy(dst, store);
        else
            sprintf(dst, "%s/%s", store, name);
        if (zr_src_open_zip_member(&src, path, ents[i].name, err) < 0) {
            fprintf(stderr, "zr %s: %s\n", CMD, err);
            status = ZR_EXIT_FAILED;
        } else {
            zr_array a;
            if (zr_npy_read_header(src, &a, err) < 0) {
                fprintf(stderr, "zr %s: %s\n", CMD, err);
                status = ZR_EXIT_FAILED;
            } else {
                status = ingest_array(src, &a, dst, o);
            }
            zr_src_close(src);
        }
        free(dst);
    }
    free(ents);
    if (status == 0 && !found) {
        if (o->array)
            zr_error(CMD, path, "no array named '%s'", o->array);
        else
            zr_error(CMD, path, "holds no .npy arrays");
        status = ZR_EXIT_FAILED;
    }
    return status;
}

/* ------------------------------------------------------------- folders */

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int ingest_folder(const char *dir, const char *store, const ingest_opts *o)
{
    char **names;
    size_t n;
    int rc = zrp_list_dir(dir, &names, &n);
    if (rc < 0) {
        zr_error(CMD, dir, "cannot list: %s", strerror(-rc));
        return ZR_EXIT_OPEN;
    }
    qsort(names, n, sizeof *names, cmp_str);
    size_t cap = strlen(dir) + 1024;
    char *full = malloc(cap);
    /* Keep the regular, non-empty files (the store refuses empty records). */
    uint64_t *sizes = malloc((n + 1) * sizeof *sizes);
    size_t keep = 0, skipped = 0;
    for (size_t i = 0; full && sizes && i < n; i++) {
        snprintf(full, cap, "%s/%s", dir, names[i]);
        zrp_file f;
        uint64_t size = 0;
        if (!zrp_is_regular_file(full) || strchr(names[i], '\n') ||
            zrp_open(&f, full, ZRP_READ) < 0) {
            free(names[i]);
            skipped++;
            continue;
        }
        zrp_file_size(f, &size);
        zrp_close(&f);
        if (size == 0 || size + 16 > ZRE_RECORD_MAX) {
            if (size)
                zr_error(CMD, full, "skipped: %" PRIu64 " bytes is over the record limit", size);
            free(names[i]);
            skipped++;
            continue;
        }
        names[keep] = names[i];
        sizes[keep++] = size;
    }
    if (!full || !sizes) {
        free(full);
        free(sizes);
        zrp_free_names(names, n);
        zr_error(CMD, dir, "out of memory");
        return ZR_EXIT_FAILED;
    }
    if (keep == 0) {
        zr_error(CMD, dir, "holds no non-empty regular files");
        free(full);
        free(sizes);
        zrp_free_names(names, keep);
        return ZR_EXIT_FAILED;
    }

    /* The names list beside the store: STORE.names, line i = record i. */
    size_t sl = strlen(store);
    while (sl > 1 && store[sl - 1] == '/')
        sl--;
    char *names_path = malloc(sl + 8);
    snprintf(names_path, sl + 8, "%.*s.names", (int)sl, store);

    uint64_t slice, first_slice;
    slice_sizes(o, &slice, &first_slice);
    const uint64_t pre = ZRS_RAGGED_PREFIX_SIZE(1);
    zr_sink k = {.cmd = CMD, .path = store, .o = &o->sink};
    zr_progress pr;
    zr_progress_start(&pr, store, keep, "files", o->quiet);
    unsigned char *packed = NULL;
    uint64_t *bounds = malloc((keep + 1) * sizeof *bounds);
    FILE *nf = NULL;
    int status = bounds ? 0 : ZR_EXIT_FAILED, opened = 0;
    uint64_t bytes_done = 0;
    for (size_t i = 0; status == 0 && i < keep && !zr_interrupted();) {
        /* One slice: files i..j, at least one. */
        uint64_t lim = opened ? slice : first_slice, sum = 0;
        size_t j = i;
        while (j < keep && (j == i || sum + sizes[j] + pre <= lim))
            sum += sizes[j++] + pre;
        if ((status = grow_slice(&packed, sum, dir)) != 0)
            break;
        bounds[0] = 0;
        for (size_t r = i; r < j && status == 0; r++) {
            unsigned char *p = packed + bounds[r - i];
            uint64_t one = 1;
            memcpy(p, &one, 8);
            memcpy(p + 8, &sizes[r], 8);
            snprintf(full, cap, "%s/%s", dir, names[r]);
            zrp_file f;
            rc = zrp_open(&f, full, ZRP_READ);
            uint64_t now = 0;
            if (rc == 0)
                rc = zrp_file_size(f, &now);
            if (rc == 0 && now != sizes[r])
                rc = -EAGAIN;
            if (rc == 0)
                rc = zrp_pread_all(f, p + pre, (size_t)sizes[r], 0);
            zrp_close(&f);
            if (rc < 0) {
                zr_progress_end(&pr);
                zr_error(CMD, full, "cannot read: %s",
                         rc == -EAGAIN ? "it changed size while being ingested" : strerror(-rc));
                status = ZR_EXIT_FAILED;
            }
            bounds[r - i + 1] = bounds[r - i] + pre + sizes[r];
        }
        if (status)
            break;
        if (!opened) {
            status = zr_sink_open(&k, ZRS_RAGGED, ZRS_UINT8, NULL, 0, packed, bounds, j - i);
            opened = 1;
            if (status)
                break;
            nf = fopen(names_path, k.created ? "w" : "a");
            if (!nf) {
                zr_error(CMD, names_path, "cannot write the names list: %s", strerror(errno));
                status = ZR_EXIT_OPEN;
                break;
            }
            zr_interrupt_install();
        }
        status = zr_sink_append(&k, packed, bounds, j - i, sum);
        /* The names of a slice follow its commit. */
        for (size_t r = i; status == 0 && r < j; r++)
            fprintf(nf, "%s\n", names[r]);
        if (status == 0 && fflush(nf) != 0) {
            zr_error(CMD, names_path, "write failed: %s", strerror(errno));
            status = ZR_EXIT_FAILED;
        }
        for (size_t r = i; r < j; r++)
            bytes_done += sizes[r];
        i = j;
        zr_progress_update(&pr, i, bytes_done);
    }
    zr_progress_end(&pr);
    if (nf && fclose(nf) != 0 && status == 0) {
        zr_error(CMD, names_path, "write failed: %s", strerror(errno));
        status = ZR_EXIT_FAILED;
    }
    char what[512];
    snprintf(what, sizeof what, "%s; names in %s", skipped ? " (non-regular or empty entries skipped)" : "",
             names_path);
    if (skipped && status == 0)
        zr_error(CMD, dir, "skipped %zu entr%s that are not non-empty regular files", skipped,
                 skipped == 1 ? "y" : "ies");
    status = finish(o, &k, status, dir, what);
    free(packed);
    free(bounds);
    free(full);
    free(sizes);
    free(names_path);
    zrp_free_names(names, keep);
    return status;
}

/* -------------------------------------------------------------- tokens */

/* Ragged records from a flat 1-d array: record i is elements
 * off[i]..off[i+1] with shape shapes[i*d..] (dims until the first -1) or,
 * without shapes, 1-d. */
static int ingest_flat(zr_src *src, const zr_array *a, const uint64_t *off, uint64_t n,
                       const int64_t *shapes, uint64_t d, const char *store, const ingest_opts *o)
{
    char err[ZR_IO_ERR];
    const char *path = zr_src_name(src);
    const size_t isz = zrs_dtype_itemsize(a->dtype);
    uint64_t slice, first_slice;
    slice_sizes(o, &slice, &first_slice);
    /* Each record's ndim. */
    uint8_t *nds = malloc(n ? n : 1);
    uint64_t *bounds = malloc((n + 1) * sizeof *bounds);
    if (!nds || !bounds) {
        free(nds);
        free(bounds);
        zr_error(CMD, path, "out of memory for %" PRIu64 " records", n);
        return ZR_EXIT_FAILED;
    }
    for (uint64_t i = 0; i < n; i++) {
        uint64_t nd = 1;
        if (shapes)
            for (nd = 0; nd < d && shapes[i * d + nd] >= 0; nd++)
                ;
        nds[i] = (uint8_t)nd;
    }
    zr_sink k = {.cmd = CMD, .path = store, .o = &o->sink};
    zr_progress pr;
    zr_progress_start(&pr, store, n, "records", o->quiet);
    unsigned char *packed = NULL;
    int status = 0, opened = 0;
    for (uint64_t i = 0; status == 0 && (i < n || !opened) && !zr_interrupted();) {
        uint64_t lim = opened ? slice : first_slice, sum = 0, j = i;
        while (j < n && (j == i || sum + (off[j + 1] - off[j]) * isz +
                                           ZRS_RAGGED_PREFIX_SIZE(nds[j]) <= lim)) {
            sum += (off[j + 1] - off[j]) * isz + ZRS_RAGGED_PREFIX_SIZE(nds[j]);
            j++;
        }
        if ((status = grow_slice(&packed, sum, path)) != 0)
            break;
        bounds[0] = 0;
        for (uint64_t r = i; r < j && status == 0; r++) {
            unsigned char *p = packed + bounds[r - i];
            uint64_t nd = nds[r], len = off[r + 1] - off[r];
            memcpy(p, &nd, 8);
            for (uint64_t q = 0; q < nd; q++) {
                uint64_t dim = shapes ? (uint64_t)shapes[r * d + q] : len;
                memcpy(p + 8 + 8 * q, &dim, 8);
            }
            unsigned char *payload = p + ZRS_RAGGED_PREFIX_SIZE(nd);
            if (zr_src_read_exact(src, payload, len * isz, "the flat data", err) < 0) {
                fprintf(stderr, "zr %s: %s\n", CMD, err);
                status = ZR_EXIT_FAILED;
            } else if (a->swap) {
                zr_byteswap(payload, len, a->dtype);
            }
            bounds[r - i + 1] = bounds[r - i] + ZRS_RAGGED_PREFIX_SIZE(nd) + len * isz;
        }
        if (status)
            break;
        if (!opened) {
            status = zr_sink_open(&k, ZRS_RAGGED, a->dtype, NULL, 0, packed, bounds, j - i);
            opened = 1;
            if (status)
                break;
        }
        if (j > i)
            status = zr_sink_append(&k, packed, bounds, j - i, sum);
        i = j;
        zr_progress_update(&pr, i, off[i] * isz);
    }
    zr_progress_end(&pr);
    free(packed);
    free(bounds);
    free(nds);
    return finish(o, &k, status, path, "");
}

/* off[0..n] from lengths (n values) or offsets (n + 1 values, from 0),
 * checked against the flat length; NULL after printing the problem. */
static uint64_t *record_offsets(const int64_t *v, uint64_t nv, int lengths, uint64_t flat,
                                const char *vpath, const char *flat_path, uint64_t *n)
{
    *n = lengths ? nv : (nv ? nv - 1 : 0);
    if (!lengths && (nv < 1 || v[0] != 0)) {
        zr_error(CMD, vpath, "offsets must start at 0 (got %" PRIu64 " values%s)", nv,
                 nv ? ", the first not 0" : "");
        return NULL;
    }
    uint64_t *off = malloc((*n + 1) * sizeof *off);
    if (!off) {
        zr_error(CMD, vpath, "out of memory");
        return NULL;
    }
    off[0] = 0;
    for (uint64_t i = 0; i < *n; i++) {
        int64_t len = lengths ? v[i] : v[i + 1] - v[i];
        if (len <= 0) {
            zr_error(CMD, vpath, "record %" PRIu64 " would hold %" PRId64 " elements (a record "
                     "holds at least one)", i, len);
            free(off);
            return NULL;
        }
        off[i + 1] = off[i] + (uint64_t)len;
    }
    if (off[*n] != flat) {
        zr_error(CMD, vpath, "%s cover %" PRIu64 " elements, but %s holds %" PRIu64,
                 lengths ? "lengths" : "offsets", off[*n], flat_path, flat);
        free(off);
        return NULL;
    }
    return off;
}

/* Open a flat 1-d array source and read its header. */
static int open_flat(zr_src *src, zr_array *a)
{
    char err[ZR_IO_ERR];
    if (zr_npy_read_header(src, a, err) < 0) {
        fprintf(stderr, "zr %s: %s\n", CMD, err);
        return ZR_EXIT_FAILED;
    }
    if (a->ndim != 1) {
        zr_error(CMD, zr_src_name(src), "the flat data must be a 1-d array, got %zu dimensions",
                 a->ndim);
        return ZR_EXIT_FAILED;
    }
    return 0;
}

static int ingest_tokens(const char *path, const char *store, const ingest_opts *o)
{
    char err[ZR_IO_ERR];
    const char *lpath = o->lengths ? o->lengths : o->offsets;
    int64_t *v;
    uint64_t nv, n;
    if (zr_npy_load_i64(lpath, &v, &nv, err) < 0) {
        fprintf(stderr, "zr %s: %s\n", CMD, err);
        return zrp_path_exists(lpath) ? ZR_EXIT_FAILED : ZR_EXIT_OPEN;
    }
    zr_src *src;
    if (zr_src_open_file(&src, path, err) < 0) {
        free(v);
        fprintf(stderr, "zr %s: %s\n", CMD, err);
        return ZR_EXIT_OPEN;
    }
    zr_array a;
    int status = open_flat(src, &a);
    uint64_t *off = status ? NULL
                           : record_offsets(v, nv, o->lengths != NULL, a.shape[0], lpath, path, &n);
    free(v);
    if (!status && !off)
        status = ZR_EXIT_FAILED;
    if (!status)
        status = ingest_flat(src, &a, off, n, NULL, 0, store, o);
    free(off);
    zr_src_close(src);
    return status;
}

/* The .npz that zr export writes for a ragged store: data, offsets and
 * shapes, back into a ragged store. */
static int ingest_ragged_npz(const char *path, const char *store, const ingest_opts *o)
{
    char err[ZR_IO_ERR];
    zr_src *s = NULL;
    int64_t *offs = NULL, *shapes = NULL;
    uint64_t no = 0, one, ns = 0, d = 0, n = 0;
    int status = 0;
    if (zr_src_open_zip_member(&s, path, "offsets.npy", err) < 0 ||
        zr_load_i64(s, 1, &offs, &no, &one, err) < 0)
        status = ZR_EXIT_FAILED;
    zr_src_close(s);
    s = NULL;
    if (!status && (zr_src_open_zip_member(&s, path, "shapes.npy", err) < 0 ||
                    zr_load_i64(s, 2, &shapes, &ns, &d, err) < 0))
        status = ZR_EXIT_FAILED;
    zr_src_close(s);
    s = NULL;
    if (status)
        fprintf(stderr, "zr %s: %s\n", CMD, err);
    zr_array a;
    if (!status && zr_src_open_zip_member(&s, path, "data.npy", err) < 0) {
        fprintf(stderr, "zr %s: %s\n", CMD, err);
        status = ZR_EXIT_FAILED;
    }
    if (!status)
        status = open_flat(s, &a);
    uint64_t *off = NULL;
    if (!status) {
        char what[1024];
        snprintf(what, sizeof what, "%s[offsets.npy]", path);
        off = record_offsets(offs, no, 0, a.shape[0], what, zr_src_name(s), &n);
        if (!off)
            status = ZR_EXIT_FAILED;
    }
    if (!status && (ns != n || d > ZRS_MAX_NDIM)) {
        zr_error(CMD, path, "shapes.npy holds %" PRIu64 " rows of %" PRIu64 " dims for %" PRIu64
                 " records (at most %d dims)", ns, d, n, ZRS_MAX_NDIM);
        status = ZR_EXIT_FAILED;
    }
    /* Each record's dims (until the first -1) must multiply to its length. */
    for (uint64_t i = 0; !status && i < n; i++) {
        uint64_t prod = 1, q = 0;
        for (; q < d && shapes[i * d + q] >= 0; q++)
            prod *= (uint64_t)shapes[i * d + q];
        int bad = prod != off[i + 1] - off[i];
        for (; q < d; q++)
            bad |= shapes[i * d + q] != -1;
        if (bad) {
            zr_error(CMD, path, "record %" PRIu64 ": shapes row does not match its %" PRIu64
                     " elements", i, off[i + 1] - off[i]);
            status = ZR_EXIT_FAILED;
        }
    }
    if (!status)
        status = ingest_flat(s, &a, off, n, shapes, d, store, o);
    zr_src_close(s);
    free(off);
    free(offs);
    free(shapes);
    return status;
}

/* ---------------------------------------------------------------- main */

int zr_cmd_ingest(int argc, char **argv)
{
    if (zr_wants_help(argc, argv)) {
        ingest_usage(stdout);
        return 0;
    }
    ingest_opts o;
    memset(&o, 0, sizeof o);
    o.sink.codec = ZRE_CODEC_ZSTD;
    o.sink.tier = ZRS_DICT_BALANCED;
    const char *pos[2] = {NULL, NULL};
    int npos = 0, opts_done = 0, tier_given = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *val = NULL;
        if (!opts_done && !strcmp(a, "--")) {
            opts_done = 1;
            continue;
        }
        if (opts_done || a[0] != '-' || a[1] == '\0') {
            if (npos >= 2)
                return zr_usage_error(CMD, "too many arguments ('%s')", a);
            pos[npos++] = a;
            continue;
        }
        static const char *const with_value[] = {"--codec", "--tier", "--dict", "--array",
                                                 "--lengths", "--offsets", "--column"};
        const char *key = a;
        char keybuf[32];
        const char *eq = strchr(a, '=');
        if (eq && eq - a < (long)sizeof keybuf) {
            memcpy(keybuf, a, (size_t)(eq - a));
            keybuf[eq - a] = '\0';
            key = keybuf;
            val = eq + 1;
        }
        int takes = 0;
        for (size_t w = 0; w < sizeof with_value / sizeof with_value[0]; w++)
            takes |= !strcmp(key, with_value[w]);
        if (takes && !val) {
            if (i + 1 >= argc)
                return zr_usage_error(CMD, "%s needs a value", key);
            val = argv[++i];
        }
        if (!strcmp(key, "--codec")) {
            if (zre_codec_parse(val, &o.sink.codec) < 0)
                return zr_usage_error(CMD, "unknown codec '%s' (raw, zstd or zstd_dict)", val);
            o.sink.codec_given = 1;
        } else if (!strcmp(key, "--tier")) {
            if (zr_parse_tier(val, &o.sink.tier) < 0)
                return zr_usage_error(CMD, "unknown tier '%s' (fast, balanced or max)", val);
            tier_given = 1;
            o.tier_name = val;
        } else if (!strcmp(key, "--dict")) {
            o.sink.dict_path = val;
        } else if (!strcmp(key, "--array")) {
            o.array = val;
        } else if (!strcmp(key, "--column")) {
            o.column = val;
        } else if (!strcmp(key, "--lengths")) {
            o.lengths = val;
        } else if (!strcmp(key, "--offsets")) {
            o.offsets = val;
        } else if (!strcmp(a, "--append")) {
            o.sink.append = 1;
        } else if (!strcmp(a, "--ragged")) {
            o.ragged = 1;
        } else if (!strcmp(a, "--json")) {
            o.json = 1;
        } else if (!strcmp(a, "--quiet") || !strcmp(a, "-q")) {
            o.quiet = 1;
        } else {
            return zr_usage_error(CMD, "unknown option '%s'", a);
        }
    }
    if (npos != 2)
        return zr_usage_error(CMD, "expected SRC and STORE, got %d argument%s", npos,
                              npos == 1 ? "" : "s");
    if ((tier_given || o.sink.dict_path) && o.sink.codec != ZRE_CODEC_ZSTD_DICT) {
        if (o.sink.codec_given)
            return zr_usage_error(CMD, "--tier and --dict go with --codec zstd_dict");
        o.sink.codec = ZRE_CODEC_ZSTD_DICT; /* a dictionary option implies the codec */
    }
    if (tier_given && o.sink.dict_path)
        return zr_usage_error(CMD, "give --tier or --dict, not both");
    if (o.lengths && o.offsets)
        return zr_usage_error(CMD, "give --lengths or --offsets, not both");
    const char *src = pos[0], *store = pos[1];

    /* From here on Ctrl-C stops after the slice in flight. */
    zr_interrupt_install();
    if (o.column && (o.lengths || o.offsets || zrp_is_dir(src)))
        return zr_usage_error(CMD, "--column goes with a Parquet or Arrow file");
    if (o.lengths || o.offsets)
        return ingest_tokens(src, store, &o);
    if (zrp_is_dir(src))
        return ingest_folder(src, store, &o);
    if (!zrp_path_exists(src)) {
        zr_error(CMD, src, "cannot open: no such file or directory");
        return ZR_EXIT_OPEN;
    }
    unsigned char head[8];
    size_t got = 0;
    char err[ZR_IO_ERR];
    if (zr_sniff(src, head, sizeof head, &got, err) < 0) {
        fprintf(stderr, "zr %s: %s\n", CMD, err);
        return ZR_EXIT_OPEN;
    }
    const char *arrow = zr_arrow_kind(head, got);
    if (arrow) {
        zr_arrow_args aa = {o.column, o.sink.codec_given ? zre_codec_name(o.sink.codec) : NULL,
                            o.tier_name, o.sink.dict_path, o.sink.append, o.ragged, o.json,
                            o.quiet};
        return zr_ingest_arrow(src, store, arrow, &aa);
    }
    if (o.column)
        return zr_usage_error(CMD, "--column goes with a Parquet or Arrow file");
    if (got >= 6 && !memcmp(head, "\x93NUMPY", 6))
        return ingest_array_file(src, store, &o, 0);
    if (got >= 4 && !memcmp(head, "PK\x03\x04", 4))
        return ingest_npz(src, store, &o);
    if (got >= 4 && head[0] == 0 && head[1] == 0)
        return ingest_array_file(src, store, &o, 1);
    zr_error(CMD, src, "not a .npy, .npz, IDX, Parquet or Arrow file, nor a folder (it starts with %02x %02x %02x "
             "%02x)", got > 0 ? head[0] : 0, got > 1 ? head[1] : 0, got > 2 ? head[2] : 0,
             got > 3 ? head[3] : 0);
    return ZR_EXIT_FAILED;
}
