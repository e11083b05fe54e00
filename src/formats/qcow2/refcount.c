/* qcow2 refcounts of an existing image: read them, change them in place,
 * and append clusters with their refcounts (for resize and check -r).
 *
 * The refcount table is held in memory (at most QCOW2_MAX_REFT_BYTES, as
 * the header decode bounds it), one refcount block is cached at a time and
 * written back when another is needed or on flush.  Every table entry is
 * validated before its block is read: reserved bits, alignment and the end
 * of the file.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "formats/qcow2/format.h"
#include "formats/qcow2/refcount.h"
#include "formats/qcow2/refcount_entry.h"
#include "io/bfile.h"
#include "util/diag.h"
#include "util/endian.h"

static uint64_t div_up(uint64_t a, uint64_t b)
{
    return a / b + (a % b != 0);
}

int qcow2_rc_open(struct qcow2_rc *rc, struct qcow2 *q, struct diag *d)
{
    const struct qcow2_header *h = &q->h;
    struct bd *bd = &q->bd;
    uint64_t bytes = (uint64_t)h->refcount_table_clusters << h->cluster_bits;

    memset(rc, 0, sizeof(*rc));
    rc->f = bd->file;
    rc->d = d;
    rc->path = bd->filename;
    rc->cbits = h->cluster_bits;
    rc->cs = h->cluster_size;
    rc->order = h->refcount_order;
    rc->per_block = (rc->cs * 8) >> rc->order;
    rc->max = qcow2_rc_max(rc->order);
    rc->file_size = rc->f->size;
    rc->table_off = h->refcount_table_offset;
    rc->table_clusters = h->refcount_table_clusters;
    rc->table_len = bytes / 8;
    if (rc->table_off >= rc->file_size || bytes > rc->file_size - rc->table_off)
        return diag_fail(rc->d, -EINVAL, rc->path, (int64_t)rc->table_off,
                         "refcount table (%" PRIu64 " bytes at offset %" PRIu64
                         ") runs past the end of the file (%" PRIu64 " bytes)",
                         bytes, rc->table_off, rc->file_size);
    rc->table = malloc(bytes);
    rc->blk = malloc(rc->cs);
    if (!rc->table || !rc->blk) {
        qcow2_rc_close(rc);
        return diag_fail(rc->d, -ENOMEM, rc->path, -1, "out of memory");
    }
    int r = bfile_pread(rc->f, rc->table, bytes, rc->table_off);
    if (r < 0) {
        qcow2_rc_close(rc);
        return r;
    }
    for (uint64_t i = 0; i < rc->table_len; i++)
        rc->table[i] = be64_get((const uint8_t *)&rc->table[i]);
    return 0;
}

void qcow2_rc_close(struct qcow2_rc *rc)
{
    free(rc->table);
    free(rc->blk);
    rc->table = NULL;
    rc->blk = NULL;
}

int qcow2_rc_flush(struct qcow2_rc *rc)
{
    if (!rc->blk_dirty)
        return 0;
    int r = bfile_pwrite(rc->f, rc->blk, rc->cs, rc->blk_off);
    if (r == 0)
        rc->blk_dirty = false;
    return r;
}

/* The offset of refcount block `idx` (0: none), validated. */
static int block_offset(struct qcow2_rc *rc, uint64_t idx, uint64_t *off)
{
    *off = 0;
    if (idx >= rc->table_len)
        return 0;
    uint64_t e = rc->table[idx];
    uint64_t where = rc->table_off + idx * 8;
    if (e & QCOW2_REFT_RESERVED)
        return diag_fail(rc->d, -EINVAL, rc->path, (int64_t)where,
                         "refcount table entry %" PRIu64 " (0x%" PRIx64 ") has reserved "
                         "bits set", idx, e);
    *off = e & QCOW2_REFT_OFFSET_MASK;
    if (*off & (rc->cs - 1))
        return diag_fail(rc->d, -EINVAL, rc->path, (int64_t)where,
                         "refcount block %" PRIu64 " at offset %" PRIu64 " is not "
                         "aligned to the cluster size", idx, *off);
    if (*off && (*off >= rc->file_size || rc->cs > rc->file_size - *off))
        return diag_fail(rc->d, -EINVAL, rc->path, (int64_t)where,
                         "refcount block %" PRIu64 " at offset %" PRIu64 " is past the "
                         "end of the file (%" PRIu64 " bytes)", idx, *off, rc->file_size);
    return 0;
}

/* Make the cache hold the block at `off`. */
static int load_block(struct qcow2_rc *rc, uint64_t off)
{
    int r;

    if (rc->blk_off == off)
        return 0;
    if ((r = qcow2_rc_flush(rc)) < 0)
        return r;
    rc->blk_off = 0;
    if ((r = bfile_pread(rc->f, rc->blk, rc->cs, off)) < 0)
        return r;
    rc->blk_off = off;
    return 0;
}

bool qcow2_rc_has_block(const struct qcow2_rc *rc, uint64_t cluster)
{
    uint64_t i = cluster / rc->per_block;

    return i < rc->table_len && rc->table[i] != 0;
}

int qcow2_rc_get(struct qcow2_rc *rc, uint64_t cluster, uint64_t *v)
{
    uint64_t off;
    int r = block_offset(rc, cluster / rc->per_block, &off);

    *v = 0;
    if (r < 0 || off == 0)
        return r;
    if ((r = load_block(rc, off)) < 0)
        return r;
    *v = qcow2_rc_entry_get(rc->blk, rc->order, cluster % rc->per_block);
    return 0;
}

int qcow2_rc_set(struct qcow2_rc *rc, uint64_t cluster, uint64_t v)
{
    uint64_t off;
    int r = block_offset(rc, cluster / rc->per_block, &off);

    if (r < 0)
        return r;
    if (off == 0)
        return diag_fail(rc->d, -EIO, rc->path, -1, "internal error: no refcount "
                         "block for cluster %" PRIu64, cluster);
    if (v > rc->max)
        return diag_fail(rc->d, -ERANGE, rc->path, -1, "refcount %" PRIu64 " of cluster %"
                         PRIu64 " does not fit %u-bit refcounts", v, cluster,
                         1u << rc->order);
    if ((r = load_block(rc, off)) < 0)
        return r;
    qcow2_rc_entry_set(rc->blk, rc->order, cluster % rc->per_block, v);
    rc->blk_dirty = true;
    return 0;
}

int qcow2_rc_add(struct qcow2_rc *rc, uint64_t cluster, int delta)
{
    uint64_t v;
    int r = qcow2_rc_get(rc, cluster, &v);

    if (r < 0)
        return r;
    if ((delta < 0 && v < (uint64_t)-delta) || (delta > 0 && v > rc->max - (uint64_t)delta))
        return diag_fail(rc->d, -EINVAL, rc->path, (int64_t)(cluster << rc->cbits),
                         "refcount of cluster %" PRIu64 " is %" PRIu64 " and cannot be "
                         "%s by %d", cluster, v, delta < 0 ? "lowered" : "raised",
                         delta < 0 ? -delta : delta);
    return qcow2_rc_set(rc, cluster, v + (uint64_t)(int64_t)delta);
}

int qcow2_rc_used_end(struct qcow2_rc *rc, uint64_t clusters, uint64_t *end)
{
    uint64_t c = clusters, v = 0;
    int r;

    while (c > 1) {
        if (!qcow2_rc_has_block(rc, c - 1)) {
            /* no refcount block: the whole range it would cover is free */
            uint64_t start = (c - 1) / rc->per_block * rc->per_block;
            c = start > 1 ? start : 1;
            continue;
        }
        if ((r = qcow2_rc_get(rc, c - 1, &v)) < 0)
            return r;
        if (v)
            break;
        c--;
    }
    *end = c;
    return 0;
}

/* ---- appending clusters ------------------------------------------------- */

/* Blocks missing for clusters [a, b): no table entry, or beyond the table. */
static uint64_t missing_blocks(struct qcow2_rc *rc, uint64_t a, uint64_t b)
{
    uint64_t n = 0;

    if (a >= b)
        return 0;
    for (uint64_t i = a / rc->per_block; i <= (b - 1) / rc->per_block; i++)
        n += i >= rc->table_len || (rc->table[i] & QCOW2_REFT_OFFSET_MASK) == 0;
    return n;
}

int qcow2_rc_append(struct qcow2_rc *rc, uint64_t n, uint64_t *first,
                    struct qcow2_rc_grown *g)
{
    uint64_t start = div_up(rc->file_size, rc->cs), nb = 0, t = 0, end = 0;
    uint64_t table_cap = rc->table_len;
    int r;

    memset(g, 0, sizeof(*g));
    /* the clusters taken must be free: a refcount past the end of the file
     * means the image is damaged (check -r first) */
    for (uint64_t c = start; c < start + n; c++) {
        uint64_t v;
        if ((r = qcow2_rc_get(rc, c, &v)) < 0)
            return r;
        if (v)
            return diag_fail(rc->d, -EINVAL, rc->path, (int64_t)(c << rc->cbits),
                             "cluster %" PRIu64 " past the end of the file has refcount %"
                             PRIu64 "; repair the image first (check -r all)", c, v);
    }
    /* [start, start+n) asked for, then nb new refcount blocks, then (if the
     * table is too short) a new table of t clusters: to a fixed point */
    for (int iter = 0;; iter++) {
        if (iter > 64)
            return diag_fail(rc->d, -EIO, rc->path, -1,
                             "internal error: refcount layout does not converge");
        end = start + n + nb + t;
        if (end < start || end > (UINT64_C(1) << (56 - rc->cbits)))
            return diag_fail(rc->d, -EFBIG, rc->path, -1, "the image file would grow "
                             "past what qcow2 can address");
        uint64_t nb2 = missing_blocks(rc, start, end);
        uint64_t blocks = div_up(end, rc->per_block);
        uint64_t t2 = 0;
        if (blocks > table_cap) {
            t2 = div_up(blocks * 8, rc->cs);
            if ((t2 << rc->cbits) > QCOW2_MAX_REFT_BYTES)
                return diag_fail(rc->d, -EFBIG, rc->path, -1, "the refcount table "
                                 "would grow past %u bytes", QCOW2_MAX_REFT_BYTES);
        }
        if (nb2 == nb && t2 == t)
            break;
        nb = nb2 > nb ? nb2 : nb;
        t = t2 > t ? t2 : t;
    }
    uint64_t blocks_at = start + n, table_at = start + n + nb;

    /* grow the in-memory table first when a new one is needed */
    if (t) {
        uint64_t len = (t << rc->cbits) / 8;
        uint64_t *nt = realloc(rc->table, len * 8);
        if (!nt)
            return diag_fail(rc->d, -ENOMEM, rc->path, -1, "out of memory");
        memset(nt + rc->table_len, 0, (len - rc->table_len) * 8);
        g->old_table_off = rc->table_off;
        g->old_table_clusters = rc->table_clusters;
        rc->table = nt;
        rc->table_len = len;
    }
    /* new blocks, entered in the table: written holding refcount 1 for the
     * appended clusters they cover (themselves among them), so that a table
     * entry on disk never names a block that does not count itself */
    uint8_t *nblk = malloc(rc->cs);
    if (!nblk)
        return diag_fail(rc->d, -ENOMEM, rc->path, -1, "out of memory");
    uint64_t next = blocks_at;
    r = 0;
    for (uint64_t i = start / rc->per_block; r == 0 && i <= (end - 1) / rc->per_block; i++) {
        if (i < rc->table_len && (rc->table[i] & QCOW2_REFT_OFFSET_MASK))
            continue;
        uint64_t off = next++ << rc->cbits;
        uint64_t lo = i * rc->per_block, hi = lo + rc->per_block;
        memset(nblk, 0, rc->cs);
        for (uint64_t c = lo > start ? lo : start; c < hi && c < end; c++)
            qcow2_rc_entry_set(nblk, rc->order, c - lo, 1);
        if ((r = bfile_pwrite(rc->f, nblk, rc->cs, off)) < 0)
            break;
        rc->table[i] = off;
        g->blocks_added++;
        /* the old table is still the one in use: enter the block there */
        if (!t) {
            uint8_t e[8];
            be64_put(e, off);
            r = bfile_pwrite(rc->f, e, 8, rc->table_off + i * 8);
        }
    }
    free(nblk);
    if (r < 0)
        return r;
    rc->file_size = end << rc->cbits;
    /* every appended cluster gets refcount 1 (in the blocks that existed:
     * written now, or with the user's next flush when it defers them) */
    for (uint64_t c = start; c < end; c++)
        if ((r = qcow2_rc_set(rc, c, 1)) < 0)
            return r;
    if ((!rc->defer_flush || t) && (r = qcow2_rc_flush(rc)) < 0)
        return r;
    if (t) {
        /* the new table, complete; the caller enters it into the header */
        uint64_t bytes = t << rc->cbits;
        uint8_t *buf = malloc(bytes);
        if (!buf)
            return diag_fail(rc->d, -ENOMEM, rc->path, -1, "out of memory");
        for (uint64_t i = 0; i < rc->table_len; i++)
            be64_put(buf + 8 * i, rc->table[i]);
        r = bfile_pwrite(rc->f, buf, bytes, table_at << rc->cbits);
        free(buf);
        if (r < 0)
            return r;
        rc->table_off = table_at << rc->cbits;
        rc->table_clusters = (uint32_t)t;
        g->new_table = true;
    }
    *first = start;
    return 0;
}

int qcow2_rc_free_range(struct qcow2_rc *rc, uint64_t off, uint64_t len)
{
    if (len == 0)
        return 0;
    for (uint64_t c = off >> rc->cbits; c <= (off + len - 1) >> rc->cbits; c++) {
        int r = qcow2_rc_add(rc, c, -1);
        if (r < 0)
            return r;
    }
    return 0;
}

int qcow2_rc_adopt_table(struct qcow2_rc *rc, struct qcow2 *q, const struct qcow2_rc_grown *g)
{
    uint8_t b[QH_REFCOUNT_TABLE_CLUSTERS + 4 - QH_REFCOUNT_TABLE_OFFSET];
    int r;

    if ((r = qcow2_rc_flush(rc)) < 0 || (r = bfile_sync(rc->f)) < 0)
        return r;
    be64_put(b, rc->table_off);
    be32_put(b + (QH_REFCOUNT_TABLE_CLUSTERS - QH_REFCOUNT_TABLE_OFFSET), rc->table_clusters);
    if ((r = bfile_pwrite(rc->f, b, sizeof(b), QH_REFCOUNT_TABLE_OFFSET)) < 0 ||
        (r = bfile_sync(rc->f)) < 0)
        return r;
    q->h.refcount_table_offset = rc->table_off;
    q->h.refcount_table_clusters = rc->table_clusters;
    return qcow2_rc_free_range(rc, g->old_table_off,
                               (uint64_t)g->old_table_clusters << rc->cbits);
}
