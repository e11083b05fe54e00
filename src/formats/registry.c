#include "formats/registry.h"
#include "formats/qcow2_write.h"

const struct bd_driver *const bd_drivers[] = {
    &bd_raw,
    &bd_qcow2_out,  /* TEMPORARY until the qcow2 reader lands: bd_qcow2 gets .create */
    NULL,
};
