/*
 * cache.c - the node-local block cache of remote objects.
 *
 * Layout: <ZR_CACHE_DIR>/zr-remote-v1/
 *   b/<key>-<shift>-<block>   one block of an object: its bytes, then a
 *                             32-byte trailer (below)
 *   tmp/<name>.<pid>.<seq>    a block being written
 *   evict.lock                taken (without waiting) by whoever evicts
 * <key> is 16 hex digits, the FNV-1a 64 of the object's URL, ETag and size,
 * so a changed object never meets its old blocks; <shift> the block size's
 * log2. Nothing else is ever created there, and eviction deletes only
 * names of this exact form (plus temporary files of processes that died):
 * the cache never deletes a file it did not write.
 *
 * Crash safety: a block is written whole under tmp/ and renamed into b/,
 * so a killed process leaves either no block or a complete one. The
 * trailer (magic "ZRB1", length, key, block number, shift, CRC-32 of the
 * bytes, CRC-32 of the trailer) is checked when a process first maps a
 * block it did not write, so a block torn by a power loss (rename durable,
 * bytes not) or damaged on disk is deleted and downloaded again, never
 * served.
 *
 * Sharing and eviction: every process of the node uses the same folder.
 * Blocks are mapped read-only; a process refreshes the modification time
 * of blocks it used (at most once a second each), so mtime orders blocks by
 * last use across processes. When a process has downloaded 1/16 of the
 * cap since its last look, it lists b/ and deletes the least recently used
 * blocks until the total is 7/8 of the cap. A deleted block stays readable
 * through mappings that processes already hold (POSIX keeps an unlinked
 * file's pages while mapped); each process notices within seconds (its
 * mtime refresh or a periodic stat finds the file gone) and unmaps it, so
 * the space returns. The cap can thus be exceeded briefly by the blocks in
 * flight and the blocks others still map.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "remote_internal.h"

#define TRAILER 32u
#define SEC 1000000000ull

static void put32(unsigned char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}
static void put64(unsigned char *p, uint64_t v)
{
    put32(p, (uint32_t)v);
    put32(p + 4, (uint32_t)(v >> 32));
}
static uint32_t get32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static uint64_t get64(const unsigned char *p) { return get32(p) | (uint64_t)get32(p + 4) << 32; }

static uint32_t crc(const unsigned char *p, size_t n)
{
    uLong c = crc32(0L, Z_NULL, 0);
    while (n > 0) {
        uInt k = n > (1u << 30) ? (1u << 30) : (uInt)n;
        c = crc32(c, p, k);
        p += k;
        n -= k;
    }
    return (uint32_t)c;
}

uint32_t zrr_block_len(const zrr_obj *o, uint32_t b)
{
    const unsigned shift = o->ctx->cfg.block_shift;
    uint64_t lo = (uint64_t)b << shift;
    uint64_t hi = lo + ((uint64_t)1 << shift);
    if (hi > o->size)
        hi = o->size;
    return (uint32_t)(hi - lo);
}

static void block_name(const zrr_obj *o, uint32_t b, char *buf, size_t cap)
{
    snprintf(buf, cap, "%016" PRIx64 "-%u-%u", o->key, o->ctx->cfg.block_shift, b);
}

static void block_path(const zrr_obj *o, uint32_t b, char *buf, size_t cap)
{
    char name[64];
    block_name(o, b, name, sizeof name);
    snprintf(buf, cap, "%s/b/%s", o->ctx->cfg.cache_root, name);
}

static void trailer(const zrr_obj *o, uint32_t b, const unsigned char *data, uint32_t len,
                    unsigned char t[TRAILER])
{
    memcpy(t, "ZRB1", 4);
    put32(t + 4, len);
    put64(t + 8, o->key);
    put32(t + 16, b);
    put32(t + 20, o->ctx->cfg.block_shift);
    put32(t + 24, crc(data, len));
    put32(t + 28, crc(t, 28));
}

/* Publish bytes of block b: a mapping of its cache file, or (heap) a
 * copy kept only for the tickets that hold it. Only when nobody mapped it
 * first and it is not being unmapped (ctx lock): 1 published, 0 not (the
 * caller keeps `map`). */
static int publish(zrr_obj *o, zrr_blk *k, const unsigned char *map, uint64_t len, bool heap)
{
    int done = 0;
    zrp_mutex_lock(&o->ctx->lock);
    uint64_t s = atomic_load(&k->st);
    if ((s & (ZRR_MAPPED | ZRR_DYING)) == 0) {
        k->map = map;
        k->map_len = len;
        uint64_t now = zrp_now_ns();
        k->touched_ns = now;
        k->checked_ns = now;
        atomic_fetch_or_explicit(&k->st, ZRR_MAPPED | (heap ? ZRR_HEAP : 0), memory_order_release);
        done = 1;
    }
    zrp_mutex_unlock(&o->ctx->lock);
    return done;
}

int zrr_blk_unmap(zrr_blk *k)
{
    uint64_t s = atomic_load(&k->st);
    for (;;) {
        if (!(s & ZRR_MAPPED) || (s & ZRR_REFS) || (s & ZRR_DYING))
            return 0;
        if (atomic_compare_exchange_weak(&k->st, &s, (s & ~ZRR_MAPPED) | ZRR_DYING))
            break;
    }
    if (s & ZRR_HEAP)
        free((void *)k->map);
    else
        zrp_unmap((void *)k->map, k->map_len);
    k->map = NULL;
    k->map_len = 0;
    atomic_fetch_and(&k->st, ~(ZRR_DYING | ZRR_HEAP));
    return 1;
}

/* The trailer of a block file of o at b is right (and, with `verify`, so
 * is the CRC-32 of its bytes). */
static bool block_ok(const zrr_obj *o, uint32_t b, const unsigned char *m, uint64_t size,
                     bool verify)
{
    uint32_t len = zrr_block_len(o, b);
    if (size != (uint64_t)len + TRAILER)
        return false;
    const unsigned char *t = m + len;
    return memcmp(t, "ZRB1", 4) == 0 && get32(t + 4) == len && get64(t + 8) == o->key &&
           get32(t + 16) == b && get32(t + 20) == o->ctx->cfg.block_shift &&
           get32(t + 28) == crc(t, 28) && (!verify || get32(t + 24) == crc(m, len));
}

int zrr_cache_map(zrr_obj *o, uint32_t b)
{
    zrr_blk *k = &o->blk[b];
    if (atomic_load(&k->st) & ZRR_MAPPED)
        return 1;
    /* A file of the cache this ctx did not write (another process's, or
     * one left from before): every byte is checked before it is served,
     * and an invalid one (torn by a power loss, damaged on disk) deleted. */
    char path[4096];
    block_path(o, b, path, sizeof path);
    zrp_file f;
    if (zrp_open(&f, path, ZRP_READ) < 0)
        return 0;
    uint64_t size = 0;
    void *m = NULL;
    bool ok = zrp_file_size(f, &size) == 0 && size == (uint64_t)zrr_block_len(o, b) + TRAILER &&
              zrp_map_readonly(f, size, &m) == 0;
    zrp_close(&f);
    if (ok)
        ok = block_ok(o, b, m, size, true);
    if (!ok) {
        if (m)
            zrp_unmap(m, size);
        (void)zrp_unlink(path);
        return 0;
    }
    if (!publish(o, k, m, size, false))
        zrp_unmap(m, size); /* another thread mapped it first */
    return (atomic_load(&k->st) & ZRR_MAPPED) != 0;
}

/* A cache write failed: count it, keep the first message. */
static void note_failure(zrr_ctx *c, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
static void note_failure(zrr_ctx *c, const char *fmt, ...)
{
    zrp_mutex_lock(&c->lock);
    if (c->cache_failures++ == 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(c->cache_failure, sizeof c->cache_failure, fmt, ap);
        va_end(ap);
    }
    zrp_mutex_unlock(&c->lock);
}

/* Write block b's file under tmp/, map it through the same descriptor (so
 * the mapping is ours whatever happens to the name later) and rename it
 * into b/. 0 and *map, or a negative platform code (nothing left behind). */
static int write_block(zrr_obj *o, uint32_t b, const unsigned char *data, uint32_t len,
                       void **map)
{
    zrr_ctx *c = o->ctx;
    char name[64], tmp[4096], path[4096];
    block_name(o, b, name, sizeof name);
    zrp_mutex_lock(&c->lock);
    uint64_t seq = ++c->tmp_seq;
    zrp_mutex_unlock(&c->lock);
    snprintf(tmp, sizeof tmp, "%s/tmp/%s.%ld.%" PRIu64, c->cfg.cache_root, name, zrp_pid(), seq);
    snprintf(path, sizeof path, "%s/b/%s", c->cfg.cache_root, name);
    unsigned char t[TRAILER];
    trailer(o, b, data, len, t);
    *map = NULL;
    /* The name is this process's own (pid, sequence); one left by a dead
     * process of the same pid is replaced. */
    const unsigned mode = ZRP_READ | ZRP_WRITE | ZRP_CREATE | ZRP_EXCLUSIVE;
    zrp_file f;
    int rc = zrp_open(&f, tmp, mode);
    if (rc == -EEXIST && zrp_unlink(tmp) == 0)
        rc = zrp_open(&f, tmp, mode);
    if (rc < 0)
        return rc;
    rc = zrp_pwrite_all(f, data, len, 0);
    if (rc == 0)
        rc = zrp_pwrite_all(f, t, TRAILER, len);
    if (rc == 0) {
        rc = zrp_map_readonly(f, (uint64_t)len + TRAILER, map);
        if (rc == 0 && !block_ok(o, b, *map, (uint64_t)len + TRAILER, false))
            rc = -EIO; /* what reads back is not what was written */
    }
    int crc_ = zrp_close(&f);
    if (rc == 0)
        rc = crc_;
    if (rc == 0)
        rc = zrp_rename(tmp, path);
    if (rc < 0) {
        if (*map)
            zrp_unmap(*map, (uint64_t)len + TRAILER);
        *map = NULL;
        (void)zrp_unlink(tmp);
    }
    return rc;
}

int zrr_cache_store(zrr_obj *o, uint32_t b, const unsigned char *data, uint32_t len, bool nocache)
{
    zrr_ctx *c = o->ctx;
    zrr_blk *k = &o->blk[b];
    if (!nocache) {
        void *map = NULL;
        int rc = write_block(o, b, data, len, &map);
        if (rc == 0) {
            if (!publish(o, k, map, (uint64_t)len + TRAILER, false))
                zrp_unmap(map, (uint64_t)len + TRAILER);
            return 0;
        }
        note_failure(c, "remote cache: cannot write block %u of %s to %s: %s (blocks are served "
                     "from memory instead)", b, o->url, c->cfg.cache_root, zr_os_strerror(rc));
    }
    /* Not cached: a copy for the requests that hold the block (the last
     * one to let go frees it); nobody holds it, nothing to keep. */
    if ((atomic_load(&k->st) & ZRR_REFS) == 0)
        return 1;
    unsigned char *copy = malloc(len ? len : 1);
    if (!copy)
        return 1; /* its waiter finds it missing and downloads it again */
    memcpy(copy, data, len);
    if (!publish(o, k, copy, len, true))
        free(copy);
    return 1;
}

void zrr_cache_release(zrr_obj *o)
{
    for (uint32_t b = 0; b < o->nblocks; b++) {
        zrr_blk *k = &o->blk[b];
        if (k->map) {
            if (atomic_load(&k->st) & ZRR_HEAP)
                free((void *)k->map);
            else
                zrp_unmap((void *)k->map, k->map_len);
        }
        k->map = NULL;
        atomic_store(&k->st, 0);
    }
}

/* ------------------------------------------------------------ upkeep */

typedef struct ent {
    char *name;
    uint64_t size, mtime;
} ent;

static int ent_cmp(const void *a, const void *b)
{
    const ent *x = a, *y = b;
    return x->mtime < y->mtime ? -1 : x->mtime > y->mtime ? 1 : strcmp(x->name, y->name);
}

/* "<16 hex>-<digits>-<digits>": a block name of this cache. */
static bool is_block_name(const char *s)
{
    for (int i = 0; i < 16; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
            return false;
    s += 16;
    for (int part = 0; part < 2; part++) {
        if (*s++ != '-')
            return false;
        if (*s < '0' || *s > '9')
            return false;
        while (*s >= '0' && *s <= '9')
            s++;
    }
    return *s == '\0';
}

/* Remove temporary files of processes that are gone. */
static void sweep_tmp(zrr_ctx *c)
{
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/tmp", c->cfg.cache_root);
    char **names = NULL;
    size_t n = 0;
    if (zrp_list_dir(dir, &names, &n) < 0)
        return;
    for (size_t i = 0; i < n; i++) {
        /* <block name>.<pid>.<seq> */
        char *dot = strchr(names[i], '.');
        if (!dot || dot - names[i] > 60)
            continue;
        *dot = '\0';
        bool ours = is_block_name(names[i]);
        *dot = '.';
        long pid = strtol(dot + 1, NULL, 10);
        if (ours && pid > 0 && pid != zrp_pid() && zrp_pid_alive(pid) == 0) {
            char p[4200];
            snprintf(p, sizeof p, "%s/%s", dir, names[i]);
            (void)zrp_unlink(p);
        }
    }
    zrp_free_names(names, n);
}

/* The block of this ctx named `name`, if any (for unmapping on evict). */
static zrr_blk *own_block(zrr_ctx *c, const char *name)
{
    uint64_t key = strtoull(name, NULL, 16);
    const char *p = strchr(name, '-');
    unsigned shift = (unsigned)strtoul(p + 1, NULL, 10);
    const char *q = strchr(p + 1, '-');
    uint32_t b = (uint32_t)strtoul(q + 1, NULL, 10);
    if (shift != c->cfg.block_shift)
        return NULL;
    zrp_mutex_lock(&c->lock);
    zrr_obj *objs = c->objs; /* objects are only added at the head */
    zrp_mutex_unlock(&c->lock);
    for (zrr_obj *o = objs; o; o = o->next)
        if (o->key == key && b < o->nblocks)
            return &o->blk[b];
    return NULL;
}

static void evict(zrr_ctx *c)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/evict.lock", c->cfg.cache_root);
    zrp_file lk;
    if (zrp_open(&lk, path, ZRP_READ | ZRP_WRITE | ZRP_CREATE) < 0)
        return;
    if (zrp_lock_exclusive(lk) < 0) {
        zrp_close(&lk); /* another process is evicting */
        return;
    }
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/b", c->cfg.cache_root);
    char **names = NULL;
    size_t n = 0;
    if (zrp_list_dir(dir, &names, &n) == 0) {
        ent *es = malloc((n ? n : 1) * sizeof *es);
        size_t m = 0;
        uint64_t total = 0;
        for (size_t i = 0; es && i < n; i++) {
            if (!is_block_name(names[i]))
                continue;
            snprintf(path, sizeof path, "%s/%s", dir, names[i]);
            uint64_t size, mtime;
            if (zrp_stat(path, &size, &mtime) < 0)
                continue;
            es[m].name = names[i];
            es[m].size = size;
            es[m].mtime = mtime;
            total += size;
            m++;
        }
        if (es && total > c->cfg.cache_bytes) {
            qsort(es, m, sizeof *es, ent_cmp);
            const uint64_t low = c->cfg.cache_bytes / 8 * 7;
            for (size_t i = 0; i < m && total > low; i++) {
                snprintf(path, sizeof path, "%s/%s", dir, es[i].name);
                if (zrp_unlink(path) == 0) {
                    total -= es[i].size;
                    zrr_blk *k = own_block(c, es[i].name);
                    if (k)
                        (void)zrr_blk_unmap(k);
                }
            }
        }
        free(es);
        zrp_free_names(names, n);
    }
    sweep_tmp(c);
    zrp_unlock(lk);
    zrp_close(&lk);
}

void zrr_cache_upkeep(zrr_ctx *c, bool force_scan)
{
    const uint64_t now = zrp_now_ns();
    zrp_mutex_lock(&c->lock);
    zrr_obj *objs = c->objs; /* objects are only added at the head */
    zrp_mutex_unlock(&c->lock);
    char path[4096];
    for (zrr_obj *o = objs; o; o = o->next) {
        for (uint32_t b = 0; b < o->nblocks; b++) {
            zrr_blk *k = &o->blk[b];
            uint64_t st = atomic_load_explicit(&k->st, memory_order_relaxed);
            if (!(st & ZRR_MAPPED))
                continue;
            if (st & ZRR_HEAP) { /* a copy whose holders are gone */
                (void)zrr_blk_unmap(k);
                continue;
            }
            uint64_t used = atomic_load_explicit(&k->used_ns, memory_order_relaxed);
            int rc = 1;
            if (used > k->touched_ns && now - k->touched_ns >= SEC) {
                block_path(o, b, path, sizeof path);
                rc = zrp_touch(path);
                if (rc == 0)
                    k->touched_ns = k->checked_ns = now;
            } else if (now - k->checked_ns >= 10 * SEC) {
                block_path(o, b, path, sizeof path);
                rc = zrp_stat(path, NULL, NULL);
                if (rc == 0)
                    k->checked_ns = now;
            }
            if (rc < 0) /* evicted (or damaged) elsewhere: give the space back */
                (void)zrr_blk_unmap(k);
        }
    }
    zrp_mutex_lock(&c->lock);
    bool scan = force_scan || c->fresh_bytes >= c->cfg.cache_bytes / 16 ||
                (c->fresh_bytes > 0 && now - c->last_scan_ns >= 30 * SEC);
    if (scan) {
        c->fresh_bytes = 0;
        c->last_scan_ns = now;
    }
    zrp_mutex_unlock(&c->lock);
    if (scan)
        evict(c);
}
