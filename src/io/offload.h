/* offload: copy a byte range from one file into another inside the kernel.
 *
 * First choice FICLONERANGE: the output shares the source's blocks (XFS with
 * reflink, btrfs; nothing is read or written).  Else copy_file_range: the
 * file system copies (in the kernel on ext4, on the server with NFS 4.2; on
 * XFS and btrfs it shares as well).  Each of the two is tried until its first
 * "not supported" answer (EOPNOTSUPP, ENOTSUP, ENOTTY, EXDEV, EINVAL, ENOSYS,
 * EBADF, EPERM for clones of an append-only or immutable file) and never again
 * after -- except EXDEV, which is remembered per source file (the others
 * may well lie on the output's file system); once both said so, offload_range() answers OFFLOAD_UNSUPPORTED at
 * once and the caller copies the bytes itself.  Short copies are resumed;
 * other errors (EIO, ENOSPC, ...) are real write errors.
 *
 * Offsets and length must be multiples of o->blksize (the output file
 * system's block, from offload_init): clones need whole blocks, and a copy
 * of whole blocks can be a share.
 *
 * Every call goes through the fault injector as a write (io/fault.h): an
 * injected error is an error, `short` makes a short copy (resumed), `zero`
 * no progress (an error).
 *
 * Not thread-safe: one thread (the writer) uses a `struct offload`.
 * Nothing here prints; errors are negative errnos for the caller to report.
 */
#ifndef DISKIMG_OFFLOAD_H
#define DISKIMG_OFFLOAD_H

#include <stdbool.h>
#include <stdint.h>

#define OFFLOAD_UNSUPPORTED 1   /* offload_range: copy the rest yourself */

#define OFFLOAD_XDEV_MAX 16     /* source files remembered as on another file system */

struct offload {
    bool clone_ok;          /* FICLONERANGE may still work */
    bool copy_ok;           /* copy_file_range may still work */
    /* sources that answered EXDEV (another file system than the output's,
     * e.g. a backing file elsewhere): a method refused for one of them
     * stays usable for the others */
    struct offload_xdev {
        int fd;
        bool no_clone, no_copy;
    } xdev[OFFLOAD_XDEV_MAX];
    unsigned nxdev;
    uint32_t blksize;       /* the output file system's block */
    int refused;            /* the (positive) errno of the last refusal, for -v */
    bool no_progress;       /* the last -EIO was a call that moved nothing */
    uint64_t shared;        /* bytes shared (FICLONERANGE) */
    uint64_t offloaded;     /* bytes copied by copy_file_range */
};

/* Set up for writing into `out_fd`: both methods allowed, blksize from the
 * file system (fstat's st_blksize, at least 512).  `clone`/`copy` false
 * leave a method out from the start (tests, benchmarks). */
void offload_init(struct offload *o, int out_fd, bool clone, bool copy);

/* Is any method still worth trying? */
static inline bool offload_usable(const struct offload *o)
{
    return o->clone_ok || o->copy_ok;
}

/* Is any method still worth trying from in_fd? */
bool offload_usable_from(const struct offload *o, int in_fd);

/* Bytes [in_off, in_off+len) of in_fd into [out_off, out_off+len) of
 * out_fd.  0: all of them are there.  OFFLOAD_UNSUPPORTED: the bytes from
 * *done on must be copied by the caller (nothing may be assumed about them
 * in the output).  Negative errno: failed at in_off + *done (a call that
 * moved nothing, as at a source that ends early, is -EIO with
 * o->no_progress set).  *done: bytes placed so far. */
int offload_range(struct offload *o, int in_fd, uint64_t in_off, int out_fd,
                  uint64_t out_off, uint64_t len, uint64_t *done);

#endif
