/* offload_sample_runs (src/offload_scan.c): the sampled zero scan of copy
 * offload, against zd_scan_runs over the same bytes read whole.
 *
 * Random layouts of data and zero stretches (from one granule to several
 * blocks, data that begins with a zero sample's worth of zeros, ranges that
 * start off a block boundary, zeros or data after the range), granules of
 * 512 B to 128 KiB, -S values below, at and above the granule, with and
 * without the mapping.  For every case:
 * - the runs cover the range in order, alternate, and fit the array;
 * - a run called zero is all zeros, on granule boundaries and at least
 *   min_zero long (sound: never a hole where there is data);
 * - every zero run of the whole scan that holds a block's first bytes (or
 *   reaches the range's end with zeros after it) is found exactly (the
 *   promise in offload_scan.h); the rest stay data.
 * Then a file shorter than the range: OFFLOAD_SCAN_GONE, never zeros.
 */
#define _GNU_SOURCE
#include "offload_scan.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "check.h"

#define MAXLEN (1u << 20)

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static uint32_t rnd(uint32_t n)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)(rng % n);
}

/* Fill p[0..len) with stretches of data and zeros, in granules. */
static void fill(uint8_t *p, size_t len, size_t granule)
{
    size_t pos = 0;
    bool zero = rnd(2);

    while (pos < len) {
        size_t units;
        switch (rnd(4)) {
        case 0: units = 1 + rnd(3); break;
        case 1: units = 1 + rnd(16); break;
        case 2: units = 1 + rnd((uint32_t)((OFFLOAD_SAMPLE_BLOCK / granule) * 3 + 1)); break;
        default: units = 1 + rnd((uint32_t)(len / granule)); break;
        }
        size_t n = units * granule;
        if (n > len - pos)
            n = len - pos;
        if (zero) {
            memset(p + pos, 0, n);
        } else {
            for (size_t i = 0; i < n; i++)
                p[pos + i] = (uint8_t)(1 + rnd(255));
            /* data that starts with zeros: a zero sample, then data */
            if (rnd(4) == 0 && n > OFFLOAD_SAMPLE_BYTES)
                memset(p + pos, 0, OFFLOAD_SAMPLE_BYTES + rnd((uint32_t)(n - OFFLOAD_SAMPLE_BYTES)));
            p[pos + n - 1] = 0x5a;   /* the granule stays data */
        }
        pos += n;
        zero = !zero;
    }
}

static bool all_zero(const uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (p[i])
            return false;
    return true;
}

static void one_case(int fd, uint8_t *file, struct offload_maps *maps, size_t granule,
                     size_t min_zero, int iter)
{
    size_t B = granule > OFFLOAD_SAMPLE_BLOCK ? granule : OFFLOAD_SAMPLE_BLOCK;
    size_t len = granule * (1 + rnd((uint32_t)(MAXLEN / granule)));
    uint64_t base = (uint64_t)granule * rnd(64) + (rnd(2) ? (uint64_t)1 << 32 : 0);
    uint64_t off = (uint64_t)granule * rnd(8);
    size_t after = B;   /* bytes after the range in the file */

    fill(file + off, len, granule);
    if (rnd(2))
        memset(file + off + len, 0, after);
    else
        fill(file + off + len, after, granule);
    CHECK(pwrite(fd, file, off + len + after, 0) == (ssize_t)(off + len + after));
    CHECK(ftruncate(fd, (off_t)(off + len + after)) == 0);

    size_t cap = len / granule + 4;
    struct zd_run *exp = calloc(cap, sizeof(*exp)), *got = calloc(cap, sizeof(*got));
    /* a buffer of one block up to the whole range and more: reads of
     * several blocks, cut short by the buffer or not */
    size_t buf_len = B + (rnd(2) ? rnd((uint32_t)(len + OFFLOAD_SAMPLE_BYTES + 1)) : 0);
    uint8_t *buf = malloc(buf_len);
    size_t ne = zd_scan_runs(file + off, len, base, granule, min_zero, exp);
    ssize_t ng = offload_sample_runs(maps, fd, off, len, base, granule, min_zero, buf, buf_len,
                                     got);

    CHECK(ng > 0, "case %d: %zd", iter, ng);
    if (ng <= 0)
        goto out;
    CHECK((size_t)ng <= len / granule + 2, "case %d: %zd runs", iter, ng);
    /* cover, alternate, sound */
    uint64_t pos = 0;
    for (ssize_t i = 0; i < ng; i++) {
        CHECK(got[i].off == pos && got[i].len > 0, "case %d run %zd", iter, i);
        if (i)
            CHECK(got[i].zero != got[i - 1].zero, "case %d run %zd: not alternating", iter, i);
        if (got[i].zero) {
            CHECK(all_zero(file + off + got[i].off, got[i].len),
                  "case %d: a zero run over data at %u", iter, got[i].off);
            CHECK((base + got[i].off) % granule == 0 && got[i].len % granule == 0 &&
                  got[i].len >= min_zero, "case %d: zero run %u+%u", iter, got[i].off, got[i].len);
        }
        pos += got[i].len;
    }
    CHECK(pos == len, "case %d: runs cover %llu of %zu", iter, (unsigned long long)pos, len);
    /* complete where promised */
    bool zero_after = all_zero(file + off + len, OFFLOAD_SAMPLE_BYTES);
    for (size_t i = 0; i < ne; i++) {
        if (!exp[i].zero)
            continue;
        uint64_t a = exp[i].off, b = a + exp[i].len;
        bool promised = b == len && zero_after;
        /* block starts: 0 and every q with (base+q) % B == 0 */
        uint64_t q = 0;
        while (!promised && q < len) {
            uint64_t w = len - q < OFFLOAD_SAMPLE_BYTES ? len - q : OFFLOAD_SAMPLE_BYTES;
            if (a <= q && q + w <= b)
                promised = true;
            q = q + (B - (base + q) % B);
        }
        if (!promised)
            continue;
        bool found = false;
        for (ssize_t k = 0; k < ng && !found; k++)
            found = got[k].zero && got[k].off == a && got[k].off + got[k].len == b;
        CHECK(found, "case %d (granule %zu, -S %zu, base %llu, len %zu): zero run %llu+%llu "
              "not found", iter, granule, min_zero, (unsigned long long)base, len,
              (unsigned long long)a, (unsigned long long)(b - a));
    }
out:
    free(exp);
    free(got);
    free(buf);
}

int main(void)
{
    static const size_t granules[] = { 512, 4096, 65536, 131072 };
    uint8_t *file = malloc(MAXLEN + 8 * 131072 + 2 * 131072);
    int fd = memfd_create("sample", 0);

    CHECK(fd >= 0 && file);
    if (fd < 0 || !file)
        return 1;
    for (int iter = 0; iter < 1200; iter++) {
        size_t g = granules[iter % 4];
        size_t mz;
        switch (rnd(4)) {
        case 0: mz = g; break;
        case 1: mz = 2 * g; break;
        case 2: mz = 3 * g + 1; break;
        default: mz = g < 4096 ? 512 : 4096; break;   /* below the granule */
        }
        if (iter % 2) {
            struct offload_maps maps;
            offload_maps_init(&maps);
            maps.sample_mapped = true;     /* the mapped path, on any fs */
            one_case(fd, file, &maps, g, mz, iter);
            offload_maps_free(&maps);
        } else {
            one_case(fd, file, NULL, g, mz, iter);
        }
    }

    /* the file ends inside the range: never zeros, OFFLOAD_SCAN_GONE */
    for (int m = 0; m < 2; m++) {
        struct offload_maps maps;
        struct zd_run runs[MAXLEN / 4096 + 4];
        uint8_t *buf = malloc(OFFLOAD_SAMPLE_BLOCK);
        memset(file, 0, MAXLEN);
        CHECK(pwrite(fd, file, MAXLEN, 0) == MAXLEN);
        CHECK(ftruncate(fd, MAXLEN / 2 + 100) == 0);
        offload_maps_init(&maps);
        maps.sample_mapped = true;
        ssize_t n = offload_sample_runs(m ? &maps : NULL, fd, 0, MAXLEN, 0, 4096, 4096, buf,
                                        OFFLOAD_SAMPLE_BLOCK, runs);
        CHECK(n == OFFLOAD_SCAN_GONE || n == OFFLOAD_SCAN_READ, "short file: %zd", n);
        offload_maps_free(&maps);
        free(buf);
    }
    close(fd);
    free(file);
    if (failures)
        fprintf(stderr, "test_offload_sample: %d failures\n", failures);
    return failures != 0;
}
