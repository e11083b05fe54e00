/* The part of the fuzz targets that is the same for every format: open an
 * in-memory image and read everything it describes. */
#define _GNU_SOURCE
#include "fuzz_common.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "io/bfile.h"
#include "util/diag.h"
#include "util/jval.h"

#define CHUNK (1u << 20)

struct bd_open_opts fuzz_default_opts(void)
{
    struct bd_open_opts o = { 0 };
    o.no_external_files = true;
    return o;
}

int fuzz_open_mem(struct bd **out, const uint8_t *data, size_t size,
                  const char *name, const struct bd_open_opts *o, struct diag *d)
{
    struct bfile *f;
    int r = bfile_open_mem(&f, name, data, size, d);

    *out = NULL;
    if (r < 0)
        return r;
    return bd_open_bfile(out, f, o, NULL, d);
}

struct feeder {
    pthread_t thread;
    int fd;
    const uint8_t *data;
    size_t size;
};

static void *feed(void *arg)
{
    struct feeder *fd = arg;
    size_t done = 0;

    /* Small writes: the reader sees the data arrive in pieces. */
    while (done < fd->size) {
        size_t n = fd->size - done < 4096 ? fd->size - done : 4096;
        ssize_t w = write(fd->fd, fd->data + done, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            break;  /* EPIPE: the reader gave up early */
        done += (size_t)w;
    }
    close(fd->fd);
    return NULL;
}

int fuzz_open_pipe(struct bd **out, const uint8_t *data, size_t size,
                   const char *name, const struct bd_open_opts *o, struct diag *d,
                   void **feeder)
{
    int p[2];
    struct bfile *f;
    struct feeder *fe;
    int r;

    *out = NULL;
    *feeder = NULL;
    signal(SIGPIPE, SIG_IGN);
    if (pipe2(p, O_CLOEXEC) < 0)
        abort();
    fe = calloc(1, sizeof(*fe));
    if (!fe)
        abort();
    fe->fd = p[1];
    fe->data = data;
    fe->size = size;
    if (pthread_create(&fe->thread, NULL, feed, fe) != 0)
        abort();
    *feeder = fe;
    r = bfile_from_fd(&f, p[0], name, false, d);
    if (r < 0)
        return r;
    return bd_open_bfile(out, f, o, NULL, d);
}

void fuzz_pipe_done(void *feeder)
{
    struct feeder *fe = feeder;

    if (!fe)
        return;
    /* the read end is closed (bd_close or a failed open): the feeder ends
     * with EPIPE if it still had data to write */
    pthread_join(fe->thread, NULL);
    free(fe);
}

static void contract(int ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "fuzz: driver contract broken: %s\n", what);
        abort();
    }
}

static int is_zero(const uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (p[i])
            return 0;
    return 1;
}

void fuzz_walk(struct bd *bd, int with_check)
{
    static uint8_t *buf;
    uint64_t off = 0, budget = FUZZ_READ_BUDGET;
    unsigned extents = 0;

    if (!buf && !(buf = malloc(CHUNK)))
        abort();
    while (off < bd->size && extents++ < FUZZ_MAX_EXTENTS && budget > 0) {
        struct bd_extent e;
        if (bd_block_status(bd, off, bd->size - off, &e) < 0)
            break;
        contract(e.len > 0 && e.len <= bd->size - off, "extent length");
        /* data is read within the budget; other extents a little, to check
         * that a zero extent really reads as zeros */
        uint64_t want = (e.flags & BD_DATA) ? e.len : (e.len < 512 ? e.len : 512);
        if (want > budget)
            want = budget;
        for (uint64_t done = 0; done < want;) {
            size_t n = want - done < CHUNK ? (size_t)(want - done) : CHUNK;
            if (bd_pread(bd, buf, n, off + done) < 0)
                return;
            if ((e.flags & BD_ZERO) && !(e.flags & BD_DATA))
                contract(is_zero(buf, n), "a zero extent reads as non-zero");
            done += n;
            budget -= n;
        }
        off += e.len;
    }
    /* the tail (odd sizes, clusters straddling the end of the file) */
    if (bd->size >= 512)
        bd_pread(bd, buf, 512, bd->size - 512);

    if (bd->drv->info) {
        struct jval *obj = jv_object();
        bd->drv->info(bd, obj);
        jv_free(obj);
    }
    if (with_check && bd->drv->check) {
        struct bd_check_result r;
        memset(&r, 0, sizeof(r));
        bd->drv->check(bd, &r, 0);
    }
}
