/* bfile: the one way format drivers read (and write) bytes.
 *
 * A bfile is a regular file, a block device, a forward-only stream (a pipe on
 * stdin) or a buffer in memory (fuzzing and unit tests).  Drivers never touch
 * file descriptors for reading metadata; they call bfile_pread(), which
 *   - reads exactly `len` bytes or fails (a short read before the requested
 *     end is an error naming the file and offset, never silent zeros),
 *   - retries EINTR and resumes short transfers,
 *   - passes through the test-only fault injector (io/fault.h).
 * On a stream, reads must go forward: the first BFILE_STREAM_HEAD bytes are
 * kept so that probing and re-reading the header work, anything before the
 * current position beyond that fails with -ESPIPE and a message saying the
 * format needs a seekable input.  Stream reads are serialised internally.
 */
#ifndef DISKIMG_BFILE_H
#define DISKIMG_BFILE_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

struct diag;

enum bfile_kind {
    BFILE_REGULAR,
    BFILE_BLOCKDEV,
    BFILE_STREAM,   /* pipe/FIFO/socket: forward reads only */
    BFILE_MEMORY,   /* read-only buffer owned by the caller */
    BFILE_SLICE,    /* a byte range of another bfile (a member of an OVA) */
};

#define BFILE_STREAM_HEAD (64 * 1024)

struct bfile {
    enum bfile_kind kind;
    int fd;                 /* -1 for BFILE_MEMORY */
    char *path;             /* as the user or the referring image named it */
    bool std_stream;        /* standard input or output ("-"): `path` is only
                               a name for messages, never a file name */
    uint64_t size;          /* bytes; for streams UINT64_MAX until EOF is seen */
    bool writable;
    struct diag *diag;      /* where failures are recorded (may be NULL) */

    const uint8_t *mem;     /* BFILE_MEMORY */

    struct bfile *base;     /* BFILE_SLICE: the containing file (not owned) */
    uint64_t base_off;      /* BFILE_SLICE: where the slice starts in it */
    size_t head_len;        /* BFILE_SLICE: its first head_len bytes are in
                               `head` (read already from a stream) */

    /* The folder the file was opened in (O_PATH descriptor, owned), when it
     * was opened beneath another image's folder: the references of the
     * image in it are opened beneath this one.  -1: the folder of `path`. */
    int dir_fd;

    /* new output file whose ranges are allocated before they are written
     * (bfile_set_prealloc) */
    bool prealloc;

    /* write-behind (bfile_set_writebehind) */
    uint64_t wb_window, wb_pending, wb_lo, wb_hi, wb_prev_lo, wb_prev_hi;

    /* the open-file registry (bfile_is_open): regular files and block
     * devices, numbered in the order they were opened */
    uint64_t open_seq;      /* 0: not registered */
    dev_t dev, rdev;
    ino_t ino;
    bool blockdev;
    struct bfile *reg_prev, *reg_next;

    /* BFILE_STREAM state */
    pthread_mutex_t lock;
    uint64_t pos;           /* next byte the pipe will deliver */
    uint8_t *head;          /* first min(pos, BFILE_STREAM_HEAD) bytes
                               (BFILE_SLICE: its first head_len bytes) */
};

/* The open-file registry, for "the output is also an input": every regular
 * file and block device opened through bfile is known while it is open.
 * bfile_open_mark() is the number of the last one opened so far.
 * bfile_is_open(): is the file `st` describes (the same inode; a block
 * device: the same device number, whatever node it was opened by) open as
 * a bfile numbered at most `mark`?  bfile_written_input(): is a bfile
 * opened for writing after `mark` the file of one opened up to `mark`
 * (then its name goes to `name`)? */
uint64_t bfile_open_mark(void);
bool bfile_is_open(const struct stat *st, uint64_t mark);
bool bfile_written_input(uint64_t mark, char *name, size_t len);

/* Flags for bfile_open. */
#define BFILE_O_RDWR    0x1   /* open for writing too */
#define BFILE_O_DIRECT  0x2   /* O_DIRECT (cache=none) */
#define BFILE_O_CREATE  0x4   /* create exclusively (O_CREAT|O_EXCL) */

/* Open `path` ("-" is stdin, read-only stream).  Fails with a message for a
 * missing file, a directory, a permission problem.  Returns 0 or -errno. */
int bfile_open(struct bfile **out, const char *path, unsigned flags,
               struct diag *d);

/* Wrap an already-open descriptor (taken over: closed by bfile_close). */
int bfile_from_fd(struct bfile **out, int fd, const char *path, bool writable,
                  struct diag *d);

/* A read-only file over `len` bytes at `data` (not copied, not freed). */
int bfile_open_mem(struct bfile **out, const char *name, const void *data,
                   size_t len, struct diag *d);

/* A read-only view of `len` bytes at `off` of `base` (which must outlive it). */
int bfile_open_slice(struct bfile **out, struct bfile *base, uint64_t off,
                     uint64_t len, const char *name);

/* The same over a stream whose first `head_len` bytes at `off` were read
 * already (they are in `head`, malloc'd, taken over also on failure): reads
 * of them come from `head`, the rest from the stream. */
int bfile_open_slice_head(struct bfile **out, struct bfile *base, uint64_t off,
                          uint64_t len, const char *name, uint8_t *head,
                          size_t head_len);

void bfile_close(struct bfile *f);

/* Exactly `len` bytes at `off`, or an error recorded in f->diag. */
int bfile_pread(struct bfile *f, void *buf, size_t len, uint64_t off);

/* Up to `len` bytes at `off`; *got is set to what the file holds there (0 at
 * or past the end is not an error here).  Other errors as bfile_pread. */
int bfile_pread_upto(struct bfile *f, void *buf, size_t len, uint64_t off,
                     size_t *got);

/* A new, empty output file: have bfile_prealloc allocate each range just
 * before it is written, where that measured faster -- ext4: the writes
 * then skip delayed allocation's per-block bookkeeping (fixed VHD -> raw
 * of the bench corpus, 434 MiB written: 152 ms against 193 ms, and no
 * stalls; with fsync 395 against 425 ms for dd of the same bytes).  XFS
 * and btrfs measured the same either way and NFS would pay a round trip
 * per write: left alone.  Only ranges that are then written are
 * allocated, so the file is as sparse as without. */
void bfile_set_prealloc(struct bfile *f);

/* Allocate [off, off+len) of f when bfile_set_prealloc chose to (a
 * failure only stops it: the write that follows reports real errors). */
void bfile_prealloc(struct bfile *f, uint64_t off, size_t len);

/* Exactly `len` bytes at `off` (sequential writes on a stream). */
int bfile_pwrite(struct bfile *f, const void *buf, size_t len, uint64_t off);

/* Keep the dirty page cache of a file being written small: after every
 * `window` bytes written, start writing them back, wait for the window
 * before and drop it from the cache (sync_file_range + fadvise).  0 turns it
 * off.  Costs nothing extra when the data must be synced at the end anyway. */
void bfile_set_writebehind(struct bfile *f, uint64_t window);

/* Account a completed write (bfile_pwrite does it itself; the write queue
 * calls it for writes it completes). */
void bfile_note_written(struct bfile *f, uint64_t off, size_t len);

/* fsync, with the file named on failure. */
int bfile_sync(struct bfile *f);

/* Re-read the size (after the file was written or truncated). */
int bfile_refresh_size(struct bfile *f);

/* Bytes the file occupies on disk (st_blocks * 512), 0 for non-files. */
uint64_t bfile_allocated(const struct bfile *f);

#endif
