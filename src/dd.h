/* dd: which bytes of the input `diskimg dd` copies, and how large the
 * output is, as qemu-img 7.2's dd decides it:
 *
 *   end  = the input's size, or count x bs when count is given and that
 *          is smaller (count counts from the input's start, not from skip:
 *          "skip=1 count=3" copies blocks 1 and 2);
 *   skip x bs past `end` (or too large to compute): nothing is copied, the
 *          output is empty and qemu-img says "cannot skip to specified
 *          offset" (a warning: the exit status stays 0);
 *   else the output holds bytes [skip x bs, end) of the input, and its
 *          virtual size is that length rounded up to whole 512-byte
 *          sectors (the rest reads as zeros).
 *
 * The copy itself is convert_run() over a bd_window of the input. */
#ifndef DISKIMG_DD_H
#define DISKIMG_DD_H

#include <stdbool.h>
#include <stdint.h>

struct dd_params {
    uint64_t bs;            /* 1 .. INT_MAX (default 512) */
    bool has_count, has_skip;
    uint64_t count, skip;   /* 0 .. INT64_MAX, in blocks of bs */
};

struct dd_plan {
    uint64_t start;         /* first input byte copied */
    uint64_t data_len;      /* bytes copied */
    uint64_t out_size;      /* the output's virtual size (>= data_len) */
    bool skip_past_end;     /* skip lies past the end: warn, copy nothing */
};

void dd_plan(const struct dd_params *p, uint64_t in_size, struct dd_plan *pl);

#endif
