/* qcow2 persistent dirty bitmaps: the content of one bitmap (its table and
 * data clusters), read into memory and written back.
 *
 * The content is the bitmap serialized as the spec says: bit i (byte i/8,
 * bit i%8 from the least significant) covers guest bytes [i*g, (i+1)*g);
 * the table's entry k names the cluster holding bytes [k*cs, (k+1)*cs) of
 * it, or none (offset 0: all zeros, or all ones with bit 0 set).  Each
 * entry is validated before it drives a read: reserved bits clear, the
 * cluster aligned, inside the file, and not in the image's metadata. */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "formats/qcow2/bitmap_int.h"
#include "io/bfile.h"
#include "util/diag.h"
#include "util/endian.h"

#define BME_RESERVED 0xff000000000001feULL   /* bits 1..8 and 56..63 */

#define FAIL(q, err, off, ...) \
    diag_fail((q)->bd.diag, err, (q)->bd.filename, off, __VA_ARGS__)

uint64_t qcow2_bitmap_bytes(uint64_t size, unsigned gbits)
{
    uint64_t bits = (size >> gbits) + ((size & ((UINT64_C(1) << gbits) - 1)) != 0);
    return (bits + 7) / 8;
}

uint32_t qcow2_bitmap_table_size(uint64_t size, unsigned gbits, uint32_t cluster_size)
{
    uint64_t b = qcow2_bitmap_bytes(size, gbits);
    uint64_t n = b / cluster_size + (b % cluster_size != 0);
    return n ? (uint32_t)n : 1;
}

int qcow2_bitmap_read_table(struct qcow2 *q, const struct qcow2_bitmap *e, uint64_t **out)
{
    const struct qcow2_header *h = &q->h;
    uint64_t bytes = (uint64_t)e->table_size * 8;
    uint64_t *t;
    int r;

    *out = NULL;
    /* open checked: table_size is bounded and the table lies in the file */
    if (!(t = malloc(bytes)))
        return FAIL(q, -ENOMEM, -1, "out of memory");
    if ((r = bfile_pread(q->bd.file, t, bytes, e->table_offset)) < 0) {
        free(t);
        return r;
    }
    for (uint32_t k = 0; k < e->table_size; k++) {
        uint64_t v = be64_get((const uint8_t *)&t[k]);
        uint64_t off = v & QCOW2_BME_TABLE_OFFSET_MASK;
        int64_t where = (int64_t)(e->table_offset + 8 * (uint64_t)k);
        struct metarange hit;
        t[k] = v;
        if ((v & BME_RESERVED) || (off && (v & 1)))
            r = FAIL(q, -EINVAL, where, "bitmap '%s': table entry %" PRIu32 " (0x%016"
                     PRIx64 ") has reserved bits set", e->name, k, v);
        else if (off & (h->cluster_size - 1))
            r = FAIL(q, -EINVAL, where, "bitmap '%s': table entry %" PRIu32 " names "
                     "offset 0x%" PRIx64 ", not a cluster boundary", e->name, k, off);
        else if (off && (off >= q->file_size || h->cluster_size > q->file_size - off))
            r = FAIL(q, -EINVAL, where, "bitmap '%s': data cluster %" PRIu32 " at offset %"
                     PRIu64 " is past the end of the file", e->name, k, off);
        else if (off && qcow2_meta_find(q, off, h->cluster_size, &hit))
            r = FAIL(q, -EINVAL, where, "bitmap '%s': data cluster %" PRIu32 " at offset %"
                     PRIu64 " is metadata (%s at offset %" PRIu64 ")", e->name, k, off,
                     hit.what, hit.off);
        if (r < 0) {
            free(t);
            return r;
        }
    }
    *out = t;
    return 0;
}

int qcow2_bitmap_load(struct qcow2 *q, const struct qcow2_bitmap *e, uint8_t **data,
                      uint64_t *len)
{
    const struct qcow2_header *h = &q->h;
    uint64_t bytes = qcow2_bitmap_bytes(h->size, e->granularity_bits);
    uint64_t cs = h->cluster_size, *t = NULL;
    uint8_t *buf = NULL;
    int r;

    *data = NULL;
    *len = 0;
    if (bytes > QCOW2_BME_MAX_PHYS)
        return FAIL(q, -EINVAL, (int64_t)e->entry_offset, "bitmap '%s' would take %" PRIu64
                    " bytes (max %u)", e->name, bytes, QCOW2_BME_MAX_PHYS);
    if ((r = qcow2_bitmap_read_table(q, e, &t)) < 0)
        return r;
    if (!(buf = calloc(1, bytes ? bytes : 1))) {
        free(t);
        return FAIL(q, -ENOMEM, -1, "out of memory");
    }
    /* the directory check made the table cover the whole bitmap */
    for (uint64_t k = 0; k * cs < bytes && r == 0; k++) {
        uint64_t n = bytes - k * cs < cs ? bytes - k * cs : cs;
        uint64_t off = t[k] & QCOW2_BME_TABLE_OFFSET_MASK;
        if (off)
            r = bfile_pread(q->bd.file, buf + k * cs, n, off);
        else if (t[k] & 1)
            memset(buf + k * cs, 0xff, n);
    }
    free(t);
    if (r < 0) {
        free(buf);
        return r;
    }
    qcow2_bitmap_trim(buf, h->size, e->granularity_bits);
    *data = buf;
    *len = bytes;
    return 0;
}

void qcow2_bitmap_trim(uint8_t *data, uint64_t size, unsigned gbits)
{
    uint64_t bytes = qcow2_bitmap_bytes(size, gbits);
    uint64_t bits = (size >> gbits) + ((size & ((UINT64_C(1) << gbits) - 1)) != 0);

    if (bits % 8)
        data[bytes - 1] &= (uint8_t)((1u << (bits % 8)) - 1);
}

void qcow2_bitmap_mark(uint8_t *data, uint64_t size, unsigned gbits, uint64_t off,
                       uint64_t len)
{
    if (!len || off >= size)
        return;
    if (len > size - off)
        len = size - off;
    uint64_t first = off >> gbits, last = (off + len - 1) >> gbits;
    /* whole bytes in the middle with memset, the ends bit by bit */
    while (first <= last && first % 8) {
        data[first / 8] |= (uint8_t)(1u << (first % 8));
        first++;
    }
    if (first > last)
        return;
    uint64_t whole = (last + 1 - first) / 8;
    memset(data + first / 8, 0xff, whole);
    for (first += whole * 8; first <= last; first++)
        data[first / 8] |= (uint8_t)(1u << (first % 8));
}

void qcow2_bitmap_merge(uint8_t *dst, unsigned dbits, const uint8_t *src, unsigned sbits,
                        uint64_t size)
{
    uint64_t bytes = qcow2_bitmap_bytes(size, sbits);

    if (dbits == sbits) {
        for (uint64_t i = 0; i < bytes; i++)
            dst[i] |= src[i];
        return;
    }
    /* different granularities: every dirty range of the source, as bytes */
    for (uint64_t i = 0; i < bytes; i++) {
        if (!src[i])
            continue;
        for (unsigned b = 0; b < 8; b++)
            if (src[i] >> b & 1)
                qcow2_bitmap_mark(dst, size, dbits, (i * 8 + b) << sbits,
                                  UINT64_C(1) << sbits);
    }
}
