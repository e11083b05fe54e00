/* Adler-32 (RFC 1950), the checksum that ends a zlib stream: VMDK grains
 * are zlib streams, checked when inflated and written when compressed.
 *
 * zlib's own Adler-32 is scalar and took about 15% of a streamOptimized
 * conversion, so the streams are inflated and deflated raw (no checksum in
 * zlib) and the Adler-32 is computed here, with AVX2 when the CPU has it
 * (32 bytes a step: byte sums with SAD, position-weighted sums with
 * MADDUBS), so corruption is still caught at a fraction of the cost.
 */
#include <pthread.h>

#include "codec/codec.h"
#include "zerodetect/zd_internal.h"

#define ADLER_MOD  65521u
#define ADLER_NMAX 5552u    /* bytes before the sums must be reduced */

uint32_t vmdk_adler32_generic(uint32_t adler, const uint8_t *p, size_t n)
{
    uint32_t s1 = adler & 0xffff, s2 = adler >> 16;

    while (n) {
        size_t k = n < ADLER_NMAX ? n : ADLER_NMAX;
        n -= k;
        for (; k >= 8; k -= 8, p += 8) {
            s1 += p[0]; s2 += s1; s1 += p[1]; s2 += s1;
            s1 += p[2]; s2 += s1; s1 += p[3]; s2 += s1;
            s1 += p[4]; s2 += s1; s1 += p[5]; s2 += s1;
            s1 += p[6]; s2 += s1; s1 += p[7]; s2 += s1;
        }
        for (; k; k--) {
            s1 += *p++;
            s2 += s1;
        }
        s1 %= ADLER_MOD;
        s2 %= ADLER_MOD;
    }
    return s2 << 16 | s1;
}

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

__attribute__((target("avx2")))
static uint32_t hsum32(__m256i v)
{
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
    return (uint32_t)_mm_cvtsi128_si32(s);
}

__attribute__((target("avx2")))
uint32_t vmdk_adler32_avx2(uint32_t adler, const uint8_t *p, size_t n)
{
    uint64_t s1 = adler & 0xffff, s2 = adler >> 16;
    const __m256i zero = _mm256_setzero_si256();
    const __m256i ones = _mm256_set1_epi16(1);
    const __m256i weights = _mm256_setr_epi8(32, 31, 30, 29, 28, 27, 26, 25, 24, 23, 22, 21,
                                             20, 19, 18, 17, 16, 15, 14, 13, 12, 11, 10, 9,
                                             8, 7, 6, 5, 4, 3, 2, 1);

    while (n >= 32) {
        /* at most NMAX bytes per round keeps every 32-bit lane from overflowing */
        size_t blocks = n / 32;
        if (blocks > ADLER_NMAX / 32)
            blocks = ADLER_NMAX / 32;
        __m256i vs1 = zero, vs1_before = zero, vs2 = zero;
        for (size_t b = 0; b < blocks; b++) {
            __m256i d = _mm256_loadu_si256((const __m256i *)(const void *)p);
            vs1_before = _mm256_add_epi32(vs1_before, vs1);
            vs1 = _mm256_add_epi32(vs1, _mm256_sad_epu8(d, zero));
            vs2 = _mm256_add_epi32(vs2, _mm256_madd_epi16(_mm256_maddubs_epi16(d, weights), ones));
            p += 32;
        }
        n -= blocks * 32;
        /* per block: s2 += 32 * s1 (s1 before the block) + weighted bytes */
        s2 += 32 * blocks * s1 + 32 * (uint64_t)hsum32(vs1_before) + hsum32(vs2);
        s1 += hsum32(vs1);
        s1 %= ADLER_MOD;
        s2 %= ADLER_MOD;
    }
    return vmdk_adler32_generic((uint32_t)(s2 << 16 | s1), p, n);
}

static uint32_t (*adler_fn)(uint32_t, const uint8_t *, size_t) = vmdk_adler32_generic;
static pthread_once_t adler_once = PTHREAD_ONCE_INIT;

static void adler_choose(void)
{
    if (zd_cpu_features() & ZD_CPU_AVX2)
        adler_fn = vmdk_adler32_avx2;
}

uint32_t vmdk_adler32(uint32_t adler, const uint8_t *p, size_t n)
{
    pthread_once(&adler_once, adler_choose);
    return adler_fn(adler, p, n);
}

#else

uint32_t vmdk_adler32(uint32_t adler, const uint8_t *p, size_t n)
{
    return vmdk_adler32_generic(adler, p, n);
}

#endif
