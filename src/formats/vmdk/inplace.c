/* vmdk: writing grains into an existing image in place (create() with
 * opts->existing), for a safe rebase: the ranges the image leaves to its
 * parent get grains of their own.
 *
 * Hosted sparse extents (monolithicSparse, twoGbMaxExtentSparse, VMware's
 * split sparse): a grain not yet allocated is appended at the end of its
 * extent file; its grain table entry (both copies, the redundant one
 * included) is written only once the grain data is synced.  Order, so that
 * a kill at any point leaves a valid image whose content is unchanged:
 *   1. grains appended (no table names them yet: a kill leaves unused
 *      bytes at the end of the file, cut off again by abort());
 *   2. fsync of the extent files;
 *   3. the grain table entries, in both tables (each entry is 4 aligned
 *      bytes of one sector: either the old 0, reading from the old parent,
 *      or the new grain holding what the old parent showed; both give the
 *      same content), then fsync;
 *   4. last, the descriptor names the new parent (set_backing.c).
 * Steps 1-3 go in batches of VMDK_IP_BATCH grains so that the pending
 * entries take bounded memory.  Grain tables must exist (every tool that
 * writes this format preallocates them); a write that needs a missing one
 * is refused.  So is a write to a grain already allocated (a safe rebase
 * never writes one; overwriting data in place is not crash-safe, and
 * convert -n does not come here).  Flat extents are written in place (a
 * safe rebase never writes them either: they are all allocated).
 * streamOptimized (compressed grains in a stream) and COWD extents are
 * refused.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "formats/vmdk/read_int.h"
#include "formats/vmdk/vmdk.h"
#include "formats/vmdk/write.h"
#include "io/bfile.h"
#include "util/diag.h"
#include "util/endian.h"

#define VMDK_IP_BATCH 65536u

struct ip_pend {
    uint32_t ext, gt, ent;      /* extent, grain directory entry, table entry */
    uint32_t sector;            /* where the grain now is */
};

struct ip_ext {
    uint64_t next;              /* byte offset of the next appended grain */
    uint64_t keep;              /* abort() cuts the file back to this */
    uint64_t size0;             /* the file's size when opened */
    uint32_t *tabs;             /* sorted sectors of the primary tables */
    uint32_t n_tabs;
};

struct vmdk_ip {
    struct bd bd;
    struct vmdk *rd;            /* the image, opened for writing (no parent) */
    struct ip_ext *xs;
    struct ip_pend *pend;
    size_t n_pend;
    uint8_t *grain;             /* a whole grain, for one written in part */
};

extern const struct bd_driver bd_vmdk_inplace;

#define FAIL(ip, err, file, at, ...) diag_fail((ip)->bd.diag, err, file, at, __VA_ARGS__)

static struct vmdk_ip *to_ip(struct bd *bd)
{
    return (struct vmdk_ip *)bd;
}

static int u32_cmp(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

static int pend_cmp(const void *a, const void *b)
{
    const struct ip_pend *p = a, *q = b;
    if (p->ext != q->ext)
        return p->ext < q->ext ? -1 : 1;
    if (p->gt != q->gt)
        return p->gt < q->gt ? -1 : 1;
    return p->ent < q->ent ? -1 : p->ent > q->ent;
}

/* Whether [off, off+len) of extent x overlaps a primary grain table. */
static bool hits_table(const struct vmdk_extent *x, const struct ip_ext *e, uint64_t off,
                       uint64_t len)
{
    uint64_t gt_bytes = (uint64_t)x->gtes * 4;
    size_t lo = 0, hi = e->n_tabs;

    /* the last table starting before off+len */
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if ((uint64_t)e->tabs[mid] * VMDK_SECTOR < off + len)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo > 0 && (uint64_t)e->tabs[lo - 1] * VMDK_SECTOR + gt_bytes > off;
}

/* The redundant table of directory entry `gt`, or 0 when the extent keeps
 * none.  A copy that would overlap the header, the descriptor, either
 * directory or a table in use, or runs past the file, is refused: writing
 * it would damage what it overlaps. */
static int redundant_table(struct vmdk_ip *ip, uint32_t xi, uint32_t gt, uint64_t *at)
{
    const struct vmdk_extent *x = &ip->rd->ext[xi];
    const struct vmdk4_header *h = &x->hdr;
    uint64_t gt_bytes = (uint64_t)x->gtes * 4, dir_bytes = (uint64_t)x->gd_n * 4;
    uint8_t raw[4];
    int r;

    *at = 0;
    if (!(h->flags & VMDK4_FLAG_RGD) || !h->rgd_offset || h->rgd_offset == h->gd_offset)
        return 0;
    uint64_t rgd = h->rgd_offset * VMDK_SECTOR, size = ip->xs[xi].size0;
    if (rgd >= size || dir_bytes > size - rgd)
        return 0;   /* (no usable copy: the reader ignores it too) */
    if ((r = bfile_pread(x->file, raw, 4, rgd + 4 * (uint64_t)gt)) < 0)
        return r;
    uint64_t off = (uint64_t)le32_get(raw) * VMDK_SECTOR;
    if (!off)
        return 0;
    uint64_t gd = h->gd_offset * VMDK_SECTOR;
    const char *bad = NULL;
    if (off >= size || gt_bytes > size - off)
        bad = "runs past the end of the file";
    else if (off < VMDK4_HEADER_SIZE)
        bad = "overlaps the header";
    else if (h->desc_offset && off < (h->desc_offset + h->desc_sectors) * VMDK_SECTOR &&
             off + gt_bytes > h->desc_offset * VMDK_SECTOR)
        bad = "overlaps the embedded descriptor";
    else if ((off < gd + dir_bytes && off + gt_bytes > gd) ||
             (off < rgd + dir_bytes && off + gt_bytes > rgd))
        bad = "overlaps a grain directory";
    else if (hits_table(x, &ip->xs[xi], off, gt_bytes))
        bad = "overlaps a grain table in use";
    if (bad)
        return FAIL(ip, -EINVAL, x->name, (int64_t)(rgd + 4 * (uint64_t)gt),
                    "redundant grain directory entry %u names a table at offset %llu that %s",
                    gt, (unsigned long long)off, bad);
    *at = off;
    return 0;
}

/* Patch the entries p[0..n) (one table) into the table at byte `at`. */
static int patch_table(struct vmdk_ip *ip, const struct vmdk_extent *x, uint64_t at,
                       const struct ip_pend *p, size_t n)
{
    size_t bytes = (size_t)x->gtes * 4;
    uint8_t *t = malloc(bytes);
    int r;

    if (!t)
        return FAIL(ip, -ENOMEM, x->name, -1, "out of memory");
    if ((r = bfile_pread(x->file, t, bytes, at)) == 0) {
        for (size_t i = 0; i < n; i++)
            le32_put(t + 4 * (size_t)p[i].ent, p[i].sector);
        r = bfile_pwrite(x->file, t, bytes, at);
    }
    free(t);
    return r;
}

static int sync_all(struct vmdk_ip *ip)
{
    struct vmdk *v = ip->rd;
    int r = bfile_sync(v->bd.file);

    for (size_t i = 0; i < v->n_files && r == 0; i++)
        r = bfile_sync(v->files[i]);
    return r;
}

/* The runs of p[] (sorted) that share one table: [i, *j). */
static size_t group_end(const struct vmdk_ip *ip, size_t i)
{
    size_t j = i;
    while (j < ip->n_pend && ip->pend[j].ext == ip->pend[i].ext &&
           ip->pend[j].gt == ip->pend[i].gt)
        j++;
    return j;
}

/* Steps 2 and 3: the grains appended so far become part of the image.
 * Every redundant table is checked before any table is written; from the
 * first table write on, the grains are kept even if a later write fails
 * (a table may name them already: cutting them off would leave it
 * pointing past the end of the file). */
static int flush_pending(struct vmdk_ip *ip)
{
    struct vmdk *v = ip->rd;
    uint64_t red;
    int r;

    if (!ip->n_pend)
        return 0;
    if ((r = sync_all(ip)) < 0)
        return r;
    qsort(ip->pend, ip->n_pend, sizeof(*ip->pend), pend_cmp);
    for (size_t i = 0; i < ip->n_pend; i = group_end(ip, i))
        if ((r = redundant_table(ip, ip->pend[i].ext, ip->pend[i].gt, &red)) < 0)
            return r;
    for (size_t i = 0; i < v->n_ext; i++)
        if (ip->xs[i].next > ip->xs[i].keep)
            ip->xs[i].keep = ip->xs[i].next;
    for (size_t i = 0, j; i < ip->n_pend; i = j) {
        j = group_end(ip, i);
        const struct vmdk_extent *x = &v->ext[ip->pend[i].ext];
        if ((r = redundant_table(ip, ip->pend[i].ext, ip->pend[i].gt, &red)) < 0 ||
            (r = patch_table(ip, x, (uint64_t)x->gd[ip->pend[i].gt] * VMDK_SECTOR,
                             ip->pend + i, j - i)) < 0 ||
            (red && (r = patch_table(ip, x, red, ip->pend + i, j - i)) < 0))
            return r;
    }
    ip->n_pend = 0;
    return 0;
}

/* One grain (or the part of the extent's last grain) of sparse extent xi
 * at extent byte `rel` (a grain's start): `n` bytes of `buf`. */
static int write_grain(struct vmdk_ip *ip, uint32_t xi, const uint8_t *buf, uint64_t n,
                       uint64_t rel)
{
    struct vmdk_extent *x = &ip->rd->ext[xi];
    struct ip_ext *e = &ip->xs[xi];
    uint64_t g = rel / x->grain_bytes;
    uint32_t gt = (uint32_t)(g / x->gtes), ent = (uint32_t)(g % x->gtes);
    uint8_t raw[4];
    int r;

    if (!x->gd[gt])
        return FAIL(ip, -ENOTSUP, x->name, -1, "grain table %u is not allocated (writing "
                    "one is not supported)", gt);
    uint64_t at = (uint64_t)x->gd[gt] * VMDK_SECTOR + 4 * (uint64_t)ent;
    if ((r = bfile_pread(x->file, raw, 4, at)) < 0)
        return r;
    uint32_t cur = le32_get(raw);
    if (n < x->grain_bytes) {   /* the extent's last grain: zeros after it */
        memset(ip->grain, 0, x->grain_bytes);
        memcpy(ip->grain, buf, n);
        buf = ip->grain;
    }
    if (cur)
        return FAIL(ip, -EEXIST, x->name, (int64_t)at, "grain for LBA %llu is allocated "
                    "already (only unallocated grains are written)",
                    (unsigned long long)(g * x->grain_bytes / VMDK_SECTOR));
    uint64_t sector = e->next / VMDK_SECTOR;
    if (sector + x->grain_bytes / VMDK_SECTOR > UINT32_MAX)
        return FAIL(ip, -EFBIG, x->name, -1, "the extent file would grow past 2 TiB, "
                    "which grain table entries cannot address");
    if ((r = bfile_pwrite(x->file, buf, x->grain_bytes, e->next)) < 0)
        return r;
    e->next += x->grain_bytes;
    ip->pend[ip->n_pend++] = (struct ip_pend){ .ext = xi, .gt = gt, .ent = ent,
                                               .sector = (uint32_t)sector };
    return ip->n_pend == VMDK_IP_BATCH ? flush_pending(ip) : 0;
}

static int write_range(struct vmdk_ip *ip, const uint8_t *buf, uint64_t len, uint64_t off)
{
    struct vmdk *v = ip->rd;
    int r = 0;

    if (off > v->bd.size || len > v->bd.size - off)
        return FAIL(ip, -EINVAL, v->bd.filename, -1, "write past the end of the image");
    while (len && r == 0) {
        uint32_t xi = (uint32_t)(vmdk_find_extent(v, off) - v->ext);
        struct vmdk_extent *x = &v->ext[xi];
        uint64_t rel = off - x->start, n = x->len - rel < len ? x->len - rel : len;
        switch (x->type) {
        case VMDK_EXT_FLAT:
        case VMDK_EXT_VMFS:
            r = bfile_pwrite(x->file, buf, n, x->flat_off + rel);
            break;
        case VMDK_EXT_SPARSE:
            for (uint64_t done = 0; done < n && r == 0;) {
                uint64_t gl = x->grain_bytes;
                if ((rel + done) % gl)
                    return FAIL(ip, -EINVAL, x->name, -1, "internal error: write not on a "
                                "grain");
                uint64_t k = n - done < gl ? n - done : gl;
                if (k < gl && rel + done + k != x->len)
                    return FAIL(ip, -EINVAL, x->name, -1, "internal error: part of a grain");
                r = write_grain(ip, xi, buf + done, k, rel + done);
                done += k;
            }
            break;
        default:
            return FAIL(ip, -ENOTSUP, v->bd.filename, -1, "cannot write into a %s extent",
                        vmdk_ext_type_name(x->type));
        }
        buf += n;
        off += n;
        len -= n;
    }
    return r;
}

static int ip_pwrite(struct bd *bd, const void *buf, size_t len, uint64_t off,
                     ioq_done_fn done, void *opaque)
{
    int r = write_range(to_ip(bd), buf, len, off);
    if (done)
        done(opaque, r);
    return r;
}

static int ip_write_zeroes(struct bd *bd, uint64_t off, uint64_t len)
{
    (void)off;
    (void)len;
    return diag_fail(bd->diag, -ENOTSUP, bd->filename, -1,
                     "making ranges of an existing vmdk read as zeros is not supported");
}

/* Give up: the grains no table names yet are cut off again. */
static void ip_abort(struct bd *bd)
{
    struct vmdk_ip *ip = to_ip(bd);
    struct vmdk *v = ip->rd;

    for (size_t i = 0; i < v->n_ext; i++) {
        const struct vmdk_extent *x = &v->ext[i];
        if (x->type == VMDK_EXT_SPARSE && ip->xs[i].next > ip->xs[i].keep &&
            x->file->kind == BFILE_REGULAR && ftruncate(x->file->fd, (off_t)ip->xs[i].keep) < 0)
            diag_warn(bd->diag, x->name, -1, "cannot cut off the unused grains at its end");
    }
    ip->n_pend = 0;
}

/* (a failed finish gives up as abort() does: the caller calls only one) */
static int ip_finish(struct bd *bd)
{
    struct vmdk_ip *ip = to_ip(bd);
    int r = flush_pending(ip);

    if (r < 0)
        ip_abort(bd);
    return r < 0 ? r : sync_all(ip);
}

static void ip_close(struct bd *bd)
{
    struct vmdk_ip *ip = to_ip(bd);

    if (ip->xs)
        for (size_t i = 0; i < ip->rd->n_ext; i++)
            free(ip->xs[i].tabs);
    free(ip->xs);
    free(ip->pend);
    free(ip->grain);
    bd_close(&ip->rd->bd);
    bd_release(bd);
    free(ip);
}

/* The image check before anything is written (what `diskimg check`
 * reports as corruption: a grain table entry pointing past the end of its
 * file or into the extent's metadata).  New grains go at the end of the
 * file, where such an entry may point already (it would then read a grain
 * written for another LBA), and a redundant grain table is patched where
 * its directory says, over any grain that overlaps it.  (Grain tables
 * that overlap each other or the metadata were refused at open.)  The
 * first problem is the error: the file, the table entry's offset, what is
 * wrong. */
static int ip_sound(struct vmdk *v)
{
    struct diag *d = v->bd.diag, why;
    int r = 0;

    for (size_t i = 0; i < v->n_ext && r == 0; i++) {
        struct vmdk_extent *x = &v->ext[i];
        if (x->type != VMDK_EXT_SPARSE)
            continue;
        diag_init(&why);
        v->bd.diag = &why;      /* (to say why it matters below) */
        r = vmdk_sparse_check(v, x, NULL);
        v->bd.diag = d;
        if (r < 0 && why.err)
            r = diag_fail(d, r, why.file, why.offset, "%s; the image is damaged (see "
                          "diskimg check): not writing into it", why.what);
        pthread_mutex_destroy(&why.lock);
    }
    return r;
}

/* What lies past the end of sparse extent x's file (`size` bytes) must be
 * nothing the extent names: new grains go there.  Refused: an embedded
 * descriptor or a grain directory (the one in use or its copy) that runs
 * past the end, and a grain table either directory names there (the
 * reader keeps the tables of the directory not in use as metadata too:
 * once the file grows, a grain inside one would be reported as corrupt,
 * and read as a table if that directory is ever used). */
static int ip_tail_free(struct vmdk *v, const struct vmdk_extent *x, uint64_t size)
{
    const struct vmdk4_header *h = &x->hdr;
    uint64_t dir_bytes = (uint64_t)x->gd_n * 4, gt_bytes = (uint64_t)x->gtes * 4;
    struct diag *d = v->bd.diag;
    static const char *const what[2] = { "grain directory", "redundant grain directory" };
    uint64_t dirs[2] = { h->gd_offset, (h->flags & VMDK4_FLAG_RGD) ? h->rgd_offset : 0 };

    if (h->desc_offset) {
        uint64_t off = h->desc_offset * VMDK_SECTOR, len = h->desc_sectors * VMDK_SECTOR;
        if (off >= size || len > size - off)
            return diag_fail(d, -EINVAL, x->name, 28, "the embedded descriptor at offset %llu "
                             "(%llu bytes) runs past the end of the file (%llu bytes): new "
                             "grains would go into it", (unsigned long long)off,
                             (unsigned long long)len, (unsigned long long)size);
    }
    for (int k = 0; k < 2; k++) {
        uint64_t off = dirs[k] * VMDK_SECTOR;
        if (!dirs[k] || (k == 1 && dirs[1] == dirs[0]))
            continue;
        if (off >= size || dir_bytes > size - off)
            return diag_fail(d, -EINVAL, x->name, k ? 48 : 56, "the %s at offset %llu (%llu "
                             "bytes) runs past the end of the file (%llu bytes): new grains "
                             "would go into it", what[k], (unsigned long long)off,
                             (unsigned long long)dir_bytes, (unsigned long long)size);
        uint8_t *raw = malloc(dir_bytes ? dir_bytes : 1);
        if (!raw)
            return diag_fail(d, -ENOMEM, x->name, -1, "out of memory");
        int r = bfile_pread(x->file, raw, dir_bytes, off);
        for (uint32_t i = 0; r == 0 && i < x->gd_n; i++) {
            uint64_t gto = (uint64_t)le32_get(raw + 4 * (size_t)i) * VMDK_SECTOR;
            if (gto && (gto >= size || gt_bytes > size - gto))
                r = diag_fail(d, -EINVAL, x->name, (int64_t)(off + 4 * (uint64_t)i),
                              "%s entry %u names a grain table at offset %llu that runs "
                              "past the end of the file (%llu bytes): new grains would go "
                              "into it", what[k], i, (unsigned long long)gto,
                              (unsigned long long)size);
        }
        free(raw);
        if (r < 0)
            return r;
    }
    return 0;
}

/* Whether files a and b are one file (the same bfile, or the same inode
 * opened under two names: "s.vmdk" and "./s.vmdk"). */
static bool same_file(const struct bfile *a, const struct bfile *b)
{
    return a == b || (a->open_seq && b->open_seq && a->dev == b->dev && a->ino == b->ino);
}

/* Why the image `v` cannot be written in place, or 0. */
static int ip_refusals(struct vmdk *v, const struct bd_create_opts *o)
{
    struct bd *bd = &v->bd;

    if (v->streaming || bd->file->kind != BFILE_REGULAR)
        return diag_fail(bd->diag, -ENOTSUP, bd->filename, -1,
                         "an existing vmdk is written in place only as a regular file");
    for (size_t i = 0; i < v->n_ext; i++) {
        const struct vmdk_extent *x = &v->ext[i];
        if (x->compressed || x->markers)
            return diag_fail(bd->diag, -ENOTSUP, x->name, -1, "streamOptimized images cannot "
                             "be written in place (their grains are compressed into a "
                             "stream); convert the image to monolithicSparse first");
        if (x->type == VMDK_EXT_VMFSSPARSE)
            return diag_fail(bd->diag, -ENOTSUP, x->name, -1,
                             "COWD (vmfsSparse) extents cannot be written in place");
        if (x->type == VMDK_EXT_SPARSE &&
            (x->grain_bytes != bd->granule || x->start % x->grain_bytes || !x->gd))
            return diag_fail(bd->diag, -ENOTSUP, x->name, -1, "sparse extents of different "
                             "grain sizes, or not starting on a grain, cannot be written in "
                             "place");
        /* (its footer must stay the last thing in the file) */
        if (x->type == VMDK_EXT_SPARSE && x->hdr.gd_offset == VMDK4_GD_AT_END)
            return diag_fail(bd->diag, -ENOTSUP, x->name, 56, "a sparse extent whose grain "
                             "directory is found through a footer at the end of the file "
                             "cannot be written in place (new grains would go after it)");
        /* new grains go at the end of a sparse extent's file: no other
         * extent, and not the descriptor, may be in that file */
        if (x->type != VMDK_EXT_SPARSE)
            continue;
        for (size_t j = 0; j < v->n_ext; j++)
            if (j != i && v->ext[j].file && same_file(x->file, v->ext[j].file))
                return diag_fail(bd->diag, -ENOTSUP, x->name, -1, "the sparse extent's file "
                                 "is also the file of extent %zu: it cannot be written in "
                                 "place", j + 1);
        if (!v->monolithic && same_file(x->file, bd->file))
            return diag_fail(bd->diag, -ENOTSUP, x->name, -1, "the sparse extent's file is "
                             "also the descriptor file: it cannot be written in place");
    }
    if (o->compress)
        return diag_fail(bd->diag, -ENOTSUP, bd->filename, -1, "-c: only streamOptimized "
                         "vmdk images hold compressed grains, and they cannot be written "
                         "in place");
    return 0;
}

int vmdk_inplace_create(struct bd **out, struct bfile *f, const struct bd_create_opts *o,
                        struct diag *d)
{
    struct bd_open_opts oo = { .format = "vmdk", .writable = true, .no_backing = true,
                               .allow_external = o->allow_external,
                               .no_external_files = o->no_external_files };
    struct bd *rbd = NULL;
    struct vmdk_ip *ip;
    int r;

    *out = NULL;
    /* the image again by its name, with the extent files open for writing */
    if ((r = bd_open(&rbd, f->path, &oo, d)) < 0)
        return r;
    if (rbd->drv != &bd_vmdk) {
        bd_close(rbd);
        return diag_fail(d, -EINVAL, f->path, -1, "not a vmdk image");
    }
    struct vmdk *v = (struct vmdk *)rbd;
    if ((r = ip_refusals(v, o)) < 0 || (r = ip_sound(v)) < 0) {
        bd_close(rbd);
        return r;
    }
    if (!(ip = calloc(1, sizeof(*ip)))) {
        bd_close(rbd);
        return diag_fail(d, -ENOMEM, f->path, -1, "out of memory");
    }
    bd_init(&ip->bd, &bd_vmdk_inplace, NULL, d);
    ip->rd = v;
    ip->bd.size = rbd->size;
    ip->bd.granule = rbd->granule;
    free(ip->bd.filename);
    ip->bd.filename = strdup(rbd->filename);
    ip->xs = calloc(v->n_ext, sizeof(*ip->xs));
    ip->pend = malloc(VMDK_IP_BATCH * sizeof(*ip->pend));
    ip->grain = malloc(rbd->granule);
    if (!ip->bd.filename || !ip->xs || !ip->pend || !ip->grain) {
        r = diag_fail(d, -ENOMEM, f->path, -1, "out of memory");
        goto fail;
    }
    for (size_t i = 0; i < v->n_ext; i++) {
        struct vmdk_extent *x = &v->ext[i];
        if (x->type != VMDK_EXT_SPARSE)
            continue;
        if ((r = bfile_refresh_size(x->file)) < 0)
            goto fail;
        /* grains go after everything the file holds, on a sector */
        uint64_t end = x->file->size;
        if ((r = ip_tail_free(v, x, end)) < 0)
            goto fail;
        ip->xs[i].keep = ip->xs[i].size0 = end;
        ip->xs[i].next = (end + VMDK_SECTOR - 1) / VMDK_SECTOR * VMDK_SECTOR;
        uint32_t *t = malloc((x->gd_n ? x->gd_n : 1) * sizeof(*t)), n = 0;
        if (!t) {
            r = diag_fail(d, -ENOMEM, f->path, -1, "out of memory");
            goto fail;
        }
        for (uint32_t k = 0; k < x->gd_n; k++)
            if (x->gd[k])
                t[n++] = x->gd[k];
        qsort(t, n, sizeof(*t), u32_cmp);
        ip->xs[i].tabs = t;
        ip->xs[i].n_tabs = n;
    }
    bfile_close(f);     /* taken over: the image is written through its reader */
    *out = &ip->bd;
    return 0;
fail:
    ip_close(&ip->bd);
    return r;
}

const struct bd_driver bd_vmdk_inplace = {
    .name = "vmdk",
    .pwrite = ip_pwrite,
    .write_zeroes = ip_write_zeroes,
    .finish = ip_finish,
    .abort = ip_abort,
    .close = ip_close,
};
