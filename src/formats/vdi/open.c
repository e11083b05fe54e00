/* VDI: probe, open (header, block map, metadata map, the parent of a
 * differencing image), info, close, and the driver table.
 *
 * A differencing image names its parent only by the parent's creation
 * UUID; the parent is looked for among the *.vdi files in the image's
 * folder (each opened beneath it through bd_open_ref_file, at most 4096
 * names looked at), never elsewhere.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "formats/vdi/vdi.h"
#include "formats/vdi/vdi_int.h"
#include "io/bfile.h"
#include "util/diag.h"
#include "util/endian.h"
#include "util/jval.h"

#define MAX_SCAN 4096

static int vdi_probe(const uint8_t *head, size_t len, const char *filename)
{
    (void)filename;
    if (len >= VDI_PREHEADER && le32_get(head + 64) == VDI_SIGNATURE)
        return 100;
    return 0;
}

static struct diag *D(struct vdi *v)
{
    return v->bd.diag;
}

static void uuid_text(const uint8_t u[16], char out[37])
{
    /* RTUUID: the first three fields little-endian */
    snprintf(out, 37, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
             u[3], u[2], u[1], u[0], u[5], u[4], u[7], u[6], u[8], u[9], u[10], u[11],
             u[12], u[13], u[14], u[15]);
}

static int add_meta(struct vdi *v, uint64_t off, uint64_t len, const char *what)
{
    int r = metamap_add(&v->meta, off, len, what);
    if (r < 0)
        return diag_fail(D(v), r, v->bd.filename, (int64_t)off, "%s: out of memory", what);
    return 0;
}

/* Is `name` a VDI whose creation UUID is `uuid`? */
static bool is_parent(struct vdi *v, const char *name, const uint8_t uuid[16])
{
    struct bfile *f;
    uint8_t b[VDI_HEADER_AREA];
    struct vdi_header h;
    size_t got = 0;
    char err[160];
    bool yes = false;

    if (bd_open_ref_file(&v->bd, name, false, &f) < 0) {
        diag_clear(D(v));
        return false;
    }
    memset(b, 0, sizeof(b));
    if (bfile_pread_upto(f, b, sizeof(b), 0, &got) == 0 &&
        vdi_header_decode(b, got, &h, err, sizeof(err)) == 0)
        yes = memcmp(h.uuid_create, uuid, 16) == 0;
    bfile_close(f);
    diag_clear(D(v));
    return yes;
}

static int open_parent(struct vdi *v)
{
    struct bd *bd = &v->bd;
    char want[37];
    int dfd, r;

    uuid_text(v->h.uuid_link, want);
    if (bd->opts.no_backing) {
        bd->backing_missing = true;
        return 0;
    }
    if (bd->file->kind != BFILE_REGULAR && bd->file->kind != BFILE_BLOCKDEV)
        return diag_fail(D(v), -ENOTSUP, bd->filename, -1, "differencing VDI: its parent "
                         "(UUID %s) can only be looked for beside a file on the host", want);
    if (bd->opts.no_external_files)
        return diag_fail(D(v), -EPERM, bd->filename, -1, "differencing VDI: references to "
                         "other files are not allowed here");
    if (bd->file->dir_fd >= 0) {
        dfd = openat(bd->file->dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    } else {
        char *copy = strdup(bd->file->path);
        if (!copy)
            return diag_fail(D(v), -ENOMEM, bd->filename, -1, "out of memory");
        dfd = open(dirname(copy), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        free(copy);
    }
    DIR *dir = dfd >= 0 ? fdopendir(dfd) : NULL;
    if (!dir) {
        r = -errno;
        if (dfd >= 0)
            close(dfd);
        return diag_errno(D(v), r, bd->filename, -1, "cannot list the image's folder");
    }
    char *found = NULL;
    struct dirent *de;
    for (int n = 0; n < MAX_SCAN && (de = readdir(dir)); n++) {
        size_t len = strlen(de->d_name);
        if (len < 5 || strcasecmp(de->d_name + len - 4, ".vdi") != 0 || de->d_name[0] == '.')
            continue;
        if (is_parent(v, de->d_name, v->h.uuid_link)) {
            found = strdup(de->d_name);
            if (!found) {
                closedir(dir);
                return diag_fail(D(v), -ENOMEM, bd->filename, -1, "out of memory");
            }
            break;
        }
    }
    closedir(dir);
    if (!found)
        return diag_fail(D(v), -ENOENT, bd->filename, -1, "differencing VDI: no parent "
                         "with UUID %s among the .vdi files beside it", want);
    bd->backing_name = found;
    if (!(bd->backing_fmt = strdup("vdi")))
        return diag_fail(D(v), -ENOMEM, bd->filename, -1, "out of memory");
    return bd_open_ref(bd, found, "vdi", &bd->backing);
}

static int do_open(struct vdi *v)
{
    struct bfile *f = v->bd.file;
    char err[200];
    size_t got = 0;
    int r;

    if (f->kind == BFILE_STREAM)
        return diag_fail(D(v), -ESPIPE, f->path, -1, "reading a VDI needs a seekable input");
    v->file_size = f->size;
    memset(v->raw, 0, sizeof(v->raw));
    if ((r = bfile_pread_upto(f, v->raw, sizeof(v->raw), 0, &got)) < 0)
        return r;
    if ((r = vdi_header_decode(v->raw, got, &v->h, err, sizeof(err))) < 0)
        return diag_fail(D(v), r, f->path, 0, "%s", err);
    v->bd.size = v->h.disk_size;
    v->bd.granule = v->h.block_size;
    v->stride = (uint64_t)v->h.block_extra + v->h.block_size;
    uint64_t map_bytes = (uint64_t)v->h.blocks * 4;
    if (map_bytes > v->file_size || v->h.off_blocks > v->file_size - map_bytes)
        return diag_fail(D(v), -EINVAL, f->path, v->h.v0 ? 364 : 340,
                         "block map of %u entries at %u is past the end of the file (%llu "
                         "bytes): truncated or corrupt image", v->h.blocks, v->h.off_blocks,
                         (unsigned long long)v->file_size);
    if ((r = add_meta(v, 0, VDI_PREHEADER + v->h.header_size, "header")) < 0 ||
        (r = add_meta(v, v->h.off_blocks, map_bytes, "block map")) < 0)
        return r;
    if ((r = metamap_seal(&v->meta)) < 0)
        return diag_fail(D(v), r, f->path, -1, "out of memory");
    if ((r = bd_table_budget(&v->bd, map_bytes, f->path, "the block map")) < 0)
        return r;
    uint8_t *raw = malloc(map_bytes ? map_bytes : 1);
    if (!raw)
        return diag_fail(D(v), -ENOMEM, f->path, -1, "out of memory");
    if ((r = bfile_pread(f, raw, map_bytes, v->h.off_blocks)) < 0) {
        free(raw);
        return r;
    }
    v->map = (uint32_t *)raw;
    for (uint32_t i = 0; i < v->h.blocks; i++)
        v->map[i] = le32_get(raw + 4 * (size_t)i);
    if (v->h.type == VDI_TYPE_DIFF && (r = open_parent(v)) < 0)
        return r;
    return 0;
}

static void vdi_close(struct bd *bd)
{
    struct vdi *v = to_vdi(bd);

    free(v->map);
    metamap_free(&v->meta);
    bd_release(bd);
    free(v);
}

static int vdi_open(struct bd **out, struct bfile *f, const struct bd_open_opts *o,
                    struct bd *parent, struct diag *d)
{
    struct vdi *v = calloc(1, sizeof(*v));

    *out = NULL;
    if (!v) {
        bfile_close(f);
        return diag_fail(d, -ENOMEM, f->path, -1, "out of memory");
    }
    bd_init(&v->bd, &bd_vdi, f, d);
    v->bd.opts = *o;
    v->bd.parent = parent;
    v->bd.depth = parent ? parent->depth + 1 : 0;
    if (!v->bd.filename) {
        vdi_close(&v->bd);
        return diag_fail(d, -ENOMEM, f->path, -1, "out of memory");
    }
    int r = do_open(v);
    if (r < 0) {
        vdi_close(&v->bd);
        return r;
    }
    *out = &v->bd;
    return 0;
}

/* qemu-img's keys for vdi: the block size as cluster-size */
static int vdi_info(struct bd *bd, struct jval *obj)
{
    jv_set(obj, "cluster-size", jv_uint(to_vdi(bd)->h.block_size));
    return 0;
}

const struct bd_driver bd_vdi = {
    .name = "vdi",
    .caps = BD_CAP_INPLACE,
    .probe = vdi_probe,
    .open = vdi_open,
    .block_status = vdi_block_status,
    .pread = vdi_pread,
    .close = vdi_close,
    .info = vdi_info,
    .check = vdi_check,
    .resize = vdi_resize,
    .measure = vdi_measure,
    .create_options_help = vdiw_options_help,
    .describe_create = vdiw_describe_create,
    .create = vdiw_create,
};
