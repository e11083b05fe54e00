/* The format drivers, in probing order; NULL-terminated. */
#ifndef DISKIMG_REGISTRY_H
#define DISKIMG_REGISTRY_H

#include "formats/bd.h"

extern const struct bd_driver *const bd_drivers[];

#endif
