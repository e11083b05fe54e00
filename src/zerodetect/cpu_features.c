/* Which SIMD extensions can run here: CPUID says what the CPU has, XGETBV
 * (XCR0) says which register state the OS saves on context switch.  A
 * feature whose registers the OS does not save must not be used. */
#include "zerodetect/zd_internal.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>

/* XCR0 bits: SSE (XMM), AVX (YMM upper halves), AVX-512 opmask k0-7,
 * ZMM0-15 upper halves, ZMM16-31. */
#define XCR0_SSE      (1u << 1)
#define XCR0_YMM      (1u << 2)
#define XCR0_OPMASK   (1u << 5)
#define XCR0_ZMM_HI256 (1u << 6)
#define XCR0_HI16_ZMM (1u << 7)

static uint64_t read_xcr0(void)
{
    uint32_t lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return ((uint64_t)hi << 32) | lo;
}

unsigned zd_cpu_features(void)
{
    unsigned a, b, c, d, f = 0;

    if (!__get_cpuid(1, &a, &b, &c, &d))
        return 0;
    if (d & bit_SSE2)
        f |= ZD_CPU_SSE2;
    /* XGETBV exists only when the OS enabled it (OSXSAVE). */
    if (!(c & bit_OSXSAVE) || !(c & bit_AVX))
        return f;
    uint64_t xcr0 = read_xcr0();
    unsigned ymm = XCR0_SSE | XCR0_YMM;
    unsigned zmm = ymm | XCR0_OPMASK | XCR0_ZMM_HI256 | XCR0_HI16_ZMM;

    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d))
        return f;
    if ((b & bit_AVX2) && (xcr0 & ymm) == ymm)
        f |= ZD_CPU_AVX2;
    if ((b & bit_AVX512F) && (b & bit_AVX512BW) && (xcr0 & zmm) == zmm)
        f |= ZD_CPU_AVX512BW;
    return f;
}

#else

unsigned zd_cpu_features(void)
{
    return 0;
}

#endif
