#include "formats/metamap.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int metamap_add(struct metamap *m, uint64_t off, uint64_t len, const char *what)
{
    if (m->sealed)
        return -EINVAL;
    if (len == 0)
        return 0;
    if (off + len < off)
        return -EOVERFLOW;
    if (m->n == m->cap) {
        size_t cap = m->cap ? m->cap * 2 : 16;
        struct metarange *r;
        if (cap > SIZE_MAX / sizeof(*r))
            return -ENOMEM;
        r = realloc(m->r, cap * sizeof(*r));
        if (!r)
            return -ENOMEM;
        m->r = r;
        m->cap = cap;
    }
    m->r[m->n++] = (struct metarange){ off, len, what };
    return 0;
}

static int by_off(const void *a, const void *b)
{
    const struct metarange *x = a, *y = b;
    return x->off < y->off ? -1 : x->off > y->off;
}

int metamap_seal(struct metamap *m)
{
    if (m->sealed)
        return 0;
    if (m->n) {
        qsort(m->r, m->n, sizeof(*m->r), by_off);
        m->max_end = malloc(m->n * sizeof(*m->max_end));
        if (!m->max_end)
            return -ENOMEM;
        uint64_t e = 0;
        for (size_t i = 0; i < m->n; i++) {
            if (m->r[i].off + m->r[i].len > e)
                e = m->r[i].off + m->r[i].len;
            m->max_end[i] = e;
        }
    }
    m->sealed = true;
    return 0;
}

const struct metarange *metamap_find(const struct metamap *m, uint64_t off, uint64_t len)
{
    size_t lo = 0, hi;
    uint64_t end;

    if (!m->sealed || !m->n || len == 0)
        return NULL;
    end = off + len < off ? UINT64_MAX : off + len;
    /* hi = number of ranges starting before `end` */
    hi = m->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (m->r[mid].off < end)
            lo = mid + 1;
        else
            hi = mid;
    }
    /* Among those, walk back while some range may still reach past `off`;
     * max_end is non-decreasing, so the walk stops at the first range of
     * the run that cannot.  Metadata that does not overlap itself takes
     * one step. */
    for (size_t i = lo; i-- > 0;) {
        if (m->max_end[i] <= off)
            break;
        if (m->r[i].off + m->r[i].len > off)
            return &m->r[i];
    }
    return NULL;
}

void metamap_free(struct metamap *m)
{
    free(m->r);
    free(m->max_end);
    memset(m, 0, sizeof(*m));
}
