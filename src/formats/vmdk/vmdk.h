/* VMDK (VMware virtual disk) reader driver (open.c); the writer is
 * vmdk/write*.c, reached through the driver's create(). */
#ifndef DISKIMG_VMDK_H
#define DISKIMG_VMDK_H

#include "formats/bd.h"

extern const struct bd_driver bd_vmdk;

#endif
