/*
 * zr_test_model.h - the reference store model the engine's torture suites
 * share (crash, faults, maint, powerloss; test only, never installed).
 * Include it after <cmocka.h>; the helpers that fail do so through cmocka.
 *
 * A record is a pure function of its id: its size (within a suite's
 * recipe) and its bytes. A model is the list of record ids a store should
 * hold, index by index, changed the way the engine changes the store:
 * appends push new ids, a delete moves the last records into the holes
 * (swap-last), compact changes nothing. A suite checks a store against a
 * model byte for byte.
 */
#ifndef ZR_TEST_MODEL_H
#define ZR_TEST_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "zrengine.h"

/* A suite's records: sizes in [min_size, max_size]. */
typedef struct zt_recipe {
    uint32_t min_size;
    uint32_t max_size;
} zt_recipe;

/* Record `id`'s size and bytes (p holds zt_rec_size(r, id) bytes). */
uint32_t zt_rec_size(const zt_recipe *r, uint64_t id);
void zt_rec_fill(const zt_recipe *r, uint64_t id, unsigned char *p);

typedef struct zt_model {
    const zt_recipe *recipe;
    uint64_t *id;   /* id[i]: the record at index i */
    uint64_t len, cap;
    uint64_t next;  /* the id the next appended record gets */
} zt_model;

/* An empty model whose first appended record gets id `first_id`. */
void zt_model_init(zt_model *m, const zt_recipe *r, uint64_t first_id);
void zt_model_free(zt_model *m);
/* dst becomes a copy of src (dst initialised, or zeroed). */
void zt_model_copy(zt_model *dst, const zt_model *src);
void zt_model_push(zt_model *m, uint64_t id);

/* Append records with ids ids[0..n) to `e` in one zre_append call.
 * Returns its status. */
int zt_append_ids(zre_engine *e, const zt_recipe *r, const uint64_t *ids, uint64_t n);
/* Append n new records (ids m->next on) in one call; on success they are
 * pushed on the model. Returns the status of zre_append. */
int zt_model_append(zre_engine *e, zt_model *m, uint64_t n);
/* Swap-last delete, the specification's way: distinct indices in
 * descending order, each hole takes the current last record. Any order,
 * duplicates count once. */
void zt_model_delete(zt_model *m, const uint64_t *index, uint64_t n);

/* 1 when `e` holds model m: exactly (exact), or m followed by anything
 * (!exact); else 0 with the first difference in why[cap]. */
int zt_model_matches(zre_engine *e, const zt_model *m, int exact, char *why, size_t cap);
/* Fail the test (naming `ctx`) unless `e` holds exactly m; with `check`,
 * each record also passes zre_check_record. */
void zt_model_check(zre_engine *e, const zt_model *m, int check, const char *ctx);

/* Train a zstd dictionary into dict[cap] from records first_id.. (n of
 * them); returns its size. Fails the test if training fails. */
size_t zt_train_dict(const zt_recipe *r, uint64_t first_id, unsigned n, unsigned char *dict,
                     size_t cap);
/* Create an engine store at `path` with `codec` (a dictionary trained
 * from the recipe's records for zstd_dict). Fails the test on error. */
zre_engine *zt_create_store(const char *path, zre_codec codec, const zt_recipe *r);

#endif /* ZR_TEST_MODEL_H */
