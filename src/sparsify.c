#define _GNU_SOURCE
#include "sparsify.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/falloc.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "convert.h"
#include "formats/bd.h"
#include "io/bfile.h"
#include "io/fault.h"
#include "util/diag.h"

/* The "output" of an in-place sparsify: data is already where it belongs,
 * zero runs are punched (or only counted in a dry run). */
struct puncher {
    struct bd bd;
    int fd;                /* the same file, opened for writing (-1: dry run) */
    uint64_t zero_found;
};

static int punch_pwrite(struct bd *bd, const void *buf, size_t len, uint64_t off,
                        ioq_done_fn done, void *opaque)
{
    (void)bd, (void)buf, (void)len, (void)off;
    done(opaque, 0);
    return 0;
}

static int punch_write_zeroes(struct bd *bd, uint64_t off, uint64_t len)
{
    struct puncher *p = (struct puncher *)bd;

    p->zero_found += len;
    if (p->fd < 0)
        return 0;
    /* the file's last block is only freed if the hole covers all of it
     * (KEEP_SIZE lets the range run past the end of the file) */
    if (off + len == bd->size && len % bd->granule)
        len += bd->granule - len % bd->granule;
    size_t l = (size_t)len;
    int inj = fault_inject(FAULT_PUNCH, &l);
    if (inj < 0)
        return diag_errno(bd->diag, inj, bd->filename, (int64_t)off, "cannot punch a hole");
    if (fallocate(p->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)off, (off_t)len) < 0) {
        if (errno == EOPNOTSUPP)
            return diag_fail(bd->diag, -EOPNOTSUPP, bd->filename, -1,
                             "this file system cannot punch holes");
        return diag_errno(bd->diag, -errno, bd->filename, (int64_t)off, "cannot punch a hole");
    }
    return 0;
}

static int punch_finish(struct bd *bd)
{
    struct puncher *p = (struct puncher *)bd;
    if (p->fd >= 0 && fsync(p->fd) < 0)
        return diag_errno(bd->diag, -errno, bd->filename, -1, "fsync failed");
    return 0;
}

static void punch_abort(struct bd *bd)
{
    (void)bd;
}

static void punch_close(struct bd *bd)
{
    free(bd->filename);
}

static const struct bd_driver punch_driver = {
    .name = "sparsify",
    .pwrite = punch_pwrite,
    .write_zeroes = punch_write_zeroes,
    .finish = punch_finish,
    .abort = punch_abort,
    .close = punch_close,
};

int sparsify_run(const struct sparsify_opts *o, struct sparsify_result *res,
                 struct diag *d)
{
    struct bd_open_opts oo = { .format = "raw" };
    struct bd *src = NULL;
    struct puncher p;
    struct stat st;
    int r;

    memset(res, 0, sizeof(*res));
    memset(&p, 0, sizeof(p));
    p.fd = -1;
    if ((r = bd_open(&src, o->path, &oo, d)) < 0)
        return r;
    if (src->file->kind != BFILE_REGULAR) {
        r = diag_fail(d, -EINVAL, o->path, -1, "sparsify works on regular files only");
        goto out;
    }
    if (fstat(src->file->fd, &st) < 0) {
        r = diag_errno(d, -errno, o->path, -1, "cannot stat");
        goto out;
    }
    res->size = src->size;
    res->before = (uint64_t)st.st_blocks * 512;
    if (!o->dry_run) {
        p.fd = open(o->path, O_WRONLY | O_CLOEXEC);
        if (p.fd < 0) {
            r = diag_errno(d, -errno, o->path, -1, "cannot open for writing");
            goto out;
        }
        /* the holes go where the zeros were read: the same file, not one
         * renamed or linked into its place in between */
        struct stat wst;
        if (fstat(p.fd, &wst) < 0 || wst.st_dev != st.st_dev || wst.st_ino != st.st_ino) {
            r = diag_fail(d, -ESTALE, o->path, -1, "the file was replaced while it was "
                          "opened; nothing was changed");
            goto out;
        }
    }
    bd_init(&p.bd, &punch_driver, NULL, d);
    free(p.bd.filename);
    p.bd.filename = strdup(o->path);
    p.bd.size = src->size;
    /* holes are whole file system blocks: smaller units free nothing */
    p.bd.granule = st.st_blksize >= 512 && st.st_blksize <= (1 << 20) ? (uint32_t)st.st_blksize : 4096;

    struct convert_opts co = {
        .src = &src, .nsrc = 1, .out = &p.bd,
        .sparse_size = o->sparse_size < p.bd.granule ? p.bd.granule : o->sparse_size,
        .threads = o->threads ? o->threads : 1, .inflight = 16, .skip_gaps = true,
        .progress = o->progress, .progress_opaque = o->progress_opaque,
    };
    struct convert_stats cs;
    r = convert_run(&co, d, &cs);
    if (r == 0)
        r = punch_finish(&p.bd);
    res->zero_found = p.zero_found;
    if (fstat(src->file->fd, &st) == 0)
        res->after = (uint64_t)st.st_blocks * 512;
out:
    if (p.fd >= 0)
        close(p.fd);
    free(p.bd.filename);
    bd_close(src);
    return r;
}
