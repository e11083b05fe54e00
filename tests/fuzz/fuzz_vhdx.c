/* Fuzz target: a VHDX (headers, region tables, metadata items, parent
 * locator, BAT states and sector bitmaps, the log replayed in memory)
 * opened as vhdx, walked, shown (info) and checked; then probed.  A
 * differencing disk's parent is a reference (refused here), so it is also
 * opened without its parent (no_backing: the parent's sectors read as
 * zeros), which walks its sector bitmaps.  Reading obeys the truncation
 * rule (fuzz_truncation_rule, sectors): a VHDX cut short must fail or read
 * the same (past the file's end only what the log writes is there). */
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct bd_open_opts o = fuzz_default_opts();
    struct fuzz_reading mem, probed, alone;

    o.format = "vhdx";
    fuzz_read_input(data, size, "fuzz.vhdx", &o, 0, &mem);
    if (mem.opened)
        fuzz_truncation_rule(data, size, 512, "fuzz.vhdx", &o, 0, &mem);
    o.format = NULL;
    fuzz_read_input(data, size, "fuzz.vhdx", &o, 0, &probed);
    o.format = "vhdx";
    o.no_backing = true;
    fuzz_read_input(data, size, "fuzz-alone.vhdx", &o, 0, &alone);
    if (alone.opened)
        fuzz_truncation_rule(data, size, 512, "fuzz-alone.vhdx", &o, 0, &alone);
    return 0;
}
