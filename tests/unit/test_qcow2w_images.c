/* qcow2 writer, end to end: images written through the driver must pass
 * `qemu-img check` (no errors, no leaks), read back identical to the source
 * (`qemu-img compare`), show the options in `qemu-img info`, and be no
 * larger than qemu-img's own conversion of the same source. */
#include "qcow2w_feed.h"

struct mcase {
    const char *name;
    const char *o;
    uint64_t size;
    bool compress;
    enum feed_order order;
    bool ioq;
    const char *info_expect[4];     /* substrings of qemu-img info --output=json */
};

/* chunk: the pipeline's chunk (0 = 1 MiB) */
static int run_case(const struct mcase *c, uint64_t seed, uint64_t chunk)
{
    char src[4200], dst[4200], ref[4200];
    struct feed_stats st;
    struct diag d;
    uint8_t *data = malloc(c->size);
    int before = failures;

    gen_data(data, c->size, seed, 256 * 1024);
    snprintf(src, sizeof(src), "%s/%s.raw", tmpdir, c->name);
    snprintf(dst, sizeof(dst), "%s/%s.qcow2", tmpdir, c->name);
    snprintf(ref, sizeof(ref), "%s/%s.ref.qcow2", tmpdir, c->name);
    CHECK(write_file(src, data, c->size) == 0, "%s", src);
    struct feed_opts fo = { .o = c->o, .compress = c->compress, .order = c->order,
                            .use_ioq = c->ioq, .chunk = chunk };
    int r = feed(dst, data, c->size, &fo, &st, &d);
    CHECK(r == 0, "%s: writer failed: %s", c->name, d.what);
    if (r == 0) {
        CHECK(st.done_calls == st.writes, "%s: %llu writes but %llu completions", c->name,
              (unsigned long long)st.writes, (unsigned long long)st.done_calls);
        CHECK(qcheck(dst) == 0, "%s: qemu-img check reports errors or leaks", c->name);
        CHECK(run("qemu-img compare -q -f raw -F qcow2 '%s' '%s'", src, dst) == 0,
              "%s: content differs from the source", c->name);
        char *info = capture("qemu-img info --output=json '%s'", dst);
        for (int i = 0; i < 4 && c->info_expect[i]; i++)
            CHECK(strstr(info, c->info_expect[i]), "%s: info lacks %s:\n%s", c->name,
                  c->info_expect[i], info);
        free(info);
        if (c->compress) {
            char *chk = capture("qemu-img check --output=json '%s'", dst);
            char want[64];
            snprintf(want, sizeof(want), "\"compressed-clusters\": %llu",
                     (unsigned long long)st.compressed);
            CHECK(st.compressed > 0 && strstr(chk, want), "%s: expected %s:\n%s", c->name,
                  want, chk);
            /* random runs (<= 256 KiB) fill whole clusters up to 64 KiB */
            CHECK(st.compressed < st.data_clusters || strstr(c->name, "2m"),
                  "%s: random clusters should have been stored plain", c->name);
            free(chk);
        }
        /* size against qemu-img's conversion of the same source */
        if (run("qemu-img convert -O qcow2 %s %s%s '%s' '%s' 2>/dev/null",
                c->compress ? "-c" : "", c->o ? "-o " : "", c->o ? c->o : "", src, ref) == 0) {
            uint64_t ours = file_size(dst), theirs = file_size(ref);
            uint64_t slack = c->compress ? theirs / 50 : theirs / 20;
            CHECK(ours <= theirs + slack, "%s: %llu bytes, qemu-img makes %llu", c->name,
                  (unsigned long long)ours, (unsigned long long)theirs);
            unlink(ref);
        }
    }
    if (failures == before) {
        unlink(src);
        unlink(dst);
    }
    free(data);
    return 0;
}

int main(void)
{
    static const struct mcase cases[] = {
        { "default", NULL, 6 << 20, false, ORDER_ASCENDING, false,
          { "\"compat\": \"1.1\"", "\"cluster-size\": 65536", "\"refcount-bits\": 16" } },
        { "v2", "compat=0.10", 6 << 20, false, ORDER_ASCENDING, true,
          { "\"compat\": \"0.10\"" } },
        { "c512", "cluster_size=512", (3 << 20) + 1536, false, ORDER_WINDOW_SHUFFLE, false,
          { "\"cluster-size\": 512" } },
        { "c4k-rc1", "cluster_size=4K,refcount_bits=1", 5 << 20, false, ORDER_ASCENDING, true,
          { "\"cluster-size\": 4096", "\"refcount-bits\": 1" } },
        { "c2m", "cluster_size=2M", (9 << 20) + 4096, false, ORDER_ASCENDING, false,
          { "\"cluster-size\": 2097152" } },
        { "rc64-lazy", "refcount_bits=64,lazy_refcounts=on", 4 << 20, false,
          ORDER_WINDOW_SHUFFLE, false,
          { "\"refcount-bits\": 64", "\"lazy-refcounts\": true" } },
        { "rc2", "refcount_bits=2,cluster_size=16K", 4 << 20, false, ORDER_ASCENDING, false,
          { "\"refcount-bits\": 2" } },
        { "extl2", "extended_l2=on,cluster_size=32K", (4 << 20) + 512, false,
          ORDER_WINDOW_SHUFFLE, false, { "\"extended-l2\": true" } },
        { "extl2-pre-meta", "extended_l2=on,preallocation=metadata,cluster_size=128K",
          (4 << 20) + 512, false, ORDER_WINDOW_SHUFFLE, false, { "\"extended-l2\": true" } },
        { "pre-meta", "preallocation=metadata", (4 << 20) + 512, false, ORDER_ASCENDING,
          false, { "\"compat\": \"1.1\"" } },
        { "pre-falloc", "preallocation=falloc,cluster_size=4K", 3 << 20, false,
          ORDER_WINDOW_SHUFFLE, false, { "\"cluster-size\": 4096" } },
        { "pre-full-v2", "preallocation=full,compat=0.10", 3 << 20, false, ORDER_ASCENDING,
          false, { "\"compat\": \"0.10\"" } },
        { "zlib", NULL, 6 << 20, true, ORDER_ASCENDING, false,
          { "\"compression-type\": \"zlib\"" } },
        { "zlib-c512", "cluster_size=512", (2 << 20) + 512, true, ORDER_WINDOW_SHUFFLE, true,
          { "\"cluster-size\": 512" } },
        { "zlib-v2-odd", "compat=0.10,cluster_size=4K", (3 << 20) + 1536, true,
          ORDER_ASCENDING, false, { "\"compat\": \"0.10\"" } },
        { "zstd", "compression_type=zstd", (6 << 20) + 2560, true, ORDER_WINDOW_SHUFFLE, false,
          { "\"compression-type\": \"zstd\"" } },
        { "zstd-rc1", "compression_type=zstd,refcount_bits=1,cluster_size=16K", 4 << 20, true,
          ORDER_ASCENDING, false, { "\"refcount-bits\": 1" } },
        { "zstd-rc2-2m", "compression_type=zstd,refcount_bits=2,cluster_size=2M", 12 << 20,
          true, ORDER_ASCENDING, false, { "\"refcount-bits\": 2" } },
        { "zlib-extl2", "extended_l2=on", 4 << 20, true, ORDER_ASCENDING, false,
          { "\"extended-l2\": true" } },
        /* 512-byte clusters, two passes over 24 MiB: more L2 tables than the
         * cache holds, written out and read back when the second pass comes */
        { "evict", "cluster_size=512", 24 << 20, false, ORDER_TWO_PASS, false,
          { "\"cluster-size\": 512" } },
        { "evict-zstd", "cluster_size=512,compression_type=zstd", 12 << 20, true,
          ORDER_TWO_PASS, false, { "\"cluster-size\": 512" } },
    };

    /* subcluster writes in chunks of 1.5 clusters written out of order: a
     * write covers the rest of a cluster that already has its host cluster
     * and then a new one that is not next to it in the file */
    static const struct { struct mcase c; uint64_t chunk; } split[] = {
        { { "extl2-split", "extended_l2=on", (3 << 20) + 512, false, ORDER_WINDOW_SHUFFLE,
            false, { "\"extended-l2\": true" } }, 96 << 10 },
        { { "extl2-split-ioq", "extended_l2=on,cluster_size=16K", (2 << 20) + 1536, false,
            ORDER_WINDOW_SHUFFLE, true, { "\"extended-l2\": true" } }, 24 << 10 },
    };
    size_t n = sizeof(cases) / sizeof(cases[0]), nsplit = sizeof(split) / sizeof(split[0]);

    if (!have_qemu_img()) {
        printf("skipped: qemu-img not installed\n");
        return 77;
    }
    setup_tmpdir("qcow2w_images");
    for (size_t i = 0; i < n; i++)
        run_case(&cases[i], i + 1, 0);
    for (size_t i = 0; i < nsplit; i++)
        run_case(&split[i].c, n + i + 1, split[i].chunk);
    if (failures)
        fprintf(stderr, "%d checks failed\n", failures);
    else
        printf("all %zu cases passed\n", n + nsplit);
    return failures ? 1 : 0;
}
