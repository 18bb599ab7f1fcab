/*
 * zr_core.i - the language-neutral SWIG interface over the four public
 * headers of loaderx-in-C (zrengine.h, zrstore.h, zsampler.h, zloader.h).
 *
 * Every language module (Python now; Lua and Go later) declares its own
 * %module and typemaps, then does %include "zr_core.i". Keep this file free
 * of language-specific code: only what no binding should see is hidden here.
 */

%{
#include <zloader.h>
#include <zrerror_sys.h>
%}

/* Fixed-width integer types (uint64_t, ...) as the target language's ints. */
%include <stdint.i>

/* Export macros mean nothing to the wrapper generator. */
#define ZRERR_API
#define ZRE_API
#define ZRS_API
#define ZSM_API
#define ZLD_API

/* Variadic and "for the layers above the engine" only. */
%ignore zr_set_error;
/* A printf format from a script is a format-string hazard: the bindings
 * add context in their own language. */
%ignore zr_error_context;

/* The store's files by role: `zr info`'s view; the bindings report space
 * through zre_get_stats. */
%ignore zre_disk_usage;
%ignore zre_get_disk_usage;

/* C callback tables: only C (or a binding's own C glue) can fill them. */
%ignore zld_stream;
%ignore zld_stream_kind;
%ignore zld_stream_from_store;
%ignore zld_create_streams;
%ignore zld_store_spec; /* streams written into stores: reached through zr_bind_mrec_to_stores */
%ignore zld_write_stores;
/* Positive "not yet" results that the generic int typemaps do not know;
 * a binding wraps it in its own glue (Python: interruptible next). */
%ignore zld_next_wait;
/* Finite-pass sampler: plain data with raw out-pointers; bindings reach
 * passes through their loader options (pass, shuffle, drop_last, epoch). */
%ignore zld_pad; /* arrays of row pointers: each binding's own glue */
/* Flips: options fields and their resolution (a descriptor struct and raw
 * out-pointers; each binding's glue calls zld_flip_by_name or
 * zld_flip_resolve); the decisions through zsm_bernoulli / the binding's
 * wrapper. */
%ignore zld_flip;
%ignore zld_items;
%ignore zld_items_from_store;
%ignore zld_items_from_concat;
%ignore zld_flip_resolve;
%ignore zld_flip_by_name;
/* Page-cache residency (double out-pointers): used by the loader's
 * readahead default; not part of the bindings' surface. */
%ignore zre_resident_fraction;
%ignore zrs_resident_fraction;
%ignore zrs_concat_resident_fraction;
%ignore zld_flip_mask;
%ignore zsm_bernoulli;
%ignore zsm_pass;
%ignore zsm_bucket_scratch_bytes;
%ignore zsm_bucket_indices;
%ignore zsm_pass_validate;
%ignore zsm_pass_steps;
%ignore zsm_pass_indices;
/* Sequence packing: the plan's functions take raw length, plan and piece
 * arrays (bindings reach packing through the loader's pack options). The
 * name parsers (an enum out-pointer) and a packed stream's item shape
 * (out-pointers dims, ndim) are wrapped: each language maps the
 * out-pointers (the Python module keeps its own glue for them). */
%ignore zsm_pack;
%ignore zsm_piece;
%ignore zsm_pack_validate;
%ignore zsm_pack_windows;
%ignore zsm_pack_scratch_bytes;
%ignore zsm_pack_max_pieces;
%ignore zsm_pack_epoch;
%ignore zsm_pack_rows;
/* A raw index pointer without a typemap in every language; the loader
 * calls it natively (readahead). */
%ignore zre_advise;
%ignore zrs_advise;

/* Engine-level maintenance and option structs with raw pointers: every
 * binding reaches them through the store layer (zrs_delete, zrs_compact,
 * zrs_create_*_dict) or its own checked glue (zrs_train_dict). */
%ignore zre_create_options;
%ignore zre_create_ex;
%ignore zre_delete;
%ignore zrs_train_dict;
/* The dictionary sample copies raw record buffers and writes a dictionary
 * into one: Lua and Go reach it through zrs_train_dict_tier in their glue,
 * Python through its own sample glue (records streamed one by one). */
%ignore zrs_train_dict_tier;
%ignore zrs_dict_sample_create;
%ignore zrs_dict_sample_offer;
%ignore zrs_dict_sample_store;
%ignore zrs_dict_sample_train;
%ignore zrs_ragged_encoded_size; /* raw buffers: each binding's glue packs */
%ignore zrs_ragged_encode;

/* Many stores as one dataset (shards): arrays of handles, paths and raw
 * index/output pointers. Each binding reaches them through checked glue
 * (Python: bindings/python/shards_python.i; Lua and Go: the shared
 * zr_bind_shards.i); the plain accessors (zrs_concat_length, ...) and the
 * gathers whose index, destination and sizes every binding maps as a
 * store's (zrs_concat_gather_dense, zrs_concat_ragged_sizes) stay
 * wrapped. */
%ignore zre_gather_multi;
%ignore zrs_concat_create;
%ignore zrs_concat_open;
%ignore zrs_concat_locate;
%ignore zrs_concat_advise;
%ignore zrs_concat_item_shape;
%ignore zrs_concat_gather_ragged;
%ignore zld_stream_from_concat;
%ignore zld_mixture_create;
%ignore zld_mixture_stream;
%ignore zld_mixture_locate;
%ignore zsm_mixture;
%ignore zsm_mixture_validate;
%ignore zsm_mixture_indices;
%ignore zsm_mixture_positions;
%nodefaultctor zrs_concat;
%nodefaultdtor zrs_concat;
%nodefaultctor zld_mixture;
%nodefaultdtor zld_mixture;

/* Stores at URLs: opening one is zrs_open_ex / zrs_concat_open with the
 * URL as the path (no rule of a binding's own). Uploads take callbacks and
 * the side-file and manifest calls return library buffers: each binding
 * reaches them through its own glue (Python: shards_python.i). */
%ignore zre_read_side_file;
%ignore zre_free;
%ignore zre_push;
%ignore zre_url_get;
%ignore zre_url_put;
%ignore zrs_push;
%ignore zrs_push_store;
%ignore zrs_push_shards;
%ignore zrs_shard_urls;
%ignore zrs_free_list;

/* Opaque handles: the wrappers only ever carry pointers to these. */
%nodefaultctor zre_engine;
%nodefaultdtor zre_engine;
%nodefaultctor zrs_store;
%nodefaultdtor zrs_store;
%nodefaultctor zld_loader;
%nodefaultdtor zld_loader;
%nodefaultctor zld_batch;
%nodefaultdtor zld_batch;

/* dtype names: the bindings whose records are raw bytes (Lua, Go) take
 * little-endian names only (zr_dtype_from_name); Python, which converts
 * numpy arrays, also reads the byte order (its own glue). */
%ignore zrs_dtype_from_name;
%inline %{
int zr_dtype_from_name(const char *name, zrs_dtype *out)
{
    return zrs_dtype_from_name(name, out, NULL);
}
%}

%include "zrerror.h"
%include "zrengine.h"
%include "zrstore.h"
%include "zsampler.h"
%include "zloader.h"
