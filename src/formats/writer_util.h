/* What the simple image writers share (the VHD and VDI writers, new and in
 * place, and the vmdk sparse and multi-file writers): the sticky first
 * error, the range check of a write, data writes through the write queue or
 * directly, a write made of several parts that completes once, the first
 * steps of finish() and abort(), and the 4 KiB pieces of a block that are
 * not zeros.  The writers' own layouts stay theirs.
 */
#ifndef DISKIMG_FORMATS_WRITER_UTIL_H
#define DISKIMG_FORMATS_WRITER_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "formats/bd.h"
#include "io/ioq.h"

struct bfile;

/* Embedded in each writer. */
struct wstate {
    struct bd *bd;              /* the writer's image (diag, filename, granule) */
    struct ioq *ioq;            /* write queue, or NULL for plain writes */
    bool durable;               /* fsync in finish */
    bool finished;              /* finish() or abort() ran */
    int err;                    /* the first error: later calls fail with it */
};

void wstate_init(struct wstate *s, struct bd *bd, const struct bd_create_opts *o);

/* Keep r as the first error when it is one; returns r. */
int wstate_err(struct wstate *s, int r);

/* A write or write_zeroes `op` of [off, off+len) inside an image of `size`
 * bytes: whole granules, but for the image's end.  An earlier error, or a
 * call after finish, fails too. */
int wstate_check(struct wstate *s, uint64_t size, uint64_t off, uint64_t len,
                 const char *op);

/* Data to `f` at `host`, through the queue when there is one; `done` runs
 * exactly once. */
int wstate_write(struct wstate *s, struct bfile *f, const void *buf, size_t len,
                 uint64_t host, ioq_done_fn done, void *opaque);

/* finish(): fails with an earlier error or when called twice, marks the
 * writer finished and waits for every queued write. */
int wstate_finish_begin(struct wstate *s);

/* abort(): waits for queued writes; later calls fail with -ECANCELED. */
void wstate_abort(struct wstate *s);

/* One write in several parts (pieces of a block, extents): the caller's
 * `done` runs once, when the last part has completed, with the first
 * error.  wmulti_new() holds it open until wmulti_end(); NULL when out of
 * memory (recorded, and `done` has run). */
struct wmulti;
struct wmulti *wmulti_new(struct wstate *s, ioq_done_fn done, void *opaque);
/* One more part to complete through wmulti_part_done (hand it as `done`). */
void wmulti_add(struct wmulti *m);
void wmulti_part_done(void *m, int res);
/* A part written through wstate_write. */
int wmulti_write(struct wstate *s, struct wmulti *m, struct bfile *f, const void *buf,
                 size_t len, uint64_t host);
/* Submitting is over (r: its error, or 0). */
void wmulti_end(struct wmulti *m, int r);

/* The next run of 4 KiB pieces of buf[*at, n) that are not all zeros:
 * true with the run as [*at, *end), false when only zeros are left. */
#define WPIECE 4096u
bool wpiece_next(const uint8_t *buf, size_t n, size_t *at, size_t *end);

/* Empty the regular file `f` for a new image, and when `size` is not 0 size
 * it (sparse).  A file that is empty already is not truncated: on ext4 a
 * truncate to 0 marks the file for writeback at close (auto_da_alloc), and
 * the close of a converted image then waits for all its data to be sent to
 * the disk (half the wall time of `-t unsafe` raw -> vpc).  Failures are
 * recorded in `d`. */
int wfile_fresh(struct bfile *f, uint64_t size, struct diag *d);

/* Make [off, off+len) of `f` read as zeros: a punched hole where the file
 * system can, else zeros written. */
int wfile_zero(struct bfile *f, uint64_t off, uint64_t len);

/* A write at guest `off` into an image of blocks of `bs` bytes: `place`
 * gives where block `b`'s bytes from `from` (its offset inside the block)
 * to `to` go in `f` (*host: of the block's first byte; allocating it when
 * new).  `place` returns 1 for a block whose bytes read as zeros already
 * (new, past the end of the file): only the non-zero 4 KiB pieces are
 * written; 0 for a block that may hold old bytes: the zero pieces are
 * cleared (wfile_zero) too.  `done` runs once when all have completed. */
typedef int (*wblock_place_fn)(void *w, uint64_t b, uint32_t from, uint32_t to,
                               uint64_t *host);
int wstate_write_blocks(struct wstate *s, struct bfile *f, const void *buf, size_t len,
                        uint64_t off, uint32_t bs, wblock_place_fn place, void *w,
                        ioq_done_fn done, void *opaque);

/* The base of the in-place writers (convert -n into vpc and vdi): the
 * image already in `f`, opened again by its reader for writing (its
 * references under the rules of an input's, unless o->allow_external);
 * writes go through the reader's file, in order (no queue). */
struct wip {
    struct bd bd;               /* what the converter writes to: first */
    struct wstate ws;
    struct bd *img;             /* the target, opened by the reader */
    struct bfile *f;            /* the reader's file */
};

/* A writer of `size` bytes (a struct embedding struct wip first) with
 * driver `drv` over the image of format `fmt` in `f`, for a source of
 * o->size bytes; refused when the image's check finds corruptions
 * (nothing is overwritten in a damaged image) or it is smaller than the
 * source.  On failure nothing is kept and the caller still owns `f`. */
int wip_open(struct wip **out, size_t size, const struct bd_driver *drv, const char *fmt,
             struct bfile *f, const struct bd_create_opts *o, struct diag *d);
/* Frees the base (the writer frees its own fields first). */
void wip_free(struct wip *w);
/* pwrite of an in-place writer whose blocks are `bs` bytes. */
int wip_pwrite(struct wip *w, uint32_t bs, wblock_place_fn place, const void *buf,
               size_t len, uint64_t off, ioq_done_fn done, void *opaque);

#endif
