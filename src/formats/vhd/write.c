/* VHD writer: create() and the dynamic and fixed writers (layout in
 * write.h). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "formats/vhd/vhd.h"
#include "formats/vhd/vhd_int.h"
#include "formats/vhd/write.h"
#include "formats/writer_util.h"
#include "io/bfile.h"
#include "io/ioq.h"
#include "util/diag.h"
#include "util/endian.h"

#define HDR_OFF  VHD_FOOTER_SIZE
#define BAT_OFF  (HDR_OFF + VHD_DYNHDR_SIZE)

struct vhdw {
    struct bd bd;
    struct vhdw_params p;
    uint8_t uuid[16];
    struct wstate ws;
    /* dynamic */
    uint32_t *bat;
    uint32_t n_bat;
    uint64_t bat_bytes;
    uint32_t bitmap_bytes;
    uint64_t next;              /* where the next block goes */
    uint8_t *ones;              /* a bitmap with every bit set */
};

static struct vhdw *to_w(struct bd *bd)
{
    return (struct vhdw *)bd;
}

static int set_err(struct vhdw *w, int r)
{
    return wstate_err(&w->ws, r);
}

static void w_free(struct vhdw *w)
{
    free(w->bat);
    free(w->ones);
    bd_release(&w->bd);
    free(w);
}

int vhdw_create(struct bd **out, struct bfile *f, const struct bd_create_opts *o,
                struct diag *d)
{
    struct vhdw_params p;
    struct vhdw *w;
    char err[256];
    int r;

    *out = NULL;
    if (o->existing)
        return vhdip_open(out, f, o, d);
    if (o->backing_file)
        return diag_fail(d, -ENOTSUP, f->path, -1,
                         "vpc output cannot have a backing file (differencing disks are "
                         "read, not written)");
    if (o->compress)
        return diag_fail(d, -EINVAL, f->path, -1, "vpc images cannot be compressed (-c)");
    if ((r = vhdw_parse_params(o->o, o->size, &p, err, sizeof(err))) < 0)
        return diag_fail(d, r, f->path, -1, "%s", err);
    if (f->kind != BFILE_REGULAR)
        return diag_fail(d, -ENOTSUP, f->path, -1, "vpc output needs a regular file");
    if (!(w = calloc(1, sizeof(*w))))
        return diag_fail(d, -ENOMEM, f->path, -1, "out of memory");
    bd_init(&w->bd, p.fixed ? &bd_vhdw_fixed : &bd_vhdw_dynamic, f, d);
    w->p = p;
    w->bd.size = p.size;
    wstate_init(&w->ws, &w->bd, o);
    vhd_new_uuid(w->uuid);
    /* the footer and bitmaps are single sectors: through the page cache
     * (the data is still synced in finish when durable) */
    int fl = fcntl(f->fd, F_GETFL);
    if (fl >= 0 && (fl & O_DIRECT) && fcntl(f->fd, F_SETFL, fl & ~O_DIRECT) < 0) {
        r = diag_errno(d, -errno, f->path, -1, "cannot turn off O_DIRECT");
        goto fail;
    }
    if ((r = wfile_fresh(f, p.fixed ? p.size : 0, d)) < 0)
        goto fail;
    if (p.fixed) {
        w->bd.granule = VHD_SECTOR;
    } else {
        /* sectors: the converter finds the zero runs (4 KiB) and leaves
         * them out; a block is allocated by its first data */
        w->bd.granule = VHD_SECTOR;
        w->n_bat = (uint32_t)(p.size / p.block_size + (p.size % p.block_size != 0));
        w->bat_bytes = ((uint64_t)w->n_bat * 4 + VHD_SECTOR - 1) / VHD_SECTOR * VHD_SECTOR;
        w->bitmap_bytes = vhd_bitmap_bytes(p.block_size);
        w->next = BAT_OFF + w->bat_bytes;
        w->bat = malloc(w->n_bat ? (size_t)w->n_bat * 4 : 1);
        w->ones = malloc(w->bitmap_bytes);
        if (!w->bat || !w->ones) {
            r = diag_fail(d, -ENOMEM, f->path, -1, "out of memory");
            goto fail;
        }
        memset(w->bat, 0xff, (size_t)w->n_bat * 4);
        memset(w->ones, 0xff, w->bitmap_bytes);
    }
    *out = &w->bd;
    return 0;
fail:
    w->bd.file = NULL;      /* the caller still owns the file */
    w_free(w);
    return r;
}

/* --- dynamic ------------------------------------------------------------------- */

/* Block b's host offset (bitmap first), allocated at the end when new. */
static int block_alloc(struct vhdw *w, uint32_t b, uint64_t *host)
{
    if (w->bat[b] != VHD_BAT_UNUSED) {
        *host = (uint64_t)w->bat[b] * VHD_SECTOR;
        return 0;
    }
    uint64_t at = w->next;
    if (at / VHD_SECTOR >= VHD_BAT_UNUSED)
        return set_err(w, diag_fail(w->bd.diag, -EFBIG, w->bd.filename, (int64_t)at,
                                    "the image outgrows 32-bit sector numbers"));
    int r = set_err(w, bfile_pwrite(w->bd.file, w->ones, w->bitmap_bytes, at));
    if (r < 0)
        return r;
    w->bat[b] = (uint32_t)(at / VHD_SECTOR);
    w->next = at + w->bitmap_bytes + w->p.block_size;
    *host = at;
    return 0;
}

static int place(void *w, uint64_t b, uint32_t from, uint32_t to, uint64_t *host)
{
    (void)from;
    (void)to;
    int r = block_alloc(w, (uint32_t)b, host);

    *host += ((struct vhdw *)w)->bitmap_bytes;
    return r < 0 ? r : 1;       /* a new file: zero pieces stay holes */
}

/* Within a block only the 4 KiB pieces that are not zeros are written:
 * the rest stays a hole of the new file, as with qemu-img. */
static int d_pwrite(struct bd *bd, const void *buf, size_t len, uint64_t off,
                    ioq_done_fn done, void *opaque)
{
    struct vhdw *w = to_w(bd);
    int r = wstate_check(&w->ws, bd->size, off, len, "write");

    if (r < 0) {
        done(opaque, r);
        return r;
    }
    return wstate_write_blocks(&w->ws, bd->file, buf, len, off, w->p.block_size, place, w,
                               done, opaque);
}

/* A new image: a block never written is unallocated, a range of an
 * allocated block never written is a hole of the file (its bitmap bits are
 * set, it reads as zeros).  Writes never overlap (bd.h): nothing to undo. */
static int d_write_zeroes(struct bd *bd, uint64_t off, uint64_t len)
{
    return wstate_check(&to_w(bd)->ws, bd->size, off, len, "write_zeroes");
}

static int d_finish(struct bd *bd)
{
    struct vhdw *w = to_w(bd);
    struct bfile *f = bd->file;
    uint8_t foot[VHD_FOOTER_SIZE], hdr[VHD_DYNHDR_SIZE];
    struct vhd_footer vf;
    struct vhd_dynhdr h;
    int r;

    if ((r = wstate_finish_begin(&w->ws)) < 0)
        return r;
    uint8_t *bat = malloc(w->bat_bytes ? w->bat_bytes : 1);
    if (!bat)
        return set_err(w, diag_fail(bd->diag, -ENOMEM, bd->filename, -1, "out of memory"));
    memset(bat, 0xff, w->bat_bytes);
    for (uint32_t i = 0; i < w->n_bat; i++)
        be32_put(bat + 4 * (size_t)i, w->bat[i]);
    r = w->bat_bytes ? set_err(w, bfile_pwrite(f, bat, w->bat_bytes, BAT_OFF)) : 0;
    free(bat);
    if (r < 0)
        return r;
    memset(&h, 0, sizeof(h));
    h.data_offset = VHD_NO_OFFSET;
    h.table_offset = BAT_OFF;
    h.version = VHD_VERSION;
    h.max_entries = w->n_bat;
    h.block_size = w->p.block_size;
    vhd_dynhdr_encode(&h, hdr);
    vhdw_footer(&w->p, w->uuid, &vf);
    vhd_footer_encode(&vf, foot);
    if ((r = set_err(w, bfile_pwrite(f, hdr, sizeof(hdr), HDR_OFF))) < 0 ||
        (r = set_err(w, bfile_pwrite(f, foot, sizeof(foot), w->next))) < 0)
        return r;
    if (ftruncate(f->fd, (off_t)(w->next + VHD_FOOTER_SIZE)) < 0)
        return set_err(w, diag_errno(bd->diag, -errno, bd->filename, -1, "cannot truncate"));
    if (w->ws.durable && (r = set_err(w, bfile_sync(f))) < 0)
        return r;
    /* the copy at offset 0 last: until it is there, nothing probes as VHD */
    if ((r = set_err(w, bfile_pwrite(f, foot, sizeof(foot), 0))) < 0)
        return r;
    if (w->ws.durable && (r = set_err(w, bfile_sync(f))) < 0)
        return r;
    bfile_refresh_size(f);
    return 0;
}

/* --- fixed --------------------------------------------------------------------- */

static int x_pwrite(struct bd *bd, const void *buf, size_t len, uint64_t off,
                    ioq_done_fn done, void *opaque)
{
    struct vhdw *w = to_w(bd);
    int r = wstate_check(&w->ws, w->bd.size, off, len, "write");

    if (r < 0) {
        done(opaque, r);
        return r;
    }
    return wstate_write(&w->ws, bd->file, buf, len, off, done, opaque);
}

static int x_write_zeroes(struct bd *bd, uint64_t off, uint64_t len)
{
    /* a new file: holes read as zeros */
    return wstate_check(&to_w(bd)->ws, bd->size, off, len, "write_zeroes");
}

/* Copy offload: the disk is the file's first bytes, as in raw. */
static int x_map_for_offload(struct bd *bd, uint64_t off, uint64_t len, uint32_t align,
                             struct bfile **f, uint64_t *host, uint64_t *mapped)
{
    int r;

    (void)align;
    if (bd->file->kind != BFILE_REGULAR || bd->file->fd < 0)
        return -ENOTSUP;
    if ((r = wstate_check(&to_w(bd)->ws, bd->size, off, len, "offload")) < 0)
        return r;
    *f = bd->file;
    *host = off;
    *mapped = len;
    return 0;
}

static int x_finish(struct bd *bd)
{
    struct vhdw *w = to_w(bd);
    uint8_t foot[VHD_FOOTER_SIZE];
    struct vhd_footer vf;
    int r;

    if ((r = wstate_finish_begin(&w->ws)) < 0)
        return r;
    vhdw_footer(&w->p, w->uuid, &vf);
    vhd_footer_encode(&vf, foot);
    if ((r = set_err(w, bfile_pwrite(bd->file, foot, sizeof(foot), w->p.size))) < 0)
        return r;
    if (w->ws.durable && (r = set_err(w, bfile_sync(bd->file))) < 0)
        return r;
    bfile_refresh_size(bd->file);
    return 0;
}

static void w_abort(struct bd *bd)
{
    wstate_abort(&to_w(bd)->ws);
}

static void w_close(struct bd *bd)
{
    w_free(to_w(bd));
}

const struct bd_driver bd_vhdw_dynamic = {
    .name = "vpc",
    .create_options_help = vhdw_options_help,
    .create = vhdw_create,
    .pwrite = d_pwrite,
    .write_zeroes = d_write_zeroes,
    .finish = d_finish,
    .abort = w_abort,
    .close = w_close,
};

const struct bd_driver bd_vhdw_fixed = {
    .name = "vpc",
    .create_options_help = vhdw_options_help,
    .create = vhdw_create,
    .pwrite = x_pwrite,
    .write_zeroes = x_write_zeroes,
    .map_for_offload = x_map_for_offload,
    .finish = x_finish,
    .abort = w_abort,
    .close = w_close,
};
