/* VMDK writer, monolithicSparse: one hosted sparse extent with the
 * descriptor embedded (layout in vmdk_write.h).
 *
 * Grains are appended at the end of the file in the order they arrive
 * (a multi-grain write stays one write); their grain table entries go into
 * a small LRU cache of tables, written back to both copies (redundant and
 * primary) when evicted and at finish.  The directories point at fixed,
 * preallocated tables, so they are generated at finish from the layout.
 * Tables never written stay holes, which read as "no grain".
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "formats/vmdk_write.h"
#include "io/bfile.h"
#include "io/ioq.h"
#include "util/diag.h"
#include "util/endian.h"

#define GT_SLOTS 64
#define GT_BYTES (VMDKW_GTES * 4)

struct gt_slot {
    uint64_t idx;           /* grain table held */
    uint64_t stamp;         /* last use */
    uint32_t ent[VMDKW_GTES];
    bool used, dirty;
};

struct vmdkw_sparse {
    struct bd bd;
    struct vmdkw_params p;
    struct vmdkw_sparse_layout l;
    uint32_t cid;
    char *extent_name;      /* the file's own name, for the descriptor */
    struct ioq *ioq;
    bool durable;
    int err;                /* sticky first error */
    bool finished;

    uint64_t next_sector;   /* where the next grain goes */
    struct gt_slot *slots;
    uint64_t clock;
    uint8_t *on_disk;       /* bit per grain table: written back at least once */
};

extern const struct bd_driver bd_vmdkw_sparse;

static struct vmdkw_sparse *to_w(struct bd *bd)
{
    return (struct vmdkw_sparse *)bd;
}

static int set_err(struct vmdkw_sparse *w, int r)
{
    if (r < 0 && !w->err)
        w->err = r;
    return r;
}

static int fail(struct vmdkw_sparse *w, int err, int64_t off, const char *what)
{
    return set_err(w, diag_fail(w->bd.diag, err, w->bd.filename, off, "%s", what));
}

static int write_meta(struct vmdkw_sparse *w, const void *buf, size_t len, uint64_t off)
{
    return set_err(w, bfile_pwrite(w->bd.file, buf, len, off));
}

/* ---- grain table cache ------------------------------------------------------ */

static int gt_writeback(struct vmdkw_sparse *w, struct gt_slot *s)
{
    uint8_t buf[GT_BYTES];
    int r;

    for (unsigned i = 0; i < VMDKW_GTES; i++)
        le32_put(buf + 4 * i, s->ent[i]);
    uint64_t rel = s->idx * VMDKW_GT_SECTORS * VMDK_SECTOR;
    if ((r = write_meta(w, buf, GT_BYTES, w->l.rgt_offset * VMDK_SECTOR + rel)) < 0 ||
        (r = write_meta(w, buf, GT_BYTES, w->l.gt_offset * VMDK_SECTOR + rel)) < 0)
        return r;
    w->on_disk[s->idx / 8] |= (uint8_t)(1u << (s->idx % 8));
    s->dirty = false;
    return 0;
}

static int gt_get(struct vmdkw_sparse *w, uint64_t idx, struct gt_slot **out)
{
    struct gt_slot *victim = NULL;
    int r;

    for (unsigned i = 0; i < GT_SLOTS; i++) {
        struct gt_slot *s = &w->slots[i];
        if (s->used && s->idx == idx) {
            s->stamp = ++w->clock;
            *out = s;
            return 0;
        }
        if (!victim || (!s->used && victim->used) ||
            (s->used == victim->used && s->stamp < victim->stamp))
            victim = s;
    }
    if (victim->used && victim->dirty && (r = gt_writeback(w, victim)) < 0)
        return r;
    victim->used = true;
    victim->dirty = false;
    victim->idx = idx;
    victim->stamp = ++w->clock;
    if (w->on_disk[idx / 8] & (1u << (idx % 8))) {
        /* written back earlier and needed again (writes out of order) */
        uint8_t buf[GT_BYTES];
        uint64_t off = (w->l.gt_offset + idx * VMDKW_GT_SECTORS) * VMDK_SECTOR;
        if ((r = set_err(w, bfile_pread(w->bd.file, buf, GT_BYTES, off))) < 0) {
            victim->used = false;
            return r;
        }
        for (unsigned i = 0; i < VMDKW_GTES; i++)
            victim->ent[i] = le32_get(buf + 4 * i);
    } else {
        memset(victim->ent, 0, sizeof(victim->ent));
    }
    *out = victim;
    return 0;
}

static int gt_flush(struct vmdkw_sparse *w)
{
    for (unsigned i = 0; i < GT_SLOTS; i++) {
        struct gt_slot *s = &w->slots[i];
        int r;
        if (s->used && s->dirty && (r = gt_writeback(w, s)) < 0)
            return r;
    }
    return 0;
}

/* ---- create ------------------------------------------------------------------- */

static void w_free(struct vmdkw_sparse *w)
{
    free(w->slots);
    free(w->on_disk);
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
    w->ioq = o->ioq;
    w->durable = o->durable;
    w->cid = vmdkw_new_cid();
    if ((r = vmdkw_sparse_layout(p->capacity, true, &w->l, err, sizeof(err))) < 0) {
        r = diag_fail(d, r, f->path, -1, "%s", err);
        goto fail;
    }
    w->next_sector = w->l.overhead;
    if ((r = vmdkw_extent_name(f, &w->extent_name)) < 0) {
        r = r == -EINVAL ? diag_fail(d, r, f->path, -1, "the file name cannot go into the "
                                     "vmdk descriptor (it has a double quote or a control "
                                     "character)")
                         : diag_fail(d, r, f->path, -1, "out of memory");
        goto fail;
    }
    if (!(w->slots = calloc(GT_SLOTS, sizeof(*w->slots))) ||
        !(w->on_disk = calloc(w->l.gt_count / 8 + 1, 1))) {
        r = diag_fail(d, -ENOMEM, f->path, -1, "out of memory");
        goto fail;
    }
    /* -t none opens the output with O_DIRECT, but the tables and the header
     * are written in pieces of 512 bytes: go through the page cache (the
     * data is still synced in finish when durable) */
    int fl = f->fd >= 0 ? fcntl(f->fd, F_GETFL) : -1;
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

/* ---- writes --------------------------------------------------------------------- */

static uint64_t div_up(uint64_t a, uint64_t b)
{
    return a / b + (a % b != 0);
}

static int check_range(struct vmdkw_sparse *w, uint64_t off, uint64_t len, const char *op)
{
    if (w->err)
        return w->err;
    if (w->finished)
        return fail(w, -EINVAL, (int64_t)off, "internal error: write after finish");
    if (len == 0 || off >= w->p.size || len > w->p.size - off)
        return diag_fail(w->bd.diag, -EINVAL, w->bd.filename, (int64_t)off,
                         "internal error: %s of %llu bytes past the end of the image "
                         "(%llu bytes)", op, (unsigned long long)len,
                         (unsigned long long)w->p.size);
    /* only the image's last grain may be cut short */
    if (off % VMDKW_GRAIN_BYTES ||
        (len % VMDKW_GRAIN_BYTES && off + len != w->p.size))
        return diag_fail(w->bd.diag, -EINVAL, w->bd.filename, (int64_t)off,
                         "internal error: %s of %llu bytes is not aligned to the "
                         "64 KiB grain", op, (unsigned long long)len);
    return 0;
}

static int s_pwrite(struct bd *bd, const void *buf, size_t len, uint64_t off,
                    ioq_done_fn done, void *opaque)
{
    struct vmdkw_sparse *w = to_w(bd);
    uint64_t g0 = off / VMDKW_GRAIN_BYTES, n = div_up(len, VMDKW_GRAIN_BYTES);
    uint64_t host = w->next_sector;
    struct gt_slot *s = NULL;
    int r;

    if ((r = check_range(w, off, len, "write")) < 0)
        goto out;
    if (host + n * VMDKW_GRAIN_SECTORS > VMDKW_MAX_FILE_SECTORS) {
        r = fail(w, -EFBIG, (int64_t)off, "the sparse extent would grow past 2 TiB "
                 "(grain offsets are 32-bit sector numbers)");
        goto out;
    }
    for (uint64_t i = 0; i < n; i++) {
        uint64_t g = g0 + i;
        if ((!s || s->idx != g / VMDKW_GTES) && (r = gt_get(w, g / VMDKW_GTES, &s)) < 0)
            goto out;
        uint32_t *e = &s->ent[g % VMDKW_GTES];
        if (*e) {
            r = set_err(w, diag_fail(bd->diag, -EINVAL, bd->filename,
                                     (int64_t)(g * VMDKW_GRAIN_BYTES),
                                     "internal error: grain at offset %llu written twice",
                                     (unsigned long long)(g * VMDKW_GRAIN_BYTES)));
            goto out;
        }
        *e = (uint32_t)(host + i * VMDKW_GRAIN_SECTORS);
        s->dirty = true;
    }
    w->next_sector = host + n * VMDKW_GRAIN_SECTORS;
    if (w->ioq)
        return set_err(w, ioq_pwrite(w->ioq, bd->file, buf, len, host * VMDK_SECTOR,
                                     done, opaque));
    r = set_err(w, bfile_pwrite(bd->file, buf, len, host * VMDK_SECTOR));
    done(opaque, r);
    return r;
out:
    set_err(w, r);
    done(opaque, r);
    return r;
}

static int s_write_zeroes(struct bd *bd, uint64_t off, uint64_t len)
{
    struct vmdkw_sparse *w = to_w(bd);

    /* no parent: a grain never written reads as zeros */
    return check_range(w, off, len, "write_zeroes");
}

/* ---- finish ----------------------------------------------------------------------- */

/* A grain directory: entry i points at table i of the area at `gt_area`. */
static int write_gd(struct vmdkw_sparse *w, uint64_t gd_sector, uint64_t gt_area)
{
    uint8_t buf[16384];
    uint64_t per = sizeof(buf) / 4;
    int r;

    for (uint64_t i = 0; i < w->l.gt_count; i += per) {
        uint64_t n = w->l.gt_count - i < per ? w->l.gt_count - i : per;
        for (uint64_t j = 0; j < n; j++)
            le32_put(buf + 4 * j, (uint32_t)(gt_area + (i + j) * VMDKW_GT_SECTORS));
        if ((r = write_meta(w, buf, n * 4, gd_sector * VMDK_SECTOR + i * 4)) < 0)
            return r;
    }
    return 0;
}

static int s_finish(struct bd *bd)
{
    struct vmdkw_sparse *w = to_w(bd);
    struct bfile *f = bd->file;
    size_t head_len = (size_t)(1 + VMDKW_DESC_SECTORS) * VMDK_SECTOR;
    uint8_t *head;
    char lines[4200];
    int r;

    if (w->err)
        return w->err;
    if (w->finished)
        return fail(w, -EINVAL, -1, "internal error: finish called twice");
    w->finished = true;
    if ((r = gt_flush(w)) < 0)
        return r;
    if (w->ioq && (r = set_err(w, ioq_drain(w->ioq))) < 0)
        return r;
    if ((r = write_gd(w, w->l.rgd_offset, w->l.rgt_offset)) < 0 ||
        (r = write_gd(w, w->l.gd_offset, w->l.gt_offset)) < 0)
        return r;
    /* the file covers every table and whole grains (the last may be short) */
    if (ftruncate(f->fd, (off_t)(w->next_sector * VMDK_SECTOR)) < 0)
        return set_err(w, diag_errno(bd->diag, -errno, bd->filename, -1, "cannot set the size"));
    if (w->durable && (r = set_err(w, bfile_sync(f))) < 0)
        return r;

    /* last: header and descriptor, which make the file an image */
    if (!(head = calloc(1, head_len)))
        return fail(w, -ENOMEM, -1, "out of memory");
    struct vmdk4_header h = {
        .version = w->p.zeroed_grain ? 2 : 1,
        .flags = VMDK4_FLAG_NL_DETECT | VMDK4_FLAG_RGD |
                 (w->p.zeroed_grain ? VMDK4_FLAG_ZERO_GRAIN : 0),
        .capacity = w->p.capacity,
        .grain_sectors = VMDKW_GRAIN_SECTORS,
        .desc_offset = w->l.desc_offset,
        .desc_sectors = w->l.desc_sectors,
        .gtes = VMDKW_GTES,
        .rgd_offset = w->l.rgd_offset,
        .gd_offset = w->l.gd_offset,
        .overhead = w->l.overhead,
        .compress = VMDK4_COMPRESS_NONE,
    };
    vmdkw_header_encode(&h, head);
    snprintf(lines, sizeof(lines), "RW %llu SPARSE \"%s\"\n",
             (unsigned long long)w->p.capacity, w->extent_name);
    if (vmdkw_descriptor(&w->p, w->cid, lines, (char *)head + VMDK_SECTOR,
                         VMDKW_DESC_SECTORS * VMDK_SECTOR) < 0) {
        free(head);
        return fail(w, -ENAMETOOLONG, VMDK_SECTOR, "the descriptor does not fit its 10 KiB");
    }
    r = write_meta(w, head, head_len, 0);
    free(head);
    if (r < 0)
        return r;
    if (w->durable && (r = set_err(w, bfile_sync(f))) < 0)
        return r;
    bfile_refresh_size(f);
    return 0;
}

static void s_abort(struct bd *bd)
{
    struct vmdkw_sparse *w = to_w(bd);

    if (w->ioq)
        ioq_drain(w->ioq);
    w->finished = true;
    if (!w->err)
        w->err = -ECANCELED;
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
