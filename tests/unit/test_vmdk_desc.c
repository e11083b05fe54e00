/* Unit tests of the VMDK descriptor parser and the descriptor probe. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "formats/vmdk/format.h"
#include "util/diag.h"

#include "check.h"

static int parse(const char *text, struct vmdk_desc *out, struct diag *d)
{
    diag_init(d);
    return vmdk_desc_parse(text, strlen(text), out, d, "t.vmdk", 0);
}

static void test_plain(void)
{
    struct vmdk_desc x;
    struct diag d;
    const char *t =
        "# Disk DescriptorFile\nversion=1\nCID=0172e8a4\nparentCID=ffffffff\n"
        "createType=\"twoGbMaxExtentSparse\"\nparentFileNameHint=\"my parent.vmdk\"\n\n"
        "# Extent description\nRW 4192256 SPARSE \"a b-s001.vmdk\"\n"
        "RDONLY 2048 FLAT \"f.bin\" 100\nNOACCESS 8 ZERO\nRW 16 VMFS x-flat.vmdk\n"
        "RW 32 VMFSSPARSE \"d-delta.vmdk\"\n\n#DDB\nddb.adapterType = \"lsilogic\"\n"
        "ddb.virtualHWVersion = \"14\"\nddb.uuid = \"60 00 C2\"\n";
    CHECK(parse(t, &x, &d) == 0);
    CHECK(x.version == 1);
    CHECK(x.has_cid && x.cid == 0x0172e8a4);
    CHECK(x.has_parent_cid && x.parent_cid == 0xffffffff);
    CHECK(x.create_type && strcmp(x.create_type, "twoGbMaxExtentSparse") == 0);
    CHECK(x.parent_hint && strcmp(x.parent_hint, "my parent.vmdk") == 0);
    CHECK(x.adapter_type && strcmp(x.adapter_type, "lsilogic") == 0);
    CHECK(x.hw_version && strcmp(x.hw_version, "14") == 0);
    CHECK(x.n_ext == 5);
    if (x.n_ext == 5) {
        CHECK(x.ext[0].type == VMDK_EXT_SPARSE && x.ext[0].sectors == 4192256);
        CHECK(strcmp(x.ext[0].filename, "a b-s001.vmdk") == 0);
        CHECK(x.ext[1].access == VMDK_ACCESS_RDONLY && x.ext[1].type == VMDK_EXT_FLAT);
        CHECK(x.ext[1].offset == 100 && strcmp(x.ext[1].filename, "f.bin") == 0);
        CHECK(x.ext[2].access == VMDK_ACCESS_NOACCESS && x.ext[2].type == VMDK_EXT_ZERO);
        CHECK(x.ext[2].filename == NULL);
        CHECK(x.ext[3].type == VMDK_EXT_VMFS && strcmp(x.ext[3].filename, "x-flat.vmdk") == 0);
        CHECK(x.ext[4].type == VMDK_EXT_VMFSSPARSE && x.ext[4].line == 13);
    }
    CHECK(x.total_sectors == 4192256 + 2048 + 8 + 16 + 32);
    vmdk_desc_free(&x);
}

static void test_crlf_lowercase(void)
{
    struct vmdk_desc x;
    struct diag d;
    const char *t = "\r\n  # Disk DescriptorFile\r\n\r\n  version = 1 \r\ncid=ABCDEF01\r\n"
                    "createtype = monolithicFlat\r\n\r\nrw 2048 flat \"x.bin\" 0\r\n"
                    "rdonly 10 zero\r\n\r\n";
    CHECK(parse(t, &x, &d) == 0);
    CHECK(x.cid == 0xabcdef01);
    CHECK(x.create_type && strcmp(x.create_type, "monolithicFlat") == 0);
    CHECK(x.n_ext == 2);
    if (x.n_ext == 2) {
        CHECK(strcmp(x.ext[0].filename, "x.bin") == 0);
        CHECK(x.ext[1].type == VMDK_EXT_ZERO && x.ext[1].sectors == 10);
    }
    vmdk_desc_free(&x);
}

static void test_nul_padding(void)
{
    struct vmdk_desc x;
    struct diag d;
    char buf[1024];
    memset(buf, 0, sizeof(buf));
    strcpy(buf, "RW 8 ZERO\n");
    memcpy(buf + 600, "garbage\n", 8);   /* after the NUL: ignored */
    diag_init(&d);
    CHECK(vmdk_desc_parse(buf, sizeof(buf), &x, &d, "t", 0) == 0);
    CHECK(x.n_ext == 1);
    vmdk_desc_free(&x);
}

static void expect_fail(const char *t, const char *msg)
{
    struct vmdk_desc x;
    struct diag d;
    int r = parse(t, &x, &d);
    CHECK(r < 0);
    if (r < 0 && !strstr(d.what, msg)) {
        fprintf(stderr, "message '%s' lacks '%s'\n", d.what, msg);
        failures++;
    }
    CHECK(x.n_ext == 0 && x.ext == NULL);
}

static void test_errors(void)
{
    expect_fail("RW 10 FLAT\n", "line 1: extent has no file name");
    expect_fail("\n\nRW x FLAT \"a\"\n", "line 3: extent size is not a number");
    expect_fail("RW 10 TAPE \"a\"\n", "unknown extent type");
    expect_fail("RW 10 FLAT \"a\n", "no closing quote");
    expect_fail("RW 10 FLAT \"\"\n", "empty file name");
    expect_fail("RW 10 FLAT \"a\" x\n", "extent offset is not a number");
    expect_fail("RW 10 SPARSE \"a\" 5\n", "only FLAT and VMFS extents take an offset");
    expect_fail("RW 2199023255553 ZERO\n", "extent size is not a number of sectors");
    expect_fail("RW 2199023255552 ZERO\nRW 1 ZERO\n", "add up to more than");
    expect_fail("CID=123456789\n", "CID is not 1..8 hex digits");
    expect_fail("parentCID=\n", "parentCID is not 1..8 hex digits");
    expect_fail("version=one\n", "version is not a number");
    expect_fail("hello world\n", "neither a key=value nor an extent");
    expect_fail(" = 5\n", "empty key");
    /* more than VMDK_MAX_EXTENTS extents */
    size_t n = (VMDK_MAX_EXTENTS + 1) * 10 + 1;
    char *many = malloc(n);
    char *p = many;
    for (unsigned i = 0; i <= VMDK_MAX_EXTENTS; i++)
        p += sprintf(p, "RW 1 ZERO\n");
    expect_fail(many, "more than 8192 extents");
    free(many);
}

static bool probe(const char *t)
{
    return vmdk_desc_probe((const uint8_t *)t, strlen(t));
}

static void test_probe(void)
{
    CHECK(probe("# Disk DescriptorFile\nversion=1\n"));
    CHECK(probe("\r\n\r\n# disk descriptorfile\r\n"));
    CHECK(probe("version=1\ncreatetype = \"vmfs\"\n"));
    CHECK(probe("# a comment\nrw 2048 flat \"x\" 0\n"));
    CHECK(!probe(""));
    CHECK(!probe("hello, this is text\nRW not a number\n"));
    CHECK(!probe("RW 10 TAPE \"x\"\n"));
    CHECK(!probe("createTypeX=1\n"));
    uint8_t bin[64] = { 'R', 'W', ' ', '1', ' ', 'Z', 'E', 'R', 'O', '\n', 0, 0, 0 };
    CHECK(vmdk_desc_probe(bin, sizeof(bin)));       /* NUL padding */
    bin[40] = '\n';
    CHECK(vmdk_desc_probe(bin, sizeof(bin)));       /* line ends among the NULs */
    bin[40] = 7;
    CHECK(!vmdk_desc_probe(bin, sizeof(bin)));      /* binary after the NUL */
    const uint8_t ctl[] = "RW 1 ZERO\n\x01\n";
    CHECK(!vmdk_desc_probe(ctl, sizeof(ctl) - 1));
}

int main(void)
{
    test_plain();
    test_crlf_lowercase();
    test_nul_padding();
    test_errors();
    test_probe();
    if (failures) {
        fprintf(stderr, "%d check(s) failed\n", failures);
        return 1;
    }
    printf("test_vmdk_desc: ok\n");
    return 0;
}
