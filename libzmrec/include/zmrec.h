/*
 * zmrec.h - libzmrec: the mrec-lmdb binding. A collection of molecular
 * records (meta document, system frame, sparse trajectory) in one LMDB
 * file, read at random by a training loader.
 *
 * Layout (see docs/MREC.md): one LMDB environment in one file (no
 * subdirectory, suffix .mrec.lmdb), one unnamed database, keys
 *   "meta"               UTF-8 JSON, the collection document, written last
 *   "index"              frame bytes: block "records" (first_frame, n_frames,
 *                        n_atoms: u64, has_trajectory: bool)
 *   "ff"                 frame bytes: the force field (optional)
 *   "r" + u64be(r)       UTF-8 JSON: record r's meta document
 *   "s" + u64be(r)       frame bytes: record r's system (optional)
 *   "f" + u64be(j)       frame bytes: the trajectory update at global frame j
 * Frame bytes: "MRF1" | u32le header_length | compact JSON header | zero
 * padding to 8 | payload of raw little-endian column buffers at 8-aligned
 * offsets.
 *
 * Errors: functions return ZMR_OK (0) or a negative zmr_status, the
 * zr_status of zrerror.h (libzmrec depends on libzrerror, LMDB and json-c
 * only, not on the engine). The failing call leaves a detail for its
 * thread, zr_last_error() (also zmr_last_error()), naming the key and the
 * rule ("f/0000000000000007: column atoms/x: offset 12 is not a multiple of
 * 8"). Nothing prints, aborts or exits.
 *
 * Threads: a reader handle may be used from several threads at once (each
 * call runs its own read transaction and copies what it returns). A writer
 * and a frame belong to one thread at a time. Open environments after
 * fork(), never before it.
 */
#ifndef ZMREC_H
#define ZMREC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "zrerror.h"

#ifdef __cplusplus
extern "C" {
#endif

#define ZMREC_VERSION_MAJOR 0
#define ZMREC_VERSION_MINOR 1
#define ZMREC_VERSION_PATCH 0

#ifndef ZMR_API
#if defined(_WIN32)
#  ifdef ZMREC_BUILDING
#    define ZMR_API __declspec(dllexport)
#  else
#    define ZMR_API __declspec(dllimport)
#  endif
#else
#  define ZMR_API __attribute__((visibility("default")))
#endif
#endif

/* The layout this library writes and reads: layout_version exactly 1;
 * collection.molrec_version 1 or 2 on read, 2 written by default. */
#define ZMR_LAYOUT_VERSION 1
#define ZMR_MOLREC_VERSION_MIN 1
#define ZMR_MOLREC_VERSION_MAX 2

/* At most this many dimensions per column. */
#define ZMR_MAX_NDIM 8

/* "0.1.0": the library's version (the macros above). Static storage. */
ZMR_API const char *zmrec_version(void);

/* ================================================================ errors */

/* The statuses are zrerror.h's (one table for every loaderx-in-C library);
 * the ZMR_ names are aliases kept for this library's callers. */
typedef zr_status zmr_status;
#define ZMR_OK ZR_OK
#define ZMR_EINVAL ZR_EINVAL             /* a bad argument (caller's data refused)      */
#define ZMR_ENOMEM ZR_ENOMEM             /* an allocation failed                        */
#define ZMR_EIO ZR_EIO                   /* LMDB / the OS refused a file operation      */
#define ZMR_EBUSY ZR_EBUSY               /* the environment is locked                   */
#define ZMR_EEXIST ZR_EEXIST             /* create: the path already exists             */
#define ZMR_ENOTCOLL ZR_ENOTSTORE        /* open: not an mrec-lmdb collection           */
#define ZMR_ERANGE ZR_ERANGE             /* a record / frame / block / column not there */
#define ZMR_ECORRUPT ZR_ECORRUPT         /* stored bytes break a rule of the layout     */
#define ZMR_EUNSUPPORTED ZR_EUNSUPPORTED /* a version this library does not read        */
#define ZMR_ESTATE ZR_ESTATE             /* call out of order (writer after failure...) */

/* zr_last_error() and zr_strerror(status) under this library's prefix:
 * the detail is the one every loaderx-in-C library shares, so a failure
 * here reads the same through either name. */
ZMR_API const char *zmr_last_error(void);
ZMR_API const char *zmr_strerror(int status);
/* Free memory this library handed out (encoded frames, JSON texts). */
ZMR_API void zmr_free(void *p);

/* ================================================================ dtypes */

/* The closed column dtype set (13). Floats are f64 only. */
typedef enum zmr_dtype {
    ZMR_F64, ZMR_I8, ZMR_I16, ZMR_I32, ZMR_I64, ZMR_U8, ZMR_U16, ZMR_U32, ZMR_U64,
    ZMR_BOOL, ZMR_STRING, ZMR_C64, ZMR_C128
} zmr_dtype;
#define ZMR_NDTYPES 13

/* "f64", "i8", ..., "c128"; NULL for a value outside the enum. */
ZMR_API const char *zmr_dtype_name(int dtype);
/* Parse a dtype name; ZMR_EINVAL naming it otherwise (f16/f32 included). */
ZMR_API zmr_status zmr_dtype_parse(const char *name, zmr_dtype *out);
/* Bytes per element: 8 for f64, 1 for bool, 16 for c128; 0 for string. */
ZMR_API size_t zmr_dtype_itemsize(zmr_dtype dtype);

/* ================================================================ meta */

/* The meta type tags (16). */
typedef enum zmr_tag {
    ZMR_TAG_BOOL, ZMR_TAG_I32, ZMR_TAG_I64, ZMR_TAG_U32, ZMR_TAG_U64, ZMR_TAG_F64,
    ZMR_TAG_STRING, ZMR_TAG_JSON, ZMR_TAG_BOOL3, ZMR_TAG_I32X3, ZMR_TAG_I64X3,
    ZMR_TAG_U32X3, ZMR_TAG_U64X3, ZMR_TAG_F64X3, ZMR_TAG_F64X6, ZMR_TAG_F64X9
} zmr_tag;
#define ZMR_NTAGS 16

ZMR_API const char *zmr_tag_name(int tag);
ZMR_API zmr_status zmr_tag_parse(const char *name, zmr_tag *out);

/* One typed meta value. `n` is the element count (1, 3, 6 or 9; 0 for
 * string and json); the member of the tag's kind holds the elements
 * (b for bool*, i for i32/i64*, u for u32/u64*, f for f64*). `text` is the
 * string's UTF-8 value or the json value's compact JSON text; it is owned by
 * the frame it came from (valid until the frame is freed) or, on input,
 * by the caller. */
typedef struct zmr_value {
    zmr_tag tag;
    size_t n;
    bool b[9];
    int64_t i[9];
    uint64_t u[9];
    double f[9];
    const char *text;
} zmr_value;

/* Check that `typed_json` (UTF-8 JSON text) is a valid typed-JSON value of
 * `tag`: f64 a finite number or "NaN" / "Infinity" / "-Infinity"; integers
 * numbers (any exact integer) or decimal strings, in the tag's range, a real
 * refused; null refused wherever a number is declared; vectors of exactly
 * 3 / 6 / 9 elements. ZMR_EINVAL naming the rule otherwise. */
ZMR_API zmr_status zmr_typed_json_check(zmr_tag tag, const char *typed_json);

/* ================================================================ frames */

/* What a frame is: its kind decides which header fields it may carry. */
typedef enum zmr_frame_kind {
    ZMR_FRAME_SYSTEM,   /* "s" keys: meta + meta_types, box, precision, attributes */
    ZMR_FRAME_UPDATE,   /* "f" keys: meta typed by sequence_schema, step, time, box */
    ZMR_FRAME_INDEX,    /* "index": block records, "meta": {}                 */
    ZMR_FRAME_FF        /* "ff": force-field document in meta, no meta_types    */
} zmr_frame_kind;

/* A cell, in the layout's convention: vectors is the 3 x 3 matrix whose
 * COLUMNS are the lattice vectors, stored row-major: a = (vectors[0],
 * vectors[3], vectors[6]), b = (vectors[1], vectors[4], vectors[7]),
 * c = (vectors[2], vectors[5], vectors[8]), in the collection's length
 * unit (ASE's cell holds a, b, c as rows: transpose at that boundary).
 * origin is the cell origin, boundary the periodicity per axis,
 * cell_defined whether there is a cell at all. An undefined cell is
 * periodic on no axis and its vectors are the identity: zmr_frame_set_box
 * writes the identity whatever it is given, and a decoded frame hands back
 * the identity whatever is stored. */
typedef struct zmr_box {
    double vectors[9];
    double origin[3];
    bool boundary[3];
    bool cell_defined;
} zmr_box;

/* One column as a frame holds it. data is an 8-aligned copy (NULL for a
 * string column), nbytes = nelem * itemsize, little-endian as on disk
 * (hosts here are little-endian). validity is NULL (every row valid) or
 * shape[0] bytes of 0/1. strings holds nelem entries (row-major; NULL for
 * a null entry) for a string column, else NULL. precision is 0 when none
 * is declared. All pointers are owned by the frame. */
typedef struct zmr_column {
    const char *name;
    zmr_dtype dtype;
    size_t ndim;
    const uint64_t *shape;
    uint64_t nelem;
    const void *data;
    uint64_t nbytes;
    const uint8_t *validity;
    const char *const *strings;
    double precision;
} zmr_column;

typedef struct zmr_frame zmr_frame;

/* A new empty frame of `kind`. Free it with zmr_frame_free. */
ZMR_API zmr_status zmr_frame_create(zmr_frame **out, zmr_frame_kind kind);
ZMR_API void zmr_frame_free(zmr_frame *f);
ZMR_API zmr_frame_kind zmr_frame_get_kind(const zmr_frame *f);

/* Add block `name` with `count` rows (ZMR_EEXIST if already there). A
 * block with count 0 and no columns is an update that empties it. */
ZMR_API zmr_status zmr_frame_add_block(zmr_frame *f, const char *name, uint64_t count);
/* Set a block's "structural_shape", "targets" or "attributes" (field) to
 * the JSON text `json`. structural_shape is null or 1..ZMR_MAX_NDIM
 * non-negative integers whose product is the block's count; targets is
 * {column: "<block>" | "/<section>/<block>"}, checked when the column is
 * added or the frame encoded; attributes only on system frames. */
ZMR_API zmr_status zmr_frame_set_block_json(zmr_frame *f, const char *block,
                                            const char *field, const char *json);

/* Add a numeric / bool / complex column to `block`: shape[0] must be the
 * block's count, ndim 1..ZMR_MAX_NDIM, nbytes = prod(shape) * itemsize.
 * data is copied (host order = little-endian). validity: NULL or shape[0]
 * bytes of 0/1. precision (f64 only, system and index frames only; 0 for
 * none): 2^-1000 <= p <= 2^1000; the stored values are rounded to the
 * grid q = 2^(e-1) where p = m 2^e, 0.5 <= m < 1, ties to even; NaN, inf
 * and |x| >= 2^52 q unchanged. bool data must be 0/1 bytes. */
ZMR_API zmr_status zmr_frame_add_column(zmr_frame *f, const char *block, const char *column,
                                        zmr_dtype dtype, const uint64_t *shape, size_t ndim,
                                        const void *data, uint64_t nbytes,
                                        const uint8_t *validity, double precision);
/* Add a string column: values_json is a JSON array of prod(shape) strings
 * (row-major), an entry may be null; validity as above. */
ZMR_API zmr_status zmr_frame_add_string_column(zmr_frame *f, const char *block,
                                               const char *column, const uint64_t *shape,
                                               size_t ndim, const char *values_json,
                                               const uint8_t *validity);

/* Set meta `key` to `typed_json` of type `tag` (checked as in
 * zmr_typed_json_check). On a system frame the tag is recorded in
 * meta_types; on an update the tag must match the sequence_schema (checked
 * by the writer). ZMR_FRAME_FF: use zmr_frame_set_meta_document. */
ZMR_API zmr_status zmr_frame_set_meta(zmr_frame *f, const char *key, zmr_tag tag,
                                      const char *typed_json);
/* The same from a C value (value->tag decides the form). */
ZMR_API zmr_status zmr_frame_set_meta_value(zmr_frame *f, const char *key, const zmr_value *value);
/* ff frames: the whole force-field document (a JSON object), untyped. */
ZMR_API zmr_status zmr_frame_set_meta_document(zmr_frame *f, const char *json);
/* Typed read of meta `key`: the tag comes from meta_types (system; inferred
 * when untagged), from the sequence_schema (updates read through a reader)
 * else is inferred. ZMR_ERANGE if absent. */
ZMR_API zmr_status zmr_frame_get_meta(const zmr_frame *f, const char *key, zmr_value *out);

/* Trajectory updates only: the step (i64) and time (f64). */
ZMR_API zmr_status zmr_frame_set_step(zmr_frame *f, int64_t step);
ZMR_API zmr_status zmr_frame_set_time(zmr_frame *f, double time);
ZMR_API bool zmr_frame_get_step(const zmr_frame *f, int64_t *step);
ZMR_API bool zmr_frame_get_time(const zmr_frame *f, double *time);
/* System frames and updates: the cell. ZMR_EINVAL for an undefined cell
 * that is periodic on some axis; an undefined cell's vectors are set to the
 * identity. */
ZMR_API zmr_status zmr_frame_set_box(zmr_frame *f, const zmr_box *box);
ZMR_API bool zmr_frame_get_box(const zmr_frame *f, zmr_box *box);

/* Blocks and columns by position (insertion order / header order). */
ZMR_API size_t zmr_frame_nblocks(const zmr_frame *f);
ZMR_API const char *zmr_frame_block_name(const zmr_frame *f, size_t b);
ZMR_API uint64_t zmr_frame_block_count(const zmr_frame *f, size_t b);
ZMR_API size_t zmr_frame_ncolumns(const zmr_frame *f, size_t b);
/* ZMR_ERANGE if absent. */
ZMR_API zmr_status zmr_frame_find_block(const zmr_frame *f, const char *name, size_t *b);
ZMR_API zmr_status zmr_frame_column(const zmr_frame *f, size_t b, size_t c, zmr_column *out);
ZMR_API zmr_status zmr_frame_find_column(const zmr_frame *f, const char *block,
                                         const char *column, zmr_column *out);

/* The frame's header as compact JSON, with the offsets an encoding would
 * use. Owned by the frame, valid until it changes or is freed; NULL with
 * detail on failure. */
ZMR_API const char *zmr_frame_header_json(zmr_frame *f);

/* Encode to frame bytes: *out (free with zmr_free), *len bytes. */
ZMR_API zmr_status zmr_frame_encode(zmr_frame *f, void **out, size_t *len);
/* Decode and check frame bytes (any alignment; everything is copied).
 * `what` names the value in errors (e.g. the key, "s/0000000000000003").
 * Refuses (ZMR_ECORRUPT): an unknown magic, a header length past the value,
 * a header that is not a strict UTF-8 JSON object, a dtype outside the set,
 * a shape that does not start with the block count, an offset that is not a
 * multiple of 8, a buffer or validity mask past the value, bool / mask
 * bytes other than 0/1, fields the kind may not carry, meta that breaks
 * its type, a target that is not u64 / not a known block, a structural
 * shape whose product is not the block's count, an undefined cell that is
 * periodic, and (same frame) a row reference at or past its target's
 * count. Values off their precision grid are returned as stored (the
 * layout: a reader does not re-check them; zmr_validate reports them). */
ZMR_API zmr_status zmr_frame_decode(zmr_frame **out, const void *value, size_t len,
                                    zmr_frame_kind kind, const char *what);

/* The precision rule on one value (exposed for tests and bindings). */
ZMR_API double zmr_round_precision(double x, double precision);

/* ================================================================ writer */

typedef struct zmr_writer zmr_writer;

/* Create a new collection at `path` (ZMR_EEXIST if it exists; the LMDB
 * lock file "<path>-lock" is created beside it). collection_json: the
 * collection document ({"units": {...}, ...}) or NULL for {};
 * molrec_version is stamped (2 unless the document gives 1 or 2).
 * schema_json: the sequence_schema {"blocks": {name: {"columns": {col:
 * {"dtype": d, "trailing": [dims], "precision": p, "nullable": b}}}},
 * "meta": {key: {"dtype": tag, "fill": value}}} or NULL for empty (the
 * earlier meta forms {"type": tag, ...} and a bare tag are accepted; the
 * layout's {"dtype": ...} form is written, fills in their tag's typed JSON
 * form: an integer beyond 2^53 as a decimal string). A block may declare
 * "aligned_with": another declared block, not itself aligned, sharing no
 * column, the block no grid (ZMR_EINVAL otherwise). collection.units maps
 * quantities to unit names (strings). Blocks and trailing shapes not
 * declared are declared by the first frame presenting them (see
 * zmr_writer_add_frame). Nothing is a collection until zmr_writer_commit
 * writes "meta". */
ZMR_API zmr_status zmr_writer_create(zmr_writer **out, const char *path,
                                     const char *collection_json, const char *schema_json);
/* The force field (kind ZMR_FRAME_FF), at most once. */
ZMR_API zmr_status zmr_writer_set_ff(zmr_writer *w, zmr_frame *ff);
/* Start record *index (0, 1, ...): meta_json its meta document (a JSON
 * object; NULL for {}), system a ZMR_FRAME_SYSTEM frame or NULL. Ends the
 * previous record. */
ZMR_API zmr_status zmr_writer_begin_record(zmr_writer *w, const char *meta_json,
                                           zmr_frame *system, uint64_t *index);
/* The current record has a trajectory, also when no frame follows (the
 * index's has_trajectory true with n_frames 0: a trajectory of zero
 * frames). add_frame implies it. A record ends (at the next begin_record or
 * commit) with ZMR_EINVAL when it has neither a system nor a trajectory. */
ZMR_API zmr_status zmr_writer_begin_trajectory(zmr_writer *w);
/* Append the next trajectory frame of the current record (kind
 * ZMR_FRAME_UPDATE). Blocks it holds that are bitwise equal to what would
 * carry forward are dropped (the first frame keeps every block); the box
 * likewise; blocks it does not hold carry forward. Declared meta keys
 * missing from it take their declared fill (ZMR_EINVAL without one);
 * undeclared keys are refused; precision comes from the schema. Each block
 * presents exactly its declared columns at the declared dtype and trailing
 * shape (a zero-row block without columns empties it and is written with
 * them); a reserved name (blocks step/time/meta/box, columns offset/
 * step_index/_validity), steps that do not increase strictly, a time on
 * some frames of a record only, a cell_defined other than the record's
 * earlier cells', a structural shape other than the declared one, a block
 * sharing a system block's name with another row count or one of its
 * columns, or a resolved frame where a block declared "aligned_with" T
 * (sequence_schema.blocks) has another row count than T, or T is absent,
 * is refused (ZMR_EINVAL; the same rules and details as zmr_validate). A
 * frame without a step gets the previous step + 1 (0 first). */
ZMR_API zmr_status zmr_writer_add_frame(zmr_writer *w, zmr_frame *update);
/* The collection's own index columns: a ZMR_FRAME_INDEX frame holding one
 * block "records" (one row per record: its count must equal the number of
 * records at commit), any dtypes, masks and precision. Copied; a second
 * call replaces the first. Written before the binding's four columns, whose
 * names (first_frame, n_frames, n_atoms, has_trajectory) it may not take
 * (ZMR_EINVAL). */
ZMR_API zmr_status zmr_writer_set_index(zmr_writer *w, zmr_frame *index);
/* Write index and meta (last) and close; frees w whatever the outcome. */
ZMR_API zmr_status zmr_writer_commit(zmr_writer *w);
/* Close without committing (the file is not a collection). Frees w. */
ZMR_API void zmr_writer_abort(zmr_writer *w);

/* ================================================================ reader */

typedef struct zmr_reader zmr_reader;

/* Open flags. */
#define ZMR_OPEN_NOLOCK 1u  /* LMDB MDB_NOLOCK: read-only media; no writer may run */

/* Open a collection read-only. First, with plain reads before LMDB maps
 * the file: an empty or too short file, or no LMDB magic -> ZMR_ENOTCOLL
 * ("not an mrec-lmdb collection: PATH is empty"), a directory ->
 * ZMR_ENOTCOLL ("PATH is a directory"); LMDB's two meta pages
 * (magic, version, page size, last page, root pages, map size) ->
 * ZMR_ECORRUPT; a file shorter than the pages LMDB uses -> ZMR_ECORRUPT
 * ("file truncated: N bytes, LMDB pages need M"); a missing path ->
 * ZMR_EIO. The reader maps the pages the file uses, not the map size its
 * writer recorded (a reference writer records 1 TiB), so many readers of
 * one file fit in a process. Damage inside LMDB's B-tree pages is an error
 * (ZMR_ECORRUPT), not a crash: liblmdb is built with checks of page
 * bounds, node sizes and page numbers (see docs/MREC.md for what remains).
 * Then checks meta (layout "mrec-lmdb",
 * layout_version exactly 1, molrec_version 1..2 when present, counts) and
 * the index (block records, dtypes, count == n_records, prefix sums, sum
 * == n_frames). ZMR_ENOTCOLL / ZMR_ECORRUPT / ZMR_EUNSUPPORTED naming the
 * key and the rule. Without ZMR_OPEN_NOLOCK LMDB creates and writes its
 * lock file "PATH-lock" even for a reader: where it cannot (read-only
 * media) ZMR_EIO names the lock file and suggests ZMR_OPEN_NOLOCK. Damage
 * liblmdb reports while reading (a page not found, a corrupted structure)
 * is ZMR_ECORRUPT. */
ZMR_API zmr_status zmr_open(zmr_reader **out, const char *path, unsigned flags);
ZMR_API void zmr_close(zmr_reader *r);

ZMR_API uint64_t zmr_n_records(const zmr_reader *r);
ZMR_API uint64_t zmr_n_frames(const zmr_reader *r);
/* collection.molrec_version (1 or 2), 0 when the file does not state it. */
ZMR_API int zmr_molrec_version(const zmr_reader *r);
/* The "meta" value as stored (UTF-8 JSON). Owned by the reader. */
ZMR_API const char *zmr_meta_json(const zmr_reader *r);

/* Every read below fails with a detail that starts with the file's path. */

/* Index row of record `rec` (ZMR_ERANGE past the end). */
ZMR_API zmr_status zmr_record_info(const zmr_reader *r, uint64_t rec, uint64_t *first_frame,
                                   uint64_t *n_frames, uint64_t *n_atoms, bool *has_trajectory);
/* The index frame as stored (kind ZMR_FRAME_INDEX, block "records"): the
 * collection's own index columns and the binding's four. *out is the
 * caller's (zmr_frame_free). */
ZMR_API zmr_status zmr_read_index(zmr_reader *r, zmr_frame **out);
/* Record meta document as stored: *json (free with zmr_free). */
ZMR_API zmr_status zmr_read_record_meta(zmr_reader *r, uint64_t rec, char **json);
/* The system frame, or *out = NULL when the record has none. */
ZMR_API zmr_status zmr_read_system(zmr_reader *r, uint64_t rec, zmr_frame **out);
/* The force field, or *out = NULL when there is none. */
ZMR_API zmr_status zmr_read_ff(zmr_reader *r, zmr_frame **out);
/* The stored update at frame k (0-based) of record rec, as written. */
ZMR_API zmr_status zmr_read_update(zmr_reader *r, uint64_t rec, uint64_t k, zmr_frame **out);
/* Frame k of record rec resolved: every block as carried forward from the
 * record's first frame (never across records), the box likewise, meta /
 * step / time of update k. Row references checked on the resolved blocks. */
ZMR_API zmr_status zmr_read_frame(zmr_reader *r, uint64_t rec, uint64_t k, zmr_frame **out);

/* Validate a whole file: open's checks plus every record (meta document,
 * system, every update decoded, resolved and its references checked,
 * n_atoms and has_trajectory against the data, declared meta keys), the
 * rules across a record's frames that zmr_writer_add_frame holds a writer
 * to (steps, time, cell_defined, grid shapes, aligned blocks), values on
 * their precision grid, well-formed aligned_with declarations, and no key
 * outside the layout. ZMR_OK or the first broken rule, its detail starting
 * with (or naming) PATH. */
ZMR_API zmr_status zmr_validate(const char *path, unsigned flags);

/* ========================================================== item sources
 *
 * A collection read as a training loader's item source, straight from
 * LMDB (no conversion): one item per trajectory frame, record by record in
 * collection order, and, when include_systems is set, one item per record
 * without frames whose system holds the first named column (frame -1),
 * in its place in that order. Each item is read as numbered streams, all
 * of zmr_source_length items:
 *   stream 0  the item's value, ragged f64: the frame's <block>/<column>
 *             resolved with carry-forward (the last update at or before
 *             the frame that holds the block; a system item: the system's
 *             block), as stored (any ndim), or several 1-d f64 columns
 *             ("x,y,z") side by side as one (n, k) array. Handed out packed
 *             as a ragged store record: [u64 ndim][u64 dims...][f64 values
 *             row-major], little-endian, 8 + 8 * ndim + 8 * prod(dims)
 *             bytes (zmr_source_sizes).
 *   stream 1  the item's record index, dense u64 (8 bytes).
 *   stream 2+k  scalar k, dense 8 bytes: "step" as i64 (-1 when absent),
 *             any other name as f64 (NaN when absent). A frame item takes
 *             "step" / "time" from the update, else meta key <name> of the
 *             update; a system item meta key <name> of the system. Bool,
 *             integer and f64 meta convert (an f64 step truncates, a
 *             non-finite one is -1); another tag is ZMR_ECORRUPT.
 * Values are read again at every gather (nothing is cached); a source
 * holds its own reader, so it is safe to gather from several threads at
 * once, and, like a reader, must be opened after fork(), never before.
 * Errors name the record and frame: ZMR_ECORRUPT for a frame without the
 * block, a column missing, not f64 or (several columns) not 1-d of the
 * first one's length; the reader's statuses for the reads. */

typedef struct zmr_source zmr_source;

/* At most this many column names in `columns`. */
#define ZMR_SOURCE_MAX_COLUMNS 8

/* Open the collection at `path` (flags as zmr_open's) and list its items.
 * block: the block holding the value; columns: one column name, or 2..8
 * names separated by commas; scalars[0..nscalars): the scalar streams'
 * names (copied; may repeat). ZMR_EINVAL for NULL arguments or a columns
 * string with an empty name or more than ZMR_SOURCE_MAX_COLUMNS names;
 * zmr_open's errors; ZMR_ENOMEM. Columns are checked per item when read,
 * so a source whose column does not exist opens (and fails at the first
 * read naming the item). A source of 0 items is valid. *out is the
 * caller's: free it with zmr_source_free. */
ZMR_API zmr_status zmr_source_open(zmr_source **out, const char *path, unsigned flags,
                                   const char *block, const char *columns,
                                   const char *const *scalars, size_t nscalars,
                                   bool include_systems);
/* Close the source's reader and free it (NULL: no-op). Nothing may gather
 * from it any more: a loader reading it must be freed first. */
ZMR_API void zmr_source_free(zmr_source *s);
/* Items (0 for NULL). */
ZMR_API uint64_t zmr_source_length(const zmr_source *s);
/* Streams: 2 + the number of scalars (0 for NULL). */
ZMR_API size_t zmr_source_nstreams(const zmr_source *s);
/* Stream `stream`'s name: the columns string as given (stream 0),
 * "record" (1), the scalar's name (2+); owned by the source, NULL past
 * the streams. */
ZMR_API const char *zmr_source_stream_name(const zmr_source *s, size_t stream);
/* Its dtype: ZMR_F64 (stream 0, scalars other than "step"), ZMR_U64
 * (record), ZMR_I64 ("step"). Stream 0 is ragged, the others are 8-byte
 * scalars. */
ZMR_API zmr_dtype zmr_source_stream_dtype(const zmr_source *s, size_t stream);
/* sizes[i] = the packed bytes of stream 0 for item items[i] (i < count).
 * ZMR_ERANGE for an item past the length, the item's read errors. */
ZMR_API zmr_status zmr_source_sizes(const zmr_source *s, const uint64_t *items, uint64_t count,
                                    uint64_t *sizes);
/* Write stream `stream` of items[0..count) into dst (dst_capacity bytes,
 * the caller's). Stream 0: item i packed at dst + bounds[i], exactly
 * bounds[i+1] - bounds[i] bytes (count + 1 offsets built from
 * zmr_source_sizes; ZMR_EINVAL otherwise); streams 1+: 8 bytes per item at
 * dst + 8 * i (bounds ignored, may be NULL). ZMR_EINVAL for a stream past
 * the streams or a destination too small, ZMR_ERANGE for an item past the
 * length, the item's read errors (the items before it are written). */
ZMR_API zmr_status zmr_source_gather(const zmr_source *s, size_t stream, const uint64_t *items,
                                     uint64_t count, void *dst, uint64_t dst_capacity,
                                     const uint64_t *bounds);

#ifdef __cplusplus
}
#endif

#endif
