/* diskimg sparsify: punch holes into the zero runs of a raw image, in place. */
#include <getopt.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "commands.h"
#include "progress.h"
#include "sparsify.h"
#include "util/diag.h"
#include "util/size.h"

static const char help_text[] =
    "Usage: diskimg sparsify [OPTIONS] IMG\n"
    "Punch holes into the zero runs of the raw image IMG, in place: its content\n"
    "and size do not change, the blocks of all-zero runs are given back to the\n"
    "file system.  Existing holes are skipped without reading them.\n"
    "\n"
    "  --dry-run         only report how many bytes would be freed\n"
    "  -S, --sparse-size SIZE  shortest zero run to punch, a multiple of 512\n"
    "                    (default 4K; runs are punched in whole file system blocks)\n"
    "  -p, --progress    show progress on the terminal\n"
    "  --progress=json   progress as JSON lines on stderr\n"
    "  -q, --quiet       print nothing on success\n"
    "  -f, --format raw  accepted; sparsify works on raw images only\n"
    "\n"
    "Prints the bytes reclaimed.  Exit status: 0 success, 1 error.\n";

enum { OPT_DRY_RUN = 256, OPT_PROGRESS, OPT_HELP };

static const struct option long_opts[] = {
    { "help", no_argument, NULL, OPT_HELP },
    { "dry-run", no_argument, NULL, OPT_DRY_RUN },
    { "progress", optional_argument, NULL, OPT_PROGRESS },
    { "quiet", no_argument, NULL, 'q' },
    { "sparse-size", required_argument, NULL, 'S' },
    { "format", required_argument, NULL, 'f' },
    { NULL, 0, NULL, 0 },
};

int cmd_sparsify(int argc, char **argv)
{
    struct sparsify_opts o = { .sparse_size = 4096 };
    enum progress_mode pm = PROGRESS_NONE;
    bool quiet = false;
    int c;

    optind = 1;
    while ((c = getopt_long(argc, argv, "hS:f:pq", long_opts, NULL)) != -1) {
        switch (c) {
        case 'h':
        case OPT_HELP:
            return cli_help(help_text);
        case OPT_DRY_RUN: o.dry_run = true; break;
        case 'S':
            if (!cli_size("sparsify", "-S", optarg, &o.sparse_size))
                return 1;
            if (o.sparse_size == 0 || o.sparse_size % 512 || o.sparse_size > (1ULL << 30))
                return cli_usage_error("sparsify", "-S must be a multiple of 512 from 512 to 1G");
            break;
        case 'f':
            if (strcmp(optarg, "raw") != 0)
                return cli_usage_error("sparsify", "only raw images can be sparsified in place "
                                       "(for %s, convert it: zero clusters are dropped)", optarg);
            break;
        case 'p': if (pm == PROGRESS_NONE) pm = PROGRESS_BAR; break;
        case OPT_PROGRESS:
            if (!optarg)            /* qemu-img 10's --progress: -p */
                pm = PROGRESS_BAR;
            else if (!strcmp(optarg, "json"))
                pm = PROGRESS_JSON;
            else if (!strcmp(optarg, "bar") || !strcmp(optarg, "human"))
                pm = PROGRESS_BAR;
            else if (!strcmp(optarg, "none"))
                pm = PROGRESS_NONE;
            else
                return cli_usage_error("sparsify", "--progress must be bar, json or none");
            break;
        case 'q': quiet = true; break;
        default:
            return cli_usage_error("sparsify", "bad option");
        }
    }
    if (argc - optind != 1)
        return cli_usage_error("sparsify", "expected one image");
    o.path = argv[optind];
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    o.threads = n < 1 ? 1 : n > 16 ? 16 : (unsigned)n;

    struct progress prog;
    struct diag d;
    struct sparsify_result res;
    diag_init(&d);
    progress_init(&prog, quiet && pm == PROGRESS_BAR ? PROGRESS_NONE : pm, stderr);
    o.progress = progress_update;
    o.progress_opaque = &prog;
    int r = sparsify_run(&o, &res, &d);
    progress_finish(&prog, r == 0);
    if (r < 0) {
        cli_report(&d);
        return 1;
    }
    if (!quiet) {
        char h[32];
        if (o.dry_run) {
            size_human(res.zero_found, h, sizeof(h));
            printf("%s: %llu bytes (%s) of zeros could be freed\n", o.path,
                   (unsigned long long)res.zero_found, h);
        } else {
            uint64_t freed = res.before > res.after ? res.before - res.after : 0;
            size_human(freed, h, sizeof(h));
            printf("%s: reclaimed %llu bytes (%s)\n", o.path, (unsigned long long)freed, h);
        }
    }
    return 0;
}
