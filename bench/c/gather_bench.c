/*
 * gather_bench STORE [BATCH [BATCHES [SEED]]] - random batch gather from a
 * dense store through the C API (libzrstore), the command the hyperfine
 * benchmark times: opens STORE read-only, gathers BATCHES (default 50)
 * random batches of BATCH (default 256) distinct-ish indices drawn from a
 * seeded generator, and prints records, MiB and MiB/s. Built by meson,
 * never installed.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <zrstore.h>

static uint64_t next_u64(uint64_t *s)
{
    /* splitmix64: a fixed, portable sequence for a given seed. */
    uint64_t z = (*s += 0x9e3779b97f4a7c15u);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
    return z ^ (z >> 31);
}

static double now_s(void)
{
    struct timespec ts;
    timespec_get(&ts, TIME_UTC);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
    if (argc < 2 || argc > 5) {
        fprintf(stderr, "usage: gather_bench STORE [BATCH [BATCHES [SEED]]]\n");
        return 2;
    }
    uint64_t batch = argc > 2 ? strtoull(argv[2], NULL, 10) : 256;
    uint64_t batches = argc > 3 ? strtoull(argv[3], NULL, 10) : 50;
    uint64_t seed = argc > 4 ? strtoull(argv[4], NULL, 10) : 1;
    zrs_store *s = NULL;
    if (zrs_open_ex(&s, argv[1], ZRE_OPEN_READONLY) != ZR_OK) {
        fprintf(stderr, "gather_bench: %s: %s\n", argv[1], zr_last_error());
        return 1;
    }
    if (zrs_get_kind(s) != ZRS_DENSE || zrs_length(s) == 0 || batch == 0) {
        fprintf(stderr, "gather_bench: %s: needs a non-empty dense store and BATCH >= 1\n", argv[1]);
        zrs_close(s);
        return 1;
    }
    uint64_t n = zrs_length(s), rec = zrs_record_size(s);
    int64_t *idx = malloc(batch * sizeof *idx);
    unsigned char *dst = malloc(batch * rec);
    if (!idx || !dst) {
        fprintf(stderr, "gather_bench: out of memory for a batch of %" PRIu64 " records\n", batch);
        free(idx);
        free(dst);
        zrs_close(s);
        return 1;
    }
    int status = 0;
    double t0 = now_s();
    for (uint64_t b = 0; b < batches && status == 0; b++) {
        for (uint64_t i = 0; i < batch; i++)
            idx[i] = (int64_t)(next_u64(&seed) % n);
        if (zrs_gather_dense(s, idx, batch, dst, batch * rec) != ZR_OK) {
            fprintf(stderr, "gather_bench: gather %" PRIu64 ": %s\n", b, zr_last_error());
            status = 1;
        }
    }
    double dt = now_s() - t0;
    double mib = (double)(batch * batches * rec) / (1 << 20);
    if (status == 0)
        printf("%" PRIu64 " records, %.1f MiB in %.3f s: %.0f MiB/s\n", batch * batches, mib, dt,
               dt > 0 ? mib / dt : 0.0);
    free(idx);
    free(dst);
    zrs_close(s);
    return status;
}
