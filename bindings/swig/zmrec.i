/*
 * zmrec.i - the language-neutral SWIG declarations of libzmrec (zmrec.h):
 * enums, constants and the opaque handles. Each language module includes
 * it from its own typemap file (Python: bindings/python/zmrec_python.i),
 * which adds the checked, language-shaped entry points.
 */
%{
#include <zmrec.h>
%}

#define ZMR_API

%nodefaultctor zmr_frame;
%nodefaultdtor zmr_frame;
%nodefaultctor zmr_writer;
%nodefaultdtor zmr_writer;
%nodefaultctor zmr_reader;
%nodefaultdtor zmr_reader;

/* Raw-pointer entry points: each language wraps them with lengths checked. */
%ignore zmr_value;
%ignore zmr_column;
%ignore zmr_box;
%ignore zmr_frame_add_column;
%ignore zmr_frame_add_string_column;
%ignore zmr_frame_set_meta_value;
%ignore zmr_frame_get_meta;
%ignore zmr_frame_get_step;
%ignore zmr_frame_get_time;
%ignore zmr_frame_set_box;
%ignore zmr_frame_get_box;
%ignore zmr_frame_find_block;
%ignore zmr_frame_column;
%ignore zmr_frame_find_column;
%ignore zmr_frame_encode;
%ignore zmr_frame_decode;
%ignore zmr_frame_create;
%ignore zmr_writer_create;
%ignore zmr_writer_begin_record;
%ignore zmr_open;
%ignore zmr_record_info;
%ignore zmr_read_record_meta;
%ignore zmr_read_system;
%ignore zmr_read_ff;
%ignore zmr_read_index;
%ignore zmr_read_update;
%ignore zmr_read_frame;
%ignore zmr_dtype_parse;
%ignore zmr_tag_parse;
%ignore zmr_free;

%include "zmrec.h"
