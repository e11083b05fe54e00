/* dd: the copy range and output size of `diskimg dd` (dd.h). */
#include "dd.h"

void dd_plan(const struct dd_params *p, uint64_t in_size, struct dd_plan *pl)
{
    const uint64_t max = INT64_MAX;
    uint64_t bs = p->bs ? p->bs : 512;
    uint64_t end = in_size > max ? max : in_size;

    if (p->has_count && p->count <= max / bs && p->count * bs < end)
        end = p->count * bs;
    pl->skip_past_end = p->has_skip && (p->skip > max / bs || p->skip * bs > end);
    pl->start = pl->skip_past_end || !p->has_skip ? 0 : p->skip * bs;
    pl->data_len = pl->skip_past_end ? 0 : end - pl->start;
    /* whole sectors, as every image qemu-img creates */
    pl->out_size = (pl->data_len + 511) / 512 * 512;
}
