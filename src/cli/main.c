/* diskimg: dispatch to one subcommand. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "commands.h"
#include "io/fault.h"

struct command {
    const char *name;
    int (*run)(int argc, char **argv);
};

static const struct command commands[] = {
    { "convert", cmd_convert },
    { "create", cmd_create },
    { "info", cmd_info },
    { "check", cmd_check },
    { "sparsify", cmd_sparsify },
    { "map", cmd_map },
    { "compare", cmd_compare },
    { "measure", cmd_measure },
    { "resize", cmd_resize },
    { "snapshot", cmd_snapshot },
    { "rebase", cmd_rebase },
    { "dd", cmd_dd },
    { "commit", cmd_commit },
    { "amend", cmd_amend },
};

static const char usage_text[] =
    "Usage: diskimg COMMAND [OPTIONS] ARGS...\n"
    "Convert, inspect and sparsify disk images (raw, qcow2, vmdk, vhd, vhdx, vdi).\n"
    "\n"
    "Commands:\n"
    "  convert  [-f FMT] [-O FMT] [-o OPTS] [-c] [-S SIZE] [-n] [-p] [-q] [-m N]\n"
    "           [-W] [-t CACHE] [-B BACKING] SRC... DST\n"
    "                       copy an image, leaving zero ranges as holes\n"
    "  create   [-q] [-f FMT] [-o OPTS] [-b BACKING -F BFMT] [-u] IMG [SIZE]\n"
    "                       create a new empty image (raw, qcow2, vmdk, vpc, vdi)\n"
    "  info     [-f FMT] [--output=human|json] [--backing-chain] IMG\n"
    "                       show the format, sizes and details of an image\n"
    "  check    [-f FMT] [--output=human|json] [-r leaks|all] IMG\n"
    "                       verify (and repair) an image's metadata\n"
    "                       (exit 2 corrupt, 3 leaks)\n"
    "  sparsify [--dry-run] [-S SIZE] IMG\n"
    "                       punch holes into the zero runs of a raw image, in place\n"
    "  map      [-f FMT] [--output=human|json] [--start-offset N] [--max-length N]\n"
    "           IMG\n"
    "                       show which ranges hold data, zeros or nothing, and where\n"
    "  compare  [-f FMT] [-F FMT] [-s] [-p] [-q] IMG1 IMG2\n"
    "                       compare the guest content of two images\n"
    "  measure  [-O FMT] [-o OPTS] [--output=human|json]\n"
    "           (--size N | [-f FMT] [-l SNAP] IMG)\n"
    "                       the size a new image would need (as qemu-img measure)\n"
    "  resize   [-f FMT] [--shrink] [-q] IMG [+|-]SIZE\n"
    "                       change the virtual size of a raw or qcow2 image\n"
    "  snapshot [-q] [-f FMT] [-l | -a SNAP | -c SNAP | -d SNAP] IMG\n"
    "                       list, create, apply or delete internal snapshots (qcow2)\n"
    "  rebase   [-f FMT] [-u] [-c] [-p] [-q] -b BACKING [-F BFMT] IMG\n"
    "                       give an image another backing file, its content kept\n"
    "  dd       [-f FMT] [-O FMT] [bs=N] [count=N] [skip=N] if=INPUT of=OUTPUT\n"
    "                       copy part of an image into a new one (as qemu-img dd)\n"
    "  commit   [-q] [-f FMT] [-b BASE] [-r RATE] [-d] [-p] IMG\n"
    "                       write an image's content into its backing file\n"
    "  amend    [-f FMT] [-p] [-q] -o OPTS IMG\n"
    "                       change a qcow2 image's format options in place\n"
    "\n"
    "  diskimg COMMAND --help   options of one command\n"
    "  diskimg --version        version\n"
    "\n"
    "Options also have qemu-img 10's long names (--format, --quiet, ...; see\n"
    "COMMAND --help).  Sizes take the suffixes K, M, G, T, P, E (powers of 1024).\n"
    "Exit status: 0 success, 1 error (details per command in diskimg(1)).\n";

/* DISKIMG_FAULT_STATS (io/fault.h): the counts of the calls, at exit. */
static void write_fault_stats(void)
{
    const char *path = fault_stats_path();
    char text[256];
    FILE *f;

    if (!path || !(f = fopen(path, "w")))
        return;
    fault_format_stats(text, sizeof(text));
    fputs(text, f);
    fclose(f);
}

int main(int argc, char **argv)
{
    char why[256];

    /* the test-only fault injector: a bad rule stops the run before any I/O */
    int bad_fault = fault_env_error(why, sizeof(why));
    if (fault_stats_path())
        atexit(write_fault_stats);
    if (bad_fault < 0) {
        cli_error("DISKIMG_FAULT: %s", why);
        return 1;
    }
    if (argc < 2)
        return cli_usage_error(NULL, "no command given");
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help"))
        return cli_help(usage_text);
    if (!strcmp(argv[1], "--version") || !strcmp(argv[1], "-V"))
        return cli_help(cli_version_text);
    for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
        if (strcmp(argv[1], commands[i].name) == 0)
            return commands[i].run(argc - 1, argv + 1);
    return cli_usage_error(NULL, "unknown command '%s'", argv[1]);
}
