#include "util/strbuf.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void sb_init(struct strbuf *b)
{
    memset(b, 0, sizeof(*b));
}

/* Room for `n` more bytes and the NUL; false (buffer marked failed) if not. */
static bool reserve(struct strbuf *b, size_t n)
{
    if (b->failed)
        return false;
    if (n < b->cap - b->len)
        return true;
    if (n > SIZE_MAX / 2 - b->len - 1) {
        b->failed = true;
        return false;
    }
    size_t cap = b->cap ? b->cap : 256;
    while (cap - b->len <= n)
        cap *= 2;
    char *s = realloc(b->s, cap);
    if (!s) {
        b->failed = true;
        return false;
    }
    b->s = s;
    b->cap = cap;
    return true;
}

void sb_addc(struct strbuf *b, char c)
{
    if (!reserve(b, 1))
        return;
    b->s[b->len++] = c;
    b->s[b->len] = '\0';
}

void sb_adds(struct strbuf *b, const char *s)
{
    size_t n = strlen(s);

    if (!reserve(b, n))
        return;
    memcpy(b->s + b->len, s, n + 1);
    b->len += n;
}

void sb_addf(struct strbuf *b, const char *fmt, ...)
{
    char small[64];
    va_list ap;
    int n;

    va_start(ap, fmt);
    n = vsnprintf(small, sizeof(small), fmt, ap);
    va_end(ap);
    if (n < 0) {
        b->failed = true;
        return;
    }
    if ((size_t)n < sizeof(small)) {
        sb_adds(b, small);
        return;
    }
    if (!reserve(b, (size_t)n))
        return;
    va_start(ap, fmt);
    vsnprintf(b->s + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

char *sb_take(struct strbuf *b)
{
    char *s;

    if (!b->failed && !b->s)
        reserve(b, 0);
    if (b->failed) {
        sb_free(b);
        return NULL;
    }
    s = b->s;
    if (b->len == 0)
        s[0] = '\0';
    sb_init(b);
    return s;
}

void sb_free(struct strbuf *b)
{
    free(b->s);
    sb_init(b);
}
