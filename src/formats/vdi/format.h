/* VDI (VirtualBox Disk Image): the on-disk header and its pure decoder
 * and encoder (header.c).  All fields are little-endian.
 *
 *   0     pre-header: 64 bytes of text, signature 0xbeda107f, version
 *   72    header: versions 1.x (1.0, 1.1) name their size (cbHeader)
 *         and the map's and data's offsets; the old version 0 header
 *         has neither: its map follows it and the data follows the map
 *   offBlocks  block map: a 32-bit block index per block, 0xffffffff not
 *              allocated, 0xfffffffe reads as zeros
 *   offData    blocks: block i at offData + i * (cbBlockExtra + cbBlock),
 *              its data after cbBlockExtra bytes
 * A differencing image (type 4) names its parent by the parent's
 * creation UUID (uuidLinkage); VirtualBox keeps the file name elsewhere,
 * so the parent is looked for among the .vdi files beside the image.
 */
#ifndef DISKIMG_VDI_FORMAT_H
#define DISKIMG_VDI_FORMAT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define VDI_SECTOR          512u
#define VDI_SIGNATURE       0xbeda107fu
#define VDI_PREHEADER       72u
#define VDI_HEADER_AREA     512u        /* what qemu and we read and write */
#define VDI_V11             0x00010001u   /* what qemu and VirtualBox write */
#define VDI_V0_HEADER       348u        /* the old header (major version 0,
                                           0.2 as VirtualBox calls it) */
#define VDI_V11_MIN_HEADER  384u        /* 1.1 up to uuidParentModify */
#define VDI_V11_HEADER      400u        /* ... with the LCHS geometry */

#define VDI_TYPE_DYNAMIC    1u
#define VDI_TYPE_STATIC     2u
#define VDI_TYPE_UNDO       3u
#define VDI_TYPE_DIFF       4u

#define VDI_UNALLOCATED     0xffffffffu
#define VDI_ZERO            0xfffffffeu

#define VDI_DEFAULT_BLOCK   (UINT32_C(1) << 20)
#define VDI_MAX_BLOCK       (UINT32_C(256) << 20)
#define VDI_MAX_EXTRA       (UINT32_C(1) << 20)
/* qemu's limit on blocks (0x3fffffff), kept: the map stays below 4 GiB */
#define VDI_MAX_BLOCKS      UINT32_C(0x3fffffff)

struct vdi_header {
    uint32_t version;
    bool v0;                    /* the old layout (major version 0) */
    uint32_t header_size;       /* cbHeader (version 0: 348) */
    uint32_t type, flags;
    char comment[257];
    uint32_t off_blocks, off_data;
    uint32_t cyls, heads, secs, sector_size;
    uint64_t disk_size;
    uint32_t block_size, block_extra;
    uint32_t blocks, blocks_allocated;
    uint8_t uuid_create[16], uuid_modify[16], uuid_link[16], uuid_parent_modify[16];
};

/* Decode the first VDI_HEADER_AREA bytes (fewer: -EINVAL).  Checks what
 * every reader needs (signature, version, type, sizes, offsets on
 * sectors, the map before the data, the disk inside the blocks); the file
 * size is the caller's.  -EINVAL with the reason in err. */
int vdi_header_decode(const uint8_t *b, size_t len, struct vdi_header *h, char *err,
                      size_t errlen);
/* A 1.1 header as qemu-img writes it (cbHeader 384, text naming diskimg). */
void vdi_header_encode(const struct vdi_header *h, uint8_t b[VDI_HEADER_AREA]);

#endif
