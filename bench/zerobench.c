/* zerobench: buffer_is_zero throughput on all-zero buffers (the worst case,
 * a full scan), per variant, beside a ceiling: a plain unrolled OR-reduction
 * over the same bytes with no early exit, compiled for the best ISA this CPU
 * has.  The ceiling at 64 MiB is the machine's plain read bandwidth.
 *
 * Usage: bench/zerobench [--quick] [--best]
 * Every figure is the median of many short timings (--best: the fastest
 * one, what the machine can do when nothing else runs); the columns of one
 * row are timed in turn within each round, so that a noisy neighbour hits
 * them alike, and each ratio is the median of the per-round ratios.
 */
#include "zerodetect/zerodetect.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define ZB_X86 1
#endif

/* ---- ceilings: no early exit, 4 accumulators, unaligned loads ---- */

static size_t scalar_or(const unsigned char *p, size_t len)
{
    unsigned char acc = 0;
    for (size_t i = 0; i < len; i++)
        acc |= p[i];
    return acc;
}

__attribute__((noinline))
static bool ceiling_generic(const void *buf, size_t len)
{
    const unsigned char *p = buf;
    uint64_t a0 = 0, a1 = 0, a2 = 0, a3 = 0, w[4];
    size_t i = 0;
    for (; i + 32 <= len; i += 32) {
        memcpy(w, p + i, 32);
        a0 |= w[0]; a1 |= w[1]; a2 |= w[2]; a3 |= w[3];
    }
    return ((a0 | a1 | a2 | a3) | scalar_or(p + i, len - i)) == 0;
}

#ifdef ZB_X86
__attribute__((noinline, target("sse2")))
static bool ceiling_sse2(const void *buf, size_t len)
{
    const unsigned char *p = buf;
    __m128i a0 = _mm_setzero_si128(), a1 = a0, a2 = a0, a3 = a0;
    size_t i = 0;
    for (; i + 64 <= len; i += 64) {
        a0 = _mm_or_si128(a0, _mm_loadu_si128((const __m128i *)(const void *)(p + i)));
        a1 = _mm_or_si128(a1, _mm_loadu_si128((const __m128i *)(const void *)(p + i + 16)));
        a2 = _mm_or_si128(a2, _mm_loadu_si128((const __m128i *)(const void *)(p + i + 32)));
        a3 = _mm_or_si128(a3, _mm_loadu_si128((const __m128i *)(const void *)(p + i + 48)));
    }
    __m128i v = _mm_or_si128(_mm_or_si128(a0, a1), _mm_or_si128(a2, a3));
    return _mm_movemask_epi8(_mm_cmpeq_epi8(v, _mm_setzero_si128())) == 0xffff &&
           scalar_or(p + i, len - i) == 0;
}

__attribute__((noinline, target("avx2")))
static bool ceiling_avx2(const void *buf, size_t len)
{
    const unsigned char *p = buf, *stop = p + len / 256 * 256;
    __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
    for (; p < stop; p += 256) {
        a0 = _mm256_or_si256(a0, _mm256_or_si256(_mm256_loadu_si256((const __m256i *)(const void *)p),
                                                  _mm256_loadu_si256((const __m256i *)(const void *)(p + 128))));
        a1 = _mm256_or_si256(a1, _mm256_or_si256(_mm256_loadu_si256((const __m256i *)(const void *)(p + 32)),
                                                  _mm256_loadu_si256((const __m256i *)(const void *)(p + 160))));
        a2 = _mm256_or_si256(a2, _mm256_or_si256(_mm256_loadu_si256((const __m256i *)(const void *)(p + 64)),
                                                  _mm256_loadu_si256((const __m256i *)(const void *)(p + 192))));
        a3 = _mm256_or_si256(a3, _mm256_or_si256(_mm256_loadu_si256((const __m256i *)(const void *)(p + 96)),
                                                  _mm256_loadu_si256((const __m256i *)(const void *)(p + 224))));
    }
    __m256i v = _mm256_or_si256(_mm256_or_si256(a0, a1), _mm256_or_si256(a2, a3));
    return _mm256_testz_si256(v, v) && scalar_or(stop, len % 256) == 0;
}

__attribute__((noinline, target("avx2,avx512f,avx512bw")))
static bool ceiling_avx512bw(const void *buf, size_t len)
{
    const unsigned char *p = buf;
    __m512i a0 = _mm512_setzero_si512(), a1 = a0, a2 = a0, a3 = a0;
    size_t i = 0;
    for (; i + 256 <= len; i += 256) {
        a0 = _mm512_or_si512(a0, _mm512_loadu_si512((const void *)(p + i)));
        a1 = _mm512_or_si512(a1, _mm512_loadu_si512((const void *)(p + i + 64)));
        a2 = _mm512_or_si512(a2, _mm512_loadu_si512((const void *)(p + i + 128)));
        a3 = _mm512_or_si512(a3, _mm512_loadu_si512((const void *)(p + i + 192)));
    }
    __m512i v = _mm512_or_si512(_mm512_or_si512(a0, a1), _mm512_or_si512(a2, a3));
    return _mm512_test_epi64_mask(v, v) == 0 && scalar_or(p + i, len - i) == 0;
}
#endif

/* buffer_is_zero as callers get it: inline pre-checks, then the dispatch. */
__attribute__((noinline))
static bool dispatched(const void *buf, size_t len)
{
    return buffer_is_zero(buf, len);
}

/* ---- timing ---- */

#define MAX_COLS 8
#define MAX_ROUNDS 31

struct column {
    const char *name;
    zd_fn fn;
    double samples[MAX_ROUNDS]; /* GB/s, one per round */
};

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static volatile int sink;

/* Seconds for `reps` calls; the call goes through a volatile pointer so the
 * compiler can neither inline it nor hoist it out of the loop. */
static double time_calls(zd_fn fn, const void *buf, size_t len, long reps)
{
    zd_fn volatile f = fn;
    int bad = 0;
    double t0 = now();
    for (long r = 0; r < reps; r++)
        bad += !f(buf, len);
    double t = now() - t0;
    sink += bad;
    if (bad) {
        fprintf(stderr, "zerobench: a zero buffer was reported non-zero\n");
        exit(1);
    }
    return t;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static bool best_of; /* --best */

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* GB/s samples: the median, or with --best the highest */
static double summary(double *v, int n)
{
    double m = median(v, n);
    return best_of ? v[n - 1] : m;
}

/* GB/s (1e9 bytes/s) of each column on len bytes at buf, and its ratio to
 * the ceiling: both are medians over `rounds` rounds, and a round times
 * every column once, back to back, so each ratio compares timings taken
 * under the same conditions (the machine is shared and noisy). */
static void run_row(struct column *cols, int ncols, const unsigned char *buf,
                    size_t len, int rounds, double secs, double *gbps, double *ratio)
{
    /* calibrate on the ceiling (column 0): enough calls for `secs` */
    long reps = 1;
    while (reps < (1L << 40) && time_calls(cols[0].fn, buf, len, reps) < secs / 2)
        reps *= 2;
    reps *= 2;
    double ratios[MAX_COLS][MAX_ROUNDS];
    for (int k = 0; k < rounds; k++) {
        for (int c = 0; c < ncols; c++)
            cols[c].samples[k] = (double)len * reps / time_calls(cols[c].fn, buf, len, reps) / 1e9;
        for (int c = 0; c < ncols; c++)
            ratios[c][k] = cols[c].samples[k] / cols[0].samples[k];
    }
    for (int c = 0; c < ncols; c++) {
        gbps[c] = summary(cols[c].samples, rounds);
        ratio[c] = best_of ? gbps[c] / gbps[0] : median(ratios[c], rounds);
    }
}

/* ---- zd_scan_runs on a 1 MiB chunk, against the straightforward scanner:
 * one buffer_is_zero call per granule ---- */

static size_t naive_scan(const uint8_t *buf, size_t len, uint64_t base, size_t granule,
                         size_t min_zero, struct zd_run *runs)
{
    size_t n = 0, pos = 0, data_start = 0;
    while (pos < len) {
        size_t g = granule - (size_t)((base + pos) & (granule - 1));
        g = g < len - pos ? g : len - pos;
        if (!buffer_is_zero(buf + pos, g)) {
            pos += g;
            continue;
        }
        size_t zs = pos;
        for (pos += g; pos < len; pos += g) {
            g = granule < len - pos ? granule : len - pos;
            if (!buffer_is_zero(buf + pos, g))
                break;
        }
        if (pos - zs < min_zero)
            continue;
        if (zs > data_start)
            runs[n++] = (struct zd_run){ (uint32_t)data_start, (uint32_t)(zs - data_start), false };
        runs[n++] = (struct zd_run){ (uint32_t)zs, (uint32_t)(pos - zs), true };
        data_start = pos;
    }
    if (data_start < len)
        runs[n++] = (struct zd_run){ (uint32_t)data_start, (uint32_t)(len - data_start), false };
    return n;
}

typedef size_t (*scan_fn)(const uint8_t *, size_t, uint64_t, size_t, size_t, struct zd_run *);

static double time_scan(scan_fn f, const uint8_t *buf, size_t len, size_t granule,
                        struct zd_run *runs, long reps, size_t *nruns)
{
    scan_fn volatile fv = f;
    double t0 = now();
    for (long r = 0; r < reps; r++)
        *nruns = fv(buf, len, 0, granule, granule, runs);
    return now() - t0;
}

static void bench_scan(bool quick)
{
    const size_t len = 1 << 20;
    uint8_t *buf = aligned_alloc(4096, len);
    struct zd_run *runs = malloc((len / 512 + 2) * sizeof *runs);
    static const char *patterns[] = { "all zero", "all data", "64K zero/64K data",
                                      "4K zero/4K data", "2K zero/2K data" };
    static const size_t granules[] = { 4096, 512 };
    int rounds = quick ? 7 : 21;

    printf("\nzd_scan_runs on a 1 MiB chunk (min_zero = granule), GB/s, %s of %d rounds;\n"
           "naive = one buffer_is_zero call per granule\n", best_of ? "best" : "median", rounds);
    printf("%-20s %7s %9s %9s %7s %6s\n", "content", "granule", "scan", "naive", "ratio", "runs");
    for (size_t pi = 0; pi < sizeof patterns / sizeof patterns[0]; pi++) {
        uint64_t x = 88172645463325252ull;
        for (size_t i = 0; i < len; i++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            uint8_t v = (uint8_t)(x | 1);
            bool zero = pi == 0 || (pi == 2 && (i >> 16) % 2 == 0) ||
                        (pi == 3 && (i >> 12) % 2 == 0) || (pi == 4 && i % 4096 < 2048);
            buf[i] = zero ? 0 : v;
        }
        for (size_t gi = 0; gi < sizeof granules / sizeof granules[0]; gi++) {
            size_t g = granules[gi], n1 = 0, n2 = 0;
            long reps = 1;
            while (reps < (1L << 30) && time_scan(zd_scan_runs, buf, len, g, runs, reps, &n1) < 0.002)
                reps *= 2;
            double a[MAX_ROUNDS], b[MAX_ROUNDS], r[MAX_ROUNDS];
            for (int k = 0; k < rounds; k++) {
                a[k] = (double)len * reps / time_scan(zd_scan_runs, buf, len, g, runs, reps, &n1) / 1e9;
                b[k] = (double)len * reps / time_scan(naive_scan, buf, len, g, runs, reps, &n2) / 1e9;
                r[k] = a[k] / b[k];
            }
            if (n1 != n2) {
                fprintf(stderr, "zerobench: scanners disagree (%zu vs %zu runs)\n", n1, n2);
                exit(1);
            }
            double sa = summary(a, rounds), sb = summary(b, rounds);
            printf("%-20s %7zu %9.1f %9.1f %6.2fx %6zu\n", patterns[pi], g, sa, sb,
                   best_of ? sa / sb : median(r, rounds), n1);
        }
    }
    free(runs);
    free(buf);
}

int main(int argc, char **argv)
{
    bool quick = false;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--quick") == 0) {
            quick = true;
        } else if (strcmp(argv[i], "--best") == 0) {
            best_of = true;
        } else {
            fprintf(stderr, "usage: %s [--quick] [--best]\n", argv[0]);
            return 2;
        }
    }
    int rounds = quick ? 7 : 31;
    double secs = quick ? 0.0005 : 0.001; /* per timing */

    const char *names[8];
    zd_fn fns[8];
    bool usable[8];
    size_t n = zd_impls(names, fns, usable, 8);

    /* the ceiling for the best ISA the library finds usable */
    struct column cols[MAX_COLS];
    int ncols = 0;
    const char *ceil_isa = "generic";
    cols[ncols++] = (struct column){ .name = "ceiling", .fn = ceiling_generic };
#ifdef ZB_X86
    for (size_t i = 0; i < n; i++) {
        if (!usable[i])
            continue;
        zd_fn f = strcmp(names[i], "avx512bw") == 0 ? ceiling_avx512bw
                : strcmp(names[i], "avx2") == 0 ? ceiling_avx2
                : strcmp(names[i], "sse2") == 0 ? ceiling_sse2 : NULL;
        if (f) {
            cols[0].fn = f;
            ceil_isa = names[i];
            break;
        }
    }
#endif
    for (size_t i = 0; i < n && ncols < MAX_COLS - 1; i++)
        if (usable[i])
            cols[ncols++] = (struct column){ .name = names[i], .fn = fns[i] };
    cols[ncols++] = (struct column){ .name = "dispatch", .fn = dispatched };

    printf("zerobench: buffer_is_zero on all-zero buffers, GB/s (1e9 B/s), %s of %d rounds%s\n",
           best_of ? "best" : "median", rounds, quick ? " (--quick)" : "");
    printf("ceiling: plain unrolled OR-reduction, no early exit, %s;\n"
           "%% = variant / ceiling: %s\n",
           ceil_isa, best_of ? "best against best" : "median of the per-round ratios");
    printf("dispatch: buffer_is_zero() as callers get it (byte pre-checks + %s)\n", zd_impl_name());
    for (size_t i = 0; i < n; i++)
        if (!usable[i])
            printf("not usable on this CPU (compiled in, never selected): %s\n", names[i]);

    static const struct { size_t len; int align; } rows[] = {
        { 512, 0 }, { 512, 1 }, { 512, 31 }, { 512, 63 },
        { 4096, 0 }, { 4096, 1 }, { 4096, 31 }, { 4096, 63 },
        { 65536, 0 }, { 65536, 1 }, { 65536, 31 }, { 65536, 63 },
        { 1 << 20, 0 }, { 1 << 20, 1 }, { 1 << 20, 31 }, { 1 << 20, 63 },
        { 64 << 20, 0 }, { 64 << 20, 1 },
    };
    size_t maxlen = 64 << 20;
    unsigned char *mem = aligned_alloc(4096, maxlen + 4096);
    if (!mem) {
        fprintf(stderr, "zerobench: out of memory\n");
        return 1;
    }
    /* written, so that real pages back it (reading never-written anonymous
     * memory would read the kernel's single shared zero page) */
    memset(mem, 0, maxlen + 4096);

    printf("\n%9s %5s %9s", "size", "align", "ceiling");
    for (int c = 1; c < ncols; c++)
        printf(" %15s", cols[c].name);
    printf("\n");
    double read_bw = 0;
    for (size_t r = 0; r < sizeof rows / sizeof rows[0]; r++) {
        double gbps[MAX_COLS], ratio[MAX_COLS];
        size_t len = rows[r].len;
        run_row(cols, ncols, mem + rows[r].align, len, rounds, secs, gbps, ratio);
        if (len == maxlen && rows[r].align == 0)
            read_bw = gbps[0];
        char size[16];
        if (len >= (1 << 20))
            snprintf(size, sizeof size, "%zuM", len >> 20);
        else if (len >= 1024)
            snprintf(size, sizeof size, "%zuK", len >> 10);
        else
            snprintf(size, sizeof size, "%zu", len);
        printf("%9s %5d %9.1f", size, rows[r].align, gbps[0]);
        for (int c = 1; c < ncols; c++)
            printf(" %8.1f (%3.0f%%)", gbps[c], 100 * ratio[c]);
        printf("\n");
        fflush(stdout);
    }
    printf("\nplain read bandwidth (ceiling at 64M, DRAM): %.1f GB/s\n", read_bw);
    free(mem);
    bench_scan(quick);
    return 0;
}
