/*
 * zr_test_util.c - see zr_test_util.h. Test-only code: it uses the C
 * library directly rather than the platform layer so that suites of any
 * library can link it; the few calls that differ between POSIX and Windows
 * (mkdir, mkdtemp, removing a tree) are in zr_test_os_posix.c and
 * zr_test_os_win32.c, one of which meson compiles in.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sys/stat.h>

#include <cmocka.h>

#include "zr_test_util.h"

/* mkdir -p: every missing component of `path`, then `path` itself. */
static int mkdir_parents(const char *path)
{
    char p[512];
    size_t n = strlen(path);
    if (n == 0 || n >= sizeof p)
        return -1;
    memcpy(p, path, n + 1);
    for (size_t i = 1; i <= n; i++) {
        if (p[i] != '/' && p[i] != '\0')
            continue;
        char c = p[i];
        p[i] = '\0';
        if (zt_os_mkdir(p) != 0 && errno != EEXIST)
            return -1;
        p[i] = c;
    }
    return 0;
}

int zt_mkdtemp(char *out, size_t cap, const char *prefix)
{
    const char *base = getenv("ZR_TEST_TMPDIR");
    if (base == NULL || base[0] == '\0')
        base = "/tmp";
    if (mkdir_parents(base) != 0)
        return -1;
    int n = snprintf(out, cap, "%s/%s-XXXXXX", base, prefix);
    if (n < 0 || (size_t)n >= cap)
        return -1;
    return zt_os_mkdtemp(out);
}

int zt_dir_setup(void **state, const char *prefix)
{
    zt_dir *d = calloc(1, sizeof *d);
    if (d == NULL)
        return -1;
    if (zt_mkdtemp(d->dir, sizeof d->dir, prefix) != 0) {
        free(d);
        return -1;
    }
    *state = d;
    return 0;
}

int zt_dir_teardown(void **state)
{
    zt_dir *d = *state;
    zt_rmtree(d->dir);
    free(d);
    return 0;
}

const char *zt_dir_at(zt_dir *d, const char *name)
{
    snprintf(d->path, sizeof d->path, "%s/%s", d->dir, name);
    return d->path;
}

char zt_root[512];

int zt_root_setup(const char *prefix)
{
    return zt_mkdtemp(zt_root, sizeof zt_root, prefix) == 0 ? 0 : -1;
}

int zt_root_teardown(void) { return zt_rmtree(zt_root); }

const char *zt_root_at(const char *name)
{
    static char p[700];
    snprintf(p, sizeof p, "%s/%s", zt_root, name);
    return p;
}

int zt_exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

long zt_file_size(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 ? (long)st.st_size : -1;
}

void zt_write_file(const char *path, const void *buf, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (f == NULL)
        fail_msg("cannot create %s", path);
    if (n)
        assert_int_equal(fwrite(buf, 1, n, f), n);
    assert_int_equal(fclose(f), 0);
}

size_t zt_read_file(const char *path, void *buf, size_t cap)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        fail_msg("cannot open %s", path);
    size_t n = fread(buf, 1, cap, f);
    assert_int_equal(fclose(f), 0);
    return n;
}

size_t zt_slurp(const char *path, unsigned char **buf)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        *buf = NULL;
        return 0;
    }
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    *buf = malloc((size_t)n + 1);
    assert_non_null(*buf);
    size_t got = fread(*buf, 1, (size_t)n, f);
    fclose(f);
    return got;
}

void zt_patch_file(const char *path, long off, const void *bytes, size_t n)
{
    FILE *f = fopen(path, "r+b");
    if (f == NULL)
        fail_msg("cannot open %s for patching", path);
    assert_int_equal(fseek(f, off, SEEK_SET), 0);
    assert_int_equal(fwrite(bytes, 1, n, f), n);
    assert_int_equal(fclose(f), 0);
}

void zt_put_le32(unsigned char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

void zt_put_le64(unsigned char *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

uint32_t zt_get_le32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

uint32_t zt_fnv1a32(const unsigned char *p, size_t n)
{
    uint32_t h = 0x811c9dc5u;
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= 0x01000193u;
    }
    return h;
}

/* Bytes 0..27, the same in both header forms. */
static void meta_common(unsigned char *out, const zt_meta *m)
{
    zt_put_le64(out, m->length);
    zt_put_le32(out + 8, m->tail_chunk);
    zt_put_le32(out + 12, m->tail_offset);
    out[16] = m->codec;
    zt_put_le32(out + 24, m->identity_tag);
}

void zt_meta_copy(unsigned char out[64], const zt_meta *m)
{
    memset(out, 0, 64);
    meta_common(out, m);
    memcpy(out + 28, "ZRM2", 4);
    zt_put_le64(out + 32, m->seq);
    zt_put_le64(out + 40, m->synced_length);
    zt_put_le32(out + 48, m->synced_chunk);
    zt_put_le32(out + 52, m->synced_offset);
    zt_put_le32(out + 60, zt_fnv1a32(out, 60));
}

void zt_meta_legacy(unsigned char out[32], const zt_meta *m)
{
    memset(out, 0, 32);
    meta_common(out, m);
    zt_put_le32(out + 28, zt_fnv1a32(out, 28));
}

void zt_meta_set_tag(const char *store, uint32_t tag)
{
    char p[1200];
    snprintf(p, sizeof p, "%s/meta.zr", store);
    unsigned char m[128];
    size_t n = zt_read_file(p, m, sizeof m);
    if (n == 32) {
        zt_put_le32(m + 24, tag);
        zt_put_le32(m + 28, zt_fnv1a32(m, 28));
    }
    for (size_t c = 0; n == 128 && c < 2; c++) {
        unsigned char *copy = m + 64 * c;
        if (memcmp(copy + 28, "ZRM2", 4) != 0 || zt_get_le32(copy + 60) != zt_fnv1a32(copy, 60))
            continue;
        zt_put_le32(copy + 24, tag);
        zt_put_le32(copy + 60, zt_fnv1a32(copy, 60));
    }
    zt_write_file(p, m, n);
}

uint64_t zt_xorshift64(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

uint64_t zt_splitmix64(uint64_t *s)
{
    *s += UINT64_C(0x9e3779b97f4a7c15);
    uint64_t x = *s;
    x ^= x >> 30;
    x *= UINT64_C(0xbf58476d1ce4e5b9);
    x ^= x >> 27;
    x *= UINT64_C(0x94d049bb133111eb);
    return x ^ (x >> 31);
}

uint64_t zt_env_u64(const char *name, uint64_t dflt)
{
    const char *v = getenv(name);
    return v && *v ? strtoull(v, NULL, 10) : dflt;
}

void zt_assert_mentions_at(const char *detail, const char *needle, const char *file, int line)
{
    if (strstr(detail, needle) == NULL) {
        print_error("error detail \"%s\" does not mention \"%s\"\n", detail, needle);
        _fail(file, line);
    }
}
