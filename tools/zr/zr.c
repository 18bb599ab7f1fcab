/*
 * zr - the loaderx-in-C command-line tool.
 *
 *   zr info STORE...     kind, dtype, shape, codec, records and sizes
 *   zr verify STORE...   check every record; prints bad indices, exit 1 if any
 *   zr ingest NPY STORE  a dense store from a .npy file
 *   zr version           library versions
 *
 * Uses only the public headers of the libraries, like any other client.
 * Exit status: 0 on success, 1 when a command failed, 2 on a usage error.
 * `zr info` and `zr verify` refine it (the highest that applies over all
 * their stores): 0 ok, 1 damaged records found, 2 usage error, 3 a store
 * could not be opened (busy, or not a store); `--help` prints their usage.
 */
#include <stdio.h>
#include <string.h>

#include <zmrec.h>

#include "zr_cli.h"

static const struct command {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *help;
} commands[] = {
    {"info", zr_cmd_info, "info STORE...      describe stores (kind, dtype, shape, codec, records, sizes)"},
    {"verify", zr_cmd_verify, "verify STORE...    check every record (table, chunk extents, checksums)"},
    {"ingest", zr_cmd_ingest, "ingest NPY STORE [--codec raw|zstd]  dense store from a .npy file"},
    {"mrec", zr_cmd_mrec, "mrec validate|info|dump|import ...  mrec-lmdb collections (zr mrec for usage)"},
};

static void usage(FILE *out)
{
    fprintf(out, "usage: zr COMMAND [ARGS]\n\ncommands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(out, "  zr %s\n", commands[i].help);
    fprintf(out, "  zr version            print library versions\n"
                 "  zr help               this text\n");
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "help") || !strcmp(cmd, "--help") || !strcmp(cmd, "-h")) {
        usage(stdout);
        return 0;
    }
    if (!strcmp(cmd, "version") || !strcmp(cmd, "--version")) {
        printf("zrengine %s\nzrstore %s\nzsampler %s\nzloader %s\nzmrec %s\n", zrengine_version_string(),
               zrstore_version_string(), zsampler_version_string(), zloader_version_string(),
               zmrec_version());
        return 0;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (!strcmp(cmd, commands[i].name))
            return commands[i].run(argc - 1, argv + 1);
    fprintf(stderr, "zr: unknown command '%s'\n", cmd);
    usage(stderr);
    return 2;
}
