/*
 * zld_state.h - libzloader internals: what zld_create_streams decides
 * before it allocates (the plan), and the loader state built from it
 * (state.c). Never installed.
 */
#ifndef ZLD_STATE_H
#define ZLD_STATE_H

#include "zloader.h"
#include "zrerror_sys.h"
#include "zld_pack.h"

/* The index space the sampler draws from, by step: steps [from, next
 * segment's from) use `length` records, and step s is the sampler's step
 * s - from + base. One segment {0, length, 0} unless a resume continued
 * on grown data (see docs/PYTHON.md, Resume): then the cycle in flight
 * finishes on the old length and the next segment starts a fresh cycle
 * on the new one. */
typedef struct zld_segment {
    uint64_t from;
    uint64_t length;
    uint64_t base;
} zld_segment;

#define ZLD_MAX_SEGMENTS 2
#define ZLD_NOTE_MAX 512

/* Everything zld_create_streams decided from the streams and options,
 * before anything is allocated. Every options->version check lives in
 * normalise_options (loader.c), which fills this; later phases read only
 * the plan. The option arrays (bucket_lengths, flips, names) are still
 * the caller's: the loader copies them when it allocates. */
typedef struct zld_plan {
    zld_options opt;       /* resolved, version = ZLD_OPTIONS_VERSION */
    zsm_config cfg;        /* the sampler; cfg.length = the streams' length */
    int finite;            /* opt.pass: the steps of `pass` */
    zsm_pass pass;
    uint64_t steps;        /* finite: the pass's steps; endless: UINT64_MAX */
    int even;              /* finite with opt.even_batches: padded steps */
    uint64_t own_steps;    /* finite: this rank's own steps (< steps when even pads) */
    uint64_t pad_index;    /* even: the pass's first record */
    int pack;              /* pack mode: rows of packed documents (zld_pack.h) */
    zld_pack_setup packset;
    int bucket;            /* length-bucketed steps */
    uint64_t window;       /* bucket window (global batches) */
    unsigned readahead;    /* steps hinted ahead at start */
    int readahead_auto;
    unsigned nthreads;     /* worker threads */
    size_t nstreams;
    uint64_t length;       /* the streams' common length */
    size_t names_len;      /* bytes of the streams' names, NULs included */
    size_t labels_len;     /* bytes of opt.names, NULs included; 0 = none given */
    zld_segment seg[ZLD_MAX_SEGMENTS];
    size_t nseg;
    char note[ZLD_NOTE_MAX]; /* a resume's warning, "" for none */
} zld_plan;

/* The label of stream k in the state: opt.names[k] when given, else the
 * stream's name. */
const char *zld__label(const zld_plan *p, const zld_stream *streams, size_t k);

/* The loader state (see zld_state_json in zloader.h) of a loader made
 * from plan p over `streams`, whose next step is `step`: a malloc'd
 * NUL-terminated JSON text in *out. ZR_ENOMEM with detail. */
int zld__state_text(const zld_plan *p, const zld_stream *streams, uint64_t step, char **out);

/* Check p->opt.resume (a state text) against the loader p describes over
 * `streams`: start_step becomes the state's step, the segments come from
 * the state (extended when p->opt.resume_flags allows grown data), and
 * p->note says what was not checked. ZR_EINVAL naming every difference,
 * or a state that is not one. */
int zld__state_resume(zld_plan *p, const zld_stream *streams);

/* Which segment holds `step`. */
const zld_segment *zld__segment(const zld_plan *p, uint64_t step);

/* The store behind a stream made by zld_stream_from_store, else NULL
 * (loader.c). */
zrs_store *zld__stream_store(const zld_stream *st);

#endif
