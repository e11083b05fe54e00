#include "io/ioq.h"

#include <errno.h>
#include <stdlib.h>

#include "io/bfile.h"
#include "util/diag.h"

struct ioq {
    int err;
    struct diag *diag;
};

int ioq_create(struct ioq **out, const struct ioq_opts *o, struct diag *d)
{
    (void)o;
    struct ioq *q = calloc(1, sizeof(*q));
    if (!q)
        return diag_fail(d, -ENOMEM, NULL, -1, "out of memory");
    q->diag = d;
    *out = q;
    return 0;
}

int ioq_pwrite(struct ioq *q, struct bfile *f, const void *buf, size_t len,
               uint64_t off, ioq_done_fn done, void *opaque)
{
    int r = q->err;
    if (!r) {
        r = bfile_pwrite(f, buf, len, off);
        if (r < 0)
            q->err = r;
    }
    done(opaque, r);
    return r;
}

int ioq_poll(struct ioq *q) { return q->err; }
int ioq_wait(struct ioq *q) { return q->err; }
int ioq_drain(struct ioq *q) { return q->err; }
unsigned ioq_inflight(const struct ioq *q) { (void)q; return 0; }
int ioq_error(const struct ioq *q) { return q->err; }
const char *ioq_backend_name(const struct ioq *q) { (void)q; return "pwrite"; }
void ioq_destroy(struct ioq *q) { free(q); }
