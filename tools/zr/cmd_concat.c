/*
 * cmd_concat.c - "zr info --concat" / "zr verify --concat": after the
 * per-store report, open all the stores given as one concatenated dataset
 * (zrs_concat, read-only) and report it, or say which shards disagree.
 */
#include <inttypes.h>
#include <string.h>

#include "zr_cli.h"

int zr_concat_report(const char *name, char *const *paths, int n)
{
    zrs_concat *c = NULL;
    int rc = zrs_concat_open(&c, (const char *const *)paths, (size_t)n, ZRE_OPEN_READONLY);
    if (rc < 0) {
        fprintf(stderr, "zr %s: the %d stores are not one dataset: %s\n", name, n,
                zr_last_error());
        return ZR_EXIT_FAILED;
    }
    char shape[512] = "per record (ragged)";
    if (zrs_concat_kind(c) == ZRS_DENSE)
        zr_format_shape(zrs_concat_item_shape(c), zrs_concat_item_ndim(c), shape, sizeof shape);
    printf("%sdataset:   %zu shards as one (%s %s, shape %s), %" PRIu64 " records\n",
           !strcmp(name, "info") ? "\n" : "", zrs_concat_count(c),
           zrs_concat_kind(c) == ZRS_DENSE ? "dense" : "ragged",
           zrs_dtype_str(zrs_concat_dtype(c)), shape, zrs_concat_length(c));
    zrs_concat_close(c);
    return 0;
}
