/*
 * zld_pack.h - libzloader internals: pack mode (sequence packing), the
 * steps' rows from libzsampler's plan and the batches built from them
 * (pack.c). Never installed.
 */
#ifndef ZLD_PACK_H
#define ZLD_PACK_H

#include "zloader.h"
#include "zrerror_sys.h"

/* What pack mode needs of the loader's options, resolved. */
typedef struct zld_pack_setup {
    zsm_pack_policy policy;
    zsm_pack_overlong overlong;
    uint64_t length;     /* L, elements per row */
    uint64_t window;     /* documents per window */
    uint64_t seed;
    int shuffle;         /* documents in the order keyed by (seed, epoch) */
    uint64_t batch_size; /* rows per rank per step */
    uint32_t rank, world_size;
    int finite;          /* one pass over `epoch` */
    uint64_t epoch;
    int drop_last;
} zld_pack_setup;

typedef struct zld_packer zld_packer;

/* Read every stream's record sizes (and one record of each, for its shape
 * prefix), check that every stream is ragged, of one item shape, and as
 * long as stream 0 record by record, and plan the pass (finite). ZR_EINVAL
 * naming the stream and record, ZR_ENOMEM, or a stream callback's error. */
int zld__packer_new(zld_packer **out, const zld_pack_setup *setup, const zld_stream *streams,
                    size_t nstreams);
void zld__packer_free(zld_packer *p);

/* Steps: the pass's, for a finite pass; UINT64_MAX for endless steps. */
uint64_t zld__packer_steps(const zld_packer *p);

/* Stream s's item shape after the first axis (ndim - 1 dims). */
int zld__packer_item_shape(const zld_packer *p, size_t stream, uint64_t *dims, size_t *ndim);

/* Documents, elements per document, and the elements one epoch places. */
uint64_t zld__packer_docs(const zld_packer *p);
const uint32_t *zld__packer_lengths(const zld_packer *p);

/* Buffers for the parts of a packed batch: the streams' own (part s <
 * nstreams), then ZLD_PACK_PARTS more (zloader.h). NULL: out of memory. */
typedef void *(*zld_pack_alloc)(void *ctx, size_t part, size_t bytes);

typedef struct zld_pack_batch {
    uint64_t rows;
    uint64_t segments;      /* pieces in all rows */
    uint64_t max_segments;  /* the most in one row: seq_lens' second axis */
    uint64_t max_seqlen;    /* the longest piece */
    uint64_t tokens;        /* elements that are not padding */
    uint64_t *docs;         /* [segments] each segment's document (malloc'd) */
} zld_pack_batch;

/* Build step `step`'s batch: parts[k] (from alloc) and part_bytes[k] for
 * k < nstreams + ZLD_PACK_PARTS, and *out. Thread-safe. On failure every
 * buffer obtained so far is still in parts[] (NULL elsewhere) for the
 * caller to release. */
int zld__pack_step(zld_packer *p, const zld_stream *streams, uint64_t step, zld_pack_alloc alloc,
                   void *ctx, void **parts, uint64_t *part_bytes, zld_pack_batch *out);

/* The documents of step `step` (for readahead): *docs malloc'd, *n of
 * them. */
int zld__pack_step_docs(zld_packer *p, uint64_t step, uint64_t **docs, uint64_t *n);

#endif
