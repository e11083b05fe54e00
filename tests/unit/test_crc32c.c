/* CRC-32C: both variants (table and SSE4.2, when the CPU has it) against
 * known vectors and a bitwise reference, at every length 0..600 and start
 * alignment 0..15, chained in pieces; the dispatch and its environment
 * override (by re-executing this binary). */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "codec/crc32c.h"

static uint32_t reference(const uint8_t *p, size_t n)
{
    uint32_t c = 0xffffffffu;

    for (size_t i = 0; i < n; i++) {
        c ^= p[i];
        for (int k = 0; k < 8; k++)
            c = c & 1 ? c >> 1 ^ 0x82f63b78u : c >> 1;
    }
    return ~c;
}

typedef uint32_t (*fn)(uint32_t, const void *, size_t);

static void vectors(fn f, const char *name)
{
    uint8_t buf[32];

    CHECK(f(0, "123456789", 9) == 0xe3069283u, "%s", name);
    CHECK(f(0, "", 0) == 0, "%s", name);
    /* RFC 3720 (iSCSI) B.4: 32 zeros, 32 0xff, 0..31 ascending */
    memset(buf, 0, 32);
    CHECK(f(0, buf, 32) == 0x8a9136aau, "%s zeros", name);
    memset(buf, 0xff, 32);
    CHECK(f(0, buf, 32) == 0x62a8ab43u, "%s ones", name);
    for (int i = 0; i < 32; i++)
        buf[i] = (uint8_t)i;
    CHECK(f(0, buf, 32) == 0x46dd794eu, "%s ascending", name);
}

static void differential(fn f, const char *name)
{
    static uint8_t buf[700];

    srand(7);
    for (size_t i = 0; i < sizeof(buf); i++)
        buf[i] = (uint8_t)rand();
    for (size_t al = 0; al < 16; al++)
        for (size_t n = 0; n + al <= 616 && n <= 600; n++) {
            uint32_t want = reference(buf + al, n);
            uint32_t got = f(0, buf + al, n);
            CHECK(got == want, "%s len %zu align %zu: %08x, want %08x", name, n, al, got,
                  want);
            /* in two pieces */
            size_t cut = n / 3;
            got = f(f(0, buf + al, cut), buf + al + cut, n - cut);
            CHECK(got == want, "%s chained len %zu align %zu", name, n, al);
        }
}

int main(int argc, char **argv)
{
    if (argc == 2 && strcmp(argv[1], "--name") == 0) {
        puts(crc32c_impl_name());
        return 0;
    }
    vectors(crc32c_generic, "generic");
    differential(crc32c_generic, "generic");
    if (crc32c_have_sse42()) {
        vectors(crc32c_sse42, "sse4.2");
        differential(crc32c_sse42, "sse4.2");
        CHECK(strcmp(crc32c_impl_name(), "sse4.2") == 0 || getenv("DISKIMG_CRC32C_IMPL"));
    } else {
        fprintf(stderr, "note: no SSE4.2 here, the table version only\n");
        CHECK(strcmp(crc32c_impl_name(), "generic") == 0);
    }
    vectors(crc32c, "dispatched");
    /* the override: the same binary with the table forced */
    if (!getenv("DISKIMG_CRC32C_IMPL")) {
        char cmd[4096];
        snprintf(cmd, sizeof(cmd), "DISKIMG_CRC32C_IMPL=generic '%s' --name", argv[0]);
        FILE *p = popen(cmd, "r");
        char out[64] = "";
        CHECK(p && fgets(out, sizeof(out), p));
        if (p)
            pclose(p);
        CHECK(strcmp(out, "generic\n") == 0, "forced: %s", out);
    }
    return failures != 0;
}
