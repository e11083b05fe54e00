/* qcow2 header and header extensions: pure decoding with full validation.
 *
 * Limits follow qemu's where qemu has one (so that every image qemu opens
 * opens here, and nothing qemu refuses drives an allocation here): cluster
 * sizes 512 B..2 MiB, L1 tables up to 32 MiB, refcount tables up to 8 MiB,
 * 65536 snapshots, backing file names up to 1023 bytes, backing format
 * names up to 15 bytes.
 */
#include "formats/qcow2/qcow2.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "util/diag.h"
#include "util/endian.h"

#define BAD(off, ...) diag_fail(d, -EINVAL, path, (int64_t)(off), __VA_ARGS__)

bool qcow2_has_magic(const uint8_t *buf, size_t len)
{
    return len >= 4 && be32_get(buf) == QCOW2_MAGIC;
}

uint32_t qcow2_header_cluster_size(const uint8_t *buf, size_t len)
{
    if (len < QH_V2_LENGTH || !qcow2_has_magic(buf, len))
        return 0;
    uint32_t bits = be32_get(buf + QH_CLUSTER_BITS);
    if (bits < QCOW2_MIN_CLUSTER_BITS || bits > QCOW2_MAX_CLUSTER_BITS)
        return 0;
    return 1u << bits;
}

/* Copy a length-delimited string that must not contain NUL bytes. */
static int copy_string(char *dst, const uint8_t *src, uint32_t n, const char *what,
                       uint64_t off, struct diag *d, const char *path)
{
    if (memchr(src, '\0', n))
        return BAD(off, "%s contains a NUL byte", what);
    memcpy(dst, src, n);
    dst[n] = '\0';
    return 0;
}

static int decode_feature_names(const uint8_t *p, uint32_t n, uint64_t off,
                                struct qcow2_header *h, struct diag *d, const char *path)
{
    if (n % QCOW2_FEATURE_ENTRY)
        return BAD(off, "feature name table length %" PRIu32 " is not a multiple of %d",
                   n, QCOW2_FEATURE_ENTRY);
    for (uint32_t i = 0; i < n; i += QCOW2_FEATURE_ENTRY) {
        uint8_t type = p[i], bit = p[i + 1];
        if (type > 2)
            return BAD(off + i, "feature name table entry has unknown type %u", type);
        if (bit > 63)
            return BAD(off + i + 1, "feature name table entry has bit number %u (max 63)",
                       bit);
        if (type != 0)
            continue;
        /* the name is zero-padded but need not be terminated */
        size_t l = strnlen((const char *)p + i + 2, QCOW2_FEATURE_NAME_LEN);
        memcpy(h->incompat_names[bit], p + i + 2, l);
        h->incompat_names[bit][l] = '\0';
    }
    return 0;
}

static int decode_bitmaps_ext(const uint8_t *p, uint32_t n, uint64_t off,
                              struct qcow2_header *h, struct diag *d, const char *path)
{
    if (n != 24)
        return BAD(off, "bitmaps header extension has length %" PRIu32 ", expected 24", n);
    /* qemu ignores the extension unless the autoclear bit marks it consistent */
    if (h->version < 3 || !(h->autoclear & QCOW2_AUTOCLEAR_BITMAPS))
        return 0;
    uint32_t nb = be32_get(p), reserved = be32_get(p + 4);
    uint64_t dsize = be64_get(p + 8), doff = be64_get(p + 16);
    if (nb == 0 || nb > QCOW2_MAX_BITMAPS)
        return BAD(off, "bitmaps extension has %" PRIu32 " bitmaps (must be 1..%d)",
                   nb, QCOW2_MAX_BITMAPS);
    if (reserved)
        return BAD(off + 4, "bitmaps extension has reserved field 0x%" PRIx32 " set",
                   reserved);
    if (dsize == 0 || dsize > QCOW2_MAX_BITMAP_DIR)
        return BAD(off + 8, "bitmap directory size %" PRIu64 " is out of range 1..%u",
                   dsize, QCOW2_MAX_BITMAP_DIR);
    if (doff == 0 || doff & (h->cluster_size - 1))
        return BAD(off + 16, "bitmap directory offset 0x%" PRIx64
                   " is not a non-zero multiple of the cluster size", doff);
    if (doff > INT64_MAX - dsize)
        return BAD(off + 16, "bitmap directory offset 0x%" PRIx64 " is out of range", doff);
    h->has_bitmaps_ext = true;
    h->nb_bitmaps = nb;
    h->bitmap_directory_size = dsize;
    h->bitmap_directory_offset = doff;
    return 0;
}

/* Walk the extension area [start, end) of buf (which holds `len` bytes). */
static int decode_extensions(const uint8_t *buf, size_t len, uint32_t start,
                             uint32_t end, struct qcow2_header *h, struct diag *d,
                             const char *path)
{
    uint32_t seen = 0; /* bit per known extension, to refuse duplicates */
    uint64_t off = start;
    int r;

    h->extensions_end = start;
    while (off < end) {
        if (end - off < 8)
            return BAD(off, "header extension at offset %" PRIu64
                       " is cut off by the end of the extension area (%" PRIu32 ")",
                       off, end);
        if (off + 8 > len)
            return BAD(off, "header extension at offset %" PRIu64
                       " runs past the end of the file", off);
        uint32_t type = be32_get(buf + off), n = be32_get(buf + off + 4);
        uint64_t data = off + 8;
        if (type == QCOW2_EXT_END) {
            h->extensions_end = (uint32_t)data;
            return 0;
        }
        if (n > end - data)
            return BAD(off, "header extension 0x%08" PRIx32 " at offset %" PRIu64
                       " has length %" PRIu32 ", past the end of the extension area (%"
                       PRIu32 ")", type, off, n, end);
        if (data + n > len)
            return BAD(off, "header extension 0x%08" PRIx32 " at offset %" PRIu64
                       " runs past the end of the file", type, off);
        const uint8_t *p = buf + data;
        unsigned idx = 0;
        switch (type) {
        case QCOW2_EXT_BACKING_FMT: idx = 1; break;
        case QCOW2_EXT_FEATURE_NAMES: idx = 2; break;
        case QCOW2_EXT_BITMAPS: idx = 3; break;
        case QCOW2_EXT_CRYPTO: idx = 4; break;
        case QCOW2_EXT_DATA_FILE: idx = 5; break;
        default: break;
        }
        if (idx && (seen & (1u << idx)))
            return BAD(off, "header extension 0x%08" PRIx32 " appears twice", type);
        seen |= 1u << idx;
        switch (type) {
        case QCOW2_EXT_BACKING_FMT:
            if (n > QCOW2_MAX_BACKING_FMT)
                return BAD(data, "backing format name of %" PRIu32
                           " bytes is too long (max %d)", n, QCOW2_MAX_BACKING_FMT);
            if (n == 0)
                break;
            r = copy_string(h->backing_fmt, p, n, "backing format name", data, d, path);
            if (r < 0)
                return r;
            h->has_backing_fmt = true;
            break;
        case QCOW2_EXT_FEATURE_NAMES:
            r = decode_feature_names(p, n, data, h, d, path);
            if (r < 0)
                return r;
            break;
        case QCOW2_EXT_BITMAPS:
            r = decode_bitmaps_ext(p, n, data, h, d, path);
            if (r < 0)
                return r;
            break;
        case QCOW2_EXT_CRYPTO:
            if (n != 16)
                return BAD(data, "encryption header extension has length %" PRIu32
                           ", expected 16", n);
            h->has_crypto_ext = true;
            h->crypto_offset = be64_get(p);
            h->crypto_length = be64_get(p + 8);
            break;
        case QCOW2_EXT_DATA_FILE:
            if (n == 0)
                return BAD(data, "external data file name is empty");
            if (n > QCOW2_MAX_DATA_FILE_NAME)
                return BAD(data, "external data file name of %" PRIu32
                           " bytes is too long (max %d)", n, QCOW2_MAX_DATA_FILE_NAME);
            r = copy_string(h->data_file, p, n, "external data file name", data, d, path);
            if (r < 0)
                return r;
            h->has_data_file_name = true;
            break;
        default:
            h->unknown_extensions++;
            break;
        }
        off = data + (((uint64_t)n + 7) & ~7ULL);
    }
    /* no end marker before the end of the area: the area simply ends */
    h->extensions_end = end;
    return 0;
}

static int check_incompatible(const struct qcow2_header *h, struct diag *d,
                              const char *path)
{
    uint64_t unknown = h->incompatible & ~QCOW2_INCOMPAT_KNOWN;
    char list[400];
    size_t n = 0;

    if (!unknown)
        return 0;
    list[0] = '\0';
    for (int bit = 0; bit < 64; bit++) {
        if (!(unknown & (1ULL << bit)))
            continue;
        int w;
        if (h->incompat_names[bit][0])
            w = snprintf(list + n, sizeof(list) - n, "%s%d (%s)", n ? ", " : "", bit,
                         h->incompat_names[bit]);
        else
            w = snprintf(list + n, sizeof(list) - n, "%s%d", n ? ", " : "", bit);
        if (w < 0 || (size_t)w >= sizeof(list) - n)
            break;
        n += (size_t)w;
    }
    return diag_fail(d, -ENOTSUP, path, QH_INCOMPATIBLE,
                     "unsupported incompatible feature bit%s %s",
                     (unknown & (unknown - 1)) ? "s" : "", list);
}

static int check_tables(const struct qcow2_header *h, struct diag *d, const char *path)
{
    uint64_t cmask = h->cluster_size - 1;

    /* L1 table: big enough for the virtual size, within qemu's limit */
    if (h->l1_size > QCOW2_MAX_L1_BYTES / 8)
        return BAD(QH_L1_SIZE, "L1 table has %" PRIu32 " entries (max %u)", h->l1_size,
                   QCOW2_MAX_L1_BYTES / 8);
    if (h->l1_needed > QCOW2_MAX_L1_BYTES / 8)
        return BAD(QH_SIZE, "virtual size %" PRIu64 " is too large for cluster size %"
                   PRIu32 " (it needs %" PRIu64 " L1 entries, max %u)", h->size,
                   h->cluster_size, h->l1_needed, QCOW2_MAX_L1_BYTES / 8);
    if (h->l1_size < h->l1_needed)
        return BAD(QH_L1_SIZE, "L1 table has %" PRIu32 " entries, but the virtual size "
                   "%" PRIu64 " needs %" PRIu64, h->l1_size, h->size, h->l1_needed);
    if (h->l1_table_offset & cmask)
        return BAD(QH_L1_TABLE_OFFSET, "L1 table offset 0x%" PRIx64
                   " is not aligned to the cluster size", h->l1_table_offset);
    if (h->l1_size && h->l1_table_offset == 0)
        return BAD(QH_L1_TABLE_OFFSET, "L1 table offset is 0 (the header cluster)");
    if (h->l1_table_offset > INT64_MAX - (uint64_t)h->l1_size * 8)
        return BAD(QH_L1_TABLE_OFFSET, "L1 table offset 0x%" PRIx64 " is out of range",
                   h->l1_table_offset);

    /* refcount table */
    if (h->refcount_table_clusters == 0)
        return BAD(QH_REFCOUNT_TABLE_CLUSTERS, "image has no refcount table "
                   "(refcount_table_clusters is 0)");
    if (h->refcount_table_clusters > (QCOW2_MAX_REFT_BYTES >> h->cluster_bits))
        return BAD(QH_REFCOUNT_TABLE_CLUSTERS, "refcount table of %" PRIu32
                   " clusters is larger than %u bytes", h->refcount_table_clusters,
                   QCOW2_MAX_REFT_BYTES);
    if (h->refcount_table_offset == 0 || (h->refcount_table_offset & cmask))
        return BAD(QH_REFCOUNT_TABLE_OFFSET, "refcount table offset 0x%" PRIx64
                   " is not a non-zero multiple of the cluster size",
                   h->refcount_table_offset);
    if (h->refcount_table_offset > INT64_MAX - QCOW2_MAX_REFT_BYTES)
        return BAD(QH_REFCOUNT_TABLE_OFFSET, "refcount table offset 0x%" PRIx64
                   " is out of range", h->refcount_table_offset);

    /* snapshot table */
    if (h->nb_snapshots > QCOW2_MAX_SNAPSHOTS)
        return BAD(QH_NB_SNAPSHOTS, "image has %" PRIu32 " snapshots (max %d)",
                   h->nb_snapshots, QCOW2_MAX_SNAPSHOTS);
    if (h->nb_snapshots && (h->snapshots_offset == 0 || (h->snapshots_offset & cmask)))
        return BAD(QH_SNAPSHOTS_OFFSET, "snapshot table offset 0x%" PRIx64
                   " is not a non-zero multiple of the cluster size", h->snapshots_offset);
    if (h->nb_snapshots && h->snapshots_offset > INT64_MAX / 2)
        return BAD(QH_SNAPSHOTS_OFFSET, "snapshot table offset 0x%" PRIx64
                   " is out of range", h->snapshots_offset);
    return 0;
}

int qcow2_header_decode(const uint8_t *buf, size_t len, struct qcow2_header *h,
                        struct diag *d, const char *path)
{
    int r;

    memset(h, 0, sizeof(*h));
    if (len < QH_V2_LENGTH)
        return BAD(len, "file is too short for a qcow2 header (%zu bytes, need %d)",
                   len, QH_V2_LENGTH);
    if (!qcow2_has_magic(buf, len))
        return BAD(0, "not a qcow2 image (bad magic)");
    h->version = be32_get(buf + QH_VERSION);
    h->backing_file_offset = be64_get(buf + QH_BACKING_FILE_OFFSET);
    h->backing_file_size = be32_get(buf + QH_BACKING_FILE_SIZE);
    h->cluster_bits = be32_get(buf + QH_CLUSTER_BITS);
    h->size = be64_get(buf + QH_SIZE);
    h->crypt_method = be32_get(buf + QH_CRYPT_METHOD);
    h->l1_size = be32_get(buf + QH_L1_SIZE);
    h->l1_table_offset = be64_get(buf + QH_L1_TABLE_OFFSET);
    h->refcount_table_offset = be64_get(buf + QH_REFCOUNT_TABLE_OFFSET);
    h->refcount_table_clusters = be32_get(buf + QH_REFCOUNT_TABLE_CLUSTERS);
    h->nb_snapshots = be32_get(buf + QH_NB_SNAPSHOTS);
    h->snapshots_offset = be64_get(buf + QH_SNAPSHOTS_OFFSET);

    if (h->version == 1)
        return diag_fail(d, -ENOTSUP, path, QH_VERSION,
                         "qcow version 1 images are not supported (only qcow2)");
    if (h->version != 2 && h->version != 3)
        return diag_fail(d, -ENOTSUP, path, QH_VERSION,
                         "unsupported qcow2 version %" PRIu32 " (only 2 and 3)", h->version);
    if (h->cluster_bits < QCOW2_MIN_CLUSTER_BITS || h->cluster_bits > QCOW2_MAX_CLUSTER_BITS)
        return BAD(QH_CLUSTER_BITS, "cluster_bits %" PRIu32 " is out of range %d..%d",
                   h->cluster_bits, QCOW2_MIN_CLUSTER_BITS, QCOW2_MAX_CLUSTER_BITS);
    h->cluster_size = 1u << h->cluster_bits;

    if (h->version == 2) {
        h->header_length = QH_V2_LENGTH;
        h->refcount_order = 4;
    } else {
        if (len < QH_V3_MIN_LENGTH)
            return BAD(len, "file is too short for a version 3 header (%zu bytes)", len);
        h->incompatible = be64_get(buf + QH_INCOMPATIBLE);
        h->compatible = be64_get(buf + QH_COMPATIBLE);
        h->autoclear = be64_get(buf + QH_AUTOCLEAR);
        h->refcount_order = be32_get(buf + QH_REFCOUNT_ORDER);
        h->header_length = be32_get(buf + QH_HEADER_LENGTH);
        if (h->header_length < QH_V3_MIN_LENGTH || h->header_length % 8)
            return BAD(QH_HEADER_LENGTH, "header_length %" PRIu32
                       " is invalid (a multiple of 8, at least %d)", h->header_length,
                       QH_V3_MIN_LENGTH);
        if (h->header_length > h->cluster_size)
            return BAD(QH_HEADER_LENGTH, "header_length %" PRIu32
                       " is larger than the cluster size %" PRIu32, h->header_length,
                       h->cluster_size);
        if (h->header_length > len)
            return BAD(QH_HEADER_LENGTH, "header_length %" PRIu32
                       " runs past the end of the file (%zu bytes)", h->header_length, len);
        if (h->header_length > QH_COMPRESSION_TYPE)
            h->compression_type = buf[QH_COMPRESSION_TYPE];
        if (h->refcount_order > 6)
            return BAD(QH_REFCOUNT_ORDER, "refcount_order %" PRIu32
                       " is out of range 0..6", h->refcount_order);
    }
    h->refcount_bits = 1u << h->refcount_order;
    h->extended_l2 = (h->incompatible & QCOW2_INCOMPAT_EXTL2) != 0;
    h->l2_entry_bytes = h->extended_l2 ? 16 : 8;
    h->l2_entries = h->cluster_size / h->l2_entry_bytes;
    h->subcluster_size = h->extended_l2 ? h->cluster_size / QCOW2_SUBCLUSTERS
                                        : h->cluster_size;

    /* the backing file name ends the extension area */
    uint32_t ext_end = h->cluster_size;
    if (h->backing_file_offset) {
        if (h->backing_file_offset < h->header_length ||
            h->backing_file_offset >= h->cluster_size)
            return BAD(QH_BACKING_FILE_OFFSET, "backing file name offset %" PRIu64
                       " is outside the header cluster (after the %" PRIu32
                       "-byte header, before %" PRIu32 ")", h->backing_file_offset,
                       h->header_length, h->cluster_size);
        if (h->backing_file_size > QCOW2_MAX_BACKING_NAME)
            return BAD(QH_BACKING_FILE_SIZE, "backing file name of %" PRIu32
                       " bytes is too long (max %d)", h->backing_file_size,
                       QCOW2_MAX_BACKING_NAME);
        if (h->backing_file_offset + h->backing_file_size > h->cluster_size)
            return BAD(QH_BACKING_FILE_SIZE, "backing file name (%" PRIu32
                       " bytes at offset %" PRIu64 ") runs past the header cluster",
                       h->backing_file_size, h->backing_file_offset);
        if (h->backing_file_offset + h->backing_file_size > len)
            return BAD(h->backing_file_offset, "backing file name runs past the end "
                       "of the file");
        if (h->backing_file_size) {
            r = copy_string(h->backing_file, buf + h->backing_file_offset,
                            h->backing_file_size, "backing file name",
                            h->backing_file_offset, d, path);
            if (r < 0)
                return r;
            h->has_backing_file = true;
        }
        ext_end = (uint32_t)h->backing_file_offset;
    }
    r = decode_extensions(buf, len, h->header_length, ext_end, h, d, path);
    if (r < 0)
        return r;

    /* features: unknown incompatible bits first (named from the table) */
    r = check_incompatible(h, d, path);
    if (r < 0)
        return r;
    if (h->crypt_method == QCOW2_CRYPT_AES || h->crypt_method == QCOW2_CRYPT_LUKS)
        return diag_fail(d, -ENOTSUP, path, QH_CRYPT_METHOD,
                         "encrypted images are not supported (crypt_method %" PRIu32
                         ", %s)", h->crypt_method,
                         h->crypt_method == QCOW2_CRYPT_AES ? "AES" : "LUKS");
    if (h->crypt_method != QCOW2_CRYPT_NONE)
        return BAD(QH_CRYPT_METHOD, "unknown crypt_method %" PRIu32, h->crypt_method);
    if (h->has_crypto_ext)
        return BAD(h->header_length, "encryption header extension in an image that is "
                   "not LUKS-encrypted");
    if (h->incompatible & QCOW2_INCOMPAT_COMPRESSION) {
        if (h->header_length <= QH_COMPRESSION_TYPE || h->compression_type == 0)
            return BAD(QH_COMPRESSION_TYPE, "compression type bit is set but the "
                       "compression_type field is absent or zlib");
    } else if (h->compression_type != QCOW2_COMPRESSION_ZLIB) {
        return BAD(QH_COMPRESSION_TYPE, "compression_type %u needs the compression type "
                   "incompatible bit, which is not set", h->compression_type);
    }
    if (h->compression_type > QCOW2_COMPRESSION_ZSTD)
        return diag_fail(d, -ENOTSUP, path, QH_COMPRESSION_TYPE,
                         "unknown compression_type %u (0 zlib and 1 zstd are known)",
                         h->compression_type);
    if (h->extended_l2 && h->cluster_bits < QCOW2_EXTL2_MIN_CLUSTER_BITS)
        return BAD(QH_CLUSTER_BITS, "extended L2 entries need clusters of at least %d "
                   "bytes, cluster_bits is %" PRIu32, 1 << QCOW2_EXTL2_MIN_CLUSTER_BITS,
                   h->cluster_bits);
    if ((h->incompatible & QCOW2_INCOMPAT_DATA_FILE) && !h->has_data_file_name)
        return BAD(QH_INCOMPATIBLE, "image uses an external data file but does not name "
                   "it (no data file header extension)");
    if ((h->autoclear & QCOW2_AUTOCLEAR_DATA_RAW) &&
        !(h->incompatible & QCOW2_INCOMPAT_DATA_FILE))
        return BAD(QH_AUTOCLEAR, "raw external data bit is set without an external "
                   "data file");

    /* virtual size and tables */
    if (h->size > INT64_MAX)
        return BAD(QH_SIZE, "virtual size %" PRIu64 " is out of range", h->size);
    uint64_t per_l1 = (uint64_t)h->cluster_size * h->l2_entries;
    h->l1_needed = h->size / per_l1 + (h->size % per_l1 != 0);
    return check_tables(h, d, path);
}
