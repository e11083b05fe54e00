#include "util/hugebuf.h"

#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>

#define HUGE_PAGE ((size_t)2 << 20)

void *hugebuf_alloc(size_t count, size_t len, size_t *stride)
{
    void *p;

    if (count == 0 || len == 0 || len > SIZE_MAX - 4095)
        return NULL;
    *stride = (len + 4095) & ~(size_t)4095;
    if (*stride > (SIZE_MAX - HUGE_PAGE) / count)
        return NULL;
    len = (*stride * count + HUGE_PAGE - 1) & ~(HUGE_PAGE - 1);
    if (posix_memalign(&p, HUGE_PAGE, len) != 0)
        return NULL;
    /* advice only: without THP the buffer is ordinary memory */
    (void)madvise(p, len, MADV_HUGEPAGE);
    return p;
}
