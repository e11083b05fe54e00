/* qcow2 amend (qemu-img amend -o ...): compat (v2 <-> v3), refcount_bits,
 * lazy_refcounts, data_file, data_file_raw; backing_file/backing_fmt only
 * as they are (qemu-img 7.2 refuses to change them: "use rebase").
 *
 * Everything asked is checked before anything is written, in qemu-img's
 * order and with its messages (recorded without a file name, as qemu-img
 * prints them).  Then one of two ways, each crash-safe:
 *   - header fields only (lazy refcounts, data file, an upgrade): the
 *     first cluster's bytes are rebuilt and written in one write, synced;
 *   - new structures (another refcount width, a downgrade that expands
 *     zero clusters or drops persistent bitmaps, an upgrade that completes
 *     old snapshot entries): the snapshot commit engine writes the new
 *     refcount blocks and table (at the new width), L1/L2 tables and the
 *     snapshot table past the end of the file and syncs, then the header
 *     switches to all of it in that one write.
 * A kill before the header write leaves the old image (the new clusters
 * past its end have no refcount), after it the new one.  The header write
 * lies inside the first 512-byte sector whenever the header, its
 * extensions and the backing file name fit there (an upgrade adds the
 * feature name table only where it does).
 *
 * Where qemu-img is less careful, this is safer: a dirty or corrupt image
 * is refused (repair it first) instead of repaired on the fly; a downgrade
 * with persistent bitmaps frees their clusters (qemu-img leaves them as
 * leaks); a zstd image with compressed clusters in a snapshot is not
 * downgraded (qemu-img looks at the active layer only); nothing is
 * changed when a later option is refused.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "formats/qcow2/amend.h"
#include "formats/qcow2/refcount_entry.h"
#include "formats/qcow2/snapshot_commit.h"
#include "formats/qcow2/write.h"
#include "io/bfile.h"
#include "util/diag.h"
#include "util/endian.h"

/* qemu-img's messages name no file */
#define QFAIL(q, err, ...) diag_fail((q)->bd.diag, err, NULL, -1, __VA_ARGS__)
#define FAIL(q, err, ...) diag_fail((q)->bd.diag, err, (q)->bd.filename, -1, __VA_ARGS__)

#define EXTRA_FULL 24   /* vm_state_size_large, disk_size, icount */
#define SECTOR 512

struct plan {
    uint32_t version;
    uint32_t order;             /* refcount order */
    uint64_t incompat, compat, autoclear;
    uint8_t ctype;
    const char *data_file;      /* a new data file name, or NULL */
    bool downgrade, upgrade;
    bool expand_zeros;          /* some L2 entry is a zero cluster */
    bool drop_bitmaps;
    bool complete_snapshots;    /* some snapshot entry lacks v3's extra data */
    bool engine;                /* new structures past the end */
};

static size_t pad8(size_t n)
{
    return (n + 7) & ~(size_t)7;
}

static size_t snap_len(const struct qcow2_snapshot *sn)
{
    return QS_FIXED_LENGTH + sn->extra_size + strlen(sn->id) + strlen(sn->name);
}

/* ---- what the L2 tables hold ------------------------------------------ */

struct scan {
    bool zero, compressed;
};

static int scan_l1(struct qcow2 *q, uint64_t l1_off, uint32_t n, uint8_t *tab, struct scan *s)
{
    const struct qcow2_header *h = &q->h;
    uint64_t bytes = (uint64_t)n * 8;
    int r = 0;

    if (n > QCOW2_MAX_L1_BYTES / 8 || l1_off >= q->file_size || bytes > q->file_size - l1_off)
        return diag_fail(q->bd.diag, -EINVAL, q->bd.filename, (int64_t)l1_off,
                         "L1 table (%" PRIu32 " entries at offset %" PRIu64 ") runs past "
                         "the end of the file", n, l1_off);
    uint8_t *l1 = malloc(bytes);
    if (!l1)
        return FAIL(q, -ENOMEM, "out of memory");
    if ((r = bfile_pread(q->bd.file, l1, bytes, l1_off)) < 0)
        goto out;
    for (uint32_t i = 0; i < n; i++) {
        uint64_t l2;
        if ((r = qcow2_l1_entry_decode(h, be64_get(l1 + 8 * (uint64_t)i), i,
                                       l1_off + 8 * (uint64_t)i, &l2, q->bd.diag,
                                       q->bd.filename)) < 0)
            goto out;
        if (!l2)
            continue;
        if (l2 >= q->file_size || h->cluster_size > q->file_size - l2) {
            r = diag_fail(q->bd.diag, -EINVAL, q->bd.filename, (int64_t)l2,
                          "L2 table %" PRIu32 " at offset %" PRIu64 " is past the end of "
                          "the file", i, l2);
            goto out;
        }
        if ((r = bfile_pread(q->bd.file, tab, h->cluster_size, l2)) < 0)
            goto out;
        for (uint32_t j = 0; j < h->l2_entries; j++) {
            uint64_t e = be64_get(tab + (uint64_t)j * h->l2_entry_bytes);
            if (e & QCOW2_L2_COMPRESSED)
                s->compressed = true;
            else if (e & QCOW2_L2_ZERO)
                s->zero = true;
        }
    }
out:
    free(l1);
    return r;
}

/* Zero and compressed clusters, in the active tables and the snapshots'. */
static int scan_all(struct qcow2 *q, struct scan *s)
{
    const struct qcow2_header *h = &q->h;
    uint8_t *tab = malloc(h->cluster_size);
    int r;

    memset(s, 0, sizeof(*s));
    if (!tab)
        return FAIL(q, -ENOMEM, "out of memory");
    r = h->l1_size ? scan_l1(q, h->l1_table_offset, h->l1_size, tab, s) : 0;
    for (uint32_t i = 0; i < q->nsnaps && r == 0; i++)
        if (q->snaps[i].l1_size)
            r = scan_l1(q, q->snaps[i].l1_table_offset, q->snaps[i].l1_size, tab, s);
    free(tab);
    return r;
}

/* ---- the checks --------------------------------------------------------- */

static int strcmp0(const char *a, const char *b)
{
    return !a || !b ? (a != b) : strcmp(a, b);
}

static int make_plan(struct qcow2 *q, const struct bd_amend *a, struct plan *p)
{
    const struct qcow2_header *h = &q->h;
    bool data_file = h->incompatible & QCOW2_INCOMPAT_DATA_FILE;
    int r;

    memset(p, 0, sizeof(*p));
    p->version = h->version;
    p->order = h->refcount_order;
    p->incompat = h->incompatible;
    p->compat = h->compatible;
    p->autoclear = h->autoclear;
    p->ctype = h->compression_type;

    /* the options themselves, in qemu-img's order */
    if (a->encrypt)
        return QFAIL(q, -EINVAL, "Can't amend encryption options - encryption not present");
    if (a->compat) {
        if (!strcmp(a->compat, "0.10") || !strcmp(a->compat, "v2"))
            p->version = 2;
        else if (!strcmp(a->compat, "1.1") || !strcmp(a->compat, "v3"))
            p->version = 3;
        else
            return QFAIL(q, -EINVAL, "Unknown compatibility level %s", a->compat);
    }
    if (a->data_file && !data_file)
        return QFAIL(q, -EINVAL, "data-file can only be set for images that use an "
                     "external data file");
    if (a->data_file_raw == 1 && !(h->autoclear & QCOW2_AUTOCLEAR_DATA_RAW))
        return QFAIL(q, -EINVAL, "data-file-raw cannot be set on existing images");
    int64_t bits = a->refcount_bits ? a->refcount_bits : h->refcount_bits;
    if (bits <= 0 || bits > 64 || (bits & (bits - 1)))
        return QFAIL(q, -EINVAL, "Refcount width must be a power of two and may not "
                     "exceed 64 bits");

    /* diskimg's own: the refcounts must be right before anything trusts them */
    if ((r = qcow2_refuse_unclean(q)) < 0)
        return r;
    if (q->nsnaps != h->nb_snapshots)
        return FAIL(q, -EINVAL, "the snapshot table could not be read");

    /* the changes, in the order qemu-img makes them */
    p->upgrade = p->version > h->version;
    p->downgrade = p->version < h->version;
    if (p->upgrade) {
        for (uint32_t i = 0; i < q->nsnaps; i++)
            p->complete_snapshots |= q->snaps[i].extra_size < 16;
        p->engine |= p->complete_snapshots;
    }
    if ((uint64_t)bits != h->refcount_bits) {
        if (p->version < 3 && bits != 16)
            return QFAIL(q, -EINVAL, "Refcount widths other than 16 bits require "
                         "compatibility level 1.1 or above (use compat=1.1 or greater)");
        p->order = (uint32_t)__builtin_ctzll((uint64_t)bits);
        p->engine = true;
    }
    if (a->data_file_raw == 0)
        p->autoclear &= ~QCOW2_AUTOCLEAR_DATA_RAW;
    if (a->data_file) {
        if (!*a->data_file)
            return FAIL(q, -EINVAL, "the external data file cannot be unnamed: the image "
                        "would not open without it");
        if (strlen(a->data_file) > QCOW2_MAX_DATA_FILE_NAME)
            return FAIL(q, -ENAMETOOLONG, "the data file name is longer than %d bytes",
                        QCOW2_MAX_DATA_FILE_NAME);
        if (strcmp(a->data_file, h->data_file))
            p->data_file = a->data_file;
    }
    if (a->backing_file || a->backing_fmt) {
        const char *bf = h->has_backing_file ? h->backing_file : NULL;
        const char *bfmt = h->has_backing_fmt ? h->backing_fmt : NULL;
        if (strcmp0(a->backing_file, bf) || strcmp0(a->backing_fmt, bfmt))
            return QFAIL(q, -EINVAL, "Cannot amend the backing file\n"
                         "You can use 'diskimg rebase' instead.");
    }
    if (a->lazy_refcounts == 1 && !(h->compatible & QCOW2_COMPAT_LAZY_REFCOUNTS)) {
        if (p->version < 3)
            return QFAIL(q, -EINVAL, "Lazy refcounts only supported with compatibility "
                         "level 1.1 and above (use compat=1.1 or greater)");
        p->compat |= QCOW2_COMPAT_LAZY_REFCOUNTS;
    } else if (a->lazy_refcounts == 0) {
        p->compat &= ~QCOW2_COMPAT_LAZY_REFCOUNTS;
    }
    if (a->size && (r = qcow2_resize_check(q, a->size, p->version < h->version ?
                                                         h->version : p->version)) < 0)
        return r;
    if (p->downgrade) {
        uint64_t size = a->size ? a->size : q->bd.size;
        if (p->order != 4)
            return QFAIL(q, -ENOTSUP, "compat=0.10 requires refcount_bits=16");
        if (data_file)
            return QFAIL(q, -ENOTSUP, "Cannot downgrade an image with a data file");
        for (uint32_t i = 0; i < q->nsnaps; i++) {
            const struct qcow2_snapshot *sn = &q->snaps[i];
            if (sn->vm_state_size > UINT32_MAX || (sn->has_disk_size && sn->disk_size != size))
                return QFAIL(q, -ENOTSUP, "Internal snapshots prevent downgrade of image");
        }
        if (h->incompatible & ~QCOW2_INCOMPAT_COMPRESSION)
            return QFAIL(q, -ENOTSUP, "Cannot downgrade an image with incompatible features "
                         "0x%" PRIx64 " set", (uint64_t)(h->incompatible & ~QCOW2_INCOMPAT_COMPRESSION));
        struct scan s;
        if ((r = scan_all(q, &s)) < 0)
            return r;
        /* (qemu-img looks at the active layer only: a snapshot's zstd
         * clusters would be read as zlib after the downgrade) */
        if ((h->incompatible & QCOW2_INCOMPAT_COMPRESSION) && s.compressed)
            return QFAIL(q, -ENOTSUP, "Cannot downgrade an image with zstd compression type "
                         "and existing compressed clusters");
        p->incompat = 0;
        p->compat = 0;
        p->autoclear = 0;
        p->ctype = QCOW2_COMPRESSION_ZLIB;
        p->expand_zeros = s.zero;
        p->drop_bitmaps = h->has_bitmaps_ext;
        p->engine |= p->expand_zeros || p->drop_bitmaps;
    }
    return 0;
}

/* ---- the first cluster -------------------------------------------------- */

struct layout {
    uint32_t l1_size;
    uint64_t l1_off, reft_off, snap_off;
    uint32_t reft_clusters, nb;
};

/* The header, its extensions and the backing file name as the plan makes
 * them, in *out (a cluster); *len: the bytes to write from offset 0 (the
 * old ones past the new end included, zeroed). */
static int build_header(struct qcow2 *q, const struct plan *p, const struct layout *l,
                        bool no_table, uint8_t **out, size_t *len, size_t *end)
{
    const struct qcow2_header *h = &q->h;
    size_t cs = h->cluster_size;
    size_t have = q->file_size < cs ? (size_t)q->file_size : cs;
    uint8_t *old = calloc(1, cs), *nw = calloc(1, cs);
    int r = 0;

    *out = NULL;
    if (!old || !nw) {
        r = FAIL(q, -ENOMEM, "out of memory");
        goto out;
    }
    if ((r = bfile_pread(q->bd.file, old, have, 0)) < 0)
        goto out;
    memcpy(nw, old, QH_V2_LENGTH);
    be32_put(nw + QH_VERSION, p->version);
    be32_put(nw + QH_L1_SIZE, l->l1_size);
    be64_put(nw + QH_L1_TABLE_OFFSET, l->l1_off);
    be64_put(nw + QH_REFCOUNT_TABLE_OFFSET, l->reft_off);
    be32_put(nw + QH_REFCOUNT_TABLE_CLUSTERS, l->reft_clusters);
    be32_put(nw + QH_NB_SNAPSHOTS, l->nb);
    be64_put(nw + QH_SNAPSHOTS_OFFSET, l->snap_off);
    size_t old_hl = h->version >= 3 ? h->header_length : QH_V2_LENGTH;
    size_t hl = QH_V2_LENGTH;
    if (p->version >= 3) {
        hl = h->version >= 3 ? h->header_length : QH_V3_LENGTH_WITH_CTYPE;
        if (h->version >= 3)
            memcpy(nw + QH_V2_LENGTH, old + QH_V2_LENGTH, hl - QH_V2_LENGTH);
        be64_put(nw + QH_INCOMPATIBLE, p->incompat);
        be64_put(nw + QH_COMPATIBLE, p->compat);
        be64_put(nw + QH_AUTOCLEAR, p->autoclear);
        be32_put(nw + QH_REFCOUNT_ORDER, p->order);
        be32_put(nw + QH_HEADER_LENGTH, (uint32_t)hl);
        if (hl > QH_COMPRESSION_TYPE)
            nw[QH_COMPRESSION_TYPE] = p->ctype;
    }
    /* the extensions (validated at open), as they were but for what changes */
    size_t pos = hl, at = old_hl;
    bool has_table = false;
    while (at + 8 <= h->extensions_end && at + 8 <= have) {
        uint32_t type = be32_get(old + at), n = be32_get(old + at + 4);
        if (type == QCOW2_EXT_END)
            break;
        size_t sz = 8 + pad8(n);
        if (sz > have - at) {
            r = FAIL(q, -EINVAL, "header extension at offset %zu runs past the first "
                     "cluster", at);
            goto out;
        }
        const uint8_t *src = old + at;
        size_t put = sz;
        uint8_t ext[8 + QCOW2_MAX_DATA_FILE_NAME + 8];
        at += sz;
        if ((type == QCOW2_EXT_FEATURE_NAMES && (p->version < 3 || no_table)) ||
            (type == QCOW2_EXT_BITMAPS && p->drop_bitmaps))
            continue;
        has_table |= type == QCOW2_EXT_FEATURE_NAMES;
        if (type == QCOW2_EXT_DATA_FILE && p->data_file) {
            size_t dl = strlen(p->data_file);
            memset(ext, 0, sizeof(ext));
            be32_put(ext, QCOW2_EXT_DATA_FILE);
            be32_put(ext + 4, (uint32_t)dl);
            memcpy(ext + 8, p->data_file, dl);
            src = ext;
            put = 8 + pad8(dl);
        }
        if (pos + put > cs)
            goto nospace;
        memcpy(nw + pos, src, put);
        pos += put;
    }
    size_t name_len = h->has_backing_file ? strlen(h->backing_file) : 0;
    /* qemu-img names the features in v3 images of clusters above 4 KiB; an
     * upgrade adds the table where the header stays in its first sector */
    uint8_t table[8 + QCOW2W_FEATURE_TABLE_MAX];
    size_t tl = 8 + qcow2w_feature_table(table + 8);
    if (p->upgrade && !has_table && cs > 4096 && pos + tl + 8 + name_len <= SECTOR) {
        be32_put(table, QCOW2_EXT_FEATURE_NAMES);
        be32_put(table + 4, (uint32_t)(tl - 8));
        memcpy(nw + pos, table, tl);
        pos += tl;
    }
    pos += 8;   /* the end marker */
    if (pos + name_len > cs)
        goto nospace;
    be64_put(nw + QH_BACKING_FILE_OFFSET, name_len ? pos : 0);
    be32_put(nw + QH_BACKING_FILE_SIZE, (uint32_t)name_len);
    memcpy(nw + pos, h->backing_file, name_len);
    pos += name_len;
    /* the old bytes past the new end are cleared in the same write */
    size_t used = h->extensions_end;
    if (h->has_backing_file && h->backing_file_offset + h->backing_file_size > used)
        used = (size_t)(h->backing_file_offset + h->backing_file_size);
    if (used > have)
        used = have;
    *len = pos > used ? pos : used;
    *end = pos;
    *out = nw;
    nw = NULL;
    goto out;
nospace:
    r = FAIL(q, -ENOSPC, "the header, its extensions and the backing file name do not "
             "fit in the first cluster (%zu bytes)", cs);
out:
    free(old);
    free(nw);
    return r;
}

/* The first cluster as the plan makes it.  Where the extensions move
 * (another version, data file name, bitmaps dropped), a header that would
 * reach past the first sector leaves out the feature name table (names for
 * messages only) if that keeps it inside: a torn write then cannot leave
 * half an extension area. */
static int make_header(struct qcow2 *q, const struct plan *p, const struct layout *l,
                       uint8_t **buf, size_t *len)
{
    const struct qcow2_header *h = &q->h;
    bool moves = p->version != h->version || p->data_file || p->drop_bitmaps;
    size_t end, end2, len2;
    uint8_t *b2;
    int r = build_header(q, p, l, false, buf, len, &end);

    if (r < 0 || !moves || end <= SECTOR)
        return r;
    if (build_header(q, p, l, true, &b2, &len2, &end2) < 0) {
        diag_clear(q->bd.diag);     /* (it did fit with the table) */
        return 0;
    }
    if (end2 > SECTOR) {
        free(b2);
        return 0;
    }
    free(*buf);
    *buf = b2;
    *len = len2;
    return 0;
}

static int write_header(struct qcow2 *q, const struct plan *p, const struct layout *l)
{
    uint8_t *buf;
    size_t len;
    int r = make_header(q, p, l, &buf, &len);

    if (r < 0)
        return r;
    if ((r = bfile_pwrite(q->bd.file, buf, len, 0)) == 0)
        r = bfile_sync(q->bd.file);
    free(buf);
    return r;
}

/* ---- the snapshot table ------------------------------------------------- */

/* The snapshot table as stored, entries completed to v3's extra data when
 * `complete` (vm_state_size_large from the 32-bit field, the disk size the
 * image's, icount unknown: as qemu-img writes them); *l1_at: where each
 * entry's L1 table offset is in the new table. */
static int snapshot_table(struct qcow2 *q, bool complete, uint8_t **out, size_t *len,
                          size_t **l1_at)
{
    size_t n = 0;
    int r = 0;

    *out = NULL;
    *l1_at = calloc(q->nsnaps ? q->nsnaps : 1, sizeof(**l1_at));
    for (uint32_t i = 0; i < q->nsnaps; i++)
        n += pad8(snap_len(&q->snaps[i]) + EXTRA_FULL);
    uint8_t *t = calloc(1, n + 8), *e = malloc(QS_FIXED_LENGTH + QCOW2_MAX_SNAPSHOT_EXTRA +
                                               2 * UINT16_MAX + 2);
    if (!t || !e || !*l1_at) {
        free(t);
        free(e);
        return FAIL(q, -ENOMEM, "out of memory");
    }
    size_t pos = 0;
    for (uint32_t i = 0; i < q->nsnaps && r == 0; i++) {
        const struct qcow2_snapshot *sn = &q->snaps[i];
        size_t l = snap_len(sn), strs = strlen(sn->id) + strlen(sn->name);
        if ((r = bfile_pread(q->bd.file, e, l, sn->entry_offset)) < 0)
            break;
        (*l1_at)[i] = pos + QS_L1_TABLE_OFFSET;
        if (!complete || sn->extra_size >= 16) {
            memcpy(t + pos, e, l);
            pos += pad8(l);
            continue;
        }
        uint8_t *d = t + pos;
        memcpy(d, e, QS_FIXED_LENGTH);
        be32_put(d + QS_EXTRA_DATA_SIZE, EXTRA_FULL);
        uint8_t *x = d + QS_FIXED_LENGTH;
        memcpy(x, e + QS_FIXED_LENGTH, sn->extra_size);
        if (sn->extra_size < 8)
            be64_put(x, be32_get(e + QS_VM_STATE_SIZE));
        be64_put(x + 8, q->bd.size);
        be64_put(x + 16, UINT64_MAX);
        memcpy(x + EXTRA_FULL, e + QS_FIXED_LENGTH + sn->extra_size, strs);
        pos += pad8(QS_FIXED_LENGTH + EXTRA_FULL + strs);
    }
    free(e);
    if (r < 0) {
        free(t);
        free(*l1_at);
        *l1_at = NULL;
        return r;
    }
    *out = t;
    *len = pos;
    return 0;
}

/* ---- zero clusters into what v2 reads the same ---------------------------- */

struct l2map {
    uint64_t *old, *nw;
    size_t n, cap;
};

static int map_add(struct qcow2 *q, struct l2map *m, uint64_t old, uint64_t nw)
{
    if (m->n == m->cap) {
        size_t cap = m->cap ? 2 * m->cap : 64;
        uint64_t *o = realloc(m->old, cap * 8);
        if (o)
            m->old = o;
        uint64_t *n = o ? realloc(m->nw, cap * 8) : NULL;
        if (!o || !n)
            return FAIL(q, -ENOMEM, "out of memory");
        m->nw = n;
        m->cap = cap;
    }
    m->old[m->n] = old;
    m->nw[m->n++] = nw;
    return 0;
}

struct expand {
    struct qcow2_snapw *w;
    struct l2map map;
    uint64_t *fresh;            /* clusters appended (L2 tables, zeros) */
    size_t nfresh, capfresh;
    uint8_t *zeros;
    bool backing;
};

static int note_fresh(struct expand *x, uint64_t off)
{
    if (x->nfresh == x->capfresh) {
        size_t cap = x->capfresh ? 2 * x->capfresh : 64;
        uint64_t *f = realloc(x->fresh, cap * 8);
        if (!f)
            return FAIL(x->w->q, -ENOMEM, "out of memory");
        x->fresh = f;
        x->capfresh = cap;
    }
    x->fresh[x->nfresh++] = off;
    return 0;
}

/* A zero entry as v2 reads it: without a backing file nothing (zeros);
 * with one, a cluster of zeros -- the preallocated one where this entry
 * is its only user (its old content is not seen: the entry reads as
 * zeros until the switch), else a new one. */
static int expand_entry(struct expand *x, const struct qcow2_l2e *d, uint64_t l2rc,
                        uint64_t *e)
{
    struct qcow2_snapw *w = x->w;
    int r;

    if (d->kind == QK_ZERO_ALLOC && d->host >> w->cbits >= w->n)
        return diag_fail(w->q->bd.diag, -EINVAL, w->q->bd.filename, (int64_t)d->host,
                         "cluster at offset %" PRIu64 " is past the end of the file",
                         d->host);
    if (d->kind == QK_ZERO_ALLOC && d->host && w->rc[d->host >> w->cbits] == 1) {
        if ((r = bfile_pwrite(w->q->bd.file, x->zeros, w->cs, d->host)) < 0)
            return r;
        *e = d->host | QCOW2_L2_COPIED;
        return 0;
    }
    if (!x->backing) {
        *e = 0;
        return 0;
    }
    uint64_t off;
    if ((r = qcow2_snapw_append(w, x->zeros, w->cs, &off)) < 0 || (r = note_fresh(x, off)) < 0)
        return r;
    *e = off | (l2rc == 1 ? QCOW2_L2_COPIED : 0);
    return 0;
}

/* The L2 table at l2 with its zero entries expanded: *nl2 is where (l2
 * itself when nothing changed). */
static int expand_table(struct expand *x, uint32_t i, uint64_t l2, uint64_t *nl2)
{
    struct qcow2_snapw *w = x->w;
    const struct qcow2_header *h = &w->q->h;
    bool changed = false;
    int r;

    for (size_t k = 0; k < x->map.n; k++)
        if (x->map.old[k] == l2) {
            *nl2 = x->map.nw[k];
            return 0;
        }
    if (l2 >> w->cbits >= w->n)
        return diag_fail(w->q->bd.diag, -EINVAL, w->q->bd.filename, (int64_t)l2,
                         "L2 table %" PRIu32 " at offset %" PRIu64 " is past the end of "
                         "the file", i, l2);
    if ((r = bfile_pread(w->q->bd.file, w->tab, w->cs, l2)) < 0)
        return r;
    uint64_t l2rc = w->rc[l2 >> w->cbits];
    for (uint32_t j = 0; j < h->l2_entries; j++) {
        uint8_t *p = w->tab + (uint64_t)j * h->l2_entry_bytes;
        uint64_t e = be64_get(p), guest = ((uint64_t)i * h->l2_entries + j) << w->cbits;
        struct qcow2_l2e d;
        if (!(e & QCOW2_L2_ZERO) || (e & QCOW2_L2_COMPRESSED))
            continue;
        if ((r = qcow2_l2_entry_decode(h, false, e, 0, guest, l2 + (uint64_t)j * 8, &d,
                                       w->q->bd.diag, w->q->bd.filename)) < 0 ||
            (r = expand_entry(x, &d, l2rc, &e)) < 0)
            return r;
        be64_put(p, e);
        changed = true;
    }
    *nl2 = l2;
    if (changed && ((r = qcow2_snapw_append(w, w->tab, w->cs, nl2)) < 0 ||
                    (r = note_fresh(x, *nl2)) < 0))
        return r;
    return map_add(w->q, &x->map, l2, *nl2);
}

/* A copy of L1 table `l1` (n entries) naming the expanded tables; *changed. */
static int expand_l1(struct expand *x, const uint64_t *l1, uint32_t n, uint64_t **out,
                     bool *changed)
{
    struct qcow2_snapw *w = x->w;
    int r;

    *changed = false;
    if (!(*out = calloc(n ? n : 1, 8)))
        return FAIL(w->q, -ENOMEM, "out of memory");
    for (uint32_t i = 0; i < n; i++) {
        uint64_t l2, nl2;
        (*out)[i] = l1[i];
        if ((r = qcow2_l1_entry_decode(&w->q->h, l1[i], i, (uint64_t)-1, &l2, w->q->bd.diag,
                                       w->q->bd.filename)) < 0)
            return r;
        if (!l2)
            continue;
        if ((r = expand_table(x, i, l2, &nl2)) < 0)
            return r;
        if (nl2 != l2) {
            (*out)[i] = (l1[i] & ~QCOW2_L1_OFFSET_MASK) | nl2;
            *changed = true;
        }
    }
    return 0;
}

/* Every table, active and snapshots': zero entries expanded into copies of
 * their L2 tables, new L1 tables where those changed (the active one in
 * w->l1, the snapshots' appended and named in `tab`), refcounts moved from
 * the old tables to the new ones. */
static int expand_zeros(struct qcow2_snapw *w, uint8_t *tab, const size_t *l1_at,
                        bool *active_changed)
{
    struct qcow2 *q = w->q;
    struct expand x = { .w = w, .backing = q->h.has_backing_file };
    uint64_t **sl1 = calloc(q->nsnaps + 1, sizeof(*sl1)), **nl1 = calloc(q->nsnaps + 1,
                                                                          sizeof(*nl1));
    bool *ch = calloc(q->nsnaps + 1, sizeof(*ch));
    int r = 0;

    x.zeros = calloc(1, w->cs);
    if (!sl1 || !nl1 || !ch || !x.zeros) {
        r = FAIL(q, -ENOMEM, "out of memory");
        goto out;
    }
    /* [0]: the active table; [1 + i]: snapshot i */
    if ((r = qcow2_snapw_read_l1(w, q->h.l1_table_offset, q->h.l1_size, &sl1[0])) < 0 ||
        (r = expand_l1(&x, sl1[0], q->h.l1_size, &nl1[0], &ch[0])) < 0)
        goto out;
    for (uint32_t i = 0; i < q->nsnaps; i++) {
        const struct qcow2_snapshot *sn = &q->snaps[i];
        if ((r = qcow2_snapw_read_l1(w, sn->l1_table_offset, sn->l1_size, &sl1[1 + i])) < 0 ||
            (r = expand_l1(&x, sl1[1 + i], sn->l1_size, &nl1[1 + i], &ch[1 + i])) < 0)
            goto out;
    }
    /* the new clusters are counted by the walk below, like the old ones */
    for (size_t k = 0; k < x.nfresh; k++)
        w->rc[x.fresh[k] >> w->cbits] = 0;
    for (uint32_t i = 0; i <= q->nsnaps && r == 0; i++) {
        uint32_t n = i ? q->snaps[i - 1].l1_size : q->h.l1_size;
        r = qcow2_snapw_walk(w, sl1[i], n, -1);
    }
    for (uint32_t i = 0; i <= q->nsnaps && r == 0; i++) {
        uint32_t n = i ? q->snaps[i - 1].l1_size : q->h.l1_size;
        r = qcow2_snapw_walk(w, nl1[i], n, +1);
    }
    if (r < 0)
        goto out;
    for (uint32_t i = 0; i < q->nsnaps; i++) {
        const struct qcow2_snapshot *sn = &q->snaps[i];
        if (!ch[1 + i])
            continue;
        uint64_t off;
        for (uint32_t k = 0; k < sn->l1_size; k++)
            be64_put((uint8_t *)&nl1[1 + i][k], nl1[1 + i][k]);
        if ((r = qcow2_snapw_append(w, nl1[1 + i], (uint64_t)sn->l1_size * 8, &off)) < 0 ||
            (r = qcow2_snapw_free_range(w, sn->l1_table_offset, (uint64_t)sn->l1_size * 8)) < 0)
            goto out;
        be64_put(tab + l1_at[i], off);
    }
    *active_changed = ch[0];
    if (ch[0]) {
        free(w->l1);
        w->l1 = nl1[0];
        nl1[0] = NULL;
    }
out:
    for (uint32_t i = 0; sl1 && nl1 && i <= q->nsnaps; i++) {
        free(sl1[i]);
        free(nl1[i]);
    }
    free(sl1);
    free(nl1);
    free(ch);
    free(x.zeros);
    free(x.fresh);
    free(x.map.old);
    free(x.map.nw);
    return r;
}

/* ---- persistent bitmaps dropped (v2 has none) ------------------------------- */

static int drop_bitmaps(struct qcow2_snapw *w)
{
    struct qcow2 *q = w->q;
    int r = 0;

    for (uint32_t i = 0; i < q->nbitmaps && r == 0; i++) {
        const struct qcow2_bitmap *b = &q->bitmaps[i];
        uint64_t *t;
        if ((r = qcow2_snapw_read_l1(w, b->table_offset, b->table_size, &t)) < 0)
            return r;
        for (uint32_t k = 0; k < b->table_size && r == 0; k++) {
            uint64_t off = t[k] & QCOW2_BME_TABLE_OFFSET_MASK;
            if (off)
                r = qcow2_snapw_free_range(w, off, w->cs);
        }
        free(t);
        if (r == 0)
            r = qcow2_snapw_free_range(w, b->table_offset, (uint64_t)b->table_size * 8);
    }
    if (r == 0)
        r = qcow2_snapw_free_range(w, q->h.bitmap_directory_offset,
                                   q->h.bitmap_directory_size);
    return r;
}

/* ---- the whole operation ------------------------------------------------------- */

/* A narrower refcount width must hold every refcount (qemu-img's check). */
static int check_width(struct qcow2_snapw *w, uint32_t order)
{
    uint64_t max = qcow2_rc_max(order);

    for (uint64_t c = 0; c < w->n; c++)
        if (w->rc[c] > max)
            return QFAIL(w->q, -EINVAL, "Cannot decrease refcount entry width to %u bits: "
                         "Cluster at offset %#" PRIx64 " has a refcount of %" PRIu64,
                         1u << order, c << w->cbits, w->rc[c]);
    return 0;
}

static int run_engine(struct qcow2 *q, const struct plan *p, bool check_only)
{
    const struct qcow2_header *h = &q->h;
    struct qcow2_snapw w;
    struct qcow2_snapw_layout sl;
    uint8_t *tab = NULL;
    size_t len = 0, *l1_at = NULL;
    bool active_changed = false;
    int r;

    if ((r = qcow2_check_sound(q, "amending it")) < 0)
        return r;
    if ((r = qcow2_snapw_init(&w, q)) < 0)
        goto out;
    if (p->order < h->refcount_order && (r = check_width(&w, p->order)) < 0)
        goto out;
    if (check_only)
        goto out;
    w.order = p->order;
    if ((r = qcow2_snapw_read_l1(&w, h->l1_table_offset, h->l1_size, &w.l1)) < 0)
        goto out;
    w.l1_size = h->l1_size;
    if ((r = snapshot_table(q, p->complete_snapshots, &tab, &len, &l1_at)) < 0)
        goto out;
    if (p->expand_zeros && (r = expand_zeros(&w, tab, l1_at, &active_changed)) < 0)
        goto out;
    if (p->drop_bitmaps && (r = drop_bitmaps(&w)) < 0)
        goto out;
    if ((r = qcow2_snapw_prepare(&w, !active_changed, true, tab, q->nsnaps ? len : 0,
                                 &sl)) < 0)
        goto out;
    struct layout l = { .l1_size = w.l1_size, .l1_off = sl.l1_off, .reft_off = sl.reft_off,
                        .reft_clusters = sl.reft_clusters, .nb = q->nsnaps,
                        .snap_off = sl.snap_off };
    r = write_header(q, p, &l);
out:
    free(tab);
    free(l1_at);
    qcow2_snapw_free(&w);
    return r;
}

int qcow2_amend(struct bd *bd, const struct bd_amend *a, bool *resize_first)
{
    struct qcow2 *q = to_qcow2(bd);
    const struct qcow2_header *h = &q->h;
    struct plan p;
    int r;

    *resize_first = false;
    if (!bd->file->writable || bd->file->kind == BFILE_STREAM)
        return FAIL(q, -EROFS, "the image is not open for writing");
    if (q->snapshot >= 0)
        return FAIL(q, -EINVAL, "a snapshot is open, not the image");
    if ((r = make_plan(q, a, &p)) < 0)
        return r;
    /* qemu-img resizes before it downgrades, after everything else */
    *resize_first = p.downgrade;
    if (p.engine)
        return run_engine(q, &p, a->check_only);
    if (a->check_only)
        return 0;
    struct layout l = { .l1_size = h->l1_size, .l1_off = h->l1_table_offset,
                        .reft_off = h->refcount_table_offset,
                        .reft_clusters = h->refcount_table_clusters, .nb = h->nb_snapshots,
                        .snap_off = h->snapshots_offset };
    uint8_t *buf, *old;
    size_t len;
    if ((r = make_header(q, &p, &l, &buf, &len)) < 0)
        return r;
    /* nothing to change: nothing written */
    if (!(old = malloc(len))) {
        free(buf);
        return FAIL(q, -ENOMEM, "out of memory");
    }
    r = bfile_pread(bd->file, old, len, 0);
    if (r == 0 && memcmp(old, buf, len) != 0 && (r = bfile_pwrite(bd->file, buf, len, 0)) == 0)
        r = bfile_sync(bd->file);
    free(old);
    free(buf);
    return r;
}
