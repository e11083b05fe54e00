/* ioq_bench: which way of writing a big new file is fastest on this machine.
 *
 *   bench/ioq_bench [-s SIZE_MIB] [-c CHUNK_KIB] [-r RUNS] [-d DIR] [-w none|copy]
 *                   [-T] [-q] ENGINE...
 *
 * Each run writes SIZE_MIB MiB (default 2048) in CHUNK_KIB KiB chunks
 * (default 1024) to a new file in DIR (default /tmp), sized first with
 * ftruncate (as convert does for a raw target, disable with -T).  The runs of
 * all engines alternate (engine 1, engine 2, ..., engine 1, ...) so that drift
 * of the machine hits them all alike; the file is unlinked outside the timed
 * part.  For every engine it prints medians of: wall time, GiB/s, user+sys
 * CPU of this process (io-wq workers are threads of the process and count
 * here), busy CPU of the whole machine from /proc/stat (adds kworkers,
 * e.g. writeback, and anything else running) and the time the hypervisor
 * stole from the VM, all in seconds.
 *
 * -q waits before each run until the machine has been idle (>= 90% over
 * a second, at most 30 s) so that other work on a shared machine lands in
 * fewer runs; runs that started without that are counted and reported.  On a
 * busy shared machine, also run it under `nice -n -20`.
 *
 * -w copy makes the producer do what convert's main thread does before each
 * write: copy the chunk in (a read from the page cache costs about a memcpy)
 * and scan it for zeros.  That is the case where overlapping the writes with
 * the producer (io-wq workers, a writer thread) can pay off on 2 cores.
 *
 * ENGINE is NAME[:DEPTH[:FLAGS]]:
 *   pwrite            a plain pwrite loop, one buffer
 *   dpwrite           the same with O_DIRECT
 *   thread:D          one writer thread doing pwrite, fed by a queue of D
 *   uring:D[:F]       io_uring buffered writes, D in flight
 *   during:D[:F]      io_uring with O_DIRECT
 *       F letters:  a IOSQE_ASYNC   f registered (fixed) buffers
 *                   b submit only when the ring is full (batch) instead of
 *                     after every write
 *                   s SINGLE_ISSUER|DEFER_TASKRUN ring
 *   ioq:D[:B]         the library's write queue (src/io/ioq.c), backend B =
 *                     auto | uring | pwrite | thread (default auto); dioq
 *                     the same on an O_DIRECT descriptor (AUTO then picks for that)
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <liburing.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "io/bfile.h"
#include "io/ioq.h"
#include "util/diag.h"
#include "zerodetect/zerodetect.h"

#define MAX_ENGINES 32
#define MAX_RUNS 64
#define MAX_DEPTH 64
#define SRC_SIZE (64u << 20)

static size_t chunk = 1 << 20;
static uint64_t total = 2048ull << 20;
static const char *dir = "/tmp";
static bool work_copy;
static bool pretruncate = true;
static bool gate;               /* -q: wait for an idle machine before each run */
static int ungated_runs;
static uint8_t *src;            /* what the producer copies from (-w copy) */
static volatile size_t sink;    /* keeps the zero scan from being optimised out */

struct engine {
    char spec[64];
    char kind[16];
    unsigned depth;
    char flags[16];
    double wall[MAX_RUNS], cpu[MAX_RUNS], sys_cpu[MAX_RUNS], steal[MAX_RUNS];
    bool said;
};

static void die(const char *what, int err)
{
    fprintf(stderr, "ioq_bench: %s: %s\n", what, strerror(err));
    exit(1);
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static double self_cpu(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
           (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1e-6;
}

/* Busy seconds of all CPUs (everything but idle, iowait and steal), and
 * the seconds the hypervisor stole from this VM. */
static double machine_cpu(double *stolen)
{
    unsigned long long v[8] = { 0 };
    FILE *f = fopen("/proc/stat", "r");
    if (f) {
        if (fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2],
                   &v[3], &v[4], &v[5], &v[6], &v[7]) != 8)
            memset(v, 0, sizeof(v));
        fclose(f);
    }
    double hz = (double)sysconf(_SC_CLK_TCK);
    *stolen = (double)v[7] / hz;
    return (double)(v[0] + v[1] + v[2] + v[5] + v[6]) / hz;
}

/* Fraction of the machine's CPU time that was idle over `secs` seconds. */
static double idle_fraction(double secs)
{
    unsigned long long a[8], b[8];
    for (int k = 0; k < 2; k++) {
        unsigned long long *v = k ? b : a;
        FILE *f = fopen("/proc/stat", "r");
        if (!f || fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1],
                         &v[2], &v[3], &v[4], &v[5], &v[6], &v[7]) != 8) {
            if (f)
                fclose(f);
            return 1;
        }
        fclose(f);
        if (!k)
            usleep((useconds_t)(secs * 1e6));
    }
    unsigned long long sum = 0, idle = (b[3] - a[3]) + (b[4] - a[4]);
    for (int i = 0; i < 8; i++)
        sum += b[i] - a[i];
    return sum ? (double)idle / (double)sum : 1;
}

static void wait_idle(void)
{
    for (int i = 0; i < 30; i++)
        if (idle_fraction(1.0) >= 0.9)
            return;
    ungated_runs++;
}

/* What the pipeline does to a chunk before writing it (-w copy). */
static void produce(uint8_t *buf, uint64_t off)
{
    if (!work_copy)
        return;
    memcpy(buf, src + off % (SRC_SIZE - chunk + 1), chunk);
    sink += buffer_is_zero(buf, chunk);
}

static void write_all(int fd, const uint8_t *buf, size_t len, uint64_t off)
{
    while (len) {
        ssize_t n = pwrite(fd, buf, len, (off_t)off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            die("pwrite", n < 0 ? errno : EIO);
        buf += n, len -= (size_t)n, off += (uint64_t)n;
    }
}

static void run_pwrite(int fd, uint8_t **bufs)
{
    for (uint64_t off = 0; off < total; off += chunk) {
        produce(bufs[0], off);
        write_all(fd, bufs[0], chunk, off);
    }
}

/* --- a writer thread fed by a ring of `depth` requests --- */
struct wt {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int fd;
    unsigned depth, head, tail, done;   /* queued = tail-head; done counts reaped */
    uint64_t offs[MAX_DEPTH];
    uint8_t *bufs[MAX_DEPTH];
    bool stop;
};

static void *writer(void *arg)
{
    struct wt *w = arg;
    pthread_mutex_lock(&w->lock);
    for (;;) {
        while (w->head == w->tail && !w->stop)
            pthread_cond_wait(&w->cond, &w->lock);
        if (w->head == w->tail)
            break;
        unsigned i = w->head % w->depth;
        pthread_mutex_unlock(&w->lock);
        write_all(w->fd, w->bufs[i], chunk, w->offs[i]);
        pthread_mutex_lock(&w->lock);
        w->head++;
        pthread_cond_broadcast(&w->cond);
    }
    pthread_mutex_unlock(&w->lock);
    return NULL;
}

static void run_thread(int fd, uint8_t **bufs, unsigned depth)
{
    struct wt w = { .fd = fd, .depth = depth };
    pthread_t t;
    pthread_mutex_init(&w.lock, NULL);
    pthread_cond_init(&w.cond, NULL);
    for (unsigned i = 0; i < depth; i++)
        w.bufs[i] = bufs[i];
    if (pthread_create(&t, NULL, writer, &w))
        die("pthread_create", EAGAIN);
    for (uint64_t off = 0; off < total; off += chunk) {
        pthread_mutex_lock(&w.lock);
        while (w.tail - w.head == depth)
            pthread_cond_wait(&w.cond, &w.lock);
        unsigned i = w.tail % depth;
        pthread_mutex_unlock(&w.lock);
        produce(w.bufs[i], off);
        pthread_mutex_lock(&w.lock);
        w.offs[i] = off;
        w.tail++;
        pthread_cond_broadcast(&w.cond);
        pthread_mutex_unlock(&w.lock);
    }
    pthread_mutex_lock(&w.lock);
    w.stop = true;
    pthread_cond_broadcast(&w.cond);
    pthread_mutex_unlock(&w.lock);
    pthread_join(t, NULL);
    pthread_mutex_destroy(&w.lock);
    pthread_cond_destroy(&w.cond);
}

/* --- raw io_uring --- */
struct ureq {
    unsigned slot;
    size_t done;
    uint64_t off;
};

static void uring_queue(struct io_uring *ring, int fd, uint8_t **bufs, struct ureq *r,
                        bool async, bool fixed)
{
    struct io_uring_sqe *sqe = io_uring_get_sqe(ring);
    if (!sqe)
        die("io_uring_get_sqe", EBUSY);
    if (fixed)
        io_uring_prep_write_fixed(sqe, fd, bufs[r->slot] + r->done,
                                  (unsigned)(chunk - r->done), r->off + r->done, (int)r->slot);
    else
        io_uring_prep_write(sqe, fd, bufs[r->slot] + r->done, (unsigned)(chunk - r->done),
                            r->off + r->done);
    if (async)
        sqe->flags |= IOSQE_ASYNC;
    io_uring_sqe_set_data(sqe, r);
}

static void run_uring(int fd, uint8_t **bufs, unsigned depth, const char *flags)
{
    bool async = strchr(flags, 'a'), fixed = strchr(flags, 'f'), batch = strchr(flags, 'b');
    struct io_uring_params p = { 0 };
    struct io_uring ring;
    struct ureq reqs[MAX_DEPTH];
    unsigned free_slots[MAX_DEPTH], nfree = depth, inflight = 0, unsubmitted = 0;

    if (strchr(flags, 's'))
        p.flags = IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN;
    int e = io_uring_queue_init_params(depth, &ring, &p);
    if (e < 0)
        die("io_uring_queue_init", -e);
    if (fixed) {
        struct iovec iov[MAX_DEPTH];
        for (unsigned i = 0; i < depth; i++)
            iov[i] = (struct iovec){ bufs[i], chunk };
        if ((e = io_uring_register_buffers(&ring, iov, depth)) < 0)
            die("io_uring_register_buffers", -e);
    }
    for (unsigned i = 0; i < depth; i++)
        free_slots[i] = depth - 1 - i;
    uint64_t off = 0;
    while (off < total || inflight) {
        /* fill to the depth */
        while (off < total && nfree) {
            struct ureq *r = &reqs[free_slots[--nfree]];
            r->slot = (unsigned)(r - reqs);
            r->done = 0;
            r->off = off;
            produce(bufs[r->slot], off);
            uring_queue(&ring, fd, bufs, r, async, fixed);
            inflight++;
            off += chunk;
            if (batch)
                unsubmitted++;
            else if ((e = io_uring_submit(&ring)) < 0)
                die("io_uring_submit", -e);
        }
        /* submit what is pending, wait for one, reap the rest */
        struct io_uring_cqe *cqe;
        if (unsubmitted) {
            e = io_uring_submit_and_wait(&ring, 1);
            unsubmitted = 0;
        } else {
            e = io_uring_wait_cqe(&ring, &cqe);
        }
        if (e < 0 && e != -EINTR)
            die("io_uring wait", -e);
        while (io_uring_peek_cqe(&ring, &cqe) == 0) {
            struct ureq *r = io_uring_cqe_get_data(cqe);
            int res = cqe->res;
            io_uring_cqe_seen(&ring, cqe);
            if (res == -EINTR || res == -EAGAIN) {
                uring_queue(&ring, fd, bufs, r, async, fixed);
                io_uring_submit(&ring);
                continue;
            }
            if (res <= 0)
                die("io_uring write", res < 0 ? -res : EIO);
            r->done += (size_t)res;
            if (r->done < chunk) {
                uring_queue(&ring, fd, bufs, r, async, fixed);
                io_uring_submit(&ring);
                continue;
            }
            inflight--;
            free_slots[nfree++] = r->slot;
        }
    }
    io_uring_queue_exit(&ring);
}

/* --- the library's write queue --- */
struct ioq_slot {
    unsigned *free_slots, *nfree, slot;
};

static void ioq_done(void *opaque, int res)
{
    struct ioq_slot *s = opaque;
    if (res < 0)
        die("ioq write", -res);
    s->free_slots[(*s->nfree)++] = s->slot;
}

static void run_ioq(int fd, uint8_t **bufs, unsigned depth, const char *backend, bool direct,
                    bool *said)
{
    struct diag d;
    struct bfile *f;
    struct ioq *q;
    struct ioq_slot slots[MAX_DEPTH];
    unsigned free_slots[MAX_DEPTH], nfree = depth;
    struct ioq_opts o = { .depth = depth, .max_bytes = (size_t)depth * chunk };

    diag_init(&d);
    if (!strcmp(backend, "uring"))
        o.backend = IOQ_URING;
    else if (!strcmp(backend, "pwrite"))
        o.backend = IOQ_PWRITE;
    else if (!strcmp(backend, "thread"))
        o.backend = IOQ_THREAD;
    int dupfd = dup(fd);
    if (dupfd < 0 || bfile_from_fd(&f, dupfd, "bench", true, &d) < 0)
        die("bfile_from_fd", EBADF);
    if (ioq_create(&q, &o, &d) < 0)
        die("ioq_create", EINVAL);
    for (unsigned i = 0; i < depth; i++) {
        free_slots[i] = i;
        slots[i] = (struct ioq_slot){ free_slots, &nfree, i };
    }
    for (uint64_t off = 0; off < total; off += chunk) {
        while (!nfree)
            if (ioq_wait(q) < 0)
                die("ioq_wait", EIO);
        unsigned i = free_slots[--nfree];
        produce(bufs[i], off);
        if (ioq_pwrite(q, f, bufs[i], chunk, off, ioq_done, &slots[i]) < 0)
            die("ioq_pwrite", EIO);
    }
    if (ioq_drain(q) < 0)
        die("ioq_drain", EIO);
    if (!*said) {
        fprintf(stderr, "ioq %s%s runs backend %s %s\n", backend, direct ? " (direct)" : "",
                ioq_backend_name(q), ioq_backend_note(q));
        *said = true;
    }
    ioq_destroy(q);
    bfile_close(f);
}

static bool is_direct(const struct engine *e)
{
    return e->kind[0] == 'd';
}

static void run_once(struct engine *e, uint8_t **bufs, int idx)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/ioq_bench.%d.tmp", dir, (int)getpid());
    unlink(path);
    if (gate)
        wait_idle();
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | (is_direct(e) ? O_DIRECT : 0),
                  0600);
    if (fd < 0)
        die(path, errno);
    if (pretruncate && ftruncate(fd, (off_t)total) < 0)
        die("ftruncate", errno);

    double s0, s1;
    double t0 = now(), c0 = self_cpu(), m0 = machine_cpu(&s0);
    if (!strcmp(e->kind, "pwrite") || !strcmp(e->kind, "dpwrite"))
        run_pwrite(fd, bufs);
    else if (!strcmp(e->kind, "thread"))
        run_thread(fd, bufs, e->depth);
    else if (!strcmp(e->kind, "uring") || !strcmp(e->kind, "during"))
        run_uring(fd, bufs, e->depth, e->flags);
    else
        run_ioq(fd, bufs, e->depth, e->flags[0] ? e->flags : "auto", is_direct(e), &e->said);
    if (close(fd) < 0)
        die("close", errno);
    e->wall[idx] = now() - t0;
    e->cpu[idx] = self_cpu() - c0;
    e->sys_cpu[idx] = machine_cpu(&s1) - m0;
    e->steal[idx] = s1 - s0;

    /* outside the timed part: dropping 2 GiB of dirty pages takes a while */
    unlink(path);
    usleep(200 * 1000);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(const double *v, int n)
{
    double s[MAX_RUNS];
    memcpy(s, v, sizeof(double) * (size_t)n);
    qsort(s, (size_t)n, sizeof(double), cmp_double);
    return n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
}

static int parse_engine(struct engine *e, const char *spec)
{
    char tmp[64];
    snprintf(e->spec, sizeof(e->spec), "%s", spec);
    snprintf(tmp, sizeof(tmp), "%s", spec);
    char *save = NULL, *kind = strtok_r(tmp, ":", &save);
    char *depth = strtok_r(NULL, ":", &save), *flags = strtok_r(NULL, ":", &save);
    static const char *const kinds[] = { "pwrite", "dpwrite", "thread", "uring",
                                         "during", "ioq", "dioq" };
    bool known = false;
    for (size_t i = 0; kind && i < sizeof(kinds) / sizeof(kinds[0]); i++)
        known |= !strcmp(kind, kinds[i]);
    if (!known)
        return -1;
    snprintf(e->kind, sizeof(e->kind), "%s", kind);
    e->depth = depth ? (unsigned)strtoul(depth, NULL, 10) : 1;
    if (e->depth < 1 || e->depth > MAX_DEPTH)
        return -1;
    snprintf(e->flags, sizeof(e->flags), "%s", flags ? flags : "");
    return 0;
}

int main(int argc, char **argv)
{
    struct engine engines[MAX_ENGINES];
    int nengines = 0, runs = 5, opt;

    while ((opt = getopt(argc, argv, "s:c:r:d:w:Tq")) != -1) {
        switch (opt) {
        case 's': total = strtoull(optarg, NULL, 10) << 20; break;
        case 'c': chunk = (size_t)strtoul(optarg, NULL, 10) << 10; break;
        case 'r': runs = atoi(optarg); break;
        case 'd': dir = optarg; break;
        case 'w': work_copy = !strcmp(optarg, "copy"); break;
        case 'T': pretruncate = false; break;
        case 'q': gate = true; break;
        default: goto usage;
        }
    }
    if (runs < 1 || runs > MAX_RUNS || !chunk || chunk % 4096 || !total || total % chunk)
        goto usage;
    for (int i = optind; i < argc && nengines < MAX_ENGINES; i++)
        if (parse_engine(&engines[nengines++], argv[i]) < 0)
            goto usage;
    if (!nengines)
        goto usage;

    uint8_t *bufs[MAX_DEPTH];
    for (int i = 0; i < MAX_DEPTH; i++) {
        if (posix_memalign((void **)&bufs[i], 4096, chunk))
            die("posix_memalign", ENOMEM);
        for (size_t j = 0; j < chunk; j++)
            bufs[i][j] = (uint8_t)(j * 131 + (size_t)i * 7 + 1);
    }
    if (work_copy) {
        if (posix_memalign((void **)&src, 4096, SRC_SIZE))
            die("posix_memalign", ENOMEM);
        for (size_t j = 0; j < SRC_SIZE; j++)
            src[j] = (uint8_t)(j * 167 + 3);
    }

    printf("# %llu MiB in %zu KiB chunks to a new %sfile in %s, producer work: %s, %d runs\n",
           (unsigned long long)(total >> 20), chunk >> 10, pretruncate ? "pre-sized " : "",
           dir, work_copy ? "copy+scan" : "none", runs);
    for (int r = 0; r < runs; r++)
        for (int i = 0; i < nengines; i++)
            run_once(&engines[i], bufs, r);

    printf("%-18s %8s %8s %10s %12s %8s\n", "engine", "wall s", "GiB/s", "proc cpu s",
           "machine cpu s", "steal s");
    for (int i = 0; i < nengines; i++) {
        struct engine *e = &engines[i];
        double w = median(e->wall, runs);
        printf("%-18s %8.3f %8.2f %10.3f %12.3f %8.3f\n", e->spec, w,
               (double)total / (double)(1ull << 30) / w, median(e->cpu, runs),
               median(e->sys_cpu, runs), median(e->steal, runs));
    }
    if (gate)
        printf("# %d of %d runs started without an idle machine\n", ungated_runs,
               runs * nengines);
    return 0;

usage:
    fprintf(stderr, "usage: ioq_bench [-s MIB] [-c KIB] [-r RUNS] [-d DIR] [-w none|copy] "
                    "[-T] [-q] ENGINE...\n(see the comment at the top of bench/ioq_bench.c)\n");
    return 2;
}
