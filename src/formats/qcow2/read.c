/* qcow2 reading: guest offset -> runs of one kind (map), block status, pread.
 *
 * map() walks L1 and L2 entries from a guest offset and returns the longest
 * run of one kind it can (unallocated, zero, preallocated zero, data at
 * consecutive host offsets, compressed), crossing clusters and L2 tables;
 * an empty L1 entry covers a whole L2 table's range in one step, so a huge
 * sparse image is described in a few calls.  pread() serves each run: data
 * with one read per run, zeros without I/O, unallocated ranges from the
 * backing file, compressed clusters inflated in the calling thread.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>

#include "formats/qcow2/read_int.h"
#include "io/bfile.h"
#include "util/diag.h"
#include "util/endian.h"

int qcow2_load_l1(struct qcow2 *q, uint64_t offset, uint32_t entries, uint32_t loaded)
{
    struct bd *bd = &q->bd;
    uint64_t bytes = (uint64_t)loaded * 8;
    uint64_t *l1;

    bd_table_return(bd, (uint64_t)q->l1_len * 8);
    free(q->l1);
    q->l1 = NULL;
    q->l1_len = 0;
    q->l1_offset = offset;
    if (loaded == 0)
        return 0;
    if (offset >= q->file_size || (uint64_t)entries * 8 > q->file_size - offset)
        return diag_fail(bd->diag, -EINVAL, bd->filename, (int64_t)offset,
                         "L1 table (%" PRIu32 " entries at offset %" PRIu64
                         ") runs past the end of the file (%" PRIu64 " bytes)",
                         entries, offset, q->file_size);
    /* one budget for the L1 tables (and the VMDK tables) of the whole chain */
    int r = bd_table_budget(bd, bytes, bd->filename, "L1 tables and other tables");
    if (r < 0)
        return r;
    l1 = malloc(bytes);
    if (!l1) {
        bd_table_return(bd, bytes);
        return diag_fail(bd->diag, -ENOMEM, bd->filename, -1, "out of memory");
    }
    r = bfile_pread(bd->file, l1, bytes, offset);
    if (r < 0) {
        bd_table_return(bd, bytes);
        free(l1);
        return r;
    }
    /* to host byte order in place (each entry is read before it is written) */
    for (uint32_t i = 0; i < loaded; i++)
        l1[i] = be64_get((const uint8_t *)&l1[i]);
    q->l1 = l1;
    q->l1_len = loaded;
    return 0;
}

struct run {
    enum qcow2_kind kind;
    uint64_t len;
    bool has_host;      /* `host` is valid (offset 0 is a real one in a data file) */
    uint64_t host;      /* DATA/ZERO_ALLOC: host offset of the first byte;
                           UNALLOC with has_host: the extended L2 cluster's;
                           COMPRESSED: the cluster's compressed data offset */
    uint32_t csize;     /* COMPRESSED */
};

/* One piece: the part of [pos, ...) inside one cluster (or one unallocated
 * L2 range) that has one kind. */
static int piece(struct qcow2 *q, uint64_t pos, int *slot, uint64_t *slot_off,
                 const uint8_t **table, struct run *p)
{
    const struct qcow2_header *h = &q->h;
    struct bd *bd = &q->bd;
    uint64_t cs = h->cluster_size;
    uint64_t per_l2 = cs * h->l2_entries;
    uint64_t l1i = pos / per_l2;
    uint64_t l2off;
    int r;

    p->host = 0;
    p->has_host = false;
    p->csize = 0;
    if (l1i >= q->l1_len) {
        /* a snapshot's L1 table may be shorter than the virtual size needs */
        p->kind = QK_UNALLOC;
        p->len = UINT64_MAX - pos;
        return 0;
    }
    r = qcow2_l1_entry_decode(h, q->l1[l1i], (uint32_t)l1i, q->l1_offset + l1i * 8,
                              &l2off, bd->diag, bd->filename);
    if (r < 0)
        return r;
    if (l2off == 0) {
        p->kind = QK_UNALLOC;
        p->len = per_l2 - pos % per_l2;
        return 0;
    }
    if (l2off != *slot_off) {
        /* an L2 table is metadata of its own: not the L1 or refcount table,
         * a refcount block, ... (its entries would be read as pointers) */
        const struct metarange *m = metamap_find(&q->meta, l2off, cs);
        if (m)
            return diag_fail(bd->diag, -EINVAL, bd->filename, (int64_t)l2off,
                             "L2 table at host offset %" PRIu64 " (L1 entry %" PRIu64
                             ") overlaps the %s (host offset %" PRIu64 ", %" PRIu64
                             " bytes)", l2off, l1i, m->what, m->off, m->len);
        qcow2_l2cache_put(q->l2, *slot);
        *slot = -1;
        *slot_off = 0;
        r = qcow2_l2cache_get(q->l2, l2off, table, slot);
        if (r < 0)
            return r;
        *slot_off = l2off;
    }
    if (qcow2_l2cache_zero(q->l2, *slot)) {
        p->kind = QK_UNALLOC;
        p->len = per_l2 - pos % per_l2;
        return 0;
    }
    uint64_t idx = (pos / cs) % h->l2_entries;
    const uint8_t *ep = *table + idx * h->l2_entry_bytes;
    uint64_t e = be64_get(ep);
    uint64_t bitmap = h->extended_l2 ? be64_get(ep + 8) : 0;
    struct qcow2_l2e d;
    uint64_t guest = pos & ~(cs - 1);
    r = qcow2_l2_entry_decode(h, q->data != NULL, e, bitmap, guest,
                              l2off + idx * h->l2_entry_bytes, &d, bd->diag, bd->filename);
    if (r < 0)
        return r;
    uint64_t in = pos - guest;
    if (d.kind == QK_COMPRESSED) {
        /* its bytes must not be the image's own metadata */
        if ((r = qcow2_meta_refuse(q, d.host, d.csize, guest, true)) < 0)
            return r;
        p->kind = QK_COMPRESSED;
        p->host = d.host;
        p->has_host = true;
        p->csize = d.csize;
        p->len = cs - in;
        return 0;
    }
    if (!d.extended) {
        if (d.kind == QK_DATA && (r = qcow2_meta_refuse(q, d.host, cs, guest, false)) < 0)
            return r;
        p->kind = d.kind;
        p->has_host = d.has_host;
        p->host = d.has_host ? d.host + in : 0;
        p->len = cs - in;
        return 0;
    }
    /* extended L2: adjacent subclusters of the same kind */
    uint32_t scs = h->subcluster_size;
    unsigned sc = (unsigned)(in / scs), end = sc + 1;
    p->kind = qcow2_l2e_subcluster(&d, sc);
    while (end < QCOW2_SUBCLUSTERS && qcow2_l2e_subcluster(&d, end) == p->kind)
        end++;
    if (p->kind == QK_DATA && (r = qcow2_meta_refuse(q, d.host, cs, guest, false)) < 0)
        return r;
    /* unallocated subclusters of an allocated cluster keep its host offset
     * (in a data file, host offset 0 is guest cluster 0's) */
    p->has_host = d.has_host;
    p->host = d.has_host ? d.host + in : 0;
    p->len = (uint64_t)end * scs - in;
    return 0;
}

/* The run starting at `off`, at most `len` bytes.  With `one_cluster`,
 * compressed runs stop at the end of their cluster (pread inflates them
 * one by one); otherwise they merge like the other kinds. */
static int map(struct qcow2 *q, uint64_t off, uint64_t len, bool one_cluster,
               struct run *run)
{
    int slot = -1, r = 0;
    uint64_t slot_off = 0;
    const uint8_t *table = NULL;

    run->len = 0;
    while (run->len < len) {
        struct run p;
        uint64_t pos = off + run->len;
        r = piece(q, pos, &slot, &slot_off, &table, &p);
        if (r < 0)
            break;
        if (p.len > len - run->len)
            p.len = len - run->len;
        if (run->len == 0) {
            *run = p;
        } else {
            if (p.kind != run->kind)
                break;
            if ((p.kind == QK_DATA || p.kind == QK_ZERO_ALLOC) &&
                p.host != run->host + run->len)
                break;
            if (p.kind == QK_UNALLOC && (p.has_host != run->has_host ||
                                         (p.has_host && p.host != run->host + run->len)))
                break;
            if (p.kind == QK_COMPRESSED && one_cluster)
                break;
            run->len += p.len;
        }
        if (p.kind == QK_COMPRESSED && one_cluster)
            break;
    }
    qcow2_l2cache_put(q->l2, slot);
    return r;
}

/* A data run whose host bytes are a hole of the file (preallocation=metadata
 * leaves those) reads as zeros: shorten *len to the hole or to the data
 * before the next hole.  Bytes at or past the end of the file are left as
 * data, so that pread() reports clusters missing from a truncated file. */
static bool host_hole(struct bfile *f, uint64_t host, uint64_t *len)
{
    if (f->kind != BFILE_REGULAR || host >= f->size)
        return false;
    off_t data = lseek(f->fd, (off_t)host, SEEK_DATA);
    if (data < 0 || (uint64_t)data >= f->size) {
        if (data < 0 && errno != ENXIO)
            return false;   /* no SEEK_DATA here: all data */
        data = (off_t)f->size;
    }
    if ((uint64_t)data > host) {
        if (*len > (uint64_t)data - host)
            *len = (uint64_t)data - host;
        return true;
    }
    off_t hole = lseek(f->fd, (off_t)host, SEEK_HOLE);
    if (hole > (off_t)host && (uint64_t)hole - host < *len)
        *len = (uint64_t)hole - host;
    return false;
}

int qcow2_block_status(struct bd *bd, uint64_t off, uint64_t len, struct bd_extent *e)
{
    struct qcow2 *q = to_qcow2(bd);
    struct run run;

    if (off >= bd->size)
        return diag_fail(bd->diag, -EINVAL, bd->filename, (int64_t)off,
                         "block status past the end of the image");
    if (len > bd->size - off)
        len = bd->size - off;
    int r = map(q, off, len, false, &run);
    if (r < 0)
        return r;
    e->len = run.len;
    e->host_offset = -1;
    e->host = NULL;
    switch (run.kind) {
    case QK_UNALLOC:
        e->flags = 0;
        if (run.has_host)   /* extended L2: the cluster's host offset (qemu shows it) */
            e->host_offset = (int64_t)run.host;
        break;
    case QK_ZERO:
        e->flags = BD_ALLOCATED | BD_ZERO;
        break;
    case QK_ZERO_ALLOC:
        /* zeros; the host cluster stays reserved (qemu: zero, offset, no data) */
        e->flags = BD_ALLOCATED | BD_ZERO;
        e->host_offset = (int64_t)run.host;
        break;
    case QK_DATA: {
        e->flags = BD_ALLOCATED | BD_DATA;
        e->host_offset = (int64_t)run.host;
        /* file holes under data clusters are zeros for qemu only in images
         * it takes for metadata-preallocated */
        int pre = qcow2_metadata_prealloc(q);
        if (pre < 0)
            return pre;
        if (pre && host_hole(q->data ? q->data : bd->file, run.host, &e->len))
            e->flags |= BD_ZERO;
        break;
    }
    case QK_COMPRESSED:
        e->flags = BD_ALLOCATED | BD_DATA | BD_COMPRESSED;
        break;
    }
    /* host offsets in an external data file are offsets in that file */
    if (e->host_offset >= 0) {
        e->host = bd;
        if (q->data)
            e->host_file = q->data;
    }
    return 0;
}

/* Bytes of a data run at `host` in `f`.  A cluster that starts at or past
 * the end of the file is an error; the tail of one that straddles it reads
 * as zeros (qemu leaves such files). */
static int read_data(struct qcow2 *q, struct bfile *f, uint64_t host, uint8_t *buf,
                     uint64_t len, uint64_t guest)
{
    uint64_t cs = q->h.cluster_size;
    uint64_t first_missing = (f->size + cs - 1) & ~(cs - 1);
    size_t got;

    if (host + len > first_missing) {
        uint64_t bad = host > first_missing ? host & ~(cs - 1) : first_missing;
        return diag_fail(q->bd.diag, -EINVAL, q->bd.filename, (int64_t)bad,
                         "data cluster at host offset %" PRIu64 " (guest offset %" PRIu64
                         ") is past the end of %s (%" PRIu64 " bytes)", bad,
                         guest + (bad > host ? bad - host : 0),
                         f == q->bd.file ? "the file" : f->path, f->size);
    }
    int r = bfile_pread_upto(f, buf, len, host, &got);
    if (r < 0)
        return r;
    memset(buf + got, 0, len - got);
    return 0;
}

static int read_compressed(struct qcow2 *q, const struct run *run, uint8_t *buf,
                           uint64_t off)
{
    struct bd *bd = &q->bd;
    uint64_t cs = q->h.cluster_size;
    uint64_t guest = off & ~(cs - 1), in_cluster = off - guest;
    uint64_t need = bd->size - guest < cs ? bd->size - guest : cs;
    struct qcow2_inflate_slot *s;
    size_t got = 0, produced = 0;
    char why[160];
    int r;

    if (run->host >= q->file_size)
        return diag_fail(bd->diag, -EINVAL, bd->filename, (int64_t)run->host,
                         "compressed data of guest cluster at %" PRIu64 " starts at host "
                         "offset %" PRIu64 ", past the end of the file (%" PRIu64 " bytes)",
                         guest, run->host, q->file_size);
    s = qcow2_inflate_pool_take(&q->inflate);
    if (!s)
        return diag_fail(bd->diag, -ENOMEM, bd->filename, -1, "out of memory");
    /* the last sector may run past the end of the file */
    r = bfile_pread_upto(bd->file, s->in, run->csize, run->host, &got);
    if (r < 0)
        goto out;
    /* a whole, aligned cluster inflates straight into the caller's buffer */
    uint8_t *out = (in_cluster == 0 && run->len == cs) ? buf : s->out;
    r = qcow2_inflate(s->z, s->in, got, out, cs, &produced, why, sizeof(why));
    if (r < 0) {
        r = diag_fail(bd->diag, r, bd->filename, (int64_t)run->host,
                      "compressed cluster at host offset %" PRIu64 " (guest offset %"
                      PRIu64 "): %s", run->host, guest, why);
        goto out;
    }
    if (produced < need) {
        r = diag_fail(bd->diag, -EINVAL, bd->filename, (int64_t)run->host,
                      "compressed cluster at host offset %" PRIu64 " (guest offset %"
                      PRIu64 ") inflates to %zu bytes, expected %" PRIu64, run->host,
                      guest, produced, cs);
        goto out;
    }
    if (produced < cs)
        memset(out + produced, 0, cs - produced);
    if (out != buf)
        memcpy(buf, out + in_cluster, run->len);
out:
    qcow2_inflate_pool_give(&q->inflate, s);
    return r;
}

int qcow2_pread(struct bd *bd, void *buf, size_t len, uint64_t off)
{
    struct qcow2 *q = to_qcow2(bd);
    uint8_t *p = buf;
    int r;

    if (off > bd->size || len > bd->size - off)
        return diag_fail(bd->diag, -EINVAL, bd->filename, (int64_t)off,
                         "read of %zu bytes past the end of the image", len);
    while (len) {
        struct run run;
        r = map(q, off, len, true, &run);
        if (r < 0)
            return r;
        switch (run.kind) {
        case QK_UNALLOC:
            r = bd_pread_backing(bd, p, run.len, off);
            break;
        case QK_ZERO:
        case QK_ZERO_ALLOC:
            memset(p, 0, run.len);
            r = 0;
            break;
        case QK_DATA:
            r = read_data(q, q->data ? q->data : bd->file, run.host, p, run.len, off);
            break;
        case QK_COMPRESSED:
            r = read_compressed(q, &run, p, off);
            break;
        }
        if (r < 0)
            return r;
        p += run.len;
        off += run.len;
        len -= run.len;
    }
    return 0;
}
