/* offload_scan: the zero runs of a range of a file, found without copying
 * its bytes into a buffer (for copy offload: the data runs are then shared
 * or copied by the kernel, the zero runs stay holes).
 *
 * The range is mapped read-only (MAP_POPULATE: the kernel fills the page
 * tables in one go, reading ahead as it does), scanned with zd_scan_runs
 * and unmapped.  The caller makes sure the range lies inside the file (a
 * file truncated meanwhile under the mapping would raise SIGBUS).  Counted
 * by the fault injector as a read.  Thread-safe; prints nothing.
 */
#ifndef DISKIMG_OFFLOAD_SCAN_H
#define DISKIMG_OFFLOAD_SCAN_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "zerodetect/zerodetect.h"

/* zd_scan_runs over bytes [off, off+len) of fd (which hold virtual offsets
 * [base, base+len)): fills `runs` (len/granule + 2 entries), returns the
 * count, or a negative errno (mmap failed). */
ssize_t offload_scan_runs(int fd, uint64_t off, size_t len, uint64_t base, size_t granule,
                          size_t min_zero, struct zd_run *runs);

#endif
