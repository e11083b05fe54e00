/* VHDX (Hyper-V's Virtual Hard Disk v2): the reader's driver table. */
#ifndef DISKIMG_VHDX_H
#define DISKIMG_VHDX_H

#include "formats/bd.h"

extern const struct bd_driver bd_vhdx;

#endif
