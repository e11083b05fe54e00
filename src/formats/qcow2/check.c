/* qcow2 check: recount every reference to every host cluster and compare
 * with the refcounts stored in the image, as `qemu-img check` does.
 *
 * References come from the header cluster, the active L1 table and its L2
 * tables and data clusters, each snapshot's L1/L2 tables and clusters, the
 * snapshot table, the refcount table and blocks, and the bitmap directory,
 * tables and data.  A stored refcount lower than the count is a corruption,
 * a higher one a leak.  The copied flags of the active L1/L2 entries must
 * match "refcount is exactly 1".  The per-problem lines go to the diag's
 * warning sink with qemu's wording; the counts go into bd_check_result.
 *
 * Repair (`fix`, qemu-img check -r) follows qemu's order and wording: a
 * first comparison reports; then leaks are lowered (-r leaks) and
 * refcounts too low raised (-r all) in place, or, when a used cluster has
 * refcount 0 or the refcount table itself is damaged, the whole refcount
 * structure is rebuilt from the counters (-r all; repair.c) and the
 * old one freed; misaligned preallocated clusters become zero clusters and
 * copied flags are set right.  The writes are in repair.c.  A repair
 * is only as good as its count, so the image is counted once before it
 * (silently, writing nothing) and a count that met errors -- a reference
 * missed makes a used cluster look free -- refuses the repair.
 *
 * Memory: one 16-bit counter per host cluster of the file (the check
 * refuses files of more than QCOW2_CHECK_MAX_CLUSTERS clusters) plus one
 * cluster of table at a time.  Counters saturate at 65535, so refcounts
 * above that (65535 snapshots sharing a cluster) are not verified exactly.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "formats/qcow2/read_int.h"
#include "io/bfile.h"
#include "util/diag.h"
#include "util/endian.h"

#include "formats/qcow2/check_int.h"

#define L1_CHUNK 8192                          /* L1 entries read at a time */

void qcow2_chk_warn(struct chk *c, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    size_t k, nk = sizeof(c->warned) / sizeof(c->warned[0]);

    /* kinds by their format string; the last slot takes what is left */
    for (k = 0; k < nk - 1 && c->warned[k].fmt && c->warned[k].fmt != fmt; k++)
        ;
    c->warned[k].fmt = fmt;
    if (++c->warned[k].n > QCOW2_CHECK_MAX_WARNINGS) {
        c->dropped++;
        return;
    }
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    diag_warn(c->q->bd.diag, c->q->bd.filename, -1, "%s", msg);
}

/* After the walk: say how many lines were not printed. */
static void warn_dropped(struct chk *c)
{
    if (c->dropped)
        diag_warn(c->q->bd.diag, c->q->bd.filename, -1, "(%" PRIu64 " more problem "
                  "lines like the above not shown)", c->dropped);
    memset(c->warned, 0, sizeof(c->warned));
    c->dropped = 0;
}

int qcow2_chk_grow(struct chk *c, uint64_t n)
{
    if (n <= c->cap) {
        if (n > c->n)
            c->n = n;
        return 0;
    }
    if (n > QCOW2_CHECK_MAX_CLUSTERS + 1)
        return diag_fail(c->q->bd.diag, -EFBIG, c->q->bd.filename, -1,
                         "the file would have %" PRIu64 " clusters, more than the %u "
                         "this check handles", n, QCOW2_CHECK_MAX_CLUSTERS);
    uint64_t cap = c->cap * 2 > n ? c->cap * 2 : n;
    if (cap > QCOW2_CHECK_MAX_CLUSTERS + 1)
        cap = QCOW2_CHECK_MAX_CLUSTERS + 1;
    uint16_t *r = realloc(c->refs, cap * sizeof(*r));
    if (!r)
        return diag_fail(c->q->bd.diag, -ENOMEM, c->q->bd.filename, -1, "out of memory");
    memset(r + c->cap, 0, (cap - c->cap) * sizeof(*r));
    c->refs = r;
    c->cap = cap;
    c->n = n;
    return 0;
}

/* Count `n` more L1 or L2 table entries to visit; false (and an error recorded) once the check has visited
 * QCOW2_CHECK_MAX_VISITS in all.  Tables are walked only where they lie
 * inside the file, so what is left is a small file whose tables all name
 * the same clusters: without the bound the 4M-entry L1 tables of its 65536
 * snapshots (or their L2 tables) would make the check walk 2^38 entries. */
static bool visit(struct chk *c, uint64_t n)
{
    c->visits += n;
    if (c->visits <= QCOW2_CHECK_MAX_VISITS)
        return true;
    diag_fail(c->q->bd.diag, -EFBIG, c->q->bd.filename, -1,
              "the image's tables name more than %llu table entries in all (one "
              "table named many times?); not checked", QCOW2_CHECK_MAX_VISITS);
    return false;
}

/* The entries of a table of `n` entries at `off` that lie inside the file
 * (those past its end read as zeros, which name nothing: not walked). */
static uint64_t in_file(const struct chk *c, uint64_t off, uint64_t n)
{
    if (off >= c->file_size)
        return 0;
    uint64_t room = (c->file_size - off) / 8;
    return n < room ? n : room;
}

/* Read up to len bytes at off; past the end of the file reads as zeros
 * (as qemu's block layer does), so a check can go on past a bad pointer. */
static int read_zero_fill(struct chk *c, void *buf, size_t len, uint64_t off)
{
    size_t got = 0;

    if (off < c->file_size) {
        int r = bfile_pread_upto(c->q->bd.file, buf, len, off, &got);
        if (r < 0)
            return r;
    }
    memset((uint8_t *)buf + got, 0, len - got);
    return 0;
}

static void mark_data(struct chk *c, uint64_t off, uint64_t size)
{
    if (!size || off > UINT64_MAX - size)
        return;
    for (uint64_t k = off / c->cs; k <= (off + size - 1) / c->cs; k++)
        if (k <= QCOW2_CHECK_MAX_CLUSTERS)
            c->data_bits[k / 64] |= 1ull << (k % 64);
}

bool qcow2_chk_data_at(const struct chk *c, uint64_t off)
{
    uint64_t k = off / c->cs;
    return k <= QCOW2_CHECK_MAX_CLUSTERS && (c->data_bits[k / 64] >> (k % 64) & 1);
}

/* Count one reference to every cluster of [off, off+size). */
static void inc_refs(struct chk *c, uint64_t off, uint64_t size)
{
    if (size == 0)
        return;
    /* qemu accepts less than a cluster past the end (a cut last cluster) */
    if (off > UINT64_MAX - size ||
        (off + size > c->file_size && off + size - c->file_size >= c->cs)) {
        WARN(c, "ERROR: counting reference for region exceeding the end of the file by "
             "one cluster or more: offset 0x%" PRIx64 " size 0x%" PRIx64, off, size);
        c->res->corruptions++;
        /* not counted, but kept clear of (beyond the counters a rebuild can
         * ever have, nothing is placed anyway) */
        uint64_t lo = off / c->cs, limit = QCOW2_CHECK_MAX_CLUSTERS + 1;
        uint64_t hi = off > UINT64_MAX - size ? limit : (off + size - 1) / c->cs + 1;
        if (lo < limit) {
            hi = hi < limit ? hi : limit;
            if (c->taken_hi == c->taken_lo) {
                c->taken_lo = lo;
                c->taken_hi = hi;
            } else {
                c->taken_lo = lo < c->taken_lo ? lo : c->taken_lo;
                c->taken_hi = hi > c->taken_hi ? hi : c->taken_hi;
            }
        }
        return;
    }
    for (uint64_t k = off / c->cs; k <= (off + size - 1) / c->cs; k++) {
        if (k >= c->n && qcow2_chk_grow(c, k + 1) < 0) {
            c->res->check_errors++;
            return;
        }
        if (c->refs[k] >= c->ref_cap) {
            if (c->ref_cap < UINT16_MAX) {
                WARN(c, "ERROR: overflow cluster offset=0x%" PRIx64, k * c->cs);
                c->res->corruptions++;
            }
            continue;
        }
        c->refs[k]++;
    }
}

static uint64_t stored_refcount(struct chk *c, uint64_t k, bool *ok);

/* A data cluster (or compressed data) at [host, host+len) that overlaps the
 * image's metadata: kept for report_overlaps().  Past the first
 * QCOW2_CHECK_MAX_OVERLAPS, each is a corruption at once. */
static void note_overlap(struct chk *c, uint64_t host, uint64_t len)
{
    struct metarange m;

    if (!qcow2_meta_find(c->q, host, len, &m))
        return;
    if (c->novl == c->ovl_cap && c->ovl_cap < QCOW2_CHECK_MAX_OVERLAPS) {
        size_t cap = c->ovl_cap ? c->ovl_cap * 2 : 16;
        struct chk_overlap *n = realloc(c->ovl, cap * sizeof(*n));
        if (n) {
            c->ovl = n;
            c->ovl_cap = cap;
        }
    }
    if (c->novl < c->ovl_cap) {
        c->ovl[c->novl++] = (struct chk_overlap){ host, len, m };
        return;
    }
    WARN(c, "ERROR data at host offset 0x%" PRIx64 " (0x%" PRIx64 " bytes) overlaps the %s "
         "at 0x%" PRIx64, host, len, m.what, m.off);
    c->res->corruptions++;
}

/* Data over metadata makes the metadata's cluster counted twice, which the
 * recount reports as a refcount too low -- unless the image says 2 there
 * (and clears the copied flags to match): then only this says it. */
static void report_overlaps(struct chk *c)
{
    for (size_t i = 0; i < c->novl; i++) {
        const struct chk_overlap *o = &c->ovl[i];
        uint64_t first = o->host > o->m.off ? o->host : o->m.off;
        uint64_t k = first / c->cs;
        bool ok;
        uint64_t stored = stored_refcount(c, k, &ok);
        if (ok && k < c->n && stored < c->refs[k])
            continue;   /* reported as "ERROR cluster k refcount=..." */
        WARN(c, "ERROR data at host offset 0x%" PRIx64 " (0x%" PRIx64 " bytes) overlaps the "
             "%s at 0x%" PRIx64 " (0x%" PRIx64 " bytes)", o->host, o->len, o->m.what,
             o->m.off, o->m.len);
        c->res->corruptions++;
    }
    c->novl = 0;
}

static void check_l2(struct chk *c, uint64_t l2_off, bool frag)
{
    const struct qcow2_header *h = c->h;
    bool data_file = (h->incompatible & QCOW2_INCOMPAT_DATA_FILE) != 0;

    if (read_zero_fill(c, c->buf, c->cs, l2_off) < 0) {
        WARN(c, "ERROR: I/O error in check_refcounts_l2");
        c->res->check_errors++;
        return;
    }
    /* a table visited again: as if the fixes of the first visit were
     * written (as qemu writes them at once) */
    const struct chk_fix_table *ft = qcow2_repair_fixes_of(c, l2_off);
    for (size_t i = 0; ft && i < ft->n; i++) {
        const struct chk_fix *f = &c->fixes[ft->first + i];
        be64_put(c->buf + (f->where - l2_off), f->e);
        if (h->extended_l2)
            be64_put(c->buf + (f->where - l2_off) + 8, f->bitmap);
    }
    /* as qemu counts it: contiguity within one L2 table */
    c->next_contiguous = 0;
    for (uint32_t j = 0; j < h->l2_entries; j++) {
        const uint8_t *p = c->buf + (size_t)j * h->l2_entry_bytes;
        uint64_t e = be64_get(p);
        uint64_t bitmap = h->extended_l2 ? be64_get(p + 8) : 0;
        uint32_t alloc = (uint32_t)bitmap, zero = (uint32_t)(bitmap >> 32);

        if (e & QCOW2_L2_COMPRESSED) {
            unsigned x = 62 - (h->cluster_bits - 8);
            uint64_t host = e & ((1ULL << x) - 1);
            uint64_t nsec = ((e >> x) & ((1ULL << (h->cluster_bits - 8)) - 1)) + 1;
            if (data_file) {
                WARN(c, "ERROR: compressed cluster %" PRIu32 " in an image with an "
                     "external data file", j);
                c->res->corruptions++;
            }
            if (e & QCOW2_L2_COPIED) {
                WARN(c, "ERROR: coffset=0x%" PRIx64 ": copied flag must never be set "
                     "for compressed clusters", host);
                c->res->corruptions++;
            }
            if (h->extended_l2 && bitmap) {
                WARN(c, "ERROR compressed cluster %" PRIu32 " with non-zero subcluster "
                     "allocation bitmap, entry=0x%" PRIx64, j, e);
                c->res->corruptions++;
            }
            inc_refs(c, host, nsec * 512 - (host & 511));
            note_overlap(c, host, nsec * 512 - (host & 511));
            mark_data(c, host, nsec * 512 - (host & 511));
            if (frag) {
                c->res->allocated_clusters++;
                c->res->compressed_clusters++;
                /* compressed clusters count as fragmented (sector granularity) */
                c->res->fragmented_clusters++;
            }
            continue;
        }
        uint64_t reserved = QCOW2_L2_STD_RESERVED;
        if (h->version < 3 || h->extended_l2)
            reserved |= QCOW2_L2_ZERO;
        if (e & reserved) {
            WARN(c, "ERROR found l2 entry with reserved bits set: %" PRIx64, e);
            c->res->corruptions++;
        }
        uint64_t host = e & QCOW2_L2_OFFSET_MASK;
        bool zero_flag = h->version >= 3 && !h->extended_l2 && (e & QCOW2_L2_ZERO);
        bool has_host = host || (data_file && (e & QCOW2_L2_COPIED));
        if (!has_host) {
            if (alloc) {
                WARN(c, "ERROR: Unallocated cluster has non-zero subcluster allocation "
                     "map");
                c->res->corruptions++;
            }
            continue;
        }
        if (alloc & zero) {
            WARN(c, "ERROR offset=%" PRIx64 ": Allocated cluster has corrupted "
                 "subcluster allocation bitmap", host);
            c->res->corruptions++;
        }
        if (host & (c->cs - 1)) {
            bool holds_data = h->extended_l2 ? alloc != 0 : !zero_flag;
            /* (not in a table that is also guest data: the guest would read
             * other bytes; the count before a repair knows them all) */
            bool fix = !holds_data && (c->fix & BD_CHECK_FIX_ERRORS) &&
                       !qcow2_chk_data_at(c, l2_off);
            WARN(c, "%s offset=%" PRIx64 ": %s cluster is not properly aligned; "
                 "L2 entry corrupted.", fix ? "Repairing" : "ERROR", host,
                 holds_data ? "Data" : "Preallocated");
            c->res->corruptions++;
            /* a preallocated zero cluster can simply become a zero cluster
             * (written after the count: qcow2_repair_commit) */
            if (fix) {
                uint64_t where = l2_off + (uint64_t)j * h->l2_entry_bytes;
                int r = h->extended_l2
                        ? qcow2_repair_add_fix(c, l2_off, where, 0, (uint64_t)zero << 32)
                        : qcow2_repair_add_fix(c, l2_off, where, QCOW2_L2_ZERO, 0);
                if (r == 0)
                    continue;   /* the cluster is not used any more */
                WARN(c, "ERROR: out of memory");
                c->res->check_errors++;
            }
        }
        if (frag) {
            c->res->allocated_clusters++;
            if (c->next_contiguous && host != c->next_contiguous)
                c->res->fragmented_clusters++;
            c->next_contiguous = host + c->cs;
        }
        if (!data_file) {
            inc_refs(c, host, c->cs);
            note_overlap(c, host, c->cs);
            mark_data(c, host, c->cs);
        }
    }
}

/* References of one L1 table and everything under it. */
static int check_l1(struct chk *c, uint64_t l1_off, uint32_t l1_size, bool frag)
{
    uint32_t walk = (uint32_t)in_file(c, l1_off, l1_size);
    uint8_t *chunk;
    int r = 0;

    inc_refs(c, l1_off, (uint64_t)l1_size * 8);
    if (!walk)
        return 0;
    chunk = malloc(L1_CHUNK * 8);
    if (!chunk)
        return diag_fail(c->q->bd.diag, -ENOMEM, c->q->bd.filename, -1, "out of memory");
    for (uint32_t base = 0; base < walk && r == 0; base += L1_CHUNK) {
        uint32_t n = walk - base < L1_CHUNK ? walk - base : L1_CHUNK;
        if (!visit(c, n)) {
            c->res->check_errors++;
            r = -EFBIG;
            break;
        }
        if (read_zero_fill(c, chunk, (size_t)n * 8, l1_off + (uint64_t)base * 8) < 0) {
            WARN(c, "ERROR: I/O error in check_refcounts_l1");
            c->res->check_errors++;
            r = -EIO;
            break;
        }
        for (uint32_t i = 0; i < n; i++) {
            uint64_t e = be64_get(chunk + (size_t)i * 8);
            uint64_t l2 = e & QCOW2_L1_OFFSET_MASK;
            if (e & QCOW2_L1_RESERVED) {
                WARN(c, "ERROR found L1 entry with reserved bits set: %" PRIx64, e);
                c->res->corruptions++;
            }
            if (!l2)
                continue;
            inc_refs(c, l2, c->cs);
            if (l2 & (c->cs - 1)) {
                WARN(c, "ERROR l2_offset=%" PRIx64 ": Table is not cluster aligned; L1 "
                     "entry corrupted", l2);
                c->res->corruptions++;
                continue;
            }
            if (l2 >= c->file_size)
                continue;   /* counted above as past the end; nothing to read */
            if (!visit(c, c->h->l2_entries)) {
                c->res->check_errors++;
                r = -EFBIG;
                break;
            }
            check_l2(c, l2, frag);
        }
    }
    free(chunk);
    return r;
}

/* Bitmap tables lie inside the file (open checks it) and, in an image
 * qemu wrote, apart: together they are no larger than the file.  Tables
 * that are (many bitmaps naming one table) are reported, not walked, so
 * that the walk is bounded by the file. */
static int check_bitmaps(struct chk *c)
{
    const struct qcow2_bitmap *b = c->q->bitmaps;
    uint32_t n = c->q->nbitmaps;
    uint64_t walked = 0;

    if (n)
        inc_refs(c, c->h->bitmap_directory_offset, c->h->bitmap_directory_size);
    for (uint32_t i = 0; i < n; i++) {
        uint64_t entries = b[i].table_size;
        inc_refs(c, b[i].table_offset, entries * 8);
        walked += entries * 8;
        if (walked > c->file_size) {
            WARN(c, "ERROR bitmap tables overlap: bitmap %" PRIu32 " (%s) brings them to "
                 "%" PRIu64 " bytes in a file of %" PRIu64 "; the rest are not checked",
                 i, b[i].name, walked, c->file_size);
            c->res->corruptions++;
            return 0;
        }
        for (uint64_t base = 0; base < entries; base += c->cs / 8) {
            uint64_t cnt = entries - base;
            if (cnt > c->cs / 8)
                cnt = c->cs / 8;
            if (read_zero_fill(c, c->buf, cnt * 8, b[i].table_offset + base * 8) < 0) {
                c->res->check_errors++;
                break;
            }
            for (uint64_t j = 0; j < cnt; j++) {
                uint64_t off = be64_get(c->buf + j * 8) & QCOW2_BME_TABLE_OFFSET_MASK;
                if (off)
                    inc_refs(c, off, c->cs);
            }
        }
    }
    return 0;
}

/* The stored refcount of cluster k: 0 and *ok=false when it cannot be read. */
static uint64_t stored_refcount(struct chk *c, uint64_t k, bool *ok)
{
    const struct qcow2_header *h = c->h;
    uint64_t per_block = c->cs * 8 / h->refcount_bits;
    uint64_t ti = k / per_block, bi = k % per_block;

    *ok = true;
    if (ti >= c->reft_len)
        return 0;
    uint64_t boff = c->reft[ti] & QCOW2_REFT_OFFSET_MASK;
    if (boff == 0)
        return 0;
    if (boff & (c->cs - 1)) {
        *ok = false;
        return 0;
    }
    if (boff != c->rblock_off) {
        if (read_zero_fill(c, c->rblock, c->cs, boff) < 0) {
            *ok = false;
            c->rblock_off = 0;
            return 0;
        }
        c->rblock_off = boff;
    }
    switch (h->refcount_bits) {
    case 64: return be64_get(c->rblock + bi * 8);
    case 32: return be32_get(c->rblock + bi * 4);
    case 16: return be16_get(c->rblock + bi * 2);
    case 8: return c->rblock[bi];
    default: {
        uint64_t bit = bi * h->refcount_bits;
        return (c->rblock[bit / 8] >> (bit % 8)) & ((1u << h->refcount_bits) - 1);
    }
    }
}

static int read_refcount_table(struct chk *c)
{
    uint64_t bytes = (uint64_t)c->h->refcount_table_clusters * c->cs;

    c->reft_len = bytes / 8;
    c->reft = malloc(bytes);
    if (!c->reft)
        return diag_fail(c->q->bd.diag, -ENOMEM, c->q->bd.filename, -1, "out of memory");
    int r = read_zero_fill(c, c->reft, bytes, c->h->refcount_table_offset);
    if (r < 0)
        return r;
    for (uint64_t i = 0; i < c->reft_len; i++)
        c->reft[i] = be64_get((const uint8_t *)&c->reft[i]);
    return 0;
}

/* A refcount block past the end of the file: with -r all, make the file
 * reach it (it reads as zeros, so its clusters are rebuilt later), as qemu
 * does -- within QCOW2_REPAIR_MAX_GROWTH clusters.  The count goes on as if
 * the file were that long; qcow2_repair_commit() extends it.  Returns true
 * when the file is to be extended. */
static bool extend_to_block(struct chk *c, uint64_t i, uint64_t off)
{
    int r = 0;

    WARN(c, "Repairing refcount block %" PRIu64 " is outside image", i);
    /* off + cs must neither wrap (to a size that would cut the file) nor
     * pass what a file offset holds: qemu's test and message */
    if (off > (uint64_t)INT64_MAX - c->cs)
        r = -EINVAL;
    else if (off / c->cs + 1 > QCOW2_CHECK_MAX_CLUSTERS ||
             off / c->cs + 1 - c->first_clusters > QCOW2_REPAIR_MAX_GROWTH)
        r = -EFBIG;
    else if (c->q->bd.file->kind != BFILE_REGULAR)
        r = -ENOTSUP;
    /* nor over clusters that references left out of the count name: they
     * would read as zeros where they failed (qemu makes them so) */
    else if (off / c->cs + 1 > c->taken_lo && c->nb_clusters < c->taken_hi)
        r = -ENOSPC;
    else if ((r = qcow2_chk_grow(c, off / c->cs + 1)) == 0)
        c->extend_to = c->file_size = off + c->cs;
    if (r < 0) {
        c->rebuild = true;
        WARN(c, "ERROR could not resize image: %s", r == -ENOSPC ? "the file would "
             "grow over clusters the image names past its end" : strerror(-r));
        return false;
    }
    c->nb_clusters = (c->file_size + c->cs - 1) / c->cs;
    return true;
}

/* Refcount blocks: aligned, inside the file, referenced exactly once. */
static void check_refblocks(struct chk *c)
{
    for (uint64_t i = 0; i < c->reft_len; i++) {
        uint64_t off = c->reft[i] & QCOW2_REFT_OFFSET_MASK;
        if (c->reft[i] & QCOW2_REFT_RESERVED) {
            WARN(c, "ERROR refcount table entry %" PRIu64 " has reserved bits set", i);
            c->res->corruptions++;
            c->rebuild = true;
            continue;
        }
        if (off & (c->cs - 1)) {
            WARN(c, "ERROR refcount block %" PRIu64 " is not cluster aligned; refcount "
                 "table entry corrupted", i);
            c->res->corruptions++;
            c->rebuild = true;
            continue;
        }
        if (off / c->cs >= c->n) {
            c->res->corruptions++;
            /* (only on a complete count: the repair is refused otherwise) */
            if (!(c->fix & BD_CHECK_FIX_ERRORS) || c->res->check_errors) {
                WARN(c, "ERROR refcount block %" PRIu64 " is outside image", i);
                continue;
            }
            if (!extend_to_block(c, i, off))
                continue;
            c->res->corruptions--;
            c->res->corruptions_fixed++;
            inc_refs(c, off, c->cs);
            continue;
        }
        if (off == 0)
            continue;
        inc_refs(c, off, c->cs);
        if (c->refs[off / c->cs] != 1) {
            WARN(c, "ERROR refcount block %" PRIu64 " refcount=%u", i,
                 (unsigned)c->refs[off / c->cs]);
            c->res->corruptions++;
            c->rebuild = true;
        }
    }
}

/* Stored refcounts against the recount.  With `fix`, leaks are lowered
 * (FIX_LEAKS) and refcounts too low raised (FIX_ERRORS) in place; a used
 * cluster whose refcount is 0 asks for a rebuild (its block may be
 * missing). */
static void compare_refcounts(struct chk *c, unsigned fix, int64_t *highest)
{
    *highest = 0;   /* as qemu: the header cluster at least */
    for (uint64_t k = 0; k < c->n; k++) {
        bool ok;
        uint64_t stored = stored_refcount(c, k, &ok);
        if (!ok) {
            WARN(c, "Can't get refcount for cluster %" PRIu64 ": Input/output error", k);
            c->res->check_errors++;
            c->unread_refcounts++;
            continue;
        }
        uint64_t counted = c->refs[k];
        if (stored > 0 || counted > 0)
            *highest = (int64_t)k;
        if (stored == counted || (counted == UINT16_MAX && stored >= counted))
            continue;
        int64_t *fixed = NULL;
        if (stored == 0)
            c->rebuild = true;
        else if (stored > counted && (fix & BD_CHECK_FIX_LEAKS))
            fixed = &c->res->leaks_fixed;
        else if (stored < counted && (fix & BD_CHECK_FIX_ERRORS))
            fixed = &c->res->corruptions_fixed;
        WARN(c, "%s cluster %" PRIu64 " refcount=%" PRIu64 " reference=%" PRIu64,
             fixed ? "Repairing" : stored < counted ? "ERROR" : "Leaked", k, stored, counted);
        if (fixed && qcow2_repair_refcount(c, k, counted) == 0) {
            (*fixed)++;
            continue;
        }
        if (stored < counted)
            c->res->corruptions++;
        else
            c->res->leaks++;
    }
}

/* Copied flags of one active L2 table's entries. */
static int check_copied_l2(struct chk *c, uint64_t l2, bool repair)
{
    const struct qcow2_header *h = c->h;
    bool data_file = (h->incompatible & QCOW2_INCOMPAT_DATA_FILE) != 0;
    unsigned dirty = 0;

    if (read_zero_fill(c, c->buf, c->cs, l2) < 0) {
        WARN(c, "ERROR: Could not read L2 table");
        c->res->check_errors++;
        return -EIO;
    }
    for (uint32_t j = 0; j < h->l2_entries; j++) {
        uint8_t *p = c->buf + (size_t)j * h->l2_entry_bytes;
        uint64_t e = be64_get(p);
        uint64_t host = e & QCOW2_L2_OFFSET_MASK, rc = 1;
        bool ok = true;
        if (e & QCOW2_L2_COMPRESSED)
            continue;
        if (!host && !(data_file && (e & QCOW2_L2_COPIED)))
            continue;
        /* data file clusters have an implicit refcount of 1 */
        if (!data_file)
            rc = stored_refcount(c, host / c->cs, &ok);
        if (ok && (rc == 1) != ((e & QCOW2_L2_COPIED) != 0)) {
            WARN(c, "%s OFLAG_COPIED data cluster: l2_entry=%" PRIx64 " refcount=%"
                 PRIu64, repair ? "Repairing" : "ERROR", e, rc);
            c->res->corruptions++;
            if (repair) {
                be64_put(p, rc == 1 ? e | QCOW2_L2_COPIED : e & ~QCOW2_L2_COPIED);
                dirty++;
            }
        }
    }
    if (dirty) {
        int r = qcow2_repair_l2_table(c, l2);
        if (r < 0) {
            WARN(c, "ERROR: Could not write L2 table: %s", strerror(-r));
            c->res->check_errors++;
            return r;
        }
        c->res->corruptions -= dirty;
        c->res->corruptions_fixed += dirty;
    }
    return 0;
}

/* Copied flags of the active tables: set exactly when the refcount is 1.
 * Repaired with -r all, and with -r leaks when nothing else is wrong (the
 * refcounts are then known to be right). */
static int check_copied(struct chk *c)
{
    const struct qcow2_header *h = c->h;
    const struct bd_check_result *res = c->res;
    bool repair = (c->fix & BD_CHECK_FIX_ERRORS) ||
                  ((c->fix & BD_CHECK_FIX_LEAKS) && !res->check_errors &&
                   !res->corruptions && !res->leaks);
    uint8_t *chunk = malloc(L1_CHUNK * 8);
    int r = 0;

    if (!chunk)
        return diag_fail(c->q->bd.diag, -ENOMEM, c->q->bd.filename, -1, "out of memory");
    for (uint32_t base = 0; base < h->l1_size && r == 0; base += L1_CHUNK) {
        uint32_t n = h->l1_size - base < L1_CHUNK ? h->l1_size - base : L1_CHUNK;
        r = read_zero_fill(c, chunk, (size_t)n * 8,
                           h->l1_table_offset + (uint64_t)base * 8);
        for (uint32_t i = 0; i < n && r == 0; i++) {
            uint64_t e = be64_get(chunk + (size_t)i * 8), l2 = e & QCOW2_L1_OFFSET_MASK;
            /* (not into an L1 table that guest data also uses) */
            bool repair_l1 = repair && !qcow2_chk_data_at(c, h->l1_table_offset +
                                                                (uint64_t)(base + i) * 8);
            bool ok;
            if (!l2 || (l2 & (c->cs - 1)))
                continue;
            uint64_t rc = stored_refcount(c, l2 / c->cs, &ok);
            if (ok && (rc == 1) != ((e & QCOW2_L1_COPIED) != 0)) {
                WARN(c, "%s OFLAG_COPIED L2 cluster: l1_index=%" PRIu32 " l1_entry=%"
                     PRIx64 " refcount=%" PRIu64, repair_l1 ? "Repairing" : "ERROR",
                     base + i, e, rc);
                c->res->corruptions++;
                if (repair_l1) {
                    uint64_t ne = rc == 1 ? e | QCOW2_L1_COPIED : e & ~QCOW2_L1_COPIED;
                    if ((r = qcow2_repair_l1_entry(c, base + i, ne)) < 0) {
                        c->res->check_errors++;
                        break;
                    }
                    c->res->corruptions--;
                    c->res->corruptions_fixed++;
                }
            }
            if (l2 < c->file_size) {
                if (!visit(c, h->l2_entries)) {
                    c->res->check_errors++;
                    r = -EFBIG;
                    break;
                }
                r = check_copied_l2(c, l2, repair && !qcow2_chk_data_at(c, l2));
            }
        }
    }
    free(chunk);
    return r;
}

/* Count every reference to every cluster (qemu's calculate_refcounts). */
static int calculate(struct chk *c)
{
    struct qcow2 *q = c->q;
    const struct qcow2_header *h = c->h;
    int r;

    c->novl = 0;
    inc_refs(c, 0, c->cs);  /* header */
    if ((r = check_l1(c, h->l1_table_offset, h->l1_size, true)) < 0)
        return r;
    if ((h->incompatible & QCOW2_INCOMPAT_DATA_FILE) && q->nsnaps) {
        WARN(c, "ERROR %" PRIu32 " snapshots in image with data file", q->nsnaps);
        c->res->corruptions++;
    }
    for (uint32_t i = 0; i < q->nsnaps; i++) {
        const struct qcow2_snapshot *sn = &q->snaps[i];
        if (sn->l1_table_offset & (c->cs - 1)) {
            WARN(c, "ERROR snapshot %s (%s) l1_offset=%#" PRIx64 ": L1 table is not "
                 "cluster aligned; snapshot table entry corrupted", sn->id, sn->name,
                 sn->l1_table_offset);
            c->res->corruptions++;
            continue;
        }
        if (sn->l1_size > QCOW2_MAX_L1_BYTES / 8) {
            WARN(c, "ERROR snapshot %s (%s) l1_size=%#" PRIx32 ": L1 table is too "
                 "large; snapshot table entry corrupted", sn->id, sn->name, sn->l1_size);
            c->res->corruptions++;
            continue;
        }
        if ((r = check_l1(c, sn->l1_table_offset, sn->l1_size, false)) < 0)
            return r;
    }
    inc_refs(c, h->snapshots_offset, q->snapshots_size);
    inc_refs(c, h->refcount_table_offset, (uint64_t)h->refcount_table_clusters * c->cs);
    if ((r = check_bitmaps(c)) < 0) {
        c->res->check_errors++;
        return r;
    }
    free(c->reft);
    c->reft = NULL;
    c->rblock_off = 0;
    if ((r = read_refcount_table(c)) < 0) {
        c->res->check_errors++;
        return r;
    }
    check_refblocks(c);
    return 0;
}

/* -r all when a used cluster has no refcount or the table is damaged:
 * a new refcount structure, then the old one is a leak to fix. */
static int rebuild(struct chk *c, unsigned fix)
{
    struct bd_check_result *res = c->res, old;
    struct qcow2_rebuild *rb;
    int64_t fresh = 0, highest;
    int r;

    WARN(c, "Rebuilding refcount structure");
    /* placed first: a structure that cannot be placed refuses the repair
     * before anything is written */
    if ((r = qcow2_rebuild_plan(c, &rb)) < 0) {
        res->check_errors++;
        return r;
    }
    if ((r = qcow2_repair_commit(c, NULL)) == 0)
        r = qcow2_rebuild_write(c, rb);
    qcow2_rebuild_free(rb);
    if (r < 0) {
        res->check_errors++;
        return r;
    }
    /* the refcounts that could not be read are gone with the old structure
     * (qemu still counts them, and leaves the image marked dirty) */
    res->check_errors -= c->unread_refcounts;
    c->unread_refcounts = 0;
    old = *res;
    res->corruptions = res->leaks = 0;
    /* count again against the new structure (the block statistics of the
     * first count stand) */
    c->rebuild = false;
    c->fix = 0;
    memset(c->refs, 0, c->n * sizeof(*c->refs));
    int64_t alloc = res->allocated_clusters, frag = res->fragmented_clusters;
    int64_t comp = res->compressed_clusters, errors = res->check_errors;
    r = calculate(c);
    res->allocated_clusters = alloc;
    res->fragmented_clusters = frag;
    res->compressed_clusters = comp;
    c->fix = fix;
    if (r < 0)
        return r;
    /* (a count that missed references would free used clusters) */
    if ((fix & BD_CHECK_FIX_LEAKS) && res->check_errors == errors) {
        /* the old structure is leaked now: free it; only leaks that cannot
         * be fixed count */
        struct bd_check_result saved = *res;
        memset(res, 0, sizeof(*res));
        /* with -r all also raise what is too low: the new structure can grow
         * the file over a reference that lay past its end (not counted by
         * the first count, counted now); left alone, the next check would
         * find it and a second repair would change the image again */
        compare_refcounts(c, fix & (BD_CHECK_FIX_LEAKS | BD_CHECK_FIX_ERRORS), &highest);
        if (c->rebuild)
            WARN(c, "ERROR rebuilt refcount structure is still broken");
        fresh = res->leaks;
        saved.corruptions += res->corruptions;
        saved.corruptions_fixed += res->corruptions_fixed;
        *res = saved;
    }
    if (res->corruptions < old.corruptions)
        res->corruptions_fixed += old.corruptions - res->corruptions;
    if (res->leaks < old.leaks)
        res->leaks_fixed += old.leaks - res->leaks;
    res->leaks += fresh;
    return 0;
}

/* A repair that cannot trust its count: refused, with the first error the
 * count met in the message (`why`, else the one recorded now). */
static int refuse_incomplete(struct qcow2 *q, struct bd_check_result *res, const char *why)
{
    struct diag *d = q->bd.diag;
    char cause[sizeof(d->what)] = "";

    snprintf(cause, sizeof(cause), "%s", why && *why ? why : d->err ? d->what : "");
    diag_clear(d);
    if (!res->check_errors)
        res->check_errors = 1;
    return diag_fail(d, -EIO, q->bd.filename, -1, "not repaired: the check could not "
                     "count every reference to the image's clusters%s%s%s, and a repair "
                     "built on that count could overwrite data; nothing was changed",
                     *cause ? " (" : "", cause, *cause ? ")" : "");
}

/* The check, and with `fix` the repair; `count_only`: stop after the count
 * (res->check_errors says whether it is complete).  `bits`: the clusters
 * guest data uses (struct chk's data_bits) are taken from *bits if it is
 * set (the count before a repair found them all), and left there. */
static int run(struct qcow2 *q, struct bd_check_result *res, unsigned fix, bool count_only,
               uint64_t **bits)
{
    struct bd *bd = &q->bd;
    struct qcow2_header *h = &q->h;
    struct chk c = { .q = q, .h = h, .res = res, .fix = fix };
    int64_t highest = 0;
    int r;

    memset(res, 0, sizeof(*res));
    if (fix && !bd->file->writable)
        return diag_fail(bd->diag, -EROFS, bd->filename, -1,
                         "the image must be opened for writing to be repaired");
    if (q->snapshot >= 0)
        return diag_fail(bd->diag, -EINVAL, bd->filename, -1,
                         "check works on the image, not on a snapshot view");
    c.cs = h->cluster_size;
    c.file_size = q->file_size;
    c.nb_clusters = c.first_clusters = (c.file_size + c.cs - 1) / c.cs;
    if (c.nb_clusters > QCOW2_CHECK_MAX_CLUSTERS) {
        res->check_errors++;
        return diag_fail(bd->diag, -EFBIG, bd->filename, -1,
                         "the file has %" PRIu64 " clusters, more than the %u this check "
                         "handles", c.nb_clusters, QCOW2_CHECK_MAX_CLUSTERS);
    }
    c.ref_cap = h->refcount_bits >= 16 ? UINT16_MAX
                                       : (uint16_t)((1u << h->refcount_bits) - 1);
    c.buf = malloc(c.cs);
    c.rblock = malloc(c.cs);
    c.data_bits = bits && *bits ? *bits
                : calloc(QCOW2_CHECK_MAX_CLUSTERS / 64 + 1, sizeof(*c.data_bits));
    if (!c.buf || !c.rblock || !c.data_bits || qcow2_chk_grow(&c, c.nb_clusters + 1) < 0) {
        r = diag_fail(bd->diag, -ENOMEM, bd->filename, -1, "out of memory");
        goto out;
    }
    c.n = c.nb_clusters;
    res->total_clusters = (int64_t)((bd->size + c.cs - 1) / c.cs);

    if ((r = calculate(&c)) < 0 || count_only)
        goto out;
    /* a read that failed only now (qcow2_check counted once before) */
    if (fix && res->check_errors) {
        r = refuse_incomplete(q, res, NULL);
        goto out;
    }
    struct bd_check_result pre = *res;
    compare_refcounts(&c, 0, &highest);
    if (c.rebuild && (fix & BD_CHECK_FIX_ERRORS)) {
        if ((r = rebuild(&c, fix)) < 0)
            goto out;
    } else if (fix) {
        if (c.rebuild) {
            WARN(&c, "ERROR need to rebuild refcount structures");
            res->check_errors++;
            r = diag_fail(bd->diag, -EIO, bd->filename, -1, "the refcount structure must "
                          "be rebuilt to repair this image (use -r all)");
            goto out;
        }
        if ((r = qcow2_repair_commit(&c, &pre)) < 0)
            goto out;
        if (res->leaks || res->corruptions) {
            *res = pre;
            compare_refcounts(&c, fix, &highest);
        }
    }
    report_overlaps(&c);
    if ((r = check_copied(&c)) < 0)
        goto out;
    res->image_end_offset = (highest + 1) * (int64_t)c.cs;
    r = 0;
out:
    warn_dropped(&c);
    if (fix) {
        int e = qcow2_repair_end(&c, r == 0 && !res->check_errors && !res->corruptions);
        if (r == 0 && e < 0) {
            res->check_errors++;
            r = e;
        }
    }
    free(c.ovl);
    free(c.refs);
    free(c.buf);
    free(c.rblock);
    free(c.reft);
    free(c.fixes);
    free(c.ftab);
    if (bits)
        *bits = c.data_bits;
    else
        free(c.data_bits);
    return r;
}

int qcow2_check_sound(struct qcow2 *q, const char *doing)
{
    struct diag *d = q->bd.diag;
    struct bd_check_result cr;

    /* the findings are counted, not printed one by one: the refusal says
     * how many, and `diskimg check` lists them */
    void (*warn)(void *, const char *, int64_t, const char *) = d->warn;
    d->warn = NULL;
    memset(&cr, 0, sizeof(cr));
    int r = run(q, &cr, 0, false, NULL);
    d->warn = warn;
    if (r < 0)
        return r;
    if (cr.corruptions || cr.check_errors)
        return diag_fail(d, -EINVAL, q->bd.filename, -1, "the image has %" PRId64
                         " corruptions and %" PRId64 " check errors; %s could destroy "
                         "data: repair it first with 'diskimg check -r all'",
                         cr.corruptions, cr.check_errors, doing);
    return 0;
}

int qcow2_check(struct bd *bd, struct bd_check_result *res, unsigned fix)
{
    struct qcow2 *q = to_qcow2(bd);
    struct diag *d = bd->diag;
    struct bd_check_result dry;

    if (!fix || !bd->file->writable || q->snapshot >= 0)
        return run(q, res, fix, false, NULL);
    /* A repair trusts the count: a reference it missed (an L2 table it
     * could not read, a counter it could not grow) makes a used cluster
     * look free, and lowering its "leak" or rebuilding the refcounts over
     * it destroys data.  So the image is counted first, silently and
     * without writing; a count with errors refuses the repair before
     * anything changes (after a check without -r, to say what is wrong). */
    void (*warn)(void *, const char *, int64_t, const char *) = d->warn;
    d->warn = NULL;
    memset(&dry, 0, sizeof(dry));
    uint64_t *bits = NULL;
    int r = run(q, &dry, 0, true, &bits);
    d->warn = warn;
    if (r == 0 && !dry.check_errors) {
        r = run(q, res, fix, false, &bits);
        free(bits);
        return r;
    }
    free(bits);
    char why[sizeof(d->what)];
    snprintf(why, sizeof(why), "%s", d->err ? d->what : "");
    diag_clear(d);
    (void)run(q, res, 0, false, NULL);
    return refuse_incomplete(q, res, why);
}
