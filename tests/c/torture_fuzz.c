/*
 * torture_fuzz.c - damaged stores: a seeded loop copies a small ragged
 * store, damages one of its files (meta.zr, 0.loc, 0.chunk, store.zr,
 * dict.zr: flipped bytes, truncation, junk appended, a zeroed range) and
 * then opens and reads it. Every outcome must be a clean error (negative
 * status with a detail message) or exactly the original data: no crash,
 * no silent wrong data. Raw stores carry no checksum over record bytes, so
 * for them damage to 0.chunk/0.loc is only required not to crash (see
 * docs/FORMAT.md); everything else is checked for every codec.
 *
 * Knobs: ZR_FUZZ_ITERS (default 400), ZR_FUZZ_SEED (default 1).
 */
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sys/stat.h>

#include <cmocka.h>
#include <zdict.h>

#include <zrstore.h>

#include "zr_test_util.h"

#define NREC 40

static char root[512];

/* Packed ragged record i of int16: [ndim=1][dim][payload]. */
static uint64_t rec_pack(int i, unsigned char *out)
{
    uint64_t dim = 20 + (uint64_t)i * 13;
    memset(out, 0, 16);
    out[0] = 1;
    for (int b = 0; b < 8; b++)
        out[8 + b] = (unsigned char)(dim >> (8 * b));
    for (uint64_t j = 0; j < dim * 2; j++)
        out[16 + j] = (unsigned char)(j % 4 == 0 ? (uint64_t)i : j * 7 + (j >> 4));
    return 16 + dim * 2;
}

static void make_template(const char *path, zre_codec codec, const void *dict, size_t dict_size)
{
    zrs_store *s = NULL;
    assert_int_equal(zrs_create_ragged_dict(&s, path, ZRS_INT16, codec,
                                            codec == ZRE_CODEC_ZSTD_DICT ? dict : NULL,
                                            codec == ZRE_CODEC_ZSTD_DICT ? dict_size : 0), 0);
    unsigned char *buf = malloc(NREC * 1200);
    uint64_t b[NREC + 1];
    b[0] = 0;
    for (int i = 0; i < NREC; i++)
        b[i + 1] = b[i] + rec_pack(i, buf + b[i]);
    assert_int_equal(zrs_append_ragged(s, buf, b, NREC, NULL), 0);
    assert_int_equal(zrs_close(s), 0);
    free(buf);
}

static const char *const files[] = {"meta.zr", "0.loc", "0.chunk", "store.zr", "dict.zr"};

/* Returns 1 if the damaged store read back as exactly the original. */
static int check_store(const char *path, int content_checked, const char *what)
{
    zrs_store *s = NULL;
    int rc = zrs_open(&s, path);
    if (rc != 0) {
        if (rc > 0 || zr_last_error()[0] == '\0')
            fail_msg("%s: open returned %d without a detail", what, rc);
        return 0;
    }
    if (zrs_length(s) != NREC)
        fail_msg("%s: opened with %" PRIu64 " records, expected %d", what, zrs_length(s), NREC);
    unsigned char want[1200], got[1200];
    int all = 1;
    for (int i = 0; i < NREC; i++) {
        int64_t idx = i;
        uint64_t size = 0;
        rc = zrs_ragged_sizes(s, &idx, 1, &size);
        if (rc == 0 && size > sizeof got)
            rc = -1000; /* a damaged size; gather would refuse too */
        uint64_t bd[2] = {0, size};
        if (rc == 0)
            rc = zrs_gather_ragged(s, &idx, 1, got, sizeof got, bd);
        zre_check_record(zrs_engine(s), (uint64_t)i); /* must not crash */
        if (rc < 0) {
            if (rc != -1000 && zr_last_error()[0] == '\0')
                fail_msg("%s: record %d failed without a detail", what, i);
            all = 0;
            continue;
        }
        uint64_t n = rec_pack(i, want);
        if (content_checked && (size != n || memcmp(got, want, n) != 0))
            fail_msg("%s: record %d read back wrong data silently", what, i);
        if (size != n || memcmp(got, want, n) != 0)
            all = 0;
    }
    assert_int_equal(zrs_close(s), 0);
    return all;
}

static void test_fuzz_damaged_files(void **state)
{
    (void)state;
    assert_int_equal(zt_mkdtemp(root, sizeof root, "fuzz"), 0);
    uint64_t iters = zt_env_u64("ZR_FUZZ_ITERS", 400);
    uint64_t seed = zt_env_u64("ZR_FUZZ_SEED", 1);

    /* A dictionary from the records themselves (through the library). */
    unsigned char *samples = malloc(200 * 1200);
    uint64_t sizes[200], at = 0;
    for (int i = 0; i < 200; i++) {
        sizes[i] = rec_pack(i % NREC + (i / NREC) * 3, samples + at);
        at += sizes[i];
    }
    unsigned char dict[8192];
    uint64_t dict_size = 0;
    assert_int_equal(zrs_train_dict(samples, sizes, 200, dict, sizeof dict, &dict_size), 0);
    free(samples);

    zre_codec codecs[3] = {ZRE_CODEC_RAW, ZRE_CODEC_ZSTD, ZRE_CODEC_ZSTD_DICT};
    char tpl[3][700];
    for (int c = 0; c < 3; c++) {
        snprintf(tpl[c], sizeof tpl[c], "%s/tpl-%s", root, zre_codec_name(codecs[c]));
        make_template(tpl[c], codecs[c], dict, dict_size);
        assert_int_equal(check_store(tpl[c], 1, "template"), 1);
    }

    uint64_t s = seed, errors = 0, intact = 0, tolerated = 0;
    for (uint64_t it = 0; it < iters; it++) {
        int c = (int)(zt_splitmix64(&s) % 3);
        int nfiles = codecs[c] == ZRE_CODEC_ZSTD_DICT ? 5 : 4;
        const char *fname = files[zt_splitmix64(&s) % (uint64_t)nfiles];
        char work[700], p[800], q[800];
        snprintf(work, sizeof work, "%s/w", root);
        zt_os_mkdir(work);
        for (int f = 0; f < 5; f++) {
            unsigned char *b;
            snprintf(p, sizeof p, "%s/%s", tpl[c], files[f]);
            size_t n = zt_slurp(p, &b);
            if (b) {
                snprintf(q, sizeof q, "%s/%s", work, files[f]);
                zt_write_file(q, b, n);
            }
            free(b);
        }
        snprintf(p, sizeof p, "%s/%s", work, fname);
        unsigned char *b;
        size_t n = zt_slurp(p, &b);
        assert_non_null(b);
        b = realloc(b, n + 64);
        int kind = (int)(zt_splitmix64(&s) % 4);
        char what[200];
        if (kind == 0 && n > 0) { /* flip 1..4 bytes */
            int k = 1 + (int)(zt_splitmix64(&s) % 4);
            for (int j = 0; j < k; j++)
                b[zt_splitmix64(&s) % n] ^= (unsigned char)(1 + zt_splitmix64(&s) % 255);
            snprintf(what, sizeof what, "run %" PRIu64 ": %s: %d flipped bytes in %s", it,
                     zre_codec_name(codecs[c]), k, fname);
        } else if (kind == 1) { /* truncate */
            n = n ? (size_t)(zt_splitmix64(&s) % n) : 0;
            snprintf(what, sizeof what, "run %" PRIu64 ": %s: %s truncated to %zu", it,
                     zre_codec_name(codecs[c]), fname, n);
        } else if (kind == 2) { /* junk appended */
            size_t k = 1 + (size_t)(zt_splitmix64(&s) % 64);
            for (size_t j = 0; j < k; j++)
                b[n + j] = (unsigned char)zt_splitmix64(&s);
            n += k;
            snprintf(what, sizeof what, "run %" PRIu64 ": %s: %zu bytes appended to %s", it,
                     zre_codec_name(codecs[c]), k, fname);
        } else if (n > 0) { /* a zeroed range */
            size_t a = (size_t)(zt_splitmix64(&s) % n), len = 1 + (size_t)(zt_splitmix64(&s) % 32);
            if (a + len > n)
                len = n - a;
            memset(b + a, 0, len);
            snprintf(what, sizeof what, "run %" PRIu64 ": %s: %zu bytes zeroed at %zu in %s", it,
                     zre_codec_name(codecs[c]), len, a, fname);
        } else {
            snprintf(what, sizeof what, "run %" PRIu64 ": untouched empty %s", it, fname);
        }
        zt_write_file(p, b, n);
        free(b);
        int unchecked = codecs[c] == ZRE_CODEC_RAW &&
                        (!strcmp(fname, "0.chunk") || !strcmp(fname, "0.loc"));
        int ok = check_store(work, !unchecked, what);
        if (ok)
            intact++;
        else if (unchecked)
            tolerated++;
        else
            errors++;
        zt_rmtree(work);
    }
    print_message("fuzz: %" PRIu64 " runs: %" PRIu64 " read back intact, %" PRIu64
                  " failed cleanly, %" PRIu64 " raw runs not content-checked\n", iters, intact,
                  errors, tolerated);
    zt_rmtree(root);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fuzz_damaged_files),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
