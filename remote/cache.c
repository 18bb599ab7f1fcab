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

/* Publish a mapping of block b (map lock held by the caller's protocol:
 * only one thread maps a given block, see map_lock below). */
static zrp_mutex *map_lock(zrr_obj *o) { return &o->ctx->lock; }

static void publish(zrr_blk *k, const unsigned char *map, uint64_t len)
{
    k->map = map;
    k->map_len = len;
    uint64_t now = zrp_now_ns();
    k->touched_ns = now;
    k->checked_ns = now;
    atomic_fetch_or_explicit(&k->st, ZRR_MAPPED, memory_order_release);
}

/* Unmap block b if nobody reads it: 1 unmapped, 0 not (in use or not
 * mapped). */
static int try_unmap(zrr_blk *k)
{
    uint32_t s = atomic_load(&k->st);
    for (;;) {
        if (!(s & ZRR_MAPPED) || (s & ZRR_REFS) || (s & ZRR_DYING))
            return 0;
        if (atomic_compare_exchange_weak(&k->st, &s, (s & ~ZRR_MAPPED) | ZRR_DYING))
            break;
    }
    zrp_unmap((void *)k->map, k->map_len);
    k->map = NULL;
    k->map_len = 0;
    atomic_fetch_and(&k->st, ~ZRR_DYING);
    return 1;
}

/* Open and map a block file, checking its trailer (and, with `verify`,
 * its bytes). 1 mapped into *map, 0 absent or invalid (an invalid file is
 * deleted: it is a torn or damaged block of ours). */
static int map_file(zrr_obj *o, uint32_t b, bool verify, const unsigned char **map, uint64_t *mlen)
{
    char path[4096];
    block_path(o, b, path, sizeof path);
    zrp_file f;
    if (zrp_open(&f, path, ZRP_READ) < 0)
        return 0;
    uint32_t len = zrr_block_len(o, b);
    uint64_t size = 0;
    void *m = NULL;
    bool ok = zrp_file_size(f, &size) == 0 && size == (uint64_t)len + TRAILER &&
              zrp_map_readonly(f, size, &m) == 0;
    zrp_close(&f);
    if (ok) {
        const unsigned char *t = (const unsigned char *)m + len;
        ok = memcmp(t, "ZRB1", 4) == 0 && get32(t + 4) == len && get64(t + 8) == o->key &&
             get32(t + 16) == b && get32(t + 20) == o->ctx->cfg.block_shift &&
             get32(t + 28) == crc(t, 28) && (!verify || get32(t + 24) == crc(m, len));
    }
    if (!ok) {
        if (m)
            zrp_unmap(m, size);
        (void)zrp_unlink(path);
        return 0;
    }
    *map = m;
    *mlen = size;
    return 1;
}

/* Map block b's file (checking its bytes with `verify`) and publish the
 * mapping unless another thread did first: 1 mapped, 0 no valid file. */
static int map_and_publish(zrr_obj *o, uint32_t b, bool verify)
{
    const unsigned char *m;
    uint64_t mlen;
    if (!map_file(o, b, verify, &m, &mlen))
        return 0;
    zrr_blk *k = &o->blk[b];
    zrp_mutex_lock(map_lock(o));
    uint32_t s = atomic_load(&k->st);
    if ((s & (ZRR_MAPPED | ZRR_DYING)) == 0) {
        publish(k, m, mlen);
        m = NULL;
    }
    zrp_mutex_unlock(map_lock(o));
    if (m)
        zrp_unmap((void *)m, mlen); /* another thread mapped it first */
    return 1;
}

int zrr_cache_map(zrr_obj *o, uint32_t b)
{
    if (atomic_load(&o->blk[b].st) & ZRR_MAPPED)
        return 1;
    return map_and_publish(o, b, true);
}

int zrr_cache_store(zrr_obj *o, uint32_t b, const unsigned char *data, uint32_t len)
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
    zrp_file f;
    int rc = zrp_create_fresh(&f, tmp);
    if (rc == 0) {
        rc = zrp_pwrite_all(f, data, len, 0);
        if (rc == 0)
            rc = zrp_pwrite_all(f, t, TRAILER, len);
        int crc_ = zrp_close(&f);
        if (rc == 0)
            rc = crc_;
        if (rc == 0)
            rc = zrp_rename(tmp, path);
        if (rc < 0)
            (void)zrp_unlink(tmp);
    }
    if (rc < 0)
        return zr_set_error(ZR_EIO, "remote cache: cannot write block %u of %s to %s: %s", b, o->url,
                            c->cfg.cache_root, zr_os_strerror(rc));
    /* Map what was just written (its bytes were checked on arrival). */
    (void)map_and_publish(o, b, false);
    return ZR_OK;
}

void zrr_cache_release(zrr_obj *o)
{
    for (uint32_t b = 0; b < o->nblocks; b++) {
        zrr_blk *k = &o->blk[b];
        if (k->map)
            zrp_unmap((void *)k->map, k->map_len);
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
                        (void)try_unmap(k);
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
            if (!(atomic_load_explicit(&k->st, memory_order_relaxed) & ZRR_MAPPED))
                continue;
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
                (void)try_unmap(k);
        }
    }
    if (force_scan || c->fresh_bytes >= c->cfg.cache_bytes / 16 ||
        (c->fresh_bytes > 0 && now - c->last_scan_ns >= 30 * SEC)) {
        c->fresh_bytes = 0;
        c->last_scan_ns = now;
        evict(c);
    }
}
