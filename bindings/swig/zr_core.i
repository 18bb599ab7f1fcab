/*
 * zr_core.i - the language-neutral SWIG interface over the four public
 * headers of loaderx-in-C (zrengine.h, zrstore.h, zsampler.h, zloader.h).
 *
 * Every language module (Python now; Lua and Go later) declares its own
 * %module and typemaps, then does %include "zr_core.i". Keep this file free
 * of language-specific code: only what no binding should see is hidden here.
 */

%{
#include <zloader.h>
%}

/* Fixed-width integer types (uint64_t, ...) as the target language's ints. */
%include <stdint.i>

/* Export macros mean nothing to the wrapper generator. */
#define ZRE_API
#define ZRS_API
#define ZSM_API
#define ZLD_API

/* Variadic and "for the layers above the engine" only. */
%ignore zr_set_error;

/* Opaque handles: the wrappers only ever carry pointers to these. */
%nodefaultctor zre_engine;
%nodefaultdtor zre_engine;
%nodefaultctor zrs_store;
%nodefaultdtor zrs_store;
%nodefaultctor zld_loader;
%nodefaultdtor zld_loader;
%nodefaultctor zld_batch;
%nodefaultdtor zld_batch;

%include "zrengine.h"
%include "zrstore.h"
%include "zsampler.h"
%include "zloader.h"
