/* Sparse extents with random access: hosted sparse (KDMV, also
 * streamOptimized) and ESX 3 COWD.  Grain directory loading and checking,
 * a small grain table cache, the grains' block status and their bytes
 * (compressed grains inflated in the calling thread).
 *
 * Every table entry is checked against the file size before it is used: a
 * grain table or grain at or past the end of the file is an error naming
 * the offset, never zeros.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "formats/vmdk/read_int.h"
#include "io/bfile.h"
#include "util/diag.h"
#include "util/endian.h"

/* G_BAD: an entry pointing past the end of the file or into the metadata
 * (vmdk_grain_check says why when the grain is used). */
enum gkind { G_UNALLOC, G_ZERO, G_DATA, G_COMP, G_BAD };

struct gref {
    enum gkind k;
    uint64_t off;       /* byte offset in the extent file (DATA, COMP) */
};

#define BATCH 512

static struct diag *D(struct vmdk *v)
{
    return v->bd.diag;
}

/* --- opening ------------------------------------------------------------------ */

int vmdk_table_budget(struct vmdk *v, const struct vmdk_extent *x, uint64_t bytes)
{
    return bd_table_budget(&v->bd, bytes, x->name, "grain directories of the extents");
}

/* Read and check a grain directory.  With `quiet`, a directory that does
 * not fit the file is refused (-EINVAL) without recording why. */
static int u32_cmp(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

static int load_gd(struct vmdk *v, struct vmdk_extent *x, uint64_t gd_sector, uint32_t n,
                   bool quiet)
{
    struct diag *d = quiet ? NULL : D(v);
    uint64_t off = gd_sector * VMDK_SECTOR;
    uint64_t bytes = (uint64_t)n * 4;
    uint64_t gt_bytes = (uint64_t)x->gtes * 4;
    uint8_t *raw;
    int r;

    if (off >= x->file_size || bytes > x->file_size - off)
        return diag_fail(d, -EINVAL, x->name, (int64_t)off,
                         "grain directory at offset %llu (%llu bytes) runs past the end "
                         "of the file (%llu bytes)", (unsigned long long)off,
                         (unsigned long long)bytes, (unsigned long long)x->file_size);
    if (!x->gd && (r = vmdk_table_budget(v, x, bytes)) < 0)
        return r;
    raw = malloc(bytes ? bytes : 1);
    free(x->gd);
    x->gd = calloc(n ? n : 1, sizeof(*x->gd));
    if (!raw || !x->gd) {
        free(raw);
        return diag_fail(D(v), -ENOMEM, x->name, -1, "out of memory");
    }
    x->gd_n = n;
    r = bfile_pread(x->file, raw, bytes, off);
    if (r < 0) {
        free(raw);
        return r;
    }
    for (uint32_t i = 0; i < n; i++) {
        uint32_t e = le32_get(raw + 4 * (uint64_t)i);
        uint64_t gto = (uint64_t)e * VMDK_SECTOR;
        if (e && (gto >= x->file_size || gt_bytes > x->file_size - gto)) {
            free(raw);
            return diag_fail(d, -EINVAL, x->name, (int64_t)(off + 4 * (uint64_t)i),
                             "grain directory entry %u points to a grain table at offset "
                             "%llu, past the end of the file (%llu bytes)", i,
                             (unsigned long long)gto, (unsigned long long)x->file_size);
        }
        x->gd[i] = e;
    }
    /* Two entries naming one grain table: never written by any tool, and a
     * 16 MiB directory whose 4M entries all name one table would make a
     * walk read that table 4M times.  Sorted copy in `raw`. */
    uint32_t *sorted = (uint32_t *)raw, m = 0;
    for (uint32_t i = 0; i < n; i++)
        if (x->gd[i])
            sorted[m++] = x->gd[i];
    qsort(sorted, m, sizeof(*sorted), u32_cmp);
    for (uint32_t i = 1; i < m; i++) {
        if (sorted[i] != sorted[i - 1])
            continue;
        uint32_t a = UINT32_MAX, b = 0;
        for (uint32_t j = 0; j < n; j++) {
            if (x->gd[j] != sorted[i])
                continue;
            if (a == UINT32_MAX) {
                a = j;
            } else {
                b = j;
                break;
            }
        }
        uint64_t gto = (uint64_t)sorted[i] * VMDK_SECTOR;
        free(raw);
        return diag_fail(d, -EINVAL, x->name, (int64_t)(off + 4 * (uint64_t)b),
                         "grain directory entries %u and %u both point to the grain table "
                         "at offset %llu", a, b, (unsigned long long)gto);
    }
    free(raw);
    return 0;
}

/* The footer of a streamOptimized file whose header says "GD at end": a
 * copy of the header with the directory's offset, in the last three
 * sectors of the file: footer marker, footer, end-of-stream marker.  A file
 * that does not end so has no usable footer (*gd_sector = 0): its markers
 * are scanned, and the scan decides whether it is whole (read_scan.c). */
static int footer_gd(struct vmdk *v, struct vmdk_extent *x, uint64_t *gd_sector)
{
    uint8_t buf[3 * VMDK_SECTOR];
    struct vmdk_marker fm, eos;
    struct vmdk4_header f;

    *gd_sector = 0;
    if (x->file_size < 4 * VMDK_SECTOR)
        return 0;
    uint64_t at = x->file_size - sizeof(buf);
    int r = bfile_pread(x->file, buf, sizeof(buf), at);
    if (r < 0)
        return r;
    if (vmdk_marker_decode(buf, VMDK_SECTOR, 0, &fm, NULL, NULL, 0) < 0 || fm.is_grain ||
        fm.type != VMDK_MARKER_FOOTER || fm.value != 1 ||
        vmdk_marker_decode(buf + 2 * VMDK_SECTOR, VMDK_SECTOR, 0, &eos, NULL, NULL, 0) < 0 ||
        eos.is_grain || eos.type != VMDK_MARKER_EOS)
        return 0;
    if (vmdk4_header_decode(buf + VMDK_SECTOR, VMDK4_HEADER_SIZE, &f, NULL, NULL, 0) < 0 ||
        f.gd_offset == VMDK4_GD_AT_END)
        return 0;
    if (f.capacity != x->hdr.capacity || f.grain_sectors != x->hdr.grain_sectors ||
        f.gtes != x->hdr.gtes)
        return diag_fail(D(v), -EINVAL, x->name, (int64_t)(at + VMDK_SECTOR),
                         "footer disagrees with the header (capacity, grain size or "
                         "grain table size)");
    *gd_sector = f.gd_offset;
    return 0;
}

int vmdk_sparse_open(struct vmdk *v, struct vmdk_extent *x, uint64_t desc_sectors,
                     const uint8_t *head, size_t head_len)
{
    uint8_t buf[VMDK4_HEADER_SIZE];
    struct vmdk4_header *h = &x->hdr;
    int r;

    if (head) {     /* already read (a pipe cannot be read twice) */
        if (head_len < sizeof(buf))
            return diag_fail(D(v), -EIO, x->name, (int64_t)head_len,
                             "file is truncated inside the sparse extent header");
        memcpy(buf, head, sizeof(buf));
    } else if ((r = bfile_pread(x->file, buf, sizeof(buf), 0)) < 0) {
        return r;
    }
    r = vmdk4_header_decode(buf, sizeof(buf), h, D(v), x->name, 0);
    if (r < 0)
        return r;
    x->grain_bytes = h->grain_sectors * VMDK_SECTOR;
    x->gtes = h->gtes;
    x->capacity = h->capacity * VMDK_SECTOR;
    x->file_size = x->file->size;
    x->compressed = h->compressed;
    x->markers = h->markers;
    x->zero_grain = h->zero_grain;
    if (desc_sectors == UINT64_MAX)
        desc_sectors = h->capacity;
    if (desc_sectors > h->capacity)
        return diag_fail(D(v), -EINVAL, x->name, 12,
                         "descriptor gives the extent %llu sectors, but its header "
                         "capacity is only %llu", (unsigned long long)desc_sectors,
                         (unsigned long long)h->capacity);
    x->len = desc_sectors * VMDK_SECTOR;
    if (v->streaming)
        return 0;   /* vmdk_stream_open() takes it from here */

    uint64_t gd = h->gd_offset;
    if (gd == VMDK4_GD_AT_END) {
        r = footer_gd(v, x, &gd);
        if (r < 0)
            return r;
        if (!gd) {
            if (!x->compressed || !x->markers)
                return diag_fail(D(v), -EINVAL, x->name, 56,
                                 "grain directory is at the end, but there is no valid footer");
            return vmdk_scan_grains(v, x);
        }
    }
    if ((h->flags & VMDK4_FLAG_RGD) && h->rgd_offset && h->gd_offset != VMDK4_GD_AT_END) {
        /* a damaged primary directory: VMware keeps a redundant copy */
        r = load_gd(v, x, gd, h->gd_entries, true);
        if (r == 0)
            return vmdk_meta_build(v, x, gd);
        if (r != -EINVAL)
            return r;
        if (load_gd(v, x, h->rgd_offset, h->gd_entries, true) == 0) {
            diag_warn(D(v), x->name, 56, "primary grain directory is damaged; using the "
                      "redundant one");
            return vmdk_meta_build(v, x, h->rgd_offset);
        }
    }
    r = load_gd(v, x, gd, h->gd_entries, false);
    return r < 0 ? r : vmdk_meta_build(v, x, gd);
}

int vmdk_cowd_open(struct vmdk *v, struct vmdk_extent *x, uint64_t desc_sectors)
{
    uint8_t *buf = malloc(COWD_HEADER_SIZE);
    struct cowd_header h;
    int r;

    if (!buf)
        return diag_fail(D(v), -ENOMEM, x->name, -1, "out of memory");
    r = bfile_pread(x->file, buf, COWD_HEADER_SIZE, 0);
    if (r == 0)
        r = cowd_header_decode(buf, COWD_HEADER_SIZE, &h, D(v), x->name, 0);
    free(buf);
    if (r < 0)
        return r;
    x->grain_bytes = h.grain_sectors * VMDK_SECTOR;
    x->gtes = COWD_GTES;
    x->capacity = (uint64_t)h.capacity * VMDK_SECTOR;
    x->file_size = x->file->size;
    if (desc_sectors == UINT64_MAX)
        desc_sectors = h.capacity;
    if (desc_sectors > h.capacity)
        return diag_fail(D(v), -EINVAL, x->name, 12,
                         "descriptor gives the extent %llu sectors, but its COWD header "
                         "capacity is only %u", (unsigned long long)desc_sectors, h.capacity);
    x->len = desc_sectors * VMDK_SECTOR;
    x->hdr.dirty = h.dirty;
    uint64_t span = (uint64_t)x->grain_bytes * COWD_GTES;
    uint32_t n = (uint32_t)(x->capacity / span + (x->capacity % span != 0));
    r = load_gd(v, x, h.gd_offset, n, false);
    return r < 0 ? r : vmdk_meta_build(v, x, h.gd_offset);
}

void vmdk_sparse_free(struct vmdk_extent *x)
{
    free(x->gd);
    free(x->scan);
    metamap_free(&x->meta);
    x->gd = NULL;
    x->scan = NULL;
}

void vmdk_caches_free(struct vmdk *v)
{
    for (size_t i = 0; i < VMDK_GT_SLOTS; i++)
        free(v->gt[i].ent);
    for (size_t i = 0; i < VMDK_GRAIN_SLOTS; i++)
        free(v->gr[i].data);
}

/* --- grain tables --------------------------------------------------------------- */

/* Bytes of grain `g` that lie inside the extent. */
static uint64_t grain_extent_bytes(const struct vmdk_extent *x, uint64_t g)
{
    uint64_t start = g * x->grain_bytes;
    uint64_t left = x->len - start;
    return left < x->grain_bytes ? left : x->grain_bytes;
}

/* Bytes grain g takes at least at its offset (its whole data, or the
 * header of a compressed one: its size is known once that is read). */
static uint64_t grain_min_bytes(const struct vmdk_extent *x, uint64_t g)
{
    if (x->compressed)
        return x->markers ? VMDK_GRAIN_HDR : 1;
    return grain_extent_bytes(x, g);
}

/* Copy grain table `gd_idx` of `x` into out[0..gtes). */
static int gt_get(struct vmdk *v, const struct vmdk_extent *x, uint32_t gd_idx, uint32_t *out)
{
    struct vmdk_gt_slot *s = NULL;
    size_t bytes = (size_t)x->gtes * 4;
    int r = 0;

    if (x->gd[gd_idx] == 0) {
        memset(out, 0, bytes);
        return 0;
    }
    pthread_mutex_lock(&v->lock);
    for (size_t i = 0; i < VMDK_GT_SLOTS; i++) {
        if (v->gt[i].x == x && v->gt[i].gd_idx == gd_idx) {
            s = &v->gt[i];
            goto hit;
        }
    }
    s = &v->gt[0];
    for (size_t i = 1; i < VMDK_GT_SLOTS; i++)
        if (v->gt[i].stamp < s->stamp)
            s = &v->gt[i];
    s->x = NULL;
    if (!s->ent && !(s->ent = malloc(VMDK_MAX_GTES * 4))) {
        r = diag_fail(D(v), -ENOMEM, x->name, -1, "out of memory");
        goto out;
    }
    uint8_t *raw = (uint8_t *)s->ent;   /* decoded in place, front to back */
    r = bfile_pread(x->file, raw, bytes, (uint64_t)x->gd[gd_idx] * VMDK_SECTOR);
    if (r < 0)
        goto out;
    for (uint32_t i = 0; i < x->gtes; i++)
        s->ent[i] = le32_get(raw + 4 * (size_t)i);
    /* (each entry is checked when its grain is used: vmdk_grain_check) */
    s->x = x;
    s->gd_idx = gd_idx;
hit:
    s->stamp = ++v->clock;
    memcpy(out, s->ent, bytes);
out:
    pthread_mutex_unlock(&v->lock);
    return r;
}

static int scan_cmp(const void *a, const void *b)
{
    uint64_t ga = ((const struct vmdk_grain_loc *)a)->grain;
    uint64_t gb = ((const struct vmdk_grain_loc *)b)->grain;
    return ga < gb ? -1 : ga > gb;
}

/* The first grain >= g that scanning found, or a grain past the extent. */
static uint64_t scan_next(const struct vmdk_extent *x, uint64_t g)
{
    size_t lo = 0, hi = x->n_scan;

    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (x->scan[mid].grain < g)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo < x->n_scan)
        return x->scan[lo].grain;
    return x->len / x->grain_bytes + 1;
}

/* Up to `max` grains from `g` on (stopping at the end of a grain table and
 * of the extent): *n is set to how many were described. */
static int grains_get(struct vmdk *v, const struct vmdk_extent *x, uint64_t g, uint32_t max,
                      struct gref *out, uint32_t *n)
{
    uint64_t total = x->len / x->grain_bytes + (x->len % x->grain_bytes != 0);
    uint64_t left = total - g;

    if (max > left)
        max = (uint32_t)left;
    if (x->scan) {
        for (uint32_t i = 0; i < max; i++) {
            struct vmdk_grain_loc key = { .grain = g + i };
            const struct vmdk_grain_loc *l = bsearch(&key, x->scan, x->n_scan,
                                                     sizeof(*x->scan), scan_cmp);
            out[i].k = l ? G_COMP : G_UNALLOC;
            out[i].off = l ? l->file_off : 0;
        }
        *n = max;
        return 0;
    }
    uint32_t gd_idx = (uint32_t)(g / x->gtes);
    uint32_t first = (uint32_t)(g % x->gtes);
    uint32_t ent[VMDK_MAX_GTES];
    if (max > x->gtes - first)
        max = x->gtes - first;
    int r = gt_get(v, x, gd_idx, ent);
    if (r < 0)
        return r;
    for (uint32_t i = 0; i < max; i++) {
        uint32_t e = ent[first + i];
        out[i].off = (uint64_t)e * VMDK_SECTOR;
        if (e == 0)
            out[i].k = G_UNALLOC;
        else if (e == 1 && x->zero_grain)
            out[i].k = G_ZERO;
        else if (vmdk_grain_check(x, g + i, out[i].off, grain_min_bytes(x, g + i), NULL) < 0)
            out[i].k = G_BAD;
        else
            out[i].k = x->compressed ? G_COMP : G_DATA;
    }
    *n = max;
    return 0;
}

/* Record why grain g (a G_BAD entry at `off`) cannot be read. */
static int bad_grain(struct vmdk *v, const struct vmdk_extent *x, uint64_t g, uint64_t off)
{
    int r = vmdk_grain_check(x, g, off, grain_min_bytes(x, g), D(v));
    return r < 0 ? r : diag_fail(D(v), -EIO, x->name, -1, "internal error: grain check");
}

/* --- block status ------------------------------------------------------------------ */

static unsigned kind_flags(enum gkind k)
{
    switch (k) {
    case G_ZERO: return BD_ALLOCATED | BD_ZERO;
    case G_DATA: return BD_ALLOCATED | BD_DATA;
    case G_COMP: return BD_ALLOCATED | BD_DATA | BD_COMPRESSED;
    default:     return 0;
    }
}

int vmdk_sparse_block_status(struct vmdk *v, struct vmdk_extent *x, uint64_t off,
                             uint64_t len, struct bd_extent *e)
{
    uint64_t rel = off - x->start;
    uint64_t end = rel + len;
    uint64_t g = rel / x->grain_bytes;
    uint64_t pos = rel;
    bool started = false;
    enum gkind kind = G_UNALLOC;
    uint64_t host0 = 0;
    struct gref refs[BATCH];

    if (end > x->len)
        end = x->len;
    while (pos < end) {
        uint32_t n;
        if (x->gd && x->gd[g / x->gtes] == 0) {
            /* no grain table: the whole span is unallocated, skip it at once */
            if (started && kind != G_UNALLOC)
                break;
            started = true;
            kind = G_UNALLOC;
            g = (g / x->gtes + 1) * x->gtes;
            uint64_t tend = g * x->grain_bytes;
            pos = tend < end ? tend : end;
            continue;
        }
        if (x->scan) {
            /* grains found by scanning: skip to the next one at once, so
             * that a huge capacity with few grains is not walked grain by
             * grain */
            uint64_t next = scan_next(x, g);
            if (next > g) {
                if (started && kind != G_UNALLOC)
                    break;
                started = true;
                kind = G_UNALLOC;
                g = next;
                uint64_t tend = g * x->grain_bytes;
                pos = tend < end ? tend : end;
                continue;
            }
        }
        int r = grains_get(v, x, g, BATCH, refs, &n);
        if (r < 0)
            return r;
        for (uint32_t i = 0; i < n && pos < end; i++, g++) {
            uint64_t gend = (g + 1) * x->grain_bytes;
            if (refs[i].k == G_BAD) {
                if (!started)
                    return bad_grain(v, x, g, refs[i].off);
                goto done;  /* the extent ends before it */
            }
            if (!started) {
                kind = refs[i].k;
                host0 = refs[i].off + (pos - g * x->grain_bytes);
                started = true;
            } else if (refs[i].k != kind) {
                goto done;
            } else if (kind == G_DATA &&
                       refs[i].off != host0 + (g * x->grain_bytes - rel)) {
                goto done;  /* a run of data has one host offset */
            }
            pos = gend < end ? gend : end;
        }
    }
done:
    e->len = pos - rel;
    e->flags = kind_flags(kind);
    if (kind == G_DATA) {
        e->host_offset = (int64_t)host0;
        e->host = &v->bd;
        if (x->file != v->bd.file)
            e->host_file = x->file;    /* an extent file of a descriptor */
    }
    return 0;
}

/* --- reading ---------------------------------------------------------------------- */

/* Read and inflate grain `g` stored at byte `off` of the extent file. */
static int read_comp_grain(struct vmdk *v, const struct vmdk_extent *x, uint64_t g,
                           uint64_t off, uint8_t *out)
{
    uint32_t maxc = vmdk_max_csize(x->grain_bytes);
    size_t cap = vmdk_cbuf_bytes(x->grain_bytes);
    uint8_t *buf;
    const uint8_t *data;
    size_t clen, first;
    int r;

    if (off >= x->file_size)
        return diag_fail(D(v), -EINVAL, x->name, (int64_t)off,
                         "grain for LBA %llu is past the end of the file",
                         (unsigned long long)(g * x->grain_bytes / VMDK_SECTOR));
    buf = malloc(cap);
    if (!buf)
        return diag_fail(D(v), -ENOMEM, x->name, -1, "out of memory");
    /* with markers the size is in the grain's header: read the header and
     * what usually follows in one call, never more than the buffer holds
     * (a grain of 1..4 sectors has room for less than 4 KiB) */
    first = x->markers && cap > VMDK_GRAIN_FIRST_READ ? VMDK_GRAIN_FIRST_READ : cap;
    if (first > x->file_size - off)
        first = (size_t)(x->file_size - off);
    r = bfile_pread(x->file, buf, first, off);
    if (r < 0)
        goto out;
    if (x->markers) {
        struct vmdk_marker m;
        uint64_t lba = g * x->grain_bytes / VMDK_SECTOR;
        r = vmdk_marker_decode(buf, first, maxc, &m, D(v), x->name, (int64_t)off);
        if (r < 0)
            goto out;
        if (!m.is_grain) {
            r = diag_fail(D(v), -EINVAL, x->name, (int64_t)off,
                          "grain table maps LBA %llu to a marker of type %u, not a grain",
                          (unsigned long long)lba, m.type);
            goto out;
        }
        if (m.value != lba) {
            r = diag_fail(D(v), -EINVAL, x->name, (int64_t)off,
                          "grain at offset %llu holds LBA %llu, but the grain table maps "
                          "it to LBA %llu", (unsigned long long)off,
                          (unsigned long long)m.value, (unsigned long long)lba);
            goto out;
        }
        if (VMDK_GRAIN_HDR + (uint64_t)m.size > x->file_size - off) {
            r = diag_fail(D(v), -EINVAL, x->name, (int64_t)off,
                          "compressed grain of %u bytes at offset %llu runs past the end "
                          "of the file (%llu bytes)", m.size, (unsigned long long)off,
                          (unsigned long long)x->file_size);
            goto out;
        }
        clen = m.size;
        /* now that its size is known: clear of the metadata too */
        if ((r = vmdk_grain_check(x, g, off, VMDK_GRAIN_HDR + clen, D(v))) < 0)
            goto out;
        if (VMDK_GRAIN_HDR + clen > first) {
            r = bfile_pread(x->file, buf + first, VMDK_GRAIN_HDR + clen - first, off + first);
            if (r < 0)
                goto out;
        }
        data = buf + VMDK_GRAIN_HDR;
    } else {
        data = buf;
        clen = first;
    }
    r = vmdk_inflate_grain(x, data, clen, out, D(v), (int64_t)off);
out:
    free(buf);
    return r;
}

/* Bytes [within, within+n) of compressed grain g into dst. */
static int read_comp_part(struct vmdk *v, const struct vmdk_extent *x, uint64_t g,
                          uint64_t off, uint8_t *dst, uint32_t within, size_t n)
{
    struct vmdk_grain_slot *s;
    uint8_t *tmp;
    int r;

    if (within == 0 && n == x->grain_bytes)
        return read_comp_grain(v, x, g, off, dst);
    pthread_mutex_lock(&v->lock);
    for (size_t i = 0; i < VMDK_GRAIN_SLOTS; i++) {
        s = &v->gr[i];
        if (s->x == x && s->grain == g && s->data) {
            s->stamp = ++v->clock;
            memcpy(dst, s->data + within, n);
            pthread_mutex_unlock(&v->lock);
            return 0;
        }
    }
    pthread_mutex_unlock(&v->lock);

    tmp = malloc(x->grain_bytes);
    if (!tmp)
        return diag_fail(D(v), -ENOMEM, x->name, -1, "out of memory");
    r = read_comp_grain(v, x, g, off, tmp);
    if (r < 0) {
        free(tmp);
        return r;
    }
    memcpy(dst, tmp + within, n);
    /* keep it: the rest of the grain is usually read next */
    pthread_mutex_lock(&v->lock);
    s = &v->gr[0];
    for (size_t i = 1; i < VMDK_GRAIN_SLOTS; i++)
        if (v->gr[i].stamp < s->stamp)
            s = &v->gr[i];
    free(s->data);
    s->data = tmp;
    s->x = x;
    s->grain = g;
    s->stamp = ++v->clock;
    pthread_mutex_unlock(&v->lock);
    return 0;
}

/* A run of grains of one kind waiting to be read with one call. */
struct run {
    enum gkind k;
    uint8_t *dst;
    uint64_t guest;     /* guest offset of dst[0] */
    uint64_t host;      /* G_DATA: file offset of dst[0] */
    size_t n;
};

static int flush_run(struct vmdk *v, const struct vmdk_extent *x, struct run *run)
{
    int r = 0;

    if (!run->n)
        return 0;
    switch (run->k) {
    case G_UNALLOC:
        r = bd_pread_backing(&v->bd, run->dst, run->n, run->guest);
        break;
    case G_ZERO:
        memset(run->dst, 0, run->n);
        break;
    case G_DATA:
        r = bfile_pread(x->file, run->dst, run->n, run->host);
        break;
    default:
        break;
    }
    run->n = 0;
    return r;
}

int vmdk_sparse_pread(struct vmdk *v, struct vmdk_extent *x, uint8_t *buf, size_t len,
                      uint64_t off)
{
    uint64_t rel = off - x->start;
    uint64_t g = rel / x->grain_bytes;
    size_t done = 0;
    struct gref refs[BATCH];
    struct run run = { .n = 0 };
    int r;

    while (done < len) {
        uint32_t n;
        r = grains_get(v, x, g, BATCH, refs, &n);
        if (r < 0)
            return r;
        for (uint32_t i = 0; i < n && done < len; i++, g++) {
            uint64_t p = rel + done;
            uint32_t within = (uint32_t)(p - g * x->grain_bytes);
            size_t piece = x->grain_bytes - within;
            if (piece > len - done)
                piece = len - done;
            enum gkind k = refs[i].k;
            uint64_t host = refs[i].off + within;
            if (k == G_BAD) {
                if ((r = flush_run(v, x, &run)) < 0)
                    return r;
                return bad_grain(v, x, g, refs[i].off);
            }
            if (k == G_COMP) {
                if ((r = flush_run(v, x, &run)) < 0)
                    return r;
                r = read_comp_part(v, x, g, refs[i].off, buf + done, within, piece);
                if (r < 0)
                    return r;
            } else {
                bool joins = run.n && run.k == k &&
                             (k != G_DATA || run.host + run.n == host);
                if (!joins) {
                    if ((r = flush_run(v, x, &run)) < 0)
                        return r;
                    run.k = k;
                    run.dst = buf + done;
                    run.guest = x->start + p;
                    run.host = host;
                }
                run.n += piece;
            }
            done += piece;
        }
    }
    return flush_run(v, x, &run);
}

/* --- check ------------------------------------------------------------------------- */

/* Every grain the tables of `x` map: inside the file, clear of the
 * metadata.  Each bad one is a corruption, reported as qemu-img words it
 * where qemu checks the same (a grain past the end of the file).  With
 * `res` NULL the first bad one is an error instead, recorded with the
 * file, the table entry's offset and what is wrong with it. */
int vmdk_sparse_check(struct vmdk *v, struct vmdk_extent *x, struct bd_check_result *res)
{
    uint32_t ent[VMDK_MAX_GTES];
    uint64_t total = x->len / x->grain_bytes + (x->len % x->grain_bytes != 0);

    if (!x->gd)
        return 0;   /* grains found by scanning: no table to check */
    for (uint32_t t = 0; t < x->gd_n; t++) {
        uint64_t g0 = (uint64_t)t * x->gtes;
        if (g0 >= total)
            break;
        if (!x->gd[t])
            continue;
        int r = gt_get(v, x, t, ent);
        if (r < 0)
            return r;
        for (uint32_t i = 0; i < x->gtes && g0 + i < total; i++) {
            uint32_t e = ent[i];
            uint64_t g = g0 + i, off = (uint64_t)e * VMDK_SECTOR;
            if (e == 0 || (e == 1 && x->zero_grain) ||
                vmdk_grain_check(x, g, off, grain_min_bytes(x, g), NULL) == 0)
                continue;
            if (!res)
                return bad_grain(v, x, g, off);
            res->corruptions++;
            if (off >= x->file_size) {
                diag_warn(D(v), x->name, -1, "ERROR: cluster offset for sector %llu points "
                          "after EOF", (unsigned long long)((x->start + g * x->grain_bytes) /
                                                            VMDK_SECTOR));
                continue;
            }
            struct diag why;
            diag_init(&why);
            vmdk_grain_check(x, g, off, grain_min_bytes(x, g), &why);
            diag_warn(D(v), x->name, why.offset, "ERROR: %s", why.what);
            pthread_mutex_destroy(&why.lock);
        }
    }
    return 0;
}
