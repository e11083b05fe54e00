/* zerodetect internals shared by the variants, the dispatcher and the run
 * scanner.  Not part of the public API. */
#ifndef DISKIMG_ZD_INTERNAL_H
#define DISKIMG_ZD_INTERNAL_H

#include "zerodetect/zerodetect.h"

/* CPU features that count only when the OS also saves their registers. */
enum {
    ZD_CPU_SSE2 = 1u << 0,
    ZD_CPU_AVX2 = 1u << 1,     /* AVX2 + OS saves YMM state */
    ZD_CPU_AVX512BW = 1u << 2, /* AVX-512F+BW + OS saves opmask and ZMM state */
};

/* Bit set of ZD_CPU_* this CPU and OS can run (computed on each call). */
unsigned zd_cpu_features(void);

/* The raw CPUID and XCR0 words that decision is made from, and the pure
 * decision itself (unit-tested with made-up values). */
struct zd_cpuid {
    uint32_t leaf1_ecx, leaf1_edx; /* CPUID leaf 1 */
    uint32_t leaf7_ebx;            /* CPUID leaf 7 subleaf 0 */
    uint64_t xcr0;                 /* XGETBV(0); 0 unless OSXSAVE */
};
unsigned zd_cpu_decide(const struct zd_cpuid *c);

typedef size_t (*zd_prefix_fn)(const void *buf, size_t len);

struct zd_impl {
    const char *name;
    zd_fn is_zero;          /* whole check, any length and alignment */
    zd_prefix_fn zero_prefix; /* see zd_zero_prefix() */
    unsigned needs;         /* ZD_CPU_* bits required */
};

/* All variants compiled in, best first; the last is generic C and needs
 * nothing. */
extern const struct zd_impl zd_impl_table[];
extern const size_t zd_impl_count;

/* The variant in use (selects it on first call).  Never NULL. */
const struct zd_impl *zd_active(void);

#endif
