#include "convert.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "formats/bd.h"
#include "io/bfile.h"
#include "io/ioq.h"
#include "io/offload.h"
#include "offload_scan.h"
#include "util/diag.h"
#include "util/hugebuf.h"
#include "zerodetect/zerodetect.h"

#define CHUNK_MIN       (1u << 20)     /* data is read in chunks of 1 MiB... */
/* ...or of 4 MiB when copy offload goes into a raw output: fewer jobs, each
 * with a sample pread less at both ends and one hand-off less (btrfs raw ->
 * raw, alternated: 0.92 of 1 MiB jobs' wall time, XFS 0.89, ext4 0.94; 2 and
 * 8 MiB measured worse than 4).  Not into qcow2, where 4 MiB jobs took
 * twice as long. */
#define CHUNK_OFFLOAD_RAW (4u << 20)
#define BUFFER_BUDGET   (32u << 20)    /* ...and all chunk buffers stay under this */

enum job_state { J_FREE, J_QUEUED, J_BUSY, J_READY, J_WRITING };
/* RUN_OFFLOAD: data the kernel places into the output (copy offload) */
enum run_kind { RUN_DATA, RUN_ZERO, RUN_SKIP, RUN_OFFLOAD };

struct run {
    uint32_t off, len;
    uint8_t kind;
};

struct job {
    enum job_state state;
    bool gap;                  /* zero range known from metadata: no buffer */
    uint64_t off, len;         /* virtual range */
    int err;
    uint8_t *buf;              /* chunk bytes (data jobs) */
    uint8_t *bbuf;             /* the output backing file's bytes (-B) */
    struct run *runs;
    size_t nruns;
    struct zd_run *zruns;      /* scratch for the scanner */
    uint8_t *cbuf;             /* compressed granules (-c) */
    uint32_t *clen;            /* per granule of the job: 0 = store plain */
    uint32_t *coff;
    /* copy offload: the job's bytes are bytes [src_host, +len) of src_file */
    bool offload;
    bool filled;               /* buf holds the job's bytes (else only the
                                  RUN_DATA runs' bytes are there) */
    const struct bfile *src_file;
    uint64_t src_host;
    struct run *oruns;         /* scratch: runs split for offload */
    unsigned pending;          /* writes not yet completed (+1 while submitting) */
    struct job *next;          /* free list / work queue link */
    struct cv *cv;
};

struct cv {
    const struct convert_opts *o;
    struct diag *d;
    struct convert_stats *st;
    uint64_t total;
    size_t chunk;
    uint32_t granule;          /* output allocation unit */
    uint32_t scan_granule;     /* unit of zero detection */

    pthread_mutex_t lock;
    pthread_cond_t work_cond;  /* workers: a job was queued, or stop */
    pthread_cond_t ready_cond; /* main: a job became ready */
    struct job *slots;
    unsigned nslots;
    uint8_t *bufs;             /* the slots' chunk buffers, one block (hugebuf) */
    struct job *free_list;
    struct job *work_head, *work_tail;
    struct job **order;        /* jobs in virtual order, not yet written */
    unsigned order_head, order_count;
    bool stop;
    int err;

    /* planner */
    uint64_t plan_pos;
    uint64_t cache_start, cache_end;   /* cached block status [start, end) */
    unsigned cache_flags;
    const struct bfile *cache_file;  /* the file holding the cached extent's
                                  bytes (a regular file, plainly), or NULL */
    uint64_t cache_host;       /* ... where cache_start's byte is in it */
    uint64_t cache_fsize;      /* ... and that file's size */

    /* copy offload */
    bool offload;              /* on for this run */
    bool offload_pread;        /* scan by reading into the buffer (no mmap) */
    bool offload_scan_all;     /* scan all data through the mapping, not samples */
    bool offload_sample_read;  /* read the blocks samples pick (no mapping) */
    struct offload_maps maps;  /* the sources mapped for the scan */
    bool map_refused;          /* the output's map_for_offload said no */
    struct offload ofl;
    uint32_t ofl_unit;         /* pieces offloaded: multiples of this */
    /* an output with BD_CAP_OFFLOAD_LATE (raw): adjacent offload ranges,
     * across runs and jobs, gathered into one call (len 0: none) */
    struct {
        const struct bfile *src;
        struct bfile *out;
        uint64_t src_off, out_off, len;
    } pend;
    uint8_t *bounce;           /* what the kernel refuses of them, copied */

    bool size_unknown;         /* a raw stream: the size is found at EOF */
    uint64_t *src_start;       /* where each source starts (source_start) */

    uint64_t done;
    uint8_t *zero_chunk;       /* zeros for fully allocated output (-S 0) */
    /* -S 0 with -c: a granule of zeros compressed once (and the image's
     * short last granule), made when first needed; len 0 = stored plain */
    uint8_t *zero_cgran, *zero_ctail;
    size_t zero_cgran_len, zero_ctail_len;
    pthread_t *threads;
    unsigned nthreads;
};

/* Where source i starts in the virtual disk: each source after the first
 * starts on a 512-byte sector boundary (as qemu-img lays them out, which
 * sees every image in whole sectors), the bytes between a source that ends
 * inside a sector and the next one reading as zeros.  UINT64_MAX when the
 * sum does not fit. */
static uint64_t source_start(struct bd **src, size_t i)
{
    uint64_t t = 0;

    for (size_t k = 0; k < i; k++) {
        uint64_t sz = src[k]->size;
        if (sz > UINT64_MAX - 511 || sz + (-sz & 511) > UINT64_MAX - t)
            return UINT64_MAX;
        t += sz + (-sz & 511);
    }
    return t;
}

uint64_t convert_total_size(struct bd **src, size_t nsrc)
{
    if (nsrc == 0)
        return 0;
    uint64_t start = source_start(src, nsrc - 1), last = src[nsrc - 1]->size;
    if (start == UINT64_MAX || last > UINT64_MAX - start)
        return UINT64_MAX;
    return start + last;
}

static uint64_t align_down(uint64_t v, uint64_t a) { return v - v % a; }
static uint64_t align_up(uint64_t v, uint64_t a) { return v % a ? v + (a - v % a) : v; }
static uint64_t min_u64(uint64_t a, uint64_t b) { return a < b ? a : b; }

static int set_error(struct cv *cv, int err)
{
    pthread_mutex_lock(&cv->lock);
    if (!cv->err)
        cv->err = err ? err : -EIO;
    cv->stop = true;
    pthread_cond_broadcast(&cv->work_cond);
    pthread_mutex_unlock(&cv->lock);
    return err;
}

/* --- sources as one virtual disk ---------------------------------------- */

/* The source that holds virtual offset `pos`: its index, or nsrc when pos
 * lies in the zero padding after source *i's end (then *i is that source);
 * *start is where it starts.  pos < cv->total. */
static size_t source_at(const struct cv *cv, uint64_t pos, size_t *i, uint64_t *start)
{
    size_t k = 0;

    while (k + 1 < cv->o->nsrc && pos >= cv->src_start[k + 1])
        k++;
    *i = k;
    *start = cv->src_start[k];
    return pos - *start < cv->o->src[k]->size ? k : cv->o->nsrc;
}

/* Block status of the sources laid end to end at `pos`: flags of the extent
 * and its end (clipped to the source it lies in). */
/* For copy offload: the file and offset that hold an extent's bytes as
 * they are (stored plainly in a regular file), else cache_file = NULL. */
static void cache_host_file(struct cv *cv, const struct bd_extent *e)
{
    const struct bfile *f = e->host_file ? e->host_file : e->host ? e->host->file : NULL;

    cv->cache_file = NULL;
    if (!cv->offload || (e->flags & (BD_ZERO | BD_COMPRESSED)) || !(e->flags & BD_DATA) ||
        e->host_offset < 0 || !f || f->kind != BFILE_REGULAR || f->fd < 0)
        return;
    cv->cache_file = f;
    cv->cache_host = (uint64_t)e->host_offset;
    cv->cache_fsize = f->size;
}

static int source_status(struct cv *cv, uint64_t pos, unsigned *flags, uint64_t *end)
{
    uint64_t start;
    size_t i;

    if (pos >= cv->cache_start && pos < cv->cache_end) {
        *flags = cv->cache_flags;
        *end = cv->cache_end;
        return 0;
    }
    if (pos >= cv->total)
        return diag_fail(cv->d, -EINVAL, NULL, (int64_t)pos,
                         "internal error: offset past the sources");
    if (source_at(cv, pos, &i, &start) == cv->o->nsrc) {
        /* the padding up to the next source's first sector */
        cv->cache_start = pos;
        cv->cache_end = cv->src_start[i + 1];
        cv->cache_flags = BD_ZERO;
        cv->cache_file = NULL;
    } else {
        struct bd *s = cv->o->src[i];
        struct bd_extent e;
        int r = bd_block_status(s, pos - start, s->size - (pos - start), &e);
        if (r < 0)
            return r;
        cv->cache_start = pos;
        cv->cache_end = pos + e.len;
        /* preallocated zeros (DATA|ZERO) read as zeros: no need to read */
        cv->cache_flags = (e.flags & BD_ZERO) ? BD_ZERO : BD_DATA;
        cache_host_file(cv, &e);
    }
    *flags = cv->cache_flags;
    *end = cv->cache_end;
    return 0;
}

static int source_read(struct cv *cv, uint8_t *buf, uint64_t off, uint64_t len)
{
    while (len) {
        uint64_t start, n;
        size_t i;
        if (source_at(cv, off, &i, &start) == cv->o->nsrc) {
            n = min_u64(len, cv->src_start[i + 1] - off);
            memset(buf, 0, (size_t)n);
        } else {
            struct bd *s = cv->o->src[i];
            n = min_u64(len, start + s->size - off);
            int r = bd_pread(s, buf, (size_t)n, off - start);
            if (r < 0)
                return r;
        }
        buf += n;
        off += n;
        len -= n;
    }
    return 0;
}

/* --- planning ------------------------------------------------------------ */

/* May data job j go by copy offload?  When it lies in one extent whose
 * bytes sit plainly in a file, inside that file, at the same offset modulo
 * the file system block as in the output, and does not end in the image's
 * short last scan unit (the scan pads that in the buffer). */
static void plan_offload(struct cv *cv, struct job *j)
{
    uint64_t end = j->off + j->len;

    j->offload = false;
    if (!cv->offload || !offload_usable(&cv->ofl) || cv->map_refused || !cv->cache_file ||
        j->off < cv->cache_start || end > cv->cache_end ||
        (end == cv->total && end % cv->scan_granule))
        return;
    if (!offload_usable_from(&cv->ofl, cv->cache_file->fd))
        return;
    uint64_t h = cv->cache_host + (j->off - cv->cache_start);
    if (h > cv->cache_fsize || j->len > cv->cache_fsize - h ||
        (h - j->off) % cv->ofl.blksize)
        return;
    j->offload = true;
    j->src_file = cv->cache_file;
    j->src_host = h;
}

/* Fill `j` with the next range: a zero gap, or a data range of at most one
 * chunk that does not cross a chunk boundary.  Ranges start and end on the
 * output granule (except at the end), so the output never sees a write
 * that covers part of a cluster. */
static int plan_next(struct cv *cv, struct job *j)
{
    uint64_t pos = cv->plan_pos, end;
    unsigned flags;
    int r;

    j->off = pos;
    j->err = 0;
    j->nruns = 0;
    if (cv->size_unknown) {
        /* a stream: whole chunks until the read comes up short */
        j->gap = false;
        j->len = cv->chunk;
        cv->plan_pos = pos + cv->chunk;
        return 0;
    }
    if ((r = source_status(cv, pos, &flags, &end)) < 0) {
        if (!cv->o->salvage)
            return r;
        /* unknown allocation: read it, the reads will say what is there;
         * up to the end of the source's allocation unit (a cluster), so
         * that an unreadable cluster is one range of zeros, one warning */
        diag_clear(cv->o->src_diag);
        flags = BD_DATA;
        end = pos + cv->granule;
        size_t i;
        uint64_t start;
        if (source_at(cv, pos, &i, &start) < cv->o->nsrc) {
            uint64_t g = cv->o->src[i]->granule;
            if (g > cv->granule && g % cv->granule == 0 && (pos - start) % cv->granule == 0)
                end = pos + (g - (pos - start) % g);
        }
    }
    if (flags & BD_ZERO) {
        /* extend over following zero extents (cheap: no buffer involved) */
        while (end < cv->total && end - pos < (1ULL << 40)) {
            uint64_t e2;
            unsigned f2;
            if ((r = source_status(cv, end, &f2, &e2)) < 0) {
                if (!cv->o->salvage)
                    return r;
                /* the next job meets the failure again and salvages it */
                diag_clear(cv->o->src_diag);
                break;
            }
            if (!(f2 & BD_ZERO))
                break;
            end = e2;
        }
        uint64_t zend = end >= cv->total ? cv->total : align_down(end, cv->granule);
        if (zend > pos) {
            j->gap = true;
            j->len = zend - pos;
            cv->plan_pos = zend;
            return 0;
        }
        /* a zero extent shorter than a granule: read it with its data */
        end = pos + 1;
    }
    uint64_t cend = min_u64(align_down(pos, cv->chunk) + cv->chunk, cv->total);
    end = min_u64(align_up(min_u64(end, cend), cv->granule), cend);
    j->gap = false;
    j->len = end - pos;
    cv->plan_pos = end;
    plan_offload(cv, j);
    return 0;
}

/* --- worker side: read, scan, compress ----------------------------------- */

static bool granule_equal(const uint8_t *a, const uint8_t *b, size_t n)
{
    return memcmp(a, b, n) == 0;
}

/* The job's runs from the scanner's n runs, clipped to the job. */
static void runs_from_scan(struct job *j, size_t n)
{
    size_t len = (size_t)j->len;

    j->nruns = 0;
    for (size_t i = 0; i < n && j->zruns[i].off < len; i++) {
        uint32_t rl = j->zruns[i].len;
        if (j->zruns[i].off + rl > len)
            rl = (uint32_t)(len - j->zruns[i].off);
        j->runs[j->nruns++] = (struct run){ j->zruns[i].off, rl,
                                            j->zruns[i].zero ? RUN_ZERO : RUN_DATA };
    }
}

/* Runs of one data job: from zero detection, or (-B) by comparing each
 * output granule with the output's backing file. */
static void make_runs(struct cv *cv, struct job *j)
{
    const struct convert_opts *o = cv->o;
    size_t len = (size_t)j->len;

    if (!o->out_backing) {
        /* The image's last granule may be cut short by its end; pad it with
         * zeros so that a zero tail counts as a whole granule (its block
         * can still be freed), then clip the runs to the real length.
         * Only the image end can be unaligned: jobs start and stop on
         * granule boundaries everywhere else. */
        size_t scan_len = len;
        uint64_t end = j->off + len;
        if (end == cv->total && end % cv->scan_granule) {
            scan_len = (size_t)(align_up(end, cv->scan_granule) - j->off);
            memset(j->buf + len, 0, scan_len - len);
        }
        size_t n = zd_scan_runs(j->buf, scan_len, j->off, cv->scan_granule,
                                (size_t)o->sparse_size, j->zruns);
        runs_from_scan(j, n);
        return;
    }
    /* over a backing file: per granule, skip what the backing already says */
    j->nruns = 0;
    for (size_t pos = 0; pos < len;) {
        size_t g = cv->granule - (size_t)((j->off + pos) % cv->granule);
        if (g > len - pos)
            g = len - pos;
        bool zero = o->sparse_size && buffer_is_zero(j->buf + pos, g);
        uint8_t kind;
        if (granule_equal(j->buf + pos, j->bbuf + pos, g))
            kind = RUN_SKIP;
        else
            kind = zero ? RUN_ZERO : RUN_DATA;
        if (j->nruns && j->runs[j->nruns - 1].kind == kind)
            j->runs[j->nruns - 1].len += (uint32_t)g;
        else
            j->runs[j->nruns++] = (struct run){ (uint32_t)pos, (uint32_t)g, kind };
        pos += g;
    }
}

static int read_backing(struct cv *cv, struct job *j)
{
    struct bd *b = cv->o->out_backing;
    uint64_t n = 0;

    if (j->off < b->size) {
        n = min_u64(j->len, b->size - j->off);
        int r = bd_pread(b, j->bbuf, (size_t)n, j->off);
        if (r < 0)
            return r;
    }
    memset(j->bbuf + n, 0, (size_t)(j->len - n));
    return 0;
}

static int compress_job(struct cv *cv, struct job *j)
{
    struct bd *out = cv->o->out;
    size_t used = 0;

    for (size_t r = 0; r < j->nruns; r++) {
        const struct run *run = &j->runs[r];
        if (run->kind != RUN_DATA)
            continue;
        for (uint32_t p = run->off; p < run->off + run->len;) {
            uint32_t g = cv->granule - (uint32_t)((j->off + p) % cv->granule);
            if (g > run->off + run->len - p)
                g = run->off + run->len - p;
            size_t gi = p / cv->granule;
            ssize_t c = out->drv->compress(out, j->buf + p, g, j->cbuf + used,
                                           cv->chunk - used);
            if (c < 0)
                return (int)c;
            j->coff[gi] = (uint32_t)used;
            j->clen[gi] = (uint32_t)c;
            used += (size_t)c;
            p += g;
        }
    }
    return 0;
}

/* A raw stream of unknown size: read a chunk; a short read is the end
 * (sequential mode: only this thread plans and reads). */
static int stream_read_job(struct cv *cv, struct job *j)
{
    size_t got;
    int r = bfile_pread_upto(cv->o->src[0]->file, j->buf, (size_t)j->len, j->off, &got);

    if (r < 0)
        return r;
    if (got < j->len) {
        j->len = got;
        cv->total = j->off + got;
        cv->plan_pos = cv->total;
        cv->st->total = cv->total;
    }
    return 0;
}

/* --salvage: read what can be read, in 4 KiB pieces and then sectors, and
 * turn what cannot into zeros with a warning per unreadable range. */
static int salvage_job(struct cv *cv, struct job *j)
{
    struct diag *sd = cv->o->src_diag;
    uint64_t bad_start = 0, bad_len = 0;
    char why[512] = "", file[1024] = "";

    for (uint64_t p = 0; p < j->len;) {
        uint64_t piece = min_u64(4096 - (j->off + p) % 4096, j->len - p);
        if (source_read(cv, j->buf + p, j->off + p, piece) == 0) {
            p += piece;
            continue;
        }
        for (uint64_t q = p; q < p + piece;) {
            uint64_t sec = min_u64(512 - (j->off + q) % 512, p + piece - q);
            if (source_read(cv, j->buf + q, j->off + q, sec) < 0) {
                memset(j->buf + q, 0, (size_t)sec);
                if (bad_len && bad_start + bad_len == j->off + q) {
                    bad_len += sec;
                } else {
                    if (bad_len)
                        diag_warn(cv->d, file, (int64_t)bad_start,
                                  "%llu bytes could not be read (%s); written as zeros",
                                  (unsigned long long)bad_len, why);
                    bad_start = j->off + q;
                    bad_len = sec;
                    pthread_mutex_lock(&sd->lock);
                    snprintf(why, sizeof(why), "%.500s", sd->what);
                    snprintf(file, sizeof(file), "%s", sd->file);
                    pthread_mutex_unlock(&sd->lock);
                }
                diag_clear(sd);
                pthread_mutex_lock(&cv->lock);
                cv->st->salvaged += sec;
                pthread_mutex_unlock(&cv->lock);
            }
            q += sec;
        }
        p += piece;
    }
    if (bad_len)
        diag_warn(cv->d, file, (int64_t)bad_start,
                  "%llu bytes could not be read (%s); written as zeros",
                  (unsigned long long)bad_len, why);
    return 0;
}

/* An offload job's data runs: the whole units (file system block, output
 * granule) become RUN_OFFLOAD, the pieces before and after them stay
 * RUN_DATA and are read into the buffer (unless it holds the job already). */
static int split_offload(struct cv *cv, struct job *j)
{
    size_t n = 0;

    for (size_t i = 0; i < j->nruns; i++) {
        struct run r = j->runs[i];
        uint64_t a = j->off + r.off, b = a + r.len;
        uint64_t a2 = align_up(a, cv->ofl_unit), b2 = align_down(b, cv->ofl_unit);
        if (r.kind != RUN_DATA || a2 >= b2) {
            j->oruns[n++] = r;
            continue;
        }
        if (a2 > a)
            j->oruns[n++] = (struct run){ r.off, (uint32_t)(a2 - a), RUN_DATA };
        j->oruns[n++] = (struct run){ (uint32_t)(a2 - j->off), (uint32_t)(b2 - a2), RUN_OFFLOAD };
        if (b > b2)
            j->oruns[n++] = (struct run){ (uint32_t)(b2 - j->off), (uint32_t)(b - b2), RUN_DATA };
    }
    struct run *t = j->runs;
    j->runs = j->oruns;
    j->oruns = t;
    j->nruns = n;
    for (size_t i = 0; i < n && !j->filled; i++) {
        const struct run *r = &j->runs[i];
        if (r->kind != RUN_DATA)
            continue;
        int e = source_read(cv, j->buf + r->off, j->off + r->off, r->len);
        if (e < 0)
            return e;
    }
    return 0;
}

/* A copy offload job: zero runs found through a mapping of the source
 * (offload_scan.h), or by reading it where it cannot be mapped (or with
 * DISKIMG_OFFLOAD=pread); data runs left to the kernel. */
static int offload_job(struct cv *cv, struct job *j)
{
    size_t min_zero = (size_t)cv->o->sparse_size;
    int r;

    if (!cv->offload_pread) {
        j->filled = false;
        ssize_t n = cv->offload_scan_all
            ? offload_scan_runs(&cv->maps, j->src_file->fd, j->src_host, (size_t)j->len,
                                j->off, cv->scan_granule, min_zero, j->zruns)
            : offload_sample_runs(cv->offload_sample_read ? NULL : &cv->maps, j->src_file->fd,
                                  j->src_host, (size_t)j->len, j->off, cv->scan_granule,
                                  min_zero, j->buf, cv->chunk, j->zruns);
        if (n == OFFLOAD_SCAN_GONE)
            return diag_fail(cv->d, -EIO, j->src_file->path, (int64_t)j->src_host,
                             "read failed: the file shrank, or could not be read, "
                             "while it was converted");
        if (n < 0 && n != OFFLOAD_SCAN_READ)
            return diag_errno(cv->d, (int)n, j->src_file->path, (int64_t)j->src_host,
                              "read failed");
        if (n >= 0) {
            runs_from_scan(j, (size_t)n);
            return split_offload(cv, j);
        }
    }
    if ((r = source_read(cv, j->buf, j->off, j->len)) < 0)
        return r;
    j->filled = true;
    make_runs(cv, j);
    return split_offload(cv, j);
}

static int process_job(struct cv *cv, struct job *j)
{
    if (j->offload)
        return offload_job(cv, j);

    int r = cv->size_unknown ? stream_read_job(cv, j) : source_read(cv, j->buf, j->off, j->len);

    j->filled = true;
    if (r < 0 && cv->o->salvage && !cv->size_unknown) {
        diag_clear(cv->o->src_diag);
        r = salvage_job(cv, j);
    }
    if (r == 0 && cv->o->out_backing)
        r = read_backing(cv, j);
    if (r < 0)
        return r;
    make_runs(cv, j);
    if (cv->o->compress && cv->o->out->drv->compress)
        r = compress_job(cv, j);
    return r;
}

static void *worker_main(void *arg)
{
    struct cv *cv = arg;

    pthread_mutex_lock(&cv->lock);
    for (;;) {
        while (!cv->work_head && !cv->stop)
            pthread_cond_wait(&cv->work_cond, &cv->lock);
        if (cv->stop && !cv->work_head)
            break;
        struct job *j = cv->work_head;
        cv->work_head = j->next;
        if (!cv->work_head)
            cv->work_tail = NULL;
        j->state = J_BUSY;
        bool skip = cv->stop;
        pthread_mutex_unlock(&cv->lock);

        int r = skip ? -ECANCELED : process_job(cv, j);

        pthread_mutex_lock(&cv->lock);
        j->err = r;
        j->state = J_READY;
        if (r < 0 && !cv->err && r != -ECANCELED) {
            cv->err = r;
            cv->stop = true;
            pthread_cond_broadcast(&cv->work_cond);
        }
        pthread_cond_broadcast(&cv->ready_cond);
    }
    pthread_mutex_unlock(&cv->lock);
    return NULL;
}

/* --- writer side ---------------------------------------------------------- */

static void release_job(struct cv *cv, struct job *j)
{
    cv->done += j->len;
    if (cv->o->progress)
        cv->o->progress(cv->o->progress_opaque, cv->done,
                        cv->size_unknown && cv->plan_pos < cv->total ? 0 : cv->total);
    pthread_mutex_lock(&cv->lock);
    j->state = J_FREE;
    j->next = cv->free_list;
    cv->free_list = j;
    pthread_mutex_unlock(&cv->lock);
}

static void write_done(void *opaque, int res)
{
    struct job *j = opaque;
    struct cv *cv = j->cv;

    if (res < 0 && !j->err)
        j->err = res;
    if (res < 0)
        set_error(cv, res);
    if (--j->pending == 0)
        release_job(cv, j);
}

/* The compressed form of n zero bytes (a whole granule, or the image's
 * short last one): *clen 0 when it does not shrink. */
static int zero_compressed(struct cv *cv, size_t n, const uint8_t **c, size_t *clen)
{
    struct bd *out = cv->o->out;
    bool whole = n == cv->granule;
    uint8_t **buf = whole ? &cv->zero_cgran : &cv->zero_ctail;
    size_t *len = whole ? &cv->zero_cgran_len : &cv->zero_ctail_len;

    if (!*buf) {
        if (!(*buf = malloc(cv->granule)))
            return diag_fail(cv->d, -ENOMEM, NULL, -1, "out of memory");
        ssize_t r = out->drv->compress(out, cv->zero_chunk, n, *buf, cv->granule);
        if (r < 0)
            return diag_errno(cv->d, (int)r, NULL, -1, "cannot compress");
        *len = (size_t)r;
    }
    *c = *buf;
    *clen = *len;
    return 0;
}

/* Zeros written out (-S 0): plain, or with -c as compressed granules (as
 * qemu-img does; a compressed cluster of zeros takes a few bytes). */
static int write_zero_fill(struct cv *cv, struct job *j, uint64_t off, uint64_t len)
{
    struct bd *out = cv->o->out;
    bool compress = cv->o->compress && out->drv->compress && out->drv->pwrite_compressed;

    while (len) {
        size_t n = (size_t)min_u64(len, compress ? cv->granule : cv->chunk);
        const uint8_t *c = NULL;
        size_t clen = 0;
        int r;
        if (compress && (r = zero_compressed(cv, n, &c, &clen)) < 0)
            return r;
        j->pending++;
        cv->st->written += n;
        if (clen) {
            cv->st->compressed += clen;
            r = out->drv->pwrite_compressed(out, c, clen, off, write_done, j);
        } else {
            if (compress)
                cv->st->compressed += n;
            r = out->drv->pwrite(out, cv->zero_chunk, n, off, write_done, j);
        }
        if (r < 0)
            return r;
        off += n;
        len -= n;
    }
    return 0;
}

/* The length to write of a range at off: the source's last sector whole,
 * when the output is larger (vpc and vdi round the size up), as qemu-img
 * sees every image in whole sectors; the bytes past the source's end are
 * zeros (the scan padded the buffer with them). */
static uint64_t out_len(const struct cv *cv, uint64_t off, uint64_t len)
{
    uint64_t padded = align_up(len, 512);

    if (!cv->size_unknown && off + len == cv->total && padded != len &&
        off + padded <= cv->o->out->size)
        return padded;
    return len;
}

/* Zeros over [off, off+len) (granule-aligned, or ending at the end). */
static int write_zeros(struct cv *cv, struct job *j, uint64_t off, uint64_t len)
{
    struct bd *out = cv->o->out;
    struct bd *b = cv->o->out_backing;

    len = out_len(cv, off, len);

    if (cv->o->sparse_size == 0)
        return write_zero_fill(cv, j, off, len);
    if (!b)
        return out->drv->write_zeroes(out, off, len);
    /* over a backing file only where the backing file is not zero already */
    uint64_t end = off + len, done_to = off;
    while (off < end && off < b->size) {
        struct bd_extent e;
        int r = bd_block_status(b, off, end - off, &e);
        if (r < 0)
            return r;
        if (!(e.flags & BD_ZERO)) {
            uint64_t zs = align_down(off, cv->granule), ze = min_u64(align_up(off + e.len, cv->granule), end);
            if (zs < done_to)
                zs = done_to;
            if (ze > zs && (r = out->drv->write_zeroes(out, zs, ze - zs)) < 0)
                return r;
            if (ze > done_to)
                done_to = ze;
        }
        off += e.len;
    }
    return 0;
}

static int write_data(struct cv *cv, struct job *j, const struct run *run)
{
    struct bd *out = cv->o->out;
    uint64_t off = j->off + run->off;

    if (!cv->o->compress || !out->drv->compress) {
        size_t len = (size_t)out_len(cv, off, run->len);
        if (run->off + len > cv->chunk)
            len = run->len;
        j->pending++;
        cv->st->written += run->len;
        return out->drv->pwrite(out, j->buf + run->off, len, off, write_done, j);
    }
    for (uint32_t p = run->off; p < run->off + run->len;) {
        uint32_t g = cv->granule - (uint32_t)((j->off + p) % cv->granule);
        if (g > run->off + run->len - p)
            g = run->off + run->len - p;
        size_t gi = p / cv->granule;
        int r;
        j->pending++;
        cv->st->written += g;
        if (j->clen[gi]) {
            cv->st->compressed += j->clen[gi];
            r = out->drv->pwrite_compressed(out, j->cbuf + j->coff[gi], j->clen[gi],
                                            j->off + p, write_done, j);
        } else {
            cv->st->compressed += g;
            r = out->drv->pwrite(out, j->buf + p, g, j->off + p, write_done, j);
        }
        if (r < 0)
            return r;
        p += g;
    }
    return 0;
}

/* Bytes [off, off+len) of the job (relative), read now if the worker
 * left them to the kernel. */
static int job_bytes(struct cv *cv, struct job *j, uint64_t off, uint64_t len)
{
    return j->filled ? 0 : source_read(cv, j->buf + off, j->off + off, len);
}

/* [src_off, +len) of the source file src_fd into f at host by the kernel
 * (clone or in-kernel copy); *done says how far it got.  An error is a
 * write error of f. */
static int kernel_place(struct cv *cv, int src_fd, uint64_t src_off, struct bfile *f,
                        uint64_t host, uint64_t len, uint64_t *done)
{
    /* on ext4 (bfile_set_prealloc) copy_file_range's bytes go into
     * allocated blocks too; never where a clone would share them (XFS,
     * btrfs: no prealloc there) */
    bfile_prealloc(f, host, (size_t)len);
    int r = offload_range(&cv->ofl, src_fd, src_off, f->fd, host, len, done);

    if (r < 0 && cv->ofl.no_progress)
        return diag_fail(cv->d, r, f->path, (int64_t)(host + *done),
                         "write failed: no progress");
    if (r < 0)
        return diag_errno(cv->d, r, f->path, (int64_t)(host + *done), "write failed");
    return 0;
}

/* Bytes [rel, rel+len) of the job into f at host, which the output
 * mapped: by the kernel, or what it refuses (or what is not aligned in the
 * output) read and written here. */
static int place_mapped(struct cv *cv, struct job *j, uint64_t rel, struct bfile *f,
                        uint64_t host, uint64_t len)
{
    uint64_t done = 0;
    int r;

    if (host % cv->ofl.blksize == 0 && len % cv->ofl.blksize == 0 &&
        (r = kernel_place(cv, j->src_file->fd, j->src_host + rel, f, host, len, &done)) < 0)
        return r;
    if (done < len && ((r = job_bytes(cv, j, rel + done, len - done)) < 0 ||
                       (r = bfile_pwrite(f, j->buf + rel + done, (size_t)(len - done),
                                         host + done)) < 0))
        return r;
    return 0;
}

/* Most bytes gathered into one offload call: big enough that a file system
 * whose clone costs per call (btrfs) sees few calls, small enough that the
 * kernel's work keeps pace with the workers' scans. */
#define PEND_MAX (16u << 20)

/* The gathered offload range, placed now: by the kernel, and what it
 * refuses read from the source file and written. */
static int pend_flush(struct cv *cv)
{
    uint64_t done = 0, len = cv->pend.len;
    struct bfile *f = cv->pend.out;
    /* the source is only read here (bfile_pread takes it writable) */
    struct bfile *src = (struct bfile *)cv->pend.src;
    int r;

    if (len == 0)
        return 0;
    cv->pend.len = 0;
    if (offload_usable_from(&cv->ofl, src->fd) &&
        (r = kernel_place(cv, src->fd, cv->pend.src_off, f, cv->pend.out_off, len, &done)) < 0)
        return r;
    if (done < len && !cv->bounce && posix_memalign((void **)&cv->bounce, 4096, cv->chunk))
        return diag_fail(cv->d, -ENOMEM, NULL, -1, "out of memory");
    while (done < len) {
        size_t n = (size_t)min_u64(len - done, cv->chunk);
        if ((r = bfile_pread(src, cv->bounce, n, cv->pend.src_off + done)) < 0 ||
            (r = bfile_pwrite(f, cv->bounce, n, cv->pend.out_off + done)) < 0)
            return r;
        done += n;
    }
    return 0;
}

/* [rel, +len) of job j goes to host in f, later: joined to the gathered
 * range when it continues it in both files, else after it is placed. */
static int pend_add(struct cv *cv, const struct job *j, uint64_t rel, struct bfile *f,
                    uint64_t host, uint64_t len)
{
    uint64_t src_off = j->src_host + rel;
    int r;

    if (cv->pend.len && cv->pend.src == j->src_file && cv->pend.out == f &&
        cv->pend.src_off + cv->pend.len == src_off && cv->pend.out_off + cv->pend.len == host &&
        cv->pend.len + len <= PEND_MAX) {
        cv->pend.len += len;
        return 0;
    }
    if ((r = pend_flush(cv)) < 0)
        return r;
    cv->pend.src = j->src_file;
    cv->pend.out = f;
    cv->pend.src_off = src_off;
    cv->pend.out_off = host;
    cv->pend.len = len;
    return 0;
}

/* A RUN_OFFLOAD run: the output maps each piece (map_for_offload), the
 * kernel puts the source's bytes there; what it refuses is read and
 * written here, and once refused, the rest of the run goes by write_data. */
static int write_offload(struct cv *cv, struct job *j, const struct run *run)
{
    struct bd *out = cv->o->out;
    uint64_t pos = 0;
    int r;

    while (pos < run->len) {
        uint64_t rel = run->off + pos, host, mapped;
        struct bfile *f;
        if (!offload_usable(&cv->ofl) || cv->map_refused) {
            struct run rest = { (uint32_t)rel, (uint32_t)(run->len - pos), RUN_DATA };
            if ((r = job_bytes(cv, j, rest.off, rest.len)) < 0)
                return r;
            return write_data(cv, j, &rest);
        }
        r = out->drv->map_for_offload(out, j->off + rel, run->len - pos, cv->ofl.blksize,
                                      &f, &host, &mapped);
        if (r == -ENOTSUP) {
            cv->map_refused = true;
            continue;
        }
        if (r < 0)
            return r;
        /* gathered only while clones work: a clone costs per call (btrfs),
         * an in-kernel copy (ext4) per byte */
        if ((out->drv->caps & BD_CAP_OFFLOAD_LATE) && cv->ofl.clone_ok &&
            host % cv->ofl.blksize == 0 &&
            mapped % cv->ofl.blksize == 0 && mapped <= PEND_MAX) {
            if ((r = pend_add(cv, j, rel, f, host, mapped)) < 0)
                return r;
            cv->st->written += mapped;
            pos += mapped;
            continue;
        }
        r = place_mapped(cv, j, rel, f, host, mapped);
        if (out->drv->offload_done) {
            int e = out->drv->offload_done(out, r);
            if (r == 0)
                r = e;
        }
        if (r < 0)
            return r;
        cv->st->written += mapped;
        pos += mapped;
    }
    return 0;
}

static int write_job(struct cv *cv, struct job *j)
{
    int r = 0;

    j->state = J_WRITING;
    j->pending = 1; /* held while submitting, so the job is not freed early */
    if (j->gap) {
        cv->st->zero_meta += j->len;
        if (!cv->o->skip_gaps)
            r = write_zeros(cv, j, j->off, j->len);
    } else {
        cv->st->read += j->len;
        for (size_t i = 0; i < j->nruns && r == 0; i++) {
            const struct run *run = &j->runs[i];
            if (run->kind == RUN_DATA)
                r = write_data(cv, j, run);
            else if (run->kind == RUN_OFFLOAD)
                r = write_offload(cv, j, run);
            else if (run->kind == RUN_ZERO) {
                cv->st->zero_scan += run->len;
                r = write_zeros(cv, j, j->off + run->off, run->len);
            }
        }
    }
    write_done(j, r);
    return r;
}

/* --- the main loop -------------------------------------------------------- */

static int alloc_slots(struct cv *cv)
{
    const struct convert_opts *o = cv->o;
    size_t per_job = cv->chunk * (1 + (o->out_backing != NULL) + (o->compress != 0));
    unsigned n = o->inflight ? o->inflight : 8;
    size_t max_granules = cv->chunk / cv->granule + 2;
    /* runs come per output granule over a backing file (-B), else from the
     * zero scan, whose runs are whole scan units (but the first and last):
     * sized for that, not for raw's 512-byte granule (8 times the memory,
     * all of it cleared and faulted in before the first byte is read) */
    size_t max_runs = cv->chunk / (o->out_backing ? cv->granule : cv->scan_granule) + 2;

    if (n > BUFFER_BUDGET / per_job)
        n = (unsigned)(BUFFER_BUDGET / per_job);
    if (n < cv->nthreads + 1)
        n = cv->nthreads + 1;
    if (o->sequential)
        n = 1;
    cv->slots = calloc(n, sizeof(*cv->slots));
    cv->order = calloc(n, sizeof(*cv->order));
    if (!cv->slots || !cv->order)
        return -ENOMEM;
    cv->nslots = n;
    /* the chunk buffers in one block of huge pages (util/hugebuf.h: page
     * faults and page walks cost more than the copies on 4 KiB pages) */
    size_t stride;
    if (!(cv->bufs = hugebuf_alloc(n, cv->chunk, &stride)))
        return -ENOMEM;
    for (unsigned i = 0; i < n; i++) {
        struct job *j = &cv->slots[i];
        j->cv = cv;
        j->buf = cv->bufs + (size_t)i * stride;
        if (o->out_backing && posix_memalign((void **)&j->bbuf, 4096, cv->chunk))
            return -ENOMEM;
        if (o->compress) {
            j->cbuf = malloc(cv->chunk);
            j->clen = calloc(max_granules, sizeof(*j->clen));
            j->coff = calloc(max_granules, sizeof(*j->coff));
            if (!j->cbuf || !j->clen || !j->coff)
                return -ENOMEM;
        }
        /* split for offload, a data run becomes up to three */
        size_t nruns = cv->offload ? 3 * max_runs : max_runs;
        j->runs = calloc(nruns, sizeof(*j->runs));
        j->zruns = calloc(max_runs, sizeof(*j->zruns));
        if (!j->runs || !j->zruns)
            return -ENOMEM;
        if (cv->offload && !(j->oruns = calloc(nruns, sizeof(*j->oruns))))
            return -ENOMEM;
        j->next = cv->free_list;
        cv->free_list = j;
    }
    if (o->sparse_size == 0) {
        if (posix_memalign((void **)&cv->zero_chunk, 4096, cv->chunk))
            return -ENOMEM;
        memset(cv->zero_chunk, 0, cv->chunk);
    }
    return 0;
}

static void free_slots(struct cv *cv)
{
    for (unsigned i = 0; cv->slots && i < cv->nslots; i++) {
        struct job *j = &cv->slots[i];
        free(j->bbuf);
        free(j->cbuf);
        free(j->clen);
        free(j->coff);
        free(j->runs);
        free(j->oruns);
        free(j->zruns);
    }
    free(cv->bufs);
    free(cv->slots);
    free(cv->order);
    free(cv->zero_chunk);
    free(cv->bounce);
    free(cv->zero_cgran);
    free(cv->zero_ctail);
}

/* The next job the writer may take (under cv->lock), or NULL. */
static struct job *next_ready(struct cv *cv)
{
    unsigned n = cv->o->out_of_order ? cv->order_count : (cv->order_count ? 1 : 0);

    for (unsigned k = 0; k < n; k++) {
        unsigned idx = (cv->order_head + k) % cv->nslots;
        struct job *j = cv->order[idx];
        if (j->state != J_READY)
            continue;
        /* remove from the order ring, keeping the rest in sequence */
        for (unsigned m = k; m > 0; m--)
            cv->order[(cv->order_head + m) % cv->nslots] =
                cv->order[(cv->order_head + m - 1) % cv->nslots];
        cv->order_head = (cv->order_head + 1) % cv->nslots;
        cv->order_count--;
        return j;
    }
    return NULL;
}

static bool all_free(struct cv *cv)
{
    unsigned n = 0;
    for (struct job *j = cv->free_list; j; j = j->next)
        n++;
    return n == cv->nslots;
}

/* Is there a job the writer may take now?  (under cv->lock) */
static bool has_ready(struct cv *cv)
{
    unsigned n = cv->o->out_of_order ? cv->order_count : (cv->order_count ? 1 : 0);
    for (unsigned k = 0; k < n; k++)
        if (cv->order[(cv->order_head + k) % cv->nslots]->state == J_READY)
            return true;
    return false;
}

/* Plan into every free slot and hand data jobs to the workers (under lock). */
static void fill_slots(struct cv *cv)
{
    const struct convert_opts *o = cv->o;

    while (!cv->stop && cv->plan_pos < cv->total && cv->free_list) {
        struct job *j = cv->free_list;
        cv->free_list = j->next;
        pthread_mutex_unlock(&cv->lock);
        int r = plan_next(cv, j);
        pthread_mutex_lock(&cv->lock);
        if (r < 0) {
            j->next = cv->free_list;
            cv->free_list = j;
            if (!cv->err)
                cv->err = r;
            cv->stop = true;
            pthread_cond_broadcast(&cv->work_cond);
            return;
        }
        cv->order[(cv->order_head + cv->order_count) % cv->nslots] = j;
        cv->order_count++;
        if (j->gap) {
            j->state = J_READY;
        } else if (o->sequential) {
            j->state = J_BUSY;   /* read by the main loop itself */
        } else {
            j->state = J_QUEUED;
            j->next = NULL;
            if (cv->work_tail)
                cv->work_tail->next = j;
            else
                cv->work_head = j;
            cv->work_tail = j;
            pthread_cond_signal(&cv->work_cond);
        }
    }
}

static int run_loop(struct cv *cv, struct ioq *ioq)
{
    int r;

    for (;;) {
        pthread_mutex_lock(&cv->lock);
        fill_slots(cv);
        /* a stream source is read right here, strictly in order */
        if (cv->o->sequential && cv->order_count && !cv->stop) {
            struct job *h = cv->order[cv->order_head];
            if (h->state == J_BUSY) {
                pthread_mutex_unlock(&cv->lock);
                int e = process_job(cv, h);
                pthread_mutex_lock(&cv->lock);
                h->err = e;
                h->state = J_READY;
            }
        }
        if (cv->err) {
            pthread_mutex_unlock(&cv->lock);
            break;
        }
        struct job *j = next_ready(cv);
        pthread_mutex_unlock(&cv->lock);

        if (j) {
            if (j->err < 0) {
                /* the job is not written: give its slot back */
                set_error(cv, j->err);
                release_job(cv, j);
                break;
            }
            if ((r = write_job(cv, j)) < 0) {
                set_error(cv, r);
                break;
            }
            continue;
        }
        /* nothing ready: reap finished writes, then wait for whatever
         * holds up progress */
        if (ioq && ioq_inflight(ioq) && (r = ioq_poll(ioq)) < 0) {
            set_error(cv, r);
            break;
        }
        pthread_mutex_lock(&cv->lock);
        if (cv->err) {
            pthread_mutex_unlock(&cv->lock);
            break;
        }
        if ((cv->free_list && cv->plan_pos < cv->total) || has_ready(cv)) {
            pthread_mutex_unlock(&cv->lock);
            continue;
        }
        if (cv->order_count > 0) {
            /* a worker holds the job we need next */
            pthread_cond_wait(&cv->ready_cond, &cv->lock);
            pthread_mutex_unlock(&cv->lock);
            continue;
        }
        bool done = cv->plan_pos >= cv->total && all_free(cv);
        pthread_mutex_unlock(&cv->lock);
        if (done) {
            if ((r = pend_flush(cv)) < 0)
                set_error(cv, r);
            break;
        }
        if (ioq && ioq_inflight(ioq)) {
            if ((r = ioq_wait(ioq)) < 0) {
                set_error(cv, r);
                break;
            }
            continue;
        }
        set_error(cv, diag_fail(cv->d, -EIO, NULL, -1,
                                "internal error: conversion stalled"));
        break;
    }
    pthread_mutex_lock(&cv->lock);
    r = cv->err;
    pthread_mutex_unlock(&cv->lock);
    return r;
}

/* Copy offload for this run?  Sets cv->offload and the unit, or says in
 * stats why not.  DISKIMG_OFFLOAD (tests, benchmarks): a comma list of
 * noclone, nocopy (leave a method out), pread (scan by reading into the
 * buffers, not through a mapping), scanall (look at every 4 KiB unit
 * through the mapping), samplemap (sample, then look at the blocks
 * around zeros through the mapping, not by pread), sampleread (sample
 * without a mapping at all). */
static void setup_offload(struct cv *cv)
{
    const struct convert_opts *o = cv->o;
    const struct bd *out = o->out;
    const char *env = getenv("DISKIMG_OFFLOAD"), *why = NULL;

    cv->offload = false;
    if (o->offload == CONVERT_OFFLOAD_OFF)
        return;
    if (o->compress)
        why = "the output is compressed";
    else if (o->out_backing)
        why = "only differences from the backing file are written (-B)";
    else if (o->sequential || cv->size_unknown)
        why = "a source is a stream";
    else if (o->salvage)
        why = "--salvage reads everything";
    else if (!out->drv->map_for_offload)
        why = "the output format cannot take it";
    else if (!out->file || out->file->kind != BFILE_REGULAR || out->file->fd < 0)
        why = "the output is not a regular file";
    if (why) {
        cv->st->offload_off = why;
        return;
    }
    offload_init(&cv->ofl, out->file->fd, !(env && strstr(env, "noclone")),
                 !(env && strstr(env, "nocopy")));
    cv->offload_pread = env && strstr(env, "pread");
    cv->offload_scan_all = env && strstr(env, "scanall");
    cv->offload_sample_read = env && strstr(env, "sampleread");
    if (!cv->offload_pread) {
        offload_maps_init(&cv->maps);
        cv->maps.sample_mapped = env && strstr(env, "samplemap");
    }
    cv->ofl_unit = cv->ofl.blksize > cv->granule ? cv->ofl.blksize : cv->granule;
    cv->offload = true;
    if ((out->drv->caps & BD_CAP_OFFLOAD_LATE) && cv->chunk < CHUNK_OFFLOAD_RAW &&
        CHUNK_OFFLOAD_RAW % cv->granule == 0)
        cv->chunk = CHUNK_OFFLOAD_RAW;
}

int convert_run(const struct convert_opts *o, struct diag *d,
                struct convert_stats *st)
{
    struct cv cv;
    struct convert_stats dummy;
    struct ioq *ioq = NULL;
    int r;

    if (!st)
        st = &dummy;
    memset(st, 0, sizeof(*st));
    memset(&cv, 0, sizeof(cv));
    cv.o = o;
    cv.d = d;
    cv.st = st;
    pthread_mutex_init(&cv.lock, NULL);
    pthread_cond_init(&cv.work_cond, NULL);
    pthread_cond_init(&cv.ready_cond, NULL);
    cv.total = convert_total_size(o->src, o->nsrc);
    cv.size_unknown = o->nsrc == 1 && o->src[0]->size == UINT64_MAX;
    if (!cv.size_unknown && cv.total == UINT64_MAX) {
        r = diag_fail(d, -EFBIG, NULL, -1, "the sources are too large together");
        goto out;
    }
    if (!(cv.src_start = calloc(o->nsrc ? o->nsrc : 1, sizeof(*cv.src_start)))) {
        r = diag_fail(d, -ENOMEM, NULL, -1, "out of memory");
        goto out;
    }
    for (size_t i = 1; i < o->nsrc; i++)
        cv.src_start[i] = cv.src_start[i - 1] + o->src[i - 1]->size +
                          (-o->src[i - 1]->size & 511);
    if (cv.size_unknown && !o->sequential) {
        r = diag_fail(d, -EINVAL, NULL, -1, "internal error: a stream needs sequential mode");
        goto out;
    }
    cv.granule = o->out->granule ? o->out->granule : 512;
    /* zero detection works in 4 KiB units where -S allows (file systems
     * allocate 4 KiB blocks: smaller holes free nothing), else in 512 */
    cv.scan_granule = (o->sparse_size % 4096 == 0) ? 4096 : 512;
    if (cv.scan_granule < cv.granule)
        cv.scan_granule = cv.granule;
    cv.chunk = CHUNK_MIN;
    if (cv.chunk < cv.granule)
        cv.chunk = cv.granule;
    cv.chunk = (size_t)align_up(cv.chunk, cv.granule);
    cv.cache_start = cv.cache_end = 0;
    cv.nthreads = o->sequential ? 0 : (o->threads ? o->threads : 1);
    st->total = cv.total;
    st->threads = cv.nthreads;
    /* the output driver may write through a queue; we reap it */
    if (o->out->drv == NULL) {
        r = diag_fail(d, -EINVAL, NULL, -1, "internal error: no output driver");
        goto out;
    }
    ioq = o->ioq;
    cv.cache_file = NULL;
    setup_offload(&cv);
    st->chunk = cv.chunk;
    if ((r = alloc_slots(&cv)) < 0) {
        r = diag_fail(d, r, NULL, -1, "cannot allocate conversion buffers");
        goto out;
    }
    cv.threads = calloc(cv.nthreads ? cv.nthreads : 1, sizeof(*cv.threads));
    if (!cv.threads) {
        r = diag_fail(d, -ENOMEM, NULL, -1, "out of memory");
        goto out;
    }
    unsigned started = 0;
    for (; started < cv.nthreads; started++) {
        if (pthread_create(&cv.threads[started], NULL, worker_main, &cv) != 0) {
            set_error(&cv, diag_fail(d, -EAGAIN, NULL, -1, "cannot start worker threads"));
            break;
        }
    }
    if (o->progress)
        o->progress(o->progress_opaque, 0, cv.size_unknown ? 0 : cv.total);
    r = cv.err ? cv.err : run_loop(&cv, ioq);

    pthread_mutex_lock(&cv.lock);
    cv.stop = true;
    pthread_cond_broadcast(&cv.work_cond);
    pthread_mutex_unlock(&cv.lock);
    for (unsigned i = 0; i < started; i++)
        pthread_join(cv.threads[i], NULL);
    /* every submitted write must complete before the buffers go */
    if (ioq) {
        int e = ioq_drain(ioq);
        if (!r && e < 0)
            r = e;
    }
    if (!r && cv.err)
        r = cv.err;
    if (cv.offload) {
        st->shared = cv.ofl.shared;
        st->offloaded = cv.ofl.offloaded;
        /* stopped for every source, or (EXDEV) for some of them */
        st->offload_refused = cv.ofl.refused;
    }
    if (!r && o->offload == CONVERT_OFFLOAD_REQUIRED && st->written &&
        !st->shared && !st->offloaded) {
        char why[160];
        if (st->offload_off)
            snprintf(why, sizeof(why), "%s", st->offload_off);
        else if (st->offload_refused)
            snprintf(why, sizeof(why), "the file system refused (%s)",
                     strerror(st->offload_refused));
        else if (cv.map_refused)
            snprintf(why, sizeof(why), "the output cannot take it");
        else
            snprintf(why, sizeof(why), "no data lies in a file as the output needs it "
                     "(same file system, aligned to its %u-byte blocks)", cv.ofl.blksize);
        r = diag_fail(d, -ENOTSUP, NULL, -1, "copy offload is required, but no range "
                      "could be offloaded: %s", why);
    }
    if (r < 0 && !d->err)
        diag_errno(d, r, NULL, -1, "conversion failed");
out:
    if (cv.offload && !cv.offload_pread)
        offload_maps_free(&cv.maps);
    free(cv.src_start);
    free(cv.threads);
    free_slots(&cv);
    pthread_cond_destroy(&cv.ready_cond);
    pthread_cond_destroy(&cv.work_cond);
    pthread_mutex_destroy(&cv.lock);
    return r;
}
