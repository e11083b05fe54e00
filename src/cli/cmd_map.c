/* diskimg map: the guest ranges of an image and where their bytes live, in
 * the shapes of qemu-img map 7.2.
 *
 * Each block-status answer becomes one entry {start, length, depth, present,
 * zero, data, offset}; consecutive entries merge when qemu-img would merge
 * them (same flags and depth, same host file, contiguous host offsets).
 * Block status is asked for the whole remaining range each time, so a huge
 * sparse image costs a handful of calls, never one per cluster.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "commands.h"
#include "formats/bd.h"
#include "image_opts.h"
#include "io/bfile.h"
#include "object_opt.h"
#include "util/diag.h"

static const char help_text[] =
    "Usage: diskimg map [--object OBJ] [--image-opts] [-f FMT] [--start-offset=N]\n"
    "                   [--max-length=N] [--output=human|json] [-U] IMG\n"
    "Show how the guest ranges of IMG are stored: data, zeros or unallocated,\n"
    "which image of the backing chain holds them and at which offset.\n"
    "Output as qemu-img map: the human form lists the ranges holding data;\n"
    "JSON lists every range with start, length, depth, present, zero, data and,\n"
    "when the bytes sit uncompressed in a file, offset.\n"
    "\n"
    "  -f, --format FMT    image format (raw, qcow2, vmdk, vpc, vhdx, vdi, ova)\n"
    "                      default: probe\n"
    "  --output=human|json output form (default human)\n"
    "  --start-offset N    start at guest offset N (suffixes K, M, G, ...)\n"
    "  --max-length N      map at most N bytes\n"
    "  --allow-external    follow files outside the image's folder\n"
    "  -U, --force-share   accepted for compatibility\n"
    "  --image-opts        IMG is an option string: driver=FMT,file.filename=PATH\n"
    "                      (or driver=file,filename=PATH for the file as raw)\n"
    "  --object OBJ        checked as qemu-img checks it, then unused (diskimg\n"
    "                      reads no encrypted images)\n"
    "\n"
    "Exit status: 0 success, 1 error (the human form also fails on compressed\n"
    "ranges, which have no offset to print).\n";

enum { OPT_OUTPUT = 256, OPT_START, OPT_MAXLEN, OPT_ALLOW_EXTERNAL, OPT_HELP };

static const struct option long_opts[] = {
    { "help", no_argument, NULL, OPT_HELP },
    { "output", required_argument, NULL, OPT_OUTPUT },
    { "start-offset", required_argument, NULL, OPT_START },
    { "max-length", required_argument, NULL, OPT_MAXLEN },
    { "allow-external", no_argument, NULL, OPT_ALLOW_EXTERNAL },
    { "force-share", no_argument, NULL, 'U' },
    { "format", required_argument, NULL, 'f' },
    { "object", required_argument, NULL, CLI_OPT_OBJECT },
    { "image-opts", no_argument, NULL, CLI_OPT_IMAGE_OPTS },
    { NULL, 0, NULL, 0 },
};

struct map_entry {
    uint64_t start, length;
    int depth;
    bool present, zero, data;
    bool has_offset;
    uint64_t offset;
    const struct bd *host;         /* the layer whose file holds the bytes */
    const struct bfile *host_file; /* that file when it is not host->file */
};

/* qemu-img names a backing file by joining the folder of the name its
 * parent was opened with and the name stored in the parent (path_combine);
 * the human form prints that, so do the same. */
static char *combine_path(const char *base, const char *name)
{
    const char *slash = strrchr(base, '/');
    char *p = NULL;

    if (name[0] == '/' || !slash)
        return strdup(name);
    if (asprintf(&p, "%.*s%s", (int)(slash + 1 - base), base, name) < 0)
        return NULL;
    return p;
}

struct chain_names {
    char *name[BD_MAX_DEPTH + 1];
    int n;
    const struct bfile *last_file;  /* host_name()'s cache */
    char *last_name;
};

static int chain_names_init(struct chain_names *cn, const struct bd *top, const char *arg)
{
    const struct bd *above = NULL;

    memset(cn, 0, sizeof(*cn));
    for (const struct bd *b = top; b && cn->n <= BD_MAX_DEPTH; above = b, b = b->backing) {
        char *s = !above ? strdup(arg)
                : above->backing_name ? combine_path(cn->name[cn->n - 1], above->backing_name)
                : strdup(b->filename ? b->filename : "");
        if (!s)
            return -ENOMEM;
        cn->name[cn->n++] = s;
    }
    return 0;
}

static void chain_names_free(struct chain_names *cn)
{
    for (int i = 0; i < cn->n; i++)
        free(cn->name[i]);
    free(cn->last_name);
}

/* A file the image refers to (a vmdk extent, a qcow2 data file) was opened
 * by its resolved path, inside the image's folder unless --allow-external;
 * qemu-img names it by joining the image's name and the reference. */
static char *ref_name(const char *image_name, const struct bd *host, const char *path)
{
    char *real = host->file && host->file->path ? realpath(host->file->path, NULL) : NULL;
    char *slash = real ? strrchr(real, '/') : NULL;
    char *name;

    if (slash && slash != real && !strncmp(path, real, (size_t)(slash - real)) &&
        path[slash - real] == '/')
        name = combine_path(image_name, path + (slash - real) + 1);
    else
        name = strdup(path);
    free(real);
    return name;
}

/* The file name the human form prints for `e` (cached: lines in a row
 * usually name the same file). */
static const char *host_name(struct chain_names *cn, const struct map_entry *e)
{
    const struct bd *host = e->host;
    const char *image = !host ? "" : host->depth >= 0 && host->depth < cn->n
                                    ? cn->name[host->depth] : host->filename;

    if (!host || !e->host_file || !e->host_file->path)
        return image ? image : "";
    if (cn->last_file != e->host_file) {
        free(cn->last_name);
        cn->last_name = ref_name(image, host, e->host_file->path);
        cn->last_file = cn->last_name ? e->host_file : NULL;
    }
    return cn->last_name ? cn->last_name : e->host_file->path;
}

static void entry_from_extent(struct map_entry *m, uint64_t off, const struct bd_extent *e)
{
    memset(m, 0, sizeof(*m));
    m->start = off;
    m->length = e->len;
    m->depth = e->depth;
    m->present = e->flags & BD_ALLOCATED;
    m->zero = e->flags & BD_ZERO;
    m->data = e->flags & BD_DATA;
    /* compressed bytes have no offset a reader could use */
    m->has_offset = e->host_offset >= 0 && !(e->flags & BD_COMPRESSED);
    if (m->has_offset) {
        m->offset = (uint64_t)e->host_offset;
        m->host = e->host;
        m->host_file = e->host_file;
    }
}

/* qemu-img's rule for joining `next` onto `cur`. */
static bool mergeable(const struct map_entry *cur, const struct map_entry *next)
{
    if (cur->length == 0)
        return false;
    if (cur->zero != next->zero || cur->data != next->data ||
        cur->depth != next->depth || cur->present != next->present ||
        cur->has_offset != next->has_offset || cur->host != next->host ||
        cur->host_file != next->host_file)
        return false;
    if (cur->has_offset && cur->offset + cur->length != next->offset)
        return false;
    return true;
}

/* Print `e` (and, in the human form, relax `next` as qemu-img does so that
 * ranges it does not print coalesce).  Returns 0 or -1 (message printed). */
static int dump_entry(bool json, struct chain_names *cn, struct map_entry *e,
                      struct map_entry *next)
{
    if (json) {
        printf("{ \"start\": %" PRIu64 ", \"length\": %" PRIu64 ", \"depth\": %d,"
               " \"present\": %s, \"zero\": %s, \"data\": %s",
               e->start, e->length, e->depth, e->present ? "true" : "false",
               e->zero ? "true" : "false", e->data ? "true" : "false");
        if (e->has_offset)
            printf(", \"offset\": %" PRIu64, e->offset);
        putchar('}');
        if (next)
            puts(",");
        return 0;
    }
    if (e->data && !e->has_offset) {
        fflush(stdout);
        cli_error("%s: range at offset %" PRIu64 " has no host offset (compressed or "
                  "external clusters); the human form cannot show it, use --output=json",
                  cn->name[0], e->start);
        return -1;
    }
    if (e->data && !e->zero) {
        char a[24], b[24], c[24];
        /* qemu-img prints "%#-16x": no 0x prefix for zero */
        snprintf(a, sizeof(a), e->start ? "0x%" PRIx64 : "0", e->start);
        snprintf(b, sizeof(b), e->length ? "0x%" PRIx64 : "0", e->length);
        snprintf(c, sizeof(c), e->offset ? "0x%" PRIx64 : "0", e->offset);
        printf("%-16s%-16s%-16s%s\n", a, b, c, host_name(cn, e));
    }
    if (next && (!next->data || next->zero)) {
        next->data = false;
        next->zero = true;
    }
    return 0;
}

static int run_map(struct bd *bd, struct chain_names *cn, bool json,
                   uint64_t start, uint64_t max_len, bool have_max)
{
    uint64_t end = bd->size;
    struct map_entry cur = { .start = start }, next;
    struct bd_extent e;

    if (have_max && start < end && max_len < end - start)
        end = start + max_len;
    if (json)
        putchar('[');
    else
        printf("%-16s%-16s%-16s%s\n", "Offset", "Length", "Mapped to", "File");
    while (cur.start + cur.length < end) {
        uint64_t off = cur.start + cur.length;
        if (bd_block_status(bd, off, end - off, &e) < 0) {
            fflush(stdout);
            cli_report(bd->diag);
            return 1;
        }
        entry_from_extent(&next, off, &e);
        if (mergeable(&cur, &next)) {
            cur.length += next.length;
            continue;
        }
        if (cur.length > 0 && dump_entry(json, cn, &cur, &next) < 0)
            return 1;
        cur = next;
    }
    if (dump_entry(json, cn, &cur, NULL) < 0)
        return 1;
    if (json)
        puts("]");
    return 0;
}

int cmd_map(int argc, char **argv)
{
    struct bd_open_opts oo = { 0 };
    bool json = false, have_max = false, iopts = false;
    uint64_t start = 0, max_len = 0;
    int c, r;

    optind = 1;
    while ((c = getopt_long(argc, argv, "hf:U", long_opts, NULL)) != -1) {
        switch (c) {
        case 'h':
        case OPT_HELP:
            return cli_help(help_text);
        case 'f': oo.format = optarg; break;
        case 'U': break;
        case OPT_OUTPUT: {
            int f = cli_output_format("map", optarg);
            if (f < 0)
                return 1;
            json = f == 1;
            break;
        }
        case OPT_START:
            if (!cli_size("map", "--start-offset", optarg, &start))
                return 1;
            break;
        case OPT_MAXLEN:
            if (!cli_size("map", "--max-length", optarg, &max_len))
                return 1;
            have_max = true;
            break;
        case OPT_ALLOW_EXTERNAL: oo.allow_external = true; break;
        case CLI_OPT_OBJECT:
            if ((r = cli_object(optarg)) != 0)
                return r < 0 ? 0 : 1;
            break;
        case CLI_OPT_IMAGE_OPTS: iopts = true; break;
        default:
            return cli_usage_error("map", "bad option");
        }
    }
    if (argc - optind != 1)
        return cli_usage_error("map", "expected one image");

    struct diag d;
    struct bd *bd;
    struct chain_names cn;
    struct cli_image im;
    if (cli_image_arg(&im, argv[optind], iopts, oo.format))
        return 1;
    oo.format = im.format;
    diag_init(&d);
    cli_warnings_on(&d, NULL);
    if (bd_open(&bd, im.path, &oo, &d) < 0) {
        cli_report(&d);
        cli_image_free(&im);
        return 1;
    }
    if (bd->size == UINT64_MAX) {
        cli_error("%s: the size of this stream is unknown; map needs a file", im.path);
        cli_image_free(&im);
        bd_close(bd);
        return 1;
    }
    /* the human form names the file as given (the string's file name) */
    r = chain_names_init(&cn, bd, im.path);
    cli_image_free(&im);
    if (r < 0) {
        cli_error("out of memory");
        chain_names_free(&cn);
        bd_close(bd);
        return 1;
    }
    int rc = run_map(bd, &cn, json, start, max_len, have_max);
    if (fflush(stdout) != 0 || ferror(stdout)) {
        if (rc == 0)
            cli_error("cannot write the map to standard output: %s", strerror(errno));
        rc = 1;
    }
    chain_names_free(&cn);
    bd_close(bd);
    return rc;
}
