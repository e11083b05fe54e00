/* The VMDK descriptor: a small text file (or a text area inside a sparse
 * extent) naming the disk's extents, its content id and its parent.
 *
 * Accepted as VMware does: LF or CRLF line ends, blank lines and comments
 * anywhere, keywords in any case ("createtype", "rw 2048 sparse"), values
 * quoted or not, spaces around '='.  Everything else is refused with the line
 * number: a line that is neither a key=value nor an extent, an extent with a
 * bad size, type or missing file name, more than VMDK_MAX_EXTENTS extents.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "formats/vmdk/format.h"
#include "util/diag.h"

static const struct { const char *name; enum vmdk_ext_type type; } ext_types[] = {
    { "FLAT", VMDK_EXT_FLAT },           { "SPARSE", VMDK_EXT_SPARSE },
    { "ZERO", VMDK_EXT_ZERO },           { "VMFS", VMDK_EXT_VMFS },
    { "VMFSSPARSE", VMDK_EXT_VMFSSPARSE }, { "SESPARSE", VMDK_EXT_SESPARSE },
    { "VMFSRDM", VMDK_EXT_VMFSRDM },     { "VMFSRAW", VMDK_EXT_VMFSRAW },
};

const char *vmdk_ext_type_name(enum vmdk_ext_type t)
{
    for (size_t i = 0; i < sizeof(ext_types) / sizeof(ext_types[0]); i++)
        if (ext_types[i].type == t)
            return ext_types[i].name;
    return "?";
}

static bool is_space(char c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f';
}

/* One token from *p (up to whitespace), returned as [*start, *end). */
static bool next_token(const char **p, const char *end, const char **ts, const char **te)
{
    const char *s = *p;
    while (s < end && is_space(*s))
        s++;
    if (s == end)
        return false;
    *ts = s;
    while (s < end && !is_space(*s))
        s++;
    *te = s;
    *p = s;
    return true;
}

static bool tok_is(const char *s, const char *e, const char *word)
{
    size_t n = strlen(word);
    return (size_t)(e - s) == n && strncasecmp(s, word, n) == 0;
}

/* Decimal without sign, at most `max`. */
static bool parse_u64(const char *s, const char *e, uint64_t max, uint64_t *out)
{
    uint64_t v = 0;
    if (s == e)
        return false;
    for (; s < e; s++) {
        if (*s < '0' || *s > '9')
            return false;
        unsigned dgt = (unsigned)(*s - '0');
        if (v > (max - dgt) / 10)
            return false;
        v = v * 10 + dgt;
    }
    *out = v;
    return true;
}

/* A content id: 1..8 hex digits. */
static bool parse_cid(const char *s, const char *e, uint32_t *out)
{
    uint32_t v = 0;
    if (s == e || e - s > 8)
        return false;
    for (; s < e; s++) {
        char c = *s;
        unsigned x;
        if (c >= '0' && c <= '9')
            x = (unsigned)(c - '0');
        else if (c >= 'a' && c <= 'f')
            x = (unsigned)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F')
            x = (unsigned)(c - 'A' + 10);
        else
            return false;
        v = v << 4 | x;
    }
    *out = v;
    return true;
}

static char *dup_range(const char *s, const char *e)
{
    return strndup(s, (size_t)(e - s));
}

/* Strip surrounding whitespace and one pair of double quotes. */
static void trim_value(const char **s, const char **e)
{
    while (*s < *e && is_space(**s))
        (*s)++;
    while (*e > *s && is_space((*e)[-1]))
        (*e)--;
    if (*e - *s >= 2 && **s == '"' && (*e)[-1] == '"') {
        (*s)++;
        (*e)--;
    }
}

struct pctx {
    struct diag *d;
    const char *file;
    int64_t off;
    unsigned line;
};

/* The first 60 bytes of a line for a message, control bytes as \xNN (a
 * hostile descriptor must not send escape sequences to the terminal). */
static void quote_line(char *out, size_t cap, const char *ls, const char *le)
{
    size_t o = 0;

    for (const char *p = ls; p < le && p < ls + 60 && o + 5 < cap; p++) {
        unsigned char ch = (unsigned char)*p;
        if (ch < 0x20 || ch == 0x7f)
            o += (size_t)snprintf(out + o, cap - o, "\\x%02x", ch);
        else
            out[o++] = (char)ch;
    }
    out[o] = '\0';
}

static int fail_line(struct pctx *c, const char *ls, const char *le, const char *why)
{
    char q[4 * 60 + 1];

    quote_line(q, sizeof(q), ls, le);
    return diag_fail(c->d, -EINVAL, c->file, c->off, "descriptor line %u: %s: '%s%s'",
                     c->line, why, q, le - ls > 60 ? "..." : "");
}

static int parse_extent(struct pctx *c, struct vmdk_desc *out, enum vmdk_access access,
                        const char *p, const char *le, const char *ls)
{
    const char *ts, *te;
    struct vmdk_desc_extent x = { .access = access, .line = c->line };
    size_t i;

    if (out->n_ext >= VMDK_MAX_EXTENTS)
        return diag_fail(c->d, -EINVAL, c->file, c->off,
                         "descriptor line %u: more than %u extents", c->line, VMDK_MAX_EXTENTS);
    if (!next_token(&p, le, &ts, &te) || !parse_u64(ts, te, VMDK_MAX_SECTORS, &x.sectors))
        return fail_line(c, ls, le, "extent size is not a number of sectors (max 2^41)");
    if (!next_token(&p, le, &ts, &te))
        return fail_line(c, ls, le, "extent has no type");
    for (i = 0; i < sizeof(ext_types) / sizeof(ext_types[0]); i++)
        if (tok_is(ts, te, ext_types[i].name))
            break;
    if (i == sizeof(ext_types) / sizeof(ext_types[0]))
        return fail_line(c, ls, le, "unknown extent type");
    x.type = ext_types[i].type;
    while (p < le && is_space(*p))
        p++;
    if (p < le) {
        /* the file name: quoted (may hold spaces) or a bare word */
        if (*p == '"') {
            const char *q = memchr(p + 1, '"', (size_t)(le - p - 1));
            if (!q)
                return fail_line(c, ls, le, "file name has no closing quote");
            ts = p + 1;
            te = q;
            p = q + 1;
        } else if (!next_token(&p, le, &ts, &te)) {
            return fail_line(c, ls, le, "bad file name");
        }
        if (ts == te)
            return fail_line(c, ls, le, "empty file name");
        if (memchr(ts, '\0', (size_t)(te - ts)))
            return fail_line(c, ls, le, "file name holds a NUL byte");
        x.filename = dup_range(ts, te);
        if (!x.filename)
            return diag_fail(c->d, -ENOMEM, c->file, c->off, "out of memory");
        /* an optional start sector (flat extents); device ids may follow */
        if (next_token(&p, le, &ts, &te) &&
            !parse_u64(ts, te, VMDK_MAX_SECTORS, &x.offset)) {
            free(x.filename);
            return fail_line(c, ls, le, "extent offset is not a number of sectors");
        }
    }
    if (x.type != VMDK_EXT_ZERO && !x.filename)
        return fail_line(c, ls, le, "extent has no file name");
    if (x.type == VMDK_EXT_ZERO) {
        free(x.filename);
        x.filename = NULL;
    }
    if (x.offset && x.type != VMDK_EXT_FLAT && x.type != VMDK_EXT_VMFS) {
        free(x.filename);
        return fail_line(c, ls, le, "only FLAT and VMFS extents take an offset");
    }
    if (out->total_sectors + x.sectors > VMDK_MAX_SECTORS) {
        free(x.filename);
        return fail_line(c, ls, le, "extents add up to more than 2^41 sectors");
    }
    if ((out->n_ext & (out->n_ext - 1)) == 0) {     /* grow at powers of two */
        size_t cap = out->n_ext ? out->n_ext * 2 : 4;
        struct vmdk_desc_extent *n = realloc(out->ext, cap * sizeof(*n));
        if (!n) {
            free(x.filename);
            return diag_fail(c->d, -ENOMEM, c->file, c->off, "out of memory");
        }
        out->ext = n;
    }
    out->ext[out->n_ext++] = x;
    out->total_sectors += x.sectors;
    return 0;
}

static int set_str(struct pctx *c, char **dst, const char *s, const char *e)
{
    free(*dst);
    *dst = dup_range(s, e);
    return *dst ? 0 : diag_fail(c->d, -ENOMEM, c->file, c->off, "out of memory");
}

static int parse_line(struct pctx *c, struct vmdk_desc *out, const char *ls, const char *le)
{
    const char *p = ls, *ts, *te;

    if (!next_token(&p, le, &ts, &te) || *ts == '#')
        return 0;   /* blank or comment */

    /* extent line: ACCESS SECTORS TYPE ["FILE" [OFFSET]] */
    enum vmdk_access access;
    bool is_ext = true;
    if (tok_is(ts, te, "RW"))
        access = VMDK_ACCESS_RW;
    else if (tok_is(ts, te, "RDONLY"))
        access = VMDK_ACCESS_RDONLY;
    else if (tok_is(ts, te, "NOACCESS"))
        access = VMDK_ACCESS_NOACCESS;
    else
        is_ext = false;
    if (is_ext)
        return parse_extent(c, out, access, p, le, ls);

    /* key = value */
    const char *eq = memchr(ls, '=', (size_t)(le - ls));
    if (!eq)
        return fail_line(c, ls, le, "neither a key=value nor an extent");
    const char *ks = ls, *ke = eq, *vs = eq + 1, *ve = le;
    while (ks < ke && is_space(*ks))
        ks++;
    while (ke > ks && is_space(ke[-1]))
        ke--;
    trim_value(&vs, &ve);
    if (ks == ke)
        return fail_line(c, ls, le, "empty key");

    if (tok_is(ks, ke, "version")) {
        uint64_t v;
        if (!parse_u64(vs, ve, 1000, &v))
            return fail_line(c, ls, le, "version is not a number");
        out->version = (unsigned)v;
    } else if (tok_is(ks, ke, "CID")) {
        if (!parse_cid(vs, ve, &out->cid))
            return fail_line(c, ls, le, "CID is not 1..8 hex digits");
        out->has_cid = true;
    } else if (tok_is(ks, ke, "parentCID")) {
        if (!parse_cid(vs, ve, &out->parent_cid))
            return fail_line(c, ls, le, "parentCID is not 1..8 hex digits");
        out->has_parent_cid = true;
    } else if (tok_is(ks, ke, "createType")) {
        return set_str(c, &out->create_type, vs, ve);
    } else if (tok_is(ks, ke, "parentFileNameHint")) {
        if (vs == ve)
            return 0;
        if (memchr(vs, '\0', (size_t)(ve - vs)))
            return fail_line(c, ls, le, "parentFileNameHint holds a NUL byte");
        return set_str(c, &out->parent_hint, vs, ve);
    } else if (tok_is(ks, ke, "ddb.adapterType")) {
        return set_str(c, &out->adapter_type, vs, ve);
    } else if (tok_is(ks, ke, "ddb.virtualHWVersion")) {
        return set_str(c, &out->hw_version, vs, ve);
    }
    /* other keys (encoding, ddb.*, changeTrackPath, ...) carry no content */
    return 0;
}

int vmdk_desc_parse(const char *text, size_t len, struct vmdk_desc *out,
                    struct diag *d, const char *file, int64_t off)
{
    struct pctx c = { .d = d, .file = file, .off = off };
    const char *nul = memchr(text, '\0', len);
    const char *p = text, *end = nul ? nul : text + len;
    int r = 0;

    memset(out, 0, sizeof(*out));
    if (len > VMDK_MAX_DESC_BYTES)
        return diag_fail(d, -EINVAL, file, off, "descriptor of %zu bytes is too large (max %u)",
                         len, VMDK_MAX_DESC_BYTES);
    while (p < end) {
        const char *le = memchr(p, '\n', (size_t)(end - p));
        if (!le)
            le = end;
        c.line++;
        r = parse_line(&c, out, p, le);
        if (r < 0) {
            vmdk_desc_free(out);
            return r;
        }
        p = le + 1;
    }
    return 0;
}

void vmdk_desc_free(struct vmdk_desc *desc)
{
    for (size_t i = 0; i < desc->n_ext; i++)
        free(desc->ext[i].filename);
    free(desc->ext);
    free(desc->create_type);
    free(desc->parent_hint);
    free(desc->adapter_type);
    free(desc->hw_version);
    memset(desc, 0, sizeof(*desc));
}

/* --- probing ---------------------------------------------------------------- */

static bool starts_with_ci(const char *s, const char *e, const char *word)
{
    size_t n = strlen(word);
    return (size_t)(e - s) >= n && strncasecmp(s, word, n) == 0;
}

static bool all_digits(const char *s, const char *e)
{
    if (s == e)
        return false;
    for (; s < e; s++)
        if (*s < '0' || *s > '9')
            return false;
    return true;
}

bool vmdk_desc_probe(const uint8_t *head, size_t len)
{
    const char *p = (const char *)head, *end = p + len;
    unsigned lines = 0;

    /* text only: no control bytes but tab/CR/LF.  The text ends at the
     * first NUL, as for every reader of the format: qemu pads a descriptor
     * to a sector, editing such a file with sed leaves line ends among the
     * NULs, and a tool that writes the descriptor into a reused buffer may
     * leave anything after the NUL.  Bytes other than padding after the NUL
     * are accepted only below the signature line, so that a binary file
     * that merely starts with a few descriptor-like words stays unknown. */
    bool tail_junk = false;
    const uint8_t *nul = memchr(head, 0, len);
    if (nul) {
        for (size_t i = (size_t)(nul - head); i < len && !tail_junk; i++)
            if (head[i] && !is_space((char)head[i]) && head[i] != '\n')
                tail_junk = true;
        len = (size_t)(nul - head);
        end = p + len;
    }
    if (len == 0)
        return false;
    for (size_t i = 0; i < len; i++) {
        uint8_t c = head[i];
        if (c < 0x20 && c != '\t' && c != '\r' && c != '\n' && c != '\f')
            return false;
    }
    while (p < end && lines < 200) {
        const char *le = memchr(p, '\n', (size_t)(end - p));
        if (!le)
            le = end;
        lines++;
        const char *s = p, *ts, *te;
        while (s < le && is_space(*s))
            s++;
        if (starts_with_ci(s, le, "# Disk DescriptorFile"))
            return true;
        if (tail_junk && s < le)
            return false;
        if (s < le && *s != '#') {
            if (starts_with_ci(s, le, "createType")) {
                const char *q = s + 10;
                while (q < le && is_space(*q))
                    q++;
                if (q < le && *q == '=')
                    return true;
            }
            const char *t = s;
            if (next_token(&t, le, &ts, &te) &&
                (tok_is(ts, te, "RW") || tok_is(ts, te, "RDONLY") || tok_is(ts, te, "NOACCESS"))) {
                const char *xs, *xe;
                if (next_token(&t, le, &ts, &te) && all_digits(ts, te) &&
                    next_token(&t, le, &xs, &xe)) {
                    for (size_t i = 0; i < sizeof(ext_types) / sizeof(ext_types[0]); i++)
                        if (tok_is(xs, xe, ext_types[i].name))
                            return true;
                }
            }
        }
        p = le + 1;
    }
    return false;
}
