/* Fuzz target: a qcow2 image (header, extensions, L1/L2, refcounts,
 * snapshots, bitmaps, compressed clusters) opened, walked, shown (info)
 * and checked; then again at its first internal snapshot if it has one.
 * The walk obeys the truncation rule (the image cut a few sectors before
 * its end fails or reads the same: never zeros for clusters past the end),
 * and the image from a pipe is refused (qcow2 needs a seekable input). */
#include <stdio.h>
#include <stdlib.h>
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
    struct fuzz_reading whole = { 0 };
    void *feeder;
    int snaps = 0;

    o.format = "qcow2";
    diag_init(&d);
    if (fuzz_open_mem(&bd, data, size, "fuzz.qcow2", &o, &d) == 0) {
        whole.opened = true;
        fuzz_walk_read(bd, 1, &whole);
        snaps = has_snapshots(bd);
        bd_close(bd);
    }
    if (!whole.opened)
        return 0;
    /* whole clusters cut (cluster_bits: big-endian at byte 20) */
    unsigned bits = size >= 24 ? (unsigned)data[20] << 24 | (unsigned)data[21] << 16 |
                                 (unsigned)data[22] << 8 | data[23] : 0;
    if (bits >= 9 && bits <= 21)
        fuzz_truncation_rule(data, size, (size_t)1 << bits, "fuzz.qcow2", &o, 0, &whole);
    diag_init(&d);
    if (fuzz_open_pipe(&bd, data, size, "fuzz-stream.qcow2", &o, &d, &feeder) == 0) {
        fprintf(stderr, "fuzz: a qcow2 image opened from a pipe\n");
        abort();
    }
    fuzz_pipe_done(feeder);
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
