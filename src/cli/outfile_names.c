/* Temporary names beside an output file (outfile_priv.h). */
#define _GNU_SOURCE
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "outfile_priv.h"

/* ".diskimg-old-XXXXXX" is the longest suffix; every temporary name of a
 * target is cut at the same length, so that its new and old files sort
 * together */
#define SUFFIX_MAX (sizeof(".diskimg-old-XXXXXX") - 1)
#define BASE_MAX (NAME_MAX - 1 - SUFFIX_MAX)

char *outfile_dirname(const char *path)
{
    const char *slash = strrchr(path, '/');

    if (!slash)
        return strdup(".");
    if (slash == path)
        return strdup("/");
    return strndup(path, (size_t)(slash - path));
}

static const char *base_of(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

bool outfile_name_fits(const char *path)
{
    return strlen(base_of(path)) <= NAME_MAX;
}

static uint32_t fnv1a(const char *s)
{
    uint32_t h = 2166136261u;

    for (; *s; s++)
        h = (h ^ (uint8_t)*s) * 16777619u;
    return h;
}

char *outfile_name_template(const char *target, const char *tag)
{
    const char *base = base_of(target);
    size_t dlen = (size_t)(base - target), blen = strlen(base);
    char *s = NULL;
    int n;

    if (blen <= BASE_MAX) {
        n = asprintf(&s, "%.*s.%s.diskimg-%sXXXXXX", (int)dlen, target, base, tag);
    } else {
        /* the start of the name, whole UTF-8 characters only, and a hash
         * of all of it: still tells which target the file belongs to */
        size_t keep = BASE_MAX - 9;
        while (keep > 0 && ((uint8_t)base[keep] & 0xc0) == 0x80)
            keep--;
        n = asprintf(&s, "%.*s.%.*s~%08x.diskimg-%sXXXXXX", (int)dlen, target, (int)keep,
                     base, fnv1a(base), tag);
    }
    return n < 0 ? NULL : s;
}

void outfile_name_randomize(char *tmpl)
{
    static const char chars[] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    static uint64_t counter;
    size_t len = strlen(tmpl);
    uint8_t rnd[6];

    if (len < 6)
        return;
    if (getrandom(rnd, sizeof(rnd), GRND_NONBLOCK) != (ssize_t)sizeof(rnd)) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        uint64_t x = (uint64_t)ts.tv_nsec ^ (uint64_t)ts.tv_sec << 30 ^
                     (uint64_t)getpid() << 40 ^ ++counter * 0x9e3779b97f4a7c15u;
        for (size_t i = 0; i < sizeof(rnd); i++, x >>= 8)
            rnd[i] = (uint8_t)x;
    }
    for (size_t i = 0; i < 6; i++)
        tmpl[len - 6 + i] = chars[rnd[i] % (sizeof(chars) - 1)];
}
