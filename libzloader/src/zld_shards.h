/*
 * zld_shards.h - libzloader internals shared by loader.c and shards.c.
 * Never installed.
 */
#ifndef ZLD_SHARDS_H
#define ZLD_SHARDS_H

#include "zloader.h"
#include "zrerror_sys.h"

/* For the adaptive readahead: 1 with *bytes = the stored bytes behind a
 * concatenation or mixture stream (shards.c), *resident their share in the
 * page cache and *resident_rc the status of asking (ZR_OK when known);
 * 0 for any other stream. */
int zld__stream_bytes(const zld_stream *st, uint64_t *bytes, double *resident, int *resident_rc);

/* The concatenation behind a zld_stream_from_concat stream, else NULL. */
zrs_concat *zld__stream_concat(const zld_stream *st);

/* What decides a mixture stream's records, for the loader state. */
typedef struct zld__mix_view {
    size_t nsources;
    const double *weights;
    const zsm_mode *modes;
    const uint64_t *lengths;    /* records per source */
    uint64_t seed;
    zrs_concat *all;            /* this stream's shards of every source */
    const size_t *shard_first;  /* [nsources + 1]: source k is shards
                                 * [shard_first[k], shard_first[k + 1]) of all */
} zld__mix_view;

/* 1 with *out filled for a zld_mixture_stream stream, else 0. */
int zld__stream_mixture(const zld_stream *st, zld__mix_view *out);


#endif
