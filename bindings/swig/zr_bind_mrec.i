/*
 * zr_bind_mrec.i - molecular record collections (libzmrec) for the Lua
 * and Go bindings, through the shared C of zr_bind_mrec.h (see there) and
 * the zmrec.h calls that need no typemap beyond a binding's out-handles
 * (zmr_reader **, zmr_writer **, zmr_frame **), its path argument, its
 * (item_shape, ndim), (data, nbytes) and (dst, dst_capacity) pairs, an
 * optional (mask, mask_size) pair and the u64 out-parameters of
 * zr_bind_mrec_record_info. Included by a binding's .i after zr_core.i.
 */

%{
#include "zr_bind_mrec.h"
%}

%nodefaultctor zmr_reader;
%nodefaultdtor zmr_reader;
%nodefaultctor zmr_writer;
%nodefaultdtor zmr_writer;
%nodefaultctor zmr_frame;
%nodefaultdtor zmr_frame;
typedef struct zmr_reader zmr_reader;
typedef struct zmr_writer zmr_writer;
typedef struct zmr_frame zmr_frame;

/* Reading: open (flags 0 or ZMR_OPEN_NOLOCK), close, counts, the
 * collection document, a record's index row and meta document, and one
 * frame (system, stored update, resolved frame, force field, index). */
#define ZMR_OPEN_NOLOCK 1
int zmr_open(zmr_reader **out, const char *path, unsigned flags);
void zmr_close(zmr_reader *r);
uint64_t zmr_n_records(const zmr_reader *r);
uint64_t zmr_n_frames(const zmr_reader *r);
int zmr_molrec_version(const zmr_reader *r);
const char *zmr_meta_json(const zmr_reader *r);
int zr_bind_mrec_record_info(zmr_reader *r, uint64_t rec, uint64_t *first_frame,
                             uint64_t *n_frames, uint64_t *n_atoms, uint64_t *has_trajectory);
int zr_bind_mrec_record_meta(zmr_reader *r, uint64_t rec, void *dst, uint64_t dst_capacity,
                             uint64_t *meta_size);
int zr_bind_mrec_read(zmr_reader *r, const char *which, uint64_t rec, uint64_t k,
                      zmr_frame **out);
/* Every rule of the layout over a whole file (flags as zmr_open's). */
int zmr_validate(const char *path, unsigned flags);

/* Frames: blocks and columns by position, step, time, box, header. */
void zmr_frame_free(zmr_frame *f);
size_t zmr_frame_nblocks(const zmr_frame *f);
const char *zmr_frame_block_name(const zmr_frame *f, size_t b);
uint64_t zmr_frame_block_count(const zmr_frame *f, size_t b);
size_t zmr_frame_ncolumns(const zmr_frame *f, size_t b);
int zr_bind_mrec_column_check(const zmr_frame *f, size_t b, size_t c);
const char *zr_bind_mrec_column_name(const zmr_frame *f, size_t b, size_t c);
const char *zr_bind_mrec_column_dtype(const zmr_frame *f, size_t b, size_t c);
size_t zr_bind_mrec_column_ndim(const zmr_frame *f, size_t b, size_t c);
uint64_t zr_bind_mrec_column_dim(const zmr_frame *f, size_t b, size_t c, size_t k);
uint64_t zr_bind_mrec_column_nbytes(const zmr_frame *f, size_t b, size_t c);
uint64_t zr_bind_mrec_column_nelem(const zmr_frame *f, size_t b, size_t c);
const char *zr_bind_mrec_column_string(const zmr_frame *f, size_t b, size_t c, uint64_t k);
int zr_bind_mrec_column_copy(const zmr_frame *f, size_t b, size_t c, void *dst,
                             uint64_t dst_capacity);
uint64_t zr_bind_mrec_column_is_null(const zmr_frame *f, size_t b, size_t c, uint64_t k);
uint64_t zr_bind_mrec_column_nvalid(const zmr_frame *f, size_t b, size_t c);
int zr_bind_mrec_column_validity(const zmr_frame *f, size_t b, size_t c, void *dst,
                                 uint64_t dst_capacity);
double zr_bind_mrec_column_precision(const zmr_frame *f, size_t b, size_t c);
uint64_t zr_bind_mrec_frame_flags(const zmr_frame *f);
int64_t zr_bind_mrec_frame_step(const zmr_frame *f);
double zr_bind_mrec_frame_time(const zmr_frame *f);
int zr_bind_mrec_frame_box(const zmr_frame *f, void *dst, uint64_t dst_capacity);
const char *zr_bind_mrec_frame_header(zmr_frame *f);

/* Writing: a collection, its force field, records, trajectories, frames
 * and its own index columns. */
int zmr_writer_create(zmr_writer **out, const char *path, const char *collection_json,
                      const char *schema_json);
int zmr_writer_set_ff(zmr_writer *w, zmr_frame *ff);
int zr_bind_mrec_begin_record(zmr_writer *w, const char *meta_json, zmr_frame *system);
int zmr_writer_begin_trajectory(zmr_writer *w);
int zmr_writer_add_frame(zmr_writer *w, zmr_frame *update);
int zmr_writer_set_index(zmr_writer *w, zmr_frame *index);
int zmr_writer_commit(zmr_writer *w);
void zmr_writer_abort(zmr_writer *w);
int zr_bind_mrec_frame_create(zmr_frame **out, const char *kind);
int zmr_frame_add_block(zmr_frame *f, const char *name, uint64_t count);
int zmr_frame_set_block_json(zmr_frame *f, const char *block, const char *field,
                             const char *json);
int zr_bind_mrec_add_column(zmr_frame *f, const char *block, const char *column,
                            const char *dtype, const uint64_t *item_shape, size_t ndim,
                            const void *data, uint64_t nbytes, const void *mask,
                            uint64_t mask_size, double precision);
int zr_bind_mrec_add_string_column(zmr_frame *f, const char *block, const char *column,
                                   const uint64_t *item_shape, size_t ndim, const void *data,
                                   uint64_t nbytes, const void *mask, uint64_t mask_size);
int zr_bind_mrec_set_meta(zmr_frame *f, const char *key, const char *tag,
                          const char *typed_json);
int zr_bind_mrec_set_meta_values(zmr_frame *f, const char *key, const char *tag,
                                 const void *data, uint64_t nbytes);
int zr_bind_mrec_set_meta_text(zmr_frame *f, const char *key, const void *data,
                               uint64_t nbytes);
int zmr_frame_set_meta_document(zmr_frame *f, const char *json);
/* The layout's precision rule on one value (ties to even). */
double zmr_round_precision(double x, double precision);
int zmr_frame_set_step(zmr_frame *f, int64_t step);
int zmr_frame_set_time(zmr_frame *f, double time);
int zr_bind_mrec_set_box(zmr_frame *f, const void *data, uint64_t nbytes, unsigned periodic,
                         unsigned cell_defined);

/* A collection as loader streams straight from LMDB and its conversion
 * into stores (zr_bind_mrec.h): open (the scalar names as a zr_bind_set
 * of names, zr_bind_set_add_path), free, the items, the streams' names
 * ("positions", "record", the scalars) and dtypes ("f64", "u64", "i64"),
 * a stream appended to a loader's stream set (borrowed: free the loader
 * first), and the stores written under out_dir. */
%nodefaultctor zr_bind_mrec_source;
%nodefaultdtor zr_bind_mrec_source;
typedef struct zr_bind_mrec_source zr_bind_mrec_source;
int zr_bind_mrec_source_open(zr_bind_mrec_source **out, const char *path, unsigned flags,
                             const char *block, const char *columns, const zr_bind_set *scalars,
                             int include_systems);
void zr_bind_mrec_source_free(zr_bind_mrec_source *s);
uint64_t zr_bind_mrec_source_length(const zr_bind_mrec_source *s);
size_t zr_bind_mrec_source_nstreams(const zr_bind_mrec_source *s);
const char *zr_bind_mrec_source_stream_name(const zr_bind_mrec_source *s, size_t k);
const char *zr_bind_mrec_source_stream_dtype(const zr_bind_mrec_source *s, size_t k);
int zr_bind_set_add_mrec(zr_bind_set *set, zr_bind_mrec_source *s, size_t which);
int zr_bind_mrec_to_stores(zr_bind_mrec_source *s, const char *out_dir, const char *codec);
