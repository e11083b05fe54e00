/* ova: an OVF appliance packed as a tar archive, read in place.
 *
 * The tar members are walked (ustar, GNU long names, pax "path" and "size"
 * records).  The disks are the *.vmdk members that are images of their own:
 * a descriptor, or a sparse file with an embedded descriptor (monolithicSparse,
 * streamOptimized), and that no descriptor member names as one of its
 * extents.  Extent files (flat data, the sparse files of a twoGbMaxExtent
 * disk) are members too, but not disks: --disk N counts disks only.
 *
 * The selected disk (opts->disk_index, the first by default) is opened
 * through a slice of the archive file, so nothing is extracted; this driver
 * then forwards reads to it.  Every reference made inside the archive (an
 * extent, a parent) resolves to a member, relative to the folder of the
 * member that makes it, through open_member(); never to a host file.
 *
 * On a pipe the walk stops at the selected disk (reads only go forward):
 * members before it are classified as they pass (their first bytes are read
 * and then gone), the disk's first bytes are kept for the image reader, and
 * a member it refers to is looked for further on.  A member that was passed
 * already cannot be read again: that is an error with a hint to read the
 * archive from a file.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "formats/ova/ova.h"
#include "formats/ova/tar.h"
#include "formats/vmdk/format.h"
#include "io/bfile.h"
#include "util/diag.h"
#include "util/endian.h"
#include "util/jval.h"

#define OVA_MAX_MEMBERS    100000u
#define OVA_MAX_DISKS      256u
#define TAR_MAX_NAME_BYTES (8u << 20)     /* all member names together */
#define OVA_MAX_PAX        (64u << 10)    /* one extended header's records */
#define OVA_MAX_DESC_TEXT  (8u << 20)     /* descriptor text read to find extents */
#define OVA_PROBE_BYTES    4096u          /* read of a member to classify it */
#define OVA_MAX_DESC_SECTOR 128u          /* embedded descriptors looked at below */

enum member_kind {
    MEMBER_FILE,      /* a regular file: its bytes are the member's data */
    MEMBER_SPARSE,    /* a GNU sparse file (its data is a map and fragments) */
    MEMBER_OTHER,     /* folder, link, device, FIFO: no data to read */
};

enum member_role { ROLE_NONE, ROLE_DISK, ROLE_EXTENT };

struct ova_member {
    char *name;              /* normalised path in the archive, NULL if it
                                leaves the archive ("../x", refused) */
    enum member_kind kind;
    enum member_role role;
    bool is_descriptor;      /* a descriptor: its text was read whole */
    bool handed_out;         /* a slice of it exists (a stream must not skip it) */
    uint64_t off, size;      /* where its data starts in the archive, bytes */
};

/* Meta records (GNU long name, pax) for the member that follows them. */
struct ova_pending {
    char name[TAR_MAX_NAME + 1];
    bool have_name, have_size, sparse;
    uint64_t size;
};

struct ova {
    struct bd bd;
    struct bd *inner;
    unsigned index;

    struct ova_member *m;
    size_t n_m, cap_m;
    uint64_t name_bytes;
    size_t *sorted;          /* indexes of the first n_sorted members, by name */
    size_t n_sorted, cap_sorted;
    size_t indexed;          /* members [0, indexed) are in the index */

    size_t *disks;           /* member indexes of the disks, in archive order */
    size_t n_disks;

    /* extent names the descriptors list (normalised), sorted */
    char **ext_names;
    size_t n_ext_names, cap_ext_names;
    uint64_t desc_text;

    /* the walk */
    uint64_t pos;            /* next header */
    unsigned headers;
    bool walk_done;
    struct ova_pending pend;
};

/* The folder part of a member name ("" at the root). */
static char *member_dir(const char *name)
{
    const char *slash = strrchr(name, '/');
    return strndup(name, slash ? (size_t)(slash - name) : 0);
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

static const char *apath(struct ova *a)
{
    return a->bd.file->path;
}

static bool on_stream(struct ova *a)
{
    return a->bd.file->kind == BFILE_STREAM;
}

/* Where the pipe is: bytes before it are gone, but for the first
 * BFILE_STREAM_HEAD bytes of the stream, which it keeps. */
static uint64_t stream_pos(struct ova *a)
{
    return on_stream(a) ? a->bd.file->pos : 0;
}

/* On a pipe, bytes of `mb` from its start up to where the pipe is now are
 * gone: it cannot be read any more. */
static bool member_passed(struct ova *a, const struct ova_member *mb)
{
    uint64_t pos = stream_pos(a);
    if (!on_stream(a) || mb->off >= pos)
        return false;
    uint64_t end = mb->size < pos - mb->off ? mb->off + mb->size : pos;
    return end > BFILE_STREAM_HEAD;
}

static int add_member(struct ova *a, const char *raw_name, enum member_kind kind,
                      uint64_t off, uint64_t size)
{
    struct diag *d = a->bd.diag;

    if (a->n_m == a->cap_m) {
        size_t cap = a->cap_m ? a->cap_m * 2 : 16;
        struct ova_member *n = realloc(a->m, cap * sizeof(*n));
        if (!n)
            return diag_fail(d, -ENOMEM, apath(a), -1, "out of memory");
        a->m = n;
        a->cap_m = cap;
    }
    struct ova_member *mb = &a->m[a->n_m];
    memset(mb, 0, sizeof(*mb));
    mb->name = tar_member_path("", raw_name);   /* NULL: leaves the archive */
    if (mb->name) {
        a->name_bytes += strlen(mb->name) + 1;
        if (a->name_bytes > TAR_MAX_NAME_BYTES) {
            free(mb->name);
            return diag_fail(d, -EINVAL, apath(a), (int64_t)off,
                             "the archive's member names take more than %u bytes",
                             TAR_MAX_NAME_BYTES);
        }
    }
    mb->kind = kind;
    mb->off = off;
    mb->size = size;
    a->n_m++;
    return 0;
}

/* Read the next header(s) at a->pos; a member is appended (1), or the end
 * was reached (0), or an error.  Meta records (long names, pax) are applied
 * to the member that follows them. */
static int walk_next(struct ova *a)
{
    struct bfile *f = a->bd.file;
    struct diag *d = a->bd.diag;
    uint8_t b[TAR_BLOCK];
    int r;

    if (a->walk_done)
        return 0;
    for (;;) {
        struct tar_member m;
        size_t got;

        /* on a pipe, skipping a member's data loses it: refuse if an image
         * still reads it (a descriptor was read whole: it may go) */
        if (on_stream(a) && a->n_m) {
            const struct ova_member *last = &a->m[a->n_m - 1];
            if (last->handed_out && !last->is_descriptor && stream_pos(a) < a->pos &&
                last->off + last->size > BFILE_STREAM_HEAD)
                return diag_fail(d, -ESPIPE, apath(a), (int64_t)a->pos,
                                 "from a pipe, the members of an archive can only be read "
                                 "in order: a reference needs a member after '%s', which "
                                 "is still being read; read the OVA from a file",
                                 last->name);
        }
        if (a->headers >= OVA_MAX_MEMBERS)
            return diag_fail(d, -EINVAL, f->path, (int64_t)a->pos,
                             "archive has more than %u members", OVA_MAX_MEMBERS);
        a->headers++;
        r = bfile_pread_upto(f, b, TAR_BLOCK, a->pos, &got);
        if (r < 0)
            return r;
        if (got == 0) {
            a->walk_done = true;
            return 0;   /* end without the two zero blocks: tolerated */
        }
        if (got < TAR_BLOCK)
            return diag_fail(d, -EIO, f->path, (int64_t)a->pos,
                             "archive ends inside a tar header");
        r = tar_header_decode(b, &m, d, f->path, (int64_t)a->pos);
        if (r < 0)
            return r;
        if (m.kind == TAR_END) {
            a->walk_done = true;
            return 0;
        }
        uint64_t hdr = a->pos, data = hdr + TAR_BLOCK;
        uint64_t size = m.size;
        if (m.kind != TAR_LONGNAME && m.kind != TAR_PAX && a->pend.have_size) {
            if (a->pend.size > (1ull << 50))
                return diag_fail(d, -EINVAL, f->path, (int64_t)hdr,
                                 "tar member of %llu bytes (pax size) is too large",
                                 (unsigned long long)a->pend.size);
            size = a->pend.size;
        }
        if (f->size != UINT64_MAX && (data > f->size || size > f->size - data))
            return diag_fail(d, -EIO, f->path, (int64_t)hdr,
                             "tar member '%s' of %llu bytes runs past the end of the archive",
                             a->pend.have_name ? a->pend.name : m.name,
                             (unsigned long long)size);
        a->pos = data + (size + TAR_BLOCK - 1) / TAR_BLOCK * TAR_BLOCK;
        if (m.kind == TAR_LONGNAME || m.kind == TAR_PAX) {
            size_t cap = m.kind == TAR_LONGNAME ? TAR_MAX_NAME + 1 : OVA_MAX_PAX;
            if (m.size > cap)
                return diag_fail(d, -EINVAL, f->path, (int64_t)hdr,
                                 "tar %s record of %llu bytes is too long (max %zu)",
                                 m.kind == TAR_LONGNAME ? "long name" : "pax",
                                 (unsigned long long)m.size, cap);
            char *rec = malloc((size_t)m.size + 1);
            if (!rec)
                return diag_fail(d, -ENOMEM, f->path, -1, "out of memory");
            r = bfile_pread(f, rec, (size_t)m.size, data);
            if (r < 0) {
                free(rec);
                return r;
            }
            rec[m.size] = '\0';
            if (m.kind == TAR_LONGNAME) {
                /* the name and its NUL; nothing may follow the NUL */
                size_t n = strnlen(rec, (size_t)m.size);
                for (size_t i = n; i < m.size; i++)
                    if (rec[i]) {
                        free(rec);
                        return diag_fail(d, -EINVAL, f->path, (int64_t)data,
                                         "tar long name holds a NUL byte");
                    }
                memcpy(a->pend.name, rec, n + 1);
                a->pend.have_name = true;
            } else {
                struct tar_pax *pi = malloc(sizeof(*pi));
                bool ok = pi && tar_pax_decode(rec, (size_t)m.size, pi);
                if (ok) {
                    if (pi->have_path) {
                        strcpy(a->pend.name, pi->path);
                        a->pend.have_name = true;
                    }
                    if (pi->have_size) {
                        a->pend.size = pi->size;
                        a->pend.have_size = true;
                    }
                    a->pend.sparse |= pi->sparse;
                }
                free(pi);
                if (!ok) {
                    free(rec);
                    return diag_fail(d, -EINVAL, f->path, (int64_t)data,
                                     "tar pax extended header is malformed");
                }
            }
            free(rec);
            continue;
        }
        enum member_kind kind = m.kind != TAR_FILE ? MEMBER_OTHER :
                                a->pend.sparse ? MEMBER_SPARSE : MEMBER_FILE;
        if (b[156] == 'S')      /* old GNU sparse file */
            kind = MEMBER_SPARSE;
        r = add_member(a, a->pend.have_name ? a->pend.name : m.name, kind, data, size);
        memset(&a->pend, 0, sizeof(a->pend));
        return r < 0 ? r : 1;
    }
}

/* --- which members are disks ------------------------------------------------- */

static int cmp_str(const void *x, const void *y)
{
    return strcmp(*(char *const *)x, *(char *const *)y);
}

static bool named_as_extent(struct ova *a, const char *name)
{
    return a->n_ext_names &&
           bsearch(&name, a->ext_names, a->n_ext_names, sizeof(char *), cmp_str);
}

/* Remember the extent files descriptor member `mb` lists. */
static int note_extents(struct ova *a, const struct ova_member *mb, const char *text,
                        size_t len)
{
    struct vmdk_desc desc;
    char *dir;

    memset(&desc, 0, sizeof(desc));
    if (vmdk_desc_parse(text, len, &desc, NULL, NULL, 0) < 0)
        return 0;       /* not a descriptor after all: opening it says why */
    dir = member_dir(mb->name);
    if (!dir) {
        vmdk_desc_free(&desc);
        return diag_fail(a->bd.diag, -ENOMEM, apath(a), -1, "out of memory");
    }
    int r = 0;
    for (size_t i = 0; i < desc.n_ext && r == 0; i++) {
        if (!desc.ext[i].filename)
            continue;
        char *name = tar_member_path(dir, desc.ext[i].filename);
        if (!name)
            continue;   /* out of the archive: refused when opened */
        if (a->n_ext_names == a->cap_ext_names) {
            size_t cap = a->cap_ext_names ? a->cap_ext_names * 2 : 16;
            char **n = realloc(a->ext_names, cap * sizeof(*n));
            if (!n) {
                free(name);
                r = diag_fail(a->bd.diag, -ENOMEM, apath(a), -1, "out of memory");
                break;
            }
            a->ext_names = n;
            a->cap_ext_names = cap;
        }
        a->ext_names[a->n_ext_names++] = name;
    }
    free(dir);
    vmdk_desc_free(&desc);
    if (a->n_ext_names)
        qsort(a->ext_names, a->n_ext_names, sizeof(char *), cmp_str);
    return r;
}

/* Read the first bytes of a *.vmdk member and tell whether it can be a disk:
 * a descriptor (then read whole, and its extents noted) or a sparse file
 * with an embedded descriptor.  Anything else (flat data, a sparse extent
 * without a descriptor, COWD) is an extent.  *head gets the bytes read
 * (malloc'd) when `keep` is set. */
static int classify(struct ova *a, struct ova_member *mb, uint8_t **head, size_t *head_len,
                    bool keep)
{
    size_t want = mb->size < OVA_PROBE_BYTES ? (size_t)mb->size : OVA_PROBE_BYTES;
    uint8_t *buf = malloc(want ? want : 1);
    int r;

    if (!buf)
        return diag_fail(a->bd.diag, -ENOMEM, apath(a), -1, "out of memory");
    r = bfile_pread(a->bd.file, buf, want, mb->off);
    if (r < 0)
        goto out;
    mb->role = ROLE_EXTENT;
    if (want >= 4 && le32_get(buf) == VMDK4_MAGIC) {
        /* a disk has a descriptor at descriptorOffset (byte 28); the
         * extents of a twoGbMaxExtentSparse disk have room for one there,
         * but zeros in it */
        uint64_t dsec = want >= 36 ? le64_get(buf + 28) : 0;
        if (dsec && dsec < OVA_MAX_DESC_SECTOR &&
            (dsec + 1) * VMDK_SECTOR <= mb->size) {
            size_t end = (size_t)(dsec + 1) * VMDK_SECTOR;
            if (end > want) {
                uint8_t *n = realloc(buf, end);
                if (!n) {
                    r = diag_fail(a->bd.diag, -ENOMEM, apath(a), -1, "out of memory");
                    goto out;
                }
                buf = n;
                if ((r = bfile_pread(a->bd.file, buf + want, end - want, mb->off + want)) < 0)
                    goto out;
                want = end;
            }
            if (vmdk_desc_probe(buf + end - VMDK_SECTOR, VMDK_SECTOR))
                mb->role = ROLE_DISK;
        }
    } else if (vmdk_desc_probe(buf, want)) {
        mb->role = ROLE_DISK;
        mb->is_descriptor = true;
        if (mb->size <= VMDK_MAX_DESC_BYTES) {
            a->desc_text += mb->size;
            if (a->desc_text > OVA_MAX_DESC_TEXT) {
                r = diag_fail(a->bd.diag, -EINVAL, apath(a), (int64_t)mb->off,
                              "the archive's descriptors hold more than %u bytes",
                              OVA_MAX_DESC_TEXT);
                goto out;
            }
            uint8_t *n = realloc(buf, (size_t)mb->size ? (size_t)mb->size : 1);
            if (!n) {
                r = diag_fail(a->bd.diag, -ENOMEM, apath(a), -1, "out of memory");
                goto out;
            }
            buf = n;
            if (mb->size > want &&
                (r = bfile_pread(a->bd.file, buf + want, (size_t)mb->size - want,
                                 mb->off + want)) < 0)
                goto out;
            want = (size_t)mb->size;
            if ((r = note_extents(a, mb, (const char *)buf, want)) < 0)
                goto out;
        } else {
            mb->is_descriptor = false;  /* not read whole (the reader refuses it) */
        }
    }
    if (keep) {
        *head = buf;
        *head_len = want;
        buf = NULL;
    }
out:
    free(buf);
    return r;
}

static bool is_vmdk_file(const struct ova_member *mb)
{
    return mb->name && mb->kind == MEMBER_FILE && ends_with_ci(mb->name, ".vmdk");
}

static int add_disk(struct ova *a, size_t i)
{
    if (a->n_disks >= OVA_MAX_DISKS)
        return diag_fail(a->bd.diag, -EINVAL, apath(a), (int64_t)a->m[i].off,
                         "archive has more than %u disks", OVA_MAX_DISKS);
    size_t *n = realloc(a->disks, (a->n_disks + 1) * sizeof(*n));
    if (!n)
        return diag_fail(a->bd.diag, -ENOMEM, apath(a), -1, "out of memory");
    a->disks = n;
    a->disks[a->n_disks++] = i;
    return 0;
}

/* A file: walk every member, then tell disks from extents. */
static int find_disks_file(struct ova *a)
{
    int r;

    while ((r = walk_next(a)) > 0)
        ;
    if (r < 0)
        return r;
    for (size_t i = 0; i < a->n_m; i++)
        if (is_vmdk_file(&a->m[i]) && (r = classify(a, &a->m[i], NULL, NULL, false)) < 0)
            return r;
    for (size_t i = 0; i < a->n_m; i++) {
        struct ova_member *mb = &a->m[i];
        if (mb->role != ROLE_DISK)
            continue;
        if (named_as_extent(a, mb->name))
            mb->role = ROLE_EXTENT;
        else if ((r = add_disk(a, i)) < 0)
            return r;
    }
    return 0;
}

/* A pipe: walk up to disk `want`, classifying the *.vmdk members on the
 * way (only descriptors before a member can name it as an extent); the
 * disk's first bytes are kept in *head. */
static int find_disks_stream(struct ova *a, unsigned want, uint8_t **head, size_t *head_len)
{
    int r;

    while ((r = walk_next(a)) > 0) {
        size_t i = a->n_m - 1;
        struct ova_member *mb = &a->m[i];
        if (!is_vmdk_file(mb) || named_as_extent(a, mb->name))
            continue;
        uint8_t *buf = NULL;
        size_t len = 0;
        if ((r = classify(a, mb, &buf, &len, true)) < 0)
            return r;
        if (mb->role == ROLE_DISK) {
            if ((r = add_disk(a, i)) < 0) {
                free(buf);
                return r;
            }
            if (a->n_disks > want) {
                *head = buf;
                *head_len = len;
                return 0;
            }
        }
        free(buf);
    }
    return r;
}

/* --- members as files ---------------------------------------------------------- */

/* By name; equal names in archive order (the first one is found). */
static int cmp_member(const void *x, const void *y, void *ctx)
{
    const struct ova *a = ctx;
    size_t i = *(const size_t *)x, j = *(const size_t *)y;
    int c = strcmp(a->m[i].name, a->m[j].name);
    return c ? c : (i > j) - (i < j);
}

/* Members by name: the sorted index covers the members walked so far but
 * the last few (a pipe walks on while references are looked up); it is
 * rebuilt when they grow many, so that thousands of references to an
 * archive of thousands of members stay cheap. */
#define OVA_UNSORTED_MAX 256u

static int index_members(struct ova *a)
{
    if (a->cap_sorted < a->n_m) {
        size_t *n = realloc(a->sorted, a->n_m * sizeof(*n));
        if (!n)
            return diag_fail(a->bd.diag, -ENOMEM, apath(a), -1, "out of memory");
        a->sorted = n;
        a->cap_sorted = a->n_m;
    }
    size_t k = 0;
    for (size_t i = 0; i < a->n_m; i++)
        if (a->m[i].name)
            a->sorted[k++] = i;
    if (k)
        qsort_r(a->sorted, k, sizeof(*a->sorted), cmp_member, a);
    a->n_sorted = k;
    a->indexed = a->n_m;
    return 0;
}

/* The first member in the archive called `name`: 1 and *at, 0 if none. */
static int find_member(struct ova *a, const char *name, size_t *at)
{
    int r;

    if (a->n_m - a->indexed > OVA_UNSORTED_MAX && (r = index_members(a)) < 0)
        return r;
    size_t lo = 0, hi = a->n_sorted;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (strcmp(a->m[a->sorted[mid]].name, name) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo < a->n_sorted && strcmp(a->m[a->sorted[lo]].name, name) == 0) {
        *at = a->sorted[lo];
        return 1;
    }
    for (size_t i = a->indexed; i < a->n_m; i++)
        if (a->m[i].name && strcmp(a->m[i].name, name) == 0) {
            *at = i;
            return 1;
        }
    return 0;
}

/* The member whose data starts at `off` (members are in archive order). */
static struct ova_member *member_at(struct ova *a, uint64_t off)
{
    size_t lo = 0, hi = a->n_m;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (a->m[mid].off < off)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < a->n_m && a->m[lo].off == off ? &a->m[lo] : NULL;
}

static int open_slice(struct ova *a, size_t i, uint8_t *head, size_t head_len,
                      struct bfile **out)
{
    struct ova_member *mb = &a->m[i];
    char *sname;

    if (asprintf(&sname, "%s[%s]", apath(a), mb->name) < 0) {
        free(head);
        return diag_fail(a->bd.diag, -ENOMEM, apath(a), -1, "out of memory");
    }
    int r = head ? bfile_open_slice_head(out, a->bd.file, mb->off, mb->size, sname, head,
                                         head_len)
                 : bfile_open_slice(out, a->bd.file, mb->off, mb->size, sname);
    free(sname);
    if (r == 0) {
        mb->handed_out = true;
        /* a member read whole from a pipe may be skipped afterwards */
        if (head && head_len == mb->size)
            mb->is_descriptor = true;
    }
    return r;
}

/* A reference made by the image in member `from` (a slice this archive
 * handed out): the member it names, relative to `from`'s folder. */
static int ova_open_member(struct bd *bd, const struct bfile *from, const char *ref,
                           struct bfile **out)
{
    struct ova *a = to_ova(bd);
    struct diag *d = bd->diag;
    const struct ova_member *src = NULL;
    char *dir, *name;
    int r;

    *out = NULL;
    if (from->kind == BFILE_SLICE && from->base == bd->file)
        src = member_at(a, from->base_off);
    if (!src || !src->handed_out)
        return diag_fail(d, -EPERM, from->path, -1,
                         "internal error: a reference from outside the archive");
    if (ref[0] == '/')
        return diag_fail(d, -EPERM, from->path, -1,
                         "refers to '%s', an absolute path: inside an OVA archive, "
                         "references name members of the archive, never host files", ref);
    if (!(dir = member_dir(src->name)))
        return diag_fail(d, -ENOMEM, apath(a), -1, "out of memory");
    name = tar_member_path(dir, ref);
    free(dir);
    if (!name)
        return diag_fail(d, -EPERM, from->path, -1,
                         "refers to '%s', which leads out of the OVA archive: references "
                         "inside an archive name its members, never host files", ref);
    size_t i = 0;
    int found = find_member(a, name, &i);
    /* on a pipe the member may still be ahead */
    while (found == 0 && on_stream(a) && !a->walk_done) {
        found = walk_next(a);
        if (found > 0) {
            i = a->n_m - 1;
            found = a->m[i].name && strcmp(a->m[i].name, name) == 0;
        }
    }
    if (found < 0) {
        free(name);
        return found;
    }
    if (!found) {
        r = diag_fail(d, -ENOENT, from->path, -1,
                      "refers to '%s', which is not a member of the archive (looked for "
                      "'%s')", ref, name);
        free(name);
        return r;
    }
    free(name);
    struct ova_member *mb = &a->m[i];
    if (mb->kind != MEMBER_FILE)
        return diag_fail(d, -EINVAL, from->path, -1,
                         "refers to '%s', which is %s in the archive", ref,
                         mb->kind == MEMBER_SPARSE ?
                         "stored as a sparse tar member (not supported)" :
                         "not a regular file (a folder, link or device entry)");
    if (member_passed(a, mb))
        return diag_fail(d, -ESPIPE, from->path, -1,
                         "refers to '%s', which comes before it in the archive: from a "
                         "pipe, members can only be read in order; read the OVA from a "
                         "file", ref);
    return open_slice(a, i, NULL, 0, out);
}

static void ova_close(struct bd *bd)
{
    struct ova *a = to_ova(bd);

    bd_close(a->inner);   /* before the archive file its slices read from */
    for (size_t i = 0; i < a->n_m; i++)
        free(a->m[i].name);
    free(a->m);
    free(a->sorted);
    free(a->disks);
    for (size_t i = 0; i < a->n_ext_names; i++)
        free(a->ext_names[i]);
    free(a->ext_names);
    bd_release(bd);
    free(a);
}

static int ova_open(struct bd **out, struct bfile *f, const struct bd_open_opts *o,
                    struct bd *parent, struct diag *d)
{
    struct ova *a = calloc(1, sizeof(*a));
    struct bfile *slice;
    uint8_t *head = NULL;
    size_t head_len = 0;
    int r;

    *out = NULL;
    if (!a) {
        r = diag_fail(d, -ENOMEM, f->path, -1, "out of memory");
        bfile_close(f);
        return r;
    }
    bd_init(&a->bd, &bd_ova, f, d);
    a->bd.opts = *o;
    a->bd.parent = parent;
    a->bd.depth = parent ? parent->depth + 1 : 0;
    a->index = o->disk_index;
    if (on_stream(a))
        r = find_disks_stream(a, a->index, &head, &head_len);
    else
        r = find_disks_file(a);
    if (r < 0)
        goto fail;
    if ((r = index_members(a)) < 0)
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
    r = open_slice(a, a->disks[a->index], head, head_len, &slice);
    head = NULL;
    if (r < 0)
        goto fail;
    struct bd_open_opts io = *o;
    /* no probing: the members are VMDKs */
    io.format = "vmdk";
    io.disk_index = 0;
    r = bd_open_bfile(&a->inner, slice, &io, &a->bd, d);
    if (r < 0)
        goto fail;
    a->bd.size = a->inner->size;
    a->bd.granule = a->inner->granule;
    a->bd.dirty = a->inner->dirty;
    *out = &a->bd;
    return 0;
fail:
    free(head);
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
        const struct ova_member *mb = &a->m[a->disks[i]];
        struct jval *o = jv_object();
        jv_set(o, "index", jv_uint(i));
        jv_set(o, "name", jv_str(mb->name));
        jv_set(o, "offset", jv_uint(mb->off));
        jv_set(o, "size", jv_uint(mb->size));
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
    .open_member = ova_open_member,
};
