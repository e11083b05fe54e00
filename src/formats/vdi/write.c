/* VDI writer: qemu-img's layout.  Header (512 bytes) at 0, the block map
 * at 512 padded to a sector, the blocks of 1 MiB after it: a dynamic
 * image appends them in the order they are written (blocks never written
 * stay unallocated, zero 4 KiB pieces inside a block stay holes), a static
 * one (static=on) has every block in order from the start, the file sized
 * at once (holes until written).  The map, then the header last, at
 * finish.  Also -o help, the "Formatting ..." line, measure.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "formats/vdi/vdi.h"
#include "formats/vdi/vdi_int.h"
#include "formats/writer_util.h"
#include "io/bfile.h"
#include "io/ioq.h"
#include "util/diag.h"
#include "util/endian.h"
#include "util/kvopts.h"

const char vdiw_options_help[] =
    "Supported vdi options:\n"
    "  size=<size>            - Virtual disk size\n"
    "  static=<bool (on/off)> - VDI static (pre-allocated) image\n";

struct vdiw {
    struct bd bd;
    struct vdi_header h;
    uint32_t *map;
    uint32_t next;              /* next block index (dynamic) */
    struct wstate ws;
};

static struct vdiw *to_w(struct bd *bd)
{
    return (struct vdiw *)bd;
}

static int set_err(struct vdiw *w, int r)
{
    return wstate_err(&w->ws, r);
}

static int parse(struct kvopts *kv, bool *stat, char *err, size_t errlen)
{
    const char *s;
    uint64_t sz;
    int r;

    *stat = false;
    if (!kv)
        return 0;
    if ((r = kvopts_get_bool(kv, "static", stat, err, errlen)) < 0)
        return r;
    if (kvopts_get_size(kv, "size", &sz, err, errlen) < 0)
        return -EINVAL;
    if ((s = kvopts_get(kv, "preallocation")) && strcmp(s, "off") != 0) {
        snprintf(err, errlen, "vdi output supports preallocation=off only (static=on "
                 "allocates every block)");
        return -EINVAL;
    }
    return 0;
}

/* The layout of a new image of `size` bytes. */
static int layout(uint64_t size, bool stat, struct vdi_header *h, char *err, size_t errlen)
{
    memset(h, 0, sizeof(*h));
    uint64_t blocks = size / VDI_DEFAULT_BLOCK + (size % VDI_DEFAULT_BLOCK != 0);
    if (blocks > VDI_MAX_BLOCKS || size % VDI_SECTOR) {
        snprintf(err, errlen, size % VDI_SECTOR ? "the size must be whole sectors"
                 : "a vdi image of %llu bytes is too large", (unsigned long long)size);
        return -EFBIG;
    }
    h->version = VDI_V11;
    h->header_size = VDI_V11_MIN_HEADER;
    h->type = stat ? VDI_TYPE_STATIC : VDI_TYPE_DYNAMIC;
    h->off_blocks = VDI_HEADER_AREA;
    uint64_t map = (blocks * 4 + VDI_SECTOR - 1) / VDI_SECTOR * VDI_SECTOR;
    if (VDI_HEADER_AREA + map > UINT32_MAX) {
        snprintf(err, errlen, "a vdi image of %llu bytes is too large", (unsigned long long)size);
        return -EFBIG;
    }
    h->off_data = (uint32_t)(VDI_HEADER_AREA + map);
    h->sector_size = VDI_SECTOR;
    h->disk_size = size;
    h->block_size = VDI_DEFAULT_BLOCK;
    h->blocks = (uint32_t)blocks;
    h->blocks_allocated = stat ? h->blocks : 0;
    return 0;
}

int vdi_measure(struct kvopts *o, uint64_t size, struct bd *src, struct bd_measure *m,
                struct diag *d)
{
    struct vdi_header h;
    char err[200];
    bool stat;
    int r;

    memset(m, 0, sizeof(*m));
    if (src)
        size = src->size;
    size = (size + VDI_SECTOR - 1) / VDI_SECTOR * VDI_SECTOR;
    if ((r = parse(o, &stat, err, sizeof(err))) < 0 ||
        (r = layout(size, stat, &h, err, sizeof(err))) < 0)
        return diag_fail(d, r, NULL, -1, "%s", err);
    uint64_t used = h.blocks;
    if (src && !stat && (r = bd_data_units(src, h.block_size, &used)) < 0)
        return r;
    m->required = h.off_data + used * h.block_size;
    m->fully_allocated = h.off_data + (uint64_t)h.blocks * h.block_size;
    return 0;
}

void vdiw_describe_create(const struct bd_create_opts *co, char *buf, size_t len)
{
    const struct kvopts *kv = co->o;
    const char *v = NULL;

    for (size_t j = 0; kv && j < kv->n; j++)
        if (!strcmp(kv->v[j].key, "static"))
            v = kv->v[j].val;
    bool on = v && (!strcmp(v, "on") || !strcmp(v, "true") || !strcmp(v, "yes"));
    snprintf(buf, len, " size=%llu static=%s", (unsigned long long)co->size, on ? "on" : "off");
}

static void new_uuid(uint8_t u[16])
{
    if (getrandom(u, 16, GRND_NONBLOCK) != 16) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        uint64_t a = (uint64_t)ts.tv_nsec * 0x9e3779b97f4a7c15ull ^ (uint64_t)ts.tv_sec;
        uint64_t b = a * 0xbf58476d1ce4e5b9ull ^ (uint64_t)getpid();
        memcpy(u, &a, 8);
        memcpy(u + 8, &b, 8);
    }
    u[7] = (uint8_t)((u[7] & 0x0f) | 0x40);     /* version 4 (RTUUID byte order) */
    u[8] = (uint8_t)((u[8] & 0x3f) | 0x80);
}

static void w_free(struct vdiw *w)
{
    free(w->map);
    bd_release(&w->bd);
    free(w);
}

int vdiw_create(struct bd **out, struct bfile *f, const struct bd_create_opts *o,
                struct diag *d)
{
    struct vdiw *w;
    char err[200];
    bool stat;
    int r;

    *out = NULL;
    if (o->existing)
        return vdiip_open(out, f, o, d);
    if (o->backing_file)
        return diag_fail(d, -ENOTSUP, f->path, -1, "vdi output cannot have a backing file");
    if (o->compress)
        return diag_fail(d, -EINVAL, f->path, -1, "vdi images cannot be compressed (-c)");
    if (f->kind != BFILE_REGULAR)
        return diag_fail(d, -ENOTSUP, f->path, -1, "vdi output needs a regular file");
    if (!(w = calloc(1, sizeof(*w))))
        return diag_fail(d, -ENOMEM, f->path, -1, "out of memory");
    bd_init(&w->bd, &bd_vdiw, f, d);
    uint64_t size = (o->size + VDI_SECTOR - 1) / VDI_SECTOR * VDI_SECTOR;
    if ((r = parse(o->o, &stat, err, sizeof(err))) < 0 ||
        (r = layout(size, stat, &w->h, err, sizeof(err))) < 0) {
        r = diag_fail(d, r, f->path, -1, "%s", err);
        goto fail;
    }
    new_uuid(w->h.uuid_create);
    new_uuid(w->h.uuid_modify);
    w->bd.size = size;
    /* sectors: the converter finds the zero runs (4 KiB) and leaves them
     * out; a block is allocated by its first data */
    w->bd.granule = VDI_SECTOR;
    wstate_init(&w->ws, &w->bd, o);
    if (!(w->map = malloc((size_t)w->h.blocks * 4 + 4))) {
        r = diag_fail(d, -ENOMEM, f->path, -1, "out of memory");
        goto fail;
    }
    for (uint32_t i = 0; i < w->h.blocks; i++)
        w->map[i] = stat ? i : VDI_UNALLOCATED;
    int fl = fcntl(f->fd, F_GETFL);
    if (fl >= 0 && (fl & O_DIRECT) && fcntl(f->fd, F_SETFL, fl & ~O_DIRECT) < 0) {
        r = diag_errno(d, -errno, f->path, -1, "cannot turn off O_DIRECT");
        goto fail;
    }
    uint64_t fsize = stat ? w->h.off_data + (uint64_t)w->h.blocks * w->h.block_size : 0;
    if ((r = wfile_fresh(f, fsize, d)) < 0)
        goto fail;
    *out = &w->bd;
    return 0;
fail:
    w->bd.file = NULL;
    w_free(w);
    return r;
}

static int place(void *wp, uint64_t b, uint32_t from, uint32_t to, uint64_t *host)
{
    struct vdiw *w = wp;

    (void)from;
    (void)to;
    if (w->map[b] == VDI_UNALLOCATED)
        w->map[b] = w->next++;
    *host = w->h.off_data + (uint64_t)w->map[b] * w->h.block_size;
    return 1;                   /* a new file: zero pieces stay holes */
}

/* Zero 4 KiB pieces inside a block stay holes. */
static int v_pwrite(struct bd *bd, const void *buf, size_t len, uint64_t off,
                    ioq_done_fn done, void *opaque)
{
    struct vdiw *w = to_w(bd);
    int r = wstate_check(&w->ws, bd->size, off, len, "write");

    if (r < 0) {
        done(opaque, r);
        return r;
    }
    return wstate_write_blocks(&w->ws, bd->file, buf, len, off, w->h.block_size, place, w,
                               done, opaque);
}

static int v_write_zeroes(struct bd *bd, uint64_t off, uint64_t len)
{
    /* a block never written is unallocated (dynamic) or a hole (static);
     * a range of an allocated block never written is a hole too (writes
     * never overlap, bd.h) */
    return wstate_check(&to_w(bd)->ws, bd->size, off, len, "write_zeroes");
}

static int v_finish(struct bd *bd)
{
    struct vdiw *w = to_w(bd);
    struct bfile *f = bd->file;
    uint8_t hb[VDI_HEADER_AREA];
    int r;

    if ((r = wstate_finish_begin(&w->ws)) < 0)
        return r;
    size_t map_bytes = w->h.off_data - w->h.off_blocks;
    uint8_t *raw = calloc(1, map_bytes ? map_bytes : 1);
    if (!raw)
        return set_err(w, diag_fail(bd->diag, -ENOMEM, bd->filename, -1, "out of memory"));
    for (uint32_t i = 0; i < w->h.blocks; i++)
        le32_put(raw + 4 * (size_t)i, w->map[i]);
    r = set_err(w, bfile_pwrite(f, raw, map_bytes, w->h.off_blocks));
    free(raw);
    if (r < 0)
        return r;
    if (w->h.type == VDI_TYPE_DYNAMIC) {
        w->h.blocks_allocated = w->next;
        /* the last block whole, as qemu writes it */
        uint64_t end = w->h.off_data + (uint64_t)w->next * w->h.block_size;
        if (ftruncate(f->fd, (off_t)end) < 0)
            return set_err(w, diag_errno(bd->diag, -errno, bd->filename, -1,
                                         "cannot set the size"));
    }
    if (w->ws.durable && (r = set_err(w, bfile_sync(f))) < 0)
        return r;
    vdi_header_encode(&w->h, hb);
    if ((r = set_err(w, bfile_pwrite(f, hb, sizeof(hb), 0))) < 0)
        return r;
    if (w->ws.durable && (r = set_err(w, bfile_sync(f))) < 0)
        return r;
    bfile_refresh_size(f);
    return 0;
}

static void v_abort(struct bd *bd)
{
    wstate_abort(&to_w(bd)->ws);
}

static void v_close(struct bd *bd)
{
    w_free(to_w(bd));
}

const struct bd_driver bd_vdiw = {
    .name = "vdi",
    .create_options_help = vdiw_options_help,
    .create = vdiw_create,
    .pwrite = v_pwrite,
    .write_zeroes = v_write_zeroes,
    .finish = v_finish,
    .abort = v_abort,
    .close = v_close,
};
