/* qcow2 snapshot operations: the commit engine (see snapshot_commit.h).
 *
 * Refcounts are held in memory for every cluster of the file (bounded by
 * QCOW2_SNAPW_MAX_CLUSTERS); an operation changes them there, then the
 * whole refcount structure is written anew past the end of the file with
 * the tables that change, and the header switches to all of it at once.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "formats/qcow2/refcount.h"
#include "formats/qcow2/refcount_entry.h"
#include "formats/qcow2/snapshot_commit.h"
#include "io/bfile.h"
#include "util/diag.h"
#include "util/endian.h"

#define FAIL(w, err, off, ...) \
    diag_fail((w)->q->bd.diag, err, (w)->q->bd.filename, off, __VA_ARGS__)

static uint64_t div_up(uint64_t a, uint64_t b)
{
    return a / b + (a % b != 0);
}

int qcow2_snapw_init(struct qcow2_snapw *w, struct qcow2 *q)
{
    struct qcow2_rc rc;
    int r;

    memset(w, 0, sizeof(*w));
    w->q = q;
    w->cs = q->h.cluster_size;
    w->cbits = q->h.cluster_bits;
    w->rc_max = qcow2_rc_max(q->h.refcount_order);
    w->order = q->h.refcount_order;
    w->size = q->h.size;
    w->n = div_up(q->bd.file->size, w->cs);
    if (w->n > QCOW2_SNAPW_MAX_CLUSTERS)
        return FAIL(w, -EFBIG, -1, "the image file has %" PRIu64 " clusters; snapshots "
                    "and other in-place table changes are supported up to %llu", w->n,
                    QCOW2_SNAPW_MAX_CLUSTERS);
    w->cap = w->n + 64;
    w->rc = calloc(w->cap, sizeof(*w->rc));
    w->tab = malloc(w->cs);
    if (!w->rc || !w->tab)
        return FAIL(w, -ENOMEM, -1, "out of memory");
    if ((r = qcow2_rc_open(&rc, q, q->bd.diag)) < 0)
        return r;
    for (uint64_t c = 0; c < w->n && r == 0; c++)
        if (qcow2_rc_has_block(&rc, c))
            r = qcow2_rc_get(&rc, c, &w->rc[c]);
    if (r == 0) {
        w->old_reft = rc.table;
        w->old_reft_len = rc.table_len;
        rc.table = NULL;
        /* the table entries were validated where used; all of them here */
        for (uint64_t i = 0; i < w->old_reft_len && r == 0; i++) {
            uint64_t off = w->old_reft[i] & QCOW2_REFT_OFFSET_MASK;
            if ((w->old_reft[i] & QCOW2_REFT_RESERVED) || (off & (w->cs - 1)) ||
                (off && off >> w->cbits >= w->n))
                r = FAIL(w, -EINVAL, (int64_t)(q->h.refcount_table_offset + 8 * i),
                         "refcount table entry %" PRIu64 " (0x%" PRIx64 ") is invalid",
                         i, w->old_reft[i]);
        }
    }
    qcow2_rc_close(&rc);
    return r;
}

void qcow2_snapw_free(struct qcow2_snapw *w)
{
    free(w->rc);
    free(w->tab);
    free(w->old_reft);
    free(w->l1);
    w->rc = w->old_reft = w->l1 = NULL;
    w->tab = NULL;
}

static int rc_add(struct qcow2_snapw *w, uint64_t c, int delta)
{
    if (c >= w->n)
        return FAIL(w, -EINVAL, (int64_t)(c << w->cbits), "cluster %" PRIu64 " is past "
                    "the end of the file (%" PRIu64 " clusters)", c, w->n);
    uint64_t v = w->rc[c];
    if ((delta < 0 && v < (uint64_t)-delta) || (delta > 0 && v > w->rc_max - (uint64_t)delta))
        return FAIL(w, delta < 0 ? -EINVAL : -ERANGE, (int64_t)(c << w->cbits),
                    "refcount of cluster %" PRIu64 " is %" PRIu64 " and cannot be %s "
                    "(%u-bit refcounts%s)", c, v, delta < 0 ? "lowered" : "raised",
                    1u << w->q->h.refcount_order,
                    delta < 0 ? "; repair the image first with 'diskimg check -r all'" : "");
    w->rc[c] = v + (uint64_t)(int64_t)delta;
    return 0;
}

int qcow2_snapw_free_range(struct qcow2_snapw *w, uint64_t off, uint64_t len)
{
    if (!len)
        return 0;
    for (uint64_t c = off >> w->cbits; c <= (off + len - 1) >> w->cbits; c++) {
        int r = rc_add(w, c, -1);
        if (r < 0)
            return r;
    }
    return 0;
}

int qcow2_snapw_read_l1(struct qcow2_snapw *w, uint64_t off, uint32_t n, uint64_t **out)
{
    uint64_t bytes = (uint64_t)n * 8, fsize = w->q->bd.file->size;

    *out = NULL;
    if (n > QCOW2_MAX_L1_BYTES / 8)
        return FAIL(w, -EINVAL, -1, "L1 table of %" PRIu32 " entries (max %u)", n,
                    QCOW2_MAX_L1_BYTES / 8);
    if (n && ((off & (w->cs - 1)) || off == 0 || off >= fsize || bytes > fsize - off))
        return FAIL(w, -EINVAL, -1, "L1 table (%" PRIu32 " entries at offset %" PRIu64
                    ") is misaligned or runs past the end of the file", n, off);
    uint64_t *l1 = calloc(n ? n : 1, 8);
    if (!l1)
        return FAIL(w, -ENOMEM, -1, "out of memory");
    int r = n ? bfile_pread(w->q->bd.file, l1, bytes, off) : 0;
    if (r < 0) {
        free(l1);
        return r;
    }
    for (uint32_t i = 0; i < n; i++)
        l1[i] = be64_get((const uint8_t *)&l1[i]);
    *out = l1;
    return 0;
}

/* The L2 table an L1 entry names (0: none), validated, and read into w->tab. */
static int l2_of(struct qcow2_snapw *w, uint64_t e, uint32_t i, uint64_t *l2, bool read)
{
    const struct qcow2_header *h = &w->q->h;
    int r = qcow2_l1_entry_decode(h, e, i, (uint64_t)-1, l2, w->q->bd.diag,
                                  w->q->bd.filename);
    if (r < 0 || !*l2)
        return r;
    if (*l2 >> w->cbits >= w->n)
        return FAIL(w, -EINVAL, (int64_t)*l2, "L2 table %" PRIu32 " at offset %" PRIu64
                    " is past the end of the file", i, *l2);
    return read ? bfile_pread(w->q->bd.file, w->tab, w->cs, *l2) : 0;
}

static int decode(struct qcow2_snapw *w, const uint8_t *p, uint64_t guest, uint64_t where,
                  struct qcow2_l2e *d)
{
    const struct qcow2_header *h = &w->q->h;
    uint64_t e = be64_get(p), bm = h->extended_l2 ? be64_get(p + 8) : 0;

    return qcow2_l2_entry_decode(h, false, e, bm, guest, where, d, w->q->bd.diag,
                                 w->q->bd.filename);
}

int qcow2_snapw_walk(struct qcow2_snapw *w, const uint64_t *l1, uint32_t n, int delta)
{
    const struct qcow2_header *h = &w->q->h;
    /* an external data file's clusters are not counted in the image file */
    bool data_file = (h->incompatible & QCOW2_INCOMPAT_DATA_FILE) != 0;
    int r;

    for (uint32_t i = 0; i < n; i++) {
        uint64_t l2;
        if ((r = l2_of(w, l1[i], i, &l2, true)) < 0)
            return r;
        if (!l2)
            continue;
        if ((r = rc_add(w, l2 >> w->cbits, delta)) < 0)
            return r;
        if (data_file)
            continue;
        for (uint32_t j = 0; j < h->l2_entries; j++) {
            const uint8_t *p = w->tab + (uint64_t)j * h->l2_entry_bytes;
            struct qcow2_l2e d;
            uint64_t guest = ((uint64_t)i * h->l2_entries + j) << w->cbits;
            if ((r = decode(w, p, guest, l2 + (uint64_t)j * h->l2_entry_bytes, &d)) < 0)
                return r;
            if (d.kind == QK_COMPRESSED) {
                uint64_t c0, span = qcow2_compressed_span(w->cbits, d.host, d.csize, &c0);
                for (uint64_t c = c0; c < c0 + span; c++)
                    if ((r = rc_add(w, c, delta)) < 0)
                        return r;
            } else if (d.has_host && d.host) {
                if ((r = rc_add(w, d.host >> w->cbits, delta)) < 0)
                    return r;
            }
        }
    }
    return 0;
}

/* Take `k` clusters at the end (refcount 1); *first: the first index. */
static int reserve(struct qcow2_snapw *w, uint64_t k, uint64_t *first)
{
    if (w->n + k > QCOW2_SNAPW_MAX_CLUSTERS || w->n + k > (UINT64_C(1) << (56 - w->cbits)))
        return FAIL(w, -EFBIG, -1, "the image file would grow too large");
    if (w->n + k > w->cap) {
        uint64_t cap = (w->n + k) * 2;
        uint64_t *nr = realloc(w->rc, cap * sizeof(*nr));
        if (!nr)
            return FAIL(w, -ENOMEM, -1, "out of memory");
        memset(nr + w->cap, 0, (cap - w->cap) * sizeof(*nr));
        w->rc = nr;
        w->cap = cap;
    }
    for (uint64_t i = 0; i < k; i++)
        w->rc[w->n + i] = 1;
    *first = w->n;
    w->n += k;
    return 0;
}

int qcow2_snapw_append(struct qcow2_snapw *w, const void *buf, uint64_t len, uint64_t *off)
{
    uint64_t first;
    int r;

    if ((r = reserve(w, div_up(len, w->cs), &first)) < 0)
        return r;
    *off = first << w->cbits;
    if (len && (r = bfile_pwrite(w->q->bd.file, buf, len, *off)) < 0)
        return r;
    if (len % w->cs) {
        /* the rest of the last cluster: zeros (the file ends on a cluster) */
        uint64_t pad = w->cs - len % w->cs;
        uint8_t *z = calloc(1, pad);
        if (!z)
            return FAIL(w, -ENOMEM, -1, "out of memory");
        r = bfile_pwrite(w->q->bd.file, z, pad, *off + len);
        free(z);
        if (r < 0)
            return r;
    }
    return 0;
}

/* Copied flags of the L2 table in w->tab from the new refcounts; whether
 * anything changed. */
static int fix_l2_flags(struct qcow2_snapw *w, uint32_t i, uint64_t l2, bool *changed)
{
    const struct qcow2_header *h = &w->q->h;
    int r;

    *changed = false;
    for (uint32_t j = 0; j < h->l2_entries; j++) {
        uint8_t *p = w->tab + (uint64_t)j * h->l2_entry_bytes;
        struct qcow2_l2e d;
        uint64_t guest = ((uint64_t)i * h->l2_entries + j) << w->cbits;
        if ((r = decode(w, p, guest, l2 + (uint64_t)j * h->l2_entry_bytes, &d)) < 0)
            return r;
        if (d.kind == QK_COMPRESSED || !d.has_host || !d.host ||
            (h->incompatible & QCOW2_INCOMPAT_DATA_FILE))
            continue;
        uint64_t e = be64_get(p);
        uint64_t want = w->rc[d.host >> w->cbits] == 1 ? e | QCOW2_L2_COPIED
                                                       : e & ~QCOW2_L2_COPIED;
        if (want != e) {
            be64_put(p, want);
            *changed = true;
        }
    }
    return 0;
}

/* Active L2 tables whose copied flags change are copied (the old one may
 * still be a snapshot's, and must not change before the switch). */
static int fix_active(struct qcow2_snapw *w, bool *l1_changed)
{
    int r;

    for (uint32_t i = 0; i < w->l1_size; i++) {
        uint64_t l2, nl2;
        bool changed;
        if ((r = l2_of(w, w->l1[i], i, &l2, true)) < 0)
            return r;
        if (!l2)
            continue;
        if ((r = fix_l2_flags(w, i, l2, &changed)) < 0)
            return r;
        if (!changed)
            continue;
        if ((r = qcow2_snapw_append(w, w->tab, w->cs, &nl2)) < 0 ||
            (r = rc_add(w, l2 >> w->cbits, -1)) < 0)
            return r;
        w->l1[i] = nl2;
        *l1_changed = true;
    }
    for (uint32_t i = 0; i < w->l1_size; i++) {
        uint64_t l2 = w->l1[i] & QCOW2_L1_OFFSET_MASK;
        uint64_t want = !l2 ? w->l1[i] & ~QCOW2_L1_COPIED
                      : w->rc[l2 >> w->cbits] == 1 ? w->l1[i] | QCOW2_L1_COPIED
                                                   : w->l1[i] & ~QCOW2_L1_COPIED;
        *l1_changed |= want != w->l1[i];
        w->l1[i] = want;
    }
    return 0;
}

/* New refcount blocks for every cluster and a new table, appended; the old
 * ones freed in the new counts.  *table_off, *table_clusters: the new table. */
static int write_refcounts(struct qcow2_snapw *w, uint64_t *table_off, uint32_t *table_clusters)
{
    const struct qcow2_header *h = &w->q->h;
    uint64_t per = (w->cs * 8) >> w->order;
    uint64_t nb = 0, nt = 0;
    int r;

    for (uint64_t i = 0; i < w->old_reft_len; i++) {
        uint64_t off = w->old_reft[i] & QCOW2_REFT_OFFSET_MASK;
        if (off && (r = rc_add(w, off >> w->cbits, -1)) < 0)
            return r;
    }
    if ((r = qcow2_snapw_free_range(w, h->refcount_table_offset,
                                    (uint64_t)h->refcount_table_clusters << w->cbits)) < 0)
        return r;
    for (int it = 0;; it++) {
        uint64_t end = w->n + nb + nt;
        uint64_t nb2 = div_up(end, per), nt2 = div_up(nb2 * 8, w->cs);
        if (nb2 == nb && nt2 == nt)
            break;
        if (it > 64)
            return FAIL(w, -EIO, -1, "internal error: refcount layout does not converge");
        nb = nb2;
        nt = nt2;
    }
    if ((nt << w->cbits) > QCOW2_MAX_REFT_BYTES)
        return FAIL(w, -EFBIG, -1, "the refcount table would grow past %u bytes",
                    QCOW2_MAX_REFT_BYTES);
    /* reserve the clusters (refcount 1), then fill and write them */
    uint64_t first;
    if ((r = reserve(w, nb + nt, &first)) < 0)
        return r;
    uint8_t *tbl = calloc(nt, w->cs);
    if (!tbl)
        return FAIL(w, -ENOMEM, -1, "out of memory");
    r = 0;
    for (uint64_t b = 0; b < nb && r == 0; b++) {
        memset(w->tab, 0, w->cs);
        for (uint64_t j = 0; j < per && b * per + j < w->n; j++)
            qcow2_rc_entry_set(w->tab, w->order, j, w->rc[b * per + j]);
        uint64_t at = (first + b) << w->cbits;
        be64_put(tbl + 8 * b, at);
        r = bfile_pwrite(w->q->bd.file, w->tab, w->cs, at);
    }
    if (r == 0)
        r = bfile_pwrite(w->q->bd.file, tbl, nt << w->cbits, (first + nb) << w->cbits);
    free(tbl);
    *table_off = (first + nb) << w->cbits;
    *table_clusters = (uint32_t)nt;
    return r;
}

int qcow2_snapw_prepare(struct qcow2_snapw *w, bool keep_l1, bool free_old_l1,
                        const uint8_t *tab, uint64_t len, struct qcow2_snapw_layout *out)
{
    struct qcow2 *q = w->q;
    const struct qcow2_header *h = &q->h;
    bool l1_changed = !keep_l1;
    int r;

    memset(out, 0, sizeof(*out));
    out->l1_off = h->l1_table_offset;
    if ((r = fix_active(w, &l1_changed)) < 0)
        return r;
    if (l1_changed) {
        if (free_old_l1 && (r = qcow2_snapw_free_range(w, h->l1_table_offset,
                                                       (uint64_t)h->l1_size * 8)) < 0)
            return r;
        uint8_t *b = calloc(w->l1_size ? w->l1_size : 1, 8);
        if (!b)
            return FAIL(w, -ENOMEM, -1, "out of memory");
        for (uint32_t i = 0; i < w->l1_size; i++)
            be64_put(b + 8 * (uint64_t)i, w->l1[i]);
        out->l1_off = 0;
        r = w->l1_size ? qcow2_snapw_append(w, b, (uint64_t)w->l1_size * 8, &out->l1_off) : 0;
        free(b);
        if (r < 0)
            return r;
    }
    if (h->nb_snapshots && (r = qcow2_snapw_free_range(w, h->snapshots_offset,
                                                       q->snapshots_size)) < 0)
        return r;
    if (len && (r = qcow2_snapw_append(w, tab, len, &out->snap_off)) < 0)
        return r;
    if ((r = write_refcounts(w, &out->reft_off, &out->reft_clusters)) < 0)
        return r;
    return bfile_sync(q->bd.file);
}

int qcow2_snapw_commit(struct qcow2_snapw *w, bool keep_l1, bool free_old_l1,
                       const uint8_t *tab, uint64_t len, uint32_t nb)
{
    struct qcow2 *q = w->q;
    const struct qcow2_header *h = &q->h;
    struct qcow2_snapw_layout l;
    int r;

    if ((r = qcow2_snapw_prepare(w, keep_l1, free_old_l1, tab, nb ? len : 0, &l)) < 0)
        return r;
    /* the switch: bytes 24..71 in one write (inside the first sector) */
    uint8_t b[QH_V2_LENGTH - QH_SIZE];
    be64_put(b + (QH_SIZE - QH_SIZE), w->size);
    be32_put(b + (QH_CRYPT_METHOD - QH_SIZE), h->crypt_method);
    be32_put(b + (QH_L1_SIZE - QH_SIZE), w->l1_size);
    be64_put(b + (QH_L1_TABLE_OFFSET - QH_SIZE), l.l1_off);
    be64_put(b + (QH_REFCOUNT_TABLE_OFFSET - QH_SIZE), l.reft_off);
    be32_put(b + (QH_REFCOUNT_TABLE_CLUSTERS - QH_SIZE), l.reft_clusters);
    be32_put(b + (QH_NB_SNAPSHOTS - QH_SIZE), nb);
    be64_put(b + (QH_SNAPSHOTS_OFFSET - QH_SIZE), l.snap_off);
    if ((r = bfile_pwrite(q->bd.file, b, sizeof(b), QH_SIZE)) < 0)
        return r;
    return bfile_sync(q->bd.file);
}
