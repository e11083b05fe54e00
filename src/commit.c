/* commit: the ranges the images above the base allocate, written into the
 * base in whole base clusters, then the top emptied (see commit.h).
 *
 * The base is read through the top's chain (its reader opened with the
 * chain) and written through a second, writing handle (the format's
 * in-place writer).  The reader's caches may go stale as the writer
 * changes the base, so each base cluster is read (as the top shows it)
 * once, before it is written, and never again: clusters are visited in
 * order, and a cluster freed and reused by the writer was named only by a
 * cluster already done. */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "commit.h"
#include "formats/bd.h"
#include "io/bfile.h"
#include "util/diag.h"

#define CHUNK (1u << 20)
#define ZERO_RUN_MAX (UINT64_C(1) << 30)

/* What the images above the base make of a range. */
enum above { ABOVE_NONE, ABOVE_ZERO, ABOVE_DATA };

struct walker {
    struct bd *top, *base;
    uint64_t base_size;         /* the base's size before the commit */
    uint64_t off, len;          /* the cached extent */
    enum above kind;
};

/* The extent at `off` as the images above the base decide it: the topmost
 * one that allocates it (zeros or data), none (the base shows through), or
 * zeros where an image between reads past the end of the one below it, or
 * past the base's old end (the grown range, which must read as zeros). */
static int status_above(struct walker *w, uint64_t off)
{
    struct bd *l = w->top;
    uint64_t len = w->top->size - off;

    for (;;) {
        struct bd_extent e;
        memset(&e, 0, sizeof(e));
        e.host_offset = -1;
        int r = l->drv->block_status(l, off, len, &e);
        if (r < 0)
            return r;
        if (e.len == 0 || e.len > len)
            return diag_fail(l->diag, -EIO, l->filename, (int64_t)off,
                             "internal error: block status returned a bad length");
        len = e.len;
        if (e.flags & BD_ALLOCATED) {
            w->kind = (e.flags & BD_ZERO) ? ABOVE_ZERO : ABOVE_DATA;
            break;
        }
        struct bd *b = l->backing;
        uint64_t bsize = b == w->base ? w->base_size : b ? b->size : 0;
        if (!b || off >= bsize) {
            w->kind = ABOVE_ZERO;
            break;
        }
        if (len > bsize - off)
            len = bsize - off;
        if (b == w->base) {
            w->kind = ABOVE_NONE;
            break;
        }
        l = b;
    }
    w->off = off;
    w->len = len;
    return 0;
}

static int status_at(struct walker *w, uint64_t off)
{
    if (off >= w->off && off - w->off < w->len)
        return 0;
    return status_above(w, off);
}

/* Base cluster [c, end): nothing to do, all zeros above the base, or to be
 * written with the top's view (and the base's own bytes past the top's end). */
static int classify(struct walker *w, uint64_t c, uint64_t end, enum above *cls)
{
    uint64_t lim = end < w->top->size ? end : w->top->size;
    bool any = false, zero = end <= w->top->size;
    int r;

    for (uint64_t pos = c; pos < lim; pos = w->off + w->len) {
        if ((r = status_at(w, pos)) < 0)
            return r;
        any |= w->kind != ABOVE_NONE;
        zero &= w->kind == ABOVE_ZERO;
    }
    *cls = !any ? ABOVE_NONE : zero ? ABOVE_ZERO : ABOVE_DATA;
    return 0;
}

static void done_cb(void *opaque, int err)
{
    *(int *)opaque = err;
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* -r: data bytes written so far may not run ahead of the rate */
static void rate_wait(double start, uint64_t bytes, uint64_t rate)
{
    double due = start + (double)bytes / (double)rate, t = now();

    if (due > t) {
        double s = due - t;
        struct timespec ts = { (time_t)s, (long)((s - (double)(time_t)s) * 1e9) };
        while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
            ;
    }
}

/* The view the base cluster run [off, off+n) is to hold: the top's, and
 * past the top's end the base's own bytes (a top smaller than the base). */
static int read_view(struct walker *w, uint8_t *buf, uint64_t n, uint64_t off)
{
    uint64_t tsize = w->top->size;
    uint64_t t = off >= tsize ? 0 : tsize - off < n ? tsize - off : n;
    int r = t ? bd_pread(w->top, buf, t, off) : 0;

    if (r == 0 && t < n)
        r = bd_pread(w->base, buf + t, n - t, off + t);
    return r;
}

/* The run of base clusters of kind `cls` that starts at *pos (a data run
 * up to one chunk), written; *pos moves past it. */
static int write_run(const struct commit_opts *o, struct walker *w, struct bd *out,
                     uint8_t *buf, uint64_t chunk, enum above cls, uint64_t *pos,
                     double start, struct commit_result *res)
{
    uint64_t gran = out->granule, size = out->size, tsize = w->top->size;
    uint64_t run_end = size - *pos < gran ? size : *pos + gran;
    uint64_t max = cls == ABOVE_DATA ? chunk : ZERO_RUN_MAX;
    enum above next;
    int r;

    while (run_end < tsize && run_end - *pos < max) {
        uint64_t e = size - run_end < gran ? size : run_end + gran;
        if (cls == ABOVE_DATA && e - *pos > chunk)
            break;
        if ((r = classify(w, run_end, e, &next)) < 0)
            return r;
        if (next != cls)
            break;
        run_end = e;
    }
    uint64_t n = run_end - *pos;
    if (cls == ABOVE_ZERO) {
        if ((r = out->drv->write_zeroes(out, *pos, n)) < 0)
            return r;
        res->zeroed += n;
    } else {
        int err = 0;
        if ((r = read_view(w, buf, n, *pos)) < 0 ||
            (r = out->drv->pwrite(out, buf, (size_t)n, *pos, done_cb, &err)) < 0 ||
            (r = err) < 0)
            return r;
        res->written += n;
        if (o->rate_limit)
            rate_wait(start, res->written, o->rate_limit);
    }
    *pos = run_end;
    return 0;
}

static int copy(const struct commit_opts *o, struct walker *w, struct bd *out,
                struct commit_result *res)
{
    uint64_t gran = out->granule, size = out->size, tsize = w->top->size;
    uint64_t chunk = CHUNK > gran ? CHUNK - CHUNK % gran : gran;
    uint8_t *buf = NULL;
    double start = now();
    int r = 0;

    if (gran < 512 || gran > (64u << 20))
        return diag_fail(out->diag, -EINVAL, out->filename, -1, "unexpected cluster size %"
                         PRIu64, gran);
    if (posix_memalign((void **)&buf, 4096, chunk))
        return diag_fail(out->diag, -ENOMEM, out->filename, -1, "out of memory");
    for (uint64_t pos = 0; pos < tsize;) {
        uint64_t end = size - pos < gran ? size : pos + gran;
        enum above cls;
        if ((r = classify(w, pos, end, &cls)) < 0)
            break;
        if (cls != ABOVE_NONE) {
            if ((r = write_run(o, w, out, buf, chunk, cls, &pos, start, res)) < 0)
                break;
        } else {
            /* past the rest of a long extent the base shows through */
            uint64_t e = w->off + w->len;
            pos = end;
            if (w->kind == ABOVE_NONE && w->off <= pos && e > pos + gran)
                pos = e - e % gran;
        }
        if (o->progress)
            o->progress(o->progress_opaque, pos < tsize ? pos : tsize, tsize);
    }
    free(buf);
    return r;
}

/* ---- the chain ------------------------------------------------------------ */

static char *folder_of(const char *path)
{
    const char *slash = strrchr(path, '/');

    if (!slash)
        return strdup(".");
    if (slash == path)
        return strdup("/");
    return strndup(path, (size_t)(slash - path));
}

struct bd *commit_find_base(struct bd *top, const char *name)
{
    for (struct bd *l = top; l && l->backing; l = l->backing) {
        const struct bfile *bf = l->backing->file;
        struct stat a, b;
        char *path = NULL;
        if (!bf || bf->fd < 0 || bf->kind == BFILE_SLICE || fstat(bf->fd, &b) < 0)
            continue;
        if (name[0] == '/') {
            path = strdup(name);
        } else {
            char *dir = folder_of(l->filename);
            if (dir && asprintf(&path, "%s/%s", dir, name) < 0)
                path = NULL;
            free(dir);
        }
        bool same = path && stat(path, &a) == 0 && a.st_dev == b.st_dev &&
                    a.st_ino == b.st_ino;
        free(path);
        if (same)
            return l->backing;
    }
    return NULL;
}

static bool same_file(const struct bfile *a, const struct bfile *b)
{
    struct stat sa, sb;

    return a->fd >= 0 && b->fd >= 0 && fstat(a->fd, &sa) == 0 && fstat(b->fd, &sb) == 0 &&
           sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

/* The base's file again, for writing, as its referrer names it (under the
 * same folder rule), and the same file as the one read. */
static int open_base_file(struct bd *base, struct bfile **f, struct diag *d)
{
    struct bd *from = base->parent;
    int r;

    if (!from || !from->backing_name)
        return diag_fail(d, -EINVAL, base->filename, -1, "internal error: no reference "
                         "to the base");
    if ((r = bd_open_ref_file(from, from->backing_name, true, f)) < 0)
        return r;
    if (!same_file(*f, base->file)) {
        bfile_close(*f);
        *f = NULL;
        return diag_fail(d, -ESTALE, base->filename, -1, "the file was replaced while the "
                         "commit was preparing");
    }
    return 0;
}

/* A base smaller than the top takes the top's size first (durably). */
static int grow_base(struct bd *base, uint64_t size, struct diag *d)
{
    struct bd_open_opts oo = base->opts;
    struct bfile *f;
    struct bd *rb = NULL;
    int r;

    if (!base->drv->resize)
        return diag_fail(d, -ENOTSUP, base->filename, -1, "the base is smaller than the "
                         "top image, and %s images cannot be resized", base->drv->name);
    if ((r = open_base_file(base, &f, d)) < 0)
        return r;
    oo.format = base->drv->name;
    oo.writable = true;
    if ((r = bd_open_bfile(&rb, f, &oo, base->parent, d)) < 0)
        return r;
    r = rb->drv->resize(rb, size, false);
    if (r == 0)
        r = bfile_sync(rb->file);
    bd_close(rb);
    return r;
}

int commit_image(const struct commit_opts *o, struct diag *d, struct commit_result *res)
{
    struct bd_open_opts oo = { .format = o->format, .writable = !o->drop,
                               .allow_external = o->allow_external };
    struct bd *top = NULL, *base, *out = NULL;
    struct bfile *f = NULL;
    int r;

    memset(res, 0, sizeof(*res));
    if ((r = bd_open(&top, o->filename, &oo, d)) < 0)
        return r;
    if (o->base) {
        if (!(base = commit_find_base(top, o->base))) {
            r = diag_fail(d, -ENOENT, NULL, -1, "Did not find '%s' in the backing chain "
                          "of '%s'", o->base, o->filename);
            goto out;
        }
    } else if (!(base = top->backing)) {
        r = diag_fail(d, -ENOENT, NULL, -1, "Image does not have a backing file");
        goto out;
    }
    if (!base->drv->create || !(base->drv->caps & BD_CAP_INPLACE)) {
        r = diag_fail(d, -ENOTSUP, base->filename, -1, "committing into %s images is not "
                      "supported (only qcow2 and raw images are written in place)",
                      base->drv->name);
        goto out;
    }
    /* the top is emptied only if it can be: refused now, before the base
     * changes (a format without make_empty is left as it is, as qemu-img
     * leaves it) */
    bool empty = !o->drop && base == top->backing && top->drv->make_empty;
    if (empty && (r = top->drv->make_empty(top, true)) < 0)
        goto out;
    uint64_t base_size = base->size, size = base_size;
    struct walker w = { .top = top, .base = base, .base_size = base_size };
    /* the writer opens and checks the base before the grow changes it */
    if ((r = open_base_file(base, &f, d)) < 0)
        goto out;
    struct bd_create_opts co = { .size = size, .durable = true, .existing = true,
                                 .allow_external = base->opts.allow_external };
    if ((r = base->drv->create(&out, f, &co, d)) < 0)
        goto out;
    f = NULL;
    if (top->size > base_size) {
        out->drv->close(out);
        out = NULL;
        if ((r = grow_base(base, top->size, d)) < 0 || (r = open_base_file(base, &f, d)) < 0)
            goto out;
        co.size = size = top->size;
        if ((r = base->drv->create(&out, f, &co, d)) < 0)
            goto out;
        f = NULL;
    }
    r = copy(o, &w, out, res);
    if (r == 0)
        r = out->drv->finish(out);
    else
        out->drv->abort(out);
    out->drv->close(out);
    out = NULL;
    /* the base is synced: the top may let go of what it held */
    if (r == 0 && empty && (r = top->drv->make_empty(top, false)) == 0)
        res->emptied = true;
out:
    if (out)
        out->drv->close(out);
    if (f)
        bfile_close(f);
    bd_close(top);
    return r;
}
