/* qcow2 internal snapshots, in place (qemu-img snapshot -c, -a, -d).
 *
 * create: the active L1 table becomes the snapshot's (it stays where it
 * is); every cluster it references gets one reference more; the active
 * image gets a new L1 table and copies of its L2 tables with the copied
 * flags cleared.  delete: the snapshot's references are dropped, its L1
 * table freed, active tables whose clusters are now unshared are copied
 * with their copied flags set.  apply: the active image's references are
 * dropped and the snapshot's L1 table copied as the new active one (the
 * virtual size becomes the snapshot's).  Each writes its new structures
 * past the end of the file and switches with one header write
 * (snapshot_commit.c).  apply takes an ID or a name (the ID first), delete
 * a name (the first snapshot of that name), as qemu-img 7.2.  Refused: images with an external data file, dirty
 * or corrupt images, and images whose metadata check finds corruptions.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "formats/qcow2/snapshot_commit.h"
#include "io/bfile.h"
#include "util/diag.h"
#include "util/endian.h"

#define FAIL(q, err, ...) diag_fail((q)->bd.diag, err, (q)->bd.filename, -1, __VA_ARGS__)

#define EXTRA_SIZE 24   /* vm_state_size_large, disk_size, icount */

static uint64_t div_up(uint64_t a, uint64_t b)
{
    return a / b + (a % b != 0);
}

static size_t entry_len(const struct qcow2_snapshot *sn)
{
    return QS_FIXED_LENGTH + sn->extra_size + strlen(sn->id) + strlen(sn->name);
}

static size_t pad8(size_t n)
{
    return (n + 7) & ~(size_t)7;
}

/* The snapshot table without entry `skip` (-1: none), with room for
 * `more` bytes at its end; the entries kept are copied as stored. */
static int table_without(struct qcow2 *q, int skip, size_t more, uint8_t **out, size_t *len)
{
    size_t n = 0;
    int r;

    for (uint32_t i = 0; i < q->nsnaps; i++)
        if ((int)i != skip)
            n += pad8(entry_len(&q->snaps[i]));
    uint8_t *t = calloc(1, n + more + 1);
    if (!t)
        return FAIL(q, -ENOMEM, "out of memory");
    size_t pos = 0;
    for (uint32_t i = 0; i < q->nsnaps; i++) {
        if ((int)i == skip)
            continue;
        size_t l = entry_len(&q->snaps[i]);
        if ((r = bfile_pread(q->bd.file, t + pos, l, q->snaps[i].entry_offset)) < 0) {
            free(t);
            return r;
        }
        pos += pad8(l);
    }
    *out = t;
    *len = pos;
    return 0;
}

static int refuse(struct qcow2 *q, const char *doing)
{
    int r;

    if (!q->bd.file->writable || q->bd.file->kind == BFILE_STREAM)
        return FAIL(q, -EROFS, "the image is not open for writing");
    if (q->snapshot >= 0)
        return FAIL(q, -EINVAL, "a snapshot is open, not the image");
    if (q->h.incompatible & QCOW2_INCOMPAT_DATA_FILE)
        return FAIL(q, -ENOTSUP, "internal snapshots of images with an external data file "
                    "are not supported");
    if ((r = qcow2_refuse_unclean(q)) < 0)
        return r;
    if (q->nsnaps != q->h.nb_snapshots)
        return FAIL(q, -EINVAL, "the snapshot table could not be read");
    return qcow2_check_sound(q, doing);
}

static int create(struct qcow2 *q, const char *name)
{
    const struct qcow2_header *h = &q->h;
    struct qcow2_snapw w;
    uint8_t *tab = NULL;
    size_t len;
    int r;

    if (strlen(name) > UINT16_MAX)
        return FAIL(q, -EINVAL, "the snapshot name is too long");
    if (q->nsnaps >= QCOW2_MAX_SNAPSHOTS)
        return FAIL(q, -EFBIG, "the image has the most snapshots qcow2 allows (%d)",
                    QCOW2_MAX_SNAPSHOTS);
    if ((r = refuse(q, "creating a snapshot")) < 0)
        return r;
    /* a new ID: one more than the largest numeric one (as qemu) */
    unsigned long long max = 0;
    for (uint32_t i = 0; i < q->nsnaps; i++) {
        unsigned long long v = strtoull(q->snaps[i].id, NULL, 10);
        max = v > max ? v : max;
    }
    char id[32];
    snprintf(id, sizeof(id), "%llu", max + 1);
    if ((r = qcow2_snapw_init(&w, q)) < 0)
        goto out;
    if ((r = qcow2_snapw_read_l1(&w, h->l1_table_offset, h->l1_size, &w.l1)) < 0)
        goto out;
    w.l1_size = h->l1_size;
    if ((r = qcow2_snapw_walk(&w, w.l1, w.l1_size, +1)) < 0)
        goto out;
    size_t idl = strlen(id), nl = strlen(name);
    size_t el = QS_FIXED_LENGTH + EXTRA_SIZE + idl + nl;
    if ((r = table_without(q, -1, pad8(el), &tab, &len)) < 0)
        goto out;
    if (len + el > QCOW2_MAX_SNAPSHOT_TABLE) {
        r = FAIL(q, -EFBIG, "the snapshot table would be larger than %u bytes",
                 QCOW2_MAX_SNAPSHOT_TABLE);
        goto out;
    }
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    uint8_t *e = tab + len;
    be64_put(e + QS_L1_TABLE_OFFSET, h->l1_size ? h->l1_table_offset : 0);
    be32_put(e + QS_L1_SIZE, h->l1_size);
    be16_put(e + QS_ID_STR_SIZE, (uint16_t)idl);
    be16_put(e + QS_NAME_SIZE, (uint16_t)nl);
    be32_put(e + QS_DATE_SEC, (uint32_t)now.tv_sec);
    be32_put(e + QS_DATE_NSEC, (uint32_t)now.tv_nsec);
    be32_put(e + QS_EXTRA_DATA_SIZE, EXTRA_SIZE);
    be64_put(e + QS_FIXED_LENGTH + 8, h->size);     /* disk size; vm state 0, icount 0 */
    memcpy(e + QS_FIXED_LENGTH + EXTRA_SIZE, id, idl);
    memcpy(e + QS_FIXED_LENGTH + EXTRA_SIZE + idl, name, nl);
    len += el;
    /* the old active L1 table is the snapshot's now: not freed */
    r = qcow2_snapw_commit(&w, false, false, tab, len, q->nsnaps + 1);
out:
    free(tab);
    qcow2_snapw_free(&w);
    return r;
}

/* delete: by name only, the first one (as qemu-img 7.2) */
static int find_name(struct qcow2 *q, const char *name)
{
    for (uint32_t i = 0; i < q->nsnaps; i++)
        if (strcmp(q->snaps[i].name, name) == 0)
            return (int)i;
    return FAIL(q, -ENOENT, "snapshot '%s' not found", name);
}

static int delete(struct qcow2 *q, const char *spec)
{
    const struct qcow2_header *h = &q->h;
    struct qcow2_snapw w;
    uint64_t *sl1 = NULL;
    uint8_t *tab = NULL;
    size_t len;
    int i, r;

    if ((i = find_name(q, spec)) < 0)
        return i;
    if ((r = refuse(q, "deleting a snapshot")) < 0)
        return r;
    const struct qcow2_snapshot *sn = &q->snaps[i];
    if ((r = qcow2_snapw_init(&w, q)) < 0 ||
        (r = qcow2_snapw_read_l1(&w, sn->l1_table_offset, sn->l1_size, &sl1)) < 0 ||
        (r = qcow2_snapw_read_l1(&w, h->l1_table_offset, h->l1_size, &w.l1)) < 0)
        goto out;
    w.l1_size = h->l1_size;
    if ((r = qcow2_snapw_walk(&w, sl1, sn->l1_size, -1)) < 0 ||
        (r = qcow2_snapw_free_range(&w, sn->l1_table_offset, (uint64_t)sn->l1_size * 8)) < 0)
        goto out;
    if ((r = table_without(q, i, 0, &tab, &len)) < 0)
        goto out;
    r = qcow2_snapw_commit(&w, true, true, tab, len, q->nsnaps - 1);
out:
    free(sl1);
    free(tab);
    qcow2_snapw_free(&w);
    return r;
}

static int apply(struct qcow2 *q, const char *spec)
{
    const struct qcow2_header *h = &q->h;
    struct qcow2_snapw w;
    uint64_t *sl1 = NULL, *al1 = NULL;
    uint8_t *tab = NULL;
    size_t len;
    int i, r;

    if ((i = qcow2_find_snapshot(q, spec)) < 0)
        return FAIL(q, -ENOENT, "snapshot '%s' not found", spec);
    if ((r = refuse(q, "applying a snapshot")) < 0)
        return r;
    const struct qcow2_snapshot *sn = &q->snaps[i];
    uint64_t size = sn->disk_size;
    uint64_t need = div_up(div_up(size, h->cluster_size), h->l2_entries);
    if (size % 512 || need > QCOW2_MAX_L1_BYTES / 8)
        return FAIL(q, -EINVAL, "snapshot '%s' has an invalid disk size %" PRIu64, sn->name,
                    size);
    if ((r = qcow2_snapw_init(&w, q)) < 0 ||
        (r = qcow2_snapw_read_l1(&w, sn->l1_table_offset, sn->l1_size, &sl1)) < 0 ||
        (r = qcow2_snapw_read_l1(&w, h->l1_table_offset, h->l1_size, &al1)) < 0)
        goto out;
    /* lowered first: narrow refcounts may have no room for both */
    if ((r = qcow2_snapw_walk(&w, al1, h->l1_size, -1)) < 0 ||
        (r = qcow2_snapw_walk(&w, sl1, sn->l1_size, +1)) < 0)
        goto out;
    w.l1_size = sn->l1_size > need ? sn->l1_size : (uint32_t)need;
    if (!(w.l1 = calloc(w.l1_size ? w.l1_size : 1, 8))) {
        r = FAIL(q, -ENOMEM, "out of memory");
        goto out;
    }
    for (uint32_t k = 0; k < sn->l1_size; k++)
        w.l1[k] = sl1[k] & ~QCOW2_L1_COPIED;
    w.size = size;
    if ((r = table_without(q, -1, 0, &tab, &len)) < 0)
        goto out;
    r = qcow2_snapw_commit(&w, false, true, tab, len, q->nsnaps);
out:
    free(sl1);
    free(al1);
    free(tab);
    qcow2_snapw_free(&w);
    return r;
}

int qcow2_snapshot_op(struct bd *bd, enum bd_snapshot_op op, const char *name)
{
    struct qcow2 *q = to_qcow2(bd);

    switch (op) {
    case BD_SNAPSHOT_CREATE: return create(q, name);
    case BD_SNAPSHOT_APPLY: return apply(q, name);
    case BD_SNAPSHOT_DELETE: return delete(q, name);
    }
    return FAIL(q, -EINVAL, "unknown snapshot operation");
}
