/*
 * zr_io.h - internal to the zr tool: the file formats zr reads and writes
 * besides stores. Sequential byte sources (plain or gzip files through
 * zlib, members of a zip archive, stored or deflated), .npy headers (format
 * 1.0-3.0), IDX headers (the MNIST family), zip central directories (.npz,
 * zip64 included), and writers for .npy and stored .npz files.
 *
 * Functions returning int give 0 or -1; on -1 they have written a message
 * naming the file and the problem into err[0..ZR_IO_ERR).
 */
#ifndef ZR_IO_H
#define ZR_IO_H

#include <stdint.h>
#include <stdio.h>

#include <zrstore.h>

#define ZR_IO_ERR 512

/* ------------------------------------------------------------- sources */

typedef struct zr_src zr_src;

/* A file read sequentially; gzip files are decompressed on the fly. */
int zr_src_open_file(zr_src **out, const char *path, char *err);
/* Member `name` of zip archive `path` (stored or deflated). Its CRC-32 is
 * checked in a first pass before this returns, so a damaged member is
 * refused before any of it is used. */
int zr_src_open_zip_member(zr_src **out, const char *path, const char *name, char *err);
/* Read up to n bytes; fewer only at the end or on an error (then
 * zr_src_failed is 1 and err holds the message). */
size_t zr_src_read(zr_src *s, void *buf, size_t n, char *err);
int zr_src_failed(const zr_src *s);
/* Read exactly n bytes, else -1 with "NAME: WHAT: file ends ..." */
int zr_src_read_exact(zr_src *s, void *buf, size_t n, const char *what, char *err);
void zr_src_close(zr_src *s);
const char *zr_src_name(const zr_src *s);

/* First bytes of a file (after gzip decompression): for detection. */
int zr_sniff(const char *path, unsigned char *buf, size_t n, size_t *got, char *err);

/* -------------------------------------------------------------- arrays */

/* An n-d array header as found in a .npy or IDX file. */
typedef struct zr_array {
    zrs_dtype dtype;
    int swap;      /* elements are in the other byte order */
    int fortran;   /* column-major element order */
    size_t ndim;
    uint64_t shape[ZRS_MAX_NDIM + 1];
    char descr[16]; /* as written in the file ("<f4", ">i4", "idx u8", ...) */
} zr_array;

/* Product of shape[from..ndim). */
uint64_t zr_array_count(const zr_array *a, size_t from);

int zr_npy_read_header(zr_src *s, zr_array *a, char *err);
int zr_idx_read_header(zr_src *s, zr_array *a, char *err);

/* Swap the byte order of count elements of dtype in place. */
void zr_byteswap(void *data, uint64_t count, zrs_dtype dtype);

/* Read a whole 1-d integer or bool array (.npy, any byte order)
 * into a malloc'd int64 array. */
int zr_npy_load_i64(const char *path, int64_t **out, uint64_t *count, char *err);
/* The same from a source holding a .npy, of ndim 1 or 2 (C order): *rows
 * and *cols (1 for ndim 1) values, row-major. */
int zr_load_i64(zr_src *s, size_t ndim, int64_t **out, uint64_t *rows, uint64_t *cols, char *err);

/* Element i of a payload of dtype as a double: the real part of a complex
 * number (its imaginary part in *imag, else 0); int64/uint64 beyond 2^53
 * round. */
double zr_elem_double(const void *payload, zrs_dtype dtype, uint64_t i, double *imag);

/* ----------------------------------------------------------------- zip */

typedef struct zr_zip_entry {
    char name[256];
    uint64_t local_offset, csize, usize;
    uint32_t crc; /* CRC-32 of the uncompressed bytes */
    unsigned method; /* 0 stored, 8 deflated */
} zr_zip_entry;

/* The members of a zip archive, malloc'd (free()). */
int zr_zip_list(const char *path, zr_zip_entry **entries, size_t *count, char *err);

/* ------------------------------------------------------------- writers */

/* A .npy 1.0 header (2.0 when it would not fit) for a C-order array of
 * `descr` and shape[0..ndim), into buf (at least 256 + 24 * ndim bytes).
 * Returns its length (a multiple of 64). */
size_t zr_npy_header(char *buf, size_t cap, const char *descr, const uint64_t *shape,
                     size_t ndim);
/* The length zr_npy_header gives for the longest possible shape of ndim
 * dims (every dim 20 digits): a header of this length can be written
 * before the shape is known (zr_npy_header_padded). */
size_t zr_npy_header_max(size_t ndim);
/* zr_npy_header padded with spaces to exactly `len` bytes (len from
 * zr_npy_header_max); 0 if it does not fit. */
size_t zr_npy_header_padded(char *buf, size_t len, const char *descr, const uint64_t *shape,
                            size_t ndim);

/* A zip archive of stored members written one after another. */
typedef struct zr_zip_writer zr_zip_writer;
int zr_zip_create(zr_zip_writer **out, const char *path, char *err);
/* Start member `name`; then write its bytes with zr_zip_write. */
int zr_zip_begin(zr_zip_writer *z, const char *name, char *err);
/* Start member `name` whose first head_len bytes are written at the end
 * with zr_zip_set_head (a header known only once the data is out). */
int zr_zip_begin_reserved(zr_zip_writer *z, const char *name, size_t head_len, char *err);
int zr_zip_set_head(zr_zip_writer *z, const void *head, char *err);
int zr_zip_write(zr_zip_writer *z, const void *buf, size_t n, char *err);
int zr_zip_end(zr_zip_writer *z, char *err);
/* Write the central directory, sync and close. */
int zr_zip_finish(zr_zip_writer *z, char *err);
/* Close and delete the partial file. */
void zr_zip_abandon(zr_zip_writer *z);



/* --------------------------------------------------------------- sinks */

/* How a store being written is made: codec, dictionary, append. */
typedef struct zr_sink_opts {
    zre_codec codec;
    int codec_given;      /* --codec was given (checked against an appended store) */
    zrs_dict_tier tier;   /* zstd_dict: train a dictionary of this tier ... */
    const char *dict_path;/* ... or use this one (zr train-dict's output) */
    int append;           /* add to an existing store of the same identity */
    const char *append_flag; /* the option that sets append, for messages ("--append") */
} zr_sink_opts;

/* A store being filled in committed slices. Fill cmd, path and o, then
 * zr_sink_open with the identity (and, for zstd_dict, training samples:
 * the first records, packed with bounds[0..nsamples]; or set sample_from
 * to a store the dictionary is sampled from instead). */
typedef struct zr_sink {
    const char *cmd, *path;
    const zr_sink_opts *o;
    zrs_store *sample_from;
    zrs_store *s;
    uint64_t added;   /* records appended by this sink */
    uint64_t before;  /* records the store held at open */
    int created;
} zr_sink;

/* The codec options of a command that writes a store (--codec, --tier,
 * --dict as given, or NULL) into *so: codec zstd unless given, tier
 * balanced unless given, and --tier or --dict alone imply zstd_dict.
 * Unknown names, --tier with --dict, and either with another --codec are
 * usage errors (printed; ZR_EXIT_USAGE); else 0. */
struct zr_command;
int zr_sink_codec(const struct zr_command *cmd, const char *codec, const char *tier, const char *dict,
                  zr_sink_opts *so);

/* Returns a ZR_EXIT_* status (0 on success), having printed the error.
 * A store that cannot be created or opened is ZR_EXIT_OPEN, whatever the
 * cause (a regular file where a parent directory should be, permission,
 * a full disk). */
int zr_sink_open(zr_sink *k, zrs_kind kind, zrs_dtype dtype, const uint64_t *shape, size_t ndim,
                 const void *samples, const uint64_t *bounds, uint64_t nsamples);
/* Dense: bounds NULL, nbytes = count * record size. Ragged: packed
 * records, bounds[0..count]. Appended in pieces of about 50 ms each
 * (sized from the rate of the one before), each committed; after a
 * piece, a Ctrl-C (zr_interrupted) stops it with 0 and k->added saying
 * how many records went in. Else every record is added, or the status of
 * the failed piece is returned (the pieces before it stay committed). */
int zr_sink_append(zr_sink *k, const void *data, const uint64_t *bounds, uint64_t count,
                   uint64_t nbytes);
int zr_sink_close(zr_sink *k);

/* Train a dictionary of `tier` on packed samples (bounds[0..n]), or on
 * the store `from` when it is not NULL, through the library's sample rule
 * (zrs_dict_sample). *dict is malloc'd; *nsampled / *sampled_bytes (may
 * be NULL) say what the sample held. ZR_EXIT_* status, printed. */
int zr_train_tier(const char *cmd, const char *what, zrs_dict_tier tier, zrs_store *from,
                  const void *samples, const uint64_t *bounds, uint64_t n, void **dict,
                  uint64_t *dict_size, uint64_t *nsampled, uint64_t *sampled_bytes);
int zr_parse_tier(const char *s, zrs_dict_tier *out);

/* -------------------------------------------------------------- slices */

/* Records first..first+count of a store, read in one gather: dense
 * records back to back (record_size each, bounds NULL), ragged ones
 * packed ([ndim][dims][payload]) at bounds[0..count]. */
typedef struct zr_slice {
    const unsigned char *data;
    const uint64_t *bounds;
    uint64_t first, count, nbytes;
} zr_slice;

/* Read records [begin, end) of s in slices of about slice_bytes (at least
 * one record each) and call fn on each; stops at the first non-zero
 * status fn returns (returned), at a read failure (ZR_EXIT_FAILED,
 * printed with cmd and the store path) or when zr_interrupted() (0; the
 * caller checks). Memory: one slice. */
int zr_read_slices(const char *cmd, zrs_store *s, uint64_t begin, uint64_t end,
                   uint64_t slice_bytes, int (*fn)(void *ctx, const zr_slice *sl), void *ctx);


#endif
