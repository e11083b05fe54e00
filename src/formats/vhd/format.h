/* VHD (Microsoft Virtual Hard Disk, qemu's "vpc"): the on-disk structures
 * and their pure decoders and encoders (footer.c, header.c).  All fields
 * are big-endian.
 *
 *   fixed:        the disk, then the 512-byte footer
 *   dynamic:      footer copy (512) | dynamic header (1024) | BAT |
 *   differencing  blocks (sector bitmap + block data) ... | footer
 *
 * The BAT holds one 32-bit sector number per block (0xffffffff: not
 * allocated); a block's sector bitmap (a bit per sector, most significant
 * bit first, padded to whole sectors) precedes its data.  A differencing
 * image reads the sectors whose bit is clear from its parent, which the
 * header's parent locators name (W2ru/W2ku: UTF-16LE Windows paths,
 * relative and absolute; MacX: a file:// URL in UTF-8) and whose footer
 * unique id it records.
 */
#ifndef DISKIMG_VHD_FORMAT_H
#define DISKIMG_VHD_FORMAT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define VHD_SECTOR           512u
#define VHD_FOOTER_SIZE      512u
#define VHD_DYNHDR_SIZE      1024u
#define VHD_FOOTER_COOKIE    "conectix"
#define VHD_DYNHDR_COOKIE    "cxsparse"
#define VHD_NO_OFFSET        UINT64_C(0xffffffffffffffff)
#define VHD_BAT_UNUSED       0xffffffffu
#define VHD_VERSION          0x00010000u
#define VHD_FEATURE_RESERVED 0x2u

#define VHD_TYPE_FIXED       2u
#define VHD_TYPE_DYNAMIC     3u
#define VHD_TYPE_DIFF        4u

/* qemu's limits: CHS geometry at most 65535 x 16 x 255, disks at most
 * 2040 GiB (the largest VHD the specification's tools make). */
#define VHD_MAX_GEOMETRY     (UINT64_C(65535) * 16 * 255)
#define VHD_MAX_SECTORS      UINT64_C(0xff000000)
#define VHD_MAX_SIZE         (VHD_MAX_SECTORS * VHD_SECTOR)
/* blocks: a power of two from 512 bytes (the bitmap is one sector for up
 * to 2 MiB); we accept up to 256 MiB (bitmaps up to 64 KiB) */
#define VHD_MIN_BLOCK        VHD_SECTOR
#define VHD_MAX_BLOCK        (UINT32_C(256) << 20)
#define VHD_DEFAULT_BLOCK    (UINT32_C(2) << 20)
#define VHD_LOCATORS         8
#define VHD_MAX_LOCATOR      4096u      /* bytes of one locator's path we read */

#define VHD_PLAT_W2RU        0x57327275u /* 'W2ru' */
#define VHD_PLAT_W2KU        0x57326b75u /* 'W2ku' */
#define VHD_PLAT_MACX        0x4d616358u /* 'MacX' */
#define VHD_PLAT_WI2R        0x57693272u /* 'Wi2r' (deprecated) */
#define VHD_PLAT_WI2K        0x5769326bu /* 'Wi2k' (deprecated) */
#define VHD_PLAT_MAC         0x4d616320u /* 'Mac ' */

/* seconds from the Unix epoch to the VHD one, 2000-01-01 00:00 UTC */
#define VHD_EPOCH            UINT64_C(946684800)

struct vhd_footer {
    uint32_t features, version;
    uint64_t data_offset;
    uint32_t timestamp;
    char creator_app[4];
    uint32_t creator_version, creator_os;
    uint64_t orig_size, current_size;
    uint16_t cyls;
    uint8_t heads, secs;
    uint32_t type;
    uint32_t checksum;          /* as stored */
    bool checksum_ok;           /* stored == computed */
    uint8_t uuid[16];
    uint8_t saved_state;
};

struct vhd_locator {
    uint32_t code, space, length;
    uint64_t offset;
};

struct vhd_dynhdr {
    uint64_t data_offset, table_offset;
    uint32_t version, max_entries, block_size;
    uint32_t checksum;
    bool checksum_ok;
    uint8_t parent_uuid[16];
    uint32_t parent_timestamp;
    uint16_t parent_name[256];  /* UTF-16BE as decoded code units */
    struct vhd_locator loc[VHD_LOCATORS];
};

/* The one's complement of the byte sum of `len` bytes, the 4 bytes at
 * `skip` (the checksum field) counted as zeros. */
uint32_t vhd_checksum(const uint8_t *b, size_t len, size_t skip);

/* Decode a footer.  Fails (-EINVAL, reason in err) only when the cookie is
 * wrong; the checksum is reported in f->checksum_ok, the other fields are
 * judged by the caller (vhd_footer_check). */
int vhd_footer_decode(const uint8_t b[VHD_FOOTER_SIZE], struct vhd_footer *f,
                      char *err, size_t errlen);
/* The fields every reader needs: type, version, sizes.  -EINVAL + reason. */
int vhd_footer_check(const struct vhd_footer *f, char *err, size_t errlen);
void vhd_footer_encode(const struct vhd_footer *f, uint8_t b[VHD_FOOTER_SIZE]);

int vhd_dynhdr_decode(const uint8_t b[VHD_DYNHDR_SIZE], struct vhd_dynhdr *h,
                      char *err, size_t errlen);
void vhd_dynhdr_encode(const struct vhd_dynhdr *h, uint8_t b[VHD_DYNHDR_SIZE]);

/* The virtual size qemu-img 7.2 gives the disk: the CHS geometry's size
 * for creators that size by geometry ('vpc ', 'qemu' and unknown ones),
 * else (and when the geometry is the maximum) the footer's current size. */
uint64_t vhd_disk_size(const struct vhd_footer *f);
/* True when the creator sizes the disk by its current size. */
bool vhd_creator_uses_size(const char app[4]);

/* The CHS geometry of the specification's algorithm for `sectors`. */
void vhd_geometry(uint64_t sectors, uint16_t *cyls, uint8_t *heads, uint8_t *secs);
/* qemu-img create's size and geometry for `bytes` (force_size off: the
 * size rounded up to whole geometry; on: the size as asked, sectors
 * rounded up, geometry 65535/16/255).  -EFBIG beyond 2040 GiB. */
int vhd_create_geometry(uint64_t bytes, bool force_size, uint64_t *size,
                        uint16_t *cyls, uint8_t *heads, uint8_t *secs);

/* Bytes of a block's sector bitmap (padded to whole sectors). */
static inline uint32_t vhd_bitmap_bytes(uint32_t block_size)
{
    uint32_t bits = block_size / VHD_SECTOR;
    uint32_t bytes = (bits + 7) / 8;
    return (bytes + VHD_SECTOR - 1) / VHD_SECTOR * VHD_SECTOR;
}

/* A locator's UTF-16LE (W2ru, W2ku) or UTF-8 URL (MacX) path as a host
 * path in UTF-8 ('\\' -> '/', ".\\" and "file://localhost" dropped, %XX
 * decoded).  -EINVAL when it is not text (NUL inside, bad UTF-16). */
int vhd_locator_path(uint32_t code, const uint8_t *data, size_t len, char *out,
                     size_t outlen);
/* The header's parent name (UTF-16 code units) as UTF-8. */
int vhd_utf16_to_utf8(const uint16_t *u, size_t n, char *out, size_t outlen);

#endif
