/* check.h: the unit tests' assertion.  A failed CHECK prints where and
 * what, with an optional printf-style detail, counts the failure and goes
 * on, so that one run reports every failing case; main() returns 1 when
 * `failures` is not 0.
 *   CHECK(n == 3);
 *   CHECK(n == 3, "got %d for '%s'", n, spec);
 */
#ifndef DISKIMG_TEST_CHECK_H
#define DISKIMG_TEST_CHECK_H

#include <stdarg.h>
#include <stdio.h>

static int failures;

/* ": detail" and the end of the line.  fmt is " " followed by the CHECK's
 * format (the space keeps a CHECK without detail from passing an empty
 * format, which -Wformat warns about). */
__attribute__((format(printf, 1, 2), unused))
static void check_detail_(const char *fmt, ...)
{
    va_list ap;

    if (fmt[0] && fmt[1]) {
        fputs(": ", stderr);
        va_start(ap, fmt);
        vfprintf(stderr, fmt + 1, ap);
        va_end(ap);
    }
    fputc('\n', stderr);
}

/* " " __VA_ARGS__ joins a space to the detail's format literal, or stands
 * alone when there is no detail. */
#define CHECK(cond, ...)                                                      \
    do {                                                                      \
        if (!(cond)) {                                                        \
            fprintf(stderr, "%s:%d: CHECK(%s) failed", __FILE__, __LINE__, #cond); \
            check_detail_(" " __VA_ARGS__);                                    \
            failures++;                                                       \
        }                                                                     \
    } while (0)

#endif
