/* Fuzz target: `resize` (grow) and `resize --shrink` of a hostile qcow2
 * image (formats/qcow2/resize.c, formats/qcow2/refcount.c).
 *
 * The input is the image; two of its bytes choose a larger and a smaller
 * virtual size (by a little, by a cluster or an L2 table's worth, to an
 * odd size inside a cluster, to many times the size).  Each resize works
 * on its own copy in a memfd (resize opens the image by path) with every
 * file it names refused.  Oracles, each an abort() the fuzzer reports:
 *   - a resize that fails must leave the image's bytes as they were;
 *   - one that succeeds leaves an image that opens with the new size and
 *     checks without check errors, with no more corruptions or leaks than
 *     before, and reads as zeros past the old size;
 *   - the guest data that read without an error before reads the same
 *     below the smaller of the two sizes.
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fuzz_common.h"
#include "io/bfile.h"
#include "util/diag.h"

static int check_path(const char *path, struct bd_check_result *res, uint64_t *size)
{
    struct diag d;
    struct bd *bd;
    int r;

    memset(res, 0, sizeof(*res));
    if ((r = fuzz_open_qcow2_path(&bd, path, false, &d)) < 0)
        return r;
    *size = bd->size;
    r = bd->drv->check(bd, res, 0);
    bd_close(bd);
    return r;
}

/* The new size `sel` picks for an image of `size` bytes: grow or shrink. */
static uint64_t pick(uint64_t size, uint8_t sel, bool grow)
{
    static const uint64_t steps[] = { 512, 65536 - 512, 1u << 20, 512u << 20, 1ull << 30 };
    uint64_t step = steps[(sel >> 3) % 5], n;

    if (grow) {
        if (sel & 4)    /* many times the size */
            return size < (1ull << 40) ? size << (1 + (sel & 3)) : size + step;
        n = size + step * (1 + (sel & 3));
        return n < size ? size : n;
    }
    if (sel & 4)        /* a fraction of it */
        n = size / 16 * (1 + (sel & 3) * 4) / 512 * 512;
    else
        n = size > step * (1 + (sel & 3)) ? size - step * (1 + (sel & 3)) : 512;
    return n ? n : 512;
}

static void resize(const uint8_t *data, size_t size, uint64_t new_size,
                   const struct bd_check_result *before, const struct fuzz_guest *g)
{
    struct bd_check_result after;
    struct diag d;
    struct bd *bd;
    char path[64];
    uint64_t vsize = g->size, got = 0;
    int fd = fuzz_memfd(data, size, path);

    if (fd < 0)
        return;
    int r = fuzz_open_qcow2_path(&bd, path, true, &d);
    if (r == 0) {
        r = bd->drv->resize(bd, new_size, new_size < vsize);
        if (r == 0)
            r = bfile_sync(bd->file);
        bd_close(bd);
    }
    if (r < 0) {
        if (!fuzz_memfd_same(fd, data, size)) {
            fprintf(stderr, "fuzz: resize %llu -> %llu failed (%s) and changed the image\n",
                    (unsigned long long)vsize, (unsigned long long)new_size, d.what);
            abort();
        }
    } else if (check_path(path, &after, &got) < 0 ? before->check_errors != INT64_MAX
               : got != new_size || after.check_errors > before->check_errors ||
                 after.corruptions > before->corruptions || after.leaks > before->leaks) {
        fprintf(stderr, "fuzz: after resize %llu -> %llu: size %llu, %lld corruptions "
                "(%lld before), %lld leaks (%lld), %lld check errors (%lld)\n",
                (unsigned long long)vsize, (unsigned long long)new_size,
                (unsigned long long)got, (long long)after.corruptions,
                (long long)before->corruptions, (long long)after.leaks,
                (long long)before->leaks, (long long)after.check_errors,
                (long long)before->check_errors);
        abort();
    }
    if (fuzz_open_qcow2_path(&bd, path, false, &d) < 0) {
        fprintf(stderr, "fuzz: the image does not open after resize: %s\n", d.what);
        abort();
    }
    fuzz_guest_verify(bd, g, r < 0 || new_size > vsize ? vsize : new_size);
    if (r == 0 && new_size > vsize) {
        /* the new range: its first and last sectors read as zeros */
        static uint8_t z[512];
        uint64_t at[2] = { vsize / 512 * 512, new_size - 512 };
        for (int i = 0; i < 2; i++) {
            uint8_t buf[512];
            size_t n = at[i] + 512 <= new_size ? 512 : (size_t)(new_size - at[i]);
            if (at[i] < vsize)
                continue;   /* (an odd old size: that sector holds old data) */
            if (bd_pread(bd, buf, n, at[i]) < 0 || memcmp(buf, z, n) != 0) {
                fprintf(stderr, "fuzz: grown range at %llu does not read as zeros\n",
                        (unsigned long long)at[i]);
                abort();
            }
        }
    }
    bd_close(bd);
    close(fd);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static struct fuzz_guest g;
    struct bd_open_opts oo = fuzz_default_opts();
    struct bd_check_result before;
    struct diag d;
    struct bd *bd;

    oo.format = "qcow2";
    oo.no_backing = true;
    diag_init(&d);
    if (size < 8 || fuzz_open_mem(&bd, data, size, "fuzz.qcow2", &oo, &d) < 0)
        return 0;
    fuzz_guest_record(bd, &g);
    memset(&before, 0, sizeof(before));
    if (bd->drv->check(bd, &before, 0) < 0)
        before.corruptions = before.check_errors = before.leaks = INT64_MAX;
    bd_close(bd);
    uint64_t vsize = g.size;
    uint8_t sel_grow = data[size - 1], sel_shrink = data[size - 2];
    uint64_t up = pick(vsize, sel_grow, true), down = pick(vsize, sel_shrink, false);
    if (up > vsize)
        resize(data, size, up, &before, &g);
    if (down < vsize)
        resize(data, size, down, &before, &g);
    return 0;
}
