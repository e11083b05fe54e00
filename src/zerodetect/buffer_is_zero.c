/* The buffer_is_zero variants: generic C, SSE2, AVX2 and AVX-512BW, all from
 * zd_template.h, compiled per target with function attributes (no per-file
 * -m flags), and the preference-ordered table the dispatcher picks from. */
#include "zerodetect/zd_internal.h"

#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define ZD_X86 1
#endif

static inline uint64_t load64u(const unsigned char *p)
{
    uint64_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

static inline uint32_t load32u(const unsigned char *p)
{
    uint32_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

/* Any len < 16, with at most two overlapping loads. */
static inline bool small_is_zero(const unsigned char *p, size_t len)
{
    if (len >= 8)
        return (load64u(p) | load64u(p + len - 8)) == 0;
    if (len >= 4)
        return (load32u(p) | load32u(p + len - 4)) == 0;
    if (len == 0)
        return true;
    return (p[0] | p[len / 2] | p[len - 1]) == 0; /* covers len 1..3 */
}

/* ---- generic C: 64-bit words ---- */
typedef uint64_t __attribute__((may_alias)) zd_word;
#define ZD_SUFFIX generic
#define ZD_TARGET
#define zd_vec uint64_t
#define ZD_W 8
#define ZD_LOADU(p) load64u(p)
#define ZD_LOADA(p) (*(const zd_word *)(const void *)(p))
#define ZD_OR(a, b) ((a) | (b))
#define ZD_ISZERO(v) ((v) == 0)
#define ZD_SMALL(p, len) small_is_zero(p, len)
#define ZD_BLOCK 8
#include "zerodetect/zd_template.h"
#undef ZD_SUFFIX
#undef ZD_TARGET
#undef zd_vec
#undef ZD_W
#undef ZD_LOADU
#undef ZD_LOADA
#undef ZD_OR
#undef ZD_ISZERO
#undef ZD_SMALL
#undef ZD_BLOCK

#ifdef ZD_X86
/* ---- SSE2: 16-byte vectors; no PTEST before SSE4.1, so compare+movemask ---- */
#define ZD_SUFFIX sse2
#define ZD_TARGET __attribute__((target("sse2")))
#define zd_vec __m128i
#define ZD_W 16
#define ZD_LOADU(p) _mm_loadu_si128((const __m128i *)(const void *)(p))
#define ZD_LOADA(p) _mm_load_si128((const __m128i *)(const void *)(p))
#define ZD_OR(a, b) _mm_or_si128(a, b)
#define ZD_ISZERO(v) (_mm_movemask_epi8(_mm_cmpeq_epi8(v, _mm_setzero_si128())) == 0xffff)
#define ZD_SMALL(p, len) small_is_zero(p, len)
#define ZD_BLOCK 8
#include "zerodetect/zd_template.h"
#undef ZD_SUFFIX
#undef ZD_TARGET
#undef zd_vec
#undef ZD_W
#undef ZD_LOADU
#undef ZD_LOADA
#undef ZD_OR
#undef ZD_ISZERO
#undef ZD_SMALL
#undef ZD_BLOCK

/* ---- AVX2: 32-byte vectors ---- */
__attribute__((target("avx2")))
static inline bool small_is_zero_avx2(const unsigned char *p, size_t len)
{
    if (len >= 16) {
        __m128i v = _mm_or_si128(_mm_loadu_si128((const __m128i *)(const void *)p),
                                 _mm_loadu_si128((const __m128i *)(const void *)(p + len - 16)));
        return _mm_testz_si128(v, v);
    }
    return small_is_zero(p, len);
}

#define ZD_SUFFIX avx2
#define ZD_TARGET __attribute__((target("avx2")))
#define zd_vec __m256i
#define ZD_W 32
#define ZD_LOADU(p) _mm256_loadu_si256((const __m256i *)(const void *)(p))
#define ZD_LOADA(p) _mm256_load_si256((const __m256i *)(const void *)(p))
#define ZD_OR(a, b) _mm256_or_si256(a, b)
#define ZD_ISZERO(v) _mm256_testz_si256(v, v)
#define ZD_SMALL(p, len) small_is_zero_avx2(p, len)
#define ZD_BLOCK 8
#include "zerodetect/zd_template.h"
#undef ZD_SUFFIX
#undef ZD_TARGET
#undef zd_vec
#undef ZD_W
#undef ZD_LOADU
#undef ZD_LOADA
#undef ZD_OR
#undef ZD_ISZERO
#undef ZD_SMALL
#undef ZD_BLOCK

/* ---- AVX-512BW: 64-byte vectors.  Not executable on every test machine:
 * it shares the template with the variants that are, and below 64 bytes it
 * uses the AVX2 code (two overlapping 32-byte loads from 32 bytes on). ---- */
__attribute__((target("avx2,avx512f,avx512bw")))
static inline bool small_is_zero_avx512bw(const unsigned char *p, size_t len)
{
    if (len >= 32) {
        __m256i v = _mm256_or_si256(_mm256_loadu_si256((const __m256i *)(const void *)p),
                                    _mm256_loadu_si256((const __m256i *)(const void *)(p + len - 32)));
        return _mm256_testz_si256(v, v);
    }
    return small_is_zero_avx2(p, len);
}

#define ZD_SUFFIX avx512bw
#define ZD_TARGET __attribute__((target("avx2,avx512f,avx512bw")))
#define zd_vec __m512i
#define ZD_W 64
#define ZD_LOADU(p) _mm512_loadu_si512((const void *)(p))
#define ZD_LOADA(p) _mm512_load_si512((const void *)(p))
#define ZD_OR(a, b) _mm512_or_si512(a, b)
#define ZD_ISZERO(v) (_mm512_test_epi64_mask(v, v) == 0)
#define ZD_SMALL(p, len) small_is_zero_avx512bw(p, len)
#define ZD_BLOCK 4 /* 256 B, as AVX2 */
#include "zerodetect/zd_template.h"
#undef ZD_SUFFIX
#undef ZD_TARGET
#undef zd_vec
#undef ZD_W
#undef ZD_LOADU
#undef ZD_LOADA
#undef ZD_OR
#undef ZD_ISZERO
#undef ZD_SMALL
#undef ZD_BLOCK
#endif /* ZD_X86 */

const struct zd_impl zd_impl_table[] = {
#ifdef ZD_X86
    { "avx512bw", is_zero_avx512bw, zero_prefix_avx512bw, ZD_CPU_AVX512BW },
    { "avx2", is_zero_avx2, zero_prefix_avx2, ZD_CPU_AVX2 },
    { "sse2", is_zero_sse2, zero_prefix_sse2, ZD_CPU_SSE2 },
#endif
    { "generic", is_zero_generic, zero_prefix_generic, 0 },
};
const size_t zd_impl_count = sizeof zd_impl_table / sizeof zd_impl_table[0];
