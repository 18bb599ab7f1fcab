/* zrcore_wordsize.i for targets where int64_t is `long long`: Windows
 * (where long has 32 bits), macOS (where long has 64 bits, but int64_t is
 * long long all the same) and 32-bit CPUs. doc.go puts this directory on
 * SWIG's include path for those GOOS/GOARCH pairs; stdint.i's default
 * then applies (no SWIGWORDSIZE64). */
%{
#define ZRCORE_INT64_IS_LONG 0
%}
