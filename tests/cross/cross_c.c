/*
 * cross_c.c - the C side of the cross-language determinism test: for every
 * case of cases.txt, the loader's steps as `<step> <indices> <sha256>`
 * lines into OUT/<case>.c (see run.sh and cases.txt for the keys).
 * Usage: zr_cross CASES STORES OUT
 *
 * The batch hash is SHA-256 over the bytes of every key of the batch in
 * sorted key order: the streams by name, and in pack mode the layout
 * arrays segment_ids, positions, seq_lens and cu_seqlens with them.
 * Ragged streams appear only in pack mode.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zloader.h>

/* ------------------------------------------------------------ SHA-256 */

typedef struct sha256 {
    uint32_t h[8];
    uint64_t n;
    unsigned char buf[64];
    size_t len;
} sha256;

static const uint32_t K256[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4,
    0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe,
    0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f,
    0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7,
    0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc,
    0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b,
    0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116,
    0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7,
    0xc67178f2,
};

#define ROR(x, n) (((x) >> (n)) | ((x) << (32 - (n))))

static void sha256_block(sha256 *s, const unsigned char *p)
{
    uint32_t w[64], a[8];
    for (int i = 0; i < 16; i++)
        w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 |
               (uint32_t)p[4 * i + 2] << 8 | p[4 * i + 3];
    for (int i = 16; i < 64; i++) {
        uint32_t s0 = ROR(w[i - 15], 7) ^ ROR(w[i - 15], 18) ^ (w[i - 15] >> 3);
        uint32_t s1 = ROR(w[i - 2], 17) ^ ROR(w[i - 2], 19) ^ (w[i - 2] >> 10);
        w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    memcpy(a, s->h, sizeof a);
    for (int i = 0; i < 64; i++) {
        uint32_t t1 = a[7] + (ROR(a[4], 6) ^ ROR(a[4], 11) ^ ROR(a[4], 25)) +
                      ((a[4] & a[5]) ^ (~a[4] & a[6])) + K256[i] + w[i];
        uint32_t t2 = (ROR(a[0], 2) ^ ROR(a[0], 13) ^ ROR(a[0], 22)) +
                      ((a[0] & a[1]) ^ (a[0] & a[2]) ^ (a[1] & a[2]));
        memmove(a + 1, a, 7 * sizeof *a);
        a[4] += t1;
        a[0] = t1 + t2;
    }
    for (int i = 0; i < 8; i++)
        s->h[i] += a[i];
}

static void sha256_init(sha256 *s)
{
    static const uint32_t h0[8] = { 0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                    0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19 };
    memcpy(s->h, h0, sizeof h0);
    s->n = 0;
    s->len = 0;
}

static void sha256_update(sha256 *s, const void *data, size_t n)
{
    const unsigned char *p = (const unsigned char *)data;
    s->n += n;
    while (n > 0) {
        size_t k = 64 - s->len < n ? 64 - s->len : n;
        memcpy(s->buf + s->len, p, k);
        s->len += k;
        p += k;
        n -= k;
        if (s->len == 64) {
            sha256_block(s, s->buf);
            s->len = 0;
        }
    }
}

static void sha256_hex(sha256 *s, char out[65])
{
    uint64_t bits = s->n * 8;
    unsigned char pad = 0x80, zero = 0, len[8];
    sha256_update(s, &pad, 1);
    while (s->len != 56)
        sha256_update(s, &zero, 1);
    for (int i = 0; i < 8; i++)
        len[i] = (unsigned char)(bits >> (56 - 8 * i));
    sha256_update(s, len, 8);
    for (int i = 0; i < 8; i++)
        snprintf(out + 8 * i, 9, "%08x", s->h[i]);
}

/* --------------------------------------------------------------- cases */

#define MAX_KEYS 32
#define MAX_STREAMS 8

typedef struct kase {
    char name[64];
    char *key[MAX_KEYS], *val[MAX_KEYS];
    int nkeys;
} kase;

static const char *get(const kase *c, const char *key)
{
    for (int i = 0; i < c->nkeys; i++)
        if (strcmp(c->key[i], key) == 0)
            return c->val[i];
    return NULL;
}

static uint64_t num(const kase *c, const char *key, uint64_t dflt)
{
    const char *v = get(c, key);
    return v != NULL ? strtoull(v, NULL, 10) : dflt;
}

static void die(const char *what, const char *detail)
{
    fprintf(stderr, "zr_cross: %s: %s\n", what, detail);
    exit(1);
}

static void check(int rc, const char *what)
{
    if (rc < 0)
        die(what, zr_last_error());
}

/* Split s at `sep` in place into at most max parts. */
static int split(char *s, char sep, char **parts, int max)
{
    int n = 0;
    while (s != NULL && n < max) {
        parts[n++] = s;
        s = strchr(s, sep);
        if (s != NULL)
            *s++ = '\0';
    }
    return n;
}

typedef struct part {
    const char *key;
    const void *data;
    uint64_t nbytes;
} part;

static int part_cmp(const void *a, const void *b)
{
    return strcmp(((const part *)a)->key, ((const part *)b)->key);
}

static void run(const kase *c, const char *stores, FILE *out)
{
    char buf[1024];
    snprintf(buf, sizeof buf, "%s", get(c, "streams"));
    char *names[MAX_STREAMS];
    int ns = split(buf, ',', names, MAX_STREAMS);
    zld_options o = ZLD_OPTIONS_INIT;
    o.batch_size = num(c, "batch_size", 1);
    o.seed = num(c, "seed", 0);
    o.rank = (uint32_t)num(c, "rank", 0);
    o.world_size = (uint32_t)num(c, "world_size", 1);
    o.num_workers = (unsigned)num(c, "num_workers", 1);
    o.pass = (int)num(c, "pass", 0);
    o.shuffle = (int)num(c, "shuffle", 0);
    o.drop_last = (int)num(c, "drop_last", 0);
    o.epoch = num(c, "epoch", 0);
    o.even_batches = (int)num(c, "even_batches", 0);
    const char *mode = get(c, "mode") ? get(c, "mode") : "cyclic";
    uint32_t *lengths = NULL;
    if (strcmp(mode, "bucket") == 0) {
        snprintf(buf + 512, 512, "%s/lengths.u32", stores);
        FILE *f = fopen(buf + 512, "rb");
        if (f == NULL)
            die("open", buf + 512);
        lengths = (uint32_t *)malloc(4096 * sizeof *lengths);
        size_t n = fread(lengths, sizeof *lengths, 4096, f); /* little-endian host */
        fclose(f);
        o.mode = ZSM_CYCLIC;
        o.bucket_lengths = lengths;
        o.bucket_count = n;
        o.bucket_window = num(c, "window", 0);
    } else if (strcmp(mode, "pack") == 0) {
        o.mode = ZSM_CYCLIC;
        o.pack = 1;
        o.pack_length = num(c, "pack_length", 0);
        o.pack_window = num(c, "pack_window", 0);
        if (get(c, "pack_policy"))
            check(zsm_pack_policy_parse(get(c, "pack_policy"), &o.pack_policy) < 0 ? -1 : 0,
                  "pack_policy");
        if (get(c, "pack_overlong"))
            check(zsm_pack_overlong_parse(get(c, "pack_overlong"), &o.pack_overlong) < 0 ? -1 : 0,
                  "pack_overlong");
    } else if (zsm_mode_parse(mode, &o.mode) < 0) {
        die("mode", mode);
    }

    zld_stream streams[MAX_STREAMS];
    zrs_store *stores_open[MAX_STREAMS] = { 0 };
    zrs_concat *concats[2 * MAX_STREAMS] = { 0 };
    int nconcat = 0;
    zld_mixture *mix = NULL;
    char path[1024];
    if (get(c, "mixture")) {
        char mbuf[256];
        snprintf(mbuf, sizeof mbuf, "%s", get(c, "mixture"));
        char *srcs[2];
        int nsrc = split(mbuf, ',', srcs, 2);
        double weights[2];
        zsm_mode modes[2];
        for (int k = 0; k < nsrc; k++) {
            char *w = strchr(srcs[k], ':');
            *w++ = '\0';
            weights[k] = strtod(w, NULL);
            modes[k] = o.mode;
            for (int s = 0; s < ns; s++) {
                snprintf(path, sizeof path, "%s/%s.%s", stores, srcs[k], names[s]);
                const char *p = path;
                check(zrs_concat_open(&concats[nconcat++], &p, 1, ZRE_OPEN_READONLY), path);
            }
        }
        check(zld_mixture_create(&mix, concats, (size_t)nsrc, (size_t)ns, weights, modes, o.seed,
                                 o.batch_size, o.world_size), "mixture");
        for (int s = 0; s < ns; s++)
            check(zld_mixture_stream(mix, (size_t)s, &streams[s]), "mixture stream");
        o.mode = ZSM_SEQUENTIAL; /* the mixture draws; the loader walks its index space */
    } else {
        for (int s = 0; s < ns; s++) {
            if (num(c, "concat", 0)) {
                char sp[3][1024];
                const char *ps[3];
                for (int k = 0; k < 3; k++) {
                    snprintf(sp[k], sizeof sp[k], "%s/%s.shard%d", stores, names[s], k);
                    ps[k] = sp[k];
                }
                check(zrs_concat_open(&concats[nconcat], ps, 3, ZRE_OPEN_READONLY), names[s]);
                check(zld_stream_from_concat(&streams[s], concats[nconcat++]), names[s]);
            } else {
                snprintf(path, sizeof path, "%s/%s", stores, names[s]);
                check(zrs_open_ex(&stores_open[s], path, ZRE_OPEN_READONLY), path);
                check(zld_stream_from_store(&streams[s], stores_open[s]), path);
            }
            streams[s].name = names[s];
        }
    }
    zld_loader *l = NULL;
    check(zld_create_streams(&l, streams, (size_t)ns, &o), c->name);
    free(lengths);
    uint64_t steps = o.pass ? zld_steps(l) : num(c, "steps", 1);
    for (uint64_t k = 0; k < steps; k++) {
        zld_batch *b = NULL;
        int rc = zld_next(l, &b);
        check(rc, "next");
        if (rc == ZLD_END)
            die(c->name, "the pass ended before zld_steps steps");
        zld_pack_info pi;
        int packed = zld_batch_pack_info(b, &pi) == ZR_OK;
        uint64_t nidx = packed ? pi.segments : zld_batch_count(b);
        const uint64_t *idx = zld_batch_indices(b);
        fprintf(out, "%llu ", (unsigned long long)zld_batch_step(b));
        for (uint64_t i = 0; i < nidx; i++)
            fprintf(out, i ? ",%llu" : "%llu", (unsigned long long)idx[i]);
        static const char *const pack_keys[ZLD_PACK_PARTS] = { "segment_ids", "positions",
                                                               "seq_lens", "cu_seqlens" };
        part parts[MAX_STREAMS + ZLD_PACK_PARTS];
        int np = 0;
        for (int s = 0; s < ns + (packed ? ZLD_PACK_PARTS : 0); s++) {
            parts[np].key = s < ns ? names[s] : pack_keys[s - ns];
            parts[np].data = zld_batch_data(b, (size_t)s, &parts[np].nbytes);
            np++;
        }
        qsort(parts, (size_t)np, sizeof *parts, part_cmp);
        sha256 h;
        sha256_init(&h);
        for (int i = 0; i < np; i++)
            sha256_update(&h, parts[i].data, (size_t)parts[i].nbytes);
        char hex[65];
        sha256_hex(&h, hex);
        fprintf(out, " %s\n", hex);
        zld_batch_free(b);
    }
    zld_close(l);
    zld_mixture_free(mix);
    for (int i = 0; i < nconcat; i++)
        zrs_concat_close(concats[i]);
    for (int s = 0; s < ns; s++)
        if (stores_open[s] != NULL)
            zrs_close(stores_open[s]);
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: zr_cross CASES STORES OUT\n");
        return 2;
    }
    FILE *f = fopen(argv[1], "r");
    if (f == NULL)
        die("open", argv[1]);
    char line[2048];
    while (fgets(line, sizeof line, f) != NULL) {
        line[strcspn(line, "\r\n")] = '\0';
        if (line[0] == '\0' || line[0] == '#')
            continue;
        kase c;
        char *tok[MAX_KEYS + 1];
        int n = split(line, ' ', tok, MAX_KEYS + 1);
        snprintf(c.name, sizeof c.name, "%s", tok[0]);
        c.nkeys = 0;
        for (int i = 1; i < n; i++) {
            if (tok[i][0] == '\0')
                continue;
            char *eq = strchr(tok[i], '=');
            if (eq == NULL)
                die("case key without '='", tok[i]);
            *eq = '\0';
            c.key[c.nkeys] = tok[i];
            c.val[c.nkeys++] = eq + 1;
        }
        char outpath[1024];
        snprintf(outpath, sizeof outpath, "%s/%s.c", argv[3], c.name);
        FILE *out = fopen(outpath, "w");
        if (out == NULL)
            die("create", outpath);
        run(&c, argv[2], out);
        fclose(out);
    }
    fclose(f);
    return 0;
}
