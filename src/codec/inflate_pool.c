/* A free list of cluster inflaters (inflate.c) with their buffers, one
 * per concurrent reader of a qcow2 image: a reader takes one for a
 * compressed cluster and gives it back, so that nothing is allocated per
 * cluster once every thread has had one. */
#include <pthread.h>
#include <stdlib.h>

#include "codec/codec.h"

void qcow2_inflate_pool_init(struct qcow2_inflate_pool *p, uint8_t type,
                             uint32_t cluster_size)
{
    pthread_mutex_init(&p->lock, NULL);
    p->free = NULL;
    p->type = type;
    p->cluster_size = cluster_size;
}

static void slot_free(struct qcow2_inflate_slot *s)
{
    qcow2_inflater_free(s->z);
    free(s->in);
    free(s->out);
    free(s);
}

void qcow2_inflate_pool_destroy(struct qcow2_inflate_pool *p)
{
    while (p->free) {
        struct qcow2_inflate_slot *s = p->free;
        p->free = s->next;
        slot_free(s);
    }
    pthread_mutex_destroy(&p->lock);
}

struct qcow2_inflate_slot *qcow2_inflate_pool_take(struct qcow2_inflate_pool *p)
{
    pthread_mutex_lock(&p->lock);
    struct qcow2_inflate_slot *s = p->free;
    if (s)
        p->free = s->next;
    pthread_mutex_unlock(&p->lock);
    if (s)
        return s;
    s = calloc(1, sizeof(*s));
    if (!s)
        return NULL;
    /* the descriptor can span up to two clusters of sectors */
    s->in = malloc((size_t)p->cluster_size * 2);
    s->out = malloc(p->cluster_size);
    if (!s->in || !s->out || qcow2_inflater_new(&s->z, p->type, p->cluster_size) < 0) {
        slot_free(s);
        return NULL;
    }
    return s;
}

void qcow2_inflate_pool_give(struct qcow2_inflate_pool *p, struct qcow2_inflate_slot *s)
{
    pthread_mutex_lock(&p->lock);
    s->next = p->free;
    p->free = s;
    pthread_mutex_unlock(&p->lock);
}
