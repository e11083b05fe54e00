/* The VMDK descriptor with another parent (rebase): the text is kept as it
 * is, line for line, except the parentCID line (the new parent's CID, or
 * ffffffff for none) and the parentFileNameHint line (the new name, or no
 * such line for none).  A missing parentCID line is added after the CID
 * line, a missing hint after createType (qemu's and VMware's order).
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

int vmdk_desc_set_parent(const char *text, size_t len, const char *hint, uint32_t parent_cid,
                         char **out, size_t *out_len)
{
    const char *nul = memchr(text, '\0', len), *end = nul ? nul : text + len;
    const char *first_nl = memchr(text, '\n', (size_t)(end - text));
    const char *eol = first_nl && first_nl > text && first_nl[-1] == '\r' ? "\r\n" : "\n";
    bool have_cid_line = false, have_hint_line = false, have_cid = false;
    struct strbuf b;

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
    sb_init(&b);
    bool cid_done = have_cid_line, hint_done = have_hint_line || !hint;
    if (!cid_done && !have_cid) {
        add_cid(&b, parent_cid, eol);   /* no CID line: the parent's comes first */
        cid_done = true;
    }
    for (const char *p = text; p < end;) {
        const char *le = memchr(p, '\n', (size_t)(end - p));
        bool has_nl = le != NULL;
        const char *next = le ? le + 1 : end;
        /* this line's own end: what it had, or the text's if it had none */
        const char *lend = le ? (le > p && le[-1] == '\r' ? "\r\n" : "\n") : eol;
        le = le ? le : end;
        if (line_key(p, le, "parentCID")) {
            add_cid(&b, parent_cid, lend);
        } else if (line_key(p, le, "parentFileNameHint")) {
            if (hint)
                add_hint(&b, hint, lend);
        } else {
            sb_addf(&b, "%.*s", (int)(next - p), p);
            if (!has_nl)
                sb_adds(&b, eol);   /* the last line had no line end */
            if (!cid_done && line_key(p, le, "CID")) {
                add_cid(&b, parent_cid, eol);
                cid_done = true;
            }
            if (!hint_done && cid_done && line_key(p, le, "createType")) {
                add_hint(&b, hint, eol);
                hint_done = true;
            }
        }
        if (!hint_done && cid_done && line_key(p, le, "parentCID")) {
            /* no createType after the parent's CID: the hint follows it */
            bool ct_later = false;
            for (const char *q = next; q < end && !ct_later;) {
                const char *qe = memchr(q, '\n', (size_t)(end - q));
                qe = qe ? qe : end;
                ct_later = line_key(q, qe, "createType");
                q = qe + 1;
            }
            if (!ct_later) {
                add_hint(&b, hint, eol);
                hint_done = true;
            }
        }
        p = next;
    }
    if (!cid_done)
        add_cid(&b, parent_cid, eol);
    if (!hint_done)
        add_hint(&b, hint, eol);
    size_t n = b.len;
    char *s = sb_take(&b);
    if (!s)
        return -ENOMEM;
    *out = s;
    *out_len = n;
    return 0;
}
