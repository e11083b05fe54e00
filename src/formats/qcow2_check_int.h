/* qcow2 check and repair: the state shared by qcow2_check.c (recount and
 * compare, as `qemu-img check`) and qcow2_repair.c (the writes of
 * `check -r`).  Not for other modules. */
#ifndef DISKIMG_QCOW2_CHECK_INT_H
#define DISKIMG_QCOW2_CHECK_INT_H

#include <stdbool.h>
#include <stdint.h>

#include "formats/qcow2_int.h"

#define QCOW2_CHECK_MAX_CLUSTERS (16u << 20)   /* 32 MiB of counters */
/* L2 entries one check may visit in all (each L1 table's L2 tables, and
 * the copied-flag pass): 16 TiB of clusters mapped at 64 KiB.  A small
 * file whose L1 entries (or snapshots) all name one big L2 table would
 * otherwise make the check visit 2^40 entries. */
#define QCOW2_CHECK_MAX_VISITS   (1ull << 28)

struct chk {
    struct qcow2 *q;
    struct qcow2_header *h;
    struct bd_check_result *res;
    unsigned fix;               /* BD_CHECK_FIX_* of this pass */
    uint64_t cs;
    uint64_t file_size;
    uint64_t nb_clusters;       /* clusters the file occupies */
    uint64_t n;                 /* counters in use (may pass nb_clusters by one,
                                   and grows while refcounts are rebuilt) */
    uint64_t cap;               /* counters allocated */
    uint16_t *refs;
    uint16_t ref_cap;           /* highest count the image can store, capped */
    uint8_t *buf;               /* one cluster */
    /* the stored refcounts: table and the last block read */
    uint64_t *reft;
    uint64_t reft_len;
    uint8_t *rblock;
    uint64_t rblock_off;        /* offset of the block in rblock, 0 = none */
    uint64_t next_contiguous;   /* fragmentation: where the next data cluster would be */
    uint64_t visits;            /* L2 entries visited so far */
    bool rebuild;               /* the refcount structure must be rebuilt */
    /* repair */
    bool writing;               /* the image has been marked dirty for repair */
    uint64_t orig_incompat;     /* incompatible features before the repair */
};

#define WARN(c, ...) diag_warn((c)->q->bd.diag, (c)->q->bd.filename, -1, __VA_ARGS__)

/* qcow2_check.c */
int qcow2_chk_grow(struct chk *c, uint64_t n);

/* qcow2_repair.c -- each returns 0 or a negative errno (recorded) */
/* Before the first write: mark a v3 image dirty and sync. */
int qcow2_repair_begin(struct chk *c);
/* After the last: sync, then clear the dirty and corrupt bits when nothing
 * is left to repair (else restore them as they were), and sync again. */
int qcow2_repair_end(struct chk *c, bool clean);
/* Store refcount `v` for cluster k, whose block is in c->rblock. */
int qcow2_repair_refcount(struct chk *c, uint64_t k, uint64_t v);
/* Write one L2 entry (and its bitmap word) of the table in c->buf. */
int qcow2_repair_l2_entry(struct chk *c, uint64_t l2_off, uint32_t j);
/* Write a whole L2 table from c->buf. */
int qcow2_repair_l2_table(struct chk *c, uint64_t l2_off);
/* Write L1 entry i of the active table. */
int qcow2_repair_l1_entry(struct chk *c, uint32_t i, uint64_t e);
/* Make the file end at `size` (a refcount block outside the image). */
int qcow2_repair_extend(struct chk *c, uint64_t size);
/* New refcount table and blocks from the counters, entered in the header. */
int qcow2_rebuild_refcounts(struct chk *c);

#endif
