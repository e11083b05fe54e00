/* raw writing (the reading side and the driver are in read.c).
 *
 * Writing a new file: it is sized with ftruncate first, so zero ranges cost
 * nothing.  Writing over an existing file (-n) or a device (with or without
 * -n: it holds old content either way): zero ranges are punched, or zeroed,
 * or written as zeros, whichever the file supports first (each capability
 * is dropped for good after it fails once).  Writing to a stream (stdout):
 * bytes go out strictly in order and gaps are filled with zeros.
 *
 * O_DIRECT (cache=none): every write covers exactly its own bytes.  One
 * that is not aligned to DIRECT_ALIGN continues through the page cache;
 * the image's last write, when the image ends inside a block, sends its
 * whole blocks directly and only the rest through the cache -- nothing
 * past the image's end is ever written, so what a larger target (-n, a
 * device) holds there stays as it was.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/falloc.h>
#include <linux/fs.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "formats/raw/raw_int.h"
#include "io/bfile.h"
#include "io/fault.h"
#include "io/ioq.h"
#include "util/diag.h"
#include "util/kvopts.h"

/* O_DIRECT needs offsets, lengths and buffers aligned to the device's
 * logical block; 4 KiB suits every device we meet. */
#define DIRECT_ALIGN 4096

int raw_create(struct bd **out, struct bfile *f, const struct bd_create_opts *o,
               struct diag *d)
{
    struct raw *r;
    char err[256];

    if (o->backing_file)
        return diag_fail(d, -EINVAL, f->path, -1, "raw images cannot have a backing file");
    if (o->compress)
        return diag_fail(d, -EINVAL, f->path, -1, "raw images cannot be compressed (-c)");
    if (o->o) {
        /* qemu-img's raw takes preallocation=off only in spirit; accept "off" */
        const char *pre = kvopts_get(o->o, "preallocation");
        if (pre && strcmp(pre, "off") != 0)
            return diag_fail(d, -EINVAL, f->path, -1,
                             "raw output supports preallocation=off only");
        uint64_t sz;
        if (kvopts_get_size(o->o, "size", &sz, err, sizeof(err)) < 0)
            return diag_fail(d, -EINVAL, f->path, -1, "%s", err);
    }
    r = calloc(1, sizeof(*r));
    if (!r)
        return diag_fail(d, -ENOMEM, f->path, -1, "out of memory");
    bd_init(&r->bd, &bd_raw, f, d);
    r->bd.size = o->size;
    r->bd.granule = 512;
    /* a device is never new: what it held shows through unwritten ranges */
    r->existing = (o->existing || f->kind == BFILE_BLOCKDEV) && !o->target_is_zero;
    r->durable = o->durable;
    r->ioq = o->ioq;
    r->can_punch = r->can_zero_range = true;
    int fl = f->fd >= 0 ? fcntl(f->fd, F_GETFL) : 0;
    r->direct = fl > 0 && (fl & O_DIRECT);
    if (f->kind == BFILE_REGULAR && o->existing && f->size < o->size) {
        free(r->bd.filename);
        free(r);
        return diag_fail(d, -ENOSPC, f->path, -1,
                         "existing target is smaller (%llu bytes) than the image (%llu bytes)",
                         (unsigned long long)f->size, (unsigned long long)o->size);
    }
    if (f->kind == BFILE_BLOCKDEV && f->size < o->size) {
        free(r->bd.filename);
        free(r);
        return diag_fail(d, -ENOSPC, f->path, -1,
                         "device is smaller (%llu bytes) than the image (%llu bytes)",
                         (unsigned long long)f->size, (unsigned long long)o->size);
    }
    if (f->kind == BFILE_REGULAR && !o->existing) {
        if (ftruncate(f->fd, (off_t)o->size) < 0) {
            int e = -errno;
            free(r->bd.filename);
            free(r);
            return diag_errno(d, e, f->path, -1, "cannot set the size");
        }
        f->size = o->size;
    }
    *out = &r->bd;
    return 0;
}

static int stream_fill_zeros(struct raw *r, uint64_t upto)
{
    static const uint8_t zeros[65536];

    while (r->stream_pos < upto) {
        size_t n = sizeof(zeros);
        if (n > upto - r->stream_pos)
            n = (size_t)(upto - r->stream_pos);
        int e = bfile_pwrite(r->bd.file, zeros, n, r->stream_pos);
        if (e < 0)
            return e;
        r->stream_pos += n;
    }
    return 0;
}

/* Leave O_DIRECT for the rest of the run (an unaligned write came). */
static int leave_direct(struct raw *r, uint64_t off)
{
    struct bd *bd = &r->bd;
    int e, fl;

    if (r->ioq && (e = ioq_drain(r->ioq)) < 0)
        return e;
    fl = fcntl(bd->file->fd, F_GETFL);
    if (fl < 0 || fcntl(bd->file->fd, F_SETFL, fl & ~O_DIRECT) < 0)
        return diag_errno(bd->diag, -errno, bd->filename, (int64_t)off,
                          "cannot leave O_DIRECT mode");
    r->direct = false;
    return 0;
}

/* The image's last write when the image ends inside a block: its whole
 * blocks directly, the rest through the page cache (O_DIRECT cannot write
 * less than a block, and the bytes after the image's end are not ours).
 * Synchronous: the queue is drained first, since the descriptor's flags
 * change for a moment. */
static int write_tail(struct raw *r, const uint8_t *buf, size_t len, uint64_t off)
{
    struct bfile *f = r->bd.file;
    size_t head = len - len % DIRECT_ALIGN;
    int e, fl;

    if (r->ioq && (e = ioq_drain(r->ioq)) < 0)
        return e;
    if (head && (e = bfile_pwrite(f, buf, head, off)) < 0)
        return e;
    fl = fcntl(f->fd, F_GETFL);
    if (fl < 0 || fcntl(f->fd, F_SETFL, fl & ~O_DIRECT) < 0)
        return diag_errno(r->bd.diag, -errno, r->bd.filename, (int64_t)(off + head),
                          "cannot leave O_DIRECT mode");
    e = bfile_pwrite(f, buf + head, len - head, off + head);
    /* back to O_DIRECT for what -W may still write; if that fails, the
     * rest goes through the cache (and is synced at finish all the same) */
    if (fcntl(f->fd, F_SETFL, fl) < 0)
        r->direct = false;
    return e;
}

/* Bytes [off, off+len) of the file, from a buffer that stays valid until
 * `done` has run. */
static int raw_write(struct raw *r, const void *buf, size_t len, uint64_t off,
                     ioq_done_fn done, void *opaque)
{
    struct bd *bd = &r->bd;
    int e;

    if (r->direct && (off % DIRECT_ALIGN || (uintptr_t)buf % DIRECT_ALIGN ||
                      (len % DIRECT_ALIGN && off + len != bd->size))) {
        /* an unaligned write (e.g. -S 512): continue through the cache */
        if ((e = leave_direct(r, off)) < 0) {
            done(opaque, e);
            return e;
        }
    }
    if (r->direct && len % DIRECT_ALIGN) {
        e = write_tail(r, buf, len, off);
        done(opaque, e);
        return e;
    }
    if (r->ioq)
        return ioq_pwrite(r->ioq, bd->file, buf, len, off, done, opaque);
    e = bfile_pwrite(bd->file, buf, len, off);
    done(opaque, e);
    return e;
}

int raw_pwrite(struct bd *bd, const void *buf, size_t len, uint64_t off,
               ioq_done_fn done, void *opaque)
{
    struct raw *r = to_raw(bd);
    int e;

    if (bd->file->kind == BFILE_STREAM) {
        if (off < r->stream_pos)
            e = diag_fail(bd->diag, -EINVAL, bd->filename, (int64_t)off,
                          "internal error: out-of-order write to a stream");
        else if ((e = stream_fill_zeros(r, off)) == 0 &&
                 (e = bfile_pwrite(bd->file, buf, len, off)) == 0)
            r->stream_pos = off + len;
        done(opaque, e);
        return e;
    }
    return raw_write(r, buf, len, off, done, opaque);
}

static void write_done_ignore(void *opaque, int res)
{
    (void)opaque, (void)res;
}

/* Zeros over [off, off+len), written (errors stay in the queue). */
static int write_zeros(struct raw *r, uint64_t off, uint64_t len)
{
    static const uint8_t zeros[1 << 20] __attribute__((aligned(DIRECT_ALIGN)));

    while (len) {
        size_t n = len < sizeof(zeros) ? (size_t)len : sizeof(zeros);
        int e = raw_write(r, zeros, n, off, write_done_ignore, NULL);
        if (e < 0)
            return e;
        off += n;
        len -= n;
    }
    return 0;
}

/* Clear [off, off+len) of existing content: punch, zero-range, or write. */
static int raw_clear(struct raw *r, uint64_t off, uint64_t len)
{
    struct bfile *f = r->bd.file;

    /* a device takes fallocate in whole sectors only: the image's end may
     * cut the last one short, write that piece */
    if (f->kind == BFILE_BLOCKDEV && (off + len) % 512) {
        uint64_t piece = (off + len) % 512 < len ? (off + len) % 512 : len;
        int e = write_zeros(r, off + len - piece, piece);
        if (e < 0 || piece == len)
            return e;
        len -= piece;
    }

    if (r->can_punch) {
        /* at the end of the file, punch the whole last block (KEEP_SIZE
         * allows a range past the end) so that it is freed, not zeroed */
        uint64_t plen = len;
        if (off + len == f->size && len % 4096)
            plen += 4096 - len % 4096;
        size_t l = (size_t)plen;
        int inj = fault_inject(FAULT_PUNCH, &l);
        int rc = inj < 0 ? inj : 0;
        if (!rc && fallocate(f->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
                             (off_t)off, (off_t)plen) < 0)
            rc = -errno;
        if (rc == 0)
            return 0;
        if (rc != -EOPNOTSUPP && rc != -ENOSYS && rc != -EINVAL)
            return diag_errno(r->bd.diag, rc, f->path, (int64_t)off, "cannot punch a hole");
        r->can_punch = false;
    }
    if (r->can_zero_range) {
        if (fallocate(f->fd, FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE,
                      (off_t)off, (off_t)len) == 0)
            return 0;
        if (errno != EOPNOTSUPP && errno != ENOSYS && errno != EINVAL)
            return diag_errno(r->bd.diag, -errno, f->path, (int64_t)off,
                              "cannot zero a range");
        r->can_zero_range = false;
    }
    return write_zeros(r, off, len);
}

int raw_write_zeroes(struct bd *bd, uint64_t off, uint64_t len)
{
    struct raw *r = to_raw(bd);

    if (bd->file->kind == BFILE_STREAM)
        return 0; /* the gap is filled by the next write or by finish() */
    if (!r->existing)
        return 0; /* a new file reads as zeros where nothing was written */
    return raw_clear(r, off, len);
}

int raw_finish(struct bd *bd)
{
    struct raw *r = to_raw(bd);
    int e;

    if (r->ioq && (e = ioq_drain(r->ioq)) < 0)
        return e;
    if (bd->file->kind == BFILE_STREAM)
        return stream_fill_zeros(r, bd->size);
    if (r->durable)
        return bfile_sync(bd->file);
    return 0;
}

void raw_abort(struct bd *bd)
{
    struct raw *r = to_raw(bd);
    if (r->ioq)
        ioq_drain(r->ioq);
}

int raw_resize(struct bd *bd, uint64_t new_size, bool shrink)
{
    struct bfile *f = bd->file;

    if (f->kind == BFILE_STREAM && bd->drv->pwrite) {
        bd->size = new_size;   /* an output stream: finish() pads to it */
        return 0;
    }
    if (f->kind != BFILE_REGULAR)
        return diag_fail(bd->diag, -ENOTSUP, bd->filename, -1,
                         "only regular files can be resized");
    if (new_size < bd->size && !shrink)
        return diag_fail(bd->diag, -EINVAL, bd->filename, -1,
                         "shrinking would lose data; use --shrink to allow it");
    if (ftruncate(f->fd, (off_t)new_size) < 0)
        return diag_errno(bd->diag, -errno, bd->filename, -1, "cannot resize");
    bd->size = f->size = new_size;
    return 0;
}

/* qemu-img measure: a raw image is as large as the disk (whole sectors). */
int raw_measure(struct kvopts *o, uint64_t size, struct bd *src,
                struct bd_measure *m, struct diag *d)
{
    char err[256];
    uint64_t sz;

    memset(m, 0, sizeof(*m));
    if (o) {
        const char *pre = kvopts_get(o, "preallocation");
        if (pre && strcmp(pre, "off") && strcmp(pre, "falloc") && strcmp(pre, "full"))
            return diag_fail(d, -EINVAL, NULL, -1,
                             "Parameter 'preallocation' does not accept value '%s'", pre);
        if (kvopts_get_size(o, "size", &sz, err, sizeof(err)) < 0)
            return diag_fail(d, -EINVAL, NULL, -1, "%s", err);
    }
    if (src)
        size = src->size;
    if (size > UINT64_MAX - 511)
        return diag_fail(d, -EFBIG, NULL, -1, "the image size is too large");
    m->required = m->fully_allocated = (size + 511) & ~(uint64_t)511;
    return 0;
}

