/*
 * rules.c - the layout's rules that span more than one value, each written
 * once: the writer holds what it is given to them (status ZMR_EINVAL) and
 * zmr_validate holds what it reads (ZMR_ECORRUPT); the cell and grid rules
 * also hold every frame built or decoded. The status to return is the
 * caller's `bad`; the details name the rule, the caller names the key.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "zmr_internal.h"

/* ------------------------------------------------------------ the cell */

zmr_status zmr_rule_box(zmr_box *b, zmr_status bad)
{
    for (int k = 0; k < 3; k++)
        b->boundary[k] = b->boundary[k] != 0;
    b->cell_defined = b->cell_defined != 0;
    if (b->cell_defined)
        return ZMR_OK;
    if (b->boundary[0] || b->boundary[1] || b->boundary[2])
        return zmr_err(bad, "an undefined cell (cell_defined false) is periodic on no axis, but boundary says "
                            "[%s, %s, %s]", b->boundary[0] ? "true" : "false", b->boundary[1] ? "true" : "false",
                       b->boundary[2] ? "true" : "false");
    /* its vectors mean nothing: the identity is written, and handed back
     * whatever was stored (zeros included) */
    for (int k = 0; k < 9; k++)
        b->vectors[k] = k % 4 == 0 ? 1.0 : 0.0;
    return ZMR_OK;
}

/* ------------------------------------------------------------ grids */

zmr_status zmr_rule_structural_shape(const char *block, uint64_t count, json_object *ss, zmr_status bad)
{
    if (ss == NULL)
        return ZMR_OK;
    if (!json_object_is_type(ss, json_type_array) || json_object_array_length(ss) < 1 ||
        json_object_array_length(ss) > ZMR_MAX_NDIM)
        return zmr_err(bad, "block %s: structural_shape must be null or an array of 1..%d non-negative integers",
                       block, ZMR_MAX_NDIM);
    uint64_t prod = 1;
    for (size_t k = 0; k < json_object_array_length(ss); k++) {
        uint64_t d;
        if (zmr_json_u64(json_object_array_get_idx(ss, k), &d) < 0)
            return zmr_err(bad, "block %s: structural_shape[%zu] is not a non-negative integer", block, k);
        prod = d && prod > UINT64_MAX / d ? UINT64_MAX : prod * d;
    }
    if (prod != count)
        return zmr_err(bad, "block %s: structural_shape %s has product %llu but the block has %llu rows (a grid's "
                            "shape multiplies out to its row count)", block, zmr_json_text(ss),
                       (unsigned long long)prod, (unsigned long long)count);
    return ZMR_OK;
}

zmr_status zmr_rule_declared_shape(const struct zmr_block *b, json_object *decl, zmr_status bad)
{
    json_object *ss = NULL;
    if (decl)
        json_object_object_get_ex(decl, "structural_shape", &ss);
    const char *want = ss ? zmr_json_text(ss) : "null";
    const char *got = b->structural_shape ? zmr_json_text(b->structural_shape) : "null";
    if (strcmp(want, got))
        return zmr_err(bad, "block %s has structural shape %s, sequence_schema declares %s (a grid's row count is "
                            "fixed for the run)", b->name, got, want);
    return ZMR_OK;
}

/* ------------------------------------------------------------ alignment */

zmr_status zmr_rule_alignments(json_object *blocks, zmr_status bad)
{
    if (!json_object_is_type(blocks, json_type_object))
        return ZMR_OK;
    json_object_object_foreach(blocks, name, decl) {
        json_object *t, *td, *t2, *ss, *cols, *tcols;
        if (!json_object_is_type(decl, json_type_object) || !json_object_object_get_ex(decl, "aligned_with", &t) ||
            t == NULL)
            continue;
        const char *target = json_object_get_string(t);
        if (!json_object_is_type(t, json_type_string) || !strcmp(target, name) ||
            !json_object_object_get_ex(blocks, target, &td) || !json_object_is_type(td, json_type_object))
            return zmr_err(bad, "sequence_schema.blocks.%s: aligned_with %.60s is no other declared block", name,
                           zmr_json_text(t));
        if (json_object_object_get_ex(td, "aligned_with", &t2) && t2 != NULL)
            return zmr_err(bad, "sequence_schema.blocks.%s: aligned with %s, which is itself aligned with %.60s "
                                "(alignments do not chain)", name, target, zmr_json_text(t2));
        if (json_object_object_get_ex(decl, "structural_shape", &ss) && ss != NULL)
            return zmr_err(bad, "sequence_schema.blocks.%s: an aligned block declares no structural shape", name);
        if (json_object_object_get_ex(decl, "columns", &cols) && json_object_object_get_ex(td, "columns", &tcols) &&
            json_object_is_type(cols, json_type_object) && json_object_is_type(tcols, json_type_object)) {
            json_object_object_foreach(cols, cname, cd) {
                json_object *x;
                (void)cd;
                if (json_object_object_get_ex(tcols, cname, &x))
                    return zmr_err(bad, "sequence_schema.blocks.%s: column %s is declared by its target %s too "
                                        "(an aligned block's columns are its own)", name, cname, target);
            }
        }
    }
    return ZMR_OK;
}

/* Block `name` as the resolved frame holds it: from `update` when it holds
 * the block, else from `state` (either may be NULL). */
static const struct zmr_block *resolved_block(const zmr_frame *update, const zmr_frame *state, const char *name)
{
    size_t b;
    if (update && zmr_frame_find_block(update, name, &b) == ZMR_OK)
        return &update->blocks[b];
    if (state && zmr_frame_find_block(state, name, &b) == ZMR_OK)
        return &state->blocks[b];
    return NULL;
}

zmr_status zmr_rules_aligned(json_object *blocks, const zmr_frame *update, const zmr_frame *state,
                             const zmr_frame *system, zmr_status bad)
{
    /* a block sharing a system block's name: the per-step state of those rows */
    const zmr_frame *sides[2] = {update, state};
    for (int s = 0; system && s < 2; s++)
        for (size_t bi = 0; sides[s] && bi < sides[s]->nblocks; bi++) {
            /* each name once, as the resolved frame holds it */
            const struct zmr_block *b = resolved_block(update, state, sides[s]->blocks[bi].name), *t;
            if (s == 1 && b != &state->blocks[bi])
                continue;
            size_t ti;
            if (zmr_frame_find_block(system, b->name, &ti) < 0)
                continue;
            t = &system->blocks[ti];
            if (t->count != b->count)
                return zmr_err(bad, "block %s has %llu rows but is aligned to /system/%s with %llu rows (an aligned "
                                    "block is held to its target's row count at every resolved ordinal)", b->name,
                               (unsigned long long)b->count, t->name, (unsigned long long)t->count);
        }
    /* a declared aligned_with */
    if (!json_object_is_type(blocks, json_type_object))
        return ZMR_OK;
    json_object_object_foreach(blocks, name, decl) {
        json_object *t;
        if (!json_object_is_type(decl, json_type_object) || !json_object_object_get_ex(decl, "aligned_with", &t) ||
            !json_object_is_type(t, json_type_string))
            continue;
        const struct zmr_block *b = resolved_block(update, state, name);
        const struct zmr_block *tb = resolved_block(update, state, json_object_get_string(t));
        if (b == NULL)
            continue; /* an aligned block may be absent while its target is present */
        if (tb == NULL)
            return zmr_err(bad, "block %s is aligned with %s, which is absent here (an aligned block may be absent "
                                "while its target is present, never the reverse)", name, json_object_get_string(t));
        if (b->count != tb->count)
            return zmr_err(bad, "block %s is aligned with %s but holds %llu rows to its %llu (a frame that changes "
                                "the target's row count restates the aligned block)", name, tb->name,
                           (unsigned long long)b->count, (unsigned long long)tb->count);
    }
    return ZMR_OK;
}

/* ------------------------------------------------------------ a record's frames */

void zmr_rules_begin(struct zmr_traj_rules *t) { memset(t, 0, sizeof *t); }

zmr_status zmr_rules_frame(const struct zmr_traj_rules *t, const zmr_frame *u, zmr_status bad)
{
    if (!u->has_step)
        return zmr_err(bad, "frame %llu carries no step (every update states its step number)",
                       (unsigned long long)t->frames);
    if (t->frames > 0 && u->step <= t->last_step)
        return zmr_err(bad, "step %lld after step %lld: steps increase strictly within a record", (long long)u->step,
                       (long long)t->last_step);
    if (t->frames > 0 && u->has_time != t->timed)
        return zmr_err(bad, "frame %llu %s a time but the record's first frame %s (time is all or nothing within a "
                            "record)", (unsigned long long)t->frames, u->has_time ? "has" : "lacks",
                       t->timed ? "has one" : "has none");
    if (u->has_box && t->boxed && u->box.cell_defined != t->cell_defined)
        return zmr_err(bad, "frame %llu: the cell's cell_defined is %s, an earlier cell of the record says %s (one flag "
                            "for the record's cell section)", (unsigned long long)t->frames,
                       u->box.cell_defined ? "true" : "false", t->cell_defined ? "true" : "false");
    return ZMR_OK;
}

void zmr_rules_next(struct zmr_traj_rules *t, const zmr_frame *u)
{
    if (t->frames == 0)
        t->timed = u->has_time;
    if (u->has_box) {
        t->boxed = true;
        t->cell_defined = u->box.cell_defined;
    }
    t->last_step = u->step;
    t->frames++;
}

/* ------------------------------------------------------------ precision */

double zmr_schema_precision(json_object *blocks, const char *block, const char *col)
{
    json_object *b, *cols, *c, *p;
    double pr;
    if (blocks && json_object_object_get_ex(blocks, block, &b) && json_object_object_get_ex(b, "columns", &cols) &&
        json_object_object_get_ex(cols, col, &c) && json_object_object_get_ex(c, "precision", &p) &&
        zmr_json_f64(p, &pr) == 0)
        return pr;
    return 0.0;
}

zmr_status zmr_rule_on_grid(const char *block, const struct zmr_col *c, double precision, zmr_status bad)
{
    if (precision == 0.0 || c->dtype != ZMR_F64)
        return ZMR_OK;
    const double *d = c->data;
    uint64_t per_row = c->shape[0] ? c->nelem / c->shape[0] : 0;
    for (uint64_t k = 0; k < c->nelem; k++) {
        if (c->validity && !c->validity[k / per_row])
            continue; /* a null row is unconstrained */
        double x = d[k], r = zmr_round_precision(x, precision);
        if (memcmp(&x, &r, sizeof x) && !(isnan(x) && isnan(r)))
            return zmr_err(bad, "column %s/%s: element %llu (%.17g) is off the grid of its declared precision %g "
                                "(nearest %.17g)", block, c->name, (unsigned long long)k, x, precision, r);
    }
    return ZMR_OK;
}
