/* Fuzz target: a VDI (version 1.x and 0 headers, dynamic, static and
 * differencing images, block maps with unallocated and zero entries)
 * opened, walked, shown (info) and checked; a differencing image also
 * without its parent (no_backing), since its parent is looked for among
 * files, which the target refuses.  Reading obeys the truncation rule
 * (fuzz_truncation_rule, sectors): a VDI cut short must fail or read the
 * same. */
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct bd_open_opts o = fuzz_default_opts();
    struct fuzz_reading mem, alone;

    o.format = "vdi";
    fuzz_read_input(data, size, "fuzz.vdi", &o, 0, &mem);
    if (mem.opened)
        fuzz_truncation_rule(data, size, 512, "fuzz.vdi", &o, 0, &mem);
    o.no_backing = true;
    fuzz_read_input(data, size, "fuzz-alone.vdi", &o, 0, &alone);
    if (alone.opened)
        fuzz_truncation_rule(data, size, 512, "fuzz-alone.vdi", &o, 0, &alone);
    return 0;
}
