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
 *                 slices (appends: between pieces of about 50 ms, see
 *                 zr_sink_append) and stops with ZR_EXIT_INTERRUPTED
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

/* ---------------------------------------------------------- exit status
 *
 * The one map from what happened to the exit status, for every command
 * (mrec included). zr_print_exit_table prints it in every --help, and
 * zr(1) lists the same rows. */

#define ZR_EXIT_OK 0
#define ZR_EXIT_FAILED 1      /* a check failed, the data is damaged, or the work failed
                                 (an I/O error while working included) */
#define ZR_EXIT_USAGE 2       /* bad arguments */
#define ZR_EXIT_OPEN 3        /* cannot open or create, busy, or already exists */
#define ZR_EXIT_NOT_FOUND 4   /* no such record: an INDEX, RECORD or FRAME out of range */
#define ZR_EXIT_INTERRUPTED 130 /* stopped by Ctrl-C / SIGTERM; committed data intact */

/* The exit status that fits a library status (zr_status; libzmrec's
 * zmr_status has the same values): ZR_OK -> 0; ZR_EBUSY, ZR_EEXIST and
 * ZR_ENOTSTORE (ZMR_ENOTCOLL) -> ZR_EXIT_OPEN; ZR_ERANGE ->
 * ZR_EXIT_NOT_FOUND; ZR_EINTR -> ZR_EXIT_INTERRUPTED; anything else,
 * ZR_EIO included, -> ZR_EXIT_FAILED. A failed open or create has its
 * own rule: zr_exit_from_open. */
int zr_exit_from_status(int status);

/* The exit status of an open or a create that failed: ZR_EXIT_FAILED when
 * what it read is damaged (ZR_ECORRUPT: the data, found while opening),
 * else ZR_EXIT_OPEN whatever the cause (missing, unreadable, busy, not a
 * store or collection, exists, a journal pending, an I/O error). */
int zr_exit_from_open(int status);

/* "Exit status:" and one row a status, as every --help ends. */
void zr_print_exit_table(FILE *out);

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
 * <zr_last_error()>") and zr_exit_from_open(status). */
int zr_fail_open(const char *cmd, const char *file, int status);
/* A failed call whose detail is `detail` (libzmrec's zmr_last_error()):
 * "zr CMD: FILE: DETAIL", FILE left out when DETAIL names it already.
 * Returns `exit_status`. */
int zr_fail_detail(const char *cmd, const char *file, const char *detail, int exit_status);

/* ------------------------------------------------------------ arguments
 *
 * One parser for every command (args.c). A command describes itself in a
 * zr_command and its options in a zr_option table; zr_parse_args walks
 * argv once:
 *
 *   -h, --help          anywhere before "--": the command's help on stdout
 *                       and exit 0, whatever else argv holds
 *   --NAME VALUE, --NAME=VALUE, -X VALUE
 *                       an option with a value; a second one is a usage
 *                       error (zr never lets a later one win silently)
 *   --NAME, -X          a flag; repeating it changes nothing
 *   --                  every later argument is positional
 *   -                   positional
 *   -3, -2:, -:         positional (negative INDEX) with ZR_ARGS_NUMBERS
 *   other "-..."        unknown option: usage error
 *
 * A value is never taken from "--", "-h" or "--help": `-o --help` is a
 * missing value (and the help request still counts). The positionals are
 * checked against cmd->args ("STORE INDEX...", "FILE RECORD [FRAME]"):
 * too few or too many is a usage error naming what is missing or extra.
 * Usage errors print "zr NAME: problem", the synopsis and "Try 'zr NAME
 * --help'." on stderr. */

typedef struct zr_option {
    const char *name;    /* "--codec" */
    const char *alias;   /* "-o", or NULL */
    const char *metavar; /* "FILE": takes a value, stored in *value; NULL: a flag (*flag = 1) */
    const char **value;
    int *flag;
    const char *help;    /* for --help ("\n" continues on the next line); NULL: not listed */
} zr_option;

#define ZR_OPT_FLAG(alias, name, flag, help) {(name), (alias), NULL, NULL, (flag), (help)}
#define ZR_OPT_VALUE(alias, name, metavar, value, help) {(name), (alias), (metavar), (value), NULL, (help)}
#define ZR_OPT_END {NULL, NULL, NULL, NULL, NULL, NULL}
#define ZR_OPT_QUIET(flag) ZR_OPT_FLAG("-q", "--quiet", (flag), "no progress line (shown only on a terminal)")

enum {
    ZR_ARGS_NUMBERS = 1u << 0, /* "-3", "-2:", "-:" are positionals (negative INDEX) */
    ZR_ARGS_FIRST = 1u << 1    /* options end at the first positional (before a subcommand) */
};

/* What --help prints and messages name. */
typedef struct zr_command {
    const char *name;     /* "cat", "mrec dump": "zr NAME: ..." and "Try 'zr NAME --help'" */
    const char *synopsis; /* "zr cat [OPTIONS] STORE INDEX..." ("\n" between forms) */
    const char *args;     /* the positionals: "STORE...", "SRC STORE", "FILE RECORD [FRAME]";
                             "X..." one or more, "[X]" optional, "[X...]" any number */
    const char *about;    /* --help: what the command does */
    const char *example;  /* --help: example command lines ("\n" between them) */
    const char *notes;    /* --help: after the exit table, or NULL */
    const char *help;     /* a whole help text printed instead of the above, or NULL */
    unsigned flags;       /* ZR_ARGS_* */
} zr_command;

/* The positional arguments, in order. */
typedef struct zr_args {
    int n;
    char **v;
} zr_args;

#define ZR_ARGS_GO (-1)

/* Parse argv[1..argc) (argv[0] is the command's name) against `options`
 * (ending with ZR_OPT_END; NULL for none): sets the options' targets and
 * fills *out. argv is reordered in place, the positionals first (out->v
 * points into it), as getopt does. With ZR_ARGS_FIRST, out->v is the rest
 * of argv from the first positional on, unchecked. Returns ZR_ARGS_GO to
 * go on, else the exit status to return: 0 after printing the help,
 * ZR_EXIT_USAGE after printing a usage error. */
int zr_parse_args(const zr_command *cmd, const zr_option *options, int argc, char **argv,
                  zr_args *out);

/* The command's help on `out`: synopsis, about, the option table with
 * -h/--help, the example, the exit table and the notes. */
void zr_print_help(FILE *out, const zr_command *cmd, const zr_option *options);

/* "zr NAME: <message>", the synopsis and "Try 'zr NAME --help'." on
 * stderr; returns ZR_EXIT_USAGE. */
int zr_usage(const zr_command *cmd, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* ------------------------------------------------------------- options */

/* The flags every per-store command takes. */
typedef struct zr_opts {
    int json;   /* --json */
    int quiet;  /* --quiet / -q: no progress */
    int concat; /* --concat (info, verify) */
} zr_opts;

/* A "zr NAME [OPTIONS] [--] STORE..." command. */
typedef struct zr_store_loop {
    const zr_command *cmd;
    const char *json_help;  /* --help's line for --json */
    int concat;             /* takes --concat: the STOREs as one dataset too */
    int progress;           /* shows progress on a terminal (--quiet listed) */
    int blank_between;      /* text output: a blank line between stores */
    const zr_option *extra; /* the command's own options (ending ZR_OPT_END), or NULL */
    int (*one)(const char *path, const zr_opts *opts);
} zr_store_loop;

/* Parse argv (--json, -q/--quiet, --concat when loop->concat, then
 * loop->extra), call loop->one for each STORE in order and return the
 * highest status any call returned (ZR_EXIT_INTERRUPTED at once when one
 * returns it); then, with --concat, zr_concat_report's. */
int zr_run_per_store(const zr_store_loop *loop, int argc, char **argv);

/* Parse a non-negative decimal integer (the whole string, digits only, no
 * sign or space; refused rather than saturated past 2^64-1); 0 or -1. */
int zr_parse_u64(const char *s, uint64_t *out);
/* Parse a decimal integer, negative allowed; 0 or -1. */
int zr_parse_i64(const char *s, int64_t *out);
/* Parse a record INDEX against a store of n records: "I" (negative counts
 * from the end) or "START:STOP" (a python slice, either end optional,
 * clipped) into [*lo, *hi). Returns 0; or prints the problem and returns
 * ZR_EXIT_USAGE (not an index) or ZR_EXIT_NOT_FOUND (I out of range,
 * naming the store). */
int zr_parse_range(const zr_command *cmd, const char *store, const char *a, uint64_t n,
                   uint64_t *lo, uint64_t *hi);

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

/* cmd_concat.c: "--concat" of the per-store commands: paths[0..n) opened
 * as one concatenated dataset (identity checked), summarised on stdout.
 * 0, or 1 with a message naming the shards that differ. */
int zr_concat_report(const char *name, char *const *paths, int n);

#endif
