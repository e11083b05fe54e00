/* outfile: where an output image is written, and how it is committed.
 *
 * A new output is written under temporary names in the target's folder
 * (".NAME.diskimg-XXXXXX"; NAME shortened, with a hash of the whole name,
 * when the name would not fit NAME_MAX) and renamed into place only by
 * outfile_commit(); outfile_discard(), and SIGINT, SIGTERM, SIGHUP,
 * SIGQUIT or SIGPIPE, remove them, so a failed or interrupted run never
 * leaves a partial image at the target path.  Writing over an existing
 * target (-n), a block device or standard output ("-") happens in place.
 *
 * Commit.  An image may be several files (a VMDK descriptor and its
 * extents) and the target may hold an older image of several files.  The
 * old image stays whole until the new descriptor is in place, and is put
 * back on any failure before that:
 *   1. every old file the commit replaces or drops gets a second name
 *      beside it, ".NAME.diskimg-old-XXXXXX": the old target first (a hard
 *      link; where the file system has none, a rename), then each file an
 *      extent of the new image replaces (link), then the old image's
 *      extents the new one does not name (renamed aside);
 *   2. the new extents are renamed over their names; when durable, the
 *      folder is synced (the extents must be on disk before the descriptor
 *      that names them);
 *   3. the new target is renamed over the old one; when durable, the
 *      folder is synced again.  This is the commit point;
 *   4. the old files' second names are removed (the old target's first).
 * A failure in 1-3 (a rename, a link, a folder fsync) undoes what was done,
 * in reverse (the old names are renamed back, new files unlinked), and the
 * command fails with the target as it was.  A failure in 4 is a warning
 * naming the file left behind.  Hard links and renames rather than
 * renameat2(RENAME_EXCHANGE) because they work on every local file system
 * and the "-old-" names tell which files are the old image's at any
 * instant (the recovery rule below).
 *   The old image's extents the new image does not name are those its
 * descriptor names that are in the target's folder and carry the names
 * diskimg and qemu-img give extents (NAME-flat.EXT, NAME-fNNN.EXT,
 * NAME-sNNN.EXT): they are removed after the commit.  Other files a
 * hand-written descriptor names are left alone.
 *   Signals: the commit runs under the lock the signal thread takes before
 * it removes temporary files, so a catchable signal waits until the
 * commit is done or undone.  An uncatchable kill (SIGKILL, a power cut)
 * during the commit can leave a mix; the rule to recover: if a file
 * ".NAME.diskimg-old-*" of the target NAME itself is there, the commit was
 * cut short and renaming every ".X.diskimg-old-*" file back to X gives the
 * old image (its files are all there until the commit point has passed
 * and that file has gone); otherwise NAME holds the new image (or nothing,
 * if there was no old image) and the "-old-" files are leftovers to delete.
 * ".X.diskimg-XXXXXX" files are always partial new output: delete them.
 *
 * Permissions.  A new file that replaces one takes over its owner and
 * group (where allowed: root, or the same owner for a group it belongs
 * to), its mode (set-group-ID included) and its extended attributes and
 * ACL; a new extent that replaces nothing takes them from the old image's
 * first extent file, else from the old target.  Where the owner or group
 * cannot be kept, the set-ID bits and (for the group) the group's
 * permissions are dropped; an ACL that cannot be set is replaced by mode
 * bits that give its owning group no more than it had and named users and
 * groups nothing (with a warning): no one gains access.  A new target
 * keeps the default mode (0644 less the umask).
 *
 * Threads and signals: outfile_install_signal_cleanup() blocks the signals
 * above in the calling thread, so every thread it creates later inherits
 * the mask, and starts one thread that takes them with sigwait(): cleanup
 * runs in a normal thread under a mutex (no async-signal-safety concerns),
 * then the process dies of the signal.  Call it first, before any thread
 * is created.  A SIGHUP ignored when the program started (nohup) stays
 * ignored.
 */
#ifndef DISKIMG_OUTFILE_H
#define DISKIMG_OUTFILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct bfile;
struct diag;

/* One further file of the image (outfile_add). */
struct outfile_extra {
    char *final;         /* where it goes */
    char *tmp;           /* its temporary name; NULL once renamed in */
};

struct outfile {
    char *path;          /* the target path as given (messages) */
    char *final;         /* where the rename goes (symlinks resolved) */
    char *tmp;           /* temporary path, or NULL when writing in place */
    struct bfile *f;     /* open for writing; set to NULL once a driver's
                            create() has taken it over */
    bool in_place;
    bool to_stdout;      /* "-": standard output */
    bool replaces;       /* `final` exists: a new file takes its place */
    /* further files of the image, all under temporary names */
    struct outfile_extra *extra;
    size_t n_extra;
    /* the old image's extent files in the target's folder, with the names
     * a writer gives them (removed after the commit unless the new image
     * names them) */
    char **old_ext;
    size_t n_old_ext;
    char *meta_from;     /* where a new extent takes its permissions from */
};

#define OUTFILE_EXISTING 0x1   /* -n: the target exists, write into it */
#define OUTFILE_DIRECT   0x2   /* O_DIRECT */

int outfile_open(struct outfile *of, const char *path, unsigned flags,
                 struct diag *d);

/* A further file of the same image (a VMDK extent) named `path` (beside
 * the target as given; it goes beside the symlink-resolved target): created
 * under a temporary name, renamed into place by outfile_commit(), removed
 * by outfile_discard() and on a signal.  *f is open for writing (named
 * `path` in messages), *tmp is the temporary path (owned by `of`) for
 * opening it again.  Only for a new target (not written in place). */
int outfile_add(struct outfile *of, const char *path, struct bfile **f,
                const char **tmp, struct diag *d);

/* outfile_add() as bd_create_opts.add_file (opaque is the outfile). */
int outfile_add_file(void *opaque, const char *path, struct bfile **f,
                     const char **tmp, struct diag *d);

/* "The output is also an input": fails when a file the output writes or
 * replaces (the target, its extents, the old image's extents it removes;
 * for an output written in place, every file opened for writing since)
 * is a file opened before bfile mark `mark` (the inputs). */
int outfile_check_inputs(const struct outfile *of, uint64_t mark, struct diag *d);

/* Commit as described above; the image driver's finish() has synced the
 * data.  `durable`: sync the folder, and fail if that fails. */
int outfile_commit(struct outfile *of, bool durable, struct diag *d);

/* Remove the temporary files (if any) and close. */
void outfile_discard(struct outfile *of);

/* Start the signal thread (see above).  0 or -errno (recorded in d). */
int outfile_install_signal_cleanup(struct diag *d);

#endif
