/* Fuzz target: `check -r leaks` and `check -r all` on a hostile qcow2 image
 * (formats/qcow2/check.c, formats/qcow2/repair.c, formats/qcow2/refcount.c).
 *
 * The input is the image.  Each mode repairs its own copy in a memfd (the
 * repair opens the image by path) with every file it names refused, then
 * checks it again as the command does.  Oracles, each an abort() the
 * fuzzer reports:
 *   - a repair that fails (refused) must leave the image's bytes as they
 *     were;
 *   - a repair that succeeds leaves an image that opens and checks without
 *     leaks and with no more check errors than before, and that the same
 *     repair run again leaves byte for byte as it is (what it left, it
 *     cannot repair: reserved bits, a table that is also guest data, ...);
 *   - either way, the guest data that read without an error before reads
 *     the same afterwards (a repair never loses guest data).
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fuzz_common.h"
#include "util/diag.h"

static int check_path(const char *path, unsigned fix, struct bd_check_result *res)
{
    struct diag d;
    struct bd *bd;
    int r;

    memset(res, 0, sizeof(*res));
    if ((r = fuzz_open_qcow2_path(&bd, path, fix != 0, &d)) < 0)
        return r;
    r = bd->drv->check(bd, res, fix);
    if (r == 0 && fix && (res->leaks_fixed || res->corruptions_fixed)) {
        /* as cmd_check: check the repaired image afresh */
        struct bd_check_result fixed = *res;
        memset(res, 0, sizeof(*res));
        r = bd->drv->check(bd, res, 0);
        res->leaks_fixed = fixed.leaks_fixed;
        res->corruptions_fixed = fixed.corruptions_fixed;
    }
    bd_close(bd);
    return r;
}

static void repair(const uint8_t *data, size_t size, unsigned fix,
                   const struct bd_check_result *before, const struct fuzz_guest *g)
{
    struct bd_check_result res, after;
    struct diag d;
    struct bd *bd;
    char path[64];
    int fd = fuzz_memfd(data, size, path);

    if (fd < 0)
        return;
    int r = check_path(path, fix, &res);
    if (r < 0) {
        /* refused or failed: nothing written (the dirty bit restored) */
        if (!fuzz_memfd_same(fd, data, size)) {
            fprintf(stderr, "fuzz: check -r %s failed (%d) and changed the image\n",
                    fix & BD_CHECK_FIX_ERRORS ? "all" : "leaks", r);
            abort();
        }
    } else {
        if (check_path(path, 0, &after) < 0 ? before->check_errors != INT64_MAX
            : after.check_errors > before->check_errors || after.leaks) {
            fprintf(stderr, "fuzz: after check -r %s: %lld corruptions (%lld before), "
                    "%lld leaks, %lld check errors\n",
                    fix & BD_CHECK_FIX_ERRORS ? "all" : "leaks",
                    (long long)after.corruptions, (long long)before->corruptions,
                    (long long)after.leaks, (long long)after.check_errors);
            abort();
        }
        /* a fixed point: the same repair again changes nothing */
        uint64_t n1, n2, once = fuzz_memfd_digest(fd, &n1);
        check_path(path, fix, &res);
        if (fuzz_memfd_digest(fd, &n2) != once || n2 != n1) {
            fprintf(stderr, "fuzz: check -r %s repaired again what it had left\n",
                    fix & BD_CHECK_FIX_ERRORS ? "all" : "leaks");
            abort();
        }
    }
    if (fuzz_open_qcow2_path(&bd, path, false, &d) < 0) {
        fprintf(stderr, "fuzz: the image does not open after check -r: %s\n", d.what);
        abort();
    }
    fuzz_guest_verify(bd, g, g->size);
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
    int r;

    oo.format = "qcow2";
    oo.no_backing = true;
    diag_init(&d);
    if (fuzz_open_mem(&bd, data, size, "fuzz.qcow2", &oo, &d) < 0)
        return 0;
    fuzz_guest_record(bd, &g);
    memset(&before, 0, sizeof(before));
    r = bd->drv->check(bd, &before, 0);
    bd_close(bd);
    if (r < 0)      /* not checkable: the repair should fail, and change nothing */
        before.corruptions = before.check_errors = INT64_MAX;
    repair(data, size, BD_CHECK_FIX_LEAKS, &before, &g);
    repair(data, size, BD_CHECK_FIX_LEAKS | BD_CHECK_FIX_ERRORS, &before, &g);
    return 0;
}
