/* raw: the driver's state, shared by its reading side (read.c: probe,
 * open, block status, reads, close, the driver) and its writing side
 * (write.c: create, writes, zeroes, finish, resize, measure).  Not for
 * other modules. */
#ifndef DISKIMG_RAW_INT_H
#define DISKIMG_RAW_INT_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "formats/bd.h"

struct kvopts;

struct raw {
    struct bd bd;
    bool existing;          /* writing over content that must be cleared */
    bool can_punch;
    bool can_zero_range;
    bool durable;
    uint64_t stream_pos;    /* stream output: bytes written so far */
    struct ioq *ioq;
    bool direct;            /* O_DIRECT output (cache=none) */
};

static inline struct raw *to_raw(struct bd *bd)
{
    return (struct raw *)bd;
}

/* write.c: the writing side of bd_raw */
int raw_create(struct bd **out, struct bfile *f, const struct bd_create_opts *o,
               struct diag *d);
int raw_pwrite(struct bd *bd, const void *buf, size_t len, uint64_t off,
               ioq_done_fn done, void *opaque);
int raw_write_zeroes(struct bd *bd, uint64_t off, uint64_t len);
int raw_finish(struct bd *bd);
/* offload.c: copy offload into the file itself */
int raw_map_for_offload(struct bd *bd, uint64_t off, uint64_t len, uint32_t align,
                        struct bfile **f, uint64_t *host, uint64_t *mapped);
void raw_abort(struct bd *bd);
int raw_resize(struct bd *bd, uint64_t new_size, bool shrink);
int raw_measure(struct kvopts *o, uint64_t size, struct bd *src,
                struct bd_measure *m, struct diag *d);

#endif
