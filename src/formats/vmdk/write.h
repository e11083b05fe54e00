/* VMDK writer: creates a new VMDK image (qemu-img's `-o` options and
 * defaults) in an already-open (temporary) file and fills it from the
 * convert pipeline.
 *
 * monolithicSparse (default): one hosted sparse extent (KDMV) with the
 * descriptor embedded, laid out as qemu-img and VMware Workstation do:
 *   sector 0        header                     (written LAST)
 *   sectors 1..20   descriptor                 (written last, with the header)
 *   21..            redundant grain directory, then every redundant grain table
 *   ..              grain directory, then every grain table
 *   overhead..      grains (64 KiB), appended in the order they are written
 * Grain tables are preallocated (holes until written): the directories are
 * fixed by the capacity alone and are generated, not stored.  A small cache
 * of grain tables is written back (to both copies) when evicted and at
 * finish; a table written back once is re-read if the writes come back to it.
 *
 * streamOptimized: VMware's stream layout (VMware "Virtual Disk Format 5.0",
 * what ESXi exports and OVF tools import), written strictly in order so that
 * it can go to a pipe:
 *   header (version 3, compressed + markers, gdOffset = GD_AT_END), descriptor,
 *   up to sector 128: nothing
 *   per grain:        u64 LBA, u32 size, zlib stream, zeros to the sector end
 *   per grain table:  GT marker + the table, after the last grain it covers
 *                     (tables with no grain are not written: GD entry 0)
 *   at the end:       GD marker + grain directory, footer marker + footer (the
 *                     header with the real gdOffset), end-of-stream marker
 * On a seekable file the header is written last (the file has no valid magic
 * until then); on a pipe it has to go first.  Grains are compressed on the
 * pipeline's worker threads (compress()); one that deflate cannot shrink is
 * stored as a zlib stream of stored blocks, cheaply, on the writer thread.
 *
 * Delta disks (-B / backing_file, a VMDK parent; not the flat subformats):
 * parentFileNameHint as given and the parent's CID as parentCID; ranges
 * that must read as zeros over the parent become zeroed grains (GTE 1) with
 * zeroed_grain=on, grains allocated but never written (holes) without it,
 * and deflated zero grains in a stream.
 *
 * monolithicFlat, twoGbMaxExtentFlat, twoGbMaxExtentSparse: the output file
 * is the descriptor (written last); the extents are files beside it, named
 * as qemu-img names them and created through bd_create_opts.add_file (under
 * temporary names the caller renames at commit).  Split extents are 2 GiB;
 * sparse ones are hosted sparse extents without a descriptor, as VMware
 * Workstation writes them (write_multi.c).
 */
#ifndef DISKIMG_VMDK_WRITE_H
#define DISKIMG_VMDK_WRITE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "codec/codec.h"
#include "formats/bd.h"
#include "formats/vmdk/format.h"

struct kvopts;

enum vmdkw_subformat {
    VMDKW_MONOLITHIC_SPARSE,
    VMDKW_MONOLITHIC_FLAT,
    VMDKW_TWOGB_SPARSE,
    VMDKW_TWOGB_FLAT,
    VMDKW_STREAM_OPTIMIZED,
};

#define VMDKW_GRAIN_SECTORS  128u                  /* 64 KiB grains, as qemu */
#define VMDKW_GRAIN_BYTES    (VMDKW_GRAIN_SECTORS * VMDK_SECTOR)
#define VMDKW_GTES           512u                  /* entries per grain table */
#define VMDKW_GT_SECTORS     (VMDKW_GTES * 4 / VMDK_SECTOR)
#define VMDKW_DESC_SECTORS   20u                   /* embedded descriptor area */
/* what our reader accepts: 4M grain tables of 32 MiB = 128 TiB */
#define VMDKW_MAX_CAPACITY   ((uint64_t)VMDK_MAX_GD_ENTRIES * VMDKW_GTES * VMDKW_GRAIN_SECTORS)
/* grain table entries are 32-bit sector numbers: extent files end below 2 TiB */
#define VMDKW_MAX_FILE_SECTORS (UINT64_C(1) << 32)
#define VMDKW_TEXT_MAX       64                    /* hwversion, toolsversion */

/* Everything the -o options decide, validated. */
struct vmdkw_params {
    uint64_t size;              /* virtual size in bytes */
    uint64_t capacity;          /* sectors: the size rounded up */
    enum vmdkw_subformat sub;
    char adapter[16];           /* ide, buslogic, lsilogic, legacyESX */
    char hwversion[VMDKW_TEXT_MAX + 1];    /* ddb.virtualHWVersion */
    char toolsversion[VMDKW_TEXT_MAX + 1]; /* ddb.toolsVersion */
    bool compat6;
    bool zeroed_grain;
    bool has_hwversion;         /* hwversion given (not "undefined") */
    const char *backing;        /* parent disk as named (parentFileNameHint), or
                                   NULL; points into the caller's options */
    uint32_t parent_cid;        /* its CID, or ffffffff without a parent */
};

/* Take the vmdk keys out of `kv` (may be NULL) into `p` (co gives the size
 * and -c).  Returns 0, or -EINVAL / -ENOTSUP / -EFBIG with a message in err. */
int vmdkw_parse_params(struct kvopts *kv, const struct bd_create_opts *co,
                       struct vmdkw_params *p, char *err, size_t errlen);

/* `-o help` text for vmdk output (qemu-img's wording). */
extern const char vmdkw_options_help[];

/* qemu-img create's "Formatting ..." options for vmdk (bd_driver
 * describe_create): " size=N adapter_type=... compat6=off hwversion=undefined
 * ..."; co's -b and -F stand for backing_file and backing_fmt. */
void vmdkw_describe_create(const struct bd_create_opts *co, char *buf, size_t len);

const char *vmdkw_subformat_name(enum vmdkw_subformat s);

/* --- pure encoders (unit-tested) ------------------------------------------- */

/* Where the metadata of a hosted sparse extent of `capacity` sectors goes
 * (all in sectors), as qemu lays it out. */
struct vmdkw_sparse_layout {
    uint64_t gt_count;          /* grain tables (= grain directory entries) */
    uint64_t gd_sectors;        /* one directory */
    uint64_t desc_offset, desc_sectors;   /* 0, 0 without an embedded descriptor */
    uint64_t rgd_offset, rgt_offset;      /* redundant directory and its tables */
    uint64_t gd_offset, gt_offset;        /* directory and its tables */
    uint64_t overhead;          /* first grain (a multiple of the grain size) */
};

/* Fails with -EFBIG (reason in err) when the tables do not fit 32-bit
 * sector numbers or exceed VMDKW_MAX_CAPACITY. */
int vmdkw_sparse_layout(uint64_t capacity, bool embedded_desc,
                        struct vmdkw_sparse_layout *l, char *err, size_t errlen);

/* The 512-byte header (or footer) of a sparse extent from the reader's
 * struct (fields as they are; derived fields ignored). */
void vmdkw_header_encode(const struct vmdk4_header *h, uint8_t buf[VMDK4_HEADER_SIZE]);

/* A 512-byte metadata marker (GT, GD, footer, EOS). */
void vmdkw_marker_encode(uint8_t buf[VMDK_SECTOR], uint64_t sectors, uint32_t type);

/* The CID of `backing` (a VMDK), opened relative to the folder of `target`
 * as qemu-img does; -EINVAL with a message when it is not a VMDK. */
int vmdkw_parent_cid(const char *target, const char *backing, uint32_t *cid,
                     struct diag *d);

/* Keep a copy of p->backing in bd (backing_name, backing_fmt) and point
 * p->backing at it: the options may not outlive the writer.  -ENOMEM. */
int vmdkw_keep_backing(struct bd *bd, struct vmdkw_params *p);

/* The descriptor text for `p`: CID, parent, createType, the extent lines
 * (already formatted, each ending in '\n') and the disk database.  Returns
 * the length (without the NUL), or -ENOSPC when it does not fit `cap`. */
ssize_t vmdkw_descriptor(const struct vmdkw_params *p, uint32_t cid,
                         const char *extent_lines, char *buf, size_t cap);

/* The name the descriptor gives the extent that is the file `f` itself:
 * its name without folder (standard output redirected to a file: that
 * file's; a pipe: "disk.vmdk").  -EINVAL when the name has a double quote
 * or a control character (it cannot go into the descriptor). */
int vmdkw_extent_name(const struct bfile *f, char **out);

/* A random content id (never ffffffff or fffffffe, which mean "none"). */
uint32_t vmdkw_new_cid(void);

/* compressing a grain: vmdkw_deflate, vmdkw_zlib_stored (codec/codec.h) */

/* --- drivers ------------------------------------------------------------------ */

/* For the reading driver's table (bd_vmdk): `.create = vmdkw_create,
 * .compress = vmdkw_compress, .create_options_help = vmdkw_options_help`.
 * The bd create() returns has a subformat's writing driver. */
int vmdkw_create(struct bd **out, struct bfile *f, const struct bd_create_opts *o,
                 struct diag *d);
ssize_t vmdkw_compress(struct bd *bd, const void *in, size_t len, void *out, size_t cap);

/* write_sparse.c / write_stream.c: the subformats' create(), with
 * parameters already checked; `cid` for the descriptor. */
int vmdkw_sparse_create(struct bd **out, struct bfile *f, const struct bd_create_opts *o,
                        const struct vmdkw_params *p, struct diag *d);
int vmdkw_stream_create(struct bd **out, struct bfile *f, const struct bd_create_opts *o,
                        const struct vmdkw_params *p, struct diag *d);

#endif
