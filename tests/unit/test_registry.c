/* Every driver table in the registry against the contract of its role
 * (src/formats/registry.h, bd.h): a format can be probed, opened and read;
 * a writer can take writes and commit or abort; capability bits sit on
 * the role they belong to and come with the operations they imply. */
#include <stdbool.h>
#include <string.h>

#include "check.h"
#include "formats/registry.h"

/* OFFLOAD_LATE is the writer's, and may stand on a format whose writer is
 * the format's own driver (raw: the file is the image) */
#define FORMAT_CAPS (BD_CAP_STREAM_OUT | BD_CAP_STREAM_TWO_PASS | BD_CAP_UNKNOWN_SIZE | \
                     BD_CAP_INPLACE | BD_CAP_BACKING | BD_CAP_OFFLOAD_LATE)
#define WRITER_CAPS (BD_CAP_ALL_COMPRESSED | BD_CAP_IN_ORDER | BD_CAP_OFFLOAD_LATE)

static bool is_format(const struct bd_driver *d)
{
    for (size_t i = 0; bd_drivers[i]; i++)
        if (bd_drivers[i] == d)
            return true;
    return false;
}

static const struct bd_driver *format_named(const char *name)
{
    for (size_t i = 0; bd_drivers[i]; i++)
        if (!strcmp(bd_drivers[i]->name, name))
            return bd_drivers[i];
    return NULL;
}

int main(void)
{
    size_t nformats = 0, nwriters = 0;

    for (size_t i = 0; bd_drivers[i]; i++, nformats++) {
        const struct bd_driver *d = bd_drivers[i];
        CHECK(d->name && d->name[0]);
        CHECK(d->probe && d->open && d->block_status && d->pread && d->close, "%s", d->name);
        CHECK((d->caps & ~FORMAT_CAPS) == 0, "%s: writer bits on a format", d->name);
        for (size_t j = 0; j < i; j++)
            CHECK(strcmp(bd_drivers[j]->name, d->name) != 0, "%s registered twice", d->name);
        if (!d->create) {
            /* read-only: nothing about output may be claimed */
            CHECK(d->caps == 0 && !d->create_options_help && !d->describe_create, "%s", d->name);
            continue;
        }
        CHECK(d->create_options_help, "%s: create without -o help", d->name);
        CHECK(!(d->caps & BD_CAP_STREAM_TWO_PASS) || (d->caps & BD_CAP_STREAM_OUT), "%s",
              d->name);
    }
    for (size_t i = 0; bd_writers[i]; i++, nwriters++) {
        const struct bd_driver *w = bd_writers[i];
        const struct bd_driver *f = format_named(w->name);
        CHECK(f && f->create, "writer '%s' has no format that creates it", w->name);
        CHECK(w->pwrite && w->write_zeroes && w->finish && w->abort && w->close, "%s #%zu",
              w->name, i);
        CHECK(!(w->caps & BD_CAP_ALL_COMPRESSED) || (w->pwrite_compressed &&
              (w->compress || (f && f->compress))), "%s #%zu: compressed writes without a "
              "compressor", w->name, i);
        if (!is_format(w)) {
            /* a table of its own: never probed or opened, only handed out */
            CHECK(!w->probe && !w->open, "%s #%zu", w->name, i);
            CHECK((w->caps & ~WRITER_CAPS) == 0, "%s #%zu: format bits on a writer", w->name, i);
        }
        for (size_t j = 0; j < i; j++)
            CHECK(bd_writers[j] != w, "%s listed twice", w->name);
    }
    CHECK(nformats >= 4 && nwriters >= 7);
    return failures != 0;
}
