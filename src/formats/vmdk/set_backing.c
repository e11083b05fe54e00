/* vmdk: another parent for an image (rebase): the descriptor names it
 * (parentFileNameHint) and its content id (parentCID), or no parent
 * (parentCID ffffffff, no hint).  createType, the image's own CID and
 * every other line stay as they were (desc_edit.c).
 *
 * Crash safety: the new descriptor replaces the old one in a single step,
 * so that a kill at any point leaves one or the other.
 *  - A descriptor file (twoGbMaxExtent*, monolithicFlat, vmfs, ...) is
 *    written whole under a temporary name beside it (same owner and
 *    permissions), synced, renamed over the old one, and the folder synced.
 *  - A descriptor embedded in a sparse extent (monolithicSparse) is
 *    rewritten in place in one write that stays inside one 4 KiB page of
 *    the file: the kernel copies a write into the page cache a page at a
 *    time and a kill stops it only between pages, so one page is all or
 *    nothing (qemu and VMware put the descriptor at sector 1: a descriptor
 *    of up to 3.5 KiB qualifies).  A rewrite that would span pages, or a
 *    descriptor that would not fit the embedded area, is refused before
 *    anything is written.  (Copying the whole extent under a temporary
 *    name would do for those, at the price of the image's size; measured
 *    not needed for any descriptor qemu-img or VMware writes.)
 * A safe rebase writes its grains first (inplace.c) and calls this last.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "formats/vmdk/read_int.h"
#include "formats/vmdk/vmdk.h"
#include "io/bfile.h"
#include "util/diag.h"

#define PAGE 4096u

#define FAIL(bd, err, ...) diag_fail((bd)->diag, err, (bd)->filename, -1, __VA_ARGS__)

/* Why this image's parent cannot be changed, or 0. */
static int refusals(struct vmdk *v, bool write)
{
    struct bd *bd = &v->bd;

    if (v->streaming || bd->file->kind != BFILE_REGULAR)
        return FAIL(bd, -ENOTSUP, "the image must be a regular file");
    if (write && !bd->file->writable)
        return FAIL(bd, -EROFS, "the image is not open for writing");
    for (size_t i = 0; i < v->n_ext; i++) {
        const struct vmdk_extent *x = &v->ext[i];
        if (x->compressed || x->markers)
            return FAIL(bd, -ENOTSUP, "streamOptimized images cannot be rebased (their "
                        "grains are compressed into a stream); convert the image to "
                        "monolithicSparse first");
        if (x->type == VMDK_EXT_VMFSSPARSE && v->monolithic)
            return FAIL(bd, -ENOTSUP, "a COWD (vmfsSparse) file without a descriptor "
                        "has no parent to change");
    }
    if (v->monolithic && !v->ext[0].hdr.desc_offset)
        return FAIL(bd, -ENOTSUP, "the sparse extent has no embedded descriptor to "
                    "name a parent in");
    return 0;
}

/* The new parent's CID (read from its descriptor), opened as a reference
 * of the image: inside its folder unless --allow-external. */
static int parent_cid(struct bd *bd, const char *name, uint32_t *cid)
{
    struct bd *p = NULL;
    int r = bd_open_ref(bd, name, NULL, &p);

    if (r < 0) {
        char why[sizeof(bd->diag->what)];
        snprintf(why, sizeof(why), "%s", bd->diag->what);
        diag_clear(bd->diag);
        return diag_fail(bd->diag, r, bd->filename, -1, "Could not open new backing file "
                         "'%s' (its CID goes into the descriptor): %s", name, why);
    }
    if (p->drv != &bd_vmdk) {
        r = diag_fail(bd->diag, -EINVAL, bd->filename, -1, "the parent of a VMDK image must "
                      "be a VMDK image ('%s' is %s)", name, p->drv->name);
    } else {
        const struct vmdk *pv = (const struct vmdk *)p;
        *cid = pv->desc.has_cid ? pv->desc.cid : 0;
    }
    bd_close(p);
    return r;
}

/* Write `text` as the new content of the descriptor file `f`: a temporary
 * file beside it, synced, renamed over it, the folder synced. */
static int replace_file(struct bd *bd, struct bfile *f, const char *text, size_t len)
{
    struct diag *d = bd->diag;
    struct stat was, now;
    char *real = realpath(f->path, NULL), *dir = NULL, *tmp = NULL;
    int fd = -1, dfd = -1, r = 0;

    if (!real)
        return diag_fail(d, -errno, f->path, -1, "cannot resolve the descriptor's path: %s",
                         strerror(errno));
    if (fstat(f->fd, &was) < 0 || stat(real, &now) < 0) {
        r = diag_fail(d, -errno, f->path, -1, "stat: %s", strerror(errno));
        goto out;
    }
    if (was.st_dev != now.st_dev || was.st_ino != now.st_ino) {
        r = diag_fail(d, -EBUSY, f->path, -1, "the descriptor file was replaced meanwhile");
        goto out;
    }
    char *slash = strrchr(real, '/');
    if (!(dir = strndup(real, slash > real ? (size_t)(slash - real) : 1)) ||
        asprintf(&tmp, "%s/.%s.rebase-XXXXXX", dir, slash + 1) < 0) {
        tmp = NULL;
        r = diag_fail(d, -ENOMEM, f->path, -1, "out of memory");
        goto out;
    }
    if ((fd = mkostemp(tmp, O_CLOEXEC)) < 0) {
        r = diag_fail(d, -errno, f->path, -1, "cannot create a temporary file beside it: %s",
                      strerror(errno));
        free(tmp);
        tmp = NULL;
        goto out;
    }
    /* the descriptor keeps its owner (when we may) and permissions */
    if (fchown(fd, was.st_uid, was.st_gid) < 0 && errno != EPERM) {
        r = diag_fail(d, -errno, tmp, -1, "chown: %s", strerror(errno));
        goto out;
    }
    if (fchmod(fd, was.st_mode & 07777) < 0) {
        r = diag_fail(d, -errno, tmp, -1, "chmod: %s", strerror(errno));
        goto out;
    }
    /* (through bfile: its retries, messages and fault injection) */
    struct bfile *tf = NULL;
    if ((r = bfile_from_fd(&tf, fd, tmp, true, d)) < 0) {
        fd = -1;
        goto out;
    }
    fd = -1;
    r = bfile_pwrite(tf, text, len, 0);
    if (r == 0)
        r = bfile_sync(tf);
    bfile_close(tf);
    if (r < 0)
        goto out;
    if (rename(tmp, real) < 0) {
        r = diag_fail(d, -errno, f->path, -1, "rename: %s", strerror(errno));
        goto out;
    }
    free(tmp);
    tmp = NULL;
    if ((dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0 || fsync(dfd) < 0)
        r = diag_fail(d, -errno, dir, -1, "syncing the folder: %s", strerror(errno));
out:
    if (fd >= 0)
        close(fd);
    if (dfd >= 0)
        close(dfd);
    if (tmp)
        unlink(tmp);
    free(tmp);
    free(dir);
    free(real);
    return r;
}

/* The embedded descriptor area of a monolithic sparse extent, rewritten in
 * one write inside one page (see the top of the file).  The new text ends
 * with a NUL inside the area, and zeros cover what is left of the old text
 * after it: readers take the text up to its first NUL (qemu reads on past
 * the area, into the grain directory, when there is none), and what the
 * old text had there must not read as lines of the new one. */
static int rewrite_embedded(struct vmdk *v, const char *old, size_t area, const char *text,
                            size_t len, bool write)
{
    struct bd *bd = &v->bd;
    uint64_t off = v->ext[0].hdr.desc_offset * VMDK_SECTOR;
    size_t old_len = strnlen(old, area), span = len + 1 > old_len ? len + 1 : old_len;

    if (len >= area)
        return diag_fail(bd->diag, -ENOSPC, bd->filename, (int64_t)off,
                         "the new descriptor (%zu bytes and the NUL that ends it) does not fit "
                         "the embedded descriptor area (%zu bytes)", len, area);
    if (off / PAGE != (off + span - 1) / PAGE)
        return diag_fail(bd->diag, -ENOTSUP, bd->filename, (int64_t)off,
                         "rewriting the embedded descriptor (%zu bytes) would cross a %u-byte "
                         "page of the file, and a crash could leave it half written", span,
                         PAGE);
    if (!write)
        return 0;
    char *buf = calloc(1, span);
    if (!buf)
        return diag_fail(bd->diag, -ENOMEM, bd->filename, -1, "out of memory");
    memcpy(buf, text, len);
    int r = bfile_pwrite(bd->file, buf, span, off);
    free(buf);
    return r < 0 ? r : bfile_sync(bd->file);
}

static int set_parent(struct bd *bd, const char *name, const char *fmt, bool write)
{
    struct vmdk *v = (struct vmdk *)bd;
    uint32_t cid = 0xffffffffu;
    char *old = NULL, *text = NULL;
    size_t area, len;
    int r;

    if ((r = refusals(v, write)) < 0)
        return r;
    if (name && !*name)
        name = NULL;
    if (name) {
        if (fmt && strcmp(fmt, "vmdk") != 0)
            return FAIL(bd, -EINVAL, "the parent of a VMDK image must be a VMDK image "
                        "(-F vmdk), not %s", fmt);
        if (!vmdk_hint_ok(name))
            return FAIL(bd, -EINVAL, "the name '%s' cannot be written as a parentFileNameHint "
                        "(control characters, a double quote, or more than %d bytes)", name,
                        VMDK_MAX_HINT);
        if ((r = parent_cid(bd, name, &cid)) < 0)
            return r;
    }
    /* the text as it is stored (the reader keeps only what it parsed) */
    uint64_t off = 0;
    if (v->monolithic) {
        off = v->ext[0].hdr.desc_offset * VMDK_SECTOR;
        area = (size_t)(v->ext[0].hdr.desc_sectors * VMDK_SECTOR);
    } else {
        area = (size_t)bd->file->size;
    }
    if (area > VMDK_MAX_DESC_BYTES)    /* (the reader refused it already) */
        return FAIL(bd, -EINVAL, "the descriptor is too large");
    if (!(old = calloc(1, area + 1)))
        return FAIL(bd, -ENOMEM, "out of memory");
    if ((r = bfile_pread(bd->file, old, area, off)) < 0)
        goto out;
    if ((r = vmdk_desc_set_parent(old, area, name, cid, &text, &len)) < 0) {
        r = FAIL(bd, r, "cannot build the new descriptor");
        goto out;
    }
    /* what it says must be what was asked, and everything else as it was */
    struct vmdk_desc nd;
    if ((r = vmdk_desc_parse(text, len, &nd, bd->diag, bd->filename, (int64_t)off)) < 0)
        goto out;
    bool same = nd.n_ext == v->desc.n_ext && nd.has_cid == v->desc.has_cid &&
                nd.cid == v->desc.cid && nd.has_parent_cid && nd.parent_cid == cid &&
                (name ? nd.parent_hint && !strcmp(nd.parent_hint, name) : !nd.parent_hint);
    vmdk_desc_free(&nd);
    if (!same) {
        r = FAIL(bd, -EINVAL, "the rewritten descriptor does not read back as intended");
        goto out;
    }
    if (v->monolithic)
        r = rewrite_embedded(v, old, area, text, len, write);
    else if (write)
        r = replace_file(bd, bd->file, text, len);
out:
    free(old);
    free(text);
    return r;
}

int vmdk_set_backing(struct bd *bd, const char *name, const char *fmt)
{
    return set_parent(bd, name, fmt, true);
}

int vmdk_check_backing(struct bd *bd, const char *name, const char *fmt)
{
    return set_parent(bd, name, fmt, false);
}
