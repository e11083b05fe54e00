/* ioq backend: io_uring.
 *
 * The ring has `depth` entries and a request has at most one SQE in the
 * kernel at a time, so neither the SQ nor the CQ (2 x depth) can overflow.
 * Each SQE carries its request as user_data.  A write is submitted as soon
 * as it is queued (the caller produces the next chunk meanwhile); a
 * completion is handled as: EINTR/EAGAIN -> the same rest again; error ->
 * the request fails; 0 -> fails (no progress); short -> the rest is queued
 * again.  Reaping waits for one CQE, then takes every other ready one with
 * peek, then submits the continuations in one go.
 * The fault injector is consulted before each SQE: an error fails the
 * request without submitting it, `short` shortens the SQE.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <liburing.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/bfile.h"
#include "io/fault.h"
#include "io/ioq_internal.h"
#include "util/diag.h"

struct uring {
    struct io_uring ring;
    struct ioq_req *sq_head, *sq_tail;   /* SQEs prepared, not yet submitted */
    unsigned in_kernel;                  /* submitted, CQE not yet seen */
    bool no_submit;                      /* submitting failed: never again */
    bool abandoned;                      /* waiting failed: ring untouched */
};

static struct uring *to_uring(struct ioq *q)
{
    return q->backend;
}

static void fail_req(struct ioq *q, struct ioq_req *r, int err)
{
    r->res = err;
    ioq_finished(q, r);
}

/* Prepare an SQE for the rest of r (not submitted yet).  After the first
 * error no new write starts: r fails with that error instead. */
static void queue_rest(struct ioq *q, struct uring *u, struct ioq_req *r)
{
    size_t want = ioq_next_len(r);
    int e;

    if (q->err || u->no_submit || u->abandoned) {
        fail_req(q, r, q->err ? q->err : -EIO);
        return;
    }
    while ((e = fault_inject(FAULT_WRITE, &want)) == -EINTR || e == -EAGAIN)
        if (++r->retries >= IOQ_MAX_RETRIES)
            break;
    if (e < 0) {
        fail_req(q, r, ioq_fail_write(q, r, e));
        return;
    }
    struct io_uring_sqe *sqe = io_uring_get_sqe(&u->ring);
    if (!sqe) {
        /* cannot happen: at most `depth` SQEs exist at a time */
        fail_req(q, r, diag_fail(ioq_diag(q, r), -EBUSY, r->f->path,
                                 (int64_t)(r->off + r->done),
                                 "write failed: io_uring submission queue is full"));
        return;
    }
    io_uring_prep_write(sqe, r->f->fd, r->buf + r->done, (unsigned)want, r->off + r->done);
    io_uring_sqe_set_data(sqe, r);
    r->next = NULL;
    if (u->sq_tail)
        u->sq_tail->next = r;
    else
        u->sq_head = r;
    u->sq_tail = r;
}

static void handle_cqe(struct ioq *q, struct uring *u, struct ioq_req *r, int res);

/* The ring stopped answering (an error io_uring_wait_cqe never gives on a
 * valid ring): fail every write the kernel holds and never touch the ring
 * again, so a late CQE cannot name a request that was reused.  The kernel
 * may still read those buffers; it never writes to them. */
static void abandon(struct ioq *q, struct uring *u, int err)
{
    u->abandoned = true;
    for (unsigned i = 0; i < q->depth; i++) {
        struct ioq_req *r = &q->pool[i];
        if (!r->in_kernel)
            continue;
        r->in_kernel = false;
        u->in_kernel--;
        fail_req(q, r, diag_errno(ioq_diag(q, r), err, r->f->path,
                                  (int64_t)(r->off + r->done),
                                  "write failed: io_uring wait"));
    }
}

/* Take every CQE that is ready; with `wait`, first block for one. */
static void take_cqes(struct ioq *q, struct uring *u, bool wait)
{
    struct io_uring_cqe *cqe;

    if (u->abandoned)
        return;
    if (wait && u->in_kernel) {
        unsigned tries = 0;
        int e;
        while ((e = io_uring_wait_cqe(&u->ring, &cqe)) < 0) {
            if (e == -EINTR || ((e == -EAGAIN || e == -EBUSY) && ++tries < IOQ_MAX_RETRIES))
                continue;
            abandon(q, u, e);
            return;
        }
    }
    while (io_uring_peek_cqe(&u->ring, &cqe) == 0) {
        struct ioq_req *r = io_uring_cqe_get_data(cqe);
        int res = cqe->res;
        io_uring_cqe_seen(&u->ring, cqe);
        r->in_kernel = false;
        u->in_kernel--;
        handle_cqe(q, u, r, res);
    }
}

/* Submit every prepared SQE.  EINTR/EAGAIN/EBUSY from the kernel: make
 * room by taking completions, then try again. */
static void flush(struct ioq *q, struct uring *u)
{
    unsigned tries = 0;

    while (u->sq_head) {
        int n = u->no_submit || u->abandoned ? -EIO : io_uring_submit(&u->ring);
        for (; n > 0 && u->sq_head; n--) {
            struct ioq_req *r = u->sq_head;
            u->sq_head = r->next;
            if (!u->sq_head)
                u->sq_tail = NULL;
            r->in_kernel = true;
            u->in_kernel++;
            tries = 0;
        }
        if (n >= 0 && !u->sq_head)
            break;
        if (!u->no_submit && !u->abandoned &&
            (n == 0 || n == -EINTR || n == -EAGAIN || n == -EBUSY) &&
            ++tries < IOQ_MAX_RETRIES) {
            take_cqes(q, u, u->in_kernel > 0 && n != -EINTR);
            continue;
        }
        /* The ring refuses work: fail what was not submitted and never
         * submit again (those SQEs are dropped with the ring); what the
         * kernel holds still completes and is reaped. */
        u->no_submit = true;
        int err = n < 0 ? n : -EIO;
        struct ioq_req *r = u->sq_head;
        u->sq_head = u->sq_tail = NULL;
        diag_errno(ioq_diag(q, r), err, r->f->path, (int64_t)(r->off + r->done),
                   "write failed: io_uring submit");
        while (r) {
            struct ioq_req *next = r->next;
            fail_req(q, r, err);
            r = next;
        }
    }
}

static void handle_cqe(struct ioq *q, struct uring *u, struct ioq_req *r, int res)
{
    if ((res == -EINTR || res == -EAGAIN) && ++r->retries < IOQ_MAX_RETRIES) {
        queue_rest(q, u, r);
        return;
    }
    if (res < 0) {
        fail_req(q, r, ioq_fail_write(q, r, res));
        return;
    }
    if (res == 0) {
        fail_req(q, r, ioq_fail_no_progress(q, r));
        return;
    }
    r->done += (size_t)res;
    r->retries = 0;
    if (r->done < r->len) {
        queue_rest(q, u, r);
        return;
    }
    r->res = 0;
    ioq_finished(q, r);
}

static void uring_submit(struct ioq *q, struct ioq_req *r)
{
    struct uring *u = to_uring(q);
    queue_rest(q, u, r);
    flush(q, u);
}

static void uring_reap(struct ioq *q, bool wait)
{
    struct uring *u = to_uring(q);
    take_cqes(q, u, wait);
    flush(q, u);
}

static void uring_destroy(struct ioq *q)
{
    struct uring *u = to_uring(q);
    io_uring_queue_exit(&u->ring);
    free(u);
}

static const struct ioq_backend_ops uring_ops = {
    .name = "io_uring",
    .submit = uring_submit,
    .reap = uring_reap,
    .destroy = uring_destroy,
};

int ioq_uring_init(struct ioq *q)
{
    struct uring *u = calloc(1, sizeof(*u));
    if (!u) {
        snprintf(q->note, sizeof(q->note), "io_uring setup failed: out of memory");
        return -ENOMEM;
    }
    int e = io_uring_queue_init(q->depth, &u->ring, 0);
    if (e < 0) {
        snprintf(q->note, sizeof(q->note), "io_uring setup failed: %s", strerror(-e));
        free(u);
        return e;
    }
    /* IORING_OP_WRITE exists since Linux 5.6; older rings only have writev */
    struct io_uring_probe *probe = io_uring_get_probe_ring(&u->ring);
    bool has_write = probe && io_uring_opcode_supported(probe, IORING_OP_WRITE);
    io_uring_free_probe(probe);
    if (!has_write) {
        snprintf(q->note, sizeof(q->note),
                 "io_uring setup failed: the kernel has no IORING_OP_WRITE");
        io_uring_queue_exit(&u->ring);
        free(u);
        return -EOPNOTSUPP;
    }
    q->backend = u;
    q->ops = &uring_ops;
    return 0;
}
