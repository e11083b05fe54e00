/* L1/L2 entry decoding: kinds, host offsets, compressed descriptors for
 * every cluster size, extended L2 bitmaps, and every rejected form. */
#include <stdint.h>

#include "formats/qcow2/read_int.h"
#include "qcow2_testutil.h"

static struct diag d;

static struct qcow2_header hdr(unsigned cluster_bits, unsigned version, bool extl2)
{
    struct qcow2_header h;
    memset(&h, 0, sizeof(h));
    h.version = version;
    h.cluster_bits = cluster_bits;
    h.cluster_size = 1u << cluster_bits;
    h.extended_l2 = extl2;
    h.l2_entry_bytes = extl2 ? 16 : 8;
    h.l2_entries = h.cluster_size / h.l2_entry_bytes;
    h.subcluster_size = extl2 ? h.cluster_size / 32 : h.cluster_size;
    return h;
}

static int l2(const struct qcow2_header *h, bool df, uint64_t e, uint64_t bm, uint64_t guest,
              struct qcow2_l2e *out)
{
    return qcow2_l2_entry_decode(h, df, e, bm, guest, 4096, out, &d, "t");
}

static void test_l1(void)
{
    struct qcow2_header h = hdr(16, 3, false);
    uint64_t off;

    CHECK_OK(qcow2_l1_entry_decode(&h, 0, 0, 100, &off, &d, "t"), &d);
    CHECK(off == 0);
    CHECK_OK(qcow2_l1_entry_decode(&h, (1ULL << 63) | 0x50000, 0, 100, &off, &d, "t"), &d);
    CHECK(off == 0x50000);
    CHECK_OK(qcow2_l1_entry_decode(&h, 1ULL << 63, 0, 100, &off, &d, "t"), &d);
    CHECK(off == 0);
    CHECK_FAIL(qcow2_l1_entry_decode(&h, 0x50001, 3, 124, &off, &d, "t"), &d,
               "L1 entry 3 (0x0000000000050001) at offset 124 has reserved bits set");
    CHECK_FAIL(qcow2_l1_entry_decode(&h, 1ULL << 56 | 0x50000, 0, 0, &off, &d, "t"), &d,
               "reserved bits set");
    CHECK_FAIL(qcow2_l1_entry_decode(&h, 0x50200, 0, 0, &off, &d, "t"), &d,
               "L2 table offset 0x50200 is not aligned to the cluster size");
}

static void test_standard(void)
{
    struct qcow2_header h3 = hdr(16, 3, false), h2 = hdr(16, 2, false);
    struct qcow2_l2e e;

    CHECK_OK(l2(&h3, false, 0, 0, 0, &e), &d);
    CHECK(e.kind == QK_UNALLOC);
    CHECK_OK(l2(&h3, false, 1ULL << 63 | 0x70000, 0, 0, &e), &d);
    CHECK(e.kind == QK_DATA && e.host == 0x70000);
    CHECK_OK(l2(&h3, false, 0x70000, 0, 0, &e), &d);   /* copied flag clear: COW */
    CHECK(e.kind == QK_DATA && e.host == 0x70000);
    CHECK_OK(l2(&h3, false, 1, 0, 0, &e), &d);
    CHECK(e.kind == QK_ZERO);
    CHECK_OK(l2(&h3, false, 1ULL << 63 | 0x70000 | 1, 0, 0, &e), &d);
    CHECK(e.kind == QK_ZERO_ALLOC && e.host == 0x70000);
    /* copied flag without an offset: unallocated (as qemu reads it) */
    CHECK_OK(l2(&h3, false, 1ULL << 63, 0, 0, &e), &d);
    CHECK(e.kind == QK_UNALLOC);
    CHECK_FAIL(l2(&h2, false, 1, 0, 0, &e), &d, "has reserved bits set (0x0000000000000001)");
    CHECK_FAIL(l2(&h3, false, 0x70002, 0, 0, &e), &d,
               "L2 entry 0x0000000000070002 at offset 4096 has reserved bits set");
    CHECK_FAIL(l2(&h3, false, 1ULL << 60 | 0x70000, 0, 0, &e), &d, "reserved bits set");
    CHECK_FAIL(l2(&h3, false, 0x70200, 0, 0, &e), &d,
               "host offset 0x70200 is not aligned to the cluster size");
    /* 512-byte clusters: any multiple of 512 is aligned */
    struct qcow2_header h9 = hdr(9, 3, false);
    CHECK_OK(l2(&h9, false, 0x70200, 0, 0, &e), &d);
    CHECK(e.kind == QK_DATA && e.host == 0x70200);
}

static void test_data_file(void)
{
    struct qcow2_header h = hdr(16, 3, false);
    struct qcow2_l2e e;

    CHECK_OK(l2(&h, true, 1ULL << 63, 0, 0, &e), &d);
    CHECK(e.kind == QK_DATA && e.host == 0);
    CHECK_OK(l2(&h, true, 0, 0, 0, &e), &d);
    CHECK(e.kind == QK_UNALLOC);
    CHECK_OK(l2(&h, true, 1ULL << 63 | 0x30000, 0, 0x30000, &e), &d);
    CHECK(e.kind == QK_DATA && e.host == 0x30000);
    CHECK_FAIL(l2(&h, true, 1ULL << 63 | 0x30000, 0, 0x40000, &e), &d,
               "data file offset 0x30000 differs from the guest offset 0x40000");
    CHECK_FAIL(l2(&h, true, 1ULL << 62 | 0x30000, 0, 0, &e), &d,
               "is compressed, which images with an external data file cannot have");
}

static void test_compressed(void)
{
    struct qcow2_l2e e;

    for (unsigned cb = 9; cb <= 21; cb++) {
        struct qcow2_header h = hdr(cb, 3, false);
        unsigned x = 62 - (cb - 8);
        uint64_t maxsec = (1ULL << (cb - 8)) - 1;
        uint64_t host = (1ULL << 40) + 777;             /* any byte offset */
        uint64_t ent = 1ULL << 62 | maxsec << x | host;
        CHECK_OK(l2(&h, false, ent, 0, 0, &e), &d);
        CHECK(e.kind == QK_COMPRESSED && e.host == host);
        /* (maxsec + 1) sectors from the one holding host: at most two clusters */
        CHECK(e.csize == (maxsec + 1) * 512 - 777 % 512);
        CHECK(e.csize <= 2 * h.cluster_size);
        ent = 1ULL << 62 | host;           /* no additional sectors */
        CHECK_OK(l2(&h, false, ent, 0, 0, &e), &d);
        CHECK(e.csize == 512 - 777 % 512);
        if (x > 56) {
            /* offset bits above 55 must be zero */
            CHECK_FAIL(l2(&h, false, 1ULL << 62 | 1ULL << 56 | 0x10000, 0, 0, &e), &d,
                       "has a host offset beyond 2^56");
        }
        CHECK_FAIL(l2(&h, false, 1ULL << 62 | 10, 0, 0, &e), &d,
                   "points into the header cluster");
        CHECK_FAIL(l2(&h, false, 3ULL << 62 | host, 0, 0, &e), &d, "has the copied flag set");
    }
    struct qcow2_header hx = hdr(16, 3, true);
    CHECK_OK(l2(&hx, false, 1ULL << 62 | 0x123456, 0, 0, &e), &d);
    CHECK(e.kind == QK_COMPRESSED && !e.extended);
    CHECK_FAIL(l2(&hx, false, 1ULL << 62 | 0x123456, 1, 0, &e), &d,
               "has a non-zero subcluster bitmap");
}

static void test_extended(void)
{
    struct qcow2_header h = hdr(16, 3, true);
    struct qcow2_l2e e;

    /* subclusters 0-1 allocated, 2 zero, the rest unallocated */
    CHECK_OK(l2(&h, false, 1ULL << 63 | 0x90000, 0x0000000400000003ULL, 0, &e), &d);
    CHECK(e.extended && e.host == 0x90000);
    CHECK(qcow2_l2e_subcluster(&e, 0) == QK_DATA);
    CHECK(qcow2_l2e_subcluster(&e, 1) == QK_DATA);
    CHECK(qcow2_l2e_subcluster(&e, 2) == QK_ZERO_ALLOC);
    CHECK(qcow2_l2e_subcluster(&e, 3) == QK_UNALLOC);
    CHECK(qcow2_l2e_subcluster(&e, 31) == QK_UNALLOC);
    /* no host cluster: zero subclusters are plain zeros */
    CHECK_OK(l2(&h, false, 0, 0xffffffff00000000ULL, 0, &e), &d);
    CHECK(qcow2_l2e_subcluster(&e, 31) == QK_ZERO);
    CHECK_FAIL(l2(&h, false, 1ULL << 63 | 0x90000, 0x0000000100000001ULL, 0, &e), &d,
               "marks subclusters both allocated and zero");
    CHECK_FAIL(l2(&h, false, 0, 0x3, 0, &e), &d, "but there is no host cluster");
    /* bit 0 is reserved with extended entries */
    CHECK_FAIL(l2(&h, false, 1, 0, 0, &e), &d, "reserved bits set");
    /* non-extended entries report the same kind for every "subcluster" */
    struct qcow2_header hs = hdr(16, 3, false);
    CHECK_OK(l2(&hs, false, 1, 0, 0, &e), &d);
    CHECK(qcow2_l2e_subcluster(&e, 5) == QK_ZERO);
}

int main(void)
{
    diag_init(&d);
    test_l1();
    test_standard();
    test_data_file();
    test_compressed();
    test_extended();
    return t_done("test_qcow2_entry");
}
