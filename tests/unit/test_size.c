/* size_parse_qemu: the numbers qemu-img 7.2's dd takes and the ones it
 * refuses (each value below was what `qemu-img dd count=...` did). */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "check.h"
#include "util/size.h"

struct ok_case { const char *s; uint64_t v; bool hex_suffix; };

static const struct ok_case oks[] = {
    { "0", 0, false }, { "00", 0, false }, { "512", 512, false }, { "010", 10, false },
    { " 2", 2, false }, { "\t+2", 2, false }, { "1.0", 1, false },
    { "1k", 1024, false }, { "1K", 1024, false }, { "1b", 1, false }, { "1B", 1, false },
    { "1.k", 1024, false }, { "1.5k", 1536, false }, { "1.1k", 1126, false },
    { "1.0005k", 1025, false }, { "0.5k", 512, false }, { "0.0001k", 0, false },
    { "0.00048828125k", 1, false }, { "0.000488281249k", 0, false },
    { "1.5e", 1536ull << 50, false }, { "2M", 2u << 20, false },
    { "0x10", 16, false }, { "0X10", 16, false }, { "+0x10", 16, false },
    { "0x1b", 27, false }, { "0x1e", 30, false }, { "0x1k", 1024, true },
    { "0x7fffffffffffffff", INT64_MAX, false },
    { "0xffffffffffffffff", UINT64_MAX, false },
    { "18446744073709551615", UINT64_MAX, false },
    { "8E", 1ull << 63, false },
    /* a fraction that a double rounds to 1.0 counts as none (qemu: 3072) */
    { "3.9999999999999999999k", 3072, false },
};

static const char *const invalid[] = {
    "", "  ", "-0", "-1", "- 2", "2 ", "0.5", "0.4", "1.1", "1.5b", "1e3", "1.5e3",
    "1.e5", "1. 5k", ".5k", "1,5k", "1k5", "1kB", "0b1", "0x", "00x10", "0x1.0",
    "0x1.5", "abc", "1x", "99999999999999999999k", "0.5k ",
};

static const char *const too_large[] = {
    "18446744073709551616", "99999999999999999999", "0x10000000000000000", "16E",
    "16384P",
};

int main(void)
{
    for (size_t i = 0; i < sizeof(oks) / sizeof(oks[0]); i++) {
        uint64_t v = 12345;
        bool hs = !oks[i].hex_suffix;
        int r = size_parse_qemu(oks[i].s, &v, &hs);
        CHECK(r == 0, "'%s': %d", oks[i].s, r);
        CHECK(v == oks[i].v, "'%s': %llu, not %llu", oks[i].s, (unsigned long long)v,
              (unsigned long long)oks[i].v);
        CHECK(hs == oks[i].hex_suffix, "'%s': hex suffix flag", oks[i].s);
    }
    for (size_t i = 0; i < sizeof(invalid) / sizeof(invalid[0]); i++) {
        uint64_t v = 7;
        bool hs;
        int r = size_parse_qemu(invalid[i], &v, &hs);
        CHECK(r == -EINVAL, "'%s': %d", invalid[i], r);
        CHECK(v == 7, "'%s': value changed on failure", invalid[i]);
    }
    for (size_t i = 0; i < sizeof(too_large) / sizeof(too_large[0]); i++) {
        uint64_t v;
        bool hs;
        int r = size_parse_qemu(too_large[i], &v, &hs);
        CHECK(r == -ERANGE, "'%s': %d", too_large[i], r);
    }
    return failures != 0;
}
