/* hugebuf: large working buffers backed by transparent huge pages.
 *
 * convert's chunk buffers are filled by pread (or decompression) and
 * emptied by pwrite, over and over: hundreds of MiB pass through a few MiB
 * of memory.  On 4 KiB pages the first touch of every page faults and every
 * copy walks 256 page-table entries per MiB; in a virtual machine both cost
 * far more than the copy (measured: dynamic VHD -> raw 152 -> 106 ms, raw ->
 * VDI 148 -> 107 ms for 434 MiB).  A 2 MiB-aligned block advised
 * MADV_HUGEPAGE is backed by 2 MiB pages where the kernel allows it
 * (transparent_hugepage "always" or "madvise"), and by ordinary pages
 * otherwise, with nothing else changed.
 */
#ifndef DISKIMG_HUGEBUF_H
#define DISKIMG_HUGEBUF_H

#include <stddef.h>

/* count buffers of len bytes each in one block (rounded up to 2 MiB,
 * 2 MiB-aligned, uninitialised): buffer i starts at i * *stride, on 4 KiB
 * (which keeps O_DIRECT possible).  NULL when out of memory or when the
 * sizes overflow.  Released with free() of the returned pointer. */
void *hugebuf_alloc(size_t count, size_t len, size_t *stride);

#endif
