/*
 * zr_cli.h - internal to the zr tool: the command table. Each command lives
 * in its own file (cmd_<name>.c) and takes argv with argv[0] = its name.
 * Commands return the process exit status: 0 ok, 1 failure, 2 usage error.
 */
#ifndef ZR_CLI_H
#define ZR_CLI_H

#include <zloader.h>

int zr_cmd_info(int argc, char **argv);
int zr_cmd_verify(int argc, char **argv);
int zr_cmd_mrec(int argc, char **argv); /* cmd_mrec.c, libzmrec */

#endif
