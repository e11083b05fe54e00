/* VMDK writer: grains as zlib streams (RFC 1950: 2-byte header, deflate
 * data, big-endian Adler-32), which is what VMware and qemu inflate.
 *
 * Deflate runs raw and the Adler-32 is added here with the reader's AVX2
 * checksum (zlib's is scalar).  zlib's level 6, as qemu-img uses: sizes
 * stay those of qemu-img's output.
 *
 * Incompressible grains (random, encrypted, already compressed data) cost
 * deflate as much time as text does, only to come out a few bytes longer.
 * A probe with zstd's fastest level (about 1/100 of deflate's time on such
 * data) skips grains it cannot shrink by 1/64; they are stored instead, as
 * a zlib stream of stored blocks, which costs a copy and a checksum.
 *
 * The deflate and zstd contexts are the thread's own (deflate_ctx.c):
 * nothing is allocated per grain.
 */
#include <errno.h>
#include <string.h>
#include <zlib.h>

#include "formats/deflate_ctx.h"
#include "formats/vmdk/read_int.h"
#include "formats/vmdk/write.h"
#include "util/endian.h"

#define DEFLATE_LEVEL 6
#define STORED_MAX 65535u           /* bytes in one stored block */

static void zlib_header(uint8_t *p, unsigned level_bits)
{
    /* CMF: deflate with a 32 KiB window; FLG: the level hint and a check
     * value making (CMF * 256 + FLG) a multiple of 31 */
    unsigned cmf = 0x78, flg = level_bits << 6;
    flg += (31 - (cmf * 256 + flg) % 31) % 31;
    p[0] = (uint8_t)cmf;
    p[1] = (uint8_t)flg;
}

ssize_t vmdkw_deflate(const void *in, size_t len, void *out, size_t cap)
{
    uint8_t *o = out;
    int r;

    if (len < 16 || cap < 6 + 1)
        return 0;
    /* it must come out shorter than the input */
    if (cap > len - 1)
        cap = len - 1;
    if ((r = deflate_ctx_incompressible(in, len, out, cap)) != 0)
        return r > 0 ? 0 : r;
    zlib_header(o, 2);          /* FLEVEL 2: the default level */
    ssize_t d = deflate_ctx_raw(in, len, o + 2, cap - 2 - 4, DEFLATE_LEVEL, 15, 8);
    if (d <= 0)
        return d;               /* 0: does not fit, store it */
    size_t n = 2 + (size_t)d;
    be32_put(o + n, vmdk_adler32(1, in, len));
    return (ssize_t)(n + 4);
}

size_t vmdkw_zlib_stored_bound(size_t len)
{
    size_t blocks = len / STORED_MAX + (len % STORED_MAX != 0);
    if (blocks == 0)
        blocks = 1;
    return 2 + 5 * blocks + len + 4;
}

ssize_t vmdkw_zlib_stored(const void *in, size_t len, void *out, size_t cap)
{
    const uint8_t *src = in;
    uint8_t *o = out;
    size_t pos = 2, left = len;

    if (cap < vmdkw_zlib_stored_bound(len))
        return -ENOSPC;
    zlib_header(o, 0);          /* FLEVEL 0: fastest */
    do {
        size_t n = left < STORED_MAX ? left : STORED_MAX;
        o[pos] = n == left ? 1 : 0;     /* BFINAL on the last; BTYPE 00 = stored */
        le16_put(o + pos + 1, (uint16_t)n);
        le16_put(o + pos + 3, (uint16_t)~n);
        memcpy(o + pos + 5, src, n);
        pos += 5 + n;
        src += n;
        left -= n;
    } while (left);
    be32_put(o + pos, vmdk_adler32(1, in, len));
    return (ssize_t)(pos + 4);
}
