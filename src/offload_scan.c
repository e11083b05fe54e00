/* offload_scan: zero runs of a file range through a read-only mapping of
 * the whole file, guarded against SIGBUS. */
#define _GNU_SOURCE
#include "offload_scan.h"

#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "io/fault.h"
#include "zerodetect/zerodetect.h"

/* Files larger than this are read, not mapped: the mapping must fit the
 * address space beside everything else (47 bits of it on x86-64). */
#define MAP_MAX (UINT64_C(1) << 44)

/* --- the SIGBUS guard ------------------------------------------------------ */

/* Set while this thread scans a mapping: where SIGBUS jumps to. */
static __thread sigjmp_buf *volatile scan_guard;
static struct sigaction bus_prev;
static pthread_once_t bus_once = PTHREAD_ONCE_INIT;
static int bus_err;

static void on_sigbus(int sig, siginfo_t *si, void *ctx)
{
    sigjmp_buf *g = scan_guard;

    if (g) {
        scan_guard = NULL;
        siglongjmp(*g, 1);
    }
    /* not a scan: the handler installed before ours, or the default */
    if ((bus_prev.sa_flags & SA_SIGINFO) && bus_prev.sa_sigaction) {
        bus_prev.sa_sigaction(sig, si, ctx);
        return;
    }
    if (!(bus_prev.sa_flags & SA_SIGINFO) && bus_prev.sa_handler != SIG_DFL &&
        bus_prev.sa_handler != SIG_IGN) {
        bus_prev.sa_handler(sig);
        return;
    }
    /* the default action: a fault repeats once this returns, a sent
     * signal is sent again */
    signal(SIGBUS, SIG_DFL);
    if (si->si_code <= 0)
        raise(SIGBUS);
}

static void install_sigbus(void)
{
    struct sigaction sa;

    memset(&sa, 0, sizeof(sa));
    sa.sa_sigaction = on_sigbus;
    /* SA_NODEFER: SIGBUS stays unblocked in the handler, so leaving it by
     * siglongjmp (which keeps the signal mask) leaves it unblocked too; a
     * later SIGBUS while blocked would kill the process */
    sa.sa_flags = SA_SIGINFO | SA_NODEFER;
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGBUS, &sa, &bus_prev) < 0)
        bus_err = errno;
}

/* zd_scan_runs through the guard: the count, or OFFLOAD_SCAN_GONE after
 * a SIGBUS. */
static ssize_t guarded_scan(const uint8_t *p, size_t len, uint64_t base, size_t granule,
                            size_t min_zero, struct zd_run *runs)
{
    sigjmp_buf jb;

    if (sigsetjmp(jb, 0)) {
        scan_guard = NULL;
        return OFFLOAD_SCAN_GONE;
    }
    scan_guard = &jb;
    size_t n = zd_scan_runs(p, len, base, granule, min_zero, runs);
    scan_guard = NULL;
    return (ssize_t)n;
}

/* --- the mappings ---------------------------------------------------------- */

static long page_size(void)
{
    static long page;

    if (!page && (page = sysconf(_SC_PAGESIZE)) <= 0)
        page = 4096;
    return page;
}

void offload_maps_init(struct offload_maps *maps)
{
    memset(maps, 0, sizeof(*maps));
    pthread_mutex_init(&maps->lock, NULL);
}

void offload_maps_free(struct offload_maps *maps)
{
    for (unsigned i = 0; i < maps->n; i++)
        if (maps->m[i].base)
            munmap((void *)maps->m[i].base, (size_t)maps->m[i].len);
    maps->n = 0;
    pthread_mutex_destroy(&maps->lock);
}

/* The mapping of fd, made on first use; NULL when fd is read instead. */
static const struct offload_map *map_of(struct offload_maps *maps, int fd)
{
    const struct offload_map *found = NULL;

    pthread_mutex_lock(&maps->lock);
    for (unsigned i = 0; i < maps->n && !found; i++)
        if (maps->m[i].fd == fd)
            found = &maps->m[i];
    if (!found && maps->n < OFFLOAD_MAPS_MAX) {
        struct offload_map *m = &maps->m[maps->n++];
        struct stat st;
        m->fd = fd;
        m->base = NULL;
        m->len = 0;
        pthread_once(&bus_once, install_sigbus);
        if (!bus_err && fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0 &&
            (uint64_t)st.st_size <= MAP_MAX) {
            void *p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, fd, 0);
            if (p != MAP_FAILED) {
                m->base = p;
                m->len = (uint64_t)st.st_size;
            }
        }
        found = m;
    }
    pthread_mutex_unlock(&maps->lock);
    return found && found->base ? found : NULL;
}

ssize_t offload_scan_runs(struct offload_maps *maps, int fd, uint64_t off, size_t len,
                          uint64_t base, size_t granule, size_t min_zero,
                          struct zd_run *runs)
{
    size_t want = len;
    struct stat st;
    int inj;

    if (len == 0)
        return 0;
    if (min_zero == 0) {
        /* no zero runs wanted: nothing to look at */
        return (ssize_t)zd_scan_runs(NULL, len, base, granule, 0, runs);
    }
    const struct offload_map *m = map_of(maps, fd);
    /* inside the mapping, and inside the file as it is now: a file that
     * shrank is found by the read the caller does instead */
    if (!m || off > m->len || len > m->len - off || fstat(fd, &st) < 0 ||
        (uint64_t)st.st_size < off + len)
        return OFFLOAD_SCAN_READ;
    /* after the size check: an injected delay lets a test shrink the file
     * under the scan itself (the SIGBUS path) */
    while ((inj = fault_inject(FAULT_READ, &want)) == -EINTR || inj == -EAGAIN)
        want = len;
    if (inj < 0)
        return inj;
    ssize_t n = guarded_scan(m->base + off, len, base, granule, min_zero, runs);
    /* the range's page-table entries go now, in this worker, while the
     * writer works, not all at once in the final munmap; and the process's
     * resident set holds only the ranges being scanned, not every byte of
     * the source it has looked at */
    uint64_t a = off - off % (uint64_t)page_size();
    madvise((void *)(m->base + a), (size_t)(off + len - a), MADV_DONTNEED);
    return n;
}

/* --- the sampled scan ------------------------------------------------------ */

/* pread all of len bytes: 0, OFFLOAD_SCAN_GONE at a short read (the file
 * shrank), or -errno; counted by the fault injector. */
static int read_exact(int fd, uint8_t *p, size_t len, uint64_t off)
{
    while (len) {
        size_t want = len;
        int inj = fault_inject(FAULT_READ, &want);
        if (inj == -EINTR || inj == -EAGAIN)
            continue;
        if (inj < 0)
            return inj;
        ssize_t n = pread(fd, p, want, (off_t)off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -errno;
        if (n == 0)
            return (int)OFFLOAD_SCAN_GONE;
        p += n;
        off += (uint64_t)n;
        len -= (size_t)n;
    }
    return 0;
}

/* Is the sample at off all zeros?  1 yes, 0 no (or the file ends there:
 * only for the sample past the range), or read_exact's answer. */
static int sample_zero(int fd, uint64_t off, size_t max, bool past_end)
{
    uint8_t s[OFFLOAD_SAMPLE_BYTES];
    size_t want = max < sizeof(s) ? max : sizeof(s);

    if (past_end) {
        ssize_t n;
        while ((n = pread(fd, s, want, (off_t)off)) < 0 && errno == EINTR)
            ;
        if (n <= 0)
            return 0;
        want = (size_t)n;
    } else {
        int r = read_exact(fd, s, want, off);
        if (r < 0)
            return r;
    }
    return buffer_is_zero(s, want);
}

/* Append runs [rp, rp+n) after runs[0..*count): the first merged into the
 * last when both are of one kind. */
static void append_runs(struct zd_run *runs, size_t *count, const struct zd_run *rp, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (*count && runs[*count - 1].zero == rp[i].zero &&
            runs[*count - 1].off + runs[*count - 1].len == rp[i].off) {
            runs[*count - 1].len += rp[i].len;
            continue;
        }
        runs[(*count)++] = rp[i];
    }
}

/* Zero runs shorter than min_zero become data, merged with the runs around. */
static size_t drop_short_zeros(struct zd_run *runs, size_t n, size_t min_zero)
{
    size_t count = 0;

    for (size_t i = 0; i < n; i++) {
        struct zd_run r = runs[i];
        if (r.zero && r.len < min_zero)
            r.zero = false;
        append_runs(runs, &count, &r, 1);
    }
    return count;
}

/* The whole block [off, off+len) of fd scanned for zero granules into
 * runs: through m when there is one (0 or OFFLOAD_SCAN_GONE), else read
 * into buf.  The count, or a negative answer. */
static ssize_t scan_block(const struct offload_map *m, int fd, uint64_t off, size_t len,
                          uint64_t base, size_t granule, uint8_t *buf, struct zd_run *runs)
{
    struct stat st;

    /* min_zero 1: every zero granule; short runs are dropped at the end,
     * once runs that cross blocks are whole */
    if (m && off <= m->len && len <= m->len - off && fstat(fd, &st) == 0 &&
        (uint64_t)st.st_size >= off + len)
        return guarded_scan(m->base + off, len, base, granule, 1, runs);
    int r = read_exact(fd, buf, len, off);
    if (r < 0)
        return r;
    return (ssize_t)zd_scan_runs(buf, len, base, granule, 1, runs);
}

/* Without a mapping a block is read into buf together with the next
 * block's sample, which saves that sample its own pread (about 2 µs each
 * on btrfs here).  Reading several zero blocks at once measured slower
 * (btrfs raw -> raw, 15 pairs: 1.07x `qemu-img -C` one block at a time,
 * 1.36x four, 1.87x sixteen): each read touches more of the job's buffer,
 * whose pages are faulted in on first use. */

/* buf holds bytes [w->b, w->e) of the range (offsets into it) */
struct window {
    size_t b, e;
};

static bool in_window(const struct window *w, size_t a, size_t e)
{
    return a >= w->b && e <= w->e;
}

/* Read the block [b, nb) of the range into buf, with the sample after it
 * where that fits. */
static int fill_window(struct window *w, int fd, uint64_t off, size_t len, size_t b, size_t nb,
                       uint8_t *buf, size_t buf_len)
{
    size_t e = nb;

    if (nb - b > buf_len)
        return -EINVAL;     /* buf must hold a block */
    if (e < len) {
        size_t se = len - e > OFFLOAD_SAMPLE_BYTES ? e + OFFLOAD_SAMPLE_BYTES : len;
        if (se - b <= buf_len)
            e = se;
    }
    w->b = w->e = 0;
    int r = read_exact(fd, buf, e - b, off + b);
    if (r < 0)
        return r;
    w->b = b;
    w->e = e;
    return 0;
}

ssize_t offload_sample_runs(struct offload_maps *maps, int fd, uint64_t off, size_t len,
                            uint64_t base, size_t granule, size_t min_zero, uint8_t *buf,
                            size_t buf_len, struct zd_run *runs)
{
    /* mapped only when asked (the mapping is made on first use) */
    const struct offload_map *m = maps && maps->sample_mapped ? map_of(maps, fd) : NULL;
    bool mapped = false;

    ssize_t err = 0;
    const uint64_t B = granule > OFFLOAD_SAMPLE_BLOCK ? granule : OFFLOAD_SAMPLE_BLOCK;
    size_t count = 0;
    struct window w = { 0, 0 };

    if (len == 0)
        return 0;
    if (min_zero == 0 || granule == 0)
        return (ssize_t)zd_scan_runs(NULL, len, base, granule, 0, runs);
    /* the current block is [b, nb); its sample and the next block's */
    size_t b = 0, nb = (size_t)(B - base % B);
    if (nb > len)
        nb = len;
    int zero_cur = sample_zero(fd, off, nb, false);
    if (zero_cur < 0)
        return zero_cur;
    while (b < len) {
        size_t ne = len - nb > B ? nb + (size_t)B : len;
        if (!m && zero_cur) {
            /* this block is read whole: the next sample with it */
            int r = fill_window(&w, fd, off, len, b, nb, buf, buf_len);
            if (r < 0) {
                err = r;
                break;
            }
        }
        int zero_next;
        size_t sl = nb < len && ne - nb < OFFLOAD_SAMPLE_BYTES ? ne - nb : OFFLOAD_SAMPLE_BYTES;
        if (!m && nb < len && in_window(&w, nb, nb + sl))
            zero_next = buffer_is_zero(buf + (nb - w.b), sl);
        else
            zero_next = nb < len ? sample_zero(fd, off + nb, ne - nb, false)
                                 : sample_zero(fd, off + len, (size_t)B, true);
        if (zero_next < 0) {
            err = zero_next;
            break;
        }
        if (zero_cur || zero_next) {
            struct zd_run *tail = runs + count;
            ssize_t n;
            if (m) {
                n = scan_block(m, fd, off + b, nb - b, base + b, granule, buf, tail);
                mapped = true;
            } else {
                if (!in_window(&w, b, nb)) {
                    /* data whose next block may start with zeros */
                    int r = fill_window(&w, fd, off, len, b, nb, buf, buf_len);
                    if (r < 0) {
                        err = r;
                        break;
                    }
                }
                /* min_zero 1: every zero granule; short runs are dropped
                 * at the end, once runs that cross blocks are whole */
                n = (ssize_t)zd_scan_runs(buf + (b - w.b), nb - b, base + b, granule, 1, tail);
            }
            if (n < 0) {
                err = n;
                break;
            }
            /* appended in place: entry i is copied before anything is
             * written at or past it */
            for (size_t i = 0; i < (size_t)n; i++) {
                struct zd_run one = tail[i];
                one.off += (uint32_t)b;
                append_runs(runs, &count, &one, 1);
            }
        } else {
            struct zd_run d = { (uint32_t)b, (uint32_t)(nb - b), false };
            append_runs(runs, &count, &d, 1);
        }
        b = nb;
        nb = ne;
        zero_cur = zero_next;
    }
    if (mapped && off < m->len) {
        /* as in offload_scan_runs: the page-table entries go now, of the
         * mapping only (blocks past it, of a file that grew or shrank,
         * were read: whatever lies after the mapping is not ours) */
        uint64_t a = off - off % (uint64_t)page_size();
        uint64_t e = off + len < m->len ? off + len : m->len;
        madvise((void *)(m->base + a), (size_t)(e - a), MADV_DONTNEED);
    }
    return err ? err : (ssize_t)drop_short_zeros(runs, count, min_zero);
}
