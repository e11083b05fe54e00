/* offload_scan: the zero runs of a range of a file, found without copying
 * its bytes into a buffer (for copy offload: the data runs are then shared
 * or copied by the kernel, the zero runs stay holes).
 *
 * Why not read the data: reading the data extents into buffers only to
 * find their zero runs copies every byte once through user space, which is
 * most of the run's time when the kernel shares the data itself.  Two
 * scans avoid it.  offload_sample_runs (the default) reads 64 bytes per
 * 64 KiB block and reads whole blocks only around zeros;
 * offload_scan_runs looks at every 4 KiB unit through the mapping below,
 * where a unit of data is known to be non-zero after its first bytes
 * (kept for comparison: DISKIMG_OFFLOAD=scanall).  The mapping costs per
 * page it maps: little on XFS, whose page cache holds large folios, 0.57
 * µs a 4 KiB page on btrfs, where touching every page of the data cost
 * more than `qemu-img -C`'s whole run.
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
    /* offload_sample_runs reads its blocks through the mapping (true) or
     * by pread (false, the default, which measured faster: raw -> raw,
     * alternated, mapped / read 1.22-1.28 on XFS; on btrfs, whose page
     * cache holds 4 KiB folios on this kernel, 1.98x `qemu-img -C`'s wall
     * time against 1.06x) */
    bool sample_mapped;
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

/* The cheaper scan, by sampling: the zero runs of bytes [off, off+len) of
 * fd (virtual offsets [base, base+len)) found without reading most of the
 * data.  The range is cut into blocks of OFFLOAD_SAMPLE_BLOCK (aligned to
 * virtual offsets, the first and last possibly partial) and the first
 * OFFLOAD_SAMPLE_BYTES of each, and of the block after the range, are read.
 * A block whose sample is not all zero starts with data; it is read whole
 * only when the next block's sample is zero (a zero run may begin inside
 * it), so every zero run that reaches a block boundary is found exactly,
 * at `granule`, as zd_scan_runs finds it.  A zero stretch strictly inside
 * one block (shorter than a block) stays data: the kernel shares it, which
 * costs no space, or copies it.  Blocks are read into buf (buf_len bytes,
 * at least a block: OFFLOAD_SAMPLE_BLOCK, or granule if larger, or len if
 * less; -EINVAL otherwise), each with the next block's sample where buf
 * holds both.  Output as offload_scan_runs (`runs`:
 * len/granule + 4 entries); a short read inside the range is
 * OFFLOAD_SCAN_GONE.
 *
 * Why: mapping the data costs per 4 KiB page (0.57 µs on btrfs, whose page
 * cache holds 4 KiB folios), and reading it copies every byte; a 64-byte
 * read per 64 KiB block costs neither for the data that is not zero. */
#define OFFLOAD_SAMPLE_BLOCK (64u << 10)  /* or the granule, if larger */
#define OFFLOAD_SAMPLE_BYTES 64u
ssize_t offload_sample_runs(struct offload_maps *maps, int fd, uint64_t off, size_t len,
                            uint64_t base, size_t granule, size_t min_zero, uint8_t *buf,
                            size_t buf_len, struct zd_run *runs);

#endif
