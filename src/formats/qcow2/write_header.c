/* qcow2 writer: encoding of cluster 0 (header, extensions, backing name)
 * and of compressed-cluster descriptors.  Pure functions, no I/O. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "formats/qcow2/format.h"
#include "formats/qcow2/write.h"

#define FEATURE_ENTRY 48

/* (type, bit, name) of the feature name table qemu writes into v3 images */
static const struct { uint8_t type, bit; const char *name; } features[] = {
    { 0, 0, "dirty bit" },
    { 0, 1, "corrupt bit" },
    { 0, 2, "external data file" },
    { 0, 3, "compression type" },
    { 0, 4, "extended L2 entries" },
    { 1, 0, "lazy refcounts" },
    { 2, 0, "bitmaps" },
    { 2, 1, "raw external data" },
};
#define N_FEATURES (sizeof(features) / sizeof(features[0]))
_Static_assert(N_FEATURES * FEATURE_ENTRY <= QCOW2W_FEATURE_TABLE_MAX, "feature table");

size_t qcow2w_feature_table(uint8_t *t)
{
    memset(t, 0, N_FEATURES * FEATURE_ENTRY);
    for (size_t i = 0; i < N_FEATURES; i++) {
        t[i * FEATURE_ENTRY] = features[i].type;
        t[i * FEATURE_ENTRY + 1] = features[i].bit;
        memcpy(t + i * FEATURE_ENTRY + 2, features[i].name, strlen(features[i].name));
    }
    return N_FEATURES * FEATURE_ENTRY;
}

static size_t pad8(size_t n)
{
    return (n + 7) & ~(size_t)7;
}

static size_t put_ext(uint8_t *p, uint32_t type, const void *data, size_t len)
{
    be32_put(p, type);
    be32_put(p + 4, (uint32_t)len);
    if (len)
        memcpy(p + 8, data, len);
    return 8 + pad8(len);
}

int qcow2w_header_encode(const struct qcow2w_params *p,
                         const struct qcow2w_layout *l, uint8_t *buf,
                         size_t cluster_size, char *err, size_t errlen)
{
    size_t hdr_len = p->version >= 3 ? QH_V3_LENGTH_WITH_CTYPE : QH_V2_LENGTH;
    size_t fmt_len = p->backing_fmt ? strlen(p->backing_fmt) : 0;
    size_t name_len = p->backing_file ? strlen(p->backing_file) : 0;
    size_t need = hdr_len + (p->backing_fmt ? 8 + pad8(fmt_len) : 0) + 8 + name_len;
    size_t table_len = 8 + N_FEATURES * FEATURE_ENTRY;
    /* qemu adds the feature name table to v3 images from 8 KiB clusters up */
    bool with_table = p->version >= 3 && cluster_size >= 8192 &&
                      need + table_len <= cluster_size;
    size_t pos;

    if (need > cluster_size) {
        snprintf(err, errlen, "header, extensions and backing file name (%zu bytes) do "
                 "not fit in one %zu-byte cluster", need, cluster_size);
        return -EINVAL;
    }
    memset(buf, 0, cluster_size);
    be32_put(buf + QH_MAGIC, QCOW2_MAGIC);
    be32_put(buf + QH_VERSION, (uint32_t)p->version);
    be32_put(buf + QH_CLUSTER_BITS, p->cluster_bits);
    be64_put(buf + QH_SIZE, p->size);
    be32_put(buf + QH_CRYPT_METHOD, QCOW2_CRYPT_NONE);
    be32_put(buf + QH_L1_SIZE, l->l1_entries);
    be64_put(buf + QH_L1_TABLE_OFFSET, l->l1_offset);
    be64_put(buf + QH_REFCOUNT_TABLE_OFFSET, l->reftable_offset);
    be32_put(buf + QH_REFCOUNT_TABLE_CLUSTERS, l->reftable_clusters);
    if (p->version >= 3) {
        uint64_t incompat = 0;
        if (p->compression_type != QCOW2_COMPRESSION_ZLIB)
            incompat |= QCOW2_INCOMPAT_COMPRESSION;
        if (p->extended_l2)
            incompat |= QCOW2_INCOMPAT_EXTL2;
        be64_put(buf + QH_INCOMPATIBLE, incompat);
        be64_put(buf + QH_COMPATIBLE, p->lazy_refcounts ? QCOW2_COMPAT_LAZY_REFCOUNTS : 0);
        be32_put(buf + QH_REFCOUNT_ORDER, p->refcount_order);
        be32_put(buf + QH_HEADER_LENGTH, (uint32_t)hdr_len);
        buf[QH_COMPRESSION_TYPE] = (uint8_t)p->compression_type;
    }
    pos = hdr_len;
    if (p->backing_fmt)
        pos += put_ext(buf + pos, QCOW2_EXT_BACKING_FMT, p->backing_fmt, fmt_len);
    if (with_table) {
        qcow2w_feature_table(buf + pos + 8);
        be32_put(buf + pos, QCOW2_EXT_FEATURE_NAMES);
        be32_put(buf + pos + 4, (uint32_t)(N_FEATURES * FEATURE_ENTRY));
        pos += table_len;
    }
    pos += put_ext(buf + pos, QCOW2_EXT_END, NULL, 0);
    if (p->backing_file) {
        memcpy(buf + pos, p->backing_file, name_len);
        be64_put(buf + QH_BACKING_FILE_OFFSET, pos);
        be32_put(buf + QH_BACKING_FILE_SIZE, (uint32_t)name_len);
    }
    return 0;
}

uint64_t qcow2w_compressed_entry(unsigned cluster_bits, uint64_t off, size_t clen)
{
    unsigned x = 62 - (cluster_bits - 8);
    uint64_t extra;

    if (clen == 0 || off >> x || off >> 56)
        return 0;
    extra = (off + clen - 1) / QCOW2_COMPRESSED_SECTOR - off / QCOW2_COMPRESSED_SECTOR;
    if (extra >> (62 - x))
        return 0;
    return QCOW2_L2_COMPRESSED | extra << x | off;
}
