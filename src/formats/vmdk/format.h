/* VMDK on-disk structures and the pure decoders shared by the VMDK reader.
 *
 * Sources (facts only): libyal/libvmdk "VMWare Virtual Disk Format (VMDK)"
 * and VMware's "Virtual Disk Format 1.1".  All binary fields are
 * little-endian; sizes and offsets inside files are in 512-byte sectors.
 *
 * Nothing in the decoders touches I/O: each takes a buffer, validates every
 * field it returns, and records the reason for a refusal in `d`.
 */
#ifndef DISKIMG_VMDK_FORMAT_H
#define DISKIMG_VMDK_FORMAT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct diag;

#define VMDK_SECTOR 512u

/* --- hosted sparse extent header ("KDMV") ---------------------------------- */

#define VMDK4_MAGIC        0x564d444bu   /* "KDMV" read little-endian */
#define VMDK4_HEADER_SIZE  512u

#define VMDK4_FLAG_NL_DETECT   0x00000001u  /* newline check bytes are valid */
#define VMDK4_FLAG_RGD         0x00000002u  /* redundant grain directory */
#define VMDK4_FLAG_ZERO_GRAIN  0x00000004u  /* GTE 1 means "reads as zeros" */
#define VMDK4_FLAG_COMPRESSED  0x00010000u
#define VMDK4_FLAG_MARKERS     0x00020000u  /* grains carry their LBA; markers */
#define VMDK4_INCOMPAT_MASK    0xffff0000u  /* unknown bits here: refuse */

#define VMDK4_COMPRESS_NONE    0
#define VMDK4_COMPRESS_DEFLATE 1

#define VMDK4_GD_AT_END        UINT64_MAX   /* gdOffset: read it from the footer */

/* Limits (hostile input): a grain of at most 1 MiB, at most 4096 entries
 * per grain table (16 KiB), a grain directory of at most 4M entries
 * (16 MiB), a disk of at most 2^50 bytes (1 PiB), descriptors of at most
 * 1 MiB. */
#define VMDK_MAX_GRAIN_SECTORS 2048u
#define VMDK_MAX_GTES          4096u
#define VMDK_MAX_GD_ENTRIES    (4u << 20)
#define VMDK_MAX_SECTORS       (1ull << 41)
#define VMDK_MAX_DESC_BYTES    (1u << 20)
#define VMDK_MAX_EXTENTS       8192u
#define VMDK_MAX_SCAN_GRAINS   (4u << 20)  /* grains indexed by scanning (64 MiB) */

struct vmdk4_header {
    uint32_t version;          /* 1..3 */
    uint32_t flags;
    uint64_t capacity;         /* sectors */
    uint32_t grain_sectors;    /* power of two, 1..VMDK_MAX_GRAIN_SECTORS */
    uint64_t desc_offset;      /* sectors, 0 = no embedded descriptor */
    uint64_t desc_sectors;
    uint32_t gtes;             /* entries per grain table */
    uint64_t rgd_offset;       /* sectors */
    uint64_t gd_offset;        /* sectors, or VMDK4_GD_AT_END */
    uint64_t overhead;         /* sectors before the first grain */
    bool dirty;
    uint16_t compress;         /* VMDK4_COMPRESS_* */
    /* derived */
    bool compressed, markers, zero_grain;
    uint32_t gd_entries;       /* grain tables needed to cover the capacity */
};

/* Decode and validate a 512-byte header at byte `off` of `file`. */
int vmdk4_header_decode(const uint8_t *buf, size_t len, struct vmdk4_header *h,
                        struct diag *d, const char *file, int64_t off);

/* --- ESX 3 copy-on-write sparse extent ("COWD", vmfsSparse) ----------------- */

#define COWD_MAGIC        0x44574f43u   /* "COWD" read little-endian */
#define COWD_HEADER_SIZE  2048u
#define COWD_GTES         4096u

struct cowd_header {
    uint32_t version;
    uint32_t flags;
    uint32_t capacity;         /* sectors */
    uint32_t grain_sectors;
    uint32_t gd_offset;        /* sectors */
    uint32_t gd_entries;
    uint32_t next_free;        /* sectors */
    bool dirty;
};

int cowd_header_decode(const uint8_t *buf, size_t len, struct cowd_header *h,
                       struct diag *d, const char *file, int64_t off);

/* --- streamOptimized markers ------------------------------------------------- */

#define VMDK_MARKER_EOS      0
#define VMDK_MARKER_GT       1
#define VMDK_MARKER_GD       2
#define VMDK_MARKER_FOOTER   3
#define VMDK_MARKER_PROGRESS 4   /* vSphere: value is the LBA reached so far */
#define VMDK_GRAIN_HDR       12u /* a grain marker: u64 LBA, u32 size, data */

struct vmdk_marker {
    bool is_grain;          /* size > 0: a compressed grain follows */
    uint64_t value;         /* grain: LBA (sectors); metadata: sectors that follow */
    uint32_t size;          /* grain: compressed bytes after the 12-byte header */
    uint32_t type;          /* metadata: VMDK_MARKER_* */
};

/* Decode the 512-byte sector at `off` as a marker (16 bytes are enough for
 * metadata markers, 12 for a grain).  Unknown metadata types are refused.
 * A grain's size is bounded by `max_csize`. */
int vmdk_marker_decode(const uint8_t *buf, size_t len, uint32_t max_csize,
                       struct vmdk_marker *m, struct diag *d, const char *file,
                       int64_t off);

/* Largest acceptable compressed size of a grain of `grain_bytes` (deflate
 * expands incompressible data a little). */
static inline uint32_t vmdk_max_csize(uint32_t grain_bytes)
{
    return grain_bytes + grain_bytes / 8 + 1024;
}

/* Bytes of a buffer for one grain as stored: its 12-byte marker header and
 * the largest acceptable compressed data.  Every read of a stored grain
 * goes into such a buffer and must stay within it (small grains: it is
 * less than a page). */
static inline size_t vmdk_cbuf_bytes(uint32_t grain_bytes)
{
    return VMDK_GRAIN_HDR + (size_t)vmdk_max_csize(grain_bytes);
}

/* A grain read from a file starts with this many bytes (its header and,
 * usually, all its data), or the whole buffer if that is smaller. */
#define VMDK_GRAIN_FIRST_READ 4096u

/* --- the descriptor (text) --------------------------------------------------- */

enum vmdk_access { VMDK_ACCESS_RW, VMDK_ACCESS_RDONLY, VMDK_ACCESS_NOACCESS };

enum vmdk_ext_type {
    VMDK_EXT_FLAT,        /* raw bytes at an offset of a file */
    VMDK_EXT_SPARSE,      /* hosted sparse (KDMV) file */
    VMDK_EXT_ZERO,        /* no file: reads as zeros */
    VMDK_EXT_VMFS,        /* ESX flat file */
    VMDK_EXT_VMFSSPARSE,  /* ESX 3 COWD file */
    VMDK_EXT_SESPARSE,    /* ESXi 5.5+ space-efficient sparse (refused) */
    VMDK_EXT_VMFSRDM,     /* raw device maps (refused) */
    VMDK_EXT_VMFSRAW,
};

struct vmdk_desc_extent {
    enum vmdk_access access;
    enum vmdk_ext_type type;
    uint64_t sectors;
    uint64_t offset;          /* FLAT/VMFS: start sector in the file */
    char *filename;           /* NULL for ZERO */
    unsigned line;            /* 1-based line in the descriptor */
};

struct vmdk_desc {
    unsigned version;
    bool has_cid, has_parent_cid;
    uint32_t cid, parent_cid;
    char *create_type;        /* NULL if absent */
    char *parent_hint;        /* parentFileNameHint, NULL if absent */
    char *adapter_type;       /* ddb.adapterType */
    char *hw_version;         /* ddb.virtualHWVersion */
    struct vmdk_desc_extent *ext;
    size_t n_ext;
    uint64_t total_sectors;   /* sum of the extents */
};

/* Parse descriptor text (stops at the first NUL: embedded descriptors are
 * padded).  LF or CRLF lines, comments, blank lines; keywords and extent
 * access/type words in any case.  `off` is where the text starts in `file`
 * (for messages).  On failure *out is left empty. */
int vmdk_desc_parse(const char *text, size_t len, struct vmdk_desc *out,
                    struct diag *d, const char *file, int64_t off);
void vmdk_desc_free(struct vmdk_desc *desc);

/* True if `head` looks like a descriptor file (text with a descriptor
 * signature, a createType line or an extent line). */
bool vmdk_desc_probe(const uint8_t *head, size_t len);

const char *vmdk_ext_type_name(enum vmdk_ext_type t);

#endif
