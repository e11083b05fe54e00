/* VMDK writer, monolithicSparse: the image file is one hosted sparse extent
 * with the descriptor embedded (write_extent.c does the extent). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "formats/vmdk/write_priv.h"
#include "formats/writer_util.h"
#include "io/bfile.h"
#include "io/ioq.h"
#include "util/diag.h"

#define GT_SLOTS 64

struct vmdkw_sparse {
    struct bd bd;
    struct vmdkw_params p;
    struct vmdkw_sx x;
    uint32_t cid;
    char *extent_name;      /* the file's own name, for the descriptor */
    struct wstate ws;
};


static struct vmdkw_sparse *to_w(struct bd *bd)
{
    return (struct vmdkw_sparse *)bd;
}

static int set_err(struct vmdkw_sparse *w, int r)
{
    return wstate_err(&w->ws, r);
}

static void w_free(struct vmdkw_sparse *w)
{
    vmdkw_sx_free(&w->x);
    free(w->extent_name);
    bd_release(&w->bd);
    free(w);
}

int vmdkw_sparse_create(struct bd **out, struct bfile *f, const struct bd_create_opts *o,
                        const struct vmdkw_params *p, struct diag *d)
{
    struct vmdkw_sparse *w;
    char err[256];
    int r;

    *out = NULL;
    /* a regular file: tables never written must read as zeros (holes) */
    if (f->kind != BFILE_REGULAR)
        return diag_fail(d, -ENOTSUP, f->path, -1, "vmdk %s output needs a regular file%s",
                         vmdkw_subformat_name(p->sub), f->kind == BFILE_STREAM ?
                         " (to a pipe, use -o subformat=streamOptimized)" : "");
    if (!(w = calloc(1, sizeof(*w))))
        return diag_fail(d, -ENOMEM, f->path, -1, "out of memory");
    bd_init(&w->bd, &bd_vmdkw_sparse, f, d);
    w->p = *p;
    w->bd.size = p->size;
    w->bd.granule = VMDKW_GRAIN_BYTES;
    wstate_init(&w->ws, &w->bd, o);
    w->cid = vmdkw_new_cid();
    w->x.file = f;
    w->x.name = f->path;
    w->x.diag = d;
    if ((r = vmdkw_sx_init(&w->x, p->capacity, true, GT_SLOTS, err, sizeof(err))) < 0) {
        r = diag_fail(d, r, f->path, -1, "%s", err);
        goto fail;
    }
    if (vmdkw_keep_backing(&w->bd, &w->p) < 0) {
        r = diag_fail(d, -ENOMEM, f->path, -1, "out of memory");
        goto fail;
    }
    if ((r = vmdkw_extent_name(f, &w->extent_name)) < 0) {
        r = r == -EINVAL ? diag_fail(d, r, f->path, -1, "the file name cannot go into the "
                                     "vmdk descriptor (it has a double quote or a control "
                                     "character)")
                         : diag_fail(d, r, f->path, -1, "out of memory");
        goto fail;
    }
    /* -t none opens the output with O_DIRECT, but the tables and the header
     * are written in pieces of 512 bytes: go through the page cache (the
     * data is still synced in finish when durable) */
    int fl = fcntl(f->fd, F_GETFL);
    if (fl >= 0 && (fl & O_DIRECT) && fcntl(f->fd, F_SETFL, fl & ~O_DIRECT) < 0) {
        r = diag_errno(d, -errno, f->path, -1, "cannot turn off O_DIRECT");
        goto fail;
    }
    /* a fresh file: nothing of an earlier content may show through */
    if (f->size && ftruncate(f->fd, 0) < 0) {
        r = diag_errno(d, -errno, f->path, -1, "cannot truncate");
        goto fail;
    }
    *out = &w->bd;
    return 0;
fail:
    w->bd.file = NULL;      /* the caller still owns the file */
    w_free(w);
    return r;
}

static int s_pwrite(struct bd *bd, const void *buf, size_t len, uint64_t off,
                    ioq_done_fn done, void *opaque)
{
    struct vmdkw_sparse *w = to_w(bd);
    uint64_t host;
    int r;

    if ((r = wstate_check(&w->ws, bd->size, off, len, "write")) < 0 ||
        (r = set_err(w, vmdkw_sx_alloc(&w->x, off, len, &host))) < 0) {
        done(opaque, r);
        return r;
    }
    return wstate_write(&w->ws, bd->file, buf, len, host, done, opaque);
}

static int s_write_zeroes(struct bd *bd, uint64_t off, uint64_t len)
{
    struct vmdkw_sparse *w = to_w(bd);
    int r = wstate_check(&w->ws, bd->size, off, len, "write_zeroes");

    /* without a parent a grain never written reads as zeros */
    if (r < 0 || !w->p.backing)
        return r;
    return set_err(w, vmdkw_sx_zero(&w->x, off, len, w->p.zeroed_grain));
}

static int s_finish(struct bd *bd)
{
    struct vmdkw_sparse *w = to_w(bd);
    char lines[4200], desc[VMDKW_DESC_SECTORS * VMDK_SECTOR];
    int r;

    if ((r = wstate_finish_begin(&w->ws)) < 0)
        return r;
    snprintf(lines, sizeof(lines), "RW %llu SPARSE \"%s\"\n",
             (unsigned long long)w->p.capacity, w->extent_name);
    if (vmdkw_descriptor(&w->p, w->cid, lines, desc, sizeof(desc)) < 0)
        return set_err(w, diag_fail(bd->diag, -ENAMETOOLONG, bd->filename, VMDK_SECTOR,
                                    "the descriptor does not fit its 10 KiB"));
    if ((r = set_err(w, vmdkw_sx_finish(&w->x, &w->p, desc, w->ws.durable))) < 0)
        return r;
    bfile_refresh_size(bd->file);
    return 0;
}

static void s_abort(struct bd *bd)
{
    wstate_abort(&to_w(bd)->ws);
}

static void s_close(struct bd *bd)
{
    w_free(to_w(bd));
}

const struct bd_driver bd_vmdkw_sparse = {
    .name = "vmdk",
    .create_options_help = vmdkw_options_help,
    .create = vmdkw_create,
    .pwrite = s_pwrite,
    .write_zeroes = s_write_zeroes,
    .finish = s_finish,
    .abort = s_abort,
    .close = s_close,
};
