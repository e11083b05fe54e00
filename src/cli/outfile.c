/* outfile.h: the output's files under temporary names until the commit. */
#define _GNU_SOURCE
#include "outfile.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "io/bfile.h"
#include "outfile_priv.h"
#include "util/diag.h"

void outfile_unlink_pending(const struct outfile *of)
{
    if (of->tmp)
        unlink(of->tmp);
    for (size_t i = 0; i < of->n_extra; i++)
        if (of->extra[i].tmp)
            unlink(of->extra[i].tmp);
}

/* A new file ".NAME.diskimg-XXXXXX" beside `target`, with the permissions
 * of `meta_from` (whose stat is *st) or, without one, 0644 less the umask.
 * Called under the lock, so that the caller can make the name pending
 * before a signal can look. */
static int make_temp(const char *target, const char *shown, int oflags, const char *meta_from,
                     const struct stat *st, char **tmp, int *fdp, struct diag *d)
{
    *tmp = outfile_name_template(target, "");
    if (!*tmp)
        return diag_fail(d, -ENOMEM, shown, -1, "out of memory");
    int fd = mkostemp(*tmp, oflags);       /* mode 0600 */
    if (fd < 0) {
        int e = errno;
        free(*tmp);
        *tmp = NULL;
        if (e == EACCES || e == EPERM || e == EROFS)
            return diag_fail(d, -e, shown, -1, "cannot create the output: %s in its folder",
                             e == EROFS ? "read-only file system" : "permission denied");
        return diag_errno(d, -e, shown, -1, "cannot create the output");
    }
    int r = 0;
    if (meta_from) {
        r = outfile_copy_meta(fd, meta_from, st, shown, d);
    } else {
        mode_t um = umask(0);
        umask(um);
        if (fchmod(fd, 0644 & ~um) < 0)
            r = diag_errno(d, -errno, shown, -1, "cannot set permissions");
    }
    if (r < 0) {
        close(fd);
        unlink(*tmp);
        free(*tmp);
        *tmp = NULL;
        return r;
    }
    *fdp = fd;
    return 0;
}

static int open_in_place(struct outfile *of, const char *path, unsigned flags,
                         struct diag *d)
{
    unsigned bf = BFILE_O_RDWR | ((flags & OUTFILE_DIRECT) ? BFILE_O_DIRECT : 0);
    of->in_place = true;
    return bfile_open(&of->f, path, bf, d);
}

static int open_stdout(struct outfile *of, struct diag *d)
{
    int fd = fcntl(STDOUT_FILENO, F_DUPFD_CLOEXEC, 3);
    if (fd < 0)
        return diag_errno(d, -errno, "(stdout)", -1, "cannot use standard output");
    of->in_place = true;
    of->to_stdout = true;
    int r = bfile_from_fd(&of->f, fd, "(stdout)", true, d);
    if (r == 0)
        of->f->std_stream = true;
    return r;
}

static int open_target(struct outfile *of, const char *path, unsigned flags,
                       struct diag *d)
{
    struct stat st;

    memset(of, 0, sizeof(*of));
    of->path = strdup(path);
    if (!of->path)
        return diag_fail(d, -ENOMEM, path, -1, "out of memory");
    if (strcmp(path, "-") == 0)
        return open_stdout(of, d);
    bool exists = stat(path, &st) == 0;
    if (flags & OUTFILE_EXISTING) {
        if (!exists)
            return diag_fail(d, -ENOENT, path, -1,
                             "target does not exist (-n needs an existing target)");
        return open_in_place(of, path, flags, d);
    }
    if (exists && (S_ISBLK(st.st_mode) || S_ISCHR(st.st_mode) || S_ISFIFO(st.st_mode)))
        return open_in_place(of, path, flags, d);
    if (exists && S_ISDIR(st.st_mode))
        return diag_fail(d, -EISDIR, path, -1, "is a directory");

    /* write under a temporary name next to the (symlink-resolved) target */
    of->final = exists ? realpath(path, NULL) : strdup(path);
    if (!of->final)
        return diag_errno(d, -errno, path, -1, "cannot resolve target");
    if (!outfile_name_fits(of->final))
        return diag_fail(d, -ENAMETOOLONG, path, -1, "the file name is longer than a "
                         "folder entry can be (%d bytes)", NAME_MAX);
    if (exists && S_ISREG(st.st_mode)) {
        of->replaces = true;
        if (outfile_old_extents(of->final, path, &of->old_ext, &of->n_old_ext) < 0)
            return diag_fail(d, -ENOMEM, path, -1, "out of memory");
        of->meta_from = strdup(of->n_old_ext ? of->old_ext[0] : of->final);
        if (!of->meta_from)
            return diag_fail(d, -ENOMEM, path, -1, "out of memory");
    }
    int fd, oflags = O_CLOEXEC | ((flags & OUTFILE_DIRECT) ? O_DIRECT : 0);
    outfile_lock();
    int r = make_temp(of->final, path, oflags, of->replaces ? of->final : NULL, &st,
                      &of->tmp, &fd, d);
    if (r == 0)
        outfile_set_active(of);
    outfile_unlock();
    if (r < 0)
        return r;
    r = bfile_from_fd(&of->f, fd, of->tmp, true, d);
    if (r < 0)
        return r;
    bfile_set_prealloc(of->f);
    /* messages name the target, not the temporary file */
    free(of->f->path);
    of->f->path = strdup(path);
    if (!of->f->path)
        return diag_fail(d, -ENOMEM, path, -1, "out of memory");
    return 0;
}

int outfile_open(struct outfile *of, const char *path, unsigned flags,
                 struct diag *d)
{
    int r = open_target(of, path, flags, d);
    if (r < 0)
        outfile_discard(of);
    return r;
}

int outfile_add(struct outfile *of, const char *path, struct bfile **f,
                const char **tmp, struct diag *d)
{
    char *t = NULL, *fin = NULL, *dir = NULL;
    struct stat st;
    const char *meta = NULL;
    int fd, r;

    *f = NULL;
    if (!of->tmp)
        return diag_fail(d, -ENOTSUP, path, -1,
                         "an image of several files needs a new output file");
    /* beside the target itself: the descriptor names its extents relative
     * to its own folder, which a symlink as the target may not be */
    const char *slash = strrchr(path, '/'), *base = slash ? slash + 1 : path;
    if (!strchr(of->final, '/'))
        fin = strdup(base);
    else if (!(dir = outfile_dirname(of->final)) || asprintf(&fin, "%s/%s", dir, base) < 0)
        fin = NULL;
    free(dir);
    if (!fin)
        return diag_fail(d, -ENOMEM, path, -1, "out of memory");
    if (!outfile_name_fits(fin)) {
        free(fin);
        return diag_fail(d, -ENAMETOOLONG, path, -1, "the file name is longer than a "
                         "folder entry can be (%d bytes)", NAME_MAX);
    }
    struct outfile_extra *ne = realloc(of->extra, (of->n_extra + 1) * sizeof(*ne));
    if (!ne) {
        free(fin);
        return diag_fail(d, -ENOMEM, path, -1, "out of memory");
    }
    /* the file it replaces gives its permissions; a new one those of the
     * old image */
    if (lstat(fin, &st) == 0 && S_ISREG(st.st_mode))
        meta = fin;
    else if (of->meta_from && stat(of->meta_from, &st) == 0)
        meta = of->meta_from;
    outfile_lock();
    of->extra = ne;     /* moved: the signal thread reads it under the lock */
    r = make_temp(fin, path, O_CLOEXEC, meta, &st, &t, &fd, d);
    if (r == 0) {
        of->extra[of->n_extra].final = fin;
        of->extra[of->n_extra].tmp = t;
        of->n_extra++;
    }
    outfile_unlock();
    if (r < 0) {
        free(fin);
        return r;
    }
    if ((r = bfile_from_fd(f, fd, path, true, d)) < 0)
        return r;
    bfile_set_prealloc(*f);
    *tmp = t;
    return 0;
}

int outfile_add_file(void *opaque, const char *path, struct bfile **f,
                     const char **tmp, struct diag *d)
{
    return outfile_add(opaque, path, f, tmp, d);
}

static int is_input(const char *file, const char *shown, uint64_t mark, struct diag *d)
{
    struct stat st;

    if (stat(file, &st) == 0 && bfile_is_open(&st, mark))
        return diag_fail(d, -EINVAL, shown, -1, "the output is also an input; refusing to "
                         "overwrite it");
    return 0;
}

int outfile_check_inputs(const struct outfile *of, uint64_t mark, struct diag *d)
{
    char name[PATH_MAX];
    int r = 0;

    if (of->in_place) {
        if (bfile_written_input(mark, name, sizeof(name)))
            return diag_fail(d, -EINVAL, name, -1, "the output is also an input; refusing "
                             "to overwrite it");
        return 0;
    }
    r = is_input(of->final, of->path, mark, d);
    for (size_t i = 0; r == 0 && i < of->n_extra; i++)
        r = is_input(of->extra[i].final, of->extra[i].final, mark, d);
    for (size_t i = 0; r == 0 && i < of->n_old_ext; i++)
        r = is_input(of->old_ext[i], of->old_ext[i], mark, d);
    return r;
}

static void free_all(struct outfile *of)
{
    bfile_close(of->f);   /* NULL when an image driver took it over */
    of->f = NULL;
    for (size_t i = 0; i < of->n_extra; i++) {
        free(of->extra[i].final);
        free(of->extra[i].tmp);
    }
    free(of->extra);
    for (size_t i = 0; i < of->n_old_ext; i++)
        free(of->old_ext[i]);
    free(of->old_ext);
    free(of->meta_from);
    free(of->tmp);
    free(of->path);
    free(of->final);
    memset(of, 0, sizeof(*of));
}

int outfile_commit(struct outfile *of, bool durable, struct diag *d)
{
    if (of->tmp) {
        outfile_lock();
        int r = outfile_commit_files(of, durable, d);
        if (r == 0)
            outfile_set_active(NULL);
        outfile_unlock();
        if (r < 0)
            return r;   /* the caller discards what is still temporary */
    }
    free_all(of);
    return 0;
}

void outfile_discard(struct outfile *of)
{
    outfile_lock();
    outfile_unlink_pending(of);
    outfile_set_active(NULL);
    outfile_unlock();
    free_all(of);
}
