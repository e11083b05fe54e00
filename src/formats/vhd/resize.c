/* VHD resize, in place and durably.  The new size follows the creator's
 * rule (vhd_disk_size): a creator that sizes by geometry gets the size
 * rounded up to whole geometry, the others (and images with the maximum
 * geometry, force_size) exactly the size asked, in whole sectors.
 *
 * fixed: the new footer at the new end, synced, then the old footer's
 * sector (now inside the disk) zeroed; shrinking cuts the file after the
 * new footer.
 * dynamic: when the BAT's sectors have room for the new entries, only the
 * entries and the footers change; else the BAT moves to where the footer
 * was and the footer after it.  Order: BAT, header, footer at the end,
 * footer copy at 0, each synced: a crash leaves either footer consistent
 * with the BAT the header names.  Shrinking frees the entries past the
 * end (their blocks stay in the file, unreferenced).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "formats/vhd/vhd_int.h"
#include "formats/writer_util.h"
#include "io/bfile.h"
#include "util/diag.h"
#include "util/endian.h"

static int new_footer(struct vhd *v, uint64_t want, struct vhd_footer *f)
{
    uint64_t chs = (uint64_t)v->foot.cyls * v->foot.heads * v->foot.secs;
    uint64_t size;

    *f = v->foot;
    if (vhd_creator_uses_size(v->foot.creator_app) || chs == VHD_MAX_GEOMETRY) {
        if (vhd_create_geometry(want, true, &size, &f->cyls, &f->heads, &f->secs) < 0)
            goto big;
        if (chs != VHD_MAX_GEOMETRY)
            vhd_geometry(size / VHD_SECTOR, &f->cyls, &f->heads, &f->secs);
    } else if (vhd_create_geometry(want, false, &size, &f->cyls, &f->heads, &f->secs) < 0) {
        goto big;
    }
    f->current_size = size;
    return 0;
big:
    return diag_fail(v->bd.diag, -EFBIG, v->bd.filename, -1,
                     "a VHD of %llu bytes is too large (at most 2040 GiB)",
                     (unsigned long long)want);
}

static int put_footer(struct vhd *v, const struct vhd_footer *f, uint64_t at)
{
    uint8_t b[VHD_FOOTER_SIZE];

    vhd_footer_encode(f, b);
    int r = bfile_pwrite(v->bd.file, b, sizeof(b), at);
    return r < 0 ? r : bfile_sync(v->bd.file);
}

static int resize_fixed(struct vhd *v, const struct vhd_footer *f)
{
    uint64_t old = v->data_end, size = f->current_size;
    struct bfile *file = v->bd.file;
    int r;

    if ((r = put_footer(v, f, size)) < 0)
        return r;
    if (size > old) {
        if ((r = wfile_zero(file, old, VHD_FOOTER_SIZE)) < 0 || (r = bfile_sync(file)) < 0)
            return r;
    } else if (ftruncate(file->fd, (off_t)(size + VHD_FOOTER_SIZE)) < 0 ||
               bfile_sync(file) < 0) {
        return diag_errno(v->bd.diag, -errno, v->bd.filename, -1, "cannot truncate");
    }
    v->data_end = size;
    return 0;
}

static int resize_dynamic(struct vhd *v, const struct vhd_footer *f)
{
    struct bfile *file = v->bd.file;
    uint64_t size = f->current_size;
    uint64_t blocks = size / v->block_size + (size % v->block_size != 0);
    uint64_t old_blocks = v->bd.size / v->block_size + (v->bd.size % v->block_size != 0);
    uint32_t n = v->n_bat;
    uint64_t bat_off = v->hdr.table_offset, bat_bytes = v->bat_bytes;
    uint64_t foot_at = v->data_end;
    int r;

    if (blocks > UINT32_MAX - 1)
        return diag_fail(v->bd.diag, -EFBIG, v->bd.filename, -1, "too many blocks");
    if (blocks > n) {
        n = (uint32_t)blocks;
        if ((uint64_t)n * 4 > bat_bytes) {
            /* the BAT moves to where the footer is */
            bat_off = (v->data_end + VHD_SECTOR - 1) / VHD_SECTOR * VHD_SECTOR;
            bat_bytes = ((uint64_t)n * 4 + VHD_SECTOR - 1) / VHD_SECTOR * VHD_SECTOR;
            foot_at = bat_off + bat_bytes;
        }
    }
    if ((r = bd_table_budget(&v->bd, (uint64_t)n * 4, v->bd.filename, "the new BAT")) < 0)
        return r;
    uint8_t *raw = malloc(bat_bytes ? bat_bytes : 1);
    uint32_t *bat = malloc((size_t)n * 4 + 4);
    if (!raw || !bat) {
        free(raw);
        free(bat);
        return diag_fail(v->bd.diag, -ENOMEM, v->bd.filename, -1, "out of memory");
    }
    memset(raw, 0xff, bat_bytes);
    for (uint32_t i = 0; i < n; i++) {
        bat[i] = i < v->n_bat && i < old_blocks && i < blocks ? v->bat[i] : VHD_BAT_UNUSED;
        be32_put(raw + 4 * (size_t)i, bat[i]);
    }
    r = bfile_pwrite(file, raw, bat_bytes, bat_off);
    free(raw);
    if (r == 0)
        r = bfile_sync(file);
    if (r == 0) {
        uint8_t hb[VHD_DYNHDR_SIZE];
        struct vhd_dynhdr h = v->hdr;
        h.table_offset = bat_off;
        h.max_entries = n;
        vhd_dynhdr_encode(&h, hb);
        if ((r = bfile_pwrite(file, hb, sizeof(hb), v->foot.data_offset)) == 0 &&
            (r = bfile_sync(file)) == 0) {
            v->hdr.table_offset = bat_off;
            v->hdr.max_entries = n;
        }
    }
    if (r == 0 && (r = put_footer(v, f, foot_at)) == 0 &&
        foot_at + VHD_FOOTER_SIZE < v->file_size &&
        ftruncate(file->fd, (off_t)(foot_at + VHD_FOOTER_SIZE)) < 0)
        r = diag_errno(v->bd.diag, -errno, v->bd.filename, -1, "cannot truncate");
    if (r == 0)
        r = put_footer(v, f, 0);
    if (r < 0) {
        free(bat);
        return r;
    }
    bd_table_return(&v->bd, (uint64_t)v->n_bat * 4);
    free(v->bat);
    v->bat = bat;
    v->n_bat = n;
    v->bat_bytes = bat_bytes;
    v->data_end = foot_at;
    return 0;
}

int vhd_resize(struct bd *bd, uint64_t new_size, bool shrink)
{
    struct vhd *v = to_vhd(bd);
    struct vhd_footer f;
    int r;

    if (!bd->file->writable)
        return diag_fail(bd->diag, -EBADF, bd->filename, -1, "internal error: not writable");
    if (v->used_copy)
        return diag_fail(bd->diag, -EINVAL, bd->filename, (int64_t)v->data_end,
                         "the footer is damaged (the copy at offset 0 was read): not "
                         "resizing a damaged image");
    if ((r = new_footer(v, new_size, &f)) < 0)
        return r;
    if (f.current_size < bd->size && !shrink)
        return diag_fail(bd->diag, -EINVAL, bd->filename, -1,
                         "shrinking would lose data; use --shrink to allow it");
    if (f.current_size == bd->size && vhd_disk_size(&f) == bd->size)
        return 0;
    r = v->dynamic ? resize_dynamic(v, &f) : resize_fixed(v, &f);
    if (r < 0)
        return r;
    v->foot = f;
    bd->size = vhd_disk_size(&f);
    v->file_size = v->data_end + VHD_FOOTER_SIZE;
    bfile_refresh_size(bd->file);
    return 0;
}
