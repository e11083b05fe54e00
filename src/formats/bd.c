#define _GNU_SOURCE
#include "formats/bd.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "formats/registry.h"
#include "io/bfile.h"
#include "util/diag.h"

void bd_init(struct bd *bd, const struct bd_driver *drv, struct bfile *f,
             struct diag *d)
{
    bd->drv = drv;
    bd->file = f;
    bd->diag = d;
    bd->granule = 512;
    bd->filename = strdup(f && f->path ? f->path : "");
}

const struct bd_driver *bd_find_driver(const char *name)
{
    for (size_t i = 0; bd_drivers[i]; i++)
        if (strcmp(bd_drivers[i]->name, name) == 0)
            return bd_drivers[i];
    return NULL;
}

static bool name_claims_format(const char *path, const char **ext)
{
    static const char *const exts[] = { ".qcow2", ".qcow", ".vmdk", ".ova" };
    size_t n = strlen(path);

    for (size_t i = 0; i < sizeof(exts) / sizeof(exts[0]); i++) {
        size_t e = strlen(exts[i]);
        if (n > e && strcasecmp(path + n - e, exts[i]) == 0) {
            *ext = exts[i] + 1;
            return true;
        }
    }
    return false;
}

int bd_probe(struct bfile *f, const struct bd_driver **drv, struct diag *d)
{
    static uint8_t zeros[1];
    uint8_t *head = malloc(BFILE_STREAM_HEAD);
    size_t got = 0;
    int best = 0, r;
    const char *ext;

    *drv = NULL;
    if (!head)
        return diag_fail(d, -ENOMEM, f->path, -1, "out of memory");
    r = bfile_pread_upto(f, head, BFILE_STREAM_HEAD, 0, &got);
    if (r < 0) {
        free(head);
        return r;
    }
    for (size_t i = 0; bd_drivers[i]; i++) {
        const struct bd_driver *dr = bd_drivers[i];
        if (!dr->probe || dr == &bd_raw)
            continue;
        int score = dr->probe(got ? head : zeros, got, f->path);
        if (score > best) {
            best = score;
            *drv = dr;
        }
    }
    free(head);
    if (!*drv && name_claims_format(f->path, &ext))
        return diag_fail(d, -EINVAL, f->path, 0,
                         "named like a %s image but no known format signature was "
                         "found (damaged header?); pass -f raw to read it as raw", ext);
    return 0;
}

int bd_open_bfile(struct bd **out, struct bfile *f, const struct bd_open_opts *o,
                  struct bd *parent, struct diag *d)
{
    const struct bd_driver *drv = NULL;
    int r;

    *out = NULL;
    if (o->format) {
        drv = bd_find_driver(o->format);
        if (!drv) {
            r = diag_fail(d, -EINVAL, f->path, -1, "unknown format '%s'", o->format);
            bfile_close(f);
            return r;
        }
    } else {
        r = bd_probe(f, &drv, d);
        if (r < 0) {
            bfile_close(f);
            return r;
        }
        if (!drv)
            drv = &bd_raw;
    }
    if (!drv->open) {
        r = diag_fail(d, -ENOTSUP, f->path, -1, "reading %s images is not supported",
                      drv->name);
        bfile_close(f);
        return r;
    }
    r = drv->open(out, f, o, parent, d);
    if (r < 0)
        *out = NULL;
    return r;
}

int bd_open(struct bd **out, const char *path, const struct bd_open_opts *o,
            struct diag *d)
{
    struct bfile *f;
    int r = bfile_open(&f, path, o->writable ? BFILE_O_RDWR : 0, d);

    *out = NULL;
    if (r < 0)
        return r;
    return bd_open_bfile(out, f, o, NULL, d);
}

/* The folder of `path` (which must exist), fully resolved. */
static char *folder_of(const char *path)
{
    char *real = realpath(path, NULL);
    if (!real)
        return NULL;
    char *slash = strrchr(real, '/');
    if (slash == real)
        slash[1] = '\0';
    else if (slash)
        *slash = '\0';
    return real;
}

static bool is_protocol(const char *ref)
{
    /* "nbd:", "http://", "json:{...}" ... but not "C:\" style or plain names */
    const char *colon = strchr(ref, ':');
    const char *slash = strchr(ref, '/');
    if (!colon || (slash && slash < colon))
        return false;
    for (const char *p = ref; p < colon; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
              (*p >= '0' && *p <= '9') || *p == '+' || *p == '-'))
            return false;
    return colon > ref + 1;
}

/* `p` (absolute) with "//", "." and ".." resolved as text, in place;
 * ".." at the root stays at the root. */
static void lexical_normalize(char *p)
{
    char *out = p;          /* p[0] is '/' */
    const char *in = p;

    while (*in) {
        while (*in == '/')
            in++;
        if (!*in)
            break;
        const char *end = strchr(in, '/');
        size_t n = end ? (size_t)(end - in) : strlen(in);
        if (n == 1 && in[0] == '.') {
            /* skip */
        } else if (n == 2 && in[0] == '.' && in[1] == '.') {
            while (out > p && *--out != '/')
                ;
        } else {
            *out++ = '/';
            memmove(out, in, n);
            out += n;
        }
        in += n;
    }
    if (out == p)
        *out++ = '/';
    *out = '\0';
}

static bool inside_folder(const char *path, const char *folder)
{
    size_t fl = strlen(folder);
    return strncmp(path, folder, fl) == 0 &&
           (path[fl] == '/' || (fl == 1 && folder[0] == '/'));
}

int bd_resolve_ref(struct bd *from, const char *ref, char **path)
{
    const struct bd_open_opts *o = from->opts;
    const char *fpath = from->file ? from->file->path : from->filename;
    struct diag *d = from->diag;
    char *folder = NULL, *joined = NULL, *real = NULL;
    int r = 0;

    *path = NULL;
    if (!ref[0])
        return diag_fail(d, -EINVAL, fpath, -1, "empty file reference");
    if (o && o->no_external_files)
        return diag_fail(d, -EPERM, fpath, -1,
                         "refers to another file ('%s'), which is not allowed here", ref);
    if (is_protocol(ref))
        return diag_fail(d, -ENOTSUP, fpath, -1,
                         "refers to '%s': protocols and json: references are not supported",
                         ref);
    if (!from->file || (from->file->kind != BFILE_REGULAR &&
                        from->file->kind != BFILE_BLOCKDEV && from->file->kind != BFILE_SLICE))
        return diag_fail(d, -ENOTSUP, fpath, -1,
                         "refers to '%s', but references cannot be followed from a stream",
                         ref);
    /* for an OVA member, references resolve next to the OVA */
    const struct bfile *anchor = from->file;
    while (anchor->kind == BFILE_SLICE)
        anchor = anchor->base;
    folder = folder_of(anchor->path);
    if (!folder)
        return diag_errno(d, -errno, anchor->path, -1, "cannot resolve folder");
    if (ref[0] == '/')
        joined = strdup(ref);
    else if (asprintf(&joined, "%s/%s", folder, ref) < 0)
        joined = NULL;
    if (!joined) {
        r = diag_fail(d, -ENOMEM, fpath, -1, "out of memory");
        goto out;
    }
    if (!(o && o->allow_external)) {
        /* Outside as written: refused before the file system is asked, so
         * that an image cannot learn which host files exist from the
         * messages ("does not exist" / "outside"). */
        char *lex = strdup(joined);
        if (!lex) {
            r = diag_fail(d, -ENOMEM, fpath, -1, "out of memory");
            goto out;
        }
        lexical_normalize(lex);
        if (!inside_folder(lex, folder)) {
            r = diag_fail(d, -EPERM, fpath, -1,
                          "refers to '%s' (%s), outside the image's folder %s; "
                          "pass --allow-external to follow it", ref, lex, folder);
            free(lex);
            goto out;
        }
        free(lex);
    }
    real = realpath(joined, NULL);
    if (!real) {
        r = -errno;
        if (r == -ENOENT)
            r = diag_fail(d, r, fpath, -1, "refers to '%s', which does not exist (looked for %s)",
                          ref, joined);
        else
            r = diag_errno(d, r, joined, -1, "cannot resolve reference");
        goto out;
    }
    if (!(o && o->allow_external)) {
        if (!inside_folder(real, folder)) {
            r = diag_fail(d, -EPERM, fpath, -1,
                          "refers to '%s' (%s), outside the image's folder %s; "
                          "pass --allow-external to follow it", ref, real, folder);
            goto out;
        }
    }
    *path = joined;
    joined = NULL;
out:
    free(folder);
    free(joined);
    free(real);
    return r;
}

int bd_open_ref_file(struct bd *from, const char *ref, bool writable,
                     struct bfile **out)
{
    char *path;
    int r = bd_resolve_ref(from, ref, &path);

    if (r < 0)
        return r;
    r = bfile_open(out, path, writable ? BFILE_O_RDWR : 0, from->diag);
    free(path);
    return r;
}

static bool same_file(const struct bfile *a, const struct bfile *b)
{
    struct stat sa, sb;

    while (a->kind == BFILE_SLICE)
        a = a->base;
    while (b->kind == BFILE_SLICE)
        b = b->base;
    if (a == b)
        return true;
    if (a->fd < 0 || b->fd < 0)
        return false;
    if (fstat(a->fd, &sa) < 0 || fstat(b->fd, &sb) < 0)
        return false;
    return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

int bd_open_ref(struct bd *from, const char *ref, const char *format,
                struct bd **out)
{
    struct bd_open_opts o = *from->opts;
    struct bfile *f;
    int r;

    *out = NULL;
    if (from->depth + 1 >= BD_MAX_DEPTH)
        return diag_fail(from->diag, -ELOOP, from->filename, -1,
                         "backing chain is deeper than %d images", BD_MAX_DEPTH);
    r = bd_open_ref_file(from, ref, false, &f);
    if (r < 0)
        return r;
    for (struct bd *b = from; b; b = b->parent) {
        if (b->file && same_file(b->file, f)) {
            r = diag_fail(from->diag, -ELOOP, from->filename, -1,
                          "refers to '%s', which is already in its own chain (a loop)", ref);
            bfile_close(f);
            return r;
        }
    }
    o.format = format;
    o.writable = false;
    o.snapshot = NULL;
    o.disk_index = 0;
    return bd_open_bfile(out, f, &o, from, from->diag);
}

int bd_block_status(struct bd *bd, uint64_t off, uint64_t len,
                    struct bd_extent *e)
{
    int depth = 0;

    if (off >= bd->size)
        return diag_fail(bd->diag, -EINVAL, bd->filename, (int64_t)off,
                         "block status past the end of the image");
    if (len > bd->size - off)
        len = bd->size - off;
    for (;;) {
        memset(e, 0, sizeof(*e));
        e->host_offset = -1;
        int r = bd->drv->block_status(bd, off, len, e);
        if (r < 0)
            return r;
        if (e->len == 0 || e->len > len)
            return diag_fail(bd->diag, -EIO, bd->filename, (int64_t)off,
                             "internal error: block status returned a bad length");
        e->depth = depth;
        if (!e->host && e->host_offset >= 0)
            e->host = bd;
        if (e->flags & BD_ALLOCATED)
            return 0;
        /* not decided by this layer: ask the backing file, or read zeros
         * (a host offset the layer reports stays, as in qemu-img map: a
         * qcow2 extended-L2 subcluster that is unallocated in an allocated
         * cluster) */
        if (!bd->backing || off >= bd->backing->size) {
            e->flags = BD_ZERO;
            return 0;
        }
        len = e->len;
        if (len > bd->backing->size - off)
            len = bd->backing->size - off;
        bd = bd->backing;
        depth++;
    }
}

int bd_pread(struct bd *bd, void *buf, size_t len, uint64_t off)
{
    if (off > bd->size || len > bd->size - off)
        return diag_fail(bd->diag, -EINVAL, bd->filename, (int64_t)off,
                         "read of %zu bytes past the end of the image (%llu bytes)",
                         len, (unsigned long long)bd->size);
    if (len == 0)
        return 0;
    return bd->drv->pread(bd, buf, len, off);
}

int bd_pread_backing(struct bd *bd, void *buf, size_t len, uint64_t off)
{
    struct bd *b = bd->backing;
    size_t n = 0;

    if (b && off < b->size) {
        n = len;
        if (n > b->size - off)
            n = (size_t)(b->size - off);
        int r = bd_pread(b, buf, n, off);
        if (r < 0)
            return r;
    }
    memset((char *)buf + n, 0, len - n);
    return 0;
}

void bd_close(struct bd *bd)
{
    if (bd)
        bd->drv->close(bd);
}

/* Free the base fields; drivers call this from close(). */
void bd_release(struct bd *bd)
{
    if (!bd)
        return;
    bd_close(bd->backing);
    bd->backing = NULL;
    bfile_close(bd->file);
    bd->file = NULL;
    free(bd->filename);
    free(bd->backing_name);
    free(bd->backing_fmt);
    bd->filename = bd->backing_name = bd->backing_fmt = NULL;
}
