/*
 * zr info STORE... - describe stores: kind, dtype, shape, codec, records,
 * sizes. Opens each store through libzrstore like any client.
 *
 * Exit status (the highest that applies over all stores):
 *   0  every store described
 *   1  a damaged record table (the size scan failed) or another read failure
 *   2  usage error
 *   3  a store could not be opened (busy, or not a store / malformed)
 */
#include <inttypes.h>
#include <stdio.h>

#include "zr_cli.h"

#define EXIT_DAMAGED 1
#define EXIT_NOT_OPENED 3

static void info_usage(FILE *out)
{
    fprintf(out,
            "usage: zr info [--concat] [--] STORE...\n"
            "--concat: also open the STOREs (e.g. shard-*) as one dataset and check they\n"
            "share one identity (exit 1 naming the shards that differ).\n"
            "Describe each store: kind, dtype, shape, codec, records, logical and stored sizes.\n"
            "Exit status: 0 ok, 1 damaged record table (or a read failure), 2 usage error,\n"
            "3 a store could not be opened (busy, or not a store); the highest that applies\n"
            "over all stores.\n");
}

/* Human-readable byte count: "47.0 MiB". */
static const char *human_bytes(uint64_t n, char *buf, size_t cap)
{
    static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
    double v = (double)n;
    size_t u = 0;
    while (v >= 1024.0 && u + 1 < sizeof units / sizeof units[0]) {
        v /= 1024.0;
        u++;
    }
    if (u == 0)
        snprintf(buf, cap, "%" PRIu64 " B", n);
    else
        snprintf(buf, cap, "%.1f %s", v, units[u]);
    return buf;
}

/* numpy's spelling of a shape: "()", "(5,)", "(28, 28)". */
static void format_shape(const uint64_t *shape, size_t ndim, char *buf, size_t cap)
{
    size_t used = (size_t)snprintf(buf, cap, "(");
    for (size_t i = 0; i < ndim && used < cap; i++)
        used += (size_t)snprintf(buf + used, cap - used, "%s%" PRIu64, i ? ", " : "", shape[i]);
    if (used < cap)
        snprintf(buf + used, cap - used, ndim == 1 ? ",)" : ")");
}

static int info_one(const char *path)
{
    zrs_store *s = NULL;
    /* Read-only: works beside readers and a live writer; it describes the
     * records committed when it opened. */
    int rc = zrs_open_ex(&s, path, ZRE_OPEN_READONLY);
    if (rc < 0) {
        fprintf(stderr, "zr info: %s: cannot open: %s\n", path, zr_last_error());
        return EXIT_NOT_OPENED;
    }
    zre_stats st;
    rc = zre_get_stats(zrs_engine(s), &st);
    if (rc < 0) {
        fprintf(stderr, "zr info: %s: %s\n", path, zr_last_error());
        zrs_close(s);
        return EXIT_DAMAGED;
    }

    char shape[512], a[32], b[32], c[32];
    const int dense = zrs_get_kind(s) == ZRS_DENSE;
    if (dense)
        format_shape(zrs_item_shape(s), zrs_item_ndim(s), shape, sizeof shape);
    else
        snprintf(shape, sizeof shape, "per record (ragged)");

    printf("store:     %s\n", zrs_path(s));
    printf("kind:      %s\n", dense ? "dense" : "ragged");
    const size_t itemsize = zrs_dtype_itemsize(zrs_get_dtype(s));
    printf("dtype:     %s (%zu byte%s per element)\n", zrs_dtype_str(zrs_get_dtype(s)), itemsize,
           itemsize == 1 ? "" : "s");
    printf("shape:     %s\n", shape);
    printf("codec:     %s\n", zre_codec_name(zrs_get_codec(s)));
    printf("records:   %" PRIu64 " (committed when read; a writer may append more)\n",
           st.records);
    printf("logical:   %s (%" PRIu64 " bytes%s)\n", human_bytes(st.logical_bytes, a, sizeof a),
           st.logical_bytes, dense ? "" : ", shape prefixes included");
    printf("stored:    %s in records, %s in chunk files, %s reclaimable\n",
           human_bytes(st.live_bytes, a, sizeof a), human_bytes(st.chunk_bytes, b, sizeof b),
           human_bytes(st.reclaimable, c, sizeof c));
    if (st.live_bytes > 0)
        printf("ratio:     %.2fx (logical / stored)\n",
               (double)st.logical_bytes / (double)st.live_bytes);

    rc = zrs_close(s);
    if (rc < 0) {
        fprintf(stderr, "zr info: closing %s: %s\n", path, zr_last_error());
        return 1;
    }
    return 0;
}

int zr_cmd_info(int argc, char **argv)
{
    return zr_run_per_store(argc, argv, "info", info_usage, info_one, 1);
}
