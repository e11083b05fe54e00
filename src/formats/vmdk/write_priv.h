/* VMDK writer: the hosted sparse extent writer shared by monolithicSparse
 * (write_sparse.c) and the split subformats (write_multi.c).
 * Not for other modules. */
#ifndef DISKIMG_VMDK_WRITE_PRIV_H
#define DISKIMG_VMDK_WRITE_PRIV_H

#include <stdbool.h>
#include <stdint.h>

#include "formats/vmdk/write.h"

struct bfile;
struct diag;

struct vmdkw_gt_slot {
    uint64_t idx;               /* grain table held */
    uint64_t stamp;             /* last use */
    uint32_t ent[VMDKW_GTES];
    bool used, dirty;
};

/* One hosted sparse extent being written (layout in write.h). */
struct vmdkw_sx {
    struct bfile *file;         /* open while written (the owner sets it) */
    const char *name;           /* for messages */
    struct diag *diag;
    struct vmdkw_sparse_layout l;
    uint64_t capacity;          /* sectors */
    uint64_t next_sector;       /* where the next grain goes */
    struct vmdkw_gt_slot *slots;    /* table cache, allocated on first use */
    unsigned nslots;
    uint64_t clock;
    uint8_t *on_disk;           /* bit per grain table: written back once */
};

int vmdkw_sx_init(struct vmdkw_sx *x, uint64_t capacity, bool embedded_desc,
                  unsigned nslots, char *err, size_t errlen);

/* Grains for extent bytes [off, off+len) (off on a grain, len whole grains
 * except at the extent's end), contiguous in the file from *host (bytes). */
int vmdkw_sx_alloc(struct vmdkw_sx *x, uint64_t off, uint64_t len, uint64_t *host);

/* Make extent bytes [off, off+len) (as for alloc) read as zeros over a
 * parent: zeroed-grain entries (GTE 1) with `zeroed_grain`, else grains
 * allocated and never written (holes in the file). */
int vmdkw_sx_zero(struct vmdkw_sx *x, uint64_t off, uint64_t len, bool zeroed_grain);

/* Write the cached tables back (both copies); with `drop` free the cache
 * (a later write reloads what it needs). */
int vmdkw_sx_flush(struct vmdkw_sx *x, bool drop);

/* Commit the extent: tables, both directories, the file's size; when
 * durable a sync; then header (and `desc`, the embedded descriptor text, or
 * NULL) and another sync. */
int vmdkw_sx_finish(struct vmdkw_sx *x, const struct vmdkw_params *p, const char *desc,
                    bool durable);

void vmdkw_sx_free(struct vmdkw_sx *x);

/* write_multi.c: descriptor file + flat or sparse extent files. */
int vmdkw_multi_create(struct bd **out, struct bfile *f, const struct bd_create_opts *o,
                       const struct vmdkw_params *p, struct diag *d);

#endif
