/*
 * gather_c.c - the C reference for bench/bindings/run.sh: gather rounds of
 * indices from a dense store into one reused buffer and print the time.
 *
 *   gather_c STORE PLAN ROUNDS
 *
 * PLAN is a text file of ROUNDS lines, each a batch of space-separated
 * indices (all lines the same length). Prints one line:
 *   c <batch> <record_bytes> <seconds per gather> <MB/s>
 * Timing uses the C library's clock (clock_gettime(CLOCK_MONOTONIC)).
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <zloader.h>

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: gather_c STORE PLAN ROUNDS\n");
        return 2;
    }
    long rounds = atol(argv[3]);
    FILE *f = fopen(argv[2], "r");
    if (f == NULL || rounds < 1) {
        fprintf(stderr, "gather_c: cannot read %s\n", argv[2]);
        return 1;
    }
    size_t cap = 1 << 16, n = 0;
    int64_t *all = malloc(cap * sizeof *all);
    long long v;
    while (fscanf(f, "%lld", &v) == 1) {
        if (n == cap)
            all = realloc(all, (cap *= 2) * sizeof *all);
        all[n++] = v;
    }
    fclose(f);
    size_t batch = n / (size_t)rounds;
    zrs_store *s = NULL;
    if (zrs_open(&s, argv[1]) < 0) {
        fprintf(stderr, "gather_c: %s\n", zr_last_error());
        return 1;
    }
    uint64_t rs = zrs_record_size(s);
    size_t nbytes = batch * rs;
    void *dst = malloc(nbytes);
    /* one warm-up round (page cache, worker pool) */
    if (zrs_gather_dense(s, all, batch, dst, nbytes) < 0) {
        fprintf(stderr, "gather_c: %s\n", zr_last_error());
        return 1;
    }
    double t0 = now();
    for (long r = 0; r < rounds; r++)
        if (zrs_gather_dense(s, all + (size_t)r * batch, batch, dst, nbytes) < 0) {
            fprintf(stderr, "gather_c: %s\n", zr_last_error());
            return 1;
        }
    double per = (now() - t0) / (double)rounds;
    printf("c %zu %llu %.9f %.1f\n", batch, (unsigned long long)rs, per,
           (double)nbytes / per / 1e6);
    free(dst);
    free(all);
    zrs_close(s);
    return 0;
}
