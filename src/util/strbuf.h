/* strbuf: a growable NUL-terminated string, for text the library builds and
 * the program prints (JSON of jval.h).  Out of memory never aborts: the
 * buffer is marked failed, later appends do nothing, and sb_take() returns
 * NULL.
 */
#ifndef DISKIMG_STRBUF_H
#define DISKIMG_STRBUF_H

#include <stdbool.h>
#include <stddef.h>

struct strbuf {
    char *s;        /* NULL until the first append */
    size_t len;     /* bytes in s, without the NUL */
    size_t cap;     /* bytes allocated */
    bool failed;    /* an append ran out of memory */
};

void sb_init(struct strbuf *b);
void sb_addc(struct strbuf *b, char c);
void sb_adds(struct strbuf *b, const char *s);
void sb_addf(struct strbuf *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* The string (the caller frees it; "" when nothing was appended), or NULL
 * when an append failed.  The buffer is empty afterwards. */
char *sb_take(struct strbuf *b);

/* Drop the contents. */
void sb_free(struct strbuf *b);

#endif
