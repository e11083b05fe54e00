/* --image-opts option strings (image_opts.h). */
#include "image_opts.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "formats/bd.h"
#include "util/kvopts.h"

/* Whether the first element of `spec` is a bare word (qemu takes it as
 * file=WORD, a node name, which a command line tool never has). */
static bool first_is_bare(const char *spec, char *word, size_t len)
{
    size_t n = 0;

    for (const char *p = spec; *p; p++) {
        if (*p == ',' && p[1] == ',') {
            p++;
        } else if (*p == ',') {
            break;
        } else if (*p == '=') {
            return false;
        }
        if (n + 1 < len)
            word[n++] = *p;
    }
    word[n] = 0;
    return n > 0;
}

__attribute__((format(printf, 2, 3)))
static int fail(const char *spec, const char *why, ...)
{
    char msg[512];
    va_list ap;

    va_start(ap, why);
    vsnprintf(msg, sizeof(msg), why, ap);
    va_end(ap);
    cli_error("Could not open '%s': %s", spec, msg);
    return 1;
}

int cli_image_opts(const char *spec, char **path, const char **format)
{
    static const char *const known[] = { "driver", "file.driver", "file.filename", "filename",
                                         "force-share", "read-only" };
    struct kvopts o = { 0 };
    char err[256], word[256];
    int rc = 1;

    *path = NULL;
    *format = NULL;
    if (first_is_bare(spec, word, sizeof(word)))
        return fail(spec, "Cannot find device='%s' nor node-name='%s'", word, word);
    if (!*spec)
        return fail(spec, "%s", "Must specify either driver or file");
    if (kvopts_parse(&o, spec, err, sizeof(err)) < 0) {
        fail(spec, "%s", err);
        goto out;
    }
    const char *node = kvopts_get(&o, "file");
    if (node) {
        fail(spec, "Cannot find device='%s' nor node-name='%s'", node, node);
        goto out;
    }
    const char *drv = kvopts_get(&o, "driver");
    const char *fdrv = kvopts_get(&o, "file.driver");
    const char *ffile = kvopts_get(&o, "file.filename");
    const char *file = kvopts_get(&o, "filename");
    for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++)
        kvopts_get(&o, known[i]);
    /* the secret of an encrypted qcow2 image (with --object): qemu ignores
     * it for an image that is not encrypted; one that is is refused when
     * it is opened */
    if (drv && !strcmp(drv, "qcow2"))
        kvopts_get(&o, "encrypt.key-secret");
    const char *extra = kvopts_unused(&o);
    if (extra) {
        fail(spec, "Block format '%s' does not support the option '%s'",
             drv ? drv : "file", extra);
        goto out;
    }
    if (drv && strcmp(drv, "file") == 0) {
        /* the protocol driver alone: the file's bytes, as raw */
        if (!file) {
            fail(spec, "%s", "The 'file' block driver requires a file name");
            goto out;
        }
        *format = "raw";
    } else {
        const struct bd_driver *d = NULL;
        if (drv && !(d = bd_find_driver(drv))) {
            fail(spec, "Unknown driver '%s'", drv);
            goto out;
        }
        if (file) {
            fail(spec, "Block format '%s' does not support the option 'filename'",
                 drv ? drv : "file");
            goto out;
        }
        if (fdrv && strcmp(fdrv, "file") != 0) {
            fail(spec, "Unknown protocol driver '%s'", fdrv);
            goto out;
        }
        if (!ffile) {
            fail(spec, "%s", drv ? "A block device must be specified for \"file\""
                                 : "Must specify either driver or file");
            goto out;
        }
        file = ffile;
        *format = d ? d->name : NULL;
    }
    if (!(*path = strdup(file))) {
        cli_error("out of memory");
        goto out;
    }
    rc = 0;
out:
    kvopts_free(&o);
    return rc;
}

int cli_image_arg(struct cli_image *im, const char *arg, bool image_opts, const char *format)
{
    im->owned = NULL;
    im->path = arg;
    im->format = format;
    if (!image_opts)
        return 0;
    if (format) {
        cli_error("--image-opts and --format are mutually exclusive");
        return 1;
    }
    if (cli_image_opts(arg, &im->owned, &im->format))
        return 1;
    im->path = im->owned;
    return 0;
}

void cli_image_free(struct cli_image *im)
{
    free(im->owned);
    im->owned = NULL;
}
