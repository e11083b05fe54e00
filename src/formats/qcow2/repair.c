/* qcow2 repair (check -r): the writes.  check.c decides what to fix
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

#include "formats/qcow2/check_int.h"
#include "formats/qcow2/refcount_entry.h"
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

int qcow2_repair_l2_entry(struct chk *c, const struct chk_fix *f)
{
    uint8_t b[16];
    int r = qcow2_repair_begin(c);

    be64_put(b, f->e);
    be64_put(b + 8, f->bitmap);
    return r < 0 ? r : wr(c, b, c->h->l2_entry_bytes, f->where);
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
    int r;

    /* only ever longer: a shorter file would lose what lies past `size` */
    if (size > (uint64_t)INT64_MAX || size <= f->size)
        return -EINVAL;
    if (f->kind != BFILE_REGULAR)
        return -ENOTSUP;
    if ((r = qcow2_repair_begin(c)) < 0)
        return r;
    if (ftruncate(f->fd, (off_t)size) < 0)
        return -errno;
    if ((r = bfile_refresh_size(f)) < 0)
        return r;
    c->q->file_size = f->size;
    if (c->file_size < f->size)
        c->file_size = f->size;
    return 0;
}

/* ---- the writes the count decides on, made after it ------------------------- */

static struct chk_fix_table *ftab_slot(struct chk_fix_table *t, size_t cap, uint64_t l2)
{
    size_t i = (size_t)((l2 * 0x9e3779b97f4a7c15ull) >> 32) & (cap - 1);

    while (t[i].l2 && t[i].l2 != l2)
        i = (i + 1) & (cap - 1);
    return &t[i];
}

const struct chk_fix_table *qcow2_repair_fixes_of(const struct chk *c, uint64_t l2)
{
    if (!c->ftab_used)
        return NULL;
    struct chk_fix_table *s = ftab_slot(c->ftab, c->ftab_cap, l2);
    return s->l2 ? s : NULL;
}

int qcow2_repair_add_fix(struct chk *c, uint64_t l2, uint64_t where, uint64_t e,
                         uint64_t bitmap)
{
    if (c->nfixes == c->fixes_cap) {
        size_t cap = c->fixes_cap ? 2 * c->fixes_cap : 16;
        struct chk_fix *f = realloc(c->fixes, cap * sizeof(*f));
        if (!f)
            return -ENOMEM;
        c->fixes = f;
        c->fixes_cap = cap;
    }
    if (2 * (c->ftab_used + 1) > c->ftab_cap) {
        size_t cap = c->ftab_cap ? 2 * c->ftab_cap : 64;
        struct chk_fix_table *t = calloc(cap, sizeof(*t));
        if (!t)
            return -ENOMEM;
        for (size_t i = 0; i < c->ftab_cap; i++)
            if (c->ftab[i].l2)
                *ftab_slot(t, cap, c->ftab[i].l2) = c->ftab[i];
        free(c->ftab);
        c->ftab = t;
        c->ftab_cap = cap;
    }
    /* one visit adds a table's fixes in a row */
    struct chk_fix_table *s = ftab_slot(c->ftab, c->ftab_cap, l2);
    if (!s->l2) {
        *s = (struct chk_fix_table){ l2, c->nfixes, 0 };
        c->ftab_used++;
    }
    s->n++;
    c->fixes[c->nfixes++] = (struct chk_fix){ where, e, bitmap };
    return 0;
}

int qcow2_repair_commit(struct chk *c, struct bd_check_result *also)
{
    int r;

    if (c->extend_to > c->q->bd.file->size &&
        (r = qcow2_repair_extend(c, c->extend_to)) < 0) {
        c->res->check_errors++;
        return diag_errno(c->q->bd.diag, r, c->q->bd.filename, -1,
                          "cannot extend the file to its refcount block");
    }
    c->extend_to = 0;
    for (size_t i = 0; i < c->nfixes; i++) {
        if ((r = qcow2_repair_l2_entry(c, &c->fixes[i])) < 0) {
            c->res->check_errors++;
            return r;
        }
        c->res->corruptions--;
        c->res->corruptions_fixed++;
        if (also) {
            also->corruptions--;
            also->corruptions_fixed++;
        }
    }
    c->nfixes = 0;
    free(c->ftab);
    c->ftab = NULL;
    c->ftab_cap = c->ftab_used = 0;
    return 0;
}

/* ---- rebuilding the refcount structure ----------------------------------------
 *
 * qemu's placement, so that the rebuilt image looks like qemu's: every
 * refcount block goes to the first free cluster (by the recount) at or
 * after the start of the range it describes, the table to the first free
 * run anywhere, and the table moves again if it had to grow.  The whole
 * structure is placed first, without a write (what cannot be placed is
 * refused with the image untouched), then written with the final counts.
 */

struct qcow2_rebuild {
    struct chk *c;
    uint64_t *table;        /* block offsets, host order */
    uint64_t entries;
    uint64_t per_block;
    uint64_t table_at, table_clusters;
};

static bool taken(const struct chk *c, uint64_t cl)
{
    return cl >= c->taken_lo && cl < c->taken_hi;
}

/* `count` free clusters in a row from *first_free on (the counters grow
 * at the end if needed); they get one reference each.  Free: no counted
 * reference, and none left out of the count either (c->taken_lo/hi). */
static int alloc_clusters(struct qcow2_rebuild *rb, uint64_t count, uint64_t *first_free,
                          uint64_t *at)
{
    struct chk *c = rb->c;
    uint64_t cl = *first_free, run = 0;
    bool first_gap = true;
    int r;

    for (; cl < c->n && run < count; cl++) {
        if (!c->refs[cl] && !taken(c, cl)) {
            run++;
            if (first_gap) {
                *first_free = cl;
                first_gap = false;
            }
        } else {
            run = 0;
        }
    }
    if (run < count) {
        /* new clusters past the counters: not over clusters that references
         * the count left out name (the file would grow over what they
         * point to: they would name the new structure, or read as zeros
         * where they failed) */
        if (cl + count - run > c->taken_lo && cl - run < c->taken_hi)
            return diag_fail(c->q->bd.diag, -ENOSPC, c->q->bd.filename,
                             (int64_t)(c->taken_lo * c->cs), "cannot rebuild the "
                             "refcount structure: the image names clusters past the "
                             "end of its file, which a new structure would have to "
                             "cover; not repaired");
        if ((r = qcow2_chk_grow(c, cl + count - run)) < 0)
            return r;
    }
    cl -= run;
    for (uint64_t i = 0; i < count; i++)
        c->refs[cl + i]++;
    *at = cl;
    return 0;
}

/* Make sure the blocks of clusters [first, end) that are in use have a
 * place, allocating the missing ones (their own counts included).
 * *grown: the table needs more entries than before. */
static int place_blocks(struct qcow2_rebuild *rb, uint64_t first, uint64_t end, bool *grown)
{
    struct chk *c = rb->c;
    uint64_t first_free = 0;
    int r;

    *grown = false;
    for (uint64_t cl = first; cl < end; cl++) {
        if (cl >= c->n || !c->refs[cl])
            continue;
        uint64_t bi = cl / rb->per_block, start = bi * rb->per_block;
        if (bi >= rb->entries || !rb->table[bi]) {
            uint64_t at;
            /* never inside a block already placed */
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
            rb->table[bi] = at * c->cs;
        }
        cl = start + rb->per_block - 1;
    }
    return 0;
}

void qcow2_rebuild_free(struct qcow2_rebuild *rb)
{
    if (rb) {
        free(rb->table);
        free(rb);
    }
}

int qcow2_rebuild_plan(struct chk *c, struct qcow2_rebuild **out)
{
    struct qcow2_rebuild *rb;
    bool grown;
    int r;

    *out = NULL;
    /* counters saturate at 65535: wider refcounts cannot be rebuilt exactly */
    if (c->h->refcount_bits > 16)
        for (uint64_t k = 0; k < c->n; k++)
            if (c->refs[k] == UINT16_MAX)
                return diag_fail(c->q->bd.diag, -ENOTSUP, c->q->bd.filename, -1,
                                 "cluster %" PRIu64 " has 65535 references or more; its "
                                 "refcount cannot be rebuilt", k);
    if (!(rb = calloc(1, sizeof(*rb))))
        return diag_fail(c->q->bd.diag, -ENOMEM, c->q->bd.filename, -1, "out of memory");
    rb->c = c;
    rb->per_block = (c->cs * 8) >> c->h->refcount_order;
    if ((r = place_blocks(rb, 0, c->n, &grown)) < 0)
        goto out;
    do {
        uint64_t first_free = 0;
        rb->table_clusters = (rb->entries * 8 + c->cs - 1) / c->cs;
        if ((r = alloc_clusters(rb, rb->table_clusters, &first_free, &rb->table_at)) < 0 ||
            (r = place_blocks(rb, rb->table_at, rb->table_at + rb->table_clusters,
                              &grown)) < 0)
            goto out;
    } while (grown);
    *out = rb;
    return 0;
out:
    qcow2_rebuild_free(rb);
    if (!c->q->bd.diag->err)
        diag_errno(c->q->bd.diag, r, c->q->bd.filename, -1,
                   "cannot rebuild the refcount structure");
    return r;
}

int qcow2_rebuild_write(struct chk *c, struct qcow2_rebuild *rb)
{
    unsigned order = c->h->refcount_order;
    uint8_t *blk = NULL, *t = NULL;
    int r;

    if ((r = qcow2_repair_begin(c)) < 0)
        return r;
    /* every block with the final counts (the table's and the blocks' own
     * clusters included) */
    if (!(blk = malloc(c->cs)) || !(t = calloc(rb->table_clusters, c->cs))) {
        r = -ENOMEM;
        goto out;
    }
    for (uint64_t bi = 0; bi < rb->entries; bi++) {
        uint64_t start = bi * rb->per_block;
        if (!rb->table[bi])
            continue;
        memset(blk, 0, c->cs);
        for (uint64_t j = 0; j < rb->per_block && start + j < c->n; j++)
            if (c->refs[start + j])
                qcow2_rc_entry_set(blk, order, j, c->refs[start + j]);
        if ((r = wr(c, blk, c->cs, rb->table[bi])) < 0)
            goto out;
    }
    for (uint64_t i = 0; i < rb->entries; i++)
        be64_put(t + 8 * i, rb->table[i]);
    r = wr(c, t, rb->table_clusters * c->cs, rb->table_at * c->cs);
    /* the new structure is on the disk before the header names it */
    if (r < 0 || (r = bfile_sync(c->q->bd.file)) < 0)
        goto out;
    uint8_t hdr[12];
    be64_put(hdr, rb->table_at * c->cs);
    be32_put(hdr + 8, (uint32_t)rb->table_clusters);
    if ((r = wr(c, hdr, sizeof(hdr), QH_REFCOUNT_TABLE_OFFSET)) < 0 ||
        (r = bfile_sync(c->q->bd.file)) < 0)
        goto out;
    c->h->refcount_table_offset = rb->table_at * c->cs;
    c->h->refcount_table_clusters = (uint32_t)rb->table_clusters;
    if ((r = bfile_refresh_size(c->q->bd.file)) < 0)
        goto out;
    c->file_size = c->q->file_size = c->q->bd.file->size;
    c->nb_clusters = (c->file_size + c->cs - 1) / c->cs;
    c->rblock_off = 0;
    /* the reader's map of the metadata still names the old refcount
     * blocks: the count after this and the double check that follows
     * would take data there for metadata (and leave the image marked
     * corrupt, which a second repair would then change) */
    qcow2_meta_free(c->q);
    r = qcow2_meta_build(c->q);
out:
    free(blk);
    free(t);
    if (r < 0 && !c->q->bd.diag->err)
        diag_errno(c->q->bd.diag, r, c->q->bd.filename, -1,
                   "cannot rebuild the refcount structure");
    return r;
}
