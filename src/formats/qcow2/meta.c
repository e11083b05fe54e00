/* qcow2: where the image's own metadata lies, so that a data cluster that
 * points into it is refused instead of handing the metadata out as guest
 * data (issue 10 item 5).
 *
 * Built at open (after the snapshot table and the bitmap directory are
 * read): the header cluster (with the header extensions and the backing
 * file name), the active L1 table, the refcount table and its blocks, the
 * snapshot table and each snapshot's L1 table, the bitmap directory and
 * each bitmap's table go into a metamap.  L2 tables are many (up to 4M)
 * and all one cluster: they are kept as a sorted array of offsets, the
 * same size as the L1 table they come from, from the active L1 table and
 * the one of a snapshot being read.  Only what lies inside the file is
 * recorded: nothing past its end can be read as data anyway.
 *
 * Host offsets in an external data file refer to that file, which holds
 * no metadata: they are not checked.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "formats/qcow2/read_int.h"
#include "io/bfile.h"
#include "util/diag.h"
#include "util/endian.h"

/* Record [off, off+len) clipped to the file (into the scratch map that
 * qcow2_meta_build() merges). */
static int add(struct qcow2 *q, struct metamap *m, uint64_t off, uint64_t len,
               const char *what)
{
    if (off >= q->file_size || len == 0)
        return 0;
    if (len > q->file_size - off)
        len = q->file_size - off;
    int r = metamap_add(m, off, len, what);
    if (r < 0)
        return diag_fail(q->bd.diag, r, q->bd.filename, -1, "out of memory");
    return 0;
}

/* Ranges that overlap each other (only in a corrupt image) become one, so
 * that a lookup takes one step: a hostile image could otherwise lay one
 * huge range over thousands of small ones and make every lookup walk
 * them.  The merged range keeps the name of the first. */
static int merge_into(struct qcow2 *q, struct metamap *scratch)
{
    int r = metamap_seal(scratch);

    for (size_t i = 0; r == 0 && i < scratch->n;) {
        struct metarange cur = scratch->r[i++];
        while (i < scratch->n && scratch->r[i].off < cur.off + cur.len) {
            uint64_t end = scratch->r[i].off + scratch->r[i].len;
            if (end > cur.off + cur.len)
                cur.len = end - cur.off;
            i++;
        }
        r = metamap_add(&q->meta, cur.off, cur.len, cur.what);
    }
    if (r == 0)
        r = metamap_seal(&q->meta);
    if (r < 0)
        return diag_fail(q->bd.diag, r, q->bd.filename, -1, "out of memory");
    return 0;
}

/* The refcount table's part inside the file, and each block it names. */
static int add_refcounts(struct qcow2 *q, struct metamap *m)
{
    const struct qcow2_header *h = &q->h;
    uint64_t cs = h->cluster_size, off = h->refcount_table_offset;
    uint64_t bytes = (uint64_t)h->refcount_table_clusters * cs;
    int r;

    if ((r = add(q, m, off, bytes, "refcount table")) < 0 || off >= q->file_size)
        return r;
    if (bytes > q->file_size - off)
        bytes = (q->file_size - off) & ~7ULL;
    uint8_t *t = malloc(bytes ? bytes : 1);
    if (!t)
        return diag_fail(q->bd.diag, -ENOMEM, q->bd.filename, -1, "out of memory");
    r = bfile_pread(q->bd.file, t, bytes, off);
    /* runs of adjacent blocks as one range (a table names up to 1M) */
    uint64_t run_off = 0, run_len = 0;
    for (uint64_t i = 0; r == 0 && i < bytes / 8; i++) {
        uint64_t b = be64_get(t + i * 8) & QCOW2_REFT_OFFSET_MASK;
        if (b == 0 || b & (cs - 1) || b >= q->file_size)
            continue;   /* check reports these; nothing to protect */
        if (run_len && b == run_off + run_len) {
            run_len += cs;
            continue;
        }
        r = add(q, m, run_off, run_len, "refcount block");
        run_off = b;
        run_len = cs;
    }
    if (r == 0)
        r = add(q, m, run_off, run_len, "refcount block");
    free(t);
    return r;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static bool is_l2(const struct qcow2 *q, uint64_t l2)
{
    return l2 && !(l2 & (q->h.cluster_size - 1)) && l2 < q->file_size;
}

int qcow2_meta_add_l2s(struct qcow2 *q)
{
    uint64_t n = q->nl2s, more = 0;
    int r;

    for (uint32_t i = 0; i < q->l1_len; i++)
        more += is_l2(q, q->l1[i] & QCOW2_L1_OFFSET_MASK);
    if (!more)
        return 0;
    /* the list lives as long as the image: it counts against the chain's
     * table budget like the L1 tables it is made from (only the tables the
     * L1 table names, not its length: most images have few) */
    uint64_t want = (n + more) * sizeof(*q->l2s);
    if (want > q->l2s_budget) {
        if ((r = bd_table_budget(&q->bd, want - q->l2s_budget, q->bd.filename,
                                 "the list of L2 tables")) < 0)
            return r;
        q->l2s_budget = want;
    }
    uint64_t *v = realloc(q->l2s, (size_t)want);
    if (!v)
        return diag_fail(q->bd.diag, -ENOMEM, q->bd.filename, -1, "out of memory");
    for (uint32_t i = 0; i < q->l1_len; i++) {
        uint64_t l2 = q->l1[i] & QCOW2_L1_OFFSET_MASK;
        if (is_l2(q, l2))
            v[n++] = l2;
    }
    qsort(v, n, sizeof(*v), cmp_u64);
    uint64_t k = 0;
    for (uint64_t i = 0; i < n; i++)
        if (k == 0 || v[i] != v[k - 1])
            v[k++] = v[i];
    q->l2s = v;
    q->nl2s = k;
    return 0;
}

int qcow2_meta_build(struct qcow2 *q)
{
    const struct qcow2_header *h = &q->h;
    struct metamap m = { 0 };
    int r;

    if ((r = add(q, &m, 0, h->cluster_size, "header cluster")) < 0 ||
        (r = add(q, &m, h->l1_table_offset, (uint64_t)h->l1_size * 8, "L1 table")) < 0 ||
        (r = add_refcounts(q, &m)) < 0)
        goto out;
    if (q->nsnaps && (r = add(q, &m, h->snapshots_offset, q->snapshots_size,
                              "snapshot table")) < 0)
        goto out;
    for (uint32_t i = 0; i < q->nsnaps; i++) {
        const struct qcow2_snapshot *sn = &q->snaps[i];
        if (sn->l1_table_offset & (h->cluster_size - 1))
            continue;   /* refused when the snapshot is read */
        if ((r = add(q, &m, sn->l1_table_offset, (uint64_t)sn->l1_size * 8,
                     "L1 table of a snapshot")) < 0)
            goto out;
    }
    if (q->nbitmaps && (r = add(q, &m, h->bitmap_directory_offset,
                                h->bitmap_directory_size, "bitmap directory")) < 0)
        goto out;
    for (uint32_t i = 0; i < q->nbitmaps; i++)
        if ((r = add(q, &m, q->bitmaps[i].table_offset,
                     (uint64_t)q->bitmaps[i].table_size * 8, "bitmap table")) < 0)
            goto out;
    if ((r = merge_into(q, &m)) == 0)
        r = qcow2_meta_add_l2s(q);
out:
    metamap_free(&m);
    return r;
}

void qcow2_meta_free(struct qcow2 *q)
{
    metamap_free(&q->meta);
    free(q->l2s);
    q->l2s = NULL;
    q->nl2s = 0;
    bd_table_return(&q->bd, q->l2s_budget);
    q->l2s_budget = 0;
}

/* An L2 table that overlaps [off, off+len).  Tables are whole aligned
 * clusters: the first one at or after `off` rounded down to a cluster is
 * the only candidate to check first; it overlaps if it starts before the
 * end of the range. */
static bool find_l2(const struct qcow2 *q, uint64_t off, uint64_t len, uint64_t *l2)
{
    uint64_t first = off & ~((uint64_t)q->h.cluster_size - 1);
    uint64_t end = off + len < off ? UINT64_MAX : off + len;
    size_t lo = 0, hi = q->nl2s;

    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (q->l2s[mid] < first)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo < q->nl2s && q->l2s[lo] < end) {
        *l2 = q->l2s[lo];
        return true;
    }
    return false;
}

bool qcow2_meta_find(const struct qcow2 *q, uint64_t off, uint64_t len,
                     struct metarange *hit)
{
    uint64_t l2;

    if (q->data || len == 0)
        return false;
    const struct metarange *m = metamap_find(&q->meta, off, len);
    if (m) {
        *hit = *m;
        return true;
    }
    if (find_l2(q, off, len, &l2)) {
        *hit = (struct metarange){ l2, q->h.cluster_size, "L2 table" };
        return true;
    }
    return false;
}

int qcow2_meta_refuse(struct qcow2 *q, uint64_t host, uint64_t len, uint64_t guest,
                      bool compressed)
{
    struct metarange m;

    if (!qcow2_meta_find(q, host, len, &m))
        return 0;
    return diag_fail(q->bd.diag, -EINVAL, q->bd.filename, (int64_t)host,
                     "%s of guest offset %" PRIu64 " (host offset %" PRIu64 ", %" PRIu64
                     " bytes) overlaps the %s (host offset %" PRIu64 ", %" PRIu64
                     " bytes): metadata read as data", compressed ? "compressed data"
                     : "data cluster", guest, host, len, m.what, m.off, m.len);
}
