/* zerodetect: every variant this CPU runs, against byte-loop references.
 *
 * - buffer_is_zero variants: all lengths 0..4096 at all start alignments
 *   0..63, plus large lengths; all-zero buffers and single non-zero bytes;
 *   buffers placed against an unmapped guard page at their end and at their
 *   start, so any over-read or under-read faults (under ASan the bytes around
 *   a buffer inside the mapping are poisoned too).
 * - zd_zero_prefix per variant, zd_force_impl, DISKIMG_ZERO_IMPL (by
 *   re-executing this binary), thread-safe first use; the CPUID+XGETBV
 *   decision with made-up register values and against the compiler's own.
 * - zd_scan_runs: edge cases derived by hand, then a random differential test
 *   against a simple reference, for every variant, with the runs array
 *   sized exactly as documented and placed against a guard page.
 */
#include "zerodetect/zerodetect.h"
#include "zerodetect/zd_internal.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#if defined(__SANITIZE_ADDRESS__)
#define HAVE_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define HAVE_ASAN 1
#endif
#endif
#ifdef HAVE_ASAN
#include <sanitizer/asan_interface.h>
#define POISON(p, n) ASAN_POISON_MEMORY_REGION(p, n)
#define UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION(p, n)
#else
#define POISON(p, n) ((void)(p), (void)(n))
#define UNPOISON(p, n) ((void)(p), (void)(n))
#endif

#define PAGE 4096u

static unsigned failures;

__attribute__((format(printf, 1, 2)))
static void failf(const char *fmt, ...)
{
    if (++failures > 30)
        return;
    va_list ap;
    va_start(ap, fmt);
    fputs("FAIL: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint64_t rnd(void)
{
    uint64_t x = rng_state;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    rng_state = x;
    return x * 0x2545f4914f6cdd1dull;
}

static size_t rnd_below(size_t n)
{
    return n ? (size_t)(rnd() % n) : 0;
}

static bool ref_is_zero(const unsigned char *p, size_t len)
{
    for (size_t i = 0; i < len; i++)
        if (p[i])
            return false;
    return true;
}

/* ---- guarded memory: [lo, hi) is usable, the page before lo and the page
 * at hi are PROT_NONE ---- */
struct guarded {
    unsigned char *map, *lo, *hi;
    size_t maplen;
};

static struct guarded guarded_alloc(size_t len)
{
    struct guarded g;
    size_t usable = (len + PAGE - 1) / PAGE * PAGE;
    g.maplen = usable + 2 * PAGE;
    g.map = mmap(NULL, g.maplen, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (g.map == MAP_FAILED) {
        perror("mmap");
        exit(1);
    }
    if (mprotect(g.map, PAGE, PROT_NONE) || mprotect(g.map + PAGE + usable, PAGE, PROT_NONE)) {
        perror("mprotect");
        exit(1);
    }
    g.lo = g.map + PAGE;
    g.hi = g.lo + usable;
    POISON(g.lo, usable);
    return g;
}

static void guarded_free(struct guarded *g)
{
    UNPOISON(g->lo, (size_t)(g->hi - g->lo));
    munmap(g->map, g->maplen);
}

/* Only [p, p+len) addressable for ASan; the rest of the area poisoned. */
static void expose(struct guarded *g, unsigned char *p, size_t len)
{
    POISON(g->lo, (size_t)(g->hi - g->lo));
    UNPOISON(p, len);
}

/* ---- the variants under test ---- */
#define MAX_IMPLS 8
static const char *impl_names[MAX_IMPLS + 1];
static zd_fn impl_fns[MAX_IMPLS + 1];
static size_t nimpl;          /* usable variants, then "buffer_is_zero" */
static const char *all_names[MAX_IMPLS];
static bool all_usable[MAX_IMPLS];
static size_t nall;

static bool via_buffer_is_zero(const void *buf, size_t len)
{
    return buffer_is_zero(buf, len);
}

static void load_impls(void)
{
    zd_fn fns[MAX_IMPLS];
    nall = zd_impls(all_names, fns, all_usable, MAX_IMPLS);
    for (size_t i = 0; i < nall; i++) {
        if (all_usable[i]) {
            impl_names[nimpl] = all_names[i];
            impl_fns[nimpl++] = fns[i];
        } else {
            printf("variant %s: compiled in, not usable on this CPU (not tested)\n", all_names[i]);
        }
    }
    /* the public entry point, with its inline pre-checks */
    impl_names[nimpl] = "buffer_is_zero";
    impl_fns[nimpl++] = via_buffer_is_zero;
}

static const char *best_impl(void)
{
    for (size_t i = 0; i < nall; i++)
        if (all_usable[i])
            return all_names[i];
    return "?";
}

/* One check of every variant on [p, p+len) against the reference. */
static void check_all(const unsigned char *p, size_t len, bool expect, const char *what, size_t pos)
{
    for (size_t k = 0; k < nimpl; k++) {
        bool got = impl_fns[k](p, len);
        if (got != expect)
            failf("%s: %s len %zu align %u pos %zu: got %d, expected %d", impl_names[k], what,
                  len, (unsigned)((uintptr_t)p & 63), pos, got, expect);
    }
}

/* Every length 0..4096 at every alignment 0..63: all zero, then a non-zero
 * byte at the first, second, middle, last-but-one, last and two random
 * positions, each checked against the reference. */
static void test_lengths_alignments(void)
{
    struct guarded g = guarded_alloc(2 * PAGE);
    for (size_t len = 0; len <= 4096; len++) {
        for (unsigned align = 0; align < 64; align++) {
            unsigned char *p = g.lo + align;
            expose(&g, p, len);
            memset(p, 0, len);
            check_all(p, len, ref_is_zero(p, len), "all-zero", 0);
            if (len == 0)
                continue;
            size_t pos[7] = { 0, 1 % len, len / 2, len - 1, len >= 2 ? len - 2 : 0,
                              rnd_below(len), rnd_below(len) };
            for (int i = 0; i < 7; i++) {
                p[pos[i]] = (unsigned char)(1u << (rnd() & 7));
                check_all(p, len, false, "one byte", pos[i]);
                p[pos[i]] = 0;
            }
        }
    }
    guarded_free(&g);
}

/* Next position for the every-position sweep.  Under ASan (several times
 * slower) lengths above 1024 get their first and last 256 positions and
 * every 7th in between; otherwise every position of every length. */
#ifdef HAVE_ASAN
#define EXHAUSTIVE_MAX 1024
#else
#define EXHAUSTIVE_MAX 4096
#endif
static size_t next_pos(size_t i, size_t len)
{
    if (len <= EXHAUSTIVE_MAX || i < 256 || i + 257 >= len)
        return i + 1;
    return i + 7 < len - 256 ? i + 7 : len - 256;
}

/* A single non-zero byte at every position of every length 0..4096, with
 * the buffer's end against the guard page (its start alignment then runs
 * through every value as the length changes), and again with its start
 * against the guard page. */
static void test_every_position_guarded(void)
{
    struct guarded g = guarded_alloc(PAGE);
    for (int side = 0; side < 2; side++) {
        for (size_t len = 0; len <= 4096; len++) {
            unsigned char *p = side == 0 ? g.hi - len : g.lo;
            expose(&g, p, len);
            memset(p, 0, len);
            check_all(p, len, ref_is_zero(p, len), side ? "start-guard zero" : "end-guard zero", 0);
            for (size_t i = 0; i < len; i = next_pos(i, len)) {
                p[i] = 0x80;
                check_all(p, len, false, side ? "start-guard byte" : "end-guard byte", i);
                p[i] = 0;
            }
        }
    }
    guarded_free(&g);
}

/* Large lengths, against both guards and at alignments 0, 1, 31, 63. */
static void test_large(void)
{
    static const size_t lens[] = { 65536 + 37, 1 << 20, (4 << 20) + 13 };
    for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++) {
        size_t len = lens[li];
        struct guarded g = guarded_alloc(len + 64);
        unsigned char *starts[6] = { g.lo, g.lo + 1, g.lo + 31, g.lo + 63, g.hi - len, g.hi - len - 1 };
        for (int s = 0; s < 6; s++) {
            unsigned char *p = starts[s];
            expose(&g, p, len);
            memset(p, 0, len);
            check_all(p, len, ref_is_zero(p, len), "large zero", 0);
            size_t pos[24] = { 0, 1, 31, 32, 63, 64, 127, 128, 4095, 4096, len / 2 - 1, len / 2,
                               len / 2 + 1, len - 129, len - 128, len - 65, len - 64, len - 33,
                               len - 2, len - 1 };
            for (int i = 20; i < 24; i++)
                pos[i] = rnd_below(len);
            for (int i = 0; i < 24; i++) {
                p[pos[i]] = 1;
                check_all(p, len, false, "large byte", pos[i]);
                p[pos[i]] = 0;
            }
        }
        /* every position of the first and last 1024 bytes of an odd length */
        if (li == 0) {
            unsigned char *p = g.hi - len;
            expose(&g, p, len);
            memset(p, 0, len);
            for (size_t i = 0; i < len; i = (i == 1023 ? len - 1024 : i + 1)) {
                p[i] = 4;
                check_all(p, len, false, "large edge byte", i);
                p[i] = 0;
            }
        }
        guarded_free(&g);
    }
}

/* Random content (sparse non-zero bytes, any length up to 20000, any
 * alignment) against the reference. */
static void test_random(void)
{
    struct guarded g = guarded_alloc(20000 + 64);
    for (int iter = 0; iter < 20000; iter++) {
        size_t len = rnd_below(iter % 4 ? 600 : 20000);
        unsigned char *p = g.hi - len - rnd_below(64);
        expose(&g, p, len);
        memset(p, 0, len);
        size_t nz = rnd_below(4);
        for (size_t k = 0; k < nz && len; k++)
            p[rnd_below(len)] = (unsigned char)rnd();
        check_all(p, len, ref_is_zero(p, len), "random", 0);
    }
    guarded_free(&g);
}

/* ---- zd_zero_prefix, per variant through zd_force_impl ---- */

/* `first`: where the buffer's first non-zero byte is, or len. */
static void check_prefix(const unsigned char *p, size_t len, size_t first, const char *name)
{
    size_t n = zd_zero_prefix(p, len);
    /* n <= first non-zero byte (or len), and that byte is within the slack */
    if (n > first || (first < len && first >= n + ZD_PREFIX_SLACK) || (first == len && n != len))
        failf("%s: zd_zero_prefix len %zu align %u: got %zu, first non-zero at %zu", name, len,
              (unsigned)((uintptr_t)p & 63), n, first);
}

static void test_zero_prefix(void)
{
    struct guarded g = guarded_alloc(3 * PAGE);
    for (size_t k = 0; k + 1 < nimpl; k++) {
        if (zd_force_impl(impl_names[k]) != 0)
            failf("zd_force_impl(%s) failed", impl_names[k]);
        for (size_t len = 0; len <= 1100; len++) {
            for (unsigned align = 0; align < 64; align += (len < 300 ? 1 : 7)) {
                unsigned char *p = (len & 1) ? g.hi - len - align : g.lo + align;
                expose(&g, p, len);
                memset(p, 0, len);
                check_prefix(p, len, ref_is_zero(p, len) ? len : 0, impl_names[k]);
                for (size_t i = 0; i < len; i += (len < 300 ? 1 : 1 + rnd_below(13))) {
                    p[i] = 2;
                    check_prefix(p, len, i, impl_names[k]);
                    if (i + 1 < len && (rnd() & 1)) { /* a second one later must not matter */
                        size_t j = i + 1 + rnd_below(len - i - 1);
                        p[j] = 1;
                        check_prefix(p, len, i, impl_names[k]);
                        p[j] = 0;
                    }
                    p[i] = 0;
                }
            }
        }
        /* a long zero stretch ending at every offset of a few blocks */
        size_t len = 3 * PAGE - 5;
        unsigned char *p = g.lo + 5;
        expose(&g, p, len);
        memset(p, 0, len);
        for (size_t i = 2 * PAGE - 300; i < len; i++) {
            p[i] = 9;
            check_prefix(p, len, i, impl_names[k]);
            p[i] = 0;
        }
    }
    zd_force_impl(NULL);
    guarded_free(&g);
}

/* ---- CPU feature decision ---- */

static void test_cpu_decide(void)
{
    const uint32_t sse2 = 1u << 26, osxsave = 1u << 27, avx = 1u << 28;
    const uint32_t avx2 = 1u << 5, avx512f = 1u << 16, avx512bw = 1u << 30;
    static const struct {
        uint32_t ecx, edx, ebx7;
        uint64_t xcr0;
        unsigned want;
    } cases[] = {
        { 0, 0, 0, 0, 0 },
        { 0, sse2, 0, 0, ZD_CPU_SSE2 },
        /* AVX2 needs OSXSAVE, AVX and the OS saving XMM and YMM */
        { osxsave | avx, sse2, avx2, 0x7, ZD_CPU_SSE2 | ZD_CPU_AVX2 },
        { osxsave | avx, sse2, avx2, 0x3, ZD_CPU_SSE2 },
        { osxsave | avx, sse2, avx2, 0x5, ZD_CPU_SSE2 },
        { avx, sse2, avx2, 0x7, ZD_CPU_SSE2 },
        { osxsave, sse2, avx2, 0x7, ZD_CPU_SSE2 },
        /* AVX-512BW needs F and BW, and opmask, ZMM_Hi256, Hi16_ZMM saved */
        { osxsave | avx, sse2, avx2 | avx512f | avx512bw, 0xe7,
          ZD_CPU_SSE2 | ZD_CPU_AVX2 | ZD_CPU_AVX512BW },
        { osxsave | avx, sse2, avx2 | avx512f | avx512bw, 0x7, ZD_CPU_SSE2 | ZD_CPU_AVX2 },
        { osxsave | avx, sse2, avx2 | avx512f | avx512bw, 0xc7, ZD_CPU_SSE2 | ZD_CPU_AVX2 },
        { osxsave | avx, sse2, avx2 | avx512f | avx512bw, 0xa7, ZD_CPU_SSE2 | ZD_CPU_AVX2 },
        { osxsave | avx, sse2, avx2 | avx512f | avx512bw, 0x67, ZD_CPU_SSE2 | ZD_CPU_AVX2 },
        { osxsave | avx, sse2, avx2 | avx512f, 0xe7, ZD_CPU_SSE2 | ZD_CPU_AVX2 },
        { osxsave | avx, sse2, avx2 | avx512bw, 0xe7, ZD_CPU_SSE2 | ZD_CPU_AVX2 },
        { osxsave | avx, sse2, avx2 | avx512f | avx512bw, 0xe3, ZD_CPU_SSE2 },
        /* the AVX-512BW variant also uses AVX2 instructions */
        { osxsave | avx, sse2, avx512f | avx512bw, 0xe7, ZD_CPU_SSE2 },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct zd_cpuid c = { cases[i].ecx, cases[i].edx, cases[i].ebx7, cases[i].xcr0 };
        unsigned got = zd_cpu_decide(&c);
        if (got != cases[i].want)
            failf("zd_cpu_decide case %zu: got 0x%x, want 0x%x", i, got, cases[i].want);
    }
#if defined(__x86_64__) || defined(__i386__)
    /* this machine, against the compiler runtime's own CPUID+XGETBV check */
    unsigned f = zd_cpu_features();
    __builtin_cpu_init();
    bool cc_avx2 = __builtin_cpu_supports("avx2");
    bool cc_avx512bw = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw");
    if (!!(f & ZD_CPU_AVX2) != cc_avx2 || !!(f & ZD_CPU_AVX512BW) != cc_avx512bw ||
        !(f & ZD_CPU_SSE2))
        failf("zd_cpu_features() = 0x%x, compiler runtime says avx2 %d avx512bw %d", f, cc_avx2,
              cc_avx512bw);
#endif
}

/* ---- forcing a variant ---- */

static void test_force(void)
{
    const char *best = best_impl();
    for (size_t i = 0; i < nall; i++) {
        int r = zd_force_impl(all_names[i]);
        const char *now = zd_impl_name();
        if (all_usable[i] ? (r != 0 || strcmp(now, all_names[i]) != 0)
                          : (r != -ENOTSUP || strcmp(now, best) != 0))
            failf("zd_force_impl(%s) = %d, running %s (usable %d, best %s)", all_names[i], r, now,
                  all_usable[i], best);
        /* the forced variant really runs behind buffer_is_zero */
        unsigned char b[300] = { 0 };
        b[200] = 1;
        if (buffer_is_zero(b, sizeof b) || !buffer_is_zero(b, 200))
            failf("buffer_is_zero wrong under %s", now);
    }
    if (zd_force_impl("no-such-impl") != -EINVAL || strcmp(zd_impl_name(), best) != 0)
        failf("zd_force_impl(unknown) should give -EINVAL and the best (%s)", best);
    if (zd_force_impl(NULL) != 0 || strcmp(zd_impl_name(), best) != 0)
        failf("zd_force_impl(NULL) should select the best (%s)", best);
}

/* Child mode: report which variant the first use selects, from several
 * threads at once (the selection must be made once and agree). */
static void *first_use(void *arg)
{
    static const unsigned char zeros[4096];
    bool ok = buffer_is_zero(zeros, sizeof zeros);
    *(const char **)arg = ok ? zd_impl_name() : "wrong-result";
    return NULL;
}

static int child_print_impl(void)
{
    pthread_t th[4];
    const char *names[4];
    for (int i = 0; i < 4; i++)
        if (pthread_create(&th[i], NULL, first_use, &names[i]))
            return 2;
    for (int i = 0; i < 4; i++)
        pthread_join(th[i], NULL);
    for (int i = 1; i < 4; i++)
        if (strcmp(names[i], names[0]) != 0) {
            printf("threads disagree: %s vs %s\n", names[0], names[i]);
            return 1;
        }
    printf("%s\n", names[0]);
    return 0;
}

/* Runs this binary again with DISKIMG_ZERO_IMPL=value (NULL: unset) and
 * returns what it says runs. */
static void run_child(const char *self, const char *value, char *out, size_t outlen)
{
    int fds[2];
    out[0] = 0;
    if (pipe(fds)) {
        perror("pipe");
        exit(1);
    }
    pid_t pid = fork();
    if (pid < 0) {
        perror("fork");
        exit(1);
    }
    if (pid == 0) {
        dup2(fds[1], 1);
        close(fds[0]);
        close(fds[1]);
        if (value)
            setenv("DISKIMG_ZERO_IMPL", value, 1);
        else
            unsetenv("DISKIMG_ZERO_IMPL");
        execl(self, self, "--print-impl", (char *)NULL);
        _exit(127);
    }
    close(fds[1]);
    size_t n = 0;
    ssize_t r;
    while (n + 1 < outlen && (r = read(fds[0], out + n, outlen - 1 - n)) > 0)
        n += (size_t)r;
    out[n] = 0;
    close(fds[0]);
    if (n && out[n - 1] == '\n')
        out[n - 1] = 0;
    int st;
    waitpid(pid, &st, 0);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
        failf("child with DISKIMG_ZERO_IMPL=%s failed (status %d): %s", value ? value : "(unset)",
              st, out);
}

static void test_env(void)
{
    char self[4096], out[256];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0) {
        printf("env test skipped: no /proc/self/exe\n");
        return;
    }
    self[n] = 0;
    const char *best = best_impl();
    for (size_t i = 0; i < nall; i++) {
        run_child(self, all_names[i], out, sizeof out);
        const char *want = all_usable[i] ? all_names[i] : best;
        if (strcmp(out, want) != 0)
            failf("DISKIMG_ZERO_IMPL=%s: running %s, expected %s", all_names[i], out, want);
    }
    static const char *fallbacks[] = { NULL, "", "bogus", "AVX2" };
    for (size_t i = 0; i < sizeof fallbacks / sizeof fallbacks[0]; i++) {
        run_child(self, fallbacks[i], out, sizeof out);
        if (strcmp(out, best) != 0)
            failf("DISKIMG_ZERO_IMPL=%s: running %s, expected the best %s",
                  fallbacks[i] ? fallbacks[i] : "(unset)", out, best);
    }
}

/* ---- zd_scan_runs ---- */

/* The simple reference: granule flags by byte loop, stretches of equal
 * flags, zero stretches shorter than min_zero (or all, if 0) become data,
 * adjacent data stretches merge. */
static size_t ref_scan(const uint8_t *buf, size_t len, uint64_t base, size_t granule,
                       size_t min_zero, struct zd_run *runs)
{
    size_t n = 0, pos = 0;
    while (pos < len) {
        size_t g = granule - (size_t)((base + pos) % granule);
        if (g > len - pos)
            g = len - pos;
        bool zero = ref_is_zero(buf + pos, g);
        if (n > 0 && runs[n - 1].zero == zero)
            runs[n - 1].len += (uint32_t)g;
        else
            runs[n++] = (struct zd_run){ (uint32_t)pos, (uint32_t)g, zero };
        pos += g;
    }
    /* demote short zero stretches, then merge neighbours */
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        struct zd_run r = runs[i];
        if (r.zero && (min_zero == 0 || r.len < min_zero))
            r.zero = false;
        if (m > 0 && !r.zero && !runs[m - 1].zero)
            runs[m - 1].len += r.len;
        else
            runs[m++] = r;
    }
    return m;
}

static void dump_runs(const char *label, const struct zd_run *r, size_t n)
{
    if (failures > 30)
        return;
    fprintf(stderr, "  %s (%zu):", label, n);
    for (size_t i = 0; i < n && i < 12; i++)
        fprintf(stderr, " %c[%u,+%u)", r[i].zero ? 'Z' : 'D', r[i].off, r[i].len);
    fprintf(stderr, n > 12 ? " ...\n" : "\n");
}

/* zd_scan_runs (granule > 0) with its runs array exactly as large as
 * documented, ending at a guard page; compared with the reference runs
 * want[0..m) and with the documented invariants. */
static void check_scan(const uint8_t *buf, size_t len, uint64_t base, size_t granule,
                       size_t min_zero, const struct zd_run *want, size_t m, const char *name)
{
    size_t cap = len / granule + 2;
    size_t bytes = cap * sizeof(struct zd_run);
    struct guarded g = guarded_alloc(bytes);
    struct zd_run *runs = (struct zd_run *)(void *)(g.hi - bytes);
    UNPOISON(runs, bytes);
    size_t n = zd_scan_runs(buf, len, base, granule, min_zero, runs);

    bool bad = n != m || n > cap;
    for (size_t i = 0; !bad && i < n; i++)
        bad = runs[i].off != want[i].off || runs[i].len != want[i].len || runs[i].zero != want[i].zero;
    /* invariants, independently of the reference */
    size_t at = 0;
    for (size_t i = 0; !bad && i < n; i++) {
        bad = runs[i].off != at || runs[i].len == 0 || (i && runs[i].zero == runs[i - 1].zero) ||
              (runs[i].zero && (runs[i].len < min_zero || !ref_is_zero(buf + at, runs[i].len)));
        at += runs[i].len;
    }
    if (!bad && at != len)
        bad = true;
    if (bad) {
        failf("%s: zd_scan_runs len %zu base %llu granule %zu min_zero %zu", name, len,
              (unsigned long long)base, granule, min_zero);
        dump_runs("got", runs, n);
        dump_runs("want", want, m);
    }
    guarded_free(&g);
}

#define EXPECT_RUNS(n, ...)                                      \
    do {                                                         \
        const struct zd_run exp_[] = { __VA_ARGS__ };            \
        size_t ne_ = sizeof exp_ / sizeof exp_[0];               \
        if ((n) != ne_ || memcmp_runs(got_, exp_, ne_)) {        \
            failf("zd_scan_runs edge case at line %d", __LINE__); \
            dump_runs("got", got_, n);                           \
        }                                                        \
    } while (0)

static int memcmp_runs(const struct zd_run *a, const struct zd_run *b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (a[i].off != b[i].off || a[i].len != b[i].len || a[i].zero != b[i].zero)
            return 1;
    return 0;
}

#define D(o, l) { (o), (l), false }
#define Z(o, l) { (o), (l), true }

static void test_scan_edges(void)
{
    const size_t G = 4096;
    uint8_t *b = calloc(1, 16 * G);
    struct zd_run got_[40];
    size_t n;

    n = zd_scan_runs(b, 0, 0, G, G, got_);
    if (n != 0)
        failf("len 0 gives %zu runs", n);
    n = zd_scan_runs(b, 3 * G, 0, G, 0, got_);                 /* min_zero 0: no zero runs */
    EXPECT_RUNS(n, D(0, 3 * G));
    n = zd_scan_runs(b, 3 * G, 0, G, G, got_);                 /* all zero */
    EXPECT_RUNS(n, Z(0, 3 * G));
    n = zd_scan_runs(b, 3 * G, 0, G, 3 * G + 1, got_);         /* shorter than min_zero */
    EXPECT_RUNS(n, D(0, 3 * G));
    n = zd_scan_runs(b, 100, 0, G, 100, got_);                 /* one partial granule */
    EXPECT_RUNS(n, Z(0, 100));
    n = zd_scan_runs(b, 3 * G, 0, 0, G, got_);                 /* granule 0: all data */
    EXPECT_RUNS(n, D(0, 3 * G));

    /* base not aligned: granules [0,3996) [3996,8092) [8092,12188) [12188,12288) */
    uint64_t base = 10 * G + 100;
    b[3996] = 1;
    n = zd_scan_runs(b, 3 * G, base, G, G, got_);             /* partial first zero too short */
    EXPECT_RUNS(n, D(0, 8092), Z(8092, 4196));
    n = zd_scan_runs(b, 3 * G, base, G, 512, got_);           /* now long enough */
    EXPECT_RUNS(n, Z(0, 3996), D(3996, 4096), Z(8092, 4196));
    n = zd_scan_runs(b, 3 * G, base, G, 4097, got_);          /* last two granules: 4196 */
    EXPECT_RUNS(n, D(0, 8092), Z(8092, 4196));
    n = zd_scan_runs(b, 3 * G, base, G, 4197, got_);
    EXPECT_RUNS(n, D(0, 3 * G));
    b[3996] = 0;
    b[12287] = 1;                                              /* last (partial) granule data */
    n = zd_scan_runs(b, 3 * G, base, G, 512, got_);
    EXPECT_RUNS(n, Z(0, 12188), D(12188, 100));
    b[12287] = 0;

    /* data Z Z data Z Z Z with min_zero 3 granules: the short stretch merges */
    b[0] = 1;
    b[3 * G] = 1;
    n = zd_scan_runs(b, 7 * G, 0, G, 3 * G, got_);
    EXPECT_RUNS(n, D(0, 4 * G), Z(4 * G, 3 * G));
    n = zd_scan_runs(b, 7 * G, 0, G, 2 * G, got_);
    EXPECT_RUNS(n, D(0, G), Z(G, 2 * G), D(3 * G, G), Z(4 * G, 3 * G));
    /* a non-zero byte in the very last byte of a long zero stretch */
    b[0] = b[3 * G] = 0;
    b[16 * G - 1] = 7;
    n = zd_scan_runs(b, 16 * G, 0, G, G, got_);
    EXPECT_RUNS(n, Z(0, 15 * G), D(15 * G, G));
    /* granule larger than the buffer, base unaligned */
    n = zd_scan_runs(b, 16 * G, 12345, 1 << 20, 512, got_);
    EXPECT_RUNS(n, D(0, 16 * G));
    b[16 * G - 1] = 0;
    n = zd_scan_runs(b, 16 * G, 12345, 1 << 20, 512, got_);
    EXPECT_RUNS(n, Z(0, 16 * G));
    free(b);
}

/* Random chunks built from zero and data segments, with lone non-zero bytes
 * near granule boundaries; every variant against the reference. */
static void test_scan_random(void)
{
    static const size_t granules[] = { 512, 1024, 4096, 4096, 65536, 1536, 3000, 1, 7 };
    const size_t maxlen = (1 << 20) + 4096;
    struct guarded g = guarded_alloc(maxlen);
    struct zd_run *want = malloc((maxlen + 2) * sizeof *want);
    for (int iter = 0; iter < 500; iter++) {
        size_t granule = granules[rnd_below(sizeof granules / sizeof granules[0])];
        size_t len = granule < 512 ? rnd_below(5000)
                   : iter % 10 == 0 ? maxlen - rnd_below(4097)
                                    : rnd_below(iter % 2 ? 20000 : 200000);
        uint64_t base = rnd_below(4) == 0 ? 0 : (rnd() >> 4) & ~(uint64_t)(rnd_below(2) ? 511 : 0);
        size_t mins[] = { 0, 1, granule / 2, granule, granule + 1, 2 * granule,
                          3 * granule + 5, 1 << 20, rnd_below(8 * granule) };
        size_t min_zero = mins[rnd_below(sizeof mins / sizeof mins[0])];
        uint8_t *p = g.hi - len;
        expose(&g, p, len);
        /* segments: zero stretches, dense data, or one lone byte */
        size_t pos = 0;
        while (pos < len) {
            size_t seg = 1 + rnd_below(rnd_below(4) ? 4 * granule + 100 : 64);
            if (seg > len - pos)
                seg = len - pos;
            int kind = (int)rnd_below(4);
            memset(p + pos, 0, seg);
            if (kind == 1) {
                for (size_t i = 0; i < seg; i += 8) {
                    uint64_t r = rnd() | 0x0101010101010101ull;
                    memcpy(p + pos + i, &r, seg - i < 8 ? seg - i : 8);
                }
            } else if (kind == 2) {
                /* often right at a granule boundary, or just after it */
                size_t at = rnd_below(seg);
                size_t off = (size_t)((base + pos + at) % granule);
                if ((rnd() & 1) && off <= at && off < 3)
                    at -= off;
                p[pos + at] = 0x40;
            }
            pos += seg;
        }
        size_t m = ref_scan(p, len, base, granule, min_zero, want);
        for (size_t k = 0; k + 1 < nimpl; k++) {
            zd_force_impl(impl_names[k]);
            check_scan(p, len, base, granule, min_zero, want, m, impl_names[k]);
        }
    }
    zd_force_impl(NULL);
    free(want);
    guarded_free(&g);
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

#define RUN(fn)                                                             \
    do {                                                                    \
        double t0_ = now();                                                 \
        unsigned f0_ = failures;                                            \
        fn();                                                               \
        printf("%-28s %s (%.2fs)\n", #fn, failures == f0_ ? "ok" : "FAILED", \
               now() - t0_);                                                \
        fflush(stdout);                                                     \
    } while (0)

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "--print-impl") == 0)
        return child_print_impl();
    const char *seed = getenv("TEST_SEED");
    if (seed)
        rng_state = strtoull(seed, NULL, 0) | 1;
    printf("seed 0x%llx\n", (unsigned long long)rng_state);

    load_impls();
    printf("variants tested:");
    for (size_t i = 0; i < nimpl; i++)
        printf(" %s", impl_names[i]);
    printf(" (default %s)\n", zd_impl_name());

    RUN(test_cpu_decide);
    RUN(test_env);
    RUN(test_force);
    RUN(test_lengths_alignments);
    RUN(test_every_position_guarded);
    RUN(test_large);
    RUN(test_random);
    RUN(test_zero_prefix);
    RUN(test_scan_edges);
    RUN(test_scan_random);

    if (failures) {
        printf("%u failure(s)\n", failures);
        return 1;
    }
    printf("all ok\n");
    return 0;
}
