/* qcow2 driver: probe, open, close (reading side); the writing side is
 * write*.c (create() returns a bd of its own driver, bd_qcow2_out).
 *
 * open() decodes and validates the header, loads the L1 table being read
 * (bounded by the virtual size, by qemu's 32 MiB limit and by the file
 * size), reads the snapshot table, opens the external data file and the
 * backing file through bd_open_ref*() (which applies the folder policy),
 * and selects a snapshot when asked.  Reading is in read.c.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "formats/qcow2/amend.h"
#include "formats/qcow2/measure.h"
#include "formats/qcow2/read_int.h"
#include "formats/qcow2/write.h"
#include "io/bfile.h"
#include "util/diag.h"

static int qcow2_probe(const uint8_t *head, size_t len, const char *filename)
{
    (void)filename;
    return qcow2_has_magic(head, len) ? 100 : 0;
}

static void qcow2_close(struct bd *bd)
{
    struct qcow2 *q = to_qcow2(bd);

    if (!q)
        return;
    free(q->l1);
    qcow2_l2cache_free(q->l2);
    codec_inflate_pool_destroy(&q->inflate);
    qcow2_bitmaps_free(q->bitmaps, q->nbitmaps);
    qcow2_meta_free(q);
    for (uint32_t i = 0; i < q->nsnaps; i++)
        qcow2_snapshot_clear(&q->snaps[i]);
    free(q->snaps);
    bfile_close(q->data);
    bd_release(bd);
    free(q);
}

/* Read and decode the header cluster. */
int qcow2_refuse_unclean(struct qcow2 *q)
{
    if (q->h.incompatible & QCOW2_INCOMPAT_DIRTY)
        return diag_fail(q->bd.diag, -EINVAL, q->bd.filename, -1,
                         "the image was not closed cleanly (dirty bit set); "
                         "repair it first with 'diskimg check -r all'");
    if (q->h.incompatible & QCOW2_INCOMPAT_CORRUPT)
        return diag_fail(q->bd.diag, -EINVAL, q->bd.filename, -1,
                         "the image is marked corrupt; repair it first with "
                         "'diskimg check -r all'");
    return 0;
}

static int read_header(struct qcow2 *q)
{
    struct bd *bd = &q->bd;
    uint8_t first[QH_V2_LENGTH];
    size_t got;
    int r = bfile_pread_upto(bd->file, first, sizeof(first), 0, &got);

    if (r < 0)
        return r;
    uint32_t cs = qcow2_header_cluster_size(first, got);
    if (cs == 0)  /* too short, bad magic or cluster_bits: let decode say which */
        return qcow2_header_decode(first, got, &q->h, bd->diag, bd->filename);
    size_t want = cs < q->file_size ? cs : (size_t)q->file_size;
    uint8_t *buf = malloc(want);
    if (!buf)
        return diag_fail(bd->diag, -ENOMEM, bd->filename, -1, "out of memory");
    r = bfile_pread(bd->file, buf, want, 0);
    if (r == 0)
        r = qcow2_header_decode(buf, want, &q->h, bd->diag, bd->filename);
    free(buf);
    return r;
}

static int open_references(struct qcow2 *q, const struct bd_open_opts *o)
{
    struct bd *bd = &q->bd;
    const struct qcow2_header *h = &q->h;
    int r;

    if (h->incompatible & QCOW2_INCOMPAT_DATA_FILE) {
        r = bd_open_ref_file(bd, h->data_file, false, &q->data);
        if (r < 0)
            return r;
    }
    if (h->has_backing_file) {
        bd->backing_name = strdup(h->backing_file);
        if (h->has_backing_fmt)
            bd->backing_fmt = strdup(h->backing_fmt);
        if (!bd->backing_name || (h->has_backing_fmt && !bd->backing_fmt))
            return diag_fail(bd->diag, -ENOMEM, bd->filename, -1, "out of memory");
        if (o->no_backing) {
            bd->backing_missing = true;
        } else {
            r = bd_open_ref(bd, h->backing_file, bd->backing_fmt, &bd->backing);
            if (r < 0)
                return r;
        }
    }
    return 0;
}

static int qcow2_open(struct bd **out, struct bfile *f, const struct bd_open_opts *o,
                      struct bd *parent, struct diag *d)
{
    struct qcow2 *q = calloc(1, sizeof(*q));
    int r;

    *out = NULL;
    if (!q) {
        r = diag_fail(d, -ENOMEM, f->path, -1, "out of memory");
        bfile_close(f);
        return r;
    }
    bd_init(&q->bd, &bd_qcow2, f, d);
    q->bd.opts = *o;
    q->bd.parent = parent;
    q->bd.depth = parent ? parent->depth + 1 : 0;
    q->snapshot = -1;
    struct bd *bd = &q->bd;

    if (f->kind == BFILE_STREAM) {
        r = diag_fail(d, -ESPIPE, f->path, -1,
                      "qcow2 images need a seekable input, not a pipe");
        goto fail;
    }
    q->file_size = f->size;
    if ((r = read_header(q)) < 0)
        goto fail;
    const struct qcow2_header *h = &q->h;
    codec_inflate_pool_init(&q->inflate, h->compression_type, h->cluster_size);
    /* qemu sees the virtual size in whole 512-byte sectors */
    bd->size = h->size & ~(uint64_t)511;
    bd->granule = h->cluster_size;
    bd->dirty = (h->incompatible & QCOW2_INCOMPAT_DIRTY) != 0;

    /* entries past what the virtual size needs are never read */
    uint32_t loaded = h->l1_size < h->l1_needed ? h->l1_size : (uint32_t)h->l1_needed;
    if ((r = qcow2_load_l1(q, h->l1_table_offset, h->l1_size, loaded)) < 0)
        goto fail;
    if ((r = qcow2_l2cache_new(&q->l2, f, h->cluster_size, QCOW2_L2_CACHE_BYTES, d)) < 0)
        goto fail;
    if ((r = qcow2_read_snapshots(q)) < 0)
        goto fail;
    if ((r = qcow2_read_bitmaps(q)) < 0)
        goto fail;
    if ((r = qcow2_meta_build(q)) < 0)
        goto fail;
    if ((r = open_references(q, o)) < 0)
        goto fail;
    if (o->snapshot && (r = qcow2_select_snapshot(q, o->snapshot)) < 0)
        goto fail;
    *out = bd;
    return 0;
fail:
    if (!q->inflate.cluster_size)
        codec_inflate_pool_init(&q->inflate, 0, 512);
    qcow2_close(bd);
    return r;
}

const struct bd_driver bd_qcow2 = {
    .name = "qcow2",
    /* to a pipe: the layout is planned in a first pass over the content */
    .caps = BD_CAP_STREAM_OUT | BD_CAP_STREAM_TWO_PASS | BD_CAP_INPLACE | BD_CAP_BACKING,
    .probe = qcow2_probe,
    .open = qcow2_open,
    .block_status = qcow2_block_status,
    .pread = qcow2_pread,
    .close = qcow2_close,
    .info = qcow2_info,
    .check = qcow2_check,
    .resize = qcow2_resize,
    .snapshot = qcow2_snapshot_op,
    .set_backing = qcow2_set_backing,
    .make_empty = qcow2_make_empty,
    .amend = qcow2_amend,
    /* writing: a new image is a bd_qcow2_out (write.c) */
    .create_options_help = qcow2w_options_help,
    .describe_create = qcow2w_describe_create,
    .create = qcow2w_create,
    .compress = qcow2w_compress,
    .measure = qcow2_measure,
};
