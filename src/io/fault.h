/* fault: test-only failure injection for the I/O layer.
 *
 * DISKIMG_FAULT is a comma-separated list of rules `OP:N:WHAT`:
 *   OP    read | write | sync | punch
 *   N     the Nth call of that kind fails (1-based); `N+` fails it and every
 *         later one
 *   WHAT  an errno name (EIO, ENOSPC, EINTR, EAGAIN, ...), `short`
 *         (the transfer is cut to half its length, at least 1 byte) or
 *         `delayMS` (the call proceeds after sleeping MS milliseconds:
 *         makes a conversion slow enough to interrupt it deterministically)
 * e.g. DISKIMG_FAULT=write:3:ENOSPC,read:1+:short,write:1+:delay50
 * Without the variable every call proceeds and the cost is one branch.
 * DISKIMG_FAULT_STATS=FILE counts the calls (with or without rules) and
 * writes "read N write N sync N punch N" to FILE at exit, so that a test
 * can sweep N over every call a conversion makes.
 * Callers must treat EINTR and short transfers as "retry the rest", so a
 * conversion under `read:1+:EINTR` must still succeed (`N+:EINTR` fails
 * every other call from the Nth, so that each retry gets through).
 */
#ifndef DISKIMG_FAULT_H
#define DISKIMG_FAULT_H

#include <stddef.h>

enum fault_op { FAULT_READ, FAULT_WRITE, FAULT_SYNC, FAULT_PUNCH, FAULT_NOPS };

/* 0: proceed with *len unchanged or shortened; <0: fail this call with that
 * errno (the caller must not perform the operation). */
int fault_inject(enum fault_op op, size_t *len);

/* True when any rule is active (lets callers skip fast paths). */
int fault_active(void);

#endif
