/*
 * ingest_arrow.h - internal to `zr ingest`: Parquet, Arrow IPC and Feather
 * inputs, read by pyarrow through loaderx's Python side (ingest_arrow.c).
 */
#ifndef ZR_INGEST_ARROW_H
#define ZR_INGEST_ARROW_H

#include <stddef.h>

/* What zr ingest was asked for, passed on as options (NULL / 0: not given;
 * zr ingest's rules hold: --tier or --dict alone mean zstd_dict). */
typedef struct zr_arrow_args {
    const char *column, *codec, *tier, *dict;
    int append, ragged, json, quiet;
} zr_arrow_args;

/* What the first bytes head[0..got) of a file say it is ("a Parquet
 * file", "an Arrow IPC file", "an Arrow IPC stream", "a Feather v1
 * file"), or NULL for none of these. */
const char *zr_arrow_kind(const unsigned char *head, size_t got);

/* Ingest SRC (of zr_arrow_kind `kind`) into STORE. On POSIX the process
 * becomes the Python ingest and this returns only when it could not start
 * (ZR_EXIT_OPEN, after saying what is missing); elsewhere it returns the
 * Python ingest's exit status. */
int zr_ingest_arrow(const char *src, const char *store, const char *kind, const zr_arrow_args *a);

#endif
