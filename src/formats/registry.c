#include "formats/registry.h"

#include "formats/qcow2/qcow2.h"
#include "formats/ova/ova.h"
#include "formats/vmdk/vmdk.h"

const struct bd_driver *const bd_drivers[] = {
    &bd_qcow2,
    &bd_vmdk,
    &bd_ova,
    &bd_raw,
    NULL,
};
