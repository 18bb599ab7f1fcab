/*
 * io.c - the file formats zr reads and writes besides stores (zr_io.h):
 * byte sources over zlib (gzip or plain files, zip members), .npy and IDX
 * headers, zip directories (zip64 too) and stored-zip / .npy writers.
 */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include <zlib.h>

#include "zr_io.h"
#include "zr_platform.h"

#define IN_CHUNK (256u << 10)
#define MAX_NPY_HEADER (1u << 20)

static int fail(char *err, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
static int fail(char *err, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, ZR_IO_ERR, fmt, ap);
    va_end(ap);
    return -1;
}

static uint16_t le16(const unsigned char *p) { return (uint16_t)(p[0] | p[1] << 8); }
static uint32_t le32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static uint64_t le64(const unsigned char *p) { return le32(p) | (uint64_t)le32(p + 4) << 32; }
static uint32_t be32(const unsigned char *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | (uint32_t)p[3];
}
static void put16(unsigned char *p, uint16_t v) { p[0] = (unsigned char)v; p[1] = (unsigned char)(v >> 8); }
static void put32(unsigned char *p, uint32_t v)
{
    put16(p, (uint16_t)v);
    put16(p + 2, (uint16_t)(v >> 16));
}
static void put64(unsigned char *p, uint64_t v)
{
    put32(p, (uint32_t)v);
    put32(p + 4, (uint32_t)(v >> 32));
}

/* ------------------------------------------------------------- sources */

struct zr_src {
    char *name;
    int failed;
    gzFile gz;            /* a file (gzip or plain) */
    zrp_file zf;          /* a zip member */
    uint64_t pos, left;   /* next compressed byte, compressed bytes left */
    uint64_t out_left;    /* uncompressed bytes left (zip member) */
    int deflated;
    z_stream zs;
    unsigned char *in;
};

const char *zr_src_name(const zr_src *s) { return s->name; }
int zr_src_failed(const zr_src *s) { return s->failed; }

static zr_src *src_new(const char *name)
{
    zr_src *s = calloc(1, sizeof *s);
    if (s && !(s->name = strdup(name))) {
        free(s);
        s = NULL;
    }
    if (s)
        s->zf = ZRP_FILE_INVALID;
    return s;
}

int zr_src_open_file(zr_src **out, const char *path, char *err)
{
    *out = NULL;
    if (zrp_is_dir(path))
        return fail(err, "%s: is a directory", path);
    gzFile gz = gzopen(path, "rb");
    if (!gz)
        return fail(err, "%s: cannot open: %s", path, errno ? strerror(errno) : "out of memory");
    gzbuffer(gz, IN_CHUNK);
    zr_src *s = src_new(path);
    if (!s) {
        gzclose(gz);
        return fail(err, "%s: out of memory", path);
    }
    s->gz = gz;
    *out = s;
    return 0;
}

int zr_src_open_zip_member(zr_src **out, const char *path, const char *name, char *err)
{
    *out = NULL;
    zr_zip_entry *ents;
    size_t n;
    if (zr_zip_list(path, &ents, &n, err) < 0)
        return -1;
    const zr_zip_entry *e = NULL;
    for (size_t i = 0; i < n && !e; i++)
        if (!strcmp(ents[i].name, name))
            e = &ents[i];
    if (!e) {
        free(ents);
        return fail(err, "%s: no member '%s'", path, name);
    }
    if (e->method != 0 && e->method != 8) {
        free(ents);
        return fail(err, "%s: member '%s' uses zip method %u (only stored and deflated are read)",
                    path, name, e->method);
    }
    char label[1024];
    snprintf(label, sizeof label, "%s[%s]", path, name);
    zr_src *s = src_new(label);
    unsigned char lh[30];
    int rc = s ? zrp_open(&s->zf, path, ZRP_READ) : -ENOMEM;
    if (rc == 0)
        rc = zrp_pread_all(s->zf, lh, 30, e->local_offset);
    if (rc < 0 || le32(lh) != 0x04034b50u) {
        free(ents);
        if (s) {
            zrp_close(&s->zf);
            free(s->name);
            free(s);
        }
        return fail(err, "%s: member '%s': %s", path, name,
                    rc < 0 ? strerror(-rc) : "no local header where the directory says");
    }
    const uint64_t start = e->local_offset + 30 + le16(lh + 26) + le16(lh + 28);
    const uint64_t csize = e->csize, usize = e->usize;
    const uint32_t want = e->crc;
    s->deflated = e->method == 8;
    free(ents);
    if (s->deflated) {
        s->in = malloc(IN_CHUNK);
        if (!s->in || inflateInit2(&s->zs, -MAX_WBITS) != Z_OK) {
            zr_src_close(s);
            return fail(err, "%s: out of memory", label);
        }
    }
    /* First pass: the CRC-32 of the whole member; then rewind. */
    unsigned char *buf = malloc(IN_CHUNK);
    uLong crc = crc32(0L, Z_NULL, 0);
    uint64_t total = 0;
    s->pos = start;
    s->left = csize;
    s->out_left = usize;
    for (size_t got = 1; buf && got > 0;) {
        got = zr_src_read(s, buf, IN_CHUNK, err);
        crc = crc32(crc, buf, (uInt)got);
        total += got;
    }
    if (!buf || s->failed || total != usize || (uint32_t)crc != want) {
        const int oom = !buf, read_failed = s->failed, bad_size = total != usize;
        free(buf);
        zr_src_close(s);
        if (oom)
            return fail(err, "%s: out of memory", label);
        if (read_failed)
            return -1; /* err says what the read found */
        return fail(err, "%s: the archive member is damaged (%s)", label,
                    bad_size ? "shorter than its directory entry says" : "CRC-32 mismatch");
    }
    free(buf);
    s->pos = start;
    s->left = csize;
    s->out_left = usize;
    if (s->deflated) {
        inflateReset(&s->zs);
        s->zs.avail_in = 0;
    }
    *out = s;
    return 0;
}

size_t zr_src_read(zr_src *s, void *buf, size_t n, char *err)
{
    if (s->failed || n == 0)
        return 0;
    if (s->gz) {
        size_t got = 0;
        while (got < n) {
            unsigned want = n - got > (1u << 30) ? 1u << 30 : (unsigned)(n - got);
            int r = gzread(s->gz, (unsigned char *)buf + got, want);
            if (r < 0) {
                int zerr;
                const char *m = gzerror(s->gz, &zerr);
                s->failed = 1;
                fail(err, "%s: read failed: %s", s->name, m);
                return got;
            }
            if (r == 0)
                break;
            got += (size_t)r;
        }
        return got;
    }
    if (n > s->out_left)
        n = (size_t)s->out_left;
    if (!s->deflated) {
        int rc = zrp_pread_all(s->zf, buf, n, s->pos);
        if (rc < 0) {
            s->failed = 1;
            fail(err, "%s: read failed: %s", s->name, strerror(-rc));
            return 0;
        }
        s->pos += n;
        s->left -= n;
        s->out_left -= n;
        return n;
    }
    s->zs.next_out = buf;
    size_t done = 0;
    while (done < n) {
        size_t want = n - done > (1u << 30) ? 1u << 30 : n - done;
        s->zs.next_out = (unsigned char *)buf + done;
        s->zs.avail_out = (uInt)want;
        if (s->zs.avail_in == 0 && s->left > 0) {
            size_t k = s->left < IN_CHUNK ? (size_t)s->left : IN_CHUNK;
            int rc = zrp_pread_all(s->zf, s->in, k, s->pos);
            if (rc < 0) {
                s->failed = 1;
                fail(err, "%s: read failed: %s", s->name, strerror(-rc));
                return done;
            }
            s->pos += k;
            s->left -= k;
            s->zs.next_in = s->in;
            s->zs.avail_in = (uInt)k;
        }
        int zr = inflate(&s->zs, Z_NO_FLUSH);
        size_t made = want - s->zs.avail_out;
        done += made;
        s->out_left -= made;
        if (zr == Z_STREAM_END)
            break;
        if (zr != Z_OK && !(zr == Z_BUF_ERROR && made > 0)) {
            s->failed = 1;
            fail(err, "%s: damaged deflate data: %s", s->name, s->zs.msg ? s->zs.msg : "error");
            return done;
        }
    }
    return done;
}

int zr_src_read_exact(zr_src *s, void *buf, size_t n, const char *what, char *err)
{
    size_t got = zr_src_read(s, buf, n, err);
    if (got == n)
        return 0;
    if (s->failed)
        return -1;
    return fail(err, "%s: file ends inside %s (%zu of %zu bytes)", s->name, what, got, n);
}

void zr_src_close(zr_src *s)
{
    if (!s)
        return;
    if (s->gz)
        gzclose(s->gz);
    if (s->deflated)
        inflateEnd(&s->zs);
    zrp_close(&s->zf);
    free(s->in);
    free(s->name);
    free(s);
}

int zr_sniff(const char *path, unsigned char *buf, size_t n, size_t *got, char *err)
{
    zr_src *s;
    if (zr_src_open_file(&s, path, err) < 0)
        return -1;
    *got = zr_src_read(s, buf, n, err);
    int bad = zr_src_failed(s);
    zr_src_close(s);
    return bad ? -1 : 0;
}

/* -------------------------------------------------------------- arrays */

uint64_t zr_array_count(const zr_array *a, size_t from)
{
    uint64_t c = 1;
    for (size_t i = from; i < a->ndim; i++)
        c *= a->shape[i];
    return c;
}

void zr_byteswap(void *data, uint64_t count, zrs_dtype dtype)
{
    unsigned char *p = data;
    size_t itemsize = zrs_dtype_itemsize(dtype);
    /* A complex number is two floats, each swapped on its own. */
    size_t w = dtype == ZRS_COMPLEX64 || dtype == ZRS_COMPLEX128 ? itemsize / 2 : itemsize;
    if (w < 2)
        return;
    uint64_t units = count * (itemsize / w);
    for (uint64_t i = 0; i < units; i++, p += w)
        for (size_t a = 0, b = w - 1; a < b; a++, b--) {
            unsigned char t = p[a];
            p[a] = p[b];
            p[b] = t;
        }
}

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

static int parse_npy_dict(const char *name, const char *h, zr_array *a, char *err)
{
    const char *d = dict_value(h, "descr");
    const char *f = dict_value(h, "fortran_order");
    const char *s = dict_value(h, "shape");
    if (!d || !f || !s || *d != '\'' || *s != '(')
        return fail(err, "%s: .npy header lacks 'descr', 'fortran_order' or 'shape': %s", name, h);
    const char *end = strchr(d + 1, '\'');
    if (!end || (size_t)(end - d - 1) >= sizeof a->descr)
        return fail(err, "%s: dtype %s is not a store dtype (structured or too long)", name, h);
    memcpy(a->descr, d + 1, (size_t)(end - d - 1));
    a->descr[end - d - 1] = '\0';
    a->fortran = strncmp(f, "True", 4) == 0;
    a->ndim = 0;
    for (s++;;) {
        while (*s == ' ' || *s == ',')
            s++;
        if (*s == ')')
            break;
        if (!isdigit((unsigned char)*s) || a->ndim > ZRS_MAX_NDIM)
            return fail(err, "%s: bad or too long shape in %s", name, h);
        errno = 0;
        char *next;
        unsigned long long v = strtoull(s, &next, 10);
        if (errno)
            return fail(err, "%s: shape dimension out of range in %s", name, h);
        a->shape[a->ndim++] = v;
        s = next;
    }
    /* The store dtype is little-endian; '>' (and '<' on a big-endian host,
     * which this tool does not target) is swapped on the way in. */
    char le[16];
    snprintf(le, sizeof le, "%s", a->descr);
    a->swap = 0;
    if (le[0] == '>') {
        a->swap = 1;
        le[0] = '<';
    } else if (le[0] == '=') {
        le[0] = '<';
    }
    if (le[0] == '<' && (!strcmp(le + 1, "u1") || !strcmp(le + 1, "i1") || !strcmp(le + 1, "b1"))) {
        le[0] = '|';
        a->swap = 0;
    }
    if (zrs_dtype_parse(le, &a->dtype) != ZR_OK)
        return fail(err, "%s: dtype '%s' is not a store dtype (bool, int8..64, uint8..64, "
                    "float16/32/64, complex64/128)", name, a->descr);
    return 0;
}

int zr_npy_read_header(zr_src *s, zr_array *a, char *err)
{
    unsigned char pre[10];
    memset(a, 0, sizeof *a);
    size_t got = zr_src_read(s, pre, 8, err);
    if (zr_src_failed(s))
        return -1;
    if (got != 8 || memcmp(pre, "\x93NUMPY", 6) != 0)
        return fail(err, "%s: not a .npy file (no \\x93NUMPY magic)", zr_src_name(s));
    uint32_t hlen;
    if (pre[6] == 1) {
        if (zr_src_read_exact(s, pre + 8, 2, "the .npy header", err) < 0)
            return -1;
        hlen = le16(pre + 8);
    } else if (pre[6] == 2 || pre[6] == 3) {
        unsigned char b[4];
        if (zr_src_read_exact(s, b, 4, "the .npy header", err) < 0)
            return -1;
        hlen = le32(b);
    } else {
        return fail(err, "%s: .npy format version %u.%u is not supported (1, 2 or 3)",
                    zr_src_name(s), pre[6], pre[7]);
    }
    if (hlen > MAX_NPY_HEADER)
        return fail(err, "%s: .npy header of %" PRIu32 " bytes is too large", zr_src_name(s), hlen);
    char *h = malloc((size_t)hlen + 1);
    if (!h)
        return fail(err, "%s: out of memory for the header", zr_src_name(s));
    if (zr_src_read_exact(s, h, hlen, "the .npy header", err) < 0) {
        free(h);
        return -1;
    }
    h[hlen] = '\0';
    int rc = parse_npy_dict(zr_src_name(s), h, a, err);
    free(h);
    return rc;
}

int zr_idx_read_header(zr_src *s, zr_array *a, char *err)
{
    unsigned char m[4];
    memset(a, 0, sizeof *a);
    if (zr_src_read_exact(s, m, 4, "the IDX magic", err) < 0)
        return -1;
    static const struct {
        unsigned char code;
        zrs_dtype dtype;
        const char *name;
    } types[] = {{0x08, ZRS_UINT8, "u8"},    {0x09, ZRS_INT8, "i8"},     {0x0B, ZRS_INT16, "i16"},
                 {0x0C, ZRS_INT32, "i32"},   {0x0D, ZRS_FLOAT32, "f32"}, {0x0E, ZRS_FLOAT64, "f64"}};
    size_t t = sizeof types / sizeof types[0];
    for (size_t i = 0; m[0] == 0 && m[1] == 0 && i < sizeof types / sizeof types[0]; i++)
        if (types[i].code == m[2])
            t = i;
    if (t == sizeof types / sizeof types[0] || m[3] == 0 || m[3] > ZRS_MAX_NDIM + 1)
        return fail(err, "%s: not an IDX file (magic %02x %02x %02x %02x)", zr_src_name(s), m[0],
                    m[1], m[2], m[3]);
    a->dtype = types[t].dtype;
    a->ndim = m[3];
    a->swap = zrs_dtype_itemsize(a->dtype) > 1; /* IDX is big-endian */
    snprintf(a->descr, sizeof a->descr, "idx %s", types[t].name);
    for (size_t i = 0; i < a->ndim; i++) {
        unsigned char d[4];
        if (zr_src_read_exact(s, d, 4, "the IDX dimensions", err) < 0)
            return -1;
        a->shape[i] = be32(d);
    }
    return 0;
}

int zr_load_i64(zr_src *s, size_t ndim, int64_t **out, uint64_t *rows, uint64_t *cols, char *err)
{
    const char *path = zr_src_name(s);
    *out = NULL;
    *rows = *cols = 0;
    zr_array a;
    int rc = zr_npy_read_header(s, &a, err);
    if (rc == 0 && a.ndim != ndim)
        rc = fail(err, "%s: expected a %zu-d array, got %zu dimensions", path, ndim, a.ndim);
    int is_int = a.dtype == ZRS_BOOL || a.dtype == ZRS_INT8 || a.dtype == ZRS_INT16 ||
                 a.dtype == ZRS_INT32 || a.dtype == ZRS_INT64 || a.dtype == ZRS_UINT8 ||
                 a.dtype == ZRS_UINT16 || a.dtype == ZRS_UINT32 || a.dtype == ZRS_UINT64;
    if (rc == 0 && !is_int)
        rc = fail(err, "%s: expected an integer or bool array, got dtype %s", path, a.descr);
    if (rc == 0 && a.fortran && ndim > 1)
        rc = fail(err, "%s: expected a C-order array", path);
    const size_t isz = zrs_dtype_itemsize(a.dtype);
    const uint64_t n = rc == 0 ? zr_array_count(&a, 0) : 0;
    if (rc == 0 && n > (UINT64_MAX >> 4))
        rc = fail(err, "%s: too many values", path);
    unsigned char *raw = NULL;
    int64_t *v = NULL;
    if (rc == 0) {
        raw = malloc(n * isz + 1);
        v = malloc(n * sizeof *v + 1);
        if (!raw || !v)
            rc = fail(err, "%s: out of memory for %" PRIu64 " values", path, n);
    }
    if (rc == 0)
        rc = zr_src_read_exact(s, raw, n * isz, "the data", err);
    if (rc == 0 && a.swap)
        zr_byteswap(raw, n, a.dtype);
    for (uint64_t i = 0; rc == 0 && i < n; i++) {
        const unsigned char *p = raw + i * isz;
        switch (a.dtype) {
        case ZRS_BOOL: v[i] = p[0] != 0; break;
        case ZRS_INT8: v[i] = (int8_t)p[0]; break;
        case ZRS_UINT8: v[i] = p[0]; break;
        case ZRS_INT16: v[i] = (int16_t)le16(p); break;
        case ZRS_UINT16: v[i] = le16(p); break;
        case ZRS_INT32: v[i] = (int32_t)le32(p); break;
        case ZRS_UINT32: v[i] = le32(p); break;
        case ZRS_INT64: v[i] = (int64_t)le64(p); break;
        default:
            if (le64(p) > INT64_MAX)
                rc = fail(err, "%s: value %" PRIu64 " at %" PRIu64 " is out of range", path,
                          le64(p), i);
            v[i] = (int64_t)le64(p);
        }
    }
    free(raw);
    if (rc < 0) {
        free(v);
        return -1;
    }
    *out = v;
    *rows = a.shape[0];
    *cols = ndim > 1 ? a.shape[1] : 1;
    return 0;
}

int zr_npy_load_i64(const char *path, int64_t **out, uint64_t *count, char *err)
{
    zr_src *s;
    uint64_t cols;
    *out = NULL;
    *count = 0;
    if (zr_src_open_file(&s, path, err) < 0)
        return -1;
    int rc = zr_load_i64(s, 1, out, count, &cols, err);
    zr_src_close(s);
    return rc;
}

/* ------------------------------------------------------------ elements */

static double half_to_double(uint16_t h)
{
    int e = (h >> 10) & 31, m = h & 1023;
    double v = e == 0 ? ldexp(m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexp(m + 1024, e - 25);
    return (h & 0x8000) ? -v : v;
}

double zr_elem_double(const void *payload, zrs_dtype dt, uint64_t i, double *imag)
{
    const size_t isz = zrs_dtype_itemsize(dt);
    const unsigned char *p = (const unsigned char *)payload + i * isz;
    union {
        int8_t i8; int16_t i16; int32_t i32; int64_t i64;
        uint8_t u8; uint16_t u16; uint32_t u32; uint64_t u64;
        float f32; double f64; float c64[2]; double c128[2];
    } u;
    memcpy(&u, p, isz);
    *imag = 0;
    switch (dt) {
    case ZRS_BOOL: return u.u8 != 0;
    case ZRS_INT8: return u.i8;
    case ZRS_INT16: return u.i16;
    case ZRS_INT32: return u.i32;
    case ZRS_INT64: return (double)u.i64;
    case ZRS_UINT8: return u.u8;
    case ZRS_UINT16: return u.u16;
    case ZRS_UINT32: return u.u32;
    case ZRS_UINT64: return (double)u.u64;
    case ZRS_FLOAT16: return half_to_double(u.u16);
    case ZRS_FLOAT32: return u.f32;
    case ZRS_FLOAT64: return u.f64;
    case ZRS_COMPLEX64: *imag = u.c64[1]; return u.c64[0];
    default: *imag = u.c128[1]; return u.c128[0];
    }
}

/* ----------------------------------------------------------------- zip */

/* A directory entry's zip64 extra field (of xl bytes at x): the 64-bit
 * values of the fields that read 0xFFFFFFFF, in this order. */
static void zip64_extra(zr_zip_entry *v, const unsigned char *x, size_t xl)
{
    const unsigned char *xe = x + xl;
    while (x + 4 <= xe) {
        unsigned id = le16(x), len = le16(x + 2);
        if (x + 4 + len > xe)
            break;
        if (id == 1) {
            const unsigned char *q = x + 4, *qe = x + 4 + len;
            if (v->usize == 0xFFFFFFFFu && q + 8 <= qe)
                v->usize = le64(q), q += 8;
            if (v->csize == 0xFFFFFFFFu && q + 8 <= qe)
                v->csize = le64(q), q += 8;
            if (v->local_offset == 0xFFFFFFFFu && q + 8 <= qe)
                v->local_offset = le64(q);
        }
        x += 4 + len;
    }
}

int zr_zip_list(const char *path, zr_zip_entry **entries, size_t *count, char *err)
{
    *entries = NULL;
    *count = 0;
    zrp_file f;
    int rc = zrp_open(&f, path, ZRP_READ);
    if (rc < 0)
        return fail(err, "%s: cannot open: %s", path, strerror(-rc));
    uint64_t size = 0;
    unsigned char *tail = NULL, *cd = NULL;
    zr_zip_entry *v = NULL;
    rc = zrp_file_size(f, &size);
    if (rc < 0 || size < 22) {
        fail(err, "%s: not a zip archive (%s)", path, rc < 0 ? strerror(-rc) : "too short");
        goto out_fail;
    }
    size_t tl = size < 65557 ? (size_t)size : 65557;
    tail = malloc(tl);
    if (!tail || zrp_pread_all(f, tail, tl, size - tl) < 0) {
        fail(err, "%s: cannot read the zip directory", path);
        goto out_fail;
    }
    size_t e = tl - 22 + 1;
    while (e-- > 0)
        if (le32(tail + e) == 0x06054b50u)
            break;
    if (e == (size_t)-1) {
        fail(err, "%s: not a zip archive (no end-of-directory record)", path);
        goto out_fail;
    }
    uint64_t n = le16(tail + e + 10), cd_size = le32(tail + e + 12), cd_off = le32(tail + e + 16);
    if (n == 0xFFFF || cd_size == 0xFFFFFFFFu || cd_off == 0xFFFFFFFFu) {
        unsigned char loc[20], z64[56];
        uint64_t eocd_at = size - tl + e;
        if (eocd_at < 20 || zrp_pread_all(f, loc, 20, eocd_at - 20) < 0 ||
            le32(loc) != 0x07064b50u || zrp_pread_all(f, z64, 56, le64(loc + 8)) < 0 ||
            le32(z64) != 0x06064b50u) {
            fail(err, "%s: zip64 directory record missing or damaged", path);
            goto out_fail;
        }
        n = le64(z64 + 32);
        cd_size = le64(z64 + 40);
        cd_off = le64(z64 + 48);
    }
    if (cd_off + cd_size > size || n > cd_size / 46 + 1) {
        fail(err, "%s: zip directory out of bounds", path);
        goto out_fail;
    }
    cd = malloc(cd_size + 1);
    v = calloc(n ? n : 1, sizeof *v);
    if (!cd || !v || zrp_pread_all(f, cd, cd_size, cd_off) < 0) {
        fail(err, "%s: cannot read the zip directory", path);
        goto out_fail;
    }
    size_t p = 0;
    for (uint64_t i = 0; i < n; i++) {
        if (p + 46 > cd_size || le32(cd + p) != 0x02014b50u) {
            fail(err, "%s: zip directory entry %" PRIu64 " damaged", path, i);
            goto out_fail;
        }
        size_t nl = le16(cd + p + 28), xl = le16(cd + p + 30), cl = le16(cd + p + 32);
        if (p + 46 + nl + xl + cl > cd_size || nl >= sizeof v[i].name) {
            fail(err, "%s: zip directory entry %" PRIu64 " damaged or name too long", path, i);
            goto out_fail;
        }
        v[i].method = le16(cd + p + 10);
        v[i].crc = le32(cd + p + 16);
        v[i].csize = le32(cd + p + 20);
        v[i].usize = le32(cd + p + 24);
        v[i].local_offset = le32(cd + p + 42);
        memcpy(v[i].name, cd + p + 46, nl);
        v[i].name[nl] = '\0';
        zip64_extra(&v[i], cd + p + 46 + nl, xl);
        p += 46 + nl + xl + cl;
    }
    free(tail);
    free(cd);
    zrp_close(&f);
    *entries = v;
    *count = (size_t)n;
    return 0;
out_fail:
    free(tail);
    free(cd);
    free(v);
    zrp_close(&f);
    return -1;
}

/* ------------------------------------------------------------- writers */

static size_t npy_dict(char *dict, size_t cap, const char *descr, const uint64_t *shape,
                       size_t ndim)
{
    size_t k = (size_t)snprintf(dict, cap, "{'descr': '%s', 'fortran_order': False, 'shape': (",
                                descr);
    for (size_t i = 0; i < ndim && k < cap; i++)
        k += (size_t)snprintf(dict + k, cap - k, "%" PRIu64 "%s", shape[i],
                              ndim == 1 || i + 1 < ndim ? "," : "");
    if (k < cap)
        k += (size_t)snprintf(dict + k, cap - k, "), }");
    return k;
}

/* Total length for a dict of k bytes: magic, version, length, dict, '\n'
 * padded to 64; version 2 past 65535. */
static size_t npy_total(size_t k, int *v2)
{
    size_t total = (10 + k + 1 + 63) / 64 * 64;
    *v2 = total - 10 > 65535;
    if (*v2)
        total = (12 + k + 1 + 63) / 64 * 64;
    return total;
}

static size_t npy_emit(char *buf, size_t total, int v2, const char *dict, size_t k)
{
    size_t pre = v2 ? 12 : 10;
    memcpy(buf, "\x93NUMPY", 6);
    buf[6] = v2 ? 2 : 1;
    buf[7] = 0;
    if (v2)
        put32((unsigned char *)buf + 8, (uint32_t)(total - pre));
    else
        put16((unsigned char *)buf + 8, (uint16_t)(total - pre));
    memcpy(buf + pre, dict, k);
    memset(buf + pre + k, ' ', total - pre - k - 1);
    buf[total - 1] = '\n';
    return total;
}

size_t zr_npy_header(char *buf, size_t cap, const char *descr, const uint64_t *shape,
                     size_t ndim)
{
    char dict[2048];
    size_t k = npy_dict(dict, sizeof dict, descr, shape, ndim);
    int v2;
    size_t total = npy_total(k, &v2);
    if (k >= sizeof dict || total > cap)
        return 0;
    return npy_emit(buf, total, v2, dict, k);
}

size_t zr_npy_header_max(size_t ndim)
{
    uint64_t big[ZRS_MAX_NDIM + 1];
    for (size_t i = 0; i <= ZRS_MAX_NDIM; i++)
        big[i] = UINT64_MAX; /* 20 digits */
    char dict[2048];
    int v2;
    return npy_total(npy_dict(dict, sizeof dict, "<c16", big, ndim), &v2);
}

size_t zr_npy_header_padded(char *buf, size_t len, const char *descr, const uint64_t *shape,
                            size_t ndim)
{
    char dict[2048];
    size_t k = npy_dict(dict, sizeof dict, descr, shape, ndim);
    int v2;
    if (k >= sizeof dict || npy_total(k, &v2) > len)
        return 0;
    v2 = len - 10 > 65535;
    return npy_emit(buf, len, v2, dict, k);
}

typedef struct zip_member {
    char name[256];
    uint64_t offset, size;
    uint32_t crc;
    size_t head_len; /* reserved head bytes, not yet in crc */
} zip_member;

struct zr_zip_writer {
    char *path;
    zrp_file f;
    uint64_t pos;
    zip_member *m;
    size_t n, cap;
    int open_member;
};

int zr_zip_create(zr_zip_writer **out, const char *path, char *err)
{
    *out = NULL;
    zr_zip_writer *z = calloc(1, sizeof *z);
    if (!z || !(z->path = strdup(path))) {
        free(z);
        return fail(err, "%s: out of memory", path);
    }
    int rc = zrp_open(&z->f, path, ZRP_WRITE | ZRP_CREATE | ZRP_EXCLUSIVE);
    if (rc < 0) {
        free(z->path);
        free(z);
        return fail(err, "%s: cannot create: %s", path, strerror(-rc));
    }
    *out = z;
    return 0;
}

static int zwrite(zr_zip_writer *z, const void *buf, size_t n, char *err)
{
    int rc = zrp_pwrite_all(z->f, buf, n, z->pos);
    if (rc < 0)
        return fail(err, "%s: write failed: %s", z->path, strerror(-rc));
    z->pos += n;
    return 0;
}

/* Local header: always with a zip64 extra (sizes patched at the end). */
static void local_header(unsigned char *h, const zip_member *m)
{
    size_t nl = strlen(m->name);
    memset(h, 0, 30);
    put32(h, 0x04034b50u);
    put16(h + 4, 45);
    put16(h + 10, 0x21);   /* 00:01:02 */
    put16(h + 12, 0x5821); /* 2024-01-01 */
    put32(h + 14, m->crc);
    put32(h + 18, 0xFFFFFFFFu);
    put32(h + 22, 0xFFFFFFFFu);
    put16(h + 26, (uint16_t)nl);
    put16(h + 28, 20);
    memcpy(h + 30, m->name, nl);
    unsigned char *x = h + 30 + nl;
    put16(x, 1);
    put16(x + 2, 16);
    put64(x + 4, m->size);
    put64(x + 12, m->size);
}

int zr_zip_begin(zr_zip_writer *z, const char *name, char *err)
{
    if (z->n == z->cap) {
        size_t nc = z->cap ? z->cap * 2 : 8;
        zip_member *nm = realloc(z->m, nc * sizeof *nm);
        if (!nm)
            return fail(err, "%s: out of memory", z->path);
        z->m = nm;
        z->cap = nc;
    }
    zip_member *m = &z->m[z->n++];
    memset(m, 0, sizeof *m);
    snprintf(m->name, sizeof m->name, "%s", name);
    m->offset = z->pos;
    m->crc = (uint32_t)crc32(0L, Z_NULL, 0);
    unsigned char h[30 + 256 + 20];
    local_header(h, m);
    z->open_member = 1;
    return zwrite(z, h, 30 + strlen(m->name) + 20, err);
}

int zr_zip_begin_reserved(zr_zip_writer *z, const char *name, size_t head_len, char *err)
{
    if (zr_zip_begin(z, name, err) < 0)
        return -1;
    zip_member *m = &z->m[z->n - 1];
    unsigned char zero[256] = {0};
    for (size_t done = 0; done < head_len;) {
        size_t k = head_len - done < sizeof zero ? head_len - done : sizeof zero;
        if (zwrite(z, zero, k, err) < 0)
            return -1;
        done += k;
    }
    m->head_len = head_len;
    m->size = head_len;
    return 0;
}

int zr_zip_set_head(zr_zip_writer *z, const void *head, char *err)
{
    zip_member *m = &z->m[z->n - 1];
    uint64_t data_at = m->offset + 30 + strlen(m->name) + 20;
    int rc = zrp_pwrite_all(z->f, head, m->head_len, data_at);
    if (rc < 0)
        return fail(err, "%s: write failed: %s", z->path, strerror(-rc));
    uLong hc = crc32(0L, head, (uInt)m->head_len);
    m->crc = (uint32_t)crc32_combine(hc, m->crc, (z_off_t)(m->size - m->head_len));
    m->head_len = 0;
    return 0;
}

int zr_zip_write(zr_zip_writer *z, const void *buf, size_t n, char *err)
{
    zip_member *m = &z->m[z->n - 1];
    const unsigned char *p = buf;
    for (size_t done = 0; done < n;) {
        uInt k = n - done > (1u << 30) ? 1u << 30 : (uInt)(n - done);
        m->crc = (uint32_t)crc32(m->crc, p + done, k);
        done += k;
    }
    m->size += n;
    return zwrite(z, buf, n, err);
}

int zr_zip_end(zr_zip_writer *z, char *err)
{
    zip_member *m = &z->m[z->n - 1];
    unsigned char h[30 + 256 + 20];
    local_header(h, m);
    z->open_member = 0;
    int rc = zrp_pwrite_all(z->f, h, 30 + strlen(m->name) + 20, m->offset);
    return rc < 0 ? fail(err, "%s: write failed: %s", z->path, strerror(-rc)) : 0;
}

int zr_zip_finish(zr_zip_writer *z, char *err)
{
    uint64_t cd_off = z->pos;
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < z->n; i++) {
        const zip_member *m = &z->m[i];
        size_t nl = strlen(m->name);
        unsigned char h[46 + 256 + 28];
        memset(h, 0, 46);
        put32(h, 0x02014b50u);
        put16(h + 4, 45);
        put16(h + 6, 45);
        put16(h + 12, 0x21);
        put16(h + 14, 0x5821);
        put32(h + 16, m->crc);
        put32(h + 20, 0xFFFFFFFFu);
        put32(h + 24, 0xFFFFFFFFu);
        put16(h + 28, (uint16_t)nl);
        put16(h + 30, 28);
        put32(h + 38, 0644u << 16);
        put32(h + 42, 0xFFFFFFFFu);
        memcpy(h + 46, m->name, nl);
        unsigned char *x = h + 46 + nl;
        put16(x, 1);
        put16(x + 2, 24);
        put64(x + 4, m->size);
        put64(x + 12, m->size);
        put64(x + 20, m->offset);
        rc = zwrite(z, h, 46 + nl + 28, err);
    }
    uint64_t cd_size = z->pos - cd_off, z64_off = z->pos;
    unsigned char t[56 + 20 + 22];
    memset(t, 0, sizeof t);
    put32(t, 0x06064b50u);
    put64(t + 4, 44);
    put16(t + 12, 45);
    put16(t + 14, 45);
    put64(t + 24, z->n);
    put64(t + 32, z->n);
    put64(t + 40, cd_size);
    put64(t + 48, cd_off);
    put32(t + 56, 0x07064b50u);
    put64(t + 56 + 8, z64_off);
    put32(t + 56 + 16, 1);
    unsigned char *e = t + 76;
    put32(e, 0x06054b50u);
    put16(e + 8, 0xFFFF);
    put16(e + 10, 0xFFFF);
    put32(e + 12, 0xFFFFFFFFu);
    put32(e + 16, 0xFFFFFFFFu);
    if (rc == 0)
        rc = zwrite(z, t, sizeof t, err);
    if (rc == 0) {
        int s = zrp_fsync(z->f);
        if (s < 0)
            rc = fail(err, "%s: fsync failed: %s", z->path, strerror(-s));
    }
    if (rc < 0) {
        zr_zip_abandon(z);
        return -1;
    }
    zrp_close(&z->f);
    free(z->m);
    free(z->path);
    free(z);
    return 0;
}

void zr_zip_abandon(zr_zip_writer *z)
{
    if (!z)
        return;
    zrp_close(&z->f);
    zrp_unlink(z->path);
    free(z->m);
    free(z->path);
    free(z);
}
