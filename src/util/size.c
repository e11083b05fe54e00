#include "util/size.h"

#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

static int suffix_shift(char c)
{
    switch (c) {
    case 'b': case 'B': return 0;
    case 'k': case 'K': return 10;
    case 'm': case 'M': return 20;
    case 'g': case 'G': return 30;
    case 't': case 'T': return 40;
    case 'p': case 'P': return 50;
    case 'e': case 'E': return 60;
    default: return -1;
    }
}

int size_parse(const char *s, uint64_t default_unit, uint64_t *out)
{
    const char *p = s;
    uint64_t whole = 0, unit = default_unit;
    uint64_t frac_num = 0, frac_den = 1;
    bool digits = false;

    if (!s)
        return -EINVAL;
    while (*p >= '0' && *p <= '9') {
        if (whole > (UINT64_MAX - 9) / 10)
            return -ERANGE;
        whole = whole * 10 + (uint64_t)(*p++ - '0');
        digits = true;
    }
    if (*p == '.') {
        p++;
        while (*p >= '0' && *p <= '9') {
            /* more than 18 fractional digits cannot matter for a 2^63 range */
            if (frac_den < 1000000000000000000ULL) {
                frac_num = frac_num * 10 + (uint64_t)(*p - '0');
                frac_den *= 10;
            }
            p++;
            digits = true;
        }
    }
    if (!digits)
        return -EINVAL;
    if (*p) {
        int sh = suffix_shift(*p);
        if (sh < 0 || p[1])
            return -EINVAL;
        unit = 1ULL << sh;
    }
    if (unit == 0)
        return -EINVAL;
    if (whole > (uint64_t)INT64_MAX / unit)
        return -ERANGE;
    uint64_t v = whole * unit;
    if (frac_num) {
        /* the fraction must come out as a whole number of bytes */
        unsigned __int128 f = (unsigned __int128)frac_num * unit;
        if (f % frac_den)
            return -EINVAL;
        uint64_t add = (uint64_t)(f / frac_den);
        if (add > (uint64_t)INT64_MAX - v)
            return -ERANGE;
        v += add;
    }
    *out = v;
    return 0;
}

void size_human(uint64_t v, char *buf, size_t n)
{
    static const char *const units[] = { "B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB" };
    int e = 0;

    /* Pick the unit so that the printed number stays below 1000: the
     * exponent of v*1024/1000 in base 2, in steps of 10. */
    frexp((double)v / (1000.0 / 1024.0), &e);
    int i = (e - 1) / 10;
    if (i < 0)
        i = 0;
    if (i > 6)
        i = 6;
    snprintf(buf, n, "%0.3g %s", (double)v / (double)(1ULL << (i * 10)), units[i]);
}
