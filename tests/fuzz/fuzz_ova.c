/* Fuzz target: an OVA (tar: ustar, GNU long names, pax records) whose
 * first VMDK member is opened in place and walked; then its second disk,
 * and the first again forward-only from a pipe, when the archive opens.
 * The first disk's readings, in place and from the pipe, obey the
 * truncation rule (fuzz_truncation_rule). */
#include "fuzz_common.h"
#include "util/diag.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct bd_open_opts o = fuzz_default_opts();
    struct fuzz_reading first, second, pipe;

    o.format = "ova";
    fuzz_read_input(data, size, "fuzz.ova", &o, 0, &first);
    if (!first.opened)
        return 0;
    fuzz_truncation_rule(data, size, 512, "fuzz.ova", &o, 0, &first);

    o.disk_index = 1;
    fuzz_read_input(data, size, "fuzz.ova", &o, 0, &second);

    o.disk_index = 0;
    fuzz_read_input(data, size, "fuzz-stream.ova", &o, 1, &pipe);
    fuzz_truncation_rule(data, size, 512, "fuzz-stream.ova", &o, 1, &pipe);
    return 0;
}
