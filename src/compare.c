/* compare: see compare.h.
 *
 * The calling thread walks the block status of both images and queues
 * jobs into a ring of o->inflight slots.  A job is a contiguous range of at
 * most o->chunk bytes needing one kind of check; neighbouring block-status
 * ranges of the same kind share a job, so a fragmented image does not turn
 * into thousands of tiny reads.  Worker threads take queued jobs in order,
 * read and check them; the calling thread retires jobs strictly in ring
 * order, and runs queued jobs itself instead of sleeping while it waits.
 * The first job that failed or found a difference decides, so the answer
 * does not depend on which thread was faster.  Events the walker finds
 * itself (a block-status failure, a strict-mode status mismatch) lie after
 * every queued job, so they decide only once the ring is drained.
 *
 * One image may be a stream (a pipe): the walker reads it in order into
 * each job's buffer before handing the job out, and the workers read the
 * other image.  A raw stream's size is found at its end: the job that meets
 * the end is cut there, and the rest of the walk uses the size found.
 */
#include "compare.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "formats/bd.h"
#include "io/bfile.h"
#include "util/diag.h"
#include "util/hugebuf.h"
#include "zerodetect/zerodetect.h"

#define SECTOR 512u
#define MAX_CHUNK (16u << 20)
#define MAX_SEGS 32      /* block-status ranges one job may span */
#define BUFFER_BUDGET (64u << 20)  /* all read buffers together */

enum job_kind {
    JOB_BOTH,    /* read both images, memcmp */
    JOB_ZERO_0,  /* image 0 must read as zeros (image 1 is known zero) */
    JOB_ZERO_1,  /* image 1 must read as zeros (image 0 is known zero) */
};

enum job_state { JOB_QUEUED, JOB_RUNNING, JOB_DONE };

struct job {
    uint64_t off, len;
    /* starts of the block-status ranges the job covers, ascending; seg[0]
     * may lie before `off` (a range that began in an earlier job) */
    uint64_t seg[MAX_SEGS];
    unsigned nseg;
    enum job_kind kind;
    enum job_state state;
    int err;                 /* read failure (negative errno), or 0 */
    int err_image;           /* 1 or 2 */
    bool differs;
    uint64_t diff_off;
    uint8_t *buf[2];
};

/* The last block-status answer of one image, reused while it still covers
 * the walk position (the other image usually has the shorter extent). */
struct status_cache {
    uint64_t start, end;
    unsigned flags;
    bool has_offset;
};

struct cmp {
    uint8_t *bufs; /* every ring buffer, one block (hugebuf) */
    struct bd *img[2];
    const struct compare_opts *o;
    struct compare_result *res;
    uint64_t total;

    pthread_mutex_t lock;
    pthread_cond_t work_cond;   /* workers: a job was queued, or stop */
    pthread_cond_t done_cond;   /* walker: a job finished */
    struct job *ring;
    unsigned cap;
    uint64_t head;              /* jobs queued so far */
    uint64_t next;              /* next job a thread takes */
    uint64_t tail;              /* jobs retired so far */
    bool stop;
    unsigned idle;              /* workers waiting for work */
    bool walker_waiting;        /* the walker sleeps on done_cond */
    bool open;                  /* ring[head] is being filled by the walker */
    pthread_t *threads;
    unsigned nthreads;

    bool decided;               /* res holds the answer */
    uint64_t pos;               /* walk position */
    struct status_cache sc[2];

    int stream;                 /* the image read in order by the walker, or -1 */
    bool size_unknown;          /* the stream's size is found at its end */
};

/* Measured on the 4 GiB bench disk (bench/compare.sh, 2 cores): the
 * kernel's copy into our buffers dominates, and it is cheapest when all
 * buffers stay in the CPU caches.  256 KiB chunks with 2 slots per thread
 * (2 MiB of buffers for 2 threads) used 20-35% less CPU than 1 MiB chunks
 * with 4 slots per thread (16 MiB), and 20-25% less than qemu-img. */
void compare_opts_default(struct compare_opts *o)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);

    memset(o, 0, sizeof(*o));
    if (n < 2)
        n = 2;          /* reads overlap even on one CPU */
    if (n > 4)
        n = 4;
    o->threads = (unsigned)n;
    o->inflight = 2 * (unsigned)n;
    o->chunk = 256u << 10;
}

/* --- checking one job (worker threads) ------------------------------------- */

/* qemu-img reports the first differing 512-byte sector, counted from the
 * start of the block-status range the byte lies in. */
static uint64_t sector_of(const struct job *j, uint64_t byte)
{
    unsigned i = j->nseg;

    while (i > 1 && j->seg[i - 1] > byte)
        i--;
    uint64_t start = j->seg[i - 1];
    return start + ((byte - start) & ~(uint64_t)(SECTOR - 1));
}

static size_t first_difference(const uint8_t *a, const uint8_t *b, size_t len)
{
    size_t i = 0;

    while (i + 4096 <= len && memcmp(a + i, b + i, 4096) == 0)
        i += 4096;
    while (i < len && a[i] == b[i])
        i++;
    return i;
}

static size_t first_nonzero(const uint8_t *a, size_t len)
{
    size_t i = 0;

    while (i + 4096 <= len && buffer_is_zero(a + i, 4096))
        i += 4096;
    while (i < len && !a[i])
        i++;
    return i;
}

static void run_job(struct cmp *c, struct job *j)
{
    size_t len = (size_t)j->len;
    int r;

    if (j->err)
        return;     /* the walker's read of the stream failed */
    if (j->kind == JOB_BOTH) {
        if (c->stream != 0 && (r = bd_pread(c->img[0], j->buf[0], len, j->off)) < 0) {
            j->err = r;
            j->err_image = 1;
            return;
        }
        if (c->stream != 1 && (r = bd_pread(c->img[1], j->buf[1], len, j->off)) < 0) {
            j->err = r;
            j->err_image = 2;
            return;
        }
        if (memcmp(j->buf[0], j->buf[1], len) != 0) {
            j->differs = true;
            j->diff_off = sector_of(j, j->off + first_difference(j->buf[0], j->buf[1], len));
        }
        return;
    }
    int k = j->kind == JOB_ZERO_0 ? 0 : 1;
    if (c->stream != k && (r = bd_pread(c->img[k], j->buf[0], len, j->off)) < 0) {
        j->err = r;
        j->err_image = k + 1;
        return;
    }
    if (!buffer_is_zero(j->buf[0], len)) {
        j->differs = true;
        j->diff_off = sector_of(j, j->off + first_nonzero(j->buf[0], len));
    }
}

static void *worker(void *arg)
{
    struct cmp *c = arg;

    pthread_mutex_lock(&c->lock);
    for (;;) {
        while (!c->stop && c->next == c->head) {
            c->idle++;
            pthread_cond_wait(&c->work_cond, &c->lock);
            c->idle--;
        }
        if (c->stop)
            break;
        struct job *j = &c->ring[c->next % c->cap];
        c->next++;
        j->state = JOB_RUNNING;
        pthread_mutex_unlock(&c->lock);
        run_job(c, j);
        pthread_mutex_lock(&c->lock);
        j->state = JOB_DONE;
        if (c->walker_waiting)
            pthread_cond_signal(&c->done_cond);
    }
    pthread_mutex_unlock(&c->lock);
    return NULL;
}

/* --- the walker (calling thread) ----------------------------------------------- */

static void report_progress(struct cmp *c)
{
    if (!c->o->progress)
        return;
    uint64_t done = c->tail < c->head || c->open ? c->ring[c->tail % c->cap].off : c->pos;
    uint64_t total = c->total;
    if (c->stream >= 0) {
        /* as much as is known: the larger size, once the stream has ended */
        uint64_t other = c->img[1 - c->stream]->size, st = c->img[c->stream]->size;
        total = c->size_unknown && st == UINT64_MAX ? other : (st > other ? st : other);
        if (total < done)
            total = done;
    }
    c->o->progress(c->o->progress_opaque, done, total);
}

/* Wait for the oldest job and retire it, running queued jobs meanwhile.
 * Returns true when it decided. */
static bool retire_one(struct cmp *c)
{
    struct job *j = &c->ring[c->tail % c->cap];

    pthread_mutex_lock(&c->lock);
    while (j->state != JOB_DONE) {
        if (c->next < c->head) {
            struct job *h = &c->ring[c->next % c->cap];
            c->next++;
            h->state = JOB_RUNNING;
            pthread_mutex_unlock(&c->lock);
            run_job(c, h);
            pthread_mutex_lock(&c->lock);
            h->state = JOB_DONE;
            continue;
        }
        c->walker_waiting = true;
        pthread_cond_wait(&c->done_cond, &c->lock);
        c->walker_waiting = false;
    }
    pthread_mutex_unlock(&c->lock);
    if (j->err) {
        c->res->failure = COMPARE_FAIL_READ;
        c->res->image = j->err_image;
        c->res->offset = j->off;
        c->decided = true;
        return true;
    }
    if (j->differs) {
        c->res->verdict = COMPARE_CONTENT;
        c->res->offset = j->diff_off;
        c->decided = true;
        return true;
    }
    c->tail++;
    report_progress(c);
    return false;
}

static bool reads_stream(const struct cmp *c, enum job_kind kind)
{
    return c->stream >= 0 &&
           (kind == JOB_BOTH || kind == (c->stream == 0 ? JOB_ZERO_0 : JOB_ZERO_1));
}

/* Read the stream's part of job j, in order.  A raw stream of unknown size
 * that ends inside the job cuts it there and gets its size. */
static void read_stream(struct cmp *c, struct job *j)
{
    int k = c->stream;
    struct bd *s = c->img[k];
    uint8_t *buf = j->kind == JOB_BOTH ? j->buf[k] : j->buf[0];
    size_t got = (size_t)j->len;
    int r;

    if (c->size_unknown && s->size == UINT64_MAX) {
        r = bfile_pread_upto(s->file, buf, (size_t)j->len, j->off, &got);
        if (r == 0 && got < j->len) {
            s->size = j->off + got;
            j->len = got;
        }
    } else {
        r = bd_pread(s, buf, (size_t)j->len, j->off);
    }
    if (r < 0) {
        j->err = r;
        j->err_image = k + 1;
    }
}

/* Hand the job the walker is filling to the threads. */
static void publish(struct cmp *c)
{
    if (!c->open)
        return;
    c->open = false;
    struct job *j = &c->ring[c->head % c->cap];
    if (reads_stream(c, j->kind)) {
        read_stream(c, j);
        if (j->len == 0 && !j->err)
            return;     /* the stream ended where the job began */
    }
    pthread_mutex_lock(&c->lock);
    c->head++;
    if (c->idle)
        pthread_cond_signal(&c->work_cond);
    pthread_mutex_unlock(&c->lock);
}

/* Publish the open job and retire every queued job (or until one decides). */
static void drain(struct cmp *c)
{
    publish(c);
    while (!c->decided && c->tail < c->head)
        retire_one(c);
}

/* Queue a check of [off, off+len), which lies in the block-status range
 * starting at seg_start: appended to the open job when it continues it. */
static void submit(struct cmp *c, uint64_t off, uint64_t len, uint64_t seg_start,
                   enum job_kind kind)
{
    uint64_t end = off + len, chunk = c->o->chunk;

    while (off < end && !c->decided) {
        struct job *j = &c->ring[c->head % c->cap];
        if (c->open && (j->kind != kind || j->off + j->len != off || j->len == chunk ||
                        (j->nseg == MAX_SEGS && j->seg[j->nseg - 1] != seg_start)))
            publish(c);
        if (reads_stream(c, kind) && off >= c->img[c->stream]->size)
            return;     /* past the end of the stream, found meanwhile */
        if (!c->open) {
            if (c->head - c->tail == c->cap && retire_one(c))
                return;
            j = &c->ring[c->head % c->cap];
            j->off = off;
            j->len = 0;
            j->nseg = 0;
            j->kind = kind;
            j->err = 0;
            j->differs = false;
            j->state = JOB_QUEUED;
            c->open = true;
        }
        if (j->nseg == 0 || j->seg[j->nseg - 1] != seg_start)
            j->seg[j->nseg++] = seg_start;
        uint64_t n = end - off;
        if (n > chunk - j->len)
            n = chunk - j->len;
        j->len += n;
        off += n;
    }
}

/* Block status of image k at c->pos, below `limit`. */
static int status_at(struct cmp *c, int k, uint64_t limit, struct status_cache **out)
{
    struct status_cache *s = &c->sc[k];
    struct bd_extent e;

    if (k == c->stream) {
        /* no block status from a pipe: bytes to read, up to the limit */
        s->start = c->pos;
        s->end = limit;
        s->flags = BD_DATA | BD_ALLOCATED;
        s->has_offset = true;
    } else if (!(c->pos >= s->start && c->pos < s->end && s->end <= limit)) {
        int r = bd_block_status(c->img[k], c->pos, limit - c->pos, &e);
        if (r < 0) {
            c->res->failure = COMPARE_FAIL_STATUS;
            c->res->image = k + 1;
            c->res->offset = c->pos;
            return r;
        }
        s->start = c->pos;
        s->end = c->pos + e.len;
        s->flags = e.flags;
        s->has_offset = e.host_offset >= 0 && !(e.flags & BD_COMPRESSED);
    }
    *out = s;
    return 0;
}

/* qemu-img -s compares the whole block status; ours carries the same bits. */
static unsigned strict_status(const struct status_cache *s)
{
    return (s->flags & (BD_DATA | BD_ZERO | BD_ALLOCATED)) | (s->has_offset ? 0x100u : 0);
}

static uint64_t common_size(const struct cmp *c)
{
    return c->img[0]->size < c->img[1]->size ? c->img[0]->size : c->img[1]->size;
}

/* After the stream ended inside the range the walker had reached. */
static void clamp_pos(struct cmp *c)
{
    if (c->stream >= 0 && c->pos > c->img[c->stream]->size)
        c->pos = c->img[c->stream]->size;
}

/* The part both images have.  Returns 0 or a negative errno (walker failure). */
static int walk_common(struct cmp *c)
{
    while (c->pos < common_size(c) && !c->decided) {
        uint64_t common = common_size(c);
        struct status_cache *s0, *s1;
        int r;
        if ((r = status_at(c, 0, common, &s0)) < 0 || (r = status_at(c, 1, common, &s1)) < 0)
            return r;
        uint64_t end = s0->end < s1->end ? s0->end : s1->end;
        if (c->o->strict && strict_status(s0) != strict_status(s1)) {
            drain(c);
            if (!c->decided) {
                c->res->verdict = COMPARE_STRICT_STATUS;
                c->res->offset = c->pos;
                c->decided = true;
            }
            return 0;
        }
        bool z0 = s0->flags & BD_ZERO, z1 = s1->flags & BD_ZERO;
        if (!(z0 && z1))
            submit(c, c->pos, end - c->pos, c->pos,
                   z1 ? JOB_ZERO_0 : z0 ? JOB_ZERO_1 : JOB_BOTH);
        else
            publish(c);     /* the gap ends the open job: let it run */
        c->pos = end;
        clamp_pos(c);
        if (c->tail == c->head)
            report_progress(c);
    }
    return 0;
}

/* The tail of the larger image, image k, must read as zeros. */
static int walk_tail(struct cmp *c, int k)
{
    while (c->pos < c->img[k]->size && !c->decided) {
        struct status_cache *s;
        int r = status_at(c, k, c->img[k]->size, &s);
        if (r < 0)
            return r;
        uint64_t end = s->end;
        if (!(s->flags & BD_ZERO))
            submit(c, c->pos, end - c->pos, c->pos, k == 0 ? JOB_ZERO_0 : JOB_ZERO_1);
        else
            publish(c);
        c->pos = end;
        if (k == c->stream)
            clamp_pos(c);
        if (c->tail == c->head)
            report_progress(c);
    }
    return 0;
}

static int setup(struct cmp *c, struct diag *d)
{
    const struct compare_opts *o = c->o;

    if (o->threads < 1 || o->threads > 16 || o->inflight < o->threads || o->inflight > 64 ||
        !o->chunk || o->chunk % SECTOR || o->chunk > MAX_CHUNK ||
        (uint64_t)o->inflight * o->chunk > BUFFER_BUDGET / 2)
        return diag_fail(d, -EINVAL, NULL, -1, "internal error: bad compare options");
    /* no more slots than the images have chunks (a small image needs few) */
    uint64_t chunks = c->total / o->chunk + 1;
    c->cap = chunks < o->inflight ? (unsigned)chunks : o->inflight;
    c->ring = calloc(c->cap, sizeof(*c->ring));
    c->threads = calloc(o->threads, sizeof(*c->threads));
    if (!c->ring || !c->threads)
        return diag_fail(d, -ENOMEM, NULL, -1, "out of memory");
    /* all read buffers in one block of huge pages (util/hugebuf.h) */
    size_t stride;
    if (!(c->bufs = hugebuf_alloc(2 * (size_t)c->cap, o->chunk, &stride)))
        return diag_fail(d, -ENOMEM, NULL, -1, "out of memory for %u read buffers of %zu bytes",
                         2 * c->cap, o->chunk);
    for (unsigned i = 0; i < c->cap; i++)
        for (int k = 0; k < 2; k++)
            c->ring[i].buf[k] = c->bufs + (2 * (size_t)i + (size_t)k) * stride;
    for (unsigned i = 0; i < o->threads && i < c->cap; i++) {
        int r = pthread_create(&c->threads[i], NULL, worker, c);
        if (r != 0)
            return diag_errno(d, -r, NULL, -1, "cannot start a worker thread");
        c->nthreads++;
    }
    return 0;
}

static void teardown(struct cmp *c)
{
    pthread_mutex_lock(&c->lock);
    c->stop = true;
    pthread_cond_broadcast(&c->work_cond);
    pthread_mutex_unlock(&c->lock);
    for (unsigned i = 0; i < c->nthreads; i++)
        pthread_join(c->threads[i], NULL);
    free(c->bufs);
    free(c->ring);
    free(c->threads);
    pthread_mutex_destroy(&c->lock);
    pthread_cond_destroy(&c->work_cond);
    pthread_cond_destroy(&c->done_cond);
}

int compare_images(struct bd *a, struct bd *b, const struct compare_opts *o,
                   struct compare_result *res)
{
    struct cmp c;
    int r;

    memset(res, 0, sizeof(*res));
    memset(&c, 0, sizeof(c));
    c.img[0] = a;
    c.img[1] = b;
    c.stream = -1;
    for (int k = 0; k < 2; k++) {
        if (!c.img[k]->file || c.img[k]->file->kind != BFILE_STREAM)
            continue;
        if (c.stream >= 0 || o->strict) {
            res->failure = COMPARE_FAIL_RESOURCES;
            return diag_fail(a->diag, -EINVAL, c.img[k]->filename, -1, c.stream >= 0
                             ? "only one of the images can be a pipe"
                             : "a pipe has no allocation to compare in strict mode");
        }
        c.stream = k;
        c.size_unknown = c.img[k]->size == UINT64_MAX;
    }
    if (o->strict && a->size != b->size) {
        res->verdict = COMPARE_STRICT_SIZE;
        return 0;
    }
    c.o = o;
    c.res = res;
    c.total = a->size > b->size ? a->size : b->size;
    pthread_mutex_init(&c.lock, NULL);
    pthread_cond_init(&c.work_cond, NULL);
    pthread_cond_init(&c.done_cond, NULL);

    r = setup(&c, a->diag);
    if (r < 0) {
        res->failure = COMPARE_FAIL_RESOURCES;
        teardown(&c);
        return r;
    }
    report_progress(&c);
    r = walk_common(&c);
    if (r == 0) {
        drain(&c);
        clamp_pos(&c);
    }
    if (r == 0 && !c.decided && a->size != b->size) {
        /* the larger image's tail (a stream of unknown size may turn out
         * to end just here) */
        res->size_mismatch = true;
        r = walk_tail(&c, a->size > b->size ? 0 : 1);
        if (r == 0) {
            drain(&c);
            res->size_mismatch = a->size != b->size;
        }
    }
    if (r < 0) {
        /* the walker failed; jobs queued before that come first */
        struct compare_result fail = *res;
        res->failure = COMPARE_FAIL_NONE;
        drain(&c);
        if (!c.decided)
            *res = fail;
    }
    if (c.decided && res->failure != COMPARE_FAIL_NONE) {
        /* a read error: the image's diag says what */
        r = c.img[res->image - 1]->diag->err ? c.img[res->image - 1]->diag->err : -EIO;
    } else if (c.decided) {
        res->failure = COMPARE_FAIL_NONE;
        r = 0;
    }
    teardown(&c);
    return r;
}
