/* VMDK (VMware virtual disk) reader, and OVA archives (a tar holding VMDKs)
 * read in place.  Read-only drivers. */
#ifndef DISKIMG_VMDK_H
#define DISKIMG_VMDK_H

#include "formats/bd.h"

extern const struct bd_driver bd_vmdk;
extern const struct bd_driver bd_ova;

#endif
