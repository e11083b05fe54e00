/* diskimg resize: change an image's virtual size in place (qemu-img
 * resize's arguments, messages and exit status). */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "commands.h"
#include "formats/bd.h"
#include "image_opts.h"
#include "io/bfile.h"
#include "object_opt.h"
#include "util/diag.h"
#include "util/size.h"

static const char help_text[] =
    "Usage: diskimg resize [--object OBJ] [--image-opts] [-f FMT] [--preallocation=off]\n"
    "                      [-q] [--shrink] IMG [+|-]SIZE\n"
    "Set the virtual size of IMG to SIZE, or grow (+) or shrink (-) it by SIZE\n"
    "(suffixes K, M, G, T, P, E).  raw: the file is truncated or extended.  qcow2:\n"
    "the tables are extended (new structures written and synced before the header\n"
    "switches to them), or the clusters past the new end are freed and the file\n"
    "cut.  vhdx: new BAT entries (the BAT moves to the end of the file when its\n"
    "region is full), then the size, then the headers, each step synced.\n"
    "Shrinking discards the data past the new end and needs --shrink.\n"
    "\n"
    "  -f, --format FMT    image format (default: probe)\n"
    "  --shrink            allow shrinking\n"
    "  --preallocation=off the only mode (the new space stays unallocated)\n"
    "  -q, --quiet         quiet: no 'Image resized.' line\n"
    "  --allow-external    follow a backing file outside the image's folder\n"
    "  --image-opts        IMG is an option string: driver=FMT,file.filename=PATH\n"
    "                      (or driver=file,filename=PATH for the file as raw)\n"
    "  --object OBJ        checked as qemu-img checks it, then unused (diskimg\n"
    "                      reads no encrypted images)\n"
    "\n"
    "Not supported for qcow2: images with persistent bitmaps or an external data\n"
    "file, v2 images with internal snapshots, dirty or corrupt images\n"
    "(repair them with 'diskimg check -r all'); a shrink, or a grow that needs a\n"
    "new L1 table, checks the image first and refuses one with corruptions.\n"
    "\n"
    "Exit status: 0 success, 1 error.\n";

enum { OPT_SHRINK = 256, OPT_PREALLOC, OPT_ALLOW_EXTERNAL, OPT_HELP };

static const struct option long_opts[] = {
    { "help", no_argument, NULL, OPT_HELP },
    { "shrink", no_argument, NULL, OPT_SHRINK },
    { "preallocation", required_argument, NULL, OPT_PREALLOC },
    { "allow-external", no_argument, NULL, OPT_ALLOW_EXTERNAL },
    { "format", required_argument, NULL, 'f' },
    { "quiet", no_argument, NULL, 'q' },
    { "force-share", no_argument, NULL, 'U' },
    { "object", required_argument, NULL, CLI_OPT_OBJECT },
    { "image-opts", no_argument, NULL, CLI_OPT_IMAGE_OPTS },
    { NULL, 0, NULL, 0 },
};

int cmd_resize(int argc, char **argv)
{
    struct bd_open_opts oo = { .writable = true };
    const char *prealloc = NULL;
    bool shrink = false, quiet = false, iopts = false;
    struct bd *bd = NULL;
    struct cli_image im;
    struct diag d;
    uint64_t n, total;
    int c, r, rc = 1;

    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h"))
            return cli_help(help_text);
    if (argc < 3)
        return cli_usage_error("resize", "expected an image and a size");
    /* the size goes first, so that "-1G" is not taken for an option */
    const char *size_arg = argv[--argc];
    optind = 1;
    while ((c = getopt_long(argc, argv, "f:qU", long_opts, NULL)) != -1) {
        switch (c) {
        case 'f': oo.format = optarg; break;
        case 'q': quiet = true; break;
        case 'U': break;
        case OPT_SHRINK: shrink = true; break;
        case OPT_PREALLOC: prealloc = optarg; break;
        case OPT_ALLOW_EXTERNAL: oo.allow_external = true; break;
        case CLI_OPT_OBJECT:
            if ((r = cli_object(optarg)) != 0)
                return r < 0 ? 0 : 1;
            break;
        case CLI_OPT_IMAGE_OPTS: iopts = true; break;
        default:
            return cli_usage_error("resize", "invalid option");
        }
    }
    if (optind != argc - 1)
        return cli_usage_error("resize", "expecting one image file name");
    const char *filename = argv[optind];

    int sign = size_arg[0] == '+' ? 1 : size_arg[0] == '-' ? -1 : 0;
    if (!cli_size("resize", "SIZE", size_arg + (sign != 0), &n))
        return 1;
    if (prealloc && strcmp(prealloc, "off") != 0) {
        if (strcmp(prealloc, "metadata") && strcmp(prealloc, "falloc") &&
            strcmp(prealloc, "full")) {
            cli_error("Invalid preallocation mode '%s'", prealloc);
            return 1;
        }
        if (sign < 0) {
            cli_error("Preallocation can only be used for growing images");
            return 1;
        }
        cli_error("--preallocation=%s is not supported (only off: the new space stays "
                  "unallocated)", prealloc);
        return 1;
    }

    if (cli_image_arg(&im, filename, iopts, oo.format))
        return 1;
    oo.format = im.format;
    diag_init(&d);
    r = bd_open(&bd, im.path, &oo, &d);
    cli_image_free(&im);
    if (r < 0) {
        cli_report(&d);
        return 1;
    }
    if (sign > 0)
        total = bd->size + n < bd->size ? 0 : bd->size + n;
    else if (sign < 0)
        total = n >= bd->size ? 0 : bd->size - n;
    else
        total = n;
    if (total == 0 || total > (uint64_t)INT64_MAX) {
        cli_error("New image size must be positive");
        goto out;
    }
    if (total < bd->size && !shrink) {
        cli_error("Use the --shrink option to perform a shrink operation.");
        cli_warn("Shrinking an image will delete all data beyond the shrunken image's "
                 "end. Before performing such an operation, make sure there is no "
                 "important data there.");
        goto out;
    }
    if (!bd->drv->resize) {
        cli_error("%s: this image format (%s) does not support resize", filename,
                  bd->drv->name);
        goto out;
    }
    /* durable like every change diskimg makes (raw: the new size) */
    if (bd->drv->resize(bd, total, shrink) < 0 || bfile_sync(bd->file) < 0) {
        cli_report(&d);
        goto out;
    }
    if (!quiet)
        printf("Image resized.\n");
    rc = 0;
out:
    bd_close(bd);
    return rc;
}
