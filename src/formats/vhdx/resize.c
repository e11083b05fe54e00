/* VHDX resize: not yet. */
#include <errno.h>
#include "formats/vhdx/write.h"
#include "util/diag.h"
int vhdx_resize(struct bd *bd, uint64_t new_size, bool shrink)
{
    (void)new_size; (void)shrink;
    return diag_fail(bd->diag, -ENOTSUP, bd->filename, -1, "resize of vhdx is not yet supported");
}
