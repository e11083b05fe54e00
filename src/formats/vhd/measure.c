/* VHD measure (qemu-img 7.2 has none for vpc): the size of a new image.
 * fixed: the disk (geometry-rounded unless force_size) and the footer.
 * dynamic: footer copy, header, BAT, footer, and a bitmap and a block for
 * every block the content touches (every block when fully allocated).
 */
#include <errno.h>
#include <string.h>

#include "formats/vhd/vhd_int.h"
#include "formats/vhd/write.h"
#include "util/diag.h"

int vhd_measure(struct kvopts *o, uint64_t size, struct bd *src, struct bd_measure *m,
                struct diag *d)
{
    struct vhdw_params p;
    char err[256];
    int r;

    memset(m, 0, sizeof(*m));
    if (src)
        size = src->size;
    if ((r = vhdw_parse_params(o, size, &p, err, sizeof(err))) < 0)
        return diag_fail(d, r, NULL, -1, "%s", err);
    if (p.fixed) {
        m->required = m->fully_allocated = p.size + VHD_FOOTER_SIZE;
        return 0;
    }
    uint64_t blocks = p.size / p.block_size + (p.size % p.block_size != 0);
    uint64_t bat = (blocks * 4 + VHD_SECTOR - 1) / VHD_SECTOR * VHD_SECTOR;
    uint64_t meta = 2 * VHD_FOOTER_SIZE + VHD_DYNHDR_SIZE + bat;
    uint64_t per = (uint64_t)vhd_bitmap_bytes(p.block_size) + p.block_size;
    uint64_t used = blocks;
    if (src && (r = bd_data_units(src, p.block_size, &used)) < 0)
        return r;
    m->required = meta + used * per;
    m->fully_allocated = meta + blocks * per;
    return 0;
}
