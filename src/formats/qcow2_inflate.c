/* qcow2 compressed clusters: raw deflate (zlib) or zstd, one cluster each.
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
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>
#define ZSTD_STATIC_LINKING_ONLY   /* ZSTD_getFrameHeader: the window a frame asks for */
#include <zstd.h>
#include <zstd_errors.h>

#include "formats/qcow2/read_int.h"

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
    if (compression_type == QCOW2_COMPRESSION_ZLIB) {
        /* negative window bits: raw deflate, any window size up to 32 KiB */
        if (inflateInit2(&z->z, -15) != Z_OK) {
            free(z);
            return -ENOMEM;
        }
        z->z_ready = true;
    } else if (compression_type == QCOW2_COMPRESSION_ZSTD) {
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
    if (z->type == QCOW2_COMPRESSION_ZLIB)
        return inflate_zlib(z, in, inlen, out, cap, produced, why, whylen);
    return inflate_zstd(z, in, inlen, out, cap, produced, why, whylen);
}

void qcow2_inflate_pool_init(struct qcow2_inflate_pool *p, uint8_t type,
                             uint32_t cluster_size)
{
    pthread_mutex_init(&p->lock, NULL);
    p->free = NULL;
    p->type = type;
    p->cluster_size = cluster_size;
}

static void slot_free(struct qcow2_inflate_slot *s)
{
    qcow2_inflater_free(s->z);
    free(s->in);
    free(s->out);
    free(s);
}

void qcow2_inflate_pool_destroy(struct qcow2_inflate_pool *p)
{
    while (p->free) {
        struct qcow2_inflate_slot *s = p->free;
        p->free = s->next;
        slot_free(s);
    }
    pthread_mutex_destroy(&p->lock);
}

struct qcow2_inflate_slot *qcow2_inflate_pool_take(struct qcow2_inflate_pool *p)
{
    pthread_mutex_lock(&p->lock);
    struct qcow2_inflate_slot *s = p->free;
    if (s)
        p->free = s->next;
    pthread_mutex_unlock(&p->lock);
    if (s)
        return s;
    s = calloc(1, sizeof(*s));
    if (!s)
        return NULL;
    /* the descriptor can span up to two clusters of sectors */
    s->in = malloc((size_t)p->cluster_size * 2);
    s->out = malloc(p->cluster_size);
    if (!s->in || !s->out || qcow2_inflater_new(&s->z, p->type, p->cluster_size) < 0) {
        slot_free(s);
        return NULL;
    }
    return s;
}

void qcow2_inflate_pool_give(struct qcow2_inflate_pool *p, struct qcow2_inflate_slot *s)
{
    pthread_mutex_lock(&p->lock);
    s->next = p->free;
    p->free = s;
    pthread_mutex_unlock(&p->lock);
}
