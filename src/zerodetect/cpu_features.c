/* Which SIMD extensions can run here: CPUID says what the CPU has, XGETBV
 * (XCR0) says which register state the OS saves on context switch.  A
 * feature whose registers the OS does not save must not be used. */
#include "zerodetect/zd_internal.h"

/* CPUID bits: leaf 1 EDX/ECX, leaf 7 subleaf 0 EBX */
#define CPUID1_EDX_SSE2     (1u << 26)
#define CPUID1_ECX_OSXSAVE  (1u << 27)
#define CPUID1_ECX_AVX      (1u << 28)
#define CPUID7_EBX_AVX2     (1u << 5)
#define CPUID7_EBX_AVX512F  (1u << 16)
#define CPUID7_EBX_AVX512BW (1u << 30)

/* XCR0 bits: XMM, upper halves of YMM, AVX-512 opmask k0-7, upper halves of
 * ZMM0-15, ZMM16-31. */
#define XCR0_SSE       (1u << 1)
#define XCR0_YMM       (1u << 2)
#define XCR0_OPMASK    (1u << 5)
#define XCR0_ZMM_HI256 (1u << 6)
#define XCR0_HI16_ZMM  (1u << 7)

unsigned zd_cpu_decide(const struct zd_cpuid *c)
{
    unsigned f = 0;
    const uint64_t ymm = XCR0_SSE | XCR0_YMM;
    const uint64_t zmm = ymm | XCR0_OPMASK | XCR0_ZMM_HI256 | XCR0_HI16_ZMM;

    if (c->leaf1_edx & CPUID1_EDX_SSE2)
        f |= ZD_CPU_SSE2;
    /* without OSXSAVE the OS manages no extended state (and XCR0 cannot
     * be read): nothing beyond SSE */
    if (!(c->leaf1_ecx & CPUID1_ECX_OSXSAVE) || !(c->leaf1_ecx & CPUID1_ECX_AVX))
        return f;
    if ((c->leaf7_ebx & CPUID7_EBX_AVX2) && (c->xcr0 & ymm) == ymm)
        f |= ZD_CPU_AVX2;
    if ((c->leaf7_ebx & CPUID7_EBX_AVX512F) && (c->leaf7_ebx & CPUID7_EBX_AVX512BW) &&
        (f & ZD_CPU_AVX2) && (c->xcr0 & zmm) == zmm)
        f |= ZD_CPU_AVX512BW;
    return f;
}

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>

unsigned zd_cpu_features(void)
{
    struct zd_cpuid c = { 0 };
    unsigned a, b, cx, d;

    if (!__get_cpuid(1, &a, &b, &cx, &d))
        return 0;
    c.leaf1_ecx = cx;
    c.leaf1_edx = d;
    if (__get_cpuid_count(7, 0, &a, &b, &cx, &d))
        c.leaf7_ebx = b;
    if (c.leaf1_ecx & CPUID1_ECX_OSXSAVE) {
        uint32_t lo, hi;
        __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
        c.xcr0 = ((uint64_t)hi << 32) | lo;
    }
    return zd_cpu_decide(&c);
}

#else

unsigned zd_cpu_features(void)
{
    return 0;
}

#endif
