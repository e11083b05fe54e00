/* qcow2 check and repair: the state shared by check.c (recount and
 * compare, as `qemu-img check`) and repair.c (the writes of
 * `check -r`).  Not for other modules. */
#ifndef DISKIMG_QCOW2_CHECK_INT_H
#define DISKIMG_QCOW2_CHECK_INT_H

#include <stdbool.h>
#include <stdint.h>

#include "formats/qcow2/read_int.h"

#define QCOW2_CHECK_MAX_CLUSTERS (16u << 20)   /* 32 MiB of counters */
/* L2 entries one check may visit in all (each L1 table's L2 tables, and
 * the copied-flag pass): 16 TiB of clusters mapped at 64 KiB.  A small
 * file whose L1 entries (or snapshots) all name one big L2 table would
 * otherwise make the check visit 2^40 entries. */
#define QCOW2_CHECK_MAX_VISITS   (1ull << 28)
/* Clusters -r all may add to the file to reach a refcount block outside
 * it (qemu adds any number): a block that a crash left unwritten lies just
 * past the end; one further out is a bad pointer, whose refcounts are
 * rebuilt instead of making a hostile image a file of terabytes (and the
 * check a walk over them). */
#define QCOW2_REPAIR_MAX_GROWTH  (1u << 20)

/* An L2 entry the count decided to rewrite (written after it). */
struct chk_fix {
    uint64_t where;             /* file offset of the entry */
    uint64_t e, bitmap;         /* the new entry (bitmap: extended L2 only) */
};

/* The fixes of one L2 table: fixes[first .. first + n) (found again when
 * the table is visited again: a table two L1 tables name). */
struct chk_fix_table {
    uint64_t l2;                /* 0 = empty slot */
    size_t first, n;
};

struct chk {
    struct qcow2 *q;
    struct qcow2_header *h;
    struct bd_check_result *res;
    unsigned fix;               /* BD_CHECK_FIX_* of this pass */
    uint64_t cs;
    uint64_t file_size;
    uint64_t nb_clusters;       /* clusters the file occupies */
    uint64_t first_clusters;    /* ... when the check began */
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
    uint64_t visits;            /* table entries visited so far */
    struct {                    /* problem lines reported, per kind (format) */
        const char *fmt;
        uint64_t n;
    } warned[16];
    uint64_t dropped;           /* lines not printed */
    /* data clusters found overlapping metadata (qcow2_meta_find), judged
     * after the recount: reported where the refcounts do not show them */
    struct chk_overlap {
        uint64_t host, len;
        struct metarange m;
    } *ovl;
    size_t novl, ovl_cap;
    int64_t unread_refcounts;   /* check errors: stored refcounts unreadable */
    /* clusters [taken_lo, taken_hi) hold every reference the count left
     * out (it runs a cluster or more past the end of the file, as qemu
     * counts): a rebuild puts nothing there, or the pointer would name
     * the new structure (and an in-file part of it may hold guest data) */
    uint64_t taken_lo, taken_hi;
    /* a bit per cluster (up to QCOW2_CHECK_MAX_CLUSTERS): guest data (a
     * data or compressed cluster) uses it.  A table there is guest data
     * too, and a repair writes no entry into it: the guest would read other
     * bytes. */
    uint64_t *data_bits;
    bool rebuild;               /* the refcount structure must be rebuilt */
    /* the writes the count decides on are made after it, once the repair
     * is known to go ahead (a refused repair writes nothing): */
    uint64_t extend_to;         /* the file's new size, 0 = as it is (the
                                   count already goes by it: file_size) */
    struct chk_fix *fixes;
    size_t nfixes, fixes_cap;
    struct chk_fix_table *ftab; /* open addressing, by L2 table offset */
    size_t ftab_cap, ftab_used;
    /* repair */
    bool writing;               /* the image has been marked dirty for repair */
    uint64_t orig_incompat;     /* incompatible features before the repair */
};

/* One line per problem, as qemu-img check prints them, up to
 * QCOW2_CHECK_MAX_WARNINGS of each kind: a hostile image can name millions
 * of bad clusters, and the counts say how many there are. */
#define QCOW2_CHECK_MAX_WARNINGS 10000
#define QCOW2_CHECK_MAX_OVERLAPS 4096
#define WARN(c, ...) qcow2_chk_warn((c), __VA_ARGS__)
void qcow2_chk_warn(struct chk *c, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* check.c */
int qcow2_chk_grow(struct chk *c, uint64_t n);
/* Whether guest data uses the cluster holding file offset `off`. */
bool qcow2_chk_data_at(const struct chk *c, uint64_t off);

/* repair.c -- each returns 0 or a negative errno (recorded) */
/* Before the first write: mark a v3 image dirty and sync. */
int qcow2_repair_begin(struct chk *c);
/* After the last: sync, then clear the dirty and corrupt bits when nothing
 * is left to repair (else restore them as they were), and sync again. */
int qcow2_repair_end(struct chk *c, bool clean);
/* Store refcount `v` for cluster k, whose block is in c->rblock. */
int qcow2_repair_refcount(struct chk *c, uint64_t k, uint64_t v);
/* Write one L2 entry (and its bitmap word with extended L2 entries). */
int qcow2_repair_l2_entry(struct chk *c, const struct chk_fix *f);
/* The count's own decisions, written after it: an entry to rewrite (in
 * the L2 table at l2; kept with the others of its table), the fixes
 * already decided for a table (NULL: none), and the commit -- the file
 * made as long as the count went by (c->extend_to), the entries written.
 * `also`: a saved result that gets the same accounting. */
int qcow2_repair_add_fix(struct chk *c, uint64_t l2, uint64_t where, uint64_t e,
                         uint64_t bitmap);
const struct chk_fix_table *qcow2_repair_fixes_of(const struct chk *c, uint64_t l2);
int qcow2_repair_commit(struct chk *c, struct bd_check_result *also);
/* Write a whole L2 table from c->buf. */
int qcow2_repair_l2_table(struct chk *c, uint64_t l2_off);
/* Write L1 entry i of the active table. */
int qcow2_repair_l1_entry(struct chk *c, uint32_t i, uint64_t e);
/* Make the file end at `size` (a refcount block outside the image); only
 * ever longer: -EINVAL for a size at or below the current one.  c->file_size
 * may already say `size`. */
int qcow2_repair_extend(struct chk *c, uint64_t size);
/* A new refcount table and blocks from the counters: placed (clusters
 * taken in c->refs, nothing written; refused when the counters cannot
 * describe the result), then written and entered in the header. */
struct qcow2_rebuild;
int qcow2_rebuild_plan(struct chk *c, struct qcow2_rebuild **out);
int qcow2_rebuild_write(struct chk *c, struct qcow2_rebuild *rb);
void qcow2_rebuild_free(struct qcow2_rebuild *rb);

#endif
