/* Fuzz target: a qcow2 image (header, extensions, L1/L2, refcounts,
 * snapshots, bitmaps, compressed clusters) opened, walked, shown (info)
 * and checked; then again at its first internal snapshot if it has one. */
#include <string.h>

#include "fuzz_common.h"
#include "util/diag.h"
#include "util/jval.h"

static int has_snapshots(struct bd *bd)
{
    struct jval *obj = jv_object();
    int yes = 0;

    if (bd->drv->info && bd->drv->info(bd, obj) == 0) {
        const struct jval *s = jv_get(obj, "snapshots");
        yes = s && s->type == J_ARRAY && s->n > 0;
    }
    jv_free(obj);
    return yes;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct bd_open_opts o = fuzz_default_opts();
    struct diag d;
    struct bd *bd;
    int snaps = 0;

    o.format = "qcow2";
    diag_init(&d);
    if (fuzz_open_mem(&bd, data, size, "fuzz.qcow2", &o, &d) == 0) {
        fuzz_walk(bd, 1);
        snaps = has_snapshots(bd);
        bd_close(bd);
    }
    if (snaps) {
        o.snapshot = "snapshot.id=1";
        diag_init(&d);
        if (fuzz_open_mem(&bd, data, size, "fuzz.qcow2", &o, &d) == 0) {
            fuzz_walk(bd, 0);
            bd_close(bd);
        }
    }
    return 0;
}
