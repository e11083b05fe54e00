/* Test helper for the qcow2 writer tests: drives the writer the way the
 * convert pipeline does (cluster-aligned writes of data runs, zero ranges
 * left out or written with write_zeroes over a backing file, clusters
 * compressed first with -c), runs qemu-img on the result. */
#ifndef QCOW2W_FEED_H
#define QCOW2W_FEED_H

#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "formats/bd.h"
#include "formats/qcow2/write.h"
#include "io/bfile.h"
#include "io/ioq.h"
#include "util/diag.h"
#include "util/kvopts.h"

#include "check.h"

static char tmpdir[4096];

static void setup_tmpdir(const char *name)
{
    const char *t = getenv("TEST_TMP");
    if (t && *t)
        snprintf(tmpdir, sizeof(tmpdir), "%s/%s", t, name);
    else
        snprintf(tmpdir, sizeof(tmpdir), "/tmp/%s.%d", name, (int)getpid());
    mkdir(tmpdir, 0755);
}

static bool have_qemu_img(void)
{
    return system("qemu-img --version >/dev/null 2>&1") == 0;
}

/* Run a shell command (printf-style); returns its exit status. */
static int run(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int run(const char *fmt, ...)
{
    char cmd[8192];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof(cmd), fmt, ap);
    va_end(ap);
    int st = system(cmd);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

/* Whole output of a command into a malloc'd string. */
static char *capture(const char *fmt, ...) __attribute__((format(printf, 1, 2), unused));
static char *capture(const char *fmt, ...)
{
    char cmd[8192];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof(cmd), fmt, ap);
    va_end(ap);
    FILE *p = popen(cmd, "r");
    size_t n = 0, cap = 4096;
    char *s = malloc(cap);
    if (!p || !s)
        abort();
    size_t got;
    while ((got = fread(s + n, 1, cap - n - 1, p)) > 0) {
        n += got;
        if (cap - n < 2)
            s = realloc(s, cap *= 2);
    }
    s[n] = '\0';
    pclose(p);
    return s;
}

/* --- seeded data ------------------------------------------------------------ */

static uint64_t rng;

static uint64_t rnd(void)
{
    rng ^= rng >> 12;
    rng ^= rng << 25;
    rng ^= rng >> 27;
    return rng * 2685821657736338717ULL;
}

enum { RUN_RANDOM, RUN_TEXT, RUN_ZERO };

/* Runs of 512 B..max_run of random bytes, text or zeros. */
__attribute__((unused)) static void gen_data(uint8_t *p, uint64_t size, uint64_t seed, uint64_t max_run)
{
    static const char *const words[] = { "disk ", "image ", "qcow2 ", "cluster ",
                                         "the ", "zero ", "table ", "\n" };
    rng = seed * 0x9e3779b97f4a7c15ULL + 1;
    uint64_t off = 0;
    while (off < size) {
        uint64_t len = (1 + rnd() % (max_run / 512)) * 512;
        if (len > size - off)
            len = size - off;
        switch (rnd() % 3) {
        case RUN_RANDOM:
            for (uint64_t i = 0; i < len; i++)
                p[off + i] = (uint8_t)rnd();
            break;
        case RUN_TEXT:
            for (uint64_t i = 0; i < len;) {
                const char *w = words[rnd() % 8];
                for (size_t k = 0; w[k] && i < len; k++)
                    p[off + i++] = (uint8_t)w[k];
            }
            break;
        default:
            memset(p + off, 0, len);
        }
        off += len;
    }
}

__attribute__((unused)) static int write_file(const char *path, const void *buf, uint64_t len)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0)
        return -errno;
    const uint8_t *p = buf;
    uint64_t done = 0;
    while (done < len) {
        ssize_t n = write(fd, p + done, len - done);
        if (n <= 0) {
            close(fd);
            return -EIO;
        }
        done += (uint64_t)n;
    }
    close(fd);
    return 0;
}

static bool is_zero(const uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (p[i])
            return false;
    return true;
}

/* --- the pipeline stand-in ---------------------------------------------------- */

enum feed_order { ORDER_ASCENDING, ORDER_WINDOW_SHUFFLE, ORDER_TWO_PASS };

struct feed_opts {
    const char *o;              /* -o string or NULL */
    bool compress;
    const char *backing;        /* name stored in the image (relative) */
    const char *backing_fmt;
    const uint8_t *bdata;       /* backing content */
    uint64_t bsize;
    enum feed_order order;
    bool use_ioq;
    uint64_t chunk;             /* bytes per pipeline chunk (0 = 1 MiB) */
};

struct feed_stats {
    uint64_t data_clusters, compressed, zero_writes, done_calls, writes;
};

static void feed_done(void *opaque, int res)
{
    struct feed_stats *st = opaque;
    st->done_calls++;
    if (res < 0)
        fprintf(stderr, "write completion error %d\n", res);
}

static int flush_run(struct bd *bd, const uint8_t *data, uint64_t start, uint64_t end,
                     struct feed_stats *st)
{
    if (start >= end)
        return 0;
    st->writes++;
    return bd->drv->pwrite(bd, data + start, end - start, start, feed_done, st);
}

/* Write `data` (size bytes) as a qcow2 image at `path`.  Returns 0 or the
 * writer's error (message in *d). */
__attribute__((unused)) static int feed(const char *path, const uint8_t *data, uint64_t size,
                const struct feed_opts *fo, struct feed_stats *st, struct diag *d)
{
    struct kvopts kv = { 0 };
    struct bfile *f;
    struct bd *bd = NULL;
    struct ioq *q = NULL;
    char err[256];
    int r;

    memset(st, 0, sizeof(*st));
    diag_init(d);
    unlink(path);
    if (fo->o && kvopts_parse(&kv, fo->o, err, sizeof(err)) < 0) {
        diag_fail(d, -EINVAL, path, -1, "%s", err);
        return -EINVAL;
    }
    if ((r = bfile_open(&f, path, BFILE_O_RDWR | BFILE_O_CREATE, d)) < 0)
        return r;
    if (fo->use_ioq && (r = ioq_create(&q, &(struct ioq_opts){ 0 }, d)) < 0)
        return r;
    struct bd_create_opts co = {
        .size = size, .o = &kv, .backing_file = fo->backing, .backing_fmt = fo->backing_fmt,
        .compress = fo->compress, .ioq = q,
    };
    const struct bd_driver *drv = bd_find_driver("qcow2");
    if (!drv || !drv->create) {
        fprintf(stderr, "no qcow2 writer registered\n");
        abort();
    }
    r = drv->create(&bd, f, &co, d);
    if (r < 0) {
        bfile_close(f);
        goto out;
    }
    if (kvopts_unused(&kv)) {
        r = diag_fail(d, -EINVAL, path, -1, "Invalid parameter '%s'", kvopts_unused(&kv));
        bd->drv->abort(bd);
        goto out;
    }
    uint64_t cs = bd->granule;
    uint64_t chunk = fo->chunk ? fo->chunk : (1 << 20);
    if (chunk < cs)
        chunk = cs;
    uint64_t nchunks = (size + chunk - 1) / chunk;
    uint64_t *order = malloc(nchunks * sizeof(*order));
    for (uint64_t i = 0; i < nchunks; i++)
        order[i] = i;
    if (fo->order == ORDER_WINDOW_SHUFFLE) {
        for (uint64_t w = 0; w < nchunks; w += 8) {
            uint64_t n = nchunks - w < 8 ? nchunks - w : 8;
            for (uint64_t i = n; i > 1; i--) {
                uint64_t j = rnd() % i, t = order[w + i - 1];
                order[w + i - 1] = order[w + j];
                order[w + j] = t;
            }
        }
    } else if (fo->order == ORDER_TWO_PASS) {
        uint64_t k = 0;
        for (uint64_t i = 0; i < nchunks; i += 2)
            order[k++] = i;
        for (uint64_t i = 1; i < nchunks; i += 2)
            order[k++] = i;
    }
    uint8_t *cbuf = malloc(cs);
    for (uint64_t ci = 0; ci < nchunks && r >= 0; ci++) {
        uint64_t cstart = order[ci] * chunk, cend = cstart + chunk;
        if (cend > size)
            cend = size;
        uint64_t run = cstart;      /* start of the pending plain-data run */
        for (uint64_t off = cstart; off < cend && r >= 0; off += cs) {
            size_t len = cend - off < cs ? (size_t)(cend - off) : cs;
            const uint8_t *p = data + off;
            bool same_as_backing = false, zero = is_zero(p, len);
            if (fo->bdata) {
                uint8_t *b = calloc(1, cs);
                if (off < fo->bsize)
                    memcpy(b, fo->bdata + off, fo->bsize - off < len ? fo->bsize - off : len);
                same_as_backing = memcmp(b, p, len) == 0;
                free(b);
            }
            if (same_as_backing || (zero && !fo->bdata)) {
                r = flush_run(bd, data, run, off, st);
                run = off + len;
                continue;
            }
            if (zero) {
                if ((r = flush_run(bd, data, run, off, st)) < 0)
                    break;
                r = bd->drv->write_zeroes(bd, off, len);
                st->zero_writes++;
                run = off + len;
                continue;
            }
            st->data_clusters++;
            if (fo->compress) {
                ssize_t cl = bd->drv->compress(bd, p, len, cbuf, cs);
                if (cl < 0) {
                    r = (int)cl;
                    break;
                }
                if (cl > 0) {
                    if ((r = flush_run(bd, data, run, off, st)) < 0)
                        break;
                    st->compressed++;
                    st->writes++;
                    r = bd->drv->pwrite_compressed(bd, cbuf, (size_t)cl, off, feed_done, st);
                    run = off + len;
                    continue;
                }
            }
        }
        if (r >= 0)
            r = flush_run(bd, data, run, cend, st);
    }
    free(cbuf);
    free(order);
    if (r >= 0)
        r = bd->drv->finish(bd);
    else
        bd->drv->abort(bd);
out:
    if (bd)
        bd->drv->close(bd);
    if (q)
        ioq_destroy(q);
    kvopts_free(&kv);
    return r;
}

/* qemu-img check: 0 = clean (no errors, no leaks). */
static int qcheck(const char *path)
{
    return run("qemu-img check -q '%s' >/dev/null 2>&1", path);
}

__attribute__((unused)) static uint64_t file_size(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 ? (uint64_t)st.st_size : 0;
}

#endif
