#include "cli.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "formats/bd.h"
#include "io/bfile.h"
#include "util/diag.h"
#include "util/jval.h"
#include "util/size.h"

const char *const cli_version_text =
    "diskimg " DISKIMG_VERSION "\n"
    "Converts raw, qcow2, vmdk, vhd (vpc), vhdx and vdi disk images; qemu-img compatible options.\n";

void cli_put_line(FILE *f, const char *s)
{
    /* Messages echo what images hold (backing and extent names, descriptor
     * fields, member names): a control byte in them would reach the
     * terminal as an escape sequence, so it is written as \xNN.  Tabs and
     * the newlines of several-line messages stay. */
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if ((*p < 0x20 && *p != '\n' && *p != '\t') || *p == 0x7f)
            fprintf(f, "\\x%02x", *p);
        else
            fputc(*p, f);
    }
    fputc('\n', f);
}

static void vmessage(const char *prefix, const char *fmt, va_list ap)
{
    char buf[4096];
    int n = snprintf(buf, sizeof(buf), "diskimg: %s", prefix);

    if (n < 0 || (size_t)n >= sizeof(buf))
        n = 0;
    vsnprintf(buf + n, sizeof(buf) - (size_t)n, fmt, ap);
    cli_put_line(stderr, buf);
}

void cli_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vmessage("", fmt, ap);
    va_end(ap);
}

void cli_warn(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vmessage("warning: ", fmt, ap);
    va_end(ap);
}

void cli_report(const struct diag *d)
{
    char buf[2048];

    diag_format(d, buf, sizeof(buf));
    cli_error("%s", buf);
}

void cli_warn_sink(void *quiet, const char *file, int64_t offset, const char *msg)
{
    if (quiet && *(const bool *)quiet)
        return;
    if (file && offset >= 0)
        cli_warn("%s: %s (offset %lld)", file, msg, (long long)offset);
    else if (offset >= 0)
        cli_warn("%s (offset %lld)", msg, (long long)offset);
    else
        cli_warn("%s", msg);
}

void cli_warnings_on(struct diag *d, const bool *quiet)
{
    d->warn = cli_warn_sink;
    d->warn_opaque = (void *)quiet;
}

int cli_print_json(struct jval *v)
{
    cli_json_qemu_order(v);
    char *text = jv_to_json(v, 0);

    if (!text)
        return -ENOMEM;
    fputs(text, stdout);
    putchar('\n');
    free(text);
    return 0;
}

int cli_usage_error(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    char pre[64] = "";
    if (cmd)
        snprintf(pre, sizeof(pre), "%s: ", cmd);
    va_start(ap, fmt);
    vmessage(pre, fmt, ap);
    va_end(ap);
    if (cmd)
        fprintf(stderr, "Try 'diskimg %s --help' for more information.\n", cmd);
    else
        fputs("Try 'diskimg --help' for more information.\n", stderr);
    return 1;
}

bool cli_size(const char *cmd, const char *opt, const char *s, uint64_t *out)
{
    if (size_parse(s, 1, out) == 0)
        return true;
    cli_usage_error(cmd, "invalid size '%s' for %s (use a number with an optional "
                    "suffix K, M, G, T, P or E)", s, opt);
    return false;
}

int cli_output_format(const char *cmd, const char *s)
{
    if (strcmp(s, "human") == 0)
        return 0;
    if (strcmp(s, "json") == 0)
        return 1;
    cli_usage_error(cmd, "--output must be 'human' or 'json', not '%s'", s);
    return -1;
}

const char *cli_cache_mode(const char *mode, bool source)
{
    static const char *const modes[] = { "none", "writeback", "writethrough", "directsync",
                                         "unsafe" };

    if (!strcmp(mode, "off"))
        return "none";
    for (size_t i = 0; i < sizeof(modes) / sizeof(modes[0]); i++)
        if (!strcmp(mode, modes[i]))
            return modes[i];
    cli_error("Invalid %scache option: %s", source ? "source " : "", mode);
    return NULL;
}

int cli_help(const char *text)
{
    fputs(text, stdout);
    return 0;
}

int cli_check_ref(struct bd *img, const char *name, struct diag *d)
{
    struct bfile *f = NULL;

    if (img->opts.allow_external)
        return 0;
    int r = bd_open_ref_file(img, name, false, &f);
    if (r == 0) {
        bfile_close(f);
        return 0;
    }
    if (r != -ENOENT)
        return r;
    diag_clear(d);
    bool up = name[0] == '/' || !strcmp(name, "..") || !strncmp(name, "../", 3) ||
              strstr(name, "/../") || (strlen(name) >= 3 && !strcmp(name + strlen(name) - 3, "/.."));
    if (up)
        return diag_fail(d, -EPERM, img->filename, -1, "refers to '%s', outside its folder "
                         "(pass --allow-external to allow it)", name);
    return 0;
}
