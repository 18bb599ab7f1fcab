/*
 * sink.c - a store being written by zr ingest or zr recode: created (with
 * a dictionary trained or given for zstd_dict) or opened to append after
 * its identity is checked, then filled in committed slices.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "zr_cli.h"
#include "zr_io.h"
#include "zr_platform.h"

/* Appends are cut into pieces timed by zrs_slice_bytes (the rule the
 * Python binding's appends follow too), so that Ctrl-C waits for one
 * piece, not a whole slice: at zstd_dict's level 19 a slice of
 * incompressible bytes compresses at a few MiB/s, and the engine's append
 * cannot be stopped halfway. */

int zr_parse_tier(const char *s, zrs_dict_tier *out)
{
    if (!strcmp(s, "fast"))
        *out = ZRS_DICT_FAST;
    else if (!strcmp(s, "balanced"))
        *out = ZRS_DICT_BALANCED;
    else if (!strcmp(s, "max"))
        *out = ZRS_DICT_MAX;
    else
        return -1;
    return 0;
}

int zr_sink_codec(const zr_command *cmd, const char *codec, const char *tier, const char *dict,
                  zr_sink_opts *so)
{
    so->codec = ZRE_CODEC_ZSTD;
    so->tier = ZRS_DICT_BALANCED;
    so->codec_given = codec != NULL;
    so->dict_path = dict;
    if (codec && zre_codec_parse(codec, &so->codec) < 0)
        return zr_usage(cmd, "unknown codec '%s' (raw, zstd or zstd_dict)", codec);
    if (tier && zr_parse_tier(tier, &so->tier) < 0)
        return zr_usage(cmd, "unknown tier '%s' (fast, balanced or max)", tier);
    if ((tier || dict) && so->codec != ZRE_CODEC_ZSTD_DICT) {
        if (codec)
            return zr_usage(cmd, "--tier and --dict go with --codec zstd_dict");
        so->codec = ZRE_CODEC_ZSTD_DICT; /* a dictionary option implies the codec */
    }
    if (tier && dict)
        return zr_usage(cmd, "give --tier or --dict, not both");
    return 0;
}

int zr_train_tier(const char *cmd, const char *what, zrs_dict_tier tier, zrs_store *from,
                  const void *samples, const uint64_t *bounds, uint64_t n, void **dict,
                  uint64_t *dict_size, uint64_t *nsampled, uint64_t *sampled_bytes)
{
    uint64_t dict_cap;
    *dict = NULL;
    *dict_size = 0;
    if (zrs_dict_tier_sizes(tier, &dict_cap, NULL) < 0)
        return zr_fail(cmd, what, "dictionary tier", ZR_EINVAL);
    zrs_dict_sample *sm = NULL;
    void *d = malloc(dict_cap);
    int rc = d ? zrs_dict_sample_create(&sm, tier) : ZR_ENOMEM;
    if (rc == ZR_ENOMEM) {
        free(d);
        zrs_dict_sample_free(sm);
        zr_error(cmd, what, "out of memory for a %" PRIu64 "-byte dictionary", dict_cap);
        return ZR_EXIT_FAILED;
    }
    if (rc >= 0 && from)
        rc = zrs_dict_sample_store(sm, from);
    const unsigned char *p = (const unsigned char *)samples + (n ? bounds[0] : 0);
    for (uint64_t i = 0; rc >= 0 && !from && i < n; p += bounds[i + 1] - bounds[i], i++)
        rc = zrs_dict_sample_offer(sm, i, p, bounds[i + 1] - bounds[i]);
    if (rc >= 0)
        rc = zrs_dict_sample_train(sm, d, dict_cap, dict_size);
    if (nsampled)
        *nsampled = zrs_dict_sample_count(sm);
    if (sampled_bytes)
        *sampled_bytes = zrs_dict_sample_bytes(sm);
    zrs_dict_sample_free(sm);
    if (rc < 0) {
        free(d);
        return zr_fail(cmd, what, "cannot train a dictionary", rc);
    }
    *dict = d;
    return 0;
}

static int same_identity(zr_sink *k, zrs_kind kind, zrs_dtype dtype, const uint64_t *shape,
                         size_t ndim)
{
    zrs_store *s = k->s;
    char want[512], got[512];
    if (zrs_get_kind(s) != kind || zrs_get_dtype(s) != dtype) {
        zr_error(k->cmd, k->path, "cannot append: the store is %s %s, the input %s %s",
                 zrs_get_kind(s) == ZRS_DENSE ? "dense" : "ragged", zrs_dtype_str(zrs_get_dtype(s)),
                 kind == ZRS_DENSE ? "dense" : "ragged", zrs_dtype_str(dtype));
        return 0;
    }
    if (kind == ZRS_DENSE &&
        (zrs_item_ndim(s) != ndim ||
         (ndim && memcmp(zrs_item_shape(s), shape, ndim * sizeof *shape)))) {
        zr_format_shape(zrs_item_shape(s), zrs_item_ndim(s), got, sizeof got);
        zr_format_shape(shape, ndim, want, sizeof want);
        zr_error(k->cmd, k->path, "cannot append: the store's records have shape %s, the input's %s",
                 got, want);
        return 0;
    }
    if (k->o->codec_given && zrs_get_codec(s) != k->o->codec) {
        zr_error(k->cmd, k->path, "cannot append: the store's codec is %s, not %s (leave --codec "
                 "out, or zr recode)", zre_codec_name(zrs_get_codec(s)),
                 zre_codec_name(k->o->codec));
        return 0;
    }
    return 1;
}

int zr_sink_open(zr_sink *k, zrs_kind kind, zrs_dtype dtype, const uint64_t *shape, size_t ndim,
                 const void *samples, const uint64_t *bounds, uint64_t nsamples)
{
    k->s = NULL;
    k->added = k->before = 0;
    k->created = 0;
    if (zrp_path_exists(k->path)) {
        if (!k->o->append) {
            zr_error(k->cmd, k->path, "already exists (%s adds records to a store of the same "
                     "identity)", k->o->append_flag ? k->o->append_flag : "--append");
            return ZR_EXIT_OPEN;
        }
        int rc = zrs_open(&k->s, k->path);
        if (rc < 0)
            return zr_fail_open(k->cmd, k->path, rc);
        if (!same_identity(k, kind, dtype, shape, ndim)) {
            zrs_close(k->s);
            k->s = NULL;
            return ZR_EXIT_OPEN;
        }
        k->before = zrs_length(k->s);
        return 0;
    }
    void *dict = NULL;
    uint64_t dict_size = 0;
    if (k->o->codec == ZRE_CODEC_ZSTD_DICT) {
        if (k->o->dict_path) {
            size_t len;
            int rc = zrp_read_file(k->o->dict_path, &dict, &len, (size_t)ZRE_DICT_MAX);
            if (rc < 0) {
                zr_error(k->cmd, k->o->dict_path, "cannot read the dictionary: %s", strerror(-rc));
                return ZR_EXIT_OPEN;
            }
            dict_size = len;
        } else {
            if (nsamples == 0 && (k->sample_from == NULL || zrs_length(k->sample_from) == 0)) {
                zr_error(k->cmd, k->path, "no records to train a dictionary on");
                return ZR_EXIT_FAILED;
            }
            int ex = zr_train_tier(k->cmd, k->path, k->o->tier, k->sample_from, samples, bounds,
                                   nsamples, &dict, &dict_size, NULL, NULL);
            if (ex)
                return ex;
        }
    }
    int rc = kind == ZRS_DENSE
                 ? zrs_create_dense_dict(&k->s, k->path, dtype, shape, ndim, k->o->codec, dict,
                                         dict_size)
                 : zrs_create_ragged_dict(&k->s, k->path, dtype, k->o->codec, dict, dict_size);
    free(dict);
    if (rc < 0) {
        zr_error(k->cmd, k->path, "cannot create: %s", zr_last_error());
        return zr_exit_from_open(rc);
    }
    k->created = 1;
    return 0;
}

/* One append call of records [i, j) of the slice: committed whole, or
 * not at all. */
static int append_piece(zr_sink *k, const unsigned char *data, const uint64_t *bounds,
                        uint64_t rec, uint64_t i, uint64_t j)
{
    uint64_t first;
    int rc = bounds ? zrs_append_ragged(k->s, data, bounds + i, j - i, &first)
                    : zrs_append_dense(k->s, data + i * rec, (j - i) * rec, j - i, &first);
    if (rc < 0) {
        char what[128];
        snprintf(what, sizeof what, "append of %" PRIu64 " records after %" PRIu64 " failed",
                 j - i, k->before + k->added);
        return zr_fail(k->cmd, k->path, what, rc);
    }
    k->added += j - i;
    return 0;
}

int zr_sink_append(zr_sink *k, const void *data, const uint64_t *bounds, uint64_t count,
                   uint64_t nbytes)
{
    const unsigned char *p = data;
    const uint64_t rec = bounds ? 0 : (count ? nbytes / count : 0);
    uint64_t at = 0, want = zrs_slice_bytes(0, 0, UINT64_MAX);
    while (at < count && !zr_interrupted()) {
        /* As many records as fit `want` bytes, at least one. */
        uint64_t end = at + 1;
        if (bounds) {
            while (end < count && bounds[end + 1] - bounds[at] <= want)
                end++;
        } else if (rec) {
            uint64_t n = want / rec;
            end = at + (n > count - at ? count - at : n ? n : 1);
        } else {
            end = count;
        }
        const uint64_t piece = bounds ? bounds[end] - bounds[at] : (end - at) * rec;
        const uint64_t t0 = zrp_now_ns();
        int status = append_piece(k, p, bounds, rec, at, end);
        if (status)
            return status;
        /* The next piece at the rate this one ran at. */
        want = zrs_slice_bytes(piece, zrp_now_ns() - t0, UINT64_MAX);
        at = end;
    }
    return 0;
}

int zr_sink_close(zr_sink *k)
{
    if (!k->s)
        return 0;
    int rc = zrs_close(k->s);
    k->s = NULL;
    return rc < 0 ? zr_fail(k->cmd, k->path, "close failed", rc) : 0;
}
