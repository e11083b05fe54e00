/* qcow2 writer over a backing file: only clusters that differ from the
 * backing file are written; zero clusters over backing data become zero-flag
 * entries (v3), zero subclusters (extended L2) or allocated zero clusters
 * (v2).  The overlay must check clean and read back as the source. */
#include "qcow2w_feed.h"

struct bcase {
    const char *name;
    const char *o;
    uint64_t bsize, size;
    bool compress;
    bool expect_zero_writes;
};

static void mutate(uint8_t *p, uint64_t size, uint64_t seed)
{
    rng = seed;
    /* per 64 KiB: zero it all, change 16 KiB of it, or keep it */
    for (uint64_t off = 0; off < size; off += 65536) {
        uint64_t n = size - off < 65536 ? size - off : 65536;
        switch (rnd() % 4) {
        case 0:
            memset(p + off, 0, n);
            break;
        case 1:
            for (uint64_t i = 0; i < n && i < 16384; i++)
                p[off + i] = (uint8_t)rnd();
            break;
        default:
            break;
        }
    }
}

static void run_case(const struct bcase *c, uint64_t seed)
{
    char base[4200], src[4200], dst[4200], basename[64];
    struct feed_stats st;
    struct diag d;
    uint8_t *bdata = calloc(1, c->bsize), *data = calloc(1, c->size);
    int before = failures;

    snprintf(basename, sizeof(basename), "%s.base.raw", c->name);
    snprintf(base, sizeof(base), "%s/%s", tmpdir, basename);
    snprintf(src, sizeof(src), "%s/%s.raw", tmpdir, c->name);
    snprintf(dst, sizeof(dst), "%s/%s.qcow2", tmpdir, c->name);
    gen_data(bdata, c->bsize, seed, 128 * 1024);
    /* the source starts as the backing content (zeros past its end) */
    memcpy(data, bdata, c->bsize < c->size ? c->bsize : c->size);
    mutate(data, c->size, seed + 100);
    CHECK(write_file(base, bdata, c->bsize) == 0, "%s", base);
    CHECK(write_file(src, data, c->size) == 0, "%s", src);
    struct feed_opts fo = { .o = c->o, .compress = c->compress, .backing = basename,
                            .backing_fmt = "raw", .bdata = bdata, .bsize = c->bsize };
    int r = feed(dst, data, c->size, &fo, &st, &d);
    CHECK(r == 0, "%s: writer failed: %s", c->name, d.what);
    if (r == 0) {
        CHECK(!c->expect_zero_writes || st.zero_writes > 0, "%s: no zero cluster tested",
              c->name);
        CHECK(qcheck(dst) == 0, "%s: qemu-img check reports errors or leaks", c->name);
        CHECK(run("qemu-img compare -q -f raw -F qcow2 '%s' '%s'", src, dst) == 0,
              "%s: content differs from the source", c->name);
        char *info = capture("qemu-img info --output=json '%s'", dst);
        char want[128];
        snprintf(want, sizeof(want), "\"backing-filename\": \"%s\"", basename);
        CHECK(strstr(info, want), "%s: info lacks %s:\n%s", c->name, want, info);
        CHECK(strstr(info, "\"backing-filename-format\": \"raw\""),
              "%s: backing format not shown:\n%s", c->name, info);
        free(info);
        /* unchanged clusters were not stored: the overlay holds less than
         * the source (qemu-img map shows them in the backing file) */
        char *map = capture("qemu-img map --output=json '%s'", dst);
        CHECK(strstr(map, "\"depth\": 1"), "%s: nothing left to the backing file:\n%s",
              c->name, map);
        free(map);
    }
    if (failures == before) {
        unlink(src);
        unlink(dst);
        unlink(base);
    }
    free(bdata);
    free(data);
}

int main(void)
{
    static const struct bcase cases[] = {
        { "v3", NULL, 4 << 20, 4 << 20, false, true },
        { "v2", "compat=0.10", 4 << 20, 4 << 20, false, true },
        { "v3-4k-larger", "cluster_size=4K", 3 << 20, (5 << 20) + 512, false, true },
        { "v3-smaller", NULL, 6 << 20, (3 << 20) + 1024, false, true },
        { "extl2", "extended_l2=on", 4 << 20, 4 << 20, false, true },
        { "extl2-prealloc", "extended_l2=on,preallocation=metadata", 4 << 20, 4 << 20,
          false, true },
        { "zstd", "compression_type=zstd,cluster_size=16K", 4 << 20, 4 << 20, true, true },
        { "zlib-v2", "compat=0.10,cluster_size=8K", 4 << 20, 4 << 20, true, true },
    };

    if (!have_qemu_img()) {
        printf("skipped: qemu-img not installed\n");
        return 77;
    }
    setup_tmpdir("qcow2w_backing");
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        run_case(&cases[i], i + 1);
    if (failures)
        fprintf(stderr, "%d checks failed\n", failures);
    else
        printf("all %zu cases passed\n", sizeof(cases) / sizeof(cases[0]));
    return failures ? 1 : 0;
}
