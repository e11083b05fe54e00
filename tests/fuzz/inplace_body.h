/* The body of the `convert -n` fuzz targets (fuzz_qcow2_inplace,
 * fuzz_vhd_inplace, fuzz_vdi_inplace): each defines INPLACE_FMT, the
 * driver, and includes this.
 *
 * The input is the target image.  It goes into a memfd -- a real
 * descriptor, since the in-place writers open the image again by path
 * (/proc/self/fd/N) -- with every file it names refused.  Its first
 * MiB is then written granule by granule with data, zeros or compressed
 * data (where the writer compresses; chosen by the input's own bytes) and
 * committed.  Oracles, each an abort() the fuzzer reports:
 *   - an image our check finds corrupt must be refused before any write;
 *   - after a committed conversion, the image must check without
 *     corruptions and with no more leaks than before, and read back
 *     exactly what was written.
 */
#ifndef DISKIMG_FUZZ_INPLACE_BODY_H
#define DISKIMG_FUZZ_INPLACE_BODY_H

#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "fuzz_common.h"
#include "io/bfile.h"
#include "util/diag.h"

#define WRITE_BYTES (1u << 20)

static void check_image(const char *path, struct bd_check_result *res, int *ok)
{
    struct bd_open_opts o = fuzz_default_opts();
    struct diag d;
    struct bd *bd;

    *ok = 0;
    memset(res, 0, sizeof(*res));
    o.format = INPLACE_FMT;
    o.no_backing = true;
    diag_init(&d);
    if (bd_open(&bd, path, &o, &d) < 0)
        return;
    if (bd->drv->check && bd->drv->check(bd, res, 0) == 0)
        *ok = 1;
    bd_close(bd);
}

static uint8_t pattern(uint64_t off, uint8_t salt)
{
    return (uint8_t)((off >> 9) * 31 + (off & 0x1ff) + salt);
}

/* A write's completion: its result into *opaque (the first error). */
static void note_done(void *opaque, int res)
{
    int *r = opaque;

    if (res < 0 && *r == 0)
        *r = res;
}

/* Write [0, size) of `out` cluster by cluster; expected content to `want`. */
static int fill(struct bd *out, uint64_t size, const uint8_t *data, size_t n, uint8_t *want)
{
    uint32_t cs = out->granule;
    uint8_t *buf = malloc(cs), *cbuf = malloc(2 * (size_t)cs);
    int r = 0, late = 0;

    if (!buf || !cbuf) {
        free(buf);
        free(cbuf);
        return -1;
    }
    for (uint64_t off = 0, i = 0; r == 0 && off < size; off += cs, i++) {
        size_t len = size - off < cs ? (size_t)(size - off) : cs;
        uint8_t sel = n ? data[(i * 7) % n] : 0;
        if (sel % 3 == 1) {
            memset(want + off, 0, len);
            r = out->drv->write_zeroes(out, off, len);
            continue;
        }
        for (size_t k = 0; k < len; k++)
            buf[k] = sel % 5 == 0 ? 0x55 : pattern(off + k, sel);
        memcpy(want + off, buf, len);
        if (sel % 3 == 2 && out->drv->compress && out->drv->pwrite_compressed) {
            ssize_t c = out->drv->compress(out, buf, len, cbuf, 2 * (size_t)cs);
            if (c > 0) {
                r = out->drv->pwrite_compressed(out, cbuf, (size_t)c, off, note_done, &late);
                continue;
            }
        }
        r = out->drv->pwrite(out, buf, len, off, note_done, &late);
        if (r == 0)
            r = late;
    }
    free(buf);
    free(cbuf);
    return r;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct bd_open_opts oo = fuzz_default_opts();
    struct bd_check_result before, after;
    struct diag d;
    struct bd *bd, *out = NULL;
    struct bfile *f = NULL;
    char path[64];
    int fd, ok_before, ok_after;
    uint64_t vsize;

    /* the image's size, as the reader sees it (refused inputs end here) */
    oo.format = INPLACE_FMT;
    oo.no_backing = true;
    diag_init(&d);
    if (fuzz_open_mem(&bd, data, size, "fuzz." INPLACE_FMT, &oo, &d) < 0)
        return 0;
    vsize = bd->size;
    bd_close(bd);
    if (vsize == 0)
        return 0;

    fd = memfd_create("fuzz." INPLACE_FMT, MFD_CLOEXEC);
    if (fd < 0)
        return 0;
    if (write(fd, data, size) != (ssize_t)size) {
        close(fd);
        return 0;
    }
    snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
    check_image(path, &before, &ok_before);

    uint64_t n = vsize < WRITE_BYTES ? vsize : WRITE_BYTES;
    struct bd_create_opts co = { .size = n, .existing = true, .no_external_files = true };
    const struct bd_driver *drv = bd_find_driver(INPLACE_FMT);
    diag_init(&d);
    if (bfile_open(&f, path, BFILE_O_RDWR, &d) == 0 && drv->create(&out, f, &co, &d) == 0) {
        /* accepted: it must have been a sound image */
        if (!ok_before || before.corruptions || before.check_errors)
            abort();
        uint8_t *want = malloc(n), *got = malloc(n);
        int r = want && got ? fill(out, n, data, size, want) : -1;
        if (r == 0)
            r = out->drv->finish(out);
        else
            out->drv->abort(out);
        bd_close(out);
        f = NULL;
        if (r == 0) {
            check_image(path, &after, &ok_after);
            if (!ok_after || after.corruptions || after.check_errors ||
                after.leaks > before.leaks)
                abort();
            oo = fuzz_default_opts();
            oo.format = INPLACE_FMT;
            oo.no_backing = true;
            diag_init(&d);
            if (bd_open(&bd, path, &oo, &d) < 0)
                abort();
            if (bd_pread(bd, got, n, 0) < 0 || memcmp(want, got, n) != 0)
                abort();
            bd_close(bd);
        }
        free(want);
        free(got);
    }
    bfile_close(f);
    close(fd);
    return 0;
}

#endif
