/*
 * util.c - errors, dtype and tag names, strict JSON, typed JSON, precision.
 */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "zmr_internal.h"

#define ZMR_STR2(x) #x
#define ZMR_STR(x) ZMR_STR2(x)

const char *zmrec_version(void)
{
    return ZMR_STR(ZMREC_VERSION_MAJOR) "." ZMR_STR(ZMREC_VERSION_MINOR) "." ZMR_STR(
        ZMREC_VERSION_PATCH);
}

zmr_status zmr_err(zmr_status st, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    zr_set_errorv(st, fmt, ap);
    va_end(ap);
    return st;
}

zmr_status zmr_err_prefix(zmr_status st, const char *prefix)
{
    zr_error_context("%s", prefix);
    return st;
}

const char *zmr_last_error(void) { return zr_last_error(); }

const char *zmr_strerror(int status) { return zr_strerror(status); }

void zmr_free(void *p) { free(p); }

uint64_t zmr_load_u64le(const unsigned char *p)
{
    uint64_t v = 0;
    for (int k = 7; k >= 0; k--)
        v = (v << 8) | p[k];
    return v;
}

/* ------------------------------------------------------------ names */

static const char *const dtype_names[ZMR_NDTYPES] = {
    "f64", "i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64", "bool", "string", "c64", "c128"};
static const size_t dtype_sizes[ZMR_NDTYPES] = {8, 1, 2, 4, 8, 1, 2, 4, 8, 1, 0, 8, 16};

const char *zmr_dtype_name(int dtype)
{
    return dtype >= 0 && dtype < ZMR_NDTYPES ? dtype_names[dtype] : NULL;
}

zmr_status zmr_dtype_parse(const char *name, zmr_dtype *out)
{
    if (name != NULL)
        for (int k = 0; k < ZMR_NDTYPES; k++)
            if (!strcmp(name, dtype_names[k])) {
                *out = (zmr_dtype)k;
                return ZMR_OK;
            }
    if (name && (!strcmp(name, "f16") || !strcmp(name, "f32")))
        return zmr_err(ZMR_EINVAL, "dtype '%s' is not in the column set (floats are f64 only)", name);
    return zmr_err(ZMR_EINVAL, "dtype '%.64s' is not in the column set "
                               "(f64 i8 i16 i32 i64 u8 u16 u32 u64 bool string c64 c128)",
                   name ? name : "(null)");
}

size_t zmr_dtype_itemsize(zmr_dtype dtype)
{
    return (int)dtype >= 0 && (int)dtype < ZMR_NDTYPES ? dtype_sizes[dtype] : 0;
}

static const char *const tag_names[ZMR_NTAGS] = {
    "bool", "i32", "i64", "u32", "u64", "f64", "string", "json",
    "bool3", "i32x3", "i64x3", "u32x3", "u64x3", "f64x3", "f64x6", "f64x9"};

const char *zmr_tag_name(int tag) { return tag >= 0 && tag < ZMR_NTAGS ? tag_names[tag] : NULL; }

zmr_status zmr_tag_parse(const char *name, zmr_tag *out)
{
    if (name != NULL)
        for (int k = 0; k < ZMR_NTAGS; k++)
            if (!strcmp(name, tag_names[k])) {
                *out = (zmr_tag)k;
                return ZMR_OK;
            }
    return zmr_err(ZMR_EINVAL, "meta type tag '%.64s' is not one of bool i32 i64 u32 u64 f64 "
                               "string json bool3 i32x3 i64x3 u32x3 u64x3 f64x3 f64x6 f64x9",
                   name ? name : "(null)");
}

/* ------------------------------------------------------------ strict JSON */

/* Decimal digits (optional '-') within [-2^63, 2^64)? */
static int int_token_fits(const char *s, size_t n)
{
    int neg = s[0] == '-';
    const char *d = s + neg;
    size_t nd = n - (size_t)neg;
    const char *lim = neg ? "9223372036854775808" : "18446744073709551615";
    size_t nl = strlen(lim);
    if (nd != nl)
        return nd < nl;
    return memcmp(d, lim, nl) <= 0;
}

/* json-c accepts bare NaN / Infinity even in strict mode and saturates
 * integers beyond 64 bits; this lexical pass refuses both, so what parses
 * is exactly what the text says. */
static zmr_status json_guard(const char *t, size_t len, const char *what, zmr_status bad)
{
    size_t i = 0;
    while (i < len) {
        char c = t[i];
        if (c == '\0')
            return zmr_err(bad, "%s: JSON holds a NUL byte at %zu", what, i);
        if (c == '"') {
            for (i++; i < len && t[i] != '"'; i++)
                if (t[i] == '\\')
                    i++;
            i++;
            continue;
        }
        if (c == '-' || (c >= '0' && c <= '9')) {
            size_t s = i, intlike = 1;
            while (i < len && (strchr("-+.eE0123456789", t[i]) != NULL || (t[i] >= 'a' && t[i] <= 'z') ||
                               (t[i] >= 'A' && t[i] <= 'Z'))) {
                if (strchr(".eE", t[i]))
                    intlike = 0;
                if ((t[i] >= 'a' && t[i] <= 'z') || (t[i] >= 'A' && t[i] <= 'Z'))
                    if (t[i] != 'e' && t[i] != 'E')
                        return zmr_err(bad, "%s: JSON has a non-number token at byte %zu "
                                            "(NaN / Infinity must be strings)", what, s);
                i++;
            }
            if (intlike && !int_token_fits(t + s, i - s))
                return zmr_err(bad, "%s: JSON integer %.*s at byte %zu is outside [-2^63, 2^64)",
                               what, (int)(i - s > 40 ? 40 : i - s), t + s, s);
            continue;
        }
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) {
            size_t s = i;
            while (i < len && ((t[i] >= 'a' && t[i] <= 'z') || (t[i] >= 'A' && t[i] <= 'Z')))
                i++;
            size_t n = i - s;
            if (!((n == 4 && !memcmp(t + s, "true", 4)) || (n == 5 && !memcmp(t + s, "false", 5)) ||
                  (n == 4 && !memcmp(t + s, "null", 4))))
                return zmr_err(bad, "%s: JSON has a bare token '%.*s' at byte %zu "
                                    "(NaN / Infinity must be strings)", what, (int)(n > 16 ? 16 : n),
                               t + s, s);
            continue;
        }
        i++;
    }
    return ZMR_OK;
}

zmr_status zmr_json_parse(const char *text, size_t len, const char *what, zmr_status bad,
                          json_object **out)
{
    *out = NULL;
    if (len > (size_t)INT32_MAX - 2)
        return zmr_err(bad, "%s: JSON text of %zu bytes is too long", what, len);
    zmr_status st = json_guard(text, len, what, bad);
    if (st < 0)
        return st;
    char *buf = malloc(len + 1);
    if (buf == NULL)
        return zmr_err(ZMR_ENOMEM, "%s: no memory for %zu bytes of JSON", what, len);
    memcpy(buf, text, len);
    buf[len] = '\0';
    json_tokener *tok = json_tokener_new_ex(64);
    if (tok == NULL) {
        free(buf);
        return zmr_err(ZMR_ENOMEM, "%s: no memory for a JSON tokener", what);
    }
    json_tokener_set_flags(tok, JSON_TOKENER_STRICT | JSON_TOKENER_VALIDATE_UTF8);
    /* len + 1: the NUL terminates a top-level number. */
    json_object *o = json_tokener_parse_ex(tok, buf, (int)len + 1);
    enum json_tokener_error e = json_tokener_get_error(tok);
    size_t end = json_tokener_get_parse_end(tok);
    json_tokener_free(tok);
    free(buf);
    if (e != json_tokener_success) {
        json_object_put(o);
        return zmr_err(bad, "%s: not strict UTF-8 JSON (%s near byte %zu)", what,
                       json_tokener_error_desc(e), end);
    }
    if (end < len) {
        json_object_put(o);
        return zmr_err(bad, "%s: trailing bytes after the JSON value at byte %zu", what, end);
    }
    *out = o;
    return ZMR_OK;
}

const char *zmr_json_text(json_object *o)
{
    if (o == NULL)
        return "null";
    return json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE);
}

json_object *zmr_json_double(double d)
{
    char buf[40];
    for (int prec = 15; prec <= 17; prec++) {
        snprintf(buf, sizeof buf, "%.*g", prec, d);
        if (strtod(buf, NULL) == d)
            break;
    }
    /* keep it a real in JSON: 3 -> 3.0 */
    if (strpbrk(buf, ".eEn") == NULL)
        strcat(buf, ".0");
    return json_object_new_double_s(d, buf);
}

/* ------------------------------------------------------------ typed JSON */

/* A decimal string in JSON's own integer grammar: optional '-', then "0" or
 * digits without a leading zero; no '+', spaces, fraction or exponent
 * ("0005" is refused). Writers emit exactly this form, so one integer has
 * one string spelling (see docs/MREC.md, "Typed meta"). */
static int parse_decimal(const char *s, int *neg, int64_t *i, uint64_t *u)
{
    *neg = 0;
    if (*s == '-') {
        *neg = 1;
        s++;
    }
    if (*s < '0' || *s > '9')
        return -1;
    if (s[0] == '0' && s[1] != '\0')
        return -1;
    uint64_t v = 0;
    for (; *s; s++) {
        if (*s < '0' || *s > '9')
            return -1;
        unsigned dgt = (unsigned)(*s - '0');
        if (v > (UINT64_MAX - dgt) / 10)
            return -1;
        v = v * 10 + dgt;
    }
    if (*neg) {
        if (v > (uint64_t)INT64_MAX + 1)
            return -1;
        *i = v == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)v;
        if (v == 0)
            *neg = 0, *u = 0;
    } else {
        *u = v;
    }
    return 0;
}

int zmr_json_int(json_object *o, int *neg, int64_t *i, uint64_t *u)
{
    if (json_object_is_type(o, json_type_int)) {
        int64_t v = json_object_get_int64(o);
        if (v < 0) {
            *neg = 1;
            *i = v;
        } else {
            *neg = 0;
            *u = json_object_get_uint64(o);
        }
        return 0;
    }
    if (json_object_is_type(o, json_type_string))
        return parse_decimal(json_object_get_string(o), neg, i, u);
    return -1;
}

int zmr_json_u64(json_object *o, uint64_t *u)
{
    int neg = 0;
    int64_t i;
    if (!json_object_is_type(o, json_type_int) || zmr_json_int(o, &neg, &i, u) < 0 || neg)
        return -1;
    return 0;
}

int zmr_json_f64(json_object *o, double *d)
{
    if (json_object_is_type(o, json_type_double)) {
        *d = json_object_get_double(o);
        return isfinite(*d) ? 0 : -1; /* 1e400: a finite number is required */
    }
    if (json_object_is_type(o, json_type_int)) {
        int neg;
        int64_t i;
        uint64_t u;
        zmr_json_int(o, &neg, &i, &u);
        *d = neg ? (double)i : (double)u;
        return 0;
    }
    if (json_object_is_type(o, json_type_string)) {
        const char *s = json_object_get_string(o);
        if (!strcmp(s, "NaN"))
            *d = NAN;
        else if (!strcmp(s, "Infinity"))
            *d = INFINITY;
        else if (!strcmp(s, "-Infinity"))
            *d = -INFINITY;
        else
            return -1;
        return 0;
    }
    return -1;
}

static size_t tag_len(zmr_tag t)
{
    switch (t) {
    case ZMR_TAG_BOOL3: case ZMR_TAG_I32X3: case ZMR_TAG_I64X3: case ZMR_TAG_U32X3:
    case ZMR_TAG_U64X3: case ZMR_TAG_F64X3: return 3;
    case ZMR_TAG_F64X6: return 6;
    case ZMR_TAG_F64X9: return 9;
    case ZMR_TAG_STRING: case ZMR_TAG_JSON: return 0;
    default: return 1;
    }
}

/* The scalar kind of a tag: 'b', 'i' (signed, with bits), 'u', 'f'. */
static char tag_kind(zmr_tag t, int *bits)
{
    *bits = 64;
    switch (t) {
    case ZMR_TAG_BOOL: case ZMR_TAG_BOOL3: return 'b';
    case ZMR_TAG_I32: case ZMR_TAG_I32X3: *bits = 32; return 'i';
    case ZMR_TAG_I64: case ZMR_TAG_I64X3: return 'i';
    case ZMR_TAG_U32: case ZMR_TAG_U32X3: *bits = 32; return 'u';
    case ZMR_TAG_U64: case ZMR_TAG_U64X3: return 'u';
    case ZMR_TAG_F64: case ZMR_TAG_F64X3: case ZMR_TAG_F64X6: case ZMR_TAG_F64X9: return 'f';
    case ZMR_TAG_STRING: return 's';
    default: return 'j';
    }
}

/* One element: fills the k-th slot of v when v != NULL. */
static zmr_status elem(zmr_tag tag, json_object *o, zmr_status bad, zmr_value *v, size_t k)
{
    int bits;
    char kind = tag_kind(tag, &bits);
    const char *tn = tag_names[tag];
    if (o == NULL && kind != 'j')
        return zmr_err(bad, "null where %s is declared", tn);
    if (kind == 'b') {
        if (!json_object_is_type(o, json_type_boolean))
            return zmr_err(bad, "%s value must be true/false, got %.60s", tn, zmr_json_text(o));
        if (v)
            v->b[k] = json_object_get_boolean(o);
        return ZMR_OK;
    }
    if (kind == 'i' || kind == 'u') {
        int neg = 0;
        int64_t i = 0;
        uint64_t u = 0;
        if (json_object_is_type(o, json_type_double))
            return zmr_err(bad, "a real (%.40s) where %s is declared is refused, not rounded",
                           zmr_json_text(o), tn);
        if (zmr_json_int(o, &neg, &i, &u) < 0)
            return zmr_err(bad, "%s value must be an integer number or a canonical decimal string (optional "
                           "'-', digits without leading zeros, within 64 bits), got %.60s",
                           tn, zmr_json_text(o));
        if (kind == 'u' && neg)
            return zmr_err(bad, "%s value %lld is negative", tn, (long long)i);
        if (kind == 'u' && bits == 32 && u > UINT32_MAX)
            return zmr_err(bad, "%s value %llu is out of range", tn, (unsigned long long)u);
        if (kind == 'i' && !neg && u > (uint64_t)(bits == 32 ? INT32_MAX : INT64_MAX))
            return zmr_err(bad, "%s value %llu is out of range", tn, (unsigned long long)u);
        if (kind == 'i' && neg && bits == 32 && i < INT32_MIN)
            return zmr_err(bad, "%s value %lld is out of range", tn, (long long)i);
        if (v) {
            if (kind == 'i')
                v->i[k] = neg ? i : (int64_t)u;
            else
                v->u[k] = u;
        }
        return ZMR_OK;
    }
    if (kind == 'f') {
        double d;
        if (zmr_json_f64(o, &d) < 0)
            return zmr_err(bad, "%s value must be a finite number or \"NaN\" / \"Infinity\" / "
                                "\"-Infinity\", got %.60s", tn, zmr_json_text(o));
        if (v)
            v->f[k] = d;
        return ZMR_OK;
    }
    if (kind == 's') {
        if (!json_object_is_type(o, json_type_string))
            return zmr_err(bad, "string value expected, got %.60s", zmr_json_text(o));
        if (v)
            v->text = json_object_get_string(o);
        return ZMR_OK;
    }
    if (v)
        v->text = zmr_json_text(o);
    return ZMR_OK;
}

static zmr_status typed(zmr_tag tag, json_object *o, zmr_status bad, zmr_value *v)
{
    if ((int)tag < 0 || (int)tag >= ZMR_NTAGS)
        return zmr_err(ZMR_EINVAL, "meta type tag %d is not one of the 16", (int)tag);
    size_t n = tag_len(tag);
    if (v) {
        memset(v, 0, sizeof *v);
        v->tag = tag;
        v->n = n;
    }
    if (n <= 1)
        return elem(tag, o, bad, v, 0);
    if (!json_object_is_type(o, json_type_array) || json_object_array_length(o) != n)
        return zmr_err(bad, "%s value must be an array of %zu elements, got %.60s", tag_names[tag], n,
                       zmr_json_text(o));
    for (size_t k = 0; k < n; k++) {
        zmr_status st = elem(tag, json_object_array_get_idx(o, k), bad, v, k);
        if (st < 0)
            return st;
    }
    return ZMR_OK;
}

zmr_status zmr_typed_check(zmr_tag tag, json_object *o, zmr_status bad) { return typed(tag, o, bad, NULL); }

zmr_status zmr_typed_to_value(zmr_tag tag, json_object *o, zmr_value *v) { return typed(tag, o, ZMR_ECORRUPT, v); }

static json_object *int_json(int neg, int64_t i, uint64_t u)
{
    const uint64_t lim = (uint64_t)1 << 53;
    char buf[32];
    if (neg) {
        if ((uint64_t)(-(i + 1)) + 1 <= lim)
            return json_object_new_int64(i);
        snprintf(buf, sizeof buf, "%lld", (long long)i);
        return json_object_new_string(buf);
    }
    if (u <= lim)
        return json_object_new_int64((int64_t)u);
    snprintf(buf, sizeof buf, "%llu", (unsigned long long)u);
    return json_object_new_string(buf);
}

static json_object *f64_json(double d)
{
    if (isnan(d))
        return json_object_new_string("NaN");
    if (isinf(d))
        return json_object_new_string(d > 0 ? "Infinity" : "-Infinity");
    return zmr_json_double(d);
}

static json_object *elem_json(const zmr_value *v, size_t k)
{
    int bits;
    switch (tag_kind(v->tag, &bits)) {
    case 'b': return json_object_new_boolean(v->b[k]);
    case 'i': return int_json(v->i[k] < 0, v->i[k], (uint64_t)v->i[k]);
    case 'u': return int_json(0, 0, v->u[k]);
    case 'f': return f64_json(v->f[k]);
    case 's': return json_object_new_string(v->text ? v->text : "");
    default: return NULL;
    }
}

json_object *zmr_typed_from_value(const zmr_value *v)
{
    size_t n = tag_len(v->tag);
    if (n <= 1)
        return elem_json(v, 0);
    json_object *a = json_object_new_array_ext((int)n);
    for (size_t k = 0; k < n; k++)
        json_object_array_add(a, elem_json(v, k));
    return a;
}

zmr_status zmr_typed_json_check(zmr_tag tag, const char *typed_json)
{
    if (typed_json == NULL)
        return zmr_err(ZMR_EINVAL, "typed JSON: NULL text");
    json_object *o;
    zmr_status st = zmr_json_parse(typed_json, strlen(typed_json), "typed JSON", ZMR_EINVAL, &o);
    if (st < 0)
        return st;
    st = zmr_typed_check(tag, o, ZMR_EINVAL);
    json_object_put(o);
    return st;
}

zmr_tag zmr_infer_tag(json_object *o)
{
    if (json_object_is_type(o, json_type_boolean))
        return ZMR_TAG_BOOL;
    if (json_object_is_type(o, json_type_int))
        return json_object_get_int64(o) < INT64_MAX || json_object_get_uint64(o) == (uint64_t)INT64_MAX
                   ? ZMR_TAG_I64
                   : ZMR_TAG_U64;
    if (json_object_is_type(o, json_type_double))
        return ZMR_TAG_F64;
    if (json_object_is_type(o, json_type_string))
        return ZMR_TAG_STRING;
    return ZMR_TAG_JSON;
}

zmr_status zmr_schema_meta_decl(json_object *decl, const char *key, zmr_tag *tag, json_object **fill,
                                bool *has_fill)
{
    *fill = NULL;
    bool hf = false;
    json_object *t = decl;
    if (json_object_is_type(decl, json_type_object)) {
        /* {"dtype": tag} is the layout's form; {"type": tag} and a bare tag
         * string are what this library wrote before, still read */
        if (!json_object_object_get_ex(decl, "dtype", &t) && !json_object_object_get_ex(decl, "type", &t))
            return zmr_err(ZMR_ECORRUPT, "sequence_schema.meta.%s: a declaration needs \"dtype\"", key);
        hf = json_object_object_get_ex(decl, "fill", fill);
    }
    if (!json_object_is_type(t, json_type_string) || zmr_tag_parse(json_object_get_string(t), tag) < 0)
        return zmr_err(ZMR_ECORRUPT, "sequence_schema.meta.%s: dtype must be one of the 16 tags, got %.60s",
                       key, t ? zmr_json_text(t) : "null");
    if (hf && *fill == NULL && *tag != ZMR_TAG_JSON)
        return zmr_err(ZMR_ECORRUPT, "sequence_schema.meta.%s: fill null is a fill for a json key only, "
                                     "this one is %s", key, zmr_tag_name(*tag));
    if (hf && *fill != NULL && zmr_typed_check(*tag, *fill, ZMR_ECORRUPT) < 0) {
        char pre[160];
        snprintf(pre, sizeof pre, "sequence_schema.meta.%.100s fill", key);
        return zmr_err_prefix(ZMR_ECORRUPT, pre);
    }
    if (has_fill)
        *has_fill = hf;
    return ZMR_OK;
}

/* ------------------------------------------------------------ precision */

double zmr_round_precision(double x, double p)
{
    int e;
    (void)frexp(p, &e);
    double q = ldexp(1.0, e - 1);
    if (!isfinite(x) || fabs(x) >= ldexp(q, 52))
        return x;
    /* rint: ties to even in the default rounding mode (round() would not) */
    return rint(x / q) * q;
}
