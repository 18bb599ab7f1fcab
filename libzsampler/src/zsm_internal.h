/*
 * zsm_internal.h - libzsampler's private pieces shared between its source
 * files: the generator's constants, the vector kernel of the iid mode and
 * the names' comparison.
 * Not installed.
 */
#ifndef ZSM_INTERNAL_H
#define ZSM_INTERNAL_H

#include <stdint.h>

#include "zrerror_sys.h"

/* The counter stride (2^64 / golden ratio, odd) and the two multipliers of
 * the 64-bit finalizer (SplitMix64's): mix64(z) is
 *   z ^= z >> 30; z *= MIX_M1; z ^= z >> 27; z *= MIX_M2; z ^= z >> 31. */
#define GOLDEN UINT64_C(0x9E3779B97F4A7C15)
#define MIX_M1 UINT64_C(0xBF58476D1CE4E5B9)
#define MIX_M2 UINT64_C(0x94D049BB133111EB)

/* 1 if a equals b ignoring ASCII case (names of modes and options). */
int zsm__name_eq(const char *a, const char *b);

/* Whether the iid loop uses zsm_iid_avx512: the CPU has AVX-512F + DQ and
 * the OS saves its registers, and the environment variable ZSAMPLER_SIMD
 * is not "scalar". Decided once per process; always 0 off x86-64. */
int zsm_avx512(void);

/* The iid loop's vector kernel (iid_x86.c). It writes, for
 * j in [0, count), out[j] = floor(mix64(ctr + j * GOLDEN) * n / 2^64), the
 * scalar loop's first draw, and returns nonzero when any of those draws
 * falls below `threshold` (Lemire's rejection: the caller then redoes the
 * batch on the scalar loop, which retries those draws). n < 2^32, so the
 * multiply by n needs only 32x32-bit products. count is a multiple of 8.
 * Called only when zsm_avx512() says so. */
int zsm_iid_avx512(uint64_t ctr, uint64_t n, uint64_t threshold, uint64_t count, uint64_t *out);

#endif
