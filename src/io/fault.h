/* fault: test-only failure injection for the I/O layer.
 *
 * DISKIMG_FAULT is a comma-separated list of rules `OP:N:WHAT`:
 *   OP    read | write | sync | punch
 *   N     the Nth call of that kind fails (1-based); `N+` fails it and every
 *         later one
 *   WHAT  an errno name (EIO, ENOSPC, EINTR, EAGAIN, ...), `short` (the
 *         transfer is cut to half its length, at least 1 byte), `zero`
 *         (cut to 0 bytes: the call makes no progress, as a read at EOF or
 *         a device that accepts nothing) or `delayMS` (the call proceeds
 *         after sleeping MS milliseconds, 1..60000: makes a conversion slow
 *         enough to interrupt it deterministically)
 * e.g. DISKIMG_FAULT=write:3:ENOSPC,read:1+:short,write:1+:delay50
 * Without the variable every call proceeds and the cost is one branch.
 * DISKIMG_FAULT_STATS=FILE counts the calls (with or without rules); the
 * program writes "read N write N sync N punch N" to FILE at exit
 * (fault_format_stats), so that a test can sweep N over every call a
 * conversion makes.
 * Callers must treat EINTR and short transfers as "retry the rest", so a
 * conversion under `read:1+:EINTR` must still succeed.  To make that
 * possible, the call that follows an injected EINTR or EAGAIN on the same
 * thread and of the same kind is the caller's retry: it always proceeds and
 * is not counted (so `write:1+:EINTR` fails every first attempt, and in
 * `write:1:EINTR,write:2:EIO` the EIO hits the second write, not the retry
 * of the first).  When several rules match a call, the first one listed wins.
 * A value that does not parse makes every call fail with EINVAL (a typo in
 * a test must not silently test nothing); fault_env_error() gives the
 * reason, and the program checks it at start-up to refuse to run.
 */
#ifndef DISKIMG_FAULT_H
#define DISKIMG_FAULT_H

#include <stdbool.h>
#include <stddef.h>

enum fault_op { FAULT_READ, FAULT_WRITE, FAULT_SYNC, FAULT_PUNCH, FAULT_NOPS };

/* 0: proceed with *len unchanged or shortened; <0: fail this call with that
 * errno (the caller must not perform the operation). */
int fault_inject(enum fault_op op, size_t *len);

/* True when any rule is active or calls are being counted. */
int fault_active(void);

/* -EINVAL with the reason (naming the rule) in `why` when DISKIMG_FAULT is
 * set but does not parse; 0 otherwise. */
int fault_env_error(char *why, size_t why_len);

/* The DISKIMG_FAULT_STATS file, or NULL when it is not set (or empty). */
const char *fault_stats_path(void);

/* "read N write N sync N punch N\n": the calls counted so far. */
void fault_format_stats(char *buf, size_t n);

/* One parsed rule. */
struct fault_rule {
    enum fault_op op;
    unsigned long nth;
    bool and_later;
    int err;              /* negative errno, or 0 for a short/zero transfer */
    bool zero;            /* `zero`: the transfer is cut to 0 bytes */
    unsigned delay_ms;    /* `delayMS`: sleep, then proceed */
};

#define FAULT_MAX_RULES 16

/* Parse a DISKIMG_FAULT value into at most `max` rules.  Returns the number
 * of rules, or -EINVAL with the reason (naming the rule) in `why`. */
int fault_parse(const char *spec, struct fault_rule *rules, int max,
                char *why, size_t why_len);

/* Tests only: re-read DISKIMG_FAULT and start counting from zero.  No I/O
 * may run concurrently. */
void fault_reset(void);

#endif
