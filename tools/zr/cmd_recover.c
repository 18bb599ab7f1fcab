/*
 * zr recover STORE - open a store whose header claims records the disk
 * never received (a crash or power loss after appends that were never
 * synced) with the engine's recovery (ZRE_OPEN_RECOVER): every record that
 * reached the disk is kept, the header is rewritten to them, and the store
 * opens normally from then on. A store that needs no recovery is left as
 * it is. A plain open of such a store fails, naming this command.
 */
#include <inttypes.h>

#include "zr_cli.h"

#define CMD "recover"

static const zr_command RECOVER = {
    .name = CMD,
    .synopsis = "zr recover [OPTIONS] STORE",
    .args = "STORE",
    .about = "After a crash or power loss lost appends that were never synced, keep every\n"
             "record that reached the disk (every record whose sync returned) and rewrite\n"
             "the store's header to them. A store that needs no recovery is unchanged.\n"
             "Needs the store to itself (no other writable handle).",
    .example = "zr info train-x || zr recover train-x",
};

int zr_cmd_recover(int argc, char **argv)
{
    int json = 0;
    const zr_option options[] = {
        ZR_OPT_FLAG(NULL, "--json", &json, "a JSON summary on stdout"),
        ZR_OPT_END,
    };
    zr_args args;
    int rc = zr_parse_args(&RECOVER, options, argc, argv, &args);
    if (rc != ZR_ARGS_GO)
        return rc;
    const char *store = args.v[0];
    zrs_store *s;
    rc = zrs_open_ex(&s, store, ZRE_OPEN_RECOVER);
    if (rc < 0)
        return zr_fail_open(CMD, store, rc);
    uint64_t n = zrs_length(s);
    rc = zrs_close(s);
    if (rc < 0)
        return zr_fail(CMD, store, "closing after recovery", rc);
    if (json) {
        json_object *j = json_object_new_object();
        zr_json_str(j, "store", store);
        zr_json_u64(j, "records", n);
        zr_json_print(j);
    } else {
        printf("%s: %" PRIu64 " records, opens normally\n", store, n);
    }
    return 0;
}
