/* qcow2 persistent dirty bitmaps, in place (qemu-img bitmap --add,
 * --remove, --clear, --enable, --disable, --merge).
 *
 * The operations run in order on a model of the directory in memory; a
 * bitmap whose content changes (added, cleared, merged into) is loaded
 * and gets a new table, the others keep theirs.  Then, as the snapshot
 * commands do (snapshot_commit.c): the new data clusters, tables and
 * directory are written past the end of the file, the refcounts anew
 * after them (the old tables and directory freed there), synced, and the
 * first cluster (refcount table pointer, autoclear bit, bitmaps extension)
 * is switched in one write.  A crash before that write leaves the old
 * image, after it the new one.  As qemu-img, when an operation fails the
 * ones before it are kept.  Messages of failed operations are qemu-img's.
 * Refused: v2 images (adding), dirty or corrupt images, and images whose
 * metadata check finds corruptions; bitmaps marked in use (inconsistent)
 * can only be removed, as in qemu.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "formats/qcow2/bitmap_int.h"
#include "formats/qcow2/qcow2.h"
#include "formats/qcow2/snapshot_commit.h"
#include "io/bfile.h"
#include "util/diag.h"
#include "util/endian.h"

#define FAIL(q, err, ...) diag_fail((q)->bd.diag, err, (q)->bd.filename, -1, __VA_ARGS__)

#define BME_FIXED 24
#define MIN_GRANULARITY 512
#define MAX_GRANULARITY (UINT64_C(1) << QCOW2_BME_MAX_GRANULARITY_BITS)

struct bment {
    char *name;
    uint32_t flags;
    uint8_t gbits;
    const struct qcow2_bitmap *old;     /* as read at open; NULL: added now */
    uint8_t *data;                      /* new content; NULL: the old table stays */
    bool removed;
    uint64_t table_offset;              /* where its table is (new or old) */
    uint32_t table_size;
};

struct bmodel {
    struct qcow2 *q;
    struct bment *e;
    uint32_t n, live;
    bool fatal;         /* a failure of the image (corrupt, I/O), not of an operation */
};

static size_t pad8(size_t n)
{
    return (n + 7) & ~(size_t)7;
}

static void model_free(struct bmodel *m)
{
    for (uint32_t i = 0; i < m->n; i++) {
        if (!m->e[i].old)
            free(m->e[i].name);
        free(m->e[i].data);
    }
    free(m->e);
}

static int model_init(struct bmodel *m, struct qcow2 *q)
{
    memset(m, 0, sizeof(*m));
    m->q = q;
    m->e = calloc((size_t)q->nbitmaps + 1, sizeof(*m->e));
    if (!m->e)
        return FAIL(q, -ENOMEM, "out of memory");
    for (uint32_t i = 0; i < q->nbitmaps; i++) {
        const struct qcow2_bitmap *b = &q->bitmaps[i];
        m->e[i] = (struct bment){ .name = b->name, .flags = b->flags,
                                  .gbits = b->granularity_bits, .old = b,
                                  .table_offset = b->table_offset,
                                  .table_size = b->table_size };
    }
    m->n = m->live = q->nbitmaps;
    return 0;
}

static struct bment *find(struct bmodel *m, const char *name)
{
    for (uint32_t i = 0; i < m->n; i++)
        if (!m->e[i].removed && strcmp(m->e[i].name, name) == 0)
            return &m->e[i];
    return NULL;
}

static int not_found(struct qcow2 *q, const char *name)
{
    return FAIL(q, -ENOENT, "Dirty bitmap '%s' not found", name);
}

static int inconsistent(struct qcow2 *q, const char *name)
{
    return FAIL(q, -EBUSY, "Bitmap '%s' is inconsistent and cannot be used\n"
                "Try block-dirty-bitmap-remove to delete this bitmap from disk", name);
}

/* The bitmap to change (exists, not in use). */
static int usable(struct bmodel *m, const char *name, struct bment **out)
{
    if (!(*out = find(m, name)))
        return not_found(m->q, name);
    if ((*out)->flags & QCOW2_BME_IN_USE)
        return inconsistent(m->q, name);
    return 0;
}

/* Its content in memory (loaded from the image the first time). */
static int loaded(struct bmodel *m, struct bment *e)
{
    uint64_t len;

    if (e->data)
        return 0;
    int r = qcow2_bitmap_load(m->q, e->old, &e->data, &len);
    m->fatal |= r < 0;
    return r;
}

static int op_add(struct bmodel *m, const char *name, uint64_t g)
{
    struct qcow2 *q = m->q;
    const char *file = q->bd.filename;
    unsigned gbits = 0;

    if (!*name)
        return FAIL(q, -EINVAL, "Bitmap name cannot be empty");
    if (find(m, name))
        return FAIL(q, -EEXIST, "Bitmap already exists: %s", name);
    if (g == 0) {
        /* qemu's default: the cluster size, within 4 KiB .. 64 KiB */
        g = q->h.cluster_size;
        g = g < 4096 ? 4096 : g > 65536 ? 65536 : g;
    }
    if (g < MIN_GRANULARITY || g > MAX_GRANULARITY || (g & (g - 1)))
        return FAIL(q, -EINVAL, "Granularity must be power of 2 and at least 512");
    while ((UINT64_C(1) << gbits) < g)
        gbits++;
    if (q->h.version < 3)
        return FAIL(q, -ENOTSUP, "Can't make bitmap '%s' persistent in '%s': Cannot store "
                    "dirty bitmaps in qcow2 v2 files", name, file);
    if (m->live >= QCOW2_MAX_BITMAPS)
        return FAIL(q, -EFBIG, "Can't make bitmap '%s' persistent in '%s': Maximum number "
                    "of persistent bitmaps is already reached", name, file);
    if (strlen(name) > QCOW2_BME_MAX_NAME)
        return FAIL(q, -EINVAL, "Can't make bitmap '%s' persistent in '%s': Name length "
                    "exceeds maximum (%d characters)", name, file, QCOW2_BME_MAX_NAME);
    uint64_t bytes = qcow2_bitmap_bytes(q->h.size, gbits);
    uint64_t phys = (uint64_t)qcow2_bitmap_table_size(q->h.size, gbits,
                                                      q->h.cluster_size) * q->h.cluster_size;
    if (phys > QCOW2_BME_MAX_PHYS ||
        qcow2_bitmap_table_size(q->h.size, gbits, q->h.cluster_size) >
            QCOW2_BME_MAX_TABLE_ENTRIES)
        return FAIL(q, -EFBIG, "Can't make bitmap '%s' persistent in '%s': Too much space "
                    "will be occupied by the bitmap. Use larger granularity", name, file);
    /* room for one more entry (the array has one spare slot per add) */
    struct bment *ne = realloc(m->e, ((size_t)m->n + 2) * sizeof(*ne));
    if (!ne)
        return FAIL(q, -ENOMEM, "out of memory");
    m->e = ne;
    struct bment *e = &m->e[m->n];
    memset(e, 0, sizeof(*e));
    if (!(e->name = strdup(name)) || !(e->data = calloc(1, bytes ? bytes : 1))) {
        free(e->name);
        return FAIL(q, -ENOMEM, "out of memory");
    }
    e->flags = QCOW2_BME_AUTO;
    e->gbits = (uint8_t)gbits;
    m->n++;
    m->live++;
    return 0;
}

/* The source of a merge: its content (borrowed or malloc'd: *owned). */
static int merge_source(struct bmodel *m, const struct bd_bitmap_op *op,
                        const uint8_t **data, unsigned *gbits, uint64_t *size, bool *owned)
{
    struct bd *sbd = op->source_bd;

    *owned = false;
    if (!sbd || sbd == &m->q->bd) {
        struct bment *s;
        int r = usable(m, op->source, &s);
        if (r < 0 || (r = loaded(m, s)) < 0)
            return r;
        *data = s->data;
        *gbits = s->gbits;
        *size = m->q->h.size;
        return 0;
    }
    if (sbd->drv != &bd_qcow2)
        return not_found(m->q, op->source);
    struct qcow2 *sq = to_qcow2(sbd);
    const struct qcow2_bitmap *b = NULL;
    for (uint32_t i = 0; i < sq->nbitmaps && !b; i++)
        if (strcmp(sq->bitmaps[i].name, op->source) == 0)
            b = &sq->bitmaps[i];
    if (!b)
        return not_found(m->q, op->source);
    if (b->flags & QCOW2_BME_IN_USE)
        return inconsistent(m->q, op->source);
    uint8_t *d;
    uint64_t len;
    int r = qcow2_bitmap_load(sq, b, &d, &len);
    if (r < 0) {
        /* the source image's reason */
        m->fatal = true;
        return diag_fail(m->q->bd.diag, r, sbd->diag->file, sbd->diag->offset, "%s",
                         sbd->diag->what);
    }
    *data = d;
    *gbits = b->granularity_bits;
    *size = sq->h.size;
    *owned = true;
    return 0;
}

static int op_merge(struct bmodel *m, struct bment *dst, const struct bd_bitmap_op *op)
{
    const uint8_t *src = NULL;
    unsigned sbits = 0;
    uint64_t ssize = 0;
    bool owned = false;
    int r;

    if ((r = merge_source(m, op, &src, &sbits, &ssize, &owned)) < 0)
        return r;
    if (ssize != m->q->h.size)
        r = FAIL(m->q, -EINVAL, "Bitmaps are of different sizes (destination size is %"
                 PRIu64 ", source size is %" PRIu64 ") and can't be merged",
                 m->q->h.size, ssize);
    else if ((r = loaded(m, dst)) == 0)
        qcow2_bitmap_merge(dst->data, dst->gbits, src, sbits, ssize);
    if (owned)
        free((void *)src);
    return r;
}

static int apply(struct bmodel *m, const char *name, const struct bd_bitmap_op *op,
                 uint64_t g)
{
    struct bment *e;
    int r;

    if (op->act == BD_BITMAP_ADD)
        return op_add(m, name, g);
    if (op->act == BD_BITMAP_REMOVE) {
        if (!(e = find(m, name)))
            return not_found(m->q, name);
        e->removed = true;
        m->live--;
        return 0;
    }
    if ((r = usable(m, name, &e)) < 0)
        return r;
    switch (op->act) {
    case BD_BITMAP_CLEAR:
        free(e->data);
        e->data = calloc(1, qcow2_bitmap_bytes(m->q->h.size, e->gbits) + 1);
        return e->data ? 0 : FAIL(m->q, -ENOMEM, "out of memory");
    case BD_BITMAP_ENABLE:
        e->flags |= QCOW2_BME_AUTO;
        return 0;
    case BD_BITMAP_DISABLE:
        e->flags &= ~QCOW2_BME_AUTO;
        return 0;
    case BD_BITMAP_MERGE:
        return op_merge(m, e, op);
    default:
        return FAIL(m->q, -EINVAL, "unknown bitmap operation");
    }
}

/* --- writing ------------------------------------------------------------ */

/* Free what an old bitmap holds: its data clusters and its table. */
static int free_old(struct qcow2_snapw *w, const struct qcow2_bitmap *b)
{
    uint64_t *t;
    int r = qcow2_bitmap_read_table(w->q, b, &t);

    for (uint32_t k = 0; r == 0 && k < b->table_size; k++) {
        uint64_t off = t[k] & QCOW2_BME_TABLE_OFFSET_MASK;
        if (off)
            r = qcow2_snapw_free_range(w, off, w->cs);
    }
    free(t);
    return r < 0 ? r : qcow2_snapw_free_range(w, b->table_offset, (uint64_t)b->table_size * 8);
}

/* Data clusters (all-zero ones left out) and the table of `e`, appended. */
static int write_content(struct qcow2_snapw *w, struct bment *e)
{
    struct qcow2 *q = w->q;
    uint64_t bytes = qcow2_bitmap_bytes(q->h.size, e->gbits), cs = w->cs;
    uint32_t ts = qcow2_bitmap_table_size(q->h.size, e->gbits, q->h.cluster_size);
    uint8_t *t = calloc(ts, 8);
    int r = 0;

    if (!t)
        return FAIL(q, -ENOMEM, "out of memory");
    for (uint32_t k = 0; k < ts && r == 0; k++) {
        uint64_t at = (uint64_t)k * cs, n = bytes - at < cs ? bytes - at : cs, off;
        if (at >= bytes)
            break;
        const uint8_t *p = e->data + at;
        bool zero = true;
        for (uint64_t i = 0; i < n && zero; i++)
            zero = p[i] == 0;
        if (zero)
            continue;
        if ((r = qcow2_snapw_append(w, p, n, &off)) == 0)
            be64_put(t + 8 * (uint64_t)k, off);
    }
    if (r == 0)
        r = qcow2_snapw_append(w, t, (uint64_t)ts * 8, &e->table_offset);
    e->table_size = ts;
    free(t);
    return r;
}

/* The new directory (entries of the live bitmaps, in order). */
static int encode_directory(struct bmodel *m, uint8_t **out, uint64_t *len)
{
    uint64_t total = 0;

    for (uint32_t i = 0; i < m->n; i++)
        if (!m->e[i].removed)
            total += pad8(BME_FIXED + strlen(m->e[i].name));
    if (total > QCOW2_MAX_BITMAP_DIR)
        return FAIL(m->q, -EFBIG, "the bitmap directory would be larger than %u bytes",
                    QCOW2_MAX_BITMAP_DIR);
    uint8_t *d = calloc(1, total ? total : 1);
    if (!d)
        return FAIL(m->q, -ENOMEM, "out of memory");
    uint64_t pos = 0;
    for (uint32_t i = 0; i < m->n; i++) {
        const struct bment *e = &m->e[i];
        if (e->removed)
            continue;
        size_t nl = strlen(e->name);
        be64_put(d + pos, e->table_offset);
        be32_put(d + pos + 8, e->table_size);
        be32_put(d + pos + 12, e->flags);
        d[pos + 16] = QCOW2_BME_TYPE_DIRTY;
        d[pos + 17] = e->gbits;
        be16_put(d + pos + 18, (uint16_t)nl);
        memcpy(d + pos + BME_FIXED, e->name, nl);
        pos += pad8(BME_FIXED + nl);
    }
    *out = d;
    *len = total;
    return 0;
}

/* The first cluster with the new refcount table, autoclear bit and bitmaps
 * extension (dropped when there are none; put where it was, else last),
 * the other extensions and the backing file name kept; one write. */
static int switch_header(struct bmodel *m, uint64_t reft, uint32_t reft_clusters,
                         uint64_t dir_off, uint64_t dir_len)
{
    struct qcow2 *q = m->q;
    const struct qcow2_header *h = &q->h;
    size_t cs = h->cluster_size;
    size_t have = q->file_size < cs ? (size_t)q->file_size : cs;
    uint8_t *old = calloc(1, cs), *nw = calloc(1, cs);
    uint8_t ext[8 + 24];
    bool placed = m->live == 0;
    int r;

    if (!old || !nw) {
        r = FAIL(q, -ENOMEM, "out of memory");
        goto out;
    }
    if ((r = bfile_pread(q->bd.file, old, have, 0)) < 0)
        goto out;
    be32_put(ext, QCOW2_EXT_BITMAPS);
    be32_put(ext + 4, 24);
    be32_put(ext + 8, m->live);
    be32_put(ext + 12, 0);
    be64_put(ext + 16, dir_len);
    be64_put(ext + 24, dir_off);
    size_t hl = h->header_length, pos = hl, p = hl;
    memcpy(nw, old, hl);
    be64_put(nw + QH_REFCOUNT_TABLE_OFFSET, reft);
    be32_put(nw + QH_REFCOUNT_TABLE_CLUSTERS, reft_clusters);
    uint64_t ac = h->autoclear;
    ac = m->live ? ac | QCOW2_AUTOCLEAR_BITMAPS : ac & ~QCOW2_AUTOCLEAR_BITMAPS;
    be64_put(nw + QH_AUTOCLEAR, ac);
    /* the extensions (validated by the header decode) */
    while (p + 8 <= have) {
        uint32_t type = be32_get(old + p), len = be32_get(old + p + 4);
        if (type == QCOW2_EXT_END)
            break;
        size_t n = 8 + pad8(len);
        if (n > have - p) {
            r = FAIL(q, -EINVAL, "header extension at offset %zu runs past the first "
                     "cluster", p);
            goto out;
        }
        const uint8_t *src = old + p;
        if (type == QCOW2_EXT_BITMAPS) {
            if (placed) {
                p += n;
                continue;
            }
            src = ext;
            n = sizeof(ext);
            placed = true;
        }
        if (pos + n + sizeof(ext) + 8 > cs) {
            r = FAIL(q, -ENOSPC, "the header extensions do not fit the first cluster");
            goto out;
        }
        memcpy(nw + pos, src, n);
        pos += n;
        p += type == QCOW2_EXT_BITMAPS ? 8 + pad8(len) : n;
    }
    if (!placed) {
        memcpy(nw + pos, ext, sizeof(ext));
        pos += sizeof(ext);
    }
    size_t used = p + 8;
    pos += 8;   /* the end marker: zeros */
    if (h->has_backing_file) {
        size_t bl = h->backing_file_size;
        if (h->backing_file_offset + bl > used)
            used = h->backing_file_offset + bl;
        if (pos + bl > cs) {
            r = FAIL(q, -ENOSPC, "the backing file name does not fit in the first cluster "
                     "with the bitmaps extension");
            goto out;
        }
        memcpy(nw + pos, old + h->backing_file_offset, bl);
        be64_put(nw + QH_BACKING_FILE_OFFSET, pos);
        pos += bl;
    }
    /* old bytes past the new end are cleared in the same write */
    size_t len = pos > used ? pos : used;
    if (len > cs)
        len = cs;
    if ((r = bfile_pwrite(q->bd.file, nw, len, 0)) < 0)
        goto out;
    r = bfile_sync(q->bd.file);
out:
    free(old);
    free(nw);
    return r;
}

static int commit(struct bmodel *m)
{
    struct qcow2 *q = m->q;
    const struct qcow2_header *h = &q->h;
    struct qcow2_snapw w;
    uint8_t *dir = NULL;
    uint64_t dir_len = 0, dir_off = 0, reft;
    uint32_t reft_clusters;
    int r;

    if ((r = qcow2_snapw_init(&w, q)) < 0)
        goto out;
    for (uint32_t i = 0; i < m->n && r == 0; i++) {
        struct bment *e = &m->e[i];
        if (e->old && (e->removed || e->data))
            r = free_old(&w, e->old);
    }
    if (r == 0 && h->has_bitmaps_ext && q->nbitmaps)
        r = qcow2_snapw_free_range(&w, h->bitmap_directory_offset,
                                   h->bitmap_directory_size);
    for (uint32_t i = 0; i < m->n && r == 0; i++) {
        struct bment *e = &m->e[i];
        if (!e->removed && e->data)
            r = write_content(&w, e);
    }
    if (r == 0 && m->live && (r = encode_directory(m, &dir, &dir_len)) == 0)
        r = qcow2_snapw_append(&w, dir, dir_len, &dir_off);
    if (r == 0 && (r = qcow2_snapw_write_refcounts(&w, &reft, &reft_clusters)) == 0)
        r = switch_header(m, reft, reft_clusters, dir_off, dir_len);
out:
    free(dir);
    qcow2_snapw_free(&w);
    return r;
}

static int refuse(struct qcow2 *q)
{
    int r;

    if (!q->bd.file->writable || q->bd.file->kind == BFILE_STREAM)
        return FAIL(q, -EROFS, "the image is not open for writing");
    if (q->snapshot >= 0)
        return FAIL(q, -EINVAL, "a snapshot is open, not the image");
    if ((r = qcow2_refuse_unclean(q)) < 0)
        return r;
    if (q->nbitmaps != q->h.nb_bitmaps && q->h.has_bitmaps_ext)
        return FAIL(q, -EINVAL, "the bitmap directory could not be read");
    return qcow2_check_sound(q, "changing bitmaps");
}

int qcow2_bitmap_op(struct bd *bd, const char *name, const struct bd_bitmap_op *ops,
                    size_t n, uint64_t granularity, size_t *failed)
{
    struct qcow2 *q = to_qcow2(bd);
    struct diag *d = q->bd.diag;
    struct bmodel m;
    size_t k;
    int r, op_r = 0;

    *failed = n;
    if ((r = refuse(q)) < 0)
        return r;
    if ((r = model_init(&m, q)) < 0)
        return r;
    for (k = 0; k < n; k++)
        if ((op_r = apply(&m, name, &ops[k], granularity)) < 0)
            break;
    if (op_r < 0 && m.fatal) {
        model_free(&m);
        return op_r;
    }
    r = op_r;
    if (k > 0) {
        /* the operations before a failed one are kept, as qemu-img does */
        char what[sizeof(d->what)];
        int err = d->err;
        snprintf(what, sizeof(what), "%s", d->what);
        diag_clear(d);
        if ((r = commit(&m)) == 0 && op_r < 0)
            r = diag_fail(d, err, q->bd.filename, -1, "%s", what);
    }
    if (op_r < 0 && r == op_r)
        *failed = k;
    model_free(&m);
    return r;
}

/* --- convert --bitmaps --------------------------------------------------- */

static int copy_check(struct qcow2 *sq, bool skip_broken)
{
    /* qemu-img looks at the bitmaps last to first */
    for (uint32_t i = sq->nbitmaps; i-- > 0;) {
        const struct qcow2_bitmap *b = &sq->bitmaps[i];
        if (!(b->flags & QCOW2_BME_IN_USE))
            continue;
        if (!skip_broken)
            return FAIL(sq, -EBUSY, "Cannot copy inconsistent bitmap '%s'\nTry "
                        "--skip-broken-bitmaps, or use 'qemu-img bitmap --remove' to "
                        "delete it", b->name);
        diag_warn(sq->bd.diag, NULL, -1, "Skipping inconsistent bitmap '%s'", b->name);
    }
    return 0;
}

int qcow2_bitmaps_copy(struct bd *dst, struct bd *src, bool skip_broken)
{
    struct qcow2 *sq = to_qcow2(src);
    struct bmodel m;
    int r;

    if (!dst) {
        if (src->drv != &bd_qcow2)
            return diag_fail(src->diag, -ENOTSUP, src->filename, -1,
                             "Source lacks bitmap support");
        return copy_check(sq, skip_broken);
    }
    struct qcow2 *q = to_qcow2(dst);
    if (dst->drv != &bd_qcow2 || q->h.version < 3)
        return FAIL(q, -ENOTSUP, "Format driver '%s' does not support bitmaps",
                    dst->drv->name);
    if (sq->bd.size != q->bd.size)
        return FAIL(q, -EINVAL, "the output's virtual size (%" PRIu64 ") is not the "
                    "source's (%" PRIu64 "): its bitmaps cannot be copied", q->bd.size,
                    sq->bd.size);
    /* a name the output has already: refused before anything changes
     * (qemu-img meets them last to first) */
    for (uint32_t i = sq->nbitmaps; i-- > 0;)
        for (uint32_t j = 0; j < q->nbitmaps; j++)
            if (!(sq->bitmaps[i].flags & QCOW2_BME_IN_USE) &&
                strcmp(sq->bitmaps[i].name, q->bitmaps[j].name) == 0)
                return FAIL(q, -EEXIST, "Failed to create bitmap %s: Bitmap already "
                            "exists: %s", q->bitmaps[j].name, q->bitmaps[j].name);
    if ((r = refuse(q)) < 0 || (r = model_init(&m, q)) < 0)
        return r;
    for (uint32_t i = 0; i < sq->nbitmaps && r == 0; i++) {
        const struct qcow2_bitmap *b = &sq->bitmaps[i];
        if (b->flags & QCOW2_BME_IN_USE)
            continue;           /* skipped, with a warning (copy_check) */
        struct bd_bitmap_op op = { .act = BD_BITMAP_MERGE, .source = b->name,
                                   .source_bd = src };
        if ((r = op_add(&m, b->name, UINT64_C(1) << b->granularity_bits)) < 0) {
            if (r == -EEXIST) {
                char what[sizeof(dst->diag->what)];
                snprintf(what, sizeof(what), "%s", dst->diag->what);
                diag_clear(dst->diag);
                r = FAIL(q, -EEXIST, "Failed to create bitmap %s: %s", b->name, what);
            }
            break;
        }
        struct bment *e = &m.e[m.n - 1];
        e->flags = b->flags & QCOW2_BME_AUTO;
        r = op_merge(&m, e, &op);
    }
    if (r == 0 && m.n > q->nbitmaps)
        r = commit(&m);
    model_free(&m);
    return r;
}

/* --- convert -n: the enabled bitmaps record what is written --------------- */

struct qcow2_bmtrack {
    uint32_t n;
    uint32_t *idx;              /* index in q->bitmaps */
    uint8_t **data;
};

void qcow2_bitmaps_track_free(struct qcow2_bmtrack *t)
{
    if (!t)
        return;
    for (uint32_t i = 0; i < t->n; i++)
        free(t->data[i]);
    free(t->data);
    free(t->idx);
    free(t);
}

/* The directory as it is, with the in-use flag set on the tracked bitmaps,
 * written over itself (nothing else changes; any mix of old and new flags
 * a crash leaves is safe: nothing has been written yet). */
static int mark_in_use(struct qcow2 *q, const struct qcow2_bmtrack *t)
{
    const struct qcow2_header *h = &q->h;
    uint64_t len = h->bitmap_directory_size;
    uint8_t *dir = malloc(len);
    int r;

    if (!dir)
        return FAIL(q, -ENOMEM, "out of memory");
    r = bfile_pread(q->bd.file, dir, len, h->bitmap_directory_offset);
    for (uint32_t i = 0; i < t->n && r == 0; i++) {
        struct qcow2_bitmap *b = &q->bitmaps[t->idx[i]];
        uint64_t at = b->entry_offset - h->bitmap_directory_offset + 12;
        b->flags |= QCOW2_BME_IN_USE;
        be32_put(dir + at, b->flags);
    }
    if (r == 0 && (r = bfile_pwrite(q->bd.file, dir, len, h->bitmap_directory_offset)) == 0)
        r = bfile_sync(q->bd.file);
    free(dir);
    return r;
}

int qcow2_bitmaps_track_begin(struct qcow2 *q, struct qcow2_bmtrack **out)
{
    struct qcow2_bmtrack *t;
    uint64_t len, total = 0;
    int r = 0;

    *out = NULL;
    if (!q->nbitmaps)
        return 0;
    if (!(t = calloc(1, sizeof(*t))) || !(t->idx = calloc(q->nbitmaps, sizeof(*t->idx))) ||
        !(t->data = calloc(q->nbitmaps, sizeof(*t->data)))) {
        qcow2_bitmaps_track_free(t);
        return FAIL(q, -ENOMEM, "out of memory");
    }
    /* in-use bitmaps are stale already and stay so, disabled ones record nothing */
    for (uint32_t i = 0; i < q->nbitmaps && r == 0; i++) {
        const struct qcow2_bitmap *b = &q->bitmaps[i];
        if ((b->flags & (QCOW2_BME_IN_USE | QCOW2_BME_AUTO)) != QCOW2_BME_AUTO)
            continue;
        total += qcow2_bitmap_bytes(q->h.size, b->granularity_bits);
        if (total > 4 * (uint64_t)QCOW2_BME_MAX_PHYS)
            r = FAIL(q, -EFBIG, "the enabled bitmaps take more than %u bytes together",
                     4 * QCOW2_BME_MAX_PHYS);
        else if ((r = qcow2_bitmap_load(q, b, &t->data[t->n], &len)) == 0)
            t->idx[t->n++] = i;
    }
    if (r == 0 && t->n)
        r = mark_in_use(q, t);
    if (r < 0 || !t->n) {
        qcow2_bitmaps_track_free(t);
        return r;
    }
    *out = t;
    return 0;
}

void qcow2_bitmaps_track_mark(struct qcow2 *q, struct qcow2_bmtrack *t, uint64_t off,
                              uint64_t len)
{
    for (uint32_t i = 0; t && i < t->n; i++)
        qcow2_bitmap_mark(t->data[i], q->h.size,
                          q->bitmaps[t->idx[i]].granularity_bits, off, len);
}

int qcow2_bitmaps_track_end(struct qcow2 *q, struct qcow2_bmtrack *t)
{
    struct bmodel m;
    struct stat st;
    int r;

    if (!t)
        return 0;
    /* the writer grew the file: the commit appends after its end */
    if (fstat(q->bd.file->fd, &st) < 0)
        return diag_errno(q->bd.diag, -errno, q->bd.filename, -1, "fstat");
    q->bd.file->size = q->file_size = (uint64_t)st.st_size;
    if ((r = model_init(&m, q)) < 0)
        return r;
    for (uint32_t i = 0; i < t->n; i++) {
        struct bment *e = &m.e[t->idx[i]];
        e->data = t->data[i];
        t->data[i] = NULL;
        e->flags = (e->flags & ~QCOW2_BME_IN_USE) | QCOW2_BME_AUTO;
    }
    r = commit(&m);
    model_free(&m);
    return r;
}
