#define _GNU_SOURCE
#include "outfile.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "io/bfile.h"
#include "io/fault.h"
#include "util/diag.h"

/* The temporary file a signal handler must remove (one output at a time),
 * and the output's further files (outfile_add). */
static char pending_tmp[PATH_MAX];
static volatile sig_atomic_t pending_set;
static char **volatile pending_extra;
static volatile size_t pending_n_extra;

static void on_fatal_signal(int sig)
{
    if (pending_set)
        unlink(pending_tmp);
    for (size_t i = 0; pending_extra && i < pending_n_extra; i++)
        if (pending_extra[i])
            unlink(pending_extra[i]);
    signal(sig, SIG_DFL);
    raise(sig);
}

void outfile_install_signal_cleanup(void)
{
    static const int sigs[] = { SIGINT, SIGTERM, SIGHUP, SIGPIPE, SIGQUIT };
    struct sigaction sa;

    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_fatal_signal;
    sigemptyset(&sa.sa_mask);
    for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
        sigaction(sigs[i], &sa, NULL);
}

static void set_pending(const char *tmp)
{
    sigset_t all, old;

    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    if (tmp) {
        snprintf(pending_tmp, sizeof(pending_tmp), "%s", tmp);
        pending_set = 1;
    } else {
        pending_set = 0;
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
}

static void set_pending_extra(char **tmp, size_t n)
{
    sigset_t all, old;

    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    pending_extra = tmp;
    pending_n_extra = n;
    pthread_sigmask(SIG_SETMASK, &old, NULL);
}

/* A new file ".NAME.diskimg-XXXXXX" beside `target` (mode 0644 less the
 * umask); *tmp receives its path. */
static int make_temp(const char *target, const char *shown, int oflags, char **tmp,
                     int *fdp, struct diag *d)
{
    char *dcopy = strdup(target), *bcopy = strdup(target);
    if (!dcopy || !bcopy) {
        free(dcopy);
        free(bcopy);
        return diag_fail(d, -ENOMEM, shown, -1, "out of memory");
    }
    int n = asprintf(tmp, "%s/.%s.diskimg-XXXXXX", dirname(dcopy), basename(bcopy));
    free(dcopy);
    free(bcopy);
    if (n < 0) {
        *tmp = NULL;
        return diag_fail(d, -ENOMEM, shown, -1, "out of memory");
    }
    int fd = mkostemp(*tmp, oflags);
    if (fd < 0) {
        int e = errno;
        free(*tmp);
        *tmp = NULL;
        if (e == EACCES || e == EPERM || e == EROFS)
            return diag_fail(d, -e, shown, -1, "cannot create the output: %s in its folder",
                             e == EROFS ? "read-only file system" : "permission denied");
        return diag_errno(d, -e, shown, -1, "cannot create the output");
    }
    mode_t um = umask(0);
    umask(um);
    if (fchmod(fd, 0644 & ~um) < 0) {
        int e = -errno;
        close(fd);
        unlink(*tmp);
        free(*tmp);
        *tmp = NULL;
        return diag_errno(d, e, shown, -1, "cannot set permissions");
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

static int open_target(struct outfile *of, const char *path, unsigned flags,
                       struct diag *d)
{
    struct stat st;

    memset(of, 0, sizeof(*of));
    of->path = strdup(path);
    if (!of->path)
        return diag_fail(d, -ENOMEM, path, -1, "out of memory");
    if (strcmp(path, "-") == 0) {
        int fd = fcntl(STDOUT_FILENO, F_DUPFD_CLOEXEC, 3);
        if (fd < 0)
            return diag_errno(d, -errno, "(stdout)", -1, "cannot use standard output");
        of->in_place = true;
        return bfile_from_fd(&of->f, fd, "(stdout)", true, d);
    }
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
    int fd, oflags = O_CLOEXEC | ((flags & OUTFILE_DIRECT) ? O_DIRECT : 0);
    int r = make_temp(of->final, path, oflags, &of->tmp, &fd, d);
    if (r < 0)
        return r;
    set_pending(of->tmp);
    r = bfile_from_fd(&of->f, fd, of->tmp, true, d);
    if (r < 0) {
        outfile_discard(of);
        return r;
    }
    /* messages name the target, not the temporary file */
    free(of->f->path);
    of->f->path = strdup(path);
    if (!of->f->path) {
        outfile_discard(of);
        return diag_fail(d, -ENOMEM, path, -1, "out of memory");
    }
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
    char *t = NULL, *fin = NULL;
    int fd, r;

    *f = NULL;
    if (!of->tmp)
        return diag_fail(d, -ENOTSUP, path, -1,
                         "an image of several files needs a new output file");
    char **nf = realloc(of->extra_final, (of->n_extra + 1) * sizeof(*nf));
    if (nf)
        of->extra_final = nf;
    char **nt = realloc(of->extra_tmp, (of->n_extra + 1) * sizeof(*nt));
    if (nt) {
        of->extra_tmp = nt;
        set_pending_extra(of->extra_tmp, of->n_extra);    /* the array moved */
    }
    if (!nf || !nt || !(fin = strdup(path)))
        return diag_fail(d, -ENOMEM, path, -1, "out of memory");
    if ((r = make_temp(path, path, O_CLOEXEC, &t, &fd, d)) < 0) {
        free(fin);
        return r;
    }
    of->extra_final[of->n_extra] = fin;
    of->extra_tmp[of->n_extra] = t;
    of->n_extra++;
    set_pending_extra(of->extra_tmp, of->n_extra);
    if ((r = bfile_from_fd(f, fd, path, true, d)) < 0)
        return r;
    *tmp = t;
    return 0;
}

int outfile_add_file(void *opaque, const char *path, struct bfile **f,
                     const char **tmp, struct diag *d)
{
    return outfile_add(opaque, path, f, tmp, d);
}

static void forget_extra(struct outfile *of, bool remove)
{
    set_pending_extra(NULL, 0);
    for (size_t i = 0; i < of->n_extra; i++) {
        if (remove && of->extra_tmp[i])
            unlink(of->extra_tmp[i]);
        free(of->extra_tmp[i]);
        free(of->extra_final[i]);
    }
    free(of->extra_tmp);
    free(of->extra_final);
    of->extra_tmp = of->extra_final = NULL;
    of->n_extra = 0;
}

static int sync_folder(const char *file, struct diag *d)
{
    char *copy = strdup(file);
    if (!copy)
        return diag_fail(d, -ENOMEM, file, -1, "out of memory");
    int fd = open(dirname(copy), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    free(copy);
    if (fd < 0)
        return 0; /* nothing we can do; the data itself is synced */
    fsync(fd);
    close(fd);
    return 0;
}

int outfile_commit(struct outfile *of, bool durable, struct diag *d)
{
    /* the image's further files first: the target names them */
    for (size_t i = 0; i < of->n_extra; i++) {
        if (rename(of->extra_tmp[i], of->extra_final[i]) < 0)
            return diag_errno(d, -errno, of->extra_final[i], -1,
                              "cannot rename the output into place");
        free(of->extra_tmp[i]);
        of->extra_tmp[i] = NULL;    /* in place now: discard must not remove it */
    }
    if (of->n_extra && durable)
        sync_folder(of->extra_final[0], d);
    forget_extra(of, false);
    if (of->tmp) {
        if (rename(of->tmp, of->final) < 0)
            return diag_errno(d, -errno, of->path, -1, "cannot rename the output into place");
        set_pending(NULL);
        free(of->tmp);
        of->tmp = NULL;
        if (durable)
            sync_folder(of->final, d);
    }
    bfile_close(of->f);   /* NULL when an image driver took it over */
    of->f = NULL;
    free(of->path);
    free(of->final);
    of->path = of->final = NULL;
    return 0;
}

void outfile_discard(struct outfile *of)
{
    forget_extra(of, true);
    if (of->tmp) {
        unlink(of->tmp);
        set_pending(NULL);
        free(of->tmp);
        of->tmp = NULL;
    }
    bfile_close(of->f);
    of->f = NULL;
    free(of->path);
    free(of->final);
    of->path = of->final = NULL;
}
