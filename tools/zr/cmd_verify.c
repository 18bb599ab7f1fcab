/*
 * zr verify STORE... - read and check every record of each store: the
 * record table against the chunk files and the write frontier (bounds,
 * extents), every zstd frame (content checksum, sizes) and, for ragged
 * stores, every record's shape prefix. A raw store's payloads carry no
 * checksum, so there only the table and extents (and ragged prefixes) are
 * checked, and the summary says so. Prints one line per bad record and a
 * summary per store. Opens read-only (shared lock), so it runs beside
 * other readers but not beside a writer.
 *
 * Exit status (the highest that applies over all stores):
 *   0  every store opened and every record checked out
 *   1  damaged records found
 *   2  usage error
 *   3  a store could not be opened (busy, or not a store / malformed)
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "zr_cli.h"

/* Stop listing after this many bad records per store (still counted). */
#define MAX_LISTED 100

#define EXIT_DAMAGED 1
#define EXIT_NOT_OPENED 3

static void verify_usage(FILE *out)
{
    fprintf(out,
            "usage: zr verify [--concat] [--] STORE...\n"
            "--concat: also open the STOREs (e.g. shard-*) as one dataset and check they\n"
            "share one identity (exit 1 naming the shards that differ).\n"
            "Check every record of each store: the record table against the chunk files,\n"
            "every zstd frame's checksum and sizes, and ragged shape prefixes (raw-codec\n"
            "payloads carry no checksum: there only the table and extents are checked).\n"
            "Exit status: 0 all records ok, 1 damaged records found, 2 usage error,\n"
            "3 a store could not be opened (busy, or not a store); the highest that\n"
            "applies over all stores.\n");
}

static int verify_one(const char *path)
{
    zrs_store *s = NULL;
    if (zrs_open_ex(&s, path, ZRE_OPEN_READONLY) != ZR_OK) {
        fprintf(stderr, "zr verify: %s: cannot open: %s\n", path, zr_last_error());
        return EXIT_NOT_OPENED;
    }
    zre_engine *e = zrs_engine(s);
    uint64_t n = zrs_length(s), bad = 0;
    int ragged = zrs_get_kind(s) == ZRS_RAGGED;
    unsigned char *buf = NULL;
    size_t cap = 0;
    for (uint64_t i = 0; i < n; i++) {
        int rc = zre_check_record(e, i);
        if (rc == ZR_OK && ragged) {
            /* The shape prefix is the typed layer's: gather validates it. */
            int64_t idx = (int64_t)i;
            uint64_t size = 0;
            rc = zrs_ragged_sizes(s, &idx, 1, &size);
            if (rc == ZR_OK && size > cap) {
                unsigned char *nb = realloc(buf, (size_t)size);
                if (nb == NULL) {
                    fprintf(stderr, "zr verify: %s: out of memory for record %" PRIu64 "\n", path, i);
                    free(buf);
                    zrs_close(s);
                    return EXIT_DAMAGED;
                }
                buf = nb;
                cap = (size_t)size;
            }
            uint64_t bounds[2] = {0, size};
            if (rc == ZR_OK)
                rc = zrs_gather_ragged(s, &idx, 1, buf, cap, bounds);
        }
        if (rc != ZR_OK) {
            if (bad < MAX_LISTED)
                printf("%s: bad record %" PRIu64 ": %s\n", path, i, zr_last_error());
            else if (bad == MAX_LISTED)
                printf("%s: (more bad records not listed)\n", path);
            bad++;
        }
    }
    free(buf);
    const int raw = zrs_get_codec(s) == ZRE_CODEC_RAW;
    zrs_close(s);
    printf("%s: %" PRIu64 " records checked, %" PRIu64 " bad%s; committed length %" PRIu64
           " when opened\n", path, n, bad, bad ? "" : " (ok)", n);
    if (raw)
        printf("%s: note: raw codec: payloads carry no checksum; only table and extents were "
               "checked\n", path);
    return bad ? EXIT_DAMAGED : 0;
}

int zr_cmd_verify(int argc, char **argv)
{
    return zr_run_per_store(argc, argv, "verify", verify_usage, verify_one, 0);
}
