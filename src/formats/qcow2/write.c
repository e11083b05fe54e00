/* qcow2 writer: the driver (create, pwrite, write_zeroes, compress,
 * pwrite_compressed, finish, abort, close).  See write.h for the
 * layout; allocation and refcounts are in write_refcount.c, the L2
 * cache in write_l2.c, the header in write_header.c. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "formats/qcow2/format.h"
#include "formats/qcow2/write.h"
#include "formats/qcow2/write_priv.h"
#include "io/bfile.h"
#include "io/ioq.h"
#include "util/diag.h"


int qcow2w_write_meta(struct qcow2w *w, const void *buf, size_t len, uint64_t off)
{
    int r = bfile_pwrite(w->bd.file, buf, len, off);

    if (r < 0 && !w->err)
        w->err = r;
    return r;
}

static int fail(struct qcow2w *w, int err, int64_t off, const char *what)
{
    int r = diag_fail(w->bd.diag, err, w->bd.filename, off, "%s", what);
    if (!w->err)
        w->err = r;
    return r;
}

static int set_err(struct qcow2w *w, int r)
{
    if (r < 0 && !w->err)
        w->err = r;
    return r;
}

static uint64_t div_up(uint64_t a, uint64_t b)
{
    return a / b + (a % b != 0);
}

/* ---- preallocation: fixed layout -------------------------------------- */

static int prealloc_layout(struct qcow2w *w)
{
    uint64_t l1_clusters = div_up(w->l1_entries * 8, w->cs);
    uint64_t data_clusters = div_up(w->p.size, w->cs);
    uint64_t t, nbl, c, after = l1_clusters + w->l1_entries + data_clusters;
    int r;

    /* header, refcount table, refcount blocks, L1, L2 tables, data */
    if ((r = qcow2w_alloc(w, 1, &c)) < 0)
        return r;
    if ((r = qcow2w_rc_plan(w, after, &t, &nbl)) < 0)
        return r;
    if ((r = qcow2w_alloc(w, t + nbl + after, &c)) < 0)
        return r;
    w->pre_reftable_off = c << w->cbits;
    w->pre_reftable_clusters = t;
    w->pre_refblocks_off = (c + t) << w->cbits;
    w->pre_l1_off = (c + t + nbl) << w->cbits;
    c += t + nbl + l1_clusters;
    for (uint64_t i = 0; i < w->l1_entries; i++)
        w->l1[i] = (c + i) << w->cbits;
    w->data_start = (c + w->l1_entries) << w->cbits;
    return 0;
}

static int prealloc_space(struct qcow2w *w)
{
    struct bfile *f = w->bd.file;
    uint64_t len = div_up(w->p.size, w->cs) << w->cbits;
    uint64_t end = w->data_start + len;

    if (f->kind != BFILE_REGULAR)
        return 0;
    if (w->p.prealloc == QCOW2W_PREALLOC_METADATA || len == 0) {
        if (ftruncate(f->fd, (off_t)end) < 0)
            return set_err(w, diag_errno(w->bd.diag, -errno, f->path, -1, "cannot set the size"));
        return 0;
    }
    if (fallocate(f->fd, 0, (off_t)w->data_start, (off_t)len) == 0)
        return 0;
    if (w->p.prealloc == QCOW2W_PREALLOC_FALLOC || (errno != EOPNOTSUPP && errno != ENOSYS))
        return set_err(w, diag_errno(w->bd.diag, -errno, f->path, (int64_t)w->data_start,
                                     "cannot preallocate"));
    /* full, on a file system without fallocate: write the zeros */
    static const uint8_t zeros[1 << 16];
    for (uint64_t off = w->data_start; off < end; off += sizeof(zeros)) {
        size_t n = end - off < sizeof(zeros) ? (size_t)(end - off) : sizeof(zeros);
        int r = qcow2w_write_meta(w, zeros, n, off);
        if (r < 0)
            return r;
    }
    return 0;
}

/* ---- create --------------------------------------------------------------- */

/* The unit the converter writes in.  A cluster, unless only part of one
 * needs writing: extended L2 entries allocate 32 subclusters one by one
 * (the unwritten ones stay holes of the file and unallocated in the
 * bitmap), and preallocation has every cluster in place already, so any
 * sector can be written alone and the rest stays a hole (but over a
 * backing file a subcluster is either all this image's or all the
 * backing file's).  Compressed clusters are whole. */
static uint32_t write_granule(const struct qcow2w_params *p, bool compress)
{
    uint32_t cs = 1u << p->cluster_bits, sub = cs / QCOW2_SUBCLUSTERS;

    if (compress)
        return cs;
    if (p->prealloc != QCOW2W_PREALLOC_OFF)
        return p->extended_l2 && p->backing_file ? sub : 512;
    return p->extended_l2 ? sub : cs;
}

static void qcow2w_free(struct qcow2w *w)
{
    qcow2w_l2_free(w);
    qcow2w_rc_free(w);
    free(w->l1);
    free(w->end_pad);
    bd_release(&w->bd);
    free(w);
}

int qcow2w_create(struct bd **out, struct bfile *f, const struct bd_create_opts *o,
                  struct diag *d)
{
    struct qcow2w_params p;
    struct qcow2w *w;
    char err[256];
    int r;

    *out = NULL;
    if (o->existing)
        return qcow2ip_open(out, f, o, d);
    if (f->kind == BFILE_STREAM)
        return qcow2s_create(out, f, o, d);
    if (f->kind != BFILE_REGULAR && f->kind != BFILE_BLOCKDEV)
        return diag_fail(d, -ENOTSUP, f->path, -1,
                         "qcow2 output needs a seekable file or a stream");
    if ((r = qcow2w_parse_params(o->o, o, &p, err, sizeof(err))) < 0)
        return diag_fail(d, r, f->path, -1, "%s", err);
    uint64_t l1_entries = qcow2w_l1_entries(&p, err, sizeof(err));
    if (!l1_entries)
        return diag_fail(d, -EFBIG, f->path, -1, "%s", err);

    if (!(w = calloc(1, sizeof(*w))))
        return diag_fail(d, -ENOMEM, f->path, -1, "out of memory");
    bd_init(&w->bd, &bd_qcow2_out, f, d);
    w->p = p;
    w->cbits = p.cluster_bits;
    w->cs = 1u << p.cluster_bits;
    w->bd.size = p.size;
    w->bd.granule = write_granule(&p, o->compress);
    w->ioq = o->ioq;
    w->durable = o->durable;
    w->compress = o->compress;
    w->l1_entries = l1_entries;
    w->l2_entry_bytes = p.extended_l2 ? 16 : 8;
    w->l2_entries = w->cs / w->l2_entry_bytes;
    /* keep our own copies of the names (o's strings may not outlive us) */
    if (p.backing_file && !(w->bd.backing_name = strdup(p.backing_file)))
        goto nomem;
    if (p.backing_fmt && !(w->bd.backing_fmt = strdup(p.backing_fmt)))
        goto nomem;
    w->p.backing_file = w->bd.backing_name;
    w->p.backing_fmt = w->bd.backing_fmt;
    if (!(w->l1 = calloc(l1_entries, sizeof(*w->l1))))
        goto nomem;
    if ((r = qcow2w_rc_init(w)) < 0 || (r = qcow2w_l2_init(w)) < 0)
        goto fail;
    /* -t none opens the output with O_DIRECT, but qcow2 metadata and packed
     * compressed clusters are written at byte offsets and lengths: write
     * through the page cache instead (the data is still synced in finish
     * when durable) */
    int fl = f->fd >= 0 ? fcntl(f->fd, F_GETFL) : -1;
    if (fl >= 0 && (fl & O_DIRECT) && fcntl(f->fd, F_SETFL, fl & ~O_DIRECT) < 0) {
        r = diag_errno(d, -errno, f->path, -1, "cannot turn off O_DIRECT");
        goto fail;
    }
    /* a fresh file: nothing of an earlier content may show through */
    if (f->kind == BFILE_REGULAR && f->size && ftruncate(f->fd, 0) < 0) {
        r = diag_errno(d, -errno, f->path, -1, "cannot truncate");
        goto fail;
    }
    if (p.prealloc != QCOW2W_PREALLOC_OFF) {
        if (f->kind != BFILE_REGULAR) {
            r = diag_fail(d, -ENOTSUP, f->path, -1,
                          "preallocation needs a regular file as qcow2 output");
            goto fail;
        }
        if ((r = prealloc_layout(w)) < 0 || (r = prealloc_space(w)) < 0)
            goto fail;
    } else {
        uint64_t c;
        if ((r = qcow2w_alloc(w, 1, &c)) < 0)   /* cluster 0: the header */
            goto fail;
    }
    *out = &w->bd;
    return 0;
nomem:
    r = diag_fail(d, -ENOMEM, f->path, -1, "out of memory");
fail:
    w->bd.file = NULL;      /* the caller still owns the file */
    qcow2w_free(w);
    return r;
}

/* ---- writes --------------------------------------------------------------- */

static int check_range(struct qcow2w *w, uint64_t off, uint64_t len, const char *op)
{
    if (w->err)
        return w->err;
    if (w->finished)
        return fail(w, -EINVAL, (int64_t)off, "internal error: write after finish");
    if (len == 0 || off >= w->p.size || len > w->p.size - off)
        return diag_fail(w->bd.diag, -EINVAL, w->bd.filename, (int64_t)off,
                         "internal error: %s of %llu bytes past the end of the image "
                         "(%llu bytes)", op, (unsigned long long)len,
                         (unsigned long long)w->p.size);
    /* only the last granule may be written short (the image size is rounded
     * up to 512 bytes, so the source may end before it) */
    uint32_t g = w->bd.granule;
    if ((off % g) || ((len % g) && div_up(off + len, g) != div_up(w->p.size, g)))
        return diag_fail(w->bd.diag, -EINVAL, w->bd.filename, (int64_t)off,
                         "internal error: %s of %llu bytes is not aligned to the "
                         "%u-byte write granule", op, (unsigned long long)len, g);
    return 0;
}

/* The L2 entry (first word) of guest cluster g, and its table. */
static int entry_of(struct qcow2w *w, uint64_t g, uint8_t **e, uint8_t **tab)
{
    int r = qcow2w_l2_get(w, g / w->l2_entries, tab);

    if (r < 0)
        return set_err(w, r);
    *e = *tab + (g % w->l2_entries) * w->l2_entry_bytes;
    return 0;
}

static uint64_t len_of_cluster(const struct qcow2w *w, uint64_t off)
{
    return w->p.size - off < w->cs ? w->p.size - off : w->cs;
}

static int written_twice(struct qcow2w *w, uint64_t g)
{
    return diag_fail(w->bd.diag, -EINVAL, w->bd.filename, (int64_t)(g << w->cbits),
                     "internal error: guest cluster at offset %llu written twice",
                     (unsigned long long)(g << w->cbits));
}

static int submit(struct qcow2w *w, const void *buf, size_t len, uint64_t host,
                  ioq_done_fn done, void *opaque)
{
    int r;

    if (w->ioq) {
        r = ioq_pwrite(w->ioq, w->bd.file, buf, len, host, done, opaque);
    } else {
        r = bfile_pwrite(w->bd.file, buf, len, host);
        done(opaque, r);
    }
    return set_err(w, r);
}

/* Extended L2: the allocation bits of the subclusters of guest cluster g
 * that [off, off+len) covers (a short last piece covers its subcluster). */
static uint64_t sub_mask(const struct qcow2w *w, uint64_t g, uint64_t off, uint64_t len)
{
    uint64_t cstart = g << w->cbits, sub = w->cs / QCOW2_SUBCLUSTERS;
    uint64_t a = off > cstart ? off - cstart : 0;
    uint64_t b = off + len - cstart < w->cs ? off + len - cstart : w->cs;
    unsigned first = (unsigned)(a / sub), last = (unsigned)div_up(b, sub);

    return ((UINT64_C(1) << (last - first)) - 1) << first;
}

/* Mark the subclusters [off, off+len) covers in cluster g's bitmap as
 * allocated (shift 0) or reading as zeros (shift 32).  A subcluster marked
 * before was written twice -- unless writes come in pieces smaller than a
 * subcluster (preallocation without a backing file: the parts of an
 * allocated subcluster nobody writes are holes and read as zeros). */
static int mark_subclusters(struct qcow2w *w, uint64_t g, uint64_t off, uint64_t len,
                            unsigned shift)
{
    uint64_t m = sub_mask(w, g, off, len), bm;
    bool whole = w->bd.granule == w->cs / QCOW2_SUBCLUSTERS;
    uint8_t *e, *tab;
    int r;

    if ((r = entry_of(w, g, &e, &tab)) < 0)
        return r;
    bm = be64_get(e + 8);
    if (whole && (bm & (m | m << 32)))
        return set_err(w, written_twice(w, g));
    be64_put(e + 8, bm | m << shift);
    qcow2w_l2_mark_dirty(w, tab);
    return 0;
}

/* One write that lands in several places of the file (clusters that are
 * not back to back): `done` runs once, after the last piece. */
struct q_join {
    ioq_done_fn done;
    void *opaque;
    unsigned left;
    int err;
};

static void join_done(void *opaque, int res)
{
    struct q_join *j = opaque;

    if (res < 0 && !j->err)
        j->err = res;
    if (--j->left == 0) {
        j->done(j->opaque, j->err);
        free(j);
    }
}

/* Submit [off, off+len) of guest data to the host clusters the L2 entries
 * name (all set), in as few pieces as they allow. */
static int submit_mapped(struct qcow2w *w, const uint8_t *buf, size_t len, uint64_t off,
                         ioq_done_fn done, void *opaque)
{
    uint64_t g0 = off >> w->cbits, gend = div_up(off + len, w->cs);
    uint64_t piece_host = 0, piece_off = off, prev = 0;
    struct q_join *j = NULL;
    uint8_t *e, *tab;
    int r = 0;

    for (uint64_t g = g0; g <= gend; g++) {
        uint64_t host = 0;
        if (g < gend) {
            if ((r = entry_of(w, g, &e, &tab)) < 0)
                break;
            host = be64_get(e) & QCOW2_L2_OFFSET_MASK;
            if (g == g0) {
                piece_host = host + (off - (g << w->cbits));
                prev = host;
                continue;
            }
            if (host == prev + w->cs) {
                prev = host;
                continue;
            }
        }
        /* the piece [piece_off, start of g) ends here */
        uint64_t piece_end = g < gend ? g << w->cbits : off + len;
        if (g == gend && !j)
            return submit(w, buf + (piece_off - off), (size_t)(piece_end - piece_off),
                          piece_host, done, opaque);
        if (!j) {
            if (!(j = calloc(1, sizeof(*j)))) {
                r = fail(w, -ENOMEM, (int64_t)off, "out of memory");
                break;
            }
            *j = (struct q_join){ done, opaque, 1, 0 };
        }
        j->left++;
        if ((r = submit(w, buf + (piece_off - off), (size_t)(piece_end - piece_off),
                        piece_host, join_done, j)) < 0)
            break;
        piece_off = piece_end;
        piece_host = prev = host;
    }
    if (!j) {
        done(opaque, r);
        return r;
    }
    join_done(j, r);       /* drop the hold taken at the start */
    return r;
}

int qcow2w_map_clusters(struct qcow2w *w, uint64_t off, uint64_t len)
{
    uint64_t g0 = off >> w->cbits, gend = div_up(off + len, w->cs), host, c, fresh = 0;
    uint8_t *e, *tab;
    int r;

    /* tables first, so that the data clusters are contiguous */
    for (uint64_t i = g0 / w->l2_entries; i <= (gend - 1) / w->l2_entries; i++) {
        if (!w->l1[i]) {
            if ((r = qcow2w_alloc(w, 1, &c)) < 0)
                return set_err(w, r);
            w->l1[i] = c << w->cbits;
        }
    }
    /* clusters not yet in the file (with extended L2 entries a cluster
     * written in part before already has its host cluster) */
    for (uint64_t g = g0; g < gend; g++) {
        if ((r = entry_of(w, g, &e, &tab)) < 0)
            return r;
        if (!be64_get(e))
            fresh++;
        else if (!w->p.extended_l2)
            return set_err(w, written_twice(w, g));
    }
    if (fresh && (r = qcow2w_alloc(w, fresh, &c)) < 0)
        return set_err(w, r);
    host = c << w->cbits;
    for (uint64_t g = g0; g < gend; g++) {
        if ((r = entry_of(w, g, &e, &tab)) < 0)
            return r;
        if (!be64_get(e)) {
            be64_put(e, host | QCOW2_L2_COPIED);
            host += w->cs;
            qcow2w_l2_mark_dirty(w, tab);
        }
        if (w->p.extended_l2 && (r = mark_subclusters(w, g, off, len, 0)) < 0)
            return r;
    }
    return 0;
}

int qcow2w_check_range(struct qcow2w *w, uint64_t off, uint64_t len, const char *op)
{
    return check_range(w, off, len, op);
}

int qcow2w_host_of(struct qcow2w *w, uint64_t g, uint64_t *host)
{
    uint8_t *e, *tab;
    int r = entry_of(w, g, &e, &tab);

    if (r == 0)
        *host = be64_get(e) & QCOW2_L2_OFFSET_MASK;
    return r;
}

static int q_pwrite(struct bd *bd, const void *buf, size_t len, uint64_t off,
                    ioq_done_fn done, void *opaque)
{
    struct qcow2w *w = to_qcow2w(bd);
    uint64_t g0 = off >> w->cbits, gend = div_up(off + len, w->cs);
    int r;

    if ((r = check_range(w, off, len, "write")) < 0)
        goto out;
    if ((off + len) % 512) {
        /* the source ends inside the image's last sector: the rest of it
         * reads as zeros -- a hole in a new file, but not on a device */
        size_t plen = len + (512 - (off + len) % 512);
        if (w->end_pad || !(w->end_pad = malloc(plen))) {
            r = fail(w, w->end_pad ? -EINVAL : -ENOMEM, (int64_t)off,
                     w->end_pad ? "internal error: the image's end written twice"
                                : "out of memory");
            goto out;
        }
        memcpy(w->end_pad, buf, len);
        memset(w->end_pad + len, 0, plen - len);
        buf = w->end_pad;
        len = plen;
    }
    if (w->p.prealloc != QCOW2W_PREALLOC_OFF) {
        /* every cluster is in place; with extended L2 entries the bitmap
         * says which subclusters are written (as qemu's; the others read
         * as zeros or from the backing file) */
        if (w->p.extended_l2)
            for (uint64_t g = g0; g < gend; g++)
                if ((r = mark_subclusters(w, g, off, len, 0)) < 0)
                    goto out;
        return submit(w, buf, len, w->data_start + off, done, opaque);
    }
    if ((r = qcow2w_map_clusters(w, off, len)) < 0)
        goto out;
    return submit_mapped(w, buf, len, off, done, opaque);
out:
    set_err(w, r);
    done(opaque, r);
    return r;
}

/* A cluster that must read as zeros where the file has no holes. */
static int write_zero_cluster(struct qcow2w *w, uint64_t host)
{
    uint8_t *z = calloc(1, w->cs);
    int r;

    if (!z)
        return fail(w, -ENOMEM, -1, "out of memory");
    r = qcow2w_write_meta(w, z, w->cs, host);
    free(z);
    return r;
}

static int q_write_zeroes(struct bd *bd, uint64_t off, uint64_t len)
{
    struct qcow2w *w = to_qcow2w(bd);
    uint64_t g0 = off >> w->cbits, gend = div_up(off + len, w->cs), c;
    uint8_t *e, *tab;
    int r;

    if ((r = check_range(w, off, len, "write_zeroes")) < 0)
        return set_err(w, r);
    /* a new image reads as zeros, and so does preallocated space without a
     * backing file: only a backing file's content must be hidden */
    if (!w->p.backing_file)
        return 0;
    for (uint64_t g = g0; g < gend; g++) {
        if (w->p.extended_l2) {
            /* the subclusters in the range read as zeros, the others of
             * the cluster keep what they are or will be */
            if ((r = mark_subclusters(w, g, off, len, 32)) < 0)
                return r;
            continue;
        }
        if (w->p.version < 3) {
            /* no zero flag: a cluster that is allocated but never written
             * reads as zeros (a hole in the new file) */
            if ((r = entry_of(w, g, &e, &tab)) < 0)
                return r;
            if (be64_get(e))
                return set_err(w, written_twice(w, g));
            if ((r = qcow2w_alloc(w, 1, &c)) < 0)
                return set_err(w, r);
            if (w->bd.file->kind != BFILE_REGULAR &&
                (r = write_zero_cluster(w, c << w->cbits)) < 0)
                return r;
            be64_put(e, (c << w->cbits) | QCOW2_L2_COPIED);
        } else {
            if ((r = entry_of(w, g, &e, &tab)) < 0)
                return r;
            /* preallocation without extended L2 entries has no backing file */
            if (be64_get(e))
                return set_err(w, written_twice(w, g));
            be64_put(e, QCOW2_L2_ZERO);
        }
        qcow2w_l2_mark_dirty(w, tab);
    }
    return 0;
}

ssize_t qcow2w_compress(struct bd *bd, const void *in, size_t len, void *out, size_t cap)
{
    struct qcow2w *w = to_qcow2w(bd);

    return codec_compress_granule(w->p.compression_type, in, len, w->cs, NULL, out, cap);
}

/* Where the next compressed cluster of clen bytes goes: into the tail of
 * the partly used cluster when its count can still grow and the data fits
 * there (or runs on into clusters not yet allocated); else a fresh start. */
static int place_compressed(struct qcow2w *w, size_t clen, uint64_t *pos, bool *shared)
{
    uint64_t t = w->ctail, tc = t >> w->cbits, v;
    int r;

    *shared = false;
    if (t) {
        uint64_t last = (t + clen - 1) >> w->cbits;
        if ((r = qcow2w_rc_get(w, tc, &v)) < 0)
            return r;
        if (v < w->rc_max && (last == tc || tc + 1 == w->next_cluster)) {
            *pos = t;
            *shared = true;
            return 0;
        }
    }
    *pos = w->next_cluster << w->cbits;
    return 0;
}

static int q_pwrite_compressed(struct bd *bd, const void *cdata, size_t clen, uint64_t off,
                               ioq_done_fn done, void *opaque)
{
    struct qcow2w *w = to_qcow2w(bd);
    uint64_t g = off >> w->cbits, pos, first, last, c, entry;
    uint8_t *e, *tab;
    bool shared;
    int r;

    if ((r = check_range(w, off, len_of_cluster(w, off), "compressed write")) < 0)
        goto out;
    if (w->p.prealloc != QCOW2W_PREALLOC_OFF || clen == 0 || clen >= w->cs) {
        r = fail(w, -EINVAL, (int64_t)off, "internal error: bad compressed write");
        goto out;
    }
    if (!w->l1[g / w->l2_entries]) {
        if ((r = qcow2w_alloc(w, 1, &c)) < 0)
            goto out;
        w->l1[g / w->l2_entries] = c << w->cbits;
    }
    if ((r = place_compressed(w, clen, &pos, &shared)) < 0)
        goto out;
    first = pos >> w->cbits;
    last = (pos + clen - 1) >> w->cbits;
    if (shared && (r = qcow2w_rc_incr(w, first)) < 0)
        goto out;
    if (last >= w->next_cluster &&
        (r = qcow2w_alloc(w, last + 1 - w->next_cluster, &c)) < 0)
        goto out;
    entry = qcow2w_compressed_entry(w->cbits, pos, clen);
    if (!entry) {
        r = fail(w, -EFBIG, (int64_t)pos,
                 "compressed cluster lies beyond what a compressed descriptor can address");
        goto out;
    }
    if ((r = entry_of(w, g, &e, &tab)) < 0)
        goto out;
    if (be64_get(e) || (w->p.extended_l2 && be64_get(e + 8))) {
        r = set_err(w, written_twice(w, g));
        goto out;
    }
    be64_put(e, entry);
    qcow2w_l2_mark_dirty(w, tab);
    w->ctail = pos + clen;
    if (!(w->ctail & (w->cs - 1)))
        w->ctail = 0;   /* the cluster is full: the next one starts fresh */
    return submit(w, cdata, clen, pos, done, opaque);
out:
    set_err(w, r);
    done(opaque, r);
    return r;
}

/* ---- finish ---------------------------------------------------------------- */

static int write_l1(struct qcow2w *w, uint64_t off)
{
    uint8_t buf[65536];
    uint64_t per = sizeof(buf) / 8;
    int r;

    for (uint64_t i = 0; i < w->l1_entries; i += per) {
        uint64_t n = w->l1_entries - i < per ? w->l1_entries - i : per;
        for (uint64_t j = 0; j < n; j++)
            be64_put(buf + 8 * j, w->l1[i + j] ? w->l1[i + j] | QCOW2_L1_COPIED : 0);
        if ((r = qcow2w_write_meta(w, buf, n * 8, off + i * 8)) < 0)
            return r;
    }
    return 0;
}

static int q_finish(struct bd *bd)
{
    struct qcow2w *w = to_qcow2w(bd);
    struct qcow2w_layout lay = { 0 };
    uint64_t l1_clusters = div_up(w->l1_entries * 8, w->cs), t, nbl, c, end;
    char err[256];
    uint8_t *hdr = NULL;
    int r;

    if (w->err)
        return w->err;
    if (w->finished)
        return fail(w, -EINVAL, -1, "internal error: finish called twice");
    w->finished = true;
    if ((r = qcow2w_l2_flush(w)) < 0)
        return set_err(w, r);
    if (w->ioq && (r = ioq_drain(w->ioq)) < 0)
        return set_err(w, r);
    if (w->p.prealloc != QCOW2W_PREALLOC_OFF) {
        lay.reftable_offset = w->pre_reftable_off;
        lay.reftable_clusters = (uint32_t)w->pre_reftable_clusters;
        lay.l1_offset = w->pre_l1_off;
        end = w->next_cluster;
        r = qcow2w_rc_write(w, w->pre_reftable_off, w->pre_reftable_clusters,
                            w->pre_refblocks_off, end);
    } else {
        /* refcount table, new refcount blocks, then the L1 table, at the end */
        if ((r = qcow2w_rc_plan(w, l1_clusters, &t, &nbl)) < 0 ||
            (r = qcow2w_alloc(w, t + nbl + l1_clusters, &c)) < 0)
            return set_err(w, r);
        lay.reftable_offset = c << w->cbits;
        lay.reftable_clusters = (uint32_t)t;
        lay.l1_offset = (c + t + nbl) << w->cbits;
        end = w->next_cluster;
        r = qcow2w_rc_write(w, lay.reftable_offset, t, (c + t) << w->cbits, end);
    }
    if (r < 0)
        return set_err(w, r);
    lay.l1_entries = (uint32_t)w->l1_entries;
    if ((r = write_l1(w, lay.l1_offset)) < 0)
        return r;
    if (w->durable && (r = bfile_sync(bd->file)) < 0)
        return set_err(w, r);
    /* last: the header, which makes the file an image */
    if (!(hdr = malloc(w->cs)))
        return fail(w, -ENOMEM, -1, "out of memory");
    if ((r = qcow2w_header_encode(&w->p, &lay, hdr, w->cs, err, sizeof(err))) < 0) {
        free(hdr);
        return fail(w, r, 0, err);
    }
    r = qcow2w_write_meta(w, hdr, w->cs, 0);
    free(hdr);
    if (r < 0)
        return r;
    if (w->durable && (r = bfile_sync(bd->file)) < 0)
        return set_err(w, r);
    bfile_refresh_size(bd->file);
    return 0;
}

static void q_abort(struct bd *bd)
{
    struct qcow2w *w = to_qcow2w(bd);

    if (w->ioq)
        ioq_drain(w->ioq);
    w->finished = true;
    if (!w->err)
        w->err = -ECANCELED;
}

static void q_close(struct bd *bd)
{
    qcow2w_free(to_qcow2w(bd));
}

const struct bd_driver bd_qcow2_out = {
    .name = "qcow2",
    .create_options_help = qcow2w_options_help,
    .create = qcow2w_create,
    .pwrite = q_pwrite,
    .write_zeroes = q_write_zeroes,
    .map_for_offload = qcow2w_map_for_offload,
    .compress = qcow2w_compress,
    .pwrite_compressed = q_pwrite_compressed,
    .finish = q_finish,
    .abort = q_abort,
    .close = q_close,
};
