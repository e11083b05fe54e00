/* qcow2 details for `info`, with qemu-img 7.2's JSON keys and order
 * ("format-specific" data keys in the order qemu prints them). */
#include <errno.h>

#include "formats/qcow2/read_int.h"
#include "util/jval.h"

static struct jval *snapshot_list(const struct qcow2 *q)
{
    struct jval *arr = jv_array();

    for (uint32_t i = 0; i < q->nsnaps; i++) {
        const struct qcow2_snapshot *sn = &q->snaps[i];
        struct jval *o = jv_push(arr, jv_object());
        if (sn->has_icount)
            jv_set(o, "icount", jv_uint(sn->icount));
        jv_set(o, "vm-clock-nsec", jv_uint(sn->vm_clock_nsec % 1000000000ULL));
        jv_set(o, "name", jv_str(sn->name));
        jv_set(o, "date-sec", jv_uint(sn->date_sec));
        jv_set(o, "date-nsec", jv_uint(sn->date_nsec));
        jv_set(o, "vm-clock-sec", jv_uint(sn->vm_clock_nsec / 1000000000ULL));
        jv_set(o, "id", jv_str(sn->id));
        jv_set(o, "vm-state-size", jv_uint(sn->vm_state_size));
    }
    return arr;
}

static struct jval *bitmap_list(const struct qcow2_bitmap *b, uint32_t n)
{
    struct jval *arr = jv_array();

    for (uint32_t i = 0; i < n; i++) {
        struct jval *o = jv_push(arr, jv_object());
        struct jval *flags = jv_set(o, "flags", jv_array());
        if (b[i].flags & QCOW2_BME_IN_USE)
            jv_push(flags, jv_str("in-use"));
        if (b[i].flags & QCOW2_BME_AUTO)
            jv_push(flags, jv_str("auto"));
        jv_set(o, "name", jv_str(b[i].name));
        jv_set(o, "granularity", jv_uint(1ULL << b[i].granularity_bits));
    }
    return arr;
}

int qcow2_info(struct bd *bd, struct jval *obj)
{
    struct qcow2 *q = to_qcow2(bd);
    const struct qcow2_header *h = &q->h;
    const struct qcow2_bitmap *bitmaps = q->bitmaps;
    uint32_t nbitmaps = q->nbitmaps;

    if (q->nsnaps)
        jv_set(obj, "snapshots", snapshot_list(q));
    jv_set(obj, "cluster-size", jv_uint(h->cluster_size));

    struct jval *fs = jv_set(obj, "format-specific", jv_object());
    jv_set(fs, "type", jv_str("qcow2"));
    struct jval *data = jv_set(fs, "data", jv_object());
    const char *ctype = h->compression_type == QCOW2_COMPRESSION_ZSTD ? "zstd" : "zlib";
    if (h->version < 3) {
        jv_set(data, "compat", jv_str("0.10"));
        jv_set(data, "compression-type", jv_str(ctype));
        jv_set(data, "refcount-bits", jv_uint(h->refcount_bits));
    } else {
        jv_set(data, "compat", jv_str("1.1"));
        jv_set(data, "compression-type", jv_str(ctype));
        jv_set(data, "lazy-refcounts",
               jv_bool(h->compatible & QCOW2_COMPAT_LAZY_REFCOUNTS));
        if (nbitmaps)
            jv_set(data, "bitmaps", bitmap_list(bitmaps, nbitmaps));
        jv_set(data, "refcount-bits", jv_uint(h->refcount_bits));
        if (h->has_data_file_name)
            jv_set(data, "data-file", jv_str(h->data_file));
        if (h->incompatible & QCOW2_INCOMPAT_DATA_FILE)
            jv_set(data, "data-file-raw", jv_bool(h->autoclear & QCOW2_AUTOCLEAR_DATA_RAW));
        jv_set(data, "corrupt", jv_bool(h->incompatible & QCOW2_INCOMPAT_CORRUPT));
        jv_set(data, "extended-l2", jv_bool(h->extended_l2));
    }
    jv_set(obj, "dirty-flag", jv_bool(bd->dirty));
    return 0;
}
