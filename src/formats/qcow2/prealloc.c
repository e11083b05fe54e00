/* Is this qcow2 image metadata-preallocated (preallocation=metadata)?
 *
 * Such images have every data cluster allocated but most of them are file
 * holes.  qemu reports the holes under data clusters as zeros only for
 * images it takes for metadata-preallocated, and it decides with a
 * heuristic: count the clusters of the file that have a non-zero refcount;
 * the image is preallocated when there are clearly more of them than the
 * file has clusters on disk (at least 10/9 of them and at least 2 extra).
 * A qcow2 image written by qemu often has data clusters that are partly
 * holes (qemu zeroes the rest of a new cluster with fallocate), and qemu
 * reports those as plain data: using the same rule keeps `map` and
 * `compare -s` identical to qemu-img's.
 *
 * Every refcount block read is checked to lie inside the file; a table or
 * block outside the file means "not preallocated", as in qemu.  A read
 * that fails (EIO) is an error like any other read of the image.
 */
#include <errno.h>
#include <stdlib.h>

#include "formats/qcow2/format.h"
#include "formats/qcow2/read_int.h"
#include "io/bfile.h"
#include "util/endian.h"

static uint64_t refcount_at(const uint8_t *block, uint64_t i, uint32_t bits)
{
    switch (bits) {
    case 64: return be64_get(block + i * 8);
    case 32: return be32_get(block + i * 4);
    case 16: return be16_get(block + i * 2);
    case 8: return block[i];
    default: {
        uint64_t bit = i * bits;
        return (block[bit / 8] >> (bit % 8)) & ((1u << bits) - 1);
    }
    }
}

/* 1 preallocated, 0 not, or a negative errno (a read failed). */
static int detect(struct qcow2 *q)
{
    const struct qcow2_header *h = &q->h;
    struct bfile *f = q->bd.file;
    uint64_t cs = h->cluster_size;
    uint64_t real_clusters = bfile_allocated(f) / cs;
    uint64_t threshold = real_clusters * 10 / 9;
    uint64_t end_cluster = (q->file_size + cs - 1) / cs;
    uint64_t per_block = cs * 8 / h->refcount_bits;
    uint64_t table_entries = (uint64_t)h->refcount_table_clusters * cs / 8;
    uint64_t count = 0;
    uint8_t *block;
    int r = 0;

    if (threshold < real_clusters + 2)
        threshold = real_clusters + 2;
    if (f->kind != BFILE_REGULAR || !(block = malloc(cs)))
        return 0;
    for (uint64_t ti = 0; ti < table_entries && ti * per_block < end_cluster &&
                          count < threshold; ti++) {
        uint8_t e[8];
        uint64_t where = h->refcount_table_offset + ti * 8;
        if (where + 8 > q->file_size) {
            count = 0;
            break;
        }
        if ((r = bfile_pread(f, e, 8, where)) < 0)
            break;
        uint64_t boff = be64_get(e) & QCOW2_REFT_OFFSET_MASK;
        if (boff == 0)
            continue;
        if (boff % cs || boff + cs > q->file_size) {
            count = 0;
            break;
        }
        if ((r = bfile_pread(f, block, cs, boff)) < 0)
            break;
        uint64_t n = end_cluster - ti * per_block;
        if (n > per_block)
            n = per_block;
        for (uint64_t i = 0; i < n && count < threshold; i++)
            count += refcount_at(block, i, h->refcount_bits) != 0;
    }
    free(block);
    if (r < 0)
        return r;
    return count >= threshold;   /* qemu: cluster_count >= threshold */
}

int qcow2_metadata_prealloc(struct qcow2 *q)
{
    /* decided once; two threads deciding at the same time agree */
    int s = __atomic_load_n(&q->prealloc, __ATOMIC_ACQUIRE);
    if (s == 0) {
        int r = detect(q);
        if (r < 0)
            return r;
        s = r ? 2 : 1;
        __atomic_store_n(&q->prealloc, s, __ATOMIC_RELEASE);
    }
    return s == 2;
}
