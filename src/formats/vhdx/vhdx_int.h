/* VHDX: the reader's state, shared by the files of src/formats/vhdx/.  Not
 * for other modules. */
#ifndef DISKIMG_VHDX_INT_H
#define DISKIMG_VHDX_INT_H

#include <stdbool.h>
#include <stdint.h>

#include "formats/bd.h"
#include "formats/metamap.h"
#include "formats/vhdx/format.h"

/* The replayed log: what its active sequence writes, as sorted,
 * non-overlapping segments of the file (the last write wins). */
struct vhdx_ov_seg {
    uint64_t off, len;
    const uint8_t *data;        /* len bytes, or NULL: zeros */
};

struct vhdx_overlay {
    struct vhdx_ov_seg *seg;
    size_t n;
    uint8_t *data;              /* the sectors the segments point into */
    uint64_t bytes;             /* memory counted against the table budget */
};

struct vhdx_log_state {
    bool replayed;              /* the header named a log: found and applied
                                   in memory */
    bool written;               /* ... and then into the file (check -r all) */
    uint32_t entries;           /* in the active sequence, tail to head */
    uint64_t tail_seq, head_seq;
    uint32_t tail_pos, head_pos;
    uint64_t flushed_file_offset, last_file_offset;
};

struct vhdx {
    struct bd bd;
    uint64_t file_size;         /* bytes in the file */
    uint64_t vfile_size;        /* the file's size as the log leaves it */
    int cur;                    /* the header in use: 0 (64 KiB) or 1 */
    bool hdr_ok[2];
    struct vhdx_header hdrs[2];
    struct vhdx_header hdr;     /* = hdrs[cur] */
    char hdr_err[2][160];       /* why a header is not valid */
    int region_used;            /* region table 0 or 1 */
    char region_err[160];       /* why table 0 was not used */
    struct vhdx_regions reg;
    struct vhdx_meta meta;
    struct vhdx_params p;
    struct vhdx_ploc ploc;      /* differencing disks */
    bool diff;                  /* has_parent */
    uint64_t chunk_ratio;       /* payload blocks per sector bitmap block */
    uint64_t n_blocks;          /* payload blocks of the disk */
    uint64_t n_bat;             /* entries the disk needs */
    uint64_t *bat;              /* raw entries, n_bat */
    uint8_t *bad;               /* a bit per BAT entry: unusable (see bat.c) */
    uint64_t n_bad;             /* entries marked */
    struct metamap map;         /* header section, log, BAT, metadata */
    struct vhdx_overlay ov;
    struct vhdx_log_state log;
    char creator[128];          /* the identifier's creator, as UTF-8 */
};

static inline struct vhdx *to_vhdx(struct bd *bd)
{
    return (struct vhdx *)bd;
}

/* Bytes of the file as the replayed log leaves it: bytes past the file's
 * end (and inside vfile_size) read as zeros.  Past vfile_size: -EINVAL
 * naming `what` (truncated image). */
int vhdx_vread(struct vhdx *v, void *buf, size_t len, uint64_t off, const char *what);
/* Where the overlay touches [off, off+len): the first segment that
 * overlaps it, or NULL. */
const struct vhdx_ov_seg *vhdx_ov_find(const struct vhdx_overlay *ov, uint64_t off,
                                       uint64_t len);

/* One write of the log, in write order (`order` grows). */
struct vhdx_ov_op {
    uint64_t off, end;
    const uint8_t *data;        /* end - off bytes, or NULL: zeros */
    uint32_t order;             /* later writes win */
};
/* The writes (sorted in place) as ov's sorted, non-overlapping segments,
 * the latest write of each byte winning, adjacent pieces of one write or
 * of zeros merged.  -ENOMEM. */
int vhdx_ov_build(struct vhdx_ov_op *ops, size_t n, struct vhdx_overlay *ov);

/* log.c: find the active sequence of the log the current header names and
 * build the overlay (the file is not written).  An error when the header
 * names a log that holds no valid sequence or that does not fit the file. */
int vhdx_log_replay(struct vhdx *v);
/* Write the overlay into the file, extend it to vfile_size, sync, then
 * write both headers anew without the log (check -r all). */
int vhdx_log_commit(struct vhdx *v);
void vhdx_ov_free(struct vhdx_overlay *ov);
/* Write both headers anew from the current one (a new FileWriteGuid,
 * sequence numbers +1 and +2, the other slot first, each synced). */
int vhdx_write_headers(struct vhdx *v);

/* bat.c: load and validate the BAT (each entry's state, bounds, the
 * metadata map, blocks against each other); entries that fail are marked
 * in v->bad, the image still opens (check reports them, reads of them
 * fail). */
int vhdx_bat_load(struct vhdx *v);
/* Payload block b's entry, checked: *state and the host offset of its
 * data (0 when not in the file).  -EINVAL naming the entry when it is
 * marked bad. */
int vhdx_block_entry(struct vhdx *v, uint64_t b, unsigned *state, uint64_t *host);
/* Payload block b's state without failing: false when it is bad. */
bool vhdx_block_peek(const struct vhdx *v, uint64_t b, unsigned *state);
/* Chunk c's sector bitmap block: host offset (0 when not present). */
int vhdx_bitmap_entry(struct vhdx *v, uint64_t c, uint64_t *host);
/* Why entry i is bad (into buf), for messages and check. */
void vhdx_bat_problem(struct vhdx *v, uint64_t i, char *buf, size_t len);
/* The BAT entry's offset in the file. */
static inline int64_t vhdx_bat_entry_off(const struct vhdx *v, uint64_t i)
{
    return (int64_t)(v->reg.bat.off + i * VHDX_BAT_ENTRY_SIZE);
}

/* read.c */
int vhdx_block_status(struct bd *bd, uint64_t off, uint64_t len, struct bd_extent *e);
int vhdx_pread(struct bd *bd, void *buf, size_t len, uint64_t off);

/* parent.c: open a differencing disk's parent and check its linkage. */
int vhdx_open_parent(struct vhdx *v);

/* check.c */
int vhdx_check(struct bd *bd, struct bd_check_result *r, unsigned fix);

#endif
