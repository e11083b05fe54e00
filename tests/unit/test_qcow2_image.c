/* The qcow2 driver end to end on images built in memory: every cluster
 * kind, reads at random offsets and lengths from several threads at once,
 * block status merging, a bounded L2 cache, check on a consistent image and
 * on one with a leak, and random damage to the metadata (no crash, a
 * message for every failure). */
#include <pthread.h>
#include <stdint.h>
#include <zlib.h>

#include "formats/qcow2/read_int.h"
#include "io/bfile.h"
#include "qcow2_testutil.h"
#include "util/endian.h"

#define CB 9
#define CS (1u << CB)
#define L2N (CS / 8)
#define MAXCL 4096

struct img {
    uint8_t *buf;
    size_t len;
    uint16_t refs[MAXCL];
    uint8_t *expect;        /* guest content */
    uint64_t size;
};

static struct diag d;

static uint64_t alloc_cluster(struct img *im)
{
    uint64_t off = im->len;
    im->buf = realloc(im->buf, im->len + CS);
    memset(im->buf + off, 0, CS);
    im->len += CS;
    im->refs[off / CS]++;
    return off;
}

static void pattern(uint8_t *p, uint64_t g, bool text)
{
    for (unsigned i = 0; i < CS; i++)
        p[i] = text ? (uint8_t)("cluster text "[(g + i) % 13])
                    : (uint8_t)((g * 131 + i * 7 + (i >> 5)) ^ (g >> 3));
}

static size_t deflate_raw(const uint8_t *in, uint8_t *out, size_t cap)
{
    z_stream z;
    memset(&z, 0, sizeof(z));
    deflateInit2(&z, 9, Z_DEFLATED, -12, 9, Z_DEFAULT_STRATEGY);
    z.next_in = (Bytef *)in;
    z.avail_in = CS;
    z.next_out = out;
    z.avail_out = (uInt)cap;
    int r = deflate(&z, Z_FINISH);
    size_t n = cap - z.avail_out;
    deflateEnd(&z);
    return r == Z_STREAM_END ? n : 0;
}

/* kinds by guest cluster */
enum { K_UNALLOC, K_DATA, K_ZERO, K_ZERO_ALLOC, K_COMPRESSED };

static int kind_of(uint64_t g, unsigned variant)
{
    if (variant == 1)   /* sparse: one data cluster per L2 table */
        return g % L2N == 5 ? K_DATA : K_UNALLOC;
    if (g / L2N == 2)
        return K_UNALLOC;               /* no L2 table at all */
    static const int k[8] = { K_UNALLOC, K_DATA, K_DATA, K_DATA, K_ZERO, K_ZERO_ALLOC,
                              K_COMPRESSED, K_COMPRESSED };
    return k[(g * 7 / 3) % 8];
}

/* variant 0: 6 L2 ranges of mixed kinds; variant 1: 300 L2 tables */
static void build(struct img *im, unsigned variant)
{
    unsigned nl1 = variant == 1 ? 300 : 6;
    uint64_t ncl = (uint64_t)nl1 * L2N;
    memset(im, 0, sizeof(*im));
    im->size = ncl * CS - (variant == 1 ? 0 : 3 * CS);
    ncl = im->size / CS;
    im->expect = calloc(1, im->size);

    uint64_t hdr = alloc_cluster(im);
    uint64_t reft = alloc_cluster(im);
    uint64_t l1 = alloc_cluster(im);
    for (unsigned i = 1; i < (nl1 * 8 + CS - 1) / CS; i++)
        alloc_cluster(im);
    uint64_t *l2off = calloc(nl1, sizeof(uint64_t));
    uint64_t ccur = 0, cend = 0;     /* compressed data cursor */

    for (uint64_t g = 0; g < ncl; g++) {
        int k = kind_of(g, variant);
        uint64_t li = g / L2N;
        if (k == K_UNALLOC && variant != 0)
            continue;
        if (k == K_UNALLOC && li == 2)
            continue;
        if (!l2off[li])
            l2off[li] = alloc_cluster(im);
        uint8_t data[CS];
        uint64_t e = 0;
        switch (k) {
        case K_UNALLOC:
            break;
        case K_DATA: {
            uint64_t h = alloc_cluster(im);
            pattern(data, g, false);
            memcpy(im->buf + h, data, CS);
            memcpy(im->expect + g * CS, data, CS);
            e = h | QCOW2_L2_COPIED;
            break;
        }
        case K_ZERO:
            e = QCOW2_L2_ZERO;
            break;
        case K_ZERO_ALLOC: {
            uint64_t h = alloc_cluster(im);
            memset(im->buf + h, 0xab, CS);       /* must not be read */
            e = h | QCOW2_L2_COPIED | QCOW2_L2_ZERO;
            break;
        }
        case K_COMPRESSED: {
            uint8_t z[2 * CS];
            pattern(data, g, true);
            size_t n = deflate_raw(data, z, sizeof(z));
            if (ccur + n > cend) {
                /* another host cluster; data may run on into it if it follows */
                uint64_t h = alloc_cluster(im);
                im->refs[h / CS]--;          /* counted per compressed cluster below */
                if (h != cend)
                    ccur = h;
                cend = h + CS;
            }
            memcpy(im->buf + ccur, z, n);
            memcpy(im->expect + g * CS, data, CS);
            uint64_t nsec = ((ccur + n - 1) >> 9) - (ccur >> 9);   /* additional sectors */
            for (uint64_t c = ccur / CS; c <= (ccur + n - 1) / CS; c++)
                im->refs[c]++;
            e = QCOW2_L2_COMPRESSED | nsec << (62 - (CB - 8)) | ccur;
            ccur += n;
            break;
        }
        }
        be64_put(im->buf + l2off[li] + (g % L2N) * 8, e);
    }
    for (unsigned i = 0; i < nl1; i++)
        if (l2off[i])
            be64_put(im->buf + l1 + i * 8, l2off[i] | QCOW2_L1_COPIED);
    /* refcount blocks (16-bit, 256 entries each) for every cluster, themselves included */
    uint64_t per = CS * 8 / 16;
    while ((im->len / CS + per - 1) / per > 0) {
        uint64_t need = (im->len / CS + 1 + per - 1) / per;
        uint64_t have = 0;
        for (unsigned i = 0; i < CS / 8; i++)
            if (be64_get(im->buf + reft + i * 8))
                have++;
        if (have >= need)
            break;
        uint64_t rb = alloc_cluster(im);
        be64_put(im->buf + reft + have * 8, rb);
    }
    for (uint64_t c = 0; c < im->len / CS; c++) {
        uint64_t rb = be64_get(im->buf + reft + (c / per) * 8);
        be16_put(im->buf + rb + (c % per) * 2, im->refs[c]);
    }
    uint8_t *h = im->buf + hdr;
    be32_put(h + QH_MAGIC, QCOW2_MAGIC);
    be32_put(h + QH_VERSION, 3);
    be32_put(h + QH_CLUSTER_BITS, CB);
    be64_put(h + QH_SIZE, im->size);
    be32_put(h + QH_L1_SIZE, nl1);
    be64_put(h + QH_L1_TABLE_OFFSET, l1);
    be64_put(h + QH_REFCOUNT_TABLE_OFFSET, reft);
    be32_put(h + QH_REFCOUNT_TABLE_CLUSTERS, 1);
    be32_put(h + QH_REFCOUNT_ORDER, 4);
    be32_put(h + QH_HEADER_LENGTH, 104);
    free(l2off);
}

static struct bd *open_img(const struct img *im, const uint8_t *buf)
{
    struct bfile *f;
    struct bd *bd = NULL;
    static const struct bd_open_opts o = { .format = "qcow2", .no_external_files = true };
    if (bfile_open_mem(&f, "mem.qcow2", buf, im->len, &d) < 0)
        return NULL;
    if (bd_open_bfile(&bd, f, &o, NULL, &d) < 0)
        return NULL;
    return bd;
}

static uint32_t rnd_state = 12345;
static uint32_t rnd(void)
{
    rnd_state ^= rnd_state << 13;
    rnd_state ^= rnd_state >> 17;
    rnd_state ^= rnd_state << 5;
    return rnd_state;
}

static void test_read(struct img *im)
{
    struct bd *bd = open_img(im, im->buf);
    CHECK(bd != NULL);
    if (!bd) {
        fprintf(stderr, "open: %s\n", d.what);
        return;
    }
    CHECK(bd->size == im->size && bd->granule == CS);
    uint8_t *got = malloc(im->size);
    CHECK_OK(bd_pread(bd, got, im->size, 0), &d);
    CHECK(memcmp(got, im->expect, im->size) == 0);
    for (int i = 0; i < 2000; i++) {
        uint64_t off = rnd() % im->size;
        size_t len = 1 + rnd() % (4 * CS);
        if (len > im->size - off)
            len = im->size - off;
        memset(got, 0x11, len);
        CHECK_OK(bd_pread(bd, got, len, off), &d);
        CHECK(memcmp(got, im->expect + off, len) == 0);
    }
    CHECK_FAIL(bd_pread(bd, got, 2, im->size - 1), &d, "past the end of the image");

    /* block status: covers everything, merged maximally, true to the content */
    uint64_t off = 0, n = 0;
    struct bd_extent prev = { 0 };
    while (off < im->size) {
        struct bd_extent e;
        CHECK_OK(bd_block_status(bd, off, im->size - off, &e), &d);
        if (e.len == 0)
            break;
        if ((e.flags & BD_ZERO)) {
            for (uint64_t i = 0; i < e.len; i++)
                if (im->expect[off + i]) {
                    CHECK(!"zero extent over non-zero data");
                    break;
                }
        }
        if (n && prev.flags == e.flags && !(e.flags & BD_DATA))
            CHECK(!"two adjacent extents of the same kind");
        if (n && prev.flags == e.flags && (e.flags & BD_DATA) && prev.host_offset >= 0 &&
            (uint64_t)prev.host_offset + prev.len == (uint64_t)e.host_offset)
            CHECK(!"two adjacent contiguous data extents");
        prev = e;
        off += e.len;
        n++;
    }
    CHECK(off == im->size);
    free(got);
    bd_close(bd);
}

struct thr {
    struct bd *bd;
    struct img *im;
    uint32_t seed;
    int bad;
};

static void *reader(void *arg)
{
    struct thr *t = arg;
    uint8_t *buf = malloc(8 * CS);
    for (int i = 0; i < 1500; i++) {
        t->seed = t->seed * 1103515245u + 12345u;
        uint64_t off = (t->seed >> 4) % t->im->size;
        size_t len = 1 + (t->seed >> 7) % (8 * CS);
        if (len > t->im->size - off)
            len = t->im->size - off;
        if (bd_pread(t->bd, buf, len, off) < 0 || memcmp(buf, t->im->expect + off, len))
            t->bad++;
    }
    free(buf);
    return NULL;
}

static void test_threads(struct img *im)
{
    struct bd *bd = open_img(im, im->buf);
    pthread_t th[4];
    struct thr t[4];
    CHECK(bd != NULL);
    if (!bd)
        return;
    for (int i = 0; i < 4; i++) {
        t[i] = (struct thr){ bd, im, 77u + (uint32_t)i, 0 };
        pthread_create(&th[i], NULL, reader, &t[i]);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        CHECK(t[i].bad == 0);
    }
    bd_close(bd);
}

static void test_cache(void)
{
    struct img im;
    build(&im, 1);
    struct bd *bd = open_img(&im, im.buf);
    CHECK(bd != NULL);
    if (!bd)
        return;
    struct qcow2 *q = to_qcow2(bd);
    uint8_t *got = malloc(im.size);
    CHECK_OK(bd_pread(bd, got, im.size, 0), &d);
    CHECK(memcmp(got, im.expect, im.size) == 0);
    /* 300 tables through at most 256 slots */
    CHECK(qcow2_l2cache_slots(q->l2) <= 256);
    uint64_t m1 = qcow2_l2cache_misses(q->l2);
    CHECK(m1 == 300);
    CHECK_OK(bd_pread(bd, got, im.size, 0), &d);
    CHECK(qcow2_l2cache_misses(q->l2) > m1);   /* evicted: bounded */
    /* re-reading one table's range hits the cache */
    m1 = qcow2_l2cache_misses(q->l2);
    for (int i = 0; i < 10; i++)
        CHECK_OK(bd_pread(bd, got, CS, (uint64_t)(im.size - CS)), &d);
    CHECK(qcow2_l2cache_misses(q->l2) == m1);
    /* block status: one extent per data cluster and per gap between them */
    uint64_t off = 0, n = 0;
    while (off < im.size) {
        struct bd_extent e;
        if (bd_block_status(bd, off, im.size - off, &e) < 0)
            break;
        off += e.len;
        n++;
    }
    CHECK(n == 601);
    free(got);
    bd_close(bd);
    free(im.buf);
    free(im.expect);
}

static void test_check(struct img *im)
{
    struct bd *bd = open_img(im, im->buf);
    struct bd_check_result r;
    CHECK(bd != NULL);
    if (!bd)
        return;
    CHECK_OK(bd->drv->check(bd, &r, 0), &d);
    CHECK(r.corruptions == 0 && r.leaks == 0 && r.check_errors == 0);
    CHECK(r.image_end_offset == (int64_t)im->len);
    CHECK(r.compressed_clusters > 0 && r.allocated_clusters > r.compressed_clusters);
    bd_close(bd);

    /* one more cluster with refcount 1: a leak */
    uint8_t *copy = malloc(im->len + CS);
    memcpy(copy, im->buf, im->len);
    memset(copy + im->len, 0, CS);
    uint64_t reft = be64_get(copy + QH_REFCOUNT_TABLE_OFFSET);
    uint64_t c = im->len / CS, per = CS * 8 / 16;
    uint64_t rb = be64_get(copy + reft + (c / per) * 8);
    struct img big = *im;
    big.len = im->len + CS;
    if (rb) {
        be16_put(copy + rb + (c % per) * 2, 1);
        bd = open_img(&big, copy);
        CHECK(bd != NULL);
        if (bd) {
            CHECK_OK(bd->drv->check(bd, &r, 0), &d);
            CHECK(r.leaks == 1 && r.corruptions == 0);
            bd_close(bd);
        }
    }
    free(copy);
}

/* Random damage to the metadata: open, read, block status and check must
 * never crash; every failure leaves a message. */
static void test_damage(struct img *im)
{
    uint8_t *copy = malloc(im->len);
    uint8_t *buf = malloc(im->size);
    uint64_t meta_end = 0;
    /* metadata lives in the clusters before the first data cluster and in
     * the L2 tables spread among them: damage anywhere in the first part */
    meta_end = im->len;
    for (int it = 0; it < 1500; it++) {
        memcpy(copy, im->buf, im->len);
        int flips = 1 + it % 6;
        for (int k = 0; k < flips; k++) {
            uint64_t at = it % 3 ? rnd() % (4 * CS) : rnd() % meta_end;
            copy[at] = (uint8_t)rnd();
        }
        struct bd *bd = open_img(im, copy);
        if (!bd) {
            CHECK(d.what[0]);
            diag_clear(&d);
            continue;
        }
        if (bd_pread(bd, buf, bd->size, 0) < 0)
            CHECK(d.what[0]);
        diag_clear(&d);
        for (uint64_t off = 0; off < bd->size;) {
            struct bd_extent e;
            if (bd_block_status(bd, off, bd->size - off, &e) < 0)
                break;
            CHECK(e.len > 0 && e.len <= bd->size - off);
            off += e.len;
        }
        diag_clear(&d);
        struct bd_check_result r;
        bd->drv->check(bd, &r, 0);
        diag_clear(&d);
        bd_close(bd);
    }
    free(copy);
    free(buf);
}

static void test_header_size_rounding(struct img *im)
{
    uint8_t *copy = malloc(im->len);
    memcpy(copy, im->buf, im->len);
    be64_put(copy + QH_SIZE, im->size - 100);   /* qemu sees whole sectors */
    struct bd *bd = open_img(im, copy);
    CHECK(bd && bd->size == im->size - 512);
    bd_close(bd);
    free(copy);
}

int main(void)
{
    struct img im;
    diag_init(&d);
    build(&im, 0);
    /* QCOW2_TEST_DUMP=PREFIX writes PREFIX.qcow2 and PREFIX.raw (to check
     * the builder against qemu-img by hand) */
    const char *dump = getenv("QCOW2_TEST_DUMP");
    if (dump) {
        char name[512];
        snprintf(name, sizeof(name), "%s.qcow2", dump);
        FILE *f = fopen(name, "wb");
        if (f) {
            fwrite(im.buf, 1, im.len, f);
            fclose(f);
        }
        snprintf(name, sizeof(name), "%s.raw", dump);
        if ((f = fopen(name, "wb"))) {
            fwrite(im.expect, 1, im.size, f);
            fclose(f);
        }
    }
    test_read(&im);
    test_threads(&im);
    test_check(&im);
    test_header_size_rounding(&im);
    test_damage(&im);
    test_cache();
    free(im.buf);
    free(im.expect);
    return t_done("test_qcow2_image");
}
