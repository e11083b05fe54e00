/* qcow2 persistent dirty bitmaps: content in memory (bitmap_data.c) and
 * the operations of qemu-img bitmap (bitmap_write.c).  Internal. */
#ifndef DISKIMG_QCOW2_BITMAP_INT_H
#define DISKIMG_QCOW2_BITMAP_INT_H

#include <stdint.h>

#include "formats/qcow2/read_int.h"

/* Bytes of a bitmap of a `size`-byte disk at granularity 2^gbits. */
uint64_t qcow2_bitmap_bytes(uint64_t size, unsigned gbits);
/* Its table entries (clusters of `cluster_size`), at least one. */
uint32_t qcow2_bitmap_table_size(uint64_t size, unsigned gbits, uint32_t cluster_size);

/* The table of bitmap `e` (host order, malloc'd), every entry validated
 * (reserved bits, alignment, inside the file, not metadata). */
int qcow2_bitmap_read_table(struct qcow2 *q, const struct qcow2_bitmap *e, uint64_t **out);

/* The content of bitmap `e` (malloc'd, *len = qcow2_bitmap_bytes()). */
int qcow2_bitmap_load(struct qcow2 *q, const struct qcow2_bitmap *e, uint8_t **data,
                      uint64_t *len);

/* Clear the bits past the disk's end in the last byte. */
void qcow2_bitmap_trim(uint8_t *data, uint64_t size, unsigned gbits);

/* Set the bits that cover guest bytes [off, off+len) (clipped to `size`). */
void qcow2_bitmap_mark(uint8_t *data, uint64_t size, unsigned gbits, uint64_t off,
                       uint64_t len);

/* dst |= src, for bitmaps of the same disk size at any granularities. */
void qcow2_bitmap_merge(uint8_t *dst, unsigned dbits, const uint8_t *src, unsigned sbits,
                        uint64_t size);

/* convert -n: the enabled bitmaps (not in use) of the target `q` loaded
 * and marked in use in place before anything is written (*out NULL when
 * there are none); _mark records a written guest range; _end, after the
 * writer's metadata is committed, writes them with the ranges recorded
 * and the in-use flag cleared (crash-safe, as bitmap operations).  A crash
 * in between leaves them in use: inconsistent, as qemu leaves them. */
struct qcow2_bmtrack;
int qcow2_bitmaps_track_begin(struct qcow2 *q, struct qcow2_bmtrack **out);
void qcow2_bitmaps_track_mark(struct qcow2 *q, struct qcow2_bmtrack *t, uint64_t off,
                              uint64_t len);
int qcow2_bitmaps_track_end(struct qcow2 *q, struct qcow2_bmtrack *t);
void qcow2_bitmaps_track_free(struct qcow2_bmtrack *t);

#endif
