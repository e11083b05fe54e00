/* VHDX: a differencing disk's parent.  Its parent locator names it by
 * relative_path (from the child's folder), absolute_win32_path and
 * volume_path (paths on the machine that made the disk: their last
 * component is looked for beside the child), tried in that order, always
 * through bd_open_ref (confined to the image's folder unless
 * --allow-external).  The parent must be a VHDX whose DataWriteGuid is the
 * locator's parent_linkage (or parent_linkage2): a parent written since
 * the child was made no longer holds what the child builds on.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "formats/vhdx/vhdx_int.h"
#include "util/diag.h"

static struct diag *D(struct vhdx *v)
{
    return v->bd.diag;
}

/* A locator path as a host path: '\\' -> '/', leading ".\" dropped; with
 * `last`, only its last component. */
static char *host_path(const char *s, bool last)
{
    char *p = strdup(s);

    if (!p)
        return NULL;
    for (char *c = p; *c; c++)
        if (*c == '\\')
            *c = '/';
    if (last) {
        char *sl = strrchr(p, '/');
        if (sl)
            memmove(p, sl + 1, strlen(sl + 1) + 1);
    } else {
        while (p[0] == '.' && p[1] == '/')
            memmove(p, p + 2, strlen(p + 2) + 1);
    }
    return p;
}

static int linkage_ok(struct vhdx *v, const struct vhdx *p, char *want)
{
    char got[37];
    uint8_t g[16];

    vhdx_guid_text(p->hdr.data_write_guid, got);
    for (int k = VHDX_PLOC_PARENT_LINKAGE; k <= VHDX_PLOC_PARENT_LINKAGE2; k++) {
        const char *s = v->ploc.value[k];
        if (s && vhdx_guid_parse(s, g) == 0 && memcmp(g, p->hdr.data_write_guid, 16) == 0)
            return 1;
    }
    strcpy(want, got);
    return 0;
}

int vhdx_open_parent(struct vhdx *v)
{
    struct bd *bd = &v->bd;
    static const struct { int key; bool last; } order[] = {
        { VHDX_PLOC_RELATIVE_PATH, false },
        { VHDX_PLOC_ABSOLUTE_WIN32_PATH, true },
        { VHDX_PLOC_VOLUME_PATH, true },
    };
    char *names[3] = { NULL, NULL, NULL };
    int n = 0, r;
    uint8_t g[16];

    if (vhdx_guid_parse(v->ploc.value[VHDX_PLOC_PARENT_LINKAGE], g) < 0)
        return diag_fail(D(v), -EINVAL, bd->filename, (int64_t)v->reg.meta.off,
                         "parent locator: parent_linkage '%s' is not a GUID",
                         v->ploc.value[VHDX_PLOC_PARENT_LINKAGE]);
    for (size_t k = 0; k < sizeof(order) / sizeof(order[0]); k++) {
        const char *s = v->ploc.value[order[k].key];
        if (!s)
            continue;
        char *p = host_path(s, order[k].last);
        if (!p) {
            r = diag_fail(D(v), -ENOMEM, bd->filename, -1, "out of memory");
            goto out;
        }
        bool dup = !*p;
        for (int j = 0; j < n; j++)
            dup |= strcmp(p, names[j]) == 0;
        if (dup)
            free(p);
        else
            names[n++] = p;
    }
    if (!n) {
        r = diag_fail(D(v), -EINVAL, bd->filename, (int64_t)v->reg.meta.off,
                      "differencing disk's parent locator names no path");
        goto out;
    }
    if (!(bd->backing_name = strdup(names[0])) || !(bd->backing_fmt = strdup("vhdx"))) {
        r = diag_fail(D(v), -ENOMEM, bd->filename, -1, "out of memory");
        goto out;
    }
    if (bd->opts.no_backing) {
        bd->backing_missing = true;
        r = 0;
        goto out;
    }
    for (int i = 0; i < n; i++) {
        r = bd_open_ref(bd, names[i], "vhdx", &bd->backing);
        if (r == 0) {
            free(bd->backing_name);
            if (!(bd->backing_name = strdup(names[i]))) {
                r = diag_fail(D(v), -ENOMEM, bd->filename, -1, "out of memory");
                goto out;
            }
            break;
        }
        if (r != -ENOENT)
            goto out;           /* outside the folder, not a VHDX, ...: say so */
        diag_clear(D(v));
    }
    if (!bd->backing) {
        r = diag_fail(D(v), -ENOENT, bd->filename, -1, "differencing disk: its parent "
                      "'%s' is missing (looked for %s%s%s%s%s beside the image)", names[0],
                      names[0], n > 1 ? ", " : "", n > 1 ? names[1] : "", n > 2 ? ", " : "",
                      n > 2 ? names[2] : "");
        goto out;
    }
    char got[37];
    if (!linkage_ok(v, (const struct vhdx *)bd->backing, got) && !bd->opts.ignore_parent_cid) {
        r = diag_fail(D(v), -EINVAL, bd->filename, (int64_t)v->reg.meta.off,
                      "parent '%s' has data write GUID {%s}, the differencing disk expects "
                      "%s (the parent was written after the child was made)",
                      bd->backing_name, got, v->ploc.value[VHDX_PLOC_PARENT_LINKAGE]);
        goto out;
    }
    r = 0;
out:
    for (int i = 0; i < n; i++)
        free(names[i]);
    return r;
}
