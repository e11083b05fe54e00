/* VHD: probe, open (footer, dynamic header, BAT, metadata map, parent of a
 * differencing disk), info, close, and the driver table.
 *
 * The footer at the end of the file is the one used; a dynamic disk's copy
 * at offset 0 stands in for it, with a warning, when the last one is
 * damaged (cookie or checksum).  The disk size follows qemu-img 7.2
 * (vhd_disk_size).  A differencing disk's parent is looked for through its
 * locators (W2ru relative path; the last component of the MacX URL and
 * of the W2ku absolute path; then the header's parent name), always through bd_open_ref
 * (confined to the image's folder), and must be a VHD whose unique id is
 * the one the header records.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "formats/vhd/vhd.h"
#include "formats/vhd/vhd_int.h"
#include "io/bfile.h"
#include "util/diag.h"
#include "util/endian.h"
#include "util/jval.h"

static int vhd_probe(const uint8_t *head, size_t len, const char *filename)
{
    (void)filename;
    /* a dynamic or differencing disk starts with its footer's copy */
    if (len >= VHD_FOOTER_SIZE && memcmp(head, VHD_FOOTER_COOKIE, 8) == 0)
        return 100;
    return 0;
}

/* A fixed disk is only its footer at the end: a valid checksum, and a
 * size that is the rest of the file. */
static int vhd_probe_tail(const uint8_t *tail, size_t len, uint64_t file_size,
                          const char *filename)
{
    struct vhd_footer f;
    char err[128];

    (void)filename;
    if (len < VHD_FOOTER_SIZE || file_size < VHD_FOOTER_SIZE)
        return 0;
    tail += len - VHD_FOOTER_SIZE;
    if (vhd_footer_decode(tail, &f, err, sizeof(err)) < 0 || !f.checksum_ok)
        return 0;
    if (vhd_footer_check(&f, err, sizeof(err)) < 0)
        return 0;
    if (f.type != VHD_TYPE_FIXED)
        return 90;      /* a dynamic disk whose copy at 0 is gone */
    uint64_t disk = file_size - VHD_FOOTER_SIZE;
    if (f.current_size == disk || vhd_disk_size(&f) == disk)
        return 90;
    return 0;
}

static struct diag *D(struct vhd *v)
{
    return v->bd.diag;
}

static void uuid_text(const uint8_t u[16], char out[37])
{
    snprintf(out, 37, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
             u[0], u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11],
             u[12], u[13], u[14], u[15]);
}

/* The footer: the last sector, or the copy at 0 of a dynamic disk. */
static int read_footer(struct vhd *v)
{
    struct bfile *f = v->bd.file;
    uint8_t b[VHD_FOOTER_SIZE];
    char err[200], err0[200];
    int r;

    if (v->file_size < VHD_FOOTER_SIZE)
        return diag_fail(D(v), -EINVAL, f->path, 0, "file of %llu bytes is too short for a "
                         "VHD footer", (unsigned long long)v->file_size);
    uint64_t end = v->file_size - VHD_FOOTER_SIZE;
    if ((r = bfile_pread(f, b, sizeof(b), end)) < 0)
        return r;
    r = vhd_footer_decode(b, &v->foot, err, sizeof(err));
    if (r == 0 && !v->foot.checksum_ok) {
        snprintf(err, sizeof(err), "footer checksum mismatch (stored %08x, computed %08x)",
                 v->foot.checksum, vhd_checksum(b, VHD_FOOTER_SIZE, 64));
        r = -EINVAL;
    }
    if (r == 0 && (r = vhd_footer_check(&v->foot, err, sizeof(err))) == 0) {
        v->data_end = end;
        return 0;
    }
    /* the copy at offset 0 (dynamic and differencing disks only) */
    struct vhd_footer c;
    int r0 = bfile_pread(f, b, sizeof(b), 0);
    if (r0 < 0)
        return r0;
    r0 = vhd_footer_decode(b, &c, err0, sizeof(err0));
    if (r0 == 0 && !c.checksum_ok) {
        snprintf(err0, sizeof(err0), "checksum mismatch (stored %08x, computed %08x)",
                 c.checksum, vhd_checksum(b, VHD_FOOTER_SIZE, 64));
        r0 = -EINVAL;
    }
    if (r0 == 0)
        r0 = vhd_footer_check(&c, err0, sizeof(err0));
    if (r0 == 0 && c.type == VHD_TYPE_FIXED) {
        snprintf(err0, sizeof(err0), "it is a fixed disk's");
        r0 = -EINVAL;
    }
    if (r0 < 0) {
        if (memcmp(b, VHD_FOOTER_COOKIE, 8) != 0)
            return diag_fail(D(v), r == -EFBIG ? r : -EINVAL, f->path, (int64_t)end, "%s",
                             err);
        return diag_fail(D(v), r == -EFBIG ? r : -EINVAL, f->path, (int64_t)end,
                         "%s; the footer copy at offset 0 cannot stand in: %s", err, err0);
    }
    snprintf(v->foot_err, sizeof(v->foot_err), "%s", err);
    v->foot = c;
    v->used_copy = true;
    v->data_end = end;
    return 0;
}

static int add_meta(struct vhd *v, uint64_t off, uint64_t len, const char *what)
{
    int r = metamap_add(&v->meta, off, len, what);
    if (r < 0)
        return diag_fail(D(v), r, v->bd.filename, (int64_t)off, "%s: %s", what,
                         r == -ENOMEM ? "out of memory" : "range wraps");
    return 0;
}

/* [off, off+len) must lie in the file before the footer and clear of the
 * structures recorded so far. */
static int place(struct vhd *v, uint64_t off, uint64_t len, const char *what)
{
    if (off > v->data_end || len > v->data_end - off)
        return diag_fail(D(v), -EINVAL, v->bd.filename, (int64_t)off,
                         "%s of %llu bytes at %llu is past the end of the data (%llu bytes "
                         "before the footer): truncated or corrupt image", what,
                         (unsigned long long)len, (unsigned long long)off,
                         (unsigned long long)v->data_end);
    for (size_t i = 0; i < v->meta.n; i++) {
        const struct metarange *m = &v->meta.r[i];
        if (off < m->off + m->len && m->off < off + len)
            return diag_fail(D(v), -EINVAL, v->bd.filename, (int64_t)off,
                             "%s overlaps the %s at %llu", what, m->what,
                             (unsigned long long)m->off);
    }
    return add_meta(v, off, len, what);
}

static int open_dynamic(struct vhd *v)
{
    struct bfile *f = v->bd.file;
    uint8_t b[VHD_DYNHDR_SIZE];
    char err[200];
    int r;

    /* the footer copy, when there is one, is metadata too */
    uint8_t c[8];
    if (v->foot.data_offset >= VHD_FOOTER_SIZE && (r = bfile_pread(f, c, 8, 0)) == 0 &&
        memcmp(c, VHD_FOOTER_COOKIE, 8) == 0 && (r = add_meta(v, 0, VHD_FOOTER_SIZE,
                                                              "footer copy")) < 0)
        return r;
    if ((r = place(v, v->foot.data_offset, VHD_DYNHDR_SIZE, "dynamic disk header")) < 0)
        return r;
    if ((r = bfile_pread(f, b, sizeof(b), v->foot.data_offset)) < 0)
        return r;
    if ((r = vhd_dynhdr_decode(b, &v->hdr, err, sizeof(err))) < 0)
        return diag_fail(D(v), r, f->path, (int64_t)v->foot.data_offset, "%s", err);
    if (!v->hdr.checksum_ok)
        return diag_fail(D(v), -EINVAL, f->path, (int64_t)v->foot.data_offset,
                         "dynamic disk header checksum mismatch (stored %08x, computed %08x)",
                         v->hdr.checksum, vhd_checksum(b, VHD_DYNHDR_SIZE, 36));
    v->block_size = v->hdr.block_size;
    v->bitmap_bytes = vhd_bitmap_bytes(v->block_size);
    uint64_t blocks = v->bd.size / v->block_size + (v->bd.size % v->block_size != 0);
    if (v->hdr.max_entries < blocks)
        return diag_fail(D(v), -EINVAL, f->path, (int64_t)v->foot.data_offset + 28,
                         "block allocation table of %u entries is too small for a disk of "
                         "%llu bytes in blocks of %u", v->hdr.max_entries,
                         (unsigned long long)v->bd.size, v->block_size);
    v->n_bat = v->hdr.max_entries;
    v->bat_bytes = ((uint64_t)v->n_bat * 4 + VHD_SECTOR - 1) / VHD_SECTOR * VHD_SECTOR;
    if ((r = place(v, v->hdr.table_offset, v->bat_bytes, "block allocation table")) < 0)
        return r;
    if ((r = bd_table_budget(&v->bd, v->bat_bytes, f->path, "the block allocation table")) < 0)
        return r;
    uint8_t *raw = malloc(v->bat_bytes ? v->bat_bytes : 1);
    if (!raw)
        return diag_fail(D(v), -ENOMEM, f->path, -1, "out of memory");
    if ((r = bfile_pread(f, raw, v->n_bat * (size_t)4, v->hdr.table_offset)) < 0) {
        free(raw);
        return r;
    }
    /* decoded in place: entry i is read before it is written */
    v->bat = (uint32_t *)raw;
    for (uint32_t i = 0; i < v->n_bat; i++)
        v->bat[i] = be32_get(raw + 4 * (size_t)i);
    /* the copy at 0 stands in for a damaged footer only in a whole file:
     * one whose structures end where that footer is (a cut file has its
     * last sector judged as a footer, and would lose its last block) */
    if (v->used_copy) {
        uint64_t end = v->hdr.table_offset + v->bat_bytes;
        if (v->foot.data_offset + VHD_DYNHDR_SIZE > end)
            end = v->foot.data_offset + VHD_DYNHDR_SIZE;
        for (uint32_t i = 0; i < v->n_bat; i++)
            if (v->bat[i] != VHD_BAT_UNUSED) {
                uint64_t e = (uint64_t)v->bat[i] * VHD_SECTOR + v->bitmap_bytes + v->block_size;
                if (e > end)
                    end = e;
            }
        for (int i = 0; i < VHD_LOCATORS; i++) {
            const struct vhd_locator *l = &v->hdr.loc[i];
            uint64_t e = l->offset + ((uint64_t)l->length + VHD_SECTOR - 1) / VHD_SECTOR * VHD_SECTOR;
            if (l->code && l->length && e <= v->data_end && e > end)
                end = e;
        }
        if (end != v->data_end)
            return diag_fail(D(v), -EINVAL, f->path, (int64_t)v->data_end,
                             "%s, and the file does not end where its blocks and tables "
                             "end (at %llu): truncated image (the footer copy at offset 0 "
                             "cannot stand in)", v->foot_err, (unsigned long long)end);
    }
    /* parent locators: their data is metadata (only those that fit the
     * file; a differencing disk reads them below) */
    for (int i = 0; i < VHD_LOCATORS; i++) {
        const struct vhd_locator *l = &v->hdr.loc[i];
        if (!l->code || !l->length)
            continue;
        uint64_t len = ((uint64_t)l->length + VHD_SECTOR - 1) / VHD_SECTOR * VHD_SECTOR;
        if (l->offset < v->data_end && len <= v->data_end - l->offset &&
            (r = add_meta(v, l->offset, len, "parent locator")) < 0)
            return r;
    }
    return 0;
}

/* The candidates for the parent's name, in the order they are tried. */
static int parent_names(struct vhd *v, char names[4][VHD_MAX_LOCATOR * 2], int *n)
{
    static const uint32_t order[] = { VHD_PLAT_W2RU, VHD_PLAT_MACX, VHD_PLAT_W2KU };
    uint8_t *data = malloc(VHD_MAX_LOCATOR);
    int r;

    *n = 0;
    if (!data)
        return diag_fail(D(v), -ENOMEM, v->bd.filename, -1, "out of memory");
    for (size_t k = 0; k < sizeof(order) / sizeof(order[0]); k++) {
        for (int i = 0; i < VHD_LOCATORS; i++) {
            const struct vhd_locator *l = &v->hdr.loc[i];
            if (l->code != order[k] || !l->length)
                continue;
            if (l->length > VHD_MAX_LOCATOR || l->offset > v->data_end ||
                l->length > v->data_end - l->offset) {
                free(data);
                return diag_fail(D(v), -EINVAL, v->bd.filename, (int64_t)l->offset,
                                 "parent locator %d: %u bytes at %llu are not inside the "
                                 "file (or longer than %u)", i, l->length,
                                 (unsigned long long)l->offset, VHD_MAX_LOCATOR);
            }
            if ((r = bfile_pread(v->bd.file, data, l->length, l->offset)) < 0) {
                free(data);
                return r;
            }
            char *out = names[*n];
            if (vhd_locator_path(l->code, data, l->length, out, VHD_MAX_LOCATOR * 2) < 0) {
                free(data);
                return diag_fail(D(v), -EINVAL, v->bd.filename, (int64_t)l->offset,
                                 "parent locator %d does not hold a path", i);
            }
            if (l->code != VHD_PLAT_W2RU) {
                /* an absolute path (Windows, or a Mac's URL) names a file on
                 * the machine that made the disk: its last component,
                 * beside the image */
                char *s = strrchr(out, '/');
                if (s)
                    memmove(out, s + 1, strlen(s + 1) + 1);
            }
            if (*out && *n < 3)
                (*n)++;
        }
    }
    free(data);
    char *pn = names[*n];
    if (vhd_utf16_to_utf8(v->hdr.parent_name, 256, pn, VHD_MAX_LOCATOR * 2) == 0 && *pn) {
        char *s = strrchr(pn, '/');
        if (s)
            memmove(pn, s + 1, strlen(s + 1) + 1);
        if (*pn)
            (*n)++;
    }
    return 0;
}

static int open_parent(struct vhd *v)
{
    struct bd *bd = &v->bd;
    char (*names)[VHD_MAX_LOCATOR * 2] = calloc(4, sizeof(*names));
    int n = 0, r, first = 0;
    char want[37], got[37];

    if (!names)
        return diag_fail(D(v), -ENOMEM, bd->filename, -1, "out of memory");
    if ((r = parent_names(v, names, &n)) < 0)
        goto out;
    if (n == 0) {
        r = diag_fail(D(v), -EINVAL, bd->filename, (int64_t)v->foot.data_offset,
                      "differencing disk names no parent (no locator, no parent name)");
        goto out;
    }
    if (!(bd->backing_name = strdup(names[0])) || !(bd->backing_fmt = strdup("vpc"))) {
        r = diag_fail(D(v), -ENOMEM, bd->filename, -1, "out of memory");
        goto out;
    }
    if (bd->opts.no_backing) {
        bd->backing_missing = true;
        r = 0;
        goto out;
    }
    for (int i = 0; i < n; i++) {
        bool dup = false;
        for (int j = 0; j < i; j++)
            dup |= strcmp(names[i], names[j]) == 0;
        if (dup)
            continue;
        r = bd_open_ref(bd, names[i], "vpc", &bd->backing);
        if (r == 0) {
            free(bd->backing_name);
            if (!(bd->backing_name = strdup(names[i]))) {
                r = diag_fail(D(v), -ENOMEM, bd->filename, -1, "out of memory");
                goto out;
            }
            break;
        }
        if (r != -ENOENT)
            goto out;           /* outside the folder, not a VHD, ...: say so */
        if (!first)
            first = r;
        diag_clear(D(v));
    }
    if (!bd->backing) {
        char tried[1024] = "";
        size_t k = 0;
        for (int i = 0; i < n && k < sizeof(tried); i++) {
            bool dup = false;
            for (int j = 0; j < i; j++)
                dup |= strcmp(names[i], names[j]) == 0;
            if (!dup)
                k += (size_t)snprintf(tried + k, sizeof(tried) - k, "%s'%s'", i ? ", " : "",
                                  names[i]);
        }
        r = diag_fail(D(v), -ENOENT, bd->filename, -1, "differencing disk: its parent "
                      "'%s' is missing (looked for %s beside the image)", names[n - 1],
                      tried);
        goto out;
    }
    const struct vhd *p = (const struct vhd *)bd->backing;
    if (memcmp(p->foot.uuid, v->hdr.parent_uuid, 16) != 0 && !bd->opts.ignore_parent_cid) {
        uuid_text(v->hdr.parent_uuid, want);
        uuid_text(p->foot.uuid, got);
        r = diag_fail(D(v), -EINVAL, bd->filename, (int64_t)v->foot.data_offset + 40,
                      "parent '%s' has unique id %s, the differencing disk expects %s "
                      "(it was changed after the child was made)", bd->backing_name, got,
                      want);
        goto out;
    }
    r = 0;
out:
    free(names);
    return r;
}

static int do_open(struct vhd *v)
{
    struct bfile *f = v->bd.file;
    int r;

    if (f->kind == BFILE_STREAM)
        return diag_fail(D(v), -ESPIPE, f->path, -1,
                         "reading a VHD needs a seekable input (its footer is at the end)");
    v->file_size = f->size;
    if ((r = read_footer(v)) < 0)
        return r;
    v->bd.size = vhd_disk_size(&v->foot);
    v->dynamic = v->foot.type != VHD_TYPE_FIXED;
    if ((r = add_meta(v, v->data_end, VHD_FOOTER_SIZE, "footer")) < 0)
        return r;
    if (!v->dynamic) {
        if (v->bd.size > v->data_end)
            return diag_fail(D(v), -EINVAL, f->path, (int64_t)v->data_end,
                             "fixed disk of %llu bytes in a file of %llu: truncated image",
                             (unsigned long long)v->bd.size,
                             (unsigned long long)v->file_size);
        v->bd.granule = VHD_SECTOR;
    } else {
        if ((r = open_dynamic(v)) < 0)
            return r;
        if (v->used_copy)
            diag_warn(D(v), f->path, (int64_t)v->data_end, "%s; using the footer copy at "
                      "offset 0", v->foot_err);
        v->bd.granule = v->block_size;
    }
    if ((r = metamap_seal(&v->meta)) < 0)
        return diag_fail(D(v), r, f->path, -1, "out of memory");
    if ((r = bd_table_budget(&v->bd, v->meta.n * (sizeof(struct metarange) + 8), f->path,
                             "the metadata map")) < 0)
        return r;
    if (v->foot.type == VHD_TYPE_DIFF && (r = open_parent(v)) < 0)
        return r;
    return 0;
}

static void vhd_close(struct bd *bd)
{
    struct vhd *v = to_vhd(bd);

    free(v->bat);
    metamap_free(&v->meta);
    bd_release(bd);
    free(v);
}

static int vhd_open(struct bd **out, struct bfile *f, const struct bd_open_opts *o,
                    struct bd *parent, struct diag *d)
{
    struct vhd *v = calloc(1, sizeof(*v));

    *out = NULL;
    if (!v) {
        bfile_close(f);
        return diag_fail(d, -ENOMEM, f->path, -1, "out of memory");
    }
    bd_init(&v->bd, &bd_vhd, f, d);
    v->bd.opts = *o;
    v->bd.parent = parent;
    v->bd.depth = parent ? parent->depth + 1 : 0;
    if (!v->bd.filename) {
        vhd_close(&v->bd);
        return diag_fail(d, -ENOMEM, f->path, -1, "out of memory");
    }
    int r = do_open(v);
    if (r < 0) {
        vhd_close(&v->bd);
        return r;
    }
    *out = &v->bd;
    return 0;
}

/* qemu-img's keys for vpc: the block size of a dynamic disk as cluster-size */
static int vhd_info(struct bd *bd, struct jval *obj)
{
    struct vhd *v = to_vhd(bd);

    if (v->dynamic)
        jv_set(obj, "cluster-size", jv_uint(v->block_size));
    return 0;
}

const struct bd_driver bd_vhd = {
    .name = "vpc",
    .alias = "vhd",
    .caps = BD_CAP_INPLACE,
    .create_options_help = vhdw_options_help,
    .describe_create = vhdw_describe_create,
    .probe = vhd_probe,
    .probe_tail = vhd_probe_tail,
    .open = vhd_open,
    .block_status = vhd_block_status,
    .pread = vhd_pread,
    .close = vhd_close,
    .info = vhd_info,
    .check = vhd_check,
    .resize = vhd_resize,
    .measure = vhd_measure,
    .create = vhdw_create,
};
