/* The pieces the simple image writers share (writer_util.h). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/falloc.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "formats/writer_util.h"
#include "io/bfile.h"
#include "io/fault.h"
#include "util/diag.h"
#include "zerodetect/zerodetect.h"

void wstate_init(struct wstate *s, struct bd *bd, const struct bd_create_opts *o)
{
    s->bd = bd;
    s->ioq = o->ioq;
    s->durable = o->durable;
    s->finished = false;
    s->err = 0;
}

int wstate_err(struct wstate *s, int r)
{
    if (r < 0 && !s->err)
        s->err = r;
    return r;
}

int wstate_check(struct wstate *s, uint64_t size, uint64_t off, uint64_t len,
                 const char *op)
{
    struct bd *bd = s->bd;

    if (s->err)
        return s->err;
    if (s->finished)
        return wstate_err(s, diag_fail(bd->diag, -EINVAL, bd->filename, (int64_t)off,
                                       "internal error: %s after finish", op));
    /* a write may end inside a granule only in the image's last one: the
     * source can end before the image does (vpc and vdi round the size
     * up), and the rest of that granule is left as it is (zeros) */
    if (len == 0 || off >= size || len > size - off || off % bd->granule ||
        (len % bd->granule && off + len <= (size - 1) / bd->granule * bd->granule))
        return diag_fail(bd->diag, -EINVAL, bd->filename, (int64_t)off,
                         "internal error: %s of %llu bytes at %llu is not aligned to %u "
                         "bytes inside the image", op, (unsigned long long)len,
                         (unsigned long long)off, bd->granule);
    return 0;
}

int wstate_write(struct wstate *s, struct bfile *f, const void *buf, size_t len,
                 uint64_t host, ioq_done_fn done, void *opaque)
{
    if (s->ioq)
        return wstate_err(s, ioq_pwrite(s->ioq, f, buf, len, host, done, opaque));
    int r = wstate_err(s, bfile_pwrite(f, buf, len, host));
    done(opaque, r);
    return r;
}

int wstate_finish_begin(struct wstate *s)
{
    if (s->err)
        return s->err;
    if (s->finished)
        return wstate_err(s, diag_fail(s->bd->diag, -EINVAL, s->bd->filename, -1,
                                       "internal error: finish called twice"));
    s->finished = true;
    return s->ioq ? wstate_err(s, ioq_drain(s->ioq)) : 0;
}

void wstate_abort(struct wstate *s)
{
    if (s->ioq)
        ioq_drain(s->ioq);
    s->finished = true;
    if (!s->err)
        s->err = -ECANCELED;
}

struct wmulti {
    unsigned left;
    int err;
    ioq_done_fn done;
    void *opaque;
};

struct wmulti *wmulti_new(struct wstate *s, ioq_done_fn done, void *opaque)
{
    struct wmulti *m = calloc(1, sizeof(*m));

    if (!m) {
        int r = wstate_err(s, diag_fail(s->bd->diag, -ENOMEM, s->bd->filename, -1,
                                        "out of memory"));
        done(opaque, r);
        return NULL;
    }
    m->left = 1;                /* held until every part is submitted */
    m->done = done;
    m->opaque = opaque;
    return m;
}

void wmulti_add(struct wmulti *m)
{
    m->left++;
}

void wmulti_part_done(void *opaque, int res)
{
    struct wmulti *m = opaque;

    if (res < 0 && !m->err)
        m->err = res;
    if (--m->left == 0) {
        m->done(m->opaque, m->err);
        free(m);
    }
}

int wmulti_write(struct wstate *s, struct wmulti *m, struct bfile *f, const void *buf,
                 size_t len, uint64_t host)
{
    wmulti_add(m);
    return wstate_write(s, f, buf, len, host, wmulti_part_done, m);
}

void wmulti_end(struct wmulti *m, int r)
{
    wmulti_part_done(m, r);
}

bool wpiece_next(const uint8_t *buf, size_t n, size_t *at, size_t *end)
{
    size_t k = *at;

    while (k < n) {
        size_t step = n - k < WPIECE ? n - k : WPIECE;
        if (!buffer_is_zero(buf + k, step))
            break;
        k += step;
    }
    if (k >= n) {
        *at = n;
        return false;
    }
    size_t e = k;
    while (e < n) {
        size_t step = n - e < WPIECE ? n - e : WPIECE;
        if (e > k && buffer_is_zero(buf + e, step))
            break;
        e += step;
    }
    *at = k;
    *end = e;
    return true;
}

int wstate_write_blocks(struct wstate *s, struct bfile *f, const void *buf, size_t len,
                        uint64_t off, uint32_t bs, wblock_place_fn place, void *w,
                        ioq_done_fn done, void *opaque)
{
    const uint8_t *p = buf;
    struct wmulti *m = wmulti_new(s, done, opaque);
    int r = 0;

    if (!m)
        return s->err;
    for (size_t at = 0; at < len && r == 0;) {
        uint32_t in = (uint32_t)((off + at) % bs);
        size_t n = len - at < bs - in ? len - at : bs - in, k = 0, e, gap = 0;
        uint64_t host = 0;
        if ((r = wstate_err(s, place(w, (off + at) / bs, in, (uint32_t)(in + n), &host))) < 0)
            break;
        bool fresh = r == 1;
        r = 0;
        while (r == 0 && wpiece_next(p + at, n, &k, &e)) {
            if (!fresh && k > gap)
                r = wstate_err(s, wfile_zero(f, host + in + gap, k - gap));
            if (r == 0)
                r = wmulti_write(s, m, f, p + at + k, e - k, host + in + k);
            gap = k = e;
        }
        if (r == 0 && !fresh && n > gap)
            r = wstate_err(s, wfile_zero(f, host + in + gap, n - gap));
        at += n;
    }
    wmulti_end(m, r);
    return r;
}

int wfile_fresh(struct bfile *f, uint64_t size, struct diag *d)
{
    struct stat st;

    if (fstat(f->fd, &st) < 0)
        return diag_errno(d, -errno, f->path, -1, "cannot get size");
    if (st.st_size != 0 && ftruncate(f->fd, 0) < 0)
        return diag_errno(d, -errno, f->path, -1, "cannot truncate");
    if (size && ftruncate(f->fd, (off_t)size) < 0)
        return diag_errno(d, -errno, f->path, -1, "cannot set the size");
    return 0;
}

int wfile_zero(struct bfile *f, uint64_t off, uint64_t len)
{
    static const uint8_t zeros[65536];
    int r;

    if (len == 0)
        return 0;
    if (f->kind == BFILE_REGULAR && f->fd >= 0) {
        size_t l = (size_t)len;
        r = fault_inject(FAULT_PUNCH, &l);
        if (r == 0 && fallocate(f->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)off,
                                (off_t)len) < 0)
            r = -errno;
        if (r == 0)
            return 0;
        /* a file system without holes: zeros written instead */
        if (r != -EOPNOTSUPP && r != -ENOSYS && r != -EINVAL)
            return diag_errno(f->diag, r, f->path, (int64_t)off, "cannot punch a hole");
    }
    for (uint64_t k = 0; k < len; k += sizeof(zeros)) {
        size_t n = len - k < sizeof(zeros) ? (size_t)(len - k) : sizeof(zeros);
        if ((r = bfile_pwrite(f, zeros, n, off + k)) < 0)
            return r;
    }
    return 0;
}

static int open_target(struct bfile *f, const struct bd_create_opts *o, const char *fmt,
                       struct bd **img, struct diag *d)
{
    struct bd_open_opts oo = { .format = fmt, .writable = true,
                               .allow_external = o->allow_external,
                               .no_external_files = o->no_external_files,
                               .no_backing = o->no_external_files };
    struct bd_check_result res;
    int r;

    *img = NULL;
    if (o->backing_file)
        return diag_fail(d, -EINVAL, f->path, -1, "-B cannot be used with -n: the existing "
                         "image keeps its own parent");
    if (o->compress)
        return diag_fail(d, -EINVAL, f->path, -1, "%s images cannot be compressed (-c)", fmt);
    if (f->kind != BFILE_REGULAR)
        return diag_fail(d, -ENOTSUP, f->path, -1,
                         "-n needs an existing %s image in a regular file", fmt);
    /* its own descriptor, never O_DIRECT: footers, bitmaps and map
     * entries are single sectors */
    if ((r = bd_open(img, f->path, &oo, d)) < 0)
        return r;
    if ((*img)->size < o->size) {
        r = diag_fail(d, -EINVAL, f->path, -1, "output file is smaller than input file (%"
                      PRIu64 " bytes, the input has %" PRIu64 ")", (*img)->size, o->size);
        goto fail;
    }
    if ((r = (*img)->drv->check(*img, &res, 0)) < 0)
        goto fail;
    if (res.corruptions) {
        r = diag_fail(d, -EINVAL, f->path, -1, "the image has %" PRId64 " corruption%s "
                      "(see diskimg check); not writing into it", res.corruptions,
                      res.corruptions == 1 ? "" : "s");
        goto fail;
    }
    return 0;
fail:
    bd_close(*img);
    *img = NULL;
    return r;
}

int wip_open(struct wip **out, size_t size, const struct bd_driver *drv, const char *fmt,
             struct bfile *f, const struct bd_create_opts *o, struct diag *d)
{
    struct wip *w = calloc(1, size);
    int r;

    *out = NULL;
    if (!w)
        return diag_fail(d, -ENOMEM, f->path, -1, "out of memory");
    bd_init(&w->bd, drv, f, d);
    wstate_init(&w->ws, &w->bd, o);
    w->ws.ioq = NULL;           /* in order: data before the tables naming it */
    if (!w->bd.filename)
        r = diag_fail(d, -ENOMEM, f->path, -1, "out of memory");
    else
        r = open_target(f, o, fmt, &w->img, d);
    if (r < 0) {
        w->bd.file = NULL;      /* the caller still owns the file */
        wip_free(w);
        return r;
    }
    w->f = w->img->file;
    w->bd.size = o->size;
    *out = w;
    return 0;
}

void wip_free(struct wip *w)
{
    if (w->img)
        bd_close(w->img);
    bd_release(&w->bd);
    free(w);
}

int wip_pwrite(struct wip *w, uint32_t bs, wblock_place_fn place, const void *buf,
               size_t len, uint64_t off, ioq_done_fn done, void *opaque)
{
    int r = wstate_check(&w->ws, w->bd.size, off, len, "write");

    if (r < 0) {
        done(opaque, r);
        return r;
    }
    return wstate_write_blocks(&w->ws, w->f, buf, len, off, bs, place, w, done, opaque);
}
