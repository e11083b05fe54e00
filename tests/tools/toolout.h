/* Output of the test tools, as the program prints it (the library never
 * prints): a recorded failure on stderr, a JSON tree on stdout. */
#ifndef DISKIMG_TOOLOUT_H
#define DISKIMG_TOOLOUT_H

#include <stdio.h>
#include <stdlib.h>

#include "util/diag.h"
#include "util/jval.h"

/* "diskimg: FILE: what (offset N)" and a newline on stderr. */
static inline void tool_report(const struct diag *d)
{
    char buf[2048];

    diag_format(d, buf, sizeof(buf));
    fprintf(stderr, "diskimg: %s\n", buf);
}

/* `v` as JSON and a newline on stdout; -1 (message on stderr) when memory
 * ran out. */
static inline int tool_print_json(const struct jval *v)
{
    char *text = jv_to_json(v, 0);

    if (!text) {
        fputs("out of memory\n", stderr);
        return -1;
    }
    fputs(text, stdout);
    putchar('\n');
    free(text);
    return 0;
}

#endif
