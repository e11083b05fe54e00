#define _GNU_SOURCE
#include "formats/bd.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "formats/registry.h"
#include "io/bfile.h"
#include "util/diag.h"

void bd_init(struct bd *bd, const struct bd_driver *drv, struct bfile *f,
             struct diag *d)
{
    bd->drv = drv;
    bd->file = f;
    bd->diag = d;
    bd->granule = 512;
    bd->filename = strdup(f && f->path ? f->path : "");
}

const struct bd_driver *bd_find_driver(const char *name)
{
    for (size_t i = 0; bd_drivers[i]; i++)
        if (strcmp(bd_drivers[i]->name, name) == 0 ||
            (bd_drivers[i]->alias && strcmp(bd_drivers[i]->alias, name) == 0))
            return bd_drivers[i];
    return NULL;
}

static bool name_claims_format(const char *path, const char **ext)
{
    static const char *const exts[] = { ".qcow2", ".qcow", ".vmdk", ".ova", ".vhd",
                                         ".vhdx", ".vdi" };
    size_t n = strlen(path);

    for (size_t i = 0; i < sizeof(exts) / sizeof(exts[0]); i++) {
        size_t e = strlen(exts[i]);
        if (n > e && strcasecmp(path + n - e, exts[i]) == 0) {
            *ext = exts[i] + 1;
            return true;
        }
    }
    return false;
}

int bd_probe(struct bfile *f, const struct bd_driver **drv, struct diag *d)
{
    static uint8_t zeros[1];
    uint8_t *head = malloc(BFILE_STREAM_HEAD);
    size_t got = 0;
    int best = 0, r;
    const char *ext;

    *drv = NULL;
    if (!head)
        return diag_fail(d, -ENOMEM, f->path, -1, "out of memory");
    r = bfile_pread_upto(f, head, BFILE_STREAM_HEAD, 0, &got);
    if (r < 0) {
        free(head);
        return r;
    }
    for (size_t i = 0; bd_drivers[i]; i++) {
        const struct bd_driver *dr = bd_drivers[i];
        if (!dr->probe || dr == &bd_raw)
            continue;
        int score = dr->probe(got ? head : zeros, got, f->path);
        if (score > best) {
            best = score;
            *drv = dr;
        }
    }
    /* signatures at the end (fixed VHD) */
    if (f->kind == BFILE_REGULAR || f->kind == BFILE_BLOCKDEV || f->kind == BFILE_MEMORY ||
        (f->kind == BFILE_SLICE && f->base->kind != BFILE_STREAM)) {
        size_t tl = f->size < 512 ? (size_t)f->size : 512;
        size_t tgot = 0;
        r = tl ? bfile_pread_upto(f, head, tl, f->size - tl, &tgot) : 0;
        if (r < 0) {
            free(head);
            return r;           /* an I/O error is one, wherever it is */
        }
        if (r == 0 && tgot == tl) {
            for (size_t i = 0; bd_drivers[i]; i++) {
                const struct bd_driver *dr = bd_drivers[i];
                if (!dr->probe_tail)
                    continue;
                int score = dr->probe_tail(head, tl, f->size, f->path);
                if (score > best) {
                    best = score;
                    *drv = dr;
                }
            }
        }
    }
    free(head);
    if (!*drv && name_claims_format(f->path, &ext))
        return diag_fail(d, -EINVAL, f->path, 0,
                         "named like a %s image but no known format signature was "
                         "found (damaged header?); pass -f raw to read it as raw", ext);
    return 0;
}

int bd_open_bfile(struct bd **out, struct bfile *f, const struct bd_open_opts *o,
                  struct bd *parent, struct diag *d)
{
    const struct bd_driver *drv = NULL;
    int r;

    *out = NULL;
    if (o->format) {
        drv = bd_find_driver(o->format);
        if (!drv) {
            r = diag_fail(d, -EINVAL, f->path, -1, "unknown format '%s'", o->format);
            bfile_close(f);
            return r;
        }
    } else {
        r = bd_probe(f, &drv, d);
        if (r < 0) {
            bfile_close(f);
            return r;
        }
        if (!drv)
            drv = &bd_raw;
    }
    if (!drv->open) {
        r = diag_fail(d, -ENOTSUP, f->path, -1, "reading %s images is not supported",
                      drv->name);
        bfile_close(f);
        return r;
    }
    r = drv->open(out, f, o, parent, d);
    if (r < 0)
        *out = NULL;
    return r;
}

int bd_open(struct bd **out, const char *path, const struct bd_open_opts *o,
            struct diag *d)
{
    struct bfile *f;
    int r = bfile_open(&f, path, o->writable ? BFILE_O_RDWR : 0, d);

    *out = NULL;
    if (r < 0)
        return r;
    return bd_open_bfile(out, f, o, NULL, d);
}

int bd_block_status(struct bd *bd, uint64_t off, uint64_t len,
                    struct bd_extent *e)
{
    int depth = 0;

    if (off >= bd->size)
        return diag_fail(bd->diag, -EINVAL, bd->filename, (int64_t)off,
                         "block status past the end of the image");
    if (len > bd->size - off)
        len = bd->size - off;
    for (;;) {
        memset(e, 0, sizeof(*e));
        e->host_offset = -1;
        int r = bd->drv->block_status(bd, off, len, e);
        if (r < 0)
            return r;
        if (e->len == 0 || e->len > len)
            return diag_fail(bd->diag, -EIO, bd->filename, (int64_t)off,
                             "internal error: block status returned a bad length");
        e->depth = depth;
        if (!e->host && e->host_offset >= 0)
            e->host = bd;
        if (e->flags & BD_ALLOCATED)
            return 0;
        /* not decided by this layer: ask the backing file, or read zeros
         * (a host offset the layer reports stays, as in qemu-img map: a
         * qcow2 extended-L2 subcluster that is unallocated in an allocated
         * cluster) */
        if (!bd->backing || off >= bd->backing->size) {
            e->flags = BD_ZERO;
            return 0;
        }
        len = e->len;
        if (len > bd->backing->size - off)
            len = bd->backing->size - off;
        bd = bd->backing;
        depth++;
    }
}

int bd_data_units(struct bd *bd, uint64_t unit, uint64_t *n)
{
    uint64_t off = 0;

    *n = 0;
    while (off < bd->size) {
        struct bd_extent e;
        int r = bd_block_status(bd, off, bd->size - off, &e);
        if (r < 0)
            return r;
        if (e.flags & BD_ZERO) {
            off += e.len;
            continue;
        }
        /* a data extent takes its units whole; go on after the last */
        uint64_t first = off / unit, end = (off + e.len + unit - 1) / unit;
        *n += end - first;
        off = end * unit;
    }
    return 0;
}

int bd_pread(struct bd *bd, void *buf, size_t len, uint64_t off)
{
    if (off > bd->size || len > bd->size - off)
        return diag_fail(bd->diag, -EINVAL, bd->filename, (int64_t)off,
                         "read of %zu bytes past the end of the image (%llu bytes)",
                         len, (unsigned long long)bd->size);
    if (len == 0)
        return 0;
    return bd->drv->pread(bd, buf, len, off);
}

int bd_pread_backing(struct bd *bd, void *buf, size_t len, uint64_t off)
{
    struct bd *b = bd->backing;
    size_t n = 0;

    if (b && off < b->size) {
        n = len;
        if (n > b->size - off)
            n = (size_t)(b->size - off);
        int r = bd_pread(b, buf, n, off);
        if (r < 0)
            return r;
    }
    memset((char *)buf + n, 0, len - n);
    return 0;
}

uint64_t bd_file_run(const struct bfile *f, uint64_t host, uint64_t len, bool *hole)
{
    *hole = false;
    if (f->kind != BFILE_REGULAR)
        return len;
    off_t data = lseek(f->fd, (off_t)host, SEEK_DATA);
    if (data < 0) {
        if (errno == ENXIO) {           /* only a hole from here to the end */
            *hole = true;
        }
        return len;
    }
    if ((uint64_t)data > host) {
        *hole = true;
        return (uint64_t)data - host < len ? (uint64_t)data - host : len;
    }
    off_t h = lseek(f->fd, (off_t)host, SEEK_HOLE);
    if (h >= 0 && (uint64_t)h > host && (uint64_t)h - host < len)
        return (uint64_t)h - host;
    return len;
}

void bd_close(struct bd *bd)
{
    if (bd)
        bd->drv->close(bd);
}

/* Free the base fields; drivers call this from close(). */
static struct bd *chain_top(struct bd *bd)
{
    while (bd->parent)
        bd = bd->parent;
    return bd;
}

int bd_table_budget(struct bd *bd, uint64_t bytes, const char *file, const char *what)
{
    struct bd *top = chain_top(bd);

    if (bytes > BD_MAX_TABLE_BYTES - top->chain_table_bytes)
        return diag_fail(bd->diag, -ENOMEM, file, -1,
                         "%s need more than the %llu MiB budget for the tables of one "
                         "image chain (%llu MiB held already)", what,
                         (unsigned long long)(BD_MAX_TABLE_BYTES >> 20),
                         (unsigned long long)(top->chain_table_bytes >> 20));
    top->chain_table_bytes += bytes;
    bd->table_bytes += bytes;
    return 0;
}

void bd_table_return(struct bd *bd, uint64_t bytes)
{
    struct bd *top = chain_top(bd);

    if (bytes > bd->table_bytes)
        bytes = bd->table_bytes;
    bd->table_bytes -= bytes;
    top->chain_table_bytes -= bytes;
}

void bd_release(struct bd *bd)
{
    if (!bd)
        return;
    /* (the layers are released before the image that refers to them:
     * the top is still there) */
    bd_table_return(bd, bd->table_bytes);
    bd_close(bd->backing);
    bd->backing = NULL;
    bfile_close(bd->file);
    bd->file = NULL;
    free(bd->filename);
    free(bd->backing_name);
    free(bd->backing_fmt);
    bd->filename = bd->backing_name = bd->backing_fmt = NULL;
}
