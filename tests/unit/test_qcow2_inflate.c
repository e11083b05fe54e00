/* Compressed cluster inflation: raw deflate and zstd round trips, trailing
 * bytes of the next cluster, streams that inflate to more than a cluster
 * (refused, never written past the buffer), short streams, garbage. */
#include <errno.h>
#include <stdint.h>
#include <zlib.h>
#include <zstd.h>

#include "formats/qcow2/read_int.h"
#include "qcow2_testutil.h"

#define CS 65536

static size_t deflate_raw(const uint8_t *in, size_t n, uint8_t *out, size_t cap)
{
    z_stream z;
    memset(&z, 0, sizeof(z));
    if (deflateInit2(&z, 6, Z_DEFLATED, -12, 9, Z_DEFAULT_STRATEGY) != Z_OK)
        return 0;
    z.next_in = (Bytef *)in;
    z.avail_in = (uInt)n;
    z.next_out = out;
    z.avail_out = (uInt)cap;
    int r = deflate(&z, Z_FINISH);
    size_t len = cap - z.avail_out;
    deflateEnd(&z);
    return r == Z_STREAM_END ? len : 0;
}

static size_t compress_zstd(const uint8_t *in, size_t n, uint8_t *out, size_t cap)
{
    size_t r = ZSTD_compress(out, cap, in, n, 3);
    return ZSTD_isError(r) ? 0 : r;
}

static void fill(uint8_t *p, size_t n, unsigned seed)
{
    uint32_t x = seed * 2654435761u + 1;
    for (size_t i = 0; i < n; i++) {
        x = x * 1103515245u + 12345u;
        /* half text-like, half random */
        p[i] = (i / 4096) % 2 ? (uint8_t)(x >> 24) : (uint8_t)("qcow2 cluster "[i % 14]);
    }
}

static void test_type(uint8_t type)
{
    static uint8_t src[2 * CS], comp[4 * CS], out[CS + 64], big[2 * CS];
    struct qcow2_inflater *z;
    size_t produced, n;
    char why[200];

    CHECK(qcow2_inflater_new(&z, type, CS) == 0);
    size_t (*pack)(const uint8_t *, size_t, uint8_t *, size_t) =
        type == QCOW2_COMPRESSION_ZLIB ? deflate_raw : compress_zstd;
    const char *corrupt = type == QCOW2_COMPRESSION_ZLIB ? "corrupt deflate data"
                                                         : "corrupt zstd data";

    /* exact cluster, then with the next cluster's bytes after it */
    fill(src, CS, 1);
    n = pack(src, CS, comp, sizeof(comp));
    CHECK(n > 0);
    memset(out, 0xee, sizeof(out));
    CHECK(qcow2_inflate(z, comp, n, out, CS, &produced, why, sizeof(why)) == 0);
    CHECK(produced == CS && memcmp(out, src, CS) == 0);
    CHECK(out[CS] == 0xee);
    memset(comp + n, 0x5a, 1000);
    CHECK(qcow2_inflate(z, comp, n + 1000, out, CS, &produced, why, sizeof(why)) == 0);
    CHECK(produced == CS && memcmp(out, src, CS) == 0);
    /* the same inflater again (reset between uses) */
    fill(src, CS, 2);
    n = pack(src, CS, comp, sizeof(comp));
    CHECK(qcow2_inflate(z, comp, n, out, CS, &produced, why, sizeof(why)) == 0);
    CHECK(produced == CS && memcmp(out, src, CS) == 0);

    /* a stream of two clusters: refused, nothing written past `cap` */
    memset(big, 'a', sizeof(big));
    n = pack(big, sizeof(big), comp, sizeof(comp));
    memset(out, 0xee, sizeof(out));
    CHECK(qcow2_inflate(z, comp, n, out, CS, &produced, why, sizeof(why)) < 0);
    CHECK(strstr(why, "inflates to more than the cluster size (65536 bytes)") != NULL);
    CHECK(out[CS] == 0xee);
    /* one byte too many */
    n = pack(big, CS + 1, comp, sizeof(comp));
    CHECK(qcow2_inflate(z, comp, n, out, CS, &produced, why, sizeof(why)) < 0);
    CHECK(strstr(why, "inflates to more than") != NULL);

    /* a short stream: success, the caller sees how much came out */
    n = pack(big, 1000, comp, sizeof(comp));
    CHECK(qcow2_inflate(z, comp, n, out, CS, &produced, why, sizeof(why)) == 0);
    CHECK(produced == 1000);
    /* a cut stream: short or corrupt, never more than was there */
    fill(src, CS, 3);
    n = pack(src, CS, comp, sizeof(comp));
    int r = qcow2_inflate(z, comp, n / 2, out, CS, &produced, why, sizeof(why));
    CHECK((r == 0 && produced < CS) || (r < 0 && strstr(why, corrupt)));

    /* garbage */
    memset(comp, 0xff, 4096);
    r = qcow2_inflate(z, comp, 4096, out, CS, &produced, why, sizeof(why));
    CHECK(r < 0 && strstr(why, corrupt) != NULL);
    /* empty input */
    r = qcow2_inflate(z, comp, 0, out, CS, &produced, why, sizeof(why));
    CHECK(r < 0 || produced == 0);

    /* random damage never crashes and never fills past the cluster */
    fill(src, CS, 4);
    size_t good = pack(src, CS, comp, sizeof(comp));
    uint32_t x = 99;
    for (int it = 0; it < 300; it++) {
        uint8_t dam[4 * CS];
        memcpy(dam, comp, good);
        for (int k = 0; k < 1 + it % 5; k++) {
            x = x * 1103515245u + 12345u;
            dam[(x >> 8) % good] ^= (uint8_t)(1u << (x % 8));
        }
        out[CS] = 0xee;
        qcow2_inflate(z, dam, good, out, CS, &produced, why, sizeof(why));
        CHECK(produced <= CS && out[CS] == 0xee);
    }
    qcow2_inflater_free(z);
}

static void test_pool(void)
{
    struct qcow2_inflate_pool p;
    qcow2_inflate_pool_init(&p, QCOW2_COMPRESSION_ZSTD, 4096);
    struct qcow2_inflate_slot *a = qcow2_inflate_pool_take(&p);
    struct qcow2_inflate_slot *b = qcow2_inflate_pool_take(&p);
    CHECK(a && b && a != b);
    qcow2_inflate_pool_give(&p, a);
    CHECK(qcow2_inflate_pool_take(&p) == a);    /* reused */
    qcow2_inflate_pool_give(&p, a);
    qcow2_inflate_pool_give(&p, b);
    qcow2_inflate_pool_destroy(&p);
    struct qcow2_inflater *z;
    CHECK(qcow2_inflater_new(&z, 7, 4096) == -ENOTSUP);
}

/* A zstd frame made by hand: no content size, the window descriptor `wd`
 * (exponent << 3 | mantissa: 2^(10 + e) * (1 + m/8) bytes), one RLE block
 * of `n` bytes of 0x5a. */
static size_t rle_frame(uint8_t *f, uint8_t wd, uint32_t n)
{
    uint32_t bh = 1u | (1u << 1) | (n << 3);   /* last block, RLE, size */
    uint8_t fr[] = { 0x28, 0xb5, 0x2f, 0xfd, 0x00, wd,
                     (uint8_t)bh, (uint8_t)(bh >> 8), (uint8_t)(bh >> 16), 0x5a };
    memcpy(f, fr, sizeof(fr));
    return sizeof(fr);
}

/* The window a zstd frame asks for is bounded by the cluster size: a
 * frame asking for 128 MiB is refused before the decoder allocates it,
 * one asking for exactly the cluster size is read. */
static void test_zstd_window(void)
{
    static uint8_t frame[64], out[CS];
    struct qcow2_inflater *z;
    size_t produced, n;
    char why[200];

    for (uint32_t cs = 512; cs <= (2u << 20); cs *= 2) {
        CHECK(qcow2_inflater_new(&z, QCOW2_COMPRESSION_ZSTD, cs) == 0);
        uint32_t fill_n = cs < 4096 ? cs : 4096;
        /* 2^27: refused, the window named */
        n = rle_frame(frame, 17 << 3, fill_n);
        why[0] = '\0';
        CHECK(qcow2_inflate(z, frame, n, out, cs < CS ? cs : CS, &produced, why,
                            sizeof(why)) == -EINVAL);
        CHECK(strstr(why, "zstd frame asks for a window larger than the cluster size") &&
              strstr(why, "it asks for 134217728 bytes"));
        /* the cluster size itself (at least 1 KiB, zstd's smallest): read */
        unsigned e = 0;
        while ((1024u << e) < cs)
            e++;
        n = rle_frame(frame, (uint8_t)(e << 3), fill_n);
        if (cs <= CS) {
            memset(out, 0, sizeof(out));
            CHECK(qcow2_inflate(z, frame, n, out, cs, &produced, why, sizeof(why)) == 0);
            CHECK(produced == fill_n && out[0] == 0x5a && out[fill_n - 1] == 0x5a);
        }
        /* one step above it (mantissa 1: 9/8 of it): refused */
        n = rle_frame(frame, (uint8_t)(e << 3 | 1), fill_n);
        CHECK(qcow2_inflate(z, frame, n, out, cs < CS ? cs : CS, &produced, why,
                            sizeof(why)) == -EINVAL);
        CHECK(strstr(why, "window larger than the cluster size") != NULL);
        qcow2_inflater_free(z);
    }
}

int main(void)
{
    test_type(QCOW2_COMPRESSION_ZLIB);
    test_type(QCOW2_COMPRESSION_ZSTD);
    test_pool();
    test_zstd_window();
    return t_done("test_qcow2_inflate");
}
