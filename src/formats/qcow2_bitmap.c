/* qcow2 persistent dirty bitmaps: the directory only (names, granularity,
 * flags for `info`; tables for `check`).  Bitmap contents are not needed
 * to read an image. */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "formats/qcow2_int.h"
#include "io/bfile.h"
#include "util/diag.h"
#include "util/endian.h"

#define BME_FIXED 24

void qcow2_bitmaps_free(struct qcow2_bitmap *b, uint32_t n)
{
    if (!b)
        return;
    for (uint32_t i = 0; i < n; i++)
        free(b[i].name);
    free(b);
}

int qcow2_bitmaps_decode(const struct qcow2_header *h, const uint8_t *buf, size_t len,
                         struct qcow2_bitmap **out, struct diag *d, const char *path)
{
    uint64_t base = h->bitmap_directory_offset;
    struct qcow2_bitmap *b = calloc(h->nb_bitmaps, sizeof(*b));
    size_t off = 0;
    uint32_t i;
    int r = 0;

    *out = NULL;
    if (!b)
        return diag_fail(d, -ENOMEM, path, -1, "out of memory");
    for (i = 0; i < h->nb_bitmaps; i++) {
        uint64_t where = base + off;
        if (len - off < BME_FIXED) {
            r = diag_fail(d, -EINVAL, path, (int64_t)where, "bitmap directory entry %"
                          PRIu32 " runs past the directory size (%zu)", i, len);
            break;
        }
        const uint8_t *p = buf + off;
        struct qcow2_bitmap *e = &b[i];
        uint16_t name_size = be16_get(p + 18);
        uint32_t extra = be32_get(p + 20);
        e->entry_offset = where;
        e->table_offset = be64_get(p);
        e->table_size = be32_get(p + 8);
        e->flags = be32_get(p + 12);
        e->type = p[16];
        e->granularity_bits = p[17];
        uint64_t n = ((uint64_t)BME_FIXED + extra + name_size + 7) & ~7ULL;
        if (n > len - off) {
            r = diag_fail(d, -EINVAL, path, (int64_t)where, "bitmap directory entry %"
                          PRIu32 " (%" PRIu64 " bytes) runs past the directory size (%zu)",
                          i, n, len);
            break;
        }
        if (e->table_offset & (h->cluster_size - 1) || e->table_offset >> 56) {
            r = diag_fail(d, -EINVAL, path, (int64_t)where, "bitmap %" PRIu32
                          ": table offset 0x%" PRIx64 " is not a valid cluster offset", i,
                          e->table_offset);
            break;
        }
        if (e->table_size > QCOW2_BME_MAX_TABLE_ENTRIES) {
            r = diag_fail(d, -EINVAL, path, (int64_t)where + 8, "bitmap %" PRIu32
                          ": table of %" PRIu32 " entries is too large (max %u)", i,
                          e->table_size, QCOW2_BME_MAX_TABLE_ENTRIES);
            break;
        }
        if (e->flags & ~(QCOW2_BME_IN_USE | QCOW2_BME_AUTO | QCOW2_BME_EXTRA_OK)) {
            r = diag_fail(d, -EINVAL, path, (int64_t)where + 12, "bitmap %" PRIu32
                          " has reserved flags set (0x%08" PRIx32 ")", i, e->flags);
            break;
        }
        if (e->granularity_bits > 63) {
            r = diag_fail(d, -EINVAL, path, (int64_t)where + 17, "bitmap %" PRIu32
                          ": granularity_bits %u is out of range 0..63", i,
                          e->granularity_bits);
            break;
        }
        if (name_size == 0 || name_size > 1023) {
            r = diag_fail(d, -EINVAL, path, (int64_t)where + 18, "bitmap %" PRIu32
                          ": name size %u is out of range 1..1023", i, name_size);
            break;
        }
        const uint8_t *name = p + BME_FIXED + extra;
        if (memchr(name, '\0', name_size)) {
            r = diag_fail(d, -EINVAL, path, (int64_t)where, "bitmap %" PRIu32
                          ": name contains a NUL byte", i);
            break;
        }
        e->name = malloc((size_t)name_size + 1);
        if (!e->name) {
            r = diag_fail(d, -ENOMEM, path, -1, "out of memory");
            break;
        }
        memcpy(e->name, name, name_size);
        e->name[name_size] = '\0';
        off += (size_t)n;
    }
    if (r == 0 && off != len)
        r = diag_fail(d, -EINVAL, path, (int64_t)(base + off), "bitmap directory has %zu "
                      "bytes after its %" PRIu32 " entries", len - off, h->nb_bitmaps);
    if (r < 0) {
        qcow2_bitmaps_free(b, i < h->nb_bitmaps ? i + 1 : i);
        return r;
    }
    *out = b;
    return 0;
}

int qcow2_read_bitmaps(struct qcow2 *q, struct qcow2_bitmap **out, uint32_t *n)
{
    const struct qcow2_header *h = &q->h;
    struct bd *bd = &q->bd;

    *out = NULL;
    *n = 0;
    if (!h->has_bitmaps_ext)
        return 0;
    uint64_t off = h->bitmap_directory_offset, len = h->bitmap_directory_size;
    if (off >= q->file_size || len > q->file_size - off)
        return diag_fail(bd->diag, -EINVAL, bd->filename, (int64_t)off,
                         "bitmap directory (%" PRIu64 " bytes at offset %" PRIu64
                         ") runs past the end of the file", len, off);
    uint8_t *buf = malloc(len);
    if (!buf)
        return diag_fail(bd->diag, -ENOMEM, bd->filename, -1, "out of memory");
    int r = bfile_pread(bd->file, buf, len, off);
    if (r == 0)
        r = qcow2_bitmaps_decode(h, buf, len, out, bd->diag, bd->filename);
    free(buf);
    if (r == 0)
        *n = h->nb_bitmaps;
    return r;
}
