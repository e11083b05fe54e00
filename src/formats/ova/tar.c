/* tar: decoding tar headers and the names in them (pure functions; OVA
 * archives are read with them, open.c). */
#define _GNU_SOURCE
#include "formats/ova/tar.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/diag.h"

static bool parse_octal(const uint8_t *p, size_t n, uint64_t *out)
{
    uint64_t v = 0;
    size_t i = 0;
    bool any = false;

    while (i < n && p[i] == ' ')
        i++;
    for (; i < n && p[i] >= '0' && p[i] <= '7'; i++) {
        if (v >> 60)
            return false;
        v = v << 3 | (uint64_t)(p[i] - '0');
        any = true;
    }
    for (; i < n; i++)
        if (p[i] != ' ' && p[i] != '\0')
            return false;
    *out = v;
    return any;
}

/* size field: octal, or GNU base-256 (high bit of the first byte set) */
static bool parse_size(const uint8_t *p, uint64_t *out)
{
    if (p[0] & 0x80) {
        uint64_t v = 0;
        if (p[0] != 0x80 || p[1] || p[2] || p[3])
            return false;   /* negative or more than 64 bits */
        for (int i = 4; i < 12; i++)
            v = v << 8 | p[i];
        *out = v;
        return true;
    }
    return parse_octal(p, 12, out);
}

int tar_header_decode(const uint8_t *b, struct tar_member *m, struct diag *d,
                      const char *file, int64_t off)
{
    uint64_t want, sum = 0;
    bool zero = true;

    memset(m, 0, sizeof(*m));
    for (size_t i = 0; i < TAR_BLOCK; i++)
        if (b[i]) {
            zero = false;
            break;
        }
    if (zero) {
        m->kind = TAR_END;
        return 0;
    }
    if (!parse_octal(b + 148, 8, &want))
        return diag_fail(d, -EINVAL, file, off + 148, "tar header checksum field is not octal");
    for (size_t i = 0; i < TAR_BLOCK; i++)
        sum += (i >= 148 && i < 156) ? ' ' : b[i];
    if (sum != want)
        return diag_fail(d, -EINVAL, file, off,
                         "tar header checksum is wrong (stored %llu, computed %llu): not a "
                         "tar archive or damaged", (unsigned long long)want,
                         (unsigned long long)sum);
    if (!parse_size(b + 124, &m->size))
        return diag_fail(d, -EINVAL, file, off + 124, "tar header size field is invalid");
    if (m->size > (1ull << 50))
        return diag_fail(d, -EINVAL, file, off + 124, "tar member of %llu bytes is too large",
                         (unsigned long long)m->size);
    size_t n = strnlen((const char *)b, 100);
    /* the prefix field exists in POSIX ustar only: old GNU archives
     * ("ustar  ") keep times and sparse maps there */
    bool ustar = memcmp(b + 257, "ustar\0", 6) == 0;
    size_t pn = ustar ? strnlen((const char *)b + 345, 155) : 0;
    if (pn)
        snprintf(m->name, sizeof(m->name), "%.*s/%.*s", (int)pn, (const char *)b + 345,
                 (int)n, (const char *)b);
    else
        snprintf(m->name, sizeof(m->name), "%.*s", (int)n, (const char *)b);
    switch (b[156]) {
    case '0': case '\0': case '7':
        m->kind = TAR_FILE;
        break;
    case 'L':
        m->kind = TAR_LONGNAME;
        break;
    case 'x':
        m->kind = TAR_PAX;
        break;
    default:
        m->kind = TAR_OTHER;
        break;
    }
    return 0;
}

bool tar_pax_decode(const char *rec, size_t len, struct tar_pax *pi)
{
    size_t p = 0;

    memset(pi, 0, sizeof(*pi));
    while (p < len) {
        size_t rl = 0, q = p;
        while (q < len && rec[q] >= '0' && rec[q] <= '9' && rl < len)
            rl = rl * 10 + (size_t)(rec[q++] - '0');
        if (q >= len || rec[q] != ' ' || rl == 0 || rl > len - p)
            return false;
        const char *kv = rec + q + 1, *end = rec + p + rl;  /* end: past the '\n' */
        if (kv >= end || end[-1] != '\n')
            return false;
        const char *eq = memchr(kv, '=', (size_t)(end - kv));
        if (!eq)
            return false;
        size_t kl = (size_t)(eq - kv), vl = (size_t)(end - 1 - (eq + 1));
        const char *v = eq + 1;
        if (kl == 4 && memcmp(kv, "path", 4) == 0) {
            if (vl > TAR_MAX_NAME || memchr(v, '\0', vl))
                return false;
            memcpy(pi->path, v, vl);
            pi->path[vl] = '\0';
            pi->have_path = true;
        } else if (kl == 4 && memcmp(kv, "size", 4) == 0) {
            uint64_t s = 0;
            if (vl == 0 || vl > 16)
                return false;
            for (size_t i = 0; i < vl; i++) {
                if (v[i] < '0' || v[i] > '9')
                    return false;
                s = s * 10 + (uint64_t)(v[i] - '0');
            }
            pi->size = s;
            pi->have_size = true;
        } else if (kl > 11 && memcmp(kv, "GNU.sparse.", 11) == 0) {
            pi->sparse = true;
        }
        p += rl;
    }
    return true;
}

bool tar_pax_path(const char *rec, size_t len, char *name, size_t cap)
{
    struct tar_pax *pi = malloc(sizeof(*pi));
    bool ok = pi && tar_pax_decode(rec, len, pi) && pi->have_path && strlen(pi->path) < cap;

    if (ok)
        strcpy(name, pi->path);
    free(pi);
    return ok;
}

char *tar_member_path(const char *dir, const char *rel)
{
    size_t dl = strlen(dir), rl = strlen(rel);
    char *in = malloc(dl + rl + 2), *out;

    if (!in)
        return NULL;
    memcpy(in, dir, dl);
    in[dl] = '/';
    memcpy(in + dl + 1, rel, rl + 1);
    out = malloc(dl + rl + 2);
    if (!out) {
        free(in);
        return NULL;
    }
    size_t o = 0;
    for (const char *p = in; *p;) {
        while (*p == '/')
            p++;
        if (!*p)
            break;
        const char *e = strchr(p, '/');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        if (n == 1 && p[0] == '.') {
            /* nothing */
        } else if (n == 2 && p[0] == '.' && p[1] == '.') {
            if (o == 0) {
                free(in);
                free(out);
                return NULL;
            }
            while (o > 0 && out[--o] != '/')
                ;
        } else {
            if (o)
                out[o++] = '/';
            memcpy(out + o, p, n);
            o += n;
        }
        p += n;
    }
    out[o] = '\0';
    free(in);
    if (o == 0) {           /* the root itself is not a member */
        free(out);
        return NULL;
    }
    return out;
}

