/* qcow2 to a stream (a pipe on stdout): every byte written once, in order.
 *
 * A stream cannot be seeked back to fill in tables, so the conversion runs
 * twice over the (seekable) source:
 *   pass 1  plans: the convert pipeline hands over its data clusters as
 *           usual (zero runs never arrive), and this driver only records
 *           which guest clusters hold data -- one bit per cluster, kept
 *           per L2 table so that untouched ranges cost nothing -- and, with
 *           -c, which of them compress and to how many bytes (4 bytes per
 *           compressed cluster, at most QCOW2S_MAX_COMPRESSED of them).
 *   between the passes the layout is fixed and the metadata written:
 *           header, refcount table, refcount blocks, L1 table, L2 tables.
 *   pass 2  the pipeline runs again and the data clusters are written in
 *           ascending guest order, each where the plan put it.
 * Layout: cluster 0 header, then the refcount table, the refcount blocks,
 * the L1 table, the L2 tables (in L1 order, only for tables with data),
 * then the data: plain clusters whole, compressed ones packed byte after
 * byte (straddling clusters, a host cluster shared by at most as many as
 * the refcount width allows).  The file ends on a cluster boundary.
 *
 * A plan is only as good as the source is stable: a cluster that was zero
 * in pass 1 and holds data in pass 2, or that compresses differently, fails
 * the conversion; a planned plain cluster that does not come again is
 * written as zeros (the source reads as zeros there now).
 */
#include <errno.h>
#include <stdarg.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "formats/qcow2/qcow2.h"
#include "formats/qcow2/format.h"
#include "formats/qcow2/refcount_entry.h"
#include "formats/qcow2/write.h"
#include "io/bfile.h"
#include "util/diag.h"
#include "util/endian.h"

/* 32 MiB of sizes: 512 GiB of compressed data with 64 KiB clusters */
#define QCOW2S_MAX_COMPRESSED (8u << 20)
#define EXTL2_ALL_ALLOCATED 0x00000000ffffffffULL

struct qcow2s {
    struct bd bd;
    struct qcow2w_params p;
    unsigned cbits;
    uint64_t cs;
    uint64_t l2_entries;        /* entries per L2 table */
    unsigned l2e;               /* bytes per L2 entry */
    uint64_t l1_entries;
    uint64_t clusters;          /* guest clusters */
    uint64_t rc_max;
    uint64_t rc_per_block;
    int pass;                   /* 1 plan, 2 write, 3 finished */
    int err;

    /* the plan: per L1 index, 2 bits per guest cluster (data, compressed),
     * NULL for tables without data */
    uint8_t **plan;
    uint32_t *csize;            /* compressed sizes, in guest order */
    uint64_t ncsize, csize_cap;
    uint64_t last_guest;        /* planning and writing go forward only */

    /* the layout */
    uint64_t reft_at, reft_clusters, blocks_at, blocks, l1_at, l1_clusters;
    uint64_t l2_at, l2_tables, data_at, total;  /* cluster indexes / counts */

    /* writing (pass 2): where the next planned cluster goes */
    struct placer {
        uint64_t next;          /* next fresh host cluster */
        uint64_t ctail;         /* byte after the last compressed cluster, 0 = none */
        uint64_t tail_rc;       /* compressed clusters touching ctail's cluster */
        uint64_t g;             /* next guest cluster to look at */
        uint64_t ci;            /* index of the next compressed size */
    } wr;
    uint64_t pos;               /* bytes written to the stream */
    uint8_t *zero;              /* one cluster of zeros */
};

static struct qcow2s *to_s(struct bd *bd)
{
    return (struct qcow2s *)bd;
}

static uint64_t div_up(uint64_t a, uint64_t b)
{
    return a / b + (a % b != 0);
}

static int set_err(struct qcow2s *s, int r)
{
    if (r < 0 && !s->err)
        s->err = r;
    return r;
}

static int fail(struct qcow2s *s, int err, int64_t off, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int fail(struct qcow2s *s, int err, int64_t off, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int r = diag_vfail(s->bd.diag, err, s->bd.filename, off, fmt, ap);
    va_end(ap);
    return set_err(s, r);
}

static int changed(struct qcow2s *s, uint64_t g, const char *what)
{
    return fail(s, -EIO, (int64_t)(g << s->cbits), "the source changed between the two "
                "passes of qcow2 output to a stream: the guest cluster at offset %" PRIu64
                " %s", g << s->cbits, what);
}

/* ---- the plan ------------------------------------------------------------- */

/* Plan bits of guest cluster g: bit 0 data, bit 1 compressed. */
static unsigned plan_get(const struct qcow2s *s, uint64_t g)
{
    const uint8_t *t = s->plan[g / s->l2_entries];
    uint64_t j = (g % s->l2_entries) * 2;

    return t ? (t[j / 8] >> (j % 8)) & 3 : 0;
}

static int plan_set(struct qcow2s *s, uint64_t g, unsigned bits)
{
    uint8_t **t = &s->plan[g / s->l2_entries];
    uint64_t j = (g % s->l2_entries) * 2;

    if (!*t && !(*t = calloc(1, div_up(s->l2_entries * 2, 8))))
        return fail(s, -ENOMEM, -1, "out of memory");
    (*t)[j / 8] |= (uint8_t)(bits << (j % 8));
    return 0;
}

/* Writes come in ascending guest order; check it (planning depends on it). */
static int check_write(struct qcow2s *s, uint64_t off, uint64_t len, const char *op)
{
    if (s->err)
        return s->err;
    if (s->pass > 2)
        return fail(s, -EINVAL, (int64_t)off, "internal error: %s after finish", op);
    /* whole clusters; only the image's last cluster may come short */
    if (len == 0 || off >= s->p.size || len > s->p.size - off || (off & (s->cs - 1)) ||
        ((len & (s->cs - 1)) && div_up(off + len, s->cs) != s->clusters))
        return fail(s, -EINVAL, (int64_t)off, "internal error: %s of %" PRIu64 " bytes at "
                    "offset %" PRIu64 " is not whole clusters inside the image", op, len, off);
    uint64_t g = off >> s->cbits;
    if (g < s->last_guest)
        return fail(s, -EINVAL, (int64_t)off, "internal error: out-of-order %s to a "
                    "stream", op);
    s->last_guest = g + div_up(len, s->cs);
    return 0;
}

/* ---- placement: where each planned cluster goes --------------------------- */

static void placer_init(const struct qcow2s *s, struct placer *pl)
{
    memset(pl, 0, sizeof(*pl));
    pl->next = s->data_at;
}

/* Place the next planned cluster at or after pl->g: *g, *bits, and either
 * the host byte offset and length (compressed) or the host offset of a
 * whole cluster.  Returns 0 when there is none left. */
static int place_next(const struct qcow2s *s, struct placer *pl, uint64_t *g,
                      unsigned *bits, uint64_t *host, uint32_t *clen)
{
    unsigned b = 0;

    while (pl->g < s->clusters) {
        if (!s->plan[pl->g / s->l2_entries]) {
            pl->g = (pl->g / s->l2_entries + 1) * s->l2_entries;
            continue;
        }
        if ((b = plan_get(s, pl->g)))
            break;
        pl->g++;
    }
    if (pl->g >= s->clusters)
        return 0;
    *g = pl->g++;
    *bits = b;
    if (!(b & 2)) {
        pl->ctail = 0;
        *host = pl->next++ << s->cbits;
        *clen = 0;
        return 1;
    }
    uint32_t n = s->csize[pl->ci++];
    /* into the partly used cluster while its count can grow, else fresh */
    if (pl->ctail && pl->tail_rc < s->rc_max) {
        *host = pl->ctail;
        pl->tail_rc++;
    } else {
        *host = pl->next << s->cbits;
        pl->tail_rc = 1;
    }
    uint64_t end = *host + n;
    uint64_t last = (end - 1) >> s->cbits;
    if (last >= pl->next)
        pl->next = last + 1;
    if (last > *host >> s->cbits)
        pl->tail_rc = 1;    /* the data runs on into a new cluster */
    pl->ctail = (end & (s->cs - 1)) ? end : 0;
    *clen = n;
    return 1;
}

/* ---- pass 1 --------------------------------------------------------------- */

static int plan_pwrite(struct qcow2s *s, uint64_t off, size_t len)
{
    int r = check_write(s, off, len, "write");

    for (uint64_t g = off >> s->cbits; r == 0 && g < div_up(off + len, s->cs); g++)
        r = plan_set(s, g, 1);
    return r;
}

static int plan_compressed(struct qcow2s *s, uint64_t off, size_t clen)
{
    int r = check_write(s, off, s->p.size - off < s->cs ? s->p.size - off : s->cs,
                        "compressed write");

    if (r < 0)
        return r;
    if (clen == 0 || clen >= s->cs)
        return fail(s, -EINVAL, (int64_t)off, "internal error: bad compressed write");
    if (s->ncsize == s->csize_cap) {
        if (s->ncsize >= QCOW2S_MAX_COMPRESSED)
            return fail(s, -EFBIG, (int64_t)off, "compressed qcow2 output to a stream "
                        "keeps 4 bytes per compressed cluster and takes at most %u of "
                        "them (%" PRIu64 " GiB with %" PRIu64 "-byte clusters); write to a "
                        "file, or use a larger cluster_size", QCOW2S_MAX_COMPRESSED,
                        ((uint64_t)QCOW2S_MAX_COMPRESSED << s->cbits) >> 30, s->cs);
        uint64_t cap = s->csize_cap ? s->csize_cap * 2 : 4096;
        uint32_t *n = realloc(s->csize, cap * sizeof(*n));
        if (!n)
            return fail(s, -ENOMEM, -1, "out of memory");
        s->csize = n;
        s->csize_cap = cap;
    }
    s->csize[s->ncsize++] = (uint32_t)clen;
    return plan_set(s, off >> s->cbits, 3);
}

/* ---- between the passes: layout and metadata ------------------------------ */

static int layout(struct qcow2s *s)
{
    struct placer pl;
    uint64_t g, host, b = 0, t = 0, fixed;
    uint32_t clen;
    unsigned bits;

    s->l2_tables = 0;
    for (uint64_t i = 0; i < s->l1_entries; i++)
        s->l2_tables += s->plan[i] != NULL;
    s->l1_clusters = div_up(s->l1_entries * 8, s->cs);
    /* the data's own extent, placed from 0 */
    s->data_at = 0;
    placer_init(s, &pl);
    while (place_next(s, &pl, &g, &bits, &host, &clen))
        ;
    uint64_t data_clusters = pl.next;
    fixed = 1 + s->l1_clusters + s->l2_tables + data_clusters;
    for (int iter = 0;; iter++) {
        uint64_t total = fixed + t + b;
        uint64_t b2 = div_up(total, s->rc_per_block), t2 = div_up(b2 * 8, s->cs);
        if (b2 == b && t2 == t)
            break;
        if (iter > 64 || (t2 << s->cbits) > QCOW2_MAX_REFT_BYTES)
            return fail(s, -EFBIG, -1, "the image would need a refcount table larger than "
                        "%u bytes; use a larger cluster_size", QCOW2_MAX_REFT_BYTES);
        b = b2;
        t = t2;
    }
    s->reft_at = 1;
    s->reft_clusters = t;
    s->blocks_at = 1 + t;
    s->blocks = b;
    s->l1_at = s->blocks_at + b;
    s->l2_at = s->l1_at + s->l1_clusters;
    s->data_at = s->l2_at + s->l2_tables;
    s->total = s->data_at + data_clusters;
    if (s->total > (UINT64_C(1) << (56 - s->cbits)))
        return fail(s, -EFBIG, -1, "the image would be larger than qcow2 can address");
    return 0;
}

static int emit(struct qcow2s *s, const void *buf, uint64_t len)
{
    int r = bfile_pwrite(s->bd.file, buf, (size_t)len, s->pos);

    if (r < 0)
        return set_err(s, r);
    s->pos += len;
    return 0;
}

static int emit_zeros(struct qcow2s *s, uint64_t upto)
{
    while (s->pos < upto) {
        uint64_t n = upto - s->pos < s->cs ? upto - s->pos : s->cs;
        int r = emit(s, s->zero, n);
        if (r < 0)
            return r;
    }
    return 0;
}

/* Refcount blocks: metadata 1, data clusters 1 or as many compressed
 * clusters as share them, nothing past the end. */
struct rcgen {
    struct qcow2s *s;
    uint8_t *blk;
    uint64_t idx;       /* block in blk */
};

static int rcgen_flush_to(struct rcgen *rg, uint64_t idx)
{
    struct qcow2s *s = rg->s;
    int r;

    while (rg->idx < idx) {
        if ((r = emit(s, rg->blk, s->cs)) < 0)
            return r;
        rg->idx++;
        memset(rg->blk, 0, s->cs);
    }
    return 0;
}

static int rcgen_add(struct rcgen *rg, uint64_t c, uint64_t n)
{
    struct qcow2s *s = rg->s;
    int r = rcgen_flush_to(rg, c / s->rc_per_block);

    if (r < 0)
        return r;
    uint64_t j = c % s->rc_per_block;
    uint64_t v = qcow2_rc_entry_get(rg->blk, s->p.refcount_order, j) + n;
    qcow2_rc_entry_set(rg->blk, s->p.refcount_order, j, v);
    return 0;
}

static int write_refblocks(struct qcow2s *s)
{
    struct rcgen rg = { .s = s, .blk = calloc(1, s->cs) };
    struct placer pl;
    uint64_t g, host;
    uint32_t clen;
    unsigned bits;
    int r = 0;

    if (!rg.blk)
        return fail(s, -ENOMEM, -1, "out of memory");
    for (uint64_t c = 0; r == 0 && c < s->data_at; c++)
        r = rcgen_add(&rg, c, 1);
    placer_init(s, &pl);
    while (r == 0 && place_next(s, &pl, &g, &bits, &host, &clen)) {
        if (!(bits & 2)) {
            r = rcgen_add(&rg, host >> s->cbits, 1);
            continue;
        }
        for (uint64_t c = host >> s->cbits; r == 0 && c <= (host + clen - 1) >> s->cbits; c++)
            r = rcgen_add(&rg, c, 1);
    }
    if (r == 0)
        r = rcgen_flush_to(&rg, s->blocks);
    free(rg.blk);
    return r;
}

static int write_l1(struct qcow2s *s)
{
    uint8_t *buf = calloc(1, s->cs);
    uint64_t per = s->cs / 8, l2 = s->l2_at;
    int r = 0;

    if (!buf)
        return fail(s, -ENOMEM, -1, "out of memory");
    for (uint64_t k = 0; r == 0 && k < s->l1_clusters; k++) {
        memset(buf, 0, s->cs);
        for (uint64_t j = 0; j < per && k * per + j < s->l1_entries; j++)
            if (s->plan[k * per + j])
                be64_put(buf + 8 * j, (l2++ << s->cbits) | QCOW2_L1_COPIED);
        r = emit(s, buf, s->cs);
    }
    free(buf);
    return r;
}

static int write_l2(struct qcow2s *s)
{
    uint8_t *tab = calloc(1, s->cs);
    struct placer pl;
    uint64_t g, host, cur = UINT64_MAX;
    uint32_t clen;
    unsigned bits;
    int r = 0;

    if (!tab)
        return fail(s, -ENOMEM, -1, "out of memory");
    placer_init(s, &pl);
    while (r == 0 && place_next(s, &pl, &g, &bits, &host, &clen)) {
        if (g / s->l2_entries != cur) {
            if (cur != UINT64_MAX && (r = emit(s, tab, s->cs)) < 0)
                break;
            memset(tab, 0, s->cs);
            cur = g / s->l2_entries;
        }
        uint8_t *e = tab + (g % s->l2_entries) * s->l2e;
        if (bits & 2) {
            uint64_t v = qcow2w_compressed_entry(s->cbits, host, clen);
            if (!v) {
                r = fail(s, -EFBIG, (int64_t)host, "compressed cluster lies beyond what "
                         "a compressed descriptor can address");
                break;
            }
            be64_put(e, v);
        } else {
            be64_put(e, host | QCOW2_L2_COPIED);
            if (s->p.extended_l2)
                be64_put(e + 8, EXTL2_ALL_ALLOCATED);
        }
    }
    if (r == 0 && cur != UINT64_MAX)
        r = emit(s, tab, s->cs);
    free(tab);
    return r;
}

static int write_metadata(struct qcow2s *s)
{
    struct qcow2w_layout lay = {
        .l1_offset = s->l1_at << s->cbits, .l1_entries = (uint32_t)s->l1_entries,
        .reftable_offset = s->reft_at << s->cbits,
        .reftable_clusters = (uint32_t)s->reft_clusters,
    };
    uint8_t *buf = malloc(s->cs);
    char err[256];
    int r;

    if (!buf)
        return fail(s, -ENOMEM, -1, "out of memory");
    r = qcow2w_header_encode(&s->p, &lay, buf, s->cs, err, sizeof(err));
    if (r < 0) {
        free(buf);
        return fail(s, r, 0, "%s", err);
    }
    r = emit(s, buf, s->cs);
    /* the refcount table */
    uint64_t per = s->cs / 8;
    for (uint64_t k = 0; r == 0 && k < s->reft_clusters; k++) {
        memset(buf, 0, s->cs);
        for (uint64_t j = 0; j < per && k * per + j < s->blocks; j++)
            be64_put(buf + 8 * j, (s->blocks_at + k * per + j) << s->cbits);
        r = emit(s, buf, s->cs);
    }
    free(buf);
    if (r == 0)
        r = write_refblocks(s);
    if (r == 0)
        r = write_l1(s);
    if (r == 0)
        r = write_l2(s);
    if (r == 0 && s->pos != s->data_at << s->cbits)
        r = fail(s, -EIO, (int64_t)s->pos, "internal error: metadata ends at %" PRIu64
                 ", the data should start at %" PRIu64, s->pos, s->data_at << s->cbits);
    return r;
}

static int s_next_pass(struct bd *bd)
{
    struct qcow2s *s = to_s(bd);
    int r;

    if (s->err)
        return s->err;
    if (s->pass != 1)
        return 0;
    if ((r = layout(s)) < 0 || (r = write_metadata(s)) < 0)
        return r;
    placer_init(s, &s->wr);
    s->pass = 2;
    s->last_guest = 0;
    return 1;
}

/* ---- pass 2 ----------------------------------------------------------------- */

/* Write planned clusters before guest cluster `upto` that did not come
 * again: plain ones as zeros (the source reads as zeros there now). */
static int catch_up(struct qcow2s *s, uint64_t upto)
{
    struct placer save;
    uint64_t g, host;
    uint32_t clen;
    unsigned bits;
    int r;

    for (;;) {
        save = s->wr;
        if (!place_next(s, &s->wr, &g, &bits, &host, &clen) || g >= upto) {
            s->wr = save;
            return 0;
        }
        if (bits & 2)
            return changed(s, g, "was compressed in the first pass and is gone now");
        if ((r = emit_zeros(s, host)) < 0 || (r = emit(s, s->zero, s->cs)) < 0)
            return r;
    }
}

static int write_pwrite(struct qcow2s *s, const uint8_t *buf, size_t len, uint64_t off)
{
    uint64_t g0 = off >> s->cbits, n = div_up(len, s->cs), g, host;
    uint32_t clen;
    unsigned bits;
    int r;

    if ((r = check_write(s, off, len, "write")) < 0 || (r = catch_up(s, g0)) < 0)
        return r;
    for (uint64_t i = 0; i < n; i++) {
        if (!place_next(s, &s->wr, &g, &bits, &host, &clen) || g != g0 + i)
            return changed(s, g0 + i, "was zeros in the first pass and holds data now");
        if (bits & 2)
            return changed(s, g, "compressed in the first pass and does not now");
        if ((r = emit_zeros(s, host)) < 0)
            return r;
        uint64_t piece = len - i * s->cs < s->cs ? len - i * s->cs : s->cs;
        /* whole clusters in one write where they follow each other */
        uint64_t run = 1;
        struct placer save = s->wr;
        while (i + run < n) {
            uint64_t g2, h2;
            uint32_t c2;
            unsigned b2;
            if (!place_next(s, &s->wr, &g2, &b2, &h2, &c2) || g2 != g + run || (b2 & 2) ||
                h2 != host + (run << s->cbits)) {
                s->wr = save;
                break;
            }
            save = s->wr;
            run++;
        }
        if (run > 1)
            piece = (len - i * s->cs) < (run << s->cbits) ? len - i * s->cs : run << s->cbits;
        if ((r = emit(s, buf + i * s->cs, piece)) < 0)
            return r;
        /* the image's last cluster may be short: fill it */
        if ((r = emit_zeros(s, host + (run << s->cbits))) < 0)
            return r;
        i += run - 1;
    }
    return 0;
}

static int write_compressed(struct qcow2s *s, const void *cdata, size_t clen, uint64_t off)
{
    uint64_t g0 = off >> s->cbits, g, host;
    uint32_t plen;
    unsigned bits;
    int r = check_write(s, off, s->p.size - off < s->cs ? s->p.size - off : s->cs,
                        "compressed write");

    if (r < 0 || (r = catch_up(s, g0)) < 0)
        return r;
    if (!place_next(s, &s->wr, &g, &bits, &host, &plen) || g != g0)
        return changed(s, g0, "was zeros in the first pass and holds data now");
    if (!(bits & 2) || plen != clen)
        return changed(s, g, "compresses differently now");
    if ((r = emit_zeros(s, host)) < 0)
        return r;
    return emit(s, cdata, clen);
}

/* ---- the driver ------------------------------------------------------------- */

static int s_pwrite(struct bd *bd, const void *buf, size_t len, uint64_t off,
                    ioq_done_fn done, void *opaque)
{
    struct qcow2s *s = to_s(bd);
    int r = s->pass == 1 ? plan_pwrite(s, off, len) : write_pwrite(s, buf, len, off);

    done(opaque, r);
    return r;
}

static int s_pwrite_compressed(struct bd *bd, const void *cdata, size_t clen, uint64_t off,
                               ioq_done_fn done, void *opaque)
{
    struct qcow2s *s = to_s(bd);
    int r = s->pass == 1 ? plan_compressed(s, off, clen)
                         : write_compressed(s, cdata, clen, off);

    done(opaque, r);
    return r;
}

static int s_write_zeroes(struct bd *bd, uint64_t off, uint64_t len)
{
    /* a new image without a backing file reads as zeros wherever nothing
     * was written */
    (void)bd, (void)off, (void)len;
    return 0;
}

static ssize_t s_compress(struct bd *bd, const void *in, size_t len, void *out, size_t cap)
{
    struct qcow2s *s = to_s(bd);

    return qcow2w_compress_granule(s->p.compression_type, in, len, s->cs, NULL, out, cap);
}

static int s_finish(struct bd *bd)
{
    struct qcow2s *s = to_s(bd);
    int r;

    if (s->err)
        return s->err;
    /* finish without a conversion pass (create): an empty image */
    if (s->pass == 1 && (r = s_next_pass(bd)) < 0)
        return r;
    if (s->pass != 2)
        return fail(s, -EINVAL, -1, "internal error: finish called twice");
    if ((r = catch_up(s, s->clusters)) < 0 || (r = emit_zeros(s, s->total << s->cbits)) < 0)
        return r;
    s->pass = 3;
    return 0;
}

static void s_abort(struct bd *bd)
{
    struct qcow2s *s = to_s(bd);

    s->pass = 3;
    if (!s->err)
        s->err = -ECANCELED;
}

static void s_close(struct bd *bd)
{
    struct qcow2s *s = to_s(bd);

    for (uint64_t i = 0; s->plan && i < s->l1_entries; i++)
        free(s->plan[i]);
    free(s->plan);
    free(s->csize);
    free(s->zero);
    bd_release(bd);
    free(s);
}

static const struct bd_driver bd_qcow2_stream = {
    .name = "qcow2",
    .create_options_help = qcow2w_options_help,
    .pwrite = s_pwrite,
    .write_zeroes = s_write_zeroes,
    .compress = s_compress,
    .pwrite_compressed = s_pwrite_compressed,
    .next_pass = s_next_pass,
    .finish = s_finish,
    .abort = s_abort,
    .close = s_close,
};

int qcow2s_create(struct bd **out, struct bfile *f, const struct bd_create_opts *o,
                  struct diag *d)
{
    struct qcow2w_params p;
    struct qcow2s *s;
    char err[256];
    int r;

    *out = NULL;
    if ((r = qcow2w_parse_params(o->o, o, &p, err, sizeof(err))) < 0)
        return diag_fail(d, r, f->path, -1, "%s", err);
    if (p.prealloc != QCOW2W_PREALLOC_OFF)
        return diag_fail(d, -ENOTSUP, f->path, -1,
                         "preallocation is not supported for qcow2 output to a stream");
    if (p.backing_file)
        return diag_fail(d, -ENOTSUP, f->path, -1, "a backing file is not supported for "
                         "qcow2 output to a stream");
    uint64_t l1 = qcow2w_l1_entries(&p, err, sizeof(err));
    if (!l1)
        return diag_fail(d, -EFBIG, f->path, -1, "%s", err);
    if (!(s = calloc(1, sizeof(*s))))
        return diag_fail(d, -ENOMEM, f->path, -1, "out of memory");
    bd_init(&s->bd, &bd_qcow2_stream, f, d);
    s->p = p;
    s->p.backing_file = s->p.backing_fmt = NULL;
    s->cbits = p.cluster_bits;
    s->cs = UINT64_C(1) << p.cluster_bits;
    s->l2e = p.extended_l2 ? 16 : 8;
    s->l2_entries = s->cs / s->l2e;
    s->l1_entries = l1;
    s->clusters = div_up(p.size, s->cs);
    s->rc_max = qcow2_rc_max(p.refcount_order);
    s->rc_per_block = (s->cs * 8) >> p.refcount_order;
    s->pass = 1;
    s->bd.size = p.size;
    s->bd.granule = (uint32_t)s->cs;
    s->plan = calloc(l1, sizeof(*s->plan));
    s->zero = calloc(1, s->cs);
    if (!s->plan || !s->zero) {
        s->bd.file = NULL;      /* the caller still owns the file */
        s_close(&s->bd);
        return diag_fail(d, -ENOMEM, f->path, -1, "out of memory");
    }
    *out = &s->bd;
    return 0;
}
