/*
 * zmr_internal.h - shared between the sources of libzmrec; never installed.
 */
#ifndef ZMR_INTERNAL_H
#define ZMR_INTERNAL_H

#include <json-c/json.h>

#include "zmrec.h"
#include "zrerror_sys.h"

#define ZMR_HIDDEN __attribute__((visibility("hidden")))
/* printf checks; on mingw those of the CRT printf in use. */
#if defined(__MINGW_PRINTF_FORMAT)
#define ZMR_PRINTF(f, a) __attribute__((format(__MINGW_PRINTF_FORMAT, f, a)))
#else
#define ZMR_PRINTF(f, a) __attribute__((format(printf, f, a)))
#endif

/* Set the thread's detail and return status. */
ZMR_HIDDEN zmr_status zmr_err(zmr_status st, const char *fmt, ...) ZMR_PRINTF(2, 3);
/* Prefix the current detail with "prefix: " (keeps the status). */
ZMR_HIDDEN zmr_status zmr_err_prefix(zmr_status st, const char *prefix);

/* Strict JSON parse of len bytes (need not be NUL-terminated): UTF-8,
 * no NaN / Infinity tokens, integers within [-2^63, 2^64). On failure
 * returns `bad` with "what: ..." detail. *out may be NULL for JSON null. */
ZMR_HIDDEN zmr_status zmr_json_parse(const char *text, size_t len, const char *what,
                                     zmr_status bad, json_object **out);
/* Compact serialization (no spaces, '/' unescaped); owned by o. */
ZMR_HIDDEN const char *zmr_json_text(json_object *o);
/* A double as a JSON number with the shortest round-trip text. */
ZMR_HIDDEN json_object *zmr_json_double(double d);

/* Typed JSON. check: value o against tag (EINVAL-style message without
 * prefix, returning `bad`). to_value: fill v (text owned by o). */
ZMR_HIDDEN zmr_status zmr_typed_check(zmr_tag tag, json_object *o, zmr_status bad);
ZMR_HIDDEN zmr_status zmr_typed_to_value(zmr_tag tag, json_object *o, zmr_value *v);
ZMR_HIDDEN json_object *zmr_typed_from_value(const zmr_value *v);
/* Untagged system meta: bool / i64 / u64 / f64 / string, else json. */
ZMR_HIDDEN zmr_tag zmr_infer_tag(json_object *o);
/* Exact integer from a typed-JSON int (number or decimal string). neg set
 * when negative (then i valid) else u valid. Returns 0 or -1 (not an int,
 * out of range). */
ZMR_HIDDEN int zmr_json_int(json_object *o, int *neg, int64_t *i, uint64_t *u);
/* A non-negative JSON integer number (not string). */
ZMR_HIDDEN int zmr_json_u64(json_object *o, uint64_t *u);
/* Read f64 typed value (number, "NaN", "Infinity", "-Infinity"). */
ZMR_HIDDEN int zmr_json_f64(json_object *o, double *d);
/* A decl in sequence_schema.meta: {"dtype": tag, "fill": v} (fill optional;
 * JSON null is a fill for a json key only), or the earlier forms
 * {"type": tag, "fill": v} and a bare tag string. *fill is NULL when absent
 * or null; *has_fill (may be NULL) says which. */
ZMR_HIDDEN zmr_status zmr_schema_meta_decl(json_object *decl, const char *key, zmr_tag *tag,
                                           json_object **fill, bool *has_fill);

/* Frame internals used by the reader and writer. */
struct zmr_col {
    char *name;
    zmr_dtype dtype;
    size_t ndim;
    uint64_t shape[ZMR_MAX_NDIM];
    uint64_t nelem;
    void *data;        /* 8-aligned, nbytes */
    uint64_t nbytes;
    uint8_t *validity; /* shape[0] bytes or NULL */
    char **strings;    /* nelem entries for a string column */
    double precision;
};

struct zmr_block {
    char *name;
    uint64_t count;
    json_object *structural_shape; /* NULL = JSON null */
    json_object *targets;          /* object or NULL */
    json_object *attributes;       /* object or NULL */
    size_t ncols, capcols;
    struct zmr_col *cols;
};

struct zmr_frame {
    zmr_frame_kind kind;
    size_t nblocks, capblocks;
    struct zmr_block *blocks;
    json_object *meta;       /* object */
    json_object *meta_types; /* object (system) */
    json_object *schema_meta; /* borrowed-copy: schema meta decls for typed reads (updates) */
    bool has_step, has_time, has_box;
    int64_t step;
    double time;
    zmr_box box;
    char *header_cache;
};

ZMR_HIDDEN void zmr_block_clear(struct zmr_block *b);
/* Deep copy of block b into frame f (replacing one of the same name). */
ZMR_HIDDEN zmr_status zmr_frame_put_block_copy(zmr_frame *f, const struct zmr_block *b);
/* Remove block at position i. */
ZMR_HIDDEN void zmr_frame_remove_block(zmr_frame *f, size_t i);
/* Bitwise-equal blocks (entry fields, buffers, masks, strings). */
ZMR_HIDDEN bool zmr_block_equal(const struct zmr_block *a, const struct zmr_block *b);
/* Row references of every block of f, with `other` (may be NULL) giving
 * the section blocks named "/system/<b>" and "/trajectory/<b>". */
ZMR_HIDDEN zmr_status zmr_frame_check_targets(const zmr_frame *f, const zmr_frame *system,
                                              const zmr_frame *traj);
/* The "/trajectory/<block>" references of a system frame against one
 * resolved trajectory ordinal `traj`: the target must be a block of traj
 * wherever the referencing block has rows, every non-null value below its
 * row count. */
ZMR_HIDDEN zmr_status zmr_frame_check_traj_targets(const zmr_frame *system, const zmr_frame *traj);
ZMR_HIDDEN uint64_t zmr_load_u64le(const unsigned char *p);

/* ------------------------------------------------------------ rules.c
 * The layout's rules that span values, written once: the writer calls them
 * with bad = ZMR_EINVAL, zmr_validate with ZMR_ECORRUPT, frame building and
 * decoding with their own. Details name the rule; callers name the key. */

/* A cell: undefined (cell_defined false) means periodic on no axis; its
 * vectors are normalized to the identity (the layout's rule: written as
 * the identity, read back as the identity whatever is stored). */
ZMR_HIDDEN zmr_status zmr_rule_box(zmr_box *b, zmr_status bad);
/* structural_shape (NULL = JSON null): null or 1..ZMR_MAX_NDIM
 * non-negative integers whose product is the block's row count. */
ZMR_HIDDEN zmr_status zmr_rule_structural_shape(const char *block, uint64_t count, json_object *ss,
                                                zmr_status bad);
/* An update's block against its sequence_schema declaration `decl` (the
 * block's object, NULL when undeclared): the same structural shape. */
ZMR_HIDDEN zmr_status zmr_rule_declared_shape(const struct zmr_block *b, json_object *decl, zmr_status bad);
/* sequence_schema.blocks' aligned_with declarations: the target is another
 * declared block that is not itself aligned; the aligned block declares no
 * structural shape and no column of its target's. */
ZMR_HIDDEN zmr_status zmr_rule_alignments(json_object *blocks, zmr_status bad);
/* The resolved frame (`update`'s blocks over `state`'s; either may be NULL):
 * a block sharing a name with a block of `system` (may be NULL) has its row
 * count; a block declared aligned_with T has T's row count wherever it is
 * present, and T is present there. */
ZMR_HIDDEN zmr_status zmr_rules_aligned(json_object *blocks, const zmr_frame *update, const zmr_frame *state,
                                        const zmr_frame *system, zmr_status bad);

/* A record's frames, in order: every update states its step, steps
 * increase strictly, a time on every frame or none, one cell_defined for
 * the record's cells. begin at the record's start; frame checks update u
 * against the frames before it; next records u once it is accepted. */
struct zmr_traj_rules {
    uint64_t frames;
    int64_t last_step;
    bool timed, boxed, cell_defined;
};
ZMR_HIDDEN void zmr_rules_begin(struct zmr_traj_rules *t);
ZMR_HIDDEN zmr_status zmr_rules_frame(const struct zmr_traj_rules *t, const zmr_frame *u, zmr_status bad);
ZMR_HIDDEN void zmr_rules_next(struct zmr_traj_rules *t, const zmr_frame *u);

/* The precision sequence_schema.blocks declares for block/col (0: none). */
ZMR_HIDDEN double zmr_schema_precision(json_object *blocks, const char *block, const char *col);
/* Every non-null value of an f64 column on the grid of `precision` (0:
 * nothing to check). The layout: readers do not re-check or refuse
 * off-grid values; a validator reports them. */
ZMR_HIDDEN zmr_status zmr_rule_on_grid(const char *block, const struct zmr_col *c, double precision,
                                       zmr_status bad);

#endif
