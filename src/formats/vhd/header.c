/* VHD: the dynamic disk header (decode, encode) and the text of parent
 * locators and the parent name (UTF-16, file:// URLs). */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "formats/vhd/format.h"
#include "util/endian.h"

int vhd_dynhdr_decode(const uint8_t b[VHD_DYNHDR_SIZE], struct vhd_dynhdr *h,
                      char *err, size_t errlen)
{
    memset(h, 0, sizeof(*h));
    if (memcmp(b, VHD_DYNHDR_COOKIE, 8) != 0) {
        snprintf(err, errlen, "no dynamic disk header (cookie 'cxsparse' missing)");
        return -EINVAL;
    }
    h->data_offset = be64_get(b + 8);
    h->table_offset = be64_get(b + 16);
    h->version = be32_get(b + 24);
    h->max_entries = be32_get(b + 28);
    h->block_size = be32_get(b + 32);
    h->checksum = be32_get(b + 36);
    h->checksum_ok = h->checksum == vhd_checksum(b, VHD_DYNHDR_SIZE, 36);
    memcpy(h->parent_uuid, b + 40, 16);
    h->parent_timestamp = be32_get(b + 56);
    for (size_t i = 0; i < 256; i++)
        h->parent_name[i] = be16_get(b + 64 + 2 * i);
    for (size_t i = 0; i < VHD_LOCATORS; i++) {
        const uint8_t *l = b + 576 + 24 * i;
        h->loc[i].code = be32_get(l);
        h->loc[i].space = be32_get(l + 4);
        h->loc[i].length = be32_get(l + 8);
        h->loc[i].offset = be64_get(l + 16);
    }
    if (h->version >> 16 != 1) {
        snprintf(err, errlen, "unsupported dynamic header version %u.%u", h->version >> 16,
                 h->version & 0xffff);
        return -EINVAL;
    }
    if (h->block_size < VHD_MIN_BLOCK || h->block_size > VHD_MAX_BLOCK ||
        (h->block_size & (h->block_size - 1))) {
        snprintf(err, errlen, "block size %u is not a power of two from 512 bytes to "
                 "256 MiB", h->block_size);
        return -EINVAL;
    }
    if (h->table_offset % VHD_SECTOR) {
        snprintf(err, errlen, "block allocation table offset %llu is not on a sector",
                 (unsigned long long)h->table_offset);
        return -EINVAL;
    }
    return 0;
}

void vhd_dynhdr_encode(const struct vhd_dynhdr *h, uint8_t b[VHD_DYNHDR_SIZE])
{
    memset(b, 0, VHD_DYNHDR_SIZE);
    memcpy(b, VHD_DYNHDR_COOKIE, 8);
    be64_put(b + 8, h->data_offset);
    be64_put(b + 16, h->table_offset);
    be32_put(b + 24, h->version);
    be32_put(b + 28, h->max_entries);
    be32_put(b + 32, h->block_size);
    memcpy(b + 40, h->parent_uuid, 16);
    be32_put(b + 56, h->parent_timestamp);
    for (size_t i = 0; i < 256; i++)
        be16_put(b + 64 + 2 * i, h->parent_name[i]);
    for (size_t i = 0; i < VHD_LOCATORS; i++) {
        uint8_t *l = b + 576 + 24 * i;
        be32_put(l, h->loc[i].code);
        be32_put(l + 4, h->loc[i].space);
        be32_put(l + 8, h->loc[i].length);
        be64_put(l + 16, h->loc[i].offset);
    }
    be32_put(b + 36, vhd_checksum(b, VHD_DYNHDR_SIZE, 36));
}

static int put_utf8(uint32_t c, char *out, size_t outlen, size_t *k)
{
    char tmp[4];
    size_t n;

    if (c == 0 || c == '\\')            /* a Windows separator */
        c = c ? '/' : 0;
    if (c < 0x80) {
        tmp[0] = (char)c;
        n = 1;
    } else if (c < 0x800) {
        tmp[0] = (char)(0xc0 | c >> 6);
        tmp[1] = (char)(0x80 | (c & 0x3f));
        n = 2;
    } else if (c < 0x10000) {
        tmp[0] = (char)(0xe0 | c >> 12);
        tmp[1] = (char)(0x80 | (c >> 6 & 0x3f));
        tmp[2] = (char)(0x80 | (c & 0x3f));
        n = 3;
    } else {
        tmp[0] = (char)(0xf0 | c >> 18);
        tmp[1] = (char)(0x80 | (c >> 12 & 0x3f));
        tmp[2] = (char)(0x80 | (c >> 6 & 0x3f));
        tmp[3] = (char)(0x80 | (c & 0x3f));
        n = 4;
    }
    if (*k + n >= outlen)
        return -ENAMETOOLONG;
    memcpy(out + *k, tmp, n);
    *k += n;
    return 0;
}

int vhd_utf16_to_utf8(const uint16_t *u, size_t n, char *out, size_t outlen)
{
    size_t k = 0;

    if (!outlen)
        return -ENAMETOOLONG;
    for (size_t i = 0; i < n && u[i]; i++) {
        uint32_t c = u[i];
        if (c >= 0xd800 && c < 0xdc00) {
            if (i + 1 >= n || u[i + 1] < 0xdc00 || u[i + 1] >= 0xe000)
                return -EINVAL;
            c = 0x10000 + ((c - 0xd800) << 10) + (u[i + 1] - 0xdc00u);
            i++;
        } else if (c >= 0xdc00 && c < 0xe000) {
            return -EINVAL;
        }
        int r = put_utf8(c, out, outlen, &k);
        if (r < 0)
            return r;
    }
    out[k] = 0;
    return 0;
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

int vhd_locator_path(uint32_t code, const uint8_t *data, size_t len, char *out,
                     size_t outlen)
{
    int r;

    if (!outlen)
        return -ENAMETOOLONG;
    if (code == VHD_PLAT_W2RU || code == VHD_PLAT_W2KU) {
        uint16_t u[VHD_MAX_LOCATOR / 2];
        size_t n = len / 2;
        if (n > sizeof(u) / sizeof(u[0]))
            n = sizeof(u) / sizeof(u[0]);
        for (size_t i = 0; i < n; i++)
            u[i] = le16_get(data + 2 * i);
        while (n && u[n - 1] == 0)      /* trailing NULs (padding) */
            n--;
        for (size_t i = 0; i < n; i++)
            if (u[i] == 0)
                return -EINVAL;
        if ((r = vhd_utf16_to_utf8(u, n, out, outlen)) < 0)
            return r;
        /* ".\name" (relative to the image's folder) */
        if (out[0] == '.' && out[1] == '/')
            memmove(out, out + 2, strlen(out + 2) + 1);
    } else if (code == VHD_PLAT_MACX) {
        size_t n = len;
        while (n && data[n - 1] == 0)
            n--;
        const char *s = (const char *)data;
        if (n >= 7 && memcmp(s, "file://", 7) == 0) {
            s += 7, n -= 7;
            if (n >= 9 && memcmp(s, "localhost", 9) == 0)
                s += 9, n -= 9;
        }
        size_t k = 0;
        for (size_t i = 0; i < n; i++) {
            int c = (unsigned char)s[i];
            if (c == '%' && i + 2 < n && hexval(s[i + 1]) >= 0 && hexval(s[i + 2]) >= 0) {
                c = hexval(s[i + 1]) * 16 + hexval(s[i + 2]);
                i += 2;
            }
            if (c == 0)
                return -EINVAL;
            if (k + 1 >= outlen)
                return -ENAMETOOLONG;
            out[k++] = (char)c;
        }
        out[k] = 0;
    } else {
        return -EINVAL;
    }
    return out[0] ? 0 : -EINVAL;
}
