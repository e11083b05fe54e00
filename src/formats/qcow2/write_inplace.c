/* qcow2 in place: `convert -n` into an existing qcow2 image, as qemu-img
 * does.  The image keeps what it was created with (version, cluster size,
 * refcount width, extended L2 entries, compression type, backing file) and
 * every guest cluster the conversion covers is rewritten:
 *
 *   - data over a cluster the image holds: written where it is; over an
 *     unallocated, zero or compressed cluster, or one an internal snapshot
 *     shares: into a new cluster (the old one loses the active image's
 *     reference; an L2 table a snapshot shares is copied first), taken
 *     from the image's free space or appended;
 *   - zeros: v3 images get the zero flag (extended L2 entries: every
 *     subcluster zero); v2 images an unallocated cluster, or, over a
 *     backing file (which would show through), a cluster of zeros; a host
 *     cluster given up is freed and punched out of the file, as qemu
 *     discards it;
 *   - -c: compressed clusters packed into appended host clusters;
 *   - the image's range past the end of the source is left as it is; when
 *     the source ends inside a cluster, the rest of that cluster keeps the
 *     image's bytes (read before anything is written).
 *
 * Order: data, then refcounts, then the L2 table that names the data,
 * then its L1 entry (when the table is new or a copy); a cluster is freed
 * only after the tables that dropped it are written.  Like qemu's, the
 * update is not atomic: a failed or killed conversion leaves an image that
 * checks clean (at worst with leaked clusters) holding part of the new
 * content, and the command fails.  (That holds for the process dying; a
 * power cut may reorder the writes in the disk's cache.)
 *
 * Safety: overwriting clusters in place is only right when nothing else
 * uses them, so the image is checked first (the same checks as `diskimg
 * check`) and refused when it has corruptions -- a cluster named twice, a
 * table overlapping data, a refcount too low, a copied flag that does not
 * match the refcount (what tells shared clusters from the active image's
 * own).  Refused as well: dirty or corrupt-flagged images, external data
 * files, images smaller than the source, and persistent bitmaps on a
 * block device.  Enabled persistent bitmaps record every range written
 * (as qemu's do): they are marked in use before the first write and
 * written with the ranges and the flag cleared after the rest
 * (bitmap_write.c); a crash in between leaves them in use (inconsistent),
 * as qemu does.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "formats/qcow2/bitmap_int.h"
#include "formats/qcow2/format.h"
#include "formats/qcow2/read_int.h"
#include "formats/qcow2/refcount.h"
#include "formats/qcow2/write.h"
#include "io/bfile.h"
#include "util/diag.h"
#include "util/endian.h"

#define NO_TABLE UINT64_MAX
#define EXT_ALL_ALLOC UINT64_C(0x00000000ffffffff)
#define EXT_ALL_ZERO  UINT64_C(0xffffffff00000000)

struct free_range {
    uint64_t off, len;
};

/* Clusters mapped for copy offload whose entries wait for their bytes. */
struct pending_run {
    uint64_t g, k, host;
    bool fresh, set;
};

struct qcow2ip {
    struct bd bd;               /* what the converter writes to */
    struct bd *img;             /* the target, opened by the reader */
    struct qcow2 *q;
    struct qcow2_header *h;
    struct bfile *f;            /* the image file (the reader's) */
    struct qcow2_rc rc;
    bool rc_open;
    unsigned cbits;
    uint64_t cs;

    uint64_t *l1;               /* the reader's active L1 table (q->l1, host
                                   order): changed here as tables are added */

    uint8_t *tab;               /* the L2 table being changed */
    uint64_t tab_l1i;           /* its L1 index, or NO_TABLE */
    uint64_t tab_off;           /* where it is; 0 while it does not exist */
    bool tab_shared;            /* an internal snapshot's L1 table names it too */
    bool tab_dirty;
    bool tab_moved;             /* new or copied: its L1 entry must be written */

    struct free_range *frees;   /* host bytes to free once `tab` is written */
    size_t nfrees, frees_cap;
    uint64_t *reuse;            /* clusters freed by this conversion */
    size_t nreuse, reuse_cap;
    uint64_t scan;              /* clusters below this were searched for free ones */

    uint8_t *scratch;           /* one cluster: a partial last cluster */
    uint8_t *zeros;             /* one cluster of zeros */
    uint8_t *tail;              /* the image's cluster the source ends in */
    uint64_t tail_guest;        /* its guest offset */

    uint64_t pack_host;         /* host cluster compressed data goes into */
    uint64_t pack_used;         /* bytes of it used; cs = none open */
    uint64_t pack_refs;         /* compressed clusters in it (its refcount) */

    bool durable;
    bool target_is_zero;        /* --target-is-zero: zero runs need nothing */
    bool backing;               /* a backing file would show through holes */
    int err;                    /* first error: later calls fail with it */
    struct pending_run pend;    /* ip_map_for_offload -> ip_offload_done */
    struct qcow2_bmtrack *track; /* the enabled persistent bitmaps, recording */
};

static struct qcow2ip *to_ip(struct bd *bd)
{
    return (struct qcow2ip *)bd;
}

#define FAIL(w, err, ...) diag_fail((w)->bd.diag, err, (w)->bd.filename, -1, __VA_ARGS__)

static int sticky(struct qcow2ip *w, int r)
{
    if (r < 0 && !w->err)
        w->err = r;
    return r;
}

/* ---- allocation and freeing ------------------------------------------------- */

/* Up to `n` clusters that nothing uses, given refcount 1; *off is the
 * first of them, the return value how many (they are back to back).  Like
 * qemu's allocator, free space inside the file is used before the file
 * grows: clusters this conversion freed first, then those that were free
 * when it began (searched once, front to back). */
static int alloc_clusters(struct qcow2ip *w, uint64_t n, uint64_t *off)
{
    struct qcow2_rc_grown g;
    uint64_t first, v, end = w->rc.file_size >> w->cbits;
    int r;

    if (w->nreuse) {
        first = w->reuse[--w->nreuse];
        if ((r = qcow2_rc_set(&w->rc, first, 1)) < 0)
            return r;
        *off = first << w->cbits;
        return 1;
    }
    while (w->scan < end) {
        uint64_t c = w->scan, k = 0;
        if (!qcow2_rc_has_block(&w->rc, c)) {
            /* no refcount block: free, but it would need one; pass by */
            w->scan = (c / w->rc.per_block + 1) * w->rc.per_block;
            continue;
        }
        while (k < n && c + k < end && qcow2_rc_has_block(&w->rc, c + k)) {
            if ((r = qcow2_rc_get(&w->rc, c + k, &v)) < 0)
                return r;
            if (v)
                break;
            k++;
        }
        w->scan = c + k + (k == 0);
        if (!k)
            continue;
        for (uint64_t i = 0; i < k; i++)
            if ((r = qcow2_rc_set(&w->rc, c + i, 1)) < 0)
                return r;
        *off = c << w->cbits;
        return (int)k;
    }
    if ((r = qcow2_rc_append(&w->rc, n, &first, &g)) < 0)
        return r;
    if (g.new_table && (r = qcow2_rc_adopt_table(&w->rc, w->q, &g)) < 0)
        return r;
    /* the blocks and table it added lie past the clusters asked for */
    w->scan = w->rc.file_size >> w->cbits;
    *off = first << w->cbits;
    return (int)n;
}

static int reuse_later(struct qcow2ip *w, uint64_t cluster)
{
    if (w->nreuse == w->reuse_cap) {
        size_t cap = w->reuse_cap ? 2 * w->reuse_cap : 64;
        uint64_t *n = realloc(w->reuse, cap * sizeof(*n));
        if (!n)
            return FAIL(w, -ENOMEM, "out of memory");
        w->reuse = n;
        w->reuse_cap = cap;
    }
    w->reuse[w->nreuse++] = cluster;
    return 0;
}

static int defer_free(struct qcow2ip *w, uint64_t off, uint64_t len)
{
    if (w->nfrees == w->frees_cap) {
        size_t cap = w->frees_cap ? 2 * w->frees_cap : 64;
        struct free_range *n = realloc(w->frees, cap * sizeof(*n));
        if (!n)
            return FAIL(w, -ENOMEM, "out of memory");
        w->frees = n;
        w->frees_cap = cap;
    }
    w->frees[w->nfrees++] = (struct free_range){ off, len };
    return 0;
}

/* Clusters nothing refers to any more: their space goes back to the file
 * system (best effort: one without hole punching keeps it), and they are
 * the first to be allocated again. */
static int release_free_clusters(struct qcow2ip *w, uint64_t off, uint64_t len)
{
    for (uint64_t c = off >> w->cbits; c <= (off + len - 1) >> w->cbits; c++) {
        uint64_t v;
        int r = qcow2_rc_get(&w->rc, c, &v);
        if (r < 0)
            return r;
        if (v)
            continue;
        if (w->f->kind == BFILE_REGULAR && w->f->fd >= 0)
            (void)fallocate(w->f->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
                            (off_t)(c << w->cbits), (off_t)w->cs);
        if ((r = reuse_later(w, c)) < 0)
            return r;
    }
    return 0;
}

static int apply_frees(struct qcow2ip *w)
{
    for (size_t i = 0; i < w->nfrees; i++) {
        int r = qcow2_rc_free_range(&w->rc, w->frees[i].off, w->frees[i].len);
        if (r < 0 || (r = release_free_clusters(w, w->frees[i].off, w->frees[i].len)) < 0)
            return r;
    }
    w->nfrees = 0;
    return 0;
}

/* ---- the L2 table being changed ----------------------------------------------- */

/* Write the table back (its new clusters' refcounts first), then the L1
 * entry naming it if it moved, and only then free what it no longer names
 * (a copied table's original among them): whenever the process dies, every
 * cluster the file names still has its refcount -- at worst some leak. */
static int flush_table(struct qcow2ip *w)
{
    int r;

    if (w->tab_dirty) {
        if ((r = qcow2_rc_flush(&w->rc)) < 0 ||
            (r = bfile_pwrite(w->f, w->tab, w->cs, w->tab_off)) < 0)
            return r;
        w->tab_dirty = false;
    }
    if (w->tab_moved) {
        uint8_t e[8];
        be64_put(e, w->l1[w->tab_l1i]);
        if ((r = bfile_pwrite(w->f, e, 8, w->h->l1_table_offset + w->tab_l1i * 8)) < 0)
            return r;
        w->tab_moved = false;
    }
    return apply_frees(w);
}

static int load_table(struct qcow2ip *w, uint64_t l1i)
{
    uint64_t l2;
    int r;

    if (w->tab_l1i == l1i)
        return 0;
    if ((r = flush_table(w)) < 0)
        return r;
    w->tab_l1i = NO_TABLE;
    if (l1i >= w->q->l1_len)
        return FAIL(w, -EINVAL, "guest cluster past the L1 table");
    if ((r = qcow2_l1_entry_decode(w->h, w->l1[l1i], (uint32_t)l1i,
                                   w->h->l1_table_offset + l1i * 8, &l2, w->bd.diag,
                                   w->bd.filename)) < 0)
        return r;
    if (l2) {
        if ((r = bfile_pread(w->f, w->tab, w->cs, l2)) < 0)
            return r;
    } else {
        memset(w->tab, 0, w->cs);
    }
    w->tab_off = l2;
    /* in an image that checks clean, the copied flag is set exactly when
     * the refcount is 1 */
    w->tab_shared = l2 && !(w->l1[l1i] & QCOW2_L1_COPIED);
    w->tab_l1i = l1i;
    return 0;
}

/* The loaded table, made the active image's own before it changes: created
 * (a new cluster named by the L1 table) if the L1 entry was empty, copied
 * if an internal snapshot shares it.  A copy names the same data clusters
 * as the original; their refcounts already count the snapshot and the
 * active image, so only the original table loses a reference. */
static int ensure_table(struct qcow2ip *w)
{
    uint64_t old = w->tab_off;
    int r;

    if (old && !w->tab_shared)
        return 0;
    if ((r = alloc_clusters(w, 1, &w->tab_off)) < 0)
        return r;
    if (old) {
        if ((r = defer_free(w, old, w->cs)) < 0)
            return r;
        w->tab_shared = false;
    } else {
        /* a reused cluster holds old bytes: the table starts empty */
        memset(w->tab, 0, w->cs);
    }
    w->l1[w->tab_l1i] = w->tab_off | QCOW2_L1_COPIED;
    w->tab_moved = true;
    w->tab_dirty = true;
    return 0;
}

/* Decode the entry of guest cluster g (its table loaded). */
static int get_entry(struct qcow2ip *w, uint64_t g, struct qcow2_l2e *e)
{
    uint64_t j = g % w->h->l2_entries;
    const uint8_t *p = w->tab + j * w->h->l2_entry_bytes;

    return qcow2_l2_entry_decode(w->h, false, be64_get(p),
                                 w->h->extended_l2 ? be64_get(p + 8) : 0, g << w->cbits,
                                 w->tab_off + j * w->h->l2_entry_bytes, e, w->bd.diag,
                                 w->bd.filename);
}

static int set_entry(struct qcow2ip *w, uint64_t g, uint64_t e, uint64_t bitmap)
{
    uint64_t j = g % w->h->l2_entries;
    uint8_t *p = w->tab + j * w->h->l2_entry_bytes;
    int r;

    if ((r = ensure_table(w)) < 0)
        return r;
    be64_put(p, e);
    if (w->h->extended_l2)
        be64_put(p + 8, bitmap);
    w->tab_dirty = true;
    return 0;
}

/* The host bytes an entry holds, to be freed when it is replaced. */
static int release_entry(struct qcow2ip *w, const struct qcow2_l2e *e)
{
    if (e->kind == QK_COMPRESSED)
        return defer_free(w, e->host, e->csize);
    if (e->host)
        return defer_free(w, e->host, w->cs);
    return 0;
}

/* May guest cluster g (table loaded, entry decoded in e) be overwritten
 * where it is?  Not when a snapshot shares it (the copied flag is clear). */
static bool in_place(const struct qcow2ip *w, uint64_t g, const struct qcow2_l2e *e)
{
    const uint8_t *p = w->tab + (g % w->h->l2_entries) * w->h->l2_entry_bytes;

    return e->kind != QK_COMPRESSED && e->host != 0 && !w->tab_shared &&
           (be64_get(p) & QCOW2_L2_COPIED);
}

/* ---- writing -------------------------------------------------------------------- */

static int range_ok(struct qcow2ip *w, uint64_t off, uint64_t len)
{
    if (w->err)
        return w->err;
    if (off % w->cs || off > w->bd.size || len > w->bd.size - off ||
        (len % w->cs && off + len != w->bd.size))
        return FAIL(w, -EINVAL, "internal error: write of %" PRIu64 " bytes at %" PRIu64
                    " is not cluster-aligned", len, off);
    return 0;
}

/* A partial last cluster as a whole one: the image's own bytes after the
 * source's end (or zeros), `len` bytes of `buf` before it. */
static const uint8_t *whole_cluster(struct qcow2ip *w, const void *buf, size_t len,
                                    uint64_t off)
{
    if (w->tail && off == w->tail_guest)
        memcpy(w->scratch, w->tail, w->cs);
    else
        memset(w->scratch, 0, w->cs);
    if (buf)
        memcpy(w->scratch, buf, len);
    else
        memset(w->scratch, 0, len);
    return w->scratch;
}

/* The L2 entries of clusters [g, g+k) once their bytes are at `host`
 * (`fresh`: new clusters, the old ones are given up). */
static int commit_run(struct qcow2ip *w, uint64_t g, uint64_t k, uint64_t host, bool fresh)
{
    struct qcow2_l2e x;
    int r;

    for (uint64_t i = 0; i < k; i++) {
        if (fresh && ((r = get_entry(w, g + i, &x)) < 0 || (r = release_entry(w, &x)) < 0))
            return r;
        if ((r = set_entry(w, g + i, (host + (i << w->cbits)) | QCOW2_L2_COPIED,
                           EXT_ALL_ALLOC)) < 0)
            return r;
    }
    return 0;
}

/* Clusters [g, g+n) of one L2 table (loaded) get the bytes at `p` (NULL:
 * the caller puts them at *where, copy offload, and the entries wait for
 * ip_offload_done).  Returns the clusters done from g on (back to back in
 * the file, from *where). */
static int write_run_at(struct qcow2ip *w, const uint8_t *p, uint64_t g, uint64_t n,
                        uint64_t *where)
{
    struct qcow2_l2e e;
    int r;

    if ((r = get_entry(w, g, &e)) < 0)
        return r;
    if (in_place(w, g, &e)) {
        /* as many as lie back to back in the file */
        uint64_t k = 1;
        struct qcow2_l2e x;
        while (k < n) {
            if ((r = get_entry(w, g + k, &x)) < 0)
                return r;
            if (!in_place(w, g + k, &x) || x.host != e.host + (k << w->cbits))
                break;
            k++;
        }
        *where = e.host;
        if (!p) {
            w->pend = (struct pending_run){ g, k, e.host, false, true };
            return (int)k;
        }
        if ((r = bfile_pwrite(w->f, p, k << w->cbits, e.host)) < 0 ||
            (r = commit_run(w, g, k, e.host, false)) < 0)
            return r;
        return (int)k;
    }
    /* new clusters for the run of those that have none to write into */
    uint64_t k = 1, host;
    struct qcow2_l2e x;
    while (k < n) {
        if ((r = get_entry(w, g + k, &x)) < 0)
            return r;
        if (in_place(w, g + k, &x))
            break;
        k++;
    }
    if ((r = ensure_table(w)) < 0 || (r = alloc_clusters(w, k, &host)) < 0)
        return r;
    k = (uint64_t)r;
    *where = host;
    if (!p) {
        w->pend = (struct pending_run){ g, k, host, true, true };
        return (int)k;
    }
    if ((r = bfile_pwrite(w->f, p, k << w->cbits, host)) < 0 ||
        (r = commit_run(w, g, k, host, true)) < 0)
        return r;
    return (int)k;
}

static int write_run(struct qcow2ip *w, const uint8_t *p, uint64_t g, uint64_t n)
{
    uint64_t where;

    return write_run_at(w, p, g, n, &where);
}

static int write_clusters(struct qcow2ip *w, const uint8_t *p, uint64_t off, uint64_t len)
{
    uint64_t per = w->h->l2_entries;
    int r = 0;

    while (len) {
        uint64_t g = off >> w->cbits, n = len >> w->cbits;
        if (n == 0) {           /* the partial last cluster */
            p = whole_cluster(w, p, (size_t)len, off);
            n = 1;
            len = w->cs;
        }
        if (n > per - g % per)
            n = per - g % per;
        if (n > 256)            /* bounded runs: progress, one refcount flush each */
            n = 256;
        if ((r = load_table(w, g / per)) < 0 || (r = write_run(w, p, g, n)) < 0)
            return r;
        uint64_t bytes = (uint64_t)r << w->cbits;
        p += bytes;
        off += bytes;
        len -= bytes;
    }
    return 0;
}

static int ip_pwrite(struct bd *bd, const void *buf, size_t len, uint64_t off,
                     ioq_done_fn done, void *opaque)
{
    struct qcow2ip *w = to_ip(bd);
    int r = range_ok(w, off, len);

    qcow2_bitmaps_track_mark(w->q, w->track, off, len);
    if (r == 0)
        r = sticky(w, write_clusters(w, buf, off, len));
    if (done)
        done(opaque, r < 0 ? r : 0);
    return r;
}

/* Guest cluster g (table loaded) reads as zeros afterwards. */
static int zero_cluster(struct qcow2ip *w, uint64_t g)
{
    bool v3 = w->h->version >= 3;     /* has the zero flag */
    struct qcow2_l2e e;
    int r;

    if ((r = get_entry(w, g, &e)) < 0)
        return r;
    if (!v3 && w->backing) {
        /* no zero flag: store zeros, where the cluster is or in a new one */
        r = write_run(w, w->zeros, g, 1);
        return r < 0 ? r : 0;
    }
    bool nothing_stored = !e.host && e.kind != QK_COMPRESSED;
    if (w->h->extended_l2) {
        bool all_zero = !e.alloc && e.zero == UINT32_MAX;
        if (nothing_stored && (all_zero || (!e.alloc && !e.zero && !w->backing)))
            return 0;
        if ((r = release_entry(w, &e)) < 0)
            return r;
        return set_entry(w, g, 0, EXT_ALL_ZERO);
    }
    if (nothing_stored && (e.kind == QK_ZERO || !w->backing))
        return 0;               /* reads as zeros already */
    if ((r = release_entry(w, &e)) < 0)
        return r;
    return set_entry(w, g, v3 ? QCOW2_L2_ZERO : 0, 0);
}

static int ip_write_zeroes(struct bd *bd, uint64_t off, uint64_t len)
{
    struct qcow2ip *w = to_ip(bd);
    uint64_t per;
    int r;

    if ((r = range_ok(w, off, len)) < 0)
        return r;
    if (w->target_is_zero)
        return 0;               /* the user vouches for it, as with qemu-img */
    qcow2_bitmaps_track_mark(w->q, w->track, off, len);
    per = w->h->l2_entries;
    if (len % w->cs && w->tail && off + len - len % w->cs == w->tail_guest) {
        /* the source ends inside this cluster and the image goes on */
        uint64_t whole = len - len % w->cs;
        if (whole && (r = ip_write_zeroes(bd, off, whole)) < 0)
            return r;
        return sticky(w, write_clusters(w, NULL, off + whole, len % w->cs));
    }
    for (uint64_t g = off >> w->cbits; g < (off + len + w->cs - 1) >> w->cbits; g++) {
        /* a table that does not exist and would only hold zeros: nothing
         * to do for its whole range unless a backing file shows through */
        if ((r = load_table(w, g / per)) < 0)
            return sticky(w, r);
        if (!w->tab_off && !w->backing) {
            g = (g / per + 1) * per - 1;
            continue;
        }
        if ((r = zero_cluster(w, g)) < 0)
            return sticky(w, r);
    }
    return 0;
}

/* ---- compressed clusters (-c) ------------------------------------------------------ */

static ssize_t ip_compress(struct bd *bd, const void *in, size_t len, void *out, size_t cap)
{
    struct qcow2ip *w = to_ip(bd);

    /* a short last cluster keeps the image's bytes after the source's end */
    return codec_compress_granule(w->h->compression_type, in, len, w->cs, w->tail, out, cap);
}

/* Compressed data never straddles host clusters here: each goes into the
 * open host cluster if it fits, else into a new one.  A host cluster's
 * refcount counts the compressed clusters in it. */
static int write_compressed(struct qcow2ip *w, const void *cdata, size_t clen, uint64_t off)
{
    uint64_t g = off >> w->cbits, host, e;
    struct qcow2_l2e old;
    int r;

    if (clen == 0 || clen > w->cs)
        return FAIL(w, -EINVAL, "internal error: compressed cluster of %zu bytes", clen);
    if ((r = load_table(w, g / w->h->l2_entries)) < 0 || (r = ensure_table(w)) < 0)
        return r;
    /* a new host cluster when this one is full, or its refcount is as
     * high as the width allows (1-bit refcounts: one per host cluster) */
    if (w->pack_used + clen > w->cs || w->pack_refs >= w->rc.max) {
        if ((r = alloc_clusters(w, 1, &w->pack_host)) < 0)
            return r;
        /* sectors of a reused cluster that no compressed data will cover
         * are never read */
        w->pack_used = 0;
        w->pack_refs = 1;
    } else if ((r = qcow2_rc_add(&w->rc, w->pack_host >> w->cbits, 1)) < 0) {
        return r;
    } else {
        w->pack_refs++;
    }
    host = w->pack_host + w->pack_used;
    if ((r = bfile_pwrite(w->f, cdata, clen, host)) < 0)
        return r;
    /* whole 512-byte sectors: what readers fetch */
    w->pack_used = (w->pack_used + clen + 511) & ~(uint64_t)511;
    if (!(e = qcow2w_compressed_entry(w->cbits, host, clen)))
        return FAIL(w, -EINVAL, "internal error: compressed cluster does not fit its entry");
    if ((r = get_entry(w, g, &old)) < 0 || (r = release_entry(w, &old)) < 0)
        return r;
    return set_entry(w, g, e, 0);
}

static int ip_pwrite_compressed(struct bd *bd, const void *cdata, size_t clen, uint64_t off,
                                ioq_done_fn done, void *opaque)
{
    struct qcow2ip *w = to_ip(bd);
    int r = range_ok(w, off, off + w->cs <= w->bd.size ? w->cs : w->bd.size - off);

    qcow2_bitmaps_track_mark(w->q, w->track, off, w->cs);
    if (r == 0)
        r = sticky(w, write_compressed(w, cdata, clen, off));
    if (done)
        done(opaque, r < 0 ? r : 0);
    return r;
}

/* ---- finish ---------------------------------------------------------------------- */

/* The table being changed (and its L1 entry), then the refcounts. */
static int commit_metadata(struct qcow2ip *w)
{
    int r = flush_table(w);

    return r < 0 ? r : qcow2_rc_flush(&w->rc);
}

static int ip_finish(struct bd *bd)
{
    struct qcow2ip *w = to_ip(bd);
    int r = w->err;

    if (r == 0)
        r = commit_metadata(w);
    if (r == 0 && w->durable)
        r = bfile_sync(w->f);
    /* the bitmaps last: new tables, directory and refcounts, one switch */
    if (r == 0 && w->track) {
        r = qcow2_bitmaps_track_end(w->q, w->track);
        qcow2_bitmaps_track_free(w->track);
        w->track = NULL;
    }
    return sticky(w, r);
}

/* Keep the image consistent: what was written stays named (at worst some
 * clusters leak). */
static void ip_abort(struct bd *bd)
{
    struct qcow2ip *w = to_ip(bd);

    if (w->rc_open)
        (void)commit_metadata(w);
}

static void ip_close(struct bd *bd)
{
    struct qcow2ip *w = to_ip(bd);

    if (w->rc_open)
        qcow2_rc_close(&w->rc);
    qcow2_bitmaps_track_free(w->track);
    if (w->img)
        bd_close(w->img);
    free(w->tab);
    free(w->frees);
    free(w->reuse);
    free(w->scratch);
    free(w->zeros);
    free(w->tail);
    bd_release(&w->bd);
    free(w);
}

/* Copy offload: whole clusters as write_clusters would place them, the
 * bytes put there by the caller (the partial last cluster, which keeps the
 * image's bytes after the source's end, is written by ip_pwrite). */
static int ip_map_for_offload(struct bd *bd, uint64_t off, uint64_t len, uint32_t align,
                              struct bfile **f, uint64_t *host, uint64_t *mapped)
{
    struct qcow2ip *w = to_ip(bd);
    uint64_t per = w->h->l2_entries, g = off >> w->cbits, n = len >> w->cbits;
    int r = range_ok(w, off, len);

    if (r < 0)
        return r;
    if (n == 0 || w->cs % align || w->f->kind != BFILE_REGULAR || w->f->fd < 0)
        return -ENOTSUP;
    if (n > per - g % per)
        n = per - g % per;
    if (n > 256)
        n = 256;
    if ((r = load_table(w, g / per)) < 0 || (r = write_run_at(w, NULL, g, n, host)) < 0)
        return sticky(w, r);
    qcow2_bitmaps_track_mark(w->q, w->track, off, (uint64_t)r << w->cbits);
    *f = w->f;
    *mapped = (uint64_t)r << w->cbits;
    return 0;
}

/* The bytes of the last mapping are in place (err 0): name them.  On
 * failure the entries stay as they were (new clusters leak, as after a
 * failed write). */
static int ip_offload_done(struct bd *bd, int err)
{
    struct qcow2ip *w = to_ip(bd);
    struct pending_run p = w->pend;

    w->pend.set = false;
    if (!p.set)
        return w->err;
    if (err < 0)
        return sticky(w, err);
    return sticky(w, commit_run(w, p.g, p.k, p.host, p.fresh));
}

const struct bd_driver bd_qcow2_inplace = {
    .name = "qcow2",
    .pwrite = ip_pwrite,
    .write_zeroes = ip_write_zeroes,
    .map_for_offload = ip_map_for_offload,
    .offload_done = ip_offload_done,
    .compress = ip_compress,
    .pwrite_compressed = ip_pwrite_compressed,
    .finish = ip_finish,
    .abort = ip_abort,
    .close = ip_close,
};

/* ---- open ---------------------------------------------------------------------- */

static int refuse(struct qcow2ip *w, uint64_t src_size)
{
    const struct qcow2_header *h = w->h;
    int r = qcow2_refuse_unclean(w->q);

    if (r < 0)
        return r;
    if (h->incompatible & QCOW2_INCOMPAT_DATA_FILE)
        return FAIL(w, -ENOTSUP, "writing into an image with an external data file (-n) "
                    "is not supported");
    if (h->has_bitmaps_ext && w->f->kind != BFILE_REGULAR)
        return FAIL(w, -ENOTSUP, "the image on a block device has persistent bitmaps, "
                    "which writing into it (-n) would leave stale; remove them first "
                    "(diskimg bitmap --remove)");
    if (w->img->size < src_size)
        return FAIL(w, -EINVAL, "output file is smaller than input file (%" PRIu64
                    " bytes, the input has %" PRIu64 ")", w->img->size, src_size);
    if (h->l1_size < h->l1_needed)
        return FAIL(w, -EINVAL, "the L1 table (%" PRIu32 " entries) is too short for the "
                    "virtual size", h->l1_size);
    return 0;
}

/* Nothing may be overwritten in place unless the metadata is sound. */
static int verify(struct qcow2ip *w)
{
    return qcow2_check_sound(w->q, "writing into it");
}

int qcow2ip_open(struct bd **out, struct bfile *f, const struct bd_create_opts *o,
                 struct diag *d)
{
    /* the target's references obey the folder rule as an input's do */
    struct bd_open_opts oo = { .format = "qcow2", .writable = true,
                               .allow_external = o->allow_external,
                               .no_external_files = o->no_external_files,
                               .no_backing = o->no_external_files };
    struct qcow2ip *w;
    int r;

    *out = NULL;
    if (o->backing_file)
        return diag_fail(d, -EINVAL, f->path, -1, "-B cannot be used with -n: the existing "
                         "image keeps its own backing file");
    if (f->kind != BFILE_REGULAR && f->kind != BFILE_BLOCKDEV)
        return diag_fail(d, -ENOTSUP, f->path, -1,
                         "-n needs an existing qcow2 image in a file or a block device");
    if (!(w = calloc(1, sizeof(*w))))
        return diag_fail(d, -ENOMEM, f->path, -1, "out of memory");
    bd_init(&w->bd, &bd_qcow2_inplace, f, d);
    if (!w->bd.filename) {
        r = diag_fail(d, -ENOMEM, f->path, -1, "out of memory");
        goto fail;
    }
    /* the reader opens the file again (with its backing chain, which the
     * partial last cluster may need); writes go through its descriptor */
    if ((r = bd_open(&w->img, f->path, &oo, d)) < 0)
        goto fail;
    w->q = to_qcow2(w->img);
    w->h = &w->q->h;
    w->f = w->img->file;
    w->cbits = w->h->cluster_bits;
    w->cs = w->h->cluster_size;
    w->bd.size = o->size;
    w->bd.granule = (uint32_t)w->cs;
    w->durable = o->durable;
    w->target_is_zero = o->target_is_zero;
    w->backing = w->img->backing != NULL || w->h->has_backing_file;
    w->tab_l1i = NO_TABLE;
    w->pack_used = w->cs;
    if ((r = refuse(w, o->size)) < 0 || (r = verify(w)) < 0)
        goto fail;
    /* enabled bitmaps record what is written; marked in use meanwhile */
    if ((r = qcow2_bitmaps_track_begin(w->q, &w->track)) < 0)
        goto fail;
    /* the reader loaded the entries the virtual size needs (refuse(): all
     * of them are in the table); no second copy */
    w->l1 = w->q->l1;
    if (!(w->tab = malloc(w->cs)) || !(w->scratch = malloc(w->cs)) ||
        !(w->zeros = calloc(1, w->cs))) {
        r = diag_fail(d, -ENOMEM, f->path, -1, "out of memory");
        goto fail;
    }
    /* the source ends inside a cluster the image goes on after: keep the
     * image's bytes of that cluster past the source's end */
    if (o->size % w->cs && w->img->size > o->size) {
        w->tail_guest = o->size - o->size % w->cs;
        uint64_t n = w->img->size - w->tail_guest < w->cs ? w->img->size - w->tail_guest
                                                            : w->cs;
        if (!(w->tail = calloc(1, w->cs))) {
            r = diag_fail(d, -ENOMEM, f->path, -1, "out of memory");
            goto fail;
        }
        if ((r = bd_pread(w->img, w->tail, (size_t)n, w->tail_guest)) < 0)
            goto fail;
    }
    if ((r = qcow2_rc_open(&w->rc, w->q, d)) < 0)
        goto fail;
    w->rc_open = true;
    /* refcounts of appended clusters reach the file with the L2 table that
     * names them (flush_table), not one block write per allocation */
    w->rc.defer_flush = true;
    /* a block device is as large as it is, not as the image: new clusters
     * go after the last one in use (as qemu allocates them), not after the
     * end of the device */
    if (w->f->kind == BFILE_BLOCKDEV) {
        uint64_t end;
        if ((r = qcow2_rc_used_end(&w->rc, w->rc.file_size >> w->cbits, &end)) < 0)
            goto fail;
        w->rc.file_size = end << w->cbits;
    }
    *out = &w->bd;
    return 0;
fail:
    w->bd.file = NULL;      /* the caller still owns the file */
    ip_close(&w->bd);
    return r;
}
