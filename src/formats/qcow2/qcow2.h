/* qcow2: the driver, and the decoded header shared by reader and writer.
 *
 * qcow2_header_decode() is pure (no I/O): it validates every field of the
 * first cluster of an image (header, header extensions, backing file name)
 * and fills a host-side struct.  Checks that need the file size (tables
 * past the end of the file) are done by the driver when it uses a table.
 */
#ifndef DISKIMG_QCOW2_H
#define DISKIMG_QCOW2_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "formats/bd.h"
#include "formats/qcow2/format.h"

struct diag;

extern const struct bd_driver bd_qcow2;

#define QCOW2_MAX_BACKING_FMT   15     /* qemu keeps it in char[16] */
#define QCOW2_MAX_DATA_FILE_NAME 4095
#define QCOW2_FEATURE_NAME_LEN  46     /* bytes 2..47 of a table entry */
#define QCOW2_FEATURE_ENTRY     48
#define QCOW2_MAX_BITMAPS       65535
#define QCOW2_MAX_BITMAP_DIR    (16u << 20) /* qemu: 64 MiB; real ones are tiny */
#define QCOW2_MAX_REFT_BYTES    (8u << 20)  /* qemu's refcount table limit */

struct qcow2_header {
    /* fields as stored (v2 images get the implied v3 values) */
    uint32_t version;
    uint64_t backing_file_offset;
    uint32_t backing_file_size;
    uint32_t cluster_bits;
    uint64_t size;
    uint32_t crypt_method;
    uint32_t l1_size;
    uint64_t l1_table_offset;
    uint64_t refcount_table_offset;
    uint32_t refcount_table_clusters;
    uint32_t nb_snapshots;
    uint64_t snapshots_offset;
    uint64_t incompatible;
    uint64_t compatible;
    uint64_t autoclear;
    uint32_t refcount_order;
    uint32_t header_length;
    uint8_t compression_type;

    /* derived */
    uint32_t cluster_size;
    bool extended_l2;
    uint32_t l2_entry_bytes;    /* 8, or 16 with extended L2 entries */
    uint32_t l2_entries;        /* entries per L2 table */
    uint32_t subcluster_size;   /* cluster_size / 32 with extended L2, else cluster_size */
    uint32_t refcount_bits;
    uint64_t l1_needed;         /* L1 entries the virtual size needs */

    /* header extensions */
    bool has_backing_file;
    char backing_file[QCOW2_MAX_BACKING_NAME + 1];
    bool has_backing_fmt;
    char backing_fmt[QCOW2_MAX_BACKING_FMT + 1];
    bool has_data_file_name;
    char data_file[QCOW2_MAX_DATA_FILE_NAME + 1];
    bool has_crypto_ext;
    uint64_t crypto_offset, crypto_length;
    bool has_bitmaps_ext;       /* present and consistent (autoclear bit 0) */
    uint32_t nb_bitmaps;
    uint64_t bitmap_directory_size;
    uint64_t bitmap_directory_offset;
    unsigned unknown_extensions;
    uint32_t extensions_end;    /* first byte after the end-of-extensions marker */
    /* names of incompatible feature bits from the feature name table ("" if none) */
    char incompat_names[64][QCOW2_FEATURE_NAME_LEN + 1];
};

/* Decode the first `len` bytes of an image (at least the header; normally
 * the whole first cluster, fewer if the file is shorter).  Every field is
 * validated; unknown incompatible features, encryption and out-of-range
 * values fail with a message naming the field.  `path` names the file in
 * messages.  Returns 0 or a negative errno recorded in `d`. */
int qcow2_header_decode(const uint8_t *buf, size_t len, struct qcow2_header *h,
                        struct diag *d, const char *path);

/* The number of bytes of the first cluster needed to decode the header:
 * reads cluster_bits from the first QH_V2_LENGTH bytes (0 if invalid). */
uint32_t qcow2_header_cluster_size(const uint8_t *buf, size_t len);

/* Whether `buf` starts with the qcow2 magic. */
bool qcow2_has_magic(const uint8_t *buf, size_t len);

#endif
