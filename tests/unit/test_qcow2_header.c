/* qcow2_header_decode: every field validated, extensions parsed, and random
 * corruption of a valid header never crashes or yields an inconsistent
 * result. */
#include <stdint.h>

#include "formats/qcow2/qcow2.h"
#include "qcow2_testutil.h"
#include "util/endian.h"

#define CS 65536

static uint8_t buf[CS];
static struct qcow2_header h;
static struct diag d;

/* A valid v3 header (64 KiB clusters, 1 GiB, zlib) with a feature name
 * table naming incompatible bit 4, and the end marker. */
static size_t make_v3(void)
{
    memset(buf, 0, sizeof(buf));
    be32_put(buf + QH_MAGIC, QCOW2_MAGIC);
    be32_put(buf + QH_VERSION, 3);
    be32_put(buf + QH_CLUSTER_BITS, 16);
    be64_put(buf + QH_SIZE, 1ULL << 30);
    be32_put(buf + QH_L1_SIZE, 2);
    be64_put(buf + QH_L1_TABLE_OFFSET, 3 * CS);
    be64_put(buf + QH_REFCOUNT_TABLE_OFFSET, CS);
    be32_put(buf + QH_REFCOUNT_TABLE_CLUSTERS, 1);
    be32_put(buf + QH_REFCOUNT_ORDER, 4);
    be32_put(buf + QH_HEADER_LENGTH, 112);
    /* feature name table: one entry */
    be32_put(buf + 112, QCOW2_EXT_FEATURE_NAMES);
    be32_put(buf + 116, 48);
    buf[120] = 0;
    buf[121] = 4;
    memcpy(buf + 122, "extended L2 entries", 19);
    /* end marker at 168 (zeros) */
    return sizeof(buf);
}

static int decode(size_t len)
{
    return qcow2_header_decode(buf, len, &h, &d, "t.qcow2");
}

static void test_valid(void)
{
    size_t len = make_v3();
    CHECK_OK(decode(len), &d);
    CHECK(h.version == 3);
    CHECK(h.cluster_size == CS);
    CHECK(h.l2_entries == CS / 8);
    CHECK(h.l1_needed == 2);            /* 1 GiB / 512 MiB per L2 table */
    CHECK(h.refcount_bits == 16);
    CHECK(!h.extended_l2);
    CHECK(h.extensions_end == 176);
    CHECK(strcmp(h.incompat_names[4], "extended L2 entries") == 0);
    CHECK(!h.has_backing_file);
    CHECK(qcow2_header_cluster_size(buf, len) == CS);

    /* version 2: fields after 72 are extensions, not v3 fields */
    make_v3();
    be32_put(buf + QH_VERSION, 2);
    memset(buf + 72, 0, 40);
    CHECK_OK(decode(len), &d);
    CHECK(h.header_length == 72 && h.refcount_bits == 16 && h.incompatible == 0);

    /* 2 MiB clusters, extended L2 entries */
    make_v3();
    be32_put(buf + QH_CLUSTER_BITS, 21);
    be64_put(buf + 72, QCOW2_INCOMPAT_EXTL2);
    be64_put(buf + QH_SIZE, 1ULL << 40);
    be32_put(buf + QH_L1_SIZE, 8);
    be64_put(buf + QH_L1_TABLE_OFFSET, 2u << 21);
    be64_put(buf + QH_REFCOUNT_TABLE_OFFSET, 1u << 21);
    CHECK_OK(decode(len), &d);
    CHECK(h.extended_l2 && h.l2_entry_bytes == 16 && h.subcluster_size == 65536);
    CHECK(h.l1_needed == 4);           /* 2^40 / (2 MiB * 131072 entries) */
}

struct bad_case {
    const char *what;
    unsigned off;
    unsigned width;     /* 1, 4 or 8 bytes */
    uint64_t val;
    const char *msg;
};

static void test_bad_fields(void)
{
    static const struct bad_case cases[] = {
        { "magic", 0, 4, 0x51464900, "bad magic" },
        { "version", 4, 4, 4, "unsupported qcow2 version 4" },
        { "qcow v1", 4, 4, 1, "qcow version 1" },
        { "cluster_bits", 20, 4, 40, "cluster_bits 40 is out of range 9..21" },
        { "cluster_bits low", 20, 4, 8, "cluster_bits 8 is out of range" },
        { "header_length", 100, 4, 103, "header_length 103 is invalid" },
        { "header_length big", 100, 4, CS + 8, "larger than the cluster size" },
        { "refcount_order", 96, 4, 7, "refcount_order 7 is out of range 0..6" },
        { "crypt AES", 32, 4, 1, "encrypted images are not supported (crypt_method 1, AES)" },
        { "crypt LUKS", 32, 4, 2, "encrypted images are not supported (crypt_method 2, LUKS)" },
        { "crypt unknown", 32, 4, 7, "unknown crypt_method 7" },
        { "l1_size huge", 36, 4, 0x80000000u, "entries (max 4194304)" },
        { "l1_size small", 36, 4, 1, "L1 table has 1 entries, but the virtual size" },
        { "l1 offset", 40, 8, 3 * CS + 512, "L1 table offset 0x30200 is not aligned" },
        { "l1 offset 0", 40, 8, 0, "L1 table offset is 0" },
        { "l1 offset huge", 40, 8, 0xffffffffffff0000ULL, "L1 table offset 0xffffffffffff0000 is out of range" },
        { "size huge", 24, 8, 1ULL << 63, "virtual size 9223372036854775808 is out of range" },
        { "size too big", 24, 8, 1ULL << 60, "is too large for cluster size" },
        { "reftable clusters 0", 56, 4, 0, "no refcount table" },
        { "reftable clusters", 56, 4, 200, "refcount table of 200 clusters is larger than" },
        { "reftable offset", 48, 8, CS + 4096, "refcount table offset 0x11000 is not" },
        { "nb_snapshots", 60, 4, 65537, "65537 snapshots (max 65536)" },
        { "snapshots offset", 60, 4, 1, "snapshot table offset 0x0 is not" },
        { "incompat bit", 79, 1, 0x20, "unsupported incompatible feature bit 5" },
        { "incompat named", 79, 1, 0x10 | 0x40, "" /* extended L2 is known: needs 16K */ },
        { "incompat two", 72, 1, 0x80, "unsupported incompatible feature bit 63" },
        { "compression bit", 79, 1, 0x08, "compression type bit is set but" },
        { "compression field", 104, 1, 1, "compression_type 1 needs the compression type" },
        { "data file", 79, 1, 0x04, "does not name it" },
        { "data raw", 95, 1, 0x02, "raw external data bit is set without" },
        { "backing size", 16, 4, 1024, "" /* offset 0: no backing file, size ignored */ },
        { "ext length", 116, 4, 100000, "has length 100000, past the end of the extension area" },
        { "feature table len", 116, 4, 47, "feature name table length 47 is not a multiple of 48" },
        { "feature type", 120, 1, 3, "feature name table entry has unknown type 3" },
        { "feature bit", 121, 1, 64, "bit number 64 (max 63)" },
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const struct bad_case *c = &cases[i];
        size_t len = make_v3();
        if (c->width == 1)
            buf[c->off] = (uint8_t)c->val;
        else if (c->width == 4)
            be32_put(buf + c->off, (uint32_t)c->val);
        else
            be64_put(buf + c->off, c->val);
        int r = decode(len);
        if (!c->msg[0]) {
            /* these are not errors by themselves (see the comment) */
            if (strcmp(c->what, "incompat named") == 0)
                CHECK_FAIL(r, &d, "bit 6");
            else
                CHECK_OK(r, &d);
            continue;
        }
        if (r >= 0 || !strstr(d.what, c->msg)) {
            fprintf(stderr, "case %s: got r=%d \"%s\"\n", c->what, r, d.what);
            t_failures++;
        }
        diag_clear(&d);
    }
    /* two unknown bits, one named by the table */
    size_t len = make_v3();
    buf[121] = 5;
    memcpy(buf + 122, "future thing\0\0\0\0\0\0\0", 19);
    be64_put(buf + 72, (1ULL << 5) | (1ULL << 40));
    CHECK_FAIL(decode(len), &d, "unsupported incompatible feature bits 5 (future thing), 40");
    /* extended L2 needs 16 KiB clusters */
    make_v3();
    be32_put(buf + QH_CLUSTER_BITS, 13);
    be64_put(buf + QH_L1_TABLE_OFFSET, 3 * 8192);
    be64_put(buf + QH_REFCOUNT_TABLE_OFFSET, 8192);
    be64_put(buf + QH_SIZE, 1 << 20);
    be64_put(buf + 72, QCOW2_INCOMPAT_EXTL2);
    CHECK_FAIL(decode(len), &d, "extended L2 entries need clusters of at least 16384");
    /* short buffers */
    make_v3();
    CHECK_FAIL(decode(50), &d, "too short for a qcow2 header (50 bytes");
    CHECK_FAIL(decode(80), &d, "too short for a version 3 header");
    CHECK_FAIL(decode(150), &d, "runs past the end of the file");
    CHECK(qcow2_header_cluster_size(buf, 50) == 0);
}

static void put_ext(unsigned *off, uint32_t type, const void *data, uint32_t n)
{
    be32_put(buf + *off, type);
    be32_put(buf + *off + 4, n);
    memcpy(buf + *off + 8, data, n);
    *off += 8 + ((n + 7) & ~7u);
}

static void test_extensions(void)
{
    size_t len = make_v3();
    unsigned off = 168;
    uint8_t bm[24] = { 0 };

    put_ext(&off, 0x12345678, "unknown!", 8);
    put_ext(&off, QCOW2_EXT_BACKING_FMT, "qcow2", 5);
    put_ext(&off, QCOW2_EXT_DATA_FILE, "disk.data", 9);
    be32_put(bm, 2);
    be64_put(bm + 8, 64);
    be64_put(bm + 16, 5 * CS);
    put_ext(&off, QCOW2_EXT_BITMAPS, bm, 24);
    memset(buf + off, 0, 8);
    /* backing file name after the extensions */
    be64_put(buf + QH_BACKING_FILE_OFFSET, off + 8);
    be32_put(buf + QH_BACKING_FILE_SIZE, 8);
    memcpy(buf + off + 8, "base.img", 8);
    be64_put(buf + 88, QCOW2_AUTOCLEAR_BITMAPS);
    CHECK_OK(decode(len), &d);
    CHECK(h.unknown_extensions == 1);
    CHECK(h.has_backing_fmt && strcmp(h.backing_fmt, "qcow2") == 0);
    CHECK(h.has_data_file_name && strcmp(h.data_file, "disk.data") == 0);
    CHECK(h.has_bitmaps_ext && h.nb_bitmaps == 2 && h.bitmap_directory_offset == 5 * CS);
    CHECK(h.has_backing_file && strcmp(h.backing_file, "base.img") == 0);
    CHECK(h.extensions_end == off + 8);

    /* without the autoclear bit the bitmaps extension is ignored */
    be64_put(buf + 88, 0);
    CHECK_OK(decode(len), &d);
    CHECK(!h.has_bitmaps_ext);

    /* a backing file name with a NUL, too long, past the cluster */
    be64_put(buf + 88, QCOW2_AUTOCLEAR_BITMAPS);
    buf[off + 10] = 0;
    CHECK_FAIL(decode(len), &d, "backing file name contains a NUL byte");
    be32_put(buf + QH_BACKING_FILE_SIZE, 1024);
    CHECK_FAIL(decode(len), &d, "backing file name of 1024 bytes is too long (max 1023)");
    be64_put(buf + QH_BACKING_FILE_OFFSET, CS - 4);
    be32_put(buf + QH_BACKING_FILE_SIZE, 8);
    CHECK_FAIL(decode(len), &d, "runs past the header cluster");
    be64_put(buf + QH_BACKING_FILE_OFFSET, 64);
    CHECK_FAIL(decode(len), &d, "is outside the header cluster");

    /* bad bitmaps extension fields */
    struct { unsigned at; uint64_t v; unsigned w; const char *msg; } bms[] = {
        { 0, 0, 4, "has 0 bitmaps" },
        { 4, 1, 4, "reserved field 0x1 set" },
        { 8, 0, 8, "bitmap directory size 0 is out of range" },
        { 16, 5 * CS + 8, 8, "is not a non-zero multiple of the cluster size" },
    };
    for (size_t i = 0; i < sizeof(bms) / sizeof(bms[0]); i++) {
        make_v3();
        off = 168;
        be64_put(buf + 88, QCOW2_AUTOCLEAR_BITMAPS);
        memset(bm, 0, sizeof(bm));
        be32_put(bm, 2);
        be64_put(bm + 8, 64);
        be64_put(bm + 16, 5 * CS);
        if (bms[i].w == 4)
            be32_put(bm + bms[i].at, (uint32_t)bms[i].v);
        else
            be64_put(bm + bms[i].at, bms[i].v);
        put_ext(&off, QCOW2_EXT_BITMAPS, bm, 24);
        CHECK_FAIL(decode(len), &d, bms[i].msg);
    }

    /* duplicates, bad lengths, a crypto extension without encryption */
    make_v3();
    off = 168;
    put_ext(&off, QCOW2_EXT_BACKING_FMT, "raw", 3);
    put_ext(&off, QCOW2_EXT_BACKING_FMT, "raw", 3);
    CHECK_FAIL(decode(len), &d, "header extension 0xe2792aca appears twice");
    make_v3();
    off = 168;
    put_ext(&off, QCOW2_EXT_BACKING_FMT, "a-very-long-format", 18);
    CHECK_FAIL(decode(len), &d, "backing format name of 18 bytes is too long (max 15)");
    make_v3();
    off = 168;
    put_ext(&off, QCOW2_EXT_DATA_FILE, "", 0);
    CHECK_FAIL(decode(len), &d, "external data file name is empty");
    make_v3();
    off = 168;
    put_ext(&off, QCOW2_EXT_CRYPTO, "0123456789abcdef", 16);
    CHECK_FAIL(decode(len), &d, "encryption header extension in an image that is not");
    make_v3();
    off = 168;
    put_ext(&off, QCOW2_EXT_CRYPTO, "0123456789", 10);
    CHECK_FAIL(decode(len), &d, "encryption header extension has length 10, expected 16");
    make_v3();
    off = 168;
    put_ext(&off, QCOW2_EXT_BITMAPS, "0123456789", 10);
    CHECK_FAIL(decode(len), &d, "bitmaps header extension has length 10, expected 24");
    /* an extension header cut by the end of the area (backing name at 172) */
    make_v3();
    be64_put(buf + QH_BACKING_FILE_OFFSET, 172);
    be32_put(buf + QH_BACKING_FILE_SIZE, 4);
    memcpy(buf + 172, "base", 4);
    CHECK_FAIL(decode(len), &d, "is cut off by the end of the extension area (172)");
}

/* Random damage to a valid header: decode must never crash, and whatever
 * it accepts must be self-consistent. */
static void test_random(void)
{
    uint64_t seed = 0x9e3779b97f4a7c15ULL;
    unsigned accepted = 0;

    for (int it = 0; it < 20000; it++) {
        size_t len = make_v3();
        int flips = 1 + it % 4;
        for (int k = 0; k < flips; k++) {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            unsigned at = (unsigned)(seed % 200);
            buf[at] = (uint8_t)(seed >> 32);
        }
        if (decode(len) == 0) {
            accepted++;
            CHECK(h.cluster_bits >= 9 && h.cluster_bits <= 21);
            CHECK(h.l1_size >= h.l1_needed && h.l1_size <= QCOW2_MAX_L1_BYTES / 8);
            CHECK(h.header_length <= h.cluster_size);
            CHECK(h.refcount_order <= 6);
            CHECK((h.incompatible & ~QCOW2_INCOMPAT_KNOWN) == 0);
            CHECK(h.crypt_method == 0);
            CHECK(strlen(h.backing_file) <= QCOW2_MAX_BACKING_NAME);
        } else {
            CHECK(d.what[0] != '\0');
        }
        diag_clear(&d);
    }
    CHECK(accepted > 0);
}

int main(void)
{
    diag_init(&d);
    test_valid();
    test_bad_fields();
    test_extensions();
    test_random();
    return t_done("test_qcow2_header");
}
