/* Unit tests of the descriptor rewrite for rebase (vmdk_desc_set_parent):
 * exactly the parent lines change, missing ones are added in qemu's and
 * VMware's order (never before the CID line), line ends are kept. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "formats/vmdk/read_int.h"

#include "check.h"

/* The rewrite of `in` must be `want`. */
static void expect(const char *in, const char *hint, uint32_t cid, const char *want)
{
    char *out = NULL;
    size_t len = 0;

    CHECK(vmdk_desc_set_parent(in, strlen(in), hint, cid, &out, &len) == 0);
    CHECK(out && len == strlen(want) && strcmp(out, want) == 0);
    if (out && strcmp(out, want))
        fprintf(stderr, "got:\n%s\nwant:\n%s\n", out, want);
    free(out);
}

static void test_replace(void)
{
    const char *qemu =
        "# Disk DescriptorFile\nversion=1\nCID=526ae02d\nparentCID=1dbe2212\n"
        "createType=\"monolithicSparse\"\nparentFileNameHint=\"base.vmdk\"\n"
        "# Extent description\nRW 8192 SPARSE \"child.vmdk\"\n";
    expect(qemu, "b2.vmdk", 0xabc, "# Disk DescriptorFile\nversion=1\nCID=526ae02d\n"
           "parentCID=00000abc\ncreateType=\"monolithicSparse\"\n"
           "parentFileNameHint=\"b2.vmdk\"\n# Extent description\n"
           "RW 8192 SPARSE \"child.vmdk\"\n");
    /* standalone: the hint line goes, parentCID ffffffff */
    expect(qemu, NULL, 0xffffffffu, "# Disk DescriptorFile\nversion=1\nCID=526ae02d\n"
           "parentCID=ffffffff\ncreateType=\"monolithicSparse\"\n# Extent description\n"
           "RW 8192 SPARSE \"child.vmdk\"\n");
}

static void test_insert(void)
{
    /* a standalone image gets a hint after createType */
    expect("version=1\nCID=1\nparentCID=ffffffff\ncreateType=\"twoGbMaxExtentSparse\"\n"
           "RW 8 SPARSE \"x-s001.vmdk\"\n", "p.vmdk", 0x12345678,
           "version=1\nCID=1\nparentCID=12345678\ncreateType=\"twoGbMaxExtentSparse\"\n"
           "parentFileNameHint=\"p.vmdk\"\nRW 8 SPARSE \"x-s001.vmdk\"\n");
    /* no parentCID line: after CID; no createType: the hint after it */
    expect("CID=fffffffe\nRW 8 FLAT \"f\" 0\n", "p.vmdk", 7,
           "CID=fffffffe\nparentCID=00000007\nparentFileNameHint=\"p.vmdk\"\n"
           "RW 8 FLAT \"f\" 0\n");
    /* createType before CID: the hint after the parent's CID, not before CID */
    expect("createType=\"monolithicFlat\"\nCID=1\nRW 8 FLAT \"f\" 0\n", "p.vmdk", 2,
           "createType=\"monolithicFlat\"\nCID=1\nparentCID=00000002\n"
           "parentFileNameHint=\"p.vmdk\"\nRW 8 FLAT \"f\" 0\n");
    /* no CID line at all: the parent's first */
    expect("RW 8 FLAT \"f\" 0\n", "p.vmdk", 3,
           "parentCID=00000003\nparentFileNameHint=\"p.vmdk\"\nRW 8 FLAT \"f\" 0\n");
}

static void test_forms(void)
{
    /* CRLF kept, spaces and case in keys, several hints all replaced */
    expect("CID=1\r\n  PARENTcid = 5\r\ncreateType=\"x\"\r\nparentFileNameHint = old\r\n"
           "parentFileNameHint=\"older\"\r\n", "n.vmdk", 9,
           "CID=1\r\nparentCID=00000009\r\ncreateType=\"x\"\r\nparentFileNameHint=\"n.vmdk\"\r\n"
           "parentFileNameHint=\"n.vmdk\"\r\n");
    /* CRLF for added lines; a last line without an end gets one */
    expect("CID=1\r\ncreateType=\"x\"\r\nRW 8 FLAT \"f\" 0", "n", 1,
           "CID=1\r\nparentCID=00000001\r\ncreateType=\"x\"\r\nparentFileNameHint=\"n\"\r\n"
           "RW 8 FLAT \"f\" 0\r\n");
    /* the text ends at the first NUL (embedded descriptors are padded) */
    const char padded[] = "CID=1\nparentCID=ffffffff\n\0\0garbage\n";
    char *out = NULL;
    size_t len = 0;
    CHECK(vmdk_desc_set_parent(padded, sizeof(padded) - 1, NULL, 0xffffffffu, &out, &len) == 0);
    CHECK(out && strcmp(out, "CID=1\nparentCID=ffffffff\n") == 0);
    free(out);
    /* comments and extent lines that mention the keys are left alone */
    expect("# parentCID=1 parentFileNameHint=\"x\"\nCID=1\nparentCID=2\n", "y", 3,
           "# parentCID=1 parentFileNameHint=\"x\"\nCID=1\nparentCID=00000003\n"
           "parentFileNameHint=\"y\"\n");
}

static void test_bad_names(void)
{
    char *out = (char *)1;
    size_t len;
    char big[VMDK_MAX_HINT + 2];

    memset(big, 'a', sizeof(big) - 1);
    big[sizeof(big) - 1] = 0;
    CHECK(vmdk_desc_set_parent("CID=1\n", 6, "a\"b", 1, &out, &len) == -EINVAL && !out);
    CHECK(vmdk_desc_set_parent("CID=1\n", 6, "a\nb", 1, &out, &len) == -EINVAL);
    CHECK(vmdk_desc_set_parent("CID=1\n", 6, "", 1, &out, &len) == -EINVAL);
    CHECK(vmdk_desc_set_parent("CID=1\n", 6, big, 1, &out, &len) == -EINVAL);
    CHECK(vmdk_hint_ok("dir/with space.vmdk"));
}

int main(void)
{
    test_replace();
    test_insert();
    test_forms();
    test_bad_names();
    if (failures) {
        fprintf(stderr, "%d check(s) failed\n", failures);
        return 1;
    }
    printf("test_vmdk_desc_edit: ok\n");
    return 0;
}
