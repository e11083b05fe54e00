/* The markers of a streamOptimized extent, walked front to back: shared by
 * the pipe reader (read_stream.c) and the scan of a seekable file without a
 * usable grain directory (read_scan.c).
 *
 * Layout walked: from the header's overhead on, each object starts on a
 * sector: a grain (u64 LBA, u32 size > 0, zlib data), or a metadata marker
 * (u64 sectors that follow, u32 0, u32 type) whose payload is skipped; an
 * EOS marker or the end of the file ends the walk, and both uses judge that
 * end by one rule (walk_end): a stream cut short is an error.
 */
#include <errno.h>

#include "formats/vmdk/read_int.h"
#include "io/bfile.h"
#include "util/diag.h"

static struct diag *D(struct vmdk *v)
{
    return v->bd.diag;
}

/* Where the walk starts: after the header, the embedded descriptor and the
 * metadata the header counts as overhead. */
uint64_t vmdk_walk_start(const struct vmdk_extent *x)
{
    uint64_t s = x->hdr.overhead;
    if (x->hdr.desc_offset && x->hdr.desc_offset + x->hdr.desc_sectors > s)
        s = x->hdr.desc_offset + x->hdr.desc_sectors;
    if (s < 1)
        s = 1;
    return s * VMDK_SECTOR;
}

uint64_t vmdk_total_grains(const struct vmdk_extent *x)
{
    return x->len / x->grain_bytes + (x->len % x->grain_bytes != 0);
}

/* The one rule for the end of a walk over the markers, shared by the pipe
 * reader and the scan of a file: a stream is whole when it ends with its
 * end-of-stream marker, and when the header says the grain directory is at
 * the end, with the footer before it.  Without the marker it is whole only
 * if a grain directory read before the grains (qemu-img writes no marker)
 * lists no grain at or after the point where the data ended.  Anything else
 * was cut short (a network that dropped, a partial copy): an error at the
 * offset where the data ends, never zeros in place of the lost grains.
 * `at` is that offset (eos: where the end-of-stream marker is). */
static int walk_end(struct vmdk *v, const struct vmdk_extent *x, const struct vmdk_walk *w,
                    uint64_t at, bool eos)
{
    if (eos) {
        if (x->hdr.gd_offset == VMDK4_GD_AT_END && !w->footer)
            return diag_fail(D(v), -EINVAL, x->name, (int64_t)at,
                             "stream ends (end-of-stream marker at offset %llu) without the "
                             "footer its header announces (grain directory at the end)",
                             (unsigned long long)at);
        return 0;
    }
    if (x->dir_known && (!x->dir_grains || x->dir_last < at))
        return 0;
    if (x->dir_known)
        return diag_fail(D(v), -EIO, x->name, (int64_t)at,
                         "stream is truncated: it ends at offset %llu, before the grain at "
                         "offset %llu that its grain directory lists", (unsigned long long)at,
                         (unsigned long long)x->dir_last);
    return diag_fail(D(v), -EIO, x->name, (int64_t)at,
                     "stream is truncated: it ends at offset %llu without an end-of-stream "
                     "marker", (unsigned long long)at);
}

/* The object at w->pos.  For a grain, its compressed bytes go to cbuf
 * (vmdk_cbuf_bytes) and *grain is set; w->pos moves past it.  Returns 1 for
 * a grain, 0 at the end (after walk_end() accepted it), or an error. */
int vmdk_walk_next(struct vmdk *v, struct vmdk_extent *x, struct vmdk_walk *w,
                   uint8_t *cbuf, uint64_t *grain, uint32_t *csize, uint64_t *gpos)
{
    uint32_t maxc = vmdk_max_csize(x->grain_bytes);

    for (;;) {
        size_t got;
        uint64_t at = w->pos;
        int r = bfile_pread_upto(x->file, cbuf, VMDK_SECTOR, at, &got);
        if (r < 0)
            return r;
        if (got == 0)
            return walk_end(v, x, w, at, false);
        if (got < 16)
            return diag_fail(D(v), -EIO, x->name, (int64_t)at,
                             "file ends inside a marker (%zu bytes left)", got);
        struct vmdk_marker m;
        r = vmdk_marker_decode(cbuf, got, maxc, &m, D(v), x->name, (int64_t)at);
        if (r < 0)
            return r;
        if (!m.is_grain) {
            if (m.type == VMDK_MARKER_EOS)
                return walk_end(v, x, w, at, true);
            if (m.type == VMDK_MARKER_FOOTER)
                w->footer = true;
            /* GT, GD, footer, progress: skip the marker and its payload
             * (value <= VMDK_MAX_SECTORS: no wrap) */
            w->pos = at + VMDK_SECTOR + m.value * VMDK_SECTOR;
            continue;
        }
        if (m.value % x->hdr.grain_sectors)
            return diag_fail(D(v), -EINVAL, x->name, (int64_t)at,
                             "grain marker has LBA %llu, not a multiple of the grain size "
                             "(%u sectors)", (unsigned long long)m.value, x->hdr.grain_sectors);
        uint64_t g = m.value / x->hdr.grain_sectors;
        if (g >= vmdk_total_grains(x))
            return diag_fail(D(v), -EINVAL, x->name, (int64_t)at,
                             "grain marker has LBA %llu, beyond the capacity (%llu sectors)",
                             (unsigned long long)m.value,
                             (unsigned long long)(x->len / VMDK_SECTOR));
        /* with a directory read before the grains, its last grain is the
         * stream's last (the rule for its end counts on it) */
        if (x->dir_known && (!x->dir_grains || at > x->dir_last))
            return diag_fail(D(v), -EINVAL, x->name, (int64_t)at,
                             "grain for LBA %llu at offset %llu is not in the grain directory "
                             "(%s)", (unsigned long long)m.value, (unsigned long long)at,
                             x->dir_grains ? "it lists grains up to an earlier offset"
                                           : "it lists no grains");
        size_t total = VMDK_GRAIN_HDR + (size_t)m.size;
        if (total > got) {
            size_t more;
            r = bfile_pread_upto(x->file, cbuf + got, total - got, at + got, &more);
            if (r < 0)
                return r;
            if (more < total - got)
                return diag_fail(D(v), -EIO, x->name, (int64_t)at,
                                 "compressed grain of %u bytes for LBA %llu is cut off by "
                                 "the end of the file", m.size, (unsigned long long)m.value);
        }
        *grain = g;
        *csize = m.size;
        *gpos = at;
        w->pos = at + (total + VMDK_SECTOR - 1) / VMDK_SECTOR * VMDK_SECTOR;
        return 1;
    }
}
