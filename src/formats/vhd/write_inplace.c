/* VHD in place: `convert -n -O vpc` into an existing VHD image (fixed,
 * dynamic or differencing).  The image keeps its footer (type, size,
 * geometry, unique id), header and block size; the source's bytes are
 * written over it:
 *
 * fixed: data where it is, zero runs punched out (or written as zeros).
 *
 * dynamic and differencing, block by block:
 *   - data over an allocated block: written where the block is, its zero
 *     4 KiB pieces punched out; the sectors' bits are set in its bitmap
 *     where they were clear;
 *   - data over an unallocated block: a new block where the footer is
 *     (or after the last block, when that one is cut short), the footer
 *     moved after it first (so the file always ends in a footer), its bitmap written with it (every bit set; a differencing
 *     disk: the bits of the sectors the source covers), only its non-zero
 *     pieces written;
 *   - zeros: nothing over unallocated blocks unless a differencing disk's
 *     parent would show other bytes there (then a new block of holes with
 *     the bits set); punched out of allocated blocks (a differencing disk
 *     gets the bits set too);
 *   - the image's bytes after the source's end are kept (the rest of the
 *     sector the source ends inside is read first and written back).
 *
 * Order: the data, synced; then the bitmaps of blocks that were there,
 * then the BAT naming the new blocks, synced.  A failure or kill before
 * that leaves the old BAT: blocks overwritten in place hold new bytes,
 * new blocks are unnamed (after a failure they are cut off again and the
 * footer put back where it was).
 *
 * A damaged image (what `check` reports as corruptions: footers damaged
 * or disagreeing, blocks outside the file, over the metadata or over each
 * other) is refused before anything is written.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "formats/vhd/vhd.h"
#include "formats/vhd/vhd_int.h"
#include "formats/writer_util.h"
#include "io/bfile.h"
#include "util/diag.h"
#include "util/endian.h"

/* a fixed disk's "blocks" for wstate_write_blocks */
#define FIXED_BLOCK (UINT32_C(1) << 30)

/* An allocated block whose bitmap needs bits set (sectors [s0, s1)). */
struct pending_bm {
    uint32_t b, s0, s1;
};

struct vhdip {
    struct wip b;               /* first: the converter's bd, the reader */
    struct vhd *v;
    bool diff;                  /* clear bits show the parent */
    bool target_is_zero;
    uint64_t old_end;           /* where the footer was */
    uint64_t end;               /* where it is now (new blocks before it) */
    bool grown;                 /* new blocks were appended */
    bool meta_started;          /* bitmaps or the BAT are being written */
    uint8_t foot[VHD_FOOTER_SIZE];  /* the footer as read */
    uint8_t *bm;                /* one bitmap */
    struct pending_bm *pend;
    size_t npend, pend_cap;
    uint8_t tail[VHD_SECTOR];   /* the image's bytes after the source's end
                                   in the sector it ends inside */
    uint32_t tail_len;
};

static struct vhdip *to_ip(struct bd *bd)
{
    return (struct vhdip *)bd;
}

#define FAIL(w, err, off, ...) diag_fail((w)->b.bd.diag, err, (w)->b.bd.filename, off, __VA_ARGS__)

static void bits_set(uint8_t *bm, uint32_t s0, uint32_t s1)
{
    for (uint32_t s = s0; s < s1; s++)
        bm[s / 8] |= (uint8_t)(0x80 >> (s % 8));
}

static bool bits_all(const uint8_t *bm, uint32_t s0, uint32_t s1)
{
    for (uint32_t s = s0; s < s1; s++)
        if (!(bm[s / 8] & (0x80 >> (s % 8))))
            return false;
    return true;
}

/* The image's bytes after the source's end, in the sector it ends in. */
static int put_tail(struct vhdip *w, uint64_t b, uint64_t data)
{
    uint32_t bs = w->v->block_size;

    if (!w->tail_len || b != (w->b.bd.size - 1) / bs)
        return 0;
    return bfile_pwrite(w->b.f, w->tail, w->tail_len, data + w->b.bd.size % bs);
}

/* Bits [s0, s1) of allocated block b, set after its data (at finish). */
static int need_bits(struct vhdip *w, uint32_t b, uint64_t host, uint32_t s0, uint32_t s1)
{
    int r = bfile_pread(w->b.f, w->bm, w->v->bitmap_bytes, host);

    if (r < 0 || bits_all(w->bm, s0, s1))
        return r;
    if (w->npend == w->pend_cap) {
        size_t cap = w->pend_cap ? 2 * w->pend_cap : 64;
        struct pending_bm *n = realloc(w->pend, cap * sizeof(*n));
        if (!n)
            return FAIL(w, -ENOMEM, -1, "out of memory");
        w->pend = n;
        w->pend_cap = cap;
    }
    w->pend[w->npend++] = (struct pending_bm){ b, s0, s1 };
    return 0;
}

/* A new block for b where the footer is: the footer after it first, then
 * its bitmap (bits [s0, s1) on a differencing disk, else all). */
static int new_block(struct vhdip *w, uint32_t b, uint32_t s0, uint32_t s1, uint64_t *host)
{
    struct vhd *v = w->v;
    uint64_t at = (w->end + VHD_SECTOR - 1) / VHD_SECTOR * VHD_SECTOR;
    uint64_t next = at + v->bitmap_bytes + v->block_size;
    int r;

    if (at / VHD_SECTOR >= VHD_BAT_UNUSED)
        return FAIL(w, -EFBIG, (int64_t)at, "the image outgrows 32-bit sector numbers");
    if (w->diff) {
        memset(w->bm, 0, v->bitmap_bytes);
        bits_set(w->bm, s0, s1);
    } else {
        memset(w->bm, 0xff, v->bitmap_bytes);
    }
    w->grown = true;            /* from here abort puts the footer back */
    if ((r = bfile_pwrite(w->b.f, w->foot, VHD_FOOTER_SIZE, next)) < 0 ||
        (r = bfile_pwrite(w->b.f, w->bm, v->bitmap_bytes, at)) < 0)
        return r;
    w->end = next;
    v->bat[b] = (uint32_t)(at / VHD_SECTOR);
    *host = at;
    return 0;
}

static int place(void *wp, uint64_t b64, uint32_t from, uint32_t to, uint64_t *data)
{
    struct vhdip *w = wp;
    struct vhd *v = w->v;
    uint32_t b = (uint32_t)b64, s0 = from / VHD_SECTOR;
    uint32_t s1 = (to + VHD_SECTOR - 1) / VHD_SECTOR;
    uint64_t host;
    int r;

    if (!v->dynamic) {
        *data = b64 * FIXED_BLOCK;
        return 0;
    }
    bool fresh = v->bat[b] == VHD_BAT_UNUSED;
    if (fresh) {
        r = new_block(w, b, s0, s1, &host);
    } else {
        host = (uint64_t)v->bat[b] * VHD_SECTOR;
        r = need_bits(w, b, host, s0, s1);
    }
    *data = host + v->bitmap_bytes;
    if (r == 0)
        r = put_tail(w, b, *data);
    return r < 0 ? r : fresh;
}

static int ip_pwrite(struct bd *bd, const void *buf, size_t len, uint64_t off,
                     ioq_done_fn done, void *opaque)
{
    struct vhdip *w = to_ip(bd);

    return wip_pwrite(&w->b, w->v->dynamic ? w->v->block_size : FIXED_BLOCK, place, buf, len, off, done, opaque);
}

/* Whether the parent reads as zeros over [off, off+len). */
static int parent_zero(struct vhdip *w, uint64_t off, uint64_t len, bool *zero)
{
    struct bd *p = w->b.img->backing;

    *zero = false;
    if (!p)
        return 0;       /* not opened (no_external_files): assume it is not */
    while (len) {
        struct bd_extent e;
        if (off >= p->size) {
            *zero = true;
            return 0;
        }
        int r = bd_block_status(p, off, len < p->size - off ? len : p->size - off, &e);
        if (r < 0)
            return r;
        if (!(e.flags & BD_ZERO))
            return 0;
        off += e.len;
        len -= e.len < len ? e.len : len;
    }
    *zero = true;
    return 0;
}

static int zero_block(struct vhdip *w, uint32_t b, uint64_t in, uint64_t n)
{
    struct vhd *v = w->v;
    uint32_t s0 = (uint32_t)(in / VHD_SECTOR);
    uint32_t s1 = (uint32_t)((in + n + VHD_SECTOR - 1) / VHD_SECTOR);
    uint64_t host;
    bool zero;
    int r;

    if (v->bat[b] != VHD_BAT_UNUSED) {
        host = (uint64_t)v->bat[b] * VHD_SECTOR;
        if ((r = wfile_zero(w->b.f, host + v->bitmap_bytes + in, n)) < 0)
            return r;
        /* clear bits read as zeros on a dynamic disk: they may stay */
        return w->diff ? need_bits(w, b, host, s0, s1) : 0;
    }
    if (!w->diff)
        return 0;
    if ((r = parent_zero(w, (uint64_t)b * v->block_size + in, n, &zero)) < 0 || zero)
        return r;
    if ((r = new_block(w, b, s0, s1, &host)) < 0)
        return r;
    return put_tail(w, b, host + v->bitmap_bytes);
}

static int ip_write_zeroes(struct bd *bd, uint64_t off, uint64_t len)
{
    struct vhdip *w = to_ip(bd);
    uint32_t bs = w->v->block_size;
    int r = wstate_check(&w->b.ws, bd->size, off, len, "write_zeroes");

    if (r < 0 || w->target_is_zero)
        return r;
    if (!w->v->dynamic)
        return wstate_err(&w->b.ws, wfile_zero(w->b.f, off, len));
    for (uint64_t o = off; o < off + len;) {
        uint64_t in = o % bs, n = bs - in < off + len - o ? bs - in : off + len - o;
        if ((r = wstate_err(&w->b.ws, zero_block(w, (uint32_t)(o / bs), in, n))) < 0)
            return r;
        o += n;
    }
    return 0;
}

/* The bitmaps of blocks that were there, then the BAT. */
static int write_metadata(struct vhdip *w)
{
    struct vhd *v = w->v;
    int r;

    w->meta_started = true;
    for (size_t i = 0; i < w->npend; i++) {
        uint64_t host = (uint64_t)v->bat[w->pend[i].b] * VHD_SECTOR;
        if ((r = bfile_pread(w->b.f, w->bm, v->bitmap_bytes, host)) < 0)
            return r;
        bits_set(w->bm, w->pend[i].s0, w->pend[i].s1);
        if ((r = bfile_pwrite(w->b.f, w->bm, v->bitmap_bytes, host)) < 0)
            return r;
    }
    if (!w->grown)
        return 0;
    uint8_t *raw = malloc(v->bat_bytes ? v->bat_bytes : 1);
    if (!raw)
        return FAIL(w, -ENOMEM, -1, "out of memory");
    memset(raw, 0xff, v->bat_bytes);
    for (uint32_t i = 0; i < v->n_bat; i++)
        be32_put(raw + 4 * (size_t)i, v->bat[i]);
    r = bfile_pwrite(w->b.f, raw, v->bat_bytes, v->hdr.table_offset);
    free(raw);
    return r;
}

static int ip_finish(struct bd *bd)
{
    struct vhdip *w = to_ip(bd);
    int r;

    if ((r = wstate_finish_begin(&w->b.ws)) < 0)
        return r;
    if (w->b.ws.durable && (r = wstate_err(&w->b.ws, bfile_sync(w->b.f))) < 0)
        return r;
    if (!w->npend && !w->grown)
        return 0;
    if ((r = wstate_err(&w->b.ws, write_metadata(w))) < 0)
        return r;
    if (w->b.ws.durable && (r = wstate_err(&w->b.ws, bfile_sync(w->b.f))) < 0)
        return r;
    bfile_refresh_size(w->b.f);
    return 0;
}

/* The old BAT stays; new blocks are cut off again, the footer first put
 * back where it was (unless the metadata was being written). */
static void ip_abort(struct bd *bd)
{
    struct vhdip *w = to_ip(bd);

    wstate_abort(&w->b.ws);
    if (w->grown && !w->meta_started &&
        bfile_pwrite(w->b.f, w->foot, VHD_FOOTER_SIZE, w->old_end) == 0)
        (void)!ftruncate(w->b.f->fd, (off_t)(w->old_end + VHD_FOOTER_SIZE));
    bfile_refresh_size(w->b.f);
}

static void ip_close(struct bd *bd)
{
    struct vhdip *w = to_ip(bd);

    free(w->bm);
    free(w->pend);
    wip_free(&w->b);
}

const struct bd_driver bd_vhd_inplace = {
    .name = "vpc",
    .pwrite = ip_pwrite,
    .write_zeroes = ip_write_zeroes,
    .finish = ip_finish,
    .abort = ip_abort,
    .close = ip_close,
};

int vhdip_open(struct bd **out, struct bfile *f, const struct bd_create_opts *o,
               struct diag *d)
{
    struct vhdip *w;
    struct wip *base;
    int r = wip_open(&base, sizeof(*w), &bd_vhd_inplace, "vpc", f, o, d);

    *out = NULL;
    if (r < 0)
        return r;
    w = (struct vhdip *)base;
    w->v = to_vhd(w->b.img);
    w->diff = w->v->foot.type == VHD_TYPE_DIFF;
    w->target_is_zero = o->target_is_zero;
    w->old_end = w->end = w->v->data_end;
    /* new blocks go after every block's whole span (a last block the disk
     * ends inside may be cut short before the footer) */
    for (uint32_t i = 0; w->v->dynamic && i < w->v->n_bat; i++) {
        uint64_t e = (uint64_t)w->v->bat[i] * VHD_SECTOR + w->v->bitmap_bytes +
                     w->v->block_size;
        if (w->v->bat[i] != VHD_BAT_UNUSED && e > w->end)
            w->end = e;
    }
    w->b.bd.granule = w->v->dynamic ? w->v->block_size : VHD_SECTOR;
    if ((r = bfile_pread(w->b.f, w->foot, VHD_FOOTER_SIZE, w->old_end)) < 0)
        goto fail;
    if (w->v->dynamic && !(w->bm = malloc(w->v->bitmap_bytes))) {
        r = diag_fail(d, -ENOMEM, f->path, -1, "out of memory");
        goto fail;
    }
    /* the source ends inside a sector the image goes on after (a fixed
     * disk keeps the rest of the sector where it is) */
    if (w->v->dynamic && o->size % VHD_SECTOR && w->b.img->size > o->size) {
        uint64_t end = o->size - o->size % VHD_SECTOR + VHD_SECTOR;
        w->tail_len = (uint32_t)((end < w->b.img->size ? end : w->b.img->size) - o->size);
        if ((r = bd_pread(w->b.img, w->tail, w->tail_len, o->size)) < 0)
            goto fail;
    }
    *out = &w->b.bd;
    return 0;
fail:
    w->b.bd.file = NULL;        /* the caller still owns the file */
    ip_close(&w->b.bd);
    return r;
}
