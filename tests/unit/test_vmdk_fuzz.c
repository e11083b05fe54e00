/* Mutation test of the VMDK reader: small synthetic images (hosted sparse
 * with an embedded descriptor and zeroed grains; streamOptimized with the
 * grain directory in the footer) get random bytes changed, then are opened
 * from memory and read.  Every outcome must be a clean success or a
 * recorded error: no crash, no sanitizer report, no unbounded work. */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "formats/bd.h"
#include "io/bfile.h"
#include "util/diag.h"
#include "util/endian.h"

#include "check.h"

#define GRAIN 65536u
#define NGRAINS 24u
#define CAP_SECTORS (NGRAINS * GRAIN / 512)

static uint64_t rs = 88172645463325252ull;
static uint64_t rnd(void)
{
    rs ^= rs << 13;
    rs ^= rs >> 7;
    rs ^= rs << 17;
    return rs;
}

static void header(uint8_t *b, uint32_t flags, uint64_t gd, uint16_t compress)
{
    memset(b, 0, 512);
    le32_put(b, 0x564d444b);
    le32_put(b + 4, 3);
    le32_put(b + 8, flags);
    le64_put(b + 12, CAP_SECTORS);
    le64_put(b + 20, GRAIN / 512);
    le64_put(b + 28, 1);
    le64_put(b + 36, 20);
    le32_put(b + 44, 512);
    le64_put(b + 56, gd);
    le64_put(b + 64, 128);
    memcpy(b + 73, "\n \r\n", 4);
    le16_put(b + 77, compress);
}

static const char desc[] = "# Disk DescriptorFile\nversion=1\nCID=12345678\n"
                           "parentCID=ffffffff\ncreateType=\"monolithicSparse\"\n"
                           "RW 3072 SPARSE \"x.vmdk\"\n";

static void fill_grain(uint8_t *g, unsigned i)
{
    for (unsigned k = 0; k < GRAIN; k++)
        g[k] = (uint8_t)(i * 31 + (k % 251) + (k / 4096));
}

/* hosted sparse: GD at 21, GT at 22, grains from sector 128 */
static size_t make_sparse(uint8_t *f)
{
    uint8_t *p = f;
    memset(f, 0, 128 * 512);
    header(p, 0x7, 21, 0);
    memcpy(p + 512, desc, sizeof(desc) - 1);
    le32_put(p + 21 * 512, 22);
    size_t next = 128;
    for (unsigned i = 0; i < NGRAINS; i++) {
        uint32_t e = 0;
        if (i % 5 == 1)
            e = 1;                       /* zeroed grain */
        else if (i % 5 != 3) {
            e = (uint32_t)next;
            fill_grain(f + next * 512, i);
            next += GRAIN / 512;
        }
        le32_put(p + 22 * 512 + 4 * i, e);
    }
    return next * 512;
}

/* streamOptimized: grains from 128, then GT marker+GT, GD marker+GD,
 * footer marker+footer, EOS; the header says "GD at the end" */
static size_t make_stream(uint8_t *f)
{
    uint8_t *g = malloc(GRAIN);
    uint32_t gt[512] = { 0 };
    size_t pos = 128 * 512;

    memset(f, 0, pos);
    header(f, 0x30001, UINT64_MAX, 1);
    memcpy(f + 512, desc, sizeof(desc) - 1);
    for (unsigned i = 0; i < NGRAINS; i++) {
        if (i % 4 == 2)
            continue;
        fill_grain(g, i);
        uLongf clen = GRAIN + 1024;
        compress2(f + pos + 12, &clen, g, GRAIN, 1);
        le64_put(f + pos, (uint64_t)i * (GRAIN / 512));
        le32_put(f + pos + 8, (uint32_t)clen);
        gt[i] = (uint32_t)(pos / 512);
        size_t rec = (12 + clen + 511) / 512 * 512;
        memset(f + pos + 12 + clen, 0, rec - 12 - clen);
        pos += rec;
    }
    memset(f + pos, 0, 512);
    le64_put(f + pos, 4);
    le32_put(f + pos + 12, 1);
    pos += 512;
    size_t gt_at = pos / 512;
    for (unsigned i = 0; i < 512; i++)
        le32_put(f + pos + 4 * i, gt[i]);
    pos += 2048;
    memset(f + pos, 0, 512);
    le64_put(f + pos, 1);
    le32_put(f + pos + 12, 2);
    pos += 512;
    size_t gd_at = pos / 512;
    memset(f + pos, 0, 512);
    le32_put(f + pos, (uint32_t)gt_at);
    pos += 512;
    memset(f + pos, 0, 512);
    le64_put(f + pos, 1);
    le32_put(f + pos + 12, 3);
    pos += 512;
    header(f + pos, 0x30001, gd_at, 1);
    pos += 512;
    memset(f + pos, 0, 512);
    pos += 512;
    free(g);
    return pos;
}

/* Open and read; returns 0 on success, -errno on a (recorded) error. */
static int read_all(const uint8_t *img, size_t len, uint8_t *out, size_t outcap,
                    uint64_t *size)
{
    struct bd_open_opts o = { .format = NULL, .no_external_files = true };
    struct bfile *f;
    struct bd *bd;
    struct diag d;
    int r;

    diag_init(&d);
    r = bfile_open_mem(&f, "x.vmdk", img, len, &d);
    if (r < 0)
        return r;
    r = bd_open_bfile(&bd, f, &o, NULL, &d);
    if (r < 0) {
        CHECK(d.err < 0 && d.what[0]);
        return r;
    }
    *size = bd->size;
    uint64_t lim = bd->size < outcap ? bd->size : outcap;
    unsigned steps = 0;
    for (uint64_t off = 0; off < lim && steps < 4096; steps++) {
        struct bd_extent e;
        r = bd_block_status(bd, off, lim - off, &e);
        if (r < 0)
            break;
        CHECK(e.len > 0 && e.len <= lim - off);
        if (e.flags & BD_DATA)
            r = bd_pread(bd, out + off, (size_t)e.len, off);
        else
            memset(out + off, 0, (size_t)e.len);
        if (r < 0)
            break;
        off += e.len;
    }
    if (r < 0)
        CHECK(d.err < 0 && d.what[0]);
    bd_close(bd);
    return r;
}

/* --- the same through a pipe (stream mode: the reader thread) ------------- */

struct feed {
    int fd;
    const uint8_t *p;
    size_t n;
};

static void *feeder(void *arg)
{
    struct feed *f = arg;
    size_t done = 0;
    while (done < f->n) {
        ssize_t w = write(f->fd, f->p + done, f->n - done);
        if (w <= 0)
            break;      /* the reader stopped early (EPIPE) */
        done += (size_t)w;
    }
    close(f->fd);
    return NULL;
}

static int read_pipe(const uint8_t *img, size_t len, uint8_t *out, size_t outcap)
{
    struct bd_open_opts o = { .format = NULL, .no_external_files = true };
    struct bfile *f;
    struct bd *bd;
    struct diag d;
    int fds[2], r;
    pthread_t t;

    if (pipe(fds) < 0)
        return -1;
    struct feed fe = { .fd = fds[1], .p = img, .n = len };
    pthread_create(&t, NULL, feeder, &fe);
    diag_init(&d);
    r = bfile_from_fd(&f, fds[0], "(pipe)", false, &d);
    if (r == 0)
        r = bd_open_bfile(&bd, f, &o, NULL, &d);
    if (r == 0) {
        uint64_t lim = bd->size < outcap ? bd->size : outcap;
        for (uint64_t off = 0; off < lim && r == 0;) {
            struct bd_extent e;
            r = bd_block_status(bd, off, lim - off, &e);
            if (r == 0 && (e.flags & BD_DATA))
                r = bd_pread(bd, out + off, (size_t)e.len, off);
            else if (r == 0)
                memset(out + off, 0, (size_t)e.len);
            if (r == 0)
                off += e.len;
        }
        bd_close(bd);
    }
    if (r < 0)
        CHECK(d.err < 0 && d.what[0]);
    pthread_join(t, NULL);
    return r;
}

static void pipe_mutants(const uint8_t *orig, size_t len, unsigned iters)
{
    uint8_t *img = malloc(len), *out = malloc(NGRAINS * GRAIN), *g = malloc(GRAIN);
    unsigned ok = 0;

    CHECK(read_pipe(orig, len, out, NGRAINS * GRAIN) == 0);
    for (unsigned i = 0; i < NGRAINS; i++) {
        if (i % 4 != 2)
            fill_grain(g, i);
        else
            memset(g, 0, GRAIN);
        CHECK(memcmp(out + (size_t)i * GRAIN, g, GRAIN) == 0);
    }
    for (unsigned it = 0; it < iters; it++) {
        memcpy(img, orig, len);
        for (unsigned k = 0; k < 3; k++)
            img[rnd() % len] = (uint8_t)rnd();
        size_t cut = rnd() % 8 == 0 ? rnd() % len : len;
        if (read_pipe(img, cut, out, NGRAINS * GRAIN) == 0)
            ok++;
    }
    printf("  %u of %u mutants read from a pipe without error\n", ok, iters);
    free(img);
    free(out);
    free(g);
}

static void check_clean(const uint8_t *img, size_t len, bool stream)
{
    uint8_t *out = malloc(NGRAINS * GRAIN), *g = malloc(GRAIN);
    uint64_t size = 0;

    CHECK(read_all(img, len, out, NGRAINS * GRAIN, &size) == 0);
    CHECK(size == (uint64_t)CAP_SECTORS * 512);
    for (unsigned i = 0; i < NGRAINS; i++) {
        bool present = stream ? i % 4 != 2 : (i % 5 != 1 && i % 5 != 3);
        if (present)
            fill_grain(g, i);
        else
            memset(g, 0, GRAIN);
        if (memcmp(out + (size_t)i * GRAIN, g, GRAIN) != 0) {
            fprintf(stderr, "%s image: grain %u differs\n", stream ? "stream" : "sparse", i);
            failures++;
        }
    }
    free(out);
    free(g);
}

static void mutate_and_read(const uint8_t *orig, size_t len, unsigned iters, size_t hot)
{
    uint8_t *img = malloc(len), *out = malloc(4u << 20);
    unsigned ok = 0;

    for (unsigned it = 0; it < iters; it++) {
        memcpy(img, orig, len);
        unsigned n = 1 + (unsigned)(rnd() % 4);
        for (unsigned k = 0; k < n; k++) {
            size_t at = rnd() % 3 ? rnd() % hot : rnd() % len;
            switch (rnd() % 4) {
            case 0: img[at] = (uint8_t)rnd(); break;
            case 1: img[at] ^= (uint8_t)(1u << (rnd() % 8)); break;
            case 2: img[at] = 0xff; break;
            default: img[at] = 0; break;
            }
        }
        size_t cut = rnd() % 16 == 0 ? rnd() % len : len;
        uint64_t size;
        if (read_all(img, cut, out, 4u << 20, &size) == 0)
            ok++;
    }
    printf("  %u of %u mutants read without error\n", ok, iters);
    free(img);
    free(out);
}

int main(void)
{
    size_t cap = 128 * 512 + NGRAINS * (GRAIN + 2048) + 16384;
    uint8_t *sp = calloc(1, cap), *st = calloc(1, cap);
    size_t splen = make_sparse(sp), stlen = make_stream(st);

    check_clean(sp, splen, false);
    check_clean(st, stlen, true);
    mutate_and_read(sp, splen, 3000, 24 * 512);
    mutate_and_read(st, stlen, 2000, stlen);

    signal(SIGPIPE, SIG_IGN);
    pipe_mutants(st, stlen, 300);

    /* a descriptor file (ZERO extents only: no other file may be opened) */
    static const char dtext[] =
        "# Disk DescriptorFile\r\nversion=1\nCID=fffffffe\nparentCID=ffffffff\n"
        "createType=\"monolithicFlat\"\n\n# Extent description\nRW 2048 ZERO\n"
        "RDONLY 100 ZERO\nnoaccess 7 zero\nRW 4 FLAT \"x.bin\" 0\n\nddb.adapterType = \"ide\"\n";
    uint8_t *out = malloc(4u << 20);
    uint64_t size = 0;
    CHECK(read_all((const uint8_t *)dtext, 160, out, 4u << 20, &size) == 0);
    CHECK(size == 2155 * 512);
    CHECK(read_all((const uint8_t *)dtext, sizeof(dtext) - 1, out, 4u << 20, &size) < 0);
    free(out);
    mutate_and_read((const uint8_t *)dtext, 160, 3000, 160);
    free(sp);
    free(st);
    if (failures) {
        fprintf(stderr, "%d check(s) failed\n", failures);
        return 1;
    }
    printf("test_vmdk_fuzz: ok\n");
    return 0;
}
