/* qcow2 output to a stream, driven directly: pass 1 plans, pass 2 writes.
 * The output file is a regular file marked as a stream, so every write
 * must come in order (write(2), no offsets).  Checks:
 *   - the same content in both passes gives an image qemu-img checks clean
 *     and reads back as the data (plain, compressed, tight refcount widths,
 *     clusters a compressed cluster straddles, a short last cluster);
 *   - a cluster that was zero in pass 1 and has data in pass 2 fails with
 *     "changed", as does a compressed cluster of another length or one
 *     stored plain now; a planned cluster that does not come again reads
 *     as zeros;
 *   - writes out of order fail. */
#include "qcow2w_feed.h"

struct run_opts {
    const char *o;
    bool compress;
    const uint8_t *pass2;       /* content in pass 2 (NULL: the same) */
    bool swap;                  /* pass 2: write the first two data clusters swapped */
};

/* Open `path` as a stream output and create the qcow2 stream writer. */
static int open_stream(const char *path, uint64_t size, struct kvopts *kv, bool compress,
                       struct bd **bd, struct diag *d)
{
    struct bfile *f;
    int r;

    unlink(path);
    if ((r = bfile_open(&f, path, BFILE_O_RDWR | BFILE_O_CREATE, d)) < 0)
        return r;
    f->kind = BFILE_STREAM;     /* write(2) in order, as to a pipe */
    struct bd_create_opts co = { .size = size, .o = kv, .compress = compress };
    if ((r = bd_find_driver("qcow2")->create(bd, f, &co, d)) < 0)
        bfile_close(f);
    return r;
}

static void done_cb(void *opaque, int res)
{
    (void)opaque, (void)res;
}

/* One pass over `data`, cluster by cluster, as the convert pipeline does. */
static int one_pass(struct bd *bd, const uint8_t *data, uint64_t size, bool compress,
                    bool swap)
{
    uint64_t cs = bd->granule;
    uint8_t *cbuf = malloc(2 * cs);
    uint64_t first = UINT64_MAX;
    int r = 0;

    for (uint64_t off = 0; off < size && r == 0; off += cs) {
        size_t len = size - off < cs ? (size_t)(size - off) : cs;
        if (is_zero(data + off, len))
            continue;
        if (swap && first == UINT64_MAX) {
            first = off;    /* written after the next data cluster */
            continue;
        }
        ssize_t cl = compress ? bd->drv->compress(bd, data + off, len, cbuf, cs) : 0;
        if (cl < 0) {
            r = (int)cl;
            break;
        }
        if (cl > 0)
            r = bd->drv->pwrite_compressed(bd, cbuf, (size_t)cl, off, done_cb, NULL);
        else
            r = bd->drv->pwrite(bd, data + off, len, off, done_cb, NULL);
        if (swap && first != UINT64_MAX && r == 0) {
            r = bd->drv->pwrite(bd, data + first, cs, first, done_cb, NULL);
            swap = false;
        }
    }
    free(cbuf);
    return r;
}

/* Both passes; 0 or the error (message in d). */
static int stream(const char *path, const uint8_t *data, uint64_t size,
                  const struct run_opts *ro, struct diag *d)
{
    struct kvopts kv = { 0 };
    struct bd *bd = NULL;
    char err[256];
    int r;

    diag_init(d);
    if (ro->o && kvopts_parse(&kv, ro->o, err, sizeof(err)) < 0)
        return -EINVAL;
    if ((r = open_stream(path, size, &kv, ro->compress, &bd, d)) < 0)
        goto out;
    CHECK(bd->drv->next_pass != NULL, "stream writer without next_pass");
    r = one_pass(bd, data, size, ro->compress, false);
    if (r == 0 && (r = bd->drv->next_pass(bd)) == 1)
        r = one_pass(bd, ro->pass2 ? ro->pass2 : data, size, ro->compress, ro->swap);
    else if (r == 0)
        r = -EIO;
    if (r == 0)
        r = bd->drv->finish(bd);
    else
        bd->drv->abort(bd);
    bd->drv->close(bd);
out:
    kvopts_free(&kv);
    return r;
}

/* qemu-img's reading of the image equals `data`. */
static bool reads_back(const char *img, const uint8_t *data, uint64_t size)
{
    char raw[4200];
    snprintf(raw, sizeof(raw), "%s.raw", img);
    if (run("qemu-img convert -O raw '%s' '%s'", img, raw) != 0)
        return false;
    FILE *f = fopen(raw, "rb");
    uint8_t *got = malloc(size + 1);
    size_t n = f ? fread(got, 1, size + 1, f) : 0;
    bool same = n == size && memcmp(got, data, size) == 0;
    if (f)
        fclose(f);
    free(got);
    unlink(raw);
    return same;
}

int main(void)
{
    char path[4200];
    struct diag d;
    int r;

    setup_tmpdir("test_qcow2_stream");
    if (!have_qemu_img()) {
        printf("skipped: qemu-img not installed\n");
        return 77;
    }
    snprintf(path, sizeof(path), "%s/s.qcow2", tmpdir);

    /* consistent passes over mixed content */
    static const struct { const char *o; bool c; uint64_t size; } ok[] = {
        { NULL, false, 3u << 20 },
        { "cluster_size=4k", true, (3u << 20) + 1536 },
        { "cluster_size=4k,refcount_bits=1", true, 1u << 20 },
        { "cluster_size=512,refcount_bits=2", true, 300 * 1024 },
        { "cluster_size=16k,compression_type=zstd", true, 2u << 20 },
        { "extended_l2=on,cluster_size=32k", true, (2u << 20) + 512 },
        { "compat=0.10", false, 777 * 1024 },
    };
    for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
        uint8_t *data = malloc(ok[i].size);
        gen_data(data, ok[i].size, 40 + i, 96 * 1024);
        struct run_opts ro = { .o = ok[i].o, .compress = ok[i].c };
        r = stream(path, data, ok[i].size, &ro, &d);
        CHECK(r == 0, "%s: %s", ok[i].o ? ok[i].o : "defaults", d.what);
        if (r == 0) {
            CHECK(qcheck(path) == 0, "%s: qemu-img check", ok[i].o ? ok[i].o : "defaults");
            CHECK(reads_back(path, data, ok[i].size), "%s: content",
                  ok[i].o ? ok[i].o : "defaults");
        }
        free(data);
    }

    /* the source changes between the passes */
    uint64_t size = 1u << 20, cs = 65536;
    uint8_t *a = calloc(1, size), *b = malloc(size);
    for (uint64_t i = 0; i < size; i += 2 * cs)
        memset(a + i, 0x5a, cs);            /* data in every other cluster */
    memcpy(b, a, size);
    memset(b + cs, 0x33, 100);              /* a zero cluster gets data */
    struct run_opts ro = { .pass2 = b };
    r = stream(path, a, size, &ro, &d);
    CHECK(r < 0 && strstr(d.what, "changed"), "zero -> data not caught (%d: %s)", r, d.what);

    memcpy(b, a, size);
    memset(b + 4 * cs, 0, cs);              /* a data cluster becomes zeros */
    r = stream(path, a, size, &ro, &d);
    CHECK(r == 0, "data -> zero: %s", d.what);
    if (r == 0) {
        CHECK(qcheck(path) == 0, "data -> zero: qemu-img check");
        CHECK(reads_back(path, b, size), "data -> zero: reads as pass 2's content");
    }

    /* compressed: another length in pass 2, or stored plain now */
    gen_data(a, size, 7, 32 * 1024);
    for (uint64_t i = 0; i < size; i += cs)
        memset(a + i, 'x', cs / 2);         /* every cluster compresses */
    memcpy(b, a, size);
    memset(b + 3 * cs, 'y', cs);            /* compresses much better now */
    ro = (struct run_opts){ .compress = true, .pass2 = b };
    r = stream(path, a, size, &ro, &d);
    CHECK(r < 0 && strstr(d.what, "changed"), "compressed length not caught (%s)", d.what);
    memcpy(b, a, size);
    rng = 99;
    for (uint64_t i = 0; i < cs; i++)
        b[5 * cs + i] = (uint8_t)rnd();     /* does not compress now */
    r = stream(path, a, size, &ro, &d);
    CHECK(r < 0 && strstr(d.what, "changed"), "compressed -> plain not caught (%s)", d.what);

    /* writes out of order */
    memset(a, 0x11, size);
    ro = (struct run_opts){ .swap = true };
    r = stream(path, a, size, &ro, &d);
    CHECK(r < 0, "out-of-order writes accepted");

    free(a);
    free(b);
    if (failures)
        fprintf(stderr, "%d checks failed\n", failures);
    else
        printf("qcow2 stream: all checks passed\n");
    return failures ? 1 : 0;
}
