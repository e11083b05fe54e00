/* VHD: check.  qemu-img does not check vpc images (exit 63); this reports
 * what a reader would trip over: a damaged footer or footer copy, the two
 * disagreeing, blocks outside the file or over the metadata, blocks that
 * overlap each other, and BAT entries past the disk's last block.
 * Problems go out as "ERROR: ..." warnings (counted as corruptions),
 * allocated entries past the disk as leaks.  Nothing is repaired.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "formats/vhd/vhd_int.h"
#include "io/bfile.h"
#include "util/diag.h"

static int u64_cmp(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static void corrupt(struct vhd *v, struct bd_check_result *res, int64_t off,
                    const char *what)
{
    diag_warn(v->bd.diag, v->bd.filename, off, "ERROR: %s", what);
    res->corruptions++;
}

static int check_footers(struct vhd *v, struct bd_check_result *res)
{
    uint8_t end[VHD_FOOTER_SIZE], copy[VHD_FOOTER_SIZE];
    struct bfile *f = v->bd.file;
    int r;

    if (v->used_copy)
        corrupt(v, res, (int64_t)v->data_end, "the footer at the end of the file is "
                "damaged (the copy at offset 0 was used)");
    if (!v->dynamic)
        return 0;
    if ((r = bfile_pread(f, end, sizeof(end), v->data_end)) < 0 ||
        (r = bfile_pread(f, copy, sizeof(copy), 0)) < 0)
        return r;
    struct vhd_footer c;
    char err[160];
    if (vhd_footer_decode(copy, &c, err, sizeof(err)) < 0 || !c.checksum_ok)
        corrupt(v, res, 0, "the footer copy at offset 0 is damaged");
    else if (!v->used_copy && memcmp(end, copy, sizeof(end)) != 0)
        corrupt(v, res, 0, "the footer copy at offset 0 differs from the footer");
    return 0;
}

int vhd_check(struct bd *bd, struct bd_check_result *res, unsigned fix)
{
    struct vhd *v = to_vhd(bd);
    int r;

    (void)fix;
    memset(res, 0, sizeof(*res));
    if ((r = check_footers(v, res)) < 0)
        return r;
    res->image_end_offset = (int64_t)(v->data_end + VHD_FOOTER_SIZE);
    if (!v->dynamic)
        return 0;
    uint64_t blocks = bd->size / v->block_size + (bd->size % v->block_size != 0);
    uint64_t *hosts = malloc(((size_t)v->n_bat + 1) * sizeof(*hosts));
    size_t nh = 0;
    if (!hosts)
        return diag_fail(bd->diag, -ENOMEM, bd->filename, -1, "out of memory");
    res->total_clusters = (int64_t)blocks;
    uint64_t span = (uint64_t)v->bitmap_bytes + v->block_size;
    for (uint32_t b = 0; b < v->n_bat; b++) {
        uint64_t host;
        if (v->bat[b] == VHD_BAT_UNUSED)
            continue;
        if (b >= blocks) {
            diag_warn(bd->diag, bd->filename, (int64_t)(v->hdr.table_offset + 4ull * b),
                      "Leaked block: BAT entry %u is past the disk's last block", b);
            res->leaks++;
            continue;
        }
        res->allocated_clusters++;
        if (vhd_block_host(v, b, &host) < 0) {
            corrupt(v, res, bd->diag->offset, bd->diag->what);
            diag_clear(bd->diag);
            continue;
        }
        hosts[nh++] = host;
    }
    qsort(hosts, nh, sizeof(*hosts), u64_cmp);
    for (size_t i = 1; i < nh; i++)
        if (hosts[i] < hosts[i - 1] + span) {
            char what[160];
            snprintf(what, sizeof(what), "the blocks at %llu and %llu overlap",
                     (unsigned long long)hosts[i - 1], (unsigned long long)hosts[i]);
            corrupt(v, res, (int64_t)hosts[i], what);
        }
    for (size_t i = 1; i < nh; i++)
        if (hosts[i] > hosts[i - 1] + span)
            res->fragmented_clusters++;
    free(hosts);
    return 0;
}
