/* diskimg info: qemu-img info's fields, in its human and JSON forms. */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "commands.h"
#include "formats/bd.h"
#include "image_opts.h"
#include "io/bfile.h"
#include "object_opt.h"
#include "util/diag.h"
#include "util/jval.h"
#include "util/size.h"

static const char help_text[] =
    "Usage: diskimg info [--object OBJ] [--image-opts] [-f FMT] [--output=human|json]\n"
    "                    [--backing-chain] [-U] IMG\n"
    "Show the format, virtual size, allocated size and format details of IMG.\n"
    "\n"
    "  -f, --format FMT    image format (raw, qcow2, vmdk, vpc, vhdx, vdi, ova)\n"
    "                      default: probe\n"
    "  --output=human|json output form (JSON keys as qemu-img info)\n"
    "  --backing-chain     also show every backing file (JSON: an array, top first)\n"
    "  --disk N            OVA: show the Nth disk in detail\n"
    "  --allow-external    follow files outside the image's folder\n"
    "  -U, --force-share   accepted for compatibility\n"
    "  --image-opts        IMG is an option string: driver=FMT,file.filename=PATH\n"
    "                      (or driver=file,filename=PATH for the file as raw)\n"
    "  --object OBJ        checked as qemu-img checks it, then unused (diskimg\n"
    "                      reads no encrypted images)\n"
    "\n"
    "Exit status: 0 success, 1 error.\n";

enum { OPT_OUTPUT = 256, OPT_CHAIN, OPT_DISK, OPT_ALLOW_EXTERNAL, OPT_HELP };

static const struct option long_opts[] = {
    { "help", no_argument, NULL, OPT_HELP },
    { "output", required_argument, NULL, OPT_OUTPUT },
    { "backing-chain", no_argument, NULL, OPT_CHAIN },
    { "disk", required_argument, NULL, OPT_DISK },
    { "allow-external", no_argument, NULL, OPT_ALLOW_EXTERNAL },
    { "format", required_argument, NULL, 'f' },
    { "force-share", no_argument, NULL, 'U' },
    { "object", required_argument, NULL, CLI_OPT_OBJECT },
    { "image-opts", no_argument, NULL, CLI_OPT_IMAGE_OPTS },
    { NULL, 0, NULL, 0 },
};

/* The backing file as qemu-img names it (full-backing-filename, and the
 * backing image's filename in a chain): an absolute name as it is, a
 * relative one joined to the folder part of `name`, the image's name as
 * shown ("sub/top.qcow2" + "base.qcow2" = "sub/base.qcow2"), not made
 * absolute and not normalised. */
static char *full_backing(const char *name, const struct bd *bd)
{
    const char *slash = strrchr(name, '/');
    char *p = NULL;

    if (bd->backing_name[0] == '/' || !slash)
        return strdup(bd->backing_name);
    if (asprintf(&p, "%.*s%s", (int)(slash - name + 1), name, bd->backing_name) < 0)
        p = NULL;
    return p;
}

/* `name`: the image's name as shown; *next: its backing file's (NULL
 * when it has none, or out of memory) */
static struct jval *image_info(struct bd *bd, const char *name, char **next, struct diag *d,
                               int *err)
{
    struct jval *o = jv_object();

    *next = NULL;
    jv_set(o, "virtual-size", jv_uint(bd->size));
    jv_set(o, "filename", jv_str(name));
    jv_set(o, "format", jv_str(bd->drv->name));
    jv_set(o, "actual-size", jv_uint(bd->file ? bfile_allocated(bd->file) : 0));
    if (bd->backing_name) {
        *next = full_backing(name, bd);
        jv_set(o, "full-backing-filename", jv_str(*next ? *next : bd->backing_name));
        jv_set(o, "backing-filename", jv_str(bd->backing_name));
        if (bd->backing_fmt)
            jv_set(o, "backing-filename-format", jv_str(bd->backing_fmt));
    }
    jv_set(o, "dirty-flag", jv_bool(bd->dirty));
    *err = 0;
    if (o && bd->drv->info && (*err = bd->drv->info(bd, o)) < 0 && !d->err)
        diag_fail(d, *err, bd->filename, -1, "cannot read image details");
    if (*err == 0 && (*err = jv_status(o)) < 0)
        diag_fail(d, *err, bd->filename, -1, "out of memory");
    return o;
}

static void print_value_human(const struct jval *v, int indent);

static void print_key(const char *key)
{
    for (const char *p = key; *p; p++)
        putchar(*p == '-' ? ' ' : *p);
}

static void print_scalar_human(const struct jval *v)
{
    switch (v->type) {
    case J_BOOL: fputs(v->v.b ? "true" : "false", stdout); break;
    case J_INT: printf("%lld", (long long)v->v.i); break;
    case J_UINT: printf("%llu", (unsigned long long)v->v.u); break;
    case J_DOUBLE: printf("%g", v->v.d); break;
    case J_STRING: fputs(v->v.s, stdout); break;
    default: break;
    }
}

/* qemu-img's nested layout: "key: value", containers indented by 4. */
static void print_value_human(const struct jval *v, int indent)
{
    for (size_t i = 0; i < v->n; i++) {
        const struct jval *c = v->items[i];
        printf("%*s", indent, "");
        if (v->type == J_OBJECT)
            print_key(v->keys[i]);
        else
            printf("[%zu]", i);
        putchar(':');
        if (c->type == J_OBJECT || c->type == J_ARRAY) {
            putchar('\n');
            print_value_human(c, indent + 4);
        } else {
            putchar(' ');
            print_scalar_human(c);
            putchar('\n');
        }
    }
}

static uint64_t juint(const struct jval *v)
{
    if (!v)
        return 0;
    return v->type == J_UINT ? v->v.u : v->type == J_INT ? (uint64_t)v->v.i : 0;
}

static void print_human(const struct jval *o)
{
    char h[32];
    const struct jval *v;

    printf("image: %s\n", jv_get(o, "filename")->v.s);
    printf("file format: %s\n", jv_get(o, "format")->v.s);
    size_human(juint(jv_get(o, "virtual-size")), h, sizeof(h));
    printf("virtual size: %s (%llu bytes)\n", h, (unsigned long long)juint(jv_get(o, "virtual-size")));
    size_human(juint(jv_get(o, "actual-size")), h, sizeof(h));
    printf("disk size: %s\n", h);
    if ((v = jv_get(o, "cluster-size")))
        printf("cluster_size: %llu\n", (unsigned long long)juint(v));
    if ((v = jv_get(o, "backing-filename"))) {
        const struct jval *full = jv_get(o, "full-backing-filename");
        if (full && strcmp(full->v.s, v->v.s) != 0)
            printf("backing file: %s (actual path: %s)\n", v->v.s, full->v.s);
        else
            printf("backing file: %s\n", v->v.s);
    }
    if ((v = jv_get(o, "backing-filename-format")))
        printf("backing file format: %s\n", v->v.s);
    if ((v = jv_get(o, "dirty-flag")) && v->type == J_BOOL && v->v.b)
        printf("cleanly shut down: no\n");
    if ((v = jv_get(o, "snapshots")) && v->n)
        cli_print_snapshots(v);
    if ((v = jv_get(o, "format-specific"))) {
        const struct jval *data = jv_get(v, "data");
        if (data && data->n) {
            printf("Format specific information:\n");
            print_value_human(data, 4);
        }
    }
}

int cmd_info(int argc, char **argv)
{
    struct bd_open_opts oo = { 0 };
    bool json = false, chain = false, iopts = false;
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
            int f = cli_output_format("info", optarg);
            if (f < 0)
                return 1;
            json = f == 1;
            break;
        }
        case OPT_CHAIN: chain = true; break;
        case OPT_DISK: {
            char *end;
            long v = strtol(optarg, &end, 10);
            if (*end || v < 0 || v > 1000000)
                return cli_usage_error("info", "--disk must be a disk number (0 = first)");
            oo.disk_index = (unsigned)v;
            break;
        }
        case OPT_ALLOW_EXTERNAL: oo.allow_external = true; break;
        case CLI_OPT_OBJECT:
            if ((r = cli_object(optarg)) != 0)
                return r < 0 ? 0 : 1;
            break;
        case CLI_OPT_IMAGE_OPTS: iopts = true; break;
        default:
            return cli_usage_error("info", "bad option");
        }
    }
    if (argc - optind != 1)
        return cli_usage_error("info", "expected one image");
    oo.no_backing = !chain;

    struct diag d;
    struct bd *bd;
    struct cli_image im;
    if (cli_image_arg(&im, argv[optind], iopts, oo.format))
        return 1;
    oo.format = im.format;
    diag_init(&d);
    cli_warnings_on(&d, NULL);
    r = bd_open(&bd, im.path, &oo, &d);
    cli_image_free(&im);
    if (r < 0) {
        cli_report(&d);
        return 1;
    }
    struct jval *all = jv_array();
    int err = 0;
    char *name = strdup(bd->filename);
    for (struct bd *b = bd; b && !err; b = chain ? b->backing : NULL) {
        char *next;
        if (!name) {
            err = diag_fail(&d, -ENOMEM, bd->filename, -1, "out of memory");
            break;
        }
        jv_push(all, image_info(b, name, &next, &d, &err));
        free(name);
        name = next;
        if (!name && chain && b->backing)
            name = strdup(b->backing->filename);
    }
    free(name);
    if (!err && (err = jv_status(all)) < 0)
        diag_fail(&d, err, bd->filename, -1, "out of memory");
    if (err) {
        cli_report(&d);
        jv_free(all);
        bd_close(bd);
        return 1;
    }
    if (json) {
        if (cli_print_json(chain ? all : all->items[0]) < 0) {
            cli_error("%s: out of memory", bd->filename);
            jv_free(all);
            bd_close(bd);
            return 1;
        }
    } else {
        for (size_t i = 0; i < all->n; i++) {
            if (i)
                putchar('\n');
            print_human(all->items[i]);
        }
    }
    jv_free(all);
    bd_close(bd);
    return 0;
}
