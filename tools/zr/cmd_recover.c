/*
 * zr recover STORE - open a store whose header claims records the disk
 * never received (a crash or power loss after appends that were never
 * synced) with the engine's recovery (ZRE_OPEN_RECOVER): every record that
 * reached the disk is kept, the header is rewritten to them, and the store
 * opens normally from then on. A store that needs no recovery is left as
 * it is. A plain open of such a store fails, naming this command.
 */
#include <inttypes.h>
#include <string.h>

#include "zr_cli.h"

#define CMD "recover"

static void usage(FILE *out)
{
    fprintf(out,
            "usage: zr recover [OPTIONS] STORE\n"
            "After a crash or power loss lost appends that were never synced, keep every\n"
            "record that reached the disk (every record whose sync returned) and rewrite\n"
            "the store's header to them. A store that needs no recovery is unchanged.\n"
            "Needs the store to itself (no other writable handle).\n"
            "\n"
            "Options:\n"
            "  --json       a JSON summary on stdout\n"
            "  -h, --help   this text\n"
            "\n"
            "Example:\n"
            "  zr info train-x || zr recover train-x\n"
            "\n%s",
            zr_exit_table);
}

int zr_cmd_recover(int argc, char **argv)
{
    if (zr_wants_help(argc, argv)) {
        usage(stdout);
        return 0;
    }
    int json = 0;
    const char *store = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--json"))
            json = 1;
        else if (a[0] == '-' && a[1])
            return zr_usage_error(CMD, "unknown option '%s'", a);
        else if (store)
            return zr_usage_error(CMD, "one STORE only (got '%s' too)", a);
        else
            store = a;
    }
    if (!store)
        return zr_usage_error(CMD, "missing STORE argument");
    zrs_store *s;
    int rc = zrs_open_ex(&s, store, ZRE_OPEN_RECOVER);
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
