/* ioq: the write queue.
 *
 * Writes are submitted with a completion callback and may finish later; the
 * caller keeps the buffer alive until its callback has run.  The queue bounds
 * both the number of requests and the bytes in flight (submitting blocks,
 * reaping completions, until there is room), resumes short writes, treats a
 * write that returns 0 as an error, and keeps the first error: once a write
 * has failed, every later submit returns that error and every pending
 * callback receives it, so buffers are always given back.
 *
 * Backends: io_uring, and plain pwrite (run at submit time).  When io_uring
 * setup fails for any reason (seccomp, sysctl, old kernel, memlock limit) the
 * queue silently uses pwrite.  DISKIMG_NO_URING=1 forces pwrite (tests).
 *
 * One thread owns a queue: all calls, and all callbacks, happen on it.
 */
#ifndef DISKIMG_IOQ_H
#define DISKIMG_IOQ_H

#include <stddef.h>
#include <stdint.h>

struct bfile;
struct diag;
struct ioq;

/* res is 0 on success or the negative errno of the failure. */
typedef void (*ioq_done_fn)(void *opaque, int res);

enum ioq_backend { IOQ_AUTO, IOQ_URING, IOQ_PWRITE };

struct ioq_opts {
    unsigned depth;        /* max requests in flight (0 = default) */
    size_t max_bytes;      /* max bytes in flight (0 = default) */
    enum ioq_backend backend;
};

int ioq_create(struct ioq **out, const struct ioq_opts *o, struct diag *d);

/* Queue a write of `len` bytes at `off` to `f`.  Returns 0 if queued (or
 * done), or the sticky error; `done` runs exactly once either way. */
int ioq_pwrite(struct ioq *q, struct bfile *f, const void *buf, size_t len,
               uint64_t off, ioq_done_fn done, void *opaque);

/* Run callbacks of whatever has completed, without waiting. */
int ioq_poll(struct ioq *q);

/* Wait until at least one request completes (returns at once when nothing
 * is in flight) and run the callbacks of all that have completed. */
int ioq_wait(struct ioq *q);

/* Requests in flight. */
unsigned ioq_inflight(const struct ioq *q);

/* Wait until nothing is in flight.  Returns 0 or the sticky error. */
int ioq_drain(struct ioq *q);

/* 0 or the sticky error. */
int ioq_error(const struct ioq *q);

/* "io_uring" or "pwrite": what actually runs. */
const char *ioq_backend_name(const struct ioq *q);

/* Drains, then frees. */
void ioq_destroy(struct ioq *q);

#endif
