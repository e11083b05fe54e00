/* qcow2 measure: the size a new qcow2 image would take, with qemu-img
 * 7.2's arithmetic (so that the numbers are equal, byte for byte).
 *
 * fully-allocated: header cluster + every L2 table + the L1 table (both
 * rounded up to whole clusters) + the refcount table and blocks that
 * cover all of it + every data cluster.
 * required: the same metadata + the data clusters the content needs: every
 * cluster of the source that holds some data by block status (zero and
 * unallocated ranges need none), or every cluster with a backing file
 * (the new image's backing file may share nothing) or with
 * preallocation=falloc|full.
 * bitmaps: the persistent bitmaps of a qcow2 v3 source, each counted as if
 * fully allocated, with its table and its directory entry.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "formats/qcow2/measure.h"
#include "formats/qcow2/read_int.h"
#include "formats/qcow2/write.h"
#include "util/diag.h"
#include "util/kvopts.h"

static uint64_t div_up(uint64_t a, uint64_t b)
{
    return a / b + (a % b != 0);
}

static uint64_t round_up(uint64_t a, uint64_t b)
{
    return div_up(a, b) * b;
}

uint64_t qcow2_refcount_meta_clusters(uint64_t clusters, unsigned cluster_bits,
                                      unsigned refcount_order)
{
    uint64_t cs = UINT64_C(1) << cluster_bits;
    uint64_t per_table_cluster = cs / 8;
    uint64_t per_block = (cs * 8) >> refcount_order;
    uint64_t table = 0, blocks = 0, n = 0, last;

    /* blocks must also count themselves and the table: grow to a fixed point */
    do {
        last = n;
        blocks = div_up(clusters + table + blocks, per_block);
        table = div_up(blocks, per_table_cluster);
        n = clusters + blocks + table;
    } while (n != last);
    return blocks + table;
}

uint64_t qcow2_fully_allocated_size(uint64_t virtual_size, unsigned cluster_bits,
                                    unsigned refcount_order, bool extended_l2)
{
    uint64_t cs = UINT64_C(1) << cluster_bits;
    uint64_t l2e = extended_l2 ? 16 : 8;
    uint64_t data = round_up(virtual_size, cs);
    uint64_t meta = cs;                                     /* header */
    uint64_t nl2e = round_up(data / cs, cs / l2e);          /* whole L2 tables */
    meta += nl2e * l2e;
    uint64_t nl1e = round_up(nl2e * l2e / cs, cs / 8);      /* whole L1 clusters */
    meta += nl1e * 8;
    meta += qcow2_refcount_meta_clusters((meta + data) / cs, cluster_bits,
                                         refcount_order) * cs;
    return meta + data;
}

/* What the persistent bitmaps of a qcow2 v3 source would need.  Every sum
 * is checked: the directory's bounds (granularity 9..31, at most 65535
 * bitmaps) keep it far from 2^64, but a sum that wrapped would print a
 * plausible wrong size. */
static int bitmaps_size(struct bd *src, uint64_t cs, uint64_t *bytes, struct diag *d)
{
    const struct qcow2 *q = to_qcow2(src);
    uint64_t dir = 0, total = 0;

    *bytes = 0;
    for (uint32_t i = 0; i < q->nbitmaps; i++) {
        const struct qcow2_bitmap *b = &q->bitmaps[i];
        uint64_t bits = div_up(src->size, UINT64_C(1) << b->granularity_bits);
        uint64_t clusters = div_up(div_up(bits, 8), cs), data, table;
        if (__builtin_mul_overflow(clusters, cs, &data) ||
            __builtin_mul_overflow(clusters, 8, &table) ||
            (table = round_up(table, cs)) == 0 ||
            __builtin_add_overflow(total, data, &total) ||
            __builtin_add_overflow(total, table, &total))
            return diag_fail(d, -EOVERFLOW, src->filename, -1, "the persistent bitmaps "
                             "need more than 2^64 bytes (bitmap '%s')", b->name);
        /* directory entry: 24 fixed bytes and the name, padded to 8 */
        dir += round_up(24 + strlen(b->name), 8);
    }
    if (__builtin_add_overflow(total, round_up(dir, cs), &total))
        return diag_fail(d, -EOVERFLOW, src->filename, -1, "the persistent bitmaps need "
                         "more than 2^64 bytes");
    *bytes = total;
    return 0;
}

int qcow2_measure(struct kvopts *o, uint64_t size, struct bd *src,
                  struct bd_measure *m, struct diag *d)
{
    struct bd_create_opts co = { .o = o };
    struct qcow2w_params p;
    char err[256];
    uint64_t vs, required = 0;
    int r;

    memset(m, 0, sizeof(*m));
    if ((r = qcow2w_parse_params(o, &co, &p, err, sizeof(err))) < 0)
        return diag_fail(d, r, NULL, -1, "%s", err);
    uint64_t cs = UINT64_C(1) << p.cluster_bits;
    if (!src) {
        vs = round_up(size, cs);
        uint64_t l2_tables = div_up(vs / cs, cs / (p.extended_l2 ? 16 : 8));
        if (l2_tables > QCOW2_MAX_L1_BYTES / 8)
            return diag_fail(d, -EFBIG, NULL, -1, "The image size is too large "
                             "(try using a larger cluster size)");
    } else {
        vs = round_up(src->size, cs);
        if (p.backing_file)
            required = vs;  /* the backing file may share nothing with src */
        else if ((r = bd_data_units(src, cs, &required)) < 0)
            return r;
        else
            required *= cs;     /* each data cluster counted whole */
    }
    if (p.prealloc == QCOW2W_PREALLOC_FALLOC || p.prealloc == QCOW2W_PREALLOC_FULL)
        required = vs;
    m->fully_allocated = qcow2_fully_allocated_size(vs, p.cluster_bits,
                                                    p.refcount_order, p.extended_l2);
    m->required = m->fully_allocated - vs + required;
    /* bitmaps only when both the source and the new image can hold them */
    if (p.version >= 3 && src && src->drv == &bd_qcow2 && to_qcow2(src)->h.version >= 3) {
        m->has_bitmaps = true;
        if ((r = bitmaps_size(src, cs, &m->bitmaps, d)) < 0)
            return r;
    }
    return 0;
}
