/* Helpers shared by the subcommands: messages, option values, help text. */
#ifndef DISKIMG_CLI_H
#define DISKIMG_CLI_H

#include <stdbool.h>
#include <stdint.h>

struct diag;
struct jval;

#include <stdio.h>

/* `s` and a newline on `f`, control bytes (but newlines and tabs) written
 * as \xNN: every message goes through it. */
void cli_put_line(FILE *f, const char *s);

/* "diskimg: <message>" on stderr. */
void cli_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void cli_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Print the recorded failure ("diskimg: FILE: what (offset N)"). */
void cli_report(const struct diag *d);

/* The warning sink of a command's struct diag ("diskimg: warning: FILE:
 * what (offset N)" on stderr), e.g. a VHD whose damaged last footer its
 * copy at offset 0 stands in for.  `quiet` (a const bool *, or NULL)
 * silences it when true (-q). */
void cli_warn_sink(void *quiet, const char *file, int64_t offset, const char *msg);
/* d->warn = cli_warn_sink, d->warn_opaque = quiet. */
void cli_warnings_on(struct diag *d, const bool *quiet);

/* `v` as JSON (jval.h), its objects sorted as qemu-img prints them, and a
 * newline on stdout.  -ENOMEM (nothing printed)
 * when memory ran out, else 0. */
int cli_print_json(struct jval *v);

/* Sort every object in v, recursively, into the order qemu-img prints its
 * JSON in (json_order.c); cli_print_json does it before printing. */
void cli_json_qemu_order(struct jval *v);

/* For a bad command line: message, then "Try 'diskimg CMD --help'". Returns 1. */
int cli_usage_error(const char *cmd, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Parse a size argument of option `opt`; prints the error itself. */
bool cli_size(const char *cmd, const char *opt, const char *s, uint64_t *out);

/* --output=human|json: 0 human, 1 json, -1 invalid (error printed). */
int cli_output_format(const char *cmd, const char *s);

/* A cache mode of -t (source false) or -T (source true) as qemu-img takes
 * them: none (or off), writeback, writethrough, directsync, unsafe.  The
 * canonical name ("off" is "none"), or NULL with qemu-img's message
 * ("Invalid cache option: X", "Invalid source cache option: X") printed. */
const char *cli_cache_mode(const char *mode, bool source);

/* Print `text` (a command's help) to stdout; returns 0. */
int cli_help(const char *text);

/* "Snapshot list:" and the table, from info()'s "snapshots" array. */
void cli_print_snapshots(const struct jval *snaps);

/* A name an image is to refer to (rebase -u's backing file, amend's data
 * file) must obey the reference rule even if it does not exist yet: inside
 * the image's folder (opened beneath it when it exists; else, as text, no
 * absolute name and no "..") unless the image was opened with
 * allow_external.  0, or a negative errno recorded in `d`. */
struct bd;
int cli_check_ref(struct bd *img, const char *name, struct diag *d);

extern const char *const cli_version_text;

#endif
