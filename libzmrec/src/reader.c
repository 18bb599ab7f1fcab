/*
 * reader.c - open, check and read a collection. Every call runs its own
 * read transaction and copies what it returns (LMDB's map is only stable
 * while the transaction is open, and values under ~2 KiB are unaligned).
 */
#include <errno.h>
#include <lmdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "zmr_internal.h"
#include "zr_platform.h"

#define BAD(...) zmr_err(ZMR_ECORRUPT, __VA_ARGS__)

struct zmr_reader {
    MDB_env *env;
    MDB_dbi dbi;
    char *meta_text;
    json_object *meta, *schema_meta;
    json_object *schema_blocks; /* sequence_schema.blocks when it states every trailing shape, else NULL */
    json_object *decl_blocks;   /* sequence_schema.blocks as stored (NULL when absent) */
    uint64_t n_records, n_frames;
    int molrec;
    uint64_t *first, *nfr, *natoms;
    uint8_t *has_traj;
    char *path;                         /* for re-checking the file's size */
    const unsigned char *map_lo;        /* LMDB's map of the file ... */
    uint64_t map_len;                   /* ... and the bytes of it the file backs */
};

static zmr_status begin(const zmr_reader *r, MDB_txn **txn)
{
    int rc = mdb_txn_begin(r->env, NULL, MDB_RDONLY, txn);
    if (rc == MDB_MAP_RESIZED)
        return zmr_err(ZMR_EBUSY, "%s: read transaction: the file grew past the pages it had when opened (a "
                                  "writer is running on it); open it again", r->path);
    if (rc)
        return zmr_err(rc == MDB_READERS_FULL ? ZMR_EBUSY : ZMR_EIO, "%s: read transaction: %s", r->path,
                       mdb_strerror(rc));
    return ZMR_OK;
}

/* A liblmdb failure while reading an open environment: a page it cannot
 * find or a structure it finds broken is damage (ZMR_ECORRUPT), anything
 * else the OS's (ZMR_EIO). */
static zmr_status lmdb_read_status(int rc)
{
    return rc == MDB_PAGE_NOTFOUND || rc == MDB_CORRUPTED || rc == MDB_INCOMPATIBLE || rc == MDB_BAD_TXN
               ? ZMR_ECORRUPT
               : ZMR_EIO;
}

/* The file's length as LMDB maps it (at most its map size) into *len,
 * and its whole size into *file_size when not NULL. */
static zmr_status mapped_len(const zmr_reader *r, uint64_t *len, uint64_t *file_size)
{
    MDB_envinfo info;
    if (mdb_env_info(r->env, &info))
        return zmr_err(ZMR_EIO, "open: %s: cannot read the LMDB environment's info", r->path);
    zrp_file fd;
    uint64_t size = 0;
    int rc = zrp_open(&fd, r->path, ZRP_READ);
    if (rc == 0) {
        rc = zrp_file_size(fd, &size);
        zrp_close(&fd);
    }
    if (rc < 0)
        return zmr_err(ZMR_EIO, "open: %s: cannot stat the file (error %d)", r->path, rc);
    *len = size < info.me_mapsize ? size : (uint64_t)info.me_mapsize;
    if (file_size)
        *file_size = size;
    return ZMR_OK;
}

static int within(const MDB_val *v, const unsigned char *lo, uint64_t len)
{
    const unsigned char *p = v->mv_data;
    if (v->mv_size == 0)
        return 1;
    if (v->mv_size > len)
        return 0;
    return lo == NULL || (p >= lo && (uint64_t)(p - lo) <= len - v->mv_size);
}

/* A key or value liblmdb returned lies inside the mapped file. On a
 * damaged page it can point anywhere or state any size (a node offset
 * past its page, a length past the file's end) and liblmdb does not
 * check: reading it would fault, so it is refused as damage instead. When
 * the map's address is unknown only the length is bounded. A writer
 * beside us may have grown the file since it was measured, so a miss
 * measures again (into locals: a reader is shared by threads). */
static zmr_status in_map(const zmr_reader *r, const MDB_val *v, const char *what)
{
    uint64_t len = 0;
    if (within(v, r->map_lo, r->map_len))
        return ZMR_OK;
    zmr_status st = mapped_len(r, &len, NULL);
    if (st < 0)
        return st;
    if (within(v, r->map_lo, len))
        return ZMR_OK;
    return BAD("%s: a %s of %zu bytes lies outside the file: LMDB page damaged", r->path, what, v->mv_size);
}

/* Where LMDB mapped the file (r->map_len is already measured, by
 * check_lmdb_env). liblmdb does not say (mdb_env_info's
 * me_mapaddr is only a fixed-map request), so it is found from the first
 * key: the key lies in a leaf page LMDB has just read, and that page's
 * header names its page number. Each page start the key could lie in
 * (pages are aligned to the page size or 4 KiB, the smallest OS page) is
 * tried: its bytes up to the key's end must equal the file's at
 * page number x page size. Exactly one candidate must match; otherwise
 * map_lo stays NULL and only lengths are bounded. */
static zmr_status locate_map(zmr_reader *r, MDB_txn *txn)
{
    MDB_stat ms;
    MDB_envinfo info;
    MDB_cursor *cur;
    MDB_val k, v;
    r->map_lo = NULL;
    if (mdb_env_stat(r->env, &ms) || mdb_env_info(r->env, &info) || mdb_cursor_open(txn, r->dbi, &cur))
        return ZMR_OK;
    int rc = mdb_cursor_get(cur, &k, &v, MDB_FIRST);
    mdb_cursor_close(cur);
    uint64_t ps = ms.ms_psize, step = ps < 4096 ? ps : 4096;
    if (rc || ps < 256 || ps > 65536 || k.mv_size == 0 || k.mv_size > ps - 16)
        return ZMR_OK;
    const unsigned char *key = k.mv_data, *found = NULL;
    unsigned char *page = malloc(ps);
    zrp_file fd;
    if (page == NULL || zrp_open(&fd, r->path, ZRP_READ) < 0) {
        free(page);
        return ZMR_OK;
    }
    int matches = 0;
    const unsigned char *s = key - (uintptr_t)key % step;
    for (; (uint64_t)(key + k.mv_size - s) <= ps && matches < 2; s -= step) {
        uint64_t pgno, n = (uint64_t)(key + k.mv_size - s);
        memcpy(&pgno, s, sizeof pgno);
        if (pgno < 2 || pgno > info.me_last_pgno || zrp_pread_all(fd, page, n, pgno * ps) < 0 || memcmp(page, s, n))
            continue;
        found = s - pgno * ps;
        matches++;
    }
    zrp_close(&fd);
    free(page);
    if (matches == 1)
        r->map_lo = found;
    return ZMR_OK;
}

/* Get key into *v; ZMR_ERANGE (no detail) when absent. */
static zmr_status get(const zmr_reader *r, MDB_txn *txn, const void *key, size_t klen, MDB_val *v)
{
    MDB_val k = {klen, (void *)key};
    int rc = mdb_get(txn, r->dbi, &k, v);
    if (rc == MDB_NOTFOUND)
        return ZMR_ERANGE;
    if (rc)
        return zmr_err(lmdb_read_status(rc), "get: %s", mdb_strerror(rc));
    return in_map(r, v, "value");
}

/* Get numbered key `prefix` + n (9 bytes: the letter, n big-endian) into
 * *v, and write its readable name ("f/12") into name[32] for details;
 * ZMR_ERANGE (no detail) when absent. */
static zmr_status get_numbered(const zmr_reader *r, MDB_txn *txn, char prefix, uint64_t n, char name[32],
                               MDB_val *v)
{
    unsigned char k[9];
    k[0] = (unsigned char)prefix;
    for (int i = 0; i < 8; i++)
        k[1 + i] = (unsigned char)(n >> (56 - 8 * i));
    snprintf(name, 32, "%c/%llu", prefix, (unsigned long long)n);
    return get(r, txn, k, 9, v);
}

void zmr_close(zmr_reader *r)
{
    if (r == NULL)
        return;
    if (r->env)
        mdb_env_close(r->env);
    free(r->meta_text);
    json_object_put(r->meta);
    free(r->first);
    free(r->nfr);
    free(r->natoms);
    free(r->has_traj);
    free(r->path);
    free(r);
}

static zmr_status check_meta(zmr_reader *r)
{
    json_object *m = r->meta, *v, *coll;
    if (!json_object_is_type(m, json_type_object))
        return BAD("meta: must be a JSON object");
    if (!json_object_object_get_ex(m, "layout", &v) || !json_object_is_type(v, json_type_string) ||
        strcmp(json_object_get_string(v), "mrec-lmdb"))
        return zmr_err(ZMR_ENOTCOLL, "meta: layout must be \"mrec-lmdb\", got %.40s",
                       v ? zmr_json_text(v) : "nothing");
    if (!json_object_object_get_ex(m, "layout_version", &v) || !json_object_is_type(v, json_type_int))
        return BAD("meta: layout_version is required, an integer");
    if (json_object_get_int64(v) != ZMR_LAYOUT_VERSION)
        return zmr_err(ZMR_EUNSUPPORTED, "meta: layout_version %s is not supported (exactly %d)", zmr_json_text(v),
                       ZMR_LAYOUT_VERSION);
    r->molrec = 0;
    if (json_object_object_get_ex(m, "collection", &coll)) {
        if (!json_object_is_type(coll, json_type_object))
            return BAD("meta: collection must be an object");
        if (json_object_object_get_ex(coll, "molrec_version", &v)) {
            if (!json_object_is_type(v, json_type_int))
                return BAD("meta: collection.molrec_version must be an integer (never null), got %.40s",
                           zmr_json_text(v));
            int64_t mv = json_object_get_int64(v);
            if (mv < ZMR_MOLREC_VERSION_MIN || mv > ZMR_MOLREC_VERSION_MAX)
                return zmr_err(mv < 1 ? ZMR_ECORRUPT : ZMR_EUNSUPPORTED,
                               "meta: collection.molrec_version %lld is not in %d..%d", (long long)mv,
                               ZMR_MOLREC_VERSION_MIN, ZMR_MOLREC_VERSION_MAX);
            r->molrec = (int)mv;
        }
    }
    if (!json_object_object_get_ex(m, "n_records", &v) || zmr_json_u64(v, &r->n_records) < 0)
        return BAD("meta: n_records must be a non-negative integer");
    if (!json_object_object_get_ex(m, "n_frames", &v) || zmr_json_u64(v, &r->n_frames) < 0)
        return BAD("meta: n_frames must be a non-negative integer");
    if (json_object_object_get_ex(m, "sequence_schema", &v)) {
        json_object *sm;
        if (!json_object_is_type(v, json_type_object))
            return BAD("meta: sequence_schema must be an object");
        if (json_object_object_get_ex(v, "meta", &sm)) {
            if (!json_object_is_type(sm, json_type_object))
                return BAD("meta: sequence_schema.meta must be an object");
            json_object_object_foreach(sm, key, decl) {
                zmr_tag tag;
                json_object *fill;
                zmr_status st = zmr_schema_meta_decl(decl, key, &tag, &fill, NULL);
                if (st < 0)
                    return zmr_err_prefix(st, "meta");
            }
            r->schema_meta = sm;
        }
        /* a declaration in the layout's form (every column with its
         * trailing shape) holds every update to it; files written before
         * declarations stated trailing shapes are read as they are */
        json_object *sb, *bd, *cols, *x;
        if (json_object_object_get_ex(v, "blocks", &sb)) {
            if (!json_object_is_type(sb, json_type_object))
                return BAD("meta: sequence_schema.blocks must be an object");
            bool full = json_object_object_length(sb) > 0;
            json_object_object_foreach(sb, bname, bdecl) {
                bd = bdecl;
                if (!json_object_is_type(bd, json_type_object))
                    return BAD("meta: sequence_schema.blocks.%s must be an object", bname);
                if (!json_object_object_get_ex(bd, "columns", &cols))
                    continue;
                if (!json_object_is_type(cols, json_type_object))
                    return BAD("meta: sequence_schema.blocks.%s.columns must be an object", bname);
                json_object_object_foreach(cols, cname, cd) {
                    zmr_dtype dt;
                    if (!json_object_is_type(cd, json_type_object) || !json_object_object_get_ex(cd, "dtype", &x) ||
                        !json_object_is_type(x, json_type_string) || zmr_dtype_parse(json_object_get_string(x), &dt) < 0)
                        return BAD("meta: sequence_schema.blocks.%s.columns.%s: dtype must be one of the 13", bname,
                                   cname);
                    if (!json_object_object_get_ex(cd, "trailing", &x))
                        full = false;
                    else if (!json_object_is_type(x, json_type_array))
                        return BAD("meta: sequence_schema.blocks.%s.columns.%s: trailing must be an array", bname,
                                   cname);
                }
            }
            r->schema_blocks = full ? sb : NULL;
            r->decl_blocks = sb;
        }
    }
    return ZMR_OK;
}

/* Stored update u (key `name`) against a declaration in the layout's form:
 * every block declared, presenting exactly its declared columns at the
 * declared dtype and trailing shape, masks only on nullable columns. */
static zmr_status check_declared(const zmr_reader *r, const zmr_frame *u, const char *name)
{
    if (r->schema_blocks == NULL)
        return ZMR_OK;
    for (size_t b = 0; b < u->nblocks; b++) {
        const struct zmr_block *ub = &u->blocks[b];
        json_object *bd, *cols = NULL, *cd, *x;
        if (!json_object_object_get_ex(r->schema_blocks, ub->name, &bd))
            return BAD("%s: block %s is not declared in sequence_schema.blocks (every trajectory block is)", name,
                       ub->name);
        json_object_object_get_ex(bd, "columns", &cols);
        int ndecl = cols ? json_object_object_length(cols) : 0;
        if ((int)ub->ncols != ndecl)
            return BAD("%s: block %s presents %zu columns, sequence_schema declares %d (an update presents all of "
                       "a block's declared columns)", name, ub->name, ub->ncols, ndecl);
        for (size_t c = 0; c < ub->ncols; c++) {
            const struct zmr_col *col = &ub->cols[c];
            if (!json_object_object_get_ex(cols, col->name, &cd))
                return BAD("%s: column %s/%s is not declared in sequence_schema.blocks.%s", name, ub->name,
                           col->name, ub->name);
            json_object_object_get_ex(cd, "dtype", &x);
            bool same = !strcmp(json_object_get_string(x), zmr_dtype_name(col->dtype));
            json_object_object_get_ex(cd, "trailing", &x);
            same = same && json_object_array_length(x) == col->ndim - 1;
            for (size_t k = 1; same && k < col->ndim; k++) {
                uint64_t d;
                same = zmr_json_u64(json_object_array_get_idx(x, k - 1), &d) == 0 && d == col->shape[k];
            }
            if (!same)
                return BAD("%s: column %s/%s is not the dtype and trailing shape sequence_schema declares (%s)", name,
                           ub->name, col->name, zmr_json_text(cd));
            if (col->validity && !(json_object_object_get_ex(cd, "nullable", &x) && json_object_get_boolean(x)))
                return BAD("%s: column %s/%s carries a mask but sequence_schema does not declare it nullable", name,
                           ub->name, col->name);
        }
    }
    return ZMR_OK;
}

static zmr_status check_index(zmr_reader *r, const MDB_val *v)
{
    zmr_frame *f;
    zmr_status st = zmr_frame_decode(&f, v->mv_data, v->mv_size, ZMR_FRAME_INDEX, "index");
    if (st < 0)
        return st;
    static const char *const names[4] = {"first_frame", "n_frames", "n_atoms", "has_trajectory"};
    zmr_column c[4];
    size_t b;
    if (zmr_frame_find_block(f, "records", &b) < 0) {
        zmr_frame_free(f);
        return BAD("index: block \"records\" is missing");
    }
    for (int k = 0; k < 4; k++) {
        zmr_dtype want = k == 3 ? ZMR_BOOL : ZMR_U64;
        if (zmr_frame_find_column(f, "records", names[k], &c[k]) < 0 || c[k].dtype != want || c[k].ndim != 1) {
            zmr_frame_free(f);
            return BAD("index: column records/%s must be a 1-d %s column", names[k], zmr_dtype_name(want));
        }
    }
    uint64_t R = zmr_frame_block_count(f, b);
    if (R != r->n_records) {
        zmr_frame_free(f);
        return BAD("index: records count %llu != n_records %llu in meta", (unsigned long long)R,
                   (unsigned long long)r->n_records);
    }
    r->first = malloc(R ? R * 8 : 8);
    r->nfr = malloc(R ? R * 8 : 8);
    r->natoms = malloc(R ? R * 8 : 8);
    r->has_traj = malloc(R ? R : 1);
    if (!r->first || !r->nfr || !r->natoms || !r->has_traj) {
        zmr_frame_free(f);
        return zmr_err(ZMR_ENOMEM, "index: no memory for %llu rows", (unsigned long long)R);
    }
    if (R) {
        memcpy(r->first, c[0].data, R * 8);
        memcpy(r->nfr, c[1].data, R * 8);
        memcpy(r->natoms, c[2].data, R * 8);
        memcpy(r->has_traj, c[3].data, R);
    }
    zmr_frame_free(f);
    uint64_t sum = 0;
    for (uint64_t k = 0; k < R; k++) {
        if (r->first[k] != sum)
            return BAD("index: first_frame[%llu] = %llu breaks the prefix sum of n_frames (expected %llu)",
                       (unsigned long long)k, (unsigned long long)r->first[k], (unsigned long long)sum);
        if (r->nfr[k] > UINT64_MAX - sum)
            return BAD("index: n_frames overflows at record %llu", (unsigned long long)k);
        sum += r->nfr[k];
        if (!r->has_traj[k] && r->nfr[k])
            return BAD("index: record %llu has n_frames %llu but has_trajectory false", (unsigned long long)k,
                       (unsigned long long)r->nfr[k]);
    }
    if (sum != r->n_frames)
        return BAD("index: the last first_frame + n_frames is %llu, meta says n_frames %llu",
                   (unsigned long long)sum, (unsigned long long)r->n_frames);
    return ZMR_OK;
}

/* ------------------------------------------------- LMDB file checks
 *
 * LMDB maps the file and trusts it: a page past the end of a truncated file
 * is a SIGBUS, and LMDB keeps no checksums. Before LMDB sees the file, its
 * two meta pages are read here with plain positional reads and checked
 * (liblmdb 0.9 on-disk layout, 64-bit: a 16-byte page header, then
 * MDB_meta), and the file must hold every page the newest meta uses.
 * Damage inside the B-tree pages themselves cannot be detected this way
 * (see docs/MREC.md). */

#define LMDB_MAGIC 0xBEEFC0DEu
#define LMDB_DATA_VERSION 1u
#define LMDB_P_META 0x08u
#define LMDB_P_INVALID UINT64_MAX
#define LMDB_PAGEHDR 16u
/* MDB_meta, after the page header: magic u32, version u32, address, mapsize,
 * dbs[2] (48 bytes each: pad u32 (= page size in dbs[0]), flags u16,
 * depth u16, branch, leaf, overflow, entries, root), last_pg, txnid. */
#define LMDB_META_BYTES 136u
#define LMDB_DB_BYTES 48u
#define LMDB_MAPSIZE_AT 16u
#define LMDB_DBS_AT 24u
#define LMDB_LAST_PG_AT 120u
#define LMDB_TXNID_AT 128u
/* The largest map a writer can have had: it mapped mm_mapsize bytes of its
 * address space, and no 64-bit machine gives a process more than 2^56
 * (57-bit virtual addresses, the kernel's half excluded). */
#define LMDB_MAPSIZE_MAX ((uint64_t)1 << 56)

struct lmdb_meta {
    uint32_t psize;
    uint64_t mapsize, root[2], last_pg, txnid;
};

static uint32_t le32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint16_t le16(const unsigned char *p) { return (uint16_t)(p[0] | p[1] << 8); }

/* Meta page `which` (0 or 1) at `off`; psize0 the page size meta 0 gave
 * (0 while reading meta 0). */
static zmr_status read_lmdb_meta(zrp_file fd, const char *path, uint64_t size, int which, uint64_t off,
                                 uint32_t psize0, struct lmdb_meta *m)
{
    unsigned char b[LMDB_PAGEHDR + LMDB_META_BYTES];
    if (off + sizeof b > size)
        return which == 0 ? zmr_err(ZMR_ENOTCOLL, "not an mrec-lmdb collection: %s is %llu bytes, too short for "
                                    "an LMDB file", path, (unsigned long long)size)
                          : zmr_err(ZMR_ECORRUPT, "%s: file truncated: %llu bytes, LMDB meta page 1 needs %llu",
                                    path, (unsigned long long)size, (unsigned long long)(off + sizeof b));
    int rc = zrp_pread_all(fd, b, sizeof b, off);
    if (rc < 0)
        return zmr_err(ZMR_EIO, "%s: cannot read LMDB meta page %d (error %d)", path, which, rc);
    const unsigned char *mm = b + LMDB_PAGEHDR;
    uint32_t magic = le32(mm), version = le32(mm + 4);
    if (magic != LMDB_MAGIC)
        return which == 0 ? zmr_err(ZMR_ENOTCOLL, "not an mrec-lmdb collection: %s is not an LMDB file (magic "
                                    "0x%08X, expected 0x%08X)", path, magic, LMDB_MAGIC)
                          : zmr_err(ZMR_ECORRUPT, "%s: LMDB meta page 1 is damaged: magic 0x%08X, expected "
                                    "0x%08X", path, magic, LMDB_MAGIC);
    if (version != LMDB_DATA_VERSION)
        return zmr_err(which == 0 ? ZMR_EUNSUPPORTED : ZMR_ECORRUPT,
                       "%s: LMDB meta page %d: data version %u, this liblmdb reads %u", path, which, version,
                       LMDB_DATA_VERSION);
    uint64_t pgno = zmr_load_u64le(b);
    uint16_t flags = le16(b + 10);
    if (pgno != (uint64_t)which || !(flags & LMDB_P_META))
        return zmr_err(ZMR_ECORRUPT, "%s: LMDB meta page %d is damaged: page number %llu, flags 0x%X", path,
                       which, (unsigned long long)pgno, flags);
    m->psize = le32(mm + LMDB_DBS_AT);
    if (m->psize < 512 || m->psize > 65536 || (m->psize & (m->psize - 1)) || (psize0 && m->psize != psize0))
        return zmr_err(ZMR_ECORRUPT, "%s: LMDB meta page %d is damaged: page size %u (expected a power of two "
                       "in 512..65536%s)", path, which, m->psize, psize0 ? ", the same in both meta pages" : "");
    for (int d = 0; d < 2; d++)
        m->root[d] = zmr_load_u64le(mm + LMDB_DBS_AT + d * LMDB_DB_BYTES + 40);
    m->last_pg = zmr_load_u64le(mm + LMDB_LAST_PG_AT);
    m->txnid = zmr_load_u64le(mm + LMDB_TXNID_AT);
    if (m->last_pg < 1 || m->last_pg > UINT64_MAX / m->psize - 1)
        return zmr_err(ZMR_ECORRUPT, "%s: LMDB meta page %d is damaged: last page %llu", path, which,
                       (unsigned long long)m->last_pg);
    for (int d = 0; d < 2; d++)
        if (m->root[d] != LMDB_P_INVALID && (m->root[d] < 2 || m->root[d] > m->last_pg))
            return zmr_err(ZMR_ECORRUPT, "%s: LMDB meta page %d is damaged: %s root page %llu outside 2..%llu "
                           "(the last page)", path, which, d ? "main" : "free-list",
                           (unsigned long long)m->root[d], (unsigned long long)m->last_pg);
    m->mapsize = zmr_load_u64le(mm + LMDB_MAPSIZE_AT);
    return ZMR_OK;
}

/* The writer's map size (mm_mapsize) of meta page `which`: at least the
 * bytes its pages use (a writer cannot allocate a page past its map), at
 * most what a process can map. A reader maps only the pages (zmr_open), so
 * this value is never mapped: a damaged one means a damaged meta page. */
static zmr_status check_mapsize(const char *path, int which, const struct lmdb_meta *m)
{
    uint64_t used = (m->last_pg + 1) * m->psize;
    if (m->mapsize >= used && m->mapsize <= LMDB_MAPSIZE_MAX)
        return ZMR_OK;
    return zmr_err(ZMR_ECORRUPT, "%s: LMDB meta page %d is damaged: map size (mm_mapsize) %llu is %s", path, which,
                   (unsigned long long)m->mapsize,
                   m->mapsize < used ? "below the bytes its pages use" : "beyond any address space (2^56)");
}

/* Everything that can be checked before LMDB maps the file. *pages: the
 * bytes the newest meta page's pages span, (last page + 1) x page size:
 * the map a reader needs. */
static zmr_status check_lmdb_file(const char *path, uint64_t *pages)
{
    zrp_file fd;
    if (zrp_is_dir(path) == 1)
        return zmr_err(ZMR_ENOTCOLL, "not an mrec-lmdb collection: %s is a directory (a collection is one file, "
                                     "e.g. NAME.mrec.lmdb)", path);
    int rc = zrp_open(&fd, path, ZRP_READ);
    if (rc == ZRP_ENOTREG)
        return zmr_err(ZMR_ENOTCOLL, "not an mrec-lmdb collection: %s is not a regular file", path);
    if (rc < 0)
        return zmr_err(ZMR_EIO, "open: %s: cannot open the file (%s)", path,
                       rc == -ENOENT ? "no such file" : "permission denied or not a regular file");
    uint64_t size = 0;
    zmr_status st = ZMR_OK;
    struct lmdb_meta m[2];
    if ((rc = zrp_file_size(fd, &size)) < 0)
        st = zmr_err(ZMR_EIO, "open: %s: cannot stat the file (error %d)", path, rc);
    else if (size == 0)
        st = zmr_err(ZMR_ENOTCOLL, "not an mrec-lmdb collection: %s is empty", path);
    else if ((st = read_lmdb_meta(fd, path, size, 0, 0, 0, &m[0])) == ZMR_OK &&
             (st = read_lmdb_meta(fd, path, size, 1, m[0].psize, m[0].psize, &m[1])) == ZMR_OK) {
        const struct lmdb_meta *cur = &m[m[0].txnid < m[1].txnid]; /* the one LMDB picks */
        uint64_t need = (cur->last_pg + 1) * cur->psize;
        /* a writer grows the file before it publishes a meta page: the size
         * taken after reading the metas covers them */
        if (size < need && zrp_file_size(fd, &size) < 0)
            size = 0;
        if (size < need)
            st = zmr_err(ZMR_ECORRUPT, "%s: file truncated: %llu bytes, LMDB pages need %llu", path,
                         (unsigned long long)size, (unsigned long long)need);
        for (int k = 0; k < 2 && st == ZMR_OK; k++)
            st = check_mapsize(path, k, &m[k]);
        *pages = need;
    }
    zrp_close(&fd);
    return st;
}

/* The same rule as LMDB itself sees it, once the environment is open;
 * also measures the mapped length the reads are bounded by. */
static zmr_status check_lmdb_env(zmr_reader *r)
{
    MDB_envinfo info;
    MDB_stat stat;
    const char *path = r->path;
    if (mdb_env_info(r->env, &info) || mdb_env_stat(r->env, &stat))
        return zmr_err(ZMR_EIO, "open: %s: cannot read the LMDB environment's info", path);
    uint64_t size = 0;
    zmr_status st = mapped_len(r, &r->map_len, &size);
    if (st < 0)
        return st;
    uint64_t need = ((uint64_t)info.me_last_pgno + 1) * stat.ms_psize;
    if (size < need)
        return zmr_err(ZMR_ECORRUPT, "%s: file truncated: %llu bytes, LMDB pages need %llu", path,
                       (unsigned long long)size, (unsigned long long)need);
    return ZMR_OK;
}

zmr_status zmr_open(zmr_reader **out, const char *path, unsigned flags)
{
    if (out == NULL || path == NULL)
        return zmr_err(ZMR_EINVAL, "open: NULL argument");
    *out = NULL;
    uint64_t pages = 0;
    zmr_status cst = check_lmdb_file(path, &pages);
    if (cst < 0)
        return cst;
    zmr_reader *r = calloc(1, sizeof *r);
    if (r == NULL || (r->path = strdup(path)) == NULL) {
        free(r);
        return zmr_err(ZMR_ENOMEM, "open: no memory");
    }
    int rc = mdb_env_create(&r->env);
    if (rc) {
        zmr_close(r);
        return zmr_err(ZMR_EIO, "open: mdb_env_create: %s", mdb_strerror(rc));
    }
    /* Map the pages the file uses, not the writer's recorded map size: a
     * reference writer records 1 TiB, and 126 such maps fill a 47-bit
     * address space (none fits under `ulimit -v 4000000`). A collection is
     * complete when readers open it, so its pages do not grow under them;
     * LMDB raises a map below its data to the data's size itself. */
    rc = mdb_env_set_mapsize(r->env, (size_t)pages);
    unsigned mf = MDB_RDONLY | MDB_NOSUBDIR | MDB_NOTLS | ((flags & ZMR_OPEN_NOLOCK) ? MDB_NOLOCK : 0);
    if (rc == 0)
        rc = mdb_env_open(r->env, path, mf, 0644);
    if (rc && !(flags & ZMR_OPEN_NOLOCK) && (rc == EACCES || rc == EROFS || rc == EPERM)) {
        /* the file was readable above: what failed is LMDB's reader lock
         * file beside it, which even a reader creates and writes */
        zmr_close(r);
        return zmr_err(ZMR_EIO, "open: %s: cannot create or write LMDB's lock file %s-lock (%s); the "
                                "collection itself is readable: on read-only media open it without the lock "
                                "(ZMR_OPEN_NOLOCK, Python nolock=True, zr mrec --nolock), with no writer running",
                       path, path, mdb_strerror(rc));
    }
    if (rc) {
        zmr_close(r);
        return zmr_err(rc == MDB_INVALID || rc == MDB_VERSION_MISMATCH ? ZMR_ENOTCOLL : ZMR_EIO,
                       "open: %s: %s", path, mdb_strerror(rc));
    }
    if ((cst = check_lmdb_env(r)) < 0) {
        zmr_close(r);
        return cst;
    }
    MDB_txn *txn;
    zmr_status st = begin(r, &txn);
    if (st < 0) {
        zmr_close(r);
        return st;
    }
    rc = mdb_dbi_open(txn, NULL, 0, &r->dbi);
    MDB_val v;
    if (rc) {
        st = zmr_err(ZMR_ENOTCOLL, "open: %s: %s", path, mdb_strerror(rc));
    } else if ((st = locate_map(r, txn)) < 0) {
        /* the file could not be measured */
    } else if ((st = get(r, txn, "meta", 4, &v)) == ZMR_ERANGE) {
        st = zmr_err(ZMR_ENOTCOLL, "%s: key \"meta\" is missing: not a collection (never committed)", path);
    } else if (st == ZMR_OK) {
        r->meta_text = malloc(v.mv_size + 1);
        if (r->meta_text == NULL) {
            st = zmr_err(ZMR_ENOMEM, "open: no memory");
        } else {
            memcpy(r->meta_text, v.mv_data, v.mv_size);
            r->meta_text[v.mv_size] = '\0';
            st = zmr_json_parse(v.mv_data, v.mv_size, "meta", ZMR_ECORRUPT, &r->meta);
        }
        if (st == ZMR_OK)
            st = check_meta(r);
        if (st == ZMR_OK) {
            if ((st = get(r, txn, "index", 5, &v)) == ZMR_ERANGE)
                st = BAD("index: key missing");
            else if (st == ZMR_OK)
                st = check_index(r, &v);
        }
    }
    mdb_txn_abort(txn);
    if (st < 0) {
        char pre[4200];
        snprintf(pre, sizeof pre, "%s", path);
        if (strncmp(zmr_last_error(), path, strlen(path)))
            zmr_err_prefix(st, pre);
        zmr_close(r);
        return st;
    }
    *out = r;
    return ZMR_OK;
}

uint64_t zmr_n_records(const zmr_reader *r) { return r ? r->n_records : 0; }
uint64_t zmr_n_frames(const zmr_reader *r) { return r ? r->n_frames : 0; }
int zmr_molrec_version(const zmr_reader *r) { return r ? r->molrec : 0; }
const char *zmr_meta_json(const zmr_reader *r) { return r ? r->meta_text : NULL; }

static zmr_status check_rec(const zmr_reader *r, uint64_t rec)
{
    if (r == NULL)
        return zmr_err(ZMR_EINVAL, "NULL reader");
    if (rec >= r->n_records)
        return zmr_err(ZMR_ERANGE, "record %llu is out of range (n_records %llu)", (unsigned long long)rec,
                       (unsigned long long)r->n_records);
    return ZMR_OK;
}

static zmr_status record_info_here(const zmr_reader *r, uint64_t rec, uint64_t *first_frame, uint64_t *n_frames,
                                   uint64_t *n_atoms, bool *has_trajectory)
{
    zmr_status st = check_rec(r, rec);
    if (st < 0)
        return st;
    if (first_frame) *first_frame = r->first[rec];
    if (n_frames) *n_frames = r->nfr[rec];
    if (n_atoms) *n_atoms = r->natoms[rec];
    if (has_trajectory) *has_trajectory = r->has_traj[rec] != 0;
    return ZMR_OK;
}

static zmr_status read_meta_txn(zmr_reader *r, MDB_txn *txn, uint64_t rec, char **json)
{
    char name[32];
    MDB_val v;
    zmr_status st = get_numbered(r, txn, 'r', rec, name, &v);
    if (st == ZMR_ERANGE)
        return BAD("%s: key missing (record %llu's meta document)", name, (unsigned long long)rec);
    if (st < 0)
        return st;
    json_object *o;
    if ((st = zmr_json_parse(v.mv_data, v.mv_size, name, ZMR_ECORRUPT, &o)) < 0)
        return st;
    bool obj = json_object_is_type(o, json_type_object);
    json_object_put(o);
    if (!obj)
        return BAD("%s: a record's meta document must be a JSON object", name);
    if (json) {
        *json = malloc(v.mv_size + 1);
        if (*json == NULL)
            return zmr_err(ZMR_ENOMEM, "%s: no memory", name);
        memcpy(*json, v.mv_data, v.mv_size);
        (*json)[v.mv_size] = '\0';
    }
    return ZMR_OK;
}

static zmr_status read_record_meta_here(zmr_reader *r, uint64_t rec, char **json)
{
    zmr_status st = check_rec(r, rec);
    MDB_txn *txn;
    if (st < 0 || (st = begin(r, &txn)) < 0)
        return st;
    st = read_meta_txn(r, txn, rec, json);
    mdb_txn_abort(txn);
    return st;
}

static zmr_status read_system_txn(zmr_reader *r, MDB_txn *txn, uint64_t rec, zmr_frame **out)
{
    char name[32];
    MDB_val v;
    *out = NULL;
    zmr_status st = get_numbered(r, txn, 's', rec, name, &v);
    if (st == ZMR_ERANGE)
        return ZMR_OK;
    if (st < 0)
        return st;
    return zmr_frame_decode(out, v.mv_data, v.mv_size, ZMR_FRAME_SYSTEM, name);
}

static zmr_status read_system_here(zmr_reader *r, uint64_t rec, zmr_frame **out)
{
    if (out == NULL)
        return zmr_err(ZMR_EINVAL, "read_system: out is NULL");
    *out = NULL;
    zmr_status st = check_rec(r, rec);
    MDB_txn *txn;
    if (st < 0 || (st = begin(r, &txn)) < 0)
        return st;
    st = read_system_txn(r, txn, rec, out);
    mdb_txn_abort(txn);
    return st;
}

/* The optional collection-wide "ff" frame: *out stays NULL when absent. */
static zmr_status read_ff_txn(zmr_reader *r, MDB_txn *txn, zmr_frame **out)
{
    MDB_val v;
    *out = NULL;
    zmr_status st = get(r, txn, "ff", 2, &v);
    if (st == ZMR_ERANGE)
        return ZMR_OK;
    if (st < 0)
        return st;
    return zmr_frame_decode(out, v.mv_data, v.mv_size, ZMR_FRAME_FF, "ff");
}

static zmr_status read_ff_here(zmr_reader *r, zmr_frame **out)
{
    if (r == NULL || out == NULL)
        return zmr_err(ZMR_EINVAL, "read_ff: NULL argument");
    *out = NULL;
    MDB_txn *txn;
    zmr_status st = begin(r, &txn);
    if (st < 0)
        return st;
    st = read_ff_txn(r, txn, out);
    mdb_txn_abort(txn);
    return st;
}

static zmr_status read_index_here(zmr_reader *r, zmr_frame **out)
{
    if (r == NULL || out == NULL)
        return zmr_err(ZMR_EINVAL, "read_index: NULL argument");
    *out = NULL;
    MDB_txn *txn;
    MDB_val v;
    zmr_status st = begin(r, &txn);
    if (st < 0)
        return st;
    st = get(r, txn, "index", 5, &v);
    if (st == ZMR_ERANGE)
        st = BAD("index: key missing");
    if (st == ZMR_OK)
        st = zmr_frame_decode(out, v.mv_data, v.mv_size, ZMR_FRAME_INDEX, "index");
    mdb_txn_abort(txn);
    return st;
}

/* Decode global frame j (record rec) with its meta checked against the
 * sequence_schema. */
static zmr_status read_update_txn(zmr_reader *r, MDB_txn *txn, uint64_t rec, uint64_t j, zmr_frame **out)
{
    char name[32];
    MDB_val v;
    *out = NULL;
    zmr_status st = get_numbered(r, txn, 'f', j, name, &v);
    if (st == ZMR_ERANGE)
        return BAD("%s: key missing (record %llu frame %llu)", name, (unsigned long long)rec,
                   (unsigned long long)(j - r->first[rec]));
    if (st < 0)
        return st;
    zmr_frame *f;
    if ((st = zmr_frame_decode(&f, v.mv_data, v.mv_size, ZMR_FRAME_UPDATE, name)) < 0)
        return st;
    json_object_object_foreach(f->meta, key, val) {
        json_object *decl;
        zmr_tag tag;
        json_object *fill;
        if (r->schema_meta == NULL || !json_object_object_get_ex(r->schema_meta, key, &decl)) {
            /* key belongs to f->meta: format the message before freeing f */
            st = BAD("%s: meta key '%s' is not declared in sequence_schema.meta", name, key);
            zmr_frame_free(f);
            return st;
        }
        zmr_schema_meta_decl(decl, key, &tag, &fill, NULL);
        if (zmr_typed_check(tag, val, ZMR_ECORRUPT) < 0) {
            char pre[160];
            snprintf(pre, sizeof pre, "%s: meta.%.100s", name, key);
            zmr_frame_free(f);
            return zmr_err_prefix(ZMR_ECORRUPT, pre);
        }
    }
    if (r->schema_meta) {
        json_object_object_foreach(r->schema_meta, key, decl) {
            json_object *x;
            (void)decl;
            if (!json_object_object_get_ex(f->meta, key, &x)) {
                zmr_frame_free(f);
                return BAD("%s: declared per-step meta key '%s' is missing", name, key);
            }
        }
        json_object_deep_copy(r->schema_meta, &f->schema_meta, NULL);
    }
    *out = f;
    return ZMR_OK;
}

/* The checks zmr_read_update and zmr_read_frame share: out is set to NULL
 * first, then rec and its frame k must exist. */
static zmr_status check_frame_args(const zmr_reader *r, uint64_t rec, uint64_t k, zmr_frame **out,
                                   const char *fn)
{
    if (out == NULL)
        return zmr_err(ZMR_EINVAL, "%s: out is NULL", fn);
    *out = NULL;
    zmr_status st = check_rec(r, rec);
    if (st < 0)
        return st;
    if (k >= r->nfr[rec])
        return zmr_err(ZMR_ERANGE, "record %llu: frame %llu is out of range (n_frames %llu)",
                       (unsigned long long)rec, (unsigned long long)k, (unsigned long long)r->nfr[rec]);
    return ZMR_OK;
}

/* A resolved state that fails zmr_frame_check_targets: its detail gets the
 * record and frame as prefix. */
static zmr_status bad_resolved_frame(uint64_t rec, uint64_t k, uint64_t j)
{
    char pre[96];
    snprintf(pre, sizeof pre, "record %llu frame %llu (resolved at f/%llu)", (unsigned long long)rec,
             (unsigned long long)k, (unsigned long long)j);
    return zmr_err_prefix(ZMR_ECORRUPT, pre);
}

static zmr_status read_update_here(zmr_reader *r, uint64_t rec, uint64_t k, zmr_frame **out)
{
    zmr_status st = check_frame_args(r, rec, k, out, "read_update");
    if (st < 0)
        return st;
    MDB_txn *txn;
    if ((st = begin(r, &txn)) < 0)
        return st;
    st = read_update_txn(r, txn, rec, r->first[rec] + k, out);
    mdb_txn_abort(txn);
    return st;
}

/* Fold update u into the resolved state s; meta / step / time replace. */
static zmr_status apply(zmr_frame *s, zmr_frame *u)
{
    for (size_t b = 0; b < u->nblocks; b++) {
        zmr_status st = zmr_frame_put_block_copy(s, &u->blocks[b]);
        if (st < 0)
            return st;
    }
    if (u->has_box) {
        s->has_box = true;
        s->box = u->box;
    }
    json_object_put(s->meta);
    s->meta = json_object_get(u->meta);
    json_object_put(s->schema_meta);
    s->schema_meta = json_object_get(u->schema_meta);
    s->has_step = u->has_step;
    s->step = u->step;
    s->has_time = u->has_time;
    s->time = u->time;
    return ZMR_OK;
}

static zmr_status read_frame_here(zmr_reader *r, uint64_t rec, uint64_t k, zmr_frame **out)
{
    zmr_status st = check_frame_args(r, rec, k, out, "read_frame");
    if (st < 0)
        return st;
    MDB_txn *txn;
    zmr_frame *s;
    if ((st = begin(r, &txn)) < 0)
        return st;
    if ((st = zmr_frame_create(&s, ZMR_FRAME_UPDATE)) < 0) {
        mdb_txn_abort(txn);
        return st;
    }
    for (uint64_t j = r->first[rec]; st == ZMR_OK && j <= r->first[rec] + k; j++) {
        zmr_frame *u;
        if ((st = read_update_txn(r, txn, rec, j, &u)) == ZMR_OK) {
            st = apply(s, u);
            zmr_frame_free(u);
        }
    }
    mdb_txn_abort(txn);
    if (st == ZMR_OK && zmr_frame_check_targets(s, NULL, s) < 0)
        st = bad_resolved_frame(rec, k, r->first[rec] + k);
    if (st < 0) {
        zmr_frame_free(s);
        return st;
    }
    *out = s;
    return ZMR_OK;
}

/* ------------------------------------------------------------ the public reads
 * Each failure's detail names the file first ("PATH: record 3 is out of
 * range ..."), whatever the layer that failed. */

static zmr_status named(const zmr_reader *r, zmr_status st)
{
    if (st < 0 && r != NULL && strncmp(zmr_last_error(), r->path, strlen(r->path)))
        zmr_err_prefix(st, r->path);
    return st;
}

zmr_status zmr_record_info(const zmr_reader *r, uint64_t rec, uint64_t *first_frame, uint64_t *n_frames,
                           uint64_t *n_atoms, bool *has_trajectory)
{
    return named(r, record_info_here(r, rec, first_frame, n_frames, n_atoms, has_trajectory));
}

zmr_status zmr_read_record_meta(zmr_reader *r, uint64_t rec, char **json)
{
    return named(r, read_record_meta_here(r, rec, json));
}

zmr_status zmr_read_system(zmr_reader *r, uint64_t rec, zmr_frame **out)
{
    return named(r, read_system_here(r, rec, out));
}

zmr_status zmr_read_ff(zmr_reader *r, zmr_frame **out)
{
    return named(r, read_ff_here(r, out));
}

zmr_status zmr_read_index(zmr_reader *r, zmr_frame **out)
{
    return named(r, read_index_here(r, out));
}

zmr_status zmr_read_update(zmr_reader *r, uint64_t rec, uint64_t k, zmr_frame **out)
{
    return named(r, read_update_here(r, rec, k, out));
}

zmr_status zmr_read_frame(zmr_reader *r, uint64_t rec, uint64_t k, zmr_frame **out)
{
    return named(r, read_frame_here(r, rec, k, out));
}

/* ------------------------------------------------------------ validate */

static zmr_status validate_keys(zmr_reader *r, MDB_txn *txn)
{
    MDB_cursor *cur;
    MDB_val k, v;
    int rc = mdb_cursor_open(txn, r->dbi, &cur);
    if (rc)
        return zmr_err(lmdb_read_status(rc), "cursor: %s", mdb_strerror(rc));
    uint64_t nr = 0, nf = 0;
    zmr_status st = ZMR_OK;
    for (rc = mdb_cursor_get(cur, &k, &v, MDB_FIRST); rc == 0 && st == ZMR_OK;
         rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
        if ((st = in_map(r, &k, "key")) < 0 || (st = in_map(r, &v, "value")) < 0)
            break;
        const unsigned char *p = k.mv_data;
        if ((k.mv_size == 4 && !memcmp(p, "meta", 4)) || (k.mv_size == 5 && !memcmp(p, "index", 5)) ||
            (k.mv_size == 2 && !memcmp(p, "ff", 2)))
            continue;
        if (k.mv_size == 9 && (p[0] == 'r' || p[0] == 's' || p[0] == 'f')) {
            uint64_t n = 0;
            for (int i = 1; i < 9; i++)
                n = (n << 8) | p[i];
            uint64_t lim = p[0] == 'f' ? r->n_frames : r->n_records;
            if (n >= lim)
                st = BAD("%c/%llu: key beyond the collection (%s %llu)", p[0], (unsigned long long)n,
                         p[0] == 'f' ? "n_frames" : "n_records", (unsigned long long)lim);
            nr += p[0] == 'r';
            nf += p[0] == 'f';
            continue;
        }
        st = BAD("key of %zu bytes starting '%c' is not part of the mrec-lmdb layout", k.mv_size,
                 k.mv_size && p[0] >= 32 && p[0] < 127 ? p[0] : '?');
    }
    mdb_cursor_close(cur);
    if (st == ZMR_OK && rc != MDB_NOTFOUND)
        st = zmr_err(lmdb_read_status(rc), "cursor: %s", mdb_strerror(rc));
    if (st == ZMR_OK && nr != r->n_records)
        st = BAD("%llu record meta keys (r/...) for n_records %llu", (unsigned long long)nr,
                 (unsigned long long)r->n_records);
    if (st == ZMR_OK && nf != r->n_frames)
        st = BAD("%llu frame keys (f/...) for n_frames %llu", (unsigned long long)nf, (unsigned long long)r->n_frames);
    return st;
}

/* "record R frame K (resolved at f/J)" and friends: a prefix naming where
 * a rule broke. */
static zmr_status at_frame(zmr_status st, uint64_t rec, uint64_t k, uint64_t j, const char *how)
{
    char pre[160];
    snprintf(pre, sizeof pre, "record %llu frame %llu (%s f/%llu)", (unsigned long long)rec, (unsigned long long)k,
             how, (unsigned long long)j);
    return zmr_err_prefix(st, pre);
}

/* Every f64 column with a precision on its grid: a system or index frame's
 * own precision, an update's declared one. */
static zmr_status validate_grid(const zmr_reader *r, const zmr_frame *f, const char *name)
{
    for (size_t b = 0; b < f->nblocks; b++)
        for (size_t c = 0; c < f->blocks[b].ncols; c++) {
            const struct zmr_block *blk = &f->blocks[b];
            double p = f->kind == ZMR_FRAME_UPDATE ? zmr_schema_precision(r->decl_blocks, blk->name, blk->cols[c].name)
                                                   : blk->cols[c].precision;
            if (zmr_rule_on_grid(blk->name, &blk->cols[c], p, ZMR_ECORRUPT) < 0)
                return zmr_err_prefix(ZMR_ECORRUPT, name);
        }
    return ZMR_OK;
}

/* One stored update u (frame k of rec, key f/j) against the record's frames
 * before it (steps, time, cell) and its blocks' declared grid shapes. */
static zmr_status validate_update(const zmr_reader *r, const struct zmr_traj_rules *rules, const zmr_frame *u,
                                  uint64_t rec, uint64_t k, uint64_t j)
{
    zmr_status st = zmr_rules_frame(rules, u, ZMR_ECORRUPT);
    for (size_t b = 0; st == ZMR_OK && b < u->nblocks; b++) {
        json_object *decl = NULL;
        if (r->decl_blocks && json_object_object_get_ex(r->decl_blocks, u->blocks[b].name, &decl))
            st = zmr_rule_declared_shape(&u->blocks[b], decl, ZMR_ECORRUPT);
    }
    return st < 0 ? at_frame(st, rec, k, j, "at") : ZMR_OK;
}

/* The resolved state s at frame k against the system: row references,
 * aligned blocks (a system namesake, a declared aligned_with), and the
 * system's /trajectory/ references into it. */
static zmr_status validate_resolved(const zmr_reader *r, const zmr_frame *s, const zmr_frame *sys, uint64_t rec,
                                    uint64_t k, uint64_t j)
{
    if (zmr_frame_check_targets(s, sys, s) < 0)
        return bad_resolved_frame(rec, k, j);
    if (zmr_rules_aligned(r->decl_blocks, NULL, s, sys, ZMR_ECORRUPT) < 0) {
        char pre[128];
        snprintf(pre, sizeof pre, "record %llu frame %llu (resolved at f/%llu)%s", (unsigned long long)rec,
                 (unsigned long long)k, (unsigned long long)j, sys ? " against s/" : "");
        if (sys)
            snprintf(pre + strlen(pre), sizeof pre - strlen(pre), "%llu", (unsigned long long)rec);
        return zmr_err_prefix(ZMR_ECORRUPT, pre);
    }
    if (sys && zmr_frame_check_traj_targets(sys, s) < 0) {
        char pre[128];
        snprintf(pre, sizeof pre, "s/%llu: row reference into record %llu frame %llu (resolved at f/%llu)",
                 (unsigned long long)rec, (unsigned long long)rec, (unsigned long long)k, (unsigned long long)j);
        return zmr_err_prefix(ZMR_ECORRUPT, pre);
    }
    return ZMR_OK;
}

static zmr_status validate_record(zmr_reader *r, MDB_txn *txn, uint64_t rec)
{
    zmr_frame *sys = NULL, *s = NULL;
    struct zmr_traj_rules rules;
    zmr_rules_begin(&rules);
    zmr_status st = read_meta_txn(r, txn, rec, NULL);
    if (st == ZMR_OK)
        st = read_system_txn(r, txn, rec, &sys);
    if (st == ZMR_OK && sys) {
        char name[32];
        snprintf(name, sizeof name, "s/%llu", (unsigned long long)rec);
        st = validate_grid(r, sys, name);
    }
    if (st == ZMR_OK)
        st = zmr_frame_create(&s, ZMR_FRAME_UPDATE);
    size_t ab;
    bool atoms_known = sys && zmr_frame_find_block(sys, "atoms", &ab) == ZMR_OK;
    uint64_t natoms = atoms_known ? sys->blocks[ab].count : 0;
    for (uint64_t k = 0; st == ZMR_OK && k < r->nfr[rec]; k++) {
        zmr_frame *u;
        uint64_t j = r->first[rec] + k;
        if ((st = read_update_txn(r, txn, rec, j, &u)) < 0)
            break;
        char name[32];
        snprintf(name, sizeof name, "f/%llu", (unsigned long long)j);
        if ((st = validate_update(r, &rules, u, rec, k, j)) == ZMR_OK && (st = apply(s, u)) == ZMR_OK &&
            (st = validate_resolved(r, s, sys, rec, k, j)) == ZMR_OK && (st = check_declared(r, u, name)) == ZMR_OK)
            st = validate_grid(r, u, name);
        zmr_rules_next(&rules, u);
        zmr_frame_free(u);
        if (st == ZMR_OK && !atoms_known && zmr_frame_find_block(s, "atoms", &ab) == ZMR_OK) {
            atoms_known = true;
            natoms = s->blocks[ab].count;
        }
    }
    if (st == ZMR_OK && natoms != r->natoms[rec])
        st = BAD("index: n_atoms[%llu] = %llu but the record's atoms have %llu rows", (unsigned long long)rec,
                 (unsigned long long)r->natoms[rec], (unsigned long long)natoms);
    zmr_frame_free(sys);
    zmr_frame_free(s);
    return st;
}

zmr_status zmr_validate(const char *path, unsigned flags)
{
    zmr_reader *r;
    zmr_status st = zmr_open(&r, path, flags);
    if (st < 0)
        return st;
    MDB_txn *txn;
    if ((st = begin(r, &txn)) < 0) {
        zmr_close(r);
        return st;
    }
    st = validate_keys(r, txn);
    if (st == ZMR_OK && zmr_rule_alignments(r->decl_blocks, ZMR_ECORRUPT) < 0)
        st = zmr_err_prefix(ZMR_ECORRUPT, "meta");
    if (st == ZMR_OK) {
        zmr_frame *ff;
        st = read_ff_txn(r, txn, &ff);
        zmr_frame_free(ff);
    }
    MDB_val iv;
    zmr_frame *idx = NULL;
    if (st == ZMR_OK && (st = get(r, txn, "index", 5, &iv)) == ZMR_OK &&
        (st = zmr_frame_decode(&idx, iv.mv_data, iv.mv_size, ZMR_FRAME_INDEX, "index")) == ZMR_OK)
        st = validate_grid(r, idx, "index");
    zmr_frame_free(idx);
    for (uint64_t rec = 0; st == ZMR_OK && rec < r->n_records; rec++)
        st = validate_record(r, txn, rec);
    mdb_txn_abort(txn);
    zmr_close(r);
    /* key-level details ("record 0 frame 1 (resolved at f/1) ...") name
     * the file too */
    if (st < 0 && strstr(zmr_last_error(), path) == NULL)
        zmr_err_prefix(st, path);
    return st;
}
