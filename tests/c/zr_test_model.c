/*
 * zr_test_model.c - see zr_test_model.h.
 */
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <zdict.h>

#include "zr_test_model.h"
#include "zr_test_util.h"

/* ------------------------------------------------------------- records */

/* A pure hash of x (one splitmix64 step from state x). */
static uint64_t mix(uint64_t x) { return zt_splitmix64(&x); }

uint32_t zt_rec_size(const zt_recipe *r, uint64_t id)
{
    /* Knuth's multiplicative hash: consecutive ids spread over the range. */
    return r->min_size + (uint32_t)((id * 2654435761u) % (r->max_size - r->min_size + 1u));
}

void zt_rec_fill(const zt_recipe *r, uint64_t id, unsigned char *p)
{
    /* Every 5th byte from a per-record hash, the rest a pattern of the
     * position and id: distinct records differ, and zstd still finds
     * something to compress. */
    uint32_t n = zt_rec_size(r, id);
    uint64_t h = mix(id ^ 0x9e3779b97f4a7c15u);
    for (uint32_t j = 0; j < n; j++)
        p[j] = (unsigned char)(j % 5 == 0 ? h >> (8 * (j / 5 % 8)) : j * 7 + id);
}

/* --------------------------------------------------------------- model */

void zt_model_init(zt_model *m, const zt_recipe *r, uint64_t first_id)
{
    memset(m, 0, sizeof *m);
    m->recipe = r;
    m->next = first_id;
}

void zt_model_free(zt_model *m)
{
    free(m->id);
    m->id = NULL;
    m->len = m->cap = 0;
}

static void reserve(zt_model *m, uint64_t n)
{
    if (n <= m->cap)
        return;
    m->cap = n < 256 ? 256 : n * 2;
    m->id = realloc(m->id, m->cap * sizeof *m->id);
    assert_non_null(m->id);
}

void zt_model_copy(zt_model *dst, const zt_model *src)
{
    reserve(dst, src->len + 1);
    if (src->len) /* an empty model may have no buffer: memcpy(x, NULL, 0) is undefined */
        memcpy(dst->id, src->id, src->len * sizeof *src->id);
    dst->len = src->len;
    dst->next = src->next;
    dst->recipe = src->recipe;
}

void zt_model_push(zt_model *m, uint64_t id)
{
    reserve(m, m->len + 1);
    m->id[m->len++] = id;
}

int zt_append_ids(zre_engine *e, const zt_recipe *r, const uint64_t *ids, uint64_t n)
{
    uint64_t *bounds = malloc((n + 1) * sizeof *bounds);
    assert_non_null(bounds);
    bounds[0] = 0;
    for (uint64_t i = 0; i < n; i++)
        bounds[i + 1] = bounds[i] + zt_rec_size(r, ids[i]);
    unsigned char *buf = malloc(bounds[n] ? bounds[n] : 1);
    assert_non_null(buf);
    for (uint64_t i = 0; i < n; i++)
        zt_rec_fill(r, ids[i], buf + bounds[i]);
    int rc = zre_append(e, buf, 0, bounds, n, NULL);
    free(buf);
    free(bounds);
    return rc;
}

int zt_model_append(zre_engine *e, zt_model *m, uint64_t n)
{
    uint64_t *ids = malloc((n ? n : 1) * sizeof *ids);
    assert_non_null(ids);
    for (uint64_t i = 0; i < n; i++)
        ids[i] = m->next + i;
    uint64_t before = zre_length(e);
    int rc = zt_append_ids(e, m->recipe, ids, n);
    if (rc == 0) {
        assert_int_equal(before, m->len);
        for (uint64_t i = 0; i < n; i++)
            zt_model_push(m, ids[i]);
        m->next += n;
    }
    free(ids);
    return rc;
}

static int cmp_desc(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? 1 : x > y ? -1 : 0;
}

void zt_model_delete(zt_model *m, const uint64_t *index, uint64_t n)
{
    uint64_t *t = malloc((n ? n : 1) * sizeof *t);
    assert_non_null(t);
    memcpy(t, index, n * sizeof *t);
    qsort(t, n, sizeof *t, cmp_desc);
    for (uint64_t i = 0; i < n; i++) {
        if (i > 0 && t[i] == t[i - 1])
            continue;
        m->id[t[i]] = m->id[m->len - 1];
        m->len--;
    }
    free(t);
}

/* -------------------------------------------------------------- checks */

int zt_model_matches(zre_engine *e, const zt_model *m, int exact, char *why, size_t cap)
{
    uint64_t n = zre_length(e);
    if (n < m->len || (exact && n != m->len)) {
        snprintf(why, cap, "length %" PRIu64 ", expected %s%" PRIu64, n, exact ? "" : "at least ",
                 m->len);
        return 0;
    }
    unsigned char *got = malloc(m->recipe->max_size), *want = malloc(m->recipe->max_size);
    assert_true(got && want);
    int ok = 1;
    for (uint64_t i = 0; i < m->len && ok; i++) {
        uint32_t sz = zt_rec_size(m->recipe, m->id[i]);
        zt_rec_fill(m->recipe, m->id[i], want);
        int rc = zre_gather(e, &i, 1, got, m->recipe->max_size, sz, NULL);
        if (rc != 0) {
            snprintf(why, cap, "record %" PRIu64 ": gather failed: %s", i, zr_last_error());
            ok = 0;
        } else if (memcmp(got, want, sz) != 0) {
            snprintf(why, cap, "record %" PRIu64 " differs from record id %" PRIu64, i, m->id[i]);
            ok = 0;
        }
    }
    free(got);
    free(want);
    return ok;
}

void zt_model_check(zre_engine *e, const zt_model *m, int check, const char *ctx)
{
    char why[600];
    if (!zt_model_matches(e, m, 1, why, sizeof why))
        fail_msg("%s: %s", ctx, why);
    for (uint64_t i = 0; check && i < m->len; i++)
        if (zre_check_record(e, i) != 0)
            fail_msg("%s: check of record %" PRIu64 ": %s", ctx, i, zr_last_error());
}

/* -------------------------------------------------------------- stores */

size_t zt_train_dict(const zt_recipe *r, uint64_t first_id, unsigned n, unsigned char *dict,
                     size_t cap)
{
    size_t *sizes = malloc(n * sizeof *sizes), total = 0;
    assert_non_null(sizes);
    for (unsigned i = 0; i < n; i++)
        total += sizes[i] = zt_rec_size(r, first_id + i);
    unsigned char *buf = malloc(total), *p = buf;
    assert_non_null(buf);
    for (unsigned i = 0; i < n; i++) {
        zt_rec_fill(r, first_id + i, p);
        p += sizes[i];
    }
    size_t got = ZDICT_trainFromBuffer(dict, cap, buf, sizes, n);
    free(buf);
    free(sizes);
    assert_false(ZDICT_isError(got));
    return got;
}

zre_engine *zt_create_store(const char *path, zre_codec codec, const zt_recipe *r)
{
    /* Trained once per recipe: suites create thousands of stores. */
    static unsigned char dict[16384];
    static size_t dict_size;
    static const zt_recipe *dict_recipe;
    zre_create_options o;
    memset(&o, 0, sizeof o);
    o.codec = codec;
    if (codec == ZRE_CODEC_ZSTD_DICT) {
        if (dict_recipe != r || !dict_size) {
            dict_size = zt_train_dict(r, UINT64_C(1) << 40, 300, dict, sizeof dict);
            dict_recipe = r;
        }
        o.dict = dict;
        o.dict_size = dict_size;
    }
    zre_engine *e = NULL;
    int rc = zre_create_ex(&e, path, &o);
    if (rc != 0)
        fail_msg("create %s: %s", path, zr_last_error());
    return e;
}
