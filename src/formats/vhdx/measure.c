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

/* Blocks of `bs` bytes of `src` that hold data. */
static int data_blocks(struct bd *src, uint64_t bs, uint64_t *n)
{
    uint64_t off = 0;

    *n = 0;
    while (off < src->size) {
        struct bd_extent e;
        int r = bd_block_status(src, off, src->size - off, &e);
        if (r < 0)
            return r;
        if (e.flags & BD_ZERO) {
            off += e.len;
            continue;
        }
        uint64_t first = off / bs, end = (off + e.len + bs - 1) / bs;
        *n += end - first;
        off = end * bs;
    }
    return 0;
}

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
    if (!p.fixed && src && (r = data_blocks(src, p.block_size, &used)) < 0)
        return r;
    m->required = l.data_off + used * p.block_size;
    m->fully_allocated = l.data_off + l.blocks * p.block_size;
    return 0;
}
