/*
 * zrs_internal.h - shared pieces of libzrstore (never installed).
 */
#ifndef ZRS_INTERNAL_H
#define ZRS_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "zrstore.h"
#include "zrerror_sys.h"

/* A store's type identity: what store.zr says, plus the derived record
 * width (dense only; 0 for ragged). */
typedef struct zrs_identity {
    zrs_kind kind;
    zrs_dtype dtype;
    size_t ndim;                    /* dense only */
    uint64_t shape[ZRS_MAX_NDIM];   /* dense only, [0..ndim) */
    uint64_t record_size;           /* dense only */
    int has_uuid;                   /* store.zr has a "uuid" entry */
    uint8_t uuid[ZRS_UUID_BYTES];   /* its value, when has_uuid */
} zrs_identity;

/* Longest reason text the checkers below produce. */
#define ZRS_WHY_MAX 160

/* Check an identity and derive record_size. On failure writes a reason
 * into why[0..ZRS_WHY_MAX) and returns -1; the caller picks the status
 * (ZR_EINVAL on create, ZR_ENOTSTORE on open). */
int zrs__identity_check(zrs_identity *id, char *why);

/* Encode `id` (already checked) as the canonical msgpack map: its type
 * part (dtype, item_shape), plus its uuid when `with_uuid` and
 * id->has_uuid. On success *out is a malloc'd buffer of *len bytes the
 * caller frees. ZR_ENOMEM (with detail) if the buffer cannot grow. */
int zrs__identity_encode(const zrs_identity *id, int with_uuid, void **out, size_t *len);

/* The identity tag meta.zr keeps for store.zr's bytes buf[0..len) that
 * decoded to `id` (see docs/FORMAT.md): FNV-1a 32 of the bytes when they
 * carry no uuid, else of the canonical encoding of the type part alone
 * (so a new uuid leaves the tag as it is); never 0. 0 when out of memory
 * (the caller's ZR_ENOMEM). */
uint32_t zrs__identity_tag(const zrs_identity *id, const void *buf, size_t len);

/* A fresh random (RFC 4122 version 4) uuid. ZR_EIO with detail when the
 * OS's random source cannot be read. */
int zrs__uuid_new(uint8_t out[ZRS_UUID_BYTES]);

/* Decode and check store.zr's bytes. `file` names the file in messages.
 * ZR_ENOTSTORE (with detail saying what was wrong) on anything but
 * exactly one valid identity map; ZR_ENOMEM if decoding runs out of
 * memory. */
int zrs__identity_decode(const void *buf, size_t len, const char *file,
                         zrs_identity *out);

/* Check one packed ragged record of `size` bytes against `dtype`.
 * 0 on success (fills *ndim, dims and *payload_offset, any of which may
 * be NULL); -1 with a reason in why[0..ZRS_WHY_MAX) otherwise. */
int zrs__ragged_check(const unsigned char *rec, uint64_t size,
                      zrs_dtype dtype, size_t *ndim, uint64_t *dims,
                      uint64_t *payload_offset, char *why);

/* Bracket an engine call on a store reached through a borrow (concat.c
 * gathers through the engines directly): zrs__enter fails with
 * ZR_ECLOSED (detail naming the store and `what`) once zrs_close began;
 * after ZR_OK, zrs__leave must follow the call. zrs_close waits for every
 * entered call to leave before it closes the engine. */
int zrs__enter(const zrs_store *s, const char *what);
void zrs__leave(const zrs_store *s);

/* Borrowers from a reference count that includes the owner until it
 * closed (`closed` 0): refs - 1, else refs; clamped to [0, INT32_MAX]. */
static inline int zrs__borrowers(long refs, int closed)
{
    long n = refs - (closed ? 0 : 1);
    return n < 0 ? 0 : n > INT32_MAX ? INT32_MAX : (int)n;
}

#endif /* ZRS_INTERNAL_H */
