/*
 * fuzz_identity.c - the store.zr identity decoder (msgpack, bounded before
 * msgpack-c allocates): any bytes decode or are refused, never crash or
 * allocate beyond the input's size. A decoded identity re-encodes (with
 * its uuid) to bytes that decode to the same identity, uuid included.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "zrs_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    zrs_identity id;
    if (zrs__identity_decode(data, size, "store.zr", &id) != 0)
        return 0;
    void *buf = NULL;
    size_t len = 0;
    if (zrs__identity_encode(&id, 1, &buf, &len) != 0)
        abort();
    zrs_identity again;
    if (zrs__identity_decode(buf, len, "store.zr", &again) != 0 || again.kind != id.kind ||
        again.dtype != id.dtype || again.record_size != id.record_size ||
        again.has_uuid != id.has_uuid ||
        (id.has_uuid && memcmp(again.uuid, id.uuid, sizeof id.uuid) != 0))
        abort();
    free(buf);
    return 0;
}
