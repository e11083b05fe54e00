/* VHD writer: the -o options (params.c) and the two writers (write.c):
 *
 * dynamic (default), laid out as qemu-img does:
 *   0      footer copy               (written last: the probe's signature)
 *   512    dynamic header (1024)
 *   1536   BAT, padded to a sector
 *   ...    blocks of 2 MiB, each a 512-byte bitmap (every bit set) and the
 *          data, appended in the order they are written
 *   end    footer
 * Ranges that read as zeros are never allocated.
 *
 * fixed: the disk, then the footer; zero runs stay holes.  With
 * force_size=on the size is exactly the one asked (Azure's rule), else it
 * is rounded up to whole CHS geometry as qemu-img does; azure=on is
 * fixed + force_size and refuses a size that is not a whole MiB.
 */
#ifndef DISKIMG_VHD_WRITE_H
#define DISKIMG_VHD_WRITE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "formats/bd.h"
#include "formats/vhd/format.h"

struct kvopts;

struct vhdw_params {
    uint64_t asked;             /* size given */
    uint64_t size;              /* virtual size written (geometry-rounded) */
    uint16_t cyls;
    uint8_t heads, secs;
    bool fixed, force_size, azure;
    uint32_t block_size;
};

/* Take the vpc keys of `kv` (may be NULL).  0, or -EINVAL/-EFBIG with a
 * reason in err. */
int vhdw_parse_params(struct kvopts *kv, uint64_t size, struct vhdw_params *p, char *err,
                      size_t errlen);

/* The footer of a new image (creator "qemu", or "qem2" with force_size,
 * as qemu-img writes them, so that qemu-img reads the same size). */
void vhdw_footer(const struct vhdw_params *p, uint8_t uuid[16], struct vhd_footer *f);

extern const struct bd_driver bd_vhdw_dynamic;
extern const struct bd_driver bd_vhdw_fixed;

#endif
