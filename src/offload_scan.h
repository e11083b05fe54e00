/* offload_scan: the zero runs of a range of a file, found without copying
 * its bytes into a buffer (for copy offload: the data runs are then shared
 * or copied by the kernel, the zero runs stay holes).
 *
 * Why a mapping: reading the data extents into buffers only to find their
 * zero runs copies every byte once through user space, which is most of
 * the run's time when the kernel shares the data itself.  Through a
 * read-only mapping, a 4 KiB unit of data is known to be non-zero after
 * its first bytes; only zero units are read whole.
 *
 * Each source file is mapped once, whole, on first use (mapping and
 * unmapping per range costs more than the scan: page-table locks and TLB
 * shoot-downs across the worker threads), and unmapped by
 * offload_maps_free().  A range past what was mapped, or past the file's
 * size now, is not scanned here: the caller reads it the usual way, which
 * reports a file that shrank.
 *
 * A file truncated during the scan itself (another process, a hostile
 * uploader) or a read error under the mapping raises SIGBUS in the
 * scanning thread.  A SIGBUS handler, installed once for the process and
 * chained to the one before it, turns that into -EIO for this range; a
 * SIGBUS anywhere else takes its old course.  Counted by the fault
 * injector as a read.  Thread-safe; prints nothing.
 */
#ifndef DISKIMG_OFFLOAD_SCAN_H
#define DISKIMG_OFFLOAD_SCAN_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "zerodetect/zerodetect.h"

#define OFFLOAD_MAPS_MAX 16     /* source files mapped; more are read */
/* offload_scan_runs: read this range instead; the file shrank or failed
 * to read under the scan (SIGBUS).  Both below every -errno. */
#define OFFLOAD_SCAN_READ ((ssize_t)-(1 << 20))
#define OFFLOAD_SCAN_GONE ((ssize_t)-(1 << 20) - 1)

struct offload_maps {
    pthread_mutex_t lock;
    unsigned n;
    struct offload_map {
        int fd;
        const uint8_t *base;    /* NULL: this file is not mapped (read it) */
        uint64_t len;
    } m[OFFLOAD_MAPS_MAX];
};

void offload_maps_init(struct offload_maps *maps);
void offload_maps_free(struct offload_maps *maps);

/* zd_scan_runs over bytes [off, off+len) of fd (which hold virtual offsets
 * [base, base+len)): fills `runs` (len/granule + 2 entries) and returns
 * the count; OFFLOAD_SCAN_READ when the range cannot be scanned through the
 * mapping (read it instead); OFFLOAD_SCAN_GONE when the file shrank or
 * failed to read under the scan; a -errno from the fault injector. */
ssize_t offload_scan_runs(struct offload_maps *maps, int fd, uint64_t off, size_t len,
                          uint64_t base, size_t granule, size_t min_zero,
                          struct zd_run *runs);

#endif
