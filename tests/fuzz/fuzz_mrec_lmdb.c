/*
 * fuzz_mrec_lmdb.c - an mrec-lmdb file from the input, through every read
 * entry point of libzmrec: open (its checks before LMDB maps the file,
 * then meta and index), every record's meta, system, stored and resolved
 * frames, the index and ff, then zmr_validate. A damaged file must be an
 * error, never a crash: scripts/fuzz.sh fails on any crash, inside
 * liblmdb or not (liblmdb is built from source with py-lmdb's hardening
 * series for that, subprojects/lmdb.wrap).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "fuzz_common.h"
#include "zmrec.h"

static void read_all(zmr_reader *r)
{
    zmr_frame *f = NULL;
    if (zmr_read_index(r, &f) == ZMR_OK)
        zmr_frame_free(f);
    if (zmr_read_ff(r, &f) == ZMR_OK)
        zmr_frame_free(f);
    uint64_t n = zmr_n_records(r);
    for (uint64_t i = 0; i < n && i < 64; i++) {
        char *json = NULL;
        uint64_t nf = 0;
        if (zmr_read_record_meta(r, i, &json) == ZMR_OK)
            zmr_free(json);
        if (zmr_read_system(r, i, &f) == ZMR_OK)
            zmr_frame_free(f);
        if (zmr_record_info(r, i, NULL, &nf, NULL, NULL) != ZMR_OK)
            continue;
        for (uint64_t k = 0; k < nf && k < 16; k++) {
            if (zmr_read_update(r, i, k, &f) == ZMR_OK)
                zmr_frame_free(f);
            if (zmr_read_frame(r, i, k, &f) == ZMR_OK)
                zmr_frame_free(f);
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char path[300];
    snprintf(path, sizeof path, "%s/c.mrec.lmdb", fuzz_scratch());
    fuzz_write(path, data, size);
    zmr_reader *r = NULL;
    if (zmr_open(&r, path, ZMR_OPEN_NOLOCK) == ZMR_OK) {
        read_all(r);
        zmr_close(r);
        (void)zmr_validate(path, ZMR_OPEN_NOLOCK);
    }
    return 0;
}
