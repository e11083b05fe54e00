/* CRC-32C: a slicing-by-8 table version for any CPU and one that uses the
 * SSE4.2 `crc32` instruction (8 bytes a step), picked once on first use. */
#include "codec/crc32c.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#define CRC32C_POLY 0x82f63b78u   /* reflected 0x1edc6f41 */

static uint32_t table[8][256];
static pthread_once_t table_once = PTHREAD_ONCE_INIT;

static void table_init(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = c & 1 ? c >> 1 ^ CRC32C_POLY : c >> 1;
        table[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; i++)
        for (int t = 1; t < 8; t++)
            table[t][i] = table[t - 1][i] >> 8 ^ table[0][table[t - 1][i] & 0xff];
}

uint32_t crc32c_generic(uint32_t crc, const void *buf, size_t n)
{
    const uint8_t *p = buf;

    pthread_once(&table_once, table_init);
    crc = ~crc;
    while (n && ((uintptr_t)p & 7)) {
        crc = crc >> 8 ^ table[0][(crc ^ *p++) & 0xff];
        n--;
    }
    for (; n >= 8; n -= 8, p += 8) {
        /* the 8 bytes as two little-endian words, whatever the host order */
        uint32_t lo = crc ^ ((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
                             (uint32_t)p[3] << 24);
        uint32_t hi = (uint32_t)p[4] | (uint32_t)p[5] << 8 | (uint32_t)p[6] << 16 |
                      (uint32_t)p[7] << 24;
        crc = table[7][lo & 0xff] ^ table[6][lo >> 8 & 0xff] ^ table[5][lo >> 16 & 0xff] ^
              table[4][lo >> 24] ^ table[3][hi & 0xff] ^ table[2][hi >> 8 & 0xff] ^
              table[1][hi >> 16 & 0xff] ^ table[0][hi >> 24];
    }
    while (n--)
        crc = crc >> 8 ^ table[0][(crc ^ *p++) & 0xff];
    return ~crc;
}

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#include <nmmintrin.h>

#define CPUID1_ECX_SSE42 (1u << 20)

bool crc32c_have_sse42(void)
{
    unsigned a, b, c, d;

    return __get_cpuid(1, &a, &b, &c, &d) && (c & CPUID1_ECX_SSE42);
}

__attribute__((target("sse4.2")))
uint32_t crc32c_sse42(uint32_t crc, const void *buf, size_t n)
{
    const uint8_t *p = buf;

    crc = ~crc;
    while (n && ((uintptr_t)p & 7)) {
        crc = _mm_crc32_u8(crc, *p++);
        n--;
    }
#if defined(__x86_64__)
    uint64_t c64 = crc;
    for (; n >= 8; n -= 8, p += 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        c64 = _mm_crc32_u64(c64, w);
    }
    crc = (uint32_t)c64;
#endif
    for (; n >= 4; n -= 4, p += 4) {
        uint32_t w;
        memcpy(&w, p, 4);
        crc = _mm_crc32_u32(crc, w);
    }
    while (n--)
        crc = _mm_crc32_u8(crc, *p++);
    return ~crc;
}

#else

bool crc32c_have_sse42(void)
{
    return false;
}

uint32_t crc32c_sse42(uint32_t crc, const void *buf, size_t n)
{
    return crc32c_generic(crc, buf, n);
}

#endif

typedef uint32_t (*crc_fn)(uint32_t, const void *, size_t);

static _Atomic(crc_fn) active;
static pthread_once_t choose_once = PTHREAD_ONCE_INIT;

static void choose(void)
{
    const char *env = getenv("DISKIMG_CRC32C_IMPL");
    bool generic = env && strcmp(env, "generic") == 0;

    atomic_store(&active, !generic && crc32c_have_sse42() ? crc32c_sse42 : crc32c_generic);
}

static crc_fn get(void)
{
    crc_fn f = atomic_load_explicit(&active, memory_order_acquire);

    if (f)
        return f;
    pthread_once(&choose_once, choose);
    return atomic_load_explicit(&active, memory_order_acquire);
}

uint32_t crc32c(uint32_t crc, const void *p, size_t n)
{
    return get()(crc, p, n);
}

const char *crc32c_impl_name(void)
{
    return get() == crc32c_sse42 ? "sse4.2" : "generic";
}
