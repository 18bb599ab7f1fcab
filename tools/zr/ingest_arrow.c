/*
 * ingest_arrow.c - zr ingest of Parquet, Arrow IPC (file or stream: Feather
 * v2, the .arrow files of a Hugging Face save_to_disk) and Feather v1 files.
 *
 * Debian 12 has no Arrow C++ package, so zr does not parse these formats
 * itself: pyarrow is the project's one Arrow reader. As `zr mrec import`
 * does, zr hands the work to loaderx's Python side, here by replacing
 * itself with `$ZR_PYTHON -c <loaderx._arrow_ingest.main> OPTIONS -- SRC
 * STORE` (python3 when ZR_PYTHON is unset; the pip-installed `zr` sets it
 * to its own interpreter). The same pid keeps Ctrl-C, the standard
 * streams and the exit status zr ingest's own. Without Python, loaderx or
 * pyarrow, one line names what to install and the exit status is 3, as
 * for zr mrec import.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "ingest.h"
#include "zr_platform.h"

#define CMD INGEST_CMD

#define NEEDS "Parquet and Arrow files are read by the Python package loaderx (with pyarrow)"

static const char PY_MAIN[] =
    "import sys\n"
    "try:\n"
    "    from loaderx._arrow_ingest import main\n"
    "except ImportError as e:\n"
    "    sys.stderr.write('zr ingest: %s: " NEEDS "; %s cannot import it (%s): install it there "
    "(pip install loaderx pyarrow), or set ZR_PYTHON to a python3 that has it\\n' "
    "% (sys.argv[-2], sys.executable, e))\n"
    "    sys.exit(3)\n"
    "sys.exit(main(sys.argv[1:]))\n";

const char *ingest_arrow_kind(const unsigned char *head, size_t got)
{
    if (got >= 4 && !memcmp(head, "PAR1", 4))
        return "a Parquet file";
    if (got >= 6 && !memcmp(head, "ARROW1", 6))
        return "an Arrow IPC file";
    if (got >= 4 && !memcmp(head, "\xff\xff\xff\xff", 4))
        return "an Arrow IPC stream";
    if (got >= 4 && !memcmp(head, "FEA1", 4))
        return "a Feather v1 file";
    return NULL;
}

int ingest_arrow(const char *src, const char *store, const ingest_opts *o)
{
    /* The kind, for the message when Python cannot start (dispatch knows it
     * is one of them). */
    unsigned char head[8];
    size_t got = 0;
    char err[ZR_IO_ERR];
    if (zr_sniff(src, head, sizeof head, &got, err) < 0) {
        fprintf(stderr, "zr %s: %s\n", CMD, err);
        return ZR_EXIT_OPEN;
    }
    const char *kind = ingest_arrow_kind(head, got);
    const char *py = getenv("ZR_PYTHON");
    const char *argv[24];
    size_t n = 0;
    argv[n++] = py && *py ? py : "python3";
    argv[n++] = "-c";
    argv[n++] = PY_MAIN;
    const char *const valued[][2] = {
        {"--column", o->column}, {"--codec", o->codec_name}, {"--tier", o->tier_name},
        {"--dict", o->sink.dict_path}};
    for (size_t k = 0; k < sizeof valued / sizeof valued[0]; k++)
        if (valued[k][1]) {
            argv[n++] = valued[k][0];
            argv[n++] = valued[k][1];
        }
    const struct {
        const char *name;
        int on;
    } flags[] = {{"--append", o->sink.append}, {"--ragged", o->ragged}, {"--json", o->json},
                 {"--quiet", o->quiet}};
    for (size_t k = 0; k < sizeof flags / sizeof flags[0]; k++)
        if (flags[k].on)
            argv[n++] = flags[k].name;
    argv[n++] = "--";
    argv[n++] = src;
    argv[n++] = store;
    argv[n] = NULL;
    if (zr_interrupted())
        return zr_interrupt_exit(CMD, src, "nothing was written");
    fflush(stdout);
    fflush(stderr);
    int code = ZR_EXIT_FAILED;
    int rc = zrp_exec(argv, &code);
    if (rc < 0) {
        zr_error(CMD, src, "%s: " NEEDS "; cannot run %s (%s): install Python 3 with loaderx and "
                 "pyarrow, or set ZR_PYTHON to one", kind ? kind : "Arrow", argv[0], strerror(-rc));
        return ZR_EXIT_OPEN;
    }
    return code; /* where zrp_exec ran it as a child */
}
