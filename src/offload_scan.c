/* offload_scan: zero runs of a file range through a read-only mapping. */
#include "offload_scan.h"

#include <errno.h>
#include <sys/mman.h>
#include <sys/types.h>
#include <unistd.h>

#include "io/fault.h"

ssize_t offload_scan_runs(int fd, uint64_t off, size_t len, uint64_t base, size_t granule,
                          size_t min_zero, struct zd_run *runs)
{
    static long page;
    size_t want = len;
    int inj;

    if (len == 0)
        return 0;
    if (min_zero == 0) {
        /* no zero runs wanted: nothing to look at */
        return (ssize_t)zd_scan_runs(NULL, len, base, granule, 0, runs);
    }
    while ((inj = fault_inject(FAULT_READ, &want)) == -EINTR || inj == -EAGAIN)
        want = len;
    if (inj < 0)
        return inj;
    if (!page && (page = sysconf(_SC_PAGESIZE)) <= 0)
        page = 4096;
    uint64_t start = off - off % (uint64_t)page;
    size_t maplen = len + (size_t)(off - start);
    void *m = mmap(NULL, maplen, PROT_READ, MAP_SHARED | MAP_POPULATE, fd, (off_t)start);
    if (m == MAP_FAILED)
        return -errno;
    size_t n = zd_scan_runs((const uint8_t *)m + (off - start), len, base, granule,
                            min_zero, runs);
    munmap(m, maplen);
    return (ssize_t)n;
}
