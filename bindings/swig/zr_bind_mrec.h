/*
 * zr_bind_mrec.h - molecular record collections (libzmrec) for the
 * bindings: reading a collection's frames column by column, and writing
 * one frame and record at a time.
 *
 * zmrec.h hands out structs of pointers (zmr_column) and takes enums and
 * arrays; the calls here take and return scalars, strings and one byte
 * buffer each, so one piece of C serves every language, and a binding
 * adds typemaps only (zr_bind_mrec.i wraps these functions for Lua and
 * Go). Every rule of the layout is checked by libzmrec; this file only
 * names frame kinds and dtypes and copies. Header-only.
 */
#ifndef ZR_BIND_MREC_H
#define ZR_BIND_MREC_H

#include <zmrec.h>
#include <zrerror_sys.h>
#include <string.h>

/* A new empty frame of kind "system" or "update" (ZR_EINVAL naming the
 * kind otherwise). Free it with zmr_frame_free. */
static inline int zr_bind_mrec_frame_create(zmr_frame **out, const char *kind)
{
    if (kind != NULL && strcmp(kind, "system") == 0)
        return zmr_frame_create(out, ZMR_FRAME_SYSTEM);
    if (kind != NULL && strcmp(kind, "update") == 0)
        return zmr_frame_create(out, ZMR_FRAME_UPDATE);
    return zr_set_error(ZR_EINVAL, "mrec frame: kind must be 'system' or 'update', got '%s'",
                        kind ? kind : "(null)");
}

/* Add a numeric / bool / complex column of dtype `dtype` ("f64", "i32",
 * ...; zmr_dtype_parse's names) to `block`: item_shape is its whole shape
 * (shape[0] the block's rows), data its nbytes little-endian bytes
 * (copied). No validity mask, no precision. The rules and errors are
 * zmr_frame_add_column's. */
static inline int zr_bind_mrec_add_column(zmr_frame *f, const char *block, const char *column,
                                          const char *dtype, const uint64_t *item_shape,
                                          size_t ndim, const void *data, uint64_t nbytes)
{
    zmr_dtype dt;
    int rc = zmr_dtype_parse(dtype, &dt);
    if (rc < 0)
        return rc;
    if (dt == ZMR_STRING)
        return zr_set_error(ZR_EINVAL, "mrec column %s/%s: string columns are not written "
                            "from bytes", block ? block : "", column ? column : "");
    return zmr_frame_add_column(f, block, column, dt, item_shape, ndim, data, nbytes, NULL, 0.0);
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

/* Record rec's number of trajectory frames and atoms (zmr_record_info). */
static inline int zr_bind_mrec_record_info(zmr_reader *r, uint64_t rec, uint64_t *n_frames,
                                           uint64_t *n_atoms)
{
    uint64_t first = 0;
    bool traj = false;
    return zmr_record_info(r, rec, &first, n_frames, n_atoms, &traj);
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

/* Number of elements of the column (prod(shape)). */
static inline uint64_t zr_bind_mrec_column_nelem(const zmr_frame *f, size_t b, size_t c)
{
    zmr_column col;
    return zr_bind_mrec_col_(f, b, c, &col) ? col.nelem : 0;
}

/* Copy the column's bytes into dst (dst_capacity >= its nbytes). */
static inline int zr_bind_mrec_column_copy(const zmr_frame *f, size_t b, size_t c, void *dst,
                                           uint64_t dst_capacity)
{
    zmr_column col;
    int rc = zmr_frame_column(f, b, c, &col);
    if (rc < 0)
        return rc;
    if (col.data == NULL)
        return zr_set_error(ZR_EINVAL, "mrec column %s: a string column has no bytes", col.name);
    if (col.nbytes > dst_capacity)
        return zr_set_error(ZR_EINVAL, "mrec column %s: %llu bytes, the buffer holds %llu",
                            col.name, (unsigned long long)col.nbytes,
                            (unsigned long long)dst_capacity);
    if (col.nbytes > 0)
        memcpy(dst, col.data, (size_t)col.nbytes);
    return ZR_OK;
}

#endif
