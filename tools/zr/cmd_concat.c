/*
 * cmd_concat.c - "zr info --concat" / "zr verify --concat": after the
 * per-store report, open all the stores given as one concatenated dataset
 * (zrs_concat, read-only) and report it, or say which shards disagree.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "zr_cli.h"

int zr_concat_report(const char *name, int argc, char **argv)
{
    const char **paths = malloc((size_t)(argc > 0 ? argc : 1) * sizeof *paths);
    if (paths == NULL) {
        fprintf(stderr, "zr %s: out of memory\n", name);
        return 1;
    }
    size_t n = 0;
    int opts_done = 0;
    for (int i = 1; i < argc; i++) {
        if (!opts_done && !strcmp(argv[i], "--")) {
            opts_done = 1;
            continue;
        }
        if (!opts_done && !strcmp(argv[i], "--concat"))
            continue;
        paths[n++] = argv[i];
    }
    zrs_concat *c = NULL;
    int rc = zrs_concat_open(&c, paths, n, ZRE_OPEN_READONLY);
    free(paths);
    if (rc < 0) {
        fprintf(stderr, "zr %s: the %zu stores are not one dataset: %s\n", name, n,
                zr_last_error());
        return 1;
    }
    char shape[512] = "per record (ragged)";
    if (zrs_concat_kind(c) == ZRS_DENSE) {
        const uint64_t *sh = zrs_concat_item_shape(c);
        size_t nd = zrs_concat_item_ndim(c), used = (size_t)snprintf(shape, sizeof shape, "(");
        for (size_t d = 0; d < nd && used < sizeof shape; d++)
            used += (size_t)snprintf(shape + used, sizeof shape - used, "%s%" PRIu64, d ? ", " : "",
                                     sh[d]);
        if (used < sizeof shape)
            snprintf(shape + used, sizeof shape - used, nd == 1 ? ",)" : ")");
    }
    printf("%sdataset:   %zu shards as one (%s %s, shape %s), %" PRIu64 " records\n",
           !strcmp(name, "info") ? "\n" : "", zrs_concat_count(c),
           zrs_concat_kind(c) == ZRS_DENSE ? "dense" : "ragged",
           zrs_dtype_str(zrs_concat_dtype(c)), shape, zrs_concat_length(c));
    zrs_concat_close(c);
    return 0;
}
