/* diskimg convert: options as qemu-img convert, then the pipeline in
 * convert.c, then commit (finish + rename) or abort (temporary file gone). */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "commands.h"
#include "convert.h"
#include "formats/bd.h"
#include "formats/registry.h"
#include "image_opts.h"
#include "io/bfile.h"
#include "io/ioq.h"
#include "object_opt.h"
#include "outfile.h"
#include "progress.h"
#include "util/diag.h"
#include "util/kvopts.h"
#include "util/size.h"
#include "zerodetect/zerodetect.h"

static const char help_text[] =
    "Usage: diskimg convert [OPTIONS] SRC [SRC2 ...] DST\n"
    "Copy the guest content of SRC into a new image DST.  Several sources follow\n"
    "one another, each starting on a 512-byte boundary (as in qemu-img).\n"
    "Zero ranges are never read when the source's metadata knows them, and zero\n"
    "runs found in the data stay holes (raw) or unallocated clusters (qcow2).\n"
    "The output is written under a temporary name and renamed into place only\n"
    "when complete; a failed or interrupted run leaves nothing at DST.  A DST\n"
    "that is replaced hands its owner, mode, ACL and xattrs on to the new file.\n"
    "DST '-' writes to standard output: raw, or qcow2 (the source, which must be\n"
    "a file, is then read twice: once to plan the layout, once to write it).\n"
    "\n"
    "  -f, --source-format FMT  source format (raw, qcow2, vmdk, vpc, vhdx, vdi, ova)\n"
    "                    default: probe\n"
    "  -O, --target-format FMT  output format (raw, qcow2, vmdk, vpc, vhdx, vdi)\n"
    "                    default raw\n"
    "  -o, --target-format-options OPTS\n"
    "                    output options, e.g. cluster_size=64K,compression_type=zstd\n"
    "                    (-o help lists them)\n"
    "  -c, --compress    compress the output (qcow2; vmdk streamOptimized is always\n"
    "                    compressed)\n"
    "  -S, --sparse-size SIZE  shortest zero run left sparse, a multiple of 512 up\n"
    "                    to 16M (default 4K); 0 writes everything (fully allocated)\n"
    "  -n, --no-create   write into the existing DST instead of creating it (raw:\n"
    "                    zero runs punched so no stale data survives; qcow2, vpc,\n"
    "                    vdi (-O FMT): the image keeps its options, subformat, size\n"
    "                    and backing file or parent)\n"
    "  --target-is-zero  with -n: DST already reads as zeros, skip clearing\n"
    "  -B, --backing BACKING  the output gets this backing file; only what differs\n"
    "                    from it is written\n"
    "  -F, --backing-format FMT  format of BACKING\n"
    "  -l, --snapshot SNAPSHOT  read an internal snapshot of SRC (NAME,\n"
    "                    snapshot.id=ID, snapshot.name=NAME)\n"
    "  -t, --target-cache CACHE\n"
    "                    output cache mode: writeback (default: data is fsynced\n"
    "                    before the rename), unsafe (no fsync, like qemu-img's\n"
    "                    default), none (O_DIRECT), writethrough, directsync\n"
    "                    (off is none)\n"
    "  -T, --source-cache CACHE  source cache mode, the same names: checked, then\n"
    "                    unused\n"
    "  -m, --parallel N  chunks of 1 MiB (4 MiB when copy offload writes raw) read\n"
    "                    ahead in parallel (1..64, default 8; 32 MiB at most)\n"
    "  -W, --oob-writes  write chunks as they become ready (out of order)\n"
    "  --copy-offload=auto|off|required\n"
    "                    data stored plainly in a file on the output's file system\n"
    "                    is shared (reflink: XFS, btrfs) or copied by the kernel\n"
    "                    (copy_file_range: NFS 4.2 server-side, ext4) instead of\n"
    "                    read and written; zero runs still become holes (auto,\n"
    "                    the default: where it works; required: fail when no data\n"
    "                    could be offloaded; never with -c or -B, nor for pipes)\n"
    "  -C, --copy-range-offloading  --copy-offload=required (qemu-img's -C)\n"
    "  -p, --progress    show progress on the terminal\n"
    "  --progress=json   progress as JSON lines on stderr: {\"done\",\"total\",\"elapsed\"}\n"
    "  -q, --quiet       quiet\n"
    "  -U, --force-share accepted for compatibility (diskimg takes no locks)\n"
    "  --image-opts      each SRC is an option string: driver=FMT,file.filename=PATH\n"
    "                    (or driver=file,filename=PATH for the file as raw)\n"
    "  --target-image-opts  with -n: DST is such a string (its driver is the\n"
    "                    output format; without one, DST's format is probed)\n"
    "  --object OBJ      checked as qemu-img checks it, then unused (diskimg reads\n"
    "                    no encrypted images)\n"
    "  --disk N          OVA source: convert its Nth disk (0 = first)\n"
    "  --allow-external  follow backing/extent/data files outside the image's folder\n"
    "  --ignore-parent-cid  vmdk: accept a parent whose CID does not match; vpc: a\n"
    "                    parent whose unique id is not the one recorded\n"
    "  --salvage         read errors become zeros with a warning per range\n"
    "                    (and a summary); the conversion goes on; a VHDX log\n"
    "                    that does not replay is left out, with a warning\n"
    "  --bitmaps         copy every persistent dirty bitmap of the source (qcow2)\n"
    "                    to the output (qcow2), with its granularity, enabled flag\n"
    "                    and content; a bitmap marked in use is refused\n"
    "  --skip-broken-bitmaps  with --bitmaps: skip bitmaps marked in use, with a\n"
    "                    warning\n"
    "  -v, --verbose     report what ran (I/O backend, threads, zero detection,\n"
    "                    bytes shared, offloaded and copied)\n"
    "\n"
    "Exit status: 0 success, 1 error.\n";

enum { OPT_TARGET_IS_ZERO = 256, OPT_PROGRESS, OPT_ALLOW_EXTERNAL, OPT_DISK,
       OPT_IGNORE_CID, OPT_SALVAGE, OPT_COPY_OFFLOAD, OPT_BITMAPS, OPT_SKIP_BROKEN,
       OPT_HELP };

static const struct option long_opts[] = {
    { "help", no_argument, NULL, OPT_HELP },
    { "target-is-zero", no_argument, NULL, OPT_TARGET_IS_ZERO },
    { "progress", optional_argument, NULL, OPT_PROGRESS },
    { "allow-external", no_argument, NULL, OPT_ALLOW_EXTERNAL },
    { "disk", required_argument, NULL, OPT_DISK },
    { "ignore-parent-cid", no_argument, NULL, OPT_IGNORE_CID },
    { "salvage", no_argument, NULL, OPT_SALVAGE },
    { "copy-offload", required_argument, NULL, OPT_COPY_OFFLOAD },
    { "bitmaps", no_argument, NULL, OPT_BITMAPS },
    { "skip-broken-bitmaps", no_argument, NULL, OPT_SKIP_BROKEN },
    { "verbose", no_argument, NULL, 'v' },
    { "quiet", no_argument, NULL, 'q' },
    /* qemu-img 10's long names of the short options */
    { "source-format", required_argument, NULL, 'f' },
    { "target-format", required_argument, NULL, 'O' },
    { "target-format-options", required_argument, NULL, 'o' },
    { "compress", no_argument, NULL, 'c' },
    { "copy-range-offloading", no_argument, NULL, 'C' },
    { "sparse-size", required_argument, NULL, 'S' },
    { "no-create", no_argument, NULL, 'n' },
    { "backing", required_argument, NULL, 'B' },
    { "backing-format", required_argument, NULL, 'F' },
    { "snapshot", required_argument, NULL, 'l' },
    { "target-cache", required_argument, NULL, 't' },
    { "source-cache", required_argument, NULL, 'T' },
    { "parallel", required_argument, NULL, 'm' },
    { "oob-writes", no_argument, NULL, 'W' },
    { "force-share", no_argument, NULL, 'U' },
    { "object", required_argument, NULL, CLI_OPT_OBJECT },
    { "image-opts", no_argument, NULL, CLI_OPT_IMAGE_OPTS },
    { "target-image-opts", no_argument, NULL, CLI_OPT_TARGET_IMAGE_OPTS },
    { NULL, 0, NULL, 0 },
};

struct args {
    const char *src_fmt, *out_fmt, *backing, *backing_fmt, *snapshot;
    const char *cache, *src_cache;
    struct kvopts o;
    uint64_t sparse;
    unsigned m;
    unsigned disk;
    bool out_fmt_given;         /* -O was passed (not the default raw) */
    bool compress, no_create, target_is_zero, out_of_order, quiet, verbose;
    bool allow_external, ignore_cid, salvage;
    bool bitmaps, skip_broken;
    bool image_opts, target_image_opts;     /* SRC, DST are option strings */
    enum convert_offload offload;
    enum progress_mode progress;
    char **srcs;
    int nsrcs;
    const char *dst;
};

/* 0 ok, 1 usage error (printed), -1 --help printed */
static int parse_args(int argc, char **argv, struct args *a)
{
    int c;
    char err[256];

    memset(a, 0, sizeof(*a));
    a->out_fmt = "raw";
    a->sparse = 4096;
    a->m = 8;
    a->offload = CONVERT_OFFLOAD_AUTO;
    optind = 1;
    while ((c = getopt_long(argc, argv, "hf:O:o:cCS:nB:F:l:t:T:m:WpqUv", long_opts, NULL)) != -1) {
        switch (c) {
        case 'h':
        case OPT_HELP:
            cli_help(help_text);
            return -1;
        case 'f': a->src_fmt = optarg; break;
        case 'O': a->out_fmt = optarg; a->out_fmt_given = true; break;
        case 'o':
            if (kvopts_parse(&a->o, optarg, err, sizeof(err)) < 0)
                return cli_usage_error("convert", "-o %s: %s", optarg, err);
            break;
        case 'c': a->compress = true; break;
        case 'S':
            if (!cli_size("convert", "-S", optarg, &a->sparse))
                return 1;
            if (a->sparse % 512 || a->sparse > (16u << 20))
                return cli_usage_error("convert", "invalid -S %s: valid sizes are multiples "
                                       "of 512 up to 16M; 0 disables sparse output", optarg);
            break;
        case 'n': a->no_create = true; break;
        case 'B': a->backing = optarg; break;
        case 'F': a->backing_fmt = optarg; break;
        case 'l': a->snapshot = optarg; break;
        case 't': a->cache = optarg; break;
        case 'T': a->src_cache = optarg; break;
        case 'm': {
            char *end;
            long v = strtol(optarg, &end, 10);
            if (*end || v < 1 || v > 64)
                return cli_usage_error("convert", "-m must be a number from 1 to 64, not '%s'", optarg);
            a->m = (unsigned)v;
            break;
        }
        case 'W': a->out_of_order = true; break;
        case 'p': if (a->progress == PROGRESS_NONE) a->progress = PROGRESS_BAR; break;
        case 'q': a->quiet = true; break;
        case 'U': break;
        case 'v': a->verbose = true; break;
        case OPT_TARGET_IS_ZERO: a->target_is_zero = true; break;
        case OPT_PROGRESS:
            if (!optarg)            /* qemu-img 10's --progress: -p */
                a->progress = PROGRESS_BAR;
            else if (!strcmp(optarg, "json"))
                a->progress = PROGRESS_JSON;
            else if (!strcmp(optarg, "bar") || !strcmp(optarg, "human"))
                a->progress = PROGRESS_BAR;
            else if (!strcmp(optarg, "none"))
                a->progress = PROGRESS_NONE;
            else
                return cli_usage_error("convert", "--progress must be bar, json or none");
            break;
        case OPT_ALLOW_EXTERNAL: a->allow_external = true; break;
        case OPT_DISK: {
            char *end;
            long v = strtol(optarg, &end, 10);
            if (*end || v < 0 || v > 1000000)
                return cli_usage_error("convert", "--disk must be a disk number (0 = first)");
            a->disk = (unsigned)v;
            break;
        }
        case OPT_IGNORE_CID: a->ignore_cid = true; break;
        case OPT_SALVAGE: a->salvage = true; break;
        case OPT_BITMAPS: a->bitmaps = true; break;
        case OPT_SKIP_BROKEN: a->skip_broken = true; break;
        case 'C': a->offload = CONVERT_OFFLOAD_REQUIRED; break;
        case CLI_OPT_OBJECT: {
            int r = cli_object(optarg);
            if (r)
                return r < 0 ? -1 : 1;
            break;
        }
        case CLI_OPT_IMAGE_OPTS: a->image_opts = true; break;
        case CLI_OPT_TARGET_IMAGE_OPTS: a->target_image_opts = true; break;
        case OPT_COPY_OFFLOAD:
            if (!strcmp(optarg, "auto"))
                a->offload = CONVERT_OFFLOAD_AUTO;
            else if (!strcmp(optarg, "off"))
                a->offload = CONVERT_OFFLOAD_OFF;
            else if (!strcmp(optarg, "required"))
                a->offload = CONVERT_OFFLOAD_REQUIRED;
            else
                return cli_usage_error("convert", "--copy-offload must be auto, off or required");
            break;
        default:
            return cli_usage_error("convert", "bad option");
        }
    }
    if (kvopts_wants_help(&a->o)) {
        const struct bd_driver *drv = bd_find_driver(a->out_fmt);
        if (!drv || !drv->create)
            return cli_usage_error("convert", "unknown output format '%s'", a->out_fmt);
        fputs(drv->create_options_help ? drv->create_options_help : "no options\n", stdout);
        return -1;
    }
    if (argc - optind < 2)
        return cli_usage_error("convert", "expected a source and a destination");
    a->srcs = argv + optind;
    a->nsrcs = argc - optind - 1;
    a->dst = argv[argc - 1];
    /* qemu-img's words */
    if (a->skip_broken && !a->bitmaps) {
        cli_error("Use of --skip-broken-bitmaps requires --bitmaps");
        return 1;
    }
    if (a->bitmaps && a->nsrcs > 1) {
        cli_error("Copying bitmaps only possible with single source");
        return 1;
    }
    if (a->target_is_zero && !a->no_create)
        return cli_usage_error("convert", "--target-is-zero needs -n");
    if (a->no_create && a->o.n && !kvopts_wants_help(&a->o))
        return cli_usage_error("convert", "-o has no effect when skipping image creation");
    if (a->backing_fmt && !a->backing)
        return cli_usage_error("convert", "-F needs -B");
    if (a->quiet && a->progress == PROGRESS_BAR)
        a->progress = PROGRESS_NONE;
    if (a->target_image_opts && !a->no_create) {
        cli_error("--target-image-opts requires use of -n flag");
        return 1;
    }
    /* qemu-img's names; "off" is "none" */
    if (a->cache && !(a->cache = cli_cache_mode(a->cache, false)))
        return 1;
    if (a->src_cache && !(a->src_cache = cli_cache_mode(a->src_cache, true)))
        return 1;
    return 0;
}

/* "-O a, -O b or -O c": the registered formats with every bit of `caps`. */
static void format_list(unsigned caps, char *buf, size_t len)
{
    size_t n = 0, used = 0;

    for (size_t i = 0; bd_drivers[i]; i++)
        n += (bd_drivers[i]->caps & caps) == caps;
    buf[0] = 0;
    for (size_t i = 0, k = 0; bd_drivers[i] && used < len; i++) {
        if ((bd_drivers[i]->caps & caps) != caps)
            continue;
        k++;
        int w = snprintf(buf + used, len - used, "%s-O %s",
                         k == 1 ? "" : k == n ? " or " : ", ", bd_drivers[i]->name);
        if (w < 0)
            break;
        used += (size_t)w;
    }
}

static unsigned online_cpus(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    if (n < 1)
        n = 1;
    if (n > 16)
        n = 16;
    return (unsigned)n;
}

/* -B names the backing file relative to the output's folder, as qemu-img does. */
static char *backing_path(const char *backing, const char *dst)
{
    char *p = NULL;
    if (backing[0] == '/' || strcmp(dst, "-") == 0)
        return strdup(backing);
    char *copy = strdup(dst);
    if (!copy)
        return NULL;
    if (asprintf(&p, "%s/%s", dirname(copy), backing) < 0)
        p = NULL;
    free(copy);
    return p;
}

/* Progress over several passes of the conversion, as one. */
struct pass_progress {
    struct progress *p;
    unsigned pass, passes;
};

static void pass_progress_update(void *opaque, uint64_t done, uint64_t total)
{
    struct pass_progress *pp = opaque;

    if (pp->passes > 1 && total)
        done = total / pp->passes * pp->pass + done / pp->passes;
    progress_update(pp->p, done, total);
}

/* The write queue's backend for -v.  A queue that never decided (its
 * backend is picked at the first write) was not used: the output driver
 * (a vmdk stream) wrote through its file directly, with pwrite. */
static const char *backend_name(const struct ioq *q)
{
    if (!q)
        return "stream";
    const char *n = ioq_backend_name(q);
    return strcmp(n, "auto") == 0 ? "pwrite (the output's own writes)" : n;
}

/* -v: what copy offload did ("shared" = reflinked, "offloaded" = copied by
 * copy_file_range, "copied" = read and written here). */
static void print_offload(const struct convert_stats *st, enum convert_offload mode)
{
    char sb[32], ob[32], cb[32];
    uint64_t copied = st->written - st->shared - st->offloaded;

    size_human(st->shared, sb, sizeof(sb));
    size_human(st->offloaded, ob, sizeof(ob));
    size_human(copied, cb, sizeof(cb));
    fprintf(stderr, "diskimg: copy offload: %s shared, %s offloaded, %s copied "
            "(%llu, %llu, %llu bytes)", sb, ob, cb, (unsigned long long)st->shared,
            (unsigned long long)st->offloaded, (unsigned long long)copied);
    if (mode == CONVERT_OFFLOAD_OFF)
        fprintf(stderr, "; off (--copy-offload=off)");
    else if (st->offload_off)
        fprintf(stderr, "; not used: %s", st->offload_off);
    else if (st->offload_refused)
        fprintf(stderr, "; the file system refused: %s", strerror(st->offload_refused));
    fputc('\n', stderr);
}

/* --bitmaps: refused before anything is written when the output format or
 * the source cannot hold bitmaps or a source bitmap is in use (qemu-img's
 * messages; it finds some of them only after creating the output).
 * 1: refused (printed). */
static int check_bitmaps(struct args *a, const struct bd_driver *odrv,
                         struct bd *src, struct diag *d)
{
    const char *compat = odrv->bitmaps_copy ? kvopts_get(&a->o, "compat") : NULL;

    if (strcmp(a->dst, "-") == 0) {
        cli_error("--bitmaps needs an output file");
        return 1;
    }
    if (!odrv->bitmaps_copy || (compat && (!strcmp(compat, "0.10") || !strcmp(compat, "v2")))) {
        cli_error("Format driver '%s' does not support bitmaps", odrv->name);
        return 1;
    }
    if (!src->drv->bitmaps_copy) {
        cli_error("Source lacks bitmap support");
        return 1;
    }
    if (src->drv->bitmaps_copy(NULL, src, a->skip_broken) < 0) {
        cli_error("%s", d->what);
        return 1;
    }
    return 0;
}

/* --bitmaps, after the content is written: the bitmaps of `src` added to
 * the output file at `path` (the temporary file, or the -n target). */
static int copy_bitmaps(const struct args *a, struct bd *src, const char *path,
                        struct diag *d)
{
    struct bd_open_opts oo = { .format = "qcow2", .writable = true, .no_backing = true,
                               .allow_external = true };
    struct bd *dst = NULL;
    int r = bd_open(&dst, path, &oo, d);

    if (r == 0 && !dst->drv->bitmaps_copy)
        r = diag_fail(d, -ENOTSUP, a->dst, -1, "the output cannot hold bitmaps");
    if (r == 0)
        r = dst->drv->bitmaps_copy(dst, src, a->skip_broken);
    if (r == -EEXIST) {
        /* qemu-img's message, without the file name */
        cli_error("%s", d->what);
        diag_clear(d);
        d->err = r;
    }
    bd_close(dst);
    return r;
}

/* --target-image-opts: DST becomes the file its string names and -O its
 * driver; without a driver, the format the file probes as (qemu-img
 * opens it so).  0, or 1 with the message printed. */
static int target_image_opts(struct args *a, char **owned)
{
    const char *fmt;

    if (cli_image_opts(a->dst, owned, &fmt))
        return 1;
    a->dst = *owned;
    if (!fmt) {
        struct diag pd;
        struct bfile *pf = NULL;
        const struct bd_driver *tdrv = NULL;
        diag_init(&pd);
        if (bfile_open(&pf, a->dst, 0, &pd) == 0 && bd_probe(pf, &tdrv, &pd) == 0 && tdrv)
            fmt = tdrv->name;
        bfile_close(pf);
    }
    if (fmt) {
        a->out_fmt = fmt;
        a->out_fmt_given = true;
    }
    return 0;
}

int cmd_convert(int argc, char **argv)
{
    struct args a;
    struct diag d, src_d;
    struct bd **src = NULL;
    struct bd *out = NULL, *out_backing = NULL;
    struct ioq *ioq = NULL;
    struct outfile of = { 0 };
    struct progress prog;
    struct convert_stats st;
    bool have_of = false;
    char *dst_owned = NULL;
    int r = parse_args(argc, argv, &a);

    if (r) {
        kvopts_free(&a.o);
        return r < 0 ? 0 : 1;
    }
    if (a.target_image_opts && target_image_opts(&a, &dst_owned)) {
        kvopts_free(&a.o);
        return 1;
    }
    diag_init(&d);
    diag_init(&src_d);
    cli_warnings_on(&d, &a.quiet);
    cli_warnings_on(&src_d, &a.quiet);
    /* first: every thread started later inherits its signal mask */
    if (outfile_install_signal_cleanup(&d) < 0) {
        cli_report(&d);
        goto fail_args;
    }

    const struct bd_driver *odrv = bd_find_driver(a.out_fmt);
    if (!odrv) {
        cli_error("unknown output format '%s'", a.out_fmt);
        goto fail_args;
    }
    if (!odrv->create) {
        cli_error("writing %s images is not supported", a.out_fmt);
        goto fail_args;
    }
    if (a.compress && !odrv->compress) {
        cli_error("%s output cannot be compressed (-c)", a.out_fmt);
        goto fail_args;
    }
    if (a.compress && a.offload == CONVERT_OFFLOAD_REQUIRED) {
        /* qemu-img's words; refused before anything is read or written */
        cli_error("Cannot enable copy offloading when -c is used");
        goto fail_args;
    }

    /* sources */
    struct bd_open_opts oo = {
        .format = a.src_fmt, .allow_external = a.allow_external,
        .ignore_parent_cid = a.ignore_cid, .snapshot = a.snapshot, .disk_index = a.disk,
        .salvage = a.salvage,
    };
    src = calloc((size_t)a.nsrcs, sizeof(*src));
    if (!src) {
        cli_error("out of memory");
        goto fail_args;
    }
    bool sequential = false;
    for (int i = 0; i < a.nsrcs; i++) {
        if (strcmp(a.srcs[i], "-") == 0 && a.nsrcs > 1) {
            cli_error("a stream (-) can only be the only source");
            goto fail;
        }
        struct cli_image im;
        if (cli_image_arg(&im, a.srcs[i], a.image_opts, a.src_fmt))
            goto fail_quiet;
        oo.format = im.format;
        /* with --salvage the sources report apart, so that their read errors
         * become warnings instead of the command's error */
        r = bd_open(&src[i], im.path, &oo, a.salvage ? &src_d : &d);
        cli_image_free(&im);
        if (r < 0) {
            if (!a.salvage)
                goto fail;
            cli_report(&src_d);
            goto fail_quiet;
        }
        if (src[i]->file && src[i]->file->kind == BFILE_STREAM)
            sequential = true;
    }
    if (a.bitmaps && (r = check_bitmaps(&a, odrv, src[0], &d)) != 0)
        goto fail_quiet;
    uint64_t total = convert_total_size(src, (size_t)a.nsrcs);
    /* raw from a pipe: the size is known only at its end */
    bool size_unknown = total == UINT64_MAX;
    if (size_unknown && !sequential) {
        cli_error("the sources are too large together (more than 2^64 bytes)");
        goto fail;
    }
    if (size_unknown && !(odrv->caps & BD_CAP_UNKNOWN_SIZE)) {
        cli_error("%s: the size of a raw stream is not known in advance; convert it "
                  "with -O raw (or from a file) to get %s output", a.srcs[0], odrv->name);
        goto fail_quiet;
    }

    /* the output's backing file (-B), read to write only differences; the
     * file is the user's choice, the references it makes obey the rule */
    if (a.backing) {
        char *bp = backing_path(a.backing, a.dst);
        struct bd_open_opts bo = { .format = a.backing_fmt,
                                   .allow_external = a.allow_external };
        if (!bp) {
            cli_error("out of memory");
            goto fail;
        }
        r = bd_open(&out_backing, bp, &bo, &d);
        free(bp);
        if (r < 0)
            goto fail;
        if (!a.backing_fmt)
            a.backing_fmt = out_backing->drv->name;
    }

    /* never write onto an input: every file the sources (their backing
     * files, extents and data files) and -B have open is an input; the
     * target is compared here, the files the output driver adds (extents,
     * a -n target's data file) once it has made them */
    uint64_t inputs_mark = bfile_open_mark();
    struct stat dst_st;
    if (strcmp(a.dst, "-") != 0 && stat(a.dst, &dst_st) == 0 &&
        bfile_is_open(&dst_st, inputs_mark)) {
        cli_error("%s: the output is also an input; refusing to overwrite it", a.dst);
        goto fail_quiet;
    }

    bool durable = !a.cache || strcmp(a.cache, "unsafe") != 0;
    bool direct = a.cache && (!strcmp(a.cache, "none") || !strcmp(a.cache, "directsync"));
    unsigned of_flags = (a.no_create ? OUTFILE_EXISTING : 0) | (direct ? OUTFILE_DIRECT : 0);
    if ((r = outfile_open(&of, a.dst, of_flags, &d)) < 0)
        goto fail;
    have_of = true;
    /* -n without -O writes raw (qemu-img's default): over a qcow2 or vmdk
     * image that is almost always a forgotten -O, and it would destroy the
     * image; ask for the format instead */
    if (a.no_create && !a.out_fmt_given && of.f->kind != BFILE_STREAM) {
        struct diag pd;
        struct bfile *pf = NULL;
        const struct bd_driver *tdrv = NULL;
        diag_init(&pd);
        /* its own descriptor: the output's may be O_DIRECT (-t none) */
        if (bfile_open(&pf, a.dst, 0, &pd) == 0 && bd_probe(pf, &tdrv, &pd) < 0)
            tdrv = NULL;
        bfile_close(pf);
        if (tdrv && tdrv != odrv) {
            bool into = tdrv->caps & BD_CAP_INPLACE;
            cli_error("%s: the target is a %s image and -n without -O would overwrite it "
                      "as raw; %s%s%s, or -O raw to replace it", a.dst, tdrv->name,
                      into ? "pass -O " : "writing into an existing ", tdrv->name,
                      into ? " to write into the image" : " image is not supported");
            goto fail_quiet;
        }
    }
    /* a pipe as output: the formats that say they can (a driver's create()
     * may still refuse a subformat, with a hint) */
    if (of.f->kind == BFILE_STREAM && !(odrv->caps & BD_CAP_STREAM_OUT)) {
        char list[256];
        format_list(BD_CAP_STREAM_OUT, list, sizeof(list));
        cli_error("%s output to a pipe is not supported; use %s", odrv->name, list);
        goto fail_quiet;
    }
    /* e.g. qcow2 to a pipe reads the sources twice (plan, then write) */
    if (of.f->kind == BFILE_STREAM && (odrv->caps & BD_CAP_STREAM_TWO_PASS) && sequential) {
        cli_error("%s output to a pipe needs a seekable source (it reads it twice)",
                  odrv->name);
        goto fail_quiet;
    }

    /* durable output is synced at the end anyway: writing it back as we go
     * keeps the dirty page cache small and overlaps the disk with the work */
    if (durable && !direct)
        bfile_set_writebehind(of.f, 32u << 20);
    if (of.f->kind != BFILE_STREAM) {
        struct ioq_opts qo = { 0 };
        if ((r = ioq_create(&ioq, &qo, &d)) < 0)
            goto fail;
    }
    struct bd_create_opts co = {
        .size = size_unknown ? 0 : total, .o = &a.o, .backing_file = a.backing, .backing_fmt = a.backing_fmt,
        .compress = a.compress, .durable = durable, .existing = a.no_create,
        .allow_external = a.allow_external,
        .target_is_zero = a.target_is_zero, .ioq = ioq,
        .add_file = of.tmp ? outfile_add_file : NULL, .add_file_opaque = &of,
    };
    if ((r = odrv->create(&out, of.f, &co, &d)) < 0)
        goto fail;
    of.f = NULL; /* the driver owns the file now */
    if ((r = outfile_check_inputs(&of, inputs_mark, &d)) < 0)
        goto fail;
    const char *unused = kvopts_unused(&a.o);
    if (unused) {
        cli_error("invalid option '%s' for %s output (see -o help)", unused, odrv->name);
        goto fail_quiet;
    }

    if (strcmp(a.dst, "-") == 0)
        progress_stdout_in_use();
    progress_init(&prog, a.progress, stderr);
    struct pass_progress pp = { .p = &prog, .passes = out->drv->next_pass ? 2 : 1 };
    struct convert_opts copts = {
        .src = src, .nsrc = (size_t)a.nsrcs, .out = out, .out_backing = out_backing,
        .sparse_size = a.sparse, .threads = online_cpus(), .inflight = 2 * a.m,
        .out_of_order = a.out_of_order && out->file->kind != BFILE_STREAM &&
                        !(out->drv->caps & BD_CAP_IN_ORDER),
        .compress = a.compress || (out->drv->caps & BD_CAP_ALL_COMPRESSED), .sequential = sequential, .ioq = ioq,
        .salvage = a.salvage, .src_diag = &src_d, .offload = a.offload,
        .progress = pass_progress_update, .progress_opaque = &pp,
    };
    double t0 = progress_now();
    r = convert_run(&copts, &d, &st);
    /* an output that plans in a first pass (qcow2 to a pipe) sees it all again */
    while (r == 0 && out->drv->next_pass && (r = out->drv->next_pass(out)) > 0) {
        pp.pass++;
        r = convert_run(&copts, &d, &st);
    }
    if (r == 0 && size_unknown)
        r = out->drv->resize(out, st.total, true);
    if (r == 0)
        r = out->drv->finish(out);
    if (r == 0 && a.bitmaps)
        r = copy_bitmaps(&a, src[0], of.tmp ? of.tmp : of.final ? of.final : a.dst, &d);
    if (r == 0)
        r = outfile_commit(&of, durable, &d);
    progress_finish(&prog, r == 0);
    if (r < 0 && d.err == -EEXIST && !d.what[0])
        goto fail_quiet;
    if (r < 0)
        goto fail;
    if (st.salvaged && !a.quiet)
        cli_warn("%s: %llu bytes of the source could not be read and were written as "
                 "zeros (--salvage)", a.dst, (unsigned long long)st.salvaged);
    if (a.verbose) {
        char tb[32], rb[32], zb[32], wb[32];
        size_human(st.total, tb, sizeof(tb));
        size_human(st.read, rb, sizeof(rb));
        size_human(st.zero_meta + st.zero_scan, zb, sizeof(zb));
        size_human(st.written, wb, sizeof(wb));
        fprintf(stderr,
                "diskimg: converted %s in %.3f s: read %s, wrote %s, %s zeros left sparse\n"
                "diskimg: io backend %s, %u worker threads, %zu KiB chunks, zero check %s\n",
                tb, progress_now() - t0, rb, wb, zb, backend_name(ioq),
                st.threads, st.chunk / 1024, zd_impl_name());
        print_offload(&st, a.offload);
    }
    bd_close(out);
    ioq_destroy(ioq);
    bd_close(out_backing);
    for (int i = 0; i < a.nsrcs; i++)
        bd_close(src[i]);
    free(src);
    kvopts_free(&a.o);
    free(dst_owned);
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
    bd_close(out_backing);
    for (int i = 0; src && i < a.nsrcs; i++)
        bd_close(src[i]);
    free(src);
fail_args:
    kvopts_free(&a.o);
    free(dst_owned);
    return 1;
}
