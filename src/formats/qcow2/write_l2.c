/* qcow2 writer: the L2 table cache.
 *
 * A table's host cluster is fixed when the table is first needed (or at
 * create time with preallocation).  The cache holds a few MiB of tables; a
 * table pushed out is written to its cluster and, if the (mostly ascending)
 * writes come back to it, read again from there.  A table that was never
 * written out starts empty, or with preallocation as the fixed mapping
 * guest cluster i -> data_start + i * cluster_size.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "formats/qcow2/format.h"
#include "formats/qcow2/write_priv.h"
#include "io/bfile.h"
#include "util/diag.h"

#define L2_CACHE_BYTES (8u << 20)
#define L2_CACHE_MIN 4
#define L2_CACHE_MAX 256

static bool on_disk(const struct qcow2w *w, uint64_t idx)
{
    return w->l2_on_disk[idx / 8] >> (idx % 8) & 1;
}

int qcow2w_l2_init(struct qcow2w *w)
{
    unsigned n = L2_CACHE_BYTES / w->cs;

    if (n < L2_CACHE_MIN)
        n = L2_CACHE_MIN;
    if (n > L2_CACHE_MAX)
        n = L2_CACHE_MAX;
    if (n > w->l1_entries)
        n = (unsigned)w->l1_entries;
    w->nslots = n;
    w->slots = calloc(n, sizeof(*w->slots));
    w->l2_on_disk = calloc((w->l1_entries + 7) / 8, 1);
    if (!w->slots || !w->l2_on_disk)
        return diag_fail(w->bd.diag, -ENOMEM, w->bd.filename, -1, "out of memory");
    for (unsigned i = 0; i < n; i++)
        if (!(w->slots[i].buf = malloc(w->cs)))
            return diag_fail(w->bd.diag, -ENOMEM, w->bd.filename, -1, "out of memory");
    return 0;
}

void qcow2w_l2_free(struct qcow2w *w)
{
    if (w->slots)
        for (unsigned i = 0; i < w->nslots; i++)
            free(w->slots[i].buf);
    free(w->slots);
    free(w->l2_on_disk);
    w->slots = NULL;
    w->l2_on_disk = NULL;
}

/* Contents of table idx that was never written out. */
static void l2_fresh(struct qcow2w *w, uint64_t idx, uint8_t *buf)
{
    memset(buf, 0, w->cs);
    if (w->p.prealloc == QCOW2W_PREALLOC_OFF)
        return;
    uint64_t clusters = (w->p.size + w->cs - 1) >> w->cbits;
    uint64_t g0 = idx * w->l2_entries;
    /* with extended L2 entries, as in qemu, a preallocated cluster's
     * subclusters are allocated one by one as they are written (until
     * then they read as zeros, or from the backing file) */
    for (uint64_t j = 0; j < w->l2_entries && g0 + j < clusters; j++) {
        uint8_t *e = buf + j * w->l2_entry_bytes;
        be64_put(e, (w->data_start + ((g0 + j) << w->cbits)) | QCOW2_L2_COPIED);
    }
}

static int l2_write_back(struct qcow2w *w, struct qcow2w_l2slot *s)
{
    int r;

    if (!s->used || !s->dirty)
        return 0;
    if ((r = qcow2w_write_meta(w, s->buf, w->cs, w->l1[s->idx])) < 0)
        return r;
    w->l2_on_disk[s->idx / 8] |= (uint8_t)(1u << (s->idx % 8));
    s->dirty = false;
    return 0;
}

int qcow2w_l2_get(struct qcow2w *w, uint64_t idx, uint8_t **tab)
{
    struct qcow2w_l2slot *s = w->last, *victim = NULL;
    int r;

    if (s && s->used && s->idx == idx) {
        *tab = s->buf;
        return 0;
    }
    for (unsigned i = 0; i < w->nslots; i++) {
        s = &w->slots[i];
        if (s->used && s->idx == idx) {
            s->stamp = ++w->clock;
            w->last = s;
            *tab = s->buf;
            return 0;
        }
        if (!victim || !s->used || (victim->used && s->stamp < victim->stamp))
            victim = s;
    }
    if (!w->l1[idx]) {
        uint64_t c;
        if ((r = qcow2w_alloc(w, 1, &c)) < 0)
            return r;
        w->l1[idx] = c << w->cbits;
    }
    if ((r = l2_write_back(w, victim)) < 0)
        return r;
    victim->used = false;
    if (on_disk(w, idx)) {
        if ((r = bfile_pread(w->bd.file, victim->buf, w->cs, w->l1[idx])) < 0)
            return r;
    } else {
        l2_fresh(w, idx, victim->buf);
    }
    victim->idx = idx;
    victim->used = true;
    victim->dirty = false;
    victim->stamp = ++w->clock;
    w->last = victim;
    *tab = victim->buf;
    return 0;
}

void qcow2w_l2_mark_dirty(struct qcow2w *w, uint8_t *tab)
{
    for (unsigned i = 0; i < w->nslots; i++) {
        if (w->slots[i].buf == tab) {
            w->slots[i].dirty = true;
            return;
        }
    }
}

int qcow2w_l2_flush(struct qcow2w *w)
{
    int r;

    for (unsigned i = 0; i < w->nslots; i++) {
        struct qcow2w_l2slot *s = &w->slots[i];
        if (s->used && !on_disk(w, s->idx))
            s->dirty = true;        /* a table is written at least once */
        if ((r = l2_write_back(w, s)) < 0)
            return r;
    }
    if (w->p.prealloc == QCOW2W_PREALLOC_OFF)
        return 0;
    /* preallocation: every table exists; write those never loaded */
    uint8_t *buf = w->slots[0].buf;
    w->slots[0].used = false;
    w->last = NULL;
    for (uint64_t idx = 0; idx < w->l1_entries; idx++) {
        if (on_disk(w, idx))
            continue;
        l2_fresh(w, idx, buf);
        if ((r = qcow2w_write_meta(w, buf, w->cs, w->l1[idx])) < 0)
            return r;
        w->l2_on_disk[idx / 8] |= (uint8_t)(1u << (idx % 8));
    }
    return 0;
}
