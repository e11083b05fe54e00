/* qcow2 refcount block entries of every width (1 to 64 bits): pure helpers
 * shared by the writer, the checker and the code that edits existing
 * images.  Entries narrower than a byte start at the least significant
 * bits (entry 0 of a byte is bit 0), wider ones are big-endian. */
#ifndef DISKIMG_QCOW2_RCENTRY_H
#define DISKIMG_QCOW2_RCENTRY_H

#include <stdint.h>

#include "util/endian.h"

/* Entry j of refcount block `blk`, refcount width 1 << order bits. */
static inline uint64_t qcow2_rc_entry_get(const uint8_t *blk, unsigned order, uint64_t j)
{
    switch (order) {
    case 0: return (blk[j / 8] >> (j % 8)) & 1;
    case 1: return (blk[j / 4] >> (2 * (j % 4))) & 3;
    case 2: return (blk[j / 2] >> (4 * (j % 2))) & 15;
    case 3: return blk[j];
    case 4: return be16_get(blk + 2 * j);
    case 5: return be32_get(blk + 4 * j);
    default: return be64_get(blk + 8 * j);
    }
}

/* Set entry j (v must fit the width). */
static inline void qcow2_rc_entry_set(uint8_t *blk, unsigned order, uint64_t j, uint64_t v)
{
    unsigned bits, shift;
    uint8_t mask, *b;

    switch (order) {
    case 3: blk[j] = (uint8_t)v; return;
    case 4: be16_put(blk + 2 * j, (uint16_t)v); return;
    case 5: be32_put(blk + 4 * j, (uint32_t)v); return;
    case 6: be64_put(blk + 8 * j, v); return;
    default:
        bits = 1u << order;
        shift = (unsigned)(j % (8 / bits)) * bits;
        mask = (uint8_t)(((1u << bits) - 1) << shift);
        b = &blk[j / (8 / bits)];
        *b = (uint8_t)((*b & ~mask) | ((v << shift) & mask));
    }
}

/* The largest refcount the width holds. */
static inline uint64_t qcow2_rc_max(unsigned order)
{
    return order >= 6 ? UINT64_MAX : (UINT64_C(1) << (1u << order)) - 1;
}

#endif
