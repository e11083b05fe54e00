/* OVA archives (a tar holding VMDKs) read in place (ova/open.c).  A
 * read-only driver. */
#ifndef DISKIMG_OVA_H
#define DISKIMG_OVA_H

#include "formats/bd.h"

extern const struct bd_driver bd_ova;

#endif
