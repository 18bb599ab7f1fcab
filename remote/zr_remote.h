/*
 * zr_remote.h - read stores over HTTP(S) and S3, through a byte-capped
 * local cache shared by the processes of one node.
 *
 * Internal to the project (never installed): libzrengine uses it for stores
 * opened by URL. It is its own module, not part of platform/: it holds no
 * OS call of its own (files, maps, locks and threads go through
 * zr_platform.h) and libcurl is portable; it is compiled only where libcurl
 * is found (meson option `remote`), and a build without it refuses URLs.
 *
 * URLs: http://host[:port]/path, https://..., s3://bucket/prefix. An
 * object is "<url>/<name>" (meta.zr, 0.chunk, ...). S3 requests are signed
 * with libcurl's SigV4 (CURLOPT_AWS_SIGV4); credentials, region and
 * endpoint come from the standard AWS variables and files:
 *   AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN,
 *   AWS_REGION / AWS_DEFAULT_REGION, AWS_ENDPOINT_URL_S3 / AWS_ENDPOINT_URL,
 *   AWS_PROFILE (default "default"), AWS_SHARED_CREDENTIALS_FILE
 *   (~/.aws/credentials), AWS_CONFIG_FILE (~/.aws/config: region,
 *   endpoint_url, and credentials too).
 * Without credentials, S3 requests go unsigned (public buckets). A custom
 * endpoint is addressed path-style (endpoint/bucket/key), AWS itself
 * virtual-hosted (bucket.s3.region.amazonaws.com/key).
 *
 * Tuning (environment, read at open; see docs/REMOTE.md):
 *   ZR_CACHE_DIR      cache folder (default $XDG_CACHE_HOME/loaderx or
 *                     ~/.cache/loaderx); entries live in its zr-remote-v1/
 *   ZR_CACHE_BYTES    the cap, bytes with an optional K/M/G/T suffix
 *                     (default 10G)
 *   ZR_CACHE_BLOCK    block size, a power of two from 4K to 64M (default 1M)
 *   ZR_REMOTE_CONNECTIONS   parallel requests per store (default 16)
 *   ZR_REMOTE_RETRIES       attempts after the first (default 5)
 *   ZR_REMOTE_CONNECT_TIMEOUT, ZR_REMOTE_READ_TIMEOUT   seconds (10, 30)
 *
 * Errors: 0 or a negative zr_status (zrerror.h) with zr_last_error()
 * naming the object URL and what happened (HTTP status, curl's message,
 * expected against got). Nothing prints or aborts.
 */
#ifndef ZR_REMOTE_H
#define ZR_REMOTE_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

typedef struct zrr_ctx zrr_ctx; /* one store's remote folder: client, cache, worker */
typedef struct zrr_obj zrr_obj; /* one object of it (a store file), owned by the ctx */

/* 1 when `s` starts with http://, https:// or s3://. */
int zrr_is_url(const char *s);

/* Open the remote folder `url` (no request is made yet). `interrupt`, when
 * not NULL, is polled while waiting: a non-zero value stops the wait with
 * ZR_EINTR. Free with zrr_close, which stops every transfer at once. */
int zrr_open(zrr_ctx **out, const char *url, const _Atomic int *interrupt);
void zrr_close(zrr_ctx *c);
const char *zrr_url(const zrr_ctx *c);

/* Look object `name` up (HEAD): its size and ETag are fixed from now on; a
 * later response that disagrees is ZR_ECORRUPT naming the object ("changed
 * on the server"). 1 and *out when it exists, 0 when the server says 404,
 * else a negative status. The object belongs to the ctx. */
int zrr_obj_open(zrr_ctx *c, const char *name, zrr_obj **out);
uint64_t zrr_obj_size(const zrr_obj *o);
const char *zrr_obj_url(const zrr_obj *o);

/* GET a whole small object (meta.zr, store.zr, dict.zr) into a malloc'd
 * buffer (caller frees), uncached. 1 when read, 0 when missing (404),
 * negative on error (ZR_ETOOBIG over max_len bytes). */
int zrr_get_small(zrr_ctx *c, const char *name, void **buf, size_t *len, size_t max_len);

/* Read bytes [off, off + len) of the object through the cache: blocks not
 * yet cached are downloaded (and kept) first. Thread-safe. `interrupt` as
 * for zrr_fetch_start. */
int zrr_pread(zrr_obj *o, void *buf, size_t len, uint64_t off, const volatile int *interrupt);

/* Byte ranges a gather is about to read. zrr_fetch_start holds every
 * block of them (no eviction can take one away until zrr_fetch_release)
 * and groups the missing ones into coalesced range requests (adjacent
 * blocks of one object, at most 8 MiB each, spread over the connections)
 * that run in parallel on the ctx's worker, their blocks cached by its
 * writer threads; zrr_fetch_wait waits for them and returns the first error
 * (all of one call's ranges must belong to one ctx). When the blocks of
 * one request exceed the cache's cap they are kept in memory for it and
 * not cached (they stream through). `interrupt`, when not NULL, is the
 * requester's own stop flag: a non-zero value makes zrr_fetch_wait return
 * ZR_EINTR and aborts the transfers only this request wanted (other
 * requests of the same ctx go on). zrr_fetch_release drops the holds
 * (always call it after zrr_fetch_start succeeded, whatever the wait
 * said; NULL is a no-op). zrr_prefetch (no wait, no holds) downloads in
 * the background; nothing is reported: a later read retries. */
typedef struct zrr_range {
    zrr_obj *obj;
    uint64_t lo, hi;
} zrr_range;
typedef struct zrr_ticket zrr_ticket;
int zrr_fetch_start(zrr_ctx *c, const zrr_range *r, size_t n, const volatile int *interrupt,
                    zrr_ticket **ticket);
int zrr_fetch_wait(zrr_ctx *c, zrr_ticket *ticket);
void zrr_fetch_release(zrr_ctx *c, zrr_ticket *ticket);
void zrr_prefetch(zrr_ctx *c, const zrr_range *r, size_t n);

/* The address of bytes [off, off + len) of the object when they lie
 * inside one block that is in memory (cached and mapped, or kept for its
 * holders); else NULL. The caller must hold that block (a ticket of
 * zrr_fetch_start covering the range, not yet released): a held block is
 * never unmapped, so the address is valid until the release. */
const unsigned char *zrr_held_span(zrr_obj *o, uint64_t off, size_t len);

/* Cache writes of this ctx that failed (a full disk, an I/O error) since
 * it opened; the blocks were served from memory instead. *msg (may be
 * NULL) gets the first failure's message. */
uint64_t zrr_cache_failures(zrr_ctx *c, char *msg, size_t cap);

/* Fraction of the object's blocks cached on this node (0..1), from up to
 * `samples` blocks spread over it. */
double zrr_cached_fraction(zrr_obj *o, unsigned samples);

/* The status of the calling thread's last failed zrr_pread/zrr_fetch_*
 * (its message is zr_last_error()); ZRP_ESHORT for a read past the end. */
int zrr_last_status(void);

/* Upload: PUT the local file `path` as object `name` (one request; S3
 * takes up to 5 GiB in one PUT, more than a chunk's 4 GiB), retried like
 * reads. */
int zrr_put_file(zrr_ctx *c, const char *name, const char *path, uint64_t len);
int zrr_put_bytes(zrr_ctx *c, const char *name, const void *buf, size_t len);

#endif
