/* VHDX: the log.  An image whose current header names a log (non-zero
 * LogGuid) was not closed cleanly: the log's active sequence holds
 * metadata writes that may not have reached their places.
 *
 * Finding the active sequence ([MS-VHDX] 2.3.3): the log is a ring of
 * 4 KiB sectors.  An entry is valid when its header decodes, carries the
 * header's LogGuid, its descriptors and data sectors carry its sequence
 * number, and its CRC-32C matches.  Entries that follow each other in the
 * ring with consecutive sequence numbers form a sequence; a sequence is
 * usable when the Tail of its last entry (the head) is one of its entries.
 * The active sequence is the usable one with the largest head sequence
 * number; its entries from the tail to the head are replayed in order.
 * The ring is scanned once from its start: where no valid entry starts,
 * the next sector is tried; after a sequence, the sector past it.  Each
 * position is judged once (memoized), and the bytes checksummed are
 * bounded (a hostile log of overlapping entry headers would otherwise cost
 * the square of its size).
 *
 * Replay happens in memory: the writes become an overlay that every read
 * of the file's metadata and blocks goes through (vhdx_vread), so info,
 * convert and compare read the replayed image while the file stays as it
 * is.  A file shorter than the head's FlushedFileOffset lost writes the
 * log relied on: an error.  The log may write past the end of the file (up
 * to the head's LastFileOffset): the file is then taken as extended to its
 * last write, and past its real end only the bytes the log writes are
 * there (anything else there is a truncated image, never zeros).
 * check -r all writes the overlay into the file (vhdx_log_commit) and then
 * both headers without the log.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "formats/vhdx/vhdx_int.h"
#include "io/bfile.h"
#include "util/diag.h"
#include "util/endian.h"

/* The largest log replayed (bytes); the log is read whole (twice its size
 * in memory: the ring is doubled so that an entry that wraps is contiguous). */
#define VHDX_MAX_LOG (64 * VHDX_MIB)

static struct diag *D(struct vhdx *v)
{
    return v->bd.diag;
}

/* One position of the ring, judged once. */
struct pos {
    signed char state;          /* 0 not yet judged, 1 valid, -1 not */
    uint64_t seq;
    uint32_t len;               /* entry length */
};

struct scan {
    struct vhdx *v;
    const uint8_t *ring;        /* 2 * len bytes: the log twice */
    uint32_t len;
    struct pos *pos;            /* len / 4 KiB */
    uint64_t crc_left;          /* bytes that may still be checksummed */
    char why[200];              /* why the last entry judged was invalid */
};

/* Data descriptors of an entry (each needs one data sector). */
static int entry_valid(struct scan *s, uint32_t p, struct vhdx_log_hdr *h)
{
    const uint8_t *e = s->ring + p;
    struct vhdx_log_desc d;
    uint32_t nd = 0;

    if (vhdx_log_hdr_decode(e, s->len, h, s->why, sizeof(s->why)) < 0)
        return -EINVAL;
    if (memcmp(h->log_guid, s->v->hdr.log_guid, 16) != 0) {
        snprintf(s->why, sizeof(s->why), "log entry of another log (GUID differs)");
        return -EINVAL;
    }
    uint64_t ds = vhdx_log_desc_sectors(h->desc_count);
    for (uint32_t i = 0; i < h->desc_count; i++) {
        if (vhdx_log_desc_decode(e + VHDX_LOG_HDR_SIZE + (size_t)i * VHDX_LOG_DESC_SIZE,
                                 h->seq, &d, s->why, sizeof(s->why)) < 0)
            return -EINVAL;
        if (d.zero)
            continue;
        if ((ds + nd + 1) * VHDX_LOG_SECTOR > h->entry_length) {
            snprintf(s->why, sizeof(s->why), "log entry of %u bytes is too short for its "
                     "data sectors", h->entry_length);
            return -EINVAL;
        }
        uint8_t tmp[VHDX_LOG_SECTOR];
        if (vhdx_log_data_decode(e + (ds + nd) * VHDX_LOG_SECTOR, &d, h->seq, tmp, s->why,
                                 sizeof(s->why)) < 0)
            return -EINVAL;
        nd++;
    }
    if (h->entry_length > s->crc_left) {
        snprintf(s->why, sizeof(s->why), "the log holds too many overlapping entries to "
                 "search (corrupt log)");
        return -E2BIG;
    }
    s->crc_left -= h->entry_length;
    uint32_t c = vhdx_log_checksum(e, h->entry_length);
    if (c != h->checksum) {
        snprintf(s->why, sizeof(s->why), "log entry checksum mismatch (stored %08x, "
                 "computed %08x)", h->checksum, c);
        return -EINVAL;
    }
    return 0;
}

/* Is there a valid entry at p?  1 yes, 0 no, < 0 the search must stop. */
static int judge(struct scan *s, uint32_t p)
{
    struct pos *x = &s->pos[p / VHDX_LOG_SECTOR];
    struct vhdx_log_hdr h;

    if (x->state)
        return x->state > 0;
    int r = entry_valid(s, p, &h);
    if (r == -E2BIG)
        return r;
    x->state = r == 0 ? 1 : -1;
    x->seq = h.seq;
    x->len = h.entry_length;
    return r == 0;
}

struct active {
    bool found;
    uint32_t tail, head;        /* positions */
    uint64_t head_seq;
    uint32_t entries;           /* tail .. head */
};

/* The active sequence, or none found. */
static int find_active(struct scan *s, struct active *best)
{
    uint32_t n = s->len / VHDX_LOG_SECTOR;
    uint32_t *seqpos = malloc(n * sizeof(*seqpos));
    int r = 0;

    memset(best, 0, sizeof(*best));
    if (!seqpos)
        return diag_fail(D(s->v), -ENOMEM, s->v->bd.filename, -1, "out of memory");
    for (uint64_t p = 0; p < s->len;) {
        if ((r = judge(s, (uint32_t)p)) < 0)
            goto out;
        if (r == 0) {
            p += VHDX_LOG_SECTOR;
            continue;
        }
        /* follow the sequence that starts here */
        uint32_t cnt = 0, q = (uint32_t)p;
        uint64_t total = 0;
        for (;;) {
            const struct pos *x = &s->pos[q / VHDX_LOG_SECTOR];
            seqpos[cnt++] = q;
            total += x->len;
            if (total >= s->len || cnt == n)
                break;
            uint32_t nq = (uint32_t)((q + (uint64_t)x->len) % s->len);
            if ((r = judge(s, nq)) < 0)
                goto out;
            if (r == 0 || s->pos[nq / VHDX_LOG_SECTOR].seq != x->seq + 1)
                break;
            q = nq;
        }
        /* the head's tail must be one of the sequence's entries */
        const uint8_t *he = s->ring + q;
        uint32_t tail = le32_get(he + 12);
        uint64_t head_seq = s->pos[q / VHDX_LOG_SECTOR].seq;
        for (uint32_t i = 0; i < cnt; i++)
            if (seqpos[i] == tail) {
                if (!best->found || head_seq > best->head_seq) {
                    best->found = true;
                    best->tail = tail;
                    best->head = q;
                    best->head_seq = head_seq;
                    best->entries = cnt - i;
                }
                break;
            }
        p += total;
    }
    r = 0;
out:
    free(seqpos);
    if (r < 0)
        return diag_fail(D(s->v), -EINVAL, s->v->bd.filename,
                         (int64_t)s->v->hdr.log_offset, "%s", s->why);
    return 0;
}

/* --- the overlay ------------------------------------------------------------------ */

static int op_cmp(const void *a, const void *b)
{
    const struct vhdx_ov_op *x = a, *y = b;
    return x->off < y->off ? -1 : x->off > y->off;
}

/* A max-heap of op indexes by order. */
struct heap {
    uint32_t *h;
    size_t n;
};

static void heap_push(struct heap *hp, const struct vhdx_ov_op *ops, uint32_t i)
{
    size_t k = hp->n++;
    hp->h[k] = i;
    while (k && ops[hp->h[(k - 1) / 2]].order < ops[hp->h[k]].order) {
        uint32_t t = hp->h[k];
        hp->h[k] = hp->h[(k - 1) / 2];
        hp->h[(k - 1) / 2] = t;
        k = (k - 1) / 2;
    }
}

static void heap_pop(struct heap *hp, const struct vhdx_ov_op *ops)
{
    size_t k = 0;
    hp->h[0] = hp->h[--hp->n];
    for (;;) {
        size_t l = 2 * k + 1, r = l + 1, m = k;
        if (l < hp->n && ops[hp->h[l]].order > ops[hp->h[m]].order)
            m = l;
        if (r < hp->n && ops[hp->h[r]].order > ops[hp->h[m]].order)
            m = r;
        if (m == k)
            break;
        uint32_t t = hp->h[k];
        hp->h[k] = hp->h[m];
        hp->h[m] = t;
        k = m;
    }
}

/* The ops (in write order) as non-overlapping segments: a sweep over the
 * ops sorted by start with a heap of those covering the sweep point, the
 * latest on top. */
int vhdx_ov_build(struct vhdx_ov_op *ops, size_t n, struct vhdx_overlay *ov)
{
    struct heap hp = { malloc((n ? n : 1) * sizeof(uint32_t)), 0 };
    /* each op start and end is a boundary: at most 2n segments */
    ov->seg = malloc((2 * n + 1) * sizeof(*ov->seg));
    ov->n = 0;
    if (!hp.h || !ov->seg) {
        free(hp.h);
        free(ov->seg);
        ov->seg = NULL;
        return -ENOMEM;
    }
    if (n)
        qsort(ops, n, sizeof(*ops), op_cmp);
    size_t i = 0;
    uint64_t x = n ? ops[0].off : 0;
    while (i < n || hp.n) {
        while (i < n && ops[i].off <= x)
            heap_push(&hp, ops, (uint32_t)i++);
        while (hp.n && ops[hp.h[0]].end <= x)
            heap_pop(&hp, ops);
        if (!hp.n) {
            if (i < n)
                x = ops[i].off;
            continue;
        }
        /* the top covers x; the segment ends at its end or the next start */
        const struct vhdx_ov_op *top = &ops[hp.h[0]];
        uint64_t end = top->end;
        if (i < n && ops[i].off < end)
            end = ops[i].off;
        /* a lower op may end first: it no longer matters (the top covers
         * [x, end) whatever ends below it) */
        const uint8_t *d = top->data ? top->data + (x - top->off) : NULL;
        struct vhdx_ov_seg *last = ov->n ? &ov->seg[ov->n - 1] : NULL;
        if (last && last->off + last->len == x &&
            ((!last->data && !d) || (last->data && d && last->data + last->len == d)))
            last->len += end - x;
        else
            ov->seg[ov->n++] = (struct vhdx_ov_seg){ x, end - x, d };
        x = end;
    }
    free(hp.h);
    return 0;
}

void vhdx_ov_free(struct vhdx_overlay *ov)
{
    free(ov->seg);
    free(ov->data);
    memset(ov, 0, sizeof(*ov));
}

const struct vhdx_ov_seg *vhdx_ov_find(const struct vhdx_overlay *ov, uint64_t off,
                                       uint64_t len)
{
    size_t lo = 0, hi = ov->n;

    /* the first segment that ends past off */
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (ov->seg[mid].off + ov->seg[mid].len <= off)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo < ov->n && ov->seg[lo].off < off + len)
        return &ov->seg[lo];
    return NULL;
}

static int past_end(struct vhdx *v, uint64_t len, uint64_t off, const char *what)
{
    return diag_fail(D(v), -EINVAL, v->bd.filename, (int64_t)off, "%s (%llu bytes at %llu) is "
                     "past the end of the file (%llu bytes): truncated image", what,
                     (unsigned long long)len, (unsigned long long)off,
                     (unsigned long long)v->file_size);
}

int vhdx_vread(struct vhdx *v, void *buf, size_t len, uint64_t off, const char *what)
{
    uint8_t *p = buf;
    int r;

    if (off > v->vfile_size || len > v->vfile_size - off)
        return past_end(v, len, off, what);
    uint64_t in = off < v->file_size ? v->file_size - off : 0;
    if (in > len)
        in = len;
    if (in && (r = bfile_pread(v->bd.file, p, (size_t)in, off)) < 0)
        return r;
    if (in < len)
        memset(p + in, 0, len - (size_t)in);
    if (v->log.written)
        return 0;
    /* past the file's end only what the log writes is there */
    uint64_t need = off + in;
    for (const struct vhdx_ov_seg *s = vhdx_ov_find(&v->ov, off, len);
         s && s < v->ov.seg + v->ov.n && s->off < off + len; s++) {
        uint64_t a = s->off > off ? s->off : off;
        uint64_t b = s->off + s->len < off + len ? s->off + s->len : off + len;
        if (s->data)
            memcpy(p + (a - off), s->data + (a - s->off), (size_t)(b - a));
        else
            memset(p + (a - off), 0, (size_t)(b - a));
        if (a <= need && b > need)
            need = b;
    }
    if (need < off + len)
        return past_end(v, off + len - need, need, what);
    return 0;
}

/* --- replay ----------------------------------------------------------------------- */

/* Turn the entries tail..head into ops; data sectors are copied into
 * v->ov.data. */
static int collect(struct vhdx *v, struct scan *s, const struct active *a, uint64_t limit,
                   struct vhdx_ov_op **out, size_t *nout)
{
    size_t n = 0, cap = 0, nsec = 0;
    struct vhdx_ov_op *ops = NULL;
    uint32_t p = a->tail;
    char why[200];

    /* count the data sectors first (one buffer for all of them) */
    for (uint32_t k = 0; k < a->entries; k++) {
        struct vhdx_log_hdr h;
        const uint8_t *e = s->ring + p;
        vhdx_log_hdr_decode(e, s->len, &h, why, sizeof(why));
        for (uint32_t i = 0; i < h.desc_count; i++) {
            struct vhdx_log_desc d;
            vhdx_log_desc_decode(e + VHDX_LOG_HDR_SIZE + (size_t)i * VHDX_LOG_DESC_SIZE,
                                 h.seq, &d, why, sizeof(why));
            nsec += !d.zero;
            cap++;
        }
        p = (uint32_t)((p + (uint64_t)h.entry_length) % s->len);
    }
    uint64_t bytes = (uint64_t)nsec * VHDX_LOG_SECTOR + cap * (sizeof(struct vhdx_ov_op) +
                                                              2 * sizeof(struct vhdx_ov_seg));
    int r = bd_table_budget(&v->bd, bytes, v->bd.filename, "the replayed log");
    if (r < 0)
        return r;
    v->ov.bytes = bytes;
    v->ov.data = malloc(nsec ? nsec * VHDX_LOG_SECTOR : 1);
    ops = malloc((cap ? cap : 1) * sizeof(*ops));
    if (!v->ov.data || !ops) {
        free(ops);
        return diag_fail(D(v), -ENOMEM, v->bd.filename, -1, "out of memory");
    }
    nsec = 0;
    p = a->tail;
    for (uint32_t k = 0; k < a->entries; k++) {
        struct vhdx_log_hdr h;
        const uint8_t *e = s->ring + p;
        vhdx_log_hdr_decode(e, s->len, &h, why, sizeof(why));
        uint64_t ds = vhdx_log_desc_sectors(h.desc_count), nd = 0;
        for (uint32_t i = 0; i < h.desc_count; i++) {
            struct vhdx_log_desc d;
            vhdx_log_desc_decode(e + VHDX_LOG_HDR_SIZE + (size_t)i * VHDX_LOG_DESC_SIZE,
                                 h.seq, &d, why, sizeof(why));
            uint64_t len = d.zero ? d.zero_length : VHDX_LOG_SECTOR;
            if (d.file_offset > limit || len > limit - d.file_offset) {
                free(ops);
                return diag_fail(D(v), -EINVAL, v->bd.filename,
                                 (int64_t)(v->hdr.log_offset + p), "log entry %llu writes "
                                 "%llu bytes at %llu, past the file's end as the log "
                                 "leaves it (%llu bytes)", (unsigned long long)h.seq,
                                 (unsigned long long)len,
                                 (unsigned long long)d.file_offset,
                                 (unsigned long long)limit);
            }
            const uint8_t *data = NULL;
            if (!d.zero) {
                uint8_t *dst = v->ov.data + nsec++ * VHDX_LOG_SECTOR;
                vhdx_log_data_decode(e + (ds + nd++) * VHDX_LOG_SECTOR, &d, h.seq, dst, why,
                                     sizeof(why));
                data = dst;
            }
            ops[n] = (struct vhdx_ov_op){ d.file_offset, d.file_offset + len, data, (uint32_t)n };
            n++;
        }
        p = (uint32_t)((p + (uint64_t)h.entry_length) % s->len);
    }
    *out = ops;
    *nout = n;
    return 0;
}

int vhdx_log_replay(struct vhdx *v)
{
    const struct vhdx_header *h = &v->hdr;
    struct scan s = { .v = v, .len = h->log_length };
    struct active a;
    int r;

    if (!h->log_length)
        return diag_fail(D(v), -EINVAL, v->bd.filename, (int64_t)(VHDX_HEADER1_OFF +
                         v->cur * VHDX_HEADER_BLOCK), "the header names a log (GUID set) "
                         "of 0 bytes");
    if (h->log_length > VHDX_MAX_LOG)
        return diag_fail(D(v), -EFBIG, v->bd.filename, (int64_t)h->log_offset,
                         "log of %u bytes to replay (at most %llu MiB)", h->log_length,
                         (unsigned long long)(VHDX_MAX_LOG >> 20));
    if (h->log_offset > v->file_size || h->log_length > v->file_size - h->log_offset)
        return diag_fail(D(v), -EINVAL, v->bd.filename, (int64_t)h->log_offset,
                         "log of %u bytes at %llu is past the end of the file (%llu "
                         "bytes): truncated image", h->log_length,
                         (unsigned long long)h->log_offset,
                         (unsigned long long)v->file_size);
    if ((r = bd_table_budget(&v->bd, 2ull * h->log_length, v->bd.filename, "the log")) < 0)
        return r;
    uint8_t *ring = malloc(2 * (size_t)h->log_length);
    s.pos = calloc(h->log_length / VHDX_LOG_SECTOR, sizeof(*s.pos));
    if (!ring || !s.pos) {
        r = diag_fail(D(v), -ENOMEM, v->bd.filename, -1, "out of memory");
        goto out;
    }
    if ((r = bfile_pread(v->bd.file, ring, h->log_length, h->log_offset)) < 0)
        goto out;
    memcpy(ring + h->log_length, ring, h->log_length);
    s.ring = ring;
    s.crc_left = 16ull * h->log_length + 16 * VHDX_MIB;
    if ((r = find_active(&s, &a)) < 0)
        goto out;
    if (!a.found) {
        r = diag_fail(D(v), -EINVAL, v->bd.filename, (int64_t)h->log_offset,
                      "the header names a log, but the log holds no valid entry sequence "
                      "to replay (corrupt log)");
        goto out;
    }
    struct vhdx_log_hdr head;
    char why[200];
    vhdx_log_hdr_decode(ring + a.head, s.len, &head, why, sizeof(why));
    if (head.flushed_file_offset > v->file_size) {
        r = diag_fail(D(v), -EINVAL, v->bd.filename, (int64_t)(h->log_offset + a.head),
                      "the file (%llu bytes) is shorter than the log's flushed size "
                      "(%llu bytes): truncated image", (unsigned long long)v->file_size,
                      (unsigned long long)head.flushed_file_offset);
        goto out;
    }
    /* the log may write past the end of the file (up to its LastFileOffset) */
    uint64_t limit = head.last_file_offset > v->file_size ? head.last_file_offset
                                                         : v->file_size;
    struct vhdx_log_hdr tail;
    vhdx_log_hdr_decode(ring + a.tail, s.len, &tail, why, sizeof(why));
    v->log = (struct vhdx_log_state){
        .replayed = true, .entries = a.entries, .tail_seq = tail.seq,
        .head_seq = head.seq, .tail_pos = a.tail, .head_pos = a.head,
        .flushed_file_offset = head.flushed_file_offset,
        .last_file_offset = head.last_file_offset,
    };
    struct vhdx_ov_op *ops = NULL;
    size_t n = 0;
    if ((r = collect(v, &s, &a, limit, &ops, &n)) < 0)
        goto out;
    if ((r = vhdx_ov_build(ops, n, &v->ov)) < 0)
        r = diag_fail(D(v), r, v->bd.filename, -1, "out of memory");
    /* the file as the log leaves it ends after its last write (a range
     * past the file's end that the log does not write is not there) */
    if (r == 0 && v->ov.n) {
        const struct vhdx_ov_seg *last = &v->ov.seg[v->ov.n - 1];
        if (last->off + last->len > v->vfile_size)
            v->vfile_size = last->off + last->len;
    }
    free(ops);
out:
    bd_table_return(&v->bd, 2ull * h->log_length);
    free(ring);
    free(s.pos);
    return r;
}

/* --- commit (check -r all) ------------------------------------------------------------ */

static int sync_file(struct vhdx *v)
{
    return bfile_sync(v->bd.file);
}

int vhdx_log_commit(struct vhdx *v)
{
    struct bfile *f = v->bd.file;
    static const uint8_t zeros[VHDX_LOG_SECTOR];
    int r;

    if (!v->log.replayed || v->log.written)
        return 0;
    if (!f->writable)
        return diag_fail(D(v), -EBADF, v->bd.filename, -1, "the log can only be replayed "
                         "into an image opened for writing");
    /* the file first reaches the size the log wants (zeros), then the
     * writes go in; nothing past the old end needs zeros written */
    if (v->vfile_size > v->file_size) {
        if (f->kind != BFILE_REGULAR)
            return diag_fail(D(v), -EINVAL, v->bd.filename, -1, "the log extends the "
                             "image to %llu bytes, but it is not a regular file",
                             (unsigned long long)v->vfile_size);
        if (ftruncate(f->fd, (off_t)v->vfile_size) < 0)
            return diag_errno(D(v), -errno, v->bd.filename, -1, "extending the file");
    }
    for (size_t i = 0; i < v->ov.n; i++) {
        const struct vhdx_ov_seg *s = &v->ov.seg[i];
        if (s->data) {
            if ((r = bfile_pwrite(f, s->data, (size_t)s->len, s->off)) < 0)
                return r;
            continue;
        }
        uint64_t end = s->off + s->len;
        if (end > v->file_size)
            end = v->file_size;     /* the extension reads as zeros already */
        for (uint64_t o = s->off; o < end;) {
            size_t k = end - o < sizeof(zeros) ? (size_t)(end - o) : sizeof(zeros);
            if ((r = bfile_pwrite(f, zeros, k, o)) < 0)
                return r;
            o += k;
        }
    }
    if ((r = sync_file(v)) < 0)
        return r;
    v->file_size = v->vfile_size;
    f->size = v->vfile_size;
    v->log.written = true;
    /* both headers anew, without the log */
    memset(v->hdr.log_guid, 0, 16);
    return vhdx_write_headers(v);
}

int vhdx_write_headers(struct vhdx *v)
{
    struct vhdx_header nh = v->hdr;
    uint8_t b[VHDX_HEADER_SIZE];
    int r;

    /* the other slot first: a crash between the writes leaves the new
     * header (higher sequence number) or the old one, both valid */
    if (getrandom(nh.file_write_guid, 16, 0) != 16)
        return diag_errno(D(v), -EIO, v->bd.filename, -1, "getrandom");
    for (int k = 1; k <= 2; k++) {
        int slot = (v->cur + k) % 2;
        nh.seq = v->hdr.seq + (uint64_t)k;
        vhdx_header_encode(&nh, b);
        if ((r = bfile_pwrite(v->bd.file, b, sizeof(b), VHDX_HEADER1_OFF +
                              (uint64_t)slot * VHDX_HEADER_BLOCK)) < 0)
            return r;
        if ((r = sync_file(v)) < 0)
            return r;
        v->hdrs[slot] = nh;
        v->hdr_ok[slot] = true;
        v->cur = slot;
    }
    v->hdr = nh;
    return 0;
}
