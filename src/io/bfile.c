#define _GNU_SOURCE
#include "io/bfile.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "io/fault.h"
#include "util/diag.h"

/* EAGAIN answers in a row before a write gives up (as the write queue) */
#define BFILE_MAX_RETRIES 1000

/* The open-file registry (bfile.h): a list of the open regular files and
 * block devices, newest first. */
static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static struct bfile *reg_head;
static uint64_t reg_seq;

static void reg_add(struct bfile *f, const struct stat *st)
{
    f->dev = st->st_dev;
    f->ino = st->st_ino;
    f->rdev = st->st_rdev;
    f->blockdev = S_ISBLK(st->st_mode);
    pthread_mutex_lock(&reg_lock);
    f->open_seq = ++reg_seq;
    f->reg_prev = NULL;
    f->reg_next = reg_head;
    if (reg_head)
        reg_head->reg_prev = f;
    reg_head = f;
    pthread_mutex_unlock(&reg_lock);
}

static void reg_remove(struct bfile *f)
{
    if (!f->open_seq)
        return;
    pthread_mutex_lock(&reg_lock);
    if (f->reg_prev)
        f->reg_prev->reg_next = f->reg_next;
    else
        reg_head = f->reg_next;
    if (f->reg_next)
        f->reg_next->reg_prev = f->reg_prev;
    pthread_mutex_unlock(&reg_lock);
    f->open_seq = 0;
}

static bool same_file(const struct bfile *f, bool blockdev, dev_t dev, ino_t ino, dev_t rdev)
{
    if (blockdev || f->blockdev)
        return blockdev && f->blockdev && f->rdev == rdev;
    return f->dev == dev && f->ino == ino;
}

uint64_t bfile_open_mark(void)
{
    pthread_mutex_lock(&reg_lock);
    uint64_t m = reg_seq;
    pthread_mutex_unlock(&reg_lock);
    return m;
}

bool bfile_is_open(const struct stat *st, uint64_t mark)
{
    bool found = false;

    pthread_mutex_lock(&reg_lock);
    for (const struct bfile *f = reg_head; f && !found; f = f->reg_next)
        found = f->open_seq <= mark &&
                same_file(f, S_ISBLK(st->st_mode), st->st_dev, st->st_ino, st->st_rdev);
    pthread_mutex_unlock(&reg_lock);
    return found;
}

bool bfile_written_input(uint64_t mark, char *name, size_t len)
{
    bool found = false;

    pthread_mutex_lock(&reg_lock);
    for (const struct bfile *w = reg_head; w && !found; w = w->reg_next) {
        if (w->open_seq <= mark || !w->writable)
            continue;
        for (const struct bfile *f = reg_head; f && !found; f = f->reg_next)
            if (f->open_seq <= mark && same_file(f, w->blockdev, w->dev, w->ino, w->rdev)) {
                snprintf(name, len, "%s", w->path);
                found = true;
            }
    }
    pthread_mutex_unlock(&reg_lock);
    return found;
}

static struct bfile *bfile_new(enum bfile_kind kind, int fd, const char *path,
                               struct diag *d)
{
    struct bfile *f = calloc(1, sizeof(*f));
    if (!f)
        return NULL;
    f->path = strdup(path);
    if (!f->path) {
        free(f);
        return NULL;
    }
    f->kind = kind;
    f->fd = fd;
    f->dir_fd = -1;
    f->diag = d;
    pthread_mutex_init(&f->lock, NULL);
    return f;
}

static int size_of_fd(int fd, const struct stat *st, uint64_t *size)
{
    if (S_ISBLK(st->st_mode)) {
        uint64_t sz;
        if (ioctl(fd, BLKGETSIZE64, &sz) < 0)
            return -errno;
        *size = sz;
    } else {
        *size = (uint64_t)st->st_size;
    }
    return 0;
}

int bfile_from_fd(struct bfile **out, int fd, const char *path, bool writable,
                  struct diag *d)
{
    struct stat st;
    enum bfile_kind kind;
    uint64_t size = UINT64_MAX;

    if (fstat(fd, &st) < 0) {
        int e = -errno;
        close(fd);
        return diag_errno(d, e, path, -1, "cannot stat");
    }
    if (S_ISDIR(st.st_mode)) {
        close(fd);
        return diag_fail(d, -EISDIR, path, -1, "is a directory, not an image");
    }
    if (S_ISREG(st.st_mode))
        kind = BFILE_REGULAR;
    else if (S_ISBLK(st.st_mode))
        kind = BFILE_BLOCKDEV;
    else if (S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode) || S_ISCHR(st.st_mode))
        kind = BFILE_STREAM;
    else {
        close(fd);
        return diag_fail(d, -EINVAL, path, -1, "not a regular file, block device or pipe");
    }
    if (kind != BFILE_STREAM) {
        int r = size_of_fd(fd, &st, &size);
        if (r < 0) {
            close(fd);
            return diag_errno(d, r, path, -1, "cannot get size");
        }
    }
    struct bfile *f = bfile_new(kind, fd, path, d);
    if (!f) {
        close(fd);
        return diag_fail(d, -ENOMEM, path, -1, "out of memory");
    }
    f->size = size;
    f->writable = writable;
    if (kind != BFILE_STREAM)
        reg_add(f, &st);
    if (kind == BFILE_STREAM && !writable) {
        f->head = malloc(BFILE_STREAM_HEAD);
        if (!f->head) {
            bfile_close(f);
            return diag_fail(d, -ENOMEM, path, -1, "out of memory");
        }
    }
    *out = f;
    return 0;
}

int bfile_open(struct bfile **out, const char *path, unsigned flags, struct diag *d)
{
    int oflags = O_CLOEXEC;
    int fd;

    if (strcmp(path, "-") == 0 && !(flags & (BFILE_O_RDWR | BFILE_O_CREATE))) {
        fd = fcntl(STDIN_FILENO, F_DUPFD_CLOEXEC, 3);
        if (fd < 0)
            return diag_errno(d, -errno, "(stdin)", -1, "cannot use standard input");
        int r = bfile_from_fd(out, fd, "(stdin)", false, d);
        if (r == 0)
            (*out)->std_stream = true;
        return r;
    }
    oflags |= (flags & (BFILE_O_RDWR | BFILE_O_CREATE)) ? O_RDWR : O_RDONLY;
    if (flags & BFILE_O_CREATE)
        oflags |= O_CREAT | O_EXCL;
    if (flags & BFILE_O_DIRECT)
        oflags |= O_DIRECT;
    fd = open(path, oflags, 0644);
    if (fd < 0 && errno == EISDIR)
        return diag_fail(d, -EISDIR, path, -1, "is a directory, not an image");
    if (fd < 0) {
        int e = errno;
        const char *what = e == ENOENT ? "no such file" :
                           e == EACCES || e == EPERM ? "permission denied" : NULL;
        if (what)
            return diag_fail(d, -e, path, -1, "cannot open: %s", what);
        return diag_errno(d, -e, path, -1, "cannot open");
    }
    return bfile_from_fd(out, fd, path, (flags & (BFILE_O_RDWR | BFILE_O_CREATE)) != 0, d);
}

int bfile_open_mem(struct bfile **out, const char *name, const void *data,
                   size_t len, struct diag *d)
{
    struct bfile *f = bfile_new(BFILE_MEMORY, -1, name, d);
    if (!f)
        return diag_fail(d, -ENOMEM, name, -1, "out of memory");
    f->mem = data;
    f->size = len;
    *out = f;
    return 0;
}

int bfile_open_slice(struct bfile **out, struct bfile *base, uint64_t off,
                     uint64_t len, const char *name)
{
    if (base->size != UINT64_MAX && (off > base->size || len > base->size - off))
        return diag_fail(base->diag, -EINVAL, base->path, (int64_t)off,
                         "member '%s' of %llu bytes runs past the end of the file",
                         name, (unsigned long long)len);
    struct bfile *f = bfile_new(BFILE_SLICE, -1, name, base->diag);
    if (!f)
        return diag_fail(base->diag, -ENOMEM, name, -1, "out of memory");
    f->base = base;
    f->base_off = off;
    f->size = len;
    *out = f;
    return 0;
}

int bfile_open_slice_head(struct bfile **out, struct bfile *base, uint64_t off,
                          uint64_t len, const char *name, uint8_t *head,
                          size_t head_len)
{
    int r = head_len <= len ? bfile_open_slice(out, base, off, len, name) :
            diag_fail(base->diag, -EINVAL, base->path, (int64_t)off,
                      "internal error: slice head longer than the slice");
    if (r < 0) {
        free(head);
        return r;
    }
    (*out)->head = head;
    (*out)->head_len = head_len;
    return 0;
}

void bfile_close(struct bfile *f)
{
    if (!f)
        return;
    reg_remove(f);
    if (f->fd >= 0)
        close(f->fd);
    if (f->dir_fd >= 0)
        close(f->dir_fd);
    pthread_mutex_destroy(&f->lock);
    free(f->head);
    free(f->path);
    free(f);
}

/* Read from a descriptor until len bytes, EOF or an error.  EINTR and short
 * reads (real or injected) are resumed. */
static int fd_read_full(struct bfile *f, void *buf, size_t len, uint64_t off,
                        bool positional, size_t *got)
{
    size_t done = 0;

    while (done < len) {
        size_t want = len - done;
        int inj = fault_inject(FAULT_READ, &want);
        ssize_t n;
        if (inj == -EINTR)
            continue;
        if (inj < 0) {
            *got = done;
            return inj;
        }
        if (positional)
            n = pread(f->fd, (char *)buf + done, want, (off_t)(off + done));
        else
            n = read(f->fd, (char *)buf + done, want);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            *got = done;
            return -errno;
        }
        if (n == 0)
            break;
        done += (size_t)n;
    }
    *got = done;
    return 0;
}

/* Forward-only reads of a pipe; the first BFILE_STREAM_HEAD bytes are kept. */
static int stream_read(struct bfile *f, void *buf, size_t len, uint64_t off,
                       size_t *got)
{
    int r = 0;
    size_t done = 0;

    pthread_mutex_lock(&f->lock);
    /* bytes before the current position can only come from the kept head */
    if (off < f->pos) {
        uint64_t past_end = off + len < f->pos ? off + len : f->pos;
        if (past_end > BFILE_STREAM_HEAD) {
            r = diag_fail(f->diag, -ESPIPE, f->path, (int64_t)off,
                          "this image needs a seekable input: it refers back to "
                          "an earlier part of the stream (now at offset %llu)",
                          (unsigned long long)f->pos);
            goto out;
        }
        done = (size_t)(past_end - off);
        memcpy(buf, f->head + off, done);
    }
    /* skip forward to the wanted offset */
    while (f->pos < off + done) {
        uint8_t scratch[65536];
        size_t want = (size_t)(off + done - f->pos);
        if (want > sizeof(scratch))
            want = sizeof(scratch);
        size_t n;
        r = fd_read_full(f, scratch, want, 0, false, &n);
        if (r < 0) {
            r = diag_errno(f->diag, r, f->path, (int64_t)f->pos, "read failed");
            goto out;
        }
        if (f->pos < BFILE_STREAM_HEAD) {
            size_t keep = n;
            if (f->pos + keep > BFILE_STREAM_HEAD)
                keep = (size_t)(BFILE_STREAM_HEAD - f->pos);
            memcpy(f->head + f->pos, scratch, keep);
        }
        f->pos += n;
        if (n < want) {
            f->size = f->pos;
            goto out;
        }
    }
    if (done < len) {
        size_t n;
        r = fd_read_full(f, (char *)buf + done, len - done, 0, false, &n);
        if (r < 0) {
            r = diag_errno(f->diag, r, f->path, (int64_t)f->pos, "read failed");
            goto out;
        }
        if (f->pos < BFILE_STREAM_HEAD) {
            size_t keep = n;
            if (f->pos + keep > BFILE_STREAM_HEAD)
                keep = (size_t)(BFILE_STREAM_HEAD - f->pos);
            memcpy(f->head + f->pos, (char *)buf + done, keep);
        }
        f->pos += n;
        done += n;
        if (done < len)
            f->size = f->pos;
    }
out:
    pthread_mutex_unlock(&f->lock);
    *got = done;
    return r;
}

int bfile_pread_upto(struct bfile *f, void *buf, size_t len, uint64_t off,
                     size_t *got)
{
    *got = 0;
    if (len == 0)
        return 0;
    switch (f->kind) {
    case BFILE_MEMORY:
    case BFILE_SLICE: {
        if (off >= f->size)
            return 0;
        size_t n = len;
        if (n > f->size - off)
            n = (size_t)(f->size - off);
        if (f->kind == BFILE_MEMORY) {
            memcpy(buf, f->mem + off, n);
            *got = n;
            return 0;
        }
        size_t from_head = 0;
        if (off < f->head_len) {
            from_head = f->head_len - (size_t)off < n ? f->head_len - (size_t)off : n;
            memcpy(buf, f->head + off, from_head);
            if (from_head == n) {
                *got = n;
                return 0;
            }
        }
        int r = bfile_pread_upto(f->base, (char *)buf + from_head, n - from_head,
                                 f->base_off + off + from_head, got);
        *got += from_head;
        return r;
    }
    case BFILE_STREAM:
        return stream_read(f, buf, len, off, got);
    default: {
        int r = fd_read_full(f, buf, len, off, true, got);
        if (r < 0)
            return diag_errno(f->diag, r, f->path, (int64_t)(off + *got), "read failed");
        return 0;
    }
    }
}

int bfile_pread(struct bfile *f, void *buf, size_t len, uint64_t off)
{
    size_t got;
    int r = bfile_pread_upto(f, buf, len, off, &got);

    if (r < 0)
        return r;
    if (got < len)
        return diag_fail(f->diag, -EIO, f->path, (int64_t)(off + got),
                         "file is truncated: needed %zu bytes at offset %llu, "
                         "the file ends at %llu",
                         len, (unsigned long long)off, (unsigned long long)(off + got));
    return 0;
}

void bfile_set_prealloc(struct bfile *f)
{
    struct statfs sf;
    int fl;

    f->prealloc = f->kind == BFILE_REGULAR && f->fd >= 0 && f->size == 0 &&
                  (fl = fcntl(f->fd, F_GETFL)) >= 0 && !(fl & O_DIRECT) &&
                  fstatfs(f->fd, &sf) == 0 && sf.f_type == 0xEF53 /* ext2/3/4 */;
}

void bfile_prealloc(struct bfile *f, uint64_t off, size_t len)
{
    /* one thread writes a file at a time (the writer); relaxed atomics
     * all the same, since a failure turns it off */
    if (__atomic_load_n(&f->prealloc, __ATOMIC_RELAXED) && len &&
        fallocate(f->fd, 0, (off_t)off, (off_t)len) < 0)
        __atomic_store_n(&f->prealloc, false, __ATOMIC_RELAXED);
}

int bfile_pwrite(struct bfile *f, const void *buf, size_t len, uint64_t off)
{
    size_t done = 0;

    if (f->fd < 0)
        return diag_fail(f->diag, -EROFS, f->path, (int64_t)off, "not writable");
    if (f->kind == BFILE_REGULAR)
        bfile_prealloc(f, off, len);
    unsigned again = 0;
    while (done < len) {
        size_t want = len - done;
        int e = fault_inject(FAULT_WRITE, &want);
        ssize_t n = -1;
        if (e == 0) {
            if (f->kind == BFILE_STREAM)
                n = write(f->fd, (const char *)buf + done, want);
            else
                n = pwrite(f->fd, (const char *)buf + done, want, (off_t)(off + done));
            e = n < 0 ? -errno : 0;
        }
        /* EAGAIN: a non-blocking pipe or a file system asking to be asked
         * again; retried like the write queue does, but not forever */
        if (e == -EINTR || (e == -EAGAIN && ++again < BFILE_MAX_RETRIES))
            continue;
        if (e < 0)
            return diag_errno(f->diag, e, f->path, (int64_t)(off + done), "write failed");
        again = 0;
        if (n == 0)
            return diag_fail(f->diag, -EIO, f->path, (int64_t)(off + done),
                             "write failed: no progress");
        done += (size_t)n;
    }
    bfile_note_written(f, off, len);
    return 0;
}

void bfile_set_writebehind(struct bfile *f, uint64_t window)
{
    f->wb_window = f->kind == BFILE_REGULAR || f->kind == BFILE_BLOCKDEV ? window : 0;
    f->wb_pending = f->wb_hi = f->wb_prev_lo = f->wb_prev_hi = 0;
    f->wb_lo = UINT64_MAX;
}

void bfile_note_written(struct bfile *f, uint64_t off, size_t len)
{
    if (!f->wb_window)
        return;
    if (off < f->wb_lo)
        f->wb_lo = off;
    if (off + len > f->wb_hi)
        f->wb_hi = off + len;
    f->wb_pending += len;
    if (f->wb_pending < f->wb_window)
        return;
    /* Failures here only cost memory, never data: the final fsync reports
     * any write error. */
    sync_file_range(f->fd, (off_t)f->wb_lo, (off_t)(f->wb_hi - f->wb_lo), SYNC_FILE_RANGE_WRITE);
    if (f->wb_prev_hi > f->wb_prev_lo) {
        sync_file_range(f->fd, (off_t)f->wb_prev_lo, (off_t)(f->wb_prev_hi - f->wb_prev_lo),
                        SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE |
                        SYNC_FILE_RANGE_WAIT_AFTER);
        posix_fadvise(f->fd, (off_t)f->wb_prev_lo, (off_t)(f->wb_prev_hi - f->wb_prev_lo),
                      POSIX_FADV_DONTNEED);
    }
    f->wb_prev_lo = f->wb_lo;
    f->wb_prev_hi = f->wb_hi;
    f->wb_lo = UINT64_MAX;
    f->wb_hi = f->wb_pending = 0;
}

int bfile_sync(struct bfile *f)
{
    if (f->fd < 0 || f->kind == BFILE_STREAM)
        return 0;
    for (;;) {
        /* an interrupted fsync (NFS, FUSE; or injected) is retried */
        int r = fault_inject(FAULT_SYNC, NULL);
        if (r == 0 && fsync(f->fd) < 0)
            r = -errno;
        if (r == -EINTR)
            continue;
        if (r < 0)
            return diag_errno(f->diag, r, f->path, -1, "fsync failed");
        return 0;
    }
}

int bfile_refresh_size(struct bfile *f)
{
    struct stat st;
    uint64_t size = 0;

    if (f->fd < 0 || f->kind == BFILE_STREAM)
        return 0;
    if (fstat(f->fd, &st) < 0)
        return diag_errno(f->diag, -errno, f->path, -1, "cannot stat");
    int r = size_of_fd(f->fd, &st, &size);
    if (r < 0)
        return diag_errno(f->diag, r, f->path, -1, "cannot get size");
    f->size = size;
    return 0;
}

uint64_t bfile_allocated(const struct bfile *f)
{
    struct stat st;

    if (f->kind == BFILE_SLICE || f->kind == BFILE_MEMORY)
        return f->size;
    if (f->fd < 0 || fstat(f->fd, &st) < 0 || !S_ISREG(st.st_mode))
        return 0;
    return (uint64_t)st.st_blocks * 512;
}
