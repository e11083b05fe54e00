#include "cli.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/diag.h"
#include "util/jval.h"
#include "util/size.h"

const char *const cli_version_text =
    "diskimg " DISKIMG_VERSION "\n"
    "Converts raw, qcow2, vmdk, vhd (vpc) and vdi disk images; qemu-img compatible options.\n";

void cli_error(const char *fmt, ...)
{
    va_list ap;
    fputs("diskimg: ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

void cli_warn(const char *fmt, ...)
{
    va_list ap;
    fputs("diskimg: warning: ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

void cli_report(const struct diag *d)
{
    char buf[2048];

    diag_format(d, buf, sizeof(buf));
    fprintf(stderr, "diskimg: %s\n", buf);
}

int cli_print_json(const struct jval *v)
{
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
    fputs("diskimg: ", stderr);
    if (cmd)
        fprintf(stderr, "%s: ", cmd);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
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

int cli_help(const char *text)
{
    fputs(text, stdout);
    return 0;
}
