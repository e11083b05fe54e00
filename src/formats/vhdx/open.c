/* VHDX: probe, open (identifier, headers, the log, region table, metadata,
 * BAT, a differencing disk's parent), info, close, and the driver table.
 *
 * The current header is the valid one with the higher sequence number (two
 * valid headers with the same number must be the same header).  When it
 * names a log, the log is replayed in memory first (log.c), and everything
 * after is read through it.  Region table 1 is used, table 2 when table 1
 * is damaged (with a warning).  Unknown regions and metadata items marked
 * required are refused; the metadata must give a block size of 1 to
 * 256 MiB (a power of two), sector sizes of 512 or 4096, a disk size of at
 * most 64 TiB.  The header section (the first MiB), the log, the BAT and
 * the metadata regions must lie in the file without overlapping; they make
 * the metadata map that blocks must keep clear of.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "formats/vhdx/vhdx.h"
#include "formats/vhdx/vhdx_int.h"
#include "formats/vhdx/write.h"
#include "io/bfile.h"
#include "util/diag.h"
#include "util/endian.h"
#include "util/jval.h"

static int vhdx_probe(const uint8_t *head, size_t len, const char *filename)
{
    (void)filename;
    return vhdx_file_id_ok(head, len) ? 100 : 0;
}

static struct diag *D(struct vhdx *v)
{
    return v->bd.diag;
}

static int read_headers(struct vhdx *v)
{
    uint8_t *b = malloc(VHDX_HEADER_SIZE);
    int r = 0;

    if (!b)
        return diag_fail(D(v), -ENOMEM, v->bd.filename, -1, "out of memory");
    for (int i = 0; i < 2; i++) {
        uint64_t off = VHDX_HEADER1_OFF + (uint64_t)i * VHDX_HEADER_BLOCK;
        if ((r = bfile_pread(v->bd.file, b, VHDX_HEADER_SIZE, off)) < 0)
            goto out;
        v->hdr_ok[i] = vhdx_header_decode(b, &v->hdrs[i], v->hdr_err[i],
                                          sizeof(v->hdr_err[i])) == 0;
    }
    if (!v->hdr_ok[0] && !v->hdr_ok[1]) {
        r = diag_fail(D(v), -EINVAL, v->bd.filename, VHDX_HEADER1_OFF, "no valid header: "
                      "%s (header 1); %s (header 2)", v->hdr_err[0], v->hdr_err[1]);
        goto out;
    }
    if (v->hdr_ok[0] && v->hdr_ok[1]) {
        if (v->hdrs[0].seq == v->hdrs[1].seq &&
            memcmp(&v->hdrs[0], &v->hdrs[1], sizeof(v->hdrs[0])) != 0) {
            r = diag_fail(D(v), -EINVAL, v->bd.filename, VHDX_HEADER2_OFF, "the two headers "
                          "differ but have the same sequence number %llu",
                          (unsigned long long)v->hdrs[0].seq);
            goto out;
        }
        v->cur = v->hdrs[1].seq > v->hdrs[0].seq;
    } else {
        v->cur = v->hdr_ok[1];
    }
    v->hdr = v->hdrs[v->cur];
out:
    free(b);
    return r;
}

static int read_regions(struct vhdx *v)
{
    uint8_t *b = malloc(VHDX_REGION_SIZE);
    char err[2][160];
    int r[2] = { 1, 1 };        /* 1: not tried */

    if (!b)
        return diag_fail(D(v), -ENOMEM, v->bd.filename, -1, "out of memory");
    for (int i = 0; i < 2; i++) {
        uint64_t off = i ? VHDX_REGION2_OFF : VHDX_REGION1_OFF;
        int k = vhdx_vread(v, b, VHDX_REGION_SIZE, off, "the region table");
        if (k < 0) {
            free(b);
            return k;
        }
        r[i] = vhdx_regions_decode(b, &v->reg, err[i], sizeof(err[i]));
        if (r[i] == 0) {
            v->region_used = i;
            break;
        }
        if (r[i] != -EINVAL)    /* an unknown required region, no memory */
            break;
    }
    free(b);
    if (r[0] == 0)
        return 0;
    if (r[1] == 0) {
        snprintf(v->region_err, sizeof(v->region_err), "%s", err[0]);
        diag_warn(D(v), v->bd.filename, VHDX_REGION1_OFF, "region table 1: %s; using region "
                  "table 2", err[0]);
        return 0;
    }
    if (r[0] != -EINVAL)
        return diag_fail(D(v), r[0], v->bd.filename, VHDX_REGION1_OFF, "%s", err[0]);
    return diag_fail(D(v), r[1], v->bd.filename, VHDX_REGION1_OFF, "%s (region table 1); "
                     "%s (region table 2)", err[0], err[1]);
}

static int add_meta(struct vhdx *v, uint64_t off, uint64_t len, const char *what)
{
    if (off > v->vfile_size || len > v->vfile_size - off)
        return diag_fail(D(v), -EINVAL, v->bd.filename, (int64_t)off, "%s of %llu bytes at "
                         "%llu is past the end of the file (%llu bytes): truncated image",
                         what, (unsigned long long)len, (unsigned long long)off,
                         (unsigned long long)v->vfile_size);
    for (size_t i = 0; i < v->map.n; i++) {
        const struct metarange *m = &v->map.r[i];
        if (off < m->off + m->len && m->off < off + len)
            return diag_fail(D(v), -EINVAL, v->bd.filename, (int64_t)off,
                             "%s overlaps the %s at %llu", what, m->what,
                             (unsigned long long)m->off);
    }
    int r = metamap_add(&v->map, off, len, what);
    if (r < 0)
        return diag_fail(D(v), r, v->bd.filename, (int64_t)off, "%s: %s", what,
                         r == -ENOMEM ? "out of memory" : "range wraps");
    return 0;
}

/* One metadata item's bytes (at most 1 MiB, checked by the table). */
static int read_item(struct vhdx *v, int k, uint8_t **out)
{
    const struct vhdx_meta_entry *e = &v->meta.item[k];

    *out = malloc(e->len ? e->len : 1);
    if (!*out)
        return diag_fail(D(v), -ENOMEM, v->bd.filename, -1, "out of memory");
    int r = vhdx_vread(v, *out, e->len, v->reg.meta.off + e->off, "a metadata item");
    if (r < 0) {
        free(*out);
        *out = NULL;
    }
    return r;
}

static int read_metadata(struct vhdx *v)
{
    uint8_t *b = malloc(VHDX_META_TABLE_SIZE);
    char err[200];
    int r;

    if (!b)
        return diag_fail(D(v), -ENOMEM, v->bd.filename, -1, "out of memory");
    if ((r = vhdx_vread(v, b, VHDX_META_TABLE_SIZE, v->reg.meta.off,
                        "the metadata table")) == 0 &&
        (r = vhdx_meta_decode(b, v->reg.meta.len, &v->meta, err, sizeof(err))) < 0)
        r = diag_fail(D(v), r == -ENOMEM ? r : r == -ENOTSUP ? r : -EINVAL,
                      v->bd.filename, (int64_t)v->reg.meta.off, "%s", err);
    free(b);
    if (r < 0)
        return r;
    for (int k = 0; k < VHDX_ITEMS; k++) {
        if (!v->meta.have[k] || k == VHDX_ITEM_PARENT_LOCATOR)
            continue;
        uint8_t *it;
        if ((r = read_item(v, k, &it)) < 0)
            return r;
        uint32_t len = v->meta.item[k].len;
        switch (k) {
        case VHDX_ITEM_FILE_PARAMS:
            r = vhdx_file_params_decode(it, len, &v->p, err, sizeof(err));
            break;
        case VHDX_ITEM_DISK_SIZE:
            r = vhdx_disk_size_decode(it, len, &v->p, err, sizeof(err));
            break;
        case VHDX_ITEM_PAGE83:
            r = vhdx_page83_decode(it, len, &v->p, err, sizeof(err));
            break;
        case VHDX_ITEM_LOGICAL_SECTOR:
            r = vhdx_sector_size_decode(it, len, false, &v->p, err, sizeof(err));
            break;
        case VHDX_ITEM_PHYSICAL_SECTOR:
            r = vhdx_sector_size_decode(it, len, true, &v->p, err, sizeof(err));
            break;
        }
        free(it);
        if (r < 0)
            return diag_fail(D(v), r, v->bd.filename,
                             (int64_t)(v->reg.meta.off + v->meta.item[k].off), "%s", err);
    }
    if ((r = vhdx_params_check(&v->p, err, sizeof(err))) < 0)
        return diag_fail(D(v), r, v->bd.filename,
                         (int64_t)(v->reg.meta.off + v->meta.item[VHDX_ITEM_DISK_SIZE].off),
                         "%s", err);
    v->diff = v->p.has_parent;
    if (v->diff) {
        if (!v->meta.have[VHDX_ITEM_PARENT_LOCATOR])
            return diag_fail(D(v), -EINVAL, v->bd.filename, (int64_t)v->reg.meta.off,
                             "differencing disk without a parent locator");
        uint8_t *it;
        if ((r = read_item(v, VHDX_ITEM_PARENT_LOCATOR, &it)) < 0)
            return r;
        r = vhdx_ploc_decode(it, v->meta.item[VHDX_ITEM_PARENT_LOCATOR].len, &v->ploc, err,
                             sizeof(err));
        free(it);
        if (r < 0)
            return diag_fail(D(v), r, v->bd.filename, (int64_t)(v->reg.meta.off +
                             v->meta.item[VHDX_ITEM_PARENT_LOCATOR].off), "%s", err);
    }
    return 0;
}

static void read_creator(struct vhdx *v)
{
    uint8_t b[VHDX_CREATOR_LEN];
    size_t k = 0;

    if (bfile_pread(v->bd.file, b, sizeof(b), VHDX_CREATOR_OFF) < 0) {
        diag_clear(D(v));
        return;
    }
    /* printable ASCII only: it is shown, never used */
    for (size_t i = 0; i < sizeof(b) / 2 && k + 1 < sizeof(v->creator); i++) {
        uint16_t c = le16_get(b + 2 * i);
        if (!c)
            break;
        v->creator[k++] = c >= 0x20 && c < 0x7f ? (char)c : '?';
    }
    v->creator[k] = 0;
}

/* A log that does not replay (corrupt, or writing where it may not) is an
 * error; with --salvage, on a read-only open, the image is read as the file
 * holds it, without the log's writes, and the reason becomes a warning.
 * Out of memory and I/O errors stay errors: they say nothing of the log. */
static int salvage_log(struct vhdx *v, int r)
{
    struct diag *d = D(v);

    if (!v->bd.opts.salvage || v->bd.file->writable || (r != -EINVAL && r != -EFBIG) || !d)
        return r;
    char what[sizeof(d->what)];
    snprintf(what, sizeof(what), "%s", d->what);
    int64_t off = d->offset;
    diag_clear(d);
    if (v->ov.bytes)
        bd_table_return(&v->bd, v->ov.bytes);
    vhdx_ov_free(&v->ov);
    memset(&v->log, 0, sizeof(v->log));
    v->vfile_size = v->file_size;
    diag_warn(d, v->bd.filename, off, "%s; read without its log (--salvage): the "
              "writes the log holds are missing", what);
    return 0;
}

static int do_open(struct vhdx *v)
{
    struct bfile *f = v->bd.file;
    uint8_t id[8];
    int r;

    if (f->kind == BFILE_STREAM)
        return diag_fail(D(v), -ESPIPE, f->path, -1,
                         "reading a VHDX needs a seekable input");
    v->file_size = v->vfile_size = f->size;
    if (v->file_size < VHDX_REGION2_OFF + VHDX_REGION_SIZE)
        return diag_fail(D(v), -EINVAL, f->path, 0, "file of %llu bytes is too short for a "
                         "VHDX header section: truncated image",
                         (unsigned long long)v->file_size);
    if ((r = bfile_pread(f, id, sizeof(id), 0)) < 0)
        return r;
    if (!vhdx_file_id_ok(id, sizeof(id)))
        return diag_fail(D(v), -EINVAL, f->path, 0, "no VHDX file identifier ('vhdxfile')");
    read_creator(v);
    if ((r = read_headers(v)) < 0)
        return r;
    if (!vhdx_guid_is_zero(v->hdr.log_guid)) {
        if ((r = vhdx_log_replay(v)) < 0 && (r = salvage_log(v, r)) < 0)
            return r;
        v->bd.dirty = true;
    }
    if ((r = read_regions(v)) < 0)
        return r;
    if ((r = add_meta(v, 0, VHDX_HEADER_AREA, "header section")) < 0)
        return r;
    if (v->hdr.log_length &&
        (r = add_meta(v, v->hdr.log_offset, v->hdr.log_length, "log")) < 0)
        return r;
    if ((r = add_meta(v, v->reg.bat.off, v->reg.bat.len, "BAT region")) < 0 ||
        (r = add_meta(v, v->reg.meta.off, v->reg.meta.len, "metadata region")) < 0)
        return r;
    if ((r = metamap_seal(&v->map)) < 0)
        return diag_fail(D(v), r, f->path, -1, "out of memory");
    if ((r = read_metadata(v)) < 0)
        return r;
    v->bd.size = v->p.disk_size;
    v->bd.granule = v->p.block_size;
    v->chunk_ratio = vhdx_chunk_ratio(v->p.block_size, v->p.logical_sector);
    v->n_blocks = vhdx_data_blocks(v->p.disk_size, v->p.block_size);
    v->n_bat = vhdx_bat_entries(v->p.disk_size, v->p.block_size, v->p.logical_sector,
                                v->diff);
    if ((r = vhdx_bat_load(v)) < 0)
        return r;
    if (v->diff && (r = vhdx_open_parent(v)) < 0)
        return r;
    return 0;
}

static void vhdx_close(struct bd *bd)
{
    struct vhdx *v = to_vhdx(bd);

    free(v->bat);
    free(v->bad);
    metamap_free(&v->map);
    vhdx_ov_free(&v->ov);
    vhdx_ploc_free(&v->ploc);
    bd_release(bd);
    free(v);
}

static int vhdx_open(struct bd **out, struct bfile *f, const struct bd_open_opts *o,
                     struct bd *parent, struct diag *d)
{
    struct vhdx *v = calloc(1, sizeof(*v));

    *out = NULL;
    if (!v) {
        bfile_close(f);
        return diag_fail(d, -ENOMEM, f->path, -1, "out of memory");
    }
    bd_init(&v->bd, &bd_vhdx, f, d);
    v->bd.opts = *o;
    v->bd.parent = parent;
    v->bd.depth = parent ? parent->depth + 1 : 0;
    if (!v->bd.filename) {
        vhdx_close(&v->bd);
        return diag_fail(d, -ENOMEM, f->path, -1, "out of memory");
    }
    int r = do_open(v);
    if (r < 0) {
        vhdx_close(&v->bd);
        return r;
    }
    *out = &v->bd;
    return 0;
}

/* qemu-img's keys for vhdx: the block size as cluster-size. */
static int vhdx_info(struct bd *bd, struct jval *obj)
{
    struct vhdx *v = to_vhdx(bd);

    jv_set(obj, "cluster-size", jv_uint(v->p.block_size));
    return 0;
}

const struct bd_driver bd_vhdx = {
    .name = "vhdx",
    .probe = vhdx_probe,
    .open = vhdx_open,
    .block_status = vhdx_block_status,
    .pread = vhdx_pread,
    .close = vhdx_close,
    .info = vhdx_info,
    .check = vhdx_check,
    /* the writer (write*.c, measure.c, resize.c) */
    .create_options_help = vhdxw_options_help,
    .describe_create = vhdxw_describe_create,
    .create = vhdxw_create,
    .measure = vhdx_measure,
    .resize = vhdx_resize,
};
