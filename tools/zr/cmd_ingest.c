/*
 * zr ingest SRC STORE - make (or, with --append, extend) a store from:
 *   .npy            any store dtype, either byte order, C or Fortran order;
 *                   records along axis 0 (dense, or --ragged);
 *   .npz            one store per array under STORE/NAME, or --array NAME;
 *   IDX             the MNIST family (Fashion-MNIST's own files), gzipped
 *                   or not;
 *   a folder        a ragged uint8 store, one record per regular file in
 *                   sorted (byte) order, names written to STORE.names;
 *   tokens          a flat 1-d .npy plus --lengths or --offsets (.npy):
 *                   a ragged store, one 1-d record per sequence;
 *   Parquet, Arrow  one store per column (STORE/NAME), or --column NAME:
 *                   read by pyarrow through loaderx (ingest_arrow.c).
 * The source kind is read from the file's first bytes, not its name: the
 * INPUTS table below, one entry per kind (ingest.h). Records are appended
 * in slices (each one committed), so memory stays bounded (Fortran-order
 * arrays excepted: they are loaded whole) and Ctrl-C stops after the
 * slice in flight with everything before intact.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "ingest.h"
#include "zr_platform.h"

#define SLICE_BYTES ((uint64_t)16 << 20)
#define SLICE_BYTES_DICT ((uint64_t)2 << 20) /* level 19: keep Ctrl-C prompt */

static const zr_command INGEST = {
    .name = INGEST_CMD,
    .synopsis = "zr ingest [OPTIONS] SRC STORE",
    .args = "SRC STORE",
    .about = "Make a store from SRC, or add to one with --append. SRC is one of:\n"
             "  a .npy file         any store dtype, either byte order, C or Fortran order;\n"
             "                      records along axis 0 (a dense store, or --ragged)\n"
             "  a .npz file         one store per array as STORE/NAME, or --array NAME\n"
             "  an IDX file         MNIST-style, gzipped or not (e.g. Fashion-MNIST's own)\n"
             "  a folder            a ragged uint8 store, one record per regular file in\n"
             "                      sorted order; the names go to STORE.names, one a line\n"
             "                      (empty files are skipped: a record is never empty);\n"
             "                      STORE.names must not exist (with --append: it must,\n"
             "                      listing one name per record of STORE)\n"
             "  a flat 1-d .npy     with --lengths or --offsets: ragged token sequences\n"
             "  a Parquet, Arrow IPC or Feather file\n"
             "                      one store per column as STORE/NAME, or --column NAME;\n"
             "                      numbers and fixed-size lists dense, variable lists,\n"
             "                      binary and strings ragged (needs python3 with loaderx\n"
             "                      and pyarrow, or $ZR_PYTHON)",
    .example = "zr ingest /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz train-x\n"
               "zr ingest --codec zstd_dict --tier fast /usr/share/doc docs   # a folder\n"
               "zr ingest tokens.npy --lengths lengths.npy corpus\n"
               "zr ingest --column image train.parquet train-x",
};

int grow_slice(unsigned char **packed, uint64_t sum, const char *what)
{
    unsigned char *np = realloc(*packed, sum ? sum : 1);
    if (!np) {
        zr_error(INGEST_CMD, what, "out of memory for a slice of %" PRIu64 " bytes", sum);
        return ZR_EXIT_FAILED;
    }
    *packed = np;
    return 0;
}

void slice_sizes(const ingest_opts *o, uint64_t *slice, uint64_t *first)
{
    *slice = o->sink.codec == ZRE_CODEC_ZSTD_DICT ? SLICE_BYTES_DICT : SLICE_BYTES;
    *first = *slice;
    if (o->sink.codec == ZRE_CODEC_ZSTD_DICT && !o->sink.dict_path) {
        uint64_t dcap, scap;
        zrs_dict_tier_sizes(o->sink.tier, &dcap, &scap);
        if (scap > *first)
            *first = scap;
    }
}

/* ---------------------------------------------------------- reporting */

static void report(const ingest_opts *o, const zr_sink *k, const char *src, const char *what)
{
    zrs_store *s = k->s;
    uint64_t total = k->before + k->added;
    if (o->json) {
        json_object *j = json_object_new_object();
        zr_json_str(j, "store", k->path);
        zr_json_str(j, "source", src);
        zr_json_str(j, "kind", zrs_get_kind(s) == ZRS_DENSE ? "dense" : "ragged");
        zr_json_str(j, "dtype", zrs_dtype_str(zrs_get_dtype(s)));
        zr_json_str(j, "codec", zre_codec_name(zrs_get_codec(s)));
        zr_json_u64(j, "records_added", k->added);
        zr_json_u64(j, "records", total);
        json_object_object_add(j, "appended", json_object_new_boolean(!k->created));
        zr_json_print(j);
    } else {
        printf("%s: %s %" PRIu64 " %s record%s of %s (%s) from %s%s\n", k->path,
               k->created ? "wrote" : "appended", k->added,
               zrs_get_kind(s) == ZRS_DENSE ? "dense" : "ragged", k->added == 1 ? "" : "s",
               zrs_dtype_str(zrs_get_dtype(s)), zre_codec_name(zrs_get_codec(s)), src, what);
        if (!k->created)
            printf("%s: now %" PRIu64 " records\n", k->path, total);
    }
}

int ingest_finish(const ingest_opts *o, zr_sink *k, int status, const char *src,
                  const char *what)
{
    if (status == 0 && zr_interrupted()) {
        char msg[160];
        snprintf(msg, sizeof msg, "%" PRIu64 " records committed to %s before the stop", k->added,
                 k->path);
        zr_sink_close(k);
        return zr_interrupt_exit(INGEST_CMD, src, msg);
    }
    if (status == 0 && k->s)
        report(o, k, src, what);
    int rc = zr_sink_close(k);
    return status ? status : rc;
}

/* ---------------------------------------------------------- input kinds */

static int is_tokens(const char *src, const unsigned char *head, size_t got, const ingest_opts *o)
{
    (void)src, (void)head, (void)got;
    return o->lengths || o->offsets;
}

static int is_folder(const char *src, const unsigned char *head, size_t got, const ingest_opts *o)
{
    (void)head, (void)got, (void)o;
    return zrp_is_dir(src);
}

static int is_npy(const char *src, const unsigned char *head, size_t got, const ingest_opts *o)
{
    (void)src, (void)o;
    return got >= 6 && !memcmp(head, "\x93NUMPY", 6);
}

static int is_zip(const char *src, const unsigned char *head, size_t got, const ingest_opts *o)
{
    (void)src, (void)o;
    return got >= 4 && !memcmp(head, "PK\x03\x04", 4);
}

static int is_arrow(const char *src, const unsigned char *head, size_t got, const ingest_opts *o)
{
    (void)src, (void)o;
    return ingest_arrow_kind(head, got) != NULL;
}

static int is_idx(const char *src, const unsigned char *head, size_t got, const ingest_opts *o)
{
    (void)src, (void)o;
    return got >= 4 && head[0] == 0 && head[1] == 0;
}

/* In order: the first whose detect says yes takes SRC. */
static const ingest_kind INPUTS[] = {
    {"tokens (--lengths, --offsets)", is_tokens, ingest_tokens},
    {"a folder", is_folder, ingest_folder},
    {".npy", is_npy, ingest_npy},
    {".npz", is_zip, ingest_npz},
    {"Parquet or Arrow", is_arrow, ingest_arrow},
    {"IDX", is_idx, ingest_idx},
};
#define NINPUTS (sizeof INPUTS / sizeof INPUTS[0])

/* SRC's first bytes into head (none for a folder or tokens: they are
 * known by what they are). 0, or ZR_EXIT_OPEN after naming SRC. */
static int sniff(const char *src, const ingest_opts *o, unsigned char *head, size_t cap,
                 size_t *got)
{
    char err[ZR_IO_ERR];
    *got = 0;
    if (o->lengths || o->offsets || zrp_is_dir(src))
        return 0;
    if (!zrp_path_exists(src)) {
        zr_error(INGEST_CMD, src, "cannot open: no such file or directory");
        return ZR_EXIT_OPEN;
    }
    if (zr_sniff(src, head, cap, got, err) < 0) {
        fprintf(stderr, "zr %s: %s\n", INGEST_CMD, err);
        return ZR_EXIT_OPEN;
    }
    return 0;
}

static int dispatch(const char *src, const char *store, const ingest_opts *o)
{
    unsigned char head[8];
    size_t got;
    int status = sniff(src, o, head, sizeof head, &got);
    if (status)
        return status;
    for (size_t k = 0; k < NINPUTS; k++) {
        if (!INPUTS[k].detect(src, head, got, o))
            continue;
        if (o->array && INPUTS[k].ingest != ingest_npz)
            return zr_usage(&INGEST, "--array NAME goes with a .npz SRC; %s is read as %s", src,
                            INPUTS[k].name);
        if (o->column && INPUTS[k].ingest != ingest_arrow)
            return zr_usage(&INGEST, "--column NAME goes with a Parquet or Arrow SRC; %s is read "
                            "as %s", src, INPUTS[k].name);
        return INPUTS[k].ingest(src, store, o);
    }
    char kinds[256] = "";
    for (size_t k = 0; k < NINPUTS; k++)
        snprintf(kinds + strlen(kinds), sizeof kinds - strlen(kinds), "%s%s", k ? ", " : "",
                 INPUTS[k].name);
    zr_error(INGEST_CMD, src, "not an input zr ingest reads (%s): it starts with %02x %02x %02x "
             "%02x", kinds, got > 0 ? head[0] : 0, got > 1 ? head[1] : 0, got > 2 ? head[2] : 0,
             got > 3 ? head[3] : 0);
    return ZR_EXIT_FAILED;
}

/* ---------------------------------------------------------------- main */

int zr_cmd_ingest(int argc, char **argv)
{
    ingest_opts o;
    memset(&o, 0, sizeof o);
    const char *codec = NULL, *tier = NULL, *dict = NULL;
    const zr_option options[] = {
        ZR_OPT_VALUE(NULL, "--codec", "raw|zstd|zstd_dict", &codec, "record codec (default zstd)"),
        ZR_OPT_VALUE(NULL, "--tier", "fast|balanced|max", &tier,
                     "zstd_dict: train a dictionary of this tier on the\n"
                     "first records (default balanced)"),
        ZR_OPT_VALUE(NULL, "--dict", "FILE", &dict,
                     "zstd_dict: use this dictionary (zr train-dict)\n"
                     "(--tier or --dict alone imply --codec zstd_dict)"),
        ZR_OPT_FLAG(NULL, "--append", &o.sink.append,
                    "add to STORE if it exists with the same identity"),
        ZR_OPT_VALUE(NULL, "--array", "NAME", &o.array, ".npz: ingest only this array, into STORE"),
        ZR_OPT_VALUE(NULL, "--column", "NAME", &o.column,
                     "Parquet/Arrow: ingest only this column, into STORE"),
        ZR_OPT_FLAG(NULL, "--ragged", &o.ragged,
                    ".npy/IDX/.npz/Arrow: a ragged store, one record per row"),
        ZR_OPT_VALUE(NULL, "--lengths", "FILE.npy", &o.lengths,
                     "tokens: record i holds lengths[i] elements"),
        ZR_OPT_VALUE(NULL, "--offsets", "FILE.npy", &o.offsets,
                     "tokens: record i is SRC[offsets[i]:offsets[i+1]]"),
        ZR_OPT_FLAG(NULL, "--json", &o.json, "one JSON object per store written"),
        ZR_OPT_QUIET(&o.quiet),
        ZR_OPT_END,
    };
    zr_args args;
    int status = zr_parse_args(&INGEST, options, argc, argv, &args);
    if (status != ZR_ARGS_GO)
        return status;
    if ((status = zr_sink_codec(&INGEST, codec, tier, dict, &o.sink)) != 0)
        return status;
    o.codec_name = codec;
    o.tier_name = tier;
    if (o.lengths && o.offsets)
        return zr_usage(&INGEST, "give --lengths or --offsets, not both");
    /* From here on Ctrl-C stops after the slice in flight. */
    zr_interrupt_install();
    return dispatch(args.v[0], args.v[1], &o);
}
