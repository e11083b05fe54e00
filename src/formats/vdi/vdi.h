/* VDI (VirtualBox) driver: reader (open.c, read.c), check, resize,
 * measure, and the writers create() hands out (write.c, write_inplace.c). */
#ifndef DISKIMG_VDI_H
#define DISKIMG_VDI_H

#include "formats/bd.h"

extern const struct bd_driver bd_vdi;
extern const struct bd_driver bd_vdiw;
extern const struct bd_driver bd_vdi_inplace;   /* convert -n (write_inplace.c) */

#endif
