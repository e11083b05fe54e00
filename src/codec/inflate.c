/* Inflating one compressed unit: a qcow2 cluster (raw deflate or zstd), or
 * a VMDK grain (a zlib stream).
 *
 * qcow2 clusters: raw deflate ("zlib") or zstd, one cluster each.
 *
 * The stored length is only known to the sector, so the input may carry
 * bytes of the next compressed cluster after the end of this one's stream:
 * decoding stops once the cluster is full.  A stream that would produce
 * more than a cluster is refused (the output never goes past `cap`).
 *
 * zstd: a frame declares the window (history buffer) its decoder needs,
 * up to 2^31 bytes, and the decoder allocates it before it sees any data.
 * One cluster never needs a window larger than the cluster, so each
 * decoder is limited to that (ZSTD_d_windowLogMax): a hostile frame asking
 * for 128 MiB is refused instead of costing 128 MiB per reader thread.
 *
 * VMDK grains: a zlib stream (2-byte header, deflate data, big-endian
 * Adler-32 of the grain), inflated raw and checked with adler32.c.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>
#define ZSTD_STATIC_LINKING_ONLY   /* ZSTD_getFrameHeader: the window a frame asks for */
#include <zstd.h>
#include <zstd_errors.h>

#include "codec/codec.h"
#include "util/diag.h"

struct qcow2_inflater {
    uint8_t type;
    unsigned window_log;    /* zstd: the largest window accepted */
    bool z_ready;
    z_stream z;
    ZSTD_DCtx *zs;
};

int qcow2_inflater_new(struct qcow2_inflater **out, uint8_t compression_type,
                       uint32_t cluster_size)
{
    struct qcow2_inflater *z = calloc(1, sizeof(*z));

    *out = NULL;
    if (!z)
        return -ENOMEM;
    z->type = compression_type;
    if (compression_type == CODEC_DEFLATE) {
        /* negative window bits: raw deflate, any window size up to 32 KiB */
        if (inflateInit2(&z->z, -15) != Z_OK) {
            free(z);
            return -ENOMEM;
        }
        z->z_ready = true;
    } else if (compression_type == CODEC_ZSTD) {
        /* the cluster size, but at least what zstd accepts as a limit (a
         * compressor may round a 512-byte cluster's window up to 1 KiB) */
        ZSTD_bounds b = ZSTD_dParam_getBounds(ZSTD_d_windowLogMax);
        z->window_log = ZSTD_isError(b.error) || b.lowerBound < 0 ? 10 : (unsigned)b.lowerBound;
        while (z->window_log < 31 && (1u << z->window_log) < cluster_size)
            z->window_log++;
        z->zs = ZSTD_createDCtx();
        if (!z->zs || ZSTD_isError(ZSTD_DCtx_setParameter(z->zs, ZSTD_d_windowLogMax,
                                                          (int)z->window_log))) {
            ZSTD_freeDCtx(z->zs);
            free(z);
            return -ENOMEM;
        }
    } else {
        free(z);
        return -ENOTSUP;
    }
    *out = z;
    return 0;
}

void qcow2_inflater_free(struct qcow2_inflater *z)
{
    if (!z)
        return;
    if (z->z_ready)
        inflateEnd(&z->z);
    ZSTD_freeDCtx(z->zs);
    free(z);
}

static int inflate_zlib(struct qcow2_inflater *z, const uint8_t *in, size_t inlen,
                        uint8_t *out, size_t cap, size_t *produced, char *why,
                        size_t whylen)
{
    z_stream *s = &z->z;
    uint8_t extra;

    if (inflateReset(s) != Z_OK) {
        snprintf(why, whylen, "cannot reset the inflater");
        return -EIO;
    }
    s->next_in = (Bytef *)in;
    s->avail_in = (uInt)inlen;
    s->next_out = out;
    s->avail_out = (uInt)cap;
    int ret = inflate(s, Z_FINISH);
    *produced = cap - s->avail_out;
    if (ret == Z_STREAM_END)
        return 0;
    if (ret == Z_DATA_ERROR || ret == Z_NEED_DICT || ret == Z_MEM_ERROR ||
        ret == Z_STREAM_ERROR) {
        snprintf(why, whylen, "corrupt deflate data (%s)", s->msg ? s->msg : "zlib error");
        return -EINVAL;
    }
    if (s->avail_out != 0)
        return 0; /* input ran out early: the caller sees a short cluster */
    /* The cluster is full but the stream has not ended: it must end without
     * producing another byte (the end-of-block code may still be pending). */
    s->next_out = &extra;
    s->avail_out = 1;
    ret = inflate(s, Z_FINISH);
    if (s->avail_out == 0) {
        snprintf(why, whylen, "inflates to more than the cluster size (%zu bytes)", cap);
        return -EINVAL;
    }
    if (ret == Z_DATA_ERROR) {
        snprintf(why, whylen, "corrupt deflate data (%s)", s->msg ? s->msg : "zlib error");
        return -EINVAL;
    }
    return 0;
}

/* Why zstd refused a frame: its window (or declared size) when that is the
 * reason, else zstd's own words. */
static void zstd_why(const struct qcow2_inflater *z, size_t ret, const uint8_t *in,
                     size_t inlen, size_t cap, char *why, size_t whylen)
{
    ZSTD_frameHeader fh;

    if (ZSTD_getErrorCode(ret) != ZSTD_error_frameParameter_windowTooLarge ||
        ZSTD_getFrameHeader(&fh, in, inlen) != 0) {
        snprintf(why, whylen, "corrupt zstd data (%s)", ZSTD_getErrorName(ret));
        return;
    }
    if (fh.frameContentSize != ZSTD_CONTENTSIZE_UNKNOWN && fh.frameContentSize > cap)
        snprintf(why, whylen, "inflates to more than the cluster size (%zu bytes): the "
                 "zstd frame declares %llu bytes", cap, fh.frameContentSize);
    else
        snprintf(why, whylen, "zstd frame asks for a window larger than the cluster size "
                 "(%llu bytes allowed): it asks for %llu bytes",
                 1ULL << z->window_log, fh.windowSize);
}

static int inflate_zstd(struct qcow2_inflater *z, const uint8_t *in, size_t inlen,
                        uint8_t *out, size_t cap, size_t *produced, char *why,
                        size_t whylen)
{
    ZSTD_inBuffer ib = { in, inlen, 0 };
    ZSTD_outBuffer ob = { out, cap, 0 };
    size_t ret = 1;
    uint8_t extra;

    ZSTD_DCtx_reset(z->zs, ZSTD_reset_session_only);
    while (ob.pos < ob.size) {
        size_t in0 = ib.pos, out0 = ob.pos;
        ret = ZSTD_decompressStream(z->zs, &ob, &ib);
        if (ZSTD_isError(ret)) {
            zstd_why(z, ret, in, inlen, cap, why, whylen);
            *produced = ob.pos;
            return -EINVAL;
        }
        if (ret == 0 || (ib.pos == in0 && ob.pos == out0))
            break; /* frame complete, or input exhausted */
    }
    *produced = ob.pos;
    if (ret == 0 || ob.pos < ob.size)
        return 0;
    /* full but the frame goes on: it may only finish, not produce more */
    ZSTD_outBuffer eb = { &extra, 1, 0 };
    for (;;) {
        size_t in0 = ib.pos;
        ret = ZSTD_decompressStream(z->zs, &eb, &ib);
        if (ZSTD_isError(ret)) {
            snprintf(why, whylen, "corrupt zstd data (%s)", ZSTD_getErrorName(ret));
            return -EINVAL;
        }
        if (eb.pos) {
            snprintf(why, whylen, "inflates to more than the cluster size (%zu bytes)",
                     cap);
            return -EINVAL;
        }
        if (ret == 0 || ib.pos == in0)
            return 0;
    }
}

int qcow2_inflate(struct qcow2_inflater *z, const uint8_t *in, size_t inlen,
                  uint8_t *out, size_t cap, size_t *produced, char *why, size_t whylen)
{
    *produced = 0;
    if (z->type == CODEC_DEFLATE)
        return inflate_zlib(z, in, inlen, out, cap, produced, why, whylen);
    return inflate_zstd(z, in, inlen, out, cap, produced, why, whylen);
}

/* --- VMDK grains: zlib streams ------------------------------------------------ */

int codec_zlib_inflate_grain(const uint8_t *cdata, size_t clen, uint8_t *out,
                             uint32_t grain_bytes, struct diag *d, const char *file,
                             int64_t at)
{
    z_stream z;
    int r;

    /* RFC 1950 header: deflate, window <= 32 KiB, no preset dictionary */
    if (clen < 6 || (cdata[0] & 0x0f) != 8 || (cdata[0] >> 4) > 7 || (cdata[1] & 0x20) ||
        ((unsigned)cdata[0] << 8 | cdata[1]) % 31 != 0)
        return diag_fail(d, -EINVAL, file, at,
                         "compressed grain does not start with a zlib header");
    memset(&z, 0, sizeof(z));
    if (inflateInit2(&z, -15) != Z_OK)
        return diag_fail(d, -ENOMEM, file, at, "cannot initialise zlib");
    z.next_in = (Bytef *)(uintptr_t)(cdata + 2);
    z.avail_in = (uInt)(clen - 2);
    z.next_out = out;
    z.avail_out = grain_bytes;
    r = inflate(&z, Z_FINISH);
    size_t got = z.total_out;
    size_t left = z.avail_in;
    const uint8_t *trailer = z.next_in;
    const char *msg = z.msg;
    inflateEnd(&z);
    if (r == Z_STREAM_END) {
        if (left < 4)
            return diag_fail(d, -EINVAL, file, at,
                             "compressed grain of %zu bytes is truncated (no checksum)", clen);
        uint32_t want = (uint32_t)trailer[0] << 24 | (uint32_t)trailer[1] << 16 |
                        (uint32_t)trailer[2] << 8 | trailer[3];
        if (vmdk_adler32(1, out, got) != want)
            return diag_fail(d, -EINVAL, file, at,
                             "compressed grain is corrupt (checksum mismatch)");
        memset(out + got, 0, grain_bytes - got);
        return 0;
    }
    if (r == Z_BUF_ERROR && got == grain_bytes)
        return diag_fail(d, -EINVAL, file, at,
                         "compressed grain inflates to more than the grain size (%u bytes)",
                         grain_bytes);
    if (r == Z_BUF_ERROR)
        return diag_fail(d, -EINVAL, file, at,
                         "compressed grain of %zu bytes is truncated (inflated %zu bytes)",
                         clen, got);
    return diag_fail(d, -EINVAL, file, at, "compressed grain is corrupt (zlib: %s)",
                     msg ? msg : "error");
}
