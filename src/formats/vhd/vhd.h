/* VHD (qemu's "vpc") driver: reader (open.c, read.c), check, resize,
 * measure, and the writers create() hands out (write.c, write_inplace.c). */
#ifndef DISKIMG_VHD_H
#define DISKIMG_VHD_H

#include "formats/bd.h"
#include "formats/vhd/write.h"   /* bd_vhdw_dynamic, bd_vhdw_fixed */

extern const struct bd_driver bd_vhd;
extern const struct bd_driver bd_vhd_inplace;   /* convert -n (write_inplace.c) */
#endif
