/*
 * zr verify [--json] [--quiet] STORE... - read and check every record of each store: the
 * record table against the chunk files and the write frontier (bounds,
 * extents), every zstd frame (content checksum, sizes) and, for ragged
 * stores, every record's shape prefix. A raw store's payloads carry no
 * checksum, so there only the table and extents (and ragged prefixes) are
 * checked, and the summary says so. Prints one line per bad record and a
 * summary per store. Opens read-only (shared lock), so it runs beside
 * other readers but not beside a writer.
 *
 * Exit status: the table in zr_cli.h (1 damaged records found).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "zr_cli.h"

/* Stop listing after this many bad records per store (still counted). */
#define MAX_LISTED 100

#define STR_(x) #x
#define STR(x) STR_(x)

static const zr_command VERIFY = {
    .name = "verify",
    .synopsis = "zr verify [OPTIONS] [--] STORE...",
    .args = "STORE...",
    .about = "Check every record of each store: the record table against the chunk files,\n"
             "every zstd frame's checksum and sizes, and ragged shape prefixes (raw-codec\n"
             "payloads carry no checksum: there only the table and extents are checked).\n"
             "Prints one line per bad record (the first " STR(MAX_LISTED) ") and a summary "
             "per store.",
    .example = "zr verify /data/fashion-train && echo intact",
    .notes = "With several stores the status is the highest that applies.",
};

static int verify_one(const char *path, const zr_opts *o)
{
    zrs_store *s = NULL;
    int rc = zrs_open_ex(&s, path, ZRE_OPEN_READONLY);
    if (rc != ZR_OK)
        return zr_fail_open("verify", path, rc);
    zre_engine *e = zrs_engine(s);
    uint64_t n = zrs_length(s), bad = 0, checked = 0;
    int ragged = zrs_get_kind(s) == ZRS_RAGGED;
    unsigned char *buf = NULL;
    size_t cap = 0;
    json_object *bad_list = o->json ? json_object_new_array() : NULL;
    zr_progress pr;
    zr_progress_start(&pr, path, n, "records", o->quiet);
    zr_interrupt_install();
    for (uint64_t i = 0; i < n && !zr_interrupted(); i++, checked++) {
        rc = zre_check_record(e, i);
        if (rc == ZR_OK && ragged) {
            /* The shape prefix is the typed layer's: gather validates it. */
            int64_t idx = (int64_t)i;
            uint64_t size = 0;
            rc = zrs_ragged_sizes(s, &idx, 1, &size);
            if (rc == ZR_OK && size > cap) {
                unsigned char *nb = realloc(buf, (size_t)size);
                if (nb == NULL) {
                    zr_progress_end(&pr);
                    zr_error("verify", path, "out of memory for record %" PRIu64, i);
                    free(buf);
                    json_object_put(bad_list);
                    zrs_close(s);
                    return ZR_EXIT_FAILED;
                }
                buf = nb;
                cap = (size_t)size;
            }
            uint64_t bounds[2] = {0, size};
            if (rc == ZR_OK)
                rc = zrs_gather_ragged(s, &idx, 1, buf, cap, bounds);
        }
        if (rc != ZR_OK) {
            if (bad < MAX_LISTED) {
                if (o->json) {
                    json_object *b = json_object_new_object();
                    zr_json_u64(b, "index", i);
                    zr_json_str(b, "error", zr_last_error());
                    json_object_array_add(bad_list, b);
                } else {
                    zr_progress_end(&pr);
                    printf("%s: bad record %" PRIu64 ": %s\n", path, i, zr_last_error());
                }
            } else if (bad == MAX_LISTED && !o->json) {
                printf("%s: (more bad records not listed)\n", path);
            }
            bad++;
        }
        if ((i & 63) == 0)
            zr_progress_update(&pr, i, 0);
    }
    zr_progress_end(&pr);
    free(buf);
    const int raw = zrs_get_codec(s) == ZRE_CODEC_RAW;
    zrs_close(s);
    if (zr_interrupted()) {
        json_object_put(bad_list);
        char what[128];
        snprintf(what, sizeof what, "%" PRIu64 " of %" PRIu64 " records checked, %" PRIu64
                 " bad so far", checked, n, bad);
        return zr_interrupt_exit("verify", path, what);
    }
    if (o->json) {
        json_object *j = json_object_new_object();
        zr_json_str(j, "store", path);
        zr_json_u64(j, "records", n);
        zr_json_u64(j, "bad", bad);
        json_object_object_add(j, "bad_records", bad_list);
        json_object_object_add(j, "checksummed", json_object_new_boolean(!raw));
        json_object_object_add(j, "ok", json_object_new_boolean(bad == 0));
        zr_json_print(j);
    } else {
        printf("%s: %" PRIu64 " records checked, %" PRIu64 " bad%s; committed length %" PRIu64
               " when opened\n", path, n, bad, bad ? "" : " (ok)", n);
        if (raw)
            printf("%s: note: raw codec: payloads carry no checksum; only table and extents "
                   "were checked\n", path);
    }
    return bad ? ZR_EXIT_FAILED : 0;
}

int zr_cmd_verify(int argc, char **argv)
{
    static const zr_store_loop loop = {
        .cmd = &VERIFY,
        .json_help = "one JSON object per store: records, bad, bad_records, checksummed",
        .concat = 1,
        .progress = 1,
        .one = verify_one,
    };
    return zr_run_per_store(&loop, argc, argv);
}
