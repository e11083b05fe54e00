/* VHD: the footer (decode, check, encode), its checksum, and the disk
 * size rules (CHS geometry or current size) qemu-img applies. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "formats/vhd/format.h"
#include "util/endian.h"

uint32_t vhd_checksum(const uint8_t *b, size_t len, size_t skip)
{
    uint32_t sum = 0;

    for (size_t i = 0; i < len; i++)
        if (i < skip || i >= skip + 4)
            sum += b[i];
    return ~sum;
}

int vhd_footer_decode(const uint8_t b[VHD_FOOTER_SIZE], struct vhd_footer *f,
                      char *err, size_t errlen)
{
    memset(f, 0, sizeof(*f));
    if (memcmp(b, VHD_FOOTER_COOKIE, 8) != 0) {
        snprintf(err, errlen, "no VHD footer (cookie 'conectix' missing)");
        return -EINVAL;
    }
    f->features = be32_get(b + 8);
    f->version = be32_get(b + 12);
    f->data_offset = be64_get(b + 16);
    f->timestamp = be32_get(b + 24);
    memcpy(f->creator_app, b + 28, 4);
    f->creator_version = be32_get(b + 32);
    f->creator_os = be32_get(b + 36);
    f->orig_size = be64_get(b + 40);
    f->current_size = be64_get(b + 48);
    f->cyls = be16_get(b + 56);
    f->heads = b[58];
    f->secs = b[59];
    f->type = be32_get(b + 60);
    f->checksum = be32_get(b + 64);
    f->checksum_ok = f->checksum == vhd_checksum(b, VHD_FOOTER_SIZE, 64);
    memcpy(f->uuid, b + 68, 16);
    f->saved_state = b[84];
    return 0;
}

int vhd_footer_check(const struct vhd_footer *f, char *err, size_t errlen)
{
    if (f->type != VHD_TYPE_FIXED && f->type != VHD_TYPE_DYNAMIC && f->type != VHD_TYPE_DIFF) {
        snprintf(err, errlen, "unknown disk type %u (2 fixed, 3 dynamic, 4 differencing)",
                 f->type);
        return -EINVAL;
    }
    if (f->version >> 16 != 1) {
        snprintf(err, errlen, "unsupported footer version %u.%u", f->version >> 16,
                 f->version & 0xffff);
        return -EINVAL;
    }
    if (f->type == VHD_TYPE_FIXED && f->data_offset != VHD_NO_OFFSET &&
        f->data_offset != 0) {
        /* qemu writes ffff...; some tools 0 */
        snprintf(err, errlen, "fixed disk with a data offset (%llu)",
                 (unsigned long long)f->data_offset);
        return -EINVAL;
    }
    if (f->type != VHD_TYPE_FIXED &&
        (f->data_offset == VHD_NO_OFFSET || f->data_offset % VHD_SECTOR)) {
        snprintf(err, errlen, "dynamic header offset %llu is not a sector offset",
                 (unsigned long long)f->data_offset);
        return -EINVAL;
    }
    uint64_t size = vhd_disk_size(f);
    if (size > VHD_MAX_SIZE) {
        snprintf(err, errlen, "disk size %llu is too large (at most 2040 GiB)",
                 (unsigned long long)size);
        return -EFBIG;
    }
    return 0;
}

void vhd_footer_encode(const struct vhd_footer *f, uint8_t b[VHD_FOOTER_SIZE])
{
    memset(b, 0, VHD_FOOTER_SIZE);
    memcpy(b, VHD_FOOTER_COOKIE, 8);
    be32_put(b + 8, f->features);
    be32_put(b + 12, f->version);
    be64_put(b + 16, f->data_offset);
    be32_put(b + 24, f->timestamp);
    memcpy(b + 28, f->creator_app, 4);
    be32_put(b + 32, f->creator_version);
    be32_put(b + 36, f->creator_os);
    be64_put(b + 40, f->orig_size);
    be64_put(b + 48, f->current_size);
    be16_put(b + 56, f->cyls);
    b[58] = f->heads;
    b[59] = f->secs;
    be32_put(b + 60, f->type);
    memcpy(b + 68, f->uuid, 16);
    b[84] = f->saved_state;
    be32_put(b + 64, vhd_checksum(b, VHD_FOOTER_SIZE, 64));
}

bool vhd_creator_uses_size(const char app[4])
{
    static const char known[][4] = { "win ", "qem2", "d2v ", "CTXS", { 't', 'a', 'p', 0 } };

    for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++)
        if (memcmp(app, known[i], 4) == 0)
            return true;
    return false;
}

uint64_t vhd_disk_size(const struct vhd_footer *f)
{
    uint64_t chs = (uint64_t)f->cyls * f->heads * f->secs;

    if (vhd_creator_uses_size(f->creator_app) || chs == VHD_MAX_GEOMETRY)
        return f->current_size / VHD_SECTOR * VHD_SECTOR;
    return chs * VHD_SECTOR;
}

void vhd_geometry(uint64_t sectors, uint16_t *cyls, uint8_t *heads, uint8_t *secs)
{
    uint64_t cth;
    unsigned h, s;

    if (sectors > VHD_MAX_GEOMETRY)
        sectors = VHD_MAX_GEOMETRY;
    if (sectors >= UINT64_C(65535) * 16 * 63) {
        s = 255;
        h = 16;
        cth = sectors / s;
    } else {
        s = 17;
        cth = sectors / s;
        h = (unsigned)((cth + 1023) / 1024);
        if (h < 4)
            h = 4;
        if (cth >= (uint64_t)h * 1024 || h > 16) {
            s = 31;
            h = 16;
            cth = sectors / s;
        }
        if (cth >= (uint64_t)h * 1024) {
            s = 63;
            h = 16;
            cth = sectors / s;
        }
    }
    *cyls = (uint16_t)(cth / h);
    *heads = (uint8_t)h;
    *secs = (uint8_t)s;
}

int vhd_create_geometry(uint64_t bytes, bool force_size, uint64_t *size,
                        uint16_t *cyls, uint8_t *heads, uint8_t *secs)
{
    uint64_t total = bytes / VHD_SECTOR + (bytes % VHD_SECTOR != 0);

    if (total > VHD_MAX_SECTORS)
        return -EFBIG;
    if (force_size) {
        *cyls = 65535;
        *heads = 16;
        *secs = 255;
        *size = total * VHD_SECTOR;
        return 0;
    }
    /* round up to whole geometry: try one sector more at a time (at most
     * one cylinder of 16 x 255 sectors) */
    uint64_t prod = 0;
    *cyls = 0, *heads = 0, *secs = 0;
    for (uint64_t i = 0; total > prod && prod != VHD_MAX_GEOMETRY; i++) {
        vhd_geometry(total + i, cyls, heads, secs);
        prod = (uint64_t)*cyls * *heads * *secs;
    }
    if (prod != VHD_MAX_GEOMETRY)
        total = prod;
    else
        total = bytes / VHD_SECTOR;     /* qemu: the size as given, whole sectors */
    *size = total * VHD_SECTOR;
    return 0;
}
