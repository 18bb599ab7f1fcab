/*
 * fuzz_mrf1.c - the MRF1 frame decoder of libzmrec: the first byte picks
 * the frame kind, the rest is the value. A decoded frame is walked and
 * re-encoded; the encoding must decode again.
 */
#include <stdint.h>
#include <stdlib.h>

#include "zmrec.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    zmr_frame_kind kind = (zmr_frame_kind)(data[0] % 4);
    zmr_frame *f = NULL;
    if (zmr_frame_decode(&f, data + 1, size - 1, kind, "fuzz") != ZMR_OK)
        return 0;
    size_t nb = zmr_frame_nblocks(f);
    for (size_t b = 0; b < nb; b++) {
        (void)zmr_frame_block_name(f, b);
        (void)zmr_frame_block_count(f, b);
        size_t nc = zmr_frame_ncolumns(f, b);
        for (size_t c = 0; c < nc; c++) {
            zmr_column col;
            (void)zmr_frame_column(f, b, c, &col);
        }
    }
    (void)zmr_frame_header_json(f);
    void *enc = NULL;
    size_t len = 0;
    if (zmr_frame_encode(f, &enc, &len) == ZMR_OK) {
        zmr_frame *g = NULL;
        if (zmr_frame_decode(&g, enc, len, kind, "re-encoded") != ZMR_OK)
            abort();
        zmr_frame_free(g);
        zmr_free(enc);
    }
    zmr_frame_free(f);
    return 0;
}
