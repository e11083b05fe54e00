/* diskimg amend: change a qcow2 image's format options in place
 * (qemu-img amend's options, messages and exit status).
 *
 * The -o list is read as qemu-img reads it (unknown keys, creation-only
 * keys and values of the wrong type refused in the order given); the
 * driver checks everything against the image before it writes anything
 * (bd_driver.amend with check_only), then makes the changes; a size goes
 * through bd_driver.resize, before a downgrade and after anything else,
 * as qemu-img orders them.  Every step is crash-safe on its own. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "commands.h"
#include "formats/bd.h"
#include "image_opts.h"
#include "io/bfile.h"
#include "object_opt.h"
#include "progress.h"
#include "util/diag.h"
#include "util/kvopts.h"
#include "util/size.h"

static const char help_text[] =
    "Usage: diskimg amend [--object OBJ] [--image-opts] [-p] [-q] [-f FMT] [-t CACHE]\n"
    "                     [--force] -o OPTIONS IMG\n"
    "Change the format options of a qcow2 image in place (as qemu-img amend).\n"
    "\n"
    "  -o, --options OPTIONS\n"
    "                      comma-separated key=value list (-o help lists them):\n"
    "                      compat=0.10|1.1 (v2|v3), refcount_bits=1..64,\n"
    "                      lazy_refcounts=on|off, data_file=NAME, data_file_raw=off,\n"
    "                      size=SIZE; backing_file, backing_fmt only as they are\n"
    "                      (use 'diskimg rebase' to change them)\n"
    "  -f, --format FMT    image format (default: probe)\n"
    "  -p, --progress      show progress\n"
    "  -q, --quiet         quiet\n"
    "  -t, --cache CACHE   cache mode (none, writeback, writethrough, directsync,\n"
    "                      unsafe): checked, then unused (every change is synced)\n"
    "  --force             accepted for compatibility (encryption only)\n"
    "  --object OBJ        checked as qemu-img checks it, then unused (diskimg\n"
    "                      reads no encrypted images)\n"
    "  --image-opts        IMG is an option string: driver=FMT,file.filename=PATH\n"
    "  --allow-external    a new data file name may leave the image's folder\n"
    "\n"
    "Everything asked is checked before anything is written.  Each change is\n"
    "crash-safe: new refcount structures and tables are written and synced past\n"
    "the end of the file before one header write switches to them.  Dirty or\n"
    "corrupt images are refused (repair them with 'diskimg check -r all').\n"
    "\n"
    "Exit status: 0 success, 1 error.\n";

/* qemu-img's list of qcow2 amend options */
static const char options_help[] =
    "Amend options for 'qcow2':\n"
    "  backing_file=<str>     - File name of a base image\n"
    "  backing_fmt=<str>      - Image format of the base image\n"
    "  compat=<str>           - Compatibility level (v2 [0.10] or v3 [1.1])\n"
    "  data_file=<str>        - File name of an external data file\n"
    "  data_file_raw=<bool (on/off)> - The external data file must stay valid as a raw "
    "image\n"
    "  encrypt.iter-time=<num> - Time to spend in PBKDF in milliseconds\n"
    "  encrypt.keyslot=<num>  - Select a single keyslot to modify explicitly\n"
    "  encrypt.new-secret=<str> - New secret to set in the matching keyslots. Empty string "
    "to erase\n"
    "  encrypt.old-secret=<str> - Select all keyslots that match this password\n"
    "  encrypt.state=<str>    - Select new state of affected keyslots (active/inactive)\n"
    "  lazy_refcounts=<bool (on/off)> - Postpone refcount updates\n"
    "  refcount_bits=<num>    - Width of a reference count entry in bits\n"
    "  size=<size>            - Virtual disk size\n";

enum kind { K_STR, K_NUM, K_BOOL, K_SIZE };

static const struct { const char *key; enum kind kind; } amend_keys[] = {
    { "encrypt.state", K_STR }, { "encrypt.keyslot", K_NUM },
    { "encrypt.old-secret", K_STR }, { "encrypt.new-secret", K_STR },
    { "encrypt.iter-time", K_NUM }, { "size", K_SIZE }, { "compat", K_STR },
    { "backing_file", K_STR }, { "backing_fmt", K_STR }, { "data_file", K_STR },
    { "data_file_raw", K_BOOL }, { "lazy_refcounts", K_BOOL }, { "refcount_bits", K_NUM },
};

/* qcow2 options qemu-img takes at creation only */
static const char *const create_only[] = {
    "encryption", "encrypt.format", "encrypt.key-secret", "encrypt.cipher-alg",
    "encrypt.cipher-mode", "encrypt.ivgen-alg", "encrypt.ivgen-hash-alg", "encrypt.hash-alg",
    "cluster_size", "extended_l2", "preallocation", "compression_type",
};

enum { OPT_FORCE = 256, OPT_ALLOW_EXTERNAL, OPT_HELP };

static const struct option long_opts[] = {
    { "help", no_argument, NULL, OPT_HELP },
    { "object", required_argument, NULL, CLI_OPT_OBJECT },
    { "image-opts", no_argument, NULL, CLI_OPT_IMAGE_OPTS },
    { "force", no_argument, NULL, OPT_FORCE },
    { "allow-external", no_argument, NULL, OPT_ALLOW_EXTERNAL },
    /* qemu-img 10's long names of the short options */
    { "options", required_argument, NULL, 'o' },
    { "format", required_argument, NULL, 'f' },
    { "cache", required_argument, NULL, 't' },
    { "progress", no_argument, NULL, 'p' },
    { "quiet", no_argument, NULL, 'q' },
    { NULL, 0, NULL, 0 },
};

static bool parse_bool(const char *s, bool *v)
{
    static const char *const on[] = { "on", "yes", "true", "y" };
    static const char *const off[] = { "off", "no", "false", "n" };
    for (size_t i = 0; i < 4; i++) {
        if (!strcmp(s, on[i]))
            return *v = true;
        if (!strcmp(s, off[i])) {
            *v = false;
            return true;
        }
    }
    return false;
}

/* A number as qemu reads one (base 0, a sign allowed): 0, -EINVAL, -ERANGE. */
static int parse_num(const char *s, uint64_t *v)
{
    char *end;
    errno = 0;
    unsigned long long n = strtoull(s, &end, 0);
    if (end == s || *end)
        return -EINVAL;
    if (errno == ERANGE)
        return -ERANGE;
    *v = n;
    return 0;
}

static bool parse_size(const char *s, uint64_t *v)
{
    if (!strncmp(s, "0x", 2) || !strncmp(s, "0X", 2))
        return parse_num(s, v) == 0;
    return size_parse(s, 1, v) == 0;
}

static bool wants_help(const struct kvopts *o)
{
    for (size_t i = 0; i < o->n; i++)
        if (!strcmp(o->v[i].key, "help") || !strcmp(o->v[i].key, "?"))
            return true;
    return false;
}

/* Every key known and of its type, in the order given; then `a`. */
static int read_options(struct kvopts *o, struct bd_amend *a)
{
    for (size_t i = 0; i < o->n; i++) {
        const char *k = o->v[i].key, *v = o->v[i].val ? o->v[i].val : "on";
        size_t j;
        for (j = 0; j < sizeof(amend_keys) / sizeof(amend_keys[0]); j++)
            if (!strcmp(k, amend_keys[j].key))
                break;
        if (j == sizeof(amend_keys) / sizeof(amend_keys[0])) {
            cli_error("Invalid parameter '%s'", k);
            for (j = 0; j < sizeof(create_only) / sizeof(create_only[0]); j++)
                if (!strcmp(k, create_only[j]))
                    fputs("This option is only supported for image creation\n", stderr);
            return -1;
        }
        uint64_t n;
        bool b;
        int r;
        switch (amend_keys[j].kind) {
        case K_STR:
            break;
        case K_BOOL:
            if (!parse_bool(v, &b)) {
                cli_error("Parameter '%s' expects 'on' or 'off'", k);
                return -1;
            }
            break;
        case K_NUM:
            if ((r = parse_num(v, &n)) == -ERANGE) {
                cli_error("Value '%s' is too large for parameter '%s'", v, k);
                return -1;
            } else if (r < 0) {
                cli_error("Parameter '%s' expects a number", k);
                return -1;
            }
            break;
        case K_SIZE:
            if (!parse_size(v, &n)) {
                cli_error("Parameter '%s' expects a non-negative number below 2^64\n"
                          "Optional suffix k, M, G, T, P or E means kilo-, mega-, giga-, "
                          "tera-, peta-\nand exabytes, respectively.", k);
                return -1;
            }
            break;
        }
        if (!strncmp(k, "encrypt.", 8))
            a->encrypt = true;
    }
    const char *v;
    uint64_t n;
    bool b;
    if ((v = kvopts_get(o, "size")))
        parse_size(v, &a->size);
    a->compat = kvopts_get(o, "compat");
    a->backing_file = kvopts_get(o, "backing_file");
    a->backing_fmt = kvopts_get(o, "backing_fmt");
    a->data_file = kvopts_get(o, "data_file");
    a->lazy_refcounts = a->data_file_raw = -1;
    if ((v = kvopts_get(o, "data_file_raw")))
        a->data_file_raw = parse_bool(v, &b) && b;
    if ((v = kvopts_get(o, "lazy_refcounts")))
        a->lazy_refcounts = parse_bool(v, &b) && b;
    if ((v = kvopts_get(o, "refcount_bits")) && parse_num(v, &n) == 0)
    {
        /* qemu-img keeps it in an int: "-16" is -16, and refused (so is 0) */
        int32_t t = (int32_t)(uint32_t)n;
        a->refcount_bits = t ? t : -1;
    }
    return 0;
}

static int resize(const char *filename, const struct bd_open_opts *base, uint64_t size,
                  struct diag *d)
{
    struct bd_open_opts oo = *base;
    struct bd *bd = NULL;
    int r;

    oo.writable = true;
    if ((r = bd_open(&bd, filename, &oo, d)) < 0)
        return r;
    if (!bd->drv->resize)
        r = diag_fail(d, -ENOTSUP, filename, -1, "this image format (%s) does not support "
                      "resize", bd->drv->name);
    else if ((r = bd->drv->resize(bd, size, true)) == 0)
        r = bfile_sync(bd->file);
    bd_close(bd);
    return r;
}

static int amend(const char *filename, const struct bd_open_opts *base, struct bd_amend *a,
                 bool *resize_first, struct diag *d)
{
    struct bd_open_opts oo = *base;
    struct bd *bd = NULL;
    int r;

    oo.writable = true;
    oo.no_backing = true;
    if ((r = bd_open(&bd, filename, &oo, d)) < 0)
        return r;
    r = bd->drv->amend(bd, a, resize_first);
    bd_close(bd);
    return r;
}

int cmd_amend(int argc, char **argv)
{
    struct bd_open_opts oo = { 0 };
    struct kvopts o = { 0 };
    struct cli_image im = { 0 };
    const char *cache = NULL;
    bool quiet = false, progress = false, iopts = false, have_o = false;
    struct bd *bd = NULL;
    struct diag d;
    char err[256];
    int c, r, rc = 1;

    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h"))
            return cli_help(help_text);
    optind = 1;
    while ((c = getopt_long(argc, argv, "o:f:t:pq", long_opts, NULL)) != -1) {
        switch (c) {
        case 'o':
            have_o = true;
            if (!*optarg || kvopts_parse(&o, optarg, err, sizeof(err)) < 0) {
                cli_error("Invalid option list: %s", optarg);
                goto out;
            }
            break;
        case 'f': oo.format = optarg; break;
        case 't': cache = optarg; break;
        case 'p': progress = true; break;
        case 'q': quiet = true; break;
        case OPT_FORCE: break;
        case CLI_OPT_OBJECT:
            if ((r = cli_object(optarg)) != 0) {
                rc = r < 0 ? 0 : 1;
                goto out;
            }
            break;
        case CLI_OPT_IMAGE_OPTS: iopts = true; break;
        case OPT_ALLOW_EXTERNAL: oo.allow_external = true; break;
        default:
            kvopts_free(&o);
            return cli_usage_error("amend", "invalid option");
        }
    }
    if (!have_o) {
        kvopts_free(&o);
        return cli_usage_error("amend", "Must specify options (-o)");
    }
    if (quiet)
        progress = false;
    if (cache && !cli_cache_mode(cache, false))
        goto out;
    if (optind == argc && wants_help(&o) && oo.format) {
        const struct bd_driver *drv = bd_find_driver(oo.format);
        if (drv && drv->amend) {
            fputs(options_help, stdout);
            rc = 0;
        } else if (drv) {
            cli_error("Format driver '%s' does not support option amendment", drv->name);
        } else {
            cli_error("Unknown file format '%s'", oo.format);
        }
        goto out;
    }
    if (optind != argc - 1) {
        cli_error("Expecting one image file name");
        goto out;
    }
    if (cli_image_arg(&im, argv[optind], iopts, oo.format))
        goto out;
    const char *filename = im.path;
    oo.format = im.format;

    diag_init(&d);
    oo.no_backing = true;
    if (bd_open(&bd, filename, &oo, &d) < 0) {
        cli_report(&d);
        goto out;
    }
    if (!bd->drv->amend) {
        cli_error("Format driver '%s' does not support option amendment", bd->drv->name);
        goto out;
    }
    if (wants_help(&o)) {
        fputs(options_help, stdout);
        rc = 0;
        goto out;
    }
    struct bd_amend a = { 0 };
    if (read_options(&o, &a) < 0)
        goto out;
    /* a new data file name obeys the folder rule, as rebase -u's backing file */
    if (a.data_file && *a.data_file && cli_check_ref(bd, a.data_file, &d) < 0) {
        cli_report(&d);
        goto out;
    }
    bd_close(bd);
    bd = NULL;
    oo.no_backing = false;

    struct progress prog;
    bool resize_first = false;
    progress_init(&prog, progress ? PROGRESS_BAR : PROGRESS_NONE, stderr);
    progress_update(&prog, 0, 2);
    /* with a size, everything is checked before the first of the steps */
    a.check_only = true;
    r = a.size ? amend(filename, &oo, &a, &resize_first, &d) : 0;
    a.check_only = false;
    if (r == 0 && a.size && resize_first)
        r = resize(filename, &oo, a.size, &d);
    if (r == 0)
        r = amend(filename, &oo, &a, &resize_first, &d);
    progress_update(&prog, 1, 2);
    if (r == 0 && a.size && !resize_first)
        r = resize(filename, &oo, a.size, &d);
    if (r == 0)
        progress_update(&prog, 2, 2);
    progress_finish(&prog, r == 0);
    if (r < 0) {
        cli_report(&d);
        goto out;
    }
    rc = 0;
out:
    bd_close(bd);
    kvopts_free(&o);
    cli_image_free(&im);
    return rc;
}
