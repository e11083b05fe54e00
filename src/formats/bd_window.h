/* bd_window: a read-only view of part of another image, for dd.
 *
 * The view's byte 0 is byte `start` of `inner`; its first `data_len` bytes
 * are inner's, the rest up to `size` read as zeros (qemu-img dd pads the
 * copied bytes up to the output's size with zeros, even where the input
 * has more).  Block status and reads go through inner's chain view, so
 * holes, zero clusters and host offsets (copy offload) come through as
 * they are.  The view takes `inner` over: closing it closes inner. */
#ifndef DISKIMG_BD_WINDOW_H
#define DISKIMG_BD_WINDOW_H

#include <stdint.h>

struct bd;
struct diag;

/* 0, or -EINVAL when [start, start + data_len) is not inside inner or
 * data_len > size (inner is closed then too), -ENOMEM. */
int bd_window_open(struct bd **out, struct bd *inner, uint64_t start, uint64_t data_len,
                   uint64_t size, struct diag *d);

#endif
