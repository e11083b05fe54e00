#include "formats/registry.h"
#include "formats/vmdk.h"

const struct bd_driver *const bd_drivers[] = {
    &bd_vmdk,
    &bd_ova,
    &bd_raw,
    NULL,
};
