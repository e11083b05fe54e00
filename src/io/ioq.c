/* ioq front: request pool, back-pressure, sticky error, callbacks, the
 * choice of backend, and the plain pwrite backend.
 *
 * A request is "in flight" from ioq_pwrite() until just before its callback
 * runs; `busy` counts the ones the backend still holds.  Finished requests
 * wait on a FIFO until the owner thread runs their callbacks (inside
 * ioq_pwrite/poll/wait/drain), and a request goes back to the pool *before*
 * its callback runs, so a callback may queue the next write.
 */
#define _GNU_SOURCE
#include "io/ioq.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "io/bfile.h"
#include "io/fault.h"
#include "io/ioq_internal.h"
#include "util/diag.h"

#define IOQ_DEFAULT_DEPTH 8
#define IOQ_MAX_DEPTH 256
#define IOQ_DEFAULT_BYTES ((size_t)16 << 20)
/* One write(2) moves at most ~2 GiB; stay well below so the length fits
 * everywhere (an io_uring SQE carries 32 bits). */
#define IOQ_MAX_IO ((size_t)1 << 30)

/* Which backend AUTO runs: measured with bench/ioq_bench.c and
 * bench/ioq_convert.sh on this project's machines (2 vCPUs, ext4 on virtio,
 * Linux 6.18; medians of alternating runs at real-time priority because the
 * machine was shared; full tables in bench/ioq_results.md).
 *
 * Buffered output -> pwrite.  Writing 2 GiB to a new pre-sized file:
 *                          1 MiB chunks       64 KiB chunks
 *                          wall     CPU       wall     CPU
 *   pwrite loop            1.18 s   0.96 s    1.04 s   1.02 s
 *   writer thread          1.47     1.26      1.94     2.46
 *   io_uring (depth 4-16)  1.35     1.34      1.92     2.32
 *   + IOSQE_ASYNC          1.57     3.00      2.11     3.74
 *   + registered buffers   1.61     1.45      1.92     2.31
 * On ext4 here io_uring does not complete buffered writes inline: they go
 * to an io-wq worker thread (iou-wrk), so it is a writer thread with more
 * overhead, which is what the original design saw too (1.45x slower;
 * docs/DESIGN.md, "Departures from the original design").  A
 * writer thread only wins when the thread that writes also produces the
 * data (copy+scan before each write: 1.52 s vs 1.70 s at 1 MiB, 1.87 s vs
 * 2.86 s at 64 KiB) and then burns 30-60% more CPU.  convert does not work
 * that way: its workers read and scan, the main thread only writes; inside
 * `diskimg convert -t unsafe` the three backends tie (0.52 / 0.55 / 0.54 s
 * for a 2 GiB disk, same CPU), so the cheapest one wins.
 *
 * O_DIRECT output -> io_uring: the only backend with several writes at the
 * device at once.  512 MiB in 1 MiB chunks: io_uring depth 8 1.68 s,
 * pwrite 1.95-2.61 s, writer thread 2.25 s; inside convert -t none
 * 4.81 s vs 5.15 s (pwrite) and 5.07 s (thread).
 */
/* AUTO decides at the first write, from that descriptor's O_DIRECT flag:
 * no caller has to pass a hint, and an output that turns O_DIRECT off
 * before writing (the qcow2 writer does) gets the buffered choice. */
#define IOQ_AUTO_BUFFERED IOQ_PWRITE
#define IOQ_AUTO_DIRECT IOQ_URING

struct diag *ioq_diag(struct ioq *q, struct ioq_req *r)
{
    return q->diag ? q->diag : r->f->diag;
}

int ioq_fail_write(struct ioq *q, struct ioq_req *r, int err)
{
    return diag_errno(ioq_diag(q, r), err, r->f->path, (int64_t)(r->off + r->done),
                      "write failed");
}

int ioq_fail_no_progress(struct ioq *q, struct ioq_req *r)
{
    return diag_fail(ioq_diag(q, r), -EIO, r->f->path, (int64_t)(r->off + r->done),
                     "write failed: no progress (0 of %zu bytes written)",
                     r->len - r->done);
}

size_t ioq_next_len(const struct ioq_req *r)
{
    size_t want = r->len - r->done;
    return want > IOQ_MAX_IO ? IOQ_MAX_IO : want;
}

int ioq_write_sync(struct ioq *q, struct ioq_req *r)
{
    while (r->done < r->len) {
        size_t want = ioq_next_len(r);
        int e = fault_inject(FAULT_WRITE, &want);
        if (e == 0) {
            ssize_t n = pwrite(r->f->fd, r->buf + r->done, want, (off_t)(r->off + r->done));
            if (n > 0) {
                r->done += (size_t)n;
                r->retries = 0;
                continue;
            }
            if (n == 0)
                return ioq_fail_no_progress(q, r);
            e = -errno;
        }
        if ((e == -EINTR || e == -EAGAIN) && ++r->retries < IOQ_MAX_RETRIES)
            continue;
        return ioq_fail_write(q, r, e);
    }
    return 0;
}

/* --- the plain pwrite backend: the write happens inside ioq_pwrite --- */

static void pwrite_submit(struct ioq *q, struct ioq_req *r)
{
    r->res = ioq_write_sync(q, r);
    ioq_finished(q, r);
}

static void pwrite_reap(struct ioq *q, bool wait)
{
    (void)q, (void)wait; /* nothing is ever left in flight */
}

static void pwrite_destroy(struct ioq *q)
{
    (void)q;
}

static const struct ioq_backend_ops pwrite_ops = {
    .name = "pwrite",
    .submit = pwrite_submit,
    .reap = pwrite_reap,
    .destroy = pwrite_destroy,
};

/* Set q->ops to `want`, or to pwrite when its setup fails for any reason
 * (seccomp, sysctl, old kernel, memlock, no thread); q->note says why. */
static void start_backend(struct ioq *q, enum ioq_backend want)
{
    int e = -1;

    if (want == IOQ_URING)
        e = ioq_uring_init(q);
    else if (want == IOQ_THREAD)
        e = ioq_thread_init(q);
    if (e < 0) {
        q->ops = &pwrite_ops;
        q->backend = NULL;
    }
}

/* --- AUTO: the first write's descriptor picks the backend --- */

static void auto_submit(struct ioq *q, struct ioq_req *r)
{
    int fl = fcntl(r->f->fd, F_GETFL);
    bool direct = fl >= 0 && (fl & O_DIRECT);

    snprintf(q->note, sizeof(q->note), "chosen for %s output",
             direct ? "O_DIRECT" : "buffered");
    start_backend(q, direct ? IOQ_AUTO_DIRECT : IOQ_AUTO_BUFFERED);
    q->ops->submit(q, r);
}

static void auto_reap(struct ioq *q, bool wait)
{
    (void)q, (void)wait; /* nothing was submitted yet */
}

static const struct ioq_backend_ops auto_ops = {
    .name = "auto",
    .submit = auto_submit,
    .reap = auto_reap,
    .destroy = pwrite_destroy,
};

/* --- front --- */

void ioq_finished(struct ioq *q, struct ioq_req *r)
{
    if (r->res < 0 && !q->err)
        q->err = r->res;
    if (r->res == 0)
        bfile_note_written(r->f, r->off, r->len);   /* write-behind accounting */
    q->busy--;
    r->next = NULL;
    if (q->fin_tail)
        q->fin_tail->next = r;
    else
        q->fin_head = r;
    q->fin_tail = r;
}

/* Run the callbacks of finished requests, oldest first.  Re-entrant: a
 * callback that calls back into the queue continues the same FIFO. */
static void run_finished(struct ioq *q)
{
    struct ioq_req *r;

    while ((r = q->fin_head)) {
        q->fin_head = r->next;
        if (!q->fin_head)
            q->fin_tail = NULL;
        ioq_done_fn cb = r->cb;
        void *opaque = r->opaque;
        int res = r->res;
        q->inflight--;
        q->bytes -= r->len;
        r->next = q->free;
        q->free = r;
        cb(opaque, res);
    }
}

/* Reap what the backend has finished (waiting for one with `wait` when
 * nothing is finished yet) and run the callbacks. */
static void progress(struct ioq *q, bool wait)
{
    if (q->busy)
        q->ops->reap(q, wait && !q->fin_head);
    run_finished(q);
}

static int fail_now(struct ioq *q, int err, ioq_done_fn done, void *opaque)
{
    if (!q->err)
        q->err = err;
    done(opaque, q->err);
    return q->err;
}

int ioq_pwrite(struct ioq *q, struct bfile *f, const void *buf, size_t len,
               uint64_t off, ioq_done_fn done, void *opaque)
{
    if (q->err)
        return fail_now(q, q->err, done, opaque);
    if (off > INT64_MAX || len > INT64_MAX - off)
        return fail_now(q, diag_fail(q->diag ? q->diag : f->diag, -EINVAL, f->path, -1,
                                     "write of %zu bytes at offset %llu is past the "
                                     "largest file offset", len, (unsigned long long)off),
                        done, opaque);
    if (len == 0) {
        done(opaque, 0);
        return 0;
    }
    if (f->fd < 0 || (f->kind != BFILE_REGULAR && f->kind != BFILE_BLOCKDEV)) {
        /* a stream takes bytes in order, a memory file none: synchronously */
        int e = ioq_drain(q);
        if (e == 0)
            e = bfile_pwrite(f, buf, len, off);
        if (e < 0)
            return fail_now(q, e, done, opaque);
        done(opaque, 0);
        return 0;
    }

    /* Back-pressure: wait for room.  A write larger than max_bytes goes
     * alone once nothing else is in flight. */
    while (q->inflight == q->depth ||
           (q->inflight && (q->bytes >= q->max_bytes || len > q->max_bytes - q->bytes)))
        progress(q, true);
    if (q->err)
        return fail_now(q, q->err, done, opaque);

    bfile_prealloc(f, off, len);
    struct ioq_req *r = q->free;
    q->free = r->next;
    *r = (struct ioq_req){ .f = f, .buf = buf, .len = len, .off = off, .cb = done,
                           .opaque = opaque };
    q->inflight++;
    q->busy++;
    q->bytes += len;
    q->ops->submit(q, r);
    /* a write that failed (or finished) at once is reported now */
    run_finished(q);
    return q->err;
}

int ioq_poll(struct ioq *q)
{
    progress(q, false);
    return q->err;
}

int ioq_wait(struct ioq *q)
{
    if (q->inflight)
        progress(q, true);
    return q->err;
}

int ioq_drain(struct ioq *q)
{
    while (q->inflight)
        progress(q, true);
    return q->err;
}

unsigned ioq_inflight(const struct ioq *q)
{
    return q->inflight;
}

int ioq_error(const struct ioq *q)
{
    return q->err;
}

const char *ioq_backend_name(const struct ioq *q)
{
    return q->ops->name;
}

const char *ioq_backend_note(const struct ioq *q)
{
    return q->note;
}

static bool env_no_uring(void)
{
    const char *v = getenv("DISKIMG_NO_URING");
    return v && *v && strcmp(v, "0") != 0;
}

/* DISKIMG_IOQ=uring|pwrite|thread overrides the backend asked for (tests and
 * benchmarks of the whole pipeline).  Anything else is ignored. */
static enum ioq_backend env_backend(enum ioq_backend want, char *note, size_t note_len)
{
    static const struct { const char *name; enum ioq_backend b; } names[] = {
        { "uring", IOQ_URING }, { "pwrite", IOQ_PWRITE }, { "thread", IOQ_THREAD },
    };
    const char *v = getenv("DISKIMG_IOQ");

    for (size_t i = 0; v && i < sizeof(names) / sizeof(names[0]); i++) {
        if (strcmp(v, names[i].name) == 0) {
            snprintf(note, note_len, "DISKIMG_IOQ=%s", v);
            return names[i].b;
        }
    }
    return want;
}

int ioq_create(struct ioq **out, const struct ioq_opts *o, struct diag *d)
{
    static const struct ioq_opts defaults;
    struct ioq *q;

    if (!o)
        o = &defaults;
    unsigned depth = o->depth ? o->depth : IOQ_DEFAULT_DEPTH;
    if (depth > IOQ_MAX_DEPTH)
        return diag_fail(d, -EINVAL, NULL, -1, "write queue depth %u is out of range 1..%u",
                         depth, IOQ_MAX_DEPTH);
    q = calloc(1, sizeof(*q));
    if (q)
        q->pool = calloc(depth, sizeof(*q->pool));
    if (!q || !q->pool) {
        free(q);
        return diag_fail(d, -ENOMEM, NULL, -1, "out of memory");
    }
    q->diag = d;
    q->depth = depth;
    q->max_bytes = o->max_bytes ? o->max_bytes : IOQ_DEFAULT_BYTES;
    for (unsigned i = depth; i-- > 0;) {
        q->pool[i].next = q->free;
        q->free = &q->pool[i];
    }

    enum ioq_backend want = env_backend(o->backend, q->note, sizeof(q->note));
    if (env_no_uring() && want != IOQ_PWRITE) {
        want = IOQ_PWRITE;
        snprintf(q->note, sizeof(q->note), "DISKIMG_NO_URING is set");
    }
    if (want == IOQ_AUTO)
        q->ops = &auto_ops;   /* decided by the first write */
    else
        start_backend(q, want);
    *out = q;
    return 0;
}

void ioq_destroy(struct ioq *q)
{
    if (!q)
        return;
    ioq_drain(q);
    q->ops->destroy(q);
    free(q->pool);
    free(q);
}
