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
 * (a download of it is queued or running), DYING (being unmapped), and in
 * the low bits the number of readers that pinned it. Descriptors are never
 * freed while the ctx lives, so a reader may look at one without a lock:
 * it pins with a compare-and-swap that succeeds only on a mapped block, and
 * a block is unmapped only by a CAS from (MAPPED, 0 readers). */
#define ZRR_MAPPED (1u << 31)
#define ZRR_FETCHING (1u << 30)
#define ZRR_DYING (1u << 29)
#define ZRR_REFS ((1u << 24) - 1)

typedef struct zrr_blk {
    _Atomic uint32_t st;
    const unsigned char *map; /* the mapped cache file (data first) */
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

/* ---------------------------------------------------------- transfers */

typedef struct zrr_err_buf {
    int status;
    char msg[512];
} zrr_err_buf;

struct zrr_ticket {
    unsigned pending;   /* jobs of this ticket not finished (ctx lock) */
    zrr_err_buf err;    /* the first failure */
    size_t nwait;       /* blocks another request is downloading */
    struct { zrr_obj *obj; uint32_t b; } *wait;
    size_t wait_cap;
};

typedef struct zrr_job zrr_job;

struct zrr_ctx {
    zrr_config cfg;
    char *url;
    const _Atomic int *interrupt;
    zrp_mutex lock; /* objects list, job queue, tickets */
    zrp_cond cond;  /* a job finished */
    zrr_obj *objs;
    void *curl_share;
    /* The worker thread: runs every block download (curl multi) and the
     * cache's upkeep. */
    void *multi;
    zrp_thread worker;
    bool worker_started;
    bool curl_inited;
    _Atomic int stop;
    zrr_job *queue;       /* waiting to start (due time order not kept) */
    zrr_job *running;     /* transfers in the multi handle (worker only) */
    unsigned active;      /* running transfers */
    uint64_t fresh_bytes; /* downloaded since the last cache scan */
    uint64_t last_upkeep_ns, last_scan_ns;
    uint64_t tmp_seq;
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
int zrr_worker_start(zrr_ctx *c);
void zrr_worker_wake(zrr_ctx *c);
void zrr_worker_stop(zrr_ctx *c);
/* Percent-encode a key for a URL path ('/' kept). Malloc'd. */
char *zrr_url_path_escape(const char *s);

/* cache.c */
/* The block's bytes downloaded: write its cache file, map it, publish it
 * (worker thread). */
int zrr_cache_store(zrr_obj *o, uint32_t b, const unsigned char *data, uint32_t len);
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
