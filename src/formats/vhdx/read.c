/* VHDX: block status and reads.  A payload block's BAT state decides:
 *
 *   fully present        the block in the file (file holes read as zeros)
 *   partially present    per logical sector, by the chunk's sector bitmap:
 *                        set = in the block, clear = the parent's
 *   zero, unmapped       zeros
 *   not present,         zeros, or in a differencing disk the parent's
 *   undefined
 *
 * Blocks that are not in the file are never read, and runs of them are one
 * extent, so a sparse disk is walked in time proportional to its BAT.
 * Every read of the file goes through the replayed log (vhdx_vread); a
 * range the log rewrote is reported without a host offset (its bytes are
 * in the log, not at their place in the file).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "formats/vhdx/vhdx_int.h"
#include "io/bfile.h"
#include "util/diag.h"

enum kind { K_ZERO, K_PARENT, K_DATA };

/* What a state means for reading (partially present: see the bitmap). */
static enum kind kind_of(const struct vhdx *v, unsigned state)
{
    switch (state) {
    case VHDX_PAYLOAD_FULLY_PRESENT:
        return K_DATA;
    case VHDX_PAYLOAD_ZERO:
    case VHDX_PAYLOAD_UNMAPPED:
        return K_ZERO;
    default:        /* not present, undefined */
        return v->diff ? K_PARENT : K_ZERO;
    }
}

static bool bit(const uint8_t *bm, uint64_t i)
{
    return bm[i / 8] >> (i % 8) & 1;
}

/* Sectors [s, end) of partially present block b: the run that starts at
 * s with the same bit, in sectors, and that bit. */
static int bitmap_run(struct vhdx *v, uint64_t b, uint64_t s, uint64_t end, bool *set,
                      uint64_t *run)
{
    uint32_t ls = v->p.logical_sector;
    uint64_t c = b / v->chunk_ratio, host;
    int r;

    if ((r = vhdx_bitmap_entry(v, c, &host)) < 0)
        return r;
    if (!host)
        return diag_fail(v->bd.diag, -EINVAL, v->bd.filename,
                         vhdx_bat_entry_off(v, vhdx_bat_bitmap_index(c, v->chunk_ratio)),
                         "block %llu is partially present, but its chunk has no sector "
                         "bitmap", (unsigned long long)b);
    uint64_t base = (b % v->chunk_ratio) * (v->p.block_size / ls);
    uint64_t first = (base + s) / 8, last = (base + end + 7) / 8;
    uint8_t small[4096], *bm = small;
    if (last - first > sizeof(small) && !(bm = malloc((size_t)(last - first))))
        return diag_fail(v->bd.diag, -ENOMEM, v->bd.filename, -1, "out of memory");
    r = vhdx_vread(v, bm, (size_t)(last - first), host + first, "a sector bitmap");
    if (r == 0) {
        uint64_t i = base + s - first * 8, stop = base + end - first * 8, j = i + 1;
        *set = bit(bm, i);
        while (j < stop) {
            if (j % 8 == 0 && stop - j >= 8 && bm[j / 8] == (*set ? 0xff : 0)) {
                j += 8;
                continue;
            }
            if (bit(bm, j) != *set)
                break;
            j++;
        }
        *run = j - i;
    }
    if (bm != small)
        free(bm);
    return r;
}

/* The piece of [off, off+len) that starts at off and reads one way: *n
 * bytes, *kind, and for data the host offset. */
static int piece(struct vhdx *v, uint64_t off, uint64_t len, enum kind *kind,
                 uint64_t *host, uint64_t *n)
{
    uint32_t bs = v->p.block_size;
    uint64_t b = off / bs, in = off % bs;
    unsigned state;
    int r;

    *n = bs - in < len ? bs - in : len;
    if ((r = vhdx_block_entry(v, b, &state, host)) < 0)
        return r;
    if (state == VHDX_PAYLOAD_PARTIALLY_PRESENT) {
        uint32_t ls = v->p.logical_sector;
        uint64_t s = in / ls, end = (in + *n + ls - 1) / ls, run;
        bool set;
        if ((r = bitmap_run(v, b, s, end, &set, &run)) < 0)
            return r;
        uint64_t bytes = (s + run) * ls - in;
        if (bytes < *n)
            *n = bytes;
        *kind = set ? K_DATA : K_PARENT;
        *host += in;
        return 0;
    }
    *kind = kind_of(v, state);
    if (*kind == K_DATA) {
        *host += in;
        return 0;
    }
    /* the run of blocks that read the same way, in one piece */
    while (*n < len && b + 1 < v->n_blocks) {
        if (!vhdx_block_peek(v, b + 1, &state) ||
            state == VHDX_PAYLOAD_PARTIALLY_PRESENT || kind_of(v, state) != *kind)
            break;
        b++;
        *n = len - *n < bs ? len : *n + bs;
    }
    return 0;
}

int vhdx_block_status(struct bd *bd, uint64_t off, uint64_t len, struct bd_extent *e)
{
    struct vhdx *v = to_vhdx(bd);
    enum kind kind;
    uint64_t host, n;
    int r;

    if ((r = piece(v, off, len, &kind, &host, &n)) < 0)
        return r;
    e->len = n;
    if (kind == K_ZERO) {
        e->flags = BD_ZERO | BD_ALLOCATED;
        return 0;
    }
    if (kind == K_PARENT) {
        e->flags = 0;
        return 0;
    }
    e->flags = BD_DATA | BD_ALLOCATED;
    /* bytes the log rewrote are not at their place in the file */
    const struct vhdx_ov_seg *s = v->log.written ? NULL : vhdx_ov_find(&v->ov, host, n);
    if (s && s->off <= host) {
        uint64_t k = s->off + s->len - host;
        e->len = k < n ? k : n;
        if (!s->data)
            e->flags |= BD_ZERO;
        return 0;
    }
    if (s)
        e->len = n = s->off - host;
    /* past the file's end only the log's writes (handled above) are there */
    if (host >= v->file_size)
        return diag_fail(bd->diag, -EINVAL, bd->filename, (int64_t)host, "block data at "
                         "%llu is past the end of the file (%llu bytes): truncated image",
                         (unsigned long long)host, (unsigned long long)v->file_size);
    e->host_offset = (int64_t)host;
    e->host = bd;
    if (n > v->file_size - host)
        e->len = n = v->file_size - host;
    bool hole;
    e->len = bd_file_run(bd->file, host, n, &hole);
    if (hole)
        e->flags |= BD_ZERO;
    return 0;
}

int vhdx_pread(struct bd *bd, void *buf, size_t len, uint64_t off)
{
    struct vhdx *v = to_vhdx(bd);
    uint8_t *p = buf;
    int r;

    while (len) {
        enum kind kind;
        uint64_t host, n;
        if ((r = piece(v, off, len, &kind, &host, &n)) < 0)
            return r;
        if (kind == K_ZERO)
            memset(p, 0, (size_t)n);
        else if (kind == K_PARENT)
            r = bd_pread_backing(bd, p, (size_t)n, off);
        else
            r = vhdx_vread(v, p, (size_t)n, host, "a block");
        if (r < 0)
            return r;
        p += n;
        off += n;
        len -= (size_t)n;
    }
    return 0;
}
