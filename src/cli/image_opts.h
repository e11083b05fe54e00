/* --image-opts: an image named by a qemu option string instead of a file
 * name ("driver=qcow2,file.filename=disk.qcow2"), for the forms that name
 * a local file: driver (a format, or "file": the file read as raw, named by
 * filename=), file.driver (only "file"), file.filename, force-share and
 * read-only (accepted), and for qcow2 encrypt.key-secret (accepted: an
 * encrypted image is refused when it is opened).  ",," is a comma in a
 * value; a key given twice takes its last value, as in qemu. */
#ifndef DISKIMG_CLI_IMAGE_OPTS_H
#define DISKIMG_CLI_IMAGE_OPTS_H

#include <stdbool.h>

/* The file name (malloc'd, in *path) and format (*format: static or the
 * driver's name, NULL to probe) `spec` names.  Returns 0, or 1 with
 * qemu-img's message printed ("Could not open 'SPEC': why"). */
int cli_image_opts(const char *spec, char **path, const char **format);

/* An image argument of a command: a file name, or with --image-opts an
 * option string. */
struct cli_image {
    const char *path;       /* the file to open */
    const char *format;     /* -f, or the string's driver; NULL: probe */
    char *owned;            /* path's storage when made from a string */
};

/* Fill `im` for the argument `arg`: with `image_opts`, the file and format
 * the string names (a `format` given too is refused, as qemu-img refuses
 * --image-opts with -f); else `arg` and `format` as they are.  0, or 1
 * with qemu-img's message printed (im then needs no cli_image_free). */
int cli_image_arg(struct cli_image *im, const char *arg, bool image_opts, const char *format);
void cli_image_free(struct cli_image *im);

#endif
