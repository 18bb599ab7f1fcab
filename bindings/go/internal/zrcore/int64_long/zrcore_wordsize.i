/* zrcore_wordsize.i for targets where int64_t is `long`: 64-bit Linux,
 * Android and FreeBSD. doc.go puts this directory on SWIG's include path
 * for those GOOS/GOARCH pairs; SWIG's stdint.i then declares int64_t and
 * uint64_t as the C headers do, so the wrapper's casts and pointer types
 * match them. */
#define SWIGWORDSIZE64
%{
#define ZRCORE_INT64_IS_LONG 1
%}
