/* VHDX: the file type identifier, the headers, the region table and GUID
 * text (decode, check, encode). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codec/crc32c.h"
#include "formats/vhdx/format.h"
#include "util/endian.h"

const uint8_t vhdx_guid_bat[16] = {
    0x66, 0x77, 0xc2, 0x2d, 0x23, 0xf6, 0x00, 0x42,
    0x9d, 0x64, 0x11, 0x5e, 0x9b, 0xfd, 0x4a, 0x08 };
const uint8_t vhdx_guid_metadata[16] = {
    0x06, 0xa2, 0x7c, 0x8b, 0x90, 0x47, 0x9a, 0x4b,
    0xb8, 0xfe, 0x57, 0x5f, 0x05, 0x0f, 0x88, 0x6e };

/* --- GUIDs ------------------------------------------------------------------ */

void vhdx_guid_text(const uint8_t g[16], char out[37])
{
    snprintf(out, 37, "%08x-%04x-%04x-%02x%02x-%02x%02x%02x%02x%02x%02x",
             le32_get(g), le16_get(g + 4), le16_get(g + 6), g[8], g[9], g[10], g[11], g[12],
             g[13], g[14], g[15]);
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

int vhdx_guid_parse(const char *s, uint8_t g[16])
{
    uint8_t t[16];
    size_t n = strlen(s);
    bool braces = n == 38 && s[0] == '{' && s[37] == '}';

    if (n != 36 && !braces)
        return -EINVAL;
    if (braces)
        s++;
    /* the 32 hex digits in text order, dashes where they belong */
    for (int i = 0, k = 0; i < 36; i++) {
        if (i == 8 || i == 13 || i == 18 || i == 23) {
            if (s[i] != '-')
                return -EINVAL;
            continue;
        }
        int hi = hexval(s[i]), lo = hexval(s[i + 1]);
        if (hi < 0 || lo < 0)
            return -EINVAL;
        t[k++] = (uint8_t)(hi << 4 | lo);
        i++;
    }
    /* the first three groups are stored little-endian */
    g[0] = t[3], g[1] = t[2], g[2] = t[1], g[3] = t[0];
    g[4] = t[5], g[5] = t[4];
    g[6] = t[7], g[7] = t[6];
    memcpy(g + 8, t + 8, 8);
    return 0;
}

bool vhdx_guid_is_zero(const uint8_t g[16])
{
    for (int i = 0; i < 16; i++)
        if (g[i])
            return false;
    return true;
}

/* --- file type identifier ----------------------------------------------------- */

bool vhdx_file_id_ok(const uint8_t *b, size_t len)
{
    return len >= 8 && memcmp(b, VHDX_FILE_SIG, 8) == 0;
}

void vhdx_file_id_encode(const char *creator, uint8_t *b)
{
    memset(b, 0, 8 + VHDX_CREATOR_LEN);
    memcpy(b, VHDX_FILE_SIG, 8);
    for (size_t i = 0; creator && creator[i] && i < VHDX_CREATOR_LEN / 2 - 1; i++)
        le16_put(b + VHDX_CREATOR_OFF + 2 * i, (uint8_t)creator[i]);
}

/* --- header ---------------------------------------------------------------------- */

int vhdx_header_decode(const uint8_t *b, struct vhdx_header *h, char *err, size_t errlen)
{
    memset(h, 0, sizeof(*h));
    if (le32_get(b) != VHDX_HEADER_SIG) {
        snprintf(err, errlen, "no header signature ('head')");
        return -EINVAL;
    }
    h->checksum = le32_get(b + 4);
    uint32_t c = crc32c(0, b, 4);
    c = crc32c(c, "\0\0\0\0", 4);
    c = crc32c(c, b + 8, VHDX_HEADER_SIZE - 8);
    if (c != h->checksum) {
        snprintf(err, errlen, "header checksum mismatch (stored %08x, computed %08x)",
                 h->checksum, c);
        return -EINVAL;
    }
    h->seq = le64_get(b + 8);
    memcpy(h->file_write_guid, b + 16, 16);
    memcpy(h->data_write_guid, b + 32, 16);
    memcpy(h->log_guid, b + 48, 16);
    h->log_version = le16_get(b + 64);
    h->version = le16_get(b + 66);
    h->log_length = le32_get(b + 68);
    h->log_offset = le64_get(b + 72);
    if (h->version != VHDX_VERSION) {
        snprintf(err, errlen, "unsupported header version %u", h->version);
        return -EINVAL;
    }
    if (h->log_version != VHDX_LOG_VERSION) {
        snprintf(err, errlen, "unsupported log version %u", h->log_version);
        return -EINVAL;
    }
    if (h->log_length % VHDX_ALIGN || h->log_offset % VHDX_ALIGN ||
        (h->log_length && h->log_offset < VHDX_HEADER_AREA)) {
        snprintf(err, errlen, "log of %u bytes at %llu is not on 1 MiB boundaries past "
                 "the first MiB", h->log_length, (unsigned long long)h->log_offset);
        return -EINVAL;
    }
    if (h->log_offset > UINT64_MAX - h->log_length) {
        snprintf(err, errlen, "log offset %llu wraps", (unsigned long long)h->log_offset);
        return -EINVAL;
    }
    return 0;
}

void vhdx_header_encode(const struct vhdx_header *h, uint8_t *b)
{
    memset(b, 0, VHDX_HEADER_SIZE);
    le32_put(b, VHDX_HEADER_SIG);
    le64_put(b + 8, h->seq);
    memcpy(b + 16, h->file_write_guid, 16);
    memcpy(b + 32, h->data_write_guid, 16);
    memcpy(b + 48, h->log_guid, 16);
    le16_put(b + 64, h->log_version);
    le16_put(b + 66, h->version);
    le32_put(b + 68, h->log_length);
    le64_put(b + 72, h->log_offset);
    le32_put(b + 4, crc32c(0, b, VHDX_HEADER_SIZE));
}

/* --- region table ------------------------------------------------------------------ */

struct span {
    uint64_t off, len;
    uint32_t i;
};

static int span_cmp(const void *a, const void *b)
{
    const struct span *x = a, *y = b;
    return x->off < y->off ? -1 : x->off > y->off;
}

int vhdx_regions_decode(const uint8_t *b, struct vhdx_regions *r, char *err, size_t errlen)
{
    memset(r, 0, sizeof(*r));
    if (le32_get(b) != VHDX_REGION_SIG) {
        snprintf(err, errlen, "no region table signature ('regi')");
        return -EINVAL;
    }
    uint32_t stored = le32_get(b + 4);
    uint32_t c = crc32c(0, b, 4);
    c = crc32c(c, "\0\0\0\0", 4);
    c = crc32c(c, b + 8, VHDX_REGION_SIZE - 8);
    if (c != stored) {
        snprintf(err, errlen, "region table checksum mismatch (stored %08x, computed %08x)",
                 stored, c);
        return -EINVAL;
    }
    r->count = le32_get(b + 8);
    if (r->count > VHDX_MAX_REGIONS) {
        snprintf(err, errlen, "region table of %u entries (at most %u)", r->count,
                 VHDX_MAX_REGIONS);
        return -EINVAL;
    }
    struct span *s = malloc((r->count ? r->count : 1) * sizeof(*s));
    if (!s) {
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    bool have_bat = false, have_meta = false;
    int ret = -EINVAL;
    for (uint32_t i = 0; i < r->count; i++) {
        const uint8_t *e = b + VHDX_REGION_HDR_SIZE + (size_t)i * VHDX_REGION_ENTRY_SIZE;
        struct vhdx_region_entry x;
        memcpy(x.guid, e, 16);
        x.off = le64_get(e + 16);
        x.len = le32_get(e + 24);
        x.required = le32_get(e + 28) & 1;
        char g[37];
        vhdx_guid_text(x.guid, g);
        if (x.off % VHDX_ALIGN || x.len % VHDX_ALIGN || x.off < VHDX_HEADER_AREA ||
            x.len == 0 || x.off > UINT64_MAX - x.len) {
            snprintf(err, errlen, "region %u (%s): %u bytes at %llu are not a non-empty "
                     "range on 1 MiB boundaries past the first MiB", i, g, x.len,
                     (unsigned long long)x.off);
            goto out;
        }
        struct vhdx_region_entry *known = NULL;
        bool *seen = NULL;
        if (memcmp(x.guid, vhdx_guid_bat, 16) == 0)
            known = &r->bat, seen = &have_bat;
        else if (memcmp(x.guid, vhdx_guid_metadata, 16) == 0)
            known = &r->meta, seen = &have_meta;
        if (known) {
            if (*seen) {
                snprintf(err, errlen, "region %u: the %s region twice", i,
                         known == &r->bat ? "BAT" : "metadata");
                goto out;
            }
            *seen = true;
            *known = x;
        } else if (x.required) {
            snprintf(err, errlen, "region %u has an unknown type %s marked required", i, g);
            ret = -ENOTSUP;
            goto out;
        }
        s[i] = (struct span){ x.off, x.len, i };
    }
    if (!have_bat || !have_meta) {
        snprintf(err, errlen, "region table has no %s region", have_bat ? "metadata" : "BAT");
        goto out;
    }
    qsort(s, r->count, sizeof(*s), span_cmp);
    for (uint32_t i = 1; i < r->count; i++)
        if (s[i - 1].off + s[i - 1].len > s[i].off) {
            snprintf(err, errlen, "regions %u and %u overlap", s[i - 1].i, s[i].i);
            goto out;
        }
    ret = 0;
out:
    free(s);
    return ret;
}

void vhdx_regions_encode(const struct vhdx_region_entry *e, uint32_t n, uint8_t *b)
{
    memset(b, 0, VHDX_REGION_SIZE);
    if (n > VHDX_MAX_REGIONS)
        n = VHDX_MAX_REGIONS;
    le32_put(b, VHDX_REGION_SIG);
    le32_put(b + 8, n);
    for (uint32_t i = 0; i < n; i++) {
        uint8_t *p = b + VHDX_REGION_HDR_SIZE + (size_t)i * VHDX_REGION_ENTRY_SIZE;
        memcpy(p, e[i].guid, 16);
        le64_put(p + 16, e[i].off);
        le32_put(p + 24, e[i].len);
        le32_put(p + 28, e[i].required ? 1 : 0);
    }
    le32_put(b + 4, crc32c(0, b, VHDX_REGION_SIZE));
}
