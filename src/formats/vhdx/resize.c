/* VHDX resize, in place (qemu-img 7.2 cannot resize a VHDX).  The image's
 * structures are read again from the file (the reader's copy may be a log
 * replayed in memory: an image whose log is not empty is refused), and
 * changed in an order where the file is a valid image after every step,
 * each step synced:
 *
 * grow:   1. the old last block's bytes past the old end zeroed (the old
 *            image does not show them; the new one must read zeros);
 *            fixed images (LeaveBlocksAllocated) get their new blocks at
 *            the end of the file;
 *         2. the BAT entries of the new blocks (ZERO, or FULLY_PRESENT for
 *            a fixed image) past the old ones: where the BAT region has
 *            room, in place (the old image reads fewer entries); else the
 *            whole BAT copied to a new region at the end of the file, then
 *            region table 1, then its copy, pointed at it;
 *         3. the virtual disk size item (8 bytes inside one sector);
 *         4. the headers: sequence number + 1 into the older slot, then
 *            + 2 into the other, with new file and data write GUIDs.
 * shrink: 1. the size item (a BAT with more entries than the disk needs
 *            is valid); 2. the entries past the new end cleared and the
 *            new last block's bytes past the end zeroed; the file cut
 *            after the last structure or block still referenced;
 *         3. the headers.
 * Differencing images are refused.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/falloc.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "codec/crc32c.h"
#include "formats/vhdx/format.h"
#include "formats/vhdx/write.h"
#include "io/bfile.h"
#include "util/diag.h"
#include "util/endian.h"

#define PIECE_ENTRIES  (VHDX_MIB / VHDX_BAT_ENTRY_SIZE)

struct rs {
    struct bd *bd;
    struct bfile *f;
    uint64_t file_size;
    struct vhdx_header h;       /* the current header */
    unsigned cur;               /* its slot: 0 or 1 */
    uint8_t *rt;                /* region table 1 (raw) */
    struct vhdx_regions reg;
    struct vhdx_params p;
    uint64_t size_item_off;     /* file offset of the disk size item */
    uint64_t cr;                /* chunk ratio */
    uint8_t *buf;               /* 1 MiB, 4 KiB aligned */
};

static int fail(struct rs *s, int err, int64_t off, const char *what)
{
    return diag_fail(s->bd->diag, err, s->bd->filename, off, "%s", what);
}

static int rd(struct rs *s, void *b, size_t len, uint64_t off)
{
    return bfile_pread(s->f, b, len, off);
}

static int wr_sync(struct rs *s, const void *b, size_t len, uint64_t off)
{
    int r = bfile_pwrite(s->f, b, len, off);
    return r < 0 ? r : bfile_sync(s->f);
}

/* --- reading the image's structures ------------------------------------------ */

static int load_header(struct rs *s)
{
    struct vhdx_header h[2];
    bool ok[2];
    char err[200];

    for (unsigned i = 0; i < 2; i++) {
        int r = rd(s, s->buf, VHDX_HEADER_SIZE, i ? VHDX_HEADER2_OFF : VHDX_HEADER1_OFF);
        if (r < 0)
            return r;
        ok[i] = vhdx_header_decode(s->buf, &h[i], err, sizeof(err)) == 0;
    }
    if (!ok[0] && !ok[1])
        return fail(s, -EINVAL, VHDX_HEADER1_OFF, "no valid header");
    s->cur = !ok[0] || (ok[1] && h[1].seq > h[0].seq);
    s->h = h[s->cur];
    if (!vhdx_guid_is_zero(s->h.log_guid))
        return fail(s, -EINVAL, s->cur ? VHDX_HEADER2_OFF : VHDX_HEADER1_OFF,
                    "the log is not empty: replay it first (check -r all)");
    if (s->h.seq >= UINT64_MAX - 2)
        return fail(s, -EINVAL, -1, "the header's sequence number is at its end");
    return 0;
}

static int load_regions(struct rs *s)
{
    char err[200];
    int r;

    if (!(s->rt = malloc(VHDX_REGION_SIZE)))
        return fail(s, -ENOMEM, -1, "out of memory");
    if ((r = rd(s, s->rt, VHDX_REGION_SIZE, VHDX_REGION1_OFF)) < 0)
        return r;
    if ((r = vhdx_regions_decode(s->rt, &s->reg, err, sizeof(err))) < 0)
        return diag_fail(s->bd->diag, r, s->bd->filename, VHDX_REGION1_OFF,
                         "region table: %s (not resizing a damaged image)", err);
    /* the copy must say the same: it is rewritten from the first */
    uint8_t *copy = malloc(VHDX_REGION_SIZE);
    if (!copy)
        return fail(s, -ENOMEM, -1, "out of memory");
    r = rd(s, copy, VHDX_REGION_SIZE, VHDX_REGION2_OFF);
    if (r == 0 && memcmp(copy, s->rt, VHDX_REGION_SIZE) != 0)
        r = fail(s, -EINVAL, VHDX_REGION2_OFF,
                 "the region table's copy differs from it (not resizing a damaged image)");
    free(copy);
    return r;
}

static int load_metadata(struct rs *s)
{
    uint64_t mo = s->reg.meta.off;
    struct vhdx_meta m;
    char err[200];
    int r;

    if (mo + s->reg.meta.len > s->file_size)
        return fail(s, -EINVAL, (int64_t)mo, "the metadata region is past the end of the file");
    uint8_t *t = malloc(VHDX_META_TABLE_SIZE);
    if (!t)
        return fail(s, -ENOMEM, -1, "out of memory");
    if ((r = rd(s, t, VHDX_META_TABLE_SIZE, mo)) == 0 &&
        (r = vhdx_meta_decode(t, s->reg.meta.len, &m, err, sizeof(err))) < 0)
        diag_fail(s->bd->diag, r, s->bd->filename, (int64_t)mo, "metadata: %s", err);
    free(t);
    if (r < 0)
        return r;
    memset(&s->p, 0, sizeof(s->p));
    static const enum vhdx_meta_item need[] = { VHDX_ITEM_FILE_PARAMS, VHDX_ITEM_DISK_SIZE,
                                                VHDX_ITEM_LOGICAL_SECTOR };
    uint8_t item[8];
    for (size_t i = 0; i < sizeof(need) / sizeof(need[0]); i++) {
        const struct vhdx_meta_entry *e = &m.item[need[i]];
        uint64_t at = mo + e->off;
        if (!m.have[need[i]] || e->len > sizeof(item))
            return fail(s, -EINVAL, (int64_t)mo, "metadata: an item is missing");
        if ((r = rd(s, item, e->len, at)) < 0)
            return r;
        if (need[i] == VHDX_ITEM_FILE_PARAMS)
            r = vhdx_file_params_decode(item, e->len, &s->p, err, sizeof(err));
        else if (need[i] == VHDX_ITEM_DISK_SIZE) {
            r = vhdx_disk_size_decode(item, e->len, &s->p, err, sizeof(err));
            s->size_item_off = at;
        } else
            r = vhdx_sector_size_decode(item, e->len, false, &s->p, err, sizeof(err));
        if (r < 0)
            return diag_fail(s->bd->diag, r, s->bd->filename, (int64_t)at, "metadata: %s", err);
    }
    if (s->size_item_off % 8)
        return fail(s, -ENOTSUP, (int64_t)s->size_item_off,
                    "the disk size item is not 8-byte aligned: it could not be changed in "
                    "one sector");
    if (s->p.has_parent)
        return fail(s, -ENOTSUP, -1, "resizing a differencing vhdx image is not supported");
    s->cr = vhdx_chunk_ratio(s->p.block_size, s->p.logical_sector);
    return 0;
}

/* --- BAT entries ---------------------------------------------------------------- */

static uint64_t entries_for(const struct rs *s, uint64_t size)
{
    return vhdx_bat_entries(size, s->p.block_size, s->p.logical_sector, false);
}

static int read_entry(struct rs *s, uint64_t idx, uint64_t *raw)
{
    uint8_t b[8];
    int r = rd(s, b, 8, s->reg.bat.off + idx * 8);

    *raw = le64_get(b);
    return r;
}

/* The entry of a new payload block b (fixed: its place past `*tail`). */
static uint64_t new_entry(struct rs *s, uint64_t b, uint64_t first_new, uint64_t tail)
{
    if (s->p.leave_allocated)
        return vhdx_bat_entry_encode(VHDX_PAYLOAD_FULLY_PRESENT,
                                     tail + (b - first_new) * s->p.block_size);
    return vhdx_bat_entry_encode(VHDX_PAYLOAD_ZERO, 0);
}

/* Entries [from, to) of a BAT at `at`: old ones (below `keep`) copied from
 * the current BAT, new payload ones made, bitmap ones NOT_PRESENT. */
static int write_entries(struct rs *s, uint64_t at, uint64_t from, uint64_t to, uint64_t keep,
                         uint64_t first_new, uint64_t tail)
{
    for (uint64_t i = from; i < to;) {
        uint64_t n = to - i < PIECE_ENTRIES - i % PIECE_ENTRIES ? to - i
                                                                : PIECE_ENTRIES - i % PIECE_ENTRIES;
        uint64_t nk = i < keep ? (keep - i < n ? keep - i : n) : 0;
        int r;
        if (nk && (r = rd(s, s->buf, nk * 8, s->reg.bat.off + i * 8)) < 0)
            return r;
        for (uint64_t k = nk; k < n; k++) {
            uint64_t idx = i + k, e = 0;
            if ((idx + 1) % (s->cr + 1) != 0)
                e = new_entry(s, idx - idx / (s->cr + 1), first_new, tail);
            le64_put(s->buf + k * 8, e);
        }
        if ((r = bfile_pwrite(s->f, s->buf, n * 8, at + i * 8)) < 0)
            return r;
        i += n;
    }
    return 0;
}

/* Zero block b's bytes from `from` (inside the block) to its end, if the
 * block is in the file. */
static int zero_block_tail(struct rs *s, uint64_t b, uint64_t from)
{
    uint64_t raw, bs = s->p.block_size;
    struct vhdx_bat_entry e;
    char err[200];
    int r;

    if (from == 0 || from >= bs)
        return 0;
    uint64_t idx = vhdx_bat_payload_index(b, s->cr);
    if ((r = read_entry(s, idx, &raw)) < 0)
        return r;
    if (vhdx_bat_entry_decode(raw, false, &e, err, sizeof(err)) < 0)
        return diag_fail(s->bd->diag, -EINVAL, s->bd->filename,
                         (int64_t)(s->reg.bat.off + idx * 8), "BAT entry %llu: %s",
                         (unsigned long long)idx, err);
    if (e.state != VHDX_PAYLOAD_FULLY_PRESENT)
        return 0;
    if (e.off + bs > s->file_size)
        return fail(s, -EINVAL, (int64_t)(s->reg.bat.off + idx * 8),
                    "a block lies past the end of the file");
    uint64_t at = e.off + from, len = bs - from;
    if (fallocate(s->f->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)at, (off_t)len) == 0)
        return 0;
    memset(s->buf, 0, VHDX_MIB);
    for (uint64_t k = 0; k < len;) {
        size_t n = len - k < VHDX_MIB ? (size_t)(len - k) : VHDX_MIB;
        if ((r = bfile_pwrite(s->f, s->buf, n, at + k)) < 0)
            return r;
        k += n;
    }
    return 0;
}

/* --- the steps ---------------------------------------------------------------------- */

static int write_size(struct rs *s, uint64_t size)
{
    uint8_t b[8];

    s->p.disk_size = size;
    vhdx_disk_size_encode(&s->p, b);
    return wr_sync(s, b, 8, s->size_item_off);
}

static int write_headers(struct rs *s)
{
    struct vhdx_header h = s->h;
    int r;

    vhdxw_new_guid(h.file_write_guid);
    vhdxw_new_guid(h.data_write_guid);
    for (unsigned i = 0; i < 2; i++) {
        unsigned slot = (s->cur + 1 + i) % 2;
        h.seq = s->h.seq + 1 + i;
        vhdx_header_encode(&h, s->buf);
        if ((r = wr_sync(s, s->buf, VHDX_HEADER_SIZE,
                         slot ? VHDX_HEADER2_OFF : VHDX_HEADER1_OFF)) < 0)
            return r;
    }
    return 0;
}

/* Point both region tables' BAT entry at [off, off+len). */
static int move_bat_region(struct rs *s, uint64_t off, uint32_t len)
{
    uint32_t n = le32_get(s->rt + 8);
    int r;

    for (uint32_t i = 0; i < n && i < VHDX_MAX_REGIONS; i++) {
        uint8_t *e = s->rt + VHDX_REGION_HDR_SIZE + (size_t)i * VHDX_REGION_ENTRY_SIZE;
        if (memcmp(e, vhdx_guid_bat, 16) == 0) {
            le64_put(e + 16, off);
            le32_put(e + 24, len);
        }
    }
    le32_put(s->rt + 4, 0);
    le32_put(s->rt + 4, crc32c(0, s->rt, VHDX_REGION_SIZE));
    if ((r = wr_sync(s, s->rt, VHDX_REGION_SIZE, VHDX_REGION1_OFF)) < 0 ||
        (r = wr_sync(s, s->rt, VHDX_REGION_SIZE, VHDX_REGION2_OFF)) < 0)
        return r;
    s->reg.bat.off = off;
    s->reg.bat.len = len;
    return 0;
}

static uint64_t mib_up(uint64_t v)
{
    return (v + VHDX_MIB - 1) / VHDX_MIB * VHDX_MIB;
}

static int grow(struct rs *s, uint64_t size)
{
    uint64_t bs = s->p.block_size, old = s->p.disk_size;
    uint64_t old_blocks = vhdx_data_blocks(old, s->p.block_size);
    uint64_t new_blocks = vhdx_data_blocks(size, s->p.block_size);
    uint64_t old_n = entries_for(s, old), new_n = entries_for(s, size);
    uint64_t tail = mib_up(s->file_size), end = tail;
    int r;

    if (old_n * 8 > s->reg.bat.len)
        return fail(s, -EINVAL, (int64_t)s->reg.bat.off, "the BAT region is too small for "
                    "the disk");
    /* 1. what the old image does not show */
    if (old_blocks && (r = zero_block_tail(s, old_blocks - 1, old % bs)) < 0)
        return r;
    if (s->p.leave_allocated)
        end += (new_blocks - old_blocks) * bs;
    bool moves = new_n * 8 > s->reg.bat.len;
    uint64_t bat_len = moves ? mib_up(new_n * 8) : 0, bat_at = end;
    if (moves) {
        if (bat_len > UINT32_MAX)
            return fail(s, -EFBIG, -1, "the new BAT would be larger than a region can be");
        end += bat_len;
    }
    if (end > s->file_size && ftruncate(s->f->fd, (off_t)end) < 0)
        return diag_errno(s->bd->diag, -errno, s->bd->filename, -1, "cannot grow the file");
    if ((r = bfile_sync(s->f)) < 0)
        return r;
    s->file_size = end > s->file_size ? end : s->file_size;
    /* 2. the BAT */
    if (moves) {
        if ((r = write_entries(s, bat_at, 0, new_n, old_n, old_blocks, tail)) < 0 ||
            (r = bfile_sync(s->f)) < 0 || (r = move_bat_region(s, bat_at, (uint32_t)bat_len)) < 0)
            return r;
    } else if ((r = write_entries(s, s->reg.bat.off, old_n, new_n, old_n, old_blocks, tail)) < 0 ||
               (r = bfile_sync(s->f)) < 0) {
        return r;
    }
    /* 3., 4. */
    if ((r = write_size(s, size)) < 0)
        return r;
    return write_headers(s);
}

/* The end of the last structure or block the image still references. */
static int used_end(struct rs *s, uint64_t n, uint64_t *end)
{
    uint64_t e = VHDX_HEADER_AREA;
    char err[200];
    int r;

    if (s->h.log_offset + s->h.log_length > e)
        e = s->h.log_offset + s->h.log_length;
    if (s->reg.bat.off + s->reg.bat.len > e)
        e = s->reg.bat.off + s->reg.bat.len;
    if (s->reg.meta.off + s->reg.meta.len > e)
        e = s->reg.meta.off + s->reg.meta.len;
    /* other regions (optional ones) */
    uint32_t cnt = le32_get(s->rt + 8);
    for (uint32_t i = 0; i < cnt && i < VHDX_MAX_REGIONS; i++) {
        const uint8_t *x = s->rt + VHDX_REGION_HDR_SIZE + (size_t)i * VHDX_REGION_ENTRY_SIZE;
        uint64_t o = le64_get(x + 16) + le32_get(x + 24);
        if (o > e)
            e = o;
    }
    for (uint64_t i = 0; i < n;) {
        uint64_t k = n - i < PIECE_ENTRIES ? n - i : PIECE_ENTRIES;
        if ((r = rd(s, s->buf, k * 8, s->reg.bat.off + i * 8)) < 0)
            return r;
        for (uint64_t j = 0; j < k; j++) {
            struct vhdx_bat_entry be;
            bool sb = (i + j + 1) % (s->cr + 1) == 0;
            if (vhdx_bat_entry_decode(le64_get(s->buf + j * 8), sb, &be, err, sizeof(err)) < 0)
                return diag_fail(s->bd->diag, -EINVAL, s->bd->filename,
                                 (int64_t)(s->reg.bat.off + (i + j) * 8), "BAT entry %llu: %s",
                                 (unsigned long long)(i + j), err);
            uint64_t len = sb ? VHDX_SB_BLOCK_SIZE : s->p.block_size;
            if ((be.state == VHDX_PAYLOAD_FULLY_PRESENT ||
                 be.state == VHDX_PAYLOAD_PARTIALLY_PRESENT) && be.off + len > e)
                e = be.off + len;
        }
        i += k;
    }
    *end = e;
    return 0;
}

static int shrink_to(struct rs *s, uint64_t size)
{
    uint64_t old_n = entries_for(s, s->p.disk_size), new_n = entries_for(s, size);
    uint64_t bs = s->p.block_size, end = UINT64_MAX;
    int r;

    if (old_n * 8 > s->reg.bat.len)
        return fail(s, -EINVAL, (int64_t)s->reg.bat.off, "the BAT region is too small for "
                    "the disk");
    if ((r = write_size(s, size)) < 0)
        return r;
    /* entries past the end: zero (an entry the disk does not need) */
    memset(s->buf, 0, VHDX_MIB);
    for (uint64_t i = new_n; i < old_n;) {
        uint64_t k = old_n - i < PIECE_ENTRIES ? old_n - i : PIECE_ENTRIES;
        if ((r = bfile_pwrite(s->f, s->buf, k * 8, s->reg.bat.off + i * 8)) < 0)
            return r;
        i += k;
    }
    uint64_t blocks = vhdx_data_blocks(size, s->p.block_size);
    if (blocks && (r = zero_block_tail(s, blocks - 1, size % bs)) < 0)
        return r;
    if ((r = used_end(s, new_n, &end)) < 0)
        return r;
    if (end < s->file_size && ftruncate(s->f->fd, (off_t)end) < 0)
        return diag_errno(s->bd->diag, -errno, s->bd->filename, -1, "cannot truncate");
    if ((r = bfile_sync(s->f)) < 0)
        return r;
    return write_headers(s);
}

int vhdx_resize(struct bd *bd, uint64_t new_size, bool shrink)
{
    struct rs s = { .bd = bd, .f = bd->file };
    int r;

    if (!bd->file->writable)
        return diag_fail(bd->diag, -EBADF, bd->filename, -1, "internal error: not writable");
    if (posix_memalign((void **)&s.buf, 4096, VHDX_MIB) != 0)
        return diag_fail(bd->diag, -ENOMEM, bd->filename, -1, "out of memory");
    bfile_refresh_size(s.f);
    s.file_size = s.f->size;
    if ((r = load_header(&s)) < 0 || (r = load_regions(&s)) < 0 || (r = load_metadata(&s)) < 0)
        goto out;
    if (new_size % s.p.logical_sector) {
        r = diag_fail(bd->diag, -EINVAL, bd->filename, -1, "the size must be a multiple of "
                      "the logical sector size (%u)", s.p.logical_sector);
        goto out;
    }
    if (new_size == 0 || new_size > VHDX_MAX_SIZE) {
        r = diag_fail(bd->diag, -EFBIG, bd->filename, -1,
                      "a vhdx image is 1 sector to 64 TiB large");
        goto out;
    }
    if (new_size < s.p.disk_size && !shrink) {
        r = diag_fail(bd->diag, -EINVAL, bd->filename, -1,
                      "shrinking would lose data; use --shrink to allow it");
        goto out;
    }
    if (new_size == s.p.disk_size)
        r = 0;
    else
        r = new_size > s.p.disk_size ? grow(&s, new_size) : shrink_to(&s, new_size);
    if (r == 0)
        bd->size = new_size;
    bfile_refresh_size(s.f);
out:
    free(s.buf);
    free(s.rt);
    return r;
}
