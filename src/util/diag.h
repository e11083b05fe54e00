/* diag: the first error of an operation, with the file and offset it is about.
 *
 * Library code (formats, io, zerodetect, convert) never prints and never exits:
 * it records what went wrong here and returns the negative errno it recorded.
 * The first failure wins, so that the message names the cause, not a
 * consequence further up the stack.  The program (src/cli/) prints it with
 * cli_report() and chooses the exit status.  Safe to call from several threads.
 */
#ifndef DISKIMG_DIAG_H
#define DISKIMG_DIAG_H

#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>

struct diag {
    pthread_mutex_t lock;
    int err;            /* 0, or the negative errno of the first failure */
    int64_t offset;     /* byte offset in `file` the problem is at, or -1 */
    char file[1024];    /* file the problem is in ("" if none) */
    char what[3584];    /* what is wrong, without file or offset (room for two
                           1023-byte bitmap names in one message) */
    unsigned warnings;  /* number of warnings reported so far */
    /* Optional warning sink (e.g. --salvage); NULL prints nothing. */
    void (*warn)(void *opaque, const char *file, int64_t offset, const char *msg);
    void *warn_opaque;
};

void diag_init(struct diag *d);

/* Record a failure unless one is already recorded.  `err` must be negative
 * (-EINVAL for malformed images, -EIO for truncation, ...).  Returns `err`,
 * so callers can write `return diag_fail(d, -EINVAL, path, off, "...");`.
 * A NULL `d` is allowed and records nothing. */
int diag_fail(struct diag *d, int err, const char *file, int64_t offset,
              const char *fmt, ...) __attribute__((format(printf, 5, 6)));
int diag_vfail(struct diag *d, int err, const char *file, int64_t offset,
               const char *fmt, va_list ap);

/* Same, with the message "<op>: <strerror(-err)>". */
int diag_errno(struct diag *d, int err, const char *file, int64_t offset,
               const char *op);

/* Report a warning that does not stop the operation. */
void diag_warn(struct diag *d, const char *file, int64_t offset,
               const char *fmt, ...) __attribute__((format(printf, 4, 5)));

/* Forget a recorded failure (used where a failure is expected, e.g. probing). */
void diag_clear(struct diag *d);

/* "FILE: what (offset N)" into buf; "what" alone when there is no file. */
void diag_format(const struct diag *d, char *buf, size_t n);

#endif
