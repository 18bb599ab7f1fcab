/*
 * zr verify STORE... - read and check every record of each store: the
 * record table against the chunk files and the write frontier (bounds,
 * extents), every zstd frame (content checksum, sizes) and, for ragged
 * stores, every record's shape prefix. Prints one line per bad record and
 * a summary per store; exits 1 if any store failed to open or holds a bad
 * record. Opens read-only (shared lock), so it runs beside other readers
 * but not beside a writer.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "zr_cli.h"

/* Stop listing after this many bad records per store (still counted). */
#define MAX_LISTED 100

static int verify_one(const char *path)
{
    zrs_store *s = NULL;
    if (zrs_open_ex(&s, path, ZRE_OPEN_READONLY) != ZR_OK) {
        fprintf(stderr, "zr verify: %s: cannot open: %s\n", path, zr_last_error());
        return 1;
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
                    return 1;
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
    zrs_close(s);
    printf("%s: %" PRIu64 " records checked, %" PRIu64 " bad%s\n", path, n, bad,
           bad ? "" : " (ok)");
    return bad ? 1 : 0;
}

int zr_cmd_verify(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: zr verify STORE...\n");
        return 2;
    }
    int rc = 0;
    for (int i = 1; i < argc; i++)
        if (verify_one(argv[i]) != 0)
            rc = 1;
    return rc;
}
