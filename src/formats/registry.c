#include "formats/registry.h"

#include "formats/ova/ova.h"
#include "formats/qcow2/qcow2.h"
#include "formats/qcow2/write.h"
#include "formats/vdi/vdi.h"
#include "formats/vhd/vhd.h"
#include "formats/vhdx/vhdx.h"
#include "formats/vhdx/write.h"
#include "formats/vmdk/vmdk.h"
#include "formats/vmdk/write.h"

const struct bd_driver *const bd_drivers[] = {
    &bd_qcow2,
    &bd_vmdk,
    &bd_vhd,
    &bd_vhdx,
    &bd_vdi,
    &bd_ova,
    &bd_raw,
    NULL,
};

const struct bd_driver *const bd_writers[] = {
    &bd_raw,            /* raw reads and writes through one table */
    &bd_qcow2_out,
    &bd_qcow2_stream,
    &bd_qcow2_inplace,
    &bd_vmdkw_sparse,
    &bd_vmdkw_multi,
    &bd_vmdkw_stream,
    &bd_vhdw_dynamic,
    &bd_vhdw_fixed,
    &bd_vhdxw_dynamic,
    &bd_vhdxw_fixed,
    &bd_vdiw,
    &bd_vhd_inplace,
    &bd_vdi_inplace,
    NULL,
};
