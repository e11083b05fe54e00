#include "zerodetect/zerodetect.h"

/* Length of the granule starting at buf+pos: granules are aligned to
 * absolute offsets, so the first (and the last) may be short. */
static size_t granule_at(uint64_t base, size_t pos, size_t len, size_t granule)
{
    size_t g = granule - (size_t)((base + pos) & (granule - 1));
    return g < len - pos ? g : len - pos;
}

size_t zd_scan_runs(const uint8_t *buf, size_t len, uint64_t base,
                    size_t granule, size_t min_zero, struct zd_run *runs)
{
    size_t n = 0, pos = 0, data_start = 0;

    if (min_zero > 0) {
        while (pos < len) {
            size_t g = granule_at(base, pos, len, granule);
            if (!buffer_is_zero(buf + pos, g)) {
                pos += g;
                continue;
            }
            size_t zs = pos;
            pos += g;
            while (pos < len) {
                g = granule_at(base, pos, len, granule);
                if (!buffer_is_zero(buf + pos, g))
                    break;
                pos += g;
            }
            if (pos - zs < min_zero)
                continue; /* too short: stays part of the data around it */
            if (zs > data_start)
                runs[n++] = (struct zd_run){ (uint32_t)data_start, (uint32_t)(zs - data_start), false };
            runs[n++] = (struct zd_run){ (uint32_t)zs, (uint32_t)(pos - zs), true };
            data_start = pos;
        }
    }
    if (data_start < len)
        runs[n++] = (struct zd_run){ (uint32_t)data_start, (uint32_t)(len - data_start), false };
    return n;
}
