/*
 * zr_bind_shards.i - many stores as one dataset, for the Lua and Go
 * bindings: concatenated shards, weighted mixtures, loaders over them,
 * and uploads to URLs, through the shared C of zr_bind_shards.h (see
 * there). A binding's language fills a zr_bind_set one path, handle or
 * weight at a time, so this file needs no typemap of its own. Included by
 * a binding's .i after zr_core.i (its out-handle typemaps for
 * zrs_concat ** and zld_mixture ** apply).
 */

%{
#include "zr_bind_shards.h"
%}

%nodefaultctor zr_bind_set;
%nodefaultdtor zr_bind_set;

/* The list: new, free (NULL: no-op), and its items in order: a store path
 * or URL (copied), an open store, a concatenation, stream `stream` of a
 * mixture (borrowed), or a mixture source's weight and mode name. */
typedef struct zr_bind_set zr_bind_set;
zr_bind_set *zr_bind_set_new(void);
void zr_bind_set_free(zr_bind_set *set);
int zr_bind_set_add_path(zr_bind_set *set, const char *path);
int zr_bind_set_add_store(zr_bind_set *set, zrs_store *s);
int zr_bind_set_add_concat(zr_bind_set *set, zrs_concat *c);
int zr_bind_set_add_mixture(zr_bind_set *set, zld_mixture *m, size_t stream);
int zr_bind_set_add_weight(zr_bind_set *set, double weight, const char *mode);
size_t zr_bind_set_count(const zr_bind_set *set);

/* zrs_concat_open over the list's paths; zrs_concat_create over its
 * stores; a dense concatenation's item shape, one dimension at a time. */
int zr_bind_concat_open(zrs_concat **out, const zr_bind_set *paths, unsigned flags);
int zr_bind_concat_create(zrs_concat **out, const zr_bind_set *stores);
uint64_t zr_bind_concat_dim(const zrs_concat *c, size_t k);

/* zrs_push of one store; zrs_push_shards of the list's paths. */
int zr_bind_push(const char *path, const char *url);
int zr_bind_push_shards(const zr_bind_set *paths, const char *url);

/* zld_mixture_create over `concats` (source-major) and one weight item per
 * source; where a mixture loader's virtual index comes from. */
int zr_bind_mixture_create(zld_mixture **out, const zr_bind_set *concats,
                           const zr_bind_set *weights, size_t nstreams, uint64_t seed,
                           uint64_t batch_size, uint32_t world_size);
int zr_bind_mixture_locate(const zld_mixture *m, uint64_t virt, uint64_t *mix_source,
                           uint64_t *mix_index);

/* A loader over the list's stores, concatenations and mixture streams. */
int zr_bind_loader_create(zld_loader **out, const zr_bind_set *streams,
                          const zld_options *options);
