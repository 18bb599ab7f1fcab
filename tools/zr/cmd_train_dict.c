/*
 * zr train-dict STORE --tier fast|balanced|max -o DICT - train a zstd
 * dictionary on a sample of STORE's records (every k-th record, up to the
 * tier's sample size, as stored: ragged shape prefixes included) with
 * zstd's own builder, and write it to DICT, for `zr ingest --dict` or
 * `zr recode --dict`.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "zr_cli.h"
#include "zr_io.h"
#include "zr_platform.h"

#define CMD "train-dict"

static void usage(FILE *out)
{
    fprintf(out,
            "usage: zr train-dict [OPTIONS] STORE -o DICT\n"
            "Train a zstd dictionary on records sampled evenly over STORE and write it to\n"
            "DICT (for zr ingest --dict and zr recode --dict). Tiers (dictionary / sample):\n"
            "  fast 32 KiB / 4 MiB, balanced 128 KiB / 16 MiB, max 1 MiB / 64 MiB.\n"
            "\n"
            "Options:\n"
            "  --tier fast|balanced|max  the tier (default balanced)\n"
            "  -o, --output DICT         the file to write (must not exist)\n"
            "  --force                   replace DICT if it exists\n"
            "  --json                    a JSON summary on stdout\n"
            "  -h, --help                this text\n"
            "\n"
            "Example:\n"
            "  zr train-dict docs --tier fast -o docs.dict\n"
            "  zr recode docs docs-dict --codec zstd_dict --dict docs.dict\n"
            "\n%s",
            zr_exit_table);
}

int zr_cmd_train_dict(int argc, char **argv)
{
    if (zr_wants_help(argc, argv)) {
        usage(stdout);
        return 0;
    }
    const char *store = NULL, *out = NULL;
    zrs_dict_tier tier = ZRS_DICT_BALANCED;
    const char *tier_name = "balanced";
    int force = 0, json = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-o") || !strcmp(a, "--output") || !strcmp(a, "--tier")) {
            if (i + 1 >= argc)
                return zr_usage_error(CMD, "%s needs a value", a);
            if (!strcmp(a, "--tier")) {
                tier_name = argv[++i];
                if (zr_parse_tier(tier_name, &tier) < 0)
                    return zr_usage_error(CMD, "unknown tier '%s' (fast, balanced or max)",
                                          tier_name);
            } else {
                out = argv[++i];
            }
        } else if (!strcmp(a, "--force")) {
            force = 1;
        } else if (!strcmp(a, "--json")) {
            json = 1;
        } else if (a[0] == '-' && a[1]) {
            return zr_usage_error(CMD, "unknown option '%s'", a);
        } else if (store) {
            return zr_usage_error(CMD, "one STORE only (got '%s' too)", a);
        } else {
            store = a;
        }
    }
    if (!store || !out)
        return zr_usage_error(CMD, "expected STORE and -o DICT");
    if (zrp_path_exists(out) && (!force || zrp_is_dir(out))) {
        zr_error(CMD, out, "already exists (--force replaces it)");
        return ZR_EXIT_OPEN;
    }
    zrs_store *s;
    int rc = zrs_open_ex(&s, store, ZRE_OPEN_READONLY);
    if (rc < 0)
        return zr_fail_open(CMD, store, rc);
    uint64_t dict_cap, sample_cap, n;
    zrs_dict_tier_sizes(tier, &dict_cap, &sample_cap);
    unsigned char *data;
    uint64_t *bounds;
    int status = zr_sample_records(CMD, s, sample_cap, &data, &bounds, &n);
    zrs_close(s);
    if (status)
        return status;
    void *dict;
    uint64_t dict_size;
    status = zr_train_tier(CMD, store, tier, data, bounds, n, &dict, &dict_size);
    uint64_t sample_bytes = bounds[n];
    free(data);
    free(bounds);
    if (status)
        return status;
    rc = zrp_write_file_atomic(out, dict, (size_t)dict_size);
    free(dict);
    if (rc < 0) {
        zr_error(CMD, out, "cannot write: %s", strerror(-rc));
        return ZR_EXIT_OPEN;
    }
    if (json) {
        json_object *j = json_object_new_object();
        zr_json_str(j, "store", store);
        zr_json_str(j, "dict", out);
        zr_json_str(j, "tier", tier_name);
        zr_json_u64(j, "dict_bytes", dict_size);
        zr_json_u64(j, "sample_records", n);
        zr_json_u64(j, "sample_bytes", sample_bytes);
        zr_json_print(j);
    } else {
        printf("%s: %" PRIu64 "-byte dictionary (tier %s) trained on %" PRIu64 " records (%" PRIu64
               " bytes) of %s\n", out, dict_size, tier_name, n, sample_bytes, store);
    }
    return 0;
}
