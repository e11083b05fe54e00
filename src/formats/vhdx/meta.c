/* VHDX: the metadata table, its items (file parameters, sizes, page 83
 * data) and the parent locator (decode, check, encode). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "formats/vhdx/format.h"
#include "util/endian.h"

const uint8_t vhdx_guid_file_params[16] = {
    0x37, 0x67, 0xa1, 0xca, 0x36, 0xfa, 0x43, 0x4d,
    0xb3, 0xb6, 0x33, 0xf0, 0xaa, 0x44, 0xe7, 0x6b };
const uint8_t vhdx_guid_disk_size[16] = {
    0x24, 0x42, 0xa5, 0x2f, 0x1b, 0xcd, 0x76, 0x48,
    0xb2, 0x11, 0x5d, 0xbe, 0xd8, 0x3b, 0xf4, 0xb8 };
const uint8_t vhdx_guid_page83[16] = {
    0xab, 0x12, 0xca, 0xbe, 0xe6, 0xb2, 0x23, 0x45,
    0x93, 0xef, 0xc3, 0x09, 0xe0, 0x00, 0xc7, 0x46 };
const uint8_t vhdx_guid_logical_sector[16] = {
    0x1d, 0xbf, 0x41, 0x81, 0x6f, 0xa9, 0x09, 0x47,
    0xba, 0x47, 0xf2, 0x33, 0xa8, 0xfa, 0xab, 0x5f };
const uint8_t vhdx_guid_physical_sector[16] = {
    0xc7, 0x48, 0xa3, 0xcd, 0x5d, 0x44, 0x71, 0x44,
    0x9c, 0xc9, 0xe9, 0x88, 0x52, 0x51, 0xc5, 0x56 };
const uint8_t vhdx_guid_parent_locator[16] = {
    0x2d, 0x5f, 0xd3, 0xa8, 0x0b, 0xb3, 0x4d, 0x45,
    0xab, 0xf7, 0xd3, 0xd8, 0x48, 0x34, 0xab, 0x0c };
const uint8_t vhdx_guid_parent_type[16] = {
    0xb7, 0xef, 0x4a, 0xb0, 0x9e, 0xd1, 0x81, 0x4a,
    0xb7, 0x89, 0x25, 0xb8, 0xe9, 0x44, 0x59, 0x13 };

static const uint8_t *const item_guid[VHDX_ITEMS] = {
    vhdx_guid_file_params, vhdx_guid_disk_size, vhdx_guid_page83,
    vhdx_guid_logical_sector, vhdx_guid_physical_sector, vhdx_guid_parent_locator,
};
static const char *const item_name[VHDX_ITEMS] = {
    "file parameters", "virtual disk size", "page 83 data", "logical sector size",
    "physical sector size", "parent locator",
};

const char *const vhdx_ploc_key_names[VHDX_PLOC_KEYS] = {
    "parent_linkage", "parent_linkage2", "relative_path", "volume_path",
    "absolute_win32_path",
};

/* --- the table ----------------------------------------------------------------- */

struct span {
    uint32_t off, len, i;
};

static int span_cmp(const void *a, const void *b)
{
    const struct span *x = a, *y = b;
    return x->off < y->off ? -1 : x->off > y->off;
}

int vhdx_meta_decode(const uint8_t *b, uint32_t region_len, struct vhdx_meta *m, char *err,
                     size_t errlen)
{
    memset(m, 0, sizeof(*m));
    if (memcmp(b, VHDX_META_SIG, 8) != 0) {
        snprintf(err, errlen, "no metadata table signature ('metadata')");
        return -EINVAL;
    }
    if (region_len < VHDX_META_TABLE_SIZE) {
        snprintf(err, errlen, "metadata region of %u bytes cannot hold its table",
                 region_len);
        return -EINVAL;
    }
    m->count = le16_get(b + 10);
    if (m->count > VHDX_MAX_META_ENTRIES) {
        snprintf(err, errlen, "metadata table of %u entries (at most %u)", m->count,
                 VHDX_MAX_META_ENTRIES);
        return -EINVAL;
    }
    struct span *s = malloc((m->count ? m->count : 1) * sizeof(*s));
    if (!s) {
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    uint32_t ns = 0;
    int ret = -EINVAL;
    for (uint32_t i = 0; i < m->count; i++) {
        const uint8_t *e = b + VHDX_META_HDR_SIZE + (size_t)i * VHDX_META_ENTRY_SIZE;
        struct vhdx_meta_entry x;
        memcpy(x.guid, e, 16);
        x.off = le32_get(e + 16);
        x.len = le32_get(e + 20);
        x.flags = le32_get(e + 24) & 7;
        int k = 0;
        while (k < VHDX_ITEMS && memcmp(x.guid, item_guid[k], 16) != 0)
            k++;
        char g[37];
        vhdx_guid_text(x.guid, g);
        if (x.len > VHDX_MAX_META_ITEM ||
            (x.len && (x.off < VHDX_META_TABLE_SIZE || x.off > region_len ||
                       x.len > region_len - x.off))) {
            snprintf(err, errlen, "metadata item %u (%s): %u bytes at %u are not inside "
                     "the region (%u bytes) past its table, or longer than 1 MiB", i,
                     k < VHDX_ITEMS ? item_name[k] : g, x.len, x.off, region_len);
            goto out;
        }
        if (k == VHDX_ITEMS) {
            if (x.flags & VHDX_META_IS_REQUIRED) {
                snprintf(err, errlen, "metadata item %u has an unknown type %s marked "
                         "required", i, g);
                ret = -ENOTSUP;
                goto out;
            }
        } else {
            if (m->have[k]) {
                snprintf(err, errlen, "metadata item %u: the %s twice", i, item_name[k]);
                goto out;
            }
            m->have[k] = true;
            m->item[k] = x;
        }
        if (x.len)
            s[ns++] = (struct span){ x.off, x.len, i };
    }
    for (int k = 0; k < VHDX_ITEMS; k++)
        if (!m->have[k] && k != VHDX_ITEM_PARENT_LOCATOR) {
            snprintf(err, errlen, "metadata table has no %s item", item_name[k]);
            goto out;
        }
    qsort(s, ns, sizeof(*s), span_cmp);
    for (uint32_t i = 1; i < ns; i++)
        if ((uint64_t)s[i - 1].off + s[i - 1].len > s[i].off) {
            snprintf(err, errlen, "metadata items %u and %u overlap", s[i - 1].i, s[i].i);
            goto out;
        }
    ret = 0;
out:
    free(s);
    return ret;
}

void vhdx_meta_encode(const struct vhdx_meta_entry *e, uint16_t n, uint8_t *b)
{
    memset(b, 0, VHDX_META_TABLE_SIZE);
    if (n > VHDX_MAX_META_ENTRIES)
        n = VHDX_MAX_META_ENTRIES;
    memcpy(b, VHDX_META_SIG, 8);
    le16_put(b + 10, n);
    for (uint16_t i = 0; i < n; i++) {
        uint8_t *p = b + VHDX_META_HDR_SIZE + (size_t)i * VHDX_META_ENTRY_SIZE;
        memcpy(p, e[i].guid, 16);
        le32_put(p + 16, e[i].off);
        le32_put(p + 20, e[i].len);
        le32_put(p + 24, e[i].flags & 7);
    }
}

/* --- items ------------------------------------------------------------------------ */

static int need(uint32_t len, uint32_t want, const char *what, char *err, size_t errlen)
{
    if (len >= want)
        return 0;
    snprintf(err, errlen, "%s item of %u bytes (needs %u)", what, len, want);
    return -EINVAL;
}

int vhdx_file_params_decode(const uint8_t *b, uint32_t len, struct vhdx_params *p,
                            char *err, size_t errlen)
{
    if (need(len, 8, "file parameters", err, errlen) < 0)
        return -EINVAL;
    p->block_size = le32_get(b);
    uint32_t f = le32_get(b + 4);
    p->leave_allocated = f & VHDX_PARAM_LEAVE_ALLOCATED;
    p->has_parent = f & VHDX_PARAM_HAS_PARENT;
    if (p->block_size < VHDX_MIN_BLOCK || p->block_size > VHDX_MAX_BLOCK ||
        (p->block_size & (p->block_size - 1))) {
        snprintf(err, errlen, "block size %u is not a power of two from 1 MiB to 256 MiB",
                 p->block_size);
        return -EINVAL;
    }
    return 0;
}

int vhdx_disk_size_decode(const uint8_t *b, uint32_t len, struct vhdx_params *p,
                          char *err, size_t errlen)
{
    if (need(len, 8, "virtual disk size", err, errlen) < 0)
        return -EINVAL;
    p->disk_size = le64_get(b);
    return 0;
}

int vhdx_sector_size_decode(const uint8_t *b, uint32_t len, bool physical,
                            struct vhdx_params *p, char *err, size_t errlen)
{
    const char *what = physical ? "physical sector size" : "logical sector size";

    if (need(len, 4, what, err, errlen) < 0)
        return -EINVAL;
    uint32_t v = le32_get(b);
    if (v != 512 && v != 4096) {
        snprintf(err, errlen, "%s %u is neither 512 nor 4096", what, v);
        return -EINVAL;
    }
    if (physical)
        p->physical_sector = v;
    else
        p->logical_sector = v;
    return 0;
}

int vhdx_page83_decode(const uint8_t *b, uint32_t len, struct vhdx_params *p, char *err,
                       size_t errlen)
{
    if (need(len, 16, "page 83 data", err, errlen) < 0)
        return -EINVAL;
    memcpy(p->page83, b, 16);
    return 0;
}

int vhdx_params_check(const struct vhdx_params *p, char *err, size_t errlen)
{
    if (p->disk_size == 0 || p->disk_size > VHDX_MAX_SIZE) {
        snprintf(err, errlen, "virtual disk size %llu is not from 1 byte to 64 TiB",
                 (unsigned long long)p->disk_size);
        return -EINVAL;
    }
    if (p->logical_sector && p->disk_size % p->logical_sector) {
        snprintf(err, errlen, "virtual disk size %llu is not a multiple of the logical "
                 "sector size %u", (unsigned long long)p->disk_size, p->logical_sector);
        return -EINVAL;
    }
    return 0;
}

void vhdx_file_params_encode(const struct vhdx_params *p, uint8_t b[8])
{
    le32_put(b, p->block_size);
    le32_put(b + 4, (p->leave_allocated ? VHDX_PARAM_LEAVE_ALLOCATED : 0) |
                    (p->has_parent ? VHDX_PARAM_HAS_PARENT : 0));
}

void vhdx_disk_size_encode(const struct vhdx_params *p, uint8_t b[8])
{
    le64_put(b, p->disk_size);
}

void vhdx_sector_size_encode(uint32_t size, uint8_t b[4])
{
    le32_put(b, size);
}

/* --- parent locator --------------------------------------------------------------- */

/* UTF-16LE (n code units, no NUL inside) as UTF-8 into a new string. */
static int utf16_to_utf8(const uint8_t *b, size_t n, char **out)
{
    char *s = malloc(n * 3 + 1);
    size_t k = 0;

    if (!s)
        return -ENOMEM;
    for (size_t i = 0; i < n; i++) {
        uint32_t c = le16_get(b + 2 * i);
        if (c >= 0xd800 && c < 0xdc00) {
            uint32_t lo = i + 1 < n ? le16_get(b + 2 * i + 2) : 0;
            if (lo < 0xdc00 || lo >= 0xe000)
                goto bad;
            c = 0x10000 + ((c - 0xd800) << 10) + (lo - 0xdc00);
            i++;
        } else if ((c >= 0xdc00 && c < 0xe000) || c == 0) {
            goto bad;
        }
        if (c < 0x80) {
            s[k++] = (char)c;
        } else if (c < 0x800) {
            s[k++] = (char)(0xc0 | c >> 6);
            s[k++] = (char)(0x80 | (c & 0x3f));
        } else if (c < 0x10000) {
            s[k++] = (char)(0xe0 | c >> 12);
            s[k++] = (char)(0x80 | (c >> 6 & 0x3f));
            s[k++] = (char)(0x80 | (c & 0x3f));
        } else {
            s[k++] = (char)(0xf0 | c >> 18);
            s[k++] = (char)(0x80 | (c >> 12 & 0x3f));
            s[k++] = (char)(0x80 | (c >> 6 & 0x3f));
            s[k++] = (char)(0x80 | (c & 0x3f));
        }
    }
    s[k] = 0;
    *out = s;
    return 0;
bad:
    free(s);
    return -EINVAL;
}

void vhdx_ploc_free(struct vhdx_ploc *pl)
{
    for (int k = 0; k < VHDX_PLOC_KEYS; k++) {
        free(pl->value[k]);
        pl->value[k] = NULL;
    }
}

int vhdx_ploc_decode(const uint8_t *b, uint32_t len, struct vhdx_ploc *pl, char *err,
                     size_t errlen)
{
    int r;

    memset(pl, 0, sizeof(*pl));
    if (len < VHDX_PLOC_HDR_SIZE) {
        snprintf(err, errlen, "parent locator of %u bytes", len);
        return -EINVAL;
    }
    if (memcmp(b, vhdx_guid_parent_type, 16) != 0) {
        char g[37];
        vhdx_guid_text(b, g);
        snprintf(err, errlen, "parent locator of unknown type %s", g);
        return -EINVAL;
    }
    pl->count = le16_get(b + 18);
    if ((uint64_t)pl->count * VHDX_PLOC_ENTRY_SIZE > len - VHDX_PLOC_HDR_SIZE) {
        snprintf(err, errlen, "parent locator: %u entries do not fit its %u bytes",
                 pl->count, len);
        return -EINVAL;
    }
    for (uint32_t i = 0; i < pl->count; i++) {
        const uint8_t *e = b + VHDX_PLOC_HDR_SIZE + (size_t)i * VHDX_PLOC_ENTRY_SIZE;
        uint32_t ko = le32_get(e), vo = le32_get(e + 4);
        uint32_t kl = le16_get(e + 8), vl = le16_get(e + 10);
        if (!kl || !vl || kl % 2 || vl % 2 || ko > len || kl > len - ko || vo > len ||
            vl > len - vo) {
            snprintf(err, errlen, "parent locator entry %u: key (%u bytes at %u) or value "
                     "(%u bytes at %u) empty, odd or outside the item (%u bytes)", i, kl, ko,
                     vl, vo, len);
            r = -EINVAL;
            goto fail;
        }
        char *key;
        if ((r = utf16_to_utf8(b + ko, kl / 2, &key)) < 0) {
            snprintf(err, errlen, r == -ENOMEM ? "out of memory" :
                     "parent locator entry %u: the key is not UTF-16 text", i);
            goto fail;
        }
        int k = 0;
        while (k < VHDX_PLOC_KEYS && strcmp(key, vhdx_ploc_key_names[k]) != 0)
            k++;
        free(key);
        if (k == VHDX_PLOC_KEYS)
            continue;
        if (pl->value[k]) {
            snprintf(err, errlen, "parent locator: key %s twice", vhdx_ploc_key_names[k]);
            r = -EINVAL;
            goto fail;
        }
        if ((r = utf16_to_utf8(b + vo, vl / 2, &pl->value[k])) < 0) {
            snprintf(err, errlen, r == -ENOMEM ? "out of memory" :
                     "parent locator: the value of %s is not UTF-16 text",
                     vhdx_ploc_key_names[k]);
            goto fail;
        }
        if (strlen(pl->value[k]) >= VHDX_PLOC_MAX_PATH) {
            snprintf(err, errlen, "parent locator: the value of %s is longer than %u "
                     "bytes", vhdx_ploc_key_names[k], VHDX_PLOC_MAX_PATH);
            r = -EINVAL;
            goto fail;
        }
    }
    if (!pl->value[VHDX_PLOC_PARENT_LINKAGE]) {
        snprintf(err, errlen, "parent locator has no parent_linkage");
        r = -EINVAL;
        goto fail;
    }
    return 0;
fail:
    vhdx_ploc_free(pl);
    return r;
}

/* UTF-8 (NUL-terminated) as UTF-16LE at b, at most cap bytes; returns the
 * bytes written or -ENOSPC / -EINVAL. */
static int utf8_to_utf16(const char *s, uint8_t *b, size_t cap)
{
    size_t k = 0;
    const unsigned char *p = (const unsigned char *)s;

    while (*p) {
        uint32_t c;
        int more;
        if (*p < 0x80)
            c = *p, more = 0;
        else if ((*p & 0xe0) == 0xc0)
            c = *p & 0x1f, more = 1;
        else if ((*p & 0xf0) == 0xe0)
            c = *p & 0x0f, more = 2;
        else if ((*p & 0xf8) == 0xf0)
            c = *p & 0x07, more = 3;
        else
            return -EINVAL;
        p++;
        for (int i = 0; i < more; i++, p++) {
            if ((*p & 0xc0) != 0x80)
                return -EINVAL;
            c = c << 6 | (*p & 0x3f);
        }
        if (c >= 0x10000) {
            if (k + 4 > cap)
                return -ENOSPC;
            c -= 0x10000;
            le16_put(b + k, (uint16_t)(0xd800 + (c >> 10)));
            le16_put(b + k + 2, (uint16_t)(0xdc00 + (c & 0x3ff)));
            k += 4;
        } else {
            if (k + 2 > cap)
                return -ENOSPC;
            le16_put(b + k, (uint16_t)c);
            k += 2;
        }
    }
    return (int)k;
}

int vhdx_ploc_encode(const struct vhdx_ploc *pl, uint8_t *b, size_t cap)
{
    uint16_t n = 0;

    for (int k = 0; k < VHDX_PLOC_KEYS; k++)
        n += pl->value[k] != NULL;
    size_t pos = VHDX_PLOC_HDR_SIZE + (size_t)n * VHDX_PLOC_ENTRY_SIZE;
    if (pos > cap)
        return -ENOSPC;
    memset(b, 0, pos);
    memcpy(b, vhdx_guid_parent_type, 16);
    le16_put(b + 18, n);
    uint16_t i = 0;
    for (int k = 0; k < VHDX_PLOC_KEYS; k++) {
        if (!pl->value[k])
            continue;
        uint8_t *e = b + VHDX_PLOC_HDR_SIZE + (size_t)i++ * VHDX_PLOC_ENTRY_SIZE;
        int kl = utf8_to_utf16(vhdx_ploc_key_names[k], b + pos, cap - pos);
        if (kl < 0)
            return kl;
        le32_put(e, (uint32_t)pos);
        le16_put(e + 8, (uint16_t)kl);
        pos += (size_t)kl;
        int vl = utf8_to_utf16(pl->value[k], b + pos, cap - pos);
        if (vl < 0)
            return vl;
        if (vl > 0xffff)
            return -ENOSPC;
        le32_put(e + 4, (uint32_t)pos);
        le16_put(e + 10, (uint16_t)vl);
        pos += (size_t)vl;
    }
    return (int)pos;
}
