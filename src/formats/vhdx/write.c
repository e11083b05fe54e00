/* VHDX writer: create() and the dynamic and fixed writers (layout and
 * order of writes in write.h). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "formats/vhdx/format.h"
#include "formats/vhdx/write.h"
#include "formats/writer_util.h"
#include "io/bfile.h"
#include "io/ioq.h"
#include "util/diag.h"
#include "util/endian.h"
#include "zerodetect/zerodetect.h"

#ifndef DISKIMG_VERSION
#define DISKIMG_VERSION "0"
#endif

/* The metadata items, at the start of the region's second 64 KiB. */
#define ITEMS_OFF        VHDX_META_TABLE_SIZE
#define ITEM_PARAMS      0u
#define ITEM_SIZE        8u
#define ITEM_PAGE83      16u
#define ITEM_LOGICAL     32u
#define ITEM_PHYSICAL    36u
#define ITEMS_BYTES      4096u

struct vhdxw {
    struct bd bd;
    struct vhdxw_params p;
    struct vhdxw_layout l;
    struct ioq *ioq;
    bool durable, finished;
    int err;                    /* sticky first error */
    /* Per payload block: its file offset in MiB, 0 = no data written yet
     * (fixed: its place, known from the start, is still recorded here
     * only once written, which is what block_state_zero looks at). */
    uint32_t *blk;
    uint64_t next;              /* dynamic: where the next block goes */
};

static struct vhdxw *to_w(struct bd *bd)
{
    return (struct vhdxw *)bd;
}

static int set_err(struct vhdxw *w, int r)
{
    if (r < 0 && !w->err)
        w->err = r;
    return r;
}

static void w_free(struct vhdxw *w)
{
    free(w->blk);
    bd_release(&w->bd);
    free(w);
}

int vhdxw_create(struct bd **out, struct bfile *f, const struct bd_create_opts *o,
                 struct diag *d)
{
    struct vhdxw_params p;
    struct vhdxw *w;
    char err[256];
    int r;

    *out = NULL;
    if (o->existing)
        return diag_fail(d, -ENOTSUP, f->path, -1,
                         "writing into an existing vhdx image (-n) is not supported");
    if (o->backing_file)
        return diag_fail(d, -ENOTSUP, f->path, -1,
                         "vhdx output cannot have a backing file (differencing images are "
                         "read, not written)");
    if (o->compress)
        return diag_fail(d, -EINVAL, f->path, -1, "vhdx images cannot be compressed (-c)");
    if ((r = vhdxw_parse_params(o->o, o->size, &p, err, sizeof(err))) < 0)
        return diag_fail(d, r, f->path, -1, "%s", err);
    if (f->kind != BFILE_REGULAR)
        return diag_fail(d, -ENOTSUP, f->path, -1, "vhdx output needs a regular file");
    if (!(w = calloc(1, sizeof(*w))))
        return diag_fail(d, -ENOMEM, f->path, -1, "out of memory");
    bd_init(&w->bd, p.fixed ? &bd_vhdxw_fixed : &bd_vhdxw_dynamic, f, d);
    w->p = p;
    vhdxw_layout(&p, &w->l);
    w->bd.size = p.size;
    w->bd.granule = 512;
    w->ioq = o->ioq;
    w->durable = o->durable;
    w->next = w->l.data_off;
    /* the headers and tables are written through the page cache (the data
     * is still synced in finish when durable) */
    int fl = fcntl(f->fd, F_GETFL);
    if (fl >= 0 && (fl & O_DIRECT) && fcntl(f->fd, F_SETFL, fl & ~O_DIRECT) < 0) {
        r = diag_errno(d, -errno, f->path, -1, "cannot turn off O_DIRECT");
        goto fail;
    }
    /* a block's offset in MiB fits 32 bits: the file stays below 4 PiB */
    if (!(w->blk = calloc(w->l.blocks ? (size_t)w->l.blocks : 1, sizeof(*w->blk)))) {
        r = diag_fail(d, -ENOMEM, f->path, -1, "out of memory");
        goto fail;
    }
    if ((r = wfile_fresh(f, p.fixed ? w->l.data_off + w->l.blocks * p.block_size : 0, d)) < 0)
        goto fail;
    *out = &w->bd;
    return 0;
fail:
    w->bd.file = NULL;      /* the caller still owns the file */
    w_free(w);
    return r;
}

static int check_range(struct vhdxw *w, uint64_t off, uint64_t len, const char *op)
{
    if (w->err)
        return w->err;
    if (w->finished)
        return set_err(w, diag_fail(w->bd.diag, -EINVAL, w->bd.filename, (int64_t)off,
                                    "internal error: %s after finish", op));
    if (len == 0 || off >= w->p.size || len > w->p.size - off || off % 512)
        return diag_fail(w->bd.diag, -EINVAL, w->bd.filename, (int64_t)off,
                         "internal error: %s of %llu bytes at %llu is not whole sectors "
                         "inside the image", op, (unsigned long long)len,
                         (unsigned long long)off);
    return 0;
}

/* Block b's file offset, given its place when new (appended: dynamic). */
static int block_host(struct vhdxw *w, uint64_t b, uint64_t *host)
{
    uint64_t bs = w->p.block_size;

    if (!w->blk[b]) {
        uint64_t at = w->p.fixed ? w->l.data_off + b * bs : w->next;
        if (at / VHDX_MIB > UINT32_MAX)
            return set_err(w, diag_fail(w->bd.diag, -EFBIG, w->bd.filename, (int64_t)at,
                                        "the image outgrows 4 PiB"));
        w->blk[b] = (uint32_t)(at / VHDX_MIB);
        if (!w->p.fixed)
            w->next = at + bs;
    }
    *host = (uint64_t)w->blk[b] * VHDX_MIB;
    return 0;
}

/* --- the pieces of one write, completed together ------------------------------ */

struct multi {
    unsigned left;
    int err;
    ioq_done_fn done;
    void *opaque;
};

static void multi_done(void *opaque, int res)
{
    struct multi *m = opaque;

    if (res < 0 && !m->err)
        m->err = res;
    if (--m->left == 0) {
        m->done(m->opaque, m->err);
        free(m);
    }
}

static int data_write(struct vhdxw *w, const void *buf, size_t len, uint64_t host,
                      ioq_done_fn done, void *opaque)
{
    if (w->ioq)
        return set_err(w, ioq_pwrite(w->ioq, w->bd.file, buf, len, host, done, opaque));
    int r = set_err(w, bfile_pwrite(w->bd.file, buf, len, host));
    done(opaque, r);
    return r;
}

/* A write is split at block boundaries: blocks of a dynamic image are not
 * next to each other in the file. */
static int w_pwrite(struct bd *bd, const void *buf, size_t len, uint64_t off,
                    ioq_done_fn done, void *opaque)
{
    struct vhdxw *w = to_w(bd);
    uint64_t bs = w->p.block_size;
    struct multi *m;
    int r;

    if ((r = check_range(w, off, len, "write")) < 0) {
        done(opaque, r);
        return r;
    }
    if (!(m = calloc(1, sizeof(*m)))) {
        r = set_err(w, diag_fail(bd->diag, -ENOMEM, bd->filename, -1, "out of memory"));
        done(opaque, r);
        return r;
    }
    m->left = 1;                /* held until every piece is submitted */
    m->done = done;
    m->opaque = opaque;
    const uint8_t *p = buf;
    r = 0;
    for (size_t at = 0; at < len && r == 0;) {
        uint64_t o = off + at, host = 0;
        size_t n = (size_t)(bs - o % bs);
        if (n > len - at)
            n = len - at;
        if ((r = block_host(w, o / bs, &host)) < 0)
            break;
        m->left++;
        r = data_write(w, p + at, n, host + o % bs, multi_done, m);
        at += n;
    }
    if (r < 0 && !m->err)
        m->err = r;
    multi_done(m, 0);
    return r;
}

/* A new image: what was never written reads as zeros (a block never
 * written is ZERO or NOT_PRESENT, a range of a written block never written
 * is a hole of the file).  Writes never overlap, so nothing to undo. */
static int w_write_zeroes(struct bd *bd, uint64_t off, uint64_t len)
{
    return check_range(to_w(bd), off, len, "write_zeroes");
}

/* Copy offload: the range's block gets its place as for a write; the
 * bytes go there directly (blocks lie on MiB boundaries, so a block's
 * bytes are congruent to the guest offset modulo any align up to 1 MiB). */
static int w_map_for_offload(struct bd *bd, uint64_t off, uint64_t len, uint32_t align,
                             struct bfile **f, uint64_t *host, uint64_t *mapped)
{
    struct vhdxw *w = to_w(bd);
    uint64_t bs = w->p.block_size, h = 0;
    int r;

    if (bd->file->kind != BFILE_REGULAR || bd->file->fd < 0 || align > VHDX_MIB ||
        (off + len) % 512)
        return -ENOTSUP;
    if ((r = check_range(w, off, len, "offload")) < 0)
        return r;
    if ((r = block_host(w, off / bs, &h)) < 0)
        return r;
    *f = bd->file;
    *host = h + off % bs;
    *mapped = bs - off % bs < len ? bs - off % bs : len;
    return 0;
}

/* --- finish: tables, then identifier and headers ------------------------------ */

static uint8_t *alloc_zeroed(size_t n)
{
    void *p = NULL;

    if (posix_memalign(&p, 4096, n ? n : 1) != 0)
        return NULL;
    memset(p, 0, n);
    return p;
}

/* The BAT, written in pieces of at most 1 MiB (its entries only: the rest
 * of the region is a hole, PAYLOAD_BLOCK_NOT_PRESENT; so are pieces of
 * NOT_PRESENT entries only). */
static int write_bat(struct vhdxw *w)
{
    const uint64_t piece = VHDX_MIB / VHDX_BAT_ENTRY_SIZE;
    uint64_t n = w->l.bat_entries, cr = w->l.chunk_ratio;
    unsigned absent = w->p.zero_state ? VHDX_PAYLOAD_ZERO : VHDX_PAYLOAD_NOT_PRESENT;
    uint8_t *buf = alloc_zeroed(VHDX_MIB);
    int r = 0;

    if (!buf)
        return set_err(w, diag_fail(w->bd.diag, -ENOMEM, w->bd.filename, -1,
                                    "out of memory"));
    for (uint64_t first = 0; first < n && r == 0; first += piece) {
        uint64_t cnt = n - first < piece ? n - first : piece;
        for (uint64_t i = 0; i < cnt; i++) {
            uint64_t idx = first + i, e;
            if ((idx + 1) % (cr + 1) == 0) {
                e = vhdx_bat_entry_encode(VHDX_SB_NOT_PRESENT, 0);
            } else {
                uint64_t b = idx - idx / (cr + 1);
                if (w->blk[b])
                    e = vhdx_bat_entry_encode(VHDX_PAYLOAD_FULLY_PRESENT,
                                              (uint64_t)w->blk[b] * VHDX_MIB);
                else if (w->p.fixed && !w->p.zero_state)
                    e = vhdx_bat_entry_encode(VHDX_PAYLOAD_FULLY_PRESENT,
                                              w->l.data_off + b * w->p.block_size);
                else
                    e = vhdx_bat_entry_encode(absent, 0);
            }
            le64_put(buf + i * VHDX_BAT_ENTRY_SIZE, e);
        }
        size_t bytes = (size_t)((cnt * VHDX_BAT_ENTRY_SIZE + 4095) / 4096 * 4096);
        memset(buf + cnt * VHDX_BAT_ENTRY_SIZE, 0, bytes - cnt * VHDX_BAT_ENTRY_SIZE);
        /* all NOT_PRESENT: the region is still a hole of the new file */
        if (!buffer_is_zero(buf, bytes))
            r = set_err(w, bfile_pwrite(w->bd.file, buf, bytes,
                                        w->l.bat_off + first * VHDX_BAT_ENTRY_SIZE));
    }
    free(buf);
    return r;
}

/* The metadata region's table and items (as qemu-img and Hyper-V flag
 * them: the file parameters required, the rest required and of the
 * virtual disk). */
static int write_metadata(struct vhdxw *w)
{
    uint8_t *buf = alloc_zeroed(ITEMS_OFF + ITEMS_BYTES);
    struct vhdx_meta_entry e[5];
    struct vhdx_params vp;
    int r;

    if (!buf)
        return set_err(w, diag_fail(w->bd.diag, -ENOMEM, w->bd.filename, -1,
                                    "out of memory"));
    memset(&vp, 0, sizeof(vp));
    vp.block_size = w->p.block_size;
    vp.leave_allocated = w->p.fixed;
    vp.disk_size = w->p.size;
    vp.logical_sector = vp.physical_sector = 512;
    vhdxw_new_guid(vp.page83);
    memset(e, 0, sizeof(e));
    static const struct { const uint8_t *guid; uint32_t off, len, flags; } items[5] = {
        { vhdx_guid_file_params, ITEM_PARAMS, 8, VHDX_META_IS_REQUIRED },
        { vhdx_guid_disk_size, ITEM_SIZE, 8, VHDX_META_IS_REQUIRED | VHDX_META_IS_VIRTUAL },
        { vhdx_guid_page83, ITEM_PAGE83, 16, VHDX_META_IS_REQUIRED | VHDX_META_IS_VIRTUAL },
        { vhdx_guid_logical_sector, ITEM_LOGICAL, 4,
          VHDX_META_IS_REQUIRED | VHDX_META_IS_VIRTUAL },
        { vhdx_guid_physical_sector, ITEM_PHYSICAL, 4,
          VHDX_META_IS_REQUIRED | VHDX_META_IS_VIRTUAL },
    };
    for (int i = 0; i < 5; i++) {
        memcpy(e[i].guid, items[i].guid, 16);
        e[i].off = ITEMS_OFF + items[i].off;
        e[i].len = items[i].len;
        e[i].flags = items[i].flags;
    }
    vhdx_meta_encode(e, 5, buf);
    uint8_t *it = buf + ITEMS_OFF;
    vhdx_file_params_encode(&vp, it + ITEM_PARAMS);
    vhdx_disk_size_encode(&vp, it + ITEM_SIZE);
    memcpy(it + ITEM_PAGE83, vp.page83, 16);
    vhdx_sector_size_encode(vp.logical_sector, it + ITEM_LOGICAL);
    vhdx_sector_size_encode(vp.physical_sector, it + ITEM_PHYSICAL);
    r = set_err(w, bfile_pwrite(w->bd.file, buf, ITEMS_OFF + ITEMS_BYTES, w->l.meta_off));
    free(buf);
    return r;
}

static int write_regions(struct vhdxw *w)
{
    uint8_t *buf = alloc_zeroed(VHDX_REGION_SIZE);
    struct vhdx_region_entry e[2];
    int r;

    if (!buf)
        return set_err(w, diag_fail(w->bd.diag, -ENOMEM, w->bd.filename, -1,
                                    "out of memory"));
    memset(e, 0, sizeof(e));
    memcpy(e[0].guid, vhdx_guid_bat, 16);
    e[0].off = w->l.bat_off;
    e[0].len = (uint32_t)w->l.bat_len;
    e[0].required = true;
    memcpy(e[1].guid, vhdx_guid_metadata, 16);
    e[1].off = w->l.meta_off;
    e[1].len = (uint32_t)w->l.meta_len;
    e[1].required = true;
    vhdx_regions_encode(e, 2, buf);
    if ((r = set_err(w, bfile_pwrite(w->bd.file, buf, VHDX_REGION_SIZE, VHDX_REGION1_OFF))) == 0)
        r = set_err(w, bfile_pwrite(w->bd.file, buf, VHDX_REGION_SIZE, VHDX_REGION2_OFF));
    free(buf);
    return r;
}

/* The identifier and both headers (sequence 1 and 2, otherwise the same):
 * the last writes, after which the file is a VHDX. */
static int write_headers(struct vhdxw *w)
{
    uint8_t *buf = alloc_zeroed(VHDX_HEADER_SIZE);
    struct vhdx_header h;
    int r;

    if (!buf)
        return set_err(w, diag_fail(w->bd.diag, -ENOMEM, w->bd.filename, -1,
                                    "out of memory"));
    vhdx_file_id_encode("diskimg " DISKIMG_VERSION, buf);
    r = set_err(w, bfile_pwrite(w->bd.file, buf, VHDX_HEADER_SIZE, 0));
    memset(&h, 0, sizeof(h));
    vhdxw_new_guid(h.file_write_guid);
    vhdxw_new_guid(h.data_write_guid);
    h.version = VHDX_VERSION;
    h.log_version = VHDX_LOG_VERSION;
    h.log_length = w->p.log_size;
    h.log_offset = w->l.log_off;
    for (unsigned i = 0; i < 2 && r == 0; i++) {
        h.seq = i + 1;
        vhdx_header_encode(&h, buf);
        r = set_err(w, bfile_pwrite(w->bd.file, buf, VHDX_HEADER_SIZE,
                                    i ? VHDX_HEADER2_OFF : VHDX_HEADER1_OFF));
    }
    free(buf);
    return r;
}

static int w_finish(struct bd *bd)
{
    struct vhdxw *w = to_w(bd);
    struct bfile *f = bd->file;
    int r;

    if (w->err)
        return w->err;
    w->finished = true;
    if (w->ioq && (r = set_err(w, ioq_drain(w->ioq))) < 0)
        return r;
    /* every block whole inside the file (its unwritten ranges are holes) */
    uint64_t end = w->p.fixed ? w->l.data_off + w->l.blocks * w->p.block_size : w->next;
    if (ftruncate(f->fd, (off_t)end) < 0)
        return set_err(w, diag_errno(bd->diag, -errno, bd->filename, -1,
                                     "cannot set the size"));
    if ((r = write_bat(w)) < 0 || (r = write_metadata(w)) < 0 || (r = write_regions(w)) < 0)
        return r;
    if (w->durable && (r = set_err(w, bfile_sync(f))) < 0)
        return r;
    if ((r = write_headers(w)) < 0)
        return r;
    if (w->durable && (r = set_err(w, bfile_sync(f))) < 0)
        return r;
    bfile_refresh_size(f);
    return 0;
}

static void w_abort(struct bd *bd)
{
    struct vhdxw *w = to_w(bd);

    if (w->ioq)
        ioq_drain(w->ioq);
    w->finished = true;
    if (!w->err)
        w->err = -ECANCELED;
}

static void w_close(struct bd *bd)
{
    w_free(to_w(bd));
}

const struct bd_driver bd_vhdxw_dynamic = {
    .name = "vhdx",
    .create_options_help = vhdxw_options_help,
    .create = vhdxw_create,
    .pwrite = w_pwrite,
    .write_zeroes = w_write_zeroes,
    .map_for_offload = w_map_for_offload,
    .finish = w_finish,
    .abort = w_abort,
    .close = w_close,
};

const struct bd_driver bd_vhdxw_fixed = {
    .name = "vhdx",
    .create_options_help = vhdxw_options_help,
    .create = vhdxw_create,
    .pwrite = w_pwrite,
    .write_zeroes = w_write_zeroes,
    .map_for_offload = w_map_for_offload,
    .finish = w_finish,
    .abort = w_abort,
    .close = w_close,
};
