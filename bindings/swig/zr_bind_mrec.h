/*
 * zr_bind_mrec.h - molecular record collections (libzmrec) for the
 * bindings: reading a collection's frames column by column, and writing
 * one frame and record at a time.
 *
 * zmrec.h hands out structs of pointers (zmr_column) and takes enums and
 * arrays; the calls here take and return scalars, strings and one byte
 * buffer each, so one piece of C serves every language, and a binding
 * adds typemaps only (zr_bind_mrec.i wraps these functions for Lua and
 * Go). A collection's item source as loader streams and its conversion
 * into stores (the end of this file) serve Python too. Every rule of the layout is checked by libzmrec; this file only
 * names frame kinds and dtypes and copies. Header-only.
 */
#ifndef ZR_BIND_MREC_H
#define ZR_BIND_MREC_H

#include <zloader.h>
#include <zmrec.h>
#include <zrerror_sys.h>
#include "zr_bind_shards.h"
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A new empty frame of kind "system", "update", "index" (the
 * collection's own index columns, zmr_writer_set_index) or "ff" (the
 * force field, zmr_writer_set_ff); ZR_EINVAL naming the kind otherwise.
 * Free it with zmr_frame_free. */
static inline int zr_bind_mrec_frame_create(zmr_frame **out, const char *kind)
{
    static const char *const names[] = {"system", "update", "index", "ff"};
    static const zmr_frame_kind kinds[] = {ZMR_FRAME_SYSTEM, ZMR_FRAME_UPDATE, ZMR_FRAME_INDEX,
                                           ZMR_FRAME_FF};
    for (size_t k = 0; kind != NULL && k < sizeof names / sizeof names[0]; k++)
        if (strcmp(kind, names[k]) == 0)
            return zmr_frame_create(out, kinds[k]);
    return zr_set_error(ZR_EINVAL, "mrec frame: kind must be 'system', 'update', 'index' or 'ff', "
                        "got '%s'", kind ? kind : "(null)");
}

/* A validity mask as the bindings hand it: NULL (every row valid) or
 * exactly `rows` bytes of 0/1 (libzmrec checks the values). */
static inline int zr_bind_mrec_mask_(const char *block, const char *column, const void *mask,
                                     uint64_t mask_size, const uint64_t *item_shape, size_t ndim)
{
    if (mask == NULL || ndim == 0 || item_shape == NULL)
        return ZR_OK;
    if (mask_size != item_shape[0])
        return zr_set_error(ZR_EINVAL, "mrec column %s/%s: validity has %llu bytes, the column "
                            "has %llu rows (one byte 0/1 per row)", block ? block : "",
                            column ? column : "", (unsigned long long)mask_size,
                            (unsigned long long)item_shape[0]);
    return ZR_OK;
}

/* Add a numeric / bool / complex column of dtype `dtype` ("f64", "i32",
 * ...; zmr_dtype_parse's names) to `block`: item_shape is its whole shape
 * (shape[0] the block's rows), data its nbytes little-endian bytes
 * (copied). mask: NULL, or one byte 0/1 per row (0: the row is null);
 * mask_size must then be shape[0]. precision: 0 for none, else the f64
 * column's precision (system and index frames). The rules and errors are
 * zmr_frame_add_column's. */
static inline int zr_bind_mrec_add_column(zmr_frame *f, const char *block, const char *column,
                                          const char *dtype, const uint64_t *item_shape,
                                          size_t ndim, const void *data, uint64_t nbytes,
                                          const void *mask, uint64_t mask_size, double precision)
{
    zmr_dtype dt;
    int rc = zmr_dtype_parse(dtype, &dt);
    if (rc < 0)
        return rc;
    if (dt == ZMR_STRING)
        return zr_set_error(ZR_EINVAL, "mrec column %s/%s: string columns are not written "
                            "from bytes (use the string column call)", block ? block : "",
                            column ? column : "");
    if ((rc = zr_bind_mrec_mask_(block, column, mask, mask_size, item_shape, ndim)) < 0)
        return rc;
    return zmr_frame_add_column(f, block, column, dt, item_shape, ndim, data, nbytes,
                                (const uint8_t *)mask, precision);
}

/* Length in bytes of the UTF-8 sequence starting at s (at most n bytes
 * there), 0 when it is not well-formed UTF-8 (overlongs, surrogates and
 * code points past U+10FFFF refused, as a strict JSON parser does). */
static inline size_t zr_bind_utf8_len_(const unsigned char *s, size_t n)
{
    unsigned c = s[0];
    size_t len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (len == 0 || len > n || (len == 2 && c < 0xC2) || (len == 4 && c > 0xF4))
        return 0;
    for (size_t k = 1; k < len; k++)
        if ((s[k] & 0xC0) != 0x80)
            return 0;
    if (len == 3 && ((c == 0xE0 && s[1] < 0xA0) || (c == 0xED && s[1] >= 0xA0)))
        return 0;
    if (len == 4 && ((c == 0xF0 && s[1] < 0x90) || (c == 0xF4 && s[1] >= 0x90)))
        return 0;
    return len;
}

/* Write p[0..len) as a JSON string (quotes included) at out, which has
 * room for 6 * len + 2 bytes: the bytes written, or -(k + 1) when byte k
 * starts a sequence that is not UTF-8 or is a NUL. */
static inline long zr_bind_json_quote_(char *out, const unsigned char *p, size_t len)
{
    size_t n = 0;
    out[n++] = '"';
    for (size_t k = 0; k < len;) {
        size_t u = zr_bind_utf8_len_(p + k, len - k);
        if (u == 0 || p[k] == 0)
            return -(long)k - 1;
        if (p[k] == '"' || p[k] == '\\') {
            out[n++] = '\\';
            out[n++] = (char)p[k];
        } else if (p[k] < 0x20) {
            n += (size_t)snprintf(out + n, 7, "\\u%04x", p[k]);
        } else {
            memcpy(out + n, p + k, u);
            n += u;
        }
        k += u;
    }
    out[n++] = '"';
    return (long)n;
}

/* Add a string column from packed entries: prod(shape) entries in
 * row-major order, each a u32 little-endian byte length then that many
 * UTF-8 bytes, or the length 0xFFFFFFFF alone for a null entry. mask as
 * in zr_bind_mrec_add_column. ZR_EINVAL naming the entry for a short or
 * overlong buffer, an entry that is not UTF-8, or holds a NUL byte; the
 * other rules are zmr_frame_add_string_column's. */
static inline int zr_bind_mrec_add_string_column(zmr_frame *f, const char *block,
                                                 const char *column, const uint64_t *item_shape,
                                                 size_t ndim, const void *data, uint64_t nbytes,
                                                 const void *mask, uint64_t mask_size)
{
    const char *b = block ? block : "", *c = column ? column : "";
    int rc = zr_bind_mrec_mask_(b, c, mask, mask_size, item_shape, ndim);
    if (rc < 0)
        return rc;
    uint64_t nelem = 1;
    for (size_t k = 0; k < ndim && item_shape != NULL; k++)
        nelem = item_shape[k] != 0 && nelem > UINT64_MAX / item_shape[k] ? UINT64_MAX
                                                                           : nelem * item_shape[k];
    if (nelem > nbytes / 4)
        return zr_set_error(ZR_EINVAL, "mrec column %s/%s: the shape holds %llu strings, %llu "
                            "bytes hold at most %llu (4 length bytes each)", b, c,
                            (unsigned long long)nelem, (unsigned long long)nbytes,
                            (unsigned long long)(nbytes / 4));
    const unsigned char *p = (const unsigned char *)data;
    /* JSON text: at most 6 bytes per input byte (\u00XX) plus 7 per entry. */
    size_t cap = 3 + (size_t)nbytes * 6 + (size_t)nelem * 7, n = 0;
    char *json = (char *)malloc(cap);
    if (json == NULL)
        return zr_set_error(ZR_ENOMEM, "mrec column %s/%s: no memory for %llu strings", b, c,
                            (unsigned long long)nelem);
    json[n++] = '[';
    uint64_t pos = 0;
    for (uint64_t e = 0; e < nelem && rc == ZR_OK; e++) {
        if (nbytes - pos < 4) {
            rc = zr_set_error(ZR_EINVAL, "mrec column %s/%s: the strings end before entry %llu "
                              "of %llu", b, c, (unsigned long long)e, (unsigned long long)nelem);
            break;
        }
        uint32_t len = (uint32_t)p[pos] | (uint32_t)p[pos + 1] << 8 | (uint32_t)p[pos + 2] << 16 |
                       (uint32_t)p[pos + 3] << 24;
        pos += 4;
        if (e > 0)
            json[n++] = ',';
        if (len == 0xFFFFFFFFu) {
            memcpy(json + n, "null", 4);
            n += 4;
            continue;
        }
        if (nbytes - pos < len) {
            rc = zr_set_error(ZR_EINVAL, "mrec column %s/%s: entry %llu says %u bytes, %llu are "
                              "left", b, c, (unsigned long long)e, len,
                              (unsigned long long)(nbytes - pos));
            break;
        }
        long q = zr_bind_json_quote_(json + n, p + pos, len);
        if (q < 0) {
            rc = zr_set_error(ZR_EINVAL, "mrec column %s/%s: entry %llu is not UTF-8 text "
                              "(byte %ld is 0x%02x)", b, c, (unsigned long long)e, -q - 1,
                              p[pos + (uint64_t)(-q - 1)]);
            break;
        }
        n += (size_t)q;
        pos += len;
    }
    if (rc == ZR_OK && pos != nbytes)
        rc = zr_set_error(ZR_EINVAL, "mrec column %s/%s: %llu bytes left after the %llu strings "
                          "of shape", b, c, (unsigned long long)(nbytes - pos),
                          (unsigned long long)nelem);
    if (rc == ZR_OK) {
        json[n++] = ']';
        json[n] = '\0';
        rc = zmr_frame_add_string_column(f, block, column, item_shape, ndim, json,
                                         (const uint8_t *)mask);
    }
    free(json);
    return rc;
}

/* Set meta `key` of a system or update frame: tag a meta type name ("f64",
 * "i64", "string", "json", "f64x3", ...; zmr_tag_parse's), typed_json its
 * typed-JSON text. Rules and errors: zmr_frame_set_meta's. */
static inline int zr_bind_mrec_set_meta(zmr_frame *f, const char *key, const char *tag,
                                        const char *typed_json)
{
    zmr_tag t;
    int rc = zmr_tag_parse(tag, &t);
    if (rc < 0)
        return rc;
    return zmr_frame_set_meta(f, key, t, typed_json);
}

/* Set meta `key` to the string data[0..nbytes) (UTF-8 text, no NUL),
 * tag "string": the JSON quoting is done here. */
static inline int zr_bind_mrec_set_meta_text(zmr_frame *f, const char *key, const void *data,
                                             uint64_t nbytes)
{
    char *json = (char *)malloc((size_t)nbytes * 6 + 3);
    if (json == NULL)
        return zr_set_error(ZR_ENOMEM, "mrec meta %s: no memory", key ? key : "");
    long q = zr_bind_json_quote_(json, (const unsigned char *)data, (size_t)nbytes);
    int rc;
    if (q < 0) {
        rc = zr_set_error(ZR_EINVAL, "mrec meta %s: the value is not UTF-8 text (byte %ld is "
                          "0x%02x)", key ? key : "", -q - 1,
                          ((const unsigned char *)data)[-q - 1]);
    } else {
        json[q] = '\0';
        rc = zmr_frame_set_meta(f, key, ZMR_TAG_STRING, json);
    }
    free(json);
    return rc;
}

/* v as JSON text in out (at least 40 bytes), written as Python's repr
 * writes a float (the shortest digits that read back the same, fixed
 * notation for exponents -4..15, ".0" on whole numbers), so a value
 * written from any language is the same bytes; NaN and the infinities as
 * the layout's strings "NaN", "Infinity", "-Infinity". */
static inline void zr_bind_json_f64_(double v, char *out)
{
    if (v != v || v > 1.7976931348623157e308 || v < -1.7976931348623157e308) {
        strcpy(out, v != v ? "\"NaN\"" : v > 0 ? "\"Infinity\"" : "\"-Infinity\"");
        return;
    }
    char e[40], digits[24];
    int p = 1;
    for (; p < 17; p++) {
        snprintf(e, sizeof e, "%.*e", p - 1, v);
        if (strtod(e, NULL) == v)
            break;
    }
    snprintf(e, sizeof e, "%.*e", p - 1, v);
    const char *q = e;
    size_t n = 0, nd = 0;
    if (*q == '-')
        out[n++] = *q++;
    for (; *q != 'e'; q++)
        if (*q != '.')
            digits[nd++] = *q;
    int x = atoi(q + 1);
    while (nd > 1 && digits[nd - 1] == '0')
        nd--;
    if (x >= -4 && x < 16) {
        if (x < 0) {
            out[n++] = '0';
            out[n++] = '.';
            for (int k = 0; k < -x - 1; k++)
                out[n++] = '0';
            for (size_t k = 0; k < nd; k++)
                out[n++] = digits[k];
        } else {
            for (int k = 0; k <= x; k++)
                out[n++] = (size_t)k < nd ? digits[k] : '0';
            out[n++] = '.';
            if ((size_t)x + 1 >= nd)
                out[n++] = '0';
            for (size_t k = (size_t)x + 1; k < nd; k++)
                out[n++] = digits[k];
        }
        out[n] = '\0';
        return;
    }
    out[n++] = digits[0];
    if (nd > 1) {
        out[n++] = '.';
        for (size_t k = 1; k < nd; k++)
            out[n++] = digits[k];
    }
    snprintf(out + n, 16, "e%c%02d", x < 0 ? '-' : '+', x < 0 ? -x : x);
}

/* Set meta `key` of a numeric or bool tag from binary values: data holds
 * 1 value (a scalar tag) or 3 / 6 / 9 (a vector tag) as the tag's element
 * kind reads them: f64 tags little-endian f64, signed integer tags i64,
 * unsigned ones u64, bool tags one byte 0/1. The typed JSON is written
 * here (floats as zr_bind_json_f64_, integers beyond 2^53 as decimal
 * strings), so every language writes the same text; the count and ranges
 * are zmr_frame_set_meta's rules. */
static inline int zr_bind_mrec_set_meta_values(zmr_frame *f, const char *key, const char *tag,
                                               const void *data, uint64_t nbytes)
{
    zmr_tag t;
    int rc = zmr_tag_parse(tag, &t);
    if (rc < 0)
        return rc;
    const char *name = zmr_tag_name(t);
    char kind = name[0]; /* 'f', 'i', 'u' or 'b' */
    bool vector = t >= ZMR_TAG_BOOL3;
    size_t item = kind == 'b' ? 1 : 8;
    if (kind == 's' || kind == 'j')
        return zr_set_error(ZR_EINVAL, "mrec meta %s: tag %s takes text, not values", key ? key : "",
                            name);
    if (nbytes % item != 0 || nbytes == 0 || nbytes / item > 9 || (!vector && nbytes != item))
        return zr_set_error(ZR_EINVAL, "mrec meta %s: %llu bytes are not %s values of %zu bytes",
                            key ? key : "", (unsigned long long)nbytes, name, item);
    char json[9 * 42 + 3];
    size_t n = 0, count = (size_t)(nbytes / item);
    const unsigned char *p = (const unsigned char *)data;
    if (vector)
        json[n++] = '[';
    for (size_t k = 0; k < count; k++) {
        if (k > 0)
            json[n++] = ',';
        if (kind == 'b') {
            n += (size_t)snprintf(json + n, 8, "%s", p[k] == 0 ? "false" : p[k] == 1 ? "true" : "2");
            continue;
        }
        uint64_t u;
        memcpy(&u, p + 8 * k, 8);
        if (kind == 'f') {
            double d;
            memcpy(&d, &u, 8);
            zr_bind_json_f64_(d, json + n);
        } else if (kind == 'i') {
            int64_t i = (int64_t)u;
            bool big = i > (int64_t)1 << 53 || i < -((int64_t)1 << 53);
            snprintf(json + n, 34, big ? "\"%lld\"" : "%lld", (long long)i);
        } else {
            snprintf(json + n, 34, u > (uint64_t)1 << 53 ? "\"%llu\"" : "%llu", (unsigned long long)u);
        }
        n += strlen(json + n);
    }
    if (vector)
        json[n++] = ']';
    json[n] = '\0';
    return zmr_frame_set_meta(f, key, t, json);
}

/* Set the cell of a system frame or update: data holds 12 little-endian
 * f64 (nbytes 96): the 3 x 3 vectors row-major (the lattice vectors are
 * its COLUMNS, zmr_box) then the origin. periodic: bit k set when axis k
 * is periodic (0..7); cell_defined 0 or 1. Rules: zmr_frame_set_box's. */
static inline int zr_bind_mrec_set_box(zmr_frame *f, const void *data, uint64_t nbytes,
                                       unsigned periodic, unsigned cell_defined)
{
    if (data == NULL || nbytes != 12 * sizeof(double))
        return zr_set_error(ZR_EINVAL, "mrec box: %llu bytes, want 96 (9 vectors and 3 origin "
                            "f64)", (unsigned long long)nbytes);
    if (periodic > 7 || cell_defined > 1)
        return zr_set_error(ZR_EINVAL, "mrec box: periodic must be 0..7 (a bit per axis) and "
                            "cell_defined 0 or 1, got %u and %u", periodic, cell_defined);
    zmr_box box;
    memcpy(box.vectors, data, 9 * sizeof(double));
    memcpy(box.origin, (const char *)data + 9 * sizeof(double), 3 * sizeof(double));
    for (int k = 0; k < 3; k++)
        box.boundary[k] = (periodic >> k) & 1u;
    box.cell_defined = cell_defined != 0;
    return zmr_frame_set_box(f, &box);
}

/* What a frame holds besides its blocks, as bits: 1 a step, 2 a time,
 * 4 a box, 8 the box's cell_defined, 16/32/64 axes 0/1/2 periodic. */
static inline uint64_t zr_bind_mrec_frame_flags(const zmr_frame *f)
{
    int64_t step;
    double t;
    zmr_box box;
    uint64_t out = 0;
    if (f == NULL)
        return 0;
    if (zmr_frame_get_step(f, &step))
        out |= 1;
    if (zmr_frame_get_time(f, &t))
        out |= 2;
    if (zmr_frame_get_box(f, &box)) {
        out |= 4 | (box.cell_defined ? 8 : 0);
        for (int k = 0; k < 3; k++)
            out |= box.boundary[k] ? (uint64_t)16 << k : 0;
    }
    return out;
}

/* The frame's step (0 without one) and time (0.0 without one). */
static inline int64_t zr_bind_mrec_frame_step(const zmr_frame *f)
{
    int64_t step = 0;
    return f != NULL && zmr_frame_get_step(f, &step) ? step : 0;
}

static inline double zr_bind_mrec_frame_time(const zmr_frame *f)
{
    double t = 0.0;
    return f != NULL && zmr_frame_get_time(f, &t) ? t : 0.0;
}

/* The box's 12 f64 (vectors row-major, origin) into dst (96 bytes);
 * ZR_ERANGE when the frame has no box. */
static inline int zr_bind_mrec_frame_box(const zmr_frame *f, void *dst, uint64_t dst_capacity)
{
    zmr_box box;
    if (f == NULL || !zmr_frame_get_box(f, &box))
        return zr_set_error(ZR_ERANGE, "mrec frame: no box");
    if (dst_capacity < 12 * sizeof(double))
        return zr_set_error(ZR_EINVAL, "mrec box: the buffer holds %llu bytes, 96 needed",
                            (unsigned long long)dst_capacity);
    memcpy(dst, box.vectors, 9 * sizeof(double));
    memcpy((char *)dst + 9 * sizeof(double), box.origin, 3 * sizeof(double));
    return ZR_OK;
}

/* The frame's header (compact JSON: meta, meta_types, blocks with their
 * targets, attributes, structural_shape and column precision), owned by
 * the frame; NULL with a detail on failure. */
static inline const char *zr_bind_mrec_frame_header(zmr_frame *f)
{
    return f != NULL ? zmr_frame_header_json(f) : NULL;
}

/* Start the next record: meta_json its meta document (NULL or "" for {}),
 * system a system frame or NULL (not taken: free it after the call). */
static inline int zr_bind_mrec_begin_record(zmr_writer *w, const char *meta_json,
                                            zmr_frame *system)
{
    uint64_t index = 0;
    if (meta_json != NULL && meta_json[0] == '\0')
        meta_json = NULL;
    return zmr_writer_begin_record(w, meta_json, system, &index);
}

/* Record rec's index row (zmr_record_info): its first global frame, its
 * number of trajectory frames and atoms, and 1 when it has a trajectory
 * (also one of zero frames), else 0. */
static inline int zr_bind_mrec_record_info(zmr_reader *r, uint64_t rec, uint64_t *first_frame,
                                           uint64_t *n_frames, uint64_t *n_atoms,
                                           uint64_t *has_trajectory)
{
    bool traj = false;
    int rc = zmr_record_info(r, rec, first_frame, n_frames, n_atoms, &traj);
    *has_trajectory = traj ? 1 : 0;
    return rc;
}

/* Read one frame: which is "system" (record rec's, *out NULL when it has
 * none), "update" (update k of rec as stored: the blocks that changed),
 * "frame" (frame k of rec resolved), "ff" (the force field, NULL when
 * none) or "index" (the index frame: the collection's own columns and
 * the binding's four). ZR_EINVAL naming `which` otherwise. */
static inline int zr_bind_mrec_read(zmr_reader *r, const char *which, uint64_t rec, uint64_t k,
                                    zmr_frame **out)
{
    *out = NULL;
    if (which != NULL && strcmp(which, "system") == 0)
        return zmr_read_system(r, rec, out);
    if (which != NULL && strcmp(which, "update") == 0)
        return zmr_read_update(r, rec, k, out);
    if (which != NULL && strcmp(which, "frame") == 0)
        return zmr_read_frame(r, rec, k, out);
    if (which != NULL && strcmp(which, "ff") == 0)
        return zmr_read_ff(r, out);
    if (which != NULL && strcmp(which, "index") == 0)
        return zmr_read_index(r, out);
    return zr_set_error(ZR_EINVAL, "mrec read: which must be 'system', 'update', 'frame', 'ff' "
                        "or 'index', got '%s'", which ? which : "(null)");
}

/* Record rec's meta document (UTF-8 JSON) copied into dst when it fits
 * (dst_capacity >= *meta_size): *meta_size is its length in bytes
 * either way, so a caller with too small a buffer calls again. */
static inline int zr_bind_mrec_record_meta(zmr_reader *r, uint64_t rec, void *dst,
                                           uint64_t dst_capacity, uint64_t *meta_size)
{
    char *json = NULL;
    int rc = zmr_read_record_meta(r, rec, &json);
    if (rc < 0)
        return rc;
    size_t n = strlen(json);
    *meta_size = (uint64_t)n;
    if (n <= dst_capacity && n > 0)
        memcpy(dst, json, n);
    zmr_free(json);
    return ZR_OK;
}

/* Column c of block b (the orders of zmr_frame_block_name and
 * zmr_frame_column): ZR_ERANGE naming the position if there is none.
 * The accessors below give 0 / NULL for a position this refuses. */
static inline int zr_bind_mrec_column_check(const zmr_frame *f, size_t b, size_t c)
{
    zmr_column col;
    return zmr_frame_column(f, b, c, &col);
}

static inline const zmr_column *zr_bind_mrec_col_(const zmr_frame *f, size_t b, size_t c,
                                                 zmr_column *col)
{
    return f != NULL && zmr_frame_column(f, b, c, col) == 0 ? col : NULL;
}

/* Its name, dtype name ("f64"), ndim, dimension k, and bytes (0 for a
 * string column). Owned by the frame. */
static inline const char *zr_bind_mrec_column_name(const zmr_frame *f, size_t b, size_t c)
{
    zmr_column col;
    return zr_bind_mrec_col_(f, b, c, &col) ? col.name : NULL;
}

static inline const char *zr_bind_mrec_column_dtype(const zmr_frame *f, size_t b, size_t c)
{
    zmr_column col;
    return zr_bind_mrec_col_(f, b, c, &col) ? zmr_dtype_name(col.dtype) : NULL;
}

static inline size_t zr_bind_mrec_column_ndim(const zmr_frame *f, size_t b, size_t c)
{
    zmr_column col;
    return zr_bind_mrec_col_(f, b, c, &col) ? col.ndim : 0;
}

static inline uint64_t zr_bind_mrec_column_dim(const zmr_frame *f, size_t b, size_t c, size_t k)
{
    zmr_column col;
    return zr_bind_mrec_col_(f, b, c, &col) && k < col.ndim ? col.shape[k] : 0;
}

static inline uint64_t zr_bind_mrec_column_nbytes(const zmr_frame *f, size_t b, size_t c)
{
    zmr_column col;
    return zr_bind_mrec_col_(f, b, c, &col) && col.data != NULL ? col.nbytes : 0;
}

/* A string column's element k (row-major), NULL for a null entry, a
 * numeric column or k past the end. */
static inline const char *zr_bind_mrec_column_string(const zmr_frame *f, size_t b, size_t c,
                                                     uint64_t k)
{
    zmr_column col;
    if (zr_bind_mrec_col_(f, b, c, &col) == NULL || col.strings == NULL || k >= col.nelem)
        return NULL;
    return col.strings[k];
}

/* 1 when a string column's element k is null, else 0. */
static inline uint64_t zr_bind_mrec_column_is_null(const zmr_frame *f, size_t b, size_t c,
                                                   uint64_t k)
{
    zmr_column col;
    return zr_bind_mrec_col_(f, b, c, &col) && col.strings != NULL && k < col.nelem &&
           col.strings[k] == NULL;
}

/* Number of elements of the column (prod(shape)). */
static inline uint64_t zr_bind_mrec_column_nelem(const zmr_frame *f, size_t b, size_t c)
{
    zmr_column col;
    return zr_bind_mrec_col_(f, b, c, &col) ? col.nelem : 0;
}

/* Copy column c of block b into dst: its validity mask (ZR_ERANGE when
 * it has none) or its bytes (ZR_EINVAL for a string column). */
static inline int zr_bind_mrec_copy_(const zmr_frame *f, size_t b, size_t c, bool mask, void *dst,
                                     uint64_t dst_capacity)
{
    zmr_column col;
    int rc = zmr_frame_column(f, b, c, &col);
    if (rc < 0)
        return rc;
    const void *src = mask ? (const void *)col.validity : col.data;
    uint64_t n = mask ? col.shape[0] : col.nbytes;
    if (src == NULL)
        return zr_set_error(mask ? ZR_ERANGE : ZR_EINVAL, "mrec column %s: %s", col.name,
                            mask ? "no validity mask" : "a string column has no bytes");
    if (n > dst_capacity)
        return zr_set_error(ZR_EINVAL, "mrec column %s: %llu %s, the buffer holds %llu", col.name,
                            (unsigned long long)n, mask ? "mask bytes" : "bytes",
                            (unsigned long long)dst_capacity);
    if (n > 0)
        memcpy(dst, src, (size_t)n);
    return ZR_OK;
}

/* Rows of the column's validity mask: shape[0] when it has one, 0 when
 * every row is valid (no mask). */
static inline uint64_t zr_bind_mrec_column_nvalid(const zmr_frame *f, size_t b, size_t c)
{
    zmr_column col;
    return zr_bind_mrec_col_(f, b, c, &col) && col.validity != NULL ? col.shape[0] : 0;
}

/* Copy the column's validity mask (one byte 0/1 per row) into dst. */
static inline int zr_bind_mrec_column_validity(const zmr_frame *f, size_t b, size_t c, void *dst,
                                               uint64_t dst_capacity)
{
    return zr_bind_mrec_copy_(f, b, c, true, dst, dst_capacity);
}

/* The column's declared precision, 0 when none. */
static inline double zr_bind_mrec_column_precision(const zmr_frame *f, size_t b, size_t c)
{
    zmr_column col;
    return zr_bind_mrec_col_(f, b, c, &col) ? col.precision : 0.0;
}

/* Copy the column's bytes into dst (dst_capacity >= its nbytes). */
static inline int zr_bind_mrec_column_copy(const zmr_frame *f, size_t b, size_t c, void *dst,
                                           uint64_t dst_capacity)
{
    return zr_bind_mrec_copy_(f, b, c, false, dst, dst_capacity);
}

/* ================================================ item sources as loader streams
 *
 * A collection as loader streams straight from LMDB (zmr_source, see
 * zmrec.h "item sources"), and its conversion into stores: the one
 * implementation the Python, Lua and Go bindings reach. A
 * zr_bind_mrec_source wraps a zmr_source with the per-stream user
 * pointers the loader's callbacks get, and a lifetime: a loader reading
 * it holds it (zld_stream's hooks), so zr_bind_mrec_source_free under a
 * live loader only closes it: the loader's reads then fail with
 * ZR_ECLOSED naming the collection, and the last of the owner and the
 * loaders frees it. */

typedef struct zr_bind_mrec_source zr_bind_mrec_source;

typedef struct zr_bind_mrec_sstream {
    zr_bind_mrec_source *owner;
    size_t which;
} zr_bind_mrec_sstream;

struct zr_bind_mrec_source {
    zmr_source *src;
    size_t nstreams;
    zr_bind_mrec_sstream *streams;
    char *path;
    _Atomic long refs;  /* the owner's (until zr_bind_mrec_source_free) + loaders' */
    _Atomic int closed; /* the owner let go */
};

static inline void zr_bind_mrec_source_unref_(zr_bind_mrec_source *s)
{
    if (atomic_fetch_sub(&s->refs, 1) != 1)
        return;
    zmr_source_free(s->src);
    free(s->streams);
    free(s->path);
    free(s);
}

/* The owner's end (NULL and a second call: no-op): frees the source now,
 * or, while loaders read it, once the last of them is closed; their reads
 * fail with ZR_ECLOSED from now on. */
static inline void zr_bind_mrec_source_free(zr_bind_mrec_source *s)
{
    if (s == NULL || atomic_exchange(&s->closed, 1))
        return;
    zr_bind_mrec_source_unref_(s);
}

/* 1 once zr_bind_mrec_source_free was called (NULL: 1). */
static inline int zr_bind_mrec_source_is_closed(const zr_bind_mrec_source *s)
{
    return s == NULL || atomic_load(&((zr_bind_mrec_source *)s)->closed);
}

static inline int zr_bind_mrec_closed_(const zr_bind_mrec_source *s)
{
    return zr_set_error(ZR_ECLOSED, "mrec source '%s' was closed while a loader read it", s->path);
}

/* zmr_source_open with the scalar names as an array (the Python glue). */
static inline int zr_bind_mrec_source_open_v(zr_bind_mrec_source **out, const char *path,
                                             unsigned flags, const char *block, const char *columns,
                                             const char *const *scalars, size_t nscalars,
                                             int include_systems)
{
    if (out == NULL)
        return zr_set_error(ZR_EINVAL, "mrec source: out is NULL");
    *out = NULL;
    for (size_t k = 0; k < nscalars && scalars != NULL; k++)
        if (scalars[k] != NULL && (!strcmp(scalars[k], "positions") || !strcmp(scalars[k], "record")))
            return zr_set_error(ZR_EINVAL, "mrec source: scalar name '%s' collides with a stream name",
                                scalars[k]);
    zr_bind_mrec_source *s = (zr_bind_mrec_source *)calloc(1, sizeof *s);
    if (s == NULL)
        return zr_set_error(ZR_ENOMEM, "mrec source: out of memory");
    atomic_init(&s->refs, 1);
    atomic_init(&s->closed, 0);
    if (path == NULL || (s->path = (char *)malloc(strlen(path) + 1)) == NULL) {
        free(s);
        return path ? zr_set_error(ZR_ENOMEM, "mrec source: out of memory")
                    : zr_set_error(ZR_EINVAL, "mrec source: path is NULL");
    }
    strcpy(s->path, path);
    int rc = zmr_source_open(&s->src, path, flags, block, columns, scalars, nscalars,
                             include_systems != 0);
    if (rc == ZR_OK) {
        s->nstreams = zmr_source_nstreams(s->src);
        s->streams = (zr_bind_mrec_sstream *)calloc(s->nstreams, sizeof *s->streams);
        if (s->streams == NULL)
            rc = zr_set_error(ZR_ENOMEM, "mrec source: out of memory");
        for (size_t k = 0; rc == ZR_OK && k < s->nstreams; k++) {
            s->streams[k].owner = s;
            s->streams[k].which = k;
        }
    }
    if (rc < 0) {
        zr_bind_mrec_source_free(s);
        return rc;
    }
    *out = s;
    return ZR_OK;
}

/* The same with the scalar names as a set of names (zr_bind_set_add_name;
 * NULL: none), for the bindings without an array typemap. */
static inline int zr_bind_mrec_source_open(zr_bind_mrec_source **out, const char *path,
                                           unsigned flags, const char *block, const char *columns,
                                           const zr_bind_set *scalars, int include_systems)
{
    void **names = NULL;
    size_t n = scalars ? scalars->n : 0;
    if (scalars != NULL) {
        int rc = zr_bind_set_pointers(scalars, ZR_BIND_PATH, "mrec scalars", &names);
        if (rc < 0)
            return rc;
    }
    int rc = zr_bind_mrec_source_open_v(out, path, flags, block, columns, (const char *const *)names, n,
                                        include_systems);
    free(names);
    return rc;
}

static inline uint64_t zr_bind_mrec_source_length(const zr_bind_mrec_source *s)
{
    return s ? zmr_source_length(s->src) : 0;
}

static inline size_t zr_bind_mrec_source_nstreams(const zr_bind_mrec_source *s)
{
    return s ? s->nstreams : 0;
}

/* Stream k's name as zmr_source_stream_name, except stream 0, which the
 * bindings call "positions"; NULL past the streams. */
static inline const char *zr_bind_mrec_source_stream_name(const zr_bind_mrec_source *s, size_t k)
{
    return s == NULL || k >= s->nstreams ? NULL : k == 0 ? "positions" : zmr_source_stream_name(s->src, k);
}

/* Stream k's dtype name: "f64", "u64" or "i64" (NULL past the streams). */
static inline const char *zr_bind_mrec_source_stream_dtype(const zr_bind_mrec_source *s, size_t k)
{
    return s == NULL || k >= s->nstreams ? NULL : zmr_dtype_name(zmr_source_stream_dtype(s->src, k));
}

static inline int zr_bind_mrec_gather_(void *user, const uint64_t *index, uint64_t count, void *dst,
                                       uint64_t cap, const uint64_t *bounds)
{
    const zr_bind_mrec_sstream *ss = (const zr_bind_mrec_sstream *)user;
    if (atomic_load(&ss->owner->closed))
        return zr_bind_mrec_closed_(ss->owner);
    return zmr_source_gather(ss->owner->src, ss->which, index, count, dst, cap, bounds);
}

static inline int zr_bind_mrec_sizes_(void *user, const uint64_t *index, uint64_t count, uint64_t *sizes)
{
    const zr_bind_mrec_source *s = ((const zr_bind_mrec_sstream *)user)->owner;
    if (atomic_load(&((zr_bind_mrec_source *)s)->closed))
        return zr_bind_mrec_closed_(s);
    return zmr_source_sizes(s->src, index, count, sizes);
}

/* The loader's hold on the source (zld_stream's lifetime hooks). */
static inline int zr_bind_mrec_hold_(void *user)
{
    zr_bind_mrec_source *s = ((zr_bind_mrec_sstream *)user)->owner;
    if (atomic_load(&s->closed))
        return zr_set_error(ZR_ECLOSED, "mrec source '%s' is closed", s->path);
    atomic_fetch_add(&s->refs, 1);
    return ZR_OK;
}

static inline void zr_bind_mrec_release_(void *user)
{
    zr_bind_mrec_source_unref_(((zr_bind_mrec_sstream *)user)->owner);
}

static inline int zr_bind_mrec_is_closed_(void *user, char *msg, size_t cap)
{
    const zr_bind_mrec_source *s = ((const zr_bind_mrec_sstream *)user)->owner;
    if (!atomic_load(&((zr_bind_mrec_source *)s)->closed))
        return 0;
    snprintf(msg, cap, "mrec source '%s' was closed while this loader read it", s->path);
    return 1;
}

/* Stream `which` of s as a loader stream (s borrowed). Its name is the
 * columns string for stream 0 ("x,y,z"), else the stream's name. */
static inline int zr_bind_mrec_stream(zld_stream *out, zr_bind_mrec_source *s, size_t which)
{
    if (out == NULL || s == NULL || which >= s->nstreams)
        return zr_set_error(ZR_EINVAL, "mrec stream: no source, or stream %zu past its %zu streams", which,
                            s ? s->nstreams : 0);
    memset(out, 0, sizeof *out);
    out->user = &s->streams[which];
    out->name = zmr_source_stream_name(s->src, which);
    out->length = zmr_source_length(s->src);
    out->kind = which == 0 ? ZLD_STREAM_RAGGED : ZLD_STREAM_DENSE;
    out->record_size = which == 0 ? 0 : 8;
    out->gather = zr_bind_mrec_gather_;
    out->sizes = which == 0 ? zr_bind_mrec_sizes_ : NULL;
    out->hold = zr_bind_mrec_hold_;
    out->release = zr_bind_mrec_release_;
    out->closed = zr_bind_mrec_is_closed_;
    return ZR_OK;
}

/* Append stream `which` of s to a loader's stream set (s borrowed). */
static inline int zr_bind_set_add_mrec(zr_bind_set *set, zr_bind_mrec_source *s, size_t which)
{
    zld_stream st;
    int rc = zr_bind_mrec_stream(&st, s, which);
    return rc < 0 ? rc : zr_bind_set_add_stream(set, &st);
}

/* Convert the source into stores under out_dir: "positions" (ragged f64,
 * one record per item, the packed stream 0), "record" (dense u64) and one
 * dense store of scalars per scalar, named by it ("step" i64, others f64),
 * every one of zr_bind_mrec_source_length records in item order. codec:
 * "raw", "zstd" or "auto" (NULL: "zstd"). Through zld_write_stores: the
 * stores are complete or none is at its path (see there); ZR_EEXIST when
 * one exists, ZR_EINVAL for another codec, an item's read error naming
 * the store, record and frame. */
static inline int zr_bind_mrec_to_stores(zr_bind_mrec_source *s, const char *out_dir, const char *codec)
{
    if (s == NULL || out_dir == NULL || *out_dir == '\0')
        return zr_set_error(ZR_EINVAL, "mrec to stores: no source or no output directory");
    int c = codec == NULL || !strcmp(codec, "zstd") ? (int)ZRE_CODEC_ZSTD
          : !strcmp(codec, "raw") ? (int)ZRE_CODEC_RAW : !strcmp(codec, "auto") ? ZLD_CODEC_AUTO : -2;
    if (c == -2)
        return zr_set_error(ZR_EINVAL, "mrec to stores: codec '%s': expected 'raw', 'zstd' or 'auto'", codec);
    size_t n = s->nstreams, dn = strlen(out_dir);
    zld_stream *st = (zld_stream *)calloc(n, sizeof *st);
    zld_store_spec *sp = (zld_store_spec *)calloc(n, sizeof *sp);
    char **paths = (char **)calloc(n, sizeof *paths);
    int rc = st && sp && paths ? ZR_OK : zr_set_error(ZR_ENOMEM, "mrec to stores: out of memory");
    for (size_t k = 0; rc == ZR_OK && k < n; k++) {
        const char *name = zr_bind_mrec_source_stream_name(s, k);
        zmr_dtype dt = zmr_source_stream_dtype(s->src, k);
        size_t nn = strlen(name);
        if ((paths[k] = (char *)malloc(dn + nn + 2)) == NULL) {
            rc = zr_set_error(ZR_ENOMEM, "mrec to stores: out of memory");
            break;
        }
        memcpy(paths[k], out_dir, dn);
        paths[k][dn] = '/';
        memcpy(paths[k] + dn + 1, name, nn + 1);
        sp[k].path = paths[k];
        sp[k].dtype = dt == ZMR_U64 ? ZRS_UINT64 : dt == ZMR_I64 ? ZRS_INT64 : ZRS_FLOAT64;
        rc = zr_bind_mrec_stream(&st[k], s, k);
    }
    if (rc == ZR_OK)
        rc = zld_write_stores(st, sp, n, c);
    for (size_t k = 0; paths && k < n; k++)
        free(paths[k]);
    free(paths);
    free(st);
    free(sp);
    return rc;
}

#endif
