/* Reading a streamOptimized extent by walking its markers front to back.
 *
 * Two uses:
 *  - stream input (a pipe): the grain directory may be only in the footer,
 *    so the grains are found in file order.  block_status(off) reads ahead
 *    to the next grain marker and keeps that one grain (compressed, then
 *    inflated) for the pread that follows.  Grains must come in ascending
 *    LBA order; memory is one grain plus its compressed bytes.
 *  - a seekable file without a usable grain directory (GD at the end and no
 *    valid footer): the markers are scanned once to list the grains.
 *
 * Layout walked: from the header's overhead on, each object starts on a
 * sector: a grain (u64 LBA, u32 size > 0, zlib data), or a metadata marker
 * (u64 sectors that follow, u32 0, u32 type) whose payload is skipped; an
 * EOS marker or the end of the file ends the walk.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "formats/vmdk_int.h"
#include "io/bfile.h"
#include "util/diag.h"

bool vmdk_file_is_stream(const struct bfile *f)
{
    while (f->kind == BFILE_SLICE)
        f = f->base;
    return f->kind == BFILE_STREAM;
}

static struct diag *D(struct vmdk *v)
{
    return v->bd.diag;
}

/* Where the walk starts: after the header, the embedded descriptor and the
 * metadata the header counts as overhead. */
static uint64_t walk_start(const struct vmdk_extent *x)
{
    uint64_t s = x->hdr.overhead;
    if (x->hdr.desc_offset && x->hdr.desc_offset + x->hdr.desc_sectors > s)
        s = x->hdr.desc_offset + x->hdr.desc_sectors;
    if (s < 1)
        s = 1;
    return s * VMDK_SECTOR;
}

static uint64_t total_grains(const struct vmdk_extent *x)
{
    return x->len / x->grain_bytes + (x->len % x->grain_bytes != 0);
}

/* The object at *pos.  For a grain, its compressed bytes go to cbuf (room
 * for VMDK_GRAIN_HDR + max csize) and *grain is set; *pos moves past it.
 * Returns 1 for a grain, 0 at the end (EOS or end of file). */
static int walk_next(struct vmdk *v, struct vmdk_extent *x, uint64_t *pos, uint8_t *cbuf,
                     uint64_t *grain, uint32_t *csize, uint64_t *gpos)
{
    uint32_t maxc = vmdk_max_csize(x->grain_bytes);

    for (;;) {
        size_t got;
        uint64_t at = *pos;
        int r = bfile_pread_upto(x->file, cbuf, VMDK_SECTOR, at, &got);
        if (r < 0)
            return r;
        if (got == 0)
            return 0;   /* end of file without an EOS marker (qemu writes none) */
        if (got < 16)
            return diag_fail(D(v), -EIO, x->name, (int64_t)at,
                             "file ends inside a marker (%zu bytes left)", got);
        struct vmdk_marker m;
        r = vmdk_marker_decode(cbuf, got, maxc, &m, D(v), x->name, (int64_t)at);
        if (r < 0)
            return r;
        if (!m.is_grain) {
            if (m.type == VMDK_MARKER_EOS)
                return 0;
            /* GT, GD, footer, progress: skip the marker and its payload */
            *pos = at + VMDK_SECTOR + m.value * VMDK_SECTOR;
            continue;
        }
        if (m.value % x->hdr.grain_sectors)
            return diag_fail(D(v), -EINVAL, x->name, (int64_t)at,
                             "grain marker has LBA %llu, not a multiple of the grain size "
                             "(%u sectors)", (unsigned long long)m.value, x->hdr.grain_sectors);
        uint64_t g = m.value / x->hdr.grain_sectors;
        if (g >= total_grains(x))
            return diag_fail(D(v), -EINVAL, x->name, (int64_t)at,
                             "grain marker has LBA %llu, beyond the capacity (%llu sectors)",
                             (unsigned long long)m.value,
                             (unsigned long long)(x->len / VMDK_SECTOR));
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
        *pos = at + (total + VMDK_SECTOR - 1) / VMDK_SECTOR * VMDK_SECTOR;
        return 1;
    }
}

/* --- random-access fallback -------------------------------------------------- */

static int loc_cmp(const void *a, const void *b)
{
    uint64_t ga = ((const struct vmdk_grain_loc *)a)->grain;
    uint64_t gb = ((const struct vmdk_grain_loc *)b)->grain;
    return ga < gb ? -1 : ga > gb;
}

int vmdk_scan_grains(struct vmdk *v, struct vmdk_extent *x)
{
    uint64_t pos = walk_start(x), g, at;
    uint64_t limit = total_grains(x);
    uint32_t csize;
    size_t cap = 0;
    uint8_t *cbuf = malloc(VMDK_GRAIN_HDR + vmdk_max_csize(x->grain_bytes));
    int r;

    if (!cbuf)
        return diag_fail(D(v), -ENOMEM, x->name, -1, "out of memory");
    while ((r = walk_next(v, x, &pos, cbuf, &g, &csize, &at)) > 0) {
        if (x->n_scan >= VMDK_MAX_SCAN_GRAINS) {
            r = diag_fail(D(v), -EINVAL, x->name, (int64_t)at,
                          "more than %u grains to index without a grain directory",
                          VMDK_MAX_SCAN_GRAINS);
            break;
        }
        if (x->n_scan >= limit) {
            r = diag_fail(D(v), -EINVAL, x->name, (int64_t)at,
                          "more grain markers than the disk has grains (%llu)",
                          (unsigned long long)limit);
            break;
        }
        if (x->n_scan == cap) {
            size_t ncap = cap ? cap * 2 : 1024;
            if ((r = vmdk_table_budget(v, x, (ncap - cap) * sizeof(*x->scan))) < 0)
                break;
            struct vmdk_grain_loc *n = realloc(x->scan, ncap * sizeof(*n));
            if (!n) {
                r = diag_fail(D(v), -ENOMEM, x->name, -1, "out of memory");
                break;
            }
            x->scan = n;
            cap = ncap;
        }
        x->scan[x->n_scan].grain = g;
        x->scan[x->n_scan].file_off = at;
        x->n_scan++;
    }
    free(cbuf);
    if (r < 0)
        return r;
    if (!x->scan && !(x->scan = malloc(sizeof(*x->scan))))
        return diag_fail(D(v), -ENOMEM, x->name, -1, "out of memory");
    qsort(x->scan, x->n_scan, sizeof(*x->scan), loc_cmp);
    for (size_t i = 1; i < x->n_scan; i++)
        if (x->scan[i].grain == x->scan[i - 1].grain)
            return diag_fail(D(v), -EINVAL, x->name, (int64_t)x->scan[i].file_off,
                             "two grains for LBA %llu",
                             (unsigned long long)(x->scan[i].grain * x->hdr.grain_sectors));
    return 0;
}

/* --- stream input -------------------------------------------------------------- */

int vmdk_stream_open(struct vmdk *v, struct vmdk_extent *x)
{
    struct vmdk_stream *st = &v->st;

    if (!x->compressed || !x->markers)
        return diag_fail(D(v), -ESPIPE, x->name, -1,
                         "this %s VMDK needs a seekable input (its grains are found through "
                         "the grain tables); only streamOptimized VMDKs can be read from a "
                         "pipe", x->compressed ? "compressed" : "sparse");
    st->pos = walk_start(x);
    st->cdata = malloc(VMDK_GRAIN_HDR + vmdk_max_csize(x->grain_bytes));
    st->data = malloc(x->grain_bytes);
    if (!st->cdata || !st->data)
        return diag_fail(D(v), -ENOMEM, x->name, -1, "out of memory");
    return 0;
}

void vmdk_stream_free(struct vmdk *v)
{
    free(v->st.cdata);
    free(v->st.data);
    v->st.cdata = v->st.data = NULL;
}

/* Make the held grain the first one that ends after guest offset `off`. */
static int advance(struct vmdk *v, struct vmdk_extent *x, uint64_t off)
{
    struct vmdk_stream *st = &v->st;

    if (off < st->released)
        return diag_fail(D(v), -ESPIPE, x->name, (int64_t)off,
                         "stream input must be read in ascending order (asked for guest "
                         "offset %llu after %llu)", (unsigned long long)off,
                         (unsigned long long)st->released);
    while (!st->eos && (!st->have || (st->grain + 1) * x->grain_bytes <= off)) {
        uint64_t g;
        uint32_t csize;
        uint64_t at;
        if (st->have) {
            st->released = (st->grain + 1) * x->grain_bytes;
            st->have = false;
        }
        int r = walk_next(v, x, &st->pos, st->cdata, &g, &csize, &at);
        if (r < 0)
            return r;
        if (r == 0) {
            st->eos = true;
            break;
        }
        if (g * x->grain_bytes < st->released)
            return diag_fail(D(v), -ESPIPE, x->name, (int64_t)at,
                             "grain for LBA %llu comes after grains up to LBA %llu: grains "
                             "out of order cannot be read from a pipe (use a seekable file)",
                             (unsigned long long)(g * x->hdr.grain_sectors),
                             (unsigned long long)(st->released / VMDK_SECTOR));
        st->have = true;
        st->inflated = false;
        st->grain = g;
        st->csize = csize;
    }
    return 0;
}

int vmdk_stream_block_status(struct vmdk *v, uint64_t off, uint64_t len,
                             struct bd_extent *e)
{
    struct vmdk_extent *x = &v->ext[0];
    struct vmdk_stream *st = &v->st;
    uint64_t end = off + len;
    int r;

    pthread_mutex_lock(&v->lock);
    r = advance(v, x, off);
    if (r == 0) {
        uint64_t gs = st->have ? st->grain * x->grain_bytes : x->len;
        if (st->have && gs <= off) {
            uint64_t ge = gs + x->grain_bytes;
            e->flags = BD_ALLOCATED | BD_DATA | BD_COMPRESSED;
            e->len = (ge < end ? ge : end) - off;
        } else {
            e->flags = 0;   /* no grain: zeros (a stream has no parent) */
            e->len = (gs < end ? gs : end) - off;
        }
    }
    pthread_mutex_unlock(&v->lock);
    return r;
}

int vmdk_stream_pread(struct vmdk *v, uint8_t *buf, size_t len, uint64_t off)
{
    struct vmdk_extent *x = &v->ext[0];
    struct vmdk_stream *st = &v->st;
    size_t done = 0;
    int r = 0;

    pthread_mutex_lock(&v->lock);
    while (done < len) {
        uint64_t p = off + done;
        r = advance(v, x, p);
        if (r < 0)
            break;
        uint64_t gs = st->have ? st->grain * x->grain_bytes : x->len;
        size_t n;
        if (st->have && gs <= p) {
            if (!st->inflated) {
                r = vmdk_inflate_grain(x, st->cdata + VMDK_GRAIN_HDR, st->csize, st->data,
                                       D(v), -1);
                if (r < 0)
                    break;
                st->inflated = true;
            }
            uint64_t within = p - gs;
            n = x->grain_bytes - within;
            if (n > len - done)
                n = len - done;
            memcpy(buf + done, st->data + within, n);
        } else {
            uint64_t gap = gs - p;
            n = gap < len - done ? (size_t)gap : len - done;
            if (n == 0) {   /* past the capacity: the caller checks bounds */
                r = diag_fail(D(v), -EINVAL, x->name, (int64_t)p, "read past the end of the disk");
                break;
            }
            memset(buf + done, 0, n);
        }
        done += n;
    }
    pthread_mutex_unlock(&v->lock);
    return r;
}
