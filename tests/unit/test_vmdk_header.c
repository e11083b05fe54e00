/* Unit tests of the binary VMDK decoders: KDMV and COWD headers, markers,
 * grain inflation, and the OVA tar header walker's pieces. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "formats/ova/tar.h"
#include "formats/vmdk/format.h"
#include "formats/vmdk/read_int.h"
#include "util/diag.h"
#include "util/endian.h"

#include "check.h"

static void good_header(uint8_t *b)
{
    memset(b, 0, 512);
    le32_put(b, VMDK4_MAGIC);
    le32_put(b + 4, 1);
    le32_put(b + 8, 3);                 /* NL detect, RGD */
    le64_put(b + 12, 20480);            /* 10 MiB */
    le64_put(b + 20, 128);
    le64_put(b + 28, 1);
    le64_put(b + 36, 20);
    le32_put(b + 44, 512);
    le64_put(b + 48, 21);
    le64_put(b + 56, 30);
    le64_put(b + 64, 128);
    memcpy(b + 73, "\n \r\n", 4);
}

/* decode with one field changed; expect `msg` in the failure (NULL: success) */
static void hdr_case(size_t off, int width, uint64_t val, const char *msg)
{
    uint8_t b[512];
    struct vmdk4_header h;
    struct diag d;

    good_header(b);
    if (width == 1) b[off] = (uint8_t)val;
    if (width == 2) le16_put(b + off, (uint16_t)val);
    if (width == 4) le32_put(b + off, (uint32_t)val);
    if (width == 8) le64_put(b + off, val);
    diag_init(&d);
    int r = vmdk4_header_decode(b, sizeof(b), &h, &d, "h", 0);
    if (!msg) {
        CHECK(r == 0);
        return;
    }
    CHECK(r < 0);
    if (r < 0 && !strstr(d.what, msg)) {
        fprintf(stderr, "header message '%s' lacks '%s'\n", d.what, msg);
        failures++;
    }
}

static void test_kdmv(void)
{
    uint8_t b[512];
    struct vmdk4_header h;
    struct diag d;

    good_header(b);
    diag_init(&d);
    CHECK(vmdk4_header_decode(b, 512, &h, &d, "h", 0) == 0);
    CHECK(h.capacity == 20480 && h.grain_sectors == 128 && h.gtes == 512);
    CHECK(h.gd_entries == 1 && !h.compressed && !h.markers && !h.zero_grain);
    CHECK(vmdk4_header_decode(b, 511, &h, &d, "h", 0) < 0);

    hdr_case(0, 4, 0x12345678, "no KDMV magic");
    hdr_case(4, 4, 0, "version 0 is not supported");
    hdr_case(4, 4, 3, NULL);
    hdr_case(8, 4, 0x80000, "unknown incompatible flags 0x00080000");
    hdr_case(8, 4, 0x30005, "header says grains are compressed but names no algorithm");
    hdr_case(20, 8, 96, "grain size of 96 sectors is invalid");
    hdr_case(20, 8, 4096, "grain size of 4096 sectors is invalid");
    hdr_case(20, 8, 2048, NULL);
    hdr_case(44, 4, 0, "0 entries per grain table");
    hdr_case(44, 4, 4097, "4097 entries per grain table");
    hdr_case(12, 8, (1ull << 41) + 1, "is too large");
    hdr_case(12, 8, 0, NULL);                       /* an empty disk */
    hdr_case(36, 8, 0, "embedded descriptor of 0 sectors");
    hdr_case(28, 8, 1ull << 50, "embedded descriptor offset");
    hdr_case(56, 8, 0, "grain directory offset 0 sectors is invalid");
    hdr_case(56, 8, UINT64_MAX, NULL);              /* GD at the end */
    hdr_case(64, 8, 1ull << 50, "overhead");
    hdr_case(73, 1, 'x', "line-end check bytes are damaged");
    hdr_case(77, 2, 7, "compression algorithm 7");

    /* tiny grains and tables: too many tables for the capacity */
    good_header(b);
    le64_put(b + 20, 1);
    le32_put(b + 44, 1);
    le64_put(b + 12, 1ull << 30);
    diag_init(&d);
    CHECK(vmdk4_header_decode(b, 512, &h, &d, "h", 0) < 0);
    CHECK(strstr(d.what, "grain tables (max") != NULL);
}

static void test_cowd(void)
{
    uint8_t *b = calloc(1, COWD_HEADER_SIZE);
    struct cowd_header h;
    struct diag d;

    le32_put(b, COWD_MAGIC);
    le32_put(b + 4, 1);
    le32_put(b + 8, 3);
    le32_put(b + 12, 8192);
    le32_put(b + 16, 8);
    le32_put(b + 20, 4);
    le32_put(b + 24, 1);
    le32_put(b + 1648, 1);
    diag_init(&d);
    CHECK(cowd_header_decode(b, COWD_HEADER_SIZE, &h, &d, "c", 0) == 0);
    CHECK(h.capacity == 8192 && h.grain_sectors == 8 && h.gd_entries == 1 && h.dirty);
    CHECK(cowd_header_decode(b, 1000, &h, &d, "c", 0) < 0);
    le32_put(b + 12, 4096 * 8 + 1);      /* needs 2 tables, has 1 */
    diag_init(&d);
    CHECK(cowd_header_decode(b, COWD_HEADER_SIZE, &h, &d, "c", 0) < 0);
    CHECK(strstr(d.what, "too small") != NULL);
    le32_put(b + 12, 8192);
    le32_put(b + 16, 3);
    diag_init(&d);
    CHECK(cowd_header_decode(b, COWD_HEADER_SIZE, &h, &d, "c", 0) < 0);
    CHECK(strstr(d.what, "grain size of 3 sectors") != NULL);
    le32_put(b + 16, 8);
    le32_put(b + 4, 2);
    diag_init(&d);
    CHECK(cowd_header_decode(b, COWD_HEADER_SIZE, &h, &d, "c", 0) < 0);
    free(b);
}

static void test_markers(void)
{
    uint8_t b[512] = { 0 };
    struct vmdk_marker m;
    struct diag d;

    diag_init(&d);
    CHECK(vmdk_marker_decode(b, 512, 1000, &m, &d, "m", 0) == 0);
    CHECK(!m.is_grain && m.type == VMDK_MARKER_EOS);
    le64_put(b, 4);
    le32_put(b + 12, VMDK_MARKER_GT);
    CHECK(vmdk_marker_decode(b, 512, 1000, &m, &d, "m", 0) == 0);
    CHECK(!m.is_grain && m.type == VMDK_MARKER_GT && m.value == 4);
    le64_put(b, 0);
    le32_put(b + 12, VMDK_MARKER_PROGRESS);
    CHECK(vmdk_marker_decode(b, 512, 1000, &m, &d, "m", 0) == 0);
    le32_put(b + 12, 5);
    CHECK(vmdk_marker_decode(b, 512, 1000, &m, &d, "m", 0) < 0);
    CHECK(strstr(d.what, "unknown marker type 5") != NULL);
    le64_put(b, 256);
    le32_put(b + 8, 1000);
    diag_init(&d);
    CHECK(vmdk_marker_decode(b, 512, 1000, &m, &d, "m", 0) == 0);
    CHECK(m.is_grain && m.value == 256 && m.size == 1000);
    CHECK(vmdk_marker_decode(b, 512, 999, &m, &d, "m", 0) < 0);
    CHECK(strstr(d.what, "claims 1000 bytes (max 999)") != NULL);
    CHECK(vmdk_marker_decode(b, 10, 5000, &m, &d, "m", 0) < 0);
}

static void test_inflate(void)
{
    struct vmdk_extent x = { .grain_bytes = 65536, .name = "g" };
    uint8_t *plain = malloc(65536), *out = malloc(65536), *c = malloc(70000);
    uLongf clen = 70000;
    struct diag d;

    for (size_t i = 0; i < 65536; i++)
        plain[i] = (uint8_t)(i * 7 + i / 300);
    CHECK(compress2(c, &clen, plain, 65536, 6) == Z_OK);
    diag_init(&d);
    CHECK(vmdk_inflate_grain(&x, c, clen, out, &d, 0) == 0);
    CHECK(memcmp(plain, out, 65536) == 0);
    /* truncated stream */
    CHECK(vmdk_inflate_grain(&x, c, clen / 2, out, &d, 0) < 0);
    CHECK(strstr(d.what, "truncated") != NULL);
    /* a wrong checksum */
    c[clen - 1] ^= 1;
    diag_init(&d);
    CHECK(vmdk_inflate_grain(&x, c, clen, out, &d, 0) < 0);
    CHECK(strstr(d.what, "checksum mismatch") != NULL);
    c[clen - 1] ^= 1;
    /* no checksum at all */
    diag_init(&d);
    CHECK(vmdk_inflate_grain(&x, c, clen - 4, out, &d, 0) < 0);
    /* raw deflate without the zlib header */
    diag_init(&d);
    CHECK(vmdk_inflate_grain(&x, c + 2, clen - 2, out, &d, 0) < 0);
    CHECK(strstr(d.what, "zlib header") != NULL);
    /* corrupt */
    c[clen / 2] ^= 0x55;
    c[clen / 2 + 1] ^= 0x55;
    diag_init(&d);
    CHECK(vmdk_inflate_grain(&x, c, clen, out, &d, 0) < 0);
    /* a short grain (the last one of a disk) is zero-filled */
    clen = 70000;
    CHECK(compress2(c, &clen, plain, 1000, 6) == Z_OK);
    memset(out, 0xff, 65536);
    diag_init(&d);
    CHECK(vmdk_inflate_grain(&x, c, clen, out, &d, 0) == 0);
    CHECK(memcmp(out, plain, 1000) == 0 && out[1000] == 0 && out[65535] == 0);
    /* more than a grain */
    struct vmdk_extent small = { .grain_bytes = 4096, .name = "g" };
    clen = 70000;
    CHECK(compress2(c, &clen, plain, 8192, 6) == Z_OK);
    diag_init(&d);
    CHECK(vmdk_inflate_grain(&small, c, clen, out, &d, 0) < 0);
    CHECK(strstr(d.what, "more than the grain size") != NULL);
    free(plain);
    free(out);
    free(c);
}

static void test_adler(void)
{
    size_t n = 200000;
    uint8_t *buf = malloc(n + 64);
    for (size_t i = 0; i < n + 64; i++)
        buf[i] = (uint8_t)(i * 2654435761u >> 13);
    memset(buf + 1000, 0xff, 20000);     /* long runs of 255: the worst case for sums */
    for (size_t len = 0; len < 2000; len += 37)
        for (size_t al = 0; al < 33; al += 7) {
            uint32_t want = (uint32_t)adler32(1, buf + al, (uInt)len);
            CHECK(vmdk_adler32_generic(1, buf + al, len) == want);
            CHECK(vmdk_adler32(1, buf + al, len) == want);
        }
    uint32_t want = (uint32_t)adler32(1, buf + 3, (uInt)(n - 3));
    CHECK(vmdk_adler32_generic(1, buf + 3, n - 3) == want);
    CHECK(vmdk_adler32(1, buf + 3, n - 3) == want);
#if defined(__x86_64__)
    if (__builtin_cpu_supports("avx2")) {
        CHECK(vmdk_adler32_avx2(1, buf + 3, n - 3) == want);
        CHECK(vmdk_adler32_avx2(0x12345678 % 65521, buf, 70000) ==
              (uint32_t)adler32(0x12345678 % 65521, buf, 70000));
    }
#endif
    free(buf);
}

static void tar_hdr(uint8_t *b, const char *name, const char *prefix, uint64_t size, char type)
{
    memset(b, 0, 512);
    strncpy((char *)b, name, 100);
    snprintf((char *)b + 124, 12, "%011llo", (unsigned long long)size);
    b[156] = (uint8_t)type;
    memcpy(b + 257, "ustar\0" "00", 8);
    if (prefix)
        strncpy((char *)b + 345, prefix, 155);
    memset(b + 148, ' ', 8);
    unsigned sum = 0;
    for (int i = 0; i < 512; i++)
        sum += b[i];
    snprintf((char *)b + 148, 8, "%06o", sum);
}

static void test_tar(void)
{
    uint8_t b[512];
    struct tar_member m;
    struct diag d;

    diag_init(&d);
    tar_hdr(b, "disk1.vmdk", NULL, 123456, '0');
    CHECK(tar_header_decode(b, &m, &d, "t", 0) == 0);
    CHECK(m.kind == TAR_FILE && m.size == 123456 && strcmp(m.name, "disk1.vmdk") == 0);
    tar_hdr(b, "disk1.vmdk", "some/dir", 5, '0');
    CHECK(tar_header_decode(b, &m, &d, "t", 0) == 0);
    CHECK(strcmp(m.name, "some/dir/disk1.vmdk") == 0);
    tar_hdr(b, "././@LongLink", NULL, 200, 'L');
    CHECK(tar_header_decode(b, &m, &d, "t", 0) == 0 && m.kind == TAR_LONGNAME);
    tar_hdr(b, "PaxHeaders/x", NULL, 50, 'x');
    CHECK(tar_header_decode(b, &m, &d, "t", 0) == 0 && m.kind == TAR_PAX);
    tar_hdr(b, "dir/", NULL, 0, '5');
    CHECK(tar_header_decode(b, &m, &d, "t", 0) == 0 && m.kind == TAR_OTHER);
    memset(b, 0, 512);
    CHECK(tar_header_decode(b, &m, &d, "t", 0) == 0 && m.kind == TAR_END);
    /* checksum */
    tar_hdr(b, "disk1.vmdk", NULL, 10, '0');
    b[3] ^= 1;
    CHECK(tar_header_decode(b, &m, &d, "t", 0) < 0);
    CHECK(strstr(d.what, "checksum is wrong") != NULL);
    /* base-256 size (GNU, > 8 GiB) */
    tar_hdr(b, "big.vmdk", NULL, 0, '0');
    memset(b + 124, 0, 12);
    b[124] = 0x80;
    b[135] = 0x01;
    b[134] = 0x02;       /* 0x0201 */
    memset(b + 148, ' ', 8);
    unsigned sum = 0;
    for (int i = 0; i < 512; i++)
        sum += b[i];
    snprintf((char *)b + 148, 8, "%06o", sum);
    diag_init(&d);
    CHECK(tar_header_decode(b, &m, &d, "t", 0) == 0 && m.size == 0x201);
    /* pax records */
    char name[64];
    const char rec[] = "28 mtime=1432668825.0000000\n25 path=a/long/name.vmdk\n";
    CHECK(tar_pax_path(rec, strlen(rec), name, sizeof(name)));
    CHECK(strcmp(name, "a/long/name.vmdk") == 0);
    CHECK(!tar_pax_path("99 path=x\n", 10, name, sizeof(name)));
    CHECK(!tar_pax_path("abc", 3, name, sizeof(name)));
    CHECK(!tar_pax_path(rec, strlen(rec), name, 5));
}

int main(void)
{
    test_kdmv();
    test_cowd();
    test_markers();
    test_inflate();
    test_adler();
    test_tar();
    if (failures) {
        fprintf(stderr, "%d check(s) failed\n", failures);
        return 1;
    }
    printf("test_vmdk_header: ok\n");
    return 0;
}
