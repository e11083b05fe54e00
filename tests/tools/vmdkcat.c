/* vmdkcat: open an image through bd_open and write its guest bytes (test tool).
 *
 *   vmdkcat [-f FMT] [-x] [-c] [-b] [-d N] [-t THREADS] [-i] [-m] IMG OUT
 *
 *   -f FMT     format instead of probing      -x  allow external references
 *   -c         ignore a parent CID mismatch   -b  do not open parents
 *   -d N       OVA disk index                 -i  print the info object (JSON)
 *   -m         print the block status map (one extent a line) instead
 *   -t N       read with N threads in 1 MiB chunks taken in turn (default 1:
 *              block_status then pread, strictly ascending, like a stream)
 *
 * OUT is created (or "-" for stdout); zero extents are skipped (holes) in a
 * file.  Exit 0, or 1 with the recorded error on stderr.
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

#include "toolout.h"

#define CHUNK (1u << 20)

static struct bd *img;
static int out_fd;
static pthread_mutex_t next_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t next_off;
static int worker_err;

static int write_at(const void *buf, size_t n, uint64_t off, bool is_stdout)
{
    const char *p = buf;
    while (n) {
        ssize_t w = is_stdout ? write(out_fd, p, n) : pwrite(out_fd, p, n, (off_t)off);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        p += w;
        n -= (size_t)w;
        off += (uint64_t)w;
    }
    return 0;
}

static void *worker(void *arg)
{
    uint8_t *buf = malloc(CHUNK);
    (void)arg;
    for (;;) {
        pthread_mutex_lock(&next_lock);
        uint64_t off = next_off;
        next_off += CHUNK;
        bool stop = worker_err || off >= img->size;
        pthread_mutex_unlock(&next_lock);
        if (stop)
            break;
        size_t n = img->size - off < CHUNK ? (size_t)(img->size - off) : CHUNK;
        int r = bd_pread(img, buf, n, off);
        if (r == 0)
            r = write_at(buf, n, off, false);
        if (r < 0) {
            pthread_mutex_lock(&next_lock);
            worker_err = r;
            pthread_mutex_unlock(&next_lock);
            break;
        }
    }
    free(buf);
    return NULL;
}

int main(int argc, char **argv)
{
    struct bd_open_opts o = { 0 };
    struct diag d;
    int opt, threads = 1;
    bool info = false, map = false;

    while ((opt = getopt(argc, argv, "f:xcbd:t:im")) != -1) {
        switch (opt) {
        case 'f': o.format = optarg; break;
        case 'x': o.allow_external = true; break;
        case 'c': o.ignore_parent_cid = true; break;
        case 'b': o.no_backing = true; break;
        case 'd': o.disk_index = (unsigned)atoi(optarg); break;
        case 't': threads = atoi(optarg); break;
        case 'i': info = true; break;
        case 'm': map = true; break;
        default:
            fprintf(stderr, "usage: vmdkcat [-f FMT] [-x] [-c] [-b] [-d N] [-t N] [-i] [-m] IMG [OUT]\n");
            return 2;
        }
    }
    if (optind >= argc || (!info && !map && optind + 2 != argc)) {
        fprintf(stderr, "vmdkcat: need IMG and OUT\n");
        return 2;
    }
    diag_init(&d);
    if (bd_open(&img, argv[optind], &o, &d) < 0) {
        tool_report(&d);
        return 1;
    }
    int rc = 0;
    if (info) {
        struct jval *obj = jv_object();
        jv_set(obj, "virtual-size", jv_uint(img->size));
        jv_set(obj, "format", jv_str(img->drv->name));
        if (img->backing_name)
            jv_set(obj, "backing-filename", jv_str(img->backing_name));
        if (img->drv->info && img->drv->info(img, obj) < 0)
            rc = 1;
        if (tool_print_json(obj) < 0)
            rc = 1;
        jv_free(obj);
    } else if (map) {
        for (uint64_t off = 0; off < img->size;) {
            struct bd_extent e;
            if (bd_block_status(img, off, img->size - off, &e) < 0) {
                rc = 1;
                break;
            }
            printf("%llu %llu %s%s%s%s depth=%d\n", (unsigned long long)off,
                   (unsigned long long)e.len, e.flags & BD_DATA ? "data " : "",
                   e.flags & BD_ZERO ? "zero " : "", e.flags & BD_ALLOCATED ? "allocated " : "",
                   e.flags & BD_COMPRESSED ? "compressed" : "", e.depth);
            off += e.len;
        }
    } else {
        const char *out = argv[optind + 1];
        bool is_stdout = strcmp(out, "-") == 0;
        out_fd = is_stdout ? STDOUT_FILENO : open(out, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (out_fd < 0 || (!is_stdout && ftruncate(out_fd, (off_t)img->size) < 0)) {
            perror(out);
            bd_close(img);
            return 1;
        }
        if (threads > 1 && !is_stdout) {
            pthread_t t[16];
            if (threads > 16)
                threads = 16;
            for (int i = 0; i < threads; i++)
                pthread_create(&t[i], NULL, worker, NULL);
            for (int i = 0; i < threads; i++)
                pthread_join(t[i], NULL);
            if (worker_err)
                rc = 1;
        } else {
            uint8_t *buf = malloc(CHUNK);
            static const uint8_t zeros[CHUNK];
            for (uint64_t off = 0; off < img->size && !rc;) {
                struct bd_extent e;
                if (bd_block_status(img, off, img->size - off, &e) < 0) {
                    rc = 1;
                    break;
                }
                for (uint64_t p = off; p < off + e.len;) {
                    size_t n = off + e.len - p < CHUNK ? (size_t)(off + e.len - p) : CHUNK;
                    if (e.flags & BD_DATA) {
                        if (bd_pread(img, buf, n, p) < 0) {
                            rc = 1;
                            break;
                        }
                        if (write_at(buf, n, p, is_stdout) < 0) {
                            perror(out);
                            rc = 1;
                            break;
                        }
                    } else if (is_stdout && write_at(zeros, n, p, true) < 0) {
                        perror(out);
                        rc = 1;
                        break;
                    }
                    p += n;
                }
                off += e.len;
            }
            free(buf);
        }
        if (!is_stdout)
            close(out_fd);
    }
    if (rc && d.err)
        tool_report(&d);
    bd_close(img);
    return rc;
}
