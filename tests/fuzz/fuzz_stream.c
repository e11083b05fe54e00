/* Fuzz target: any input read forward-only from a pipe with its format
 * probed, as `curl ... | diskimg convert - OUT` reads it: a streamOptimized
 * VMDK, an OVA, raw bytes, or a format that needs a seekable input (qcow2,
 * hosted sparse VMDK: refused with a message).  An image with a size of
 * its own (every format but raw, whose size is what arrives) obeys the
 * truncation rule: cut a few sectors before its end, the stream must fail
 * or read the same, never zeros in place of what was lost. */
#include <string.h>

#include "fuzz_common.h"
#include "util/diag.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct bd_open_opts o = fuzz_default_opts();
    struct fuzz_reading whole;

    fuzz_read_input(data, size, "(stdin)", &o, 1, &whole);
    if (whole.opened && strcmp(whole.format, "raw") != 0)
        fuzz_truncation_rule(data, size, 512, "(stdin)", &o, 1, &whole);
    return 0;
}
