/* raw: copy offload.  The image is the file, so guest offset = file offset;
 * regular files only (a device or a stream takes its bytes by pwrite). */
#include <errno.h>

#include "formats/raw/raw_int.h"
#include "io/bfile.h"
#include "util/diag.h"

int raw_map_for_offload(struct bd *bd, uint64_t off, uint64_t len, uint32_t align,
                        struct bfile **f, uint64_t *host, uint64_t *mapped)
{
    (void)align;   /* host == off */
    if (bd->file->kind != BFILE_REGULAR || bd->file->fd < 0)
        return -ENOTSUP;
    if (len == 0 || off >= bd->size || len > bd->size - off)
        return diag_fail(bd->diag, -EINVAL, bd->filename, (int64_t)off,
                         "internal error: offload of %llu bytes past the end of the image",
                         (unsigned long long)len);
    *f = bd->file;
    *host = off;
    *mapped = len;
    return 0;
}
