/*
 * zr_cli.h - internal to the zr tool: the command table. Each command lives
 * in its own file (cmd_<name>.c) and takes argv with argv[0] = its name.
 * Commands return the process exit status: 0 ok, 1 failure, 2 usage error.
 */
#ifndef ZR_CLI_H
#define ZR_CLI_H

#include <stdio.h>

#include <zloader.h>

int zr_cmd_info(int argc, char **argv);
int zr_cmd_verify(int argc, char **argv);
int zr_cmd_ingest(int argc, char **argv);
int zr_cmd_mrec(int argc, char **argv); /* cmd_mrec.c, libzmrec */

/* cli_util.c: the shared body of "zr NAME [--] STORE..." commands. Options
 * come before "--": -h/--help prints usage(stdout) and returns 0; any other
 * option, or no STORE, prints a message and usage(stderr) and returns
 * ZR_EXIT_USAGE. Otherwise calls one(path) for each STORE in order (with a
 * blank line between them when blank_between) and returns the highest
 * status any call returned. */
#define ZR_EXIT_USAGE 2
int zr_run_per_store(int argc, char **argv, const char *name, void (*usage)(FILE *out),
                     int (*one)(const char *path), int blank_between);

/* cmd_concat.c: "--concat" of the per-store commands: the STOREs of argv
 * opened as one concatenated dataset (identity checked), summarised on
 * stdout. 0, or 1 with a message naming the shards that differ. */
int zr_concat_report(const char *name, int argc, char **argv);

#endif
