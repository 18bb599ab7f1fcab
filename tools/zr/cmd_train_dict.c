/*
 * zr train-dict STORE --tier fast|balanced|max -o DICT - train a zstd
 * dictionary on a sample of STORE's records (every k-th record, up to the
 * tier's sample size, as stored: ragged shape prefixes included) with
 * zstd's own builder, and write it to DICT, for `zr ingest --dict` or
 * `zr recode --dict`.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "zr_cli.h"
#include "zr_io.h"
#include "zr_platform.h"

#define CMD "train-dict"

static const zr_command TRAIN_DICT = {
    .name = CMD,
    .synopsis = "zr train-dict [OPTIONS] STORE -o DICT",
    .args = "STORE",
    .about = "Train a zstd dictionary on records sampled evenly over STORE and write it to\n"
             "DICT (for zr ingest --dict and zr recode --dict). Tiers (dictionary / sample):\n"
             "  fast 32 KiB / 4 MiB, balanced 128 KiB / 16 MiB, max 1 MiB / 64 MiB.",
    .example = "zr train-dict docs --tier fast -o docs.dict\n"
               "zr recode docs docs-dict --codec zstd_dict --dict docs.dict",
};

static void report(const char *store, const char *out, const char *tier_name, int json,
                   uint64_t dict_size, uint64_t n, uint64_t sample_bytes)
{
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
}

int zr_cmd_train_dict(int argc, char **argv)
{
    const char *out = NULL, *tier_name = NULL;
    int force = 0, json = 0;
    const zr_option options[] = {
        ZR_OPT_VALUE(NULL, "--tier", "fast|balanced|max", &tier_name, "the tier (default balanced)"),
        ZR_OPT_VALUE("-o", "--output", "DICT", &out, "the file to write (must not exist)"),
        ZR_OPT_FLAG(NULL, "--force", &force, "replace DICT if it exists"),
        ZR_OPT_FLAG(NULL, "--json", &json, "a JSON summary on stdout"),
        ZR_OPT_END,
    };
    zr_args args;
    int rc = zr_parse_args(&TRAIN_DICT, options, argc, argv, &args);
    if (rc != ZR_ARGS_GO)
        return rc;
    const char *store = args.v[0];
    zrs_dict_tier tier = ZRS_DICT_BALANCED;
    if (!tier_name)
        tier_name = "balanced";
    if (zr_parse_tier(tier_name, &tier) < 0)
        return zr_usage(&TRAIN_DICT, "unknown tier '%s' (fast, balanced or max)", tier_name);
    if (!out)
        return zr_usage(&TRAIN_DICT, "missing -o DICT");
    if (zrp_path_exists(out) && (!force || zrp_is_dir(out))) {
        zr_error(CMD, out, "already exists (--force replaces it)");
        return ZR_EXIT_OPEN;
    }
    zrs_store *s;
    rc = zrs_open_ex(&s, store, ZRE_OPEN_READONLY);
    if (rc < 0)
        return zr_fail_open(CMD, store, rc);
    void *dict;
    uint64_t dict_size, n, sample_bytes;
    int status = zr_train_tier(CMD, store, tier, s, NULL, NULL, 0, &dict, &dict_size, &n,
                               &sample_bytes);
    zrs_close(s);
    if (status)
        return status;
    rc = zrp_write_file_atomic(out, dict, (size_t)dict_size);
    free(dict);
    if (rc < 0) {
        zr_error(CMD, out, "cannot write: %s", strerror(-rc));
        return ZR_EXIT_OPEN;
    }
    report(store, out, tier_name, json, dict_size, n, sample_bytes);
    return 0;
}
