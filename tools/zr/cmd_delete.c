/*
 * zr delete STORE INDEX... | --mask FILE - delete records, atomically, by
 * the engine's swap-last rule (each freed slot takes the current last
 * record, so the survivors stay 0..length-1). The bytes stay in the chunk
 * files until `zr compact`.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "zr_cli.h"
#include "zr_io.h"
#include "zr_platform.h"

#define CMD "delete"

static const zr_command DELETE = {
    .name = CMD,
    .synopsis = "zr delete [OPTIONS] STORE INDEX...\n"
                "zr delete [OPTIONS] STORE --mask FILE.npy",
    .args = "STORE [INDEX...]",
    .about = "Delete records in one atomic step. INDEX is an integer (negative counts from\n"
             "the end) or START:STOP; --mask takes a 1-d bool (or 0/1 integer) .npy of one\n"
             "value per record, true = delete. Records are deleted swap-last: each freed\n"
             "slot receives the current last record, so indices past the new length are\n"
             "renumbered. The space is reclaimed by zr compact. An INDEX past the end\n"
             "deletes nothing and exits 4.",
    .example = "zr delete train-x 0 -1 100:200 && zr compact train-x",
    .flags = ZR_ARGS_NUMBERS,
};

/* The indices the mask FILE marks true, into *del (malloc'd). */
static int mask_indices(const char *store, const char *mask, uint64_t n, int64_t **del,
                        uint64_t *ndel)
{
    char err[ZR_IO_ERR];
    int64_t *m;
    uint64_t nm;
    if (zr_npy_load_i64(mask, &m, &nm, err) < 0) {
        fprintf(stderr, "zr %s: %s\n", CMD, err);
        /* A FILE that is not there cannot be opened (3); one that is not a
         * mask is a bad argument (2). */
        return zrp_path_exists(mask) ? ZR_EXIT_USAGE : ZR_EXIT_OPEN;
    }
    if (nm != n) {
        zr_error(CMD, mask, "the mask has %" PRIu64 " values, the store %" PRIu64 " records", nm, n);
        free(m);
        return ZR_EXIT_USAGE;
    }
    for (uint64_t i = 0; i < n; i++) {
        if (m[i] != 0 && m[i] != 1) { /* indices given as a mask, most likely */
            zr_error(CMD, mask, "value %" PRId64 " at %" PRIu64 ": a mask holds only 0/1 "
                     "(false/true); give indices as INDEX arguments", m[i], i);
            free(m);
            return ZR_EXIT_USAGE;
        }
    }
    *del = malloc((n ? n : 1) * sizeof **del);
    if (!*del) {
        free(m);
        zr_error(CMD, store, "out of memory for %" PRIu64 " indices", n);
        return ZR_EXIT_FAILED;
    }
    for (uint64_t i = 0; i < n; i++)
        if (m[i])
            (*del)[(*ndel)++] = (int64_t)i;
    free(m);
    return 0;
}

/* The records INDEX arguments idx[0..count) name, into *del (malloc'd). */
static int index_list(const char *store, char *const *idx, int count, uint64_t n, int64_t **del,
                      uint64_t *ndel)
{
    uint64_t cap = 0;
    for (int k = 0; k < count; k++) {
        uint64_t lo = 0, hi = 0;
        int status = zr_parse_range(&DELETE, store, idx[k], n, &lo, &hi);
        if (status)
            return status;
        if (*ndel + (hi - lo) > cap) {
            cap = (*ndel + (hi - lo)) * 2 + 16;
            int64_t *nd = realloc(*del, cap * sizeof *nd);
            if (!nd) {
                zr_error(CMD, store, "out of memory for %" PRIu64 " indices", cap);
                return ZR_EXIT_FAILED;
            }
            *del = nd;
        }
        for (uint64_t r = lo; r < hi; r++)
            (*del)[(*ndel)++] = (int64_t)r;
    }
    return 0;
}

static void report(const char *store, int json, uint64_t n, uint64_t after, uint64_t reclaimable)
{
    char b[32];
    if (json) {
        json_object *j = json_object_new_object();
        zr_json_str(j, "store", store);
        zr_json_u64(j, "deleted", n - after);
        zr_json_u64(j, "records", after);
        zr_json_u64(j, "reclaimable_bytes", reclaimable);
        zr_json_print(j);
    } else {
        printf("%s: deleted %" PRIu64 " record%s, %" PRIu64 " remain; %s reclaimable (zr compact "
               "%s)\n", store, n - after, n - after == 1 ? "" : "s", after,
               zr_human_bytes(reclaimable, b, sizeof b), store);
    }
}

int zr_cmd_delete(int argc, char **argv)
{
    const char *mask = NULL;
    int json = 0;
    const zr_option options[] = {
        ZR_OPT_VALUE(NULL, "--mask", "FILE", &mask, "delete where FILE is true"),
        ZR_OPT_FLAG(NULL, "--json", &json, "a JSON summary on stdout"),
        ZR_OPT_END,
    };
    zr_args args;
    int status = zr_parse_args(&DELETE, options, argc, argv, &args);
    if (status != ZR_ARGS_GO)
        return status;
    if ((args.n == 1) == (mask == NULL))
        return zr_usage(&DELETE, "give INDEX... or --mask FILE (one of the two)");
    const char *store = args.v[0];
    zrs_store *s;
    int rc = zrs_open(&s, store);
    if (rc < 0)
        return zr_fail_open(CMD, store, rc);
    const uint64_t n = zrs_length(s);
    int64_t *del = NULL;
    uint64_t ndel = 0;
    status = mask ? mask_indices(store, mask, n, &del, &ndel)
                  : index_list(store, args.v + 1, args.n - 1, n, &del, &ndel);
    if (status == 0 && ndel > 0 && (rc = zrs_delete(s, del, ndel)) < 0)
        status = zr_fail(CMD, store, "delete failed", rc);
    free(del);
    const uint64_t after = zrs_length(s);
    zre_stats st = {0};
    if (status == 0)
        zre_get_stats(zrs_engine(s), &st);
    rc = zrs_close(s);
    if (status)
        return status;
    if (rc < 0)
        return zr_fail(CMD, store, "close failed", rc);
    report(store, json, n, after, st.reclaimable);
    return 0;
}
