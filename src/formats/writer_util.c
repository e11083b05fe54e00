/* The pieces the simple image writers share (writer_util.h). */
#include <errno.h>
#include <stdlib.h>

#include "formats/writer_util.h"
#include "io/bfile.h"
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
    if (len == 0 || off >= size || len > size - off || off % bd->granule ||
        (len % bd->granule && off + len != size))
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
