/* rebase: the ranges an image leaves to its backing chain, compared
 * between the old chain (the image's own reads) and the new backing file
 * cluster by cluster, and the old content written into the image where
 * they differ (see rebase.h), compressed with -c where that shrinks them.  Ranges the image allocates are skipped. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "formats/bd.h"
#include "rebase.h"
#include "util/diag.h"

#define CHUNK (1u << 20)

static void done_cb(void *opaque, int err)
{
    *(int *)opaque = err;
}

/* The new backing file's bytes (zeros past its end, or without one). */
static int read_new(struct bd *nb, uint8_t *buf, uint64_t len, uint64_t off)
{
    uint64_t n = !nb || off >= nb->size ? 0 : nb->size - off < len ? nb->size - off : len;

    memset(buf + n, 0, len - n);
    return n ? bd_pread(nb, buf, n, off) : 0;
}

/* *z = how many bytes from `off` (at most len) the chain of `bd` reads as
 * zeros by block status alone (no image, or past its end: zeros). */
static int zero_len(struct bd *bd, uint64_t off, uint64_t len, uint64_t *z)
{
    *z = 0;
    while (*z < len) {
        struct bd_extent e;
        if (!bd || off + *z >= bd->size) {
            *z = len;
            break;
        }
        int r = bd_block_status(bd, off + *z, len - *z, &e);
        if (r < 0)
            return r;
        if (!(e.flags & BD_ZERO) || (e.flags & BD_DATA))
            break;
        *z += e.len;
    }
    if (*z > len)
        *z = len;
    return 0;
}

int rebase_copy(const struct rebase_opts *o, struct diag *d, uint64_t *written)
{
    struct bd *img = o->img;
    uint64_t size = img->size, gran = o->out->granule, chunk = CHUNK;
    uint8_t *a = NULL, *b = NULL, *cbuf = NULL;
    bool compress = o->compress && o->out->drv->compress && o->out->drv->pwrite_compressed;
    int r = 0;

    *written = 0;
    if (gran < 512 || gran > (64u << 20))
        return diag_fail(d, -EINVAL, img->filename, -1, "unexpected cluster size %u",
                         (unsigned)gran);
    if (chunk < gran)
        chunk = gran;
    chunk -= chunk % gran;
    if (posix_memalign((void **)&a, 4096, chunk) || posix_memalign((void **)&b, 4096, chunk)) {
        free(a);
        return diag_fail(d, -ENOMEM, img->filename, -1, "out of memory");
    }
    if (compress && !(cbuf = malloc(gran))) {
        free(a);
        free(b);
        return diag_fail(d, -ENOMEM, img->filename, -1, "out of memory");
    }
    /* clusters written so far end here: a cluster the image allocates in
     * part (subclusters) is met by two extents, and written once */
    uint64_t written_end = 0;
    for (uint64_t off = 0; off < size && r == 0;) {
        struct bd_extent e;
        /* this layer only: what the image allocates stays as it is */
        if ((r = img->drv->block_status(img, off, size - off, &e)) < 0)
            break;
        uint64_t uend = off + (e.len < size - off ? e.len : size - off);
        if (e.flags & BD_ALLOCATED) {
            off = uend;
            if (o->progress)
                o->progress(o->progress_opaque, off, size);
            continue;
        }
        /* [off, uend) reads from the backing chain: compared in chunks of
         * whole clusters, a differing cluster written whole (the image's
         * view of it, its own subclusters included) */
        while (off < uend && r == 0) {
            /* where both the old chain and the new backing read as zeros
             * there is nothing to compare (whole clusters skipped) */
            if (off % gran == 0) {
                uint64_t zo, zn;
                if ((r = zero_len(img, off, uend - off, &zo)) < 0 ||
                    (zo >= gran && (r = zero_len(o->new_backing, off, zo, &zn)) < 0))
                    break;
                uint64_t to = zo >= gran ? off + (zn < zo ? zn : zo) : off;
                if (to < uend)
                    to -= to % gran;
                if (to > off) {
                    off = to;
                    if (o->progress)
                        o->progress(o->progress_opaque, off, size);
                    continue;
                }
            }
            uint64_t start = off - off % gran, end = start + chunk;
            uint64_t uend_up = uend % gran ? uend - uend % gran + gran : uend;
            end = end < uend_up ? end : uend_up;
            end = end < size ? end : size;
            uint64_t n = end - start;
            if ((r = bd_pread(img, a, n, start)) < 0 ||
                (r = read_new(o->new_backing, b, n, start)) < 0)
                break;
            /* differing clusters back to back go out in one write: [run, c) */
            uint64_t run = UINT64_MAX;
            for (uint64_t c = start; c < end + gran && r == 0; c += gran) {
                bool differs = false;
                if (c < end) {
                    uint64_t lo = c > off ? c : off, hi = c + gran < uend ? c + gran : uend;
                    differs = c >= written_end &&
                              memcmp(a + (lo - start), b + (lo - start), hi - lo) != 0;
                }
                if (differs && !compress) {
                    if (run == UINT64_MAX)
                        run = c;
                    continue;
                }
                if (run != UINT64_MAX) {
                    uint64_t l = (c < end ? c : end) - run;
                    int err = 0;
                    r = o->out->drv->pwrite(o->out, a + (run - start), l, run, done_cb, &err);
                    if (r == 0)
                        r = err;
                    *written += l;
                    written_end = run + l + gran - 1 - (run + l - 1) % gran;
                    run = UINT64_MAX;
                }
                if (!differs || r < 0)
                    continue;
                uint64_t l = end - c < gran ? end - c : gran;
                int err = 0;
                ssize_t cl = o->out->drv->compress(o->out, a + (c - start), l, cbuf, gran);
                if (cl < 0)
                    r = (int)cl;
                else if (cl > 0)
                    r = o->out->drv->pwrite_compressed(o->out, cbuf, (size_t)cl, c, done_cb,
                                                       &err);
                else
                    r = o->out->drv->pwrite(o->out, a + (c - start), l, c, done_cb, &err);
                if (r == 0)
                    r = err;
                *written += l;
                written_end = c + gran;
            }
            off = end < uend ? end : uend;
            if (o->progress)
                o->progress(o->progress_opaque, off, size);
        }
    }
    free(a);
    free(b);
    free(cbuf);
    return r;
}
