/* Fuzz target: an OVA (tar: ustar, GNU long names, pax records) whose
 * first VMDK member is opened in place and walked; then its second disk,
 * and the first again forward-only from a pipe, when the archive opens. */
#include "fuzz_common.h"
#include "util/diag.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct bd_open_opts o = fuzz_default_opts();
    struct diag d;
    struct bd *bd;
    void *feeder;

    o.format = "ova";
    diag_init(&d);
    if (fuzz_open_mem(&bd, data, size, "fuzz.ova", &o, &d) != 0)
        return 0;
    fuzz_walk(bd, 0);
    bd_close(bd);

    o.disk_index = 1;
    diag_init(&d);
    if (fuzz_open_mem(&bd, data, size, "fuzz.ova", &o, &d) == 0) {
        fuzz_walk(bd, 0);
        bd_close(bd);
    }

    o.disk_index = 0;
    diag_init(&d);
    if (fuzz_open_pipe(&bd, data, size, "fuzz-stream.ova", &o, &d, &feeder) == 0) {
        fuzz_walk(bd, 0);
        bd_close(bd);
    }
    fuzz_pipe_done(feeder);
    return 0;
}
