#define _GNU_SOURCE
#include "io/beneath.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifdef SYS_openat2
#include <linux/openat2.h>
#endif

#define BENEATH_MAX_LINKS 40   /* as the kernel's own limit */
#define BENEATH_MAX_DEPTH 256  /* folders held open at once during a walk */

/* The fallback, when openat2 is not there.  Two ways were possible: open by
 * name and then compare what was opened (fstat) with the path that was
 * checked, or walk the path ourselves.  The comparison is not enough: the
 * checked path is itself a name, which a second swap can point at the
 * opened file again before it is stat()ed.  So the walk: every component is
 * opened with O_NOFOLLOW relative to the descriptor of the folder before it,
 * so no name is ever resolved twice; a symbolic link (O_NOFOLLOW refuses it)
 * is read with readlinkat and its target walked the same way, relative to
 * the folder the link is in; ".." pops back to the descriptor of the folder
 * we came from (never above the starting one), so a folder moved elsewhere
 * while we hold it cannot lead us to its new parent. */
int open_beneath_walk(int dirfd, const char *rel, int flags)
{
    int stack[BENEATH_MAX_DEPTH];
    int depth = 0, links = 0, r;
    char buf[PATH_MAX], tmp[PATH_MAX];
    size_t len = strlen(rel);

    if (rel[0] == '/')
        return -EXDEV;
    if (len >= sizeof(buf))
        return -ENAMETOOLONG;
    memcpy(buf, rel, len + 1);
    stack[0] = dirfd;
    char *p = buf;
    for (;;) {
        while (*p == '/')
            p++;
        if (!*p) {          /* the path names the folder we are in */
            r = openat(stack[depth], ".", flags | O_CLOEXEC);
            r = r < 0 ? -errno : r;
            break;
        }
        char *end = p;
        while (*end && *end != '/')
            end++;
        size_t n = (size_t)(end - p);
        char *rest = end;
        while (*rest == '/')
            rest++;
        bool last = !*rest;
        char name[NAME_MAX + 1];
        if (n > NAME_MAX) {
            r = -ENAMETOOLONG;
            break;
        }
        memcpy(name, p, n);
        name[n] = '\0';
        p = rest;
        if (strcmp(name, ".") == 0)
            continue;
        if (strcmp(name, "..") == 0) {
            if (depth == 0) {
                r = -EXDEV;
                break;
            }
            close(stack[depth--]);
            continue;
        }
        int fd = last ? openat(stack[depth], name, flags | O_NOFOLLOW | O_CLOEXEC)
                      : openat(stack[depth], name,
                               O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd >= 0) {
            if (last) {
                r = fd;
                break;
            }
            if (depth + 1 >= BENEATH_MAX_DEPTH) {
                close(fd);
                r = -ELOOP;
                break;
            }
            stack[++depth] = fd;
            continue;
        }
        /* ELOOP (a link as the last component) or ENOTDIR (a link where a
         * folder is needed, or a file there): a link is walked */
        int e = errno;
        if (e != ELOOP && e != ENOTDIR) {
            r = -e;
            break;
        }
        ssize_t tl = readlinkat(stack[depth], name, tmp, sizeof(tmp));
        if (tl < 0) {
            r = errno == EINVAL ? -e : -errno;  /* EINVAL: not a link */
            break;
        }
        if ((size_t)tl >= sizeof(tmp)) {
            r = -ENAMETOOLONG;
            break;
        }
        if (++links > BENEATH_MAX_LINKS) {
            r = -ELOOP;
            break;
        }
        if (tl == 0) {
            r = -ENOENT;
            break;
        }
        if (tmp[0] == '/') {
            r = -EXDEV;
            break;
        }
        /* the target, then what was left after the link */
        size_t restlen = strlen(rest);
        if ((size_t)tl + 1 + restlen >= sizeof(tmp)) {
            r = -ENAMETOOLONG;
            break;
        }
        tmp[tl] = '/';
        memcpy(tmp + tl + 1, rest, restlen + 1);
        memcpy(buf, tmp, (size_t)tl + 1 + restlen + 1);
        p = buf;
    }
    while (depth > 0)
        close(stack[depth--]);
    return r;
}

int open_beneath(int dirfd, const char *rel, int flags)
{
    if (strlen(rel) >= PATH_MAX)
        return -ENAMETOOLONG;
#ifdef SYS_openat2
    struct open_how how = {
        .flags = (uint64_t)(unsigned)(flags | O_CLOEXEC),
        .resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS,
    };
    for (int tries = 0; tries < 16; tries++) {
        long fd = syscall(SYS_openat2, dirfd, rel, &how, sizeof(how));
        if (fd >= 0)
            return (int)fd;
        /* EAGAIN: a rename raced a ".." and the kernel could not be sure
         * it stayed beneath; it asks to try again */
        if (errno == EAGAIN)
            continue;
        if (errno == ENOSYS || errno == EPERM)
            return open_beneath_walk(dirfd, rel, flags);
        return -errno;
    }
    return -EAGAIN;
#else
    return open_beneath_walk(dirfd, rel, flags);
#endif
}
