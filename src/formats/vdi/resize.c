/* VDI resize, in place and crash-safe: every state the file passes
 * through is a valid image, the old one until a single write of the
 * header switches to the new one (the writes before it synced).
 *
 * Growing, the map has room before the data: the new entries (in the
 * map's padding, which the old header does not read; a static image's
 * new blocks are allocated as holes at the end), synced, then the header.
 *
 * Growing past the map's room: the new map goes where the data area
 * starts (the old header still names the old one):
 *   1. the blocks in the first k slots of the data area (k: the slots the
 *      new map takes) are copied to the end of the file, synced;
 *   2. the old map's entries are pointed at the copies (each 4-byte write
 *      switches between two identical blocks), synced;
 *   3. the new map is written over those first k slots, synced;
 *   4. the header names the new map and data area, blocks and size.
 * (Between 2 and 4 a copy may sit at an index past the old block count,
 * which qemu-img check reports although every reader reads the image.)
 *
 * Shrinking (--shrink): the header first (size, blocks and allocated
 * count of the kept entries: the entries past the end drop out of the
 * map), synced; then blocks at indexes past the kept count are copied
 * into the slots the dropped blocks freed and their entries repointed
 * (synced), so that the indexes in use stay 0..count-1, where qemu and
 * VirtualBox expect them when they allocate the next block; the file is
 * cut after them.
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

struct rs {
    struct vdi *v;
    struct bfile *f;
    uint8_t *buf;               /* one block slot */
};

static int fail_nomem(struct vdi *v)
{
    return diag_fail(v->bd.diag, -ENOMEM, v->bd.filename, -1, "out of memory");
}

static uint64_t slot(const struct vdi_header *h, uint64_t stride, uint64_t idx)
{
    return h->off_data + idx * stride;
}

static int copy_slot(struct rs *s, uint64_t from, uint64_t to)
{
    int r = bfile_pread(s->f, s->buf, s->v->stride, from);
    return r < 0 ? r : bfile_pwrite(s->f, s->buf, s->v->stride, to);
}

/* Entries [first, last) of `map` at `at`. */
static int put_entries(struct rs *s, const uint32_t *map, uint32_t first, uint32_t last,
                       uint64_t at)
{
    if (last <= first)
        return 0;
    uint8_t *raw = malloc((size_t)(last - first) * 4);
    if (!raw)
        return fail_nomem(s->v);
    for (uint32_t i = first; i < last; i++)
        le32_put(raw + 4 * (size_t)(i - first), map[i]);
    int r = bfile_pwrite(s->f, raw, (size_t)(last - first) * 4, at + 4 * (uint64_t)first);
    free(raw);
    return r;
}

static int put_header(struct rs *s, const struct vdi_header *h)
{
    uint8_t *b = s->v->raw;

    /* the fields that change, in the header as it was read */
    le32_put(b + 340, h->off_blocks);
    le32_put(b + 344, h->off_data);
    le64_put(b + 368, h->disk_size);
    le32_put(b + 384, h->blocks);
    le32_put(b + 388, h->blocks_allocated);
    int r = bfile_pwrite(s->f, b, VDI_HEADER_AREA, 0);
    return r < 0 ? r : bfile_sync(s->f);
}

static uint32_t count_allocated(const uint32_t *map, uint32_t n)
{
    uint32_t c = 0;

    for (uint32_t i = 0; i < n; i++)
        c += map[i] < VDI_ZERO;
    return c;
}

/* One past the highest index in use. */
static uint64_t used_top(const uint32_t *map, uint32_t n)
{
    uint64_t top = 0;

    for (uint32_t i = 0; i < n; i++)
        if (map[i] < VDI_ZERO && (uint64_t)map[i] + 1 > top)
            top = (uint64_t)map[i] + 1;
    return top;
}

/* grow: `map` (n entries, the old ones as they are) gets its new entries */
static int grow(struct rs *s, struct vdi_header *h, uint32_t *map, uint32_t n)
{
    struct vdi *v = s->v;
    uint32_t n0 = v->h.blocks;
    uint64_t top = used_top(map, n0);
    uint64_t need = (uint64_t)n * 4;
    int r;

    if (v->h.off_blocks + need <= v->h.off_data) {
        /* room: the new entries go into the map's padding */
        if (h->type == VDI_TYPE_STATIC)
            for (uint32_t i = n0; i < n; i++)
                map[i] = (uint32_t)top++;
        if (h->type == VDI_TYPE_STATIC &&
            ftruncate(s->f->fd, (off_t)slot(h, v->stride, top)) < 0)
            return diag_errno(v->bd.diag, -errno, v->bd.filename, -1, "cannot extend the file");
        if ((r = put_entries(s, map, n0, n, h->off_blocks)) < 0 || (r = bfile_sync(s->f)) < 0)
            return r;
        h->blocks = n;
        h->blocks_allocated = count_allocated(map, n);
        return put_header(s, h);
    }
    /* the new map at the start of the data area, k slots long */
    uint64_t map_bytes = (need + VDI_SECTOR - 1) / VDI_SECTOR * VDI_SECTOR;
    uint64_t k = (map_bytes + v->stride - 1) / v->stride;
    uint64_t new_data = v->h.off_data + k * v->stride;
    if (new_data > UINT32_MAX || new_data % VDI_SECTOR)
        return diag_fail(v->bd.diag, -EFBIG, v->bd.filename, -1, "the block map cannot grow "
                         "here (the data area would start at %llu)",
                         (unsigned long long)new_data);
    /* 1: the blocks in the first k slots, copied past every block */
    uint64_t dst = top > k ? top : k;
    bool moved = false;
    for (uint32_t i = 0; i < n0; i++) {
        if (map[i] >= VDI_ZERO || map[i] >= k)
            continue;
        if ((r = copy_slot(s, slot(&v->h, v->stride, map[i]), slot(&v->h, v->stride, dst))) < 0)
            return r;
        map[i] = (uint32_t)dst++;
        moved = true;
    }
    if (moved && (r = bfile_sync(s->f)) < 0)
        return r;
    /* 2: the old map names the copies */
    if (moved && ((r = put_entries(s, map, 0, n0, v->h.off_blocks)) < 0 ||
                  (r = bfile_sync(s->f)) < 0))
        return r;
    /* 3: the new map (indexes from the new data area) over the first k slots */
    for (uint32_t i = 0; i < n0; i++)
        if (map[i] < VDI_ZERO)
            map[i] -= (uint32_t)k;
    dst -= k;
    if (h->type == VDI_TYPE_STATIC)
        for (uint32_t i = n0; i < n; i++)
            map[i] = (uint32_t)dst++;
    h->off_blocks = v->h.off_data;
    h->off_data = (uint32_t)new_data;
    uint64_t end = slot(h, v->stride, dst);
    if (end > s->f->size && ftruncate(s->f->fd, (off_t)end) < 0)
        return diag_errno(v->bd.diag, -errno, v->bd.filename, -1, "cannot extend the file");
    if ((r = put_entries(s, map, 0, n, h->off_blocks)) < 0 || (r = bfile_sync(s->f)) < 0)
        return r;
    /* 4: the switch */
    h->blocks = n;
    h->blocks_allocated = count_allocated(map, n);
    return put_header(s, h);
}

/* shrink to n blocks: the header, then the indexes made dense again */
static int shrink(struct rs *s, struct vdi_header *h, uint32_t *map, uint32_t n)
{
    struct vdi *v = s->v;
    uint32_t count = count_allocated(map, n);
    int r;

    h->blocks = n;
    h->blocks_allocated = count;
    if ((r = put_header(s, h)) < 0)
        return r;
    /* the slots below `count` no kept entry uses */
    uint8_t *taken = calloc((size_t)count / 8 + 1, 1);
    if (!taken)
        return fail_nomem(v);
    for (uint32_t i = 0; i < n; i++)
        if (map[i] < count)
            taken[map[i] / 8] |= (uint8_t)(1u << (map[i] % 8));
    uint32_t hole = 0;
    bool moved = false;
    for (uint32_t i = 0; i < n && r == 0; i++) {
        if (map[i] >= VDI_ZERO || map[i] < count)
            continue;
        while (taken[hole / 8] & (1u << (hole % 8)))
            hole++;
        taken[hole / 8] |= (uint8_t)(1u << (hole % 8));
        r = copy_slot(s, slot(h, v->stride, map[i]), slot(h, v->stride, hole));
        map[i] = hole;
        moved = true;
    }
    free(taken);
    if (r == 0 && moved && (r = bfile_sync(s->f)) == 0 &&
        (r = put_entries(s, map, 0, n, h->off_blocks)) == 0)
        r = bfile_sync(s->f);
    if (r < 0)
        return r;
    uint64_t end = slot(h, v->stride, count);
    if (end < s->f->size) {
        if (ftruncate(s->f->fd, (off_t)end) < 0)
            return diag_errno(v->bd.diag, -errno, v->bd.filename, -1, "cannot truncate");
        return bfile_sync(s->f);
    }
    return 0;
}

int vdi_resize(struct bd *bd, uint64_t new_size, bool shrinking)
{
    struct vdi *v = to_vdi(bd);
    struct vdi_header h = v->h;
    uint32_t bs = h.block_size;
    int r;

    if (v->h.v0)
        return diag_fail(bd->diag, -ENOTSUP, bd->filename, -1,
                         "resizing a version 0 VDI is not supported (convert it first)");
    new_size = (new_size + VDI_SECTOR - 1) / VDI_SECTOR * VDI_SECTOR;
    if (new_size < bd->size && !shrinking)
        return diag_fail(bd->diag, -EINVAL, bd->filename, -1,
                         "shrinking would lose data; use --shrink to allow it");
    uint64_t nb = new_size / bs + (new_size % bs != 0);
    if (nb > VDI_MAX_BLOCKS)
        return diag_fail(bd->diag, -EFBIG, bd->filename, -1, "a vdi image of %llu bytes is "
                         "too large", (unsigned long long)new_size);
    /* growing keeps every entry; shrinking drops those past the end */
    uint32_t n = nb > h.blocks || new_size < bd->size ? (uint32_t)nb : h.blocks;
    uint32_t cap = n > h.blocks ? n : h.blocks;
    if ((r = bd_table_budget(bd, (uint64_t)cap * 4, bd->filename, "the new block map")) < 0)
        return r;
    uint32_t *map = malloc((size_t)cap * 4 + 4);
    struct rs s = { .v = v, .f = bd->file, .buf = malloc(v->stride) };
    if (!map || !s.buf) {
        r = fail_nomem(v);
        goto out;
    }
    for (uint32_t i = 0; i < cap; i++)
        map[i] = i < h.blocks ? v->map[i] : VDI_UNALLOCATED;
    h.disk_size = new_size;
    r = new_size < bd->size ? shrink(&s, &h, map, n) : grow(&s, &h, map, n);
    if (r < 0)
        goto out;
    bd_table_return(bd, (uint64_t)v->h.blocks * 4);
    free(v->map);
    v->map = map;
    map = NULL;
    bd_table_return(bd, (uint64_t)(cap - n) * 4);
    v->h = h;
    bd->size = new_size;
    bfile_refresh_size(bd->file);
    v->file_size = bd->file->size;
    /* the map moved or grew: the metadata map with it */
    metamap_free(&v->meta);
    memset(&v->meta, 0, sizeof(v->meta));
    if (metamap_add(&v->meta, 0, VDI_PREHEADER + h.header_size, "header") < 0 ||
        metamap_add(&v->meta, h.off_blocks, (uint64_t)n * 4, "block map") < 0 ||
        metamap_seal(&v->meta) < 0)
        r = fail_nomem(v);
out:
    if (map)
        bd_table_return(bd, (uint64_t)cap * 4);
    free(map);
    free(s.buf);
    return r;
}
