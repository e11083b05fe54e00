/* refswap.so: an LD_PRELOAD library for tests/reference-symlink-swap.sh.
 *
 * It makes the race of a symlink swapped in while a reference is being
 * resolved happen every time, at a chosen step: right before the first
 * open(), openat() or openat2() whose path ends in the component
 * $REFSWAP_NAME, it renames $REFSWAP_TO over $REFSWAP_FROM (a directory in
 * the way is first moved aside to $REFSWAP_FROM.moved).  So a checker that
 * looks at a name and then opens it again finds the swapped entry at the
 * open.  $REFSWAP_NO_OPENAT2=1 makes openat2 fail with ENOSYS, as on old
 * kernels or under a seccomp filter, to test the fallback.
 *
 * Built by the test itself (cc -shared -fPIC); not part of diskimg.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

static int swapped;

static void maybe_swap(const char *path)
{
    const char *name = getenv("REFSWAP_NAME");
    const char *from = getenv("REFSWAP_FROM"), *to = getenv("REFSWAP_TO");
    struct stat st;

    if (swapped || !name || !from || !to || !path)
        return;
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    if (strcmp(base, name) != 0)
        return;
    swapped = 1;
    if (lstat(from, &st) == 0 && S_ISDIR(st.st_mode)) {
        char aside[4096];
        snprintf(aside, sizeof(aside), "%s.moved", from);
        if (rename(from, aside) != 0)
            perror("refswap: move aside");
    }
    if (rename(to, from) != 0)
        perror("refswap: rename");
}

static int mode_arg(int flags, va_list ap)
{
    return (flags & O_CREAT) || (flags & __O_TMPFILE) == __O_TMPFILE ? va_arg(ap, int) : 0;
}

int open(const char *path, int flags, ...)
{
    static int (*real)(const char *, int, ...);
    va_list ap;
    va_start(ap, flags);
    int mode = mode_arg(flags, ap);
    va_end(ap);
    if (!real)
        real = (int (*)(const char *, int, ...))dlsym(RTLD_NEXT, "open");
    maybe_swap(path);
    return real(path, flags, mode);
}

int open64(const char *path, int flags, ...)
{
    static int (*real)(const char *, int, ...);
    va_list ap;
    va_start(ap, flags);
    int mode = mode_arg(flags, ap);
    va_end(ap);
    if (!real)
        real = (int (*)(const char *, int, ...))dlsym(RTLD_NEXT, "open64");
    maybe_swap(path);
    return real(path, flags, mode);
}

int openat(int dirfd, const char *path, int flags, ...)
{
    static int (*real)(int, const char *, int, ...);
    va_list ap;
    va_start(ap, flags);
    int mode = mode_arg(flags, ap);
    va_end(ap);
    if (!real)
        real = (int (*)(int, const char *, int, ...))dlsym(RTLD_NEXT, "openat");
    maybe_swap(path);
    return real(dirfd, path, flags, mode);
}

int openat64(int dirfd, const char *path, int flags, ...)
{
    static int (*real)(int, const char *, int, ...);
    va_list ap;
    va_start(ap, flags);
    int mode = mode_arg(flags, ap);
    va_end(ap);
    if (!real)
        real = (int (*)(int, const char *, int, ...))dlsym(RTLD_NEXT, "openat64");
    maybe_swap(path);
    return real(dirfd, path, flags, mode);
}

/* A fortified build (_FORTIFY_SOURCE) calls these for opens whose flags
 * are not known at compile time. */
int __open64_2(const char *path, int flags);
int __open64_2(const char *path, int flags)
{
    static int (*real)(const char *, int);
    if (!real)
        real = (int (*)(const char *, int))dlsym(RTLD_NEXT, "__open64_2");
    maybe_swap(path);
    return real(path, flags);
}

int __openat64_2(int dirfd, const char *path, int flags);
int __openat64_2(int dirfd, const char *path, int flags)
{
    static int (*real)(int, const char *, int);
    if (!real)
        real = (int (*)(int, const char *, int))dlsym(RTLD_NEXT, "__openat64_2");
    maybe_swap(path);
    return real(dirfd, path, flags);
}

long syscall(long n, ...)
{
    static long (*real)(long, ...);
    va_list ap;
    long a[6];

    va_start(ap, n);
    for (int i = 0; i < 6; i++)
        a[i] = va_arg(ap, long);
    va_end(ap);
    if (!real)
        real = (long (*)(long, ...))dlsym(RTLD_NEXT, "syscall");
#ifdef SYS_openat2
    if (n == SYS_openat2) {
        const char *no = getenv("REFSWAP_NO_OPENAT2");
        if (no && strcmp(no, "1") == 0) {
            errno = ENOSYS;
            return -1;
        }
        maybe_swap((const char *)a[1]);
    }
#endif
    return real(n, a[0], a[1], a[2], a[3], a[4], a[5]);
}
