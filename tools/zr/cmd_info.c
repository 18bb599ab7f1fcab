/*
 * zr info [--json] STORE... - describe stores: kind, dtype, shape, codec,
 * records, chunk files, logical and stored sizes, reclaimable bytes and
 * whether a journal is pending. Opens each store read-only through
 * libzrstore like any client.
 *
 * "stored" is every byte of the store directory's files, as the engine
 * reports them (zre_get_disk_usage): chunk files up to their length (live
 * records plus reclaimable bytes), the record table (16 bytes a record),
 * dict.zr, meta.zr and store.zr; so the ratio logical / stored matches
 * what `du --apparent-size` sees. A store whose codec makes its records
 * larger than their raw bytes (small records under zstd) is named so.
 */
#include <inttypes.h>
#include <stdio.h>

#include "zr_cli.h"

static const zr_command INFO = {
    .name = "info",
    .synopsis = "zr info [OPTIONS] [--] STORE...",
    .args = "STORE...",
    .about = "Describe each store: kind, dtype, shape, codec, records, chunk files,\n"
             "logical and stored sizes (record table and dictionary included), the\n"
             "compression ratio, reclaimable bytes and whether a journal is pending.\n"
             "When the codec makes the records larger than their raw bytes, it says so.",
    .example = "zr info /data/fashion-train\n"
               "zr info --json /data/fashion-train | python3 -m json.tool",
    .notes = "With several stores the status is the highest that applies.",
};

/* What info reports of one open store. */
typedef struct info {
    zrs_store *s;
    zre_stats st;
    zre_disk_usage du;
    uint64_t stored;  /* every byte of the store's files (journal excepted) */
    double ratio;     /* logical / stored */
    int larger;       /* the codec makes the records larger than raw */
} info;

static void info_json(const char *path, const info *n)
{
    zrs_store *s = n->s;
    const int dense = zrs_get_kind(s) == ZRS_DENSE;
    json_object *j = json_object_new_object();
    zr_json_str(j, "store", path);
    zr_json_str(j, "kind", dense ? "dense" : "ragged");
    zr_json_str(j, "dtype", zrs_dtype_str(zrs_get_dtype(s)));
    zr_json_u64(j, "itemsize", zrs_dtype_itemsize(zrs_get_dtype(s)));
    json_object *shp = NULL;
    if (dense) {
        shp = json_object_new_array();
        for (size_t i = 0; i < zrs_item_ndim(s); i++)
            json_object_array_add(shp, json_object_new_uint64(zrs_item_shape(s)[i]));
    }
    json_object_object_add(j, "item_shape", shp);
    zr_json_str(j, "codec", zre_codec_name(zrs_get_codec(s)));
    zr_json_u64(j, "records", n->st.records);
    zr_json_u64(j, "chunk_files", n->du.chunk_files);
    zr_json_u64(j, "logical_bytes", n->st.logical_bytes);
    zr_json_u64(j, "record_bytes", n->st.live_bytes);
    zr_json_u64(j, "chunk_bytes", n->du.chunk_bytes);
    zr_json_u64(j, "table_bytes", n->du.table_bytes);
    zr_json_u64(j, "dict_bytes", n->du.dict_bytes);
    zr_json_u64(j, "meta_bytes", n->du.meta_bytes);
    zr_json_u64(j, "stored_bytes", n->stored);
    zr_json_u64(j, "reclaimable_bytes", n->st.reclaimable);
    json_object_object_add(j, "ratio", json_object_new_double(n->ratio));
    json_object_object_add(j, "larger_than_raw", json_object_new_boolean(n->larger));
    json_object_object_add(j, "journal_pending", json_object_new_boolean(n->du.journal_pending));
    zr_json_print(j);
}

static void info_text(const info *n)
{
    zrs_store *s = n->s;
    const int dense = zrs_get_kind(s) == ZRS_DENSE;
    const zrs_dtype dt = zrs_get_dtype(s);
    const size_t itemsize = zrs_dtype_itemsize(dt);
    char shape[512], a[32], b[32], c[32], e[32];
    if (dense)
        zr_format_shape(zrs_item_shape(s), zrs_item_ndim(s), shape, sizeof shape);
    printf("store:       %s\n", zrs_path(s));
    printf("kind:        %s\n", dense ? "dense" : "ragged");
    printf("dtype:       %s (%zu byte%s per element)\n", zrs_dtype_str(dt), itemsize,
           itemsize == 1 ? "" : "s");
    printf("shape:       %s\n", dense ? shape : "per record (ragged)");
    printf("codec:       %s\n", zre_codec_name(zrs_get_codec(s)));
    printf("records:     %" PRIu64 " (committed when read; a writer may append more)\n",
           n->st.records);
    printf("chunks:      %" PRIu64 " file%s\n", n->du.chunk_files, n->du.chunk_files == 1 ? "" : "s");
    printf("logical:     %s (%" PRIu64 " bytes%s)\n", zr_human_bytes(n->st.logical_bytes, a, sizeof a),
           n->st.logical_bytes, dense ? "" : ", shape prefixes included");
    printf("stored:      %s (%" PRIu64 " bytes: %s of records, %s record table, %s "
           "dictionary, %" PRIu64 " B metadata)\n",
           zr_human_bytes(n->stored, a, sizeof a), n->stored,
           zr_human_bytes(n->st.live_bytes, b, sizeof b),
           zr_human_bytes(n->du.table_bytes, c, sizeof c),
           zr_human_bytes(n->du.dict_bytes, e, sizeof e), n->du.meta_bytes);
    if (n->stored > 0)
        printf("ratio:       %.2fx (logical / stored)\n", n->ratio);
    if (n->larger)
        printf("note:        larger than raw: the %s records take %s (dictionary included),\n"
               "             their raw bytes %s; codec raw would store them in less\n"
               "             (zr recode %s NEW --codec raw)\n", zre_codec_name(zrs_get_codec(s)),
               zr_human_bytes(n->st.live_bytes + n->du.dict_bytes, a, sizeof a),
               zr_human_bytes(n->st.logical_bytes, b, sizeof b), zrs_path(s));
    printf("reclaimable: %s (%" PRIu64 " bytes; zr compact frees them)\n",
           zr_human_bytes(n->st.reclaimable, a, sizeof a), n->st.reclaimable);
    printf("journal:     %s\n",
           n->du.journal_pending ? "pending (a delete or compact was interrupted; the next "
                                   "writable open replays it)" : "none");
}

static int info_one(const char *path, const zr_opts *o)
{
    info n = {0};
    /* Read-only: works beside readers and a live writer; it describes the
     * records committed when it opened. */
    int rc = zrs_open_ex(&n.s, path, ZRE_OPEN_READONLY);
    if (rc < 0)
        return zr_fail_open("info", path, rc);
    rc = zre_get_stats(zrs_engine(n.s), &n.st);
    const char *what = "cannot read the record table";
    if (rc == 0) {
        rc = zre_get_disk_usage(zrs_engine(n.s), &n.du);
        what = "cannot measure the store's files";
    }
    if (rc < 0) {
        int ex = zr_fail("info", path, what, rc);
        zrs_close(n.s);
        return ex > ZR_EXIT_FAILED ? ex : ZR_EXIT_FAILED;
    }
    n.stored = n.du.chunk_bytes + n.du.table_bytes + n.du.dict_bytes + n.du.meta_bytes;
    n.ratio = n.stored ? (double)n.st.logical_bytes / (double)n.stored : 0.0;
    n.larger = zrs_get_codec(n.s) != ZRE_CODEC_RAW &&
               n.st.live_bytes + n.du.dict_bytes > n.st.logical_bytes;
    if (o->json)
        info_json(path, &n);
    else
        info_text(&n);
    rc = zrs_close(n.s);
    if (rc < 0)
        return zr_fail("info", path, "closing", rc);
    return 0;
}

int zr_cmd_info(int argc, char **argv)
{
    static const zr_store_loop loop = {
        .cmd = &INFO,
        .json_help = "one JSON object per store, one per line",
        .concat = 1,
        .blank_between = 1,
        .one = info_one,
    };
    return zr_run_per_store(&loop, argc, argv);
}
