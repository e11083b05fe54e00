/* VHDX's pure decoders and encoders: GUID constants against their text
 * form ([MS-VHDX]), round trips of the header, region table, metadata table
 * and items, parent locator, BAT entries and log structures, and the
 * decoders' refusals of out-of-range fields; the BAT size rule. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "codec/crc32c.h"
#include "formats/vhdx/format.h"
#include "util/endian.h"

static char err[256];

static void guids(void)
{
    static const struct { const uint8_t *g; const char *text; } t[] = {
        { vhdx_guid_bat, "2dc27766-f623-4200-9d64-115e9bfd4a08" },
        { vhdx_guid_metadata, "8b7ca206-4790-4b9a-b8fe-575f050f886e" },
        { vhdx_guid_file_params, "caa16737-fa36-4d43-b3b6-33f0aa44e76b" },
        { vhdx_guid_disk_size, "2fa54224-cd1b-4876-b211-5dbed83bf4b8" },
        { vhdx_guid_page83, "beca12ab-b2e6-4523-93ef-c309e000c746" },
        { vhdx_guid_logical_sector, "8141bf1d-a96f-4709-ba47-f233a8faab5f" },
        { vhdx_guid_physical_sector, "cda348c7-445d-4471-9cc9-e9885251c556" },
        { vhdx_guid_parent_locator, "a8d35f2d-b30b-454d-abf7-d3d84834ab0c" },
        { vhdx_guid_parent_type, "b04aefb7-d19e-4a81-b789-25b8e9445913" },
    };
    for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
        char s[37];
        uint8_t g[16];
        vhdx_guid_text(t[i].g, s);
        CHECK(strcmp(s, t[i].text) == 0, "%s != %s", s, t[i].text);
        CHECK(vhdx_guid_parse(t[i].text, g) == 0 && memcmp(g, t[i].g, 16) == 0);
    }
    uint8_t g[16];
    CHECK(vhdx_guid_parse("{2DC27766-F623-4200-9D64-115E9BFD4A08}", g) == 0 &&
          memcmp(g, vhdx_guid_bat, 16) == 0);
    CHECK(vhdx_guid_parse("2dc27766-f623-4200-9d64-115e9bfd4a0", g) == -EINVAL);
    CHECK(vhdx_guid_parse("2dc27766xf623-4200-9d64-115e9bfd4a08", g) == -EINVAL);
    CHECK(vhdx_guid_parse("{2dc27766-f623-4200-9d64-115e9bfd4a0g}", g) == -EINVAL);
    memset(g, 0, 16);
    CHECK(vhdx_guid_is_zero(g));
    g[15] = 1;
    CHECK(!vhdx_guid_is_zero(g));
}

static void header(void)
{
    uint8_t b[VHDX_HEADER_SIZE];
    struct vhdx_header h = { .seq = 7, .version = 1, .log_length = 1 << 20,
                             .log_offset = 1 << 20 }, d;

    memset(h.file_write_guid, 0x11, 16);
    memset(h.data_write_guid, 0x22, 16);
    memset(h.log_guid, 0x33, 16);
    vhdx_header_encode(&h, b);
    CHECK(memcmp(b, "head", 4) == 0);
    CHECK(vhdx_header_decode(b, &d, err, sizeof(err)) == 0, "%s", err);
    CHECK(d.seq == 7 && d.log_length == 1 << 20 && d.log_offset == 1 << 20 &&
          memcmp(d.log_guid, h.log_guid, 16) == 0 &&
          memcmp(d.data_write_guid, h.data_write_guid, 16) == 0 &&
          d.checksum == le32_get(b + 4));
    /* a flipped reserved byte breaks the checksum */
    b[1000] ^= 1;
    CHECK(vhdx_header_decode(b, &d, err, sizeof(err)) == -EINVAL && strstr(err, "checksum"));
    /* bad fields, with a valid checksum */
    struct vhdx_header bad = h;
    bad.version = 2;
    vhdx_header_encode(&bad, b);
    CHECK(vhdx_header_decode(b, &d, err, sizeof(err)) == -EINVAL && strstr(err, "version"));
    bad = h;
    bad.log_version = 1;
    vhdx_header_encode(&bad, b);
    CHECK(vhdx_header_decode(b, &d, err, sizeof(err)) == -EINVAL);
    bad = h;
    bad.log_offset = 4096;
    vhdx_header_encode(&bad, b);
    CHECK(vhdx_header_decode(b, &d, err, sizeof(err)) == -EINVAL && strstr(err, "log"));
    bad = h;
    bad.log_length = 12345;
    vhdx_header_encode(&bad, b);
    CHECK(vhdx_header_decode(b, &d, err, sizeof(err)) == -EINVAL);
    bad = h;
    bad.log_offset = UINT64_MAX - (UINT64_MAX % (1 << 20));
    vhdx_header_encode(&bad, b);
    CHECK(vhdx_header_decode(b, &d, err, sizeof(err)) == -EINVAL);
    memset(b, 0, 4);
    CHECK(vhdx_header_decode(b, &d, err, sizeof(err)) == -EINVAL && strstr(err, "signature"));

    uint8_t id[8 + VHDX_CREATOR_LEN];
    vhdx_file_id_encode("diskimg", id);
    CHECK(vhdx_file_id_ok(id, sizeof(id)) && id[8] == 'd' && id[9] == 0 && id[10] == 'i');
    CHECK(!vhdx_file_id_ok(id, 7));
}

static void regions(void)
{
    uint8_t *b = malloc(VHDX_REGION_SIZE);
    struct vhdx_region_entry e[3] = {
        { .off = 2 << 20, .len = 1 << 20, .required = true },
        { .off = 3 << 20, .len = 1 << 20, .required = true },
        { .off = 8 << 20, .len = 1 << 20, .required = false },
    };
    struct vhdx_regions r;

    memcpy(e[0].guid, vhdx_guid_bat, 16);
    memcpy(e[1].guid, vhdx_guid_metadata, 16);
    memset(e[2].guid, 0x5a, 16);
    vhdx_regions_encode(e, 3, b);
    CHECK(vhdx_regions_decode(b, &r, err, sizeof(err)) == 0, "%s", err);
    CHECK(r.count == 3 && r.bat.off == 2 << 20 && r.meta.off == 3 << 20 &&
          r.meta.len == 1 << 20 && r.bat.required);
    b[VHDX_REGION_SIZE - 1] = 1;
    CHECK(vhdx_regions_decode(b, &r, err, sizeof(err)) == -EINVAL && strstr(err, "checksum"));
    /* unknown and required: this reader cannot read it */
    e[2].required = true;
    vhdx_regions_encode(e, 3, b);
    CHECK(vhdx_regions_decode(b, &r, err, sizeof(err)) == -ENOTSUP, "%s", err);
    e[2].required = false;
    /* overlap, misalignment, inside the first MiB, missing, twice */
    e[2].off = (2 << 20);
    vhdx_regions_encode(e, 3, b);
    CHECK(vhdx_regions_decode(b, &r, err, sizeof(err)) == -EINVAL && strstr(err, "overlap"));
    e[2].off = (8 << 20) + 4096;
    vhdx_regions_encode(e, 3, b);
    CHECK(vhdx_regions_decode(b, &r, err, sizeof(err)) == -EINVAL);
    e[2].off = 8 << 20;
    e[0].off = 0;
    vhdx_regions_encode(e, 3, b);
    CHECK(vhdx_regions_decode(b, &r, err, sizeof(err)) == -EINVAL);
    e[0].off = 2 << 20;
    e[0].len = 0;
    vhdx_regions_encode(e, 3, b);
    CHECK(vhdx_regions_decode(b, &r, err, sizeof(err)) == -EINVAL);
    e[0].len = 1 << 20;
    vhdx_regions_encode(e + 1, 2, b);
    CHECK(vhdx_regions_decode(b, &r, err, sizeof(err)) == -EINVAL && strstr(err, "BAT"));
    memcpy(e[2].guid, vhdx_guid_bat, 16);
    vhdx_regions_encode(e, 3, b);
    CHECK(vhdx_regions_decode(b, &r, err, sizeof(err)) == -EINVAL && strstr(err, "twice"));
    /* a count over the limit (checksum recomputed by hand) */
    vhdx_regions_encode(e, 2, b);
    le32_put(b + 8, VHDX_MAX_REGIONS + 1);
    le32_put(b + 4, 0);
    le32_put(b + 4, crc32c(0, b, VHDX_REGION_SIZE));
    CHECK(vhdx_regions_decode(b, &r, err, sizeof(err)) == -EINVAL && strstr(err, "2047"));
    free(b);
}

static void metadata(void)
{
    uint8_t *b = malloc(VHDX_META_TABLE_SIZE);
    struct vhdx_meta_entry e[7];
    const uint8_t *g[6] = { vhdx_guid_file_params, vhdx_guid_disk_size, vhdx_guid_page83,
                            vhdx_guid_logical_sector, vhdx_guid_physical_sector,
                            vhdx_guid_parent_locator };
    struct vhdx_meta m;

    for (int i = 0; i < 6; i++) {
        memcpy(e[i].guid, g[i], 16);
        e[i].off = 65536 + 64 * i;
        e[i].len = 16;
        e[i].flags = VHDX_META_IS_REQUIRED;
    }
    vhdx_meta_encode(e, 6, b);
    CHECK(vhdx_meta_decode(b, 1 << 20, &m, err, sizeof(err)) == 0, "%s", err);
    CHECK(m.count == 6 && m.have[VHDX_ITEM_PARENT_LOCATOR] &&
          m.item[VHDX_ITEM_DISK_SIZE].off == 65536 + 64 &&
          m.item[VHDX_ITEM_PAGE83].flags == VHDX_META_IS_REQUIRED);
    /* without the parent locator: fine; without the disk size: not */
    vhdx_meta_encode(e, 5, b);
    CHECK(vhdx_meta_decode(b, 1 << 20, &m, err, sizeof(err)) == 0 &&
          !m.have[VHDX_ITEM_PARENT_LOCATOR]);
    e[6] = e[1];
    vhdx_meta_encode(e + 2, 4, b);
    CHECK(vhdx_meta_decode(b, 1 << 20, &m, err, sizeof(err)) == -EINVAL && strstr(err, "no "));
    /* unknown required item; unknown optional item */
    memset(e[5].guid, 0x77, 16);
    vhdx_meta_encode(e, 6, b);
    CHECK(vhdx_meta_decode(b, 1 << 20, &m, err, sizeof(err)) == -ENOTSUP);
    e[5].flags = VHDX_META_IS_USER;
    vhdx_meta_encode(e, 6, b);
    CHECK(vhdx_meta_decode(b, 1 << 20, &m, err, sizeof(err)) == 0);
    /* an item in the table, past the region, over 1 MiB, overlapping */
    e[5].off = 100;
    vhdx_meta_encode(e, 6, b);
    CHECK(vhdx_meta_decode(b, 1 << 20, &m, err, sizeof(err)) == -EINVAL);
    e[5].off = (1 << 20) - 8;
    vhdx_meta_encode(e, 6, b);
    CHECK(vhdx_meta_decode(b, 1 << 20, &m, err, sizeof(err)) == -EINVAL);
    e[5].off = 65536;
    e[5].len = (1 << 20) + 4096;
    vhdx_meta_encode(e, 6, b);
    CHECK(vhdx_meta_decode(b, 4 << 20, &m, err, sizeof(err)) == -EINVAL);
    e[5].len = 16;
    vhdx_meta_encode(e, 6, b);
    CHECK(vhdx_meta_decode(b, 1 << 20, &m, err, sizeof(err)) == -EINVAL && strstr(err, "overlap"));
    /* twice */
    e[5] = e[0];
    e[5].off = 65536 + 1024;
    vhdx_meta_encode(e, 6, b);
    CHECK(vhdx_meta_decode(b, 1 << 20, &m, err, sizeof(err)) == -EINVAL && strstr(err, "twice"));
    /* region smaller than the table */
    vhdx_meta_encode(e, 5, b);
    CHECK(vhdx_meta_decode(b, 4096, &m, err, sizeof(err)) == -EINVAL);
    memcpy(b, "metadatb", 8);
    CHECK(vhdx_meta_decode(b, 1 << 20, &m, err, sizeof(err)) == -EINVAL);
    free(b);
}

static void items(void)
{
    struct vhdx_params p = { .block_size = 32 << 20, .has_parent = true, .disk_size = 1 << 30 };
    struct vhdx_params q;
    uint8_t b[16];

    memset(&q, 0, sizeof(q));
    vhdx_file_params_encode(&p, b);
    CHECK(vhdx_file_params_decode(b, 8, &q, err, sizeof(err)) == 0 && q.block_size == 32 << 20 &&
          q.has_parent && !q.leave_allocated);
    CHECK(vhdx_file_params_decode(b, 7, &q, err, sizeof(err)) == -EINVAL);
    static const uint32_t badbs[] = { 0, 512, (1 << 20) - 1, 3 << 20, 512u << 20 };
    for (size_t i = 0; i < sizeof(badbs) / sizeof(badbs[0]); i++) {
        struct vhdx_params x = p;
        x.block_size = badbs[i];
        vhdx_file_params_encode(&x, b);
        CHECK(vhdx_file_params_decode(b, 8, &q, err, sizeof(err)) == -EINVAL, "%u", badbs[i]);
    }
    vhdx_disk_size_encode(&p, b);
    CHECK(vhdx_disk_size_decode(b, 8, &q, err, sizeof(err)) == 0 && q.disk_size == 1 << 30);
    vhdx_sector_size_encode(4096, b);
    CHECK(vhdx_sector_size_decode(b, 4, true, &q, err, sizeof(err)) == 0 &&
          q.physical_sector == 4096);
    vhdx_sector_size_encode(1024, b);
    CHECK(vhdx_sector_size_decode(b, 4, false, &q, err, sizeof(err)) == -EINVAL);
    vhdx_sector_size_encode(512, b);
    CHECK(vhdx_sector_size_decode(b, 4, false, &q, err, sizeof(err)) == 0 &&
          q.logical_sector == 512);
    CHECK(vhdx_page83_decode(b, 15, &q, err, sizeof(err)) == -EINVAL);
    CHECK(vhdx_params_check(&q, err, sizeof(err)) == 0);
    q.disk_size = 1000;
    CHECK(vhdx_params_check(&q, err, sizeof(err)) == -EINVAL);
    q.disk_size = 0;
    CHECK(vhdx_params_check(&q, err, sizeof(err)) == -EINVAL);
    q.disk_size = VHDX_MAX_SIZE + 512;
    CHECK(vhdx_params_check(&q, err, sizeof(err)) == -EINVAL);
    q.disk_size = VHDX_MAX_SIZE;
    CHECK(vhdx_params_check(&q, err, sizeof(err)) == 0);
}

static void ploc(void)
{
    uint8_t b[2048];
    struct vhdx_ploc pl = { 0 }, d;
    char link[] = "{83ef9e0c-1d7e-4b9a-8d35-7b3d1f0e2a11}";
    char rel[] = ".\\base \xc3\xa9t\xc3\xa9.vhdx";   /* non-ASCII too */
    char abs[] = "C:\\VMs\\base.vhdx";

    pl.value[VHDX_PLOC_PARENT_LINKAGE] = link;
    pl.value[VHDX_PLOC_RELATIVE_PATH] = rel;
    pl.value[VHDX_PLOC_ABSOLUTE_WIN32_PATH] = abs;
    int n = vhdx_ploc_encode(&pl, b, sizeof(b));
    CHECK(n > 0);
    CHECK(vhdx_ploc_decode(b, (uint32_t)n, &d, err, sizeof(err)) == 0, "%s", err);
    CHECK(d.count == 3 && d.value[VHDX_PLOC_PARENT_LINKAGE] &&
          strcmp(d.value[VHDX_PLOC_PARENT_LINKAGE], link) == 0 &&
          strcmp(d.value[VHDX_PLOC_RELATIVE_PATH], rel) == 0 &&
          strcmp(d.value[VHDX_PLOC_ABSOLUTE_WIN32_PATH], abs) == 0 &&
          !d.value[VHDX_PLOC_VOLUME_PATH]);
    vhdx_ploc_free(&d);
    CHECK(vhdx_ploc_encode(&pl, b, 40) == -ENOSPC);
    /* truncated: entries past the item, values past the item */
    n = vhdx_ploc_encode(&pl, b, sizeof(b));
    CHECK(vhdx_ploc_decode(b, 40, &d, err, sizeof(err)) == -EINVAL);
    CHECK(vhdx_ploc_decode(b, (uint32_t)n - 2, &d, err, sizeof(err)) == -EINVAL);
    /* odd key length */
    uint8_t c[2048];
    memcpy(c, b, (size_t)n);
    le16_put(c + 20 + 8, 3);
    CHECK(vhdx_ploc_decode(c, (uint32_t)n, &d, err, sizeof(err)) == -EINVAL);
    /* a lone surrogate in a value */
    memcpy(c, b, (size_t)n);
    le16_put(c + le32_get(c + 20 + 4), 0xdc00);
    CHECK(vhdx_ploc_decode(c, (uint32_t)n, &d, err, sizeof(err)) == -EINVAL);
    /* wrong locator type */
    memcpy(c, b, (size_t)n);
    c[0] ^= 1;
    CHECK(vhdx_ploc_decode(c, (uint32_t)n, &d, err, sizeof(err)) == -EINVAL);
    /* no parent_linkage */
    pl.value[VHDX_PLOC_PARENT_LINKAGE] = NULL;
    n = vhdx_ploc_encode(&pl, b, sizeof(b));
    CHECK(vhdx_ploc_decode(b, (uint32_t)n, &d, err, sizeof(err)) == -EINVAL &&
          strstr(err, "parent_linkage"));
    /* a key twice: the same entry listed again */
    pl.value[VHDX_PLOC_PARENT_LINKAGE] = link;
    pl.value[VHDX_PLOC_RELATIVE_PATH] = NULL;
    pl.value[VHDX_PLOC_ABSOLUTE_WIN32_PATH] = NULL;
    n = vhdx_ploc_encode(&pl, b, sizeof(b));
    /* make room for a second entry copying the first */
    memmove(b + 20 + 24, b + 20 + 12, (size_t)n - 32);
    memcpy(b + 20 + 12, b + 20, 12);
    le16_put(b + 18, 2);
    le32_put(b + 20, le32_get(b + 20) + 12);
    le32_put(b + 24, le32_get(b + 24) + 12);
    memcpy(b + 32, b + 20, 12);
    CHECK(vhdx_ploc_decode(b, (uint32_t)n + 12, &d, err, sizeof(err)) == -EINVAL &&
          strstr(err, "twice"), "%s", err);
}

static void bat(void)
{
    struct vhdx_bat_entry e;

    CHECK(vhdx_bat_entry_decode(vhdx_bat_entry_encode(6, 5 << 20), false, &e, err,
                                sizeof(err)) == 0 && e.state == 6 && e.off == 5 << 20);
    CHECK(vhdx_bat_entry_decode(2, false, &e, err, sizeof(err)) == 0 && e.state == 2);
    CHECK(vhdx_bat_entry_decode(4, false, &e, err, sizeof(err)) == -EINVAL);
    CHECK(vhdx_bat_entry_decode(5, false, &e, err, sizeof(err)) == -EINVAL);
    CHECK(vhdx_bat_entry_decode(6, false, &e, err, sizeof(err)) == -EINVAL);  /* offset 0 */
    CHECK(vhdx_bat_entry_decode(vhdx_bat_entry_encode(6, 5 << 20) | 8, false, &e, err,
                                sizeof(err)) == -EINVAL);
    CHECK(vhdx_bat_entry_decode(vhdx_bat_entry_encode(6, 1 << 20), true, &e, err,
                                sizeof(err)) == 0);
    CHECK(vhdx_bat_entry_decode(vhdx_bat_entry_encode(2, 1 << 20), true, &e, err,
                                sizeof(err)) == -EINVAL);
    /* chunk ratio and sizes ([MS-VHDX] 2.4: 512-byte sectors, 32 MiB -> 128) */
    CHECK(vhdx_chunk_ratio(32 << 20, 512) == 128);
    CHECK(vhdx_chunk_ratio(1 << 20, 4096) == 32768);
    CHECK(vhdx_chunk_ratio(256 << 20, 512) == 16);
    CHECK(vhdx_bat_entries(100 << 20, 8 << 20, 512, false) == 13);
    /* 129 blocks of 32 MiB: one bitmap entry between them */
    CHECK(vhdx_bat_entries(129ull * (32 << 20), 32 << 20, 512, false) == 130);
    CHECK(vhdx_bat_entries(128ull * (32 << 20), 32 << 20, 512, false) == 128);
    CHECK(vhdx_bat_entries(129ull * (32 << 20), 32 << 20, 512, true) == 2 * 129);
    CHECK(vhdx_bat_payload_index(128, 128) == 129 && vhdx_bat_bitmap_index(0, 128) == 128);
}

static void logs(void)
{
    uint8_t b[3 * 4096];
    struct vhdx_log_hdr h = { .entry_length = 8192, .tail = 4096, .seq = 9, .desc_count = 1,
                              .flushed_file_offset = 4 << 20, .last_file_offset = 5 << 20 }, d;
    memset(h.log_guid, 0x44, 16);
    vhdx_log_hdr_encode(&h, b);
    CHECK(vhdx_log_hdr_decode(b, 1 << 20, &d, err, sizeof(err)) == 0, "%s", err);
    CHECK(d.entry_length == 8192 && d.tail == 4096 && d.seq == 9 && d.desc_count == 1 &&
          d.flushed_file_offset == 4 << 20 && d.last_file_offset == 5 << 20 &&
          memcmp(d.log_guid, h.log_guid, 16) == 0);
    struct vhdx_log_hdr bad = h;
    bad.entry_length = 4097;
    vhdx_log_hdr_encode(&bad, b);
    CHECK(vhdx_log_hdr_decode(b, 1 << 20, &d, err, sizeof(err)) == -EINVAL);
    bad = h;
    bad.entry_length = 2 << 20;
    vhdx_log_hdr_encode(&bad, b);
    CHECK(vhdx_log_hdr_decode(b, 1 << 20, &d, err, sizeof(err)) == -EINVAL);
    bad = h;
    bad.tail = 1 << 20;
    vhdx_log_hdr_encode(&bad, b);
    CHECK(vhdx_log_hdr_decode(b, 1 << 20, &d, err, sizeof(err)) == -EINVAL);
    bad = h;
    bad.desc_count = 128;   /* 64 + 128 * 32 > 4096: two sectors of 8192 is fine */
    vhdx_log_hdr_encode(&bad, b);
    CHECK(vhdx_log_hdr_decode(b, 1 << 20, &d, err, sizeof(err)) == 0);
    bad.desc_count = 300;
    vhdx_log_hdr_encode(&bad, b);
    CHECK(vhdx_log_hdr_decode(b, 1 << 20, &d, err, sizeof(err)) == -EINVAL);
    bad = h;
    bad.flushed_file_offset = 6 << 20;
    vhdx_log_hdr_encode(&bad, b);
    CHECK(vhdx_log_hdr_decode(b, 1 << 20, &d, err, sizeof(err)) == -EINVAL);

    /* a whole entry: header, one data descriptor, its data sector */
    uint8_t sector[4096], out[4096];
    for (int i = 0; i < 4096; i++)
        sector[i] = (uint8_t)(i * 7 + 3);
    struct vhdx_log_desc ds = { .file_offset = 3 << 20 }, dd;
    memset(b, 0, sizeof(b));
    vhdx_log_hdr_encode(&h, b);
    vhdx_log_data_encode(sector, h.seq, &ds, b + 4096);
    vhdx_log_desc_encode(&ds, b + 64);
    vhdx_log_set_checksum(b, 8192);
    CHECK(vhdx_log_checksum(b, 8192) == le32_get(b + 4));
    CHECK(vhdx_log_desc_decode(b + 64, 9, &dd, err, sizeof(err)) == 0 && !dd.zero &&
          dd.file_offset == 3 << 20);
    CHECK(vhdx_log_data_decode(b + 4096, &dd, 9, out, err, sizeof(err)) == 0 &&
          memcmp(out, sector, 4096) == 0);
    CHECK(vhdx_log_data_decode(b + 4096, &dd, 10, out, err, sizeof(err)) == -EINVAL);
    CHECK(vhdx_log_desc_decode(b + 64, 10, &dd, err, sizeof(err)) == -EINVAL);
    /* zero descriptor */
    struct vhdx_log_desc z = { .zero = true, .zero_length = 8192, .file_offset = 2 << 20,
                               .seq = 9 };
    vhdx_log_desc_encode(&z, b + 64);
    CHECK(vhdx_log_desc_decode(b + 64, 9, &dd, err, sizeof(err)) == 0 && dd.zero &&
          dd.zero_length == 8192);
    z.zero_length = 100;
    vhdx_log_desc_encode(&z, b + 64);
    CHECK(vhdx_log_desc_decode(b + 64, 9, &dd, err, sizeof(err)) == -EINVAL);
    z.zero_length = 4096;
    z.file_offset = 64 << 10;     /* a header */
    vhdx_log_desc_encode(&z, b + 64);
    CHECK(vhdx_log_desc_decode(b + 64, 9, &dd, err, sizeof(err)) == -EINVAL);
    z.file_offset = (2 << 20) + 512;
    vhdx_log_desc_encode(&z, b + 64);
    CHECK(vhdx_log_desc_decode(b + 64, 9, &dd, err, sizeof(err)) == -EINVAL);
    memcpy(b + 64, "xxxx", 4);
    CHECK(vhdx_log_desc_decode(b + 64, 9, &dd, err, sizeof(err)) == -EINVAL);
}

int main(void)
{
    guids();
    header();
    regions();
    metadata();
    items();
    ploc();
    bat();
    logs();
    return failures != 0;
}
