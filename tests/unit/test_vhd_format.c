/* VHD's pure decoders and encoders: footer and header round trips and
 * checksums, the decoders' refusals, qemu-img 7.2's sizes and geometry
 * for new images (values qemu-img create wrote), the size rule by
 * creator, locator paths (UTF-16LE, file:// URLs). */
#include <errno.h>
#include <string.h>

#include "check.h"
#include "formats/vhd/format.h"
#include "util/endian.h"

static void geometry(void)
{
    /* bytes asked, force_size, size qemu-img 7.2 wrote, C, H, S */
    static const struct { uint64_t ask; bool force; uint64_t size; unsigned c, h, s; } t[] = {
        { 1000, false, 34816, 1, 4, 17 },
        { 1000, true, 1024, 65535, 16, 255 },
        { 1 << 20, false, 1079296, 31, 4, 17 },
        { 10 << 20, false, 10514432, 302, 4, 17 },
        { 10 << 20, true, 10485760, 65535, 16, 255 },
        { 127ull << 30, false, 136365219840ull, 65279, 16, 255 },
        { 128ull << 30, false, 137438953472ull, 65535, 16, 255 },
        { 2040ull << 30, false, 2040ull << 30, 65535, 16, 255 },
    };
    for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
        uint64_t size;
        uint16_t c;
        uint8_t h, s;
        CHECK(vhd_create_geometry(t[i].ask, t[i].force, &size, &c, &h, &s) == 0);
        CHECK(size == t[i].size && c == t[i].c && h == t[i].h && s == t[i].s,
              "%llu: %llu %u/%u/%u", (unsigned long long)t[i].ask,
              (unsigned long long)size, c, h, s);
    }
    uint64_t size;
    uint16_t c;
    uint8_t h, s;
    CHECK(vhd_create_geometry(2041ull << 30, false, &size, &c, &h, &s) == -EFBIG);
}

static void footer(void)
{
    struct vhd_footer f = { 0 }, g;
    uint8_t b[VHD_FOOTER_SIZE];
    char err[200];

    f.features = VHD_FEATURE_RESERVED;
    f.version = VHD_VERSION;
    f.data_offset = 512;
    memcpy(f.creator_app, "qemu", 4);
    f.orig_size = f.current_size = 10514432;
    f.cyls = 302, f.heads = 4, f.secs = 17;
    f.type = VHD_TYPE_DYNAMIC;
    memset(f.uuid, 0xab, 16);
    vhd_footer_encode(&f, b);
    CHECK(vhd_footer_decode(b, &g, err, sizeof(err)) == 0 && g.checksum_ok);
    CHECK(g.current_size == 10514432 && g.cyls == 302 && g.type == 3 && g.data_offset == 512);
    CHECK(vhd_footer_check(&g, err, sizeof(err)) == 0, "%s", err);
    CHECK(vhd_disk_size(&g) == 302 * 4 * 17 * 512ull);
    b[100] ^= 1;
    CHECK(vhd_footer_decode(b, &g, err, sizeof(err)) == 0 && !g.checksum_ok);
    b[0] = 'x';
    CHECK(vhd_footer_decode(b, &g, err, sizeof(err)) == -EINVAL);
    /* current size for Hyper-V and force_size images, geometry for qemu's */
    memcpy(f.creator_app, "win ", 4);
    f.current_size = 10485760;
    CHECK(vhd_disk_size(&f) == 10485760);
    memcpy(f.creator_app, "qemu", 4);
    f.cyls = 65535, f.heads = 16, f.secs = 255;
    CHECK(vhd_disk_size(&f) == 10485760);
    f.type = 7;
    CHECK(vhd_footer_check(&f, err, sizeof(err)) == -EINVAL);
    f.type = VHD_TYPE_DYNAMIC;
    f.data_offset = VHD_NO_OFFSET;
    CHECK(vhd_footer_check(&f, err, sizeof(err)) == -EINVAL);
    f.data_offset = 512;
    memcpy(f.creator_app, "win ", 4);
    f.current_size = 3ull << 40;
    CHECK(vhd_footer_check(&f, err, sizeof(err)) == -EFBIG);
}

static void header(void)
{
    struct vhd_dynhdr h = { 0 }, g;
    uint8_t b[VHD_DYNHDR_SIZE];
    char err[200];

    h.data_offset = VHD_NO_OFFSET;
    h.table_offset = 1536;
    h.version = VHD_VERSION;
    h.max_entries = 5;
    h.block_size = 2 << 20;
    h.loc[1].code = VHD_PLAT_W2RU;
    h.loc[1].length = 20;
    h.loc[1].offset = 4096;
    h.parent_name[0] = 'p';
    vhd_dynhdr_encode(&h, b);
    CHECK(vhd_dynhdr_decode(b, &g, err, sizeof(err)) == 0 && g.checksum_ok, "%s", err);
    CHECK(g.max_entries == 5 && g.loc[1].code == VHD_PLAT_W2RU && g.loc[1].offset == 4096 &&
          g.parent_name[0] == 'p');
    for (uint32_t bad = 0; bad < 3; bad++) {
        uint32_t bs[] = { 256, 3000, 512u << 20 };
        h.block_size = bs[bad];
        vhd_dynhdr_encode(&h, b);
        CHECK(vhd_dynhdr_decode(b, &g, err, sizeof(err)) == -EINVAL, "block %u", bs[bad]);
    }
    h.block_size = 4096;
    h.table_offset = 1537;
    vhd_dynhdr_encode(&h, b);
    CHECK(vhd_dynhdr_decode(b, &g, err, sizeof(err)) == -EINVAL);
    CHECK(vhd_bitmap_bytes(2 << 20) == 512 && vhd_bitmap_bytes(512) == 512 &&
          vhd_bitmap_bytes(32 << 20) == 8192);
}

static void locators(void)
{
    char out[256];
    uint8_t u[64];
    const char *w = ".\\dir\\p\xc3\xa9.vhd";     /* with an e-acute */
    static const uint16_t cu[] = { '.', '\\', 'd', 'i', 'r', '\\', 'p', 0xe9, '.', 'v', 'h', 'd' };
    (void)w;
    for (size_t i = 0; i < 12; i++)
        le16_put(u + 2 * i, cu[i]);
    memset(u + 24, 0, 8);
    CHECK(vhd_locator_path(VHD_PLAT_W2RU, u, 32, out, sizeof(out)) == 0 &&
          strcmp(out, "dir/p\xc3\xa9.vhd") == 0, "%s", out);
    le16_put(u + 4, 0);     /* a NUL inside */
    CHECK(vhd_locator_path(VHD_PLAT_W2RU, u, 24, out, sizeof(out)) == -EINVAL);
    le16_put(u, 0xd800);    /* a lone surrogate */
    le16_put(u + 2, 'a');
    CHECK(vhd_locator_path(VHD_PLAT_W2KU, u, 4, out, sizeof(out)) == -EINVAL);
    const char *url = "file://localhost/Users/me/My%20Disk.vhd";
    CHECK(vhd_locator_path(VHD_PLAT_MACX, (const uint8_t *)url, strlen(url), out,
                           sizeof(out)) == 0 && strcmp(out, "/Users/me/My Disk.vhd") == 0,
          "%s", out);
    CHECK(vhd_locator_path(VHD_PLAT_MACX, (const uint8_t *)"%00", 3, out, sizeof(out)) ==
          -EINVAL);
    CHECK(vhd_locator_path(0x12345678, (const uint8_t *)"x", 1, out, sizeof(out)) == -EINVAL);
    CHECK(vhd_locator_path(VHD_PLAT_MACX, (const uint8_t *)"abcdef", 6, out, 4) ==
          -ENAMETOOLONG);
    uint8_t b[8] = { 1, 2, 3, 4, 5, 6, 7, 8 };
    CHECK(vhd_checksum(b, 8, 4) == ~(uint32_t)(1 + 2 + 3 + 4));
}

int main(void)
{
    geometry();
    footer();
    header();
    locators();
    return failures != 0;
}
