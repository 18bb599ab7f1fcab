/*
 * gather_micro [DIR [ROUNDS]] - the native gather against a plain
 * memcpy-from-mmap loop over the same rows, side by side (a benchmark,
 * never a test; built by meson, never installed; POSIX only).
 *
 * For each case (record size, record count, batch) it writes one raw store
 * with libzrengine and one flat file of the same bytes, opens the store
 * read-only, maps the flat file, checks that both give the same bytes for
 * every planned batch (validation before timing), then times ROUNDS rounds
 * (default 20), alternating the peers inside each round on the same index
 * plan, and prints the median ns per row of each, their ratio
 * (peer / zrecord: > 1 means zrecord is faster) and the best round of each:
 *   memcpy   - one thread: memcpy(dst + i*rec, map + index[i]*rec, rec)
 *   memcpy-T - the same rows split over all CPUs (pthreads), the bound a
 *              sharded gather can reach
 * Cases: 32 B rows (int32[8]), 20,000 random of 1,000,000; 2 KiB token
 * blocks (int32[512]), 256 random of 32,768; 147 KiB images (224x224x3
 * uint8), 256 random of 512. ZR_MICRO_CASE=32|2048|150528 runs one case;
 * ZR_MICRO_N and ZR_MICRO_BATCH override its record count and batch.
 */
#define _POSIX_C_SOURCE 200809L
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <zrengine.h>

static uint64_t next_u64(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15u);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
    return z ^ (z >> 31);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

typedef struct peer_job {
    const unsigned char *map;
    const uint64_t *index;
    uint64_t lo, hi, rec;
    unsigned char *dst;
} peer_job;

static void peer_copy(const peer_job *j)
{
    for (uint64_t i = j->lo; i < j->hi; i++)
        memcpy(j->dst + i * j->rec, j->map + j->index[i] * j->rec, j->rec);
}

static void *peer_thread(void *arg)
{
    peer_copy(arg);
    return NULL;
}

/* The rows over `nt` threads (the caller runs the first share). */
static void peer_threads(const unsigned char *map, const uint64_t *index, uint64_t count,
                         uint64_t rec, unsigned char *dst, unsigned nt)
{
    peer_job jobs[64];
    pthread_t th[64];
    nt = nt < 1 ? 1 : nt > 64 ? 64 : nt;
    for (unsigned t = 0; t < nt; t++)
        jobs[t] = (peer_job){map, index, count * t / nt, count * (t + 1) / nt, rec, dst};
    for (unsigned t = 1; t < nt; t++)
        pthread_create(&th[t], NULL, peer_thread, &jobs[t]);
    peer_copy(&jobs[0]);
    for (unsigned t = 1; t < nt; t++)
        pthread_join(th[t], NULL);
}

static int run_case(const char *dir, uint64_t rec, uint64_t n, uint64_t batch, unsigned rounds,
                    unsigned ncpu)
{
    char spath[4096], fpath[4096];
    snprintf(spath, sizeof spath, "%s/micro-%" PRIu64 ".zr", dir, rec);
    snprintf(fpath, sizeof fpath, "%s/micro-%" PRIu64 ".flat", dir, rec);
    unsigned char *src = malloc(n * rec);
    uint64_t *index = malloc(batch * rounds * sizeof *index);
    unsigned char *d1 = malloc(batch * rec), *d2 = malloc(batch * rec);
    if (!src || !index || !d1 || !d2) {
        fprintf(stderr, "gather_micro: out of memory\n");
        return 1;
    }
    uint64_t seed = rec;
    for (uint64_t i = 0; i < n * rec; i += 8) {
        uint64_t v = next_u64(&seed);
        memcpy(src + i, &v, n * rec - i < 8 ? n * rec - i : 8);
    }
    /* The store (rewritten every run) and the flat file. */
    char cmd[8300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s' '%s'", spath, fpath);
    if (system(cmd) != 0)
        return 1;
    zre_engine *e = NULL;
    if (zre_create(&e, spath, ZRE_CODEC_RAW) != ZR_OK ||
        zre_append(e, src, rec, NULL, n, NULL) != ZR_OK || zre_close(e) != ZR_OK ||
        zre_open_ex(&e, spath, ZRE_OPEN_READONLY) != ZR_OK) {
        fprintf(stderr, "gather_micro: %s: %s\n", spath, zr_last_error());
        return 1;
    }
    int fd = open(fpath, O_RDWR | O_CREAT | O_TRUNC, 0644);
    if (fd < 0 || write(fd, src, n * rec) != (ssize_t)(n * rec)) {
        fprintf(stderr, "gather_micro: cannot write %s\n", fpath);
        return 1;
    }
    const unsigned char *map = mmap(NULL, n * rec, PROT_READ, MAP_SHARED, fd, 0);
    if (map == MAP_FAILED) {
        fprintf(stderr, "gather_micro: cannot map %s\n", fpath);
        return 1;
    }
    for (uint64_t i = 0; i < batch * rounds; i++)
        index[i] = next_u64(&seed) % n;
    /* Validation before timing: every planned batch, both peers, exact. */
    for (unsigned r = 0; r < rounds; r++) {
        const uint64_t *ix = index + (uint64_t)r * batch;
        if (zre_gather(e, ix, batch, d1, batch * rec, rec, NULL) != ZR_OK) {
            fprintf(stderr, "gather_micro: gather: %s\n", zr_last_error());
            return 1;
        }
        peer_threads(map, ix, batch, rec, d2, ncpu);
        for (uint64_t i = 0; i < batch; i++)
            if (memcmp(d1 + i * rec, src + ix[i] * rec, rec) != 0 ||
                memcmp(d2 + i * rec, src + ix[i] * rec, rec) != 0) {
                fprintf(stderr, "gather_micro: round %u row %" PRIu64 " differs\n", r, i);
                return 1;
            }
    }
    double *tz = malloc(rounds * sizeof *tz), *tm = malloc(rounds * sizeof *tm),
           *tt = malloc(rounds * sizeof *tt);
    for (unsigned r = 0; r < rounds; r++) {
        const uint64_t *ix = index + (uint64_t)r * batch;
        double t0 = now_s();
        zre_gather(e, ix, batch, d1, batch * rec, rec, NULL);
        double t1 = now_s();
        peer_job one = {map, ix, 0, batch, rec, d2};
        peer_copy(&one);
        double t2 = now_s();
        peer_threads(map, ix, batch, rec, d2, ncpu);
        double t3 = now_s();
        tz[r] = t1 - t0;
        tm[r] = t2 - t1;
        tt[r] = t3 - t2;
    }
    qsort(tz, rounds, sizeof *tz, cmp_d);
    qsort(tm, rounds, sizeof *tm, cmp_d);
    qsort(tt, rounds, sizeof *tt, cmp_d);
    double z = tz[rounds / 2] * 1e9 / batch, m = tm[rounds / 2] * 1e9 / batch,
           t = tt[rounds / 2] * 1e9 / batch;
    printf("%8" PRIu64 " B x %6" PRIu64 " of %8" PRIu64 ": zrecord %9.1f ns/row  memcpy %9.1f  "
           "memcpy-%u %9.1f  | memcpy/zr %.2fx  memcpy-%u/zr %.2fx  (%.0f MB/s; best %.1f %.1f %.1f)\n",
           rec, batch, n, z, m, ncpu, t, m / z, ncpu, t / z, (double)rec * 1e3 / z,
           tz[0] * 1e9 / batch, tm[0] * 1e9 / batch, tt[0] * 1e9 / batch);
    munmap((void *)map, n * rec);
    close(fd);
    zre_close(e);
    snprintf(cmd, sizeof cmd, "rm -rf '%s' '%s'", spath, fpath);
    if (system(cmd) != 0)
        return 1;
    free(tz);
    free(tm);
    free(tt);
    free(src);
    free(index);
    free(d1);
    free(d2);
    return 0;
}

int main(int argc, char **argv)
{
    const char *dir = argc > 1 ? argv[1] : "/tmp";
    unsigned rounds = argc > 2 ? (unsigned)strtoul(argv[2], NULL, 10) : 20;
    if (rounds == 0)
        rounds = 1;
    long nc = sysconf(_SC_NPROCESSORS_ONLN);
    unsigned ncpu = nc > 0 ? (unsigned)nc : 1;
    const char *only = getenv("ZR_MICRO_CASE");
    static const uint64_t cases[][3] = {
        {32, 1000000, 20000}, {2048, 32768, 256}, {150528, 512, 256}};
    const char *nrec = getenv("ZR_MICRO_N"), *nbatch = getenv("ZR_MICRO_BATCH");
    int rc = 0;
    for (size_t c = 0; c < sizeof cases / sizeof cases[0] && rc == 0; c++)
        if (!only || strtoull(only, NULL, 10) == cases[c][0])
            rc = run_case(dir, cases[c][0], nrec ? strtoull(nrec, NULL, 10) : cases[c][1],
                          nbatch ? strtoull(nbatch, NULL, 10) : cases[c][2], rounds, ncpu);
    return rc;
}
