/* qcow2 refcounts of an existing image (refcount.c): read, change in
 * place, append clusters.  Used by resize, check -r and the reader's
 * metadata-preallocation test.  Not thread-safe: one user at a time. */
#ifndef DISKIMG_QCOW2_RC_H
#define DISKIMG_QCOW2_RC_H

#include <stdbool.h>
#include <stdint.h>

#include "formats/qcow2/read_int.h"

struct qcow2_rc {
    struct bfile *f;
    struct diag *d;
    const char *path;
    unsigned cbits, order;
    uint64_t cs, per_block, max;
    uint64_t file_size;         /* grows as clusters are appended */
    uint64_t *table;            /* host byte order */
    uint64_t table_len;         /* entries */
    uint64_t table_off;
    uint32_t table_clusters;
    uint8_t *blk;               /* one cached refcount block */
    uint64_t blk_off;           /* its offset, 0 = none */
    bool blk_dirty;
    bool defer_flush;           /* qcow2_rc_append leaves plain appends in the
                                   cache: the user flushes before anything on
                                   disk names the clusters (the in-place writer) */
};

/* What qcow2_rc_append changed besides the clusters asked for. */
struct qcow2_rc_grown {
    uint64_t blocks_added;
    bool new_table;             /* rc->table_off/clusters name a new table that
                                   the header must point to; then free the old
                                   one (old_table_off, old_table_clusters) */
    uint64_t old_table_off;
    uint32_t old_table_clusters;
};

/* Load the refcount table of `q` (which must lie inside the file); failures
 * are recorded in `d`. */
int qcow2_rc_open(struct qcow2_rc *rc, struct qcow2 *q, struct diag *d);
void qcow2_rc_close(struct qcow2_rc *rc);

/* Refcount of a cluster (0 where no block exists).  Fails on a table entry
 * with reserved bits, a misaligned block or one past the end of the file. */
int qcow2_rc_get(struct qcow2_rc *rc, uint64_t cluster, uint64_t *v);
/* Whether the table names a refcount block for this cluster (without
 * reading or validating it): clusters without one have refcount 0. */
bool qcow2_rc_has_block(const struct qcow2_rc *rc, uint64_t cluster);
/* Set it (the block must exist). */
int qcow2_rc_set(struct qcow2_rc *rc, uint64_t cluster, uint64_t v);
/* Raise or lower it, refusing to go below 0 or past the width. */
int qcow2_rc_add(struct qcow2_rc *rc, uint64_t cluster, int delta);
/* Lower by one the refcount of every cluster [off, off+len) touches. */
int qcow2_rc_free_range(struct qcow2_rc *rc, uint64_t off, uint64_t len);
/* After qcow2_rc_append made a new refcount table (g->new_table) while the
 * rest of the header stays: write the refcounts and sync, point the header
 * at the new table and sync, then free the old table.  Updates q->h. */
int qcow2_rc_adopt_table(struct qcow2_rc *rc, struct qcow2 *q, const struct qcow2_rc_grown *g);

/* *end = one past the last cluster with a non-zero refcount among the
 * first `clusters` (at least 1: the header). */
int qcow2_rc_used_end(struct qcow2_rc *rc, uint64_t clusters, uint64_t *end);
/* Write the cached block back. */
int qcow2_rc_flush(struct qcow2_rc *rc);

/* Take `n` clusters at the end of the file (*first is the first index)
 * with refcount 1, adding refcount blocks, and a new refcount table, where
 * needed.  The caller writes the clusters' content. */
int qcow2_rc_append(struct qcow2_rc *rc, uint64_t n, uint64_t *first,
                    struct qcow2_rc_grown *g);

#endif
