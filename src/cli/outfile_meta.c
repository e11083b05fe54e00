/* A new output file takes over the permissions of the file it replaces
 * (outfile.h): owner and group where allowed, mode, ACL and extended
 * attributes, so that overwriting a private image never makes it readable
 * to more people. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "outfile_priv.h"
#include "util/diag.h"
#include "util/endian.h"

#define ACL_XATTR "system.posix_acl_access"

/* The ACL's binary form (Linux posix_acl_xattr): a 4-byte version, then
 * 8-byte entries {tag, perm, id}, little-endian. */
#define ACL_VERSION   2
#define ACL_GROUP_OBJ 0x04
#define ACL_MASK      0x10

/* The permissions the owning group has under `acl`: its entry, limited by
 * the mask; -1 when the value does not parse. */
static int acl_group_perms(const uint8_t *acl, size_t len)
{
    int group = -1, mask = 7;

    if (len < 4 || (len - 4) % 8 || le32_get(acl) != ACL_VERSION)
        return -1;
    for (size_t off = 4; off < len; off += 8) {
        unsigned tag = le16_get(acl + off), perm = le16_get(acl + off + 2) & 7;
        if (tag == ACL_GROUP_OBJ)
            group = (int)perm;
        else if (tag == ACL_MASK)
            mask = (int)perm;
    }
    return group < 0 ? -1 : group & mask;
}

/* The owning group's entry cleared (the new file's group is another one). */
static void acl_clear_group(uint8_t *acl, size_t len)
{
    for (size_t off = 4; off + 8 <= len; off += 8)
        if (le16_get(acl + off) == ACL_GROUP_OBJ) {
            acl[off + 2] = 0;
            acl[off + 3] = 0;
        }
}

/* The ACL could not be set: mode bits alone, the group's no wider than the
 * ACL gave it (the mode's group bits are the ACL's mask, which may be
 * more than the owning group had). */
static int narrow_mode(int fd, mode_t mode, const uint8_t *acl, size_t len,
                       const char *shown, struct diag *d)
{
    int g = acl_group_perms(acl, len);
    mode_t m = (mode & ~(mode_t)070) | (mode_t)(g < 0 ? 0 : g) << 3;

    if (fchmod(fd, m) < 0)
        return diag_errno(d, -errno, shown, -1, "cannot set the permissions");
    return 0;
}

/* One attribute's value (malloc'd) or NULL with errno set. */
static void *get_attr(const char *from, const char *name, size_t *len)
{
    for (int tries = 0; tries < 4; tries++) {
        ssize_t n = lgetxattr(from, name, NULL, 0);
        if (n < 0)
            return NULL;
        void *v = malloc(n ? (size_t)n : 1);
        if (!v) {
            errno = ENOMEM;
            return NULL;
        }
        ssize_t m = lgetxattr(from, name, v, (size_t)n);
        if (m >= 0) {
            *len = (size_t)m;
            return v;
        }
        free(v);
        if (errno != ERANGE)    /* it grew in between: again */
            return NULL;
    }
    errno = ERANGE;
    return NULL;
}

/* The names of `from`'s extended attributes (NUL-separated), or NULL with
 * errno set; *len 0 when it has none. */
static char *list_attrs(const char *from, size_t *len)
{
    for (int tries = 0; tries < 4; tries++) {
        ssize_t n = llistxattr(from, NULL, 0);
        if (n <= 0) {
            *len = 0;
            return n < 0 ? NULL : calloc(1, 1);
        }
        char *v = malloc((size_t)n);
        if (!v) {
            errno = ENOMEM;
            return NULL;
        }
        ssize_t m = llistxattr(from, v, (size_t)n);
        if (m >= 0) {
            *len = (size_t)m;
            return v;
        }
        free(v);
        if (errno != ERANGE)
            return NULL;
    }
    errno = ERANGE;
    return NULL;
}

/* Does the new file already have this value (no need to set it)? */
static bool has_value(int fd, const char *name, const void *v, size_t len)
{
    char cur[256];
    ssize_t n = len <= sizeof(cur) ? fgetxattr(fd, name, cur, sizeof(cur)) : -1;

    return n == (ssize_t)len && memcmp(cur, v, len) == 0;
}

static bool unsupported(int e)
{
    return e == ENOTSUP || e == EOPNOTSUPP || e == ENOSYS;
}

static int copy_attrs(int fd, const char *from, mode_t mode, bool group_kept,
                      const char *shown, struct diag *d)
{
    size_t names_len = 0;
    char *names = list_attrs(from, &names_len);
    int r = 0;

    if (!names) {
        if (unsupported(errno))
            return 0;       /* no attributes, hence no ACL, to carry over */
        /* without the list there may be an ACL we would lose: fail */
        return diag_errno(d, -errno, shown, -1,
                          "cannot read the extended attributes of the file it replaces");
    }
    for (size_t off = 0; off < names_len && r == 0; off += strlen(names + off) + 1) {
        const char *name = names + off;
        bool acl = strcmp(name, ACL_XATTR) == 0;
        size_t len = 0;
        uint8_t *v = get_attr(from, name, &len);
        if (!v) {
            if (errno == ENODATA)
                continue;
            if (acl) {
                r = diag_errno(d, -errno, shown, -1,
                               "cannot read the ACL of the file it replaces");
                break;
            }
            diag_warn(d, shown, -1, "extended attribute %s not carried over: %s", name,
                      strerror(errno));
            continue;
        }
        if (acl && !group_kept)
            acl_clear_group(v, len);
        if (!acl && has_value(fd, name, v, len)) {
            free(v);        /* already so (a security label given on creation) */
            continue;
        }
        if (fsetxattr(fd, name, v, len, 0) < 0) {
            int e = errno;
            if (acl) {
                /* no one may gain access: narrower mode bits instead */
                r = narrow_mode(fd, mode, v, len, shown, d);
                if (r == 0)
                    diag_warn(d, shown, -1, "the ACL could not be carried over (%s): the "
                              "group permissions are narrowed and named users and groups "
                              "lose access", strerror(e));
            } else {
                diag_warn(d, shown, -1, "extended attribute %s not carried over: %s", name,
                          strerror(e));
            }
        }
        free(v);
    }
    free(names);
    return r;
}

int outfile_copy_meta(int fd, const char *from, const struct stat *st,
                      const char *shown, struct diag *d)
{
    struct stat now;
    mode_t mode = st->st_mode & 07777;

    /* root keeps both; the owner keeps a group it belongs to (EPERM
     * otherwise); anyone else gets a file of their own */
    if (geteuid() == 0)
        (void)!fchown(fd, st->st_uid, st->st_gid);
    else if (geteuid() == st->st_uid)
        (void)!fchown(fd, (uid_t)-1, st->st_gid);
    if (fstat(fd, &now) < 0)
        return diag_errno(d, -errno, shown, -1, "cannot stat");
    bool group_kept = now.st_gid == st->st_gid;
    if (now.st_uid != st->st_uid)
        mode &= ~(mode_t)S_ISUID;
    if (!group_kept)
        mode &= ~(mode_t)(S_ISGID | 070);
    /* after the chown, which clears the set-ID bits */
    if (fchmod(fd, mode) < 0)
        return diag_errno(d, -errno, shown, -1, "cannot set the permissions");
    return copy_attrs(fd, from, mode, group_kept, shown, d);
}
