/*
 * zr mrec - mrec-lmdb collections (libzmrec):
 *   zr mrec validate FILE          check every rule of the layout
 *   zr mrec info FILE              records, frames, atoms, blocks, units
 *   zr mrec dump FILE RECORD [FRAME]  a record's meta and system, or a resolved frame
 *   zr mrec import FILE... [--format NAME] [--units STYLE] -o OUT.mrec.lmdb
 *                                  ASE-based importers: runs loaderx.mrec's main
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

static int usage(void)
{
    fprintf(stderr, "usage: zr mrec validate FILE\n"
                    "       zr mrec info FILE\n"
                    "       zr mrec dump FILE RECORD [FRAME]\n"
                    "       zr mrec import FILE... [--format NAME] [--units STYLE] -o OUT.mrec.lmdb\n");
    return 2;
}

static int fail(const char *what)
{
    fprintf(stderr, "zr mrec %s: %s\n", what, zmr_last_error());
    return 1;
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
        fprintf(stderr, "zr mrec dump: %s '%s' is not a number in 0..18446744073709551615\n", what,
                s ? s : "");
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

static int cmd_info(const char *path)
{
    zmr_reader *r;
    if (zmr_open(&r, path, 0) < 0)
        return fail("info");
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
    printf("file:           %s\n", path);
    printf("layout:         mrec-lmdb, layout_version %d, molrec_version %d\n", ZMR_LAYOUT_VERSION,
           zmr_molrec_version(r));
    printf("records:        %" PRIu64 " (%" PRIu64 " with a trajectory)\n", R, ntraj);
    printf("frames:         %" PRIu64 "\n", zmr_n_frames(r));
    if (R)
        printf("atoms:          %" PRIu64 " total, %" PRIu64 "..%" PRIu64 " per record\n", atot, amin, amax);
    printf("meta:           %s\n", zmr_meta_json(r));
    zmr_frame *f = NULL;
    if (R && zmr_read_system(r, 0, &f) == ZMR_OK && f) {
        print_blocks("system blocks:  ", f);
        zmr_frame_free(f);
    }
    uint64_t nf = 0;
    if (R && zmr_record_info(r, 0, NULL, &nf, NULL, NULL) == ZMR_OK && nf &&
        zmr_read_frame(r, 0, 0, &f) == ZMR_OK) {
        print_blocks("frame blocks:   ", f);
        zmr_frame_free(f);
    }
    zmr_close(r);
    return 0;
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
            uint64_t n = col.nelem < 9 ? col.nelem : 9;
            for (uint64_t e = 0; e < n; e++) {
                const unsigned char *p = col.data;
                switch (col.dtype) {
                case ZMR_F64: { double d; memcpy(&d, p + 8 * e, 8); printf(" %.10g", d); break; }
                case ZMR_I64: { int64_t v; memcpy(&v, p + 8 * e, 8); printf(" %" PRId64, v); break; }
                case ZMR_U64: { uint64_t v; memcpy(&v, p + 8 * e, 8); printf(" %" PRIu64, v); break; }
                case ZMR_I32: { int32_t v; memcpy(&v, p + 4 * e, 4); printf(" %" PRId32, v); break; }
                case ZMR_BOOL: case ZMR_U8: printf(" %u", p[e]); break;
                case ZMR_STRING: printf(" %s", col.strings[e] ? col.strings[e] : "null"); break;
                default: printf(" ."); break;
                }
            }
            printf("%s\n", col.nelem > n ? " ..." : "");
        }
}

static int cmd_dump(int argc, char **argv)
{
    uint64_t rec, k = 0;
    if (argc < 4 || argc > 5)
        return usage();
    if (parse_u64("RECORD", argv[3], &rec) < 0 || (argc == 5 && parse_u64("FRAME", argv[4], &k) < 0))
        return 2;
    zmr_reader *r;
    if (zmr_open(&r, argv[2], 0) < 0)
        return fail("dump");
    int rc = 0;
    zmr_frame *f = NULL;
    if (argc == 4) {
        char *meta;
        uint64_t ff, nf, na;
        bool ht;
        if (zmr_record_info(r, rec, &ff, &nf, &na, &ht) < 0 || zmr_read_record_meta(r, rec, &meta) < 0) {
            rc = fail("dump");
        } else {
            printf("record %" PRIu64 ": first_frame %" PRIu64 ", n_frames %" PRIu64 ", n_atoms %" PRIu64
                   ", has_trajectory %s\nmeta: %s\n", rec, ff, nf, na, ht ? "true" : "false", meta);
            zmr_free(meta);
            if (zmr_read_system(r, rec, &f) < 0)
                rc = fail("dump");
            else if (f == NULL)
                printf("system: none\n");
            else
                printf("system "), print_frame(f);
        }
    } else if (zmr_read_frame(r, rec, k, &f) < 0) {
        rc = fail("dump");
    } else {
        printf("record %" PRIu64 " frame %" PRIu64 " (resolved) ", rec, k);
        print_frame(f);
    }
    zmr_frame_free(f);
    zmr_close(r);
    return rc;
}

static int validate_here(const char *path)
{
    if (zmr_validate(path, 0) < 0)
        return fail("validate");
    zmr_reader *r;
    if (zmr_open(&r, path, 0) < 0)
        return fail("validate");
    printf("%s: ok (%" PRIu64 " records, %" PRIu64 " frames, molrec_version %d)\n", path, zmr_n_records(r),
           zmr_n_frames(r), zmr_molrec_version(r));
    zmr_close(r);
    return 0;
}

/* The walk runs in a child (this program again, opening the environment
 * there); a child that dies abnormally means liblmdb crashed on the file. */
static int cmd_validate(const char *path)
{
    fflush(stdout);
    fflush(stderr);
    char self[4096];
    int code = 0, crashed = 0;
    int rc = zrp_self_exe(self, sizeof self);
    if (rc == 0) {
        const char *av[] = {self, "mrec", "validate", "--in-process", path, NULL};
        rc = zrp_run_wait(av, &code, &crashed);
    }
    if (rc < 0) {
        fprintf(stderr, "zr mrec validate: cannot start a child (%s); validating in this process\n",
                strerror(-rc));
        return validate_here(path);
    }
    if (crashed) {
        if (code >= 0 && code < 256)
            fprintf(stderr, "zr mrec validate: %s: the LMDB structure is damaged (reader crashed with signal %d)\n",
                    path, code);
        else
            fprintf(stderr, "zr mrec validate: %s: the LMDB structure is damaged (reader crashed with exception 0x%08x)\n",
                    path, (unsigned)code);
        return 1;
    }
    return code;
}

int zr_cmd_mrec(int argc, char **argv)
{
    if (argc < 2)
        return usage();
    const char *sub = argv[1];
    if (!strcmp(sub, "validate") && argc == 3)
        return cmd_validate(argv[2]);
    if (!strcmp(sub, "validate") && argc == 4 && !strcmp(argv[2], "--in-process"))
        return validate_here(argv[3]);
    if (!strcmp(sub, "info") && argc == 3)
        return cmd_info(argv[2]);
    if (!strcmp(sub, "dump"))
        return cmd_dump(argc, argv);
    if (!strcmp(sub, "import")) {
        /* python3 -c <run loaderx.mrec.main as "zr mrec"> import ARGS... */
        char **av = calloc((size_t)argc + 4, sizeof *av);
        if (av == NULL)
            return 1;
        const char *py = getenv("ZR_PYTHON");
        av[0] = (char *)(py && *py ? py : "python3");
        av[1] = "-c";
        av[2] = "import sys\n"
                "try:\n"
                "    from loaderx.mrec import main\n"
                "except ImportError as e:\n"
                "    sys.exit('zr mrec import: needs the loaderx Python package (%s)' % e)\n"
                "sys.exit(main(sys.argv[1:], prog='zr mrec'))\n";
        for (int k = 1; k < argc; k++)
            av[2 + k] = argv[k];
        fflush(stdout);
        fflush(stderr);
        int code = 1, crashed = 0;
        int rc = zrp_run_wait((const char *const *)av, &code, &crashed);
        if (rc < 0)
            fprintf(stderr, "zr mrec import: cannot run %s (%s; needs python3 with the loaderx package and ase)\n",
                    av[0], strerror(-rc));
        free(av);
        return rc < 0 || crashed ? 1 : code;
    }
    return usage();
}
