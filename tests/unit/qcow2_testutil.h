/* Minimal assertions for the qcow2 unit tests: count failures, report them
 * with file and line, exit non-zero at the end. */
#ifndef QCOW2_TESTUTIL_H
#define QCOW2_TESTUTIL_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/diag.h"

static int t_failures;

#define CHECK(cond) do { \
    if (!(cond)) { \
        fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
        t_failures++; \
    } \
} while (0)

/* The call failed (r < 0) and the recorded message contains `substr`. */
#define CHECK_FAIL(r, d, substr) do { \
    int r_ = (r); \
    if (r_ >= 0 || !strstr((d)->what, (substr))) { \
        fprintf(stderr, "%s:%d: expected failure containing \"%s\", got r=%d \"%s\"\n", \
                __FILE__, __LINE__, (substr), r_, (d)->what); \
        t_failures++; \
    } \
    diag_clear(d); \
} while (0)

#define CHECK_OK(r, d) do { \
    int r_ = (r); \
    if (r_ < 0) { \
        fprintf(stderr, "%s:%d: unexpected failure r=%d: %s\n", __FILE__, __LINE__, r_, \
                (d)->what); \
        t_failures++; \
    } \
    diag_clear(d); \
} while (0)

static inline int t_done(const char *name)
{
    if (t_failures) {
        fprintf(stderr, "%s: %d failure(s)\n", name, t_failures);
        return 1;
    }
    printf("%s: ok\n", name);
    return 0;
}

#endif
