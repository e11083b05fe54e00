/* Fuzz target: a VMDK (hosted sparse KDMV with its grain directory and
 * tables, streamOptimized with markers and compressed grains, COWD, or a
 * descriptor text whose extents are ZERO or refused references) opened,
 * walked and shown (info).  An input that opens is then read again
 * forward-only from a pipe, the way `convert -` reads it (a streamOptimized
 * one is read by the stream reader, others must be refused cleanly).
 * Both readings of a binary extent obey the truncation rule
 * (fuzz_truncation_rule): the input cut a few sectors before its end must
 * fail or read the same. */
#include <string.h>

#include "fuzz_common.h"
#include "util/diag.h"

/* A binary extent (KDMV, COWD): the truncation rule applies.  A descriptor
 * is text with no end of its own: cut at a line end it is a shorter, valid
 * descriptor (fewer extents), which no reader can tell from a cut. */
static int binary_extent(const uint8_t *data, size_t size)
{
    return size >= 4 && (memcmp(data, "KDMV", 4) == 0 || memcmp(data, "COWD", 4) == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct bd_open_opts o = fuzz_default_opts();
    struct fuzz_reading mem, pipe;

    o.format = "vmdk";
    fuzz_read_input(data, size, "fuzz.vmdk", &o, 0, &mem);
    if (!mem.opened)
        return 0;
    int cut = binary_extent(data, size);
    if (cut)
        fuzz_truncation_rule(data, size, 512, "fuzz.vmdk", &o, 0, &mem);
    fuzz_read_input(data, size, "fuzz-stream.vmdk", &o, 1, &pipe);
    if (cut)
        fuzz_truncation_rule(data, size, 512, "fuzz-stream.vmdk", &o, 1, &pipe);
    return 0;
}
