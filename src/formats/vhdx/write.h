/* VHDX writer: the -o options and layout (write_params.c), the two writers
 * (write.c), measure (measure.c) and resize of an existing image
 * (resize.c).
 *
 * A new image, laid out as qemu-img lays out its own (one MiB apart):
 *   0        file type identifier "vhdxfile", creator "diskimg VERSION"
 *   64 KiB   header 1 (sequence 1), 128 KiB header 2 (sequence 2): both
 *            valid, the log GUID zero (nothing to replay)
 *   192 KiB  region table, 256 KiB its copy: the BAT and metadata regions
 *   1 MiB    the log (log_size bytes, left empty: a hole)
 *   ...      the BAT region (its entries rounded up to whole MiB)
 *   ...      the metadata region (1 MiB: the table and five items)
 *   ...      the payload blocks
 * dynamic: a block is allocated (appended) when data is first written into
 * it; a block never written is PAYLOAD_BLOCK_ZERO (block_state_zero=on,
 * the default) or NOT_PRESENT (off); zero runs inside a block stay holes.
 * fixed: every block has its place in the file (LeaveBlocksAllocated), the
 * file has its whole length from the start, zero runs stay holes; with
 * block_state_zero=on a block that received no data is marked ZERO (as
 * qemu-img marks it), with off every block is FULLY_PRESENT.
 * finish() writes the BAT, the metadata region and the region tables,
 * syncs, and only then the identifier and the headers (synced): until the
 * last step nothing reads the file as a VHDX, and the log is never used.
 */
#ifndef DISKIMG_VHDX_WRITE_H
#define DISKIMG_VHDX_WRITE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "formats/bd.h"

struct kvopts;

struct vhdxw_params {
    uint64_t asked;             /* size given */
    uint64_t size;              /* virtual size: rounded up to a sector */
    uint32_t block_size;        /* 1 MiB .. 256 MiB, a power of two */
    uint32_t log_size;          /* a whole number of MiB, >= 1 MiB */
    bool fixed;
    bool zero_state;            /* block_state_zero */
};

/* Where everything goes in a new image of these parameters. */
struct vhdxw_layout {
    uint64_t blocks;            /* payload blocks */
    uint64_t chunk_ratio;
    uint64_t bat_entries;       /* entries the BAT holds (incl. bitmap ones) */
    uint64_t log_off, bat_off, bat_len, meta_off, meta_len;
    uint64_t data_off;          /* the first block */
};

/* Take the vhdx keys of `kv` (may be NULL) with qemu-img's defaults and
 * rules: block_size 0 = by size (8 MiB up to 1 GiB, 16 MiB up to 100 GiB,
 * 32 MiB up to 32 TiB, 64 MiB above), else rounded up to a MiB, at most
 * 256 MiB, a power of two; log_size rounded up to a MiB, not 0, below
 * 4 GiB; the size 1 byte to 64 TiB.  0, or -EINVAL/-EFBIG with qemu-img's
 * message in err. */
int vhdxw_parse_params(struct kvopts *kv, uint64_t size, struct vhdxw_params *p,
                       char *err, size_t errlen);

/* The layout of a new image (pure). */
void vhdxw_layout(const struct vhdxw_params *p, struct vhdxw_layout *l);

/* The default block size for a disk of `size` bytes (qemu-img's rule). */
uint32_t vhdxw_default_block(uint64_t size);

/* create(), the -o help and the "Formatting ..." options, for the vhdx
 * format's table (bd_vhdx). */
int vhdxw_create(struct bd **out, struct bfile *f, const struct bd_create_opts *o,
                 struct diag *d);
void vhdxw_describe_create(const struct bd_create_opts *o, char *buf, size_t len);
extern const char vhdxw_options_help[];

/* measure.c: qemu-img measure for -O vhdx (qemu-img 7.2 has none): the
 * file our writer makes; fixed: every block, dynamic: the blocks the
 * content touches (every block when fully allocated). */
int vhdx_measure(struct kvopts *o, uint64_t size, struct bd *src, struct bd_measure *m,
                 struct diag *d);

/* resize.c: grow (or with `shrink`, shrink) an image opened writable, in
 * place, every step synced and every intermediate state a valid image
 * (qemu-img 7.2 cannot resize a VHDX). */
int vhdx_resize(struct bd *bd, uint64_t new_size, bool shrink);

/* A random (version 4) GUID in [MS-VHDX]'s byte order. */
void vhdxw_new_guid(uint8_t g[16]);

extern const struct bd_driver bd_vhdxw_dynamic;
extern const struct bd_driver bd_vhdxw_fixed;

#endif
