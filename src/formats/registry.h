/* Every driver table, by role.
 *
 * bd_drivers: the formats, in probing order (bd_open, bd_find_driver).  A
 * format reads (probe, open, block_status, pread, close, and optionally
 * info, check, resize, measure) and, when it has create(), makes new
 * images; its caps (BD_CAP_STREAM_OUT ...) say what its output can do.
 *
 * bd_writers: the tables create() hands out for the image being written
 * (pwrite, write_zeroes, finish, abort, close, and optionally compress,
 * pwrite_compressed, next_pass); their caps say what they need from the
 * pipeline (BD_CAP_ALL_COMPRESSED, BD_CAP_IN_ORDER).  Each carries the
 * name of its format.  Listed here so that every table is found in one
 * place, and tests/unit/test_registry.c checks each against its role.
 *
 * Both are NULL-terminated. */
#ifndef DISKIMG_REGISTRY_H
#define DISKIMG_REGISTRY_H

#include "formats/bd.h"

extern const struct bd_driver *const bd_drivers[];
extern const struct bd_driver *const bd_writers[];

#endif
