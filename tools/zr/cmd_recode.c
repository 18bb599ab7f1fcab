/*
 * zr recode SRC DST --codec raw|zstd|zstd_dict [--tier T | --dict FILE]
 * - copy a store into a new one of another codec (the specification's
 * codec change): same kind, dtype and item_shape, same records in the same
 * order. Reads SRC through the public gather contract and writes DST
 * through the public append contract, one bounded slice at a time (each
 * committed), so memory stays at one slice whatever the store size. For
 * zstd_dict without --dict, the dictionary is trained on records sampled
 * evenly over SRC. Ctrl-C stops after the slice in flight; --resume
 * continues an interrupted recode where DST ends. A finished copy takes
 * SRC's uuid (zrs_set_uuid): it holds the same records, so a loader state
 * saved against SRC resumes on DST.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "zr_cli.h"
#include "zr_io.h"
#include "zr_platform.h"

#define CMD "recode"
#define SLICE_BYTES ((uint64_t)16 << 20)
#define SLICE_BYTES_DICT ((uint64_t)2 << 20)

static void usage(FILE *out)
{
    fprintf(out,
            "usage: zr recode [OPTIONS] SRC DST --codec raw|zstd|zstd_dict\n"
            "Copy store SRC into a new store DST with another codec: the same kind, dtype,\n"
            "shape and records, read and appended in bounded slices (each committed).\n"
            "\n"
            "Options:\n"
            "  --codec raw|zstd|zstd_dict  the codec of DST (required)\n"
            "  --tier fast|balanced|max    zstd_dict: train a dictionary of this tier on\n"
            "                              records sampled over SRC (default balanced)\n"
            "  --dict FILE                 zstd_dict: use this dictionary (zr train-dict)\n"
            "  --resume                    DST exists from an interrupted recode: go on\n"
            "                              from where it ends\n"
            "  --json                      a JSON summary on stdout\n"
            "  -q, --quiet                 no progress line (shown only on a terminal)\n"
            "  -h, --help                  this text\n"
            "\n"
            "Example:\n"
            "  zr recode train-x train-x-raw --codec raw\n"
            "  zr recode docs docs-dict --codec zstd_dict --tier max\n"
            "\n%s",
            zr_exit_table);
}

typedef struct recode_ctx {
    zr_sink *k;
    zr_progress *pr;
    uint64_t bytes;
} recode_ctx;

static int copy_slice(void *vctx, const zr_slice *sl)
{
    recode_ctx *c = vctx;
    int st = zr_sink_append(c->k, sl->data, sl->bounds, sl->count, sl->nbytes);
    c->bytes += sl->nbytes;
    zr_progress_update(c->pr, sl->first + sl->count, c->bytes);
    return st;
}

int zr_cmd_recode(int argc, char **argv)
{
    if (zr_wants_help(argc, argv)) {
        usage(stdout);
        return 0;
    }
    const char *pos[2] = {NULL, NULL};
    int npos = 0, json = 0, quiet = 0, codec_given = 0, tier_given = 0;
    zr_sink_opts so = {.codec = ZRE_CODEC_ZSTD, .tier = ZRS_DICT_BALANCED,
                       .append_flag = "--resume"};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--codec") || !strcmp(a, "--tier") || !strcmp(a, "--dict")) {
            if (i + 1 >= argc)
                return zr_usage_error(CMD, "%s needs a value", a);
            const char *v = argv[++i];
            if (!strcmp(a, "--codec")) {
                if (zre_codec_parse(v, &so.codec) < 0)
                    return zr_usage_error(CMD, "unknown codec '%s' (raw, zstd or zstd_dict)", v);
                codec_given = 1;
            } else if (!strcmp(a, "--tier")) {
                if (zr_parse_tier(v, &so.tier) < 0)
                    return zr_usage_error(CMD, "unknown tier '%s' (fast, balanced or max)", v);
                tier_given = 1;
            } else {
                so.dict_path = v;
            }
        } else if (!strcmp(a, "--resume")) {
            so.append = 1;
        } else if (!strcmp(a, "--json")) {
            json = 1;
        } else if (!strcmp(a, "--quiet") || !strcmp(a, "-q")) {
            quiet = 1;
        } else if (a[0] == '-' && a[1]) {
            return zr_usage_error(CMD, "unknown option '%s'", a);
        } else if (npos < 2) {
            pos[npos++] = a;
        } else {
            return zr_usage_error(CMD, "too many arguments ('%s')", a);
        }
    }
    if (npos != 2 || !codec_given)
        return zr_usage_error(CMD, "expected SRC DST --codec raw|zstd|zstd_dict");
    if ((tier_given || so.dict_path) && so.codec != ZRE_CODEC_ZSTD_DICT)
        return zr_usage_error(CMD, "--tier and --dict go with --codec zstd_dict");
    if (tier_given && so.dict_path)
        return zr_usage_error(CMD, "give --tier or --dict, not both");
    so.codec_given = 1;
    const char *src = pos[0], *dst = pos[1];

    zrs_store *s;
    int rc = zrs_open_ex(&s, src, ZRE_OPEN_READONLY);
    if (rc < 0)
        return zr_fail_open(CMD, src, rc);
    const uint64_t n = zrs_length(s);
    unsigned char *sample = NULL;
    uint64_t *sb = NULL, ns = 0;
    int status = 0;
    if (so.codec == ZRE_CODEC_ZSTD_DICT && !so.dict_path && !zrp_path_exists(dst)) {
        uint64_t dcap, scap;
        zrs_dict_tier_sizes(so.tier, &dcap, &scap);
        status = zr_sample_records(CMD, s, scap, &sample, &sb, &ns);
    }
    zr_sink k = {.cmd = CMD, .path = dst, .o = &so};
    if (status == 0)
        status = zr_sink_open(&k, zrs_get_kind(s), zrs_get_dtype(s), zrs_item_shape(s),
                              zrs_item_ndim(s), sample, sb, ns);
    free(sample);
    free(sb);
    if (status) {
        zrs_close(s);
        return status;
    }
    if (k.before > n) {
        zr_error(CMD, dst, "holds %" PRIu64 " records, more than the %" PRIu64 " of %s: not a "
                 "recode of it", k.before, n, src);
        zr_sink_close(&k);
        zrs_close(s);
        return ZR_EXIT_FAILED;
    }
    zr_progress pr;
    zr_progress_start(&pr, dst, n, "records", quiet);
    recode_ctx c = {&k, &pr, 0};
    zr_interrupt_install();
    status = zr_read_slices(CMD, s, k.before, n,
                            so.codec == ZRE_CODEC_ZSTD_DICT ? SLICE_BYTES_DICT : SLICE_BYTES,
                            copy_slice, &c);
    zr_progress_end(&pr);
    uint8_t uuid[ZRS_UUID_BYTES];
    if (status == 0 && !zr_interrupted() && k.before + k.added == n && zrs_get_uuid(s, uuid) == 1) {
        rc = zrs_set_uuid(k.s, uuid);
        if (rc < 0)
            status = zr_fail(CMD, dst, "cannot give it the source's uuid", rc);
    }
    const char *from = zre_codec_name(zrs_get_codec(s));
    zrs_close(s);
    uint64_t total = k.before + k.added;
    int crc = zr_sink_close(&k);
    if (status)
        return status;
    if (crc)
        return crc;
    if (zr_interrupted()) {
        char what[160];
        snprintf(what, sizeof what, "%" PRIu64 " of %" PRIu64 " records committed to %s; "
                 "zr recode --resume finishes", total, n, dst);
        return zr_interrupt_exit(CMD, src, what);
    }
    if (json) {
        json_object *j = json_object_new_object();
        zr_json_str(j, "source", src);
        zr_json_str(j, "store", dst);
        zr_json_str(j, "from_codec", from);
        zr_json_str(j, "codec", zre_codec_name(so.codec));
        zr_json_u64(j, "records", total);
        zr_json_u64(j, "records_copied", k.added);
        zr_json_print(j);
    } else {
        printf("%s: %" PRIu64 " records recoded from %s (%s) to %s\n", dst, total, src, from,
               zre_codec_name(so.codec));
    }
    return 0;
}
