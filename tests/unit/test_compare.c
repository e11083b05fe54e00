/* compare_images() against a plain sequential model of qemu-img compare
 * (7.2: block status of both images, chunks of at most 2 MiB, 512-byte
 * sectors counted from the chunk start, the tail of the larger image).
 *
 * The images are in memory, behind a small fake driver whose extents
 * (data, zeros, unallocated, preallocated zeros, compressed) and contents
 * are drawn at random, with unaligned boundaries and sizes; the second
 * image is the first with other extents, a few changed bytes and another
 * size.  Every case runs with several thread counts, read-ahead depths and
 * chunk sizes: the verdict and offset must match the model every time.
 * Injected read and block-status failures must be reported as such, after
 * any difference that comes before them.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compare.h"
#include "formats/bd.h"
#include "util/diag.h"

#include "check.h"

static uint64_t rng = 0x9e3779b97f4a7c15ULL;

static uint64_t rnd(void)
{
    rng ^= rng >> 12;
    rng ^= rng << 25;
    rng ^= rng >> 27;
    return rng * 2685821657736338717ULL;
}

static uint64_t rnd_below(uint64_t n)
{
    return n ? rnd() % n : 0;
}

/* --- the fake driver ----------------------------------------------------------- */

struct fext {
    uint64_t start, len;
    unsigned flags;
};

struct fake {
    struct bd bd;
    uint8_t *data;           /* guest content (zero where extents say zero) */
    struct fext *ext;
    size_t n;
    int64_t fail_read_at;    /* a read covering this byte fails, or -1 */
    int64_t fail_status_at;  /* block status of the extent holding it fails */
};

static int fake_block_status(struct bd *bd, uint64_t off, uint64_t len, struct bd_extent *e)
{
    struct fake *f = (struct fake *)bd;

    for (size_t i = 0; i < f->n; i++) {
        const struct fext *x = &f->ext[i];
        if (off < x->start || off >= x->start + x->len)
            continue;
        if (f->fail_status_at >= 0 && (uint64_t)f->fail_status_at >= x->start &&
            (uint64_t)f->fail_status_at < x->start + x->len)
            return diag_fail(bd->diag, -EINVAL, bd->filename, (int64_t)x->start,
                             "injected block status failure");
        e->len = x->start + x->len - off < len ? x->start + x->len - off : len;
        e->flags = x->flags;
        if ((x->flags & BD_ALLOCATED) && !(x->flags & BD_COMPRESSED))
            e->host_offset = (int64_t)off;
        return 0;
    }
    return diag_fail(bd->diag, -EIO, bd->filename, (int64_t)off, "no extent here");
}

static int fake_pread(struct bd *bd, void *buf, size_t len, uint64_t off)
{
    struct fake *f = (struct fake *)bd;

    /* like a real driver, only ranges with bytes to read can fail */
    if (f->fail_read_at >= 0 && (uint64_t)f->fail_read_at >= off &&
        (uint64_t)f->fail_read_at < off + len) {
        for (size_t i = 0; i < f->n; i++) {
            const struct fext *x = &f->ext[i];
            if ((uint64_t)f->fail_read_at >= x->start &&
                (uint64_t)f->fail_read_at < x->start + x->len && !(x->flags & BD_ZERO))
                return diag_fail(bd->diag, -EIO, bd->filename, f->fail_read_at,
                                 "injected read failure");
        }
    }
    memcpy(buf, f->data + off, len);
    return 0;
}

static void fake_close(struct bd *bd)
{
    struct fake *f = (struct fake *)bd;
    free(f->data);
    free(f->ext);
    free(bd->filename);
    free(f);
}

static const struct bd_driver fake_driver = {
    .name = "fake",
    .block_status = fake_block_status,
    .pread = fake_pread,
    .close = fake_close,
};

static const unsigned kinds[] = {
    BD_DATA | BD_ALLOCATED,
    BD_ZERO | BD_ALLOCATED,
    BD_ZERO,                               /* unallocated, nothing below */
    BD_DATA | BD_ZERO | BD_ALLOCATED,      /* preallocated, reads as zeros */
    BD_DATA | BD_ALLOCATED | BD_COMPRESSED,
};

static uint64_t rnd_len(void)
{
    switch (rnd_below(4)) {
    case 0: return 1 + rnd_below(3000);                 /* unaligned, short */
    case 1: return 512 * (1 + rnd_below(16));
    case 2: return 4096 * (1 + rnd_below(128));
    default: return 65536 * (1 + rnd_below(48));
    }
}

/* Extents over `content`; ranges holding a non-zero byte are data. */
static struct fake *fake_new(const uint8_t *content, uint64_t size, struct diag *d,
                             const char *name)
{
    struct fake *f = calloc(1, sizeof(*f));
    size_t cap = 16;

    bd_init(&f->bd, &fake_driver, NULL, d);
    free(f->bd.filename);
    f->bd.filename = strdup(name);
    f->bd.size = size;
    f->data = calloc(1, size ? size : 1);
    f->ext = malloc(cap * sizeof(*f->ext));
    f->fail_read_at = f->fail_status_at = -1;
    for (uint64_t pos = 0; pos < size;) {
        uint64_t len = rnd_len();
        if (len > size - pos)
            len = size - pos;
        bool nonzero = false;
        for (uint64_t i = pos; i < pos + len && !nonzero; i++)
            nonzero = content[i] != 0;
        unsigned k = kinds[rnd_below(5)];
        if (nonzero && (k & BD_ZERO))
            k = rnd_below(2) ? (BD_DATA | BD_ALLOCATED) : (BD_DATA | BD_ALLOCATED | BD_COMPRESSED);
        if (f->n == cap)
            f->ext = realloc(f->ext, (cap *= 2) * sizeof(*f->ext));
        f->ext[f->n++] = (struct fext){ pos, len, k };
        if (!(k & BD_ZERO))
            memcpy(f->data + pos, content + pos, len);
        pos += len;
    }
    return f;
}

/* --- the model: qemu-img compare, one step at a time ----------------------------- */

#define IO_BUF (2u << 20)

struct model {
    enum compare_verdict verdict;
    uint64_t offset;
    bool size_mismatch;
    enum compare_failure failure;
};

static int64_t find_nonzero(const uint8_t *buf, uint64_t n)
{
    uint64_t end = n / 512 * 512, i;
    for (i = 0; i < end; i += 512)
        for (uint64_t j = 0; j < 512; j++)
            if (buf[i + j])
                return (int64_t)i;
    for (uint64_t j = i; j < n; j++)
        if (buf[j])
            return (int64_t)i;
    return -1;
}

static unsigned qstatus(const struct bd_extent *e)
{
    return (e->flags & (BD_DATA | BD_ZERO | BD_ALLOCATED)) |
           (e->host_offset >= 0 && !(e->flags & BD_COMPRESSED) ? 0x100u : 0);
}

static void model(struct bd *a, struct bd *b, bool strict, struct model *m)
{
    static uint8_t b1[IO_BUF], b2[IO_BUF];
    uint64_t common = a->size < b->size ? a->size : b->size;
    uint64_t total = a->size > b->size ? a->size : b->size;
    uint64_t off = 0;

    memset(m, 0, sizeof(*m));
    if (strict && a->size != b->size) {
        m->verdict = COMPARE_STRICT_SIZE;
        return;
    }
    while (off < common) {
        struct bd_extent e1, e2;
        if (bd_block_status(a, off, common - off, &e1) < 0 ||
            bd_block_status(b, off, common - off, &e2) < 0) {
            m->failure = COMPARE_FAIL_STATUS;
            return;
        }
        uint64_t chunk = e1.len < e2.len ? e1.len : e2.len;
        if (strict && qstatus(&e1) != qstatus(&e2)) {
            m->verdict = COMPARE_STRICT_STATUS;
            m->offset = off;
            return;
        }
        bool al1 = e1.flags & BD_ALLOCATED, al2 = e2.flags & BD_ALLOCATED;
        if ((e1.flags & BD_ZERO) && (e2.flags & BD_ZERO)) {
            /* nothing to do */
        } else if (al1 == al2) {
            if (al1) {
                if (chunk > IO_BUF)
                    chunk = IO_BUF;
                if (bd_pread(a, b1, chunk, off) < 0 || bd_pread(b, b2, chunk, off) < 0) {
                    m->failure = COMPARE_FAIL_READ;
                    return;
                }
                /* compare_buffers: runs of 512-byte sectors */
                uint64_t i = chunk < 512 ? chunk : 512;
                bool res = memcmp(b1, b2, i) != 0;
                while (i < chunk) {
                    uint64_t l = chunk - i < 512 ? chunk - i : 512;
                    if ((memcmp(b1 + i, b2 + i, l) != 0) != res)
                        break;
                    i += l;
                }
                if (res || i != chunk) {
                    m->verdict = COMPARE_CONTENT;
                    m->offset = off + (res ? 0 : i);
                    return;
                }
            }
        } else {
            if (chunk > IO_BUF)
                chunk = IO_BUF;
            struct bd *x = al1 ? a : b;
            if (bd_pread(x, b1, chunk, off) < 0) {
                m->failure = COMPARE_FAIL_READ;
                return;
            }
            int64_t idx = find_nonzero(b1, chunk);
            if (idx >= 0) {
                m->verdict = COMPARE_CONTENT;
                m->offset = off + (uint64_t)idx;
                return;
            }
        }
        off += chunk;
    }
    if (a->size != b->size) {
        struct bd *over = a->size > b->size ? a : b;
        m->size_mismatch = true;
        while (off < total) {
            struct bd_extent e;
            if (bd_block_status(over, off, total - off, &e) < 0) {
                m->failure = COMPARE_FAIL_STATUS;
                return;
            }
            uint64_t chunk = e.len;
            if ((e.flags & BD_ALLOCATED) && !(e.flags & BD_ZERO)) {
                if (chunk > IO_BUF)
                    chunk = IO_BUF;
                if (bd_pread(over, b1, chunk, off) < 0) {
                    m->failure = COMPARE_FAIL_READ;
                    return;
                }
                int64_t idx = find_nonzero(b1, chunk);
                if (idx >= 0) {
                    m->verdict = COMPARE_CONTENT;
                    m->offset = off + (uint64_t)idx;
                    return;
                }
            }
            off += chunk;
        }
    }
}

/* --- the cases ----------------------------------------------------------------- */

struct setting {
    unsigned threads, inflight;
    size_t chunk;
};

static const struct setting settings[] = {
    { 1, 1, 512 }, { 1, 3, 4096 }, { 2, 2, 65536 }, { 2, 8, 1 << 20 },
    { 4, 16, 8192 }, { 3, 5, 3 * 512 }, { 8, 64, 256 << 10 },
};

static const char *const verdicts[] = { "identical", "content", "strict-size", "strict-status" };
static const char *const failures_names[] = { "ok", "status-failure", "read-failure", "resources" };

static void check_case(const char *what, struct bd *a, struct bd *b, bool strict)
{
    struct model m;
    struct diag *d = a->diag;

    diag_clear(d);
    model(a, b, strict, &m);
    for (size_t s = 0; s < sizeof(settings) / sizeof(settings[0]); s++) {
        struct compare_opts o = { .strict = strict, .threads = settings[s].threads,
                                  .inflight = settings[s].inflight, .chunk = settings[s].chunk };
        struct compare_result r;
        diag_clear(d);
        int ret = compare_images(a, b, &o, &r);
        bool same;
        if (m.failure != COMPARE_FAIL_NONE)
            same = ret < 0 && r.failure == m.failure;
        else
            same = ret == 0 && r.verdict == m.verdict &&
                   (m.verdict == COMPARE_IDENTICAL || m.verdict == COMPARE_STRICT_SIZE ||
                    r.offset == m.offset) &&
                   r.size_mismatch == m.size_mismatch;
        CHECK(same, "%s (threads %u, inflight %u, chunk %zu): got %s at %llu%s, "
              "qemu-img would say %s at %llu%s", what, o.threads, o.inflight, o.chunk,
              ret < 0 ? failures_names[r.failure] : verdicts[r.verdict],
              (unsigned long long)r.offset, r.size_mismatch ? " (size warning)" : "",
              m.failure ? failures_names[m.failure] : verdicts[m.verdict],
              (unsigned long long)m.offset, m.size_mismatch ? " (size warning)" : "");
        if (!same)
            return;  /* one report per case is enough */
    }
}

static uint8_t *random_content(uint64_t size)
{
    uint8_t *c = calloc(1, size ? size : 1);
    for (uint64_t pos = 0; pos < size;) {
        uint64_t len = rnd_len();
        if (len > size - pos)
            len = size - pos;
        if (rnd_below(3) == 0)
            for (uint64_t i = pos; i < pos + len; i++)
                c[i] = (uint8_t)rnd();
        pos += len;
    }
    return c;
}

static void random_cases(int n)
{
    struct diag d;
    diag_init(&d);
    for (int i = 0; i < n; i++) {
        uint64_t sa = rnd_below(4) == 0 ? rnd_below(5000) : rnd_below(2 << 20);
        uint64_t sb = sa;
        switch (rnd_below(4)) {
        case 0: sb = sa + rnd_below(1 << 20); break;
        case 1: sb = sa > 0 ? rnd_below(sa) : 0; break;
        default: break;
        }
        uint64_t big = sa > sb ? sa : sb;
        uint8_t *ca = random_content(big);
        uint8_t *cb = malloc(big ? big : 1);
        memcpy(cb, ca, big);
        /* the larger image's tail: zeros or not */
        uint64_t small = sa < sb ? sa : sb;
        if (rnd_below(2))
            memset((sa > sb ? ca : cb) + small, 0, big - small);
        int changes = (int)rnd_below(4);
        for (int c = 0; c < changes && big; c++)
            cb[rnd_below(big)] ^= (uint8_t)(1 + rnd_below(255));
        struct fake *a = fake_new(ca, sa, &d, "a");
        struct fake *b = fake_new(cb, sb, &d, "b");
        char what[64];
        snprintf(what, sizeof(what), "case %d (%llu vs %llu bytes)", i,
                 (unsigned long long)sa, (unsigned long long)sb);
        check_case(what, &a->bd, &b->bd, false);
        check_case(what, &b->bd, &a->bd, false);
        check_case(what, &a->bd, &b->bd, true);
        /* the same content with other extents: strict mode sees them */
        struct fake *a2 = fake_new(ca, sa, &d, "a2");
        check_case(what, &a->bd, &a2->bd, false);
        check_case(what, &a2->bd, &a->bd, true);
        bd_close(&a2->bd);
        bd_close(&a->bd);
        bd_close(&b->bd);
        free(ca);
        free(cb);
    }
}

/* Failures injected into identical images; a difference before a
 * block-status failure still wins. */
static void failure_cases(void)
{
    struct diag d;
    uint64_t size = 3 << 20;
    uint8_t *c = random_content(size);
    diag_init(&d);
    for (int i = 0; i < 40; i++) {
        struct fake *a = fake_new(c, size, &d, "a");
        struct fake *b = fake_new(c, size, &d, "b");
        uint64_t at = rnd_below(size);
        if (i % 2)
            b->fail_read_at = (int64_t)at;
        else
            a->fail_status_at = (int64_t)at;
        check_case(i % 2 ? "read failure" : "status failure", &a->bd, &b->bd, false);
        bd_close(&a->bd);
        bd_close(&b->bd);
    }
    /* a changed byte well before a failing extent decides */
    uint8_t *c2 = malloc(size);
    memcpy(c2, c, size);
    memset(c2 + 1000, 0x5a, 10);
    struct fake *a = fake_new(c, size, &d, "a");
    struct fake *b = fake_new(c2, size, &d, "b");
    b->fail_status_at = (int64_t)size - 1;
    check_case("difference before a status failure", &a->bd, &b->bd, false);
    bd_close(&a->bd);
    bd_close(&b->bd);
    free(c2);
    free(c);
}

int main(void)
{
    random_cases(80);
    failure_cases();
    if (failures) {
        fprintf(stderr, "%d checks failed\n", failures);
        return 1;
    }
    printf("compare: all checks passed\n");
    return 0;
}
