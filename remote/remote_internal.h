/*
 * remote_internal.h - shared by the remote module's files (config.c,
 * http.c, cache.c). Never installed.
 */
#ifndef ZR_REMOTE_INTERNAL_H
#define ZR_REMOTE_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "zr_platform.h"
#include "zr_remote.h"
#include "zrengine.h"
#include "zrerror_sys.h"

/* ------------------------------------------------------------- config */

typedef struct zrr_config {
    char *cache_root;      /* <ZR_CACHE_DIR>/zr-remote-v1 */
    uint64_t cache_bytes;  /* the cap */
    unsigned block_shift;  /* block size = 1 << block_shift */
    unsigned connections;  /* parallel requests */
    unsigned retries;      /* attempts after the first */
    long connect_timeout_s, read_timeout_s;
    bool s3;
    char *base;            /* objects are base + "/" + name */
    char *access_key, *secret_key, *token, *region;
} zrr_config;

/* Parse `url` and read the environment (and, for s3://, the AWS files). */
int zrr_config_load(zrr_config *cfg, const char *url);
void zrr_config_free(zrr_config *cfg);
/* Parse "123", "64K", "1.5G" (binary multiples); -1 when malformed. */
int zrr_parse_bytes(const char *s, uint64_t *out);

/* ------------------------------------------------------------- blocks */

/* A block's state word: MAPPED (its bytes are readable at `map`), FETCHING
 * (a download of it is queued or running), DYING (being unmapped), HEAP
 * (with MAPPED: the bytes are a heap copy that is not in the cache, kept
 * only while someone holds the block, see below), and in the low bits its
 * reference count. A reference is a reader's pin (taken only on a mapped
 * block, for one copy out of it) or a ticket's hold (taken on any block of
 * the ranges a gather asked for, from the request until zrr_fetch_release,
 * so nothing a gather is about to read can be unmapped under it, even when
 * eviction deletes its file). Descriptors are never freed while the ctx
 * lives, so a reader may look at one without a lock; a block is unmapped
 * only by a CAS from (MAPPED, 0 references). */
#define ZRR_MAPPED (UINT64_C(1) << 63)
#define ZRR_FETCHING (UINT64_C(1) << 62)
#define ZRR_DYING (UINT64_C(1) << 61)
#define ZRR_HEAP (UINT64_C(1) << 60)
#define ZRR_REFS ((UINT64_C(1) << 48) - 1)

typedef struct zrr_blk {
    _Atomic uint64_t st;
    const unsigned char *map; /* the mapped cache file (data first), or the heap copy */
    uint64_t map_len;
    _Atomic uint64_t used_ns; /* last time a gather asked for it */
    uint64_t touched_ns;      /* last time this process refreshed its mtime */
    uint64_t checked_ns;      /* last time this process saw the file exist */
} zrr_blk;

struct zrr_obj {
    zrr_ctx *ctx;
    char *name, *url, *etag;
    bool strong_etag;
    uint64_t size;
    uint64_t key; /* identity in the cache: FNV-1a 64 of url, etag, size */
    uint32_t nblocks;
    zrr_blk *blk;
    zrr_obj *next;
};

/* Take / drop a reference of any kind (see the state word). Dropping the
 * last reference of a HEAP block frees its bytes. */
void zrr_blk_ref(zrr_blk *k);
void zrr_blk_unref(zrr_blk *k);
/* Unmap (or free) the block's bytes if it is mapped and nobody references
 * it: 1 done, 0 not (cache.c). */
int zrr_blk_unmap(zrr_blk *k);

/* ---------------------------------------------------------- transfers */

typedef struct zrr_err_buf {
    int status;
    char msg[512];
} zrr_err_buf;

/* One request for a set of byte ranges (a gather's batch, or one read):
 * it holds every block of its ranges (see the state word) until
 * zrr_fetch_release. Fields under the ctx lock unless said otherwise. */
typedef struct zrr_held {
    zrr_obj *obj;
    uint32_t b;
} zrr_held;

struct zrr_ticket {
    unsigned pending;   /* jobs queued for this ticket and not finished */
    bool abandoned;     /* its waiter left (interrupted): the last job frees it */
    bool nocache;       /* its blocks exceed the cap: kept in memory, not written */
    zrr_err_buf err;    /* the first failure of its jobs */
    _Atomic bool gone;  /* abandoned, read by the worker's progress callback */
    const volatile int *interrupt; /* the requester's stop flag, or NULL (immutable) */
    /* Its waiter's own (no lock): the blocks it holds (one entry each) and,
     * among them, those that were not mapped when it started. */
    zrr_held *held, *miss;
    size_t nheld, held_cap, nmiss, miss_cap;
    unsigned rounds;    /* downloads started for its missing blocks */
};

typedef struct zrr_job zrr_job;

/* Cache-writer threads per ctx, at most (fewer on a machine with fewer
 * CPUs or a ctx with fewer connections). */
#define ZRR_MAX_WRITERS 8

struct zrr_ctx {
    zrr_config cfg;
    char *url;
    const _Atomic int *interrupt;
    zrp_mutex lock; /* objects list, job queue, tickets */
    zrp_cond cond;  /* a job finished */
    zrr_obj *objs;
    void *curl_share;
    /* The worker thread: runs every block download (curl multi) and the
     * cache's upkeep; it never writes a block itself. The writer threads
     * (and threads waiting for a ticket) write downloaded blocks to the
     * cache, one block at a time, so several blocks of one range are
     * written at once while the transfers go on. */
    void *multi;
    zrp_thread worker;
    bool worker_started;
    zrp_thread writers[ZRR_MAX_WRITERS];
    unsigned nwriters;
    bool curl_inited;
    _Atomic int stop;
    zrr_job *queue;       /* waiting to start (due time order not kept) */
    zrr_job *running;     /* transfers in the multi handle (worker only) */
    zrr_job *done;        /* downloaded, some of their blocks not yet claimed by a writer */
    unsigned idle_waiters; /* threads waiting for a ticket, free to write blocks */
    unsigned active;      /* running transfers */
    uint64_t fresh_bytes; /* downloaded since the last cache scan */
    uint64_t last_upkeep_ns, last_scan_ns;
    uint64_t tmp_seq;
    /* Cache writes that failed (blocks then served from memory), and the
     * first one's message (ctx lock). */
    uint64_t cache_failures;
    char cache_failure[512];
};

/* http.c: synchronous requests on the calling thread (with retries). */
typedef struct zrr_resp {
    long code;
    uint64_t total;   /* object size from Content-Range / Content-Length */
    char etag[256];
} zrr_resp;
/* HEAD object url: 1 exists (resp filled), 0 on 404, <0 error. */
int zrr_http_head(zrr_ctx *c, const char *url, zrr_resp *resp);
/* GET a whole object into a malloc'd buffer: 1, 0 on 404, <0. */
int zrr_http_get_all(zrr_ctx *c, const char *url, void **buf, size_t *len, size_t max_len);
/* Queue a range download of blocks [b0, b0 + n) of o for `t` (lock held). */
int zrr_job_queue(zrr_ctx *c, zrr_obj *o, uint32_t b0, uint32_t n, zrr_ticket *t);
/* Write (cache) one block of a downloaded job, finishing the job when its
 * last block is written: called by a writer thread or a waiting thread,
 * with the lock held (dropped while the block is written). 1 when a block
 * was taken from c->done, else 0. */
int zrr_job_store_one(zrr_ctx *c);
/* A ticket's free once its waiter left and its jobs are over (lock held). */
void zrr_ticket_free(zrr_ticket *t);
int zrr_worker_start(zrr_ctx *c);
void zrr_worker_wake(zrr_ctx *c);
void zrr_worker_stop(zrr_ctx *c);
/* Percent-encode a key for a URL path ('/' kept). Malloc'd. */
char *zrr_url_path_escape(const char *s);

/* cache.c */
/* The block's bytes downloaded (and checked): write its cache file and
 * publish a mapping of it; with `nocache`, or when the file cannot be
 * written (a full disk, an I/O error), publish a heap copy instead if a
 * ticket holds the block (else drop the bytes: a later read downloads them
 * again). 0 when the block was written to the cache, 1 when it is served
 * from memory only or dropped (never an error for the reader: the cache's
 * failure is counted in c->cache_failures with its first message). */
int zrr_cache_store(zrr_obj *o, uint32_t b, const unsigned char *data, uint32_t len, bool nocache);
/* Map block b from its cache file when present and valid: 1, 0 absent. */
int zrr_cache_map(zrr_obj *o, uint32_t b);
/* Periodic upkeep (worker): refresh the mtime of blocks in use, unmap
 * blocks evicted by others, evict least recently used files over the cap. */
void zrr_cache_upkeep(zrr_ctx *c, bool force_scan);
/* Unmap every block (close). */
void zrr_cache_release(zrr_obj *o);
uint32_t zrr_block_len(const zrr_obj *o, uint32_t b);

/* Error helpers: record into an error buffer / raise on this thread. */
void zrr_err_set(zrr_err_buf *e, int status, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

#endif
