/* VMDK writer, streamOptimized: VMware's stream layout (see write.h),
 * written strictly in order through a staging buffer, so that the same
 * bytes can go to a file or down a pipe.
 *
 * Grains arrive compressed from the pipeline's workers (compress()), or
 * plain when deflate could not shrink them: those are stored as a zlib
 * stream of stored blocks.  Either way a grain becomes one record (LBA,
 * size, zlib stream, zeros to the sector end) in the staging buffer, which
 * goes out in 1 MiB writes.  The grain table being filled is kept; when
 * the writes move past it, it follows its grains with a GT marker.  The
 * grain directory (4 bytes per 32 MiB of disk, at most 16 MiB for the
 * 128 TiB limit) is written at the end, then the footer and end-of-stream.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "formats/vmdk/write.h"
#include "io/bfile.h"
#include "io/ioq.h"
#include "util/diag.h"
#include "util/endian.h"
#include "zerodetect/zerodetect.h"

#define STAGE_BYTES   (1u << 20)
#define OVERHEAD      VMDKW_GRAIN_SECTORS   /* grains start at 64 KiB, as VMware's */
#define NO_GT         UINT64_MAX

struct vmdkw_stream {
    struct bd bd;
    struct vmdkw_params p;
    uint32_t cid;
    char *extent_name;
    bool pipe;              /* the output is a stream: header first */
    bool durable;
    int err;
    bool finished;

    uint64_t gt_count;      /* grain directory entries */
    uint32_t *gd;           /* sector of each written grain table, 0 = none */
    uint32_t gt[VMDKW_GTES];
    uint64_t gt_idx;        /* table being filled, or NO_GT */
    uint64_t next_grain;    /* grains must come in increasing order */

    uint8_t *stage;         /* bytes not yet written, from stage_off */
    size_t stage_len;
    uint64_t stage_off;
    uint8_t *pad;           /* the last grain padded to its sector end */
};

extern const struct bd_driver bd_vmdkw_stream;

static struct vmdkw_stream *to_w(struct bd *bd)
{
    return (struct vmdkw_stream *)bd;
}

static int set_err(struct vmdkw_stream *w, int r)
{
    if (r < 0 && !w->err)
        w->err = r;
    return r;
}

static int fail(struct vmdkw_stream *w, int err, int64_t off, const char *what)
{
    return set_err(w, diag_fail(w->bd.diag, err, w->bd.filename, off, "%s", what));
}

static uint64_t round_sector(uint64_t v)
{
    return (v + VMDK_SECTOR - 1) / VMDK_SECTOR * VMDK_SECTOR;
}

/* ---- staging ------------------------------------------------------------------ */

static int stage_flush(struct vmdkw_stream *w)
{
    int r;

    if (!w->stage_len)
        return 0;
    if ((r = set_err(w, bfile_pwrite(w->bd.file, w->stage, w->stage_len, w->stage_off))) < 0)
        return r;
    w->stage_off += w->stage_len;
    w->stage_len = 0;
    return 0;
}

/* Room for `len` more bytes (len <= STAGE_BYTES); *at is where they go. */
static int stage_room(struct vmdkw_stream *w, size_t len, uint8_t **at)
{
    int r;

    if (w->stage_len + len > STAGE_BYTES && (r = stage_flush(w)) < 0)
        return r;
    *at = w->stage + w->stage_len;
    return 0;
}

/* The sector the next staged byte lands on (records start on sectors). */
static uint64_t stage_sector(const struct vmdkw_stream *w)
{
    return (w->stage_off + w->stage_len) / VMDK_SECTOR;
}

static int check_sector(struct vmdkw_stream *w, uint64_t sectors)
{
    if (stage_sector(w) + sectors >= VMDKW_MAX_FILE_SECTORS)
        return fail(w, -EFBIG, (int64_t)(w->stage_off + w->stage_len),
                    "the streamOptimized file would grow past 2 TiB (grain and table "
                    "offsets are 32-bit sector numbers)");
    return 0;
}

/* A metadata marker followed by `body` (n sectors' worth, zero-padded). */
static int put_meta(struct vmdkw_stream *w, uint32_t type, const void *body, size_t len)
{
    uint64_t sectors = round_sector(len) / VMDK_SECTOR;
    uint8_t *at;
    int r;

    if ((r = check_sector(w, 1 + sectors)) < 0 || (r = stage_room(w, VMDK_SECTOR, &at)) < 0)
        return r;
    vmdkw_marker_encode(at, type == VMDK_MARKER_EOS ? 0 : sectors, type);
    w->stage_len += VMDK_SECTOR;
    const uint8_t *b = body;
    while (len) {   /* a body may be larger than the staging buffer (the GD) */
        size_t n = len < STAGE_BYTES / 2 ? len : STAGE_BYTES / 2;
        if ((r = stage_room(w, round_sector(n), &at)) < 0)
            return r;
        memcpy(at, b, n);
        memset(at + n, 0, round_sector(n) - n);
        w->stage_len += round_sector(n);
        b += n;
        len -= n;
    }
    return 0;
}

/* ---- grain tables ------------------------------------------------------------- */

static int gt_close(struct vmdkw_stream *w)
{
    uint8_t buf[VMDKW_GTES * 4];

    if (w->gt_idx == NO_GT)
        return 0;
    for (unsigned i = 0; i < VMDKW_GTES; i++)
        le32_put(buf + 4 * i, w->gt[i]);
    w->gd[w->gt_idx] = (uint32_t)(stage_sector(w) + 1);    /* after its marker */
    w->gt_idx = NO_GT;
    return put_meta(w, VMDK_MARKER_GT, buf, sizeof(buf));
}

/* The table of grain g (closing the one before), checking the order. */
static int grain_slot(struct vmdkw_stream *w, uint64_t g, uint32_t **e)
{
    int r;

    if (g < w->next_grain)
        return set_err(w, diag_fail(w->bd.diag, -EINVAL, w->bd.filename,
                                    (int64_t)(g * VMDKW_GRAIN_BYTES),
                                    "internal error: streamOptimized grains written out of "
                                    "order (grain %llu after %llu)", (unsigned long long)g,
                                    (unsigned long long)w->next_grain - 1));
    if (w->gt_idx != g / VMDKW_GTES) {
        if ((r = gt_close(w)) < 0)
            return r;
        w->gt_idx = g / VMDKW_GTES;
        memset(w->gt, 0, sizeof(w->gt));
    }
    w->next_grain = g + 1;
    *e = &w->gt[g % VMDKW_GTES];
    return 0;
}

/* ---- create --------------------------------------------------------------------- */

static void w_free(struct vmdkw_stream *w)
{
    free(w->gd);
    free(w->stage);
    free(w->pad);
    free(w->extent_name);
    bd_release(&w->bd);
    free(w);
}

static struct vmdk4_header header_of(const struct vmdkw_stream *w, uint64_t gd_offset)
{
    struct vmdk4_header h = {
        .version = 3,
        .flags = VMDK4_FLAG_NL_DETECT | VMDK4_FLAG_COMPRESSED | VMDK4_FLAG_MARKERS |
                 (w->p.zeroed_grain ? VMDK4_FLAG_ZERO_GRAIN : 0),
        .capacity = w->p.capacity,
        .grain_sectors = VMDKW_GRAIN_SECTORS,
        .desc_offset = 1,
        .desc_sectors = VMDKW_DESC_SECTORS,
        .gtes = VMDKW_GTES,
        .rgd_offset = 0,
        .gd_offset = gd_offset,
        .overhead = OVERHEAD,
        .compress = VMDK4_COMPRESS_DEFLATE,
    };
    return h;
}

/* Header (gdOffset "at the end") and descriptor: the first 21 sectors. */
static int encode_head(struct vmdkw_stream *w, uint8_t *buf)
{
    struct vmdk4_header h = header_of(w, VMDK4_GD_AT_END);
    char lines[4200];

    memset(buf, 0, (1 + VMDKW_DESC_SECTORS) * VMDK_SECTOR);
    vmdkw_header_encode(&h, buf);
    snprintf(lines, sizeof(lines), "RW %llu SPARSE \"%s\"\n",
             (unsigned long long)w->p.capacity, w->extent_name);
    if (vmdkw_descriptor(&w->p, w->cid, lines, (char *)buf + VMDK_SECTOR,
                         VMDKW_DESC_SECTORS * VMDK_SECTOR) < 0)
        return fail(w, -ENAMETOOLONG, VMDK_SECTOR, "the descriptor does not fit its 10 KiB");
    return 0;
}

int vmdkw_stream_create(struct bd **out, struct bfile *f, const struct bd_create_opts *o,
                        const struct vmdkw_params *p, struct diag *d)
{
    struct vmdkw_stream *w;
    int r;

    *out = NULL;
    if (f->kind != BFILE_REGULAR && f->kind != BFILE_STREAM)
        return diag_fail(d, -ENOTSUP, f->path, -1,
                         "vmdk streamOptimized output goes to a regular file or a pipe");
    if (!(w = calloc(1, sizeof(*w))))
        return diag_fail(d, -ENOMEM, f->path, -1, "out of memory");
    bd_init(&w->bd, &bd_vmdkw_stream, f, d);
    w->p = *p;
    w->bd.size = p->size;
    w->bd.granule = VMDKW_GRAIN_BYTES;
    w->pipe = f->kind == BFILE_STREAM;
    w->durable = o->durable && !w->pipe;
    w->cid = vmdkw_new_cid();
    w->gt_idx = NO_GT;
    w->gt_count = p->capacity / ((uint64_t)VMDKW_GTES * VMDKW_GRAIN_SECTORS) +
                  (p->capacity % ((uint64_t)VMDKW_GTES * VMDKW_GRAIN_SECTORS) != 0);
    if (vmdkw_keep_backing(&w->bd, &w->p) < 0) {
        r = diag_fail(d, -ENOMEM, f->path, -1, "out of memory");
        goto fail;
    }
    if ((r = vmdkw_extent_name(f, &w->extent_name)) < 0) {
        r = r == -EINVAL ? diag_fail(d, r, f->path, -1, "the file name cannot go into the "
                                     "vmdk descriptor (it has a double quote or a control "
                                     "character)")
                         : diag_fail(d, r, f->path, -1, "out of memory");
        goto fail;
    }
    if (!(w->gd = calloc(w->gt_count ? w->gt_count : 1, 4)) ||
        !(w->stage = malloc(STAGE_BYTES)) || !(w->pad = malloc(VMDKW_GRAIN_BYTES))) {
        r = diag_fail(d, -ENOMEM, f->path, -1, "out of memory");
        goto fail;
    }
    if (w->pipe) {
        /* the stream starts with the header; the rest of the overhead is zeros */
        if ((r = encode_head(w, w->stage)) < 0)
            goto fail;
        memset(w->stage + (1 + VMDKW_DESC_SECTORS) * VMDK_SECTOR, 0,
               (OVERHEAD - 1 - VMDKW_DESC_SECTORS) * VMDK_SECTOR);
        w->stage_len = OVERHEAD * VMDK_SECTOR;
    } else {
        int fl = fcntl(f->fd, F_GETFL);
        if (fl >= 0 && (fl & O_DIRECT) && fcntl(f->fd, F_SETFL, fl & ~O_DIRECT) < 0) {
            r = diag_errno(d, -errno, f->path, -1, "cannot turn off O_DIRECT");
            goto fail;
        }
        if (f->size && ftruncate(f->fd, 0) < 0) {
            r = diag_errno(d, -errno, f->path, -1, "cannot truncate");
            goto fail;
        }
        /* header and descriptor are written last, at finish */
        w->stage_off = OVERHEAD * VMDK_SECTOR;
    }
    *out = &w->bd;
    return 0;
fail:
    w->bd.file = NULL;      /* the caller still owns the file */
    w_free(w);
    return r;
}

/* ---- writes ------------------------------------------------------------------------ */

/* Bytes of grain g that lie inside the capacity (the last may be short). */
static size_t grain_len(const struct vmdkw_stream *w, uint64_t g)
{
    uint64_t end = w->p.capacity * VMDK_SECTOR, start = g * VMDKW_GRAIN_BYTES;
    return end - start < VMDKW_GRAIN_BYTES ? (size_t)(end - start) : VMDKW_GRAIN_BYTES;
}

static int check_write(struct vmdkw_stream *w, uint64_t off, uint64_t len)
{
    if (w->err)
        return w->err;
    if (w->finished)
        return fail(w, -EINVAL, (int64_t)off, "internal error: write after finish");
    if (len == 0 || off >= w->p.size || len > w->p.size - off ||
        off % VMDKW_GRAIN_BYTES || (len % VMDKW_GRAIN_BYTES && off + len != w->p.size))
        return diag_fail(w->bd.diag, -EINVAL, w->bd.filename, (int64_t)off,
                         "internal error: write of %llu bytes at %llu is not whole grains "
                         "inside the image", (unsigned long long)len,
                         (unsigned long long)off);
    return 0;
}

/* One grain record: LBA, size, then the zlib stream, which `fill` writes
 * (at most `max` bytes) and whose length it returns. */
static int put_grain(struct vmdkw_stream *w, uint64_t g, size_t max,
                     ssize_t (*fill)(void *ctx, uint8_t *out, size_t cap), void *ctx)
{
    size_t room = (size_t)round_sector(VMDK_GRAIN_HDR + max);
    uint32_t *e = NULL;
    uint8_t *at;
    int r;

    if ((r = grain_slot(w, g, &e)) < 0 || (r = check_sector(w, room / VMDK_SECTOR)) < 0 ||
        (r = stage_room(w, room, &at)) < 0)
        return r;
    ssize_t n = fill(ctx, at + VMDK_GRAIN_HDR, max);
    if (n <= 0)
        return fail(w, n < 0 ? (int)n : -EIO, (int64_t)(g * VMDKW_GRAIN_BYTES),
                    "cannot encode a grain");
    le64_put(at, g * VMDKW_GRAIN_SECTORS);
    le32_put(at + 8, (uint32_t)n);
    size_t rec = (size_t)round_sector(VMDK_GRAIN_HDR + (size_t)n);
    memset(at + VMDK_GRAIN_HDR + n, 0, rec - VMDK_GRAIN_HDR - (size_t)n);
    *e = (uint32_t)stage_sector(w);
    w->stage_len += rec;
    return 0;
}

struct plain { const uint8_t *data; size_t len; };

static ssize_t fill_copy(void *ctx, uint8_t *out, size_t cap)
{
    struct plain *p = ctx;
    if (p->len > cap)
        return -ENOSPC;
    memcpy(out, p->data, p->len);
    return (ssize_t)p->len;
}

static ssize_t fill_stored(void *ctx, uint8_t *out, size_t cap)
{
    struct plain *p = ctx;
    return vmdkw_zlib_stored(p->data, p->len, out, cap);
}

static ssize_t fill_deflate(void *ctx, uint8_t *out, size_t cap)
{
    struct plain *p = ctx;
    ssize_t n = vmdkw_deflate(p->data, p->len, out, cap);
    return n ? n : vmdkw_zlib_stored(p->data, p->len, out, cap);
}

/* Grain g's bytes inside the capacity: `data` (len bytes), zero-padded to
 * the sector end when the image ends inside a sector. */
static const uint8_t *grain_bytes(struct vmdkw_stream *w, uint64_t g, const uint8_t *data,
                                  size_t len, size_t *glen)
{
    *glen = grain_len(w, g);
    if (len >= *glen)
        return data;
    memcpy(w->pad, data, len);
    memset(w->pad + len, 0, *glen - len);
    return w->pad;
}

static int st_pwrite(struct bd *bd, const void *buf, size_t len, uint64_t off,
                     ioq_done_fn done, void *opaque)
{
    struct vmdkw_stream *w = to_w(bd);
    const uint8_t *b = buf;
    int r;

    if ((r = check_write(w, off, len)) < 0)
        goto out;
    for (size_t pos = 0; pos < len; pos += VMDKW_GRAIN_BYTES) {
        uint64_t g = (off + pos) / VMDKW_GRAIN_BYTES;
        size_t n = len - pos < VMDKW_GRAIN_BYTES ? len - pos : VMDKW_GRAIN_BYTES, glen;
        struct plain p = { grain_bytes(w, g, b + pos, n, &glen), glen };
        /* grains the workers could not shrink: stored; zeros written on
         * purpose (-S 0) deflate to almost nothing, here on this thread */
        bool zero = buffer_is_zero(p.data, p.len);
        if ((r = put_grain(w, g, vmdkw_zlib_stored_bound(glen),
                           zero ? fill_deflate : fill_stored, &p)) < 0)
            goto out;
    }
out:
    set_err(w, r);
    done(opaque, r);
    return r;
}

static ssize_t st_compress(struct bd *bd, const void *in, size_t len, void *out, size_t cap)
{
    struct vmdkw_stream *w = to_w(bd);
    uint8_t *pad;
    ssize_t r;

    if (len > VMDKW_GRAIN_BYTES)
        return -EINVAL;
    /* only the image's last grain is short: it is compressed up to the
     * end of its last sector (the reader inflates that much) */
    size_t last = (size_t)(w->p.capacity * VMDK_SECTOR -
                           (w->p.capacity * VMDK_SECTOR - 1) / VMDKW_GRAIN_BYTES *
                           VMDKW_GRAIN_BYTES);
    if (len == VMDKW_GRAIN_BYTES || len >= last)
        return vmdkw_deflate(in, len, out, cap);
    if (!(pad = calloc(1, last)))
        return -ENOMEM;
    memcpy(pad, in, len);
    r = vmdkw_deflate(pad, last, out, cap);
    free(pad);
    return r;
}

static int st_pwrite_compressed(struct bd *bd, const void *cdata, size_t clen, uint64_t off,
                                ioq_done_fn done, void *opaque)
{
    struct vmdkw_stream *w = to_w(bd);
    struct plain p = { cdata, clen };
    int r;

    if ((r = check_write(w, off, w->p.size - off < VMDKW_GRAIN_BYTES ?
                                     w->p.size - off : VMDKW_GRAIN_BYTES)) == 0) {
        if (clen == 0 || clen > VMDKW_GRAIN_BYTES)
            r = fail(w, -EINVAL, (int64_t)off, "internal error: bad compressed write");
        else
            r = put_grain(w, off / VMDKW_GRAIN_BYTES, clen, fill_copy, &p);
    }
    set_err(w, r);
    done(opaque, r);
    return r;
}

static int st_write_zeroes(struct bd *bd, uint64_t off, uint64_t len)
{
    struct vmdkw_stream *w = to_w(bd);
    int r;

    if ((r = check_write(w, off, len)) < 0)
        return set_err(w, r);
    if (!w->p.backing)
        return 0;   /* no parent: grains never written read as zeros */
    /* over a parent: a grain of zeros (deflated to a sector) for each */
    for (uint64_t g = off / VMDKW_GRAIN_BYTES; g * VMDKW_GRAIN_BYTES < off + len; g++) {
        struct plain p = { w->pad, grain_len(w, g) };
        memset(w->pad, 0, p.len);
        if ((r = put_grain(w, g, vmdkw_zlib_stored_bound(p.len), fill_deflate, &p)) < 0)
            return r;
    }
    return 0;
}

/* ---- finish -------------------------------------------------------------------------- */

static int st_finish(struct bd *bd)
{
    struct vmdkw_stream *w = to_w(bd);
    struct bfile *f = bd->file;
    uint8_t *gd = NULL;
    uint8_t sec[VMDK_SECTOR];
    int r;

    if (w->err)
        return w->err;
    if (w->finished)
        return fail(w, -EINVAL, -1, "internal error: finish called twice");
    w->finished = true;
    if ((r = gt_close(w)) < 0)
        return r;
    /* the grain directory (little-endian in place: no second copy of up to
     * 16 MiB), then the footer: the header with the directory's offset */
    size_t gd_bytes = (size_t)(w->gt_count * 4);
    gd = (uint8_t *)w->gd;
    for (uint64_t i = 0; i < w->gt_count; i++)
        le32_put(gd + 4 * i, w->gd[i]);
    uint64_t gd_sector = stage_sector(w) + 1;
    if ((r = put_meta(w, VMDK_MARKER_GD, gd, gd_bytes)) < 0)
        return r;
    struct vmdk4_header foot = header_of(w, gd_sector);
    vmdkw_header_encode(&foot, sec);
    if ((r = put_meta(w, VMDK_MARKER_FOOTER, sec, sizeof(sec))) < 0 ||
        (r = put_meta(w, VMDK_MARKER_EOS, NULL, 0)) < 0 || (r = stage_flush(w)) < 0)
        return r;
    if (w->pipe)
        return 0;
    if (w->durable && (r = set_err(w, bfile_sync(f))) < 0)
        return r;
    /* last: header and descriptor, which make the file an image */
    uint8_t *head = calloc(1 + VMDKW_DESC_SECTORS, VMDK_SECTOR);
    if (!head)
        return fail(w, -ENOMEM, -1, "out of memory");
    if ((r = encode_head(w, head)) == 0)
        r = set_err(w, bfile_pwrite(f, head, (1 + VMDKW_DESC_SECTORS) * VMDK_SECTOR, 0));
    free(head);
    if (r < 0)
        return r;
    if (w->durable && (r = set_err(w, bfile_sync(f))) < 0)
        return r;
    bfile_refresh_size(f);
    return 0;
}

static void st_abort(struct bd *bd)
{
    struct vmdkw_stream *w = to_w(bd);

    w->finished = true;
    if (!w->err)
        w->err = -ECANCELED;
}

static void st_close(struct bd *bd)
{
    w_free(to_w(bd));
}

ssize_t vmdkw_compress(struct bd *bd, const void *in, size_t len, void *out, size_t cap)
{
    /* only streamOptimized images are compressed */
    if (bd->drv != &bd_vmdkw_stream)
        return 0;
    return st_compress(bd, in, len, out, cap);
}

const struct bd_driver bd_vmdkw_stream = {
    .name = "vmdk",
    .caps = BD_CAP_ALL_COMPRESSED | BD_CAP_IN_ORDER,   /* grains are always deflated */
    .create_options_help = vmdkw_options_help,
    .create = vmdkw_create,
    .pwrite = st_pwrite,
    .write_zeroes = st_write_zeroes,
    .compress = st_compress,
    .pwrite_compressed = st_pwrite_compressed,
    .finish = st_finish,
    .abort = st_abort,
    .close = st_close,
};
