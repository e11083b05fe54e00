/* offload: FICLONERANGE, then copy_file_range, each until it is refused. */
#define _GNU_SOURCE
#include "io/offload.h"

#include <errno.h>
#include <linux/fs.h>
#include <stddef.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "io/fault.h"

/* copy_file_range moves at most this much per call anyway (MAX_RW_COUNT);
 * clones are cut the same way so that a huge range does not hold the
 * file's lock for long */
#define OFFLOAD_STEP (1u << 30)

void offload_init(struct offload *o, int out_fd, bool clone, bool copy)
{
    struct stat st;

    o->clone_ok = clone;
    o->copy_ok = copy;
    o->refused = 0;
    o->nxdev = 0;
    o->shared = o->offloaded = 0;
    o->blksize = 4096;
    if (fstat(out_fd, &st) == 0 && st.st_blksize >= 512)
        o->blksize = (uint32_t)st.st_blksize;
}

/* The EXDEV record of in_fd, made when `make` (NULL: none, or no room). */
static struct offload_xdev *xdev_of(struct offload *o, int in_fd, bool make)
{
    for (unsigned i = 0; i < o->nxdev; i++)
        if (o->xdev[i].fd == in_fd)
            return &o->xdev[i];
    if (!make || o->nxdev == OFFLOAD_XDEV_MAX)
        return NULL;
    o->xdev[o->nxdev] = (struct offload_xdev){ .fd = in_fd };
    return &o->xdev[o->nxdev++];
}

bool offload_usable_from(const struct offload *o, int in_fd)
{
    bool clone = o->clone_ok, copy = o->copy_ok;

    for (unsigned i = 0; i < o->nxdev; i++)
        if (o->xdev[i].fd == in_fd) {
            clone = clone && !o->xdev[i].no_clone;
            copy = copy && !o->xdev[i].no_copy;
        }
    return clone || copy;
}

/* A method refused for in_fd: for this source only when the answer was
 * EXDEV (and there is room to remember it), else for every source. */
static void refuse(struct offload *o, int in_fd, int err, bool clone)
{
    struct offload_xdev *x = err == EXDEV ? xdev_of(o, in_fd, true) : NULL;

    o->refused = err;
    if (x && clone)
        x->no_clone = true;
    else if (x)
        x->no_copy = true;
    else if (clone)
        o->clone_ok = false;
    else
        o->copy_ok = false;
}

/* An answer that means "this method does not work for these files". */
static bool refusal(int err)
{
    return err == EOPNOTSUPP || err == ENOTSUP || err == ENOTTY || err == EXDEV ||
           err == EINVAL || err == ENOSYS || err == EBADF || err == EPERM ||
           err == ETXTBSY;
}

/* One clone of [in_off, +len): 0, or a positive refusal, or -errno. */
static int clone_step(struct offload *o, int in_fd, uint64_t in_off, int out_fd,
                      uint64_t out_off, uint64_t len)
{
    struct file_clone_range fcr = {
        .src_fd = in_fd, .src_offset = in_off, .src_length = len, .dest_offset = out_off,
    };

    for (;;) {
        if (ioctl(out_fd, FICLONERANGE, &fcr) == 0) {
            o->shared += len;
            return 0;
        }
        if (errno == EINTR)
            continue;
        if (refusal(errno))
            return errno;
        return -errno;
    }
}

/* One copy_file_range call: bytes copied (0 at the source's end), or
 * -errno; a refusal returns 0 with *refused set to its errno. */
static ssize_t copy_step(int in_fd, uint64_t in_off, int out_fd, uint64_t out_off,
                         size_t len, int *refused)
{
    off_t i = (off_t)in_off, q = (off_t)out_off;

    for (;;) {
        ssize_t n = copy_file_range(in_fd, &i, out_fd, &q, len, 0);
        if (n >= 0)
            return n;
        if (errno == EINTR)
            continue;
        if (refusal(errno)) {
            *refused = errno;
            return 0;
        }
        return -errno;
    }
}

int offload_range(struct offload *o, int in_fd, uint64_t in_off, int out_fd,
                  uint64_t out_off, uint64_t len, uint64_t *done)
{
    *done = 0;
    o->no_progress = false;
    while (*done < len) {
        size_t want = len - *done > OFFLOAD_STEP ? OFFLOAD_STEP : (size_t)(len - *done);
        uint64_t io = in_off + *done, oo = out_off + *done;
        int inj = fault_inject(FAULT_WRITE, &want);

        if (inj == -EINTR || inj == -EAGAIN)
            continue;
        if (inj < 0)
            return inj;
        if (want == 0) {
            o->no_progress = true;
            return -EIO;
        }
        const struct offload_xdev *x = xdev_of(o, in_fd, false);
        if (o->clone_ok && !(x && x->no_clone)) {
            /* a short transfer (injected) still clones whole blocks */
            size_t w = want - want % o->blksize;
            if (w) {
                int r = clone_step(o, in_fd, io, out_fd, oo, w);
                if (r == 0) {
                    *done += w;
                    continue;
                }
                if (r < 0)
                    return r;
                refuse(o, in_fd, r, true);
                x = xdev_of(o, in_fd, false);
            }
        }
        if (!o->copy_ok || (x && x->no_copy))
            return OFFLOAD_UNSUPPORTED;
        int refused = 0;
        ssize_t n = copy_step(in_fd, io, out_fd, oo, want, &refused);
        if (n < 0)
            return (int)n;
        if (refused) {
            /* the caller copies the rest, and everything after (from this
             * source, or from every source) */
            refuse(o, in_fd, refused, false);
            return OFFLOAD_UNSUPPORTED;
        }
        if (n == 0) {             /* the source ended early */
            o->no_progress = true;
            return -EIO;
        }
        o->offloaded += (uint64_t)n;
        *done += (uint64_t)n;
    }
    return 0;
}
