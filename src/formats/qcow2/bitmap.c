/* qcow2 persistent dirty bitmaps: the directory only (names, granularity,
 * flags for `info`; tables for `check` and `measure`).  Bitmap contents are
 * not needed to read an image, but the directory is read and validated at
 * open, as qemu does: an image whose bitmaps qemu refuses does not open. */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "formats/qcow2/read_int.h"
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

/* One directory entry's fields against the spec's bounds and qemu's (so
 * that what qemu refuses to open is refused here too). */
static int check_entry(const struct qcow2_header *h, const struct qcow2_bitmap *e,
                       uint32_t i, uint32_t extra, uint16_t name_size, struct diag *d,
                       const char *path)
{
    uint64_t where = e->entry_offset;
    uint64_t vsize = h->size & ~(uint64_t)511;   /* qemu's length: whole sectors */

#define BADE(off, ...) diag_fail(d, -EINVAL, path, (int64_t)(where + (off)), __VA_ARGS__)
    if (e->table_offset == 0 || e->table_offset & (h->cluster_size - 1))
        return BADE(0, "bitmap %" PRIu32 ": table offset 0x%" PRIx64 " is not a valid "
                    "cluster offset", i, e->table_offset);
    if (e->table_size == 0 || e->table_size > QCOW2_BME_MAX_TABLE_ENTRIES)
        return BADE(8, "bitmap %" PRIu32 ": table of %" PRIu32 " entries is out of range "
                    "1..%u", i, e->table_size, QCOW2_BME_MAX_TABLE_ENTRIES);
    if (e->flags & ~(QCOW2_BME_IN_USE | QCOW2_BME_AUTO | QCOW2_BME_EXTRA_OK))
        return BADE(12, "bitmap %" PRIu32 " has reserved flags set (0x%08" PRIx32 ")", i,
                    e->flags);
    if (e->type != QCOW2_BME_TYPE_DIRTY)
        return BADE(16, "bitmap %" PRIu32 " has type %u (only 1, dirty tracking, is "
                    "defined)", i, e->type);
    if (e->granularity_bits < QCOW2_BME_MIN_GRANULARITY_BITS ||
        e->granularity_bits > QCOW2_BME_MAX_GRANULARITY_BITS)
        return BADE(17, "bitmap %" PRIu32 ": granularity_bits %u is out of range %d..%d",
                    i, e->granularity_bits, QCOW2_BME_MIN_GRANULARITY_BITS,
                    QCOW2_BME_MAX_GRANULARITY_BITS);
    if (name_size == 0 || name_size > QCOW2_BME_MAX_NAME)
        return BADE(18, "bitmap %" PRIu32 ": name size %u is out of range 1..%d", i,
                    name_size, QCOW2_BME_MAX_NAME);
    if (extra)
        return BADE(20, "bitmap %" PRIu32 " has %" PRIu32 " bytes of extra data (none "
                    "is defined)", i, extra);
    /* the bitmap's clusters: at most qemu's 512 MiB, and enough for the disk */
    uint64_t phys = (uint64_t)e->table_size * h->cluster_size;
    if (phys > QCOW2_BME_MAX_PHYS)
        return BADE(8, "bitmap %" PRIu32 ": %" PRIu32 " table entries name %" PRIu64
                    " bytes of bitmap (max %u)", i, e->table_size, phys,
                    QCOW2_BME_MAX_PHYS);
    /* phys * 8 <= 2^32 and granularity_bits <= 31: no overflow */
    if (vsize > (phys * 8) << e->granularity_bits)
        return BADE(8, "bitmap %" PRIu32 ": a table of %" PRIu32 " entries covers less "
                    "than the virtual size %" PRIu64 " at granularity %" PRIu64, i,
                    e->table_size, vsize, UINT64_C(1) << e->granularity_bits);
#undef BADE
    return 0;
}

static int cmp_name(const void *a, const void *b)
{
    return strcmp((*(const struct qcow2_bitmap *const *)a)->name,
                  (*(const struct qcow2_bitmap *const *)b)->name);
}

/* Names must be unique (sorted copies of pointers: n log n, not n^2). */
static int check_names(const struct qcow2_bitmap *b, uint32_t n, struct diag *d,
                       const char *path)
{
    const struct qcow2_bitmap **v = malloc((size_t)n * sizeof(*v));
    int r = 0;

    if (!v)
        return diag_fail(d, -ENOMEM, path, -1, "out of memory");
    for (uint32_t i = 0; i < n; i++)
        v[i] = &b[i];
    qsort(v, n, sizeof(*v), cmp_name);
    for (uint32_t i = 1; i < n && r == 0; i++)
        if (strcmp(v[i - 1]->name, v[i]->name) == 0)
            r = diag_fail(d, -EINVAL, path, (int64_t)v[i]->entry_offset,
                          "bitmap name '%s' appears twice in the bitmap directory",
                          v[i]->name);
    free(v);
    return r;
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
        if ((r = check_entry(h, e, i, extra, name_size, d, path)) < 0)
            break;
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
    if (r == 0)
        r = check_names(b, h->nb_bitmaps, d, path);
    if (r < 0) {
        qcow2_bitmaps_free(b, i < h->nb_bitmaps ? i + 1 : i);
        return r;
    }
    *out = b;
    return 0;
}

int qcow2_read_bitmaps(struct qcow2 *q)
{
    const struct qcow2_header *h = &q->h;
    struct bd *bd = &q->bd;

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
        r = qcow2_bitmaps_decode(h, buf, len, &q->bitmaps, bd->diag, bd->filename);
    free(buf);
    if (r < 0)
        return r;
    q->nbitmaps = h->nb_bitmaps;
    /* each table lies in the file (qemu cannot load one that does not): a
     * walk over it is bounded by the file, and one past the end is found
     * here in O(1), not entry by entry */
    for (uint32_t i = 0; i < q->nbitmaps; i++) {
        const struct qcow2_bitmap *e = &q->bitmaps[i];
        uint64_t bytes = (uint64_t)e->table_size * 8;
        if (e->table_offset >= q->file_size || bytes > q->file_size - e->table_offset)
            return diag_fail(bd->diag, -EINVAL, bd->filename, (int64_t)e->entry_offset,
                             "bitmap '%s': table (%" PRIu32 " entries at offset %" PRIu64
                             ") runs past the end of the file (%" PRIu64 " bytes)",
                             e->name, e->table_size, e->table_offset, q->file_size);
    }
    return 0;
}
