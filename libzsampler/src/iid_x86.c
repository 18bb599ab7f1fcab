/*
 * iid_x86.c - the iid mode's draw loop on x86-64's AVX-512, chosen at
 * run time, with outputs identical to the scalar loop in sampler.c.
 *
 * The scalar loop spends three 64-bit multiplies per index (two in the
 * finalizer, one to scale into [0, n)) and runs at the multiplier's
 * throughput. AVX-512DQ has a 64-bit lane multiply (vpmullq), so eight
 * indices go through the finalizer at once (about 1.9x the scalar loop on
 * the benchmark host). AVX2 has no 64-bit multiply: building each product
 * from three 32x32-bit ones, four lanes at a time, measured 8% slower
 * than the scalar loop there, so there is no AVX2 kernel. Scaling into
 * [0, n) for n < 2^32 takes two 32x32-bit products per lane:
 *   r * n = (r_hi * n) * 2^32 + r_lo * n,
 * whose high 64 bits are the index and whose low 64 bits feed Lemire's
 * rejection test, exactly as the scalar 64x128-bit product does.
 *
 * Detection is the CPUID instruction plus XGETBV (does the OS save the
 * vector registers?), instructions rather than OS calls, so it lives here
 * with the kernel and not in the platform layer. macOS enables AVX-512
 * state per thread on first use, so there XGETBV usually says no and the
 * scalar loop runs: slower, never different. The kernel exists on x86-64
 * with GCC or clang (a per-function target attribute, no global -m flags,
 * so the rest of the library still runs on any x86-64); elsewhere
 * zsm_avx512() is 0 and the kernel is never called.
 */
#include "zsm_internal.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>
#include <immintrin.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

/* ----------------------------------------------------------- AVX-512 */

#define T512 __attribute__((target("avx512f,avx512dq")))

T512 static inline __m512i mix512(__m512i z, __m512i m1, __m512i m2)
{
    z = _mm512_xor_si512(z, _mm512_srli_epi64(z, 30));
    z = _mm512_mullo_epi64(z, m1);
    z = _mm512_xor_si512(z, _mm512_srli_epi64(z, 27));
    z = _mm512_mullo_epi64(z, m2);
    return _mm512_xor_si512(z, _mm512_srli_epi64(z, 31));
}

T512 int zsm_iid_avx512(uint64_t ctr, uint64_t n, uint64_t threshold, uint64_t count,
                        uint64_t *out)
{
    const __m512i m1 = _mm512_set1_epi64((long long)MIX_M1);
    const __m512i m2 = _mm512_set1_epi64((long long)MIX_M2);
    const __m512i vn = _mm512_set1_epi64((long long)n);
    const __m512i thr = _mm512_set1_epi64((long long)threshold);
    const __m512i low32 = _mm512_set1_epi64(0xFFFFFFFFll);
    const __m512i stride = _mm512_set1_epi64((long long)(8 * GOLDEN));
    __m512i c = _mm512_set_epi64((long long)(ctr + 7 * GOLDEN), (long long)(ctr + 6 * GOLDEN),
                                 (long long)(ctr + 5 * GOLDEN), (long long)(ctr + 4 * GOLDEN),
                                 (long long)(ctr + 3 * GOLDEN), (long long)(ctr + 2 * GOLDEN),
                                 (long long)(ctr + GOLDEN), (long long)ctr);
    __mmask8 rejected = 0;
    for (uint64_t j = 0; j < count; j += 8) {
        __m512i r = mix512(c, m1, m2);
        c = _mm512_add_epi64(c, stride);
        __m512i lo_n = _mm512_mul_epu32(r, vn);                        /* r_lo * n */
        __m512i hi_n = _mm512_mul_epu32(_mm512_srli_epi64(r, 32), vn); /* r_hi * n */
        /* t = r * n / 2^32; cannot overflow: r_hi * n <= (2^32 - 1)^2 and
         * lo_n >> 32 <= 2^32 - 2, whose sum is below 2^64. */
        __m512i t = _mm512_add_epi64(hi_n, _mm512_srli_epi64(lo_n, 32));
        __m512i lo = _mm512_or_si512(_mm512_slli_epi64(t, 32), _mm512_and_si512(lo_n, low32));
        rejected |= _mm512_cmplt_epu64_mask(lo, thr);
        _mm512_storeu_si512((void *)(out + j), _mm512_srli_epi64(t, 32));
    }
    return rejected != 0;
}

/* --------------------------------------------------------- detection */

static uint64_t xcr0(void)
{
    uint32_t lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return ((uint64_t)hi << 32) | lo;
}

/* AVX-512F + DQ, and the OS saving their registers. */
static int cpu_has_avx512(void)
{
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return 0;
    /* AVX needs the CPU's support and the OS's (OSXSAVE, then XCR0 saying
     * the XMM and YMM state is saved on a context switch). */
    if (!(c & bit_OSXSAVE) || !(c & bit_AVX)) return 0;
    uint64_t x = xcr0();
    if ((x & 0x6) != 0x6) return 0;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return 0;
    /* AVX-512 also needs the opmask and both halves of ZMM state saved. */
    return (b & bit_AVX512F) && (b & bit_AVX512DQ) && (x & 0xE0) == 0xE0;
}

int zsm_avx512(void)
{
    static _Atomic int cached = -1;
    int use = atomic_load_explicit(&cached, memory_order_relaxed);
    if (use >= 0) return use;
    const char *want = getenv("ZSAMPLER_SIMD");
    use = !(want != NULL && strcmp(want, "scalar") == 0) && cpu_has_avx512();
    atomic_store_explicit(&cached, use, memory_order_relaxed);
    return use;
}

#else /* not x86-64 with GCC or clang: the scalar loop only */

int zsm_avx512(void) { return 0; }

int zsm_iid_avx512(uint64_t ctr, uint64_t n, uint64_t threshold, uint64_t count, uint64_t *out)
{
    (void)ctr, (void)n, (void)threshold, (void)count, (void)out;
    return 1; /* never called: zsm_avx512() is 0 */
}

#endif
