/* Inside outfile (outfile.h): the pieces the output's files are made of. */
#ifndef DISKIMG_OUTFILE_PRIV_H
#define DISKIMG_OUTFILE_PRIV_H

#include <stdbool.h>
#include <sys/stat.h>

#include "outfile.h"

struct diag;

/* outfile_signal.c: the lock that the signal thread takes before it
 * removes the active output's temporary files.  Everything that creates,
 * renames or forgets a temporary file holds it. */
void outfile_lock(void);
void outfile_unlock(void);
/* Under the lock: the output whose temporary files a signal removes
 * (NULL: none). */
void outfile_set_active(struct outfile *of);
/* Under the lock: unlink the temporary files `of` has pending. */
void outfile_unlink_pending(const struct outfile *of);

/* outfile_names.c */
/* "DIR/.BASE.diskimg-<tag>XXXXXX" beside `target` (tag "" or "old-"):
 * BASE is the target's name, or, when the whole name would not fit
 * NAME_MAX, its first bytes (cut at a UTF-8 character) and "~" and a hash
 * of the whole name.  NULL when out of memory. */
char *outfile_name_template(const char *target, const char *tag);
/* Fill the template's trailing XXXXXX with random letters and digits. */
void outfile_name_randomize(char *tmpl);
/* The folder of `path` ("." for a bare name); NULL when out of memory. */
char *outfile_dirname(const char *path);
/* Does `base` fit in a directory entry (NAME_MAX)? */
bool outfile_name_fits(const char *path);

/* outfile_meta.c: give the new file `fd` the owner, group, mode, ACL and
 * extended attributes of `from` (whose lstat is *st), without giving
 * anyone access they did not have (outfile.h).  `shown` names the new
 * file in messages.  0 or -errno (recorded in d); warnings through d. */
int outfile_copy_meta(int fd, const char *from, const struct stat *st,
                      const char *shown, struct diag *d);

/* outfile_old.c: the old image's extent files in `final`'s folder that
 * carry a writer's names for the target `final` or `given` (outfile.h);
 * *out is NULL-free, malloc'd paths.  Reads nothing but the target. */
int outfile_old_extents(const char *final, const char *given, char ***out, size_t *n);

/* outfile_commit.c: the commit protocol (outfile.h) for the main file
 * (tmp -> final), the extras and the old extents to drop.  Called under
 * the lock. */
int outfile_commit_files(struct outfile *of, bool durable, struct diag *d);

#endif
