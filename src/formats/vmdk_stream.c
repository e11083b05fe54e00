/* Reading a streamOptimized extent by walking its markers front to back.
 *
 * Two uses:
 *  - stream input (a pipe): the grain directory may be only in the footer,
 *    so the grains are found in file order.  block_status(off) reads ahead
 *    to the next grain marker and keeps that one grain (compressed, then
 *    inflated) for the pread that follows.  Grains must come in ascending
 *    LBA order; memory is one grain plus its compressed bytes.
 *  - a seekable file without a usable grain directory (GD at the end and no
 *    valid footer at the end of the file): the markers are scanned once to
 *    list the grains.
 *
 * Layout walked: from the header's overhead on, each object starts on a
 * sector: a grain (u64 LBA, u32 size > 0, zlib data), or a metadata marker
 * (u64 sectors that follow, u32 0, u32 type) whose payload is skipped; an
 * EOS marker or the end of the file ends the walk, and both uses judge that
 * end by one rule (walk_end): a stream cut short is an error.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "formats/vmdk_int.h"
#include "io/bfile.h"
#include "util/diag.h"
#include "util/endian.h"

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

static int u64_cmp(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
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
static int walk_next(struct vmdk *v, struct vmdk_extent *x, struct vmdk_walk *w,
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
        if (g >= total_grains(x))
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

/* A stream whose header names a grain directory that lies, with its grain
 * tables, before the grains (qemu-img's and VMware's layout): read it on
 * the way (forward, the tables in file order) and note the offset of the
 * last grain it lists, so that the end of the stream can be told from a
 * cut (walk_end).  Where the directory cannot be read forward before the
 * grains, the end-of-stream marker alone decides. */
#define DIR_PIECE (64u << 10)

static int stream_directory(struct vmdk *v, struct vmdk_extent *x)
{
    const struct vmdk4_header *h = &x->hdr;
    uint64_t start = walk_start(x);
    uint64_t cursor = h->desc_offset ? (h->desc_offset + h->desc_sectors) * VMDK_SECTOR
                                     : VMDK_SECTOR;
    uint64_t gd_off, gd_bytes = (uint64_t)h->gd_entries * 4, gt_bytes = (uint64_t)x->gtes * 4;
    uint64_t ngrains = total_grains(x);
    uint8_t *raw = NULL, *gt = NULL;
    uint64_t *order = NULL;
    uint32_t n = 0;
    int r = 0;

    if (h->gd_offset == VMDK4_GD_AT_END)
        return 0;
    gd_off = h->gd_offset * VMDK_SECTOR;    /* <= 2^41 sectors: no wrap */
    if (gd_off < cursor || gd_off > start || gd_bytes > start - gd_off)
        return 0;
    /* read in pieces, keeping the tables it names: memory follows what
     * the pipe delivers, not what the header claims */
    raw = malloc(DIR_PIECE);
    gt = malloc(gt_bytes);
    if (!raw || !gt) {
        r = diag_fail(D(v), -ENOMEM, x->name, -1, "out of memory");
        goto out;
    }
    /* (table sector << 32 | directory index), sorted: file order */
    uint32_t cap = 0;
    for (uint64_t done = 0; done < gd_bytes; done += DIR_PIECE) {
        size_t piece = gd_bytes - done < DIR_PIECE ? (size_t)(gd_bytes - done) : DIR_PIECE;
        if ((r = bfile_pread(x->file, raw, piece, gd_off + done)) < 0)
            goto out;
        for (size_t j = 0; j < piece; j += 4) {
            uint32_t e = le32_get(raw + j), i = (uint32_t)((done + j) / 4);
            if (!e || (uint64_t)i * x->gtes >= ngrains)
                continue;
            if (n == cap) {
                uint32_t ncap = cap ? 2 * cap : 1024;
                uint64_t *no = realloc(order, ncap * sizeof(*order));
                if (!no) {
                    r = diag_fail(D(v), -ENOMEM, x->name, -1, "out of memory");
                    goto out;
                }
                order = no;
                cap = ncap;
            }
            order[n++] = (uint64_t)e << 32 | i;
        }
    }
    cursor = gd_off + gd_bytes;
    if (n)
        qsort(order, n, sizeof(*order), u64_cmp);
    for (uint32_t k = 0; k < n; k++) {
        uint64_t off = (order[k] >> 32) * VMDK_SECTOR;
        if (off < cursor || off > start || gt_bytes > start - off)
            goto out;   /* not laid out for reading forward: the marker decides */
        cursor = off + gt_bytes;
    }
    x->dir_grains = false;
    x->dir_last = 0;
    for (uint32_t k = 0; k < n; k++) {
        uint64_t off = (order[k] >> 32) * VMDK_SECTOR;
        uint64_t first = (order[k] & UINT32_MAX) * x->gtes;
        if ((r = bfile_pread(x->file, gt, gt_bytes, off)) < 0)
            goto out;
        for (uint32_t i = 0; i < x->gtes && first + i < ngrains; i++) {
            uint32_t e = le32_get(gt + 4 * (size_t)i);
            if (e == 0 || (e == 1 && x->zero_grain))
                continue;
            if ((uint64_t)e * VMDK_SECTOR > x->dir_last || !x->dir_grains)
                x->dir_last = (uint64_t)e * VMDK_SECTOR;
            x->dir_grains = true;
        }
    }
    x->dir_known = true;
out:
    free(raw);
    free(order);
    free(gt);
    return r;
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
    struct vmdk_walk w = { .pos = walk_start(x) };
    uint64_t g, at, limit = total_grains(x);
    uint32_t csize;
    size_t cap = 0;
    uint8_t *cbuf = malloc(vmdk_cbuf_bytes(x->grain_bytes));
    int r;

    if (!cbuf)
        return diag_fail(D(v), -ENOMEM, x->name, -1, "out of memory");
    while ((r = walk_next(v, x, &w, cbuf, &g, &csize, &at)) > 0) {
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

/* A grain buffer: a spare one, or a new one (at most queue + 2 exist). */
static uint8_t *take_buffer(struct vmdk *v, uint32_t bytes)
{
    struct vmdk_stream *st = &v->st;
    uint8_t *b = NULL;

    pthread_mutex_lock(&v->lock);
    if (st->n_spare)
        b = st->spare[--st->n_spare];
    pthread_mutex_unlock(&v->lock);
    return b ? b : malloc(bytes);
}

/* with vmdk.lock held */
static void give_buffer(struct vmdk *v, uint8_t *b)
{
    struct vmdk_stream *st = &v->st;

    if (b && st->n_spare < sizeof(st->spare) / sizeof(st->spare[0]))
        st->spare[st->n_spare++] = b;
    else
        free(b);
}

/* The reader thread: walk the markers, inflate each grain, queue it. */
static void *reader(void *arg)
{
    struct vmdk *v = arg;
    struct vmdk_extent *x = &v->ext[0];
    struct vmdk_stream *st = &v->st;
    int r;

    for (;;) {
        pthread_mutex_lock(&v->lock);
        while (st->count == VMDK_STREAM_QUEUE && !st->stop)
            pthread_cond_wait(&st->cv_put, &v->lock);
        bool stop = st->stop;
        pthread_mutex_unlock(&v->lock);
        if (stop) {
            r = 0;
            break;
        }
        uint64_t g, at;
        uint32_t csize;
        r = walk_next(v, x, &st->walk, st->cdata, &g, &csize, &at);
        if (r <= 0)
            break;
        if (g < st->next_min) {
            r = diag_fail(D(v), -ESPIPE, x->name, (int64_t)at,
                          "grain for LBA %llu comes after grains up to LBA %llu: grains "
                          "out of order cannot be read from a pipe (use a seekable file)",
                          (unsigned long long)(g * x->hdr.grain_sectors),
                          (unsigned long long)(st->next_min * x->hdr.grain_sectors));
            break;
        }
        st->next_min = g + 1;
        uint8_t *data = take_buffer(v, x->grain_bytes);
        if (!data) {
            r = diag_fail(D(v), -ENOMEM, x->name, -1, "out of memory");
            break;
        }
        r = vmdk_inflate_grain(x, st->cdata + VMDK_GRAIN_HDR, csize, data, D(v), (int64_t)at);
        pthread_mutex_lock(&v->lock);
        if (r < 0) {
            give_buffer(v, data);
            pthread_mutex_unlock(&v->lock);
            break;
        }
        st->queue[(st->head + st->count) % VMDK_STREAM_QUEUE] =
            (struct vmdk_sgrain){ .grain = g, .data = data };
        st->count++;
        pthread_cond_signal(&st->cv_get);
        pthread_mutex_unlock(&v->lock);
    }
    pthread_mutex_lock(&v->lock);
    st->done = true;
    st->err = r < 0 ? r : 0;
    pthread_cond_signal(&st->cv_get);
    pthread_mutex_unlock(&v->lock);
    return NULL;
}

int vmdk_stream_open(struct vmdk *v, struct vmdk_extent *x)
{
    struct vmdk_stream *st = &v->st;

    if (!x->compressed || !x->markers)
        return diag_fail(D(v), -ESPIPE, x->name, -1,
                         "this %s VMDK needs a seekable input (its grains are found through "
                         "the grain tables); only streamOptimized VMDKs can be read from a "
                         "pipe", x->compressed ? "compressed" : "sparse");
    st->walk.pos = walk_start(x);
    int r = stream_directory(v, x);
    if (r < 0)
        return r;
    st->cdata = malloc(vmdk_cbuf_bytes(x->grain_bytes));
    if (!st->cdata)
        return diag_fail(D(v), -ENOMEM, x->name, -1, "out of memory");
    pthread_cond_init(&st->cv_put, NULL);
    pthread_cond_init(&st->cv_get, NULL);
    return 0;
}

void vmdk_stream_free(struct vmdk *v)
{
    struct vmdk_stream *st = &v->st;

    if (!st->cdata)
        return;
    if (st->started) {
        pthread_mutex_lock(&v->lock);
        st->stop = true;
        pthread_cond_signal(&st->cv_put);
        pthread_mutex_unlock(&v->lock);
        pthread_join(st->thread, NULL);
    }
    for (size_t i = 0; i < st->count; i++)
        free(st->queue[(st->head + i) % VMDK_STREAM_QUEUE].data);
    for (size_t i = 0; i < st->n_spare; i++)
        free(st->spare[i]);
    if (st->have)
        free(st->cur.data);
    free(st->cdata);
    st->cdata = NULL;
    pthread_cond_destroy(&st->cv_put);
    pthread_cond_destroy(&st->cv_get);
}

/* Make `cur` the first grain that ends after guest offset `off` (or set eos).
 * Called with vmdk.lock held. */
static int advance(struct vmdk *v, struct vmdk_extent *x, uint64_t off)
{
    struct vmdk_stream *st = &v->st;

    if (off < st->released)
        return diag_fail(D(v), -ESPIPE, x->name, (int64_t)off,
                         "stream input must be read in ascending order (asked for guest "
                         "offset %llu after %llu)", (unsigned long long)off,
                         (unsigned long long)st->released);
    if (!st->started) {
        int e = pthread_create(&st->thread, NULL, reader, v);
        if (e)
            return diag_errno(D(v), -e, x->name, -1, "cannot start the stream reader");
        st->started = true;
    }
    while (!st->eos && (!st->have || (st->cur.grain + 1) * x->grain_bytes <= off)) {
        if (st->have) {
            st->released = (st->cur.grain + 1) * x->grain_bytes;
            give_buffer(v, st->cur.data);
            st->have = false;
        }
        while (st->count == 0 && !st->done)
            pthread_cond_wait(&st->cv_get, &v->lock);
        if (st->count == 0) {
            if (st->err < 0)
                return st->err;
            st->eos = true;
            break;
        }
        st->cur = st->queue[st->head];
        st->head = (st->head + 1) % VMDK_STREAM_QUEUE;
        st->count--;
        st->have = true;
        pthread_cond_signal(&st->cv_put);
    }
    return 0;
}

/* The caller has been handed the last byte of the disk: the rest of the
 * stream (tables, footer, end-of-stream marker) must still be there, or the
 * stream was cut after its last grain.  Wait for the reader to get to the
 * end and return what it found.  With vmdk.lock held. */
static int finish(struct vmdk *v, struct vmdk_extent *x, uint64_t end)
{
    struct vmdk_stream *st = &v->st;

    if (end < x->len)
        return 0;
    while (!st->done && st->count == 0)
        pthread_cond_wait(&st->cv_get, &v->lock);
    if (st->count)     /* cannot be: no grain lies past the last one */
        return diag_fail(D(v), -EINVAL, x->name, -1, "grain past the end of the disk");
    return st->err;
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
        uint64_t gs = st->have ? st->cur.grain * x->grain_bytes : x->len;
        if (st->have && gs <= off) {
            uint64_t ge = gs + x->grain_bytes;
            e->flags = BD_ALLOCATED | BD_DATA | BD_COMPRESSED;
            e->len = (ge < end ? ge : end) - off;
        } else {
            e->flags = 0;   /* no grain: zeros (a stream has no parent) */
            e->len = (gs < end ? gs : end) - off;
        }
        r = finish(v, x, off + e->len);
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
        uint64_t gs = st->have ? st->cur.grain * x->grain_bytes : x->len;
        size_t n;
        if (st->have && gs <= p) {
            uint64_t within = p - gs;
            n = x->grain_bytes - within;
            if (n > len - done)
                n = len - done;
            memcpy(buf + done, st->cur.data + within, n);
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
    if (r == 0)
        r = finish(v, x, off + len);
    pthread_mutex_unlock(&v->lock);
    return r;
}
