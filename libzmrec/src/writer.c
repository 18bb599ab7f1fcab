/*
 * writer.c - build a collection: records are buffered as (key, value)
 * pairs and put in batches, each batch one LMDB transaction retried with a
 * doubled map size on MDB_MAP_FULL; the last transaction puts the index and
 * then "meta", so a file is a collection only once everything is in.
 */
#include <lmdb.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "zmr_internal.h"

#define FLUSH_BYTES ((size_t)64 << 20)

struct item {
    unsigned char key[16];
    size_t klen;
    void *val;
    size_t vlen;
};

struct zmr_writer {
    MDB_env *env;
    size_t mapsize;
    char *path;
    json_object *collection, *schema, *schema_meta, *schema_blocks;
    struct item *items;
    size_t nitems, capitems, pending;
    uint64_t n_records, cap_records, n_frames_total;
    uint64_t *first, *nfr, *natoms;
    uint8_t *has_traj;
    bool in_record, atoms_known, failed, has_ff;
    zmr_frame *state, *system;
    bool rec_traj;          /* zmr_writer_mark_trajectory on the current record */
    struct zmr_traj_rules rules; /* the current record's frames so far (steps, time, cell) */
    zmr_frame *own;         /* the collection's own index columns (block records) */
    char why[512];          /* the detail of the failure that set `failed` */
};

/* The writer cannot go on (the carried state may be half-updated): keep the
 * failure's detail for every later refusal. */
static zmr_status fail_writer(zmr_writer *w, zmr_status st)
{
    if (!w->failed) {
        w->failed = true;
        snprintf(w->why, sizeof w->why, "%s", zmr_last_error());
    }
    return st;
}

/* ZMR_ESTATE for a call after a failure, naming the call and that failure. */
static zmr_status refuse_failed(const zmr_writer *w, const char *call)
{
    return zmr_err(ZMR_ESTATE, "%s: the writer failed earlier (%s); nothing more is written", call, w->why);
}

static void key_of(unsigned char *k, char prefix, uint64_t n)
{
    k[0] = (unsigned char)prefix;
    for (int i = 0; i < 8; i++)
        k[1 + i] = (unsigned char)(n >> (56 - 8 * i));
}

static zmr_status push(zmr_writer *w, const unsigned char *key, size_t klen, void *val, size_t vlen)
{
    if (w->nitems == w->capitems) {
        size_t cap = w->capitems ? 2 * w->capitems : 64;
        struct item *ni = realloc(w->items, cap * sizeof *ni);
        if (ni == NULL) {
            free(val);
            return zmr_err(ZMR_ENOMEM, "writer: no memory for pending values");
        }
        w->items = ni;
        w->capitems = cap;
    }
    struct item *it = &w->items[w->nitems++];
    memcpy(it->key, key, klen);
    it->klen = klen;
    it->val = val;
    it->vlen = vlen;
    w->pending += vlen;
    return ZMR_OK;
}

static zmr_status lmdb_err(int rc, const char *what)
{
    return zmr_err(rc == MDB_MAP_RESIZED || rc == MDB_READERS_FULL ? ZMR_EBUSY : ZMR_EIO, "%s: %s", what,
                   mdb_strerror(rc));
}

/* Put every pending pair in one transaction, growing the map on demand.
 * `tail`: extra pairs (index, meta) put last, in that order. */
static zmr_status flush(zmr_writer *w, struct item *tail, size_t ntail)
{
    for (;;) {
        MDB_txn *txn;
        MDB_dbi dbi;
        int rc = mdb_txn_begin(w->env, NULL, 0, &txn);
        if (rc)
            return lmdb_err(rc, "writer: begin transaction");
        rc = mdb_dbi_open(txn, NULL, 0, &dbi);
        for (size_t k = 0; !rc && k < w->nitems + ntail; k++) {
            struct item *it = k < w->nitems ? &w->items[k] : &tail[k - w->nitems];
            MDB_val kv = {it->klen, it->key}, vv = {it->vlen, it->val};
            rc = mdb_put(txn, dbi, &kv, &vv, 0);
        }
        if (rc) {
            mdb_txn_abort(txn);
        } else {
            rc = mdb_txn_commit(txn);
        }
        if (rc == MDB_MAP_FULL) {
            if (w->mapsize > ((size_t)1 << 46))
                return zmr_err(ZMR_EIO, "writer: %s: map size would exceed 64 TiB", w->path);
            w->mapsize *= 2;
            rc = mdb_env_set_mapsize(w->env, w->mapsize);
            if (rc)
                return lmdb_err(rc, "writer: growing the map");
            continue;
        }
        if (rc)
            return lmdb_err(rc, "writer: put");
        break;
    }
    for (size_t k = 0; k < w->nitems; k++)
        free(w->items[k].val);
    w->nitems = 0;
    w->pending = 0;
    return ZMR_OK;
}

static void writer_free(zmr_writer *w)
{
    if (w == NULL)
        return;
    for (size_t k = 0; k < w->nitems; k++)
        free(w->items[k].val);
    free(w->items);
    if (w->env)
        mdb_env_close(w->env);
    json_object_put(w->collection);
    json_object_put(w->schema);
    free(w->first);
    free(w->nfr);
    free(w->natoms);
    free(w->has_traj);
    zmr_frame_free(w->state);
    zmr_frame_free(w->system);
    zmr_frame_free(w->own);
    free(w->path);
    free(w);
}

static bool path_exists(const char *p)
{
    FILE *fp = fopen(p, "rb");
    if (fp)
        fclose(fp);
    return fp != NULL;
}

static const char *const reserved_blocks[] = {"step", "time", "meta", "box", NULL};
static const char *const reserved_columns[] = {"offset", "step_index", "_validity", NULL};

static bool is_reserved(const char *name, const char *const *list)
{
    for (; *list; list++)
        if (!strcmp(name, *list))
            return true;
    return false;
}

static zmr_status schema_fail(json_object *partial, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static zmr_status schema_fail(json_object *partial, const char *fmt, ...)
{
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    json_object_put(partial);
    return zmr_err(ZMR_EINVAL, "%s", buf);
}

/* sequence_schema.blocks, rebuilt in the layout's form into w->schema_blocks;
 * reserved names, column declarations and aligned_with declarations checked. */
static zmr_status check_schema_blocks(zmr_writer *w)
{
    json_object *v;
    if (!json_object_object_get_ex(w->schema, "blocks", &v)) {
        v = json_object_new_object();
        json_object_object_add(w->schema, "blocks", v);
    }
    if (!json_object_is_type(v, json_type_object))
        return zmr_err(ZMR_EINVAL, "sequence_schema.blocks must be an object");
    /* every column declaration is rebuilt as {"dtype", "trailing"?,
     * "precision"?, "nullable"?}; a trailing shape not given is taken from
     * the first frame presenting the column (see fix_blocks) */
    json_object *nb = json_object_new_object();
    json_object_object_foreach(v, bname, bdecl) {
        json_object *cols, *nd = json_object_new_object(), *nc = json_object_new_object();
        json_object_object_add(nb, bname, nd);
        /* nc joins nd after the block's other keys (their order is kept);
         * until then it is freed on every refusal */
        if (!json_object_is_type(bdecl, json_type_object)) {
            json_object_put(nc);
            return schema_fail(nb, "sequence_schema.blocks.%s must be an object", bname);
        }
        if (is_reserved(bname, reserved_blocks)) {
            json_object_put(nc);
            return schema_fail(nb, "sequence_schema.blocks.%s: '%s' is reserved by the trajectory layout (step, "
                                   "time, meta, box); a block cannot take it", bname, bname);
        }
        json_object_object_foreach(bdecl, bk, bval) {
            if (strcmp(bk, "columns"))
                json_object_object_add(nd, bk, json_object_get(bval));
        }
        json_object_object_add(nd, "columns", nc);
        if (!json_object_object_get_ex(bdecl, "columns", &cols))
            continue;
        if (!json_object_is_type(cols, json_type_object))
            return schema_fail(nb, "sequence_schema.blocks.%s.columns must be an object", bname);
        json_object_object_foreach(cols, cname, cdecl) {
            json_object *d, *p, *t, *nl;
            zmr_dtype dt;
            if (!json_object_is_type(cdecl, json_type_object))
                return schema_fail(nb, "sequence_schema: column %s/%s must be an object", bname, cname);
            if (is_reserved(cname, reserved_columns))
                return schema_fail(nb, "sequence_schema: column %s/%s: '%s' is reserved by a block's own index "
                                       "(offset, step_index, _validity)", bname, cname, cname);
            if (!json_object_object_get_ex(cdecl, "dtype", &d) || !json_object_is_type(d, json_type_string))
                return schema_fail(nb, "sequence_schema: column %s/%s needs \"dtype\" (a dtype name)", bname,
                                   cname);
            if (zmr_dtype_parse(json_object_get_string(d), &dt) < 0) {
                json_object_put(nb);
                return zmr_err_prefix(ZMR_EINVAL, "sequence_schema");
            }
            json_object *ncd = json_object_new_object();
            json_object_object_add(nc, cname, ncd);
            json_object_object_add(ncd, "dtype", json_object_new_string(zmr_dtype_name(dt)));
            if (json_object_object_get_ex(cdecl, "trailing", &t)) {
                bool ok = json_object_is_type(t, json_type_array) &&
                          json_object_array_length(t) < ZMR_MAX_NDIM;
                uint64_t u;
                for (size_t k = 0; ok && k < json_object_array_length(t); k++)
                    ok = zmr_json_u64(json_object_array_get_idx(t, k), &u) == 0;
                if (!ok)
                    return schema_fail(nb, "sequence_schema: column %s/%s: trailing must be an array of at most "
                                           "%d non-negative integers", bname, cname, ZMR_MAX_NDIM - 1);
                json_object_object_add(ncd, "trailing", json_object_get(t));
            }
            if (json_object_object_get_ex(cdecl, "precision", &p)) {
                double pr;
                if (dt != ZMR_F64 || zmr_json_f64(p, &pr) < 0 || !(pr >= 0x1p-1000 && pr <= 0x1p1000))
                    return schema_fail(nb, "sequence_schema: column %s/%s: precision must be an f64 "
                                           "column's number in [2^-1000, 2^1000]", bname, cname);
                json_object_object_add(ncd, "precision", json_object_get(p));
            }
            if (json_object_object_get_ex(cdecl, "nullable", &nl)) {
                if (!json_object_is_type(nl, json_type_boolean))
                    return schema_fail(nb, "sequence_schema: column %s/%s: nullable must be true or false",
                                       bname, cname);
                if (json_object_get_boolean(nl))
                    json_object_object_add(ncd, "nullable", json_object_new_boolean(1));
            }
        }
    }
    json_object_object_add(w->schema, "blocks", nb);
    w->schema_blocks = nb;
    return zmr_rule_alignments(nb, ZMR_EINVAL);
}

/* sequence_schema.meta, every declaration rebuilt as {"dtype", "fill"?}
 * into w->schema_meta; canonical per-step keys must be f64. */
static zmr_status check_schema_meta(zmr_writer *w)
{
    json_object *v;
    if (!json_object_object_get_ex(w->schema, "meta", &v)) {
        v = json_object_new_object();
        json_object_object_add(w->schema, "meta", v);
    }
    if (!json_object_is_type(v, json_type_object))
        return zmr_err(ZMR_EINVAL, "sequence_schema.meta must be an object");
    /* every declaration is written in the layout's form {"dtype": tag,
     * "fill": value}, whichever form it was given in */
    json_object *norm = json_object_new_object();
    json_object_object_foreach(v, key, decl) {
        zmr_tag tag;
        json_object *fill;
        bool has_fill;
        if (zmr_schema_meta_decl(decl, key, &tag, &fill, &has_fill) < 0) {
            json_object_put(norm);
            return zmr_err(ZMR_EINVAL, "%s", zmr_last_error());
        }
        static const char *const canonical_meta[] = {"pe", "ke", "etotal", "temp", "press", "volume", NULL};
        if (is_reserved(key, canonical_meta) && tag != ZMR_TAG_F64)
            return schema_fail(norm, "sequence_schema.meta.%s: '%s' is a canonical per-step key: it must be f64, "
                                     "given %s", key, key, zmr_tag_name(tag));
        json_object *d = json_object_new_object();
        json_object_object_add(d, "dtype", json_object_new_string(zmr_tag_name(tag)));
        if (has_fill && fill != NULL && tag != ZMR_TAG_JSON) {
            /* in the tag's typed JSON form: an integer beyond 2^53 as a
             * decimal string, a non-finite f64 as "NaN" / "Infinity" */
            zmr_value fv;
            zmr_typed_to_value(tag, fill, &fv);
            json_object_object_add(d, "fill", zmr_typed_from_value(&fv));
        } else if (has_fill) {
            json_object_object_add(d, "fill", json_object_get(fill));
        }
        json_object_object_add(norm, key, d);
    }
    json_object_object_add(w->schema, "meta", norm);
    w->schema_meta = norm;
    return ZMR_OK;
}

static zmr_status check_schema(zmr_writer *w)
{
    if (!json_object_is_type(w->schema, json_type_object))
        return zmr_err(ZMR_EINVAL, "sequence_schema must be a JSON object");
    zmr_status st = check_schema_blocks(w);
    return st < 0 ? st : check_schema_meta(w);
}

/* collection.units: {quantity: unit name}, every unit a string. */
static zmr_status check_units(json_object *units)
{
    if (!json_object_is_type(units, json_type_object))
        return zmr_err(ZMR_EINVAL, "collection.units must be an object {quantity: unit}, got %.60s",
                       zmr_json_text(units));
    json_object_object_foreach(units, q, u) {
        if (!json_object_is_type(u, json_type_string))
            return zmr_err(ZMR_EINVAL, "collection.units.%s must be a unit name (a string), got %.60s", q,
                           zmr_json_text(u));
    }
    return ZMR_OK;
}

zmr_status zmr_writer_create(zmr_writer **out, const char *path, const char *collection_json,
                             const char *schema_json)
{
    if (out == NULL || path == NULL || path[0] == '\0')
        return zmr_err(ZMR_EINVAL, "writer_create: NULL out or empty path");
    *out = NULL;
    char lockp[4096];
    snprintf(lockp, sizeof lockp, "%s-lock", path);
    if (path_exists(path) || path_exists(lockp))
        return zmr_err(ZMR_EEXIST, "writer_create: %s already exists", path_exists(path) ? path : lockp);
    zmr_writer *w = calloc(1, sizeof *w);
    if (w == NULL || (w->path = strdup(path)) == NULL) {
        free(w);
        return zmr_err(ZMR_ENOMEM, "writer_create: no memory");
    }
    zmr_status st;
    const char *cj = collection_json ? collection_json : "{}";
    const char *sj = schema_json ? schema_json : "{}";
    json_object *coll;
    if ((st = zmr_json_parse(cj, strlen(cj), "collection", ZMR_EINVAL, &coll)) < 0 ||
        (st = zmr_json_parse(sj, strlen(sj), "sequence_schema", ZMR_EINVAL, &w->schema)) < 0 ||
        (st = check_schema(w)) < 0) {
        json_object_put(coll);
        writer_free(w);
        return st;
    }
    if (!json_object_is_type(coll, json_type_object)) {
        json_object_put(coll);
        writer_free(w);
        return zmr_err(ZMR_EINVAL, "collection document must be a JSON object");
    }
    /* molrec_version first, then the caller's keys */
    json_object *mv = NULL;
    int64_t version = ZMR_MOLREC_VERSION_MAX;
    if (json_object_object_get_ex(coll, "molrec_version", &mv)) {
        if (!json_object_is_type(mv, json_type_int) || json_object_get_int64(mv) < ZMR_MOLREC_VERSION_MIN ||
            json_object_get_int64(mv) > ZMR_MOLREC_VERSION_MAX) {
            json_object_put(coll);
            writer_free(w);
            return zmr_err(ZMR_EINVAL, "collection.molrec_version must be an integer in 1..2");
        }
        version = json_object_get_int64(mv);
    }
    w->collection = json_object_new_object();
    json_object_object_add(w->collection, "molrec_version", json_object_new_int64(version));
    json_object_object_foreach(coll, ck, cv) {
        if (strcmp(ck, "molrec_version"))
            json_object_object_add(w->collection, ck, json_object_get(cv));
    }
    json_object_put(coll);
    /* the layout's collection document always states its units (none
     * stated: {}) */
    if (!json_object_object_get_ex(w->collection, "units", &mv))
        json_object_object_add(w->collection, "units", json_object_new_object());
    else if ((st = check_units(mv)) < 0) {
        writer_free(w);
        return st;
    }

    int rc = mdb_env_create(&w->env);
    if (rc) {
        w->env = NULL;
        writer_free(w);
        return lmdb_err(rc, "writer_create: mdb_env_create");
    }
    w->mapsize = (size_t)64 << 20;
    mdb_env_set_mapsize(w->env, w->mapsize);
    /* NOSYNC while filling; commit syncs once at the end */
    rc = mdb_env_open(w->env, path, MDB_NOSUBDIR | MDB_NOSYNC | MDB_NOTLS, 0644);
    if (rc) {
        writer_free(w);
        return zmr_err(ZMR_EIO, "writer_create: %s: %s", path, mdb_strerror(rc));
    }
    if ((st = zmr_frame_create(&w->state, ZMR_FRAME_UPDATE)) < 0) {
        writer_free(w);
        return st;
    }
    *out = w;
    return ZMR_OK;
}

zmr_status zmr_writer_set_ff(zmr_writer *w, zmr_frame *ff)
{
    if (w == NULL || ff == NULL || ff->kind != ZMR_FRAME_FF)
        return zmr_err(ZMR_EINVAL, "set_ff: need a writer and a ZMR_FRAME_FF frame");
    if (w->failed)
        return refuse_failed(w, "set_ff");
    if (w->has_ff)
        return zmr_err(ZMR_ESTATE, "set_ff: ff already set");
    void *v;
    size_t n;
    zmr_status st = zmr_frame_encode(ff, &v, &n);
    if (st < 0)
        return st;
    w->has_ff = true;
    return push(w, (const unsigned char *)"ff", 2, v, n);
}

static const char *const binding_index[] = {"first_frame", "n_frames", "n_atoms", "has_trajectory", NULL};

zmr_status zmr_writer_set_index(zmr_writer *w, zmr_frame *index)
{
    if (w == NULL || index == NULL || index->kind != ZMR_FRAME_INDEX)
        return zmr_err(ZMR_EINVAL, "set_index: need a writer and a ZMR_FRAME_INDEX frame");
    if (w->failed)
        return refuse_failed(w, "set_index");
    size_t b;
    if (index->nblocks != 1 || zmr_frame_find_block(index, "records", &b) < 0)
        return zmr_err(ZMR_EINVAL, "set_index: the index frame holds exactly one block, \"records\"");
    const struct zmr_block *rb = &index->blocks[b];
    for (size_t c = 0; c < rb->ncols; c++)
        if (is_reserved(rb->cols[c].name, binding_index))
            return zmr_err(ZMR_EINVAL, "set_index: index column '%s' is the binding's own (first_frame, n_frames, "
                                       "n_atoms, has_trajectory); a collection's index column cannot take it",
                           rb->cols[c].name);
    zmr_frame *own;
    zmr_status st = zmr_frame_create(&own, ZMR_FRAME_INDEX);
    if (st == ZMR_OK && (st = zmr_frame_put_block_copy(own, rb)) < 0)
        zmr_frame_free(own);
    if (st < 0)
        return st;
    zmr_frame_free(w->own);
    w->own = own;
    return ZMR_OK;
}

static zmr_status end_record(zmr_writer *w)
{
    if (!w->in_record)
        return ZMR_OK;
    uint64_t r = w->n_records - 1;
    if (w->system == NULL && w->rules.frames == 0 && !w->rec_traj) {
        return fail_writer(w, zmr_err(ZMR_EINVAL, "record %llu has neither a system nor a trajectory (give a "
                                                  "system, frames, or zmr_writer_begin_trajectory for a "
                                                  "trajectory of zero frames)", (unsigned long long)r));
    }
    w->nfr[r] = w->rules.frames;
    w->has_traj[r] = w->rules.frames > 0 || w->rec_traj;
    w->n_frames_total += w->rules.frames;
    w->in_record = false;
    if (w->pending >= FLUSH_BYTES)
        return flush(w, NULL, 0);
    return ZMR_OK;
}

static zmr_status grow_index(zmr_writer *w)
{
    if (w->n_records < w->cap_records)
        return ZMR_OK;
    uint64_t cap = w->cap_records ? 2 * w->cap_records : 256;
    uint64_t *a = realloc(w->first, cap * 8);
    if (a) w->first = a;
    uint64_t *b = a ? realloc(w->nfr, cap * 8) : NULL;
    if (b) w->nfr = b;
    uint64_t *c = b ? realloc(w->natoms, cap * 8) : NULL;
    if (c) w->natoms = c;
    uint8_t *d = c ? realloc(w->has_traj, cap) : NULL;
    if (d) w->has_traj = d;
    if (d == NULL)
        return zmr_err(ZMR_ENOMEM, "writer: no memory for the index");
    w->cap_records = cap;
    return ZMR_OK;
}

zmr_status zmr_writer_begin_record(zmr_writer *w, const char *meta_json, zmr_frame *system, uint64_t *index)
{
    if (w == NULL)
        return zmr_err(ZMR_EINVAL, "begin_record: NULL writer");
    if (w->failed)
        return refuse_failed(w, "begin_record");
    if (system && system->kind != ZMR_FRAME_SYSTEM)
        return zmr_err(ZMR_EINVAL, "begin_record: the system must be a ZMR_FRAME_SYSTEM frame");
    const char *mj = meta_json ? meta_json : "{}";
    json_object *m;
    zmr_status st = zmr_json_parse(mj, strlen(mj), "record meta", ZMR_EINVAL, &m);
    if (st < 0)
        return st;
    bool obj = json_object_is_type(m, json_type_object);
    json_object_put(m);
    if (!obj)
        return zmr_err(ZMR_EINVAL, "record meta: must be a JSON object");
    void *sv = NULL;
    size_t sn = 0;
    zmr_frame *sys = NULL;
    if (system) {
        if ((st = zmr_frame_encode(system, &sv, &sn)) < 0)
            return st;
        if ((st = zmr_frame_decode(&sys, sv, sn, ZMR_FRAME_SYSTEM, "system")) < 0) {
            free(sv);
            return zmr_err(ZMR_EINVAL, "%s", zmr_last_error());
        }
    }
    if ((st = end_record(w)) < 0 || (st = grow_index(w)) < 0) {
        free(sv);
        zmr_frame_free(sys);
        return st == ZMR_ENOMEM ? st : fail_writer(w, st);
    }
    uint64_t r = w->n_records;
    unsigned char k[9];
    key_of(k, 'r', r);
    char *mcopy = malloc(strlen(mj) + 1);
    if (mcopy == NULL) {
        free(sv);
        zmr_frame_free(sys);
        return zmr_err(ZMR_ENOMEM, "begin_record: no memory");
    }
    memcpy(mcopy, mj, strlen(mj));
    if ((st = push(w, k, 9, mcopy, strlen(mj))) < 0) {
        free(sv);
        zmr_frame_free(sys);
        return st;
    }
    if (sv) {
        key_of(k, 's', r);
        if ((st = push(w, k, 9, sv, sn)) < 0) {
            zmr_frame_free(sys);
            return fail_writer(w, st);
        }
    }
    w->n_records++;
    w->first[r] = w->n_frames_total;
    w->nfr[r] = 0;
    w->has_traj[r] = 0;
    size_t ab;
    w->atoms_known = sys && zmr_frame_find_block(sys, "atoms", &ab) == ZMR_OK;
    w->natoms[r] = w->atoms_known ? sys->blocks[ab].count : 0;
    zmr_frame_free(w->system);
    w->system = sys;
    while (w->state->nblocks)
        zmr_frame_remove_block(w->state, w->state->nblocks - 1);
    w->state->has_box = false;
    w->rec_traj = false;
    zmr_rules_begin(&w->rules);
    w->in_record = true;
    if (index)
        *index = r;
    return ZMR_OK;
}

static void shape_text(char *buf, size_t n, const char *dtype, json_object *trailing)
{
    size_t used = (size_t)snprintf(buf, n, "%s[N]", dtype);
    for (size_t k = 0; trailing && k < json_object_array_length(trailing) && used < n; k++)
        used += (size_t)snprintf(buf + used, n - used, "[%s]",
                                 json_object_get_string(json_object_array_get_idx(trailing, k)));
}

static json_object *trailing_of(const struct zmr_col *c)
{
    json_object *t = json_object_new_array();
    for (size_t k = 1; k < c->ndim; k++)
        json_object_array_add(t, json_object_new_uint64(c->shape[k]));
    return t;
}

/* Hold block b of an update to the sequence_schema: a block never declared
 * is declared by its first presentation (dtype, trailing shape, nullable);
 * a declared one presents exactly its declared columns, at the declared
 * dtype and trailing shape. A zero-row block without columns (the update
 * that empties a block) gets its declared columns with zero rows. A mask
 * makes the column nullable (a union over the run). */
static zmr_status declare_block(zmr_writer *w, zmr_frame *out, struct zmr_block *ob)
{
    json_object *bd, *cols;
    if (is_reserved(ob->name, reserved_blocks))
        return zmr_err(ZMR_EINVAL, "add_frame: block '%s' is reserved by the trajectory layout (step, time, meta, "
                                   "box); a block cannot take it", ob->name);
    if (!json_object_object_get_ex(w->schema_blocks, ob->name, &bd)) {
        /* every block a trajectory carries is declared; one first presented
         * empty has no columns to declare until it is presented with rows */
        bd = json_object_new_object();
        json_object_object_add(w->schema_blocks, ob->name, bd);
    }
    if (!json_object_object_get_ex(bd, "columns", &cols)) {
        cols = json_object_new_object();
        json_object_object_add(bd, "columns", cols);
        /* a grid block's shape is pinned with its first presentation */
        if (ob->structural_shape)
            json_object_object_add(bd, "structural_shape", json_object_get(ob->structural_shape));
    }
    if (zmr_rule_declared_shape(ob, bd, ZMR_EINVAL) < 0)
        return zmr_err_prefix(ZMR_EINVAL, "add_frame");
    if (ob->count == 0 && ob->ncols == 0) {
        json_object_object_foreach(cols, cname, cd) {
            json_object *d, *t;
            zmr_dtype dt;
            uint64_t shape[ZMR_MAX_NDIM] = {0};
            size_t nd = 1;
            json_object_object_get_ex(cd, "dtype", &d);
            zmr_dtype_parse(json_object_get_string(d), &dt);
            if (json_object_object_get_ex(cd, "trailing", &t))
                for (size_t k = 0; k < json_object_array_length(t); k++)
                    zmr_json_u64(json_object_array_get_idx(t, k), &shape[nd++]);
            zmr_status st = dt == ZMR_STRING
                                ? zmr_frame_add_string_column(out, ob->name, cname, shape, nd, "[]", NULL)
                                : zmr_frame_add_column(out, ob->name, cname, dt, shape, nd, NULL, 0, NULL, 0);
            if (st < 0)
                return zmr_err_prefix(st, "add_frame: emptying a declared block");
        }
        return ZMR_OK;
    }
    bool fresh = json_object_object_length(cols) == 0;
    for (size_t ci = 0; ci < ob->ncols; ci++) {
        const struct zmr_col *c = &ob->cols[ci];
        json_object *cd, *d, *t;
        if (is_reserved(c->name, reserved_columns))
            return zmr_err(ZMR_EINVAL, "add_frame: column %s/%s: '%s' is reserved by a block's own index (offset, "
                                       "step_index, _validity)", ob->name, c->name, c->name);
        if (!json_object_object_get_ex(cols, c->name, &cd)) {
            if (!fresh)
                return zmr_err(ZMR_EINVAL, "add_frame: column %s/%s is not declared in sequence_schema.blocks.%s "
                                           "(the declaration is fixed by the first frame presenting the block)",
                               ob->name, c->name, ob->name);
            cd = json_object_new_object();
            json_object_object_add(cd, "dtype", json_object_new_string(zmr_dtype_name(c->dtype)));
            json_object_object_add(cols, c->name, cd);
        }
        json_object_object_get_ex(cd, "dtype", &d);
        json_object *given = trailing_of(c);
        bool have_t = json_object_object_get_ex(cd, "trailing", &t);
        if (strcmp(json_object_get_string(d), zmr_dtype_name(c->dtype)) ||
            (have_t && strcmp(zmr_json_text(t), zmr_json_text(given)))) {
            char want[96], got[96];
            shape_text(want, sizeof want, json_object_get_string(d), have_t ? t : NULL);
            shape_text(got, sizeof got, zmr_dtype_name(c->dtype), given);
            json_object_put(given);
            return zmr_err(ZMR_EINVAL, "add_frame: column %s/%s is declared %s in sequence_schema, given %s",
                           ob->name, c->name, want, got);
        }
        if (have_t)
            json_object_put(given);
        else
            json_object_object_add(cd, "trailing", given);
        if (c->validity && !json_object_object_get_ex(cd, "nullable", &t))
            json_object_object_add(cd, "nullable", json_object_new_boolean(1));
    }
    if (!fresh && json_object_object_length(cols) != (int)ob->ncols) {
        json_object_object_foreach(cols, cname, cd) {
            bool found = false;
            (void)cd;
            for (size_t ci = 0; ci < ob->ncols && !found; ci++)
                found = !strcmp(ob->cols[ci].name, cname);
            if (!found)
                return zmr_err(ZMR_EINVAL, "add_frame: block '%s' lacks column '%s' that sequence_schema declares "
                                           "(an update presents all of a block's declared columns or none: leave "
                                           "the block out to carry it forward)", ob->name, cname);
        }
    }
    return ZMR_OK;
}

/* A trajectory block sharing its name with a system block is the per-step
 * state of the system's rows (its row count: zmr_rules_aligned), and no
 * column is on both sides (a column is time-independent or not). */
static zmr_status check_against_system(const zmr_writer *w, const struct zmr_block *ob)
{
    size_t si;
    if (w->system == NULL || zmr_frame_find_block(w->system, ob->name, &si) < 0)
        return ZMR_OK;
    const struct zmr_block *sb = &w->system->blocks[si];
    for (size_t k = 0; k < ob->ncols; k++)
        for (size_t j = 0; j < sb->ncols; j++)
            if (!strcmp(ob->cols[k].name, sb->cols[j].name))
                return zmr_err(ZMR_EINVAL, "add_frame: column %s/%s is in both the system and the trajectory "
                                           "(a column is time-independent or not)", ob->name, ob->cols[k].name);
    return ZMR_OK;
}

zmr_status zmr_writer_begin_trajectory(zmr_writer *w)
{
    if (w == NULL)
        return zmr_err(ZMR_EINVAL, "begin_trajectory: NULL writer");
    if (w->failed)
        return refuse_failed(w, "begin_trajectory");
    if (!w->in_record)
        return zmr_err(ZMR_ESTATE, "begin_trajectory: no record begun (begin_record first)");
    w->rec_traj = true;
    return ZMR_OK;
}

/* add_frame, phase 1: the update's meta, declared keys only, each checked
 * against its declared tag, a declared fill standing in for a missing one. */
static zmr_status frame_meta(const zmr_writer *w, const zmr_frame *u, zmr_frame *out)
{
    json_object_object_foreach(u->meta, mk, mvv) {
        json_object *decl;
        (void)mvv;
        if (!json_object_object_get_ex(w->schema_meta, mk, &decl))
            return zmr_err(ZMR_EINVAL, "add_frame: meta key '%s' is not declared in sequence_schema.meta", mk);
    }
    json_object_object_foreach(w->schema_meta, key, decl) {
        zmr_tag tag;
        json_object *fill, *val;
        bool has_fill;
        zmr_status st;
        zmr_schema_meta_decl(decl, key, &tag, &fill, &has_fill);
        if (!json_object_object_get_ex(u->meta, key, &val)) {
            if (!has_fill)
                return zmr_err(ZMR_EINVAL, "add_frame: declared meta key '%s' missing and it has no fill", key);
            val = fill;
        } else if ((st = zmr_typed_check(tag, val, ZMR_EINVAL)) < 0) {
            char pre[160];
            snprintf(pre, sizeof pre, "add_frame: meta %.100s (declared %s)", key, zmr_tag_name(tag));
            return zmr_err_prefix(st, pre);
        }
        json_object_object_add(out->meta, key, json_object_get(val));
    }
    return ZMR_OK;
}

/* Phase 2: step (the previous one + 1 when not given, 0 first), time and
 * cell, held to the record's frames so far (zmr_rules_frame). */
static zmr_status frame_step_time_box(const zmr_writer *w, const zmr_frame *u, zmr_frame *out)
{
    out->has_step = true;
    out->step = u->has_step ? u->step : (w->rules.frames ? w->rules.last_step + 1 : 0);
    out->has_time = u->has_time;
    out->time = u->time;
    out->has_box = u->has_box;
    out->box = u->box;
    zmr_status st = zmr_rules_frame(&w->rules, out, ZMR_EINVAL);
    return st < 0 ? zmr_err_prefix(st, "add_frame") : ZMR_OK;
}

/* Phase 3: the blocks, each held to its declaration (which a first
 * presentation extends) and to the system, then the resolved frame to the
 * alignment rules. The declaration may have grown: a failure here stops
 * the writer. */
static zmr_status frame_blocks(zmr_writer *w, const zmr_frame *u, zmr_frame *out)
{
    zmr_status st = ZMR_OK;
    for (size_t bi = 0; bi < u->nblocks && st == ZMR_OK; bi++) {
        st = zmr_frame_put_block_copy(out, &u->blocks[bi]);
        if (st == ZMR_OK)
            st = declare_block(w, out, &out->blocks[out->nblocks - 1]);
        if (st == ZMR_OK)
            st = check_against_system(w, &out->blocks[out->nblocks - 1]);
    }
    if (st == ZMR_OK && (st = zmr_rules_aligned(w->schema_blocks, out, w->state, w->system, ZMR_EINVAL)) < 0)
        st = zmr_err_prefix(st, "add_frame");
    return st;
}

/* Phase 4: carry forward. The box is kept only when it changed; every
 * block is rounded by its declared precision, kept only when it differs
 * from what would carry forward (the first frame keeps all), and folded
 * into the record's state. */
static zmr_status frame_carry(zmr_writer *w, zmr_frame *out)
{
    zmr_status st = ZMR_OK;
    bool changed = out->has_box && (!w->state->has_box || memcmp(&out->box, &w->state->box, sizeof out->box));
    if (changed) {
        w->state->has_box = true;
        w->state->box = out->box;
    }
    out->has_box = changed;
    for (size_t bi = 0; bi < out->nblocks && st == ZMR_OK;) {
        struct zmr_block *ob = &out->blocks[bi];
        for (size_t ci = 0; ci < ob->ncols; ci++) {
            struct zmr_col *c = &ob->cols[ci];
            double pr = c->dtype == ZMR_F64 ? zmr_schema_precision(w->schema_blocks, ob->name, c->name) : 0.0;
            for (uint64_t e = 0; pr != 0.0 && e < c->nelem; e++)
                ((double *)c->data)[e] = zmr_round_precision(((double *)c->data)[e], pr);
        }
        size_t si;
        if (w->rules.frames > 0 && zmr_frame_find_block(w->state, ob->name, &si) == ZMR_OK &&
            zmr_block_equal(&w->state->blocks[si], ob)) {
            zmr_frame_remove_block(out, bi);
            continue;
        }
        st = zmr_frame_put_block_copy(w->state, ob);
        bi++;
    }
    return st;
}

/* Phase 5: the resolved state's row references, then the value is encoded
 * and queued under its f key; n_atoms is set by the first atoms block. */
static zmr_status frame_queue(zmr_writer *w, zmr_frame *out)
{
    void *v = NULL;
    size_t n = 0, ab;
    zmr_status st = ZMR_OK;
    if (zmr_frame_check_targets(w->state, w->system, w->state) < 0)
        st = zmr_err_prefix(ZMR_EINVAL, "add_frame");
    if (st == ZMR_OK)
        st = zmr_frame_encode(out, &v, &n);
    if (st < 0)
        return st;
    if (!w->atoms_known && zmr_frame_find_block(w->state, "atoms", &ab) == ZMR_OK) {
        w->atoms_known = true;
        w->natoms[w->n_records - 1] = w->state->blocks[ab].count;
    }
    unsigned char k[9];
    key_of(k, 'f', w->n_frames_total + w->rules.frames);
    return push(w, k, 9, v, n);
}

zmr_status zmr_writer_add_frame(zmr_writer *w, zmr_frame *u)
{
    if (w == NULL || u == NULL || u->kind != ZMR_FRAME_UPDATE)
        return zmr_err(ZMR_EINVAL, "add_frame: need a writer and a ZMR_FRAME_UPDATE frame");
    if (w->failed)
        return refuse_failed(w, "add_frame");
    if (!w->in_record)
        return zmr_err(ZMR_ESTATE, "add_frame: no record begun (begin_record first)");
    zmr_frame *out;
    zmr_status st = zmr_frame_create(&out, ZMR_FRAME_UPDATE);
    if (st < 0)
        return st;
    /* phases 1-2 refuse the caller's data before anything changes */
    if ((st = frame_meta(w, u, out)) < 0 || (st = frame_step_time_box(w, u, out)) < 0) {
        zmr_frame_free(out);
        return st;
    }
    /* from phase 3 on the declaration or the carried state may have changed */
    if ((st = frame_blocks(w, u, out)) == ZMR_OK && (st = frame_carry(w, out)) == ZMR_OK)
        st = frame_queue(w, out);
    if (st == ZMR_OK)
        zmr_rules_next(&w->rules, out);
    zmr_frame_free(out);
    return st < 0 ? fail_writer(w, st) : ZMR_OK;
}

/* The declaration as written: every column {"dtype", "trailing",
 * "precision"?, "nullable"?} in that order, "trailing" [] for a column no
 * frame presented and that none was given for. */
static void fix_blocks(zmr_writer *w)
{
    json_object_object_foreach(w->schema_blocks, bname, bd) {
        json_object *cols, *nc = json_object_new_object();
        (void)bname;
        if (json_object_object_get_ex(bd, "columns", &cols)) {
            json_object_object_foreach(cols, cname, cd) {
                json_object *n = json_object_new_object(), *x;
                static const char *const order[] = {"dtype", "trailing", "precision", "nullable"};
                for (int k = 0; k < 4; k++) {
                    if (json_object_object_get_ex(cd, order[k], &x))
                        json_object_object_add(n, order[k], json_object_get(x));
                    else if (k == 1)
                        json_object_object_add(n, "trailing", json_object_new_array());
                }
                json_object_object_add(nc, cname, n);
            }
        }
        json_object_object_add(bd, "columns", nc);
    }
}

zmr_status zmr_writer_commit(zmr_writer *w)
{
    if (w == NULL)
        return zmr_err(ZMR_EINVAL, "commit: NULL writer");
    zmr_status st = w->failed ? refuse_failed(w, "commit") : end_record(w);
    zmr_frame *idx = NULL;
    void *iv = NULL;
    size_t in = 0;
    char *mtext = NULL;
    if (st == ZMR_OK)
        st = zmr_frame_create(&idx, ZMR_FRAME_INDEX);
    if (st == ZMR_OK) {
        uint64_t R = w->n_records, shape[1] = {R};
        /* the collection's own columns first, then the binding's four */
        if (w->own && w->own->blocks[0].count != R)
            st = zmr_err(ZMR_EINVAL, "commit: the index columns hold %llu rows but the collection has %llu "
                                     "records; nothing committed", (unsigned long long)w->own->blocks[0].count,
                         (unsigned long long)R);
        else if (w->own)
            st = zmr_frame_put_block_copy(idx, &w->own->blocks[0]);
        else
            st = zmr_frame_add_block(idx, "records", R);
        if (st == ZMR_OK)
            st = zmr_frame_add_column(idx, "records", "first_frame", ZMR_U64, shape, 1, w->first, R * 8, NULL, 0);
        if (st == ZMR_OK)
            st = zmr_frame_add_column(idx, "records", "n_frames", ZMR_U64, shape, 1, w->nfr, R * 8, NULL, 0);
        if (st == ZMR_OK)
            st = zmr_frame_add_column(idx, "records", "n_atoms", ZMR_U64, shape, 1, w->natoms, R * 8, NULL, 0);
        if (st == ZMR_OK)
            st = zmr_frame_add_column(idx, "records", "has_trajectory", ZMR_BOOL, shape, 1, w->has_traj, R,
                                      NULL, 0);
        if (st == ZMR_OK)
            st = zmr_frame_encode(idx, &iv, &in);
    }
    if (st == ZMR_OK) {
        fix_blocks(w);
        json_object *m = json_object_new_object();
        json_object_object_add(m, "layout", json_object_new_string("mrec-lmdb"));
        json_object_object_add(m, "layout_version", json_object_new_int(ZMR_LAYOUT_VERSION));
        json_object_object_add(m, "collection", json_object_get(w->collection));
        json_object_object_add(m, "sequence_schema", json_object_get(w->schema));
        json_object_object_add(m, "n_records", json_object_new_uint64(w->n_records));
        json_object_object_add(m, "n_frames", json_object_new_uint64(w->n_frames_total));
        mtext = strdup(zmr_json_text(m));
        json_object_put(m);
        if (mtext == NULL)
            st = zmr_err(ZMR_ENOMEM, "commit: no memory");
    }
    if (st == ZMR_OK) {
        struct item tail[2] = {{.klen = 5, .val = iv, .vlen = in}, {.klen = 4, .val = mtext, .vlen = strlen(mtext)}};
        memcpy(tail[0].key, "index", 5);
        memcpy(tail[1].key, "meta", 4);
        st = flush(w, tail, 2);
    }
    if (st == ZMR_OK) {
        int rc = mdb_env_sync(w->env, 1);
        if (rc)
            st = zmr_err(ZMR_EIO, "commit: sync %s: %s", w->path, mdb_strerror(rc));
    }
    free(iv);
    free(mtext);
    zmr_frame_free(idx);
    writer_free(w);
    return st;
}

void zmr_writer_abort(zmr_writer *w) { writer_free(w); }
