/*
 * state.c - the loader state: what decides a loader's batches, as JSON
 * text (zld_state_json), and the check of a saved state against a new
 * loader (zld_options.resume), which names every difference.
 *
 * The text (version 2) is one JSON object:
 *
 *   {"step": 12, "seed": 0, "mode": "cyclic", "batch_size": 8,
 *    "rank": 0, "world_size": 1,
 *    "window": 64,                          (mode "bucket" only)
 *    "flip": {"image": 0.5},                (flips only, by stream label)
 *    "fingerprint": {
 *      "version": 2,
 *      "streams": [{"name": "image", "length": 1000,
 *                   "uuid": "0f1e2d3c-..."}, ...],
 *      "pass": {"shuffle": false, "drop_last": false, "epoch": 0},
 *      "bucket": {"count": 1000, "lengths": "<FNV-1a 64, 16 hex digits>"},
 *      "schedule": [{"from": 0, "length": 1000, "base": 0}, ...]}}
 *
 * The top-level keys are the loader options a binding takes by those
 * names; "fingerprint" holds the rest. A stream's identity is its store's
 * "uuid" (null for a store from before uuids), or for a concatenation of
 * several shards "shards" (their number) and "shards_id" (FNV-1a 64 of
 * each shard's 16 uuid bytes, zero when it has none, and each shard's
 * u64le length but the last's), or for a mixture stream "mixture":
 * {"seed", "sources": [{"weight", "mode", "length", identity}]}. Generic
 * streams carry name and length only. "pass", "bucket" and "schedule" are
 * present only when they apply (schedule: after a resume on grown data).
 * A state without "fingerprint" was saved by an older version: its keys
 * are checked, and the rest is reported in the loader's note.
 */
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "zld_shards.h"
#include "zld_state.h"

#define STATE_VERSION 2
/* The differences a failed resume reports: as many as fit the detail
 * message (512 bytes with its prefix), then how many more there are. */
#define WHY_MAX 400
/* Deepest nesting a state text may have (it has 5). */
#define STATE_DEPTH 16

const char *zld__label(const zld_plan *p, const zld_stream *streams, size_t k)
{
    if (p->opt.names != NULL && p->opt.names[k] != NULL)
        return p->opt.names[k];
    return streams[k].name ? streams[k].name : "";
}

const zld_segment *zld__segment(const zld_plan *p, uint64_t step)
{
    size_t k = 0;
    while (k + 1 < p->nseg && step >= p->seg[k + 1].from)
        k++;
    return &p->seg[k];
}

static const char *mode_name(const zld_plan *p)
{
    return p->pack ? "pack" : p->bucket ? "bucket" : zsm_mode_name(p->cfg.mode);
}

/* ------------------------------------------------------------ identities */

static uint64_t fnv1a64(uint64_t h, const void *buf, size_t len)
{
    const unsigned char *b = buf;
    for (size_t i = 0; i < len; i++) {
        h ^= b[i];
        h *= 0x100000001b3ull;
    }
    return h;
}
#define FNV64_BASIS 0xcbf29ce484222325ull

static uint64_t shard_length(zrs_concat *c, size_t i)
{
    uint64_t end = i + 1 < zrs_concat_count(c) ? zrs_concat_offset(c, i + 1)
                                               : zrs_concat_length(c);
    return end - zrs_concat_offset(c, i);
}

/* shards_id of shards [a, a + k) of c (see the file comment). */
static uint64_t shards_id(zrs_concat *c, size_t a, size_t k)
{
    uint64_t h = FNV64_BASIS;
    for (size_t i = a; i < a + k; i++) {
        uint8_t u[ZRS_UUID_BYTES] = {0};
        (void)zrs_get_uuid(zrs_concat_shard(c, i), u);
        h = fnv1a64(h, u, sizeof u);
        if (i + 1 < a + k) {
            uint64_t n = shard_length(c, i);
            unsigned char le[8];
            for (int j = 0; j < 8; j++)
                le[j] = (unsigned char)(n >> (8 * j));
            h = fnv1a64(h, le, sizeof le);
        }
    }
    return h;
}

/* Building: json-c returns NULL when out of memory; every insertion goes
 * through put/push, which note it, so a state is whole or not at all. */
typedef struct builder {
    int bad;
} builder;

static void put(builder *b, json_object *o, const char *key, json_object *v)
{
    if (o == NULL || v == NULL || json_object_object_add(o, key, v) != 0) {
        b->bad = 1;
        json_object_put(v);
    }
}

static void put_null(builder *b, json_object *o, const char *key)
{
    if (o == NULL || json_object_object_add(o, key, NULL) != 0)
        b->bad = 1;
}

static void push(builder *b, json_object *a, json_object *v)
{
    if (a == NULL || v == NULL || json_object_array_add(a, v) != 0) {
        b->bad = 1;
        json_object_put(v);
    }
}

static json_object *hex64(uint64_t v)
{
    char t[17];
    snprintf(t, sizeof t, "%016" PRIx64, v);
    return json_object_new_string(t);
}

/* "uuid": the store's uuid in text form, or null. */
static void put_uuid(builder *b, json_object *entry, zrs_store *s)
{
    uint8_t u[ZRS_UUID_BYTES];
    char t[ZRS_UUID_STR_LEN + 1];
    if (zrs_get_uuid(s, u) == 1 && zrs_uuid_str(u, t) == ZR_OK)
        put(b, entry, "uuid", json_object_new_string(t));
    else
        put_null(b, entry, "uuid");
}

/* The identity of shards [a, a + k) of c into entry. */
static void put_shards(builder *b, json_object *entry, zrs_concat *c, size_t a, size_t k)
{
    if (k == 1) {
        put_uuid(b, entry, zrs_concat_shard(c, a));
        return;
    }
    put(b, entry, "shards", json_object_new_uint64(k));
    put(b, entry, "shards_id", hex64(shards_id(c, a, k)));
}

static json_object *mixture_object(builder *b, const zld__mix_view *v)
{
    json_object *m = json_object_new_object(), *src = json_object_new_array();
    put(b, m, "seed", json_object_new_uint64(v->seed));
    for (size_t k = 0; k < v->nsources; k++) {
        json_object *e = json_object_new_object();
        put(b, e, "weight", json_object_new_double(v->weights[k]));
        put(b, e, "mode", json_object_new_string(zsm_mode_name(v->modes[k])));
        put(b, e, "length", json_object_new_uint64(v->lengths[k]));
        put_shards(b, e, v->all, v->shard_first[k], v->shard_first[k + 1] - v->shard_first[k]);
        push(b, src, e);
    }
    put(b, m, "sources", src);
    return m;
}

static json_object *stream_entry(builder *b, const zld_plan *p, const zld_stream *streams,
                                 size_t k)
{
    const zld_stream *st = &streams[k];
    json_object *e = json_object_new_object();
    put(b, e, "name", json_object_new_string(zld__label(p, streams, k)));
    put(b, e, "length", json_object_new_uint64(st->length));
    zrs_store *s = zld__stream_store(st);
    zrs_concat *c = zld__stream_concat(st);
    zld__mix_view v;
    if (s != NULL)
        put_uuid(b, e, s);
    else if (c != NULL)
        put_shards(b, e, c, 0, zrs_concat_count(c));
    else if (zld__stream_mixture(st, &v))
        put(b, e, "mixture", mixture_object(b, &v));
    return e;
}

/* FNV-1a 64 of the first n bucket lengths, as u32le. */
static uint64_t lengths_id(const uint32_t *lengths, uint64_t n)
{
    uint64_t h = FNV64_BASIS;
    for (uint64_t i = 0; i < n; i++) {
        unsigned char le[4] = {(unsigned char)lengths[i], (unsigned char)(lengths[i] >> 8),
                               (unsigned char)(lengths[i] >> 16),
                               (unsigned char)(lengths[i] >> 24)};
        h = fnv1a64(h, le, 4);
    }
    return h;
}

/* The longest index space any segment reads: what the bucket digest
 * and a pass cover. */
static uint64_t span(const zld_plan *p)
{
    uint64_t n = 0;
    for (size_t k = 0; k < p->nseg; k++)
        n = p->seg[k].length > n ? p->seg[k].length : n;
    return n;
}

static json_object *fingerprint(builder *b, const zld_plan *p, const zld_stream *streams,
                                uint64_t step)
{
    json_object *f = json_object_new_object(), *arr = json_object_new_array();
    put(b, f, "version", json_object_new_int(STATE_VERSION));
    for (size_t k = 0; k < p->nstreams; k++)
        push(b, arr, stream_entry(b, p, streams, k));
    put(b, f, "streams", arr);
    if (p->finite) {
        json_object *ps = json_object_new_object();
        put(b, ps, "shuffle", json_object_new_boolean(p->pass.shuffle));
        put(b, ps, "drop_last", json_object_new_boolean(p->pass.drop_last));
        put(b, ps, "epoch", json_object_new_uint64(p->pass.epoch));
        if (p->even)
            put(b, ps, "even_batches", json_object_new_boolean(1));
        put(b, f, "pass", ps);
    }
    if (p->bucket) {
        json_object *bk = json_object_new_object();
        uint64_t n = span(p);
        put(b, bk, "count", json_object_new_uint64(n));
        put(b, bk, "lengths", hex64(lengths_id(p->opt.bucket_lengths, n)));
        put(b, f, "bucket", bk);
    }
    /* Only the segments from the one holding `step` on: a resume starts
     * there, never earlier. The plain schedule is implied. */
    const zld_segment *g = zld__segment(p, step);
    size_t first = (size_t)(g - p->seg);
    if (p->nseg - first > 1 || g->from != 0 || g->base != 0 || g->length != p->length) {
        json_object *sch = json_object_new_array();
        for (size_t k = first; k < p->nseg; k++) {
            json_object *e = json_object_new_object();
            put(b, e, "from", json_object_new_uint64(p->seg[k].from));
            put(b, e, "length", json_object_new_uint64(p->seg[k].length));
            put(b, e, "base", json_object_new_uint64(p->seg[k].base));
            push(b, sch, e);
        }
        put(b, f, "schedule", sch);
    }
    return f;
}

int zld__state_text(const zld_plan *p, const zld_stream *streams, uint64_t step, char **out)
{
    *out = NULL;
    builder b = {0};
    json_object *r = json_object_new_object();
    put(&b, r, "step", json_object_new_uint64(step));
    put(&b, r, "seed", json_object_new_uint64(p->cfg.seed));
    put(&b, r, "mode", json_object_new_string(mode_name(p)));
    put(&b, r, "batch_size", json_object_new_uint64(p->cfg.batch_size));
    put(&b, r, "rank", json_object_new_uint64(p->cfg.rank));
    put(&b, r, "world_size", json_object_new_uint64(p->cfg.world_size));
    if (p->bucket)
        put(&b, r, "window", json_object_new_uint64(p->window));
    if (p->pack) {
        put(&b, r, "pack_policy", json_object_new_string(zsm_pack_policy_name(p->packset.policy)));
        put(&b, r, "pack_length", json_object_new_uint64(p->packset.length));
        put(&b, r, "pack_window", json_object_new_uint64(p->packset.window));
        put(&b, r, "pack_overlong",
            json_object_new_string(zsm_pack_overlong_name(p->packset.overlong)));
    }
    if (p->opt.nflips > 0) {
        json_object *fl = json_object_new_object();
        for (size_t k = 0; k < p->opt.nflips; k++)
            put(&b, fl, zld__label(p, streams, p->opt.flips[k].stream),
                json_object_new_double(p->opt.flips[k].p));
        put(&b, r, "flip", fl);
    }
    put(&b, r, "fingerprint", fingerprint(&b, p, streams, step));
    const char *t = b.bad ? NULL
                          : json_object_to_json_string_ext(r, JSON_C_TO_STRING_PLAIN |
                                                                  JSON_C_TO_STRING_NOSLASHESCAPE);
    char *copy = t ? malloc(strlen(t) + 1) : NULL;
    if (copy != NULL)
        memcpy(copy, t, strlen(t) + 1);
    json_object_put(r);
    if (copy == NULL)
        return zr_set_error(ZR_ENOMEM, "zld_state_json: out of memory");
    *out = copy;
    return ZR_OK;
}

/* ================================================================ resume */

/* A saved state that is not one: the first malformed field. */
typedef struct reader {
    char bad[256];
} reader;

/* The differences found, "; "-separated, and a note of what went
 * unchecked. */
typedef struct diffs {
    char why[WHY_MAX];
    size_t len;
    int n, more;
    zld_plan *p;
} diffs;

static void differ(diffs *d, const char *fmt, ...)
{
    char one[WHY_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(one, sizeof one, fmt, ap);
    va_end(ap);
    size_t k = strlen(one), sep = d->n > 0 ? 2 : 0;
    if (d->more > 0 || d->len + sep + k >= sizeof d->why) {
        if (d->n == 0) { /* the first one always shows, cut if it must */
            memcpy(d->why, one, sizeof d->why - 1);
            d->why[sizeof d->why - 1] = '\0';
            d->len = sizeof d->why - 1;
            d->n = 1;
        } else {
            d->more++;
        }
        return;
    }
    memcpy(d->why + d->len, "; ", sep);
    memcpy(d->why + d->len + sep, one, k + 1);
    d->len += sep + k;
    d->n++;
}

static void note(zld_plan *p, const char *fmt, ...)
{
    size_t at = strlen(p->note);
    if (at + 8 >= sizeof p->note)
        return;
    if (at > 0) {
        memcpy(p->note + at, "; ", 3);
        at += 2;
    }
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(p->note + at, sizeof p->note - at, fmt, ap);
    va_end(ap);
}

/* The shortest of %.15g, %.16g and %.17g that reads back as v, as
 * Python's repr does, for messages ("0.7", not "0.69999999999999996"). */
typedef struct dtext {
    char s[32];
} dtext;

static dtext num(double v)
{
    dtext t;
    for (int prec = 15; prec <= 17; prec++) {
        snprintf(t.s, sizeof t.s, "%.*g", prec, v);
        if (strtod(t.s, NULL) == v)
            break;
    }
    return t;
}

static int malformed(reader *r, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->bad, sizeof r->bad, fmt, ap);
    va_end(ap);
    return -1;
}

static json_object *field(json_object *o, const char *key)
{
    json_object *v = NULL;
    return json_object_object_get_ex(o, key, &v) ? v : NULL;
}

static int as_u64(json_object *v, const char *what, uint64_t *out, reader *r)
{
    if (!json_object_is_type(v, json_type_int) || json_object_get_int64(v) < 0)
        return malformed(r, "'%s' is %s, expected an integer >= 0", what,
                         json_object_to_json_string(v));
    *out = json_object_get_uint64(v);
    return 0;
}

/* An optional unsigned field: 1 when present (in *out), 0 when absent. */
static int opt_u64(json_object *o, const char *key, uint64_t *out, reader *r)
{
    json_object *v = field(o, key);
    if (v == NULL)
        return 0;
    return as_u64(v, key, out, r) < 0 ? -1 : 1;
}

static int as_double(json_object *v, const char *what, double *out, reader *r)
{
    if (!json_object_is_type(v, json_type_double) && !json_object_is_type(v, json_type_int))
        return malformed(r, "'%s' is %s, expected a number", what, json_object_to_json_string(v));
    *out = json_object_get_double(v);
    return 0;
}

/* A string field, or NULL for JSON null / absent (when allowed). */
static int as_string(json_object *v, const char *what, int nullable, const char **out, reader *r)
{
    if (v == NULL || json_object_is_type(v, json_type_null)) {
        *out = NULL;
        return nullable ? 0 : malformed(r, "'%s' is missing or null, expected a string", what);
    }
    if (!json_object_is_type(v, json_type_string))
        return malformed(r, "'%s' is %s, expected a string", what, json_object_to_json_string(v));
    *out = json_object_get_string(v);
    return 0;
}

static int as_bool(json_object *v, const char *what, int *out, reader *r)
{
    if (!json_object_is_type(v, json_type_boolean))
        return malformed(r, "'%s' is %s, expected true or false", what,
                         json_object_to_json_string(v));
    *out = json_object_get_boolean(v);
    return 0;
}

static int only_keys(json_object *o, const char *where, const char *const *keys, reader *r)
{
    json_object_object_foreach(o, k, v) {
        (void)v;
        int known = 0;
        for (size_t i = 0; keys[i] != NULL && !known; i++)
            known = strcmp(k, keys[i]) == 0;
        if (!known)
            return malformed(r, "%s has an unknown key '%s'", where, k);
    }
    return 0;
}

/* ------------------------------------------------------- options */

/* Pack mode's options: each one the state has must be this loader's; a
 * state of mode "pack" has them all. (A state without a mode, as a
 * binding rebuilds from options it was given again, has only those.) */
static int check_pack(json_object *root, diffs *d, reader *r)
{
    const zld_plan *p = d->p;
    json_object *m = field(root, "mode");
    const int saved_pack = m != NULL && json_object_is_type(m, json_type_string) &&
                           strcmp(json_object_get_string(m), "pack") == 0;
    static const char *const names[] = {"pack_policy", "pack_overlong"};
    const char *now_names[] = {zsm_pack_policy_name(p->packset.policy),
                               zsm_pack_overlong_name(p->packset.overlong)};
    for (size_t i = 0; i < 2; i++) {
        const char *was;
        if (field(root, names[i]) == NULL) {
            if (p->pack && saved_pack)
                differ(d, "%s: not in the state, '%s' now", names[i], now_names[i]);
            continue;
        }
        if (as_string(field(root, names[i]), names[i], 0, &was, r) < 0)
            return -1;
        if (!p->pack)
            differ(d, "%s: '%s' in the state, the loader is not in pack mode", names[i], was);
        else if (strcmp(was, now_names[i]) != 0)
            differ(d, "%s: '%s' in the state, '%s' now", names[i], was, now_names[i]);
    }
    static const char *const nums[] = {"pack_length", "pack_window"};
    const uint64_t now_nums[] = {p->packset.length, p->packset.window};
    for (size_t i = 0; i < 2; i++) {
        uint64_t was;
        int got = opt_u64(root, nums[i], &was, r);
        if (got < 0)
            return -1;
        if (!got) {
            if (p->pack && saved_pack)
                differ(d, "%s: not in the state, %" PRIu64 " now", nums[i], now_nums[i]);
        } else if (!p->pack) {
            differ(d, "%s: %" PRIu64 " in the state, the loader is not in pack mode", nums[i], was);
        } else if (was != now_nums[i]) {
            differ(d, "%s: %" PRIu64 " in the state, %" PRIu64 " now", nums[i], was, now_nums[i]);
        }
    }
    return 0;
}

static int check_options(json_object *root, diffs *d, const zld_stream *streams, reader *r)
{
    static const char *const keys[] = {"step", "seed", "mode", "batch_size", "rank",
                                       "world_size", "window", "flip", "fingerprint",
                                       "pack_policy", "pack_length", "pack_window",
                                       "pack_overlong", NULL};
    const zld_plan *p = d->p;
    if (only_keys(root, "the state", keys, r) < 0)
        return -1;
    const struct {
        const char *key;
        uint64_t now;
    } u[] = {{"seed", p->cfg.seed},
             {"batch_size", p->cfg.batch_size},
             {"rank", p->cfg.rank},
             {"world_size", p->cfg.world_size}};
    for (size_t i = 0; i < sizeof u / sizeof u[0]; i++) {
        uint64_t was;
        int got = opt_u64(root, u[i].key, &was, r);
        if (got < 0)
            return -1;
        if (got && was != u[i].now)
            differ(d, "%s: %" PRIu64 " in the state, %" PRIu64 " now", u[i].key, was, u[i].now);
    }
    const char *mode;
    if (field(root, "mode") != NULL) {
        if (as_string(field(root, "mode"), "mode", 0, &mode, r) < 0)
            return -1;
        if (strcmp(mode, mode_name(p)) != 0)
            differ(d, "mode: '%s' in the state, '%s' now", mode, mode_name(p));
    }
    uint64_t window;
    int got = opt_u64(root, "window", &window, r);
    if (got < 0)
        return -1;
    if (got && p->bucket && window != p->window)
        differ(d, "window: %" PRIu64 " in the state, %" PRIu64 " now", window, p->window);
    if (check_pack(root, d, r) < 0)
        return -1;
    /* Flips, by stream label. A state with a fingerprint lists every
     * flip (none: no "flip"); an older one never recorded them. */
    json_object *fl = field(root, "flip");
    if (fl != NULL && !json_object_is_type(fl, json_type_object))
        return malformed(r, "'flip' is %s, expected an object", json_object_to_json_string(fl));
    if (fl == NULL && field(root, "fingerprint") == NULL)
        return 0;
    for (size_t k = 0; k < p->opt.nflips; k++) {
        const char *name = zld__label(p, streams, p->opt.flips[k].stream);
        json_object *v = fl ? field(fl, name) : NULL;
        double was = 0;
        if (v == NULL)
            differ(d, "flip: stream '%s' is flipped with p %s now, not in the state", name,
                   num(p->opt.flips[k].p).s);
        else if (as_double(v, "flip", &was, r) < 0)
            return -1;
        else if (was != p->opt.flips[k].p)
            differ(d, "flip: stream '%s' with p %s in the state, %s now", name, num(was).s,
                   num(p->opt.flips[k].p).s);
    }
    if (fl != NULL) {
        json_object_object_foreach(fl, name, v) {
            (void)v;
            int now = 0;
            for (size_t k = 0; k < p->opt.nflips && !now; k++)
                now = strcmp(zld__label(p, streams, p->opt.flips[k].stream), name) == 0;
            if (!now)
                differ(d, "flip: stream '%s' is flipped in the state, not now", name);
        }
    }
    return 0;
}

/* ------------------------------------------------------ identities */

/* The records behind a saved identity, now: one store, or shards
 * [a, a + k) of a concatenation. */
typedef struct idrange {
    zrs_store *store;
    zrs_concat *c;
    size_t a, k;
} idrange;

static size_t rng_count(const idrange *g) { return g->store ? 1 : g->k; }

static zrs_store *rng_shard(const idrange *g, size_t i)
{
    return g->store ? g->store : zrs_concat_shard(g->c, g->a + i);
}

static const char *uuid_text(zrs_store *s, char t[ZRS_UUID_STR_LEN + 1])
{
    uint8_t u[ZRS_UUID_BYTES];
    if (zrs_get_uuid(s, u) != 1)
        return NULL;
    (void)zrs_uuid_str(u, t);
    return t;
}

/* Compare a saved identity ("uuid", or "shards" + "shards_id") with the
 * records now; `who` names them in messages. More shards now than saved
 * is growth (the caller sees it in the length). */
static int check_identity(json_object *e, const idrange *g, const char *who, diffs *d, reader *r)
{
    uint64_t k = 1;
    int got = opt_u64(e, "shards", &k, r);
    if (got < 0)
        return -1;
    if (k == 0)
        return malformed(r, "%s: 'shards' is 0", who);
    size_t now = rng_count(g);
    if (k == 1) {
        const char *was;
        char t[ZRS_UUID_STR_LEN + 1];
        if (as_string(field(e, "uuid"), "uuid", 1, &was, r) < 0)
            return -1;
        const char *is = uuid_text(rng_shard(g, 0), t);
        if (was == NULL && is == NULL)
            note(d->p, "%s has no uuid (a store written before uuids): only its length was "
                 "checked", who);
        else if (was == NULL)
            differ(d, "%s has uuid %s now and had none in the state: records were deleted "
                   "since", who, is);
        else if (is == NULL)
            differ(d, "%s had uuid %s in the state and has none now: it is another store", who,
                   was);
        else if (strcmp(was, is) != 0)
            differ(d, "%s: uuid %s in the state, %s now: it is another store, or records were "
                   "deleted since", who, was, is);
        return 0;
    }
    const char *was;
    if (as_string(field(e, "shards_id"), "shards_id", 0, &was, r) < 0)
        return -1;
    if (now < k) {
        differ(d, "%s: %" PRIu64 " shards in the state, %zu now", who, k, now);
        return 0;
    }
    char t[17];
    snprintf(t, sizeof t, "%016" PRIx64, shards_id(g->c, g->a, (size_t)k));
    if (strcmp(t, was) != 0)
        differ(d, "%s: its first %" PRIu64 " shards are not those of the state (other stores, "
               "another order, or records deleted since)", who, k);
    return 0;
}

/* A short identity of a saved source, or of one now, for telling a
 * reordered mixture from a changed one. */
static void saved_sig(json_object *e, char *out, size_t cap)
{
    json_object *u = field(e, "uuid"), *id = field(e, "shards_id");
    snprintf(out, cap, "%s", id ? json_object_get_string(id)
                           : u && json_object_is_type(u, json_type_string)
                               ? json_object_get_string(u) : "-");
}

static void now_sig(const idrange *g, char *out, size_t cap)
{
    char t[ZRS_UUID_STR_LEN + 1];
    if (rng_count(g) > 1)
        snprintf(out, cap, "%016" PRIx64, shards_id(g->c, g->a, g->k));
    else
        snprintf(out, cap, "%s", uuid_text(rng_shard(g, 0), t) ? t : "-");
}

static int check_mixture(json_object *m, const zld__mix_view *v, const char *who, diffs *d,
                         reader *r)
{
    static const char *const keys[] = {"seed", "sources", NULL};
    if (!json_object_is_type(m, json_type_object))
        return malformed(r, "%s: 'mixture' is not an object", who);
    if (only_keys(m, "a mixture", keys, r) < 0)
        return -1;
    uint64_t seed;
    if (opt_u64(m, "seed", &seed, r) != 1)
        return r->bad[0] ? -1 : malformed(r, "%s: the mixture has no 'seed'", who);
    if (seed != v->seed)
        differ(d, "%s: mixture seed %" PRIu64 " in the state, %" PRIu64 " now", who, seed,
               v->seed);
    json_object *src = field(m, "sources");
    if (src == NULL || !json_object_is_type(src, json_type_array))
        return malformed(r, "%s: the mixture's 'sources' is not an array", who);
    size_t n = json_object_array_length(src);
    if (n != v->nsources) {
        differ(d, "%s: %zu mixture sources in the state, %zu now", who, n, v->nsources);
        return 0;
    }
    /* The same sources in another order: say so, rather than every
     * field that then differs. */
    int same = 1, permuted = 1;
    for (size_t k = 0; k < n && permuted; k++) {
        char a[40], b[40];
        saved_sig(json_object_array_get_idx(src, k), a, sizeof a);
        idrange g = {NULL, v->all, v->shard_first[k], v->shard_first[k + 1] - v->shard_first[k]};
        now_sig(&g, b, sizeof b);
        same &= strcmp(a, b) == 0;
        int found = 0;
        for (size_t j = 0; j < n && !found; j++) {
            idrange h = {NULL, v->all, v->shard_first[j], v->shard_first[j + 1] - v->shard_first[j]};
            now_sig(&h, b, sizeof b);
            found = strcmp(a, b) == 0 && strcmp(a, "-") != 0;
        }
        permuted &= found;
    }
    if (!same && permuted) {
        differ(d, "%s: the mixture's sources are listed in another order than in the state", who);
        return 0;
    }
    for (size_t k = 0; k < n; k++) {
        json_object *e = json_object_array_get_idx(src, k);
        static const char *const skeys[] = {"weight", "mode", "length", "uuid", "shards",
                                            "shards_id", NULL};
        char w[400];
        snprintf(w, sizeof w, "%.300s: mixture source %zu", who, k);
        if (!json_object_is_type(e, json_type_object) || only_keys(e, w, skeys, r) < 0)
            return r->bad[0] ? -1 : malformed(r, "%s is not an object", w);
        double weight = 0;
        const char *mode = "";
        uint64_t len = 0;
        if (as_double(field(e, "weight"), "weight", &weight, r) < 0 ||
            as_string(field(e, "mode"), "mode", 0, &mode, r) < 0 ||
            opt_u64(e, "length", &len, r) != 1)
            return r->bad[0] ? -1 : malformed(r, "%s has no 'length'", w);
        if (weight != v->weights[k])
            differ(d, "%s: weight %s in the state, %s now", w, num(weight).s,
                   num(v->weights[k]).s);
        if (strcmp(mode, zsm_mode_name(v->modes[k])) != 0)
            differ(d, "%s: mode '%s' in the state, '%s' now", w, mode,
                   zsm_mode_name(v->modes[k]));
        if (len != v->lengths[k])
            differ(d, "%s: %" PRIu64 " records in the state, %" PRIu64 " now (a mixture does "
                   "not continue on grown or shrunk sources)", w, len, v->lengths[k]);
        idrange g = {NULL, v->all, v->shard_first[k], v->shard_first[k + 1] - v->shard_first[k]};
        if (check_identity(e, &g, w, d, r) < 0)
            return -1;
    }
    return 0;
}

/* Stream k's entry: name, identity, and its length into *len. */
static int check_stream(json_object *e, const zld_stream *streams, size_t k, uint64_t *len,
                        diffs *d, reader *r)
{
    static const char *const keys[] = {"name", "length", "uuid", "shards", "shards_id",
                                       "mixture", NULL};
    const zld_plan *p = d->p;
    const zld_stream *st = &streams[k];
    const char *label = zld__label(p, streams, k), *name;
    char who[300];
    snprintf(who, sizeof who, "stream %zu ('%.260s')", k, label);
    if (!json_object_is_type(e, json_type_object))
        return malformed(r, "%s is not an object in the state", who);
    if (only_keys(e, who, keys, r) < 0 || as_string(field(e, "name"), "name", 0, &name, r) < 0)
        return -1;
    if (opt_u64(e, "length", len, r) != 1)
        return r->bad[0] ? -1 : malformed(r, "%s has no 'length'", who);
    if (strcmp(name, label) != 0)
        differ(d, "stream %zu is named '%s' in the state, '%s' now", k, name, label);
    zrs_store *s = zld__stream_store(st);
    zrs_concat *c = zld__stream_concat(st);
    zld__mix_view v;
    json_object *m = field(e, "mixture");
    int saved_id = field(e, "uuid") != NULL || field(e, "shards") != NULL;
    if (s != NULL || c != NULL) {
        idrange g = {s, c, 0, c ? zrs_concat_count(c) : 1};
        if (m != NULL)
            differ(d, "%s is a mixture in the state, not now", who);
        else if (!saved_id)
            differ(d, "%s is a store now; the state does not name its records", who);
        else if (check_identity(e, &g, who, d, r) < 0)
            return -1;
    } else if (zld__stream_mixture(st, &v)) {
        if (m == NULL)
            differ(d, "%s is a mixture now, not in the state", who);
        else if (check_mixture(m, &v, who, d, r) < 0)
            return -1;
    } else if (saved_id || m != NULL) {
        differ(d, "%s is a store or mixture in the state; now it is a stream that cannot be "
               "identified", who);
    } /* else a generic stream both times: its name and length are all there is */
    return 0;
}

/* ---------------------------------------------------------- schedule */

/* (a * b) mod m without overflow (m > 0). */
static uint64_t mulmod(uint64_t a, uint64_t b, uint64_t m)
{
    uint64_t r = 0;
    a %= m;
    while (b > 0) {
        if (b & 1)
            r = r >= m - a ? r - (m - a) : r + a;
        a = a >= m - a ? a - (m - a) : a + a;
        b >>= 1;
    }
    return r;
}

/* Where a segment over `length` records starting a fresh cycle with
 * number `cycle` puts its base (cyclic and bucket modes), or 0 when that
 * overflows. */
static int cycle_base(uint64_t cycle, uint64_t length, uint64_t g, uint64_t *base)
{
    uint64_t per = length / g;
    if (per == 0 || cycle > UINT64_MAX / per)
        return -1;
    *base = cycle * per;
    return 0;
}

/* The segments of a loader resumed at `step` over `now` records, which
 * is more than the last segment's length (allow_grown): the cycle in
 * flight finishes on the old length, then a fresh cycle starts on the
 * new one (cyclic, bucket); iid draws from the new length at once;
 * sequential finishes its pass over the old records, then starts at
 * record 0 of the new ones; a finite pass keeps its old length. A
 * segment that has not started yet only changes its length. */
static int grow_schedule(zld_plan *p, uint64_t step, uint64_t now, reader *r)
{
    if (p->finite)
        return 0;
    const uint64_t g = p->cfg.batch_size * p->cfg.world_size;
    zld_segment *last = &p->seg[p->nseg - 1];
    const int cyclic = p->cfg.mode == ZSM_CYCLIC;
    if (last->from > step) { /* not started: take the new length now */
        if (cyclic) {
            uint64_t cycle = last->base / (last->length / g);
            if (cycle_base(cycle, now, g, &last->base) < 0)
                return malformed(r, "the step counter is too large to continue on %" PRIu64
                                 " records", now);
        }
        last->length = now;
        return 0;
    }
    const uint64_t local = step - last->from + last->base;
    zld_segment next = {step, now, 0};
    if (cyclic) {
        uint64_t per = last->length / g, into = local % per, cycle = local / per;
        if (into != 0) {
            next.from = step + (per - into);
            cycle++;
        }
        if (next.from < step || cycle_base(cycle, now, g, &next.base) < 0)
            return malformed(r, "the step counter is too large to continue on %" PRIu64
                             " records", now);
    } else if (p->cfg.mode == ZSM_IID) {
        next.base = step; /* draws keyed by the step, as before */
    } else {
        uint64_t at = mulmod(local, g, last->length); /* window start in the pass */
        if (at != 0) {
            uint64_t left = (last->length - at + g - 1) / g;
            if (step > UINT64_MAX - left)
                return malformed(r, "the step counter is too large to continue on %" PRIu64
                                 " records", now);
            next.from = step + left;
        }
    }
    if (next.from == step) {
        p->seg[0] = next;
        p->nseg = 1;
    } else {
        p->seg[0] = *last;
        p->seg[1] = next;
        p->nseg = 2;
    }
    return 0;
}

/* The saved schedule into p->seg, trimmed to the segments from `step` on;
 * `saved` is the streams' saved length (what the last segment covers). */
static int read_schedule(json_object *fp, zld_plan *p, uint64_t step, uint64_t saved, reader *r)
{
    json_object *sch = field(fp, "schedule");
    p->seg[0] = (zld_segment){0, saved, 0};
    p->nseg = 1;
    if (sch == NULL)
        return 0;
    size_t n = json_object_is_type(sch, json_type_array) ? json_object_array_length(sch) : 0;
    if (n == 0 || n > ZLD_MAX_SEGMENTS)
        return malformed(r, "'schedule' is not an array of 1 to %d segments", ZLD_MAX_SEGMENTS);
    for (size_t k = 0; k < n; k++) {
        static const char *const keys[] = {"from", "length", "base", NULL};
        json_object *e = json_object_array_get_idx(sch, k);
        zld_segment s;
        if (!json_object_is_type(e, json_type_object) || only_keys(e, "a segment", keys, r) < 0 ||
            opt_u64(e, "from", &s.from, r) != 1 || opt_u64(e, "length", &s.length, r) != 1 ||
            opt_u64(e, "base", &s.base, r) != 1)
            return r->bad[0] ? -1 : malformed(r, "schedule segment %zu lacks from, length or "
                                              "base", k);
        if (s.length == 0 || (k > 0 && s.from <= p->seg[k - 1].from) || (k == 0 && s.from > step))
            return malformed(r, "schedule segment %zu is out of order", k);
        p->seg[k] = s;
    }
    p->nseg = n;
    /* An endless schedule ends on the streams' length; a pass may keep an
     * older, shorter one (it continued on grown data). */
    if (p->seg[n - 1].length > saved || (!p->finite && p->seg[n - 1].length != saved))
        return malformed(r, "the schedule ends on %" PRIu64 " records, the streams have %" PRIu64,
                         p->seg[n - 1].length, saved);
    if (p->nseg == 2 && step >= p->seg[1].from) {
        p->seg[0] = p->seg[1];
        p->nseg = 1;
    }
    return 0;
}

/* -------------------------------------------------------- fingerprint */

/* The fingerprint's version and keys. */
static int check_fp_header(json_object *fp, reader *r)
{
    static const char *const keys[] = {"version", "streams", "pass", "bucket", "schedule", NULL};
    uint64_t version;
    if (!json_object_is_type(fp, json_type_object))
        return malformed(r, "'fingerprint' is not an object");
    if (opt_u64(fp, "version", &version, r) != 1)
        return r->bad[0] ? -1 : malformed(r, "the fingerprint has no 'version'");
    if (version != STATE_VERSION)
        return malformed(r, "state version %" PRIu64 ", this library reads version %d", version,
                         STATE_VERSION);
    return only_keys(fp, "the fingerprint", keys, r);
}

/* The saved streams against the loader's, and their one length (*saved).
 * 1 when the number of streams differs (noted; nothing more to compare). */
static int check_fp_streams(json_object *fp, const zld_stream *streams, uint64_t *saved,
                            diffs *d, reader *r)
{
    zld_plan *p = d->p;
    json_object *arr = field(fp, "streams");
    if (arr == NULL || !json_object_is_type(arr, json_type_array))
        return malformed(r, "the fingerprint's 'streams' is not an array");
    size_t n = json_object_array_length(arr);
    if (n != p->nstreams) {
        differ(d, "%zu streams in the state, %zu now", n, p->nstreams);
        return 1;
    }
    *saved = 0;
    for (size_t k = 0; k < n; k++) {
        uint64_t len;
        if (check_stream(json_object_array_get_idx(arr, k), streams, k, &len, d, r) < 0)
            return -1;
        if (k > 0 && len != *saved)
            return malformed(r, "the saved streams have unequal lengths");
        *saved = len;
    }
    return 0;
}

/* Pass options. */
static int check_fp_pass(json_object *fp, diffs *d, reader *r)
{
    zld_plan *p = d->p;
    json_object *ps = field(fp, "pass");
    if ((ps != NULL) != p->finite) {
        differ(d, ps ? "the state is of a finite pass, the loader is endless"
                     : "the state is of an endless loader, the loader is a finite pass");
        return 0;
    }
    if (ps == NULL)
        return 0;
    int shuffle = 0, drop_last = 0, even = 0;
    uint64_t epoch = 0;
    if (!json_object_is_type(ps, json_type_object) ||
        as_bool(field(ps, "shuffle"), "shuffle", &shuffle, r) < 0 ||
        as_bool(field(ps, "drop_last"), "drop_last", &drop_last, r) < 0 ||
        opt_u64(ps, "epoch", &epoch, r) != 1 ||
        (field(ps, "even_batches") && as_bool(field(ps, "even_batches"), "even_batches",
                                              &even, r) < 0))
        return r->bad[0] ? -1 : malformed(r, "'pass' lacks shuffle, drop_last or epoch");
    if (even != p->even)
        differ(d, "pass even_batches: %s in the state, %s now", even ? "true" : "false",
               p->even ? "true" : "false");
    if (shuffle != p->pass.shuffle)
        differ(d, "pass shuffle: %s in the state, %s now", shuffle ? "true" : "false",
               p->pass.shuffle ? "true" : "false");
    if (drop_last != p->pass.drop_last)
        differ(d, "pass drop_last: %s in the state, %s now", drop_last ? "true" : "false",
               p->pass.drop_last ? "true" : "false");
    if (epoch != p->pass.epoch)
        differ(d, "pass epoch: %" PRIu64 " in the state, %" PRIu64 " now", epoch,
               p->pass.epoch);
    return 0;
}

/* Bucket lengths: the saved digest covers the first `count`. */
static int check_fp_bucket(json_object *fp, diffs *d, reader *r)
{
    zld_plan *p = d->p;
    json_object *bk = field(fp, "bucket");
    if ((bk != NULL) != p->bucket) {
        differ(d, bk ? "the state is length-bucketed, the loader is not"
                     : "the loader is length-bucketed, the state is not");
        return 0;
    }
    if (bk == NULL)
        return 0;
    uint64_t count = 0;
    const char *was = "";
    if (opt_u64(bk, "count", &count, r) != 1 ||
        as_string(field(bk, "lengths"), "lengths", 0, &was, r) < 0)
        return r->bad[0] ? -1 : malformed(r, "'bucket' has no 'count'");
    char t[17];
    if (count > p->opt.bucket_count) {
        differ(d, "bucket lengths: %" PRIu64 " in the state, %" PRIu64 " given now", count,
               p->opt.bucket_count);
    } else {
        snprintf(t, sizeof t, "%016" PRIx64, lengths_id(p->opt.bucket_lengths, count));
        if (strcmp(t, was) != 0)
            differ(d, "bucket lengths: the lengths of the first %" PRIu64 " records differ "
                   "from the state's", count);
    }
    return 0;
}

/* The streams' length against the saved one, and from it the schedule
 * (continued on grown data when that is allowed). */
static int check_fp_length(json_object *fp, uint64_t step, uint64_t saved, diffs *d, reader *r)
{
    zld_plan *p = d->p;
    if (read_schedule(fp, p, step, saved, r) < 0)
        return -1;
    if (p->length < saved) {
        differ(d, "the streams hold %" PRIu64 " records now, %" PRIu64 " in the state: records "
               "were deleted since", p->length, saved);
    } else if (p->length > saved && p->pack) {
        differ(d, "the streams hold %" PRIu64 " records now, %" PRIu64 " in the state: the data "
               "grew since, and pack mode does not continue on grown data (its rows are planned "
               "over every document)", p->length, saved);
    } else if (p->length > saved && !(p->opt.resume_flags & ZLD_RESUME_ALLOW_GROWN)) {
        differ(d, "the streams hold %" PRIu64 " records now, %" PRIu64 " in the state: the data "
               "grew since; continuing on grown data must be asked for (allow_grown)",
               p->length, saved);
    } else if (p->length > saved) {
        if (grow_schedule(p, step, p->length, r) < 0)
            return -1;
        note(p, "continued on grown data: %" PRIu64 " records in the state, %" PRIu64 " now",
             saved, p->length);
    }
    return 0;
}

/* The saved fingerprint against the loader: header, streams, pass options,
 * bucket lengths, then length and schedule. -1 for a malformed state (r
 * says why); 0 otherwise, each difference noted in d. */
static int check_fingerprint(json_object *fp, const zld_stream *streams, uint64_t step,
                             diffs *d, reader *r)
{
    uint64_t saved = 0;
    if (check_fp_header(fp, r) < 0)
        return -1;
    int st = check_fp_streams(fp, streams, &saved, d, r);
    if (st != 0)
        return st < 0 ? -1 : 0;
    if (check_fp_pass(fp, d, r) < 0 || check_fp_bucket(fp, d, r) < 0)
        return -1;
    return check_fp_length(fp, step, saved, d, r);
}

int zld__state_resume(zld_plan *p, const zld_stream *streams)
{
    reader r = {{0}};
    diffs *d = calloc(1, sizeof *d);
    if (d == NULL)
        return zr_set_error(ZR_ENOMEM, "zld_create: out of memory checking the state");
    d->p = p;
    p->note[0] = '\0';
    int rc = ZR_OK;
    json_tokener *tok = json_tokener_new_ex(STATE_DEPTH);
    json_object *root = NULL;
    if (tok == NULL) {
        rc = zr_set_error(ZR_ENOMEM, "zld_create: out of memory parsing the state");
        goto done;
    }
    size_t n = strlen(p->opt.resume);
    root = n <= INT32_MAX ? json_tokener_parse_ex(tok, p->opt.resume, (int)n) : NULL;
    if (root == NULL || json_tokener_get_parse_end(tok) != n ||
        !json_object_is_type(root, json_type_object)) {
        rc = zr_set_error(ZR_EINVAL, "zld_create: resume: not a loader state (%s)",
                          root == NULL ? json_tokener_error_desc(json_tokener_get_error(tok))
                                       : "not one JSON object");
        goto done;
    }
    uint64_t step;
    if (opt_u64(root, "step", &step, &r) != 1) {
        rc = zr_set_error(ZR_EINVAL, "zld_create: resume: not a loader state (%s)",
                          r.bad[0] ? r.bad : "no 'step'");
        goto done;
    }
    if (p->opt.start_step != 0 && p->opt.start_step != step) {
        rc = zr_set_error(ZR_EINVAL, "zld_create: start_step %" PRIu64 " and the state's step %"
                          PRIu64 " disagree; give one of them", p->opt.start_step, step);
        goto done;
    }
    p->opt.start_step = step;
    json_object *fp = field(root, "fingerprint");
    if (check_options(root, d, streams, &r) < 0 ||
        (fp != NULL && check_fingerprint(fp, streams, step, d, &r) < 0)) {
        rc = zr_set_error(ZR_EINVAL, "zld_create: resume: not a loader state (%s)", r.bad);
        goto done;
    }
    if (fp == NULL)
        note(p, "the state has no fingerprint (saved by an older version): the streams' "
             "names, lengths and identities, flips and pass options were not checked");
    if (d->n > 0)
        rc = zr_set_error(ZR_EINVAL, "zld_create: resume: the state does not match this loader: "
                          "%s%s", d->why, d->more ? " (and more)" : "");
done:
    if (tok != NULL)
        json_tokener_free(tok);
    json_object_put(root);
    free(d);
    return rc;
}
