/* metamap: the byte ranges of an image file that hold its own metadata
 * (headers, descriptors, L1/L2 and refcount tables, grain directories and
 * tables, snapshot and bitmap tables), so that a reader can tell when a
 * data cluster or grain points into them.  Such a pointer is corruption
 * (a hostile image would otherwise hand its metadata, or the header of the
 * file, out as guest data); drivers refuse it in block status and reads,
 * and check() reports it.
 *
 * Built once at open (metamap_add per structure, then metamap_seal), read
 * afterwards from any thread without locking.  Ranges may overlap each
 * other (a corrupt image); lookups still find one of them.
 */
#ifndef DISKIMG_METAMAP_H
#define DISKIMG_METAMAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct metarange {
    uint64_t off, len;          /* len > 0 */
    const char *what;           /* static text: "L1 table", "grain table", ... */
};

struct metamap {
    struct metarange *r;        /* sorted by off after metamap_seal() */
    uint64_t *max_end;          /* max_end[i]: largest off+len of r[0..i] */
    size_t n, cap;
    bool sealed;
};

/* Record [off, off+len) as metadata (len 0 is ignored).  -EOVERFLOW if the
 * range wraps, -ENOMEM when memory runs out, -EINVAL after metamap_seal(). */
int metamap_add(struct metamap *m, uint64_t off, uint64_t len, const char *what);

/* Sort the ranges; lookups may follow.  -ENOMEM when memory runs out. */
int metamap_seal(struct metamap *m);

/* A recorded range that overlaps [off, off+len), or NULL (also for len 0
 * and for a map that was never sealed). */
const struct metarange *metamap_find(const struct metamap *m, uint64_t off, uint64_t len);

void metamap_free(struct metamap *m);

#endif
