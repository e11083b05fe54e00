/* The files of the image a new output replaces (outfile.h): when the old
 * target is a VMDK descriptor, the extent files it names that are in its
 * folder and carry the names writers give a target's extents (what
 * diskimg and qemu-img make of NAME.EXT: NAME-flat.EXT, NAME-f001.EXT,
 * NAME-s001.EXT, ...).  Only the target is read; a name with a slash, or
 * one that is not a regular file, is not the old image's to remove. */
#define _GNU_SOURCE
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "formats/vmdk/format.h"
#include "outfile_priv.h"

#define HEAD_MAX (1u << 20)     /* the reader's descriptor limit */

static const char *base_of(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

/* Is `name` one of the names a writer gives an extent of `target`
 * ("dir/stem.ext" -> stem-flat.ext, stem-fNNN.ext, stem-sNNN.ext)? */
static bool writer_name(const char *name, const char *target)
{
    const char *base = base_of(target), *dot = strrchr(base, '.');
    size_t stem = dot ? (size_t)(dot - base) : strlen(base);
    const char *ext = dot ? dot : "";
    size_t nlen = strlen(name), elen = strlen(ext);

    if (nlen < stem + elen + 2 || strncmp(name, base, stem) != 0 || name[stem] != '-' ||
        strcmp(name + nlen - elen, ext) != 0)
        return false;
    const char *mid = name + stem + 1;
    size_t mlen = nlen - elen - stem - 1;
    if (mlen == 4 && strncmp(mid, "flat", 4) == 0)
        return true;
    if (mlen < 4 || (mid[0] != 'f' && mid[0] != 's'))
        return false;
    for (size_t i = 1; i < mlen; i++)
        if (!isdigit((unsigned char)mid[i]))
            return false;
    return true;
}

/* The target's text, if it is a descriptor file (NULL otherwise). */
static char *read_descriptor(const char *final, size_t *len)
{
    int fd = open(final, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    struct stat st;
    char *buf = NULL;

    if (fd < 0)
        return NULL;
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0 &&
        st.st_size <= HEAD_MAX && (buf = malloc((size_t)st.st_size + 1))) {
        ssize_t n = pread(fd, buf, (size_t)st.st_size, 0);
        if (n > 0 && vmdk_desc_probe((const uint8_t *)buf, (size_t)n)) {
            *len = (size_t)n;
        } else {
            free(buf);
            buf = NULL;
        }
    }
    close(fd);
    return buf;
}

int outfile_old_extents(const char *final, const char *given, char ***out, size_t *n)
{
    struct vmdk_desc desc;
    size_t len = 0;
    char *text = read_descriptor(final, &len), *dir = NULL;
    char **list = NULL;
    size_t cnt = 0;
    int r = 0;

    *out = NULL;
    *n = 0;
    if (!text)
        return 0;
    memset(&desc, 0, sizeof(desc));
    /* an old target that does not parse names nothing to remove */
    if (vmdk_desc_parse(text, len, &desc, NULL, final, 0) < 0 || !(dir = outfile_dirname(final)))
        goto out;
    for (size_t i = 0; i < desc.n_ext; i++) {
        const char *name = desc.ext[i].filename;
        struct stat st;
        char *path = NULL;
        bool dup = false;
        if (!name || strchr(name, '/') || (!writer_name(name, final) && !writer_name(name, given)))
            continue;
        if (strchr(final, '/') ? asprintf(&path, "%s/%s", dir, name) < 0
                               : !(path = strdup(name))) {
            r = -ENOMEM;
            goto out;
        }
        for (size_t j = 0; j < cnt && !dup; j++)
            dup = strcmp(list[j], path) == 0;
        if (dup || lstat(path, &st) < 0 || !S_ISREG(st.st_mode)) {
            free(path);
            continue;
        }
        char **nl = realloc(list, (cnt + 1) * sizeof(*nl));
        if (!nl) {
            free(path);
            r = -ENOMEM;
            goto out;
        }
        list = nl;
        list[cnt++] = path;
    }
out:
    vmdk_desc_free(&desc);
    free(text);
    free(dir);
    if (r < 0) {
        while (cnt)
            free(list[--cnt]);
        free(list);
        return r;
    }
    *out = list;
    *n = cnt;
    return 0;
}
