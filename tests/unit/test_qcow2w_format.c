/* qcow2 writer, pure parts and the driver's contract:
 *  - -o option validation with qemu-img's messages;
 *  - cluster 0 as qemu lays it out (fields, extensions, backing name);
 *  - compressed descriptors;
 *  - compressed clusters that qemu can read: raw deflate within a 4 KiB
 *    window, zstd frames;
 *  - nothing at offset 0 before finish (a crash never leaves an image),
 *    abort writes no header;
 *  - a 2 TiB image with writes scattered over 2048 L2 tables (more than the
 *    cache holds, some read back) checks clean and reads back right. */
#include <zlib.h>
#include <zstd.h>

#include "formats/qcow2/format.h"
#include "qcow2w_feed.h"

/* p's strings point into the options of the last call (kept until then) */
static struct kvopts parse_kv;

static int parse(const char *o, bool compress, const char *backing, const char *bfmt,
                 struct qcow2w_params *p, char *err, size_t errlen)
{
    kvopts_free(&parse_kv);
    struct bd_create_opts co = { .size = 1 << 30, .o = &parse_kv, .backing_file = backing,
                                 .backing_fmt = bfmt, .compress = compress };
    char e2[256];
    int r = 0;

    err[0] = '\0';
    if (o && kvopts_parse(&parse_kv, o, e2, sizeof(e2)) < 0)
        r = -EINVAL;
    if (!r)
        r = qcow2w_parse_params(&parse_kv, &co, p, err, errlen);
    return r;
}

static void expect_error(const char *o, bool compress, const char *backing, const char *bfmt,
                         const char *msg)
{
    struct qcow2w_params p;
    char err[256];
    int r = parse(o, compress, backing, bfmt, &p, err, sizeof(err));
    CHECK(r == -EINVAL && strstr(err, msg), "'%s': got %d '%s', want '%s'", o, r, err, msg);
}

static void test_params(void)
{
    struct qcow2w_params p;
    char err[256];

    CHECK(parse(NULL, false, NULL, NULL, &p, err, sizeof(err)) == 0, "%s", err);
    CHECK(p.version == 3 && p.cluster_bits == 16 && p.refcount_order == 4 &&
          !p.lazy_refcounts && !p.extended_l2 && p.compression_type == 0 &&
          p.prealloc == QCOW2W_PREALLOC_OFF, "defaults");
    CHECK(parse("compat=0.10,cluster_size=512", false, NULL, NULL, &p, err, sizeof(err)) == 0
          && p.version == 2 && p.cluster_bits == 9, "%s", err);
    CHECK(parse("compat=v3,cluster_size=2M,refcount_bits=64,lazy_refcounts=on,"
                "extended_l2=on,compression_type=zstd,preallocation=falloc", false, NULL, NULL,
                &p, err, sizeof(err)) == 0 && p.cluster_bits == 21 && p.refcount_order == 6 &&
          p.lazy_refcounts && p.extended_l2 && p.compression_type == 1 &&
          p.prealloc == QCOW2W_PREALLOC_FALLOC, "%s", err);
    CHECK(parse("refcount_bits=1", false, NULL, NULL, &p, err, sizeof(err)) == 0 &&
          p.refcount_order == 0, "%s", err);
    CHECK(parse("backing_file=b.raw,backing_fmt=raw", false, NULL, NULL, &p, err,
                sizeof(err)) == 0 && !strcmp(p.backing_file, "b.raw"), "%s", err);

    expect_error("cluster_size=3000", false, NULL, NULL,
                 "Cluster size must be a power of two between 512 and 2048k");
    expect_error("cluster_size=4M", false, NULL, NULL, "Cluster size must be a power of two");
    expect_error("cluster_size=256", false, NULL, NULL, "Cluster size must be a power of two");
    expect_error("refcount_bits=3", false, NULL, NULL,
                 "Refcount width must be a power of two and may not exceed 64 bits");
    expect_error("refcount_bits=128", false, NULL, NULL, "Refcount width");
    expect_error("refcount_bits=x", false, NULL, NULL, "expects a number");
    expect_error("compat=2", false, NULL, NULL, "Parameter 'compat' does not accept value '2'");
    expect_error("compat=0.10,lazy_refcounts=on", false, NULL, NULL,
                 "Lazy refcounts only supported with compatibility level 1.1");
    expect_error("compat=0.10,refcount_bits=8", false, NULL, NULL,
                 "Different refcount widths than 16 bits require compatibility level 1.1");
    expect_error("compat=0.10,extended_l2=on", false, NULL, NULL,
                 "Extended L2 entries are only supported with compatibility level 1.1");
    expect_error("compat=0.10,compression_type=zstd", false, NULL, NULL,
                 "Non-zlib compression type is only supported with compatibility level 1.1");
    expect_error("extended_l2=on,cluster_size=8K", false, NULL, NULL,
                 "Extended L2 entries are only supported with cluster sizes of at least 16384");
    expect_error("compression_type=lz4", false, NULL, NULL,
                 "Parameter 'compression_type' does not accept value 'lz4'");
    expect_error("preallocation=bogus", false, NULL, NULL,
                 "Parameter 'preallocation' does not accept value 'bogus'");
    expect_error("lazy_refcounts=maybe", false, NULL, NULL, "expects 'on' or 'off'");
    expect_error("backing_fmt=raw", false, NULL, NULL,
                 "Backing format cannot be used without backing file");
    expect_error("preallocation=metadata", false, "b.raw", "raw",
                 "Backing file and preallocation can only be used at the same time if "
                 "extended_l2 is on");
    expect_error("preallocation=full", true, NULL, NULL,
                 "Compression and preallocation not supported at the same time");
    expect_error("encrypt.format=luks", false, NULL, NULL, "encrypted images are not supported");
    expect_error("data_file=x.raw", false, NULL, NULL, "external data file");
    expect_error("backing_file=a.raw", false, "b.raw", "raw", "backing file given twice");

    /* L1 limit: 512-byte clusters cannot address 200 GiB */
    p.size = 200ULL << 30;
    p.cluster_bits = 9;
    p.extended_l2 = false;
    CHECK(qcow2w_l1_entries(&p, err, sizeof(err)) == 0 && strstr(err, "too large"),
          "L1 limit: %s", err);
    p.cluster_bits = 16;
    CHECK(qcow2w_l1_entries(&p, err, sizeof(err)) == 400, "L1 entries for 200 GiB");
}

static void test_header(void)
{
    struct qcow2w_params p;
    struct qcow2w_layout l = { .l1_offset = 0x50000, .l1_entries = 2,
                               .reftable_offset = 0x30000, .reftable_clusters = 1 };
    static uint8_t buf[65536];
    char err[256];

    parse("lazy_refcounts=on,compression_type=zstd,extended_l2=on", false, "base.img",
          "qcow2", &p, err, sizeof(err));
    CHECK(qcow2w_header_encode(&p, &l, buf, 65536, err, sizeof(err)) == 0, "%s", err);
    CHECK(be32_get(buf) == QCOW2_MAGIC && be32_get(buf + QH_VERSION) == 3, "magic/version");
    CHECK(be32_get(buf + QH_CLUSTER_BITS) == 16 && be64_get(buf + QH_SIZE) == 1 << 30,
          "cluster bits, size");
    CHECK(be32_get(buf + QH_L1_SIZE) == 2 && be64_get(buf + QH_L1_TABLE_OFFSET) == 0x50000,
          "L1");
    CHECK(be64_get(buf + QH_REFCOUNT_TABLE_OFFSET) == 0x30000 &&
          be32_get(buf + QH_REFCOUNT_TABLE_CLUSTERS) == 1, "refcount table");
    CHECK(be64_get(buf + QH_INCOMPATIBLE) ==
          (QCOW2_INCOMPAT_COMPRESSION | QCOW2_INCOMPAT_EXTL2), "incompatible bits");
    CHECK(be64_get(buf + QH_COMPATIBLE) == QCOW2_COMPAT_LAZY_REFCOUNTS, "lazy bit");
    CHECK(be32_get(buf + QH_REFCOUNT_ORDER) == 4 && be32_get(buf + QH_HEADER_LENGTH) == 112 &&
          buf[QH_COMPRESSION_TYPE] == 1, "order, length, compression type");
    /* extensions: backing format, feature table, end; then the name */
    CHECK(be32_get(buf + 112) == QCOW2_EXT_BACKING_FMT && be32_get(buf + 116) == 5 &&
          !memcmp(buf + 120, "qcow2", 5), "backing format extension");
    CHECK(be32_get(buf + 128) == QCOW2_EXT_FEATURE_NAMES && be32_get(buf + 132) == 384,
          "feature table");
    CHECK(be32_get(buf + 136 + 384) == QCOW2_EXT_END, "end of extensions");
    uint64_t bo = be64_get(buf + QH_BACKING_FILE_OFFSET);
    CHECK(bo == 136 + 384 + 8 && be32_get(buf + QH_BACKING_FILE_SIZE) == 8 &&
          !memcmp(buf + bo, "base.img", 8), "backing name at %llu", (unsigned long long)bo);

    /* v2: 72-byte header, no feature table; small clusters: no table either */
    parse("compat=0.10,cluster_size=512", false, "b", "raw", &p, err, sizeof(err));
    CHECK(qcow2w_header_encode(&p, &l, buf, 512, err, sizeof(err)) == 0, "%s", err);
    CHECK(be32_get(buf + QH_VERSION) == 2 && be32_get(buf + 72) == QCOW2_EXT_BACKING_FMT &&
          be32_get(buf + 88) == QCOW2_EXT_END && be64_get(buf + QH_BACKING_FILE_OFFSET) == 96,
          "v2 layout");
    /* a backing name that cannot fit one 512-byte cluster */
    char longname[600];
    memset(longname, 'a', sizeof(longname) - 1);
    longname[sizeof(longname) - 1] = '\0';
    parse("cluster_size=512", false, longname, "raw", &p, err, sizeof(err));
    CHECK(qcow2w_header_encode(&p, &l, buf, 512, err, sizeof(err)) == -EINVAL &&
          strstr(err, "do not fit"), "long name: %s", err);
}

static void test_compressed_entry(void)
{
    /* 64 KiB clusters: x = 54; 200 bytes at 0x10100 stay in one sector,
     * 300 bytes run into the next one */
    uint64_t e = qcow2w_compressed_entry(16, 0x10100, 200);
    CHECK(e == (QCOW2_L2_COMPRESSED | 0x10100), "entry %llx", (unsigned long long)e);
    e = qcow2w_compressed_entry(16, 0x10100, 300);
    CHECK(e == (QCOW2_L2_COMPRESSED | 1ULL << 54 | 0x10100), "entry %llx",
          (unsigned long long)e);
    /* 1000 bytes from 0x101f0: sectors 0x80..0x82, two more */
    e = qcow2w_compressed_entry(16, 0x101f0, 1000);
    CHECK(e == (QCOW2_L2_COMPRESSED | 2ULL << 54 | 0x101f0), "entry %llx",
          (unsigned long long)e);
    /* 2 MiB clusters: x = 49; offsets from 2^49 up cannot be described */
    CHECK(qcow2w_compressed_entry(21, 1ULL << 49, 100) == 0, "offset too large");
    CHECK(qcow2w_compressed_entry(9, 1ULL << 56, 100) == 0, "offset past 56 bits");
    CHECK(qcow2w_compressed_entry(16, 4096, 0) == 0, "empty");
}

static void test_compress(void)
{
    static uint8_t in[65536], out[65536], back[65536];
    size_t n;

    /* text, with whole 2 KiB pieces repeated 8 KiB later: a 32 KiB-window
     * compressor would reach back further than qemu's 4 KiB inflate window */
    static const char *const words[] = { "disk ", "image ", "of ", "cluster\n" };
    rng = 7;
    for (size_t i = 0; i < 8192;) {
        const char *w = words[rnd() % 4];
        for (size_t k = 0; w[k] && i < 8192; k++)
            in[i++] = (uint8_t)w[k];
    }
    for (size_t i = 8192; i < sizeof(in); i++)
        in[i] = (i / 2048) % 2 ? in[i - 8192] : (uint8_t)rnd();
    ssize_t cl = qcow2w_compress_cluster(QCOW2_COMPRESSION_ZLIB, in, sizeof(in), out,
                                         sizeof(out));
    CHECK(cl > 0 && cl < (ssize_t)sizeof(in), "zlib %zd", cl);
    z_stream zs = { 0 };
    CHECK(inflateInit2(&zs, -12) == Z_OK, "inflateInit2");
    zs.next_in = out;
    zs.avail_in = (uInt)cl;
    zs.next_out = back;
    zs.avail_out = sizeof(back);
    int zr = inflate(&zs, Z_FINISH);
    CHECK(zr == Z_STREAM_END && zs.total_out == sizeof(in) && !memcmp(in, back, sizeof(in)),
          "inflate with a 4 KiB window: %d", zr);
    inflateEnd(&zs);

    cl = qcow2w_compress_cluster(QCOW2_COMPRESSION_ZSTD, in, sizeof(in), out, sizeof(out));
    CHECK(cl > 0, "zstd %zd", cl);
    n = ZSTD_decompress(back, sizeof(back), out, (size_t)cl);
    CHECK(n == sizeof(in) && !memcmp(in, back, sizeof(in)), "zstd round trip");

    /* random data does not shrink: 0, stored plain */
    for (size_t i = 0; i < sizeof(in); i++)
        in[i] = (uint8_t)rnd();
    CHECK(qcow2w_compress_cluster(QCOW2_COMPRESSION_ZLIB, in, sizeof(in), out, sizeof(out))
          == 0, "random zlib");
    CHECK(qcow2w_compress_cluster(QCOW2_COMPRESSION_ZSTD, in, sizeof(in), out, sizeof(out))
          == 0, "random zstd");

    /* the quick incompressibility probe must not reject what deflate can
     * shrink: random with 4 KiB of zeros; a random 1 KiB block repeated
     * (byte statistics of random data, but repeats within the window) */
    memset(in + 30000, 0, 4096);
    cl = qcow2w_compress_cluster(QCOW2_COMPRESSION_ZLIB, in, sizeof(in), out, sizeof(out));
    CHECK(cl > 0 && cl < 65536 - 3500, "random + 4 KiB zeros: %zd", cl);
    for (size_t i = 1024; i < sizeof(in); i++)
        in[i] = in[i - 1024];
    cl = qcow2w_compress_cluster(QCOW2_COMPRESSION_ZLIB, in, sizeof(in), out, sizeof(out));
    CHECK(cl > 0 && cl < 8192, "repeated random block: %zd", cl);
    /* random with repeats sprinkled in (6% of the bytes) */
    for (size_t i = 0; i < sizeof(in); i++)
        in[i] = (uint8_t)rnd();
    for (size_t i = 2048; i + 256 < sizeof(in); i += 4096)
        memcpy(in + i, in + i - 2000, 256);
    cl = qcow2w_compress_cluster(QCOW2_COMPRESSION_ZLIB, in, sizeof(in), out, sizeof(out));
    CHECK(cl > 0, "random with repeats: %zd", cl);
}

static void nop_done(void *opaque, int res)
{
    (void)opaque, (void)res;
}

static int create_at(const char *path, const char *o, uint64_t size, struct bd **bd,
                     struct kvopts *kv, struct diag *d)
{
    struct bfile *f;
    char err[256];
    int r;

    diag_init(d);
    unlink(path);
    memset(kv, 0, sizeof(*kv));
    if (o && kvopts_parse(kv, o, err, sizeof(err)) < 0)
        return -EINVAL;
    if ((r = bfile_open(&f, path, BFILE_O_RDWR | BFILE_O_CREATE, d)) < 0)
        return r;
    struct bd_create_opts co = { .size = size, .o = kv };
    r = qcow2w_create(bd, f, &co, d);
    if (r < 0)
        bfile_close(f);
    return r;
}

static bool starts_with_magic(const char *path)
{
    uint8_t b[4] = { 0 };
    int fd = open(path, O_RDONLY);
    ssize_t n = fd >= 0 ? pread(fd, b, 4, 0) : -1;
    if (fd >= 0)
        close(fd);
    return n == 4 && be32_get(b) == QCOW2_MAGIC;
}

static void test_header_last(void)
{
    char path[4200];
    static uint8_t data[65536];
    struct kvopts kv;
    struct bd *bd;
    struct diag d;

    memset(data, 0xab, sizeof(data));
    snprintf(path, sizeof(path), "%s/partial.qcow2", tmpdir);
    CHECK(create_at(path, NULL, 8 << 20, &bd, &kv, &d) == 0, "%s", d.what);
    CHECK(bd->drv == &bd_qcow2_out && bd->granule == 65536 && bd->size == 8 << 20,
          "bd fields");
    for (int i = 0; i < 8; i++)
        CHECK(bd->drv->pwrite(bd, data, sizeof(data), (uint64_t)i << 20, nop_done, NULL) == 0,
              "write");
    CHECK(!starts_with_magic(path), "header written before finish");
    CHECK(run("qemu-img info '%s' 2>/dev/null | grep -q 'file format: qcow2'", path) != 0,
          "a half-written file looks like a qcow2 image");
    /* misuse is refused, not silently accepted */
    CHECK(bd->drv->pwrite(bd, data, 1000, 4096, nop_done, NULL) == -EINVAL, "unaligned write");
    diag_clear(&d);
    CHECK(bd->drv->pwrite(bd, data, 65536, 8 << 20, nop_done, NULL) == -EINVAL,
          "write past the end");
    diag_clear(&d);
    bd->drv->abort(bd);
    bd->drv->close(bd);
    kvopts_free(&kv);
    CHECK(!starts_with_magic(path), "abort wrote a header");

    /* a write that overlaps an earlier one is an error, not a leak */
    CHECK(create_at(path, NULL, 8 << 20, &bd, &kv, &d) == 0, "%s", d.what);
    bd->drv->pwrite(bd, data, sizeof(data), 0, nop_done, NULL);
    CHECK(bd->drv->pwrite(bd, data, sizeof(data), 0, nop_done, NULL) < 0 &&
          strstr(d.what, "written twice"), "double write: %s", d.what);
    CHECK(bd->drv->finish(bd) < 0, "finish after an error must fail");
    bd->drv->close(bd);
    kvopts_free(&kv);
    CHECK(!starts_with_magic(path), "header written after an error");
    unlink(path);
}

static void test_huge_sparse(void)
{
    char path[4200], src[4200];
    static uint8_t data[4096];
    const uint64_t size = 2ULL << 40, cs = 4096;
    struct kvopts kv;
    struct bd *bd;
    struct diag d;
    int before = failures;

    snprintf(path, sizeof(path), "%s/huge.qcow2", tmpdir);
    snprintf(src, sizeof(src), "%s/huge.raw", tmpdir);
    int sfd = open(src, O_RDWR | O_CREAT | O_TRUNC, 0644);
    CHECK(sfd >= 0 && ftruncate(sfd, (off_t)size) == 0, "sparse source");
    CHECK(create_at(path, "cluster_size=4K", size, &bd, &kv, &d) == 0, "%s", d.what);
    /* pass 1: one cluster per GiB (a new L2 table each); pass 2, backwards:
     * the next cluster of each, so that evicted tables are read back */
    for (int pass = 0; pass < 2; pass++) {
        for (uint64_t k = 0; k < 2048; k++) {
            uint64_t gib = pass ? 2047 - k : k;
            uint64_t off = (gib << 30) + (uint64_t)pass * cs;
            memset(data, (int)(gib * 2 + (uint64_t)pass + 1), sizeof(data));
            data[0] = (uint8_t)(gib >> 8);
            CHECK(bd->drv->pwrite(bd, data, sizeof(data), off, nop_done, NULL) == 0,
                  "write at %llu: %s", (unsigned long long)off, d.what);
            CHECK(pwrite(sfd, data, sizeof(data), (off_t)off) == (ssize_t)sizeof(data),
                  "source");
        }
    }
    close(sfd);
    CHECK(bd->drv->finish(bd) == 0, "finish: %s", d.what);
    bd->drv->close(bd);
    kvopts_free(&kv);
    CHECK(qcheck(path) == 0, "2 TiB image does not check clean");
    CHECK(file_size(path) < (40ULL << 20), "2 TiB image file is %llu bytes",
          (unsigned long long)file_size(path));
    CHECK(run("qemu-img compare -q -f raw -F qcow2 '%s' '%s'", src, path) == 0,
          "2 TiB image reads back different");
    if (failures == before) {
        unlink(path);
        unlink(src);
    }
}

int main(void)
{
    setup_tmpdir("qcow2w_format");
    test_params();
    test_header();
    test_compressed_entry();
    test_compress();
    if (have_qemu_img()) {
        test_header_last();
        test_huge_sparse();
    } else {
        printf("qemu-img not installed: image tests skipped\n");
    }
    if (failures)
        fprintf(stderr, "%d checks failed\n", failures);
    else
        printf("all checks passed\n");
    return failures ? 1 : 0;
}
