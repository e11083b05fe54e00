/* qcow2 writer: creates a new qcow2 image in an already-open (temporary)
 * file and fills it from the convert pipeline.
 *
 * Layout of a new image (preallocation=off):
 *   cluster 0          header, extensions, backing name (written LAST)
 *   clusters 1..       data clusters, appended in the order they are written
 *                      (with extended L2 entries a cluster is given its host
 *                      cluster when its first subcluster is written, and
 *                      the subclusters never written stay holes of the
 *                      file); an L2 table is given the next cluster when its
 *                      range is first written; compressed clusters are packed
 *                      byte after byte as qemu does (they may share and
 *                      straddle host clusters); a refcount block is written out as soon as
 *                      its range is complete and holds a count other than 1
 *   at finish          refcount table, remaining refcount blocks, L1 table
 * With preallocation the layout is fixed at create time, as qemu lays it
 * out: header, refcount table, refcount blocks, L1, every L2 table, then
 * guest cluster i at data_start + i * cluster_size; only the data is
 * written there (any sector alone), the rest stays a hole of the file (or
 * fallocated space), and with extended L2 entries only the subclusters
 * written are marked allocated, as qemu does.
 *
 * Memory stays bounded: the L1 table (at most 32 MiB, qemu's limit), a
 * small cache of L2 tables (written back when evicted and re-read if the
 * writes come back to them), one refcount block and a bit per L2 table.
 * Every allocated cluster has refcount 1 except host clusters shared by
 * compressed clusters, so refcounts are generated as a stream at finish.
 */
#ifndef DISKIMG_QCOW2_WRITE_H
#define DISKIMG_QCOW2_WRITE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "codec/codec.h"
#include "formats/bd.h"

struct kvopts;

enum qcow2w_prealloc {
    QCOW2W_PREALLOC_OFF,
    QCOW2W_PREALLOC_METADATA,
    QCOW2W_PREALLOC_FALLOC,
    QCOW2W_PREALLOC_FULL,
};

/* Everything the -o options decide, validated. */
struct qcow2w_params {
    uint64_t size;              /* virtual size in bytes */
    int version;                /* 2 (compat=0.10) or 3 (compat=1.1) */
    unsigned cluster_bits;      /* 9..21 */
    unsigned refcount_order;    /* 0..6 (refcount_bits = 1 << order) */
    bool lazy_refcounts;
    bool extended_l2;
    int compression_type;       /* QCOW2_COMPRESSION_ZLIB / _ZSTD */
    enum qcow2w_prealloc prealloc;
    const char *backing_file;   /* NULL or the name stored in the header */
    const char *backing_fmt;    /* NULL or the backing format extension */
    /* which options were given explicitly (for qemu-img create's message) */
    bool has_compat, has_prealloc;
};

/* Take the qcow2 keys out of `kv` (may be NULL) and the create options into
 * `p`.  Backing file and format come from co (-B/-F) or from the
 * backing_file/backing_fmt keys.  Returns 0 or -EINVAL with qemu-img's
 * message in err. */
int qcow2w_parse_params(struct kvopts *kv, const struct bd_create_opts *co,
                        struct qcow2w_params *p, char *err, size_t errlen);

/* qemu-img create's "Formatting ..." options for qcow2 (bd_driver
 * describe_create): " cluster_size=... size=N ... refcount_bits=16", or
 * " size=N" when the options do not parse (create then says why). */
void qcow2w_describe_create(const struct bd_create_opts *co, char *buf, size_t len);

/* `-o help` text for qcow2 output (qemu-img's wording). */
extern const char qcow2w_options_help[];

/* Entries of an L1 table that covers `size` bytes; 0 when too large for
 * qemu's 32 MiB L1 limit (err set). */
uint64_t qcow2w_l1_entries(const struct qcow2w_params *p, char *err, size_t errlen);

/* Where the tables are, for the header. */
struct qcow2w_layout {
    uint64_t l1_offset;
    uint32_t l1_entries;
    uint64_t reftable_offset;
    uint32_t reftable_clusters;
};

/* The feature name table qemu-img writes into v3 images (the extension's
 * data, without its type and length): into t, returns its length. */
#define QCOW2W_FEATURE_TABLE_MAX 512
size_t qcow2w_feature_table(uint8_t *t);

/* Encode cluster 0 (header, extensions, backing file name) into buf, which
 * holds one cluster and is zeroed first.  Fails with -EINVAL (reason in
 * err) when it does not fit. */
int qcow2w_header_encode(const struct qcow2w_params *p,
                         const struct qcow2w_layout *l, uint8_t *buf,
                         size_t cluster_size, char *err, size_t errlen);

/* L2 entry of a compressed cluster stored at host byte `off`, `clen` bytes
 * long (the number of extra 512-byte sectors it spans is derived).  Returns
 * 0 when off or clen do not fit the descriptor. */
uint64_t qcow2w_compressed_entry(unsigned cluster_bits, uint64_t off, size_t clen);

/* compressing a cluster: codec_compress_cluster, codec_compress_granule
 * (codec/codec.h) */

/* qcow2 output to a stream (write_stream.c): two passes (bd_driver.next_pass),
 * the layout planned in the first, every byte written in order in the second.
 * qcow2w_create hands stream outputs to it. */
int qcow2s_create(struct bd **out, struct bfile *f, const struct bd_create_opts *o,
                  struct diag *d);

/* `convert -n` into the existing qcow2 image in `f` (write_inplace.c):
 * the image keeps its options; qcow2w_create hands -n outputs to it. */
int qcow2ip_open(struct bd **out, struct bfile *f, const struct bd_create_opts *o,
                 struct diag *d);

/* The writing driver (name "qcow2", probe NULL). */
extern const struct bd_driver bd_qcow2_out;
/* The writers of a qcow2 stream (two passes) and of convert -n into an
 * existing image; create() picks the one it needs. */
extern const struct bd_driver bd_qcow2_stream;
extern const struct bd_driver bd_qcow2_inplace;

/* For the reading driver's table (bd_qcow2): `.create = qcow2w_create,
 * .compress = qcow2w_compress` -- convert checks the format's driver for
 * compress before create(); the bd that create() returns is bd_qcow2_out,
 * which has every writing op. */
int qcow2w_create(struct bd **out, struct bfile *f, const struct bd_create_opts *o,
                  struct diag *d);
ssize_t qcow2w_compress(struct bd *bd, const void *in, size_t len, void *out, size_t cap);

#endif
