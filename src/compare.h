/* compare: do two images show the same guest bytes (qemu-img compare).
 *
 * Both images' block status is walked together.  A range that reads as
 * zeros in both is equal without being read; a range that is zero in one
 * image only is read from the other and checked with buffer_is_zero; data
 * against data is read from both and compared with memcmp.  Reads run on a
 * small pool of worker threads, several chunks in flight, and are retired
 * in offset order, so the verdict is always the first difference.
 *
 * Offsets are reported as qemu-img reports them: the start of the first
 * differing 512-byte sector, counted from the start of the block-status
 * range the difference lies in.
 *
 * One of the images may be a stream (its file a pipe), not in strict mode:
 * it is read once, in order; a raw stream's size is found at its end.
 *
 * Library code: nothing is printed; failures are recorded in the images'
 * diag.
 */
#ifndef DISKIMG_COMPARE_H
#define DISKIMG_COMPARE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct bd;

struct compare_opts {
    bool strict;          /* -s: sizes and block status must match too */
    unsigned threads;     /* worker threads, 1..16 */
    unsigned inflight;    /* chunks read ahead, threads..64 */
    size_t chunk;         /* bytes per chunk, a multiple of 512, <= 16 MiB;
                             2 * inflight * chunk <= 64 MiB */
    /* progress: bytes decided so far out of max(size1, size2) */
    void (*progress)(void *opaque, uint64_t done, uint64_t total);
    void *progress_opaque;
};

enum compare_verdict {
    COMPARE_IDENTICAL,      /* same content (a larger image's tail is zeros) */
    COMPARE_CONTENT,        /* content differs at `offset` */
    COMPARE_STRICT_SIZE,    /* strict: the sizes differ */
    COMPARE_STRICT_STATUS,  /* strict: allocation differs at `offset` */
};

enum compare_failure {
    COMPARE_FAIL_NONE,
    COMPARE_FAIL_STATUS,    /* block status failed (qemu-img exit 3) */
    COMPARE_FAIL_READ,      /* reading failed (qemu-img exit 4) */
    COMPARE_FAIL_RESOURCES, /* no memory or no threads */
};

struct compare_result {
    enum compare_verdict verdict;
    uint64_t offset;
    /* The sizes differ and the common part matched, so the larger image's
     * tail was examined (qemu-img's "Warning: Image size mismatch!"). */
    bool size_mismatch;
    /* When compare_images() fails: what failed, and in which image (1, 2). */
    enum compare_failure failure;
    int image;
};

/* Defaults: threads from the CPU count (2..4), 256 KiB chunks, two per thread. */
void compare_opts_default(struct compare_opts *o);

/* Compare `a` and `b`.  Returns 0 with the verdict in *res, or a negative
 * errno with res->failure set and the reason in the images' diag. */
int compare_images(struct bd *a, struct bd *b, const struct compare_opts *o,
                   struct compare_result *res);

#endif
