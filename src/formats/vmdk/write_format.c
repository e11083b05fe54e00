/* VMDK writer: pure encoders of the binary structures (sparse extent
 * header and footer, metadata markers) and the hosted sparse layout. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "formats/vmdk/write.h"
#include "util/endian.h"

static uint64_t div_up(uint64_t a, uint64_t b)
{
    return a / b + (a % b != 0);
}

int vmdkw_sparse_layout(uint64_t capacity, bool embedded_desc,
                        struct vmdkw_sparse_layout *l, char *err, size_t errlen)
{
    memset(l, 0, sizeof(*l));
    if (capacity > VMDKW_MAX_CAPACITY) {
        snprintf(err, errlen, "capacity of %llu sectors is too large for a sparse extent",
                 (unsigned long long)capacity);
        return -EFBIG;
    }
    l->gt_count = div_up(capacity, (uint64_t)VMDKW_GTES * VMDKW_GRAIN_SECTORS);
    l->gd_sectors = div_up(l->gt_count * 4, VMDK_SECTOR);
    uint64_t next = 1;                          /* after the header */
    if (embedded_desc) {
        l->desc_offset = next;
        l->desc_sectors = VMDKW_DESC_SECTORS;
        next += VMDKW_DESC_SECTORS;
    }
    l->rgd_offset = next;
    l->rgt_offset = l->rgd_offset + l->gd_sectors;
    l->gd_offset = l->rgt_offset + l->gt_count * VMDKW_GT_SECTORS;
    l->gt_offset = l->gd_offset + l->gd_sectors;
    uint64_t end = l->gt_offset + l->gt_count * VMDKW_GT_SECTORS;
    l->overhead = div_up(end, VMDKW_GRAIN_SECTORS) * VMDKW_GRAIN_SECTORS;
    if (l->overhead >= VMDKW_MAX_FILE_SECTORS) {
        snprintf(err, errlen, "grain tables of %llu sectors do not fit 32-bit sector numbers",
                 (unsigned long long)capacity);
        return -EFBIG;
    }
    return 0;
}

void vmdkw_header_encode(const struct vmdk4_header *h, uint8_t b[VMDK4_HEADER_SIZE])
{
    memset(b, 0, VMDK4_HEADER_SIZE);
    le32_put(b, VMDK4_MAGIC);
    le32_put(b + 4, h->version);
    le32_put(b + 8, h->flags);
    le64_put(b + 12, h->capacity);
    le64_put(b + 20, h->grain_sectors);
    le64_put(b + 28, h->desc_offset);
    le64_put(b + 36, h->desc_sectors);
    le32_put(b + 44, h->gtes);
    le64_put(b + 48, h->rgd_offset);
    le64_put(b + 56, h->gd_offset);
    le64_put(b + 64, h->overhead);
    b[72] = h->dirty;
    /* the newline check bytes: a text-mode transfer would change them */
    b[73] = '\n';
    b[74] = ' ';
    b[75] = '\r';
    b[76] = '\n';
    le16_put(b + 77, h->compress);
}

void vmdkw_marker_encode(uint8_t b[VMDK_SECTOR], uint64_t sectors, uint32_t type)
{
    memset(b, 0, VMDK_SECTOR);
    le64_put(b, sectors);
    le32_put(b + 8, 0);         /* size 0: a metadata marker, not a grain */
    le32_put(b + 12, type);
}
