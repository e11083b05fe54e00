/* Each thread's raw-deflate and zstd compression contexts (codec.h):
 * created on a thread's first use, reset between uses, freed by a pthread
 * key when the thread ends. */
#include "codec/codec.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>
#include <zstd.h>
#include <zstd_errors.h>

#define PROBE_MIN_LEN 4096
#define PROBE_SAVING_SHIFT 6        /* the probe must save 1/64 */

struct ctx {
    z_stream zs;
    bool zs_ready;
    int level, window_bits, mem_level;  /* what zs was set up with */
    ZSTD_CCtx *zstd;
};

static pthread_key_t key;
static pthread_once_t key_once = PTHREAD_ONCE_INIT;
static int key_err;

static void ctx_free(void *p)
{
    struct ctx *c = p;

    if (!c)
        return;
    if (c->zs_ready)
        deflateEnd(&c->zs);
    ZSTD_freeCCtx(c->zstd);
    free(c);
}

static void key_init(void)
{
    key_err = pthread_key_create(&key, ctx_free);
}

static struct ctx *ctx_get(void)
{
    struct ctx *c;

    if (pthread_once(&key_once, key_init) != 0 || key_err)
        return NULL;
    if ((c = pthread_getspecific(key)))
        return c;
    if (!(c = calloc(1, sizeof(*c))))
        return NULL;
    if (pthread_setspecific(key, c) != 0) {
        free(c);
        return NULL;
    }
    return c;
}

static ZSTD_CCtx *zstd_get(struct ctx *c)
{
    if (!c->zstd)
        c->zstd = ZSTD_createCCtx();
    return c->zstd;
}

ssize_t deflate_ctx_raw(const void *in, size_t len, void *out, size_t cap, int level,
                        int window_bits, int mem_level)
{
    struct ctx *c = ctx_get();
    int r;

    if (!c)
        return -ENOMEM;
    /* one thread may serve writers with other settings (tests do) */
    if (c->zs_ready && (c->level != level || c->window_bits != window_bits ||
                        c->mem_level != mem_level)) {
        deflateEnd(&c->zs);
        c->zs_ready = false;
    }
    if (!c->zs_ready) {
        memset(&c->zs, 0, sizeof(c->zs));
        if (deflateInit2(&c->zs, level, Z_DEFLATED, -window_bits, mem_level,
                         Z_DEFAULT_STRATEGY) != Z_OK)
            return -ENOMEM;
        c->zs_ready = true;
        c->level = level;
        c->window_bits = window_bits;
        c->mem_level = mem_level;
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
        return 0;
    return -EIO;
}

ssize_t deflate_ctx_zstd(const void *in, size_t len, void *out, size_t cap, int level)
{
    struct ctx *c = ctx_get();
    ZSTD_CCtx *z;
    size_t r;

    if (!c || !(z = zstd_get(c)))
        return -ENOMEM;
    r = ZSTD_compressCCtx(z, out, cap, in, len, level);
    if (ZSTD_isError(r))
        return ZSTD_getErrorCode(r) == ZSTD_error_dstSize_tooSmall ? 0 : -EIO;
    return (ssize_t)r;
}

int deflate_ctx_incompressible(const void *in, size_t len, void *out, size_t cap)
{
    size_t want = len - (len >> PROBE_SAVING_SHIFT);

    if (len < PROBE_MIN_LEN || cap < want)
        return 0;
    ssize_t r = deflate_ctx_zstd(in, len, out, want, 1);
    if (r == -ENOMEM)
        return -ENOMEM;
    return r == 0;   /* another zstd error: let deflate decide */
}
