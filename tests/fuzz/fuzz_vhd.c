/* Fuzz target: a VHD (fixed: the disk and its footer; dynamic and
 * differencing: footer copy, dynamic header, BAT, sector bitmaps, parent
 * locators) opened as vpc, walked, shown (info) and checked; then probed
 * by name (a fixed VHD by its footer at the end, probe_tail).  A
 * differencing disk's parent is a reference (refused here), so it is also
 * opened without its parent (no_backing: the parent's sectors read as
 * zeros), which walks the bitmaps of its blocks and reads its locators.
 *
 * The truncation rule does not apply: a VHD's footer is its last sector,
 * and a file cut short has its new last sector judged as the footer; a
 * crafted file with a second valid footer right before its real one reads
 * as another, valid disk when cut, and no reader can tell. */
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct bd_open_opts o = fuzz_default_opts();
    struct fuzz_reading mem, probed, alone;

    o.format = "vpc";
    fuzz_read_input(data, size, "fuzz.vhd", &o, 0, &mem);
    o.format = NULL;
    fuzz_read_input(data, size, "fuzz.vhd", &o, 0, &probed);
    o.format = "vpc";
    o.no_backing = true;
    fuzz_read_input(data, size, "fuzz-alone.vhd", &o, 0, &alone);
    return 0;
}
