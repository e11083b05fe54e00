/* qcow2 writer: state shared by write*.c (not for other modules). */
#ifndef DISKIMG_QCOW2_WRITE_PRIV_H
#define DISKIMG_QCOW2_WRITE_PRIV_H

#include <stdbool.h>
#include <stdint.h>

#include "formats/bd.h"
#include "formats/qcow2/write.h"

/* qemu's limit on the refcount table (8 MiB of 8-byte entries) */
#define QCOW2W_MAX_REFTABLE_ENTRIES ((8u << 20) / 8)
/* host offsets must fit bits 9..55 of L1/L2 entries */
#define QCOW2W_MAX_HOST_OFFSET (UINT64_C(1) << 56)

struct qcow2w_l2slot {
    uint64_t idx;           /* L1 index of the table held */
    uint64_t stamp;         /* last use, for LRU eviction */
    uint8_t *buf;           /* the table as on disk (big-endian) */
    bool used, dirty;
};

struct qcow2w {
    struct bd bd;
    struct qcow2w_params p;     /* backing strings point into bd fields */
    uint32_t cs;                /* cluster size */
    unsigned cbits;
    struct ioq *ioq;
    bool durable;
    bool compress;              /* -c given */
    int err;                    /* sticky first error */
    bool finished;

    /* allocation: every host cluster below next_cluster is in use */
    uint64_t next_cluster;

    /* mapping */
    uint64_t l1_entries;
    uint64_t *l1;               /* L2 table host offsets, 0 = none */
    uint8_t *l2_on_disk;        /* bit per L1 index: the table was written out */
    unsigned l2_entry_bytes;    /* 8, or 16 with extended L2 */
    uint64_t l2_entries;        /* entries per table */
    struct qcow2w_l2slot *slots;
    unsigned nslots;
    uint64_t clock;
    struct qcow2w_l2slot *last; /* most recently used slot (fast path) */

    /* preallocation: fixed layout computed at create */
    uint64_t data_start;        /* host offset of guest cluster 0 */
    uint64_t pre_reftable_off, pre_reftable_clusters, pre_refblocks_off, pre_l1_off;

    /* refcounts */
    uint64_t rc_epb;            /* entries per refcount block */
    uint64_t rc_max;            /* largest count the width holds */
    uint64_t *reftable;         /* offsets of blocks already written, 0 = not */
    uint64_t reftable_cap;
    uint64_t win_idx;           /* block the window holds exact counts for */
    bool win_valid, win_shared; /* shared: holds a count other than 1 */
    uint8_t *win, *win_spare;

    /* compressed clusters: next free byte in the partly used host cluster,
     * or 0 when the next one starts a fresh cluster */
    uint64_t ctail;

    /* the image's last write when the source ends inside a sector: copied
     * with zeros to the sector's end (kept until close: it may be queued) */
    uint8_t *end_pad;
};

static inline struct qcow2w *to_qcow2w(struct bd *bd)
{
    return (struct qcow2w *)bd;
}

/* write_refcount.c */
int qcow2w_rc_init(struct qcow2w *w);
void qcow2w_rc_free(struct qcow2w *w);
/* Take `n` clusters at the end; *first is the first cluster index. */
int qcow2w_alloc(struct qcow2w *w, uint64_t n, uint64_t *first);
/* Count of allocated cluster c (exact only for clusters a compressed
 * cluster may share, i.e. from the compressed tail on). */
int qcow2w_rc_get(struct qcow2w *w, uint64_t c, uint64_t *val);
int qcow2w_rc_incr(struct qcow2w *w, uint64_t c);
/* Write refcount blocks and table for clusters [0, end) and the blocks
 * not yet written; `first_new` is where the new blocks go (refcount table
 * first, then the blocks), as laid out by qcow2w_rc_plan. */
int qcow2w_rc_plan(struct qcow2w *w, uint64_t extra_after, uint64_t *table_clusters,
                   uint64_t *new_blocks);
int qcow2w_rc_write(struct qcow2w *w, uint64_t table_off, uint64_t table_clusters,
                    uint64_t blocks_off, uint64_t end);

/* write_l2.c */
int qcow2w_l2_init(struct qcow2w *w);
void qcow2w_l2_free(struct qcow2w *w);
/* The cached table for L1 index idx (loaded, generated or fresh). */
int qcow2w_l2_get(struct qcow2w *w, uint64_t idx, uint8_t **tab);
void qcow2w_l2_mark_dirty(struct qcow2w *w, uint8_t *tab);
/* Write every cached table, and (preallocation) every table never loaded. */
int qcow2w_l2_flush(struct qcow2w *w);

/* write.c */
int qcow2w_write_meta(struct qcow2w *w, const void *buf, size_t len, uint64_t off);
/* The checks of a data write of [off, off+len) (granule-aligned, inside). */
int qcow2w_check_range(struct qcow2w *w, uint64_t off, uint64_t len, const char *op);
/* Host clusters and L2 entries for the guest clusters [off, off+len) touches
 * (L2 tables first, then the new data clusters back to back). */
int qcow2w_map_clusters(struct qcow2w *w, uint64_t off, uint64_t len);
/* The host offset the L2 entry of guest cluster g names (0: none). */
int qcow2w_host_of(struct qcow2w *w, uint64_t g, uint64_t *host);

/* write_offload.c */
int qcow2w_map_for_offload(struct bd *bd, uint64_t off, uint64_t len, uint32_t align,
                           struct bfile **f, uint64_t *host, uint64_t *mapped);

#endif
