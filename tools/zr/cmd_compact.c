/*
 * zr compact STORE - reclaim the bytes of deleted records in place
 * (zrs_compact). The engine commits the work batch by batch and keeps a
 * journal while it moves bytes, so Ctrl-C (or a crash) at any moment
 * leaves a store that opens and reads the same; running compact again
 * finishes. Ctrl-C asks the engine to stop after the batch in flight
 * (zre_interrupt), so the process exits 130 with every record intact. The
 * engine reports no progress of its own, so the progress line shows the
 * elapsed time and the bytes being reclaimed.
 */
#include <inttypes.h>
#include <stdatomic.h>
#include <string.h>

#include "zr_cli.h"
#include "zr_platform.h"

#define CMD "compact"

static void usage(FILE *out)
{
    fprintf(out,
            "usage: zr compact [OPTIONS] STORE\n"
            "Reclaim the space of deleted records in place; indices and contents stay\n"
            "the same. Safe to interrupt at any moment: Ctrl-C stops it after the batch\n"
            "in flight (exit 130), the store reads as before, and compact run again\n"
            "finishes.\n"
            "\n"
            "Options:\n"
            "  --json       a JSON summary on stdout\n"
            "  -q, --quiet  no progress line (elapsed time; shown only on a terminal)\n"
            "  -h, --help   this text\n"
            "\n"
            "Example:\n"
            "  zr delete train-x 0:1000 && zr compact train-x && zr info train-x\n"
            "\n%s",
            zr_exit_table);
}

typedef struct ticker {
    atomic_int stop;
    const char *label;
    uint64_t bytes;
    int on;
    zre_engine *engine;
} ticker;

/* Forwards Ctrl-C to the engine, and draws the progress line when on. */
static void tick(void *arg)
{
    ticker *t = arg;
    uint64_t t0 = zrp_now_ns();
    char b[32];
    while (!atomic_load(&t->stop)) {
        zrp_sleep_ms(50);
        if (zr_interrupted())
            zre_interrupt(t->engine, 1);
        if (!t->on)
            continue;
        unsigned s = (unsigned)((zrp_now_ns() - t0) / 1000000000u);
        fprintf(stderr, "\r\033[K%s: compacting, %u:%02u elapsed, reclaiming %s", t->label, s / 60,
                s % 60, zr_human_bytes(t->bytes, b, sizeof b));
        fflush(stderr);
    }
    if (t->on) {
        fputs("\r\033[K", stderr);
        fflush(stderr);
    }
}

static int parse_args(int argc, char **argv, int *json, int *quiet, const char **store)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--json"))
            *json = 1;
        else if (!strcmp(a, "--quiet") || !strcmp(a, "-q"))
            *quiet = 1;
        else if (a[0] == '-' && a[1])
            return zr_usage_error(CMD, "unknown option '%s'", a);
        else if (*store)
            return zr_usage_error(CMD, "one STORE only (got '%s' too)", a);
        else
            *store = a;
    }
    return *store ? 0 : zr_usage_error(CMD, "missing STORE argument");
}

int zr_cmd_compact(int argc, char **argv)
{
    if (zr_wants_help(argc, argv)) {
        usage(stdout);
        return 0;
    }
    int json = 0, quiet = 0;
    const char *store = NULL;
    int st = parse_args(argc, argv, &json, &quiet, &store);
    if (st)
        return st;
    zrs_store *s;
    int rc = zrs_open(&s, store);
    if (rc < 0)
        return zr_fail_open(CMD, store, rc);
    zre_stats before, after;
    rc = zre_get_stats(zrs_engine(s), &before);
    if (rc < 0) {
        zr_fail(CMD, store, "cannot read the record table", rc);
        zrs_close(s);
        return ZR_EXIT_FAILED;
    }
    ticker t = {.label = store, .bytes = before.reclaimable,
                .on = !quiet && zrp_is_terminal(2), .engine = zrs_engine(s)};
    atomic_init(&t.stop, 0);
    zr_interrupt_install();
    zrp_thread th;
    int threaded = zrp_thread_start(&th, tick, &t) == 0;
    uint64_t t0 = zrp_now_ns();
    rc = zrs_compact(s);
    double secs = (double)(zrp_now_ns() - t0) / 1e9;
    if (threaded) {
        atomic_store(&t.stop, 1);
        zrp_thread_join(th);
    }
    if (rc == ZR_EINTR) {
        zrs_close(s);
        return zr_interrupt_exit(CMD, store, "every record is intact; run compact again to finish");
    }
    if (rc < 0) {
        int ex = zr_fail(CMD, store, "compact failed (the store is as the last committed batch "
                         "left it; run compact again)", rc);
        zrs_close(s);
        return ex;
    }
    rc = zre_get_stats(zrs_engine(s), &after);
    int crc = zrs_close(s);
    if (rc < 0 || crc < 0)
        return zr_fail(CMD, store, "after compact", rc < 0 ? rc : crc);
    uint64_t freed = before.chunk_bytes - after.chunk_bytes;
    char b[32], c[32];
    if (json) {
        json_object *j = json_object_new_object();
        zr_json_str(j, "store", store);
        zr_json_u64(j, "records", after.records);
        zr_json_u64(j, "reclaimed_bytes", freed);
        zr_json_u64(j, "chunk_bytes", after.chunk_bytes);
        json_object_object_add(j, "seconds", json_object_new_double(secs));
        zr_json_print(j);
    } else {
        printf("%s: reclaimed %s in %.2f s; %" PRIu64 " records in %s of chunk data\n", store,
               zr_human_bytes(freed, b, sizeof b), secs, after.records,
               zr_human_bytes(after.chunk_bytes, c, sizeof c));
    }
    return 0;
}
