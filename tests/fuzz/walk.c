/* The part of the fuzz targets that is the same for every format: open an
 * in-memory image and read everything it describes. */
#define _GNU_SOURCE
#include "fuzz_common.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
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

/* The content digest: a sum over every non-zero 512-byte sector read, each
 * hashed with its guest offset.  A sum does not depend on the order or on
 * how the extents were cut, and zero sectors add nothing, so two readings
 * of the same guest content give the same digest however block status
 * described it. */
static uint64_t sector_hash(uint64_t off, const uint8_t *p, size_t n)
{
    uint64_t h = 1469598103934665603ull ^ (off * 0x9e3779b97f4a7c15ull);
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 1099511628211ull;
    return h;
}

static uint64_t digest_add(uint64_t sum, uint64_t off, const uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i += 512) {
        size_t k = n - i < 512 ? n - i : 512;
        if (!is_zero(p + i, k))
            sum += sector_hash(off + i, p + i, k);
    }
    return sum;
}

void fuzz_walk_read(struct bd *bd, int with_check, struct fuzz_reading *out)
{
    static uint8_t *buf;
    uint64_t off = 0, budget = FUZZ_READ_BUDGET, sum = 0;
    unsigned extents = 0;
    bool failed = false;

    if (!buf && !(buf = malloc(CHUNK)))
        abort();
    while (off < bd->size && extents++ < FUZZ_MAX_EXTENTS && budget > 0) {
        struct bd_extent e;
        if (bd_block_status(bd, off, bd->size - off, &e) < 0) {
            failed = true;
            break;
        }
        contract(e.len > 0 && e.len <= bd->size - off, "extent length");
        /* data is read within the budget; other extents a little, to check
         * that a zero extent really reads as zeros */
        uint64_t want = (e.flags & BD_DATA) ? e.len : (e.len < 512 ? e.len : 512);
        if (want > budget)
            want = budget;
        for (uint64_t done = 0; done < want;) {
            size_t n = want - done < CHUNK ? (size_t)(want - done) : CHUNK;
            if (bd_pread(bd, buf, n, off + done) < 0) {
                failed = true;
                goto read_end;
            }
            if ((e.flags & BD_ZERO) && !(e.flags & BD_DATA))
                contract(is_zero(buf, n), "a zero extent reads as non-zero");
            sum = digest_add(sum, off + done, buf, n);
            done += n;
            budget -= n;
        }
        off += e.len;
    }
read_end:
    if (out) {
        out->format = bd->drv->name;
        out->size = bd->size;
        out->digest = sum;
        /* the whole image was walked: no error, no budget or extent cut */
        out->complete = !failed && off >= bd->size;
    }
    /* the tail (odd sizes, clusters straddling the end of the file) */
    if (!failed && bd->size >= 512)
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

void fuzz_walk(struct bd *bd, int with_check)
{
    fuzz_walk_read(bd, with_check, NULL);
}

void fuzz_read_input(const uint8_t *data, size_t size, const char *name,
                     const struct bd_open_opts *o, int pipe, struct fuzz_reading *out)
{
    struct diag d;
    struct bd *bd;
    void *feeder = NULL;
    int r;

    memset(out, 0, sizeof(*out));
    diag_init(&d);
    if (pipe)
        r = fuzz_open_pipe(&bd, data, size, name, o, &d, &feeder);
    else
        r = fuzz_open_mem(&bd, data, size, name, o, &d);
    if (r == 0) {
        out->opened = true;
        fuzz_walk_read(bd, 0, out);
        bd_close(bd);
    }
    fuzz_pipe_done(feeder);
}

size_t fuzz_cut_point(const uint8_t *data, size_t size, size_t unit)
{
    if (size < 4 * unit)
        return 0;
    /* the last (partial or whole) unit and 0 to 15 more, chosen by a byte
     * the fuzzer mutates */
    size_t last = (size - 1) / unit * unit;
    size_t more = unit * ((size_t)data[size / 2] % 16);
    return more < last ? last - more : 0;
}

void fuzz_truncation_rule(const uint8_t *data, size_t size, size_t unit, const char *name,
                          const struct bd_open_opts *o, int pipe,
                          const struct fuzz_reading *whole)
{
    struct fuzz_reading cut;
    size_t n = fuzz_cut_point(data, size, unit);

    if (!n || !whole->opened || !whole->complete)
        return;
    fuzz_read_input(data, n, name, o, pipe, &cut);
    if (!cut.opened || !cut.complete)
        return;     /* refused or failed: right */
    /* the reader got all it asked for: then it must not have needed what
     * was cut (the same content), never zeros in its place */
    contract(cut.size == whole->size, pipe ? "a truncated stream reads with another size"
                                           : "a truncated file reads with another size");
    contract(cut.digest == whole->digest,
             pipe ? "a truncated stream reads as other content (zeros where data was?)"
                  : "a truncated file reads as other content (zeros where data was?)");
}

/* ---- the modifying commands ---------------------------------------------- */

int fuzz_memfd(const uint8_t *data, size_t size, char path[64])
{
    int fd = memfd_create("fuzz.qcow2", MFD_CLOEXEC);

    if (fd < 0)
        return -1;
    if (write(fd, data, size) != (ssize_t)size) {
        close(fd);
        return -1;
    }
    snprintf(path, 64, "/proc/self/fd/%d", fd);
    return fd;
}

/* The next data segment of fd at or after *off: [*off, *end); false at the
 * end of the file.  Holes are skipped (a repair may make a sparse file of
 * gigabytes). */
static bool next_data(int fd, off_t size, off_t *off, off_t *end)
{
    off_t d = lseek(fd, *off, SEEK_DATA);

    if (d < 0 || d >= size)
        return false;
    off_t h = lseek(fd, d, SEEK_HOLE);
    *off = d;
    *end = h < 0 || h > size ? size : h;
    return true;
}

bool fuzz_memfd_same(int fd, const uint8_t *data, size_t size)
{
    static uint8_t buf[CHUNK];
    off_t end = lseek(fd, 0, SEEK_END), off = 0, seg;

    if (end < 0 || (size_t)end != size)
        return false;
    while (off < end) {
        off_t from = off;
        if (!next_data(fd, end, &off, &seg))
            off = seg = end;
        /* a hole reads as zeros */
        if (!is_zero(data + from, (size_t)(off - from)))
            return false;
        while (off < seg) {
            size_t n = seg - off < CHUNK ? (size_t)(seg - off) : CHUNK;
            if (pread(fd, buf, n, off) != (ssize_t)n || memcmp(buf, data + off, n) != 0)
                return false;
            off += (off_t)n;
        }
    }
    return true;
}

uint64_t fuzz_memfd_digest(int fd, uint64_t *size)
{
    static uint8_t buf[CHUNK];
    off_t end = lseek(fd, 0, SEEK_END), off = 0, seg;
    uint64_t sum = 0;

    *size = end < 0 ? 0 : (uint64_t)end;
    while (off < end && next_data(fd, end, &off, &seg)) {
        while (off < seg) {
            size_t n = seg - off < CHUNK ? (size_t)(seg - off) : CHUNK;
            if (pread(fd, buf, n, off) != (ssize_t)n)
                return 0;
            sum = digest_add(sum, (uint64_t)off, buf, n);
            off += (off_t)n;
        }
    }
    return sum;
}

int fuzz_open_qcow2_path(struct bd **out, const char *path, bool writable, struct diag *d)
{
    struct bd_open_opts o = fuzz_default_opts();

    o.format = "qcow2";
    o.no_backing = true;
    o.writable = writable;
    diag_init(d);
    return bd_open(out, path, &o, d);
}

static void keep_chunk(struct bd *bd, struct fuzz_guest *g, uint64_t off)
{
    uint32_t len = bd->size - off < FUZZ_KEEP_CHUNK ? (uint32_t)(bd->size - off)
                                                    : FUZZ_KEEP_CHUNK;

    if (g->n && g->off[g->n - 1] == off)
        return;
    if (bd_pread(bd, g->bytes[g->n], len, off) < 0)
        return;     /* unreadable before: nothing to keep */
    g->off[g->n] = off;
    g->len[g->n] = len;
    g->n++;
}

void fuzz_guest_record(struct bd *bd, struct fuzz_guest *g)
{
    uint64_t off = 0;
    unsigned extents = 0;

    g->size = bd->size;
    g->n = 0;
    while (off < bd->size && extents++ < FUZZ_MAX_EXTENTS && g->n < FUZZ_KEEP_MAX) {
        struct bd_extent e;
        if (bd_block_status(bd, off, bd->size - off, &e) < 0 || e.len == 0 ||
            e.len > bd->size - off)
            break;
        uint64_t first = off / FUZZ_KEEP_CHUNK * FUZZ_KEEP_CHUNK;
        uint64_t end = (e.flags & BD_DATA) ? off + e.len : off + 1;
        for (uint64_t c = first; c < end && g->n < FUZZ_KEEP_MAX; c += FUZZ_KEEP_CHUNK)
            keep_chunk(bd, g, c);
        off += e.len;
    }
}

void fuzz_guest_verify(struct bd *bd, const struct fuzz_guest *g, uint64_t limit)
{
    static uint8_t buf[FUZZ_KEEP_CHUNK];

    for (size_t i = 0; i < g->n; i++) {
        if (g->off[i] >= limit)
            continue;
        uint64_t len = limit - g->off[i] < g->len[i] ? limit - g->off[i] : g->len[i];
        contract(g->off[i] + len <= bd->size, "guest data lost: the image is smaller");
        contract(bd_pread(bd, buf, (size_t)len, g->off[i]) == 0,
                 "guest data that read before does not read now");
        if (memcmp(buf, g->bytes[i], (size_t)len) != 0) {
            fprintf(stderr, "fuzz: guest bytes changed at offset %llu\n",
                    (unsigned long long)g->off[i]);
            contract(0, "guest data changed");
        }
    }
}
