/*
 * cli_util.c - what every zr command shares: the exit map, error lines,
 * the per-store loop, record indices, JSON output, the progress line and
 * the Ctrl-C flag (see zr_cli.h for the convention; the argument parser
 * is args.c).
 */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "zr_cli.h"
#include "zr_platform.h"

/* The one exit map: every status a command can end with, as --help and
 * zr(1) list them. */
static const struct exit_row {
    int code;
    const char *what;
} EXIT_ROWS[] = {
    {ZR_EXIT_OK, "success"},
    {ZR_EXIT_FAILED, "a check failed or the data is damaged, opening included (or the\n"
                     "work failed, an I/O error included)"},
    {ZR_EXIT_USAGE, "usage error (bad option, missing or extra argument)"},
    {ZR_EXIT_OPEN, "cannot open, busy, or already exists (or cannot be created)"},
    {ZR_EXIT_NOT_FOUND, "no such record: an INDEX, RECORD or FRAME out of range"},
    {ZR_EXIT_INTERRUPTED, "interrupted (Ctrl-C); everything committed before stays intact"},
};

void zr_print_exit_table(FILE *out)
{
    fputs("Exit status:\n", out);
    for (size_t i = 0; i < sizeof EXIT_ROWS / sizeof EXIT_ROWS[0]; i++) {
        fprintf(out, "  %-4d ", EXIT_ROWS[i].code);
        for (const char *p = EXIT_ROWS[i].what; *p; p++) {
            if (*p == '\n')
                fputs("\n      ", out); /* continued under the text */
            fputc(*p == '\n' ? ' ' : *p, out);
        }
        fputc('\n', out);
    }
}

int zr_exit_from_status(int status)
{
    switch (status) {
    case ZR_OK:
        return ZR_EXIT_OK;
    case ZR_EBUSY:
    case ZR_EEXIST:
    case ZR_ENOTSTORE:
        return ZR_EXIT_OPEN;
    case ZR_ERANGE:
        return ZR_EXIT_NOT_FOUND;
    case ZR_EINTR:
        return ZR_EXIT_INTERRUPTED;
    default:
        return ZR_EXIT_FAILED;
    }
}

static void verror(const char *cmd, const char *file, const char *fmt, va_list ap)
{
    fprintf(stderr, "zr %s: ", cmd);
    if (file)
        fprintf(stderr, "%s: ", file);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
}

void zr_error(const char *cmd, const char *file, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    verror(cmd, file, fmt, ap);
    va_end(ap);
}

int zr_fail(const char *cmd, const char *file, const char *what, int status)
{
    zr_error(cmd, file, "%s: %s", what, zr_last_error());
    return zr_exit_from_status(status);
}

int zr_exit_from_open(int status)
{
    return status == ZR_OK ? ZR_EXIT_OK : status == ZR_ECORRUPT ? ZR_EXIT_FAILED : ZR_EXIT_OPEN;
}

int zr_fail_open(const char *cmd, const char *file, int status)
{
    zr_error(cmd, file, "cannot open: %s", zr_last_error());
    if (strstr(zr_last_error(), "ZRE_OPEN_RECOVER") && file)
        fprintf(stderr, "zr: to recover it: zr recover %s\n", file);
    return zr_exit_from_open(status);
}

int zr_fail_detail(const char *cmd, const char *file, const char *detail, int exit_status)
{
    if (file && strstr(detail, file))
        zr_error(cmd, NULL, "%s", detail);
    else
        zr_error(cmd, file, "%s", detail);
    return exit_status;
}

int zr_run_per_store(const zr_store_loop *loop, int argc, char **argv)
{
    zr_opts opts = {0, 0, 0};
    zr_option table[16] = {
        ZR_OPT_FLAG(NULL, "--json", &opts.json, loop->json_help),
        ZR_OPT_QUIET(&opts.quiet),
    };
    if (!loop->progress)
        table[1].help = NULL; /* taken, as by every command, but it has no effect */
    size_t n = 2;
    if (loop->concat)
        table[n++] = (zr_option)ZR_OPT_FLAG(NULL, "--concat", &opts.concat,
                                            "also open the STOREs (e.g. shard-*) as one dataset and "
                                            "check\nthey share one identity (exit 1 naming the "
                                            "shards that differ)");
    for (const zr_option *o = loop->extra; o && o->name && n + 1 < 16; o++)
        table[n++] = *o;
    table[n] = (zr_option)ZR_OPT_END;
    zr_args args;
    int st = zr_parse_args(loop->cmd, table, argc, argv, &args);
    if (st != ZR_ARGS_GO)
        return st;
    int status = 0;
    for (int i = 0; i < args.n; i++) {
        if (loop->blank_between && !opts.json && i)
            printf("\n");
        fflush(stdout);
        int r = loop->one(args.v[i], &opts);
        fflush(stdout);
        if (r == ZR_EXIT_INTERRUPTED)
            return r;
        if (r > status)
            status = r;
    }
    if (opts.concat) {
        int r = zr_concat_report(loop->cmd->name, args.v, args.n);
        if (r > status)
            status = r;
    }
    return status;
}

int zr_parse_u64(const char *s, uint64_t *out)
{
    if (!s || *s < '0' || *s > '9')
        return -1; /* strtoull would take a sign or a space */
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || *end)
        return -1;
    *out = v;
    return 0;
}

int zr_parse_i64(const char *s, int64_t *out)
{
    if (!s || !*s)
        return -1;
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || *end || end == s)
        return -1;
    *out = v;
    return 0;
}

int zr_parse_range(const zr_command *cmd, const char *store, const char *a, uint64_t n,
                   uint64_t *lo, uint64_t *hi)
{
    const char *colon = strchr(a, ':');
    int64_t v;
    if (!colon) {
        if (zr_parse_i64(a, &v) < 0)
            return zr_usage(cmd, "INDEX '%s' is not an integer or START:STOP", a);
        if (v < -(int64_t)n || v >= (int64_t)n) {
            zr_error(cmd->name, store, "index %" PRId64 " is out of range for %" PRIu64
                     " records (no such record)", v, n);
            return ZR_EXIT_NOT_FOUND;
        }
        *lo = v < 0 ? (uint64_t)(v + (int64_t)n) : (uint64_t)v;
        *hi = *lo + 1;
        return 0;
    }
    char left[32] = "", right[32] = "";
    size_t ll = (size_t)(colon - a);
    if (ll >= sizeof left || strlen(colon + 1) >= sizeof right)
        return zr_usage(cmd, "INDEX '%s' is not START:STOP", a);
    memcpy(left, a, ll);
    strcpy(right, colon + 1);
    int64_t b[2] = {0, (int64_t)n};
    const char *parts[2] = {left, right};
    for (int i = 0; i < 2; i++) {
        if (!*parts[i])
            continue;
        if (zr_parse_i64(parts[i], &v) < 0)
            return zr_usage(cmd, "INDEX '%s' is not START:STOP", a);
        if (v < 0)
            v += (int64_t)n;
        b[i] = v < 0 ? 0 : v > (int64_t)n ? (int64_t)n : v;
    }
    *lo = (uint64_t)b[0];
    *hi = b[1] > b[0] ? (uint64_t)b[1] : (uint64_t)b[0];
    return 0;
}

/* ---------------------------------------------------------------- JSON */

void zr_json_print(json_object *o)
{
    puts(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE));
    json_object_put(o);
}

void zr_json_u64(json_object *o, const char *key, uint64_t v)
{
    json_object_object_add(o, key, json_object_new_uint64(v));
}

void zr_json_str(json_object *o, const char *key, const char *v)
{
    json_object_object_add(o, key, v ? json_object_new_string(v) : NULL);
}

/* ------------------------------------------------------------- progress */

#define REDRAW_NS UINT64_C(100000000)

void zr_progress_start(zr_progress *p, const char *label, uint64_t total, const char *unit,
                       int quiet)
{
    p->label = label;
    p->unit = unit;
    p->total = total;
    p->done = p->bytes = 0;
    p->t0_ns = p->last_ns = zrp_now_ns();
    p->on = !quiet && zrp_is_terminal(2);
    p->drawn = 0;
}

static void hms(double s, char *buf, size_t cap)
{
    if (s < 0 || s > 1e7) {
        snprintf(buf, cap, "--:--");
        return;
    }
    unsigned t = (unsigned)(s + 0.5);
    if (t >= 3600)
        snprintf(buf, cap, "%u:%02u:%02u", t / 3600, t / 60 % 60, t % 60);
    else
        snprintf(buf, cap, "%u:%02u", t / 60, t % 60);
}

void zr_progress_update(zr_progress *p, uint64_t done, uint64_t bytes)
{
    p->done = done;
    p->bytes = bytes;
    if (!p->on || (done == 0 && bytes == 0))
        return;
    uint64_t now = zrp_now_ns();
    if (p->drawn && now - p->last_ns < REDRAW_NS)
        return;
    p->last_ns = now;
    double secs = (double)(now - p->t0_ns) / 1e9;
    char rate[48], eta[32] = "", b[32];
    if (secs <= 0)
        secs = 1e-9;
    if (bytes)
        snprintf(rate, sizeof rate, "%s/s", zr_human_bytes((uint64_t)((double)bytes / secs), b,
                                                           sizeof b));
    else
        snprintf(rate, sizeof rate, "%.0f %s/s", (double)done / secs, p->unit);
    if (p->total) {
        char t[24];
        hms(done > 0 && done <= p->total ? secs * (double)(p->total - done) / (double)done : -1, t,
            sizeof t);
        snprintf(eta, sizeof eta, " ETA %s", t);
    }
    if (p->total)
        fprintf(stderr, "\r\033[K%s: %" PRIu64 "/%" PRIu64 " %s (%.0f%%) %s%s", p->label, done,
                p->total, p->unit, 100.0 * (double)done / (double)p->total, rate, eta);
    else
        fprintf(stderr, "\r\033[K%s: %" PRIu64 " %s %s", p->label, done, p->unit, rate);
    fflush(stderr);
    p->drawn = 1;
}

void zr_progress_end(zr_progress *p)
{
    if (p->on && p->drawn) {
        fputs("\r\033[K", stderr);
        fflush(stderr);
    }
    p->drawn = 0;
}

/* ------------------------------------------------------------ interrupt */

static volatile sig_atomic_t interrupted;

static void on_signal(int sig)
{
    interrupted = 1;
    signal(sig, SIG_DFL); /* a second Ctrl-C ends the process at once */
}

void zr_interrupt_install(void)
{
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);
}

int zr_interrupted(void) { return interrupted != 0; }

int zr_interrupt_exit(const char *cmd, const char *file, const char *what)
{
    zr_error(cmd, file, "interrupted: %s", what);
    return ZR_EXIT_INTERRUPTED;
}

/* --------------------------------------------------------------- sizes */

const char *zr_human_bytes(uint64_t n, char *buf, size_t cap)
{
    static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
    double v = (double)n;
    size_t u = 0;
    while (v >= 1024.0 && u + 1 < sizeof units / sizeof units[0]) {
        v /= 1024.0;
        u++;
    }
    if (u == 0)
        snprintf(buf, cap, "%" PRIu64 " B", n);
    else
        snprintf(buf, cap, "%.1f %s", v, units[u]);
    return buf;
}

void zr_format_shape(const uint64_t *shape, size_t ndim, char *buf, size_t cap)
{
    size_t used = (size_t)snprintf(buf, cap, "(");
    for (size_t i = 0; i < ndim && used < cap; i++)
        used += (size_t)snprintf(buf + used, cap - used, "%s%" PRIu64, i ? ", " : "", shape[i]);
    if (used < cap)
        snprintf(buf + used, cap - used, ndim == 1 ? ",)" : ")");
}
