/* Listing the grains of a seekable streamOptimized extent that has no
 * usable grain directory (GD at the end and no valid footer at the end of
 * the file): its markers are walked once (read_markers.c) and the grains
 * sorted by LBA, for random access.
 */
#include <errno.h>
#include <stdlib.h>

#include "formats/vmdk/read_int.h"
#include "util/diag.h"

static struct diag *D(struct vmdk *v)
{
    return v->bd.diag;
}

static int loc_cmp(const void *a, const void *b)
{
    uint64_t ga = ((const struct vmdk_grain_loc *)a)->grain;
    uint64_t gb = ((const struct vmdk_grain_loc *)b)->grain;
    return ga < gb ? -1 : ga > gb;
}

int vmdk_scan_grains(struct vmdk *v, struct vmdk_extent *x)
{
    struct vmdk_walk w = { .pos = vmdk_walk_start(x) };
    uint64_t g, at, limit = vmdk_total_grains(x);
    uint32_t csize;
    size_t cap = 0;
    uint8_t *cbuf = malloc(vmdk_cbuf_bytes(x->grain_bytes));
    int r;

    if (!cbuf)
        return diag_fail(D(v), -ENOMEM, x->name, -1, "out of memory");
    while ((r = vmdk_walk_next(v, x, &w, cbuf, &g, &csize, &at)) > 0) {
        if (x->n_scan >= VMDK_MAX_SCAN_GRAINS) {
            r = diag_fail(D(v), -EINVAL, x->name, (int64_t)at,
                          "more than %u grains to index without a grain directory",
                          VMDK_MAX_SCAN_GRAINS);
            break;
        }
        if (x->n_scan >= limit) {
            r = diag_fail(D(v), -EINVAL, x->name, (int64_t)at,
                          "more grain markers than the disk has grains (%llu)",
                          (unsigned long long)limit);
            break;
        }
        if (x->n_scan == cap) {
            size_t ncap = cap ? cap * 2 : 1024;
            if ((r = vmdk_table_budget(v, x, (ncap - cap) * sizeof(*x->scan))) < 0)
                break;
            struct vmdk_grain_loc *n = realloc(x->scan, ncap * sizeof(*n));
            if (!n) {
                r = diag_fail(D(v), -ENOMEM, x->name, -1, "out of memory");
                break;
            }
            x->scan = n;
            cap = ncap;
        }
        x->scan[x->n_scan].grain = g;
        x->scan[x->n_scan].file_off = at;
        x->n_scan++;
    }
    free(cbuf);
    if (r < 0)
        return r;
    if (!x->scan && !(x->scan = malloc(sizeof(*x->scan))))
        return diag_fail(D(v), -ENOMEM, x->name, -1, "out of memory");
    qsort(x->scan, x->n_scan, sizeof(*x->scan), loc_cmp);
    for (size_t i = 1; i < x->n_scan; i++)
        if (x->scan[i].grain == x->scan[i - 1].grain)
            return diag_fail(D(v), -EINVAL, x->name, (int64_t)x->scan[i].file_off,
                             "two grains for LBA %llu",
                             (unsigned long long)(x->scan[i].grain * x->hdr.grain_sectors));
    return 0;
}
