/* ova: an OVF appliance packed as a tar archive, read in place.
 *
 * The tar members are walked (ustar, GNU long names, pax "path" records);
 * the members named *.vmdk are the disks.  The selected one (opts->disk_index,
 * the first by default) is opened through a slice of the archive file, so
 * nothing is extracted; this driver then forwards reads to it.  On a pipe
 * the walk stops at the selected disk (reads only go forward).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "formats/vmdk.h"
#include "formats/vmdk_format.h"
#include "io/bfile.h"
#include "util/diag.h"
#include "util/jval.h"

#define OVA_MAX_MEMBERS 100000u
#define OVA_MAX_DISKS   256u

struct ova_disk {
    char *name;
    uint64_t off, size;
};

struct ova {
    struct bd bd;
    struct bd_open_opts inner_opts;
    struct bd *inner;
    unsigned index;
    struct ova_disk *disks;
    size_t n_disks;
};

/* --- tar headers (pure) ------------------------------------------------------------ */

static bool parse_octal(const uint8_t *p, size_t n, uint64_t *out)
{
    uint64_t v = 0;
    size_t i = 0;
    bool any = false;

    while (i < n && p[i] == ' ')
        i++;
    for (; i < n && p[i] >= '0' && p[i] <= '7'; i++) {
        if (v >> 60)
            return false;
        v = v << 3 | (uint64_t)(p[i] - '0');
        any = true;
    }
    for (; i < n; i++)
        if (p[i] != ' ' && p[i] != '\0')
            return false;
    *out = v;
    return any;
}

/* size field: octal, or GNU base-256 (high bit of the first byte set) */
static bool parse_size(const uint8_t *p, uint64_t *out)
{
    if (p[0] & 0x80) {
        uint64_t v = 0;
        if (p[0] != 0x80 || p[1] || p[2] || p[3])
            return false;   /* negative or more than 64 bits */
        for (int i = 4; i < 12; i++)
            v = v << 8 | p[i];
        *out = v;
        return true;
    }
    return parse_octal(p, 12, out);
}

int tar_header_decode(const uint8_t *b, struct tar_member *m, struct diag *d,
                      const char *file, int64_t off)
{
    uint64_t want, sum = 0;
    bool zero = true;

    memset(m, 0, sizeof(*m));
    for (size_t i = 0; i < TAR_BLOCK; i++)
        if (b[i]) {
            zero = false;
            break;
        }
    if (zero) {
        m->kind = TAR_END;
        return 0;
    }
    if (!parse_octal(b + 148, 8, &want))
        return diag_fail(d, -EINVAL, file, off + 148, "tar header checksum field is not octal");
    for (size_t i = 0; i < TAR_BLOCK; i++)
        sum += (i >= 148 && i < 156) ? ' ' : b[i];
    if (sum != want)
        return diag_fail(d, -EINVAL, file, off,
                         "tar header checksum is wrong (stored %llu, computed %llu): not a "
                         "tar archive or damaged", (unsigned long long)want,
                         (unsigned long long)sum);
    if (!parse_size(b + 124, &m->size))
        return diag_fail(d, -EINVAL, file, off + 124, "tar header size field is invalid");
    if (m->size > (1ull << 50))
        return diag_fail(d, -EINVAL, file, off + 124, "tar member of %llu bytes is too large",
                         (unsigned long long)m->size);
    size_t n = strnlen((const char *)b, 100);
    bool ustar = memcmp(b + 257, "ustar", 5) == 0;
    size_t pn = ustar ? strnlen((const char *)b + 345, 155) : 0;
    if (pn)
        snprintf(m->name, sizeof(m->name), "%.*s/%.*s", (int)pn, (const char *)b + 345,
                 (int)n, (const char *)b);
    else
        snprintf(m->name, sizeof(m->name), "%.*s", (int)n, (const char *)b);
    switch (b[156]) {
    case '0': case '\0': case '7':
        m->kind = TAR_FILE;
        break;
    case 'L':
        m->kind = TAR_LONGNAME;
        break;
    case 'x':
        m->kind = TAR_PAX;
        break;
    default:
        m->kind = TAR_OTHER;
        break;
    }
    return 0;
}

bool tar_pax_path(const char *rec, size_t len, char *name, size_t cap)
{
    size_t p = 0;

    while (p < len) {
        size_t rl = 0, q = p;
        while (q < len && rec[q] >= '0' && rec[q] <= '9' && rl < len)
            rl = rl * 10 + (size_t)(rec[q++] - '0');
        if (q >= len || rec[q] != ' ' || rl == 0 || rl > len - p)
            return false;
        const char *kv = rec + q + 1, *end = rec + p + rl;  /* end: the '\n' */
        if (end - kv > 5 && memcmp(kv, "path=", 5) == 0 && end[-1] == '\n') {
            size_t n = (size_t)(end - 1 - (kv + 5));
            if (n + 1 > cap)
                return false;
            memcpy(name, kv + 5, n);
            name[n] = '\0';
            return true;
        }
        p += rl;
    }
    return false;
}

/* --- the driver ---------------------------------------------------------------------- */

static bool ends_with_ci(const char *s, const char *suffix)
{
    size_t n = strlen(s), k = strlen(suffix);
    return n > k && strcasecmp(s + n - k, suffix) == 0;
}

static int ova_probe(const uint8_t *head, size_t len, const char *filename)
{
    struct tar_member m;

    if (len < TAR_BLOCK || memcmp(head + 257, "ustar", 5) != 0)
        return 0;
    if (tar_header_decode(head, &m, NULL, NULL, 0) < 0 || m.kind == TAR_END)
        return 0;
    if (ends_with_ci(m.name, ".ovf"))
        return 100;    /* OVF packages start with the descriptor */
    if (filename && ends_with_ci(filename, ".ova"))
        return 80;
    return 0;
}

static struct ova *to_ova(struct bd *bd)
{
    return (struct ova *)bd;
}

/* Walk the members; on a pipe stop once disk `want` is found. */
static int walk(struct ova *a, bool stop_at_want, unsigned want)
{
    struct bfile *f = a->bd.file;
    struct diag *d = a->bd.diag;
    uint64_t pos = 0;
    char longname[256] = "";
    uint8_t b[TAR_BLOCK];
    int r;

    for (unsigned count = 0;; count++) {
        struct tar_member m;
        size_t got;

        if (count >= OVA_MAX_MEMBERS)
            return diag_fail(d, -EINVAL, f->path, (int64_t)pos,
                             "archive has more than %u members", OVA_MAX_MEMBERS);
        r = bfile_pread_upto(f, b, TAR_BLOCK, pos, &got);
        if (r < 0)
            return r;
        if (got == 0)
            return 0;   /* end without the two zero blocks: tolerated */
        if (got < TAR_BLOCK)
            return diag_fail(d, -EIO, f->path, (int64_t)pos, "archive ends inside a tar header");
        r = tar_header_decode(b, &m, d, f->path, (int64_t)pos);
        if (r < 0)
            return r;
        if (m.kind == TAR_END)
            return 0;
        uint64_t data = pos + TAR_BLOCK;
        uint64_t next = data + (m.size + TAR_BLOCK - 1) / TAR_BLOCK * TAR_BLOCK;
        if (f->size != UINT64_MAX && (data > f->size || m.size > f->size - data))
            return diag_fail(d, -EIO, f->path, (int64_t)pos,
                             "tar member '%s' of %llu bytes runs past the end of the archive",
                             m.name, (unsigned long long)m.size);
        if (m.kind == TAR_LONGNAME || m.kind == TAR_PAX) {
            char rec[4096];
            if (m.size < sizeof(rec)) {
                r = bfile_pread(f, rec, (size_t)m.size, data);
                if (r < 0)
                    return r;
                rec[m.size] = '\0';
                if (m.kind == TAR_LONGNAME)
                    snprintf(longname, sizeof(longname), "%.255s", rec);
                else if (!tar_pax_path(rec, (size_t)m.size, longname, sizeof(longname)))
                    longname[0] = '\0';
            }
            pos = next;
            continue;
        }
        if (m.kind == TAR_FILE) {
            const char *name = longname[0] ? longname : m.name;
            if (ends_with_ci(name, ".vmdk")) {
                if (a->n_disks >= OVA_MAX_DISKS)
                    return diag_fail(d, -EINVAL, f->path, (int64_t)pos,
                                     "archive has more than %u disks", OVA_MAX_DISKS);
                struct ova_disk *n = realloc(a->disks, (a->n_disks + 1) * sizeof(*n));
                if (!n)
                    return diag_fail(d, -ENOMEM, f->path, -1, "out of memory");
                a->disks = n;
                n[a->n_disks].name = strdup(name);
                n[a->n_disks].off = data;
                n[a->n_disks].size = m.size;
                if (!n[a->n_disks].name)
                    return diag_fail(d, -ENOMEM, f->path, -1, "out of memory");
                a->n_disks++;
                if (stop_at_want && a->n_disks > want)
                    return 0;
            }
        }
        longname[0] = '\0';
        pos = next;
    }
}

static void ova_close(struct bd *bd)
{
    struct ova *a = to_ova(bd);

    bd_close(a->inner);   /* before the archive file its slice reads from */
    for (size_t i = 0; i < a->n_disks; i++)
        free(a->disks[i].name);
    free(a->disks);
    bd_release(bd);
    free(a);
}

static int ova_open(struct bd **out, struct bfile *f, const struct bd_open_opts *o,
                    struct bd *parent, struct diag *d)
{
    struct ova *a = calloc(1, sizeof(*a));
    struct bfile *slice;
    char *sname = NULL;
    int r;

    *out = NULL;
    if (!a) {
        r = diag_fail(d, -ENOMEM, f->path, -1, "out of memory");
        bfile_close(f);
        return r;
    }
    bd_init(&a->bd, &bd_ova, f, d);
    a->bd.opts = o;
    a->bd.parent = parent;
    a->bd.depth = parent ? parent->depth + 1 : 0;
    a->index = o->disk_index;
    bool stream = f->kind == BFILE_STREAM;
    r = walk(a, stream, a->index);
    if (r < 0)
        goto fail;
    if (a->n_disks == 0) {
        r = diag_fail(d, -EINVAL, f->path, -1, "the OVA archive holds no .vmdk disk");
        goto fail;
    }
    if (a->index >= a->n_disks) {
        r = diag_fail(d, -EINVAL, f->path, -1,
                      "the OVA archive holds %zu disk%s; disk %u does not exist (disks are "
                      "numbered from 0)", a->n_disks, a->n_disks == 1 ? "" : "s", a->index);
        goto fail;
    }
    const struct ova_disk *disk = &a->disks[a->index];
    if (asprintf(&sname, "%s[%s]", f->path, disk->name) < 0) {
        sname = NULL;
        r = diag_fail(d, -ENOMEM, f->path, -1, "out of memory");
        goto fail;
    }
    r = bfile_open_slice(&slice, f, disk->off, disk->size, sname);
    free(sname);
    if (r < 0)
        goto fail;
    a->inner_opts = *o;
    /* no probing: on a pipe the probe would read past the member's header,
     * which could then not be read again */
    a->inner_opts.format = "vmdk";
    a->inner_opts.disk_index = 0;
    r = bd_open_bfile(&a->inner, slice, &a->inner_opts, &a->bd, d);
    if (r < 0)
        goto fail;
    a->bd.size = a->inner->size;
    a->bd.granule = a->inner->granule;
    a->bd.dirty = a->inner->dirty;
    *out = &a->bd;
    return 0;
fail:
    ova_close(&a->bd);
    return r;
}

static int ova_block_status(struct bd *bd, uint64_t off, uint64_t len, struct bd_extent *e)
{
    return bd_block_status(to_ova(bd)->inner, off, len, e);
}

static int ova_pread(struct bd *bd, void *buf, size_t len, uint64_t off)
{
    return bd_pread(to_ova(bd)->inner, buf, len, off);
}

static int ova_info(struct bd *bd, struct jval *obj)
{
    struct ova *a = to_ova(bd);
    struct jval *fs = jv_object(), *data = jv_object(), *disks = jv_array();
    struct jval *inner = jv_object();
    int r = 0;

    jv_set(fs, "type", jv_str("ova"));
    for (size_t i = 0; i < a->n_disks; i++) {
        struct jval *o = jv_object();
        jv_set(o, "index", jv_uint(i));
        jv_set(o, "name", jv_str(a->disks[i].name));
        jv_set(o, "offset", jv_uint(a->disks[i].off));
        jv_set(o, "size", jv_uint(a->disks[i].size));
        jv_push(disks, o);
    }
    jv_set(data, "disks", disks);
    jv_set(data, "selected-disk", jv_uint(a->index));
    jv_set(inner, "format", jv_str(a->inner->drv->name));
    jv_set(inner, "virtual-size", jv_uint(a->inner->size));
    if (a->inner->drv->info)
        r = a->inner->drv->info(a->inner, inner);
    jv_set(data, "disk-info", inner);
    jv_set(fs, "data", data);
    jv_set(obj, "format-specific", fs);
    struct jval *cs = jv_get(inner, "cluster-size");
    if (cs && cs->type == J_UINT)
        jv_set(obj, "cluster-size", jv_uint(cs->v.u));
    return r;
}

const struct bd_driver bd_ova = {
    .name = "ova",
    .probe = ova_probe,
    .open = ova_open,
    .block_status = ova_block_status,
    .pread = ova_pread,
    .close = ova_close,
    .info = ova_info,
};
