/* bd_window: part of an image seen as an image of its own (bd_window.h). */
#include "formats/bd_window.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "formats/bd.h"
#include "util/diag.h"

struct bd_win {
    struct bd bd;
    struct bd *inner;
    uint64_t start, data_len;
};

static int win_block_status(struct bd *bd, uint64_t off, uint64_t len, struct bd_extent *e)
{
    struct bd_win *w = (struct bd_win *)bd;

    if (off >= w->data_len) {
        /* the padding: zeros this view decides */
        e->len = len;
        e->flags = BD_ZERO | BD_ALLOCATED;
        e->host_offset = -1;
        return 0;
    }
    uint64_t n = len < w->data_len - off ? len : w->data_len - off;
    int r = bd_block_status(w->inner, w->start + off, n, e);
    if (r < 0)
        return r;
    /* inner's chain decided (its unallocated ranges came back as zeros) */
    e->flags |= BD_ALLOCATED;
    return 0;
}

static int win_pread(struct bd *bd, void *buf, size_t len, uint64_t off)
{
    struct bd_win *w = (struct bd_win *)bd;
    size_t n = 0;

    if (off < w->data_len) {
        n = len;
        if (n > w->data_len - off)
            n = (size_t)(w->data_len - off);
        int r = bd_pread(w->inner, buf, n, w->start + off);
        if (r < 0)
            return r;
    }
    memset((char *)buf + n, 0, len - n);
    return 0;
}

static void win_close(struct bd *bd)
{
    struct bd_win *w = (struct bd_win *)bd;

    bd_close(w->inner);
    bd_release(bd);
    free(w);
}

static const struct bd_driver bd_window_drv = {
    .name = "window",
    .block_status = win_block_status,
    .pread = win_pread,
    .close = win_close,
};

int bd_window_open(struct bd **out, struct bd *inner, uint64_t start, uint64_t data_len,
                   uint64_t size, struct diag *d)
{
    struct bd_win *w;

    *out = NULL;
    if (start > inner->size || data_len > inner->size - start || data_len > size) {
        int r = diag_fail(d, -EINVAL, inner->filename, (int64_t)start,
                          "internal error: a window of %llu bytes past the end of the image",
                          (unsigned long long)data_len);
        bd_close(inner);
        return r;
    }
    if (!(w = calloc(1, sizeof(*w)))) {
        bd_close(inner);
        return diag_fail(d, -ENOMEM, NULL, -1, "out of memory");
    }
    bd_init(&w->bd, &bd_window_drv, NULL, d);
    free(w->bd.filename);
    w->bd.filename = strdup(inner->filename ? inner->filename : "");
    if (!w->bd.filename) {
        free(w);
        bd_close(inner);
        return diag_fail(d, -ENOMEM, NULL, -1, "out of memory");
    }
    w->inner = inner;
    w->start = start;
    w->data_len = data_len;
    w->bd.size = size;
    w->bd.opts = inner->opts;
    /* keep the inner granule where the view starts on one of its
     * boundaries, so that reads stay aligned to its clusters */
    w->bd.granule = inner->granule && start % inner->granule == 0 ? inner->granule : 512;
    *out = &w->bd;
    return 0;
}
