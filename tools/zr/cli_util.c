/*
 * cli_util.c - the argument handling and per-store loop that the
 * "zr CMD [--] STORE..." commands (info, verify) share.
 */
#include <stdio.h>
#include <string.h>

#include "zr_cli.h"

int zr_run_per_store(int argc, char **argv, const char *name, void (*usage)(FILE *out),
                     int (*one)(const char *path), int blank_between)
{
    /* Options first (anywhere before "--"), so that `zr CMD --help` never
     * reaches the store code as a path. */
    int npaths = 0, opts_done = 0, concat = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!opts_done && !strcmp(a, "--")) {
            opts_done = 1;
        } else if (!opts_done && !strcmp(a, "--concat")) { /* cmd_concat.c */
            concat = 1;
        } else if (!opts_done && (!strcmp(a, "--help") || !strcmp(a, "-h"))) {
            usage(stdout);
            return 0;
        } else if (!opts_done && a[0] == '-' && a[1] != '\0') {
            fprintf(stderr, "zr %s: unknown option '%s'\n", name, a);
            usage(stderr);
            return ZR_EXIT_USAGE;
        } else {
            npaths++;
        }
    }
    if (npaths == 0) {
        fprintf(stderr, "zr %s: missing STORE argument\n", name);
        usage(stderr);
        return ZR_EXIT_USAGE;
    }
    int status = 0, done = 0;
    opts_done = 0;
    for (int i = 1; i < argc; i++) {
        if (!opts_done && !strcmp(argv[i], "--")) {
            opts_done = 1;
            continue;
        }
        if (!opts_done && !strcmp(argv[i], "--concat"))
            continue;
        if (blank_between && done++)
            printf("\n");
        int r = one(argv[i]);
        if (r > status)
            status = r;
    }
    if (concat) {
        int r = zr_concat_report(name, argc, argv);
        if (r > status)
            status = r;
    }
    return status;
}
