/*
 * zr ingest NPY STORE [--codec raw|zstd] - create a dense store from a .npy
 * file (format versions 1, 2 and 3): records along axis 0, item_shape the
 * remaining axes, the file's dtype. Only little-endian (or byte-sized)
 * C-order arrays are accepted; anything else is refused with a message
 * naming what was found. Records are appended in batches of about 64 MiB,
 * so memory stays bounded whatever the file size. The store is written
 * at STORE (which must not exist); on failure the partial store is left
 * for inspection and the exit status is 1.
 */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "zr_cli.h"

#define BATCH_BYTES ((uint64_t)64 << 20)
#define MAX_HEADER (1u << 20)

typedef struct npy_header {
    char descr[16];
    int fortran;
    uint64_t shape[ZRS_MAX_NDIM + 1];
    size_t ndim;
} npy_header;

/* The value text after 'key': in the header dict, or NULL. */
static const char *dict_value(const char *h, const char *key)
{
    char pat[32];
    snprintf(pat, sizeof pat, "'%s'", key);
    const char *p = strstr(h, pat);
    if (!p)
        return NULL;
    p += strlen(pat);
    while (*p == ' ' || *p == ':')
        p++;
    return p;
}

static int parse_header(const char *path, const char *h, npy_header *out)
{
    const char *d = dict_value(h, "descr");
    const char *f = dict_value(h, "fortran_order");
    const char *s = dict_value(h, "shape");
    if (!d || !f || !s || *d != '\'' || *s != '(') {
        fprintf(stderr, "zr ingest: %s: header lacks 'descr', 'fortran_order' or 'shape': %s\n",
                path, h);
        return -1;
    }
    const char *end = strchr(d + 1, '\'');
    if (!end || (size_t)(end - d - 1) >= sizeof out->descr) {
        fprintf(stderr, "zr ingest: %s: unsupported dtype description in %s\n", path, h);
        return -1;
    }
    memcpy(out->descr, d + 1, (size_t)(end - d - 1));
    out->descr[end - d - 1] = '\0';
    out->fortran = strncmp(f, "True", 4) == 0;
    out->ndim = 0;
    for (s++;;) {
        while (*s == ' ' || *s == ',')
            s++;
        if (*s == ')')
            break;
        if (!isdigit((unsigned char)*s) || out->ndim > ZRS_MAX_NDIM) {
            fprintf(stderr, "zr ingest: %s: bad or too long shape in %s\n", path, h);
            return -1;
        }
        errno = 0;
        char *next;
        unsigned long long v = strtoull(s, &next, 10);
        if (errno) {
            fprintf(stderr, "zr ingest: %s: shape dimension out of range in %s\n", path, h);
            return -1;
        }
        out->shape[out->ndim++] = v;
        s = next;
    }
    return 0;
}

static int read_npy_header(FILE *fp, const char *path, npy_header *out)
{
    unsigned char pre[10];
    if (fread(pre, 1, 8, fp) != 8 || memcmp(pre, "\x93NUMPY", 6) != 0) {
        fprintf(stderr, "zr ingest: %s: not a .npy file (no \\x93NUMPY magic)\n", path);
        return -1;
    }
    uint32_t hlen;
    if (pre[6] == 1) {
        if (fread(pre + 8, 1, 2, fp) != 2)
            goto short_file;
        hlen = (uint32_t)pre[8] | (uint32_t)pre[9] << 8;
    } else if (pre[6] == 2 || pre[6] == 3) {
        unsigned char b[4];
        if (fread(b, 1, 4, fp) != 4)
            goto short_file;
        hlen = (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
    } else {
        fprintf(stderr, "zr ingest: %s: .npy format version %u.%u is not supported (1, 2 or 3)\n",
                path, pre[6], pre[7]);
        return -1;
    }
    if (hlen > MAX_HEADER) {
        fprintf(stderr, "zr ingest: %s: header of %" PRIu32 " bytes is too large\n", path, hlen);
        return -1;
    }
    char *h = malloc((size_t)hlen + 1);
    if (!h) {
        fprintf(stderr, "zr ingest: %s: out of memory for the header\n", path);
        return -1;
    }
    if (fread(h, 1, hlen, fp) != hlen) {
        free(h);
        goto short_file;
    }
    h[hlen] = '\0';
    int rc = parse_header(path, h, out);
    free(h);
    return rc;
short_file:
    fprintf(stderr, "zr ingest: %s: file ends inside the .npy header\n", path);
    return -1;
}

static int parse_codec(const char *s, zre_codec *out)
{
    if (strcmp(s, "raw") == 0)
        *out = ZRE_CODEC_RAW;
    else if (strcmp(s, "zstd") == 0)
        *out = ZRE_CODEC_ZSTD;
    else
        return -1;
    return 0;
}

static int ingest(FILE *fp, const char *npy, const char *store, zre_codec codec)
{
    npy_header h;
    if (read_npy_header(fp, npy, &h) < 0)
        return 1;
    if (h.fortran) {
        fprintf(stderr, "zr ingest: %s: Fortran-order arrays are not supported; save a C-order "
                "copy (np.ascontiguousarray)\n", npy);
        return 1;
    }
    if (h.descr[0] == '>') {
        fprintf(stderr, "zr ingest: %s: big-endian dtype %s is not supported; convert with "
                ".astype('<%s')\n", npy, h.descr, h.descr + 1);
        return 1;
    }
    if (h.ndim == 0) {
        fprintf(stderr, "zr ingest: %s: a 0-d array holds no records (shape ())\n", npy);
        return 1;
    }
    zrs_dtype dt;
    if (zrs_dtype_parse(h.descr, &dt) != ZR_OK) {
        fprintf(stderr, "zr ingest: %s: dtype %s is not a store dtype: %s\n", npy, h.descr,
                zr_last_error());
        return 1;
    }
    zrs_store *s = NULL;
    if (zrs_create_dense(&s, store, dt, h.shape + 1, h.ndim - 1, codec) != ZR_OK) {
        fprintf(stderr, "zr ingest: %s: cannot create: %s\n", store, zr_last_error());
        return 1;
    }
    uint64_t n = h.shape[0], rec = zrs_record_size(s);
    uint64_t per = rec ? BATCH_BYTES / rec : n;
    if (per == 0)
        per = 1;
    unsigned char *buf = malloc((size_t)((per < n ? per : n) * rec) + 1);
    int status = buf ? 0 : 1;
    if (!buf)
        fprintf(stderr, "zr ingest: out of memory for a batch of %" PRIu64 " records\n", per);
    for (uint64_t done = 0; status == 0 && done < n;) {
        uint64_t k = n - done < per ? n - done : per;
        size_t got = fread(buf, 1, (size_t)(k * rec), fp);
        if (got != (size_t)(k * rec)) {
            fprintf(stderr, "zr ingest: %s: file ends at record %" PRIu64 " of %" PRIu64
                    " (header promises shape[0] = %" PRIu64 ")\n", npy, done + got / (rec ? rec : 1),
                    n, n);
            status = 1;
            break;
        }
        uint64_t first;
        if (zrs_append_dense(s, buf, k * rec, k, &first) != ZR_OK) {
            fprintf(stderr, "zr ingest: %s: append of records %" PRIu64 "..%" PRIu64 " failed: %s\n",
                    store, done, done + k, zr_last_error());
            status = 1;
            break;
        }
        done += k;
    }
    free(buf);
    if (zrs_close(s) != ZR_OK && status == 0) {
        fprintf(stderr, "zr ingest: %s: close failed: %s\n", store, zr_last_error());
        status = 1;
    }
    if (status == 0)
        printf("%s: %" PRIu64 " records of %s%s from %s\n", store, n, h.descr,
               codec == ZRE_CODEC_RAW ? " (raw)" : " (zstd)", npy);
    return status;
}

int zr_cmd_ingest(int argc, char **argv)
{
    const char *pos[2] = {NULL, NULL};
    size_t npos = 0;
    zre_codec codec = ZRE_CODEC_ZSTD;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--codec") == 0 && i + 1 < argc) {
            if (parse_codec(argv[++i], &codec) < 0) {
                fprintf(stderr, "zr ingest: unknown codec '%s' (raw or zstd)\n", argv[i]);
                return 2;
            }
        } else if (strncmp(argv[i], "--codec=", 8) == 0) {
            if (parse_codec(argv[i] + 8, &codec) < 0) {
                fprintf(stderr, "zr ingest: unknown codec '%s' (raw or zstd)\n", argv[i] + 8);
                return 2;
            }
        } else if (argv[i][0] == '-' && argv[i][1] != '\0') {
            fprintf(stderr, "zr ingest: unknown option '%s'\n", argv[i]);
            return 2;
        } else if (npos < 2) {
            pos[npos++] = argv[i];
        } else {
            npos = 3;
        }
    }
    if (npos != 2) {
        fprintf(stderr, "usage: zr ingest NPY STORE [--codec raw|zstd]\n");
        return 2;
    }
    FILE *fp = fopen(pos[0], "rb");
    if (!fp) {
        fprintf(stderr, "zr ingest: %s: cannot open: %s\n", pos[0], strerror(errno));
        return 1;
    }
    int rc = ingest(fp, pos[0], pos[1], codec);
    fclose(fp);
    return rc;
}
