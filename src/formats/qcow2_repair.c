/* qcow2 repair (check -r): the writes.  qcow2_check.c decides what to fix
 * (in qemu-img check's order, with its messages); this file changes the
 * image.
 *
 * Crash safety.  Before the first change a v3 image is marked dirty and
 * synced, so that an interrupted repair leaves an image every qcow2 reader
 * knows to distrust (qemu repairs a dirty image when it opens it for
 * writing).  Refcounts are only ever set to the value the recount found;
 * a rebuilt refcount structure goes to clusters no valid structure uses,
 * and is synced before the header is switched to it (one 12-byte write),
 * so a crash leaves either the old structure or the new one, plus leaks.
 * At the end everything is synced before the dirty (and corrupt) bits are
 * cleared -- only when nothing is left to repair.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "formats/qcow2_check_int.h"
#include "formats/qcow2_rcentry.h"
#include "io/bfile.h"
#include "util/diag.h"
#include "util/endian.h"

static int wr(struct chk *c, const void *buf, size_t len, uint64_t off)
{
    return bfile_pwrite(c->q->bd.file, buf, len, off);
}

static int set_incompat(struct chk *c, uint64_t v)
{
    uint8_t b[8];
    int r;

    be64_put(b, v);
    if ((r = wr(c, b, 8, QH_INCOMPATIBLE)) < 0 || (r = bfile_sync(c->q->bd.file)) < 0)
        return r;
    c->h->incompatible = v;
    c->q->bd.dirty = (v & QCOW2_INCOMPAT_DIRTY) != 0;
    return 0;
}

int qcow2_repair_begin(struct chk *c)
{
    if (c->writing)
        return 0;
    if (!c->q->bd.file->writable)
        return diag_fail(c->q->bd.diag, -EROFS, c->q->bd.filename, -1,
                         "the image is not open for writing");
    c->writing = true;
    c->orig_incompat = c->h->incompatible;
    if (c->h->version < 3 || (c->h->incompatible & QCOW2_INCOMPAT_DIRTY))
        return 0;
    return set_incompat(c, c->h->incompatible | QCOW2_INCOMPAT_DIRTY);
}

int qcow2_repair_end(struct chk *c, bool clean)
{
    const uint64_t flags = QCOW2_INCOMPAT_DIRTY | QCOW2_INCOMPAT_CORRUPT;
    uint64_t orig = c->writing ? c->orig_incompat : c->h->incompatible;
    int r;

    if (c->h->version < 3) {
        /* no feature bits: only the data needs to reach the disk */
        return c->writing ? bfile_sync(c->q->bd.file) : 0;
    }
    uint64_t want = clean ? orig & ~flags : orig;
    if (!c->writing && want == c->h->incompatible)
        return 0;
    if (!c->writing && !c->q->bd.file->writable)
        return 0;
    /* everything repaired is on the disk before the image says so */
    if ((r = bfile_sync(c->q->bd.file)) < 0)
        return r;
    if (want == c->h->incompatible)
        return 0;
    return set_incompat(c, want);
}

int qcow2_repair_refcount(struct chk *c, uint64_t k, uint64_t v)
{
    unsigned order = c->h->refcount_order;
    uint64_t per_block = (c->cs * 8) >> order, j = k % per_block;
    int r;

    if (c->rblock_off == 0)
        return -EIO;
    if ((r = qcow2_repair_begin(c)) < 0)
        return r;
    qcow2_rc_entry_set(c->rblock, order, j, v);
    /* only the bytes of the entry */
    uint64_t first = order >= 3 ? (j << order) / 8 : j >> (3 - order);
    size_t len = order >= 3 ? (size_t)1 << (order - 3) : 1;
    return wr(c, c->rblock + first, len, c->rblock_off + first);
}

int qcow2_repair_l2_entry(struct chk *c, uint64_t l2_off, uint32_t j)
{
    size_t e = c->h->l2_entry_bytes;
    int r = qcow2_repair_begin(c);

    return r < 0 ? r : wr(c, c->buf + (size_t)j * e, e, l2_off + (uint64_t)j * e);
}

int qcow2_repair_l2_table(struct chk *c, uint64_t l2_off)
{
    int r = qcow2_repair_begin(c);

    return r < 0 ? r : wr(c, c->buf, c->cs, l2_off);
}

int qcow2_repair_l1_entry(struct chk *c, uint32_t i, uint64_t e)
{
    uint8_t b[8];
    int r = qcow2_repair_begin(c);

    if (r < 0)
        return r;
    be64_put(b, e);
    if ((r = wr(c, b, 8, c->h->l1_table_offset + (uint64_t)i * 8)) < 0)
        return r;
    if (c->q->l1 && c->q->l1_offset == c->h->l1_table_offset && i < c->q->l1_len)
        c->q->l1[i] = e;
    return 0;
}

int qcow2_repair_extend(struct chk *c, uint64_t size)
{
    struct bfile *f = c->q->bd.file;
    int r = qcow2_repair_begin(c);

    if (r < 0)
        return r;
    if (f->kind != BFILE_REGULAR)
        return -ENOTSUP;
    if (ftruncate(f->fd, (off_t)size) < 0)
        return -errno;
    if ((r = bfile_refresh_size(f)) < 0)
        return r;
    c->file_size = c->q->file_size = f->size;
    return 0;
}

/* ---- rebuilding the refcount structure ----------------------------------------
 *
 * qemu's placement, so that the rebuilt image looks like qemu's: every
 * refcount block goes to the first free cluster (by the recount) at or
 * after the start of the range it describes, the table to the first free
 * run anywhere; blocks whose counts changed because of a later allocation
 * are written again, and the table moves again if it had to grow.
 */

struct rebuild {
    struct chk *c;
    uint64_t *table;        /* block offsets, host order */
    uint64_t entries;
    uint64_t per_block;
    uint8_t *blk;
};

/* `count` free clusters in a row from *first_free on (the counters grow
 * at the end if needed); they get one reference each. */
static int alloc_clusters(struct rebuild *rb, uint64_t count, uint64_t *first_free,
                          uint64_t *at)
{
    struct chk *c = rb->c;
    uint64_t cl = *first_free, run = 0;
    bool first_gap = true;
    int r;

    for (; cl < c->n && run < count; cl++) {
        if (!c->refs[cl]) {
            run++;
            if (first_gap) {
                *first_free = cl;
                first_gap = false;
            }
        } else {
            run = 0;
        }
    }
    if (run < count && (r = qcow2_chk_grow(c, cl + count - run)) < 0)
        return r;
    cl -= run;
    for (uint64_t i = 0; i < count; i++)
        c->refs[cl + i]++;
    *at = cl;
    return 0;
}

static int write_block(struct rebuild *rb, uint64_t bi, uint64_t off)
{
    struct chk *c = rb->c;
    unsigned order = c->h->refcount_order;
    uint64_t start = bi * rb->per_block;

    memset(rb->blk, 0, c->cs);
    for (uint64_t j = 0; j < rb->per_block && start + j < c->n; j++)
        if (c->refs[start + j])
            qcow2_rc_entry_set(rb->blk, order, j, c->refs[start + j]);
    return wr(c, rb->blk, c->cs, off);
}

/* Write the blocks of clusters [first, end) that are in use, allocating
 * the missing ones.  *grown: the table needs more entries than before. */
static int write_blocks(struct rebuild *rb, uint64_t first, uint64_t end, bool *grown)
{
    struct chk *c = rb->c;
    uint64_t first_free = 0;
    int r;

    *grown = false;
    for (uint64_t cl = first; cl < end; cl++) {
        if (cl >= c->n || !c->refs[cl])
            continue;
        uint64_t bi = cl / rb->per_block, start = bi * rb->per_block, off;
        if (bi < rb->entries && rb->table[bi]) {
            off = rb->table[bi];
        } else {
            uint64_t at;
            /* never inside a block already written */
            if (first_free < start)
                first_free = start;
            if ((r = alloc_clusters(rb, 1, &first_free, &at)) < 0)
                return r;
            if (at >= end)
                end = at + 1;   /* the block holding this block's count too */
            if (bi >= rb->entries) {
                uint64_t per = c->cs / 8, n = (bi + 1 + per - 1) / per * per;
                uint64_t *t = realloc(rb->table, n * sizeof(*t));
                if (!t)
                    return -ENOMEM;
                memset(t + rb->entries, 0, (n - rb->entries) * sizeof(*t));
                rb->table = t;
                rb->entries = n;
                *grown = true;
            }
            off = at * c->cs;
            rb->table[bi] = off;
        }
        if ((r = write_block(rb, bi, off)) < 0)
            return r;
        cl = start + rb->per_block - 1;
    }
    return 0;
}

int qcow2_rebuild_refcounts(struct chk *c)
{
    struct rebuild rb = { .c = c, .per_block = (c->cs * 8) >> c->h->refcount_order };
    uint64_t table_at = 0, table_clusters = 0;
    bool grown;
    int r;

    if ((r = qcow2_repair_begin(c)) < 0)
        return r;
    /* counters saturate at 65535: wider refcounts cannot be rebuilt exactly */
    if (c->h->refcount_bits > 16)
        for (uint64_t k = 0; k < c->n; k++)
            if (c->refs[k] == UINT16_MAX)
                return diag_fail(c->q->bd.diag, -ENOTSUP, c->q->bd.filename, -1,
                                 "cluster %" PRIu64 " has 65535 references or more; its "
                                 "refcount cannot be rebuilt", k);
    if (!(rb.blk = malloc(c->cs))) {
        r = -ENOMEM;
        goto out;
    }
    if ((r = write_blocks(&rb, 0, c->n, &grown)) < 0)
        goto out;
    do {
        uint64_t first_free = 0;
        table_clusters = (rb.entries * 8 + c->cs - 1) / c->cs;
        if ((r = alloc_clusters(&rb, table_clusters, &first_free, &table_at)) < 0 ||
            (r = write_blocks(&rb, table_at, table_at + table_clusters, &grown)) < 0)
            goto out;
    } while (grown);

    uint8_t *t = calloc(table_clusters, c->cs);
    if (!t) {
        r = -ENOMEM;
        goto out;
    }
    for (uint64_t i = 0; i < rb.entries; i++)
        be64_put(t + 8 * i, rb.table[i]);
    r = wr(c, t, table_clusters * c->cs, table_at * c->cs);
    free(t);
    /* the new structure is on the disk before the header names it */
    if (r < 0 || (r = bfile_sync(c->q->bd.file)) < 0)
        goto out;
    uint8_t hdr[12];
    be64_put(hdr, table_at * c->cs);
    be32_put(hdr + 8, (uint32_t)table_clusters);
    if ((r = wr(c, hdr, sizeof(hdr), QH_REFCOUNT_TABLE_OFFSET)) < 0 ||
        (r = bfile_sync(c->q->bd.file)) < 0)
        goto out;
    c->h->refcount_table_offset = table_at * c->cs;
    c->h->refcount_table_clusters = (uint32_t)table_clusters;
    if ((r = bfile_refresh_size(c->q->bd.file)) < 0)
        goto out;
    c->file_size = c->q->file_size = c->q->bd.file->size;
    c->nb_clusters = (c->file_size + c->cs - 1) / c->cs;
    c->rblock_off = 0;
out:
    free(rb.blk);
    free(rb.table);
    if (r < 0 && !c->q->bd.diag->err)
        diag_errno(c->q->bd.diag, r, c->q->bd.filename, -1,
                   "cannot rebuild the refcount structure");
    return r;
}
