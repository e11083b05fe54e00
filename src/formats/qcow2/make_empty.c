/* qcow2 make_empty: the active image drops every cluster it holds, so that
 * it reads everything from its backing file again (what qemu-img commit
 * does to the top image after committing it, unless -d).
 *
 * Built on the snapshot commit engine (snapshot_commit.c): the active L1
 * table's references are dropped in the in-memory refcounts, a new, empty
 * L1 table and the refcount structure are written past the end of the
 * file, and one header write switches to them.  A crash before that write
 * leaves the image as it was, after it the empty one: never a state in
 * between.  Internal snapshots keep what they reference (the clusters they
 * share stay); persistent bitmaps stay as they are (the guest view does
 * not change: the backing file holds what the image held).  Clusters that
 * nothing references any more are punched out of the file afterwards
 * (best effort).  With an external data file only the L2 tables are
 * freed: data clusters are not counted in the image file.
 *
 * Refused, before anything is written: an image not open for writing, a
 * snapshot opened instead of the image, dirty or corrupt images, images
 * whose check finds corruptions, a snapshot table that could not be read,
 * and files larger than the engine handles.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>

#include "formats/qcow2/snapshot_commit.h"
#include "io/bfile.h"
#include "util/diag.h"

#define FAIL(q, err, ...) diag_fail((q)->bd.diag, err, (q)->bd.filename, -1, __VA_ARGS__)

static int refuse(struct qcow2 *q)
{
    int r;

    if (!q->bd.file->writable || q->bd.file->kind == BFILE_STREAM)
        return FAIL(q, -EROFS, "the image is not open for writing");
    if (q->snapshot >= 0)
        return FAIL(q, -EINVAL, "a snapshot is open, not the image");
    if ((r = qcow2_refuse_unclean(q)) < 0)
        return r;
    if (q->nsnaps != q->h.nb_snapshots)
        return FAIL(q, -EINVAL, "the snapshot table could not be read");
    return qcow2_check_sound(q, "emptying it");
}

/* Clusters with no reference in the new state go back to the file system. */
static void punch_free(struct qcow2_snapw *w)
{
    const struct bfile *f = w->q->bd.file;

    if (f->kind != BFILE_REGULAR || f->fd < 0)
        return;
    for (uint64_t c = 1; c < w->n;) {
        if (w->rc[c]) {
            c++;
            continue;
        }
        uint64_t e = c;
        while (e < w->n && !w->rc[e])
            e++;
        (void)fallocate(f->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
                        (off_t)(c << w->cbits), (off_t)((e - c) << w->cbits));
        c = e;
    }
}

int qcow2_make_empty(struct bd *bd, bool check_only)
{
    struct qcow2 *q = to_qcow2(bd);
    const struct qcow2_header *h = &q->h;
    struct qcow2_snapw w;
    uint64_t *al1 = NULL;
    uint8_t *tab = NULL;
    int r;

    if ((r = refuse(q)) < 0)
        return r;
    /* loads (and bounds) the refcounts: a file too large is refused here */
    if ((r = qcow2_snapw_init(&w, q)) < 0 || check_only)
        goto out;
    if ((r = qcow2_snapw_read_l1(&w, h->l1_table_offset, h->l1_size, &al1)) < 0 ||
        (r = qcow2_snapw_walk(&w, al1, h->l1_size, -1)) < 0)
        goto out;
    w.l1_size = h->l1_size;
    if (!(w.l1 = calloc(w.l1_size ? w.l1_size : 1, 8))) {
        r = FAIL(q, -ENOMEM, "out of memory");
        goto out;
    }
    /* the snapshot table as it is (the engine writes it anew) */
    if (h->nb_snapshots) {
        if (!(tab = malloc(q->snapshots_size ? q->snapshots_size : 1))) {
            r = FAIL(q, -ENOMEM, "out of memory");
            goto out;
        }
        if ((r = bfile_pread(q->bd.file, tab, q->snapshots_size, h->snapshots_offset)) < 0)
            goto out;
    }
    if ((r = qcow2_snapw_commit(&w, false, true, tab, q->snapshots_size,
                                h->nb_snapshots)) == 0)
        punch_free(&w);
out:
    free(al1);
    free(tab);
    qcow2_snapw_free(&w);
    return r;
}
