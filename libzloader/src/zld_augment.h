/*
 * zld_augment.h - libzloader internals: the random flips of zld_options
 * (see zld_flip in zloader.h), checked at create and applied by the
 * workers to each dense batch buffer in place.
 */
#ifndef ZLD_AUGMENT_H
#define ZLD_AUGMENT_H

#include "zloader.h"
#include "zrerror_sys.h"

/* ZR_EINVAL (with the detail set) unless every flip names a distinct dense
 * stream whose records are whole rows of width * elem_size bytes, with a
 * supported elem_size and p in [0, 1]. */
int zld_flips_check(const zld_flip *flips, size_t nflips, const zld_stream *streams,
                    size_t nstreams);

/* Reverse the last axis of each record i < count of `data` (records of
 * record_size bytes, one after another) whose mask[i] is set. */
void zld_flip_records(const zld_flip *f, const uint8_t *mask, unsigned char *data,
                      uint64_t count, uint64_t record_size);

#endif /* ZLD_AUGMENT_H */
