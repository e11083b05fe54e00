/* VHDX: the BAT.  Loaded whole at open (read through the replayed log),
 * every entry the disk uses is checked: a known state with its reserved
 * bits clear, a block (payload: the part the disk uses; sector bitmap:
 * 1 MiB) inside the file as the log leaves it, clear of the header section,
 * the log, the BAT and the metadata (the metadata map), and clear of every
 * other block.  An entry that fails is marked bad: the image still opens,
 * check reports it, and block status and reads of its block fail naming
 * it.
 *
 * The sector bitmap entries of a disk without a parent are not used and
 * not checked: qemu-img 7.2 writes garbage there (it shifts the BAT page it
 * updates through the log by one entry, fixed in qemu 8.0), and qemu reads
 * its own images all the same.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "formats/vhdx/vhdx_int.h"
#include "util/diag.h"
#include "util/endian.h"

static struct diag *D(struct vhdx *v)
{
    return v->bd.diag;
}

static bool is_bitmap(const struct vhdx *v, uint64_t i)
{
    return i % (v->chunk_ratio + 1) == v->chunk_ratio;
}

/* The payload block of entry i (not a bitmap entry). */
static uint64_t block_of(const struct vhdx *v, uint64_t i)
{
    return i - i / (v->chunk_ratio + 1);
}

/* Bytes of the file block entry i's block takes that must be there: a
 * bitmap 1 MiB, a payload block the part the disk uses. */
static uint64_t span_of(const struct vhdx *v, uint64_t i)
{
    if (is_bitmap(v, i))
        return VHDX_SB_BLOCK_SIZE;
    uint64_t start = block_of(v, i) * v->p.block_size;
    uint64_t left = v->bd.size - start;
    return left < v->p.block_size ? left : v->p.block_size;
}

/* Whether the disk uses entry i (payload blocks of the disk; bitmaps of a
 * differencing disk). */
static bool used(const struct vhdx *v, uint64_t i)
{
    if (is_bitmap(v, i))
        return v->diff;
    return block_of(v, i) < v->n_blocks;
}

/* Entry i on its own: 0 and *host (0 when not in the file), or -EINVAL and
 * why. */
static int entry_check(struct vhdx *v, uint64_t i, struct vhdx_bat_entry *e, char *why,
                       size_t len)
{
    bool sb = is_bitmap(v, i);

    if (vhdx_bat_entry_decode(v->bat[i], sb, e, why, len) < 0)
        return -EINVAL;
    if (!sb && e->state == VHDX_PAYLOAD_PARTIALLY_PRESENT) {
        if (!v->diff) {
            snprintf(why, len, "partially present block in a disk without a parent");
            return -EINVAL;
        }
        /* its sectors are told apart by the chunk's bitmap */
        uint64_t c = block_of(v, i) / v->chunk_ratio;
        uint64_t raw = v->bat[vhdx_bat_bitmap_index(c, v->chunk_ratio)];
        if ((raw & VHDX_BAT_STATE_MASK) != VHDX_SB_PRESENT) {
            snprintf(why, len, "block is partially present, but its chunk has no sector "
                     "bitmap");
            return -EINVAL;
        }
    }
    bool present = sb ? e->state == VHDX_SB_PRESENT
                      : e->state == VHDX_PAYLOAD_FULLY_PRESENT ||
                        e->state == VHDX_PAYLOAD_PARTIALLY_PRESENT;
    if (!present) {
        e->off = 0;
        return 0;
    }
    uint64_t n = span_of(v, i);
    const char *what = sb ? "sector bitmap block" : "block";
    if (e->off > v->vfile_size || n > v->vfile_size - e->off) {
        snprintf(why, len, "%s at %llu is past the end of the file (%llu bytes): truncated "
                 "or corrupt image", what, (unsigned long long)e->off,
                 (unsigned long long)v->vfile_size);
        return -EINVAL;
    }
    const struct metarange *m = metamap_find(&v->map, e->off, n);
    if (m) {
        snprintf(why, len, "%s at %llu overlaps the %s at %llu", what,
                 (unsigned long long)e->off, m->what, (unsigned long long)m->off);
        return -EINVAL;
    }
    return 0;
}

static void mark(struct vhdx *v, uint64_t i)
{
    if (!(v->bad[i / 8] & 1u << (i % 8))) {
        v->bad[i / 8] |= (uint8_t)(1u << (i % 8));
        v->n_bad++;
    }
}

static bool is_bad(const struct vhdx *v, uint64_t i)
{
    return v->bad[i / 8] >> (i % 8) & 1;
}

struct span {
    uint64_t off, len, i;
};

static int span_cmp(const void *a, const void *b)
{
    const struct span *x = a, *y = b;
    return x->off < y->off ? -1 : x->off > y->off;
}

int vhdx_bat_load(struct vhdx *v)
{
    uint64_t bytes = v->n_bat * VHDX_BAT_ENTRY_SIZE;
    int r;

    if (bytes > v->reg.bat.len)
        return diag_fail(D(v), -EINVAL, v->bd.filename, (int64_t)v->reg.bat.off,
                         "BAT region of %u bytes cannot hold the %llu entries of a disk of "
                         "%llu bytes in blocks of %u", v->reg.bat.len,
                         (unsigned long long)v->n_bat, (unsigned long long)v->bd.size,
                         v->p.block_size);
    uint64_t budget = bytes + (v->n_bat + 7) / 8;
    if ((r = bd_table_budget(&v->bd, budget, v->bd.filename, "the BAT")) < 0)
        return r;
    v->bat = malloc(bytes ? bytes : 1);
    v->bad = calloc((v->n_bat + 7) / 8 + 1, 1);
    if (!v->bat || !v->bad)
        return diag_fail(D(v), -ENOMEM, v->bd.filename, -1, "out of memory");
    if ((r = vhdx_vread(v, v->bat, (size_t)bytes, v->reg.bat.off, "the BAT")) < 0)
        return r;
    /* decoded in place */
    for (uint64_t i = 0; i < v->n_bat; i++)
        v->bat[i] = le64_get((const uint8_t *)&v->bat[i]);

    size_t ns = 0;
    struct span *s = NULL;
    uint64_t present = 0;
    char why[200];
    for (uint64_t i = 0; i < v->n_bat; i++) {
        struct vhdx_bat_entry e;
        if (!used(v, i))
            continue;
        if (entry_check(v, i, &e, why, sizeof(why)) < 0) {
            mark(v, i);
            continue;
        }
        present += e.off != 0;
    }
    /* blocks against each other */
    if ((r = bd_table_budget(&v->bd, present * sizeof(*s), v->bd.filename, "the BAT")) < 0)
        return r;
    s = malloc((present ? present : 1) * sizeof(*s));
    if (!s)
        return diag_fail(D(v), -ENOMEM, v->bd.filename, -1, "out of memory");
    for (uint64_t i = 0; i < v->n_bat; i++) {
        struct vhdx_bat_entry e;
        if (!used(v, i) || is_bad(v, i) || entry_check(v, i, &e, why, sizeof(why)) < 0 ||
            !e.off)
            continue;
        s[ns++] = (struct span){ e.off, span_of(v, i), i };
    }
    qsort(s, ns, sizeof(*s), span_cmp);
    uint64_t reach = 0, reach_i = 0;
    for (size_t k = 0; k < ns; k++) {
        if (k && s[k].off < reach) {
            mark(v, s[k].i);
            mark(v, reach_i);
        }
        if (s[k].off + s[k].len > reach) {
            reach = s[k].off + s[k].len;
            reach_i = s[k].i;
        }
    }
    free(s);
    bd_table_return(&v->bd, present * sizeof(*s));
    return 0;
}

void vhdx_bat_problem(struct vhdx *v, uint64_t i, char *buf, size_t len)
{
    struct vhdx_bat_entry e;

    if (entry_check(v, i, &e, buf, len) == 0)
        snprintf(buf, len, "%s at %llu overlaps another block",
                 is_bitmap(v, i) ? "sector bitmap block" : "block",
                 (unsigned long long)e.off);
}

static int bad_entry(struct vhdx *v, uint64_t i)
{
    char why[200];

    vhdx_bat_problem(v, i, why, sizeof(why));
    if (is_bitmap(v, i))
        return diag_fail(D(v), -EINVAL, v->bd.filename, vhdx_bat_entry_off(v, i),
                         "BAT entry %llu (sector bitmap of chunk %llu): %s",
                         (unsigned long long)i,
                         (unsigned long long)(i / (v->chunk_ratio + 1)), why);
    return diag_fail(D(v), -EINVAL, v->bd.filename, vhdx_bat_entry_off(v, i),
                     "BAT entry %llu (block %llu): %s", (unsigned long long)i,
                     (unsigned long long)block_of(v, i), why);
}

int vhdx_block_entry(struct vhdx *v, uint64_t b, unsigned *state, uint64_t *host)
{
    uint64_t i = vhdx_bat_payload_index(b, v->chunk_ratio);

    if (is_bad(v, i))
        return bad_entry(v, i);
    uint64_t raw = v->bat[i];
    *state = (unsigned)(raw & VHDX_BAT_STATE_MASK);
    *host = *state == VHDX_PAYLOAD_FULLY_PRESENT || *state == VHDX_PAYLOAD_PARTIALLY_PRESENT
            ? raw >> VHDX_BAT_OFFSET_SHIFT << VHDX_BAT_OFFSET_SHIFT : 0;
    return 0;
}

int vhdx_bitmap_entry(struct vhdx *v, uint64_t c, uint64_t *host)
{
    uint64_t i = vhdx_bat_bitmap_index(c, v->chunk_ratio);

    if (i >= v->n_bat)
        return diag_fail(D(v), -EINVAL, v->bd.filename, -1, "chunk %llu has no sector "
                         "bitmap entry", (unsigned long long)c);
    if (is_bad(v, i))
        return bad_entry(v, i);
    uint64_t raw = v->bat[i];
    *host = (raw & VHDX_BAT_STATE_MASK) == VHDX_SB_PRESENT
            ? raw >> VHDX_BAT_OFFSET_SHIFT << VHDX_BAT_OFFSET_SHIFT : 0;
    return 0;
}

bool vhdx_block_peek(const struct vhdx *v, uint64_t b, unsigned *state)
{
    uint64_t i = vhdx_bat_payload_index(b, v->chunk_ratio);

    if (is_bad(v, i))
        return false;
    *state = (unsigned)(v->bat[i] & VHDX_BAT_STATE_MASK);
    return true;
}
