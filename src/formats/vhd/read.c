/* VHD: block status and reads.  A fixed disk is its file's first bytes
 * (holes read as zeros without being read).  A dynamic disk's block is
 * read only when the BAT allocates it, and then by its sector bitmap: a
 * set bit is data in the block, a clear one zeros (dynamic) or the
 * parent's sector (differencing).  qemu ignores the bitmap of a dynamic
 * disk and reads the whole block; the images qemu writes set every bit.
 * Every block is checked before use: inside the file before the footer,
 * clear of the metadata (metamap).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "formats/vhd/vhd_int.h"
#include "io/bfile.h"
#include "util/diag.h"

int vhd_block_host(struct vhd *v, uint32_t b, uint64_t *host)
{
    uint32_t s = v->bat[b];

    *host = 0;
    if (s == VHD_BAT_UNUSED)
        return 0;
    uint64_t off = (uint64_t)s * VHD_SECTOR;
    uint64_t start = (uint64_t)b * v->block_size;
    uint64_t need = v->bd.size - start < v->block_size ? v->bd.size - start : v->block_size;
    uint64_t len = v->bitmap_bytes + need;
    if (off > v->data_end || len > v->data_end - off)
        return diag_fail(v->bd.diag, -EINVAL, v->bd.filename,
                         (int64_t)(v->hdr.table_offset + 4 * (uint64_t)b),
                         "block %u at %llu is past the end of the data (%llu bytes): "
                         "truncated or corrupt image", b, (unsigned long long)off,
                         (unsigned long long)v->data_end);
    const struct metarange *m = metamap_find(&v->meta, off, len);
    if (m)
        return diag_fail(v->bd.diag, -EINVAL, v->bd.filename,
                         (int64_t)(v->hdr.table_offset + 4 * (uint64_t)b),
                         "block %u at %llu overlaps the %s at %llu", b,
                         (unsigned long long)off, m->what, (unsigned long long)m->off);
    *host = off;
    return 0;
}

/* Block `b`'s bitmap into buf (v->bitmap_bytes). */
static int read_bitmap(struct vhd *v, uint64_t host, uint8_t *buf)
{
    return bfile_pread(v->bd.file, buf, v->bitmap_bytes, host);
}

static bool bit(const uint8_t *bm, uint64_t i)
{
    return bm[i / 8] >> (7 - i % 8) & 1;
}

/* Sectors from `i` (< end) with the same bit as sector i. */
static uint64_t run_of(const uint8_t *bm, uint64_t i, uint64_t end)
{
    bool want = bit(bm, i);
    uint64_t j = i + 1;

    while (j < end) {
        if (j % 8 == 0 && end - j >= 8 && bm[j / 8] == (want ? 0xff : 0)) {
            j += 8;
            continue;
        }
        if (bit(bm, j) != want)
            break;
        j++;
    }
    return j - i;
}

/* A bitmap buffer: on the stack up to 4 KiB (blocks up to 16 MiB). */
struct bmbuf {
    uint8_t small[4096];
    uint8_t *p;
};

static int bm_get(struct vhd *v, struct bmbuf *b)
{
    b->p = v->bitmap_bytes <= sizeof(b->small) ? b->small : malloc(v->bitmap_bytes);
    if (!b->p)
        return diag_fail(v->bd.diag, -ENOMEM, v->bd.filename, -1, "out of memory");
    return 0;
}

static void bm_put(struct bmbuf *b)
{
    if (b->p != b->small)
        free(b->p);
}

static void fixed_status(struct vhd *v, uint64_t off, uint64_t len, struct bd_extent *e)
{
    bool hole;

    /* as qemu-img map: data at its offset; the file's holes read as zeros */
    e->len = bd_file_run(v->bd.file, off, len, &hole);
    e->flags = BD_DATA | BD_ALLOCATED | (hole ? BD_ZERO : 0);
    e->host_offset = (int64_t)off;
    e->host = &v->bd;
}

int vhd_block_status(struct bd *bd, uint64_t off, uint64_t len, struct bd_extent *e)
{
    struct vhd *v = to_vhd(bd);
    uint64_t host;
    int r;

    if (!v->dynamic) {
        fixed_status(v, off, len, e);
        return 0;
    }
    uint32_t b = (uint32_t)(off / v->block_size);
    uint64_t in = off % v->block_size;
    uint64_t n = v->block_size - in;
    if (n > len)
        n = len;
    if ((r = vhd_block_host(v, b, &host)) < 0)
        return r;
    e->len = n;
    /* not here: the parent's (differencing), or zeros decided here */
    unsigned absent = v->foot.type == VHD_TYPE_DIFF ? 0 : BD_ZERO | BD_ALLOCATED;
    if (!host) {
        /* the run of blocks the BAT leaves out, in one extent */
        while (n < len && b + 1 < v->n_bat && v->bat[b + 1] == VHD_BAT_UNUSED) {
            b++;
            n = len - n < v->block_size ? len : n + v->block_size;
        }
        e->len = n;
        e->flags = absent;
        return 0;
    }
    struct bmbuf bm;
    if ((r = bm_get(v, &bm)) < 0)
        return r;
    if ((r = read_bitmap(v, host, bm.p)) < 0) {
        bm_put(&bm);
        return r;
    }
    uint64_t s = in / VHD_SECTOR, end = (in + n + VHD_SECTOR - 1) / VHD_SECTOR;
    bool set = bit(bm.p, s);
    uint64_t run = run_of(bm.p, s, end) * VHD_SECTOR - in % VHD_SECTOR;
    bm_put(&bm);
    if (run < n)
        e->len = run;
    if (set) {
        e->flags = BD_DATA | BD_ALLOCATED;
        e->host_offset = (int64_t)(host + v->bitmap_bytes + in);
        e->host = bd;
    } else {
        e->flags = absent;
    }
    return 0;
}

/* [off, off+len) inside one block. */
static int read_block(struct vhd *v, uint8_t *p, size_t len, uint64_t off, uint8_t *bm)
{
    uint32_t b = (uint32_t)(off / v->block_size);
    uint64_t in = off % v->block_size, host;
    int r;

    if ((r = vhd_block_host(v, b, &host)) < 0)
        return r;
    if (!host)
        return bd_pread_backing(&v->bd, p, len, off);
    if ((r = read_bitmap(v, host, bm)) < 0)
        return r;
    uint64_t s = in / VHD_SECTOR, end = (in + len + VHD_SECTOR - 1) / VHD_SECTOR;
    size_t done = 0;
    while (done < len) {
        uint64_t cur = in + done;
        s = cur / VHD_SECTOR;
        uint64_t run = run_of(bm, s, end) * VHD_SECTOR - cur % VHD_SECTOR;
        size_t n = run < len - done ? (size_t)run : len - done;
        if (bit(bm, s))
            r = bfile_pread(v->bd.file, p + done, n, host + v->bitmap_bytes + cur);
        else
            r = bd_pread_backing(&v->bd, p + done, n, off + done);
        if (r < 0)
            return r;
        done += n;
    }
    return 0;
}

int vhd_pread(struct bd *bd, void *buf, size_t len, uint64_t off)
{
    struct vhd *v = to_vhd(bd);
    uint8_t *p = buf;
    struct bmbuf bm;
    int r = 0;

    if (!v->dynamic)
        return bfile_pread(bd->file, buf, len, off);
    if ((r = bm_get(v, &bm)) < 0)
        return r;
    while (len) {
        uint64_t left = v->block_size - off % v->block_size;
        size_t n = left < len ? (size_t)left : len;
        if ((r = read_block(v, p, n, off, bm.p)) < 0)
            break;
        p += n;
        off += n;
        len -= n;
    }
    bm_put(&bm);
    return r;
}
