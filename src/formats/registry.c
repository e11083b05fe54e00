#include "formats/registry.h"

#include "formats/qcow2.h"

const struct bd_driver *const bd_drivers[] = {
    &bd_qcow2,
    &bd_raw,
    NULL,
};
