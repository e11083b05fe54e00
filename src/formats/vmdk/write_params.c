/* VMDK writer: -o options into validated parameters, the descriptor text,
 * and qemu-img's help and "Formatting ..." wording for them. */
#define _GNU_SOURCE
#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <stdarg.h>
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
#include "util/kvopts.h"

const char vmdkw_options_help[] =
    "Supported vmdk options:\n"
    "  adapter_type=<str>     - Virtual adapter type, can be one of ide (default), "
    "lsilogic, buslogic or legacyESX\n"
    "  compat6=<bool (on/off)> - VMDK version 6 image\n"
    "  hwversion=<str>        - VMDK hardware version\n"
    "  size=<size>            - Virtual disk size\n"
    "  subformat=<str>        - VMDK flat extent format, can be one of {monolithicSparse "
    "(default) | monolithicFlat | twoGbMaxExtentSparse | twoGbMaxExtentFlat | "
    "streamOptimized} \n"
    "  toolsversion=<str>     - VMware guest tools version\n"
    "  zeroed_grain=<bool (on/off)> - Enable efficient zero writes using the "
    "zeroed-grain GTE feature\n"
    "\n"
    "streamOptimized output can also go to a pipe (-).\n";

static const char *const sub_names[] = {
    [VMDKW_MONOLITHIC_SPARSE] = "monolithicSparse",
    [VMDKW_MONOLITHIC_FLAT] = "monolithicFlat",
    [VMDKW_TWOGB_SPARSE] = "twoGbMaxExtentSparse",
    [VMDKW_TWOGB_FLAT] = "twoGbMaxExtentFlat",
    [VMDKW_STREAM_OPTIMIZED] = "streamOptimized",
};

const char *vmdkw_subformat_name(enum vmdkw_subformat s)
{
    return (unsigned)s < sizeof(sub_names) / sizeof(sub_names[0]) ? sub_names[s] : "?";
}

static int bad(char *err, size_t errlen, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int bad(char *err, size_t errlen, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    return code;
}

/* A value that goes into the descriptor between double quotes: printable,
 * no quote or backslash, short (qemu copies anything, and a quote or a
 * newline there breaks the descriptor). */
static int text_value(const char *key, const char *s, char *out, char *err, size_t errlen)
{
    size_t n = strlen(s);

    if (n == 0 || n > VMDKW_TEXT_MAX)
        return bad(err, errlen, -EINVAL, "%s must be 1 to %d characters long", key,
                   VMDKW_TEXT_MAX);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c < 0x20 || c > 0x7e || c == '"' || c == '\\')
            return bad(err, errlen, -EINVAL, "%s '%s' has a character that cannot go "
                       "into the descriptor (printable ASCII without quotes)", key, s);
    }
    memcpy(out, s, n + 1);
    return 0;
}

int vmdkw_parse_params(struct kvopts *kv, const struct bd_create_opts *co,
                       struct vmdkw_params *p, char *err, size_t errlen)
{
    const char *s;
    int r;

    memset(p, 0, sizeof(*p));
    p->size = co->size;
    strcpy(p->adapter, "ide");
    strcpy(p->toolsversion, "2147483647");
    strcpy(p->hwversion, "4");
    if (kv) {
        if ((s = kvopts_get(kv, "subformat"))) {
            size_t i, n = sizeof(sub_names) / sizeof(sub_names[0]);
            for (i = 0; i < n && strcmp(s, sub_names[i]) != 0; i++)
                ;
            if (i == n)
                return bad(err, errlen, -EINVAL, "invalid parameter value: %s (subformat "
                           "is one of monolithicSparse, monolithicFlat, twoGbMaxExtentSparse, "
                           "twoGbMaxExtentFlat, streamOptimized)", s);
            p->sub = (enum vmdkw_subformat)i;
        }
        if ((s = kvopts_get(kv, "adapter_type"))) {
            static const char *const ad[] = { "ide", "lsilogic", "buslogic", "legacyESX" };
            size_t i;
            for (i = 0; i < 4 && strcmp(s, ad[i]) != 0; i++)
                ;
            if (i == 4)
                return bad(err, errlen, -EINVAL, "invalid parameter value: %s (adapter_type "
                           "is one of ide, lsilogic, buslogic, legacyESX)", s);
            strcpy(p->adapter, ad[i]);
        }
        if ((r = kvopts_get_bool(kv, "compat6", &p->compat6, err, errlen)) < 0)
            return r;
        if ((r = kvopts_get_bool(kv, "zeroed_grain", &p->zeroed_grain, err, errlen)) < 0)
            return r;
        if ((s = kvopts_get(kv, "hwversion")) && strcmp(s, "undefined") != 0) {
            if (p->compat6)
                return bad(err, errlen, -EINVAL, "compat6 cannot be enabled with hwversion set");
            if ((r = text_value("hwversion", s, p->hwversion, err, errlen)) < 0)
                return r;
            p->has_hwversion = true;
        }
        if ((s = kvopts_get(kv, "toolsversion")) &&
            (r = text_value("toolsversion", s, p->toolsversion, err, errlen)) < 0)
            return r;
        if ((s = kvopts_get(kv, "backing_fmt")) && strcmp(s, "vmdk") != 0)
            return bad(err, errlen, -EINVAL, "backing_file must be a vmdk image");
        p->backing = kvopts_get(kv, "backing_file");
        uint64_t sz;
        if (kvopts_get_size(kv, "size", &sz, err, errlen) < 0)
            return -EINVAL;
    }
    if (p->compat6)
        strcpy(p->hwversion, "6");
    if (co->backing_file)
        p->backing = co->backing_file;
    p->parent_cid = 0xffffffffu;
    if (co->backing_fmt && strcmp(co->backing_fmt, "vmdk") != 0)
        return bad(err, errlen, -EINVAL, "backing_file must be a vmdk image");
    if (p->backing) {
        if (p->sub == VMDKW_MONOLITHIC_FLAT || p->sub == VMDKW_TWOGB_FLAT)
            return bad(err, errlen, -EINVAL, "Flat image can't have backing file");
        const char *c = p->backing;
        for (; *c; c++)
            if ((unsigned char)*c < 0x20 || *c == '"' || *c == 0x7f)
                break;
        if (*c || !*p->backing || strlen(p->backing) > 4096)
            return bad(err, errlen, -EINVAL, "backing file name '%s' cannot go into the "
                       "descriptor (empty, too long, or a quote or control character)",
                       p->backing);
    }
    p->capacity = p->size / VMDK_SECTOR + (p->size % VMDK_SECTOR != 0);
    if (p->capacity > VMDKW_MAX_CAPACITY)
        return bad(err, errlen, -EFBIG, "a vmdk image of %llu bytes is too large (at most "
                   "%llu TiB)", (unsigned long long)p->size,
                   (unsigned long long)(VMDKW_MAX_CAPACITY * VMDK_SECTOR >> 40));
    return 0;
}

void vmdkw_describe_create(const struct bd_create_opts *co, char *buf, size_t len)
{
    const struct kvopts *kv = co->o;
    const char *backing = co->backing_file, *backing_fmt = co->backing_fmt;
    /* qemu-img's order; compat6 and hwversion always, the rest when given */
    static const char *const keys[] = { "adapter_type", "backing_file", "backing_fmt",
                                         "compat6", "hwversion", "toolsversion",
                                         "subformat", "zeroed_grain" };
    size_t used = 0;
    int n0;

    if (!len)
        return;
    buf[0] = 0;
    if ((n0 = snprintf(buf, len, " size=%llu", (unsigned long long)co->size)) < 0)
        return;
    used = (size_t)n0;
    for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]) && used < len; i++) {
        const char *v = NULL;
        for (size_t j = 0; kv && j < kv->n; j++)   /* the last value wins; do not mark */
            if (!strcmp(kv->v[j].key, keys[i]))
                v = kv->v[j].val;
        bool is_bool = !strcmp(keys[i], "compat6") || !strcmp(keys[i], "zeroed_grain");
        if (v && is_bool)
            v = (!strcmp(v, "on") || !strcmp(v, "true") || !strcmp(v, "yes")) ? "on" : "off";
        if (!strcmp(keys[i], "backing_file") && backing)
            v = backing;
        if (!strcmp(keys[i], "backing_fmt") && backing_fmt)
            v = backing_fmt;
        if (!v && !strcmp(keys[i], "compat6"))
            v = "off";
        if (!v && !strcmp(keys[i], "hwversion"))
            v = "undefined";
        if (v) {
            int n = snprintf(buf + used, len - used, " %s=%s", keys[i], v);
            if (n < 0)
                break;
            used += (size_t)n;
        }
    }
}

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
