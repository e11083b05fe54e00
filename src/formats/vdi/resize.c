/* VDI resize, in place.  Growing: when the block map has no room for the
 * new entries before the data, the first blocks of the data area are
 * copied to the end of the file (synced) and the data area starts after
 * them, so the map grows into their place; then the map and the header
 * are written (synced; between the two writes a crash leaves the image
 * inconsistent, as with VirtualBox's own resize).  A static image gets
 * its new blocks allocated (holes).  Shrinking (--shrink) frees the
 * entries past the end; their blocks stay in the file.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "formats/vdi/vdi_int.h"
#include "io/bfile.h"
#include "util/diag.h"
#include "util/endian.h"

static int copy_block(struct vdi *v, uint64_t from, uint64_t to, uint8_t *buf)
{
    int r = bfile_pread(v->bd.file, buf, v->stride, from);
    return r < 0 ? r : bfile_pwrite(v->bd.file, buf, v->stride, to);
}

int vdi_resize(struct bd *bd, uint64_t new_size, bool shrink)
{
    struct vdi *v = to_vdi(bd);
    struct vdi_header h = v->h;
    struct bfile *f = bd->file;
    uint32_t bs = h.block_size;
    int r;

    if (v->h.v0)
        return diag_fail(bd->diag, -ENOTSUP, bd->filename, -1,
                         "resizing a version 0 VDI is not supported (convert it first)");
    new_size = (new_size + VDI_SECTOR - 1) / VDI_SECTOR * VDI_SECTOR;
    if (new_size < bd->size && !shrink)
        return diag_fail(bd->diag, -EINVAL, bd->filename, -1,
                         "shrinking would lose data; use --shrink to allow it");
    uint64_t nb = new_size / bs + (new_size % bs != 0);
    if (nb > VDI_MAX_BLOCKS)
        return diag_fail(bd->diag, -EFBIG, bd->filename, -1, "a vdi image of %llu bytes is "
                         "too large", (unsigned long long)new_size);
    uint32_t n = nb > h.blocks ? (uint32_t)nb : h.blocks;
    if ((r = bd_table_budget(bd, (uint64_t)n * 4, bd->filename, "the new block map")) < 0)
        return r;
    uint32_t *map = malloc((size_t)n * 4 + 4);
    uint8_t *buf = NULL;
    if (!map)
        return diag_fail(bd->diag, -ENOMEM, bd->filename, -1, "out of memory");
    /* highest index in use, and the entries kept */
    uint64_t used = 0;
    for (uint32_t i = 0; i < n; i++) {
        map[i] = i < h.blocks && (uint64_t)i * bs < new_size ? v->map[i] : VDI_UNALLOCATED;
        if (i < h.blocks && v->map[i] < VDI_ZERO && (uint64_t)v->map[i] + 1 > used)
            used = (uint64_t)v->map[i] + 1;
    }
    /* room for the map: move the first k blocks of the data area to the end */
    uint64_t need = h.off_blocks + (uint64_t)n * 4;
    uint64_t k = need > h.off_data ? (need - h.off_data + v->stride - 1) / v->stride : 0;
    if (k && (uint64_t)h.off_data + k * v->stride > UINT32_MAX) {
        r = diag_fail(bd->diag, -EFBIG, bd->filename, -1, "the block map would outgrow "
                      "32-bit offsets");
        goto out;
    }
    if (k) {
        if (!(buf = malloc(v->stride))) {
            r = diag_fail(bd->diag, -ENOMEM, bd->filename, -1, "out of memory");
            goto out;
        }
        uint64_t top = used > k ? used : k;     /* new indices start after every block */
        for (uint32_t i = 0; i < n; i++) {
            if (map[i] >= VDI_ZERO)
                continue;
            if (map[i] < k) {
                uint64_t to = top++;
                if ((r = copy_block(v, h.off_data + (uint64_t)map[i] * v->stride,
                                    h.off_data + to * v->stride, buf)) < 0)
                    goto out;
                map[i] = (uint32_t)(to - k);
            } else {
                map[i] -= (uint32_t)k;
            }
        }
        used = top - k;
        h.off_data += (uint32_t)(k * v->stride);
        if ((r = bfile_sync(f)) < 0)
            goto out;
    }
    if (h.type == VDI_TYPE_STATIC) {
        for (uint32_t i = 0; i < n; i++)
            if ((uint64_t)i * bs < new_size && map[i] == VDI_UNALLOCATED)
                map[i] = (uint32_t)used++;
        if (ftruncate(f->fd, (off_t)(h.off_data + used * v->stride)) < 0) {
            r = diag_errno(bd->diag, -errno, bd->filename, -1, "cannot extend the file");
            goto out;
        }
    }
    h.blocks = n;
    h.disk_size = new_size;
    h.blocks_allocated = 0;
    for (uint32_t i = 0; i < n; i++)
        h.blocks_allocated += map[i] < VDI_ZERO;
    uint64_t map_bytes = ((uint64_t)n * 4 + VDI_SECTOR - 1) / VDI_SECTOR * VDI_SECTOR;
    if (h.off_blocks + map_bytes > h.off_data)
        map_bytes = h.off_data - h.off_blocks;
    uint8_t *raw = calloc(1, map_bytes);
    if (!raw) {
        r = diag_fail(bd->diag, -ENOMEM, bd->filename, -1, "out of memory");
        goto out;
    }
    for (uint32_t i = 0; i < n; i++)
        le32_put(raw + 4 * (size_t)i, map[i]);
    r = bfile_pwrite(f, raw, map_bytes, h.off_blocks);
    free(raw);
    if (r == 0)
        r = bfile_sync(f);
    if (r < 0)
        goto out;
    /* the header fields that changed, in the header as it was read */
    le32_put(v->raw + 344, h.off_data);
    le64_put(v->raw + 368, h.disk_size);
    le32_put(v->raw + 384, h.blocks);
    le32_put(v->raw + 388, h.blocks_allocated);
    if ((r = bfile_pwrite(f, v->raw, VDI_HEADER_AREA, 0)) < 0 || (r = bfile_sync(f)) < 0)
        goto out;
    bd_table_return(bd, (uint64_t)v->h.blocks * 4);
    free(v->map);
    v->map = map;
    map = NULL;
    v->h = h;
    bd->size = new_size;
    bfile_refresh_size(f);
    v->file_size = f->size;
    /* the map grew: the metadata map with it */
    metamap_free(&v->meta);
    memset(&v->meta, 0, sizeof(v->meta));
    if (metamap_add(&v->meta, 0, VDI_PREHEADER + h.header_size, "header") < 0 ||
        metamap_add(&v->meta, h.off_blocks, (uint64_t)n * 4, "block map") < 0 ||
        metamap_seal(&v->meta) < 0)
        r = diag_fail(bd->diag, -ENOMEM, bd->filename, -1, "out of memory");
out:
    if (map)
        bd_table_return(bd, (uint64_t)n * 4);
    free(map);
    free(buf);
    return r;
}
