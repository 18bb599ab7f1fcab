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
 * Exit status: 0 ok; 1 a check failed / the file is damaged; 2 usage (bad
 * arguments, a record or frame number out of range); 3 the file cannot be
 * opened (missing, unreadable, a directory, not a collection, locked).
 * Errors go to stderr as "zr mrec SUB: FILE: problem".
 *
 * validate runs the walk in a child process (this program again, as
 * "zr mrec validate --in-process FILE"): LMDB keeps no page checksums, so
 * damage inside its B-tree pages can crash liblmdb itself (SIGSEGV, or an
 * assertion that aborts). The parent then reports the damage instead of
 * dying with the child. Processes are started through the platform layer.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <zmrec.h>

#include "zr_cli.h"
#include "zr_platform.h"

#define EXIT_CHECK 1
#define EXIT_OPEN 3

static const char USAGE[] =
    "usage: zr mrec [--nolock] validate [--json] FILE\n"
    "       zr mrec [--nolock] info [--json] FILE\n"
    "       zr mrec [--nolock] dump FILE RECORD [FRAME]\n"
    "       zr mrec [--nolock] dump FILE index\n"
    "       zr mrec import FILE... [--format NAME] [--units STYLE] -o OUT.mrec.lmdb\n";

static const char OPTIONS[] =
    "options:\n"
    "  --json      validate, info: one JSON object on stdout\n"
    "  --nolock    open without LMDB's lock file (read-only media; no writer may run)\n"
    "  -h, --help  this help (zr mrec SUB --help: the subcommand's)\n"
    "import runs the importer of the Python package loaderx: it needs Python 3 with loaderx and ASE\n"
    "($ZR_PYTHON, else python3 on PATH)\n"
    "exit status: 0 ok, 1 check failed or file damaged, 2 usage, 3 cannot open\n";

struct sub_help {
    const char *name, *text;
};

static const struct sub_help SUB_HELP[] = {
    {"validate", "usage: zr mrec validate [--json] [--nolock] FILE\n"
                 "Check every rule of the layout: meta, index, every record's meta, system and frames\n"
                 "(decoded, resolved, references and aligned blocks), keys outside the layout.\n"
                 "Runs in a child process so damaged LMDB pages cannot crash zr.\n"
                 "options:\n  --json    print {\"file\", \"ok\", ...} on stdout\n"
                 "  --nolock  open without LMDB's lock file (read-only media)\n"
                 "exit status: 0 valid, 1 a rule is broken, 3 cannot open\n"
                 "example: zr mrec validate water.mrec.lmdb\n"},
    {"info", "usage: zr mrec info [--json] [--nolock] FILE\n"
             "Records, frames, atoms, the meta document, the collection's own index columns, and the\n"
             "blocks of record 0's system and first frame. Every stored value is read and decoded\n"
             "(the rules across values are validate's).\n"
             "options:\n  --json    print one JSON object on stdout\n"
             "  --nolock  open without LMDB's lock file (read-only media)\n"
             "exit status: 0 ok, 1 a stored value is damaged (\"ok\": false), 3 cannot open\n"
             "example: zr mrec info --json water.mrec.lmdb\n"},
    {"dump", "usage: zr mrec dump [--nolock] FILE RECORD [FRAME]\n"
             "       zr mrec dump [--nolock] FILE index\n"
             "A record's index row, meta and system; or frame FRAME of it resolved (carry-forward);\n"
             "or the index frame. Headers print as compact JSON, arrays past 6 elements cut; columns\n"
             "print their first 9 elements, a null row as null.\n"
             "options:\n  --nolock  open without LMDB's lock file (read-only media)\n"
             "exit status: 0 ok, 1 the value is damaged, 2 usage or RECORD / FRAME out of range,\n"
             "3 cannot open\n"
             "example: zr mrec dump water.mrec.lmdb 0 3\n"},
};

static void print_usage(FILE *out)
{
    fputs(USAGE, out);
}

static int usage_error(const char *fmt, const char *arg)
{
    fputs("zr mrec: ", stderr);
    fprintf(stderr, fmt, arg);
    fputc('\n', stderr);
    print_usage(stderr);
    return ZR_EXIT_USAGE;
}

static int exit_for(int st)
{
    switch (st) {
    case ZMR_EIO: case ZMR_EBUSY: case ZMR_EEXIST: case ZMR_ENOTCOLL: return EXIT_OPEN;
    case ZMR_ERANGE: return ZR_EXIT_USAGE;
    default: return EXIT_CHECK;
    }
}

/* "zr mrec SUB: FILE: detail" (the file named once). Returns the exit status. */
static int fail(const char *sub, const char *path, int st)
{
    const char *d = zmr_last_error();
    if (strstr(d, path))
        fprintf(stderr, "zr mrec %s: %s\n", sub, d);
    else
        fprintf(stderr, "zr mrec %s: %s: %s\n", sub, path, d);
    return exit_for(st);
}

static void json_str(FILE *out, const char *s)
{
    fputc('"', out);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\')
            fprintf(out, "\\%c", *p);
        else if (*p < 0x20)
            fprintf(out, "\\u%04x", *p);
        else
            fputc(*p, out);
    }
    fputc('"', out);
}

struct opts {
    int json, nolock, in_process;
    int nargs;
    char *args[4];
};

/* Options and positional arguments of subcommand `sub` (argv[first..]):
 * --json (when allowed), --nolock, -h/--help, "--". Returns -1 to go on,
 * else an exit status. */
static int parse(int argc, char **argv, int first, const char *sub, int json_ok, int max_args,
                 struct opts *o)
{
    int dashdash = 0;
    for (int k = first; k < argc; k++) {
        const char *a = argv[k];
        /* "-1" is a (refused) number, not an option */
        if (!dashdash && a[0] == '-' && a[1] != '\0' && !(a[1] >= '0' && a[1] <= '9')) {
            if (!strcmp(a, "--")) {
                dashdash = 1;
            } else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
                for (size_t h = 0; h < sizeof SUB_HELP / sizeof *SUB_HELP; h++)
                    if (!strcmp(SUB_HELP[h].name, sub))
                        fputs(SUB_HELP[h].text, stdout);
                return 0;
            } else if (!strcmp(a, "--nolock")) {
                o->nolock = 1;
            } else if (!strcmp(sub, "validate") && !strcmp(a, "--in-process")) {
                o->in_process = 1; /* internal: cmd_validate's child */
            } else if (json_ok && !strcmp(a, "--json")) {
                o->json = 1;
            } else {
                fprintf(stderr, "zr mrec %s: unknown option '%s'\n", sub, a);
                print_usage(stderr);
                return ZR_EXIT_USAGE;
            }
            continue;
        }
        if (o->nargs == max_args) {
            fprintf(stderr, "zr mrec %s: too many arguments ('%s')\n", sub, a);
            print_usage(stderr);
            return ZR_EXIT_USAGE;
        }
        o->args[o->nargs++] = argv[k];
    }
    if (o->nargs == 0) {
        fprintf(stderr, "zr mrec %s: FILE is missing\n", sub);
        print_usage(stderr);
        return ZR_EXIT_USAGE;
    }
    return -1;
}

/* A decimal number in 0..2^64-1: digits only (no sign, no spaces), and
 * refused rather than saturated when it does not fit. */
static int parse_u64(const char *what, const char *s, uint64_t *out)
{
    char *end;
    int ok = s != NULL && *s >= '0' && *s <= '9';
    unsigned long long v = 0;
    if (ok) {
        errno = 0;
        v = strtoull(s, &end, 10);
        ok = *end == '\0' && errno == 0;
    }
    if (!ok) {
        fprintf(stderr, "zr mrec dump: %s '%s' is not a number in 0..18446744073709551615 (or 'index')\n",
                what, s ? s : "");
        return -1;
    }
    *out = v;
    return 0;
}

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

static void json_blocks(const zmr_frame *f)
{
    printf("[");
    for (size_t b = 0; f && b < zmr_frame_nblocks(f); b++) {
        printf("%s{\"name\":", b ? "," : "");
        json_str(stdout, zmr_frame_block_name(f, b));
        printf(",\"rows\":%" PRIu64 ",\"columns\":[", zmr_frame_block_count(f, b));
        for (size_t c = 0; c < zmr_frame_ncolumns(f, b); c++) {
            zmr_column col;
            zmr_frame_column(f, b, c, &col);
            printf("%s{\"name\":", c ? "," : "");
            json_str(stdout, col.name);
            printf(",\"dtype\":\"%s\"}", zmr_dtype_name(col.dtype));
        }
        printf("]}");
    }
    printf("]");
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
        fail("info", path, st);
    return st;
}

/* info reads (and so checks) the index and every stored value (record 0's
 * system and first frame are summarized): a damaged one is reported and
 * makes the exit status 1 and "ok" false. */
static int cmd_info(const char *path, const struct opts *o)
{
    zmr_reader *r;
    int st = zmr_open(&r, path, o->nolock ? ZMR_OPEN_NOLOCK : 0);
    if (st < 0)
        return fail("info", path, st);
    int rc = 0;
    uint64_t R = zmr_n_records(r), amin = UINT64_MAX, amax = 0, atot = 0, ntraj = 0;
    for (uint64_t k = 0; k < R; k++) {
        uint64_t ff, nf, na;
        bool ht;
        zmr_record_info(r, k, &ff, &nf, &na, &ht);
        amin = na < amin ? na : amin;
        amax = na > amax ? na : amax;
        atot += na;
        ntraj += ht;
    }
    zmr_frame *idx = NULL, *sys = NULL, *fr = NULL;
    if ((st = zmr_read_index(r, &idx)) < 0)
        rc = fail("info", path, st);
    if (R && (st = zmr_read_system(r, 0, &sys)) < 0)
        rc = fail("info", path, st);
    uint64_t nf0 = 0;
    if (R && zmr_record_info(r, 0, NULL, &nf0, NULL, NULL) == ZMR_OK && nf0 &&
        (st = zmr_read_frame(r, 0, 0, &fr)) < 0)
        rc = fail("info", path, st);
    if (!rc && read_every_value(r, path) < 0)
        rc = 1;
    if (rc)
        rc = EXIT_CHECK;
    if (o->json) {
        printf("{\"file\":");
        json_str(stdout, path);
        printf(",\"layout\":\"mrec-lmdb\",\"layout_version\":%d,\"molrec_version\":%d,\"records\":%" PRIu64
               ",\"with_trajectory\":%" PRIu64 ",\"frames\":%" PRIu64 ",\"atoms\":{\"total\":%" PRIu64
               ",\"min\":%" PRIu64 ",\"max\":%" PRIu64 "},\"meta\":%s,\"index_columns\":[",
               ZMR_LAYOUT_VERSION, zmr_molrec_version(r), R, ntraj, zmr_n_frames(r), atot, R ? amin : 0, amax,
               zmr_meta_json(r));
    } else {
        printf("file:           %s\n", path);
        printf("layout:         mrec-lmdb, layout_version %d, molrec_version %d\n", ZMR_LAYOUT_VERSION,
               zmr_molrec_version(r));
        printf("records:        %" PRIu64 " (%" PRIu64 " with a trajectory)\n", R, ntraj);
        printf("frames:         %" PRIu64 "\n", zmr_n_frames(r));
        if (R)
            printf("atoms:          %" PRIu64 " total, %" PRIu64 "..%" PRIu64 " per record\n", atot, amin, amax);
        printf("meta:           %s\n", zmr_meta_json(r));
        printf("index columns: ");
    }
    int n = 0;
    for (size_t c = 0; idx && c < zmr_frame_ncolumns(idx, 0); c++) {
        zmr_column col;
        zmr_frame_column(idx, 0, c, &col);
        if (is_binding_column(col.name))
            continue;
        if (o->json) {
            printf("%s{\"name\":", n++ ? "," : "");
            json_str(stdout, col.name);
            printf(",\"dtype\":\"%s\",\"masked\":%s", zmr_dtype_name(col.dtype), col.validity ? "true" : "false");
            if (col.precision != 0)
                printf(",\"precision\":%.17g", col.precision);
            printf("}");
            continue;
        }
        printf("%s %s:%s", n++ ? "," : "", col.name, zmr_dtype_name(col.dtype));
        if (col.precision != 0)
            printf(" precision %.17g", col.precision);
        if (col.validity)
            printf(" masked");
    }
    if (o->json) {
        printf("],\"system_blocks\":");
        json_blocks(sys);
        printf(",\"frame_blocks\":");
        json_blocks(fr);
        printf(",\"ok\":%s}\n", rc ? "false" : "true");
    } else {
        printf("%s\n", n ? "" : " none (only the binding's four)");
        if (sys)
            print_blocks("system blocks:  ", sys);
        if (fr)
            print_blocks("frame blocks:   ", fr);
    }
    zmr_frame_free(idx);
    zmr_frame_free(sys);
    zmr_frame_free(fr);
    zmr_close(r);
    return rc;
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

static int cmd_dump(int argc, char **argv)
{
    struct opts o = {0};
    int prc = parse(argc, argv, 2, "dump", 0, 3, &o);
    if (prc >= 0)
        return prc;
    if (o.nargs < 2)
        return usage_error("dump: RECORD (or 'index') is missing%s", "");
    const char *path = o.args[0];
    uint64_t rec = 0, k = 0;
    int index = o.nargs == 2 && !strcmp(o.args[1], "index");
    if (!index && (parse_u64("RECORD", o.args[1], &rec) < 0 || (o.nargs == 3 && parse_u64("FRAME", o.args[2], &k) < 0)))
        return ZR_EXIT_USAGE;
    zmr_reader *r;
    int st = zmr_open(&r, path, o.nolock ? ZMR_OPEN_NOLOCK : 0);
    if (st < 0)
        return fail("dump", path, st);
    int rc = 0;
    zmr_frame *f = NULL;
    if (index) {
        if ((st = zmr_read_index(r, &f)) < 0) {
            rc = fail("dump", path, st);
        } else {
            printf("index ");
            print_frame(f);
        }
    } else if (o.nargs == 2) {
        char *meta;
        uint64_t ff, nf, na;
        bool ht;
        if ((st = zmr_record_info(r, rec, &ff, &nf, &na, &ht)) < 0 || (st = zmr_read_record_meta(r, rec, &meta)) < 0) {
            rc = fail("dump", path, st);
        } else {
            printf("record %" PRIu64 ": first_frame %" PRIu64 ", n_frames %" PRIu64 ", n_atoms %" PRIu64
                   ", has_trajectory %s\nmeta: %s\n", rec, ff, nf, na, ht ? "true" : "false", meta);
            zmr_free(meta);
            if ((st = zmr_read_system(r, rec, &f)) < 0)
                rc = fail("dump", path, st);
            else if (f == NULL)
                printf("system: none\n");
            else
                printf("system "), print_frame(f);
        }
    } else if ((st = zmr_read_frame(r, rec, k, &f)) < 0) {
        rc = fail("dump", path, st);
    } else {
        printf("record %" PRIu64 " frame %" PRIu64 " (resolved) ", rec, k);
        print_frame(f);
    }
    zmr_frame_free(f);
    zmr_close(r);
    return rc;
}

static int validate_here(const char *path, const struct opts *o)
{
    unsigned flags = o->nolock ? ZMR_OPEN_NOLOCK : 0;
    zmr_reader *r = NULL;
    int st = zmr_validate(path, flags);
    if (st == ZMR_OK)
        st = zmr_open(&r, path, flags);
    if (st < 0) {
        if (o->json) {
            printf("{\"file\":");
            json_str(stdout, path);
            printf(",\"ok\":false,\"error\":");
            json_str(stdout, zmr_last_error());
            printf("}\n");
        }
        return fail("validate", path, st);
    }
    if (o->json) {
        printf("{\"file\":");
        json_str(stdout, path);
        printf(",\"ok\":true,\"records\":%" PRIu64 ",\"frames\":%" PRIu64 ",\"molrec_version\":%d}\n",
               zmr_n_records(r), zmr_n_frames(r), zmr_molrec_version(r));
    } else {
        printf("%s: ok (%" PRIu64 " records, %" PRIu64 " frames, molrec_version %d)\n", path, zmr_n_records(r),
               zmr_n_frames(r), zmr_molrec_version(r));
    }
    zmr_close(r);
    return 0;
}

/* The walk runs in a child (this program again, as `zr mrec validate
 * --in-process`, opening the environment there): a child that dies
 * abnormally means liblmdb crashed on the file. liblmdb's page walk trusts
 * the file, so a damaged one can also send it into a loop: the child has a
 * time limit (ZR_MREC_VALIDATE_TIMEOUT seconds, default 60, 0 for none). */
static int cmd_validate(const char *path, const struct opts *o)
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
    if (o->json) {
        printf("{\"file\":");
        json_str(stdout, path);
        printf(",\"ok\":false,\"error\":");
        json_str(stdout, why);
        printf("}\n");
    }
    fprintf(stderr, "zr mrec validate: %s: %s%s\n", path, why,
            crashed == 2 ? " (the LMDB structure is damaged, or the file needs longer: set "
                           "ZR_MREC_VALIDATE_TIMEOUT)" : "");
    return EXIT_CHECK;
}

/* zr mrec import is the ASE-based importer of the Python package loaderx
 * (loaderx.mrec.main, run as "zr mrec"): this tool stays C, the importer
 * needs Python, loaderx and ASE. It runs in $ZR_PYTHON, else python3 on
 * PATH; the `zr` a pip install puts in an environment sets ZR_PYTHON to
 * that environment's interpreter, so .venv/bin/zr works without the venv
 * on PATH. A missing interpreter or package is one line naming what to
 * install, exit status 3 (like an input that cannot be opened). */
#define IMPORT_NEEDS "zr mrec import runs the importer of the Python package loaderx (with ASE)"
static int run_import(int argc, char **argv)
{
    char **av = calloc((size_t)argc + 4, sizeof *av);
    if (av == NULL)
        return EXIT_CHECK;
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
    for (int k = 1; k < argc; k++)
        av[2 + k] = argv[k];
    fflush(stdout);
    fflush(stderr);
    int code = 1, crashed = 0;
    int rc = zrp_run_wait((const char *const *)av, 0, &code, &crashed);
    if (rc < 0)
        fprintf(stderr, IMPORT_NEEDS "; cannot run %s (%s): install Python 3 with loaderx and ASE, or set "
                        "ZR_PYTHON to one\n", av[0], strerror(-rc));
    free(av);
    return rc < 0 ? EXIT_OPEN : crashed ? EXIT_CHECK : code;
}

int zr_cmd_mrec(int argc, char **argv)
{
    /* options before the subcommand: --nolock, -h/--help */
    int nolock = 0, k = 1;
    for (; k < argc && argv[k][0] == '-'; k++) {
        if (!strcmp(argv[k], "-h") || !strcmp(argv[k], "--help")) {
            print_usage(stdout);
            fputs(OPTIONS, stdout);
            fputs("examples:\n  zr mrec import dump.lammpstrj -o run.mrec.lmdb\n"
                  "  zr mrec validate run.mrec.lmdb\n  zr mrec --nolock info /media/cdrom/run.mrec.lmdb\n",
                  stdout);
            return 0;
        }
        if (strcmp(argv[k], "--nolock"))
            return usage_error("unknown option '%s'", argv[k]);
        nolock = 1;
    }
    if (k == argc) {
        print_usage(stderr);
        return ZR_EXIT_USAGE;
    }
    /* argv from the subcommand on, "mrec" kept in front */
    argv += k - 1;
    argc -= k - 1;
    const char *sub = argv[1];
    if (!strcmp(sub, "import")) {
        if (nolock)
            return usage_error("--nolock does not apply to '%s' (it writes a new file)", sub);
        return run_import(argc, argv);
    }
    if (strcmp(sub, "validate") && strcmp(sub, "info") && strcmp(sub, "dump"))
        return usage_error("unknown subcommand '%s'", sub);
    if (!strcmp(sub, "dump")) {
        if (!nolock)
            return cmd_dump(argc, argv);
        /* hand --nolock on to the subcommand's own parser */
        char **av = calloc((size_t)argc + 2, sizeof *av);
        if (av == NULL)
            return EXIT_CHECK;
        av[0] = argv[0];
        av[1] = argv[1];
        av[2] = "--nolock";
        for (int j = 2; j < argc; j++)
            av[j + 1] = argv[j];
        int rc = cmd_dump(argc + 1, av);
        free(av);
        return rc;
    }
    struct opts o = {0};
    o.nolock = nolock;
    int prc = parse(argc, argv, 2, sub, 1, 1, &o);
    if (prc >= 0)
        return prc;
    return !strcmp(sub, "validate") ? cmd_validate(o.args[0], &o) : cmd_info(o.args[0], &o);
}
