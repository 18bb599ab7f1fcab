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

#define CMD "delete"

static void usage(FILE *out)
{
    fprintf(out,
            "usage: zr delete [OPTIONS] STORE INDEX...\n"
            "       zr delete [OPTIONS] STORE --mask FILE.npy\n"
            "Delete records in one atomic step. INDEX is an integer (negative counts from\n"
            "the end) or START:STOP; --mask takes a 1-d bool (or 0/1 integer) .npy of one\n"
            "value per record, true = delete. Records are deleted swap-last: each freed\n"
            "slot receives the current last record, so indices past the new length are\n"
            "renumbered. The space is reclaimed by zr compact.\n"
            "\n"
            "Options:\n"
            "  --mask FILE  delete where FILE is true\n"
            "  --json       a JSON summary on stdout\n"
            "  -h, --help   this text\n"
            "\n"
            "Example:\n"
            "  zr delete train-x 0 -1 100:200 && zr compact train-x\n"
            "\n%s",
            zr_exit_table);
}

int zr_cmd_delete(int argc, char **argv)
{
    if (zr_wants_help(argc, argv)) {
        usage(stdout);
        return 0;
    }
    const char *store = NULL, *mask = NULL;
    int json = 0, nidx = 0, opts_done = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!opts_done && !strcmp(a, "--"))
            opts_done = 1;
        else if (!opts_done && !strcmp(a, "--mask")) {
            if (++i >= argc)
                return zr_usage_error(CMD, "--mask needs a FILE");
            mask = argv[i];
        } else if (!opts_done && !strcmp(a, "--json"))
            json = 1;
        else if (!opts_done && a[0] == '-' && a[1] && !zr_is_negative_index(a))
            return zr_usage_error(CMD, "unknown option '%s'", a);
        else if (!store)
            store = a;
        else
            nidx++;
    }
    if (!store || (nidx == 0) == (mask == NULL))
        return zr_usage_error(CMD, "expected STORE and either INDEX... or --mask FILE");
    zrs_store *s;
    int rc = zrs_open(&s, store);
    if (rc < 0)
        return zr_fail_open(CMD, store, rc);
    const uint64_t n = zrs_length(s);
    int64_t *del = NULL;
    uint64_t ndel = 0, cap = 0;
    int status = 0;
    if (mask) {
        char err[ZR_IO_ERR];
        int64_t *m;
        uint64_t nm;
        if (zr_npy_load_i64(mask, &m, &nm, err) < 0) {
            fprintf(stderr, "zr %s: %s\n", CMD, err);
            status = ZR_EXIT_USAGE;
        } else if (nm != n) {
            zr_error(CMD, mask, "the mask has %" PRIu64 " values, the store %" PRIu64 " records",
                     nm, n);
            status = ZR_EXIT_USAGE;
        } else {
            del = malloc((n ? n : 1) * sizeof *del);
            for (uint64_t i = 0; del && i < n; i++)
                if (m[i])
                    del[ndel++] = (int64_t)i;
        }
        free(m);
    } else {
        int seen = 0;
        opts_done = 0;
        for (int i = 1; i < argc && status == 0; i++) {
            const char *a = argv[i];
            if (!opts_done && !strcmp(a, "--")) {
                opts_done = 1;
                continue;
            }
            if (!opts_done && !strcmp(a, "--json"))
                continue;
            if (!seen++)
                continue; /* STORE */
            uint64_t lo = 0, hi = 0;
            status = zr_parse_range(CMD, store, a, n, &lo, &hi);
            if (status == 0 && ndel + (hi - lo) > cap) {
                cap = (ndel + (hi - lo)) * 2 + 16;
                int64_t *nd = realloc(del, cap * sizeof *nd);
                if (!nd) {
                    zr_error(CMD, store, "out of memory for %" PRIu64 " indices", cap);
                    status = ZR_EXIT_FAILED;
                    break;
                }
                del = nd;
            }
            for (uint64_t r = lo; status == 0 && r < hi; r++)
                del[ndel++] = (int64_t)r;
        }
    }
    if (status == 0 && !del && ndel == 0 && mask) {
        zr_error(CMD, store, "out of memory");
        status = ZR_EXIT_FAILED;
    }
    if (status == 0 && ndel > 0) {
        rc = zrs_delete(s, del, ndel);
        if (rc < 0)
            status = rc == ZR_ERANGE ? (zr_fail(CMD, store, "delete", rc), ZR_EXIT_USAGE)
                                     : zr_fail(CMD, store, "delete failed", rc);
    }
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
    char b[32];
    if (json) {
        json_object *j = json_object_new_object();
        zr_json_str(j, "store", store);
        zr_json_u64(j, "deleted", n - after);
        zr_json_u64(j, "records", after);
        zr_json_u64(j, "reclaimable_bytes", st.reclaimable);
        zr_json_print(j);
    } else {
        printf("%s: deleted %" PRIu64 " record%s, %" PRIu64 " remain; %s reclaimable (zr compact "
               "%s)\n", store, n - after, n - after == 1 ? "" : "s", after,
               zr_human_bytes(st.reclaimable, b, sizeof b), store);
    }
    return 0;
}
