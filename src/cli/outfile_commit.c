/* The commit of outfile.h: the old image stays whole until the new target
 * is in place, and is put back when anything fails before that.
 *
 * Each file of the commit is a step: the new target (last in, but its old
 * file gets its second name first), the new extents, and the old extents
 * the new image drops.  A step records what it did, so that undo() can
 * reverse exactly that. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "outfile_priv.h"
#include "util/diag.h"

enum keep { KEPT_NONE, KEPT_LINK, KEPT_MOVED };

struct step {
    const char *final;      /* the file's name */
    char **tmp;             /* the new file's temporary name (NULL for a drop);
                               set to NULL in the outfile once renamed in */
    const char *shown;      /* name for messages */
    char *old;              /* second name of the old file, or NULL */
    enum keep kept;
    bool renamed_in;        /* the new file is at `final` */
};

/* Is the error "this file system has no hard links (here)"? */
static bool no_links(int e)
{
    return e == EPERM || e == EOPNOTSUPP || e == ENOTSUP || e == ENOSYS || e == EMLINK ||
           e == EXDEV;
}

/* Give the old file at s->final a second name ".NAME.diskimg-old-XXXXXX":
 * a hard link (the old file stays at its name), else, where the file
 * system has none or `move` is set, a rename.  Nothing there: nothing to
 * keep. */
static int keep_old(struct step *s, bool move, struct diag *d)
{
    struct stat st;

    if (lstat(s->final, &st) < 0) {
        if (errno == ENOENT)
            return 0;
        return diag_errno(d, -errno, s->shown, -1, "cannot stat");
    }
    if (!(s->old = outfile_name_template(s->final, "old-")))
        return diag_fail(d, -ENOMEM, s->shown, -1, "out of memory");
    for (int tries = 0; tries < 100; tries++) {
        outfile_name_randomize(s->old);
        if (!move) {
            if (link(s->final, s->old) == 0) {
                s->kept = KEPT_LINK;
                return 0;
            }
            if (errno == EEXIST)
                continue;
            if (!no_links(errno))
                break;
            move = true;
        }
        /* RENAME_NOREPLACE: never over a file that happens to have the name */
        if (renameat2(AT_FDCWD, s->final, AT_FDCWD, s->old, RENAME_NOREPLACE) == 0) {
            s->kept = KEPT_MOVED;
            return 0;
        }
        if (errno == EEXIST)
            continue;
        if (errno != EINVAL && errno != ENOSYS)
            break;
        /* a file system without RENAME_NOREPLACE: the name is random */
        struct stat tst;
        if (lstat(s->old, &tst) == 0)
            continue;
        if (rename(s->final, s->old) == 0) {
            s->kept = KEPT_MOVED;
            return 0;
        }
        break;
    }
    int e = errno == EEXIST ? -EEXIST : -errno;
    free(s->old);
    s->old = NULL;
    return diag_errno(d, e, s->shown, -1, "cannot keep the old file while replacing it");
}

static int rename_in(struct step *s, struct diag *d)
{
    if (rename(*s->tmp, s->final) < 0)
        return diag_errno(d, -errno, s->shown, -1, "cannot rename the output into place");
    s->renamed_in = true;
    free(*s->tmp);
    *s->tmp = NULL;     /* in place now: no longer a temporary file */
    return 0;
}

/* Reverse what the step did (best effort; what cannot be put back is
 * named in a warning). */
static void undo(struct step *s, struct diag *d)
{
    int r = 0;

    if (s->old && (s->renamed_in || s->kept == KEPT_MOVED))
        r = rename(s->old, s->final);       /* the old file back at its name */
    else if (s->old)
        r = unlink(s->old);                 /* only linked: drop the second name */
    else if (s->renamed_in)
        r = unlink(s->final);               /* new, with nothing before it */
    if (r < 0)
        diag_warn(d, s->shown, -1, "could not undo the replacement (%s)%s%s", strerror(errno),
                  s->old ? ": the old file is " : "", s->old ? s->old : "");
    else if (s->old)
        s->old = (free(s->old), NULL);
    s->renamed_in = false;
    s->kept = KEPT_NONE;
}

/* fsync of the folder; 0, or -errno recorded. */
static int sync_dir(int dfd, const char *dir, struct diag *d)
{
    for (;;) {
        if (fsync(dfd) == 0)
            return 0;
        if (errno != EINTR)
            return diag_errno(d, -errno, dir, -1, "cannot sync the folder (the output was "
                              "not committed)");
    }
}

int outfile_commit_files(struct outfile *of, bool durable, struct diag *d)
{
    size_t n = 1 + of->n_extra + of->n_old_ext, ns = 0;
    struct step *s = calloc(n, sizeof(*s));
    char *dir = outfile_dirname(of->final);
    int dfd = -1, r = 0;

    if (!s || !dir) {
        r = diag_fail(d, -ENOMEM, of->path, -1, "out of memory");
        goto out;
    }
    if (durable) {
        dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd < 0 && errno == EACCES) {
            /* a folder one may write but not read (drop box): no fsync */
            diag_warn(d, dir, -1, "cannot open the folder to sync it (permission denied): "
                      "the new name is not known to be on disk");
        } else if (dfd < 0) {
            r = diag_errno(d, -errno, dir, -1, "cannot open the folder to sync it");
            goto out;
        }
    }
    /* s[0]: the target; then the extents; then the old extents to drop */
    s[ns++] = (struct step){ .final = of->final, .tmp = &of->tmp, .shown = of->path };
    for (size_t i = 0; i < of->n_extra; i++)
        s[ns++] = (struct step){ .final = of->extra[i].final, .tmp = &of->extra[i].tmp,
                                 .shown = of->extra[i].final };
    for (size_t i = 0; i < of->n_old_ext; i++) {
        bool named = false;
        for (size_t j = 0; j < of->n_extra && !named; j++)
            named = strcmp(of->old_ext[i], of->extra[j].final) == 0;
        if (!named && strcmp(of->old_ext[i], of->final) != 0)
            s[ns++] = (struct step){ .final = of->old_ext[i], .shown = of->old_ext[i] };
    }

    /* 1. the old target's second name first: while it exists, the old
     * image's files are all there (the recovery rule of outfile.h) */
    if ((r = keep_old(&s[0], false, d)) < 0)
        goto undo;
    /* 2. the extents, then the old extents out of the way */
    for (size_t i = 1; i < ns; i++) {
        bool drop = !s[i].tmp;
        if ((r = keep_old(&s[i], drop, d)) < 0 || (!drop && (r = rename_in(&s[i], d)) < 0))
            goto undo;
    }
    if (ns > 1 && dfd >= 0 && (r = sync_dir(dfd, dir, d)) < 0)
        goto undo;
    /* 3. the commit point */
    if ((r = rename_in(&s[0], d)) < 0 || (dfd >= 0 && (r = sync_dir(dfd, dir, d)) < 0))
        goto undo;
    /* 4. the old files go, the old target's second name first */
    for (size_t i = 0; i < ns; i++)
        if (s[i].old && unlink(s[i].old) < 0)
            diag_warn(d, s[i].shown, -1, "the new image is in place, but the old file's "
                      "copy %s could not be removed (%s): delete it", s[i].old,
                      strerror(errno));
    goto out;

undo:
    for (size_t i = ns; i-- > 0;)
        undo(&s[i], d);
    /* what was put back must be on disk too (best effort: already failing) */
    if (dfd >= 0)
        fsync(dfd);
out:
    for (size_t i = 0; s && i < ns; i++)
        free(s[i].old);
    free(s);
    free(dir);
    if (dfd >= 0)
        close(dfd);
    return r;
}
