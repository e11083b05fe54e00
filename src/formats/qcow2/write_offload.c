/* qcow2 writer: copy offload.  A guest range gets its host clusters and L2
 * entries as for a write (qcow2w_map_clusters: fresh clusters back to back
 * at the end of the file), and the converter puts the bytes there itself.
 * Host clusters are cluster-aligned, so they can share a source's blocks
 * when the cluster size is a multiple of the file system block.  Not here:
 * extended L2 entries (subcluster bitmaps), the image's last write when it
 * ends inside a sector (padded in a buffer), a stream, -c. */
#include <errno.h>

#include "formats/qcow2/write_priv.h"
#include "io/bfile.h"

int qcow2w_map_for_offload(struct bd *bd, uint64_t off, uint64_t len, uint32_t align,
                           struct bfile **f, uint64_t *host, uint64_t *mapped)
{
    struct qcow2w *w = to_qcow2w(bd);
    uint64_t h = 0;
    int r;

    if (bd->file->kind != BFILE_REGULAR || bd->file->fd < 0 || w->compress ||
        w->p.extended_l2 || (off + len) % 512 || w->cs % align)
        return -ENOTSUP;
    if ((r = qcow2w_check_range(w, off, len, "offload")) < 0)
        return r;
    if (w->p.prealloc != QCOW2W_PREALLOC_OFF) {
        h = w->data_start + off;
    } else {
        if ((r = qcow2w_map_clusters(w, off, len)) < 0 ||
            (r = qcow2w_host_of(w, off >> w->cbits, &h)) < 0)
            return r;
        h += off % w->cs;
    }
    *f = bd->file;
    *host = h;
    *mapped = len;
    return 0;
}
