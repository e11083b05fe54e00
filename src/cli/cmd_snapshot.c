/* diskimg snapshot: list, create, apply and delete internal snapshots
 * (qemu-img snapshot's options, output, messages and exit status). */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "commands.h"
#include "formats/bd.h"
#include "image_opts.h"
#include "object_opt.h"
#include "util/diag.h"
#include "util/jval.h"

static const char help_text[] =
    "Usage: diskimg snapshot [--object OBJ] [--image-opts] [-U] [-q] [-f FMT]\n"
    "                        [-l | -a SNAPSHOT | -c SNAPSHOT | -d SNAPSHOT] IMG\n"
    "List, create, apply or delete the internal snapshots of a qcow2 image, in\n"
    "place.  Without an action, -l.\n"
    "\n"
    "  -l, --list          list the snapshots (as qemu-img snapshot -l)\n"
    "  -c, --create NAME   create a snapshot NAME of the current content\n"
    "  -a, --apply SNAPSHOT  apply SNAPSHOT (ID or name): the image's content\n"
    "                      becomes the snapshot's (the current content is lost)\n"
    "  -d, --delete NAME   delete the (first) snapshot named NAME\n"
    "  -f, --format FMT    image format (default: probe)\n"
    "  -q, --quiet         quiet\n"
    "  -U, --force-share   accepted for compatibility (-l only)\n"
    "  --allow-external    follow a backing file outside the image's folder\n"
    "  --image-opts        IMG is an option string: driver=FMT,file.filename=PATH\n"
    "  --object OBJ        checked as qemu-img checks it, then unused (diskimg\n"
    "                      reads no encrypted images)\n"
    "\n"
    "Changes are crash-safe: the new tables and refcounts are written and synced\n"
    "past the end of the file before one header write switches to them.  The\n"
    "image is checked first; dirty or corrupt images, and images with an external\n"
    "data file, are refused.\n"
    "\n"
    "Exit status: 0 success, 1 error.\n";

enum { OPT_ALLOW_EXTERNAL = 256, OPT_HELP };

static const struct option long_opts[] = {
    { "help", no_argument, NULL, OPT_HELP },
    { "allow-external", no_argument, NULL, OPT_ALLOW_EXTERNAL },
    /* qemu-img 10's long names of the short options */
    { "list", no_argument, NULL, 'l' },
    { "apply", required_argument, NULL, 'a' },
    { "create", required_argument, NULL, 'c' },
    { "delete", required_argument, NULL, 'd' },
    { "format", required_argument, NULL, 'f' },
    { "quiet", no_argument, NULL, 'q' },
    { "force-share", no_argument, NULL, 'U' },
    { "object", required_argument, NULL, CLI_OPT_OBJECT },
    { "image-opts", no_argument, NULL, CLI_OPT_IMAGE_OPTS },
    { NULL, 0, NULL, 0 },
};

static int list(const char *filename, struct bd_open_opts *oo)
{
    struct bd *bd = NULL;
    struct diag d;
    int rc = 1;

    diag_init(&d);
    oo->no_backing = true;
    if (bd_open(&bd, filename, oo, &d) < 0) {
        cli_report(&d);
        return 1;
    }
    struct jval *o = jv_object();
    if (!o) {
        cli_error("out of memory");
        goto out;
    }
    if (bd->drv->info && bd->drv->info(bd, o) < 0) {
        cli_report(&d);
        goto out;
    }
    const struct jval *s = jv_get(o, "snapshots");
    if (s && s->n)
        cli_print_snapshots(s);
    rc = 0;
out:
    jv_free(o);
    bd_close(bd);
    return rc;
}

int cmd_snapshot(int argc, char **argv)
{
    struct bd_open_opts oo = { 0 };
    const char *name = NULL;
    bool iopts = false;
    int action = 0, c, r;
    struct bd *bd = NULL;
    struct cli_image im;
    struct diag d;

    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h"))
            return cli_help(help_text);
    optind = 1;
    while ((c = getopt_long(argc, argv, "la:c:d:f:qU", long_opts, NULL)) != -1) {
        switch (c) {
        case 'l': case 'a': case 'c': case 'd':
            if (action)
                return cli_usage_error("snapshot", "Cannot mix '-l', '-a', '-c', '-d'");
            action = c;
            name = optarg;
            break;
        case 'f': oo.format = optarg; break;
        case 'q': break;    /* nothing is printed but the list and errors */
        case 'U': break;
        case OPT_ALLOW_EXTERNAL: oo.allow_external = true; break;
        case CLI_OPT_OBJECT:
            if ((r = cli_object(optarg)) != 0)
                return r < 0 ? 0 : 1;
            break;
        case CLI_OPT_IMAGE_OPTS: iopts = true; break;
        default:
            return cli_usage_error("snapshot", "invalid option");
        }
    }
    if (optind != argc - 1)
        return cli_usage_error("snapshot", "Expecting one image file name");
    if (cli_image_arg(&im, argv[optind], iopts, oo.format))
        return 1;
    const char *filename = im.path;
    oo.format = im.format;
    if (!action || action == 'l') {
        r = list(filename, &oo);
        cli_image_free(&im);
        return r;
    }

    enum bd_snapshot_op op = action == 'c' ? BD_SNAPSHOT_CREATE :
                             action == 'a' ? BD_SNAPSHOT_APPLY : BD_SNAPSHOT_DELETE;
    const char *verb = action == 'c' ? "create" : action == 'a' ? "apply" : "delete";
    diag_init(&d);
    oo.writable = true;
    oo.no_backing = true;
    r = bd_open(&bd, filename, &oo, &d);
    cli_image_free(&im);
    if (r < 0) {
        cli_report(&d);
        return 1;
    }
    int rc = 0;
    if (!bd->drv->snapshot) {
        cli_error("Could not %s snapshot '%s': -%d (%s)", verb, name, EOPNOTSUPP,
                  strerror(EOPNOTSUPP));
        rc = 1;
    } else if (bd->drv->snapshot(bd, op, name) < 0) {
        if (d.err == -ENOENT && op == BD_SNAPSHOT_APPLY)
            cli_error("Could not apply snapshot '%s': Failed to load snapshot: %s", name,
                      strerror(ENOENT));
        else if (d.err == -ENOENT)
            cli_error("Could not delete snapshot '%s': snapshot not found", name);
        else
            cli_report(&d);
        rc = 1;
    }
    bd_close(bd);
    return rc;
}
