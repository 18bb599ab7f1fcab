/*
 * zr mrec - mrec-lmdb collections (libzmrec):
 *   zr mrec validate [--json] [--nolock] FILE    check every rule of the layout
 *   zr mrec info [--json] [--nolock] FILE        records, frames, atoms, index columns, blocks
 *   zr mrec dump [--nolock] FILE RECORD [FRAME]  a record's meta and system, or a resolved frame
 *   zr mrec dump [--nolock] FILE index           the index frame (own columns and the binding's)
 *   zr mrec import FILE... [--format NAME] [--units STYLE] -o OUT.mrec.lmdb
 *                                                the ASE-based importer of the Python package
 *                                                loaderx (loaderx.mrec.main; needs Python,
 *                                                loaderx and ASE, see run_import)
 * --nolock may also come before the subcommand (zr mrec --nolock info FILE).
 *
 * Arguments, exit statuses and JSON are zr's own (zr_cli.h): 0 ok; 1 a
 * check failed / the file is damaged; 2 usage; 3 the file cannot be
 * opened (missing, unreadable, a directory, not a collection, locked); 4
 * a record or frame number out of range. Errors go to stderr as
 * "zr mrec SUB: FILE: problem".
 *
 * validate runs the walk in a child process (this program again, as
 * "zr mrec validate --in-process FILE"): LMDB keeps no page checksums, so
 * damage inside its B-tree pages can crash liblmdb itself (SIGSEGV, or an
 * assertion that aborts). The parent then reports the damage instead of
 * dying with the child. Processes are started through the platform layer.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <zmrec.h>

#include "zr_cli.h"
#include "zr_platform.h"

static const char SYNOPSIS[] =
    "zr mrec [--nolock] validate [--json] FILE\n"
    "zr mrec [--nolock] info [--json] FILE\n"
    "zr mrec [--nolock] dump FILE RECORD [FRAME]\n"
    "zr mrec [--nolock] dump FILE index\n"
    "zr mrec import FILE... [--format NAME] [--units STYLE] -o OUT.mrec.lmdb";

static const zr_command MREC = {
    .name = "mrec",
    .synopsis = SYNOPSIS,
    .args = "SUBCOMMAND",
    .about = "mrec-lmdb collections of molecular records (libzmrec): validate, describe\n"
             "and dump them, or import ASE-readable files (loaderx.mrec). --nolock may also\n"
             "follow the subcommand. zr mrec SUB --help gives a subcommand's options and an\n"
             "example. import runs the importer of the Python package loaderx: it needs\n"
             "Python 3 with loaderx and ASE ($ZR_PYTHON, else python3 on PATH).",
    .example = "zr mrec import dump.lammpstrj -o run.mrec.lmdb\n"
               "zr mrec validate run.mrec.lmdb\n"
               "zr mrec --nolock info /media/cdrom/run.mrec.lmdb",
    .flags = ZR_ARGS_FIRST,
};

static const zr_command VALIDATE = {
    .name = "mrec validate",
    .synopsis = "zr mrec validate [--json] [--nolock] FILE",
    .args = "FILE",
    .help = "usage: zr mrec validate [--json] [--nolock] FILE\n"
            "Check every rule of the layout: meta, index, every record's meta, system and frames\n"
            "(decoded, resolved, references and aligned blocks), keys outside the layout.\n"
            "Runs in a child process so damaged LMDB pages cannot crash zr.\n"
            "options:\n  --json    print {\"file\", \"ok\", ...} on stdout\n"
            "  --nolock  open without LMDB's lock file (read-only media)\n"
            "exit status: 0 valid, 1 a rule is broken, 3 cannot open\n"
            "example: zr mrec validate water.mrec.lmdb\n",
};

static const zr_command INFO = {
    .name = "mrec info",
    .synopsis = "zr mrec info [--json] [--nolock] FILE",
    .args = "FILE",
    .help = "usage: zr mrec info [--json] [--nolock] FILE\n"
            "Records, frames, atoms, the meta document, the collection's own index columns, and the\n"
            "blocks of record 0's system and first frame. Every stored value is read and decoded\n"
            "(the rules across values are validate's).\n"
            "options:\n  --json    print one JSON object on stdout\n"
            "  --nolock  open without LMDB's lock file (read-only media)\n"
            "exit status: 0 ok, 1 a stored value is damaged (\"ok\": false), 3 cannot open\n"
            "example: zr mrec info --json water.mrec.lmdb\n",
};

static const zr_command DUMP = {
    .name = "mrec dump",
    .synopsis = "zr mrec dump [--nolock] FILE RECORD [FRAME]\n"
                "zr mrec dump [--nolock] FILE index",
    .args = "FILE RECORD [FRAME]",
    .help = "usage: zr mrec dump [--nolock] FILE RECORD [FRAME]\n"
            "       zr mrec dump [--nolock] FILE index\n"
            "A record's index row, meta and system; or frame FRAME of it resolved (carry-forward);\n"
            "or the index frame. Headers print as compact JSON, arrays past 6 elements cut; columns\n"
            "print their first 9 elements, a null row as null.\n"
            "options:\n  --nolock  open without LMDB's lock file (read-only media)\n"
            "exit status: 0 ok, 1 the value is damaged, 2 usage, 3 cannot open,\n"
            "4 RECORD or FRAME out of range\n"
            "example: zr mrec dump water.mrec.lmdb 0 3\n",
    .flags = ZR_ARGS_NUMBERS, /* "-1" is a (refused) RECORD, not an option */
};

#define NOLOCK_HELP "open without LMDB's lock file (read-only media; no writer may run)"

/* The failed call's detail (zmr_last_error), the file named once; the
 * status from zr's one exit map. */
static int fail(const zr_command *cmd, const char *path, int st)
{
    return zr_fail_detail(cmd->name, path, zmr_last_error(), zr_exit_from_status(st));
}

/* zmr_open refused the file (zr's rule for a failed open). */
static int fail_open(const zr_command *cmd, const char *path, int st)
{
    return zr_fail_detail(cmd->name, path, zmr_last_error(), zr_exit_from_open(st));
}

/* The options of validate and info. */
typedef struct opts {
    int json, nolock, in_process;
} opts;

static void print_blocks(const char *title, const zmr_frame *f)
{
    for (size_t b = 0; b < zmr_frame_nblocks(f); b++) {
        printf("%s%s (%" PRIu64 " rows):", title, zmr_frame_block_name(f, b), zmr_frame_block_count(f, b));
        for (size_t c = 0; c < zmr_frame_ncolumns(f, b); c++) {
            zmr_column col;
            zmr_frame_column(f, b, c, &col);
            printf(" %s:%s", col.name, zmr_dtype_name(col.dtype));
        }
        printf("\n");
    }
}

static json_object *json_blocks(const zmr_frame *f)
{
    json_object *blocks = json_object_new_array();
    for (size_t b = 0; f && b < zmr_frame_nblocks(f); b++) {
        json_object *blk = json_object_new_object(), *cols = json_object_new_array();
        zr_json_str(blk, "name", zmr_frame_block_name(f, b));
        zr_json_u64(blk, "rows", zmr_frame_block_count(f, b));
        for (size_t c = 0; c < zmr_frame_ncolumns(f, b); c++) {
            zmr_column col;
            zmr_frame_column(f, b, c, &col);
            json_object *jc = json_object_new_object();
            zr_json_str(jc, "name", col.name);
            zr_json_str(jc, "dtype", zmr_dtype_name(col.dtype));
            json_object_array_add(cols, jc);
        }
        json_object_object_add(blk, "columns", cols);
        json_object_array_add(blocks, blk);
    }
    return blocks;
}

static int is_binding_column(const char *name)
{
    static const char *const binding[] = {"first_frame", "n_frames", "n_atoms", "has_trajectory"};
    for (int k = 0; k < 4; k++)
        if (!strcmp(name, binding[k]))
            return 1;
    return 0;
}

/* Decode every stored value of the collection: each record's meta
 * document, system and stored updates, in record order (the rules across
 * values are validate's). The first damaged one is reported; returns its
 * status or ZMR_OK. */
static int read_every_value(zmr_reader *r, const char *path)
{
    int st = ZMR_OK;
    for (uint64_t rec = 0; st == ZMR_OK && rec < zmr_n_records(r); rec++) {
        char *meta = NULL;
        zmr_frame *f = NULL;
        uint64_t nf = 0;
        if ((st = zmr_read_record_meta(r, rec, &meta)) == ZMR_OK && (st = zmr_read_system(r, rec, &f)) == ZMR_OK)
            st = zmr_record_info(r, rec, NULL, &nf, NULL, NULL);
        zmr_free(meta);
        zmr_frame_free(f);
        for (uint64_t k = 0; st == ZMR_OK && k < nf; k++) {
            if ((st = zmr_read_update(r, rec, k, &f)) == ZMR_OK)
                zmr_frame_free(f);
        }
    }
    if (st < 0)
        fail(&INFO, path, st);
    return st;
}

/* The collection's own index columns (the binding's four left out). */
static json_object *json_index_columns(const zmr_frame *idx)
{
    json_object *cols = json_object_new_array();
    for (size_t c = 0; idx && c < zmr_frame_ncolumns(idx, 0); c++) {
        zmr_column col;
        zmr_frame_column(idx, 0, c, &col);
        if (is_binding_column(col.name))
            continue;
        json_object *jc = json_object_new_object();
        zr_json_str(jc, "name", col.name);
        zr_json_str(jc, "dtype", zmr_dtype_name(col.dtype));
        json_object_object_add(jc, "masked", json_object_new_boolean(col.validity != NULL));
        if (col.precision != 0)
            json_object_object_add(jc, "precision", json_object_new_double(col.precision));
        json_object_array_add(cols, jc);
    }
    return cols;
}

static void print_index_columns(const zmr_frame *idx)
{
    int n = 0;
    printf("index columns: ");
    for (size_t c = 0; idx && c < zmr_frame_ncolumns(idx, 0); c++) {
        zmr_column col;
        zmr_frame_column(idx, 0, c, &col);
        if (is_binding_column(col.name))
            continue;
        printf("%s %s:%s", n++ ? "," : "", col.name, zmr_dtype_name(col.dtype));
        if (col.precision != 0)
            printf(" precision %.17g", col.precision);
        if (col.validity)
            printf(" masked");
    }
    printf("%s\n", n ? "" : " none (only the binding's four)");
}

/* What info reports: counts over every record, the frames it reads. */
typedef struct info_view {
    zmr_reader *r;
    uint64_t records, amin, amax, atot, ntraj;
    zmr_frame *idx, *sys, *fr;
    int ok;
} info_view;

static void info_json(const char *path, const info_view *v)
{
    json_object *j = json_object_new_object(), *atoms = json_object_new_object();
    zr_json_str(j, "file", path);
    zr_json_str(j, "layout", "mrec-lmdb");
    json_object_object_add(j, "layout_version", json_object_new_int(ZMR_LAYOUT_VERSION));
    json_object_object_add(j, "molrec_version", json_object_new_int(zmr_molrec_version(v->r)));
    zr_json_u64(j, "records", v->records);
    zr_json_u64(j, "with_trajectory", v->ntraj);
    zr_json_u64(j, "frames", zmr_n_frames(v->r));
    zr_json_u64(atoms, "total", v->atot);
    zr_json_u64(atoms, "min", v->records ? v->amin : 0);
    zr_json_u64(atoms, "max", v->amax);
    json_object_object_add(j, "atoms", atoms);
    const char *meta = zmr_meta_json(v->r);
    json_object *m = meta ? json_tokener_parse(meta) : NULL;
    json_object_object_add(j, "meta", m ? m : (meta ? json_object_new_string(meta) : NULL));
    json_object_object_add(j, "index_columns", json_index_columns(v->idx));
    json_object_object_add(j, "system_blocks", json_blocks(v->sys));
    json_object_object_add(j, "frame_blocks", json_blocks(v->fr));
    json_object_object_add(j, "ok", json_object_new_boolean(v->ok));
    zr_json_print(j);
}

static void info_text(const char *path, const info_view *v)
{
    printf("file:           %s\n", path);
    printf("layout:         mrec-lmdb, layout_version %d, molrec_version %d\n", ZMR_LAYOUT_VERSION,
           zmr_molrec_version(v->r));
    printf("records:        %" PRIu64 " (%" PRIu64 " with a trajectory)\n", v->records, v->ntraj);
    printf("frames:         %" PRIu64 "\n", zmr_n_frames(v->r));
    if (v->records)
        printf("atoms:          %" PRIu64 " total, %" PRIu64 "..%" PRIu64 " per record\n", v->atot,
               v->amin, v->amax);
    printf("meta:           %s\n", zmr_meta_json(v->r));
    print_index_columns(v->idx);
    if (v->sys)
        print_blocks("system blocks:  ", v->sys);
    if (v->fr)
        print_blocks("frame blocks:   ", v->fr);
}

/* info reads (and so checks) the index and every stored value (record 0's
 * system and first frame are summarized): a damaged one is reported and
 * makes the exit status 1 and "ok" false. */
static int cmd_info(const char *path, const opts *o)
{
    info_view v = {.amin = UINT64_MAX, .ok = 1};
    int st = zmr_open(&v.r, path, o->nolock ? ZMR_OPEN_NOLOCK : 0);
    if (st < 0)
        return fail_open(&INFO, path, st);
    zmr_reader *r = v.r;
    v.records = zmr_n_records(r);
    for (uint64_t k = 0; k < v.records; k++) {
        uint64_t ff, nf, na;
        bool ht;
        zmr_record_info(r, k, &ff, &nf, &na, &ht);
        v.amin = na < v.amin ? na : v.amin;
        v.amax = na > v.amax ? na : v.amax;
        v.atot += na;
        v.ntraj += ht;
    }
    if ((st = zmr_read_index(r, &v.idx)) < 0)
        v.ok = 0, fail(&INFO, path, st);
    if (v.records && (st = zmr_read_system(r, 0, &v.sys)) < 0)
        v.ok = 0, fail(&INFO, path, st);
    uint64_t nf0 = 0;
    if (v.records && zmr_record_info(r, 0, NULL, &nf0, NULL, NULL) == ZMR_OK && nf0 &&
        (st = zmr_read_frame(r, 0, 0, &v.fr)) < 0)
        v.ok = 0, fail(&INFO, path, st);
    if (v.ok && read_every_value(r, path) < 0)
        v.ok = 0;
    if (o->json)
        info_json(path, &v);
    else
        info_text(path, &v);
    zmr_frame_free(v.idx);
    zmr_frame_free(v.sys);
    zmr_frame_free(v.fr);
    zmr_close(r);
    return v.ok ? 0 : ZR_EXIT_FAILED;
}

/* ----------------------------------------------- compact header printing
 *
 * A frame header lists a string column's values and may hold long arrays
 * (1000 element names): print it with every array longer than
 * SUMMARY_KEEP elements cut to its first SUMMARY_KEEP and a count of the
 * rest. The header is the library's own compact JSON, so a small scanner
 * suffices. */
#define SUMMARY_KEEP 6

static const char *json_skip(const char *p);

static const char *json_skip_string(const char *p)
{
    for (p++; *p && *p != '"'; p++)
        if (*p == '\\' && p[1])
            p++;
    return *p ? p + 1 : p;
}

/* Past one JSON value starting at p. */
static const char *json_skip(const char *p)
{
    if (*p == '"')
        return json_skip_string(p);
    if (*p == '[' || *p == '{') {
        char close = *p == '[' ? ']' : '}';
        p++;
        while (*p && *p != close) {
            p = json_skip(p);
            if (*p == ':' || *p == ',')
                p++;
        }
        return *p ? p + 1 : p;
    }
    while (*p && *p != ',' && *p != ']' && *p != '}' && *p != ':')
        p++;
    return p;
}

static const char *json_print_summary(const char *p)
{
    if (*p == '"') {
        const char *e = json_skip_string(p);
        fwrite(p, 1, (size_t)(e - p), stdout);
        return e;
    }
    if (*p == '{') {
        putchar(*p++);
        while (*p && *p != '}') {
            p = json_print_summary(p); /* key */
            if (*p == ':')
                putchar(*p++);
            p = json_print_summary(p);
            if (*p == ',')
                putchar(*p++);
        }
        if (*p)
            putchar(*p++);
        return p;
    }
    if (*p == '[') {
        putchar(*p++);
        uint64_t n = 0;
        while (*p && *p != ']') {
            if (n < SUMMARY_KEEP) {
                if (n)
                    putchar(',');
                p = json_print_summary(p);
            } else {
                p = json_skip(p);
            }
            n++;
            if (*p == ',')
                p++;
        }
        if (n > SUMMARY_KEEP)
            printf(",...(%" PRIu64 " more)", n - SUMMARY_KEEP);
        if (*p)
            putchar(*p++);
        return p;
    }
    const char *e = json_skip(p);
    fwrite(p, 1, (size_t)(e - p), stdout);
    return e;
}

/* Element e of a column, as " <value>": integers in decimal, f64 with 10
 * significant digits, complex as re+imj, strings as stored (a null entry
 * of a string column: null). */
static void print_element(const zmr_column *col, uint64_t e)
{
    const unsigned char *p = col->data;
    union {
        double d;
        float f[2];
        int64_t i64;
        uint64_t u64;
        int32_t i32;
        uint32_t u32;
        int16_t i16;
        uint16_t u16;
        int8_t i8;
    } v;
    size_t isz = zmr_dtype_itemsize(col->dtype);
    if (col->dtype != ZMR_STRING && col->dtype != ZMR_C128)
        memcpy(&v, p + isz * e, isz);
    switch (col->dtype) {
    case ZMR_F64: printf(" %.10g", v.d); break;
    case ZMR_I64: printf(" %" PRId64, v.i64); break;
    case ZMR_U64: printf(" %" PRIu64, v.u64); break;
    case ZMR_I32: printf(" %" PRId32, v.i32); break;
    case ZMR_U32: printf(" %" PRIu32, v.u32); break;
    case ZMR_I16: printf(" %d", (int)v.i16); break;
    case ZMR_U16: printf(" %u", (unsigned)v.u16); break;
    case ZMR_I8: printf(" %d", (int)v.i8); break;
    case ZMR_U8: case ZMR_BOOL: printf(" %u", p[e]); break;
    case ZMR_C64: printf(" %.7g%+.7gj", (double)v.f[0], (double)v.f[1]); break;
    case ZMR_C128: {
        double re, im;
        memcpy(&re, p + 16 * e, 8);
        memcpy(&im, p + 16 * e + 8, 8);
        printf(" %.10g%+.10gj", re, im);
        break;
    }
    case ZMR_STRING: printf(" %s", col->strings[e] ? col->strings[e] : "null"); break;
    }
}

static void print_frame(zmr_frame *f)
{
    const char *h = zmr_frame_header_json(f);
    printf("header: ");
    if (h)
        json_print_summary(h);
    printf("\n");
    for (size_t b = 0; b < zmr_frame_nblocks(f); b++)
        for (size_t c = 0; c < zmr_frame_ncolumns(f, b); c++) {
            zmr_column col;
            zmr_frame_column(f, b, c, &col);
            printf("%s/%s %s:", zmr_frame_block_name(f, b), col.name, zmr_dtype_name(col.dtype));
            uint64_t n = col.nelem < 9 ? col.nelem : 9, per_row = col.shape[0] ? col.nelem / col.shape[0] : 1;
            for (uint64_t e = 0; e < n; e++) {
                if (col.validity && !col.validity[e / per_row])
                    printf(" null"); /* a null row: its stored value means nothing */
                else
                    print_element(&col, e);
            }
            printf("%s\n", col.nelem > n ? " ..." : "");
        }
}

/* RECORD or FRAME: a number in 0..2^64-1 (digits only). */
static int dump_number(const char *what, const char *s, uint64_t *out)
{
    if (zr_parse_u64(s, out) == 0)
        return 0;
    zr_error(DUMP.name, NULL, "%s '%s' is not a number in 0..18446744073709551615 (or 'index')",
             what, s);
    return ZR_EXIT_USAGE;
}

static int cmd_dump(int argc, char **argv, int nolock)
{
    const zr_option options[] = {
        ZR_OPT_FLAG(NULL, "--nolock", &nolock, NOLOCK_HELP),
        ZR_OPT_END,
    };
    zr_args args;
    int rc = zr_parse_args(&DUMP, options, argc, argv, &args);
    if (rc != ZR_ARGS_GO)
        return rc;
    rc = 0;
    const char *path = args.v[0];
    uint64_t rec = 0, k = 0;
    int index = args.n == 2 && !strcmp(args.v[1], "index");
    if (!index && ((rc = dump_number("RECORD", args.v[1], &rec)) != 0 ||
                   (args.n == 3 && (rc = dump_number("FRAME", args.v[2], &k)) != 0)))
        return rc;
    zmr_reader *r;
    int st = zmr_open(&r, path, nolock ? ZMR_OPEN_NOLOCK : 0);
    if (st < 0)
        return fail_open(&DUMP, path, st);
    zmr_frame *f = NULL;
    if (index) {
        if ((st = zmr_read_index(r, &f)) < 0) {
            rc = fail(&DUMP, path, st);
        } else {
            printf("index ");
            print_frame(f);
        }
    } else if (args.n == 2) {
        char *meta;
        uint64_t ff, nf, na;
        bool ht;
        if ((st = zmr_record_info(r, rec, &ff, &nf, &na, &ht)) < 0 || (st = zmr_read_record_meta(r, rec, &meta)) < 0) {
            rc = fail(&DUMP, path, st);
        } else {
            printf("record %" PRIu64 ": first_frame %" PRIu64 ", n_frames %" PRIu64 ", n_atoms %" PRIu64
                   ", has_trajectory %s\nmeta: %s\n", rec, ff, nf, na, ht ? "true" : "false", meta);
            zmr_free(meta);
            if ((st = zmr_read_system(r, rec, &f)) < 0)
                rc = fail(&DUMP, path, st);
            else if (f == NULL)
                printf("system: none\n");
            else
                printf("system "), print_frame(f);
        }
    } else if ((st = zmr_read_frame(r, rec, k, &f)) < 0) {
        rc = fail(&DUMP, path, st);
    } else {
        printf("record %" PRIu64 " frame %" PRIu64 " (resolved) ", rec, k);
        print_frame(f);
    }
    zmr_frame_free(f);
    zmr_close(r);
    return rc;
}

/* {"file": path, "ok": false, "error": why} on stdout. */
static void json_not_ok(const char *path, const char *why)
{
    json_object *j = json_object_new_object();
    zr_json_str(j, "file", path);
    json_object_object_add(j, "ok", json_object_new_boolean(0));
    zr_json_str(j, "error", why);
    zr_json_print(j);
}

/* Open (a file that cannot be opened exits 3), then walk every rule. */
static int validate_here(const char *path, const opts *o)
{
    unsigned flags = o->nolock ? ZMR_OPEN_NOLOCK : 0;
    zmr_reader *r = NULL;
    int st = zmr_open(&r, path, flags);
    if (st < 0) {
        if (o->json)
            json_not_ok(path, zmr_last_error());
        return fail_open(&VALIDATE, path, st);
    }
    const uint64_t records = zmr_n_records(r), frames = zmr_n_frames(r);
    const int version = zmr_molrec_version(r);
    zmr_close(r); /* zmr_validate opens the file itself */
    if ((st = zmr_validate(path, flags)) < 0) {
        if (o->json)
            json_not_ok(path, zmr_last_error());
        return fail(&VALIDATE, path, st);
    }
    if (o->json) {
        json_object *j = json_object_new_object();
        zr_json_str(j, "file", path);
        json_object_object_add(j, "ok", json_object_new_boolean(1));
        zr_json_u64(j, "records", records);
        zr_json_u64(j, "frames", frames);
        json_object_object_add(j, "molrec_version", json_object_new_int(version));
        zr_json_print(j);
    } else {
        printf("%s: ok (%" PRIu64 " records, %" PRIu64 " frames, molrec_version %d)\n", path, records,
               frames, version);
    }
    return 0;
}

/* The walk runs in a child (this program again, as `zr mrec validate
 * --in-process`, opening the environment there): a child that dies
 * abnormally means liblmdb crashed on the file. liblmdb's page walk trusts
 * the file, so a damaged one can also send it into a loop: the child has a
 * time limit (ZR_MREC_VALIDATE_TIMEOUT seconds, default 60, 0 for none). */
static int cmd_validate(const char *path, const opts *o)
{
    if (o->in_process)
        return validate_here(path, o);
    unsigned limit = 60;
    const char *env = getenv("ZR_MREC_VALIDATE_TIMEOUT");
    if (env && *env)
        limit = (unsigned)strtoul(env, NULL, 10);
    fflush(stdout);
    fflush(stderr);
    char self[4096];
    int code = 0, crashed = 0;
    int rc = zrp_self_exe(self, sizeof self);
    if (rc == 0) {
        const char *av[8];
        size_t n = 0;
        av[n++] = self;
        av[n++] = "mrec";
        av[n++] = "validate";
        av[n++] = "--in-process";
        if (o->nolock)
            av[n++] = "--nolock";
        if (o->json)
            av[n++] = "--json";
        av[n++] = "--";
        av[n++] = path;
        av[n] = NULL;
        rc = zrp_run_wait(av, limit, &code, &crashed);
    }
    if (rc < 0) {
        fprintf(stderr, "zr mrec validate: cannot start a child (%s); validating in this process\n",
                strerror(-rc));
        return validate_here(path, o);
    }
    char why[160] = "";
    if (crashed == 2)
        snprintf(why, sizeof why, "timed out after %u s", limit);
    else if (crashed && code >= 0 && code < 256)
        snprintf(why, sizeof why, "the LMDB structure is damaged (reader crashed with signal %d)", code);
    else if (crashed)
        snprintf(why, sizeof why, "the LMDB structure is damaged (reader crashed with exception 0x%08x)",
                 (unsigned)code);
    if (!crashed)
        return code;
    if (o->json)
        json_not_ok(path, why);
    fprintf(stderr, "zr mrec validate: %s: %s%s\n", path, why,
            crashed == 2 ? " (the LMDB structure is damaged, or the file needs longer: set "
                           "ZR_MREC_VALIDATE_TIMEOUT)" : "");
    return ZR_EXIT_FAILED;
}

/* zr mrec import is the ASE-based importer of the Python package loaderx
 * (loaderx.mrec.main, run as "zr mrec"): this tool stays C, the importer
 * needs Python, loaderx and ASE. It runs in $ZR_PYTHON, else python3 on
 * PATH; the `zr` a pip install puts in an environment sets ZR_PYTHON to
 * that environment's interpreter, so .venv/bin/zr works without the venv
 * on PATH. A missing interpreter or package is one line naming what to
 * install, exit status 3 (like an input that cannot be opened). Its
 * arguments, --help and exit statuses are loaderx.mrec's (the same map). */
#define IMPORT_NEEDS "zr mrec import runs the importer of the Python package loaderx (with ASE)"
static int run_import(int argc, char **argv, int nolock)
{
    if (nolock)
        return zr_usage(&MREC, "--nolock does not apply to 'import' (it writes a new file)");
    char **av = calloc((size_t)argc + 4, sizeof *av);
    if (av == NULL)
        return ZR_EXIT_FAILED;
    const char *py = getenv("ZR_PYTHON");
    av[0] = (char *)(py && *py ? py : "python3");
    av[1] = "-c";
    av[2] = "import sys\n"
            "try:\n"
            "    from loaderx.mrec import main\n"
            "except ImportError as e:\n"
            "    sys.stderr.write('" IMPORT_NEEDS "; %s cannot import it (%s): install it there (pip install "
            "loaderx ase), or set ZR_PYTHON to a python3 that has it\\n' % (sys.executable, e))\n"
            "    sys.exit(3)\n"
            "sys.exit(main(sys.argv[1:], prog='zr mrec'))\n";
    for (int k = 0; k < argc; k++)
        av[3 + k] = argv[k];
    fflush(stdout);
    fflush(stderr);
    int code = 1, crashed = 0;
    int rc = zrp_run_wait((const char *const *)av, 0, &code, &crashed);
    if (rc < 0)
        fprintf(stderr, IMPORT_NEEDS "; cannot run %s (%s): install Python 3 with loaderx and ASE, or set "
                        "ZR_PYTHON to one\n", av[0], strerror(-rc));
    free(av);
    return rc < 0 ? ZR_EXIT_OPEN : crashed ? ZR_EXIT_FAILED : code;
}

/* validate and info: FILE, --json, --nolock (validate's child also
 * --in-process, not listed). */
static int run_file_sub(const zr_command *cmd, int argc, char **argv, int nolock)
{
    opts o = {.nolock = nolock};
    const int validate = cmd == &VALIDATE;
    zr_option options[] = {
        ZR_OPT_FLAG(NULL, "--json", &o.json, "one JSON object on stdout"),
        ZR_OPT_FLAG(NULL, "--nolock", &o.nolock, NOLOCK_HELP),
        ZR_OPT_FLAG(NULL, "--in-process", &o.in_process, NULL), /* validate's child */
        ZR_OPT_END,
    };
    if (!validate)
        options[2] = (zr_option)ZR_OPT_END;
    zr_args args;
    int rc = zr_parse_args(cmd, options, argc, argv, &args);
    if (rc != ZR_ARGS_GO)
        return rc;
    return validate ? cmd_validate(args.v[0], &o) : cmd_info(args.v[0], &o);
}

static int run_validate(int argc, char **argv, int nolock)
{
    return run_file_sub(&VALIDATE, argc, argv, nolock);
}

static int run_info(int argc, char **argv, int nolock)
{
    return run_file_sub(&INFO, argc, argv, nolock);
}

/* The subcommands: argv from the subcommand on (argv[0] its name), and
 * whether --nolock came before it. */
static const struct mrec_sub {
    const char *name;
    int (*run)(int argc, char **argv, int nolock);
} SUBS[] = {
    {"validate", run_validate},
    {"info", run_info},
    {"dump", cmd_dump},
    {"import", run_import},
};

int zr_cmd_mrec(int argc, char **argv)
{
    int nolock = 0;
    const zr_option options[] = {
        ZR_OPT_FLAG(NULL, "--nolock", &nolock, NOLOCK_HELP),
        ZR_OPT_END,
    };
    zr_args args;
    int rc = zr_parse_args(&MREC, options, argc, argv, &args);
    if (rc != ZR_ARGS_GO)
        return rc;
    if (args.n == 0)
        return zr_usage(&MREC, "missing SUBCOMMAND (validate, info, dump or import)");
    for (size_t k = 0; k < sizeof SUBS / sizeof SUBS[0]; k++)
        if (!strcmp(args.v[0], SUBS[k].name))
            return SUBS[k].run(args.n, args.v, nolock);
    return zr_usage(&MREC, "unknown subcommand '%s'", args.v[0]);
}
