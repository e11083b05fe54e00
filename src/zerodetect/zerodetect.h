/* zerodetect: is a buffer all zeros, and where are its zero runs.
 *
 * buffer_is_zero() works for any length and alignment.  The implementation is
 * chosen once, on first use, from CPUID+XGETBV: AVX-512BW, AVX2, SSE2 or
 * generic C.  DISKIMG_ZERO_IMPL=generic|sse2|avx2|avx512bw forces one (tests
 * and benchmarks); forcing one the CPU lacks falls back to the best available
 * and zd_impl_name() tells which one runs.  Everything here is thread-safe.
 */
#ifndef DISKIMG_ZERODETECT_H
#define DISKIMG_ZERODETECT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The whole check behind buffer_is_zero(), without its byte pre-checks:
 * the selected implementation, for any length and alignment. */
bool zd_is_zero_full(const void *buf, size_t len);

static inline bool buffer_is_zero(const void *buf, size_t len)
{
    const unsigned char *p = buf;

    if (len == 0)
        return true;
    /* Three single bytes first, as three separate short-circuiting branches:
     * first, last and middle sit on different cache lines, and most non-zero
     * blocks (real data) are rejected by the first or second one, so the rest
     * of the block is never touched and no call is made.  QEMU measured on a
     * real image conversion that doing this inline cut the zero check's
     * share of the run by about a fifth; here, checking the 4 KiB or 512 B
     * granules of a 1 MiB chunk of random data, it was 1.9-2.9x faster than
     * going straight to the vector code. */
    if (p[0])
        return false;
    if (p[len - 1])
        return false;
    if (p[len / 2])
        return false;
    return zd_is_zero_full(buf, len);
}

/* Name of the implementation buffer_is_zero uses. */
const char *zd_impl_name(void);

/* Every implementation compiled in, best first, for tests and benchmarks:
 * fills names/fns (up to `max`), returns the count; `usable[i]` says whether
 * this CPU can run it.  Each fn is complete on its own (no pre-checks needed)
 * and must only be called when usable. */
typedef bool (*zd_fn)(const void *buf, size_t len);
size_t zd_impls(const char **names, zd_fn *fns, bool *usable, size_t max);

/* Test and benchmark hook: make `name` the implementation every later call
 * uses (NULL: the best one), as DISKIMG_ZERO_IMPL does at start-up.  Returns
 * 0 when `name` now runs; -ENOTSUP when this CPU cannot run it and -EINVAL
 * when no implementation has that name, in both cases the best one runs. */
int zd_force_impl(const char *name);

/* Length of the all-zero prefix of buf[0..len), to within ZD_PREFIX_SLACK:
 * returns n <= len such that buf[0..n) is all zero and, when n < len, a
 * non-zero byte lies in buf[n .. n + ZD_PREFIX_SLACK).  Scans in order at
 * full speed; for finding where a zero stretch ends. */
#define ZD_PREFIX_SLACK 256
size_t zd_zero_prefix(const void *buf, size_t len);

/* A run of a scanned chunk: [off, off+len) relative to the chunk start. */
struct zd_run {
    uint32_t off;
    uint32_t len;
    bool zero;
};

/* Split buf[0..len) into alternating data and zero runs.
 *
 * The buffer holds the bytes of virtual offsets [base, base+len); len must
 * fit in 32 bits.  It is examined in granules of `granule` bytes (normally a
 * power of two >= 512; any non-zero value works, 0 makes everything data)
 * aligned to absolute offsets (base + k*granule), the first and last possibly
 * partial.  A zero run is a maximal sequence of all-zero granules of at least
 * `min_zero` bytes (min_zero = 0 means: no zero runs at all, everything is
 * data).  Shorter zero stretches are merged into the data around them.
 * Runs cover the buffer exactly, in order, adjacent runs differ in `zero`.
 * `runs` must hold len/granule + 2 entries.  Returns the number of runs
 * (0 for len 0). */
size_t zd_scan_runs(const uint8_t *buf, size_t len, uint64_t base,
                    size_t granule, size_t min_zero, struct zd_run *runs);

#endif
