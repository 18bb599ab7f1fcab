/*
 * zr - the loaderx-in-C command-line tool: inspect, ingest, export, check
 * and maintain record stores (and mrec-lmdb collections).
 *
 * Uses only the public headers of the libraries, like any other client.
 * Every command follows the convention of zr_cli.h: --help exits 0, the
 * exit statuses of zr_exit_table, errors on stderr naming file and
 * problem, --json where it reports, progress on a terminal.
 */
#include <stdio.h>
#include <string.h>

#include <zmrec.h>

#include "zr_cli.h"
#include "zr_platform.h"

static int cmd_version(int argc, char **argv);

static const struct command {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *help;
} commands[] = {
    {"info", zr_cmd_info, "info STORE...            kind, dtype, shape, codec, records, sizes, ratio"},
    {"verify", zr_cmd_verify, "verify STORE...          check every record (table, extents, checksums)"},
    {"ingest", zr_cmd_ingest, "ingest SRC STORE         a store from .npy, .npz, IDX(.gz), a folder, tokens"},
    {"export", zr_cmd_export, "export STORE -o FILE     dense to .npy, ragged to .npz (data, offsets, shapes)"},
    {"cat", zr_cmd_cat, "cat STORE INDEX...       print records as numpy does (--raw: bytes)"},
    {"dump", zr_cmd_cat, "dump STORE INDEX...      the same as cat"},
    {"stats", zr_cmd_stats, "stats STORE...           record sizes, shapes, value min/max/mean/std"},
    {"delete", zr_cmd_delete, "delete STORE INDEX...    delete records (or --mask FILE.npy), swap-last"},
    {"compact", zr_cmd_compact, "compact STORE            reclaim the space of deleted records"},
    {"recover", zr_cmd_recover, "recover STORE            keep what reached the disk after a crash lost unsynced appends"},
    {"train-dict", zr_cmd_train_dict, "train-dict STORE -o DICT a zstd dictionary (--tier fast|balanced|max)"},
    {"recode", zr_cmd_recode, "recode SRC DST --codec C copy a store into another codec"},
    {"mrec", zr_cmd_mrec, "mrec validate|info|dump|import ...  mrec-lmdb collections"},
    {"version", cmd_version, "version                  versions of zr's five libraries"},
};
#define NCOMMANDS (sizeof commands / sizeof commands[0])

static void usage(FILE *out)
{
    fprintf(out, "usage: zr COMMAND [OPTIONS] [ARGS]\n"
                 "The loaderx-in-C record-store tool.\n\ncommands:\n");
    for (size_t i = 0; i < NCOMMANDS; i++)
        fprintf(out, "  zr %s\n", commands[i].help);
    fprintf(out, "  zr help [COMMAND]           this text, or a command's (same as zr COMMAND --help)\n"
                 "\n"
                 "Every command takes -h/--help; reporting commands take --json (one JSON\n"
                 "object per line) and long ones show progress on a terminal (-q/--quiet\n"
                 "turns it off). Ctrl-C stops long work between committed slices.\n"
                 "\n"
                 "Example:\n"
                 "  zr ingest /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz train\n"
                 "  zr info train\n"
                 "\n%s"
                 "See zr(1) for more.\n", zr_exit_table);
}

static int cmd_version(int argc, char **argv)
{
    int json = 0;
    if (zr_wants_help(argc, argv)) {
        printf("usage: zr version [--json]\n"
               "Print the versions of the libraries zr runs on.\n\n"
               "Options:\n  --json      one JSON object {library: version}\n"
               "  -h, --help  this text\n\nExample:\n  zr version\n\n%s",
               zr_exit_table);
        return 0;
    }
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--json"))
            return zr_usage_error("version", "unknown argument '%s'", argv[i]);
        json = 1;
    }
    const char *names[] = {"zrengine", "zrstore", "zsampler", "zloader", "zmrec"};
    const char *vers[] = {zrengine_version_string(), zrstore_version_string(),
                          zsampler_version_string(), zloader_version_string(), zmrec_version()};
    json_object *j = json ? json_object_new_object() : NULL;
    for (size_t i = 0; i < 5; i++) {
        if (json)
            zr_json_str(j, names[i], vers[i]);
        else
            printf("lib%s %s\n", names[i], vers[i]);
    }
    if (json)
        zr_json_print(j);
    return 0;
}

int main(int argc, char **argv)
{
    /* Records are bytes: `cat --raw` and every other output pass them
     * unchanged on Windows too. */
    zrp_stdio_binary();
    if (argc < 2) {
        usage(stderr);
        return ZR_EXIT_USAGE;
    }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "help") || !strcmp(cmd, "--help") || !strcmp(cmd, "-h")) {
        if (argc > 2) {
            for (size_t i = 0; i < NCOMMANDS; i++)
                if (!strcmp(argv[2], commands[i].name)) {
                    char *hargv[] = {argv[2], "--help", NULL};
                    return commands[i].run(2, hargv);
                }
            return zr_usage_error("help", "unknown command '%s'", argv[2]);
        }
        usage(stdout);
        return 0;
    }
    if (!strcmp(cmd, "--version"))
        return cmd_version(1, argv + 1);
    for (size_t i = 0; i < NCOMMANDS; i++)
        if (!strcmp(cmd, commands[i].name))
            return commands[i].run(argc - 1, argv + 1);
    fprintf(stderr, "zr: unknown command '%s'\n", cmd);
    usage(stderr);
    return ZR_EXIT_USAGE;
}
