/* diskimg compare: qemu-img compare's options, messages and exit statuses,
 * on top of the parallel comparison in compare.c. */
#define _GNU_SOURCE
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "commands.h"
#include "compare.h"
#include "formats/bd.h"
#include "image_opts.h"
#include "io/bfile.h"
#include "object_opt.h"
#include "progress.h"
#include "util/diag.h"

static const char help_text[] =
    "Usage: diskimg compare [--object OBJ] [--image-opts] [-f FMT] [-F FMT] [-T CACHE]\n"
    "                       [-p] [-q] [-s] [-U] IMG1 IMG2\n"
    "Check whether IMG1 and IMG2 show the same guest content, whatever their\n"
    "formats and allocation.  Images of different sizes are identical when the\n"
    "larger one reads as zeros past the end of the smaller one (unless -s).\n"
    "Ranges both images know to be zero are not read; the rest is read with\n"
    "several requests in flight.  One image may be a pipe (\"-\" for standard\n"
    "input, or <(zstdcat disk.raw.zst)): it is read once, in order.\n"
    "\n"
    "  -f, --a-format FMT  format of IMG1 (raw, qcow2, vmdk, vpc, vhdx, vdi, ova)\n"
    "                    default: probe\n"
    "  -F, --b-format FMT  format of IMG2; default: probe\n"
    "  -s, --strict      fail when the sizes or the allocation differ\n"
    "  -p, --progress    show progress on the terminal\n"
    "  --progress=json   progress as JSON lines on stderr: {\"done\",\"total\",\"elapsed\"}\n"
    "  -q, --quiet       print nothing, the exit status tells\n"
    "  -T, --cache CACHE source cache mode (none, writeback, writethrough,\n"
    "                    directsync, unsafe): checked, then unused\n"
    "  -U, --force-share accepted for compatibility\n"
    "  --image-opts      IMG1 and IMG2 are option strings:\n"
    "                    driver=FMT,file.filename=PATH (or driver=file,filename=PATH)\n"
    "  --object OBJ      checked as qemu-img checks it, then unused (diskimg reads no\n"
    "                    encrypted images)\n"
    "  --allow-external  follow backing/extent/data files outside the images' folders\n"
    "\n"
    "Prints \"Images are identical.\" or \"Content mismatch at offset N!\" (N is the\n"
    "first differing 512-byte sector, as qemu-img reports it).\n"
    "Exit status: 0 identical, 1 different (or bad arguments), 2 an image cannot\n"
    "be opened, 3 block status failed, 4 reading failed.\n";

enum { OPT_PROGRESS = 256, OPT_ALLOW_EXTERNAL, OPT_HELP };

static const struct option long_opts[] = {
    { "help", no_argument, NULL, OPT_HELP },
    { "progress", optional_argument, NULL, OPT_PROGRESS },
    { "allow-external", no_argument, NULL, OPT_ALLOW_EXTERNAL },
    { "force-share", no_argument, NULL, 'U' },
    { "quiet", no_argument, NULL, 'q' },
    /* qemu-img 10's long names of the short options */
    { "a-format", required_argument, NULL, 'f' },
    { "b-format", required_argument, NULL, 'F' },
    { "strict", no_argument, NULL, 's' },
    { "cache", required_argument, NULL, 'T' },
    { "object", required_argument, NULL, CLI_OPT_OBJECT },
    { "image-opts", no_argument, NULL, CLI_OPT_IMAGE_OPTS },
    { NULL, 0, NULL, 0 },
};

enum {
    EXIT_IDENTICAL = 0,
    EXIT_DIFFERENT = 1,
    EXIT_OPEN = 2,
    EXIT_STATUS = 3,
    EXIT_READ = 4,
};

static int open_image(struct bd **bd, const char *arg, bool image_opts, const char *fmt,
                      bool allow_external, struct bd_open_opts *oo, struct diag *d)
{
    struct cli_image im;

    if (cli_image_arg(&im, arg, image_opts, fmt))
        return -1;
    oo->format = im.format;
    oo->allow_external = allow_external;
    int r = bd_open(bd, im.path, oo, d);
    cli_image_free(&im);
    if (r < 0) {
        cli_report(d);
        return -1;
    }
    return 0;
}

int cmd_compare(int argc, char **argv)
{
    const char *fmt1 = NULL, *fmt2 = NULL;
    bool quiet = false, allow_external = false, iopts = false;
    enum progress_mode pmode = PROGRESS_NONE;
    struct compare_opts co;
    int c, r;

    compare_opts_default(&co);
    optind = 1;
    while ((c = getopt_long(argc, argv, "hf:F:T:spqU", long_opts, NULL)) != -1) {
        switch (c) {
        case 'h':
        case OPT_HELP:
            return cli_help(help_text);
        case 'f': fmt1 = optarg; break;
        case 'F': fmt2 = optarg; break;
        case 'T':
            if (!cli_cache_mode(optarg, true))
                return EXIT_OPEN; /* as qemu-img */
            break;
        case 's': co.strict = true; break;
        case 'p': if (pmode == PROGRESS_NONE) pmode = PROGRESS_BAR; break;
        case 'q': quiet = true; break;
        case 'U': break;
        case OPT_PROGRESS:
            if (!optarg)            /* qemu-img 10's --progress: -p */
                pmode = PROGRESS_BAR;
            else if (!strcmp(optarg, "json"))
                pmode = PROGRESS_JSON;
            else if (!strcmp(optarg, "bar") || !strcmp(optarg, "human"))
                pmode = PROGRESS_BAR;
            else if (!strcmp(optarg, "none"))
                pmode = PROGRESS_NONE;
            else
                return cli_usage_error("compare", "--progress must be bar, json or none");
            break;
        case OPT_ALLOW_EXTERNAL: allow_external = true; break;
        case CLI_OPT_OBJECT:
            if ((r = cli_object(optarg)) != 0)
                return r < 0 ? 0 : EXIT_OPEN;   /* as qemu-img */
            break;
        case CLI_OPT_IMAGE_OPTS: iopts = true; break;
        default:
            return cli_usage_error("compare", "bad option");
        }
    }
    if (argc - optind != 2)
        return cli_usage_error("compare", "expected two images");
    if (quiet && pmode == PROGRESS_BAR)
        pmode = PROGRESS_NONE;
    const char *name1 = argv[optind], *name2 = argv[optind + 1];

    struct diag d;
    struct bd_open_opts oo1 = { 0 }, oo2 = { 0 };
    struct bd *a = NULL, *b = NULL;
    diag_init(&d);
    cli_warnings_on(&d, &quiet);
    if (open_image(&a, name1, iopts, fmt1, allow_external, &oo1, &d) < 0)
        return EXIT_OPEN;
    if (open_image(&b, name2, iopts, fmt2, allow_external, &oo2, &d) < 0) {
        bd_close(a);
        return EXIT_OPEN;
    }
    bool pipe1 = a->file && a->file->kind == BFILE_STREAM;
    bool pipe2 = b->file && b->file->kind == BFILE_STREAM;
    if ((pipe1 && pipe2) || ((pipe1 || pipe2) && co.strict)) {
        if (pipe1 && pipe2)
            cli_error("%s, %s: only one of the images can be a pipe", name1, name2);
        else
            cli_error("%s: a pipe has no allocation to compare; -s needs files",
                      pipe1 ? name1 : name2);
        bd_close(b);
        bd_close(a);
        return EXIT_OPEN;
    }

    struct progress prog;
    struct compare_result res;
    progress_init(&prog, pmode, stderr);
    co.progress = progress_update;
    co.progress_opaque = &prog;
    r = compare_images(a, b, &co, &res);
    progress_finish(&prog, r == 0 && res.verdict == COMPARE_IDENTICAL);

    int rc;
    if (res.size_mismatch && !quiet)
        printf("Warning: Image size mismatch!\n");
    if (r < 0) {
        fflush(stdout);
        cli_report(&d);
        rc = res.failure == COMPARE_FAIL_STATUS ? EXIT_STATUS : EXIT_READ;
    } else {
        switch (res.verdict) {
        case COMPARE_IDENTICAL:
            if (!quiet)
                printf("Images are identical.\n");
            rc = EXIT_IDENTICAL;
            break;
        case COMPARE_CONTENT:
            if (!quiet)
                printf("Content mismatch at offset %" PRIu64 "!\n", res.offset);
            rc = EXIT_DIFFERENT;
            break;
        case COMPARE_STRICT_SIZE:
            if (!quiet)
                printf("Strict mode: Image size mismatch!\n");
            rc = EXIT_DIFFERENT;
            break;
        case COMPARE_STRICT_STATUS:
        default:
            if (!quiet)
                printf("Strict mode: Offset %" PRIu64 " block status mismatch!\n", res.offset);
            rc = EXIT_DIFFERENT;
            break;
        }
    }
    bd_close(b);
    bd_close(a);
    return rc;
}
