/* The zero-check template (src/zerodetect/zd_template.h) instantiated with
 * emulated vectors in plain C, so that its geometry is tested for every
 * vector width and block size the real variants use, including the
 * AVX-512BW one (64-byte vectors, 4 per block) that this machine may not
 * be able to execute.  Aligned loads check their alignment (a real aligned
 * AVX-512 load faults on a misaligned address; folded AVX2 loads would not
 * tell), every load checks it stays inside the buffer under test, and the
 * buffers sit against guard pages.
 */
#include "zerodetect/zerodetect.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define PAGE 4096u

/* Under ASan (about 20 times slower here, and these loads check their own
 * bounds anyway) the sweeps visit 7 times fewer alignments. */
#if defined(__SANITIZE_ADDRESS__)
#define ALIGN_STEP 7
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define ALIGN_STEP 7
#endif
#endif
#ifndef ALIGN_STEP
#define ALIGN_STEP 1
#endif

static unsigned failures;
static const unsigned char *lo_bound, *hi_bound; /* the buffer under test */

static void fail_load(const char *what, const void *p, size_t n)
{
    fprintf(stderr, "FAIL: %s load of %zu bytes at offset %td (buffer length %td)\n", what, n,
            (const unsigned char *)p - lo_bound, hi_bound - lo_bound);
    exit(1);
}

static inline void load_bytes(void *dst, const unsigned char *p, size_t n, size_t align)
{
    if (p < lo_bound || p + n > hi_bound)
        fail_load("out-of-buffer", p, n);
    if (align && ((uintptr_t)p & (align - 1)))
        fail_load("misaligned aligned", p, n);
    memcpy(dst, p, n);
}

static inline bool small_ref(const unsigned char *p, size_t len)
{
    uint64_t a = 0, b = 0;
    if (len >= 32) {
        unsigned char x[32], y[32];
        load_bytes(x, p, 32, 0);
        load_bytes(y, p + len - 32, 32, 0);
        for (int i = 0; i < 32; i++)
            a |= (uint64_t)(x[i] | y[i]);
        return a == 0;
    }
    for (size_t w = 16; w >= 1; w /= 2) {
        if (len >= w) {
            unsigned char x[16], y[16];
            load_bytes(x, p, w, 0);
            load_bytes(y, p + len - w, w, 0);
            for (size_t i = 0; i < w; i++)
                a |= x[i], b |= y[i];
            return (a | b) == 0;
        }
    }
    return true; /* len 0 */
}

/* one emulated vector type per width */
#define EMU_VEC(W)                                                               \
    typedef struct { uint64_t w[W / 8]; } emu##W;                                \
    static inline emu##W emu##W##_load(const unsigned char *p, size_t align)      \
    {                                                                            \
        emu##W v;                                                                \
        load_bytes(&v, p, W, align);                                             \
        return v;                                                                \
    }                                                                            \
    static inline emu##W emu##W##_or(emu##W a, emu##W b)                          \
    {                                                                            \
        for (int i = 0; i < W / 8; i++)                                          \
            a.w[i] |= b.w[i];                                                    \
        return a;                                                                \
    }                                                                            \
    static inline bool emu##W##_zero(emu##W v)                                    \
    {                                                                            \
        uint64_t a = 0;                                                          \
        for (int i = 0; i < W / 8; i++)                                          \
            a |= v.w[i];                                                         \
        return a == 0;                                                           \
    }
EMU_VEC(16)
EMU_VEC(32)
EMU_VEC(64)

/* ---- W=64, 4 per block: the AVX-512BW geometry ---- */
#define ZD_SUFFIX emu64x4
#define ZD_TARGET
#define zd_vec emu64
#define ZD_W 64
#define ZD_LOADU(p) emu64_load(p, 0)
#define ZD_LOADA(p) emu64_load(p, 64)
#define ZD_OR(a, b) emu64_or(a, b)
#define ZD_ISZERO(v) emu64_zero(v)
#define ZD_SMALL(p, len) small_ref(p, len)
#define ZD_BLOCK 4
#include "zerodetect/zd_template.h"
#undef ZD_SUFFIX
#undef zd_vec
#undef ZD_W
#undef ZD_LOADU
#undef ZD_LOADA
#undef ZD_OR
#undef ZD_ISZERO
#undef ZD_BLOCK

/* ---- W=32, 8 per block: the AVX2 geometry ---- */
#define ZD_SUFFIX emu32x8
#define zd_vec emu32
#define ZD_W 32
#define ZD_LOADU(p) emu32_load(p, 0)
#define ZD_LOADA(p) emu32_load(p, 32)
#define ZD_OR(a, b) emu32_or(a, b)
#define ZD_ISZERO(v) emu32_zero(v)
#define ZD_BLOCK 8
#include "zerodetect/zd_template.h"
#undef ZD_SUFFIX
#undef zd_vec
#undef ZD_W
#undef ZD_LOADU
#undef ZD_LOADA
#undef ZD_OR
#undef ZD_ISZERO
#undef ZD_BLOCK

/* ---- W=16, 8 per block: the SSE2 geometry ---- */
#define ZD_SUFFIX emu16x8
#define zd_vec emu16
#define ZD_W 16
#define ZD_LOADU(p) emu16_load(p, 0)
#define ZD_LOADA(p) emu16_load(p, 16)
#define ZD_OR(a, b) emu16_or(a, b)
#define ZD_ISZERO(v) emu16_zero(v)
#define ZD_BLOCK 8
#include "zerodetect/zd_template.h"

static const struct {
    const char *name;
    bool (*is_zero)(const void *, size_t);
    size_t (*prefix)(const void *, size_t);
} variants[] = {
    { "emu64x4", is_zero_emu64x4, zero_prefix_emu64x4 },
    { "emu32x8", is_zero_emu32x8, zero_prefix_emu32x8 },
    { "emu16x8", is_zero_emu16x8, zero_prefix_emu16x8 },
};
#define NVAR (sizeof variants / sizeof variants[0])

static void check(unsigned char *p, size_t len, size_t first)
{
    lo_bound = p;
    hi_bound = p + len;
    for (size_t v = 0; v < NVAR; v++) {
        bool z = variants[v].is_zero(p, len);
        size_t n = variants[v].prefix(p, len);
        bool ok_prefix = first == len ? n == len : n <= first && first < n + ZD_PREFIX_SLACK;
        if (z != (first == len) || !ok_prefix) {
            if (++failures <= 30)
                fprintf(stderr, "FAIL: %s len %zu align %u first non-zero %zu: is_zero %d, prefix %zu\n",
                        variants[v].name, len, (unsigned)((uintptr_t)p & 127), first, z, n);
        }
    }
}

int main(void)
{
    /* guard pages both sides of a 3-page area */
    unsigned char *map = mmap(NULL, 5 * PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (map == MAP_FAILED || mprotect(map, PAGE, PROT_NONE) || mprotect(map + 4 * PAGE, PAGE, PROT_NONE)) {
        perror("mmap");
        return 1;
    }
    unsigned char *lo = map + PAGE, *hi = map + 4 * PAGE;
    memset(lo, 0, 3 * PAGE);

    /* every length 0..700 (every length 701..2100 in steps of 7) at every
     * alignment 0..63 (in steps of 3) against either guard: all zero, and
     * one non-zero byte at the buffer's ends, around every 64-byte address
     * boundary and every 37th byte */
    for (size_t len = 0; len <= 2100; len += len < 700 ? 1 : 7) {
        for (unsigned align = 0; align < 64; align += (len <= 700 ? 1 : 3) * ALIGN_STEP) {
            unsigned char *p = (len + align) & 1 ? hi - len - align : lo + align;
            check(p, len, len);
            for (size_t i = 0; i < len; i++) {
                unsigned edge = (unsigned)((uintptr_t)(p + i) & 63);
                if (!(i < 8 || len - i <= 8 || edge < 2 || edge > 61 || i % 37 == 0))
                    continue;
                p[i] = 1;
                check(p, len, i);
                p[i] = 0;
            }
        }
    }
    /* every position, lengths up to a few blocks of 64-byte vectors */
    for (size_t len = 0; len <= 1300; len += 1 + len / 100) {
        for (unsigned align = 0; align < 64; align += 9 * ALIGN_STEP) {
            unsigned char *p = lo + align;
            for (size_t i = 0; i < len; i++) {
                p[i] = 0x80;
                check(p, len, i);
                p[i] = 0;
            }
        }
    }
    /* the largest the area allows, against each guard */
    for (size_t cut = 0; cut < 130; cut++) {
        size_t len = 3 * PAGE - cut;
        check(lo, len, len);
        check(hi - len, len, len);
        lo[len - 1] = 3;
        check(lo, len, len - 1);
        lo[len - 1] = 0;
    }
    munmap(map, 5 * PAGE);
    if (failures) {
        printf("%u failure(s)\n", failures);
        return 1;
    }
    printf("template geometry ok for %zu emulated variants (incl. 64-byte vectors, 4 per block)\n", NVAR);
    return 0;
}
