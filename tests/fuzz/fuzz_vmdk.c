/* Fuzz target: a VMDK (hosted sparse KDMV with its grain directory and
 * tables, streamOptimized with markers and compressed grains, COWD, or a
 * descriptor text whose extents are ZERO or refused references) opened,
 * walked and shown (info).  A streamOptimized input that opens is then
 * read again forward-only from a pipe, the way `convert -` reads it. */
#include <string.h>

#include "fuzz_common.h"
#include "util/diag.h"

static int is_stream_optimized(const uint8_t *d, size_t n)
{
    /* "KDMV", flags (LE32 at 8) with compressed grains (bit 16) or
     * markers (bit 17) */
    return n >= 512 && memcmp(d, "KDMV", 4) == 0 && (d[10] & 0x3);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct bd_open_opts o = fuzz_default_opts();
    struct diag d;
    struct bd *bd;
    int opened = 0;

    o.format = "vmdk";
    diag_init(&d);
    if (fuzz_open_mem(&bd, data, size, "fuzz.vmdk", &o, &d) == 0) {
        opened = 1;
        fuzz_walk(bd, 0);
        bd_close(bd);
    }
    if (opened && is_stream_optimized(data, size)) {
        void *feeder;
        diag_init(&d);
        if (fuzz_open_pipe(&bd, data, size, "fuzz-stream.vmdk", &o, &d, &feeder) == 0) {
            fuzz_walk(bd, 0);
            bd_close(bd);
        }
        fuzz_pipe_done(feeder);
    }
    return 0;
}
