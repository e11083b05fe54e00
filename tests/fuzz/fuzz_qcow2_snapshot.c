/* Fuzz target: `snapshot -c`, `-d` and `-a` on a hostile qcow2 image
 * (formats/qcow2/snapshot_write.c, snapshot_commit.c), and the emptying
 * `commit` does to its top image (make_empty.c, on the same engine).
 *
 * Each operation works on its own copy in a memfd with every file it
 * names refused: create a snapshot, delete the first snapshot (by name),
 * apply the first snapshot (by ID), empty the image.  Oracles, each an
 * abort() the fuzzer reports:
 *   - an operation that fails must leave the image's bytes as they were;
 *   - one that succeeds leaves an image that opens and checks with no
 *     more check errors, corruptions or leaks than before;
 *   - create and delete keep the guest data that read before; apply makes
 *     the image read what the snapshot read before; an emptied image
 *     allocates nothing any more.
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

/* `name` NULL: empty the image (make_empty) instead of `op` */
static void operate(const uint8_t *data, size_t size, enum bd_snapshot_op op,
                    const char *name, const struct bd_check_result *before,
                    const struct fuzz_guest *g)
{
    const char *what = name ? name : "(make_empty)";
    struct bd_check_result after;
    struct diag d;
    struct bd *bd;
    char path[64];
    int fd = fuzz_memfd(data, size, path);

    if (fd < 0)
        return;
    int r = fuzz_open_qcow2_path(&bd, path, true, &d);
    if (r == 0) {
        r = name ? bd->drv->snapshot(bd, op, name) : bd->drv->make_empty(bd, false);
        bd_close(bd);
    }
    if (r < 0) {
        if (!fuzz_memfd_same(fd, data, size)) {
            fprintf(stderr, "fuzz: snapshot op %d '%s' failed (%s) and changed the image\n",
                    (int)op, what, d.what);
            abort();
        }
        close(fd);
        return;
    }
    if (fuzz_open_qcow2_path(&bd, path, false, &d) < 0) {
        fprintf(stderr, "fuzz: the image does not open after snapshot op %d: %s\n", (int)op,
                d.what);
        abort();
    }
    memset(&after, 0, sizeof(after));
    if (bd->drv->check(bd, &after, 0) < 0 || after.check_errors > before->check_errors ||
        after.corruptions > before->corruptions || after.leaks > before->leaks) {
        fprintf(stderr, "fuzz: after snapshot op %d: %lld corruptions (%lld before), %lld "
                "leaks (%lld), %lld check errors (%lld)\n", (int)op,
                (long long)after.corruptions, (long long)before->corruptions,
                (long long)after.leaks, (long long)before->leaks,
                (long long)after.check_errors, (long long)before->check_errors);
        abort();
    }
    if (g)
        fuzz_guest_verify(bd, g, g->size < bd->size ? g->size : bd->size);
    for (uint64_t off = 0; !name && off < bd->size;) {
        struct bd_extent e;
        if (bd->drv->block_status(bd, off, bd->size - off, &e) < 0 || e.len == 0)
            break;
        if (e.flags & BD_ALLOCATED) {
            fprintf(stderr, "fuzz: the emptied image allocates %llu bytes at %llu\n",
                    (unsigned long long)e.len, (unsigned long long)off);
            abort();
        }
        off += e.len;
    }
    bd_close(bd);
    close(fd);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static struct fuzz_guest g, gs;
    struct bd_open_opts oo = fuzz_default_opts();
    struct bd_check_result before;
    struct diag d;
    struct bd *bd;
    char first[64] = "", id[32] = "";

    oo.format = "qcow2";
    oo.no_backing = true;
    diag_init(&d);
    if (size < 8 || fuzz_open_mem(&bd, data, size, "fuzz.qcow2", &oo, &d) < 0)
        return 0;
    fuzz_guest_record(bd, &g);
    memset(&before, 0, sizeof(before));
    int cr = bd->drv->check(bd, &before, 0);
    struct jval *o = jv_object();
    const struct jval *s;
    if (o && bd->drv->info(bd, o) == 0 && (s = jv_get(o, "snapshots")) && s->n) {
        const struct jval *n = jv_get(s->items[0], "name"), *i = jv_get(s->items[0], "id");
        if (n && n->type == J_STRING && i && i->type == J_STRING) {
            snprintf(first, sizeof(first), "%s", n->v.s);
            snprintf(id, sizeof(id), "%s", i->v.s);
        }
    }
    jv_free(o);
    bd_close(bd);
    /* an image whose check fails is refused by every operation (unchanged) */
    if (cr < 0)
        before.corruptions = before.check_errors = before.leaks = INT64_MAX;
    operate(data, size, BD_SNAPSHOT_CREATE, "fz", &before, &g);
    if (!*id) {
        operate(data, size, BD_SNAPSHOT_CREATE, NULL, &before, NULL);
        return 0;
    }
    operate(data, size, BD_SNAPSHOT_DELETE, first, &before, &g);
    /* the snapshot's view, for apply (the same ID selected as -l would) */
    char spec[48];
    snprintf(spec, sizeof(spec), "snapshot.id=%s", id);
    oo.snapshot = spec;
    bool have = fuzz_open_mem(&bd, data, size, "fuzz.qcow2", &oo, &d) == 0;
    if (have) {
        fuzz_guest_record(bd, &gs);
        bd_close(bd);
    }
    operate(data, size, BD_SNAPSHOT_APPLY, id, &before, have ? &gs : NULL);
    operate(data, size, BD_SNAPSHOT_CREATE, NULL, &before, NULL);
    return 0;
}
