/* Fuzz target: `convert -n` into a hostile qcow2 image
 * (formats/qcow2/write_inplace.c); the body and its oracles are in
 * inplace_body.h. */
#define INPLACE_FMT "qcow2"
#include "inplace_body.h"
