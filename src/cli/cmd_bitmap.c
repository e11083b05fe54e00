/* diskimg bitmap: add, remove, clear, enable, disable and merge the
 * persistent dirty bitmaps of a qcow2 image, in place (qemu-img bitmap's
 * options, messages and exit status). */
#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "commands.h"
#include "formats/bd.h"
#include "image_opts.h"
#include "object_opt.h"
#include "util/diag.h"
#include "util/size.h"

static const char help_text[] =
    "Usage: diskimg bitmap (--merge SOURCE | --add | --remove | --clear | --enable |\n"
    "                       --disable)... [-b SOURCE_FILE [-F SOURCE_FMT]]\n"
    "                      [-g GRANULARITY] [--object OBJ] [--image-opts | -f FMT]\n"
    "                      FILENAME BITMAP\n"
    "Change the persistent dirty bitmap BITMAP of a qcow2 image, in place.  The\n"
    "operations run in the order given; when one fails, those before it are kept\n"
    "(as with qemu-img).\n"
    "\n"
    "  --add               add BITMAP (enabled, empty)\n"
    "  --remove            remove BITMAP (also one marked in use)\n"
    "  --clear             clear every bit of BITMAP\n"
    "  --enable            let BITMAP record writes\n"
    "  --disable           stop BITMAP recording writes\n"
    "  --merge SOURCE      set in BITMAP every bit set in the bitmap SOURCE of this\n"
    "                      image, or of the image FILE with -b\n"
    "  -g, --granularity GRANULARITY\n"
    "                      granularity of an added bitmap: a power of two from 512\n"
    "                      to 2G (default: the cluster size within 4K..64K)\n"
    "  -b, --source-file FILE  the image holding the --merge source (qcow2)\n"
    "  -F, --source-format FMT  its format (default: probe)\n"
    "  -f, --format FMT    format of FILENAME (default: probe)\n"
    "  --image-opts        FILENAME is an option string:\n"
    "                      driver=FMT,file.filename=PATH\n"
    "  --object OBJ        checked as qemu-img checks it, then unused (diskimg\n"
    "                      reads no encrypted images)\n"
    "  --allow-external    accepted for symmetry (no backing file is opened)\n"
    "\n"
    "Changes are crash-safe: the new bitmap tables, directory and refcounts are\n"
    "written and synced past the end of the file before one write of the first\n"
    "cluster switches to them.  The image is checked first; dirty or corrupt\n"
    "images are refused, and a bitmap marked in use (inconsistent) can only be\n"
    "removed.\n"
    "\n"
    "Exit status: 0 success, 1 error.\n";

enum {
    OPT_HELP = 256, OPT_ADD, OPT_REMOVE, OPT_CLEAR, OPT_ENABLE, OPT_DISABLE, OPT_MERGE,
    OPT_ALLOW_EXTERNAL,
};

static const struct option long_opts[] = {
    { "help", no_argument, NULL, OPT_HELP },
    { "add", no_argument, NULL, OPT_ADD },
    { "remove", no_argument, NULL, OPT_REMOVE },
    { "clear", no_argument, NULL, OPT_CLEAR },
    { "enable", no_argument, NULL, OPT_ENABLE },
    { "disable", no_argument, NULL, OPT_DISABLE },
    { "merge", required_argument, NULL, OPT_MERGE },
    { "allow-external", no_argument, NULL, OPT_ALLOW_EXTERNAL },
    { "object", required_argument, NULL, CLI_OPT_OBJECT },
    { "image-opts", no_argument, NULL, CLI_OPT_IMAGE_OPTS },
    /* qemu-img 10's long names of the short options */
    { "granularity", required_argument, NULL, 'g' },
    { "source-file", required_argument, NULL, 'b' },
    { "source-format", required_argument, NULL, 'F' },
    { "format", required_argument, NULL, 'f' },
    { NULL, 0, NULL, 0 },
};

static const char *const act_names[] = {
    [BD_BITMAP_ADD] = "add", [BD_BITMAP_REMOVE] = "remove", [BD_BITMAP_CLEAR] = "clear",
    [BD_BITMAP_ENABLE] = "enable", [BD_BITMAP_DISABLE] = "disable",
    [BD_BITMAP_MERGE] = "merge",
};

static bool same_file(const char *a, const char *b)
{
    struct stat sa, sb;

    return stat(a, &sa) == 0 && stat(b, &sb) == 0 && sa.st_dev == sb.st_dev &&
           sa.st_ino == sb.st_ino;
}

/* A format without bitmaps: qemu-img's messages for each operation. */
static int unsupported(const char *filename, const char *name, enum bd_bitmap_act act)
{
    if (act == BD_BITMAP_ADD)
        cli_error("Operation add on bitmap %s failed: Can't store persistent bitmaps to "
                  "%s: %s", name, filename, strerror(EOPNOTSUPP));
    else
        cli_error("Operation %s on bitmap %s failed: Dirty bitmap '%s' not found",
                  act_names[act], name, name);
    return 1;
}

int cmd_bitmap(int argc, char **argv)
{
    struct bd_open_opts oo = { 0 }, so = { 0 };
    struct bd_bitmap_op *ops = calloc((size_t)argc + 1, sizeof(*ops));
    const char *src_file = NULL, *gran = NULL;
    uint64_t granularity = 0;
    bool add = false, merge = false, iopts = false;
    struct cli_image im = { 0 };
    size_t n = 0;
    int c, rc = 1;
    struct bd *bd = NULL, *sbd = NULL;
    struct diag d, sd;

    if (!ops) {
        cli_error("out of memory");
        return 1;
    }
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            free(ops);
            return cli_help(help_text);
        }
    optind = 1;
    while ((c = getopt_long(argc, argv, "b:f:F:g:", long_opts, NULL)) != -1) {
        switch (c) {
        case 'b': src_file = optarg; break;
        case 'f': oo.format = optarg; break;
        case 'F': so.format = optarg; break;
        case 'g': gran = optarg; break;
        case OPT_ADD: ops[n++].act = BD_BITMAP_ADD; add = true; break;
        case OPT_REMOVE: ops[n++].act = BD_BITMAP_REMOVE; break;
        case OPT_CLEAR: ops[n++].act = BD_BITMAP_CLEAR; break;
        case OPT_ENABLE: ops[n++].act = BD_BITMAP_ENABLE; break;
        case OPT_DISABLE: ops[n++].act = BD_BITMAP_DISABLE; break;
        case OPT_MERGE:
            ops[n].act = BD_BITMAP_MERGE;
            ops[n++].source = optarg;
            merge = true;
            break;
        case OPT_ALLOW_EXTERNAL: oo.allow_external = true; break;
        case CLI_OPT_OBJECT: {
            int r = cli_object(optarg);
            if (r) {
                rc = r < 0 ? 0 : 1;
                goto out;
            }
            break;
        }
        case CLI_OPT_IMAGE_OPTS: iopts = true; break;
        default:
            rc = cli_usage_error("bitmap", "invalid option");
            goto out;
        }
    }
    if (n == 0) {
        cli_error("Need at least one of --add, --remove, --clear, --enable, --disable, or "
                  "--merge");
        goto out;
    }
    if (argc - optind != 2) {
        cli_error("Expecting filename and bitmap name");
        goto out;
    }
    if (gran && (size_parse(gran, 1, &granularity) < 0)) {
        cli_error("Invalid granularity specified. You may use k, M, G, T, P or E suffixes "
                  "for");
        cli_error("kilobytes, megabytes, gigabytes, terabytes, petabytes and exabytes.");
        goto out;
    }
    if (gran && !add) {
        cli_error("granularity only supported with --add");
        goto out;
    }
    if (src_file && !merge) {
        cli_error("Merge bitmap source file only supported with --merge");
        goto out;
    }
    if (so.format && !src_file) {
        cli_error("-F only supported with -b");
        goto out;
    }
    if (cli_image_arg(&im, argv[optind], iopts, oo.format))
        goto out;
    const char *filename = im.path, *name = argv[optind + 1];
    oo.format = im.format;

    diag_init(&d);
    diag_init(&sd);
    oo.writable = true;
    oo.no_backing = true;
    if (bd_open(&bd, filename, &oo, &d) < 0) {
        cli_report(&d);
        goto out;
    }
    if (src_file && !same_file(src_file, filename)) {
        so.no_backing = true;
        so.allow_external = true;   /* a file named on the command line */
        if (bd_open(&sbd, src_file, &so, &sd) < 0) {
            cli_report(&sd);
            goto out;
        }
        for (size_t i = 0; i < n; i++)
            if (ops[i].act == BD_BITMAP_MERGE)
                ops[i].source_bd = sbd;
    }
    if (!bd->drv->bitmap) {
        rc = unsupported(filename, name, ops[0].act);
        goto out;
    }
    size_t failed;
    if (bd->drv->bitmap(bd, name, ops, n, granularity, &failed) < 0) {
        if (failed < n)
            cli_error("Operation %s on bitmap %s failed: %s", act_names[ops[failed].act],
                      name, d.what);
        else
            cli_report(&d);
        goto out;
    }
    rc = 0;
out:
    bd_close(sbd);
    bd_close(bd);
    cli_image_free(&im);
    free(ops);
    return rc;
}
