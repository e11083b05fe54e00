/* VMDK writer: one hosted sparse extent (KDMV), as qemu-img and VMware
 * Workstation lay it out (see write.h).
 *
 * Grains are appended at the end of the file in the order they arrive (a
 * multi-grain write stays one contiguous run); their grain table entries go
 * into a small LRU cache of tables, written back to both copies (redundant
 * and primary) when evicted, flushed and at finish.  The directories point
 * at fixed, preallocated tables, so they are generated at finish from the
 * layout.  Tables never written stay holes, which read as "no grain"; a
 * table written back once is read again if the writes come back to it.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "formats/vmdk/write_priv.h"
#include "io/bfile.h"
#include "util/diag.h"
#include "util/endian.h"

#define GT_BYTES (VMDKW_GTES * 4)

int vmdkw_sx_init(struct vmdkw_sx *x, uint64_t capacity, bool embedded_desc,
                  unsigned nslots, char *err, size_t errlen)
{
    int r = vmdkw_sparse_layout(capacity, embedded_desc, &x->l, err, errlen);

    if (r < 0)
        return r;
    x->capacity = capacity;
    x->next_sector = x->l.overhead;
    x->nslots = nslots ? nslots : 1;
    if (!(x->on_disk = calloc(x->l.gt_count / 8 + 1, 1))) {
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    return 0;
}

void vmdkw_sx_free(struct vmdkw_sx *x)
{
    free(x->slots);
    free(x->on_disk);
    x->slots = NULL;
    x->on_disk = NULL;
}

static int gt_writeback(struct vmdkw_sx *x, struct vmdkw_gt_slot *s)
{
    uint8_t buf[GT_BYTES];
    uint64_t rel = s->idx * VMDKW_GT_SECTORS * VMDK_SECTOR;
    int r;

    for (unsigned i = 0; i < VMDKW_GTES; i++)
        le32_put(buf + 4 * i, s->ent[i]);
    if ((r = bfile_pwrite(x->file, buf, GT_BYTES, x->l.rgt_offset * VMDK_SECTOR + rel)) < 0 ||
        (r = bfile_pwrite(x->file, buf, GT_BYTES, x->l.gt_offset * VMDK_SECTOR + rel)) < 0)
        return r;
    x->on_disk[s->idx / 8] |= (uint8_t)(1u << (s->idx % 8));
    s->dirty = false;
    return 0;
}

/* The cached table `idx` (loaded, or fresh). */
static int gt_get(struct vmdkw_sx *x, uint64_t idx, struct vmdkw_gt_slot **out)
{
    struct vmdkw_gt_slot *victim = NULL;
    int r;

    if (!x->slots && !(x->slots = calloc(x->nslots, sizeof(*x->slots))))
        return diag_fail(x->diag, -ENOMEM, x->name, -1, "out of memory");
    for (unsigned i = 0; i < x->nslots; i++) {
        struct vmdkw_gt_slot *s = &x->slots[i];
        if (s->used && s->idx == idx) {
            s->stamp = ++x->clock;
            *out = s;
            return 0;
        }
        if (!victim || (!s->used && victim->used) ||
            (s->used == victim->used && s->stamp < victim->stamp))
            victim = s;
    }
    if (victim->used && victim->dirty && (r = gt_writeback(x, victim)) < 0)
        return r;
    victim->used = false;
    if (x->on_disk[idx / 8] & (1u << (idx % 8))) {
        /* written back earlier and needed again (writes out of order) */
        uint8_t buf[GT_BYTES];
        uint64_t off = (x->l.gt_offset + idx * VMDKW_GT_SECTORS) * VMDK_SECTOR;
        if ((r = bfile_pread(x->file, buf, GT_BYTES, off)) < 0)
            return r;
        for (unsigned i = 0; i < VMDKW_GTES; i++)
            victim->ent[i] = le32_get(buf + 4 * i);
    } else {
        memset(victim->ent, 0, sizeof(victim->ent));
    }
    victim->used = true;
    victim->dirty = false;
    victim->idx = idx;
    victim->stamp = ++x->clock;
    *out = victim;
    return 0;
}

int vmdkw_sx_alloc(struct vmdkw_sx *x, uint64_t off, uint64_t len, uint64_t *host)
{
    uint64_t g0 = off / VMDKW_GRAIN_BYTES;
    uint64_t n = len / VMDKW_GRAIN_BYTES + (len % VMDKW_GRAIN_BYTES != 0);
    uint64_t first = x->next_sector;
    struct vmdkw_gt_slot *s = NULL;
    int r;

    if (off % VMDKW_GRAIN_BYTES || len == 0 || off + len > x->capacity * VMDK_SECTOR)
        return diag_fail(x->diag, -EINVAL, x->name, (int64_t)off,
                         "internal error: write of %llu bytes at %llu is not whole grains "
                         "inside the extent", (unsigned long long)len,
                         (unsigned long long)off);
    if (first + n * VMDKW_GRAIN_SECTORS > VMDKW_MAX_FILE_SECTORS)
        return diag_fail(x->diag, -EFBIG, x->name, (int64_t)off,
                         "the sparse extent would grow past 2 TiB (grain offsets are "
                         "32-bit sector numbers)");
    for (uint64_t i = 0; i < n; i++) {
        uint64_t g = g0 + i;
        if ((!s || s->idx != g / VMDKW_GTES) && (r = gt_get(x, g / VMDKW_GTES, &s)) < 0)
            return r;
        uint32_t *e = &s->ent[g % VMDKW_GTES];
        if (*e)
            return diag_fail(x->diag, -EINVAL, x->name, (int64_t)(g * VMDKW_GRAIN_BYTES),
                             "internal error: grain at offset %llu written twice",
                             (unsigned long long)(g * VMDKW_GRAIN_BYTES));
        *e = (uint32_t)(first + i * VMDKW_GRAIN_SECTORS);
        s->dirty = true;
    }
    x->next_sector = first + n * VMDKW_GRAIN_SECTORS;
    *host = first * VMDK_SECTOR;
    return 0;
}

int vmdkw_sx_zero(struct vmdkw_sx *x, uint64_t off, uint64_t len, bool zeroed_grain)
{
    uint64_t host, n = len / VMDKW_GRAIN_BYTES + (len % VMDKW_GRAIN_BYTES != 0);
    struct vmdkw_gt_slot *s = NULL;
    int r;

    if (!zeroed_grain)
        return vmdkw_sx_alloc(x, off, len, &host);
    if (off % VMDKW_GRAIN_BYTES || len == 0 || off + len > x->capacity * VMDK_SECTOR)
        return diag_fail(x->diag, -EINVAL, x->name, (int64_t)off,
                         "internal error: zeroes of %llu bytes at %llu are not whole grains "
                         "inside the extent", (unsigned long long)len,
                         (unsigned long long)off);
    for (uint64_t g = off / VMDKW_GRAIN_BYTES; n--; g++) {
        if ((!s || s->idx != g / VMDKW_GTES) && (r = gt_get(x, g / VMDKW_GTES, &s)) < 0)
            return r;
        uint32_t *e = &s->ent[g % VMDKW_GTES];
        if (*e)
            return diag_fail(x->diag, -EINVAL, x->name, (int64_t)(g * VMDKW_GRAIN_BYTES),
                             "internal error: grain at offset %llu written twice",
                             (unsigned long long)(g * VMDKW_GRAIN_BYTES));
        *e = 1;         /* "reads as zeros", whatever the parent holds */
        s->dirty = true;
    }
    return 0;
}

int vmdkw_sx_flush(struct vmdkw_sx *x, bool drop)
{
    for (unsigned i = 0; x->slots && i < x->nslots; i++) {
        struct vmdkw_gt_slot *s = &x->slots[i];
        int r;
        if (s->used && s->dirty && (r = gt_writeback(x, s)) < 0)
            return r;
    }
    if (drop) {
        free(x->slots);
        x->slots = NULL;
    }
    return 0;
}

/* A grain directory: entry i points at table i of the area at `gt_area`. */
static int write_gd(struct vmdkw_sx *x, uint64_t gd_sector, uint64_t gt_area)
{
    uint8_t buf[16384];
    uint64_t per = sizeof(buf) / 4;
    int r;

    for (uint64_t i = 0; i < x->l.gt_count; i += per) {
        uint64_t n = x->l.gt_count - i < per ? x->l.gt_count - i : per;
        for (uint64_t j = 0; j < n; j++)
            le32_put(buf + 4 * j, (uint32_t)(gt_area + (i + j) * VMDKW_GT_SECTORS));
        if ((r = bfile_pwrite(x->file, buf, n * 4, gd_sector * VMDK_SECTOR + i * 4)) < 0)
            return r;
    }
    return 0;
}

int vmdkw_sx_finish(struct vmdkw_sx *x, const struct vmdkw_params *p, const char *desc,
                    bool durable)
{
    size_t head_len = (size_t)(1 + x->l.desc_sectors) * VMDK_SECTOR;
    uint8_t *head;
    int r;

    if ((r = vmdkw_sx_flush(x, true)) < 0 ||
        (r = write_gd(x, x->l.rgd_offset, x->l.rgt_offset)) < 0 ||
        (r = write_gd(x, x->l.gd_offset, x->l.gt_offset)) < 0)
        return r;
    /* the file covers every table and whole grains (the last may be short) */
    if (ftruncate(x->file->fd, (off_t)(x->next_sector * VMDK_SECTOR)) < 0)
        return diag_errno(x->diag, -errno, x->name, -1, "cannot set the size");
    if (durable && (r = bfile_sync(x->file)) < 0)
        return r;

    /* last: the header (and descriptor), which make the file an extent */
    if (!(head = calloc(1, head_len)))
        return diag_fail(x->diag, -ENOMEM, x->name, -1, "out of memory");
    struct vmdk4_header h = {
        .version = p->zeroed_grain ? 2 : 1,
        .flags = VMDK4_FLAG_NL_DETECT | VMDK4_FLAG_RGD |
                 (p->zeroed_grain ? VMDK4_FLAG_ZERO_GRAIN : 0),
        .capacity = x->capacity,
        .grain_sectors = VMDKW_GRAIN_SECTORS,
        .desc_offset = x->l.desc_offset,
        .desc_sectors = x->l.desc_sectors,
        .gtes = VMDKW_GTES,
        .rgd_offset = x->l.rgd_offset,
        .gd_offset = x->l.gd_offset,
        .overhead = x->l.overhead,
        .compress = VMDK4_COMPRESS_NONE,
    };
    vmdkw_header_encode(&h, head);
    if (desc) {
        size_t n = strlen(desc);
        if (n >= head_len - VMDK_SECTOR) {
            free(head);
            return diag_fail(x->diag, -ENAMETOOLONG, x->name, VMDK_SECTOR,
                             "the descriptor does not fit its 10 KiB");
        }
        memcpy(head + VMDK_SECTOR, desc, n);
    }
    r = bfile_pwrite(x->file, head, desc ? head_len : VMDK_SECTOR, 0);
    free(head);
    if (r == 0 && durable)
        r = bfile_sync(x->file);
    return r;
}
