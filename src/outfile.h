/* outfile: where an output image is written, and how it is committed.
 *
 * A new regular file is written under a temporary name in the target's
 * folder (".NAME.diskimg-XXXXXX") and renamed into place only by
 * outfile_commit(); outfile_discard() (and SIGINT/SIGTERM/SIGHUP/SIGPIPE)
 * removes it, so a failed or interrupted run never leaves a partial image at
 * the target path.  Writing over an existing target (-n), a block device or
 * standard output ("-") happens in place.
 */
#ifndef DISKIMG_OUTFILE_H
#define DISKIMG_OUTFILE_H

#include <stdbool.h>
#include <stddef.h>

struct bfile;
struct diag;

struct outfile {
    char *path;          /* the target path as given */
    char *final;         /* where the rename goes (symlinks resolved) */
    char *tmp;           /* temporary path, or NULL when writing in place */
    struct bfile *f;     /* open for writing; set to NULL once a driver's
                            create() has taken it over */
    bool in_place;
    /* further files of the image (outfile_add), all under temporary names */
    char **extra_final, **extra_tmp;
    size_t n_extra;
};

#define OUTFILE_EXISTING 0x1   /* -n: the target exists, write into it */
#define OUTFILE_DIRECT   0x2   /* O_DIRECT */

int outfile_open(struct outfile *of, const char *path, unsigned flags,
                 struct diag *d);

/* A further file of the same image (a VMDK extent) at `path`: created
 * under a temporary name beside it, renamed into place by outfile_commit()
 * before the target itself, removed by outfile_discard() and by the signal
 * handlers.  *f is open for writing (named `path` in messages), *tmp is
 * the temporary path (owned by `of`) for opening it again.  Only for a new
 * target (not written in place). */
int outfile_add(struct outfile *of, const char *path, struct bfile **f,
                const char **tmp, struct diag *d);

/* outfile_add() as bd_create_opts.add_file (opaque is the outfile). */
int outfile_add_file(void *opaque, const char *path, struct bfile **f,
                     const char **tmp, struct diag *d);

/* Rename into place and, when durable, sync the folder (the image driver's
 * finish() has synced the data). */
int outfile_commit(struct outfile *of, bool durable, struct diag *d);

/* Remove the temporary file (if any) and close. */
void outfile_discard(struct outfile *of);

/* Install the signal handlers that remove a pending temporary file. */
void outfile_install_signal_cleanup(void);

#endif
