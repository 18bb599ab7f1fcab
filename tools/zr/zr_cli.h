/*
 * zr_cli.h - internal to the zr tool: the command table and the helpers
 * every command shares, so that all of them follow one convention:
 *
 *   --help / -h   usage, options and an example on stdout, exit 0
 *   exit status   ZR_EXIT_* below (the same table in `zr --help` and zr.1)
 *   errors        one line on stderr: "zr CMD: FILE: problem"
 *   --json        one JSON document per line on stdout (per store, for
 *                 commands taking several stores)
 *   progress      on stderr, only when stderr is a terminal and --quiet
 *                 was not given: done/total, rate and ETA
 *   Ctrl-C        long work checks zr_interrupted() between committed
 *                 slices and stops with ZR_EXIT_INTERRUPTED
 *
 * Each command lives in its own file (cmd_<name>.c) and takes argv with
 * argv[0] = its name; it returns the process exit status.
 */
#ifndef ZR_CLI_H
#define ZR_CLI_H

#include <stdint.h>
#include <stdio.h>

#include <json-c/json.h>
#include <zloader.h>

/* ---------------------------------------------------------- exit status */

#define ZR_EXIT_OK 0
#define ZR_EXIT_FAILED 1      /* a check failed, the data is damaged, or the work failed */
#define ZR_EXIT_USAGE 2       /* bad arguments */
#define ZR_EXIT_OPEN 3        /* cannot open, busy, or already exists */
#define ZR_EXIT_INTERRUPTED 130 /* stopped by Ctrl-C / SIGTERM; committed data intact */

/* The exit status that fits a library status: ZR_EBUSY, ZR_EEXIST and
 * ZR_ENOTSTORE -> ZR_EXIT_OPEN; ZR_OK -> 0; anything else ->
 * ZR_EXIT_FAILED. */
int zr_exit_from_status(int status);

/* The exit-status table as printed in every --help (ends with '\n'). */
extern const char zr_exit_table[];

/* --------------------------------------------------------------- errors */

/* "zr CMD: FILE: <printf message>\n" on stderr (FILE part left out when
 * file is NULL). */
void zr_error(const char *cmd, const char *file, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/* zr_error(cmd, file, "WHAT: <zr_last_error()>") and return
 * zr_exit_from_status(status). For a failed library call. */
int zr_fail(const char *cmd, const char *file, const char *what, int status);
/* A store that could not be opened: zr_error(cmd, file, "cannot open:
 * <zr_last_error()>") and ZR_EXIT_OPEN whatever the cause (busy, not a
 * store, permission, a journal pending recovery). */
int zr_fail_open(const char *cmd, const char *file, int status);

/* "zr CMD: <message>\nTry 'zr CMD --help'.\n" on stderr; returns
 * ZR_EXIT_USAGE. */
int zr_usage_error(const char *cmd, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* 1 when -h or --help appears among argv[1..argc) before a "--". For
 * commands that parse their own arguments: check it first, so that
 * `zr CMD --help` is never taken for a path. */
int zr_wants_help(int argc, char **argv);

/* ------------------------------------------------------------- options */

/* The flags every reporting command takes. */
typedef struct zr_opts {
    int json;  /* --json */
    int quiet; /* --quiet / -q: no progress */
} zr_opts;

/* The body of "zr NAME [OPTIONS] [--] STORE..." commands. Options (before
 * "--"): -h/--help prints usage(stdout) and returns 0; --json, --quiet/-q
 * set opts; anything else, or no STORE, is a usage error (2). Otherwise
 * calls one(path, &opts) for each STORE in order (with a blank line
 * between them when blank_between and not --json) and returns the highest
 * status any call returned (ZR_EXIT_INTERRUPTED at once when one returns
 * it). */
int zr_run_per_store(int argc, char **argv, const char *name, void (*usage)(FILE *out),
                     int (*one)(const char *path, const zr_opts *opts), int blank_between);

/* Parse a non-negative decimal integer (the whole string); 0 or -1. */
int zr_parse_u64(const char *s, uint64_t *out);
/* Parse a decimal integer, negative allowed; 0 or -1. */
int zr_parse_i64(const char *s, int64_t *out);
/* Parse a record INDEX against a store of n records: "I" (negative counts
 * from the end; out of range is an error) or "START:STOP" (a python slice,
 * either end optional, clipped) into [*lo, *hi). Returns 0, or prints the
 * problem naming store and returns ZR_EXIT_USAGE. */
int zr_parse_range(const char *cmd, const char *store, const char *a, uint64_t n, uint64_t *lo,
                   uint64_t *hi);
/* 1 if argument a reads as a negative INDEX ("-3", "-5:", "-:") rather
 * than an option. */
int zr_is_negative_index(const char *a);

/* ---------------------------------------------------------------- JSON */

/* Print o on stdout as one line of plain JSON and release it. */
void zr_json_print(json_object *o);
/* Add key -> unsigned integer / string (NULL -> null) to an object. */
void zr_json_u64(json_object *o, const char *key, uint64_t v);
void zr_json_str(json_object *o, const char *key, const char *v);

/* ------------------------------------------------------------- progress */

/* A progress line on stderr: "LABEL: done/total UNIT (pct%) rate ETA".
 * Shown only when stderr is a terminal and quiet is 0; redrawn at most
 * ten times a second; zr_progress_end erases it. Zero-initialise nothing:
 * zr_progress_start fills every field. */
typedef struct zr_progress {
    const char *label;
    const char *unit;   /* "records", "files"... */
    uint64_t total;     /* 0: unknown */
    uint64_t done, bytes;
    uint64_t t0_ns, last_ns;
    int on, drawn;
} zr_progress;

void zr_progress_start(zr_progress *p, const char *label, uint64_t total, const char *unit,
                       int quiet);
/* done units so far, and bytes so far (0 if not counted; when given, the
 * rate is shown in bytes per second). */
void zr_progress_update(zr_progress *p, uint64_t done, uint64_t bytes);
void zr_progress_end(zr_progress *p);

/* ------------------------------------------------------------ interrupt */

/* Catch SIGINT and SIGTERM: the first sets a flag that zr_interrupted()
 * reports; a second one ends the process at once (default action). Call
 * before long work that commits in slices. */
void zr_interrupt_install(void);
int zr_interrupted(void);
/* zr_error(cmd, file, "interrupted: <what>") and return
 * ZR_EXIT_INTERRUPTED. what says what was committed. */
int zr_interrupt_exit(const char *cmd, const char *file, const char *what);

/* --------------------------------------------------------------- sizes */

/* "47.0 MiB" (or "123 B") into buf. Returns buf. */
const char *zr_human_bytes(uint64_t n, char *buf, size_t cap);
/* numpy's spelling of a shape: "()", "(5,)", "(28, 28)". */
void zr_format_shape(const uint64_t *shape, size_t ndim, char *buf, size_t cap);

/* ------------------------------------------------------------ commands */

int zr_cmd_info(int argc, char **argv);
int zr_cmd_verify(int argc, char **argv);
int zr_cmd_ingest(int argc, char **argv);
int zr_cmd_export(int argc, char **argv);
int zr_cmd_cat(int argc, char **argv);
int zr_cmd_stats(int argc, char **argv);
int zr_cmd_delete(int argc, char **argv);
int zr_cmd_compact(int argc, char **argv);
int zr_cmd_push(int argc, char **argv);
int zr_cmd_recover(int argc, char **argv);
int zr_cmd_train_dict(int argc, char **argv);
int zr_cmd_recode(int argc, char **argv);
int zr_cmd_mrec(int argc, char **argv); /* cmd_mrec.c, libzmrec */

/* cmd_concat.c: "--concat" of the per-store commands: the STOREs of argv
 * opened as one concatenated dataset (identity checked), summarised on
 * stdout. 0, or 1 with a message naming the shards that differ. */
int zr_concat_report(const char *name, int argc, char **argv);

#endif
