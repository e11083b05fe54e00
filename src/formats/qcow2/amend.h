/* qcow2 amend (amend.c): bd_driver.amend.  Internal. */
#ifndef DISKIMG_QCOW2_AMEND_H
#define DISKIMG_QCOW2_AMEND_H

#include <stdbool.h>
#include <stdint.h>

#include "formats/qcow2/read_int.h"

int qcow2_amend(struct bd *bd, const struct bd_amend *a, bool *resize_first);

/* resize.c: whether qcow2_resize would refuse `size` (nothing written),
 * for the image as it will be at qcow2 `version` (amend upgrades first). */
int qcow2_resize_check(struct qcow2 *q, uint64_t size, uint32_t version);

#endif
