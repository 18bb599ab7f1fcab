/*
 * fuzz_mrec_lmdb.c - an mrec-lmdb file from the input: the checks libzmrec
 * makes before LMDB maps a file, then open, read every record and frame,
 * and validate. liblmdb's own page walk trusts its file, so a damaged one
 * that passes libzmrec's checks can still crash inside liblmdb (documented
 * in docs/MREC.md; `zr mrec validate` runs it in a child with a time
 * limit); such a crash found here is in liblmdb, not in our code.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "fuzz_common.h"
#include "zmrec.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char path[300];
    snprintf(path, sizeof path, "%s/c.mrec.lmdb", fuzz_scratch());
    fuzz_write(path, data, size);
    zmr_reader *r = NULL;
    if (zmr_open(&r, path, ZMR_OPEN_NOLOCK) == ZMR_OK) {
        uint64_t n = zmr_n_records(r);
        for (uint64_t i = 0; i < n && i < 64; i++) {
            zmr_frame *f = NULL;
            if (zmr_read_system(r, i, &f) == ZMR_OK)
                zmr_frame_free(f);
            char *json = NULL;
            if (zmr_read_record_meta(r, i, &json) == ZMR_OK)
                zmr_free(json);
        }
        zmr_close(r);
    }
    return 0;
}
