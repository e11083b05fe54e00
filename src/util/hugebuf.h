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

/* len bytes (rounded up to 2 MiB), 2 MiB-aligned, uninitialised; NULL when
 * out of memory.  Released with free(). */
void *hugebuf_alloc(size_t len);

#endif
