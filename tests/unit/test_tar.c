/* tar names and pax records: the pure functions the OVA reader uses. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "formats/ova/tar.h"

static void path_is(const char *dir, const char *rel, const char *want)
{
    char *p = tar_member_path(dir, rel);
    CHECK(want ? p && strcmp(p, want) == 0 : p == NULL, "'%s' + '%s': got '%s', want '%s'",
          dir, rel, p ? p : "(null)", want ? want : "(null)");
    free(p);
}

static void test_paths(void)
{
    path_is("", "disk.vmdk", "disk.vmdk");
    path_is("", "./disk.vmdk", "disk.vmdk");
    path_is("", "/disk.vmdk", "disk.vmdk");          /* tar drops a leading '/' */
    path_is("disks", "x-flat.vmdk", "disks/x-flat.vmdk");
    path_is("disks", "../x.vmdk", "x.vmdk");
    path_is("a/b", "..//./../c", "c");
    path_is("", "../x", NULL);                        /* out of the archive */
    path_is("disks", "../../x", NULL);
    path_is("disks", "..", NULL);                     /* the root itself */
    path_is("", ".", NULL);
    path_is("", "", NULL);
    path_is("d/", "e/", "d/e");
}

static void test_pax(void)
{
    struct tar_pax pi;
    const char ok[] = "30 mtime=1432668825.000000000\n25 path=a/long/name.vmdk\n"
                      "16 size=1234567\n";
    CHECK(tar_pax_decode(ok, strlen(ok), &pi));
    CHECK(pi.have_path && strcmp(pi.path, "a/long/name.vmdk") == 0);
    CHECK(pi.have_size && pi.size == 1234567 && !pi.sparse);
    const char sp[] = "22 GNU.sparse.major=1\n";
    CHECK(tar_pax_decode(sp, strlen(sp), &pi) && pi.sparse && !pi.have_path);
    CHECK(!tar_pax_decode("99 path=x\n", 10, &pi));           /* runs past the end */
    CHECK(!tar_pax_decode("abc", 3, &pi));
    CHECK(!tar_pax_decode("9 path=x", 8, &pi));
    CHECK(tar_pax_decode("10 path=x\n", 10, &pi) && strcmp(pi.path, "x") == 0);
    CHECK(!tar_pax_decode("11 path=x\0y\n", 12, &pi));        /* NUL in the path */
    CHECK(!tar_pax_decode("8 noeq\n", 7, &pi));
    CHECK(!tar_pax_decode("12 size=12a\n", 12, &pi));
    CHECK(!tar_pax_decode("29 size=123456789012345678\n", 27, &pi));  /* > 16 digits */
    CHECK(!tar_pax_decode("0 \n", 3, &pi));
    /* paths of TAR_MAX_NAME bytes fit, one more does not */
    for (size_t n = TAR_MAX_NAME; n <= TAR_MAX_NAME + 1; n++) {
        char *rec = malloc(n + 32);
        size_t body = n + 7;                   /* " path=" + value + "\n" */
        size_t total = body + 4;               /* with the 4 digits of the length */
        int len = snprintf(rec, 32, "%zu path=", total);
        memset(rec + len, 'x', n);
        rec[len + n] = '\n';
        CHECK((size_t)len + n + 1 == total);
        bool r = tar_pax_decode(rec, total, &pi);
        CHECK(n == TAR_MAX_NAME ? r && strlen(pi.path) == n : !r, "n=%zu", n);
        free(rec);
    }
}

int main(void)
{
    test_paths();
    test_pax();
    if (failures) {
        fprintf(stderr, "%d check(s) failed\n", failures);
        return 1;
    }
    printf("test_tar: ok\n");
    return 0;
}
