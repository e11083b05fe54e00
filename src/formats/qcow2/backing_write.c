/* qcow2: change the backing file name and format in the header (rebase,
 * in place).  The first cluster is rebuilt: the header with the new name's
 * offset and length, the header extensions as they were except the
 * backing format (dropped, and the new one put first, as qemu does), the
 * end marker, then the name; and
 * written in one write from offset 0, then synced.  Nothing else changes.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "formats/qcow2/read_int.h"
#include "io/bfile.h"
#include "util/diag.h"
#include "util/endian.h"

#define FAIL(q, err, ...) diag_fail((q)->bd.diag, err, (q)->bd.filename, -1, __VA_ARGS__)

static size_t pad8(size_t n)
{
    return (n + 7) & ~(size_t)7;
}

int qcow2_set_backing(struct bd *bd, const char *name, const char *fmt)
{
    struct qcow2 *q = to_qcow2(bd);
    const struct qcow2_header *h = &q->h;
    size_t cs = h->cluster_size, nl = name ? strlen(name) : 0, fl = fmt ? strlen(fmt) : 0;
    int r;

    if (!bd->file->writable || bd->file->kind == BFILE_STREAM)
        return FAIL(q, -EROFS, "the image is not open for writing");
    if (q->snapshot >= 0)
        return FAIL(q, -EINVAL, "a snapshot is open, not the image");
    if (nl > QCOW2_MAX_BACKING_NAME)
        return FAIL(q, -ENAMETOOLONG, "the backing file name is longer than %d bytes",
                    QCOW2_MAX_BACKING_NAME);
    if (!nl)
        fl = 0;
    if (fl > QCOW2_MAX_BACKING_FMT)
        return FAIL(q, -EINVAL, "the backing format name is longer than %d bytes",
                    QCOW2_MAX_BACKING_FMT);
    size_t have = q->file_size < cs ? (size_t)q->file_size : cs;
    uint8_t *old = calloc(1, cs), *nw = calloc(1, cs);
    if (!old || !nw) {
        r = FAIL(q, -ENOMEM, "out of memory");
        goto out;
    }
    if ((r = bfile_pread(bd->file, old, have, 0)) < 0)
        goto out;
    size_t hl = h->version >= 3 ? h->header_length : QH_V2_LENGTH, pos = hl;
    memcpy(nw, old, hl);
    /* the format first, as qemu writes it */
    if (fl) {
        if (pos + 8 + pad8(fl) > cs) {
            r = FAIL(q, -ENOSPC, "the header has no room for the backing format");
            goto out;
        }
        be32_put(nw + pos, QCOW2_EXT_BACKING_FMT);
        be32_put(nw + pos + 4, (uint32_t)fl);
        memcpy(nw + pos + 8, fmt, fl);
        pos += 8 + pad8(fl);
    }
    /* the extensions (validated by the header decode), all but the format */
    size_t p = hl, used = hl;
    while (p + 8 <= have) {
        uint32_t type = be32_get(old + p), len = be32_get(old + p + 4);
        if (type == QCOW2_EXT_END)
            break;
        size_t n = 8 + pad8(len);
        if (n > have - p) {
            r = FAIL(q, -EINVAL, "header extension at offset %zu runs past the first "
                     "cluster", p);
            goto out;
        }
        if (type != QCOW2_EXT_BACKING_FMT) {
            if (pos + n > cs) {
                r = FAIL(q, -ENOSPC, "the header extensions do not fit the first cluster");
                goto out;
            }
            memcpy(nw + pos, old + p, n);
            pos += n;
        }
        p += n;
    }
    used = p + 8;
    if (h->has_backing_file && h->backing_file_offset + h->backing_file_size > used)
        used = h->backing_file_offset + h->backing_file_size;
    pos += 8;   /* the end marker: zeros */
    if (pos + nl > cs) {
        r = FAIL(q, -ENOSPC, "the backing file name does not fit in the first cluster "
                 "(%zu bytes) with the header and its extensions", cs);
        goto out;
    }
    if (nl)
        memcpy(nw + pos, name, nl);
    be64_put(nw + QH_BACKING_FILE_OFFSET, nl ? pos : 0);
    be32_put(nw + QH_BACKING_FILE_SIZE, (uint32_t)nl);
    pos += nl;
    /* the old bytes past the new end are cleared in the same write */
    size_t len = pos > used ? pos : used;
    if (len > have)
        len = pos;
    if ((r = bfile_pwrite(bd->file, nw, len, 0)) < 0 || (r = bfile_sync(bd->file)) < 0)
        goto out;
out:
    free(old);
    free(nw);
    return r;
}
