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

static const zr_command COMPACT = {
    .name = CMD,
    .synopsis = "zr compact [OPTIONS] STORE",
    .args = "STORE",
    .about = "Reclaim the space of deleted records in place; indices and contents stay\n"
             "the same. Safe to interrupt at any moment: Ctrl-C stops it after the batch\n"
             "in flight (exit 130), the store reads as before, and compact run again\n"
             "finishes.",
    .example = "zr delete train-x 0:1000 && zr compact train-x && zr info train-x",
};

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

int zr_cmd_compact(int argc, char **argv)
{
    int json = 0, quiet = 0;
    const zr_option options[] = {
        ZR_OPT_FLAG(NULL, "--json", &json, "a JSON summary on stdout"),
        ZR_OPT_FLAG("-q", "--quiet", &quiet, "no progress line (elapsed time; shown only on a "
                                             "terminal)"),
        ZR_OPT_END,
    };
    zr_args args;
    int st = zr_parse_args(&COMPACT, options, argc, argv, &args);
    if (st != ZR_ARGS_GO)
        return st;
    const char *store = args.v[0];
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
