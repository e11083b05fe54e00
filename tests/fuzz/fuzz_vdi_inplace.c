/* Fuzz target: `convert -n` into a hostile VDI (dynamic, static or
 * differencing; formats/vdi/write_inplace.c); the body and its oracles
 * are in inplace_body.h. */
#define INPLACE_FMT "vdi"
#include "inplace_body.h"
