/* Fuzz target: `bitmap` operations on a hostile qcow2 image
 * (formats/qcow2/bitmap_write.c, bitmap_data.c).
 *
 * Each call works on its own copy in a memfd: --add (with --disable), and
 * on the first bitmap --clear, --merge of the second (or itself),
 * --remove, --enable.  Oracles, each an abort() the fuzzer reports:
 *   - a call whose first operation fails must leave the image's bytes as
 *     they were;
 *   - one that succeeds leaves an image that opens and checks with no
 *     more check errors, corruptions or leaks than before, the guest data
 *     as it read before, and the bitmap list as expected (added: one more,
 *     removed: one fewer).
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fuzz_common.h"
#include "util/diag.h"
#include "util/jval.h"

static size_t count_bitmaps(struct bd *bd, char *first, char *second, size_t len)
{
    struct jval *o = jv_object();
    const struct jval *fs, *data, *b;
    size_t n = 0;

    if (o && bd->drv->info(bd, o) == 0 && (fs = jv_get(o, "format-specific")) &&
        (data = jv_get(fs, "data")) && (b = jv_get(data, "bitmaps"))) {
        n = b->n;
        for (size_t i = 0; i < n && i < 2; i++) {
            const struct jval *nm = jv_get(b->items[i], "name");
            if (nm && nm->type == J_STRING && first)
                snprintf(i ? second : first, len, "%s", nm->v.s);
        }
    }
    jv_free(o);
    return n;
}

static void operate(const uint8_t *data, size_t size, const struct bd_bitmap_op *ops,
                    size_t n, const char *name, long delta, size_t nb_before,
                    const struct bd_check_result *before, const struct fuzz_guest *g)
{
    struct bd_check_result after;
    struct diag d;
    struct bd *bd;
    char path[64];
    size_t failed = n;
    int fd = fuzz_memfd(data, size, path);

    if (fd < 0)
        return;
    int r = fuzz_open_qcow2_path(&bd, path, true, &d);
    if (r == 0) {
        r = bd->drv->bitmap(bd, name, ops, n, 0, &failed);
        bd_close(bd);
    }
    if (r < 0 && (failed == 0 || failed == n)) {
        if (!fuzz_memfd_same(fd, data, size)) {
            fprintf(stderr, "fuzz: bitmap op %d on '%s' failed (%s) and changed the image\n",
                    (int)ops[0].act, name, d.what);
            abort();
        }
        close(fd);
        return;
    }
    if (fuzz_open_qcow2_path(&bd, path, false, &d) < 0) {
        fprintf(stderr, "fuzz: the image does not open after bitmap op %d: %s\n",
                (int)ops[0].act, d.what);
        abort();
    }
    memset(&after, 0, sizeof(after));
    if (bd->drv->check(bd, &after, 0) < 0 || after.check_errors > before->check_errors ||
        after.corruptions > before->corruptions || after.leaks > before->leaks) {
        fprintf(stderr, "fuzz: after bitmap op %d: %lld corruptions (%lld before), %lld "
                "leaks (%lld), %lld check errors (%lld)\n", (int)ops[0].act,
                (long long)after.corruptions, (long long)before->corruptions,
                (long long)after.leaks, (long long)before->leaks,
                (long long)after.check_errors, (long long)before->check_errors);
        abort();
    }
    size_t nb = count_bitmaps(bd, NULL, NULL, 0);
    if (r == 0 && (long)nb != (long)nb_before + delta) {
        fprintf(stderr, "fuzz: bitmap op %d: %zu bitmaps, %zu before\n", (int)ops[0].act,
                nb, nb_before);
        abort();
    }
    fuzz_guest_verify(bd, g, g->size < bd->size ? g->size : bd->size);
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
    char first[1100] = "", second[1100] = "";

    oo.format = "qcow2";
    oo.no_backing = true;
    diag_init(&d);
    if (size < 8 || fuzz_open_mem(&bd, data, size, "fuzz.qcow2", &oo, &d) < 0)
        return 0;
    fuzz_guest_record(bd, &g);
    memset(&before, 0, sizeof(before));
    int cr = bd->drv->check(bd, &before, 0);
    size_t nb = count_bitmaps(bd, first, second, sizeof(first));
    bd_close(bd);
    /* an image whose check fails is refused by every operation (unchanged) */
    if (cr < 0)
        before.corruptions = before.check_errors = before.leaks = INT64_MAX;
    struct bd_bitmap_op add[2] = { { .act = BD_BITMAP_ADD }, { .act = BD_BITMAP_DISABLE } };
    operate(data, size, add, 2, "fz", +1, nb, &before, &g);
    if (!*first)
        return 0;
    struct bd_bitmap_op clear = { .act = BD_BITMAP_CLEAR };
    operate(data, size, &clear, 1, first, 0, nb, &before, &g);
    struct bd_bitmap_op merge = { .act = BD_BITMAP_MERGE, .source = *second ? second : first };
    operate(data, size, &merge, 1, first, 0, nb, &before, &g);
    struct bd_bitmap_op enable = { .act = BD_BITMAP_ENABLE };
    operate(data, size, &enable, 1, first, 0, nb, &before, &g);
    struct bd_bitmap_op rm = { .act = BD_BITMAP_REMOVE };
    operate(data, size, &rm, 1, first, -1, nb, &before, &g);
    return 0;
}
