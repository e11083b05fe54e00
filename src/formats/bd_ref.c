/* References: the files an image names (backing file, external data file,
 * VMDK extents and parent), opened under the folder rule of SECURITY.md.
 *
 * A reference is resolved against the folder of the image that makes it.
 * Unless --allow-external:
 *   - a reference that is outside that folder as written (absolute
 *     elsewhere, ".." above it) is refused before the file system is asked,
 *     so that the messages do not tell an image which host files exist;
 *   - the rest is opened beneath a descriptor of the folder in one step
 *     (io/beneath.h), never checked by name and then opened again by name:
 *     a symlink swapped in between cannot lead out;
 *   - the folder of an image opened this way is kept as a descriptor too
 *     (bfile.dir_fd), for its own references.
 * Inside an archive (an OVA), references name members of the archive and
 * are answered by the archive driver: never a host file, whatever options.
 */
#define _GNU_SOURCE
#include "formats/bd.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "io/beneath.h"
#include "io/bfile.h"
#include "util/diag.h"

static bool is_protocol(const char *ref)
{
    /* "nbd:", "http://", "json:{...}" ... but not "C:\" style or plain names */
    const char *colon = strchr(ref, ':');
    const char *slash = strchr(ref, '/');
    if (!colon || (slash && slash < colon))
        return false;
    for (const char *p = ref; p < colon; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
              (*p >= '0' && *p <= '9') || *p == '+' || *p == '-'))
            return false;
    return colon > ref + 1;
}

/* `p` (absolute) with "//", "." and ".." resolved as text, in place;
 * ".." at the root stays at the root. */
static void lexical_normalize(char *p)
{
    char *out = p;          /* p[0] is '/' */
    const char *in = p;

    while (*in) {
        while (*in == '/')
            in++;
        if (!*in)
            break;
        const char *end = strchr(in, '/');
        size_t n = end ? (size_t)(end - in) : strlen(in);
        if (n == 1 && in[0] == '.') {
            /* skip */
        } else if (n == 2 && in[0] == '.' && in[1] == '.') {
            while (out > p && *--out != '/')
                ;
        } else {
            *out++ = '/';
            memmove(out, in, n);
            out += n;
        }
        in += n;
    }
    if (out == p)
        *out++ = '/';
    *out = '\0';
}

/* `path` (normalised) names something beneath `folder`, not the folder. */
static bool inside_folder(const char *path, const char *folder)
{
    size_t fl = strlen(folder);
    if (strcmp(folder, "/") == 0)
        return path[0] == '/' && path[1];
    return strncmp(path, folder, fl) == 0 && path[fl] == '/' && path[fl + 1];
}

/* The archive `from` is a member of (or reached through), or NULL. */
static struct bd *archive_of(struct bd *from)
{
    for (struct bd *b = from->parent; b; b = b->parent)
        if (b->drv->open_member)
            return b;
    return NULL;
}

static const char *ref_owner(const struct bd *from)
{
    return from->file ? from->file->path : from->filename;
}

/* Refusals that need no file system. */
static int check_ref_text(struct bd *from, const char *ref)
{
    struct diag *d = from->diag;
    const char *fpath = ref_owner(from);
    size_t n = strnlen(ref, PATH_MAX);

    if (n == 0)
        return diag_fail(d, -EINVAL, fpath, -1, "empty file reference");
    if (n >= PATH_MAX)
        return diag_fail(d, -ENAMETOOLONG, fpath, -1,
                         "refers to a file name of more than %d bytes", PATH_MAX - 1);
    if (is_protocol(ref))
        return diag_fail(d, -ENOTSUP, fpath, -1,
                         "refers to '%s': protocols and json: references are not supported",
                         ref);
    return 0;
}

/* The folder an image file is in: as text (absolute; for messages and
 * absolute references) and as a descriptor (*own: the caller closes it). */
static int folder_of(const struct bfile *f, struct diag *d, char **text, int *fd, bool *own)
{
    *text = NULL;
    *fd = -1;
    *own = false;
    if (f->dir_fd >= 0) {
        /* opened beneath another image's folder: path is that folder's
         * text joined with the reference, normalised */
        const char *slash = strrchr(f->path, '/');
        *text = slash == f->path ? strdup("/") : strndup(f->path, (size_t)(slash - f->path));
        if (!*text)
            return diag_fail(d, -ENOMEM, f->path, -1, "out of memory");
        *fd = f->dir_fd;
        return 0;
    }
    char *real = realpath(f->path, NULL);
    if (!real)
        return diag_errno(d, -errno, f->path, -1, "cannot resolve folder");
    char *slash = strrchr(real, '/');
    if (slash == real)
        slash[1] = '\0';
    else
        *slash = '\0';
    *fd = open(real, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (*fd < 0) {
        int r = diag_errno(d, -errno, real, -1, "cannot open folder");
        free(real);
        return r;
    }
    *text = real;
    *own = true;
    return 0;
}

/* What open_beneath() said, as a message. */
static int open_failed(struct diag *d, int err, const char *fpath, const char *ref,
                       const char *path, const char *folder)
{
    switch (-err) {
    case EXDEV:
        return diag_fail(d, -EPERM, fpath, -1,
                         "refers to '%s' (%s), which leads outside the image's folder %s "
                         "through a symbolic link; pass --allow-external to follow it",
                         ref, path, folder);
    case ENOENT:
        return diag_fail(d, err, fpath, -1, "refers to '%s', which does not exist "
                         "(looked for %s)", ref, path);
    case ELOOP:
        return diag_fail(d, err, fpath, -1, "refers to '%s' (%s): too many symbolic links",
                         ref, path);
    case EISDIR:
        return diag_fail(d, err, path, -1, "is a directory, not an image");
    default:
        return diag_errno(d, err, path, -1, "cannot open");
    }
}

/* `fd` as a bfile if it is a file references may name: a regular file or
 * a block device (qcow2 volumes on LVM name their backing volume).  A FIFO,
 * socket or character device would block or never end (it was opened
 * O_NONBLOCK, so that the open did not wait for a writer). */
static int ref_bfile(int fd, const char *path, bool writable, struct diag *d,
                     struct bfile **out)
{
    struct stat st;

    if (fstat(fd, &st) < 0) {
        int e = -errno;
        close(fd);
        return diag_errno(d, e, path, -1, "cannot stat");
    }
    if (!S_ISREG(st.st_mode) && !S_ISBLK(st.st_mode)) {
        close(fd);
        if (S_ISDIR(st.st_mode))
            return diag_fail(d, -EISDIR, path, -1, "is a directory, not an image");
        return diag_fail(d, -EINVAL, path, -1,
                         "is not a regular file (a %s); an image may refer to regular "
                         "files and block devices only", S_ISFIFO(st.st_mode) ? "FIFO" :
                         S_ISSOCK(st.st_mode) ? "socket" : S_ISCHR(st.st_mode) ?
                         "character device" : "special file");
    }
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) < 0) {
        int e = -errno;
        close(fd);
        return diag_errno(d, e, path, -1, "cannot set file flags");
    }
    return bfile_from_fd(out, fd, path, writable, d);
}

/* A reference from an image on the host.  `want_dir`: keep the folder of
 * the file opened (the image in it may have references of its own). */
static int open_on_host(struct bd *from, const char *ref, bool writable, bool want_dir,
                        struct bfile **out)
{
    bool allow = from->opts.allow_external;
    const char *fpath = ref_owner(from);
    struct diag *d = from->diag;
    const struct bfile *anchor = from->file;
    char *folder = NULL, *path = NULL;
    int dfd = -1, r;
    bool own = false;
    int oflags = (writable ? O_RDWR : O_RDONLY) | O_NONBLOCK | O_NOCTTY | O_CLOEXEC;

    if (from->opts.no_external_files)
        return diag_fail(d, -EPERM, fpath, -1,
                         "refers to another file ('%s'), which is not allowed here", ref);
    if (!anchor || (anchor->kind != BFILE_REGULAR && anchor->kind != BFILE_BLOCKDEV))
        return diag_fail(d, -ENOTSUP, fpath, -1,
                         "refers to '%s', but references cannot be followed from a stream",
                         ref);
    if ((r = folder_of(anchor, d, &folder, &dfd, &own)) < 0)
        return r;
    if (ref[0] == '/')
        path = strdup(ref);
    else if (asprintf(&path, "%s/%s", folder, ref) < 0)
        path = NULL;
    if (!path) {
        r = diag_fail(d, -ENOMEM, fpath, -1, "out of memory");
        goto out;
    }
    if (allow) {
        /* trusted: as named, with the kernel's meaning of ".." */
        int fd = open(path, oflags);
        if (fd < 0) {
            r = open_failed(d, -errno, fpath, ref, path, folder);
            goto out;
        }
        r = ref_bfile(fd, path, writable, d, out);
        goto out;
    }
    /* Outside as written: refused before the file system is asked, so
     * that an image cannot learn which host files exist from the messages
     * ("does not exist" / "outside"). */
    lexical_normalize(path);
    if (!inside_folder(path, folder)) {
        r = diag_fail(d, -EPERM, fpath, -1,
                      "refers to '%s' (%s), outside the image's folder %s; "
                      "pass --allow-external to follow it", ref, path, folder);
        goto out;
    }
    /* the normalised text was checked, so it is what is opened: its ".."
     * are gone; only symbolic links remain for the kernel to keep beneath */
    const char *rel = path + strlen(folder) + (strcmp(folder, "/") ? 1 : 0);
    int fd = open_beneath(dfd, rel, oflags);
    if (fd < 0) {
        r = open_failed(d, fd, fpath, ref, path, folder);
        goto out;
    }
    int sub = -1;
    if (want_dir) {
        /* the folder of the file, beneath the same folder (the file's own
         * references are then opened beneath this one) */
        const char *slash = strrchr(rel, '/');
        char *dir = slash ? strndup(rel, (size_t)(slash - rel)) : strdup(".");
        sub = dir ? open_beneath(dfd, dir, O_PATH | O_DIRECTORY) : -ENOMEM;
        free(dir);
        if (sub < 0) {
            close(fd);
            r = open_failed(d, sub, fpath, ref, path, folder);
            goto out;
        }
    }
    r = ref_bfile(fd, path, writable, d, out);
    if (r < 0) {
        if (sub >= 0)
            close(sub);
    } else {
        (*out)->dir_fd = sub;
    }
out:
    if (own)
        close(dfd);
    free(folder);
    free(path);
    return r;
}

static int open_ref_file(struct bd *from, const char *ref, bool writable, bool want_dir,
                         struct bfile **out)
{
    int r;

    *out = NULL;
    if ((r = check_ref_text(from, ref)) < 0)
        return r;
    struct bd *arch = archive_of(from);
    if (arch) {
        if (writable)
            return diag_fail(from->diag, -EROFS, ref_owner(from), -1,
                             "refers to '%s' for writing, inside a read-only archive", ref);
        return arch->drv->open_member(arch, from->file, ref, out);
    }
    return open_on_host(from, ref, writable, want_dir, out);
}

int bd_open_ref_file(struct bd *from, const char *ref, bool writable,
                     struct bfile **out)
{
    return open_ref_file(from, ref, writable, false, out);
}

static bool same_file(const struct bfile *a, const struct bfile *b)
{
    struct stat sa, sb;

    /* members of one archive: the same member */
    if (a->kind == BFILE_SLICE && b->kind == BFILE_SLICE)
        return a->base == b->base && a->base_off == b->base_off;
    if (a->kind == BFILE_SLICE || b->kind == BFILE_SLICE)
        return false;
    if (a == b)
        return true;
    if (a->fd < 0 || b->fd < 0)
        return false;
    if (fstat(a->fd, &sa) < 0 || fstat(b->fd, &sb) < 0)
        return false;
    return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

int bd_open_ref(struct bd *from, const char *ref, const char *format,
                struct bd **out)
{
    struct bd_open_opts o = from->opts;
    struct bfile *f;
    int r;

    *out = NULL;
    if (from->depth + 1 >= BD_MAX_DEPTH)
        return diag_fail(from->diag, -ELOOP, from->filename, -1,
                         "backing chain is deeper than %d images", BD_MAX_DEPTH);
    r = open_ref_file(from, ref, false, true, &f);
    if (r < 0)
        return r;
    for (struct bd *b = from; b; b = b->parent) {
        if (b->file && same_file(b->file, f)) {
            r = diag_fail(from->diag, -ELOOP, from->filename, -1,
                          "refers to '%s', which is already in its own chain (a loop)", ref);
            bfile_close(f);
            return r;
        }
    }
    /* the copy the new image keeps must not point into `from` (or the
     * caller's stack): a known format by its driver's (static) name */
    const struct bd_driver *drv = format ? bd_find_driver(format) : NULL;
    o.format = drv ? drv->name : format;
    o.writable = false;
    o.snapshot = NULL;
    o.disk_index = 0;
    r = bd_open_bfile(out, f, &o, from, from->diag);
    if (r == 0 && (*out)->drv->open_member) {
        bd_close(*out);
        *out = NULL;
        r = diag_fail(from->diag, -EINVAL, from->filename, -1,
                      "refers to '%s', an archive, which cannot be a backing file or parent",
                      ref);
    }
    return r;
}
