/* diskimg rebase: give an image another backing file (qemu-img rebase's
 * options, messages and exit status), qcow2 and VMDK images (which
 * qemu-img 7.2 refuses).  Safe mode first writes into the
 * image what the old chain and the new backing file show differently
 * (rebase_copy), then changes the header; -u changes the header only. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "commands.h"
#include "formats/bd.h"
#include "image_opts.h"
#include "io/bfile.h"
#include "object_opt.h"
#include "progress.h"
#include "rebase.h"
#include "util/diag.h"
#include "util/jval.h"

static const char help_text[] =
    "Usage: diskimg rebase [--object OBJ] [--image-opts] [-U] [-q] [-f FMT] [-t CACHE]\n"
    "                      [-T CACHE] [-p] [-u] [-c] -b BACKING [-F BACKING_FMT] IMG\n"
    "Make BACKING the backing file of IMG (qcow2, vmdk).  Safe mode (the default):\n"
    "every range IMG does not allocate where its old backing chain and BACKING\n"
    "differ is first written into IMG, so that its content stays the same; then\n"
    "the header names BACKING.  -b \"\" makes IMG standalone (everything it reads\n"
    "from its backing chain is copied in).\n"
    "\n"
    "  -b, --backing BACKING  the new backing file (relative to IMG's folder), or \"\"\n"
    "  -F, --backing-format FMT  its format (raw, qcow2, vmdk; a vmdk's parent is\n"
    "                      vmdk); required with a backing file\n"
    "  -f, --format FMT    IMG's format (default: probe)\n"
    "  -u, --backing-unsafe  unsafe: change the header only (BACKING need not exist)\n"
    "  -c, --compress      write the copied clusters compressed (where that shrinks\n"
    "                      them; as qemu-img 8.2's rebase -c; qcow2 only)\n"
    "  -p, --progress      show progress\n"
    "  -q, --quiet         quiet\n"
    "  -t, --cache CACHE, -T, --backing-cache CACHE\n"
    "                      cache modes of IMG and of the backing files (none,\n"
    "                      writeback, writethrough, directsync, unsafe): checked,\n"
    "                      then unused (IMG is always synced)\n"
    "  -U, --force-share   accepted for compatibility\n"
    "  --image-opts        IMG is an option string: driver=FMT,file.filename=PATH\n"
    "  --object OBJ        checked as qemu-img checks it, then unused (diskimg\n"
    "                      reads no encrypted images)\n"
    "  --allow-external    BACKING and the old chain may be outside IMG's folder\n"
    "\n"
    "The new backing file obeys the reference rule: inside IMG's folder unless\n"
    "--allow-external.  The header is changed in one write; a safe rebase that\n"
    "stops midway leaves IMG with its old backing file and its content unchanged.\n"
    "VMDK: the descriptor's parentFileNameHint and parentCID (BACKING's CID: it\n"
    "must exist, also with -u) change, nothing else; a descriptor file is replaced\n"
    "through a temporary file, an embedded one rewritten in one write, after the\n"
    "grains of a safe rebase (monolithicSparse, twoGbMaxExtentSparse,\n"
    "monolithicFlat; not streamOptimized).\n"
    "\n"
    "Exit status: 0 success, 1 error.\n";

enum { OPT_ALLOW_EXTERNAL = 256, OPT_HELP };

static const struct option long_opts[] = {
    { "help", no_argument, NULL, OPT_HELP },
    { "allow-external", no_argument, NULL, OPT_ALLOW_EXTERNAL },
    /* qemu-img 10's long names of the short options */
    { "format", required_argument, NULL, 'f' },
    { "backing", required_argument, NULL, 'b' },
    { "backing-format", required_argument, NULL, 'F' },
    { "backing-unsafe", no_argument, NULL, 'u' },
    { "compress", no_argument, NULL, 'c' },
    { "progress", no_argument, NULL, 'p' },
    { "quiet", no_argument, NULL, 'q' },
    { "cache", required_argument, NULL, 't' },
    { "backing-cache", required_argument, NULL, 'T' },
    { "force-share", no_argument, NULL, 'U' },
    { "object", required_argument, NULL, CLI_OPT_OBJECT },
    { "image-opts", no_argument, NULL, CLI_OPT_IMAGE_OPTS },
    { NULL, 0, NULL, 0 },
};

static int set_header(const char *filename, const struct bd_open_opts *base, const char *name,
                      const char *fmt, bool unsafe, struct diag *d)
{
    struct bd_open_opts oo = *base;
    struct bd *bd = NULL;
    int r;

    oo.writable = true;
    oo.no_backing = true;
    if ((r = bd_open(&bd, filename, &oo, d)) < 0)
        return r;
    if (!bd->drv->set_backing)
        r = diag_fail(d, -ENOTSUP, filename, -1, "Could not change the backing file to "
                      "'%s': Operation not supported (%s images)", name, bd->drv->name);
    else if ((!unsafe || !*name || (r = cli_check_ref(bd, name, d)) == 0))
        r = bd->drv->set_backing(bd, *name ? name : NULL, *name ? fmt : NULL);
    bd_close(bd);
    return r;
}

static int safe_copy(const char *filename, const struct bd_open_opts *base, const char *name,
                     const char *fmt, enum progress_mode pmode, bool compress, struct diag *d)
{
    struct bd_open_opts oo = *base;
    struct bd *img = NULL, *nb = NULL, *out = NULL;
    struct bfile *f = NULL;
    struct progress prog;
    uint64_t written;
    int r;

    if ((r = bd_open(&img, filename, &oo, d)) < 0)
        return r;
    struct jval *info = jv_object();
    const struct jval *sn;
    if (info && img->drv->info && img->drv->info(img, info) == 0 &&
        (sn = jv_get(info, "snapshots")) && sn->n)
        cli_warn("%s has internal snapshots: they read what they do not hold from the "
                 "backing file too, and only the current content is kept as it was",
                 filename);
    jv_free(info);
    /* (a driver that can name another backing file can write the ranges
     * its image leaves to it: create() with fill_unallocated) */
    if (!img->drv->create || !img->drv->set_backing) {
        r = diag_fail(d, -ENOTSUP, filename, -1, "Could not change the backing file to "
                      "'%s': Operation not supported (%s images)", name, img->drv->name);
        goto out;
    }
    /* what the header change would refuse, refused before anything is copied */
    if (img->drv->check_backing &&
        (r = img->drv->check_backing(img, *name ? name : NULL, *name ? fmt : NULL)) < 0)
        goto out;
    if (*name && (r = bd_open_ref(img, name, fmt, &nb)) < 0) {
        cli_report(d);
        cli_error("Could not open new backing file '%s'", name);
        diag_clear(d);
        r = 1;
        goto out;
    }
    if ((r = bfile_open(&f, filename, BFILE_O_RDWR, d)) < 0)
        goto out;
    struct bd_create_opts co = { .size = img->size, .durable = true, .existing = true,
                                 .fill_unallocated = true,
                                 .compress = compress, .allow_external = oo.allow_external };
    if ((r = img->drv->create(&out, f, &co, d)) < 0)
        goto out;
    f = NULL;
    progress_init(&prog, pmode, stderr);
    struct rebase_opts ro = { .img = img, .new_backing = nb, .out = out, .compress = compress,
                              .progress = progress_update, .progress_opaque = &prog };
    r = rebase_copy(&ro, d, &written);
    if (r == 0)
        r = out->drv->finish(out);
    else
        out->drv->abort(out);
    progress_finish(&prog, r == 0);
out:
    if (out)
        out->drv->close(out);
    if (f)
        bfile_close(f);
    bd_close(nb);
    bd_close(img);
    return r;
}

int cmd_rebase(int argc, char **argv)
{
    struct bd_open_opts oo = { 0 };
    const char *backing = NULL, *fmt = NULL;
    bool unsafe = false, quiet = false, progress = false, compress = false, iopts = false;
    const char *cache = NULL, *src_cache = NULL;
    struct diag d;
    int c, r;

    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h"))
            return cli_help(help_text);
    optind = 1;
    while ((c = getopt_long(argc, argv, "b:F:f:upcqt:T:U", long_opts, NULL)) != -1) {
        switch (c) {
        case 'b': backing = optarg; break;
        case 'F': fmt = optarg; break;
        case 'f': oo.format = optarg; break;
        case 'u': unsafe = true; break;
        case 'p': progress = true; break;
        case 'c': compress = true; break;
        case 'q': quiet = true; break;
        case 't': cache = optarg; break;
        case 'T': src_cache = optarg; break;
        case 'U': break;
        case OPT_ALLOW_EXTERNAL: oo.allow_external = true; break;
        case CLI_OPT_OBJECT:
            if ((r = cli_object(optarg)) != 0)
                return r < 0 ? 0 : 1;
            break;
        case CLI_OPT_IMAGE_OPTS: iopts = true; break;
        default:
            return cli_usage_error("rebase", "invalid option");
        }
    }
    if ((cache && !cli_cache_mode(cache, false)) ||
        (src_cache && !cli_cache_mode(src_cache, true)))
        return 1;
    if (optind != argc - 1)
        return cli_usage_error("rebase", "Expecting one image file name");
    if (!backing)
        return cli_usage_error("rebase", "Must specify backing file (-b) or use unsafe mode "
                               "(-u)");
    /* --image-opts: the file and format its string names (freed on return) */
    struct cli_image im __attribute__((cleanup(cli_image_free))) = { 0 };
    if (cli_image_arg(&im, argv[optind], iopts, oo.format))
        return 1;
    oo.format = im.format;
    const char *filename = im.path;
    if (*backing && !fmt) {
        cli_error("Could not change the backing file to '%s': backing format must be "
                  "specified", backing);
        return 1;
    }
    if (fmt && !bd_find_driver(fmt)) {
        cli_error("Unknown file format '%s'", fmt);
        return 1;
    }
    diag_init(&d);
    if (!unsafe) {
        r = safe_copy(filename, &oo, backing, fmt,
                      progress && !quiet ? PROGRESS_BAR : PROGRESS_NONE, compress, &d);
        if (r == 1)
            return 1;
        if (r < 0) {
            cli_report(&d);
            return 1;
        }
    }
    if ((r = set_header(filename, &oo, backing, fmt, unsafe, &d)) < 0) {
        cli_report(&d);
        return 1;
    }
    return 0;
}
