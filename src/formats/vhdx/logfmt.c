/* VHDX: BAT entries and the log's structures (entry header, data and zero
 * descriptors, data sectors): decode, check, encode. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "codec/crc32c.h"
#include "formats/vhdx/format.h"
#include "util/endian.h"

/* --- BAT ----------------------------------------------------------------------- */

int vhdx_bat_entry_decode(uint64_t raw, bool sb, struct vhdx_bat_entry *e, char *err,
                          size_t errlen)
{
    e->state = (unsigned)(raw & VHDX_BAT_STATE_MASK);
    e->off = raw >> VHDX_BAT_OFFSET_SHIFT << VHDX_BAT_OFFSET_SHIFT;
    if (raw & VHDX_BAT_RESERVED_MASK) {
        snprintf(err, errlen, "BAT entry %016llx has reserved bits set",
                 (unsigned long long)raw);
        return -EINVAL;
    }
    bool in_file;
    if (sb) {
        if (e->state != VHDX_SB_NOT_PRESENT && e->state != VHDX_SB_PRESENT) {
            snprintf(err, errlen, "sector bitmap BAT entry has unknown state %u", e->state);
            return -EINVAL;
        }
        in_file = e->state == VHDX_SB_PRESENT;
    } else {
        if (e->state == 4 || e->state == 5) {
            snprintf(err, errlen, "payload BAT entry has unknown state %u", e->state);
            return -EINVAL;
        }
        in_file = e->state == VHDX_PAYLOAD_FULLY_PRESENT ||
                  e->state == VHDX_PAYLOAD_PARTIALLY_PRESENT;
    }
    if (in_file && e->off < VHDX_HEADER_AREA) {
        snprintf(err, errlen, "%s BAT entry (state %u) points at %llu, inside the first MiB",
                 sb ? "sector bitmap" : "payload", e->state, (unsigned long long)e->off);
        return -EINVAL;
    }
    return 0;
}

uint64_t vhdx_bat_entries(uint64_t disk_size, uint32_t block_size, uint32_t logical_sector,
                          bool has_parent)
{
    uint64_t ratio = vhdx_chunk_ratio(block_size, logical_sector);
    uint64_t blocks = vhdx_data_blocks(disk_size, block_size);

    if (!ratio || !blocks)
        return 0;
    if (has_parent) {
        uint64_t chunks = blocks / ratio + (blocks % ratio != 0);
        return chunks * (ratio + 1);
    }
    return blocks + (blocks - 1) / ratio;
}

/* --- log entry header ------------------------------------------------------------ */

int vhdx_log_hdr_decode(const uint8_t *b, uint32_t log_length, struct vhdx_log_hdr *h,
                        char *err, size_t errlen)
{
    memset(h, 0, sizeof(*h));
    if (le32_get(b) != VHDX_LOG_ENTRY_SIG) {
        snprintf(err, errlen, "no log entry signature ('loge')");
        return -EINVAL;
    }
    h->checksum = le32_get(b + 4);
    h->entry_length = le32_get(b + 8);
    h->tail = le32_get(b + 12);
    h->seq = le64_get(b + 16);
    h->desc_count = le32_get(b + 24);
    memcpy(h->log_guid, b + 32, 16);
    h->flushed_file_offset = le64_get(b + 48);
    h->last_file_offset = le64_get(b + 56);
    if (!h->entry_length || h->entry_length % VHDX_LOG_SECTOR || h->entry_length > log_length) {
        snprintf(err, errlen, "log entry length %u is not a multiple of 4 KiB from 4 KiB to "
                 "the log's %u bytes", h->entry_length, log_length);
        return -EINVAL;
    }
    if (h->tail % VHDX_LOG_SECTOR || h->tail >= log_length) {
        snprintf(err, errlen, "log entry tail %u is not on a 4 KiB boundary inside the log",
                 h->tail);
        return -EINVAL;
    }
    if (h->seq == 0) {
        snprintf(err, errlen, "log entry sequence number 0");
        return -EINVAL;
    }
    if (vhdx_log_desc_sectors(h->desc_count) * VHDX_LOG_SECTOR > h->entry_length) {
        snprintf(err, errlen, "log entry of %u bytes cannot hold %u descriptors",
                 h->entry_length, h->desc_count);
        return -EINVAL;
    }
    if (h->flushed_file_offset % VHDX_ALIGN || h->last_file_offset % VHDX_ALIGN ||
        h->flushed_file_offset > h->last_file_offset) {
        snprintf(err, errlen, "log entry file sizes (flushed %llu, last %llu) are not on "
                 "1 MiB boundaries in order", (unsigned long long)h->flushed_file_offset,
                 (unsigned long long)h->last_file_offset);
        return -EINVAL;
    }
    return 0;
}

void vhdx_log_hdr_encode(const struct vhdx_log_hdr *h, uint8_t *b)
{
    memset(b, 0, VHDX_LOG_HDR_SIZE);
    le32_put(b, VHDX_LOG_ENTRY_SIG);
    le32_put(b + 4, h->checksum);
    le32_put(b + 8, h->entry_length);
    le32_put(b + 12, h->tail);
    le64_put(b + 16, h->seq);
    le32_put(b + 24, h->desc_count);
    memcpy(b + 32, h->log_guid, 16);
    le64_put(b + 48, h->flushed_file_offset);
    le64_put(b + 56, h->last_file_offset);
}

uint32_t vhdx_log_checksum(const uint8_t *entry, size_t len)
{
    uint32_t c = crc32c(0, entry, 4);

    c = crc32c(c, "\0\0\0\0", 4);
    return crc32c(c, entry + 8, len - 8);
}

void vhdx_log_set_checksum(uint8_t *entry, size_t len)
{
    le32_put(entry + 4, vhdx_log_checksum(entry, len));
}

/* --- descriptors and data sectors --------------------------------------------------- */

int vhdx_log_desc_decode(const uint8_t *b, uint64_t seq, struct vhdx_log_desc *d,
                         char *err, size_t errlen)
{
    uint32_t sig = le32_get(b);

    memset(d, 0, sizeof(*d));
    if (sig == VHDX_LOG_ZERO_SIG) {
        d->zero = true;
        d->zero_length = le64_get(b + 8);
    } else if (sig == VHDX_LOG_DESC_SIG) {
        d->trailing = le32_get(b + 4);
        d->leading = le64_get(b + 8);
    } else {
        snprintf(err, errlen, "log descriptor has no signature ('desc' or 'zero')");
        return -EINVAL;
    }
    d->file_offset = le64_get(b + 16);
    d->seq = le64_get(b + 24);
    if (d->seq != seq) {
        snprintf(err, errlen, "log descriptor sequence number %llu in entry %llu",
                 (unsigned long long)d->seq, (unsigned long long)seq);
        return -EINVAL;
    }
    if (d->file_offset % VHDX_LOG_SECTOR || d->file_offset < VHDX_REGION1_OFF) {
        snprintf(err, errlen, "log descriptor writes at %llu, not a 4 KiB boundary past the "
                 "headers", (unsigned long long)d->file_offset);
        return -EINVAL;
    }
    if (d->zero && (!d->zero_length || d->zero_length % VHDX_LOG_SECTOR ||
                    d->zero_length > UINT64_MAX - d->file_offset)) {
        snprintf(err, errlen, "log zero descriptor of %llu bytes is not a non-empty "
                 "multiple of 4 KiB", (unsigned long long)d->zero_length);
        return -EINVAL;
    }
    return 0;
}

void vhdx_log_desc_encode(const struct vhdx_log_desc *d, uint8_t *b)
{
    memset(b, 0, VHDX_LOG_DESC_SIZE);
    if (d->zero) {
        le32_put(b, VHDX_LOG_ZERO_SIG);
        le64_put(b + 8, d->zero_length);
    } else {
        le32_put(b, VHDX_LOG_DESC_SIG);
        le32_put(b + 4, d->trailing);
        le64_put(b + 8, d->leading);
    }
    le64_put(b + 16, d->file_offset);
    le64_put(b + 24, d->seq);
}

int vhdx_log_data_decode(const uint8_t *b, const struct vhdx_log_desc *d, uint64_t seq,
                         uint8_t *out, char *err, size_t errlen)
{
    if (le32_get(b) != VHDX_LOG_DATA_SIG) {
        snprintf(err, errlen, "log data sector has no signature ('data')");
        return -EINVAL;
    }
    uint64_t s = (uint64_t)le32_get(b + 4) << 32 | le32_get(b + 4092);
    if (s != seq) {
        snprintf(err, errlen, "log data sector sequence number %llu in entry %llu",
                 (unsigned long long)s, (unsigned long long)seq);
        return -EINVAL;
    }
    le64_put(out, d->leading);
    memcpy(out + VHDX_LOG_LEADING, b + 8, VHDX_LOG_DATA_PAYLOAD);
    le32_put(out + VHDX_LOG_SECTOR - VHDX_LOG_TRAILING, d->trailing);
    return 0;
}

void vhdx_log_data_encode(const uint8_t *sector, uint64_t seq, struct vhdx_log_desc *d,
                          uint8_t *b)
{
    d->zero = false;
    d->leading = le64_get(sector);
    d->trailing = le32_get(sector + VHDX_LOG_SECTOR - VHDX_LOG_TRAILING);
    d->seq = seq;
    le32_put(b, VHDX_LOG_DATA_SIG);
    le32_put(b + 4, (uint32_t)(seq >> 32));
    memcpy(b + 8, sector + VHDX_LOG_LEADING, VHDX_LOG_DATA_PAYLOAD);
    le32_put(b + 4092, (uint32_t)seq);
}
