/* Reading a streamOptimized extent from stream input (a pipe), forward
 * only: the grain directory may be only in the footer, so the grains are
 * found in file order by walking the markers (read_markers.c).  A reader
 * thread inflates the grains into a small queue; block_status(off) takes
 * the next grain and keeps it for the pread that follows.  Grains must come
 * in ascending LBA order; memory is a few grains plus their compressed
 * bytes.  (A seekable file without a usable grain directory is scanned
 * instead: read_scan.c.)
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "formats/vmdk/read_int.h"
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
    uint64_t start = vmdk_walk_start(x);
    uint64_t cursor = h->desc_offset ? (h->desc_offset + h->desc_sectors) * VMDK_SECTOR
                                     : VMDK_SECTOR;
    uint64_t gd_off, gd_bytes = (uint64_t)h->gd_entries * 4, gt_bytes = (uint64_t)x->gtes * 4;
    uint64_t ngrains = vmdk_total_grains(x);
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
        r = vmdk_walk_next(v, x, &st->walk, st->cdata, &g, &csize, &at);
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
    st->walk.pos = vmdk_walk_start(x);
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
