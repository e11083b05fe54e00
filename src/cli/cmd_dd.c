/* diskimg dd: qemu-img dd's operands and messages; the bytes dd_plan()
 * picks are copied by convert_run() from a bd_window of the input into a
 * new output image (holes stay holes), committed as convert's output. */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "commands.h"
#include "convert.h"
#include "dd.h"
#include "formats/bd.h"
#include "formats/bd_window.h"
#include "image_opts.h"
#include "io/bfile.h"
#include "io/ioq.h"
#include "object_opt.h"
#include "outfile.h"
#include "util/diag.h"
#include "util/kvopts.h"
#include "util/size.h"

static const char help_text[] =
    "Usage: diskimg dd [--object OBJ] [--image-opts] [-U] [-f FMT] [-O OUTPUT_FMT]\n"
    "                  [bs=BLOCK_SIZE] [count=BLOCKS] [skip=BLOCKS] if=INPUT of=OUTPUT\n"
    "Copy the guest content of INPUT, from block `skip` up to block `count`\n"
    "(both counted from INPUT's start, in blocks of bs bytes), into a new image\n"
    "OUTPUT, as qemu-img dd does.  The output's size is what was copied,\n"
    "rounded up to whole 512-byte sectors; a skip past the end gives an empty\n"
    "output (with a warning).  Zero runs stay holes; the output is written under\n"
    "a temporary name and renamed into place when complete.\n"
    "\n"
    "  -f, --format FMT   INPUT's format (raw, qcow2, vmdk, vpc, vdi, ova);\n"
    "                     default: probe\n"
    "  -O, --output-format FMT  OUTPUT's format (raw, qcow2, vmdk, vpc, vdi);\n"
    "                     default raw\n"
    "  -U, --force-share  accepted for compatibility (diskimg takes no locks)\n"
    "  --image-opts       INPUT is an option string naming a file:\n"
    "                     driver=FMT,file.filename=PATH (or driver=file,filename=PATH\n"
    "                     for its bytes as raw)\n"
    "  --object OBJ       checked as qemu-img checks it, then unused (diskimg reads\n"
    "                     no encrypted images)\n"
    "  bs=BLOCK_SIZE      block size, 1 to 2147483647 bytes (default 512)\n"
    "  count=BLOCKS       copy up to block BLOCKS (default: the whole input)\n"
    "  skip=BLOCKS        start at block BLOCKS\n"
    "  if=INPUT           the input image (a file; '-' is a file named -)\n"
    "  of=OUTPUT          the output image, created or replaced\n"
    "\n"
    "Numbers take the suffixes b, k, M, G, T, P, E (powers of 1024) and a\n"
    "fraction with a suffix (1.5k); 0x... is hexadecimal.\n"
    "Exit status: 0 success (also after a skip past the end), 1 error.\n";

enum { OPT_HELP = 256 };

static const struct option long_opts[] = {
    { "help", no_argument, NULL, OPT_HELP },
    { "format", required_argument, NULL, 'f' },
    { "output-format", required_argument, NULL, 'O' },
    { "force-share", no_argument, NULL, 'U' },
    { "image-opts", no_argument, NULL, CLI_OPT_IMAGE_OPTS },
    { "object", required_argument, NULL, CLI_OPT_OBJECT },
    { NULL, 0, NULL, 0 },
};

struct dd_args {
    const char *fmt, *out_fmt, *in, *out;
    bool image_opts;            /* if= is an option string */
    struct dd_params p;
};

/* The two lines qemu-img prints for a number it cannot read. */
static void bad_number(const char *name)
{
    cli_error("Invalid %s specified. You may use k, M, G, T, P or E suffixes for", name);
    cli_error("kilobytes, megabytes, gigabytes, terabytes, petabytes and exabytes.");
}

/* An operand's number: min..max, else qemu-img's message. */
static bool operand_number(const char *name, const char *s, uint64_t min, uint64_t max,
                           uint64_t *out)
{
    bool hex_suffix;
    int r = size_parse_qemu(s, out, &hex_suffix);

    if (hex_suffix)
        cli_warn("Using a multiplier suffix on hex numbers is deprecated: %s", s);
    if (r == -EINVAL) {
        bad_number(name);
        return false;
    }
    if (r < 0 || *out < min || *out > max) {
        cli_error("Invalid %s specified. Must be between %llu and %llu.", name,
                  (unsigned long long)min, (unsigned long long)max);
        return false;
    }
    return true;
}

/* NAME=VALUE operands, in order, the last of a name winning.  false: the
 * message is printed. */
static bool parse_operand(const char *arg, struct dd_args *a)
{
    const char *eq = strchr(arg, '=');
    size_t n = eq ? (size_t)(eq - arg) : 0;

    if (!eq) {
        cli_error("unrecognized operand %s", arg);
        return false;
    }
    const char *v = eq + 1;
    if (n == 2 && !strncmp(arg, "bs", 2))
        return operand_number("bs", v, 1, INT_MAX, &a->p.bs);
    if (n == 5 && !strncmp(arg, "count", 5))
        return a->p.has_count = operand_number("count", v, 0, INT64_MAX, &a->p.count);
    if (n == 4 && !strncmp(arg, "skip", 4))
        return a->p.has_skip = operand_number("skip", v, 0, INT64_MAX, &a->p.skip);
    if (n == 2 && !strncmp(arg, "if", 2)) {
        a->in = v;
        return true;
    }
    if (n == 2 && !strncmp(arg, "of", 2)) {
        a->out = v;
        return true;
    }
    cli_error("unrecognized operand %.*s", (int)n, arg);
    return false;
}

/* 0 ok, 1 error (printed), -1 --help printed */
static int parse_args(int argc, char **argv, struct dd_args *a)
{
    int c;

    memset(a, 0, sizeof(*a));
    a->out_fmt = "raw";
    a->p.bs = 512;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":hf:O:U", long_opts, NULL)) != -1) {
        switch (c) {
        case 'h':
        case OPT_HELP:
            cli_help(help_text);
            return -1;
        case 'f': a->fmt = optarg; break;
        case 'O': a->out_fmt = optarg; break;
        case 'U': break;
        case CLI_OPT_IMAGE_OPTS: a->image_opts = true; break;
        case CLI_OPT_OBJECT: {
            int r = cli_object(optarg);
            if (r)
                return r < 0 ? -1 : 1;
            break;
        }
        case ':':
            return cli_usage_error(NULL, "missing argument for option '%s'", argv[optind - 1]);
        default:
            return cli_usage_error(NULL, "unrecognized option '%s'", argv[optind - 1]);
        }
    }
    for (int i = optind; i < argc; i++)
        if (!parse_operand(argv[i], a))
            return 1;
    if (!a->in || !a->out) {
        cli_error("Must specify both input and output files");
        return 1;
    }
    return 0;
}

static unsigned online_cpus(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : n > 16 ? 16 : (unsigned)n;
}

/* qemu-img opens "-" as a file of that name, not standard input/output. */
static const char *as_file(const char *name)
{
    return strcmp(name, "-") == 0 ? "./-" : name;
}

int cmd_dd(int argc, char **argv)
{
    struct dd_args a;
    struct diag d;
    struct bd *in = NULL, *src = NULL, *out = NULL;
    struct ioq *ioq = NULL;
    struct outfile of = { 0 };
    struct kvopts no_opts = { 0 };
    struct dd_plan pl;
    struct convert_stats st;
    bool have_of = false;
    int r = parse_args(argc, argv, &a);

    if (r)
        return r < 0 ? 0 : 1;
    diag_init(&d);
    /* first: every thread started later inherits its signal mask */
    if (outfile_install_signal_cleanup(&d) < 0) {
        cli_report(&d);
        return 1;
    }

    struct cli_image im;
    if (cli_image_arg(&im, a.in, a.image_opts, a.fmt))
        return 1;
    struct bd_open_opts oo = { .format = im.format };
    r = bd_open(&in, a.image_opts ? im.path : as_file(a.in), &oo, &d);
    cli_image_free(&im);
    if (r < 0)
        goto fail;
    /* as qemu-img: the input's size must be known before the copy */
    if (in->file && in->file->kind == BFILE_STREAM) {
        cli_error("%s: the input must be a file or a block device, not a pipe", a.in);
        goto fail_quiet;
    }
    const struct bd_driver *odrv = bd_find_driver(a.out_fmt);
    if (!odrv) {
        cli_error("Unknown file format");
        goto fail_quiet;
    }
    if (!odrv->create) {
        cli_error("Format driver '%s' does not support image creation", odrv->name);
        goto fail_quiet;
    }

    dd_plan(&a.p, in->size, &pl);

    /* never write onto the input (its backing files and extents too) */
    uint64_t inputs_mark = bfile_open_mark();
    struct stat dst_st;
    if (stat(as_file(a.out), &dst_st) == 0 && bfile_is_open(&dst_st, inputs_mark)) {
        cli_error("%s: the output is also an input; refusing to overwrite it", a.out);
        goto fail_quiet;
    }
    if ((r = outfile_open(&of, as_file(a.out), 0, &d)) < 0)
        goto fail;
    have_of = true;
    if (of.f->kind == BFILE_STREAM && !(odrv->caps & BD_CAP_STREAM_OUT)) {
        cli_error("%s output to a pipe is not supported", odrv->name);
        goto fail_quiet;
    }
    bfile_set_writebehind(of.f, 32u << 20);
    if (of.f->kind != BFILE_STREAM) {
        struct ioq_opts qo = { 0 };
        if ((r = ioq_create(&ioq, &qo, &d)) < 0)
            goto fail;
    }
    struct bd_create_opts co = {
        .size = pl.out_size, .o = &no_opts, .durable = true, .ioq = ioq,
        .add_file = of.tmp ? outfile_add_file : NULL, .add_file_opaque = &of,
    };
    if ((r = odrv->create(&out, of.f, &co, &d)) < 0)
        goto fail;
    of.f = NULL;                /* the driver owns the file now */
    if ((r = outfile_check_inputs(&of, inputs_mark, &d)) < 0)
        goto fail;
    if (pl.skip_past_end)
        cli_error("%s: cannot skip to specified offset", a.in);

    /* the copy covers the whole output: a format that rounds the size up
     * (vpc's geometry) gets zeros there, written as whole blocks */
    uint64_t win_size = out->size > pl.out_size ? out->size : pl.out_size;
    r = bd_window_open(&src, in, pl.start, pl.data_len, win_size, &d);
    in = NULL;                  /* the window owns it (or closed it) */
    if (r < 0)
        goto fail;

    struct convert_opts copts = {
        .src = &src, .nsrc = 1, .out = out, .sparse_size = 4096,
        .threads = online_cpus(), .inflight = 16,
        .compress = (out->drv->caps & BD_CAP_ALL_COMPRESSED) != 0, .ioq = ioq,
        .offload = CONVERT_OFFLOAD_AUTO,
    };
    r = convert_run(&copts, &d, &st);
    /* an output that plans in a first pass (qcow2 to a pipe) sees it all again */
    while (r == 0 && out->drv->next_pass && (r = out->drv->next_pass(out)) > 0)
        r = convert_run(&copts, &d, &st);
    if (r == 0)
        r = out->drv->finish(out);
    if (r == 0)
        r = outfile_commit(&of, true, &d);
    if (r < 0)
        goto fail;
    bd_close(out);
    ioq_destroy(ioq);
    bd_close(src);
    return 0;

fail:
    cli_report(&d);
fail_quiet:
    if (out) {
        out->drv->abort(out);
        bd_close(out);
    }
    ioq_destroy(ioq);
    if (have_of)
        outfile_discard(&of);
    bd_close(src);
    bd_close(in);
    return 1;
}
