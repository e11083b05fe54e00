/* VDI: block status and reads.  Blocks whose map entry is 0xffffffff are
 * not allocated (a differencing image's parent shows through, else
 * zeros), 0xfffffffe reads as zeros; neither is read.  Every block is
 * checked before use: inside the file, clear of the header and the map.
 */
#include <errno.h>
#include <string.h>

#include "formats/vdi/vdi_int.h"
#include "io/bfile.h"
#include "util/diag.h"

int vdi_block_host(struct vdi *v, uint32_t b, uint64_t *host)
{
    uint32_t idx = v->map[b];

    *host = 0;
    if (idx >= VDI_ZERO)
        return 0;
    uint64_t start = (uint64_t)b * v->h.block_size;
    uint64_t need = v->bd.size - start < v->h.block_size ? v->bd.size - start : v->h.block_size;
    uint64_t off = v->h.off_data + (uint64_t)idx * v->stride + v->h.block_extra;
    int64_t at = (int64_t)(v->h.off_blocks + 4 * (uint64_t)b);
    if (off > v->file_size || need > v->file_size - off)
        return diag_fail(v->bd.diag, -EINVAL, v->bd.filename, at,
                         "block %u (index %u, at %llu) is past the end of the file (%llu "
                         "bytes): truncated or corrupt image", b, idx,
                         (unsigned long long)off, (unsigned long long)v->file_size);
    const struct metarange *m = metamap_find(&v->meta, off, need);
    if (m)
        return diag_fail(v->bd.diag, -EINVAL, v->bd.filename, at,
                         "block %u (index %u, at %llu) overlaps the %s at %llu", b, idx,
                         (unsigned long long)off, m->what, (unsigned long long)m->off);
    *host = off;
    return 0;
}

int vdi_block_status(struct bd *bd, uint64_t off, uint64_t len, struct bd_extent *e)
{
    struct vdi *v = to_vdi(bd);
    uint32_t bs = v->h.block_size, b = (uint32_t)(off / bs);
    uint64_t in = off % bs, host;
    int r;

    e->len = bs - in < len ? bs - in : len;
    if ((r = vdi_block_host(v, b, &host)) < 0)
        return r;
    if (host) {
        /* as qemu-img map: the file's holes are data that reads as zeros */
        bool hole;
        e->len = bd_file_run(bd->file, host + in, e->len, &hole);
        e->flags = BD_DATA | BD_ALLOCATED | (hole ? BD_ZERO : 0);
        e->host_offset = (int64_t)(host + in);
        e->host = bd;
    } else {
        bool zero = v->map[b] == VDI_ZERO || v->h.type != VDI_TYPE_DIFF;
        e->flags = zero ? BD_ZERO | BD_ALLOCATED : 0;
        /* the run of entries that read the same way, in one extent */
        uint32_t first = v->map[b];
        while (e->len < len && b + 1 < v->h.blocks &&
               (v->map[b + 1] == first || (zero && v->h.type != VDI_TYPE_DIFF &&
                                           v->map[b + 1] >= VDI_ZERO))) {
            b++;
            e->len = len - e->len < bs ? len : e->len + bs;
        }
    }
    return 0;
}

int vdi_pread(struct bd *bd, void *buf, size_t len, uint64_t off)
{
    struct vdi *v = to_vdi(bd);
    uint32_t bs = v->h.block_size;
    uint8_t *p = buf;

    while (len) {
        uint32_t b = (uint32_t)(off / bs);
        uint64_t in = off % bs, host;
        size_t n = bs - in < len ? (size_t)(bs - in) : len;
        int r = vdi_block_host(v, b, &host);
        if (r == 0) {
            if (host)
                r = bfile_pread(bd->file, p, n, host + in);
            else if (v->map[b] == VDI_ZERO)
                memset(p, 0, n);
            else
                r = bd_pread_backing(bd, p, n, off);
        }
        if (r < 0)
            return r;
        p += n;
        off += n;
        len -= n;
    }
    return 0;
}
