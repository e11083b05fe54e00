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
 * Each thread keeps its own deflate and zstd contexts (freed by a pthread
 * key destructor when the thread ends): nothing is allocated per grain.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>
#include <zstd.h>
#include <zstd_errors.h>

#include "formats/vmdk_int.h"
#include "formats/vmdk_write.h"
#include "util/endian.h"

#define DEFLATE_LEVEL 6
#define STORED_MAX 65535u           /* bytes in one stored block */
#define PROBE_SAVING_SHIFT 6        /* the probe must save 1/64 */
#define PROBE_MIN_LEN 4096

struct dctx {
    z_stream zs;
    bool zs_ready;
    ZSTD_CCtx *zstd;
};

static pthread_key_t dctx_key;
static pthread_once_t dctx_once = PTHREAD_ONCE_INIT;
static int dctx_key_err;

static void dctx_free(void *p)
{
    struct dctx *c = p;

    if (!c)
        return;
    if (c->zs_ready)
        deflateEnd(&c->zs);
    ZSTD_freeCCtx(c->zstd);
    free(c);
}

static void dctx_key_init(void)
{
    dctx_key_err = pthread_key_create(&dctx_key, dctx_free);
}

static struct dctx *dctx_get(void)
{
    struct dctx *c;

    if (pthread_once(&dctx_once, dctx_key_init) != 0 || dctx_key_err)
        return NULL;
    if ((c = pthread_getspecific(dctx_key)))
        return c;
    if (!(c = calloc(1, sizeof(*c))))
        return NULL;
    if (pthread_setspecific(dctx_key, c) != 0) {
        free(c);
        return NULL;
    }
    return c;
}

/* 1 when zstd's fastest level cannot save 1/64 of the grain. */
static int probe_incompressible(struct dctx *c, const void *in, size_t len, void *out,
                                size_t cap)
{
    size_t want = len - (len >> PROBE_SAVING_SHIFT), r;

    if (len < PROBE_MIN_LEN || cap < want)
        return 0;
    if (!c->zstd && !(c->zstd = ZSTD_createCCtx()))
        return -ENOMEM;
    r = ZSTD_compressCCtx(c->zstd, out, want, in, len, 1);
    return ZSTD_isError(r) && ZSTD_getErrorCode(r) == ZSTD_error_dstSize_tooSmall;
}

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
    struct dctx *c = dctx_get();
    uint8_t *o = out;
    int r;

    if (!c)
        return -ENOMEM;
    if (len < 16 || cap < 6 + 1)
        return 0;
    /* it must come out shorter than the input */
    if (cap > len - 1)
        cap = len - 1;
    if ((r = probe_incompressible(c, in, len, out, cap)) != 0)
        return r > 0 ? 0 : r;
    if (!c->zs_ready) {
        memset(&c->zs, 0, sizeof(c->zs));
        if (deflateInit2(&c->zs, DEFLATE_LEVEL, Z_DEFLATED, -15, 8, Z_DEFAULT_STRATEGY) != Z_OK)
            return -ENOMEM;
        c->zs_ready = true;
    } else if (deflateReset(&c->zs) != Z_OK) {
        return -EIO;
    }
    zlib_header(o, 2);          /* FLEVEL 2: the default level */
    c->zs.next_in = (Bytef *)(uintptr_t)in;
    c->zs.avail_in = (uInt)len;
    c->zs.next_out = o + 2;
    c->zs.avail_out = (uInt)(cap - 2 - 4);
    r = deflate(&c->zs, Z_FINISH);
    if (r == Z_OK || r == Z_BUF_ERROR)
        return 0;               /* does not fit: store it */
    if (r != Z_STREAM_END)
        return -EIO;
    size_t n = 2 + (cap - 2 - 4 - c->zs.avail_out);
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
