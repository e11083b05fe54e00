/* Fuzz target: `rebase -b ""` and `rebase -u -b ""` of a hostile VMDK:
 * the grain fill of a safe rebase (formats/vmdk/inplace.c: what the parent
 * showed written into the image's unallocated grains, through rebase_copy
 * as the command does), then the descriptor rewritten without a parent
 * (set_backing.c, desc_edit.c).
 *
 * The input is one VMDK file (monolithicSparse and the like), or several
 * files in a "DIFZ" container (a descriptor with its extent files, a
 * parent): "DIFZ", then for each file a byte giving its name's length
 * (1-64), the name, its length (4 bytes, little-endian) and its bytes; the
 * first file is the image.  The in-place writers open the image and its
 * extents by name, so the files are written into a folder of this
 * process's own (under /dev/shm where there is one: nothing reaches a
 * disk), emptied before each input; every reference is opened beneath it
 * (nothing outside can be named: the reference rule).  A parent the image
 * names but the input lacks (or whose CID differs) is replaced by a raw
 * parent in memory whose bytes the input chooses, so that the rebase has
 * grains to write.
 *
 * Oracles, each an abort() the fuzzer reports:
 *   - a refused operation (check_backing, create, the grain fill, or
 *     set_backing -u) leaves every file byte for byte as it was, and no
 *     file is added;
 *   - an image our check finds corrupt is refused before any write;
 *   - a descriptor check_backing accepted is rewritten by set_backing;
 *   - after a successful rebase the image opens, names no parent (or
 *     parent.vmdk: -u -b parent.vmdk where the input has that file),
 *     checks without corruptions or check errors, and reads what it read
 *     before through its parent (safe) or through none (-u), within the
 *     first VIEW_MAX bytes;
 *   - an embedded descriptor is the old text with the new parent
 *     (desc_edit.c), then a NUL inside its area, zeros over the rest of
 *     the old text, and every byte after that as it was.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "formats/bd.h"
#include "formats/vmdk/read_int.h"
#include "formats/vmdk/vmdk.h"
#include "fuzz_common.h"
#include "io/bfile.h"
#include "rebase.h"
#include "util/diag.h"
#include "util/endian.h"

#define MAX_FILES   8
#define MAX_NAME    64
#define VIEW_MAX    (1u << 20)      /* guest bytes compared before and after */
#define PARENT_MAX  (1u << 20)      /* the stand-in parent's size at most */
#define MAX_VSIZE   (1ull << 32)    /* larger images are left to fuzz_vmdk */

struct file {
    char name[MAX_NAME + 1];
    const uint8_t *data;
    size_t len;
};

static char dir[256];

static void cleanup_dir(void)
{
    DIR *dp = dir[0] ? opendir(dir) : NULL;
    struct dirent *e;

    if (!dp)
        return;
    while ((e = readdir(dp)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
            unlinkat(dirfd(dp), e->d_name, 0);
    closedir(dp);
}

static void remove_dir(void)
{
    cleanup_dir();
    if (dir[0])
        rmdir(dir);
}

static int make_dir(void)
{
    const char *base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : getenv("TMPDIR");

    if (dir[0])
        return 0;
    snprintf(dir, sizeof(dir), "%s/fuzz-vmdk-XXXXXX", base && *base ? base : "/tmp");
    if (!mkdtemp(dir)) {
        dir[0] = 0;
        return -1;
    }
    atexit(remove_dir);
    return 0;
}

/* The files of the input (see the top); 0 when there are none. */
static size_t split(const uint8_t *data, size_t size, struct file *fs)
{
    if (size < 4 || memcmp(data, "DIFZ", 4) != 0) {
        strcpy(fs[0].name, "img.vmdk");
        fs[0].data = data;
        fs[0].len = size;
        return size ? 1 : 0;
    }
    size_t n = 0, p = 4;
    while (n < MAX_FILES && p < size) {
        size_t nl = data[p++];
        if (nl < 1 || nl > MAX_NAME || nl > size - p)
            break;
        struct file *f = &fs[n];
        for (size_t i = 0; i < nl; i++) {
            char c = (char)data[p + i];
            bool okc = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                       (c >= '0' && c <= '9') || c == '-' || c == '_' || (c == '.' && i);
            f->name[i] = okc ? c : '_';
        }
        f->name[nl] = 0;
        p += nl;
        size_t len = 0;
        if (size - p >= 4) {
            len = le32_get(data + p);
            p += 4;
        } else {
            p = size;
        }
        if (len > size - p)
            len = size - p;
        f->data = data + p;
        f->len = len;
        p += len;
        bool dup = false;
        for (size_t j = 0; j < n; j++)
            dup |= strcmp(fs[j].name, f->name) == 0;
        if (!dup)
            n++;
    }
    return n;
}

static void path_of(char *buf, size_t n, const char *name)
{
    snprintf(buf, n, "%s/%s", dir, name);
}

static int write_files(const struct file *fs, size_t n)
{
    char p[1024];

    for (size_t i = 0; i < n; i++) {
        path_of(p, sizeof(p), fs[i].name);
        int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        if (fd < 0)
            return -1;
        ssize_t w = fs[i].len ? write(fd, fs[i].data, fs[i].len) : 0;
        close(fd);
        if (w != (ssize_t)fs[i].len)
            return -1;
    }
    return 0;
}

/* Every file as the input gave it, and no other file in the folder. */
static bool files_same(const struct file *fs, size_t n)
{
    char p[1024];
    size_t count = 0;
    DIR *dp = opendir(dir);
    struct dirent *e;

    if (!dp)
        return false;
    while ((e = readdir(dp)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
            count++;
    closedir(dp);
    if (count != n)
        return false;
    for (size_t i = 0; i < n; i++) {
        path_of(p, sizeof(p), fs[i].name);
        int fd = open(p, O_RDONLY | O_CLOEXEC);
        struct stat st;
        if (fd < 0 || fstat(fd, &st) < 0 || (uint64_t)st.st_size != fs[i].len) {
            if (fd >= 0)
                close(fd);
            return false;
        }
        uint8_t *b = malloc(fs[i].len ? fs[i].len : 1);
        bool same = b && read(fd, b, fs[i].len) == (ssize_t)fs[i].len &&
                    memcmp(b, fs[i].data, fs[i].len) == 0;
        free(b);
        close(fd);
        if (!same)
            return false;
    }
    return true;
}

static struct bd_open_opts opts(bool no_backing, bool writable)
{
    struct bd_open_opts o = { 0 };

    o.format = "vmdk";
    o.no_backing = no_backing;
    o.writable = writable;
    return o;
}

/* The guest bytes [0, n) of `bd`; false if any read fails. */
static bool view(struct bd *bd, uint8_t *buf, uint64_t n)
{
    for (uint64_t off = 0; off < n;) {
        uint64_t k = n - off < 65536 ? n - off : 65536;
        if (bd_pread(bd, buf + off, (size_t)k, off) < 0)
            return false;
        off += k;
    }
    return true;
}

static bool check_clean(struct bd *bd, struct bd_check_result *res)
{
    memset(res, 0, sizeof(*res));
    return bd->drv->check && bd->drv->check(bd, res, 0) == 0 && !res->corruptions &&
           !res->check_errors;
}

/* The embedded descriptor of the image file `img` (a KDMV header) after
 * set_backing: exactly the old text with the new parent (desc_edit.c's
 * vmdk_desc_set_parent of the old area), its NUL inside the area, zeros
 * over the rest of the old text, and every byte after that as it was. */
static void check_embedded(const char *img, const struct file *old, const char *hint,
                           uint32_t cid)
{
    if (old->len < 512 || le32_get(old->data) != 0x564d444bu)
        return;
    uint64_t off = le64_get(old->data + 28) * 512, len = le64_get(old->data + 36) * 512;
    if (!off || off >= old->len || len > old->len - off || len > (1u << 20))
        return;
    const uint8_t *was = old->data + off;
    char *want_text = NULL;
    size_t want_len = 0;
    if (vmdk_desc_set_parent((const char *)was, len, hint, cid, &want_text, &want_len) < 0)
        abort();    /* set_backing built it */
    uint8_t *now = malloc(len);
    int fd = open(img, O_RDONLY | O_CLOEXEC);
    if (!now || fd < 0 || pread(fd, now, len, (off_t)off) != (ssize_t)len)
        abort();
    close(fd);
    if (want_len >= len || memcmp(now, want_text, want_len) != 0 || now[want_len] != 0)
        abort();    /* not the new text, or no NUL after it inside the area */
    size_t old_len = strnlen((const char *)was, len);
    for (size_t i = want_len + 1; i < len; i++)
        if (i < old_len ? now[i] != 0 : now[i] != was[i])
            abort();    /* old text left after the new one, or other bytes changed */
    free(now);
    free(want_text);
}

static uint8_t parent_buf[PARENT_MAX];

/* The stand-in parent: a raw image in memory, some sectors zero. */
static int stand_in(struct bd *img, uint64_t len, uint8_t salt, struct diag *d)
{
    struct bd_open_opts o = { 0 };
    struct bd *p = NULL;

    for (uint64_t s = 0; s < len / 512; s++)
        for (size_t k = 0; k < 512; k++)
            parent_buf[s * 512 + k] = (s * 7 + salt) % 5 == 0 ? 0 :
                                      (uint8_t)(s * 31 + k + salt + 1);
    o.format = "raw";
    o.no_external_files = true;
    if (fuzz_open_mem(&p, parent_buf, (size_t)len, "parent.raw", &o, d) < 0)
        return -1;
    p->parent = img;
    p->depth = 1;
    img->backing = p;
    img->backing_missing = false;
    return 0;
}

static void run(const struct file *fs, size_t nf, uint8_t sel)
{
    char img_path[1024];
    struct diag d;
    struct bd *img = NULL, *out = NULL, *bd = NULL;
    struct bd_open_opts oo;
    struct bd_check_result before, after;
    bool unsafe = (sel & 3) == 3;
    const char *new_parent = NULL;
    uint32_t new_cid = 0;
    /* (static: buffers of this size malloc'd anew would be mapped and
     * faulted in for every input) */
    static uint8_t want[VIEW_MAX], got[VIEW_MAX];

    path_of(img_path, sizeof(img_path), fs[0].name);
    /* the image with its chain, or without (the stand-in parent then) */
    diag_init(&d);
    oo = opts(unsafe, false);
    if (bd_open(&img, img_path, &oo, &d) < 0) {
        if (unsafe)
            return;
        diag_init(&d);
        oo = opts(true, false);
        if (bd_open(&img, img_path, &oo, &d) < 0)
            return;
    }
    uint64_t vsize = img->size, n = vsize < VIEW_MAX ? vsize : VIEW_MAX;
    if (vsize == 0 || vsize > MAX_VSIZE)
        goto out;
    if (!unsafe && !img->backing && (sel & 4) == 0) {
        uint64_t plen = vsize < PARENT_MAX ? vsize : PARENT_MAX;
        if (sel & 8)
            plen = plen / 2 / 512 * 512;
        if (plen && stand_in(img, plen, sel, &d) < 0)
            goto out;
    }
    bool ok_before = check_clean(img, &before);
    bool readable = view(img, want, n);

    if (unsafe) {
        /* rebase -u -b "" (or -u -b parent.vmdk -F vmdk where the input
         * has that file): the descriptor alone */
        bd_close(img);
        img = NULL;
        for (size_t i = 1; i < nf && (sel & 4); i++)
            if (!strcmp(fs[i].name, "parent.vmdk"))
                new_parent = fs[i].name;
        diag_init(&d);
        oo = opts(true, true);
        if (bd_open(&bd, img_path, &oo, &d) < 0)
            abort();    /* it opened read-only */
        int r = bd->drv->set_backing(bd, new_parent, new_parent ? "vmdk" : NULL);
        bd_close(bd);
        bd = NULL;
        if (r == 0 && new_parent) {
            /* the CID it wrote: the parent's */
            char pp[1024];
            struct bd *p = NULL;
            path_of(pp, sizeof(pp), new_parent);
            diag_init(&d);
            oo = opts(true, false);
            if (bd_open(&p, pp, &oo, &d) < 0 || p->drv != &bd_vmdk)
                abort();
            const struct vmdk *pv = (const struct vmdk *)p;
            new_cid = pv->desc.has_cid ? pv->desc.cid : 0;
            bd_close(p);
        }
        if (r < 0) {
            if (!files_same(fs, nf))
                abort();
            goto out;
        }
    } else {
        /* rebase -b "": what the command does (cmd_rebase.c safe_copy) */
        diag_init(&d);
        if (img->drv->check_backing(img, NULL, NULL) < 0) {
            if (!files_same(fs, nf))
                abort();
            goto out;
        }
        struct bfile *f = NULL;
        struct bd_create_opts co = { .size = vsize, .durable = true, .existing = true,
                                     .fill_unallocated = true };
        if (bfile_open(&f, img_path, BFILE_O_RDWR, &d) < 0)
            goto out;
        if (img->drv->create(&out, f, &co, &d) < 0) {
            bfile_close(f);
            if (!files_same(fs, nf))
                abort();
            goto out;
        }
        /* accepted: it must have been a sound image */
        if (!ok_before)
            abort();
        struct rebase_opts ro = { .img = img, .new_backing = NULL, .out = out };
        uint64_t written;
        int r = rebase_copy(&ro, &d, &written);
        if (r == 0)
            r = out->drv->finish(out);
        else
            out->drv->abort(out);
        out->drv->close(out);
        out = NULL;
        if (r < 0) {
            if (!files_same(fs, nf))
                abort();
            goto out;
        }
        bd_close(img);
        img = NULL;
        /* then the descriptor (cmd_rebase.c set_header) */
        diag_init(&d);
        oo = opts(true, true);
        if (bd_open(&bd, img_path, &oo, &d) < 0 || bd->drv->set_backing(bd, NULL, NULL) < 0)
            abort();    /* check_backing accepted it */
        bd_close(bd);
        bd = NULL;
    }

    /* the image now: no parent (or the new one), sound, the same content
     * (of its own, over zeros, after -u) */
    diag_init(&d);
    oo = opts(new_parent != NULL, false);
    if (bd_open(&bd, img_path, &oo, &d) < 0)
        abort();
    if (new_parent ? !bd->backing_name || strcmp(bd->backing_name, new_parent) != 0
                   : bd->backing_name || bd->backing)
        abort();
    if (bd->size != vsize)
        abort();
    if (ok_before && (!check_clean(bd, &after) || after.leaks > before.leaks))
        abort();
    if (readable && (!view(bd, got, n) || memcmp(want, got, n) != 0))
        abort();
    check_embedded(img_path, &fs[0], new_parent, new_parent ? new_cid : 0xffffffffu);
out:
    if (out)
        out->drv->close(out);
    bd_close(bd);
    bd_close(img);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct file fs[MAX_FILES];
    size_t nf = split(data, size, fs);

    if (!nf || make_dir() < 0)
        return 0;
    cleanup_dir();
    if (write_files(fs, nf) == 0)
        run(fs, nf, size ? data[size - 1] ^ data[size / 2] : 0);
    cleanup_dir();
    return 0;
}
