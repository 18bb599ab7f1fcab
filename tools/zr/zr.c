/*
 * zr - the loaderx-in-C command-line tool: inspect, ingest, export, check
 * and maintain record stores (and mrec-lmdb collections).
 *
 * Every store operation goes through the libraries' public APIs
 * (zrengine.h, zrstore.h, zloader.h, zmrec.h), like any other client; the
 * tool's own OS calls (the files it writes, directory listings, threads,
 * child processes, the terminal) go through the platform layer
 * (zr_platform.h), so a port to another OS is the platform's. Every
 * command follows the convention of zr_cli.h: one argument parser
 * (args.c), --help complete with exit 0, the one exit map, errors on
 * stderr naming file and problem, --json through json-c, progress on a
 * terminal.
 *
 * A command is one entry of `commands` below and one file cmd_NAME.c.
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
    {"push", zr_cmd_push, "push STORE URL           upload a store to http(s):// or s3:// (meta.zr last)"},
    {"recover", zr_cmd_recover, "recover STORE            keep what reached the disk after a crash lost unsynced appends"},
    {"train-dict", zr_cmd_train_dict, "train-dict STORE -o DICT a zstd dictionary (--tier fast|balanced|max)"},
    {"recode", zr_cmd_recode, "recode SRC DST --codec C copy a store into another codec"},
    {"mrec", zr_cmd_mrec, "mrec validate|info|dump|import ...  mrec-lmdb collections"},
    {"version", cmd_version, "version                  versions of zr's native libraries"},
};
#define NCOMMANDS (sizeof commands / sizeof commands[0])

static void usage(FILE *out)
{
    fputs("usage: zr COMMAND [OPTIONS] [ARGS]\n"
          "       zr help [COMMAND]\n"
          "The loaderx-in-C record-store tool: inspect, ingest, export, check and\n"
          "maintain record stores (directories of dense or ragged records in the raw,\n"
          "zstd or zstd_dict codec) and mrec-lmdb collections.\n\nCommands:\n", out);
    for (size_t i = 0; i < NCOMMANDS; i++)
        fprintf(out, "  zr %s\n", commands[i].help);
    fputs("  zr help [COMMAND]           this text, or a command's (same as zr COMMAND --help)\n"
          "\n"
          "Every command takes -h/--help: its usage, every option, an example and the\n"
          "exit statuses. Options may stand anywhere before \"--\"; everything after it\n"
          "is an argument (so is a negative INDEX such as -1). Reporting commands take\n"
          "--json: one JSON object per line on stdout, one per store for commands taking\n"
          "several. Long work shows a progress line on stderr (rate, time left) only\n"
          "when stderr is a terminal; -q/--quiet turns it off. Errors go to stderr, one\n"
          "line naming the file and the problem: \"zr CMD: FILE: problem\". Ctrl-C or\n"
          "SIGTERM stops long work after the slice in flight (appends: the piece in\n"
          "flight, about 50 ms of work), with everything committed before intact (exit\n"
          "130); a second Ctrl-C ends the process at once, which is also safe: a store\n"
          "trusts only what it has committed.\n"
          "\n"
          "A store is a directory: store.zr (kind, dtype, item shape), meta.zr (committed\n"
          "length), N.loc and N.chunk (record table and payloads), dict.zr (zstd_dict),\n"
          "journal.zr (only while a delete or compact is applied).\n"
          "\n"
          "Environment:\n"
          "  ZR_PYTHON                 the python3 that runs zr mrec import (default:\n"
          "                            python3 on PATH)\n"
          "  ZR_MREC_VALIDATE_TIMEOUT  seconds zr mrec validate's checker may run\n"
          "                            (default 60; 0: no limit)\n"
          "\n"
          "Example:\n"
          "  zr ingest /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz train\n"
          "  zr info train\n"
          "\n", out);
    zr_print_exit_table(out);
    fputs("With several stores the status is the highest that applies.\n", out);
}

static const zr_command VERSION = {
    .name = "version",
    .synopsis = "zr version [--json]",
    .args = "",
    .about = "Print the versions of the libraries zr runs on.",
    .example = "zr version",
};

static int cmd_version(int argc, char **argv)
{
    int json = 0;
    const zr_option options[] = {
        ZR_OPT_FLAG(NULL, "--json", &json, "one JSON object {library: version}"),
        ZR_OPT_END,
    };
    zr_args args;
    int st = zr_parse_args(&VERSION, options, argc, argv, &args);
    if (st != ZR_ARGS_GO)
        return st;
    const char *names[] = {"zrengine", "zrstore", "zsampler", "zloader", "zmrec", "zrerror"};
    const char *vers[] = {zrengine_version_string(), zrstore_version_string(),
                          zsampler_version_string(), zloader_version_string(), zmrec_version(),
                          zrerror_version_string()};
    json_object *j = json ? json_object_new_object() : NULL;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        if (json)
            zr_json_str(j, names[i], vers[i]);
        else
            printf("lib%s %s\n", names[i], vers[i]);
    }
    if (json)
        zr_json_print(j);
    return 0;
}

static const struct command *find_command(const char *name)
{
    for (size_t i = 0; i < NCOMMANDS; i++)
        if (!strcmp(name, commands[i].name))
            return &commands[i];
    return NULL;
}

static int unknown_command(const char *name)
{
    fprintf(stderr, "zr: unknown command '%s'\nTry 'zr --help'.\n", name);
    return ZR_EXIT_USAGE;
}

/* zr help [COMMAND]: the top-level help, or the command's --help. */
static int cmd_help(int argc, char **argv)
{
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        usage(stdout);
        return 0;
    }
    if (argc > 2) {
        fprintf(stderr, "zr help: one COMMAND only (got '%s' too)\nTry 'zr --help'.\n", argv[2]);
        return ZR_EXIT_USAGE;
    }
    const struct command *c = find_command(argv[1]);
    if (!c)
        return unknown_command(argv[1]);
    char *hargv[] = {argv[1], "--help", NULL};
    return c->run(2, hargv);
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
    const char *name = argv[1];
    if (!strcmp(name, "help") || !strcmp(name, "--help") || !strcmp(name, "-h"))
        return cmd_help(argc - 1, argv + 1);
    if (!strcmp(name, "--version"))
        return cmd_version(1, argv + 1);
    const struct command *c = find_command(name);
    return c ? c->run(argc - 1, argv + 1) : unknown_command(name);
}
