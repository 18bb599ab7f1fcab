/*
 * args.c - the one argument parser of zr (see zr_cli.h): a command's
 * option table and named positionals in, its --help and its usage errors
 * out. Every command, mrec's subcommands included, goes through here, so
 * they all take options the same way and say the same things.
 */
#include <stdarg.h>
#include <string.h>

#include "zr_cli.h"

/* ------------------------------------------------------------- printing */

/* Each "\n"-separated line of text, the first after `first`, the others
 * after `rest`. */
static void print_lines(FILE *out, const char *text, const char *first, const char *rest)
{
    const char *p = text ? text : "";
    for (int k = 0; *p || k == 0; k++) {
        const char *nl = strchr(p, '\n');
        size_t len = nl ? (size_t)(nl - p) : strlen(p);
        fprintf(out, "%s%.*s\n", k ? rest : first, (int)len, p);
        p += len + (nl != NULL);
    }
}

/* "  -o, --output FILE": the left column of an option's row. */
static int option_left(const zr_option *o, char *buf, size_t cap)
{
    return snprintf(buf, cap, "  %s%s%s%s%s", o->alias ? o->alias : "", o->alias ? ", " : "",
                    o->name, o->metavar ? " " : "", o->metavar ? o->metavar : "");
}

static const zr_option HELP_OPTION = ZR_OPT_FLAG("-h", "--help", NULL, "this text");

void zr_print_help(FILE *out, const zr_command *cmd, const zr_option *options)
{
    if (cmd->help) {
        fputs(cmd->help, out);
        return;
    }
    print_lines(out, cmd->synopsis, "usage: ", "       ");
    fprintf(out, "%s\n\nOptions:\n", cmd->about);
    char left[128], pad[128];
    int width = option_left(&HELP_OPTION, left, sizeof left);
    for (const zr_option *o = options; o && o->name; o++) {
        int w = option_left(o, left, sizeof left);
        if (o->help && w > width)
            width = w;
    }
    width += 2;
    snprintf(pad, sizeof pad, "%*s", width < (int)sizeof pad ? width : 0, "");
    for (const zr_option *o = options; o && o->name; o++) {
        if (!o->help)
            continue; /* internal */
        int w = option_left(o, left, sizeof left);
        fprintf(out, "%s%*s", left, width - w, "");
        print_lines(out, o->help, "", pad);
    }
    option_left(&HELP_OPTION, left, sizeof left);
    fprintf(out, "%-*s%s\n\nExample:\n", width, left, HELP_OPTION.help);
    print_lines(out, cmd->example, "  ", "  ");
    fputc('\n', out);
    zr_print_exit_table(out);
    if (cmd->notes)
        fprintf(out, "%s\n", cmd->notes);
}

int zr_usage(const zr_command *cmd, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "zr %s: ", cmd->name);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    print_lines(stderr, cmd->synopsis, "usage: ", "       ");
    fprintf(stderr, "Try 'zr %s --help'.\n", cmd->name);
    return ZR_EXIT_USAGE;
}

/* ---------------------------------------------------------- positionals */

/* Words of cmd->args: at most 8 ("STORE INDEX..." is two). */
typedef struct arg_word {
    char name[32];
    int optional, repeats;
} arg_word;

static int arg_words(const char *spec, arg_word *w, int cap)
{
    int n = 0;
    for (const char *p = spec ? spec : ""; *p && n < cap;) {
        while (*p == ' ')
            p++;
        size_t len = strcspn(p, " ");
        if (len == 0)
            break;
        arg_word *a = &w[n++];
        a->optional = p[0] == '[';
        a->repeats = 0;
        for (size_t k = 0; k + 3 <= len; k++)
            a->repeats |= !strncmp(p + k, "...", 3);
        const char *s = p + a->optional;
        size_t sl = strcspn(s, ".] ");
        snprintf(a->name, sizeof a->name, "%.*s", (int)sl, s);
        p += len;
    }
    return n;
}

/* Too few or too many positionals for cmd->args: a usage error. */
static int check_count(const zr_command *cmd, const zr_args *got)
{
    arg_word w[8];
    int nw = arg_words(cmd->args, w, 8), required = 0, unlimited = 0;
    for (int k = 0; k < nw; k++) {
        required += !w[k].optional;
        unlimited |= w[k].repeats;
    }
    if (got->n < required) {
        int seen = 0;
        for (int k = 0; k < nw; k++)
            if (!w[k].optional && seen++ == got->n)
                return zr_usage(cmd, "missing %s", w[k].name);
    }
    if (!unlimited && got->n > nw)
        return zr_usage(cmd, "too many arguments: '%s' (expected %s)", got->v[nw],
                        nw ? cmd->args : "none");
    return ZR_ARGS_GO;
}

/* ---------------------------------------------------------------- parse */

static int is_option(const char *a, unsigned flags)
{
    if (a[0] != '-' || a[1] == '\0')
        return 0; /* a word, or "-" */
    if ((flags & ZR_ARGS_NUMBERS) && ((a[1] >= '0' && a[1] <= '9') || a[1] == ':'))
        return 0; /* a negative INDEX */
    return 1;
}

static int is_help(const char *a) { return !strcmp(a, "-h") || !strcmp(a, "--help"); }

static const zr_option *find_option(const zr_option *options, const char *a, size_t len)
{
    for (const zr_option *o = options; o && o->name; o++) {
        if (strlen(o->name) == len && !strncmp(o->name, a, len))
            return o;
        if (o->alias && strlen(o->alias) == len && !strncmp(o->alias, a, len))
            return o;
    }
    return NULL;
}

/* Keep the first problem found (the help request still wins over it). */
static void note(char *err, size_t cap, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
static void note(char *err, size_t cap, const char *fmt, ...)
{
    if (*err)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, cap, fmt, ap);
    va_end(ap);
}

/* Option argv[*i] (not "--" nor help): set its target, taking its value
 * from "=VALUE" or the next argument. */
static void take_option(const zr_option *options, int argc, char **argv, int *i, char *err,
                        size_t cap)
{
    const char *a = argv[*i];
    const char *eq = a[1] == '-' ? strchr(a, '=') : NULL;
    size_t len = eq ? (size_t)(eq - a) : strlen(a);
    const zr_option *o = find_option(options, a, len);
    if (!o) {
        note(err, cap, "unknown option '%.*s'", (int)len, a);
        return;
    }
    if (!o->metavar) {
        if (eq)
            note(err, cap, "%s takes no value", o->name);
        else if (o->flag)
            *o->flag = 1;
        return;
    }
    const char *v = eq ? eq + 1 : NULL;
    if (!v && *i + 1 < argc && strcmp(argv[*i + 1], "--") && !is_help(argv[*i + 1]))
        v = argv[++*i];
    if (!v)
        note(err, cap, "%.*s needs a value (%s)", (int)len, a, o->metavar);
    else if (*o->value)
        note(err, cap, "%s%s%s given twice ('%s', then '%s')", o->alias ? o->alias : "",
             o->alias ? "/" : "", o->name, *o->value, v);
    else
        *o->value = v;
}

int zr_parse_args(const zr_command *cmd, const zr_option *options, int argc, char **argv,
                  zr_args *out)
{
    char err[512] = "";
    int help = 0, npos = 0, dashdash = 0;
    out->v = argv + 1;
    out->n = 0;
    for (int i = 1; i < argc; i++) {
        char *a = argv[i];
        if (dashdash || !is_option(a, cmd->flags)) {
            if (cmd->flags & ZR_ARGS_FIRST) {
                out->v = argv + i;
                out->n = argc - i;
                break;
            }
            argv[1 + npos++] = a; /* never ahead of i: the positionals move down */
        } else if (!strcmp(a, "--")) {
            dashdash = 1;
        } else if (is_help(a)) {
            help = 1;
        } else {
            take_option(options, argc, argv, &i, err, sizeof err);
        }
    }
    if (help) {
        zr_print_help(stdout, cmd, options);
        return ZR_EXIT_OK;
    }
    if (*err)
        return zr_usage(cmd, "%s", err);
    if (cmd->flags & ZR_ARGS_FIRST)
        return ZR_ARGS_GO;
    out->n = npos;
    return check_count(cmd, out);
}
