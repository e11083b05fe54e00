/* qcow2 writer: compression of one cluster, on the pipeline's worker threads.
 *
 * zlib: raw deflate (no zlib header) with a 4 KiB window, which is what
 * qemu's reader inflates with (inflateInit2(-12)): a stream using longer
 * distances would not read back in qemu.  This is also why whole-buffer
 * compressors with a fixed 32 KiB window (libdeflate) cannot be used here.
 * zstd: one frame at zstd's default level, as qemu writes it.
 *
 * zlib spends as long failing on incompressible (random, encrypted,
 * already compressed) data as it spends compressing text, and such a
 * cluster is then stored plain anyway.  A quick probe with zstd's fastest
 * level (about 1/100 of deflate's time on such data) skips clusters that it
 * cannot shrink by 1/64: deflate would save little there too, and storing
 * them plain costs at most that little space, for about half the time on a
 * typical disk.  zstd itself detects incompressible data fast.
 *
 * The contexts are the thread's own (deflate_ctx.c): nothing is allocated
 * per cluster.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "formats/deflate_ctx.h"
#include "formats/qcow2/format.h"
#include "formats/qcow2/write.h"

#define ZLIB_WINDOW_BITS 12      /* qemu inflates with a 4 KiB window */
#define ZLIB_MEM_LEVEL 9
#define ZSTD_LEVEL 3

ssize_t qcow2w_compress_cluster(int type, const void *in, size_t len, void *out, size_t cap)
{
    size_t limit;
    int r;

    /* compressed clusters are packed byte by byte (as qemu does), so any
     * saving counts: store it compressed if it comes out shorter */
    if (len < 2)
        return 0;
    limit = len - 1;
    if (limit > cap)
        limit = cap;
    if (type == QCOW2_COMPRESSION_ZSTD)
        return deflate_ctx_zstd(in, len, out, limit, ZSTD_LEVEL);
    if ((r = deflate_ctx_incompressible(in, len, out, limit)) != 0)
        return r > 0 ? 0 : r;
    return deflate_ctx_raw(in, len, out, limit, Z_DEFAULT_COMPRESSION, ZLIB_WINDOW_BITS,
                           ZLIB_MEM_LEVEL);
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
