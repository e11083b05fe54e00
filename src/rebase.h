/* rebase: before an image is given another backing file, write into it
 * every range it leaves to its backing chain where the old chain and the
 * new backing file differ, so that its guest view stays the same (qemu-img
 * rebase's safe mode).  Library code: nothing printed. */
#ifndef DISKIMG_REBASE_H
#define DISKIMG_REBASE_H

#include <stdbool.h>
#include <stdint.h>

struct bd;
struct diag;

struct rebase_opts {
    struct bd *img;         /* the image, opened with its old backing chain */
    struct bd *new_backing; /* the new backing file, or NULL (none: zeros) */
    struct bd *out;         /* the same image, opened for writing in place */
    bool compress;          /* -c: clusters written compressed where they shrink */
    void (*progress)(void *opaque, uint64_t done, uint64_t total);
    void *progress_opaque;
};

/* Returns 0 or a negative errno recorded in `d`; *written: bytes written. */
int rebase_copy(const struct rebase_opts *o, struct diag *d, uint64_t *written);

#endif
