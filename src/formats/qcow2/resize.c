/* qcow2 resize: change the virtual size of an image in place, as
 * `qemu-img resize` does.
 *
 * Growing: when the L1 table is too short for the new size, a new one is
 * appended at the end of the file (with its refcounts, and new refcount
 * blocks or a new refcount table where needed), the old entries copied and
 * synced; then the header takes the new size, L1 table (and refcount
 * table) in one write and is synced; only then are the old tables freed.
 * A crash leaves the old image or the new one, plus leaked clusters.
 * The new range reads as zeros: L2 entries an image holds past its end
 * are dropped first and the tail of its last cluster zeroed (a tail that
 * cannot be, in a compressed or shared cluster, refuses the grow).
 *
 * Shrinking (qemu-img resize --shrink): every cluster past the new end
 * (rounded up to a cluster) is dropped from its L2 table, the table is
 * written, then the clusters' refcounts are lowered (a table shared with an
 * internal snapshot is copied first, the snapshot keeps the original); L2
 * tables entirely past the new end are dropped from the L1 table and
 * freed; the tail of a
 * plain data cluster cut by the new end is zeroed (qemu leaves those bytes,
 * which would reappear if the image grew again); the file is cut after the
 * last cluster in use; the header takes the new size last.  Both trust
 * the refcounts, so the image is checked first (qcow2_check_sound, as
 * convert -n does) and one with corruptions is refused before anything
 * changes; the refcounts of what is freed are verified again as it goes.
 *
 * Refused: images with external data files, persistent bitmaps (their
 * size is tied to the disk's), dirty or corrupt images (check -r first),
 * v2 images with snapshots (as qemu), and growing an image whose backing
 * file is larger than it (the new range would show the backing file's
 * data).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "formats/qcow2/amend.h"
#include "formats/qcow2/read_int.h"
#include "formats/qcow2/refcount.h"
#include "io/bfile.h"
#include "util/diag.h"
#include "util/endian.h"

static uint64_t div_up(uint64_t a, uint64_t b)
{
    return a / b + (a % b != 0);
}

#define FAIL(q, err, ...) diag_fail((q)->bd.diag, err, (q)->bd.filename, -1, __VA_ARGS__)

/* L1 entries a virtual size needs. */
static uint64_t l1_for(const struct qcow2_header *h, uint64_t size)
{
    return div_up(div_up(size, h->cluster_size), h->l2_entries);
}

static int refuse(struct qcow2 *q, uint64_t new_size, uint32_t version)
{
    const struct qcow2_header *h = &q->h;

    if (!q->bd.file->writable || q->bd.file->kind == BFILE_STREAM)
        return FAIL(q, -EROFS, "the image is not open for writing");
    if (q->snapshot >= 0)
        return FAIL(q, -EINVAL, "a snapshot cannot be resized");
    if (new_size % 512)
        return FAIL(q, -EINVAL, "The new size must be a multiple of 512");
    int r = qcow2_refuse_unclean(q);
    if (r < 0)
        return r;
    if (h->incompatible & QCOW2_INCOMPAT_DATA_FILE)
        return FAIL(q, -ENOTSUP, "resizing images with an external data file is not "
                    "supported");
    if (h->has_bitmaps_ext)
        return FAIL(q, -ENOTSUP, "resizing images with persistent bitmaps is not "
                    "supported (remove them first, e.g. qemu-img bitmap --remove)");
    if (q->nsnaps && version < 3)
        return FAIL(q, -ENOTSUP, "Can't resize a v2 image which has snapshots");
    if (new_size > q->bd.size && q->bd.backing && q->bd.backing->size > q->bd.size)
        return FAIL(q, -ENOTSUP, "the backing file is larger than the image: growing "
                    "it would show the backing file's data in the new space");
    if (new_size > (UINT64_C(1) << 62) ||
        l1_for(h, new_size) > QCOW2_MAX_L1_BYTES / 8)
        return FAIL(q, -EFBIG, "the new size needs an L1 table larger than %u bytes "
                    "(qemu's limit); use an image with larger clusters",
                    QCOW2_MAX_L1_BYTES);
    return 0;
}

int qcow2_resize_check(struct qcow2 *q, uint64_t size, uint32_t version)
{
    return refuse(q, size, version);
}

/* The L1 table as stored, all l1_size entries (host order). */
static int read_l1(struct qcow2 *q, uint64_t **out)
{
    const struct qcow2_header *h = &q->h;
    uint64_t bytes = (uint64_t)h->l1_size * 8;
    uint64_t *l1;

    *out = NULL;
    if (!h->l1_size)
        return 0;
    if (h->l1_table_offset >= q->file_size || bytes > q->file_size - h->l1_table_offset)
        return FAIL(q, -EINVAL, "the L1 table (%" PRIu32 " entries at offset %" PRIu64
                    ") runs past the end of the file", h->l1_size, h->l1_table_offset);
    if (!(l1 = malloc(bytes)))
        return FAIL(q, -ENOMEM, "out of memory");
    int r = bfile_pread(q->bd.file, l1, bytes, h->l1_table_offset);
    if (r < 0) {
        free(l1);
        return r;
    }
    for (uint32_t i = 0; i < h->l1_size; i++)
        l1[i] = be64_get((const uint8_t *)&l1[i]);
    *out = l1;
    return 0;
}

/* Header bytes 24..59: size, crypt method, L1 size and offset, refcount
 * table offset and clusters -- one write. */
static int write_header(struct qcow2 *q, uint64_t size, uint32_t l1_size, uint64_t l1_off,
                        uint64_t reft_off, uint32_t reft_clusters)
{
    const struct qcow2_header *h = &q->h;
    uint8_t b[QH_REFCOUNT_TABLE_CLUSTERS + 4 - QH_SIZE];
    int r;

    be64_put(b + (QH_SIZE - QH_SIZE), size);
    be32_put(b + (QH_CRYPT_METHOD - QH_SIZE), h->crypt_method);
    be32_put(b + (QH_L1_SIZE - QH_SIZE), l1_size);
    be64_put(b + (QH_L1_TABLE_OFFSET - QH_SIZE), l1_off);
    be64_put(b + (QH_REFCOUNT_TABLE_OFFSET - QH_SIZE), reft_off);
    be32_put(b + (QH_REFCOUNT_TABLE_CLUSTERS - QH_SIZE), reft_clusters);
    if ((r = bfile_pwrite(q->bd.file, b, sizeof(b), QH_SIZE)) < 0 ||
        (r = bfile_sync(q->bd.file)) < 0)
        return r;
    return 0;
}

static int grow(struct qcow2 *q, uint64_t new_size, const uint64_t *l1)
{
    struct qcow2_header *h = &q->h;
    uint64_t need = l1_for(h, new_size), first;
    struct qcow2_rc rc;
    struct qcow2_rc_grown g;
    int r;

    if (need <= h->l1_size)
        return write_header(q, new_size, h->l1_size, h->l1_table_offset,
                            h->refcount_table_offset, h->refcount_table_clusters);
    uint64_t clusters = div_up(need * 8, h->cluster_size);
    if ((r = qcow2_rc_open(&rc, q, q->bd.diag)) < 0)
        return r;
    if ((r = qcow2_rc_append(&rc, clusters, &first, &g)) < 0)
        goto out;
    /* the new table: the old entries, then empty ones */
    uint8_t *buf = calloc(clusters, h->cluster_size);
    if (!buf) {
        r = FAIL(q, -ENOMEM, "out of memory");
        goto out;
    }
    for (uint32_t i = 0; i < h->l1_size; i++)
        be64_put(buf + 8 * (uint64_t)i, l1[i]);
    uint64_t off = first << h->cluster_bits;
    r = bfile_pwrite(q->bd.file, buf, clusters << h->cluster_bits, off);
    free(buf);
    if (r < 0 || (r = bfile_sync(q->bd.file)) < 0)
        goto out;
    /* the switch */
    if ((r = write_header(q, new_size, (uint32_t)need, off, rc.table_off,
                          rc.table_clusters)) < 0)
        goto out;
    uint64_t old_off = h->l1_table_offset, old_bytes = (uint64_t)h->l1_size * 8;
    h->l1_size = (uint32_t)need;
    h->l1_table_offset = off;
    h->refcount_table_offset = rc.table_off;
    h->refcount_table_clusters = rc.table_clusters;
    /* the old tables are leaks now: free them */
    if (old_off && old_bytes && (r = qcow2_rc_free_range(&rc, old_off, old_bytes)) < 0)
        goto out;
    if (g.new_table &&
        (r = qcow2_rc_free_range(&rc, g.old_table_off,
                                 (uint64_t)g.old_table_clusters << h->cluster_bits)) < 0)
        goto out;
    if ((r = qcow2_rc_flush(&rc)) == 0)
        r = bfile_sync(q->bd.file);
out:
    qcow2_rc_close(&rc);
    return r;
}

/* ---- shrinking ---------------------------------------------------------------- */

/* Clusters losing a reference, one entry per reference.  Grown as
 * entries are found, never sized in advance from what an entry may span. */
struct frees {
    uint64_t *c;
    size_t n, cap;
};

static int add_free(struct qcow2 *q, struct frees *f, uint64_t cluster)
{
    if (f->n == f->cap) {
        size_t cap = f->cap ? 2 * f->cap : 256;
        uint64_t *c = realloc(f->c, cap * sizeof(*c));
        if (!c)
            return FAIL(q, -ENOMEM, "out of memory");
        f->c = c;
        f->cap = cap;
    }
    f->c[f->n++] = cluster;
    return 0;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Lower the refcount of every cluster in `c` (n entries, sorted in place)
 * by how often it appears -- after checking that none would go below 0. */
static int free_clusters(struct qcow2 *q, struct qcow2_rc *rc, struct frees *f)
{
    uint64_t *c = f->c;
    size_t n = f->n;
    int r;

    if (n)
        qsort(c, n, sizeof(*c), cmp_u64);     /* (c is NULL when nothing was added) */
    for (size_t i = 0; i < n;) {
        size_t j = i;
        uint64_t v;
        while (j < n && c[j] == c[i])
            j++;
        if ((r = qcow2_rc_get(rc, c[i], &v)) < 0)
            return r;
        if (v < j - i)
            return diag_fail(q->bd.diag, -EINVAL, q->bd.filename,
                             (int64_t)(c[i] << q->h.cluster_bits),
                             "cluster %" PRIu64 " has %zu references but refcount %"
                             PRIu64 "; repair the image first (check -r all)",
                             c[i], j - i, v);
        i = j;
    }
    return 0;
}

static int apply_frees(struct qcow2_rc *rc, const struct frees *f)
{
    for (size_t i = 0; i < f->n; i++) {
        int r = qcow2_rc_add(rc, f->c[i], -1);
        if (r < 0)
            return r;
    }
    return 0;
}

static int write_l1_entry(struct qcow2 *q, uint64_t *l1, uint64_t i, uint64_t e)
{
    uint8_t b[8];

    be64_put(b, e);
    l1[i] = e;
    return bfile_pwrite(q->bd.file, b, 8, q->h.l1_table_offset + i * 8);
}

/* Drop the entries of guest clusters [g0, g1), all under L1 entry l1i
 * (table at l2): the clusters lose the active image's reference.
 *   - a table wholly past the new end leaves the L1 table, then loses
 *     that reference too (it may still be a snapshot's);
 *   - a table of the active image alone is written without the entries;
 *   - a table shared with a snapshot is copied first (a new cluster), and
 *     the L1 entry moves to the copy.
 * Refcounts are verified before anything is written, and lowered after. */
static int discard_in_table(struct qcow2 *q, struct qcow2_rc *rc, uint64_t *l1,
                            uint64_t l1i, uint64_t l2, uint64_t g0, uint64_t g1,
                            bool whole, uint8_t *tab, struct frees *frees)
{
    const struct qcow2_header *h = &q->h;
    uint64_t cs = h->cluster_size, v;
    bool changed = false;
    int r;

    if (l2 >= q->file_size || cs > q->file_size - l2)
        return diag_fail(q->bd.diag, -EINVAL, q->bd.filename, (int64_t)l2,
                         "L2 table %" PRIu64 " at offset %" PRIu64 " is past the end of "
                         "the file", l1i, l2);
    if ((r = qcow2_rc_get(rc, l2 >> h->cluster_bits, &v)) < 0)
        return r;
    if ((r = bfile_pread(q->bd.file, tab, cs, l2)) < 0)
        return r;
    for (uint64_t g = g0; g < g1; g++) {
        uint64_t j = g % h->l2_entries, where = l2 + j * h->l2_entry_bytes;
        uint8_t *p = tab + j * h->l2_entry_bytes;
        uint64_t e = be64_get(p), bm = h->extended_l2 ? be64_get(p + 8) : 0;
        struct qcow2_l2e d;
        if (!e && !bm)
            continue;
        if ((r = qcow2_l2_entry_decode(h, false, e, bm, g * cs, where, &d, q->bd.diag,
                                       q->bd.filename)) < 0)
            return r;
        if (d.kind == QK_COMPRESSED) {
            uint64_t c0, span = qcow2_compressed_span(h->cluster_bits, d.host, d.csize, &c0);
            for (uint64_t c = c0; c < c0 + span; c++)
                if ((r = add_free(q, frees, c)) < 0)
                    return r;
        } else if (d.host && (r = add_free(q, frees, d.host >> h->cluster_bits)) < 0) {
            return r;
        }
        memset(p, 0, h->l2_entry_bytes);
        changed = true;
    }
    if (whole) {
        if ((r = add_free(q, frees, l2 >> h->cluster_bits)) < 0 ||
            (r = free_clusters(q, rc, frees)) < 0 || (r = write_l1_entry(q, l1, l1i, 0)) < 0)
            return r;
        return apply_frees(rc, frees);
    }
    if (!changed)
        return 0;
    if (v <= 1) {
        if ((r = free_clusters(q, rc, frees)) < 0 ||
            (r = bfile_pwrite(q->bd.file, tab, cs, l2)) < 0)
            return r;
        return apply_frees(rc, frees);
    }
    /* shared with a snapshot: the active image gets its own copy */
    uint64_t first;
    struct qcow2_rc_grown gr;
    if ((r = add_free(q, frees, l2 >> h->cluster_bits)) < 0 ||
        (r = free_clusters(q, rc, frees)) < 0)
        return r;
    if ((r = qcow2_rc_append(rc, 1, &first, &gr)) < 0)
        return r;
    /* the refcount table had to grow: switch the header to it now */
    if (gr.new_table && (r = qcow2_rc_adopt_table(rc, q, &gr)) < 0)
        return r;
    uint64_t nl2 = first << h->cluster_bits;
    if ((r = bfile_pwrite(q->bd.file, tab, cs, nl2)) < 0 ||
        (r = qcow2_rc_flush(rc)) < 0 || (r = bfile_sync(q->bd.file)) < 0 ||
        (r = write_l1_entry(q, l1, l1i, nl2 | QCOW2_L1_COPIED)) < 0)
        return r;
    return apply_frees(rc, frees);
}

/* The host offset of the plain data cluster holding guest offset `size`
 * (inside a cluster) when nothing else shares it, else 0 (unallocated,
 * zero, compressed, shared with a snapshot, past the end of the file). */
static int own_tail_cluster(struct qcow2 *q, struct qcow2_rc *rc, const uint64_t *l1,
                            uint64_t size, uint8_t *tab, uint64_t *host)
{
    const struct qcow2_header *h = &q->h;
    uint64_t cs = h->cluster_size, g = size / cs, in = size % cs, l2, v;
    struct qcow2_l2e d;
    int r;

    *host = 0;
    if (!in || g / h->l2_entries >= h->l1_size)
        return 0;
    uint64_t l1i = g / h->l2_entries;
    if ((r = qcow2_l1_entry_decode(h, l1[l1i], (uint32_t)l1i,
                                   h->l1_table_offset + l1i * 8, &l2, q->bd.diag,
                                   q->bd.filename)) < 0 || !l2)
        return r;
    if (l2 >= q->file_size || cs > q->file_size - l2)
        return 0;
    if ((r = bfile_pread(q->bd.file, tab, cs, l2)) < 0)
        return r;
    uint64_t j = g % h->l2_entries;
    const uint8_t *p = tab + j * h->l2_entry_bytes;
    if ((r = qcow2_l2_entry_decode(h, false, be64_get(p),
                                   h->extended_l2 ? be64_get(p + 8) : 0, g * cs,
                                   l2 + j * h->l2_entry_bytes, &d, q->bd.diag,
                                   q->bd.filename)) < 0)
        return r;
    if (d.kind != QK_DATA || !d.host || d.host >= q->file_size)
        return 0;
    /* only a cluster nothing else shares (a snapshot keeps its bytes) */
    if ((r = qcow2_rc_get(rc, d.host >> h->cluster_bits, &v)) < 0 || v != 1)
        return r;
    *host = d.host;
    return 0;
}

/* Zero the bytes of a plain data cluster past the new end. */
static int zero_tail(struct qcow2 *q, struct qcow2_rc *rc, const uint64_t *l1,
                     uint64_t new_size, uint8_t *tab)
{
    uint64_t cs = q->h.cluster_size, in = new_size % cs, host;
    int r = own_tail_cluster(q, rc, l1, new_size, tab, &host);

    if (r < 0 || !host)
        return r;
    uint64_t end = host + cs < q->file_size ? host + cs : q->file_size;
    if (host + in >= end)
        return 0;
    uint8_t *z = calloc(1, cs);
    if (!z)
        return FAIL(q, -ENOMEM, "out of memory");
    r = bfile_pwrite(q->bd.file, z, end - host - in, host + in);
    free(z);
    return r;
}

/* Cut the file after the last cluster in use. */
static int truncate_tail(struct qcow2 *q, struct qcow2_rc *rc)
{
    struct bfile *f = q->bd.file;
    uint64_t cs = q->h.cluster_size, c;
    int r;

    if (f->kind != BFILE_REGULAR)
        return 0;
    /* the file may have grown (a copied L2 table) */
    if ((r = bfile_refresh_size(f)) < 0)
        return r;
    q->file_size = f->size;
    if ((r = qcow2_rc_used_end(rc, div_up(q->file_size, cs), &c)) < 0)
        return r;
    if (c * cs >= q->file_size)
        return 0;
    if (ftruncate(f->fd, (off_t)(c * cs)) < 0)
        return diag_errno(q->bd.diag, -errno, q->bd.filename, -1, "cannot truncate");
    return bfile_refresh_size(f);
}

/* ---- growing: the new range reads as zeros ----------------------------------
 *
 * A hostile image (or one another tool shrank) may hold L2 entries for
 * guest clusters past its virtual size, and bytes past the end in its last
 * cluster: growing would show them.  The entries are dropped as a shrink
 * drops them; the tail is zeroed where only this image uses the cluster
 * (zero_tail); a tail that cannot be (a compressed cluster, one a snapshot
 * shares) and does not read as zeros refuses the grow. */

struct exposed {
    uint64_t g0, g1;            /* guest clusters the new size shows */
    bool entries;               /* some of them have L2 entries */
    bool tail;                  /* the old last cluster's tail is not zeros */
};

/* Whether guest clusters [g0, g1) have an L2 entry in the active tables. */
static int any_entry(struct qcow2 *q, const uint64_t *l1, uint64_t g0, uint64_t g1,
                     uint8_t *tab, bool *found)
{
    const struct qcow2_header *h = &q->h;
    uint64_t per = h->l2_entries, cs = h->cluster_size, last = 0;
    int r;

    *found = false;
    for (uint64_t g = g0; g < g1 && !*found;) {
        uint64_t l1i = g / per, end = (l1i + 1) * per < g1 ? (l1i + 1) * per : g1, l2;
        if (l1i >= h->l1_size)
            break;
        if ((r = qcow2_l1_entry_decode(h, l1[l1i], (uint32_t)l1i,
                                       h->l1_table_offset + l1i * 8, &l2, q->bd.diag,
                                       q->bd.filename)) < 0)
            return r;
        if (l2 && l2 != last) {
            if (l2 >= q->file_size || cs > q->file_size - l2)
                return diag_fail(q->bd.diag, -EINVAL, q->bd.filename, (int64_t)l2,
                                 "L2 table %" PRIu64 " at offset %" PRIu64 " is past the "
                                 "end of the file", l1i, l2);
            if ((r = bfile_pread(q->bd.file, tab, cs, l2)) < 0)
                return r;
            last = l2;  /* (a table every L1 entry names is read once) */
            for (uint64_t j = g % per; j <= (end - 1) % per && !*found; j++)
                for (unsigned k = 0; k < h->l2_entry_bytes; k++)
                    *found |= tab[j * h->l2_entry_bytes + k] != 0;
        }
        g = end;
    }
    return 0;
}

/* What growing to new_size shows that is not zeros (nothing written). */
static int look_at_new_range(struct qcow2 *q, uint64_t new_size, const uint64_t *l1,
                             uint8_t *tab, struct exposed *x)
{
    const struct qcow2_header *h = &q->h;
    uint64_t cs = h->cluster_size, old = q->bd.size, cap = (uint64_t)h->l1_size * h->l2_entries;
    int r;

    memset(x, 0, sizeof(*x));
    x->g0 = div_up(old, cs);
    x->g1 = div_up(new_size, cs) < cap ? div_up(new_size, cs) : cap;
    if (x->g0 < x->g1 && (r = any_entry(q, l1, x->g0, x->g1, tab, &x->entries)) < 0)
        return r;
    if (old % cs == 0)
        return 0;
    /* the old last cluster past the old end, read as the guest would see
     * it once grown: the reader stops at the virtual size, so it is moved
     * to the end of that cluster for this read */
    uint64_t end = (old / cs + 1) * cs, n = end - old;
    q->bd.size = end;
    r = qcow2_pread(&q->bd, tab, n, old);
    q->bd.size = old;
    if (r < 0)
        return r;
    for (uint64_t i = 0; i < n && !x->tail; i++)
        x->tail = tab[i] != 0;
    if (!x->tail)
        return 0;
    /* zero_tail can clear it only in a cluster this image alone uses */
    struct qcow2_rc rc;
    uint64_t host;
    if ((r = qcow2_rc_open(&rc, q, q->bd.diag)) < 0)
        return r;
    r = own_tail_cluster(q, &rc, l1, old, tab, &host);
    qcow2_rc_close(&rc);
    if (r == 0 && !host)
        r = FAIL(q, -ENOTSUP, "the image ends inside a cluster (compressed, or shared with "
                 "a snapshot) that holds bytes past its end; growing it would show them "
                 "(convert the image instead)");
    return r;
}

/* Drop the entries and zero the tail look_at_new_range() found. */
static int clear_new_range(struct qcow2 *q, uint64_t *l1, const struct exposed *x,
                           uint8_t *tab)
{
    const struct qcow2_header *h = &q->h;
    uint64_t per = h->l2_entries, old = q->bd.size;
    struct frees frees = { 0 };
    struct qcow2_rc rc;
    int r;

    if ((r = qcow2_rc_open(&rc, q, q->bd.diag)) < 0)
        return r;
    for (uint64_t g = x->g0; x->entries && g < x->g1;) {
        uint64_t l1i = g / per, end = (l1i + 1) * per < x->g1 ? (l1i + 1) * per : x->g1, l2;
        if ((r = qcow2_l1_entry_decode(h, l1[l1i], (uint32_t)l1i,
                                       h->l1_table_offset + l1i * 8, &l2, q->bd.diag,
                                       q->bd.filename)) < 0)
            goto out;
        frees.n = 0;
        if (l2 && (r = discard_in_table(q, &rc, l1, l1i, l2, g, end, false, tab,
                                        &frees)) < 0)
            goto out;
        g = end;
    }
    if ((r = qcow2_rc_flush(&rc)) < 0 ||
        (x->tail && (r = zero_tail(q, &rc, l1, old, tab)) < 0))
        goto out;
    r = bfile_sync(q->bd.file);
out:
    qcow2_rc_close(&rc);
    free(frees.c);
    return r;
}

static int shrink(struct qcow2 *q, uint64_t new_size, uint64_t *l1)
{
    struct qcow2_header *h = &q->h;
    uint64_t cs = h->cluster_size, per = h->l2_entries;
    uint64_t g0 = div_up(new_size, cs), g1 = div_up(q->bd.size, cs);
    uint64_t new_l1 = l1_for(h, new_size);
    uint8_t *tab = malloc(cs);
    struct frees frees = { 0 };
    struct qcow2_rc rc;
    int r;

    if (!tab)
        return FAIL(q, -ENOMEM, "out of memory");
    if ((r = qcow2_rc_open(&rc, q, q->bd.diag)) < 0)
        goto out;
    /* the clusters past the new end, table by table */
    uint64_t tables_end = div_up(g1, per);
    for (uint64_t g = g0; g < g1;) {
        uint64_t l1i = g / per, end = (l1i + 1) * per < g1 ? (l1i + 1) * per : g1, l2;
        if (l1i >= h->l1_size)
            break;
        if ((r = qcow2_l1_entry_decode(h, l1[l1i], (uint32_t)l1i,
                                       h->l1_table_offset + l1i * 8, &l2, q->bd.diag,
                                       q->bd.filename)) < 0)
            goto out;
        frees.n = 0;
        if (l2 && (r = discard_in_table(q, &rc, l1, l1i, l2, g, end, l1i >= new_l1, tab,
                                        &frees)) < 0)
            goto out;
        g = end;
    }
    /* L2 tables past the old end too (as qemu): out of the L1 table, freed */
    for (uint64_t i = tables_end > new_l1 ? tables_end : new_l1; i < h->l1_size; i++) {
        uint64_t l2;
        if ((r = qcow2_l1_entry_decode(h, l1[i], (uint32_t)i, h->l1_table_offset + i * 8,
                                       &l2, q->bd.diag, q->bd.filename)) < 0)
            goto out;
        if (!l2)
            continue;
        frees.n = 0;
        if ((r = add_free(q, &frees, l2 >> h->cluster_bits)) < 0 ||
            (r = free_clusters(q, &rc, &frees)) < 0 ||
            (r = write_l1_entry(q, l1, i, 0)) < 0 || (r = apply_frees(&rc, &frees)) < 0)
            goto out;
    }
    if ((r = qcow2_rc_flush(&rc)) < 0 || (r = zero_tail(q, &rc, l1, new_size, tab)) < 0 ||
        (r = bfile_sync(q->bd.file)) < 0)
        goto out;
    if ((r = truncate_tail(q, &rc)) < 0)
        goto out;
    q->file_size = q->bd.file->size;
    r = write_header(q, new_size, h->l1_size, h->l1_table_offset, h->refcount_table_offset,
                     h->refcount_table_clusters);
out:
    qcow2_rc_close(&rc);
    free(tab);
    free(frees.c);
    return r;
}

/* After a resize: the reader's view of the new image. */
static int reload(struct qcow2 *q, uint64_t new_size)
{
    struct qcow2_header *h = &q->h;
    int r;

    h->size = new_size;
    h->l1_needed = l1_for(h, new_size);
    q->bd.size = new_size;
    if ((r = bfile_refresh_size(q->bd.file)) < 0)
        return r;
    q->file_size = q->bd.file->size;
    uint32_t loaded = h->l1_size < h->l1_needed ? h->l1_size : (uint32_t)h->l1_needed;
    if ((r = qcow2_load_l1(q, h->l1_table_offset, h->l1_size, loaded)) < 0)
        return r;
    /* cached L2 tables may be stale */
    qcow2_l2cache_free(q->l2);
    q->l2 = NULL;
    return qcow2_l2cache_new(&q->l2, q->bd.file, h->cluster_size, QCOW2_L2_CACHE_BYTES,
                             q->bd.diag);
}

int qcow2_resize(struct bd *bd, uint64_t new_size, bool allow_shrink)
{
    struct qcow2 *q = to_qcow2(bd);
    uint64_t *l1 = NULL;
    int r;

    if (new_size < bd->size && !allow_shrink)
        return FAIL(q, -EINVAL, "Use the --shrink option to perform a shrink operation.");
    if ((r = refuse(q, new_size, q->h.version)) < 0)
        return r;
    if (new_size == bd->size && new_size == q->h.size)
        return 0;
    /* a shrink frees clusters by their refcounts and cuts the file after
     * the last one in use; a new L1 table takes clusters and changes
     * refcount blocks: with refcounts too low (a used cluster at 0), a
     * table overlapping data or wrong copied flags that would cut off or
     * overwrite guest data, so such an image is refused first */
    bool shrinking = new_size < bd->size;
    struct exposed x = { 0 };
    uint8_t *tab = NULL;
    if ((r = read_l1(q, &l1)) < 0)
        return r;
    if (!shrinking) {
        if (!(tab = malloc(q->h.cluster_size))) {
            r = FAIL(q, -ENOMEM, "out of memory");
            goto out;
        }
        if ((r = look_at_new_range(q, new_size, l1, tab, &x)) < 0)
            goto out;
    }
    if ((shrinking || x.entries || x.tail || l1_for(&q->h, new_size) > q->h.l1_size) &&
        (r = qcow2_check_sound(q, shrinking ? "shrinking it" : x.entries || x.tail ?
                               "growing it" : "growing its L1 table")) < 0)
        goto out;
    if (!shrinking && (x.entries || x.tail) && (r = clear_new_range(q, l1, &x, tab)) < 0)
        goto out;
    r = shrinking ? shrink(q, new_size, l1) : grow(q, new_size, l1);
out:
    free(tab);
    free(l1);
    if (r == 0)
        r = reload(q, new_size);
    return r;
}
