/*
 * zr_lua.i - the Lua 5.4 flavour of the loaderx-in-C interface.
 *
 * Builds the C module `zrecord` (zrecord.so, luaopen_zrecord). SWIG wraps
 * every function of zr_core.i into a raw table; the idiomatic layer
 * (zrecord.lua, compiled into the module as a string) is then run over it
 * and is what `require "zrecord"` returns; the raw table stays reachable
 * as `zrecord.raw`.
 *
 * Conventions of the raw table:
 *   - 64-bit integers (int64_t, uint64_t, size_t, uint32_t, unsigned, the
 *     enums) are Lua integers both ways: lua_isinteger on the way in (a
 *     float, even 2.0, or a numeric string is an error naming the
 *     argument) and lua_pushinteger on the way out. SWIG's stock Lua
 *     typemaps would make them floats. A uint64_t above 2^63 - 1 comes out
 *     negative (two's complement), as Lua has no unsigned integers;
 *   - every C function returning an int zr_status returns nothing (or its
 *     out-parameters) on success and raises a Lua error on a negative
 *     status; the error value is the string "<CODE>: <detail>", CODE one
 *     of EINVAL, ERANGE, ... and detail the calling thread's
 *     zr_last_error(), read in the same C call, so it is never stale;
 *   - handles are light pointer objects that nothing frees implicitly:
 *     the idiomatic layer closes them on close(), __close and __gc;
 *   - records go in as Lua strings (or zrecord buffers) of raw bytes and
 *     come out as Lua strings; the calls that move records between Lua
 *     tables and packed C buffers are hand-written lua_CFunctions
 *     (%native below) rather than typemaps.
 */
%module zrecord

%{
#include <lua.h>
#include <lauxlib.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <zloader.h>
#include "zr_bind_options.h"
#include "zr_bind_loader.h"
#include "zr_bind_mrec.h"

/* Name of the status code, for the "<CODE>: <detail>" error strings: the
 * C table's (zr_status_name), "ERROR" for a code outside it. */
static const char *zr_lua_code_name(int status)
{
    const char *name = status < 0 ? zr_status_name(status) : NULL;
    return name ? name : "ERROR";
}

/* Push the error string for a negative status (detail from this thread's
 * zr_last_error(), read right after the failing call). */
static void zr_lua_push_status(lua_State *L, int status)
{
    const char *detail = zr_last_error();
    if (detail == NULL || detail[0] == '\0')
        detail = zr_strerror(status);
    lua_pushfstring(L, "%s: %s", zr_lua_code_name(status), detail ? detail : "unknown error");
}

/* Raise the Lua error for a negative status. Never returns. */
static int zr_lua_fail(lua_State *L, int status)
{
    zr_lua_push_status(L, status);
    return lua_error(L);
}

/* Raise "<CODE>: <detail>" without the position prefix luaL_error adds,
 * so every error of the module has the same shape. */
static int zr_lua_raise(lua_State *L, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    lua_pushvfstring(L, fmt, ap);
    va_end(ap);
    return lua_error(L);
}

/* A strict Lua integer at stack slot idx (no floats, no strings). */
static int zr_lua_get_int(lua_State *L, int idx, const char *what, lua_Integer *out)
{
    if (!lua_isinteger(L, idx)) {
        if (lua_type(L, idx) == LUA_TNUMBER)
            lua_pushfstring(L, "EINVAL: %s must be an integer, got the float %s", what,
                            lua_tostring(L, idx));
        else
            lua_pushfstring(L, "EINVAL: %s must be an integer, got %s", what,
                            luaL_typename(L, idx));
        return -1;
    }
    *out = lua_tointeger(L, idx);
    return 0;
}

static int zr_lua_get_u64(lua_State *L, int idx, const char *what, uint64_t *out)
{
    lua_Integer v = 0;
    if (zr_lua_get_int(L, idx, what, &v) < 0)
        return -1;
    if (v < 0) {
        lua_pushfstring(L, "EINVAL: %s must be >= 0, got %I", what, v);
        return -1;
    }
    *out = (uint64_t)v;
    return 0;
}

/* ---------------------------------------------------------------- buffers
 * A zrecord buffer: a fixed-size, writable block of bytes owned by Lua
 * (full userdata), for gathers that reuse one destination. */
#define ZR_LUA_BUFFER "zrecord.buffer"

typedef struct zr_lua_buffer {
    size_t size;
    unsigned char bytes[];  /* userdata memory is maximally aligned */
} zr_lua_buffer;

static zr_lua_buffer *zr_lua_testbuffer(lua_State *L, int idx)
{
    return (zr_lua_buffer *)luaL_testudata(L, idx, ZR_LUA_BUFFER);
}

/* Bytes at slot idx: a string or a buffer. NULL (message pushed) otherwise. */
static const void *zr_lua_src_bytes(lua_State *L, int idx, const char *what, size_t *len)
{
    if (lua_type(L, idx) == LUA_TSTRING)
        return lua_tolstring(L, idx, len);
    zr_lua_buffer *b = zr_lua_testbuffer(L, idx);
    if (b != NULL) {
        *len = b->size;
        return b->bytes;
    }
    lua_pushfstring(L, "EINVAL: %s must be a string or a zrecord buffer, got %s", what,
                    luaL_typename(L, idx));
    return NULL;
}

/* A sequence of integers (a Lua table) -> malloc'd int64 array. */
static int64_t *zr_lua_index_array(lua_State *L, int idx, const char *what, uint64_t *count)
{
    if (lua_type(L, idx) != LUA_TTABLE) {
        lua_pushfstring(L, "EINVAL: %s must be a table of integers, got %s", what,
                        luaL_typename(L, idx));
        return NULL;
    }
    lua_Integer n = luaL_len(L, idx);
    int64_t *arr = (int64_t *)malloc((size_t)(n > 0 ? n : 1) * sizeof *arr);
    if (arr == NULL) {
        lua_pushfstring(L, "ENOMEM: %s: cannot allocate %I indices", what, n);
        return NULL;
    }
    for (lua_Integer k = 1; k <= n; k++) {
        lua_geti(L, idx, k);
        if (!lua_isinteger(L, -1)) {
            const char *tn = lua_type(L, -1) == LUA_TNUMBER ? "a float" : luaL_typename(L, -1);
            lua_pop(L, 1);
            free(arr);
            lua_pushfstring(L, "EINVAL: %s entry %I must be an integer, got %s", what, k - 1, tn);
            return NULL;
        }
        arr[k - 1] = (int64_t)lua_tointeger(L, -1);
        lua_pop(L, 1);
    }
    *count = (uint64_t)n;
    return arr;
}

static void zr_lua_push_u64_table(lua_State *L, const uint64_t *v, uint64_t n)
{
    lua_createtable(L, n < INT32_MAX ? (int)n : 0, 0);
    for (uint64_t k = 0; k < n; k++) {
        lua_pushinteger(L, (lua_Integer)v[k]);
        lua_seti(L, -2, (lua_Integer)k + 1);
    }
}

/* Integer field `key` of the table at idx; `dflt` when absent. */
static int zr_lua_u64_field(lua_State *L, int idx, const char *key, uint64_t dflt,
                            int required, uint64_t *out)
{
    int t = lua_getfield(L, idx, key);
    if (t == LUA_TNIL) {
        lua_pop(L, 1);
        if (required) {
            lua_pushfstring(L, "EINVAL: field '%s' is required", key);
            return -1;
        }
        *out = dflt;
        return 0;
    }
    char what[64];
    snprintf(what, sizeof what, "field '%s'", key);
    /* seeds may use all 64 bits: accept negative integers as their
     * two's-complement value there only. */
    if (strcmp(key, "seed") == 0) {
        lua_Integer v = 0;
        int rc = zr_lua_get_int(L, -1, what, &v);
        if (rc < 0) {
            lua_remove(L, -2);
            return -1;
        }
        *out = (uint64_t)v;
    } else if (zr_lua_get_u64(L, -1, what, out) < 0) {
        lua_remove(L, -2);
        return -1;
    }
    lua_pop(L, 1);
    return 0;
}

static int zr_lua_mode_field(lua_State *L, int idx, zsm_mode dflt, zsm_mode *out)
{
    int t = lua_getfield(L, idx, "mode");
    if (t == LUA_TNIL) {
        *out = dflt;
    } else if (t == LUA_TSTRING) {
        if (zsm_mode_parse(lua_tostring(L, -1), out) < 0) {
            lua_pushfstring(L, "EINVAL: field 'mode' must be 'sequential', 'iid' or 'cyclic', got '%s'",
                            lua_tostring(L, -1));
            lua_remove(L, -2);
            return -1;
        }
    } else {
        uint64_t v = 0;
        if (zr_lua_get_u64(L, -1, "field 'mode'", &v) < 0 || v > (uint64_t)ZSM_CYCLIC) {
            if (v > (uint64_t)ZSM_CYCLIC)
                lua_pushfstring(L, "EINVAL: field 'mode' must be 0, 1 or 2, got %I", (lua_Integer)v);
            lua_remove(L, -2);
            return -1;
        }
        *out = (zsm_mode)v;
    }
    lua_pop(L, 1);
    return 0;
}

static int zr_lua_cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Refuse a configuration table (at idx) with keys outside `valid`
 * (NULL-terminated): a misspelt option must not be silently ignored.
 * Pushes "EINVAL: <what>: unknown option(s) 'a', 'b' (valid options: ...)"
 * naming every unknown key, sorted, and returns -1. */
static int zr_lua_check_fields(lua_State *L, int idx, const char *what, const char *const *valid)
{
    enum { MAX_UNKNOWN = 16 };
    const char *unknown[MAX_UNKNOWN];
    int nunknown = 0, more = 0;
    idx = lua_absindex(L, idx);
    lua_pushnil(L);
    while (lua_next(L, idx) != 0) {
        lua_pop(L, 1); /* the value */
        if (lua_type(L, -1) != LUA_TSTRING) {
            lua_pushfstring(L, "EINVAL: %s: option names must be strings, got a %s key",
                            what, luaL_typename(L, -1));
            lua_remove(L, -2);
            return -1;
        }
        const char *key = lua_tostring(L, -1); /* stays valid: the table holds it */
        int known = 0;
        for (const char *const *v = valid; *v != NULL && !known; v++)
            known = strcmp(key, *v) == 0;
        if (!known) {
            if (nunknown < MAX_UNKNOWN)
                unknown[nunknown++] = key;
            else
                more = 1;
        }
    }
    if (nunknown == 0)
        return 0;
    qsort(unknown, (size_t)nunknown, sizeof unknown[0], zr_lua_cmp_str);
    luaL_Buffer b;
    luaL_buffinit(L, &b);
    lua_pushfstring(L, "EINVAL: %s: unknown option%s ", what, nunknown > 1 ? "s" : "");
    luaL_addvalue(&b);
    for (int k = 0; k < nunknown; k++) {
        lua_pushfstring(L, "%s'%s'", k > 0 ? ", " : "", unknown[k]);
        luaL_addvalue(&b);
    }
    if (more)
        luaL_addstring(&b, ", ...");
    luaL_addstring(&b, " (valid options:");
    for (const char *const *v = valid; *v != NULL; v++) {
        luaL_addstring(&b, v == valid ? " " : ", ");
        luaL_addstring(&b, *v);
    }
    luaL_addstring(&b, ")");
    luaL_pushresult(&b);
    return -1;
}

static const char *const zr_lua_sampler_fields[] = {
    "length", "batch_size", "mode", "seed", "rank", "world_size", NULL,
};
static const char *const zr_lua_loader_fields[] = {
    "batch_size", "mode", "seed", "start_step", "rank", "world_size", "num_workers", "prefetch",
#if ZLD_OPTIONS_VERSION >= 2
    "readahead",
#endif
    "flip",
    /* finite passes, bucketing, packing (zr_lua_loader_extra) */
    "pass", "shuffle", "drop_last", "epoch", "even_batches", "bucket_lengths", "bucket_window",
    "pack", "pack_length", "pack_window", "pack_policy", "pack_overlong",
    NULL,
};

static int zr_lua_u32(lua_State *L, uint64_t v, const char *key, uint32_t *out)
{
    if (v > UINT32_MAX) {
        lua_pushfstring(L, "EINVAL: field '%s' must fit in 32 bits, got %I", key, (lua_Integer)v);
        return -1;
    }
    *out = (uint32_t)v;
    return 0;
}

/* {length, batch_size, seed, mode, rank, world_size} -> zsm_config. */
static int zr_lua_sampler_config(lua_State *L, int idx, zsm_config *cfg)
{
    uint64_t rank = 0, world = 1;
    if (lua_type(L, idx) != LUA_TTABLE) {
        lua_pushfstring(L, "EINVAL: sampler config must be a table, got %s", luaL_typename(L, idx));
        return -1;
    }
    memset(cfg, 0, sizeof *cfg);
    if (zr_lua_check_fields(L, idx, "sampler", zr_lua_sampler_fields) < 0 ||
        zr_lua_u64_field(L, idx, "length", 0, 1, &cfg->length) < 0 ||
        zr_lua_u64_field(L, idx, "batch_size", 0, 1, &cfg->batch_size) < 0 ||
        zr_lua_u64_field(L, idx, "seed", 0, 0, &cfg->seed) < 0 ||
        zr_lua_mode_field(L, idx, ZSM_CYCLIC, &cfg->mode) < 0 ||
        zr_lua_u64_field(L, idx, "rank", 0, 0, &rank) < 0 ||
        zr_lua_u64_field(L, idx, "world_size", 1, 0, &world) < 0 ||
        zr_lua_u32(L, rank, "rank", &cfg->rank) < 0 ||
        zr_lua_u32(L, world, "world_size", &cfg->world_size) < 0)
        return -1;
    return 0;
}

/* "flip" (raw form): a sequence of {stream =, width =, elem_size =, p =}
 * tables (stream 0-based; zld_create checks them against the streams).
 * zrecord.lua resolves the user's {key = p} into this form. */
static int zr_lua_flips_field(lua_State *L, int idx, zr_bind_options *h)
{
    int t = lua_getfield(L, idx, "flip");
    if (t == LUA_TNIL) {
        lua_pop(L, 1);
        return 0;
    }
    if (t != LUA_TTABLE) {
        lua_pushfstring(L, "EINVAL: field 'flip' must be a table of {stream, width, elem_size, p}, "
                           "got %s", luaL_typename(L, -1));
        lua_remove(L, -2);
        return -1;
    }
    int ft = lua_absindex(L, -1);
    lua_Integer n = luaL_len(L, ft);
    if (n > ZR_BIND_MAX_FLIPS) {
        lua_pushfstring(L, "EINVAL: at most %d flipped streams per loader, got %I", ZR_BIND_MAX_FLIPS, n);
        lua_remove(L, -2);
        return -1;
    }
    for (lua_Integer k = 1; k <= n; k++) {
        uint64_t stream = 0, width = 0, elem = 0;
        if (lua_geti(L, ft, k) != LUA_TTABLE) {
            lua_pushfstring(L, "EINVAL: flip entry %I must be a table, got %s", k - 1,
                            luaL_typename(L, -1));
            lua_remove(L, -2);
            lua_remove(L, -2);
            return -1;
        }
        int e = lua_absindex(L, -1);
        if (zr_lua_u64_field(L, e, "stream", 0, 1, &stream) < 0 ||
            zr_lua_u64_field(L, e, "width", 0, 1, &width) < 0 ||
            zr_lua_u64_field(L, e, "elem_size", 0, 1, &elem) < 0) {
            lua_remove(L, -2);
            lua_remove(L, -2);
            return -1;
        }
        lua_getfield(L, e, "p");
        if (lua_type(L, -1) != LUA_TNUMBER) {
            lua_pushfstring(L, "EINVAL: flip entry %I: field 'p' must be a number, got %s", k - 1,
                            luaL_typename(L, -1));
            lua_remove(L, -2);
            lua_remove(L, -2);
            lua_remove(L, -2);
            return -1;
        }
        h->flips[k - 1].p = lua_tonumber(L, -1);
        lua_pop(L, 2);
        h->flips[k - 1].stream = (size_t)stream;
        h->flips[k - 1].width = width;
        h->flips[k - 1].elem_size = elem > UINT32_MAX ? 0 : (uint32_t)elem;
    }
    lua_pop(L, 1);
    h->o.flips = n > 0 ? h->flips : NULL;
    h->o.nflips = (size_t)n;
    return 0;
}

/* ------------------------------------------- passes, bucketing, packing
 * Options beyond the endless loader's (zr_bind_loader.h has the rules
 * shared with Go). Booleans: pass, shuffle, drop_last, even_batches, pack
 * (true/false, or 0/1). */
static int zr_lua_bool_field(lua_State *L, int idx, const char *key, int *out)
{
    int t = lua_getfield(L, idx, key);
    if (t == LUA_TNIL) {
        lua_pop(L, 1);
        return 0;
    }
    if (t == LUA_TBOOLEAN) {
        *out = lua_toboolean(L, -1);
    } else if (lua_isinteger(L, -1) && (lua_tointeger(L, -1) == 0 || lua_tointeger(L, -1) == 1)) {
        *out = (int)lua_tointeger(L, -1);
    } else {
        lua_pushfstring(L, "EINVAL: field '%s' must be a boolean, got %s", key, luaL_typename(L, -1));
        lua_remove(L, -2);
        return -1;
    }
    lua_pop(L, 1);
    return 0;
}

/* A string field (nil: *out = NULL). The string stays valid while the
 * options table holds it. */
static int zr_lua_name_field(lua_State *L, int idx, const char *key, const char **out)
{
    int t = lua_getfield(L, idx, key);
    *out = NULL;
    if (t != LUA_TNIL && t != LUA_TSTRING) {
        lua_pushfstring(L, "EINVAL: field '%s' must be a string, got %s", key, luaL_typename(L, -1));
        lua_remove(L, -2);
        return -1;
    }
    if (t == LUA_TSTRING)
        *out = lua_tostring(L, -1);
    lua_pop(L, 1);
    return 0;
}

/* bucket_lengths (a table of integers, one per record, each < 2^32) as a
 * uint32 array in a userdata left on the stack for the call (zld_create
 * copies it; Lua collects it). */
static int zr_lua_bucket_field(lua_State *L, int idx, zld_options *o)
{
    if (lua_getfield(L, idx, "bucket_lengths") == LUA_TNIL) {
        lua_pop(L, 1);
        return 0;
    }
    if (lua_type(L, -1) != LUA_TTABLE) {
        lua_pushfstring(L, "EINVAL: field 'bucket_lengths' must be a table of integers, got %s",
                        luaL_typename(L, -1));
        lua_remove(L, -2);
        return -1;
    }
    int lt = lua_absindex(L, -1);
    lua_Integer n = luaL_len(L, lt);
    uint32_t *arr = (uint32_t *)lua_newuserdatauv(L, (size_t)(n > 0 ? n : 1) * sizeof *arr, 0);
    for (lua_Integer k = 1; k <= n; k++) {
        lua_geti(L, lt, k);
        if (!lua_isinteger(L, -1) || lua_tointeger(L, -1) < 0 ||
            (uint64_t)lua_tointeger(L, -1) > UINT32_MAX) {
            lua_pushfstring(L, "EINVAL: bucket_lengths: entry %I must be an integer in [0, 2^32), "
                            "got %s", k - 1, luaL_typename(L, -1));
            lua_replace(L, lt);
            lua_settop(L, lt);
            return -1;
        }
        arr[k - 1] = (uint32_t)lua_tointeger(L, -1);
        lua_pop(L, 1);
    }
    lua_remove(L, lt); /* the userdata stays below the call's results */
    o->bucket_lengths = arr;
    o->bucket_count = (uint64_t)n;
    return zr_lua_u64_field(L, idx, "bucket_window", 0, 0, &o->bucket_window);
}

static int zr_lua_loader_extra(lua_State *L, int idx, zld_options *o)
{
    int pack = 0;
    const char *policy = NULL, *overlong = NULL;
    uint64_t length = 0, window = 0;
    if (zr_lua_bool_field(L, idx, "pass", &o->pass) < 0 ||
        zr_lua_bool_field(L, idx, "shuffle", &o->shuffle) < 0 ||
        zr_lua_bool_field(L, idx, "drop_last", &o->drop_last) < 0 ||
        zr_lua_bool_field(L, idx, "even_batches", &o->even_batches) < 0 ||
        zr_lua_u64_field(L, idx, "epoch", 0, 0, &o->epoch) < 0 ||
        zr_lua_bool_field(L, idx, "pack", &pack) < 0 ||
        zr_lua_u64_field(L, idx, "pack_length", 0, 0, &length) < 0 ||
        zr_lua_u64_field(L, idx, "pack_window", 0, 0, &window) < 0 ||
        zr_lua_name_field(L, idx, "pack_policy", &policy) < 0 ||
        zr_lua_name_field(L, idx, "pack_overlong", &overlong) < 0)
        return -1;
    if (pack) {
        int rc = zr_bind_pack_options(o, length, window, policy, overlong);
        if (rc < 0) {
            zr_lua_push_status(L, rc);
            return -1;
        }
    }
    return zr_lua_bucket_field(L, idx, o);
}
/* zld_get_state: the pass, bucketing and pack fields into the table on
 * top (only those in force; bucket_lengths is the loader's own copy, read
 * while it is open). */
static void zr_lua_push_state_extra(lua_State *L, const zld_options *o)
{
    if (o->pass) {
        lua_pushboolean(L, 1); lua_setfield(L, -2, "pass");
        lua_pushboolean(L, o->shuffle); lua_setfield(L, -2, "shuffle");
        lua_pushboolean(L, o->drop_last); lua_setfield(L, -2, "drop_last");
        lua_pushinteger(L, (lua_Integer)o->epoch); lua_setfield(L, -2, "epoch");
        lua_pushboolean(L, o->even_batches); lua_setfield(L, -2, "even_batches");
    }
    if (o->bucket_lengths != NULL && o->bucket_count > 0) {
        lua_createtable(L, o->bucket_count < INT32_MAX ? (int)o->bucket_count : 0, 0);
        for (uint64_t k = 0; k < o->bucket_count; k++) {
            lua_pushinteger(L, (lua_Integer)o->bucket_lengths[k]);
            lua_seti(L, -2, (lua_Integer)k + 1);
        }
        lua_setfield(L, -2, "bucket_lengths");
        lua_pushinteger(L, (lua_Integer)o->bucket_window); lua_setfield(L, -2, "bucket_window");
    }
    if (o->pack) {
        lua_pushboolean(L, 1); lua_setfield(L, -2, "pack");
        lua_pushinteger(L, (lua_Integer)o->pack_length); lua_setfield(L, -2, "pack_length");
        lua_pushinteger(L, (lua_Integer)o->pack_window); lua_setfield(L, -2, "pack_window");
        lua_pushstring(L, zsm_pack_policy_name(o->pack_policy)); lua_setfield(L, -2, "pack_policy");
        lua_pushstring(L, zsm_pack_overlong_name(o->pack_overlong)); lua_setfield(L, -2, "pack_overlong");
    }
}
/* ------------------------------------------- end passes, bucketing, packing */

/* Table of zld_options fields -> h->o (absent fields: defaults). */
static int zr_lua_loader_options(lua_State *L, int idx, zr_bind_options *h)
{
    zld_options *o = &h->o;
    zld_options init;
    uint64_t rank = 0, world = 1, workers = 0, prefetch = 0, readahead = ZLD_READAHEAD_AUTO;
    zld_options_init(&init, ZLD_OPTIONS_VERSION);
    *o = init;
    if (lua_isnoneornil(L, idx))
        return 0;
    if (lua_type(L, idx) != LUA_TTABLE) {
        lua_pushfstring(L, "EINVAL: loader options must be a table, got %s", luaL_typename(L, idx));
        return -1;
    }
    if (zr_lua_check_fields(L, idx, "loader", zr_lua_loader_fields) < 0 ||
        zr_lua_u64_field(L, idx, "batch_size", init.batch_size, 0, &o->batch_size) < 0 ||
        zr_lua_mode_field(L, idx, init.mode, &o->mode) < 0 ||
        zr_lua_u64_field(L, idx, "seed", init.seed, 0, &o->seed) < 0 ||
        zr_lua_u64_field(L, idx, "start_step", init.start_step, 0, &o->start_step) < 0 ||
        zr_lua_u64_field(L, idx, "rank", 0, 0, &rank) < 0 ||
        zr_lua_u64_field(L, idx, "world_size", 1, 0, &world) < 0 ||
        zr_lua_u64_field(L, idx, "num_workers", 0, 0, &workers) < 0 ||
        zr_lua_u64_field(L, idx, "prefetch", 0, 0, &prefetch) < 0 ||
        zr_lua_u64_field(L, idx, "readahead", ZLD_READAHEAD_AUTO, 0, &readahead) < 0 ||
        zr_lua_u32(L, rank, "rank", &o->rank) < 0 ||
        zr_lua_u32(L, world, "world_size", &o->world_size) < 0 ||
        zr_lua_u32(L, workers, "num_workers", &o->num_workers) < 0 ||
        zr_lua_u32(L, prefetch, "prefetch", &o->prefetch) < 0 ||
        zr_lua_u32(L, readahead, "readahead", &o->readahead) < 0)
        return -1; /* their limits: zld_create (ZLD_MAX_*) */
    if (zr_lua_loader_extra(L, idx, o) < 0)
        return -1;
    return zr_lua_flips_field(L, idx, h);
}

/* Push one packed ragged record as {shape = {...}, data = "<payload>"}. */
static int zr_lua_push_ragged_record(lua_State *L, const unsigned char *rec, uint64_t size,
                                     zrs_dtype dtype)
{
    size_t nd = 0;
    uint64_t dims[ZRS_MAX_NDIM];
    uint64_t off = 0;
    int rc = zrs_ragged_decode(rec, size, dtype, &nd, dims, &off);
    if (rc < 0)
        return rc;
    lua_createtable(L, 0, 2);
    zr_lua_push_u64_table(L, dims, nd);
    lua_setfield(L, -2, "shape");
    lua_pushlstring(L, (const char *)rec + off, (size_t)(size - off));
    lua_setfield(L, -2, "data");
    return 0;
}
%}

/* Export macros etc. come from zr_core.i; nothing Lua-specific there. */

/* ======================================================= integer typemaps */

%define ZR_LUA_INT_IN(TYPE, SIGNED)
%typemap(in) TYPE {
%#if SIGNED
    lua_Integer v_ = 0;
    if (zr_lua_get_int(L, $input, "$symname: argument $argnum ($1_name)", &v_) < 0) SWIG_fail;
    $1 = (TYPE)v_;
%#else
    uint64_t v_ = 0;
    if (zr_lua_get_u64(L, $input, "$symname: argument $argnum ($1_name)", &v_) < 0) SWIG_fail;
    $1 = (TYPE)v_;
%#endif
}
%typemap(out) TYPE %{ lua_pushinteger(L, (lua_Integer)$1); SWIG_arg++; %}
%typemap(typecheck, precedence=SWIG_TYPECHECK_INTEGER) TYPE %{ $1 = lua_isinteger(L, $input); %}
%enddef
ZR_LUA_INT_IN(int64_t, 1)
ZR_LUA_INT_IN(uint64_t, 0)
ZR_LUA_INT_IN(size_t, 0)
ZR_LUA_INT_IN(uint32_t, 0)
ZR_LUA_INT_IN(unsigned, 0)
ZR_LUA_INT_IN(unsigned int, 0)
ZR_LUA_INT_IN(zre_codec, 0)
ZR_LUA_INT_IN(zrs_dtype, 0)
ZR_LUA_INT_IN(zrs_kind, 0)
ZR_LUA_INT_IN(zsm_mode, 0)
ZR_LUA_INT_IN(zsm_pack_policy, 0)
ZR_LUA_INT_IN(zsm_pack_overlong, 0)
ZR_LUA_INT_IN(zr_status, 1)
ZR_LUA_INT_IN(zrs_dict_tier, 0)

/* ======================================================== status codes */

%typemap(out) int %{
    if ($1 < 0) {
        zr_lua_push_status(L, $1);
        SWIG_fail;
    }
%}
/* Predicates returning 0/1, not a status. */
%typemap(out) int zrs_is_readonly, int zre_is_readonly, int zld_is_closed, int zrs_is_closed,
    int zrs_concat_is_closed %{ lua_pushboolean(L, $1 > 0); SWIG_arg++; %}
/* Counts. */
%typemap(out) int zrs_borrowers, int zrs_concat_borrowers %{
    lua_pushinteger(L, (lua_Integer)$1); SWIG_arg++;
%}
/* zld_failed: failed (boolean), then the failing step (integer or nil). */
%typemap(in, numinputs=0) uint64_t *step (uint64_t tmp = 0) %{ $1 = &tmp; %}
%typemap(out) int zld_failed %{ lua_pushboolean(L, $1 > 0); SWIG_arg++; %}
%typemap(argout) uint64_t *step %{
    if (result > 0) lua_pushinteger(L, (lua_Integer)tmp$argnum); else lua_pushnil(L);
    SWIG_arg++;
%}

/* ========================================================= out handles */

%define ZR_OUT_HANDLE(TYPE)
%typemap(in, numinputs=0) TYPE **out (TYPE *tmp = NULL) %{ $1 = &tmp; %}
%typemap(argout) TYPE **out %{
    SWIG_NewPointerObj(L, tmp$argnum, $descriptor(TYPE *), 0); SWIG_arg++;
%}
%enddef
ZR_OUT_HANDLE(zre_engine)
ZR_OUT_HANDLE(zrs_store)
ZR_OUT_HANDLE(zld_loader)
ZR_OUT_HANDLE(zld_batch)
/* many stores as one dataset (zr_bind_shards.i) */
ZR_OUT_HANDLE(zrs_concat)
ZR_OUT_HANDLE(zld_mixture)
/* molecular record collections (zr_bind_mrec.i) */
ZR_OUT_HANDLE(zmr_reader)
ZR_OUT_HANDLE(zmr_writer)
ZR_OUT_HANDLE(zmr_frame)
ZR_OUT_HANDLE(zr_bind_mrec_source)

%define ZR_OUT_INT(TYPE, NAME)
%typemap(in, numinputs=0) TYPE *NAME (TYPE tmp = (TYPE)0) %{ $1 = &tmp; %}
%typemap(argout) TYPE *NAME %{ lua_pushinteger(L, (lua_Integer)tmp$argnum); SWIG_arg++; %}
%enddef
ZR_OUT_INT(zre_codec, out)
ZR_OUT_INT(zrs_dtype, out)
ZR_OUT_INT(zsm_mode, out)
ZR_OUT_INT(uint64_t, first_index)
ZR_OUT_INT(uint64_t, dict_bytes)
ZR_OUT_INT(uint64_t, sample_bytes)
ZR_OUT_INT(uint64_t, mix_source)
ZR_OUT_INT(uint64_t, mix_index)
ZR_OUT_INT(uint64_t, n_frames)
ZR_OUT_INT(uint64_t, n_atoms)
ZR_OUT_INT(uint64_t, meta_size)
ZR_OUT_INT(uint64_t, first_frame)
ZR_OUT_INT(uint64_t, has_trajectory)
%typemap(out) int zmr_molrec_version %{ lua_pushinteger(L, (lua_Integer)$1); SWIG_arg++; %}

/* zre_get_stats: a table with the struct's fields. */
%typemap(in, numinputs=0) zre_stats *out (zre_stats tmp) %{ memset(&tmp, 0, sizeof tmp); $1 = &tmp; %}
%typemap(argout) zre_stats *out %{
    lua_createtable(L, 0, 5);
    lua_pushinteger(L, (lua_Integer)tmp$argnum.records); lua_setfield(L, -2, "records");
    lua_pushinteger(L, (lua_Integer)tmp$argnum.logical_bytes); lua_setfield(L, -2, "logical_bytes");
    lua_pushinteger(L, (lua_Integer)tmp$argnum.live_bytes); lua_setfield(L, -2, "live_bytes");
    lua_pushinteger(L, (lua_Integer)tmp$argnum.chunk_bytes); lua_setfield(L, -2, "chunk_bytes");
    lua_pushinteger(L, (lua_Integer)tmp$argnum.reclaimable); lua_setfield(L, -2, "reclaimable");
    SWIG_arg++;
%}

/* zrs_ragged_decode: shape table, payload offset. */
%typemap(in, numinputs=0) (size_t *ndim, uint64_t *dims, uint64_t *payload_offset)
    (size_t nd = 0, uint64_t dv[ZRS_MAX_NDIM], uint64_t off = 0) %{
    $1 = &nd; $2 = dv; $3 = &off;
%}
%typemap(argout) (size_t *ndim, uint64_t *dims, uint64_t *payload_offset) %{
    zr_lua_push_u64_table(L, dv$argnum, nd$argnum); SWIG_arg++;
    lua_pushinteger(L, (lua_Integer)off$argnum); SWIG_arg++;
%}

/* ------------------------------------------- passes, bucketing, packing */
/* zld_pack_item_shape: the item shape as a table. */
%typemap(in, numinputs=0) (uint64_t *dims, size_t *ndim) (uint64_t dims_[ZRS_MAX_NDIM], size_t nd_ = 0) %{
    $1 = dims_; $2 = &nd_;
%}
%typemap(argout) (uint64_t *dims, size_t *ndim) %{ zr_lua_push_u64_table(L, dims_$argnum, nd_$argnum); SWIG_arg++; %}
ZR_OUT_INT(zsm_pack_policy, out)
ZR_OUT_INT(zsm_pack_overlong, out)
%typemap(out) int zsm_pack_policy_parse, int zsm_pack_overlong_parse %{
    if ($1 < 0) {
        lua_pushstring(L, "EINVAL: $symname: unknown name (pack_policy: 'first_fit', 'best_fit' or "
                          "'concat'; pack_overlong: 'split', 'truncate' or 'drop')");
        SWIG_fail;
    }
%}
/* ------------------------------------------- end passes, bucketing, packing */

/* ============================================================ buffers */

/* Read-only bytes: a Lua string or a zrecord buffer. */
%define ZR_SRC_BYTES(PTR, LEN)
%typemap(in) (const void *PTR, uint64_t LEN) (size_t len_ = 0) %{
    $1 = (void *)zr_lua_src_bytes(L, $input, "$symname: argument $argnum ($1_name)", &len_);
    if ($1 == NULL) SWIG_fail;
    $2 = (uint64_t)len_;
%}
%enddef
ZR_SRC_BYTES(data, nbytes)
ZR_SRC_BYTES(record, size)

/* Optional bytes (nil: none): zstd dictionaries, mrec validity masks. */
%typemap(in) (const void *dict, uint64_t dict_size) (size_t len_ = 0),
             (const void *mask, uint64_t mask_size) (size_t len_ = 0) %{
    if (lua_isnoneornil(L, $input)) {
        $1 = NULL;
        $2 = 0;
    } else {
        $1 = (void *)zr_lua_src_bytes(L, $input, "$symname: argument $argnum ($1_name)", &len_);
        if ($1 == NULL) SWIG_fail;
        $2 = (uint64_t)len_;
    }
%}

/* Writable destinations: a zrecord buffer only (Lua strings are immutable). */
%typemap(in) (void *dst, uint64_t dst_capacity) %{
    {
        zr_lua_buffer *b_ = zr_lua_testbuffer(L, $input);
        if (b_ == NULL) {
            lua_pushfstring(L, "EINVAL: $symname: argument $argnum ($1_name) must be a zrecord buffer, got %s",
                            luaL_typename(L, $input));
            SWIG_fail;
        }
        $1 = b_->bytes;
        $2 = (uint64_t)b_->size;
    }
%}

/* Index lists: a table of integers. */
%typemap(in) (const int64_t *index, uint64_t count) (int64_t *arr = NULL) %{
    arr = zr_lua_index_array(L, $input, "$symname: $1_name", &$2);
    if (arr == NULL) SWIG_fail;
    $1 = arr;
%}
%typemap(freearg) (const int64_t *index, uint64_t count) %{ free(arr$argnum); %}

/* The engine's absolute indices: a table of non-negative integers. */
%typemap(in) (const uint64_t *index, uint64_t count) (int64_t *arr = NULL) %{
    arr = zr_lua_index_array(L, $input, "$symname: $1_name", &$2);
    if (arr == NULL) SWIG_fail;
    for (uint64_t k_ = 0; k_ < $2; k_++)
        if (arr[k_] < 0) {
            lua_pushfstring(L, "EINVAL: $symname: $1_name entry %I must be >= 0, got %I",
                            (lua_Integer)k_, (lua_Integer)arr[k_]);
            SWIG_fail;
        }
    $1 = (uint64_t *)arr;
%}
%typemap(freearg) (const uint64_t *index, uint64_t count) %{ free(arr$argnum); %}

/* Index list in, a table of `count` results out. */
%define ZR_INDEX_TO_U64(OUTNAME)
%typemap(in) (const int64_t *index, uint64_t count, uint64_t *OUTNAME)
    (int64_t *arr = NULL, uint64_t *res = NULL) %{
    arr = zr_lua_index_array(L, $input, "$symname: $1_name", &$2);
    if (arr == NULL) SWIG_fail;
    res = (uint64_t *)malloc((size_t)($2 > 0 ? $2 : 1) * sizeof *res);
    if (res == NULL) { lua_pushstring(L, "ENOMEM: $symname"); SWIG_fail; }
    $1 = arr;
    $3 = res;
%}
%typemap(argout) (const int64_t *index, uint64_t count, uint64_t *OUTNAME) %{
    zr_lua_push_u64_table(L, res$argnum, $2); SWIG_arg++;
%}
%typemap(freearg) (const int64_t *index, uint64_t count, uint64_t *OUTNAME) %{
    free(arr$argnum);
    free(res$argnum);
%}
%enddef
ZR_INDEX_TO_U64(out)
ZR_INDEX_TO_U64(sizes)

/* Dense item shapes: a table of integers. */
%typemap(in) (const uint64_t *item_shape, size_t ndim) (uint64_t shape[ZRS_MAX_NDIM]) %{
    {
        if (lua_type(L, $input) != LUA_TTABLE) {
            lua_pushfstring(L, "EINVAL: $symname: item_shape must be a table of integers, got %s",
                            luaL_typename(L, $input));
            SWIG_fail;
        }
        lua_Integer n_ = luaL_len(L, $input);
        if (n_ > ZRS_MAX_NDIM) {
            lua_pushfstring(L, "EINVAL: $symname: item_shape has %I dims, at most %d allowed", n_, ZRS_MAX_NDIM);
            SWIG_fail;
        }
        for (lua_Integer k = 1; k <= n_; k++) {
            lua_geti(L, $input, k);
            int bad_ = zr_lua_get_u64(L, -1, "item_shape entry", &shape[k - 1]);
            if (bad_ < 0) { lua_remove(L, -2); SWIG_fail; }
            lua_pop(L, 1);
        }
        $1 = shape;
        $2 = (size_t)n_;
    }
%}

/* Loader streams: a table of store handles. */
%typemap(in) (zrs_store *const *streams, size_t nstreams) (zrs_store **arr = NULL) %{
    {
        if (lua_type(L, $input) != LUA_TTABLE) {
            lua_pushfstring(L, "EINVAL: $symname: streams must be a table of store handles, got %s",
                            luaL_typename(L, $input));
            SWIG_fail;
        }
        lua_Integer n_ = luaL_len(L, $input);
        arr = (zrs_store **)malloc((size_t)(n_ > 0 ? n_ : 1) * sizeof *arr);
        if (arr == NULL) { lua_pushstring(L, "ENOMEM: $symname"); SWIG_fail; }
        for (lua_Integer k = 1; k <= n_; k++) {
            void *p_ = NULL;
            lua_geti(L, $input, k);
            int ok_ = SWIG_IsOK(SWIG_ConvertPtr(L, -1, &p_, $descriptor(zrs_store *), 0)) && p_ != NULL;
            lua_pop(L, 1);
            if (!ok_) {
                lua_pushfstring(L, "EINVAL: $symname: stream %I is not an open store handle", k - 1);
                SWIG_fail;
            }
            arr[k - 1] = (zrs_store *)p_;
        }
        $1 = arr;
        $2 = (size_t)n_;
    }
%}
%typemap(freearg) (zrs_store *const *streams, size_t nstreams) %{ free(arr$argnum); %}

/* Plain-data configurations come in as tables. */
%typemap(in) const zsm_config *cfg (zsm_config tmp) %{
    if (zr_lua_sampler_config(L, $input, &tmp) < 0) SWIG_fail;
    $1 = &tmp;
%}
/* zld_get_state: the options as a table (mode as its name). */
%typemap(in, numinputs=0) zld_options *out (zld_options tmp) %{ memset(&tmp, 0, sizeof tmp); $1 = &tmp; %}
%typemap(argout) zld_options *out %{
    lua_createtable(L, 0, 9);
    lua_pushinteger(L, (lua_Integer)tmp$argnum.batch_size); lua_setfield(L, -2, "batch_size");
    lua_pushstring(L, zsm_mode_name(tmp$argnum.mode)); lua_setfield(L, -2, "mode");
    lua_pushinteger(L, (lua_Integer)tmp$argnum.seed); lua_setfield(L, -2, "seed");
    lua_pushinteger(L, (lua_Integer)tmp$argnum.start_step); lua_setfield(L, -2, "start_step");
    lua_pushinteger(L, (lua_Integer)tmp$argnum.rank); lua_setfield(L, -2, "rank");
    lua_pushinteger(L, (lua_Integer)tmp$argnum.world_size); lua_setfield(L, -2, "world_size");
    lua_pushinteger(L, (lua_Integer)tmp$argnum.num_workers); lua_setfield(L, -2, "num_workers");
    lua_pushinteger(L, (lua_Integer)tmp$argnum.prefetch); lua_setfield(L, -2, "prefetch");
    if (tmp$argnum.nflips > 0) { /* the loader's own copy: read it now */
        lua_createtable(L, (int)tmp$argnum.nflips, 0);
        for (size_t k_ = 0; k_ < tmp$argnum.nflips; k_++) {
            const zld_flip *f_ = &tmp$argnum.flips[k_];
            lua_createtable(L, 0, 4);
            lua_pushinteger(L, (lua_Integer)f_->stream); lua_setfield(L, -2, "stream");
            lua_pushinteger(L, (lua_Integer)f_->width); lua_setfield(L, -2, "width");
            lua_pushinteger(L, (lua_Integer)f_->elem_size); lua_setfield(L, -2, "elem_size");
            lua_pushnumber(L, f_->p); lua_setfield(L, -2, "p");
            lua_seti(L, -2, (lua_Integer)k_ + 1);
        }
        lua_setfield(L, -2, "flip");
    }
    zr_lua_push_state_extra(L, &tmp$argnum);
    SWIG_arg++;
%}
%typemap(in) const zld_options *options (zr_bind_options tmp) %{
    if (zr_lua_loader_options(L, $input, &tmp) < 0) SWIG_fail;
    $1 = &tmp.o;
%}

/* ====================================================== Lua-specific surface */

/* Structs that Lua passes / receives as tables. */
%ignore zsm_config;
%ignore zld_options;
%ignore zre_stats;

/* Raw pointers without a length: reached through the %native functions
 * below, or through the store layer. */
%ignore zre_append;
%ignore zre_gather;
%ignore zre_record_sizes;
%ignore zrs_item_shape;
%ignore zrs_append_ragged;
%ignore zrs_gather_ragged;
%ignore zsm_indices;
%ignore zld_batch_data;
%ignore zld_batch_indices;
%ignore zld_batch_bounds;
%ignore zld_batch_detach;
%ignore zld_free;
%ignore zrs_train_dict;

/* Every path argument: a Lua string may hold a NUL that C would cut at
 * ("a\0/x" would open "a"); the one C check (zr_check_path) refuses it. */
%typemap(in, checkfn="lua_isstring") const char *path {
    size_t zr_path_len = 0;
    $1 = ($1_ltype)lua_tolstring(L, $input, &zr_path_len);
    if (zr_check_path($1, zr_path_len, "$symname") < 0)
        return zr_lua_fail(L, ZR_EINVAL);
}

%include "zr_core.i"
%include "zr_bind_shards.i"
%include "zr_bind_mrec.i"

%native(buffer) int zr_lua_buffer_new(lua_State *L);
%native(item_shape) int zr_lua_item_shape(lua_State *L);
%native(gather_dense) int zr_lua_gather_dense(lua_State *L);
%native(append_ragged) int zr_lua_append_ragged(lua_State *L);
%native(gather_ragged) int zr_lua_gather_ragged(lua_State *L);
%native(sampler_indices) int zr_lua_sampler_indices(lua_State *L);
%native(loader_next) int zr_lua_loader_next(lua_State *L);
%native(train_dict) int zr_lua_train_dict(lua_State *L);
%native(flip_params) int zr_lua_flip_params(lua_State *L);
%native(flip_by_name) int zr_lua_flip_by_name(lua_State *L);
%native(flip_mask) int zr_lua_flip_mask(lua_State *L);
%native(pad) int zr_lua_pad(lua_State *L);

%wrapper %{
static void *zr_lua_check_handle(lua_State *L, int idx, swig_type_info *ty, const char *what)
{
    void *p = NULL;
    if (!SWIG_IsOK(SWIG_ConvertPtr(L, idx, &p, ty, 0)) || p == NULL) {
        lua_pushfstring(L, "EINVAL: %s must be an open handle, got %s", what, luaL_typename(L, idx));
        lua_error(L);
    }
    return p;
}

/* ---- buffer userdata methods */

static zr_lua_buffer *zr_lua_checkbuffer(lua_State *L, int idx)
{
    zr_lua_buffer *b = zr_lua_testbuffer(L, idx);
    if (b == NULL) {
        lua_pushfstring(L, "EINVAL: expected a zrecord buffer, got %s", luaL_typename(L, idx));
        lua_error(L);
    }
    return b;
}

static int zr_lua_buffer_len(lua_State *L)
{
    lua_pushinteger(L, (lua_Integer)zr_lua_checkbuffer(L, 1)->size);
    return 1;
}

/* buf:tostring([i [, j]]): bytes i..j (1-based, inclusive, like string.sub). */
static int zr_lua_buffer_tostring(lua_State *L)
{
    zr_lua_buffer *b = zr_lua_checkbuffer(L, 1);
    lua_Integer n = (lua_Integer)b->size;
    lua_Integer i = luaL_optinteger(L, 2, 1);
    lua_Integer j = luaL_optinteger(L, 3, n);
    if (i < 0) i = n + i + 1;
    if (j < 0) j = n + j + 1;
    if (i < 1) i = 1;
    if (j > n) j = n;
    if (i > j)
        lua_pushliteral(L, "");
    else
        lua_pushlstring(L, (const char *)b->bytes + (i - 1), (size_t)(j - i + 1));
    return 1;
}

/* buf:byte(i): the byte at 1-based position i. */
static int zr_lua_buffer_byte(lua_State *L)
{
    zr_lua_buffer *b = zr_lua_checkbuffer(L, 1);
    lua_Integer i = luaL_checkinteger(L, 2);
    if (i < 1 || (lua_Integer)b->size < i)
        return zr_lua_raise(L, "ERANGE: buffer index %I out of range 1..%I", i, (lua_Integer)b->size);
    lua_pushinteger(L, b->bytes[i - 1]);
    return 1;
}

/* buf:fill(s [, pos]): copy string s into the buffer at 1-based pos. */
static int zr_lua_buffer_fill(lua_State *L)
{
    zr_lua_buffer *b = zr_lua_checkbuffer(L, 1);
    size_t len = 0;
    const char *s = luaL_checklstring(L, 2, &len);
    lua_Integer pos = luaL_optinteger(L, 3, 1);
    if (pos < 1 || (uint64_t)(pos - 1) + len > b->size)
        return zr_lua_raise(L, "ERANGE: buffer:fill of %I bytes at %I overruns %I bytes",
                          (lua_Integer)len, pos, (lua_Integer)b->size);
    memcpy(b->bytes + (pos - 1), s, len);
    return 0;
}

static int zr_lua_buffer_repr(lua_State *L)
{
    lua_pushfstring(L, "zrecord.buffer(%I bytes)", (lua_Integer)zr_lua_checkbuffer(L, 1)->size);
    return 1;
}

/* zrecord.buffer(n): a zero-filled writable buffer of n bytes. */
int zr_lua_buffer_new(lua_State *L)
{
    uint64_t n = 0;
    if (zr_lua_get_u64(L, 1, "buffer: size", &n) < 0)
        return lua_error(L);
    if (n > (uint64_t)(SIZE_MAX / 2) - sizeof(zr_lua_buffer))
        return zr_lua_raise(L, "EINVAL: buffer: size %I too large", (lua_Integer)n);
    zr_lua_buffer *b = (zr_lua_buffer *)lua_newuserdatauv(L, sizeof(zr_lua_buffer) + (size_t)n, 0);
    b->size = (size_t)n;
    memset(b->bytes, 0, (size_t)n);
    if (luaL_newmetatable(L, ZR_LUA_BUFFER)) {
        static const luaL_Reg methods[] = {
            { "tostring", zr_lua_buffer_tostring },
            { "byte", zr_lua_buffer_byte },
            { "fill", zr_lua_buffer_fill },
            { "size", zr_lua_buffer_len },
            { NULL, NULL },
        };
        luaL_newlib(L, methods);
        lua_setfield(L, -2, "__index");
        lua_pushcfunction(L, zr_lua_buffer_len);
        lua_setfield(L, -2, "__len");
        lua_pushcfunction(L, zr_lua_buffer_repr);
        lua_setfield(L, -2, "__tostring");
    }
    lua_setmetatable(L, -2);
    return 1;
}

/* flip_params(store, position, p): the width and elem_size of a flip of
 * probability p on the store at that 0-based position of the loader's
 * streams (zld_flip_resolve's rules). */
int zr_lua_flip_params(lua_State *L)
{
    zrs_store *s = (zrs_store *)zr_lua_check_handle(L, 1, SWIGTYPE_p_zrs_store, "flip_params: store");
    uint64_t pos = 0;
    if (zr_lua_get_u64(L, 2, "flip_params: position", &pos) < 0)
        return lua_error(L);
    if (lua_type(L, 3) != LUA_TNUMBER)
        return zr_lua_raise(L, "EINVAL: flip: the probability of stream %I must be a number, got %s",
                            (lua_Integer)pos, luaL_typename(L, 3));
    zld_items it;
    zld_flip f = { 0, 0, 0, 0.0 };
    int rc = zld_items_from_store(s, &it);
    if (rc == 0)
        rc = zld_flip_resolve(&it, (size_t)pos, NULL, lua_tonumber(L, 3), &f);
    if (rc < 0)
        return zr_lua_fail(L, rc);
    lua_pushinteger(L, (lua_Integer)f.width);
    lua_pushinteger(L, (lua_Integer)f.elem_size);
    return 2;
}

/* flip_by_name(stores, names, name, p): the flip of probability p on the
 * stream called name (zld_flip_by_name): its 0-based position, width and
 * elem_size. stores and names are the loader's lists, in order. */
int zr_lua_flip_by_name(lua_State *L)
{
    luaL_checktype(L, 1, LUA_TTABLE);
    luaL_checktype(L, 2, LUA_TTABLE);
    const char *name = luaL_checkstring(L, 3);
    if (lua_type(L, 4) != LUA_TNUMBER)
        return zr_lua_raise(L, "EINVAL: flip: the probability of stream '%s' must be a number, got %s",
                            name, luaL_typename(L, 4));
    lua_Integer n = luaL_len(L, 1);
    if (n < 0 || n > ZR_BIND_MAX_NAMES || luaL_len(L, 2) != n)
        return zr_lua_raise(L, "EINVAL: flip_by_name: %I stores for %I names (at most %d)", n,
                            luaL_len(L, 2), ZR_BIND_MAX_NAMES);
    zld_items *items = (zld_items *)lua_newuserdatauv(L, (size_t)(n > 0 ? n : 1) * sizeof *items, 0);
    const char **names = (const char **)lua_newuserdatauv(L, (size_t)(n > 0 ? n : 1) * sizeof *names, 0);
    for (lua_Integer k = 1; k <= n; k++) {
        lua_geti(L, 1, k);
        zrs_store *s = (zrs_store *)zr_lua_check_handle(L, -1, SWIGTYPE_p_zrs_store, "flip_by_name: store");
        int rc = zld_items_from_store(s, &items[k - 1]);
        lua_pop(L, 1);
        if (rc < 0)
            return zr_lua_fail(L, rc);
        lua_geti(L, 2, k);
        names[k - 1] = lua_tostring(L, -1); /* the names table keeps the string alive */
        lua_pop(L, 1);
        if (names[k - 1] == NULL)
            return zr_lua_raise(L, "EINVAL: flip_by_name: name %I is not a string", k - 1);
    }
    zld_flip f = { 0, 0, 0, 0.0 };
    int rc = zld_flip_by_name(names, items, (size_t)n, name, lua_tonumber(L, 4), &f);
    if (rc < 0)
        return zr_lua_fail(L, rc);
    lua_pushinteger(L, (lua_Integer)f.stream);
    lua_pushinteger(L, (lua_Integer)f.width);
    lua_pushinteger(L, (lua_Integer)f.elem_size);
    return 3;
}

/* flip_mask(loader, step, p, count): which of the first `count` records of
 * step's batch a flip of probability p flips, as a table of booleans. */
int zr_lua_flip_mask(lua_State *L)
{
    zld_loader *l = (zld_loader *)zr_lua_check_handle(L, 1, SWIGTYPE_p_zld_loader, "flip_mask: loader");
    uint64_t step = 0, count = 0;
    if (zr_lua_get_u64(L, 2, "flip_mask: step", &step) < 0 ||
        zr_lua_get_u64(L, 4, "flip_mask: count", &count) < 0)
        return lua_error(L);
    double p = luaL_checknumber(L, 3);
    uint8_t *mask = (uint8_t *)malloc(count > 0 ? (size_t)count : 1);
    if (mask == NULL)
        return zr_lua_raise(L, "ENOMEM: flip_mask: out of memory for %I records", (lua_Integer)count);
    int rc = zld_flip_mask(l, step, p, mask, count);
    if (rc < 0) {
        free(mask);
        return zr_lua_fail(L, rc);
    }
    lua_createtable(L, (int)count, 0);
    for (uint64_t i = 0; i < count; i++) {
        lua_pushboolean(L, mask[i] != 0);
        lua_seti(L, -2, (lua_Integer)i + 1);
    }
    free(mask);
    return 1;
}

/* item_shape(store): a dense store's item shape as a table ({} for a
 * scalar store); nil for a ragged store. */
int zr_lua_item_shape(lua_State *L)
{
    zrs_store *s = (zrs_store *)zr_lua_check_handle(L, 1, SWIGTYPE_p_zrs_store, "item_shape: store");
    if (zrs_get_kind(s) != ZRS_DENSE) {
        lua_pushnil(L);
        return 1;
    }
    zr_lua_push_u64_table(L, zrs_item_shape(s), zrs_item_ndim(s));
    return 1;
}

/* gather_dense(store, index_table): the records as one string of
 * #index * record_size bytes (record i at byte i * record_size). */
int zr_lua_gather_dense(lua_State *L)
{
    zrs_store *s = (zrs_store *)zr_lua_check_handle(L, 1, SWIGTYPE_p_zrs_store, "gather_dense: store");
    uint64_t count = 0;
    int64_t *idx = zr_lua_index_array(L, 2, "gather_dense: index", &count);
    if (idx == NULL)
        return lua_error(L);
    uint64_t rs = zrs_record_size(s);
    if (rs == 0) {
        free(idx);
        return zr_lua_raise(L, "EINVAL: gather_dense: %s is not a dense store", zrs_path(s));
    }
    if (count > 0 && rs > (uint64_t)(SIZE_MAX / 2) / count) {
        free(idx);
        return zr_lua_raise(L, "EINVAL: gather_dense: %I records of %I bytes overflow memory",
                          (lua_Integer)count, (lua_Integer)rs);
    }
    size_t nbytes = (size_t)(count * rs);
    luaL_Buffer lb;
    /* luaL_Buffer may hold a userdata box on the stack: keep idx in C. */
    char *dst = luaL_buffinitsize(L, &lb, nbytes > 0 ? nbytes : 1);
    int rc = zrs_gather_dense(s, idx, count, dst, nbytes);
    free(idx);
    if (rc < 0)
        return zr_lua_fail(L, rc);
    luaL_pushresultsize(&lb, nbytes);
    return 1;
}

/* Pack {shape=..., data=...} records of table `idx` into one malloc'd
 * buffer with bounds, as zrs_append_ragged wants. Pushes a message and
 * returns -1 on bad input. */
static int zr_lua_pack_ragged(lua_State *L, int idx, zrs_dtype dtype, unsigned char **out,
                              uint64_t **bounds_out, uint64_t *count_out)
{
    lua_Integer n = luaL_len(L, idx);
    uint64_t *bounds = (uint64_t *)malloc((size_t)(n + 1) * sizeof *bounds);
    unsigned char *buf = NULL;
    uint64_t total = 0;
    if (bounds == NULL) {
        lua_pushstring(L, "ENOMEM: append_ragged");
        return -1;
    }
    /* First pass: the shapes and the Lua types; sizes by zrs_ragged_encoded_size. */
    bounds[0] = 0;
    for (lua_Integer k = 1; k <= n; k++) {
        lua_geti(L, idx, k);
        if (lua_type(L, -1) != LUA_TTABLE) {
            lua_pushfstring(L, "EINVAL: append_ragged: record %I must be a table {shape=..., data=...}, got %s",
                            k - 1, luaL_typename(L, -1));
            goto bad;
        }
        lua_getfield(L, -1, "shape");
        lua_getfield(L, -2, "data");
        if (lua_type(L, -1) != LUA_TSTRING || lua_type(L, -2) != LUA_TTABLE) {
            lua_pushfstring(L, "EINVAL: append_ragged: record %I needs shape (a table) and data (a string), got %s and %s",
                            k - 1, luaL_typename(L, -2), luaL_typename(L, -1));
            goto bad;
        }
        lua_Integer nd = luaL_len(L, -2);
        if (nd > ZRS_MAX_NDIM) {
            lua_pushfstring(L, "EINVAL: append_ragged: record %I has %I dims, at most %d allowed",
                            k - 1, nd, ZRS_MAX_NDIM);
            goto bad;
        }
        uint64_t dims[ZRS_MAX_NDIM];
        for (lua_Integer d = 1; d <= nd; d++) {
            lua_geti(L, -2, d);
            if (zr_lua_get_u64(L, -1, "append_ragged: shape entry", &dims[d - 1]) < 0) {
                /* say which record (0-based) the bad shape entry is in */
                lua_pushfstring(L, "%s (record %I)", lua_tostring(L, -1), k - 1);
                lua_remove(L, -2);
                goto bad;
            }
            lua_pop(L, 1);
        }
        uint64_t size = 0;
        if (zrs_ragged_encoded_size(dtype, (size_t)nd, dims, &size) < 0 ||
            size > UINT64_MAX - total) {
            lua_pushfstring(L, "EINVAL: append_ragged: record %I: %s", k - 1, zr_last_error());
            goto bad;
        }
        lua_pop(L, 3);
        total += size;
        bounds[k] = total;
    }
    buf = (unsigned char *)malloc(total > 0 ? (size_t)total : 1);
    if (buf == NULL) {
        lua_pushstring(L, "ENOMEM: append_ragged");
        free(bounds);
        return -1;
    }
    /* Second pass: each record through the C encoder, which checks the
     * data's length against the shape. */
    for (lua_Integer k = 1; k <= n; k++) {
        lua_geti(L, idx, k);
        lua_getfield(L, -1, "shape");
        lua_getfield(L, -2, "data");
        lua_Integer nd = luaL_len(L, -2);
        uint64_t dims[ZRS_MAX_NDIM];
        for (lua_Integer d = 1; d <= nd; d++) {
            lua_geti(L, -2, d);
            dims[d - 1] = (uint64_t)lua_tointeger(L, -1);
            lua_pop(L, 1);
        }
        size_t dlen = 0;
        const char *data = lua_tolstring(L, -1, &dlen);
        if (zrs_ragged_encode(dtype, (size_t)nd, dims, data, dlen, buf + bounds[k - 1],
                              bounds[k] - bounds[k - 1], NULL) < 0) {
            /* "ragged_encode: record of shape ..." -> "append_ragged: record k of shape ..." */
            const char *why = zr_last_error();
            const char *lead = "ragged_encode: record ";
            if (strncmp(why, lead, strlen(lead)) == 0)
                lua_pushfstring(L, "EINVAL: append_ragged: record %I %s", k - 1, why + strlen(lead));
            else
                lua_pushfstring(L, "EINVAL: append_ragged: record %I: %s", k - 1, why);
            free(buf);
            goto bad;
        }
        lua_pop(L, 3);
    }
    *out = buf;
    *bounds_out = bounds;
    *count_out = (uint64_t)n;
    return 0;
bad:
    /* the message is on top; drop what lies between it and the records */
    free(bounds);
    lua_replace(L, idx + 1);
    lua_settop(L, idx + 1);
    return -1;
}

/* append_ragged(store, records): records is a table of {shape=..., data=...}
 * (data the raw little-endian payload). Returns the first new index. */
int zr_lua_append_ragged(lua_State *L)
{
    zrs_store *s = (zrs_store *)zr_lua_check_handle(L, 1, SWIGTYPE_p_zrs_store, "append_ragged: store");
    if (lua_type(L, 2) != LUA_TTABLE)
        return zr_lua_raise(L, "EINVAL: append_ragged: records must be a table, got %s", luaL_typename(L, 2));
    lua_settop(L, 2);
    unsigned char *buf = NULL;
    uint64_t *bounds = NULL, count = 0, first = 0;
    if (zr_lua_pack_ragged(L, 2, zrs_get_dtype(s), &buf, &bounds, &count) < 0)
        return lua_error(L);
    if (count == 0) {
        free(buf);
        free(bounds);
        lua_pushinteger(L, (lua_Integer)zrs_length(s));
        return 1;
    }
    int rc = zrs_append_ragged(s, buf, bounds, count, &first);
    free(buf);
    free(bounds);
    if (rc < 0)
        return zr_lua_fail(L, rc);
    lua_pushinteger(L, (lua_Integer)first);
    return 1;
}

/* gather_ragged(store or concatenation, index_table): a table of
 * {shape=..., data=...}. */
int zr_lua_gather_ragged(lua_State *L)
{
    zrs_concat *c = NULL;
    zrs_store *s = NULL;
    if (!SWIG_IsOK(SWIG_ConvertPtr(L, 1, (void **)&c, SWIGTYPE_p_zrs_concat, 0)) || c == NULL)
        s = (zrs_store *)zr_lua_check_handle(L, 1, SWIGTYPE_p_zrs_store, "gather_ragged: store");
    uint64_t count = 0;
    int64_t *idx = zr_lua_index_array(L, 2, "gather_ragged: index", &count);
    if (idx == NULL)
        return lua_error(L);
    uint64_t *bounds = (uint64_t *)malloc((size_t)(count + 1) * sizeof *bounds);
    unsigned char *buf = NULL;
    int rc = bounds == NULL ? ZR_ENOMEM
             : c ? zrs_concat_ragged_sizes(c, idx, count, bounds + 1)
                 : zrs_ragged_sizes(s, idx, count, bounds + 1);
    if (rc == 0) {
        bounds[0] = 0;
        for (uint64_t k = 1; k <= count; k++)
            bounds[k] += bounds[k - 1];
        buf = (unsigned char *)malloc(bounds[count] > 0 ? (size_t)bounds[count] : 1);
        rc = buf ? (c ? zrs_concat_gather_ragged(c, idx, count, buf, bounds[count], bounds)
                      : zrs_gather_ragged(s, idx, count, buf, bounds[count], bounds))
                 : zr_set_error(ZR_ENOMEM, "gather_ragged: cannot allocate %llu bytes",
                                (unsigned long long)bounds[count]);
    } else if (bounds == NULL) {
        rc = zr_set_error(ZR_ENOMEM, "gather_ragged: cannot allocate bounds");
    }
    free(idx);
    if (rc < 0) {
        free(bounds);
        free(buf);
        return zr_lua_fail(L, rc);
    }
    zrs_dtype dt = c ? zrs_concat_dtype(c) : zrs_get_dtype(s);
    lua_createtable(L, count < INT32_MAX ? (int)count : 0, 0);
    for (uint64_t k = 0; k < count; k++) {
        rc = zr_lua_push_ragged_record(L, buf + bounds[k], bounds[k + 1] - bounds[k], dt);
        if (rc < 0)
            break;
        lua_seti(L, -2, (lua_Integer)k + 1);
    }
    free(bounds);
    free(buf);
    if (rc < 0)
        return zr_lua_fail(L, rc);
    return 1;
}

/* sampler_indices(config_table, step): the batch's indices as a table. */
int zr_lua_sampler_indices(lua_State *L)
{
    zsm_config cfg;
    uint64_t step = 0;
    if (zr_lua_sampler_config(L, 1, &cfg) < 0 || zr_lua_get_u64(L, 2, "sampler_indices: step", &step) < 0)
        return lua_error(L);
    if (zsm_validate(&cfg) < 0)
        return zr_lua_fail(L, ZR_EINVAL); /* the detail names the parameter and value */
    if (cfg.batch_size > (uint64_t)INT32_MAX)
        return zr_lua_raise(L, "EINVAL: sampler: batch_size %I too large for a Lua table", (lua_Integer)cfg.batch_size);
    uint64_t *out = (uint64_t *)malloc((size_t)cfg.batch_size * sizeof *out);
    if (out == NULL)
        return zr_lua_raise(L, "ENOMEM: sampler: cannot allocate %I indices", (lua_Integer)cfg.batch_size);
    zsm_indices(&cfg, step, out);
    zr_lua_push_u64_table(L, out, cfg.batch_size);
    free(out);
    return 1;
}

/* ------------------------------------------- passes, bucketing, packing */
/* A pack-mode batch into the table on top: indices (each segment's
 * document), [s] = stream s packed (rows * L items as one string), the
 * int32 layout arrays as strings of little-endian int32 under their keys,
 * and pack = {rows, length, segments, max_segments, max_seqlen, tokens}. */
static void zr_lua_push_pack(lua_State *L, zld_batch *b, size_t nstreams, const zld_pack_info *pi)
{
    zr_lua_push_u64_table(L, zld_batch_indices(b), pi->segments);
    lua_setfield(L, -2, "indices");
    for (size_t k = 0; k < nstreams + ZLD_PACK_PARTS; k++) {
        uint64_t nbytes = 0;
        const char *data = (const char *)zld_batch_data(b, k, &nbytes);
        lua_pushlstring(L, data != NULL ? data : "", data != NULL ? (size_t)nbytes : 0);
        if (k < nstreams)
            lua_seti(L, -2, (lua_Integer)k + 1);
        else
            lua_setfield(L, -2, zr_bind_pack_keys[k - nstreams]);
    }
    lua_createtable(L, 0, 6);
    lua_pushinteger(L, (lua_Integer)pi->rows); lua_setfield(L, -2, "rows");
    lua_pushinteger(L, (lua_Integer)pi->length); lua_setfield(L, -2, "length");
    lua_pushinteger(L, (lua_Integer)pi->segments); lua_setfield(L, -2, "segments");
    lua_pushinteger(L, (lua_Integer)pi->max_segments); lua_setfield(L, -2, "max_segments");
    lua_pushinteger(L, (lua_Integer)pi->max_seqlen); lua_setfield(L, -2, "max_seqlen");
    lua_pushinteger(L, (lua_Integer)pi->tokens); lua_setfield(L, -2, "tokens");
    lua_setfield(L, -2, "pack");
}

/* pad(datas, elem_size, length, pad_value): datas a table of strings (each
 * a record's payload, a whole number of elem_size-byte elements); length
 * an integer, or -1 for the longest. Returns the padded block (one string
 * of #datas * length elements) and the records' lengths (a table). */
int zr_lua_pad(lua_State *L)
{
    luaL_checktype(L, 1, LUA_TTABLE);
    uint64_t elem = 0;
    if (zr_lua_get_u64(L, 2, "pad: elem_size", &elem) < 0)
        return lua_error(L);
    lua_Integer want = luaL_checkinteger(L, 3);
    size_t padn = 0;
    const char *padv = luaL_checklstring(L, 4, &padn);
    if (elem == 0 || padn != elem)
        return zr_lua_raise(L, "EINVAL: pad: the pad value has %I bytes, an element %I",
                            (lua_Integer)padn, (lua_Integer)elem);
    lua_Integer n = luaL_len(L, 1);
    uint64_t *bounds = (uint64_t *)malloc((size_t)(n + 1) * sizeof *bounds);
    uint64_t *lens = (uint64_t *)malloc((size_t)(n > 0 ? n : 1) * sizeof *lens);
    if (bounds == NULL || lens == NULL) {
        free(bounds); free(lens);
        return zr_lua_raise(L, "ENOMEM: pad: out of memory for %I records", n);
    }
    bounds[0] = 0;
    uint64_t longest = 0;
    for (lua_Integer k = 1; k <= n; k++) {
        size_t len = 0;
        if (lua_geti(L, 1, k) != LUA_TSTRING) {
            free(bounds); free(lens);
            return zr_lua_raise(L, "EINVAL: pad: record %I must be a string, got %s", k - 1,
                                luaL_typename(L, -1));
        }
        lua_tolstring(L, -1, &len);
        lua_pop(L, 1);
        bounds[k] = bounds[k - 1] + len;
        if (len / elem > longest)
            longest = len / elem;
    }
    uint64_t length = want < 0 ? longest : (uint64_t)want;
    char *flat = (char *)malloc(bounds[n] > 0 ? (size_t)bounds[n] : 1);
    uint64_t cap = (uint64_t)n * length * elem;
    char *dst = (char *)malloc(cap > 0 ? (size_t)cap : 1);
    if (flat == NULL || dst == NULL) {
        free(bounds); free(lens); free(flat); free(dst);
        return zr_lua_raise(L, "ENOMEM: pad: out of memory for %I records", n);
    }
    for (lua_Integer k = 1; k <= n; k++) {
        lua_geti(L, 1, k);
        memcpy(flat + bounds[k - 1], lua_tostring(L, -1), (size_t)(bounds[k] - bounds[k - 1]));
        lua_pop(L, 1);
    }
    int rc = zr_bind_pad(flat, bounds, (uint64_t)n, (size_t)elem, length, padv, dst, cap, lens);
    free(flat);
    free(bounds);
    if (rc < 0) {
        free(lens); free(dst);
        return zr_lua_fail(L, rc);
    }
    lua_pushlstring(L, dst, (size_t)cap);
    free(dst);
    zr_lua_push_u64_table(L, lens, (uint64_t)n);
    free(lens);
    return 2;
}
/* ------------------------------------------- end passes, bucketing, packing */

/* loader_next(loader, kinds): the next batch as
 *   { step = k, indices = {...}, [s] = stream s }
 * where stream s is one string (dense: batch_size * record_size bytes) or
 * a table of {shape=..., data=...} records (ragged). `kinds` is a table
 * of the streams' dtypes (zrs_dtype values), one per stream. */
int zr_lua_loader_next(lua_State *L)
{
    zld_loader *l = (zld_loader *)zr_lua_check_handle(L, 1, SWIGTYPE_p_zld_loader, "loader_next: loader");
    luaL_checktype(L, 2, LUA_TTABLE);
    lua_Integer nstreams = luaL_len(L, 2);
    zld_batch *b = NULL;
    int rc = zld_next(l, &b);
    if (rc < 0)
        return zr_lua_fail(L, rc);
    if (rc == ZLD_END) { /* a finite pass is over */
        lua_pushnil(L);
        return 1;
    }
    uint64_t count = zld_batch_count(b);
    lua_createtable(L, (int)nstreams, 2);
    lua_pushinteger(L, (lua_Integer)zld_batch_step(b));
    lua_setfield(L, -2, "step");
    zld_pack_info pi;
    if (zld_batch_pack_info(b, &pi) == ZR_OK) {
        zr_lua_push_pack(L, b, (size_t)nstreams, &pi);
        zld_batch_free(b);
        return 1;
    }
    zr_lua_push_u64_table(L, zld_batch_indices(b), count);
    lua_setfield(L, -2, "indices");
    if (zld_batch_valid(b) != count) { /* an even_batches pass: padding rows follow */
        lua_pushinteger(L, (lua_Integer)zld_batch_valid(b));
        lua_setfield(L, -2, "valid");
    }
    for (lua_Integer k = 1; k <= nstreams && rc == 0; k++) {
        uint64_t nbytes = 0;
        const unsigned char *data = (const unsigned char *)zld_batch_data(b, (size_t)(k - 1), &nbytes);
        const uint64_t *bd = zld_batch_bounds(b, (size_t)(k - 1));
        if (bd == NULL) {
            lua_pushlstring(L, (const char *)data, (size_t)nbytes);
        } else {
            lua_geti(L, 2, k);
            zrs_dtype dt = (zrs_dtype)lua_tointeger(L, -1);
            lua_pop(L, 1);
            lua_createtable(L, (int)count, 0);
            for (uint64_t r = 0; r < count && rc == 0; r++) {
                rc = zr_lua_push_ragged_record(L, data + bd[r], bd[r + 1] - bd[r], dt);
                if (rc == 0)
                    lua_seti(L, -2, (lua_Integer)r + 1);
            }
        }
        lua_seti(L, -2, k);
    }
    zld_batch_free(b);
    if (rc < 0)
        return zr_lua_fail(L, rc);
    return 1;
}
%}

%wrapper %{
/* train_dict(samples, tier): samples a table of strings (records as raw
 * bytes, in index order), tier a zrs_dict_tier; the library's sample rule
 * picks from them (zrs_train_dict_tier); returns the dictionary as a
 * string of at most the tier's dictionary bytes. */
int zr_lua_train_dict(lua_State *L)
{
    uint64_t tier = 0, cap = 0;
    if (lua_type(L, 1) != LUA_TTABLE)
        return zr_lua_raise(L, "EINVAL: train_dict: samples must be a table of strings, got %s",
                            luaL_typename(L, 1));
    if (zr_lua_get_u64(L, 2, "train_dict: tier", &tier) < 0)
        return lua_error(L);
    int rc = zrs_dict_tier_sizes((zrs_dict_tier)tier, &cap, NULL);
    if (rc < 0)
        return zr_lua_fail(L, rc);
    lua_Integer n = luaL_len(L, 1);
    uint64_t total = 0;
    for (lua_Integer k = 1; k <= n; k++) {
        if (lua_geti(L, 1, k) != LUA_TSTRING)
            return zr_lua_raise(L, "EINVAL: train_dict: sample %I must be a string, got %s", k - 1,
                                luaL_typename(L, -1));
        total += (uint64_t)lua_rawlen(L, -1);
        lua_pop(L, 1);
    }
    uint64_t *sizes = (uint64_t *)malloc((size_t)(n > 0 ? n : 1) * sizeof *sizes);
    unsigned char *buf = (unsigned char *)malloc(total > 0 ? (size_t)total : 1);
    unsigned char *dict = (unsigned char *)malloc((size_t)cap);
    if (sizes == NULL || buf == NULL || dict == NULL) {
        free(sizes); free(buf); free(dict);
        return zr_lua_raise(L, "ENOMEM: train_dict: cannot allocate %I sample bytes", (lua_Integer)total);
    }
    uint64_t off = 0;
    for (lua_Integer k = 1; k <= n; k++) {
        size_t len = 0;
        lua_geti(L, 1, k);
        const char *p = lua_tolstring(L, -1, &len);
        memcpy(buf + off, p, len);
        off += len;
        sizes[k - 1] = len;
        lua_pop(L, 1);
    }
    uint64_t dsize = 0;
    rc = zrs_train_dict_tier(buf, sizes, (uint64_t)n, (zrs_dict_tier)tier, dict, cap, &dsize);
    free(sizes);
    free(buf);
    if (rc < 0) {
        free(dict);
        return zr_lua_fail(L, rc);
    }
    lua_pushlstring(L, (const char *)dict, (size_t)dsize);
    free(dict);
    return 1;
}
%}

%init %{
    /* SWIG registers two helpers as globals; a Lua 5.4 module should not
     * touch the global table. */
    lua_pushnil(L);
    lua_setglobal(L, "swig_type");
    lua_pushnil(L);
    lua_setglobal(L, "swig_equals");
    /* Run the idiomatic layer over the raw table (on top of the stack) and
     * make its result what `require` returns. */
    if (luaL_loadbuffer(L, zr_lua_layer_source, sizeof zr_lua_layer_source - 1, "=zrecord.lua") != LUA_OK)
        lua_error(L);
    lua_pushvalue(L, -2);
    lua_call(L, 1, 1);
    lua_replace(L, -2);
%}

%header %{
#include "zrecord_lua.h"
%}
