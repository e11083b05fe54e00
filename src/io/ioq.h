/* ioq: the write queue.
 *
 * Writes are submitted with a completion callback and may finish later; the
 * caller keeps the buffer alive until its callback has run.  The queue bounds
 * both the number of requests and the bytes in flight (submitting blocks,
 * reaping completions, until there is room; a single write larger than
 * max_bytes waits until nothing else is in flight and then goes alone),
 * resumes short writes, retries EINTR/EAGAIN, treats a write that returns 0
 * as an error, and keeps the first error: once a write has failed, no new
 * write is started, every later submit returns that error and every pending
 * callback runs (with the error if its write did not complete), so buffers
 * are always given back.
 *
 * Backends (IOQ_AUTO takes pwrite for buffered output and io_uring for
 * O_DIRECT output; see ioq.c for the measurements behind that):
 *   io_uring   liburing, fixed depth (ioq_uring.c)
 *   pwrite     plain pwrite, run at submit time (ioq.c)
 *   thread     one writer thread doing pwrite, fed by a queue (ioq_thread.c)
 * When io_uring or thread setup fails for any reason (seccomp, sysctl, old
 * kernel, memlock limit, no thread) the queue silently uses pwrite, and
 * ioq_backend_note() says why.  DISKIMG_NO_URING=1 forces pwrite (tests);
 * DISKIMG_IOQ=uring|pwrite|thread picks a backend (tests, benchmarks).
 * Streams and memory files are always written synchronously, in order.
 *
 * One thread owns a queue: all calls, and all callbacks, happen on it.
 * Callbacks run inside ioq_pwrite/poll/wait/drain/destroy; a callback may
 * queue more writes (ioq_pwrite) but must not destroy the queue.
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

enum ioq_backend { IOQ_AUTO, IOQ_URING, IOQ_PWRITE, IOQ_THREAD };

struct ioq_opts {
    unsigned depth;        /* max requests in flight (0 = default 8, max 256) */
    size_t max_bytes;      /* max bytes in flight (0 = default 16 MiB) */
    enum ioq_backend backend;   /* AUTO: chosen at the first write, from
                                   whether its descriptor is O_DIRECT */
};

/* `o` may be NULL (defaults).  Fails only on bad options or no memory. */
int ioq_create(struct ioq **out, const struct ioq_opts *o, struct diag *d);

/* Queue a write of `len` bytes at `off` to `f`.  Returns 0 if queued (or
 * done), or the sticky error; `done` runs exactly once either way.
 * Failures are recorded in the queue's diag (the file's when it has none). */
int ioq_pwrite(struct ioq *q, struct bfile *f, const void *buf, size_t len,
               uint64_t off, ioq_done_fn done, void *opaque);

/* Run callbacks of whatever has completed, without waiting. */
int ioq_poll(struct ioq *q);

/* Wait until at least one request completes (returns at once when nothing
 * is in flight) and run the callbacks of all that have completed. */
int ioq_wait(struct ioq *q);

/* Requests in flight (queued, callback not yet run). */
unsigned ioq_inflight(const struct ioq *q);

/* Wait until nothing is in flight.  Returns 0 or the sticky error. */
int ioq_drain(struct ioq *q);

/* 0 or the sticky error. */
int ioq_error(const struct ioq *q);

/* "io_uring", "pwrite" or "thread": what actually runs ("auto" while an
 * AUTO queue has not written yet). */
const char *ioq_backend_name(const struct ioq *q);

/* Why that backend runs when it is not the one asked for (e.g. "io_uring
 * setup failed: Operation not permitted"), or "" (for -v / debug output). */
const char *ioq_backend_note(const struct ioq *q);

/* Drains (running the remaining callbacks), then frees.  NULL is a no-op. */
void ioq_destroy(struct ioq *q);

#endif
