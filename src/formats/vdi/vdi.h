/* VDI (VirtualBox) driver: reader (open.c, read.c), check, resize,
 * measure, and the writer create() hands out (write.c). */
#ifndef DISKIMG_VDI_H
#define DISKIMG_VDI_H

#include "formats/bd.h"

extern const struct bd_driver bd_vdi;
extern const struct bd_driver bd_vdiw;

#endif
