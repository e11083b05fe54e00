/* VMDK writer: create() checks the options and hands over to the
 * subformat's writer (write_sparse.c, write_stream.c). */
#include <errno.h>

#include "formats/vmdk/read_int.h"
#include "formats/vmdk/write_priv.h"
#include "io/bfile.h"
#include "util/diag.h"

int vmdkw_create(struct bd **out, struct bfile *f, const struct bd_create_opts *o,
                 struct diag *d)
{
    struct vmdkw_params p;
    char err[256];
    int r;

    *out = NULL;
    /* a safe rebase fills what the image leaves to its parent; convert -n
     * and commit would overwrite data, which needs more than that */
    if (o->existing && o->fill_unallocated)
        return vmdk_inplace_create(out, f, o, d);
    if (o->existing)
        return diag_fail(d, -ENOTSUP, f->path, -1,
                         "writing into an existing vmdk image (-n) is not supported");
    if ((r = vmdkw_parse_params(o->o, o, &p, err, sizeof(err))) < 0)
        return diag_fail(d, r, f->path, -1, "%s", err);
    /* a delta disk names its parent's content id */
    if (p.backing && (r = vmdkw_parent_cid(f->path, p.backing, &p.parent_cid, d)) < 0)
        return r;
    switch (p.sub) {
    case VMDKW_MONOLITHIC_SPARSE:
        /* -c is accepted and has no effect, as with qemu-img: only
         * streamOptimized grains are compressed (twoGbMaxExtentSparse too) */
        return vmdkw_sparse_create(out, f, o, &p, d);
    case VMDKW_STREAM_OPTIMIZED:
        return vmdkw_stream_create(out, f, o, &p, d);
    case VMDKW_MONOLITHIC_FLAT:
    case VMDKW_TWOGB_FLAT:
        if (o->compress)
            return diag_fail(d, -EINVAL, f->path, -1, "flat vmdk extents cannot be "
                             "compressed (-c): use subformat=streamOptimized");
        return vmdkw_multi_create(out, f, o, &p, d);
    case VMDKW_TWOGB_SPARSE:
        return vmdkw_multi_create(out, f, o, &p, d);
    }
    return diag_fail(d, -EINVAL, f->path, -1, "internal error: subformat %d", (int)p.sub);
}
