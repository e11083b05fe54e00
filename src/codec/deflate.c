/* Compressing one unit, on the pipeline's worker threads: a qcow2 cluster
 * or a VMDK grain.  The contexts are the thread's own (ctx.c): nothing is
 * allocated per cluster or grain.
 *
 * qcow2, zlib: raw deflate (no zlib header) with a 4 KiB window, which is
 * what qemu's reader inflates with (inflateInit2(-12)): a stream using
 * longer distances would not read back in qemu.  This is also why
 * whole-buffer compressors with a fixed 32 KiB window (libdeflate) cannot
 * be used here.  qcow2, zstd: one frame at zstd's default level, as qemu
 * writes it.
 *
 * VMDK: grains as zlib streams (RFC 1950: 2-byte header, deflate data,
 * big-endian Adler-32), which is what VMware and qemu inflate.  Deflate
 * runs raw and the Adler-32 is added here with adler32.c (zlib's is
 * scalar).  zlib's level 6, as qemu-img uses: sizes stay those of
 * qemu-img's output.  A grain deflate cannot shrink is stored instead, as
 * a zlib stream of stored blocks, which costs a copy and a checksum.
 *
 * zlib spends as long failing on incompressible (random, encrypted,
 * already compressed) data as it spends compressing text, and such a
 * cluster or grain is then stored plain anyway.  A quick probe with zstd's
 * fastest level (about 1/100 of deflate's time on such data) skips those
 * that it cannot shrink by 1/64 (deflate_probed): deflate would save little
 * there too, and storing them plain costs at most that little space, for
 * about half the time on a typical disk.  zstd itself detects
 * incompressible data fast.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "codec/codec.h"
#include "util/endian.h"

/* Raw deflate of in[0..len) into dst[0..dst_cap), unless the zstd probe
 * (into out[0..probe_cap), scratch) finds the input incompressible: 0
 * then, as when it does not fit; else deflate_ctx_raw's return. */
static ssize_t deflate_probed(const void *in, size_t len, void *out, size_t probe_cap,
                              void *dst, size_t dst_cap, int level, int window_bits,
                              int mem_level)
{
    int r = deflate_ctx_incompressible(in, len, out, probe_cap);

    if (r != 0)
        return r > 0 ? 0 : r;
    return deflate_ctx_raw(in, len, dst, dst_cap, level, window_bits, mem_level);
}

/* --- qcow2 clusters ------------------------------------------------------------ */

#define ZLIB_WINDOW_BITS 12      /* qemu inflates with a 4 KiB window */
#define ZLIB_MEM_LEVEL 9
#define ZSTD_LEVEL 3

ssize_t qcow2w_compress_cluster(int type, const void *in, size_t len, void *out, size_t cap)
{
    size_t limit;

    /* compressed clusters are packed byte by byte (as qemu does), so any
     * saving counts: store it compressed if it comes out shorter */
    if (len < 2)
        return 0;
    limit = len - 1;
    if (limit > cap)
        limit = cap;
    if (type == CODEC_ZSTD)
        return deflate_ctx_zstd(in, len, out, limit, ZSTD_LEVEL);
    return deflate_probed(in, len, out, limit, out, limit, Z_DEFAULT_COMPRESSION,
                          ZLIB_WINDOW_BITS, ZLIB_MEM_LEVEL);
}

ssize_t qcow2w_compress_granule(int type, const void *in, size_t len, size_t cluster_size,
                                const void *rest, void *out, size_t cap)
{
    if (len > cluster_size)
        return -EINVAL;
    if (len == cluster_size)
        return qcow2w_compress_cluster(type, in, len, out, cap);
    /* readers inflate a whole cluster: pad the short one (a copy of its
     * own, since this runs on several threads at once) */
    uint8_t *pad = rest ? malloc(cluster_size) : calloc(1, cluster_size);
    if (!pad)
        return -ENOMEM;
    if (rest)
        memcpy(pad, rest, cluster_size);
    memcpy(pad, in, len);
    ssize_t r = qcow2w_compress_cluster(type, pad, cluster_size, out, cap);
    free(pad);
    return r;
}

/* --- VMDK grains: zlib streams -------------------------------------------------- */

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

    if (len < 16 || cap < 6 + 1)
        return 0;
    /* it must come out shorter than the input */
    if (cap > len - 1)
        cap = len - 1;
    ssize_t d = deflate_probed(in, len, out, cap, o + 2, cap - 2 - 4, DEFLATE_LEVEL, 15, 8);
    if (d <= 0)
        return d;               /* 0: does not fit, store it */
    zlib_header(o, 2);          /* FLEVEL 2: the default level */
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
