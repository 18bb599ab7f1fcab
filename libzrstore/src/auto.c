/*
 * auto.c - the codec="auto" rule: raw unless zstd shrinks a sample of the
 * records enough to pay for its decoding (zrs_codec_auto).
 */
#include <stdlib.h>
#include <zstd.h>

#include "zrs_internal.h"

int zrs_codec_auto(const void *data, const uint64_t *bounds, uint64_t record_size,
                   uint64_t count, zre_codec *out, uint64_t *raw_bytes, uint64_t *zstd_bytes)
{
    if (out == NULL || (count > 0 && data == NULL) || (bounds == NULL && record_size == 0))
        return zr_set_error(ZR_EINVAL, "codec_auto: NULL argument or record_size 0");
    *out = ZRE_CODEC_RAW;
    uint64_t raw = 0, packed = 0;
    if (count > 0) {
        ZSTD_CCtx *cx = ZSTD_createCCtx();
        size_t cap = 0;
        void *dst = NULL;
        if (cx == NULL)
            return zr_set_error(ZR_ENOMEM, "codec_auto: out of memory for a zstd context");
        /* As the engine writes a zstd record: level 3, content size and
         * checksum in the frame, so the sample costs what the store would. */
        (void)ZSTD_CCtx_setParameter(cx, ZSTD_c_compressionLevel, 3);
        (void)ZSTD_CCtx_setParameter(cx, ZSTD_c_checksumFlag, 1);
        (void)ZSTD_CCtx_setParameter(cx, ZSTD_c_contentSizeFlag, 1);
        const uint64_t step = count > ZRS_AUTO_SAMPLE_RECORDS
                                  ? (count + ZRS_AUTO_SAMPLE_RECORDS - 1) / ZRS_AUTO_SAMPLE_RECORDS
                                  : 1;
        int rc = ZR_OK;
        for (uint64_t i = 0; i < count && raw < ZRS_AUTO_SAMPLE_BYTES && rc == ZR_OK; i += step) {
            const unsigned char *rec = (const unsigned char *)data +
                                       (bounds ? bounds[i] : i * record_size);
            uint64_t n = bounds ? bounds[i + 1] - bounds[i] : record_size;
            size_t need = ZSTD_compressBound((size_t)n);
            if (need > cap) {
                void *grown = realloc(dst, need);
                if (grown == NULL) {
                    rc = zr_set_error(ZR_ENOMEM, "codec_auto: out of memory");
                    break;
                }
                dst = grown;
                cap = need;
            }
            size_t got = ZSTD_compress2(cx, dst, cap, rec, (size_t)n);
            if (ZSTD_isError(got))
                rc = zr_set_error(ZR_EINVAL, "codec_auto: zstd: %s", ZSTD_getErrorName(got));
            raw += n;
            packed += got;
        }
        free(dst);
        ZSTD_freeCCtx(cx);
        if (rc != ZR_OK)
            return rc;
        /* zstd when it saves at least ZRS_AUTO_MIN_SAVING_PCT percent. */
        if ((double)packed <= (double)raw * (100 - ZRS_AUTO_MIN_SAVING_PCT) / 100.0)
            *out = ZRE_CODEC_ZSTD;
    }
    if (raw_bytes)
        *raw_bytes = raw;
    if (zstd_bytes)
        *zstd_bytes = packed;
    return ZR_OK;
}
