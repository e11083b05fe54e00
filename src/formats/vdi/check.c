/* VDI: check, as qemu-img checks vdi (its messages and exit statuses):
 * an index past the image's blocks, two entries naming one block, the
 * header's allocated count; and more: a block past the end of the file or
 * over the metadata.  Nothing is repaired (as qemu: -r is refused there). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "formats/vdi/vdi_int.h"
#include "util/diag.h"

int vdi_check(struct bd *bd, struct bd_check_result *res, unsigned fix)
{
    struct vdi *v = to_vdi(bd);
    uint32_t n = v->h.blocks, allocated = 0;
    struct diag *d = bd->diag;

    (void)fix;
    memset(res, 0, sizeof(*res));
    uint32_t *used = malloc((size_t)n * 4 + 4);
    if (!used)
        return diag_fail(d, -ENOMEM, bd->filename, -1, "out of memory");
    memset(used, 0xff, (size_t)n * 4 + 4);
    for (uint32_t b = 0; b < n; b++) {
        uint32_t e = v->map[b];
        uint64_t host;
        if (e >= VDI_ZERO)
            continue;
        if (e >= n) {
            diag_warn(d, bd->filename, -1, "ERROR: block index %u too large, is %u", b, e);
            res->corruptions++;
            continue;
        }
        allocated++;
        if (used[e] != VDI_UNALLOCATED) {
            /* (qemu-img's numbers: the index, twice) */
            diag_warn(d, bd->filename, -1, "ERROR: block index %u also used by %u", e, e);
            res->corruptions++;
        } else {
            used[e] = b;
        }
        if (vdi_block_host(v, b, &host) < 0) {
            diag_warn(d, bd->filename, d->offset, "ERROR: %s", d->what);
            diag_clear(d);
            res->corruptions++;
        }
    }
    free(used);
    if (allocated != v->h.blocks_allocated) {
        diag_warn(d, bd->filename, -1, "ERROR: allocated blocks mismatch, is %u, should be %u",
                  allocated, v->h.blocks_allocated);
        res->corruptions++;
    }
    return 0;
}
