/* qcow2 snapshot operations' commit engine (snapshot_commit.c): the new
 * state of an image (active L1 table, snapshot table, refcounts) is built
 * in clusters past the end of the file, synced, and switched to by one
 * write of the header's bytes 24..71; the old tables are free in the new
 * refcounts.  A crash before that write leaves the old image untouched
 * (the new clusters past its end have no refcount), after it the new one:
 * never a state with wrong refcounts or copied flags.  Internal. */
#ifndef DISKIMG_QCOW2_SNAPSHOT_COMMIT_H
#define DISKIMG_QCOW2_SNAPSHOT_COMMIT_H

#include <stdbool.h>
#include <stdint.h>

#include "formats/qcow2/read_int.h"

/* The most clusters the engine holds refcounts for (8 bytes each). */
#define QCOW2_SNAPW_MAX_CLUSTERS (1ull << 24)

struct qcow2_snapw {
    struct qcow2 *q;
    uint64_t cs;
    unsigned cbits;
    uint64_t *rc;               /* refcount of every cluster, new state */
    uint64_t n, cap;            /* clusters (the file's, then appended ones) */
    uint64_t rc_max;
    unsigned order;             /* refcount order of the new structures (amend
                                   may change it; init: the image's) */
    uint64_t *old_reft;         /* the refcount table in use (host order) */
    uint64_t old_reft_len;
    uint8_t *tab;               /* one cluster of scratch */
    /* the new active L1 table (host order) */
    uint64_t *l1;
    uint32_t l1_size;
    uint64_t size;              /* the new virtual size */
};

/* Load the refcounts (and validate the refcount table). */
int qcow2_snapw_init(struct qcow2_snapw *w, struct qcow2 *q);
void qcow2_snapw_free(struct qcow2_snapw *w);

/* An L1 table as stored (`n` entries at `off`, host order, malloc'd). */
int qcow2_snapw_read_l1(struct qcow2_snapw *w, uint64_t off, uint32_t n, uint64_t **out);

/* Raise or lower by `delta` the refcounts of what an L1 table references
 * (its L2 tables and every host cluster they name; only the L2 tables in an
 * image with an external data file, whose clusters the image file does not
 * count). */
int qcow2_snapw_walk(struct qcow2_snapw *w, const uint64_t *l1, uint32_t n, int delta);

/* Lower by one the refcount of every cluster [off, off+len) touches. */
int qcow2_snapw_free_range(struct qcow2_snapw *w, uint64_t off, uint64_t len);

/* Append `len` bytes (whole clusters, zero-padded) with refcount 1, written
 * now (past the end: the old image does not see them); *off: where. */
int qcow2_snapw_append(struct qcow2_snapw *w, const void *buf, uint64_t len, uint64_t *off);

/* Where qcow2_snapw_prepare put the new structures (0: none). */
struct qcow2_snapw_layout {
    uint64_t l1_off, snap_off, reft_off;
    uint32_t reft_clusters;
};

/* Everything qcow2_snapw_commit does but the header write: the new active
 * L1 table, the snapshot table (`len` bytes, none when 0), refcount
 * blocks (width w->order) and table, synced.  The caller then switches
 * the header to *out in one write (amend: with other header fields). */
int qcow2_snapw_prepare(struct qcow2_snapw *w, bool keep_l1, bool free_old_l1,
                        const uint8_t *tab, uint64_t len, struct qcow2_snapw_layout *out);

/* Commit: w->l1 (the new active table: copied flags set from the new
 * refcounts; L2 tables whose flags change are copied), written at a new
 * place unless `keep_l1` and nothing changed (then the old one stays, and
 * it must be freed by the caller otherwise when `free_old_l1`); the
 * snapshot table `tab` (`len` bytes, `nb` entries); new refcount blocks
 * and table; sync; the header; sync. */
int qcow2_snapw_commit(struct qcow2_snapw *w, bool keep_l1, bool free_old_l1,
                       const uint8_t *tab, uint64_t len, uint32_t nb);

#endif
