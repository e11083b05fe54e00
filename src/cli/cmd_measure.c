/* diskimg measure: how large a new image would be (qemu-img measure's
 * options, numbers, output forms and messages). */
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
#include "util/kvopts.h"
#include "util/size.h"

static const char help_text[] =
    "Usage: diskimg measure [--output=human|json] [-O FMT] [-o OPTS]\n"
    "                       (--size N | [--object OBJ] [--image-opts] [-f FMT]\n"
    "                       [-l SNAPSHOT] IMG)\n"
    "Print the size a new image of format -O would need: for a disk of N bytes,\n"
    "or for the content of IMG (its allocated clusters; zero and unallocated\n"
    "ranges need none).  The numbers are qemu-img measure's.\n"
    "\n"
    "  -O, --target-format FMT  output format (raw, qcow2, vpc, vhdx, vdi)\n"
    "                      default raw\n"
    "  -o, --options OPTS  output options, e.g. cluster_size=64K,refcount_bits=16\n"
    "                      (-o help lists them)\n"
    "  --size N            measure an empty disk of N bytes (suffixes K, M, G, ...)\n"
    "  -f, --format FMT    format of IMG (default: probe)\n"
    "  -l, --snapshot SNAPSHOT  measure an internal snapshot of IMG (NAME,\n"
    "                      snapshot.id=ID, snapshot.name=NAME)\n"
    "  --output=human|json output form (JSON keys as qemu-img: required,\n"
    "                      fully-allocated, bitmaps)\n"
    "  --allow-external    follow backing files outside IMG's folder\n"
    "  -U, --force-share   accepted for compatibility\n"
    "  --image-opts        IMG is an option string: driver=FMT,file.filename=PATH\n"
    "                      (or driver=file,filename=PATH for the file as raw)\n"
    "  --object OBJ        checked as qemu-img checks it, then unused (diskimg\n"
    "                      reads no encrypted images)\n"
    "\n"
    "Exit status: 0 success, 1 error.\n";

enum { OPT_OUTPUT = 256, OPT_SIZE, OPT_ALLOW_EXTERNAL, OPT_HELP };

static const struct option long_opts[] = {
    { "help", no_argument, NULL, OPT_HELP },
    { "output", required_argument, NULL, OPT_OUTPUT },
    { "size", required_argument, NULL, OPT_SIZE },
    { "allow-external", no_argument, NULL, OPT_ALLOW_EXTERNAL },
    /* qemu-img 10's long names of the short options */
    { "source-format", required_argument, NULL, 'f' },
    { "format", required_argument, NULL, 'f' },
    { "snapshot", required_argument, NULL, 'l' },
    { "target-format", required_argument, NULL, 'O' },
    { "target-format-options", required_argument, NULL, 'o' },
    { "options", required_argument, NULL, 'o' },
    { "force-share", no_argument, NULL, 'U' },
    { "object", required_argument, NULL, CLI_OPT_OBJECT },
    { "image-opts", no_argument, NULL, CLI_OPT_IMAGE_OPTS },
    { NULL, 0, NULL, 0 },
};

/* -ENOMEM when the JSON tree could not be built (nothing printed). */
static int print_result(const struct bd_measure *m, int json)
{
    if (json) {
        /* qemu-img's key order */
        struct jval *o = jv_object();
        if (m->has_bitmaps)
            jv_set(o, "bitmaps", jv_uint(m->bitmaps));
        jv_set(o, "required", jv_uint(m->required));
        jv_set(o, "fully-allocated", jv_uint(m->fully_allocated));
        int st = jv_status(o);
        if (st == 0)
            st = cli_print_json(o);
        jv_free(o);
        return st;
    }
    printf("required size: %llu\n", (unsigned long long)m->required);
    printf("fully allocated size: %llu\n", (unsigned long long)m->fully_allocated);
    if (m->has_bitmaps)
        printf("bitmaps size: %llu\n", (unsigned long long)m->bitmaps);
    return 0;
}

int cmd_measure(int argc, char **argv)
{
    struct bd_open_opts oo = { 0 };
    const char *out_fmt = "raw", *size_arg = NULL;
    struct kvopts kv = { 0 };
    struct bd_measure m;
    struct bd *src = NULL;
    struct diag d;
    uint64_t size = 0;
    struct cli_image im = { 0 };
    char err[256];
    bool iopts = false;
    int c, json = 0, rc = 1, r;

    optind = 1;
    while ((c = getopt_long(argc, argv, "hO:o:f:l:U", long_opts, NULL)) != -1) {
        switch (c) {
        case 'h':
        case OPT_HELP:
            kvopts_free(&kv);
            return cli_help(help_text);
        case 'O': out_fmt = optarg; break;
        case 'o':
            if (kvopts_parse(&kv, optarg, err, sizeof(err)) < 0) {
                cli_usage_error("measure", "-o %s: %s", optarg, err);
                goto out;
            }
            break;
        case 'f': oo.format = optarg; break;
        case 'l': oo.snapshot = optarg; break;
        case 'U': break;
        case OPT_OUTPUT:
            if ((json = cli_output_format("measure", optarg)) < 0)
                goto out;
            break;
        case OPT_SIZE: size_arg = optarg; break;
        case OPT_ALLOW_EXTERNAL: oo.allow_external = true; break;
        case CLI_OPT_OBJECT:
            if ((r = cli_object(optarg)) != 0) {
                rc = r < 0 ? 0 : 1;
                goto out;
            }
            break;
        case CLI_OPT_IMAGE_OPTS: iopts = true; break;
        default:
            cli_usage_error("measure", "invalid option");
            goto out;
        }
    }
    const struct bd_driver *drv = bd_find_driver(out_fmt);
    if (!drv) {
        cli_error("Unknown file format '%s'", out_fmt);
        goto out;
    }
    if (kvopts_wants_help(&kv)) {
        fputs(drv->create_options_help ? drv->create_options_help : "no options\n", stdout);
        rc = 0;
        goto out;
    }
    if (optind < argc - 1) {
        cli_usage_error("measure", "too many arguments");
        goto out;
    }
    const char *filename = optind < argc ? argv[optind] : NULL;
    if (filename && size_arg) {
        cli_error("--size N cannot be used together with a filename.");
        goto out;
    }
    if (!filename && !size_arg) {
        cli_error("Either --size N or one filename must be specified.");
        goto out;
    }
    if (!filename && (iopts || oo.format || oo.snapshot)) {
        cli_error("--image-opts, -f, and -l require a filename argument.");
        goto out;
    }
    if (size_arg && size_parse(size_arg, 1, &size) < 0) {
        cli_error("Invalid image size specified. You may use k, M, G, T, P or E suffixes "
                  "for kilobytes, megabytes, gigabytes, terabytes, petabytes and exabytes.");
        goto out;
    }
    if (!drv->measure) {
        cli_error("the %s format does not support size measurement", out_fmt);
        goto out;
    }
    diag_init(&d);
    cli_warnings_on(&d, NULL);
    if (filename && cli_image_arg(&im, filename, iopts, oo.format))
        goto out;
    oo.format = im.format;
    if (filename && bd_open(&src, im.path, &oo, &d) < 0) {
        cli_report(&d);
        goto out;
    }
    if (src && src->size == UINT64_MAX) {
        cli_error("%s: the size of a stream is not known; measure a file", filename);
        goto out;
    }
    if (drv->measure(&kv, size, src, &m, &d) < 0) {
        cli_report(&d);
        goto out;
    }
    const char *unused = kvopts_unused(&kv);
    if (unused) {
        cli_error("Invalid parameter '%s' for format '%s' (see -o help)", unused, out_fmt);
        goto out;
    }
    if (print_result(&m, json) < 0) {
        cli_error("out of memory");
        goto out;
    }
    rc = 0;
out:
    bd_close(src);
    cli_image_free(&im);
    kvopts_free(&kv);
    return rc;
}
