/* The metadata of a sparse extent as a metamap (formats/metamap.h): the
 * header, the embedded descriptor, the grain directory and its redundant
 * copy, every grain table either names, and a stream's footer.  Built once
 * when the extent is opened; then every grain a table entry points to is
 * checked against it (vmdk_grain_check): a grain that overlaps the
 * extent's own metadata is corruption (a hostile image would otherwise hand
 * out its header or its tables as guest data), refused by block status and
 * reads, reported by check.
 *
 * The tables of the directory in use must not overlap the other metadata
 * nor each other (no tool writes that; overlapping tables would also let a
 * small file make a walk read far more table bytes than it holds).  Runs of
 * adjacent tables are kept as one range, so the map of an ordinary image is
 * a handful of ranges, and its size counts against the chain's budget.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "formats/vmdk/read_int.h"
#include "io/bfile.h"
#include "util/diag.h"
#include "util/endian.h"

static struct diag *D(struct vmdk *v)
{
    return v->bd.diag;
}

static int u32_cmp(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

/* Sort the n non-zero entries of `t` (all of t[0..n) are non-zero) and drop
 * duplicates; returns how many are left. */
static uint32_t sort_unique(uint32_t *t, uint32_t n)
{
    uint32_t k = 0;

    qsort(t, n, sizeof(*t), u32_cmp);
    for (uint32_t i = 0; i < n; i++)
        if (k == 0 || t[i] != t[k - 1])
            t[k++] = t[i];
    return k;
}

/* Ranges a sorted list of tables takes once adjacent ones are merged (each
 * table taken as `span` bytes: its sectors). */
static uint64_t count_runs(const uint32_t *t, uint32_t n, uint64_t span)
{
    uint64_t runs = 0, end = 0;

    for (uint32_t i = 0; i < n; i++) {
        uint64_t off = (uint64_t)t[i] * VMDK_SECTOR;
        if (!runs || off > end)
            runs++;
        if (off + span > end)
            end = off + span;
    }
    return runs;
}

static int add_runs(struct metamap *m, const uint32_t *t, uint32_t n, uint64_t span,
                    const char *what)
{
    uint64_t start = 0, end = 0;
    int r;

    for (uint32_t i = 0; i < n; i++) {
        uint64_t off = (uint64_t)t[i] * VMDK_SECTOR;
        if (i && off <= end) {
            if (off + span > end)
                end = off + span;
            continue;
        }
        if (i && (r = metamap_add(m, start, end - start, what)) < 0)
            return r;
        start = off;
        end = off + span;
    }
    return n ? metamap_add(m, start, end - start, what) : 0;
}

/* The tables a directory other than the one in use names, inside the file:
 * read it, keep the non-zero entries whose table fits (it is not used for
 * reading, so a damaged one is no error).  *t is malloc'd. */
static int other_tables(struct vmdk *v, struct vmdk_extent *x, uint64_t off, uint32_t **t,
                        uint32_t *n)
{
    uint64_t bytes = (uint64_t)x->gd_n * 4, gt_bytes = (uint64_t)x->gtes * 4;
    uint8_t *raw = malloc(bytes ? bytes : 1);
    uint32_t k = 0;

    *t = (uint32_t *)raw;
    *n = 0;
    if (!raw)
        return diag_fail(D(v), -ENOMEM, x->name, -1, "out of memory");
    int r = bfile_pread(x->file, raw, bytes, off);
    if (r < 0)
        return r;
    for (uint32_t i = 0; i < x->gd_n; i++) {
        uint32_t e = le32_get(raw + 4 * (uint64_t)i);
        uint64_t gto = (uint64_t)e * VMDK_SECTOR;
        if (e && gto < x->file_size && gt_bytes <= x->file_size - gto)
            (*t)[k++] = e;      /* in place: entry k is written after entry i >= k is read */
    }
    *n = sort_unique(*t, k);
    return 0;
}

/* The grain directory entry that names the table at sector `sector`. */
static uint32_t gd_index_of(const struct vmdk_extent *x, uint32_t sector)
{
    for (uint32_t i = 0; i < x->gd_n; i++)
        if (x->gd[i] == sector)
            return i;
    return 0;
}

int vmdk_meta_build(struct vmdk *v, struct vmdk_extent *x, uint64_t used)
{
    const struct vmdk4_header *h = &x->hdr;
    bool cowd = x->type == VMDK_EXT_VMFSSPARSE;
    uint64_t dir_bytes = (uint64_t)x->gd_n * 4, gt_bytes = (uint64_t)x->gtes * 4;
    uint64_t span = (gt_bytes + VMDK_SECTOR - 1) / VMDK_SECTOR * VMDK_SECTOR;
    uint64_t used_off = used * VMDK_SECTOR;
    struct metamap fixed = { 0 };
    uint32_t *tabs = NULL, *other[2] = { NULL, NULL }, n = 0, n_other[2] = { 0, 0 };
    const char *other_what[2] = { "grain tables", "redundant grain tables" };
    int r = 0;

    /* the structures at fixed places (sector numbers <= 2^41: no wrap) */
    if ((r = metamap_add(&fixed, 0, cowd ? COWD_HEADER_SIZE : VMDK4_HEADER_SIZE,
                         cowd ? "COWD header" : "header")) < 0)
        goto nomem;
    if (!cowd && h->desc_offset &&
        (r = metamap_add(&fixed, h->desc_offset * VMDK_SECTOR, h->desc_sectors * VMDK_SECTOR,
                         "embedded descriptor")) < 0)
        goto nomem;
    bool used_is_rgd = !cowd && (h->flags & VMDK4_FLAG_RGD) && used == h->rgd_offset;
    if ((r = metamap_add(&fixed, used_off, dir_bytes, used_is_rgd ? "redundant grain directory"
                                                                  : "grain directory")) < 0)
        goto nomem;
    if (!cowd) {
        /* the other directory: the primary when the copy is in use, or the copy */
        uint64_t o[2] = { h->gd_offset != VMDK4_GD_AT_END ? h->gd_offset : 0,
                          (h->flags & VMDK4_FLAG_RGD) ? h->rgd_offset : 0 };
        static const char *const dir_what[2] = { "grain directory", "redundant grain directory" };
        for (int k = 0; k < 2; k++) {
            uint64_t off = o[k] * VMDK_SECTOR;
            if (!o[k] || o[k] == used || off >= x->file_size || dir_bytes > x->file_size - off)
                continue;
            if ((r = metamap_add(&fixed, off, dir_bytes, dir_what[k])) < 0)
                goto nomem;
            if ((r = other_tables(v, x, off, &other[k], &n_other[k])) < 0)
                goto fail;
        }
        if (h->gd_offset == VMDK4_GD_AT_END &&
            (r = metamap_add(&fixed, x->file_size - 3 * VMDK_SECTOR, 3 * VMDK_SECTOR,
                             "footer")) < 0)
            goto nomem;
    }
    if ((r = metamap_seal(&fixed)) < 0)
        goto nomem;

    /* the tables in use: inside no other structure, not overlapping */
    if (!(tabs = malloc(dir_bytes ? dir_bytes : 1)))
        goto nomem;
    for (uint32_t i = 0; i < x->gd_n; i++)
        if (x->gd[i])
            tabs[n++] = x->gd[i];
    n = sort_unique(tabs, n);   /* (load_gd refused duplicates) */
    for (uint32_t i = 0; i < n; i++) {
        uint64_t off = (uint64_t)tabs[i] * VMDK_SECTOR;
        uint64_t prev = i ? (uint64_t)tabs[i - 1] * VMDK_SECTOR : 0;
        const struct metarange *mr = metamap_find(&fixed, off, gt_bytes);
        if (!mr && !(i && off < prev + gt_bytes))
            continue;
        uint32_t e = gd_index_of(x, tabs[i]);
        int64_t at = (int64_t)(used_off + 4 * (uint64_t)e);
        if (mr)
            r = diag_fail(D(v), -EINVAL, x->name, at,
                          "grain directory entry %u points to a grain table at offset %llu "
                          "(%llu bytes), inside the %s at offset %llu (%llu bytes)", e,
                          (unsigned long long)off, (unsigned long long)gt_bytes, mr->what,
                          (unsigned long long)mr->off, (unsigned long long)mr->len);
        else
            r = diag_fail(D(v), -EINVAL, x->name, at,
                          "grain directory entry %u points to a grain table at offset %llu "
                          "that overlaps the one at offset %llu (%llu bytes each)", e,
                          (unsigned long long)off, (unsigned long long)prev,
                          (unsigned long long)gt_bytes);
        goto fail;
    }

    /* the map: about 56 bytes a range (metamap grows by doubling) */
    uint64_t ranges = fixed.n + count_runs(tabs, n, span) +
                      count_runs(other[0], n_other[0], span) +
                      count_runs(other[1], n_other[1], span);
    if ((r = vmdk_table_budget(v, x, ranges * (2 * sizeof(struct metarange) + 8))) < 0)
        goto fail;
    for (size_t i = 0; i < fixed.n; i++)
        if ((r = metamap_add(&x->meta, fixed.r[i].off, fixed.r[i].len, fixed.r[i].what)) < 0)
            goto nomem;
    if ((r = add_runs(&x->meta, tabs, n, span,
                      used_is_rgd ? "redundant grain tables" : "grain tables")) < 0 ||
        (r = add_runs(&x->meta, other[0], n_other[0], span, other_what[0])) < 0 ||
        (r = add_runs(&x->meta, other[1], n_other[1], span, other_what[1])) < 0 ||
        (r = metamap_seal(&x->meta)) < 0)
        goto nomem;
    goto out;
nomem:
    r = diag_fail(D(v), r == -EOVERFLOW ? -EINVAL : -ENOMEM, x->name, -1,
                  r == -EOVERFLOW ? "metadata range wraps around" : "out of memory");
fail:
    metamap_free(&x->meta);
out:
    metamap_free(&fixed);
    free(tabs);
    free(other[0]);
    free(other[1]);
    return r;
}

int vmdk_grain_check(const struct vmdk_extent *x, uint64_t g, uint64_t off, uint64_t len,
                     struct diag *d)
{
    uint64_t lba = g * x->grain_bytes / VMDK_SECTOR;
    int64_t at = x->gd ? (int64_t)((uint64_t)x->gd[g / x->gtes] * VMDK_SECTOR +
                                   4 * (g % x->gtes))
                       : (int64_t)off;

    if (off >= x->file_size)
        return diag_fail(d, -EINVAL, x->name, at,
                         "grain table entry for LBA %llu points to offset %llu, past the end "
                         "of the file (%llu bytes)", (unsigned long long)lba,
                         (unsigned long long)off, (unsigned long long)x->file_size);
    if (len > x->file_size - off)
        return diag_fail(d, -EINVAL, x->name, at,
                         "grain table entry for LBA %llu points to offset %llu, whose %llu "
                         "bytes run past the end of the file (%llu bytes)",
                         (unsigned long long)lba, (unsigned long long)off,
                         (unsigned long long)len, (unsigned long long)x->file_size);
    const struct metarange *mr = metamap_find(&x->meta, off, len);
    if (mr && d) {
        /* name the first structure the grain runs into: the shortest
         * prefix of the grain that overlaps some (monotone in the length) */
        uint64_t lo = 1, hi = len;
        while (lo < hi) {
            uint64_t mid = lo + (hi - lo) / 2;
            if (metamap_find(&x->meta, off, mid))
                hi = mid;
            else
                lo = mid + 1;
        }
        mr = metamap_find(&x->meta, off, lo);
    }
    if (mr)
        return diag_fail(d, -EINVAL, x->name, at,
                         "grain for LBA %llu at offset %llu (%llu bytes) overlaps the %s at "
                         "offset %llu (%llu bytes)", (unsigned long long)lba,
                         (unsigned long long)off, (unsigned long long)len, mr->what,
                         (unsigned long long)mr->off, (unsigned long long)mr->len);
    return 0;
}
