/* Pure decoders of the binary VMDK structures: the hosted sparse header
 * (KDMV), the ESX 3 COWD header and streamOptimized markers. */
#include <errno.h>
#include <string.h>

#include "formats/vmdk/format.h"
#include "util/diag.h"
#include "util/endian.h"

static bool is_pow2(uint64_t v)
{
    return v && !(v & (v - 1));
}

/* Grain tables needed to cover `capacity` sectors. */
static uint64_t tables_needed(uint64_t capacity, uint64_t grain, uint64_t gtes)
{
    uint64_t span = grain * gtes;
    return capacity / span + (capacity % span != 0);
}

int vmdk4_header_decode(const uint8_t *b, size_t len, struct vmdk4_header *h,
                        struct diag *d, const char *file, int64_t off)
{
    memset(h, 0, sizeof(*h));
    if (len < VMDK4_HEADER_SIZE)
        return diag_fail(d, -EIO, file, off, "sparse extent header is truncated (%zu of 512 bytes)",
                         len);
    if (le32_get(b) != VMDK4_MAGIC)
        return diag_fail(d, -EINVAL, file, off, "not a VMDK sparse extent (no KDMV magic)");
    h->version = le32_get(b + 4);
    h->flags = le32_get(b + 8);
    h->capacity = le64_get(b + 12);
    uint64_t grain = le64_get(b + 20);
    h->desc_offset = le64_get(b + 28);
    h->desc_sectors = le64_get(b + 36);
    h->gtes = le32_get(b + 44);
    h->rgd_offset = le64_get(b + 48);
    h->gd_offset = le64_get(b + 56);
    h->overhead = le64_get(b + 64);
    h->dirty = b[72] != 0;
    h->compress = le16_get(b + 77);

    if (h->version < 1 || h->version > 3)
        return diag_fail(d, -ENOTSUP, file, off + 4,
                         "sparse extent version %u is not supported (1..3)", h->version);
    if ((h->flags & VMDK4_FLAG_NL_DETECT) &&
        (b[73] != '\n' || b[74] != ' ' || b[75] != '\r' || b[76] != '\n'))
        return diag_fail(d, -EINVAL, file, off + 73,
                         "header line-end check bytes are damaged (was the file "
                         "transferred in text mode?)");
    uint32_t unknown = h->flags & VMDK4_INCOMPAT_MASK &
                       ~(VMDK4_FLAG_COMPRESSED | VMDK4_FLAG_MARKERS);
    if (unknown)
        return diag_fail(d, -ENOTSUP, file, off + 8,
                         "header has unknown incompatible flags 0x%08x", unknown);
    if (!is_pow2(grain) || grain > VMDK_MAX_GRAIN_SECTORS)
        return diag_fail(d, -EINVAL, file, off + 20,
                         "grain size of %llu sectors is invalid (a power of two, 1..%u)",
                         (unsigned long long)grain, VMDK_MAX_GRAIN_SECTORS);
    h->grain_sectors = (uint32_t)grain;
    if (h->gtes == 0 || h->gtes > VMDK_MAX_GTES)
        return diag_fail(d, -EINVAL, file, off + 44,
                         "%u entries per grain table is out of range 1..%u", h->gtes,
                         VMDK_MAX_GTES);
    if (h->capacity > VMDK_MAX_SECTORS)
        return diag_fail(d, -EINVAL, file, off + 12,
                         "capacity of %llu sectors is too large (max %llu)",
                         (unsigned long long)h->capacity,
                         (unsigned long long)VMDK_MAX_SECTORS);
    uint64_t tables = tables_needed(h->capacity, grain, h->gtes);
    if (tables > VMDK_MAX_GD_ENTRIES)
        return diag_fail(d, -EINVAL, file, off + 12,
                         "capacity of %llu sectors needs %llu grain tables (max %u): "
                         "grain size or grain table size too small",
                         (unsigned long long)h->capacity, (unsigned long long)tables,
                         VMDK_MAX_GD_ENTRIES);
    h->gd_entries = (uint32_t)tables;
    if (h->compress != VMDK4_COMPRESS_NONE && h->compress != VMDK4_COMPRESS_DEFLATE)
        return diag_fail(d, -ENOTSUP, file, off + 77,
                         "compression algorithm %u is not supported (0 none, 1 deflate)",
                         h->compress);
    if ((h->flags & VMDK4_FLAG_COMPRESSED) && h->compress != VMDK4_COMPRESS_DEFLATE)
        return diag_fail(d, -EINVAL, file, off + 77,
                         "header says grains are compressed but names no algorithm");
    h->compressed = h->compress == VMDK4_COMPRESS_DEFLATE;
    h->markers = (h->flags & VMDK4_FLAG_MARKERS) != 0;
    h->zero_grain = (h->flags & VMDK4_FLAG_ZERO_GRAIN) != 0;
    if (h->desc_offset) {
        if (h->desc_sectors == 0 || h->desc_sectors > VMDK_MAX_DESC_BYTES / VMDK_SECTOR)
            return diag_fail(d, -EINVAL, file, off + 36,
                             "embedded descriptor of %llu sectors is out of range 1..%u",
                             (unsigned long long)h->desc_sectors,
                             VMDK_MAX_DESC_BYTES / VMDK_SECTOR);
        if (h->desc_offset > VMDK_MAX_SECTORS)
            return diag_fail(d, -EINVAL, file, off + 28,
                             "embedded descriptor offset %llu sectors is out of range",
                             (unsigned long long)h->desc_offset);
    }
    if (h->gd_offset != VMDK4_GD_AT_END && (h->gd_offset == 0 || h->gd_offset > VMDK_MAX_SECTORS))
        return diag_fail(d, -EINVAL, file, off + 56,
                         "grain directory offset %llu sectors is invalid",
                         (unsigned long long)h->gd_offset);
    /* (the copy is read only when the primary is damaged, but its offset
     * in bytes must not wrap then either) */
    if ((h->flags & VMDK4_FLAG_RGD) && h->rgd_offset > VMDK_MAX_SECTORS)
        return diag_fail(d, -EINVAL, file, off + 48,
                         "redundant grain directory offset %llu sectors is invalid",
                         (unsigned long long)h->rgd_offset);
    if (h->overhead > VMDK_MAX_SECTORS)
        return diag_fail(d, -EINVAL, file, off + 64,
                         "overhead of %llu sectors is out of range",
                         (unsigned long long)h->overhead);
    return 0;
}

int cowd_header_decode(const uint8_t *b, size_t len, struct cowd_header *h,
                       struct diag *d, const char *file, int64_t off)
{
    memset(h, 0, sizeof(*h));
    if (len < COWD_HEADER_SIZE)
        return diag_fail(d, -EIO, file, off, "COWD header is truncated (%zu of 2048 bytes)", len);
    if (le32_get(b) != COWD_MAGIC)
        return diag_fail(d, -EINVAL, file, off, "not a COWD sparse extent (no COWD magic)");
    h->version = le32_get(b + 4);
    h->flags = le32_get(b + 8);
    h->capacity = le32_get(b + 12);
    h->grain_sectors = le32_get(b + 16);
    h->gd_offset = le32_get(b + 20);
    h->gd_entries = le32_get(b + 24);
    h->next_free = le32_get(b + 28);
    h->dirty = le32_get(b + 1648) != 0;
    if (h->version != 1)
        return diag_fail(d, -ENOTSUP, file, off + 4, "COWD version %u is not supported (1)",
                         h->version);
    if (!is_pow2(h->grain_sectors) || h->grain_sectors > VMDK_MAX_GRAIN_SECTORS)
        return diag_fail(d, -EINVAL, file, off + 16,
                         "grain size of %u sectors is invalid (a power of two, 1..%u)",
                         h->grain_sectors, VMDK_MAX_GRAIN_SECTORS);
    uint64_t tables = tables_needed(h->capacity, h->grain_sectors, COWD_GTES);
    if (h->gd_entries < tables)
        return diag_fail(d, -EINVAL, file, off + 24,
                         "grain directory of %u entries is too small for %u sectors "
                         "(needs %llu)", h->gd_entries, h->capacity,
                         (unsigned long long)tables);
    if (h->gd_entries > VMDK_MAX_GD_ENTRIES)
        return diag_fail(d, -EINVAL, file, off + 24,
                         "grain directory of %u entries is too large (max %u)",
                         h->gd_entries, VMDK_MAX_GD_ENTRIES);
    if (h->gd_offset == 0 && h->capacity)
        return diag_fail(d, -EINVAL, file, off + 20, "grain directory offset is 0");
    return 0;
}

int vmdk_marker_decode(const uint8_t *b, size_t len, uint32_t max_csize,
                       struct vmdk_marker *m, struct diag *d, const char *file,
                       int64_t off)
{
    memset(m, 0, sizeof(*m));
    if (len < 16)
        return diag_fail(d, -EIO, file, off, "marker is truncated (%zu bytes)", len);
    m->value = le64_get(b);
    m->size = le32_get(b + 8);
    if (m->size) {
        m->is_grain = true;
        if (m->size > max_csize)
            return diag_fail(d, -EINVAL, file, off + 8,
                             "compressed grain for LBA %llu claims %u bytes (max %u)",
                             (unsigned long long)m->value, m->size, max_csize);
        return 0;
    }
    m->type = le32_get(b + 12);
    if (m->type > VMDK_MARKER_PROGRESS)
        return diag_fail(d, -EINVAL, file, off + 12, "unknown marker type %u", m->type);
    if (m->value > VMDK_MAX_SECTORS)
        return diag_fail(d, -EINVAL, file, off,
                         "marker of type %u is followed by %llu sectors (out of range)",
                         m->type, (unsigned long long)m->value);
    return 0;
}
