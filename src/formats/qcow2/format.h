/* qcow2 on-disk layout: constants shared by the reader and the writer.
 * Source: docs/interop/qcow2.txt in qemu (facts only).  All fields are
 * big-endian.  Nothing here touches I/O. */
#ifndef DISKIMG_QCOW2_FORMAT_H
#define DISKIMG_QCOW2_FORMAT_H

#include <stdint.h>

#include "util/endian.h"

#define QCOW2_MAGIC 0x514649fbU            /* "QFI\xfb" */

/* header field offsets */
#define QH_MAGIC                 0
#define QH_VERSION               4
#define QH_BACKING_FILE_OFFSET   8
#define QH_BACKING_FILE_SIZE    16
#define QH_CLUSTER_BITS         20
#define QH_SIZE                 24
#define QH_CRYPT_METHOD         32
#define QH_L1_SIZE              36
#define QH_L1_TABLE_OFFSET      40
#define QH_REFCOUNT_TABLE_OFFSET 48
#define QH_REFCOUNT_TABLE_CLUSTERS 56
#define QH_NB_SNAPSHOTS         60
#define QH_SNAPSHOTS_OFFSET     64
#define QH_V2_LENGTH            72
#define QH_INCOMPATIBLE         72
#define QH_COMPATIBLE           80
#define QH_AUTOCLEAR            88
#define QH_REFCOUNT_ORDER       96
#define QH_HEADER_LENGTH       100
#define QH_V3_MIN_LENGTH       104
#define QH_COMPRESSION_TYPE    104      /* 1 byte, present if header_length > 104 */
#define QH_V3_LENGTH_WITH_CTYPE 112     /* 104 + 1, padded to a multiple of 8 */

#define QCOW2_MIN_CLUSTER_BITS   9
#define QCOW2_MAX_CLUSTER_BITS  21       /* 2 MiB, qemu's limit */
#define QCOW2_MAX_BACKING_NAME 1023
#define QCOW2_MAX_L1_BYTES     (32u << 20) /* qemu's limit on the L1 table */

#define QCOW2_CRYPT_NONE 0
#define QCOW2_CRYPT_AES  1
#define QCOW2_CRYPT_LUKS 2

/* incompatible feature bits */
#define QCOW2_INCOMPAT_DIRTY        (1ULL << 0)
#define QCOW2_INCOMPAT_CORRUPT      (1ULL << 1)
#define QCOW2_INCOMPAT_DATA_FILE    (1ULL << 2)
#define QCOW2_INCOMPAT_COMPRESSION  (1ULL << 3)
#define QCOW2_INCOMPAT_EXTL2        (1ULL << 4)
#define QCOW2_INCOMPAT_KNOWN        0x1fULL
/* compatible */
#define QCOW2_COMPAT_LAZY_REFCOUNTS (1ULL << 0)
/* autoclear */
#define QCOW2_AUTOCLEAR_BITMAPS     (1ULL << 0)
#define QCOW2_AUTOCLEAR_DATA_RAW    (1ULL << 1)

#define QCOW2_COMPRESSION_ZLIB 0
#define QCOW2_COMPRESSION_ZSTD 1

/* header extensions */
#define QCOW2_EXT_END          0x00000000U
#define QCOW2_EXT_BACKING_FMT  0xe2792acaU
#define QCOW2_EXT_FEATURE_NAMES 0x6803f857U
#define QCOW2_EXT_BITMAPS      0x23852875U
#define QCOW2_EXT_CRYPTO       0x0537be77U
#define QCOW2_EXT_DATA_FILE    0x44415441U

/* L1 entries */
#define QCOW2_L1_OFFSET_MASK   0x00fffffffffffe00ULL   /* bits 9-55 */
#define QCOW2_L1_COPIED        (1ULL << 63)
#define QCOW2_L1_RESERVED      0x7f000000000001ffULL   /* bits 0-8, 56-62 */

/* L2 entries (first 64 bits of an extended entry too) */
#define QCOW2_L2_COPIED        (1ULL << 63)
#define QCOW2_L2_COMPRESSED    (1ULL << 62)
#define QCOW2_L2_ZERO          (1ULL << 0)             /* v3 standard clusters */
#define QCOW2_L2_OFFSET_MASK   0x00fffffffffffe00ULL   /* bits 9-55 */
#define QCOW2_L2_STD_RESERVED  0x3f000000000001feULL   /* bits 1-8, 56-61 */
/* Compressed descriptor: with x = 62 - (cluster_bits - 8), bits 0..x-1 are
 * the host offset and bits x..61 the number of additional 512-byte sectors
 * the compressed data occupies (its length is (n + 1) * 512 minus the
 * offset within the first sector, at most). */
#define QCOW2_COMPRESSED_SECTOR 512

/* Extended L2 entries: a second 64-bit word; subcluster i (0..31) is
 * allocated if bit i is set, reads as zeros if bit 32+i is set. */
#define QCOW2_SUBCLUSTERS      32
#define QCOW2_EXTL2_MIN_CLUSTER_BITS 14

/* refcount table entries */
#define QCOW2_REFT_OFFSET_MASK 0xfffffffffffffe00ULL
#define QCOW2_REFT_RESERVED    0x00000000000001ffULL

/* snapshot table entry (fixed part) */
#define QS_L1_TABLE_OFFSET   0
#define QS_L1_SIZE           8
#define QS_ID_STR_SIZE      12
#define QS_NAME_SIZE        14
#define QS_DATE_SEC         16
#define QS_DATE_NSEC        20
#define QS_VM_CLOCK_NSEC    24
#define QS_VM_STATE_SIZE    32
#define QS_EXTRA_DATA_SIZE  36
#define QS_FIXED_LENGTH     40
/* extra data: vm_state_size_large (8), disk_size (8), icount (8) */
#define QCOW2_MAX_SNAPSHOTS 65536
#define QCOW2_MAX_SNAPSHOT_EXTRA 1024

#endif
