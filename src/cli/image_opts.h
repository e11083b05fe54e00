/* --image-opts: an image named by a qemu option string instead of a file
 * name ("driver=qcow2,file.filename=disk.qcow2"), for the forms that name
 * a local file: driver (a format, or "file": the file read as raw, named by
 * filename=), file.driver (only "file"), file.filename, force-share and
 * read-only (accepted).  ",," is a comma in a value; a key given twice
 * takes its last value, as in qemu. */
#ifndef DISKIMG_CLI_IMAGE_OPTS_H
#define DISKIMG_CLI_IMAGE_OPTS_H

/* The file name (malloc'd, in *path) and format (*format: static or the
 * driver's name, NULL to probe) `spec` names.  Returns 0, or 1 with
 * qemu-img's message printed ("Could not open 'SPEC': why"). */
int cli_image_opts(const char *spec, char **path, const char **format);

#endif
