/* raw: the image is the disk, byte for byte.  Reading: holes of the file
 * (SEEK_HOLE) read as zeros without being read.  The writing side is
 * write.c; the driver (bd_raw) is defined here.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <unistd.h>

#include "formats/raw/raw_int.h"
#include "io/bfile.h"
#include "util/diag.h"

static int raw_probe(const uint8_t *head, size_t len, const char *filename)
{
    (void)head, (void)len, (void)filename;
    return 1; /* anything is a raw image */
}

static int raw_open(struct bd **out, struct bfile *f, const struct bd_open_opts *o,
                    struct bd *parent, struct diag *d)
{
    struct raw *r = calloc(1, sizeof(*r));

    if (!r) {
        bfile_close(f);
        return diag_fail(d, -ENOMEM, f->path, -1, "out of memory");
    }
    bd_init(&r->bd, &bd_raw, f, d);
    r->bd.opts = *o;
    r->bd.parent = parent;
    r->bd.depth = parent ? parent->depth + 1 : 0;
    r->bd.size = f->size;
    r->can_punch = r->can_zero_range = true;
    *out = &r->bd;
    return 0;
}

static int raw_block_status(struct bd *bd, uint64_t off, uint64_t len,
                            struct bd_extent *e)
{
    struct bfile *f = bd->file;

    e->flags = BD_DATA | BD_ALLOCATED;
    e->len = len;
    e->host_offset = (int64_t)off;
    e->host = bd;
    if (f->kind != BFILE_REGULAR)
        return 0;
    /* SEEK_DATA from `off`: if it lands past off, [off, data) is a hole. */
    off_t data = lseek(f->fd, (off_t)off, SEEK_DATA);
    if (data < 0) {
        if (errno == ENXIO) {           /* no data from off to EOF */
            e->flags = BD_ZERO | BD_ALLOCATED;
            return 0;
        }
        return 0;                       /* no SEEK_DATA here: all data */
    }
    if ((uint64_t)data > off) {
        uint64_t hole = (uint64_t)data - off;
        e->flags = BD_ZERO | BD_ALLOCATED;
        e->len = hole < len ? hole : len;
        return 0;
    }
    off_t hole = lseek(f->fd, (off_t)off, SEEK_HOLE);
    if (hole >= 0 && (uint64_t)hole > off && (uint64_t)hole - off < len)
        e->len = (uint64_t)hole - off;
    return 0;
}

static int raw_pread(struct bd *bd, void *buf, size_t len, uint64_t off)
{
    return bfile_pread(bd->file, buf, len, off);
}
static void raw_close(struct bd *bd)
{
    bd_release(bd);
    free(to_raw(bd));
}

const struct bd_driver bd_raw = {
    .name = "raw",
    .caps = BD_CAP_STREAM_OUT | BD_CAP_UNKNOWN_SIZE | BD_CAP_INPLACE | BD_CAP_OFFLOAD_LATE,
    .create_options_help =
        "Supported raw options:\n"
        "  preallocation=<str>    - Preallocation mode (allowed values: off)\n"
        "  size=<size>            - Virtual disk size\n",
    .probe = raw_probe,
    .open = raw_open,
    .block_status = raw_block_status,
    .pread = raw_pread,
    .create = raw_create,
    .pwrite = raw_pwrite,
    .write_zeroes = raw_write_zeroes,
    .map_for_offload = raw_map_for_offload,
    .finish = raw_finish,
    .abort = raw_abort,
    .close = raw_close,
    .resize = raw_resize,
    .measure = raw_measure,
};

