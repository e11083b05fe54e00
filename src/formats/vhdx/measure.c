/* VHDX measure (qemu-img 7.2 has none for vhdx): the size of the file the
 * writer makes.  Everything up to the first block (identifier, headers,
 * region tables, log, BAT, metadata: vhdxw_layout), then whole blocks:
 * fixed, every block; dynamic, each block the content touches (none for
 * an empty disk of --size bytes, as create makes it; every block when
 * fully allocated). */
#include <errno.h>
#include <string.h>

#include "formats/vhdx/write.h"
#include "util/diag.h"

int vhdx_measure(struct kvopts *o, uint64_t size, struct bd *src, struct bd_measure *m,
                 struct diag *d)
{
    struct vhdxw_params p;
    struct vhdxw_layout l;
    char err[256];
    int r;

    memset(m, 0, sizeof(*m));
    if (src)
        size = src->size;
    if ((r = vhdxw_parse_params(o, size, &p, err, sizeof(err))) < 0)
        return diag_fail(d, r, NULL, -1, "%s", err);
    vhdxw_layout(&p, &l);
    uint64_t used = p.fixed ? l.blocks : 0;
    if (!p.fixed && src && (r = bd_data_units(src, p.block_size, &used)) < 0)
        return r;
    m->required = l.data_off + used * p.block_size;
    m->fully_allocated = l.data_off + l.blocks * p.block_size;
    return 0;
}
