/*
 * zr push STORE URL - upload a finished local store to an http(s):// or
 * s3:// URL (zrs_push_store), so that `zr info URL`, DenseStore.open(URL,
 * readonly=True) and the loader read it there. The store is opened
 * read-only: pushing beside a live writer sends the records committed when
 * it opened. meta.zr goes last, so a reader never opens a half-uploaded
 * store; an interrupted push (Ctrl-C, exit 130) leaves no readable store
 * at the URL, and pushing again to a URL that holds one is refused.
 */
#include <inttypes.h>
#include <stdatomic.h>
#include <string.h>

#include "zr_cli.h"
#include "zr_platform.h"

#define CMD "push"

static const zr_command PUSH = {
    .name = CMD,
    .synopsis = "zr push [OPTIONS] STORE URL",
    .args = "STORE URL",
    .about = "Upload the local store STORE to URL (http://, https:// with PUT, or\n"
             "s3://bucket/prefix), meta.zr last, so that readers open it there read-only.\n"
             "S3 credentials, region and endpoint come from the AWS environment variables\n"
             "(AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_REGION, AWS_ENDPOINT_URL...)\n"
             "or profile files. A URL that already holds a store is refused.",
    .example = "zr push train s3://datasets/fashion/train && zr info s3://datasets/fashion/train",
};

typedef struct push_state {
    zr_progress p;
    uint64_t bytes;
    zre_engine *engine;
    atomic_int stop;
} push_state;

static void on_progress(uint64_t done, uint64_t total, void *arg)
{
    push_state *st = arg;
    (void)total;
    st->bytes = done;
    zr_progress_update(&st->p, done, done);
}

/* Forwards Ctrl-C to the engine: the upload stops between files. */
static void watch(void *arg)
{
    push_state *st = arg;
    while (!atomic_load(&st->stop)) {
        zrp_sleep_ms(50);
        if (zr_interrupted())
            zre_interrupt(st->engine, 1);
    }
}

int zr_cmd_push(int argc, char **argv)
{
    int json = 0, quiet = 0;
    const zr_option options[] = {
        ZR_OPT_FLAG(NULL, "--json", &json, "a JSON summary on stdout"),
        ZR_OPT_QUIET(&quiet),
        ZR_OPT_END,
    };
    zr_args args;
    int rc = zr_parse_args(&PUSH, options, argc, argv, &args);
    if (rc != ZR_ARGS_GO)
        return rc;
    const char *store = args.v[0], *url = args.v[1];
    if (!zre_is_remote(url))
        return zr_usage(&PUSH, "%s is not an http://, https:// or s3:// URL", url);
    zrs_store *s;
    rc = zrs_open_ex(&s, store, ZRE_OPEN_READONLY);
    if (rc < 0)
        return zr_fail_open(CMD, store, rc);
    push_state st = {.engine = zrs_engine(s)};
    atomic_init(&st.stop, 0);
    zr_progress_start(&st.p, store, 0, "bytes", quiet || json);
    zr_interrupt_install();
    zrp_thread th;
    int threaded = zrp_thread_start(&th, watch, &st) == 0;
    uint64_t t0 = zrp_now_ns();
    rc = zrs_push_store(s, url, on_progress, &st);
    double secs = (double)(zrp_now_ns() - t0) / 1e9;
    if (threaded) {
        atomic_store(&st.stop, 1);
        zrp_thread_join(th);
    }
    zr_progress_end(&st.p);
    uint64_t records = zrs_length(s);
    zrs_close(s);
    if (rc == ZR_EINTR)
        return zr_interrupt_exit(CMD, url, "meta.zr was not sent, so the URL holds no readable "
                                 "store; push again to a fresh URL");
    if (rc == ZR_EEXIST)
        return zr_fail(CMD, url, "refused", rc);
    if (rc < 0)
        return zr_fail(CMD, url, "upload failed (meta.zr was not sent, so no reader opens a partial "
                       "store)", rc);
    char b[32];
    if (json) {
        json_object *j = json_object_new_object();
        zr_json_str(j, "store", store);
        zr_json_str(j, "url", url);
        zr_json_u64(j, "records", records);
        zr_json_u64(j, "bytes", st.bytes);
        json_object_object_add(j, "seconds", json_object_new_double(secs));
        zr_json_print(j);
    } else {
        printf("%s: pushed %" PRIu64 " records (%s) to %s in %.2f s\n", store, records,
               zr_human_bytes(st.bytes, b, sizeof b), url, secs);
    }
    return 0;
}
