/* zd_scan_runs: a chunk split into data runs and zero runs.
 *
 * Data granules cost three byte loads each (buffer_is_zero's pre-checks
 * reject almost all of them on the first byte).  Once a zero granule is
 * found, the zero stretch is followed with one in-order prefix scan over
 * the rest of the chunk instead of one call per granule, and only the
 * granule where that scan stopped is checked again exactly.  The variant is
 * looked up once per chunk, not once per granule. */
#include "zerodetect/zd_internal.h"

static inline bool granule_is_zero(const struct zd_impl *im, const uint8_t *p, size_t len)
{
    if (p[0] || p[len - 1] || p[len / 2])
        return false;
    return im->is_zero(p, len);
}

static inline size_t min_size(size_t a, size_t b)
{
    return a < b ? a : b;
}

/* Append a run unless it is empty. */
static size_t emit(struct zd_run *runs, size_t n, size_t off, size_t len, bool zero)
{
    if (len == 0)
        return n;
    runs[n] = (struct zd_run){ (uint32_t)off, (uint32_t)len, zero };
    return n + 1;
}

size_t zd_scan_runs(const uint8_t *buf, size_t len, uint64_t base,
                    size_t granule, size_t min_zero, struct zd_run *runs)
{
    if (len == 0)
        return 0;
    if (min_zero == 0 || granule == 0)
        return emit(runs, 0, 0, len, false);

    const struct zd_impl *im = zd_active();
    size_t n = 0, data_start = 0, pos = 0;
    /* the first granule ends at the next absolute multiple of `granule` */
    size_t g = min_size(granule - (size_t)(base % granule), len);

    while (pos < len) {
        if (!granule_is_zero(im, buf + pos, g)) {
            pos += g;
            g = min_size(granule, len - pos);
            continue;
        }
        size_t zero_start = pos;
        pos += g;
        /* pos is now on a granule boundary: extend the zero stretch */
        while (pos < len) {
            size_t z = im->zero_prefix(buf + pos, len - pos);
            if (z == len - pos) {
                pos = len;
                break;
            }
            pos += z - z % granule; /* whole granules known zero */
            g = min_size(granule, len - pos);
            /* the non-zero byte is here or, when the prefix scan stopped
             * short of a granule end, in a later granule */
            if (!granule_is_zero(im, buf + pos, g))
                break;
            pos += g;
        }
        if (pos - zero_start >= min_zero) {
            n = emit(runs, n, data_start, zero_start - data_start, false);
            n = emit(runs, n, zero_start, pos - zero_start, true);
            data_start = pos;
        }
        if (pos < len)
            g = min_size(granule, len - pos);
    }
    return emit(runs, n, data_start, len - data_start, false);
}
