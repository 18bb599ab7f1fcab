/*
 * ingest.h - internal to `zr ingest`: its options, the table of input
 * kinds, and what the readers of each kind share. cmd_ingest.c parses the
 * arguments and picks the input kind; each kind lives in its own file:
 *
 *   ingest_array.c   .npy, IDX (gzipped or not) and .npz: n-d arrays
 *   ingest_folder.c  a folder, one record per file, names in STORE.names
 *   ingest_tokens.c  a flat 1-d .npy with --lengths / --offsets, and the
 *                    ragged .npz that `zr export` writes
 *   ingest_arrow.c   Parquet, Arrow IPC and Feather, read by pyarrow through
 *                    loaderx's Python side
 *
 * A new input kind is one more reader file and one entry of INPUTS in
 * cmd_ingest.c: how to recognise it, and how to ingest it.
 */
#ifndef ZR_INGEST_H
#define ZR_INGEST_H

#include <stddef.h>
#include <stdint.h>

#include "zr_cli.h"
#include "zr_io.h"

#define INGEST_CMD "ingest"

typedef struct ingest_opts {
    zr_sink_opts sink;
    const char *array, *lengths, *offsets, *column;
    /* --codec and --tier as given (NULL: not given), passed on as they are
     * to the Python ingest of Arrow files. */
    const char *codec_name, *tier_name;
    int ragged, quiet, json;
} ingest_opts;

/* One kind of input: `detect` says (1 or 0) whether SRC is one, from what
 * the options ask for or SRC's first bytes (head[0..got); got is 0 for a
 * folder); `ingest` makes STORE of it and returns the exit status. */
typedef struct ingest_kind {
    const char *name; /* for messages: ".npy", "a folder" */
    int (*detect)(const char *src, const unsigned char *head, size_t got, const ingest_opts *o);
    int (*ingest)(const char *src, const char *store, const ingest_opts *o);
} ingest_kind;

/* The readers (one file each). */
int ingest_npy(const char *src, const char *store, const ingest_opts *o);
int ingest_idx(const char *src, const char *store, const ingest_opts *o);
int ingest_npz(const char *src, const char *store, const ingest_opts *o);
int ingest_folder(const char *src, const char *store, const ingest_opts *o);
int ingest_tokens(const char *src, const char *store, const ingest_opts *o);
/* The .npz of a ragged store's export (data, offsets, shapes). */
int ingest_ragged_npz(const char *src, const char *store, const ingest_opts *o);
/* Parquet, Arrow IPC (file or stream) and Feather v1: what the first bytes
 * head[0..got) say the file is ("a Parquet file", ...), or NULL. */
const char *ingest_arrow_kind(const unsigned char *head, size_t got);
/* On POSIX the process becomes the Python ingest and this returns only when
 * it could not start (ZR_EXIT_OPEN, after saying what is missing);
 * elsewhere it returns the Python ingest's exit status. */
int ingest_arrow(const char *src, const char *store, const ingest_opts *o);

/* ------------------------------------------------ shared by the readers */

/* Bytes per committed slice, and of the first slice, which also feeds
 * dictionary training (the tier's sample size) when one is trained. */
void slice_sizes(const ingest_opts *o, uint64_t *slice, uint64_t *first);

/* Grow the slice buffer *packed to hold `sum` bytes (kept when it cannot
 * grow): 0, or ZR_EXIT_FAILED after naming `what` (the input). */
int grow_slice(unsigned char **packed, uint64_t sum, const char *what);

/* Close the sink and report what was written (--json or a line); on
 * interrupt say what was committed. `what` ends the report line. Returns
 * the exit status: `status` if not 0, else the close's. */
int ingest_finish(const ingest_opts *o, zr_sink *k, int status, const char *src,
                  const char *what);

#endif
