/* References: open_beneath() with openat2 and its fallback walk, on a tree
 * of files and symlinks built here; and the options an image of a chain
 * keeps (a copy, not a pointer into a caller's stack frame). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "formats/bd.h"
#include "io/beneath.h"
#include "util/diag.h"

static char root[PATH_MAX];

static void put(const char *rel, const char *text)
{
    char p[PATH_MAX + 100];
    snprintf(p, sizeof(p), "%s/%s", root, rel);
    FILE *f = fopen(p, "w");
    CHECK(f != NULL, "%s", p);
    if (f) {
        fputs(text, f);
        fclose(f);
    }
}

static void link_(const char *target, const char *rel)
{
    char p[PATH_MAX + 100];
    snprintf(p, sizeof(p), "%s/%s", root, rel);
    CHECK(symlink(target, p) == 0, "symlink %s", p);
}

/* What opening `rel` beneath root/img gives: the file's first byte, or the
 * negative errno. */
static int first_byte(int (*op)(int, const char *, int), int dirfd, const char *rel)
{
    int fd = op(dirfd, rel, O_RDONLY);
    if (fd < 0)
        return fd;
    char c = 0;
    ssize_t n = read(fd, &c, 1);
    close(fd);
    return n == 1 ? c : -EIO;
}

static void test_beneath(void)
{
    char p[PATH_MAX + 100];
    snprintf(p, sizeof(p), "%s/img", root);
    CHECK(mkdir(p, 0755) == 0);
    snprintf(p, sizeof(p), "%s/img/sub", root);
    CHECK(mkdir(p, 0755) == 0);
    put("secret", "S");
    put("img/a", "A");
    put("img/sub/b", "B");
    link_("../secret", "img/out");            /* out of the folder */
    link_("/etc/passwd", "img/abs");          /* absolute */
    link_("sub/b", "img/in");                 /* inside */
    link_("../a", "img/sub/up");              /* up, still inside */
    link_("sub", "img/subdir");               /* a folder inside */
    link_("..", "img/parent");                /* the folder's parent */
    link_("loop2", "img/loop1");
    link_("loop1", "img/loop2");
    link_("../../img/a", "img/sub/around");   /* out and back in */

    snprintf(p, sizeof(p), "%s/img", root);
    int dfd = open(p, O_PATH | O_DIRECTORY);
    CHECK(dfd >= 0);
    int (*ops[2])(int, const char *, int) = { open_beneath, open_beneath_walk };
    for (int i = 0; i < 2; i++) {
        int (*op)(int, const char *, int) = ops[i];
        CHECK(first_byte(op, dfd, "a") == 'A', "op %d", i);
        CHECK(first_byte(op, dfd, "sub/b") == 'B', "op %d", i);
        CHECK(first_byte(op, dfd, "sub/../a") == 'A', "op %d", i);
        CHECK(first_byte(op, dfd, "./sub//b") == 'B', "op %d", i);
        CHECK(first_byte(op, dfd, "in") == 'B', "op %d", i);
        CHECK(first_byte(op, dfd, "sub/up") == 'A', "op %d", i);
        CHECK(first_byte(op, dfd, "subdir/b") == 'B', "op %d", i);
        CHECK(first_byte(op, dfd, "subdir/up") == 'A', "op %d", i);
        CHECK(first_byte(op, dfd, "out") == -EXDEV, "op %d: %d", i, first_byte(op, dfd, "out"));
        CHECK(first_byte(op, dfd, "abs") == -EXDEV, "op %d", i);
        CHECK(first_byte(op, dfd, "../secret") == -EXDEV, "op %d", i);
        CHECK(first_byte(op, dfd, "/etc/passwd") == -EXDEV, "op %d", i);
        CHECK(first_byte(op, dfd, "parent/secret") == -EXDEV, "op %d", i);
        CHECK(first_byte(op, dfd, "sub/around") == -EXDEV, "op %d", i);
        CHECK(first_byte(op, dfd, "loop1") == -ELOOP, "op %d", i);
        CHECK(first_byte(op, dfd, "missing") == -ENOENT, "op %d", i);
        CHECK(first_byte(op, dfd, "a/b") == -ENOTDIR, "op %d", i);
        /* a folder, opened as one */
        int fd = op(dfd, "subdir", O_PATH | O_DIRECTORY);
        CHECK(fd >= 0, "op %d: %d", i, fd);
        if (fd >= 0)
            close(fd);
        fd = op(dfd, ".", O_PATH | O_DIRECTORY);
        CHECK(fd >= 0, "op %d: %d", i, fd);
        if (fd >= 0)
            close(fd);
    }
    /* names too long for the walk's buffers */
    char *longname = malloc(PATH_MAX + 10);
    memset(longname, 'x', PATH_MAX + 9);
    longname[PATH_MAX + 9] = '\0';
    CHECK(open_beneath(dfd, longname, O_RDONLY) == -ENAMETOOLONG);
    CHECK(open_beneath_walk(dfd, longname, O_RDONLY) == -ENAMETOOLONG);
    longname[NAME_MAX + 1] = '\0';
    CHECK(open_beneath_walk(dfd, longname, O_RDONLY) == -ENAMETOOLONG);
    free(longname);
    close(dfd);
}

/* An image opened as a reference keeps its own copy of the options: they
 * stay valid after the call that opened it returned (before, the chain kept
 * a pointer to a copy on bd_open_ref's stack). */
static void test_opts_copy(void)
{
    char p[PATH_MAX + 100];
    put("img/base.raw", "0123456789abcdef");
    put("img/mid.vmdk", "# Disk DescriptorFile\nversion=1\nCID=00000001\n"
        "parentCID=ffffffff\ncreateType=\"monolithicFlat\"\n\nRW 1 FLAT \"flat.raw\" 0\n");
    put("img/top.vmdk", "# Disk DescriptorFile\nversion=1\nCID=00000002\n"
        "parentCID=00000001\nparentFileNameHint=\"mid.vmdk\"\n"
        "createType=\"monolithicFlat\"\n\nRW 1 FLAT \"flat.raw\" 0\n");
    char sector[512];
    memset(sector, 'F', sizeof(sector));
    snprintf(p, sizeof(p), "%s/img/flat.raw", root);
    FILE *f = fopen(p, "w");
    CHECK(f && fwrite(sector, 1, sizeof(sector), f) == sizeof(sector));
    if (f)
        fclose(f);

    struct diag d;
    struct bd *bd = NULL;
    diag_init(&d);
    {
        /* the caller's options go out of scope before they are looked at */
        struct bd_open_opts o = { .format = "vmdk", .ignore_parent_cid = true };
        snprintf(p, sizeof(p), "%s/img/top.vmdk", root);
        CHECK(bd_open(&bd, p, &o, &d) == 0, "%s", d.what);
        memset(&o, 0xff, sizeof(o));
    }
    if (!bd)
        return;
    CHECK(bd->backing != NULL);
    CHECK(bd->opts.ignore_parent_cid && !bd->opts.allow_external);
    if (bd->backing) {
        CHECK(bd->backing->opts.ignore_parent_cid);
        CHECK(!bd->backing->opts.allow_external && !bd->backing->opts.writable);
        CHECK(bd->backing->opts.snapshot == NULL);
    }
    char buf[512];
    CHECK(bd_pread(bd, buf, sizeof(buf), 0) == 0 && buf[0] == 'F');
    bd_close(bd);
}

int main(void)
{
    const char *tmp = getenv("TEST_TMP");
    snprintf(root, sizeof(root), "%s/bdref.XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(root)) {
        perror("mkdtemp");
        return 1;
    }
    test_beneath();
    test_opts_copy();
    if (failures) {
        fprintf(stderr, "%d check(s) failed\n", failures);
        return 1;
    }
    printf("test_bd_ref: ok\n");
    return 0;
}
