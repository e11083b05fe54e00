/* VDI: the header (decode with its bounds, encode). */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "formats/vdi/format.h"
#include "util/endian.h"

static int bad(char *err, size_t errlen, const char *what)
{
    snprintf(err, errlen, "%s", what);
    return -EINVAL;
}

int vdi_header_decode(const uint8_t *b, size_t len, struct vdi_header *h, char *err,
                      size_t errlen)
{
    memset(h, 0, sizeof(*h));
    if (len < VDI_PREHEADER || le32_get(b + 64) != VDI_SIGNATURE)
        return bad(err, errlen, "no VDI signature");
    h->version = le32_get(b + 68);
    h->v0 = h->version >> 16 == 0;
    size_t need = h->v0 ? VDI_PREHEADER + VDI_V0_HEADER : VDI_PREHEADER + VDI_V11_MIN_HEADER;
    if (len < need || len < VDI_HEADER_AREA)
        return bad(err, errlen, "truncated header");
    if (h->version >> 16 == 1) {
        h->header_size = le32_get(b + 72);
        if (h->header_size < VDI_V11_MIN_HEADER || h->header_size > VDI_HEADER_AREA - VDI_PREHEADER) {
            snprintf(err, errlen, "header size %u is not 384 to 440", h->header_size);
            return -EINVAL;
        }
        h->type = le32_get(b + 76);
        h->flags = le32_get(b + 80);
        memcpy(h->comment, b + 84, 256);
        h->off_blocks = le32_get(b + 340);
        h->off_data = le32_get(b + 344);
        h->cyls = le32_get(b + 348);
        h->heads = le32_get(b + 352);
        h->secs = le32_get(b + 356);
        h->sector_size = le32_get(b + 360);
        h->disk_size = le64_get(b + 368);
        h->block_size = le32_get(b + 376);
        h->block_extra = le32_get(b + 380);
        h->blocks = le32_get(b + 384);
        h->blocks_allocated = le32_get(b + 388);
        memcpy(h->uuid_create, b + 392, 16);
        memcpy(h->uuid_modify, b + 408, 16);
        memcpy(h->uuid_link, b + 424, 16);
        memcpy(h->uuid_parent_modify, b + 440, 16);
    } else if (h->v0) {
        h->header_size = VDI_V0_HEADER;
        h->type = le32_get(b + 72);
        h->flags = le32_get(b + 76);
        memcpy(h->comment, b + 80, 256);
        h->cyls = le32_get(b + 336);
        h->heads = le32_get(b + 340);
        h->secs = le32_get(b + 344);
        h->sector_size = le32_get(b + 348);
        h->disk_size = le64_get(b + 352);
        h->block_size = le32_get(b + 360);
        h->blocks = le32_get(b + 364);
        h->blocks_allocated = le32_get(b + 368);
        memcpy(h->uuid_create, b + 372, 16);
        memcpy(h->uuid_modify, b + 388, 16);
        memcpy(h->uuid_link, b + 404, 16);
        /* the map right after the header, the data after the map */
        h->off_blocks = VDI_PREHEADER + VDI_V0_HEADER;
        if (h->blocks > VDI_MAX_BLOCKS)
            return bad(err, errlen, "more than 2^30 blocks");
        h->off_data = (uint32_t)(h->off_blocks + (uint64_t)h->blocks * 4);
    } else {
        snprintf(err, errlen, "unsupported VDI version %u.%u (1.x and 0.x are read)",
                 h->version >> 16, h->version & 0xffff);
        return -EINVAL;
    }
    if (h->type != VDI_TYPE_DYNAMIC && h->type != VDI_TYPE_STATIC && h->type != VDI_TYPE_DIFF) {
        snprintf(err, errlen, "unsupported image type %u (1 dynamic, 2 static, 4 "
                 "differencing are read)", h->type);
        return -EINVAL;
    }
    if (h->sector_size != VDI_SECTOR && !(h->v0 && h->sector_size == 0)) {
        snprintf(err, errlen, "sector size %u is not 512", h->sector_size);
        return -EINVAL;
    }
    if (h->block_size < VDI_SECTOR || h->block_size > VDI_MAX_BLOCK ||
        h->block_size % VDI_SECTOR) {
        snprintf(err, errlen, "block size %u is not a multiple of 512 up to 256 MiB",
                 h->block_size);
        return -EINVAL;
    }
    if (h->block_extra > VDI_MAX_EXTRA || h->block_extra % VDI_SECTOR) {
        snprintf(err, errlen, "block extra data of %u bytes is not a multiple of 512 up "
                 "to 1 MiB", h->block_extra);
        return -EINVAL;
    }
    if (h->blocks > VDI_MAX_BLOCKS)
        return bad(err, errlen, "more than 2^30 blocks");
    if (!h->v0 && (h->off_blocks % VDI_SECTOR || h->off_data % VDI_SECTOR)) {
        snprintf(err, errlen, "block map (%u) or data (%u) offset is not on a sector",
                 h->off_blocks, h->off_data);
        return -EINVAL;
    }
    if (h->off_blocks < VDI_PREHEADER + h->header_size) {
        snprintf(err, errlen, "block map at %u overlaps the header", h->off_blocks);
        return -EINVAL;
    }
    if ((uint64_t)h->off_blocks + (uint64_t)h->blocks * 4 > h->off_data) {
        snprintf(err, errlen, "block map of %u entries at %u overlaps the data at %u",
                 h->blocks, h->off_blocks, h->off_data);
        return -EINVAL;
    }
    /* odd sizes (VBoxManage convertfromraw): whole sectors, as qemu */
    h->disk_size = h->disk_size / VDI_SECTOR * VDI_SECTOR;
    if (h->disk_size > (uint64_t)h->blocks * h->block_size) {
        snprintf(err, errlen, "disk of %llu bytes is larger than its %u blocks of %u",
                 (unsigned long long)h->disk_size, h->blocks, h->block_size);
        return -EINVAL;
    }
    h->comment[256] = 0;
    return 0;
}

void vdi_header_encode(const struct vdi_header *h, uint8_t b[VDI_HEADER_AREA])
{
    static const char text[] = "<<< QEMU VM Virtual Disk Image >>>\n";

    memset(b, 0, VDI_HEADER_AREA);
    memcpy(b, text, sizeof(text) - 1);
    le32_put(b + 64, VDI_SIGNATURE);
    le32_put(b + 68, VDI_V11);
    le32_put(b + 72, VDI_V11_MIN_HEADER);
    le32_put(b + 76, h->type);
    le32_put(b + 80, h->flags);
    memcpy(b + 84, h->comment, strnlen(h->comment, 256));
    le32_put(b + 340, h->off_blocks);
    le32_put(b + 344, h->off_data);
    le32_put(b + 348, h->cyls);
    le32_put(b + 352, h->heads);
    le32_put(b + 356, h->secs);
    le32_put(b + 360, VDI_SECTOR);
    le64_put(b + 368, h->disk_size);
    le32_put(b + 376, h->block_size);
    le32_put(b + 380, h->block_extra);
    le32_put(b + 384, h->blocks);
    le32_put(b + 388, h->blocks_allocated);
    memcpy(b + 392, h->uuid_create, 16);
    memcpy(b + 408, h->uuid_modify, 16);
    memcpy(b + 424, h->uuid_link, 16);
    memcpy(b + 440, h->uuid_parent_modify, 16);
}
