/* VHDX (Microsoft [MS-VHDX], Hyper-V's Virtual Hard Disk v2): the on-disk
 * structures, their pure decoders (buffer in, struct out, -EINVAL and a
 * reason when a field is out of its range) and encoders (struct back to
 * bytes, checksum included) for reader and writer.  Every field is
 * little-endian; GUIDs are stored as Microsoft lays them out (the first
 * three groups little-endian) and kept here as those 16 bytes.
 *
 *   0        file type identifier  "vhdxfile" + creator (UTF-16LE)
 *   64 KiB   header 1      "head", 4 KiB, CRC-32C with the field zeroed
 *   128 KiB  header 2      the valid one with the higher sequence number
 *                          is current
 *   192 KiB  region table 1  "regi", 64 KiB, CRC-32C
 *   256 KiB  region table 2  a copy
 *   1 MiB..  the log, the BAT region, the metadata region and the blocks,
 *            each on a 1 MiB boundary
 *
 * The metadata region starts with a 64 KiB table ("metadata") of items
 * (file parameters, virtual disk size, logical and physical sector size,
 * page 83 data, parent locator), each at an offset in the region.
 *
 * The BAT holds one 64-bit entry per payload block, and after every
 * `chunk ratio` payload entries one entry for a sector bitmap block
 * (1 MiB: one bit per logical sector of the chunk, bit 0 of byte 0 first;
 * set = the sector is in this file, clear = in the parent).  Entry: state
 * in bits 0-2, bits 3-19 reserved (zero), bits 20-63 the file offset in
 * MiB.
 *
 * The log is a ring of 4 KiB sectors holding entries ("loge" header and
 * descriptors, then "data" sectors); replaying its active sequence writes
 * 4 KiB sectors of the file past the headers (region tables, metadata,
 * BAT, and in principle blocks).
 */
#ifndef DISKIMG_VHDX_FORMAT_H
#define DISKIMG_VHDX_FORMAT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define VHDX_KIB                 UINT64_C(1024)
#define VHDX_MIB                 (UINT64_C(1) << 20)

/* --- layout of the first MiB --------------------------------------------- */

#define VHDX_FILE_SIG            "vhdxfile"
#define VHDX_FILE_ID_SIZE        (64 * 1024u)
#define VHDX_CREATOR_OFF         8u      /* 256 UTF-16LE code units */
#define VHDX_CREATOR_LEN         512u
#define VHDX_HEADER1_OFF         (64 * 1024u)
#define VHDX_HEADER2_OFF         (128 * 1024u)
#define VHDX_REGION1_OFF         (192 * 1024u)
#define VHDX_REGION2_OFF         (256 * 1024u)
#define VHDX_HEADER_SIZE         4096u   /* checksummed part of a header */
#define VHDX_HEADER_BLOCK        (64 * 1024u) /* space each header takes */
#define VHDX_REGION_SIZE         (64 * 1024u)
#define VHDX_HEADER_AREA         (1024 * 1024u) /* nothing else below 1 MiB */
#define VHDX_ALIGN               VHDX_MIB /* regions, log, blocks */

/* --- header ---------------------------------------------------------------- */

#define VHDX_HEADER_SIG          0x64616568u /* "head" */
#define VHDX_VERSION             1u
#define VHDX_LOG_VERSION         0u

struct vhdx_header {
    uint32_t checksum;          /* as stored */
    uint64_t seq;               /* SequenceNumber */
    uint8_t file_write_guid[16];
    uint8_t data_write_guid[16];
    uint8_t log_guid[16];       /* all zero: no log to replay */
    uint16_t log_version;
    uint16_t version;
    uint32_t log_length;        /* bytes, a multiple of 1 MiB */
    uint64_t log_offset;        /* bytes, a multiple of 1 MiB, >= 1 MiB */
};

/* Decode and check a header (b holds VHDX_HEADER_SIZE bytes): signature,
 * CRC-32C, version 1, log version 0, log offset and length on 1 MiB
 * boundaries (offset >= 1 MiB; length may be 0).  -EINVAL and a reason. */
int vhdx_header_decode(const uint8_t *b, struct vhdx_header *h, char *err, size_t errlen);
/* The header's bytes (VHDX_HEADER_SIZE), checksum computed (h->checksum
 * is ignored). */
void vhdx_header_encode(const struct vhdx_header *h, uint8_t *b);

/* The file type identifier (VHDX_FILE_ID_SIZE is its space; `b` holds at
 * least 8 + VHDX_CREATOR_LEN bytes): "vhdxfile" and the creator. */
bool vhdx_file_id_ok(const uint8_t *b, size_t len);
/* Write the identifier with `creator` (ASCII, UTF-16LE on disk) into b
 * (8 + VHDX_CREATOR_LEN bytes). */
void vhdx_file_id_encode(const char *creator, uint8_t *b);

/* --- region table ----------------------------------------------------------- */

#define VHDX_REGION_SIG          0x69676572u /* "regi" */
#define VHDX_REGION_HDR_SIZE     16u
#define VHDX_REGION_ENTRY_SIZE   32u
#define VHDX_MAX_REGIONS         2047u

extern const uint8_t vhdx_guid_bat[16];      /* 2dc27766-f623-4200-9d64-115e9bfd4a08 */
extern const uint8_t vhdx_guid_metadata[16]; /* 8b7ca206-4790-4b9a-b8fe-575f050f886e */

struct vhdx_region_entry {
    uint8_t guid[16];
    uint64_t off;               /* FileOffset, bytes */
    uint32_t len;               /* Length, bytes */
    bool required;
};

/* What a reader takes from a region table: the BAT and metadata regions
 * (both must be there), and how many entries there were. */
struct vhdx_regions {
    uint32_t count;
    struct vhdx_region_entry bat, meta;
};

/* Decode and check a region table (b holds VHDX_REGION_SIZE bytes):
 * signature, CRC-32C, at most 2047 entries, each on 1 MiB boundaries at or
 * past 1 MiB with a non-zero length, none overlapping another, no GUID
 * twice, the BAT and metadata regions present.  An unknown region marked
 * required is refused (-ENOTSUP: this reader cannot read the image);
 * unknown optional ones are skipped.  -EINVAL and a reason otherwise. */
int vhdx_regions_decode(const uint8_t *b, struct vhdx_regions *r, char *err, size_t errlen);
/* A region table of n (<= VHDX_MAX_REGIONS) entries into b
 * (VHDX_REGION_SIZE bytes), checksum computed. */
void vhdx_regions_encode(const struct vhdx_region_entry *e, uint32_t n, uint8_t *b);

/* --- metadata region ---------------------------------------------------------- */

#define VHDX_META_SIG            "metadata"
#define VHDX_META_TABLE_SIZE     (64 * 1024u)
#define VHDX_META_HDR_SIZE       32u
#define VHDX_META_ENTRY_SIZE     32u
#define VHDX_MAX_META_ENTRIES    2047u
#define VHDX_MAX_META_ITEM       VHDX_MIB  /* an item's length */

#define VHDX_META_IS_USER        0x1u
#define VHDX_META_IS_VIRTUAL     0x2u
#define VHDX_META_IS_REQUIRED    0x4u

extern const uint8_t vhdx_guid_file_params[16];  /* caa16737-fa36-4d43-b3b6-33f0aa44e76b */
extern const uint8_t vhdx_guid_disk_size[16];    /* 2fa54224-cd1b-4876-b211-5dbed83bf4b8 */
extern const uint8_t vhdx_guid_page83[16];       /* beca12ab-b2e6-4523-93ef-c309e000c746 */
extern const uint8_t vhdx_guid_logical_sector[16];  /* 8141bf1d-a96f-4709-ba47-f233a8faab5f */
extern const uint8_t vhdx_guid_physical_sector[16]; /* cda348c7-445d-4471-9cc9-e9885251c556 */
extern const uint8_t vhdx_guid_parent_locator[16];  /* a8d35f2d-b30b-454d-abf7-d3d84834ab0c */
/* The locator type of a VHDX parent (b04aefb7-d19e-4a81-b789-25b8e9445913). */
extern const uint8_t vhdx_guid_parent_type[16];

/* The known items, in this order (an index into vhdx_meta.item). */
enum vhdx_meta_item {
    VHDX_ITEM_FILE_PARAMS,
    VHDX_ITEM_DISK_SIZE,
    VHDX_ITEM_PAGE83,
    VHDX_ITEM_LOGICAL_SECTOR,
    VHDX_ITEM_PHYSICAL_SECTOR,
    VHDX_ITEM_PARENT_LOCATOR,
    VHDX_ITEMS
};

struct vhdx_meta_entry {
    uint8_t guid[16];
    uint32_t off;               /* from the start of the metadata region */
    uint32_t len;
    uint32_t flags;             /* VHDX_META_IS_* */
};

struct vhdx_meta {
    uint16_t count;
    bool have[VHDX_ITEMS];
    struct vhdx_meta_entry item[VHDX_ITEMS];
};

/* Decode and check a metadata table (b holds VHDX_META_TABLE_SIZE bytes)
 * for a region of `region_len` bytes: signature, at most 2047 entries,
 * each item inside the region past the table, at most 1 MiB, none
 * overlapping another, no item twice; the file parameters, disk size,
 * page 83 data and both sector sizes must be there.  An unknown item
 * marked required is refused (-ENOTSUP).  -EINVAL and a reason otherwise. */
int vhdx_meta_decode(const uint8_t *b, uint32_t region_len, struct vhdx_meta *m, char *err,
                     size_t errlen);
/* A metadata table of n entries into b (VHDX_META_TABLE_SIZE bytes). */
void vhdx_meta_encode(const struct vhdx_meta_entry *e, uint16_t n, uint8_t *b);

/* The items' values, from their bytes (each decoder checks the length). */
#define VHDX_MIN_BLOCK           VHDX_MIB
#define VHDX_MAX_BLOCK           (256 * VHDX_MIB)
#define VHDX_PARAM_LEAVE_ALLOCATED 0x1u
#define VHDX_PARAM_HAS_PARENT      0x2u
/* The largest virtual disk: 64 TiB. */
#define VHDX_MAX_SIZE            (UINT64_C(64) << 40)

struct vhdx_params {
    uint32_t block_size;        /* 1 MiB .. 256 MiB, a power of two */
    bool leave_allocated, has_parent;
    uint64_t disk_size;         /* VirtualDiskSize, bytes */
    uint32_t logical_sector;    /* 512 or 4096 */
    uint32_t physical_sector;   /* 512 or 4096 */
    uint8_t page83[16];         /* the virtual disk id */
};

/* Each item into p (its fields only); -EINVAL and a reason. */
int vhdx_file_params_decode(const uint8_t *b, uint32_t len, struct vhdx_params *p,
                            char *err, size_t errlen);
int vhdx_disk_size_decode(const uint8_t *b, uint32_t len, struct vhdx_params *p,
                          char *err, size_t errlen);
int vhdx_sector_size_decode(const uint8_t *b, uint32_t len, bool physical,
                            struct vhdx_params *p, char *err, size_t errlen);
int vhdx_page83_decode(const uint8_t *b, uint32_t len, struct vhdx_params *p, char *err,
                       size_t errlen);
/* After all items: the disk size is a multiple of the logical sector,
 * not 0 and at most VHDX_MAX_SIZE. */
int vhdx_params_check(const struct vhdx_params *p, char *err, size_t errlen);
/* Items back to bytes: 8 (file parameters), 8 (disk size), 4, 4, 16. */
void vhdx_file_params_encode(const struct vhdx_params *p, uint8_t b[8]);
void vhdx_disk_size_encode(const struct vhdx_params *p, uint8_t b[8]);
void vhdx_sector_size_encode(uint32_t size, uint8_t b[4]);

/* Parent locator item: a 20-byte header (locator type GUID, reserved,
 * key-value count), then 12-byte entries (key offset, value offset, key
 * length, value length; offsets from the start of the item), keys and
 * values UTF-16LE. */
#define VHDX_PLOC_HDR_SIZE       20u
#define VHDX_PLOC_ENTRY_SIZE     12u
#define VHDX_PLOC_MAX_PATH       4096u  /* bytes of one value as UTF-8 */

enum vhdx_ploc_key {
    VHDX_PLOC_PARENT_LINKAGE,
    VHDX_PLOC_PARENT_LINKAGE2,
    VHDX_PLOC_RELATIVE_PATH,
    VHDX_PLOC_VOLUME_PATH,
    VHDX_PLOC_ABSOLUTE_WIN32_PATH,
    VHDX_PLOC_KEYS
};

/* The key names, in enum order ("parent_linkage", ...). */
extern const char *const vhdx_ploc_key_names[VHDX_PLOC_KEYS];

/* The known keys' values as UTF-8 (NULL when absent); freed with
 * vhdx_ploc_free. */
struct vhdx_ploc {
    uint16_t count;
    char *value[VHDX_PLOC_KEYS];
};

/* Decode a parent locator item of `len` bytes: the VHDX locator type,
 * every entry's key and value inside the item, even lengths, non-empty,
 * valid UTF-16; a known key twice is refused; unknown keys are skipped;
 * parent_linkage must be there.  -EINVAL and a reason, -ENOMEM. */
int vhdx_ploc_decode(const uint8_t *b, uint32_t len, struct vhdx_ploc *pl, char *err,
                     size_t errlen);
void vhdx_ploc_free(struct vhdx_ploc *pl);
/* A parent locator item with the keys whose value is non-NULL into b
 * (cap bytes); returns the length, or -ENOSPC. */
int vhdx_ploc_encode(const struct vhdx_ploc *pl, uint8_t *b, size_t cap);

/* --- BAT ------------------------------------------------------------------------ */

#define VHDX_BAT_ENTRY_SIZE      8u

/* payload block states */
#define VHDX_PAYLOAD_NOT_PRESENT       0u
#define VHDX_PAYLOAD_UNDEFINED         1u
#define VHDX_PAYLOAD_ZERO              2u
#define VHDX_PAYLOAD_UNMAPPED          3u
#define VHDX_PAYLOAD_FULLY_PRESENT     6u
#define VHDX_PAYLOAD_PARTIALLY_PRESENT 7u
/* sector bitmap block states */
#define VHDX_SB_NOT_PRESENT            0u
#define VHDX_SB_PRESENT                6u

#define VHDX_BAT_STATE_MASK      UINT64_C(0x7)
#define VHDX_BAT_RESERVED_MASK   UINT64_C(0xffff8)   /* bits 3..19 */
#define VHDX_BAT_OFFSET_SHIFT    20

/* A sector bitmap block covers 2^23 sectors (1 MiB of bits). */
#define VHDX_SB_BLOCK_SIZE       VHDX_MIB
#define VHDX_SECTORS_PER_SB      (UINT64_C(1) << 23)

struct vhdx_bat_entry {
    unsigned state;
    uint64_t off;               /* bytes (FileOffsetMB * 1 MiB) */
};

/* Decode one entry of a payload block (sb false) or a sector bitmap block
 * (sb true): a known state, reserved bits clear, and for the states that
 * name a block in the file (fully/partially present, bitmap present) an
 * offset at or past 1 MiB.  -EINVAL and a reason. */
int vhdx_bat_entry_decode(uint64_t raw, bool sb, struct vhdx_bat_entry *e, char *err,
                          size_t errlen);
static inline uint64_t vhdx_bat_entry_encode(unsigned state, uint64_t off)
{
    return (off >> VHDX_BAT_OFFSET_SHIFT << VHDX_BAT_OFFSET_SHIFT) | (state & 7u);
}

/* The chunk ratio: payload blocks per sector bitmap block,
 * 2^23 * logical sector size / block size (valid parameters: 2^5 .. 2^15). */
static inline uint64_t vhdx_chunk_ratio(uint32_t block_size, uint32_t logical_sector)
{
    return (VHDX_SECTORS_PER_SB * logical_sector) / block_size;
}

/* Payload blocks of a disk. */
static inline uint64_t vhdx_data_blocks(uint64_t disk_size, uint32_t block_size)
{
    return disk_size / block_size + (disk_size % block_size != 0);
}

/* Entries the BAT must hold: a fixed or dynamic disk needs up to the last
 * payload entry (data blocks + (data blocks - 1) / chunk ratio), a
 * differencing disk every chunk's bitmap entry too
 * (bitmap blocks * (chunk ratio + 1)). */
uint64_t vhdx_bat_entries(uint64_t disk_size, uint32_t block_size, uint32_t logical_sector,
                          bool has_parent);

/* Index in the BAT of payload block b and of chunk c's sector bitmap. */
static inline uint64_t vhdx_bat_payload_index(uint64_t b, uint64_t chunk_ratio)
{
    return b + b / chunk_ratio;
}
static inline uint64_t vhdx_bat_bitmap_index(uint64_t c, uint64_t chunk_ratio)
{
    return c * (chunk_ratio + 1) + chunk_ratio;
}

/* --- log ---------------------------------------------------------------------------- */

#define VHDX_LOG_SECTOR          4096u
#define VHDX_LOG_ENTRY_SIG       0x65676f6cu /* "loge" */
#define VHDX_LOG_DESC_SIG        0x63736564u /* "desc" */
#define VHDX_LOG_ZERO_SIG        0x6f72657au /* "zero" */
#define VHDX_LOG_DATA_SIG        0x61746164u /* "data" */
#define VHDX_LOG_HDR_SIZE        64u
#define VHDX_LOG_DESC_SIZE       32u
/* bytes of a data sector that carry payload (the rest: signature and the
 * sequence number's halves; the descriptor carries the 12 bytes they hide) */
#define VHDX_LOG_DATA_PAYLOAD    4084u
#define VHDX_LOG_LEADING         8u
#define VHDX_LOG_TRAILING        4u

struct vhdx_log_hdr {
    uint32_t checksum;          /* CRC-32C of the whole entry, field zeroed */
    uint32_t entry_length;      /* bytes, a multiple of 4 KiB */
    uint32_t tail;              /* offset in the log of the sequence's first
                                   entry, a multiple of 4 KiB */
    uint64_t seq;
    uint32_t desc_count;
    uint8_t log_guid[16];
    uint64_t flushed_file_offset;
    uint64_t last_file_offset;
};

struct vhdx_log_desc {
    bool zero;                  /* "zero" descriptor, else "desc" (data) */
    uint64_t zero_length;       /* zero: bytes, a multiple of 4 KiB */
    uint32_t trailing;          /* data: the sector's last 4 bytes */
    uint64_t leading;           /* data: the sector's first 8 bytes */
    uint64_t file_offset;       /* a multiple of 4 KiB */
    uint64_t seq;
};

/* Sectors an entry's header and descriptors take. */
static inline uint64_t vhdx_log_desc_sectors(uint64_t desc_count)
{
    return (VHDX_LOG_HDR_SIZE + desc_count * VHDX_LOG_DESC_SIZE + VHDX_LOG_SECTOR - 1) /
           VHDX_LOG_SECTOR;
}

/* Decode an entry header (64 bytes) for a log of `log_length` bytes:
 * signature, entry length a non-zero multiple of 4 KiB and at most the log,
 * tail on a 4 KiB boundary inside the log, descriptors that fit the entry
 * (header sectors + one sector per data descriptor is checked by the
 * caller, who has the descriptors), the file offsets on 1 MiB boundaries
 * and flushed <= last.  The checksum is the caller's (it covers the whole
 * entry).  -EINVAL and a reason. */
int vhdx_log_hdr_decode(const uint8_t *b, uint32_t log_length, struct vhdx_log_hdr *h,
                        char *err, size_t errlen);
/* 64 bytes; the checksum field is written as h->checksum (the writer sets
 * it to 0, computes the CRC-32C over the entry and stores it with
 * vhdx_log_set_checksum). */
void vhdx_log_hdr_encode(const struct vhdx_log_hdr *h, uint8_t *b);
/* The CRC-32C of an entry (len bytes, its checksum field taken as zero). */
uint32_t vhdx_log_checksum(const uint8_t *entry, size_t len);
void vhdx_log_set_checksum(uint8_t *entry, size_t len);

/* Decode a descriptor (32 bytes) of an entry with sequence number `seq`:
 * "desc" or "zero", the same sequence number, file offset on a 4 KiB
 * boundary past the headers (at or past 192 KiB: the log never rewrites
 * the identifier or the headers, which name the log), zero
 * length a non-zero multiple of 4 KiB that does not wrap.  -EINVAL and a
 * reason. */
int vhdx_log_desc_decode(const uint8_t *b, uint64_t seq, struct vhdx_log_desc *d,
                         char *err, size_t errlen);
void vhdx_log_desc_encode(const struct vhdx_log_desc *d, uint8_t *b);

/* A data sector (4 KiB) of an entry with sequence number `seq`: "data" and
 * the sequence number's high and low halves.  With its descriptor, the
 * 4 KiB the entry writes: leading 8 bytes, the 4084 payload bytes,
 * trailing 4 bytes (into out).  -EINVAL and a reason. */
int vhdx_log_data_decode(const uint8_t *b, const struct vhdx_log_desc *d, uint64_t seq,
                         uint8_t *out, char *err, size_t errlen);
/* The data sector (and the descriptor's leading/trailing bytes) for the
 * 4 KiB `sector` written by an entry with sequence number `seq`. */
void vhdx_log_data_encode(const uint8_t *sector, uint64_t seq, struct vhdx_log_desc *d,
                          uint8_t *b);

/* --- GUIDs --------------------------------------------------------------------------- */

/* As text, lower case, "xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx" (37 bytes with
 * the NUL), the first three groups read little-endian. */
void vhdx_guid_text(const uint8_t g[16], char out[37]);
/* The text form (optionally in braces, either case) back to bytes;
 * -EINVAL when it is not one. */
int vhdx_guid_parse(const char *s, uint8_t g[16]);
bool vhdx_guid_is_zero(const uint8_t g[16]);

#endif
