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
 * Each thread keeps its own compression context (a pthread key frees it
 * when the thread ends), so that nothing is allocated per cluster.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>
#include <zstd.h>
#include <zstd_errors.h>

#include "formats/qcow2_format.h"
#include "formats/qcow2_write.h"

#define ZLIB_WINDOW_BITS (-12)
#define ZLIB_MEM_LEVEL 9
#define ZSTD_LEVEL 3

struct cctx {
    z_stream zs;
    bool zs_ready;
    ZSTD_CCtx *zstd;
};

static pthread_key_t cctx_key;
static pthread_once_t cctx_once = PTHREAD_ONCE_INIT;
static int cctx_key_err;

static void cctx_free(void *p)
{
    struct cctx *c = p;

    if (!c)
        return;
    if (c->zs_ready)
        deflateEnd(&c->zs);
    ZSTD_freeCCtx(c->zstd);
    free(c);
}

static void cctx_key_init(void)
{
    cctx_key_err = pthread_key_create(&cctx_key, cctx_free);
}

static struct cctx *cctx_get(void)
{
    struct cctx *c;

    if (pthread_once(&cctx_once, cctx_key_init) != 0 || cctx_key_err)
        return NULL;
    c = pthread_getspecific(cctx_key);
    if (c)
        return c;
    c = calloc(1, sizeof(*c));
    if (!c)
        return NULL;
    if (pthread_setspecific(cctx_key, c) != 0) {
        free(c);
        return NULL;
    }
    return c;
}

/* zstd's fastest level as a probe: when even it cannot save PROBE_SAVING
 * of the cluster, deflate (4 KiB window) will not save much either. */
#define PROBE_MIN_LEN 4096
#define PROBE_SAVING_SHIFT 6    /* 1/64 of the cluster */

static int probe_incompressible(struct cctx *c, const void *in, size_t len, void *out,
                                size_t cap)
{
    size_t r;

    if (len < PROBE_MIN_LEN || cap < len - (len >> PROBE_SAVING_SHIFT))
        return 0;
    if (!c->zstd && !(c->zstd = ZSTD_createCCtx()))
        return -ENOMEM;
    r = ZSTD_compressCCtx(c->zstd, out, len - (len >> PROBE_SAVING_SHIFT), in, len, 1);
    return ZSTD_isError(r) && ZSTD_getErrorCode(r) == ZSTD_error_dstSize_tooSmall;
}

static ssize_t deflate_cluster(struct cctx *c, const void *in, size_t len, void *out,
                               size_t cap)
{
    int r = probe_incompressible(c, in, len, out, cap);

    if (r)
        return r > 0 ? 0 : r;
    if (!c->zs_ready) {
        memset(&c->zs, 0, sizeof(c->zs));
        if (deflateInit2(&c->zs, Z_DEFAULT_COMPRESSION, Z_DEFLATED, ZLIB_WINDOW_BITS,
                         ZLIB_MEM_LEVEL, Z_DEFAULT_STRATEGY) != Z_OK)
            return -ENOMEM;
        c->zs_ready = true;
    } else if (deflateReset(&c->zs) != Z_OK) {
        return -EIO;
    }
    c->zs.next_in = (Bytef *)(uintptr_t)in;
    c->zs.avail_in = (uInt)len;
    c->zs.next_out = out;
    c->zs.avail_out = (uInt)cap;
    r = deflate(&c->zs, Z_FINISH);
    if (r == Z_STREAM_END)
        return (ssize_t)(cap - c->zs.avail_out);
    if (r == Z_OK || r == Z_BUF_ERROR)
        return 0; /* does not fit in cap */
    return -EIO;
}

static ssize_t zstd_cluster(struct cctx *c, const void *in, size_t len, void *out, size_t cap)
{
    size_t r;

    if (!c->zstd && !(c->zstd = ZSTD_createCCtx()))
        return -ENOMEM;
    r = ZSTD_compressCCtx(c->zstd, out, cap, in, len, ZSTD_LEVEL);
    if (ZSTD_isError(r))
        return ZSTD_getErrorCode(r) == ZSTD_error_dstSize_tooSmall ? 0 : -EIO;
    return (ssize_t)r;
}

ssize_t qcow2w_compress_cluster(int type, const void *in, size_t len, void *out, size_t cap)
{
    struct cctx *c = cctx_get();
    size_t limit;

    if (!c)
        return -ENOMEM;
    /* compressed clusters are packed byte by byte (as qemu does), so any
     * saving counts: store it compressed if it comes out shorter */
    if (len < 2)
        return 0;
    limit = len - 1;
    if (limit > cap)
        limit = cap;
    if (type == QCOW2_COMPRESSION_ZSTD)
        return zstd_cluster(c, in, len, out, limit);
    return deflate_cluster(c, in, len, out, limit);
}
