/*
 * store_and_load.c - loaderx-in-C from C: write a dense store of 28x28
 * uint8 images and a store of int64 labels, then pull shuffled batches
 * from both through the endless loader, checking that each batch's
 * images belong to its labels.
 *
 * Uses only the public headers and pkg-config:
 *   cc store_and_load.c $(pkg-config --cflags --libs zloader) -o store_and_load
 *   ./store_and_load DIR        (DIR must not hold stores named images, labels)
 * The stores are kept in DIR; `zr info DIR/images` describes them.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <zloader.h>

#define N 1000
#define SIDE 28
#define BATCH 64
#define STEPS 5

static int fail(const char *what, int status)
{
    fprintf(stderr, "store_and_load: %s: %s (%s)\n", what, zr_strerror(status), zr_last_error());
    return 1;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s DIR\n", argv[0]);
        return 2;
    }
    char images_path[4096], labels_path[4096];
    snprintf(images_path, sizeof images_path, "%s/images", argv[1]);
    snprintf(labels_path, sizeof labels_path, "%s/labels", argv[1]);

    /* Image i is filled with byte i % 251 and labelled i, so any batch can
     * be checked against its own labels. */
    uint8_t *images = malloc((size_t)N * SIDE * SIDE);
    int64_t *labels = malloc(N * sizeof *labels);
    if (images == NULL || labels == NULL)
        return fail("malloc", ZR_ENOMEM);
    for (int64_t i = 0; i < N; i++) {
        memset(images + i * SIDE * SIDE, (int)(i % 251), SIDE * SIDE);
        labels[i] = i;
    }

    zrs_store *img = NULL, *lab = NULL;
    const uint64_t shape[2] = {SIDE, SIDE};
    uint64_t first = 0;
    int st = zrs_create_dense(&img, images_path, ZRS_UINT8, shape, 2, ZRE_CODEC_ZSTD);
    if (st < 0)
        return fail(images_path, st);
    st = zrs_append_dense(img, images, (uint64_t)N * SIDE * SIDE, N, &first);
    if (st < 0)
        return fail("append images", st);
    st = zrs_create_dense(&lab, labels_path, ZRS_INT64, NULL, 0, ZRE_CODEC_RAW);
    if (st < 0)
        return fail(labels_path, st);
    st = zrs_append_dense(lab, labels, N * sizeof *labels, N, &first);
    if (st < 0)
        return fail("append labels", st);
    free(images);
    free(labels);

    zld_options opt = ZLD_OPTIONS_INIT;
    opt.batch_size = BATCH;
    opt.mode = ZSM_IID;
    opt.seed = 7;
    zrs_store *streams[2] = {img, lab};
    zld_loader *loader = NULL;
    st = zld_create(&loader, streams, 2, &opt);
    if (st < 0)
        return fail("zld_create", st);
    for (int step = 0; step < STEPS; step++) {
        zld_batch *b = NULL;
        st = zld_next(loader, &b);
        if (st < 0)
            return fail("zld_next", st);
        uint64_t img_bytes = 0, lab_bytes = 0;
        const uint8_t *bi = zld_batch_data(b, 0, &img_bytes);
        const int64_t *bl = zld_batch_data(b, 1, &lab_bytes);
        uint64_t count = zld_batch_count(b);
        if (count != BATCH || img_bytes != count * SIDE * SIDE || lab_bytes != count * 8) {
            fprintf(stderr, "store_and_load: step %d: batch of %" PRIu64 " records, "
                    "%" PRIu64 " + %" PRIu64 " bytes\n", step, count, img_bytes, lab_bytes);
            return 1;
        }
        for (uint64_t k = 0; k < count; k++) {
            if (bl[k] != (int64_t)zld_batch_indices(b)[k] ||
                bi[k * SIDE * SIDE] != (uint8_t)(bl[k] % 251) ||
                bi[k * SIDE * SIDE + SIDE * SIDE - 1] != (uint8_t)(bl[k] % 251)) {
                fprintf(stderr, "store_and_load: step %d: record %" PRIu64 " does not match "
                        "its label %" PRId64 "\n", step, k, bl[k]);
                return 1;
            }
        }
        printf("step %" PRIu64 ": %" PRIu64 " images, first label %" PRId64 "\n",
               zld_batch_step(b), count, bl[0]);
        zld_batch_free(b);
    }
    zld_close(loader);
    if ((st = zrs_close(lab)) < 0 || (st = zrs_close(img)) < 0)
        return fail("zrs_close", st);
    printf("ok: zloader %s over zrstore %s\n", zloader_version_string(), zrstore_version_string());
    return 0;
}
