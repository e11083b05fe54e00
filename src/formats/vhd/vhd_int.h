/* VHD: the reader's state, shared by open.c, read.c, check.c, resize.c.
 * Not for other modules. */
#ifndef DISKIMG_VHD_INT_H
#define DISKIMG_VHD_INT_H

#include <stdbool.h>
#include <stdint.h>

#include "formats/bd.h"
#include "formats/metamap.h"
#include "formats/vhd/format.h"

struct kvopts;

struct vhd {
    struct bd bd;
    struct vhd_footer foot;
    struct vhd_dynhdr hdr;      /* dynamic and differencing disks */
    bool dynamic;               /* dynamic or differencing */
    uint64_t file_size;
    uint64_t data_end;          /* blocks (fixed: the disk) end before this:
                                   the footer at the end of the file */
    bool used_copy;             /* the footer copy at offset 0 was used */
    char foot_err[200];         /* ... because of this */
    uint32_t *bat;              /* host sector of each block, or VHD_BAT_UNUSED */
    uint32_t n_bat;             /* entries (max_table_entries) */
    uint64_t bat_bytes;         /* on disk, padded to whole sectors */
    uint32_t block_size, bitmap_bytes;
    struct metamap meta;        /* footer (copy), header, BAT, locators */
};

static inline struct vhd *to_vhd(struct bd *bd)
{
    return (struct vhd *)bd;
}

/* read.c */
int vhd_block_status(struct bd *bd, uint64_t off, uint64_t len, struct bd_extent *e);
int vhd_pread(struct bd *bd, void *buf, size_t len, uint64_t off);
/* Where block `b`'s bitmap is (bytes), after checking that the block lies
 * inside the file and clear of the metadata; 0 when it is not allocated.
 * `need`: bytes of block data that must be there (the disk may end inside
 * the last block).  -EINVAL with a message naming the entry. */
int vhd_block_host(struct vhd *v, uint32_t b, uint64_t *host);

/* check.c, resize.c, measure.c (write.c) */
int vhd_check(struct bd *bd, struct bd_check_result *r, unsigned fix);
int vhd_resize(struct bd *bd, uint64_t new_size, bool shrink);
int vhd_measure(struct kvopts *o, uint64_t size, struct bd *src, struct bd_measure *m,
                struct diag *d);

/* write.c: create, options */
int vhdw_create(struct bd **out, struct bfile *f, const struct bd_create_opts *o,
                struct diag *d);
/* write_inplace.c: convert -n into the image in f */
int vhdip_open(struct bd **out, struct bfile *f, const struct bd_create_opts *o,
               struct diag *d);
void vhdw_describe_create(const struct bd_create_opts *o, char *buf, size_t len);
extern const char vhdw_options_help[];
/* A new unique id (random). */
void vhd_new_uuid(uint8_t uuid[16]);

#endif
