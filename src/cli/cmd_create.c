/* diskimg create: a new, empty image (qemu-img create's options, messages
 * and exit status).  Written under a temporary name and renamed into place,
 * like every output. */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "commands.h"
#include "formats/bd.h"
#include "io/bfile.h"
#include "object_opt.h"
#include "outfile.h"
#include "util/diag.h"
#include "util/kvopts.h"
#include "util/size.h"

static const char help_text[] =
    "Usage: diskimg create [--object OBJ] [-q] [-f FMT] [-b BACKING [-F BFMT]] [-u]\n"
    "                      [-o OPTS] IMG [SIZE]\n"
    "Create a new empty image IMG of SIZE bytes (suffixes K, M, G, T, P, E).\n"
    "An existing IMG is replaced; the new image appears only once complete.\n"
    "\n"
    "  -f, --format FMT     image format (raw, qcow2, vmdk, vpc, vhdx, vdi)\n"
    "                       default raw\n"
    "  -o, --options OPTS   format options, e.g. cluster_size=64K,compat=0.10 or\n"
    "                       subformat=streamOptimized or (vhdx)\n"
    "                       block_size=32M,subformat=fixed (-o help lists them)\n"
    "  -b, --backing BACKING  qcow2, vmdk: backing file (relative to IMG's folder);\n"
    "                       SIZE defaults to its size\n"
    "  -F, --backing-format BFMT  format of BACKING (required with -b)\n"
    "  -u, --backing-unsafe do not open BACKING (it need not exist; SIZE is then\n"
    "                       required)\n"
    "  -q, --quiet          quiet: no 'Formatting ...' line\n"
    "  --object OBJ         checked as qemu-img checks it, then unused (diskimg\n"
    "                       writes no encrypted images)\n"
    "\n"
    "Exit status: 0 success, 1 error.\n";

struct args {
    const char *fmt, *backing, *backing_fmt, *img, *size_arg;
    bool unsafe, quiet;
    struct kvopts o;
};

/* 0 ok, 1 usage error (printed), -1 help printed */
static int parse_args(int argc, char **argv, struct args *a)
{
    static const struct option long_opts[] = {
        { "help", no_argument, NULL, 'h' },
        /* qemu-img 10's long names of the short options */
        { "format", required_argument, NULL, 'f' },
        { "options", required_argument, NULL, 'o' },
        { "backing", required_argument, NULL, 'b' },
        { "backing-format", required_argument, NULL, 'F' },
        { "backing-unsafe", no_argument, NULL, 'u' },
        { "quiet", no_argument, NULL, 'q' },
        { "object", required_argument, NULL, CLI_OPT_OBJECT },
        { NULL, 0, NULL, 0 },
    };
    char err[256];
    int c;

    memset(a, 0, sizeof(*a));
    a->fmt = "raw";
    optind = 1;
    while ((c = getopt_long(argc, argv, "hf:o:b:F:uq", long_opts, NULL)) != -1) {
        switch (c) {
        case 'h':
            cli_help(help_text);
            return -1;
        case 'f': a->fmt = optarg; break;
        case 'o':
            if (kvopts_parse(&a->o, optarg, err, sizeof(err)) < 0)
                return cli_usage_error("create", "-o %s: %s", optarg, err);
            break;
        case 'b': a->backing = optarg; break;
        case 'F': a->backing_fmt = optarg; break;
        case 'u': a->unsafe = true; break;
        case 'q': a->quiet = true; break;
        case CLI_OPT_OBJECT: {
            int r = cli_object(optarg);
            if (r)
                return r < 0 ? -1 : 1;
            break;
        }
        default:
            return cli_usage_error("create", "invalid option");
        }
    }
    if (optind < argc)
        a->img = argv[optind++];
    if (optind < argc)
        a->size_arg = argv[optind++];
    if (optind < argc)
        return cli_usage_error("create", "too many arguments");
    if (!a->img && !kvopts_wants_help(&a->o))
        return cli_usage_error("create", "expecting a filename");
    return 0;
}

static void print_help_options(const char *fmt)
{
    const struct bd_driver *drv = bd_find_driver(fmt);
    if (drv && drv->create_options_help)
        fputs(drv->create_options_help, stdout);
}

/* The backing file's path: relative to IMG's folder, as qemu does. */
static char *backing_path(const struct args *a)
{
    char *copy = strdup(a->img), *path = NULL;

    if (!copy)
        return NULL;
    if (a->backing[0] == '/')
        path = strdup(a->backing);
    else if (asprintf(&path, "%s/%s", dirname(copy), a->backing) < 0)
        path = NULL;
    free(copy);
    return path;
}

/* Replacing IMG by an image whose backing file is IMG would lose its data
 * (and make a loop): the same name, or the same file by another name. */
static bool backing_is_target(const struct args *a, const char *bpath)
{
    struct stat bs, is;

    if (stat(bpath, &bs) == 0 && stat(a->img, &is) == 0)
        return bs.st_dev == is.st_dev && bs.st_ino == is.st_ino;
    char *rb = realpath(bpath, NULL), *ri = realpath(a->img, NULL);
    bool same = strcmp(bpath, a->img) == 0 || (rb && ri && strcmp(rb, ri) == 0);
    free(rb);
    free(ri);
    return same;
}

/* The backing file's size. */
static int backing_size(const struct args *a, const char *path, uint64_t *size,
                        struct diag *d)
{
    struct bd_open_opts bo = { .format = a->backing_fmt, .allow_external = true };
    struct bd *b = NULL;
    int r;

    r = bd_open(&b, path, &bo, d);
    if (r == 0) {
        *size = b->size;
    } else {
        char why[sizeof(d->what)];
        snprintf(why, sizeof(why), "%s", d->what);
        diag_clear(d);
        diag_fail(d, r, a->img, -1, "Could not open backing image '%s': %s", a->backing, why);
    }
    bd_close(b);
    return r;
}

/* qemu-img's "Formatting ..." line; the driver says what follows fmt=. */
static void print_formatting(const struct args *a, const struct bd_driver *drv, uint64_t size)
{
    struct bd_create_opts co = { .size = size, .o = (struct kvopts *)&a->o,
                                 .backing_file = a->backing, .backing_fmt = a->backing_fmt };
    char line[1024];

    if (drv->describe_create)
        drv->describe_create(&co, line, sizeof(line));
    else
        snprintf(line, sizeof(line), " size=%llu", (unsigned long long)size);
    printf("Formatting '%s', fmt=%s%s\n", a->img, a->fmt, line);
}

static void print_warning(void *opaque, const char *file, int64_t offset, const char *msg)
{
    (void)opaque, (void)offset;
    cli_warn("%s%s%s", file ? file : "", file ? ": " : "", msg);
}

static void report(const struct args *a, const struct diag *d)
{
    cli_error("%s: %s", a->img, d->what);
}

int cmd_create(int argc, char **argv)
{
    struct args a;
    struct diag d;
    struct outfile of = { 0 };
    struct bd *out = NULL;
    bool have_of = false;
    uint64_t size = 0;
    bool have_size = false;
    char err[256];
    int r = parse_args(argc, argv, &a);

    if (r) {
        kvopts_free(&a.o);
        return r < 0 ? 0 : 1;
    }
    diag_init(&d);
    d.warn = print_warning;
    /* first: every thread started later inherits its signal mask */
    if (outfile_install_signal_cleanup(&d) < 0) {
        cli_report(&d);
        goto fail_args;
    }
    const struct bd_driver *drv = bd_find_driver(a.fmt);
    if (!drv || !drv->create) {
        cli_error("%s: unknown or read-only format '%s' (use raw, qcow2, vmdk, vpc, vhdx or vdi)",
                  a.img ? a.img : "", a.fmt);
        goto fail_args;
    }
    if (kvopts_wants_help(&a.o)) {
        print_help_options(a.fmt);
        kvopts_free(&a.o);
        return 0;
    }
    if (a.size_arg) {
        if (size_parse(a.size_arg, 1, &size) < 0 || size >= (UINT64_C(1) << 63)) {
            cli_error("Invalid image size specified. You may use k, M, G, T, P or E "
                      "suffixes for kilobytes, megabytes, gigabytes, terabytes, petabytes "
                      "and exabytes.");
            goto fail_args;
        }
        have_size = true;
    } else if ((r = kvopts_get_size(&a.o, "size", &size, err, sizeof(err))) != 0) {
        if (r < 0) {
            cli_error("%s: %s", a.img, err);
            goto fail_args;
        }
        have_size = true;
    }
    /* -o backing_file/backing_fmt count as -b/-F */
    const char *ob = kvopts_get(&a.o, "backing_file"), *of_ = kvopts_get(&a.o, "backing_fmt");
    if (!a.backing)
        a.backing = ob;
    if (!a.backing_fmt)
        a.backing_fmt = of_;
    if (a.backing && !(drv->caps & BD_CAP_BACKING)) {
        cli_error("%s: Backing file not supported for file format '%s'", a.img, a.fmt);
        goto fail_args;
    }
    if (a.backing && !a.backing_fmt) {
        cli_error("%s: Backing file specified without backing format (use -F)", a.img);
        goto fail_args;
    }
    if (a.backing_fmt && !a.backing) {
        cli_error("%s: Backing format cannot be used without backing file", a.img);
        goto fail_args;
    }
    if (a.backing) {
        char *bpath = backing_path(&a);
        if (!bpath) {
            cli_error("out of memory");
            goto fail_args;
        }
        bool same = backing_is_target(&a, bpath);
        free(bpath);
        if (same) {
            cli_error("%s: Error: Trying to create an image with the same filename as the "
                      "backing file", a.img);
            goto fail_args;
        }
    }
    if (a.backing && !a.unsafe) {
        uint64_t bsize = 0;
        char *bpath = backing_path(&a);
        if (!bpath) {
            cli_error("out of memory");
            goto fail_args;
        }
        r = backing_size(&a, bpath, &bsize, &d);
        free(bpath);
        if (r < 0) {
            report(&a, &d);
            goto fail_args;
        }
        if (!have_size) {
            size = bsize;
            have_size = true;
        }
    }
    if (!have_size) {
        cli_error("%s: Image creation needs a size parameter", a.img);
        goto fail_args;
    }
    if (!a.quiet)
        print_formatting(&a, drv, size);
    fflush(stdout);
    size += -size & 511;        /* whole sectors, as qemu-img */

    if ((r = outfile_open(&of, a.img, 0, &d)) < 0)
        goto fail;
    have_of = true;
    struct bd_create_opts co = {
        .size = size, .o = &a.o, .backing_file = a.backing, .backing_fmt = a.backing_fmt,
        .durable = true, .add_file = of.tmp ? outfile_add_file : NULL, .add_file_opaque = &of,
    };
    if ((r = drv->create(&out, of.f, &co, &d)) < 0)
        goto fail;
    of.f = NULL;    /* the driver owns the file now */
    const char *unused = kvopts_unused(&a.o);
    if (unused) {
        cli_error("%s: Invalid parameter '%s'", a.img, unused);
        goto fail_quiet;
    }
    if ((r = out->drv->finish(out)) < 0 || (r = outfile_commit(&of, true, &d)) < 0)
        goto fail;
    bd_close(out);
    kvopts_free(&a.o);
    return 0;

fail:
    report(&a, &d);
fail_quiet:
    if (out) {
        out->drv->abort(out);
        bd_close(out);
    }
    if (have_of)
        outfile_discard(&of);
fail_args:
    kvopts_free(&a.o);
    return 1;
}
