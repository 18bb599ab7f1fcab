/*
 * identity.c - store.zr: the store's type and its uuid, one msgpack map,
 * exactly
 *   dense  {"dtype": "<f4", "item_shape": [28, 28], "uuid": "<36 chars>"}
 *   ragged {"dtype": "<i4", "uuid": "<36 chars>"}
 * ("uuid" is absent in stores made before it existed). Written
 * canonically (keys in that order, str keys, smallest unsigned int
 * encodings) so that Python's msgpack.packb of the same dict gives the same
 * bytes; read strictly (any other key, type, dtype or trailing byte is
 * refused).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <msgpack.h>

#include "zr_platform.h"
#include "zrs_internal.h"

#define KEY_DTYPE "dtype"
#define KEY_SHAPE "item_shape"
#define KEY_UUID "uuid"

/* ---------------------------------------------------------------- uuid */

int zrs_uuid_str(const uint8_t uuid[ZRS_UUID_BYTES], char out[ZRS_UUID_STR_LEN + 1])
{
    static const char hex[] = "0123456789abcdef";
    if (uuid == NULL || out == NULL)
        return zr_set_error(ZR_EINVAL, "uuid_str: NULL %s", uuid == NULL ? "uuid" : "out");
    char *o = out;
    for (int i = 0; i < ZRS_UUID_BYTES; i++) {
        if (i == 4 || i == 6 || i == 8 || i == 10)
            *o++ = '-';
        *o++ = hex[uuid[i] >> 4];
        *o++ = hex[uuid[i] & 15];
    }
    *o = '\0';
    return ZR_OK;
}

static int hex_value(char c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
}

int zrs_uuid_parse(const char *str, size_t len, uint8_t out[ZRS_UUID_BYTES])
{
    if (str == NULL || out == NULL)
        return zr_set_error(ZR_EINVAL, "uuid_parse: NULL %s", str == NULL ? "str" : "out");
    if (len != ZRS_UUID_STR_LEN)
        return zr_set_error(ZR_EINVAL, "uuid_parse: %zu characters, expected %d "
                            "(8-4-4-4-12 lowercase hex digits)", len, ZRS_UUID_STR_LEN);
    size_t at = 0;
    for (int i = 0; i < ZRS_UUID_BYTES; i++) {
        if (i == 4 || i == 6 || i == 8 || i == 10) {
            if (str[at] != '-')
                return zr_set_error(ZR_EINVAL, "uuid_parse: expected '-' at character %zu", at);
            at++;
        }
        int hi = hex_value(str[at]), lo = hex_value(str[at + 1]);
        if (hi < 0 || lo < 0)
            return zr_set_error(ZR_EINVAL, "uuid_parse: character %zu is not a lowercase hex "
                                "digit", hi < 0 ? at : at + 1);
        out[i] = (uint8_t)(hi << 4 | lo);
        at += 2;
    }
    return ZR_OK;
}

int zrs__uuid_new(uint8_t out[ZRS_UUID_BYTES])
{
    int prc = zrp_random_bytes(out, ZRS_UUID_BYTES);
    if (prc != 0)
        return zr_set_error(ZR_EIO, "store.zr: cannot read the OS random source for a uuid: %s",
                            zr_os_strerror(prc));
    out[6] = (uint8_t)((out[6] & 0x0f) | 0x40); /* version 4: random */
    out[8] = (uint8_t)((out[8] & 0x3f) | 0x80); /* variant: RFC 4122 */
    return ZR_OK;
}

int zrs__identity_check(zrs_identity *id, char *why)
{
    size_t itemsize = zrs_dtype_itemsize(id->dtype);
    if (itemsize == 0) {
        snprintf(why, ZRS_WHY_MAX, "unknown dtype value %d", (int)id->dtype);
        return -1;
    }
    if (id->kind == ZRS_RAGGED) {
        id->ndim = 0;
        id->record_size = 0;
        return 0;
    }
    if (id->kind != ZRS_DENSE) {
        snprintf(why, ZRS_WHY_MAX, "unknown store kind %d", (int)id->kind);
        return -1;
    }
    if (id->ndim > ZRS_MAX_NDIM) {
        snprintf(why, ZRS_WHY_MAX, "item_shape has %zu dims, at most %d allowed",
                 id->ndim, ZRS_MAX_NDIM);
        return -1;
    }
    uint64_t size = itemsize;
    for (size_t i = 0; i < id->ndim; i++) {
        uint64_t d = id->shape[i];
        if (d == 0) {
            snprintf(why, ZRS_WHY_MAX,
                     "item_shape[%zu] is 0; every dim must be >= 1", i);
            return -1;
        }
        /* Checked against the limit at every step, so it cannot overflow:
         * size <= 2^31 and the product is tested by division. */
        if (d > ZRE_RECORD_MAX / size) {
            snprintf(why, ZRS_WHY_MAX,
                     "record size itemsize x prod(item_shape) exceeds the "
                     "record limit of %" PRIu64 " bytes (at item_shape[%zu] = %"
                     PRIu64 ")", (uint64_t)ZRE_RECORD_MAX, i, d);
            return -1;
        }
        size *= d;
    }
    id->record_size = size;
    return 0;
}

int zrs__identity_encode(const zrs_identity *id, int with_uuid, void **out, size_t *len)
{
    const int uuid = with_uuid && id->has_uuid;
    msgpack_sbuffer sbuf;
    msgpack_packer pk;
    msgpack_sbuffer_init(&sbuf);
    msgpack_packer_init(&pk, &sbuf, msgpack_sbuffer_write);

    const char *dt = zrs_dtype_str(id->dtype);
    int bad = 0;
    bad |= msgpack_pack_map(&pk, (id->kind == ZRS_DENSE ? 2 : 1) + (uuid ? 1 : 0));
    bad |= msgpack_pack_str(&pk, sizeof(KEY_DTYPE) - 1);
    bad |= msgpack_pack_str_body(&pk, KEY_DTYPE, sizeof(KEY_DTYPE) - 1);
    bad |= msgpack_pack_str(&pk, strlen(dt));
    bad |= msgpack_pack_str_body(&pk, dt, strlen(dt));
    if (id->kind == ZRS_DENSE) {
        bad |= msgpack_pack_str(&pk, sizeof(KEY_SHAPE) - 1);
        bad |= msgpack_pack_str_body(&pk, KEY_SHAPE, sizeof(KEY_SHAPE) - 1);
        bad |= msgpack_pack_array(&pk, id->ndim);
        /* pack_uint64 picks the smallest encoding (fixint, uint8, ...),
         * as Python's packer does. */
        for (size_t i = 0; i < id->ndim; i++)
            bad |= msgpack_pack_uint64(&pk, id->shape[i]);
    }
    if (uuid) {
        char text[ZRS_UUID_STR_LEN + 1];
        (void)zrs_uuid_str(id->uuid, text);
        bad |= msgpack_pack_str(&pk, sizeof(KEY_UUID) - 1);
        bad |= msgpack_pack_str_body(&pk, KEY_UUID, sizeof(KEY_UUID) - 1);
        bad |= msgpack_pack_str(&pk, ZRS_UUID_STR_LEN);
        bad |= msgpack_pack_str_body(&pk, text, ZRS_UUID_STR_LEN);
    }
    if (bad != 0) {
        msgpack_sbuffer_destroy(&sbuf);
        return zr_set_error(ZR_ENOMEM, "store.zr: out of memory encoding the identity");
    }
    *len = sbuf.size;
    *out = msgpack_sbuffer_release(&sbuf);
    return ZR_OK;
}

static int str_is(const msgpack_object *o, const char *s)
{
    size_t n = strlen(s);
    return o->type == MSGPACK_OBJECT_STR && o->via.str.size == n &&
           memcmp(o->via.str.ptr, s, n) == 0;
}

static const char *type_name(msgpack_object_type t)
{
    switch (t) {
    case MSGPACK_OBJECT_NIL: return "nil";
    case MSGPACK_OBJECT_BOOLEAN: return "bool";
    case MSGPACK_OBJECT_POSITIVE_INTEGER: return "int";
    case MSGPACK_OBJECT_NEGATIVE_INTEGER: return "negative int";
    case MSGPACK_OBJECT_FLOAT32:
    case MSGPACK_OBJECT_FLOAT64: return "float";
    case MSGPACK_OBJECT_STR: return "str";
    case MSGPACK_OBJECT_ARRAY: return "array";
    case MSGPACK_OBJECT_MAP: return "map";
    case MSGPACK_OBJECT_BIN: return "bin";
    case MSGPACK_OBJECT_EXT: return "ext";
    }
    return "unknown";
}

/* Bytes read from a (possibly damaged) store.zr, quoted for a message:
 * printable ASCII as is, a backslash doubled, anything else as \xNN, so a
 * message never carries raw control or non-UTF-8 bytes (a terminal or a
 * UTF-8 decoder would mangle them). At most `max_in` input bytes; "..."
 * marks a cut. `out` needs 4 * max_in + 4 bytes. */
static const char *escape_bytes(const char *p, size_t n, size_t max_in, char *out)
{
    static const char hex[] = "0123456789abcdef";
    char *o = out;
    size_t take = n > max_in ? max_in : n;
    for (size_t i = 0; i < take; i++) {
        unsigned char c = (unsigned char)p[i];
        if (c == '\\') {
            *o++ = '\\';
            *o++ = '\\';
        } else if (c >= 0x20 && c < 0x7f) {
            *o++ = (char)c;
        } else {
            *o++ = '\\';
            *o++ = 'x';
            *o++ = hex[c >> 4];
            *o++ = hex[c & 15];
        }
    }
    if (take < n) {
        memcpy(o, "...", 3);
        o += 3;
    }
    *o = '\0';
    return out;
}

/* Input bytes of a file-supplied string quoted in a reason. */
#define QUOTE_MAX 20

/* Fill id from the map; -1 with a reason on anything unexpected. */
/* The value of 'dtype': one of the dtype strings. */
static int read_dtype(const msgpack_object *v, zrs_identity *id, char *why)
{
    if (v->type != MSGPACK_OBJECT_STR) {
        snprintf(why, ZRS_WHY_MAX, "'dtype' is a %s, expected str", type_name(v->type));
        return -1;
    }
    for (int d = 0; d < ZRS_DTYPE_COUNT; d++) {
        if (str_is(v, zrs_dtype_str((zrs_dtype)d))) {
            id->dtype = (zrs_dtype)d;
            return 0;
        }
    }
    char q[4 * QUOTE_MAX + 4];
    snprintf(why, ZRS_WHY_MAX, "unsupported dtype '%s'",
             escape_bytes(v->via.str.ptr, v->via.str.size, QUOTE_MAX, q));
    return -1;
}

/* The value of 'item_shape': at most ZRS_MAX_NDIM non-negative ints. */
static int read_shape(const msgpack_object *v, zrs_identity *id, char *why)
{
    if (v->type != MSGPACK_OBJECT_ARRAY) {
        snprintf(why, ZRS_WHY_MAX, "'item_shape' is a %s, expected array", type_name(v->type));
        return -1;
    }
    if (v->via.array.size > ZRS_MAX_NDIM) {
        snprintf(why, ZRS_WHY_MAX, "'item_shape' has %" PRIu32 " dims, at most %d allowed",
                 v->via.array.size, ZRS_MAX_NDIM);
        return -1;
    }
    id->ndim = v->via.array.size;
    for (uint32_t j = 0; j < v->via.array.size; j++) {
        const msgpack_object *d = &v->via.array.ptr[j];
        if (d->type != MSGPACK_OBJECT_POSITIVE_INTEGER) {
            snprintf(why, ZRS_WHY_MAX,
                     "item_shape[%" PRIu32 "] is a %s, expected a "
                     "non-negative int", j, type_name(d->type));
            return -1;
        }
        id->shape[j] = d->via.u64;
    }
    return 0;
}

/* The value of 'uuid': the 36-character text form. */
static int read_uuid(const msgpack_object *v, zrs_identity *id, char *why)
{
    if (v->type != MSGPACK_OBJECT_STR) {
        snprintf(why, ZRS_WHY_MAX, "'uuid' is a %s, expected str", type_name(v->type));
        return -1;
    }
    if (zrs_uuid_parse(v->via.str.ptr, v->via.str.size, id->uuid) != ZR_OK) {
        char q[4 * QUOTE_MAX + 4];
        snprintf(why, ZRS_WHY_MAX, "'uuid' is '%s', expected 36 characters "
                 "8-4-4-4-12 of lowercase hex digits",
                 escape_bytes(v->via.str.ptr, v->via.str.size, QUOTE_MAX, q));
        return -1;
    }
    id->has_uuid = 1;
    return 0;
}

/* Mark key `name` seen; -1 (saying so) when it was seen before. */
static int first_time(int *seen, const char *name, char *why)
{
    if (*seen) {
        snprintf(why, ZRS_WHY_MAX, "duplicate key '%s'", name);
        return -1;
    }
    *seen = 1;
    return 0;
}

/* The identity map: str keys 'dtype' (required), 'item_shape' (dense
 * stores) and 'uuid', each once, and nothing else. */
static int read_map(const msgpack_object *root, zrs_identity *id, char *why)
{
    if (root->type != MSGPACK_OBJECT_MAP) {
        snprintf(why, ZRS_WHY_MAX, "expected a msgpack map, got %s",
                 type_name(root->type));
        return -1;
    }
    int have_dtype = 0, have_shape = 0, have_uuid = 0;
    const msgpack_object_map *m = &root->via.map;
    for (uint32_t i = 0; i < m->size; i++) {
        const msgpack_object *k = &m->ptr[i].key;
        const msgpack_object *v = &m->ptr[i].val;
        int rc;
        if (k->type != MSGPACK_OBJECT_STR) {
            snprintf(why, ZRS_WHY_MAX, "map key %" PRIu32 " is a %s, expected str",
                     i, type_name(k->type));
            return -1;
        }
        if (str_is(k, KEY_DTYPE)) {
            rc = first_time(&have_dtype, "dtype", why) < 0 ? -1 : read_dtype(v, id, why);
        } else if (str_is(k, KEY_SHAPE)) {
            rc = first_time(&have_shape, "item_shape", why) < 0 ? -1 : read_shape(v, id, why);
        } else if (str_is(k, KEY_UUID)) {
            rc = first_time(&have_uuid, "uuid", why) < 0 ? -1 : read_uuid(v, id, why);
        } else {
            char q[4 * QUOTE_MAX + 4];
            snprintf(why, ZRS_WHY_MAX,
                     "unexpected key '%s' (only 'dtype', 'item_shape' and 'uuid' "
                     "are allowed)", escape_bytes(k->via.str.ptr, k->via.str.size, QUOTE_MAX, q));
            rc = -1;
        }
        if (rc < 0)
            return -1;
    }
    if (!have_dtype) {
        snprintf(why, ZRS_WHY_MAX, "no 'dtype' key");
        return -1;
    }
    id->kind = have_shape ? ZRS_DENSE : ZRS_RAGGED;
    return zrs__identity_check(id, why);
}

/* Walk one msgpack object in buf[0, len) without allocating, checking
 * that every declared length and element count fits in the bytes that
 * follow (each element takes at least one byte). msgpack-c allocates a
 * container's elements by its declared count before reading them, so a
 * 5-byte "map of 2^32 entries" would otherwise ask for 128 GiB. Returns
 * the object's end offset, or 0 with `why` set. */
static size_t msgpack_bounded_end(const unsigned char *b, size_t len, char *why)
{
    uint64_t need = 1; /* objects still to read */
    size_t pos = 0;
    while (need > 0) {
        if (pos >= len || need > len - pos) {
            snprintf(why, ZRS_WHY_MAX, "truncated msgpack (%zu bytes; %llu more object(s) "
                     "declared than the bytes could hold)", len, (unsigned long long)need);
            return 0;
        }
        unsigned t = b[pos++];
        need--;
        uint64_t skip = 0, add = 0;
        unsigned lenbytes = 0;
        if (t <= 0x7f || t >= 0xe0 || t == 0xc0 || t == 0xc2 || t == 0xc3) {
            /* fixint, nil, bool */
        } else if (t <= 0x8f) {
            add = 2u * (t & 0x0f);
        } else if (t <= 0x9f) {
            add = t & 0x0f;
        } else if (t <= 0xbf) {
            skip = t & 0x1f;
        } else {
            switch (t) {
            case 0xc4: case 0xd9: lenbytes = 1; break;            /* bin8, str8 */
            case 0xc5: case 0xda: lenbytes = 2; break;            /* bin16, str16 */
            case 0xc6: case 0xdb: lenbytes = 4; break;            /* bin32, str32 */
            case 0xc7: lenbytes = 1; skip = 1; break;             /* ext8 (+type) */
            case 0xc8: lenbytes = 2; skip = 1; break;
            case 0xc9: lenbytes = 4; skip = 1; break;
            case 0xca: skip = 4; break;
            case 0xcb: skip = 8; break;
            case 0xcc: case 0xd0: skip = 1; break;
            case 0xcd: case 0xd1: skip = 2; break;
            case 0xce: case 0xd2: skip = 4; break;
            case 0xcf: case 0xd3: skip = 8; break;
            case 0xd4: skip = 2; break;
            case 0xd5: skip = 3; break;
            case 0xd6: skip = 5; break;
            case 0xd7: skip = 9; break;
            case 0xd8: skip = 17; break;
            case 0xdc: case 0xde: lenbytes = 2; break;            /* array16, map16 */
            case 0xdd: case 0xdf: lenbytes = 4; break;            /* array32, map32 */
            default:
                snprintf(why, ZRS_WHY_MAX, "not valid msgpack (byte 0x%02x at offset %zu)", t,
                         pos - 1);
                return 0;
            }
        }
        if (lenbytes) {
            if (len - pos < lenbytes) {
                snprintf(why, ZRS_WHY_MAX, "truncated msgpack (%zu bytes)", len);
                return 0;
            }
            uint64_t n = 0;
            for (unsigned k = 0; k < lenbytes; k++)
                n = n << 8 | b[pos + k];
            pos += lenbytes;
            if (t == 0xdc || t == 0xdd)
                add = n;
            else if (t == 0xde || t == 0xdf)
                add = 2 * n;
            else
                skip += n;
        }
        if (skip > len - pos) {
            snprintf(why, ZRS_WHY_MAX, "truncated msgpack (%zu bytes; an item at offset %zu "
                     "declares %llu bytes)", len, pos, (unsigned long long)skip);
            return 0;
        }
        pos += (size_t)skip;
        need += add;
    }
    return pos;
}

int zrs__identity_decode(const void *buf, size_t len, const char *file,
                         zrs_identity *out)
{
    {
        char bwhy[ZRS_WHY_MAX];
        if (len == 0)
            return zr_set_error(ZR_ENOTSTORE, "open: not a store: %s is empty", file);
        if (msgpack_bounded_end(buf, len, bwhy) == 0)
            return zr_set_error(ZR_ENOTSTORE, "open: not a store: %s is %s", file, bwhy);
    }
    char why[ZRS_WHY_MAX];
    zrs_identity id;
    memset(&id, 0, sizeof id);

    msgpack_unpacked res;
    msgpack_unpacked_init(&res);
    size_t off = 0;
    msgpack_unpack_return ret =
        msgpack_unpack_next(&res, (const char *)buf, len, &off);

    int rc = ZR_OK;
    if (ret == MSGPACK_UNPACK_NOMEM_ERROR) {
        rc = zr_set_error(ZR_ENOMEM, "open: out of memory decoding %s", file);
    } else if (len == 0) {
        rc = zr_set_error(ZR_ENOTSTORE, "open: not a store: %s is empty", file);
    } else if (ret == MSGPACK_UNPACK_CONTINUE) {
        rc = zr_set_error(ZR_ENOTSTORE,
                          "open: not a store: %s is truncated msgpack (%zu bytes)",
                          file, len);
    } else if (ret != MSGPACK_UNPACK_SUCCESS && ret != MSGPACK_UNPACK_EXTRA_BYTES) {
        rc = zr_set_error(ZR_ENOTSTORE, "open: not a store: %s is not valid msgpack",
                          file);
    } else if (off != len) {
        rc = zr_set_error(ZR_ENOTSTORE,
                          "open: not a store: %s has %zu trailing bytes after "
                          "the identity map", file, len - off);
    } else if (read_map(&res.data, &id, why) != 0) {
        rc = zr_set_error(ZR_ENOTSTORE, "open: not a store: %s: %s", file, why);
    } else {
        *out = id;
    }
    msgpack_unpacked_destroy(&res);
    return rc;
}

/* FNV-1a 32, never 0 (0 means "no tag" in meta.zr). */
static uint32_t fnv1a32(const void *buf, size_t len)
{
    const unsigned char *p = buf;
    uint32_t h = 0x811c9dc5u;
    for (size_t i = 0; i < len; i++) {
        h ^= p[i];
        h *= 0x01000193u;
    }
    return h ? h : 1u;
}

uint32_t zrs__identity_tag(const zrs_identity *id, const void *buf, size_t len)
{
    if (!id->has_uuid)
        return fnv1a32(buf, len);
    void *type = NULL;
    size_t tlen = 0;
    if (zrs__identity_encode(id, 0, &type, &tlen) != ZR_OK)
        return 0;
    uint32_t tag = fnv1a32(type, tlen);
    free(type);
    return tag;
}
