/* VMDK writer: the descriptor -- its text, a new CID, the extent file
 * names beside the output, and the parent's CID and name for a backing
 * file (the options that fill it: write_params.c). */
#define _GNU_SOURCE
#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "formats/vmdk/vmdk.h"
#include "formats/vmdk/read_int.h"
#include "formats/vmdk/write.h"
#include "io/bfile.h"
#include "util/diag.h"

ssize_t vmdkw_descriptor(const struct vmdkw_params *p, uint32_t cid,
                         const char *extent_lines, char *buf, size_t cap)
{
    unsigned heads = strcmp(p->adapter, "ide") == 0 ? 16 : 255;
    /* qemu's geometry: whole cylinders of heads * 63 sectors, not capped */
    uint64_t cylinders = p->capacity / ((uint64_t)heads * 63);
    /* qemu's layout: the parent line takes the place of the blank line */
    char parent[4200] = "";
    if (p->backing)
        snprintf(parent, sizeof(parent), "parentFileNameHint=\"%s\"", p->backing);
    int n = snprintf(buf, cap,
                     "# Disk DescriptorFile\n"
                     "version=1\n"
                     "CID=%08x\n"
                     "parentCID=%08x\n"
                     "createType=\"%s\"\n"
                     "%s"
                     "\n"
                     "# Extent description\n"
                     "%s"
                     "\n"
                     "# The Disk Data Base\n"
                     "#DDB\n"
                     "\n"
                     "ddb.virtualHWVersion = \"%s\"\n"
                     "ddb.geometry.cylinders = \"%llu\"\n"
                     "ddb.geometry.heads = \"%u\"\n"
                     "ddb.geometry.sectors = \"63\"\n"
                     "ddb.adapterType = \"%s\"\n"
                     "ddb.toolsVersion = \"%s\"\n",
                     cid, p->parent_cid, vmdkw_subformat_name(p->sub), parent, extent_lines,
                     p->hwversion,
                     (unsigned long long)cylinders, heads, p->adapter, p->toolsversion);
    if (n < 0 || (size_t)n >= cap)
        return -ENOSPC;
    return n;
}

uint32_t vmdkw_new_cid(void)
{
    uint32_t cid = 0;

    for (int tries = 0; tries < 8; tries++) {
        if (getrandom(&cid, sizeof(cid), GRND_NONBLOCK) != (ssize_t)sizeof(cid)) {
            /* no entropy yet: time and pid are enough for an id */
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            cid = (uint32_t)ts.tv_nsec * 2654435761u ^ (uint32_t)ts.tv_sec ^
                  (uint32_t)getpid() << 16;
        }
        if (cid < 0xfffffffeu)
            break;
    }
    return cid < 0xfffffffeu ? cid : 1;
}

static bool fits_descriptor(const char *s)
{
    for (; *s; s++)
        if ((unsigned char)*s < 0x20 || *s == '"' || *s == 0x7f)
            return false;
    return true;
}

int vmdkw_extent_name(const struct bfile *f, char **out)
{
    char link[PATH_MAX], proc[64];
    const char *path = f->path;

    *out = NULL;
    if (f->kind == BFILE_STREAM) {
        path = "disk.vmdk";         /* a pipe has no name of its own */
    } else if (f->std_stream) {
        /* standard output redirected to a file: that file's name */
        snprintf(proc, sizeof(proc), "/proc/self/fd/%d", f->fd);
        ssize_t n = readlink(proc, link, sizeof(link) - 1);
        if (n > 0 && link[0] == '/') {
            link[n] = 0;
            path = link;
        } else {
            path = "disk.vmdk";
        }
    }
    char *copy = strdup(path);
    if (!copy)
        return -ENOMEM;
    *out = strdup(basename(copy));
    free(copy);
    if (!*out)
        return -ENOMEM;
    if (!fits_descriptor(*out)) {
        free(*out);
        *out = NULL;
        return -EINVAL;
    }
    return 0;
}

int vmdkw_parent_cid(const char *target, const char *backing, uint32_t *cid,
                     struct diag *d)
{
    struct bd_open_opts oo = { .allow_external = true, .no_backing = true };
    const char *slash = strrchr(target, '/');
    struct bd *b = NULL;
    char *path;
    int r;

    if (backing[0] == '/' || !slash)
        path = strdup(backing);
    else if (asprintf(&path, "%.*s/%s", (int)(slash - target), target, backing) < 0)
        path = NULL;
    if (!path)
        return diag_fail(d, -ENOMEM, target, -1, "out of memory");
    r = bd_open(&b, path, &oo, d);
    if (r < 0) {
        /* name the parent, as qemu-img does */
        char why[sizeof(d->what)];
        snprintf(why, sizeof(why), "%s", d->what);
        diag_clear(d);
        diag_fail(d, r, target, -1, "Could not open backing image '%s': %s", backing, why);
    }
    if (r == 0 && b->drv != &bd_vmdk)
        r = diag_fail(d, -EINVAL, target, -1, "backing_file must be a vmdk image ('%s' is "
                      "%s)", backing, b->drv->name);
    if (r == 0) {
        const struct vmdk *v = (const struct vmdk *)b;
        *cid = v->desc.has_cid ? v->desc.cid : 0;
    }
    bd_close(b);
    free(path);
    return r;
}

int vmdkw_keep_backing(struct bd *bd, struct vmdkw_params *p)
{
    if (!p->backing)
        return 0;
    if (!(bd->backing_name = strdup(p->backing)) || !(bd->backing_fmt = strdup("vmdk")))
        return -ENOMEM;
    p->backing = bd->backing_name;
    return 0;
}
