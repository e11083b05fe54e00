/* qcow2 writer: host cluster allocation and refcounts.
 *
 * Clusters are only ever appended, so every host cluster below
 * next_cluster is in use, with refcount 1 -- except host clusters shared by
 * compressed clusters.  Those counts live in a one-block "window": the
 * refcount block holding the compressed tail.  Compressed data only moves
 * forward, so when the tail enters a later block the window's block is
 * complete; if it holds a count other than 1 it is written out at once
 * (to a newly allocated cluster), otherwise it is forgotten and generated
 * again at finish.  At finish the missing blocks are generated as a stream
 * (ones up to the end of the file), then the refcount table is written.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "formats/qcow2/format.h"
#include "formats/qcow2/refcount_entry.h"
#include "formats/qcow2/write_priv.h"
#include "util/diag.h"

/* Entries [a, b) of a block set to 1. */
static void rc_fill_ones(uint8_t *blk, unsigned order, uint64_t a, uint64_t b)
{
    static const uint8_t byte_of_ones[3] = { 0xff, 0x55, 0x11 };

    if (order < 3) {
        uint64_t per = 8u >> order;                 /* entries per byte */
        while (a < b && a % per)
            qcow2_rc_entry_set(blk, order, a++, 1);
        uint64_t whole = (b - a) / per;
        memset(blk + a / per, byte_of_ones[order], whole);
        a += whole * per;
    }
    while (a < b)
        qcow2_rc_entry_set(blk, order, a++, 1);
}

int qcow2w_rc_init(struct qcow2w *w)
{
    unsigned order = w->p.refcount_order;

    w->rc_epb = ((uint64_t)w->cs * 8) >> order;
    w->rc_max = qcow2_rc_max(order);
    w->reftable_cap = 64;
    w->reftable = calloc(w->reftable_cap, sizeof(*w->reftable));
    w->win = malloc(w->cs);
    w->win_spare = malloc(w->cs);
    if (!w->reftable || !w->win || !w->win_spare)
        return diag_fail(w->bd.diag, -ENOMEM, w->bd.filename, -1, "out of memory");
    return 0;
}

void qcow2w_rc_free(struct qcow2w *w)
{
    free(w->reftable);
    free(w->win);
    free(w->win_spare);
    w->reftable = NULL;
    w->win = w->win_spare = NULL;
}

static int too_large(struct qcow2w *w)
{
    return diag_fail(w->bd.diag, -EFBIG, w->bd.filename, -1,
                     "the image file would grow past what qcow2 can address with "
                     "%u-byte clusters and %u-bit refcounts (refcount table limit)",
                     w->cs, 1u << w->p.refcount_order);
}

static int reftable_reserve(struct qcow2w *w, uint64_t n)
{
    if (n <= w->reftable_cap)
        return 0;
    if (n > QCOW2W_MAX_REFTABLE_ENTRIES)
        return too_large(w);
    uint64_t cap = w->reftable_cap * 2;
    while (cap < n)
        cap *= 2;
    if (cap > QCOW2W_MAX_REFTABLE_ENTRIES)
        cap = QCOW2W_MAX_REFTABLE_ENTRIES;
    uint64_t *t = realloc(w->reftable, cap * sizeof(*t));
    if (!t)
        return diag_fail(w->bd.diag, -ENOMEM, w->bd.filename, -1, "out of memory");
    memset(t + w->reftable_cap, 0, (cap - w->reftable_cap) * sizeof(*t));
    w->reftable = t;
    w->reftable_cap = cap;
    return 0;
}

int qcow2w_alloc(struct qcow2w *w, uint64_t n, uint64_t *first)
{
    uint64_t start = w->next_cluster, end = start + n;

    if (end < start || end > QCOW2W_MAX_HOST_OFFSET >> w->cbits ||
        (end + w->rc_epb - 1) / w->rc_epb > QCOW2W_MAX_REFTABLE_ENTRIES)
        return too_large(w);
    if (w->win_valid) {
        uint64_t lo = w->win_idx * w->rc_epb, hi = lo + w->rc_epb;
        uint64_t a = start > lo ? start : lo, b = end < hi ? end : hi;
        if (a < b)
            rc_fill_ones(w->win, w->p.refcount_order, a - lo, b - lo);
    }
    w->next_cluster = end;
    *first = start;
    return 0;
}

/* Make the window hold block `blk` (only ever forward). */
static int window_move(struct qcow2w *w, uint64_t blk)
{
    bool emit = w->win_valid && w->win_shared;
    uint64_t old = w->win_idx, lo = blk * w->rc_epb, c;
    int r;

    if (w->win_valid && blk == w->win_idx)
        return 0;
    if (w->win_valid && blk < w->win_idx)
        return diag_fail(w->bd.diag, -EIO, w->bd.filename, -1,
                         "internal error: refcount window moved backwards");
    if (emit) {
        uint8_t *t = w->win;
        w->win = w->win_spare;
        w->win_spare = t;
    }
    memset(w->win, 0, w->cs);
    if (w->next_cluster > lo) {
        uint64_t hi = w->next_cluster - lo < w->rc_epb ? w->next_cluster - lo : w->rc_epb;
        rc_fill_ones(w->win, w->p.refcount_order, 0, hi);
    }
    w->win_idx = blk;
    w->win_valid = true;
    w->win_shared = false;
    if (!emit)
        return 0;
    /* the finished block goes to a new cluster (counted in a later block) */
    if ((r = reftable_reserve(w, old + 1)) < 0 || (r = qcow2w_alloc(w, 1, &c)) < 0)
        return r;
    w->reftable[old] = c << w->cbits;
    return qcow2w_write_meta(w, w->win_spare, w->cs, c << w->cbits);
}

int qcow2w_rc_get(struct qcow2w *w, uint64_t c, uint64_t *val)
{
    int r = window_move(w, c / w->rc_epb);

    if (r < 0)
        return r;
    *val = qcow2_rc_entry_get(w->win, w->p.refcount_order, c % w->rc_epb);
    return 0;
}

int qcow2w_rc_incr(struct qcow2w *w, uint64_t c)
{
    uint64_t v;
    int r = qcow2w_rc_get(w, c, &v);

    if (r < 0)
        return r;
    if (v >= w->rc_max || c >= w->next_cluster)
        return diag_fail(w->bd.diag, -EIO, w->bd.filename, (int64_t)(c << w->cbits),
                         "internal error: refcount of cluster %llu cannot be raised",
                         (unsigned long long)c);
    qcow2_rc_entry_set(w->win, w->p.refcount_order, c % w->rc_epb, v + 1);
    w->win_shared = true;
    return 0;
}

static uint64_t div_up(uint64_t a, uint64_t b)
{
    return a / b + (a % b != 0);
}

int qcow2w_rc_plan(struct qcow2w *w, uint64_t extra_after, uint64_t *table_clusters,
                   uint64_t *new_blocks)
{
    uint64_t t = 1, nbl = 0;

    for (int iter = 0; iter < 64; iter++) {
        uint64_t end = w->next_cluster + t + nbl + extra_after;
        uint64_t nb = div_up(end, w->rc_epb), missing = 0;
        if (end < w->next_cluster || nb > QCOW2W_MAX_REFTABLE_ENTRIES)
            return too_large(w);
        for (uint64_t i = 0; i < nb; i++)
            missing += i >= w->reftable_cap || !w->reftable[i];
        uint64_t t2 = div_up(nb * 8, w->cs);
        if (t2 == t && missing == nbl) {
            *table_clusters = t;
            *new_blocks = nbl;
            return 0;
        }
        t = t2 > t ? t2 : t;
        nbl = missing > nbl ? missing : nbl;
    }
    return diag_fail(w->bd.diag, -EIO, w->bd.filename, -1,
                     "internal error: refcount layout does not converge");
}

int qcow2w_rc_write(struct qcow2w *w, uint64_t table_off, uint64_t table_clusters,
                    uint64_t blocks_off, uint64_t end)
{
    uint64_t nb = div_up(end, w->rc_epb);
    uint8_t *buf = w->win_spare;
    int r;

    if (nb > table_clusters * (w->cs / 8))
        return diag_fail(w->bd.diag, -EIO, w->bd.filename, -1,
                         "internal error: refcount table too small");
    if ((r = reftable_reserve(w, nb)) < 0)
        return r;
    for (uint64_t i = 0; i < nb; i++) {
        if (w->reftable[i])
            continue;
        const uint8_t *blk = buf;
        if (w->win_valid && i == w->win_idx) {
            blk = w->win;
        } else {
            uint64_t lo = i * w->rc_epb, n = end - lo < w->rc_epb ? end - lo : w->rc_epb;
            memset(buf, 0, w->cs);
            rc_fill_ones(buf, w->p.refcount_order, 0, n);
        }
        if ((r = qcow2w_write_meta(w, blk, w->cs, blocks_off)) < 0)
            return r;
        w->reftable[i] = blocks_off;
        blocks_off += w->cs;
    }
    /* the table itself, one cluster at a time */
    uint64_t per = w->cs / 8;
    for (uint64_t k = 0; k < table_clusters; k++) {
        memset(buf, 0, w->cs);
        for (uint64_t j = 0; j < per && k * per + j < nb; j++)
            be64_put(buf + 8 * j, w->reftable[k * per + j]);
        if ((r = qcow2w_write_meta(w, buf, w->cs, table_off + (k << w->cbits))) < 0)
            return r;
    }
    return 0;
}
