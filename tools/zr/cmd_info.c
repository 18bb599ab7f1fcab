/*
 * zr info [--json] STORE... - describe stores: kind, dtype, shape, codec,
 * records, chunk files, logical and stored sizes, reclaimable bytes and
 * whether a journal is pending. Opens each store read-only through
 * libzrstore like any client.
 *
 * "stored" is every byte of the store directory's files: chunk files up to
 * their length (live records plus reclaimable bytes), the record table
 * (16 bytes a record), dict.zr, meta.zr and store.zr; so the ratio
 * logical / stored matches what `du --apparent-size` sees.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "zr_cli.h"
#include "zr_platform.h"

static void info_usage(FILE *out)
{
    fprintf(out,
            "usage: zr info [--json] [--concat] [--] STORE...\n"
            "Describe each store: kind, dtype, shape, codec, records, chunk files,\n"
            "logical and stored sizes (record table and dictionary included), the\n"
            "compression ratio, reclaimable bytes and whether a journal is pending.\n"
            "\n"
            "Options:\n"
            "  --json      one JSON object per store, one per line\n"
            "  --concat    also open the STOREs (e.g. shard-*) as one dataset and check\n"
            "              they share one identity (exit 1 naming the shards that differ)\n"
            "  -h, --help  this text\n"
            "\n"
            "Example:\n"
            "  zr info /data/fashion-train\n"
            "  zr info --json /data/fashion-train | python3 -m json.tool\n"
            "\n%s"
            "With several stores the status is the highest that applies.\n",
            zr_exit_table);
}

/* Byte counts of the store directory's files, by role. */
typedef struct dir_sizes {
    uint64_t chunk_files, chunk_bytes, table_bytes, dict_bytes, meta_bytes, other_bytes;
    int journal;
} dir_sizes;

static int ends_with(const char *s, const char *suffix)
{
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && !strcmp(s + a - b, suffix);
}

static int scan_dir(const char *path, dir_sizes *d)
{
    memset(d, 0, sizeof *d);
    char **names;
    size_t n;
    int rc = zrp_list_dir(path, &names, &n);
    if (rc < 0)
        return rc;
    size_t cap = strlen(path) + 300;
    char *full = malloc(cap);
    for (size_t i = 0; full && i < n; i++) {
        if (strlen(names[i]) > 256)
            continue;
        snprintf(full, cap, "%s/%s", path, names[i]);
        if (!zrp_is_regular_file(full))
            continue;
        zrp_file f;
        uint64_t size = 0;
        if (zrp_open(&f, full, ZRP_READ) == 0) {
            zrp_file_size(f, &size);
            zrp_close(&f);
        }
        if (ends_with(names[i], ".chunk")) {
            d->chunk_files++;
            d->chunk_bytes += size;
        } else if (ends_with(names[i], ".loc")) {
            d->table_bytes += size;
        } else if (!strcmp(names[i], "dict.zr")) {
            d->dict_bytes += size;
        } else if (!strcmp(names[i], "meta.zr") || !strcmp(names[i], "store.zr")) {
            d->meta_bytes += size;
        } else if (!strcmp(names[i], "journal.zr")) {
            d->journal = 1;
            d->other_bytes += size;
        }
    }
    free(full);
    zrp_free_names(names, n);
    return 0;
}

static int info_one(const char *path, const zr_opts *o)
{
    /* Before the open: a read-only open replays a pending journal first. */
    dir_sizes d;
    int journal_before = zrp_is_dir(path) && scan_dir(path, &d) == 0 && d.journal;

    zrs_store *s = NULL;
    /* Read-only: works beside readers and a live writer; it describes the
     * records committed when it opened. */
    int rc = zrs_open_ex(&s, path, ZRE_OPEN_READONLY);
    if (rc < 0)
        return zr_fail_open("info", path, rc);
    zre_stats st;
    rc = zre_get_stats(zrs_engine(s), &st);
    if (rc < 0) {
        int ex = zr_fail("info", path, "cannot read the record table", rc);
        zrs_close(s);
        return ex > ZR_EXIT_FAILED ? ex : ZR_EXIT_FAILED;
    }
    if (scan_dir(path, &d) < 0)
        memset(&d, 0, sizeof d);
    if (zre_is_remote(path)) {
        /* A store at a URL: the sizes of its objects, as the engine saw them. */
        zre_file_sizes fs;
        void *idb = NULL;
        size_t idlen = 0;
        if (zre_get_file_sizes(zrs_engine(s), &fs) == 0) {
            d.chunk_files = fs.chunk_files;
            d.chunk_bytes = fs.chunk_bytes;
            d.table_bytes = fs.table_bytes;
            d.dict_bytes = fs.dict_bytes;
        }
        if (zre_read_side_file(zrs_engine(s), "store.zr", &idb, &idlen, 1 << 16) == 0)
            d.meta_bytes = ZRE_META_SIZE + idlen;
        zre_free(idb);
    }

    const int dense = zrs_get_kind(s) == ZRS_DENSE;
    const zrs_dtype dt = zrs_get_dtype(s);
    const size_t itemsize = zrs_dtype_itemsize(dt);
    const uint64_t stored = d.chunk_bytes + d.table_bytes + d.dict_bytes + d.meta_bytes;
    const double ratio = stored ? (double)st.logical_bytes / (double)stored : 0.0;
    char shape[512], a[32], b[32], c[32], e[32];
    if (dense)
        zr_format_shape(zrs_item_shape(s), zrs_item_ndim(s), shape, sizeof shape);

    if (o->json) {
        json_object *j = json_object_new_object();
        zr_json_str(j, "store", path);
        zr_json_str(j, "kind", dense ? "dense" : "ragged");
        zr_json_str(j, "dtype", zrs_dtype_str(dt));
        zr_json_u64(j, "itemsize", itemsize);
        json_object *shp = NULL;
        if (dense) {
            shp = json_object_new_array();
            for (size_t i = 0; i < zrs_item_ndim(s); i++)
                json_object_array_add(shp, json_object_new_uint64(zrs_item_shape(s)[i]));
        }
        json_object_object_add(j, "item_shape", shp);
        zr_json_str(j, "codec", zre_codec_name(zrs_get_codec(s)));
        zr_json_u64(j, "records", st.records);
        zr_json_u64(j, "chunk_files", d.chunk_files);
        zr_json_u64(j, "logical_bytes", st.logical_bytes);
        zr_json_u64(j, "record_bytes", st.live_bytes);
        zr_json_u64(j, "chunk_bytes", d.chunk_bytes);
        zr_json_u64(j, "table_bytes", d.table_bytes);
        zr_json_u64(j, "dict_bytes", d.dict_bytes);
        zr_json_u64(j, "meta_bytes", d.meta_bytes);
        zr_json_u64(j, "stored_bytes", stored);
        zr_json_u64(j, "reclaimable_bytes", st.reclaimable);
        json_object_object_add(j, "ratio", json_object_new_double(ratio));
        json_object_object_add(j, "journal_pending", json_object_new_boolean(journal_before));
        zr_json_print(j);
    } else {
        printf("store:       %s\n", zrs_path(s));
        printf("kind:        %s\n", dense ? "dense" : "ragged");
        printf("dtype:       %s (%zu byte%s per element)\n", zrs_dtype_str(dt), itemsize,
               itemsize == 1 ? "" : "s");
        printf("shape:       %s\n", dense ? shape : "per record (ragged)");
        printf("codec:       %s\n", zre_codec_name(zrs_get_codec(s)));
        printf("records:     %" PRIu64 " (committed when read; a writer may append more)\n",
               st.records);
        printf("chunks:      %" PRIu64 " file%s\n", d.chunk_files, d.chunk_files == 1 ? "" : "s");
        printf("logical:     %s (%" PRIu64 " bytes%s)\n",
               zr_human_bytes(st.logical_bytes, a, sizeof a), st.logical_bytes,
               dense ? "" : ", shape prefixes included");
        printf("stored:      %s (%" PRIu64 " bytes: %s of records, %s record table, %s "
               "dictionary, %" PRIu64 " B metadata)\n",
               zr_human_bytes(stored, a, sizeof a), stored,
               zr_human_bytes(st.live_bytes, b, sizeof b),
               zr_human_bytes(d.table_bytes, c, sizeof c),
               zr_human_bytes(d.dict_bytes, e, sizeof e), d.meta_bytes);
        if (stored > 0)
            printf("ratio:       %.2fx (logical / stored)\n", ratio);
        printf("reclaimable: %s (%" PRIu64 " bytes; zr compact frees them)\n",
               zr_human_bytes(st.reclaimable, a, sizeof a), st.reclaimable);
        printf("journal:     %s\n",
               d.journal ? "pending (a delete or compact was interrupted; the next writable "
                           "open replays it)"
               : journal_before ? "was pending (an interrupted delete or compact); replayed "
                                  "by this open"
                                : "none");
    }

    rc = zrs_close(s);
    if (rc < 0)
        return zr_fail("info", path, "closing", rc);
    return 0;
}

int zr_cmd_info(int argc, char **argv)
{
    return zr_run_per_store(argc, argv, "info", info_usage, info_one, 1);
}
