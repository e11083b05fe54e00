/* qcow2 reader internals: shared by the files of formats/qcow2, not by the rest of
 * the program (unit tests include it to reach the pure decode functions). */
#ifndef DISKIMG_QCOW2_INT_H
#define DISKIMG_QCOW2_INT_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "codec/codec.h"
#include "formats/bd.h"
#include "formats/metamap.h"
#include "formats/qcow2/qcow2.h"

struct bfile;
struct diag;

/* compressed clusters are inflated by codec/ (inflate.c, inflate_pool.c) */
_Static_assert(QCOW2_COMPRESSION_ZLIB == CODEC_DEFLATE && QCOW2_COMPRESSION_ZSTD == CODEC_ZSTD,
               "qcow2 compression types are the codec's");

/* --- L1/L2 entries (entry.c, pure) ---------------------------------- */

enum qcow2_kind {
    QK_UNALLOC,     /* not here: backing file, or zeros */
    QK_ZERO,        /* reads as zeros, no host cluster */
    QK_ZERO_ALLOC,  /* reads as zeros, host cluster preallocated */
    QK_DATA,        /* bytes at a host offset */
    QK_COMPRESSED,  /* compressed cluster */
};

struct qcow2_l2e {
    enum qcow2_kind kind;   /* the whole cluster (without extended L2) */
    uint64_t host;          /* host cluster offset, or compressed data offset */
    bool has_host;          /* `host` names a cluster (0 is one in a data file) */
    uint32_t csize;         /* compressed: bytes the data may occupy */
    bool extended;          /* subclusters: see alloc/zero */
    uint32_t alloc, zero;   /* extended L2 bitmaps */
};

/* The host clusters a compressed entry's bytes [host, host + csize) touch:
 * returns how many, from *first on.  The size field counts up to two
 * clusters' worth of sectors and the data may start in any sector of a
 * cluster, so that is 1 to QCOW2_COMPRESSED_MAX_SPAN clusters (three once
 * clusters are 1 KiB or more: 127 sectors into a 64 KiB cluster, 256
 * sectors long) -- never assume two. */
#define QCOW2_COMPRESSED_MAX_SPAN 3
static inline uint64_t qcow2_compressed_span(unsigned cluster_bits, uint64_t host,
                                             uint32_t csize, uint64_t *first)
{
    *first = host >> cluster_bits;
    if (!csize)
        return 0;
    return ((host + csize - 1) >> cluster_bits) - *first + 1;
}

/* Decode an L1 entry: *l2 = the L2 table offset (0 = none).  `where` is
 * the entry's file offset, for messages. */
int qcow2_l1_entry_decode(const struct qcow2_header *h, uint64_t e, uint32_t index,
                          uint64_t where, uint64_t *l2, struct diag *d,
                          const char *path);

/* Decode an L2 entry (and its bitmap word with extended L2 entries) of the
 * guest cluster at `guest`.  `data_file`: the image has an external data
 * file (host offsets must equal guest offsets, no compression). */
int qcow2_l2_entry_decode(const struct qcow2_header *h, bool data_file, uint64_t e,
                          uint64_t bitmap, uint64_t guest, uint64_t where,
                          struct qcow2_l2e *out, struct diag *d, const char *path);

/* Kind of subcluster `sc` (0..31) of a decoded extended entry. */
enum qcow2_kind qcow2_l2e_subcluster(const struct qcow2_l2e *e, unsigned sc);

/* --- L2 table cache (l2cache.c) ------------------------------------- */

struct qcow2_l2cache;

/* A bounded cache of L2 tables of `table_size` bytes read from `f`:
 * about `budget` bytes, at least 4 tables.  Thread-safe. */
int qcow2_l2cache_new(struct qcow2_l2cache **out, struct bfile *f, uint32_t table_size,
                      size_t budget, struct diag *d);
void qcow2_l2cache_free(struct qcow2_l2cache *c);

/* Pin the table at `off` (reading it if needed; the part of a table past
 * the end of the file is an error).  *slot is released with _put(). */
int qcow2_l2cache_get(struct qcow2_l2cache *c, uint64_t off, const uint8_t **table,
                      int *slot);
void qcow2_l2cache_put(struct qcow2_l2cache *c, int slot);

/* Whether the pinned table in `slot` is all zeros (every entry
 * unallocated): lets a walk skip its whole range at once, so that an L1
 * table whose entries all name one empty L2 table costs one step per L1
 * entry, not one per L2 entry. */
bool qcow2_l2cache_zero(struct qcow2_l2cache *c, int slot);

/* Tables read from the file so far (tests: the cache is used and bounded). */
uint64_t qcow2_l2cache_misses(struct qcow2_l2cache *c);
unsigned qcow2_l2cache_slots(struct qcow2_l2cache *c);

/* --- snapshots (snapshot.c) ------------------------------------------ */

struct qcow2_snapshot {
    uint64_t entry_offset;      /* where the table entry is */
    uint64_t l1_table_offset;
    uint32_t l1_size;
    char *id, *name;
    uint32_t date_sec, date_nsec;
    uint64_t vm_clock_nsec;
    uint64_t vm_state_size;
    uint32_t extra_size;
    bool has_disk_size;
    uint64_t disk_size;
    bool has_icount;
    uint64_t icount;
};

/* Decode one snapshot table entry from `buf` (`len` bytes available).
 * *entry_len is its length without padding.  Strings are malloc'd. */
int qcow2_snapshot_decode(const struct qcow2_header *h, const uint8_t *buf, size_t len,
                          uint64_t where, struct qcow2_snapshot *sn, size_t *entry_len,
                          struct diag *d, const char *path);
void qcow2_snapshot_clear(struct qcow2_snapshot *sn);

/* --- persistent bitmaps (bitmap.c) -------------------------------------- */

#define QCOW2_BME_IN_USE   (1u << 0)
#define QCOW2_BME_AUTO     (1u << 1)
#define QCOW2_BME_EXTRA_OK (1u << 2)
#define QCOW2_BME_TABLE_OFFSET_MASK 0x00fffffffffffe00ULL
#define QCOW2_BME_MAX_TABLE_ENTRIES 0x8000000u   /* qemu's limit */
#define QCOW2_BME_MAX_PHYS (512u << 20)          /* qemu: bytes of bitmap data */
#define QCOW2_BME_TYPE_DIRTY 1
#define QCOW2_BME_MIN_GRANULARITY_BITS 9         /* qemu's (the spec allows 0..63) */
#define QCOW2_BME_MAX_GRANULARITY_BITS 31
#define QCOW2_BME_MAX_NAME 1023

struct qcow2_bitmap {
    uint64_t entry_offset;
    uint64_t table_offset;
    uint32_t table_size;        /* entries */
    uint32_t flags;
    uint8_t type;
    uint8_t granularity_bits;
    char *name;
};

/* Decode the bitmap directory (`len` bytes read from h->bitmap_directory_offset)
 * into *out (h->nb_bitmaps entries, malloc'd).  Every field is checked
 * against the spec and qemu's limits (granularity 9..31, type 1, no extra
 * data, tables of at most 512 MiB of bitmap that cover the virtual size,
 * unique names). */
int qcow2_bitmaps_decode(const struct qcow2_header *h, const uint8_t *buf, size_t len,
                         struct qcow2_bitmap **out, struct diag *d, const char *path);
void qcow2_bitmaps_free(struct qcow2_bitmap *b, uint32_t n);

/* --- the driver state --------------------------------------------------------- */

#define QCOW2_L2_CACHE_BYTES (4u << 20)
#define QCOW2_MAX_SNAPSHOT_TABLE (16u << 20)

struct qcow2 {
    struct bd bd;
    struct qcow2_header h;
    uint64_t file_size;
    struct bfile *data;             /* external data file, or NULL */

    /* the L1 table being read: the active one, or a snapshot's */
    uint64_t *l1;                   /* host byte order */
    uint32_t l1_len;                /* entries loaded */
    uint64_t l1_offset;
    int snapshot;                   /* index into snaps, or -1 (active) */

    struct qcow2_l2cache *l2;
    struct codec_inflate_pool inflate;

    struct qcow2_bitmap *bitmaps;   /* the bitmap directory, read at open */
    uint32_t nbitmaps;

    struct qcow2_snapshot *snaps;
    uint32_t nsnaps;
    uint64_t snapshots_size;        /* bytes of the snapshot table */

    int prealloc;                   /* qcow2_metadata_prealloc(): 0 not yet known */

    /* where the metadata is (meta.c): data pointing there is refused */
    struct metamap meta;
    uint64_t *l2s;                  /* L2 table offsets, sorted, unique */
    size_t nl2s;
    uint64_t l2s_budget;            /* bytes of l2s counted in the chain budget */
};

static inline struct qcow2 *to_qcow2(struct bd *bd)
{
    return (struct qcow2 *)bd;
}

/* open.c: before an image is changed in place (resize, convert -n):
 * refuse one with the dirty bit or the corrupt bit set -- its refcounts
 * cannot be trusted until check -r has run. */
int qcow2_refuse_unclean(struct qcow2 *q);

/* snapshot.c */
int qcow2_read_snapshots(struct qcow2 *q);
/* The snapshot whose ID, else whose name, is `s` (qemu's order), or -1. */
int qcow2_find_snapshot(const struct qcow2 *q, const char *s);
/* snapshot_write.c: bd_driver.snapshot (create, apply, delete) */
int qcow2_snapshot_op(struct bd *bd, enum bd_snapshot_op op, const char *name);
/* Select the snapshot named by `spec` (NAME, snapshot.name=, snapshot.id=). */
int qcow2_select_snapshot(struct qcow2 *q, const char *spec);

/* meta.c: the metadata map, built at open (after the snapshots and
 * bitmaps are read); _add_l2s adds the L2 tables of the L1 table loaded
 * now (a snapshot's); _find: a metadata range overlapping [off, off+len)
 * of the image file (never for a data file's offsets); _refuse: the same
 * as an error naming both ranges. */
int qcow2_meta_build(struct qcow2 *q);
int qcow2_meta_add_l2s(struct qcow2 *q);
void qcow2_meta_free(struct qcow2 *q);
bool qcow2_meta_find(const struct qcow2 *q, uint64_t off, uint64_t len,
                     struct metarange *hit);
int qcow2_meta_refuse(struct qcow2 *q, uint64_t host, uint64_t len, uint64_t guest,
                      bool compressed);

/* prealloc.c: does the image look metadata-preallocated, by qemu's
 * rule (decides file holes under data clusters are reported as zeros) */
int qcow2_metadata_prealloc(struct qcow2 *q);   /* 1, 0, or -errno */

/* read.c */
int qcow2_load_l1(struct qcow2 *q, uint64_t offset, uint32_t entries, uint32_t loaded);
int qcow2_block_status(struct bd *bd, uint64_t off, uint64_t len, struct bd_extent *e);
int qcow2_pread(struct bd *bd, void *buf, size_t len, uint64_t off);

/* bitmap.c: read and decode the directory into q->bitmaps (none:
 * NULL, 0), at open; each table must lie inside the file */
int qcow2_read_bitmaps(struct qcow2 *q);

/* info.c */
int qcow2_info(struct bd *bd, struct jval *obj);

/* backing_write.c: bd_driver.set_backing */
int qcow2_set_backing(struct bd *bd, const char *name, const char *fmt);

/* make_empty.c: bd_driver.make_empty (the image opened for writing) */
int qcow2_make_empty(struct bd *bd, bool check_only);

/* check.c */
int qcow2_check(struct bd *bd, struct bd_check_result *r, unsigned fix);
/* Before an image is changed in place by what trusts its refcounts and
 * copied flags (resize, convert -n): check it (silently) and refuse one
 * with corruptions or check errors; `doing` names the change in the
 * message ("shrinking it").  Leaks are fine. */
int qcow2_check_sound(struct qcow2 *q, const char *doing);

/* resize.c: bd_driver.resize (the image opened for writing) */
int qcow2_resize(struct bd *bd, uint64_t new_size, bool shrink);

#endif
