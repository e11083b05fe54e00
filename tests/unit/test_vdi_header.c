/* VDI's header decoder and encoder: a round trip of what the writer
 * makes, the old version 0 layout (map after the header, data after the
 * map), and each refusal (signature, version, type, sizes, offsets). */
#include <errno.h>
#include <string.h>

#include "check.h"
#include "formats/vdi/format.h"
#include "util/endian.h"

static void base(struct vdi_header *h)
{
    memset(h, 0, sizeof(*h));
    h->type = VDI_TYPE_DYNAMIC;
    h->off_blocks = 512;
    h->off_data = 1024;
    h->disk_size = 10 << 20;
    h->block_size = 1 << 20;
    h->blocks = 10;
    h->uuid_create[0] = 1;
}

static int decode_patched(size_t off, uint32_t v, struct vdi_header *g)
{
    struct vdi_header h;
    uint8_t b[VDI_HEADER_AREA];
    char err[200];

    base(&h);
    vdi_header_encode(&h, b);
    le32_put(b + off, v);
    return vdi_header_decode(b, sizeof(b), g, err, sizeof(err));
}

int main(void)
{
    struct vdi_header h, g;
    uint8_t b[VDI_HEADER_AREA];
    char err[200];

    base(&h);
    vdi_header_encode(&h, b);
    CHECK(vdi_header_decode(b, sizeof(b), &g, err, sizeof(err)) == 0, "%s", err);
    CHECK(g.version == VDI_V11 && !g.v0 && g.header_size == 384 && g.blocks == 10 &&
          g.off_data == 1024 && g.disk_size == 10 << 20 && g.uuid_create[0] == 1);
    CHECK(decode_patched(68, 0x00010000, &g) == 0 && g.version == 0x00010000);   /* 1.0 */
    CHECK(decode_patched(64, 0, &g) == -EINVAL);             /* signature */
    CHECK(decode_patched(68, 0x00020001, &g) == -EINVAL);    /* version 2.1 */
    CHECK(decode_patched(76, 3, &g) == -EINVAL);             /* undo */
    CHECK(decode_patched(72, 16, &g) == -EINVAL);            /* header size */
    CHECK(decode_patched(376, 1000, &g) == -EINVAL);         /* block size */
    CHECK(decode_patched(376, 512u << 20, &g) == -EINVAL);
    CHECK(decode_patched(380, 100, &g) == -EINVAL);          /* extra */
    CHECK(decode_patched(360, 4096, &g) == -EINVAL);         /* sector size */
    CHECK(decode_patched(340, 513, &g) == -EINVAL);          /* map off a sector */
    CHECK(decode_patched(340, 0, &g) == -EINVAL);            /* map on the header */
    CHECK(decode_patched(344, 512, &g) == -EINVAL);          /* data on the map */
    CHECK(decode_patched(384, 0x40000000, &g) == -EINVAL);   /* too many blocks */
    CHECK(decode_patched(384, 9, &g) == -EINVAL);            /* disk past its blocks */
    /* odd sizes (VBoxManage convertfromraw): whole sectors, as qemu */
    CHECK(decode_patched(368, 10000001, &g) == 0 && g.disk_size == 9999872);
    CHECK(vdi_header_decode(b, 100, &g, err, sizeof(err)) == -EINVAL);   /* short */

    /* version 0: no offsets; the map at 420, the data right after it */
    memset(b, 0, sizeof(b));
    le32_put(b + 64, VDI_SIGNATURE);
    le32_put(b + 68, 2);
    le32_put(b + 72, VDI_TYPE_STATIC);
    le32_put(b + 348, 512);
    le64_put(b + 352, 8192);
    le32_put(b + 360, 4096);
    le32_put(b + 364, 2);
    CHECK(vdi_header_decode(b, sizeof(b), &g, err, sizeof(err)) == 0, "%s", err);
    CHECK(g.v0 && g.off_blocks == 420 && g.off_data == 428 && g.type == VDI_TYPE_STATIC &&
          g.block_size == 4096 && g.disk_size == 8192);
    return failures != 0;
}
