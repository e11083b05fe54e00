/* Unit tests of the VMDK writer's pure pieces: the sparse layout against
 * qemu-img's numbers, header and marker encoders against the reader's
 * decoders, zlib streams (deflated and stored) against zlib's inflate, the
 * descriptor against the reader's parser, the -o options; and, through
 * the driver on a real file, that neither subformat writes its header
 * before finish(). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "formats/bd.h"
#include "formats/vmdk/format.h"
#include "formats/vmdk/write.h"
#include "io/bfile.h"
#include "util/diag.h"
#include "util/endian.h"
#include "util/kvopts.h"

#include "check.h"

static void test_layout(void)
{
    struct vmdkw_sparse_layout l;
    char err[256];

    /* qemu-img create -f vmdk x.vmdk 100M: rgd 21, gd 38, overhead 128 */
    CHECK(vmdkw_sparse_layout(204800, true, &l, err, sizeof(err)) == 0);
    CHECK(l.gt_count == 4 && l.gd_sectors == 1 && l.desc_offset == 1 && l.desc_sectors == 20);
    CHECK(l.rgd_offset == 21 && l.rgt_offset == 22 && l.gd_offset == 38 && l.gt_offset == 39);
    CHECK(l.overhead == 128);
    /* 3 TiB: gd 394005, overhead 788096 */
    CHECK(vmdkw_sparse_layout(6442450944ull, true, &l, err, sizeof(err)) == 0);
    CHECK(l.gt_count == 98304 && l.gd_sectors == 768);
    CHECK(l.gd_offset == 394005 && l.overhead == 788096);
    /* 1000 bytes (2 sectors): one table */
    CHECK(vmdkw_sparse_layout(2, true, &l, err, sizeof(err)) == 0);
    CHECK(l.gt_count == 1 && l.gd_offset == 26 && l.overhead == 128);
    /* empty */
    CHECK(vmdkw_sparse_layout(0, true, &l, err, sizeof(err)) == 0);
    CHECK(l.gt_count == 0 && l.overhead == 128);
    /* the limit, and one grain table past it */
    CHECK(vmdkw_sparse_layout(VMDKW_MAX_CAPACITY, true, &l, err, sizeof(err)) == 0);
    CHECK(l.gt_count == VMDK_MAX_GD_ENTRIES);
    CHECK(vmdkw_sparse_layout(VMDKW_MAX_CAPACITY + 1, true, &l, err, sizeof(err)) == -EFBIG);
    CHECK(strstr(err, "too large") != NULL);
}

static void test_header(void)
{
    struct vmdk4_header in = {
        .version = 3, .capacity = 12296, .grain_sectors = 128, .desc_offset = 1,
        .desc_sectors = 20, .gtes = 512, .rgd_offset = 0, .gd_offset = VMDK4_GD_AT_END,
        .overhead = 128, .compress = VMDK4_COMPRESS_DEFLATE,
        .flags = VMDK4_FLAG_NL_DETECT | VMDK4_FLAG_COMPRESSED | VMDK4_FLAG_MARKERS,
    }, out;
    uint8_t b[512];
    struct diag d;

    diag_init(&d);
    vmdkw_header_encode(&in, b);
    CHECK(vmdk4_header_decode(b, sizeof(b), &out, &d, "h", 0) == 0);
    CHECK(out.version == 3 && out.flags == 0x30001 && out.capacity == 12296);
    CHECK(out.grain_sectors == 128 && out.desc_offset == 1 && out.desc_sectors == 20);
    CHECK(out.gtes == 512 && out.gd_offset == VMDK4_GD_AT_END && out.overhead == 128);
    CHECK(out.compressed && out.markers && !out.zero_grain && !out.dirty);
    CHECK(memcmp(b + 73, "\n \r\n", 4) == 0);
    for (size_t i = 79; i < 512; i++)
        CHECK(b[i] == 0);

    uint8_t m[512];
    struct vmdk_marker mk;
    vmdkw_marker_encode(m, 4, VMDK_MARKER_GT);
    CHECK(vmdk_marker_decode(m, sizeof(m), 65536, &mk, &d, "m", 0) == 0);
    CHECK(!mk.is_grain && mk.type == VMDK_MARKER_GT && mk.value == 4);
    vmdkw_marker_encode(m, 0, VMDK_MARKER_EOS);
    for (size_t i = 0; i < 512; i++)
        CHECK(m[i] == 0);
}

static void fill(uint8_t *p, size_t n, unsigned kind)
{
    uint32_t x = 12345;
    for (size_t i = 0; i < n; i++) {
        x = x * 1103515245u + 12345u;
        p[i] = kind == 0 ? 0 : kind == 1 ? (uint8_t)"disk image grain "[i % 17]
                                         : (uint8_t)(x >> 24);
    }
}

/* inflate a zlib stream with zlib itself (header and Adler-32 checked) */
static bool inflates_to(const uint8_t *z, size_t zlen, const uint8_t *want, size_t n)
{
    uint8_t *out = malloc(n + 16);
    uLongf got = (uLongf)(n + 16);
    int r = uncompress(out, &got, z, (uLong)zlen);
    bool ok = r == Z_OK && got == n && memcmp(out, want, n) == 0;
    free(out);
    return ok;
}

static void test_zlib(void)
{
    static const size_t lens[] = { 0, 1, 511, 512, 4096, 65534, 65535, 65536, 65537, 200000 };
    for (size_t li = 0; li < sizeof(lens) / sizeof(lens[0]); li++) {
        size_t n = lens[li], cap = vmdkw_zlib_stored_bound(n);
        uint8_t *in = malloc(n + 1), *z = malloc(cap + n + 64);
        for (unsigned kind = 0; kind < 3; kind++) {
            fill(in, n, kind);
            ssize_t s = vmdkw_zlib_stored(in, n, z, cap);
            CHECK(s > 0 && (size_t)s == cap);
            CHECK(s > 0 && inflates_to(z, (size_t)s, in, n));
            CHECK(vmdkw_zlib_stored(in, n, z, cap - 1) == -ENOSPC);
            ssize_t c = vmdkw_deflate(in, n, z, cap + n + 64);
            if (kind == 2 && n >= 4096)
                CHECK(c == 0);          /* random bytes: stored instead */
            if (kind < 2 && n >= 4096)
                CHECK(c > 0 && (size_t)c < n / 4);
            CHECK(c >= 0 && (size_t)c < (n ? n : 1));
            if (c > 0) {
                CHECK(inflates_to(z, (size_t)c, in, n));
                /* the header says "deflate, 32 KiB window", FCHECK holds */
                CHECK(z[0] == 0x78 && (z[0] * 256 + z[1]) % 31 == 0);
            }
            /* no room: 0 (store it), never an overrun */
            if (n >= 4096 && kind == 1)
                CHECK(vmdkw_deflate(in, n, z, 8) == 0);
        }
        free(in);
        free(z);
    }
}

static void test_descriptor(void)
{
    struct vmdkw_params p;
    struct bd_create_opts co = { .size = 10 * 1024 * 1024 + 1 };
    struct kvopts kv = { 0 };
    char err[256], buf[10240];
    struct vmdk_desc desc;
    struct diag d;

    diag_init(&d);
    kvopts_parse(&kv, "adapter_type=lsilogic,hwversion=14,toolsversion=12345", err, sizeof(err));
    CHECK(vmdkw_parse_params(&kv, &co, &p, err, sizeof(err)) == 0);
    CHECK(kvopts_unused(&kv) == NULL);
    CHECK(p.capacity == 20481 && p.sub == VMDKW_MONOLITHIC_SPARSE);
    ssize_t n = vmdkw_descriptor(&p, 0x1234abcd, "RW 20481 SPARSE \"x.vmdk\"\n", buf, sizeof(buf));
    CHECK(n > 0 && (size_t)n == strlen(buf));
    CHECK(vmdk_desc_parse(buf, (size_t)n, &desc, &d, "x.vmdk", 0) == 0);
    CHECK(desc.cid == 0x1234abcd && desc.has_parent_cid && desc.parent_cid == 0xffffffff);
    CHECK(desc.create_type && strcmp(desc.create_type, "monolithicSparse") == 0);
    CHECK(desc.n_ext == 1 && desc.ext[0].sectors == 20481 && desc.ext[0].type == VMDK_EXT_SPARSE);
    CHECK(desc.adapter_type && strcmp(desc.adapter_type, "lsilogic") == 0);
    CHECK(desc.hw_version && strcmp(desc.hw_version, "14") == 0);
    /* qemu's geometry: 20481 / (255 * 63) = 1 cylinder */
    CHECK(strstr(buf, "ddb.geometry.cylinders = \"1\"\n") && strstr(buf, "ddb.geometry.heads = \"255\""));
    CHECK(strstr(buf, "ddb.toolsVersion = \"12345\"\n"));
    vmdk_desc_free(&desc);
    CHECK(vmdkw_descriptor(&p, 1, "RW 1 SPARSE \"x\"\n", buf, 100) == -ENOSPC);
    kvopts_free(&kv);

    /* defaults: ide (16 heads), hardware version 4, tools 2147483647 */
    CHECK(vmdkw_parse_params(NULL, &co, &p, err, sizeof(err)) == 0);
    CHECK(strcmp(p.adapter, "ide") == 0 && strcmp(p.hwversion, "4") == 0 &&
          strcmp(p.toolsversion, "2147483647") == 0 && !p.zeroed_grain && !p.compat6);

    static const struct { const char *o; int r; const char *msg; } bad[] = {
        { "subformat=foo", -EINVAL, "invalid parameter value: foo" },
        { "adapter_type=scsi", -EINVAL, "invalid parameter value: scsi" },
        { "compat6=on,hwversion=7", -EINVAL, "compat6 cannot be enabled with hwversion set" },
        { "compat6=maybe", -EINVAL, "compat6" },
        { "toolsversion=a\"b", -EINVAL, "cannot go into the descriptor" },
        { "hwversion=", -EINVAL, "1 to 64 characters" },
        { "backing_fmt=qcow2", -EINVAL, "backing_file must be a vmdk image" },
        { "backing_file=base.vmdk,subformat=monolithicFlat", -EINVAL,
          "Flat image can't have backing file" },
        { "backing_file=a\"b.vmdk", -EINVAL, "cannot go into the descriptor" },
        { "backing_file=base.vmdk", 0, NULL },
        { "compat6=on", 0, NULL },
        { "compat6=on,hwversion=undefined", 0, NULL },
        { "zeroed_grain=on,subformat=streamOptimized", 0, NULL },
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        struct kvopts o = { 0 };
        CHECK(kvopts_parse(&o, bad[i].o, err, sizeof(err)) == 0);
        err[0] = 0;
        int r = vmdkw_parse_params(&o, &co, &p, err, sizeof(err));
        if (r != bad[i].r || (bad[i].msg && !strstr(err, bad[i].msg))) {
            fprintf(stderr, "-o %s: got %d '%s', want %d '%s'\n", bad[i].o, r, err,
                    bad[i].r, bad[i].msg ? bad[i].msg : "");
            failures++;
        }
        kvopts_free(&o);
    }
    CHECK(vmdkw_parse_params(NULL, &co, &p, err, sizeof(err)) == 0 && !p.compat6);
    struct kvopts o6 = { 0 };
    kvopts_parse(&o6, "compat6=on", err, sizeof(err));
    CHECK(vmdkw_parse_params(&o6, &co, &p, err, sizeof(err)) == 0 && strcmp(p.hwversion, "6") == 0);
    kvopts_free(&o6);
    /* too large */
    struct bd_create_opts big = { .size = (VMDKW_MAX_CAPACITY + 1) * 512 };
    CHECK(vmdkw_parse_params(NULL, &big, &p, err, sizeof(err)) == -EFBIG);

    /* create's "Formatting" options, in qemu-img's order */
    struct kvopts f = { 0 };
    kvopts_parse(&f, "subformat=streamOptimized,zeroed_grain=yes,adapter_type=ide", err, sizeof(err));
    struct bd_create_opts fc = { .size = 1048576, .o = &f };
    vmdkw_describe_create(&fc, buf, sizeof(buf));
    CHECK(strcmp(buf, " size=1048576 adapter_type=ide compat6=off hwversion=undefined "
                      "subformat=streamOptimized zeroed_grain=on") == 0);
    fc.backing_file = "b.vmdk";
    fc.backing_fmt = "vmdk";
    vmdkw_describe_create(&fc, buf, sizeof(buf));
    CHECK(strcmp(buf, " size=1048576 adapter_type=ide backing_file=b.vmdk backing_fmt=vmdk "
                      "compat6=off hwversion=undefined subformat=streamOptimized "
                      "zeroed_grain=on") == 0);
    kvopts_free(&f);
}

static void done_cb(void *opaque, int res)
{
    *(int *)opaque += res < 0 ? 100 : 1;
}

/* The file carries no magic until finish() (header written last). */
static void test_header_last(const char *sub)
{
    char path[] = "/tmp/vmdkw_unit_XXXXXX";
    int fd = mkstemp(path);
    struct bfile *f;
    struct bd *bd;
    struct diag d;
    struct kvopts kv = { 0 };
    char err[256], o[64];
    uint8_t head[4] = { 0 };
    int calls = 0;

    diag_init(&d);
    CHECK(fd >= 0);
    snprintf(o, sizeof(o), "subformat=%s", sub);
    kvopts_parse(&kv, o, err, sizeof(err));
    CHECK(bfile_from_fd(&f, fd, path, true, &d) == 0);
    struct bd_create_opts co = { .size = 3 * 65536 + 1000, .o = &kv };
    CHECK(vmdkw_create(&bd, f, &co, &d) == 0);
    uint8_t *buf = aligned_alloc(4096, 4 * 65536);
    fill(buf, 4 * 65536, 1);
    CHECK(bd->drv->pwrite(bd, buf, 65536, 0, done_cb, &calls) == 0);
    CHECK(bd->drv->pwrite(bd, buf, 65536 + 1000, 2 * 65536, done_cb, &calls) == 0);
    CHECK(calls == 2);
    /* out of order: the stream refuses it, the sparse writer takes it */
    int r = bd->drv->pwrite(bd, buf, 65536, 65536, done_cb, &calls);
    CHECK(strcmp(sub, "streamOptimized") == 0 ? r < 0 : r == 0);
    if (r < 0) {
        CHECK(strstr(d.what, "out of order") != NULL);
        bd->drv->abort(bd);
    } else {
        CHECK(pread(fd, head, 4, 0) == 4 && le32_get(head) != VMDK4_MAGIC);
        CHECK(bd->drv->finish(bd) == 0);
        CHECK(pread(fd, head, 4, 0) == 4 && le32_get(head) == VMDK4_MAGIC);
    }
    bd_close(bd);
    if (strcmp(sub, "streamOptimized") == 0) {
        /* and in order it gets its header only at finish */
        CHECK(bfile_open(&f, path, BFILE_O_RDWR, &d) == 0);
        calls = 0;
        CHECK(vmdkw_create(&bd, f, &co, &d) == 0);
        CHECK((bd->drv->caps & (BD_CAP_ALL_COMPRESSED | BD_CAP_IN_ORDER)) ==
              (BD_CAP_ALL_COMPRESSED | BD_CAP_IN_ORDER));
        CHECK(bd->drv->pwrite(bd, buf, 65536, 0, done_cb, &calls) == 0);
        ssize_t c = bd->drv->compress(bd, buf, 65536 + 1000, buf + 2 * 65536, 65536);
        CHECK(c == -EINVAL);    /* more than a grain */
        c = bd->drv->compress(bd, buf, 1000, buf + 2 * 65536, 65536);
        CHECK(c > 0);
        CHECK(bd->drv->pwrite_compressed(bd, buf + 2 * 65536, (size_t)c, 3 * 65536, done_cb,
                                         &calls) == 0);
        CHECK(calls == 2);
        int fd2 = open(path, O_RDONLY);
        CHECK(pread(fd2, head, 4, 0) <= 4 && le32_get(head) != VMDK4_MAGIC);
        CHECK(bd->drv->finish(bd) == 0);
        CHECK(pread(fd2, head, 4, 0) == 4 && le32_get(head) == VMDK4_MAGIC);
        close(fd2);
        bd_close(bd);
    }
    free(buf);
    kvopts_free(&kv);
    unlink(path);
}

/* bd_create_opts.add_file for the tests: the file at PATH.tmp, renamed by
 * commit_files() */
static char added[8][4200];
static int n_added;

static int add_file(void *opaque, const char *path, struct bfile **f, const char **tmp,
                    struct diag *d)
{
    (void)opaque;
    if (n_added == 8)
        return -ENOSPC;
    snprintf(added[n_added], sizeof(added[0]), "%s.tmp", path);
    unlink(added[n_added]);
    int r = bfile_open(f, added[n_added], BFILE_O_CREATE, d);
    if (r == 0)
        *tmp = added[n_added++];
    return r;
}

static void commit_files(void)
{
    for (int i = 0; i < n_added; i++) {
        char fin[4200];
        snprintf(fin, sizeof(fin), "%.*s", (int)strlen(added[i]) - 4, added[i]);
        CHECK(rename(added[i], fin) == 0);
    }
    n_added = 0;
}

/* Write, finish, read back with the reader: `pieces` writes of `len` at
 * `offs`, then compare the whole image with what was written. */
static void write_and_read(const char *o, uint64_t size, const uint64_t *offs, size_t pieces,
                           size_t len)
{
    char dir[] = "/tmp/vmdkw_unit_dir_XXXXXX", path[4200], err[256];
    struct kvopts kv = { 0 };
    struct bfile *f;
    struct bd *bd, *rd;
    struct diag d;
    int calls = 0;

    diag_init(&d);
    CHECK(mkdtemp(dir) != NULL);
    snprintf(path, sizeof(path), "%s/x.vmdk", dir);
    kvopts_parse(&kv, o, err, sizeof(err));
    CHECK(bfile_open(&f, path, BFILE_O_CREATE, &d) == 0);
    struct bd_create_opts co = { .size = size, .o = &kv, .add_file = add_file };
    int r = vmdkw_create(&bd, f, &co, &d);
    CHECK(r == 0);
    if (r < 0) {
        fprintf(stderr, "%s: %s\n", o, d.what);
        bfile_close(f);
        kvopts_free(&kv);
        return;
    }
    uint8_t *buf = aligned_alloc(4096, len), *got = malloc(len);
    for (size_t i = 0; i < pieces; i++) {
        fill(buf, len, 2);
        buf[0] = (uint8_t)i;
        CHECK(bd->drv->pwrite(bd, buf, len, offs[i], done_cb, &calls) == 0);
    }
    CHECK(calls == (int)pieces);
    CHECK(bd->drv->finish(bd) == 0);
    bd_close(bd);
    commit_files();
    struct bd_open_opts oo = { .format = "vmdk" };
    CHECK(bd_open(&rd, path, &oo, &d) == 0);
    if (rd) {
        CHECK(rd->size == (size + 511) / 512 * 512);
        for (size_t i = 0; i < pieces; i++) {
            fill(buf, len, 2);
            buf[0] = (uint8_t)i;
            CHECK(bd_pread(rd, got, len, offs[i]) == 0 && memcmp(got, buf, len) == 0);
        }
        /* and zeros between the pieces */
        CHECK(bd_pread(rd, got, 512, offs[0] + len) == 0);
        for (int i = 0; i < 512; i++)
            CHECK(got[i] == 0 || offs[0] + len == offs[1]);
        bd_close(rd);
    }
    free(buf);
    free(got);
    kvopts_free(&kv);
    char cmd[4300];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    CHECK(system(cmd) == 0);
}

static void test_write_paths(void)
{
    const uint64_t G2 = UINT64_C(2) << 30, G = 65536;
    /* one write across the 2 GiB boundary between two extents (split) */
    uint64_t across[] = { G2 - 2 * G, G2 + 8 * G };
    write_and_read("subformat=twoGbMaxExtentFlat", G2 + 16 * G, across, 2, 4 * G);
    write_and_read("subformat=twoGbMaxExtentSparse", G2 + 16 * G, across, 2, 4 * G);
    /* monolithicSparse: grain tables evicted from the 64-slot cache and
     * needed again (written back, then read) */
    uint64_t back[80];
    for (int i = 0; i < 70; i++)
        back[i] = (uint64_t)i * 32 * 1024 * 1024;        /* one per grain table */
    for (int i = 70; i < 80; i++)
        back[i] = (uint64_t)(i - 70) * 32 * 1024 * 1024 + 5 * G;   /* come back */
    write_and_read("subformat=monolithicSparse", 70ull * 32 * 1024 * 1024, back, 80, G);
}

int main(void)
{
    test_layout();
    test_header();
    test_zlib();
    test_descriptor();
    test_header_last("monolithicSparse");
    test_header_last("streamOptimized");
    test_write_paths();
    if (failures) {
        fprintf(stderr, "%d failures\n", failures);
        return 1;
    }
    printf("test_vmdkw_format: ok\n");
    return 0;
}
