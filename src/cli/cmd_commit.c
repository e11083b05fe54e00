/* diskimg commit: write a top image's content into its backing file (or a
 * deeper base of its chain) and empty it (qemu-img commit's options,
 * messages and exit status).  The work is commit_image(). */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "commands.h"
#include "commit.h"
#include "formats/bd.h"
#include "image_opts.h"
#include "object_opt.h"
#include "progress.h"
#include "util/diag.h"
#include "util/size.h"

static const char help_text[] =
    "Usage: diskimg commit [--object OBJ] [--image-opts] [-q] [-f FMT] [-t CACHE]\n"
    "                      [-b BASE] [-r RATE_LIMIT] [-d] [-p] IMG\n"
    "Write what IMG holds into its backing file, then empty IMG (it reads through to\n"
    "the backing file again).  With -b, everything the images above BASE hold is\n"
    "written into BASE, a deeper image of IMG's backing chain, and IMG is kept.\n"
    "BASE may be qcow2, raw, vpc or vdi; it grows to IMG's size when smaller.\n"
    "\n"
    "  -b, --base BASE     the image to commit into (named relative to the folder\n"
    "                      of the image that refers to it, as qemu-img); implies -d\n"
    "  -d, --no-drop       do not empty IMG afterwards\n"
    "  -f, --format FMT    IMG's format (default: probe)\n"
    "  -r, --rate-limit RATE_LIMIT\n"
    "                      write at most RATE_LIMIT bytes of data a second\n"
    "                      (suffixes K, M, G, T, P, E)\n"
    "  -p, --progress      show progress\n"
    "  -q, --quiet         quiet: no 'Image committed.' line\n"
    "  -t, --cache CACHE   accepted for compatibility (none, writeback,\n"
    "                      writethrough, directsync, unsafe); the base is always\n"
    "                      synced before IMG is emptied\n"
    "  --allow-external    the backing chain may leave each image's folder\n"
    "  --image-opts        IMG is an option string: driver=FMT,file.filename=PATH\n"
    "  --object OBJ        checked as qemu-img checks it, then unused (diskimg\n"
    "                      reads no encrypted images)\n"
    "\n"
    "The base stays consistent throughout: a commit that fails or is killed\n"
    "leaves it holding part of IMG's content (qemu-img check clean), and IMG is\n"
    "emptied only after the base is synced, in one switch.\n"
    "\n"
    "Exit status: 0 success, 1 error.\n";

enum { OPT_ALLOW_EXTERNAL = 256, OPT_HELP };

static const struct option long_opts[] = {
    { "help", no_argument, NULL, OPT_HELP },
    { "allow-external", no_argument, NULL, OPT_ALLOW_EXTERNAL },
    /* qemu-img 10's long names of the short options */
    { "format", required_argument, NULL, 'f' },
    { "cache", required_argument, NULL, 't' },
    { "base", required_argument, NULL, 'b' },
    { "rate-limit", required_argument, NULL, 'r' },
    { "no-drop", no_argument, NULL, 'd' },
    { "drop", no_argument, NULL, 'd' },     /* accepted as well */
    { "progress", no_argument, NULL, 'p' },
    { "quiet", no_argument, NULL, 'q' },
    { "object", required_argument, NULL, CLI_OPT_OBJECT },
    { "image-opts", no_argument, NULL, CLI_OPT_IMAGE_OPTS },
    { NULL, 0, NULL, 0 },
};

int cmd_commit(int argc, char **argv)
{
    struct commit_opts o = { 0 };
    bool quiet = false, progress = false, iopts = false;
    const char *cache = NULL;
    struct cli_image im;
    struct commit_result res;
    struct progress prog;
    struct diag d;
    int c, r;

    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h"))
            return cli_help(help_text);
    optind = 1;
    while ((c = getopt_long(argc, argv, "f:t:b:r:dpq", long_opts, NULL)) != -1) {
        switch (c) {
        case 'f': o.format = optarg; break;
        case 't': cache = optarg; break;
        case 'b': o.base = optarg; o.drop = true; break;   /* -b implies -d */
        case 'r': {
            uint64_t v;
            if (size_parse(optarg, 1, &v) < 0 || v > INT64_MAX) {
                cli_error("Invalid rate limit specified. You may use k, M, G, T, P or E "
                          "suffixes for");
                cli_error("kilobytes, megabytes, gigabytes, terabytes, petabytes and "
                          "exabytes.");
                return 1;
            }
            o.rate_limit = v;
            break;
        }
        case 'd': o.drop = true; break;
        case 'p': progress = true; break;
        case 'q': quiet = true; break;
        case OPT_ALLOW_EXTERNAL: o.allow_external = true; break;
        case CLI_OPT_OBJECT:
            if ((r = cli_object(optarg)) != 0)
                return r < 0 ? 0 : 1;
            break;
        case CLI_OPT_IMAGE_OPTS: iopts = true; break;
        default:
            return cli_usage_error("commit", "invalid option");
        }
    }
    if (optind != argc - 1)
        return cli_usage_error("commit", "Expecting one image file name");
    if (cache && !cli_cache_mode(cache, false))
        return 1;
    if (o.format && !bd_find_driver(o.format)) {
        cli_error("Could not open '%s': Unknown driver '%s'", argv[optind], o.format);
        return 1;
    }
    if (cli_image_arg(&im, argv[optind], iopts, o.format))
        return 1;
    o.filename = im.path;
    o.format = im.format;
    progress_init(&prog, progress && !quiet ? PROGRESS_BAR : PROGRESS_NONE, stderr);
    o.progress = progress_update;
    o.progress_opaque = &prog;
    diag_init(&d);
    r = commit_image(&o, &d, &res);
    cli_image_free(&im);
    progress_finish(&prog, r == 0);
    if (r < 0) {
        cli_report(&d);
        return 1;
    }
    if (!quiet)
        printf("Image committed.\n");
    return 0;
}
