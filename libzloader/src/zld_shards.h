/*
 * zld_shards.h - libzloader internals shared by loader.c and shards.c.
 * Never installed.
 */
#ifndef ZLD_SHARDS_H
#define ZLD_SHARDS_H

#include "zloader.h"

/* For the adaptive readahead: 1 with *bytes = the stored bytes behind a
 * concatenation or mixture stream (shards.c), *resident their share in the
 * page cache and *resident_rc the status of asking (ZR_OK when known);
 * 0 for any other stream. */
int zld__stream_bytes(const zld_stream *st, uint64_t *bytes, double *resident, int *resident_rc);

#endif
