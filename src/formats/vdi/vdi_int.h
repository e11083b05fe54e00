/* VDI: the reader's state, shared by open.c, read.c, check.c, resize.c
 * and the writer's create().  Not for other modules. */
#ifndef DISKIMG_VDI_INT_H
#define DISKIMG_VDI_INT_H

#include <stdbool.h>
#include <stdint.h>

#include "formats/bd.h"
#include "formats/metamap.h"
#include "formats/vdi/format.h"

struct kvopts;

struct vdi {
    struct bd bd;
    struct vdi_header h;
    uint8_t raw[VDI_HEADER_AREA];   /* the header as read (rewritten by resize) */
    uint64_t file_size;
    uint32_t *map;              /* h.blocks entries */
    uint64_t stride;            /* block_extra + block_size */
    struct metamap meta;        /* header, block map */
};

static inline struct vdi *to_vdi(struct bd *bd)
{
    return (struct vdi *)bd;
}

/* read.c */
int vdi_block_status(struct bd *bd, uint64_t off, uint64_t len, struct bd_extent *e);
int vdi_pread(struct bd *bd, void *buf, size_t len, uint64_t off);
/* Where block b's data is (bytes), after checking it lies inside the file
 * and clear of the metadata; 0 when the entry is not an index. */
int vdi_block_host(struct vdi *v, uint32_t b, uint64_t *host);

/* check.c, resize.c, write.c */
int vdi_check(struct bd *bd, struct bd_check_result *r, unsigned fix);
int vdi_resize(struct bd *bd, uint64_t new_size, bool shrink);
int vdi_measure(struct kvopts *o, uint64_t size, struct bd *src, struct bd_measure *m,
                struct diag *d);
int vdiw_create(struct bd **out, struct bfile *f, const struct bd_create_opts *o,
                struct diag *d);
/* write_inplace.c: convert -n into the image in f */
int vdiip_open(struct bd **out, struct bfile *f, const struct bd_create_opts *o,
               struct diag *d);
void vdiw_describe_create(const struct bd_create_opts *o, char *buf, size_t len);
extern const char vdiw_options_help[];

#endif
