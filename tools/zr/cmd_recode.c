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

static const zr_command RECODE = {
    .name = CMD,
    .synopsis = "zr recode [OPTIONS] SRC DST --codec raw|zstd|zstd_dict",
    .args = "SRC DST",
    .about = "Copy store SRC into a new store DST with another codec: the same kind, dtype,\n"
             "shape and records, read and appended in bounded slices (each committed).",
    .example = "zr recode train-x train-x-raw --codec raw\n"
               "zr recode docs docs-dict --codec zstd_dict --tier max",
};

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

static void report(const char *src, const char *dst, const char *from, zre_codec to, int json,
                   uint64_t total, uint64_t added)
{
    if (json) {
        json_object *j = json_object_new_object();
        zr_json_str(j, "source", src);
        zr_json_str(j, "store", dst);
        zr_json_str(j, "from_codec", from);
        zr_json_str(j, "codec", zre_codec_name(to));
        zr_json_u64(j, "records", total);
        zr_json_u64(j, "records_copied", added);
        zr_json_print(j);
    } else {
        printf("%s: %" PRIu64 " records recoded from %s (%s) to %s\n", dst, total, src, from,
               zre_codec_name(to));
    }
}

int zr_cmd_recode(int argc, char **argv)
{
    const char *codec = NULL, *tier = NULL, *dict = NULL;
    int json = 0, quiet = 0, resume = 0;
    const zr_option options[] = {
        ZR_OPT_VALUE(NULL, "--codec", "raw|zstd|zstd_dict", &codec, "the codec of DST (required)"),
        ZR_OPT_VALUE(NULL, "--tier", "fast|balanced|max", &tier,
                     "zstd_dict: train a dictionary of this tier on\n"
                     "records sampled over SRC (default balanced)"),
        ZR_OPT_VALUE(NULL, "--dict", "FILE", &dict, "zstd_dict: use this dictionary (zr train-dict)"),
        ZR_OPT_FLAG(NULL, "--resume", &resume, "DST exists from an interrupted recode: go on\n"
                                               "from where it ends"),
        ZR_OPT_FLAG(NULL, "--json", &json, "a JSON summary on stdout"),
        ZR_OPT_QUIET(&quiet),
        ZR_OPT_END,
    };
    zr_args args;
    int status = zr_parse_args(&RECODE, options, argc, argv, &args);
    if (status != ZR_ARGS_GO)
        return status;
    if (!codec)
        return zr_usage(&RECODE, "missing --codec raw|zstd|zstd_dict");
    zr_sink_opts so = {.append_flag = "--resume"};
    if ((status = zr_sink_codec(&RECODE, codec, tier, dict, &so)) != 0)
        return status;
    so.append = resume;
    const char *src = args.v[0], *dst = args.v[1];

    zrs_store *s;
    int rc = zrs_open_ex(&s, src, ZRE_OPEN_READONLY);
    if (rc < 0)
        return zr_fail_open(CMD, src, rc);
    const uint64_t n = zrs_length(s);
    zr_sink k = {.cmd = CMD, .path = dst, .o = &so, .sample_from = s};
    status = zr_sink_open(&k, zrs_get_kind(s), zrs_get_dtype(s), zrs_item_shape(s),
                          zrs_item_ndim(s), NULL, NULL, 0);
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
    report(src, dst, from, so.codec, json, total, k.added);
    return 0;
}
