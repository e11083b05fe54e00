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
 * structure is rebuilt from the counters (-r all; qcow2_repair.c) and the
 * old one freed; misaligned preallocated clusters become zero clusters and
 * copied flags are set right.  The writes are in qcow2_repair.c.
 *
 * Memory: one 16-bit counter per host cluster of the file (the check
 * refuses files of more than QCOW2_CHECK_MAX_CLUSTERS clusters) plus one
 * cluster of table at a time.  Counters saturate at 65535, so refcounts
 * above that (65535 snapshots sharing a cluster) are not verified exactly.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "formats/qcow2_int.h"
#include "io/bfile.h"
#include "util/diag.h"
#include "util/endian.h"

#include "formats/qcow2_check_int.h"

#define L1_CHUNK 8192                          /* L1 entries read at a time */

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

/* Count one more L2 table to visit; false (and an error recorded) once the
 * check has visited QCOW2_CHECK_MAX_VISITS entries. */
static bool visit(struct chk *c)
{
    c->visits += c->h->l2_entries;
    if (c->visits <= QCOW2_CHECK_MAX_VISITS)
        return true;
    diag_fail(c->q->bd.diag, -EFBIG, c->q->bd.filename, -1,
              "the L1 tables name L2 tables with more than %llu entries in all (one "
              "table named many times?); not checked", QCOW2_CHECK_MAX_VISITS);
    return false;
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

static void check_l2(struct chk *c, uint64_t l2_off, bool frag)
{
    const struct qcow2_header *h = c->h;
    bool data_file = (h->incompatible & QCOW2_INCOMPAT_DATA_FILE) != 0;

    if (read_zero_fill(c, c->buf, c->cs, l2_off) < 0) {
        WARN(c, "ERROR: I/O error in check_refcounts_l2");
        c->res->check_errors++;
        return;
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
            bool fix = !holds_data && (c->fix & BD_CHECK_FIX_ERRORS);
            WARN(c, "%s offset=%" PRIx64 ": %s cluster is not properly aligned; "
                 "L2 entry corrupted.", fix ? "Repairing" : "ERROR", host,
                 holds_data ? "Data" : "Preallocated");
            c->res->corruptions++;
            if (fix) {
                /* a preallocated zero cluster can simply become a zero cluster */
                uint8_t *w = c->buf + (size_t)j * h->l2_entry_bytes;
                if (h->extended_l2) {
                    be64_put(w, 0);
                    be64_put(w + 8, (uint64_t)zero << 32);
                } else {
                    be64_put(w, QCOW2_L2_ZERO);
                }
                if (qcow2_repair_l2_entry(c, l2_off, j) == 0) {
                    c->res->corruptions--;
                    c->res->corruptions_fixed++;
                    continue;   /* the cluster is not used any more */
                }
            }
        }
        if (frag) {
            c->res->allocated_clusters++;
            if (c->next_contiguous && host != c->next_contiguous)
                c->res->fragmented_clusters++;
            c->next_contiguous = host + c->cs;
        }
        if (!data_file)
            inc_refs(c, host, c->cs);
    }
}

/* References of one L1 table and everything under it. */
static int check_l1(struct chk *c, uint64_t l1_off, uint32_t l1_size, bool frag)
{
    uint8_t *chunk;
    int r = 0;

    inc_refs(c, l1_off, (uint64_t)l1_size * 8);
    chunk = malloc(L1_CHUNK * 8);
    if (!chunk)
        return diag_fail(c->q->bd.diag, -ENOMEM, c->q->bd.filename, -1, "out of memory");
    for (uint32_t base = 0; base < l1_size && r == 0; base += L1_CHUNK) {
        uint32_t n = l1_size - base < L1_CHUNK ? l1_size - base : L1_CHUNK;
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
            if (!visit(c)) {
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

static int check_bitmaps(struct chk *c)
{
    struct qcow2_bitmap *b;
    uint32_t n;
    int r = qcow2_read_bitmaps(c->q, &b, &n);

    if (r < 0)
        return r;
    if (n)
        inc_refs(c, c->h->bitmap_directory_offset, c->h->bitmap_directory_size);
    for (uint32_t i = 0; i < n; i++) {
        inc_refs(c, b[i].table_offset, (uint64_t)b[i].table_size * 8);
        for (uint64_t base = 0; base < b[i].table_size; base += c->cs / 8) {
            uint64_t cnt = b[i].table_size - base;
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
    qcow2_bitmaps_free(b, n);
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
 * does.  Returns true when the file was extended. */
static bool extend_to_block(struct chk *c, uint64_t i, uint64_t off)
{
    uint64_t size = off + c->cs;
    int r = -EFBIG;

    WARN(c, "Repairing refcount block %" PRIu64 " is outside image", i);
    if (size / c->cs <= QCOW2_CHECK_MAX_CLUSTERS)
        r = qcow2_repair_extend(c, size);
    if (r == 0)
        r = qcow2_chk_grow(c, (c->file_size + c->cs - 1) / c->cs);
    if (r < 0) {
        c->rebuild = true;
        WARN(c, "ERROR could not resize image: %s", strerror(-r));
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
            if (!(c->fix & BD_CHECK_FIX_ERRORS)) {
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
            bool ok;
            if (!l2 || (l2 & (c->cs - 1)))
                continue;
            uint64_t rc = stored_refcount(c, l2 / c->cs, &ok);
            if (ok && (rc == 1) != ((e & QCOW2_L1_COPIED) != 0)) {
                WARN(c, "%s OFLAG_COPIED L2 cluster: l1_index=%" PRIu32 " l1_entry=%"
                     PRIx64 " refcount=%" PRIu64, repair ? "Repairing" : "ERROR",
                     base + i, e, rc);
                c->res->corruptions++;
                if (repair) {
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
                if (!visit(c)) {
                    c->res->check_errors++;
                    r = -EFBIG;
                    break;
                }
                r = check_copied_l2(c, l2, repair);
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
    struct bd_check_result *res = c->res, old = *res;
    int64_t fresh = 0, highest;
    int r;

    WARN(c, "Rebuilding refcount structure");
    if ((r = qcow2_rebuild_refcounts(c)) < 0) {
        res->check_errors++;
        return r;
    }
    res->corruptions = res->leaks = 0;
    /* count again against the new structure (the block statistics of the
     * first count stand) */
    c->rebuild = false;
    c->fix = 0;
    memset(c->refs, 0, c->n * sizeof(*c->refs));
    int64_t alloc = res->allocated_clusters, frag = res->fragmented_clusters;
    int64_t comp = res->compressed_clusters;
    r = calculate(c);
    res->allocated_clusters = alloc;
    res->fragmented_clusters = frag;
    res->compressed_clusters = comp;
    c->fix = fix;
    if (r < 0)
        return r;
    if (fix & BD_CHECK_FIX_LEAKS) {
        /* the old structure is leaked now: free it; only leaks that cannot
         * be fixed count */
        struct bd_check_result saved = *res;
        memset(res, 0, sizeof(*res));
        compare_refcounts(c, BD_CHECK_FIX_LEAKS, &highest);
        if (c->rebuild)
            WARN(c, "ERROR rebuilt refcount structure is still broken");
        fresh = res->leaks;
        *res = saved;
    }
    if (res->corruptions < old.corruptions)
        res->corruptions_fixed += old.corruptions - res->corruptions;
    if (res->leaks < old.leaks)
        res->leaks_fixed += old.leaks - res->leaks;
    res->leaks += fresh;
    return 0;
}

int qcow2_check(struct bd *bd, struct bd_check_result *res, unsigned fix)
{
    struct qcow2 *q = to_qcow2(bd);
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
    c.nb_clusters = (c.file_size + c.cs - 1) / c.cs;
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
    if (!c.buf || !c.rblock || qcow2_chk_grow(&c, c.nb_clusters + 1) < 0) {
        r = diag_fail(bd->diag, -ENOMEM, bd->filename, -1, "out of memory");
        goto out;
    }
    c.n = c.nb_clusters;
    res->total_clusters = (int64_t)((bd->size + c.cs - 1) / c.cs);

    if ((r = calculate(&c)) < 0)
        goto out;
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
        if (res->leaks || res->corruptions) {
            *res = pre;
            compare_refcounts(&c, fix, &highest);
        }
    }
    if ((r = check_copied(&c)) < 0)
        goto out;
    res->image_end_offset = (highest + 1) * (int64_t)c.cs;
    r = 0;
out:
    if (fix) {
        int e = qcow2_repair_end(&c, r == 0 && !res->check_errors && !res->corruptions);
        if (r == 0 && e < 0) {
            res->check_errors++;
            r = e;
        }
    }
    free(c.refs);
    free(c.buf);
    free(c.rblock);
    free(c.reft);
    return r;
}
