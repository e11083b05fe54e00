/* sparsify: punch holes into the zero runs of a raw file, in place.
 *
 * The convert pipeline does the work: the file is its own source (its
 * existing holes are skipped via SEEK_DATA), data runs are left alone and
 * zero runs of at least `sparse_size` bytes are punched with
 * FALLOC_FL_PUNCH_HOLE|FALLOC_FL_KEEP_SIZE.  Content and size never change.
 */
#ifndef DISKIMG_SPARSIFY_H
#define DISKIMG_SPARSIFY_H

#include <stdbool.h>
#include <stdint.h>

struct diag;

struct sparsify_opts {
    const char *path;
    uint64_t sparse_size;      /* shortest zero run punched (default 4 KiB) */
    bool dry_run;              /* only count */
    unsigned threads;
    void (*progress)(void *opaque, uint64_t done, uint64_t total);
    void *progress_opaque;
};

struct sparsify_result {
    uint64_t size;             /* file size */
    uint64_t zero_found;       /* bytes of zero runs found in data */
    uint64_t before, after;    /* allocated bytes before and after */
};

int sparsify_run(const struct sparsify_opts *o, struct sparsify_result *res,
                 struct diag *d);

#endif
