#include "util/size.h"

#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
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

/* qemu's suffixes, each a power of 1024; 0 for anything else. */
static uint64_t qemu_suffix_mul(char c)
{
    int sh = suffix_shift(c);
    return sh < 0 ? 0 : 1ULL << sh;
}

static bool is_space(char c)
{
    return c == ' ' || (c >= '\t' && c <= '\r');
}

static int hex_digit(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* Digits in `base` from *p on (at least one, else -EINVAL); *p moves past
 * them.  -ERANGE (still moving past them) when the value passes 2^64-1. */
static int parse_u64(const char **p, unsigned base, uint64_t *v)
{
    bool any = false, over = false;
    int dg;

    *v = 0;
    while ((dg = hex_digit(**p)) >= 0 && (unsigned)dg < base) {
        if (*v > (UINT64_MAX - (uint64_t)dg) / base)
            over = true;
        else
            *v = *v * base + (uint64_t)dg;
        any = true;
        (*p)++;
    }
    return !any ? -EINVAL : over ? -ERANGE : 0;
}

int size_parse_qemu(const char *s, uint64_t *out, bool *hex_suffix)
{
    const char *p = s, *num;
    uint64_t val, frac = 0, mul;
    bool hex = false;
    int r;

    *hex_suffix = false;
    while (is_space(*p))
        p++;
    if (*p == '-')
        return -EINVAL;
    if (*p == '+')
        p++;
    num = p;
    r = parse_u64(&p, 10, &val);
    if (r == 0 && val == 0 && (*p == 'x' || *p == 'X')) {
        /* a hex number: "0x" and at least one hex digit ("00x1" is not) */
        p = num;
        if (p[0] == '0' && (p[1] == 'x' || p[1] == 'X') && hex_digit(p[2]) >= 0)
            p += 2;
        r = parse_u64(&p, 16, &val);
        hex = true;
        if (r == 0 && *p == '.')
            return -EINVAL;     /* no fractions in hex */
    } else if (r == 0 && *p == '.') {
        const char *f = p + 1;
        while (*f >= '0' && *f <= '9')
            f++;
        if (f == p + 1) {
            p++;                /* "1.k": a point without digits is skipped */
        } else if ((*f == 'e' || *f == 'E') &&
                   ((f[1] >= '0' && f[1] <= '9') ||
                    ((f[1] == '+' || f[1] == '-') && f[2] >= '0' && f[2] <= '9'))) {
            return -EINVAL;     /* an exponent */
        } else {
            /* the fraction as a double, then as 64-bit fixed point (a
             * fraction that rounds up to 1.0 counts as none, as in qemu) */
            char buf[64];
            size_t n = (size_t)(f - p);
            if (n >= sizeof(buf))
                n = sizeof(buf) - 1;
            memcpy(buf, p, n);
            buf[n] = 0;
            double fd = strtod(buf, NULL) * 0x1p64;
            frac = fd < 0x1p64 ? (uint64_t)fd : 0;
            p = f;
        }
    }
    if (r == 0) {
        mul = qemu_suffix_mul(*p);
        if (mul) {
            p++;
            if (hex)
                *hex_suffix = true;
        } else {
            mul = 1;
        }
        if (mul == 1) {
            if (frac)
                return -EINVAL;  /* a fraction of a byte needs a scale */
        } else {
            unsigned __int128 whole = (unsigned __int128)val * mul;
            /* fraction x scale in 64.64 fixed point, half rounded up */
            unsigned __int128 part = (unsigned __int128)frac * mul;
            whole += (uint64_t)(part >> 64);
            whole += ((uint64_t)part >> 63) & 1;
            if (whole > UINT64_MAX)
                r = -ERANGE;
            else
                val = (uint64_t)whole;
        }
    }
    /* trailing text makes anything invalid, even a number too large */
    if (*p && r != -EINVAL)
        return -EINVAL;
    if (r < 0)
        return r;
    *out = val;
    return 0;
}
