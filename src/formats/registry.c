#include "formats/registry.h"

const struct bd_driver *const bd_drivers[] = {
    &bd_raw,
    NULL,
};
