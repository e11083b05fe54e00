/* vmdk: the VMDK reader driver.
 *
 * An image is either a sparse extent file that is its own (only) extent
 * (monolithicSparse, streamOptimized, with an embedded descriptor; or a bare
 * COWD file), or a descriptor file whose extent lines name FLAT/VMFS, SPARSE,
 * VMFSSPARSE (COWD) and ZERO extents.  A parentFileNameHint opens the parent
 * disk as the backing file, checking its CID against our parentCID.
 *
 * From a pipe only a streamOptimized file can be read (read_stream.c).
 */
#define _GNU_SOURCE
#include "formats/vmdk/vmdk.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "formats/vmdk/read_int.h"
#include "formats/vmdk/write.h"
#include "io/bfile.h"
#include "util/diag.h"
#include "util/endian.h"
#include "util/jval.h"

#define SESPARSE_MAGIC 0x00000000cafebabeull   /* seSparse constant header */

static struct vmdk *to_vmdk(struct bd *bd)
{
    return (struct vmdk *)bd;
}

static int vmdk_probe(const uint8_t *head, size_t len, const char *filename)
{
    (void)filename;
    if (len >= 4 && (le32_get(head) == VMDK4_MAGIC || le32_get(head) == COWD_MAGIC))
        return 100;
    if (len >= 8 && le64_get(head) == SESPARSE_MAGIC)
        return 100;
    if (vmdk_desc_probe(head, len))
        return 90;
    return 0;
}

/* --- opening ------------------------------------------------------------------- */

static struct vmdk_extent *add_extent(struct vmdk *v)
{
    if ((v->n_ext & (v->n_ext - 1)) == 0) {     /* grow at powers of two */
        size_t cap = v->n_ext ? v->n_ext * 2 : 1;
        struct vmdk_extent *n = realloc(v->ext, cap * sizeof(*n));
        if (!n)
            return NULL;
        v->ext = n;
    }
    memset(&v->ext[v->n_ext], 0, sizeof(*v->ext));
    return &v->ext[v->n_ext++];
}

/* The name qemu-img shows for an extent: next to the descriptor. */
static char *display_name(struct vmdk *v, const char *ref)
{
    const char *slash = strrchr(v->bd.filename, '/');
    char *s;
    if (ref[0] == '/' || !slash)
        return strdup(ref);
    if (asprintf(&s, "%.*s/%s", (int)(slash - v->bd.filename), v->bd.filename, ref) < 0)
        return NULL;
    return s;
}

/* The file of an extent, opened once however many extents name it. */
static int extent_file(struct vmdk *v, const char *ref, struct bfile **out)
{
    const struct vmdk_desc *desc = &v->desc;

    /* v->ext[i] comes from desc->ext[i]; the last one is being opened */
    for (size_t i = 0; i + 1 < v->n_ext; i++) {
        if (v->ext[i].file && desc->ext[i].filename &&
            strcmp(desc->ext[i].filename, ref) == 0) {
            *out = v->ext[i].file;
            return 0;
        }
    }
    if ((v->n_files & (v->n_files - 1)) == 0) {
        size_t cap = v->n_files ? v->n_files * 2 : 1;
        struct bfile **n = realloc(v->files, cap * sizeof(*n));
        if (!n)
            return diag_fail(v->bd.diag, -ENOMEM, v->bd.filename, -1, "out of memory");
        v->files = n;
    }
    /* (writable: rebase writes grains into the extents) */
    int r = bd_open_ref_file(&v->bd, ref, v->bd.opts.writable, out);
    if (r < 0)
        return r;
    v->files[v->n_files++] = *out;
    return 0;
}

static int open_extent(struct vmdk *v, const struct vmdk_desc_extent *de, uint64_t start)
{
    struct diag *d = v->bd.diag;
    const char *fn = v->bd.filename;
    struct vmdk_extent *x = add_extent(v);
    int r;

    if (!x)
        return diag_fail(d, -ENOMEM, fn, -1, "out of memory");
    x->type = de->type;
    x->start = start;
    x->len = de->sectors * VMDK_SECTOR;
    switch (de->type) {
    case VMDK_EXT_ZERO:
        return 0;
    case VMDK_EXT_SESPARSE:
        return diag_fail(d, -ENOTSUP, fn, -1,
                         "descriptor line %u: seSparse extents (ESXi space-efficient "
                         "snapshots) are not supported", de->line);
    case VMDK_EXT_VMFSRDM:
    case VMDK_EXT_VMFSRAW:
        return diag_fail(d, -ENOTSUP, fn, -1,
                         "descriptor line %u: %s extents (raw device maps) are not supported",
                         de->line, vmdk_ext_type_name(de->type));
    default:
        break;
    }
    x->name = display_name(v, de->filename);
    if (!x->name)
        return diag_fail(d, -ENOMEM, fn, -1, "out of memory");
    r = extent_file(v, de->filename, &x->file);
    if (r < 0)
        return r;
    if (x->file->kind == BFILE_SLICE) {
        /* a member of an archive: named as such ("x.ova[disk-flat.vmdk]"),
         * not as a file beside the descriptor that does not exist */
        free(x->name);
        if (!(x->name = strdup(x->file->path)))
            return diag_fail(d, -ENOMEM, fn, -1, "out of memory");
    }
    if (de->type == VMDK_EXT_FLAT || de->type == VMDK_EXT_VMFS) {
        x->flat_off = de->offset * VMDK_SECTOR;
        uint64_t size = x->file->size;
        if (size != UINT64_MAX && (x->flat_off > size || x->len > size - x->flat_off))
            return diag_fail(d, -EINVAL, x->name, (int64_t)size,
                             "flat extent needs %llu bytes at offset %llu, but the file "
                             "has only %llu bytes", (unsigned long long)x->len,
                             (unsigned long long)x->flat_off, (unsigned long long)size);
        return 0;
    }
    /* SPARSE or VMFSSPARSE: the file's magic decides which */
    uint8_t magic[8];
    r = bfile_pread(x->file, magic, sizeof(magic), 0);
    if (r < 0)
        return r;
    if (le32_get(magic) == COWD_MAGIC) {
        x->type = VMDK_EXT_VMFSSPARSE;
        return vmdk_cowd_open(v, x, de->sectors);
    }
    if (le64_get(magic) == SESPARSE_MAGIC)
        return diag_fail(d, -ENOTSUP, x->name, 0,
                         "seSparse extents (ESXi space-efficient snapshots) are not supported");
    x->type = VMDK_EXT_SPARSE;
    return vmdk_sparse_open(v, x, de->sectors, NULL, 0);
}

static int open_descriptor_file(struct vmdk *v)
{
    struct bfile *f = v->bd.file;
    struct diag *d = v->bd.diag;
    size_t got;
    char *text;
    int r;

    if (f->size != UINT64_MAX && f->size > VMDK_MAX_DESC_BYTES)
        return diag_fail(d, -EINVAL, f->path, -1,
                         "descriptor file of %llu bytes is too large (max %u)",
                         (unsigned long long)f->size, VMDK_MAX_DESC_BYTES);
    text = malloc(VMDK_MAX_DESC_BYTES + 1);
    if (!text)
        return diag_fail(d, -ENOMEM, f->path, -1, "out of memory");
    r = bfile_pread_upto(f, text, VMDK_MAX_DESC_BYTES + 1, 0, &got);
    if (r == 0 && got > VMDK_MAX_DESC_BYTES)
        r = diag_fail(d, -EINVAL, f->path, -1, "descriptor file is too large (max %u bytes)",
                      VMDK_MAX_DESC_BYTES);
    if (r == 0)
        r = vmdk_desc_parse(text, got, &v->desc, d, f->path, 0);
    free(text);
    if (r < 0)
        return r;
    if (v->desc.n_ext == 0)
        return diag_fail(d, -EINVAL, f->path, -1, "descriptor lists no extents");
    /* (a member of an archive read from a pipe finds its extents further
     * on in the archive: the archive says if it cannot) */
    if (v->streaming && f->kind != BFILE_SLICE)
        return diag_fail(d, -ESPIPE, f->path, -1,
                         "a VMDK descriptor refers to extent files, which cannot be "
                         "followed from a pipe; give the descriptor's path instead");
    v->streaming = false;   /* the extents are read as files (forward only, on a pipe) */
    uint64_t start = 0;
    for (size_t i = 0; i < v->desc.n_ext; i++) {
        r = open_extent(v, &v->desc.ext[i], start);
        if (r < 0)
            return r;
        start += v->desc.ext[i].sectors * VMDK_SECTOR;
    }
    return 0;
}

/* A sparse (or COWD) file that is the whole disk. */
static int open_monolithic(struct vmdk *v, bool cowd, const uint8_t *head, size_t head_len)
{
    struct diag *d = v->bd.diag;
    struct vmdk_extent *x = add_extent(v);
    int r;

    if (!x)
        return diag_fail(d, -ENOMEM, v->bd.filename, -1, "out of memory");
    v->monolithic = true;
    x->type = cowd ? VMDK_EXT_VMFSSPARSE : VMDK_EXT_SPARSE;
    x->file = v->bd.file;
    x->name = strdup(v->bd.filename);
    if (!x->name)
        return diag_fail(d, -ENOMEM, v->bd.filename, -1, "out of memory");
    if (cowd) {
        if (v->streaming)
            return diag_fail(d, -ESPIPE, x->name, -1,
                             "a COWD (vmfsSparse) extent needs a seekable input");
        return vmdk_cowd_open(v, x, UINT64_MAX);
    }
    r = vmdk_sparse_open(v, x, UINT64_MAX, head, head_len);
    if (r < 0)
        return r;
    if (x->hdr.desc_offset) {
        uint64_t off = x->hdr.desc_offset * VMDK_SECTOR;
        size_t bytes = (size_t)(x->hdr.desc_sectors * VMDK_SECTOR);
        if (x->file_size != UINT64_MAX && (off >= x->file_size || bytes > x->file_size - off))
            return diag_fail(d, -EINVAL, x->name, 28,
                             "embedded descriptor at offset %llu (%zu bytes) runs past the "
                             "end of the file", (unsigned long long)off, bytes);
        char *text = malloc(bytes);
        if (!text)
            return diag_fail(d, -ENOMEM, x->name, -1, "out of memory");
        r = bfile_pread(x->file, text, bytes, off);
        if (r == 0)
            r = vmdk_desc_parse(text, bytes, &v->desc, d, x->name, (int64_t)off);
        free(text);
        if (r < 0)
            return r;
    }
    if (v->streaming)
        return vmdk_stream_open(v, x);
    return 0;
}

/* The file name of a Windows path ("C:\\dir\\x.vmdk", "..\\x.vmdk"), or NULL
 * if `p` does not look like one. */
static const char *windows_basename(const char *p)
{
    const char *bs = strrchr(p, '\\');
    bool drive = ((p[0] >= 'A' && p[0] <= 'Z') || (p[0] >= 'a' && p[0] <= 'z')) && p[1] == ':';
    if (!bs && !drive)
        return NULL;
    const char *b = bs ? bs + 1 : p + 2;
    const char *slash = strrchr(b, '/');
    if (slash)
        b = slash + 1;
    return *b && strcmp(b, ".") && strcmp(b, "..") ? b : NULL;
}

static int open_parent(struct vmdk *v)
{
    struct vmdk_desc *desc = &v->desc;
    struct bd *bd = &v->bd;
    int r;

    if (!desc->parent_hint)
        return 0;
    bd->backing_name = strdup(desc->parent_hint);
    if (!bd->backing_name)
        return diag_fail(bd->diag, -ENOMEM, bd->filename, -1, "out of memory");
    if (bd->opts.no_backing) {
        bd->backing_missing = true;
        return 0;
    }
    r = bd_open_ref(bd, desc->parent_hint, NULL, &bd->backing);
    const char *base = windows_basename(desc->parent_hint);
    if (r == -ENOENT && base) {
        /* VMware on Windows writes absolute paths ("C:\VMs\base.vmdk");
         * the parent usually travels next to the delta */
        diag_clear(bd->diag);
        diag_warn(bd->diag, bd->filename, -1, "parent '%s' not found; using '%s' next to "
                  "the image", desc->parent_hint, base);
        r = bd_open_ref(bd, base, NULL, &bd->backing);
    }
    if (r < 0)
        return r;
    if (bd->backing->drv == &bd_vmdk && desc->has_parent_cid) {
        struct vmdk *p = to_vmdk(bd->backing);
        uint32_t pcid = p->desc.has_cid ? p->desc.cid : 0;
        if (pcid != desc->parent_cid && !bd->opts.ignore_parent_cid)
            return diag_fail(bd->diag, -EINVAL, bd->filename, -1,
                             "parent '%s' has CID %08x, but this image expects parentCID "
                             "%08x (the parent was changed after this delta was made); "
                             "override the check to read it anyway",
                             desc->parent_hint, pcid, desc->parent_cid);
    }
    return 0;
}

static void vmdk_close(struct bd *bd)
{
    struct vmdk *v = to_vmdk(bd);

    vmdk_stream_free(v);
    for (size_t i = 0; i < v->n_ext; i++) {
        vmdk_sparse_free(&v->ext[i]);
        free(v->ext[i].name);
    }
    free(v->ext);
    for (size_t i = 0; i < v->n_files; i++)
        bfile_close(v->files[i]);
    free(v->files);
    vmdk_caches_free(v);
    vmdk_desc_free(&v->desc);
    pthread_mutex_destroy(&v->lock);
    bd_release(bd);
    free(v);
}

static int do_open(struct vmdk *v)
{
    struct bfile *f = v->bd.file;
    uint8_t head[VMDK4_HEADER_SIZE] = { 0 };
    size_t got;
    int r;

    v->streaming = vmdk_file_is_stream(f);
    r = bfile_pread_upto(f, head, sizeof(head), 0, &got);
    if (r < 0)
        return r;
    if (got >= 4 && le32_get(head) == VMDK4_MAGIC)
        r = open_monolithic(v, false, head, got);
    else if (got >= 4 && le32_get(head) == COWD_MAGIC)
        r = open_monolithic(v, true, NULL, 0);
    else if (got >= 8 && le64_get(head) == SESPARSE_MAGIC)
        r = diag_fail(v->bd.diag, -ENOTSUP, f->path, 0,
                      "seSparse extents (ESXi space-efficient snapshots) are not supported");
    else
        r = open_descriptor_file(v);
    if (r < 0)
        return r;
    uint64_t size = 0;
    for (size_t i = 0; i < v->n_ext; i++) {
        size += v->ext[i].len;
        if (v->ext[i].grain_bytes && v->bd.granule == 512)
            v->bd.granule = v->ext[i].grain_bytes;
        if (v->ext[i].hdr.dirty)
            v->bd.dirty = true;
    }
    v->bd.size = size;
    return open_parent(v);
}

static int vmdk_open(struct bd **out, struct bfile *f, const struct bd_open_opts *o,
                     struct bd *parent, struct diag *d)
{
    struct vmdk *v = calloc(1, sizeof(*v));
    int r;

    *out = NULL;
    if (!v) {
        r = diag_fail(d, -ENOMEM, f->path, -1, "out of memory");
        bfile_close(f);
        return r;
    }
    bd_init(&v->bd, &bd_vmdk, f, d);
    pthread_mutex_init(&v->lock, NULL);
    v->bd.opts = *o;
    v->bd.parent = parent;
    v->bd.depth = parent ? parent->depth + 1 : 0;
    if (!v->bd.filename) {
        vmdk_close(&v->bd);
        return diag_fail(d, -ENOMEM, f->path, -1, "out of memory");
    }
    r = do_open(v);
    if (r < 0) {
        vmdk_close(&v->bd);
        return r;
    }
    *out = &v->bd;
    return 0;
}

/* --- reading --------------------------------------------------------------------- */

struct vmdk_extent *vmdk_find_extent(const struct vmdk *v, uint64_t off)
{
    size_t lo = 0, hi = v->n_ext;
    while (hi - lo > 1) {
        size_t mid = lo + (hi - lo) / 2;
        if (v->ext[mid].start <= off)
            lo = mid;
        else
            hi = mid;
    }
    /* skip empty extents that share the start */
    while (lo + 1 < v->n_ext && v->ext[lo].start + v->ext[lo].len <= off)
        lo++;
    return &v->ext[lo];
}

/* A flat extent's holes (SEEK_HOLE) read as zeros without being read. */
static void flat_block_status(const struct vmdk_extent *x, uint64_t host, uint64_t n,
                              struct bd_extent *e)
{
    e->flags = BD_ALLOCATED | BD_DATA;
    e->len = n;
    if (x->file->kind != BFILE_REGULAR)
        return;
    off_t data = lseek(x->file->fd, (off_t)host, SEEK_DATA);
    if (data < 0) {
        if (errno == ENXIO)     /* only a hole from here to the end of the file */
            e->flags = BD_ALLOCATED | BD_ZERO;
        return;
    }
    if ((uint64_t)data > host) {
        uint64_t hole = (uint64_t)data - host;
        e->flags = BD_ALLOCATED | BD_ZERO;
        e->len = hole < n ? hole : n;
        return;
    }
    off_t hole = lseek(x->file->fd, (off_t)host, SEEK_HOLE);
    if (hole >= 0 && (uint64_t)hole > host && (uint64_t)hole - host < n)
        e->len = (uint64_t)hole - host;
}

static int vmdk_block_status(struct bd *bd, uint64_t off, uint64_t len, struct bd_extent *e)
{
    struct vmdk *v = to_vmdk(bd);

    if (v->streaming)
        return vmdk_stream_block_status(v, off, len, e);
    struct vmdk_extent *x = vmdk_find_extent(v, off);
    uint64_t n = x->start + x->len - off;
    if (n > len)
        n = len;
    switch (x->type) {
    case VMDK_EXT_ZERO:
        e->flags = BD_ALLOCATED | BD_ZERO;
        e->len = n;
        return 0;
    case VMDK_EXT_FLAT:
    case VMDK_EXT_VMFS:
        flat_block_status(x, x->flat_off + (off - x->start), n, e);
        /* as qemu-img map: every range of a flat extent is data at its
         * offset in the extent file; the file's holes are data reading as
         * zeros */
        e->flags |= BD_DATA;
        e->host_offset = (int64_t)(x->flat_off + (off - x->start));
        e->host = bd;
        if (x->file != bd->file)
            e->host_file = x->file;
        return 0;
    default:
        return vmdk_sparse_block_status(v, x, off, n, e);
    }
}

static int vmdk_pread(struct bd *bd, void *buf, size_t len, uint64_t off)
{
    struct vmdk *v = to_vmdk(bd);
    uint8_t *p = buf;

    if (v->streaming)
        return vmdk_stream_pread(v, buf, len, off);
    while (len) {
        struct vmdk_extent *x = vmdk_find_extent(v, off);
        uint64_t left = x->start + x->len - off;
        size_t n = left < len ? (size_t)left : len;
        int r = 0;
        switch (x->type) {
        case VMDK_EXT_ZERO:
            memset(p, 0, n);
            break;
        case VMDK_EXT_FLAT:
        case VMDK_EXT_VMFS:
            r = bfile_pread(x->file, p, n, x->flat_off + (off - x->start));
            break;
        default:
            r = vmdk_sparse_pread(v, x, p, n, off);
            break;
        }
        if (r < 0)
            return r;
        p += n;
        off += n;
        len -= n;
    }
    return 0;
}

/* --- check ------------------------------------------------------------------------- */

/* What qemu-img check looks at, and more: every grain a table maps must lie
 * inside its file and clear of the extent's metadata.  Nothing is repaired
 * (as qemu: the repair flags are ignored). */
static int vmdk_check(struct bd *bd, struct bd_check_result *res, unsigned fix)
{
    struct vmdk *v = to_vmdk(bd);

    (void)fix;
    if (v->streaming)
        return diag_fail(bd->diag, -ESPIPE, bd->filename, -1,
                         "checking a VMDK needs a seekable input");
    for (size_t i = 0; i < v->n_ext; i++) {
        struct vmdk_extent *x = &v->ext[i];
        if (x->type != VMDK_EXT_SPARSE && x->type != VMDK_EXT_VMFSSPARSE)
            continue;
        int r = vmdk_sparse_check(v, x, res);
        if (r < 0)
            return r;
    }
    return 0;
}

/* --- info -------------------------------------------------------------------------- */

static int vmdk_info(struct bd *bd, struct jval *obj)
{
    struct vmdk *v = to_vmdk(bd);
    struct jval *fs = jv_object(), *data = jv_object(), *exts = jv_array();

    if (v->n_ext && v->ext[0].grain_bytes)
        jv_set(obj, "cluster-size", jv_uint(v->ext[0].grain_bytes));
    jv_set(fs, "type", jv_str("vmdk"));
    jv_set(data, "cid", jv_uint(v->desc.has_cid ? v->desc.cid : 0));
    jv_set(data, "parent-cid", jv_uint(v->desc.has_parent_cid ? v->desc.parent_cid : 0xffffffffu));
    if (v->desc.create_type)
        jv_set(data, "create-type", jv_str(v->desc.create_type));
    for (size_t i = 0; i < v->n_ext; i++) {
        const struct vmdk_extent *x = &v->ext[i];
        struct jval *o = jv_object();
        if (x->compressed)
            jv_set(o, "compressed", jv_bool(true));
        jv_set(o, "virtual-size", jv_uint(x->len));
        if (x->name)
            jv_set(o, "filename", jv_str(x->name));
        if (x->grain_bytes)
            jv_set(o, "cluster-size", jv_uint(x->grain_bytes));
        jv_set(o, "format", jv_str(v->monolithic ? "" : vmdk_ext_type_name(x->type)));
        jv_push(exts, o);
    }
    jv_set(data, "extents", exts);
    jv_set(fs, "data", data);
    jv_set(obj, "format-specific", fs);
    jv_set(obj, "dirty-flag", jv_bool(bd->dirty));
    /* like qemu-img: the descriptor and every extent file */
    uint64_t actual = bfile_allocated(bd->file);
    for (size_t i = 0; i < v->n_files; i++)
        actual += bfile_allocated(v->files[i]);
    jv_set(obj, "actual-size", jv_uint(actual));
    return 0;
}

const struct bd_driver bd_vmdk = {
    .name = "vmdk",
    .caps = BD_CAP_STREAM_OUT | BD_CAP_BACKING,   /* to a pipe: streamOptimized only */
    .probe = vmdk_probe,
    .open = vmdk_open,
    .block_status = vmdk_block_status,
    .pread = vmdk_pread,
    .close = vmdk_close,
    .info = vmdk_info,
    .check = vmdk_check,
    /* writing: a new image is written by formats/vmdk/write*.c */
    .create_options_help = vmdkw_options_help,
    .describe_create = vmdkw_describe_create,
    .create = vmdkw_create,
    .compress = vmdkw_compress,
    /* rebase: the descriptor names another parent (set_backing.c) */
    .set_backing = vmdk_set_backing,
    .check_backing = vmdk_check_backing,
};
