/* VDI in place: `convert -n -O vdi` into an existing VDI image (dynamic,
 * static or differencing).  The image keeps its header, block size and
 * size; the source's bytes are written block by block:
 *
 *   - data over an allocated block: written where the block is, its zero
 *     4 KiB pieces punched out (or written as zeros);
 *   - data over an unallocated or zero block: a new block at the lowest
 *     index no entry uses (the count of allocated blocks, where qemu and
 *     VirtualBox allocate, when the indexes in use are 0..count-1, as
 *     they write them), past the end of the file; only its non-zero
 *     pieces are written;
 *   - zeros: nothing over unallocated or zero blocks (a differencing
 *     image's parent would show through: there the block's entry becomes
 *     the zero entry), punched out of allocated ones (the block stays
 *     allocated: giving up an index in the middle would let the next
 *     writer allocate over a block in use);
 *   - the image's bytes past the source's end are kept (a new block that
 *     the source ends inside gets them, read before anything is written).
 *
 * Order: the data, synced; then the header (its allocated count), then
 * the block map, synced (one write when the map follows the header, as
 * in every image qemu and VirtualBox make).  A failure or kill before that
 * leaves the old map: the blocks overwritten in place hold new bytes, the
 * new blocks past the end are unnamed.  The header goes before the map,
 * as qemu writes it: stopped between the two, the count is ahead of the
 * map (qemu-img check reports a mismatch), never behind it (a later
 * writer would allocate over a named block).
 *
 * A damaged image (what `check` reports as corruptions: indexes past the
 * blocks or used twice, a wrong allocated count, blocks past the end of
 * the file or over the metadata) is refused before anything is written.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "formats/vdi/vdi.h"
#include "formats/vdi/vdi_int.h"
#include "formats/writer_util.h"
#include "io/bfile.h"
#include "util/diag.h"
#include "util/endian.h"
#include "zerodetect/zerodetect.h"

struct vdiip {
    struct wip b;               /* first: the converter's bd, the reader */
    struct vdi *v;
    uint64_t old_size;          /* the file's size at the start */
    uint32_t next;              /* the allocated count */
    uint8_t *taken;             /* a bit per index: in use */
    uint32_t free_from;         /* no free index below this */
    bool map_dirty;
    bool meta_started;          /* the header or map is being written */
    bool target_is_zero;
    bool diff;                  /* unallocated blocks show the parent */
    uint8_t *tail;              /* the image's bytes after the source's end
                                   in the block it ends in, or NULL */
    uint32_t tail_in, tail_len; /* where they start in that block, how many */
};

static struct vdiip *to_ip(struct bd *bd)
{
    return (struct vdiip *)bd;
}

static uint64_t block_host(const struct vdiip *w, uint32_t idx)
{
    return w->v->h.off_data + (uint64_t)idx * w->v->stride + w->v->h.block_extra;
}

/* A new block for guest block b (its bytes read as zeros until written):
 * 1, or the block must be cleared where it is not written: 0. */
static int new_block(struct vdiip *w, uint64_t b, uint64_t *host)
{
    struct vdi *v = w->v;

    /* the check at the start: every index is below h.blocks and used
     * once, so an entry that is not allocated leaves one free */
    uint32_t idx = w->free_from;
    while (idx < v->h.blocks && (w->taken[idx / 8] & (1u << (idx % 8))))
        idx++;
    if (idx >= v->h.blocks)
        return diag_fail(w->b.bd.diag, -EINVAL, w->b.bd.filename, -1,
                         "internal error: no free block index");
    w->taken[idx / 8] |= (uint8_t)(1u << (idx % 8));
    w->free_from = idx + 1;
    w->next++;
    v->map[b] = idx;
    w->map_dirty = true;
    *host = block_host(w, v->map[b]);
    /* the image ends inside this block: keep its bytes after the source */
    int r = 0;
    if (w->tail && b == (w->b.bd.size - 1) / v->h.block_size &&
        !buffer_is_zero(w->tail, w->tail_len))
        r = wstate_err(&w->b.ws, bfile_pwrite(w->b.f, w->tail, w->tail_len, *host + w->tail_in));
    if (r < 0)
        return r;
    /* space past the old end of the file is a hole; anything before it
     * (left there by another writer) may hold bytes */
    return *host - v->h.block_extra >= w->old_size ? 1 : 0;
}

static int place(void *wp, uint64_t b, uint32_t from, uint32_t to, uint64_t *host)
{
    struct vdiip *w = wp;
    uint32_t e = w->v->map[b];

    (void)from;
    (void)to;
    if (e < VDI_ZERO) {
        *host = block_host(w, e);
        return 0;
    }
    return new_block(w, b, host);
}

static int ip_pwrite(struct bd *bd, const void *buf, size_t len, uint64_t off,
                     ioq_done_fn done, void *opaque)
{
    struct vdiip *w = to_ip(bd);

    return wip_pwrite(&w->b, w->v->h.block_size, place, buf, len, off, done, opaque);
}

static int ip_write_zeroes(struct bd *bd, uint64_t off, uint64_t len)
{
    struct vdiip *w = to_ip(bd);
    uint32_t bs = w->v->h.block_size;
    int r = wstate_check(&w->b.ws, bd->size, off, len, "write_zeroes");

    if (r < 0 || w->target_is_zero)
        return r;
    for (uint64_t o = off; o < off + len;) {
        uint64_t b = o / bs, in = o % bs;
        uint64_t n = bs - in < off + len - o ? bs - in : off + len - o;
        uint32_t e = w->v->map[b];
        uint64_t host;
        if (e < VDI_ZERO) {
            r = wfile_zero(w->b.f, block_host(w, e) + in, n);
        } else if (e == VDI_UNALLOCATED && w->diff) {
            /* the parent shows through: a zero entry for the whole block,
             * a new block (holes) when the image goes on after the source */
            if (w->tail && b == (bd->size - 1) / bs) {
                r = new_block(w, b, &host);
                if (r == 0)
                    r = wfile_zero(w->b.f, host + in, n);
            } else {
                w->v->map[b] = VDI_ZERO;
                w->map_dirty = true;
            }
        }
        if ((r = wstate_err(&w->b.ws, r < 0 ? r : 0)) < 0)
            return r;
        o += n;
    }
    return 0;
}

static int write_metadata(struct vdiip *w)
{
    struct vdi *v = w->v;
    struct bfile *f = w->b.f;
    uint64_t map_bytes = (uint64_t)v->h.blocks * 4;
    /* the header's own bytes only: a version 0 map starts inside the
     * first sector, and its data right after the map */
    size_t hdr_len = VDI_PREHEADER + v->h.header_size;
    if (hdr_len > VDI_HEADER_AREA)
        hdr_len = VDI_HEADER_AREA;
    bool joined = v->h.off_blocks == VDI_HEADER_AREA;
    uint64_t head = joined ? VDI_HEADER_AREA : 0;
    uint8_t *raw = malloc(head + map_bytes + 1);
    int r;

    if (!raw)
        return diag_fail(w->b.bd.diag, -ENOMEM, w->b.bd.filename, -1, "out of memory");
    v->h.blocks_allocated = w->next;
    le32_put(v->raw + (v->h.v0 ? 368 : 388), w->next);
    memcpy(raw, v->raw, head);
    for (uint32_t i = 0; i < v->h.blocks; i++)
        le32_put(raw + head + 4 * (size_t)i, v->map[i]);
    w->meta_started = true;
    if (joined)
        r = bfile_pwrite(f, raw, head + map_bytes, 0);
    else if ((r = bfile_pwrite(f, v->raw, hdr_len, 0)) == 0)
        r = bfile_pwrite(f, raw, map_bytes, v->h.off_blocks);
    free(raw);
    return r;
}

static int ip_finish(struct bd *bd)
{
    struct vdiip *w = to_ip(bd);
    struct vdi *v = w->v;
    int r;

    if ((r = wstate_finish_begin(&w->b.ws)) < 0)
        return r;
    /* the last block whole, as qemu writes it */
    uint64_t end = v->h.off_data + (uint64_t)w->free_from * v->stride;
    if (end > w->old_size && ftruncate(w->b.f->fd, (off_t)end) < 0)
        return wstate_err(&w->b.ws, diag_errno(bd->diag, -errno, bd->filename, -1,
                                             "cannot set the size"));
    if (w->b.ws.durable && (r = wstate_err(&w->b.ws, bfile_sync(w->b.f))) < 0)
        return r;
    if (w->map_dirty && (r = wstate_err(&w->b.ws, write_metadata(w))) < 0)
        return r;
    if (w->map_dirty && w->b.ws.durable && (r = wstate_err(&w->b.ws, bfile_sync(w->b.f))) < 0)
        return r;
    bfile_refresh_size(w->b.f);
    return 0;
}

/* The old map and header stay; new blocks past the old end are cut off
 * (nothing names them) unless the metadata was being written. */
static void ip_abort(struct bd *bd)
{
    struct vdiip *w = to_ip(bd);

    wstate_abort(&w->b.ws);
    if (!w->meta_started)
        (void)!ftruncate(w->b.f->fd, (off_t)w->old_size);
    bfile_refresh_size(w->b.f);
}

static void ip_close(struct bd *bd)
{
    struct vdiip *w = to_ip(bd);

    free(w->tail);
    free(w->taken);
    wip_free(&w->b);
}

const struct bd_driver bd_vdi_inplace = {
    .name = "vdi",
    .pwrite = ip_pwrite,
    .write_zeroes = ip_write_zeroes,
    .finish = ip_finish,
    .abort = ip_abort,
    .close = ip_close,
};

int vdiip_open(struct bd **out, struct bfile *f, const struct bd_create_opts *o,
               struct diag *d)
{
    struct vdiip *w;
    struct wip *base;
    int r = wip_open(&base, sizeof(*w), &bd_vdi_inplace, "vdi", f, o, d);

    *out = NULL;
    if (r < 0)
        return r;
    w = (struct vdiip *)base;
    w->v = to_vdi(w->b.img);
    w->b.bd.granule = w->v->h.block_size;
    w->old_size = w->b.f->size;
    w->next = w->v->h.blocks_allocated;
    if (!(w->taken = calloc((size_t)w->v->h.blocks / 8 + 1, 1))) {
        r = diag_fail(d, -ENOMEM, f->path, -1, "out of memory");
        goto fail;
    }
    for (uint32_t i = 0; i < w->v->h.blocks; i++)
        if (w->v->map[i] < VDI_ZERO)
            w->taken[w->v->map[i] / 8] |= (uint8_t)(1u << (w->v->map[i] % 8));
    w->target_is_zero = o->target_is_zero;
    w->diff = w->v->h.type == VDI_TYPE_DIFF;
    /* the source ends inside a block the image goes on after */
    uint32_t bs = w->v->h.block_size;
    if (o->size % bs && w->b.img->size > o->size) {
        uint64_t end = o->size - o->size % bs + bs;
        if (end > w->b.img->size)
            end = w->b.img->size;
        w->tail_in = (uint32_t)(o->size % bs);
        w->tail_len = (uint32_t)(end - o->size);
        if (!(w->tail = malloc(w->tail_len))) {
            r = diag_fail(d, -ENOMEM, f->path, -1, "out of memory");
            goto fail;
        }
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
