/* Fuzz target: `convert -n` into a hostile VHD (fixed, dynamic or
 * differencing; formats/vhd/write_inplace.c); the body and its oracles
 * are in inplace_body.h. */
#define INPLACE_FMT "vpc"
#include "inplace_body.h"
