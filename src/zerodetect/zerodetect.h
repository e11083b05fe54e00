/* zerodetect: is a buffer all zeros, and where are its zero runs.
 *
 * buffer_is_zero() works for any length and alignment.  The implementation is
 * chosen once, on first use, from CPUID+XGETBV: AVX-512BW, AVX2, SSE2 or
 * generic C.  DISKIMG_ZERO_IMPL=generic|sse2|avx2|avx512bw forces one (tests
 * and benchmarks); forcing one the CPU lacks falls back to the best available
 * and zd_impl_name() tells which one runs.
 */
#ifndef DISKIMG_ZERODETECT_H
#define DISKIMG_ZERODETECT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

bool buffer_is_zero(const void *buf, size_t len);

/* Name of the implementation buffer_is_zero uses. */
const char *zd_impl_name(void);

/* Every implementation compiled in, best first, for tests and benchmarks:
 * fills names/fns (up to `max`), returns the count; `usable[i]` says whether
 * this CPU can run it. */
typedef bool (*zd_fn)(const void *buf, size_t len);
size_t zd_impls(const char **names, zd_fn *fns, bool *usable, size_t max);

/* A run of a scanned chunk: [off, off+len) relative to the chunk start. */
struct zd_run {
    uint32_t off;
    uint32_t len;
    bool zero;
};

/* Split buf[0..len) into alternating data and zero runs.
 *
 * The buffer holds the bytes of virtual offsets [base, base+len).  It is
 * examined in granules of `granule` bytes (a power of two, >= 512) aligned to
 * absolute offsets (base + k*granule), the first and last possibly partial.
 * A zero run is a maximal sequence of all-zero granules of at least
 * `min_zero` bytes (min_zero = 0 means: no zero runs at all, everything is
 * data).  Shorter zero stretches are merged into the data around them.
 * Runs cover the buffer exactly, in order, adjacent runs differ in `zero`.
 * `runs` must hold len/granule + 2 entries.  Returns the number of runs. */
size_t zd_scan_runs(const uint8_t *buf, size_t len, uint64_t base,
                    size_t granule, size_t min_zero, struct zd_run *runs);

#endif
