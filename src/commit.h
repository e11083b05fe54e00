/* commit: write what a top image holds above a base image of its backing
 * chain into that base, then (unless told not to) empty the top so that it
 * reads through to the base again (qemu-img commit).  Library code:
 * nothing printed.
 *
 * What is written: every range some image above the base allocates (data,
 * or zeros where the topmost such image says zeros), read as the top image
 * shows it, in whole clusters of the base; a base smaller than the top is
 * grown to the top's size first.  The base is written in place through its
 * format's in-place writer (qcow2, raw), which keeps it consistent at every
 * step (data before the metadata that names it), and synced; only then is
 * the top emptied, in one switch (bd_driver.make_empty).  Everything that
 * can be refused (a base format that cannot be written in place, a corrupt
 * base or top, a grow the base refuses) is refused before the first write
 * into the base. */
#ifndef DISKIMG_COMMIT_H
#define DISKIMG_COMMIT_H

#include <stdbool.h>
#include <stdint.h>

struct bd;
struct diag;

struct commit_opts {
    const char *filename;       /* the top image */
    const char *format;         /* its format (-f), or NULL: probe */
    /* -b: the base, named as qemu-img takes it (relative to the folder of
     * the image that refers to it, or absolute), or NULL: the top's
     * backing file */
    const char *base;
    bool drop;                  /* -d: leave the top as it is */
    bool allow_external;        /* references may leave their folder */
    uint64_t rate_limit;        /* bytes of data per second, 0: no limit */
    void (*progress)(void *opaque, uint64_t done, uint64_t total);
    void *progress_opaque;
};

/* What a commit did. */
struct commit_result {
    uint64_t written;           /* bytes of data written into the base */
    uint64_t zeroed;            /* bytes made zeros in the base */
    bool emptied;               /* the top was emptied */
};

/* Returns 0 or a negative errno recorded in `d`.  Messages of qemu-img's
 * own refusals ("Image does not have a backing file", "Did not find 'B' in
 * the backing chain of 'T'") are recorded without a file name. */
int commit_image(const struct commit_opts *o, struct diag *d, struct commit_result *res);

/* The layer of `top`'s chain that `name` designates as qemu-img commit -b
 * does: for each image of the chain, `name` taken relative to that image's
 * folder (as is when absolute) must be the same file as its backing file.
 * NULL when none is. */
struct bd *commit_find_base(struct bd *top, const char *name);

#endif
