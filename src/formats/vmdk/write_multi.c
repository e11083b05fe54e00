/* VMDK writer, images of several files: monolithicFlat, twoGbMaxExtentFlat
 * and twoGbMaxExtentSparse.  The output file gets the descriptor (text);
 * the extents are files beside it, named as qemu-img names them
 * (NAME-flat.EXT, NAME-f001.EXT, NAME-s001.EXT), each created through
 * bd_create_opts.add_file: under a temporary name that the caller renames
 * together with the descriptor at commit, or removes.
 *
 * Flat extents are sized at create (holes: zeros cost nothing) and written
 * in place; split sparse extents are hosted sparse extents without an
 * embedded descriptor (write_extent.c), as VMware Workstation writes
 * them.  However many extents there are (up to the reader's 8192), at most
 * MAX_OPEN extent files are open at a time and only those have a grain
 * table cache: an extent the writes leave is flushed and closed, and
 * opened again by its temporary name if they come back.  At finish each
 * sparse extent gets its tables and header, the written flat extents are
 * synced (when durable), and the descriptor is written last.
 */
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

#define SPLIT_SECTORS (UINT64_C(2) << 30 >> 9)     /* 2 GiB extents, as qemu */
#define MAX_OPEN      16
#define GT_SLOTS      16

struct mext {
    char *final;            /* the extent's path (beside the target) */
    char *ref;              /* its name in the descriptor */
    const char *tmp;        /* where it is until the commit (owned by the caller) */
    struct bfile *file;     /* open, or NULL */
    uint64_t start;         /* first guest byte */
    uint64_t sectors;       /* its size */
    uint64_t stamp;         /* last use, for closing the least recent */
    bool written;           /* flat: data written (to sync at finish) */
    struct vmdkw_sx x;      /* sparse extents */
};

struct vmdkw_multi {
    struct bd bd;
    struct vmdkw_params p;
    uint32_t cid;
    bool sparse;
    struct wstate ws;
    struct mext *ext;
    size_t n_ext;
    unsigned n_open;
    uint64_t clock;
};


static struct vmdkw_multi *to_w(struct bd *bd)
{
    return (struct vmdkw_multi *)bd;
}

static int set_err(struct vmdkw_multi *w, int r)
{
    return wstate_err(&w->ws, r);
}

static uint64_t ext_bytes(const struct vmdkw_multi *w)
{
    return w->p.sub == VMDKW_MONOLITHIC_FLAT ? UINT64_MAX : SPLIT_SECTORS * VMDK_SECTOR;
}

/* ---- extent files ------------------------------------------------------------- */

static int ext_close(struct vmdkw_multi *w, struct mext *e)
{
    int r = 0;

    if (!e->file)
        return 0;
    /* writes in flight may still use the file */
    if (w->ws.ioq && (r = ioq_drain(w->ws.ioq)) < 0)
        return set_err(w, r);
    if (w->sparse && (r = vmdkw_sx_flush(&e->x, true)) < 0)
        return set_err(w, r);
    bfile_close(e->file);
    e->file = NULL;
    e->x.file = NULL;
    w->n_open--;
    return 0;
}

static int ext_open(struct vmdkw_multi *w, struct mext *e)
{
    int r;

    e->stamp = ++w->clock;
    if (e->file)
        return 0;
    if (w->n_open >= MAX_OPEN) {
        struct mext *lru = NULL;
        for (size_t i = 0; i < w->n_ext; i++)
            if (w->ext[i].file && (!lru || w->ext[i].stamp < lru->stamp))
                lru = &w->ext[i];
        if (lru && (r = ext_close(w, lru)) < 0)
            return r;
    }
    if ((r = bfile_open(&e->file, e->tmp, BFILE_O_RDWR, w->bd.diag)) < 0)
        return set_err(w, r);
    /* messages name the extent, not its temporary file */
    free(e->file->path);
    if (!(e->file->path = strdup(e->final)))
        return set_err(w, diag_fail(w->bd.diag, -ENOMEM, e->final, -1, "out of memory"));
    e->x.file = e->file;
    w->n_open++;
    return 0;
}

/* ---- create --------------------------------------------------------------------- */

static void w_free(struct vmdkw_multi *w)
{
    for (size_t i = 0; w->ext && i < w->n_ext; i++) {
        struct mext *e = &w->ext[i];
        bfile_close(e->file);
        vmdkw_sx_free(&e->x);
        free(e->final);
        free(e->ref);
    }
    free(w->ext);
    bd_release(&w->bd);
    free(w);
}

/* "dir/name.ext" -> "dir/name<mid>.ext" (no dot in the name: appended). */
static char *extent_path(const char *target, const char *mid)
{
    const char *slash = strrchr(target, '/');
    const char *dot = strrchr(slash ? slash + 1 : target, '.');
    size_t pre = dot ? (size_t)(dot - target) : strlen(target);
    char *s;

    if (asprintf(&s, "%.*s%s%s", (int)pre, target, mid, dot ? dot : "") < 0)
        return NULL;
    return s;
}

static int setup_extent(struct vmdkw_multi *w, const struct bd_create_opts *o, size_t i,
                        struct diag *d)
{
    struct mext *e = &w->ext[i];
    const char *target = w->bd.file->path;
    char mid[32], err[256];
    int r;

    if (w->p.sub == VMDKW_MONOLITHIC_FLAT)
        snprintf(mid, sizeof(mid), "-flat");
    else
        snprintf(mid, sizeof(mid), "-%c%03zu", w->sparse ? 's' : 'f', i + 1);
    if (!(e->final = extent_path(target, mid)))
        return diag_fail(d, -ENOMEM, target, -1, "out of memory");
    const char *slash = strrchr(e->final, '/');
    if (!(e->ref = strdup(slash ? slash + 1 : e->final)))
        return diag_fail(d, -ENOMEM, target, -1, "out of memory");
    if ((r = o->add_file(o->add_file_opaque, e->final, &e->file, &e->tmp, d)) < 0)
        return r;
    w->n_open++;
    e->x.file = e->file;
    e->x.name = e->final;
    e->x.diag = d;
    if (w->sparse) {
        if ((r = vmdkw_sx_init(&e->x, e->sectors, false, GT_SLOTS, err, sizeof(err))) < 0)
            return diag_fail(d, r, e->final, -1, "%s", err);
    } else if (ftruncate(e->file->fd, (off_t)(e->sectors * VMDK_SECTOR)) < 0) {
        return diag_errno(d, -errno, e->final, -1, "cannot set the size");
    }
    /* keep the number of open files small: opened again when written */
    bfile_close(e->file);
    e->file = NULL;
    e->x.file = NULL;
    w->n_open--;
    return 0;
}

int vmdkw_multi_create(struct bd **out, struct bfile *f, const struct bd_create_opts *o,
                       const struct vmdkw_params *p, struct diag *d)
{
    struct vmdkw_multi *w;
    char *name = NULL;
    int r;

    *out = NULL;
    if (f->kind != BFILE_REGULAR || !o->add_file || f->std_stream)
        return diag_fail(d, -ENOTSUP, f->path, -1, "vmdk %s output needs a new, named "
                         "file (its extents are created beside it)",
                         vmdkw_subformat_name(p->sub));
    /* the extents' names go into the descriptor */
    if ((r = vmdkw_extent_name(f, &name)) < 0)
        return r == -EINVAL ? diag_fail(d, r, f->path, -1, "the file name cannot go into "
                                        "the vmdk descriptor (it has a double quote or a "
                                        "control character)")
                            : diag_fail(d, r, f->path, -1, "out of memory");
    free(name);
    if (!(w = calloc(1, sizeof(*w))))
        return diag_fail(d, -ENOMEM, f->path, -1, "out of memory");
    bd_init(&w->bd, &bd_vmdkw_multi, f, d);
    w->p = *p;
    w->sparse = p->sub == VMDKW_TWOGB_SPARSE;
    w->bd.size = p->size;
    w->bd.granule = w->sparse ? VMDKW_GRAIN_BYTES : VMDK_SECTOR;
    wstate_init(&w->ws, &w->bd, o);
    w->cid = vmdkw_new_cid();
    if (vmdkw_keep_backing(&w->bd, &w->p) < 0) {
        r = diag_fail(d, -ENOMEM, f->path, -1, "out of memory");
        goto fail;
    }
    uint64_t per = p->sub == VMDKW_MONOLITHIC_FLAT ? p->capacity : SPLIT_SECTORS;
    w->n_ext = p->capacity ? (size_t)(p->capacity / per + (p->capacity % per != 0)) : 0;
    if (w->n_ext > VMDK_MAX_EXTENTS) {
        r = diag_fail(d, -EFBIG, f->path, -1, "a %s image of %llu bytes needs %zu extents "
                      "(at most %u)", vmdkw_subformat_name(p->sub),
                      (unsigned long long)p->size, w->n_ext, VMDK_MAX_EXTENTS);
        goto fail;
    }
    if (w->n_ext && !(w->ext = calloc(w->n_ext, sizeof(*w->ext)))) {
        r = diag_fail(d, -ENOMEM, f->path, -1, "out of memory");
        goto fail;
    }
    for (size_t i = 0; i < w->n_ext; i++) {
        w->ext[i].start = i * per * VMDK_SECTOR;
        w->ext[i].sectors = p->capacity - i * per < per ? p->capacity - i * per : per;
    }
    for (size_t i = 0; i < w->n_ext; i++)
        if ((r = setup_extent(w, o, i, d)) < 0)
            goto fail;
    /* -t none opens the output with O_DIRECT: the descriptor is text of
     * any length, written through the page cache (extents have no O_DIRECT) */
    int fl = fcntl(f->fd, F_GETFL);
    if (fl >= 0 && (fl & O_DIRECT) && fcntl(f->fd, F_SETFL, fl & ~O_DIRECT) < 0) {
        r = diag_errno(d, -errno, f->path, -1, "cannot turn off O_DIRECT");
        goto fail;
    }
    if (f->size && ftruncate(f->fd, 0) < 0) {
        r = diag_errno(d, -errno, f->path, -1, "cannot truncate");
        goto fail;
    }
    *out = &w->bd;
    return 0;
fail:
    w->bd.file = NULL;      /* the caller still owns the file (and the extents' names) */
    w_free(w);
    return r;
}

/* ---- writes ------------------------------------------------------------------------ */

/* One piece of a write that lies in one extent. */
static int write_piece(struct vmdkw_multi *w, const uint8_t *buf, size_t len, uint64_t off,
                       ioq_done_fn done, void *opaque)
{
    struct mext *e = &w->ext[off / ext_bytes(w) < w->n_ext ? off / ext_bytes(w) : 0];
    uint64_t host = off - e->start;
    int r;

    if ((r = ext_open(w, e)) < 0 ||
        (w->sparse && (r = set_err(w, vmdkw_sx_alloc(&e->x, off - e->start, len, &host))) < 0)) {
        done(opaque, r);
        return r;
    }
    e->written = true;
    return wstate_write(&w->ws, e->file, buf, len, host, done, opaque);
}

static int m_pwrite(struct bd *bd, const void *buf, size_t len, uint64_t off,
                    ioq_done_fn done, void *opaque)
{
    struct vmdkw_multi *w = to_w(bd);
    uint64_t eb = ext_bytes(w);
    int r;

    if ((r = wstate_check(&w->ws, bd->size, off, len, "write")) < 0) {
        done(opaque, r);
        return r;
    }
    if (off / eb == (off + len - 1) / eb)
        return write_piece(w, buf, len, off, done, opaque);
    /* across an extent boundary: complete when all its pieces have */
    struct wmulti *s = wmulti_new(&w->ws, done, opaque);
    if (!s)
        return w->ws.err;
    for (size_t pos = 0; pos < len && r == 0;) {
        size_t n = (size_t)(eb - (off + pos) % eb);
        if (n > len - pos)
            n = len - pos;
        wmulti_add(s);
        r = write_piece(w, (const uint8_t *)buf + pos, n, off + pos, wmulti_part_done, s);
        pos += n;
    }
    wmulti_end(s, r);
    return r;
}

static int m_write_zeroes(struct bd *bd, uint64_t off, uint64_t len)
{
    struct vmdkw_multi *w = to_w(bd);
    uint64_t eb = ext_bytes(w);
    int r = wstate_check(&w->ws, bd->size, off, len, "write_zeroes");

    /* fresh files: holes and grains never written read as zeros; over a
     * parent (sparse extents only) they must say so */
    if (r < 0 || !w->p.backing)
        return r;
    while (len) {
        struct mext *e = &w->ext[off / eb];
        uint64_t n = eb - off % eb < len ? eb - off % eb : len;
        if ((r = ext_open(w, e)) < 0 ||
            (r = set_err(w, vmdkw_sx_zero(&e->x, off - e->start, n, w->p.zeroed_grain))) < 0)
            return r;
        off += n;
        len -= n;
    }
    return 0;
}

/* ---- finish ----------------------------------------------------------------------------- */

static int write_descriptor(struct vmdkw_multi *w)
{
    size_t cap = 1024 + w->n_ext * 64, used = 0;
    char *lines = malloc(cap + 1), *text = NULL;
    int r;

    if (!lines)
        return set_err(w, diag_fail(w->bd.diag, -ENOMEM, w->bd.filename, -1, "out of memory"));
    lines[0] = 0;
    for (size_t i = 0; i < w->n_ext; i++) {
        const struct mext *e = &w->ext[i];
        int n = w->sparse ? snprintf(lines + used, cap - used, "RW %llu SPARSE \"%s\"\n",
                                     (unsigned long long)e->sectors, e->ref)
                          : snprintf(lines + used, cap - used, "RW %llu FLAT \"%s\" 0\n",
                                     (unsigned long long)e->sectors, e->ref);
        if (n < 0 || (size_t)n >= cap - used) {
            free(lines);
            return set_err(w, diag_fail(w->bd.diag, -ENAMETOOLONG, w->bd.filename, -1,
                                        "extent names are too long for the descriptor"));
        }
        used += (size_t)n;
    }
    size_t tcap = used + 2048;
    ssize_t n = -ENOMEM;
    if ((text = malloc(tcap)))
        n = vmdkw_descriptor(&w->p, w->cid, lines, text, tcap);
    free(lines);
    if (n < 0) {
        free(text);
        return set_err(w, diag_fail(w->bd.diag, (int)n, w->bd.filename, -1,
                                    "cannot make the descriptor"));
    }
    r = bfile_pwrite(w->bd.file, text, (size_t)n, 0);
    free(text);
    if (r == 0 && ftruncate(w->bd.file->fd, (off_t)n) < 0)
        r = diag_errno(w->bd.diag, -errno, w->bd.filename, -1, "cannot set the size");
    if (r == 0 && w->ws.durable)
        r = bfile_sync(w->bd.file);
    return set_err(w, r);
}

static int m_finish(struct bd *bd)
{
    struct vmdkw_multi *w = to_w(bd);
    int r;

    if ((r = wstate_finish_begin(&w->ws)) < 0)
        return r;
    for (size_t i = 0; i < w->n_ext; i++) {
        struct mext *e = &w->ext[i];
        if (!w->sparse && !(e->written && w->ws.durable)) {
            if ((r = ext_close(w, e)) < 0)
                return r;
            continue;
        }
        if ((r = ext_open(w, e)) < 0)
            return r;
        r = w->sparse ? vmdkw_sx_finish(&e->x, &w->p, NULL, w->ws.durable) : bfile_sync(e->file);
        if (set_err(w, r) < 0 || (r = ext_close(w, e)) < 0)
            return r;
    }
    /* last: the descriptor, which makes the extents an image */
    return write_descriptor(w);
}

static void m_abort(struct bd *bd)
{
    wstate_abort(&to_w(bd)->ws);
    /* the caller removes the extents' temporary files */
}

static void m_close(struct bd *bd)
{
    w_free(to_w(bd));
}

const struct bd_driver bd_vmdkw_multi = {
    .name = "vmdk",
    .create_options_help = vmdkw_options_help,
    .create = vmdkw_create,
    .pwrite = m_pwrite,
    .write_zeroes = m_write_zeroes,
    .finish = m_finish,
    .abort = m_abort,
    .close = m_close,
};
