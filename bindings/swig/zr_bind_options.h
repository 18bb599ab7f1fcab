/*
 * zr_bind_options.h - the loader options every binding fills, with room for
 * their flips (resolved by zld_flip_by_name / zld_flip_resolve, zloader.h)
 * and stream labels. Header-only glue, included by the bindings' SWIG C
 * code.
 */
#ifndef ZR_BIND_OPTIONS_H
#define ZR_BIND_OPTIONS_H

#include <zloader.h>
#include <zrerror_sys.h>

/* Loader options with room for their flips and stream labels: what a
 * binding builds from its language's options before zld_create, which
 * copies them. */
#define ZR_BIND_MAX_FLIPS 64
#define ZR_BIND_MAX_NAMES 1024
typedef struct zr_bind_options {
    zld_options o;
    zld_flip flips[ZR_BIND_MAX_FLIPS];
    const char *names[ZR_BIND_MAX_NAMES]; /* o.names: the streams' labels in the state */
} zr_bind_options;

#endif
