/* ioq internals shared by the front (ioq.c) and the backends
 * (ioq_uring.c, ioq_thread.c).  Not for users of the queue.
 *
 * The front owns the request pool, the accounting (requests and bytes in
 * flight), the sticky error and the callbacks; a backend only moves requests
 * from "submitted" to "finished" and hands finished ones back with
 * ioq_finished(), on the owner thread.
 */
#ifndef DISKIMG_IOQ_INTERNAL_H
#define DISKIMG_IOQ_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "io/ioq.h"

/* One write: its buffer, where it goes, how far it got, whom to tell. */
struct ioq_req {
    struct bfile *f;
    const uint8_t *buf;
    size_t len;
    size_t done;            /* bytes already written (short writes resume here) */
    uint64_t off;
    ioq_done_fn cb;
    void *opaque;
    int res;                /* result once finished */
    unsigned retries;       /* EINTR/EAGAIN in a row without progress */
    bool in_kernel;         /* io_uring: an SQE of it was submitted, no CQE yet */
    struct ioq_req *next;   /* free list, finished list, backend queues */
};

/* Retrying EINTR/EAGAIN this many times in a row without progress is a
 * failure (it never happens on a regular file; a bound beats a livelock). */
#define IOQ_MAX_RETRIES 1000

struct ioq_backend_ops {
    const char *name;
    /* Start the request (or finish it at once).  Never runs callbacks. */
    void (*submit)(struct ioq *q, struct ioq_req *r);
    /* Hand every finished request to ioq_finished(); with `wait`, first
     * block until at least one has finished (only called with requests
     * submitted and not yet handed back). */
    void (*reap)(struct ioq *q, bool wait);
    /* Free the backend's state (nothing is in flight). */
    void (*destroy)(struct ioq *q);
};

struct ioq {
    const struct ioq_backend_ops *ops;
    void *backend;              /* the backend's state */
    char note[160];             /* why this backend runs (fallback reason) */
    struct diag *diag;
    int err;                    /* sticky: the first failure */

    unsigned depth;
    size_t max_bytes;
    unsigned inflight;          /* submitted, callback not yet run */
    unsigned busy;              /* submitted, not yet handed back by the backend */
    size_t bytes;               /* bytes of the `inflight` requests */

    struct ioq_req *pool;       /* `depth` requests */
    struct ioq_req *free;
    struct ioq_req *fin_head, *fin_tail;   /* finished, callback pending */
};

/* Backend -> front: `r` is over with r->res (0 or -errno; failures must
 * already be recorded in the diag).  Owner thread only. */
void ioq_finished(struct ioq *q, struct ioq_req *r);

/* The diag a failure of `r` is recorded in. */
struct diag *ioq_diag(struct ioq *q, struct ioq_req *r);

/* Record "write failed" for r at its current position; returns err. */
int ioq_fail_write(struct ioq *q, struct ioq_req *r, int err);

/* Record "write failed: no progress" (a write that returned 0). */
int ioq_fail_no_progress(struct ioq *q, struct ioq_req *r);

/* Length of the next write(2)/SQE for r: the rest, capped at 1 GiB. */
size_t ioq_next_len(const struct ioq_req *r);

/* Write the rest of r with pwrite: fault injection, EINTR/EAGAIN retried,
 * short writes resumed, 0 is an error.  Returns 0 or the recorded -errno.
 * Touches only r and the diag, so a writer thread may call it. */
int ioq_write_sync(struct ioq *q, struct ioq_req *r);

/* Backend constructors: 0, or a negative errno with the reason in
 * q->note (the front then falls back to pwrite). */
int ioq_uring_init(struct ioq *q);
int ioq_thread_init(struct ioq *q);

#endif
