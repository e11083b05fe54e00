/* qcow2 L1 and L2 entries: pure decoding with validation. */
#include <errno.h>
#include <inttypes.h>

#include "formats/qcow2/read_int.h"
#include "util/diag.h"

#define BAD(...) diag_fail(d, -EINVAL, path, (int64_t)where, __VA_ARGS__)

int qcow2_l1_entry_decode(const struct qcow2_header *h, uint64_t e, uint32_t index,
                          uint64_t where, uint64_t *l2, struct diag *d,
                          const char *path)
{
    *l2 = 0;
    if (e & QCOW2_L1_RESERVED)
        return BAD("L1 entry %" PRIu32 " (0x%016" PRIx64 ") at offset %" PRIu64
                   " has reserved bits set", index, e, where);
    uint64_t off = e & QCOW2_L1_OFFSET_MASK;
    if (off & (h->cluster_size - 1))
        return BAD("L1 entry %" PRIu32 " (0x%016" PRIx64 ") at offset %" PRIu64
                   ": L2 table offset 0x%" PRIx64 " is not aligned to the cluster size",
                   index, e, where, off);
    *l2 = off;
    return 0;
}

static int decode_compressed(const struct qcow2_header *h, bool data_file, uint64_t e,
                             uint64_t bitmap, uint64_t where, struct qcow2_l2e *out,
                             struct diag *d, const char *path)
{
    unsigned x = 62 - (h->cluster_bits - 8);     /* width of the offset field */
    uint64_t host = e & ((1ULL << x) - 1);
    uint64_t nsec = ((e >> x) & ((1ULL << (h->cluster_bits - 8)) - 1)) + 1;

    if (data_file)
        return BAD("L2 entry 0x%016" PRIx64 " at offset %" PRIu64 " is compressed, "
                   "which images with an external data file cannot have", e, where);
    if (e & QCOW2_L2_COPIED)
        return BAD("compressed L2 entry 0x%016" PRIx64 " at offset %" PRIu64
                   " has the copied flag set", e, where);
    if (host >> 56)
        return BAD("compressed L2 entry 0x%016" PRIx64 " at offset %" PRIu64
                   " has a host offset beyond 2^56", e, where);
    if (h->extended_l2 && bitmap)
        return BAD("compressed L2 entry 0x%016" PRIx64 " at offset %" PRIu64
                   " has a non-zero subcluster bitmap 0x%016" PRIx64, e, where, bitmap);
    if (host < h->cluster_size)
        return BAD("compressed L2 entry 0x%016" PRIx64 " at offset %" PRIu64
                   " points into the header cluster (host offset %" PRIu64 ")",
                   e, where, host);
    out->kind = QK_COMPRESSED;
    out->host = host;
    out->has_host = true;
    /* whole sectors from the one holding `host`: at most two clusters' worth
     * of bytes, over up to three host clusters (qcow2_compressed_span) */
    out->csize = (uint32_t)(nsec * QCOW2_COMPRESSED_SECTOR - (host % QCOW2_COMPRESSED_SECTOR));
    return 0;
}

int qcow2_l2_entry_decode(const struct qcow2_header *h, bool data_file, uint64_t e,
                          uint64_t bitmap, uint64_t guest, uint64_t where,
                          struct qcow2_l2e *out, struct diag *d, const char *path)
{
    out->kind = QK_UNALLOC;
    out->host = 0;
    out->has_host = false;
    out->csize = 0;
    out->extended = false;
    out->alloc = out->zero = 0;

    if (e & QCOW2_L2_COMPRESSED)
        return decode_compressed(h, data_file, e, bitmap, where, out, d, path);

    uint64_t reserved = QCOW2_L2_STD_RESERVED;
    /* bit 0 is the zero flag only in version 3 without extended entries */
    if (h->version < 3 || h->extended_l2)
        reserved |= QCOW2_L2_ZERO;
    if (e & reserved)
        return BAD("L2 entry 0x%016" PRIx64 " at offset %" PRIu64
                   " has reserved bits set (0x%016" PRIx64 ")", e, where, e & reserved);
    uint64_t host = e & QCOW2_L2_OFFSET_MASK;
    if (host & (h->cluster_size - 1))
        return BAD("L2 entry 0x%016" PRIx64 " at offset %" PRIu64 ": host offset 0x%"
                   PRIx64 " is not aligned to the cluster size", e, where, host);
    /* with a data file, offset 0 with the copied flag is the data file's cluster 0 */
    bool has_host = host != 0 || (data_file && (e & QCOW2_L2_COPIED));
    if (has_host && data_file && host != guest)
        return BAD("L2 entry 0x%016" PRIx64 " at offset %" PRIu64 ": data file offset 0x%"
                   PRIx64 " differs from the guest offset 0x%" PRIx64
                   " (external data files map 1:1)", e, where, host, guest);
    out->host = host;
    out->has_host = has_host;

    if (h->extended_l2) {
        uint32_t alloc = (uint32_t)bitmap, zero = (uint32_t)(bitmap >> 32);
        if (alloc & zero)
            return BAD("extended L2 entry at offset %" PRIu64 ": subcluster bitmap 0x%016"
                       PRIx64 " marks subclusters both allocated and zero", where, bitmap);
        if (alloc && !has_host)
            return BAD("extended L2 entry at offset %" PRIu64 ": subclusters are "
                       "allocated (bitmap 0x%016" PRIx64 ") but there is no host cluster",
                       where, bitmap);
        out->extended = true;
        out->alloc = alloc;
        out->zero = zero;
        out->kind = has_host ? QK_DATA : QK_UNALLOC; /* refined per subcluster */
        return 0;
    }
    if (e & QCOW2_L2_ZERO)
        out->kind = has_host ? QK_ZERO_ALLOC : QK_ZERO;
    else
        out->kind = has_host ? QK_DATA : QK_UNALLOC;
    return 0;
}

enum qcow2_kind qcow2_l2e_subcluster(const struct qcow2_l2e *e, unsigned sc)
{
    if (!e->extended)
        return e->kind;
    if (e->alloc & (1u << sc))
        return QK_DATA;
    if (e->zero & (1u << sc))
        return e->kind == QK_DATA ? QK_ZERO_ALLOC : QK_ZERO;
    return QK_UNALLOC;
}
