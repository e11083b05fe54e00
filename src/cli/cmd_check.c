/* diskimg check: verify an image's metadata like `qemu-img check`.
 *
 * Exit status as qemu-img: 0 clean, 2 corruptions, 3 leaks only, 1 the
 * check could not be done (or hit internal errors), 63 the format has no
 * checks.  Per-problem lines (qemu's wording) go to stderr as the driver
 * finds them; the summary goes to stdout, as text or JSON with qemu-img's
 * keys in qemu-img's order.
 */
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
    "Usage: diskimg check [--object OBJ] [--image-opts] [-q] [-f FMT]\n"
    "                     [--output=human|json] [-r leaks|all] [-T CACHE] [-U]\n"
    "                     [--allow-external] IMG\n"
    "Verify the metadata of an image (qcow2: every refcount, table and flag;\n"
    "vmdk: every grain inside its file and clear of the metadata; vpc: the footer,\n"
    "its copy and every BAT entry; vdi: the block map, as qemu-img; vhdx: the log,\n"
    "headers, region tables and every BAT entry).\n"
    "\n"
    "  -f, --format FMT  image format (default: probed)\n"
    "  --output=FMT      human (default) or json, with qemu-img's field names\n"
    "  -q, --quiet       quiet: no summary\n"
    "  -U, --force-share accepted for compatibility\n"
    "  -T CACHE          source cache mode (none, writeback, writethrough, directsync,\n"
    "                    unsafe): checked, then unused\n"
    "  --image-opts      IMG is an option string: driver=FMT,file.filename=PATH\n"
    "                    (or driver=file,filename=PATH for the file as raw)\n"
    "  --object OBJ      checked as qemu-img checks it, then unused (diskimg reads no\n"
    "                    encrypted images)\n"
    "  --allow-external  follow backing/data file references outside the image's folder\n"
    "  -r, --repair leaks|all\n"
    "                    repair (qcow2): leaks = lower refcounts that are too high;\n"
    "                    all = also raise those too low, rebuild a damaged refcount\n"
    "                    structure and fix copied flags; then check again (refused,\n"
    "                    nothing written, when not every reference can be counted)\n"
    "                    vhdx: all = replay the log into the file, rewrite a damaged\n"
    "                    header or region table copy\n"
    "\n"
    "Exit status: 0 no problems (left), 2 corruptions found, 3 only leaked clusters\n"
    "found, 1 the check could not be completed, 63 the format does not support checks.\n";

static void print_problem(void *opaque, const char *file, int64_t offset, const char *msg)
{
    (void)opaque, (void)file, (void)offset;
    cli_put_line(stderr, msg);
}

static void print_human(const struct bd_check_result *r)
{
    if (!(r->corruptions || r->leaks || r->check_errors)) {
        printf("No errors were found on the image.\n");
    } else {
        if (r->corruptions)
            printf("\n%lld errors were found on the image.\n"
                   "Data may be corrupted, or further writes to the image may corrupt it.\n",
                   (long long)r->corruptions);
        if (r->leaks)
            printf("\n%lld leaked clusters were found on the image.\n"
                   "This means waste of disk space, but no harm to data.\n",
                   (long long)r->leaks);
        if (r->check_errors)
            printf("\n%lld internal errors have occurred during the check.\n",
                   (long long)r->check_errors);
    }
    if (r->total_clusters != 0 && r->allocated_clusters != 0)
        printf("%lld/%lld = %0.2f%% allocated, %0.2f%% fragmented, %0.2f%% compressed "
               "clusters\n", (long long)r->allocated_clusters, (long long)r->total_clusters,
               r->allocated_clusters * 100.0 / r->total_clusters,
               r->fragmented_clusters * 100.0 / r->allocated_clusters,
               r->compressed_clusters * 100.0 / r->allocated_clusters);
    if (r->image_end_offset)
        printf("Image end offset: %lld\n", (long long)r->image_end_offset);
}

static void set_nonzero(struct jval *o, const char *key, int64_t v)
{
    if (v)
        jv_set(o, key, jv_int(v));
}

/* qemu-img prints the fields in its dictionary's order; keep it.
 * -ENOMEM when the tree could not be built (nothing printed). */
static int print_json(const struct bd_check_result *r, const char *filename,
                       const char *format)
{
    struct jval *o = jv_object();

    set_nonzero(o, "image-end-offset", r->image_end_offset);
    set_nonzero(o, "compressed-clusters", r->compressed_clusters);
    set_nonzero(o, "total-clusters", r->total_clusters);
    set_nonzero(o, "corruptions", r->corruptions);
    set_nonzero(o, "corruptions-fixed", r->corruptions_fixed);
    jv_set(o, "check-errors", jv_int(r->check_errors));
    set_nonzero(o, "leaks", r->leaks);
    set_nonzero(o, "leaks-fixed", r->leaks_fixed);
    set_nonzero(o, "allocated-clusters", r->allocated_clusters);
    jv_set(o, "filename", jv_str(filename));
    jv_set(o, "format", jv_str(format));
    set_nonzero(o, "fragmented-clusters", r->fragmented_clusters);
    int st = jv_status(o);
    if (st == 0)
        st = cli_print_json(o);
    jv_free(o);
    return st;
}

int cmd_check(int argc, char **argv)
{
    static const struct option longopts[] = {
        { "help", no_argument, NULL, 'h' },
        { "output", required_argument, NULL, 'O' },
        { "allow-external", no_argument, NULL, 'x' },
        { "repair", required_argument, NULL, 'r' },
        { "format", required_argument, NULL, 'f' },
        { "quiet", no_argument, NULL, 'q' },
        { "force-share", no_argument, NULL, 'U' },
        { "object", required_argument, NULL, CLI_OPT_OBJECT },
        { "image-opts", no_argument, NULL, CLI_OPT_IMAGE_OPTS },
        { NULL, 0, NULL, 0 },
    };
    struct bd_open_opts o = { 0 };
    struct bd_check_result res;
    struct diag d;
    struct bd *bd;
    const char *cache = NULL;
    bool iopts = false;
    int opt, json = 0, quiet = 0, r;
    unsigned fix = 0;

    optind = 1;
    while ((opt = getopt_long(argc, argv, "hf:qr:T:U", longopts, NULL)) != -1) {
        switch (opt) {
        case 'h':
            return cli_help(help_text);
        case 'U':
            break;      /* accepted for compatibility */
        case 'f':
            o.format = optarg;
            break;
        case 'O':
            if ((json = cli_output_format("check", optarg)) < 0)
                return 1;
            break;
        case 'q':
            quiet = 1;
            break;
        case 'x':
            o.allow_external = true;
            break;
        case 'T':
            cache = optarg;
            break;
        case CLI_OPT_OBJECT:
            if ((r = cli_object(optarg)) != 0)
                return r < 0 ? 0 : 1;
            break;
        case CLI_OPT_IMAGE_OPTS:
            iopts = true;
            break;
        case 'r':
            if (!strcmp(optarg, "leaks"))
                fix = BD_CHECK_FIX_LEAKS;
            else if (!strcmp(optarg, "all"))
                fix = BD_CHECK_FIX_LEAKS | BD_CHECK_FIX_ERRORS;
            else
                return cli_usage_error("check", "Unknown option for -r (expecting 'leaks' "
                                       "or 'all'): %s", optarg);
            break;
        default:
            return cli_usage_error("check", "invalid option");
        }
    }
    if (optind != argc - 1)
        return cli_usage_error("check", optind >= argc ? "no image given"
                                                       : "too many arguments");
    /* the JSON form's "filename" is the argument, an option string too */
    const char *filename = argv[optind];
    if (cache && !cli_cache_mode(cache, true))
        return 1;
    struct cli_image im;
    if (cli_image_arg(&im, filename, iopts, o.format))
        return 1;
    o.format = im.format;

    diag_init(&d);
    d.warn = print_problem;
    /* the check looks at this image's own metadata only */
    o.no_backing = true;
    o.writable = fix != 0;
    r = bd_open(&bd, im.path, &o, &d);
    cli_image_free(&im);
    if (r < 0) {
        cli_report(&d);
        return 1;
    }
    if (!bd->drv->check) {
        cli_error("%s: this image format (%s) does not support checks", filename,
                  bd->drv->name);
        bd_close(bd);
        return 63;
    }
    memset(&res, 0, sizeof(res));
    r = bd->drv->check(bd, &res, fix);
    if (r == 0 && (res.leaks_fixed || res.corruptions_fixed)) {
        /* as qemu-img: say what was repaired, then check the result afresh */
        struct bd_check_result fixed = res;
        if (!json && !quiet)
            printf("The following inconsistencies were found and repaired:\n\n"
                   "    %lld leaked clusters\n    %lld corruptions\n\n"
                   "Double checking the fixed image now...\n",
                   (long long)fixed.leaks_fixed, (long long)fixed.corruptions_fixed);
        fflush(stdout);
        r = bd->drv->check(bd, &res, 0);
        res.leaks_fixed = fixed.leaks_fixed;
        res.corruptions_fixed = fixed.corruptions_fixed;
    }
    if (r < 0) {
        cli_report(&d);
        cli_error("Check failed");
        bd_close(bd);
        return 1;
    }
    if (!quiet) {
        if (json && print_json(&res, filename, bd->drv->name) < 0) {
            cli_error("%s: out of memory", filename);
            bd_close(bd);
            return 1;
        }
        if (!json)
            print_human(&res);
    }
    bd_close(bd);
    if (res.check_errors) {
        cli_error("Check failed");
        return 1;
    }
    return res.corruptions ? 2 : res.leaks ? 3 : 0;
}
