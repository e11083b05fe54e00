/* The VMDK descriptor with another parent (rebase): the text is kept as it
 * is, line for line, except the parentCID line (the new parent's CID, or
 * ffffffff for none) and the parentFileNameHint line (the new name, or no
 * such line for none).  A missing parentCID line is added after the CID
 * line (first, without one), a missing hint after the createType line
 * that follows parentCID (qemu's and VMware's order), else right after
 * parentCID.
 *
 * qemu finds its keys with a substring search ("CID" is the first "CID" in
 * the text, the hint must be written parentFileNameHint="NAME"), so the
 * added lines never come before the CID line and the hint is written in
 * exactly that form.  Added lines end as the text's first line does (LF or
 * CRLF).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "formats/vmdk/read_int.h"
#include "util/strbuf.h"

static bool is_blank(char c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f';
}

/* Whether line [s, e) is "KEY = ..." (any case, spaces allowed). */
static bool line_key(const char *s, const char *e, const char *key)
{
    size_t n = strlen(key);

    while (s < e && is_blank(*s))
        s++;
    if ((size_t)(e - s) < n || strncasecmp(s, key, n) != 0)
        return false;
    s += n;
    while (s < e && is_blank(*s))
        s++;
    return s < e && *s == '=';
}

static void add_cid(struct strbuf *b, uint32_t cid, const char *eol)
{
    sb_addf(b, "parentCID=%08x%s", cid, eol);
}

static void add_hint(struct strbuf *b, const char *hint, const char *eol)
{
    sb_addf(b, "parentFileNameHint=\"%s\"%s", hint, eol);
}

bool vmdk_hint_ok(const char *name)
{
    if (!*name || strlen(name) > VMDK_MAX_HINT)
        return false;
    for (const char *p = name; *p; p++)
        if ((unsigned char)*p < 0x20 || *p == '"' || *p == 0x7f)
            return false;
    return true;
}

/* Whether a createType line comes in [p, end). */
static bool create_type_in(const char *p, const char *end)
{
    while (p < end) {
        const char *le = memchr(p, '\n', (size_t)(end - p));
        le = le ? le : end;
        if (line_key(p, le, "createType"))
            return true;
        p = le + 1;
    }
    return false;
}

struct edit {
    struct strbuf b;
    const char *hint, *eol, *end;
    uint32_t cid;
    bool cid_done, hint_done;
};

/* The parentCID line (ending `lend`), then the hint when it is still to
 * be added and no createType line follows (from `rest` on) to put it after. */
static void emit_cid(struct edit *e, const char *lend, const char *rest)
{
    add_cid(&e->b, e->cid, lend);
    e->cid_done = true;
    if (!e->hint_done && !create_type_in(rest, e->end)) {
        add_hint(&e->b, e->hint, e->eol);
        e->hint_done = true;
    }
}

int vmdk_desc_set_parent(const char *text, size_t len, const char *hint, uint32_t parent_cid,
                         char **out, size_t *out_len)
{
    const char *nul = memchr(text, '\0', len), *end = nul ? nul : text + len;
    const char *first_nl = memchr(text, '\n', (size_t)(end - text));
    struct edit e = { .hint = hint, .end = end, .cid = parent_cid,
                      .eol = first_nl && first_nl > text && first_nl[-1] == '\r' ? "\r\n" : "\n" };
    bool have_cid_line = false, have_hint_line = false, have_cid = false;

    *out = NULL;
    *out_len = 0;
    if (hint && !vmdk_hint_ok(hint))
        return -EINVAL;
    /* which lines exist */
    for (const char *p = text; p < end;) {
        const char *le = memchr(p, '\n', (size_t)(end - p));
        le = le ? le : end;
        if (line_key(p, le, "parentCID"))
            have_cid_line = true;
        else if (line_key(p, le, "parentFileNameHint"))
            have_hint_line = true;
        else if (line_key(p, le, "CID"))
            have_cid = true;
        p = le + 1;
    }
    sb_init(&e.b);
    e.hint_done = have_hint_line || !hint;
    if (!have_cid_line && !have_cid)
        emit_cid(&e, e.eol, text);  /* no CID line: the parent's comes first */
    for (const char *p = text; p < end;) {
        const char *le = memchr(p, '\n', (size_t)(end - p));
        bool has_nl = le != NULL;
        const char *next = le ? le + 1 : end;
        /* this line's own end: what it had, or the text's if it had none */
        const char *lend = le ? (le > p && le[-1] == '\r' ? "\r\n" : "\n") : e.eol;
        le = le ? le : end;
        if (line_key(p, le, "parentCID")) {
            emit_cid(&e, lend, next);
        } else if (line_key(p, le, "parentFileNameHint")) {
            if (hint)
                add_hint(&e.b, hint, lend);
        } else {
            sb_addf(&e.b, "%.*s", (int)(next - p), p);
            if (!has_nl)
                sb_adds(&e.b, e.eol);   /* the last line had no line end */
            if (!e.cid_done && !have_cid_line && line_key(p, le, "CID"))
                emit_cid(&e, e.eol, next);
            else if (!e.hint_done && e.cid_done && line_key(p, le, "createType")) {
                add_hint(&e.b, hint, e.eol);
                e.hint_done = true;
            }
        }
        p = next;
    }
    size_t n = e.b.len;
    char *s = sb_take(&e.b);
    if (!s)
        return -ENOMEM;
    *out = s;
    *out_len = n;
    return 0;
}
