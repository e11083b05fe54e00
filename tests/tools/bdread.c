/* bdread: read an image through its driver (test tool).
 *
 *   bdread [-f FMT] [-l SNAPSHOT] [-x] [-t THREADS] [-C CHUNK] IMG OUT
 *       guest bytes of the whole chain into OUT (a new file; zero extents
 *       become holes), read in CHUNK-byte pieces (default 1M) by THREADS
 *       threads at once (default 1) to exercise thread-safe pread
 *   bdread [-f FMT] [-x] -m IMG
 *       the extents of bd_block_status, one per line
 *       "OFFSET LENGTH data|zero|data,zero|compressed DEPTH", then
 *       "extents N calls M allocated BYTES"
 *   bdread [-f FMT] [-x] -i IMG     the driver's info object as JSON
 *   -x allows references outside the image's folder; -n opens no backing file.
 * Errors: the diag message on stderr, exit 1.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "formats/bd.h"
#include "util/diag.h"
#include "util/jval.h"
#include "util/size.h"

#include "toolout.h"

static struct bd *bd;
static int out_fd;
static uint64_t chunk = 1 << 20;
static unsigned nthreads = 1;
static pthread_mutex_t next_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t next_off;
static int failed;

static void *worker(void *arg)
{
    uint8_t *buf = malloc(chunk);
    (void)arg;
    if (!buf) {
        failed = -ENOMEM;
        return NULL;
    }
    for (;;) {
        pthread_mutex_lock(&next_lock);
        uint64_t off = next_off;
        if (off < bd->size && !failed)
            next_off += chunk;
        pthread_mutex_unlock(&next_lock);
        if (off >= bd->size || failed)
            break;
        uint64_t end = off + chunk < bd->size ? off + chunk : bd->size;
        /* skip what the chain says reads as zeros, read the rest */
        while (off < end) {
            struct bd_extent e;
            int r = bd_block_status(bd, off, end - off, &e);
            if (r < 0) {
                failed = r;
                break;
            }
            if (!(e.flags & BD_ZERO)) {
                r = bd_pread(bd, buf, e.len, off);
                if (r < 0) {
                    failed = r;
                    break;
                }
                if (pwrite(out_fd, buf, e.len, (off_t)off) != (ssize_t)e.len) {
                    failed = -EIO;
                    break;
                }
            }
            off += e.len;
        }
    }
    free(buf);
    return NULL;
}

static int do_map(void)
{
    uint64_t off = 0, n = 0, calls = 0, alloc = 0;
    while (off < bd->size) {
        struct bd_extent e;
        int r = bd_block_status(bd, off, bd->size - off, &e);
        if (r < 0)
            return r;
        calls++;
        const char *k = (e.flags & BD_COMPRESSED) ? "compressed"
                      : (e.flags & BD_DATA) && (e.flags & BD_ZERO) ? "data,zero"
                      : (e.flags & BD_DATA) ? "data" : "zero";
        printf("%llu %llu %s %d\n", (unsigned long long)off, (unsigned long long)e.len,
               k, e.depth);
        /* bytes with a host cluster: data, and zeros that keep theirs */
        if ((e.flags & BD_DATA) ||
            ((e.flags & BD_ZERO) && (e.flags & BD_ALLOCATED) && e.host_offset >= 0))
            alloc += e.len;
        off += e.len;
        n++;
    }
    printf("extents %llu calls %llu allocated %llu\n", (unsigned long long)n,
           (unsigned long long)calls, (unsigned long long)alloc);
    return 0;
}

int main(int argc, char **argv)
{
    struct bd_open_opts o = { 0 };
    struct diag d;
    int opt, mode = 'r', r;

    diag_init(&d);
    while ((opt = getopt(argc, argv, "f:l:xnt:C:mi")) != -1) {
        switch (opt) {
        case 'f': o.format = optarg; break;
        case 'l': o.snapshot = optarg; break;
        case 'x': o.allow_external = true; break;
        case 'n': o.no_backing = true; break;
        case 't': nthreads = (unsigned)atoi(optarg); break;
        case 'C':
            if (size_parse(optarg, 1, &chunk) < 0 || chunk == 0)
                return 2;
            break;
        case 'm': case 'i': mode = opt; break;
        default: return 2;
        }
    }
    if (optind >= argc || (mode == 'r' && optind + 2 != argc) || nthreads < 1 ||
        nthreads > 64) {
        fprintf(stderr, "usage: bdread [-f FMT] [-l SNAP] [-x] [-n] [-t N] [-C CHUNK] "
                "IMG OUT | -m IMG | -i IMG\n");
        return 2;
    }
    r = bd_open(&bd, argv[optind], &o, &d);
    if (r < 0) {
        tool_report(&d);
        return 1;
    }
    if (mode == 'm') {
        r = do_map();
    } else if (mode == 'i') {
        struct jval *obj = jv_object();
        r = bd->drv->info ? bd->drv->info(bd, obj) : 0;
        if (r == 0 && tool_print_json(obj) < 0) {
            jv_free(obj);
            bd_close(bd);
            return 1;
        }
        jv_free(obj);
    } else {
        out_fd = open(argv[optind + 1], O_WRONLY | O_CREAT | O_EXCL, 0644);
        if (out_fd < 0 || ftruncate(out_fd, (off_t)bd->size) < 0) {
            perror(argv[optind + 1]);
            bd_close(bd);
            return 1;
        }
        pthread_t th[64];
        for (unsigned i = 0; i < nthreads; i++)
            pthread_create(&th[i], NULL, worker, NULL);
        for (unsigned i = 0; i < nthreads; i++)
            pthread_join(th[i], NULL);
        r = failed;
        close(out_fd);
    }
    if (r < 0)
        tool_report(&d);
    bd_close(bd);
    return r < 0 ? 1 : 0;
}
