/* qcow2 L2 table cache: a fixed number of slots, least recently used out.
 *
 * Readers on several threads share it.  The lock covers the slot table
 * only: a miss marks its slot "loading", drops the lock for the read, and
 * wakes the threads that wait for the same table (or for a free slot) when
 * done.  A pinned slot is never evicted; each caller pins at most one table
 * at a time, so a thread waiting for a free slot holds none and the wait
 * ends when any other thread releases its pin.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "formats/qcow2/read_int.h"
#include "io/bfile.h"
#include "util/diag.h"
#include "zerodetect/zerodetect.h"

#define MIN_SLOTS 4
#define MAX_SLOTS 256

struct l2slot {
    uint64_t off;        /* table offset; 0 = empty */
    uint8_t *data;
    unsigned pins;
    bool loading;
    bool zero;           /* every entry is 0 (unallocated) */
    uint64_t used;       /* LRU stamp */
};

struct qcow2_l2cache {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    struct bfile *f;
    struct diag *d;
    uint32_t table_size;
    unsigned n;
    uint64_t clock;
    uint64_t misses;
    struct l2slot *slots;
};

int qcow2_l2cache_new(struct qcow2_l2cache **out, struct bfile *f, uint32_t table_size,
                      size_t budget, struct diag *d)
{
    struct qcow2_l2cache *c = calloc(1, sizeof(*c));
    size_t n = budget / table_size;

    *out = NULL;
    if (n < MIN_SLOTS)
        n = MIN_SLOTS;
    if (n > MAX_SLOTS)
        n = MAX_SLOTS;
    if (!c)
        return diag_fail(d, -ENOMEM, f->path, -1, "out of memory");
    c->slots = calloc(n, sizeof(*c->slots));
    if (!c->slots) {
        free(c);
        return diag_fail(d, -ENOMEM, f->path, -1, "out of memory");
    }
    pthread_mutex_init(&c->lock, NULL);
    pthread_cond_init(&c->cond, NULL);
    c->f = f;
    c->d = d;
    c->table_size = table_size;
    c->n = (unsigned)n;
    *out = c;
    return 0;
}

void qcow2_l2cache_free(struct qcow2_l2cache *c)
{
    if (!c)
        return;
    for (unsigned i = 0; i < c->n; i++)
        free(c->slots[i].data);
    free(c->slots);
    pthread_mutex_destroy(&c->lock);
    pthread_cond_destroy(&c->cond);
    free(c);
}

/* With the lock held: the slot holding (or loading) `off`, or -1. */
static int find(struct qcow2_l2cache *c, uint64_t off)
{
    for (unsigned i = 0; i < c->n; i++)
        if (c->slots[i].off == off)
            return (int)i;
    return -1;
}

/* With the lock held: the least recently used slot nobody pins, or -1. */
static int victim(struct qcow2_l2cache *c)
{
    int best = -1;
    for (unsigned i = 0; i < c->n; i++) {
        struct l2slot *s = &c->slots[i];
        if (s->pins || s->loading)
            continue;
        if (s->off == 0)
            return (int)i;
        if (best < 0 || s->used < c->slots[best].used)
            best = (int)i;
    }
    return best;
}

static int load(struct qcow2_l2cache *c, struct l2slot *s, uint64_t off)
{
    size_t got = 0;

    if (!s->data) {
        s->data = malloc(c->table_size);
        if (!s->data)
            return diag_fail(c->d, -ENOMEM, c->f->path, -1, "out of memory");
    }
    if (off >= c->f->size)
        return diag_fail(c->d, -EINVAL, c->f->path, (int64_t)off,
                         "L2 table at offset %" PRIu64 " is past the end of the file (%"
                         PRIu64 " bytes)", off, c->f->size);
    int r = bfile_pread_upto(c->f, s->data, c->table_size, off, &got);
    if (r < 0)
        return r;
    /* tables are written whole: one cut by the end of the file is a
     * truncated image, not a table whose last entries are empty */
    if (got < c->table_size)
        return diag_fail(c->d, -EINVAL, c->f->path, (int64_t)off,
                         "L2 table at offset %" PRIu64 " is cut by the end of the file (%"
                         PRIu64 " bytes)", off, c->f->size);
    s->zero = buffer_is_zero(s->data, c->table_size);
    return 0;
}

int qcow2_l2cache_get(struct qcow2_l2cache *c, uint64_t off, const uint8_t **table,
                      int *slot)
{
    int i, r;

    pthread_mutex_lock(&c->lock);
    for (;;) {
        i = find(c, off);
        if (i >= 0 && !c->slots[i].loading)
            break;
        if (i < 0 && (i = victim(c)) >= 0) {
            struct l2slot *s = &c->slots[i];
            s->off = off;
            s->loading = true;
            s->pins = 1;
            c->misses++;
            pthread_mutex_unlock(&c->lock);
            r = load(c, s, off);
            pthread_mutex_lock(&c->lock);
            s->loading = false;
            if (r < 0) {
                s->off = 0;
                s->pins = 0;
            } else {
                s->used = ++c->clock;
                *table = s->data;
                *slot = i;
            }
            pthread_cond_broadcast(&c->cond);
            pthread_mutex_unlock(&c->lock);
            return r;
        }
        /* being loaded by another thread, or every slot pinned */
        pthread_cond_wait(&c->cond, &c->lock);
    }
    struct l2slot *s = &c->slots[i];
    s->pins++;
    s->used = ++c->clock;
    *table = s->data;
    *slot = i;
    pthread_mutex_unlock(&c->lock);
    return 0;
}

void qcow2_l2cache_put(struct qcow2_l2cache *c, int slot)
{
    if (slot < 0)
        return;
    pthread_mutex_lock(&c->lock);
    if (--c->slots[slot].pins == 0)
        pthread_cond_broadcast(&c->cond);
    pthread_mutex_unlock(&c->lock);
}

bool qcow2_l2cache_zero(struct qcow2_l2cache *c, int slot)
{
    /* set while the slot was loading; stable while the caller pins it */
    return c->slots[slot].zero;
}

uint64_t qcow2_l2cache_misses(struct qcow2_l2cache *c)
{
    pthread_mutex_lock(&c->lock);
    uint64_t m = c->misses;
    pthread_mutex_unlock(&c->lock);
    return m;
}

unsigned qcow2_l2cache_slots(struct qcow2_l2cache *c)
{
    return c->n;
}
